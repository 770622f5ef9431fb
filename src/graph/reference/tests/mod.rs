//! Hand-computed cases for every op of the reference evaluator, built
//! through one small [`Builder`] and checked through one-line helpers.

mod elementwise;
mod reductions;
mod views;

use super::evaluate;
use crate::dtype::{DType, Element, Scalar};
use crate::error::Error;
use crate::graph::op::{Axes, Op};
use crate::graph::subgraph::{SubNode, Subgraph};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
use crate::shape::Shape;
use crate::storage::{HostBuffer, Storage};
use half::{bf16, f16};
use std::f64::consts::{E, PI, SQRT_2};
use std::sync::Arc;
use BinaryOp::*;
use DType::*;
use ReduceOp::{ArgMax, ArgMin, Max, Min, Prod, Sum};
use UnaryOp::*;

/// A subgraph under construction: each method appends one node and returns its position.
#[derive(Default)]
struct Builder {
    graph: Subgraph,
}

impl Builder {
    fn node(&mut self, op: Op, shape: &[usize], dtype: DType, inputs: &[usize]) -> usize {
        self.graph.nodes.push(SubNode {
            op,
            shape: Shape::new(shape),
            dtype,
            inputs: inputs.iter().copied().collect(),
        });
        self.graph.nodes.len() - 1
    }

    fn data<E: Element>(&mut self, shape: &[usize], xs: &[E]) -> usize {
        let storage = Arc::new(Storage::Host(HostBuffer::from_elements(xs)));
        self.node(Op::Data(storage), shape, E::DTYPE, &[])
    }

    fn shape(&self, x: usize) -> Vec<usize> {
        self.graph.nodes[x].shape.dims().to_vec()
    }

    fn dtype(&self, x: usize) -> DType {
        self.graph.nodes[x].dtype
    }

    fn unary(&mut self, op: UnaryOp, x: usize) -> usize {
        let (shape, dtype) = (self.shape(x), self.dtype(x));
        self.node(Op::Unary(op), &shape, dtype, &[x])
    }

    fn binary(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        let dtype = if op.is_comparison() { Bool } else { self.dtype(a) };
        let shape = self.shape(a);
        self.node(Op::Binary(op), &shape, dtype, &[a, b])
    }

    fn cast(&mut self, x: usize, to: DType) -> usize {
        let shape = self.shape(x);
        self.node(Op::Cast, &shape, to, &[x])
    }

    /// A reduction whose node keeps the reduced axes with length 1.
    fn reduce(&mut self, op: ReduceOp, x: usize, axes: &[usize], dtype: DType) -> usize {
        let mut shape = self.shape(x);
        for &a in axes {
            shape[a] = 1;
        }
        self.node(Op::Reduce { op, axes: axes.into() }, &shape, dtype, &[x])
    }

    fn view(&mut self, op: Op, x: usize, shape: &[usize]) -> usize {
        let dtype = self.dtype(x);
        self.node(op, shape, dtype, &[x])
    }

    fn evaluate(mut self, outputs: &[usize]) -> crate::Result<Vec<HostBuffer>> {
        self.graph.outputs = outputs.to_vec();
        evaluate(&self.graph)
    }

    /// The values of node `out`.
    fn run<E: Element>(self, out: usize) -> Vec<E> {
        let buffers = self.evaluate(&[out]).unwrap();
        assert_eq!(buffers[0].dtype(), E::DTYPE);
        buffers[0].to_vec()
    }

    /// Unary `op` of the single f64 `x`, returned with its sign bit intact.
    fn run_one(op: UnaryOp, x: f64) -> f64 {
        let mut g = Builder::default();
        let a = g.data(&[1], &[x]);
        let y = g.unary(op, a);
        g.run::<f64>(y)[0]
    }

    /// The error evaluating node `out` gives.
    fn error(self, out: usize) -> Error {
        self.evaluate(&[out]).expect_err("a malformed graph must be rejected")
    }
}

/// Equality where NaN equals NaN.
fn assert_same<E: Element>(got: &[E], want: &[E], what: &str) {
    let same = |a: &E, b: &E| a == b || (a.to_f64().is_nan() && b.to_f64().is_nan());
    let ok = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| same(a, b));
    assert!(ok, "{what}: got {got:?}, want {want:?}");
}

fn check_unary<E: Element>(op: UnaryOp, xs: &[E], want: &[E]) {
    let mut g = Builder::default();
    let x = g.data(&[xs.len()], xs);
    let y = g.unary(op, x);
    assert_same(&g.run::<E>(y), want, &format!("{op:?} {xs:?}"));
}

/// Like [`check_unary`] on f64, allowing two units in the last place.
fn check_unary_close(op: UnaryOp, xs: &[f64], want: &[f64]) {
    let mut g = Builder::default();
    let x = g.data(&[xs.len()], xs);
    let y = g.unary(op, x);
    let got = g.run::<f64>(y);
    for (&a, &b) in got.iter().zip(want) {
        let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 4.5e-16 * b.abs();
        assert!(ok, "{op:?} {xs:?}: got {got:?}, want {want:?}");
    }
}

fn check_binary<E: Element, R: Element>(op: BinaryOp, a: &[E], b: &[E], want: &[R]) {
    let mut g = Builder::default();
    let (x, y) = (g.data(&[a.len()], a), g.data(&[b.len()], b));
    let z = g.binary(op, x, y);
    assert_same(&g.run::<R>(z), want, &format!("{op:?} {a:?} {b:?}"));
}

fn check_cast<A: Element, B: Element>(xs: &[A], want: &[B]) {
    let mut g = Builder::default();
    let x = g.data(&[xs.len()], xs);
    let y = g.cast(x, B::DTYPE);
    assert_same(&g.run::<B>(y), want, &format!("cast {xs:?} to {}", B::DTYPE));
}

/// Reduces `xs` of `shape` over `axes` into a node of dtype `R`.
fn check_reduce<E: Element, R: Element>(op: ReduceOp, shape: &[usize], xs: &[E], axes: &[usize], want: &[R]) {
    let mut g = Builder::default();
    let x = g.data(shape, xs);
    let y = g.reduce(op, x, axes, R::DTYPE);
    assert_same(
        &g.run::<R>(y),
        want,
        &format!("{op:?} over {axes:?} of {shape:?} {xs:?}"),
    );
}

fn axes(xs: &[usize]) -> Axes {
    Axes::from_slice(xs)
}

fn h(x: f64) -> f16 {
    f16::from_f64(x)
}

fn b16(x: f64) -> bf16 {
    bf16::from_f64(x)
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn full_casts_its_scalar_to_the_node_dtype() {
    let cases: [(Scalar, DType, f64); 5] = [
        (Scalar::Float(1.7, F64), I32, 1.0),
        (Scalar::Float(0.1, F64), F16, 0.0999755859375),
        (Scalar::Int(300, I64), U8, 44.0),
        (Scalar::Bool(true), F32, 1.0),
        (Scalar::Float(-2.5, F32), Bool, 1.0),
    ];
    for (s, dtype, want) in cases {
        let mut g = Builder::default();
        let x = g.node(Op::Full(s), &[2, 2], dtype, &[]);
        let out = g.evaluate(&[x]).unwrap();
        assert_eq!(out[0].dtype(), dtype);
        assert_eq!(out[0].to_vec::<f64>(), vec![want; 4], "full({s}) as {dtype}");
    }
    let mut g = Builder::default();
    let x = g.node(Op::Full(Scalar::Int(-3, I32)), &[], I64, &[]);
    assert_eq!(g.run::<i64>(x), vec![-3]);
}

#[test]
fn malformed_graphs_are_rejected() {
    let mut g = Builder::default();
    let _ = g.data(&[2], &[1.0f32, 2.0]);
    let y = g.node(Op::Unary(Exp), &[2], F32, &[2]);
    let err = g.error(y);
    assert!(err.to_string().contains("does not come before"), "{err}");

    let mut g = Builder::default();
    let x = g.data(&[2], &[1.0f32, 2.0]);
    let y = g.node(Op::Binary(Add), &[2], F32, &[x]);
    assert!(matches!(g.error(y), Error::InvalidShape { op: "add", .. }));

    let mut g = Builder::default();
    let a = g.data(&[2], &[1.0f32, 2.0]);
    let b = g.data(&[3], &[1.0f32, 2.0, 3.0]);
    let y = g.binary(Add, a, b);
    let err = g.error(y);
    assert!(err.to_string().contains("operand 1 has shape [3]"), "{err}");

    let mut g = Builder::default();
    let _ = g.data(&[2], &[1.0f32, 2.0]);
    assert!(matches!(g.error(5), Error::InvalidShape { op: "evaluate", .. }));
}

#[test]
fn data_must_match_its_node() {
    let storage = Arc::new(Storage::Host(HostBuffer::from_elements(&[1i32, 2, 3])));
    let mut g = Builder::default();
    let x = g.node(Op::Data(storage.clone()), &[3], I64, &[]);
    assert!(matches!(
        g.error(x),
        Error::DTypeMismatch {
            op: "data",
            lhs: I64,
            rhs: I32
        }
    ));
    let mut g = Builder::default();
    let x = g.node(Op::Data(storage), &[2, 2], I32, &[]);
    assert!(matches!(g.error(x), Error::LengthMismatch { op: "data", len: 3, .. }));
}

#[test]
fn outputs_come_back_in_request_order_with_exact_leaves() {
    let mut g = Builder::default();
    let a = g.data(&[2], &[u32::MAX, 7]);
    let b = g.data(&[2], &[i64::MIN, i64::MAX]);
    let c = g.data(&[1], &[f64::MIN_POSITIVE / 4.0]);
    let out = g.evaluate(&[c, a, b, a]).unwrap();
    assert_eq!(out[0].to_vec::<f64>(), vec![f64::MIN_POSITIVE / 4.0]);
    assert_eq!(out[1].to_vec::<u32>(), vec![u32::MAX, 7]);
    assert_eq!(out[2].to_vec::<i64>(), vec![i64::MIN, i64::MAX]);
    assert_eq!(out[3], out[1]);
}
