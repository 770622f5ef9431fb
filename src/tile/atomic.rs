//! Atomic partition accesses: `atomic_load`, `atomic_store` and the
//! read-modify-write updates `atomic_and/or/xor/max/min/add/sub`, each with a
//! masked form, on a [`PartitionView`] over a [`TensorSpanMut`].
//!
//! These are real atomics on host memory: each element is accessed through
//! the `std::sync::atomic` type of its size (`AtomicU8` to `AtomicU64`).
//! `and`, `or`, `xor`, integer `add` and `sub` are single `fetch_*`
//! instructions (two's complement, so they serve signed and unsigned types
//! alike and wrap on overflow where the reference leaves signed overflow
//! undefined); `max`, `min` and floating-point `add` and `sub` are
//! compare-exchange loops. The methods take `&self`, so threads sharing one
//! view lose no update.
//!
//! # Allowed orders, scopes and element types
//!
//! | operation | memory order | thread scope | element types |
//! | --- | --- | --- | --- |
//! | `atomic_load` | relaxed, acquire | any | any |
//! | `atomic_store` | relaxed, release | any | any |
//! | `atomic_and/or/xor/max/min` | relaxed | block, device | `i32`, `u32`, `i64`, `u64` |
//! | `atomic_add/sub` | relaxed | block, device | those and `f16`, `bf16`, `f32`, `f64` |
//!
//! Any other order or scope is [`Error::InvalidOrdering`]. Element types are
//! checked at compile time through [`AtomicInteger`] and [`AtomicArith`];
//! [`PartitionView::atomic_update`], which takes the operation as a value
//! for callers that dispatch at run time, checks them at run time instead
//! ([`Error::UnsupportedDType`]). On the host every atomic is system-wide,
//! at least as strong as the block or device scope asked for. Floating-point
//! `add` and `sub` compute in f64 and round once to the element type, which
//! is the correctly rounded result (f16 and bf16 included).
//!
//! ```
//! use tilefuse::tile::{MemoryOrder, PartitionView, Tile, TensorSpanMut, ThreadScope, S1};
//!
//! let mut x = [1u32, 2, 3, 4];
//! let p = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[4])?, S1::<2>)?;
//! p.atomic_add(Tile::full(10), MemoryOrder::Relaxed, ThreadScope::Device, [1])?;
//! drop(p);
//! assert_eq!(x, [1, 2, 13, 14]);
//! # Ok::<(), tilefuse::Error>(())
//! ```

use super::element::{TileElement, Wide};
use super::partition::PartitionView;
use super::shape::{PartitionIndex, TileShape};
use super::span::TensorSpanMut;
use super::value::Tile;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::ops::{AtomicOp, AtomicSupport, MemoryOrder, Padding, ThreadScope};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The unsigned integers `u8` to `u64` as the bits of an element, with the
/// atomic operations of their `std` atomic type on a raw pointer.
///
/// # Safety
///
/// Every function takes a pointer that must satisfy `Atomic*::from_ptr`:
/// valid and aligned for the atomic type, and accessed only atomically and
/// with this one size while the call runs.
#[doc(hidden)]
pub trait AtomicBits: Copy + Eq + Send + Sync + 'static {
    /// The alignment of the atomic type.
    const ALIGN: usize;
    /// `load`.
    unsafe fn load(ptr: *mut Self, order: Ordering) -> Self;
    /// `store`.
    unsafe fn store(ptr: *mut Self, value: Self, order: Ordering);
    /// `fetch_and`.
    unsafe fn fetch_and(ptr: *mut Self, value: Self, order: Ordering);
    /// `fetch_or`.
    unsafe fn fetch_or(ptr: *mut Self, value: Self, order: Ordering);
    /// `fetch_xor`.
    unsafe fn fetch_xor(ptr: *mut Self, value: Self, order: Ordering);
    /// `fetch_add` (wrapping).
    unsafe fn fetch_add(ptr: *mut Self, value: Self, order: Ordering);
    /// `fetch_sub` (wrapping).
    unsafe fn fetch_sub(ptr: *mut Self, value: Self, order: Ordering);
    /// Replaces the value `v` with `f(v)` in a compare-exchange loop.
    unsafe fn update(ptr: *mut Self, order: Ordering, f: impl FnMut(Self) -> Self);
}

macro_rules! atomic_bits {
    ($($t:ty => $atomic:ident),*) => {$(
        impl AtomicBits for $t {
            const ALIGN: usize = std::mem::align_of::<$atomic>();
            unsafe fn load(ptr: *mut Self, order: Ordering) -> Self {
                // SAFETY: the caller upholds `from_ptr`'s contract (see the trait).
                unsafe { $atomic::from_ptr(ptr) }.load(order)
            }
            unsafe fn store(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.store(value, order)
            }
            unsafe fn fetch_and(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.fetch_and(value, order);
            }
            unsafe fn fetch_or(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.fetch_or(value, order);
            }
            unsafe fn fetch_xor(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.fetch_xor(value, order);
            }
            unsafe fn fetch_add(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.fetch_add(value, order);
            }
            unsafe fn fetch_sub(ptr: *mut Self, value: Self, order: Ordering) {
                // SAFETY: as for `load`.
                unsafe { $atomic::from_ptr(ptr) }.fetch_sub(value, order);
            }
            unsafe fn update(ptr: *mut Self, order: Ordering, mut f: impl FnMut(Self) -> Self) {
                // SAFETY: as for `load`.
                let atomic = unsafe { $atomic::from_ptr(ptr) };
                // The closure always returns `Some`, so this cannot fail.
                let _ = atomic.fetch_update(order, Ordering::Relaxed, |v| Some(f(v)));
            }
        }
    )*};
}
atomic_bits!(u8 => AtomicU8, u16 => AtomicU16, u32 => AtomicU32, u64 => AtomicU64);

mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
    impl Sealed for i64 {}
    impl Sealed for u64 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Element types of `atomic_add` and `atomic_sub`: 32- and 64-bit integers,
/// `f16`, `bf16`, `f32` and `f64`.
pub trait AtomicArith: TileElement + sealed::Sealed {}

/// Element types of `atomic_and`, `atomic_or`, `atomic_xor`, `atomic_max` and
/// `atomic_min`: `i32`, `u32`, `i64` and `u64`. Other types do not compile:
///
/// ```compile_fail
/// use tilefuse::tile::{MemoryOrder, PartitionView, Tile, TensorSpanMut, ThreadScope, S1};
///
/// let mut x = [1.0f32; 2];
/// let p = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[2])?, S1::<2>)?;
/// p.atomic_and(Tile::full(1.0f32), MemoryOrder::Relaxed, ThreadScope::Device, [0])?;
/// # Ok::<(), tilefuse::Error>(())
/// ```
pub trait AtomicInteger: AtomicArith {}

impl AtomicArith for i32 {}
impl AtomicArith for u32 {}
impl AtomicArith for i64 {}
impl AtomicArith for u64 {}
impl AtomicArith for half::f16 {}
impl AtomicArith for half::bf16 {}
impl AtomicArith for f32 {}
impl AtomicArith for f64 {}
impl AtomicInteger for i32 {}
impl AtomicInteger for u32 {}
impl AtomicInteger for i64 {}
impl AtomicInteger for u64 {}

/// The `std` ordering of a memory order, or an error naming `op` if `allowed`
/// does not contain it or the scope is not among `scopes`.
fn ordering(
    op: &'static str,
    order: MemoryOrder,
    scope: ThreadScope,
    allowed: &[MemoryOrder],
    scopes: &[ThreadScope],
    reason: &'static str,
) -> Result<Ordering> {
    if !allowed.contains(&order) || !scopes.contains(&scope) {
        return Err(Error::InvalidOrdering {
            op,
            order: order.name(),
            scope: scope.name(),
            reason,
        });
    }
    Ok(match order {
        MemoryOrder::Acquire => Ordering::Acquire,
        MemoryOrder::Release => Ordering::Release,
        MemoryOrder::AcqRel => Ordering::AcqRel,
        MemoryOrder::Relaxed | MemoryOrder::Weak => Ordering::Relaxed,
    })
}

const ALL_SCOPES: &[ThreadScope] = &[ThreadScope::Block, ThreadScope::Device, ThreadScope::System];

/// Applies `op` with operand `value` to the element at `ptr`, relaxed.
///
/// # Safety
///
/// `ptr` must satisfy [`AtomicBits`]'s contract, and `E` must support `op`.
unsafe fn update_element<E: TileElement>(ptr: *mut E::Bits, op: AtomicOp, value: E) {
    let (bits, o) = (value.to_bits(), Ordering::Relaxed);
    let float = E::ATOMIC == AtomicSupport::Float;
    let combine = |k: E| -> E {
        let (k64, v64) = (as_f64(k), as_f64(value));
        match op {
            AtomicOp::Max if value > k => value,
            AtomicOp::Min if value < k => value,
            AtomicOp::Add => E::from_wide(Wide::Float(k64 + v64)),
            AtomicOp::Sub => E::from_wide(Wide::Float(k64 - v64)),
            _ => k,
        }
    };
    // SAFETY: the caller upholds the contract for `ptr`.
    unsafe {
        match op {
            AtomicOp::And => E::Bits::fetch_and(ptr, bits, o),
            AtomicOp::Or => E::Bits::fetch_or(ptr, bits, o),
            AtomicOp::Xor => E::Bits::fetch_xor(ptr, bits, o),
            AtomicOp::Add if !float => E::Bits::fetch_add(ptr, bits, o),
            AtomicOp::Sub if !float => E::Bits::fetch_sub(ptr, bits, o),
            _ => E::Bits::update(ptr, o, |b| combine(E::from_bits(b)).to_bits()),
        }
    }
}

/// A float element as f64 (only called for floating-point elements).
fn as_f64<E: TileElement>(x: E) -> f64 {
    match x.to_wide() {
        Wide::Float(f) => f,
        Wide::Int(i) => i as f64,
        Wide::Bool(b) => b as u8 as f64,
    }
}

impl<E: TileElement, S: TileShape> PartitionView<TensorSpanMut<'_, E>, S> {
    /// Loads partition `index` with atomic loads of memory order `order`
    /// (relaxed or acquire).
    pub fn atomic_load(
        &self,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<Tile<E, S>> {
        self.atomic_gather("PartitionView::atomic_load", None, order, scope, index.as_indices())
    }

    /// As [`atomic_load`](Self::atomic_load), with `padding` for the elements outside the span.
    pub fn atomic_load_masked(
        &self,
        padding: Padding,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<Tile<E, S>> {
        self.atomic_gather(
            "PartitionView::atomic_load_masked",
            Some(padding),
            order,
            scope,
            index.as_indices(),
        )
    }

    /// Stores `value` to partition `index` with atomic stores of memory order
    /// `order` (relaxed or release).
    pub fn atomic_store(
        &self,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<()> {
        self.atomic_scatter(
            "PartitionView::atomic_store",
            false,
            value,
            order,
            scope,
            index.as_indices(),
        )
    }

    /// As [`atomic_store`](Self::atomic_store), skipping the elements outside the span.
    pub fn atomic_store_masked(
        &self,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<()> {
        self.atomic_scatter(
            "PartitionView::atomic_store_masked",
            true,
            value,
            order,
            scope,
            index.as_indices(),
        )
    }

    /// Applies `op` to partition `index` with operand `value`, the element
    /// type checked at run time ([`Error::UnsupportedDType`] if `op` does not
    /// support it); for callers that choose the operation at run time.
    pub fn atomic_update(
        &self,
        op: AtomicOp,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<()>
    where
        E: Element,
    {
        self.checked_update(op, false, value, order, scope, index.as_indices())
    }

    /// As [`atomic_update`](Self::atomic_update), skipping the elements outside the span.
    pub fn atomic_update_masked(
        &self,
        op: AtomicOp,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: impl PartitionIndex<S>,
    ) -> Result<()>
    where
        E: Element,
    {
        self.checked_update(op, true, value, order, scope, index.as_indices())
    }

    fn checked_update(
        &self,
        op: AtomicOp,
        masked: bool,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: &[usize],
    ) -> Result<()>
    where
        E: Element,
    {
        if !op.supported(E::ATOMIC) {
            return Err(Error::UnsupportedDType {
                op: op.method_name(masked),
                dtype: <E as Element>::DTYPE,
                reason: match op {
                    AtomicOp::Add | AtomicOp::Sub => "needs a 32- or 64-bit integer, f16, bf16, f32 or f64",
                    _ => "needs a 32- or 64-bit integer",
                },
            });
        }
        self.update(op, masked, value, order, scope, index)
    }

    fn atomic_gather(
        &self,
        op: &'static str,
        padding: Option<Padding>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: &[usize],
    ) -> Result<Tile<E, S>> {
        let allowed = [MemoryOrder::Relaxed, MemoryOrder::Acquire];
        let o = ordering(op, order, scope, &allowed, ALL_SCOPES, "loads take relaxed or acquire")?;
        self.gather(op, index, padding, |offset| self.span().load_at(offset, o))
    }

    fn atomic_scatter(
        &self,
        op: &'static str,
        masked: bool,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: &[usize],
    ) -> Result<()> {
        let allowed = [MemoryOrder::Relaxed, MemoryOrder::Release];
        let o = ordering(op, order, scope, &allowed, ALL_SCOPES, "stores take relaxed or release")?;
        self.scatter(op, index, masked, |j, offset| {
            self.span().store_at(offset, value.as_slice()[j], o)
        })
    }

    /// Applies `op`, whose support for `E` the caller has established.
    fn update(
        &self,
        op: AtomicOp,
        masked: bool,
        value: Tile<E, S>,
        order: MemoryOrder,
        scope: ThreadScope,
        index: &[usize],
    ) -> Result<()> {
        let name = op.method_name(masked);
        let scopes = [ThreadScope::Block, ThreadScope::Device];
        ordering(
            name,
            order,
            scope,
            &[MemoryOrder::Relaxed],
            &scopes,
            "updates take relaxed order with block or device scope",
        )?;
        self.scatter(name, index, masked, |j, offset| {
            // SAFETY: the pointer comes from the span, whose safety argument
            // covers atomic access of `E`'s size; the caller checked that `E`
            // supports `op`.
            unsafe { update_element(self.span().rmw_ptr(offset), op, value.as_slice()[j]) }
        })
    }
}

/// Generates the typed update methods: `$name` and `$masked` for `$op`,
/// allowed for element types implementing `$bound`.
macro_rules! typed_updates {
    ($($bound:ident: $op:ident, $name:ident, $masked:ident, $what:literal;)*) => {
        impl<E: TileElement, S: TileShape> PartitionView<TensorSpanMut<'_, E>, S> {$(
            #[doc = concat!("Atomically replaces each element `k` of partition `index` with ", $what, " of `k` and the")]
            /// matching element of `value`; relaxed order, block or device scope.
            pub fn $name(
                &self,
                value: Tile<E, S>,
                order: MemoryOrder,
                scope: ThreadScope,
                index: impl PartitionIndex<S>,
            ) -> Result<()>
            where
                E: $bound,
            {
                self.update(AtomicOp::$op, false, value, order, scope, index.as_indices())
            }

            #[doc = concat!("As [`", stringify!($name), "`](Self::", stringify!($name), "), skipping the elements outside the span.")]
            pub fn $masked(
                &self,
                value: Tile<E, S>,
                order: MemoryOrder,
                scope: ThreadScope,
                index: impl PartitionIndex<S>,
            ) -> Result<()>
            where
                E: $bound,
            {
                self.update(AtomicOp::$op, true, value, order, scope, index.as_indices())
            }
        )*}
    };
}
typed_updates! {
    AtomicInteger: And, atomic_and, atomic_and_masked, "the bitwise AND";
    AtomicInteger: Or, atomic_or, atomic_or_masked, "the bitwise OR";
    AtomicInteger: Xor, atomic_xor, atomic_xor_masked, "the bitwise XOR";
    AtomicInteger: Max, atomic_max, atomic_max_masked, "the maximum";
    AtomicInteger: Min, atomic_min, atomic_min_masked, "the minimum";
    AtomicArith: Add, atomic_add, atomic_add_masked, "the sum";
    AtomicArith: Sub, atomic_sub, atomic_sub_masked, "the difference (`k` minus the operand)";
}
