//! One test per verifier check: a program that breaks it, and the words the
//! error must contain. Programs the builder cannot produce are made by
//! editing a good one.

use super::super::{verify, Access, AtomicOp, Builder, IndexExpr, Inst, Program, ScalarKey, TileReduce, ValueType};
use super::snapshots::{add_one, chain, column_sum, row_sum, softmax_rows};
use crate::dtype::{DType, Scalar};
use crate::error::Error;
use crate::ops::{BinaryOp, Padding, ThreadScope, UnaryOp};

/// Asserts that `program` was rejected with a reason containing `needle`.
#[track_caller]
pub(super) fn reject(program: crate::Result<Program>, needle: &str) {
    match program {
        Err(Error::InvalidProgram { reason, .. }) => {
            assert!(reason.contains(needle), "reason `{reason}` does not contain `{needle}`")
        }
        Err(e) => panic!("expected an invalid program, got {e}"),
        Ok(p) => panic!("expected `{needle}`, but the program verified:\n{p}"),
    }
}

/// Verifies `program` after `edit`, for checks the builder cannot reach.
fn edited(program: crate::Result<Program>, edit: impl FnOnce(&mut Program)) -> crate::Result<Program> {
    let mut program = program.expect("the unedited program verifies");
    edit(&mut program);
    verify(&program).map(|()| program)
}

const G0: IndexExpr = IndexExpr {
    constant: 0,
    grid: Some((0, 1)),
    loop_var: None,
};

/// A builder over `grid` with `x: f32[len]` (read) and `out: f32[len]`
/// (write) viewed as contiguous `extents` in tiles of `tile`.
fn two_views(grid: &[u64], len: u64, extents: &[u64], tile: &[u32]) -> Builder {
    let mut b = Builder::new("bad", grid);
    let x = b.param("x", DType::F32, len, Access::Read);
    let out = b.param("out", DType::F32, len, Access::Write);
    b.view_contiguous(x, extents, tile, Padding::Zero);
    b.view_contiguous(out, extents, tile, Padding::Zero);
    b
}

const VX: super::super::ViewId = super::super::ViewId(0);
const VOUT: super::super::ViewId = super::super::ViewId(1);

#[test]
fn good_programs_verify() {
    for p in [add_one(), chain(), row_sum(), column_sum(), softmax_rows()] {
        let p = p.expect("builds");
        assert_eq!(verify(&p), Ok(()));
    }
}

#[test]
fn rejects_empty_grid() {
    reject(Builder::new("bad", &[4, 0]).finish(), "grid axis g1 has extent 0");
}

#[test]
fn rejects_binary_operands_of_different_shapes() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4]);
    let y = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[8]);
    b.binary(BinaryOp::Add, x, y);
    reject(
        b.finish(),
        "in `%2: f32[4] = add %0, %1`: operands %0: f32[4] and %1: f32[8] differ in type",
    );
}

#[test]
fn rejects_select_on_non_bool_condition() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4]);
    b.select(x, x, x);
    reject(b.finish(), "the condition %0: f32[4] must be bool");
}

#[test]
fn rejects_arithmetic_on_f16() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Float(1.0, DType::F16), DType::F16, &[4]);
    b.binary(BinaryOp::Add, x, x);
    reject(b.finish(), "no arithmetic on f16[4]: cast it to f32 first");
}

#[test]
fn rejects_unary_op_on_wrong_dtype() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Int(1, DType::I32), DType::I32, &[4]);
    b.unary(UnaryOp::Exp, x);
    reject(b.finish(), "Exp does not take i32 values");
}

#[test]
fn rejects_load_of_wrong_type() {
    reject(
        edited(add_one(), |p| p.values[0].dtype = DType::F64),
        "%0 is recorded as f64[2, 32, 3, 4] but the instruction gives f32[2, 32, 3, 4]",
    );
}

#[test]
fn rejects_index_of_wrong_rank() {
    let mut b = two_views(&[1], 64, &[64], &[64]);
    b.load(VX, &[IndexExpr::constant(0), IndexExpr::constant(0)], false);
    reject(b.finish(), "the index has 2 axes but view v0 has rank 1");
}

#[test]
fn rejects_view_outside_its_buffer() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.param("x", DType::F32, 100, Access::Read);
    b.view(x, &[10, 10], &[10, 1], 1, &[10, 10], Padding::Zero);
    reject(
        b.finish(),
        "view v0: the span (extents [10, 10], strides [10, 1], offset 1) reaches elements 1..=100",
    );
    let mut b = Builder::new("bad", &[1]);
    let x = b.param("x", DType::F32, 100, Access::Read);
    b.view(x, &[10], &[-1], 5, &[10], Padding::Zero);
    reject(b.finish(), "reaches elements -4..=5");
}

#[test]
fn rejects_store_to_read_only_param() {
    let mut b = two_views(&[1], 64, &[64], &[64]);
    let t = b.load(VX, &[G0], false);
    b.store(VX, &[G0], t, false);
    reject(b.finish(), "p0 `x` is read-only and cannot be written");
}

#[test]
fn rejects_load_from_write_only_param() {
    let mut b = two_views(&[1], 64, &[64], &[64]);
    b.load(VOUT, &[G0], false);
    reject(b.finish(), "p1 `out` is write-only and cannot be read");
}

#[test]
fn rejects_unmasked_access_to_ragged_partition() {
    let mut b = two_views(&[4], 1000, &[1000], &[256]);
    let t = b.load(VX, &[G0], false);
    b.store(VOUT, &[G0], t, true);
    reject(
        b.finish(),
        "`%0: f32[256] = load v0[g0]`: the unmasked access reaches partition [3], partly outside",
    );
}

#[test]
fn rejects_partition_outside_index_space() {
    let mut b = two_views(&[4], 1000, &[1000], &[256]);
    let t = b.load(VX, &[G0.plus(1)], true);
    b.store(VOUT, &[G0], t, true);
    reject(
        b.finish(),
        "index axis 0 (g0+1) reaches partition 4, outside the index space [4] of view v0",
    );
}

#[test]
fn rejects_grid_axis_beyond_grid_rank() {
    let mut b = two_views(&[4], 1024, &[1024], &[256]);
    b.load(VX, &[IndexExpr::grid(1)], false);
    reject(b.finish(), "index g1 names grid axis g1 of a rank 1 grid");
}

#[test]
fn rejects_loop_variable_outside_its_loop() {
    let mut b = two_views(&[1], 1024, &[1024], &[256]);
    let i = b.loop_(4, |_, _| {});
    b.load(VX, &[IndexExpr::loop_var(i)], false);
    reject(b.finish(), "index i0 uses loop variable i0 outside its loop");
}

#[test]
fn rejects_loop_value_used_after_the_loop() {
    let mut b = two_views(&[1], 1024, &[1024], &[256]);
    let mut inner = None;
    b.loop_(4, |b, i| inner = Some(b.load(VX, &[IndexExpr::loop_var(i)], false)));
    b.store(
        VOUT,
        &[IndexExpr::constant(0)],
        inner.expect("set by the loop body"),
        false,
    );
    reject(b.finish(), "%0 is defined in a loop body that has ended");
}

#[test]
fn rejects_use_before_definition() {
    reject(
        edited(add_one(), |p| p.body.swap(1, 2)),
        "%1 is used before it is defined",
    );
}

#[test]
fn rejects_value_defined_twice_or_never() {
    reject(
        edited(add_one(), |p| {
            let again = p.body[1].clone();
            p.body.insert(2, again);
        }),
        "%1 is defined twice",
    );
    reject(
        edited(add_one(), |p| p.values.push(ValueType::new(DType::F32, &[1]))),
        "value %3 has a type but no instruction defines it",
    );
}

#[test]
fn rejects_reduce_axis_out_of_range() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4, 4]);
    b.reduce(TileReduce::Sum, x, 2);
    reject(b.finish(), "axis 2 is out of range for %0: f32[4, 4]");
}

#[test]
fn rejects_broadcast_of_non_unit_axis() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[2, 1]);
    b.broadcast(x, &[4, 8]);
    reject(
        b.finish(),
        "repeats only size-1 axes, but %0: f32[2, 1] becomes %1: f32[4, 8]",
    );
}

#[test]
fn rejects_bad_accumulator_updates() {
    let mut b = Builder::new("bad", &[1]);
    let acc = b.acc(ValueType::new(DType::F32, &[4]), Scalar::Float(0.0, DType::F32));
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4]);
    b.acc_update(acc, BinaryOp::Sub, x);
    reject(
        b.finish(),
        "accumulators update by add, mul, maximum or minimum, not Sub",
    );
    let mut b = Builder::new("bad", &[1]);
    let acc = b.acc(ValueType::new(DType::F32, &[4]), Scalar::Float(0.0, DType::F32));
    let x = b.constant(Scalar::Float(1.0, DType::F64), DType::F64, &[4]);
    b.acc_update(acc, BinaryOp::Add, x);
    reject(b.finish(), "the operand %0: f64[4] should be f32[4]");
}

#[test]
fn rejects_f16_accumulator() {
    let mut b = Builder::new("bad", &[1]);
    b.acc(ValueType::new(DType::F16, &[4]), Scalar::Float(0.0, DType::F32));
    reject(b.finish(), "accumulators hold integers, f32 or f64, not f16");
}

#[test]
fn rejects_atomic_op_on_unsupported_dtype() {
    let mut b = Builder::new("bad", &[1]);
    let out = b.param("out", DType::F64, 4, Access::Write);
    let v = b.view_contiguous(out, &[4], &[4], Padding::Zero);
    let x = b.constant(Scalar::Float(1.0, DType::F64), DType::F64, &[4]);
    b.atomic(AtomicOp::Max, v, &[G0], x, false, ThreadScope::Device);
    reject(b.finish(), "atomic Max does not take f64 elements");
}

#[test]
fn rejects_system_scope_atomic() {
    let mut b = Builder::new("bad", &[1]);
    let out = b.param("out", DType::I32, 4, Access::Write);
    let v = b.view_contiguous(out, &[4], &[4], Padding::Zero);
    let x = b.constant(Scalar::Int(1, DType::I32), DType::I32, &[4]);
    b.atomic(AtomicOp::Xor, v, &[G0], x, false, ThreadScope::System);
    reject(b.finish(), "atomics have block or device scope, not system");
}

#[test]
fn rejects_store_shared_by_grid_points() {
    // Column sums with a plain store: all 16 grid points write one partition.
    let mut b = two_views(&[16], 4096, &[64, 64], &[4, 64]);
    let t = b.load(VX, &[G0, IndexExpr::constant(0)], false);
    let s = b.reduce(TileReduce::Sum, t, 0);
    let s = b.broadcast(s, &[4, 64]);
    b.store(VOUT, &[IndexExpr::constant(0), IndexExpr::constant(0)], s, false);
    reject(b.finish(), "grid axis g0 (extent 16) is not in the partition index");
}

#[test]
fn rejects_store_whose_loop_term_overlaps_grid_points() {
    let mut b = two_views(&[4], 1024, &[1024], &[64]);
    b.loop_(4, |b, i| {
        let idx = [G0.times(2).with_loop(i, 1)];
        let t = b.load(VX, &idx, false);
        b.store(VOUT, &idx, t, false);
    });
    reject(
        b.finish(),
        "the loop term of g0*2+i0 lets two values of g0 store one partition",
    );
    // With a grid coefficient of 4 the partitions are disjoint.
    let mut b = two_views(&[4], 1024, &[1024], &[64]);
    b.loop_(4, |b, i| {
        let idx = [G0.times(4).with_loop(i, 1)];
        let t = b.load(VX, &idx, false);
        b.store(VOUT, &idx, t, false);
    });
    assert!(b.finish().is_ok());
}

#[test]
fn rejects_store_through_overlapping_view() {
    let mut b = Builder::new("bad", &[1]);
    let out = b.param("out", DType::F32, 64, Access::Write);
    let v = b.view(out, &[8, 8], &[0, 1], 0, &[8, 8], Padding::Zero);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[8, 8]);
    b.store(v, &[IndexExpr::constant(0), IndexExpr::constant(0)], x, false);
    reject(b.finish(), "maps several span indices to one element");
}

#[test]
fn rejects_constant_of_wrong_kind() {
    reject(
        edited(add_one(), |p| {
            if let Inst::Const { value, .. } = &mut p.body[1] {
                *value = ScalarKey(Scalar::Bool(true));
            }
        }),
        "true is not a scalar of dtype f32",
    );
    let mut b = Builder::new("bad", &[1]);
    b.constant(Scalar::Float(1.5, DType::F32), DType::I32, &[4]);
    reject(b.finish(), "constant: 1.5:f32 is not exactly representable as i32");
    let mut b = Builder::new("bad", &[1]);
    let c = b.constant(Scalar::Bool(true), DType::Bool, &[4]);
    let mut p = b.finish().expect("a bool constant verifies");
    p.values[c.index()].dtype = DType::I32;
    reject(verify(&p).map(|()| p), "true is not a scalar of dtype i32");
}

#[test]
fn rejects_zero_tile_extent_and_float_padding_on_integers() {
    let mut b = Builder::new("bad", &[1]);
    let x = b.param("x", DType::F32, 64, Access::Read);
    b.view_contiguous(x, &[64], &[0], Padding::Zero);
    reject(b.finish(), "view v0: tile [0] has an extent of 0");
    let mut b = Builder::new("bad", &[1]);
    let x = b.param("x", DType::I32, 64, Access::Read);
    b.view_contiguous(x, &[64], &[64], Padding::NegInf);
    reject(b.finish(), "padding neg_inf needs a float parameter, not i32");
}

#[test]
fn rejects_unknown_view_in_builder() {
    let mut b = Builder::new("bad", &[1]);
    b.load(VX, &[G0], false);
    reject(b.finish(), "load: view v0 is not declared");
}

#[test]
fn rejects_bad_loops() {
    let mut b = Builder::new("bad", &[1]);
    b.loop_(0, |_, _| {});
    reject(b.finish(), "in `loop i0 in 0..0`: a loop must run at least once");
    reject(
        edited(row_sum(), |p| {
            let again = p.body[0].clone();
            p.body.insert(0, again);
        }),
        "loop variable i0 is bound by two loops",
    );
}

#[test]
fn rejects_init_on_read_only_param() {
    let mut b = Builder::new("bad", &[1]);
    b.param_init("x", DType::F32, 4, Access::Read, Scalar::Float(0.0, DType::F32));
    reject(b.finish(), "parameter p0 `x`: has an init value but is read-only");
}

#[test]
fn rejects_iota_of_wrong_dtype_and_cast_changing_shape() {
    let mut b = Builder::new("bad", &[1]);
    let k = b.iota(&[4], 0, IndexExpr::constant(0));
    let mut p = b.finish().expect("an iota verifies");
    p.values[k.index()].dtype = DType::U32;
    reject(
        verify(&p).map(|()| p),
        "iota gives i64 or i32 with an axis below its rank, not u32[4] along axis 0",
    );
    reject(
        edited(chain(), |p| p.values[2].shape[0] = 128),
        "a cast keeps the shape, but %1: f16[256] becomes %2: f32[128]",
    );
}

#[test]
fn accepts_atomic_add_on_f16_but_not_xor_on_f32() {
    let mut b = Builder::new("ok", &[8]);
    let x = b.param("x", DType::F16, 64, Access::Read);
    let out = b.param_init("out", DType::F16, 8, Access::Write, Scalar::Float(0.0, DType::F32));
    let vx = b.view_contiguous(x, &[64], &[8], Padding::Zero);
    let vout = b.view_contiguous(out, &[8], &[8], Padding::Zero);
    let t = b.load(vx, &[G0], false);
    b.atomic(
        AtomicOp::Add,
        vout,
        &[IndexExpr::constant(0)],
        t,
        false,
        ThreadScope::Block,
    );
    assert!(b.finish().is_ok());
    let mut b = Builder::new("bad", &[1]);
    let out = b.param("out", DType::F32, 8, Access::Write);
    let v = b.view_contiguous(out, &[8], &[8], Padding::Zero);
    let x = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[8]);
    b.atomic(
        AtomicOp::Xor,
        v,
        &[IndexExpr::constant(0)],
        x,
        false,
        ThreadScope::Device,
    );
    reject(b.finish(), "atomic Xor does not take f32 elements");
}
