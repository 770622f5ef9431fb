//! Scans: `cumsum`, `cumprod`, `cummax`, `cummin` and `logcumsumexp`
//! along one axis.
//!
//! A scan is a node of its own (`Op::Scan`). Fusion treats it like a
//! reduction over its axis whose result keeps the full shape: the work
//! before it and after it (`cumsum(x * w) / n`) runs in the same kernel.
//! A grid point walks its lines along the axis tile by tile, in order,
//! carrying the combination of the tiles before into the next tile's scan,
//! so every line is one pass over its elements whatever its length, and
//! the combination order is fixed: results are the same run after run.
//! On the GPU a tile is scanned through shared memory in a fixed tree
//! order, so float sums round as a tree, not as a sequential sum.

use super::Tensor;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::Op;
use crate::ops::ScanOp;

impl Tensor {
    fn scan_as(&self, name: &'static str, op: ScanOp, axis: isize) -> Result<Tensor> {
        if self.rank() == 0 {
            return Err(Error::AxisOutOfRange {
                op: name,
                axis,
                shape: vec![],
            });
        }
        let ax = self.shape().axis(name, axis)?;
        if op == ScanOp::LogSumExp && !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op: name,
                dtype: self.dtype(),
                reason: "logcumsumexp takes floats",
            });
        }
        // Sums and products of integers and bools are i64, as in PyTorch;
        // a maximum or minimum keeps the dtype (bools as u8, back to bool).
        let dtype = match (op, self.dtype()) {
            (ScanOp::Sum | ScanOp::Prod, d) if !d.is_float() => DType::I64,
            (_, DType::Bool) => DType::U8,
            (_, d) => d,
        };
        let x = self.cast_to(dtype);
        let y = Tensor::record(
            Op::Scan { op, axis: ax },
            &[&x],
            self.shape().clone(),
            dtype,
            self.device(),
        );
        Ok(if self.dtype() == DType::Bool && dtype == DType::U8 {
            y.cast_to(DType::Bool)
        } else {
            y
        })
    }

    super::fallible! {
        /// Cumulative sums along `axis` (negative counts from the end):
        /// element `i` along the axis is the sum of elements `0..=i`.
        /// Integers and bools sum in i64 (the result's dtype), floats in
        /// their own dtype (f16 and bf16 in f32, rounded once per element).
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]);
        /// assert_eq!(x.cumsum(1).to_vec::<i64>()?, vec![1, 3, 6, 4, 9, 15]);
        /// assert_eq!(x.cumsum(0).to_vec::<i64>()?, vec![1, 2, 3, 5, 7, 9]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn cumsum / try_cumsum(&self, axis: isize) -> Tensor {
            self.scan_as("cumsum", ScanOp::Sum, axis)
        }

        /// Cumulative products along `axis`, with [`Tensor::cumsum`]'s dtypes.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
        /// assert_eq!(x.cumprod(0).to_vec::<f32>()?, vec![1.0, 2.0, 6.0, 24.0]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn cumprod / try_cumprod(&self, axis: isize) -> Tensor {
            self.scan_as("cumprod", ScanOp::Prod, axis)
        }

        /// Running maxima along `axis` (NaN propagates), in `self`'s dtype:
        /// the values of PyTorch's `cummax` (not its indices).
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![3i64, 1, 4, 1, 5], &[5]);
        /// assert_eq!(x.cummax(0).to_vec::<i64>()?, vec![3, 3, 4, 4, 5]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn cummax / try_cummax(&self, axis: isize) -> Tensor {
            self.scan_as("cummax", ScanOp::Max, axis)
        }

        /// Running minima along `axis` (NaN propagates), in `self`'s dtype.
        pub fn cummin / try_cummin(&self, axis: isize) -> Tensor {
            self.scan_as("cummin", ScanOp::Min, axis)
        }

        /// `log(cumsum(exp(x)))` along `axis` without overflow or
        /// underflow (elements combined pairwise as `max + log(1 +
        /// exp(-|a - b|))`), for float dtypes; f16 and bf16 in f32.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![0.0f64, 0.0, -1000.0, 1000.0], &[4]);
        /// let y = x.logcumsumexp(0).to_vec::<f64>()?;
        /// assert!((y[1] - 2f64.ln()).abs() < 1e-12 && y[3] == 1000.0);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        pub fn logcumsumexp / try_logcumsumexp(&self, axis: isize) -> Tensor {
            self.scan_as("logcumsumexp", ScanOp::LogSumExp, axis)
        }
    }
}
