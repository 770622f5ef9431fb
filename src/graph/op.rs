//! The operations a graph node can hold.
//!
//! [`Op`] is what the tensor front end records and the graph passes, the
//! reference evaluator and fusion read; its elementwise and reduction ops
//! ([`UnaryOp`], [`BinaryOp`], [`ReduceOp`]) are the shared vocabulary of
//! [`crate::ops`], which the kernel IR uses too. Every node also carries its output
//! shape and dtype; ops whose meaning depends on them (reshape, expand, cast,
//! full) read them from the node rather than repeating them here.

use crate::dtype::Scalar;
use crate::ops::{BinaryOp, ReduceOp, ScanOp, UnaryOp};
use crate::storage::Storage;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Axis lists inside ops.
pub type Axes = SmallVec<[usize; crate::shape::MAX_RANK]>;

/// One node's operation.
#[derive(Debug, Clone)]
pub enum Op {
    /// Realized data: a leaf. The node's shape is the data's shape (row-major).
    Data(Arc<Storage>),
    /// A constant filling the node's shape.
    Full(Scalar),
    /// Elementwise op of one input.
    Unary(UnaryOp),
    /// Elementwise op of two inputs of the node's shape (broadcasts are
    /// explicit `Expand` nodes below it).
    Binary(BinaryOp),
    /// `where_(cond, a, b)`: three inputs of the node's shape.
    Where,
    /// Conversion of the input to the node's dtype.
    Cast,
    /// Reduction over `axes`, each kept with length 1.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The reduced axes, ascending.
        axes: Axes,
    },
    /// The input's elements in row-major order, in the node's shape.
    Reshape,
    /// Axis `i` of the node is axis `perm[i]` of the input.
    Permute(Axes),
    /// The input, of the node's rank, with size-1 axes repeated to the node's shape.
    Expand,
    /// Elements `start, start + step, ...` of `axis`, as many as the node's shape says.
    Slice {
        /// The sliced axis.
        axis: usize,
        /// The first index taken.
        start: usize,
        /// The distance between taken indices (at least 1).
        step: usize,
    },
    /// The inclusive scan of the input along `axis` by `op`: element `i`
    /// along the axis combines the input's elements `0..=i` in order. The node has the input's shape; its dtype
    /// is the input's for floats and what the tensor front end chose
    /// otherwise (i64 for sums and products), the input cast to it first.
    Scan {
        /// The combination.
        op: ScanOp,
        /// The axis scanned along.
        axis: usize,
    },
    /// Uniform values in `[0, 1)` of the node's float dtype, generated from
    /// each element's row-major position and the seed, the one input (an
    /// i64 of shape `[]`): [`crate::philox::uniform`] with the dtype's
    /// significand bits.
    Random,
    /// `gather(input, index)`: the node's element at `p` is the input's at
    /// `p` with coordinate `axis` replaced by the index's element at `p`.
    /// Two inputs, the data and an integer index of the node's shape (at
    /// most the data's extents on the other axes); the node has the data's
    /// dtype. An index outside `0..input[axis]` is an error of the
    /// realization.
    Gather {
        /// The axis indexed.
        axis: usize,
        /// Whether the user called `index_select` (for error messages).
        select: bool,
    },
    /// `scatter_add(zeros, axis, index, src)`: zeros of the node's shape
    /// and dtype, plus each element of `src` (the second input) added at
    /// its own position with coordinate `axis` replaced by the matching
    /// element of `index` (the first input, i64 or i32, of `src`'s shape,
    /// at most the node's extents off `axis`). The elements added to one
    /// output element are summed in the order of their position along
    /// `axis`, from zero, in the node's dtype (so the sum does not depend
    /// on scheduling). An index outside `0..node[axis]` is an error of the
    /// realization.
    ScatterAdd {
        /// The axis scattered along.
        axis: usize,
        /// `Some(len)` where the front end cut the user's sources into
        /// chunks: axis `axis - 1` is the chunk axis it inserted (of both
        /// inputs and the node), and the user's sources had `len` elements
        /// along the axis. Errors name the user's shapes ([`scatter_report`]).
        chunked: Option<usize>,
    },
    /// The inputs (one or more, of the node's rank and dtype, equal to it
    /// on every other axis) one after another along `axis`.
    Cat {
        /// The axis joined along.
        axis: usize,
    },
}

impl Op {
    /// A short name for printing (`add`, `reduce.sum`, `data`, ...).
    pub fn name(&self) -> String {
        match self {
            Op::Data(_) => "data".into(),
            Op::Full(s) => format!("full({s})"),
            Op::Unary(u) => format!("{u:?}").to_lowercase(),
            Op::Binary(b) => format!("{b:?}").to_lowercase(),
            Op::Where => "where".into(),
            Op::Cast => "cast".into(),
            Op::Reduce { op, axes } => format!("reduce.{}{:?}", format!("{op:?}").to_lowercase(), axes.as_slice()),
            Op::Reshape => "reshape".into(),
            Op::Permute(p) => format!("permute{:?}", p.as_slice()),
            Op::Expand => "expand".into(),
            Op::Slice { axis, start, step } => format!("slice(axis {axis}, start {start}, step {step})"),
            Op::Cat { axis } => format!("cat(axis {axis})"),
            Op::Gather { axis, .. } => format!("gather(axis {axis})"),
            Op::ScatterAdd { axis, chunked: None } => format!("scatter_add(axis {axis})"),
            Op::ScatterAdd {
                axis,
                chunked: Some(len),
            } => format!("scatter_add(axis {axis}, chunks of {len} sources)"),
            Op::Scan { op, axis } => format!("scan.{}(axis {axis})", format!("{op:?}").to_lowercase()),
            Op::Random => "random".into(),
        }
    }

    /// Whether the op only re-addresses its input's elements.
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape | Op::Permute(_) | Op::Expand | Op::Slice { .. })
    }

    /// Whether the op is computed element by element.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast)
    }
}

// Ops compare structurally, data by identity: two `Data` ops are equal only
// when they hold the same allocation. This is what CSE and the plan cache need.
impl PartialEq for Op {
    fn eq(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::Data(a), Op::Data(b)) => Arc::ptr_eq(a, b),
            (Op::Full(a), Op::Full(b)) => scalar_bits(*a) == scalar_bits(*b),
            (Op::Unary(a), Op::Unary(b)) => a == b,
            (Op::Binary(a), Op::Binary(b)) => a == b,
            (Op::Where, Op::Where)
            | (Op::Cast, Op::Cast)
            | (Op::Reshape, Op::Reshape)
            | (Op::Expand, Op::Expand)
            | (Op::Random, Op::Random) => true,
            (Op::Reduce { op: a, axes: x }, Op::Reduce { op: b, axes: y }) => a == b && x == y,
            (Op::Permute(a), Op::Permute(b)) => a == b,
            (
                Op::Slice {
                    axis: a,
                    start: s,
                    step: t,
                },
                Op::Slice {
                    axis: b,
                    start: u,
                    step: v,
                },
            ) => a == b && s == u && t == v,
            (Op::Cat { axis: a }, Op::Cat { axis: b }) => a == b,
            (Op::ScatterAdd { axis: a, chunked: c }, Op::ScatterAdd { axis: b, chunked: d }) => a == b && c == d,
            (Op::Gather { axis: a, select: s }, Op::Gather { axis: b, select: t }) => a == b && s == t,
            (Op::Scan { op: a, axis: x }, Op::Scan { op: b, axis: y }) => a == b && x == y,
            _ => false,
        }
    }
}

impl Eq for Op {}

impl Hash for Op {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Op::Data(d) => (Arc::as_ptr(d) as *const u8 as usize).hash(state),
            Op::Full(s) => scalar_bits(*s).hash(state),
            Op::Unary(u) => u.hash(state),
            Op::Binary(b) => b.hash(state),
            Op::Reduce { op, axes } => (op, axes).hash(state),
            Op::Permute(p) => p.hash(state),
            Op::Slice { axis, start, step } => (axis, start, step).hash(state),
            Op::Cat { axis } => axis.hash(state),
            Op::ScatterAdd { axis, chunked } => (axis, chunked).hash(state),
            Op::Gather { axis, select } => (axis, select).hash(state),
            Op::Scan { op, axis } => (op, axis).hash(state),
            Op::Where | Op::Cast | Op::Reshape | Op::Expand | Op::Random => {}
        }
    }
}

/// The axis, input shape and index shape that a bad index of a scatter
/// along `axis` into `out` by an index of `index`'s shape is reported
/// with: its own, or for a chunked scatter (see [`Op::ScatterAdd`]) the
/// user's, without the chunk axis and with the sources' own extent.
pub fn scatter_report(axis: usize, chunked: Option<usize>, out: &[usize], index: &[usize]) -> (usize, Vec<usize>, Vec<usize>) {
    match chunked {
        Some(len) if axis > 0 && axis < out.len() && out.len() == index.len() => {
            let mut input = out.to_vec();
            input.remove(axis - 1);
            let mut sources = index.to_vec();
            sources.remove(axis - 1);
            sources[axis - 1] = len;
            (axis - 1, input, sources)
        }
        _ => (axis, out.to_vec(), index.to_vec()),
    }
}

/// A hashable image of a scalar: floats by their bits, so NaN equals NaN and
/// 0.0 differs from -0.0.
pub(crate) fn scalar_bits(s: Scalar) -> (u8, i128, u8) {
    match s {
        Scalar::Bool(b) => (0, b as i128, 0),
        Scalar::Int(i, d) => (1, i, d as u8),
        Scalar::Float(x, d) => (2, x.to_bits() as i128, d as u8),
    }
}
