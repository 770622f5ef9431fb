//! Element types of tiles and the conversions between them.
//!
//! # Conversions
//!
//! Every element type converts to every other through an explicit call
//! ([`Tile::convert`](super::Tile::convert)); the conversions that can lose no
//! value (the "non-narrowing" ones of C++ list-initialization) also exist as
//! `From` impls between tiles of the same shape:
//!
//! | from | non-narrowing to |
//! | --- | --- |
//! | `bool` | every integer type |
//! | `i8` | `i16`, `i32`, `i64` |
//! | `i16` | `i32`, `i64` |
//! | `i32` | `i64` |
//! | `u8` | `u16`, `u32`, `u64`, `i16`, `i32`, `i64` |
//! | `u16` | `u32`, `u64`, `i32`, `i64` |
//! | `u32` | `u64`, `i64` |
//! | `f16`, `bf16` | `f32`, `f64` |
//! | `f32` | `f64` |
//!
//! As in C++, an integer to floating-point conversion counts as narrowing
//! even where the value happens to fit. The explicit conversion wraps
//! integers to the target width (two's complement), rounds to nearest for
//! floats, and truncates floats toward zero for integers, saturating at the
//! target's range with NaN giving zero (Rust's `as`, where C++ would leave an
//! out-of-range value undefined). Any non-zero value, NaN included, is `true`.

use super::atomic::AtomicBits;
use crate::ops::{AtomicSupport, Padding};
use half::{bf16, f16};
use std::fmt;

mod sealed {
    pub trait Sealed {}
}

/// A value of any element type, widened losslessly; every explicit element
/// conversion passes through it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wide {
    /// A boolean.
    Bool(bool),
    /// An integer of any width.
    Int(i128),
    /// A floating-point value of any width.
    Float(f64),
}

/// A scalar type a tile can hold: `bool`, `i8`, `i16`, `i32`, `i64`, `u8`,
/// `u16`, `u32`, `u64`, `f16`, `bf16`, `f32` or `f64`.
///
/// The trait is sealed; its hidden items are the plumbing of conversions and
/// of atomic access and are not part of the public API.
pub trait TileElement:
    sealed::Sealed + Copy + Default + PartialEq + PartialOrd + fmt::Debug + Send + Sync + 'static
{
    /// The Rust name of the type (`i32`, `bf16`, ...), used in messages.
    const NAME: &'static str;
    /// Whether this is a floating-point type.
    const IS_FLOAT: bool;
    #[doc(hidden)]
    const ATOMIC: AtomicSupport;
    /// The unsigned integer of the same size, through which atomics access the element.
    #[doc(hidden)]
    type Bits: AtomicBits;
    #[doc(hidden)]
    fn to_bits(self) -> Self::Bits;
    #[doc(hidden)]
    fn from_bits(bits: Self::Bits) -> Self;
    #[doc(hidden)]
    fn to_wide(self) -> Wide;
    #[doc(hidden)]
    fn from_wide(w: Wide) -> Self;

    /// The value of `padding` in this type, or `None` where the type has no
    /// such value (every padding but zero needs a floating-point type).
    fn padding(padding: Padding) -> Option<Self> {
        if Self::IS_FLOAT || !padding.needs_float() {
            Some(Self::from_wide(Wide::Float(padding.value())))
        } else {
            None
        }
    }

    /// The value converted to `F` (possibly narrowing; see the module docs).
    fn convert<F: TileElement>(self) -> F {
        F::from_wide(self.to_wide())
    }
}

macro_rules! int_element {
    ($($t:ty, $bits:ty, $atomic:ident);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl TileElement for $t {
            const NAME: &'static str = stringify!($t);
            const IS_FLOAT: bool = false;
            const ATOMIC: AtomicSupport = AtomicSupport::$atomic;
            type Bits = $bits;
            fn to_bits(self) -> $bits { self as $bits }
            fn from_bits(bits: $bits) -> Self { bits as $t }
            fn to_wide(self) -> Wide { Wide::Int(self as i128) }
            fn from_wide(w: Wide) -> Self {
                match w {
                    Wide::Bool(b) => b as $t,
                    Wide::Int(i) => i as $t,
                    Wide::Float(x) => x as $t,
                }
            }
        }
    )*};
}
int_element!(
    i8, u8, None; i16, u16, None; i32, u32, Integer; i64, u64, Integer;
    u8, u8, None; u16, u16, None; u32, u32, Integer; u64, u64, Integer;
);

macro_rules! float_element {
    ($($t:ty, $bits:ty, $to_f64:expr, $from_f64:expr);* $(;)?) => {$(
        impl sealed::Sealed for $t {}
        impl TileElement for $t {
            const NAME: &'static str = stringify!($t);
            const IS_FLOAT: bool = true;
            const ATOMIC: AtomicSupport = AtomicSupport::Float;
            type Bits = $bits;
            fn to_bits(self) -> $bits { self.to_bits() }
            fn from_bits(bits: $bits) -> Self { <$t>::from_bits(bits) }
            fn to_wide(self) -> Wide { Wide::Float(($to_f64)(self)) }
            fn from_wide(w: Wide) -> Self {
                ($from_f64)(match w {
                    Wide::Bool(b) => b as u8 as f64,
                    // Rounding an i128 straight to f64 is a single rounding,
                    // and every integer that survives it is exact in f64.
                    Wide::Int(i) => i as f64,
                    Wide::Float(x) => x,
                })
            }
        }
    )*};
}
float_element!(
    f16, u16, f16::to_f64, f16::from_f64;
    bf16, u16, bf16::to_f64, bf16::from_f64;
    f32, u32, |x: f32| x as f64, |x: f64| x as f32;
    f64, u64, |x: f64| x, |x: f64| x;
);

impl sealed::Sealed for bool {}
impl TileElement for bool {
    const NAME: &'static str = "bool";
    const IS_FLOAT: bool = false;
    const ATOMIC: AtomicSupport = AtomicSupport::None;
    type Bits = u8;
    fn to_bits(self) -> u8 {
        self as u8
    }
    fn from_bits(bits: u8) -> Self {
        bits != 0
    }
    fn to_wide(self) -> Wide {
        Wide::Bool(self)
    }
    fn from_wide(w: Wide) -> Self {
        match w {
            Wide::Bool(b) => b,
            Wide::Int(i) => i != 0,
            Wide::Float(x) => x != 0.0,
        }
    }
}

/// Element types with arithmetic: every integer and floating-point type.
///
/// Integer arithmetic wraps (two's complement) where C++ would leave signed
/// overflow undefined; integer division or remainder by zero panics, as in
/// Rust. `f16` and `bf16` compute each operation in `f32` and round once.
/// `tile_max` and `tile_min` propagate NaN.
pub trait Numeric: TileElement {
    /// The multiplicative identity.
    const ONE: Self;
    /// The least value (`-inf` for floats), the identity of `max`.
    const LOWEST: Self;
    /// The greatest value (`+inf` for floats), the identity of `min`.
    const HIGHEST: Self;
    /// The type sums and products accumulate in: `f32` for `f16` and `bf16`,
    /// the type itself otherwise.
    type Acc: Numeric;
    /// The value in the accumulator type.
    fn to_acc(self) -> Self::Acc;
    /// An accumulated value rounded back to this type.
    fn from_acc(acc: Self::Acc) -> Self;
    /// `self + rhs`.
    fn tile_add(self, rhs: Self) -> Self;
    /// `self - rhs`.
    fn tile_sub(self, rhs: Self) -> Self;
    /// `self * rhs`.
    fn tile_mul(self, rhs: Self) -> Self;
    /// `self / rhs`.
    fn tile_div(self, rhs: Self) -> Self;
    /// `self % rhs` (the sign of `self`, as Rust's `%` and C's `fmod`).
    fn tile_rem(self, rhs: Self) -> Self;
    /// `-self`.
    fn tile_neg(self) -> Self;
    /// The greater of the two, NaN if either is NaN.
    fn tile_max(self, rhs: Self) -> Self {
        nan_or(self, rhs, rhs > self)
    }
    /// The lesser of the two, NaN if either is NaN.
    fn tile_min(self, rhs: Self) -> Self {
        nan_or(self, rhs, rhs < self)
    }
}

/// `a` if it is NaN, else `b` if it is NaN or `take_b`, else `a`.
fn nan_or<E: PartialOrd>(a: E, b: E, take_b: bool) -> E {
    let is_nan = |x: &E| x.partial_cmp(x).is_none();
    if !is_nan(&a) && (take_b || is_nan(&b)) {
        b
    } else {
        a
    }
}

macro_rules! int_numeric {
    ($($t:ty),*) => {$(
        impl Numeric for $t {
            const ONE: Self = 1;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            type Acc = $t;
            fn to_acc(self) -> $t { self }
            fn from_acc(acc: $t) -> Self { acc }
            fn tile_add(self, rhs: Self) -> Self { self.wrapping_add(rhs) }
            fn tile_sub(self, rhs: Self) -> Self { self.wrapping_sub(rhs) }
            fn tile_mul(self, rhs: Self) -> Self { self.wrapping_mul(rhs) }
            fn tile_div(self, rhs: Self) -> Self { self.wrapping_div(rhs) }
            fn tile_rem(self, rhs: Self) -> Self { self.wrapping_rem(rhs) }
            fn tile_neg(self) -> Self { self.wrapping_neg() }
        }
    )*};
}
int_numeric!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_numeric {
    ($($t:ty, $one:expr, $acc:ty, $to:expr, $from:expr);*) => {$(
        impl Numeric for $t {
            const ONE: Self = $one;
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            type Acc = $acc;
            fn to_acc(self) -> $acc { ($to)(self) }
            fn from_acc(acc: $acc) -> Self { ($from)(acc) }
            fn tile_add(self, rhs: Self) -> Self { self + rhs }
            fn tile_sub(self, rhs: Self) -> Self { self - rhs }
            fn tile_mul(self, rhs: Self) -> Self { self * rhs }
            fn tile_div(self, rhs: Self) -> Self { self / rhs }
            fn tile_rem(self, rhs: Self) -> Self { self % rhs }
            fn tile_neg(self) -> Self { -self }
        }
    )*};
}
float_numeric!(
    f16, f16::ONE, f32, f16::to_f32, f16::from_f32;
    bf16, bf16::ONE, f32, bf16::to_f32, bf16::from_f32;
    f32, 1.0, f32, |x| x, |x| x;
    f64, 1.0, f64, |x| x, |x| x
);

/// Element types with bitwise `&`, `|`, `^` and `!`: `bool` and every integer type.
pub trait Bitwise:
    TileElement
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
}

impl Bitwise for bool {}
impl Bitwise for i8 {}
impl Bitwise for i16 {}
impl Bitwise for i32 {}
impl Bitwise for i64 {}
impl Bitwise for u8 {}
impl Bitwise for u16 {}
impl Bitwise for u32 {}
impl Bitwise for u64 {}

/// Calls `$m!(from, to)` for every non-narrowing conversion between two
/// different element types (the table in the module docs).
macro_rules! for_each_widening {
    ($m:ident) => {
        $m!(bool => i8, i16, i32, i64, u8, u16, u32, u64);
        $m!(i8 => i16, i32, i64);
        $m!(i16 => i32, i64);
        $m!(i32 => i64);
        $m!(u8 => u16, u32, u64, i16, i32, i64);
        $m!(u16 => u32, u64, i32, i64);
        $m!(u32 => u64, i64);
        $m!(half::f16 => f32, f64);
        $m!(half::bf16 => f32, f64);
        $m!(f32 => f64);
    };
}
pub(crate) use for_each_widening;

/// Calls `$m!(t)` for every element type.
macro_rules! for_each_element {
    ($m:ident) => {
        $m!(
            bool,
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            half::f16,
            half::bf16,
            f32,
            f64
        );
    };
}
pub(crate) use for_each_element;
