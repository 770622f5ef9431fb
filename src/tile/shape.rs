//! Static tile shapes of rank 0 to 5.
//!
//! A shape is a marker type whose const parameters are its extents:
//! `S2<2, 4>` is two rows of four. Shapes carry the nested array type a tile
//! stores its elements in, so a `Tile<E, S>` holds its elements inline and is
//! `Copy`, with no `generic_const_exprs`.

use super::element::TileElement;
use std::fmt;

mod sealed {
    pub trait Sealed {}
}

/// A static tile shape: one of [`S0`], [`S1`], [`S2`], [`S3`], [`S4`], [`S5`].
pub trait TileShape: sealed::Sealed + Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// The number of axes.
    const RANK: usize;
    /// The extents, outermost first.
    const EXTENTS: &'static [usize];
    /// The number of elements (the product of the extents).
    const SIZE: usize;
    /// The nested array a tile of this shape stores its elements in.
    #[doc(hidden)]
    type Array<E: TileElement>: Copy + Send + Sync;
    #[doc(hidden)]
    fn splat<E: TileElement>(value: E) -> Self::Array<E>;
    #[doc(hidden)]
    fn flat<E: TileElement>(array: &Self::Array<E>) -> &[E];
    #[doc(hidden)]
    fn flat_mut<E: TileElement>(array: &mut Self::Array<E>) -> &mut [E];
}

/// The shape of rank 0: a single element.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S0;

/// A shape of rank 1 with extent `A`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S1<const A: usize>;

/// A shape of rank 2 with extents `A × B`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S2<const A: usize, const B: usize>;

/// A shape of rank 3 with extents `A × B × C`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S3<const A: usize, const B: usize, const C: usize>;

/// A shape of rank 4 with extents `A × B × C × D`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S4<const A: usize, const B: usize, const C: usize, const D: usize>;

/// A shape of rank 5 with extents `A × B × C × D × F`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct S5<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize>;

impl sealed::Sealed for S0 {}
impl TileShape for S0 {
    const RANK: usize = 0;
    const EXTENTS: &'static [usize] = &[];
    const SIZE: usize = 1;
    type Array<E: TileElement> = E;
    fn splat<E: TileElement>(value: E) -> E {
        value
    }
    fn flat<E: TileElement>(array: &E) -> &[E] {
        std::slice::from_ref(array)
    }
    fn flat_mut<E: TileElement>(array: &mut E) -> &mut [E] {
        std::slice::from_mut(array)
    }
}

/// Implements [`TileShape`] for one shape marker: its const parameters, the
/// nested array type, how to fill it with one value, and the flattening
/// calls that turn it into a slice (one per nesting level past the first).
macro_rules! tile_shape {
    ($name:ident<$($p:ident),+>, $array:ty, |$v:ident| $splat:expr, $($flat:ident $flat_mut:ident)*) => {
        impl<$(const $p: usize),+> sealed::Sealed for $name<$($p),+> {}
        impl<$(const $p: usize),+> TileShape for $name<$($p),+> {
            const RANK: usize = [$($p),+].len();
            const EXTENTS: &'static [usize] = &[$($p),+];
            const SIZE: usize = 1 $(* $p)+;
            type Array<E: TileElement> = $array;
            fn splat<E: TileElement>($v: E) -> $array {
                $splat
            }
            fn flat<E: TileElement>(array: &$array) -> &[E] {
                array.as_slice()$(.$flat())*
            }
            fn flat_mut<E: TileElement>(array: &mut $array) -> &mut [E] {
                array.as_mut_slice()$(.$flat_mut())*
            }
        }
    };
}

tile_shape!(S1<A>, [E; A], |v| [v; A],);
tile_shape!(S2<A, B>, [[E; B]; A], |v| [[v; B]; A], as_flattened as_flattened_mut);
tile_shape!(
    S3<A, B, C>,
    [[[E; C]; B]; A],
    |v| [[[v; C]; B]; A],
    as_flattened as_flattened_mut as_flattened as_flattened_mut
);
tile_shape!(
    S4<A, B, C, D>,
    [[[[E; D]; C]; B]; A],
    |v| [[[[v; D]; C]; B]; A],
    as_flattened as_flattened_mut as_flattened as_flattened_mut as_flattened as_flattened_mut
);
tile_shape!(
    S5<A, B, C, D, F>,
    [[[[[E; F]; D]; C]; B]; A],
    |v| [[[[[v; F]; D]; C]; B]; A],
    as_flattened as_flattened_mut as_flattened as_flattened_mut as_flattened as_flattened_mut as_flattened as_flattened_mut
);

/// A shape whose every extent is 1; a tile of it converts to its one element.
pub trait Singleton: TileShape {}

impl Singleton for S0 {}
impl Singleton for S1<1> {}
impl Singleton for S2<1, 1> {}
impl Singleton for S3<1, 1, 1> {}
impl Singleton for S4<1, 1, 1, 1> {}
impl Singleton for S5<1, 1, 1, 1, 1> {}

/// A shape with axis `AXIS` replaced by 1: the shape of a reduction along
/// that axis. Implemented for every axis below the rank, so reducing along an
/// axis the shape does not have is a compile error:
///
/// ```compile_fail
/// use tilefuse::tile::{Tile, S2};
///
/// let _ = Tile::<i32, S2<2, 2>>::zeros().reduce_sum::<2>();
/// ```
pub trait ReduceAxis<const AXIS: usize>: TileShape {
    /// The shape with extent 1 at `AXIS`.
    type Reduced: TileShape;
}

impl<const A: usize> ReduceAxis<0> for S1<A> {
    type Reduced = S1<1>;
}
impl<const A: usize, const B: usize> ReduceAxis<0> for S2<A, B> {
    type Reduced = S2<1, B>;
}
impl<const A: usize, const B: usize> ReduceAxis<1> for S2<A, B> {
    type Reduced = S2<A, 1>;
}
impl<const A: usize, const B: usize, const C: usize> ReduceAxis<0> for S3<A, B, C> {
    type Reduced = S3<1, B, C>;
}
impl<const A: usize, const B: usize, const C: usize> ReduceAxis<1> for S3<A, B, C> {
    type Reduced = S3<A, 1, C>;
}
impl<const A: usize, const B: usize, const C: usize> ReduceAxis<2> for S3<A, B, C> {
    type Reduced = S3<A, B, 1>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize> ReduceAxis<0> for S4<A, B, C, D> {
    type Reduced = S4<1, B, C, D>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize> ReduceAxis<1> for S4<A, B, C, D> {
    type Reduced = S4<A, 1, C, D>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize> ReduceAxis<2> for S4<A, B, C, D> {
    type Reduced = S4<A, B, 1, D>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize> ReduceAxis<3> for S4<A, B, C, D> {
    type Reduced = S4<A, B, C, 1>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize> ReduceAxis<0>
    for S5<A, B, C, D, F>
{
    type Reduced = S5<1, B, C, D, F>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize> ReduceAxis<1>
    for S5<A, B, C, D, F>
{
    type Reduced = S5<A, 1, C, D, F>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize> ReduceAxis<2>
    for S5<A, B, C, D, F>
{
    type Reduced = S5<A, B, 1, D, F>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize> ReduceAxis<3>
    for S5<A, B, C, D, F>
{
    type Reduced = S5<A, B, C, 1, F>;
}
impl<const A: usize, const B: usize, const C: usize, const D: usize, const F: usize> ReduceAxis<4>
    for S5<A, B, C, D, F>
{
    type Reduced = S5<A, B, C, D, 1>;
}

/// A partition index for a view of shape `S`: either an array `[usize; R]`
/// whose length `R` is the rank of `S` (a wrong length does not compile), or
/// a slice `&[usize]`, whose length is checked when it is used.
///
/// ```
/// use tilefuse::tile::{PartitionView, TensorSpan, S2};
///
/// let x = [0; 16];
/// let p = PartitionView::new(TensorSpan::contiguous(&x, &[4, 4])?, S2::<2, 2>)?;
/// assert!(p.load([1, 1]).is_ok());
/// assert!(p.load(&[1, 1, 0][..]).is_err()); // `Error::RankMismatch`.
/// # Ok::<(), tilefuse::Error>(())
/// ```
///
/// An array of the wrong length is a compile error:
///
/// ```compile_fail
/// use tilefuse::tile::{PartitionView, TensorSpan, S2};
///
/// let x = [0; 16];
/// let p = PartitionView::new(TensorSpan::contiguous(&x, &[4, 4])?, S2::<2, 2>)?;
/// let _ = p.load([1, 1, 0]);
/// # Ok::<(), tilefuse::Error>(())
/// ```
pub trait PartitionIndex<S: TileShape> {
    /// The index as a slice.
    fn as_indices(&self) -> &[usize];
}

impl<S: TileShape> PartitionIndex<S> for &[usize] {
    fn as_indices(&self) -> &[usize] {
        self
    }
}

impl PartitionIndex<S0> for [usize; 0] {
    fn as_indices(&self) -> &[usize] {
        self
    }
}

/// Implements [`PartitionIndex`] for the arrays whose length is the rank.
macro_rules! partition_index {
    ($($name:ident<$($p:ident),+> => $rank:literal;)*) => {$(
        impl<$(const $p: usize),+> PartitionIndex<$name<$($p),+>> for [usize; $rank] {
            fn as_indices(&self) -> &[usize] {
                self
            }
        }
    )*};
}
partition_index! {
    S1<A> => 1;
    S2<A, B> => 2;
    S3<A, B, C> => 3;
    S4<A, B, C, D> => 4;
    S5<A, B, C, D, F> => 5;
}

/// Calls `f` with every index of the index space of `extents`, in row-major
/// order (the last axis fastest). An empty extent calls it never; rank 0 once.
pub(crate) fn for_each_index(extents: &[usize], mut f: impl FnMut(&[usize])) {
    if extents.contains(&0) {
        return;
    }
    let mut index = smallvec::SmallVec::<[usize; 6]>::from_elem(0, extents.len());
    loop {
        f(&index);
        let mut axis = extents.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            if index[axis] < extents[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}
