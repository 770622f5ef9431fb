//! The one error type of tilefuse.
//!
//! Misuse is reported where it happens, naming the operation and the shapes
//! involved; device failures come back from realization. Every variant is
//! structured so callers can match on what went wrong.

use crate::dtype::DType;

/// A shape or index written out for messages: `[4, 8]`. A `Vec` keeps
/// `Error` small, so `Result`s stay cheap on the success path.
pub type Dims = Vec<usize>;

/// Everything that can go wrong in tilefuse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two operand shapes that do not broadcast together.
    #[error("{op}: shapes {lhs:?} and {rhs:?} do not broadcast")]
    ShapeMismatch {
        /// The operation that was called.
        op: &'static str,
        /// Shape of the first operand.
        lhs: Dims,
        /// Shape of the second operand.
        rhs: Dims,
    },
    /// An axis outside `-rank..rank`.
    #[error("{op}: axis {axis} is out of range for shape {shape:?}")]
    AxisOutOfRange {
        /// The operation that was called.
        op: &'static str,
        /// The axis as given.
        axis: isize,
        /// The shape it was applied to.
        shape: Dims,
    },
    /// A shape argument that is not valid for the operation (a reshape that
    /// changes the element count, a permutation that is not one, a slice past
    /// the end, ...).
    #[error("{op}: {reason} (shape {shape:?}, argument {arg:?})")]
    InvalidShape {
        /// The operation that was called.
        op: &'static str,
        /// The shape it was applied to.
        shape: Dims,
        /// The shape or index argument that was rejected.
        arg: Vec<isize>,
        /// Why it was rejected.
        reason: String,
    },
    /// An element type the operation does not accept.
    #[error("{op}: dtype {dtype} is not supported ({reason})")]
    UnsupportedDType {
        /// The operation that was called.
        op: &'static str,
        /// The dtype that was rejected.
        dtype: DType,
        /// What the operation needs instead.
        reason: &'static str,
    },
    /// An integer or bool tensor given to an op that computes a statistic in
    /// a float dtype (`mean`, `var`, the softmax family, the norms), which
    /// refuses it as PyTorch does rather than guess a float dtype.
    #[error("{op}: dtype {dtype} is not supported (shape {shape:?}); it needs a float dtype, so cast first, e.g. `x.cast(DType::F32)`")]
    NeedsFloat {
        /// The operation that was called.
        op: &'static str,
        /// The dtype that was rejected.
        dtype: DType,
        /// The shape of the tensor it was applied to.
        shape: Dims,
    },
    /// Two operands of different dtypes where one dtype is required.
    #[error("{op}: dtypes {lhs} and {rhs} differ")]
    DTypeMismatch {
        /// The operation that was called.
        op: &'static str,
        /// The first dtype.
        lhs: DType,
        /// The second dtype.
        rhs: DType,
    },
    /// Data whose length does not match the shape it was given.
    #[error("{op}: {len} elements do not fill shape {shape:?}")]
    LengthMismatch {
        /// The operation that was called.
        op: &'static str,
        /// The number of elements given.
        len: usize,
        /// The shape asked for.
        shape: Dims,
    },
    /// A partition index outside a partition view's index space.
    #[error(
        "{op}: partition index {index:?} is outside the index space {space:?} (tensor {extents:?}, tile {tile:?})"
    )]
    PartitionOutOfRange {
        /// The operation that was called.
        op: &'static str,
        /// The partition index given.
        index: Dims,
        /// The number of partitions along each axis.
        space: Dims,
        /// The extents of the tensor span.
        extents: Dims,
        /// The tile shape of the view.
        tile: Dims,
    },
    /// An unmasked access to a partition that is partly out of bounds.
    #[error(
        "{op}: partition {index:?} is partly out of bounds (tensor {extents:?}, tile {tile:?}); use the masked form"
    )]
    PartlyOutOfBounds {
        /// The operation that was called.
        op: &'static str,
        /// The partition index given.
        index: Dims,
        /// The extents of the tensor span.
        extents: Dims,
        /// The tile shape of the view.
        tile: Dims,
    },
    /// A number of indices that does not match the rank.
    #[error("{op}: {given} indices given for rank {rank} (tensor {extents:?}, tile {tile:?})")]
    RankMismatch {
        /// The operation that was called.
        op: &'static str,
        /// The number of indices given.
        given: usize,
        /// The rank expected.
        rank: usize,
        /// The extents of the tensor span.
        extents: Dims,
        /// The tile shape of the view.
        tile: Dims,
    },
    /// A store through a span whose mapping is not injective (a zero stride
    /// on an axis longer than one): two indices would write one element.
    #[error("{op}: the span (extents {extents:?}, strides {strides:?}) maps several indices to one element; it cannot be stored to")]
    NotInjective {
        /// The operation that was called.
        op: &'static str,
        /// The extents of the span.
        extents: Dims,
        /// The strides of the span.
        strides: Vec<isize>,
    },
    /// A span whose extents and strides reach outside the memory it was given.
    #[error("{op}: extents {extents:?} with strides {strides:?} reach element {needed} but only {len} were given")]
    SpanOutOfMemory {
        /// The operation that was called.
        op: &'static str,
        /// The extents of the span.
        extents: Dims,
        /// The strides of the span.
        strides: Vec<isize>,
        /// One past the largest element offset the span reaches.
        needed: usize,
        /// The number of elements the memory holds.
        len: usize,
    },
    /// A masked load padding the element type has no value for (every
    /// padding but zero needs a floating-point element type).
    #[error("{op}: padding {padding} is not a value of element type {element} (tensor {extents:?}, tile {tile:?})")]
    IncompatiblePadding {
        /// The operation that was called.
        op: &'static str,
        /// The padding given.
        padding: crate::ops::Padding,
        /// The element type of the view.
        element: &'static str,
        /// The extents of the tensor span.
        extents: Dims,
        /// The tile shape of the view.
        tile: Dims,
    },
    /// A memory order and thread scope combination an operation does not allow.
    #[error("{op}: memory order {order} with scope {scope} is not allowed ({reason})")]
    InvalidOrdering {
        /// The operation that was called.
        op: &'static str,
        /// The memory order given.
        order: &'static str,
        /// The thread scope given.
        scope: &'static str,
        /// Which combinations are allowed.
        reason: &'static str,
    },
    /// Operands on different devices.
    #[error("{op}: operands live on different devices ({lhs} and {rhs})")]
    DeviceMismatch {
        /// The operation that was called.
        op: &'static str,
        /// The first device.
        lhs: String,
        /// The second device.
        rhs: String,
    },
    /// A kernel program that fails the verifier.
    #[error("kernel program `{program}` is invalid: {reason}")]
    InvalidProgram {
        /// The program's name.
        program: String,
        /// The first check that failed.
        reason: String,
    },
    /// Kernel arguments that do not fit the program's parameters (their
    /// number, or a read-only argument for a parameter the program writes).
    #[error("kernel `{program}`: {reason}")]
    KernelArguments {
        /// The program's name.
        program: String,
        /// What does not fit.
        reason: String,
    },
    /// No CUDA device could be used.
    #[error("CUDA is not available: {reason}")]
    CudaUnavailable {
        /// Why (no driver, driver too old, no GPU, built without the `cuda` feature).
        reason: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error in {call}: {message}")]
    Driver {
        /// The driver call or step that failed.
        call: &'static str,
        /// The driver's message.
        message: String,
    },
    /// The driver's JIT refused a generated PTX module.
    #[error("PTX of kernel `{program}` failed to load: {log}")]
    PtxLoad {
        /// The program's name.
        program: String,
        /// The JIT's error log.
        log: String,
    },
    /// A [`Config`](crate::Config) field out of the range it takes.
    #[error("config: {field} = {value} is not a value it takes ({takes})")]
    InvalidConfig {
        /// The field, as `group.name` (`codegen.max_threads`).
        field: &'static str,
        /// Its value.
        value: String,
        /// The values it takes.
        takes: &'static str,
    },
    /// A shape with more axes than a tensor can have ([`crate::MAX_RANK`]).
    #[error("{op}: shape {shape:?} has {} axes, more than the {max} a tensor can have", .shape.len())]
    RankTooLarge {
        /// The operation that was called.
        op: &'static str,
        /// The shape asked for.
        shape: Dims,
        /// The most axes a tensor can have ([`crate::MAX_RANK`]).
        max: usize,
    },
    /// A shape with more elements than a tensor can hold: the product of its
    /// extents (an empty axis counted as 1) is above
    /// [`crate::shape::MAX_NUMEL`], the most elements whose size at 8 bytes
    /// each fits in an `isize`.
    #[error(
        "{op}: shape {shape:?}{} has more elements than a tensor can hold (at most {max}, so that their size at 8 bytes each fits in an isize)",
        broadcast_of(.operands)
    )]
    ShapeTooLarge {
        /// The operation that was called.
        op: &'static str,
        /// The shape asked for, or the broadcast of `operands`.
        shape: Dims,
        /// The operand shapes whose broadcast `shape` is; empty when the
        /// shape was given as such.
        operands: Vec<Dims>,
        /// The most elements a tensor can hold ([`crate::shape::MAX_NUMEL`]).
        max: usize,
    },
    /// Host memory ran out: the allocator refused a buffer.
    #[error("{op}: out of host memory allocating {bytes} bytes (shape {shape:?}, {dtype})")]
    HostOutOfMemory {
        /// The operation that allocated.
        op: &'static str,
        /// The bytes asked for.
        bytes: usize,
        /// The shape of the buffer (its length for a flat buffer).
        shape: Dims,
        /// The element type of the buffer.
        dtype: DType,
    },
    /// The file of measured codegen choices could not be written (the
    /// choice still holds for this process).
    #[error("the measured choices could not be written to {path}: {reason}")]
    ChoicesFile {
        /// The file.
        path: String,
        /// What the system said.
        reason: String,
    },
    /// An index tensor held a position outside the axis it indexes: found
    /// when the graph was realized (on the GPU, through a flag the kernel
    /// sets), and no element outside the axis was read.
    #[error("{op}: an index along axis {axis} lies outside 0..{len} (input shape {input:?}, index shape {index:?})")]
    IndexOutOfRange {
        /// The operation that was called.
        op: &'static str,
        /// The indexed axis.
        axis: usize,
        /// Its length.
        len: usize,
        /// The shape of the indexed tensor.
        input: Dims,
        /// The shape of the index (as gathered: broadcast to the result's
        /// shape for `index_select`).
        index: Dims,
    },
    /// A mesh or a sharding that does not fit: an empty mesh, sharded
    /// operands of different meshes, axes or shard extents, or collective
    /// parts that do not match their mesh or each other.
    #[error("{op}: {reason}{}", shapes_of(.shapes))]
    Sharding {
        /// The operation that was called.
        op: &'static str,
        /// The shapes involved, as the user wrote them (the whole shapes of
        /// sharded operands); empty where none is.
        shapes: Vec<Dims>,
        /// What does not fit.
        reason: String,
    },
    /// Device memory ran out, even after the cache was freed.
    #[error("out of device memory allocating {bytes} bytes ({in_use} in use)")]
    OutOfMemory {
        /// The allocation that failed.
        bytes: usize,
        /// Bytes in use when it failed.
        in_use: usize,
    },
}

impl Error {
    /// This error reported as coming from `op`: what a composed op (a
    /// softmax, a norm) does with the errors of the ops it is written with,
    /// so that they name the op the user called. Variants without an op
    /// name are returned as they are.
    pub(crate) fn with_op(mut self, op: &'static str) -> Error {
        use Error::*;
        match &mut self {
            ShapeMismatch { op: o, .. }
            | AxisOutOfRange { op: o, .. }
            | InvalidShape { op: o, .. }
            | UnsupportedDType { op: o, .. }
            | NeedsFloat { op: o, .. }
            | DTypeMismatch { op: o, .. }
            | LengthMismatch { op: o, .. }
            | PartitionOutOfRange { op: o, .. }
            | PartlyOutOfBounds { op: o, .. }
            | RankMismatch { op: o, .. }
            | NotInjective { op: o, .. }
            | SpanOutOfMemory { op: o, .. }
            | IncompatiblePadding { op: o, .. }
            | InvalidOrdering { op: o, .. }
            | RankTooLarge { op: o, .. }
            | ShapeTooLarge { op: o, .. }
            | HostOutOfMemory { op: o, .. }
            | IndexOutOfRange { op: o, .. }
            | Sharding { op: o, .. }
            | DeviceMismatch { op: o, .. } => *o = op,
            InvalidProgram { .. }
            | KernelArguments { .. }
            | CudaUnavailable { .. }
            | Driver { .. }
            | PtxLoad { .. }
            | InvalidConfig { .. }
            | ChoicesFile { .. }
            | OutOfMemory { .. } => {}
        }
        self
    }
}

/// Unwraps an op's result, panicking at the caller's line with the error's
/// message: the panicking forms of the `try_` functions.
#[track_caller]
pub(crate) fn or_panic<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// `Result` with tilefuse's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Shape or index as [`Dims`] for an error message.
pub(crate) fn dims(xs: &[usize]) -> Dims {
    xs.to_vec()
}

/// The part of a [`Error::ShapeTooLarge`] message that names the operands
/// whose broadcast the shape is, if any.
fn broadcast_of(operands: &[Dims]) -> String {
    if operands.is_empty() {
        return String::new();
    }
    let names: Vec<String> = operands.iter().map(|o| format!("{o:?}")).collect();
    format!(" (the broadcast of {})", names.join(" and "))
}

/// The part of an [`Error::Sharding`] message that names the shapes
/// involved, if any.
fn shapes_of(shapes: &[Dims]) -> String {
    if shapes.is_empty() {
        return String::new();
    }
    let names: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
    format!(" (shapes {})", names.join(" and "))
}
