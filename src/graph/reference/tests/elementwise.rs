//! Unary, binary, where and cast: every op per dtype kind, with NaN,
//! infinities, wrap-around and per-node rounding.

use super::*;

#[test]
fn float_unary_arithmetic() {
    check_unary(Neg, &[1.5, -2.0, INF], &[-1.5, 2.0, -INF]);
    check_unary(Abs, &[-3.0, 2.5, -INF, NAN], &[3.0, 2.5, INF, NAN]);
    check_unary(Sqrt, &[4.0, 2.0, -1.0, INF], &[2.0, SQRT_2, NAN, INF]);
    check_unary(Rsqrt, &[4.0, 0.0, INF], &[0.5, INF, 0.0]);
    check_unary(Recip, &[4.0, -0.0, INF], &[0.25, -INF, 0.0]);
    assert!(Builder::run_one(Recip, -0.0).is_sign_negative());
}

#[test]
fn float_unary_transcendentals() {
    check_unary(Exp, &[0.0, 1.0, -INF, INF, NAN], &[1.0, E, 0.0, INF, NAN]);
    check_unary(Exp2, &[3.0, -1.0, -INF], &[8.0, 0.5, 0.0]);
    check_unary(Log, &[1.0, E, 0.0, -1.0, INF], &[0.0, 1.0, -INF, NAN, INF]);
    check_unary(Log2, &[8.0, 0.25, 0.0], &[3.0, -2.0, -INF]);
    check_unary(Sin, &[0.0, PI / 2.0, INF], &[0.0, 1.0, NAN]);
    check_unary(Cos, &[0.0, PI], &[1.0, -1.0]);
    check_unary(Tanh, &[0.0, INF, -INF, 30.0], &[0.0, 1.0, -1.0, 1.0]);
}

#[test]
fn float_unary_activations() {
    // Expected values from 40-digit arithmetic.
    check_unary_close(
        Sigmoid,
        &[0.0, 1.0, -INF, INF, NAN],
        &[0.5, 0.7310585786300049, 0.0, 1.0, NAN],
    );
    check_unary_close(Silu, &[0.0, 1.0, INF, -INF], &[0.0, 0.7310585786300049, INF, NAN]);
    check_unary_close(GeluTanh, &[0.0, 1.0, INF, -INF], &[0.0, 0.8411919906082767, INF, NAN]);
    check_unary_close(
        GeluErf,
        &[0.0, 1.0, -3.0, -40.0, INF, -INF],
        &[0.0, 0.8413447460685429, -0.0040496940948902835, -0.0, INF, NAN],
    );
    check_unary(Relu, &[-2.0, 3.0, NAN, -INF], &[0.0, 3.0, NAN, 0.0]);
    assert!(Builder::run_one(Relu, -0.0).is_sign_positive());
}

#[test]
fn float_unary_rounding_and_sign() {
    check_unary(Floor, &[1.5, -1.5, -0.0, INF], &[1.0, -2.0, -0.0, INF]);
    check_unary(Ceil, &[1.5, -1.5, 2.0], &[2.0, -1.0, 2.0]);
    check_unary(
        Round,
        &[0.5, 1.5, 2.5, -2.5, -0.4, 2.6],
        &[0.0, 2.0, 2.0, -2.0, -0.0, 3.0],
    );
    check_unary(Sign, &[-3.0, 0.0, 2.0, -INF, NAN], &[-1.0, 0.0, 1.0, -1.0, NAN]);
    assert!(Builder::run_one(Sign, -0.0).is_sign_positive());
}

#[test]
fn float_unary_rounds_to_the_node_dtype() {
    check_unary(Exp, &[1.0f32], &[std::f32::consts::E]);
    check_unary(Sqrt, &[2.0f32], &[std::f32::consts::SQRT_2]);
    // e rounds to 2.71875 in f16 and to 2.71875 in bf16 too (8 significant bits).
    check_unary(Exp, &[h(1.0)], &[h(2.71875)]);
    check_unary(Exp, &[b16(1.0)], &[b16(2.71875)]);
    check_unary(Exp, &[h(12.0)], &[h(INF)]);
}

#[test]
fn integer_unary_ops_wrap() {
    check_unary(Neg, &[5i32, i32::MIN, 0], &[-5, i32::MIN, 0]);
    check_unary(Abs, &[-5i32, i32::MIN, 7], &[5, i32::MIN, 7]);
    check_unary(Not, &[0i32, -1, 5], &[-1, 0, -6]);
    check_unary(Sign, &[-7i64, 0, 9], &[-1, 0, 1]);
    check_unary(Relu, &[-3i32, 4], &[0, 4]);
    check_unary(Round, &[-3i32, 4], &[-3, 4]);
    check_unary(Neg, &[1u8, 0, 255], &[255, 0, 1]);
    check_unary(Not, &[0u8, 5], &[255, 250]);
    check_unary(Not, &[0u32], &[u32::MAX]);
    check_unary(Abs, &[200u8], &[200]);
}

#[test]
fn bool_unary_ops() {
    check_unary(Not, &[true, false], &[false, true]);
    check_unary(Abs, &[true, false], &[true, false]);
    check_unary(Sign, &[true, false], &[true, false]);
    let mut g = Builder::default();
    let x = g.data(&[1], &[true]);
    let y = g.unary(Neg, x);
    assert!(matches!(
        g.error(y),
        Error::UnsupportedDType {
            op: "neg",
            dtype: Bool,
            ..
        }
    ));
}

#[test]
fn float_only_unary_ops_reject_integers_and_not_rejects_floats() {
    for (op, name) in [
        (Exp, "exp"),
        (Sqrt, "sqrt"),
        (GeluErf, "gelu_erf"),
        (Sigmoid, "sigmoid"),
    ] {
        let mut g = Builder::default();
        let x = g.data(&[2], &[1i32, 2]);
        let y = g.unary(op, x);
        let err = g.error(y);
        assert!(
            matches!(err, Error::UnsupportedDType { op, dtype: I32, .. } if op == name),
            "{err}"
        );
    }
    let mut g = Builder::default();
    let x = g.data(&[1], &[1.0f32]);
    let y = g.unary(Not, x);
    assert!(matches!(
        g.error(y),
        Error::UnsupportedDType {
            op: "not",
            dtype: F32,
            ..
        }
    ));
}

#[test]
fn float_binary_arithmetic() {
    check_binary(Add, &[1.0, 0.1, INF], &[2.0, 0.2, -INF], &[3.0, 0.1 + 0.2, NAN]);
    check_binary(Sub, &[1.0, INF], &[2.0, INF], &[-1.0, NAN]);
    check_binary(Mul, &[1.5, 0.0], &[-2.0, INF], &[-3.0, NAN]);
    check_binary(
        Div,
        &[1.0, -1.0, 0.0, 1.0],
        &[0.0, 0.0, 0.0, 4.0],
        &[INF, -INF, NAN, 0.25],
    );
    check_binary(
        Pow,
        &[2.0, -8.0, 4.0, 0.0],
        &[10.0, 1.0 / 3.0, 0.5, 0.0],
        &[1024.0, NAN, 2.0, 1.0],
    );
}

#[test]
fn maximum_and_minimum_propagate_nan() {
    check_binary(
        Maximum,
        &[NAN, 1.0, 2.0, -INF],
        &[1.0, NAN, 3.0, 5.0],
        &[NAN, NAN, 3.0, 5.0],
    );
    check_binary(
        Minimum,
        &[NAN, 1.0, 2.0, -INF],
        &[1.0, NAN, 3.0, 5.0],
        &[NAN, NAN, 2.0, -INF],
    );
    check_binary(Maximum, &[f32::NAN, 1.0], &[1.0, 0.5], &[f32::NAN, 1.0]);
}

#[test]
fn float_binary_rounds_to_the_node_dtype() {
    // 2^24 + 1 is exact in f64 but rounds back to 2^24 in f32.
    check_binary(Add, &[16777216.0f32, 1.0], &[1.0, 3.0], &[16777216.0f32, 4.0]);
    check_binary(Div, &[1.0f32], &[3.0], &[0.33333334f32]);
    check_binary(Add, &[h(2048.0)], &[h(1.0)], &[h(2048.0)]);
    check_binary(Add, &[b16(256.0)], &[b16(1.0)], &[b16(256.0)]);
}

#[test]
fn float_comparisons_are_false_on_nan_except_ne() {
    let (a, b) = (&[1.0, 2.0, NAN, 1.0], &[1.0, 1.0, NAN, NAN]);
    check_binary(Eq, a, b, &[true, false, false, false]);
    check_binary(Ne, a, b, &[false, true, true, true]);
    check_binary(Lt, a, b, &[false, false, false, false]);
    check_binary(Le, a, b, &[true, false, false, false]);
    check_binary(Gt, a, b, &[false, true, false, false]);
    check_binary(Ge, a, b, &[true, true, false, false]);
    check_binary(Lt, &[-0.0f32], &[0.0], &[false]);
}

#[test]
fn integer_and_bool_comparisons_are_exact() {
    let big = (1i64 << 53) + 1;
    check_binary(Gt, &[big, -5], &[big - 1, 3], &[true, false]);
    check_binary(Eq, &[big], &[big - 1], &[false]);
    check_binary(Le, &[0u8, 255], &[0, 254], &[true, false]);
    check_binary(Lt, &[false, true, false], &[true, false, false], &[true, false, false]);
    check_binary(Eq, &[false, true], &[false, false], &[true, false]);
}

#[test]
fn comparison_of_two_dtypes_compares_in_their_promotion() {
    // u8 with i32 promotes to i32, so 200 > -1; f32 with i32 compares as f32,
    // where 16777217 rounds to 16777216.
    let mut g = Builder::default();
    let (a, b) = (g.data(&[1], &[200u8]), g.data(&[1], &[-1i32]));
    let gt = g.binary(Gt, a, b);
    let (c, d) = (g.data(&[1], &[16777216.0f32]), g.data(&[1], &[16777217i32]));
    let eq = g.binary(Eq, c, d);
    let out = g.evaluate(&[gt, eq]).unwrap();
    assert_eq!(out[0].to_vec::<bool>(), vec![true]);
    assert_eq!(out[1].to_vec::<bool>(), vec![true]);
}

#[test]
fn integer_arithmetic_wraps() {
    check_binary(Add, &[200u8, 1], &[100, 2], &[44u8, 3]);
    check_binary(Sub, &[3u8], &[5], &[254u8]);
    check_binary(Mul, &[16u8, 15], &[16, 17], &[0u8, 255]);
    check_binary(Add, &[i32::MAX, i32::MIN], &[1, -1], &[i32::MIN, i32::MAX]);
    check_binary(Mul, &[65536i32, -3], &[65536, 7], &[0, -21]);
    check_binary(Add, &[i64::MAX], &[1], &[i64::MIN]);
    check_binary(Mul, &[i64::MAX], &[i64::MAX], &[1i64]);
    check_binary(Sub, &[0u32], &[1], &[u32::MAX]);
    check_binary(Maximum, &[-4i64, 9], &[3, 2], &[3i64, 9]);
    check_binary(Minimum, &[200u8, 9], &[3, 20], &[3u8, 9]);
}

#[test]
fn integer_division_truncates_and_gives_zero_for_zero_divisors() {
    check_binary(
        Div,
        &[7i32, -7, 7, -7, 5, i32::MIN, 0],
        &[2, 2, -2, -2, 0, -1, 0],
        &[3i32, -3, -3, 3, 0, i32::MIN, 0],
    );
    check_binary(Div, &[7u32, 9, u32::MAX], &[2, 0, 2], &[3u32, 0, u32::MAX / 2]);
    check_binary(Div, &[i64::MIN, 9], &[-1, 0], &[i64::MIN, 0]);
}

#[test]
fn bitwise_ops_on_integers_and_bools() {
    check_binary(BitAnd, &[0b1100u8, 255], &[0b1010, 7], &[0b1000u8, 7]);
    check_binary(BitOr, &[0b1100u8], &[0b1010], &[0b1110u8]);
    check_binary(BitXor, &[0b1100u8, 255], &[0b1010, 1], &[0b0110u8, 254]);
    check_binary(BitAnd, &[-1i32, -8], &[12, 7], &[12i32, 0]);
    check_binary(BitXor, &[5i64], &[-1], &[-6i64]);
    let (a, b) = (&[false, false, true, true], &[false, true, false, true]);
    check_binary(BitAnd, a, b, &[false, false, false, true]);
    check_binary(BitOr, a, b, &[false, true, true, true]);
    check_binary(BitXor, a, b, &[false, true, true, false]);
}

#[test]
fn bool_arithmetic_computes_on_zero_and_one() {
    let (a, b) = (&[false, false, true, true], &[false, true, false, true]);
    check_binary(Add, a, b, &[false, true, true, true]);
    check_binary(Mul, a, b, &[false, false, false, true]);
    check_binary(Sub, a, b, &[false, true, true, false]);
    check_binary(Maximum, a, b, &[false, true, true, true]);
    check_binary(Minimum, a, b, &[false, false, false, true]);
    check_binary(Div, a, b, &[false, false, false, true]);
}

#[test]
fn binary_ops_reject_unsupported_dtypes() {
    let cases: [(BinaryOp, &str, DType); 4] = [
        (BitAnd, "bitand", F32),
        (BitXor, "bitxor", F32),
        (Pow, "pow", I32),
        (Pow, "pow", Bool),
    ];
    for (op, name, dtype) in cases {
        let mut g = Builder::default();
        let x = g.node(Op::Full(Scalar::Int(1, I64)), &[2], dtype, &[]);
        let y = g.binary(op, x, x);
        let err = g.error(y);
        assert!(
            matches!(err, Error::UnsupportedDType { op, dtype: d, .. } if op == name && d == dtype),
            "{err}"
        );
    }
    let mut g = Builder::default();
    let x = g.data(&[1], &[1.0f32]);
    let y = g.node(Op::Binary(Lt), &[1], F32, &[x, x]);
    assert!(matches!(
        g.error(y),
        Error::UnsupportedDType {
            op: "lt",
            dtype: F32,
            ..
        }
    ));
}

#[test]
fn where_selects_elementwise() {
    let mut g = Builder::default();
    let c = g.data(&[4], &[true, false, true, false]);
    let a = g.data(&[4], &[1.0f32, 2.0, f32::NAN, 4.0]);
    let b = g.data(&[4], &[-1.0f32, f32::NAN, -3.0, -4.0]);
    let w = g.node(Op::Where, &[4], F32, &[c, a, b]);
    assert_same(&g.run::<f32>(w), &[1.0, f32::NAN, f32::NAN, -4.0], "where f32");

    // A condition computed by a comparison, selecting integers.
    let mut g = Builder::default();
    let a = g.data(&[3], &[5i64, -2, 7]);
    let zero = g.node(Op::Full(Scalar::Int(0, I64)), &[3], I64, &[]);
    let positive = g.binary(Gt, a, zero);
    let relu = g.node(Op::Where, &[3], I64, &[positive, a, zero]);
    assert_eq!(g.run::<i64>(relu), vec![5, 0, 7]);

    let mut g = Builder::default();
    let c = g.data(&[2], &[true, false]);
    let (a, b) = (g.data(&[2], &[false, false]), g.data(&[2], &[true, true]));
    let w = g.node(Op::Where, &[2], Bool, &[c, a, b]);
    assert_eq!(g.run::<bool>(w), vec![false, true]);
}

#[test]
fn cast_float_to_integer_truncates_then_wraps() {
    // 1e20 saturates to i64::MAX, which wraps to -1 in i32.
    check_cast(&[2.7f32, -2.7, f32::NAN, 1e20, -1.0], &[2i32, -2, 0, -1, -1]);
    check_cast(&[300.0f64, -1.0, 2.9, 255.5], &[44u8, 255, 2, 255]);
    check_cast(&[-1e30f64, 1e30], &[i64::MIN, i64::MAX]);
    check_cast(&[h(-3.75)], &[-3i64]);
}

#[test]
fn cast_integer_to_integer_wraps() {
    check_cast(&[300i32, -1, 255], &[44u8, 255, 255]);
    check_cast(&[(1i64 << 32) + 5, -1], &[5i32, -1]);
    check_cast(&[-1i32], &[u32::MAX]);
    check_cast(&[u32::MAX], &[-1i32]);
    check_cast(&[u32::MAX], &[u32::MAX as i64]);
    check_cast(&[255u8], &[255i32]);
}

#[test]
fn cast_integer_to_float_rounds_to_nearest_even() {
    check_cast(&[16777217i32, 16777219], &[16777216.0f32, 16777220.0]);
    check_cast(&[(1i64 << 53) + 1], &[(1u64 << 53) as f64]);
    check_cast(&[2049i32, 2051, 70000], &[h(2048.0), h(2052.0), h(INF)]);
    check_cast(&[257i32, 259, 255], &[b16(256.0), b16(260.0), b16(255.0)]);
}

#[test]
fn cast_float_to_float_rounds_to_nearest_even() {
    let tie = 1.0 + 2f64.powi(-11);
    check_cast(&[0.1f64, 1e300, -1e-50], &[0.1f32, f32::INFINITY, -0.0]);
    check_cast(
        &[65520.0f32, 65519.0, tie as f32, (1.0 + 3.0 * 2f64.powi(-11)) as f32],
        &[h(INF), h(65504.0), h(1.0), h(1.001953125)],
    );
    check_cast(
        &[1.0 + 2f64.powi(-8), 1.0 + 3.0 * 2f64.powi(-8)],
        &[b16(1.0), b16(1.015625)],
    );
    check_cast(&[h(65504.0), h(6e-8)], &[65504.0f32, 2f32.powi(-24)]);
    check_cast(&[b16(1.0e38)], &[h(INF)]);
    check_cast(&[f64::NAN, 1e-10], &[h(NAN), h(0.0)]);
}

#[test]
fn cast_to_and_from_bool() {
    check_cast(&[0.0f32, -0.0, 0.5, f32::NAN], &[false, false, true, true]);
    check_cast(&[0i32, 2, -1], &[false, true, true]);
    check_cast(&[true, false], &[1.0f32, 0.0]);
    check_cast(&[true, false], &[1u8, 0]);
    check_cast(&[true], &[h(1.0)]);
}

#[test]
fn f16_chains_round_at_every_node() {
    // (1 + 2^-11) is a tie in f16 and rounds to 1, so (a + b) + c stays 1 in
    // f16; the same sum in f32 is 1 + 2^-10, which f16 represents.
    let (a, b) = (1.0, 2f64.powi(-11));
    let sum = |dtype: DType| {
        let mut g = Builder::default();
        let x = g.node(Op::Full(Scalar::Float(a, F64)), &[1], dtype, &[]);
        let y = g.node(Op::Full(Scalar::Float(b, F64)), &[1], dtype, &[]);
        let xy = g.binary(Add, x, y);
        let xyz = g.binary(Add, xy, y);
        let out = g.cast(xyz, F16);
        g.run::<f16>(out)[0]
    };
    assert_eq!(sum(F16), h(1.0));
    assert_eq!(sum(F32), h(1.0009765625));
}
