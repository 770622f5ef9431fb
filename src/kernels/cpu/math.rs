//! Scalar math the standard library lacks: the error function.
//!
//! `erf` follows the rational approximations of fdlibm (Sun Microsystems,
//! 1993), whose published coefficients keep the error under one unit in the
//! last place of f64. The f32 form evaluates in f64 and rounds once, so it
//! is correctly rounded except in rare double-rounding cases (within 1 ulp).

// The coefficients are kept digit for digit as published.
#![allow(clippy::excessive_precision)]

/// erf(1) rounded to 24 bits (the split point of the middle interval).
const ERX: f64 = 8.45062911510467529297e-01;
/// 2/sqrt(pi) - 1.
const EFX: f64 = 1.28379167095512586316e-01;

/// Numerator and denominator of erf(x) = x + x * P(x^2) / Q(x^2) on [0, 0.84375).
const PP: [f64; 5] = [
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
];
const QQ: [f64; 6] = [
    1.0,
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
];

/// erf(x) = ERX + P(s) / Q(s) with s = x - 1 on [0.84375, 1.25).
const PA: [f64; 7] = [
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
];
const QA: [f64; 7] = [
    1.0,
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
];

/// erfc(x) = exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / x on [1.25, 1/0.35).
const RA: [f64; 8] = [
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e+01,
    -6.23753324503260060396e+01,
    -1.62396669462573470355e+02,
    -1.84605092906711035994e+02,
    -8.12874355063065934246e+01,
    -9.81432934416914548592e+00,
];
const SA: [f64; 9] = [
    1.0,
    1.96512716674392571292e+01,
    1.37657754143519042600e+02,
    4.34565877475229228821e+02,
    6.45387271733267880336e+02,
    4.29008140027567833386e+02,
    1.08635005541779435134e+02,
    6.57024977031928170135e+00,
    -6.04244152148580987438e-02,
];

/// The same form on [1/0.35, 6).
const RB: [f64; 7] = [
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e+01,
    -1.60636384855821916062e+02,
    -6.37566443368389627722e+02,
    -1.02509513161107724954e+03,
    -4.83519191608651397019e+02,
];
const SB: [f64; 8] = [
    1.0,
    3.03380607434824582924e+01,
    3.25792512996573918826e+02,
    1.53672958608443695994e+03,
    3.19985821950859553908e+03,
    2.55305040643316442583e+03,
    4.74528541206955367215e+02,
    -2.24409524465858183362e+01,
];

/// The polynomial with coefficients `c` (constant term first) at `x`, by Horner's rule.
fn poly(c: &[f64], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &k| acc * x + k)
}

/// The error function in f64 (under 1 ulp of error).
pub(crate) fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let magnitude = if a < 0.84375 {
        if a < 1.0 / (1u64 << 28) as f64 {
            // Below 2^-28 the quadratic term is lost: erf(a) = a * 2/sqrt(pi).
            a + EFX * a
        } else {
            let z = a * a;
            a + a * (poly(&PP, z) / poly(&QQ, z))
        }
    } else if a < 1.25 {
        let s = a - 1.0;
        ERX + poly(&PA, s) / poly(&QA, s)
    } else if a < 6.0 {
        let s = 1.0 / (a * a);
        let (r, q) = if a < 1.0 / 0.35 {
            (poly(&RA, s), poly(&SA, s))
        } else {
            (poly(&RB, s), poly(&SB, s))
        };
        // `z` is `a` with the low 32 bits cleared, so `z * z` is exact and
        // exp(-a^2) is computed as exp(-z^2) * exp((z - a)(z + a)).
        let z = f64::from_bits(a.to_bits() & 0xffff_ffff_0000_0000);
        let e = (-z * z - 0.5625).exp() * ((z - a) * (z + a) + r / q).exp();
        1.0 - e / a
    } else {
        1.0
    };
    magnitude.copysign(x)
}

/// The error function in f32: evaluated in f64 and rounded once.
pub(crate) fn erf_f32(x: f32) -> f32 {
    erf_f64(x as f64) as f32
}
