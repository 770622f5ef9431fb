//! The part of the graph one realization needs, detached from the live graph.

use super::op::Op;
use crate::dtype::DType;
use crate::shape::Shape;
use smallvec::SmallVec;

/// One node of a [`Subgraph`].
#[derive(Debug, Clone, PartialEq)]
pub struct SubNode {
    /// The operation.
    pub op: Op,
    /// The output shape.
    pub shape: Shape,
    /// The output dtype.
    pub dtype: DType,
    /// Positions of the inputs in [`Subgraph::nodes`], in operand order.
    pub inputs: SmallVec<[usize; 3]>,
}

/// A self-contained DAG: every node the requested outputs depend on, and
/// nothing else.
///
/// **Invariant:** `nodes` is in topological order: every input position is
/// smaller than the position of the node that uses it. Leaves are `Data` or
/// `Full` nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subgraph {
    /// The nodes, inputs before their users.
    pub nodes: Vec<SubNode>,
    /// Positions of the requested outputs, in request order.
    pub outputs: Vec<usize>,
}

impl Subgraph {
    /// For each node, how many times it is used as an input (an output
    /// request counts as one use).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut uses = vec![0; self.nodes.len()];
        for n in &self.nodes {
            for &i in &n.inputs {
                uses[i] += 1;
            }
        }
        for &o in &self.outputs {
            uses[o] += 1;
        }
        uses
    }
}
