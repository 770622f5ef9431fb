//! The live op graph that tensor handles point into.
//!
//! There is one graph per process, behind a mutex (`with_graph`, inside the crate), so a
//! [`Tensor`](crate::Tensor) is `Send + Sync` and tensors built on different
//! threads can be combined. Each node counts the tensor handles that point at
//! it; a node that no handle and no other node uses is removed at once, and
//! its inputs are checked in turn (with a work list, never by recursion, so a
//! chain of a million nodes is freed without deep stacks).
//!
//! Insertion simplifies as it goes:
//! - **CSE:** a node equal to a live one (same op, inputs, shape and dtype;
//!   data compared by allocation) is not added again: the live one is returned.
//!   The CSE table maps a hash of that key to the live nodes that have it,
//!   and a candidate is confirmed by comparing it with the node, so the
//!   table holds no copy of the nodes and a hash collision never merges two
//!   different nodes.
//! - **Constant folding:** an elementwise op whose inputs are all `Full`
//!   constants becomes a `Full`; a view of a `Full` is a `Full` of the new shape.
//! - **View peepholes:** a reshape of a reshape reads the original input.
//!
//! **Invariant:** a node's `inputs` and its incoming edges describe the same
//! operands; edges point from an input to its user.

use super::fold;
use super::op::Op;
use super::subgraph::{SubNode, Subgraph};
use crate::dtype::DType;
use crate::shape::Shape;
use crate::storage::Storage;
use petgraph::stable_graph::{NodeIndex, StableGraph};
use petgraph::Direction;
use smallvec::SmallVec;
use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex};

/// Input lists of nodes.
pub type Inputs = SmallVec<[NodeIndex; 3]>;

/// One recorded operation.
#[derive(Debug, Clone)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// The output shape.
    pub shape: Shape,
    /// The output dtype.
    pub dtype: DType,
    /// The operands, in order.
    pub inputs: Inputs,
    /// How many tensor handles point at this node.
    handles: usize,
    /// The hash of the node's CSE key (op, inputs, shape, dtype).
    key_hash: u64,
    /// The extraction that last visited this node and the node's position
    /// in its subgraph (see [`Graph::extract`]).
    visit: Cell<(u64, usize)>,
}

impl Node {
    /// Whether the node's CSE key is `(op, inputs, shape, dtype)`.
    fn has_key(&self, op: &Op, inputs: &[NodeIndex], shape: &Shape, dtype: DType) -> bool {
        self.op == *op && self.inputs.as_slice() == inputs && self.shape == *shape && self.dtype == dtype
    }
}

/// The hasher of the graph's tables: fast, and the same in every run.
type FastHash = foldhash::fast::FixedState;

/// The hash of a CSE key.
fn key_hash(op: &Op, inputs: &[NodeIndex], shape: &Shape, dtype: DType) -> u64 {
    let mut h = FastHash::default().build_hasher();
    op.hash(&mut h);
    inputs.hash(&mut h);
    shape.hash(&mut h);
    dtype.hash(&mut h);
    h.finish()
}

/// The live nodes with one CSE key hash: almost always one.
type Candidates = SmallVec<[NodeIndex; 1]>;

/// The op graph: nodes, their operand edges and the CSE table.
#[derive(Default)]
pub struct Graph {
    dag: StableGraph<Node, u8>,
    /// Each CSE key hash in use, with the live nodes whose key has it.
    cse: HashMap<u64, Candidates, FastHash>,
    /// The number of extractions so far, which tells nodes visited by the
    /// current one from the others.
    extractions: Cell<u64>,
}

static GRAPH: LazyLock<Mutex<Graph>> = LazyLock::new(Mutex::default);

/// Runs `f` with the process's op graph locked.
///
/// `f` must not drop a tensor handle (that would lock the graph again).
pub(crate) fn with_graph<R>(f: impl FnOnce(&mut Graph) -> R) -> R {
    let mut g = GRAPH.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut g)
}

/// The number of nodes in the live graph, across all threads.
pub fn live_nodes() -> usize {
    with_graph(|g| g.len())
}

/// The nodes `outputs` depend on, detached from the live graph (see [`Graph::extract`]).
pub fn extract(outputs: &[NodeIndex]) -> Subgraph {
    with_graph(|g| g.extract(outputs))
}

impl Graph {
    /// The number of live nodes.
    pub fn len(&self) -> usize {
        self.dag.node_count()
    }

    /// Whether the graph holds no node.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The node at `n`.
    ///
    /// # Panics
    /// If `n` is not a live node.
    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.dag[n]
    }

    /// Records `op` on `inputs` with the given output shape and dtype, and
    /// takes one handle on the resulting node, which may be an existing equal
    /// node or a folded constant (see the module docs).
    ///
    /// The caller checks that the op is well formed for its inputs.
    pub(crate) fn insert(&mut self, op: Op, inputs: &[NodeIndex], shape: Shape, dtype: DType) -> NodeIndex {
        let (op, inputs) = self.simplify(op, inputs, &shape, dtype);
        let hash = key_hash(&op, &inputs, &shape, dtype);
        let n = match self.find(hash, &op, &inputs, &shape, dtype) {
            Some(n) => n,
            None => {
                let n = self.dag.add_node(Node {
                    op,
                    shape,
                    dtype,
                    inputs,
                    handles: 0,
                    key_hash: hash,
                    visit: Cell::new((0, 0)),
                });
                for pos in 0..self.dag[n].inputs.len() {
                    let i = self.dag[n].inputs[pos];
                    self.dag.add_edge(i, n, pos as u8);
                }
                self.cse.entry(hash).or_default().push(n);
                n
            }
        };
        self.dag[n].handles += 1;
        n
    }

    /// The live node whose CSE key is `(op, inputs, shape, dtype)`, which hashes to `hash`.
    fn find(&self, hash: u64, op: &Op, inputs: &[NodeIndex], shape: &Shape, dtype: DType) -> Option<NodeIndex> {
        let candidates = self.cse.get(&hash)?;
        candidates
            .iter()
            .copied()
            .find(|&c| self.dag[c].has_key(op, inputs, shape, dtype))
    }

    /// Rewrites an op before it is recorded: folding and view peepholes.
    fn simplify(&self, op: Op, inputs: &[NodeIndex], shape: &Shape, dtype: DType) -> (Op, Inputs) {
        let all_const = !inputs.is_empty() && inputs.iter().all(|&i| matches!(self.dag[i].op, Op::Full(_)));
        if all_const {
            let consts: SmallVec<[_; 3]> = inputs
                .iter()
                .filter_map(|&i| match self.dag[i].op {
                    Op::Full(s) => Some(s),
                    _ => None,
                })
                .collect();
            if let Some(s) = fold::fold(&op, &consts, dtype) {
                return (Op::Full(s), Inputs::new());
            }
        }
        if let (Op::Reshape, &[input]) = (&op, inputs) {
            // A reshape reads the elements of its source in row-major order,
            // so a reshape of a reshape reads the inner one's source.
            let input_node = &self.dag[input];
            let source = match input_node.op {
                Op::Reshape => input_node.inputs[0],
                _ => input,
            };
            let src = &self.dag[source];
            if src.shape == *shape {
                // The key of the source itself: CSE returns it.
                return (src.op.clone(), src.inputs.clone());
            }
            return (Op::Reshape, Inputs::from_elem(source, 1));
        }
        (op, Inputs::from_slice(inputs))
    }

    /// Takes one more handle on `n`.
    pub(crate) fn retain(&mut self, n: NodeIndex) {
        self.dag[n].handles += 1;
    }

    /// Gives back one handle on `n`, removing every node that becomes unreachable.
    pub(crate) fn release(&mut self, n: NodeIndex) {
        let node = &mut self.dag[n];
        node.handles = node
            .handles
            .checked_sub(1)
            .expect("a node released more often than retained");
        if node.handles == 0 {
            self.collect(n);
        }
    }

    /// Whether `n` is live but neither held by a handle nor used by a node.
    fn is_dead(&self, n: NodeIndex) -> bool {
        self.dag.node_weight(n).is_some_and(|node| {
            node.handles == 0 && self.dag.neighbors_directed(n, Direction::Outgoing).next().is_none()
        })
    }

    /// Removes `start` if it is dead, then every input that dies with it.
    fn collect(&mut self, start: NodeIndex) {
        if !self.is_dead(start) {
            return;
        }
        let mut work: SmallVec<[NodeIndex; 16]> = SmallVec::from_elem(start, 1);
        while let Some(n) = work.pop() {
            if !self.is_dead(n) {
                continue;
            }
            let node = self.dag.remove_node(n).expect("checked above");
            self.forget(node.key_hash, n);
            work.extend(node.inputs);
        }
    }

    /// Removes `n` from the CSE table, where it is listed under `hash`.
    fn forget(&mut self, hash: u64, n: NodeIndex) {
        // One lookup: the entry removes itself without hashing again.
        if let std::collections::hash_map::Entry::Occupied(mut candidates) = self.cse.entry(hash) {
            candidates.get_mut().retain(|c| *c != n);
            if candidates.get().is_empty() {
                candidates.remove();
            }
        }
    }

    /// Replaces `n`'s op by realized data, dropping its operand edges and any
    /// node that was only reachable through them.
    pub(crate) fn set_data(&mut self, n: NodeIndex, data: Arc<Storage>) {
        let node = &self.dag[n];
        if matches!(node.op, Op::Data(_)) {
            return;
        }
        self.forget(node.key_hash, n);
        let incoming: SmallVec<[_; 4]> = self
            .dag
            .edges_directed(n, Direction::Incoming)
            .map(|e| petgraph::visit::EdgeRef::id(&e))
            .collect();
        for e in incoming {
            self.dag.remove_edge(e);
        }
        let node = &mut self.dag[n];
        node.op = Op::Data(data);
        let inputs = std::mem::take(&mut node.inputs);
        node.key_hash = key_hash(&node.op, &[], &node.shape, node.dtype);
        let hash = node.key_hash;
        self.cse.entry(hash).or_default().push(n);
        for i in inputs {
            self.collect(i);
        }
    }

    /// The nodes `outputs` depend on, in topological order (inputs before
    /// users), detached from the live graph: the order and positions of
    /// [`Graph::walk`].
    pub fn extract(&self, outputs: &[NodeIndex]) -> Subgraph {
        let mut nodes = Vec::with_capacity(16);
        let outputs = self.walk(outputs, |node, inputs| {
            nodes.push(SubNode {
                op: node.op.clone(),
                shape: node.shape.clone(),
                dtype: node.dtype,
                inputs: SmallVec::from_slice(inputs),
            })
        });
        Subgraph {
            nodes,
            outputs: outputs.to_vec(),
        }
    }

    /// Calls `visit` on each node `outputs` depend on, once, in topological
    /// order (inputs before users, each node's inputs in operand order),
    /// with the positions in that order of the node's inputs; returns the
    /// positions of `outputs`. Walked with an explicit stack; each node
    /// visited is marked with its position, so the walk costs only the
    /// subgraph's size.
    pub fn walk(&self, outputs: &[NodeIndex], mut visit: impl FnMut(&Node, &[usize])) -> SmallVec<[usize; 4]> {
        let epoch = self.extractions.get() + 1;
        self.extractions.set(epoch);
        let mut visited = 0;
        let mut positions = SmallVec::with_capacity(outputs.len());
        let mut stack: SmallVec<[(NodeIndex, bool); 32]> = SmallVec::new();
        for &out in outputs {
            stack.push((out, false));
            while let Some((n, inputs_done)) = stack.pop() {
                let node = &self.dag[n];
                if node.visit.get().0 == epoch {
                    continue;
                }
                if inputs_done {
                    let inputs: SmallVec<[usize; 3]> = node.inputs.iter().map(|&i| self.dag[i].visit.get().1).collect();
                    visit(node, &inputs);
                    node.visit.set((epoch, visited));
                    visited += 1;
                } else {
                    stack.push((n, true));
                    for &i in node.inputs.iter().rev() {
                        if self.dag[i].visit.get().0 != epoch {
                            stack.push((i, false));
                        }
                    }
                }
            }
            positions.push(self.dag[out].visit.get().1);
        }
        positions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Scalar;
    use crate::ops::BinaryOp;
    use crate::storage::HostBuffer;

    fn data(g: &mut Graph, len: usize) -> NodeIndex {
        let buf = Arc::new(Storage::Host(HostBuffer::zeros(DType::F32, len)));
        g.insert(Op::Data(buf), &[], Shape::new(&[len]), DType::F32)
    }

    #[test]
    fn cse_returns_the_live_node_and_release_removes_chains() {
        let mut g = Graph::default();
        let a = data(&mut g, 3);
        let b = data(&mut g, 3);
        let add = |g: &mut Graph| g.insert(Op::Binary(BinaryOp::Add), &[a, b], Shape::new(&[3]), DType::F32);
        let x = add(&mut g);
        let y = add(&mut g);
        assert_eq!(x, y);
        assert_eq!(g.len(), 3);
        g.release(a);
        g.release(b);
        assert_eq!(g.len(), 3, "inputs stay while a user does");
        g.release(x);
        assert_eq!(g.len(), 3, "one handle is left on the sum");
        g.release(y);
        assert!(g.is_empty());
        assert!(g.cse.is_empty());
    }

    #[test]
    fn a_hash_collision_never_merges_different_nodes() {
        let mut g = Graph::default();
        let a = data(&mut g, 3);
        let b = data(&mut g, 3);
        let neg = Op::Unary(crate::ops::UnaryOp::Neg);
        // List `b` under the hash of `-a`, as a collision would.
        let hash = key_hash(&neg, &[a], &Shape::new(&[3]), DType::F32);
        g.cse.entry(hash).or_default().push(b);
        let x = g.insert(neg.clone(), &[a], Shape::new(&[3]), DType::F32);
        assert_ne!(x, b, "a node with another key was returned");
        assert_eq!(g.node(x).inputs.as_slice(), &[a]);
        let y = g.insert(neg, &[a], Shape::new(&[3]), DType::F32);
        assert_eq!(x, y, "the equal node is found past the colliding one");
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn constants_fold_and_views_of_constants_stay_constants() {
        let mut g = Graph::default();
        let two = g.insert(
            Op::Full(Scalar::Float(2.0, DType::F32)),
            &[],
            Shape::new(&[2]),
            DType::F32,
        );
        let four = g.insert(Op::Binary(BinaryOp::Mul), &[two, two], Shape::new(&[2]), DType::F32);
        assert_eq!(g.node(four).op, Op::Full(Scalar::Float(4.0, DType::F32)));
        let wide = g.insert(Op::Expand, &[four], Shape::new(&[3, 2]), DType::F32);
        assert_eq!(g.node(wide).op, Op::Full(Scalar::Float(4.0, DType::F32)));
        assert!(g.node(wide).inputs.is_empty());
    }

    #[test]
    fn extract_orders_inputs_first() {
        let mut g = Graph::default();
        let a = data(&mut g, 2);
        let r = g.insert(Op::Reshape, &[a], Shape::new(&[1, 2]), DType::F32);
        let s = g.insert(Op::Binary(BinaryOp::Add), &[r, r], Shape::new(&[1, 2]), DType::F32);
        let sub = g.extract(&[s, a]);
        assert_eq!(sub.nodes.len(), 3);
        assert_eq!(sub.outputs, vec![2, 0]);
        assert_eq!(sub.nodes[2].inputs.as_slice(), &[1, 1]);
        assert_eq!(
            g.extract(&[s, a]),
            sub,
            "a second extraction sees no marks of the first"
        );
        let only_r = g.extract(&[r]);
        assert_eq!(only_r.nodes.len(), 2);
        assert_eq!(only_r.outputs, vec![1]);
    }
}
