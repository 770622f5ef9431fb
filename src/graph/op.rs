//! The operations a graph node can hold.
//!
//! This is the vocabulary shared by the tensor front end, the graph passes,
//! the reference evaluator and fusion. Every node also carries its output
//! shape and dtype; ops whose meaning depends on them (reshape, expand, cast,
//! full) read them from the node rather than repeating them here.

use crate::dtype::Scalar;
use crate::storage::Storage;
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Elementwise ops of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `e^x`.
    Exp,
    /// `2^x`.
    Exp2,
    /// Natural logarithm.
    Log,
    /// Base-2 logarithm.
    Log2,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// `1 / x`.
    Recip,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `max(x, 0)`.
    Relu,
    /// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluTanh,
    /// GELU, exact: `0.5 x (1 + erf(x / sqrt 2))`.
    GeluErf,
    /// `x * sigmoid(x)`.
    Silu,
    /// Round toward negative infinity.
    Floor,
    /// Round toward positive infinity.
    Ceil,
    /// Round half to even.
    Round,
    /// -1, 0 or 1 (NaN stays NaN).
    Sign,
    /// Bitwise not on integers, logical not on bools.
    Not,
}

/// Elementwise ops of two operands (already broadcast to the node's shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (integer division truncates toward zero; division by zero gives 0).
    Div,
    /// `a ^ b` for floats.
    Pow,
    /// The larger, NaN if either is NaN.
    Maximum,
    /// The smaller, NaN if either is NaN.
    Minimum,
    /// `a == b`, to bool.
    Eq,
    /// `a != b`, to bool.
    Ne,
    /// `a < b`, to bool.
    Lt,
    /// `a <= b`, to bool.
    Le,
    /// `a > b`, to bool.
    Gt,
    /// `a >= b`, to bool.
    Ge,
    /// Bitwise and (logical and on bools).
    BitAnd,
    /// Bitwise or (logical or on bools).
    BitOr,
    /// Bitwise xor (logical xor on bools).
    BitXor,
}

impl UnaryOp {
    /// The lower-case name used in messages (`gelu_tanh`).
    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "neg",
            Abs => "abs",
            Exp => "exp",
            Exp2 => "exp2",
            Log => "log",
            Log2 => "log2",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Recip => "recip",
            Sin => "sin",
            Cos => "cos",
            Tanh => "tanh",
            Sigmoid => "sigmoid",
            Relu => "relu",
            GeluTanh => "gelu_tanh",
            GeluErf => "gelu_erf",
            Silu => "silu",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Sign => "sign",
            Not => "not",
        }
    }
}

impl BinaryOp {
    /// The lower-case name used in messages (`bitand`).
    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Pow => "pow",
            Maximum => "maximum",
            Minimum => "minimum",
            Eq => "eq",
            Ne => "ne",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            BitAnd => "bitand",
            BitOr => "bitor",
            BitXor => "bitxor",
        }
    }

    /// Whether the op yields bool whatever its operands.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        )
    }
}

/// Reductions over a set of axes. The node keeps each reduced axis with
/// length 1; dropping it is a separate reshape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (floats accumulate in at least f32; integers in i64 then wrap).
    Sum,
    /// Maximum, NaN-propagating.
    Max,
    /// Minimum, NaN-propagating.
    Min,
    /// Product.
    Prod,
    /// Index (i64) of the first maximum along a single axis; NaN counts as the maximum.
    ArgMax,
    /// Index (i64) of the first minimum along a single axis; NaN counts as the minimum.
    ArgMin,
}

/// Axis lists inside ops.
pub type Axes = SmallVec<[usize; 6]>;

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
            (Op::Where, Op::Where) | (Op::Cast, Op::Cast) | (Op::Reshape, Op::Reshape) | (Op::Expand, Op::Expand) => {
                true
            }
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
            Op::Where | Op::Cast | Op::Reshape | Op::Expand => {}
        }
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
