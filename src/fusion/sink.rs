//! Views and gathers moved below short elementwise chains of leaves.
//!
//! A view (permute, reshape, expand, slice) of an elementwise chain whose
//! every base is a leaf (`Data` or `Full`) is the same chain over views of
//! those leaves: `cast(labels).reshape(..).expand(..)` is
//! `cast(labels.reshape(..).expand(..))`, and `a.exp().t() + b` is
//! `a.t().exp() + b`. Rewritten that way, the chain is recomputed in the
//! kernel of the view's consumer, which reads the leaves through the
//! composed view, instead of being stored by a kernel of its own and read
//! back. Chains of at most [`MAX_SUNK`] ops are moved, so the work a
//! broadcast repeats stays a few instructions per element; random nodes
//! are not moved (their values depend on their own row-major positions).
//!
//! A gather (or `index_select`) of such a chain is the chain over gathers
//! of its data with the same index, `cast(x).gather(1, i)` being
//! `x.gather(1, i).cast()`, so the chain is not stored for the gather to
//! read; chains with a constant among their leaves are left as they are.
//!
//! The rewrite keeps every leaf, in order (data are bound and constants
//! given by their order among the leaves), and drops the nodes no output
//! needs any more.

use crate::graph::{Op, SubNode, Subgraph};
use std::borrow::Cow;

/// The most elementwise ops a view is moved below.
const MAX_SUNK: usize = 4;

/// `g` with views of short leaf chains moved below the chains, or `g`
/// itself where there is none.
pub(crate) fn sink_views(g: &Subgraph) -> Cow<'_, Subgraph> {
    let mut out: Vec<SubNode> = Vec::with_capacity(g.nodes.len());
    // The number of elementwise ops above each new node down to its leaves,
    // `None` where a base is computed otherwise (or too far).
    let mut chain: Vec<Option<usize>> = Vec::with_capacity(g.nodes.len());
    let mut map = Vec::with_capacity(g.nodes.len());
    let mut moved = false;
    for n in &g.nodes {
        let inputs: smallvec::SmallVec<[usize; 3]> = n.inputs.iter().map(|&p| map[p]).collect();
        let at = match inputs.first() {
            Some(&e) if is_view(&n.op) && chain[e].is_some_and(|c| c > 0) => {
                moved = true;
                sink(&mut out, &mut chain, &n.op, n, e, None)
            }
            Some(&e) if matches!(n.op, Op::Gather { .. }) && chain[e].is_some_and(|c| c > 0) && !has_full(&out, e) => {
                moved = true;
                sink(&mut out, &mut chain, &n.op, n, e, Some(inputs[1]))
            }
            _ => push(
                &mut out,
                &mut chain,
                SubNode {
                    inputs,
                    ..n.clone()
                },
            ),
        };
        map.push(at);
    }
    if !moved {
        return Cow::Borrowed(g);
    }
    Cow::Owned(live(out, g.outputs.iter().map(|&o| map[o]).collect()))
}

/// Whether a constant is among the leaves of chain `e` (a gather of one
/// would be computed as data; a gather is not moved above it).
fn has_full(out: &[SubNode], e: usize) -> bool {
    match &out[e].op {
        Op::Full(_) => true,
        _ => out[e].inputs.iter().any(|&p| has_full(out, p)),
    }
}

fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape | Op::Permute(_) | Op::Expand | Op::Slice { .. })
}

/// Pushes `node` and records its chain length.
fn push(out: &mut Vec<SubNode>, chain: &mut Vec<Option<usize>>, node: SubNode) -> usize {
    let c = match &node.op {
        Op::Data(_) | Op::Full(_) => Some(0),
        op if is_view(op) => chain[node.inputs[0]].filter(|&c| c == 0),
        op if op.is_elementwise() => node
            .inputs
            .iter()
            .try_fold(1, |sum, &p| chain[p].map(|c| sum + c))
            .filter(|&c| c <= MAX_SUNK),
        _ => None,
    };
    out.push(node);
    chain.push(c);
    out.len() - 1
}

/// The view or gather `op` (shaped like `like`, a gather's index
/// `index`) applied to new node `e`: below `e` when `e` is elementwise, on
/// top of it when it is a leaf or a view of one.
fn sink(
    out: &mut Vec<SubNode>,
    chain: &mut Vec<Option<usize>>,
    op: &Op,
    like: &SubNode,
    e: usize,
    index: Option<usize>,
) -> usize {
    let node = &out[e];
    if !node.op.is_elementwise() {
        let view = SubNode {
            op: op.clone(),
            shape: like.shape.clone(),
            dtype: node.dtype,
            inputs: [e].into_iter().chain(index).collect(),
        };
        return push(out, chain, view);
    }
    let (elementwise, dtype, operands) = (node.op.clone(), node.dtype, node.inputs.clone());
    let inputs = operands.iter().map(|&p| sink(out, chain, op, like, p, index)).collect();
    push(
        out,
        chain,
        SubNode {
            op: elementwise,
            shape: like.shape.clone(),
            dtype,
            inputs,
        },
    )
}

/// `nodes` less those that no output needs, except leaves, renumbered.
pub(crate) fn live(nodes: Vec<SubNode>, outputs: Vec<usize>) -> Subgraph {
    let mut needed = vec![false; nodes.len()];
    for &o in &outputs {
        needed[o] = true;
    }
    for i in (0..nodes.len()).rev() {
        if needed[i] || matches!(nodes[i].op, Op::Data(_) | Op::Full(_)) {
            needed[i] = true;
            for &p in &nodes[i].inputs {
                needed[p] = true;
            }
        }
    }
    let mut at = vec![usize::MAX; nodes.len()];
    let mut kept = Vec::with_capacity(nodes.len());
    for (i, mut n) in nodes.into_iter().enumerate() {
        if needed[i] {
            n.inputs.iter_mut().for_each(|p| *p = at[*p]);
            at[i] = kept.len();
            kept.push(n);
        }
    }
    Subgraph {
        nodes: kept,
        outputs: outputs.into_iter().map(|o| at[o]).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::UnaryOp;
    use crate::{DType, Scalar, Shape};

    fn node(op: Op, shape: &[usize], dtype: DType, inputs: &[usize]) -> SubNode {
        SubNode {
            op,
            shape: Shape::new(shape),
            dtype,
            inputs: inputs.iter().copied().collect(),
        }
    }

    /// A leaf (a constant: the rewrite treats data and constants alike).
    fn leaf(shape: &[usize], dtype: DType) -> SubNode {
        let value = if dtype.is_float() { Scalar::Float(1.5, dtype) } else { Scalar::Int(3, dtype) };
        node(Op::Full(value), shape, dtype, &[])
    }

    #[test]
    fn a_view_of_a_leaf_chain_moves_below_it_and_the_chain_above_is_dropped() {
        let g = Subgraph {
            nodes: vec![
                leaf(&[5], DType::I64),
                node(Op::Cast, &[5], DType::I32, &[0]),
                node(Op::Reshape, &[5, 1], DType::I32, &[1]),
                node(Op::Expand, &[5, 3], DType::I32, &[2]),
            ],
            outputs: vec![3],
        };
        let s = sink_views(&g);
        let ops: Vec<String> = s.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["full(3:i64)", "reshape", "expand", "cast"], "{s:?}");
        assert_eq!(s.nodes[3].shape, Shape::new(&[5, 3]));
        assert_eq!(s.nodes[3].dtype, DType::I32);
        assert_eq!(s.outputs, [3]);
    }

    #[test]
    fn chains_over_computed_values_long_chains_and_random_nodes_stay() {
        let exp = Op::Unary(UnaryOp::Exp);
        let mut nodes = vec![leaf(&[4, 6], DType::F32)];
        for k in 0..=MAX_SUNK {
            nodes.push(node(exp.clone(), &[4, 6], DType::F32, &[k]));
        }
        let top = nodes.len() - 1;
        nodes.push(node(Op::Permute([1, 0].into_iter().collect()), &[6, 4], DType::F32, &[top]));
        let g = Subgraph {
            outputs: vec![nodes.len() - 1],
            nodes,
        };
        assert!(matches!(sink_views(&g), Cow::Borrowed(_)), "{} ops are too many", MAX_SUNK + 1);
        let seed = node(Op::Full(Scalar::Int(3, DType::I64)), &[], DType::I64, &[]);
        let g = Subgraph {
            nodes: vec![
                seed,
                node(Op::Random, &[4, 6], DType::F32, &[0]),
                node(Op::Permute([1, 0].into_iter().collect()), &[6, 4], DType::F32, &[1]),
            ],
            outputs: vec![2],
        };
        assert!(matches!(sink_views(&g), Cow::Borrowed(_)));
        let sum = Op::Reduce {
            op: crate::graph::ReduceOp::Sum,
            axes: [1].into_iter().collect(),
        };
        let g = Subgraph {
            nodes: vec![
                leaf(&[4, 6], DType::F32),
                node(sum, &[4, 1], DType::F32, &[0]),
                node(exp, &[4, 1], DType::F32, &[1]),
                node(Op::Expand, &[4, 6], DType::F32, &[2]),
            ],
            outputs: vec![3],
        };
        assert!(matches!(sink_views(&g), Cow::Borrowed(_)));
    }
}
