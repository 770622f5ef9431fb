//! The reference documents' kernel-shaped examples as tile programs, shared
//! by the PTX tests (assembled) and the GPU tests (run on both back ends).

use tilefuse::graph::BinaryOp;
use tilefuse::kernels::ir::{Access, AtomicOp, Builder, IndexExpr, Program, ValueId};
use tilefuse::tile::{Padding, ThreadScope};
use tilefuse::{DType, Scalar};

/// `c(k)`: a constant partition index.
pub fn c(k: u64) -> IndexExpr {
    IndexExpr::constant(k)
}

/// Adding one to a (2, 32, 3, 4) f32 tensor, the operand model's example.
pub fn add_one() -> Program {
    let mut b = Builder::new("add_one", &[1]);
    let x = b.param("x", DType::F32, 768, Access::Read);
    let y = b.param("y", DType::F32, 768, Access::Write);
    let shape = [2, 32, 3, 4];
    let vx = b.view_contiguous(x, &[2, 32, 3, 4], &shape, Padding::Zero);
    let vy = b.view_contiguous(y, &[2, 32, 3, 4], &shape, Padding::Zero);
    let zero = [c(0); 4];
    let a = b.load(vx, &zero, false);
    let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &shape);
    let s = b.binary(BinaryOp::Add, a, one);
    b.store(vy, &zero, s, false);
    b.finish().unwrap()
}

/// The load of partition (1, 2) of a 4 × 8 i32 span `x` in 2 × 2
/// partitions, stored to the 2 × 2 `r`.
pub fn pv_load() -> Program {
    let mut b = Builder::new("pv_load", &[1]);
    let x = b.param("x", DType::I32, 32, Access::Read);
    let r = b.param("r", DType::I32, 4, Access::Write);
    let vx = b.view_contiguous(x, &[4, 8], &[2, 2], Padding::Zero);
    let vr = b.view_contiguous(r, &[2, 2], &[2, 2], Padding::Zero);
    let t = b.load(vx, &[c(1), c(2)], false);
    b.store(vr, &[c(0), c(0)], t, false);
    b.finish().unwrap()
}

/// The NaN-padded masked load of partition (0, 2) of a 4 × 11 f32 span `x`
/// in 2 × 4 partitions, stored to the 2 × 4 `r`.
pub fn pv_load_masked_nan() -> Program {
    let mut b = Builder::new("pv_load_masked_nan", &[1]);
    let x = b.param("x", DType::F32, 44, Access::Read);
    let r = b.param("r", DType::F32, 8, Access::Write);
    let vx = b.view_contiguous(x, &[4, 11], &[2, 4], Padding::Nan);
    let vr = b.view_contiguous(r, &[2, 4], &[2, 4], Padding::Zero);
    let t = b.load(vx, &[c(0), c(2)], true);
    b.store(vr, &[c(0), c(0)], t, false);
    b.finish().unwrap()
}

/// The store of `100 * iota` (a 2 × 2 i32 tile) into partition (1, 3) of
/// the 4 × 8 i32 span `x` in 2 × 2 partitions.
pub fn pv_store_iota() -> Program {
    let mut b = Builder::new("pv_store_iota", &[1]);
    let x = b.param("x", DType::I32, 32, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[4, 8], &[2, 2], Padding::Zero);
    let a = iota_2x2(&mut b, 100);
    b.store(vx, &[c(1), c(3)], a, false);
    b.finish().unwrap()
}

/// `times * (2 * row + col)` over a 2 × 2 tile, as i32.
pub fn iota_2x2(b: &mut Builder, times: i128) -> ValueId {
    let rows = b.iota(&[2, 2], 0, c(0));
    let cols = b.iota(&[2, 2], 1, c(0));
    let two = b.constant(Scalar::Int(2, DType::I64), DType::I64, &[2, 2]);
    let times = b.constant(Scalar::Int(times, DType::I64), DType::I64, &[2, 2]);
    let flat = b.binary(BinaryOp::Mul, rows, two);
    let flat = b.binary(BinaryOp::Add, flat, cols);
    let a = b.binary(BinaryOp::Mul, flat, times);
    b.cast(a, DType::I32)
}

/// One atomic update of partition `index` of `x` (of `extents`, in `tile`
/// partitions, elements of `dtype`) with a tile full of `operand`, at device
/// scope; masked when `x` is 2-D, as in the document's masked examples.
pub fn pv_atomic(
    op: AtomicOp,
    dtype: DType,
    operand: i128,
    extents: &[u64],
    tile: &[u32],
    index: &[IndexExpr],
) -> Program {
    let mut b = Builder::new(format!("pv_atomic_{op:?}_{}d", extents.len()), &[1]);
    let x = b.param("x", dtype, extents.iter().product(), Access::ReadWrite);
    let vx = b.view_contiguous(x, extents, tile, Padding::Zero);
    let a = b.constant(Scalar::Int(operand, dtype), dtype, tile);
    b.atomic(op, vx, index, a, extents.len() == 2, ThreadScope::Device);
    b.finish().unwrap()
}
