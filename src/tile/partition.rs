//! `PartitionView`: a tensor span divided into tiles of a static shape.
//!
//! With tile shape `S` of rank `N`, partition index `I` and an index `J`
//! inside `S`, the partition view mapping is
//! `p(I, J) = (i₀·S₀ + j₀, …, iₙ₋₁·Sₙ₋₁ + jₙ₋₁)`, and the index space is every
//! `I` with `iₖ·Sₖ < eₖ` on each axis (`⌈eₖ / Sₖ⌉` partitions along axis `k`).
//!
//! # Where the reference leaves behavior undefined
//!
//! Each such case is an error here, checked before any memory is touched (so
//! a failed call changes nothing):
//!
//! 1. an index whose length is not the rank: [`Error::RankMismatch`] (a
//!    `[usize; N]` index of the wrong length does not compile);
//! 2. an index outside the index space: [`Error::PartitionOutOfRange`];
//! 3. an unmasked access to a partition partly outside the span:
//!    [`Error::PartlyOutOfBounds`];
//! 4. a store or atomic update through a span that maps two indices to one
//!    element: [`Error::NotInjective`]. Loads from such a span are allowed
//!    (each index reads its element), where the reference leaves them undefined;
//! 5. a padding the element type has no value for (NaN on integers):
//!    [`Error::IncompatiblePadding`];
//! 6. for atomics, a memory order or scope the operation does not allow, and
//!    for the runtime-dispatched update an element type it does not support
//!    (see [`super::atomic`]).

use super::element::TileElement;
use super::shape::{for_each_index, PartitionIndex, TileShape};
use super::span::{TensorSpanLike, TensorSpanMut};
use super::value::Tile;
use crate::error::{dims, Dims, Error, Result};
use crate::ops::Padding;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;

/// A tensor span divided into tiles of shape `S` that can be loaded and
/// stored whole; see the module docs for the mapping and the errors.
///
/// ```
/// use tilefuse::tile::{PartitionView, Tile, TensorSpan, S2};
///
/// let x: Vec<i32> = (0..32).collect();
/// let t = TensorSpan::contiguous(&x, &[4, 8])?;
/// let p = PartitionView::new(t, S2::<2, 2>)?;
/// assert_eq!(p.index_space().as_slice(), &[2, 4]);
/// assert_eq!(p.load([1, 2])?, Tile::from([[20, 21], [28, 29]]));
/// # Ok::<(), tilefuse::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PartitionView<Sp, S> {
    span: Sp,
    shape: S,
}

impl<Sp: TensorSpanLike, S: TileShape> PartitionView<Sp, S> {
    /// Divides `span` into tiles of `shape`; an error if their ranks differ or
    /// the tile shape has an empty extent.
    pub fn new(span: Sp, shape: S) -> Result<Self> {
        let extents = span.layout().extents();
        if extents.len() != S::RANK {
            return Err(Error::RankMismatch {
                op: "PartitionView::new",
                given: extents.len(),
                rank: S::RANK,
                extents: dims(extents),
                tile: dims(S::EXTENTS),
            });
        }
        if S::EXTENTS.contains(&0) {
            return Err(Error::InvalidShape {
                op: "PartitionView::new",
                shape: dims(extents),
                arg: S::EXTENTS.iter().map(|&e| e as isize).collect(),
                reason: "a tile shape needs extents of at least 1".into(),
            });
        }
        Ok(PartitionView { span, shape })
    }

    /// The span this view divides.
    pub fn span(&self) -> &Sp {
        &self.span
    }

    /// The tile shape.
    pub fn shape(&self) -> S {
        self.shape
    }

    /// The number of partitions along each axis: `⌈extent / tile extent⌉`.
    pub fn index_space(&self) -> Dims {
        let extents = self.span.layout().extents();
        extents.iter().zip(S::EXTENTS).map(|(&e, &s)| e.div_ceil(s)).collect()
    }

    /// Whether partition `index` lies wholly inside the span (so unmasked
    /// accesses to it are allowed); an error if it is not in the index space.
    pub fn is_fully_in_bounds(&self, index: impl PartitionIndex<S>) -> Result<bool> {
        let index = index.as_indices();
        self.check_index("PartitionView::is_fully_in_bounds", index)?;
        Ok(self.fully_in_bounds(index))
    }

    /// Loads partition `index`, which must lie wholly inside the span.
    pub fn load(&self, index: impl PartitionIndex<S>) -> Result<Tile<Sp::Element, S>> {
        self.gather("PartitionView::load", index.as_indices(), None, |o| self.span.read(o))
    }

    /// Loads partition `index`, with `padding` for the elements outside the span.
    pub fn load_masked(&self, padding: Padding, index: impl PartitionIndex<S>) -> Result<Tile<Sp::Element, S>> {
        self.gather("PartitionView::load_masked", index.as_indices(), Some(padding), |o| {
            self.span.read(o)
        })
    }

    /// Checks that `index` has the rank and lies in the index space.
    fn check_index(&self, op: &'static str, index: &[usize]) -> Result<()> {
        let extents = self.span.layout().extents();
        if index.len() != S::RANK {
            return Err(Error::RankMismatch {
                op,
                given: index.len(),
                rank: S::RANK,
                extents: dims(extents),
                tile: dims(S::EXTENTS),
            });
        }
        let space = self.index_space();
        if index.iter().zip(&space).any(|(i, n)| i >= n) {
            return Err(Error::PartitionOutOfRange {
                op,
                index: dims(index),
                space,
                extents: dims(extents),
                tile: dims(S::EXTENTS),
            });
        }
        Ok(())
    }

    /// Whether partition `index` (in the index space) lies wholly inside the span.
    fn fully_in_bounds(&self, index: &[usize]) -> bool {
        let extents = self.span.layout().extents();
        index
            .iter()
            .zip(S::EXTENTS)
            .zip(extents)
            .all(|((&i, &s), &e)| (i + 1) * s <= e)
    }

    /// Checks `index` for `op` (see the module docs); an unmasked access also
    /// needs the partition wholly inside the span.
    pub(crate) fn check(&self, op: &'static str, index: &[usize], masked: bool) -> Result<()> {
        self.check_index(op, index)?;
        if !masked && !self.fully_in_bounds(index) {
            return Err(Error::PartlyOutOfBounds {
                op,
                index: dims(index),
                extents: dims(self.span.layout().extents()),
                tile: dims(S::EXTENTS),
            });
        }
        Ok(())
    }

    /// Calls `f(j, offset)` for each element of checked partition `index`,
    /// where `j` is its row-major position in the tile and `offset` the memory
    /// element `p(I, J)` maps to, `None` outside the span.
    pub(crate) fn for_each_element(&self, index: &[usize], mut f: impl FnMut(usize, Option<usize>)) {
        let layout = self.span.layout();
        let extents = layout.extents();
        let mut mapped: SmallVec<[usize; 6]> = SmallVec::from_elem(0, S::RANK);
        let mut j = 0;
        for_each_index(S::EXTENTS, |within| {
            for k in 0..S::RANK {
                mapped[k] = index[k] * S::EXTENTS[k] + within[k];
            }
            let inside = mapped.iter().zip(extents).all(|(p, e)| p < e);
            f(j, inside.then(|| layout.offset_unchecked(&mapped)));
            j += 1;
        });
    }

    /// The value of `padding` in the element type, or an error naming `op`.
    fn padding_value(&self, op: &'static str, padding: Padding) -> Result<Sp::Element> {
        Sp::Element::padding(padding).ok_or_else(|| Error::IncompatiblePadding {
            op,
            padding,
            element: Sp::Element::NAME,
            extents: dims(self.span.layout().extents()),
            tile: dims(S::EXTENTS),
        })
    }

    /// Loads partition `index` for `op` through `read`; masked when a padding is given.
    pub(crate) fn gather(
        &self,
        op: &'static str,
        index: &[usize],
        padding: Option<Padding>,
        read: impl Fn(usize) -> Sp::Element,
    ) -> Result<Tile<Sp::Element, S>> {
        let fill = match padding {
            Some(p) => self.padding_value(op, p)?,
            None => Sp::Element::default(),
        };
        self.check(op, index, padding.is_some())?;
        let mut tile = Tile::full(fill);
        let out = tile.as_mut_slice();
        self.for_each_element(index, |j, offset| {
            if let Some(o) = offset {
                out[j] = read(o);
            }
        });
        Ok(tile)
    }
}

impl<E: TileElement, S: TileShape> PartitionView<TensorSpanMut<'_, E>, S> {
    /// Stores `value` to partition `index`, which must lie wholly inside the
    /// span. A tile of another element type converts first, with `.into()`
    /// where the conversion does not narrow (the reference's tile conversion).
    pub fn store(&self, value: Tile<E, S>, index: impl PartitionIndex<S>) -> Result<()> {
        self.scatter("PartitionView::store", index.as_indices(), false, |j, o| {
            self.span().store_at(o, value.as_slice()[j], Ordering::Relaxed)
        })
    }

    /// Stores `value` to partition `index`, skipping the elements outside the span.
    pub fn store_masked(&self, value: Tile<E, S>, index: impl PartitionIndex<S>) -> Result<()> {
        self.scatter("PartitionView::store_masked", index.as_indices(), true, |j, o| {
            self.span().store_at(o, value.as_slice()[j], Ordering::Relaxed)
        })
    }

    /// Checks a write for `op` and calls `write(j, offset)` for each element
    /// of partition `index` inside the span.
    pub(crate) fn scatter(
        &self,
        op: &'static str,
        index: &[usize],
        masked: bool,
        write: impl Fn(usize, usize),
    ) -> Result<()> {
        self.check(op, index, masked)?;
        self.span().check_injective(op)?;
        self.for_each_element(index, |j, offset| {
            if let Some(o) = offset {
                write(j, o);
            }
        });
        Ok(())
    }
}
