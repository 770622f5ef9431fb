//! Folding of ops whose operands are all constants.
//!
//! Values are computed as the reference evaluator defines them: floats in f64
//! and rounded once to the node's dtype, integers exactly and then wrapped to
//! the node's dtype, integer division truncating with division by zero giving
//! 0, `maximum`/`minimum` propagating NaN.

use super::op::{BinaryOp, Op, UnaryOp};
use crate::dtype::{round_to, wrap_int, DType, Scalar};

/// The constant `op` produces from constant operands, with the node's
/// `dtype`, or `None` when the op is not folded (reductions, and unary ops
/// without an exact f64 form here).
pub(crate) fn fold(op: &Op, inputs: &[Scalar], dtype: DType) -> Option<Scalar> {
    match (op, inputs) {
        (op, &[s]) if op.is_view() => Some(s),
        (Op::Cast, &[s]) => Some(s.cast(dtype)),
        (Op::Unary(u), &[s]) => unary(*u, s, dtype),
        (Op::Binary(b), &[x, y]) => Some(binary(*b, x, y, dtype)),
        (Op::Where, &[c, a, b]) => Some(if c.is_zero() { b } else { a }.cast(dtype)),
        _ => None,
    }
}

/// A float result rounded to `dtype` (which may be bool or an integer for
/// ops such as `maximum` that keep their operand's kind).
fn float(v: f64, dtype: DType) -> Scalar {
    if dtype.is_float() {
        Scalar::Float(round_to(v, dtype), dtype)
    } else {
        Scalar::Float(v, DType::F64).cast(dtype)
    }
}

/// An integer result wrapped to `dtype`.
fn int(v: i128, dtype: DType) -> Scalar {
    match dtype {
        DType::Bool => Scalar::Bool(v != 0),
        d => Scalar::Int(wrap_int(v, d), d),
    }
}

/// The exact integer value of an integer or bool scalar.
fn int_value(s: Scalar) -> Option<i128> {
    match s {
        Scalar::Bool(b) => Some(b as i128),
        Scalar::Int(i, _) => Some(i),
        Scalar::Float(..) => None,
    }
}

fn unary(op: UnaryOp, s: Scalar, dtype: DType) -> Option<Scalar> {
    use UnaryOp::*;
    if let (Some(i), false) = (int_value(s), dtype.is_float()) {
        let v = match op {
            Neg => -i,
            Abs => i.abs(),
            Sign => i.signum(),
            Relu => i.max(0),
            Floor | Ceil | Round => i,
            Not if dtype == DType::Bool => (i == 0) as i128,
            Not => !i,
            _ => return None,
        };
        return Some(int(v, dtype));
    }
    let x = s.to_f64();
    let v = match op {
        Neg => -x,
        Abs => x.abs(),
        Exp => x.exp(),
        Exp2 => x.exp2(),
        Log => x.ln(),
        Log2 => x.log2(),
        Sqrt => x.sqrt(),
        Rsqrt => 1.0 / x.sqrt(),
        Recip => 1.0 / x,
        Sin => x.sin(),
        Cos => x.cos(),
        Tanh => x.tanh(),
        Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        GeluTanh => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()),
        Silu => x / (1.0 + (-x).exp()),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round_ties_even(),
        Sign => {
            if x.is_nan() {
                x
            } else if x == 0.0 {
                0.0
            } else {
                x.signum()
            }
        }
        GeluErf | Not => return None,
    };
    Some(float(v, dtype))
}

fn binary(op: BinaryOp, a: Scalar, b: Scalar, dtype: DType) -> Scalar {
    use BinaryOp::*;
    if op.is_comparison() {
        let (x, y) = (a.to_f64(), b.to_f64());
        let r = match (int_value(a), int_value(b)) {
            (Some(i), Some(j)) => compare(op, i.cmp(&j) as i8, false),
            _ => compare(op, x.partial_cmp(&y).map_or(0, |o| o as i8), x.is_nan() || y.is_nan()),
        };
        return Scalar::Bool(r);
    }
    if let (Some(i), Some(j)) = (int_value(a), int_value(b)) {
        let v = match op {
            Add => i + j,
            Sub => i - j,
            Mul => i.wrapping_mul(j),
            Div => i.checked_div(j).unwrap_or(0),
            Pow => (i as f64).powf(j as f64) as i128,
            Maximum => i.max(j),
            Minimum => i.min(j),
            BitAnd => i & j,
            BitOr => i | j,
            BitXor => i ^ j,
            Eq | Ne | Lt | Le | Gt | Ge => unreachable!("comparisons return above"),
        };
        return int(v, dtype);
    }
    let (x, y) = (a.to_f64(), b.to_f64());
    let v = match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Div => x / y,
        Pow => x.powf(y),
        Maximum | Minimum if x.is_nan() || y.is_nan() => f64::NAN,
        Maximum => x.max(y),
        Minimum => x.min(y),
        // Bitwise ops on floats are rejected when recorded; NaN marks misuse that slipped through.
        BitAnd | BitOr | BitXor => f64::NAN,
        Eq | Ne | Lt | Le | Gt | Ge => unreachable!("comparisons return above"),
    };
    float(v, dtype)
}

/// A comparison's truth from an ordering (-1, 0, 1); every comparison but
/// `ne` is false when an operand is NaN.
fn compare(op: BinaryOp, ord: i8, nan: bool) -> bool {
    use BinaryOp::*;
    if nan {
        return op == Ne;
    }
    match op {
        Eq => ord == 0,
        Ne => ord != 0,
        Lt => ord < 0,
        Le => ord <= 0,
        Gt => ord > 0,
        Ge => ord >= 0,
        _ => unreachable!("{op:?} is not a comparison"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> Scalar {
        Scalar::Float(x, DType::F32)
    }

    #[test]
    fn folds_follow_the_reference_rules() {
        let i = |x: i128| Scalar::Int(x, DType::I32);
        let bin = |op, a, b, d| fold(&Op::Binary(op), &[a, b], d).unwrap();
        assert_eq!(bin(BinaryOp::Div, i(7), i(-2), DType::I32), i(-3));
        assert_eq!(bin(BinaryOp::Div, i(7), i(0), DType::I32), i(0));
        assert_eq!(
            bin(BinaryOp::Add, i(i32::MAX as i128), i(1), DType::I32),
            i(i32::MIN as i128)
        );
        assert_eq!(bin(BinaryOp::Div, f(1.0), f(3.0), DType::F32), f((1.0f32 / 3.0) as f64));
        let Scalar::Float(m, _) = bin(BinaryOp::Maximum, f(f64::NAN), f(1.0), DType::F32) else {
            panic!()
        };
        assert!(m.is_nan());
        assert_eq!(bin(BinaryOp::Lt, f(f64::NAN), f(1.0), DType::Bool), Scalar::Bool(false));
        assert_eq!(bin(BinaryOp::Ne, f(f64::NAN), f(1.0), DType::Bool), Scalar::Bool(true));
        assert_eq!(fold(&Op::Unary(UnaryOp::Round), &[f(2.5)], DType::F32), Some(f(2.0)));
        assert_eq!(
            fold(&Op::Unary(UnaryOp::Not), &[Scalar::Bool(true)], DType::Bool),
            Some(Scalar::Bool(false))
        );
        assert_eq!(fold(&Op::Unary(UnaryOp::GeluErf), &[f(1.0)], DType::F32), None);
    }
}
