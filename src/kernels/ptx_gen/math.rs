//! Precise f32 transcendental functions, written once over [`MathOps`].
//!
//! The same code emits PTX (the generator's implementation of `MathOps`
//! appends one instruction per call) and runs on the CPU with `f32`
//! arithmetic (the tests' implementation). Every operation but two is IEEE
//! round-to-nearest (`add.rn`, `mul.rn`, `fma.rn`, `div.rn`), so the CPU
//! reproduces the generated sequences bit for bit; the two hardware
//! approximations, `ex2.approx.f32` (within 2 ulp; its `.ftz` form also
//! flushes subnormal results) and `rcp.approx.ftz.f32` (within 1 ulp, used
//! only where nothing is subnormal), are modelled in the tests by the exact value and by the
//! farthest values their documented bounds allow on either side, and the
//! measured errors are the worst over those models.
//!
//! Methods: `exp(x)` is `ex2(t)·(1 + τ ln 2)` for `t = x·log2 e` rounded and
//! its rest `τ` (from an fma and a two-part `log2 e`); `exp2` is `ex2`;
//! `tanh` is `x P(x²)` below `|x| = 1` and `1 − 2e/(1 + e)`, `e = e^{−2|x|}`
//! through the corrected `ex2`, above; `sigmoid` and `silu` are
//! `n / (1 + e)` with `e = e^{−|z|}` and `n = num` or `num · e` by the sign
//! of `z`; their `e` is `exp`'s corrected `ex2` (about 9 instructions),
//! whose relative error, 2 ulp at the bottom of a binade, reaches about
//! 4 ulp of a result at the top of the next one, so they are within 5 and
//! 6 ulp (the IEEE-only `exp_ieee`, a reduction by `k = rint(x·log2 e)`, a
//! degree-7 polynomial and a two-step `ldexp`, still used by `gelu_erf`,
//! would keep them near 2 ulp at about three times the instructions); the
//! quotient is `rcp.approx`, one Newton step and one residual correction.
//! `gelu_tanh(x) = x σ(2u)` (which avoids the cancellation of `1 + tanh u`)
//! is `x · rcp(1 + 2^{−t})` without the corrections, which its own
//! argument rounding would hide. `log` splits off the exponent,
//! keeps the mantissa in `[√½, √2)` and uses the fdlibm form
//! `f − f²/2 + s(f²/2 + R(s²))`; `sin`/`cos` reduce by π/2 with a
//! three-part constant (accurate for `|x| ≤ 10⁴`; larger arguments lose
//! accuracy) and evaluate Taylor polynomials on `[−π/4, π/4]`; `gelu_erf`
//! uses `erfc` from Numerical Recipes' Chebyshev fit (relative error below
//! 1.2e-7) with an exactly split `z²`; `pow` is `2^(b · log2 |a|)` through
//! the corrected `ex2` (so the product is not rounded) with the sign and
//! special cases of IEEE `pow`, and its error grows with `|b · log2 a|`.
//!
//! Measured worst errors against f64 (`tests::worst_errors` prints them):
//! see the table in the parent module's documentation.

/// The IEEE operations of one float width, rounded to nearest where they
/// round: what the f32 functions below ([`MathOps`]) and the f64 ones
/// (`math64::MathOps64`) are written in. The generator implements them as
/// PTX instructions, the tests as the same operations on the CPU
/// ([`ieee_ops_on_the_cpu`]).
pub(crate) trait IeeeOps {
    /// A value.
    type V: Clone;
    /// A predicate.
    type P: Clone;
    /// `a + b`, rounded to nearest.
    fn add(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// `a - b`, rounded to nearest.
    fn sub(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// `a * b`, rounded to nearest.
    fn mul(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// `a * b + c`, rounded once.
    fn fma(&mut self, a: &Self::V, b: &Self::V, c: &Self::V) -> Self::V;
    /// `a / b`, rounded to nearest.
    fn div(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// `|a|`.
    fn abs(&mut self, a: &Self::V) -> Self::V;
    /// `-a`, exactly.
    fn neg(&mut self, a: &Self::V) -> Self::V;
    /// Round to nearest integer, ties to even.
    fn rint(&mut self, a: &Self::V) -> Self::V;
    /// Round toward negative infinity.
    fn floor(&mut self, a: &Self::V) -> Self::V;
    /// `a < b` (false for NaN).
    fn lt(&mut self, a: &Self::V, b: &Self::V) -> Self::P;
    /// `a == b` (false for NaN).
    fn eq(&mut self, a: &Self::V, b: &Self::V) -> Self::P;
    /// `p ? a : b`.
    fn select(&mut self, p: &Self::P, a: &Self::V, b: &Self::V) -> Self::V;
    /// The magnitude of `a` with the sign of `b`.
    fn copysign(&mut self, a: &Self::V, b: &Self::V) -> Self::V;
    /// The constant `x` (which the width represents exactly).
    fn constant(&mut self, x: f64) -> Self::V;
    /// `2^n` for an integral `n` in the width's normal exponent range
    /// (`[-126, 127]`, `[-1022, 1023]`).
    fn pow2i(&mut self, n: &Self::V) -> Self::V;
    /// The unbiased exponent field of a positive normal `a`, as a float.
    fn exponent(&mut self, a: &Self::V) -> Self::V;
    /// `a` with its exponent field set to that of 1 (a value in `[1, 2)`).
    fn mantissa(&mut self, a: &Self::V) -> Self::V;
}

/// `(e, f)` for a positive `x = (1 + f) · 2^e` with `1 + f` in `[√½, √2)`
/// (`sqrt2`, the width's `√2`); a subnormal `x` (below `min_normal`) is
/// scaled by `2^scale_bits` into the normal range first.
pub(super) fn split_mantissa<M: IeeeOps>(
    m: &mut M,
    x: &M::V,
    min_normal: f64,
    scale_bits: i32,
    sqrt2: f64,
) -> (M::V, M::V) {
    let tiny = m.constant(min_normal);
    let is_tiny = m.lt(x, &tiny);
    let scale = m.constant(2f64.powi(scale_bits));
    let scaled = m.mul(x, &scale);
    let xs = m.select(&is_tiny, &scaled, x);
    let e0 = m.exponent(&xs);
    let adj = m.constant(-f64::from(scale_bits));
    let zero = m.constant(0.0);
    let adj = m.select(&is_tiny, &adj, &zero);
    let e0 = m.add(&e0, &adj);
    let mant = m.mantissa(&xs);
    let sqrt2 = m.constant(sqrt2);
    let big = m.lt(&sqrt2, &mant);
    let half = m.constant(0.5);
    let halved = m.mul(&mant, &half);
    let mant = m.select(&big, &halved, &mant);
    let one = m.constant(1.0);
    let e1 = m.add(&e0, &one);
    let e = m.select(&big, &e1, &e0);
    let f = m.sub(&mant, &one);
    (e, f)
}

/// `coeffs[0] + x (coeffs[1] + x (...))` by Horner's rule with fma.
pub(super) fn horner<M: IeeeOps, T: Copy + Into<f64>>(m: &mut M, x: &M::V, coeffs: &[T]) -> M::V {
    let (last, rest) = coeffs.split_last().expect("a polynomial has coefficients");
    let mut acc = m.constant((*last).into());
    for &k in rest.iter().rev() {
        let k = m.constant(k.into());
        acc = m.fma(&acc, x, &k);
    }
    acc
}

/// `p · 2^k` for an integral `k` within twice the width's exponent range,
/// in two steps so neither factor leaves the normal range and a subnormal
/// result rounds once.
pub(super) fn ldexp<M: IeeeOps>(m: &mut M, p: &M::V, k: &M::V) -> M::V {
    let scale = ldexp_factors(m, k);
    scaled(m, p, &scale)
}

/// The two factors `2^⌊k/2⌋` and `2^(k − ⌊k/2⌋)` of [`ldexp`], for scaling
/// several values by the same `2^k` ([`scaled`]).
pub(super) fn ldexp_factors<M: IeeeOps>(m: &mut M, k: &M::V) -> (M::V, M::V) {
    let half = m.constant(0.5);
    let hk = m.mul(k, &half);
    let n1 = m.floor(&hk);
    let n2 = m.sub(k, &n1);
    (m.pow2i(&n1), m.pow2i(&n2))
}

/// `p` times the factors of [`ldexp_factors`], one after the other.
pub(super) fn scaled<M: IeeeOps>(m: &mut M, p: &M::V, (s1, s2): &(M::V, M::V)) -> M::V {
    let t = m.mul(p, s1);
    m.mul(&t, s2)
}

/// Replaces `r` by `value` where `x < bound` (`below`) or `x > bound`.
pub(super) fn clamp_to<M: IeeeOps>(m: &mut M, x: &M::V, r: M::V, bound: f64, below: bool, value: f64) -> M::V {
    let b = m.constant(bound);
    let p = if below { m.lt(x, &b) } else { m.lt(&b, x) };
    let v = m.constant(value);
    m.select(&p, &v, &r)
}

/// `log`'s special cases applied to `r`: `log(0) = −∞`, `log(x < 0) = NaN`,
/// `log(∞) = ∞`, `log(NaN) = NaN` (the bit manipulations of a logarithm's
/// mantissa split would read a NaN as a number).
pub(super) fn log_specials<M: IeeeOps>(m: &mut M, x: &M::V, r: M::V) -> M::V {
    let is_number = m.eq(x, x);
    let r = m.select(&is_number, &r, x);
    let zero = m.constant(0.0);
    let is_zero = m.eq(x, &zero);
    let ninf = m.constant(f64::NEG_INFINITY);
    let r = m.select(&is_zero, &ninf, &r);
    let neg = m.lt(x, &zero);
    let nan = m.constant(f64::NAN);
    let r = m.select(&neg, &nan, &r);
    let inf = m.constant(f64::INFINITY);
    let is_inf = m.eq(x, &inf);
    m.select(&is_inf, &inf, &r)
}

/// IEEE `pow`'s signs and special cases applied to `r = |a|^b` (NaN where
/// `a` is): a negative base (`−0` included, by its sign bit) to an integral
/// power takes the power's parity for its sign, to a non-integral one it is
/// NaN (but `(−0)^b` and `(−∞)^b` are the powers of the magnitude);
/// `(±1)^(±∞) = 1`, `1^b = 1` and `a^0 = 1`.
pub(super) fn pow_specials<M: IeeeOps>(m: &mut M, a: &M::V, b: &M::V, r: M::V) -> M::V {
    let zero = m.constant(0.0);
    let one = m.constant(1.0);
    let inf = m.constant(f64::INFINITY);
    let abs_a = m.abs(a);
    // `-1 · r`, not `0 − r`, so that a zero result keeps its sign flip.
    let minus_one = m.constant(-1.0);
    let neg_r = m.mul(&r, &minus_one);
    // Parity of an integral b (every float from 2^24, 2^53 on is even).
    let rb = m.rint(b);
    let is_int = m.eq(&rb, b);
    let half = m.constant(0.5);
    let hb = m.mul(b, &half);
    let fhb = m.floor(&hb);
    let is_even = m.eq(&fhb, &hb);
    let sign = m.copysign(&one, a);
    let a_neg = m.lt(&sign, &zero);
    let nan = m.constant(f64::NAN);
    let odd_r = m.select(&is_even, &r, &neg_r);
    let a_zero = m.eq(a, &zero);
    let a_inf = m.eq(&abs_a, &inf);
    let non_int = m.select(&a_zero, &r, &nan);
    let non_int = m.select(&a_inf, &r, &non_int);
    let neg_base = m.select(&is_int, &odd_r, &non_int);
    let r = m.select(&a_neg, &neg_base, &r);
    let abs_b = m.abs(b);
    let b_inf = m.eq(&abs_b, &inf);
    let unit = m.eq(&abs_a, &one);
    let unit_r = m.select(&b_inf, &one, &r);
    let r = m.select(&unit, &unit_r, &r);
    let a_one = m.eq(a, &one);
    let r = m.select(&a_one, &one, &r);
    let b_zero = m.eq(b, &zero);
    m.select(&b_zero, &one, &r)
}

/// [`IeeeOps`] for a CPU model over the float type `$t`: each operation is
/// the one the generated PTX performs, so the model's results are the
/// GPU's bit for bit.
#[cfg(test)]
macro_rules! ieee_ops_on_the_cpu {
    ($model:ty, $t:ty) => {
        impl $crate::kernels::ptx_gen::math::IeeeOps for $model {
            type V = $t;
            type P = bool;
            fn add(&mut self, a: &$t, b: &$t) -> $t {
                a + b
            }
            fn sub(&mut self, a: &$t, b: &$t) -> $t {
                a - b
            }
            fn mul(&mut self, a: &$t, b: &$t) -> $t {
                a * b
            }
            fn fma(&mut self, a: &$t, b: &$t, c: &$t) -> $t {
                a.mul_add(*b, *c)
            }
            fn div(&mut self, a: &$t, b: &$t) -> $t {
                a / b
            }
            fn abs(&mut self, a: &$t) -> $t {
                a.abs()
            }
            fn neg(&mut self, a: &$t) -> $t {
                -a
            }
            fn rint(&mut self, a: &$t) -> $t {
                a.round_ties_even()
            }
            fn floor(&mut self, a: &$t) -> $t {
                a.floor()
            }
            fn lt(&mut self, a: &$t, b: &$t) -> bool {
                a < b
            }
            fn eq(&mut self, a: &$t, b: &$t) -> bool {
                a == b
            }
            fn select(&mut self, p: &bool, a: &$t, b: &$t) -> $t {
                if *p {
                    *a
                } else {
                    *b
                }
            }
            fn copysign(&mut self, a: &$t, b: &$t) -> $t {
                a.copysign(*b)
            }
            fn constant(&mut self, x: f64) -> $t {
                x as $t
            }
            fn pow2i(&mut self, n: &$t) -> $t {
                self.pow2i_bits(*n)
            }
            fn exponent(&mut self, a: &$t) -> $t {
                self.exponent_bits(*a)
            }
            fn mantissa(&mut self, a: &$t) -> $t {
                self.mantissa_bits(*a)
            }
        }
    };
}
#[cfg(test)]
pub(crate) use ieee_ops_on_the_cpu;

/// The f32 operations the functions below are written in, beyond [`IeeeOps`].
pub(crate) trait MathOps: IeeeOps {
    /// A constant.
    fn c(&mut self, x: f32) -> Self::V {
        self.constant(f64::from(x))
    }
    /// The hardware `2^a` (`ex2.approx.f32`, subnormal results kept): within
    /// 2 ulp of the exact value over the whole range, with
    /// `2^-inf = 0`, `2^inf = inf` and NaN for NaN.
    fn ex2(&mut self, a: &Self::V) -> Self::V;
    /// [`MathOps::ex2`] with subnormal arguments and results flushed to
    /// zero (`ex2.approx.ftz.f32`, one instruction where the subnormal-keeping
    /// form takes five).
    fn ex2_ftz(&mut self, a: &Self::V) -> Self::V;
    /// The hardware `1/a` with subnormal arguments and results flushed to
    /// zero (`rcp.approx.ftz.f32`, within 1 ulp of the exact value otherwise,
    /// with `1/inf = 0`; one instruction where the subnormal-keeping form
    /// takes several). Of an `a` near `[1, 2]` it is the exact form's value.
    fn rcp_ftz(&mut self, a: &Self::V) -> Self::V;
    /// The hardware `tanh(a)` (`tanh.approx.f32`, sm_75 on): relative error
    /// below 2^-10.987, `tanh(±inf) = ±1`, NaN for NaN.
    fn tanh_approx(&mut self, a: &Self::V) -> Self::V;
}

const EXP_TAYLOR: [f32; 8] = [
    1.0,
    1.0,
    0.5,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
];
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// `log2 e` as an f32 and the f32 nearest to the rest.
pub(super) const LOG2E_HI: f32 = std::f32::consts::LOG2_E;
const LOG2E_LO: f32 = 1.925_963e-8;

/// `e^x` from IEEE operations only, for the functions whose result carries
/// the relative error of `e^x` unattenuated into another binade.
fn exp_ieee<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let log2e = m.c(std::f32::consts::LOG2_E);
    let t = m.mul(x, &log2e);
    let k = m.rint(&t);
    let neg_k = {
        let z = m.c(0.0);
        m.sub(&z, &k)
    };
    let hi = m.c(LN2_HI);
    let lo = m.c(LN2_LO);
    let r = m.fma(&neg_k, &hi, x);
    let r = m.fma(&neg_k, &lo, &r);
    let p = horner(m, &r, &EXP_TAYLOR);
    let y = ldexp(m, &p, &k);
    let y = clamp_to(m, x, y, 89.0, false, f64::INFINITY);
    clamp_to(m, x, y, -104.0, true, 0.0)
}

/// `2^(x · (k_hi + k_lo))` for a constant `k_hi + k_lo` known to about 48
/// bits: the hardware `ex2` of the rounded product `t = x · k_hi`, times
/// `1 + τ ln 2` for the rest `τ = x · (k_hi + k_lo) − t` (below `2^-17 |t|`,
/// so the first-order correction is exact to f32 precision). Where the
/// correction is NaN (`x` infinite, or `t` rounded up to the overflow
/// threshold) the result is the hardware value alone: `0`, `inf` or NaN.
fn ex2_of_product<M: MathOps>(m: &mut M, x: &M::V, k_hi: f32, k_lo: f32) -> M::V {
    let hi = m.c(k_hi);
    let lo = m.c(k_lo);
    ex2_of_product_v(m, x, &hi, Some(&lo))
}

/// [`ex2_of_product`] for a multiplier `k_hi` held in a register, with an
/// optional low part.
fn ex2_of_product_v<M: MathOps>(m: &mut M, x: &M::V, k_hi: &M::V, k_lo: Option<&M::V>) -> M::V {
    let t = m.mul(x, k_hi);
    let neg_t = m.neg(&t);
    let mut tau = m.fma(x, k_hi, &neg_t);
    if let Some(lo) = k_lo {
        tau = m.fma(x, lo, &tau);
    }
    let e = m.ex2(&t);
    let ln2 = m.c(std::f32::consts::LN_2);
    let c = m.mul(&tau, &ln2);
    let y = m.fma(&e, &c, &e);
    let ok = m.eq(&y, &y);
    m.select(&ok, &y, &e)
}

/// `e^x`.
pub(crate) fn exp<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    ex2_of_product(m, x, LOG2E_HI, LOG2E_LO)
}

/// `2^x`: the hardware `ex2` of the exact argument.
pub(crate) fn exp2<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    m.ex2(x)
}

/// `1 / d` for `d` in `[1, 2]`, from the hardware reciprocal and one Newton
/// step, `r + r (1 − d r)`.
fn recip<M: MathOps>(m: &mut M, d: &M::V) -> M::V {
    let r = m.rcp_ftz(d);
    let one = m.c(1.0);
    let nd = m.neg(d);
    let err = m.fma(&nd, &r, &one);
    m.fma(&r, &err, &r)
}

/// `(e, log(m))` for `x = m · 2^e`, `m` in `[√½, √2)`, as `(e, hi, lo)` pieces
/// summed by the callers; special inputs are fixed up by [`log_specials`].
fn log_parts<M: MathOps>(m: &mut M, x: &M::V) -> (M::V, M::V) {
    let (e, f) = split_mantissa(
        m,
        x,
        f64::from(f32::MIN_POSITIVE),
        23,
        f64::from(std::f32::consts::SQRT_2),
    );
    let half = m.c(0.5);
    // log(1 + f) = f - hfsq + s (hfsq + R(s²)), s = f / (2 + f).
    let two = m.c(2.0);
    let d = m.add(&two, &f);
    // `f / d` (`d` in [1.7, 2.5]) from the refined reciprocal and one
    // residual correction, within an ulp of the IEEE quotient.
    let r = recip(m, &d);
    let q = m.mul(&f, &r);
    let nd = m.neg(&d);
    let res = m.fma(&nd, &q, &f);
    let s = m.fma(&r, &res, &q);
    let z = m.mul(&s, &s);
    let rz = horner(
        m,
        &z,
        &[2.0f32 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0, 2.0 / 13.0],
    );
    let rz = m.mul(&rz, &z);
    let ff = m.mul(&f, &f);
    let hfsq = m.mul(&ff, &half);
    let inner = m.add(&hfsq, &rz);
    let sr = m.mul(&s, &inner);
    let corr = m.sub(&hfsq, &sr);
    let lm = m.sub(&f, &corr);
    (e, lm)
}

/// Natural logarithm.
pub(crate) fn log<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let parts = log_parts(m, x);
    log_of_parts(m, x, parts)
}

/// `log x` from its parts `(e, log(1 + f))` (`x = (1 + f) 2^e`), with the
/// special cases; shared with the sequences of `math_half`.
pub(super) fn log_of_parts<M: MathOps>(m: &mut M, x: &M::V, (e, lm): (M::V, M::V)) -> M::V {
    let lo = m.c(LN2_LO);
    let hi = m.c(LN2_HI);
    let t = m.fma(&e, &lo, &lm);
    let r = m.fma(&e, &hi, &t);
    log_specials(m, x, r)
}

/// Base-2 logarithm.
pub(crate) fn log2<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let parts = log_parts(m, x);
    log2_of_parts(m, x, parts)
}

/// `log2 x` from the parts of [`log_of_parts`].
pub(super) fn log2_of_parts<M: MathOps>(m: &mut M, x: &M::V, (e, lm): (M::V, M::V)) -> M::V {
    let log2e = m.c(std::f32::consts::LOG2_E);
    let r = m.fma(&lm, &log2e, &e);
    log_specials(m, x, r)
}

/// Sine (`cos_shift = 0`) or cosine (`cos_shift = 1`).
pub(crate) fn sin_cos<M: MathOps>(m: &mut M, x: &M::V, cos_shift: f32) -> M::V {
    let two_over_pi = m.c(std::f32::consts::FRAC_2_PI);
    let t = m.mul(x, &two_over_pi);
    let k = m.rint(&t);
    let zero = m.c(0.0);
    let neg_k = m.sub(&zero, &k);
    let mut r = x.clone();
    for part in [1.570_312_5f32, 4.837_513e-4, 7.549_79e-8] {
        let p = m.c(part);
        r = m.fma(&neg_k, &p, &r);
    }
    // The quadrant, 0..4, shifted by one for the cosine.
    let shift = m.c(cos_shift);
    let q = m.add(&k, &shift);
    let quarter = m.c(0.25);
    let q4 = m.mul(&q, &quarter);
    let q4 = m.floor(&q4);
    let four = m.c(4.0);
    let neg_q = m.sub(&zero, &q);
    // `4 floor(q / 4) - q` is minus the quadrant: 0, -1, -2 or -3.
    let q = m.fma(&q4, &four, &neg_q);
    let r2 = m.mul(&r, &r);
    let sp = horner(
        m,
        &r2,
        &[1.0f32, -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362_880.0],
    );
    let sin_r = m.mul(&sp, &r);
    let cos_r = horner(
        m,
        &r2,
        &[
            1.0f32,
            -0.5,
            1.0 / 24.0,
            -1.0 / 720.0,
            1.0 / 40_320.0,
            -1.0 / 3_628_800.0,
        ],
    );
    let neg_sin = m.sub(&zero, &sin_r);
    let neg_cos = m.sub(&zero, &cos_r);
    let one = m.c(-1.0);
    let two = m.c(-2.0);
    let three = m.c(-3.0);
    let is1 = m.eq(&q, &one);
    let is2 = m.eq(&q, &two);
    let is3 = m.eq(&q, &three);
    let y = m.select(&is1, &cos_r, &sin_r);
    let y = m.select(&is2, &neg_sin, &y);
    m.select(&is3, &neg_cos, &y)
}

/// `tanh(x) / x` as a polynomial in `x²` on `|x| ≤ 1` (a Chebyshev fit,
/// relative error below `2^-26`).
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

/// Hyperbolic tangent: `x P(x²)` below `|x| = 1`, and above
/// `1 − 2e/(1 + e)` with `e = e^{−2|x|}` (in `(0, 0.14)`, so neither the
/// reciprocal nor the hardware `ex2` meets an infinity), signed like `x`.
pub(crate) fn tanh<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let a = m.abs(x);
    let x2 = m.mul(x, x);
    let p = horner(m, &x2, &TANH_SMALL);
    let small = m.mul(&p, x);
    let e = ex2_of_product(m, &a, -2.0 * LOG2E_HI, -2.0 * LOG2E_LO);
    let one = m.c(1.0);
    let d = m.add(&one, &e);
    let r = recip(m, &d);
    let minus_two = m.c(-2.0);
    let ne = m.mul(&e, &minus_two);
    let big = m.fma(&ne, &r, &one);
    let big = m.copysign(&big, x);
    let is_small = m.lt(&a, &one);
    m.select(&is_small, &small, &big)
}

/// `num · σ(z)`, `σ(z) = 1 / (1 + e^{−z})`, through `e = e^{−|z|}` (in
/// `[0, 1]`): `num / (1 + e)` for `z ≥ 0` and `num e / (1 + e)` below, so
/// neither the reciprocal nor the result meets an overflow. The quotient is
/// `q = n r` for `r ≈ 1/(1 + e)`, refined once by its residual; where the
/// refinement is NaN (an infinite `num`) it is `q`.
fn times_logistic<M: MathOps>(m: &mut M, num: &M::V, z: &M::V) -> M::V {
    let a = m.abs(z);
    let na = m.neg(&a);
    let e = exp(m, &na);
    let one = m.c(1.0);
    let d = m.add(&one, &e);
    let r = recip(m, &d);
    let zero = m.c(0.0);
    let is_neg = m.lt(z, &zero);
    let ne = m.mul(num, &e);
    let n = m.select(&is_neg, &ne, num);
    let q = m.mul(&n, &r);
    let nd = m.neg(&d);
    let res = m.fma(&nd, &q, &n);
    let y = m.fma(&r, &res, &q);
    let ok = m.eq(&y, &y);
    m.select(&ok, &y, &q)
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

/// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, computed as
/// `x / (1 + e^{-z})` for `z = 2u`: `x · rcp(1 + 2^{−t})` with
/// `t = z log2 e` (one product with the folded constant). The error is
/// dominated by the rounding of `z` itself, which `e^{−z}` turns into a
/// relative error of about `|z| · 2^-24` (tens of ulp in the negative
/// tail), so neither the argument correction of [`exp`] nor refining the
/// quotient would show: one hardware `ex2` and one hardware reciprocal, both
/// flushing subnormals, are enough. For `z < −87` the reciprocal flushes,
/// so results of magnitude below about `1e-37` (`x < −9.1`) are `±0`.
pub(crate) fn gelu_tanh<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let x2 = m.mul(x, x);
    let k1 = m.c(0.044_715);
    let one = m.c(1.0);
    let poly = m.fma(&x2, &k1, &one);
    let inner = m.mul(&poly, x);
    let k = m.c(-GELU_T);
    let nt = m.mul(&inner, &k);
    let e = m.ex2_ftz(&nt);
    let d = m.add(&one, &e);
    let r = m.rcp_ftz(&d);
    m.mul(x, &r)
}

/// `2 √(2/π) log2 e`, the factor from `x + 0.044715 x³` to `t = 2u log2 e`.
const GELU_T: f32 =
    (2.0 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * std::f64::consts::LOG2_E) as f32;

/// `erfc(z)` for `z ≥ 0` (Numerical Recipes' `erfcc`, with `z²` split exactly).
fn erfc_nonneg<M: MathOps>(m: &mut M, z: &M::V) -> M::V {
    let one = m.c(1.0);
    let half = m.c(0.5);
    let d = m.fma(z, &half, &one);
    let t = m.div(&one, &d);
    let poly = horner(
        m,
        &t,
        &[
            -1.265_512_2f32,
            1.000_023_7,
            0.374_091_96,
            0.096_784_18,
            -0.186_288_06,
            0.278_868_07,
            -1.135_204,
            1.488_515_9,
            -0.822_152_23,
            0.170_872_77,
        ],
    );
    let hi = m.mul(z, z);
    let neg_hi = {
        let zero = m.c(0.0);
        m.sub(&zero, &hi)
    };
    let lo = m.fma(z, z, &neg_hi);
    let arg = m.add(&neg_hi, &poly);
    let e = exp_ieee(m, &arg);
    // e^(arg - lo) ≈ e^arg (1 - lo).
    let corr = m.sub(&one, &lo);
    let e = m.mul(&e, &corr);
    m.mul(&t, &e)
}

/// `0.5 x (1 + erf(x / √2))`.
pub(crate) fn gelu_erf<M: MathOps>(m: &mut M, x: &M::V) -> M::V {
    let a = m.abs(x);
    let r = m.c(std::f32::consts::FRAC_1_SQRT_2);
    let z = m.mul(&a, &r);
    let ec = erfc_nonneg(m, &z);
    let half = m.c(0.5);
    let hx = m.mul(x, &half);
    let neg_part = m.mul(&hx, &ec);
    let pos_part = m.sub(x, &neg_part);
    let zero = m.c(0.0);
    let is_neg = m.lt(x, &zero);
    let r = m.select(&is_neg, &neg_part, &pos_part);
    // `erfc(inf)` is `0 · 0 · NaN` above (the exact split of `z²` is
    // `inf − inf`); `gelu(inf) = inf`.
    let inf = m.c(f32::INFINITY);
    let is_inf = m.eq(x, &inf);
    m.select(&is_inf, x, &r)
}

/// `a^b` with IEEE `pow`'s special cases for signs, zeros and `b = 0`.
pub(crate) fn pow<M: MathOps>(m: &mut M, a: &M::V, b: &M::V) -> M::V {
    let abs_a = m.abs(a);
    let l = log2(m, &abs_a);
    // `2^(b l)` with the rounding error of the product `b l` corrected.
    let r = ex2_of_product_v(m, b, &l, None);
    pow_specials(m, a, b, r)
}

#[cfg(test)]
pub(crate) mod tests;
