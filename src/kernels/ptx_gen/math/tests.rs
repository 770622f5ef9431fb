//! Runs the generated instruction sequences on the CPU and measures their
//! error against f64 references.

use super::*;

/// `MathOps` on the CPU: every IEEE operation is the f32 operation the
/// generated PTX performs; the hardware approximations `ex2` and `rcp`
/// return the exact value (`dir = 0`, rounded to nearest) or the float
/// farthest from it within their documented bound, above (`dir = 1`) or
/// below (`dir = -1`), so that the measured errors bound those of any
/// hardware meeting the documented bounds.
#[derive(Default, Clone, Copy)]
pub(crate) struct Cpu {
    pub(crate) ex2_dir: i8,
    pub(crate) rcp_dir: i8,
    pub(crate) tanh_dir: i8,
}

/// The documented worst error of `ex2.approx.f32`, in ulps of the result.
const EX2_ULPS: f64 = 2.0;
/// The documented worst error of `rcp.approx.f32`, in ulps of the result.
const RCP_ULPS: f64 = 1.0;

/// The documented worst relative error of `tanh.approx.f32`.
const TANH_RELATIVE: f64 = 4.93e-4; // 2^-10.987

/// `exact` rounded to f32, or moved by `bound` ulps in the direction `dir`
/// and rounded toward `exact` (so the error stays within `bound` ulps).
fn perturbed(exact: f64, bound: f64, dir: i8) -> f32 {
    let w = exact as f32;
    if dir == 0 || !w.is_finite() || exact == 0.0 {
        return w;
    }
    let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::from_bits(1)) as f64;
    let target = exact + f64::from(dir) * bound * ulp;
    if target.signum() != exact.signum() {
        return 0.0f32.copysign(w);
    }
    let y = target as f32;
    // Round toward `exact`: step back when `target` rounded away from it.
    let past = (y as f64 - target) * f64::from(dir) > 0.0;
    if !past {
        return y;
    }
    let toward_zero = (dir > 0) == (exact > 0.0);
    let bits = y.to_bits();
    f32::from_bits(if toward_zero { bits - 1 } else { bits + 1 })
}

ieee_ops_on_the_cpu!(Cpu, f32);

impl Cpu {
    /// As `add.f32` of `1.5 · 2^23`, `shl.b32` by 23 and `add.s32` of the
    /// bias do, wrapping in 32 bits.
    fn pow2i_bits(&self, n: f32) -> f32 {
        f32::from_bits(((n.round_ties_even() as i32).wrapping_add(127) as u32).wrapping_shl(23))
    }
    fn exponent_bits(&self, a: f32) -> f32 {
        (((a.to_bits() >> 23) & 255) as i32 - 127) as f32
    }
    fn mantissa_bits(&self, a: f32) -> f32 {
        f32::from_bits((a.to_bits() & 0x007f_ffff) | 0x3f80_0000)
    }
}

impl MathOps for Cpu {
    fn ex2(&mut self, a: &f32) -> f32 {
        perturbed((*a as f64).exp2(), EX2_ULPS, self.ex2_dir)
    }
    fn ex2_ftz(&mut self, a: &f32) -> f32 {
        let a = if a.is_subnormal() { 0.0 } else { *a };
        let r = self.ex2(&a);
        if r.is_subnormal() {
            0.0
        } else {
            r
        }
    }
    fn rcp_ftz(&mut self, a: &f32) -> f32 {
        let a = if a.is_subnormal() { 0.0f32.copysign(*a) } else { *a };
        let r = perturbed(1.0 / a as f64, RCP_ULPS, self.rcp_dir);
        if r.is_subnormal() {
            0.0f32.copysign(r)
        } else {
            r
        }
    }
    fn tanh_approx(&mut self, a: &f32) -> f32 {
        // The exact value moved by the relative bound, toward zero or away.
        let exact = (*a as f64).tanh();
        (exact * (1.0 + f64::from(self.tanh_dir) * TANH_RELATIVE * 0.999)) as f32
    }
}

/// The distance from `got` to `want` in units of the f32 ulp at `want`.
fn ulps(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if got as f64 == want {
        return 0.0;
    }
    let w = want as f32;
    if w.is_infinite() {
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::from_bits(1)) as f64;
    (got as f64 - want).abs() / ulp
}

/// `erfc` in f64: its Taylor series below 2 and a continued fraction above.
fn erfc64(z: f64) -> f64 {
    if z < 0.0 {
        2.0 - erfc64(-z)
    } else if z < 2.0 {
        let (mut term, mut sum, mut n) = (z, z, 0.0);
        while term.abs() > 1e-18 * sum.abs() {
            n += 1.0;
            term *= -z * z / n;
            sum += term / (2.0 * n + 1.0);
        }
        1.0 - sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut f = 0.0;
        for k in (1..80).rev() {
            f = (k as f64 / 2.0) / (z + f);
        }
        (-z * z).exp() / (z + f) / std::f64::consts::PI.sqrt()
    }
}

type Unary = fn(&mut Cpu, &f32) -> f32;

/// Each function, the range it is measured on, and its f64 reference.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<(&'static str, Unary, f32, f32, fn(f64) -> f64)> {
    vec![
        ("exp", |m, x| exp(m, x), -103.0, 88.7, f64::exp),
        ("exp2", |m, x| exp2(m, x), -149.0, 127.9, f64::exp2),
        ("log", |m, x| log(m, x), 1e-38, 3e38, f64::ln),
        ("log2", |m, x| log2(m, x), 1e-38, 3e38, f64::log2),
        ("sin", |m, x| sin_cos(m, x, 0.0), -1e4, 1e4, f64::sin),
        ("cos", |m, x| sin_cos(m, x, 1.0), -1e4, 1e4, f64::cos),
        ("tanh", |m, x| tanh(m, x), -10.0, 10.0, f64::tanh),
        (
            "sigmoid",
            |m, x| sigmoid(m, x),
            -80.0,
            80.0,
            |x| 1.0 / (1.0 + (-x).exp()),
        ),
        ("silu", |m, x| silu(m, x), -80.0, 80.0, |x| x / (1.0 + (-x).exp())),
        (
            "gelu_tanh",
            |m, x| gelu_tanh(m, x),
            -5.0,
            10.0,
            |x| {
                // 0.5 x (1 + tanh u) without f64's own cancellation for x < 0.
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                x / (1.0 + (-2.0 * u).exp())
            },
        ),
        (
            "gelu_erf",
            |m, x| gelu_erf(m, x),
            -5.0,
            10.0,
            |x| 0.5 * x * erfc64(-x / std::f64::consts::SQRT_2),
        ),
    ]
}

/// Samples: a dense linear sweep, a logarithmic sweep for wide ranges, and the edges.
pub(crate) fn samples(lo: f32, hi: f32) -> Vec<f32> {
    let n = 40_000;
    let mut xs: Vec<f32> = (0..=n).map(|i| lo + (hi - lo) * (i as f32 / n as f32)).collect();
    if lo > 0.0 {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        xs.extend((0..=n).map(|i| (a + (b - a) * i as f64 / n as f64).exp() as f32));
    } else {
        xs.extend((0..=n).map(|i| (1e-6f64 * (hi as f64 / 1e-6).powf(i as f64 / n as f64)) as f32));
        xs.extend((0..=n).map(|i| -(1e-6f64 * (-lo as f64 / 1e-6).powf(i as f64 / n as f64)) as f32));
    }
    xs.retain(|x| *x >= lo && *x <= hi);
    xs
}

/// The exact hardware approximations and every combination of their extremes.
pub(crate) fn models() -> Vec<Cpu> {
    let dirs = [-1, 0, 1];
    dirs.iter()
        .flat_map(|&ex2_dir| dirs.iter().map(move |&rcp_dir| Cpu { ex2_dir, rcp_dir, tanh_dir: 0 }))
        .collect()
}

/// The worst error of each function in ulps, with the argument where it occurs.
fn worst() -> Vec<(&'static str, f64, f32)> {
    cases()
        .into_iter()
        .map(|(name, f, lo, hi, reference)| {
            let mut worst = (0.0f64, 0.0f32);
            let xs = samples(lo, hi);
            for mut m in models() {
                for &x in &xs {
                    let e = ulps(f(&mut m, &x), reference(x as f64));
                    if e > worst.0 {
                        worst = (e, x);
                    }
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
        ("exp", 3.0),
        ("exp2", 2.0),
        ("log", 2.0),
        ("log2", 2.0),
        ("sin", 2.0),
        ("cos", 2.0),
        ("tanh", 2.0),
        ("sigmoid", 5.0),
        ("silu", 6.0),
        ("gelu_tanh", 40.0),
        ("gelu_erf", 32.0),
    ];
    check_bounds(worst(), &bounds);
}

/// Prints each function's measured worst error and fails where one
/// exceeds its bound (`measured` and `bounds` name the functions in the
/// same order).
pub(crate) fn check_bounds<X: std::fmt::LowerExp>(measured: Vec<(&str, f64, X)>, bounds: &[(&str, f64)]) {
    assert_eq!(measured.len(), bounds.len(), "a bound for every function");
    for (name, err, at) in &measured {
        println!("{name}: worst {err:.2} ulp at x = {at:e}");
    }
    for ((name, err, at), (bname, bound)) in measured.iter().zip(bounds) {
        assert_eq!(name, bname);
        assert!(err <= bound, "{name}: {err} ulp at {at:e} exceeds {bound}");
    }
}

#[test]
fn special_values() {
    let m = &mut Cpu::default();
    assert_eq!(exp(m, &f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(m, &f32::NEG_INFINITY), 0.0);
    assert!(exp(m, &f32::NAN).is_nan());
    assert_eq!(log(m, &0.0), f32::NEG_INFINITY);
    assert!(log(m, &-1.0).is_nan());
    assert_eq!(log(m, &f32::INFINITY), f32::INFINITY);
    assert_eq!(tanh(m, &f32::INFINITY), 1.0);
    assert_eq!(tanh(m, &f32::NEG_INFINITY), -1.0);
    assert_eq!(sigmoid(m, &f32::NEG_INFINITY), 0.0);
    assert_eq!(pow(m, &-2.0, &3.0), -8.0);
    assert_eq!(pow(m, &2.0, &10.0), 1024.0);
    assert!(pow(m, &-2.0, &0.5).is_nan());
    assert_eq!(pow(m, &f32::NAN, &0.0), 1.0);
    assert_eq!(pow(m, &0.0, &-1.0), f32::INFINITY);
}

/// NaN in gives NaN out, and infinities give IEEE's limits, for every
/// function; `pow` follows IEEE `pow` (as Rust's `powf` does) on NaN,
/// infinite and zero operands.
#[test]
fn nan_and_infinite_arguments() {
    let m = &mut Cpu::default();
    let nan = f32::NAN;
    let unary: [(&str, Unary); 10] = [
        ("exp", exp),
        ("exp2", exp2),
        ("log", log),
        ("log2", log2),
        ("tanh", tanh),
        ("sigmoid", sigmoid),
        ("silu", silu),
        ("gelu_tanh", gelu_tanh),
        ("gelu_erf", gelu_erf),
        ("sin", |m, x| sin_cos(m, x, 0.0)),
    ];
    for (name, f) in unary {
        assert!(f(m, &nan).is_nan(), "{name}(NaN) = {}", f(m, &nan));
    }
    for (name, f) in [
        ("silu", silu as fn(&mut Cpu, &f32) -> f32),
        ("gelu_tanh", gelu_tanh),
        ("gelu_erf", gelu_erf),
    ] {
        assert_eq!(f(m, &f32::INFINITY), f32::INFINITY, "{name}(inf)");
    }
    let (inf, ninf) = (f32::INFINITY, f32::NEG_INFINITY);
    for (a, b) in [
        (nan, 1.0),
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
        (-0.0, 0.0),
        (0.0, -0.0),
        (0.0, 3.0),
        (-0.0, 3.0),
        (-0.0, -3.0),
        (0.5, inf),
        (0.5, ninf),
        (-1.0, inf),
        (ninf, 0.5),
        (ninf, -0.5),
        (-0.0, 0.5),
        (-0.0, -0.5),
    ] {
        let (got, want) = (pow(m, &a, &b), a.powf(b));
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "pow({a}, {b}) = {got}, want {want}"
        );
    }
}

#[test]
fn pow_error_on_moderate_results() {
    let mut worst = 0.0f64;
    for mut m in models() {
        for i in 0..200 {
            for j in 0..200 {
                let a = 0.01 + i as f32 * 0.05;
                let b = -8.0 + j as f32 * 0.08;
                worst = worst.max(ulps(pow(&mut m, &a, &b), (a as f64).powf(b as f64)));
            }
        }
    }
    println!("pow: worst {worst:.2} ulp for a in [0.01, 10], b in [-8, 8]");
    assert!(worst <= 64.0, "pow: {worst} ulp");
}

/// The distance in representable values between the GPU's f32 sequences
/// (on every model of the hardware approximations) and the CPU executor's
/// forms of the same functions, over the ranges `tests/gpu_kernels.rs`
/// samples: what that comparison's tolerances must hold (they are the
/// tolerances of its `UNARY` table; measured worst: exp 3, tanh 2,
/// sigmoid 5, silu 5, gelu_tanh 2).
#[test]
fn gpu_sequences_stay_within_the_gpu_tests_tolerances_of_the_cpu_executor() {
    use crate::kernels::cpu::vmath;
    let ordered = |x: f32| {
        let b = x.to_bits() as i32;
        if b < 0 {
            i64::from(i32::MIN) - i64::from(b)
        } else {
            i64::from(b)
        }
    };
    let gelu_cpu = |x: f32| {
        let (k0, k1) = ((2.0 / std::f64::consts::PI).sqrt() as f32, 0.044715f32);
        0.5 * x * (1.0 + vmath::tanh(k0 * (x + k1 * x * x * x)))
    };
    #[allow(clippy::type_complexity)]
    let cases: [(&str, Unary, fn(f32) -> f32, f32, f32, i64, f32); 5] = [
        ("exp", |m, x| exp(m, x), vmath::exp, -103.0, 88.7, 3, 0.0),
        ("tanh", |m, x| tanh(m, x), vmath::tanh, -10.0, 10.0, 3, 0.0),
        ("sigmoid", |m, x| sigmoid(m, x), vmath::sigmoid, -80.0, 80.0, 6, 0.0),
        ("silu", |m, x| silu(m, x), |x| x * vmath::sigmoid(x), -80.0, 80.0, 7, 0.0),
        ("gelu_tanh", |m, x| gelu_tanh(m, x), gelu_cpu, -5.0, 10.0, 41, 4e-7),
    ];
    for (name, gpu, cpu, lo, hi, tol, abs) in cases {
        let mut worst = (0i64, 0.0f32);
        for mut m in models() {
            for x in samples(lo, hi) {
                let (g, c) = (gpu(&mut m, &x), cpu(x));
                let d = (ordered(g) - ordered(c)).abs();
                if d > worst.0 && (g - c).abs() > abs {
                    worst = (d, x);
                }
            }
        }
        println!("{name}: GPU and CPU {} apart at worst, at x = {:e}", worst.0, worst.1);
        assert!(worst.0 <= tol, "{name}: {} apart at {:e}, the GPU tests allow {tol}", worst.0, worst.1);
    }
}
