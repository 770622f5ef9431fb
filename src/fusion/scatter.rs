//! Lowering a scatter (`Op::ScatterAdd`) to its own kernel.
//!
//! A scatter is a group of its own whose operands (the index and the
//! source) come from memory. Its program walks *lines*: every axis but the
//! scattered one is a grid axis (the innermost of them cut into tiles of
//! up to [`LINE_TILE`] lines), and a loop runs along the scattered axis in
//! order. Each iteration loads one element of the index and of the source
//! per line and adds the source element into the output at the index's
//! position of the same line ([`Inst::ScatterAdd`]): a plain
//! read-modify-write, since a line's output is only ever updated by one
//! grid point (one thread on a GPU), in the order of the source. The
//! output starts at zero (a parameter fill), so the result is the sum of
//! each output element's sources in source order, run after run.
//!
//! Bytes: the index and the source are read once, and each source element
//! costs one read and one write of its output element (cached when the
//! line is short); the output's zero fill is one write. The parallelism is
//! the number of lines: a scatter along the only non-trivial axis (a
//! one-dimensional `scatter_add`) runs on one thread, in time linear in
//! the source's length.
//!
//! [`Inst::ScatterAdd`]: crate::kernels::ir::Inst::ScatterAdd

use super::analysis::Source;
use super::group::Group;
use super::lower::{Ctx, Lowered};
use super::plan::{BufferDecl, BufferKind, BufferRef, IndexCheck, Strategy};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::{Access, Builder, IndexExpr};
use crate::ops::Padding;

/// The most lines one grid point scatters.
const LINE_TILE: u64 = 256;

/// Lowers the group of scatter node `n` (its only node), whose result is
/// stored to its buffer.
pub(crate) fn lower_scatter(
    cx: &Ctx,
    group: &Group,
    n: usize,
    (axis, chunked): (usize, Option<usize>),
    name: &str,
    buffers: &mut Vec<BufferDecl>,
) -> Result<Vec<Lowered>> {
    let internal = |reason: String| Error::InvalidProgram {
        program: name.to_string(),
        reason,
    };
    if group.nodes != [n] {
        return Err(internal(format!("scatter {n} shares its kernel with {:?}", group.nodes)));
    }
    let g = cx.g;
    let node = &g.nodes[n];
    let out_dims = node.shape.dims();
    let rank = out_dims.len();
    let operands: Vec<(usize, super::layout::Layout)> = cx
        .an
        .sources(g, n)
        .into_iter()
        .map(|s| match s {
            Source::Chain { base, layout, .. } => Ok((base, layout)),
            other => Err(internal(format!("an operand of scatter {n} is not in memory: {other:?}"))),
        })
        .collect::<Result<_>>()?;
    let dims: Vec<u64> = g.nodes[node.inputs[0]].shape.dims().iter().map(|&d| d as u64).collect();
    let out_ref = *cx
        .buffer
        .get(&n)
        .ok_or_else(|| internal(format!("scatter {n} has no buffer")))?;
    let empty = dims.contains(&0);
    // The innermost line axis longer than one is cut into tiles of lines.
    let mut tile = vec![1u32; rank];
    if let Some(k) = (0..rank).rev().find(|&k| k != axis && dims[k] > 1) {
        tile[k] = dims[k].next_power_of_two().min(LINE_TILE) as u32;
    }
    let lines: Vec<usize> = (0..rank).filter(|&k| k != axis).collect();
    let grid: Vec<u64> = lines.iter().map(|&k| dims[k].div_ceil(tile[k] as u64)).collect();
    let mut b = Builder::new(name, if grid.is_empty() || empty { &[1][..] } else { &grid[..] });
    let out_len = node.shape.numel() as u64;
    let out = b.param_init("out", node.dtype, out_len, Access::ReadWrite, Scalar::Int(0, node.dtype));
    let mut args = vec![out_ref];
    let strategy_axes: Vec<(u64, u32, bool)> = (0..rank).map(|k| (dims[k], tile[k], k == axis)).collect();
    // An empty source adds nothing: the program only fills the output.
    if !empty {
        let mut views = vec![];
        for (j, (base, layout)) in operands.iter().enumerate() {
            let buffer = *cx
                .buffer
                .get(base)
                .ok_or_else(|| internal(format!("operand {j} of scatter {n} has no buffer")))?;
            args.push(buffer);
            let bn = &g.nodes[*base];
            let p = b.param(if j == 0 { "index" } else { "src" }, bn.dtype, bn.shape.numel() as u64, Access::Read);
            views.push(b.view(p, &dims, &layout.strides, layout.offset, &tile, Padding::Zero));
        }
        // The output's view addresses the lines; the scatter moves each
        // element along the axis.
        let out_strides = node.shape.contiguous_strides();
        let mut line_dims = dims.clone();
        line_dims[axis] = 1;
        let mut strides: Vec<i64> = out_strides.iter().map(|&s| s as i64).collect();
        strides[axis] = 0;
        let target = b.view(out, &line_dims, &strides, 0, &tile, Padding::Zero);
        let flag = b.param_init("flag", DType::U32, 1, Access::Write, Scalar::Int(0, DType::U32));
        let index_dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let (user_axis, input, index) = crate::graph::op::scatter_report(axis, chunked, out_dims, &index_dims);
        let check = IndexCheck {
            op: "scatter_add",
            axis: user_axis,
            input,
            index,
        };
        args.push(BufferRef::Temp(buffers.len()));
        buffers.push(BufferDecl {
            dtype: DType::U32,
            len: 1,
            kind: BufferKind::Flag(check),
        });
        let grid_of = |k: usize| lines.iter().position(|&l| l == k).map(|p| IndexExpr::grid(p as u8));
        let line_index: Vec<IndexExpr> = (0..rank)
            .map(|k| grid_of(k).unwrap_or(IndexExpr::constant(0)))
            .collect();
        b.loop_(dims[axis], |b, var| {
            let mut at_index = line_index.clone();
            at_index[axis] = IndexExpr::loop_var(var);
            let at = b.load(views[0], &at_index, true);
            let src = b.load(views[1], &at_index, true);
            b.scatter_add(target, &line_index, at, out_strides[axis] as i64, out_dims[axis] as u64, src, flag);
        });
    }
    let program = b.finish()?;
    Ok(vec![(program, args, vec![], Strategy::Tiled { axes: strategy_axes })])
}
