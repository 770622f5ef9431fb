//! Grouping computed nodes into kernels.
//!
//! Nodes are visited in topological order. A node joins the group(s) of the
//! computed nodes its operands come from when the merged group is still one
//! kernel ([`GroupShape::of`]) and the groups stay acyclic; otherwise it
//! joins the largest such group it can, or starts its own. An operand that
//! stays outside the node's group is materialised by its own group, except a
//! cheap one (see [`Analysis::is_cheap`]), which is recomputed in the
//! consumer's group instead. A reduction of data no group computes joins,
//! where it can, a group holding another reduction of the same data (sum
//! and max of one tensor: one kernel, one read).

use super::analysis::{is_arg_reduce, Analysis, ChainKind, Source};
use super::layout::squeeze;
use crate::graph::{Op, ReduceOp, Subgraph};
use std::collections::{BTreeSet, HashMap};

/// Which tile a value of a group lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Space {
    /// The iteration space: the reductions' input shape.
    Full,
    /// The iteration space with the reduced axes of length 1.
    Reduced,
}

/// The iteration space of a group and the space of each of its nodes.
#[derive(Debug, Clone)]
pub(crate) struct GroupShape {
    /// The full iteration shape (the input shape of its reductions).
    pub full: Vec<usize>,
    /// The reduced axes of `full` (empty without a reduction).
    pub axes: Vec<usize>,
    /// The space of each node.
    pub space: HashMap<usize, Space>,
    /// Whether reduced values are broadcast back, so rows must fit one tile
    /// (or be walked twice, `two_pass`).
    pub broadcast: bool,
    /// Whether the broadcast rows are longer than one tile and each grid
    /// point walks its row twice: its reductions over the loop's tiles
    /// first, then, in a second loop, what uses them ([`RowLimits`]).
    pub two_pass: bool,
    /// Whether the group scans along its reduced axis (one axis, walked in
    /// order by each grid point, so never split across points).
    pub scan: bool,
}

impl GroupShape {
    /// The iteration space of `nodes` (sorted), or `None` when they cannot
    /// form one kernel: reductions over different spaces, shapes that fit
    /// neither space, an in-group operand through a view that is neither
    /// trivial nor a broadcast of a reduced value, or a broadcast back whose
    /// rows fit neither one tile nor a second pass ([`RowLimits`]).
    pub fn of(g: &Subgraph, an: &Analysis, nodes: &[usize], limits: RowLimits) -> Option<GroupShape> {
        let max_row_tile = limits.max_row_tile;
        // A scatter is a kernel of its own (`scatter.rs`).
        if nodes.len() > 1 && nodes.iter().any(|&n| matches!(g.nodes[n].op, Op::ScatterAdd { .. })) {
            return None;
        }
        let reduces: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&n| matches!(g.nodes[n].op, Op::Reduce { .. }))
            .collect();
        // A scan shapes the group like a reduction over its axis whose
        // result keeps the full space.
        let scans: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&n| matches!(g.nodes[n].op, Op::Scan { .. }))
            .collect();
        let axes_of = |n: usize| match &g.nodes[n].op {
            Op::Reduce { axes, .. } => axes.to_vec(),
            Op::Scan { axis, .. } => vec![*axis],
            _ => unreachable!("only reductions and scans have axes"),
        };
        let (full, axes) = match reduces.first().or(scans.first()) {
            Some(&r) => (g.nodes[g.nodes[r].inputs[0]].shape.dims().to_vec(), axes_of(r)),
            None => (g.nodes[*nodes.last()?].shape.dims().to_vec(), vec![]),
        };
        for &r in reduces.iter().chain(&scans) {
            if g.nodes[g.nodes[r].inputs[0]].shape.dims() != full.as_slice() || axes_of(r) != axes {
                return None;
            }
        }
        // An arg reduction shares its kernel only with the elementwise
        // chain of its input and with maxima (minima) of that same input
        // (`max_with_indices`), whose value it finds anyway; nothing runs
        // after it in the kernel, nor anything else in the reduced space.
        let arg = reduces.iter().copied().find(|&r| is_arg_reduce(&g.nodes[r].op));
        if let Some(a) = arg {
            let Op::Reduce { op: arg_op, .. } = g.nodes[a].op else {
                unreachable!()
            };
            let best = if arg_op == ReduceOp::ArgMax { ReduceOp::Max } else { ReduceOp::Min };
            let siblings = reduces.iter().filter(|&&r| r != a).all(|&r| {
                matches!(g.nodes[r].op, Op::Reduce { op, .. } if op == best)
                    && g.nodes[r].inputs[0] == g.nodes[a].inputs[0]
            });
            let consumers = nodes.iter().any(|&n| {
                !matches!(g.nodes[n].op, Op::Reduce { .. })
                    && an.sources(g, n).iter().any(|s| matches!(s, Source::Chain { base, .. } if reduces.contains(base)))
            });
            if !siblings || consumers || !scans.is_empty() {
                return None;
            }
        }
        let arg_group = arg.is_some();
        let reduced: Vec<usize> = (0..full.len())
            .map(|k| if axes.contains(&k) { 1 } else { full[k] })
            .collect();
        let (sq_full, sq_red) = (squeeze(&full), squeeze(&reduced));
        let same_tiles = sq_full == sq_red;
        let mut gs = GroupShape {
            full,
            axes,
            space: HashMap::new(),
            broadcast: false,
            two_pass: false,
            scan: !scans.is_empty(),
        };
        let set: BTreeSet<usize> = nodes.iter().copied().collect();
        // Nodes that use a reduced value (through any chain of nodes), and
        // whether a reduction does: then the reductions are of two levels.
        let mut after: BTreeSet<usize> = BTreeSet::new();
        let mut two_levels = false;
        for &n in nodes {
            let node = &g.nodes[n];
            let mut wanted: Vec<Space> = vec![];
            for (j, src) in an.sources(g, n).into_iter().enumerate() {
                // A concatenation's pieces and a gather's data are read
                // from memory, so they are computed by kernels before this one.
                let from_memory = matches!(src, Source::Pieces(_)) || (j == 0 && matches!(node.op, Op::Gather { .. }));
                if from_memory && src.bases().iter().any(|b| set.contains(b)) {
                    return None;
                }
                let Source::Chain { base, kind, .. } = src else {
                    continue;
                };
                if !set.contains(&base) {
                    continue;
                }
                let have = gs.space[&base];
                // A shifted sum's shift is a value of the reduced space,
                // used there (after the pass over the reduced axes).
                if j == 1 && matches!(node.op, Op::Reduce { op, .. } if op.is_shifted()) {
                    if have != Space::Reduced || kind != ChainKind::Trivial {
                        return None;
                    }
                    continue;
                }
                if have == Space::Reduced || after.contains(&base) {
                    after.insert(n);
                    two_levels |= matches!(node.op, Op::Reduce { .. });
                }
                match kind {
                    ChainKind::Trivial => wanted.push(have),
                    ChainKind::Broadcast(e) if have == Space::Reduced && !is_arg_reduce(&node.op) => {
                        if !gs.broadcast_matches(g, e) {
                            return None;
                        }
                        gs.broadcast = true;
                        wanted.push(Space::Full);
                    }
                    _ => return None,
                }
            }
            let sq = squeeze(node.shape.dims());
            let space = if matches!(node.op, Op::Reduce { .. }) {
                if wanted.iter().any(|&s| s != Space::Full) && !same_tiles {
                    return None;
                }
                Space::Reduced
            } else if matches!(node.op, Op::Scan { .. }) {
                if wanted.iter().any(|&s| s != Space::Full) && !same_tiles {
                    return None;
                }
                Space::Full
            } else if wanted.is_empty() {
                if sq == sq_full {
                    Space::Full
                } else if sq == sq_red {
                    Space::Reduced
                } else {
                    return None;
                }
            } else {
                let s = if wanted.contains(&Space::Reduced) {
                    Space::Reduced
                } else {
                    Space::Full
                };
                if !same_tiles && wanted.iter().any(|&w| w != s) {
                    return None;
                }
                let expect = if s == Space::Full { &sq_full } else { &sq_red };
                if &sq != expect {
                    return None;
                }
                s
            };
            // The kernel of an arg reduction computes nothing in the
            // reduced space but its reductions.
            if arg_group && space == Space::Reduced && !matches!(node.op, Op::Reduce { .. }) {
                return None;
            }
            gs.space.insert(n, space);
        }
        if gs.broadcast {
            let mut row = 1usize;
            for &a in &gs.axes {
                if gs.full[a] == 0 {
                    return None;
                }
                row = row.saturating_mul(gs.full[a].next_power_of_two());
            }
            // Rows longer than `STRIDED_ROW_TILE` are only taken whole along
            // the trailing axes where those are the contiguous ones: they
            // reduce in registers. Where the reduced axes are strided (the
            // contiguous axis kept), the tile holds whole rows of a 32-wide
            // piece of the contiguous axis, so that its loads read whole
            // lines, and is reduced across its rows through shared memory.
            let trailing = (0..gs.full.len())
                .rev()
                .filter(|&k| gs.full[k] != 1)
                .take(gs.axes.iter().filter(|&&a| gs.full[a] != 1).count())
                .all(|k| gs.axes.contains(&k));
            let mut strided = !trailing;
            if let Some(k) = contiguous_axis(g, an, nodes, &gs.full).filter(|k| !gs.axes.contains(k)) {
                row = row.saturating_mul(gs.full[k].next_power_of_two().min(super::tiling::WHOLE_LINE as usize));
                strided = true;
            }
            let limit = if strided {
                max_row_tile.min(STRIDED_ROW_TILE)
            } else {
                max_row_tile
            };
            // The limits are in 4-byte elements: half for 8-byte values.
            let widest = nodes
                .iter()
                .map(|&n| g.nodes[n].dtype.compute_type().size_in_bytes())
                .max()
                .unwrap_or(4);
            if row > limit * 4 / widest.max(4) {
                // Walked twice: one level of reductions over trailing axes
                // of rows many enough to fill the device one a point, and
                // short enough that the second walk reads them from L2.
                let rows: usize = (0..gs.full.len())
                    .filter(|k| !gs.axes.contains(k))
                    .map(|k| gs.full[k])
                    .product();
                let elements: usize = gs.axes.iter().map(|&a| gs.full[a]).product();
                let bytes = elements as u64 * read_bytes(g, an, nodes, &gs.full);
                if strided || two_levels || gs.scan || arg_group || (rows as u64) < limits.two_pass_rows || bytes > limits.reread_row_bytes {
                    return None;
                }
                gs.two_pass = true;
            }
        }
        Some(gs)
    }

    /// Whether `Expand` node `e` broadcasts a reduced value of this group
    /// back along exactly the reduced axes.
    fn broadcast_matches(&self, g: &Subgraph, e: usize) -> bool {
        let out = g.nodes[e].shape.dims();
        let input = g.nodes[g.nodes[e].inputs[0]].shape.dims();
        if squeeze(out) != squeeze(&self.full) {
            return false;
        }
        // Positions (among non-1 axes) of the broadcast axes of `e` and of the
        // reduced axes of the group must coincide.
        let bcast: Vec<usize> = out
            .iter()
            .enumerate()
            .filter(|&(_, &d)| d != 1)
            .enumerate()
            .filter(|&(_, (k, _))| input[k] == 1)
            .map(|(pos, _)| pos)
            .collect();
        let reduced: Vec<usize> = self
            .full
            .iter()
            .enumerate()
            .filter(|&(_, &d)| d != 1)
            .enumerate()
            .filter(|&(_, (k, _))| self.axes.contains(&k))
            .map(|(pos, _)| pos)
            .collect();
        bcast == reduced
    }
}

/// What rows [`GroupShape::of`] takes whole in a tile, or walks twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowLimits {
    /// [`super::FusionOptions::max_row_tile`].
    pub max_row_tile: usize,
    /// [`super::FusionOptions::reread_row_bytes`].
    pub reread_row_bytes: u64,
    /// [`super::FusionOptions::two_pass_rows`].
    pub two_pass_rows: u64,
}

/// The widest element (in bytes) `nodes` read over the full space `full`
/// from outside them: what a row of the input takes in memory.
fn read_bytes(g: &Subgraph, an: &Analysis, nodes: &[usize], full: &[usize]) -> u64 {
    nodes
        .iter()
        .flat_map(|&n| an.sources(g, n))
        .filter_map(|src| match src {
            Source::Chain { base, layout, .. } if !nodes.contains(&base) => {
                super::layout::map_onto(&layout, full).map(|_| g.nodes[base].dtype.size_in_bytes() as u64)
            }
            _ => None,
        })
        .max()
        .unwrap_or(4)
}

/// The most elements (of 4 bytes) of a row kernel's tile whose rows run
/// along a strided axis: 32 KiB, exchanged through shared memory once.
const STRIDED_ROW_TILE: usize = 8192;

/// The axis of iteration space `full` along which the largest operand
/// `nodes` read over the full space from outside them has its smallest
/// nonzero stride (the one contiguous in its memory), if any.
fn contiguous_axis(g: &Subgraph, an: &Analysis, nodes: &[usize], full: &[usize]) -> Option<usize> {
    let mut best: Option<(usize, Vec<i64>)> = None;
    for &n in nodes {
        for src in an.sources(g, n) {
            let Source::Chain { base, layout, .. } = src else { continue };
            if nodes.contains(&base) {
                continue;
            }
            let Some(strides) = super::layout::map_onto(&layout, full) else {
                continue;
            };
            let size = g.nodes[base].shape.numel();
            if !best.as_ref().is_some_and(|(s, _)| size <= *s) {
                best = Some((size, strides));
            }
        }
    }
    let (_, strides) = best?;
    (0..full.len())
        .filter(|&k| full[k] > 1 && strides[k] != 0)
        .min_by_key(|&k| strides[k].unsigned_abs())
}

/// A kernel-to-be: the computed nodes it evaluates.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// Every node computed in the kernel, sorted (recomputed cheap nodes included).
    pub nodes: Vec<usize>,
    /// The nodes this group is responsible for storing when they are needed
    /// elsewhere (every node of `nodes` that is not a recomputed copy).
    pub home: Vec<usize>,
    /// Its iteration space.
    pub shape: GroupShape,
}

/// Groups the computed nodes of `g` and returns the groups in an order in
/// which every group comes after the groups whose results it loads.
pub(crate) fn group(g: &Subgraph, an: &Analysis, limits: RowLimits) -> Vec<Group> {
    let mut sets: Vec<Option<(BTreeSet<usize>, BTreeSet<usize>)>> = vec![];
    let mut home: Vec<Option<usize>> = vec![None; g.nodes.len()];
    let legal = |sets: &[Option<(BTreeSet<usize>, BTreeSet<usize>)>], home: &[Option<usize>], k: usize| {
        let nodes: Vec<usize> = sets[k].as_ref().unwrap().0.iter().copied().collect();
        GroupShape::of(g, an, &nodes, limits).is_some() && acyclic(g, an, sets, home)
    };
    for n in 0..g.nodes.len() {
        if !an.computed[n] {
            continue;
        }
        let sources = an.sources(g, n);
        let mut cands: Vec<usize> = vec![];
        for s in &sources {
            if let Source::Chain { base, kind, .. } = s {
                if let (Some(h), false) = (home[*base], *kind == ChainKind::Other) {
                    if !cands.contains(&h) {
                        cands.push(h);
                    }
                }
            }
        }
        // A reduction of inputs no group computes (a sibling of another
        // reduction of the same data) may join a group that reads the same
        // data, so the two share one read of it.
        if cands.is_empty() && matches!(g.nodes[n].op, Op::Reduce { .. }) {
            let leaves: Vec<usize> = sources
                .iter()
                .filter_map(|s| match s {
                    Source::Chain { base, .. } if !an.computed[*base] => Some(*base),
                    _ => None,
                })
                .collect();
            for (k, set) in sets.iter().enumerate() {
                let Some((nodes, _)) = set else { continue };
                let reads = nodes.iter().any(|&m| {
                    matches!(g.nodes[m].op, Op::Reduce { .. })
                        && an.sources(g, m).iter().any(
                            |s| matches!(s, Source::Chain { base, .. } if leaves.contains(base)),
                        )
                });
                if reads && !cands.contains(&k) {
                    cands.push(k);
                }
            }
        }
        cands.sort_by_key(|&c| std::cmp::Reverse(sets[c].as_ref().unwrap().0.len()));
        let mut options: Vec<Vec<usize>> = vec![];
        if cands.len() > 1 {
            options.push(cands.clone());
        }
        options.extend(cands.iter().map(|&c| vec![c]));
        let mut joined = None;
        for opt in options {
            let (saved_sets, saved_home) = (sets.clone(), home.clone());
            let k = merge(&mut sets, &mut home, &opt, n);
            if legal(&sets, &home, k) {
                joined = Some(k);
                break;
            }
            sets = saved_sets;
            home = saved_home;
        }
        let k = joined.unwrap_or_else(|| {
            sets.push(Some(([n].into(), [n].into())));
            home[n] = Some(sets.len() - 1);
            sets.len() - 1
        });
        // Cheap operands from other groups are recomputed here.
        for s in &sources {
            if let Source::Chain {
                base,
                kind: ChainKind::Trivial,
                ..
            } = s
            {
                let inside = sets[k].as_ref().unwrap().0.contains(base);
                if an.computed[*base] && !inside && an.is_cheap(g, *base) {
                    sets[k].as_mut().unwrap().0.insert(*base);
                    if !legal(&sets, &home, k) {
                        sets[k].as_mut().unwrap().0.remove(base);
                    }
                }
            }
        }
    }
    let live: Vec<usize> = (0..sets.len()).filter(|&k| sets[k].is_some()).collect();
    let order = topo_order(g, an, &sets, &home, &live);
    order
        .into_iter()
        .map(|k| {
            let (nodes, homed) = sets[k].clone().unwrap();
            let nodes: Vec<usize> = nodes.into_iter().collect();
            let shape = GroupShape::of(g, an, &nodes, limits).expect("groups are checked when formed");
            Group {
                nodes,
                home: homed.into_iter().collect(),
                shape,
            }
        })
        .collect()
}

type Sets = [Option<(BTreeSet<usize>, BTreeSet<usize>)>];

/// Merges the groups `which` and node `n` into the first of them.
fn merge(
    sets: &mut [Option<(BTreeSet<usize>, BTreeSet<usize>)>],
    home: &mut [Option<usize>],
    which: &[usize],
    n: usize,
) -> usize {
    let k = which[0];
    for &o in &which[1..] {
        let (nodes, homed) = sets[o].take().unwrap();
        for &h in &homed {
            home[h] = Some(k);
        }
        let target = sets[k].as_mut().unwrap();
        target.0.extend(nodes);
        target.1.extend(homed);
    }
    let target = sets[k].as_mut().unwrap();
    target.0.insert(n);
    target.1.insert(n);
    home[n] = Some(k);
    k
}

/// The groups each group loads from: for each node of a group, the home
/// groups of computed operands it does not compute itself.
fn dependencies(g: &Subgraph, an: &Analysis, sets: &Sets, home: &[Option<usize>], k: usize) -> BTreeSet<usize> {
    let mut deps = BTreeSet::new();
    let (nodes, _) = sets[k].as_ref().unwrap();
    for &n in nodes {
        for base in an.sources(g, n).iter().flat_map(Source::bases) {
            if an.computed[base] && !nodes.contains(&base) {
                if let Some(h) = home[base] {
                    if h != k {
                        deps.insert(h);
                    }
                }
            }
        }
    }
    deps
}

/// Whether the group dependency graph has no cycle.
fn acyclic(g: &Subgraph, an: &Analysis, sets: &Sets, home: &[Option<usize>]) -> bool {
    let live: Vec<usize> = (0..sets.len()).filter(|&k| sets[k].is_some()).collect();
    topo_order(g, an, sets, home, &live).len() == live.len()
}

/// The live groups in dependency order (Kahn's algorithm, smallest first
/// node first); shorter than `live` when there is a cycle.
fn topo_order(g: &Subgraph, an: &Analysis, sets: &Sets, home: &[Option<usize>], live: &[usize]) -> Vec<usize> {
    let deps: HashMap<usize, BTreeSet<usize>> = live.iter().map(|&k| (k, dependencies(g, an, sets, home, k))).collect();
    let first = |k: usize| *sets[k].as_ref().unwrap().0.iter().next().unwrap();
    let mut done: BTreeSet<usize> = BTreeSet::new();
    let mut order = vec![];
    loop {
        let next = live
            .iter()
            .copied()
            .filter(|k| !done.contains(k) && deps[k].iter().all(|d| done.contains(d)))
            .min_by_key(|&k| first(k));
        match next {
            Some(k) => {
                done.insert(k);
                order.push(k);
            }
            None => return order,
        }
    }
}
