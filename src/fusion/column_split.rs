//! Column reductions split across the rows on a GPU.
//!
//! A reduction over the outer axis of a `[rows, cols]` iteration space (a
//! column sum) has only `cols / tile` grid points, too few to fill a GPU.
//! Here the rows are cut into `parts` runs: the first kernel has grid
//! `[parts, column tiles]`, each point reducing its run of rows into a row
//! of a `[parts, cols]` partials buffer; the second reduces the partials'
//! columns in order into the result. Both orders are fixed, so the result
//! does not depend on scheduling.

use super::emit::Lowerer;
use super::group::{Group, Space};
use super::lower::{declare, single_reduce, Ctx, MemAccess, ViewSpec};
use super::plan::{BufferDecl, BufferRef};
use super::reduction::{acc_dtype, acc_op, effective, identity, tile_op};
use super::tiling::Axis;
use super::Target;
use crate::graph::{Op, ReduceOp};
use crate::kernels::ir::{Access, Builder, IndexExpr, Program, ValueType};
use crate::tile::Padding;
use std::collections::HashMap;

/// Elements of one tile of the partial kernel.
const PARTIAL_TILE: u64 = 4096;
/// Columns of one tile of the combining kernel.
const COMBINE_COLS: u64 = 32;
/// Elements of one tile of the combining kernel.
const COMBINE_TILE: u64 = 2048;
/// Grid points a split column reduction aims at.
const WANTED_POINTS: u64 = 512;
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
/// outer of two coalesced axes whose only result is the reduction, in a
/// dtype it accumulates in, of at least a million elements, with too few
/// column tiles to fill the device.
pub(crate) fn column_split_of(cx: &Ctx, group: &Group, stores: &[usize], axes: &[Axis]) -> Option<ColumnSplit> {
    if cx.opts.target != Target::Gpu || group.shape.broadcast {
        return None;
    }
    let [rows, cols] = axes else { return None };
    if !rows.reduced || cols.reduced {
        return None;
    }
    let g = cx.g;
    let (r, op) = single_reduce(g, group)?;
    let dtype = g.nodes[r].dtype;
    let only_result = group.shape.space.iter().all(|(&n, &s)| s == Space::Full || n == r) && stores == [r];
    if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) || !only_result || acc_dtype(dtype) != dtype {
        return None;
    }
    let col_tile = pow2(cols.extent).min(PARTIAL_TILE / 4);
    let row_tile = (PARTIAL_TILE / col_tile).min(pow2(rows.extent));
    let col_tiles = cols.extent.div_ceil(col_tile);
    if col_tiles >= FEW_POINTS || rows.extent < 4 * row_tile || rows.extent * cols.extent < MIN_ELEMENTS {
        return None;
    }
    // Enough grid points to fill the device, each with at least two tiles of rows.
    let wanted = WANTED_POINTS.div_ceil(col_tiles);
    let most = wanted.min(rows.extent / (2 * row_tile)).max(1);
    let parts = (1..=most).rev().find(|d| rows.extent % d == 0).unwrap_or(1);
    (parts > 1).then_some(ColumnSplit {
        reduce: r,
        parts,
        rows_per_part: rows.extent / parts,
        tile: (row_tile as u32, col_tile as u32),
    })
}

/// The two kernels of a split column reduction; see the module docs.
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
) -> crate::error::Result<Vec<(Program, Vec<BufferRef>)>> {
    let g = cx.g;
    let r = cs.reduce;
    let Op::Reduce { op, .. } = g.nodes[r].op else {
        unreachable!("a column split has one reduction")
    };
    let dtype = g.nodes[r].dtype;
    let op = effective(op, dtype);
    let cols = views[store_of[&r]].extents[1];
    let (row_tile, col_tile) = cs.tile;
    let col_tiles = cols.div_ceil(col_tile as u64);
    let partial = BufferRef::Temp(buffers.len());
    let partial_len = cs.parts * cols;

    // The partials: grid [parts, column tiles], rows of a run in a loop.
    let mut b = Builder::new(format!("{name}_partial"), &[cs.parts, col_tiles]);
    b.math(cx.opts.math);
    let loads: Vec<usize> = (0..accesses.len()).filter(|&i| !accesses[i].write).collect();
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
    let p = b.param(format!("t{}", buffers.len()), dtype, partial_len, Access::Write);
    args.push(partial);
    let out = store_of[&r];
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
        load_of,
        store_of,
    );
    lw.body(&mut b)?;
    let mut out_kernels = vec![(b.finish()?, args)];
    buffers.push(BufferDecl {
        dtype,
        len: partial_len,
    });

    // The combine: grid [column tiles], the partials' rows in order.
    let tile_cols = pow2(cols).min(COMBINE_COLS) as u32;
    let tile_rows = pow2(cs.parts).min(COMBINE_TILE / tile_cols as u64) as u32;
    let mut b = Builder::new(format!("{name}_combine"), &[cols.div_ceil(tile_cols as u64)]);
    b.math(cx.opts.math);
    let p = b.param(format!("t{}", buffers.len() - 1), dtype, partial_len, Access::Read);
    let pv = b.view(
        p,
        &[cs.parts, cols],
        &[cols as i64, 1],
        0,
        &[tile_rows, tile_cols],
        Padding::Zero,
    );
    let combine_views: Vec<ViewSpec> = views
        .iter()
        .map(|v| ViewSpec {
            tile: vec![1, tile_cols],
            ..v.clone()
        })
        .collect();
    let (ovs, _, out_args) = declare(cx, &mut b, accesses, &combine_views, &[out], None);
    let mut args = vec![partial];
    args.extend(out_args);
    let ragged = cs.parts % tile_rows as u64 != 0;
    let masked_cols = cols % tile_cols as u64 != 0;
    let shape = [tile_rows, tile_cols];
    let acc = b.acc(ValueType::new(dtype, &shape), identity(op, dtype));
    b.loop_(cs.parts.div_ceil(tile_rows as u64), |b, var| {
        let mut x = b.load(
            pv,
            &[IndexExpr::loop_var(var), IndexExpr::grid(0)],
            ragged || masked_cols,
        );
        if ragged {
            // Rows past the last partial count as the identity.
            let row = b.iota(&shape, 0, IndexExpr::loop_var(var));
            let lim = b.constant(
                crate::dtype::Scalar::Int(cs.parts as i128, crate::dtype::DType::I64),
                crate::dtype::DType::I64,
                &shape,
            );
            let inside = b.binary(crate::graph::BinaryOp::Lt, row, lim);
            let id = b.constant(identity(op, dtype), dtype, &shape);
            x = b.select(inside, x, id);
        }
        b.acc_update(acc, acc_op(op), x);
    });
    let total = b.acc_read(acc);
    let total = b.reduce(tile_op(op), total, 0);
    b.store(
        ovs[&out],
        &[IndexExpr::constant(0), IndexExpr::grid(0)],
        total,
        masked_cols,
    );
    out_kernels.push((b.finish()?, args));
    Ok(out_kernels)
}

/// The smallest power of two at least `x` (1 for 0).
fn pow2(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}
