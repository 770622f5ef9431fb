//! Small programs of the kinds fusion produces, built with the builder,
//! verified, and compared with their printed text.

use super::super::{Access, AtomicOp, Builder, IndexExpr, MathMode, Program, TileReduce, ValueType};
use crate::dtype::{DType, Scalar};
use crate::ops::{BinaryOp, Padding, ThreadScope, UnaryOp};

/// Asserts that `program` built and verified, and prints as `expect`
/// (leading newline and trailing spaces of the raw string ignored).
#[track_caller]
fn check(program: crate::Result<Program>, expect: &str) {
    let program = program.unwrap_or_else(|e| panic!("the program does not verify: {e}"));
    let text = program.to_string();
    let expect = expect.strip_prefix('\n').unwrap_or(expect);
    assert_eq!(text, expect, "printed program:\n{text}");
}

fn f32(x: f64) -> Scalar {
    Scalar::Float(x, DType::F32)
}

const G0: IndexExpr = IndexExpr {
    constant: 0,
    grid: Some((0, 1)),
    loop_var: None,
};
const ZERO: IndexExpr = IndexExpr {
    constant: 0,
    grid: None,
    loop_var: None,
};

/// `out = x + 1` for a (2, 32, 3, 4) f32 tensor in one tile.
pub(super) fn add_one() -> crate::Result<Program> {
    let mut b = Builder::new("add_one", &[1]);
    let x = b.param("x", DType::F32, 768, Access::Read);
    let out = b.param("out", DType::F32, 768, Access::Write);
    let shape = [2, 32, 3, 4];
    let vx = b.view_contiguous(x, &[2, 32, 3, 4], &shape, Padding::Zero);
    let vout = b.view_contiguous(out, &[2, 32, 3, 4], &shape, Padding::Zero);
    let t = b.load(vx, &[ZERO; 4], false);
    let one = b.constant(f32(1.0), DType::F32, &shape);
    let y = b.binary(BinaryOp::Add, t, one);
    b.store(vout, &[ZERO; 4], y, false);
    b.finish()
}

#[test]
pub(super) fn add_one_prints() {
    check(
        add_one(),
        r"
kernel add_one(grid [1]) math=precise
  p0 x: f32[768] read
  p1 out: f32[768] write
  v0 = view p0 extents [2, 32, 3, 4] strides [384, 12, 4, 1] offset 0 tile [2, 32, 3, 4] pad zero
  v1 = view p1 extents [2, 32, 3, 4] strides [384, 12, 4, 1] offset 0 tile [2, 32, 3, 4] pad zero
  %0: f32[2, 32, 3, 4] = load v0[0, 0, 0, 0]
  %1: f32[2, 32, 3, 4] = const 1.0
  %2: f32[2, 32, 3, 4] = add %0, %1
  store v1[0, 0, 0, 0], %2
",
    );
}

/// `out = tanh(a * b)` over 1000 elements in tiles of 256: the last tile
/// is ragged, so accesses are masked; fast math.
pub(super) fn chain() -> crate::Result<Program> {
    let mut b = Builder::new("chain", &[4]);
    b.math(MathMode::Fast);
    let a = b.param("a", DType::F32, 1000, Access::Read);
    let x = b.param("b", DType::F16, 1000, Access::Read);
    let out = b.param("out", DType::F16, 1000, Access::Write);
    let va = b.view_contiguous(a, &[1000], &[256], Padding::Zero);
    let vb = b.view_contiguous(x, &[1000], &[256], Padding::Zero);
    let vout = b.view_contiguous(out, &[1000], &[256], Padding::Zero);
    let ta = b.load(va, &[G0], true);
    let tb = b.load(vb, &[G0], true);
    let tb = b.cast(tb, DType::F32);
    let p = b.binary(BinaryOp::Mul, ta, tb);
    let y = b.unary(UnaryOp::Tanh, p);
    let y = b.cast(y, DType::F16);
    b.store(vout, &[G0], y, true);
    b.finish()
}

#[test]
fn chain_prints() {
    check(
        chain(),
        r"
kernel chain(grid [4]) math=fast
  p0 a: f32[1000] read
  p1 b: f16[1000] read
  p2 out: f16[1000] write
  v0 = view p0 extents [1000] strides [1] offset 0 tile [256] pad zero
  v1 = view p1 extents [1000] strides [1] offset 0 tile [256] pad zero
  v2 = view p2 extents [1000] strides [1] offset 0 tile [256] pad zero
  %0: f32[256] = load.masked v0[g0]
  %1: f16[256] = load.masked v1[g0]
  %2: f32[256] = cast %1
  %3: f32[256] = mul %0, %2
  %4: f32[256] = tanh %3
  %5: f16[256] = cast %4
  store.masked v2[g0], %5
",
    );
}

/// Row sums of a (64, 1000) tensor: 8 rows per grid point, the reduced axis
/// walked in 4 tiles of 256 (the last one ragged) into an accumulator.
pub(super) fn row_sum() -> crate::Result<Program> {
    let mut b = Builder::new("row_sum", &[8]);
    let x = b.param("x", DType::F32, 64_000, Access::Read);
    let out = b.param("out", DType::F32, 64, Access::Write);
    let vx = b.view_contiguous(x, &[64, 1000], &[8, 256], Padding::Zero);
    let vout = b.view_contiguous(out, &[64, 1], &[8, 1], Padding::Zero);
    let acc = b.acc(ValueType::new(DType::F32, &[8, 1]), f32(0.0));
    b.loop_(4, |b, i| {
        let t = b.load(vx, &[G0, IndexExpr::loop_var(i)], true);
        let s = b.reduce(TileReduce::Sum, t, 1);
        b.acc_update(acc, BinaryOp::Add, s);
    });
    let s = b.acc_read(acc);
    b.store(vout, &[G0, ZERO], s, false);
    b.finish()
}

#[test]
fn row_sum_prints() {
    check(
        row_sum(),
        r"
kernel row_sum(grid [8]) math=precise
  p0 x: f32[64000] read
  p1 out: f32[64] write
  v0 = view p0 extents [64, 1000] strides [1000, 1] offset 0 tile [8, 256] pad zero
  v1 = view p1 extents [64, 1] strides [1, 1] offset 0 tile [8, 1] pad zero
  acc0: f32[8, 1] init 0.0
  loop i0 in 0..4 {
    %0: f32[8, 256] = load.masked v0[g0, i0]
    %1: f32[8, 1] = reduce.sum %0 axis 1
    acc0 = add acc0, %1
  }
  %2: f32[8, 1] = read acc0
  store v1[g0, 0], %2
",
    );
}

/// Column sums of a (4096, 64) tensor split over 16 grid points of 256 rows,
/// each adding its partial sums into the zero-initialised output atomically.
pub(super) fn column_sum() -> crate::Result<Program> {
    let mut b = Builder::new("column_sum", &[16]);
    let x = b.param("x", DType::F32, 4096 * 64, Access::Read);
    let out = b.param_init("out", DType::F32, 64, Access::Write, f32(0.0));
    let vx = b.view_contiguous(x, &[4096, 64], &[256, 64], Padding::Zero);
    let vout = b.view_contiguous(out, &[1, 64], &[1, 64], Padding::Zero);
    let t = b.load(vx, &[G0, ZERO], false);
    let s = b.reduce(TileReduce::Sum, t, 0);
    b.atomic(AtomicOp::Add, vout, &[ZERO, ZERO], s, false, ThreadScope::Device);
    b.finish()
}

#[test]
fn float_atomic_adds_are_recognised_at_any_depth() {
    assert!(column_sum().unwrap().adds_floats_atomically());
    let atomic_in_loop = |d: DType, op: AtomicOp| {
        let mut b = Builder::new("a", &[4]);
        let x = b.param("x", d, 4 * 64, Access::Read);
        let y = b.param("y", d, 64, Access::ReadWrite);
        let vx = b.view_contiguous(x, &[4, 64], &[1, 64], Padding::Zero);
        let vy = b.view_contiguous(y, &[1, 64], &[1, 64], Padding::Zero);
        b.loop_(1, |b, _| {
            let t = b.load(vx, &[G0, ZERO], false);
            b.atomic(op, vy, &[ZERO, ZERO], t, false, ThreadScope::Device);
        });
        b.finish().unwrap()
    };
    assert!(atomic_in_loop(DType::F32, AtomicOp::Add).adds_floats_atomically());
    assert!(atomic_in_loop(DType::F64, AtomicOp::Add).adds_floats_atomically());
    assert!(!atomic_in_loop(DType::I32, AtomicOp::Add).adds_floats_atomically());
    assert!(!atomic_in_loop(DType::F32, AtomicOp::Max).adds_floats_atomically());
}

#[test]
fn column_sum_prints() {
    check(
        column_sum(),
        r"
kernel column_sum(grid [16]) math=precise
  p0 x: f32[262144] read
  p1 out: f32[64] write init 0.0
  v0 = view p0 extents [4096, 64] strides [64, 1] offset 0 tile [256, 64] pad zero
  v1 = view p1 extents [1, 64] strides [64, 1] offset 0 tile [1, 64] pad zero
  %0: f32[256, 64] = load v0[g0, 0]
  %1: f32[1, 64] = reduce.sum %0 axis 0
  atomic.add.device v1[0, 0], %1
",
    );
}

/// Softmax of each row of a (128, 1000) tensor, one row per grid point in a
/// tile of 1024 padded with -inf (so the padding adds nothing to the sum).
pub(super) fn softmax_rows() -> crate::Result<Program> {
    let mut b = Builder::new("softmax_rows", &[128]);
    let x = b.param("x", DType::F32, 128_000, Access::Read);
    let out = b.param("out", DType::F32, 128_000, Access::Write);
    let vx = b.view_contiguous(x, &[128, 1000], &[1, 1024], Padding::NegInf);
    let vout = b.view_contiguous(out, &[128, 1000], &[1, 1024], Padding::Zero);
    let t = b.load(vx, &[G0, ZERO], true);
    let m = b.reduce(TileReduce::Max, t, 1);
    let m = b.broadcast(m, &[1, 1024]);
    let d = b.binary(BinaryOp::Sub, t, m);
    let e = b.unary(UnaryOp::Exp, d);
    let s = b.reduce(TileReduce::Sum, e, 1);
    let s = b.broadcast(s, &[1, 1024]);
    let y = b.binary(BinaryOp::Div, e, s);
    b.store(vout, &[G0, ZERO], y, true);
    b.finish()
}

#[test]
fn softmax_rows_prints() {
    check(
        softmax_rows(),
        r"
kernel softmax_rows(grid [128]) math=precise
  p0 x: f32[128000] read
  p1 out: f32[128000] write
  v0 = view p0 extents [128, 1000] strides [1000, 1] offset 0 tile [1, 1024] pad neg_inf
  v1 = view p1 extents [128, 1000] strides [1000, 1] offset 0 tile [1, 1024] pad zero
  %0: f32[1, 1024] = load.masked v0[g0, 0]
  %1: f32[1, 1] = reduce.max %0 axis 1
  %2: f32[1, 1024] = broadcast %1
  %3: f32[1, 1024] = sub %0, %2
  %4: f32[1, 1024] = exp %3
  %5: f32[1, 1] = reduce.sum %4 axis 1
  %6: f32[1, 1024] = broadcast %5
  %7: f32[1, 1024] = div %4, %6
  store.masked v1[g0, 0], %7
",
    );
}

/// Every instruction kind and index form, to pin the text of each.
#[test]
fn every_instruction_prints() {
    let mut b = Builder::new("all", &[2, 3]);
    let x = b.param("x", DType::I32, 8192, Access::ReadWrite);
    let v = b.view(x, &[64, 128], &[128, 1], 0, &[4, 8], Padding::Zero);
    let gi = IndexExpr::grid(1).times(4).plus(1);
    b.loop_(2, |b, i| {
        let idx = [IndexExpr::grid(0).with_loop(i, 2), gi];
        let t = b.load(v, &idx, false);
        let m = b.in_bounds(v, &idx);
        let k = b.iota(&[4, 8], 1, gi);
        let k = b.cast(k, DType::I32);
        let n = b.unary(UnaryOp::Neg, k);
        let c = b.binary(BinaryOp::Lt, t, n);
        let c = b.binary(BinaryOp::BitAnd, c, m);
        let z = b.constant(Scalar::Int(-3, DType::I32), DType::I32, &[4, 8]);
        let y = b.select(c, t, z);
        b.barrier();
        b.atomic(AtomicOp::Max, v, &idx, y, true, ThreadScope::Block);
    });
    check(
        b.finish(),
        r"
kernel all(grid [2, 3]) math=precise
  p0 x: i32[8192] read_write
  v0 = view p0 extents [64, 128] strides [128, 1] offset 0 tile [4, 8] pad zero
  loop i0 in 0..2 {
    %0: i32[4, 8] = load v0[g0+i0*2, g1*4+1]
    %1: bool[4, 8] = in_bounds v0[g0+i0*2, g1*4+1]
    %2: i64[4, 8] = iota axis 1 index g1*4+1
    %3: i32[4, 8] = cast %2
    %4: i32[4, 8] = neg %3
    %5: bool[4, 8] = lt %0, %4
    %6: bool[4, 8] = bit_and %5, %1
    %7: i32[4, 8] = const -3
    %8: i32[4, 8] = select %6, %0, %7
    barrier
    atomic.max.block.masked v0[g0+i0*2, g1*4+1], %8
  }
",
    );
}
