//! Philox-4x32-10, the counter-based generator of random tensors.
//!
//! Element `i` of a random tensor with seed `s` is a function of `(i, s)`
//! alone: the four 32-bit words of Philox-4x32-10 (Salmon et al., SC'11)
//! with counter `(lo(i), hi(i), 0, 0)` and key `(lo(s), hi(s))`. Every
//! back end computes the same integer rounds, so a seed gives the same
//! bits on the CPU executor, on a GPU and in the reference evaluator, and
//! kernels generate the values they consume instead of reading them.

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// The multipliers and key increments of the rounds, for code generators.
pub const CONSTANTS: [u32; 4] = [M0, M1, W0, W1];

/// The four words of Philox-4x32-10 for counter `counter` (its low and
/// high halves the first two words, the others zero) and key `key`.
pub fn philox(counter: u64, key: u64) -> [u32; 4] {
    let mut c = [counter as u32, (counter >> 32) as u32, 0, 0];
    let mut k = [key as u32, (key >> 32) as u32];
    for round in 0..10 {
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        if round < 9 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
    }
    c
}

/// The significand bits of float `dtype` (0 for other dtypes): the grid
/// of its uniform values.
pub fn significand_bits(dtype: crate::dtype::DType) -> u32 {
    use crate::dtype::DType;
    match dtype {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        DType::F64 => 53,
        _ => 0,
    }
}

/// A uniform value in `[0, 1)` on the grid `2^-bits` from the words of
/// element `counter` (`bits` at most 24 uses the first word, up to 53 the
/// first two): exact in any float with `bits` significand bits, so it
/// never rounds up to 1.
pub fn uniform(counter: u64, key: u64, bits: u32) -> f64 {
    let w = philox(counter, key);
    if bits <= 24 {
        f64::from(w[0] >> (32 - bits)) * (-(bits as f64)).exp2()
    } else {
        let v = (u64::from(w[0]) << 21 | u64::from(w[1] >> 11)) >> (53 - bits.min(53));
        v as f64 * (-(bits.min(53) as f64)).exp2()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known-answer vectors of the Random123 distribution for
    /// Philox-4x32-10 with a counter whose upper words are zero.
    #[test]
    fn known_answers() {
        assert_eq!(philox(0, 0), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
    }

    #[test]
    fn uniforms_stay_below_one_on_their_grid() {
        for i in 0..10_000u64 {
            for bits in [8, 11, 24, 53] {
                let u = uniform(i, 42, bits);
                assert!((0.0..1.0).contains(&u));
                let scaled = u * (bits as f64).exp2();
                assert_eq!(scaled, scaled.floor());
            }
        }
    }
}
