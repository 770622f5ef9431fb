//! The verifier: every invariant a [`Program`] must hold before a back end
//! sees it. [`verify`] reports the first failed check as
//! [`Error::InvalidProgram`], naming the instruction in its printed form and
//! the values, views and parameters involved.
//!
//! # Checks
//!
//! Declarations:
//! - Every grid extent is at least 1 (an empty launch is skipped, not run).
//! - A parameter's `init` has the parameter's dtype and fits it exactly, and
//!   only a parameter that is written has one.
//! - A view names a declared parameter; its extents, strides and tile have
//!   one rank, at most 6; every tile extent is at least 1; a padding other
//!   than zero needs a float parameter.
//! - A view's span stays inside its parameter's buffer: every element offset
//!   it reaches (computed in i128; strides may be negative) lies in `0..len`.
//! - Every value and accumulator type has rank at most 6 and extents of at
//!   least 1.
//! - An accumulator holds an integer type, `f32` or `f64` (f16/bf16
//!   accumulate in f32), and its `init` has that dtype and fits it.
//!
//! Values and scopes:
//! - Every value is defined by exactly one instruction, and every entry of
//!   `values` is defined by one.
//! - A value is used only after its definition and inside its scope: values
//!   defined in a loop body are not visible after the loop.
//! - The type recorded for a result is the type its instruction gives.
//! - Loop variables are below `loops`, each bound by one loop with a count
//!   of at least 1; index expressions use a loop variable only inside its
//!   loop and name grid axes below the grid's rank.
//!
//! Instruction types:
//! - No arithmetic on f16/bf16: only load, store, const, cast, select,
//!   broadcast and atomics take or give such values.
//! - Unary: `Not` takes bools or integers; `Neg`, `Abs`, `Relu` and `Sign`
//!   take numbers; every other op takes floats. The result has the
//!   operand's type.
//! - Binary: both operands have one dtype and one shape, which the result
//!   has (bool for comparisons); bitwise ops take bools or integers, `Pow`
//!   floats, arithmetic numbers.
//! - Select: the condition is bool, of the operands' shape; both operands
//!   have the result's type.
//! - Cast keeps the shape. Broadcast keeps dtype and rank and only repeats
//!   size-1 axes.
//! - Reduce: the axis is below the rank; the operand holds numbers; the
//!   result is the operand's type with that axis 1.
//! - Iota gives `i64` and its axis is below the result's rank.
//! - A constant's scalar has the result's dtype (a bool constant is a
//!   `Scalar::Bool`, an integer one a `Scalar::Int` of that dtype, ...)
//!   and is exactly representable in it.
//! - A scalar argument read is declared in `scalars`, and the result has
//!   its dtype, which is not f16/bf16 (scalar arguments are compute values).
//! - Accumulator updates use `Add`, `Mul`, `Maximum` or `Minimum` with an
//!   operand of the accumulator's type; reads give that type.
//!
//! Last point ([`Inst::LastPoint`]):
//! - It is the last instruction of the program's body, never nested.
//! - Its axis is a grid axis of extent at most 2^32 − 1; its counter is a
//!   `u32` `ReadWrite` parameter without `init`, with one element per group
//!   (the product of the other grid extents), that no view names.
//! - Its body uses no value defined outside it and no accumulator used
//!   outside it, and its index expressions do not name grid axis `axis`
//!   (so it does not matter which point of a group runs it); its stores
//!   are checked for disjointness over the other grid axes only.
//!
//! Scatters ([`Inst::ScatterAdd`]): the view is read and written, goes
//! through no window, and has an integer, `f32` or `f64` parameter; the
//! positions are integers and the operand has the view's tile type; the
//! span with the moved axis added lies in the buffer, and stores no
//! element twice from one tile or from two grid points; the flag is a
//! written `u32` parameter that starts at 0 and that no view names.
//!
//! Memory accesses (load, store, in_bounds, atomic):
//! - The view exists and the partition index has the view's rank.
//! - A loaded tile, and a stored or atomic operand, has the parameter's
//!   dtype and the view's tile shape; in_bounds gives bools of that shape.
//! - Loads read `Read`/`ReadWrite` parameters; stores and atomics write
//!   `Write`/`ReadWrite` ones.
//! - Every partition index the access can reach lies in the view's index
//!   space. The reachable range of each index axis is that of its affine
//!   expression over the grid extents and the loop counts.
//! - An unmasked access reaches only partitions wholly inside the extents,
//!   and goes through no window; stores and atomics go through no window.
//! - A window's start has the view's rank; the span from it to the extents
//!   lies in the parameter's buffer.
//! - Atomic ops match the dtype: and/or/xor take 32/64-bit integers, max/min
//!   those and `f32`, add/sub those and every float type; the scope is
//!   block or device.
//! - Plain stores from different grid points never meet: the view maps
//!   distinct span indices to distinct elements (checked conservatively:
//!   sorted by size, each stride exceeds the reach of the smaller ones),
//!   and every grid axis of extent above 1 appears with a nonzero
//!   coefficient in an index axis whose loop term cannot make two values of
//!   that grid coordinate give one partition. Each store is checked on its
//!   own; two store instructions are trusted to write disjoint partitions.

use super::{
    print, AccId, Access, IndexExpr, Inst, LoopId, ParamId, Program, ScalarKey, TileReduce, ValueId, ValueType, View,
};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, ThreadScope, UnaryOp};

mod access;

use access::atomic_accepts;

/// The largest rank of a tile, view or value: a tensor's.
use crate::shape::MAX_RANK;

/// Checks every invariant listed in the module docs.
pub fn verify(program: &Program) -> Result<()> {
    let mut v = Verifier {
        p: program,
        defined: vec![false; program.values.len()],
        visible: vec![false; program.values.len()],
        scopes: vec![Vec::new()],
        bound: vec![false; program.loops as usize],
        open: Vec::new(),
        last_axis: None,
    };
    v.program().map_err(|reason| Error::InvalidProgram {
        program: program.name.clone(),
        reason,
    })
}

type Check<T = ()> = std::result::Result<T, String>;

struct Verifier<'a> {
    p: &'a Program,
    /// Per value: defined by an instruction seen so far.
    defined: Vec<bool>,
    /// Per value: defined and in scope.
    visible: Vec<bool>,
    /// The values defined in each open block, innermost last.
    scopes: Vec<Vec<ValueId>>,
    /// Per loop variable: bound by a loop seen so far.
    bound: Vec<bool>,
    /// The open loops, innermost last, with their counts.
    open: Vec<(LoopId, u64)>,
    /// Inside the body of a last point: its grid axis.
    last_axis: Option<u8>,
}

impl<'a> Verifier<'a> {
    fn program(&mut self) -> Check {
        let p = self.p;
        if let Some(axis) = p.grid.iter().position(|&e| e == 0) {
            return Err(format!(
                "grid axis g{axis} has extent 0 (grid {}); an empty grid is not launched",
                print::list(&p.grid)
            ));
        }
        for (i, param) in p.params.iter().enumerate() {
            if let Some(init) = param.init {
                let here = format!("parameter p{i} `{}`", param.name);
                scalar_fits(init, param.dtype).map_err(|e| format!("{here}: init {e}"))?;
                if param.access == Access::Read {
                    return Err(format!("{here}: has an init value but is read-only"));
                }
            }
        }
        for (i, view) in p.views.iter().enumerate() {
            self.view_decl(view).map_err(|e| format!("view v{i}: {e}"))?;
        }
        for (i, ty) in p.values.iter().enumerate() {
            tile_type(ty).map_err(|e| format!("value %{i}: {ty}: {e}"))?;
        }
        for (i, acc) in p.accs.iter().enumerate() {
            let here = format!("accumulator acc{i}: {}", acc.ty);
            tile_type(&acc.ty).map_err(|e| format!("{here}: {e}"))?;
            let d = acc.ty.dtype;
            if !(d.is_int() || d == DType::F32 || d == DType::F64) {
                return Err(format!("{here}: accumulators hold integers, f32 or f64, not {d}"));
            }
            scalar_fits(acc.init, d).map_err(|e| format!("{here}: init {e}"))?;
        }
        self.block(&p.body)?;
        match self.defined.iter().position(|d| !d) {
            Some(i) => Err(format!("value %{i} has a type but no instruction defines it")),
            None => Ok(()),
        }
    }

    fn view_decl(&self, v: &View) -> Check {
        let Some(param) = self.p.params.get(v.param.index()) else {
            return Err(format!("parameter {} is not declared", v.param));
        };
        let rank = v.extents.len();
        if v.strides.len() != rank || v.tile.len() != rank || rank > MAX_RANK {
            return Err(format!(
                "extents {}, strides {} and tile {} must have one rank of at most {MAX_RANK}",
                print::list(&v.extents),
                print::list(&v.strides),
                print::list(&v.tile)
            ));
        }
        if v.tile.contains(&0) {
            return Err(format!("tile {} has an extent of 0", print::list(&v.tile)));
        }
        if v.padding.needs_float() && !param.dtype.is_float() {
            return Err(format!(
                "padding {} needs a float parameter, not {}",
                v.padding, param.dtype
            ));
        }
        if (!v.lower.is_empty() && v.lower.len() != rank) || (!v.upper.is_empty() && v.upper.len() != rank) {
            return Err(format!(
                "window start {}, end {} and extents {} must have one rank",
                print::list(&v.lower),
                print::list(&v.upper),
                print::list(&v.extents)
            ));
        }
        if (0..rank).any(|k| v.upper(k) > v.extents[k]) {
            return Err(format!(
                "window end {} lies past the extents {}",
                print::list(&v.upper),
                print::list(&v.extents)
            ));
        }
        if (0..rank).any(|k| v.lower(k) >= v.upper(k)) {
            // An empty window addresses nothing.
            return Ok(());
        }
        let (mut lo, mut hi) = (v.offset as i128, v.offset as i128);
        for (k, &s) in v.strides.iter().enumerate() {
            let reach = (v.upper(k) as i128 - v.lower(k) as i128 - 1) * s as i128;
            lo += reach.min(0);
            hi += reach.max(0);
        }
        if lo < 0 || hi >= param.len as i128 {
            return Err(format!(
                "the span (extents {}, strides {}, offset {}) reaches elements {lo}..={hi} but {} `{}` holds {}",
                print::list(&v.extents),
                print::list(&v.strides),
                v.offset,
                v.param,
                param.name,
                param.len
            ));
        }
        Ok(())
    }

    fn block(&mut self, insts: &[Inst]) -> Check {
        let p = self.p;
        for (k, inst) in insts.iter().enumerate() {
            let here = |e: String| format!("in `{}`: {e}", print::inst_line(p, inst));
            if let Inst::LastPoint { axis, counter, body } = inst {
                let last_of_program = std::ptr::eq(insts, &p.body[..]) && k + 1 == insts.len();
                self.last_point_header(*axis, *counter, body, last_of_program)
                    .map_err(here)?;
                // Nothing defined before is visible in the body.
                self.visible.iter_mut().for_each(|v| *v = false);
                self.scopes.push(Vec::new());
                self.last_axis = Some(*axis);
                self.block(body)?;
                self.last_axis = None;
                self.scopes.pop();
            } else if let Inst::Loop { var, count, body } = inst {
                self.loop_header(*var, *count).map_err(here)?;
                self.open.push((*var, *count));
                self.scopes.push(Vec::new());
                self.block(body)?;
                for v in self.scopes.pop().unwrap_or_default() {
                    self.visible[v.index()] = false;
                }
                self.open.pop();
            } else {
                self.inst(inst).map_err(here)?;
            }
        }
        Ok(())
    }

    fn last_point_header(&self, axis: u8, counter: ParamId, body: &[Inst], last_of_program: bool) -> Check {
        let p = self.p;
        if !last_of_program {
            return Err("a last point must be the last instruction of the program's body".into());
        }
        let Some(&extent) = p.grid.get(axis as usize) else {
            return Err(format!(
                "grid axis g{axis} does not exist (grid {})",
                print::list(&p.grid)
            ));
        };
        if extent > u32::MAX as u64 {
            return Err(format!(
                "grid axis g{axis} has {extent} points, more than a u32 ticket counts"
            ));
        }
        let groups: u64 = (p.grid.iter().enumerate())
            .filter(|&(k, _)| k != axis as usize)
            .map(|(_, &e)| e)
            .product();
        let Some(param) = p.params.get(counter.index()) else {
            return Err(format!("counter {counter} is not declared"));
        };
        if param.dtype != DType::U32 || param.access != Access::ReadWrite || param.init.is_some() || param.len != groups
        {
            return Err(format!(
                "counter {counter} `{}` must be a u32 read-write parameter without init holding {groups} elements (one per group)",
                param.name
            ));
        }
        if let Some(v) = p.views.iter().position(|v| v.param == counter) {
            return Err(format!("counter {counter} is only for tickets, but view v{v} names it"));
        }
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        accs_used(body, &mut inside);
        accs_used(&p.body[..p.body.len() - 1], &mut outside);
        if let Some(a) = inside.iter().find(|a| outside.contains(a)) {
            return Err(format!(
                "accumulator {a} is used both before the last point and in its body"
            ));
        }
        Ok(())
    }

    /// Checks that every element a gather through `v` may read, its view's
    /// span moved by up to `bound - 1` strides, lies in the parameter.
    fn gathered_span(&self, v: &View, stride: i64, bound: u64) -> Check {
        if bound == 0 {
            return Err("a gather needs at least one valid position (bound 0)".into());
        }
        if v.extents.contains(&0) {
            return Ok(());
        }
        let (mut lo, mut hi) = (v.offset as i128, v.offset as i128);
        let reaches = v
            .extents
            .iter()
            .map(|&e| e as i128)
            .zip(v.strides.iter().map(|&s| s as i128));
        for (extent, s) in reaches.chain([(bound as i128, stride as i128)]) {
            let reach = (extent - 1) * s;
            lo += reach.min(0);
            hi += reach.max(0);
        }
        let len = self.p.params[v.param.index()].len;
        if lo < 0 || hi >= len as i128 {
            return Err(format!(
                "a gather through the span (extents {}, strides {}, offset {}) with {bound} positions {stride} \
                 apart reaches elements {lo}..={hi} but {} holds {len}",
                print::list(&v.extents),
                print::list(&v.strides),
                v.offset,
                v.param
            ));
        }
        Ok(())
    }

    /// Checks that `flag` is a `u32` parameter a kernel may set, starting at
    /// zero, that no view names.
    fn flag(&self, flag: ParamId) -> Check {
        let Some(param) = self.p.params.get(flag.index()) else {
            return Err(format!("flag {flag} is not declared"));
        };
        let zero = matches!(param.init, Some(ScalarKey(Scalar::Int(0, _))));
        if param.dtype != DType::U32 || param.access == Access::Read || !zero || param.len == 0 {
            return Err(format!(
                "flag {flag} `{}` must be a written u32 parameter of at least one element that starts at 0",
                param.name
            ));
        }
        if let Some(v) = self.p.views.iter().position(|v| v.param == flag) {
            return Err(format!("flag {flag} only records bad indices, but view v{v} names it"));
        }
        Ok(())
    }

    fn loop_header(&mut self, var: LoopId, count: u64) -> Check {
        match self.bound.get_mut(var.index()) {
            None => return Err(format!("loop variable {var} is not below `loops` ({})", self.p.loops)),
            Some(true) => return Err(format!("loop variable {var} is bound by two loops")),
            Some(b) => *b = true,
        }
        if count == 0 {
            return Err("a loop must run at least once".into());
        }
        Ok(())
    }

    fn inst(&mut self, inst: &Inst) -> Check {
        let p = self.p;
        match inst {
            Inst::Load {
                dst,
                view,
                index,
                masked,
            } => {
                let v = self.access(*view, index, Some(*masked))?;
                self.param_access(v, false)?;
                self.define(*dst, self.tile_of(v, None))
            }
            Inst::Store {
                view,
                index,
                src,
                masked,
            } => {
                let ty = self.use_value(*src)?;
                let v = self.access(*view, index, Some(*masked))?;
                self.param_access(v, true)?;
                no_window(v)?;
                operand_is(*src, ty, &self.tile_of(v, None))?;
                self.disjoint(*view, v, index)
            }
            Inst::Gather {
                dst,
                view,
                index,
                at,
                stride,
                bound,
                flag,
            } => {
                let ty = self.use_value(*at)?;
                let v = self.access(*view, index, Some(true))?;
                self.param_access(v, false)?;
                no_window(v)?;
                let tile = self.tile_of(v, None);
                if !ty.dtype.is_int() || ty.shape != tile.shape {
                    return Err(format!(
                        "the positions {at}: {ty} of a gather must be integers of the tile's shape {}",
                        print::list(&tile.shape)
                    ));
                }
                self.gathered_span(v, *stride, *bound)?;
                if let Some(flag) = flag {
                    self.flag(*flag)?;
                }
                self.define(*dst, tile)
            }
            Inst::ScatterAdd {
                view,
                index,
                at,
                stride,
                bound,
                src,
                flag,
            } => {
                let positions = self.use_value(*at)?;
                let ty = self.use_value(*src)?;
                let v = self.access(*view, index, Some(true))?;
                self.param_access(v, false)?;
                self.param_access(v, true)?;
                no_window(v)?;
                let tile = self.tile_of(v, None);
                if !positions.dtype.is_int() || positions.shape != tile.shape {
                    return Err(format!(
                        "the positions {at}: {positions} of a scatter must be integers of the tile's shape {}",
                        print::list(&tile.shape)
                    ));
                }
                operand_is(*src, ty, &tile)?;
                if !tile.dtype.is_int() && !matches!(tile.dtype, DType::F32 | DType::F64) {
                    return Err(format!("a scatter adds integers, f32 or f64, not {}", tile.dtype));
                }
                self.gathered_span(v, *stride, *bound)?;
                self.flag(*flag)?;
                // The moved axis is an axis of the updated span: no two
                // elements of a tile, nor two grid points, may reach one element.
                let mut moved = v.clone();
                moved.extents.push(*bound);
                moved.strides.push(*stride);
                moved.tile.push(1);
                let mut at_index = index.clone();
                at_index.push(IndexExpr::constant(0));
                self.disjoint(*view, &moved, &at_index)
            }
            Inst::InBounds { dst, view, index } => {
                let v = self.access(*view, index, None)?;
                self.define(*dst, self.tile_of(v, Some(DType::Bool)))
            }
            Inst::Const { dst, value } => {
                let ty = self.declared(*dst)?;
                scalar_fits(*value, ty.dtype)?;
                self.define(*dst, ty.clone())
            }
            Inst::Scalar { dst, scalar } => {
                let ty = self.declared(*dst)?;
                let Some(&d) = self.p.scalars.get(scalar.index()) else {
                    return Err(format!("scalar argument {scalar} is not declared"));
                };
                if d != ty.dtype || d.compute_type() != d {
                    return Err(format!(
                        "scalar argument {scalar} of {d} read into a {} tile (scalar arguments are \
                         compute values: not f16 or bf16)",
                        ty.dtype
                    ));
                }
                self.define(*dst, ty.clone())
            }
            Inst::Iota { dst, axis, index } => {
                let ty = self.declared(*dst)?;
                self.reach(index)?;
                if !matches!(ty.dtype, DType::I64 | DType::I32) || *axis as usize >= ty.shape.len() {
                    return Err(format!(
                        "iota gives i64 or i32 with an axis below its rank, not {ty} along axis {axis}"
                    ));
                }
                self.define(*dst, ty.clone())
            }
            Inst::Unary { dst, op, src } => {
                let ty = self.use_value(*src)?;
                no_half(ty)?;
                if !unary_accepts(*op, ty.dtype) {
                    return Err(format!("{op:?} does not take {} values ({src}: {ty})", ty.dtype));
                }
                self.define(*dst, ty.clone())
            }
            Inst::Binary { dst, op, lhs, rhs } => {
                let (l, r) = (self.use_value(*lhs)?, self.use_value(*rhs)?);
                if l != r {
                    return Err(format!("operands {lhs}: {l} and {rhs}: {r} differ in type"));
                }
                no_half(l)?;
                if !binary_accepts(*op, l.dtype) {
                    return Err(format!("{op:?} does not take {} values ({lhs}: {l})", l.dtype));
                }
                let mut ty = l.clone();
                if op.is_comparison() {
                    ty.dtype = DType::Bool;
                }
                self.define(*dst, ty)
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => {
                let c = self.use_value(*cond)?;
                let (a, b) = (self.use_value(*on_true)?, self.use_value(*on_false)?);
                if c.dtype != DType::Bool || c.shape != a.shape {
                    return Err(format!(
                        "the condition {cond}: {c} must be bool of the shape of {on_true}: {a}"
                    ));
                }
                if a != b {
                    return Err(format!("operands {on_true}: {a} and {on_false}: {b} differ in type"));
                }
                self.define(*dst, a.clone())
            }
            Inst::Cast { dst, src } => {
                let (s, d) = (self.use_value(*src)?, self.declared(*dst)?);
                if s.shape != d.shape {
                    return Err(format!("a cast keeps the shape, but {src}: {s} becomes {dst}: {d}"));
                }
                self.define(*dst, d.clone())
            }
            Inst::Broadcast { dst, src } => {
                let (s, d) = (self.use_value(*src)?, self.declared(*dst)?);
                let repeats_ones =
                    s.shape.len() == d.shape.len() && s.shape.iter().zip(&d.shape).all(|(&a, &b)| a == b || a == 1);
                if s.dtype != d.dtype || !repeats_ones {
                    return Err(format!(
                        "a broadcast keeps the dtype and rank and repeats only size-1 axes, but {src}: {s} becomes {dst}: {d}"
                    ));
                }
                self.define(*dst, d.clone())
            }
            Inst::Reduce { dst, src, axis, op } => {
                let s = self.use_value(*src)?;
                no_half(s)?;
                if *op == TileReduce::LogAddExp {
                    return Err("logaddexp combines scans, not reductions".into());
                }
                if !(s.dtype.is_int() || s.dtype.is_float()) {
                    return Err(format!("reductions take numbers, not {src}: {s}"));
                }
                let mut ty = s.clone();
                match ty.shape.get_mut(*axis as usize) {
                    Some(d) => *d = 1,
                    None => return Err(format!("axis {axis} is out of range for {src}: {s}")),
                }
                self.define(*dst, ty)
            }
            Inst::Uniform {
                dst,
                counter,
                key,
                bits,
            } => {
                let (c, k) = (self.use_value(*counter)?.clone(), self.use_value(*key)?.clone());
                let ty = self.declared(*dst)?.clone();
                let fits = match ty.dtype {
                    DType::F32 => (1..=24).contains(bits),
                    DType::F64 => (1..=53).contains(bits),
                    _ => false,
                };
                if !fits || c.dtype != DType::I64 || k.dtype != DType::I64 || c.shape != ty.shape || k.shape != ty.shape
                {
                    return Err(format!(
                        "uniform values are f32 (up to 24 bits) or f64 (up to 53) from i64 counters and keys of their shape, not {ty} with {bits} bits from {counter}: {c} and {key}: {k}"
                    ));
                }
                self.define(*dst, ty)
            }
            Inst::Scan { dst, src, axis, op } => {
                let s = self.use_value(*src)?;
                no_half(s)?;
                if !(s.dtype.is_int() || s.dtype.is_float()) || (*op == TileReduce::LogAddExp && !s.dtype.is_float()) {
                    return Err(format!("scans take numbers (logaddexp floats), not {src}: {s}"));
                }
                if *axis as usize >= s.shape.len() {
                    return Err(format!("axis {axis} is out of range for {src}: {s}"));
                }
                self.define(*dst, s.clone())
            }
            Inst::AccUpdate { acc, op, src } => {
                let s = self.use_value(*src)?;
                let Some(a) = p.accs.get(acc.index()) else {
                    return Err(format!("accumulator {acc} is not declared"));
                };
                if !matches!(
                    op,
                    BinaryOp::Add | BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum
                ) {
                    return Err(format!(
                        "accumulators update by add, mul, maximum or minimum, not {op:?}"
                    ));
                }
                operand_is(*src, s, &a.ty)
            }
            Inst::AccRead { dst, acc } => match p.accs.get(acc.index()) {
                Some(a) => self.define(*dst, a.ty.clone()),
                None => Err(format!("accumulator {acc} is not declared")),
            },
            Inst::Atomic {
                op,
                view,
                index,
                src,
                masked,
                scope,
            } => {
                let s = self.use_value(*src)?;
                let v = self.access(*view, index, Some(*masked))?;
                self.param_access(v, true)?;
                no_window(v)?;
                operand_is(*src, s, &self.tile_of(v, None))?;
                if !atomic_accepts(*op, s.dtype) {
                    return Err(format!("atomic {op:?} does not take {} elements", s.dtype));
                }
                if !matches!(scope, ThreadScope::Block | ThreadScope::Device) {
                    return Err(format!("atomics have block or device scope, not {}", scope.name()));
                }
                Ok(())
            }
            // Loops and last points are checked by `block`.
            Inst::Barrier | Inst::Loop { .. } | Inst::LastPoint { .. } => Ok(()),
        }
    }

    /// The recorded type of `dst`.
    fn declared(&self, dst: ValueId) -> Check<&'a ValueType> {
        self.p
            .values
            .get(dst.index())
            .ok_or_else(|| format!("{dst} has no type (the program has {} values)", self.p.values.len()))
    }

    /// Marks `dst` defined in the current scope, checking its recorded type.
    fn define(&mut self, dst: ValueId, ty: ValueType) -> Check {
        let declared = self.declared(dst)?;
        if self.defined[dst.index()] {
            return Err(format!("{dst} is defined twice"));
        }
        if *declared != ty {
            return Err(format!(
                "{dst} is recorded as {declared} but the instruction gives {ty}"
            ));
        }
        self.defined[dst.index()] = true;
        self.visible[dst.index()] = true;
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(dst);
        }
        Ok(())
    }

    /// The type of `v`, which must be defined and in scope.
    fn use_value(&self, v: ValueId) -> Check<&'a ValueType> {
        let ty = self.declared(v)?;
        if !self.defined[v.index()] {
            Err(format!("{v} is used before it is defined"))
        } else if !self.visible[v.index()] && self.last_axis.is_some() {
            Err(format!(
                "{v} is not in scope: the body of a last point sees only values defined in it"
            ))
        } else if !self.visible[v.index()] {
            Err(format!(
                "{v} is defined in a loop body that has ended; carry it out through an accumulator"
            ))
        } else {
            Ok(ty)
        }
    }
}

/// Collects the accumulators that `body` (nested blocks included) updates or reads.
fn accs_used(body: &[Inst], out: &mut Vec<AccId>) {
    for inst in body {
        match inst {
            Inst::AccUpdate { acc, .. } | Inst::AccRead { acc, .. } => out.push(*acc),
            _ => {}
        }
        if let Some(nested) = inst.nested() {
            accs_used(nested, out);
        }
    }
}

/// Checks that an operand `src` of type `ty` has the type `want`.
/// Refuses a window as the view of a store or atomic: windows are for reads.
fn no_window(v: &View) -> Check {
    if v.is_window() {
        return Err(format!(
            "only loads go through a window (start {}), not stores or atomics",
            print::list(&v.lower)
        ));
    }
    Ok(())
}

fn operand_is(src: ValueId, ty: &ValueType, want: &ValueType) -> Check {
    if ty == want {
        Ok(())
    } else {
        Err(format!("the operand {src}: {ty} should be {want}"))
    }
}

/// Checks a value or accumulator type's rank and extents.
fn tile_type(ty: &ValueType) -> Check {
    if ty.shape.len() > MAX_RANK || ty.shape.contains(&0) {
        return Err(format!("tiles have rank at most {MAX_RANK} and extents of at least 1"));
    }
    Ok(())
}

/// Checks that `value` is a scalar of `dtype` that `dtype` holds exactly.
fn scalar_fits(value: ScalarKey, dtype: DType) -> Check {
    let kind_ok = match value.0 {
        Scalar::Bool(_) => dtype == DType::Bool,
        Scalar::Int(_, d) => d == dtype && dtype.is_int(),
        Scalar::Float(_, d) => d == dtype && dtype.is_float(),
    };
    if !kind_ok {
        return Err(format!("{} is not a scalar of dtype {dtype}", value.0));
    }
    if ScalarKey(value.0.cast(dtype)) != value {
        return Err(format!("{} is not representable as {dtype}", value.0));
    }
    Ok(())
}

/// Rejects f16/bf16 operands of arithmetic.
fn no_half(ty: &ValueType) -> Check {
    if matches!(ty.dtype, DType::F16 | DType::BF16) {
        return Err(format!("no arithmetic on {ty}: cast it to f32 first"));
    }
    Ok(())
}

fn unary_accepts(op: UnaryOp, d: DType) -> bool {
    match op {
        UnaryOp::Not => d == DType::Bool || d.is_int(),
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Sign => d.is_int() || d.is_float(),
        _ => d.is_float(),
    }
}

fn binary_accepts(op: BinaryOp, d: DType) -> bool {
    match op {
        _ if op.is_comparison() => true,
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => d == DType::Bool || d.is_int(),
        BinaryOp::Pow => d.is_float(),
        _ => d.is_int() || d.is_float(),
    }
}
