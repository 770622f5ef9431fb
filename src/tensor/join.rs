//! Joining tensors: `cat`, `stack` and `pad`.
//!
//! A concatenation is a node of its own (`Op::Cat`); fusion reads it as
//! addressing: a kernel that consumes it loads each piece through a window
//! of the joined index space, so `cat` followed by elementwise work or a
//! reduction is one kernel that never writes the joined tensor. `pad` is a
//! concatenation with constant pieces, so padding costs no buffer either.

use super::{or_panic, Tensor};
use crate::dtype::Element;
use crate::error::{dims, Error, Result};
use crate::graph::Op;
use crate::shape::Shape;

/// An error of `op` about the tensors joined: the first tensor's shape,
/// the argument list the user wrote and why it does not join.
fn bad_join(op: &'static str, first: &Shape, arg: Vec<isize>, reason: String) -> Error {
    Error::InvalidShape {
        op,
        shape: dims(first.dims()),
        arg,
        reason,
    }
}

impl Tensor {
    /// The tensors one after another along `axis` (negative counts from
    /// the end), PyTorch's `cat`: all of one rank, equal on every other
    /// axis; dtypes are promoted to a common one as arithmetic promotes them.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let b = Tensor::from_vec(vec![5.0f32, 6.0], &[2, 1]);
    /// let y = Tensor::cat(&[&a, &b], -1);
    /// assert_eq!(y.dims(), &[2, 3]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_cat`] returns.
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], axis: isize) -> Tensor {
        or_panic(Tensor::try_cat(tensors, axis))
    }

    /// [`Tensor::cat`], returning misuse as an `Err` instead of panicking:
    /// [`Error::InvalidShape`] for no tensors, ranks that differ or extents
    /// that differ off the joined axis (naming the first tensor's shape and
    /// the offending one's), [`Error::AxisOutOfRange`] for a bad axis,
    /// [`Error::DeviceMismatch`] for tensors on different devices.
    pub fn try_cat(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(bad_join(
                "cat",
                &Shape::scalar(),
                vec![axis],
                "no tensors to join".into(),
            ));
        };
        let device = Tensor::common_device("cat", tensors)?;
        if first.rank() == 0 {
            return Err(bad_join(
                "cat",
                first.shape(),
                vec![axis],
                "rank-0 tensors have no axis to join along".into(),
            ));
        }
        let ax = first.shape().axis("cat", axis)?;
        let mut out = first.dims().to_vec();
        out[ax] = 0;
        for (i, t) in tensors.iter().enumerate() {
            let fits = t.rank() == first.rank() && (0..t.rank()).all(|k| k == ax || t.dims()[k] == first.dims()[k]);
            if !fits {
                let mut arg: Vec<isize> = t.dims().iter().map(|&d| d as isize).collect();
                arg.push(axis);
                let reason = format!(
                    "tensor {i} of shape {:?} does not match the first, {:?}, off axis {ax}",
                    t.dims(),
                    first.dims()
                );
                return Err(bad_join("cat", first.shape(), arg, reason));
            }
            out[ax] = out[ax]
                .checked_add(t.dims()[ax])
                .ok_or_else(|| bad_join("cat", first.shape(), vec![axis], "the joined axis overflows".into()))?;
        }
        let shape = Shape::try_new("cat", &out)?;
        if tensors.len() == 1 {
            return Ok((*first).clone());
        }
        let dtype = tensors.iter().skip(1).fold(first.dtype(), |d, t| d.promote(t.dtype()));
        let cast: Vec<Tensor> = tensors.iter().map(|t| t.cast_to(dtype)).collect();
        let inputs: Vec<&Tensor> = cast.iter().collect();
        Ok(Tensor::record(Op::Cat { axis: ax }, &inputs, shape, dtype, device))
    }

    /// The tensors, all of one shape, joined along a new axis `axis`
    /// (negative counts from the end of the result's axes), PyTorch's
    /// `stack`.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let a = Tensor::from_vec(vec![1i32, 2], &[2]);
    /// let b = Tensor::from_vec(vec![3i32, 4], &[2]);
    /// let y = Tensor::stack(&[&a, &b], 1);
    /// assert_eq!(y.dims(), &[2, 2]);
    /// assert_eq!(y.to_vec::<i32>()?, vec![1, 3, 2, 4]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_stack`] returns.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], axis: isize) -> Tensor {
        or_panic(Tensor::try_stack(tensors, axis))
    }

    /// [`Tensor::stack`], returning misuse as an `Err` instead of
    /// panicking: [`Error::InvalidShape`] for no tensors or shapes that
    /// differ, [`Error::AxisOutOfRange`] for a bad axis,
    /// [`Error::DeviceMismatch`] for tensors on different devices.
    pub fn try_stack(tensors: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(bad_join(
                "stack",
                &Shape::scalar(),
                vec![axis],
                "no tensors to stack".into(),
            ));
        };
        if let Some((i, t)) = tensors.iter().enumerate().find(|(_, t)| t.dims() != first.dims()) {
            let mut arg: Vec<isize> = t.dims().iter().map(|&d| d as isize).collect();
            arg.push(axis);
            let reason = format!("tensor {i} has shape {:?}, the first {:?}", t.dims(), first.dims());
            return Err(bad_join("stack", first.shape(), arg, reason));
        }
        let ax = first.insertion_axis("stack", axis)?;
        let rows: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.try_unsqueeze(ax as isize))
            .collect::<Result<_>>()
            .map_err(|e| e.with_op("stack"))?;
        let inputs: Vec<&Tensor> = rows.iter().collect();
        Tensor::try_cat(&inputs, ax as isize).map_err(|e| e.with_op("stack"))
    }

    /// This tensor with `value` added before and after the elements of
    /// its last `pads.len()` axes: `pads[i] = (before, after)` for axis
    /// `rank - pads.len() + i` (so `&[(1, 1)]` pads the last axis, and
    /// `&[(1, 0), (0, 2)]` pads one row above and two columns to the
    /// right). The value is rounded or wrapped to the tensor's dtype.
    ///
    /// The padding is part of the graph, not a buffer: a kernel reading the
    /// padded tensor gives its border the value.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let y = x.pad(&[(1, 0), (0, 1)], -1.0f32);
    /// assert_eq!(y.dims(), &[3, 3]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![-1.0, -1.0, -1.0, 1.0, 2.0, -1.0, 3.0, 4.0, -1.0]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_pad`] returns.
    #[track_caller]
    pub fn pad<E: Element>(&self, pads: &[(usize, usize)], value: E) -> Tensor {
        or_panic(self.try_pad(pads, value))
    }

    /// [`Tensor::pad`], returning misuse as an `Err` instead of panicking:
    /// [`Error::InvalidShape`] for more pairs than axes or a padded shape
    /// too large for a tensor.
    pub fn try_pad<E: Element>(&self, pads: &[(usize, usize)], value: E) -> Result<Tensor> {
        let arg = || {
            pads.iter()
                .flat_map(|&(a, b)| [a as isize, b as isize])
                .collect::<Vec<isize>>()
        };
        if pads.len() > self.rank() {
            let reason = format!("{} pairs for a tensor of rank {}", pads.len(), self.rank());
            return Err(bad_join("pad", self.shape(), arg(), reason));
        }
        // One constant, seen in the shape of each border.
        let fill = Tensor::constant(Shape::scalar(), value.to_scalar(), self.dtype()).to(self.device());
        let first = self.rank() - pads.len();
        let mut x = self.clone();
        for (i, &(before, after)) in pads.iter().enumerate() {
            let ax = first + i;
            let side = |n: usize, x: &Tensor| -> Result<Tensor> {
                let mut d = x.dims().to_vec();
                d[ax] = n;
                fill.try_reshape(vec![1isize; d.len()])?.try_expand(&d)
            };
            let mut parts = vec![];
            if before > 0 {
                parts.push(side(before, &x).map_err(|e| e.with_op("pad"))?);
            }
            parts.push(x.clone());
            if after > 0 {
                parts.push(side(after, &x).map_err(|e| e.with_op("pad"))?);
            }
            let refs: Vec<&Tensor> = parts.iter().collect();
            x = Tensor::try_cat(&refs, ax as isize).map_err(|e| e.with_op("pad"))?;
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn joins_name_the_op_and_the_shapes() {
        let a = Tensor::zeros(&[2, 3], DType::F32);
        let b = Tensor::zeros(&[2, 4], DType::F32);
        let e = Tensor::try_cat(&[&a, &b], 0).unwrap_err().to_string();
        assert!(e.contains("cat") && e.contains("[2, 4]") && e.contains("[2, 3]"), "{e}");
        assert!(Tensor::try_cat(&[&a, &b], 1).is_ok());
        assert!(Tensor::try_cat(&[&a, &b], 2).is_err());
        assert!(Tensor::try_cat(&[], 0).unwrap_err().to_string().contains("cat"));
        let e = Tensor::try_stack(&[&a, &b], 0).unwrap_err().to_string();
        assert!(e.contains("stack"), "{e}");
        let e = a.try_pad(&[(1, 1), (0, 0), (2, 2)], 0.0f32).unwrap_err().to_string();
        assert!(e.contains("pad") && e.contains("rank 2"), "{e}");
    }
}
