//! Reductions over axes.
//!
//! A reduction is recorded as a `Reduce` node that keeps each reduced axis
//! with length 1; `keepdim = false` adds a `Reshape` that drops them. Axes
//! may be negative; an empty axis list reduces nothing.
//!
//! Dtypes follow PyTorch: `sum` and `prod` of integers or bools give i64
//! (the input is cast first), of floats keep the float dtype (f16 and bf16
//! accumulate in f32 inside the kernel and round once); `max` and `min` keep
//! the dtype; `argmax` and `argmin` give i64. `max`, `min`, `argmax` and
//! `argmin` over an empty axis are misuse; `sum` and `prod` of nothing are 0
//! and 1, and the `mean` of nothing is NaN.
//!
//! # Statistics
//!
//! `mean` and `var` need a float input: integers and bools are refused with
//! [`Error::NeedsFloat`] (as PyTorch refuses them), so the caller chooses the
//! float dtype. They compute in the *accumulator dtype*: an f16 or bf16
//! input is cast to f32 first (a cast that fusion folds into the kernel's
//! load), the sum, the scale by `1 / n`, the deviations and the second
//! moment are all f32, and the result is rounded once to the input's
//! dtype, as PyTorch computes them. So the bf16 mean of 300 ones is exactly
//! 1 and their variance exactly 0, where scaling a bf16 sum by a bf16
//! `1 / 300` would give 0.99609375. f32 and f64 inputs compute in their own
//! dtype.

use super::{fallible, Tensor};
use crate::dtype::DType;
use crate::error::{dims, Error, Result};
use crate::graph::{Axes, Op};
use crate::ops::ReduceOp;
use crate::shape::Shape;

/// The dtype the float statistics of a `d` tensor (`mean`, `var`, and the
/// compositions of `compose.rs`) are computed in: f32 for f16, bf16 and
/// f32, f64 for f64. Only float dtypes have one.
fn accumulator_dtype(d: DType) -> DType {
    debug_assert!(d.is_float(), "{d} has no accumulator dtype");
    match d {
        DType::F64 => DType::F64,
        _ => DType::F32,
    }
}

impl Tensor {
    /// The distinct axes of `axes`, resolved and ascending.
    pub(crate) fn reduced_axes(&self, op: &'static str, axes: &[isize]) -> Result<Axes> {
        let mut out = Axes::new();
        for &a in axes {
            let ax = self.shape().axis(op, a)?;
            if out.contains(&ax) {
                return Err(Error::InvalidShape {
                    op,
                    shape: dims(self.dims()),
                    arg: axes.to_vec(),
                    reason: format!("axis {ax} is given twice"),
                });
            }
            out.push(ax);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Every axis, for the `_all` reductions.
    fn all_axes(&self) -> Vec<isize> {
        (0..self.rank() as isize).collect()
    }

    /// The number of elements each output of a reduction over `axes` combines.
    fn reduced_count(&self, axes: &[usize]) -> usize {
        axes.iter().map(|&a| self.dims()[a]).product()
    }

    /// The shape of a reduction over the resolved `axes` with `keepdim`:
    /// this shape with each of them of length 1.
    pub(crate) fn kept_dims(&self, axes: &[usize]) -> Vec<usize> {
        (0..self.rank())
            .map(|i| if axes.contains(&i) { 1 } else { self.dims()[i] })
            .collect()
    }

    /// The row-major index of the first element `op` selects, over all
    /// elements; an empty tensor is misuse, reported with its own shape.
    fn arg_all(&self, name: &'static str, op: ReduceOp) -> Result<Tensor> {
        if self.numel() == 0 {
            return Err(Error::InvalidShape {
                op: name,
                shape: dims(self.dims()),
                arg: vec![],
                reason: "the tensor is empty, so there is nothing to select".into(),
            });
        }
        self.try_flatten()?.reduce(name, op, &[0], false)
    }

    /// Records `op` over `axes`, then drops the reduced axes unless `keepdim`.
    fn reduce(&self, name: &'static str, op: ReduceOp, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let axes = self.reduced_axes(name, axes)?;
        let selects = matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::ArgMax | ReduceOp::ArgMin);
        if let Some(&empty) = axes.iter().find(|&&a| self.dims()[a] == 0).filter(|_| selects) {
            return Err(Error::InvalidShape {
                op: name,
                shape: dims(self.dims()),
                arg: axes.iter().map(|&a| a as isize).collect(),
                reason: format!("axis {empty} is empty, so there is nothing to select"),
            });
        }
        let d = self.dtype();
        let (input, out) = match op {
            ReduceOp::Sum | ReduceOp::Prod if !d.is_float() => (DType::I64, DType::I64),
            ReduceOp::ArgMax | ReduceOp::ArgMin => (d, DType::I64),
            _ => (d, d),
        };
        let x = self.cast_to(input);
        if axes.is_empty() {
            return Ok(x.cast_to(out));
        }
        let kept = self.kept_dims(&axes);
        let r = Tensor::record(
            Op::Reduce { op, axes: axes.clone() },
            &[&x],
            Shape::new(&kept),
            out,
            self.device(),
        );
        if keepdim {
            return Ok(r);
        }
        r.drop_axes(name, &axes.iter().map(|&a| a as isize).collect::<Vec<_>>())
    }

    /// This tensor without `axes`, each of which must have length 1.
    pub(crate) fn drop_axes(&self, name: &'static str, axes: &[isize]) -> Result<Tensor> {
        let axes = self.reduced_axes(name, axes)?;
        let kept: Vec<usize> = (0..self.rank())
            .filter(|i| !axes.contains(i))
            .map(|i| self.dims()[i])
            .collect();
        self.try_reshape(&kept)
    }

    /// This tensor in the accumulator dtype its statistics are computed in
    /// (see the module docs), or [`Error::NeedsFloat`] naming `op` if it
    /// is an integer or bool tensor.
    pub(crate) fn statistic_input(&self, op: &'static str) -> Result<Tensor> {
        let d = self.dtype();
        if !d.is_float() {
            return Err(Error::NeedsFloat {
                op,
                dtype: d,
                shape: dims(self.dims()),
            });
        }
        Ok(self.cast_to(accumulator_dtype(d)))
    }

    /// The mean over `axes` of a tensor already in its accumulator dtype:
    /// the sum times `1 / n`, both in that dtype.
    pub(crate) fn mean_of(&self, name: &'static str, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let n = self.reduced_count(&self.reduced_axes(name, axes)?);
        let s = self.reduce(name, ReduceOp::Sum, axes, keepdim)?;
        s.try_mul(&s.scalar_like(1.0 / n as f64))
    }

    /// The variance over `axes` with Bessel's `correction` (1 is unbiased) of
    /// a tensor already in its accumulator dtype: the mean, the deviations,
    /// their squares, the sum and the scale by `1 / (n - correction)` are all
    /// in that dtype.
    pub(crate) fn variance_of(
        &self,
        name: &'static str,
        axes: &[isize],
        keepdim: bool,
        correction: usize,
    ) -> Result<Tensor> {
        let n = self.reduced_count(&self.reduced_axes(name, axes)?);
        let mean = self.mean_of(name, axes, true)?;
        let d = self.try_sub(&mean)?;
        let sq = d.try_mul(&d)?.reduce(name, ReduceOp::Sum, axes, keepdim)?;
        let dof = n.saturating_sub(correction) as f64;
        sq.try_mul(&sq.scalar_like(1.0 / dof))
    }

    /// The variance over `axes` in the accumulator dtype, rounded once to
    /// this tensor's dtype.
    fn variance(&self, name: &'static str, axes: &[isize], keepdim: bool, correction: usize) -> Result<Tensor> {
        let x = self.statistic_input(name)?;
        Ok(x.variance_of(name, axes, keepdim, correction)?.cast_to(self.dtype()))
    }

    fallible! {
        /// The sum over `axes`: i64 for integers and bools, the input's dtype
        /// for floats (f16 and bf16 accumulate in f32 and round once).
        pub fn sum / try_sum(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.reduce("sum", ReduceOp::Sum, axes, keepdim)
        }
        /// The sum of all elements, as a rank-0 tensor.
        pub fn sum_all / try_sum_all(&self) -> Tensor { self.try_sum(&self.all_axes(), false) }
        /// The product over `axes`, with the dtypes of [`Tensor::sum`].
        pub fn prod / try_prod(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.reduce("prod", ReduceOp::Prod, axes, keepdim)
        }
        /// The product of all elements, as a rank-0 tensor.
        pub fn prod_all / try_prod_all(&self) -> Tensor { self.try_prod(&self.all_axes(), false) }
        /// The maximum over `axes`, in the input's dtype; NaN if any element is NaN.
        pub fn max / try_max(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.reduce("max", ReduceOp::Max, axes, keepdim)
        }
        /// The maximum of all elements, as a rank-0 tensor.
        pub fn max_all / try_max_all(&self) -> Tensor { self.try_max(&self.all_axes(), false) }
        /// The minimum over `axes`, in the input's dtype; NaN if any element is NaN.
        pub fn min / try_min(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.reduce("min", ReduceOp::Min, axes, keepdim)
        }
        /// The minimum of all elements, as a rank-0 tensor.
        pub fn min_all / try_min_all(&self) -> Tensor { self.try_min(&self.all_axes(), false) }
        /// The index (i64) of the first maximum along `axis`; NaN counts as the maximum.
        pub fn argmax / try_argmax(&self, axis: isize, keepdim: bool) -> Tensor {
            self.reduce("argmax", ReduceOp::ArgMax, &[axis], keepdim)
        }
        /// The row-major index (i64) of the first maximum of all elements.
        pub fn argmax_all / try_argmax_all(&self) -> Tensor {
            self.arg_all("argmax", ReduceOp::ArgMax)
        }
        /// The index (i64) of the first minimum along `axis`; NaN counts as the minimum.
        pub fn argmin / try_argmin(&self, axis: isize, keepdim: bool) -> Tensor {
            self.reduce("argmin", ReduceOp::ArgMin, &[axis], keepdim)
        }
        /// The row-major index (i64) of the first minimum of all elements.
        pub fn argmin_all / try_argmin_all(&self) -> Tensor {
            self.arg_all("argmin", ReduceOp::ArgMin)
        }
        /// The maximum along `axis` and the index (i64) of its first
        /// occurrence, as PyTorch's `torch.max(x, dim)` returns them: the
        /// values of [`Tensor::max`] and the indices of [`Tensor::argmax`]
        /// (NaN counts as the maximum). Realized together
        /// (`Tensor::realize_all(&[&values, &indices])`, or read after
        /// that) they are one kernel, which reads the input once: the
        /// maximum is the value the arg reduction finds.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 7.0, 2.0, 7.0], &[2, 3]);
        /// let (values, indices) = x.max_with_indices(1, false);
        /// Tensor::realize_all(&[&values, &indices])?;
        /// assert_eq!(values.to_vec::<f32>()?, [5.0, 7.0]);
        /// assert_eq!(indices.to_vec::<i64>()?, [1, 0]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn max_with_indices / try_max_with_indices(&self, axis: isize, keepdim: bool) -> (Tensor, Tensor) {
            let values = self.reduce("max_with_indices", ReduceOp::Max, &[axis], keepdim)?;
            let indices = self.reduce("max_with_indices", ReduceOp::ArgMax, &[axis], keepdim)?;
            Ok((values, indices))
        }
        /// The minimum along `axis` and the index (i64) of its first
        /// occurrence (NaN counts as the minimum): [`Tensor::min`] and
        /// [`Tensor::argmin`], one kernel when realized together (see
        /// [`Tensor::max_with_indices`]).
        pub fn min_with_indices / try_min_with_indices(&self, axis: isize, keepdim: bool) -> (Tensor, Tensor) {
            let values = self.reduce("min_with_indices", ReduceOp::Min, &[axis], keepdim)?;
            let indices = self.reduce("min_with_indices", ReduceOp::ArgMin, &[axis], keepdim)?;
            Ok((values, indices))
        }
        /// The mean over `axes`: the sum times `1 / n`, computed in f32 for
        /// f16 and bf16 (in the input's dtype for f32 and f64) and rounded
        /// once to the input's dtype. Integer and bool tensors are refused
        /// ([`Error::NeedsFloat`]); cast them to a float dtype first.
        pub fn mean / try_mean(&self, axes: &[isize], keepdim: bool) -> Tensor {
            let x = self.statistic_input("mean")?;
            Ok(x.mean_of("mean", axes, keepdim)?.cast_to(self.dtype()))
        }
        /// The mean of all elements, as a rank-0 tensor.
        pub fn mean_all / try_mean_all(&self) -> Tensor { self.try_mean(&self.all_axes(), false) }
        /// The unbiased variance over `axes` (divided by `n - 1`, as PyTorch's
        /// default), computed as [`Tensor::mean`] is: in f32 for f16 and bf16,
        /// the mean, the squared deviations and their sum included, rounded
        /// once to the input's dtype; integers and bools are refused.
        pub fn var / try_var(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.variance("var", axes, keepdim, 1)
        }
        /// The variance over `axes` divided by `n - correction` (0 gives the
        /// population variance); infinite or NaN when `n <= correction`.
        /// Dtypes as for [`Tensor::var`].
        pub fn var_with_correction / try_var_with_correction(
            &self, axes: &[isize], keepdim: bool, correction: usize,
        ) -> Tensor {
            self.variance("var", axes, keepdim, correction)
        }
        /// The unbiased variance of all elements, as a rank-0 tensor.
        pub fn var_all / try_var_all(&self) -> Tensor { self.variance("var", &self.all_axes(), false, 1) }
        /// The standard deviation over `axes` with Bessel's `correction` (1
        /// is PyTorch's default, 0 the population's): the square root of
        /// [`Tensor::var_with_correction`], computed in f32 for f16 and bf16
        /// and rounded once; integers and bools are refused.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[2, 2]);
        /// assert_eq!(x.std(&[1], false, 1).to_vec::<f32>()?, vec![2f32.sqrt(), 2f32.sqrt()]);
        /// assert_eq!(x.std(&[0], false, 0).to_vec::<f32>()?, vec![2.0, 2.0]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn std / try_std(&self, axes: &[isize], keepdim: bool, correction: usize) -> Tensor {
            let x = self.statistic_input("std")?;
            Ok(x.variance_of("std", axes, keepdim, correction)?.try_sqrt()?.cast_to(self.dtype()))
        }
        /// Whether any element over `axes` is nonzero (true for bools): a
        /// bool tensor; `false` over an empty axis.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![0i32, 0, 2, 0], &[2, 2]);
        /// assert_eq!(x.any(&[1], false).to_vec::<bool>()?, vec![false, true]);
        /// assert_eq!(x.all(&[0], false).to_vec::<bool>()?, vec![false, false]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn any / try_any(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.truth("any", axes, keepdim, ReduceOp::Sum)
        }
        /// Whether every element over `axes` is nonzero (true for bools): a
        /// bool tensor; `true` over an empty axis.
        pub fn all / try_all(&self, axes: &[isize], keepdim: bool) -> Tensor {
            self.truth("all", axes, keepdim, ReduceOp::Prod)
        }
    }

    /// `any` (`op` a sum of the nonzero flags) or `all` (their product)
    /// over `axes`, as bools. A sum and product of 0/1 flags rather than a
    /// maximum and minimum, so an empty axis gives `false` and `true`.
    fn truth(&self, name: &'static str, axes: &[isize], keepdim: bool, op: ReduceOp) -> Result<Tensor> {
        let zero =
            Tensor::constant(self.shape().clone(), crate::Scalar::Int(0, DType::I32), self.dtype()).to(self.device());
        let flags = self.try_ne(&zero)?.cast_to(DType::I32);
        let r = flags.reduce(name, op, axes, keepdim)?;
        let none = Tensor::constant(r.shape().clone(), crate::Scalar::Int(0, DType::I64), DType::I64).to(r.device());
        r.try_ne(&none)
    }
}
