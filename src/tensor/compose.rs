//! Compositions written from the other ops, not special kernels: fusion
//! turns each into the kernels it needs. The softmax family subtracts the
//! maximum first so large inputs do not overflow.
//!
//! # Dtypes
//!
//! Every composition computes as [`Tensor::mean`] does. It needs a float
//! input: integer and bool tensors are refused with [`Error::NeedsFloat`]
//! (PyTorch refuses them for all of these but `logsumexp`, which it computes
//! in its default float dtype; here `logsumexp` refuses them too, so that
//! the family agrees and the caller chooses the float dtype). An f16 or bf16
//! input is cast to f32 first (fusion folds the cast into the kernel's
//! load), every intermediate (the maximum, the exponentials and their sum,
//! the mean, the variance, `eps`, the weight and the bias) is f32, and the
//! result is rounded once, at the end, to the output dtype. f32 and f64
//! inputs compute in their own dtype. The output dtype is the input's, or
//! for the norms the promotion of the input's, the weight's and the bias's.
//!
//! # Errors
//!
//! A composition reports misuse under its own name and the shapes the caller
//! gave, never under the name of an op it is written with: the weight and
//! bias of the norms are checked first (they must have the shape `[n]` of
//! the normalized last axis, as PyTorch's `normalized_shape`, and live on
//! the input's device), and any other error of an inner op is renamed
//! ([`Error::with_op`]).

use super::{fallible, Tensor};
use crate::dtype::DType;
use crate::error::{dims, Error, Result};

impl Tensor {
    /// `f` applied to this tensor in its accumulator dtype, the result
    /// rounded once to `out`, with every error reported as coming from `op`.
    fn composed(&self, op: &'static str, out: DType, f: impl FnOnce(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
        let x = self.statistic_input(op)?;
        f(&x).map(|y| y.cast_to(out)).map_err(|e| e.with_op(op))
    }

    /// The maximum over `axes` (kept), the shift of the softmax family, with
    /// `-inf` maxima (and `+inf` ones too when `shift_positive` is false)
    /// replaced by 0 so that subtracting it makes no NaN from them. Over an
    /// empty axis it is 0 (nothing is selected, and nothing is shifted by
    /// it), so a softmax along an empty axis is empty and a `logsumexp` over
    /// one is `-inf`, as in PyTorch. As in PyTorch too, a row of softmax or
    /// log_softmax holding `+inf` is NaN (it is shifted by `+inf`), a row of
    /// only `-inf` is NaN (0 / 0), and the logsumexp of a row holding `+inf`
    /// is `+inf`.
    fn finite_max(&self, op: &'static str, axes: &[isize], shift_positive: bool) -> Result<Tensor> {
        let resolved = self.reduced_axes(op, axes)?;
        if resolved.iter().any(|&a| self.dims()[a] == 0) {
            let zeros = Tensor::zeros(&self.kept_dims(&resolved), self.dtype());
            return Ok(zeros.to(self.device()));
        }
        let m = self.try_max(axes, true)?;
        let inf = if shift_positive {
            m.try_eq(&m.scalar_like(f64::NEG_INFINITY))?
        } else {
            m.abs().try_eq(&m.scalar_like(f64::INFINITY))?
        };
        Tensor::try_where(&inf, &m.scalar_like(0.0), &m)
    }

    /// Checks the `weight` and `bias` of a norm over the last axis of this
    /// tensor: each must have the shape `[n]` of that axis and live on this
    /// tensor's device.
    fn check_affine(&self, op: &'static str, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<()> {
        let axis = self.shape().axis(op, -1)?;
        let n = self.dims()[axis];
        for (what, t) in [("weight", weight), ("bias", bias)] {
            let Some(t) = t else { continue };
            if t.dims() != [n] {
                return Err(Error::InvalidShape {
                    op,
                    shape: dims(self.dims()),
                    arg: t.dims().iter().map(|&d| d as isize).collect(),
                    reason: format!("the {what} must have shape [{n}], the length of the normalized last axis"),
                });
            }
            self.check_device(op, t)?;
        }
        Ok(())
    }

    /// The output dtype of a norm of this tensor: the promotion of its dtype
    /// with the `weight`'s and the `bias`'s.
    fn affine_dtype(&self, weight: Option<&Tensor>, bias: Option<&Tensor>) -> DType {
        [weight, bias]
            .into_iter()
            .flatten()
            .fold(self.dtype(), |d, t| d.promote(t.dtype()))
    }

    /// `x` times the optional `weight` plus the optional `bias`, each
    /// broadcast to `x`'s shape before it is promoted with `x` (see
    /// [`Tensor::affine_operand`]).
    fn affine(x: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = match weight {
            Some(w) => x.try_mul(&x.affine_operand(w)?)?,
            None => x,
        };
        match bias {
            Some(b) => x.try_add(&x.affine_operand(b)?),
            None => Ok(x),
        }
    }

    /// A weight or bias `t` broadcast to this tensor's shape and then cast
    /// to the promotion of the two dtypes, so that a half weight is used in
    /// the f32 of a half input's norm; for operands of one dtype this is
    /// the graph `mul` and `add` record.
    fn affine_operand(&self, t: &Tensor) -> Result<Tensor> {
        let common = self.dtype().promote(t.dtype());
        Ok(t.broadcast_as("affine", self.shape())?.cast_to(common))
    }

    fallible! {
        /// `exp(x - max) / sum(exp(x - max))` along `axis`, computed in f32
        /// for f16 and bf16 and rounded once (see the module docs); integers
        /// and bools are refused.
        pub fn softmax / try_softmax(&self, axis: isize) -> Tensor {
            self.composed("softmax", self.dtype(), |x| {
                let m = x.finite_max("softmax", &[axis], true)?;
                let e = x.try_sub(&m)?.exp();
                e.try_div(&e.try_sum(&[axis], true)?)
            })
        }
        /// `x - logsumexp(x)` along `axis`, computed as
        /// `(x - max) - log(sum(exp(x - max)))` so no precision is lost to
        /// adding the maximum back; in f32 for f16 and bf16 and rounded once
        /// (see the module docs); integers and bools are refused.
        pub fn log_softmax / try_log_softmax(&self, axis: isize) -> Tensor {
            self.composed("log_softmax", self.dtype(), |x| {
                let d = x.try_sub(&x.finite_max("log_softmax", &[axis], true)?)?;
                d.try_sub(&d.exp().try_sum(&[axis], true)?.log())
            })
        }
        /// `log(sum(exp(x)))` over `axes`, computed as `m + log(sum(exp(x - m)))`
        /// with `m` the maximum (infinite maxima give the infinite result, an
        /// empty axis `-inf`); in f32 for f16 and bf16 and rounded once (see
        /// the module docs); integers and bools are refused.
        pub fn logsumexp / try_logsumexp(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.composed("logsumexp", self.dtype(), |x| {
                let m = x.finite_max("logsumexp", axes, false)?;
                let s = x.try_sub(&m)?.exp().try_sum(axes, true)?.log().try_add(&m)?;
                if keepdim { Ok(s) } else { s.drop_axes("logsumexp", axes) }
            })
        }
        /// Layer normalisation over the last axis: `(x - mean) / sqrt(var + eps)`
        /// with the biased variance, times `weight` plus `bias` when given
        /// (each of shape `[n]`, the length of the last axis). Computed in
        /// f32 for f16 and bf16 inputs, the weight and bias included, and
        /// rounded once to the promotion of the three dtypes (see the module
        /// docs); integers and bools are refused.
        pub fn layer_norm / try_layer_norm(
            &self, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64,
        ) -> Tensor {
            self.check_affine("layer_norm", weight, bias)?;
            self.composed("layer_norm", self.affine_dtype(weight, bias), |x| {
                let mean = x.mean_of("layer_norm", &[-1], true)?;
                let var = x.variance_of("layer_norm", &[-1], true, 0)?;
                let norm = x.try_sub(&mean)?.try_mul(&(&var + eps).rsqrt())?;
                Tensor::affine(norm, weight, bias)
            })
        }
        /// RMS normalisation over the last axis: `x / sqrt(mean(x^2) + eps)`,
        /// times `weight` when given (of shape `[n]`, the length of the last
        /// axis). Computed in f32 for f16 and bf16 inputs, the weight
        /// included, and rounded once to the promotion of the two dtypes (see
        /// the module docs); integers and bools are refused.
        pub fn rms_norm / try_rms_norm(&self, weight: Option<&Tensor>, eps: f64) -> Tensor {
            self.check_affine("rms_norm", weight, None)?;
            self.composed("rms_norm", self.affine_dtype(weight, None), |x| {
                let ms = x.try_mul(x)?.mean_of("rms_norm", &[-1], true)?;
                Tensor::affine(x.try_mul(&(&ms + eps).rsqrt())?, weight, None)
            })
        }
    }
}
