//! Elementwise operators, comparisons and axis reductions of tiles.
//!
//! Arithmetic (`+ - * / %`, unary `-`) exists for [`Numeric`] elements and
//! bitwise operators (`& | ^ !`) for [`Bitwise`] elements, between two tiles
//! of one shape and between a tile and a scalar on either side. Comparisons
//! are methods returning `bool` tiles. Reductions keep the reduced axis with
//! extent 1.
//!
//! ```
//! use tilefuse::tile::{Tile, S2};
//!
//! let a = Tile::from([[1, 2], [3, 4]]);
//! assert_eq!(10 * a + 1, Tile::from([[11, 21], [31, 41]]));
//! assert_eq!(a.gt(2), Tile::from([[false, false], [true, true]]));
//! assert_eq!(a.reduce_sum::<1>(), Tile::<i32, S2<2, 1>>::from([[3], [7]]));
//! ```

use super::element::{Bitwise, Numeric, TileElement};
use super::shape::{ReduceAxis, TileShape};
use super::value::Tile;
use std::ops;

/// The right operand of a tile operation: a tile of the same shape, or a
/// scalar that stands for a tile full of it.
pub trait TileOperand<E: TileElement, S: TileShape> {
    /// The operand as a tile.
    fn into_tile(self) -> Tile<E, S>;
}

impl<E: TileElement, S: TileShape> TileOperand<E, S> for Tile<E, S> {
    fn into_tile(self) -> Tile<E, S> {
        self
    }
}

impl<E: TileElement, S: TileShape> TileOperand<E, S> for E {
    fn into_tile(self) -> Tile<E, S> {
        Tile::full(self)
    }
}

/// Implements a binary operator for tile-tile and tile-scalar operands, and
/// for scalar-tile operands of every listed element type.
macro_rules! binary_op {
    ($bound:ident, $trait:ident, $method:ident, |$a:ident, $b:ident| $body:expr, [$($t:ty),*]) => {
        impl<E: $bound, S: TileShape, R: TileOperand<E, S>> ops::$trait<R> for Tile<E, S> {
            type Output = Tile<E, S>;
            fn $method(self, rhs: R) -> Tile<E, S> {
                self.zip_with(&rhs.into_tile(), |$a, $b| $body)
            }
        }
        $(
            impl<S: TileShape> ops::$trait<Tile<$t, S>> for $t {
                type Output = Tile<$t, S>;
                fn $method(self, rhs: Tile<$t, S>) -> Tile<$t, S> {
                    Tile::full(self).zip_with(&rhs, |$a, $b| $body)
                }
            }
        )*
    };
}

/// Implements the arithmetic operators.
macro_rules! arithmetic_ops {
    ($($t:ty),*) => {
        binary_op!(Numeric, Add, add, |a, b| a.tile_add(b), [$($t),*]);
        binary_op!(Numeric, Sub, sub, |a, b| a.tile_sub(b), [$($t),*]);
        binary_op!(Numeric, Mul, mul, |a, b| a.tile_mul(b), [$($t),*]);
        binary_op!(Numeric, Div, div, |a, b| a.tile_div(b), [$($t),*]);
        binary_op!(Numeric, Rem, rem, |a, b| a.tile_rem(b), [$($t),*]);
    };
}
arithmetic_ops!(i8, i16, i32, i64, u8, u16, u32, u64, half::f16, half::bf16, f32, f64);

/// Implements the bitwise operators.
macro_rules! bitwise_ops {
    ($($t:ty),*) => {
        binary_op!(Bitwise, BitAnd, bitand, |a, b| a & b, [$($t),*]);
        binary_op!(Bitwise, BitOr, bitor, |a, b| a | b, [$($t),*]);
        binary_op!(Bitwise, BitXor, bitxor, |a, b| a ^ b, [$($t),*]);
    };
}
bitwise_ops!(bool, i8, i16, i32, i64, u8, u16, u32, u64);

impl<E: Numeric, S: TileShape> ops::Neg for Tile<E, S> {
    type Output = Tile<E, S>;
    fn neg(self) -> Tile<E, S> {
        self.map(E::tile_neg)
    }
}

impl<E: Bitwise, S: TileShape> ops::Not for Tile<E, S> {
    type Output = Tile<E, S>;
    fn not(self) -> Tile<E, S> {
        self.map(|x| !x)
    }
}

impl<E: TileElement, S: TileShape> Tile<E, S> {
    /// `self == rhs` elementwise (NaN is unequal to everything).
    pub fn eq(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a == b)
    }

    /// `self != rhs` elementwise (NaN is unequal to everything).
    pub fn ne(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a != b)
    }

    /// `self < rhs` elementwise (false where either is NaN).
    pub fn lt(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a < b)
    }

    /// `self <= rhs` elementwise (false where either is NaN).
    pub fn le(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a <= b)
    }

    /// `self > rhs` elementwise (false where either is NaN).
    pub fn gt(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a > b)
    }

    /// `self >= rhs` elementwise (false where either is NaN).
    pub fn ge(&self, rhs: impl TileOperand<E, S>) -> Tile<bool, S> {
        self.zip_with(&rhs.into_tile(), |a, b| a >= b)
    }
}

impl<E: Numeric, S: TileShape> Tile<E, S> {
    /// The elementwise maximum (NaN if either is NaN).
    pub fn maximum(&self, rhs: impl TileOperand<E, S>) -> Tile<E, S> {
        self.zip_with(&rhs.into_tile(), E::tile_max)
    }

    /// The elementwise minimum (NaN if either is NaN).
    pub fn minimum(&self, rhs: impl TileOperand<E, S>) -> Tile<E, S> {
        self.zip_with(&rhs.into_tile(), E::tile_min)
    }

    /// The sum along `AXIS`, which keeps extent 1. `f16` and `bf16`
    /// accumulate in `f32`; an empty axis sums to 0.
    pub fn reduce_sum<const AXIS: usize>(&self) -> Tile<E, S::Reduced>
    where
        S: ReduceAxis<AXIS>,
    {
        self.reduce(AXIS, E::Acc::default(), |acc, x| acc.tile_add(x.to_acc()), E::from_acc)
    }

    /// The product along `AXIS`, which keeps extent 1. `f16` and `bf16`
    /// accumulate in `f32`; an empty axis multiplies to 1.
    pub fn reduce_prod<const AXIS: usize>(&self) -> Tile<E, S::Reduced>
    where
        S: ReduceAxis<AXIS>,
    {
        self.reduce(AXIS, E::Acc::ONE, |acc, x| acc.tile_mul(x.to_acc()), E::from_acc)
    }

    /// The maximum along `AXIS`, which keeps extent 1; NaN propagates, and an
    /// empty axis gives the least value (`-inf` for floats).
    pub fn reduce_max<const AXIS: usize>(&self) -> Tile<E, S::Reduced>
    where
        S: ReduceAxis<AXIS>,
    {
        self.reduce(AXIS, E::LOWEST, E::tile_max, |x| x)
    }

    /// The minimum along `AXIS`, which keeps extent 1; NaN propagates, and an
    /// empty axis gives the greatest value (`+inf` for floats).
    pub fn reduce_min<const AXIS: usize>(&self) -> Tile<E, S::Reduced>
    where
        S: ReduceAxis<AXIS>,
    {
        self.reduce(AXIS, E::HIGHEST, E::tile_min, |x| x)
    }

    /// Folds `axis` of this tile into a tile of shape `R` (the same shape
    /// with extent 1 at `axis`), starting each fold from `init`.
    fn reduce<A: Copy, R: TileShape>(
        &self,
        axis: usize,
        init: A,
        fold: impl Fn(A, E) -> A,
        finish: impl Fn(A) -> E,
    ) -> Tile<E, R> {
        let extents = S::EXTENTS;
        let len = extents[axis];
        let inner: usize = extents[axis + 1..].iter().product();
        let data = self.as_slice();
        Tile::from_fn(|i| {
            let (outer, within) = (i / inner, i % inner);
            let start = outer * len * inner + within;
            finish((0..len).fold(init, |acc, k| fold(acc, data[start + k * inner])))
        })
    }
}
