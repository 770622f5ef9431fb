//! Emitting the instructions of one kernel: operands, elementwise nodes,
//! reductions (in-tile, looped or split across grid points) and arg
//! reductions.

use super::analysis::{is_arg_reduce, ChainKind, Source};
use super::group::{Group, Space};
use super::lower::{in_group, internal, use_space, Ctx, LoadKey, Window};
use super::plan::IndexCheck;
use super::reduction::{acc_dtype, acc_op, effective, identity, tile_op};
use super::shifted::{shifted_op, Combined, Stats};
use super::tiling::Axis;
use super::TileTarget;
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::graph::Op;
use crate::kernels::ir::{
    AccId, Access, AtomicOp, Builder, IndexExpr, LoopId, ParamId, ScalarId, ScalarKey, TileReduce, ValueId, ValueType,
    ViewId,
};
use crate::ops::{BinaryOp, ReduceOp, ScanOp, ThreadScope, UnaryOp};
use std::collections::{HashMap, HashSet};

/// `log(exp(a) + exp(b))` of float tiles, elementwise: the larger plus
/// `log(1 + exp(-|a - b|))`, an infinite larger one as it is (NaN
/// propagates through the maximum).
fn log_add_exp(b: &mut Builder, x: ValueId, y: ValueId) -> ValueId {
    let ty = b.value_type(x).cloned().expect("operands have types");
    let m = b.binary(BinaryOp::Maximum, x, y);
    let diff = b.binary(BinaryOp::Sub, x, y);
    let far = b.unary(UnaryOp::Abs, diff);
    let far = b.unary(UnaryOp::Neg, far);
    let e = b.unary(UnaryOp::Exp, far);
    let one = b.constant(Scalar::Float(1.0, ty.dtype), ty.dtype, &ty.shape);
    let e = b.binary(BinaryOp::Add, e, one);
    let l = b.unary(UnaryOp::Log, e);
    let r = b.binary(BinaryOp::Add, m, l);
    let mut infinite = None;
    for inf in [f64::INFINITY, f64::NEG_INFINITY] {
        let c = b.constant(Scalar::Float(inf, ty.dtype), ty.dtype, &ty.shape);
        let t = b.binary(BinaryOp::Eq, m, c);
        infinite = Some(match infinite {
            Some(i) => b.binary(BinaryOp::BitOr, i, t),
            None => t,
        });
    }
    b.select(infinite.expect("two tests"), m, r)
}

/// The values visible in the current scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    vals: HashMap<usize, ValueId>,
    loads: HashMap<usize, ValueId>,
    consts: HashMap<(ScalarKey, Space), ValueId>,
    fulls: HashMap<(usize, Space), ValueId>,
    bcasts: HashMap<usize, ValueId>,
    mask: Option<Option<ValueId>>,
}

/// Where the partial result of a reduction split across grid points goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SplitOut {
    /// A plain store of each grid point's partial to this `[P]` view.
    Partials(ViewId),
    /// An atomic add into the result's view (its parameter starts at 0).
    Atomic(ViewId),
}

/// A reduction whose single reduced axis is split across the grid: grid
/// point `p` reduces tiles `p * tiles .. (p + 1) * tiles`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Split {
    /// Tiles per grid point.
    pub tiles: u64,
    /// Where each grid point's result goes.
    pub out: SplitOut,
}

/// How a broadcast operand of a flattened elementwise kernel is read:
/// the element at flat position `i` of the space lies at offset `Σ ((i /
/// inner) mod extent) · stride` over the space's axes (those along which
/// it moves), all below `bound`.
#[derive(Debug, Clone)]
pub(crate) struct FlatRead {
    /// `(inner, extent, stride)` per axis the operand moves along: the
    /// elements of the space inside one step of the axis, its extent, and
    /// the operand's element stride along it.
    pub terms: Vec<(u64, u64, i64)>,
    /// One past the largest offset.
    pub bound: u64,
}

/// How the rows of a column split's partial kernel are shared: point `p`
/// of kept axis `part_axis` reads rows `p * step ..` of reduced axis
/// `axis` (whose extent is the rows each point reads), and counts the
/// first `step` of them, the last point all. Where the parts do not divide
/// the rows, each point's run thus overlaps the next one's first rows,
/// which it reads but does not count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartRows {
    /// The axis of the parts (kept, tile 1).
    pub part_axis: usize,
    /// The reduced axis: the rows of one part.
    pub axis: usize,
    /// The number of parts.
    pub parts: u64,
    /// The rows between the starts of two parts.
    pub step: u64,
}

pub(crate) struct Lowerer<'a> {
    /// The lowering context.
    pub cx: &'a Ctx<'a>,
    /// The group lowered.
    pub group: &'a Group,
    /// The coalesced iteration axes.
    pub axes: Vec<Axis>,
    /// The grid axis of each kept axis.
    pub grid_axis: Vec<Option<u8>>,
    /// The view of each access declared in this program.
    pub views: HashMap<usize, ViewId>,
    /// Whether each access needs masking.
    pub masked: HashMap<usize, bool>,
    /// The access of each out-of-group operand `(node, operand)`.
    pub load_of: HashMap<(usize, usize, usize), usize>,
    /// The access of each stored node.
    pub store_of: HashMap<usize, usize>,
    /// Set for the first kernel of a split reduction.
    pub split: Option<Split>,
    /// Set for the partial kernel of a column split: the reductions whose
    /// values are partials, stored in their accumulation dtype, and after
    /// which nothing runs (their consumers run where the partials combine).
    pub partials: Vec<usize>,
    /// Set for the partial kernel of a column split: how its rows are
    /// shared among the points of the parts axis.
    pub part_rows: Option<PartRows>,
    /// Set for the partial kernel of a split arg reduction: the accesses
    /// its best values and their indices are stored through.
    pub arg_partials: Option<(usize, usize)>,
    /// Set for the partial kernel of a column split: the accesses each
    /// shifted sum's statistics are stored through
    /// ([`Lowerer::shifted_columns`]' order).
    pub shifted_partials: HashMap<usize, Vec<usize>>,
    /// Set where a column split's partials combine: each shifted sum's
    /// combined statistics, from which [`Lowerer::finish`] computes it.
    pub combined: HashMap<usize, Combined>,
    /// The scalar argument of each `Full` node the group reads.
    pub scalars: HashMap<usize, ScalarId>,
    /// Set for a flattened elementwise kernel (one axis over the whole
    /// space): the accesses that broadcast along some axis, each element
    /// read at its own offset, computed from its flat position.
    pub flat_reads: HashMap<usize, FlatRead>,
    /// The window of each piece of a concatenation over the coalesced axes.
    pub piece_windows: HashMap<LoadKey, Window>,
    /// The flag parameter declared for each gather emitted, with what it
    /// reports ([`super::lower::bind_flags`] binds them).
    pub flags: Vec<(ParamId, IndexCheck)>,
    /// Each random node's row-major stride along each coalesced axis.
    pub random_strides: HashMap<usize, Vec<i64>>,
    loop_of: Vec<Option<LoopId>>,
    scope: Scope,
}

impl<'a> Lowerer<'a> {
    /// A lowerer with nothing emitted yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cx: &'a Ctx<'a>,
        group: &'a Group,
        axes: Vec<Axis>,
        grid_axis: Vec<Option<u8>>,
        views: HashMap<usize, ViewId>,
        masked: HashMap<usize, bool>,
        load_of: HashMap<(usize, usize, usize), usize>,
        store_of: HashMap<usize, usize>,
    ) -> Lowerer<'a> {
        let loop_of = vec![None; axes.len()];
        Lowerer {
            cx,
            group,
            axes,
            grid_axis,
            views,
            masked,
            load_of,
            store_of,
            split: None,
            partials: vec![],
            part_rows: None,
            arg_partials: None,
            shifted_partials: HashMap::new(),
            combined: HashMap::new(),
            scalars: HashMap::new(),
            flat_reads: HashMap::new(),
            piece_windows: HashMap::new(),
            flags: vec![],
            random_strides: HashMap::new(),
            loop_of,
            scope: Scope::default(),
        }
    }

    pub(crate) fn space(&self, n: usize) -> Space {
        self.group.shape.space[&n]
    }

    pub(crate) fn tile(&self, space: Space) -> Vec<u32> {
        self.axes
            .iter()
            .map(|a| {
                if a.reduced && space == Space::Reduced {
                    1
                } else {
                    a.tile
                }
            })
            .collect()
    }

    pub(crate) fn index(&self, k: usize, space: Space) -> IndexExpr {
        if let Some(g) = self.grid_axis[k] {
            return IndexExpr::grid(g);
        }
        if !(self.axes[k].reduced && space == Space::Full) {
            return IndexExpr::constant(0);
        }
        let base = match self.split {
            Some(s) => IndexExpr {
                grid: Some((0, s.tiles)),
                ..IndexExpr::constant(0)
            },
            None => IndexExpr::constant(0),
        };
        match self.loop_of[k] {
            Some(var) => base.with_loop(var, 1),
            None => base,
        }
    }

    /// The number of iterations of the loop over reduced axis `k`.
    fn loop_count(&self, k: usize) -> u64 {
        self.split.map_or(self.axes[k].count(), |s| s.tiles)
    }

    fn partition(&self, space: Space) -> Vec<IndexExpr> {
        (0..self.axes.len()).map(|k| self.index(k, space)).collect()
    }

    fn reduced_axes(&self) -> Vec<usize> {
        (0..self.axes.len()).filter(|&k| self.axes[k].reduced).collect()
    }

    /// The body: the group's nodes in order, with loops over reduced axes
    /// that do not fit one tile.
    pub fn body(&mut self, b: &mut Builder) -> Result<()> {
        let g = self.cx.g;
        let nodes = self.group.nodes.clone();
        let empty = self.axes.iter().any(|a| a.reduced && a.extent == 0);
        let looped = self.split.is_some() || self.reduced_axes().iter().any(|&k| self.loop_count(k) > 1);
        if let Some(&n) = nodes.iter().find(|&&n| is_arg_reduce(&g.nodes[n].op)) {
            return self.arg_reduce(b, n, empty);
        }
        if empty {
            for &n in &nodes {
                if self.space(n) == Space::Reduced {
                    let v = match &g.nodes[n].op {
                        Op::Reduce { op, .. } => {
                            let dt = acc_dtype(g.nodes[n].dtype);
                            let id = self.constant(b, identity(effective(*op, g.nodes[n].dtype), dt), Space::Reduced);
                            self.finish_reduce(b, n, id)
                        }
                        _ => self.node(b, n)?,
                    };
                    self.define(b, n, v);
                }
            }
            return Ok(());
        }
        if !looped {
            for &n in &nodes {
                let v = match &g.nodes[n].op {
                    Op::Reduce { op, .. } if op.is_shifted() => {
                        let r = self.shifted_in_tile(b, n, *op)?;
                        self.finish_reduce(b, n, r)
                    }
                    Op::Reduce { op, .. } => {
                        let x = self.operand(b, n, 0)?;
                        let r = self.reduce_tile(b, x, *op, g.nodes[n].dtype);
                        if self.partials.contains(&n) {
                            r
                        } else {
                            self.finish_reduce(b, n, r)
                        }
                    }
                    Op::Scan { op, .. } => {
                        let x = self.operand(b, n, 0)?;
                        self.scan_tile(b, n, *op, x).0
                    }
                    _ if !self.partials.is_empty() && self.space(n) == Space::Reduced => continue,
                    _ => self.node(b, n)?,
                };
                self.define(b, n, v);
            }
            return Ok(());
        }
        // Looped: full-space nodes and reduction updates inside the loops,
        // reduced-space nodes after them. On a GPU the accumulators are
        // whole tiles, updated elementwise in registers, and reduced across
        // the block once after the loops; elsewhere each tile is reduced
        // before it is accumulated.
        let wide = self.cx.opts.target == TileTarget::Gpu;
        let acc_space = if wide { Space::Full } else { Space::Reduced };
        let mut accs: HashMap<usize, AccId> = HashMap::new();
        let mut stats: HashMap<usize, Stats> = HashMap::new();
        for &n in &nodes {
            if let Some(op) = shifted_op(self, n) {
                let s = self.shifted_stats(b, n, op)?;
                stats.insert(n, s);
            } else if let Op::Reduce { op, .. } = &g.nodes[n].op {
                let dt = acc_dtype(g.nodes[n].dtype);
                let ty = ValueType::new(dt, &self.tile(acc_space));
                accs.insert(n, b.acc(ty, identity(effective(*op, g.nodes[n].dtype), dt)));
            }
        }
        // A scan carries the combination of the tiles before along its
        // axis, one element per line of the tile, into each tile's scan.
        let mut carries: HashMap<usize, AccId> = HashMap::new();
        for &n in &nodes {
            if let Op::Scan { op, .. } = &g.nodes[n].op {
                let dt = g.nodes[n].dtype.compute_type();
                let ty = ValueType::new(dt, &self.tile(Space::Reduced));
                let init = match op.reduce() {
                    Some(r) => identity(r, dt),
                    None => Scalar::Float(f64::NEG_INFINITY, dt),
                };
                carries.insert(n, b.acc(ty, init));
            }
        }
        // Rows walked twice: the first walk computes what the reductions
        // read (and stores nothing), the second everything of the full
        // space, with the reduced values, and stores it.
        let two_pass = self.group.shape.two_pass;
        let feeds = if two_pass { self.feeding_reductions() } else { HashSet::new() };
        let mut failure = Ok(());
        self.looped(b, 0, &mut |lw, b| {
            for &n in &nodes {
                let r = match &g.nodes[n].op {
                    _ if two_pass && lw.space(n) == Space::Full => match feeds.contains(&n) {
                        true => lw.node(b, n).map(|v| lw.define_value(n, v)),
                        false => Ok(()),
                    },
                    Op::Scan { op, .. } => lw.operand(b, n, 0).map(|x| {
                        let (s, x) = lw.scan_tile(b, n, *op, x);
                        let carry = carries[&n];
                        let before = b.acc_read(carry);
                        let before = b.broadcast(before, &lw.tile(Space::Full));
                        let dtype = g.nodes[n].dtype;
                        let v = match op.reduce() {
                            Some(r) => {
                                let v = b.binary(acc_op(r), s, before);
                                let total = lw.reduce_tile(b, x, r, dtype);
                                b.acc_update(carry, acc_op(r), total);
                                v
                            }
                            None => {
                                // A running log-sum-exp only grows: the
                                // tile's largest valid value is its last.
                                let v = log_add_exp(b, s, before);
                                let last = lw.reduce_tile(b, v, ReduceOp::Max, dtype);
                                b.acc_update(carry, BinaryOp::Maximum, last);
                                v
                            }
                        };
                        lw.define(b, n, v);
                    }),
                    Op::Reduce { .. } if stats.contains_key(&n) => lw.shifted_update(b, n, stats[&n]),
                    Op::Reduce { op, .. } => lw.operand(b, n, 0).map(|x| {
                        let dtype = g.nodes[n].dtype;
                        let r = if wide {
                            lw.reducible(b, x, *op, dtype)
                        } else {
                            lw.reduce_tile(b, x, *op, dtype)
                        };
                        b.acc_update(accs[&n], acc_op(effective(*op, dtype)), r);
                    }),
                    _ if lw.space(n) == Space::Full => lw.node(b, n).map(|v| lw.define(b, n, v)),
                    _ => Ok(()),
                };
                if r.is_err() {
                    failure = r;
                }
            }
        });
        failure?;
        if let Some(split) = self.split {
            // Each grid point hands its partial on; the consumers run later.
            let (&n, &acc) = accs.iter().next().expect("a split group has one reduction");
            let mut r = b.acc_read(acc);
            if wide {
                r = self.reduce_axes(b, r, n);
            }
            match split.out {
                SplitOut::Partials(v) => b.store(v, &[IndexExpr::grid(0)], r, false),
                SplitOut::Atomic(v) => b.atomic(
                    AtomicOp::Add,
                    v,
                    &[IndexExpr::constant(0)],
                    r,
                    false,
                    ThreadScope::Device,
                ),
            }
            return Ok(());
        }
        for &n in &nodes {
            if let (Some(&s), Some(outs)) = (stats.get(&n), self.shifted_partials.get(&n).cloned()) {
                let index = self.partition(Space::Reduced);
                for (v, out) in self.shifted_columns(b, n, s).into_iter().zip(outs) {
                    b.store(self.views[&out], &index, v, self.masked[&out]);
                }
            } else if let Some(&s) = stats.get(&n) {
                let r = self.shifted_total(b, n, s)?;
                let v = self.finish_reduce(b, n, r);
                self.define(b, n, v);
            } else if let Some(&acc) = accs.get(&n) {
                let mut r = b.acc_read(acc);
                if wide {
                    r = self.reduce_axes(b, r, n);
                }
                let v = if self.partials.contains(&n) {
                    r
                } else {
                    self.finish_reduce(b, n, r)
                };
                self.define(b, n, v);
            } else if self.space(n) == Space::Reduced && self.partials.is_empty() {
                let v = self.node(b, n)?;
                self.define(b, n, v);
            }
        }
        if two_pass {
            let mut failure = Ok(());
            self.looped(b, 0, &mut |lw, b| {
                for &n in &nodes {
                    if lw.space(n) != Space::Full {
                        continue;
                    }
                    if let Err(e) = lw.node(b, n).map(|v| lw.define(b, n, v)) {
                        failure = Err(e);
                    }
                }
            });
            failure?;
        }
        Ok(())
    }

    /// The group's nodes whose values its reductions read, directly or
    /// through other nodes of the group.
    pub(crate) fn feeding_reductions(&self) -> HashSet<usize> {
        let g = self.cx.g;
        let mut feeds = HashSet::new();
        for &n in self.group.nodes.iter().rev() {
            if matches!(g.nodes[n].op, Op::Reduce { .. }) || feeds.contains(&n) {
                for src in self.cx.an.sources(g, n) {
                    if let Source::Chain { base, kind, .. } = src {
                        if in_group(self.group, base, kind) {
                            feeds.insert(base);
                        }
                    }
                }
            }
        }
        feeds
    }

    /// The second kernel of a split reduction: reduces the `count` partials
    /// of `view` (1-D, tiles of `tile`) in order, then runs the group's
    /// reduced-space nodes.
    pub fn combine(&mut self, b: &mut Builder, view: ViewId, count: u64, tile: u32) -> Result<()> {
        let g = self.cx.g;
        let nodes = self.group.nodes.clone();
        let r = *nodes
            .iter()
            .find(|&&n| matches!(g.nodes[n].op, Op::Reduce { .. }))
            .expect("a split group has one reduction");
        let Op::Reduce { op, .. } = g.nodes[r].op else {
            unreachable!()
        };
        let dtype = g.nodes[r].dtype;
        let (op, acc) = (effective(op, dtype), acc_dtype(dtype));
        let tiles = count.div_ceil(tile as u64);
        let part = |b: &mut Builder, index: IndexExpr| {
            let x = b.load(view, &[index], count % tile as u64 != 0);
            let iota = b.iota(&[tile], 0, index);
            let lim = b.constant(Scalar::Int(count as i128, DType::I64), DType::I64, &[tile]);
            let inside = b.binary(BinaryOp::Lt, iota, lim);
            let id = b.constant(identity(op, acc), acc, &[tile]);
            let x = b.select(inside, x, id);
            b.reduce(tile_op(op), x, 0)
        };
        let total = if tiles > 1 {
            let a = b.acc(ValueType::new(acc, &[1]), identity(op, acc));
            b.loop_(tiles, |b, var| {
                let p = part(b, IndexExpr::loop_var(var));
                b.acc_update(a, acc_op(op), p);
            });
            b.acc_read(a)
        } else {
            part(b, IndexExpr::constant(0))
        };
        self.finish(b, &[(r, total)])
    }

    /// Defines each reduction `r` of `totals` from `total`, its combined
    /// value in the accumulation dtype, then runs the group's other
    /// reduced-space nodes (the reductions' consumers), storing what is
    /// stored.
    pub fn finish(&mut self, b: &mut Builder, totals: &[(usize, ValueId)]) -> Result<()> {
        for &(r, total) in totals {
            let v = self.finish_reduce(b, r, total);
            self.define(b, r, v);
        }
        for n in self.group.nodes.clone() {
            if let Some(&c) = self.combined.get(&n) {
                let r = self.shifted_combined(b, n, c)?;
                let v = self.finish_reduce(b, n, r);
                self.define(b, n, v);
            } else if totals.iter().all(|&(r, _)| r != n) && self.space(n) == Space::Reduced {
                let v = self.node(b, n)?;
                self.define(b, n, v);
            }
        }
        Ok(())
    }

    /// Runs `f` inside loops over the reduced axes with several tiles,
    /// starting at reduced axis number `depth`.
    fn looped(&mut self, b: &mut Builder, depth: usize, f: &mut dyn FnMut(&mut Self, &mut Builder)) {
        let loop_axes: Vec<usize> = self
            .reduced_axes()
            .into_iter()
            .filter(|&k| self.loop_count(k) > 1)
            .collect();
        if depth == loop_axes.len() {
            f(self, b);
            return;
        }
        let k = loop_axes[depth];
        let saved = self.scope.clone();
        b.loop_(self.loop_count(k), |b, var| {
            self.loop_of[k] = Some(var);
            self.looped(b, depth + 1, f);
        });
        self.loop_of[k] = None;
        self.scope = saved;
    }

    /// The values visible now, to be restored after values computed for
    /// another tile than the loop's.
    pub(crate) fn scope_snapshot(&self) -> Scope {
        self.scope.clone()
    }

    /// Makes `saved` the visible values again.
    pub(crate) fn restore_scope(&mut self, saved: Scope) {
        self.scope = saved;
    }

    /// Records the value of node `n` without storing it.
    pub(crate) fn define_value(&mut self, n: usize, v: ValueId) {
        self.scope.vals.insert(n, v);
    }

    /// Records the value of node `n` and stores it if needed.
    fn define(&mut self, b: &mut Builder, n: usize, v: ValueId) {
        self.scope.vals.insert(n, v);
        if let Some(&i) = self.store_of.get(&n) {
            let dtype = if self.partials.contains(&n) {
                acc_dtype(self.cx.g.nodes[n].dtype)
            } else {
                self.cx.g.nodes[n].dtype
            };
            let v = self.coerce(b, v, dtype);
            let index = self.partition(self.space(n));
            b.store(self.views[&i], &index, v, self.masked[&i]);
        }
    }

    /// The value of elementwise or copy node `n`.
    pub(crate) fn node(&mut self, b: &mut Builder, n: usize) -> Result<ValueId> {
        let node = &self.cx.g.nodes[n];
        if let Op::Gather { axis, select } = node.op {
            return self.gather(b, n, axis, select);
        }
        let arity = self.cx.an.sources(self.cx.g, n).len();
        let ops = (0..arity).map(|j| self.operand(b, n, j)).collect::<Result<Vec<_>>>()?;
        let compute = node.dtype.compute_type();
        Ok(match &node.op {
            _ if self.cx.an.is_copy(self.cx.g, n) => ops[0],
            Op::Unary(u) => {
                let x = self.coerce(b, ops[0], compute);
                b.unary(*u, x)
            }
            Op::Binary(op) if op.is_comparison() => {
                let (l, r) = (self.dtype_of(b, ops[0]), self.dtype_of(b, ops[1]));
                let dt = l.promote(r).compute_type();
                let (x, y) = (self.coerce(b, ops[0], dt), self.coerce(b, ops[1], dt));
                b.binary(*op, x, y)
            }
            Op::Binary(op) => {
                let (x, y) = (self.coerce(b, ops[0], compute), self.coerce(b, ops[1], compute));
                b.binary(*op, x, y)
            }
            Op::Where => {
                let c = self.coerce(b, ops[0], DType::Bool);
                let (x, y) = (self.coerce(b, ops[1], compute), self.coerce(b, ops[2], compute));
                b.select(c, x, y)
            }
            Op::Cast => self.cast_node(b, ops[0], node.dtype),
            Op::Random => {
                let key = self.coerce(b, ops[0], DType::I64);
                let at = self.position(b, n)?;
                let dt = if node.dtype == DType::F64 {
                    DType::F64
                } else {
                    DType::F32
                };
                let v = b.uniform(at, key, dt, crate::philox::significand_bits(node.dtype) as u8);
                self.coerce(b, v, compute)
            }
            op => return Err(internal("fusion", format!("{} is not computed elementwise", op.name()))),
        })
    }

    /// The value of gather node `n`: its data loaded through the access of
    /// operand 0, each element moved to the position its index holds,
    /// with a flag of its own for positions outside the axis.
    fn gather(&mut self, b: &mut Builder, n: usize, axis: usize, select: bool) -> Result<ValueId> {
        let g = self.cx.g;
        let Source::Chain { layout, .. } = self.cx.an.sources(g, n).swap_remove(0) else {
            return Err(internal("fusion", format!("the data of gather {n} is not in memory")));
        };
        let at = self.operand(b, n, 1)?;
        let i = *self
            .load_of
            .get(&(n, 0, 0))
            .ok_or_else(|| internal("fusion", format!("gather {n} has no access")))?;
        let check = IndexCheck {
            op: if select { "index_select" } else { "gather" },
            axis,
            input: g.nodes[g.nodes[n].inputs[0]].shape.dims().to_vec(),
            index: g.nodes[n].shape.dims().to_vec(),
        };
        let flag = b.param_init(
            format!("f{}", self.flags.len()),
            DType::U32,
            1,
            Access::Write,
            Scalar::Int(0, DType::U32),
        );
        self.flags.push((flag, check));
        let index = self.partition(use_space(g, n, 0, self.space(n)));
        let v = b.gather(
            self.views[&i],
            &index,
            at,
            layout.strides[axis],
            layout.dims[axis] as u64,
            Some(flag),
        );
        let dt = self.dtype_of(b, v);
        Ok(self.coerce(b, v, dt.compute_type()))
    }

    /// The row-major position in random node `n` of each element of its
    /// tile (an i64 tile).
    fn position(&mut self, b: &mut Builder, n: usize) -> Result<ValueId> {
        let space = self.space(n);
        let strides = self
            .random_strides
            .get(&n)
            .cloned()
            .ok_or_else(|| internal("fusion", format!("random node {n} has no strides")))?;
        let shape = self.tile(space);
        let mut at: Option<ValueId> = None;
        for (k, &s) in strides.iter().enumerate().take(self.axes.len()) {
            if s == 0 {
                continue;
            }
            let mut term = b.iota_of(&shape, k as u8, self.index(k, space), DType::I64);
            if s != 1 {
                let c = b.constant(Scalar::Int(s as i128, DType::I64), DType::I64, &shape);
                term = b.binary(BinaryOp::Mul, term, c);
            }
            at = Some(match at {
                Some(a) => b.binary(BinaryOp::Add, a, term),
                None => term,
            });
        }
        Ok(at.unwrap_or_else(|| b.constant(Scalar::Int(0, DType::I64), DType::I64, &shape)))
    }

    /// `v` converted to node dtype `d`, rounded to `d` and held in its compute type.
    fn cast_node(&mut self, b: &mut Builder, v: ValueId, d: DType) -> ValueId {
        if self.dtype_of(b, v).is_float() && d.is_int() && d != DType::I64 {
            // Float to integer truncates into i64, then wraps to the dtype.
            let wide = b.cast(v, DType::I64);
            return b.cast(wide, d);
        }
        if d.compute_type() != d {
            let r = b.cast(v, d);
            b.cast(r, d.compute_type())
        } else {
            self.coerce(b, v, d)
        }
    }

    /// `v` as `dtype` (a cast only if its dtype differs).
    pub(crate) fn coerce(&mut self, b: &mut Builder, v: ValueId, dtype: DType) -> ValueId {
        if self.dtype_of(b, v) == dtype {
            v
        } else {
            b.cast(v, dtype)
        }
    }

    fn dtype_of(&self, b: &Builder, v: ValueId) -> DType {
        b.value_type(v).map_or(DType::Bool, |t| t.dtype)
    }

    /// Operand `j` of node `n`, in the space `n` uses its operands in.
    pub(crate) fn operand(&mut self, b: &mut Builder, n: usize, j: usize) -> Result<ValueId> {
        let space = use_space(self.cx.g, n, j, self.space(n));
        let src = self.cx.an.sources(self.cx.g, n).swap_remove(j);
        match src {
            Source::Const(full) => self.full(b, full, space),
            Source::Chain { base, kind, .. } if in_group(self.group, base, kind) => {
                let v = *self
                    .scope
                    .vals
                    .get(&base)
                    .ok_or_else(|| internal("fusion", format!("node {base} used before it is computed")))?;
                if matches!(kind, ChainKind::Broadcast(_)) && self.space(base) == Space::Reduced && space == Space::Full
                {
                    if let Some(&v) = self.scope.bcasts.get(&base) {
                        return Ok(v);
                    }
                    let shape = self.tile(Space::Full);
                    let w = b.broadcast(v, &shape);
                    self.scope.bcasts.insert(base, w);
                    return Ok(w);
                }
                Ok(v)
            }
            Source::Chain { .. } => self.load(b, (n, j, 0), space),
            Source::Pieces(pieces) => {
                // Each element from the piece whose window holds it: the
                // last piece's value, replaced inside each other window.
                let mut value = None;
                for (i, piece) in pieces.iter().enumerate().rev() {
                    let v = match piece.source {
                        Source::Const(full) => self.full(b, full, space)?,
                        _ => self.load(b, (n, j, i), space)?,
                    };
                    let v = self.coerce(b, v, self.dtype_of(b, v).compute_type());
                    value = Some(match value {
                        None => v,
                        Some(rest) => {
                            let inside = self.inside(b, (n, j, i), space)?;
                            b.select(inside, v, rest)
                        }
                    });
                }
                value.ok_or_else(|| internal("fusion", format!("operand {j} of node {n} joins no pieces")))
            }
        }
    }

    /// The tile of load `key` in `space`, loaded once per scope, in its
    /// compute type.
    fn load(&mut self, b: &mut Builder, key: LoadKey, space: Space) -> Result<ValueId> {
        let i = *self
            .load_of
            .get(&key)
            .ok_or_else(|| internal("fusion", format!("operand {key:?} has no access")))?;
        if let Some(&v) = self.scope.loads.get(&i) {
            return Ok(v);
        }
        let index = self.partition(space);
        let mut v = match self.flat_reads.get(&i).cloned() {
            Some(read) => {
                let at = self.flat_offsets(b, space, &read);
                b.gather(self.views[&i], &index, at, 1, read.bound, None)
            }
            None => b.load(self.views[&i], &index, self.masked[&i]),
        };
        let dt = self.dtype_of(b, v);
        v = self.coerce(b, v, dt.compute_type());
        self.scope.loads.insert(i, v);
        Ok(v)
    }

    /// The offsets of a broadcast operand's elements in a flattened
    /// elementwise kernel ([`FlatRead`]), integers of the tile's shape.
    fn flat_offsets(&mut self, b: &mut Builder, space: Space, read: &FlatRead) -> ValueId {
        let shape = self.tile(space);
        let it = self.axes[0].index_dtype();
        let int = |b: &mut Builder, v: u64| b.constant(Scalar::Int(v as i128, it), it, &shape);
        let flat = b.iota_of(&shape, 0, self.index(0, space), it);
        let total = self.axes[0].extent;
        let mut at: Option<ValueId> = None;
        for &(inner, extent, stride) in &read.terms {
            let mut t = flat;
            if inner > 1 {
                let d = int(b, inner);
                t = b.binary(BinaryOp::Div, t, d);
            }
            // `t mod extent`, unless the axis is the outermost.
            if inner * extent < total {
                let e = int(b, extent);
                let q = b.binary(BinaryOp::Div, t, e);
                let whole = b.binary(BinaryOp::Mul, q, e);
                t = b.binary(BinaryOp::Sub, t, whole);
            }
            if stride != 1 {
                let s = int(b, stride as u64);
                t = b.binary(BinaryOp::Mul, t, s);
            }
            at = Some(match at {
                Some(a) => b.binary(BinaryOp::Add, a, t),
                None => t,
            });
        }
        at.unwrap_or_else(|| int(b, 0))
    }

    /// A bool tile of `space`: which elements lie in the window of piece `key`.
    fn inside(&mut self, b: &mut Builder, key: LoadKey, space: Space) -> Result<ValueId> {
        let (lo, hi) = self
            .piece_windows
            .get(&key)
            .cloned()
            .ok_or_else(|| internal("fusion", format!("piece {key:?} has no window")))?;
        let shape = self.tile(space);
        let mut inside: Option<ValueId> = None;
        for k in 0..self.axes.len() {
            let whole = if self.axes[k].reduced && space == Space::Reduced {
                1
            } else {
                self.axes[k].extent
            };
            if lo[k] == 0 && hi[k] >= whole {
                continue;
            }
            let it = self.axes[k].index_dtype();
            let iota = b.iota_of(&shape, k as u8, self.index(k, space), it);
            for (bound, op) in [(lo[k], BinaryOp::Ge), (hi[k], BinaryOp::Lt)] {
                if (op == BinaryOp::Ge && bound == 0) || (op == BinaryOp::Lt && bound >= whole) {
                    continue;
                }
                let lim = b.constant(Scalar::Int(bound as i128, it), it, &shape);
                let test = b.binary(op, iota, lim);
                inside = Some(match inside {
                    Some(m) => b.binary(BinaryOp::BitAnd, m, test),
                    None => test,
                });
            }
        }
        Ok(match inside {
            Some(m) => m,
            None => b.constant(Scalar::Bool(true), DType::Bool, &shape),
        })
    }

    /// A tile of constant `s` (of a node's dtype) in its compute type.
    fn constant(&mut self, b: &mut Builder, s: Scalar, space: Space) -> ValueId {
        let key = (ScalarKey(s), space);
        if let Some(&v) = self.scope.consts.get(&key) {
            return v;
        }
        let shape = self.tile(space);
        let v = b.constant(s, s.dtype().compute_type(), &shape);
        self.scope.consts.insert(key, v);
        v
    }

    /// The value of `Full` node `full` as a tile of `space`: its scalar
    /// argument, read once per scope.
    fn full(&mut self, b: &mut Builder, full: usize, space: Space) -> Result<ValueId> {
        let key = (full, space);
        if let Some(&v) = self.scope.fulls.get(&key) {
            return Ok(v);
        }
        let Some(&scalar) = self.scalars.get(&full) else {
            return Err(internal(
                "fusion",
                format!("constant node {full} has no scalar argument"),
            ));
        };
        let shape = self.tile(space);
        let v = b.scalar(scalar, &shape);
        self.scope.fulls.insert(key, v);
        Ok(v)
    }

    /// A bool full tile: which elements lie inside the reduced extents, or
    /// `None` when no reduced axis is ragged.
    pub(crate) fn mask(&mut self, b: &mut Builder) -> Option<ValueId> {
        if let Some(m) = self.scope.mask {
            return m;
        }
        let shape = self.tile(Space::Full);
        let mut mask = None;
        let and = |b: &mut Builder, mask: Option<ValueId>, inside: ValueId| {
            Some(match mask {
                Some(m) => b.binary(BinaryOp::BitAnd, m, inside),
                None => inside,
            })
        };
        let overlap = self.part_rows.filter(|pr| self.axes[pr.axis].extent != pr.step);
        for k in self.reduced_axes() {
            if !self.axes[k].ragged() || overlap.is_some_and(|pr| pr.axis == k) {
                continue;
            }
            let it = self.axes[k].index_dtype();
            let iota = b.iota_of(&shape, k as u8, self.index(k, Space::Full), it);
            let lim = b.constant(Scalar::Int(self.axes[k].extent as i128, it), it, &shape);
            let inside = b.binary(BinaryOp::Lt, iota, lim);
            mask = and(b, mask, inside);
        }
        if let Some(pr) = overlap {
            // A part counts its first `step` rows; the last counts them all.
            let int = |b: &mut Builder, v: u64| b.constant(Scalar::Int(v as i128, DType::I64), DType::I64, &shape);
            let row = b.iota(&shape, pr.axis as u8, self.index(pr.axis, Space::Full));
            let part = b.iota(&shape, pr.part_axis as u8, self.index(pr.part_axis, Space::Full));
            let last = int(b, pr.parts - 1);
            let is_last = b.binary(BinaryOp::Eq, part, last);
            let (all, step) = (int(b, self.axes[pr.axis].extent), int(b, pr.step));
            let lim = b.select(is_last, all, step);
            let inside = b.binary(BinaryOp::Lt, row, lim);
            mask = and(b, mask, inside);
        }
        self.scope.mask = Some(mask);
        mask
    }

    /// Reduces full tile `x` over the reduced axes for a node of `dtype`,
    /// in the accumulation dtype; out-of-bounds elements count as the identity.
    pub(crate) fn reduce_tile(&mut self, b: &mut Builder, x: ValueId, op: ReduceOp, dtype: DType) -> ValueId {
        let v = self.reducible(b, x, op, dtype);
        self.reduce_over(b, v, effective(op, dtype))
    }

    /// The in-tile scan of scan node `n` (by `op`) over operand tile `x`,
    /// and `x` in the node's compute dtype. A scan axis of extent 1 is no
    /// axis of the coalesced space: the scan is `x` itself.
    fn scan_tile(&mut self, b: &mut Builder, n: usize, op: ScanOp, x: ValueId) -> (ValueId, ValueId) {
        let x = self.coerce(b, x, self.cx.g.nodes[n].dtype.compute_type());
        let tile = match op.reduce() {
            Some(r) => tile_op(r),
            None => TileReduce::LogAddExp,
        };
        let s = match self.reduced_axes().first() {
            Some(&k) => b.scan(tile, x, k as u8),
            None => x,
        };
        (s, x)
    }

    /// Full tile `x` of a node of `dtype` ready to be reduced by `op`: in the
    /// accumulation dtype, with out-of-bounds elements set to the identity.
    pub(crate) fn reducible(&mut self, b: &mut Builder, x: ValueId, op: ReduceOp, dtype: DType) -> ValueId {
        let op = effective(op, dtype);
        let acc = acc_dtype(dtype);
        let mut v = self.coerce(b, x, dtype.compute_type());
        v = self.coerce(b, v, acc);
        if let Some(m) = self.mask(b) {
            let shape = self.tile(Space::Full);
            let id = b.constant(identity(op, acc), acc, &shape);
            v = b.select(m, v, id);
        }
        v
    }

    /// Reduces `v` by `op` (already effective) over the reduced axes.
    pub(crate) fn reduce_over(&mut self, b: &mut Builder, mut v: ValueId, op: ReduceOp) -> ValueId {
        for k in self.reduced_axes() {
            v = b.reduce(tile_op(op), v, k as u8);
        }
        v
    }

    /// Reduces the whole-tile accumulator value `v` of reduction node `n`
    /// over the reduced axes.
    fn reduce_axes(&mut self, b: &mut Builder, v: ValueId, n: usize) -> ValueId {
        let Op::Reduce { op, .. } = self.cx.g.nodes[n].op else {
            unreachable!("accumulators belong to reductions")
        };
        self.reduce_over(b, v, effective(op, self.cx.g.nodes[n].dtype))
    }

    /// A reduction result in the accumulation dtype as node `n`'s value.
    fn finish_reduce(&mut self, b: &mut Builder, n: usize, r: ValueId) -> ValueId {
        let d = self.cx.g.nodes[n].dtype.compute_type();
        self.coerce(b, r, d)
    }

    /// The elementwise nodes of an arg reduction's group (its input's
    /// chain), in order, computed into the current scope; stored where
    /// needed when `store` (a second pass over the input computes them
    /// again without storing them again).
    fn arg_chain(&mut self, b: &mut Builder, store: bool) -> Result<()> {
        let g = self.cx.g;
        for m in self.group.nodes.clone() {
            if self.space(m) == Space::Full && !matches!(g.nodes[m].op, Op::Reduce { .. }) {
                let v = self.node(b, m)?;
                if store {
                    self.define(b, m, v);
                } else {
                    self.scope.vals.insert(m, v);
                }
            }
        }
        Ok(())
    }

    /// Defines the maximum (minimum) nodes of an arg reduction's group,
    /// siblings over the same input and axis, as the best value `m` (in the
    /// accumulation dtype) the arg reduction found.
    fn arg_siblings(&mut self, b: &mut Builder, n: usize, m: ValueId) {
        let g = self.cx.g;
        for s in self.group.nodes.clone() {
            if s != n && matches!(g.nodes[s].op, Op::Reduce { .. }) {
                let v = self.finish_reduce(b, s, m);
                self.define(b, s, v);
            }
        }
    }

    /// Argmax/argmin `n` of its group, after the elementwise chain of its
    /// input and with its maximum (minimum) siblings (see
    /// [`super::group::GroupShape::of`]): the max (min) first, then the
    /// smallest index holding it (or holding NaN, which counts as both).
    fn arg_reduce(&mut self, b: &mut Builder, n: usize, empty: bool) -> Result<()> {
        let node = &self.cx.g.nodes[n];
        let Op::Reduce { op, .. } = &node.op else {
            unreachable!()
        };
        let red = self.reduced_axes();
        if empty || red.is_empty() {
            let zero = self.constant(b, Scalar::Int(0, DType::I64), Space::Reduced);
            self.define(b, n, zero);
            if !empty {
                // No axis is left to reduce: the best value is the input.
                self.arg_chain(b, true)?;
                let x = self.operand(b, n, 0)?;
                let x = self.coerce(b, x, acc_dtype(self.cx.g.nodes[node.inputs[0]].dtype));
                self.arg_siblings(b, n, x);
            }
            return Ok(());
        }
        let k = red[0];
        let is_max = *op == ReduceOp::ArgMax;
        let (best, best_op) = if is_max {
            (ReduceOp::Max, BinaryOp::Maximum)
        } else {
            (ReduceOp::Min, BinaryOp::Minimum)
        };
        let in_dtype = self.cx.g.nodes[node.inputs[0]].dtype;
        let looped = self.axes[k].count() > 1;
        let dt = acc_dtype(in_dtype);
        let red_shape = self.tile(Space::Reduced);
        if self.cx.opts.target == TileTarget::Gpu && (looped || self.part_rows.is_some()) {
            return self.arg_single_pass(b, n, k, is_max, dt);
        }
        // Pass 1: the best value.
        let m = if looped {
            let acc = b.acc(ValueType::new(dt, &red_shape), identity(best, dt));
            let mut failure = Ok(());
            self.looped(
                b,
                0,
                &mut |lw, b| match lw.arg_chain(b, true).and_then(|()| lw.operand(b, n, 0)) {
                    Ok(x) => {
                        let r = lw.reduce_tile(b, x, best, in_dtype);
                        b.acc_update(acc, best_op, r);
                    }
                    Err(e) => failure = Err(e),
                },
            );
            failure?;
            b.acc_read(acc)
        } else {
            self.arg_chain(b, true)?;
            let x = self.operand(b, n, 0)?;
            self.reduce_tile(b, x, best, in_dtype)
        };
        // Pass 2: the first index where the element equals it or is NaN.
        let first = |lw: &mut Self, b: &mut Builder| -> Result<ValueId> {
            let x = lw.operand(b, n, 0)?;
            let x = lw.coerce(b, x, dt);
            let full = lw.tile(Space::Full);
            let mb = b.broadcast(m, &full);
            let mut hit = b.binary(BinaryOp::Eq, x, mb);
            if dt.is_float() {
                let nan = b.binary(BinaryOp::Ne, x, x);
                hit = b.binary(BinaryOp::BitOr, hit, nan);
            }
            if let Some(mask) = lw.mask(b) {
                hit = b.binary(BinaryOp::BitAnd, hit, mask);
            }
            // Within one tile the indices count in 32 bits (half the
            // registers and shuffles of i64 ones), cast to i64 at the end.
            let it = if looped { DType::I64 } else { DType::I32 };
            let iota = b.iota_of(&full, k as u8, lw.index(k, Space::Full), it);
            let none = b.constant(
                Scalar::Int(if looped { i64::MAX as i128 } else { i32::MAX as i128 }, it),
                it,
                &full,
            );
            let idx = b.select(hit, iota, none);
            let idx = b.reduce(TileReduce::Min, idx, k as u8);
            Ok(if looped { idx } else { b.cast(idx, DType::I64) })
        };
        let idx = if looped {
            let ty = ValueType::new(DType::I64, &red_shape);
            let acc = b.acc(ty, Scalar::Int(i64::MAX as i128, DType::I64));
            let mut failure = Ok(());
            self.looped(
                b,
                0,
                &mut |lw, b| match lw.arg_chain(b, false).and_then(|()| first(lw, b)) {
                    Ok(r) => b.acc_update(acc, BinaryOp::Minimum, r),
                    Err(e) => failure = Err(e),
                },
            );
            failure?;
            b.acc_read(acc)
        } else {
            first(self, b)?
        };
        self.define(b, n, idx);
        self.arg_siblings(b, n, m);
        Ok(())
    }

    /// Arg reduction `n` over reduced axis `k` in one read of its input:
    /// whole-tile accumulators of the best value and its index, updated
    /// element by element, then reduced across the tile ([`arg_pick`]).
    /// In the partial kernel of a column split the indices count from the
    /// part's first row, and the best value and index of each column are
    /// stored as partials instead of the result.
    fn arg_single_pass(&mut self, b: &mut Builder, n: usize, k: usize, is_max: bool, dt: DType) -> Result<()> {
        let full = self.tile(Space::Full);
        let best = if is_max { ReduceOp::Max } else { ReduceOp::Min };
        let offset = self.part_rows.map(|pr| (pr.part_axis, pr.step));
        // Indices count in 32 bits where every one fits (cast to i64 at the end).
        let first_of_last_part = offset.map_or(0, |(pa, step)| (self.axes[pa].extent - 1) * step);
        let it = match self.axes[k].index_dtype() {
            DType::I32 if first_of_last_part + self.axes[k].count() * self.axes[k].tile as u64 <= i32::MAX as u64 => {
                DType::I32
            }
            _ => DType::I64,
        };
        let vacc = b.acc(ValueType::new(dt, &full), identity(best, dt));
        let iacc = b.acc(ValueType::new(it, &full), Scalar::Int(-1, it));
        let mut failure = Ok(());
        self.looped(b, 0, &mut |lw, b| {
            let x = match lw.arg_chain(b, true).and_then(|()| lw.operand(b, n, 0)) {
                Ok(x) => x,
                Err(e) => {
                    failure = Err(e);
                    return;
                }
            };
            let x = lw.coerce(b, x, dt);
            let valid = lw.mask(b);
            let mut j = b.iota_of(&full, k as u8, lw.index(k, Space::Full), it);
            if let Some((pa, step)) = offset {
                let p = b.iota_of(&full, pa as u8, lw.index(pa, Space::Full), it);
                let s = b.constant(Scalar::Int(step as i128, it), it, &full);
                let first = b.binary(BinaryOp::Mul, p, s);
                j = b.binary(BinaryOp::Add, j, first);
            }
            arg_step(b, (vacc, iacc), x, j, valid, is_max, dt);
        });
        failure?;
        let (v, i) = (b.acc_read(vacc), b.acc_read(iacc));
        let (m, idx) = arg_pick(b, v, i, k as u8, is_max, dt);
        let idx = if it == DType::I64 { idx } else { b.cast(idx, DType::I64) };
        match self.arg_partials {
            Some((vi, ii)) => {
                let index = self.partition(Space::Reduced);
                b.store(self.views[&vi], &index, m, self.masked[&vi]);
                b.store(self.views[&ii], &index, idx, self.masked[&ii]);
            }
            None => {
                self.define(b, n, idx);
                self.arg_siblings(b, n, m);
            }
        }
        Ok(())
    }
}

/// One step of a single-pass arg reduction whose accumulators `(values,
/// indices)` see, at each element, indices in increasing order: `x` (in
/// `dt`) at indices `j`, counted where `valid`. The value accumulator keeps
/// the running maximum (minimum), NaN-propagating; the index accumulator
/// the index of the first element holding it (NaN counts as both the
/// maximum and the minimum, so the first NaN wins), and -1 while nothing
/// was counted.
pub(crate) fn arg_step(
    b: &mut Builder,
    (vacc, iacc): (AccId, AccId),
    x: ValueId,
    j: ValueId,
    valid: Option<ValueId>,
    is_max: bool,
    dt: DType,
) {
    let shape = b.value_type(x).map(|t| t.shape.to_vec()).unwrap_or_default();
    let (v, i) = (b.acc_read(vacc), b.acc_read(iacc));
    let better = if dt.is_float() {
        // `x` beats `v` or is NaN (`!(x <= v)`, an unordered comparison),
        // and `v` is a number.
        let no_better = b.binary(if is_max { BinaryOp::Le } else { BinaryOp::Ge }, x, v);
        let beats = b.unary(UnaryOp::Not, no_better);
        let v_number = b.binary(BinaryOp::Eq, v, v);
        b.binary(BinaryOp::BitAnd, beats, v_number)
    } else {
        b.binary(if is_max { BinaryOp::Gt } else { BinaryOp::Lt }, x, v)
    };
    let it = b.value_type(i).map_or(DType::I64, |t| t.dtype);
    let none = b.constant(Scalar::Int(-1, it), it, &shape);
    let fresh = b.binary(BinaryOp::Eq, i, none);
    let mut take = b.binary(BinaryOp::BitOr, better, fresh);
    if let Some(m) = valid {
        take = b.binary(BinaryOp::BitAnd, take, m);
    }
    // A taken index is above every index seen before, so `max` sets it.
    let idx = b.select(take, j, none);
    b.acc_update(iacc, BinaryOp::Maximum, idx);
    let best = if is_max { ReduceOp::Max } else { ReduceOp::Min };
    let x = match valid {
        Some(m) => {
            let id = b.constant(identity(best, dt), dt, &shape);
            b.select(m, x, id)
        }
        None => x,
    };
    b.acc_update(vacc, acc_op(best), x);
}

/// The best value and its first index along `axis` of the tiles `v` and
/// `i` of a single-pass arg reduction ([`arg_step`]): the maximum
/// (minimum), then the smallest counted index holding it or NaN.
pub(crate) fn arg_pick(
    b: &mut Builder,
    v: ValueId,
    i: ValueId,
    axis: u8,
    is_max: bool,
    dt: DType,
) -> (ValueId, ValueId) {
    let shape = b.value_type(v).map(|t| t.shape.to_vec()).unwrap_or_default();
    let m = b.reduce(if is_max { TileReduce::Max } else { TileReduce::Min }, v, axis);
    let mb = b.broadcast(m, &shape);
    let mut hit = b.binary(BinaryOp::Eq, v, mb);
    if dt.is_float() {
        let nan = b.binary(BinaryOp::Ne, v, v);
        hit = b.binary(BinaryOp::BitOr, hit, nan);
    }
    let it = b.value_type(i).map_or(DType::I64, |t| t.dtype);
    let none = b.constant(Scalar::Int(-1, it), it, &shape);
    let counted = b.binary(BinaryOp::Ne, i, none);
    hit = b.binary(BinaryOp::BitAnd, hit, counted);
    let top = if it == DType::I32 {
        i32::MAX as i128
    } else {
        i64::MAX as i128
    };
    let far = b.constant(Scalar::Int(top, it), it, &shape);
    let idx = b.select(hit, i, far);
    (m, b.reduce(TileReduce::Min, idx, axis))
}
