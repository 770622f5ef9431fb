//! Strip-mined chains: a run of elementwise instructions over tiles of one
//! size, with the reductions and accumulator updates that consume them, is
//! run a strip of the tile at a time (every instruction over one strip,
//! then the next strip) instead of one instruction over the whole tile at a
//! time.
//!
//! Over whole tiles each instruction streams its operands through the
//! cache before the next one starts, and a core's memory stream stalls
//! while the instructions that work from the cache run. Over strips of a
//! few KiB the intermediate results never leave L1, and the loads of one
//! strip follow those of the last without a pass in between.
//!
//! A block's [`Step`]s are planned once per execution ([`schedule`]): runs
//! of instructions that qualify become a [`Group`]. Loads, constants and
//! spread broadcasts inside a run are hoisted to its start (they read no
//! value of the run, and the forwarded-store analysis keeps loads away from
//! the memory the run writes). A strip of a tile is a window of its
//! elements: the executor points each tile the chain touches at its strip
//! (`Buf::borrow`), runs the chain's instructions as it runs them over whole
//! tiles, and points the tiles back afterwards. Values used only inside the
//! chain reuse the first strip of their own tile; reductions carry each
//! row's partial results from one strip to the next
//! (`shape_ops::reduce_strip`), giving the same bits as over whole tiles.
//!
//! **Invariant:** a group runs the same instructions on the same elements
//! in the same order per element as the whole-tile interpreter; only the
//! interleaving across elements changes.

mod exec;

use super::analysis::Form;
use super::buffer::{malformed, Borrow, Buf};
use super::{Context, Frame};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::ir::{Inst, LoopId, Program, TileReduce, ValueId};

/// The elements a strip aims at: small enough that a chain's strips stay
/// in L1, large enough that the per-strip dispatch is noise.
pub(super) const STRIP: usize = 512;

/// What a block runs, in order.
pub(super) enum Step<'p> {
    /// One instruction, over whole tiles.
    Inst(&'p Inst),
    /// A loop over its own steps.
    Loop {
        var: LoopId,
        count: u64,
        body: Vec<Step<'p>>,
    },
    /// A chain run strip by strip.
    Strips(Group<'p>),
}

/// A strip-mined chain.
pub(super) struct Group<'p> {
    /// Run first, over whole tiles: loads, constants, iotas, masks and
    /// spread broadcasts of the run, in program order.
    setup: Vec<&'p Inst>,
    /// Run strip by strip, in program order.
    chain: Vec<Link<'p>>,
    /// Elements of each tile of the chain.
    numel: usize,
    /// Elements per strip where the operands' spreads allow it.
    strip: usize,
    /// The chain's elementwise results, and whether each is used only
    /// inside the chain (held a strip at a time).
    results: Vec<(usize, bool)>,
    /// The values the chain reads that it does not compute.
    operands: Vec<usize>,
    /// The accumulators the chain updates.
    accs: Vec<usize>,
}

/// One instruction of a chain.
enum Link<'p> {
    /// Elementwise, or an accumulator update: run as over whole tiles.
    Op(&'p Inst),
    /// A reduction, with the frame's slot of lanes for its partial results.
    Reduce(&'p Inst, usize),
}

/// Which tile a window re-points.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Value(usize),
    Acc(usize),
}

/// How a tile's window moves with the strip.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slide {
    /// The strip's own elements.
    Along,
    /// The first elements of the tile's own buffer, every strip.
    Start,
    /// The source elements a strip of a `Form::Repeat` of this many reads.
    Repeat(usize),
    /// The source elements a strip of a `Form::Cycle` of this period reads.
    Cycle(usize),
}

/// A tile re-pointed at each strip, and what it borrowed before.
pub(super) struct Window {
    target: Target,
    base: *mut u8,
    size: usize,
    slide: Slide,
    writable: bool,
    saved: Borrow,
}

/// What planning needs to know of the whole program.
pub(super) struct Facts<'a> {
    /// Uses of each value anywhere in the program.
    pub uses: Vec<u32>,
    /// Each value's form when it is a spread broadcast.
    pub forms: &'a [Form],
    /// Whether each value is a load that may read one period.
    pub cycle_loads: &'a [bool],
    /// Whether each value is computed into the memory it is stored to.
    pub forwarded: Vec<bool>,
    /// The dtype of each slot of reduction lanes handed out.
    pub lanes: Vec<DType>,
    /// Whether each value is a load, and whether an instruction planned so
    /// far reads it.
    loaded: Vec<bool>,
    read: Vec<bool>,
}

impl Facts<'_> {
    /// The facts of `program`, given the executor's analyses.
    pub fn new<'a>(program: &Program, forms: &'a [Form], cycle_loads: &'a [bool], forwarded: Vec<bool>) -> Facts<'a> {
        let mut uses = vec![0u32; program.values.len()];
        super::for_each_inst(&program.body, &mut |inst| {
            for v in inst.operands() {
                uses[v.index()] += 1;
            }
        });
        Facts {
            uses,
            forms,
            cycle_loads,
            forwarded,
            lanes: Vec::new(),
            loaded: vec![false; program.values.len()],
            read: vec![false; program.values.len()],
        }
    }
}

/// The steps of `body`.
pub(super) fn schedule<'p>(program: &'p Program, body: &'p [Inst], facts: &mut Facts<'_>) -> Vec<Step<'p>> {
    let mut steps = Vec::new();
    let mut open: Option<Run<'p>> = None;
    for inst in body {
        if let Inst::Load { dst, .. } = inst {
            facts.loaded[dst.index()] = true;
        }
        if let Inst::Loop { var, count, body } = inst {
            close(program, open.take(), facts, &mut steps);
            steps.push(Step::Loop {
                var: *var,
                count: *count,
                body: schedule(program, body, facts),
            });
            continue;
        }
        let numel = |v: &ValueId| program.values[v.index()].numel() as usize;
        let chained = match inst {
            Inst::Unary { dst, .. } | Inst::Binary { dst, .. } | Inst::Select { dst, .. } | Inst::Cast { dst, .. } => {
                let n = numel(dst);
                (n > 1 && inst.operands().iter().all(|v| numel(v) == n)).then_some(n)
            }
            Inst::Reduce { op, src, .. } if strip_reduces(*op, program.values[src.index()].dtype) => {
                Some(numel(src)).filter(|&n| n > 1)
            }
            Inst::AccUpdate { acc, src, .. } => {
                let n = numel(src);
                (n > 1 && program.accs[acc.index()].ty.numel() as usize == n).then_some(n)
            }
            _ => None,
        };
        if let Some(n) = chained {
            let joins = open
                .as_ref()
                .is_some_and(|run| run.numel == n && run.may_read(inst, facts.forms));
            if !joins {
                close(program, open.take(), facts, &mut steps);
                open = Some(Run::new(n));
            }
            if let Some(run) = open.as_mut() {
                run.push_link(inst, program, facts);
            }
            continue;
        }
        let hoisted = match (&mut open, inst) {
            (Some(_), Inst::Load { .. } | Inst::Const { .. } | Inst::Scalar { .. }) => true,
            (Some(_), Inst::Iota { .. } | Inst::InBounds { .. }) => true,
            (Some(run), Inst::Broadcast { dst, src }) => {
                facts.forms[dst.index()] != Form::Dense && !run.defines(src.index())
            }
            _ => false,
        };
        if let (true, Some(run)) = (hoisted, open.as_mut()) {
            run.setup.push(inst);
            run.insts.push(inst);
        } else {
            close(program, open.take(), facts, &mut steps);
            for v in inst.operands() {
                facts.read[v.index()] = true;
            }
            steps.push(Step::Inst(inst));
        }
    }
    close(program, open, facts, &mut steps);
    steps
}

/// Whether reductions `op` of `dtype` tiles run strip by strip (the others
/// are refused by the whole-tile reduction, which reports them).
fn strip_reduces(op: TileReduce, dtype: DType) -> bool {
    use DType::*;
    match op {
        TileReduce::Max | TileReduce::Min => matches!(dtype, Bool | U8 | I32 | I64 | U32 | F32 | F64),
        TileReduce::Sum | TileReduce::Prod => matches!(dtype, U8 | I32 | I64 | U32 | F32 | F64),
        TileReduce::LogAddExp => false,
    }
}

/// A run of instructions being gathered into a group.
struct Run<'p> {
    numel: usize,
    /// Every instruction of the run, in program order.
    insts: Vec<&'p Inst>,
    setup: Vec<&'p Inst>,
    chain: Vec<Link<'p>>,
    /// Values the chain computes elementwise, and reductions it makes.
    computed: Vec<usize>,
    reduced: Vec<usize>,
}

impl<'p> Run<'p> {
    fn new(numel: usize) -> Run<'p> {
        Run {
            numel,
            insts: Vec::new(),
            setup: Vec::new(),
            chain: Vec::new(),
            computed: Vec::new(),
            reduced: Vec::new(),
        }
    }

    fn defines(&self, v: usize) -> bool {
        self.computed.contains(&v) || self.reduced.contains(&v)
    }

    /// Whether `inst` may join: it reads no reduction of the run (complete
    /// only after the last strip), and its spread operands spread no value
    /// of the run.
    fn may_read(&self, inst: &Inst, forms: &[Form]) -> bool {
        inst.operands().iter().all(|v| {
            let v = v.index();
            !self.reduced.contains(&v)
                && match forms[v] {
                    Form::Dense => true,
                    Form::Repeat { src, .. } | Form::Cycle { src, .. } => !self.defines(src),
                }
        })
    }

    fn push_link(&mut self, inst: &'p Inst, program: &Program, facts: &mut Facts<'_>) {
        self.insts.push(inst);
        match inst {
            Inst::Reduce { dst, src, .. } => {
                facts.lanes.push(program.values[src.index()].dtype);
                self.chain.push(Link::Reduce(inst, facts.lanes.len() - 1));
                self.reduced.push(dst.index());
            }
            Inst::AccUpdate { .. } => self.chain.push(Link::Op(inst)),
            _ => {
                self.chain.push(Link::Op(inst));
                if let Some(dst) = elementwise_dst(inst) {
                    self.computed.push(dst.index());
                }
            }
        }
    }
}

/// The result of an elementwise instruction.
fn elementwise_dst(inst: &Inst) -> Option<ValueId> {
    match inst {
        Inst::Unary { dst, .. } | Inst::Binary { dst, .. } | Inst::Select { dst, .. } | Inst::Cast { dst, .. } => {
            Some(*dst)
        }
        _ => None,
    }
}

/// Ends a run: a group if it chains at least two instructions over more
/// than one strip and streams a loaded tile from memory, else its
/// instructions one by one.
///
/// A chain that is the first to read a loaded tile (other than a period
/// load, which is one row) reads it from memory, and over strips the next
/// strip's loads follow this one's at once. A chain whose operands are all
/// in the cache already gains little from holding its intermediate results
/// in L1 rather than L2, less than the strips' dispatch costs.
fn close<'p>(program: &Program, run: Option<Run<'p>>, facts: &mut Facts<'_>, steps: &mut Vec<Step<'p>>) {
    let Some(run) = run else { return };
    let strip = strip_length(run.numel, &spreads(program, &run, facts));
    let streams = run.chain.iter().any(|link| {
        let (Link::Op(inst) | Link::Reduce(inst, _)) = link;
        inst.operands().iter().any(|v| {
            let v = v.index();
            facts.loaded[v] && !facts.cycle_loads[v] && !facts.read[v]
        })
    });
    for inst in &run.insts {
        for v in inst.operands() {
            facts.read[v.index()] = true;
        }
    }
    if run.chain.len() < 2 || strip >= run.numel || !streams || whole_tiles() {
        steps.extend(run.insts.into_iter().map(Step::Inst));
        return;
    }
    let mut inside = vec![0u32; program.values.len()];
    let mut operands = Vec::new();
    let mut accs = Vec::new();
    for link in &run.chain {
        let (Link::Op(inst) | Link::Reduce(inst, _)) = link;
        for v in inst.operands() {
            inside[v.index()] += 1;
            if !run.computed.contains(&v.index()) && !operands.contains(&v.index()) {
                operands.push(v.index());
            }
        }
        if let Inst::AccUpdate { acc, .. } = inst {
            if !accs.contains(&acc.index()) {
                accs.push(acc.index());
            }
        }
    }
    let results = run
        .computed
        .iter()
        .map(|&v| (v, inside[v] == facts.uses[v] && !facts.forwarded[v]))
        .collect();
    steps.push(Step::Strips(Group {
        setup: run.setup,
        chain: run.chain,
        numel: run.numel,
        strip,
        results,
        operands,
        accs,
    }));
}

#[cfg(test)]
thread_local! {
    /// Set by tests on the thread that starts an execution to plan no
    /// group: the whole-tile interpretation strips are checked against.
    pub(super) static WHOLE_TILES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn whole_tiles() -> bool {
    #[cfg(test)]
    return WHOLE_TILES.with(|w| w.get());
    #[cfg(not(test))]
    false
}

/// The groups planned for `program`, as (elements per tile, strip) pairs.
#[cfg(test)]
pub(super) fn planned(program: &Program) -> Vec<(usize, usize)> {
    fn collect(steps: &[Step<'_>], out: &mut Vec<(usize, usize)>) {
        for step in steps {
            match step {
                Step::Strips(g) => out.push((g.numel, g.strip)),
                Step::Loop { body, .. } => collect(body, out),
                Step::Inst(_) => {}
            }
        }
    }
    let (forms, cycle_loads) = super::analysis::spread_operands(program);
    let forwarded = super::analysis::forwarded_stores(program)
        .iter()
        .map(Option::is_some)
        .collect();
    let mut facts = Facts::new(program, &forms, &cycle_loads, forwarded);
    let mut out = Vec::new();
    collect(&schedule(program, &program.body, &mut facts), &mut out);
    out
}

/// The run lengths of the spread operands of a run, as far as they are
/// known before it runs (a period load's period is the elements after its
/// leading broadcast axes).
fn spreads(program: &Program, run: &Run<'_>, facts: &Facts<'_>) -> Vec<usize> {
    let mut lengths = Vec::new();
    for link in &run.chain {
        let (Link::Op(inst) | Link::Reduce(inst, _)) = link;
        for v in inst.operands() {
            match facts.forms[v.index()] {
                Form::Repeat { rep: r, .. } | Form::Cycle { period: r, .. } => lengths.push(r),
                Form::Dense if facts.cycle_loads[v.index()] => {
                    let load = run.setup.iter().find_map(|i| match i {
                        Inst::Load { dst, view, .. } if *dst == v => Some(&program.views[view.index()]),
                        _ => None,
                    });
                    if let Some(view) = load {
                        let lead = view
                            .strides
                            .iter()
                            .zip(&view.tile)
                            .take_while(|&(&s, &t)| s == 0 || t == 1)
                            .map(|(_, &t)| t as usize)
                            .product::<usize>();
                        lengths.push(run.numel / lead.max(1));
                    }
                }
                Form::Dense => {}
            }
        }
    }
    lengths
}

/// A strip length near [`STRIP`] that each spread length `r` divides or is
/// divided by (so no strip crosses a run of one source element part way),
/// or `numel` when there is none worth taking.
pub(super) fn strip_length(numel: usize, spreads: &[usize]) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut small = 1usize;
    let mut big = 0usize;
    for &r in spreads.iter().filter(|&&r| r > 0) {
        if r < STRIP {
            small = small / gcd(small, r) * r;
            if small > numel {
                return numel;
            }
        } else {
            big = gcd(big, r);
        }
    }
    let strip = if big == 0 {
        small * (STRIP / small).max(1)
    } else if big % small != 0 {
        numel
    } else {
        let q = big / small;
        let k = (1..=(STRIP / small).max(1)).rev().find(|k| q % k == 0).unwrap_or(1);
        if small * k * 8 < STRIP {
            big
        } else {
            small * k
        }
    };
    strip.min(numel)
}
