//! A small builder for tile kernel programs: one typed method per
//! instruction, each allocating its result with the inferred type.
//!
//! The builder does not check operands beyond what it needs to infer a
//! result type; [`Builder::finish`] runs the verifier, which reports every
//! misuse with the instruction that made it. Misuse the builder itself sees
//! (an unknown view, value or accumulator; a constant that its dtype cannot
//! hold) is recorded and reported by `finish` too, so no method panics.
//!
//! Pure instructions (constants, elementwise operations, selects, casts,
//! broadcasts) are numbered by value: asking again for one already made
//! with the same operands, in the block being filled or a block around it,
//! returns the value made first. A lowering can then compute a term where
//! it needs it without computing it twice.

use super::{
    verify, AccDecl, AccId, Access, Accuracy, AtomicOp, Dims, IndexExpr, Inst, LoopId, MathMode, Param, ParamId,
    Program, ScalarId, ScalarKey, TileReduce, ValueId, ValueType, View, ViewId,
};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, Padding, ThreadScope, UnaryOp};
use std::collections::HashMap;

/// A pure instruction by what it computes: its operation and operands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Pure {
    Const(ScalarKey, ValueType),
    Unary(UnaryOp, ValueId),
    Binary(BinaryOp, ValueId, ValueId),
    Select(ValueId, ValueId, ValueId),
    Cast(ValueId, DType),
    Broadcast(ValueId, Dims<u32>),
}

/// Builds a [`Program`] instruction by instruction.
///
/// ```
/// use tilefuse::kernels::ir::{Access, Builder, IndexExpr};
/// use tilefuse::tile::Padding;
/// use tilefuse::{DType, Scalar};
///
/// // out[i] = x[i] + 1 for 1000 elements, in tiles of 256.
/// let mut b = Builder::new("add_one", &[4]);
/// let x = b.param("x", DType::F32, 1000, Access::Read);
/// let out = b.param("out", DType::F32, 1000, Access::Write);
/// let vx = b.view_contiguous(x, &[1000], &[256], Padding::Zero);
/// let vout = b.view_contiguous(out, &[1000], &[256], Padding::Zero);
/// let t = b.load(vx, &[IndexExpr::grid(0)], true);
/// let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[256]);
/// let y = b.binary(tilefuse::graph::BinaryOp::Add, t, one);
/// b.store(vout, &[IndexExpr::grid(0)], y, true);
/// let program = b.finish()?;
/// assert!(program.to_string().contains("store.masked v1[g0], %2"));
/// # Ok::<(), tilefuse::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    program: Program,
    /// The instruction lists being filled: the body, then one per open loop.
    blocks: Vec<Vec<Inst>>,
    /// Misuse seen while building, reported by `finish`.
    errors: Vec<String>,
    /// The pure values made in each block of `blocks`, by what they compute.
    known: Vec<HashMap<Pure, ValueId>>,
}

impl Builder {
    /// Starts an empty program named `name` over a grid of extents `grid`.
    pub fn new(name: impl Into<String>, grid: &[u64]) -> Builder {
        Builder {
            program: Program {
                name: name.into(),
                params: Vec::new(),
                scalars: Vec::new(),
                views: Vec::new(),
                values: Vec::new(),
                accs: Vec::new(),
                loops: 0,
                grid: grid.iter().copied().collect(),
                body: Vec::new(),
                math: MathMode::Precise,
                accuracy: Accuracy::F32,
            },
            blocks: vec![Vec::new()],
            errors: Vec::new(),
            known: vec![HashMap::new()],
        }
    }

    /// Declares the next kernel parameter: a buffer of `len` elements.
    pub fn param(&mut self, name: impl Into<String>, dtype: DType, len: u64, access: Access) -> ParamId {
        self.program.params.push(Param {
            name: name.into(),
            dtype,
            len,
            access,
            init: None,
        });
        ParamId(self.program.params.len() as u32 - 1)
    }

    /// Declares a parameter that the runtime fills with `init` (rounded to
    /// `dtype`) before the program runs.
    pub fn param_init(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        len: u64,
        access: Access,
        init: Scalar,
    ) -> ParamId {
        let id = self.param(name, dtype, len, access);
        let init = self.scalar_of(init, dtype, "param_init");
        self.program.params[id.index()].init = Some(init);
        id
    }

    /// Declares a partition view of `param`: the span of `extents` with
    /// element strides `strides` starting at element `offset`, cut into
    /// tiles of shape `tile`.
    pub fn view(
        &mut self,
        param: ParamId,
        extents: &[u64],
        strides: &[i64],
        offset: u64,
        tile: &[u32],
        padding: Padding,
    ) -> ViewId {
        self.program.views.push(View {
            param,
            extents: extents.iter().copied().collect(),
            strides: strides.iter().copied().collect(),
            offset,
            lower: Dims::new(),
            upper: Dims::new(),
            tile: tile.iter().copied().collect(),
            padding,
        });
        ViewId(self.program.views.len() as u32 - 1)
    }

    /// Declares a window of `param`: the partitions of a span of
    /// `extents`, of which only the indices `lower[k] .. upper[k]` along
    /// each axis `k` are in bounds, element `lower` at `offset` (see
    /// [`View`]). Loads of the others are masked.
    #[allow(clippy::too_many_arguments)]
    pub fn window(
        &mut self,
        param: ParamId,
        lower: &[u64],
        upper: &[u64],
        extents: &[u64],
        strides: &[i64],
        offset: u64,
        tile: &[u32],
        padding: Padding,
    ) -> ViewId {
        let id = self.view(param, extents, strides, offset, tile, padding);
        self.program.views[id.index()].lower = lower.iter().copied().collect();
        self.program.views[id.index()].upper = upper.iter().copied().collect();
        id
    }

    /// Declares a view of `param` as a row-major array of `extents` at
    /// offset 0.
    pub fn view_contiguous(&mut self, param: ParamId, extents: &[u64], tile: &[u32], padding: Padding) -> ViewId {
        let mut strides = vec![0i64; extents.len()];
        let mut step = 1i64;
        for (s, &e) in strides.iter_mut().zip(extents).rev() {
            *s = step;
            step = step.saturating_mul(e.try_into().unwrap_or(i64::MAX));
        }
        self.view(param, extents, &strides, 0, tile, padding)
    }

    /// Sets how transcendental functions are computed.
    pub fn math(&mut self, mode: MathMode) {
        self.program.math = mode;
    }

    /// Sets the accuracy the program's f32 transcendentals owe its results.
    pub fn accuracy(&mut self, accuracy: Accuracy) {
        self.program.accuracy = accuracy;
    }

    /// The accuracy the results of the parameters declared so far need
    /// ([`Accuracy::for_results`] of the written ones).
    pub fn result_accuracy(&self) -> Accuracy {
        Accuracy::for_results(
            self.program
                .params
                .iter()
                .filter(|p| p.access != Access::Read)
                .map(|p| p.dtype),
        )
    }

    /// Loads the partition `index` of `view`: a tile of the view's tile
    /// shape and the parameter's dtype.
    pub fn load(&mut self, view: ViewId, index: &[IndexExpr], masked: bool) -> ValueId {
        let ty = self.view_tile(view, None, "load");
        let dst = self.value(ty);
        self.push(Inst::Load {
            dst,
            view,
            index: index.iter().copied().collect(),
            masked,
        });
        dst
    }

    /// Loads partition `index` of `view` with each element moved `at *
    /// stride` elements, `at` checked against `0 .. bound`; an index out
    /// of range sets `flag` (see [`Inst::Gather`]).
    pub fn gather(
        &mut self,
        view: ViewId,
        index: &[IndexExpr],
        at: ValueId,
        stride: i64,
        bound: u64,
        flag: Option<ParamId>,
    ) -> ValueId {
        let ty = self.view_tile(view, None, "gather");
        let dst = self.value(ty);
        self.push(Inst::Gather {
            dst,
            view,
            index: index.iter().copied().collect(),
            at,
            stride,
            bound,
            flag,
        });
        dst
    }

    /// Adds `src` to partition `index` of `view` with each element moved
    /// `at * stride` elements, `at` checked against `0 .. bound`; an index
    /// out of range sets `flag` (see [`Inst::ScatterAdd`]).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_add(
        &mut self,
        view: ViewId,
        index: &[IndexExpr],
        at: ValueId,
        stride: i64,
        bound: u64,
        src: ValueId,
        flag: ParamId,
    ) {
        self.push(Inst::ScatterAdd {
            view,
            index: index.iter().copied().collect(),
            at,
            stride,
            bound,
            src,
            flag,
        });
    }

    /// Stores `src` to the partition `index` of `view`.
    pub fn store(&mut self, view: ViewId, index: &[IndexExpr], src: ValueId, masked: bool) {
        self.push(Inst::Store {
            view,
            index: index.iter().copied().collect(),
            src,
            masked,
        });
    }

    /// A bool tile telling which elements of partition `index` of `view`
    /// lie inside the view's extents.
    pub fn in_bounds(&mut self, view: ViewId, index: &[IndexExpr]) -> ValueId {
        let ty = self.view_tile(view, Some(DType::Bool), "in_bounds");
        let dst = self.value(ty);
        self.push(Inst::InBounds {
            dst,
            view,
            index: index.iter().copied().collect(),
        });
        dst
    }

    /// A `dtype` tile of `shape` filled with `value` (rounded to `dtype`;
    /// a value an integer or bool dtype cannot hold exactly is misuse).
    pub fn constant(&mut self, value: Scalar, dtype: DType, shape: &[u32]) -> ValueId {
        let value = self.scalar_of(value, dtype, "constant");
        let ty = ValueType::new(dtype, shape);
        self.pure(Pure::Const(value, ty.clone()), ty, |dst| Inst::Const { dst, value })
    }

    /// Declares the next scalar argument of the launch, of `dtype`.
    pub fn scalar_param(&mut self, dtype: DType) -> ScalarId {
        self.program.scalars.push(dtype);
        ScalarId(self.program.scalars.len() as u32 - 1)
    }

    /// A tile of `shape` filled with the value of scalar argument `scalar`
    /// (of the argument's dtype).
    pub fn scalar(&mut self, scalar: ScalarId, shape: &[u32]) -> ValueId {
        let dtype = match self.program.scalars.get(scalar.index()) {
            Some(&d) => d,
            None => {
                self.errors.push(format!("scalar: argument {scalar} is not declared"));
                DType::F32
            }
        };
        let dst = self.value(ValueType::new(dtype, shape));
        self.push(Inst::Scalar { dst, scalar });
        dst
    }

    /// An `i64` tile of `shape` holding each element's view-space index
    /// along `axis` for partition index `index` along that axis.
    pub fn iota(&mut self, shape: &[u32], axis: u8, index: IndexExpr) -> ValueId {
        self.iota_of(shape, axis, index, DType::I64)
    }

    /// [`Builder::iota`] as `dtype` values, i64 or i32 (for indices that
    /// fit: an i32 iota wraps past `i32::MAX`).
    pub fn iota_of(&mut self, shape: &[u32], axis: u8, index: IndexExpr, dtype: DType) -> ValueId {
        let dst = self.value(ValueType::new(dtype, shape));
        self.push(Inst::Iota { dst, axis, index });
        dst
    }

    /// `op(src)` elementwise, of `src`'s type.
    pub fn unary(&mut self, op: UnaryOp, src: ValueId) -> ValueId {
        let ty = self.type_of(src);
        self.pure(Pure::Unary(op, src), ty, |dst| Inst::Unary { dst, op, src })
    }

    /// `op(lhs, rhs)` elementwise: of `lhs`'s type, or bool for comparisons.
    pub fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let mut ty = self.type_of(lhs);
        if op.is_comparison() {
            ty.dtype = DType::Bool;
        }
        self.pure(Pure::Binary(op, lhs, rhs), ty, |dst| Inst::Binary { dst, op, lhs, rhs })
    }

    /// `cond ? on_true : on_false` elementwise, of `on_true`'s type.
    pub fn select(&mut self, cond: ValueId, on_true: ValueId, on_false: ValueId) -> ValueId {
        let ty = self.type_of(on_true);
        self.pure(Pure::Select(cond, on_true, on_false), ty, |dst| Inst::Select {
            dst,
            cond,
            on_true,
            on_false,
        })
    }

    /// `src` converted to `dtype`.
    pub fn cast(&mut self, src: ValueId, dtype: DType) -> ValueId {
        let mut ty = self.type_of(src);
        ty.dtype = dtype;
        self.pure(Pure::Cast(src, dtype), ty, |dst| Inst::Cast { dst, src })
    }

    /// `src` with its size-1 axes repeated to `shape`.
    pub fn broadcast(&mut self, src: ValueId, shape: &[u32]) -> ValueId {
        let ty = ValueType::new(self.type_of(src).dtype, shape);
        self.pure(Pure::Broadcast(src, ty.shape.clone()), ty, |dst| Inst::Broadcast {
            dst,
            src,
        })
    }

    /// The reduction of `src` along `axis`, kept with length 1.
    pub fn reduce(&mut self, op: TileReduce, src: ValueId, axis: u8) -> ValueId {
        let mut ty = self.type_of(src);
        // An axis out of range is left for the verifier to report.
        if let Some(d) = ty.shape.get_mut(axis as usize) {
            *d = 1;
        }
        let dst = self.value(ty);
        self.push(Inst::Reduce { dst, op, src, axis });
        dst
    }

    /// Uniform values of `dtype` (f32 or f64) on the grid `2^-bits` from
    /// i64 tiles `counter` and `key` (see [`Inst::Uniform`]).
    pub fn uniform(&mut self, counter: ValueId, key: ValueId, dtype: DType, bits: u8) -> ValueId {
        let mut ty = self.type_of(counter);
        ty.dtype = dtype;
        let dst = self.value(ty);
        self.push(Inst::Uniform {
            dst,
            counter,
            key,
            bits,
        });
        dst
    }

    /// The inclusive scan of `src` along `axis` by `op`.
    pub fn scan(&mut self, op: TileReduce, src: ValueId, axis: u8) -> ValueId {
        let ty = self.type_of(src);
        let dst = self.value(ty);
        self.push(Inst::Scan { dst, op, src, axis });
        dst
    }

    /// Declares an accumulator of type `ty` starting at `init` (rounded to
    /// its dtype) at each grid point.
    pub fn acc(&mut self, ty: ValueType, init: Scalar) -> AccId {
        let init = self.scalar_of(init, ty.dtype, "acc");
        self.program.accs.push(AccDecl { ty, init });
        AccId(self.program.accs.len() as u32 - 1)
    }

    /// `acc = op(acc, src)` elementwise.
    pub fn acc_update(&mut self, acc: AccId, op: BinaryOp, src: ValueId) {
        self.push(Inst::AccUpdate { acc, op, src });
    }

    /// A snapshot of `acc`.
    pub fn acc_read(&mut self, acc: AccId) -> ValueId {
        let ty = match self.program.accs.get(acc.index()) {
            Some(a) => a.ty.clone(),
            None => self.misuse(format!("acc_read: accumulator {acc} is not declared")),
        };
        let dst = self.value(ty);
        self.push(Inst::AccRead { dst, acc });
        dst
    }

    /// A loop of `count` iterations whose body `body` fills, given the
    /// builder and the loop variable. Returns the loop variable.
    pub fn loop_(&mut self, count: u64, body: impl FnOnce(&mut Builder, LoopId)) -> LoopId {
        let var = LoopId(self.program.loops);
        self.program.loops += 1;
        self.open();
        body(self, var);
        let body = self.close();
        self.push(Inst::Loop { var, count, body });
        var
    }

    /// A relaxed atomic `op` of each element of partition `index` of
    /// `view` with the matching element of `src`.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        view: ViewId,
        index: &[IndexExpr],
        src: ValueId,
        masked: bool,
        scope: ThreadScope,
    ) {
        self.push(Inst::Atomic {
            op,
            view,
            index: index.iter().copied().collect(),
            src,
            masked,
            scope,
        });
    }

    /// Ends the program with [`Inst::LastPoint`]: `body` runs once per group
    /// of grid points that differ only along grid axis `axis`, after all of
    /// them, counting finished points in the `u32` parameter `counter`.
    pub fn last_point(&mut self, axis: u8, counter: ParamId, body: impl FnOnce(&mut Builder)) {
        self.open();
        body(self);
        let body = self.close();
        self.push(Inst::LastPoint { axis, counter, body });
    }

    /// A barrier among the threads working on one grid point.
    pub fn barrier(&mut self) {
        self.push(Inst::Barrier);
    }

    /// The type of `value`, if it has been allocated.
    pub fn value_type(&self, value: ValueId) -> Option<&ValueType> {
        self.program.values.get(value.index())
    }

    /// The finished program, checked by [`verify`]; the first misuse the
    /// builder recorded, if any, comes first.
    pub fn finish(mut self) -> Result<Program> {
        if let Some(reason) = self.errors.into_iter().next() {
            return Err(Error::InvalidProgram {
                program: self.program.name,
                reason,
            });
        }
        self.program.body = self.blocks.pop().unwrap_or_default();
        verify(&self.program)?;
        Ok(self.program)
    }

    /// Starts a nested block.
    fn open(&mut self) {
        self.blocks.push(Vec::new());
        self.known.push(HashMap::new());
    }

    /// Ends the innermost block, whose values are not seen after it.
    fn close(&mut self) -> Vec<Inst> {
        self.known.pop();
        self.blocks.pop().unwrap_or_default()
    }

    /// The value computing `key`: one made before in this block or a block
    /// around it, else a new one of type `ty` made by `inst`.
    fn pure(&mut self, key: Pure, ty: ValueType, inst: impl FnOnce(ValueId) -> Inst) -> ValueId {
        if let Some(&v) = self.known.iter().rev().find_map(|k| k.get(&key)) {
            return v;
        }
        let dst = self.value(ty);
        self.push(inst(dst));
        if let Some(k) = self.known.last_mut() {
            k.insert(key, dst);
        }
        dst
    }

    fn push(&mut self, inst: Inst) {
        if let Some(block) = self.blocks.last_mut() {
            block.push(inst);
        }
    }

    fn value(&mut self, ty: ValueType) -> ValueId {
        self.program.values.push(ty);
        ValueId(self.program.values.len() as u32 - 1)
    }

    /// Records `reason` and gives a placeholder type so building can go on.
    fn misuse(&mut self, reason: String) -> ValueType {
        self.errors.push(reason);
        ValueType::new(DType::Bool, &[])
    }

    fn type_of(&mut self, value: ValueId) -> ValueType {
        match self.program.values.get(value.index()) {
            Some(ty) => ty.clone(),
            None => self.misuse(format!("value {value} was not made by this builder")),
        }
    }

    /// The tile type of `view` with the parameter's dtype or `dtype`.
    fn view_tile(&mut self, view: ViewId, dtype: Option<DType>, op: &str) -> ValueType {
        let Some(v) = self.program.views.get(view.index()) else {
            return self.misuse(format!("{op}: view {view} is not declared"));
        };
        let Some(p) = self.program.params.get(v.param.index()) else {
            return self.misuse(format!(
                "{op}: view {view} names parameter {} that is not declared",
                v.param
            ));
        };
        ValueType {
            dtype: dtype.unwrap_or(p.dtype),
            shape: Dims::from_slice(&v.tile),
        }
    }

    /// `value` rounded to `dtype`; integer and bool targets must hold it exactly.
    fn scalar_of(&mut self, value: Scalar, dtype: DType, op: &str) -> ScalarKey {
        let cast = value.cast(dtype);
        if !dtype.is_float() && ScalarKey(cast.cast(value.dtype())) != ScalarKey(value) {
            self.errors
                .push(format!("{op}: {value} is not exactly representable as {dtype}"));
        }
        ScalarKey(cast)
    }
}
