//! Elementwise ops: casts, unary and binary ops, comparisons, bitwise ops,
//! `where_`, and the operator traits.
//!
//! # Dtypes
//!
//! Binary ops promote both operands to [`DType::promote`] of their dtypes
//! (recorded as `Cast` nodes) and broadcast them to a common shape (a
//! `Reshape` adding leading axes, then an `Expand`), so every recorded binary
//! node has inputs of one shape and dtype. Further rules:
//! - Arithmetic (`+ - * /`) on two bools is rejected; integer division
//!   truncates toward zero and division by zero gives 0.
//! - `pow` and the float-only unary ops (`exp`, `log`, `sqrt`, `sin`,
//!   `tanh`, `sigmoid`, `gelu`, `silu`, ...) on integer or bool tensors cast to
//!   f32 first.
//! - `floor`, `ceil` and `round` return integer tensors unchanged; `neg`,
//!   `abs`, `sign` and `relu` reject bools.
//! - Comparisons return bool; bitwise ops and `!` take integers or bools only.
//! - A Rust scalar operand becomes a constant of the tensor's dtype, except
//!   that a float scalar with an integer or bool tensor is f32 and an integer
//!   scalar with a bool tensor is i64 (the rule of [`crate::dtype`]).

use super::{fallible, or_panic, Tensor};
use crate::dtype::{DType, Element, Scalar};
use crate::error::{dims, Error, Result};
use crate::graph::Op;
use crate::ops::{BinaryOp, UnaryOp};
use crate::shape::Shape;
use std::borrow::Cow;
use std::ops;

/// An [`Error::UnsupportedDType`].
pub(crate) fn unsupported(op: &'static str, dtype: DType, reason: &'static str) -> Error {
    Error::UnsupportedDType { op, dtype, reason }
}

/// The dtype float-only ops compute in: the dtype itself if it is a float, f32 otherwise.
pub(crate) fn float_dtype(d: DType) -> DType {
    if d.is_float() {
        d
    } else {
        DType::F32
    }
}

/// The dtype of a Rust scalar operand next to a tensor of dtype `tensor`.
fn scalar_operand_dtype(tensor: DType, s: Scalar) -> DType {
    match s {
        Scalar::Float(..) if !tensor.is_float() => DType::F32,
        Scalar::Int(..) if tensor == DType::Bool => DType::I64,
        _ => tensor,
    }
}

impl Tensor {
    /// Checks that `other` lives on this tensor's device.
    pub(crate) fn check_device(&self, op: &'static str, other: &Tensor) -> Result<()> {
        if self.device() != other.device() {
            return Err(Error::DeviceMismatch {
                op,
                lhs: self.device().to_string(),
                rhs: other.device().to_string(),
            });
        }
        Ok(())
    }

    /// A constant of this tensor's shape holding the Rust scalar `value`,
    /// with the dtype a scalar operand gets next to this tensor.
    pub fn scalar_like<E: Element>(&self, value: E) -> Tensor {
        let s = value.to_scalar();
        let dtype = scalar_operand_dtype(self.dtype(), s);
        Tensor::constant(self.shape().clone(), s, dtype).to(self.device())
    }

    /// Records a node of this tensor's shape computed elementwise from `inputs`.
    pub(crate) fn elementwise(&self, op: Op, inputs: &[&Tensor], dtype: DType) -> Tensor {
        Tensor::record(op, inputs, self.shape().clone(), dtype, self.device())
    }

    /// This tensor converted to `dtype` (itself if it already is).
    pub(crate) fn cast_to(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        self.elementwise(Op::Cast, &[self], dtype)
    }

    /// `a` and `b` cast to `dtype` and broadcast to their common shape
    /// (borrowed when already of that dtype and shape, which spares the
    /// handles' reference counts).
    fn operands<'a>(
        op: &'static str,
        a: &'a Tensor,
        b: &'a Tensor,
        dtype: DType,
    ) -> Result<(Cow<'a, Tensor>, Cow<'a, Tensor>)> {
        a.check_device(op, b)?;
        // The common case: both already of `dtype` and one shape.
        if a.dtype() == dtype && b.dtype() == dtype && a.shape() == b.shape() {
            return Ok((Cow::Borrowed(a), Cow::Borrowed(b)));
        }
        let shape = Shape::broadcast(op, a.shape(), b.shape())?;
        let operand = |t: &'a Tensor| -> Result<Cow<'a, Tensor>> {
            if t.dtype() == dtype && *t.shape() == shape {
                return Ok(Cow::Borrowed(t));
            }
            Ok(Cow::Owned(t.cast_to(dtype).broadcast_as(op, &shape)?))
        };
        Ok((operand(a)?, operand(b)?))
    }

    /// Records binary `op` after checking dtypes, promoting and broadcasting.
    fn binary(&self, name: &'static str, op: BinaryOp, rhs: &Tensor) -> Result<Tensor> {
        use BinaryOp::*;
        let (a, b) = (self.dtype(), rhs.dtype());
        let common = a.promote(b);
        // On bools the larger of two values is their or, the smaller their and.
        let op = match (op, common) {
            (Maximum, DType::Bool) => BitOr,
            (Minimum, DType::Bool) => BitAnd,
            _ => op,
        };
        let operand = match op {
            Add | Sub | Mul | Div if common == DType::Bool => {
                return Err(unsupported(
                    name,
                    common,
                    "arithmetic needs numbers; cast the bools first",
                ))
            }
            BitAnd | BitOr | BitXor if a.is_float() || b.is_float() => {
                let float = if a.is_float() { a } else { b };
                return Err(unsupported(name, float, "bitwise ops need integers or bools"));
            }
            Pow => float_dtype(common),
            _ => common,
        };
        let out = if op.is_comparison() { DType::Bool } else { operand };
        let (x, y) = Tensor::operands(name, self, rhs, operand)?;
        Ok(x.elementwise(Op::Binary(op), &[&x, &y], out))
    }

    /// Records unary `op` after checking the dtype (see the module docs).
    fn unary(&self, name: &'static str, op: UnaryOp) -> Result<Tensor> {
        use UnaryOp::*;
        let d = self.dtype();
        let dtype = match op {
            Floor | Ceil | Round if !d.is_float() => return Ok(self.clone()),
            Neg | Abs | Sign | Relu if d == DType::Bool => {
                return Err(unsupported(name, d, "needs numbers, not bools"))
            }
            Not if d.is_float() => return Err(unsupported(name, d, "bitwise ops need integers or bools")),
            Neg | Abs | Sign | Relu | Floor | Ceil | Round | Not => d,
            _ => float_dtype(d),
        };
        if dtype == d {
            return Ok(self.elementwise(Op::Unary(op), &[self], dtype));
        }
        let x = self.cast_to(dtype);
        Ok(x.elementwise(Op::Unary(op), &[&x], dtype))
    }

    /// `where_(cond, a, b)`: `a` where `cond` is true, `b` elsewhere. `cond`
    /// must be bool; the three broadcast together and `a`, `b` promote.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_where`] returns.
    #[track_caller]
    pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Tensor {
        or_panic(Tensor::try_where(cond, a, b))
    }

    /// [`Tensor::where_`], returning misuse as an `Err` instead of panicking.
    pub fn try_where(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        if cond.dtype() != DType::Bool {
            return Err(unsupported("where", cond.dtype(), "the condition must be bool"));
        }
        cond.check_device("where", a)?;
        let shape = Shape::broadcast("where", cond.shape(), a.shape())?;
        let shape = Shape::broadcast("where", &shape, b.shape())?;
        let (a, b) = Tensor::operands("where", a, b, a.dtype().promote(b.dtype()))?;
        let (cond, a, b) = (
            cond.broadcast_as("where", &shape)?,
            a.broadcast_as("where", &shape)?,
            b.broadcast_as("where", &shape)?,
        );
        Ok(a.elementwise(Op::Where, &[&cond, &a, &b], a.dtype()))
    }

    /// The one-hot encoding of an integer tensor: shape `self.dims() +
    /// [classes]`, i64, 1 where the last index equals the element and 0
    /// elsewhere (PyTorch's `one_hot`). Elements outside `[0, classes)` give
    /// a row of zeros, where PyTorch raises: checking would read the data,
    /// which a lazy op does not.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let labels = Tensor::from_vec(vec![2i64, 0, 1], &[3]);
    /// let h = labels.one_hot(3);
    /// assert_eq!(h.dims(), &[3, 3]);
    /// assert_eq!(h.to_vec::<i64>()?, vec![0, 0, 1, 1, 0, 0, 0, 1, 0]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_one_hot`] returns.
    #[track_caller]
    pub fn one_hot(&self, classes: usize) -> Tensor {
        or_panic(self.try_one_hot(classes))
    }

    /// [`Tensor::one_hot`], returning misuse as an `Err` instead of
    /// panicking: a float or bool tensor is [`Error::UnsupportedDType`].
    pub fn try_one_hot(&self, classes: usize) -> Result<Tensor> {
        let d = self.dtype();
        if d.is_float() || d == DType::Bool {
            return Err(unsupported("one_hot", d, "the classes must be integers"));
        }
        let classes = Tensor::try_arange(0i64, classes as i64, 1)?.to(self.device());
        let hit = self.cast_to(DType::I64).try_unsqueeze(-1)?.try_eq(&classes)?;
        Ok(hit.cast_to(DType::I64))
    }

    /// `a` where `cond` is true, the scalar `value` elsewhere: `where_`
    /// with a scalar operand (of `a`'s dtype, or f32 for a float value
    /// beside an integer `a`, as for the arithmetic operators).
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0, -3.0], &[3]);
    /// let y = Tensor::where_scalar(&x.gt(&x.scalar_like(0.0)), &x, 0.5f32);
    /// assert_eq!(y.to_vec::<f32>()?, vec![0.5, 2.0, 0.5]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_where_scalar`] returns.
    #[track_caller]
    pub fn where_scalar<E: Element>(cond: &Tensor, a: &Tensor, value: E) -> Tensor {
        or_panic(Tensor::try_where_scalar(cond, a, value))
    }

    /// [`Tensor::where_scalar`], returning misuse as an `Err` instead of panicking.
    pub fn try_where_scalar<E: Element>(cond: &Tensor, a: &Tensor, value: E) -> Result<Tensor> {
        Tensor::try_where(cond, a, &a.scalar_like(value))
    }

    /// This tensor with `value` (cast to its dtype) where the bool `mask`
    /// is true; `mask` broadcasts to this tensor's shape.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]);
    /// let mask = Tensor::from_vec(vec![true, false], &[2, 1]);
    /// assert_eq!(x.masked_fill(&mask, -1).to_vec::<i64>()?, vec![-1, -1, 3, 4]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_masked_fill`] returns.
    #[track_caller]
    pub fn masked_fill<E: Element>(&self, mask: &Tensor, value: E) -> Tensor {
        or_panic(self.try_masked_fill(mask, value))
    }

    /// [`Tensor::masked_fill`], returning misuse as an `Err` instead of
    /// panicking: a mask that is not bool, or that does not broadcast to
    /// this tensor's shape.
    pub fn try_masked_fill<E: Element>(&self, mask: &Tensor, value: E) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(unsupported("masked_fill", mask.dtype(), "the mask must be bool"));
        }
        let mask = mask.broadcast_as("masked_fill", self.shape())?;
        let fill = Tensor::constant(self.shape().clone(), value.to_scalar(), self.dtype()).to(self.device());
        Tensor::try_where(&mask, &fill, self)
    }

    /// This tensor clamped to `[min, max]` elementwise (NaN stays NaN);
    /// the bounds are scalar operands.
    pub fn clamp<E: Element>(&self, min: E, max: E) -> Tensor {
        self.maximum(&self.scalar_like(min)).minimum(&self.scalar_like(max))
    }

    /// This tensor raised elementwise to the scalar power `exponent`.
    pub fn powf(&self, exponent: f64) -> Tensor {
        self.pow(&self.scalar_like(exponent))
    }

    fallible! {
        /// This tensor converted to `dtype`, by the rule of [`Scalar::cast`]
        /// (the same on every device):
        /// - to a float rounds to nearest, ties to even;
        /// - a float to an integer truncates toward zero into an i64,
        ///   saturating at the i64 range (NaN gives 0), and then wraps
        ///   (two's complement) to the target width, so it saturates only
        ///   for i64: `+inf`, `-inf`, NaN, `-1e20` and `3e9` give
        ///   `i64::MAX`, `i64::MIN`, 0, `i64::MIN` and 3000000000 as i64,
        ///   -1, 0, 0, 0 and -1294967296 as i32, 4294967295, 0, 0, 0 and
        ///   3000000000 as u32, and 255, 0, 0, 0 and 0 as u8; `2.7` gives 2
        ///   in all of them, `-2.7` gives -2 as i64 or i32 and wraps to
        ///   4294967294 as u32 and 254 as u8;
        /// - an integer to an integer wraps (`300` as u8 is 44, `-1` is 255);
        /// - to bool is `!= 0` (NaN is `true`); a bool is 0 or 1.
        pub fn cast / try_cast(&self, dtype: DType) -> Tensor {
            Ok(self.cast_to(dtype))
        }
        /// `self + rhs`, broadcasting and promoting.
        pub fn add / try_add(&self, rhs: &Tensor) -> Tensor { self.binary("add", BinaryOp::Add, rhs) }
        /// `self - rhs`, broadcasting and promoting.
        pub fn sub / try_sub(&self, rhs: &Tensor) -> Tensor { self.binary("sub", BinaryOp::Sub, rhs) }
        /// `self * rhs`, broadcasting and promoting.
        pub fn mul / try_mul(&self, rhs: &Tensor) -> Tensor { self.binary("mul", BinaryOp::Mul, rhs) }
        /// `self / rhs`, broadcasting and promoting (integers truncate; division by zero gives 0).
        pub fn div / try_div(&self, rhs: &Tensor) -> Tensor { self.binary("div", BinaryOp::Div, rhs) }
        /// `self` to the power `rhs`, in a float dtype.
        pub fn pow / try_pow(&self, rhs: &Tensor) -> Tensor { self.binary("pow", BinaryOp::Pow, rhs) }
        /// The elementwise maximum; NaN if either operand is NaN.
        pub fn maximum / try_maximum(&self, rhs: &Tensor) -> Tensor { self.binary("maximum", BinaryOp::Maximum, rhs) }
        /// The elementwise minimum; NaN if either operand is NaN.
        pub fn minimum / try_minimum(&self, rhs: &Tensor) -> Tensor { self.binary("minimum", BinaryOp::Minimum, rhs) }
        /// `self == rhs` elementwise, as bool.
        pub fn eq / try_eq(&self, rhs: &Tensor) -> Tensor { self.binary("eq", BinaryOp::Eq, rhs) }
        /// `self != rhs` elementwise, as bool (true where either is NaN).
        pub fn ne / try_ne(&self, rhs: &Tensor) -> Tensor { self.binary("ne", BinaryOp::Ne, rhs) }
        /// `self < rhs` elementwise, as bool.
        pub fn lt / try_lt(&self, rhs: &Tensor) -> Tensor { self.binary("lt", BinaryOp::Lt, rhs) }
        /// `self <= rhs` elementwise, as bool.
        pub fn le / try_le(&self, rhs: &Tensor) -> Tensor { self.binary("le", BinaryOp::Le, rhs) }
        /// `self > rhs` elementwise, as bool.
        pub fn gt / try_gt(&self, rhs: &Tensor) -> Tensor { self.binary("gt", BinaryOp::Gt, rhs) }
        /// `self >= rhs` elementwise, as bool.
        pub fn ge / try_ge(&self, rhs: &Tensor) -> Tensor { self.binary("ge", BinaryOp::Ge, rhs) }
        /// Bitwise and of integers, logical and of bools.
        pub fn bitand / try_bitand(&self, rhs: &Tensor) -> Tensor { self.binary("bitand", BinaryOp::BitAnd, rhs) }
        /// Bitwise or of integers, logical or of bools.
        pub fn bitor / try_bitor(&self, rhs: &Tensor) -> Tensor { self.binary("bitor", BinaryOp::BitOr, rhs) }
        /// Bitwise xor of integers, logical xor of bools.
        pub fn bitxor / try_bitxor(&self, rhs: &Tensor) -> Tensor { self.binary("bitxor", BinaryOp::BitXor, rhs) }
        /// Bitwise not of integers, logical not of bools.
        pub fn not / try_not(&self) -> Tensor { self.unary("not", UnaryOp::Not) }
        /// `-self`.
        pub fn neg / try_neg(&self) -> Tensor { self.unary("neg", UnaryOp::Neg) }
        /// `|self|`.
        pub fn abs / try_abs(&self) -> Tensor { self.unary("abs", UnaryOp::Abs) }
        /// `e^self`.
        pub fn exp / try_exp(&self) -> Tensor { self.unary("exp", UnaryOp::Exp) }
        /// `2^self`.
        pub fn exp2 / try_exp2(&self) -> Tensor { self.unary("exp2", UnaryOp::Exp2) }
        /// The natural logarithm.
        pub fn log / try_log(&self) -> Tensor { self.unary("log", UnaryOp::Log) }
        /// The base-2 logarithm.
        pub fn log2 / try_log2(&self) -> Tensor { self.unary("log2", UnaryOp::Log2) }
        /// The square root.
        pub fn sqrt / try_sqrt(&self) -> Tensor { self.unary("sqrt", UnaryOp::Sqrt) }
        /// `1 / sqrt(self)`.
        pub fn rsqrt / try_rsqrt(&self) -> Tensor { self.unary("rsqrt", UnaryOp::Rsqrt) }
        /// `1 / self`, in a float dtype.
        pub fn recip / try_recip(&self) -> Tensor { self.unary("recip", UnaryOp::Recip) }
        /// The sine.
        pub fn sin / try_sin(&self) -> Tensor { self.unary("sin", UnaryOp::Sin) }
        /// The cosine.
        pub fn cos / try_cos(&self) -> Tensor { self.unary("cos", UnaryOp::Cos) }
        /// The hyperbolic tangent.
        pub fn tanh / try_tanh(&self) -> Tensor { self.unary("tanh", UnaryOp::Tanh) }
        /// `1 / (1 + e^-self)`.
        pub fn sigmoid / try_sigmoid(&self) -> Tensor { self.unary("sigmoid", UnaryOp::Sigmoid) }
        /// `max(self, 0)`.
        pub fn relu / try_relu(&self) -> Tensor { self.unary("relu", UnaryOp::Relu) }
        /// GELU, tanh approximation (see [`Tensor::gelu_erf`] for the exact form).
        pub fn gelu / try_gelu(&self) -> Tensor { self.unary("gelu", UnaryOp::GeluTanh) }
        /// GELU, exact form `0.5 x (1 + erf(x / sqrt 2))` (PyTorch's default).
        pub fn gelu_erf / try_gelu_erf(&self) -> Tensor { self.unary("gelu_erf", UnaryOp::GeluErf) }
        /// `self * sigmoid(self)`.
        pub fn silu / try_silu(&self) -> Tensor { self.unary("silu", UnaryOp::Silu) }
        /// Rounds toward negative infinity.
        pub fn floor / try_floor(&self) -> Tensor { self.unary("floor", UnaryOp::Floor) }
        /// Rounds toward positive infinity.
        pub fn ceil / try_ceil(&self) -> Tensor { self.unary("ceil", UnaryOp::Ceil) }
        /// Rounds half to even.
        pub fn round / try_round(&self) -> Tensor { self.unary("round", UnaryOp::Round) }
        /// -1, 0 or 1 by the sign (NaN stays NaN).
        pub fn sign / try_sign(&self) -> Tensor { self.unary("sign", UnaryOp::Sign) }
    }
}

/// Implements a binary operator trait for every owned/borrowed pairing of
/// tensors, for any Rust scalar on the right (one generic impl, so a literal
/// like `2.0` needs no suffix), and for each `$lhs` scalar type on the left.
macro_rules! binary_operator {
    ($trait:ident, $method:ident, $func:ident; left: $($lhs:ty),*) => {
        binary_operator!(@tensors $trait, $method, $func, &Tensor, &Tensor);
        binary_operator!(@tensors $trait, $method, $func, &Tensor, Tensor);
        binary_operator!(@tensors $trait, $method, $func, Tensor, &Tensor);
        binary_operator!(@tensors $trait, $method, $func, Tensor, Tensor);
        impl<S: Element> ops::$trait<S> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor { Tensor::$func(self, &self.scalar_like(rhs)) }
        }
        impl<S: Element> ops::$trait<S> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: S) -> Tensor { Tensor::$func(&self, &self.scalar_like(rhs)) }
        }
        $(
            impl ops::$trait<&Tensor> for $lhs {
                type Output = Tensor;
                #[track_caller]
                fn $method(self, rhs: &Tensor) -> Tensor { Tensor::$func(&rhs.scalar_like(self), rhs) }
            }
            impl ops::$trait<Tensor> for $lhs {
                type Output = Tensor;
                #[track_caller]
                fn $method(self, rhs: Tensor) -> Tensor { Tensor::$func(&rhs.scalar_like(self), &rhs) }
            }
        )*
    };
    (@tensors $trait:ident, $method:ident, $func:ident, $a:ty, $b:ty) => {
        impl ops::$trait<$b> for $a {
            type Output = Tensor;
            #[track_caller]
            #[allow(clippy::needless_borrow)]
            fn $method(self, rhs: $b) -> Tensor { Tensor::$func(&self, &rhs) }
        }
    };
}

// Left scalars have one impl per type; a literal on the left whose product
// is used directly as a receiver needs a suffix (`2.0f64 * &a`).
binary_operator!(Add, add, add; left: f64, f32, i32, i64);
binary_operator!(Sub, sub, sub; left: f64, f32, i32, i64);
binary_operator!(Mul, mul, mul; left: f64, f32, i32, i64);
binary_operator!(Div, div, div; left: f64, f32, i32, i64);
binary_operator!(BitAnd, bitand, bitand; left: bool);
binary_operator!(BitOr, bitor, bitor; left: bool);
binary_operator!(BitXor, bitxor, bitxor; left: bool);

/// Implements a compound assignment operator (`+=` ...) for tensors and
/// Rust scalars on the right: `a op= b` records `a op b` and rebinds `a` to
/// it (other handles of the old `a` keep their value), as
/// [`Tensor::assign_result`] checks.
macro_rules! assign_operator {
    ($trait:ident, $method:ident, $func:ident, $name:literal) => {
        impl ops::$trait<&Tensor> for Tensor {
            #[track_caller]
            fn $method(&mut self, rhs: &Tensor) {
                let r = Tensor::$func(self, rhs);
                *self = or_panic(self.assign_result($name, r));
            }
        }
        impl ops::$trait<Tensor> for Tensor {
            #[track_caller]
            fn $method(&mut self, rhs: Tensor) {
                let r = Tensor::$func(self, &rhs);
                *self = or_panic(self.assign_result($name, r));
            }
        }
        impl<S: Element> ops::$trait<S> for Tensor {
            #[track_caller]
            fn $method(&mut self, rhs: S) {
                let r = Tensor::$func(self, &self.scalar_like(rhs));
                *self = or_panic(self.assign_result($name, r));
            }
        }
    };
}

assign_operator!(AddAssign, add_assign, add, "+=");
assign_operator!(SubAssign, sub_assign, sub, "-=");
assign_operator!(MulAssign, mul_assign, mul, "*=");
assign_operator!(DivAssign, div_assign, div, "/=");

impl Tensor {
    /// `result` of `self op= rhs` as the new `self`: it must keep this
    /// tensor's shape (a broadcast may not grow it), and is cast back to
    /// this tensor's dtype, except that a float result is not truncated
    /// into an integer or bool tensor ([`Error::DTypeMismatch`]): PyTorch's
    /// in-place rules.
    fn assign_result(&self, op: &'static str, result: Tensor) -> Result<Tensor> {
        if result.dims() != self.dims() {
            return Err(shape_error(op, self.shape(), result.dims()));
        }
        if result.dtype().is_float() && !self.dtype().is_float() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: self.dtype(),
                rhs: result.dtype(),
            });
        }
        Ok(result.cast_to(self.dtype()))
    }
}

/// Implements a unary operator trait for owned and borrowed tensors.
macro_rules! unary_operator {
    ($trait:ident, $method:ident, $func:ident) => {
        impl ops::$trait for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self) -> Tensor {
                Tensor::$func(self)
            }
        }
        impl ops::$trait for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self) -> Tensor {
                Tensor::$func(&self)
            }
        }
    };
}

unary_operator!(Neg, neg, neg);
unary_operator!(Not, not, not);

/// An [`Error::ShapeMismatch`] naming `op` and both shapes.
pub(crate) fn shape_error(op: &'static str, lhs: &Shape, rhs: &[usize]) -> Error {
    Error::ShapeMismatch {
        op,
        lhs: dims(lhs.dims()),
        rhs: dims(rhs),
    }
}
