//! Precise f64 transcendental functions, written once over [`MathOps64`].
//!
//! As in the f32 module (`math`), the same code emits PTX and runs on the CPU
//! in the tests. Here every operation is IEEE round-to-nearest (`add.rn`,
//! `mul.rn`, `fma.rn`, `div.rn` on `.f64`) or exact (bit moves, `cvt.rni`,
//! `cvt.rmi`, comparisons, selects): there is no hardware approximation in
//! double precision to model, so the CPU reproduces the GPU's results bit for
//! bit and the measured errors are the GPU's own.
//!
//! Methods:
//! - `exp(x)`: `k = rint(x log2 e)`, `r = x − k ln 2` with `ln 2` in two parts
//!   (the first product is exact in the fma), `e^r − 1` by its Taylor
//!   polynomial to degree 13 on `|r| ≤ 0.35` (truncation below `2^-57`), and
//!   a two-step `ldexp` so subnormal results round once.
//! - `exp2(x)`: `k = rint(x)`, `r = x − k` exactly, `e^{r ln 2}` with the
//!   product's rounding error carried to first order; integral `x` gives
//!   `2^x` exactly.
//! - `log(x)`: fdlibm's form: the mantissa in `[√½, √2)`, `s = f/(2 + f)`,
//!   `log(1 + f) = f − (f²/2 − s(f²/2 + R(s²)))` with `R` the atanh series to
//!   `s^22`, and `ln 2` split so `k · ln2_hi` is exact. `log2` scales the same
//!   `log(1 + f)` by a two-part `log2 e` and adds the exponent last.
//! - `tanh(x) = em / (em + 2)` with `em = e^{2|x|} − 1` from `exp`'s
//!   polynomial (no cancellation for small `|x|`), `±1` past `|x| = 20`.
//! - `sigmoid`, `silu`: `n / (1 + e)` with `e = e^{−|z|}` and `n` the
//!   numerator, or the numerator times `e` for negative `z`, so nothing
//!   overflows; `gelu_tanh(x) = x σ(2u)` (no cancellation in `1 + tanh u`),
//!   with the rounding errors of `2u` tracked and `e` corrected for them.
//! - `pow(a, b) = 2^{b log2 |a|}` with `log2 |a|` and the product in
//!   double-double (`s` refined by its residual), so its error does not grow
//!   with `|b log2 a|`; IEEE `pow`'s special cases as in the f32 version.
//!
//! - `sin`, `cos`: `|x|` reduced by `π/2` with fdlibm's three-part
//!   constant in double-double below `10⁶`, and by Payne–Hanek (a 192-bit
//!   window of `2/π` times the 53-bit mantissa, in 64-bit integer
//!   arithmetic) above, so every finite argument is reduced accurately;
//!   Chebyshev fits of degree 15 and 14 on `[−π/4, π/4]`.
//!
//! - `gelu_erf(x) = x Φ(x)`: `Φ = ½ ± ½ erf(z)` (Taylor series) below
//!   `z = |x|/√2 = ½`, and above `½ e^{−x²/2}` (with `x²` in double-double)
//!   times `erfc(z) e^{z²}` from two degree-24 Chebyshev fits (on `[½, 2]`
//!   in `z`, and in `1/z` beyond), or one minus that for positive `x`.
//!
//! Measured worst errors against the standard library's f64 functions
//! (`tests::worst_errors` prints them; the library's own functions are
//! within about 1 ulp): see the table in the parent module's documentation.

use super::math::{self, clamp_to, horner, ldexp, ldexp_factors, log_specials, pow_specials, scaled, IeeeOps};

/// The f64 operations the functions below are written in, beyond
/// [`IeeeOps`].
pub(crate) trait MathOps64: IeeeOps {
    /// A constant.
    fn c(&mut self, x: f64) -> Self::V {
        self.constant(x)
    }
    /// The Payne–Hanek reduction of a positive `a` (called for `a > 10⁶`;
    /// finite, or `∞` with a meaningless result): `(q, f_hi, f_lo)` with
    /// `a · 2/π = 4n + q + f_hi + f_lo` for an integer `n`, `q` in `0..=3`
    /// and `f_hi + f_lo` in `[−½, ½]`, computed as `reduce_large_bits` (the
    /// CPU model, in the tests) specifies.
    fn reduce_large(&mut self, a: &Self::V) -> (Self::V, Self::V, Self::V);
    /// `body`'s `n` values where `needed` holds. Where it does not, they are
    /// unspecified (the callers select other values there): the GPU skips
    /// `body` in a thread that does not need it (a branch, so a warp none of
    /// whose threads needs it skips the work), the CPU model runs it.
    fn guarded<F: FnOnce(&mut Self) -> Vec<Self::V>>(&mut self, needed: &Self::P, n: usize, body: F) -> Vec<Self::V>;
}

/// The bits of `2/π` after the binary point, 1216 of them, behind 64 zero
/// bits (so that the window of a reduction never starts before the table).
pub(crate) const TWO_OVER_PI: [u64; 20] = [
    0x0000000000000000,
    0xA2F9836E4E441529,
    0xFC2757D1F534DDC0,
    0xDB6295993C439041,
    0xFE5163ABDEBBC561,
    0xB7246E3A424DD2E0,
    0x06492EEA09D1921C,
    0xFE1DEB1CB129A73E,
    0xE88235F52EBB4484,
    0xE99C7026B45F7E41,
    0x3991D639835339F4,
    0x9C845F8BBDF9283B,
    0x1FF897FFDE05980F,
    0xEF2F118B5A0A6D1F,
    0x6D367ECF27CB09B7,
    0x4F463F669E5FEA2D,
    0x7527BAC7EBE5F17B,
    0x3D0739F78A5292EA,
    0x6BFB5FB11F8D5D08,
    0x56033046FC7B6BAB,
];

/// [`MathOps64::reduce_large`] on the bits of `a`, step by step as the
/// generated PTX does it (the CPU model's implementation, and the
/// specification of the PTX one).
///
/// `a = m · 2^s` with the 53-bit integer `m`; the bits of `2/π` whose
/// products with `m` are multiples of 4 are skipped, the next 192 (a window
/// from bit `s − 1`) are multiplied by `m`, and of the product the two bits
/// above the binary point are the quadrant and the 128 below it the
/// fraction. A fraction of ½ or more counts as the next quadrant minus the
/// rest, so the fraction is a signed 128-bit number; its magnitude converts
/// to `f64` as the rounded high word, that rounding's integer error, and the
/// low word.
#[cfg(test)]
pub(crate) fn reduce_large_bits(a: f64) -> (f64, f64, f64) {
    let bits = a.to_bits();
    let e = (bits >> 52) & 0x7ff;
    let m = (bits & 0x000f_ffff_ffff_ffff) | (1 << 52);
    let j0 = e.wrapping_sub(1013);
    let (w, sh) = ((j0 >> 6) as usize, (j0 & 63) as u32);
    let t = &TWO_OVER_PI[w..w + 4];
    let window = |hi: u64, lo: u64| (hi << sh) | ((lo >> 1) >> (63 - sh));
    let (w2, w1, w0) = (window(t[0], t[1]), window(t[1], t[2]), window(t[2], t[3]));
    let (p0, p1, p2) = (m as u128 * w0 as u128, m as u128 * w1 as u128, m as u128 * w2 as u128);
    let word0 = p0 as u64;
    let (word1, carry) = ((p0 >> 64) as u64).overflowing_add(p1 as u64);
    let word2 = ((p1 >> 64) as u64).wrapping_add(p2 as u64).wrapping_add(carry as u64);
    let f_hi_bits = (word2 << 2) | (word1 >> 62);
    let f_lo_bits = (word1 << 2) | (word0 >> 62);
    let negative = f_hi_bits >> 63;
    let q = ((word2 >> 62) + negative) & 3;
    let (mh, ml) = if negative == 1 {
        let (lo, c) = (!f_lo_bits).overflowing_add(1);
        ((!f_hi_bits).wrapping_add(c as u64), lo)
    } else {
        (f_hi_bits, f_lo_bits)
    };
    let f = mh as f64;
    let rest = mh.wrapping_sub(f as u64) as i64;
    let two_m64 = f64::from_bits(0x3bf0_0000_0000_0000); // 2^-64
    let two_m128 = f64::from_bits(0x37f0_0000_0000_0000); // 2^-128
    let f_hi = f * two_m64;
    let f_lo = (rest as f64).mul_add(two_m64, ml as f64 * two_m128);
    if negative == 1 {
        (q as f64, -f_hi, -f_lo)
    } else {
        (q as f64, f_hi, f_lo)
    }
}

/// `1/n!` for `n = 2..=13`: `(e^r − 1 − r) / r²` as a polynomial in `r`.
const EXPM1_TAYLOR: [f64; 12] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
    1.0 / 6_227_020_800.0,
];

/// `ln 2` rounded to f64, and the rest.
const LN2: f64 = std::f64::consts::LN_2;
const LN2_LO: f64 = 2.319_046_813_846_299_6e-17;
/// `log2 e` rounded to f64, and the rest.
const LOG2E: f64 = std::f64::consts::LOG2_E;
const LOG2E_LO: f64 = 2.035_527_374_093_103_3e-17;

/// `e^r − 1` for `|r| ≤ 0.35`, within about half an ulp of the result.
fn expm1_poly<M: MathOps64>(m: &mut M, r: &M::V) -> M::V {
    let q = horner(m, r, &EXPM1_TAYLOR);
    let r2 = m.mul(r, r);
    m.fma(&r2, &q, r)
}

/// `(k, r)` with `x = k ln 2 + r`, `k` integral and `|r| ≤ 0.35`.
fn reduce_ln2<M: MathOps64>(m: &mut M, x: &M::V) -> (M::V, M::V) {
    let log2e = m.c(LOG2E);
    let t = m.mul(x, &log2e);
    let k = m.rint(&t);
    let nk = m.neg(&k);
    let hi = m.c(LN2);
    let lo = m.c(LN2_LO);
    // `x − k · LN2` is a multiple of 2^-53 below 0.5 in magnitude: exact.
    let r = m.fma(&nk, &hi, x);
    let r = m.fma(&nk, &lo, &r);
    (k, r)
}

/// `e^x`.
pub(crate) fn exp<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let (k, r) = reduce_ln2(m, x);
    let p = expm1_poly(m, &r);
    let one = m.c(1.0);
    let y = m.add(&one, &p);
    let y = ldexp(m, &y, &k);
    // Past these the result is ∞ or 0 (and `k` would leave `ldexp`'s range).
    let y = clamp_to(m, x, y, 709.79, false, f64::INFINITY);
    clamp_to(m, x, y, -746.0, true, 0.0)
}

/// `2^(t_hi + t_lo)` for `|t_lo| ≤ 2^-40 |t_hi|` or tiny: `k = rint(t_hi)`,
/// `r = t_hi − k + t_lo`, and `e^{r ln 2}` with the rounding of `r ln 2`
/// carried to first order. Overflows to `∞` and underflows to 0 by `t_hi`.
fn exp2_parts<M: MathOps64>(m: &mut M, t_hi: &M::V, t_lo: Option<&M::V>) -> M::V {
    let k = m.rint(t_hi);
    let mut r = m.sub(t_hi, &k);
    if let Some(lo) = t_lo {
        r = m.add(&r, lo);
    }
    let ln2 = m.c(LN2);
    let ln2_lo = m.c(LN2_LO);
    let th = m.mul(&r, &ln2);
    let nth = m.neg(&th);
    let tl = m.fma(&r, &ln2, &nth);
    let tl = m.fma(&r, &ln2_lo, &tl);
    let p = expm1_poly(m, &th);
    // e^{th + tl} − 1 = p + tl (1 + p).
    let s = m.add(&p, &tl);
    let p = m.fma(&p, &tl, &s);
    let one = m.c(1.0);
    let y = m.add(&one, &p);
    let y = ldexp(m, &y, &k);
    let y = clamp_to(m, t_hi, y, 1024.5, false, f64::INFINITY);
    clamp_to(m, t_hi, y, -1076.0, true, 0.0)
}

/// `2^x`.
pub(crate) fn exp2<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    exp2_parts(m, x, None)
}

/// `(e, f)` for a positive `x = (1 + f) · 2^e`, `1 + f` in `[√½, √2)`.
fn split_mantissa<M: MathOps64>(m: &mut M, x: &M::V) -> (M::V, M::V) {
    math::split_mantissa(m, x, f64::MIN_POSITIVE, 54, std::f64::consts::SQRT_2)
}

/// `2/3, 2/5, …, 2/23`: `R(z) / z` of the atanh series `log(1 + f) = 2s + s R(s²)`.
const ATANH_SERIES: [f64; 11] = [
    2.0 / 3.0,
    2.0 / 5.0,
    2.0 / 7.0,
    2.0 / 9.0,
    2.0 / 11.0,
    2.0 / 13.0,
    2.0 / 15.0,
    2.0 / 17.0,
    2.0 / 19.0,
    2.0 / 21.0,
    2.0 / 23.0,
];

/// `(f²/2, s (f²/2 + R(s²)))`: the two small terms of
/// `log(1 + f) = f − (f²/2 − s (f²/2 + R))`.
fn log1p_terms<M: MathOps64>(m: &mut M, f: &M::V) -> (M::V, M::V) {
    let two = m.c(2.0);
    let d = m.add(&two, f);
    let s = m.div(f, &d);
    let z = m.mul(&s, &s);
    let rz = horner(m, &z, &ATANH_SERIES);
    let rz = m.mul(&rz, &z);
    let half = m.c(0.5);
    let ff = m.mul(f, f);
    let hfsq = m.mul(&ff, &half);
    let inner = m.add(&hfsq, &rz);
    let sr = m.mul(&s, &inner);
    (hfsq, sr)
}

/// `2/3` rounded to f64, and the rest.
const TWO_THIRDS: f64 = 2.0 / 3.0;
const TWO_THIRDS_LO: f64 = 3.700_743_415_417_188e-17;

/// `ln 2` split so that `e · LN2_HI` is exact for any exponent `e` (fdlibm's).
const LN2_HI_SPLIT: f64 = 0.693_147_180_369_123_8; // 0x3FE62E42FEE00000
const LN2_LO_SPLIT: f64 = 1.908_214_929_270_587_7e-10; // 0x3DEA39EF35793C76

/// Natural logarithm.
pub(crate) fn log<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let (e, f) = split_mantissa(m, x);
    let (hfsq, sr) = log1p_terms(m, &f);
    let lo = m.c(LN2_LO_SPLIT);
    let hi = m.c(LN2_HI_SPLIT);
    // e·ln2_hi − ((hfsq − (s(hfsq + R) + e·ln2_lo)) − f)
    let t = m.fma(&e, &lo, &sr);
    let t = m.sub(&hfsq, &t);
    let t = m.sub(&t, &f);
    let nt = m.neg(&t);
    let r = m.fma(&e, &hi, &nt);
    log_specials(m, x, r)
}

/// Base-2 logarithm.
pub(crate) fn log2<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let (e, f) = split_mantissa(m, x);
    let (hfsq, sr) = log1p_terms(m, &f);
    let t = m.sub(&hfsq, &sr);
    let lm = m.sub(&f, &t);
    let hi = m.c(LOG2E);
    let lo = m.c(LOG2E_LO);
    let small = m.mul(&lm, &lo);
    let r = m.fma(&lm, &hi, &small);
    let r = m.add(&r, &e);
    log_specials(m, x, r)
}

/// `log2 x` as a double-double `(hi, lo)` for a positive finite `x` (the
/// specials are left to the caller).
fn log2_dd<M: MathOps64>(m: &mut M, x: &M::V) -> (M::V, M::V) {
    let (e, f) = split_mantissa(m, x);
    // s = f / (2 + f) as s_hi + s_lo, with 2 + f as d_hi + d_lo exactly.
    let two = m.c(2.0);
    let d_hi = m.add(&two, &f);
    let t = m.sub(&two, &d_hi);
    let d_lo = m.add(&t, &f);
    // Any s_hi near the quotient will do, its residual goes to s_lo: one
    // division, for 1/d.
    let one = m.c(1.0);
    let rd = m.div(&one, &d_hi);
    let s_hi = m.mul(&f, &rd);
    let ns = m.neg(&s_hi);
    let res = m.fma(&ns, &d_hi, &f);
    let res = m.fma(&ns, &d_lo, &res);
    let s_lo = m.mul(&res, &rd);
    // log(1 + f) = 2s + (2/3) s³ + s³ z P'(z), z = s². The s³ term is below
    // 1 % of the first and carried in double-double too; the rest is below
    // 2e-4 of it.
    let z = m.mul(&s_hi, &s_hi);
    let nz = m.neg(&z);
    let z_lo = m.fma(&s_hi, &s_hi, &nz);
    let s3 = m.mul(&s_hi, &z);
    let ns3 = m.neg(&s3);
    let s3_lo = m.fma(&s_hi, &z, &ns3);
    let s3_lo = m.fma(&s_hi, &z_lo, &s3_lo);
    let two_thirds = m.c(TWO_THIRDS);
    let t1 = m.mul(&s3, &two_thirds);
    let nt1 = m.neg(&t1);
    let t1_err = m.fma(&s3, &two_thirds, &nt1);
    let tt_lo = m.c(TWO_THIRDS_LO);
    let t1_err = m.fma(&s3, &tt_lo, &t1_err);
    let t1_err = m.fma(&s3_lo, &two_thirds, &t1_err);
    let p = horner(m, &z, &ATANH_SERIES[1..]);
    let s3z = m.mul(&s3, &z);
    let rest = m.fma(&s3z, &p, &t1_err);
    let l_hi = m.add(&s_hi, &s_hi);
    // 2 s_lo, and its share of the s³ term, 2 s² s_lo.
    let two_lo = m.add(&s_lo, &s_lo);
    let two_lo = m.fma(&two_lo, &z, &two_lo);
    let small = m.add(&two_lo, &rest);
    let l_lo = m.add(&t1, &small);
    // Fast2Sum, so that the low part is below an ulp of the high one.
    let l_sum = m.add(&l_hi, &l_lo);
    let back = m.sub(&l_sum, &l_hi);
    let l_lo = m.sub(&l_lo, &back);
    let l_hi = l_sum;
    // (l_hi + l_lo) · log2 e, then + e, each as a double-double.
    let (p_hi, p_lo) = dd_times(m, &l_hi, &l_lo, LOG2E, LOG2E_LO);
    let (s, err) = two_sum(m, &e, &p_hi);
    let lo = m.add(&err, &p_lo);
    // Renormalise so that hi carries the rounded sum.
    let hi = m.add(&s, &lo);
    let back = m.sub(&hi, &s);
    let lo = m.sub(&lo, &back);
    (hi, lo)
}

/// `π/2` in three 33-bit parts and the rest (fdlibm's split): `k · P_i` is
/// exact for `k < 2^20`.
const PIO2_1: f64 = 1.570_796_326_734_125_6;
const PIO2_2: f64 = 6.077_100_506_303_966e-11;
const PIO2_3: f64 = 2.022_266_248_711_166_5e-21;
const PIO2_3T: f64 = 8.478_427_660_368_9e-32;
/// `π/2` rounded to f64, and the rest.
const PIO2_HI: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_LO: f64 = 6.123_233_995_736_766e-17;
/// Below this `|x|` the three-part reduction is used (`k < 2^20`).
const MEDIUM_LIMIT: f64 = 1e6;

/// `(sin r − r)/r³` as a polynomial in `z = r²` on `|r| ≤ π/4 + 0.001`: a
/// degree-6 Chebyshev fit (relative error 1.2e-20 before the coefficients'
/// rounding, 5.7e-17 after, of a term below a tenth of `sin r`).
const SIN_POLY: [f64; 7] = [
    -0.166_666_666_666_666_66,
    0.008_333_333_333_333_331,
    -0.000_198_412_698_412_650_03,
    2.755_731_921_929_169_5e-6,
    -2.505_210_621_597_887_2e-8,
    1.605_852_901_196_085_8e-10,
    -7.586_543_634_101_903e-13,
];
/// `(cos r − 1 + r²/2)/r⁴` as a polynomial in `z = r²` on the same range:
/// a degree-5 Chebyshev fit (1.3e-18 before rounding, 5.6e-17 after, of a
/// term below 2 % of `cos r`).
const COS_POLY: [f64; 6] = [
    0.041_666_666_666_666_664,
    -0.001_388_888_888_888_737_8,
    2.480_158_729_873_686_3e-5,
    -2.755_731_725_679_604e-7,
    2.087_614_315_990_944e-9,
    -1.138_240_875_415_325_4e-11,
];

/// `(x_hi + x_lo) · (k_hi + k_lo)` as `(p_hi, p_lo)` with `p_hi` the rounded
/// `x_hi · k_hi` (its error recovered by an fma), for a constant `k` in two
/// parts; `x_lo · k_lo` is below what the sum keeps.
fn dd_times<M: MathOps64>(m: &mut M, x_hi: &M::V, x_lo: &M::V, k_hi: f64, k_lo: f64) -> (M::V, M::V) {
    let k_hi = m.c(k_hi);
    let k_lo = m.c(k_lo);
    let p_hi = m.mul(x_hi, &k_hi);
    let np = m.neg(&p_hi);
    let p_err = m.fma(x_hi, &k_hi, &np);
    let c1 = m.mul(x_hi, &k_lo);
    let c2 = m.fma(x_lo, &k_hi, &c1);
    (p_hi, m.add(&p_err, &c2))
}

/// `a − b` as `(difference, error)`, exactly.
fn two_diff<M: MathOps64>(m: &mut M, a: &M::V, b: &M::V) -> (M::V, M::V) {
    let nb = m.neg(b);
    two_sum(m, a, &nb)
}

/// `a + b` as `(sum, error)` for `|a| ≥ |b|` (Fast2Sum).
fn fast_two_sum<M: MathOps64>(m: &mut M, a: &M::V, b: &M::V) -> (M::V, M::V) {
    let s = m.add(a, b);
    let back = m.sub(&s, a);
    let err = m.sub(b, &back);
    (s, err)
}

/// `(q, r_hi, r_lo)`: `a = (4n + q) π/2 + r_hi + r_lo` for `a ≥ 0`, `q` in
/// `0..=3` and `|r| ≤ π/4` (a little more from the medium reduction's
/// rounding of `k`), by the three-part reduction below [`MEDIUM_LIMIT`] and
/// Payne–Hanek above.
fn reduce_pio2<M: MathOps64>(m: &mut M, a: &M::V) -> (M::V, M::V, M::V) {
    let two_over_pi = m.c(std::f64::consts::FRAC_2_PI);
    let t = m.mul(a, &two_over_pi);
    let k = m.rint(&t);
    let nk = m.neg(&k);
    // a − k·P1 is exact (Sterbenz), and so are the products k·P2, k·P3.
    let p1 = m.c(PIO2_1);
    let r = m.fma(&nk, &p1, a);
    let p2 = m.c(PIO2_2);
    let w = m.mul(&k, &p2);
    let (y, y_err) = two_diff(m, &r, &w);
    let p3 = m.c(PIO2_3);
    let w3 = m.mul(&k, &p3);
    let (h, h_err) = two_diff(m, &y, &w3);
    let p3t = m.c(PIO2_3T);
    let w4 = m.mul(&k, &p3t);
    let lo = m.add(&h_err, &y_err);
    let lo = m.sub(&lo, &w4);
    let (r_hi, r_lo) = fast_two_sum(m, &h, &lo);
    let quarter = m.c(0.25);
    let four = m.c(4.0);
    let k4 = m.mul(&k, &quarter);
    let k4 = m.floor(&k4);
    let nk4 = m.neg(&k4);
    let q = m.fma(&nk4, &four, &k);
    // Payne–Hanek for the rest (on 2^21 where unused, to stay in its table).
    let limit = m.c(MEDIUM_LIMIT);
    let large = m.lt(&limit, a);
    let safe = m.c(2_097_152.0);
    let al = m.select(&large, a, &safe);
    let large_parts = m.guarded(&large, 3, |m| {
        let (ql, f_hi, f_lo) = m.reduce_large(&al);
        let (rh, rl) = dd_times(m, &f_hi, &f_lo, PIO2_HI, PIO2_LO);
        let (lh, ll) = fast_two_sum(m, &rh, &rl);
        vec![ql, lh, ll]
    });
    let [ql, lh, ll] = <[M::V; 3]>::try_from(large_parts).unwrap_or_else(|_| unreachable!("three values"));
    let q = m.select(&large, &ql, &q);
    let r_hi = m.select(&large, &lh, &r_hi);
    let r_lo = m.select(&large, &ll, &r_lo);
    (q, r_hi, r_lo)
}

/// Sine (`cos = false`) or cosine (`cos = true`): `|x|` reduced by `π/2`
/// ([`reduce_pio2`]), polynomials of `sin` and `cos` on `[−π/4, π/4]`
/// with the reduced argument's low part applied to first order, the
/// quadrant's choice and sign, and the sine's odd sign.
pub(crate) fn sin_cos<M: MathOps64>(m: &mut M, x: &M::V, cos: bool) -> M::V {
    let a = m.abs(x);
    let (q, r, r_lo) = reduce_pio2(m, &a);
    let z = m.mul(&r, &r);
    let half = m.c(0.5);
    let hz = m.mul(&z, &half);
    let one = m.c(1.0);
    // sin(r + r_lo) = r + (r³ S(r²) + r_lo (1 − r²/2)).
    let sp = horner(m, &z, &SIN_POLY);
    let r3 = m.mul(&r, &z);
    let c = m.sub(&one, &hz);
    let lo_term = m.mul(&r_lo, &c);
    let tail = m.fma(&r3, &sp, &lo_term);
    let sin_r = m.add(&r, &tail);
    // cos(r + r_lo) = w + (((1 − w) − r²/2) + (r⁴ C(r²) − r r_lo)), w = 1 − r²/2.
    let cp = horner(m, &z, &COS_POLY);
    let z2 = m.mul(&z, &z);
    let nr = m.neg(&r);
    let rr = m.mul(&nr, &r_lo);
    let poly = m.fma(&z2, &cp, &rr);
    let one_w = m.sub(&one, &c);
    let corr = m.sub(&one_w, &hz);
    let corr = m.add(&corr, &poly);
    let cos_r = m.add(&c, &corr);
    // The quadrant, moved by one for the cosine.
    let q = if cos { m.add(&q, &one) } else { q };
    let quarter = m.c(0.25);
    let four = m.c(4.0);
    let q4 = m.mul(&q, &quarter);
    let q4 = m.floor(&q4);
    let nq4 = m.neg(&q4);
    let q = m.fma(&nq4, &four, &q);
    let neg_sin = m.neg(&sin_r);
    let neg_cos = m.neg(&cos_r);
    let (c1, c2, c3) = (m.c(1.0), m.c(2.0), m.c(3.0));
    let is1 = m.eq(&q, &c1);
    let is2 = m.eq(&q, &c2);
    let is3 = m.eq(&q, &c3);
    let y = m.select(&is1, &cos_r, &sin_r);
    let y = m.select(&is2, &neg_sin, &y);
    let y = m.select(&is3, &neg_cos, &y);
    // sin(−x) = −sin x; sin and cos of ±∞ are NaN.
    let y = if cos {
        y
    } else {
        let zero = m.c(0.0);
        let neg = m.lt(x, &zero);
        let ny = m.neg(&y);
        let y = m.select(&neg, &ny, &y);
        // −0 compares equal to 0: sin(−0) = −0 by the sign of `x`.
        let is_zero = m.eq(x, &zero);
        let signed = m.copysign(&y, x);
        m.select(&is_zero, &signed, &y)
    };
    let inf = m.c(f64::INFINITY);
    let is_inf = m.eq(&a, &inf);
    let nan = m.c(f64::NAN);
    m.select(&is_inf, &nan, &y)
}

/// Hyperbolic tangent: `em / (em + 2)` for `em = e^{2|x|} − 1`, signed like
/// `x`; 1 in magnitude past `|x| = 20`, where it rounds to 1.
pub(crate) fn tanh<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let a = m.abs(x);
    let limit = m.c(20.0);
    let big = m.lt(&limit, &a);
    let a = m.select(&big, &limit, &a);
    let a2 = m.add(&a, &a);
    let (k, r) = reduce_ln2(m, &a2);
    let p = expm1_poly(m, &r);
    // em = 2^k (1 + p) − 1 = 2^k p + (2^k − 1), with 2^k − 1 exact for
    // k ≤ 53 (k reaches 58 at |x| = 20, where 2^k − 1 rounds by 2^-58).
    let s = m.pow2i(&k);
    let one = m.c(1.0);
    let sm1 = m.sub(&s, &one);
    let em = m.fma(&s, &p, &sm1);
    let two = m.c(2.0);
    let d = m.add(&em, &two);
    let q = m.div(&em, &d);
    let q = m.select(&big, &one, &q);
    m.copysign(&q, x)
}

/// `num · σ(z + dz)`, `σ(z) = 1 / (1 + e^{−z})`, through `e = e^{−|z|}` (in
/// `[0, 1]`, corrected to first order for a small `dz`): `q = num / (1 + e)`
/// for `z ≥ 0` and `q · e` below, so nothing overflows. `e` is kept as
/// `y · 2^k` and the scale `2^k` applied last, so that a tiny result is
/// rounded once (not `e` first as a subnormal, whose rounding `num` would
/// magnify).
fn times_logistic<M: MathOps64>(m: &mut M, num: &M::V, z: &M::V, dz: Option<&M::V>) -> M::V {
    let a = m.abs(z);
    let na = m.neg(&a);
    let (k, r) = reduce_ln2(m, &na);
    let p = expm1_poly(m, &r);
    let one = m.c(1.0);
    let mut y = m.add(&one, &p);
    let zero = m.c(0.0);
    let is_neg = m.lt(z, &zero);
    if let Some(dz) = dz {
        // e^{−|z + dz|} = e (1 ∓ dz), minus for positive z.
        let ndz = m.neg(dz);
        let c = m.select(&is_neg, dz, &ndz);
        y = m.fma(&y, &c, &y);
    }
    // Below −746, e^{−|z|} is 0 to f64 (and `k` past `ldexp`'s range).
    let gone = {
        let limit = m.c(-746.0);
        m.lt(&na, &limit)
    };
    let scale = ldexp_factors(m, &k);
    let e = scaled(m, &y, &scale);
    let e = m.select(&gone, &zero, &e);
    let d = m.add(&one, &e);
    let q = m.div(num, &d);
    let qy = m.mul(&q, &y);
    let small = scaled(m, &qy, &scale);
    let q0 = m.mul(&q, &zero);
    let small = m.select(&gone, &q0, &small);
    m.select(&is_neg, &small, &q)
}

/// `1 / (1 + e^-x)`.
pub(crate) fn sigmoid<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let one = m.c(1.0);
    times_logistic(m, &one, x, None)
}

/// `x / (1 + e^-x)`.
pub(crate) fn silu<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    times_logistic(m, x, x, None)
}

/// `2 √(2/π)` rounded to f64, and the rest: `z = 2u = K · x (1 + 0.044715 x²)`.
const GELU_K: f64 = 1.595_769_121_605_730_8;
const GELU_K_LO: f64 = -9.969_308_809_110_92e-17;

/// `a + b` as `(sum, error)`, exactly (TwoSum).
fn two_sum<M: MathOps64>(m: &mut M, a: &M::V, b: &M::V) -> (M::V, M::V) {
    let s = m.add(a, b);
    let bv = m.sub(&s, a);
    let av = m.sub(&s, &bv);
    let eb = m.sub(b, &bv);
    let ea = m.sub(a, &av);
    let err = m.add(&ea, &eb);
    (s, err)
}

/// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, computed as `x σ(2u)` with
/// the rounding errors of `2u` carried to first order (`e^{−2u}` would
/// otherwise turn them into a relative error of `|2u|` ulps).
pub(crate) fn gelu_tanh<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let x2 = m.mul(x, x);
    let nx2 = m.neg(&x2);
    let x2_err = m.fma(x, x, &nx2);
    let k1 = m.c(0.044_715);
    let q = m.mul(&x2, &k1);
    let nq = m.neg(&q);
    let q_err = m.fma(&x2, &k1, &nq);
    let q_err = m.fma(&x2_err, &k1, &q_err);
    let one = m.c(1.0);
    let (poly, p_err) = two_sum(m, &one, &q);
    let p_err = m.add(&p_err, &q_err);
    let inner = m.mul(&poly, x);
    let ni = m.neg(&inner);
    let i_err = m.fma(&poly, x, &ni);
    let i_err = m.fma(&p_err, x, &i_err);
    let k = m.c(GELU_K);
    let k_lo = m.c(GELU_K_LO);
    let z = m.mul(&inner, &k);
    let nz = m.neg(&z);
    let z_err = m.fma(&inner, &k, &nz);
    let z_err = m.fma(&inner, &k_lo, &z_err);
    let z_err = m.fma(&i_err, &k, &z_err);
    // Where `z` is infinite its error is NaN; it does not matter then.
    let az = m.abs(&z);
    let inf = m.c(f64::INFINITY);
    let finite = m.lt(&az, &inf);
    let zero = m.c(0.0);
    let z_err = m.select(&finite, &z_err, &zero);
    times_logistic(m, x, &z, Some(&z_err))
}

/// `erf(z)/z = (2/√π) Σ (−1)ⁿ z²ⁿ / (n! (2n + 1))`, 14 terms: for `z < ½`
/// the truncation is below `2^-66`.
const ERF_SMALL: [f64; 14] = [
    std::f64::consts::FRAC_2_SQRT_PI,
    -0.376_126_389_031_837_54,
    0.112_837_916_709_551_26,
    -0.026_866_170_645_131_252,
    0.005_223_977_625_442_188,
    -0.000_854_832_702_345_085_3,
    0.000_120_553_329_817_896_64,
    -1.492_565_035_840_625e-5,
    1.646_211_436_588_924_8e-6,
    -1.636_584_469_123_492_4e-7,
    1.480_719_281_587_921_8e-8,
    -1.229_055_530_171_792_8e-9,
    9.422_759_064_650_411e-11,
    -6.711_366_855_164_110_5e-12,
];

/// `erfc(z) e^{z²}` on `[½, 2]` as a polynomial in `t = (z − 1.25)/0.75`
/// (a degree-24 Chebyshev fit, relative error about `1.5e-16`).
const ERFCX_MID: [f64; 25] = [
    0.367_822_916_452_361_1,
    -0.156_616_406_973_457_38,
    0.060_072_508_966_836_82,
    -0.021_185_834_510_773_504,
    0.006_964_533_219_997_774_5,
    -0.002_155_112_807_424_872_4,
    0.000_632_377_226_429_309_8,
    -0.000_176_970_658_399_727_95,
    4.745_054_940_418_951e-5,
    -1.223_580_117_401_313_2e-5,
    3.043_974_087_815_166_4e-6,
    -7.325_295_373_155_951e-7,
    1.709_148_306_568_087_3e-7,
    -3.874_080_041_008_066e-8,
    8.545_727_017_628_162e-9,
    -1.837_346_940_474_552e-9,
    3.855_581_395_951_072e-10,
    -7.906_023_869_718_423e-11,
    1.586_081_306_055_413_6e-11,
    -3.120_020_242_510_820_2e-12,
    6.007_372_627_110_418e-13,
    -1.109_692_517_529_483_9e-13,
    2.061_132_933_943_247_8e-14,
    -4.670_925_974_550_992_5e-15,
    8.314_623_530_231_907e-16,
];

/// `z erfc(z) e^{z²}` as a polynomial in `t = (1/z − 0.25)/0.25` for
/// `1/z` in `[0, ½]` (`z ≥ 2`; a degree-24 Chebyshev fit, relative error
/// about `1.7e-16`).
const ERFCX_TAIL: [f64; 25] = [
    0.547_997_830_500_245_5,
    -0.029_861_732_979_902_238,
    -0.010_486_636_862_004_49,
    0.003_429_890_672_475_181,
    -0.000_109_711_847_077_279_04,
    -0.000_266_370_738_387_355_53,
    0.000_100_366_436_401_812_5,
    -5.975_212_097_673_001e-6,
    -1.080_536_869_771_839_5e-5,
    5.641_222_716_972_445e-6,
    -9.731_156_485_832_218e-7,
    -4.583_479_963_759_308_6e-7,
    4.144_555_564_796_562e-7,
    -1.421_119_514_961_927_5e-7,
    2.216_476_007_966_903e-11,
    2.859_767_367_597_233e-8,
    -1.766_404_079_766_522_5e-8,
    5.743_772_725_508_28e-9,
    3.916_757_520_719_107e-10,
    -2.462_493_978_046_852_2e-9,
    1.471_358_945_851_806_7e-9,
    1.102_308_595_807_978_8e-10,
    -3.608_751_538_878_594e-10,
    4.258_730_331_998_245_6e-11,
    2.532_459_767_107_554_3e-11,
];

/// `x Φ(x)`, `Φ(x) = ½ erfc(−x/√2)`: for `z = |x|/√2 < ½`,
/// `Φ = ½ ± ½ erf(z)` with `erf` from its Taylor series; above,
/// `½ erfc(z) = ½ e^{−x²/2} · erfc(z) e^{z²}` with `x²` in double-double (so
/// the exponential does not magnify a rounding of `x²` or of `z`) and the
/// scaled `erfc` from two Chebyshev fits, and `Φ` that or one minus it by
/// the sign of `x`.
pub(crate) fn gelu_erf<M: MathOps64>(m: &mut M, x: &M::V) -> M::V {
    let a = m.abs(x);
    let r = m.c(std::f64::consts::FRAC_1_SQRT_2);
    let z = m.mul(&a, &r);
    let half = m.c(0.5);
    let zero = m.c(0.0);
    let one = m.c(1.0);
    let is_neg = m.lt(x, &zero);
    // Below z = ½.
    let z2 = m.mul(&z, &z);
    let p = horner(m, &z2, &ERF_SMALL);
    let erf = m.mul(&z, &p);
    let half_erf = m.mul(&erf, &half);
    let minus = m.sub(&half, &half_erf);
    let plus = m.add(&half, &half_erf);
    let phi_small = m.select(&is_neg, &minus, &plus);
    // e^{−x²/2}, corrected for the low part of x² where x² is finite.
    let x2 = m.mul(x, x);
    let nx2 = m.neg(&x2);
    let x2_lo = m.fma(x, x, &nx2);
    let mhalf = m.c(-0.5);
    let arg = m.mul(&x2, &mhalf);
    let e = exp(m, &arg);
    let corr = m.mul(&x2_lo, &mhalf);
    let inf = m.c(f64::INFINITY);
    let finite = m.lt(&x2, &inf);
    let corr = m.select(&finite, &corr, &zero);
    let e = m.fma(&e, &corr, &e);
    // erfc(z) e^{z²}.
    let c_mid = m.c(1.25);
    let k_mid = m.c(4.0 / 3.0);
    let t = m.sub(&z, &c_mid);
    let t = m.mul(&t, &k_mid);
    let g_mid = horner(m, &t, &ERFCX_MID);
    let two = m.c(2.0);
    let is_mid = m.lt(&z, &two);
    // z ≥ 2: above the largest double below 2.
    let below_two = m.c(1.999_999_999_999_999_8);
    let tail_needed = m.lt(&below_two, &z);
    let g_tail = m.guarded(&tail_needed, 1, |m| {
        let one = m.c(1.0);
        let u = m.div(&one, &z);
        let quarter = m.c(0.25);
        let four = m.c(4.0);
        let t = m.sub(&u, &quarter);
        let t = m.mul(&t, &four);
        let h = horner(m, &t, &ERFCX_TAIL);
        vec![m.mul(&u, &h)]
    });
    let g_tail = g_tail[0].clone();
    let g = m.select(&is_mid, &g_mid, &g_tail);
    let half_erfc = m.mul(&e, &g);
    let half_erfc = m.mul(&half_erfc, &half);
    let rest = m.sub(&one, &half_erfc);
    let pos_big = m.mul(x, &rest);
    // For negative x the factor e^{−x²/2} comes last, so that a subnormal
    // result is rounded once.
    let xg = m.mul(x, &g);
    let xg = m.mul(&xg, &half);
    let neg_big = m.mul(&xg, &e);
    let big = m.select(&is_neg, &neg_big, &pos_big);
    let small = m.mul(x, &phi_small);
    let is_small = m.lt(&z, &half);
    m.select(&is_small, &small, &big)
}

/// `a^b` with IEEE `pow`'s special cases for signs, zeros and `b = 0`.
pub(crate) fn pow<M: MathOps64>(m: &mut M, a: &M::V, b: &M::V) -> M::V {
    let abs_a = m.abs(a);
    let (l_hi, l_lo) = log2_dd(m, &abs_a);
    // NaN, zeros and infinities of `a` (which `log2_dd` reads as numbers)
    // by their logarithm.
    let is_number = m.eq(a, a);
    let l_hi = m.select(&is_number, &l_hi, a);
    let zero = m.c(0.0);
    let inf = m.c(f64::INFINITY);
    let ninf = m.c(f64::NEG_INFINITY);
    let a_zero = m.eq(a, &zero);
    let a_inf = m.eq(&abs_a, &inf);
    let l_hi = m.select(&a_zero, &ninf, &l_hi);
    let l_hi = m.select(&a_inf, &inf, &l_hi);
    let l_lo = m.select(&a_zero, &zero, &l_lo);
    let l_lo = m.select(&a_inf, &zero, &l_lo);
    // t = b (l_hi + l_lo) as a double-double.
    let t_hi = m.mul(b, &l_hi);
    let nt = m.neg(&t_hi);
    let t_err = m.fma(b, &l_hi, &nt);
    let t_lo = m.fma(b, &l_lo, &t_err);
    // Where `t_hi` is infinite its error terms are NaN: they do not matter then.
    let finite = {
        let at = m.abs(&t_hi);
        m.lt(&at, &inf)
    };
    let t_lo = m.select(&finite, &t_lo, &zero);
    let r = exp2_parts(m, &t_hi, Some(&t_lo));
    pow_specials(m, a, b, r)
}

#[cfg(test)]
pub(crate) mod tests;
