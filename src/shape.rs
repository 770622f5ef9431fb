//! Shapes, contiguous strides and NumPy broadcasting.
//!
//! A [`Shape`] is always one a tensor can have: at most [`MAX_RANK`] axes,
//! and at most [`MAX_NUMEL`] elements, counting an empty axis as 1 (so a
//! shape like `[0, 2^62]` is refused too). It is checked once, where it is
//! made ([`Shape::try_new`], [`Shape::broadcast`]); every product of
//! extents is then exact: [`Shape::numel`], [`Shape::contiguous_strides`],
//! the element count of any group of axes, and every element offset, which
//! times the largest element size (8 bytes) still fits in an `isize` (and
//! so in the `i64` and `u64` index arithmetic of the fusion and the
//! kernels). Every tensor's shape, every graph node's and so every shape
//! that reaches `fusion` and `kernels` is a `Shape`, so those rely on this
//! check instead of repeating it.

use crate::error::{dims, Error, Result};
use smallvec::SmallVec;
use std::fmt;

/// The most axes a tensor can have: the tile kernels' views and values have
/// at most six (the kernel IR's verifier refuses more), and tensor ops
/// refuse a shape of more axes with [`Error::RankTooLarge`].
pub const MAX_RANK: usize = 6;

/// The most elements a tensor can have: the most whose size at 8 bytes each
/// (the largest element type) fits in an `isize` (`2^60 - 1`). Tensor ops
/// refuse a shape of more with [`Error::ShapeTooLarge`].
pub const MAX_NUMEL: usize = isize::MAX as usize / 8;

/// The extents of a tensor, outermost first. Rank 0 is a scalar.
///
/// Every `Shape` has at most [`MAX_RANK`] axes and at most [`MAX_NUMEL`]
/// elements (an empty axis counted as 1), checked when it is made (see the
/// module docs); that is what makes [`Shape::numel`] and the strides exact.
#[derive(PartialEq, Eq, Hash, Default)]
pub struct Shape(SmallVec<[usize; MAX_RANK]>);

impl Clone for Shape {
    /// A copy of the extents (a plain copy of the inline array, which the
    /// derived clone does element by element), valid as the original is.
    fn clone(&self) -> Shape {
        Shape(SmallVec::from_slice(&self.0))
    }
}

impl Shape {
    /// A shape from its extents, checked as [`Shape::try_new`] checks them.
    ///
    /// # Panics
    /// If `dims` has more than [`MAX_RANK`] axes or more than [`MAX_NUMEL`]
    /// elements, with the message of the error [`Shape::try_new`] returns.
    #[track_caller]
    pub fn new(dims: &[usize]) -> Shape {
        crate::error::or_panic(Shape::try_new("Shape::new", dims))
    }

    /// A shape from its extents, or [`Error::RankTooLarge`] naming `op` if
    /// there are more than [`MAX_RANK`], or [`Error::ShapeTooLarge`] if
    /// their product (an empty axis counted as 1) is above [`MAX_NUMEL`].
    pub fn try_new(op: &'static str, dims: &[usize]) -> Result<Shape> {
        check(op, dims, &[])?;
        Ok(Shape(SmallVec::from_slice(dims)))
    }

    /// The scalar shape `[]`.
    pub fn scalar() -> Shape {
        Shape(SmallVec::new())
    }

    /// The extents.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The number of elements (1 for a scalar, 0 if any axis is empty); at
    /// most [`MAX_NUMEL`], so the product cannot overflow.
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major strides in elements; each is a product of extents, so at
    /// most [`MAX_NUMEL`].
    pub fn contiguous_strides(&self) -> SmallVec<[isize; MAX_RANK]> {
        let mut strides: SmallVec<[isize; MAX_RANK]> = SmallVec::from_elem(0, self.rank());
        let mut acc = 1isize;
        for i in (0..self.rank()).rev() {
            strides[i] = acc;
            acc *= self.0[i] as isize;
        }
        strides
    }

    /// Resolves a possibly negative axis against this shape's rank.
    pub fn axis(&self, op: &'static str, axis: isize) -> Result<usize> {
        let rank = self.rank() as isize;
        let a = if axis < 0 { axis + rank } else { axis };
        if a < 0 || a >= rank {
            return Err(Error::AxisOutOfRange {
                op,
                axis,
                shape: dims(self.dims()),
            });
        }
        Ok(a as usize)
    }

    /// The NumPy broadcast of two shapes, or an error naming `op` and both
    /// shapes: [`Error::ShapeMismatch`] if they do not broadcast,
    /// [`Error::ShapeTooLarge`] if their broadcast has more than
    /// [`MAX_NUMEL`] elements.
    pub fn broadcast(op: &'static str, a: &Shape, b: &Shape) -> Result<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = SmallVec::with_capacity(rank);
        for i in 0..rank {
            let da = if i + a.rank() >= rank {
                a.0[i + a.rank() - rank]
            } else {
                1
            };
            let db = if i + b.rank() >= rank {
                b.0[i + b.rank() - rank]
            } else {
                1
            };
            let d = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => {
                    return Err(Error::ShapeMismatch {
                        op,
                        lhs: dims(a.dims()),
                        rhs: dims(b.dims()),
                    })
                }
            };
            out.push(d);
        }
        check(op, &out, &[a, b])?;
        Ok(Shape(out))
    }
}

/// Checks that `dims` is a shape a tensor can have (see the module docs),
/// naming `op` and, for a broadcast, the `operands` in the error.
fn check(op: &'static str, shape: &[usize], operands: &[&Shape]) -> Result<()> {
    if shape.len() > MAX_RANK {
        return Err(Error::RankTooLarge {
            op,
            shape: dims(shape),
            max: MAX_RANK,
        });
    }
    let product = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d).filter(|&n| n <= MAX_NUMEL));
    if product.is_none() {
        return Err(Error::ShapeTooLarge {
            op,
            shape: dims(shape),
            operands: operands.iter().map(|o| dims(o.dims())).collect(),
            max: MAX_NUMEL,
        });
    }
    Ok(())
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0.as_slice())
    }
}

/// The conversions check the extents as [`Shape::new`] does, and panic as it does.
impl From<&[usize]> for Shape {
    #[track_caller]
    fn from(d: &[usize]) -> Shape {
        Shape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    #[track_caller]
    fn from(d: [usize; N]) -> Shape {
        Shape::new(&d)
    }
}

impl From<Vec<usize>> for Shape {
    #[track_caller]
    fn from(d: Vec<usize>) -> Shape {
        Shape::new(&d)
    }
}

#[cfg(test)]
mod tests {
    use super::Shape;

    #[test]
    fn broadcasting_follows_numpy() {
        let b = |x: &[usize], y: &[usize]| Shape::broadcast("t", &Shape::new(x), &Shape::new(y));
        assert_eq!(b(&[3, 1], &[4]).unwrap(), Shape::new(&[3, 4]));
        assert_eq!(b(&[], &[2, 5]).unwrap(), Shape::new(&[2, 5]));
        assert_eq!(b(&[0, 1], &[1, 7]).unwrap(), Shape::new(&[0, 7]));
        assert!(b(&[3], &[4]).is_err());
    }

    #[test]
    fn shapes_a_tensor_cannot_have_are_refused() {
        use super::{MAX_NUMEL, MAX_RANK};
        use crate::error::Error;
        assert!(Shape::try_new("t", &[1; MAX_RANK]).is_ok());
        assert!(Shape::try_new("t", &[MAX_NUMEL]).is_ok());
        assert!(Shape::try_new("t", &[0, MAX_NUMEL]).is_ok());
        assert_eq!(
            Shape::try_new("t", &[1; MAX_RANK + 1]).unwrap_err().to_string(),
            "t: shape [1, 1, 1, 1, 1, 1, 1] has 7 axes, more than the 6 a tensor can have"
        );
        for big in [
            &[MAX_NUMEL + 1][..],
            &[1 << 32, 1 << 32],
            &[(1 << 62) + 1, 4],
            &[0, 1 << 40, 1 << 40],
            &[usize::MAX, 0],
        ] {
            let e = Shape::try_new("t", big).unwrap_err();
            assert!(
                matches!(&e, Error::ShapeTooLarge { op: "t", shape, .. } if shape == big),
                "{e}"
            );
        }
        let (wide, tall) = (Shape::new(&[1 << 40, 1]), Shape::new(&[1, 1 << 40]));
        assert_eq!(
            Shape::broadcast("add", &wide, &tall).unwrap_err().to_string(),
            "add: shape [1099511627776, 1099511627776] (the broadcast of [1099511627776, 1] and \
             [1, 1099511627776]) has more elements than a tensor can hold (at most 1152921504606846975, \
             so that their size at 8 bytes each fits in an isize)"
        );
    }

    #[test]
    #[should_panic(expected = "Shape::new: shape [4294967296, 4294967296] has more elements")]
    fn shape_new_panics_on_a_shape_a_tensor_cannot_have() {
        let _ = Shape::new(&[1 << 32, 1 << 32]);
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(Shape::new(&[2, 3, 4]).contiguous_strides().as_slice(), &[12, 4, 1]);
    }
}
