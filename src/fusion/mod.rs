//! Fusion: turning a realised op DAG into as few tile kernels as possible.
//!
//! [`plan`] groups the computed nodes of a [`Subgraph`] into kernels and
//! lowers each group to a tile kernel [`Program`](crate::kernels::ir::Program).
//! The result, a [`Plan`], holds no data and is cached by the graph's
//! structure.
//!
//! # Grouping rules
//!
//! - **Views are addressing.** Permute, slice, expand and reshape are folded
//!   into the strides and offset of the partition view through which a
//!   kernel reads the buffer below them; they are never materialised. A
//!   reshape that strides cannot express (flattening a transposed span)
//!   copies its input into a row-major buffer first. A view of a short
//!   elementwise chain of data and constants (`labels.cast(I32)` reshaped
//!   and expanded, `a.exp().t()`) is moved below the chain first, so the
//!   chain is recomputed in its consumer's kernel over views of the leaves.
//! - **Concatenations are addressing.** An operand that is a `Cat` (or
//!   nested `Cat`s, or a `pad`, whose borders are constant pieces) is read
//!   piece by piece through windows of its index space (partition views
//!   whose span starts and ends inside the whole, masked outside), and the
//!   kernel picks each element's piece by iota compares; the axes a window
//!   cuts are coalesced with no other. The pieces themselves are loaded
//!   from memory, so computed pieces are stored by earlier kernels. A `Cat`
//!   under a further view, or requested as an output, is copied into a
//!   buffer the same way. Column splits are not taken for kernels with
//!   windows.
//! - **Scans are reductions that keep the full space.** A `Scan` shapes
//!   its group like a reduction over its axis (`GroupShape::scan`), but
//!   its value and its consumers live in the full space. Each grid point
//!   walks the axis tile by tile in order: an in-tile
//!   [`Inst::Scan`](crate::kernels::ir::Inst::Scan), plus an accumulator
//!   carrying the combination of the tiles before it, broadcast over the
//!   tile. Groups with scans are never split across grid points (no split
//!   reduction, no column split), so the combination order is fixed.
//! - **Random tensors are computed, never loaded.** A `Random` node is
//!   computed like an elementwise op (and is cheap: every kernel that
//!   reads it computes it again) from its elements' row-major positions,
//!   summed from iotas of the coalesced axes times the node's strides
//!   (which take part in the coalescing like a view's), and its seed, a
//!   scalar argument ([`Inst::Uniform`](crate::kernels::ir::Inst::Uniform)).
//!   Column splits are not taken for kernels with random nodes.
//! - **Gathers are indirect loads.** A `Gather` is computed like an
//!   elementwise op over its index's shape: its data is loaded through a
//!   view with no stride along the gathered axis, each element moved by its
//!   position times that axis's stride
//!   ([`Inst::Gather`](crate::kernels::ir::Inst::Gather)), so it joins the
//!   kernel of the work around it (beside a row reduction it lives in the
//!   reduced space). Its data comes from memory: a computed input is stored
//!   by an earlier kernel. Each gather has a [`BufferKind::Flag`] buffer
//!   that it sets on a position outside the axis; the runtimes turn a set
//!   flag into [`crate::Error::IndexOutOfRange`].
//! - **Scatters are kernels of their own.** A `ScatterAdd` is alone in
//!   its group, its index and source read from memory (a constant source
//!   gets a buffer). Its program walks lines: every other axis is a grid
//!   axis, and a loop runs along the scattered axis in order, adding each
//!   source element into the output (filled with zeros first) at its
//!   index's position of the same line
//!   ([`Inst::ScatterAdd`](crate::kernels::ir::Inst::ScatterAdd)), a
//!   plain read-modify-write that only the line's grid point makes. So
//!   each output element is the sum of its sources in source order,
//!   whatever the schedule. Its [`BufferKind::Flag`] reports an index
//!   outside the axis as a gather's does (see `scatter.rs` for its cost).
//! - **Elementwise chains** with broadcasts and views become one kernel over
//!   the output's iteration space; axes that every operand addresses as one
//!   contiguous run are coalesced, so a contiguous chain is a 1-D kernel;
//!   ragged edges are masked.
//! - **Reductions** join their elementwise producers and the elementwise
//!   consumers of their (keepdim) result: `mean((a - b)^2)` is one kernel.
//!   Several reductions over the same axes of the same space share a kernel.
//! - **Row patterns** (softmax, layer norm, RMS norm, log-softmax): when a
//!   reduced value is broadcast back over the reduced axes (an `Expand` of
//!   the keepdim result), the group takes whole rows in one tile (padded to a
//!   power of two and masked), reduces in-tile and broadcasts in-tile. This
//!   needs the row to fit [`FusionOptions::max_row_tile`]. Longer rows of
//!   one level of reductions (after the shifted sums below), at most
//!   [`FusionOptions::reread_row_bytes`] each and at least
//!   [`FusionOptions::two_pass_rows`] of them, are still one kernel
//!   ([`Strategy::RowsTwice`]): each grid point walks its row in tiles
//!   twice, for the reductions and then for what uses them, the second
//!   walk finding the row in L2. Otherwise the reduction is materialised
//!   and the consumers read it through a stride-0 view, one kernel per
//!   reduction level.
//! - **Shifted sums are one pass.** Before grouping, `sum(exp(x - s))` and
//!   `sum((x - s)^2)` with `s` reduced from `x` over the same axes (a
//!   softmax's maximum, a variance's mean) become two-input reductions
//!   (`ReduceOp::ShiftedExpSum`, `ShiftedSquareSum`). The reduction that
//!   makes `s` and the shifted sum are then one group with no broadcast
//!   back: a row of one tile computes `s` and then the sum, exactly as
//!   written; a longer row keeps per-element statistics in one pass (an
//!   online maximum and rescaled sum of exponentials; a first value, the
//!   sums of deviations from it and of their squares, and a count) and
//!   combines them with `s` after the pass. `logsumexp` and `var` are one
//!   kernel at any row length, and softmax, log-softmax and layer norm of
//!   long rows two (the statistics, then the normalised row). Split across
//!   the grid by a column split (a strided axis with few kept columns, few
//!   long rows), each run of rows stores its statistics per column and the
//!   last point combines them in row order (the maxima and rescaled sums;
//!   a shift, the mean's distance from it, the centred sums of squares and
//!   the counts), so these stay one pass. A group with a shifted sum that
//!   another split would take (a full reduction) is planned without the
//!   rewrite.
//! - **Elementwise kernels over odd widths** with an operand broadcast
//!   along some axis (a bias of a row, a scale per row) are flat on a GPU
//!   when that moves the dense operands in wider atoms than tiled rows
//!   ([`Strategy::Flat`]): one axis over the space, the broadcast operands
//!   read element by element at offsets computed from each element's flat
//!   position, so the rows' odd width costs no vector width.
//! - **Reductions over leading or middle axes** keep the memory order: the
//!   tile spans several rows and columns, the grid runs over the kept axes and
//!   a loop over tiles of the reduced axes updates an accumulator after an
//!   in-tile `Reduce` along the reduced axis.
//! - **Full reductions** of many tiles are split across grid points: each
//!   point reduces a fixed run of tiles into a partial. By default
//!   (`deterministic: true`) the point that finishes last combines the
//!   partials in index order and runs the elementwise consumers (`* 1/n` of
//!   a mean), in the same kernel: an
//!   [`Inst::LastPoint`](crate::kernels::ir::Inst::LastPoint) whose ticket
//!   counter is a [`BufferKind::Counters`] buffer of the plan. The result
//!   does not depend on scheduling, since the combine reads every partial in
//!   a fixed order whichever point runs it. With
//!   `deterministic: false`, a sum with no consumers (f32, f64, 32/64-bit
//!   integers) instead adds its partials atomically into the result, whose
//!   buffer starts at 0: one kernel, but float additions happen in
//!   whatever order the points finish. Integer atomics stay exact.
//! - **Materialisation.** A node used by kernels of other groups is stored
//!   once by the group it belongs to, unless it is cheap: an elementwise op
//!   whose operands are data or constants is recomputed by every group that
//!   uses it. `Full` constants are never buffers: each is a scalar argument
//!   of the kernels that read it ([`Inst::Scalar`](crate::kernels::ir::Inst::Scalar)),
//!   its value given at launch, so a new value reuses the plan and the
//!   compiled module.
//! - **Arg reductions** are kernels of their own: the max (min) first, then
//!   the first index that holds it or holds NaN.
//!
//! # Numerics
//!
//! f16/bf16 operands are cast to f32 after loading and rounded once when
//! stored (an explicit cast to f16/bf16 rounds where it stands). Reductions
//! accumulate f16/bf16 in f32, integers in their own dtype (wrapping), bools
//! as `u8` (sum and max are or, prod and min are and). Out-of-bounds
//! elements of a ragged reduced axis are replaced by the reduction's identity
//! before reducing.

mod analysis;
mod cache;
mod column_split;
mod emit;
mod explain;
mod group;
mod layout;
mod lower;
mod online;
mod plan;
mod reduction;
mod scatter;
mod shifted;
mod sink;
mod tiling;

pub use cache::{cache_stats, CacheStats};
pub(crate) use cache::{lookup as cached_plan, GraphKey, KeyWriter};
pub use explain::explain;
pub use plan::{BufferDecl, BufferKind, BufferRef, IndexCheck, Plan, PlannedKernel, Strategy};

use crate::config::FusionConfig;
use crate::error::{Error, Result};
use crate::graph::{Op, Subgraph};
use crate::kernels::ir::MathMode;
use analysis::{Analysis, Source};
use std::collections::HashMap;
use std::sync::Arc;

/// The machine a plan's kernels are tiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TileTarget {
    /// The CPU executor: tiles of about 8K elements.
    #[default]
    Cpu,
    /// A CUDA GPU: tiles of about 16 KiB per CTA (4K f32 elements), rows up to 8192 elements.
    Gpu,
}

/// How [`plan`] fuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FusionOptions {
    /// The machine tiles are sized for.
    pub target: TileTarget,
    /// Whether results must not depend on scheduling (default true).
    pub deterministic: bool,
    /// How transcendentals are computed.
    pub math: MathMode,
    /// The most elements (after padding to a power of two) a row may have
    /// to be reduced and broadcast back inside one tile, for values of 4
    /// bytes (half for 8-byte values; 8192 where the rows are strided).
    /// On a GPU 16384: a row of 2^14 f32 is 32 registers a thread at 512
    /// threads, and 2^15 spills at 1024 threads (64 registers a thread).
    pub max_row_tile: usize,
    /// The most bytes of a row longer than `max_row_tile` whose reduced
    /// values are broadcast back in one kernel all the same: each grid
    /// point walks its row twice, for its statistics and then for what uses
    /// them, the second time from L2 (0: never; then the statistics are
    /// stored and a second kernel reads the rows again from memory). GPU
    /// 128 KiB: 264 such rows in flight, two blocks on each of 132 SMs,
    /// are 33 MiB, within the 50 MiB L2 of an H100 or H200. CPU 0.
    pub reread_row_bytes: u64,
    /// The fewest rows walked twice (`reread_row_bytes`), one a grid point:
    /// fewer leave a device part empty, and their statistics are split
    /// across the grid instead. GPU 264 (two blocks on each of 132 SMs).
    pub two_pass_rows: u64,
    /// The number of elements a tile aims at, a power of two (rows of row
    /// kernels may exceed it).
    pub tile_elements: usize,
    /// The number of grid points a reduction split across the grid aims at.
    pub split_parts: u64,
}

/// The grid points a column reduction split across the grid aims at
/// (column splits are made for GPUs only).
pub(crate) const COLUMN_SPLIT_POINTS: u64 = 512;

impl FusionOptions {
    /// Options for the CPU executor.
    pub fn cpu() -> FusionOptions {
        FusionOptions::for_target(TileTarget::Cpu, &FusionConfig::default())
    }

    /// Options for a CUDA GPU.
    pub fn gpu() -> FusionOptions {
        FusionOptions::for_target(TileTarget::Gpu, &FusionConfig::default())
    }

    /// The options `config` gives for `target`: its math mode and
    /// determinism on both, its tile sizes on the GPU (the CPU executor's
    /// tiles are about 8K elements, and its full reductions split in 16).
    pub fn for_target(target: TileTarget, config: &FusionConfig) -> FusionOptions {
        let (max_row_tile, reread_row_bytes, tile_elements, split_parts) = match target {
            TileTarget::Cpu => (16384, 0, 8192, 16),
            TileTarget::Gpu => (
                16384,
                128 << 10,
                config.gpu_tile_elements.clamp(1, 1 << 40).next_power_of_two(),
                config.gpu_split_parts.max(1),
            ),
        };
        FusionOptions {
            target,
            deterministic: config.deterministic,
            math: config.math,
            max_row_tile,
            reread_row_bytes,
            two_pass_rows: column_split::FEW_POINTS,
            tile_elements,
            split_parts,
        }
    }
}

impl Default for FusionOptions {
    fn default() -> FusionOptions {
        FusionOptions::cpu()
    }
}

/// The fusion plan of `graph`, from the cache when a structurally equal
/// graph (same ops, shapes, dtypes and edges; data leaves compared by
/// position, shape and dtype) was planned with the same options.
///
/// ```
/// use std::sync::Arc;
/// use tilefuse::fusion::{plan, FusionOptions};
/// use tilefuse::graph::{Op, SubNode, Subgraph, UnaryOp};
/// use tilefuse::storage::{HostBuffer, Storage};
/// use tilefuse::{DType, Shape};
///
/// let x = Op::Data(Arc::new(Storage::Host(HostBuffer::zeros(DType::F32, 10))));
/// let node = |op, inputs: &[usize]| SubNode { op, shape: Shape::new(&[10]), dtype: DType::F32, inputs: inputs.into() };
/// let g = Subgraph {
///     nodes: vec![node(x, &[]), node(Op::Unary(UnaryOp::Exp), &[0]), node(Op::Unary(UnaryOp::Tanh), &[1])],
///     outputs: vec![2],
/// };
/// let p = plan(&g, &FusionOptions::default())?;
/// assert_eq!(p.kernels.len(), 1);
/// # Ok::<(), tilefuse::Error>(())
/// ```
pub fn plan(graph: &Subgraph, options: &FusionOptions) -> Result<Arc<Plan>> {
    plan_traced(graph, options).map(|(plan, _)| plan)
}

/// [`plan`], also saying whether the plan came from the cache.
pub(crate) fn plan_traced(graph: &Subgraph, options: &FusionOptions) -> Result<(Arc<Plan>, bool)> {
    cache::get_or_insert(graph, options, || build(graph, options).map(Arc::new))
}

/// The graph a plan of `g` is made of, and its node positions refer to:
/// `g` with views moved below short elementwise chains of leaves
/// ([`sink`]), and, when `shifted`, sums of shifted terms made two-input
/// reductions ([`online`]).
pub(crate) fn prepared(g: &Subgraph, shifted: bool) -> std::borrow::Cow<'_, Subgraph> {
    let mut g = sink::sink_views(g);
    if shifted {
        let mut h = g.clone().into_owned();
        if online::rewrite(&mut h) {
            let outputs = h.outputs.clone();
            g = std::borrow::Cow::Owned(sink::live(h.nodes, outputs));
        }
    }
    g
}

/// Plans `g` without the cache: with shifted sums where every group that
/// holds one runs unsplit, else without them.
fn build(g: &Subgraph, opts: &FusionOptions) -> Result<Plan> {
    check(g)?;
    match build_prepared(g, opts, true)? {
        Some(plan) => Ok(plan),
        None => Ok(build_prepared(g, opts, false)?.expect("plans without shifted sums are always made")),
    }
}

/// The plan of `prepared(g, shifted)`, or `None` where a group with a
/// shifted sum would be split across the grid.
fn build_prepared(g: &Subgraph, opts: &FusionOptions, shifted: bool) -> Result<Option<Plan>> {
    let g = &*prepared(g, shifted);
    let an = Analysis::new(g);
    let limits = group::RowLimits {
        max_row_tile: opts.max_row_tile,
        reread_row_bytes: opts.reread_row_bytes,
        two_pass_rows: opts.two_pass_rows,
    };
    let groups = group::group(g, &an, limits);
    let mut buffer: HashMap<usize, BufferRef> = HashMap::new();
    let mut full_position: HashMap<usize, usize> = HashMap::new();
    let (mut k, mut f) = (0, 0);
    for (i, n) in g.nodes.iter().enumerate() {
        match n.op {
            Op::Data(_) => {
                buffer.insert(i, BufferRef::Input(k));
                k += 1;
            }
            Op::Full(_) => {
                full_position.insert(i, f);
                f += 1;
            }
            _ => {}
        }
    }
    // The nodes that must be stored: outputs, and operands of other groups.
    let base_of = |p: usize| match an.source(g, p) {
        Source::Chain { base, .. } => Some(base),
        // Outputs that are concatenations are computed (chains of their own).
        Source::Const(_) | Source::Pieces(_) => None,
    };
    let mut needed = vec![false; g.nodes.len()];
    for &o in &g.outputs {
        if let Some(b) = base_of(o).filter(|&b| an.computed[b]) {
            needed[b] = true;
        }
    }
    for grp in &groups {
        for &n in &grp.nodes {
            for base in an.sources(g, n).iter().flat_map(Source::bases) {
                if an.computed[base] && !grp.nodes.contains(&base) {
                    needed[base] = true;
                }
            }
        }
    }
    let mut buffers = vec![];
    let mut kernels = vec![];
    for (i, grp) in groups.iter().enumerate() {
        let stores: Vec<usize> = grp.home.iter().copied().filter(|&n| needed[n]).collect();
        for &n in &stores {
            buffer.insert(n, BufferRef::Temp(buffers.len()));
            buffers.push(BufferDecl::temp(g.nodes[n].dtype, g.nodes[n].shape.numel() as u64));
        }
        let last = *grp.nodes.last().expect("groups are not empty");
        let name = format!("k{i}_{}", short_name(&g.nodes[last].op));
        let cx = lower::Ctx {
            g,
            an: &an,
            opts,
            buffer: &buffer,
        };
        let Some(lowered) = lower::lower(&cx, grp, &stores, &name, &mut buffers)? else {
            return Ok(None);
        };
        for (program, args, fulls, strategy) in lowered {
            kernels.push(PlannedKernel {
                program: Arc::new(program),
                strategy,
                args,
                scalars: fulls.iter().map(|n| full_position[n]).collect(),
                nodes: grp.nodes.clone(),
            });
        }
    }
    let outputs = g
        .outputs
        .iter()
        .map(|&o| {
            let b = base_of(o).expect("constant outputs are computed");
            buffer[&b]
        })
        .collect();
    Ok(Some(Plan {
        buffers,
        kernels,
        outputs,
        shifted,
    }))
}

/// A kernel-name-friendly op name (`reduce_sum`, `tanh`).
fn short_name(op: &Op) -> String {
    let name = op.name();
    let name = name.split(['[', '(']).next().unwrap_or("op");
    name.replace('.', "_")
}

/// Rejects graphs fusion cannot read: inputs after their users, wrong
/// operand counts, outputs out of range, views whose shapes disagree.
fn check(g: &Subgraph) -> Result<()> {
    let bad = |i: usize, reason: String| Error::InvalidShape {
        op: "fusion::plan",
        shape: crate::error::dims(g.nodes[i].shape.dims()),
        arg: vec![i as isize],
        reason,
    };
    for (i, n) in g.nodes.iter().enumerate() {
        let arity = match &n.op {
            Op::Data(_) | Op::Full(_) => 0,
            Op::Binary(_) | Op::Gather { .. } | Op::ScatterAdd { .. } => 2,
            Op::Reduce { op, .. } if op.is_shifted() => 2,
            Op::Where => 3,
            Op::Cat { .. } => n.inputs.len().max(1),
            _ => 1,
        };
        if n.inputs.len() != arity {
            return Err(bad(
                i,
                format!("{} takes {arity} inputs, got {}", n.op.name(), n.inputs.len()),
            ));
        }
        if let Some(&p) = n.inputs.iter().find(|&&p| p >= i) {
            return Err(bad(i, format!("input {p} of {} does not come before it", n.op.name())));
        }
        let input = n.inputs.first().map(|&p| g.nodes[p].shape.dims());
        let ok = match (&n.op, input) {
            (Op::Data(s), _) => s.len() == n.shape.numel() && s.dtype() == n.dtype,
            (Op::Reshape, Some(x)) => x.iter().product::<usize>() == n.shape.numel(),
            (Op::Permute(p), Some(x)) => {
                p.len() == x.len()
                    && p.iter()
                        .enumerate()
                        .all(|(k, &a)| a < x.len() && x[a] == n.shape.dims()[k])
            }
            (Op::Expand, Some(x)) => {
                x.len() == n.shape.rank() && x.iter().zip(n.shape.dims()).all(|(&a, &b)| a == b || a == 1)
            }
            (Op::Slice { axis, start, step }, Some(x)) => {
                *axis < x.len()
                    && *step >= 1
                    && x.len() == n.shape.rank()
                    && (n.shape.dims()[*axis] == 0 || start + (n.shape.dims()[*axis] - 1) * step < x[*axis])
            }
            (Op::Reduce { axes, op }, Some(x)) => {
                (!op.is_shifted() || g.nodes[n.inputs[1]].shape == n.shape)
                    && x.len() == n.shape.rank()
                    && axes.iter().all(|&a| a < x.len())
                    && (0..x.len()).all(|k| n.shape.dims()[k] == if axes.contains(&k) { 1 } else { x[k] })
            }
            (Op::Cat { axis }, Some(_)) => {
                let x = |p: usize| g.nodes[p].shape.dims();
                *axis < n.shape.rank()
                    && n.inputs.iter().all(|&p| {
                        g.nodes[p].dtype == n.dtype
                            && x(p).len() == n.shape.rank()
                            && (0..x(p).len()).all(|k| k == *axis || x(p)[k] == n.shape.dims()[k])
                    })
                    && n.inputs.iter().map(|&p| x(p)[*axis]).sum::<usize>() == n.shape.dims()[*axis]
            }
            (_, Some(_)) if n.op.is_elementwise() => n.inputs.iter().all(|&p| g.nodes[p].shape == n.shape),
            _ => true,
        };
        if !ok {
            return Err(bad(i, format!("{} does not fit its input shapes", n.op.name())));
        }
    }
    if let Some(&o) = g.outputs.iter().find(|&&o| o >= g.nodes.len()) {
        return Err(Error::InvalidShape {
            op: "fusion::plan",
            shape: Default::default(),
            arg: vec![o as isize],
            reason: format!("output {o} is not a node of the {}-node graph", g.nodes.len()),
        });
    }
    Ok(())
}
