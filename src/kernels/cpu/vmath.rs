//! f32 `exp`, `tanh` and the logistic function for the CPU executor, free of
//! branches and calls so that the compiler vectorises the loops that apply
//! them to whole tiles (the standard library's `expf`/`tanhf` are calls,
//! one element at a time).
//!
//! - `exp(x)`: `x` clamped to `[−104, 88.73]` (beyond, the result is 0 or
//!   infinite either way), `n = rint(x log2 e)` by the `1.5 · 2^23` rounding
//!   trick, `r = x − n ln 2` with a two-part `ln 2` (the first part's product
//!   is exact), `e^r` by its Taylor polynomial of degree 7 on `|r| ≤ 0.35`,
//!   then scaled by `2^⌊n/2⌋ · 2^(n − ⌊n/2⌋)` so that subnormal results are
//!   rounded once and `n = 128` overflows to infinity.
//! - `tanh(x)`: `x P(x²)` below `|x| = 1` (the fit the GPU uses, relative
//!   error below 2^-26), above it `1 − 2/(1 + e^{2|x|})` with the sign of `x`.
//! - `sigmoid(x)`: `1/(1 + e)` or `e/(1 + e)` with `e = e^{−|x|}` by the sign
//!   of `x`, so tiny results keep their precision.
//!
//! NaN gives NaN. Worst errors against f64, measured by the tests: `exp`
//! 1.17 ulp, `tanh` 1.19 ulp, `sigmoid` 2.21 ulp (the standard library's
//! `expf` and `tanhf` are within 1 ulp).

/// `log2 e`.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` in two parts: the first has 16 significant bits, so its products
/// with `|n| ≤ 256` are exact.
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// `1.5 · 2^23`: adding it rounds an `|y| < 2^22` to an integer, held in the
/// low bits of the sum.
const ROUNDER: f32 = 12_582_912.0;

/// `2^k` for an integer `k` in `[−126, 127]`.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `e^x`.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let c = x.clamp(-104.0, 88.73);
    let t = c * LOG2E + ROUNDER;
    let n = t.to_bits() as i32 - ROUNDER.to_bits() as i32;
    let nf = t - ROUNDER;
    let r = (c - nf * LN2_HI) - nf * LN2_LO;
    let mut p = 1.0 / 5040.0;
    for k in [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = p * r + k;
    }
    let n1 = n >> 1;
    let y = p * pow2(n1) * pow2(n - n1);
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// `tanh(x)/x` as a polynomial in `x²` on `|x| ≤ 1`.
const TANH_SMALL: [f32; 8] = [
    1.0,
    -0.333_332_78,
    0.133_321_39,
    -0.053_869_706,
    0.021_461_41,
    -0.007_912_485,
    0.002_278_647_6,
    -0.000_352_328_1,
];

/// Hyperbolic tangent.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let x2 = x * x;
    let mut p = TANH_SMALL[7];
    for &k in TANH_SMALL[..7].iter().rev() {
        p = p * x2 + k;
    }
    let small = p * x;
    let e = exp(2.0 * a);
    let big = (1.0 - 2.0 / (1.0 + e)).copysign(x);
    if a < 1.0 {
        small
    } else {
        big
    }
}

/// `1 / (1 + e^−x)`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let n = if x >= 0.0 { 1.0 } else { e };
    let s = n / (1.0 + e);
    if x.is_nan() {
        x
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance from `got` to `want` in ulps of f32 at `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        if want.is_nan() {
            return if got.is_nan() { 0.0 } else { f64::INFINITY };
        }
        let w = want as f32;
        if w.is_infinite() || got.is_infinite() {
            return if got == w { 0.0 } else { f64::INFINITY };
        }
        let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::from_bits(1)) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// A dense sweep of `[lo, hi]` and a logarithmic one of each sign.
    fn samples(lo: f32, hi: f32) -> Vec<f32> {
        let n = 200_000;
        let mut xs: Vec<f32> = (0..=n).map(|i| lo + (hi - lo) * (i as f32 / n as f32)).collect();
        for i in 0..=n {
            let m = 1e-7f64 * (1e9f64).powf(i as f64 / n as f64);
            xs.extend([m as f32, -m as f32]);
        }
        xs.retain(|x| *x >= lo && *x <= hi);
        xs
    }

    fn worst(f: fn(f32) -> f32, reference: fn(f64) -> f64, lo: f32, hi: f32) -> (f64, f32) {
        let mut w = (0.0, 0.0);
        for x in samples(lo, hi) {
            let e = ulps(f(x), reference(f64::from(x)));
            if e > w.0 {
                w = (e, x);
            }
        }
        w
    }

    #[test]
    fn worst_errors_against_f64() {
        let sigmoid64: fn(f64) -> f64 = |x| {
            let e = (-x.abs()).exp();
            if x >= 0.0 {
                1.0 / (1.0 + e)
            } else {
                e / (1.0 + e)
            }
        };
        for (name, f, reference, lo, hi, bound) in [
            (
                "exp",
                exp as fn(f32) -> f32,
                f64::exp as fn(f64) -> f64,
                -110.0,
                89.0,
                1.5,
            ),
            ("tanh", tanh, f64::tanh, -20.0, 20.0, 1.5),
            ("sigmoid", sigmoid, sigmoid64, -110.0, 110.0, 2.5),
        ] {
            let (e, at) = worst(f, reference, lo, hi);
            println!("{name}: worst {e:.2} ulp at {at:e}");
            assert!(e <= bound, "{name}: {e} ulp at {at:e}");
        }
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-100.0) > 0.0 && exp(-100.0).is_subnormal());
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(0.0), 0.0);
        assert!(tanh(-0.0).is_sign_negative());
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid(0.0), 0.5);
        assert!(sigmoid(-100.0) > 0.0);
        assert!(sigmoid(f32::NAN).is_nan());
    }
}
