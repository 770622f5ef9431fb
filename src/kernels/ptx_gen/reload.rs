//! A tuning transform: tiles loaded from read-only memory before a
//! reduction are loaded again where they are used after it, instead of
//! being held in registers across it (the schedule of a two-pass row
//! kernel, whose second pass reads the row from cache). Off unless
//! `TILEFUSE_GPU_RELOAD=1` or `TILEFUSE_GPU_STAGE=1` (with which the first
//! load copies the tile to shared memory and both read it there, see
//! `memory.rs`); it changes no result, only which instruction reads the
//! (unchanged) memory.

use crate::kernels::ir::{Access, Inst, Program, ValueId};
use std::collections::HashMap;

/// `program` with the reloads and, for each, the value it loads again and
/// the value it loads it as (`(reload, original)`), or `None` when
/// nothing would change.
pub(super) fn reload_after_reductions(program: &Program) -> Option<(Program, Vec<(ValueId, ValueId)>)> {
    let mut out = program.clone();
    let mut loads: HashMap<ValueId, Inst> = HashMap::new();
    let mut reduced = false;
    let mut reloaded: HashMap<ValueId, ValueId> = HashMap::new();
    let mut body = Vec::with_capacity(program.body.len());
    for inst in &program.body {
        let mut inst = inst.clone();
        if reduced {
            for v in inst.operands_mut() {
                let Some(load) = loads.get(v) else { continue };
                let fresh = *reloaded.entry(*v).or_insert_with(|| {
                    let id = ValueId(out.values.len() as u32);
                    out.values.push(out.values[v.index()].clone());
                    let mut again = load.clone();
                    if let Inst::Load { dst, .. } = &mut again {
                        *dst = id;
                    }
                    body.push(again);
                    id
                });
                *v = fresh;
            }
        }
        match &inst {
            Inst::Load { dst, view, .. }
                if !reduced && program.params[program.views[view.index()].param.index()].access == Access::Read =>
            {
                loads.insert(*dst, inst.clone());
            }
            Inst::Reduce { .. } => reduced = true,
            _ => {}
        }
        body.push(inst);
    }
    if reloaded.is_empty() {
        return None;
    }
    out.body = body;
    Some((out, reloaded.into_iter().map(|(orig, new)| (new, orig)).collect()))
}

/// `program` with every top-level load of a read-only parameter that
/// follows the first reduction, other than the reloads in `reloads`, moved
/// to the start of the body, or `None` when there is none. ptxas does not
/// move loads across a reduction's barriers, so a tile used only after one
/// (a norm's weights) would otherwise make its own round trip once the row
/// statistics are known; at the start it is in flight together with the
/// row. No read-only parameter is written by the kernel, so the loads read
/// the same values wherever they sit, and at the top level a load's index
/// depends only on the grid point. The moved loads are held in registers
/// (they are not reloads, so they are not staged).
pub(super) fn hoist_loads_after_reductions(program: &Program, reloads: &[(ValueId, ValueId)]) -> Option<Program> {
    let first_reduce = program.body.iter().position(|i| matches!(i, Inst::Reduce { .. }))?;
    let moved = |inst: &Inst| match inst {
        Inst::Load { dst, view, .. } => {
            program.params[program.views[view.index()].param.index()].access == Access::Read
                && !reloads.iter().any(|(reload, _)| reload == dst)
        }
        _ => false,
    };
    let (tail_loads, tail): (Vec<Inst>, Vec<Inst>) =
        program.body[first_reduce..].iter().cloned().partition(|i| moved(i));
    if tail_loads.is_empty() {
        return None;
    }
    let mut out = program.clone();
    out.body = tail_loads
        .into_iter()
        .chain(program.body[..first_reduce].iter().cloned())
        .chain(tail)
        .collect();
    Some(out)
}
