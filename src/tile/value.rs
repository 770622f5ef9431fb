//! `Tile<E, S>`: an immutable multi-dimensional value with a static shape.

use super::element::{for_each_element, for_each_widening, Numeric, TileElement, Wide};
use super::shape::{Singleton, TileShape, S0, S1, S2, S3, S4, S5};
use crate::error::{dims, Error, Result};
use std::fmt;

/// An immutable array of `E` with the static shape `S`, stored inline.
///
/// Tiles have value semantics: they are `Copy`, and a copy is independent of
/// the original. Elements are laid out row-major (the last axis fastest),
/// which is also the order of [`Tile::as_slice`].
///
/// ```
/// use tilefuse::tile::{Tile, S2};
///
/// let x = Tile::<i32, S2<2, 2>>::iota();
/// let y = x; // A deep copy.
/// assert_eq!(y, Tile::from([[0, 1], [2, 3]]));
/// assert_eq!(x.get(&[1, 0]), Some(2));
/// ```
pub struct Tile<E: TileElement, S: TileShape> {
    data: S::Array<E>,
}

impl<E: TileElement, S: TileShape> Clone for Tile<E, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E: TileElement, S: TileShape> Copy for Tile<E, S> {}

impl<E: TileElement, S: TileShape> PartialEq for Tile<E, S> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<E: TileElement, S: TileShape> fmt::Debug for Tile<E, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tile<{}, {:?}>{:?}", E::NAME, S::EXTENTS, self.as_slice())
    }
}

impl<E: TileElement, S: TileShape> Default for Tile<E, S> {
    /// A tile of zeros (`false` for `bool`).
    fn default() -> Self {
        Self::zeros()
    }
}

impl<E: TileElement, S: TileShape> Tile<E, S> {
    /// A tile whose every element is `value`.
    pub fn full(value: E) -> Self {
        Tile { data: S::splat(value) }
    }

    /// A tile of zeros (`false` for `bool`).
    pub fn zeros() -> Self {
        Self::full(E::default())
    }

    /// A tile whose element at row-major position `i` is `f(i)`.
    pub fn from_fn(mut f: impl FnMut(usize) -> E) -> Self {
        let mut tile = Self::zeros();
        for (i, x) in tile.as_mut_slice().iter_mut().enumerate() {
            *x = f(i);
        }
        tile
    }

    /// A tile from its elements in row-major order; an error if there are
    /// not exactly as many as the shape holds.
    pub fn from_slice(values: &[E]) -> Result<Self> {
        if values.len() != S::SIZE {
            return Err(Error::LengthMismatch {
                op: "Tile::from_slice",
                len: values.len(),
                shape: dims(S::EXTENTS),
            });
        }
        Ok(Self::from_fn(|i| values[i]))
    }

    /// The extents of the shape, outermost first.
    pub fn shape(&self) -> &'static [usize] {
        S::EXTENTS
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        S::RANK
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        S::SIZE
    }

    /// Whether the tile has no elements (some extent is 0).
    pub fn is_empty(&self) -> bool {
        S::SIZE == 0
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &[E] {
        S::flat(&self.data)
    }

    /// The elements in row-major order, for building a tile in place.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [E] {
        S::flat_mut(&mut self.data)
    }

    /// The element at a multi-index, or `None` if the index has the wrong
    /// length or lies outside the shape.
    pub fn get(&self, index: &[usize]) -> Option<E> {
        if index.len() != S::RANK {
            return None;
        }
        let mut flat = 0;
        for (&i, &extent) in index.iter().zip(S::EXTENTS) {
            if i >= extent {
                return None;
            }
            flat = flat * extent + i;
        }
        Some(self.as_slice()[flat])
    }

    /// The tile with `f` applied to every element.
    pub fn map<F: TileElement>(&self, mut f: impl FnMut(E) -> F) -> Tile<F, S> {
        let src = self.as_slice();
        Tile::from_fn(|i| f(src[i]))
    }

    /// The tile of `f(a, b)` for the elements of `self` and `other` at each position.
    pub fn zip_with<F: TileElement, G: TileElement>(
        &self,
        other: &Tile<F, S>,
        mut f: impl FnMut(E, F) -> G,
    ) -> Tile<G, S> {
        let (a, b) = (self.as_slice(), other.as_slice());
        Tile::from_fn(|i| f(a[i], b[i]))
    }

    /// The tile converted elementwise to `F`, narrowing allowed (see the
    /// conversion rules in [`TileElement`]'s module). The non-narrowing
    /// conversions are also available through `From`.
    pub fn convert<F: TileElement>(&self) -> Tile<F, S> {
        self.map(|x| x.convert())
    }

    /// The one element of a singleton tile (every extent 1).
    pub fn item(&self) -> E
    where
        S: Singleton,
    {
        self.as_slice()[0]
    }

    /// The one element of a singleton tile, converted to `F` (narrowing
    /// allowed). The non-narrowing conversions are also available through
    /// `From`, as in `f64::from(tile)`.
    pub fn into_scalar<F: TileElement>(self) -> F
    where
        S: Singleton,
    {
        self.item().convert()
    }
}

impl<E: Numeric, S: TileShape> Tile<E, S> {
    /// The tile whose element at row-major position `i` is `i`, converted to `E`.
    pub fn iota() -> Self {
        Self::from_fn(|i| E::from_wide(Wide::Int(i as i128)))
    }
}

impl<E: TileElement> From<E> for Tile<E, S0> {
    /// The rank-0 tile holding `value` (the C++ deduction `tile x{2}`).
    fn from(value: E) -> Self {
        Tile { data: value }
    }
}

impl<E: TileElement, const A: usize> From<[E; A]> for Tile<E, S1<A>> {
    /// The rank-1 tile of a constant array, its shape deduced.
    fn from(data: [E; A]) -> Self {
        Tile { data }
    }
}

impl<E: TileElement, const A: usize, const B: usize> From<[[E; B]; A]> for Tile<E, S2<A, B>> {
    /// The rank-2 tile of a nested constant array, its shape deduced.
    fn from(data: [[E; B]; A]) -> Self {
        Tile { data }
    }
}

impl<E: TileElement, const A: usize, const B: usize, const C: usize> From<[[[E; C]; B]; A]> for Tile<E, S3<A, B, C>> {
    /// The rank-3 tile of a nested constant array, its shape deduced.
    fn from(data: [[[E; C]; B]; A]) -> Self {
        Tile { data }
    }
}

impl<E: TileElement, const A: usize, const B: usize, const C: usize, const D: usize> From<[[[[E; D]; C]; B]; A]>
    for Tile<E, S4<A, B, C, D>>
{
    /// The rank-4 tile of a nested constant array, its shape deduced.
    fn from(data: [[[[E; D]; C]; B]; A]) -> Self {
        Tile { data }
    }
}

impl<E: TileElement, const A: usize, const B: usize, const C: usize, const D: usize, const F: usize>
    From<[[[[[E; F]; D]; C]; B]; A]> for Tile<E, S5<A, B, C, D, F>>
{
    /// The rank-5 tile of a nested constant array, its shape deduced.
    fn from(data: [[[[[E; F]; D]; C]; B]; A]) -> Self {
        Tile { data }
    }
}

/// The non-narrowing conversions: tile to tile of the same shape, and
/// singleton tile to scalar.
macro_rules! widening_from {
    ($from:ty => $($to:ty),*) => {$(
        impl<S: TileShape> From<Tile<$from, S>> for Tile<$to, S> {
            fn from(tile: Tile<$from, S>) -> Self {
                tile.convert()
            }
        }
        impl<S: Singleton> From<Tile<$from, S>> for $to {
            fn from(tile: Tile<$from, S>) -> Self {
                tile.into_scalar()
            }
        }
    )*};
}
for_each_widening!(widening_from);

/// A singleton tile to its own element type.
macro_rules! singleton_into_scalar {
    ($($t:ty),*) => {$(
        impl<S: Singleton> From<Tile<$t, S>> for $t {
            fn from(tile: Tile<$t, S>) -> Self {
                tile.item()
            }
        }
    )*};
}
for_each_element!(singleton_into_scalar);
