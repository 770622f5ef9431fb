//! Runs the f16/bf16-accuracy sequences on the CPU model of `math::tests`
//! (IEEE operations exactly, the hardware approximations at their exact
//! values and at the extremes of their documented bounds) and measures
//! their results, rounded to the output dtype, against f64.

use super::*;
use crate::kernels::ptx_gen::math::tests::{models, samples, Cpu};
use half::{bf16, f16};

type Unary = fn(&mut Cpu, &f32) -> f32;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Out {
    F16,
    Bf16,
}

impl Out {
    /// `x` rounded to the dtype, as f64.
    fn round(self, x: f64) -> f64 {
        match self {
            Out::F16 => f16::from_f64(x).to_f64(),
            Out::Bf16 => bf16::from_f64(x).to_f64(),
        }
    }
    /// The dtype's ulp at the (rounded) magnitude `w`.
    fn ulp(self, w: f64) -> f64 {
        match self {
            Out::F16 => {
                let h = f16::from_f64(w.abs());
                (f16::from_bits(h.to_bits() + 1).to_f64() - h.to_f64()).max(2f64.powi(-24))
            }
            Out::Bf16 => {
                let h = bf16::from_f64(w.abs());
                (bf16::from_bits(h.to_bits() + 1).to_f64() - h.to_f64()).max(2f64.powi(-133))
            }
        }
    }
    /// The smallest normal magnitude of the dtype.
    fn min_normal(self) -> f64 {
        match self {
            Out::F16 => 2f64.powi(-14),
            Out::Bf16 => f64::from(f32::MIN_POSITIVE),
        }
    }
}

/// The distance of `got` rounded to `out` from the exact `want`, in ulps of
/// `out` at `want` (a correctly rounded result is within 0.5).
fn out_ulps(out: Out, got: f32, want: f64) -> f64 {
    let r = out.round(f64::from(got));
    let w = out.round(want);
    if want.is_nan() || w.is_nan() {
        return if r.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if w.is_infinite() || r.is_infinite() {
        return if r == w { 0.0 } else { f64::INFINITY };
    }
    (r - want).abs() / out.ulp(w)
}

/// Each function with its output dtype, the range it is measured on, and
/// its f64 reference.
#[allow(clippy::type_complexity)]
fn cases() -> Vec<(&'static str, Out, Unary, f32, f32, fn(f64) -> f64)> {
    let sig: fn(f64) -> f64 = |x| 1.0 / (1.0 + (-x).exp());
    let silu_ref: fn(f64) -> f64 = |x| x / (1.0 + (-x).exp());
    let mut v: Vec<(&'static str, Out, Unary, f32, f32, fn(f64) -> f64)> = vec![];
    for out in [Out::F16, Out::Bf16] {
        let (elo, ehi, slo, shi) = match out {
            // Down to below the smallest subnormal result, up to overflow.
            Out::F16 => (-17.5, 11.08, -20.0, 20.0),
            Out::Bf16 => (-92.0, 88.7, -92.0, 88.0),
        };
        v.push(("exp", out, |m, x| exp(m, x), elo, ehi, f64::exp));
        v.push(("log", out, |m, x| log(m, x), 1e-38, 3e38, f64::ln));
        v.push(("log2", out, |m, x| log2(m, x), 1e-38, 3e38, f64::log2));
        v.push(("sigmoid", out, |m, x| sigmoid(m, x), slo, shi, sig));
        v.push(("silu", out, |m, x| silu(m, x), slo, shi, silu_ref));
    }
    v.push(("tanh", Out::F16, |m, x| tanh(m, x), -10.0, 10.0, f64::tanh));
    v.push(("tanh", Out::Bf16, |m, x| tanh_bf16(m, x), -10.0, 10.0, f64::tanh));
    v
}

/// The CPU models: every extreme of `ex2` and `rcp`, and of `tanh.approx`.
fn all_models() -> Vec<Cpu> {
    let mut v = models();
    v.extend([-1, 1].map(|tanh_dir| Cpu { tanh_dir, ..Cpu::default() }));
    v
}

/// `(worst error in output ulps, at x, worst relative error before rounding
/// where the exact result is a normal number of the dtype)`.
fn measure(out: Out, f: Unary, xs: &[f32], reference: fn(f64) -> f64) -> (f64, f32, f64) {
    let mut worst = (0.0f64, 0.0f32, 0.0f64);
    for mut m in all_models() {
        for &x in xs {
            let got = f(&mut m, &x);
            let want = reference(f64::from(x));
            let e = out_ulps(out, got, want);
            if e > worst.0 {
                worst.0 = e;
                worst.1 = x;
            }
            if want.abs() >= out.min_normal() && want.is_finite() {
                worst.2 = worst.2.max(((f64::from(got) - want) / want).abs());
            }
        }
    }
    worst
}

#[test]
fn worst_errors_of_rounded_results() {
    // (function, dtype, bound in output ulps, bound on the relative error).
    let bounds = [
        ("exp", Out::F16, 0.51, 2f64.powi(-16)),
        ("log", Out::F16, 0.51, 2f64.powi(-20)),
        ("log2", Out::F16, 0.51, 2f64.powi(-20)),
        ("sigmoid", Out::F16, 0.51, 2f64.powi(-17)),
        ("silu", Out::F16, 0.51, 2f64.powi(-17)),
        ("exp", Out::Bf16, 0.51, 2f64.powi(-16)),
        ("log", Out::Bf16, 0.51, 2f64.powi(-20)),
        ("log2", Out::Bf16, 0.51, 2f64.powi(-20)),
        ("sigmoid", Out::Bf16, 0.51, 2f64.powi(-16)),
        // Results near the bottom of the normal range take `x · e` with a
        // subnormal `e`, whose own precision is lower.
        ("silu", Out::Bf16, 0.51, 2f64.powi(-15)),
        ("tanh", Out::F16, 0.51, 2f64.powi(-19)),
        ("tanh", Out::Bf16, 0.64, 2f64.powi(-10)),
    ];
    let cases = cases();
    assert_eq!(cases.len(), bounds.len());
    let mut failures = vec![];
    for ((name, out, f, lo, hi, reference), (bname, bout, ulp_bound, rel_bound)) in cases.into_iter().zip(bounds) {
        assert_eq!((name, out), (bname, bout));
        let (ulps, at, rel) = measure(out, f, &samples(lo, hi), reference);
        println!(
            "{name} ({out:?} results) on [{lo:e}, {hi:e}]: worst {ulps:.3} ulp at x = {at:e}; relative error before rounding 2^{:.1}",
            rel.log2()
        );
        if ulps > ulp_bound || rel > rel_bound {
            failures.push(format!("{name} {out:?}: {ulps} ulp at {at:e}, relative {rel:e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

#[test]
fn pow_of_rounded_results() {
    let mut worst = (0.0f64, 0.0f32, 0.0f32);
    for out in [Out::F16, Out::Bf16] {
        for mut m in models() {
            for i in 0..=400 {
                let a = 0.05 + 9.95 * (i as f32 / 400.0);
                for j in 0..=120 {
                    let b = -3.0 + 6.0 * (j as f32 / 120.0);
                    let e = out_ulps(out, pow(&mut m, &a, &b), f64::from(a).powf(f64::from(b)));
                    if e > worst.0 {
                        worst = (e, a, b);
                    }
                }
            }
        }
    }
    println!("pow: worst {:.3} ulp at a = {}, b = {}", worst.0, worst.1, worst.2);
    assert!(worst.0 <= 0.51, "pow: {worst:?}");
}

#[test]
fn special_values() {
    let m = &mut Cpu::default();
    assert_eq!(exp(m, &f32::NEG_INFINITY), 0.0);
    assert_eq!(exp(m, &f32::INFINITY), f32::INFINITY);
    assert!(exp(m, &f32::NAN).is_nan());
    assert_eq!(log(m, &0.0), f32::NEG_INFINITY);
    assert!(log(m, &-1.0).is_nan());
    assert_eq!(log(m, &f32::INFINITY), f32::INFINITY);
    assert!(log(m, &f32::NAN).is_nan());
    assert_eq!(log(m, &1.0), 0.0);
    assert_eq!(log2(m, &8.0), 3.0);
    for t in [tanh::<Cpu>, tanh_bf16::<Cpu>] {
        assert_eq!(t(m, &f32::INFINITY), 1.0);
        assert_eq!(t(m, &f32::NEG_INFINITY), -1.0);
        assert!(t(m, &f32::NAN).is_nan());
        assert_eq!(t(m, &0.0), 0.0);
    }
    assert_eq!(sigmoid(m, &f32::INFINITY), 1.0);
    assert_eq!(sigmoid(m, &f32::NEG_INFINITY), 0.0);
    assert!(sigmoid(m, &f32::NAN).is_nan());
    assert_eq!(silu(m, &f32::INFINITY), f32::INFINITY);
    assert!(silu(m, &f32::NAN).is_nan());
    assert_eq!(pow(m, &2.0, &0.0), 1.0);
    assert_eq!(pow(m, &-2.0, &3.0), -8.0);
    assert!(pow(m, &-2.0, &0.5).is_nan());
}
