//! Element types of tensors, their promotion table, and scalar values.
//!
//! # Promotion
//!
//! A binary op between two dtypes computes in [`DType::promote`] of them,
//! following PyTorch's table for the types tilefuse has:
//!
//! | kind of operands | result |
//! | --- | --- |
//! | same dtype | that dtype |
//! | bool with anything | the other dtype |
//! | two unsigned / two signed integers | the wider one |
//! | `u8` with `i32` or `i64` | the signed one |
//! | `u32` with `i32` | `i64`; `u32` with `i64`: `i64` |
//! | integer with float | the float |
//! | `f16` with `bf16` | `f32` |
//! | two floats otherwise | the wider one |
//!
//! A tensor op with a Rust scalar keeps the tensor's dtype when the scalar's
//! kind (bool, integer, float) is not above the tensor's; an integer tensor
//! with a float scalar becomes `f32`.

use std::fmt;

/// The element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans, stored one byte each (0 or 1).
    Bool,
    /// Unsigned 8-bit integers.
    U8,
    /// Signed 32-bit integers.
    I32,
    /// Signed 64-bit integers.
    I64,
    /// Unsigned 32-bit integers.
    U32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 9] = [
        DType::Bool,
        DType::U8,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Bytes per element.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether this is an integer type (bool excluded).
    pub const fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::I32 | DType::I64 | DType::U32)
    }

    /// Whether this is a signed integer type.
    pub const fn is_signed_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The lower-case name used in messages and printed IR (`f32`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U32 => "u32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// The dtype in which arithmetic on this dtype is carried out: f16 and
    /// bf16 compute in f32 and round once when stored.
    pub const fn compute_type(self) -> DType {
        match self {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        }
    }

    /// The result dtype of a binary op on `self` and `other` (see the module docs).
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        match (self, other) {
            (Bool, d) | (d, Bool) => d,
            (a, b) if a.is_float() && b.is_float() => match (a, b) {
                (F16, BF16) | (BF16, F16) => F32,
                _ => {
                    if a.size_in_bytes() >= b.size_in_bytes() {
                        a
                    } else {
                        b
                    }
                }
            },
            (a, b) if a.is_float() => {
                let _ = b;
                a
            }
            (a, b) if b.is_float() => {
                let _ = a;
                b
            }
            (U8, d) | (d, U8) => d,
            (U32, I32) | (I32, U32) => I64,
            (U32, I64) | (I64, U32) => I64,
            (I32, I64) | (I64, I32) => I64,
            (a, b) => unreachable!("promotion of {a} and {b} is covered above"),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A single value of some dtype, used for constants and `to_scalar`.
///
/// Floats are held as f64 and integers as i128 wide enough for every dtype,
/// so a scalar is exact until it is rounded to its dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// An integer of the given dtype.
    Int(i128, DType),
    /// A float of the given dtype.
    Float(f64, DType),
}

impl Scalar {
    /// The value rounded to `dtype`, as a scalar of that dtype.
    pub fn cast(self, dtype: DType) -> Scalar {
        let v = self.to_f64();
        match dtype {
            DType::Bool => Scalar::Bool(v != 0.0),
            d if d.is_float() => Scalar::Float(round_to(v, d), d),
            d => Scalar::Int(
                match self {
                    Scalar::Int(i, _) => wrap_int(i, d),
                    Scalar::Bool(b) => b as i128,
                    Scalar::Float(x, _) => wrap_int(float_to_int(x), d),
                },
                d,
            ),
        }
    }

    /// The dtype of this scalar.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_, d) | Scalar::Float(_, d) => d,
        }
    }

    /// The value as f64 (exact for every float dtype and for integers up to 2^53).
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i, _) => i as f64,
            Scalar::Float(x, _) => x,
        }
    }

    /// This value converted to `dtype` (as [`Scalar::cast`] converts) and
    /// stored as one element of it: the element's little-endian bytes in
    /// the low end of a `u64`, the rest zero (a bool is 0 or 1). This is how
    /// host buffers store elements, how initial fills are written, and the
    /// launch word of a kernel's scalar argument.
    pub fn element_bits(self, dtype: DType) -> u64 {
        let v = self.cast(dtype);
        let int = match v {
            Scalar::Int(x, _) => x,
            Scalar::Bool(b) => b as i128,
            Scalar::Float(x, _) => x as i128,
        };
        match dtype {
            DType::Bool | DType::U8 => int as u8 as u64,
            DType::I32 => int as i32 as u32 as u64,
            DType::U32 => int as u32 as u64,
            DType::I64 => int as i64 as u64,
            DType::F16 => half::f16::from_f64(v.to_f64()).to_bits() as u64,
            DType::BF16 => half::bf16::from_f64(v.to_f64()).to_bits() as u64,
            DType::F32 => (v.to_f64() as f32).to_bits() as u64,
            DType::F64 => v.to_f64().to_bits(),
        }
    }

    /// Whether the value is zero (or false).
    pub fn is_zero(self) -> bool {
        self.to_f64() == 0.0
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i, d) => write!(f, "{i}:{d}"),
            Scalar::Float(x, d) => write!(f, "{x:?}:{d}"),
        }
    }
}

/// Rounds an f64 to the nearest value of float dtype `d`, returned as f64.
pub fn round_to(v: f64, d: DType) -> f64 {
    match d {
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

/// Float to integer as Rust's `as` does for i64 (truncating, saturating, NaN to 0).
fn float_to_int(x: f64) -> i128 {
    x as i64 as i128
}

/// Wraps an integer to the range of integer dtype `d` (two's complement).
pub fn wrap_int(i: i128, d: DType) -> i128 {
    match d {
        DType::U8 => i as u8 as i128,
        DType::I32 => i as i32 as i128,
        DType::U32 => i as u32 as i128,
        DType::I64 => i as i64 as i128,
        DType::Bool => (i != 0) as i128,
        _ => i,
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the element type of a tensor dtype.
///
/// Implemented for `bool, u8, i32, i64, u32, half::f16, half::bf16, f32, f64`.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static + sealed::Sealed {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// The value as a [`Scalar`].
    fn to_scalar(self) -> Scalar;
    /// The value of a scalar, rounded or wrapped to this type.
    fn from_scalar(s: Scalar) -> Self;
    /// The value as f64.
    fn to_f64(self) -> f64 {
        self.to_scalar().to_f64()
    }
}

macro_rules! int_element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_scalar(self) -> Scalar { Scalar::Int(self as i128, DType::$d) }
            fn from_scalar(s: Scalar) -> Self {
                match s.cast(DType::$d) { Scalar::Int(i, _) => i as $t, _ => unreachable!() }
            }
        }
    )*};
}
int_element!(u8 => U8, i32 => I32, i64 => I64, u32 => U32);

macro_rules! float_element {
    ($($t:ty => $d:ident, $to:expr, $from:expr);*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_scalar(self) -> Scalar { Scalar::Float(($to)(self), DType::$d) }
            fn from_scalar(s: Scalar) -> Self { ($from)(s.to_f64()) }
        }
    )*};
}
float_element!(
    half::f16 => F16, |x: half::f16| x.to_f64(), half::f16::from_f64;
    half::bf16 => BF16, |x: half::bf16| x.to_f64(), half::bf16::from_f64;
    f32 => F32, |x: f32| x as f64, |v: f64| v as f32;
    f64 => F64, |x: f64| x, |v: f64| v
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        !s.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::DType::{self, *};

    #[test]
    fn promotion_is_symmetric_and_idempotent() {
        for a in DType::ALL {
            assert_eq!(a.promote(a), a);
            for b in DType::ALL {
                assert_eq!(a.promote(b), b.promote(a), "{a} {b}");
            }
        }
    }

    #[test]
    fn promotion_table() {
        let check = |a: DType, b: DType, want: DType| assert_eq!(a.promote(b), want, "{a} with {b}");
        check(Bool, U8, U8);
        check(Bool, F16, F16);
        check(U8, I32, I32);
        check(U32, I32, I64);
        check(U32, I64, I64);
        check(I32, I64, I64);
        check(I64, F16, F16);
        check(F16, BF16, F32);
        check(BF16, F32, F32);
        check(F32, F64, F64);
    }
}
