//! f32 transcendentals for programs whose results are f16 or bf16
//! ([`Accuracy::F16`](crate::kernels::ir::Accuracy::F16) and
//! [`Accuracy::Bf16`](crate::kernels::ir::Accuracy::Bf16)), written over
//! [`MathOps`] like the precise ones of `math`.
//!
//! The precise sequences spend instructions on the last few f32 ulps: the
//! argument correction of `exp`, Newton-refined reciprocals, the division of
//! `log`. A result rounded to f16 (unit roundoff 2^-11) or bf16 (2^-8)
//! cannot show those ulps, so these sequences aim at a relative error below
//! 2^-16 before rounding (bf16's `tanh`: below 2^-10.9, the hardware
//! approximation) and take about half the instructions:
//!
//! - `exp(x)` is the hardware `ex2` of the rounded `x · log2 e`: 2 ulp plus
//!   the rounding of the product, at most `|x log2 e| · 2^-24`, which is
//!   below 2^-16.7 wherever the result is a nonzero finite f32.
//! - `log(x)`: the exponent split exactly as in `math`, then `log(1 + f) =
//!   2s (1 + s²/3 + s⁴/5 + s⁶/7)` with `s = f / (2 + f)` from the hardware
//!   reciprocal (`|s| ≤ 0.172`, the first omitted term is below 2^-23.5).
//!   `log2` scales it by `log2 e`; `pow(a, b)` is `ex2(b · log2 |a|)` with
//!   IEEE `pow`'s special cases.
//! - `tanh(x)`: `x (1 − x²/3 + 2x⁴/15 − 17x⁶/315)` below `|x| = 1/4`, above
//!   it `1 − 2e/(1 + e)` with `e = e^{−2|x|}` and one hardware reciprocal;
//!   bf16 results take `tanh.approx.f32` itself.
//! - `sigmoid(z)` and `silu(z) = z σ(z)`: `n / (1 + e)` with `e = e^{−|z|}`
//!   and `n = num` or `num · e` by the sign of `z`, one hardware reciprocal.
//!
//! `sin`, `cos`, `gelu_erf` and `gelu_tanh` keep the `math` sequences at
//! every accuracy. Measured errors: the table in the parent module.

use super::math::{horner, log2_of_parts, log_of_parts, pow_specials, split_mantissa, MathOps, LOG2E_HI};

/// `e^x` as the hardware `2^(x log2 e)` (subnormal results kept).
pub(crate) fn exp<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let k = m.c(LOG2E_HI);
    let t = m.mul(x, &k);
    m.ex2(&t)
}

/// `(e, log(1 + f))` of `x = (1 + f) · 2^e`, `1 + f` in `[√½, √2)`.
fn log_parts<M: MathOps>(m: &mut M, x: &M::V) -> (M::V, M::V) {
    let (e, f) = split_mantissa(
        m,
        x,
        f64::from(f32::MIN_POSITIVE),
        23,
        f64::from(std::f32::consts::SQRT_2),
    );
    let two = m.c(2.0);
    let d = m.add(&two, &f);
    // `d` is in [1.7, 2.5]: the flushing reciprocal is exact enough there.
    let r = m.rcp_ftz(&d);
    let s = m.mul(&f, &r);
    let z = m.mul(&s, &s);
    let p = horner(m, &z, &[1.0f32 / 3.0, 1.0 / 5.0, 1.0 / 7.0]);
    let s2 = m.add(&s, &s);
    let s2z = m.mul(&s2, &z);
    (e, m.fma(&s2z, &p, &s2))
}

/// Natural logarithm.
pub(crate) fn log<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let parts = log_parts(m, x);
    log_of_parts(m, x, parts)
}

/// Base-2 logarithm.
pub(crate) fn log2<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let parts = log_parts(m, x);
    log2_of_parts(m, x, parts)
}

/// `a^b` as `2^(b log2 |a|)` with IEEE `pow`'s special cases.
pub(crate) fn pow<M: MathOps>(m: &mut M, a: &M::V, b: &M::V) -> M::V {
    let abs_a = m.abs(a);
    let l = log2(m, &abs_a);
    let t = m.mul(b, &l);
    let r = m.ex2(&t);
    pow_specials(m, a, b, r)
}

/// `tanh(x)/x - 1` over `x²` below `|x| = 1/4`: the Taylor terms to `x⁶`.
const TANH_TAYLOR: [f32; 3] = [-1.0 / 3.0, 2.0 / 15.0, -17.0 / 315.0];

/// Hyperbolic tangent to a relative error below 2^-16 (f16 results).
pub(crate) fn tanh<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let a = m.abs(x);
    let x2 = m.mul(x, x);
    let p = horner(m, &x2, &TANH_TAYLOR);
    let px = m.mul(&p, x);
    let px2 = m.mul(&px, &x2);
    let small = m.add(&px2, x);
    let k = m.c(-2.0 * LOG2E_HI);
    let t = m.mul(&a, &k);
    // `e` is in [0, 0.61]: flushing its subnormals changes nothing visible.
    let e = m.ex2_ftz(&t);
    let one = m.c(1.0);
    let d = m.add(&one, &e);
    let r = m.rcp_ftz(&d);
    let minus_two = m.c(-2.0);
    let ne = m.mul(&e, &minus_two);
    let big = m.fma(&ne, &r, &one);
    let big = m.copysign(&big, x);
    let quarter = m.c(0.25);
    let is_small = m.lt(&a, &quarter);
    m.select(&is_small, &small, &big)
}

/// Hyperbolic tangent for bf16 results: the hardware approximation.
pub(crate) fn tanh_bf16<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    m.tanh_approx(x)
}

/// `num · σ(z)` through `e = e^{−|z|}` (in `[0, 1]`): `num r` or `num e r`
/// by the sign of `z`, `r` the hardware reciprocal of `1 + e`.
fn times_logistic<M: MathOps>(m: &mut M, num: &M::V, z: &M::V) -> M::V {
    let a = m.abs(z);
    let k = m.c(-LOG2E_HI);
    let t = m.mul(&a, &k);
    let e = m.ex2(&t);
    let one = m.c(1.0);
    let d = m.add(&one, &e);
    let r = m.rcp_ftz(&d);
    let zero = m.c(0.0);
    let is_neg = m.lt(z, &zero);
    let ne = m.mul(num, &e);
    let n = m.select(&is_neg, &ne, num);
    m.mul(&n, &r)
}

/// `1 / (1 + e^-x)`.
pub(crate) fn sigmoid<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let one = m.c(1.0);
    times_logistic(m, &one, x)
}

/// `x / (1 + e^-x)`.
pub(crate) fn silu<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    times_logistic(m, x, x)
}

#[cfg(test)]
mod tests;
