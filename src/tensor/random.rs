//! Tensors made from generated values: `arange`, seeded `rand` and `randn`,
//! and the random ops `bernoulli` and `dropout`.
//!
//! `rand` is a node of the graph (`Op::Random`): each element is computed
//! from its position and the seed by Philox-4x32-10 ([`crate::philox`])
//! inside the kernels that consume it, so a dropout mask or a Monte Carlo
//! draw is never materialised, and a seed gives the same bits on the CPU
//! and on a GPU. The seed is a launch argument: a new seed compiles
//! nothing. `randn` and `arange` are materialised when created (data
//! nodes like `from_vec`).

use super::{or_panic, Tensor};
use crate::dtype::{DType, Element, Scalar};
use crate::error::{Error, Result};
use crate::graph::Op;
use crate::shape::{Shape, MAX_NUMEL};
use crate::storage::HostBuffer;

/// SplitMix64: a small, fast generator whose stream is fixed by its seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in `[0, 1)` on a grid of `2^-bits`.
    fn uniform(&mut self, bits: u32) -> f64 {
        (self.next_u64() >> (64 - bits)) as f64 / (1u64 << bits) as f64
    }
}

/// Checks that a generator makes floats.
fn require_float(op: &'static str, dtype: DType) -> Result<()> {
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            op,
            dtype,
            reason: "random values need a float dtype",
        });
    }
    Ok(())
}

/// A buffer of `shape`'s size filled by `value(i)`, as a tensor; a shape no
/// tensor can have, or a buffer that does not fit in memory, is an error
/// naming `op`.
fn generate(op: &'static str, shape: &[usize], dtype: DType, mut value: impl FnMut(usize) -> Scalar) -> Result<Tensor> {
    let shape = Shape::try_new(op, shape)?;
    let mut buf = HostBuffer::try_zeros_for(op, shape.dims(), dtype)?;
    for i in 0..buf.len() {
        buf.set(i, value(i));
    }
    Ok(Tensor::from_buffer(buf, shape))
}

/// An [`Error::InvalidShape`] of `arange(start, end, step)` for `reason`.
fn bad_arange(start: Scalar, end: Scalar, step: Scalar, reason: &str) -> Error {
    Error::InvalidShape {
        op: "arange",
        shape: Default::default(),
        arg: vec![],
        reason: format!("start {start}, end {end}, step {step}: {reason}"),
    }
}

/// The length of `arange(start, end, step)` (whose dtype is not bool), or
/// an error naming the arguments: a step of zero, an argument that is not
/// finite, or more elements than a tensor can hold.
fn arange_len(start: Scalar, end: Scalar, step: Scalar) -> Result<usize> {
    let bad = |reason: &str| bad_arange(start, end, step, reason);
    let too_long = |count: String| {
        bad(&format!(
            "{count} elements are more than a tensor can hold ({MAX_NUMEL})"
        ))
    };
    match (start, end, step) {
        (Scalar::Int(s, _), Scalar::Int(e, _), Scalar::Int(st, _)) => {
            if st == 0 {
                return Err(bad("the step must not be zero"));
            }
            // Every operand has at most 64 bits, so this is exact in i128.
            let count = ((e - s + st - st.signum()) / st).max(0);
            usize::try_from(count)
                .ok()
                .filter(|&n| n <= MAX_NUMEL)
                .ok_or_else(|| too_long(count.to_string()))
        }
        _ => {
            let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
            if !(s.is_finite() && e.is_finite()) {
                return Err(bad("the start and the end must be finite"));
            }
            if st == 0.0 || !st.is_finite() {
                return Err(bad("the step must be finite and not zero"));
            }
            // Infinite (and so too long) when `e - s` overflows.
            let count = ((e - s) / st).ceil().max(0.0);
            if count >= MAX_NUMEL as f64 {
                return Err(too_long(format!("{count:e}")));
            }
            Ok(count as usize)
        }
    }
}

impl Tensor {
    /// Values uniform in `[0, 1)` on the grid of `dtype`'s significand
    /// (so never 1 after rounding), the same bits for the same `seed` on
    /// every device: element `i` (row-major) is a function of `i` and
    /// `seed` alone ([`crate::philox::uniform`]), generated inside the
    /// kernels that read it.
    ///
    /// ```
    /// use tilefuse::{DType, Tensor};
    /// let u = Tensor::rand(&[1000], DType::F32, 7);
    /// let v = u.to_vec::<f32>()?;
    /// assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
    /// assert_eq!(v, Tensor::rand(&[1000], DType::F32, 7).to_vec::<f32>()?);
    /// // The first 10 of 20 elements are the 10 elements of the smaller tensor.
    /// let w = Tensor::rand(&[20], DType::F32, 7).to_vec::<f32>()?;
    /// assert_eq!(&w[..10], &v[..10]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_rand`] returns.
    #[track_caller]
    pub fn rand(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
        or_panic(Tensor::try_rand(shape, dtype, seed))
    }

    /// [`Tensor::rand`], returning misuse as an `Err` instead of panicking:
    /// [`Error::UnsupportedDType`] if `dtype` is not a float dtype,
    /// [`Error::RankTooLarge`] or [`Error::ShapeTooLarge`] for a shape no
    /// tensor can have. (Values that do not fit in memory are an error of
    /// the realization that would store them.)
    pub fn try_rand(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
        require_float("rand", dtype)?;
        let shape = Shape::try_new("rand", shape)?;
        // The seed's bits as an i64 argument.
        let key = Tensor::constant(
            Shape::scalar(),
            Scalar::Int(seed as i64 as i128, DType::I64),
            DType::I64,
        );
        Ok(Tensor::record(Op::Random, &[&key], shape, dtype, key.device()))
    }

    super::fallible! {
        /// Ones where a uniform draw falls below this tensor's element (a
        /// probability), zeros elsewhere, in this tensor's float dtype:
        /// PyTorch's `bernoulli`, drawn from `Tensor::rand(self.dims(),
        /// self.dtype(), seed)` inside the kernel that reads it.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let p = Tensor::full(&[10_000], 0.25f32);
        /// let hits: f32 = p.bernoulli(3).sum_all().to_scalar()?;
        /// assert!((hits - 2500.0).abs() < 200.0);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn bernoulli / try_bernoulli(&self, seed: u64) -> Tensor {
            if !self.dtype().is_float() {
                return Err(Error::UnsupportedDType {
                    op: "bernoulli",
                    dtype: self.dtype(),
                    reason: "probabilities are floats",
                });
            }
            let u = Tensor::try_rand(self.dims(), self.dtype(), seed)?.to(self.device());
            Ok(u.try_lt(self)?.cast_to(self.dtype()))
        }

        /// Inverted dropout: each element kept with probability `1 - p`
        /// and scaled by `1 / (1 - p)`, zeroed otherwise, the mask drawn
        /// from `Tensor::rand(self.dims(), self.dtype(), seed)` inside the
        /// kernel (never stored). `p` must lie in `[0, 1]`; float dtypes.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::full(&[8], 2.0f32);
        /// let y = x.dropout(0.5, 11).to_vec::<f32>()?;
        /// assert!(y.iter().all(|&v| v == 0.0 || v == 4.0));
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn dropout / try_dropout(&self, p: f64, seed: u64) -> Tensor {
            if !self.dtype().is_float() {
                return Err(Error::UnsupportedDType {
                    op: "dropout",
                    dtype: self.dtype(),
                    reason: "dropout takes floats",
                });
            }
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::InvalidShape {
                    op: "dropout",
                    shape: crate::error::dims(self.dims()),
                    arg: vec![],
                    reason: format!("the probability {p} is not in [0, 1]"),
                });
            }
            if p == 1.0 {
                return Ok(Tensor::try_zeros(self.dims(), self.dtype())?.to(self.device()));
            }
            let u = Tensor::try_rand(self.dims(), self.dtype(), seed)?.to(self.device());
            let keep = u.try_ge(&u.scalar_like(p))?;
            let scaled = self.try_mul(&self.scalar_like(1.0 / (1.0 - p)))?;
            Tensor::try_where_scalar(&keep, &scaled, 0.0)
        }
    }

    /// Standard normal values (Box-Muller), the same for the same `seed`.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_randn`] returns.
    #[track_caller]
    pub fn randn(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
        or_panic(Tensor::try_randn(shape, dtype, seed))
    }

    /// [`Tensor::randn`], returning misuse as an `Err` instead of panicking:
    /// [`Error::UnsupportedDType`] if `dtype` is not a float dtype,
    /// [`Error::RankTooLarge`] or [`Error::ShapeTooLarge`] for a shape no
    /// tensor can have, [`Error::HostOutOfMemory`] if the values do not fit
    /// in memory.
    pub fn try_randn(shape: &[usize], dtype: DType, seed: u64) -> Result<Tensor> {
        require_float("randn", dtype)?;
        let mut rng = SplitMix64(seed);
        let mut spare = None;
        generate("randn", shape, dtype, |_| {
            let z = spare.take().unwrap_or_else(|| {
                let u1 = 1.0 - rng.uniform(53);
                let u2 = rng.uniform(53);
                let r = (-2.0 * u1.ln()).sqrt();
                let t = std::f64::consts::TAU * u2;
                spare = Some(r * t.sin());
                r * t.cos()
            });
            Scalar::Float(z, DType::F64)
        })
    }

    /// The values `start, start + step, ...` below `end` (above it for a
    /// negative step), as a rank-1 tensor of `E`'s dtype.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// assert_eq!(Tensor::arange(0i32, 5, 2).to_vec::<i32>().unwrap(), vec![0, 2, 4]);
    /// ```
    ///
    /// # Panics
    /// If `step` is zero, an argument is not finite, the values are more
    /// than a tensor can hold or do not fit in memory, or `E` is `bool`.
    #[track_caller]
    pub fn arange<E: Element>(start: E, end: E, step: E) -> Tensor {
        or_panic(Tensor::try_arange(start, end, step))
    }

    /// [`Tensor::arange`], returning misuse as an `Err` instead of
    /// panicking: [`Error::UnsupportedDType`] for bool,
    /// [`Error::InvalidShape`] naming the arguments for a step of zero, an
    /// argument that is not finite (NaN or infinite) or more values than a
    /// tensor can hold ([`crate::shape::MAX_NUMEL`]), and
    /// [`Error::HostOutOfMemory`] if they do not fit in memory.
    pub fn try_arange<E: Element>(start: E, end: E, step: E) -> Result<Tensor> {
        let dtype = E::DTYPE;
        if dtype == DType::Bool {
            return Err(Error::UnsupportedDType {
                op: "arange",
                dtype,
                reason: "needs a number type",
            });
        }
        let (s, e, st) = (start.to_scalar(), end.to_scalar(), step.to_scalar());
        let len = arange_len(s, e, st)?;
        generate("arange", &[len], dtype, |i| match (s, st) {
            (Scalar::Int(s, d), Scalar::Int(st, _)) => Scalar::Int(s + st * i as i128, d),
            _ => Scalar::Float(s.to_f64() + st.to_f64() * i as f64, DType::F64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn splitmix_matches_its_published_stream() {
        // The first outputs for seed 1234567 from the reference implementation.
        let mut g = SplitMix64(1234567);
        assert_eq!(g.next_u64(), 6457827717110365317);
        assert_eq!(g.next_u64(), 3203168211198807973);
    }
}
