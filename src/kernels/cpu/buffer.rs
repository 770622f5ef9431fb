//! Typed tile buffers: the storage of one SSA value or accumulator.
//!
//! A [`Buf`] holds the elements of one tile in a `Vec` of the dtype's Rust
//! type (bool as `u8`). Kernels get typed slices through [`Elem`] once per
//! instruction, and copy-only instructions (loads, stores, selects,
//! broadcasts) go through the element's bit pattern ([`Bits`]), so they are
//! compiled once per element size rather than once per dtype.
//!
//! A tile's elements live in a [`Slab`]: normally the buffer's own vector,
//! but a load of a whole contiguous partition of read-only memory makes the
//! slab point at that memory instead of copying it (a *zero-copy load*), and
//! a tile whose only use is a store of a whole contiguous partition is
//! computed straight into that memory (a *forwarded store*). Writing through
//! a read-only slab ([`DerefMut`]) drops its borrow and hands out the slab's
//! own vector, so every instruction that writes a tile must write all of it,
//! as they all do.

use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use bytemuck::Pod;
use half::{bf16, f16};
use std::ops::{Deref, DerefMut};

/// The storage of one tile's elements: its own vector, or borrowed
/// parameter memory (read-only after a zero-copy load, writable when the
/// tile's only use is a store to that memory).
#[derive(Debug, Clone)]
pub(crate) struct Slab<T> {
    owned: Vec<T>,
    /// The borrowed elements (pointer, length, writable), used instead of
    /// `owned` while set.
    borrowed: Option<(*mut T, usize, bool)>,
}

impl<T> Slab<T> {
    fn new(owned: Vec<T>) -> Slab<T> {
        Slab { owned, borrowed: None }
    }

    /// Makes the slab use `len` elements at `ptr`: read-only until it is
    /// next written, or `writable` until the next borrow or [`Slab::release`].
    ///
    /// # Safety
    /// `ptr` must be valid and aligned for reading (and if `writable`,
    /// writing) `len` elements; while the slab may use them, no one else may
    /// write that memory, nor (if `writable`) read it.
    unsafe fn borrow(&mut self, ptr: *mut T, len: usize, writable: bool) {
        self.borrowed = Some((ptr, len, writable));
    }

    fn release(&mut self) {
        self.borrowed = None;
    }

    fn borrowed_ptr(&self) -> Option<*mut T> {
        self.borrowed.map(|b| b.0)
    }

    fn borrow_state(&self) -> Borrow {
        self.borrowed.map(|(ptr, len, writable)| (ptr.cast(), len, writable))
    }
}

/// What a tile borrows: memory, element count and whether it is writable.
pub(crate) type Borrow = Option<(*mut u8, usize, bool)>;

impl<T> Deref for Slab<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self.borrowed {
            // SAFETY: guaranteed by the caller of `Slab::borrow`.
            Some((ptr, len, _)) => unsafe { std::slice::from_raw_parts(ptr, len) },
            None => &self.owned,
        }
    }
}

impl<T> DerefMut for Slab<T> {
    /// The elements to overwrite: the writable borrowed memory, or else the
    /// slab's own vector (dropping a read-only borrow).
    fn deref_mut(&mut self) -> &mut [T] {
        match self.borrowed {
            // SAFETY: guaranteed by the caller of `Slab::borrow`.
            Some((ptr, len, true)) => unsafe { std::slice::from_raw_parts_mut(ptr, len) },
            _ => {
                self.borrowed = None;
                &mut self.owned
            }
        }
    }
}

/// The elements of one tile.
#[derive(Debug, Clone)]
pub(crate) enum Buf {
    Bool(Slab<u8>),
    U8(Slab<u8>),
    I32(Slab<i32>),
    I64(Slab<i64>),
    U32(Slab<u32>),
    F16(Slab<f16>),
    BF16(Slab<bf16>),
    F32(Slab<f32>),
    F64(Slab<f64>),
}

impl Buf {
    /// A tile of `len` elements of `dtype`, all bits zero, or
    /// [`Error::HostOutOfMemory`] (naming `execute`) if the allocator
    /// refuses it.
    pub fn try_zeros(dtype: DType, len: usize) -> Result<Buf> {
        fn zeroed<T: bytemuck::Zeroable>(dtype: DType, len: usize) -> Result<Slab<T>> {
            let v = bytemuck::allocation::try_zeroed_vec(len).map_err(|()| Error::HostOutOfMemory {
                op: "execute",
                bytes: len.saturating_mul(dtype.size_in_bytes()),
                shape: vec![len],
                dtype,
            })?;
            Ok(Slab::new(v))
        }
        Ok(match dtype {
            DType::Bool => Buf::Bool(zeroed(dtype, len)?),
            DType::U8 => Buf::U8(zeroed(dtype, len)?),
            DType::I32 => Buf::I32(zeroed(dtype, len)?),
            DType::I64 => Buf::I64(zeroed(dtype, len)?),
            DType::U32 => Buf::U32(zeroed(dtype, len)?),
            DType::F16 => Buf::F16(zeroed(dtype, len)?),
            DType::BF16 => Buf::BF16(zeroed(dtype, len)?),
            DType::F32 => Buf::F32(zeroed(dtype, len)?),
            DType::F64 => Buf::F64(zeroed(dtype, len)?),
        })
    }

    /// An empty placeholder, left in a slot while its buffer is borrowed out.
    pub fn placeholder() -> Buf {
        Buf::Bool(Slab::new(Vec::new()))
    }

    /// Makes the tile use `len` elements of memory at `ptr` instead of its
    /// own buffer: read-only until it is next written, or `writable` until
    /// the next borrow or [`Buf::release`].
    ///
    /// # Safety
    /// As [`Slab::borrow`], for elements of the tile's dtype.
    pub unsafe fn borrow(&mut self, ptr: *mut u8, len: usize, writable: bool) {
        match self {
            Buf::Bool(v) | Buf::U8(v) => v.borrow(ptr, len, writable),
            Buf::I32(v) => v.borrow(ptr.cast(), len, writable),
            Buf::I64(v) => v.borrow(ptr.cast(), len, writable),
            Buf::U32(v) => v.borrow(ptr.cast(), len, writable),
            Buf::F16(v) => v.borrow(ptr.cast(), len, writable),
            Buf::BF16(v) => v.borrow(ptr.cast(), len, writable),
            Buf::F32(v) => v.borrow(ptr.cast(), len, writable),
            Buf::F64(v) => v.borrow(ptr.cast(), len, writable),
        }
    }

    /// Makes the tile use its own buffer again.
    pub fn release(&mut self) {
        match self {
            Buf::Bool(v) | Buf::U8(v) => v.release(),
            Buf::I32(v) => v.release(),
            Buf::I64(v) => v.release(),
            Buf::U32(v) => v.release(),
            Buf::F16(v) => v.release(),
            Buf::BF16(v) => v.release(),
            Buf::F32(v) => v.release(),
            Buf::F64(v) => v.release(),
        }
    }

    /// What the tile borrows now, for [`Buf::restore`].
    pub fn borrow_state(&self) -> Borrow {
        match self {
            Buf::Bool(v) | Buf::U8(v) => v.borrow_state(),
            Buf::I32(v) => v.borrow_state(),
            Buf::I64(v) => v.borrow_state(),
            Buf::U32(v) => v.borrow_state(),
            Buf::F16(v) => v.borrow_state(),
            Buf::BF16(v) => v.borrow_state(),
            Buf::F32(v) => v.borrow_state(),
            Buf::F64(v) => v.borrow_state(),
        }
    }

    /// Makes the tile borrow what [`Buf::borrow_state`] said it did.
    ///
    /// # Safety
    /// As [`Buf::borrow`], for a borrowed `state`.
    pub unsafe fn restore(&mut self, state: Borrow) {
        match state {
            Some((ptr, len, writable)) => self.borrow(ptr, len, writable),
            None => self.release(),
        }
    }

    /// The address of the tile's first element (of its borrowed memory or
    /// its own buffer), for reading.
    pub fn start(&self) -> *const u8 {
        match self.bits() {
            Bits::B1(v) => v.as_ptr(),
            Bits::B2(v) => v.as_ptr().cast(),
            Bits::B4(v) => v.as_ptr().cast(),
            Bits::B8(v) => v.as_ptr().cast(),
        }
    }

    /// The address of the tile's first element for writing: writable
    /// borrowed memory, or else its own buffer (ending a read-only borrow).
    pub fn start_mut(&mut self) -> *mut u8 {
        match self.bits_mut() {
            BitsMut::B1(v) => v.as_mut_ptr(),
            BitsMut::B2(v) => v.as_mut_ptr().cast(),
            BitsMut::B4(v) => v.as_mut_ptr().cast(),
            BitsMut::B8(v) => v.as_mut_ptr().cast(),
        }
    }

    /// The memory the tile borrows, if any.
    pub fn borrowed_ptr(&self) -> Option<*mut u8> {
        match self {
            Buf::Bool(v) | Buf::U8(v) => v.borrowed_ptr(),
            Buf::I32(v) => v.borrowed_ptr().map(<*mut i32>::cast),
            Buf::I64(v) => v.borrowed_ptr().map(<*mut i64>::cast),
            Buf::U32(v) => v.borrowed_ptr().map(<*mut u32>::cast),
            Buf::F16(v) => v.borrowed_ptr().map(<*mut f16>::cast),
            Buf::BF16(v) => v.borrowed_ptr().map(<*mut bf16>::cast),
            Buf::F32(v) => v.borrowed_ptr().map(<*mut f32>::cast),
            Buf::F64(v) => v.borrowed_ptr().map(<*mut f64>::cast),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self.bits() {
            Bits::B1(v) => v.len(),
            Bits::B2(v) => v.len(),
            Bits::B4(v) => v.len(),
            Bits::B8(v) => v.len(),
        }
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Buf::Bool(_) => DType::Bool,
            Buf::U8(_) => DType::U8,
            Buf::I32(_) => DType::I32,
            Buf::I64(_) => DType::I64,
            Buf::U32(_) => DType::U32,
            Buf::F16(_) => DType::F16,
            Buf::BF16(_) => DType::BF16,
            Buf::F32(_) => DType::F32,
            Buf::F64(_) => DType::F64,
        }
    }

    /// The elements as their bit patterns.
    pub fn bits(&self) -> Bits<'_> {
        match self {
            Buf::Bool(v) | Buf::U8(v) => Bits::B1(v),
            Buf::I32(v) => Bits::B4(bytemuck::cast_slice(&v[..])),
            Buf::I64(v) => Bits::B8(bytemuck::cast_slice(&v[..])),
            Buf::U32(v) => Bits::B4(v),
            Buf::F16(v) => Bits::B2(bytemuck::cast_slice(&v[..])),
            Buf::BF16(v) => Bits::B2(bytemuck::cast_slice(&v[..])),
            Buf::F32(v) => Bits::B4(bytemuck::cast_slice(&v[..])),
            Buf::F64(v) => Bits::B8(bytemuck::cast_slice(&v[..])),
        }
    }

    /// The elements as their bit patterns, mutable.
    pub fn bits_mut(&mut self) -> BitsMut<'_> {
        match self {
            Buf::Bool(v) | Buf::U8(v) => BitsMut::B1(v),
            Buf::I32(v) => BitsMut::B4(bytemuck::cast_slice_mut(&mut v[..])),
            Buf::I64(v) => BitsMut::B8(bytemuck::cast_slice_mut(&mut v[..])),
            Buf::U32(v) => BitsMut::B4(v),
            Buf::F16(v) => BitsMut::B2(bytemuck::cast_slice_mut(&mut v[..])),
            Buf::BF16(v) => BitsMut::B2(bytemuck::cast_slice_mut(&mut v[..])),
            Buf::F32(v) => BitsMut::B4(bytemuck::cast_slice_mut(&mut v[..])),
            Buf::F64(v) => BitsMut::B8(bytemuck::cast_slice_mut(&mut v[..])),
        }
    }

    /// Fills every element with `value`, converted to the buffer's dtype.
    pub fn fill(&mut self, value: ScalarBits) {
        match self.bits_mut() {
            BitsMut::B1(v) => v.fill(value.get()),
            BitsMut::B2(v) => v.fill(value.get()),
            BitsMut::B4(v) => v.fill(value.get()),
            BitsMut::B8(v) => v.fill(value.get()),
        }
    }

    /// Copies the elements of `src`, which must have the same dtype and length.
    pub fn copy_from(&mut self, src: &Buf) -> Result<()> {
        if self.dtype() != src.dtype() {
            return Err(malformed(format!(
                "copy of a {} tile into a {} tile",
                src.dtype(),
                self.dtype()
            )));
        }
        match (self.bits_mut(), src.bits()) {
            (BitsMut::B1(d), Bits::B1(s)) => copy_same_len(d, s),
            (BitsMut::B2(d), Bits::B2(s)) => copy_same_len(d, s),
            (BitsMut::B4(d), Bits::B4(s)) => copy_same_len(d, s),
            (BitsMut::B8(d), Bits::B8(s)) => copy_same_len(d, s),
            _ => Err(malformed("copy between tiles of different element sizes".into())),
        }
    }
}

/// Tile buffers of finished frames, kept on their thread for the next
/// frames there, oldest first: a repeated small program then neither
/// allocates nor zeroes its tiles again.
struct Spares {
    bufs: Vec<Buf>,
    bytes: usize,
}

/// The most bytes and buffers one thread keeps spare; beyond them the
/// oldest spares are dropped.
const SPARE_BYTES: usize = 2 << 20;
const SPARE_COUNT: usize = 256;

thread_local! {
    static SPARES: std::cell::RefCell<Spares> = const {
        std::cell::RefCell::new(Spares { bufs: Vec::new(), bytes: 0 })
    };
}

impl Buf {
    /// A tile of `len` elements of `dtype` whose contents are unspecified:
    /// a spare buffer of an earlier frame on this thread, or a new one.
    /// Every instruction that writes a tile writes all of it (see the
    /// module docs), so no value reads what a tile held before. Debug
    /// builds fill every such tile with all-one bits (NaN, -1; bools read
    /// as true) so that a read before the first write shows. A new buffer
    /// the allocator refuses is [`Error::HostOutOfMemory`].
    pub fn scratch(dtype: DType, len: usize) -> Result<Buf> {
        // While the thread's locals are being destroyed there are no spares.
        let spare = SPARES
            .try_with(|s| {
                let mut s = s.borrow_mut();
                let i = s
                    .bufs
                    .iter()
                    .rposition(|b| b.dtype() == dtype && b.owned_len() == len)?;
                let b = s.bufs.remove(i);
                s.bytes -= b.owned_bytes();
                Some(b)
            })
            .ok()
            .flatten();
        let mut b = match spare {
            Some(b) => b,
            None => Buf::try_zeros(dtype, len)?,
        };
        if cfg!(debug_assertions) {
            b.fill(ScalarBits { bytes: [!0; 8] });
        }
        Ok(b)
    }

    /// Keeps the buffer's own vector for a later frame on this thread
    /// ([`Buf::scratch`]), dropping the thread's oldest spares beyond
    /// `SPARE_BYTES` or `SPARE_COUNT`; a borrow of parameter memory ends
    /// here.
    pub fn recycle(mut self) {
        self.release();
        let bytes = self.owned_bytes();
        if bytes == 0 || bytes > SPARE_BYTES {
            return;
        }
        // A thread ending drops its spares; nothing to keep then.
        let _ = SPARES.try_with(|s| {
            let mut s = s.borrow_mut();
            let mut drop_oldest = 0;
            let mut kept = s.bytes;
            while kept + bytes > SPARE_BYTES || s.bufs.len() - drop_oldest >= SPARE_COUNT {
                kept -= s.bufs[drop_oldest].owned_bytes();
                drop_oldest += 1;
            }
            s.bufs.drain(..drop_oldest);
            s.bytes = kept + bytes;
            s.bufs.push(self);
        });
    }

    /// How many spare buffers this thread keeps, and their bytes.
    #[cfg(test)]
    pub fn spares() -> (usize, usize) {
        SPARES.with(|s| {
            let s = s.borrow();
            (s.bufs.len(), s.bytes)
        })
    }

    /// The length of the buffer's own vector (not of borrowed memory).
    fn owned_len(&self) -> usize {
        match self {
            Buf::Bool(v) | Buf::U8(v) => v.owned.len(),
            Buf::I32(v) => v.owned.len(),
            Buf::I64(v) => v.owned.len(),
            Buf::U32(v) => v.owned.len(),
            Buf::F16(v) => v.owned.len(),
            Buf::BF16(v) => v.owned.len(),
            Buf::F32(v) => v.owned.len(),
            Buf::F64(v) => v.owned.len(),
        }
    }

    fn owned_bytes(&self) -> usize {
        self.owned_len() * self.dtype().size_in_bytes()
    }
}

fn copy_same_len<T: Copy>(d: &mut [T], s: &[T]) -> Result<()> {
    if d.len() != s.len() {
        return Err(malformed(format!(
            "copy of {} elements into a tile of {}",
            s.len(),
            d.len()
        )));
    }
    d.copy_from_slice(s);
    Ok(())
}

/// A tile's elements as bit patterns of their size.
pub(crate) enum Bits<'a> {
    B1(&'a [u8]),
    B2(&'a [u16]),
    B4(&'a [u32]),
    B8(&'a [u64]),
}

/// A tile's elements as mutable bit patterns of their size.
pub(crate) enum BitsMut<'a> {
    B1(&'a mut [u8]),
    B2(&'a mut [u16]),
    B4(&'a mut [u32]),
    B8(&'a mut [u64]),
}

/// One value of some dtype as its bytes (little end first, as in memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScalarBits {
    bytes: [u8; 8],
}

impl ScalarBits {
    /// `value` rounded or wrapped to `dtype` (as [`HostBuffer::set`] does).
    pub fn new(value: Scalar, dtype: DType) -> ScalarBits {
        ScalarBits {
            bytes: value.element_bits(dtype).to_le_bytes(),
        }
    }

    /// The value as an element of type `T` (which has the dtype's size).
    pub fn get<T: Pod>(self) -> T {
        bytemuck::pod_read_unaligned(&self.bytes[..std::mem::size_of::<T>()])
    }
}

/// A Rust element type of tile buffers that kernels compute with.
pub(crate) trait Elem: Pod + Send + Sync + 'static {
    /// The elements of `buf`, if it holds this type (`u8` also reads bool tiles).
    fn of(buf: &Buf) -> Option<&[Self]>;
    /// The elements of `buf`, mutable, if it holds this type (see
    /// [`Slab`]'s `DerefMut`: the caller overwrites them all).
    fn of_mut(buf: &mut Buf) -> Option<&mut [Self]>;
}

macro_rules! elem {
    ($($t:ty => $($variant:ident)|+;)*) => {$(
        impl Elem for $t {
            fn of(buf: &Buf) -> Option<&[$t]> {
                match buf {
                    $(Buf::$variant(v))|+ => Some(&**v),
                    _ => None,
                }
            }
            fn of_mut(buf: &mut Buf) -> Option<&mut [$t]> {
                match buf {
                    $(Buf::$variant(v))|+ => Some(&mut **v),
                    _ => None,
                }
            }
        }
    )*};
}

elem! {
    u8 => U8 | Bool;
    i32 => I32;
    i64 => I64;
    u32 => U32;
    f16 => F16;
    bf16 => BF16;
    f32 => F32;
    f64 => F64;
}

/// The elements of `buf` as `T`, or an error naming the dtypes.
pub(crate) fn typed<T: Elem>(buf: &Buf) -> Result<&[T]> {
    T::of(buf).ok_or_else(|| malformed(format!("a {} tile used where another dtype is required", buf.dtype())))
}

/// The elements of `buf` as mutable `T`, or an error naming the dtypes.
pub(crate) fn typed_mut<T: Elem>(buf: &mut Buf) -> Result<&mut [T]> {
    let dtype = buf.dtype();
    T::of_mut(buf).ok_or_else(|| malformed(format!("a {dtype} tile used where another dtype is required")))
}

/// An error for a program that breaks a rule the executor relies on; the
/// program's name is filled in where the error leaves the executor.
pub(crate) fn malformed(reason: String) -> Error {
    Error::InvalidProgram {
        program: String::new(),
        reason,
    }
}

/// An error for an op applied to a dtype it does not accept.
pub(crate) fn unsupported(op: &'static str, dtype: DType, reason: &'static str) -> Error {
    Error::UnsupportedDType { op, dtype, reason }
}
