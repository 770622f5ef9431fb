//! Elementwise ops and casts against f64 references.

use super::*;
use half::{bf16, f16};

/// Runs `dst = f(loaded inputs)` over tiles of the inputs' length and
/// returns the output buffer of `out_dtype`.
fn map(inputs: &[&HostBuffer], out_dtype: DType, f: impl FnOnce(&mut Builder, &[ValueId]) -> ValueId) -> HostBuffer {
    let n = inputs[0].len() as u64;
    let mut p = Builder::new("test", &[1]);
    let loaded: Vec<ValueId> = inputs
        .iter()
        .map(|b| {
            let a = p.param("p", b.dtype(), n, Access::Read);
            let v = dense(&mut p, a, &[n], &[n as u32]);
            p.load(v, &[c(0)], false)
        })
        .collect();
    let y = f(&mut p, &loaded);
    let o = p.param("p", out_dtype, n, Access::Write);
    let vo = dense(&mut p, o, &[n], &[n as u32]);
    p.store(vo, &[c(0)], y, false);
    let mut out = HostBuffer::zeros(out_dtype, n as usize);
    run(&p.finish().unwrap(), inputs, &mut [&mut out]).unwrap();
    out
}

/// erf by Gauss-Legendre quadrature of 2/sqrt(pi) exp(-t^2) over [0, x]
/// in 64 panels: an independent reference accurate to about 1e-16.
fn erf_quadrature(x: f64) -> f64 {
    const NODES: [(f64, f64); 5] = [
        (0.0, 0.5688888888888889),
        (0.5384693101056831, 0.4786286704993665),
        (-0.5384693101056831, 0.4786286704993665),
        (0.906179845938664, 0.2369268850561891),
        (-0.906179845938664, 0.2369268850561891),
    ];
    let panels = 64;
    let h = x / panels as f64;
    let mut sum = 0.0;
    for k in 0..panels {
        let mid = (k as f64 + 0.5) * h;
        for (node, weight) in NODES {
            let t = mid + node * h / 2.0;
            sum += weight * (-t * t).exp() * h / 2.0;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// The f64 reference of each unary op.
fn unary_reference(op: UnaryOp, x: f64) -> f64 {
    use UnaryOp::*;
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    match op {
        Neg => -x,
        Abs => x.abs(),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Log => x.ln(),
        Log2 => x.log2(),
        Sqrt => x.sqrt(),
        Rsqrt => 1.0 / x.sqrt(),
        Recip => 1.0 / x,
        Sin => x.sin(),
        Cos => x.cos(),
        Tanh => x.tanh(),
        Sigmoid => sigmoid(x),
        Relu => x.max(0.0),
        GeluTanh => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh()),
        GeluErf => 0.5 * x * (1.0 + erf_quadrature(x / std::f64::consts::SQRT_2)),
        Silu => x * sigmoid(x),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        Sign => x.signum(),
        Not => unreachable!("not a float op"),
    }
}

const FLOAT_UNARY: [UnaryOp; 21] = {
    use UnaryOp::*;
    [
        Neg, Abs, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Recip, Sin, Cos, Tanh, Sigmoid, Relu, GeluTanh, GeluErf, Silu,
        Floor, Ceil, Round, Sign,
    ]
};

/// Whether `got` is within `ulps` units in the last place (of `eps`) of `want`.
fn close(got: f64, want: f64, eps: f64, ulps: f64) -> bool {
    got == want || (got.is_nan() && want.is_nan()) || (got - want).abs() <= ulps * eps * want.abs().max(1e-30)
}

#[test]
fn every_unary_float_op_matches_f64() {
    let xs: Vec<f32> = sample_f32(200, 6.0, 1)
        .into_iter()
        .chain([0.5, 1.5, 2.5, -2.5, 4.0])
        .collect();
    for op in FLOAT_UNARY {
        // Logs and roots take the magnitudes.
        let positive = matches!(op, UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Rsqrt);
        let xs: Vec<f32> = xs.iter().map(|&x| if positive { x.abs() } else { x }).collect();
        let x64: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
        let y32 = map(&[&HostBuffer::from_elements(&xs)], DType::F32, |p, v| p.unary(op, v[0])).to_vec::<f32>();
        let y64 = map(&[&HostBuffer::from_elements(&x64)], DType::F64, |p, v| {
            p.unary(op, v[0])
        })
        .to_vec::<f64>();
        for ((&x, &got32), &got64) in x64.iter().zip(&y32).zip(&y64) {
            let want = unary_reference(op, x);
            // Near the zeros of sin and cos a relative bound means little,
            // and the GELUs cancel `1 + tanh` (or `1 + erf`) for negative
            // arguments: compare those against the scale of the argument.
            let scale = match op {
                UnaryOp::Sin | UnaryOp::Cos => 1.0,
                UnaryOp::GeluTanh | UnaryOp::GeluErf => want.abs().max(x.abs()),
                _ => want.abs(),
            };
            let tol32 = 4.0 * f32::EPSILON as f64 * scale.max(1e-30);
            let tol64 = 4.0 * f64::EPSILON * scale.max(1e-300);
            assert!(
                (got32 as f64 - want).abs() <= tol32,
                "{op:?}({x}) f32: {got32}, want {want}"
            );
            assert!(
                close(got64, want, f64::EPSILON, 4.0) || (got64 - want).abs() <= tol64,
                "{op:?}({x}) f64: {got64}, want {want}"
            );
        }
    }
}

#[test]
fn rounding_sign_and_relu_edges() {
    let xs = [0.5f64, 1.5, 2.5, -0.5, -1.5, f64::NAN, -0.0, 3.0];
    let b = HostBuffer::from_elements(&xs);
    let round = map(&[&b], DType::F64, |p, v| p.unary(UnaryOp::Round, v[0])).to_vec::<f64>();
    assert_eq!(&round[..5], &[0.0, 2.0, 2.0, -0.0, -2.0]);
    assert!(round[3].is_sign_negative() && round[5].is_nan());
    let sign = map(&[&b], DType::F64, |p, v| p.unary(UnaryOp::Sign, v[0])).to_vec::<f64>();
    assert_eq!(&sign[..5], &[1.0, 1.0, 1.0, -1.0, -1.0]);
    assert!(sign[5].is_nan() && sign[7] == 1.0);
    assert_eq!(sign[6].to_bits(), 0.0f64.to_bits(), "sign(-0) is +0");
    let relu = map(&[&b], DType::F64, |p, v| p.unary(UnaryOp::Relu, v[0])).to_vec::<f64>();
    assert!(relu[5].is_nan() && relu[3] == 0.0 && relu[7] == 3.0);
    assert_eq!(relu[6].to_bits(), 0.0f64.to_bits(), "relu(-0) is +0");
    // Ties of maximum and minimum keep the first operand.
    let zeros = [
        HostBuffer::from_elements(&[-0.0f64, 0.0]),
        HostBuffer::from_elements(&[0.0f64, -0.0]),
    ];
    let max = map(&[&zeros[0], &zeros[1]], DType::F64, |p, v| {
        p.binary(BinaryOp::Maximum, v[0], v[1])
    });
    assert_eq!(
        max.to_vec::<f64>().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        vec![(-0.0f64).to_bits(), 0]
    );
}

#[test]
fn binary_float_ops_match_f64_and_propagate_nan() {
    use BinaryOp::*;
    let a = [1.5f32, -2.0, 3.0, f32::NAN, 0.25, 7.0];
    let b = [2.0f32, 0.5, f32::NAN, 1.0, -4.0, 7.0];
    let (ba, bb) = (HostBuffer::from_elements(&a), HostBuffer::from_elements(&b));
    let a64: Vec<f64> = a.iter().map(|&x| x as f64).collect();
    let b64: Vec<f64> = b.iter().map(|&x| x as f64).collect();
    let (ba64, bb64) = (HostBuffer::from_elements(&a64), HostBuffer::from_elements(&b64));
    let reference = |op: BinaryOp, x: f64, y: f64| -> f64 {
        match op {
            Add => x + y,
            Sub => x - y,
            Mul => x * y,
            Div => x / y,
            Pow => x.powf(y),
            Maximum if x.is_nan() || y.is_nan() => f64::NAN,
            Maximum => x.max(y),
            Minimum if x.is_nan() || y.is_nan() => f64::NAN,
            _ => x.min(y),
        }
    };
    for op in [Add, Sub, Mul, Div, Pow, Maximum, Minimum] {
        let y32 = map(&[&ba, &bb], DType::F32, |p, v| p.binary(op, v[0], v[1])).to_vec::<f32>();
        let y64 = map(&[&ba64, &bb64], DType::F64, |p, v| p.binary(op, v[0], v[1])).to_vec::<f64>();
        for i in 0..a.len() {
            let want = reference(op, a64[i], b64[i]);
            assert!(
                close(y32[i] as f64, want, f32::EPSILON as f64, 1.0),
                "{op:?} f32 {i}: {} want {want}",
                y32[i]
            );
            assert!(
                close(y64[i], want, f64::EPSILON, 0.0),
                "{op:?} f64 {i}: {} want {want}",
                y64[i]
            );
        }
    }
    for (op, want) in [
        (Eq, [0u8, 0, 0, 0, 0, 1]),
        (Ne, [1, 1, 1, 1, 1, 0]),
        (Lt, [1, 1, 0, 0, 0, 0]),
        (Le, [1, 1, 0, 0, 0, 1]),
        (Gt, [0, 0, 0, 0, 1, 0]),
        (Ge, [0, 0, 0, 0, 1, 1]),
    ] {
        let got = map(&[&ba, &bb], DType::Bool, |p, v| p.binary(op, v[0], v[1]));
        assert_eq!(got.to_vec::<u8>(), want, "{op:?}");
    }
}

#[test]
fn integer_arithmetic_wraps_and_divides_by_zero_to_zero() {
    use BinaryOp::*;
    let a = HostBuffer::from_elements(&[i32::MAX, i32::MIN, -7, 7, 5, 0b1100]);
    let b = HostBuffer::from_elements(&[1i32, -1, 2, -2, 0, 0b1010]);
    let run_op = |op| map(&[&a, &b], DType::I32, |p, v| p.binary(op, v[0], v[1])).to_vec::<i32>();
    assert_eq!(run_op(Add), vec![i32::MIN, i32::MAX, -5, 5, 5, 22]);
    assert_eq!(run_op(Mul), vec![i32::MAX, i32::MIN, -14, -14, 0, 120]);
    assert_eq!(run_op(Div), vec![i32::MAX, i32::MIN, -3, -3, 0, 1]);
    assert_eq!(run_op(BitAnd)[5], 0b1000);
    assert_eq!(run_op(BitXor)[5], 0b0110);
    assert_eq!(run_op(Maximum), vec![i32::MAX, -1, 2, 7, 5, 12]);
    assert_eq!(run_op(Minimum), vec![1, i32::MIN, -7, -2, 0, 0b1010]);
    let neg = map(&[&a], DType::I32, |p, v| p.unary(UnaryOp::Neg, v[0])).to_vec::<i32>();
    assert_eq!(&neg[..3], &[-i32::MAX, i32::MIN, 7]);
    let u = HostBuffer::from_elements(&[200u8, 3]);
    let sq = map(&[&u, &u], DType::U8, |p, v| p.binary(Mul, v[0], v[1])).to_vec::<u8>();
    assert_eq!(sq, vec![64, 9]);
    let not = map(&[&HostBuffer::from_elements(&[true, false])], DType::Bool, |p, v| {
        p.unary(UnaryOp::Not, v[0])
    });
    assert_eq!(not.to_vec::<u8>(), vec![0, 1]);
}

#[test]
fn casts_truncate_saturate_wrap_and_round_to_nearest_even() {
    let f = HostBuffer::from_elements(&[2.7f32, -2.7, 3e9, -3e9, f32::NAN, 0.0]);
    let to_i32 = map(&[&f], DType::I32, |p, v| p.cast(v[0], DType::I32)).to_vec::<i32>();
    // Through i64, then wrapped to 32 bits, as `Scalar::cast` does.
    assert_eq!(
        to_i32,
        vec![2, -2, 3_000_000_000i64 as i32, -3_000_000_000i64 as i32, 0, 0]
    );
    let to_bool = map(&[&f], DType::Bool, |p, v| p.cast(v[0], DType::Bool)).to_vec::<u8>();
    assert_eq!(to_bool, vec![1, 1, 1, 1, 1, 0]);
    let big = HostBuffer::from_elements(&[(1i64 << 32) + 5, -1]);
    let wrapped = map(&[&big], DType::I32, |p, v| p.cast(v[0], DType::I32)).to_vec::<i32>();
    assert_eq!(wrapped, vec![5, -1]);
    let to_u8 = map(&[&big], DType::U8, |p, v| p.cast(v[0], DType::U8)).to_vec::<u8>();
    assert_eq!(to_u8, vec![5, 255]);

    // Ties of f16 (10 fraction bits) and bf16 (7) round to even.
    let ulp16 = 2f32.powi(-10);
    let ulp_bf = 2f32.powi(-7);
    let xs = [
        1.0 + ulp16 / 2.0,
        1.0 + 1.5 * ulp16,
        1.0 + ulp_bf / 2.0,
        1.0 + 1.5 * ulp_bf,
        70000.0,
    ];
    let b = HostBuffer::from_elements(&xs);
    let h = map(&[&b], DType::F16, |p, v| p.cast(v[0], DType::F16)).to_vec::<f16>();
    assert_eq!(h[0], f16::ONE);
    assert_eq!(h[1].to_f32(), 1.0 + 2.0 * ulp16);
    assert_eq!(h[4], f16::INFINITY);
    let bf = map(&[&b], DType::BF16, |p, v| p.cast(v[0], DType::BF16)).to_vec::<bf16>();
    assert_eq!(bf[2], bf16::ONE);
    assert_eq!(bf[3].to_f32(), 1.0 + 2.0 * ulp_bf);
    // f16 back to f32 and bool to float are exact.
    let back = map(&[&HostBuffer::from_elements(&h)], DType::F32, |p, v| {
        p.cast(v[0], DType::F32)
    });
    assert_eq!(back.to_vec::<f32>()[1], 1.0 + 2.0 * ulp16);
    let from_bool = map(&[&HostBuffer::from_elements(&[true, false])], DType::F64, |p, v| {
        p.cast(v[0], DType::F64)
    });
    assert_eq!(from_bool.to_vec::<f64>(), vec![1.0, 0.0]);
}

#[test]
fn half_casts_of_whole_tiles_match_element_by_element_conversion() {
    // The tile casts between f32 and f16/bf16 convert whole slices (vector
    // instructions where the CPU has them): over bit patterns of every
    // class (NaN, infinities, subnormals, ties, overflow) and a length
    // that is not a multiple of the vector width, each element is what
    // `from_f32`/`to_f32` give.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut bits = vec![
        0u32,
        0x8000_0000,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0001,
        0x0000_0001,
        0x3880_0000,
    ];
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bits.push(x as u32);
    }
    let xs: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    let b = HostBuffer::from_elements(&xs);
    let h = map(&[&b], DType::F16, |p, v| p.cast(v[0], DType::F16)).to_vec::<f16>();
    let bf = map(&[&b], DType::BF16, |p, v| p.cast(v[0], DType::BF16)).to_vec::<bf16>();
    for (i, &v) in xs.iter().enumerate() {
        assert_eq!(h[i].to_bits(), f16::from_f32(v).to_bits(), "f16 of {:#x}", bits[i]);
        assert_eq!(bf[i].to_bits(), bf16::from_f32(v).to_bits(), "bf16 of {:#x}", bits[i]);
    }
    let back16 = map(&[&HostBuffer::from_elements(&h)], DType::F32, |p, v| {
        p.cast(v[0], DType::F32)
    })
    .to_vec::<f32>();
    let back_bf = map(&[&HostBuffer::from_elements(&bf)], DType::F32, |p, v| {
        p.cast(v[0], DType::F32)
    })
    .to_vec::<f32>();
    for i in 0..xs.len() {
        assert_eq!(
            back16[i].to_bits(),
            h[i].to_f32().to_bits(),
            "f32 of f16 {:#x}",
            h[i].to_bits()
        );
        assert_eq!(
            back_bf[i].to_bits(),
            bf[i].to_f32().to_bits(),
            "f32 of bf16 {:#x}",
            bf[i].to_bits()
        );
    }
}

#[test]
fn bool_tiles_take_logic_and_comparisons() {
    let a = HostBuffer::from_elements(&[false, false, true, true]);
    let b = HostBuffer::from_elements(&[false, true, false, true]);
    for (op, want) in [
        (BinaryOp::BitAnd, [0u8, 0, 0, 1]),
        (BinaryOp::BitOr, [0, 1, 1, 1]),
        (BinaryOp::BitXor, [0, 1, 1, 0]),
        (BinaryOp::Eq, [1, 0, 0, 1]),
        (BinaryOp::Lt, [0, 1, 0, 0]),
    ] {
        let got = map(&[&a, &b], DType::Bool, |p, v| p.binary(op, v[0], v[1]));
        assert_eq!(got.to_vec::<u8>(), want, "{op:?}");
    }
}

#[test]
fn half_tiles_refuse_arithmetic_without_the_verifier() {
    let x = HostBuffer::from_elements(&[1.0f32; 4]);
    let mut program = {
        let mut p = Builder::new("test", &[1]);
        let a = p.param("a", DType::F32, 4, Access::Read);
        let o = p.param("o", DType::F32, 4, Access::Write);
        let (va, vo) = (dense(&mut p, a, &[4], &[4]), dense(&mut p, o, &[4], &[4]));
        let x = p.load(va, &[c(0)], false);
        let y = p.binary(BinaryOp::Add, x, x);
        p.store(vo, &[c(0)], y, false);
        p.finish().unwrap()
    };
    let mut out = HostBuffer::zeros(DType::F32, 4);
    run(&program, &[&x], &mut [&mut out]).unwrap();
    assert_eq!(out.to_vec::<f32>(), vec![2.0; 4]);
    // The same program on f16 buffers and tiles.
    for param in &mut program.params {
        param.dtype = DType::F16;
    }
    for value in &mut program.values {
        value.dtype = DType::F16;
    }
    let h = HostBuffer::from_elements(&[f16::ONE; 4]);
    let mut out = HostBuffer::zeros(DType::F16, 4);
    let err = run_unverified(&program, &[&h], &mut [&mut out]).unwrap_err();
    assert!(
        matches!(err, crate::Error::UnsupportedDType { dtype: DType::F16, .. }),
        "{err}"
    );
    let err = run(&program, &[&h], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, crate::Error::InvalidProgram { .. }), "{err}");
}
