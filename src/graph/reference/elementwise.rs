//! Elementwise ops of the reference evaluator: their semantics are the
//! module docs of [`super`].

use super::{erf, kind, Input, Kind, Values};
use crate::dtype::{round_to, wrap_int, DType};
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, UnaryOp};
use std::cmp::Ordering;

/// `a` where `cond` holds, else `b`.
pub(super) fn select<T>(cond: &[bool], a: Vec<T>, b: Vec<T>) -> Vec<T> {
    cond.iter()
        .zip(a.into_iter().zip(b))
        .map(|(&c, (x, y))| if c { x } else { y })
        .collect()
}

pub(super) fn unary(op: UnaryOp, x: &Input, dtype: DType) -> Result<Values> {
    let name = op.name();
    let reject = |reason| Error::UnsupportedDType {
        op: name,
        dtype,
        reason,
    };
    match kind(dtype) {
        Kind::Float => {
            let f = float_unary(op).ok_or_else(|| reject("needs an integer or bool dtype"))?;
            Ok(Values::F(
                x.floats(dtype).into_iter().map(|v| round_to(f(v), dtype)).collect(),
            ))
        }
        Kind::Int => {
            let f = int_unary(op).ok_or_else(|| reject("needs a float dtype"))?;
            Ok(Values::I(
                x.ints(dtype).into_iter().map(|v| wrap_int(f(v), dtype)).collect(),
            ))
        }
        Kind::Bool => match op {
            UnaryOp::Not => Ok(Values::B(x.bools().into_iter().map(|b| !b).collect())),
            UnaryOp::Neg => Err(reject("negation of bools is not defined; use not")),
            _ => {
                let f = int_unary(op).ok_or_else(|| reject("needs a float dtype"))?;
                Ok(Values::B(x.ints(dtype).into_iter().map(|v| f(v) != 0).collect()))
            }
        },
    }
}

fn float_unary(op: UnaryOp) -> Option<fn(f64) -> f64> {
    use UnaryOp::*;
    let f: fn(f64) -> f64 = match op {
        Neg => |x| -x,
        Abs => f64::abs,
        Exp => f64::exp,
        Exp2 => f64::exp2,
        Log => f64::ln,
        Log2 => f64::log2,
        Sqrt => f64::sqrt,
        Rsqrt => |x| 1.0 / x.sqrt(),
        Recip => |x| 1.0 / x,
        Sin => f64::sin,
        Cos => f64::cos,
        Tanh => f64::tanh,
        Sigmoid => sigmoid,
        Relu => |x| if x.is_nan() || x > 0.0 { x } else { 0.0 },
        GeluTanh => |x| {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        },
        GeluErf => erf::gelu_erf,
        Silu => |x| x * sigmoid(x),
        Floor => f64::floor,
        Ceil => f64::ceil,
        Round => f64::round_ties_even,
        Sign => |x| if x.is_nan() || x == 0.0 { x.abs() } else { x.signum() },
        Not => return None,
    };
    Some(f)
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Integer unary ops, on exact values (the caller wraps the result).
fn int_unary(op: UnaryOp) -> Option<fn(i128) -> i128> {
    use UnaryOp::*;
    let f: fn(i128) -> i128 = match op {
        Neg => |x| -x,
        Abs => i128::abs,
        Not => |x| !x,
        Sign => i128::signum,
        Relu => |x| x.max(0),
        Floor | Ceil | Round => |x| x,
        Exp | Exp2 | Log | Log2 | Sqrt | Rsqrt | Recip | Sin | Cos | Tanh | Sigmoid | GeluTanh | GeluErf | Silu => {
            return None
        }
    };
    Some(f)
}

pub(super) fn binary(op: BinaryOp, lhs: &Input, rhs: &Input, dtype: DType) -> Result<Values> {
    let name = op.name();
    let reject = |dtype, reason| Error::UnsupportedDType {
        op: name,
        dtype,
        reason,
    };
    if let Some(test) = comparison(op) {
        if dtype != DType::Bool {
            return Err(reject(dtype, "a comparison yields bool"));
        }
        let common = lhs.dtype.promote(rhs.dtype);
        let orderings: Vec<Option<Ordering>> = match kind(common) {
            Kind::Float => zip(&lhs.floats(common), &rhs.floats(common), |a, b| a.partial_cmp(&b)),
            _ => zip(&lhs.ints(common), &rhs.ints(common), |a, b| a.partial_cmp(&b)),
        };
        return Ok(Values::B(orderings.into_iter().map(test).collect()));
    }
    match kind(dtype) {
        Kind::Float => {
            let f = float_binary(op).ok_or_else(|| reject(dtype, "needs an integer or bool dtype"))?;
            let out = zip(&lhs.floats(dtype), &rhs.floats(dtype), |a, b| round_to(f(a, b), dtype));
            Ok(Values::F(out))
        }
        Kind::Int | Kind::Bool => {
            let f = int_binary(op).ok_or_else(|| reject(dtype, "needs a float dtype"))?;
            let exact = zip(&lhs.ints(dtype), &rhs.ints(dtype), f);
            Ok(match kind(dtype) {
                Kind::Bool => Values::B(exact.into_iter().map(|v| v != 0).collect()),
                _ => Values::I(exact.into_iter().map(|v| wrap_int(v, dtype)).collect()),
            })
        }
    }
}

fn zip<T: Copy, R>(a: &[T], b: &[T], f: impl Fn(T, T) -> R) -> Vec<R> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// The test a comparison applies to the ordering of its operands (`None`
/// when a NaN makes them unordered).
fn comparison(op: BinaryOp) -> Option<fn(Option<Ordering>) -> bool> {
    use BinaryOp::*;
    use Ordering::*;
    let test: fn(Option<Ordering>) -> bool = match op {
        Eq => |o| o == Some(Equal),
        Ne => |o| o != Some(Equal),
        Lt => |o| o == Some(Less),
        Le => |o| matches!(o, Some(Less | Equal)),
        Gt => |o| o == Some(Greater),
        Ge => |o| matches!(o, Some(Greater | Equal)),
        _ => return None,
    };
    Some(test)
}

fn float_binary(op: BinaryOp) -> Option<fn(f64, f64) -> f64> {
    use BinaryOp::*;
    let f: fn(f64, f64) -> f64 = match op {
        Add => |a, b| a + b,
        Sub => |a, b| a - b,
        Mul => |a, b| a * b,
        Div => |a, b| a / b,
        Pow => f64::powf,
        Maximum => nan_max,
        Minimum => nan_min,
        Eq | Ne | Lt | Le | Gt | Ge | BitAnd | BitOr | BitXor => return None,
    };
    Some(f)
}

/// Integer binary ops, on exact values (the caller wraps the result).
fn int_binary(op: BinaryOp) -> Option<fn(i128, i128) -> i128> {
    use BinaryOp::*;
    let f: fn(i128, i128) -> i128 = match op {
        Add => i128::wrapping_add,
        Sub => i128::wrapping_sub,
        Mul => i128::wrapping_mul,
        Div => |a, b| if b == 0 { 0 } else { a.wrapping_div(b) },
        Maximum => i128::max,
        Minimum => i128::min,
        BitAnd => |a, b| a & b,
        BitOr => |a, b| a | b,
        BitXor => |a, b| a ^ b,
        Pow | Eq | Ne | Lt | Le | Gt | Ge => return None,
    };
    Some(f)
}

pub(super) fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

pub(super) fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if b < a {
        b
    } else {
        a
    }
}
