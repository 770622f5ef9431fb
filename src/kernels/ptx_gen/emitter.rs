//! The emitter: registers, the prologue of per-thread constants, and the
//! walk over the program's instructions.

use super::layout::{layout, BlockShape, Layout};
use super::PtxTarget;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernels::ir::{IndexExpr, Inst, LoopId, Program, ValueId, ValueType, View, ViewId};
use std::collections::HashMap;
use std::fmt::Write;

/// The register classes of the generated code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Class {
    /// `.pred`, for bool values and masks.
    Pred,
    /// `.b16`, for f16 and bf16 values.
    B16,
    /// `.b32`, for u8, i32 and u32 values and addresses in shared memory.
    B32,
    /// `.f32`.
    F32,
    /// `.b64`, for i64 values and global addresses.
    B64,
    /// `.f64`.
    F64,
}

impl Class {
    const ALL: [Class; 6] = [Class::Pred, Class::B16, Class::B32, Class::F32, Class::B64, Class::F64];

    fn prefix(self) -> &'static str {
        match self {
            Class::Pred => "%p",
            Class::B16 => "%h",
            Class::B32 => "%r",
            Class::F32 => "%f",
            Class::B64 => "%rd",
            Class::F64 => "%fd",
        }
    }

    fn decl(self) -> &'static str {
        match self {
            Class::Pred => ".pred",
            Class::B16 => ".b16",
            Class::B32 => ".b32",
            Class::F32 => ".f32",
            Class::B64 => ".b64",
            Class::F64 => ".f64",
        }
    }

    /// The register class holding values of `d`.
    pub fn of(d: DType) -> Class {
        match d {
            DType::Bool => Class::Pred,
            DType::U8 | DType::I32 | DType::U32 => Class::B32,
            DType::F16 | DType::BF16 => Class::B16,
            DType::F32 => Class::F32,
            DType::I64 => Class::B64,
            DType::F64 => Class::F64,
        }
    }
}

/// Lowering state for one program.
pub(super) struct Emitter<'a> {
    pub prog: &'a Program,
    pub target: &'a PtxTarget,
    pub block: BlockShape,
    /// Whether the program computes every element on its own
    /// ([`super::layout::elementwise_only`]).
    pub elementwise: bool,
    counts: HashMap<Class, u32>,
    /// Code run once at entry (per-thread and per-block constants).
    prologue: String,
    /// The kernel body.
    body: String,
    in_prologue: bool,
    labels: u32,
    /// The registers of each value, one per slot of its layout.
    pub vals: HashMap<ValueId, Vec<String>>,
    /// Values whose elements are all one scalar that every thread holds in
    /// every slot (constants, single-output reductions, and elementwise
    /// results of such values): broadcasting one needs no exchange.
    pub uniform: std::collections::HashSet<ValueId>,
    /// The registers of each accumulator.
    pub accs: Vec<Vec<String>>,
    loop_regs: HashMap<LoopId, String>,
    /// The registers of the grid coordinates (`u64`).
    pub grid_coords: Vec<String>,
    /// The global address of each parameter.
    pub params: Vec<String>,
    /// The 64-bit registers holding the scalar arguments' bits.
    pub scalars: Vec<String>,
    /// The register of the thread index (`u32`).
    pub tid: String,
    coords: HashMap<(Vec<u32>, u32), (String, Vec<String>)>,
    slot_valid: HashMap<Vec<u32>, Option<String>>,
    thread_offsets: HashMap<(ViewId, u32), String>,
    /// The PTX ISA version the instructions used need.
    pub needs_version: (u32, u32),
    /// The shared memory the exchanges need, in bytes.
    pub shared_bytes: u32,
    /// Lines describing the mapping chosen for each memory access.
    pub mapping: Vec<String>,
    /// Whether the block's ticket slot in shared memory is used.
    pub ticket: bool,
    /// Whether the instructions being lowered are a last point's body.
    pub in_last_point: bool,
    /// The code-generation settings (defaults, or a tuning run's).
    pub tuning: &'a super::CodegenConfig,
    /// Loads that read again what an earlier load read (`reload.rs`):
    /// issued as plain `ld.global` so ptxas does not merge them with the
    /// first.
    pub reloads: HashMap<ValueId, ValueId>,
    /// Tiles staged through shared memory (`CodegenConfig::stage`): the
    /// shared array holding each.
    pub staged: HashMap<ValueId, String>,
    /// `.shared` declarations of the staged tiles.
    pub stage_decls: Vec<String>,
    /// Module-scope declarations (constant tables), each once.
    pub module_decls: Vec<String>,
    /// Bytes of shared memory the staged tiles take.
    pub staged_bytes: u32,
    /// The shared array of each view moved as a run (see
    /// `memory::Run`), per direction (`true` for stores), declared in
    /// `stage_decls`, and whether an access has used it yet.
    pub runs: HashMap<(ViewId, bool), (String, bool)>,
    /// Bytes of the run arrays.
    pub run_bytes: u32,
    /// The bytes of `tf_smem` the threads may still be reading for the
    /// latest exchange (start, end): an exchange writing elsewhere needs no
    /// barrier first, as every earlier exchange's readers have passed the
    /// latest one's barrier. `None` before any exchange.
    pub exchange_reads: Option<(u32, u32)>,
}

impl<'a> Emitter<'a> {
    /// A fresh emitter.
    pub fn new(
        prog: &'a Program,
        target: &'a PtxTarget,
        block: BlockShape,
        tuning: &'a super::CodegenConfig,
    ) -> Emitter<'a> {
        Emitter {
            prog,
            target,
            block,
            elementwise: super::layout::elementwise_only(&prog.body),
            counts: HashMap::new(),
            prologue: String::new(),
            body: String::new(),
            in_prologue: false,
            labels: 0,
            vals: HashMap::new(),
            uniform: std::collections::HashSet::new(),
            accs: Vec::new(),
            loop_regs: HashMap::new(),
            grid_coords: Vec::new(),
            params: Vec::new(),
            scalars: Vec::new(),
            tid: String::new(),
            coords: HashMap::new(),
            slot_valid: HashMap::new(),
            thread_offsets: HashMap::new(),
            needs_version: (6, 0),
            shared_bytes: 0,
            mapping: Vec::new(),
            ticket: false,
            in_last_point: false,
            tuning,
            reloads: HashMap::new(),
            exchange_reads: None,
            staged: HashMap::new(),
            stage_decls: Vec::new(),
            module_decls: Vec::new(),
            staged_bytes: 0,
            runs: HashMap::new(),
            run_bytes: 0,
        }
    }

    /// A new register of class `c`.
    pub fn reg(&mut self, c: Class) -> String {
        let n = self.counts.entry(c).or_insert(0);
        *n += 1;
        format!("{}{}", c.prefix(), *n)
    }

    /// Appends one instruction (without its `;`).
    pub fn ins(&mut self, text: impl AsRef<str>) {
        let out = if self.in_prologue {
            &mut self.prologue
        } else {
            &mut self.body
        };
        let _ = writeln!(out, "\t{};", text.as_ref());
    }

    /// Appends a comment line.
    pub fn comment(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.body, "\t// {}", text.as_ref());
    }

    /// A fresh label name.
    pub fn label(&mut self) -> String {
        self.labels += 1;
        format!("$L{}", self.labels)
    }

    /// Places a label in the body.
    pub fn place_label(&mut self, label: &str) {
        let _ = writeln!(self.body, "{label}:");
    }

    /// Runs `f` with its instructions going to the prologue.
    pub(super) fn prologue<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let was = std::mem::replace(&mut self.in_prologue, true);
        let r = f(self);
        self.in_prologue = was;
        r
    }

    /// Declares `decl` at module scope (once, however often it is asked for).
    pub fn declare_module(&mut self, decl: &str) {
        if !self.module_decls.iter().any(|d| d == decl) {
            self.module_decls.push(decl.to_string());
        }
    }

    /// Requires PTX ISA `v` for an instruction.
    pub fn need_version(&mut self, v: (u32, u32)) {
        self.needs_version = self.needs_version.max(v);
    }

    /// An `InvalidProgram` error for this program.
    pub fn invalid(&self, reason: impl Into<String>) -> Error {
        Error::InvalidProgram {
            program: self.prog.name.clone(),
            reason: reason.into(),
        }
    }

    /// The type of a value.
    pub fn ty(&self, v: ValueId) -> Result<&'a ValueType> {
        self.prog
            .values
            .get(v.index())
            .ok_or_else(|| self.invalid(format!("value {v} is not declared")))
    }

    /// The registers of a defined value.
    pub fn val(&self, v: ValueId) -> Result<Vec<String>> {
        self.vals
            .get(&v)
            .cloned()
            .ok_or_else(|| self.invalid(format!("value {v} is used before it is defined")))
    }

    /// A view by id.
    pub fn view(&self, v: ViewId) -> Result<&'a View> {
        self.prog
            .views
            .get(v.index())
            .ok_or_else(|| self.invalid(format!("view {v} is not declared")))
    }

    /// The layout of a shape.
    pub fn layout(&self, shape: &[u32]) -> Layout {
        layout(self.block, shape)
    }

    /// Emits the block-level prologue: thread index, parameter addresses and
    /// grid coordinates (exiting blocks past the grid's end).
    pub fn begin(&mut self, entry: &str, grid_blocks: u64, split: bool) {
        self.prologue(|e| {
            e.tid = e.reg(Class::B32);
            let tid = e.tid.clone();
            e.ins(format!("mov.u32 {tid}, %tid.x"));
            for i in 0..e.prog.params.len() {
                let raw = e.reg(Class::B64);
                let addr = e.reg(Class::B64);
                e.ins(format!("ld.param.u64 {raw}, [{entry}_param_{i}]"));
                e.ins(format!("cvta.to.global.u64 {addr}, {raw}"));
                e.params.push(addr);
            }
            let buffers = e.prog.params.len();
            for i in 0..e.prog.scalars.len() {
                let raw = e.reg(Class::B64);
                e.ins(format!("ld.param.u64 {raw}, [{entry}_param_{}]", buffers + i));
                e.scalars.push(raw);
            }
            let x = e.reg(Class::B32);
            let lin = e.reg(Class::B64);
            e.ins(format!("mov.u32 {x}, %ctaid.x"));
            e.ins(format!("cvt.u64.u32 {lin}, {x}"));
            if split {
                let (y, nx, t) = (e.reg(Class::B32), e.reg(Class::B32), e.reg(Class::B64));
                e.ins(format!("mov.u32 {y}, %ctaid.y"));
                e.ins(format!("mov.u32 {nx}, %nctaid.x"));
                e.ins(format!("mul.wide.u32 {t}, {y}, {nx}"));
                e.ins(format!("add.u64 {lin}, {lin}, {t}"));
                let p = e.reg(Class::Pred);
                e.ins(format!("setp.ge.u64 {p}, {lin}, {grid_blocks}"));
                e.ins(format!("@{p} bra $L_exit"));
            }
            let grid = e.prog.grid.clone();
            let mut coords = vec![String::new(); grid.len()];
            // Grid points are split in 32 bits when their count allows:
            // 64-bit division is a subroutine call on the GPU.
            let narrow = u32::try_from(grid_blocks).is_ok();
            let (class, ty) = if narrow {
                (Class::B32, "u32")
            } else {
                (Class::B64, "u64")
            };
            let mut rest = if narrow {
                let r = e.reg(Class::B32);
                e.ins(format!("cvt.u32.u64 {r}, {lin}"));
                r
            } else {
                lin
            };
            for (k, &ext) in grid.iter().enumerate().rev() {
                let c = e.reg(class);
                if k == 0 {
                    e.ins(format!("mov.{ty} {c}, {rest}"));
                } else {
                    let q = e.reg(class);
                    e.rem_const(ty, &c, &rest, ext);
                    e.div_const(ty, &q, &rest, ext);
                    rest = q;
                }
                coords[k] = if narrow {
                    let wide = e.reg(Class::B64);
                    e.ins(format!("cvt.u64.u32 {wide}, {c}"));
                    wide
                } else {
                    c
                };
            }
            e.grid_coords = coords;
        });
    }

    /// `dst = a / k` in `ty` (`u32` or `u64`) for a constant `k ≥ 1`: a
    /// move for 1 and a shift for a power of two. ptxas does not derive
    /// these from `div` by an immediate: it emits a general division (for
    /// 64 bits, a subroutine call).
    pub fn div_const(&mut self, ty: &str, dst: &str, a: &str, k: u64) {
        if k == 1 {
            self.ins(format!("mov.{ty} {dst}, {a}"));
        } else if k.is_power_of_two() {
            self.ins(format!("shr.{ty} {dst}, {a}, {}", k.trailing_zeros()));
        } else {
            self.ins(format!("div.{ty} {dst}, {a}, {k}"));
        }
    }

    /// `dst = a % k` in `ty` (`u32` or `u64`) for a constant `k ≥ 1`: zero
    /// for 1 and a mask for a power of two (see [`Emitter::div_const`]).
    pub fn rem_const(&mut self, ty: &str, dst: &str, a: &str, k: u64) {
        let bits = if ty == "u64" { "b64" } else { "b32" };
        if k == 1 {
            self.ins(format!("mov.{ty} {dst}, 0"));
        } else if k.is_power_of_two() {
            self.ins(format!("and.{bits} {dst}, {a}, {}", k - 1));
        } else {
            self.ins(format!("rem.{ty} {dst}, {a}, {k}"));
        }
    }

    /// The value of an index expression as a `u64` operand (register or immediate).
    pub fn index(&mut self, x: &IndexExpr) -> Result<String> {
        if x.grid.is_none() && x.loop_var.is_none() {
            return Ok(x.constant.to_string());
        }
        let r = self.reg(Class::B64);
        self.ins(format!("mov.u64 {r}, {}", x.constant));
        if let Some((axis, coeff)) = x.grid {
            let g = self
                .grid_coords
                .get(axis as usize)
                .cloned()
                .ok_or_else(|| self.invalid(format!("grid axis {axis} does not exist")))?;
            self.ins(format!("mad.lo.u64 {r}, {g}, {coeff}, {r}"));
        }
        if let Some((var, coeff)) = x.loop_var {
            let l = self
                .loop_regs
                .get(&var)
                .cloned()
                .ok_or_else(|| self.invalid(format!("loop variable {var} is used outside its loop")))?;
            self.ins(format!("mad.lo.u64 {r}, {l}, {coeff}, {r}"));
        }
        Ok(r)
    }

    /// The element index `(r · T + t) · A` of repeat `r`'s first slot
    /// (`u32`) and the tile coordinates of that element, per axis.
    pub fn coords(&mut self, shape: &[u32], r: u32) -> (String, Vec<String>) {
        let key = (shape.to_vec(), r);
        if let Some(c) = self.coords.get(&key) {
            return c.clone();
        }
        let l = self.layout(shape);
        let threads = self.block.threads;
        let tid = self.tid.clone();
        let made = self.prologue(|e| {
            let el = e.reg(Class::B32);
            e.ins(format!("add.u32 {el}, {tid}, {}", r * threads));
            e.ins(format!("mul.lo.u32 {el}, {el}, {}", l.atom));
            let mut stride: u32 = 1;
            let mut cs = vec![String::from("0"); shape.len()];
            for (k, &ext) in shape.iter().enumerate().rev() {
                if ext > 1 {
                    let (q, c) = (e.reg(Class::B32), e.reg(Class::B32));
                    e.div_const("u32", &q, &el, stride as u64);
                    e.rem_const("u32", &c, &q, ext as u64);
                    cs[k] = c;
                }
                stride *= ext;
            }
            (el, cs)
        });
        self.coords.insert(key, made.clone());
        made
    }

    /// A predicate that is true where repeat `r`'s atom lies inside the tile,
    /// or `None` when it always does.
    pub fn slot_valid(&mut self, shape: &[u32], r: u32) -> Option<String> {
        let l = self.layout(shape);
        if !l.partial || r + 1 < l.repeats {
            return None;
        }
        if let Some(p) = self.slot_valid.get(shape) {
            return p.clone();
        }
        let (el, _) = self.coords(shape, r);
        let p = self.prologue(|e| {
            let p = e.reg(Class::Pred);
            e.ins(format!("setp.lt.u32 {p}, {el}, {}", l.numel));
            p
        });
        self.slot_valid.insert(shape.to_vec(), Some(p.clone()));
        Some(p)
    }

    /// `Σ j_k · stride_k` for repeat `r` of a view's tile (an `s64` register).
    pub fn thread_offset(&mut self, view: ViewId, r: u32) -> Result<String> {
        if let Some(o) = self.thread_offsets.get(&(view, r)) {
            return Ok(o.clone());
        }
        let v = self.view(view)?;
        let (_, cs) = self.coords(&v.tile, r);
        let off = self.prologue(|e| {
            let off = e.reg(Class::B64);
            e.ins(format!("mov.u64 {off}, 0"));
            for (c, &s) in cs.iter().zip(&v.strides) {
                if c != "0" && s != 0 {
                    let w = e.reg(Class::B64);
                    e.ins(format!("cvt.u64.u32 {w}, {c}"));
                    e.ins(format!("mad.lo.s64 {off}, {w}, {s}, {off}"));
                }
            }
            off
        });
        self.thread_offsets.insert((view, r), off.clone());
        Ok(off)
    }

    /// Whether the instructions being lowered are inside a loop.
    pub fn in_loop(&self) -> bool {
        !self.loop_regs.is_empty()
    }

    /// Lowers a list of instructions.
    pub fn block_of(&mut self, body: &[Inst]) -> Result<()> {
        for inst in body {
            self.inst(inst)?;
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst) -> Result<()> {
        self.lower(inst)?;
        let uniform = match inst {
            Inst::Const { dst, .. } | Inst::Scalar { dst, .. } => Some(dst),
            Inst::Unary { dst, src, .. } | Inst::Cast { dst, src } => self.uniform.contains(src).then_some(dst),
            Inst::Binary { dst, lhs, rhs, .. } => {
                (self.uniform.contains(lhs) && self.uniform.contains(rhs)).then_some(dst)
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => [cond, on_true, on_false]
                .iter()
                .all(|v| self.uniform.contains(v))
                .then_some(dst),
            _ => None,
        };
        if let Some(&dst) = uniform {
            self.uniform.insert(dst);
        }
        Ok(())
    }

    fn lower(&mut self, inst: &Inst) -> Result<()> {
        match inst {
            Inst::Load {
                dst,
                view,
                index,
                masked,
            } => self.load(*dst, *view, index, *masked),
            Inst::Store {
                view,
                index,
                src,
                masked,
            } => self.store(*view, index, *src, *masked),
            Inst::Gather {
                dst,
                view,
                index,
                at,
                stride,
                bound,
                flag,
            } => self.gather(*dst, *view, index, *at, *stride, *bound, *flag),
            Inst::ScatterAdd {
                view,
                index,
                at,
                stride,
                bound,
                src,
                flag,
            } => self.scatter_add(*view, index, *at, *stride, *bound, *src, *flag),
            Inst::InBounds { dst, view, index } => self.in_bounds(*dst, *view, index),
            Inst::Atomic {
                op,
                view,
                index,
                src,
                masked,
                scope,
            } => self.atomic(*op, *view, index, *src, *masked, *scope),
            Inst::Const { dst, value } => self.constant(*dst, value.0),
            Inst::Scalar { dst, scalar } => self.scalar_arg(*dst, *scalar),
            Inst::Iota { dst, axis, index } => self.iota(*dst, *axis, index),
            Inst::Unary { dst, op, src } => self.unary_inst(*dst, *op, *src),
            Inst::Binary { dst, op, lhs, rhs } => self.binary_inst(*dst, *op, *lhs, *rhs),
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => self.select_inst(*dst, *cond, *on_true, *on_false),
            Inst::Cast { dst, src } => self.cast_inst(*dst, *src),
            Inst::Uniform { dst, counter, key, bits } => self.uniform_inst(*dst, *counter, *key, *bits),
            Inst::Broadcast { dst, src } => self.broadcast(*dst, *src),
            Inst::Reduce { dst, op, src, axis } => self.reduce(*dst, *op, *src, *axis),
            Inst::Scan { dst, op, src, axis } => self.scan(*dst, *op, *src, *axis),
            Inst::AccUpdate { acc, op, src } => self.acc_update(*acc, *op, *src),
            Inst::AccRead { dst, acc } => {
                let regs = self
                    .accs
                    .get(acc.index())
                    .cloned()
                    .ok_or_else(|| self.invalid(format!("accumulator {acc} is not declared")))?;
                let d = self.prog.accs[acc.index()].ty.dtype;
                let copy = regs.iter().map(|r| self.mov(d, r)).collect();
                self.vals.insert(*dst, copy);
                Ok(())
            }
            Inst::Loop { var, count, body } => {
                if *count == 0 {
                    return Ok(());
                }
                let counter = self.reg(Class::B64);
                self.ins(format!("mov.u64 {counter}, 0"));
                self.loop_regs.insert(*var, counter.clone());
                // With `unroll` set, the body is written `unroll` times per
                // trip (a remainder first, outside the loop) and ptxas is
                // told not to unroll further: the iterations run in the same
                // order, so results do not change.
                let unroll = self.tuning.unroll.map(|n| n.clamp(1, *count));
                // An exchange in the body may follow one of the previous
                // trip, or any before the loop: every written body starts
                // assuming all of shared memory is being read, and so does
                // the code after the loop.
                let per_trip = unroll.unwrap_or(1);
                // One trip is written once, without a loop around it.
                let (before, looped) = match *count {
                    1 => (1, false),
                    n => (n % per_trip, n >= per_trip),
                };
                for _ in 0..before {
                    self.exchange_reads = Some((0, u32::MAX));
                    self.block_of(body)?;
                    if looped {
                        self.ins(format!("add.u64 {counter}, {counter}, 1"));
                    }
                }
                if looped {
                    let top = self.label();
                    self.place_label(&top);
                    if unroll.is_some() {
                        self.ins(".pragma \"nounroll\"");
                    }
                    for _ in 0..per_trip {
                        self.exchange_reads = Some((0, u32::MAX));
                        self.block_of(body)?;
                        self.ins(format!("add.u64 {counter}, {counter}, 1"));
                    }
                    let p = self.reg(Class::Pred);
                    self.ins(format!("setp.lt.u64 {p}, {counter}, {count}"));
                    self.ins(format!("@{p} bra {top}"));
                }
                self.loop_regs.remove(var);
                self.exchange_reads = Some((0, u32::MAX));
                Ok(())
            }
            Inst::Barrier => {
                self.ins("bar.sync 0");
                Ok(())
            }
            Inst::LastPoint { axis, counter, body } => self.last_point(*axis, *counter, body),
        }
    }

    /// Declares the accumulators and sets them to their initial values.
    pub fn init_accs(&mut self) -> Result<()> {
        for acc in &self.prog.accs {
            let l = self.layout(&acc.ty.shape);
            let init = super::ops::immediate(acc.init.0, acc.ty.dtype).map_err(|e| self.invalid(e))?;
            let regs: Vec<String> = (0..l.slots())
                .map(|_| {
                    let r = self.reg(Class::of(acc.ty.dtype));
                    self.ins(super::ops::mov_imm(acc.ty.dtype, &r, &init));
                    r
                })
                .collect();
            self.accs.push(regs);
        }
        Ok(())
    }

    /// The finished function text: register declarations, shared memory and code.
    pub fn finish(self, header: &str) -> String {
        let mut out = String::from(header);
        out.push_str("{\n");
        for c in Class::ALL {
            if let Some(n) = self.counts.get(&c) {
                let _ = writeln!(out, "\t.reg {} {}<{}>;", c.decl(), c.prefix(), n + 1);
            }
        }
        if self.shared_bytes > 0 {
            let _ = writeln!(out, "\t.shared .align 16 .b8 tf_smem[{}];", self.shared_bytes);
        }
        if self.ticket {
            let _ = writeln!(out, "\t.shared .align 4 .b32 tf_ticket;");
        }
        for decl in &self.stage_decls {
            let _ = writeln!(out, "\t{decl}");
        }
        out.push_str(&self.prologue);
        out.push_str(&self.body);
        out.push_str("$L_exit:\n\tret;\n}\n");
        out
    }
}
