//! Column reductions split across the rows on a GPU.
//!
//! A reduction over the outer axis of a `[rows, cols]` iteration space (a
//! column sum) has only `cols / tile` grid points, too few to fill a GPU.
//! Here the rows are cut into `parts` runs: the kernel has grid
//! `[parts, column tiles]`, each point reducing its run of rows into a row
//! of a `[parts, cols]` partials buffer. The points of one column tile
//! count themselves out on that tile's counter, and the last of them
//! ([`Inst::LastPoint`](crate::kernels::ir::Inst::LastPoint) over grid
//! axis 0) reduces the tile's columns of the partials in row order into
//! the result. Both orders are fixed, so the result does not depend on
//! scheduling.
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

use super::emit::Lowerer;
use super::group::{Group, Space};
use super::lower::{declare, declare_scalars, last_point_counter, single_reduce, Ctx, Lowered, MemAccess, ViewSpec};
use super::plan::{BufferDecl, BufferRef};
use super::reduction::{acc_dtype, acc_op, effective, identity, tile_op};
use super::tiling::Axis;
use super::TileTarget;
use crate::dtype::{DType, Scalar};
use crate::graph::Op;
use crate::kernels::ir::{Access, Builder, IndexExpr, ValueType};
use crate::ops::{BinaryOp, Padding, ReduceOp};
use std::collections::HashMap;

/// Elements of one tile of the partial kernel.
const PARTIAL_TILE: u64 = 4096;
/// The most partials the last point of a column tile reads.
const LAST_POINT_READ: u64 = 4096;
/// The narrowest column tile of a split: 128 bytes of f32.
const MIN_COL_TILE: u64 = 32;
/// The most grid points below which a column reduction is split.
const FEW_POINTS: u64 = 264;
/// The fewest elements a column reduction must read to be split: below,
/// a second launch costs more than the parallelism gains.
const MIN_ELEMENTS: u64 = 1 << 20;

/// How a column reduction is split.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColumnSplit {
    /// The reduction node.
    reduce: usize,
    /// Runs of rows (grid points along the rows).
    parts: u64,
    /// Rows per run.
    rows_per_part: u64,
    /// The partial kernel's tile: rows, columns.
    tile: (u32, u32),
}

/// `Some` when `group` is, on a GPU, a single non-arg reduction over the
/// outer of two coalesced axes, of at least a million elements, with too
/// few column tiles to fill the device, whose results are the reduction or
/// nodes after it (a mean's scale, a cast, an op with another kept-space
/// operand). The partials are kept in the accumulation dtype (f32 for f16
/// and bf16), and the nodes after the reduction run where they combine.
pub(crate) fn column_split_of(cx: &Ctx, group: &Group, stores: &[usize], axes: &[Axis]) -> Option<ColumnSplit> {
    if cx.opts.target != TileTarget::Gpu || group.shape.broadcast {
        return None;
    }
    let [rows, cols] = axes else { return None };
    if !rows.reduced || cols.reduced {
        return None;
    }
    let g = cx.g;
    let (r, op) = single_reduce(g, group)?;
    // Every result is in the reduced space: nothing of the full space is
    // stored, since the partial kernel's points each see a run of rows.
    let reduced_results = stores.iter().all(|n| group.shape.space[n] == Space::Reduced);
    if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) || !reduced_results || stores.is_empty() {
        return None;
    }
    let mut col_tile = pow2(cols.extent).min(PARTIAL_TILE / 4);
    let row_tile = (PARTIAL_TILE / col_tile).min(pow2(rows.extent));
    let col_tiles = cols.extent.div_ceil(col_tile);
    if col_tiles >= FEW_POINTS || rows.extent < 4 * row_tile || rows.extent * cols.extent < MIN_ELEMENTS {
        return None;
    }
    // Narrower column tiles until the last point of a tile reads few partials.
    let wanted_points = super::COLUMN_SPLIT_POINTS;
    while col_tile > MIN_COL_TILE && wanted_points.div_ceil(cols.extent.div_ceil(col_tile)) * col_tile > LAST_POINT_READ
    {
        col_tile /= 2;
    }
    let row_tile = (PARTIAL_TILE / col_tile).min(pow2(rows.extent));
    let col_tiles = cols.extent.div_ceil(col_tile);
    // Enough grid points to fill the device, each with at least two tiles of rows.
    let wanted = wanted_points.div_ceil(col_tiles);
    let most = wanted.min(rows.extent / (2 * row_tile)).max(1);
    let parts = (1..=most).rev().find(|d| rows.extent % d == 0).unwrap_or(1);
    (parts > 1).then_some(ColumnSplit {
        reduce: r,
        parts,
        rows_per_part: rows.extent / parts,
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
    load_of: HashMap<(usize, usize), usize>,
    store_of: HashMap<usize, usize>,
    cs: ColumnSplit,
) -> crate::error::Result<Vec<Lowered>> {
    let g = cx.g;
    let r = cs.reduce;
    let Op::Reduce { op, .. } = g.nodes[r].op else {
        unreachable!("a column split has one reduction")
    };
    let dtype = g.nodes[r].dtype;
    let op = effective(op, dtype);
    // Partials and their combine in the accumulation dtype.
    let acc = acc_dtype(dtype);
    let cols = views[store_of[stores_first(&store_of)]].extents[1];
    let (row_tile, col_tile) = cs.tile;
    let col_tiles = cols.div_ceil(col_tile as u64);
    let partial = BufferRef::Temp(buffers.len());
    let partial_len = cs.parts * cols;

    // The partials: grid [parts, column tiles], rows of a run in a loop.
    let mut b = Builder::new(name, &[cs.parts, col_tiles]);
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
        .map(|v| ViewSpec {
            extents: vec![cs.parts, cs.rows_per_part, v.extents[1]],
            strides: vec![v.strides[0] * cs.rows_per_part as i64, v.strides[0], v.strides[1]],
            tile: vec![1, row_tile, col_tile],
            offset: v.offset,
        })
        .collect();
    let (mut vs, mut masked, mut args) = declare(cx, &mut b, accesses, &split_views, &loads, None);
    let (scalars, fulls) = declare_scalars(cx, &mut b, group);
    let p = b.param(format!("t{}", buffers.len()), acc, partial_len, Access::ReadWrite);
    args.push(partial);
    buffers.push(BufferDecl::temp(acc, partial_len));
    // The partials' view takes the place of an access of its own.
    let out = accesses.len();
    vs.insert(
        out,
        b.view(
            p,
            &[cs.parts, 1, cols],
            &[cols as i64, 0, 1],
            0,
            &[1, 1, col_tile],
            Padding::Zero,
        ),
    );
    masked.insert(out, cols % col_tile as u64 != 0);
    let axes = vec![
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
    ];
    let mut lw = Lowerer::new(
        cx,
        group,
        axes,
        vec![Some(0), None, Some(1)],
        vs,
        masked,
        load_of.clone(),
        HashMap::from([(r, out)]),
    );
    lw.scalars = scalars.clone();
    lw.partial = Some(r);
    lw.body(&mut b)?;

    // The last point of each column tile: the partials' rows in order.
    let counter = last_point_counter(&mut b, buffers, &mut args, col_tiles);
    let tile_rows = pow2(cs.parts).min((LAST_POINT_READ / col_tile as u64).max(1)) as u32;
    let pv = b.view(
        p,
        &[cs.parts, cols],
        &[cols as i64, 1],
        0,
        &[tile_rows, col_tile],
        Padding::Zero,
    );
    let out_views: Vec<ViewSpec> = views
        .iter()
        .map(|v| ViewSpec {
            tile: vec![1, col_tile],
            ..v.clone()
        })
        .collect();
    let (ovs, omasked, out_args) = declare(cx, &mut b, accesses, &out_views, &finals, None);
    args.extend(out_args);
    let ragged = cs.parts % tile_rows as u64 != 0;
    let masked_cols = cols % col_tile as u64 != 0;
    let shape = [tile_rows, col_tile];
    let acc_id = b.acc(ValueType::new(acc, &shape), identity(op, acc));
    // The nodes after the reduction, over the kept columns of one tile.
    let kept = vec![
        Axis {
            extent: cs.parts * cs.rows_per_part,
            reduced: true,
            tile: 1,
        },
        Axis {
            extent: cols,
            reduced: false,
            tile: col_tile,
        },
    ];
    let mut fin = Lowerer::new(cx, group, kept, vec![None, Some(1)], ovs, omasked, load_of, store_of);
    fin.scalars = scalars;
    let mut failure = Ok(());
    b.last_point(0, counter, |b| {
        b.loop_(cs.parts.div_ceil(tile_rows as u64), |b, var| {
            let mut x = b.load(
                pv,
                &[IndexExpr::loop_var(var), IndexExpr::grid(1)],
                ragged || masked_cols,
            );
            if ragged {
                // Rows past the last partial count as the identity.
                let row = b.iota(&shape, 0, IndexExpr::loop_var(var));
                let lim = b.constant(Scalar::Int(cs.parts as i128, DType::I64), DType::I64, &shape);
                let inside = b.binary(BinaryOp::Lt, row, lim);
                let id = b.constant(identity(op, acc), acc, &shape);
                x = b.select(inside, x, id);
            }
            b.acc_update(acc_id, acc_op(op), x);
        });
        let total = b.acc_read(acc_id);
        let total = b.reduce(tile_op(op), total, 0);
        failure = fin.finish(b, r, total);
    });
    failure?;
    Ok(vec![(b.finish()?, args, fulls)])
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
