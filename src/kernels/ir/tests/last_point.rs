//! The last point: a program that uses one, run by the CPU executor, and
//! one rejection per verifier check of it.

use super::super::{verify, Access, Builder, IndexExpr, Program, TileReduce, ValueType};
use super::rejections::reject;
use crate::dtype::{DType, Scalar};
use crate::kernels::cpu::{execute, Arg};
use crate::ops::{BinaryOp, Padding};
use crate::storage::HostBuffer;

/// Column sums of `x: f32[4, 24]` over a grid [4 row parts, 3 column
/// tiles]: each point copies its tile of `x` into the partials, and the last
/// point of each column tile sums that tile's column of partials. `edit`
/// may change the builder just before the last point and `body` adds to
/// the last point's body.
fn column_totals_with(
    groups: u64,
    edit: impl FnOnce(&mut Builder),
    body: impl FnOnce(&mut Builder, super::super::ValueId),
) -> crate::Result<Program> {
    let mut b = Builder::new("column_totals", &[4, 3]);
    let x = b.param("x", DType::F32, 96, Access::Read);
    let partials = b.param("partials", DType::F32, 96, Access::ReadWrite);
    let out = b.param("out", DType::F32, 24, Access::Write);
    let counter = b.param("counter", DType::U32, groups, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[4, 24], &[1, 8], Padding::Zero);
    let vp = b.view_contiguous(partials, &[4, 24], &[1, 8], Padding::Zero);
    let vall = b.view_contiguous(partials, &[4, 24], &[4, 8], Padding::Zero);
    let vout = b.view_contiguous(out, &[1, 24], &[1, 8], Padding::Zero);
    let at = [IndexExpr::grid(0), IndexExpr::grid(1)];
    let t = b.load(vx, &at, false);
    b.store(vp, &at, t, false);
    edit(&mut b);
    b.last_point(0, counter, |b| {
        let all = b.load(vall, &[IndexExpr::constant(0), IndexExpr::grid(1)], false);
        let total = b.reduce(TileReduce::Sum, all, 0);
        b.store(vout, &[IndexExpr::constant(0), IndexExpr::grid(1)], total, false);
        body(b, t);
    });
    b.finish()
}

fn column_totals() -> crate::Result<Program> {
    column_totals_with(3, |_| {}, |_, _| {})
}

#[test]
fn the_cpu_executor_runs_the_body_once_per_group_after_every_point() {
    let p = column_totals().unwrap();
    assert!(p.to_string().contains("last_point g0 counter p3 {"), "{p}");
    let values: Vec<f32> = (0..96).map(|i| (i * 7 % 13) as f32).collect();
    let x = HostBuffer::from_elements(&values);
    let (mut partials, mut out) = (HostBuffer::zeros(DType::F32, 96), HostBuffer::zeros(DType::F32, 24));
    let mut counter = HostBuffer::zeros(DType::U32, 3);
    execute(
        &p,
        &mut [
            Arg::Read(&x),
            Arg::Write(&mut partials),
            Arg::Write(&mut out),
            Arg::Write(&mut counter),
        ],
    )
    .unwrap();
    let want: Vec<f32> = (0..24).map(|c| (0..4).map(|r| values[r * 24 + c]).sum()).collect();
    assert_eq!(out.to_vec::<f32>(), want);
    // The counters are the GPU's; the CPU leaves them at zero.
    assert_eq!(counter.to_vec::<u32>(), vec![0; 3]);
}

#[test]
fn rejects_a_last_point_that_is_not_last() {
    let mut b = Builder::new("bad", &[4]);
    let counter = b.param("counter", DType::U32, 1, Access::ReadWrite);
    let out = b.param("out", DType::F32, 4, Access::Write);
    let v = b.view_contiguous(out, &[4], &[1], Padding::Zero);
    b.last_point(0, counter, |_| {});
    let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[1]);
    b.store(v, &[IndexExpr::grid(0)], one, false);
    reject(b.finish(), "must be the last instruction");
}

#[test]
fn rejects_a_last_point_inside_a_loop() {
    let mut b = Builder::new("bad", &[4]);
    let counter = b.param("counter", DType::U32, 1, Access::ReadWrite);
    b.loop_(2, |b, _| b.last_point(0, counter, |_| {}));
    reject(b.finish(), "must be the last instruction");
}

#[test]
fn rejects_a_value_from_before_the_last_point() {
    let p = column_totals_with(
        3,
        |_| {},
        |b, t| {
            b.binary(BinaryOp::Add, t, t);
        },
    );
    reject(p, "sees only values defined in it");
}

#[test]
fn rejects_the_counted_grid_axis_in_the_body() {
    let p = column_totals_with(
        3,
        |_| {},
        |b, _| {
            b.iota(&[1], 0, IndexExpr::grid(0));
        },
    );
    reject(p, "cannot see");
}

#[test]
fn rejects_a_counter_of_the_wrong_length() {
    reject(
        column_totals_with(4, |_| {}, |_, _| {}),
        "holding 3 elements (one per group)",
    );
}

#[test]
fn rejects_a_view_of_the_counter() {
    let p = column_totals_with(
        3,
        |b| {
            b.view_contiguous(super::super::ParamId(3), &[3], &[1], Padding::Zero);
        },
        |_, _| {},
    );
    reject(p, "only for tickets");
}

#[test]
fn rejects_an_accumulator_shared_with_the_body() {
    // The builder numbers accumulators from 0: the one made before the body is acc0.
    let acc = super::super::AccId(0);
    let p = column_totals_with(
        3,
        |b| {
            let a = b.acc(ValueType::new(DType::F32, &[1]), Scalar::Float(0.0, DType::F32));
            let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[1]);
            b.acc_update(a, BinaryOp::Add, one);
        },
        |b, _| {
            b.acc_read(acc);
        },
    );
    reject(p, "used both before the last point and in its body");
}

#[test]
fn the_good_program_verifies() {
    assert_eq!(verify(&column_totals().unwrap()), Ok(()));
}
