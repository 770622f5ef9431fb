//! A fusion plan: the kernels that compute a subgraph's outputs, and the
//! buffers between them.

use crate::dtype::DType;
use crate::kernels::ir::Program;
use std::sync::Arc;

/// A buffer the plan needs: an intermediate result, an output, or the
/// ticket counters of a kernel with a last point.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BufferDecl {
    /// The element type.
    pub dtype: DType,
    /// The number of elements.
    pub len: u64,
    /// How long it lives and what it holds at the start of a run.
    pub kind: BufferKind,
}

impl BufferDecl {
    /// An intermediate or output buffer of `len` elements of `dtype`.
    pub fn temp(dtype: DType, len: u64) -> BufferDecl {
        BufferDecl {
            dtype,
            len,
            kind: BufferKind::Temp,
        }
    }
}

/// The lifetime of a plan's buffer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// Fresh for every run; every element a kernel reads was written by an
    /// earlier kernel (or the same kernel, before a last point) of the run.
    Temp,
    /// The `u32` ticket counters of a kernel's
    /// [`LastPoint`](crate::kernels::ir::Inst::LastPoint): zero before the
    /// kernel's first launch, and left zero by every launch that completes.
    /// A runtime may therefore zero it once and keep it for every run of the
    /// plan, provided two launches using it never overlap. The CUDA runtime
    /// keeps one per prepared (device, plan), whose launches all go to one
    /// stream in plan order; the CPU runtime makes a zeroed one per run.
    Counters,
    /// One `u32` that a kernel's gathers set to 1 when an index lies
    /// outside its axis (the kernel's program fills it with 0 first). After
    /// the run, a runtime that finds it set returns the check's error.
    Flag(IndexCheck),
}

/// What a gather's flag buffer reports when it is set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexCheck {
    /// The op the user called (`gather`, `index_select`).
    pub op: &'static str,
    /// The indexed axis.
    pub axis: usize,
    /// The input's shape.
    pub input: Vec<usize>,
    /// The index's shape, as gathered.
    pub index: Vec<usize>,
}

impl IndexCheck {
    /// The error of a set flag.
    pub fn error(&self) -> crate::error::Error {
        crate::error::Error::IndexOutOfRange {
            op: self.op,
            axis: self.axis,
            len: self.input[self.axis],
            input: self.input.clone(),
            index: self.index.clone(),
        }
    }
}

impl Plan {
    /// The checks of the plan's flag buffers, with their buffer positions.
    pub fn index_checks(&self) -> impl Iterator<Item = (usize, &IndexCheck)> {
        self.buffers.iter().enumerate().filter_map(|(i, b)| match &b.kind {
            BufferKind::Flag(check) => Some((i, check)),
            _ => None,
        })
    }
}

/// A buffer a kernel argument or a plan output refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferRef {
    /// The k-th `Data` leaf of the subgraph, counted in node order.
    Input(usize),
    /// An index into [`Plan::buffers`].
    Temp(usize),
}

/// The schedule lowering chose for a kernel, recorded before its program
/// was built; [`explain`](super::explain) prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Strategy {
    /// One grid point per tile of the kept axes, the reduced axes within
    /// the tile or walked by loops. `axes` are the coalesced iteration axes,
    /// outermost first: extent, tile, and whether reduced.
    Tiled {
        /// The coalesced axes.
        axes: Vec<(u64, u32, bool)>,
    },
    /// Rows longer than a tile whose reduced values are broadcast back
    /// (softmax, layer norm): one grid point a row, which walks it twice in
    /// tiles, first for its reductions, then for what uses them (the second
    /// walk reading from L2). `axes` as [`Strategy::Tiled`]'s.
    RowsTwice {
        /// The coalesced axes.
        axes: Vec<(u64, u32, bool)>,
    },
    /// An elementwise kernel over one flat axis of `total` elements in tiles
    /// of `tile`, whose `broadcasts` operands that repeat along some axis
    /// are read element by element at offsets computed from each
    /// element's position (odd row widths keep 16-byte atoms).
    Flat {
        /// Elements of the space.
        total: u64,
        /// The tile.
        tile: u32,
        /// Operands read by position.
        broadcasts: usize,
    },
    /// A reduction over everything split across `parts` grid points of
    /// `tiles` tiles each, combined in order at the last point (or added
    /// atomically).
    SplitReduction {
        /// Grid points.
        parts: u64,
        /// Tiles of each point.
        tiles: u64,
        /// Whether the partials are added atomically (not deterministic).
        atomic: bool,
    },
    /// A reduction over a strided axis: `[outer..., rows, columns...]`
    /// with the rows cut into `parts` runs `step` rows apart, each reading
    /// `rows_per_part` rows in `tile` (rows, then each column axis),
    /// combined per column tile at the last point.
    ColumnSplit {
        /// The kept extent outside the rows (1 if none).
        outer: u64,
        /// The kept extents after the rows (the columns), outermost first.
        columns: Vec<u64>,
        /// Runs of rows.
        parts: u64,
        /// Rows between the starts of two runs.
        step: u64,
        /// Rows each run reads.
        rows_per_part: u64,
        /// The partial kernel's tile: rows, then each column axis.
        tile: Vec<u32>,
    },
}

/// `[a, b, ...]`.
fn join<T: std::fmt::Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Strategy::Tiled { axes } | Strategy::RowsTwice { axes } => {
                let axis = |&(e, t, r): &(u64, u32, bool)| format!("{e}{}/{t}", if r { "r" } else { "" });
                let axes: Vec<String> = axes.iter().map(axis).collect();
                let twice = if matches!(self, Strategy::RowsTwice { .. }) { ", rows walked twice" } else { "" };
                write!(f, "tiled [{}]{twice}", axes.join(", "))
            }
            Strategy::Flat { total, tile, broadcasts } => {
                write!(f, "flat [{total}/{tile}], {broadcasts} broadcast operand(s) read by position")
            }
            Strategy::SplitReduction { parts, tiles, atomic } => {
                let how = if *atomic { "atomic" } else { "last point" };
                write!(f, "split reduction: {parts} parts of {tiles} tiles, {how}")
            }
            Strategy::ColumnSplit {
                outer,
                columns,
                parts,
                step,
                rows_per_part,
                tile,
            } => write!(
                f,
                "column split: {outer} outer, {parts} runs of {rows_per_part} rows {step} apart, columns {}, tile {}",
                join(columns),
                join(tile)
            ),
        }
    }
}

/// One kernel launch of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedKernel {
    /// The tile program.
    pub program: Arc<Program>,
    /// The schedule chosen for it.
    pub strategy: Strategy,
    /// The buffer bound to each parameter of the program, in parameter order.
    pub args: Vec<BufferRef>,
    /// The value bound to each scalar argument of the program, in argument
    /// order: the position of a `Full` node among the subgraph's `Full`
    /// nodes, counted in node order (its value converted to the argument's
    /// dtype).
    pub scalars: Vec<usize>,
    /// The subgraph nodes whose values the kernel computes (a cheap node may
    /// be computed by several kernels).
    pub nodes: Vec<usize>,
}

/// The kernels that evaluate a subgraph, in dependency order.
///
/// A plan holds no data: inputs are referred to by position, so one plan
/// serves every structurally equal subgraph. Each output is a fresh
/// row-major buffer of the output node's shape, except an output that is a
/// `Data` leaf, which is that input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The intermediate and output buffers the kernels write.
    pub buffers: Vec<BufferDecl>,
    /// The kernels; each runs after the kernels that write what it reads.
    pub kernels: Vec<PlannedKernel>,
    /// The buffer holding each requested output, in request order.
    pub outputs: Vec<BufferRef>,
    /// Whether the kernels' node positions are those of the graph with
    /// sums of shifted terms rewritten (see "Shifted sums" in the
    /// [fusion module docs](super)).
    pub(crate) shifted: bool,
}
