//! Elementwise tile kernels: unary and binary ops, select and cast.
//!
//! Each entry point dispatches on the dtype once and then runs one tight,
//! monomorphised loop over the tile, which the compiler vectorises where the
//! op allows. Semantics follow `graph::op`: float math in the value's own
//! dtype with the standard library's functions (the CPU has one math mode:
//! `MathMode::Fast` computes the same as `Precise`), NaN-propagating
//! `Maximum`/`Minimum`, wrapping integer arithmetic, truncating integer
//! division with `x / 0 = 0`, round half to even. `f16`/`bf16` tiles are only
//! selected and cast: the IR computes on them in f32.

use super::buffer::{malformed, typed, typed_mut, unsupported, Bits, BitsMut, Buf, Elem};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::reference::erf::gelu_erf;
use crate::ops::{BinaryOp, UnaryOp};
use half::{bf16, f16};

/// The arithmetic element types (every dtype but bool, f16 and bf16).
pub(crate) trait Num: Elem + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    /// The smallest value (`-inf` for floats): the identity of `maximum`.
    const LOWEST: Self;
    /// The largest value (`+inf` for floats): the identity of `minimum`.
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn is_nan(self) -> bool;

    /// The larger of the two, NaN if either is NaN; `self` on a tie (so
    /// `maximum(-0.0, 0.0)` is `-0.0`, as in the reference evaluator).
    #[inline(always)]
    fn maximum(self, o: Self) -> Self {
        if o > self || o.is_nan() {
            o
        } else {
            self
        }
    }

    /// The smaller of the two, NaN if either is NaN; `self` on a tie.
    #[inline(always)]
    fn minimum(self, o: Self) -> Self {
        if o < self || o.is_nan() {
            o
        } else {
            self
        }
    }
}

/// The integer element types.
pub(crate) trait Int: Num + std::ops::Not<Output = Self> {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
}

macro_rules! int_num {
    ($($t:ty, $abs:expr);*) => {$(
        impl Num for $t {
            const ZERO: $t = 0;
            const ONE: $t = 1;
            const LOWEST: $t = <$t>::MIN;
            const HIGHEST: $t = <$t>::MAX;
            #[inline(always)] fn add(self, o: $t) -> $t { self.wrapping_add(o) }
            #[inline(always)] fn sub(self, o: $t) -> $t { self.wrapping_sub(o) }
            #[inline(always)] fn mul(self, o: $t) -> $t { self.wrapping_mul(o) }
            #[inline(always)] fn div(self, o: $t) -> $t { if o == 0 { 0 } else { self.wrapping_div(o) } }
            #[inline(always)] fn is_nan(self) -> bool { false }
        }
        impl Int for $t {
            #[inline(always)] fn and(self, o: $t) -> $t { self & o }
            #[inline(always)] fn or(self, o: $t) -> $t { self | o }
            #[inline(always)] fn xor(self, o: $t) -> $t { self ^ o }
            #[inline(always)] fn neg(self) -> $t { self.wrapping_neg() }
            #[inline(always)] fn abs(self) -> $t { ($abs)(self) }
        }
    )*};
}
int_num!(u8, |x| x; u32, |x| x; i32, i32::wrapping_abs; i64, i64::wrapping_abs);

/// The float element types that are computed with (f32 and f64).
pub(crate) trait Float:
    Num
    + std::ops::Neg<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn c(v: f64) -> Self;
    fn abs(self) -> Self;
    fn exp(self) -> Self;
    fn exp2(self) -> Self;
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tanh(self) -> Self;
    /// `1 / (1 + e^-x)`.
    fn sigmoid(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_ties_even(self) -> Self;
    fn powf(self, o: Self) -> Self;
    /// Exact GELU, computed in f64 by the reference evaluator's function
    /// and rounded once.
    fn gelu_erf(self) -> Self;
}

macro_rules! float_num {
    ($($t:ident: $exp:path, $tanh:path, $sigmoid:path);*) => {$(
        impl Num for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const LOWEST: $t = <$t>::NEG_INFINITY;
            const HIGHEST: $t = <$t>::INFINITY;
            #[inline(always)] fn add(self, o: $t) -> $t { self + o }
            #[inline(always)] fn sub(self, o: $t) -> $t { self - o }
            #[inline(always)] fn mul(self, o: $t) -> $t { self * o }
            #[inline(always)] fn div(self, o: $t) -> $t { self / o }
            #[inline(always)] fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
        impl Float for $t {
            #[inline(always)] fn c(v: f64) -> $t { v as $t }
            #[inline(always)] fn abs(self) -> $t { <$t>::abs(self) }
            #[inline(always)] fn exp(self) -> $t { $exp(self) }
            #[inline(always)] fn exp2(self) -> $t { <$t>::exp2(self) }
            #[inline(always)] fn ln(self) -> $t { <$t>::ln(self) }
            #[inline(always)] fn log2(self) -> $t { <$t>::log2(self) }
            #[inline(always)] fn sqrt(self) -> $t { <$t>::sqrt(self) }
            #[inline(always)] fn sin(self) -> $t { <$t>::sin(self) }
            #[inline(always)] fn cos(self) -> $t { <$t>::cos(self) }
            #[inline(always)] fn tanh(self) -> $t { $tanh(self) }
            #[inline(always)] fn sigmoid(self) -> $t { $sigmoid(self) }
            #[inline(always)] fn floor(self) -> $t { <$t>::floor(self) }
            #[inline(always)] fn ceil(self) -> $t { <$t>::ceil(self) }
            #[inline(always)] fn round_ties_even(self) -> $t { <$t>::round_ties_even(self) }
            #[inline(always)] fn powf(self, o: $t) -> $t { <$t>::powf(self, o) }
            #[inline(always)] fn gelu_erf(self) -> $t { gelu_erf(self as f64) as $t }
        }
    )*};
}
/// f64's logistic function, as the reference computes it.
#[inline(always)]
fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

// f32 takes the branch-free forms of `vmath`, which vectorise; f64 the
// standard library's.
float_num!(f32: super::vmath::exp, super::vmath::tanh, super::vmath::sigmoid; f64: f64::exp, f64::tanh, sigmoid_f64);

/// Checks that two tiles an elementwise op pairs have the same length.
fn same_len(a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(malformed(format!("elementwise op on tiles of {a} and {b} elements")));
    }
    Ok(())
}

/// `d[i] = f(s[i])`.
#[inline(always)]
fn map1<T: Copy, U: Copy>(d: &mut [U], s: &[T], f: impl Fn(T) -> U) -> Result<()> {
    same_len(d.len(), s.len())?;
    for (d, &x) in d.iter_mut().zip(s) {
        *d = f(x);
    }
    Ok(())
}

/// `d[i] = f(a[i], b[i])`, or `d[i] = f(d[i], b[i])` when `a` is `None`.
#[inline(always)]
fn map2<T: Copy>(d: &mut [T], a: Option<&[T]>, b: &[T], f: impl Fn(T, T) -> T) -> Result<()> {
    same_len(d.len(), b.len())?;
    match a {
        Some(a) => {
            same_len(d.len(), a.len())?;
            for ((d, &x), &y) in d.iter_mut().zip(a).zip(b) {
                *d = f(x, y);
            }
        }
        None => {
            for (d, &y) in d.iter_mut().zip(b) {
                *d = f(*d, y);
            }
        }
    }
    Ok(())
}

const NO_HALF_MATH: &str = "f16/bf16 tiles are cast to f32 before arithmetic";

/// `dst = op(src)` for tiles of `dtype`.
pub(crate) fn unary(op: UnaryOp, dtype: DType, dst: &mut Buf, src: &Buf) -> Result<()> {
    match dtype {
        DType::F32 => unary_float::<f32>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::F64 => unary_float::<f64>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::U8 => unary_int::<u8>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::I32 => unary_int::<i32>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::I64 => unary_int::<i64>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::U32 => unary_int::<u32>(op, dtype, typed_mut(dst)?, typed(src)?),
        DType::Bool if op == UnaryOp::Not => map1(typed_mut::<u8>(dst)?, typed::<u8>(src)?, |x| x ^ 1),
        DType::Bool => Err(unsupported("tile unary op", dtype, "bool tiles take only `not`")),
        DType::F16 | DType::BF16 => Err(unsupported("tile unary op", dtype, NO_HALF_MATH)),
    }
}

fn unary_float<T: Float>(op: UnaryOp, dtype: DType, d: &mut [T], s: &[T]) -> Result<()> {
    use UnaryOp::*;
    let sigmoid = T::sigmoid;
    match op {
        Neg => map1(d, s, |x| -x),
        Abs => map1(d, s, T::abs),
        Exp => map1(d, s, T::exp),
        Exp2 => map1(d, s, T::exp2),
        Log => map1(d, s, T::ln),
        Log2 => map1(d, s, T::log2),
        Sqrt => map1(d, s, T::sqrt),
        Rsqrt => map1(d, s, |x| T::ONE / x.sqrt()),
        Recip => map1(d, s, |x| T::ONE / x),
        Sin => map1(d, s, T::sin),
        Cos => map1(d, s, T::cos),
        Tanh => map1(d, s, T::tanh),
        Sigmoid => map1(d, s, sigmoid),
        Relu => map1(d, s, |x| if x > T::ZERO || x.is_nan() { x } else { T::ZERO }),
        GeluTanh => {
            let (k0, k1, half) = (T::c((2.0 / std::f64::consts::PI).sqrt()), T::c(0.044715), T::c(0.5));
            map1(d, s, |x| half * x * (T::ONE + (k0 * (x + k1 * x * x * x)).tanh()))
        }
        GeluErf => map1(d, s, T::gelu_erf),
        Silu => map1(d, s, |x| x * sigmoid(x)),
        Floor => map1(d, s, T::floor),
        Ceil => map1(d, s, T::ceil),
        Round => map1(d, s, T::round_ties_even),
        Sign => map1(d, s, |x| {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                -T::ONE
            } else {
                // Zeros give +0 and NaN stays NaN.
                x.abs()
            }
        }),
        Not => Err(unsupported("tile not", dtype, "`not` takes integers and bools")),
    }
}

fn unary_int<T: Int>(op: UnaryOp, dtype: DType, d: &mut [T], s: &[T]) -> Result<()> {
    use UnaryOp::*;
    match op {
        Neg => map1(d, s, T::neg),
        Abs => map1(d, s, T::abs),
        Relu => map1(d, s, |x| x.maximum(T::ZERO)),
        Sign => map1(d, s, |x| {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                T::ONE.neg()
            } else {
                T::ZERO
            }
        }),
        Not => map1(d, s, |x| !x),
        Floor | Ceil | Round => map1(d, s, |x| x),
        _ => Err(unsupported("tile unary op", dtype, "this op takes floats")),
    }
}

/// `dst = op(lhs, rhs)` for operands of `dtype`; with `lhs` `None`, `dst`
/// is the first operand and is updated in place (accumulators).
// The dtype lists of some ops cover every dtype but f16/bf16, leaving the
// fallback arm unreachable for them.
#[allow(unreachable_patterns)]
pub(crate) fn binary(op: BinaryOp, dtype: DType, dst: &mut Buf, lhs: Option<&Buf>, rhs: &Buf) -> Result<()> {
    use BinaryOp::*;
    macro_rules! run {
        ($kernel:ident, $($d:ident => $t:ty),*) => {
            match dtype {
                $(DType::$d => $kernel::<$t>(op, typed_mut(dst)?, lhs.map(typed).transpose()?, typed(rhs)?),)*
                DType::F16 | DType::BF16 => Err(unsupported("tile binary op", dtype, NO_HALF_MATH)),
                _ => Err(unsupported("tile binary op", dtype, "the op does not take this dtype")),
            }
        };
    }
    match op {
        Eq | Ne | Lt | Le | Gt | Ge => {
            if lhs.is_none() {
                return Err(malformed("a comparison cannot update an accumulator".into()));
            }
            run!(compare, Bool => u8, U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        Add | Sub | Mul | Div | Maximum | Minimum => {
            run!(arith, U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        Pow => run!(pow, F32 => f32, F64 => f64),
        BitAnd | BitOr | BitXor => run!(bitwise, Bool => u8, U8 => u8, I32 => i32, I64 => i64, U32 => u32),
    }
}

fn arith<T: Num>(op: BinaryOp, d: &mut [T], a: Option<&[T]>, b: &[T]) -> Result<()> {
    match op {
        BinaryOp::Add => map2(d, a, b, T::add),
        BinaryOp::Sub => map2(d, a, b, T::sub),
        BinaryOp::Mul => map2(d, a, b, T::mul),
        BinaryOp::Div => map2(d, a, b, T::div),
        BinaryOp::Maximum => map2(d, a, b, T::maximum),
        _ => map2(d, a, b, T::minimum),
    }
}

/// How an operand's elements map onto the result's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spread {
    /// One to one.
    Dense,
    /// Each operand element covers a run of this many result elements.
    Repeat(usize),
    /// The operand's first this many elements repeat along the result.
    Cycle(usize),
}

/// `dst = op(lhs, rhs)` for an arithmetic op (add, sub, mul, div, maximum,
/// minimum) of which at most one operand is spread.
pub(crate) fn arith_spread(
    op: BinaryOp,
    dtype: DType,
    dst: &mut Buf,
    lhs: (&Buf, Spread),
    rhs: (&Buf, Spread),
) -> Result<()> {
    macro_rules! run {
        ($($d:ident => $t:ty),*) => {
            match dtype {
                $(DType::$d => arith_spread_typed::<$t>(
                    op,
                    typed_mut(dst)?,
                    (typed(lhs.0)?, lhs.1),
                    (typed(rhs.0)?, rhs.1),
                ),)*
                _ => Err(unsupported("tile binary op", dtype, "the op does not take this dtype")),
            }
        };
    }
    run!(U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
}

fn arith_spread_typed<T: Num>(op: BinaryOp, d: &mut [T], a: (&[T], Spread), b: (&[T], Spread)) -> Result<()> {
    match op {
        BinaryOp::Add => spread2(d, a, b, T::add),
        BinaryOp::Sub => spread2(d, a, b, T::sub),
        BinaryOp::Mul => spread2(d, a, b, T::mul),
        BinaryOp::Div => spread2(d, a, b, T::div),
        BinaryOp::Maximum => spread2(d, a, b, T::maximum),
        BinaryOp::Minimum => spread2(d, a, b, T::minimum),
        _ => Err(malformed(format!("{op:?} with a spread operand"))),
    }
}

/// `d[i] = f(a[i], b[i])` with `a` and `b` read through their spreads.
#[inline(always)]
fn spread2<T: Copy>(d: &mut [T], a: (&[T], Spread), b: (&[T], Spread), f: impl Fn(T, T) -> T) -> Result<()> {
    match (a.1, b.1) {
        (Spread::Dense, spread) => spread_into(d, a.0, b.0, spread, f),
        (spread, Spread::Dense) => spread_into(d, b.0, a.0, spread, |y, x| f(x, y)),
        _ => Err(malformed("a binary op with two spread operands".into())),
    }
}

/// `d[i] = f(x[i], s[spread(i)])`.
#[inline(always)]
fn spread_into<T: Copy>(d: &mut [T], x: &[T], s: &[T], spread: Spread, f: impl Fn(T, T) -> T) -> Result<()> {
    same_len(d.len(), x.len())?;
    let bad = || malformed(format!("{spread:?} of {} elements onto {}", s.len(), d.len()));
    match spread {
        Spread::Dense => map2(d, Some(x), s, f)?,
        Spread::Repeat(rep) => {
            if rep == 0 || s.len() * rep != d.len() {
                return Err(bad());
            }
            for ((dr, xr), &y) in d.chunks_exact_mut(rep).zip(x.chunks_exact(rep)).zip(s) {
                for (d, &x) in dr.iter_mut().zip(xr) {
                    *d = f(x, y);
                }
            }
        }
        Spread::Cycle(period) => {
            if period == 0 || d.len() % period != 0 || s.len() < period {
                return Err(bad());
            }
            let s = &s[..period];
            for (dr, xr) in d.chunks_exact_mut(period).zip(x.chunks_exact(period)) {
                for ((d, &x), &y) in dr.iter_mut().zip(xr).zip(s) {
                    *d = f(x, y);
                }
            }
        }
    }
    Ok(())
}

fn pow<T: Float>(_: BinaryOp, d: &mut [T], a: Option<&[T]>, b: &[T]) -> Result<()> {
    map2(d, a, b, T::powf)
}

fn bitwise<T: Int>(op: BinaryOp, d: &mut [T], a: Option<&[T]>, b: &[T]) -> Result<()> {
    match op {
        BinaryOp::BitAnd => map2(d, a, b, T::and),
        BinaryOp::BitOr => map2(d, a, b, T::or),
        _ => map2(d, a, b, T::xor),
    }
}

fn compare<T: Num>(op: BinaryOp, d: &mut [u8], a: Option<&[T]>, b: &[T]) -> Result<()> {
    let Some(a) = a else {
        return Err(malformed("a comparison needs two operands".into()));
    };
    same_len(d.len(), a.len())?;
    same_len(d.len(), b.len())?;
    macro_rules! cmp {
        ($f:expr) => {
            for ((d, &x), &y) in d.iter_mut().zip(a).zip(b) {
                *d = $f(x, y) as u8;
            }
        };
    }
    match op {
        BinaryOp::Eq => cmp!(|x: T, y: T| x == y),
        BinaryOp::Ne => cmp!(|x: T, y: T| x != y),
        BinaryOp::Lt => cmp!(|x: T, y: T| x < y),
        BinaryOp::Le => cmp!(|x: T, y: T| x <= y),
        BinaryOp::Gt => cmp!(|x: T, y: T| x > y),
        _ => cmp!(|x: T, y: T| x >= y),
    }
    Ok(())
}

/// `dst = cond ? on_true : on_false` elementwise.
pub(crate) fn select(dst: &mut Buf, cond: &Buf, on_true: &Buf, on_false: &Buf) -> Result<()> {
    if cond.dtype() != DType::Bool || on_true.dtype() != dst.dtype() || on_false.dtype() != dst.dtype() {
        return Err(malformed(format!(
            "select on a {} condition between {} and {} into {}",
            cond.dtype(),
            on_true.dtype(),
            on_false.dtype(),
            dst.dtype()
        )));
    }
    let c = typed::<u8>(cond)?;
    match (dst.bits_mut(), on_true.bits(), on_false.bits()) {
        (BitsMut::B1(d), Bits::B1(t), Bits::B1(f)) => select_typed(d, c, t, f),
        (BitsMut::B2(d), Bits::B2(t), Bits::B2(f)) => select_typed(d, c, t, f),
        (BitsMut::B4(d), Bits::B4(t), Bits::B4(f)) => select_typed(d, c, t, f),
        (BitsMut::B8(d), Bits::B8(t), Bits::B8(f)) => select_typed(d, c, t, f),
        _ => Err(malformed("select between tiles of different element sizes".into())),
    }
}

fn select_typed<T: Copy>(d: &mut [T], c: &[u8], t: &[T], f: &[T]) -> Result<()> {
    same_len(d.len(), c.len())?;
    same_len(d.len(), t.len())?;
    same_len(d.len(), f.len())?;
    for (((d, &c), &t), &f) in d.iter_mut().zip(c).zip(t).zip(f) {
        *d = if c != 0 { t } else { f };
    }
    Ok(())
}

/// Converts one element type to another with the IR's cast rules.
pub(crate) trait AsPrim<D> {
    fn cast(self) -> D;
}

macro_rules! prim_casts {
    ($($s:ty: $($d:ty),*;)*) => {$($(
        impl AsPrim<$d> for $s {
            #[inline(always)]
            fn cast(self) -> $d {
                // Integer to integer wraps; to float rounds to nearest even.
                self as $d
            }
        }
    )*)*};
}
prim_casts! {
    u8: u8, i32, i64, u32, f32, f64;
    i32: u8, i32, i64, u32, f32, f64;
    i64: u8, i32, i64, u32, f32, f64;
    u32: u8, i32, i64, u32, f32, f64;
    f32: f32, f64;
    f64: f32, f64;
}

macro_rules! float_to_int_casts {
    ($($s:ty: $($d:ty),*;)*) => {$($(
        impl AsPrim<$d> for $s {
            #[inline(always)]
            fn cast(self) -> $d {
                // Float to integer truncates toward zero into i64 (saturating,
                // NaN to 0), then wraps to the target width, as `Scalar::cast`.
                self as i64 as $d
            }
        }
    )*)*};
}
float_to_int_casts! {
    f32: u8, i32, i64, u32;
    f64: u8, i32, i64, u32;
}

macro_rules! half_casts {
    ($($h:ty),*) => {$(
        half_casts!(@from $h: u8, i32, i64, u32, f32, f64);
        half_casts!(@to $h: u8, i32, i64, u32, f64);
        impl AsPrim<$h> for f32 {
            #[inline(always)]
            fn cast(self) -> $h { <$h>::from_f32(self) }
        }
        impl AsPrim<f16> for $h {
            #[inline(always)]
            fn cast(self) -> f16 { f16::from_f32(self.to_f32()) }
        }
        impl AsPrim<bf16> for $h {
            #[inline(always)]
            fn cast(self) -> bf16 { bf16::from_f32(self.to_f32()) }
        }
    )*};
    (@from $h:ty: $($d:ty),*) => {$(
        impl AsPrim<$d> for $h {
            #[inline(always)]
            fn cast(self) -> $d { AsPrim::<$d>::cast(self.to_f32()) }
        }
    )*};
    (@to $h:ty: $($s:ty),*) => {$(
        impl AsPrim<$h> for $s {
            #[inline(always)]
            fn cast(self) -> $h { <$h>::from_f64(self as f64) }
        }
    )*};
}
half_casts!(f16, bf16);

/// An element type that casts to every dtype.
trait CastSource:
    Elem + AsPrim<u8> + AsPrim<i32> + AsPrim<i64> + AsPrim<u32> + AsPrim<f16> + AsPrim<bf16> + AsPrim<f32> + AsPrim<f64>
{
    /// Whether the value is not zero (the cast to bool; NaN is not zero).
    fn nonzero(self) -> bool;
}

macro_rules! cast_source {
    ($($t:ty, $zero:expr);*) => {$(
        impl CastSource for $t {
            #[inline(always)]
            fn nonzero(self) -> bool { self != $zero }
        }
    )*};
}
cast_source!(u8, 0; i32, 0; i64, 0; u32, 0; f32, 0.0; f64, 0.0; f16, f16::ZERO; bf16, bf16::ZERO);

/// `dst = src` converted to `dst`'s dtype.
pub(crate) fn cast(dst: &mut Buf, src: &Buf) -> Result<()> {
    // Between f32 and the half types the slice conversions of `half` take
    // the vector instructions where the CPU has them (F16C on x86), with
    // the same round-to-nearest-even results as one element at a time.
    use half::slice::HalfFloatSliceExt;
    match (&mut *dst, src) {
        (Buf::F32(d), Buf::F16(s)) => {
            same_len(d.len(), s.len())?;
            s.convert_to_f32_slice(d);
            return Ok(());
        }
        (Buf::F32(d), Buf::BF16(s)) => {
            same_len(d.len(), s.len())?;
            s.convert_to_f32_slice(d);
            return Ok(());
        }
        (Buf::F16(d), Buf::F32(s)) => {
            same_len(d.len(), s.len())?;
            d.convert_from_f32_slice(s);
            return Ok(());
        }
        (Buf::BF16(d), Buf::F32(s)) => {
            same_len(d.len(), s.len())?;
            d.convert_from_f32_slice(s);
            return Ok(());
        }
        _ => {}
    }
    match src {
        Buf::Bool(s) | Buf::U8(s) => cast_from(dst, s),
        Buf::I32(s) => cast_from(dst, s),
        Buf::I64(s) => cast_from(dst, s),
        Buf::U32(s) => cast_from(dst, s),
        Buf::F16(s) => cast_from(dst, s),
        Buf::BF16(s) => cast_from(dst, s),
        Buf::F32(s) => cast_from(dst, s),
        Buf::F64(s) => cast_from(dst, s),
    }
}

fn cast_from<S: CastSource>(dst: &mut Buf, s: &[S]) -> Result<()> {
    match dst {
        Buf::Bool(d) => map1(d, s, |x| x.nonzero() as u8),
        Buf::U8(d) => map1(d, s, AsPrim::cast),
        Buf::I32(d) => map1(d, s, AsPrim::cast),
        Buf::I64(d) => map1(d, s, AsPrim::cast),
        Buf::U32(d) => map1(d, s, AsPrim::cast),
        Buf::F16(d) => map1(d, s, AsPrim::cast),
        Buf::BF16(d) => map1(d, s, AsPrim::cast),
        Buf::F32(d) => map1(d, s, AsPrim::cast),
        Buf::F64(d) => map1(d, s, AsPrim::cast),
    }
}
