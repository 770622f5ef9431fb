//! Reductions over a strided axis split across the rows (on a GPU, and on
//! the CPU where the kept columns are a few tiles).
//!
//! A reduction over a first or middle axis (coalesced `[outer..., rows,
//! cols...]`, rows reduced, the kept axes after them the columns) has only
//! `outer × column tiles` grid points, too few to fill a GPU. Here the
//! rows are cut into `parts` runs: the kernel has grid `[outer..., parts,
//! column tiles...]`, each point reducing its run of rows into a row of an
//! `[outer..., parts, cols...]` partials buffer, one per reduction (sum and
//! max of one input share the read). The points of one column tile count
//! themselves out on that tile's counter, and the last of them
//! ([`Inst::LastPoint`](crate::kernels::ir::Inst::LastPoint) over the
//! parts axis) reduces the tile's columns of the partials in row order
//! into the result. Both orders are fixed, so the result does not depend
//! on scheduling.
//!
//! The columns are usually one axis. They are several where the result
//! orders kept axes otherwise than memory does (the sum over axis 1 of a
//! `[rows, a, b]` tensor permuted to `[b, rows, a]`: memory has `a` outside
//! `b`, the result `b` outside `a`), so the two do not coalesce; each is
//! then a column axis with a tile of its own, the tile's elements shared
//! innermost first.
//!
//! Where no divisor of the rows is near the wanted number of runs (a prime
//! row count), the runs start `rows / parts` apart and each also reads the
//! next run's first `rows % parts` rows, masked out of its result; the
//! last run counts all of its rows.
//!
//! An argmax or argmin keeps, per element of the tile, the best value and
//! the index of its first occurrence (NaN counting as both the maximum and
//! the minimum), updated in one read ([`super::emit::arg_step`]); its
//! partials are the best value and the row index of each column, and the
//! last point combines them in row order, so the first best index wins.
//!
//! One counter per column tile rather than one for the kernel: the combine
//! of a tile can start as soon as that tile's points are done, and the
//! combines of different tiles run in different blocks at once instead of
//! one block reading every partial. What the last block of a tile reads,
//! `parts × column tile` partials, runs after the rest of its tile, so the
//! split narrows its column tiles until that is at most [`LAST_POINT_READ`]
//! elements (one or two loads per thread); the narrower tiles still read
//! whole 128-byte lines of each row for elements of 4 bytes or more. For
//! the benchmark's `[16384, 4096]` f32 that is 32 column tiles of 128 and
//! 16 runs of 1024 rows (512 blocks); each tile's last block reads 16 × 128
//! partials.

use super::analysis::is_arg_reduce;
use super::emit::{arg_pick, arg_step, Lowerer, PartRows};
use super::group::{Group, Space};
use super::lower::{bind_flags, declare, declare_scalars, last_point_counter, Ctx, Lowered, MemAccess, ViewSpec};
use super::plan::{BufferDecl, BufferRef, Strategy};
use super::reduction::{acc_dtype, acc_op, effective, identity, tile_op};
use super::shifted::{mean_of, rescaled, spread, Combined};
use super::tiling::Axis;
use super::TileTarget;
use crate::dtype::{DType, Scalar};
use crate::graph::Op;
use crate::kernels::ir::{AccId, Access, Builder, IndexExpr, LoopId, TileReduce, ValueId, ValueType, ViewId};
use crate::ops::{BinaryOp, Padding, ReduceOp};
use std::collections::HashMap;

/// Elements of one tile of the partial kernel.
const PARTIAL_TILE: u64 = 4096;
/// The most partials the last point of a column tile reads.
const LAST_POINT_READ: u64 = 4096;
/// The narrowest column tile of a split: 128 bytes of f32.
const MIN_COL_TILE: u64 = 32;
/// The most grid points below which a column reduction is split.
pub(crate) const FEW_POINTS: u64 = 264;
/// The fewest elements a column reduction must read to be split: below,
/// a second launch costs more than the parallelism gains.
const MIN_ELEMENTS: u64 = 1 << 20;
/// On the CPU: the kept column tiles below which a column reduction is
/// split, and the grid points a split aims at: a column reduction whose
/// columns fit one tile would otherwise be one grid point, one thread of
/// the pool (`benches/NOTES.md`, v33).
const CPU_FEW_POINTS: u64 = 4;
const CPU_SPLIT_POINTS: u64 = 64;

/// How a column reduction is split.
#[derive(Debug, Clone)]
pub(crate) struct ColumnSplit {
    /// The reduction nodes (an arg reduction and its maximum or minimum
    /// siblings, if it is one).
    reduces: Vec<usize>,
    /// Whether the one reduction is an argmax or argmin.
    arg: bool,
    /// The extents of the kept axes outside the rows, outermost first.
    lead: Vec<u64>,
    /// Runs of rows (grid points along the rows).
    parts: u64,
    /// Rows between the starts of two runs.
    step: u64,
    /// Rows each run reads: `step`, plus the rows the parts do not divide.
    rows_per_part: u64,
    /// The partial kernel's tile along the rows.
    row_tile: u32,
    /// The most elements of each partial the last point's tile holds.
    last_read: u64,
    /// The extents of the kept axes after the rows (the columns), and the
    /// partial kernel's tile along each.
    cols: Vec<u64>,
    col_tiles: Vec<u32>,
}

/// The tiles of column axes `cols` (outermost first) sharing `budget`
/// elements, innermost first, in powers of two.
fn column_tiles(cols: &[u64], budget: u64) -> Vec<u32> {
    let mut left = budget.max(1);
    let mut tiles = vec![1; cols.len()];
    for (t, &c) in tiles.iter_mut().zip(cols).rev() {
        let take = pow2(c).min(left);
        *t = take as u32;
        left = (left / take).max(1);
    }
    tiles
}

/// The grid points along the column axes: tiles of each, multiplied.
fn column_points(cols: &[u64], tiles: &[u32]) -> u64 {
    cols.iter().zip(tiles).map(|(&c, &t)| c.div_ceil(t as u64)).product()
}

/// `Some` when `group` is a reduction over a strided axis (the coalesced
/// axes `[outer..., rows, cols...]`, rows reduced, at least one column
/// axis: kept axes after the rows that do not coalesce, because the
/// result orders them otherwise than memory does, are column axes each)
/// of at least a million elements whose kept tiles are too few to fill the
/// device: one or more reductions of one input space (sum, max, a mean's
/// sum ...), or one argmax/argmin (after its input's chain, with maxima or
/// minima of that input beside it), whose results are the reductions or
/// nodes after them (a mean's scale, a cast, an op with another kept-space
/// operand). The partials are kept in the accumulation dtype (f32 for f16
/// and bf16), and the nodes after the reductions run where they combine.
///
/// The rows are cut into as many runs as fill the device with at least two
/// row tiles each; where no divisor of the rows is within a factor of two
/// of that, the runs start `rows / parts` apart and each reads the next
/// one's first `rows % parts` rows without counting them.
pub(crate) fn column_split_of(cx: &Ctx, group: &Group, stores: &[usize], axes: &[Axis]) -> Option<ColumnSplit> {
    let gpu = cx.opts.target == TileTarget::Gpu;
    if group.shape.broadcast || group.shape.scan {
        return None;
    }
    let (few_points, wanted_points) = if gpu {
        (FEW_POINTS, super::COLUMN_SPLIT_POINTS)
    } else {
        (CPU_FEW_POINTS, CPU_SPLIT_POINTS)
    };
    let at = axes.iter().position(|a| a.reduced)?;
    let rows = axes[at];
    let lead: Vec<u64> = axes[..at].iter().map(|a| a.extent).collect();
    let cols: Vec<u64> = axes[at + 1..].iter().map(|a| a.extent).collect();
    // The split views add the parts axis.
    if cols.is_empty() || axes[at + 1..].iter().any(|a| a.reduced) || axes.len() + 1 > crate::shape::MAX_RANK {
        return None;
    }
    let width: u64 = cols.iter().product();
    let g = cx.g;
    let reduces: Vec<usize> = group
        .nodes
        .iter()
        .copied()
        .filter(|&n| matches!(g.nodes[n].op, Op::Reduce { .. }))
        .collect();
    let arg = reduces.iter().any(|&n| {
        matches!(
            g.nodes[n].op,
            Op::Reduce {
                op: ReduceOp::ArgMax | ReduceOp::ArgMin,
                ..
            }
        )
    });
    // Every result is in the reduced space: nothing of the full space is
    // stored, since the partial kernel's points each see a run of rows.
    let reduced_results = stores.iter().all(|n| group.shape.space[n] == Space::Reduced);
    // The CPU's arg reductions take two passes, which do not count indices
    // from a part's first row: they are not split.
    // Shifted sums split beside plain reductions, not beside arg ones.
    let shifted = reduces
        .iter()
        .any(|&n| matches!(g.nodes[n].op, Op::Reduce { op, .. } if op.is_shifted()));
    if reduces.is_empty() || !reduced_results || stores.is_empty() || (arg && (!gpu || shifted)) {
        return None;
    }
    let o: u64 = lead.iter().product();
    // An arg reduction keeps a value and an i64 index per element of the
    // tile: half the tile, a quarter with 8-byte values, keeps them in
    // registers.
    // Other reductions keep 16 KiB of accumulators: 8-byte ones (f64,
    // i64) half the elements (at the whole tile an f64 minimum over two
    // column axes spilled on sm_75 and sm_80).
    let wide = |n: usize| g.nodes[n].dtype.size_in_bytes() >= 8;
    let partial_tile = match arg {
        false
            if reduces
                .iter()
                .any(|&r| acc_dtype(g.nodes[r].dtype).size_in_bytes() >= 8) =>
        {
            PARTIAL_TILE / 2
        }
        false => PARTIAL_TILE,
        true if wide(g.nodes[reduces[0]].inputs[0]) => PARTIAL_TILE / 4,
        true => PARTIAL_TILE / 2,
    };
    // Shifted sums keep several statistics an element: a square sum two
    // accumulators in the partial kernel (its shift is one per column) and
    // four statistics at the last point, an exp sum two at both. Each
    // kernel's tile holds its statistics in 16 KiB (the element budget let
    // an f64 variance spill). The partial kernel's points are as many as
    // fill the device once; its wider tile takes more registers, and the
    // generator keeps such a grid in one wave (`ptx_gen`'s residency, v42).
    let stat_bytes = |square_words: u64| -> u64 {
        reduces
            .iter()
            .map(|&r| {
                let words = match g.nodes[r].op {
                    Op::Reduce {
                        op: ReduceOp::ShiftedSquareSum,
                        ..
                    } => square_words,
                    Op::Reduce {
                        op: ReduceOp::ShiftedExpSum,
                        ..
                    } => 2,
                    _ => 1,
                };
                words * acc_dtype(g.nodes[r].dtype).size_in_bytes() as u64
            })
            .sum()
    };
    let stat_tile = |square_words: u64| {
        if shifted {
            pow2_floor(PARTIAL_TILE * 4 / stat_bytes(square_words).max(1))
        } else {
            u64::MAX
        }
    };
    let partial_tile = partial_tile.min(stat_tile(2));
    let last_read = LAST_POINT_READ.min(stat_tile(4));
    // The CPU executor's tiles are rows of up to the whole partial tile.
    let widest = if gpu { PARTIAL_TILE / 4 } else { PARTIAL_TILE };
    let padded: u64 = cols.iter().map(|&c| pow2(c)).product();
    let mut col_tile = padded.min(widest);
    let row_tile = (partial_tile / col_tile).min(pow2(rows.extent));
    let col_points = column_points(&cols, &column_tiles(&cols, col_tile));
    if o * col_points >= few_points || rows.extent < 4 * row_tile || o * rows.extent * width < MIN_ELEMENTS {
        return None;
    }
    // Narrower column tiles until the last point of a tile reads few
    // partials (on a GPU; the CPU executor wants its tiles wide).
    let parts_for = |col_tile: u64| wanted_points.div_ceil(o * column_points(&cols, &column_tiles(&cols, col_tile)));
    while gpu && col_tile > MIN_COL_TILE && parts_for(col_tile) * col_tile > LAST_POINT_READ {
        col_tile /= 2;
    }
    let row_tile = (partial_tile / col_tile).max(1).min(pow2(rows.extent));
    // Enough grid points to fill the device, each with at least two tiles of rows.
    let most = parts_for(col_tile).min(rows.extent / (2 * row_tile)).max(1);
    let divisor = (1..=most).rev().find(|d| rows.extent % d == 0).unwrap_or(1);
    let parts = if 2 * divisor >= most { divisor } else { most };
    let step = rows.extent / parts;
    (parts > 1).then(|| ColumnSplit {
        reduces,
        arg,
        lead,
        parts,
        step,
        rows_per_part: rows.extent - step * (parts - 1),
        row_tile: row_tile as u32,
        last_read,
        col_tiles: column_tiles(&cols, col_tile),
        cols,
    })
}

/// The kernel of a split column reduction; see the module docs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn column_split(
    cx: &Ctx,
    group: &Group,
    name: &str,
    buffers: &mut Vec<BufferDecl>,
    accesses: &[MemAccess],
    views: &[ViewSpec],
    load_of: HashMap<(usize, usize, usize), usize>,
    store_of: HashMap<usize, usize>,
    cs: ColumnSplit,
) -> crate::error::Result<Vec<Lowered>> {
    let g = cx.g;
    // The grid is [outer..., parts, column tiles...]; `lead` is the rank of
    // the outer axes and `m` that of the columns.
    let lead = cs.lead.len();
    let m = cs.cols.len();
    let o: u64 = cs.lead.iter().product();
    let width: u64 = cs.cols.iter().product();
    let kept_axis = |extent: u64, tile: u32| Axis {
        extent,
        reduced: false,
        tile,
    };
    let lead_axes: Vec<Axis> = cs.lead.iter().map(|&e| kept_axis(e, 1)).collect();
    let col_axes: Vec<Axis> = cs
        .cols
        .iter()
        .zip(&cs.col_tiles)
        .map(|(&e, &t)| kept_axis(e, t))
        .collect();
    let col_tile: u32 = cs.col_tiles.iter().product();
    let col_points = column_points(&cs.cols, &cs.col_tiles);
    let masked_cols = col_axes.iter().any(Axis::ragged);
    let partial_len = o * cs.parts * width;
    // The partials are laid out [outer..., parts, columns...], contiguous:
    // the strides of the outer axes, of the parts and of the columns.
    let mut col_strides = vec![1i64; m];
    for k in (0..m.saturating_sub(1)).rev() {
        col_strides[k] = col_strides[k + 1] * cs.cols[k + 1] as i64;
    }
    let part_stride = width as i64;
    let mut lead_strides = vec![part_stride * cs.parts as i64; lead];
    for k in (0..lead.saturating_sub(1)).rev() {
        lead_strides[k] = lead_strides[k + 1] * cs.lead[k + 1] as i64;
    }
    // The grid points of the columns' tiles, after the outer axes and the parts.
    let col_grid = |first: usize| (0..m).map(move |k| Some((first + k) as u8));

    // The partials: rows of a run in a loop.
    let mut grid = cs.lead.clone();
    grid.push(cs.parts);
    grid.extend(col_axes.iter().map(Axis::count));
    let mut b = Builder::new(name, &grid);
    b.math(cx.opts.math);
    // The partial kernel reads what the full space reads; the combine reads
    // the kept-space operands of the nodes after the reduction and stores.
    let loads: Vec<usize> = (0..accesses.len())
        .filter(|&i| !accesses[i].write && accesses[i].space == Space::Full)
        .collect();
    let finals: Vec<usize> = (0..accesses.len())
        .filter(|&i| accesses[i].write || accesses[i].space == Space::Reduced)
        .collect();
    let split_views: Vec<ViewSpec> = views
        .iter()
        .map(|v| {
            let mut extents = v.extents[..lead].to_vec();
            let mut strides = v.strides[..lead].to_vec();
            let sr = v.strides[lead];
            extents.extend([cs.parts, cs.rows_per_part]);
            extents.extend_from_slice(&v.extents[lead + 1..]);
            strides.extend([sr * cs.step as i64, sr]);
            strides.extend_from_slice(&v.strides[lead + 1..]);
            let mut tile = vec![1; lead];
            tile.extend([1, cs.row_tile]);
            tile.extend_from_slice(&cs.col_tiles);
            ViewSpec {
                extents,
                strides,
                tile,
                offset: v.offset,
                lower: vec![],
                upper: vec![],
            }
        })
        .collect();
    let (mut vs, mut masked, mut args) = declare(cx, &mut b, accesses, &split_views, &loads, None);
    let (scalars, fulls) = declare_scalars(cx, &mut b, group);
    // One partials buffer per reduction (an arg reduction's values and
    // indices, a shifted sum's statistics), each a view standing for an
    // access of its own; `owner` is the reduction of each.
    let shifted = |r: usize| match g.nodes[r].op {
        Op::Reduce { op, .. } if op.is_shifted() => Some(op),
        _ => None,
    };
    let (partial_dtypes, owner): (Vec<DType>, Vec<usize>) = if cs.arg {
        let input = g.nodes[g.nodes[cs.reduces[0]].inputs[0]].dtype;
        (vec![acc_dtype(input), DType::I64], vec![cs.reduces[0]; 2])
    } else {
        let count = |r: usize| match shifted(r) {
            Some(ReduceOp::ShiftedSquareSum) => 4,
            Some(_) => 2,
            None => 1,
        };
        cs.reduces
            .iter()
            .flat_map(|&r| std::iter::repeat((acc_dtype(g.nodes[r].dtype), r)).take(count(r)))
            .unzip()
    };
    let mut partials = vec![];
    let mut partial_store = HashMap::new();
    let mut shifted_partials: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, &dtype) in partial_dtypes.iter().enumerate() {
        let p = b.param(format!("t{}", buffers.len()), dtype, partial_len, Access::ReadWrite);
        args.push(BufferRef::Temp(buffers.len()));
        buffers.push(BufferDecl::temp(dtype, partial_len));
        let out = accesses.len() + k;
        let mut extents = cs.lead.clone();
        extents.extend([cs.parts, 1]);
        extents.extend_from_slice(&cs.cols);
        let mut strides = lead_strides.clone();
        strides.extend([part_stride, 0]);
        strides.extend_from_slice(&col_strides);
        let mut tile = vec![1; lead + 2];
        tile.extend_from_slice(&cs.col_tiles);
        vs.insert(out, b.view(p, &extents, &strides, 0, &tile, Padding::Zero));
        masked.insert(out, masked_cols);
        match (cs.arg, shifted(owner[k])) {
            (true, _) => {}
            (false, Some(_)) => shifted_partials.entry(owner[k]).or_default().push(out),
            (false, None) => {
                partial_store.insert(owner[k], out);
            }
        }
        partials.push(p);
    }
    let mut axes = lead_axes.clone();
    axes.extend([
        kept_axis(cs.parts, 1),
        Axis {
            extent: cs.rows_per_part,
            reduced: true,
            tile: cs.row_tile,
        },
    ]);
    axes.extend_from_slice(&col_axes);
    let mut grid_axis: Vec<Option<u8>> = (0..lead as u8).map(Some).collect();
    grid_axis.extend([Some(lead as u8), None]);
    grid_axis.extend(col_grid(lead + 1));
    let mut lw = Lowerer::new(cx, group, axes, grid_axis, vs, masked, load_of.clone(), partial_store);
    lw.scalars = scalars.clone();
    lw.part_rows = Some(PartRows {
        part_axis: lead,
        axis: lead + 1,
        parts: cs.parts,
        step: cs.step,
    });
    if cs.arg {
        lw.arg_partials = Some((accesses.len(), accesses.len() + 1));
    } else {
        lw.partials = cs.reduces.clone();
        lw.shifted_partials = shifted_partials;
    }
    lw.body(&mut b)?;
    bind_flags(&mut lw, buffers, &mut args);

    // The last point of each column tile: the partials' rows in order.
    let counter = last_point_counter(&mut b, buffers, &mut args, o * col_points);
    let tile_rows = pow2(cs.parts).min((cs.last_read / col_tile as u64).max(1)) as u32;
    let pvs: Vec<ViewId> = partials
        .iter()
        .map(|&p| {
            let mut extents = cs.lead.clone();
            extents.push(cs.parts);
            extents.extend_from_slice(&cs.cols);
            let mut strides = lead_strides.clone();
            strides.push(part_stride);
            strides.extend_from_slice(&col_strides);
            let mut tile = vec![1; lead];
            tile.push(tile_rows);
            tile.extend_from_slice(&cs.col_tiles);
            b.view(p, &extents, &strides, 0, &tile, Padding::Zero)
        })
        .collect();
    let out_views: Vec<ViewSpec> = views
        .iter()
        .map(|v| {
            let mut tile = vec![1; lead + 1];
            tile.extend_from_slice(&cs.col_tiles);
            ViewSpec { tile, ..v.clone() }
        })
        .collect();
    let (ovs, omasked, out_args) = declare(cx, &mut b, accesses, &out_views, &finals, None);
    args.extend(out_args);
    let ragged = cs.parts % tile_rows as u64 != 0;
    let mut shape = vec![1; lead];
    shape.push(tile_rows);
    shape.extend_from_slice(&cs.col_tiles);
    // The nodes after the reduction, over the kept columns of one tile.
    let mut kept = lead_axes;
    kept.push(Axis {
        extent: cs.step * (cs.parts - 1) + cs.rows_per_part,
        reduced: true,
        tile: 1,
    });
    kept.extend_from_slice(&col_axes);
    let mut kept_grid: Vec<Option<u8>> = (0..lead as u8).map(Some).collect();
    kept_grid.push(None);
    kept_grid.extend(col_grid(lead + 1));
    let mut fin = Lowerer::new(cx, group, kept, kept_grid, ovs, omasked, load_of, store_of);
    fin.scalars = scalars;
    let row_axis = lead as u8;
    let mut failure = Ok(());
    b.last_point(lead as u8, counter, |b| {
        let index = |var| {
            let mut index: Vec<IndexExpr> = (0..lead as u8).map(IndexExpr::grid).collect();
            index.push(IndexExpr::loop_var(var));
            index.extend((0..m as u8).map(|k| IndexExpr::grid(lead as u8 + 1 + k)));
            index
        };
        // Rows past the last partial are not counted.
        let inside = |b: &mut Builder, var| {
            ragged.then(|| {
                let row = b.iota(&shape, row_axis, IndexExpr::loop_var(var));
                let lim = b.constant(Scalar::Int(cs.parts as i128, DType::I64), DType::I64, &shape);
                b.binary(BinaryOp::Lt, row, lim)
            })
        };
        let loops = cs.parts.div_ceil(tile_rows as u64);
        if cs.arg {
            // The arg reduction, and its maximum (minimum) siblings, whose
            // value is the combined best value.
            let r = *cs
                .reduces
                .iter()
                .find(|&&n| is_arg_reduce(&g.nodes[n].op))
                .expect("an arg column split has an arg reduction");
            let is_max = matches!(
                g.nodes[r].op,
                Op::Reduce {
                    op: ReduceOp::ArgMax,
                    ..
                }
            );
            let best = if is_max { ReduceOp::Max } else { ReduceOp::Min };
            let dt = partial_dtypes[0];
            let vacc = b.acc(ValueType::new(dt, &shape), identity(best, dt));
            let iacc = b.acc(ValueType::new(DType::I64, &shape), Scalar::Int(-1, DType::I64));
            b.loop_(loops, |b, var| {
                let x = b.load(pvs[0], &index(var), ragged || masked_cols);
                let j = b.load(pvs[1], &index(var), ragged || masked_cols);
                let valid = inside(b, var);
                arg_step(b, (vacc, iacc), x, j, valid, is_max, dt);
            });
            let (v, i) = (b.acc_read(vacc), b.acc_read(iacc));
            let (m, idx) = arg_pick(b, v, i, row_axis, is_max, dt);
            let mut totals = vec![(r, idx)];
            totals.extend(cs.reduces.iter().filter(|&&n| n != r).map(|&n| (n, m)));
            failure = fin.finish(b, &totals);
            return;
        }
        // The plain reductions: their partials reduced in row order.
        let plain: Vec<(usize, usize)> = (0..owner.len())
            .filter(|&k| shifted(owner[k]).is_none())
            .map(|k| (owner[k], k))
            .collect();
        let ops: Vec<ReduceOp> = plain
            .iter()
            .map(|&(r, _)| {
                let Op::Reduce { op, .. } = g.nodes[r].op else {
                    unreachable!("the reductions of a column split are reductions")
                };
                effective(op, g.nodes[r].dtype)
            })
            .collect();
        let accs: Vec<AccId> = ops
            .iter()
            .zip(&plain)
            .map(|(&op, &(_, k))| {
                b.acc(
                    ValueType::new(partial_dtypes[k], &shape),
                    identity(op, partial_dtypes[k]),
                )
            })
            .collect();
        b.loop_(loops, |b, var| {
            let mut valid = None;
            for (j, &op) in ops.iter().enumerate() {
                let k = plain[j].1;
                let mut x = b.load(pvs[k], &index(var), ragged || masked_cols);
                if ragged {
                    let valid = *valid.get_or_insert_with(|| inside(b, var).expect("ragged rows have a mask"));
                    let id = b.constant(identity(op, partial_dtypes[k]), partial_dtypes[k], &shape);
                    x = b.select(valid, x, id);
                }
                b.acc_update(accs[j], acc_op(op), x);
            }
        });
        let totals: Vec<(usize, ValueId)> = plain
            .iter()
            .zip(ops.iter().zip(&accs))
            .map(|(&(r, _), (&op, &acc))| {
                let total = b.acc_read(acc);
                (r, b.reduce(tile_op(op), total, row_axis))
            })
            .collect();
        // The shifted sums: their runs' statistics combined in row order.
        for &r in &cs.reduces {
            let Some(op) = shifted(r) else { continue };
            let first = owner.iter().position(|&o| o == r).expect("a shifted sum has partials");
            let ks: Vec<usize> = (first..first + if op == ReduceOp::ShiftedSquareSum { 4 } else { 2 }).collect();
            let c = combine_shifted(b, op, partial_dtypes[first], &shape, row_axis, loops, &|b, var| {
                let loaded: Vec<ValueId> = ks
                    .iter()
                    .map(|&k| b.load(pvs[k], &index(var), ragged || masked_cols))
                    .collect();
                (loaded, inside(b, var))
            });
            fin.combined.insert(r, c);
        }
        failure = fin.finish(b, &totals);
    });
    failure?;
    bind_flags(&mut fin, buffers, &mut args);
    let mut tile = vec![cs.row_tile];
    tile.extend_from_slice(&cs.col_tiles);
    let strategy = Strategy::ColumnSplit {
        outer: o,
        columns: cs.cols.clone(),
        parts: cs.parts,
        step: cs.step,
        rows_per_part: cs.rows_per_part,
        tile,
    };
    Ok(vec![(super::lower::finished(b)?, args, fulls, strategy)])
}

/// A last-point tile's statistics of one shifted sum, and which of its
/// rows hold a run (`None` where all do).
type StatsLoad<'a> = dyn Fn(&mut Builder, LoopId) -> (Vec<ValueId>, Option<ValueId>) + 'a;

/// The partials of the shifted sum `op` (statistics of dtype `dt`), combined in row order over `loops` tiles of
/// `shape` (`load` gives a tile's statistics and, where the last tile is
/// ragged, which rows hold a run), then over the tile's row axis: for
/// `exp`, the largest maximum and the sums rescaled to it; for squares,
/// the largest of the runs' shifts, the mean's distance from it, the runs'
/// centred sums of squares about the mean and the total count (three
/// passes: the shift, the mean, the squares).
#[allow(clippy::too_many_arguments)]
fn combine_shifted(
    b: &mut Builder,
    op: ReduceOp,
    dt: DType,
    shape: &[u32],
    row_axis: u8,
    loops: u64,
    load: &StatsLoad<'_>,
) -> Combined {
    let stats = Stats {
        dt,
        shape,
        row_axis,
        loops,
        load,
    };
    if op == ReduceOp::ShiftedExpSum {
        let max = stats.pass(b, BinaryOp::Maximum, f64::NEG_INFINITY, 1, &|_, v| vec![v[0]])[0];
        let sum = stats.pass(b, BinaryOp::Add, 0.0, 1, &|b, v| {
            let max_b = b.broadcast(max, shape);
            let one = b.constant(Scalar::Float(1.0, dt), dt, shape);
            vec![rescaled(b, v[1], v[0], max_b, one)]
        })[0];
        return Combined::Exp { max, sum };
    }
    // Squares: each run's shift `K`, mean distance `D` from it, centred
    // sum of squares and count. The largest shift is the shift of all.
    let shift = stats.pass(b, BinaryOp::Maximum, f64::NEG_INFINITY, 1, &|_, v| vec![v[0]])[0];
    // Each run's mean as a distance from the shift: (K - shift) + D.
    let distance = |b: &mut Builder, v: &[ValueId]| {
        let shift_b = b.broadcast(shift, shape);
        let near = b.binary(BinaryOp::Sub, v[0], shift_b);
        b.binary(BinaryOp::Add, near, v[1])
    };
    let sums = stats.pass(b, BinaryOp::Add, 0.0, 2, &|b, v| {
        let d = distance(b, v);
        vec![v[3], b.binary(BinaryOp::Mul, v[3], d)]
    });
    let count = sums[0];
    let ty = b.value_type(count).expect("a reduced value has a type").clone();
    let zero = b.constant(Scalar::Float(0.0, dt), dt, &ty.shape);
    let mean = mean_of(b, sums[1], count, zero);
    let m2 = stats.pass(b, BinaryOp::Add, 0.0, 1, &|b, v| {
        let d = distance(b, v);
        let mean_b = b.broadcast(mean, shape);
        vec![spread(b, v[2], v[3], d, mean_b)]
    })[0];
    Combined::Square { shift, mean, m2, count }
}

/// The last point's view of the runs' statistics of one shifted sum.
struct Stats<'s, 'l> {
    dt: DType,
    shape: &'s [u32],
    row_axis: u8,
    loops: u64,
    load: &'s StatsLoad<'l>,
}

impl Stats<'_, '_> {
    /// One pass over the runs in row order: each of the `outputs` values
    /// `f` makes of a tile's statistics, `pad` where a row holds no run,
    /// folded by `fold`
    /// (`Maximum` or `Add`) over the tiles and then the row axis.
    fn pass(
        &self,
        b: &mut Builder,
        fold: BinaryOp,
        pad: f64,
        outputs: usize,
        f: &dyn Fn(&mut Builder, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let (dt, shape) = (self.dt, self.shape);
        let accs: Vec<AccId> = (0..outputs)
            .map(|_| b.acc(ValueType::new(dt, shape), Scalar::Float(pad, dt)))
            .collect();
        b.loop_(self.loops, |b, var| {
            let (v, valid) = (self.load)(b, var);
            let values = f(b, &v);
            debug_assert_eq!(values.len(), outputs);
            for (&acc, mut x) in accs.iter().zip(values) {
                if let Some(k) = valid {
                    let low = b.constant(Scalar::Float(pad, dt), dt, shape);
                    x = b.select(k, x, low);
                }
                b.acc_update(acc, fold, x);
            }
        });
        let tile_op = if fold == BinaryOp::Maximum {
            TileReduce::Max
        } else {
            TileReduce::Sum
        };
        accs.into_iter()
            .map(|acc| {
                let x = b.acc_read(acc);
                b.reduce(tile_op, x, self.row_axis)
            })
            .collect()
    }
}

/// The largest power of two at most `x` (1 for 0).
fn pow2_floor(x: u64) -> u64 {
    1 << (63 - x.max(1).leading_zeros())
}

/// The smallest power of two at least `x` (1 for 0).
fn pow2(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}
