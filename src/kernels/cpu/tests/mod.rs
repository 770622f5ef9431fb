//! Tests of the CPU executor, on programs built with the small helper below.

mod memory;
mod ops;
mod programs;

use super::{execute, Arg};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::graph::{BinaryOp, UnaryOp};
use crate::kernels::ir::*;
use crate::storage::HostBuffer;
use crate::tile::Padding;

/// Builds test programs from their parts; values get their types from the
/// instruction that defines them.
pub(super) struct Prog {
    p: Program,
    /// Open bodies: the program's, then one per loop being built.
    bodies: Vec<Vec<Inst>>,
    loops: Vec<(LoopId, u64)>,
}

/// Grid coordinate `axis` as a partition index term.
pub(super) fn g(axis: u8) -> IndexExpr {
    IndexExpr::grid(axis)
}

/// The constant partition index term `c`.
pub(super) fn c(c: u64) -> IndexExpr {
    IndexExpr::constant(c)
}

impl Prog {
    pub fn new(grid: &[u64]) -> Prog {
        Prog {
            p: Program {
                name: "test".into(),
                params: vec![],
                views: vec![],
                values: vec![],
                accs: vec![],
                loops: 0,
                grid: grid.iter().copied().collect(),
                body: vec![],
                math: MathMode::Precise,
            },
            bodies: vec![vec![]],
            loops: vec![],
        }
    }

    pub fn param(&mut self, dtype: DType, len: u64, access: Access) -> ParamId {
        self.p.params.push(Param {
            name: format!("p{}", self.p.params.len()),
            dtype,
            len,
            access,
            init: None,
        });
        ParamId(self.p.params.len() as u32 - 1)
    }

    pub fn init(&mut self, param: ParamId, value: Scalar) {
        self.p.params[param.index()].init = Some(ScalarKey(value));
    }

    pub fn view(&mut self, param: ParamId, extents: &[u64], strides: &[i64], offset: u64, tile: &[u32]) -> ViewId {
        self.p.views.push(View {
            param,
            extents: extents.iter().copied().collect(),
            strides: strides.iter().copied().collect(),
            offset,
            tile: tile.iter().copied().collect(),
            padding: Padding::Zero,
        });
        ViewId(self.p.views.len() as u32 - 1)
    }

    /// A row-major view of the whole parameter with the given extents.
    pub fn dense(&mut self, param: ParamId, extents: &[u64], tile: &[u32]) -> ViewId {
        let mut strides = vec![0i64; extents.len()];
        let mut s = 1i64;
        for k in (0..extents.len()).rev() {
            strides[k] = s;
            s *= extents[k] as i64;
        }
        self.view(param, extents, &strides, 0, tile)
    }

    pub fn pad(&mut self, view: ViewId, padding: Padding) {
        self.p.views[view.index()].padding = padding;
    }

    pub fn value(&mut self, dtype: DType, shape: &[u32]) -> ValueId {
        self.p.values.push(ValueType {
            dtype,
            shape: shape.iter().copied().collect(),
        });
        ValueId(self.p.values.len() as u32 - 1)
    }

    pub fn ty(&self, v: ValueId) -> ValueType {
        self.p.values[v.index()].clone()
    }

    pub fn push(&mut self, inst: Inst) {
        self.bodies.last_mut().expect("an open body").push(inst);
    }

    pub fn load(&mut self, view: ViewId, index: &[IndexExpr], masked: bool) -> ValueId {
        let v = &self.p.views[view.index()];
        let (dtype, tile) = (self.p.params[v.param.index()].dtype, v.tile.clone());
        let dst = self.value(dtype, &tile);
        self.push(Inst::Load {
            dst,
            view,
            index: index.iter().copied().collect(),
            masked,
        });
        dst
    }

    pub fn store(&mut self, view: ViewId, index: &[IndexExpr], src: ValueId, masked: bool) {
        self.push(Inst::Store {
            view,
            index: index.iter().copied().collect(),
            src,
            masked,
        });
    }

    pub fn constant(&mut self, value: Scalar, dtype: DType, shape: &[u32]) -> ValueId {
        let dst = self.value(dtype, shape);
        self.push(Inst::Const {
            dst,
            value: ScalarKey(value),
        });
        dst
    }

    pub fn unary(&mut self, op: UnaryOp, src: ValueId) -> ValueId {
        let t = self.ty(src);
        let dst = self.value(t.dtype, &t.shape);
        self.push(Inst::Unary { dst, op, src });
        dst
    }

    pub fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let t = self.ty(lhs);
        let dtype = if op.is_comparison() { DType::Bool } else { t.dtype };
        let dst = self.value(dtype, &t.shape);
        self.push(Inst::Binary { dst, op, lhs, rhs });
        dst
    }

    pub fn cast(&mut self, src: ValueId, dtype: DType) -> ValueId {
        let t = self.ty(src);
        let dst = self.value(dtype, &t.shape);
        self.push(Inst::Cast { dst, src });
        dst
    }

    pub fn reduce(&mut self, op: TileReduce, src: ValueId, axis: u8) -> ValueId {
        let mut t = self.ty(src);
        t.shape[axis as usize] = 1;
        let dst = self.value(t.dtype, &t.shape);
        self.push(Inst::Reduce { dst, op, src, axis });
        dst
    }

    pub fn broadcast(&mut self, src: ValueId, shape: &[u32]) -> ValueId {
        let dst = self.value(self.ty(src).dtype, shape);
        self.push(Inst::Broadcast { dst, src });
        dst
    }

    pub fn acc(&mut self, dtype: DType, shape: &[u32], init: Scalar) -> AccId {
        self.p.accs.push(AccDecl {
            ty: ValueType {
                dtype,
                shape: shape.iter().copied().collect(),
            },
            init: ScalarKey(init),
        });
        AccId(self.p.accs.len() as u32 - 1)
    }

    pub fn acc_read(&mut self, acc: AccId) -> ValueId {
        let t = self.p.accs[acc.index()].ty.clone();
        let dst = self.value(t.dtype, &t.shape);
        self.push(Inst::AccRead { dst, acc });
        dst
    }

    /// Opens a loop of `count` iterations; instructions go into its body
    /// until `end_loop`.
    pub fn begin_loop(&mut self, count: u64) -> LoopId {
        let var = LoopId(self.p.loops);
        self.p.loops += 1;
        self.loops.push((var, count));
        self.bodies.push(vec![]);
        var
    }

    pub fn end_loop(&mut self) {
        let body = self.bodies.pop().expect("an open loop");
        let (var, count) = self.loops.pop().expect("an open loop");
        self.push(Inst::Loop { var, count, body });
    }

    pub fn build(mut self) -> Program {
        assert_eq!(self.bodies.len(), 1, "every loop is closed");
        self.p.body = self.bodies.pop().expect("the program body");
        self.p
    }
}

/// Runs `program` with `inputs` as the leading read-only arguments and
/// `outputs` after them, written in place.
pub(super) fn run(program: &Program, inputs: &[&HostBuffer], outputs: &mut [&mut HostBuffer]) -> Result<()> {
    let mut args: Vec<Arg<'_>> = inputs.iter().map(|b| Arg::Read(b)).collect();
    args.extend(outputs.iter_mut().map(|b| Arg::Write(b)));
    execute(program, &mut args)
}

/// `n` f32 values spread over roughly [-range, range], none of them zero.
pub(super) fn sample_f32(n: usize, range: f32, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1664525).wrapping_add(1013904223);
            let unit = (state >> 8) as f32 / (1u32 << 24) as f32;
            (unit * 2.0 - 1.0) * range + 1e-3
        })
        .collect()
}
