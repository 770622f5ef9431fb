//! Lowering one group to tile kernel programs.
//!
//! The group's iteration space is coalesced and tiled ([`super::tiling`]);
//! kept axes become grid axes, reduced axes are taken whole (row kernels) or
//! walked by loops that update accumulators. Every operand is loaded through
//! a partition view of its buffer whose strides fold the views in between;
//! every result a later kernel or the caller needs is stored through a
//! row-major view.
//!
//! A full reduction over many tiles is split across grid points: each
//! reduces a fixed run of tiles into a partial, and the point that finishes
//! last (an [`Inst::LastPoint`](crate::kernels::ir::Inst::LastPoint))
//! combines the partials in order and runs the consumers, in the same
//! kernel (deterministic). With `deterministic: false`, a plain sum without
//! consumers instead adds its partials atomically into the result, which
//! starts at zero: one kernel, but the order of the additions varies.

use super::analysis::{is_arg_reduce, ChainKind, Source};
use super::column_split::{column_split, column_split_of};
use super::emit::{FlatRead, Lowerer, Split, SplitOut};
use super::group::{Group, Space};
use super::layout::{map_onto, map_window, Layout};
use super::plan::{BufferDecl, BufferKind, BufferRef, Strategy};
use super::tiling::{choose_tiles, coalesce_in, spread_kept, Axis};
use super::FusionOptions;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::graph::{Op, Subgraph};
use crate::kernels::ir::{Access, Builder, ParamId, Program, ScalarId, ViewId};
use crate::ops::{BinaryOp, Padding, ReduceOp, UnaryOp};
use std::collections::HashMap;

/// What lowering needs to know beyond the group.
pub(crate) struct Ctx<'a> {
    /// The subgraph.
    pub g: &'a Subgraph,
    /// Its analysis.
    pub an: &'a super::analysis::Analysis,
    /// The fusion options.
    pub opts: &'a FusionOptions,
    /// The buffer of every `Data` leaf and every materialised node.
    pub buffer: &'a HashMap<usize, BufferRef>,
}

/// A load or store of the kernel: the buffer of `node` addressed by `layout`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemAccess {
    node: usize,
    layout: Layout,
    pub space: Space,
    /// Whether the access stores.
    pub write: bool,
    /// For a piece of a concatenation, its window over the group's axes:
    /// `layout` then has the operand's extents and addresses the window's
    /// first element at its offset.
    pub window: Option<Window>,
}

/// A box of an index space: first and past-the-end index per axis.
pub(crate) type Window = (Vec<u64>, Vec<u64>);

/// The `(node, operand, piece)` of each load: piece 0 for a plain operand,
/// the piece's position for a piece of a concatenation.
pub(crate) type LoadKey = (usize, usize, usize);

/// The most bytes of a GPU scan's tile, exchanged through shared memory.
const SCAN_TILE_BYTES: u64 = 32 * 1024;

/// The fewest tiles a full reduction needs before it is split.
const MIN_SPLIT_TILES: u64 = 4;

/// A program of a group and what its launch binds: the buffer of each
/// parameter and the `Full` node of each scalar argument.
pub(crate) type Lowered = (Program, Vec<BufferRef>, Vec<usize>, Strategy);

/// Declares a scalar argument of `b` for each `Full` node the group's
/// nodes read, in the order they are first read: the argument of each node,
/// and the nodes in argument order.
pub(crate) fn declare_scalars(cx: &Ctx, b: &mut Builder, group: &Group) -> (HashMap<usize, ScalarId>, Vec<usize>) {
    let mut ids = HashMap::new();
    let mut fulls = vec![];
    for &n in &group.nodes {
        for full in cx.an.sources(cx.g, n).iter().flat_map(Source::consts) {
            ids.entry(full).or_insert_with(|| {
                fulls.push(full);
                b.scalar_param(cx.g.nodes[full].dtype.compute_type())
            });
        }
    }
    (ids, fulls)
}

/// Lowers `group` to the programs (and their arguments) that compute it
/// and store the nodes of `stores`: none when its iteration space is empty,
/// otherwise one (a split reduction appends its partials and counters to
/// `buffers`).
pub(crate) fn lower(
    cx: &Ctx,
    group: &Group,
    stores: &[usize],
    name: &str,
    buffers: &mut Vec<BufferDecl>,
) -> Result<Option<Vec<Lowered>>> {
    for &n in &group.nodes {
        if let Op::ScatterAdd { axis, chunked } = cx.g.nodes[n].op {
            // A scatter nothing reads computes nothing.
            if !stores.contains(&n) {
                return Ok(Some(vec![]));
            }
            return super::scatter::lower_scatter(cx, group, n, (axis, chunked), name, buffers).map(Some);
        }
    }
    let gs = &group.shape;
    let mut accesses: Vec<MemAccess> = vec![];
    let mut add = |a: MemAccess| match accesses.iter().position(|x| *x == a) {
        Some(i) => i,
        None => {
            accesses.push(a);
            accesses.len() - 1
        }
    };
    let mut load_of: HashMap<LoadKey, usize> = HashMap::new();
    let reduced_dims: Vec<usize> = (0..gs.full.len())
        .map(|k| if gs.axes.contains(&k) { 1 } else { gs.full[k] })
        .collect();
    // The window of every piece of a concatenation over the full axes, and
    // the axes they cut (each coalesced with no other, so windows stay boxes).
    let mut piece_windows: HashMap<LoadKey, Window> = HashMap::new();
    let mut cut: Vec<usize> = vec![];
    for &n in &group.nodes {
        for (j, src) in cx.an.sources(cx.g, n).into_iter().enumerate() {
            let space = use_space(cx.g, n, j, gs.space[&n]);
            if let Source::Pieces(pieces) = &src {
                // A piece's strides over the operand's axes, its window there.
                let dims = cx.an.operand_dims(cx.g, n, j).to_vec();
                let over = if space == Space::Full { &gs.full } else { &reduced_dims };
                for (i, piece) in pieces.iter().enumerate() {
                    let end: Vec<usize> = piece.start.iter().zip(&piece.dims).map(|(a, d)| a + d).collect();
                    let window = map_window(&dims, &piece.start, &end, over)
                        .ok_or_else(|| internal(name, format!("a piece of {dims:?} does not fit {over:?}")))?;
                    cut.extend((0..over.len()).filter(|&k| window.0[k] > 0 || window.1[k] < over[k] as u64));
                    piece_windows.insert((n, j, i), window.clone());
                    let Source::Chain { base, layout, .. } = &piece.source else {
                        continue;
                    };
                    let access = MemAccess {
                        node: *base,
                        layout: Layout {
                            dims: dims.clone(),
                            ..layout.clone()
                        },
                        space,
                        write: false,
                        window: Some(window),
                    };
                    load_of.insert((n, j, i), add(access));
                }
            }
            if let Source::Chain { base, layout, kind } = src {
                if !in_group(group, base, kind) {
                    let write = false;
                    let dims = cx.g.nodes[n].shape.dims();
                    let layout = match cx.g.nodes[n].op {
                        Op::Gather { axis, .. } if j == 0 => gathered(&layout, axis, dims),
                        // A random node's seed (one element, in a buffer
                        // when it is an output too) is read by every element.
                        Op::Random => Layout {
                            dims: dims.to_vec(),
                            strides: vec![0; dims.len()],
                            offset: layout.offset,
                        },
                        _ => layout,
                    };
                    load_of.insert(
                        (n, j, 0),
                        add(MemAccess {
                            node: base,
                            layout,
                            space,
                            write,
                            window: None,
                        }),
                    );
                }
            }
        }
    }
    let mut store_of: HashMap<usize, usize> = HashMap::new();
    for &n in stores {
        let layout = Layout::contiguous(&cx.g.nodes[n].shape);
        let space = gs.space[&n];
        store_of.insert(
            n,
            add(MemAccess {
                node: n,
                layout,
                space,
                write: true,
                window: None,
            }),
        );
    }
    // Strides of every access over the full axes, then the coalesced axes.
    let mut strides = vec![];
    for a in &accesses {
        let dims = if a.space == Space::Full {
            &gs.full
        } else {
            &reduced_dims
        };
        let s = map_onto(&a.layout, dims).ok_or_else(|| internal(name, format!("{a:?} does not fit {dims:?}")))?;
        strides.push((s, a.space == Space::Full));
    }
    // Random nodes address their own row-major positions: strides that
    // the coalescing must keep, after the accesses' (which `axis_order`
    // pairs with the accesses).
    let randoms: Vec<usize> = group
        .nodes
        .iter()
        .copied()
        .filter(|&n| matches!(cx.g.nodes[n].op, Op::Random))
        .collect();
    for &n in &randoms {
        let full = gs.space[&n] == Space::Full;
        let dims = if full { &gs.full } else { &reduced_dims };
        let layout = Layout::contiguous(&cx.g.nodes[n].shape);
        let s = map_onto(&layout, dims).ok_or_else(|| internal(name, format!("random node {n} does not fit {dims:?}")))?;
        strides.push((s, full));
    }
    let windows: Vec<Option<Window>> = accesses.iter().map(|a| a.window.clone()).collect();
    let order = axis_order(cx, &gs.full, &accesses, &strides);
    let runs = coalesce_in(&order, &gs.full, &gs.axes, &strides, &cut);
    let random_strides: HashMap<usize, Vec<i64>> = randoms
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let s = &strides[accesses.len() + i].0;
            let per_run: Vec<i64> = runs.iter().map(|run| s[*run.last().expect("runs are not empty")]).collect();
            (n, if per_run.is_empty() { vec![0] } else { per_run })
        })
        .collect();
    let mut axes: Vec<Axis> = runs
        .iter()
        .map(|run| Axis {
            extent: run.iter().map(|&k| gs.full[k] as u64).product(),
            reduced: gs.axes.contains(&run[0]),
            tile: 1,
        })
        .collect();
    // On a GPU the budget is bytes: narrower elements get longer tiles, so
    // each thread still moves several 16-byte vectors.
    let narrowest = accesses
        .iter()
        .map(|a| cx.g.nodes[a.node].dtype.size_in_bytes() as u64)
        .min()
        .unwrap_or(4);
    // A reduction's whole-tile accumulators (up to 8 bytes an element) are
    // exchanged through shared memory once, so its tiles stay at the
    // element budget (a quarter of it with f64 transcendentals, below).
    let reduces = group
        .nodes
        .iter()
        .any(|&n| matches!(cx.g.nodes[n].op, Op::Reduce { .. }));
    // Transcendentals make a kernel issue-bound and hungry for registers:
    // a quarter of the tile keeps more blocks resident and shortens each
    // block's run. Against half the tile, the quarter made bias + GELU, its
    // bf16 form and the chain of three faster (and each one's JIT shorter),
    // as half had made the chain faster than the whole tile before (see
    // `benches/NOTES.md`, v6; v5 for half against the whole tile).
    let transcendental = |n: usize| match cx.g.nodes[n].op {
        Op::Unary(u) => is_transcendental(u),
        // `pow` is a logarithm and an exponential.
        Op::Binary(BinaryOp::Pow) => cx.g.nodes[n].dtype.is_float(),
        // A shifted exponential sum's exponentials (an f64 softmax over a
        // strided axis spilled at the whole tile).
        Op::Reduce {
            op: ReduceOp::ShiftedExpSum,
            ..
        } => true,
        _ => false,
    };
    // In a reduction the quarter is taken for f64 transcendentals (several
    // times the instructions and twice the registers of f32 ones): at the
    // whole element budget a [128, 32] tile with f64 `sin`s spilled 300
    // bytes a thread and made a 10 000-line module.
    let heavy = |n: usize| transcendental(n) && cx.g.nodes[n].dtype == DType::F64;
    let budget = match cx.opts.target {
        super::TileTarget::Gpu if !reduces && gather_chain(cx, group) => (cx.opts.tile_elements as u64 / GATHER_CHAIN_SHARE).max(1),
        super::TileTarget::Gpu if !reduces => {
            let bytes_scaled = cx.opts.tile_elements as u64 * 4 / narrowest.clamp(1, 4);
            if group.nodes.iter().any(|&n| transcendental(n)) {
                (bytes_scaled / 4).max(1)
            } else {
                bytes_scaled
            }
        }
        super::TileTarget::Gpu if group.nodes.iter().any(|&n| heavy(n)) => (cx.opts.tile_elements as u64 / 4).max(1),
        // An arg reduction accumulates a value and an i64 index per element
        // of its tile: half the tile, a quarter for 8-byte values, keeps
        // them in registers at full occupancy.
        super::TileTarget::Gpu if group.nodes.iter().any(|&n| is_arg_reduce(&cx.g.nodes[n].op)) => {
            let wide = group.nodes.iter().any(|&n| {
                let input = cx.g.nodes[n].inputs.first().map(|&i| cx.g.nodes[i].dtype);
                is_arg_reduce(&cx.g.nodes[n].op) && input.is_some_and(|d| d.size_in_bytes() >= 8)
            });
            (cx.opts.tile_elements as u64 / if wide { 4 } else { 2 }).max(1)
        }
        _ => cx.opts.tile_elements as u64,
    };
    // A GPU scan goes through shared memory whole: its tile stays within
    // 32 KiB of the scanned dtype.
    let scanned = group
        .nodes
        .iter()
        .filter(|&&n| matches!(cx.g.nodes[n].op, Op::Scan { .. }))
        // Shared memory holds 4 bytes for each element narrower than that.
        .map(|&n| cx.g.nodes[n].dtype.compute_type().size_in_bytes().max(4) as u64)
        .max();
    let budget = match (cx.opts.target, scanned) {
        (super::TileTarget::Gpu, Some(bytes)) => budget.min(SCAN_TILE_BYTES / bytes.max(1)).max(1),
        _ => budget,
    };
    // Rows walked twice are tiled along the row like any reduction's.
    let whole_rows = gs.broadcast && !gs.two_pass;
    // A block of whole rows loads them, waits at the barriers of their
    // reductions and only then computes and stores what uses them: short
    // rows of 4-byte values or wider take a share of the budget, so that
    // more, smaller blocks reside on an SM and one's loads overlap
    // another's barriers (a longer row is one tile all the same).
    let budget = match cx.opts.target {
        super::TileTarget::Gpu if whole_rows && narrowest >= 4 => budget.min(cx.opts.tile_elements as u64 / ROW_SHARE).max(1),
        _ => budget,
    };
    choose_tiles(&mut axes, budget, whole_rows, 16 / narrowest.clamp(1, 16));
    if cx.opts.target == super::TileTarget::Gpu {
        spread_kept(&mut axes, budget, whole_rows, super::column_split::FEW_POINTS);
    }
    if axes.iter().any(|a| !a.reduced && a.extent == 0) {
        return Ok(Some(vec![]));
    }
    // Per access: coalesced extents, strides, tile, and whether masked.
    let views: Vec<ViewSpec> = accesses
        .iter()
        .zip(&strides)
        .zip(&windows)
        .map(|((a, (s, _)), window)| {
            let full = a.space == Space::Full;
            // A window's bounds on a coalesced axis: those of its one axis
            // (`cut` keeps a cut axis alone).
            let bound = |r: usize, x: &Axis, upper: bool| match window {
                Some((lo, hi)) if runs[r].len() == 1 => {
                    if upper {
                        hi[runs[r][0]]
                    } else {
                        lo[runs[r][0]]
                    }
                }
                _ if upper => x.extent,
                _ => 0,
            };
            let mut v = ViewSpec {
                extents: axes
                    .iter()
                    .map(|x| if x.reduced && !full { 1 } else { x.extent })
                    .collect(),
                upper: match window {
                    Some(_) => axes
                        .iter()
                        .enumerate()
                        .map(|(r, x)| if x.reduced && !full { 1 } else { bound(r, x, true) })
                        .collect(),
                    None => vec![],
                },
                lower: match window {
                    Some(_) => axes
                        .iter()
                        .enumerate()
                        .map(|(r, x)| if x.reduced && !full { 0 } else { bound(r, x, false) })
                        .collect(),
                    None => vec![],
                },
                strides: runs.iter().map(|run| s[*run.last().unwrap()]).collect(),
                tile: axes
                    .iter()
                    .map(|x| if x.reduced && !full { 1 } else { x.tile })
                    .collect(),
                offset: a.layout.offset,
            };
            if axes.is_empty() {
                (v.extents, v.strides, v.tile) = (vec![1], vec![0], vec![1]);
                v.lower.clear();
                v.upper.clear();
            }
            v
        })
        .collect();
    if axes.is_empty() {
        axes.push(Axis {
            extent: 1,
            reduced: false,
            tile: 1,
        });
    }
    let mut grid: Vec<u64> = vec![];
    let mut grid_axis = vec![None; axes.len()];
    for (k, a) in axes.iter().enumerate() {
        if !a.reduced {
            grid_axis[k] = Some(grid.len() as u8);
            grid.push(a.count());
        }
    }
    // The column split recuts its views' axes, which windows do not follow.
    let windowed = !piece_windows.is_empty();
    // The pieces' windows over the coalesced axes, for the emitter's masks.
    let piece_windows: HashMap<LoadKey, Window> = piece_windows
        .into_iter()
        .map(|(key, (lo, hi))| {
            let one = |bound: &[u64], r: &Vec<usize>, whole: u64| if r.len() == 1 { bound[r[0]] } else { whole };
            let lo = runs.iter().map(|r| one(&lo, r, 0)).collect();
            let hi = runs.iter().zip(&axes).map(|(r, x)| one(&hi, r, x.extent)).collect();
            (key, (lo, hi))
        })
        .collect();
    // So do random nodes' positions.
    let windowed = windowed || !randoms.is_empty();
    let gathers = group.nodes.iter().any(|&n| matches!(cx.g.nodes[n].op, Op::Gather { .. }));
    if !reduces && !windowed && !gathers && !gs.scan && !gs.broadcast && cx.opts.target == super::TileTarget::Gpu {
        if let Some(flat) = flat_of(cx, &accesses, &views, &axes) {
            return flat_kernel(cx, group, name, buffers, &accesses, &views, load_of, store_of, flat, budget).map(Some);
        }
    }
    // The statistics of a shifted sum are not split across grid points: a
    // group that would be split is planned again without shifted sums.
    let shifted = group
        .nodes
        .iter()
        .any(|&n| matches!(cx.g.nodes[n].op, Op::Reduce { op, .. } if op.is_shifted()));
    let split = column_split_of(cx, group, stores, &axes);
    // A row of shifted sums split across the grid by the column split
    // below (few long rows, as rows over a unit column).
    let unit: Vec<Axis> = axes
        .iter()
        .copied()
        .chain([Axis {
            extent: 1,
            reduced: false,
            tile: 1,
        }])
        .collect();
    if shifted {
        // Split across the grid, the shifted sums combine their runs'
        // statistics where the column split's partials combine; no other
        // split takes them.
        let whole = matches!(axes[..], [a] if a.reduced && a.count() >= MIN_SPLIT_TILES);
        // (Rows walked twice were judged many enough when grouped.)
        let few_rows = !gs.two_pass
            && matches!(axes[..], [outer, row] if !outer.reduced && row.reduced
            && outer.extent < super::column_split::FEW_POINTS / 2 && row.count() > 1);
        let gpu = cx.opts.target == super::TileTarget::Gpu;
        let rows_split = !windowed && column_split_of(cx, group, stores, &unit).is_some();
        if whole || (gpu && few_rows && !rows_split) || gs.scan || (split.is_some() && windowed) {
            return Ok(None);
        }
    }
    if let Some(cs) = split.filter(|_| !windowed) {
        return column_split(cx, group, name, buffers, &accesses, &views, load_of, store_of, cs).map(Some);
    }
    // Fewer long rows than half the grid points a device wants, reduced
    // along their contiguous axis: the column split cuts them into runs
    // across the grid, with the rows as its outer axis over a column axis
    // of extent 1 (its loads are then one element wide, so rows that fill
    // the device by themselves stay one point each). So is one row reduced
    // whole by an argmax or argmin (an arg reduction over everything),
    // which the full split below does not take.
    let few_rows = match axes[..] {
        [outer, row] => !outer.reduced && row.reduced && outer.extent < super::column_split::FEW_POINTS / 2,
        [row] => row.reduced && group.nodes.iter().any(|&n| is_arg_reduce(&cx.g.nodes[n].op)),
        _ => false,
    };
    if cx.opts.target == super::TileTarget::Gpu && few_rows && !windowed && !group.shape.scan {
        if let Some(cs) = column_split_of(cx, group, stores, &unit) {
            let views: Vec<ViewSpec> = views
                .into_iter()
                .map(|mut v| {
                    v.extents.push(1);
                    v.strides.push(1);
                    v.tile.push(1);
                    v
                })
                .collect();
            return column_split(cx, group, name, buffers, &accesses, &views, load_of, store_of, cs).map(Some);
        }
    }
    let split = split_of(cx, group, stores, &axes);
    let mut out = vec![];
    let Some((parts, tiles, atomic)) = split else {
        let mut b = Builder::new(name, if grid.is_empty() { &[1] } else { &grid });
        b.math(cx.opts.math);
        let all: Vec<usize> = (0..accesses.len()).collect();
        let (vs, masked, mut args) = declare(cx, &mut b, &accesses, &views, &all, None);
        let (scalars, fulls) = declare_scalars(cx, &mut b, group);
        let mut lw = Lowerer::new(cx, group, axes, grid_axis, vs, masked, load_of, store_of);
        lw.scalars = scalars;
        lw.piece_windows = piece_windows.clone();
        lw.random_strides = random_strides.clone();
        let axes = lw.axes.iter().map(|a| (a.extent, a.tile, a.reduced)).collect();
        let looped = lw.axes.iter().any(|a| a.reduced && a.count() > 1);
        let strategy = if gs.two_pass && looped {
            Strategy::RowsTwice { axes }
        } else {
            Strategy::Tiled { axes }
        };
        lw.body(&mut b)?;
        bind_flags(&mut lw, buffers, &mut args);
        out.push((finished(b)?, args, fulls, strategy));
        return Ok(Some(out));
    };
    let atomic_init = if atomic {
        stores.first().map(|&n| (n, reduce_identity(cx.g, n)))
    } else {
        None
    };
    // A split reduction: every point reduces its run of tiles into a partial
    // (or adds it atomically into the result) ...
    let kernel_name = if atomic {
        format!("{name}_partial")
    } else {
        name.to_string()
    };
    let mut b = Builder::new(kernel_name, &[parts]);
    b.math(cx.opts.math);
    let which: Vec<usize> = (0..accesses.len())
        .filter(|&i| !atomic || accesses[i].space == Space::Full || accesses[i].write)
        .collect();
    let (vs, masked, mut args) = declare(cx, &mut b, &accesses, &views, &which, atomic_init);
    let (scalars, fulls) = declare_scalars(cx, &mut b, group);
    let r = *stores.first().filter(|_| atomic).unwrap_or(&group.nodes[0]);
    let pdtype = if atomic {
        cx.g.nodes[r].dtype
    } else {
        partial_dtype(cx.g, group)
    };
    let mut partials = None;
    let out_view = if atomic {
        SplitOut::Atomic(vs[&store_of[&r]])
    } else {
        let p = b.param(format!("t{}", buffers.len()), pdtype, parts, Access::ReadWrite);
        args.push(BufferRef::Temp(buffers.len()));
        buffers.push(BufferDecl::temp(pdtype, parts));
        partials = Some(p);
        SplitOut::Partials(b.view(p, &[parts], &[1], 0, &[1], Padding::Zero))
    };
    let mut lw = Lowerer::new(
        cx,
        group,
        axes.clone(),
        grid_axis.clone(),
        vs.clone(),
        masked.clone(),
        load_of.clone(),
        store_of.clone(),
    );
    lw.split = Some(Split { tiles, out: out_view });
    lw.scalars = scalars.clone();
    lw.piece_windows = piece_windows.clone();
    lw.random_strides = random_strides.clone();
    lw.body(&mut b)?;
    bind_flags(&mut lw, buffers, &mut args);
    // ... then the last point to finish combines the partials in index
    // order and runs the consumers.
    if let Some(p) = partials {
        let counter = last_point_counter(&mut b, buffers, &mut args, 1);
        let tile = (parts.next_power_of_two()).min(cx.opts.tile_elements as u64) as u32;
        let pv = b.view(p, &[parts], &[1], 0, &[tile], Padding::Zero);
        let mut lw = Lowerer::new(cx, group, axes, grid_axis, vs, masked, load_of, store_of);
        lw.scalars = scalars;
        lw.piece_windows = piece_windows.clone();
        lw.random_strides = random_strides.clone();
        let mut combined = Ok(());
        b.last_point(0, counter, |b| combined = lw.combine(b, pv, parts, tile));
        combined?;
        bind_flags(&mut lw, buffers, &mut args);
    }
    out.push((finished(b)?, args, fulls, Strategy::SplitReduction { parts, tiles, atomic }));
    Ok(Some(out))
}

/// The program `b` built, its transcendentals as accurate as its results
/// need ([`Builder::result_accuracy`]: f16/bf16-only results take the
/// shorter sequences).
pub(crate) fn finished(mut b: Builder) -> Result<Program> {
    b.accuracy(b.result_accuracy());
    b.finish()
}

/// Declares the `u32` ticket counters of a last point with `groups` groups:
/// a parameter of `b` and a buffer of kind [`BufferKind::Counters`].
pub(crate) fn last_point_counter(
    b: &mut Builder,
    buffers: &mut Vec<BufferDecl>,
    args: &mut Vec<BufferRef>,
    groups: u64,
) -> ParamId {
    let p = b.param(format!("t{}", buffers.len()), DType::U32, groups, Access::ReadWrite);
    args.push(BufferRef::Temp(buffers.len()));
    buffers.push(BufferDecl {
        dtype: DType::U32,
        len: groups,
        kind: BufferKind::Counters,
    });
    p
}

/// The addressing of a gather's data before each element moves along the
/// gathered axis: the data's layout over the result's extents, with no
/// stride along `axis` (the gather adds the position times that stride).
pub(crate) fn gathered(layout: &Layout, axis: usize, dims: &[usize]) -> Layout {
    let mut strides = layout.strides.clone();
    strides[axis] = 0;
    Layout {
        dims: dims.to_vec(),
        strides,
        offset: if dims.contains(&0) { 0 } else { layout.offset },
    }
}

/// The number of gathers past which an elementwise GPU kernel is a
/// gather chain (a sort's merge pass: a binary search whose every step
/// gathers from the line).
const GATHER_CHAIN: usize = 8;

/// The share of the tile budget a gather chain takes: each element keeps
/// its search's positions and keys (i64 and the key) live through the
/// chain: at the whole budget a sort's merge pass spills to local memory,
/// at a quarter it does not (`benches/NOTES.md`, v42).
const GATHER_CHAIN_SHARE: u64 = 4;

/// The share of the tile budget a GPU kernel of whole rows broadcast back
/// takes where its narrowest operand has 4 bytes or more: a quarter (1024
/// elements at the default 4096) ran softmax, log-softmax and layer norm
/// over short f32 rows faster than half or all of the budget. Rows of
/// 2-byte values (staged through shared memory where their width is odd)
/// keep the whole budget: at a quarter or a half of it most ran slower
/// (`benches/NOTES.md`, v43).
const ROW_SHARE: u64 = 4;

/// Whether `group` gathers more than [`GATHER_CHAIN`] times.
fn gather_chain(cx: &Ctx, group: &Group) -> bool {
    group.nodes.iter().filter(|&&n| matches!(cx.g.nodes[n].op, Op::Gather { .. })).count() > GATHER_CHAIN
}

/// Binds the flags `lw` declared for its gathers: a [`BufferKind::Flag`]
/// buffer each, its argument inserted at the flag parameter's position.
pub(crate) fn bind_flags(lw: &mut Lowerer, buffers: &mut Vec<BufferDecl>, args: &mut Vec<BufferRef>) {
    let mut flags = std::mem::take(&mut lw.flags);
    flags.sort_by_key(|(p, _)| *p);
    for (param, check) in flags {
        args.insert(param.index(), BufferRef::Temp(buffers.len()));
        buffers.push(BufferDecl {
            dtype: DType::U32,
            len: 1,
            kind: BufferKind::Flag(check),
        });
    }
}

/// The coalesced view of one access.
#[derive(Debug, Clone)]
pub(crate) struct ViewSpec {
    /// Extents of the coalesced axes.
    pub extents: Vec<u64>,
    /// Element strides of the coalesced axes.
    pub strides: Vec<i64>,
    /// The tile shape.
    pub tile: Vec<u32>,
    /// The first element (of the window, for a window).
    pub offset: u64,
    /// A window's first index on each axis (empty for a plain view).
    pub lower: Vec<u64>,
    /// A window's past-the-end index on each axis (empty for a plain view).
    pub upper: Vec<u64>,
}

/// Declares the parameters and views of the accesses `which` in `b`; the
/// parameter of `init`'s node starts at its value. Returns the view and
/// masking of each access, and the buffer of each parameter.
pub(crate) fn declare(
    cx: &Ctx,
    b: &mut Builder,
    accesses: &[MemAccess],
    views: &[ViewSpec],
    which: &[usize],
    init: Option<(usize, Scalar)>,
) -> (HashMap<usize, ViewId>, HashMap<usize, bool>, Vec<BufferRef>) {
    let mut nodes: Vec<usize> = vec![];
    for &i in which {
        if !nodes.contains(&accesses[i].node) {
            nodes.push(accesses[i].node);
        }
    }
    let mut params = HashMap::new();
    let mut args = vec![];
    for &node in &nodes {
        let (r, w) = which.iter().fold((false, false), |(r, w), &i| {
            let a = &accesses[i];
            (r || (a.node == node && !a.write), w || (a.node == node && a.write))
        });
        let access = match (r, w) {
            (true, true) => Access::ReadWrite,
            (false, true) => Access::Write,
            _ => Access::Read,
        };
        let n = &cx.g.nodes[node];
        let buf = cx.buffer[&node];
        let pname = match buf {
            BufferRef::Input(k) => format!("in{k}"),
            BufferRef::Temp(k) => format!("t{k}"),
        };
        let len = n.shape.numel() as u64;
        let id = match init {
            Some((m, s)) if m == node => b.param_init(pname, n.dtype, len, access, s),
            _ => b.param(pname, n.dtype, len, access),
        };
        params.insert(node, id);
        args.push(buf);
    }
    let (mut vs, mut masked) = (HashMap::new(), HashMap::new());
    for &i in which {
        let v = &views[i];
        let window = v.lower.iter().any(|&l| l > 0) || v.upper.iter().zip(&v.extents).any(|(u, e)| u < e);
        masked.insert(i, window || v.extents.iter().zip(&v.tile).any(|(&e, &t)| e % t as u64 != 0));
        let p = params[&accesses[i].node];
        let view = if window {
            b.window(p, &v.lower, &v.upper, &v.extents, &v.strides, v.offset, &v.tile, Padding::Zero)
        } else {
            b.view(p, &v.extents, &v.strides, v.offset, &v.tile, Padding::Zero)
        };
        vs.insert(i, view);
    }
    (vs, masked, args)
}

/// The group's one `Reduce` node and its op, or `None` when it has none or
/// several.
pub(crate) fn single_reduce(g: &Subgraph, group: &Group) -> Option<(usize, ReduceOp)> {
    let mut reduces = group.nodes.iter().filter_map(|&n| match g.nodes[n].op {
        Op::Reduce { op, .. } => Some((n, op)),
        _ => None,
    });
    let first = reduces.next()?;
    reduces.next().is_none().then_some(first)
}

/// The order in which a group's iteration axes are walked, outermost
/// first: their logical order, unless the largest operand read over the
/// full space is laid out in another order (a transposed or permuted view),
/// whose order of decreasing strides is then taken, so that the innermost
/// axis of the kernel is the one contiguous in that operand's memory. A
/// reduction through a transposed view thus reads along memory rather than
/// across it. An operand broadcast along an axis (stride 0) keeps the
/// logical order.
fn axis_order(cx: &Ctx, full: &[usize], accesses: &[MemAccess], strides: &[(Vec<i64>, bool)]) -> Vec<usize> {
    let logical: Vec<usize> = (0..full.len()).collect();
    let bytes = |a: &MemAccess| {
        let n = &cx.g.nodes[a.node];
        n.shape.numel() as u64 * n.dtype.size_in_bytes() as u64
    };
    let primary = accesses
        .iter()
        .zip(strides)
        .filter(|(a, _)| !a.write && a.space == Space::Full)
        .max_by_key(|(a, _)| bytes(a));
    let Some((_, (s, _))) = primary else { return logical };
    let moving: Vec<usize> = logical.iter().copied().filter(|&k| full[k] != 1).collect();
    if moving.iter().any(|&k| s[k] == 0) {
        return logical;
    }
    let mut order = moving.clone();
    // Stable: axes of equal stride keep their logical order.
    order.sort_by_key(|&k| std::cmp::Reverse(s[k].unsigned_abs()));
    if order == moving {
        return logical;
    }
    order.extend(logical.iter().copied().filter(|&k| full[k] == 1));
    order
}

/// A flattened elementwise kernel: one axis over the whole space.
struct Flat {
    /// The space's elements.
    total: u64,
    /// The broadcast accesses, each element read at its own offset.
    reads: HashMap<usize, FlatRead>,
}

/// `Some` when an elementwise kernel (on a GPU) reads and writes faster as
/// one flat axis than tiled over its coalesced axes: every access is either
/// dense (row-major and contiguous over the space) or broadcast (a zero
/// stride along some axis, none negative), at least one is dense, and the
/// dense ones move wider atoms flat than tiled. Tiled, a dense operand's
/// rows are `W` elements apart, so its atoms are no wider than the largest
/// power of two dividing `W` (an odd width moves element by element); flat,
/// they are as wide as its offset's alignment allows, up to 16 bytes. The
/// broadcast operands are then read element by element at offsets computed
/// from each element's flat position (they are small or read many times
/// over, so the reads mostly hit the cache).
fn flat_of(cx: &Ctx, accesses: &[MemAccess], views: &[ViewSpec], axes: &[Axis]) -> Option<Flat> {
    if axes.len() < 2 || axes.iter().any(|a| a.reduced) {
        return None;
    }
    let total: u64 = axes.iter().map(|a| a.extent).product();
    // The elements inside one step of each axis.
    let mut inner = vec![1u64; axes.len()];
    for k in (0..axes.len() - 1).rev() {
        inner[k] = inner[k + 1] * axes[k + 1].extent;
    }
    let lowbit = |x: u64| if x == 0 { 16 } else { 1u64 << x.trailing_zeros().min(4) };
    let mut reads = HashMap::new();
    let (mut flat_atom, mut tiled_atom, mut dense) = (16u64, 16u64, false);
    for (i, (a, v)) in accesses.iter().zip(views).enumerate() {
        if a.space != Space::Full || v.strides.len() != axes.len() {
            return None;
        }
        let esize = cx.g.nodes[a.node].dtype.size_in_bytes() as u64;
        let contiguous = v.strides.iter().zip(&inner).all(|(&s, &n)| s == n as i64);
        if contiguous {
            dense = true;
            let atom = (16 / esize.max(1)).min(lowbit(v.offset));
            flat_atom = flat_atom.min(atom);
            tiled_atom = tiled_atom.min(atom.min(lowbit(axes[axes.len() - 1].extent)));
        } else if !a.write && v.strides.contains(&0) && v.strides.iter().all(|&s| s >= 0) {
            let terms: Vec<(u64, u64, i64)> = (0..axes.len())
                .filter(|&k| v.strides[k] != 0)
                .map(|k| (inner[k], axes[k].extent, v.strides[k]))
                .collect();
            let bound = terms.iter().map(|&(_, e, s)| (e - 1) * s as u64).sum::<u64>() + 1;
            reads.insert(i, FlatRead { terms, bound });
        } else {
            return None;
        }
    }
    (dense && flat_atom > tiled_atom).then_some(Flat { total, reads })
}

/// The kernel of a flattened elementwise group ([`flat_of`]).
#[allow(clippy::too_many_arguments)]
fn flat_kernel(
    cx: &Ctx,
    group: &Group,
    name: &str,
    buffers: &mut Vec<BufferDecl>,
    accesses: &[MemAccess],
    views: &[ViewSpec],
    load_of: HashMap<LoadKey, usize>,
    store_of: HashMap<usize, usize>,
    flat: Flat,
    budget: u64,
) -> Result<Vec<Lowered>> {
    let mut axes = [Axis {
        extent: flat.total,
        reduced: false,
        tile: 1,
    }];
    // Each element read by position holds an address of its own: the tile
    // shrinks with the operands so read (an f64 layer norm's normalisation,
    // two of them, spilled at the whole tile).
    choose_tiles(&mut axes, budget / (1 + flat.reads.len() as u64), false, 1);
    let tile = axes[0].tile;
    let views: Vec<ViewSpec> = accesses
        .iter()
        .zip(views)
        .enumerate()
        .map(|(i, (_, v))| ViewSpec {
            extents: vec![flat.total],
            strides: vec![if flat.reads.contains_key(&i) { 0 } else { 1 }],
            tile: vec![tile],
            offset: v.offset,
            lower: vec![],
            upper: vec![],
        })
        .collect();
    let mut b = Builder::new(name, &[axes[0].count()]);
    b.math(cx.opts.math);
    let all: Vec<usize> = (0..accesses.len()).collect();
    let (vs, masked, mut args) = declare(cx, &mut b, accesses, &views, &all, None);
    let (scalars, fulls) = declare_scalars(cx, &mut b, group);
    let mut lw = Lowerer::new(cx, group, axes.to_vec(), vec![Some(0)], vs, masked, load_of, store_of);
    lw.scalars = scalars;
    let strategy = Strategy::Flat {
        total: flat.total,
        tile,
        broadcasts: flat.reads.len(),
    };
    lw.flat_reads = flat.reads;
    lw.body(&mut b)?;
    bind_flags(&mut lw, buffers, &mut args);
    Ok(vec![(finished(b)?, args, fulls, strategy)])
}

/// `Some((grid points, tiles per point, atomic))` when the group is a
/// reduction over one coalesced axis with nothing kept, many tiles long.
fn split_of(cx: &Ctx, group: &Group, stores: &[usize], axes: &[Axis]) -> Option<(u64, u64, bool)> {
    let g = cx.g;
    let (r, op) = single_reduce(g, group)?;
    if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) || group.shape.broadcast || group.shape.scan {
        return None;
    }
    let [axis] = axes else { return None };
    let tiles = axis.count();
    if !axis.reduced || tiles < MIN_SPLIT_TILES {
        return None;
    }
    let target = cx.opts.split_parts;
    let most = tiles.div_ceil(target);
    let per = (1..=most).rev().find(|d| tiles % d == 0).unwrap_or(1);
    let only_result = group.shape.space.iter().all(|(&n, &s)| s == Space::Full || n == r) && stores == [r];
    let dtype = g.nodes[r].dtype;
    let atomic = !cx.opts.deterministic
        && op == ReduceOp::Sum
        && only_result
        && matches!(dtype, DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U32);
    Some((tiles / per, per, atomic))
}

/// The dtype of the partials of a split group's reduction.
fn partial_dtype(g: &Subgraph, group: &Group) -> DType {
    let r = group
        .nodes
        .iter()
        .find(|&&n| matches!(g.nodes[n].op, Op::Reduce { .. }))
        .expect("a split group has one reduction");
    super::reduction::acc_dtype(g.nodes[*r].dtype)
}

/// The identity of reduction node `n` in its own dtype.
fn reduce_identity(g: &Subgraph, n: usize) -> Scalar {
    let Op::Reduce { op, .. } = g.nodes[n].op else {
        unreachable!("only reductions are split")
    };
    super::reduction::identity(op, g.nodes[n].dtype)
}

/// The space in which node `n` (of space `own`) uses its operand `j`: a
/// reduction's or scan's in the full space, but a shifted sum's shift in
/// the reduced space.
pub(crate) fn use_space(g: &Subgraph, n: usize, j: usize, own: Space) -> Space {
    if matches!(g.nodes[n].op, Op::Reduce { op, .. } if op.is_shifted()) && j == 1 {
        Space::Reduced
    } else if matches!(g.nodes[n].op, Op::Reduce { .. } | Op::Scan { .. }) {
        Space::Full
    } else {
        own
    }
}

/// Whether an operand with base `base` reached by `kind` is a value of the group.
pub(crate) fn in_group(group: &Group, base: usize, kind: ChainKind) -> bool {
    kind != ChainKind::Other && group.nodes.contains(&base)
}

/// An error for a group lowering cannot handle (a fusion bug, never bad input).
pub(crate) fn internal(name: &str, reason: String) -> Error {
    Error::InvalidProgram {
        program: name.to_string(),
        reason: format!("fusion could not lower the group: {reason}"),
    }
}

/// Whether `op` costs tens of instructions per element in precise math.
fn is_transcendental(op: UnaryOp) -> bool {
    use UnaryOp::*;
    matches!(
        op,
        Exp | Exp2 | Log | Log2 | Sin | Cos | Tanh | Sigmoid | GeluTanh | GeluErf | Silu
    )
}
