//! Moving values between threads: broadcasts and in-tile reductions.
//!
//! In general both go through shared memory, bracketed by `bar.sync`: every
//! thread writes the slots it holds at their element index, the block
//! waits, and every thread reads the elements its slots of the result need.
//! A reduction of `L` elements into each of `M` outputs gives each output a
//! group of `P` threads (a power of two, at most `T / M`): each thread
//! combines every `P`-th element, the group's warp lanes combine by
//! `shfl.sync.bfly`, and groups wider than a warp leave one partial per warp
//! in shared memory, combined by the readers. A read is guarded only where
//! its element may not exist: in the last, partial run of `P` elements, or
//! when a round has more groups than outputs left.
//!
//! Four cases skip the published tile:
//! - A reduction of the last axis whose block-wide runs of atoms lie inside
//!   one row combines each thread's own slots in registers, then the warp
//!   by shuffles; only one partial per warp and row goes through shared
//!   memory.
//! - A reduction of the last axis whose rows are shorter than a block-wide
//!   run (several rows to a run) combines each thread's atom in registers,
//!   then the row's lanes by shuffles; one partial per warp of a row goes
//!   through shared memory.
//! - A reduction of the leading axis whose columns divide a block-wide run
//!   (the tile a whole number of runs) combines each thread's repeats in
//!   registers (they hold the same columns), then the lanes holding the
//!   same columns by shuffles; one partial per column and warp goes
//!   through shared memory.
//! - A reduction to a single element is combined by every thread from the
//!   warp partials, so every thread holds it: such a value, and constants
//!   and elementwise results of such values, are *uniform*, and a broadcast
//!   of a uniform value copies its register with no exchange.

use super::emitter::{Class, Emitter};
use super::ops::{immediate, mov_imm};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::{TileReduce, ValueId};
use crate::ops::{BinaryOp, UnaryOp};

/// Static shared memory a block may use without opting in.
pub(super) const SHARED_LIMIT: u32 = 48 * 1024;

/// Bytes and `ld`/`st` type of one element of `d` in shared memory.
fn shared_slot(d: DType) -> (u32, &'static str) {
    match d {
        DType::Bool | DType::U8 | DType::I32 | DType::U32 => (4, "b32"),
        DType::F32 => (4, "f32"),
        DType::F16 | DType::BF16 => (2, "b16"),
        DType::I64 => (8, "b64"),
        DType::F64 => (8, "f64"),
    }
}

impl Emitter<'_> {
    /// Reserves `bytes` of shared memory for one exchange.
    fn reserve_shared(&mut self, bytes: u32) -> Result<()> {
        if bytes > SHARED_LIMIT {
            return Err(self.invalid(format!(
                "an exchange needs {bytes} bytes of shared memory, more than {SHARED_LIMIT}; use smaller tiles"
            )));
        }
        self.shared_bytes = self.shared_bytes.max(bytes);
        Ok(())
    }

    /// A `u32` register holding `tf_smem + base + index · size`.
    fn shared_addr(&mut self, index: &str, size: u32, base: u32) -> String {
        let a = self.reg(Class::B32);
        self.ins(format!("mov.u32 {a}, tf_smem"));
        self.ins(format!("add.u32 {a}, {a}, {base}"));
        self.ins(format!("mad.lo.u32 {a}, {index}, {size}, {a}"));
        a
    }

    /// Stores a value register to shared memory (bools as 0/1 words).
    fn st_shared(&mut self, d: DType, guard: &Option<String>, at: &str, reg: &str) {
        let g = guard.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
        let (_, ty) = shared_slot(d);
        if d == DType::Bool {
            let w = self.reg(Class::B32);
            self.ins(format!("selp.u32 {w}, 1, 0, {reg}"));
            self.ins(format!("{g}st.shared.b32 {at}, {w}"));
        } else {
            self.ins(format!("{g}st.shared.{ty} {at}, {reg}"));
        }
    }

    /// Loads a value register from shared memory; `init` is kept where the guard is false.
    fn ld_shared(&mut self, d: DType, guard: &Option<String>, at: &str, init: Option<&str>) -> String {
        let g = guard.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
        let (_, ty) = shared_slot(d);
        if d == DType::Bool {
            let w = self.reg(Class::B32);
            self.ins(format!("mov.u32 {w}, 0"));
            self.ins(format!("{g}ld.shared.b32 {w}, {at}"));
            let p = self.reg(Class::Pred);
            self.ins(format!("setp.ne.u32 {p}, {w}, 0"));
            return p;
        }
        let r = self.reg(Class::of(d));
        if let Some(init) = init {
            self.ins(mov_imm(d, &r, init));
        }
        self.ins(format!("{g}ld.shared.{ty} {r}, {at}"));
        r
    }

    /// Writes every held slot of `src` to shared memory at its element index.
    fn publish(&mut self, d: DType, shape: &[u32], regs: &[String]) {
        let (size, _) = shared_slot(d);
        let l = self.layout(shape);
        // The tile goes to the start of shared memory, where an earlier
        // exchange's readers may still be; the readers of this one may read
        // anywhere.
        self.ins("bar.sync 0");
        self.exchange_reads = Some((0, u32::MAX));
        for r in 0..l.repeats {
            let valid = self.slot_valid(shape, r);
            let (el, _) = self.coords(shape, r);
            let at = self.shared_addr(&el, size, 0);
            for a in 0..l.atom {
                let reg = regs[(r * l.atom + a) as usize].clone();
                self.st_shared(d, &valid, &format!("[{at}+{}]", a * size), &reg);
            }
        }
        self.ins("bar.sync 0");
    }

    /// Lowers `Inst::Broadcast`.
    pub fn broadcast(&mut self, dst: ValueId, src: ValueId) -> Result<()> {
        let (st, dt) = (self.ty(src)?.clone(), self.ty(dst)?.clone());
        let regs = self.val(src)?;
        if st.shape == dt.shape {
            self.vals.insert(dst, regs);
            if self.uniform.contains(&src) {
                self.uniform.insert(dst);
            }
            return Ok(());
        }
        if self.uniform.contains(&src) {
            // Every thread holds the one value already.
            self.comment(format!(
                "broadcast {:?} -> {:?} of a uniform value: no exchange",
                st.shape.as_slice(),
                dt.shape.as_slice()
            ));
            let slots = self.layout(&dt.shape).slots();
            self.vals.insert(dst, vec![regs[0].clone(); slots]);
            self.uniform.insert(dst);
            return Ok(());
        }
        let d = st.dtype;
        let (size, _) = shared_slot(d);
        self.reserve_shared(st.numel() as u32 * size)?;
        self.comment(format!(
            "broadcast {:?} -> {:?}",
            st.shape.as_slice(),
            dt.shape.as_slice()
        ));
        self.publish(d, &st.shape, &regs);
        let l = self.layout(&dt.shape);
        let rank = dt.shape.len();
        let mut out = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let (_, cs) = self.coords(&dt.shape, r);
            let idx = self.reg(Class::B32);
            self.ins(format!("mov.u32 {idx}, 0"));
            let mut stride = 1u32;
            for k in (0..rank).rev() {
                if st.shape[k] > 1 {
                    self.ins(format!("mad.lo.u32 {idx}, {}, {stride}, {idx}", cs[k]));
                }
                stride *= st.shape[k];
            }
            let at = self.shared_addr(&idx, size, 0);
            let inner_varies = st.shape.last().is_some_and(|&e| e > 1);
            for a in 0..l.atom {
                let off = if inner_varies { a * size } else { 0 };
                out.push(self.ld_shared(d, &None, &format!("[{at}+{off}]"), None));
            }
        }
        self.vals.insert(dst, out);
        Ok(())
    }

    /// Lowers `Inst::Reduce`.
    pub fn reduce(&mut self, dst: ValueId, op: TileReduce, src: ValueId, axis: u8) -> Result<()> {
        let st = self.ty(src)?.clone();
        let d = st.dtype;
        if matches!(d, DType::Bool | DType::F16 | DType::BF16) {
            return Err(Error::UnsupportedDType {
                op: "ptx_gen reduce",
                dtype: d,
                reason: "cast to an integer or f32 before reducing",
            });
        }
        let axis = axis as usize;
        let Some(&len) = st.shape.get(axis) else {
            return Err(self.invalid(format!(
                "reduce axis {axis} is out of range for {:?}",
                st.shape.as_slice()
            )));
        };
        let regs = self.val(src)?;
        if len == 1 {
            // Reducing an axis of length 1 keeps the shape, and so the
            // layout: every thread already holds its results.
            self.comment(format!("reduce {op:?} axis {axis} of length 1: no exchange"));
            self.vals.insert(dst, regs);
            return Ok(());
        }
        let (Some(bin), identity) = combination(op, d) else {
            return Err(self.invalid("logaddexp combines scans, not reductions"));
        };
        let id = immediate(identity, d).map_err(|e| self.invalid(e))?;
        let threads = self.block.threads;
        let numel = st.numel() as u32;
        let inner: u32 = st.shape[axis + 1..].iter().product();
        let outputs = numel / len.max(1);
        let src_layout = self.layout(&st.shape);
        if inner == 1 && !src_layout.partial && len % (threads * src_layout.atom) == 0 {
            return self.reduce_rows_in_registers(dst, bin, d, &id, &regs, len, &st.shape);
        }
        if inner == 1 && !src_layout.partial && len < threads * src_layout.atom && len % src_layout.atom == 0 {
            return self.reduce_short_rows_in_registers(dst, bin, d, &id, &regs, len, &st.shape);
        }
        let run = threads * src_layout.atom;
        if inner > 1
            && outputs == inner
            && inner.is_power_of_two()
            && !src_layout.partial
            && run % inner == 0
            && numel % run == 0
        {
            return self.reduce_columns_in_registers(dst, bin, d, &id, &regs, inner, &st.shape);
        }
        let mut group = 1u32;
        while group * 2 <= threads / outputs.max(1) && group < len {
            group *= 2;
        }
        let groups = threads / group;
        let warps = (group / 32).max(1);
        let (size, _) = shared_slot(d);
        let partials_at = (numel * size).next_multiple_of(8);
        self.reserve_shared(partials_at + outputs * warps * size)?;
        self.comment(format!(
            "reduce {op:?} axis {axis} of {:?}: {outputs} outputs, {group} threads each",
            st.shape.as_slice()
        ));
        self.publish(d, &st.shape, &regs);
        let tid = self.reg(Class::B32);
        self.ins(format!("mov.u32 {tid}, %tid.x"));
        let (lane, g) = (self.reg(Class::B32), self.reg(Class::B32));
        self.rem_const("u32", &lane, &tid, group as u64);
        self.div_const("u32", &g, &tid, group as u64);
        for it in 0..outputs.div_ceil(groups) {
            let o = self.reg(Class::B32);
            self.ins(format!("add.u32 {o}, {g}, {}", it * groups));
            // Whether this thread's output exists: always, when every group
            // of this round has one (`g < groups`).
            let vo = ((it + 1) * groups > outputs).then(|| {
                let vo = self.reg(Class::Pred);
                self.ins(format!("setp.lt.u32 {vo}, {o}, {outputs}"));
                vo
            });
            // The first source element of output `o`, then every `inner`-th.
            let (hi, base) = (self.reg(Class::B32), self.reg(Class::B32));
            self.div_const("u32", &hi, &o, inner as u64);
            self.rem_const("u32", &base, &o, inner as u64);
            self.ins(format!("mad.lo.u32 {base}, {hi}, {}, {base}", len * inner));
            self.ins(format!("mad.lo.u32 {base}, {lane}, {inner}, {base}"));
            let at = self.shared_addr(&base, size, 0);
            let mut acc = self.reg(Class::of(d));
            self.ins(mov_imm(d, &acc, &id));
            for i in 0..len.div_ceil(group) {
                // Element `lane + i·group` exists for every lane (`lane <
                // group`) unless this is a last, partial run.
                let guard = if len - i * group >= group {
                    vo.clone()
                } else {
                    let p = self.reg(Class::Pred);
                    self.ins(format!("setp.lt.u32 {p}, {lane}, {}", len - i * group));
                    if let Some(vo) = &vo {
                        self.ins(format!("and.pred {p}, {p}, {vo}"));
                    }
                    Some(p)
                };
                let init = guard.as_ref().map(|_| id.as_str());
                let x = self.ld_shared(d, &guard, &format!("[{at}+{}]", i * group * inner * size), init);
                acc = self.binary(bin, d, &acc, &x)?;
            }
            let mut off = group.min(32) / 2;
            while off >= 1 {
                let other = self.shuffle(d, &acc, off);
                acc = self.binary(bin, d, &acc, &other)?;
                off /= 2;
            }
            let leader = self.reg(Class::Pred);
            let w = self.reg(Class::B32);
            self.rem_const("u32", &w, &lane, 32);
            match &vo {
                Some(vo) => self.ins(format!("setp.eq.and.u32 {leader}, {w}, 0, {vo}")),
                None => self.ins(format!("setp.eq.u32 {leader}, {w}, 0")),
            }
            self.div_const("u32", &w, &lane, 32);
            self.ins(format!("mad.lo.u32 {w}, {o}, {warps}, {w}"));
            let at = self.shared_addr(&w, size, partials_at);
            self.st_shared(d, &Some(leader), &format!("[{at}]"), &acc);
        }
        self.ins("bar.sync 0");
        self.gather_partials(dst, bin, d, &id, warps, partials_at)
    }

    /// Lowers `Inst::Scan` through shared memory: the tile is published,
    /// then in round `r` every element combines the element `2^r` before
    /// it along the axis (read from the previous round's values) and
    /// publishes the result, `ceil(log2(len))` rounds in all, so each
    /// element is combined in a fixed tree order. Two barriers a round.
    pub fn scan(&mut self, dst: ValueId, op: TileReduce, src: ValueId, axis: u8) -> Result<()> {
        let st = self.ty(src)?.clone();
        let d = st.dtype;
        if matches!(d, DType::Bool | DType::F16 | DType::BF16) {
            return Err(self.invalid(format!("scans take integers, f32 or f64, not {d}")));
        }
        let axis = axis as usize;
        let Some(&len) = st.shape.get(axis) else {
            return Err(self.invalid(format!("scan axis {axis} is out of range for {:?}", st.shape.as_slice())));
        };
        let regs = self.val(src)?;
        if len == 1 {
            self.vals.insert(dst, regs);
            return Ok(());
        }
        if op == TileReduce::LogAddExp && !d.is_float() {
            return Err(self.invalid(format!("logaddexp scans take f32 or f64, not {d}")));
        }
        let (bin, identity) = combination(op, d);
        let id = immediate(identity, d).map_err(|e| self.invalid(e))?;
        let (size, _) = shared_slot(d);
        self.reserve_shared(st.numel() as u32 * size)?;
        self.comment(format!("scan {op:?} axis {axis} of {:?}", st.shape.as_slice()));
        self.publish(d, &st.shape, &regs);
        let l = self.layout(&st.shape);
        let last = axis + 1 == st.shape.len();
        let step: u32 = st.shape[axis + 1..].iter().product();
        // Each slot's shared address, validity and coordinate along the axis.
        let mut slots = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let valid = self.slot_valid(&st.shape, r);
            let (el, cs) = self.coords(&st.shape, r);
            let at = self.shared_addr(&el, size, 0);
            for a in 0..l.atom {
                let c = if last && a > 0 {
                    let c = self.reg(Class::B32);
                    self.ins(format!("add.u32 {c}, {}, {a}", cs[axis]));
                    c
                } else {
                    cs[axis].clone()
                };
                slots.push((at.clone(), a * size, valid.clone(), c));
            }
        }
        let mut cur = regs;
        let mut dist = 1u32;
        while dist < len {
            let mut next = Vec::with_capacity(cur.len());
            for ((at, byte, valid, c), x) in slots.iter().zip(&cur) {
                let p = self.reg(Class::Pred);
                self.ins(format!("setp.ge.u32 {p}, {c}, {dist}"));
                let p = self.and(valid.clone(), p);
                // The partner's address, in a register: ptxas takes no
                // negative offset in an address.
                let shift = *byte as i64 - (dist * step * size) as i64;
                let back = self.reg(Class::B32);
                if shift < 0 {
                    self.ins(format!("sub.u32 {back}, {at}, {}", -shift));
                } else {
                    self.ins(format!("add.u32 {back}, {at}, {shift}"));
                }
                let y = self.ld_shared(d, &p, &format!("[{back}]"), Some(&id));
                next.push(match bin {
                    Some(bin) => self.binary(bin, d, x, &y)?,
                    None => self.log_add_exp(d, x, &y)?,
                });
            }
            dist *= 2;
            if dist < len {
                self.ins("bar.sync 0");
                for ((at, byte, valid, _), x) in slots.iter().zip(&next) {
                    self.st_shared(d, valid, &format!("[{at}+{byte}]"), x);
                }
                self.ins("bar.sync 0");
            }
            cur = next;
        }
        self.exchange_reads = Some((0, u32::MAX));
        self.vals.insert(dst, cur);
        Ok(())
    }

    /// `log(exp(a) + exp(b))` of float registers: the larger plus
    /// `log(1 + exp(-|a - b|))`, an infinite larger one as it is.
    fn log_add_exp(&mut self, d: DType, a: &str, b: &str) -> Result<String> {
        let m = self.binary(BinaryOp::Maximum, d, a, b)?;
        let diff = self.binary(BinaryOp::Sub, d, a, b)?;
        let far = self.unary(UnaryOp::Abs, d, &diff)?;
        let far = self.unary(UnaryOp::Neg, d, &far)?;
        let e = self.unary(UnaryOp::Exp, d, &far)?;
        let one = self.reg(Class::of(d));
        self.ins(mov_imm(d, &one, &immediate(Scalar::Float(1.0, d), d).map_err(|e| self.invalid(e))?));
        let e = self.binary(BinaryOp::Add, d, &e, &one)?;
        let l = self.unary(UnaryOp::Log, d, &e)?;
        let r = self.binary(BinaryOp::Add, d, &m, &l)?;
        let size = self.unary(UnaryOp::Abs, d, &m)?;
        let inf = self.reg(Class::of(d));
        self.ins(mov_imm(d, &inf, &immediate(Scalar::Float(f64::INFINITY, d), d).map_err(|e| self.invalid(e))?));
        let infinite = self.reg(Class::Pred);
        let ty = if d == DType::F64 { "f64" } else { "f32" };
        self.ins(format!("setp.eq.{ty} {infinite}, {size}, {inf}"));
        let out = self.reg(Class::of(d));
        self.ins(format!("selp.{ty} {out}, {m}, {r}, {infinite}"));
        Ok(out)
    }

    /// The reduction of the last axis when every block-wide run of atoms
    /// (`T · A` consecutive elements) lies inside one row: each thread
    /// combines its own slots of a row in registers, the warp combines its
    /// lanes by shuffles, and one partial per warp and row goes through
    /// shared memory. No element of the source is published.
    #[allow(clippy::too_many_arguments)]
    fn reduce_rows_in_registers(
        &mut self,
        dst: ValueId,
        bin: BinaryOp,
        d: DType,
        id: &str,
        regs: &[String],
        len: u32,
        shape: &[u32],
    ) -> Result<()> {
        let l = self.layout(shape);
        let threads = self.block.threads;
        let run = threads * l.atom;
        let outputs = l.numel / len;
        let warps = threads / 32;
        let (size, _) = shared_slot(d);
        let (base, wait) = self.partials_at(outputs * warps * size)?;
        self.comment(format!(
            "reduce the last axis of {shape:?} in registers: {outputs} outputs, {warps} warp partials each"
        ));
        let mut accs: Vec<Option<String>> = vec![None; outputs as usize];
        for r in 0..l.repeats {
            let o = (r * run / len) as usize;
            for a in 0..l.atom {
                let x = &regs[(r * l.atom + a) as usize];
                accs[o] = Some(match accs[o].take() {
                    None => x.clone(),
                    Some(acc) => self.binary(bin, d, &acc, x)?,
                });
            }
        }
        let (lane, warp) = (self.reg(Class::B32), self.reg(Class::B32));
        self.ins(format!("mov.u32 {lane}, %tid.x"));
        self.ins(format!("shr.u32 {warp}, {lane}, 5"));
        self.ins(format!("and.b32 {lane}, {lane}, 31"));
        let leader = self.reg(Class::Pred);
        self.ins(format!("setp.eq.u32 {leader}, {lane}, 0"));
        if wait {
            // Readers of an earlier exchange may still be reading there.
            self.ins("bar.sync 0");
        }
        for (o, acc) in accs.into_iter().enumerate() {
            let mut acc = match acc {
                Some(acc) => acc,
                None => {
                    let r = self.reg(Class::of(d));
                    self.ins(mov_imm(d, &r, id));
                    r
                }
            };
            let mut off = 16;
            while off >= 1 {
                let other = self.shuffle(d, &acc, off);
                acc = self.binary(bin, d, &acc, &other)?;
                off /= 2;
            }
            let slot = self.reg(Class::B32);
            self.ins(format!("add.u32 {slot}, {warp}, {}", o as u32 * warps));
            let at = self.shared_addr(&slot, size, base);
            self.st_shared(d, &Some(leader.clone()), &format!("[{at}]"), &acc);
        }
        self.ins("bar.sync 0");
        self.gather_partials(dst, bin, d, id, warps, base)
    }

    /// Where `bytes` of warp partials go in shared memory, reserved and
    /// recorded as the latest exchange's reads: where the latest exchange's
    /// readers are not reading (after its bytes, or at the start), so no
    /// barrier is needed before they are written; at the start after a
    /// barrier (`true`) where neither fits.
    fn partials_at(&mut self, bytes: u32) -> Result<(u32, bool)> {
        let (base, wait) = match self.exchange_reads {
            None => (0, false),
            Some((start, _)) if bytes <= start => (0, false),
            Some((_, end)) => match end.checked_next_multiple_of(8) {
                Some(after) if after.checked_add(bytes).is_some_and(|e| e <= SHARED_LIMIT) => (after, false),
                _ => (0, true),
            },
        };
        self.reserve_shared(base + bytes)?;
        self.exchange_reads = Some((base, base + bytes));
        Ok((base, wait))
    }

    /// The reduction of the last axis when its rows are shorter than a
    /// block-wide run of atoms (`len < T · A`, a multiple of `A`): the
    /// `len / A` consecutive threads of a row each combine their atom in
    /// registers, then combine by shuffles within the row's lanes (up to a
    /// warp), and one partial per warp of a row goes through shared
    /// memory. No element of the source is published.
    #[allow(clippy::too_many_arguments)]
    fn reduce_short_rows_in_registers(
        &mut self,
        dst: ValueId,
        bin: BinaryOp,
        d: DType,
        id: &str,
        regs: &[String],
        len: u32,
        shape: &[u32],
    ) -> Result<()> {
        let l = self.layout(shape);
        let threads = self.block.threads;
        let per_row = len / l.atom;
        let span = per_row.min(32);
        let warps = (per_row / 32).max(1);
        let rows_per_run = threads * l.atom / len;
        let outputs = l.numel / len;
        let (size, _) = shared_slot(d);
        let (base, wait) = self.partials_at(outputs * warps * size)?;
        self.comment(format!(
            "reduce the last axis of {shape:?} in registers: {outputs} rows of {per_row} threads, {warps} warp partials each"
        ));
        let tid = self.reg(Class::B32);
        self.ins(format!("mov.u32 {tid}, %tid.x"));
        // This thread's row within a run, and its warp within the row.
        let (row, warp, lane) = (self.reg(Class::B32), self.reg(Class::B32), self.reg(Class::B32));
        self.div_const("u32", &row, &tid, per_row as u64);
        self.rem_const("u32", &warp, &tid, per_row as u64);
        self.div_const("u32", &warp, &warp, 32);
        self.rem_const("u32", &lane, &tid, span as u64);
        let leader = self.reg(Class::Pred);
        self.ins(format!("setp.eq.u32 {leader}, {lane}, 0"));
        if wait {
            // Readers of an earlier exchange may still be reading there.
            self.ins("bar.sync 0");
        }
        for r in 0..l.repeats {
            let mut acc = regs[(r * l.atom) as usize].clone();
            for a in 1..l.atom {
                acc = self.binary(bin, d, &acc, &regs[(r * l.atom + a) as usize])?;
            }
            let mut off = span / 2;
            while off >= 1 {
                let other = self.shuffle(d, &acc, off);
                acc = self.binary(bin, d, &acc, &other)?;
                off /= 2;
            }
            let slot = self.reg(Class::B32);
            self.ins(format!("add.u32 {slot}, {row}, {}", r * rows_per_run));
            self.ins(format!("mad.lo.u32 {slot}, {slot}, {warps}, {warp}"));
            let at = self.shared_addr(&slot, size, base);
            self.st_shared(d, &Some(leader.clone()), &format!("[{at}]"), &acc);
        }
        self.ins("bar.sync 0");
        self.gather_partials(dst, bin, d, id, warps, base)
    }

    /// The reduction of the leading axis of a tile `[len, inner…]` whose
    /// columns (`inner` elements, the product of the trailing extents)
    /// divide a block-wide run of atoms (`T · A`), the tile a whole number
    /// of runs: every repeat of a thread's atom then holds the same
    /// columns, so each thread combines its repeats in registers; the
    /// `q = inner / A` threads of a row of columns repeat every `q` lanes,
    /// so lanes `q` apart combine by shuffles; and one partial per column
    /// and warp (or per column and run of `q / 32` warps, when `q > 32`)
    /// goes through shared memory. No element of the source is published.
    #[allow(clippy::too_many_arguments)]
    fn reduce_columns_in_registers(
        &mut self,
        dst: ValueId,
        bin: BinaryOp,
        d: DType,
        id: &str,
        regs: &[String],
        inner: u32,
        shape: &[u32],
    ) -> Result<()> {
        let l = self.layout(shape);
        let threads = self.block.threads;
        // Threads across a row of columns, and threads per partial.
        let q = inner / l.atom;
        let span = q.max(32);
        let partials = threads / span;
        let (size, _) = shared_slot(d);
        // Threads per column in the combine of the partials: groups of
        // adjacent lanes, so that they end by shuffles; else each reader of
        // a result combines all of its column's partials.
        let group = (threads / inner).min(partials);
        let parallel = threads >= inner && group <= 32;
        let finals_at = (inner * partials * size).next_multiple_of(8);
        let bytes = if parallel { finals_at + inner * size } else { inner * partials * size };
        let (base, wait) = self.partials_at(bytes)?;
        self.comment(format!(
            "reduce the leading axis of {shape:?} in registers: {inner} columns, {q} threads across them, {partials} partials each"
        ));
        let mut accs: Vec<String> = regs[..l.atom as usize].to_vec();
        for r in 1..l.repeats {
            for (a, acc) in accs.iter_mut().enumerate() {
                *acc = self.binary(bin, d, acc, &regs[(r * l.atom) as usize + a])?;
            }
        }
        let mut off = q;
        while off < 32 {
            for acc in accs.iter_mut() {
                let other = self.shuffle(d, acc, off);
                *acc = self.binary(bin, d, acc, &other)?;
            }
            off *= 2;
        }
        // This thread's first column, its partial's index, and whether it
        // stores (the first `q` lanes of a warp, or all of them).
        let tid = self.reg(Class::B32);
        self.ins(format!("mov.u32 {tid}, %tid.x"));
        let (col, k) = (self.reg(Class::B32), self.reg(Class::B32));
        self.rem_const("u32", &col, &tid, q as u64);
        self.div_const("u32", &k, &tid, span as u64);
        let leader = (q < 32).then(|| {
            let lane = self.reg(Class::B32);
            self.rem_const("u32", &lane, &tid, 32);
            let p = self.reg(Class::Pred);
            self.ins(format!("setp.lt.u32 {p}, {lane}, {q}"));
            p
        });
        if wait {
            // Readers of an earlier exchange may still be reading there.
            self.ins("bar.sync 0");
        }
        // Column `col · A + a`'s partial `k` lies at `k · inner + column`
        // for the parallel combine, else at `column · partials + k`.
        let slot = self.reg(Class::B32);
        let a_step = if parallel {
            self.ins(format!("mul.lo.u32 {slot}, {col}, {}", l.atom));
            self.ins(format!("mad.lo.u32 {slot}, {k}, {inner}, {slot}"));
            1
        } else {
            self.ins(format!("mad.lo.u32 {slot}, {col}, {}, {k}", l.atom * partials));
            partials
        };
        let at = self.shared_addr(&slot, size, base);
        for (a, acc) in accs.iter().enumerate() {
            self.st_shared(d, &leader, &format!("[{at}+{}]", a as u32 * a_step * size), acc);
        }
        self.ins("bar.sync 0");
        if !parallel {
            return self.gather_partials(dst, bin, d, id, partials, base);
        }
        // `group` adjacent threads a column: thread `j` of column `c`
        // combines partials `j, j + group, …`, the group by shuffles, and
        // its first lane stores the column's result.
        let (c, j) = (self.reg(Class::B32), self.reg(Class::B32));
        self.div_const("u32", &c, &tid, group as u64);
        self.rem_const("u32", &j, &tid, group as u64);
        let inside = self.reg(Class::Pred);
        self.ins(format!("setp.lt.u32 {inside}, {c}, {inner}"));
        let slot = self.reg(Class::B32);
        self.ins(format!("mad.lo.u32 {slot}, {j}, {inner}, {c}"));
        let at = self.shared_addr(&slot, size, base);
        let mut acc = self.reg(Class::of(d));
        self.ins(mov_imm(d, &acc, id));
        for i in 0..partials.div_ceil(group) {
            // Partial `j + i · group` exists for every `j` unless this is a
            // last, partial round.
            let guard = self.reg(Class::Pred);
            if (i + 1) * group > partials {
                self.ins(format!("setp.lt.u32 {guard}, {j}, {}", partials - i * group));
                self.ins(format!("and.pred {guard}, {guard}, {inside}"));
            } else {
                self.ins(format!("mov.pred {guard}, {inside}"));
            }
            let x = self.ld_shared(d, &Some(guard), &format!("[{at}+{}]", i * group * inner * size), Some(id));
            acc = self.binary(bin, d, &acc, &x)?;
        }
        let mut off = group / 2;
        while off >= 1 {
            let other = self.shuffle(d, &acc, off);
            acc = self.binary(bin, d, &acc, &other)?;
            off /= 2;
        }
        let first = self.reg(Class::Pred);
        self.ins(format!("setp.eq.and.u32 {first}, {j}, 0, {inside}"));
        let at = self.shared_addr(&c, size, base + finals_at);
        self.st_shared(d, &Some(first), &format!("[{at}]"), &acc);
        self.ins("bar.sync 0");
        self.gather_partials(dst, bin, d, id, 1, base + finals_at)
    }

    /// Gives every thread the slots of `dst` it holds, each the combination
    /// in warp order of the `warps` partials of its output, which lie at
    /// `partials_at + (output · warps + warp) · size` in shared memory.
    fn gather_partials(
        &mut self,
        dst: ValueId,
        bin: BinaryOp,
        d: DType,
        id: &str,
        warps: u32,
        partials_at: u32,
    ) -> Result<()> {
        let (size, _) = shared_slot(d);
        let dt = self.ty(dst)?.clone();
        let l = self.layout(&dt.shape);
        // A single output is combined by every thread, so all hold it.
        let single = dt.numel() == 1;
        let mut out = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let valid = if single { None } else { self.slot_valid(&dt.shape, r) };
            let el = if single {
                String::from("0")
            } else {
                self.coords(&dt.shape, r).0
            };
            let at = self.shared_addr(&el, size * warps, partials_at);
            for a in 0..l.atom {
                let mut v = self.ld_shared(d, &valid, &format!("[{at}+{}]", a * warps * size), Some(id));
                for w in 1..warps {
                    let x = self.ld_shared(d, &valid, &format!("[{at}+{}]", (a * warps + w) * size), Some(id));
                    v = self.binary(bin, d, &v, &x)?;
                }
                out.push(v);
            }
        }
        self.vals.insert(dst, out);
        if single {
            self.uniform.insert(dst);
        }
        Ok(())
    }

    /// `shfl.sync.bfly` of a 32- or 64-bit register across the warp.
    fn shuffle(&mut self, d: DType, x: &str, off: u32) -> String {
        let out = self.reg(Class::of(d));
        if d.size_in_bytes() == 8 {
            let (lo, hi) = (self.reg(Class::B32), self.reg(Class::B32));
            self.ins(format!("mov.b64 {{{lo}, {hi}}}, {x}"));
            self.ins(format!("shfl.sync.bfly.b32 {lo}, {lo}, {off}, 31, -1"));
            self.ins(format!("shfl.sync.bfly.b32 {hi}, {hi}, {off}, 31, -1"));
            self.ins(format!("mov.b64 {out}, {{{lo}, {hi}}}"));
        } else {
            self.ins(format!("shfl.sync.bfly.b32 {out}, {x}, {off}, 31, -1"));
        }
        out
    }
}

/// The binary op and identity of a reduction or scan of `d` (no binary op
/// for logaddexp, whose identity is -inf).
fn combination(op: TileReduce, d: DType) -> (Option<BinaryOp>, Scalar) {
    let (bin, identity) = match op {
        TileReduce::Sum => (BinaryOp::Add, Scalar::Int(0, d)),
        TileReduce::Prod => (BinaryOp::Mul, Scalar::Int(1, d)),
        TileReduce::Max if d.is_float() => (BinaryOp::Maximum, Scalar::Float(f64::NEG_INFINITY, d)),
        TileReduce::Min if d.is_float() => (BinaryOp::Minimum, Scalar::Float(f64::INFINITY, d)),
        TileReduce::Max => (BinaryOp::Maximum, Scalar::Int(int_bound(d, false), d)),
        TileReduce::Min => (BinaryOp::Minimum, Scalar::Int(int_bound(d, true), d)),
        TileReduce::LogAddExp => return (None, Scalar::Float(f64::NEG_INFINITY, d)),
    };
    (Some(bin), identity)
}

/// The smallest (`max = false`) or largest value of an integer dtype, the
/// identity of max (respectively min).
fn int_bound(d: DType, max: bool) -> i128 {
    match (d, max) {
        (DType::I32, false) => i32::MIN as i128,
        (DType::I32, true) => i32::MAX as i128,
        (DType::I64, false) => i64::MIN as i128,
        (DType::I64, true) => i64::MAX as i128,
        (DType::U32, true) => u32::MAX as i128,
        (DType::U8, true) => 255,
        _ => 0,
    }
}
