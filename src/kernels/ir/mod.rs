//! The tile kernel IR: programs over partition views.
//!
//! A [`Program`] is what fusion produces and what both back ends consume: the
//! CPU executor (`kernels::cpu`) interprets it with typed loops over tiles,
//! and `kernels::ptx_gen` lowers it to PTX text.
//!
//! # Execution model
//!
//! A program runs its [`Program::body`] once for every point of its
//! [`Program::grid`] (an N-d index space; the points are independent and may
//! run in any order or in parallel). Each run sees the grid point's
//! coordinates, reads and writes global memory only through partition
//! [`View`]s of its [`Param`]s, and holds intermediate results in tile
//! values: SSA values with a static [`ValueType`] (dtype and tile shape).
//! Accumulators ([`AccDecl`]) are the only mutable state; each grid point
//! starts with its own copies set to their initial values.
//!
//! A [`View`] is the reference documents' partition view: a strided span of a
//! parameter's memory (extents, strides, offset, all in elements) cut into
//! tiles of a static shape. A load or store names a partition by one
//! [`IndexExpr`] per axis, an affine function of one grid coordinate and one
//! loop variable. Masked accesses use the view's padding for elements outside
//! the extents and skip them when storing.
//!
//! Arithmetic on `f16`/`bf16` values is not allowed: lowering casts them to
//! `f32` after loading and back before storing, so they round once.
//!
//! **Invariant:** `kernels::ir` knows nothing of petgraph, cudarc or threads.

use crate::dtype::{DType, Scalar};
/// Read-modify-write operations of an atomic partition update (always
/// relaxed order): the host tile API's own set.
pub use crate::ops::{AtomicOp, MathMode};
use crate::ops::{BinaryOp, Padding, ThreadScope, UnaryOp};
use smallvec::SmallVec;

mod builder;
mod print;
#[cfg(test)]
mod tests;
mod verify;

pub use builder::Builder;
pub use verify::verify;

/// Extents, strides or indices of up to six axes without allocating.
pub type Dims<T> = SmallVec<[T; crate::shape::MAX_RANK]>;

macro_rules! entity {
    ($($(#[$m:meta])* $name:ident, $prefix:literal;)*) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            /// The position in the program's table.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    )*};
}

entity! {
    /// A kernel parameter (a global buffer), printed `p0`.
    ParamId, "p";
    /// A partition view, printed `v0`.
    ViewId, "v";
    /// An SSA tile value, printed `%0`.
    ValueId, "%";
    /// A loop variable, printed `i0`.
    LoopId, "i";
    /// An accumulator, printed `acc0`.
    AccId, "acc";
    /// A scalar argument of the launch, printed `s0`.
    ScalarId, "s";
}

/// How a program uses a parameter's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only loaded.
    Read,
    /// Only stored to (or updated atomically).
    Write,
    /// Both.
    ReadWrite,
}

/// A global buffer the program reads or writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Param {
    /// A name for printing and debugging (`x`, `out`).
    pub name: String,
    /// The element type of the buffer.
    pub dtype: DType,
    /// The number of elements the buffer holds.
    pub len: u64,
    /// How the program uses it.
    pub access: Access,
    /// If set, the runtime fills the buffer with this value before the
    /// program runs (the identity of a cross-tile atomic combine).
    pub init: Option<ScalarKey>,
}

/// A [`Scalar`] that can be hashed and compared (floats by their bits).
#[derive(Debug, Clone, Copy)]
pub struct ScalarKey(pub Scalar);

impl ScalarKey {
    fn bits(&self) -> (u8, i128) {
        match self.0 {
            Scalar::Bool(b) => (0, b as i128),
            Scalar::Int(i, d) => (1 + d as u8, i),
            Scalar::Float(x, d) => (32 + d as u8, x.to_bits() as i128),
        }
    }
}

impl PartialEq for ScalarKey {
    fn eq(&self, other: &ScalarKey) -> bool {
        self.bits() == other.bits()
    }
}

impl Eq for ScalarKey {}

impl std::hash::Hash for ScalarKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bits().hash(state)
    }
}

/// A partition view of a parameter: a strided span cut into tiles.
///
/// Element `e` of the span (an index with `lower[k] <= e[k] < upper[k]`)
/// lives at `offset + sum((e[k] - lower[k]) * strides[k])` in the
/// parameter's buffer. Partition `I` covers the span indices
/// `I[k] * tile[k] + j[k]` for `j[k] < tile[k]`; the partitions are those
/// of `extents`, and indices outside the span, below `lower` or at and
/// above `upper`, are the masked ones.
///
/// `lower` and `upper` (empty: zeros and `extents`) make a *window*: one
/// piece of a concatenation, or the inside of a padded tensor, seen in the
/// index space of the whole. Only loads and in-bounds masks go through
/// windows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct View {
    /// The parameter whose memory is viewed.
    pub param: ParamId,
    /// The extents of the span.
    pub extents: Dims<u64>,
    /// The strides of the span in elements (0 for a broadcast axis).
    pub strides: Dims<i64>,
    /// The element offset of index `lower` (of index zero without a window).
    pub offset: u64,
    /// The first index of the span along each axis (empty: all zeros).
    pub lower: Dims<u64>,
    /// The index past the span's last along each axis, at most the extent
    /// (empty: the extents).
    pub upper: Dims<u64>,
    /// The tile shape; same rank as `extents`.
    pub tile: Dims<u32>,
    /// The value masked loads give outside the extents.
    pub padding: Padding,
}

impl View {
    /// The first index of the span along axis `k`.
    pub fn lower(&self, k: usize) -> u64 {
        self.lower.get(k).copied().unwrap_or(0)
    }

    /// The index past the span's last along axis `k`.
    pub fn upper(&self, k: usize) -> u64 {
        self.upper.get(k).copied().unwrap_or(self.extents[k])
    }

    /// Whether some axis starts above index zero or ends before its extent.
    pub fn is_window(&self) -> bool {
        self.lower.iter().any(|&l| l > 0) || self.upper.iter().zip(&self.extents).any(|(u, e)| u < e)
    }

    /// The element offset of index zero (below the buffer's start for a
    /// window that starts above zero on an axis of positive stride).
    pub fn origin(&self) -> i128 {
        let shift: i128 = (0..self.strides.len())
            .map(|k| self.lower(k) as i128 * self.strides[k] as i128)
            .sum();
        self.offset as i128 - shift
    }

    /// The number of partitions along each axis (`ceil(extent / tile)`).
    pub fn index_space(&self) -> Dims<u64> {
        self.extents
            .iter()
            .zip(&self.tile)
            .map(|(&e, &t)| e.div_ceil(t as u64))
            .collect()
    }
}

/// One axis of a partition index:
/// `constant + grid_coordinate[g] * g_coeff + loop_variable * l_coeff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IndexExpr {
    /// The constant term.
    pub constant: u64,
    /// A grid axis and its coefficient.
    pub grid: Option<(u8, u64)>,
    /// A loop variable and its coefficient.
    pub loop_var: Option<(LoopId, u64)>,
}

impl IndexExpr {
    /// The constant index `c`.
    pub fn constant(c: u64) -> IndexExpr {
        IndexExpr {
            constant: c,
            grid: None,
            loop_var: None,
        }
    }

    /// Grid coordinate `axis`.
    pub fn grid(axis: u8) -> IndexExpr {
        IndexExpr {
            constant: 0,
            grid: Some((axis, 1)),
            loop_var: None,
        }
    }

    /// Loop variable `var`.
    pub fn loop_var(var: LoopId) -> IndexExpr {
        IndexExpr {
            constant: 0,
            grid: None,
            loop_var: Some((var, 1)),
        }
    }

    /// This expression with every term multiplied by `k` (saturating, so
    /// an overflow shows up in the verifier as an index out of range).
    pub fn times(self, k: u64) -> IndexExpr {
        IndexExpr {
            constant: self.constant.saturating_mul(k),
            grid: self.grid.map(|(axis, c)| (axis, c.saturating_mul(k))),
            loop_var: self.loop_var.map(|(var, c)| (var, c.saturating_mul(k))),
        }
    }

    /// This expression plus the constant `c` (saturating).
    pub fn plus(self, c: u64) -> IndexExpr {
        IndexExpr {
            constant: self.constant.saturating_add(c),
            ..self
        }
    }

    /// This expression with its loop term set to `var * coeff`.
    pub fn with_loop(self, var: LoopId, coeff: u64) -> IndexExpr {
        IndexExpr {
            loop_var: Some((var, coeff)),
            ..self
        }
    }
}

/// A partition index: one expression per view axis.
pub type PartitionExprs = Dims<IndexExpr>;

/// The static type of a tile value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// The element type.
    pub dtype: DType,
    /// The tile shape (rank 0 to 6).
    pub shape: Dims<u32>,
}

impl ValueType {
    /// The type of a `dtype` tile of the given shape.
    pub fn new(dtype: DType, shape: &[u32]) -> ValueType {
        ValueType {
            dtype,
            shape: shape.iter().copied().collect(),
        }
    }

    /// The number of elements of a tile of this type.
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }
}

/// An accumulator: a mutable tile that persists across loop iterations of
/// one grid point.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccDecl {
    /// Its type.
    pub ty: ValueType,
    /// Its value at the start of each grid point.
    pub init: ScalarKey,
}

/// In-tile reductions along one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileReduce {
    /// Sum.
    Sum,
    /// Maximum, NaN-propagating.
    Max,
    /// Minimum, NaN-propagating.
    Min,
    /// Product.
    Prod,
    /// `log(exp(a) + exp(b))`, as `max + log(1 + exp(-|a - b|))` (an
    /// infinite or NaN maximum as it is): floats, and scans only.
    LogAddExp,
}

/// One instruction. `dst` values are defined exactly once; their types are
/// in [`Program::values`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Inst {
    /// Loads the partition `index` of `view` (its tile shape and the
    /// parameter's dtype are `dst`'s type). Unmasked loads require the
    /// partition to be in bounds.
    Load {
        /// The loaded tile.
        dst: ValueId,
        /// The view loaded from.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
        /// Whether out-of-bounds elements take the view's padding.
        masked: bool,
    },
    /// Stores `src` (of the view's tile shape and the parameter's dtype) to
    /// the partition `index` of `view`.
    Store {
        /// The view stored to.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
        /// The stored tile.
        src: ValueId,
        /// Whether out-of-bounds elements are skipped.
        masked: bool,
    },
    /// An indirect load: partition `index` of `view`, each element moved
    /// `at * stride` elements further in memory, where `at` is the matching
    /// element of an integer tile of `dst`'s shape. The view addresses the
    /// other axes (its stride along the gathered axis is usually 0); `at`
    /// must lie in `0 .. bound`. Elements outside the view's extents take
    /// the padding; an element inside them whose `at` is out of range takes
    /// the padding too and sets element 0 of `flag` (a `u32` parameter that
    /// starts at zero) to 1, so the runtime can report the bad index. No
    /// element is ever read outside `bound`.
    Gather {
        /// The loaded tile.
        dst: ValueId,
        /// The view giving each element's address before the move.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
        /// The integer positions along the gathered axis.
        at: ValueId,
        /// The memory stride of the gathered axis, in elements.
        stride: i64,
        /// The number of valid positions along the gathered axis (at least 1).
        bound: u64,
        /// The `u32` flag set when a position is out of range; `None` where
        /// every position is in range by construction (a broadcast operand
        /// of a flattened elementwise kernel), out-of-range ones then
        /// reading padding unreported.
        flag: Option<ParamId>,
    },
    /// An indirect read-modify-write, the mirror of [`Inst::Gather`]: each
    /// element of `src` is added to the element of partition `index` of
    /// `view` moved `at * stride` elements further, where `at` is the
    /// matching element of an integer tile of `src`'s shape and must lie
    /// in `0 .. bound`. The update is a plain load, add and store, not an
    /// atomic: the elements of one tile must reach distinct elements, and
    /// no two grid points may reach one element (the verifier checks both
    /// over the view with the moved axis added), so each element is only
    /// ever updated by one grid point, in program order, and its sum does
    /// not depend on scheduling. Elements outside the view's extents are
    /// skipped; an element inside them whose `at` is out of range is
    /// skipped too and sets element 0 of `flag` (a `u32` parameter that
    /// starts at zero) to 1. No element is ever touched outside `bound`.
    ScatterAdd {
        /// The view giving each element's address before the move.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
        /// The integer positions along the scattered axis.
        at: ValueId,
        /// The memory stride of the scattered axis, in elements.
        stride: i64,
        /// The number of valid positions along the scattered axis (at least 1).
        bound: u64,
        /// The added tile (of the parameter's dtype and the view's tile shape).
        src: ValueId,
        /// The `u32` flag set when a position is out of range.
        flag: ParamId,
    },
    /// A bool tile: which elements of partition `index` of `view` are in bounds.
    InBounds {
        /// The mask.
        dst: ValueId,
        /// The view.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
    },
    /// A tile filled with one value (of `dst`'s dtype).
    Const {
        /// The tile.
        dst: ValueId,
        /// The value.
        value: ScalarKey,
    },
    /// A tile filled with the value of scalar argument `scalar`, given at
    /// launch (`dst`'s dtype is the argument's, [`Program::scalars`]). Unlike
    /// [`Inst::Const`] the value is not part of the program, so one program
    /// (and one compiled module) serves every value.
    Scalar {
        /// The tile.
        dst: ValueId,
        /// The argument.
        scalar: ScalarId,
    },
    /// An `i64` tile holding each element's index along `axis` of the view
    /// space: `index[axis] * tile[axis] + j[axis]` where `tile` is `dst`'s shape.
    Iota {
        /// The indices.
        dst: ValueId,
        /// The axis counted along.
        axis: u8,
        /// The partition index along that axis.
        index: IndexExpr,
    },
    /// `dst = op(src)` elementwise.
    Unary {
        /// The result.
        dst: ValueId,
        /// The op.
        op: UnaryOp,
        /// The operand.
        src: ValueId,
    },
    /// `dst = op(lhs, rhs)` elementwise; operands have `dst`'s shape.
    Binary {
        /// The result.
        dst: ValueId,
        /// The op.
        op: BinaryOp,
        /// The first operand.
        lhs: ValueId,
        /// The second operand.
        rhs: ValueId,
    },
    /// `dst = cond ? on_true : on_false` elementwise.
    Select {
        /// The result.
        dst: ValueId,
        /// A bool tile.
        cond: ValueId,
        /// Taken where `cond` is true.
        on_true: ValueId,
        /// Taken where `cond` is false.
        on_false: ValueId,
    },
    /// Uniform values in `[0, 1)`: element `j` is
    /// [`crate::philox::uniform`]`(counter[j], key[j], bits)`, from i64
    /// tiles of `dst`'s shape (their bits as unsigned), in `dst`'s dtype
    /// (f32 with `bits` at most 24, f64 with at most 53).
    Uniform {
        /// The values.
        dst: ValueId,
        /// Each element's counter (its position in the random tensor).
        counter: ValueId,
        /// The key (the seed).
        key: ValueId,
        /// The bits of the grid `2^-bits`.
        bits: u8,
    },
    /// `src` converted to `dst`'s dtype: round to nearest even into floats;
    /// float to integer truncates toward zero into i64 (saturating, NaN to
    /// 0) and then wraps to the target width, as [`Scalar::cast`] does;
    /// wrapping between integers; to bool is `!= 0`.
    Cast {
        /// The result.
        dst: ValueId,
        /// The operand.
        src: ValueId,
    },
    /// `src` with its size-1 axes repeated to `dst`'s shape (same rank).
    Broadcast {
        /// The result.
        dst: ValueId,
        /// The operand.
        src: ValueId,
    },
    /// Reduction of `src` along `axis`, which `dst` keeps with length 1.
    Reduce {
        /// The result.
        dst: ValueId,
        /// The reduction.
        op: TileReduce,
        /// The operand.
        src: ValueId,
        /// The reduced axis.
        axis: u8,
    },
    /// The inclusive scan of `src` along `axis` by `op`: element `j` along
    /// the axis combines elements `0..=j` (`dst` has `src`'s type). The
    /// order of the combination is the back end's (sums of floats may
    /// round differently from a sequential sum).
    Scan {
        /// The result.
        dst: ValueId,
        /// The combination.
        op: TileReduce,
        /// The operand.
        src: ValueId,
        /// The scanned axis.
        axis: u8,
    },
    /// `acc = op(acc, src)` elementwise; `src` has the accumulator's type.
    AccUpdate {
        /// The accumulator.
        acc: AccId,
        /// `Add`, `Mul`, `Maximum` or `Minimum`.
        op: BinaryOp,
        /// The operand.
        src: ValueId,
    },
    /// `dst = acc` (a snapshot of the accumulator).
    AccRead {
        /// The snapshot.
        dst: ValueId,
        /// The accumulator.
        acc: AccId,
    },
    /// Runs `body` for `var = 0 .. count`. Values defined in `body` are not
    /// visible after the loop; state crosses iterations through accumulators.
    Loop {
        /// The loop variable.
        var: LoopId,
        /// The number of iterations.
        count: u64,
        /// The instructions of one iteration.
        body: Vec<Inst>,
    },
    /// A relaxed atomic update of each element of partition `index` of
    /// `view` with the matching element of `src`.
    Atomic {
        /// The update.
        op: AtomicOp,
        /// The view updated.
        view: ViewId,
        /// The partition.
        index: PartitionExprs,
        /// The operand tile.
        src: ValueId,
        /// Whether out-of-bounds elements are skipped.
        masked: bool,
        /// Block or device scope.
        scope: ThreadScope,
    },
    /// All threads working on one grid point wait here; placed by lowering
    /// where one thread's stores must be seen by another's loads.
    Barrier,
    /// Runs `body` once for every group of grid points that differ only in
    /// grid coordinate `axis`, after every point of the group has run the
    /// instructions before this one; the body's loads see the stores those
    /// points made. It must be the last instruction of the program's body.
    ///
    /// The body sees no value defined outside it, and its index expressions
    /// do not use grid axis `axis`, so its effect does not depend on which
    /// point of the group runs it. On a GPU the point of the group that
    /// finishes last runs it: every point makes its stores visible
    /// device-wide and takes a ticket from the group's element of
    /// `counter` (a `u32` parameter with one element per group, in row-major
    /// order of the other grid coordinates), and the point holding the
    /// last ticket runs the body. The counter must hold zero before a launch
    /// and holds zero again after it, so it is zeroed once and launches
    /// that use one counter must not overlap. The CPU executor runs the body
    /// once per group after all grid points.
    LastPoint {
        /// The grid axis whose points are counted.
        axis: u8,
        /// The `u32` counters, one per group.
        counter: ParamId,
        /// The instructions run once per group.
        body: Vec<Inst>,
    },
}

/// The operands of `$inst` (an `&Inst` or `&mut Inst`) as a `SmallVec` of
/// references of the same kind: one match for both.
macro_rules! operands_of {
    ($inst:expr) => {
        match $inst {
            Inst::Store { src, .. }
            | Inst::Atomic { src, .. }
            | Inst::Unary { src, .. }
            | Inst::Cast { src, .. }
            | Inst::Broadcast { src, .. }
            | Inst::Reduce { src, .. }
            | Inst::Scan { src, .. }
            | Inst::AccUpdate { src, .. } => smallvec::smallvec![src],
            Inst::Gather { at, .. } => smallvec::smallvec![at],
            Inst::ScatterAdd { at, src, .. } => smallvec::smallvec![at, src],
            Inst::Binary { lhs, rhs, .. } => smallvec::smallvec![lhs, rhs],
            Inst::Uniform { counter, key, .. } => smallvec::smallvec![counter, key],
            Inst::Select {
                cond,
                on_true,
                on_false,
                ..
            } => smallvec::smallvec![cond, on_true, on_false],
            Inst::Load { .. }
            | Inst::InBounds { .. }
            | Inst::Const { .. }
            | Inst::Scalar { .. }
            | Inst::Iota { .. }
            | Inst::AccRead { .. }
            | Inst::Loop { .. }
            | Inst::LastPoint { .. }
            | Inst::Barrier => smallvec::SmallVec::new(),
        }
    };
}

impl Inst {
    /// The values the instruction reads itself (a loop's or last point's
    /// body not included).
    pub fn operands(&self) -> smallvec::SmallVec<[ValueId; 3]> {
        let refs: smallvec::SmallVec<[&ValueId; 3]> = operands_of!(self);
        refs.into_iter().copied().collect()
    }

    /// [`operands`](Self::operands), for rewriting them in place.
    pub fn operands_mut(&mut self) -> smallvec::SmallVec<[&mut ValueId; 3]> {
        operands_of!(self)
    }

    /// The instructions nested in this one: a loop's or last point's body.
    pub fn nested(&self) -> Option<&[Inst]> {
        match self {
            Inst::Loop { body, .. } | Inst::LastPoint { body, .. } => Some(body),
            _ => None,
        }
    }
}

/// A tile kernel program. Build one with [`Builder`], check it with
/// [`verify()`]; its `Display` is a stable text form, one instruction a line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Program {
    /// A name for printing, caching and error messages.
    pub name: String,
    /// The global buffers, in launch-argument order.
    pub params: Vec<Param>,
    /// The dtypes of the scalar arguments, given at launch after the
    /// buffers ([`Inst::Scalar`] reads them).
    pub scalars: Vec<DType>,
    /// The partition views of the parameters.
    pub views: Vec<View>,
    /// The types of the SSA values, indexed by [`ValueId`].
    pub values: Vec<ValueType>,
    /// The accumulators, indexed by [`AccId`].
    pub accs: Vec<AccDecl>,
    /// The number of loop variables ([`LoopId`]s are `0 .. loops`).
    pub loops: u32,
    /// The extents of the grid; the body runs once per point.
    pub grid: Dims<u64>,
    /// The instructions run at each grid point.
    pub body: Vec<Inst>,
    /// How transcendentals are computed (part of the cache key).
    pub math: MathMode,
    /// How accurate [`MathMode::Precise`] f32 transcendentals must be: to a
    /// few f32 ulp, or, where every result the program writes is f16 or
    /// bf16, well inside that dtype's rounding (part of the cache key).
    pub accuracy: Accuracy,
}

/// The accuracy f32 transcendentals owe a program's results under
/// [`MathMode::Precise`]: the finest precision among the floats it writes.
///
/// A program that writes only f16 (or f16 and bf16) results needs its f32
/// intermediate values to a relative error well under f16's unit roundoff
/// (2^-11), one that writes only bf16 under bf16's (2^-8); anything else
/// (f32, f64, integers, partials of a split) keeps the few-ulp f32
/// sequences. The error tables are in the documentation of the PTX
/// generator (`kernels::ptx_gen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Accuracy {
    /// A few ulp of f32 (the default).
    #[default]
    F32,
    /// Results rounded to f16: relative errors below 2^-16.
    F16,
    /// Results rounded to bf16: relative errors below 2^-10.9.
    Bf16,
}

impl Accuracy {
    /// The accuracy that results of `written` dtypes need: [`Accuracy::Bf16`]
    /// when all are bf16, [`Accuracy::F16`] when all are f16 or bf16 and one
    /// is f16, else [`Accuracy::F32`] (also when nothing is written).
    pub fn for_results(written: impl IntoIterator<Item = DType>) -> Accuracy {
        let mut acc = None;
        for d in written {
            acc = Some(match (acc, d) {
                (None | Some(Accuracy::Bf16), DType::BF16) => Accuracy::Bf16,
                (None | Some(Accuracy::Bf16 | Accuracy::F16), DType::F16 | DType::BF16) => Accuracy::F16,
                _ => return Accuracy::F32,
            });
        }
        acc.unwrap_or(Accuracy::F32)
    }
}

impl Program {
    /// Checks that a launch gives `given` values for the program's scalar
    /// arguments ([`Program::scalars`]): [`Error::KernelArguments`](crate::Error::KernelArguments)
    /// if not.
    pub fn check_scalar_count(&self, given: usize) -> crate::error::Result<()> {
        if given == self.scalars.len() {
            return Ok(());
        }
        Err(crate::error::Error::KernelArguments {
            program: self.name.clone(),
            reason: format!(
                "{given} scalar arguments given for {} scalar parameters",
                self.scalars.len()
            ),
        })
    }

    /// Whether the program adds floats atomically (an [`Inst::Atomic`] with
    /// [`AtomicOp::Add`] or [`AtomicOp::Sub`] on a float parameter): such a result depends on
    /// the order the updates land in, which varies from launch to launch.
    pub fn adds_floats_atomically(&self) -> bool {
        fn any(p: &Program, body: &[Inst]) -> bool {
            body.iter().any(|inst| match inst {
                // A float subtraction is an addition of the negation.
                Inst::Atomic {
                    op: AtomicOp::Add | AtomicOp::Sub,
                    view,
                    ..
                } => p
                    .views
                    .get(view.index())
                    .and_then(|v| p.params.get(v.param.index()))
                    .is_some_and(|param| param.dtype.is_float()),
                other => other.nested().is_some_and(|b| any(p, b)),
            })
        }
        any(self, &self.body)
    }
}
