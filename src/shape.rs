//! Shapes, contiguous strides and NumPy broadcasting.

use crate::error::{dims, Error, Result};
use smallvec::SmallVec;
use std::fmt;

/// The extents of a tensor, outermost first. Rank 0 is a scalar.
#[derive(PartialEq, Eq, Hash, Default)]
pub struct Shape(SmallVec<[usize; 6]>);

impl Clone for Shape {
    /// A copy of the extents (a plain copy of the inline array, which the
    /// derived clone does element by element).
    fn clone(&self) -> Shape {
        Shape::new(&self.0)
    }
}

impl Shape {
    /// A shape from its extents.
    pub fn new(dims: &[usize]) -> Shape {
        Shape(SmallVec::from_slice(dims))
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

    /// The number of elements (1 for a scalar, 0 if any axis is empty).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major strides in elements.
    pub fn contiguous_strides(&self) -> SmallVec<[isize; 6]> {
        let mut strides: SmallVec<[isize; 6]> = SmallVec::from_elem(0, self.rank());
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

    /// The NumPy broadcast of two shapes, or an error naming `op` and both shapes.
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
        Ok(Shape(out))
    }
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

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Shape {
        Shape::new(d)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Shape {
        Shape::new(&d)
    }
}

impl From<Vec<usize>> for Shape {
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
    fn contiguous_strides_are_row_major() {
        assert_eq!(Shape::new(&[2, 3, 4]).contiguous_strides().as_slice(), &[12, 4, 1]);
    }
}
