//! Reductions over a strided axis split across the rows (on a GPU, and on
//! the CPU where the kept columns are a few tiles).
//!
//! A reduction over a first or middle axis (coalesced `[rows, cols]` or
//! `[outer, rows, cols]`, rows reduced, the columns contiguous) has only
//! `outer × cols / tile` grid points, too few to fill a GPU. Here the rows
//! are cut into `parts` runs: the kernel has grid `[outer, parts, column
//! tiles]` (no outer axis: `[parts, column tiles]`), each point reducing its
//! run of rows into a row of an `[outer, parts, cols]` partials buffer, one
//! per reduction (sum and max of one input share the read). The points of
//! one column tile count themselves out on that tile's counter, and the
//! last of them ([`Inst::LastPoint`](crate::kernels::ir::Inst::LastPoint)
//! over the parts axis) reduces the tile's columns of the partials in row
//! order into the result. Both orders are fixed, so the result does not
//! depend on scheduling.
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
use super::tiling::Axis;
use super::TileTarget;
use crate::dtype::{DType, Scalar};
use crate::graph::Op;
use crate::kernels::ir::{Access, AccId, Builder, IndexExpr, ValueId, ValueType, ViewId};
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
    /// The extent of the kept axis outside the rows, if there is one.
    outer: Option<u64>,
    /// Runs of rows (grid points along the rows).
    parts: u64,
    /// Rows between the starts of two runs.
    step: u64,
    /// Rows each run reads: `step`, plus the rows the parts do not divide.
    rows_per_part: u64,
    /// The partial kernel's tile: rows, columns.
    tile: (u32, u32),
}

/// `Some` when `group` is a reduction over a strided axis (the
/// coalesced axes `[rows, cols]` or `[outer, rows, cols]`, rows reduced)
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
    let (outer, rows, cols) = match axes {
        [rows, cols] => (None, rows, cols),
        [outer, rows, cols] if !outer.reduced => (Some(outer.extent), rows, cols),
        _ => return None,
    };
    if !rows.reduced || cols.reduced {
        return None;
    }
    let g = cx.g;
    let reduces: Vec<usize> = group
        .nodes
        .iter()
        .copied()
        .filter(|&n| matches!(g.nodes[n].op, Op::Reduce { .. }))
        .collect();
    let arg = reduces
        .iter()
        .any(|&n| matches!(g.nodes[n].op, Op::Reduce { op: ReduceOp::ArgMax | ReduceOp::ArgMin, .. }));
    // Every result is in the reduced space: nothing of the full space is
    // stored, since the partial kernel's points each see a run of rows.
    let reduced_results = stores.iter().all(|n| group.shape.space[n] == Space::Reduced);
    // The CPU's arg reductions take two passes, which do not count indices
    // from a part's first row: they are not split.
    if reduces.is_empty() || !reduced_results || stores.is_empty() || (arg && !gpu) {
        return None;
    }
    let o = outer.unwrap_or(1);
    // An arg reduction keeps a value and an i64 index per element of the
    // tile: half the tile, a quarter with 8-byte values, keeps them in
    // registers.
    let partial_tile = match arg {
        false => PARTIAL_TILE,
        true if g.nodes[g.nodes[reduces[0]].inputs[0]].dtype.size_in_bytes() >= 8 => PARTIAL_TILE / 4,
        true => PARTIAL_TILE / 2,
    };
    // The CPU executor's tiles are rows of up to the whole partial tile.
    let widest = if gpu { PARTIAL_TILE / 4 } else { PARTIAL_TILE };
    let mut col_tile = pow2(cols.extent).min(widest);
    let row_tile = (partial_tile / col_tile).min(pow2(rows.extent));
    let col_tiles = cols.extent.div_ceil(col_tile);
    if o * col_tiles >= few_points || rows.extent < 4 * row_tile || o * rows.extent * cols.extent < MIN_ELEMENTS {
        return None;
    }
    // Narrower column tiles until the last point of a tile reads few
    // partials (on a GPU; the CPU executor wants its tiles wide).
    let parts_for = |col_tile: u64| wanted_points.div_ceil(o * cols.extent.div_ceil(col_tile));
    while gpu && col_tile > MIN_COL_TILE && parts_for(col_tile) * col_tile > LAST_POINT_READ {
        col_tile /= 2;
    }
    let row_tile = (partial_tile / col_tile).max(1).min(pow2(rows.extent));
    // Enough grid points to fill the device, each with at least two tiles of rows.
    let most = parts_for(col_tile).min(rows.extent / (2 * row_tile)).max(1);
    let divisor = (1..=most).rev().find(|d| rows.extent % d == 0).unwrap_or(1);
    let parts = if 2 * divisor >= most { divisor } else { most };
    let step = rows.extent / parts;
    (parts > 1).then_some(ColumnSplit {
        reduces,
        arg,
        outer,
        parts,
        step,
        rows_per_part: rows.extent - step * (parts - 1),
        tile: (row_tile as u32, col_tile as u32),
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
    // With an outer axis the grid is [outer, parts, column tiles], else
    // [parts, column tiles]; `lead` is the rank of the outer axes (0 or 1).
    let lead = cs.outer.is_some() as usize;
    let o = cs.outer.unwrap_or(1);
    let outer_axis = |tile: u32| Axis {
        extent: o,
        reduced: false,
        tile,
    };
    let cols = views[store_of[stores_first(&store_of)]].extents[lead + 1];
    let (row_tile, col_tile) = cs.tile;
    let col_tiles = cols.div_ceil(col_tile as u64);
    let partial_len = o * cs.parts * cols;
    // The outer extents, strides and tile of a view (nothing without an outer axis).
    let lead_of = |v: &ViewSpec| (v.extents[..lead].to_vec(), v.strides[..lead].to_vec());

    // The partials: rows of a run in a loop.
    let mut grid = vec![o; lead];
    grid.extend([cs.parts, col_tiles]);
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
            let (mut extents, mut strides) = lead_of(v);
            let (sr, sc) = (v.strides[lead], v.strides[lead + 1]);
            extents.extend([cs.parts, cs.rows_per_part, v.extents[lead + 1]]);
            strides.extend([sr * cs.step as i64, sr, sc]);
            let mut tile = vec![1; lead];
            tile.extend([1, row_tile, col_tile]);
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
    // indices), each a view standing for an access of its own.
    let partial_dtypes: Vec<DType> = if cs.arg {
        let input = g.nodes[g.nodes[cs.reduces[0]].inputs[0]].dtype;
        vec![acc_dtype(input), DType::I64]
    } else {
        cs.reduces.iter().map(|&r| acc_dtype(g.nodes[r].dtype)).collect()
    };
    let mut partials = vec![];
    let mut partial_store = HashMap::new();
    for (k, &dtype) in partial_dtypes.iter().enumerate() {
        let p = b.param(format!("t{}", buffers.len()), dtype, partial_len, Access::ReadWrite);
        args.push(BufferRef::Temp(buffers.len()));
        buffers.push(BufferDecl::temp(dtype, partial_len));
        let out = accesses.len() + k;
        let mut extents = vec![o; lead];
        extents.extend([cs.parts, 1, cols]);
        let mut strides = vec![(cs.parts * cols) as i64; lead];
        strides.extend([cols as i64, 0, 1]);
        let mut tile = vec![1; lead];
        tile.extend([1, 1, col_tile]);
        vs.insert(out, b.view(p, &extents, &strides, 0, &tile, Padding::Zero));
        masked.insert(out, cols % col_tile as u64 != 0);
        if !cs.arg {
            partial_store.insert(cs.reduces[k], out);
        }
        partials.push(p);
    }
    let mut axes = vec![outer_axis(1); lead];
    axes.extend([
        Axis {
            extent: cs.parts,
            reduced: false,
            tile: 1,
        },
        Axis {
            extent: cs.rows_per_part,
            reduced: true,
            tile: row_tile,
        },
        Axis {
            extent: cols,
            reduced: false,
            tile: col_tile,
        },
    ]);
    let mut grid_axis: Vec<Option<u8>> = (0..lead as u8).map(Some).collect();
    grid_axis.extend([Some(lead as u8), None, Some(lead as u8 + 1)]);
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
    }
    lw.body(&mut b)?;
    bind_flags(&mut lw, buffers, &mut args);

    // The last point of each column tile: the partials' rows in order.
    let counter = last_point_counter(&mut b, buffers, &mut args, o * col_tiles);
    let tile_rows = pow2(cs.parts).min((LAST_POINT_READ / col_tile as u64).max(1)) as u32;
    let pvs: Vec<ViewId> = partials
        .iter()
        .map(|&p| {
            let mut extents = vec![o; lead];
            extents.extend([cs.parts, cols]);
            let mut strides = vec![(cs.parts * cols) as i64; lead];
            strides.extend([cols as i64, 1]);
            let mut tile = vec![1; lead];
            tile.extend([tile_rows, col_tile]);
            b.view(p, &extents, &strides, 0, &tile, Padding::Zero)
        })
        .collect();
    let out_views: Vec<ViewSpec> = views
        .iter()
        .map(|v| {
            let mut tile = vec![1; lead];
            tile.extend([1, col_tile]);
            ViewSpec { tile, ..v.clone() }
        })
        .collect();
    let (ovs, omasked, out_args) = declare(cx, &mut b, accesses, &out_views, &finals, None);
    args.extend(out_args);
    let ragged = cs.parts % tile_rows as u64 != 0;
    let masked_cols = cols % col_tile as u64 != 0;
    let mut shape = vec![1; lead];
    shape.extend([tile_rows, col_tile]);
    // The nodes after the reduction, over the kept columns of one tile.
    let mut kept = vec![outer_axis(1); lead];
    kept.extend([
        Axis {
            extent: cs.step * (cs.parts - 1) + cs.rows_per_part,
            reduced: true,
            tile: 1,
        },
        Axis {
            extent: cols,
            reduced: false,
            tile: col_tile,
        },
    ]);
    let mut kept_grid: Vec<Option<u8>> = (0..lead as u8).map(Some).collect();
    kept_grid.extend([None, Some(lead as u8 + 1)]);
    let mut fin = Lowerer::new(cx, group, kept, kept_grid, ovs, omasked, load_of, store_of);
    fin.scalars = scalars;
    let row_axis = lead as u8;
    let mut failure = Ok(());
    b.last_point(lead as u8, counter, |b| {
        let index = |var| {
            let mut index: Vec<IndexExpr> = (0..lead as u8).map(IndexExpr::grid).collect();
            index.extend([IndexExpr::loop_var(var), IndexExpr::grid(lead as u8 + 1)]);
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
            let is_max = matches!(g.nodes[r].op, Op::Reduce { op: ReduceOp::ArgMax, .. });
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
        let ops: Vec<ReduceOp> = cs
            .reduces
            .iter()
            .map(|&r| {
                let Op::Reduce { op, .. } = g.nodes[r].op else {
                    unreachable!("the reductions of a column split are reductions")
                };
                effective(op, g.nodes[r].dtype)
            })
            .collect();
        let accs: Vec<AccId> = ops
            .iter()
            .zip(&partial_dtypes)
            .map(|(&op, &acc)| b.acc(ValueType::new(acc, &shape), identity(op, acc)))
            .collect();
        b.loop_(loops, |b, var| {
            let mut valid = None;
            for (k, &op) in ops.iter().enumerate() {
                let mut x = b.load(pvs[k], &index(var), ragged || masked_cols);
                if ragged {
                    let valid = *valid.get_or_insert_with(|| inside(b, var).expect("ragged rows have a mask"));
                    let id = b.constant(identity(op, partial_dtypes[k]), partial_dtypes[k], &shape);
                    x = b.select(valid, x, id);
                }
                b.acc_update(accs[k], acc_op(op), x);
            }
        });
        let totals: Vec<(usize, ValueId)> = cs
            .reduces
            .iter()
            .zip(ops.iter().zip(&accs))
            .map(|(&r, (&op, &acc))| {
                let total = b.acc_read(acc);
                (r, b.reduce(tile_op(op), total, row_axis))
            })
            .collect();
        failure = fin.finish(b, &totals);
    });
    failure?;
    bind_flags(&mut fin, buffers, &mut args);
    let strategy = Strategy::ColumnSplit {
        outer: o,
        parts: cs.parts,
        step: cs.step,
        rows_per_part: cs.rows_per_part,
        tile: cs.tile,
    };
    Ok(vec![(super::lower::finished(b)?, args, fulls, strategy)])
}

/// The access of some stored node (every stored node has the reduced
/// space's columns).
fn stores_first(store_of: &HashMap<usize, usize>) -> &usize {
    store_of.keys().min().expect("a column split stores a result")
}

/// The smallest power of two at least `x` (1 for 0).
fn pow2(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}
