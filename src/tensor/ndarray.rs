//! Interop with [`ndarray`] (the cargo feature `ndarray`): arrays of any
//! layout in, shaped arrays out.
//!
//! An array whose elements fill one dense block of memory in some axis
//! order (row-major, column-major, or any permutation of its axes, as a
//! transposed array is) is copied once as that block, and the tensor is a
//! permuted view of the copy: nothing is reordered on the way in, and a
//! kernel reading the tensor reads it through the view. Any other array (a
//! slice with steps, negative strides, broadcast axes) is copied element by
//! element in logical order.

use super::{element_bytes, or_panic, Tensor};
use crate::dtype::Element;
use crate::error::Result;
use crate::shape::Shape;
use crate::storage::HostBuffer;
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

impl Tensor {
    /// A tensor holding a copy of `array`'s elements, of its shape, on the
    /// CPU.
    ///
    /// ```
    /// use ndarray::array;
    /// use tilefuse::Tensor;
    /// let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// // A transposed array comes in as a view of one copy of its memory.
    /// let t = Tensor::from_ndarray(&a.t());
    /// assert_eq!(t.dims(), [3, 2]);
    /// assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error
    /// [`Tensor::try_from_ndarray`] returns.
    #[track_caller]
    pub fn from_ndarray<E, S, D>(array: &ArrayBase<S, D>) -> Tensor
    where
        E: Element,
        S: Data<Elem = E>,
        D: Dimension,
    {
        or_panic(Tensor::try_from_ndarray(array))
    }

    /// [`Tensor::from_ndarray`], returning misuse as an `Err` instead of
    /// panicking: [`crate::Error::RankTooLarge`] for an array of more axes
    /// than a tensor may have, [`crate::Error::ShapeTooLarge`], and
    /// [`crate::Error::HostOutOfMemory`] where the copy cannot be
    /// allocated, each naming `from_ndarray`.
    pub fn try_from_ndarray<E, S, D>(array: &ArrayBase<S, D>) -> Result<Tensor>
    where
        E: Element,
        S: Data<Elem = E>,
        D: Dimension,
    {
        const OP: &str = "from_ndarray";
        let dims = array.shape();
        let shape = Shape::try_new(OP, dims)?;
        if let Some((memory, order)) = dense_block(array) {
            let physical: Vec<usize> = order.iter().map(|&k| dims[k]).collect();
            let t = Tensor::copied_from(OP, memory, &physical)?;
            if order.iter().enumerate().all(|(i, &k)| i == k) {
                return Ok(t);
            }
            // Logical axis `k` is the block's axis at `k`'s place in `order`.
            let mut perm = vec![0; order.len()];
            for (place, &k) in order.iter().enumerate() {
                perm[k] = place;
            }
            return t.try_permute(&perm);
        }
        let mut buf = HostBuffer::try_zeros_for(OP, dims, E::DTYPE)?;
        let size = E::DTYPE.size_in_bytes();
        for (slot, e) in buf.bytes_mut().chunks_exact_mut(size).zip(array.iter()) {
            slot.copy_from_slice(element_bytes(std::slice::from_ref(e)));
        }
        Ok(Tensor::from_buffer(buf, shape))
    }

    /// The tensor's values as an [`ndarray::ArrayD`] of its shape (realizing
    /// it first), in standard (row-major) layout.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]);
    /// let a = (&t * &t).to_ndarray::<i32>().unwrap();
    /// assert_eq!(a.shape(), [2, 3]);
    /// assert_eq!(a[[1, 2]], 36);
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::to_vec`]: an element type other than the tensor's
    /// dtype, a failed realization, or no host memory for the copy.
    pub fn to_ndarray<E: Element>(&self) -> Result<ArrayD<E>> {
        let values = self.to_vec::<E>().map_err(|e| e.with_op("to_ndarray"))?;
        // `to_vec` returns exactly one value per element of the shape.
        Ok(ArrayD::from_shape_vec(IxDyn(self.dims()), values).unwrap_or_else(|e| unreachable!("{e}")))
    }
}

/// For an array whose elements fill one dense block of memory with
/// non-negative strides: that block, and the axes in the block's order,
/// outermost (largest stride) first. `None` for any other layout.
fn dense_block<E, S, D>(array: &ArrayBase<S, D>) -> Option<(&[E], Vec<usize>)>
where
    S: Data<Elem = E>,
    D: Dimension,
{
    let (dims, strides) = (array.shape(), array.strides());
    if strides.iter().zip(dims).any(|(&s, &d)| s < 0 && d > 1) {
        return None;
    }
    let memory = array.as_slice_memory_order()?;
    // Axes of one element may have any stride: they keep their places, and
    // the others take theirs in order of decreasing stride.
    let mut wide: Vec<usize> = (0..dims.len()).filter(|&k| dims[k] > 1).collect();
    wide.sort_by(|&a, &b| strides[b].cmp(&strides[a]).then(a.cmp(&b)));
    let mut wide = wide.into_iter();
    let order: Vec<usize> = (0..dims.len())
        .map(|k| if dims[k] > 1 { wide.next().unwrap_or(k) } else { k })
        .collect();
    // Check that the order really is a row-major walk of the block.
    let mut expect = 1usize;
    for &k in order.iter().rev() {
        if dims[k] > 1 {
            if strides[k] as usize != expect {
                return None;
            }
            expect *= dims[k];
        }
    }
    Some((memory, order))
}

impl<E, S, D> From<&ArrayBase<S, D>> for Tensor
where
    E: Element,
    S: Data<Elem = E>,
    D: Dimension,
{
    /// [`Tensor::from_ndarray`] (panics where it does).
    #[track_caller]
    fn from(array: &ArrayBase<S, D>) -> Tensor {
        Tensor::from_ndarray(array)
    }
}

impl<E, D> From<ndarray::Array<E, D>> for Tensor
where
    E: Element,
    D: Dimension,
{
    /// [`Tensor::from_ndarray`] of the array (panics where it does).
    #[track_caller]
    fn from(array: ndarray::Array<E, D>) -> Tensor {
        Tensor::from_ndarray(&array)
    }
}
