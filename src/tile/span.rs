//! Tensor spans: extents and strides over host memory.
//!
//! A span maps an index `(i₀, …, iₙ₋₁)` inside its extents to the element
//! `offset + Σ iₖ·strideₖ` of the memory it was built over (strides in
//! elements, possibly zero or negative). Construction checks that every
//! index maps inside the memory, so no access through a span can leave it.
//!
//! [`TensorSpan`] reads a `&[E]`. [`TensorSpanMut`] takes a `&mut [E]` and can
//! be shared between threads: every access through it is atomic, which is
//! what makes the partition view's atomic updates sound (see its docs).

use super::atomic::AtomicBits;
use super::element::TileElement;
use super::shape::for_each_index;
use crate::error::{dims, Dims, Error, Result};
use smallvec::SmallVec;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

/// Extents, strides (in elements) and offset of a span, checked against the
/// length of its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanLayout {
    extents: Dims,
    strides: SmallVec<[isize; 6]>,
    offset: usize,
}

impl SpanLayout {
    /// A layout over `len` elements of memory, or an error naming `op` if an
    /// index would map outside them or the extents and strides differ in length.
    pub fn new(op: &'static str, len: usize, offset: usize, extents: &[usize], strides: &[isize]) -> Result<Self> {
        if extents.len() != strides.len() {
            return Err(Error::InvalidShape {
                op,
                shape: dims(extents),
                arg: strides.to_vec(),
                reason: format!("{} strides given for {} extents", strides.len(), extents.len()),
            });
        }
        let layout = SpanLayout {
            extents: dims(extents),
            strides: strides.iter().copied().collect(),
            offset,
        };
        if extents.contains(&0) {
            return Ok(layout);
        }
        let (low, high) = layout.reach();
        if low < 0 {
            return Err(Error::InvalidShape {
                op,
                shape: dims(extents),
                arg: strides.to_vec(),
                reason: format!("with offset {offset} the span reaches element {low}, before the memory"),
            });
        }
        if high >= len as i128 {
            return Err(Error::SpanOutOfMemory {
                op,
                extents: dims(extents),
                strides: strides.to_vec(),
                needed: usize::try_from(high + 1).unwrap_or(usize::MAX),
                len,
            });
        }
        Ok(layout)
    }

    /// The row-major layout of `extents` at offset 0.
    pub fn contiguous(op: &'static str, len: usize, extents: &[usize]) -> Result<Self> {
        // A stride that saturates belongs to extents with more elements than
        // any memory holds, which `new` reports (or to an empty span, whose
        // strides are never used).
        let mut strides: SmallVec<[isize; 6]> = SmallVec::from_elem(0, extents.len());
        let mut acc = 1isize;
        for (s, &e) in strides.iter_mut().zip(extents).rev() {
            *s = acc;
            acc = acc.saturating_mul(isize::try_from(e).unwrap_or(isize::MAX));
        }
        Self::new(op, len, 0, extents, &strides)
    }

    /// The extents, outermost first.
    pub fn extents(&self) -> &[usize] {
        &self.extents
    }

    /// The strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The element the index of all zeros maps to.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.extents.len()
    }

    /// The memory element an index maps to, or `None` if the index has the
    /// wrong length or lies outside the extents.
    pub fn offset_of(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.rank() || index.iter().zip(&self.extents).any(|(i, e)| i >= e) {
            return None;
        }
        Some(self.offset_unchecked(index))
    }

    /// The memory element of an index known to be inside the extents.
    pub(crate) fn offset_unchecked(&self, index: &[usize]) -> usize {
        let delta: isize = index.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum();
        (self.offset as isize + delta) as usize
    }

    /// The lowest and highest element offsets of a non-empty span.
    fn reach(&self) -> (i128, i128) {
        let (mut low, mut high) = (self.offset as i128, self.offset as i128);
        for (&e, &s) in self.extents.iter().zip(&self.strides) {
            let far = (e as i128 - 1) * s as i128;
            if far < 0 {
                low += far;
            } else {
                high += far;
            }
        }
        (low, high)
    }

    /// Whether no two indices map to one element.
    ///
    /// The check is exact. It first sorts the axes longer than 1 by the size
    /// of their strides: if each stride exceeds the reach of all smaller ones
    /// the map is injective. Otherwise (a zero stride, overlapping strides, or
    /// an unusual but injective interleaving) it marks every element the span
    /// reaches in a bitset, which costs one bit and at most one visit per
    /// element of memory (a span with more indices than that cannot be
    /// injective and is rejected at once).
    pub fn is_injective(&self) -> bool {
        if self.extents.contains(&0) {
            return true;
        }
        let mut axes: SmallVec<[(usize, usize); 6]> = self
            .extents
            .iter()
            .zip(&self.strides)
            .filter(|(&e, _)| e > 1)
            .map(|(&e, &s)| (s.unsigned_abs(), e))
            .collect();
        axes.sort_unstable();
        let mut reach = 0usize;
        let nested = axes.iter().all(|&(stride, extent)| {
            let ok = stride > reach;
            reach += stride * (extent - 1);
            ok
        });
        if nested {
            return true;
        }
        let (low, high) = self.reach();
        let elements = self.extents.iter().try_fold(1i128, |n, &e| n.checked_mul(e as i128));
        if elements.map_or(true, |n| n > high - low + 1) {
            // More indices than elements they can reach: two must share one.
            return false;
        }
        let mut seen = vec![0u64; ((high - low) as usize) / 64 + 1];
        let mut injective = true;
        for_each_index(&self.extents, |index| {
            let bit = (self.offset_unchecked(index) as i128 - low) as usize;
            let (word, mask) = (bit / 64, 1u64 << (bit % 64));
            injective &= seen[word] & mask == 0;
            seen[word] |= mask;
        });
        injective
    }
}

/// A read-only span over `&[E]`.
///
/// ```
/// use tilefuse::tile::TensorSpan;
///
/// let x = [0, 1, 2, 3, 4, 5];
/// let t = TensorSpan::contiguous(&x, &[2, 3]).unwrap();
/// assert_eq!(t.get(&[1, 2]), Some(5));
/// // The transpose, through strides.
/// let tt = TensorSpan::strided(&x, 0, &[3, 2], &[1, 3]).unwrap();
/// assert_eq!(tt.get(&[2, 0]), Some(2));
/// ```
#[derive(Debug, Clone)]
pub struct TensorSpan<'a, E> {
    data: &'a [E],
    layout: SpanLayout,
}

impl<'a, E: TileElement> TensorSpan<'a, E> {
    /// A row-major span of `extents` over the start of `data`.
    pub fn contiguous(data: &'a [E], extents: &[usize]) -> Result<Self> {
        let layout = SpanLayout::contiguous("TensorSpan::contiguous", data.len(), extents)?;
        Ok(TensorSpan { data, layout })
    }

    /// A span with the given offset, extents and strides (in elements).
    pub fn strided(data: &'a [E], offset: usize, extents: &[usize], strides: &[isize]) -> Result<Self> {
        let layout = SpanLayout::new("TensorSpan::strided", data.len(), offset, extents, strides)?;
        Ok(TensorSpan { data, layout })
    }

    /// The element at an index, or `None` outside the extents.
    pub fn get(&self, index: &[usize]) -> Option<E> {
        self.layout.offset_of(index).map(|o| self.data[o])
    }
}

/// A span over `&mut [E]` that stores, and that threads can share.
///
/// Every element access through it is an atomic access of the element's
/// width (plain loads and stores are relaxed atomics), so a `&TensorSpanMut`
/// can be used from several threads at once. Its clones share the memory.
///
/// # Safety argument
///
/// The span keeps the `&'a mut [E]` it was built from borrowed for `'a`, so
/// nothing else reads or writes that memory while the span or a clone lives,
/// and it never creates a reference to an element. It accesses element
/// `o` only through `Atomic*::from_ptr` on a pointer to it, where `o` comes
/// from a [`SpanLayout`] checked against the memory's length (and is checked
/// again before the access). A compile-time check in construction makes sure
/// `E` is at least as aligned as the atomic type of its size, so every
/// element pointer is aligned for it; and every access to the memory is of
/// that one size. So the rules of `from_ptr` hold: no data race, no
/// misaligned or mixed-size atomic access.
#[derive(Debug, Clone)]
pub struct TensorSpanMut<'a, E> {
    ptr: NonNull<E>,
    len: usize,
    layout: SpanLayout,
    injective: bool,
    memory: PhantomData<&'a mut [E]>,
}

// SAFETY: every access through the span is atomic (see the type's docs), and
// `E: TileElement` is `Send + Sync`.
unsafe impl<E: TileElement> Send for TensorSpanMut<'_, E> {}
// SAFETY: as for `Send`.
unsafe impl<E: TileElement> Sync for TensorSpanMut<'_, E> {}

impl<'a, E: TileElement> TensorSpanMut<'a, E> {
    /// A row-major span of `extents` over the start of `data`.
    pub fn contiguous(data: &'a mut [E], extents: &[usize]) -> Result<Self> {
        let layout = SpanLayout::contiguous("TensorSpanMut::contiguous", data.len(), extents)?;
        Self::with_layout(data, layout)
    }

    /// A span with the given offset, extents and strides (in elements).
    /// Strides that map two indices to one element are accepted, for
    /// reading; stores through such a span fail with [`Error::NotInjective`].
    pub fn strided(data: &'a mut [E], offset: usize, extents: &[usize], strides: &[isize]) -> Result<Self> {
        let layout = SpanLayout::new("TensorSpanMut::strided", data.len(), offset, extents, strides)?;
        Self::with_layout(data, layout)
    }

    fn with_layout(data: &'a mut [E], layout: SpanLayout) -> Result<Self> {
        // Every element pointer is aligned for `E`; this makes it aligned for
        // the atomic type too (it fails to compile only on targets where a
        // 64-bit integer is less aligned than its atomic, such as i686).
        const {
            assert!(size_of::<E>() == size_of::<E::Bits>());
            assert!(align_of::<E>() >= <E::Bits as AtomicBits>::ALIGN);
        }
        let ptr = NonNull::from(&mut *data).cast::<E>();
        let injective = layout.is_injective();
        Ok(TensorSpanMut {
            ptr,
            len: data.len(),
            layout,
            injective,
            memory: PhantomData,
        })
    }

    /// The element at an index (a relaxed atomic load), or `None` outside the extents.
    pub fn get(&self, index: &[usize]) -> Option<E> {
        self.layout.offset_of(index).map(|o| self.load_at(o, Ordering::Relaxed))
    }

    /// Whether no two indices map to one element, so that stores are allowed.
    pub fn is_injective(&self) -> bool {
        self.injective
    }

    /// An error naming `op` unless stores through this span are allowed.
    pub(crate) fn check_injective(&self, op: &'static str) -> Result<()> {
        if self.injective {
            return Ok(());
        }
        Err(Error::NotInjective {
            op,
            extents: dims(self.layout.extents()),
            strides: self.layout.strides().to_vec(),
        })
    }

    /// A pointer to element `offset` of the memory, as its atomic bits.
    fn bits_at(&self, offset: usize) -> *mut E::Bits {
        assert!(
            offset < self.len,
            "element {offset} is outside a span of {} elements",
            self.len
        );
        // SAFETY: `offset` is inside the memory the span borrows.
        unsafe { self.ptr.as_ptr().add(offset).cast() }
    }

    /// An atomic load of element `offset` of the memory.
    pub(crate) fn load_at(&self, offset: usize, order: Ordering) -> E {
        // SAFETY: see the type's safety argument; `bits_at` checked `offset`.
        E::from_bits(unsafe { AtomicBits::load(self.bits_at(offset), order) })
    }

    /// An atomic store to element `offset` of the memory.
    pub(crate) fn store_at(&self, offset: usize, value: E, order: Ordering) {
        // SAFETY: as for `load_at`.
        unsafe { AtomicBits::store(self.bits_at(offset), value.to_bits(), order) }
    }

    /// A pointer for the atomic read-modify-write operations of `atomic.rs`.
    pub(crate) fn rmw_ptr(&self, offset: usize) -> *mut E::Bits {
        self.bits_at(offset)
    }
}

/// A span a partition view can load from: [`TensorSpan`] or [`TensorSpanMut`].
pub trait TensorSpanLike: sealed::Sealed {
    /// The element type.
    type Element: TileElement;
    /// The extents, strides and offset.
    fn layout(&self) -> &SpanLayout;
    /// Reads element `offset` of the memory (a checked offset from the layout).
    #[doc(hidden)]
    fn read(&self, offset: usize) -> Self::Element;
}

mod sealed {
    pub trait Sealed {}
    impl<E> Sealed for super::TensorSpan<'_, E> {}
    impl<E> Sealed for super::TensorSpanMut<'_, E> {}
}

impl<E: TileElement> TensorSpanLike for TensorSpan<'_, E> {
    type Element = E;
    fn layout(&self) -> &SpanLayout {
        &self.layout
    }
    fn read(&self, offset: usize) -> E {
        self.data[offset]
    }
}

impl<E: TileElement> TensorSpanLike for TensorSpanMut<'_, E> {
    type Element = E;
    fn layout(&self) -> &SpanLayout {
        &self.layout
    }
    fn read(&self, offset: usize) -> E {
        self.load_at(offset, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::SpanLayout;

    fn injective(extents: &[usize], strides: &[isize]) -> bool {
        SpanLayout::new("t", 1000, 100, extents, strides)
            .unwrap()
            .is_injective()
    }

    #[test]
    fn injectivity_is_exact() {
        assert!(injective(&[4, 8], &[8, 1]));
        assert!(injective(&[4, 8], &[1, 4]));
        assert!(injective(&[1, 3], &[0, 5]), "a zero stride on an axis of 1 is harmless");
        assert!(!injective(&[3, 2], &[0, 1]), "a zero stride on an axis longer than 1");
        assert!(!injective(&[2, 3], &[2, 1]), "overlapping rows");
        assert!(injective(&[3, 2], &[2, 3]), "interleaved but injective: 0 2 4 3 5 7");
        assert!(!injective(&[4, 3], &[2, 3]), "index (3, 0) and (0, 2) both reach 6");
        assert!(injective(&[2, 2], &[-1, 2]));
        assert!(injective(&[0, 5], &[0, 0]), "an empty span");
        assert!(
            !injective(&[usize::MAX, usize::MAX], &[0, 0]),
            "rejected without visiting the indices"
        );
    }

    #[test]
    fn layouts_stay_inside_memory() {
        assert!(SpanLayout::new("t", 32, 0, &[4, 8], &[8, 1]).is_ok());
        assert!(SpanLayout::new("t", 31, 0, &[4, 8], &[8, 1]).is_err());
        assert!(SpanLayout::new("t", 10, 3, &[4], &[-1]).is_ok());
        assert!(SpanLayout::new("t", 10, 2, &[4], &[-1]).is_err());
        assert!(SpanLayout::new("t", 0, 0, &[0, 8], &[8, 1]).is_ok());
    }
}
