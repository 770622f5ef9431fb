//! What each node is to fusion, and where each operand comes from.
//!
//! Views are not nodes of a kernel: an operand reached through a chain of
//! views is resolved to a [`Source`], either a constant or a strided
//! [`Layout`] over the node at the bottom of the chain. Two kinds of node are
//! promoted to computed nodes that copy their elements into a buffer of their
//! own: the input of a reshape that strides cannot express, and a requested
//! output that is a view of data or of a constant.
//!
//! A concatenation is addressing too: an operand that is a `Cat` node
//! resolves to [`Source::Pieces`], each piece a constant or a chain over
//! the node below it, seen through a window of the operand's index space
//! (nested concatenations are flattened into one set of windows). A `Cat`
//! is computed (copied into a buffer) where something other than an
//! elementwise op, a reduction or another `Cat` reads it, or it is an
//! output.
//!
//! A gather is computed like an elementwise op over its index's shape; its
//! data is read from memory (a chain over a buffer that an earlier kernel
//! wrote, or a leaf) through an indirect load whose position along the
//! gathered axis is the index's value.

use super::layout::{squeeze, Layout};
use crate::graph::{Op, Subgraph};
use crate::ops::ReduceOp;

/// How a chain of views relates a node to the computed node below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainKind {
    /// Same elements in the same row-major order (views that only add or
    /// drop size-1 axes): the tile of the base can be used as it is.
    Trivial,
    /// A keepdim result broadcast back by the `Expand` node held, possibly
    /// wrapped in trivial views: an in-tile `Broadcast` in a row kernel.
    Broadcast(usize),
    /// Anything else: the base must be materialised and loaded through the layout.
    Other,
}

/// One piece of a concatenation: where it lies in the operand's index space
/// and where its elements come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Piece {
    /// The piece's first index along each axis of the operand.
    pub start: Vec<usize>,
    /// The piece's extents.
    pub dims: Vec<usize>,
    /// Its elements: a constant, or a chain (of kind `Other`) whose layout
    /// has the piece's extents.
    pub source: Source,
}

/// Where an operand's elements come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Source {
    /// A constant: the `Full` node (possibly viewed) at the bottom of the
    /// chain. Its value is not part of the plan: kernels read it as a
    /// scalar argument of the launch, so one plan serves every value.
    Const(usize),
    /// A concatenation: the pieces, whose windows tile the operand's index
    /// space without overlapping (empty pieces are left out).
    Pieces(Vec<Piece>),
    /// The elements of `base` (a `Data` leaf or a computed node) through `layout`
    /// of its row-major buffer.
    Chain {
        /// The node at the bottom of the chain.
        base: usize,
        /// The addressing of the operand in the base's buffer.
        layout: Layout,
        /// How the chain relates operand and base.
        kind: ChainKind,
    },
}

impl Source {
    /// The nodes whose buffers the operand reads: a chain's base, the bases
    /// of a concatenation's pieces.
    pub fn bases(&self) -> Vec<usize> {
        match self {
            Source::Const(_) => vec![],
            Source::Chain { base, .. } => vec![*base],
            Source::Pieces(pieces) => pieces.iter().flat_map(|p| p.source.bases()).collect(),
        }
    }

    /// The `Full` nodes the operand reads: a constant's, those of a
    /// concatenation's constant pieces.
    pub fn consts(&self) -> Vec<usize> {
        match self {
            Source::Const(full) => vec![*full],
            Source::Chain { .. } => vec![],
            Source::Pieces(pieces) => pieces.iter().flat_map(|p| p.source.consts()).collect(),
        }
    }
}

/// Per-node facts fusion needs.
#[derive(Debug, Clone)]
pub(crate) struct Analysis {
    /// Whether each node is computed by some kernel (elementwise ops,
    /// reductions, and the copies described in the module docs).
    pub computed: Vec<bool>,
}

impl Analysis {
    /// Classifies the nodes of `g` (which must be in topological order).
    pub fn new(g: &Subgraph) -> Analysis {
        let mut a = Analysis {
            computed: g
                .nodes
                .iter()
                .map(|n| {
                    n.op.is_elementwise()
                        || matches!(
                            n.op,
                            Op::Reduce { .. } | Op::Gather { .. } | Op::Scan { .. } | Op::Random | Op::ScatterAdd { .. }
                        )
                })
                .collect(),
        };
        // A concatenation read as anything but an operand of elementwise
        // ops, reductions and concatenations is copied into a buffer.
        for n in &g.nodes {
            let addressing = n.op.is_elementwise() || matches!(n.op, Op::Reduce { .. } | Op::Scan { .. } | Op::Cat { .. });
            if !addressing {
                for &p in &n.inputs {
                    if matches!(g.nodes[p].op, Op::Cat { .. }) {
                        a.computed[p] = true;
                    }
                }
            }
        }
        a.copy_unstridable_reshape_inputs(g);
        // A gather reads its data through memory: data that is a constant
        // gets a buffer (a concatenation has one already, from above).
        for n in &g.nodes {
            if matches!(n.op, Op::Gather { .. }) && matches!(a.source(g, n.inputs[0]), Source::Const(_)) {
                a.computed[n.inputs[0]] = true;
            }
            // So do a scatter's index and source.
            if matches!(n.op, Op::ScatterAdd { .. }) {
                for &p in &n.inputs {
                    if matches!(a.source(g, p), Source::Const(_)) {
                        a.computed[p] = true;
                    }
                }
            }
        }
        // Outputs that are views or constants get a buffer of their own, except
        // an order-preserving view of a computed node, which shares its buffer.
        for &o in &g.outputs {
            let n = &g.nodes[o];
            match &n.op {
                Op::Full(_) | Op::Cat { .. } => a.computed[o] = true,
                op if op.is_view() && !a.computed[o] => {
                    let shares = matches!(a.source(g, o), Source::Chain { base, kind: ChainKind::Trivial, .. } if a.computed[base]);
                    if !shares {
                        a.computed[o] = true;
                    }
                }
                _ => {}
            }
        }
        // Copies made for outputs move where chains start; check again.
        a.copy_unstridable_reshape_inputs(g);
        a
    }

    /// Marks the input of every reshape that strides cannot express as
    /// computed (a copy into a row-major buffer), in topological order.
    fn copy_unstridable_reshape_inputs(&mut self, g: &Subgraph) {
        for n in &g.nodes {
            if matches!(n.op, Op::Reshape) {
                if let Source::Chain { layout, .. } = self.source(g, n.inputs[0]) {
                    if layout.apply(&n.op, &n.shape).is_none() {
                        self.computed[n.inputs[0]] = true;
                    }
                }
            }
        }
    }

    /// Whether `n` is a computed node whose value is its own operand seen
    /// through itself (a copy of a view, or a filled constant).
    pub fn is_copy(&self, g: &Subgraph, n: usize) -> bool {
        self.computed[n] && (g.nodes[n].op.is_view() || matches!(g.nodes[n].op, Op::Full(_) | Op::Cat { .. }))
    }

    /// Where the value of node `p` comes from when used as an operand.
    pub fn source(&self, g: &Subgraph, p: usize) -> Source {
        if self.computed[p] || matches!(g.nodes[p].op, Op::Data(_)) {
            return Source::Chain {
                base: p,
                layout: Layout::contiguous(&g.nodes[p].shape),
                kind: ChainKind::Trivial,
            };
        }
        self.own_source(g, p)
    }

    /// The operand of a copy node (or the source of a non-computed view or
    /// constant): node `p` resolved as a view of what lies below it.
    pub fn own_source(&self, g: &Subgraph, p: usize) -> Source {
        let n = &g.nodes[p];
        match &n.op {
            Op::Full(_) => Source::Const(p),
            &Op::Cat { axis } => {
                let mut pieces = vec![];
                let mut at = 0;
                for &q in &n.inputs {
                    let dims = g.nodes[q].shape.dims().to_vec();
                    let mut start = vec![0; dims.len()];
                    start[axis] = at;
                    at += dims[axis];
                    if dims.contains(&0) {
                        continue;
                    }
                    match self.source(g, q) {
                        // A nested concatenation: its pieces, moved.
                        Source::Pieces(inner) => pieces.extend(inner.into_iter().map(|mut piece| {
                            piece.start[axis] += start[axis];
                            piece
                        })),
                        Source::Chain { base, layout, .. } => pieces.push(Piece {
                            start,
                            dims,
                            source: Source::Chain {
                                base,
                                layout,
                                kind: ChainKind::Other,
                            },
                        }),
                        source => pieces.push(Piece { start, dims, source }),
                    }
                }
                Source::Pieces(pieces)
            }
            op if op.is_view() => match self.source(g, n.inputs[0]) {
                Source::Const(full) => Source::Const(full),
                Source::Pieces(_) => unreachable!("concatenations under views are computed"),
                Source::Chain { base, layout, kind } => {
                    let input = &g.nodes[n.inputs[0]].shape;
                    let layout = layout
                        .apply(op, &n.shape)
                        .expect("inputs of reshapes that strides cannot express are copied");
                    let trivial = is_trivial_view(op, input.dims(), n.shape.dims());
                    let kind = match (kind, op) {
                        (k, _) if trivial => k,
                        (ChainKind::Trivial, Op::Expand) => ChainKind::Broadcast(p),
                        _ => ChainKind::Other,
                    };
                    Source::Chain { base, layout, kind }
                }
            },
            _ => Source::Chain {
                base: p,
                layout: Layout::contiguous(&n.shape),
                kind: ChainKind::Trivial,
            },
        }
    }

    /// The extents of operand `j` of computed node `n` (a copy's operand
    /// is the node itself, seen through its own source).
    pub fn operand_dims<'g>(&self, g: &'g Subgraph, n: usize, j: usize) -> &'g [usize] {
        if self.is_copy(g, n) {
            g.nodes[n].shape.dims()
        } else {
            g.nodes[g.nodes[n].inputs[j]].shape.dims()
        }
    }

    /// The operands of computed node `n`, in operand order.
    pub fn sources(&self, g: &Subgraph, n: usize) -> Vec<Source> {
        if self.is_copy(g, n) {
            vec![self.own_source(g, n)]
        } else {
            g.nodes[n].inputs.iter().map(|&p| self.source(g, p)).collect()
        }
    }

    /// Whether `n` is cheap enough to recompute in every kernel that uses it:
    /// an elementwise op whose operands are all constants or data.
    pub fn is_cheap(&self, g: &Subgraph, n: usize) -> bool {
        (g.nodes[n].op.is_elementwise() || matches!(g.nodes[n].op, Op::Random))
            && self.sources(g, n).iter().all(|s| s.bases().iter().all(|&b| !self.computed[b]))
    }
}

/// Whether a view keeps the elements and their row-major order, changing
/// only size-1 axes.
fn is_trivial_view(op: &Op, input: &[usize], out: &[usize]) -> bool {
    match op {
        Op::Reshape => squeeze(input) == squeeze(out),
        Op::Expand => input == out,
        Op::Slice { .. } => input == out,
        Op::Permute(perm) => {
            let kept: Vec<usize> = perm.iter().copied().filter(|&p| input[p] != 1).collect();
            kept.windows(2).all(|w| w[0] < w[1])
        }
        _ => false,
    }
}

/// Whether the reduction is an index reduction (argmax, argmin).
pub(crate) fn is_arg_reduce(op: &Op) -> bool {
    matches!(
        op,
        Op::Reduce {
            op: ReduceOp::ArgMax | ReduceOp::ArgMin,
            ..
        }
    )
}
