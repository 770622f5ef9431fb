//! Reductions over one, several, all and empty axes.

use super::*;

#[test]
fn sum_over_each_axis_and_all_axes() {
    let xs = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    check_reduce(Sum, &[2, 3], &xs, &[0], &[5.0f32, 7.0, 9.0]);
    check_reduce(Sum, &[2, 3], &xs, &[1], &[6.0f32, 15.0]);
    check_reduce(Sum, &[2, 3], &xs, &[0, 1], &[21.0f32]);
    check_reduce(Sum, &[], &[4.5f64], &[], &[4.5f64]);
    check_reduce(Sum, &[2, 3], &xs, &[], &xs);
}

#[test]
fn reductions_over_several_axes_of_rank_three() {
    // x[i, j, k] = 6i + 2j + k over [2, 3, 2].
    let xs: Vec<i32> = (0..12).collect();
    check_reduce(Sum, &[2, 3, 2], &xs, &[0, 2], &[14i32, 22, 30]);
    check_reduce(Max, &[2, 3, 2], &xs, &[0, 2], &[7i32, 9, 11]);
    check_reduce(Min, &[2, 3, 2], &xs, &[0, 2], &[0i32, 2, 4]);
    check_reduce(Sum, &[2, 3, 2], &xs, &[1, 2], &[15i32, 51]);
    check_reduce(Max, &[2, 3, 2], &xs, &[0, 1, 2], &[11i32]);
}

#[test]
fn products() {
    check_reduce(
        Prod,
        &[2, 3],
        &[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0],
        &[1],
        &[6.0f64, 120.0],
    );
    check_reduce(Prod, &[2], &[65536i32, 65536], &[0], &[0i32]);
    check_reduce(Prod, &[3], &[16u8, 16, 3], &[0], &[0u8]);
    check_reduce(Prod, &[2], &[i64::MAX, 2], &[0], &[-2i64]);
    check_reduce(Prod, &[2], &[-0.5f32, f32::INFINITY], &[0], &[f32::NEG_INFINITY]);
}

#[test]
fn max_and_min_reductions_propagate_nan() {
    let xs = [1.0f32, f32::NAN, 3.0, 4.0, 5.0, 6.0, 9.0, 8.0, f32::NAN];
    check_reduce(Max, &[3, 3], &xs, &[1], &[f32::NAN, 6.0, f32::NAN]);
    check_reduce(Min, &[3, 3], &xs, &[1], &[f32::NAN, 4.0, f32::NAN]);
    check_reduce(Max, &[3, 3], &xs, &[0], &[9.0f32, f32::NAN, f32::NAN]);
    check_reduce(Min, &[2], &[INF, -INF], &[0], &[-INF]);
}

#[test]
fn integer_and_bool_reductions_wrap_in_the_node_dtype() {
    check_reduce(Sum, &[2], &[i32::MAX, 1], &[0], &[i32::MIN]);
    check_reduce(Sum, &[2], &[200u8, 100], &[0], &[44u8]);
    // A sum the front end widened: the operand is cast to the node's dtype first.
    check_reduce(Sum, &[2], &[200u8, 100], &[0], &[300i64]);
    check_reduce(Sum, &[4], &[true, true, false, true], &[0], &[3i64]);
    check_reduce(Max, &[2, 2], &[false, true, false, false], &[1], &[true, false]);
    check_reduce(Min, &[2, 2], &[true, true, false, true], &[1], &[true, false]);
    check_reduce(Max, &[3], &[3u32, u32::MAX, 7], &[0], &[u32::MAX]);
}

#[test]
fn f16_sum_accumulates_in_f64_and_rounds_once() {
    // Added pairwise in f16, 2048 + 1 rounds back to 2048 every time.
    check_reduce(Sum, &[3], &[h(2048.0), h(1.0), h(1.0)], &[0], &[h(2050.0)]);
    check_reduce(Sum, &[3], &[b16(256.0), b16(1.0), b16(1.0)], &[0], &[b16(258.0)]);
}

#[test]
fn reductions_over_an_empty_axis_give_the_identity() {
    check_reduce(Sum, &[2, 0], &[] as &[f32], &[1], &[0.0f32, 0.0]);
    check_reduce(Prod, &[2, 0], &[] as &[f32], &[1], &[1.0f32, 1.0]);
    check_reduce(Max, &[2, 0], &[] as &[f32], &[1], &[f32::NEG_INFINITY; 2]);
    check_reduce(Min, &[2, 0], &[] as &[f64], &[1], &[INF; 2]);
    check_reduce(Max, &[2, 0], &[] as &[i32], &[1], &[i32::MIN; 2]);
    check_reduce(Min, &[2, 0], &[] as &[u8], &[1], &[255u8; 2]);
    check_reduce(Max, &[2, 0], &[] as &[bool], &[1], &[false; 2]);
    check_reduce(Min, &[2, 0], &[] as &[bool], &[1], &[true; 2]);
    check_reduce(Sum, &[0, 3], &[] as &[i64], &[0], &[0i64; 3]);
    check_reduce(Sum, &[0, 3], &[] as &[i64], &[1], &[] as &[i64]);
}

#[test]
fn argmax_and_argmin_give_the_first_extreme() {
    let xs = [1.0f32, 3.0, 3.0, 2.0, 5.0, 4.0, 5.0, 0.0];
    check_reduce(ArgMax, &[2, 4], &xs, &[1], &[1i64, 0]);
    check_reduce(ArgMin, &[2, 4], &xs, &[1], &[0i64, 3]);
    check_reduce(ArgMax, &[2, 3], &[1, 5, 3, 4, 2, 3i32], &[0], &[1i64, 0, 0]);
    check_reduce(ArgMin, &[2, 3], &[1, 5, 3, 4, 2, 3i32], &[0], &[0i64, 1, 0]);
    let big = 1i64 << 53;
    check_reduce(ArgMax, &[3], &[big, big + 1, big], &[0], &[1i64]);
    check_reduce(ArgMax, &[3], &[false, true, true], &[0], &[1i64]);
}

#[test]
fn argmax_and_argmin_count_nan_as_the_extreme() {
    let xs = [1.0, NAN, 5.0, NAN, -1.0];
    check_reduce(ArgMax, &[5], &xs, &[0], &[1i64]);
    check_reduce(ArgMin, &[5], &xs, &[0], &[1i64]);
    check_reduce(ArgMax, &[3], &[INF, 2.0, NAN], &[0], &[2i64]);
}

#[test]
fn arg_reductions_reject_empty_axes_several_axes_and_non_i64_nodes() {
    let build = |op: ReduceOp, shape: &[usize], axes: &[usize], dtype: DType| {
        let mut g = Builder::default();
        let n = shape.iter().product();
        let x = g.data(shape, &vec![1.0f32; n]);
        let y = g.reduce(op, x, axes, dtype);
        g.error(y)
    };
    let err = build(ArgMax, &[2, 0], &[1], I64);
    assert!(matches!(&err, Error::InvalidShape { op: "argmax", .. }), "{err}");
    assert!(err.to_string().contains("[2, 0]"), "{err}");
    let err = build(ArgMin, &[2, 3], &[0, 1], I64);
    assert!(matches!(err, Error::InvalidShape { op: "argmin", .. }), "{err}");
    let err = build(ArgMax, &[2, 3], &[1], I32);
    assert!(
        matches!(
            err,
            Error::UnsupportedDType {
                op: "argmax",
                dtype: I32,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn reductions_reject_bad_axes_and_shapes() {
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[1.0f32; 6]);
    let unsorted = g.node(
        Op::Reduce {
            op: Sum,
            axes: axes(&[1, 0]),
        },
        &[1, 1],
        F32,
        &[x],
    );
    assert!(matches!(g.error(unsorted), Error::InvalidShape { op: "sum", .. }));
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[1.0f32; 6]);
    let outside = g.node(
        Op::Reduce {
            op: Max,
            axes: axes(&[2]),
        },
        &[2, 3],
        F32,
        &[x],
    );
    assert!(matches!(g.error(outside), Error::InvalidShape { op: "max", .. }));
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[1.0f32; 6]);
    let dropped = g.node(
        Op::Reduce {
            op: Min,
            axes: axes(&[1]),
        },
        &[2],
        F32,
        &[x],
    );
    assert!(matches!(g.error(dropped), Error::InvalidShape { op: "min", .. }));
}
