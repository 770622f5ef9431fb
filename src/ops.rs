//! The vocabulary several layers share: the elementwise and reduction ops
//! of a graph node and of a tile instruction, the atomic updates, and the
//! constants that qualify masked and atomic accesses (padding, memory order,
//! thread scope).
//!
//! This module is at the bottom of the crate: it uses nothing of it, and
//! the graph, the tile API, the kernel IR and the back ends all name these
//! types from here. The modules that had them before re-export them
//! (`graph::BinaryOp`, `tile::Padding`, `kernels::ir::AtomicOp`, ...).

use std::fmt;

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
    /// `sum(exp(x - shift))` of two inputs: `x`, and `shift` of the
    /// node's (kept) shape, broadcast along the reduced axes. Fusion
    /// rewrites `(x - shift).exp().sum(axes)` into it where `shift` is a
    /// reduced value, so the sum can be taken in one pass with the shift
    /// known only at the end (see the fusion docs); floats only.
    ShiftedExpSum,
    /// `sum((x - shift)^2)` of two inputs, as [`ReduceOp::ShiftedExpSum`]:
    /// the sum of squared deviations of a variance; floats only.
    ShiftedSquareSum,
}

impl ReduceOp {
    /// Whether the reduction takes a second input, the shift.
    pub fn is_shifted(self) -> bool {
        matches!(self, ReduceOp::ShiftedExpSum | ReduceOp::ShiftedSquareSum)
    }
}

/// How a scan combines each element with the ones before it along its axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanOp {
    /// Running sums (`cumsum`).
    Sum,
    /// Running products (`cumprod`).
    Prod,
    /// Running maxima, NaN-propagating (`cummax`'s values).
    Max,
    /// Running minima, NaN-propagating (`cummin`'s values).
    Min,
    /// `log(sum(exp))` of the elements so far (`logcumsumexp`), floats only,
    /// combined pairwise as `max + log(1 + exp(-|a - b|))`, so no term
    /// overflows or underflows the others.
    LogSumExp,
}

impl ScanOp {
    /// The reduction of the same combination, if there is one.
    pub fn reduce(self) -> Option<ReduceOp> {
        match self {
            ScanOp::Sum => Some(ReduceOp::Sum),
            ScanOp::Prod => Some(ReduceOp::Prod),
            ScanOp::Max => Some(ReduceOp::Max),
            ScanOp::Min => Some(ReduceOp::Min),
            ScanOp::LogSumExp => None,
        }
    }
}

/// The value a masked load yields for elements outside the tensor span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// `0` (the default).
    #[default]
    Zero,
    /// `-0.0`; only for floating-point elements.
    NegZero,
    /// A quiet NaN; only for floating-point elements.
    Nan,
    /// `+inf`; only for floating-point elements.
    PosInf,
    /// `-inf`; only for floating-point elements.
    NegInf,
}

impl Padding {
    /// The padding value as f64.
    pub fn value(self) -> f64 {
        match self {
            Padding::Zero => 0.0,
            Padding::NegZero => -0.0,
            Padding::Nan => f64::NAN,
            Padding::PosInf => f64::INFINITY,
            Padding::NegInf => f64::NEG_INFINITY,
        }
    }

    /// Whether the padding exists only for floating-point elements.
    pub fn needs_float(self) -> bool {
        self != Padding::Zero
    }
}

impl fmt::Display for Padding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Padding::Zero => "zero",
            Padding::NegZero => "neg_zero",
            Padding::Nan => "nan",
            Padding::PosInf => "pos_inf",
            Padding::NegInf => "neg_inf",
        })
    }
}

/// The memory order of an atomic access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryOrder {
    /// No ordering beyond atomicity of each element.
    Relaxed,
    /// Loads: later accesses are not moved before it.
    Acquire,
    /// Stores: earlier accesses are not moved after it.
    Release,
    /// Both acquire and release (read-modify-write only).
    AcqRel,
    /// Plain accesses with no atomicity; the view's ordinary load and store.
    Weak,
}

impl MemoryOrder {
    /// The lower-case name (`relaxed`, `acquire`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
            MemoryOrder::Weak => "weak",
        }
    }
}

/// The set of threads an atomic access is atomic with respect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadScope {
    /// The threads of one block (one CTA on a GPU).
    Block,
    /// Every thread of the device.
    Device,
    /// Every thread of the system, host included.
    System,
}

impl ThreadScope {
    /// The lower-case name (`block`, `device`, `system`).
    pub fn name(self) -> &'static str {
        match self {
            ThreadScope::Block => "block",
            ThreadScope::Device => "device",
            ThreadScope::System => "system",
        }
    }
}

/// A read-modify-write atomic update of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// Bitwise AND.
    And,
    /// Bitwise OR.
    Or,
    /// Bitwise XOR.
    Xor,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Addition.
    Add,
    /// Subtraction (memory minus operand).
    Sub,
}

impl AtomicOp {
    /// The name of the view's method for this update, masked or not
    /// (`PartitionView::atomic_add_masked`).
    pub fn method_name(self, masked: bool) -> &'static str {
        use AtomicOp::*;
        match (self, masked) {
            (And, false) => "PartitionView::atomic_and",
            (And, true) => "PartitionView::atomic_and_masked",
            (Or, false) => "PartitionView::atomic_or",
            (Or, true) => "PartitionView::atomic_or_masked",
            (Xor, false) => "PartitionView::atomic_xor",
            (Xor, true) => "PartitionView::atomic_xor_masked",
            (Max, false) => "PartitionView::atomic_max",
            (Max, true) => "PartitionView::atomic_max_masked",
            (Min, false) => "PartitionView::atomic_min",
            (Min, true) => "PartitionView::atomic_min_masked",
            (Add, false) => "PartitionView::atomic_add",
            (Add, true) => "PartitionView::atomic_add_masked",
            (Sub, false) => "PartitionView::atomic_sub",
            (Sub, true) => "PartitionView::atomic_sub_masked",
        }
    }

    /// Whether elements of kind `support` allow this update.
    pub(crate) fn supported(self, support: AtomicSupport) -> bool {
        match support {
            AtomicSupport::Integer => true,
            AtomicSupport::Float => matches!(self, AtomicOp::Add | AtomicOp::Sub),
            AtomicSupport::None => false,
        }
    }
}

/// Which read-modify-write atomics an element type supports.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicSupport {
    /// None.
    None,
    /// `and`, `or`, `xor`, `max`, `min`, `add` and `sub` (32- and 64-bit integers).
    Integer,
    /// `add` and `sub` only (floating point).
    Float,
}

/// How transcendental functions are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MathMode {
    /// Correct to a few ulp of f32 (the default); a kernel whose results
    /// are all f16 or bf16 is held instead to well inside their rounding
    /// (within about half an ulp of the output dtype plus 2^-16 of the
    /// value; bf16's `tanh` 2^-11), with shorter sequences.
    #[default]
    Precise,
    /// Hardware approximations (`ex2.approx`, `tanh.approx`, ...).
    Fast,
}
