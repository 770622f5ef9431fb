//! Runs the generated f64 instruction sequences on the CPU and measures
//! their error against the standard library's f64 functions.

use super::*;
use crate::kernels::ptx_gen::math::ieee_ops_on_the_cpu;

/// `MathOps64` on the CPU: every operation is the f64 operation the
/// generated PTX performs, so the results are the GPU's bit for bit.
#[derive(Default, Clone, Copy)]
pub(crate) struct Cpu64;

ieee_ops_on_the_cpu!(Cpu64, f64);

impl Cpu64 {
    /// As `cvt.rni.s64.f64` (saturating, NaN to 0), `add.s64` of the bias
    /// and `shl.b64` by 52 do, wrapping in 64 bits.
    fn pow2i_bits(&self, n: f64) -> f64 {
        f64::from_bits(((n.round_ties_even() as i64).wrapping_add(1023) as u64).wrapping_shl(52))
    }
    fn exponent_bits(&self, a: f64) -> f64 {
        (((a.to_bits() >> 52) & 0x7ff) as i32 - 1023) as f64
    }
    fn mantissa_bits(&self, a: f64) -> f64 {
        f64::from_bits((a.to_bits() & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000)
    }
}

impl MathOps64 for Cpu64 {
    fn reduce_large(&mut self, a: &f64) -> (f64, f64, f64) {
        reduce_large_bits(*a)
    }
    fn guarded<F: FnOnce(&mut Self) -> Vec<f64>>(&mut self, _needed: &bool, n: usize, body: F) -> Vec<f64> {
        let out = body(self);
        assert_eq!(out.len(), n, "a guarded body's value count");
        out
    }
}

/// The distance from `got` to `want` in units of the f64 ulp at `want`
/// (the smallest subnormal for results below the normal range).
fn ulps(got: f64, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got == want {
        return 0.0;
    }
    if want.is_infinite() || got.is_infinite() {
        return f64::INFINITY;
    }
    let w = want.abs();
    let ulp = (f64::from_bits(w.to_bits() + 1) - w).max(f64::from_bits(1));
    (got - want).abs() / ulp
}

type Unary = fn(&mut Cpu64, &f64) -> f64;

/// Each function, the range it is measured on, and its f64 reference.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<(&'static str, Unary, f64, f64, fn(f64) -> f64)> {
    vec![
        ("exp", |m, x| exp(m, x), -745.0, 709.7, f64::exp),
        ("exp2", |m, x| exp2(m, x), -1074.0, 1023.9, f64::exp2),
        ("log", |m, x| log(m, x), 1e-320, 1.7e308, f64::ln),
        ("log2", |m, x| log2(m, x), 1e-320, 1.7e308, f64::log2),
        ("sin", |m, x| sin_cos(m, x, false), -1e6, 1e6, f64::sin),
        ("cos", |m, x| sin_cos(m, x, true), -1e6, 1e6, f64::cos),
        ("sin_large", |m, x| sin_cos(m, x, false), 1e6, 1e300, f64::sin),
        ("cos_large", |m, x| sin_cos(m, x, true), 1e6, 1e300, f64::cos),
        ("tanh", |m, x| tanh(m, x), -25.0, 25.0, f64::tanh),
        (
            "sigmoid",
            |m, x| sigmoid(m, x),
            -700.0,
            700.0,
            |x| {
                let e = (-x.abs()).exp();
                if x < 0.0 {
                    e / (1.0 + e)
                } else {
                    1.0 / (1.0 + e)
                }
            },
        ),
        (
            "silu",
            |m, x| silu(m, x),
            -700.0,
            700.0,
            |x| {
                let e = (-x.abs()).exp();
                if x < 0.0 {
                    x * e / (1.0 + e)
                } else {
                    x / (1.0 + e)
                }
            },
        ),
        ("gelu_tanh", |m, x| gelu_tanh(m, x), -5.0, 10.0, gelu_tanh_reference),
        (
            "gelu_erf",
            |m, x| gelu_erf(m, x),
            -37.0,
            10.0,
            crate::graph::reference::erf::gelu_erf,
        ),
    ]
}

/// `a · b` as `(product, error)`, exactly.
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

/// `x σ(z)` with `z = 2 √(2/π) (x + 0.044715 x³)` evaluated in
/// double-double arithmetic (`√(8/π)` to 106 bits), so that the reference
/// does not share the kernel's rounding of `z`; `e^{−|z|}` is the standard
/// library's, corrected to first order for the low part of `z`.
fn gelu_tanh_reference(x: f64) -> f64 {
    const K: (f64, f64) = (1.595_769_121_605_730_8, -9.969_308_809_110_92e-17);
    let (x2, x2e) = two_prod(x, x);
    let (q, qe) = two_prod(x2, 0.044_715);
    let qe = qe + x2e * 0.044_715;
    let p = 1.0 + q;
    let pe = (1.0 - p + q) + qe;
    let pe = if q.abs() > 1.0 { (q - p + 1.0) + qe } else { pe };
    let (i, ie) = two_prod(p, x);
    let ie = ie + pe * x;
    let (z, ze) = two_prod(i, K.0);
    let ze = ze + i * K.1 + ie * K.0;
    if !z.is_finite() {
        return x / (1.0 + (-z).exp());
    }
    let e = (-z.abs()).exp() * (1.0 - ze.signum() * z.signum() * ze.abs());
    if z < 0.0 {
        x * e / (1.0 + e)
    } else {
        x / (1.0 + e)
    }
}

/// Samples: a dense linear sweep, and logarithmic sweeps for wide ranges.
fn samples(lo: f64, hi: f64) -> Vec<f64> {
    let n = 60_000;
    let mut xs: Vec<f64> = (0..=n).map(|i| lo + (hi - lo) * (i as f64 / n as f64)).collect();
    if lo > 0.0 {
        let (a, b) = (lo.ln(), hi.ln());
        xs.extend((0..=n).map(|i| (a + (b - a) * i as f64 / n as f64).exp()));
        // Around 1, where log cancels.
        xs.extend((0..=n).map(|i| 0.7 + 0.7 * i as f64 / n as f64));
    } else {
        xs.extend((0..=n).map(|i| 1e-12 * (hi / 1e-12).powf(i as f64 / n as f64)));
        xs.extend((0..=n).map(|i| -(1e-12 * (-lo / 1e-12).powf(i as f64 / n as f64))));
    }
    xs.retain(|x| *x >= lo && *x <= hi);
    xs
}

/// The worst error of each function in ulps, with the argument where it occurs.
fn worst() -> Vec<(&'static str, f64, f64)> {
    cases()
        .into_iter()
        .map(|(name, f, lo, hi, reference)| {
            let mut worst = (0.0f64, 0.0f64);
            for x in samples(lo, hi) {
                let e = ulps(f(&mut Cpu64, &x), reference(x));
                if e > worst.0 {
                    worst = (e, x);
                }
            }
            (name, worst.0, worst.1)
        })
        .collect()
}

#[test]
fn worst_errors() {
    // The bounds are the documented figures rounded up; a regression fails here.
    let bounds = [
        ("exp", 1.5),
        ("exp2", 1.5),
        ("log", 1.5),
        ("log2", 1.5),
        ("sin", 1.5),
        ("cos", 1.5),
        ("sin_large", 1.5),
        ("cos_large", 1.5),
        ("tanh", 3.0),
        ("sigmoid", 3.0),
        ("silu", 3.5),
        ("gelu_tanh", 4.0),
        ("gelu_erf", 8.0),
    ];
    crate::kernels::ptx_gen::math::tests::check_bounds(worst(), &bounds);
}

#[test]
fn exact_values() {
    let m = &mut Cpu64;
    for n in -1074..=1023 {
        assert_eq!(exp2(m, &(n as f64)), (n as f64).exp2(), "exp2({n})");
        let p = (n as f64).exp2();
        assert_eq!(log2(m, &p), n as f64, "log2(2^{n})");
    }
    assert_eq!(exp(m, &0.0), 1.0);
    assert_eq!(log(m, &1.0), 0.0);
    assert_eq!(tanh(m, &0.0).to_bits(), 0.0f64.to_bits());
    assert_eq!(tanh(m, &-0.0).to_bits(), (-0.0f64).to_bits());
    assert_eq!(tanh(m, &1e-300), 1e-300);
    assert_eq!(tanh(m, &-5e-324), -5e-324);
    assert_eq!(sigmoid(m, &0.0), 0.5);
    assert_eq!(pow(m, &-2.0, &3.0), -8.0);
    assert_eq!(pow(m, &2.0, &10.0), 1024.0);
    assert_eq!(pow(m, &10.0, &2.0), 100.0);
    assert_eq!(pow(m, &3.0, &-2.0), 1.0 / 9.0);
}

/// Overflow and underflow at the edges of the range, subnormal results
/// and arguments.
#[test]
fn range_edges() {
    let m = &mut Cpu64;
    for x in [709.78, 709.782712893383, 709.7827128933841, 710.0, 1e300] {
        assert!(ulps(exp(m, &x), x.exp()) <= 1.5, "exp({x}) = {}", exp(m, &x));
    }
    for x in [
        -708.5,
        -720.0,
        -740.0,
        -745.0,
        -745.1332191019411,
        -745.2,
        -746.0,
        -800.0,
    ] {
        assert!(ulps(exp(m, &x), x.exp()) <= 1.0, "exp({x}) = {:e}", exp(m, &x));
    }
    for x in [
        1023.99, 1024.0, 1024.3, -1022.5, -1073.7, -1074.0, -1074.6, -1075.0, -1076.0, -1080.0,
    ] {
        assert!(ulps(exp2(m, &x), x.exp2()) <= 1.0, "exp2({x}) = {:e}", exp2(m, &x));
    }
    for x in [5e-324, 1e-310, 2.2e-308, f64::MAX] {
        assert!(ulps(log(m, &x), x.ln()) <= 1.0, "log({x:e})");
        assert!(ulps(log2(m, &x), x.log2()) <= 1.0, "log2({x:e})");
    }
}

#[test]
fn nan_and_infinite_arguments() {
    let m = &mut Cpu64;
    let (nan, inf, ninf) = (f64::NAN, f64::INFINITY, f64::NEG_INFINITY);
    let unary: [(&str, Unary); 9] = [
        ("exp", exp),
        ("exp2", exp2),
        ("log", log),
        ("log2", log2),
        ("tanh", tanh),
        ("sigmoid", sigmoid),
        ("silu", silu),
        ("gelu_tanh", gelu_tanh),
        ("gelu_erf", gelu_erf),
    ];
    for (name, f) in unary {
        assert!(f(m, &nan).is_nan(), "{name}(NaN) = {}", f(m, &nan));
    }
    assert_eq!(exp(m, &inf), inf);
    assert_eq!(exp(m, &ninf), 0.0);
    assert_eq!(exp2(m, &inf), inf);
    assert_eq!(exp2(m, &ninf), 0.0);
    assert_eq!(log(m, &0.0), ninf);
    assert_eq!(log(m, &-0.0), ninf);
    assert!(log(m, &-1.0).is_nan());
    assert_eq!(log(m, &inf), inf);
    assert_eq!(log2(m, &inf), inf);
    assert!(log2(m, &ninf).is_nan());
    assert_eq!(tanh(m, &inf), 1.0);
    assert_eq!(tanh(m, &ninf), -1.0);
    assert_eq!(sigmoid(m, &inf), 1.0);
    assert_eq!(sigmoid(m, &ninf), 0.0);
    assert_eq!(silu(m, &inf), inf);
    assert_eq!(gelu_tanh(m, &inf), inf);
    assert_eq!(gelu_erf(m, &inf), inf);
    assert_eq!(gelu_erf(m, &1e300), 1e300);
    assert_eq!(gelu_erf(m, &-1e300).to_bits(), (-0.0f64).to_bits());
    for (a, b) in [
        (nan, 1.0),
        (nan, 0.0),
        (1.0, nan),
        (2.0, nan),
        (nan, nan),
        (inf, ninf),
        (ninf, inf),
        (inf, 2.0),
        (inf, -2.0),
        (ninf, 3.0),
        (ninf, -3.0),
        (ninf, 2.0),
        (ninf, 0.5),
        (ninf, -0.5),
        (-0.0, 0.5),
        (-0.0, -0.5),
        (-0.0, 0.0),
        (0.0, -0.0),
        (0.0, 3.0),
        (-0.0, 3.0),
        (-0.0, -3.0),
        (-0.0, -2.0),
        (0.0, -0.5),
        (0.5, inf),
        (0.5, ninf),
        (2.0, inf),
        (2.0, ninf),
        (-1.0, inf),
        (-1.0, ninf),
        (-8.0, 1.0 / 3.0),
        (2.0, 1024.0),
        (2.0, -1075.0),
        (-2.0, 1e300),
        (-2.0, -1e300),
        (1e300, 1e300),
        (1e-300, 1e300),
    ] {
        let (got, want) = (pow(m, &a, &b), a.powf(b));
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "pow({a}, {b}) = {got}, want {want}"
        );
    }
}

/// `pow` over moderate and large results: its logarithm and product are
/// carried in double-double, so the error stays small as `|b log2 a|` grows.
#[test]
fn pow_errors() {
    let m = &mut Cpu64;
    let mut worst = [(0.0f64, 0.0f64, 0.0f64); 3];
    for i in 0..300 {
        for j in 0..300 {
            let grids = [
                (0.01 + i as f64 * 0.033, -8.0 + j as f64 * 0.0533),
                (0.5 + i as f64 * 0.005, -1000.0 + j as f64 * 6.67),
                (
                    1e-300 + i as f64 * 3.3e-3 * (1e300f64).powf(i as f64 / 300.0),
                    -1.0 + j as f64 * 0.0067,
                ),
            ];
            for (g, (a, b)) in grids.into_iter().enumerate() {
                let e = ulps(pow(m, &a, &b), a.powf(b));
                if e > worst[g].0 {
                    worst[g] = (e, a, b);
                }
            }
        }
    }
    for (what, (e, a, b)) in [
        "a in [0.01, 10], b in [-8, 8]",
        "a in [0.5, 2], b in [-1000, 1000]",
        "a in [1e-300, 1e300], b in [-1, 1]",
    ]
    .iter()
    .zip(worst)
    {
        println!("pow, {what}: worst {e:.2} ulp at ({a:e}, {b:e})");
    }
    assert!(worst[0].0 <= 2.0, "pow: {:?}", worst[0]);
    assert!(worst[1].0 <= 8.0, "pow: {:?}", worst[1]);
    assert!(worst[2].0 <= 2.0, "pow: {:?}", worst[2]);
}

#[test]
fn constants_are_the_intended_bits() {
    assert_eq!(LN2_HI_SPLIT.to_bits(), 0x3FE6_2E42_FEE0_0000);
    assert_eq!(LN2_LO_SPLIT.to_bits(), 0x3DEA_39EF_3579_3C76);
    assert_eq!(LN2.to_bits(), 0x3FE6_2E42_FEFA_39EF);
}

/// Arguments where `x mod π/2` cancels most of `x`'s digits: doubles
/// nearest multiples of `π/2`, in the three-part reduction's range and in
/// Payne–Hanek's, and the hardest case for doubles (`x mod π/2` near
/// `2^-61`); and the signs and specials of `sin` and `cos`.
#[test]
fn sin_and_cos_near_multiples_of_half_pi() {
    let m = &mut Cpu64;
    let pio2 = std::f64::consts::FRAC_PI_2;
    let mut xs: Vec<f64> = (1..200).map(|k| k as f64 * pio2).collect();
    xs.extend((0..60).map(|i| (1u64 << 20) as f64 * (i as f64 + 0.5) * pio2));
    xs.extend([1e5 * std::f64::consts::PI, 999_999.0 * pio2, 1e22, f64::MAX]);
    for &x in &xs {
        for (name, got, want) in [
            ("sin", sin_cos(m, &x, false), x.sin()),
            ("cos", sin_cos(m, &x, true), x.cos()),
            ("sin of -x", sin_cos(m, &-x, false), (-x).sin()),
        ] {
            assert!(ulps(got, want) <= 1.0, "{name}({x:e}) = {got:e}, want {want:e}");
        }
    }
    // The hardest case for doubles: `x mod π/2` is 4.687e-19. The values are
    // those of the exact `x` reduced with `π` to 3000 bits (the standard
    // library's cosine is 8 ulp off here).
    let hard = 6_381_956_970_095_103.0 * 2f64.powi(797);
    assert_eq!(sin_cos(m, &hard, false), 1.0);
    assert_eq!(sin_cos(m, &hard, true), -4.687_165_924_254_628e-19);
    assert_eq!(sin_cos(m, &-0.0, false).to_bits(), (-0.0f64).to_bits());
    assert_eq!(sin_cos(m, &0.0, false).to_bits(), 0.0f64.to_bits());
    assert_eq!(sin_cos(m, &0.0, true), 1.0);
    assert_eq!(sin_cos(m, &1e-300, false), 1e-300);
    for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
        assert!(sin_cos(m, &x, false).is_nan() && sin_cos(m, &x, true).is_nan(), "{x}");
    }
}

/// `gelu_erf` against values computed with 50-digit arithmetic (`x Φ(x)`,
/// rounded to f64), subnormal results included, where the f64 reference
/// evaluator is itself a few ulp off.
#[test]
fn gelu_erf_against_exact_values() {
    let cases = [
        (-37.6744, -2.457_007_671_722_807e-309),
        (-37.0, -2.118_461_352_334_093_5e-298),
        (-30.0, -1.472_014_178_144_456e-196),
        (-20.0, -5.507_248_237_212_468e-88),
        (-10.0, -7.619_853_024_160_526e-23),
        (-3.0, -0.004_049_694_094_890_283_5),
        (-1.0, -0.158_655_253_931_457_05),
        (-0.5, -0.154_268_769_362_993_44),
        (0.3, 0.185_373_426_656_685_8),
        (0.7, 0.530_625_443_443_848_9),
        (1.0, 0.841_344_746_068_542_9),
        (2.5, 2.484_475_836_685_559_7),
        (5.0, 4.999_998_566_742_141),
    ];
    for (x, want) in cases {
        let got = gelu_erf(&mut Cpu64, &x);
        println!("gelu_erf({x}): {:.2} ulp", ulps(got, want));
        assert!(ulps(got, want) <= 1.0, "gelu_erf({x}) = {got:e}, want {want:e}");
    }
}

/// Results far below 1 (subnormal ones included) of the functions built on
/// `e^{−|z|}`, against values computed with 60-digit arithmetic: the
/// exponential's scale is applied last, so they are rounded once.
#[test]
fn tiny_results_of_logistic_functions() {
    let m = &mut Cpu64;
    let cases: [(&str, Unary, f64, f64); 12] = [
        ("silu", silu, -714.595_824_407_122_7, -3.228_770_250_553_370_7e-308),
        ("silu", silu, -745.133_750_898_995_5, -1.84e-321),
        ("silu", silu, -740.0, -3.099_67e-319),
        ("silu", silu, -720.0, -1.463_206_177_745_47e-310),
        ("silu", silu, -709.5, -5.236_215_228_791_926e-306),
        ("silu", silu, -30.0, -2.807_286_890_651_789_6e-12),
        ("sigmoid", sigmoid, -714.595_824_407_122_7, 4.518_316_704_736_4e-311),
        ("sigmoid", sigmoid, -740.0, 4.2e-322),
        ("sigmoid", sigmoid, -709.5, 7.380_148_314_012_58e-309),
        ("sigmoid", sigmoid, -30.0, 9.357_622_968_839_299e-14),
        (
            "gelu_tanh",
            gelu_tanh,
            -21.201_977_451_276_694,
            -1.918_105_131_308_98e-309,
        ),
        (
            "gelu_tanh",
            gelu_tanh,
            -21.172_424_711_376_433,
            -3.436_071_849_596_913e-308,
        ),
    ];
    for (name, f, x, want) in cases {
        let got = f(m, &x);
        assert!(
            ulps(got, want) <= 2.0,
            "{name}({x:e}) = {got:e}, want {want:e} ({} ulp)",
            ulps(got, want)
        );
    }
    assert_eq!(silu(m, &-800.0).to_bits(), (-0.0f64).to_bits());
    assert_eq!(sigmoid(m, &-800.0).to_bits(), 0.0f64.to_bits());
    assert_eq!(gelu_tanh(m, &-27.0).to_bits(), (-0.0f64).to_bits());
}
