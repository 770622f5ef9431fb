//! Compositions written from the other ops, not special kernels: fusion
//! turns each into the kernels it needs. The softmax family subtracts the
//! maximum first so large inputs do not overflow.

use super::ops::float_dtype;
use super::{fallible, Tensor};
use crate::error::Result;

impl Tensor {
    /// This tensor in a float dtype (f32 for integers and bools).
    fn as_float(&self) -> Tensor {
        self.cast_to(float_dtype(self.dtype()))
    }

    /// The maximum over `axes` (kept), with infinite maxima replaced by 0 so
    /// that subtracting it never makes NaN from infinities.
    fn finite_max(&self, op: &'static str, axes: &[isize]) -> Result<Tensor> {
        let m = self.try_max(axes, true).map_err(|e| rename(e, op))?;
        let inf = m.abs().try_eq(&m.scalar_like(f64::INFINITY))?;
        Tensor::try_where(&inf, &m.scalar_like(0.0), &m)
    }

    /// `x` times the optional `weight` plus the optional `bias`, both
    /// broadcast against `x`.
    fn affine(x: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = match weight {
            Some(w) => x.try_mul(w)?,
            None => x,
        };
        match bias {
            Some(b) => x.try_add(b),
            None => Ok(x),
        }
    }

    fallible! {
        /// `exp(x - max) / sum(exp(x - max))` along `axis`.
        pub fn softmax / try_softmax(&self, axis: isize) -> Tensor {
            let x = self.as_float();
            let m = x.finite_max("softmax", &[axis])?;
            let e = x.try_sub(&m)?.exp();
            e.try_div(&e.try_sum(&[axis], true)?)
        }
        /// `x - logsumexp(x)` along `axis`, computed as
        /// `(x - max) - log(sum(exp(x - max)))` so no precision is lost to
        /// adding the maximum back.
        pub fn log_softmax / try_log_softmax(&self, axis: isize) -> Tensor {
            let x = self.as_float();
            let d = x.try_sub(&x.finite_max("log_softmax", &[axis])?)?;
            d.try_sub(&d.exp().try_sum(&[axis], true)?.log())
        }
        /// `log(sum(exp(x)))` over `axes`, computed as `m + log(sum(exp(x - m)))`
        /// with `m` the maximum (infinite maxima give the infinite result).
        pub fn logsumexp / try_logsumexp(&self, axes: &[isize], keepdim: bool) -> Tensor {
            let x = self.as_float();
            let m = x.finite_max("logsumexp", axes)?;
            let s = x.try_sub(&m)?.exp().try_sum(axes, true)?.log().try_add(&m)?;
            if keepdim { Ok(s) } else { s.drop_axes("logsumexp", axes) }
        }
        /// Layer normalisation over the last axis: `(x - mean) / sqrt(var + eps)`
        /// with the biased variance, times `weight` plus `bias` when given.
        pub fn layer_norm / try_layer_norm(
            &self, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64,
        ) -> Tensor {
            let x = self.as_float();
            let mean = x.try_mean(&[-1], true).map_err(|e| rename(e, "layer_norm"))?;
            let var = x.try_var_with_correction(&[-1], true, 0)?;
            let norm = x.try_sub(&mean)?.try_mul(&(&var + eps).rsqrt())?;
            Tensor::affine(norm, weight, bias)
        }
        /// RMS normalisation over the last axis: `x / sqrt(mean(x^2) + eps)`,
        /// times `weight` when given.
        pub fn rms_norm / try_rms_norm(&self, weight: Option<&Tensor>, eps: f64) -> Tensor {
            let x = self.as_float();
            let ms = x.try_mul(&x)?.try_mean(&[-1], true).map_err(|e| rename(e, "rms_norm"))?;
            Tensor::affine(x.try_mul(&(&ms + eps).rsqrt())?, weight, None)
        }
    }
}

/// The error `e` reported as coming from the composed op `op`.
fn rename(e: crate::error::Error, op: &'static str) -> crate::error::Error {
    use crate::error::Error::*;
    match e {
        AxisOutOfRange { axis, shape, .. } => AxisOutOfRange { op, axis, shape },
        InvalidShape { shape, arg, reason, .. } => InvalidShape { op, shape, arg, reason },
        e => e,
    }
}
