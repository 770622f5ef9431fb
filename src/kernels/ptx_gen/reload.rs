//! A tuning transform: tiles loaded from read-only memory before a
//! reduction are loaded again where they are used after it, instead of
//! being held in registers across it (the schedule of a two-pass row
//! kernel, whose second pass reads the row from cache). Applied under
//! `CodegenConfig::reload` or `CodegenConfig::stage` (on by default; with
//! it the first load copies the tile to shared memory and both read it
//! there, see `memory.rs`); it changes no result, only which instruction
//! reads the (unchanged) memory.

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
