//! Folding of ops whose operands are all constants.
//!
//! A folded value is the reference evaluator's value for the op on
//! one-element operands, so folding can never disagree with evaluation.

use super::op::Op;
use super::reference;
use super::subgraph::{SubNode, Subgraph};
use crate::dtype::{DType, Scalar};
use crate::shape::Shape;

/// The constant `op` produces from constant operands, with the node's
/// `dtype`, or `None` when the op is not folded (reductions) or the
/// evaluator rejects it (which recording has already ruled out).
pub(crate) fn fold(op: &Op, inputs: &[Scalar], dtype: DType) -> Option<Scalar> {
    if let (true, &[s]) = (op.is_view(), inputs) {
        return Some(s);
    }
    if !op.is_elementwise() {
        return None;
    }
    let node = |op: Op, dtype: DType, inputs: &[usize]| SubNode {
        op,
        shape: Shape::scalar(),
        dtype,
        inputs: inputs.iter().copied().collect(),
    };
    let mut nodes: Vec<SubNode> = inputs.iter().map(|&s| node(Op::Full(s), s.dtype(), &[])).collect();
    let operands: Vec<usize> = (0..inputs.len()).collect();
    nodes.push(node(op.clone(), dtype, &operands));
    let sub = Subgraph {
        nodes,
        outputs: vec![inputs.len()],
    };
    reference::evaluate(&sub).ok().map(|b| b[0].get(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{BinaryOp, UnaryOp};

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
            panic!("a float")
        };
        assert!(m.is_nan());
        assert_eq!(bin(BinaryOp::Lt, f(f64::NAN), f(1.0), DType::Bool), Scalar::Bool(false));
        assert_eq!(bin(BinaryOp::Ne, f(f64::NAN), f(1.0), DType::Bool), Scalar::Bool(true));
        assert_eq!(fold(&Op::Unary(UnaryOp::Round), &[f(2.5)], DType::F32), Some(f(2.0)));
        assert_eq!(
            fold(&Op::Unary(UnaryOp::Not), &[Scalar::Bool(true)], DType::Bool),
            Some(Scalar::Bool(false))
        );
        assert_eq!(fold(&Op::Cast, &[f(-2.7)], DType::I32), Some(i(-2)));
        assert_eq!(fold(&Op::Reshape, &[f(1.5)], DType::F32), Some(f(1.5)));
    }
}
