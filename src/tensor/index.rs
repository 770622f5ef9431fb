//! Indexing by tensors: `gather` and `index_select`.
//!
//! A gather is a node of its own (`Op::Gather`); fusion computes it like an
//! elementwise op over the index's shape, reading the data through an
//! indirect load, so a gather and the work around it (a reduction of its
//! result, the arithmetic it feeds) run in one kernel, and the index is
//! never expanded in memory. The data itself is read from memory: data
//! computed by the same pipeline is written by a kernel before.
//!
//! An index outside its axis is an error of the realization
//! ([`Error::IndexOutOfRange`]), on the CPU and on the GPU alike (where the
//! kernel sets a flag that the runtime reads back); no element outside the
//! axis is ever read.

use super::{or_panic, Tensor};
use crate::dtype::DType;
use crate::error::{dims, Error, Result};
use crate::graph::Op;
use crate::shape::Shape;

/// Checks that `index` holds positions: i64 or i32.
fn index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    match index.dtype() {
        DType::I64 | DType::I32 => Ok(()),
        dtype => Err(Error::UnsupportedDType {
            op,
            dtype,
            reason: "indices are i64 or i32",
        }),
    }
}

impl Tensor {
    /// PyTorch's `gather`: element `p` of the result is the element of
    /// `self` at `p` with coordinate `axis` replaced by `index[p]`. `index`
    /// (i64 or i32) has `self`'s rank and at most its extents off `axis`;
    /// the result has the index's shape and `self`'s dtype.
    ///
    /// An index outside `0..self.dims()[axis]` makes the realization fail
    /// with [`Error::IndexOutOfRange`].
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let logits = Tensor::from_vec(vec![0.1f32, 0.7, 0.2, 0.5, 0.4, 0.1], &[2, 3]);
    /// let labels = Tensor::from_vec(vec![1i64, 0], &[2, 1]);
    /// assert_eq!(logits.gather(1, &labels).to_vec::<f32>()?, vec![0.7, 0.5]);
    /// let bad = Tensor::from_vec(vec![3i64, 0], &[2, 1]);
    /// assert!(logits.gather(1, &bad).to_vec::<f32>().is_err());
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_gather`] returns.
    #[track_caller]
    pub fn gather(&self, axis: isize, index: &Tensor) -> Tensor {
        or_panic(self.try_gather(axis, index))
    }

    /// [`Tensor::gather`], returning misuse as an `Err` instead of
    /// panicking: [`Error::AxisOutOfRange`] for a bad axis,
    /// [`Error::UnsupportedDType`] for an index that is not i64 or i32,
    /// [`Error::InvalidShape`] for an index of another rank or wider than
    /// `self` off `axis`, [`Error::IndexOutOfRange`] at once for a non-empty
    /// index into an empty axis, [`Error::DeviceMismatch`] for tensors on
    /// different devices.
    pub fn try_gather(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        self.gather_as("gather", axis, index, false)
    }

    /// PyTorch's `index_select`: the slices of `self` along `axis` at the
    /// positions of the one-dimensional `index` (i64 or i32), in its order
    /// (repeats allowed). The result has `self`'s shape with `axis`'s
    /// extent replaced by the index's length.
    ///
    /// An index outside `0..self.dims()[axis]` makes the realization fail
    /// with [`Error::IndexOutOfRange`].
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec((0..6).collect::<Vec<i32>>(), &[3, 2]);
    /// let rows = Tensor::from_vec(vec![2i64, 0, 2], &[3]);
    /// assert_eq!(x.index_select(0, &rows).to_vec::<i32>()?, vec![4, 5, 0, 1, 4, 5]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_index_select`] returns.
    #[track_caller]
    pub fn index_select(&self, axis: isize, index: &Tensor) -> Tensor {
        or_panic(self.try_index_select(axis, index))
    }

    /// [`Tensor::index_select`], returning misuse as an `Err` instead of
    /// panicking: [`Error::AxisOutOfRange`] for a bad axis,
    /// [`Error::UnsupportedDType`] for an index that is not i64 or i32,
    /// [`Error::InvalidShape`] for an index of rank above 1,
    /// [`Error::IndexOutOfRange`] at once for a non-empty index into an
    /// empty axis, [`Error::DeviceMismatch`] for tensors on different devices.
    pub fn try_index_select(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        const OP: &str = "index_select";
        index_dtype(OP, index)?;
        let ax = self.shape().axis(OP, axis)?;
        if index.rank() > 1 {
            return Err(Error::InvalidShape {
                op: OP,
                shape: dims(self.dims()),
                arg: index.dims().iter().map(|&d| d as isize).collect(),
                reason: format!("the index must have one axis, not shape {:?}", index.dims()),
            });
        }
        let n = index.numel();
        let mut lifted = vec![1; self.rank()];
        lifted[ax] = n;
        let mut out = self.dims().to_vec();
        out[ax] = n;
        let spread = index.try_reshape(&lifted[..])?.try_expand(&out)?;
        self.gather_as(OP, axis, &spread, true)
    }

    fn gather_as(&self, op: &'static str, axis: isize, index: &Tensor, select: bool) -> Result<Tensor> {
        let device = Tensor::common_device(op, &[self, index])?;
        index_dtype(op, index)?;
        let ax = self.shape().axis(op, axis)?;
        let fits =
            index.rank() == self.rank() && (0..self.rank()).all(|k| k == ax || index.dims()[k] <= self.dims()[k]);
        if !fits {
            return Err(Error::InvalidShape {
                op,
                shape: dims(self.dims()),
                arg: index.dims().iter().map(|&d| d as isize).collect(),
                reason: format!(
                    "the index of shape {:?} must have the input's rank and at most its extents off axis {ax}",
                    index.dims()
                ),
            });
        }
        if index.numel() > 0 && self.dims()[ax] == 0 {
            return Err(Error::IndexOutOfRange {
                op,
                axis: ax,
                len: 0,
                input: dims(self.dims()),
                index: dims(index.dims()),
            });
        }
        let shape = Shape::try_new(op, index.dims())?;
        Ok(Tensor::record(
            Op::Gather { axis: ax, select },
            &[self, index],
            shape,
            self.dtype(),
            device,
        ))
    }
}
