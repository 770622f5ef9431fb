//! Views: ops that re-address elements without computing new ones.
//!
//! Views are recorded as `Reshape`, `Permute`, `Expand` and `Slice` nodes and
//! folded into addressing when the graph is run, so a view never copies.
//! That is also why [`Tensor::contiguous`] records nothing: a realized
//! result is always stored row-major, whatever views produced it.

use super::ops::shape_error;
use super::{fallible, or_panic, Tensor};
use crate::error::{dims, Error, Result};
use crate::graph::{Axes, Op};
use crate::shape::Shape;

/// An [`Error::InvalidShape`] for `op` on `shape` with argument `arg`.
fn invalid(op: &'static str, shape: &Shape, arg: Vec<isize>, reason: String) -> Error {
    Error::InvalidShape {
        op,
        shape: dims(shape.dims()),
        arg,
        reason,
    }
}

/// A list of extents or indices as an error argument.
fn arg(xs: &[usize]) -> Vec<isize> {
    xs.iter().map(|&x| signed(x)).collect()
}

/// The shape argument of [`Tensor::reshape`]: extents, or signed extents
/// of which one may be `-1` (inferred from the element count).
pub trait ReshapeShape {
    /// The extents for a reshape of `x`, and the argument as written (for
    /// messages); [`Error::InvalidShape`] for a negative extent other than
    /// one `-1`, or a `-1` the element count does not determine.
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)>;
}

/// Resolves signed extents against `x`'s element count.
fn resolve_signed(x: &Tensor, given: Vec<isize>) -> Result<(Vec<usize>, Vec<isize>)> {
    let bad = |reason: String| Err(invalid("reshape", x.shape(), given.clone(), reason));
    let inferred: Vec<usize> = (0..given.len()).filter(|&k| given[k] == -1).collect();
    if given.iter().any(|&d| d < -1) || inferred.len() > 1 {
        return bad("extents are at least 0, and one of them may be -1".into());
    }
    let known = given
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1usize, |p, &d| p.checked_mul(d as usize));
    let mut out: Vec<usize> = given.iter().map(|&d| d.max(0) as usize).collect();
    if let [k] = inferred[..] {
        match known {
            Some(p) if p > 0 && x.numel() % p == 0 => out[k] = x.numel() / p,
            _ => {
                let reason = format!("{} elements cannot fill the other extents with a whole -1", x.numel());
                return bad(reason);
            }
        }
    }
    Ok((out, given))
}

impl ReshapeShape for [usize] {
    fn resolve(&self, _: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        Ok((self.to_vec(), arg(self)))
    }
}

impl ReshapeShape for [isize] {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        resolve_signed(x, self.to_vec())
    }
}

impl ReshapeShape for [i32] {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        resolve_signed(x, self.iter().map(|&d| d as isize).collect())
    }
}

impl<const N: usize> ReshapeShape for [usize; N] {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        self[..].resolve(x)
    }
}

impl<const N: usize> ReshapeShape for [isize; N] {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        self[..].resolve(x)
    }
}

impl<const N: usize> ReshapeShape for [i32; N] {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        self[..].resolve(x)
    }
}

impl ReshapeShape for Vec<usize> {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        self[..].resolve(x)
    }
}

impl ReshapeShape for Vec<isize> {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        self[..].resolve(x)
    }
}

impl<T: ReshapeShape + ?Sized> ReshapeShape for &T {
    fn resolve(&self, x: &Tensor) -> Result<(Vec<usize>, Vec<isize>)> {
        (**self).resolve(x)
    }
}

/// An extent or index as an `isize`, saturating: anything above
/// `isize::MAX` is out of range for every axis anyway.
fn signed(x: usize) -> isize {
    isize::try_from(x).unwrap_or(isize::MAX)
}

impl Tensor {
    /// Records the view `op` of this tensor with the given shape.
    fn view(&self, op: Op, shape: Shape) -> Tensor {
        Tensor::record(op, &[self], shape, self.dtype(), self.device())
    }

    /// This tensor broadcast to `shape` (which must be one it broadcasts to),
    /// with `op` named in errors.
    pub(crate) fn broadcast_as(&self, op: &'static str, shape: &Shape) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        let (rank, target) = (self.rank(), shape.dims());
        let fits = rank <= target.len()
            && self
                .dims()
                .iter()
                .zip(&target[target.len() - rank..])
                .all(|(&d, &t)| d == t || d == 1);
        if !fits {
            return Err(shape_error(op, self.shape(), target));
        }
        let mut lifted = vec![1; target.len() - rank];
        lifted.extend_from_slice(self.dims());
        let x = if lifted.len() == rank {
            self.clone()
        } else {
            self.view(Op::Reshape, Shape::try_new(op, &lifted)?)
        };
        Ok(if lifted == target {
            x
        } else {
            x.view(Op::Expand, shape.clone())
        })
    }

    /// Resolves an axis that may equal the rank (an insertion point).
    pub(super) fn insertion_axis(&self, op: &'static str, axis: isize) -> Result<usize> {
        let rank = self.rank() as isize;
        let a = if axis < 0 { axis + rank + 1 } else { axis };
        if !(0..=rank).contains(&a) {
            return Err(Error::AxisOutOfRange {
                op,
                axis,
                shape: dims(self.dims()),
            });
        }
        Ok(a as usize)
    }

    /// Records nothing: views are addressed, not copied, and every realized
    /// result is stored row-major already. Kept so code ported from other
    /// libraries reads naturally.
    pub fn contiguous(&self) -> Tensor {
        self.clone()
    }

    fallible! {
        /// The same elements in row-major order, in `shape` (same element
        /// count). `shape` is a slice, array or `Vec` of `usize`, or of
        /// `isize`/`i32` where one extent may be `-1`, inferred from the
        /// element count as PyTorch infers it.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec((0..12).collect::<Vec<i32>>(), &[3, 4]);
        /// assert_eq!(x.reshape(&[2, -1, 3]).dims(), &[2, 2, 3]);
        /// assert_eq!(x.reshape(&[6usize, 2]).dims(), &[6, 2]);
        /// assert!(x.try_reshape(&[-1, -1]).is_err());
        /// ```
        pub fn reshape / try_reshape(&self, shape: impl ReshapeShape) -> Tensor {
            let (shape, given) = shape.resolve(self)?;
            let new = Shape::try_new("reshape", &shape)?;
            if new.numel() != self.numel() {
                let reason = format!("{} elements cannot be viewed as {}", self.numel(), new.numel());
                return Err(invalid("reshape", self.shape(), given, reason));
            }
            Ok(if new == *self.shape() { self.clone() } else { self.view(Op::Reshape, new) })
        }
        /// All elements as a rank-1 tensor.
        pub fn flatten / try_flatten(&self) -> Tensor {
            self.try_reshape([self.numel()])
        }
        /// Axis `i` of the result is axis `perm[i]` of this tensor.
        pub fn permute / try_permute(&self, perm: &[usize]) -> Tensor {
            let mut seen = vec![false; self.rank()];
            let valid = perm.len() == self.rank()
                && perm.iter().all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
            if !valid {
                let reason = format!("not a permutation of the {} axes", self.rank());
                return Err(invalid("permute", self.shape(), arg(perm), reason));
            }
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                return Ok(self.clone());
            }
            let shape: Vec<usize> = perm.iter().map(|&p| self.dims()[p]).collect();
            Ok(self.view(Op::Permute(perm.iter().copied().collect::<Axes>()), Shape::try_new("permute", &shape)?))
        }
        /// Axes `a` and `b` swapped (negative axes count from the end).
        pub fn transpose / try_transpose(&self, a: isize, b: isize) -> Tensor {
            let (a, b) = (self.shape().axis("transpose", a)?, self.shape().axis("transpose", b)?);
            let mut perm: Vec<usize> = (0..self.rank()).collect();
            perm.swap(a, b);
            self.try_permute(&perm)
        }
        /// This tensor repeated along size-1 axes (and new leading axes) to `shape`, by NumPy rules.
        pub fn broadcast_to / try_broadcast_to(&self, shape: &[usize]) -> Tensor {
            self.broadcast_as("broadcast_to", &Shape::try_new("broadcast_to", shape)?)
        }
        /// The same as [`Tensor::broadcast_to`].
        pub fn expand / try_expand(&self, shape: &[usize]) -> Tensor {
            self.broadcast_as("expand", &Shape::try_new("expand", shape)?)
        }
        /// Indices `start, start + step, ...` below `end` of `axis`. Requires
        /// `0 <= start <= end <= len` and `step >= 1`: negative or
        /// out-of-range bounds are misuse, not wrapped or clamped.
        pub fn slice / try_slice(&self, axis: isize, start: isize, end: isize, step: isize) -> Tensor {
            let ax = self.shape().axis("slice", axis)?;
            let len = self.dims()[ax] as isize;
            if !(0 <= start && start <= end && end <= len && step >= 1) {
                let reason = format!("needs 0 <= start <= end <= {len} and step >= 1 on axis {ax}");
                return Err(invalid("slice", self.shape(), vec![axis, start, end, step], reason));
            }
            if start == 0 && end == len && step == 1 {
                return Ok(self.clone());
            }
            let mut shape = self.dims().to_vec();
            shape[ax] = ((end - start) as usize).div_ceil(step as usize);
            let op = Op::Slice { axis: ax, start: start as usize, step: step as usize };
            Ok(self.view(op, Shape::try_new("slice", &shape)?))
        }
        /// `len` indices of `axis` from `start` (which must end within the axis).
        pub fn narrow / try_narrow(&self, axis: isize, start: usize, len: usize) -> Tensor {
            // Bounds past `isize::MAX` saturate, and so fail the slice's check.
            let end = signed(start.saturating_add(len));
            self.try_slice(axis, signed(start), end, 1).map_err(|e| match e {
                Error::InvalidShape { shape, reason, .. } => Error::InvalidShape {
                    op: "narrow", shape, arg: vec![axis, signed(start), signed(len)], reason,
                },
                e => e.with_op("narrow"),
            })
        }
        /// This tensor without `axis`, which must have length 1.
        pub fn squeeze / try_squeeze(&self, axis: isize) -> Tensor {
            let ax = self.shape().axis("squeeze", axis)?;
            if self.dims()[ax] != 1 {
                let reason = format!("axis {ax} has length {}, not 1", self.dims()[ax]);
                return Err(invalid("squeeze", self.shape(), vec![axis], reason));
            }
            let mut shape = self.dims().to_vec();
            shape.remove(ax);
            self.try_reshape(&shape)
        }
        /// This tensor with a new axis of length 1 at `axis` (`-1` appends).
        pub fn unsqueeze / try_unsqueeze(&self, axis: isize) -> Tensor {
            let ax = self.insertion_axis("unsqueeze", axis)?;
            let mut shape = self.dims().to_vec();
            shape.insert(ax, 1);
            self.try_reshape(Shape::try_new("unsqueeze", &shape)?.dims())
        }
    }
}

impl Tensor {
    /// This tensor cut along `axis` into consecutive views of the lengths
    /// `sizes`, which must add up to the axis's length (PyTorch's `split`
    /// with a list of sizes). Views: nothing is copied, and a consumer of a
    /// piece reads it where it lies.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec((0..10).collect::<Vec<i64>>(), &[2, 5]);
    /// let parts = x.split(&[2, 3], 1);
    /// assert_eq!(parts[0].to_vec::<i64>()?, vec![0, 1, 5, 6]);
    /// assert_eq!(parts[1].dims(), &[2, 3]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_split`] returns.
    #[track_caller]
    pub fn split(&self, sizes: &[usize], axis: isize) -> Vec<Tensor> {
        or_panic(self.try_split(sizes, axis))
    }

    /// [`Tensor::split`], returning misuse as an `Err` instead of
    /// panicking: [`Error::AxisOutOfRange`] for a bad axis and
    /// [`Error::InvalidShape`] when the sizes do not add up to its length.
    pub fn try_split(&self, sizes: &[usize], axis: isize) -> Result<Vec<Tensor>> {
        let ax = self.shape().axis("split", axis)?;
        let len = self.dims()[ax];
        let total = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
        if total != Some(len) {
            let mut arg: Vec<isize> = sizes.iter().map(|&s| signed(s)).collect();
            arg.push(axis);
            let reason = format!("the sizes must add up to the length {len} of axis {ax}");
            return Err(invalid("split", self.shape(), arg, reason));
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&s| {
                let piece = self.try_narrow(ax as isize, start, s)?;
                start += s;
                Ok(piece)
            })
            .collect()
    }

    /// This tensor cut along `axis` into at most `n` consecutive views of
    /// `ceil(len / n)` indices each, the last one shorter where `n` does
    /// not divide the length, and fewer than `n` where the length is
    /// smaller (PyTorch's `chunk`); an empty axis gives one empty view.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec((0..7).collect::<Vec<i32>>(), &[7]);
    /// let dims: Vec<usize> = x.chunk(3, 0).iter().map(|c| c.dims()[0]).collect();
    /// assert_eq!(dims, vec![3, 3, 1]);
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_chunk`] returns.
    #[track_caller]
    pub fn chunk(&self, n: usize, axis: isize) -> Vec<Tensor> {
        or_panic(self.try_chunk(n, axis))
    }

    /// [`Tensor::chunk`], returning misuse as an `Err` instead of
    /// panicking: [`Error::AxisOutOfRange`] for a bad axis and
    /// [`Error::InvalidShape`] for `n` of zero.
    pub fn try_chunk(&self, n: usize, axis: isize) -> Result<Vec<Tensor>> {
        let ax = self.shape().axis("chunk", axis)?;
        if n == 0 {
            let reason = "needs at least one chunk".to_string();
            return Err(invalid("chunk", self.shape(), vec![0, axis], reason));
        }
        let len = self.dims()[ax];
        if len == 0 {
            return Ok(vec![self.clone()]);
        }
        let size = len.div_ceil(n);
        let mut sizes = vec![size; len / size];
        if len % size != 0 {
            sizes.push(len % size);
        }
        self.try_split(&sizes, ax as isize).map_err(|e| e.with_op("chunk"))
    }
}
