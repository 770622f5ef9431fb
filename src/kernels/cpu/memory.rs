//! Partition-view access to parameter memory: loads, stores, masks and
//! atomic updates with the reference documents' semantics.
//!
//! Partition `I` of a view covers the span indices `p(I, J) = I * S + J` for
//! `J` in the tile shape `S`. Elements whose `p(I, J)` lies outside the
//! span's extents are the *masked* ones: masked loads give the view's
//! padding there, masked stores and atomics skip them, and the unmasked forms
//! are refused with an error when any exists. The in-bounds part of a
//! partition is always a box `[a_0, b_0) x ... x [a_n, b_n)` of the tile
//! (`a` above zero only in a window, see [`View`]), so every access is a copy
//! of that box, done row by row along the innermost axis
//! after merging axes that are contiguous both in the tile and in memory.

use super::buffer::{malformed, Bits, BitsMut, Buf, ScalarBits};
use super::elementwise::Num;
use super::shape_ops::walk;
use crate::dtype::{DType, Scalar};
use crate::error::{dims, Error, Result};
use crate::kernels::ir::{AtomicOp, Param, View};
use bytemuck::Pod;
use half::{bf16, f16};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::shape::MAX_RANK;

mod scatter;

/// A parameter's memory as the worker threads share it.
///
/// Soundness: the pointer comes from an argument borrowed for the whole
/// execution (`&HostBuffer` for read-only parameters, `&mut HostBuffer` for
/// written ones), so it stays valid while workers run. Every access goes
/// through a [`ViewPlan`] whose span was checked to lie inside the buffer,
/// and only to elements inside the span's extents. Read-only memory is never
/// written: the executor refuses programs that store to a view of a
/// parameter passed as [`Arg::Read`](super::Arg::Read). Different grid points
/// write disjoint elements with plain stores (the verifier guarantees that
/// non-atomic stores of different grid points do not overlap, and the
/// executor refuses stores through views with a broadcast axis), and shared
/// elements are updated only through atomics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedMem {
    pub ptr: *mut u8,
    pub len: usize,
    pub dtype: DType,
    pub writable: bool,
}

// SAFETY: see the type's documentation: the memory outlives the execution and
// concurrent accesses touch disjoint elements or are atomic.
unsafe impl Send for SharedMem {}
// SAFETY: as above.
unsafe impl Sync for SharedMem {}

/// A view checked against its parameter's memory, ready for accesses.
#[derive(Debug)]
pub(crate) struct ViewPlan {
    mem: SharedMem,
    extents: [u64; MAX_RANK],
    strides: [i64; MAX_RANK],
    tile: [u64; MAX_RANK],
    space: [u64; MAX_RANK],
    rank: usize,
    /// The element offset of index zero (negative for some windows).
    offset: i64,
    lower: [u64; MAX_RANK],
    upper: [u64; MAX_RANK],
    numel: usize,
    pad: ScalarBits,
}

/// The in-bounds box of one partition, with contiguous axes merged.
struct Region {
    /// Whether the whole tile is in bounds.
    full: bool,
    /// Whether no element is.
    empty: bool,
    /// Element offset in memory of the box's first element.
    base: i64,
    /// Position in the tile of the box's first element.
    tile_base: i64,
    /// Merged axes, outermost first: (length, memory stride, tile stride).
    axes: [(usize, i64, i64); MAX_RANK],
    rank: usize,
}

impl ViewPlan {
    /// Checks `view` of `param` against `mem` and precomputes its layout.
    pub fn new(view: &View, param: &Param, mem: SharedMem, stored: bool) -> Result<ViewPlan> {
        let rank = view.extents.len();
        if view.strides.len() != rank || view.tile.len() != rank || rank > MAX_RANK {
            return Err(malformed(format!(
                "a view of `{}` has {} extents, {} strides and tile rank {} (at most {MAX_RANK} axes, all equal)",
                param.name,
                rank,
                view.strides.len(),
                view.tile.len()
            )));
        }
        if view.tile.contains(&0) {
            return Err(malformed(format!("a view of `{}` has an empty tile axis", param.name)));
        }
        let as_dims = |xs: &[u64]| dims(&xs.iter().map(|&x| x as usize).collect::<Vec<_>>());
        let strides_isize = || view.strides.iter().map(|&s| s as isize).collect::<Vec<_>>();
        if view.padding.needs_float() && !param.dtype.is_float() {
            return Err(Error::UnsupportedDType {
                op: "partition view padding",
                dtype: param.dtype,
                reason: "only floating-point views have -0, NaN or infinite padding",
            });
        }
        if stored && view.extents.iter().zip(&view.strides).any(|(&e, &s)| e > 1 && s == 0) {
            return Err(Error::NotInjective {
                op: "kernel store",
                extents: as_dims(&view.extents),
                strides: strides_isize(),
            });
        }
        // Every index inside the extents must address an element of the buffer.
        if view.lower.len() > rank || view.upper.len() > rank || (0..rank).any(|k| view.upper(k) > view.extents[k]) {
            return Err(malformed(format!(
                "a view of `{}` has a window that does not fit its extents",
                param.name
            )));
        }
        if (0..rank).all(|k| view.lower(k) < view.upper(k)) {
            let (mut lo, mut hi) = (view.offset as i128, view.offset as i128);
            for (k, &s) in view.strides.iter().enumerate() {
                let reach = (view.upper(k) as i128 - view.lower(k) as i128 - 1) * s as i128;
                if reach < 0 {
                    lo += reach;
                } else {
                    hi += reach;
                }
            }
            if lo < 0 || hi >= param.len as i128 || hi >= mem.len as i128 {
                return Err(Error::SpanOutOfMemory {
                    op: "kernel partition view",
                    extents: as_dims(&view.extents),
                    strides: strides_isize(),
                    needed: if lo < 0 { 0 } else { (hi + 1) as usize },
                    len: mem.len,
                });
            }
        }
        let mut plan = ViewPlan {
            mem,
            extents: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            tile: [0; MAX_RANK],
            space: [0; MAX_RANK],
            rank,
            offset: i64::try_from(view.origin())
                .map_err(|_| malformed(format!("a view of `{}` starts beyond 64-bit offsets", param.name)))?,
            lower: [0; MAX_RANK],
            upper: [0; MAX_RANK],
            numel: view.tile.iter().map(|&t| t as usize).product(),
            pad: ScalarBits::new(Scalar::Float(view.padding.value(), DType::F64), param.dtype),
        };
        for k in 0..rank {
            plan.extents[k] = view.extents[k];
            plan.lower[k] = view.lower(k);
            plan.upper[k] = view.upper(k);
            plan.strides[k] = view.strides[k];
            plan.tile[k] = view.tile[k] as u64;
            plan.space[k] = view.extents[k].div_ceil(view.tile[k] as u64);
        }
        Ok(plan)
    }

    /// The in-bounds box of partition `part`, checking it against the index
    /// space and, unless `masked`, that the whole partition is in bounds.
    fn region(&self, part: &[u64], masked: bool, op: &'static str) -> Result<Region> {
        let rank = self.rank;
        let described = |xs: &[u64]| dims(&xs.iter().map(|&x| x as usize).collect::<Vec<_>>());
        if part.len() != rank {
            return Err(Error::RankMismatch {
                op,
                given: part.len(),
                rank,
                extents: described(&self.extents[..rank]),
                tile: described(&self.tile[..rank]),
            });
        }
        let mut valid = [0u64; MAX_RANK];
        let mut full = true;
        let mut empty = false;
        let mut base = self.offset;
        let mut tile_base = 0i64;
        let mut tile_stride = self.numel as i64;
        for k in 0..rank {
            if part[k] >= self.space[k] {
                return Err(Error::PartitionOutOfRange {
                    op,
                    index: described(part),
                    space: described(&self.space[..rank]),
                    extents: described(&self.extents[..rank]),
                    tile: described(&self.tile[..rank]),
                });
            }
            let start = part[k] * self.tile[k];
            // The box along axis k: tile positions `skip .. end`.
            let skip = self.lower[k].saturating_sub(start).min(self.tile[k]);
            let end = self.tile[k].min(self.upper[k].saturating_sub(start));
            valid[k] = end.saturating_sub(skip);
            full &= valid[k] == self.tile[k];
            empty |= valid[k] == 0;
            tile_stride /= self.tile[k] as i64;
            tile_base += skip as i64 * tile_stride;
            base += (start + skip) as i64 * self.strides[k];
        }
        if !full && !masked {
            return Err(Error::PartlyOutOfBounds {
                op,
                index: described(part),
                extents: described(&self.extents[..rank]),
                tile: described(&self.tile[..rank]),
            });
        }
        let mut region = Region {
            full,
            empty,
            base,
            tile_base,
            axes: [(0, 0, 0); MAX_RANK],
            rank: 0,
        };
        let mut tile_stride = self.numel;
        for (k, &valid) in valid[..rank].iter().enumerate() {
            tile_stride /= self.tile[k] as usize;
            let (len, ms, ts) = (valid as usize, self.strides[k], tile_stride as i64);
            if len == 1 {
                continue;
            }
            if region.rank > 0 {
                let outer = &mut region.axes[region.rank - 1];
                if outer.2 == ts * len as i64 && outer.1 == ms * len as i64 {
                    *outer = (outer.0 * len, ms, ts);
                    continue;
                }
            }
            region.axes[region.rank] = (len, ms, ts);
            region.rank += 1;
        }
        Ok(region)
    }

    /// Checks that `tile` holds one partition of this view's dtype.
    fn check_tile(&self, tile: &Buf, op: &str) -> Result<()> {
        let len = match tile.bits() {
            Bits::B1(v) => v.len(),
            Bits::B2(v) => v.len(),
            Bits::B4(v) => v.len(),
            Bits::B8(v) => v.len(),
        };
        if tile.dtype() != self.mem.dtype || len != self.numel {
            return Err(malformed(format!(
                "{op} of a {} tile of {len} elements through a {} view with {}-element tiles",
                tile.dtype(),
                self.mem.dtype,
                self.numel
            )));
        }
        Ok(())
    }

    /// The address of the partition's first element if the partition is
    /// whole and one contiguous run of memory in tile order.
    fn contiguous(&self, region: &Region) -> Option<*mut u8> {
        let whole_run = region.full && region.rank == 1 && region.axes[0] == (self.numel, 1, 1);
        // SAFETY: the region lies in the buffer (checked in `ViewPlan::new`).
        whole_run.then(|| unsafe { self.mem.ptr.add(region.base as usize * self.mem.dtype.size_in_bytes()) })
    }

    /// Where a tile to be stored to partition `part` can be computed in
    /// place: the partition's memory if it is whole, contiguous, writable and
    /// of the tile's dtype and length. Bad partitions give `None` and are
    /// reported by the store itself.
    pub fn store_in_place(&self, part: &[u64], masked: bool, tile: &Buf) -> Option<*mut u8> {
        let region = self.region(part, masked, "kernel store").ok()?;
        self.check_tile(tile, "store").ok()?;
        self.contiguous(&region).filter(|_| self.mem.writable)
    }

    /// Loads partition `part` into `dst`, or, if the partition is whole
    /// and in read-only memory and its leading axes have stride 0 over one
    /// contiguous run of `period` elements, makes `dst` read that run in
    /// place and returns `Some(period)`.
    pub fn load_period(&self, part: &[u64], masked: bool, dst: &mut Buf) -> Result<Option<usize>> {
        let region = self.region(part, masked, "kernel load")?;
        // The tile is overwritten whole, so a borrow from the last load ends here.
        dst.release();
        self.check_tile(dst, "load")?;
        let [(_, 0, outer), (period, 1, 1)] = region.axes[..region.rank] else {
            return self.load(part, masked, dst).map(|()| None);
        };
        if !region.full || self.mem.writable || outer != period as i64 {
            return self.load(part, masked, dst).map(|()| None);
        }
        // SAFETY: as for the zero-copy load in `load`: the run lies in the
        // buffer, which nothing writes while frames live.
        unsafe {
            let ptr = self.mem.ptr.add(region.base as usize * self.mem.dtype.size_in_bytes());
            dst.borrow(ptr, period, false);
        }
        Ok(Some(period))
    }

    /// Loads partition `part` into `dst`.
    pub fn load(&self, part: &[u64], masked: bool, dst: &mut Buf) -> Result<()> {
        let region = self.region(part, masked, "kernel load")?;
        // The tile is overwritten whole, so a borrow from the last load ends here.
        dst.release();
        self.check_tile(dst, "load")?;
        if let (Some(ptr), false) = (self.contiguous(&region), self.mem.writable) {
            // A whole contiguous partition of read-only memory: the tile reads
            // it in place. SAFETY: the partition lies in the buffer, which is
            // borrowed immutably for the whole execution, so nothing writes it
            // while frames live.
            unsafe { dst.borrow(ptr, self.numel, false) };
            return Ok(());
        }
        match dst.bits_mut() {
            BitsMut::B1(d) => self.load_typed(&region, d),
            BitsMut::B2(d) => self.load_typed(&region, d),
            BitsMut::B4(d) => self.load_typed(&region, d),
            BitsMut::B8(d) => self.load_typed(&region, d),
        }
        Ok(())
    }

    fn load_typed<T: Pod>(&self, region: &Region, dst: &mut [T]) {
        if !region.full {
            dst.fill(self.pad.get());
        }
        let mem = self.mem.ptr as *const T;
        region.for_each_row(|t, m, (len, ms, ts)| {
            let row = &mut dst[t..t + (len - 1) * ts + 1];
            // SAFETY: the region holds only in-bounds elements, which lie in
            // the buffer (checked in `ViewPlan::new`); `m + i * ms` are their offsets.
            unsafe {
                let src = mem.offset(m as isize);
                match (ms, ts) {
                    (1, 1) => std::ptr::copy_nonoverlapping(src, row.as_mut_ptr(), len),
                    (0, 1) => row.fill(*src),
                    _ => {
                        for i in 0..len {
                            row[i * ts] = *src.offset(i as isize * ms as isize);
                        }
                    }
                }
            }
        });
    }

    /// Loads partition `part` with each element moved `at[j] * stride`
    /// elements in memory ([`Inst::Gather`](crate::kernels::ir::Inst::Gather)):
    /// elements outside the extents, and those whose position is outside
    /// `0 .. bound`, take the padding. Returns whether some element inside
    /// the extents had a position out of range.
    pub fn gather(&self, part: &[u64], at: &Buf, stride: i64, bound: u64, dst: &mut Buf) -> Result<bool> {
        let region = self.region(part, true, "kernel gather")?;
        dst.release();
        self.check_tile(dst, "gather")?;
        let positions = Positions::of(at)?;
        if positions.len() != self.numel {
            return Err(malformed(format!(
                "gather positions of {} elements for {}-element partitions",
                positions.len(),
                self.numel
            )));
        }
        let (step, bound) = (stride, bound.min(i64::MAX as u64) as i64);
        Ok(match dst.bits_mut() {
            BitsMut::B1(d) => self.gather_typed(&region, &positions, step, bound, d),
            BitsMut::B2(d) => self.gather_typed(&region, &positions, step, bound, d),
            BitsMut::B4(d) => self.gather_typed(&region, &positions, step, bound, d),
            BitsMut::B8(d) => self.gather_typed(&region, &positions, step, bound, d),
        })
    }

    fn gather_typed<T: Pod>(&self, region: &Region, at: &Positions, stride: i64, bound: i64, dst: &mut [T]) -> bool {
        let pad: T = self.pad.get();
        dst.fill(pad);
        let mem = self.mem.ptr as *const T;
        let len = self.mem.len as i64;
        let mut bad = false;
        region.for_each_row(|t, m, (n, ms, ts)| {
            for i in 0..n {
                let j = t + i * ts;
                let p = at.get(j);
                if !(0..bound).contains(&p) {
                    bad = true;
                    continue;
                }
                let e = m + i as i64 * ms + p * stride;
                // The verifier bounds the gathered span by the buffer; the
                // check keeps every read inside it regardless.
                if (0..len).contains(&e) {
                    // SAFETY: `e` is an element of the buffer (just checked).
                    dst[j] = unsafe { *mem.offset(e as isize) };
                }
            }
        });
        bad
    }

    /// Stores `src` to partition `part`.
    pub fn store(&self, part: &[u64], masked: bool, src: &Buf) -> Result<()> {
        let region = self.region(part, masked, "kernel store")?;
        self.check_tile(src, "store")?;
        if !self.mem.writable {
            return Err(malformed("store to a read-only parameter".into()));
        }
        if src.borrowed_ptr().is_some() && src.borrowed_ptr() == self.contiguous(&region) {
            // The tile was computed in place (`store_in_place`).
            return Ok(());
        }
        match src.bits() {
            Bits::B1(s) => self.store_typed(&region, s),
            Bits::B2(s) => self.store_typed(&region, s),
            Bits::B4(s) => self.store_typed(&region, s),
            Bits::B8(s) => self.store_typed(&region, s),
        }
        Ok(())
    }

    fn store_typed<T: Pod>(&self, region: &Region, src: &[T]) {
        let mem = self.mem.ptr as *mut T;
        region.for_each_row(|t, m, (len, ms, ts)| {
            let row = &src[t..t + (len - 1) * ts + 1];
            // SAFETY: as in `load_typed`; the memory is writable (checked
            // above) and no other grid point stores to these elements.
            unsafe {
                let dst = mem.offset(m as isize);
                if (ms, ts) == (1, 1) {
                    std::ptr::copy_nonoverlapping(row.as_ptr(), dst, len);
                } else {
                    for i in 0..len {
                        *dst.offset(i as isize * ms as isize) = row[i * ts];
                    }
                }
            }
        });
    }

    /// Writes into `dst` (a bool tile) which elements of partition `part` are in bounds.
    pub fn in_bounds(&self, part: &[u64], dst: &mut [u8]) -> Result<()> {
        let region = self.region(part, true, "kernel in_bounds")?;
        if dst.len() != self.numel {
            return Err(malformed(format!(
                "in_bounds into a tile of {} elements for {}-element partitions",
                dst.len(),
                self.numel
            )));
        }
        if region.full {
            dst.fill(1);
            return Ok(());
        }
        dst.fill(0);
        region.for_each_row(|t, _, (len, _, ts)| {
            for i in 0..len {
                dst[t + i * ts] = 1;
            }
        });
        Ok(())
    }

    /// Applies `op` atomically to each in-bounds element of partition `part`
    /// with the matching element of `src`.
    pub fn atomic(&self, op: AtomicOp, part: &[u64], masked: bool, src: &Buf) -> Result<()> {
        let region = self.region(part, masked, "kernel atomic")?;
        self.check_tile(src, "atomic update")?;
        if !self.mem.writable {
            return Err(malformed("atomic update of a read-only parameter".into()));
        }
        match src {
            Buf::I32(s) => self.atomic_typed(&region, op, s),
            Buf::I64(s) => self.atomic_typed(&region, op, s),
            Buf::U32(s) => self.atomic_typed(&region, op, s),
            Buf::F16(s) => self.atomic_typed(&region, op, s),
            Buf::BF16(s) => self.atomic_typed(&region, op, s),
            Buf::F32(s) => self.atomic_typed(&region, op, s),
            Buf::F64(s) => self.atomic_typed(&region, op, s),
            other => Err(Error::UnsupportedDType {
                op: "kernel atomic",
                dtype: other.dtype(),
                reason: "atomics take 32/64-bit integers or floats",
            }),
        }
    }

    fn atomic_typed<T: AtomicElem>(&self, region: &Region, op: AtomicOp, src: &[T]) -> Result<()> {
        if !T::supports(op) {
            return Err(Error::UnsupportedDType {
                op: "kernel atomic",
                dtype: self.mem.dtype,
                reason: "bitwise atomics take integers; floats take add, sub, max and min",
            });
        }
        let mem = self.mem.ptr as *mut T;
        region.for_each_row(|t, m, (len, ms, ts)| {
            for i in 0..len {
                // SAFETY: as in `store_typed`; the element is aligned (buffers
                // are 8-byte aligned) and all concurrent accesses are atomic.
                unsafe { T::update(mem.offset(m as isize + i as isize * ms as isize), op, src[t + i * ts]) };
            }
        });
        Ok(())
    }
}

impl Region {
    /// Calls `f(tile_offset, memory_offset, (len, memory_stride, tile_stride))`
    /// for each row of the box along its innermost merged axis.
    fn for_each_row(&self, mut f: impl FnMut(usize, i64, (usize, i64, usize))) {
        if self.empty {
            return;
        }
        let Some((&(len, ms, ts), outer)) = self.axes[..self.rank].split_last() else {
            f(self.tile_base as usize, self.base, (1, 1, 1));
            return;
        };
        walk(outer, (self.base, self.tile_base), |m, t| {
            f(t as usize, m, (len, ms, ts as usize))
        });
    }
}

/// An element type with relaxed atomic read-modify-write updates.
pub(crate) trait AtomicElem: Pod {
    /// Whether `op` is defined for this type.
    fn supports(op: AtomicOp) -> bool;
    /// Applies `op` with `v` to the element at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid, aligned, and accessed concurrently only atomically.
    unsafe fn update(ptr: *mut Self, op: AtomicOp, v: Self);
}

macro_rules! atomic_int {
    ($($t:ty => $atomic:ty),*) => {$(
        impl AtomicElem for $t {
            fn supports(_: AtomicOp) -> bool {
                true
            }
            unsafe fn update(ptr: *mut $t, op: AtomicOp, v: $t) {
                let a = <$atomic>::from_ptr(ptr);
                match op {
                    AtomicOp::And => a.fetch_and(v, Relaxed),
                    AtomicOp::Or => a.fetch_or(v, Relaxed),
                    AtomicOp::Xor => a.fetch_xor(v, Relaxed),
                    AtomicOp::Max => a.fetch_max(v, Relaxed),
                    AtomicOp::Min => a.fetch_min(v, Relaxed),
                    AtomicOp::Add => a.fetch_add(v, Relaxed),
                    AtomicOp::Sub => a.fetch_sub(v, Relaxed),
                };
            }
        }
    )*};
}
atomic_int!(i32 => AtomicI32, i64 => AtomicI64, u32 => AtomicU32);

/// `op(old, v)` for the float atomics, computed in `C` (f32 for f16/bf16).
fn float_combine<C: Num>(op: AtomicOp, old: C, v: C) -> C {
    match op {
        AtomicOp::Add => old.add(v),
        AtomicOp::Sub => old.sub(v),
        AtomicOp::Max => old.maximum(v),
        _ => old.minimum(v),
    }
}

macro_rules! atomic_float {
    ($($t:ty => $atomic:ty, $bits:ty, $to:expr, $from:expr);*) => {$(
        impl AtomicElem for $t {
            fn supports(op: AtomicOp) -> bool {
                matches!(op, AtomicOp::Add | AtomicOp::Sub | AtomicOp::Max | AtomicOp::Min)
            }
            unsafe fn update(ptr: *mut $t, op: AtomicOp, v: $t) {
                let a = <$atomic>::from_ptr(ptr as *mut $bits);
                let mut old = a.load(Relaxed);
                loop {
                    let x: $t = bytemuck::cast(old);
                    let new: $bits = bytemuck::cast::<$t, $bits>($from(float_combine(op, $to(x), $to(v))));
                    match a.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                        Ok(_) => return,
                        Err(seen) => old = seen,
                    }
                }
            }
        }
    )*};
}
atomic_float!(
    f32 => AtomicU32, u32, |x: f32| x, |x: f32| x;
    f64 => AtomicU64, u64, |x: f64| x, |x: f64| x;
    f16 => AtomicU16, u16, f16::to_f32, f16::from_f32;
    bf16 => AtomicU16, u16, bf16::to_f32, bf16::from_f32
);

/// The integer positions of a gather, read as `i64` whatever their dtype.
enum Positions<'a> {
    U8(&'a [u8]),
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
}

impl<'a> Positions<'a> {
    fn of(at: &'a Buf) -> Result<Positions<'a>> {
        Ok(match at {
            Buf::U8(v) => Positions::U8(v),
            Buf::I32(v) => Positions::I32(v),
            Buf::U32(v) => Positions::U32(v),
            Buf::I64(v) => Positions::I64(v),
            other => {
                return Err(malformed(format!(
                    "gather positions must be integers, not {}",
                    other.dtype()
                )))
            }
        })
    }

    fn len(&self) -> usize {
        match self {
            Positions::U8(v) => v.len(),
            Positions::I32(v) => v.len(),
            Positions::U32(v) => v.len(),
            Positions::I64(v) => v.len(),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            Positions::U8(v) => v[i] as i64,
            Positions::I32(v) => v[i] as i64,
            Positions::U32(v) => v[i] as i64,
            Positions::I64(v) => v[i],
        }
    }
}
