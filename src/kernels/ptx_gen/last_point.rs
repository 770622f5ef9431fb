//! The end of a program with a last point: the blocks of a group count
//! themselves out, and the last one runs the body.
//!
//! Every thread makes its stores visible device-wide (`fence.acq_rel.gpu`)
//! and the block waits (`bar.sync`); thread 0 takes a ticket with
//! `atom.acq_rel.gpu.global.inc.u32` on the group's counter with operand
//! `n − 1` (`n` blocks in the group), which wraps the counter back to 0
//! after the last ticket, so it needs zeroing only once. The ticket goes to
//! the other threads through shared memory, between two barriers; the block
//! holding ticket `n − 1` fences again (acquire) and runs the body, whose
//! loads of memory the program writes bypass L1 (`ld.global.cg`, see
//! `memory`). The result does not depend on which block is last: the body
//! reads every block's stores in a fixed order.

use super::emitter::{Class, Emitter};
use crate::error::Result;
use crate::kernels::ir::{Inst, ParamId};

impl Emitter<'_> {
    /// Lowers a last point over grid axis `axis` counting in `counter`.
    pub fn last_point(&mut self, axis: u8, counter: ParamId, body: &[Inst]) -> Result<()> {
        let grid = self.prog.grid.clone();
        let axis = axis as usize;
        let extent = *grid
            .get(axis)
            .ok_or_else(|| self.invalid(format!("a last point over grid axis {axis} that does not exist")))?;
        let base = self
            .params
            .get(counter.index())
            .cloned()
            .ok_or_else(|| self.invalid(format!("counter {counter} is not declared")))?;
        // `.acq_rel` fences and atomics: PTX ISA 6.0, sm_70.
        self.need_version((6, 0));
        self.ticket = true;
        self.comment("last point: publish this block's stores, then take a ticket");
        self.ins("fence.acq_rel.gpu");
        self.ins("bar.sync 0");
        // The group's counter: the other grid coordinates in row-major order.
        let group = self.reg(Class::B64);
        self.ins(format!("mov.u64 {group}, 0"));
        for (k, &e) in grid.iter().enumerate() {
            if k != axis {
                let c = self.grid_coords[k].clone();
                self.ins(format!("mad.lo.u64 {group}, {group}, {e}, {c}"));
            }
        }
        let addr = self.reg(Class::B64);
        self.ins(format!("mad.lo.u64 {addr}, {group}, 4, {base}"));
        let (first, ticket, mine, not_last) = (
            self.reg(Class::Pred),
            self.reg(Class::B32),
            self.reg(Class::B32),
            self.reg(Class::Pred),
        );
        let last = extent - 1;
        let tid = self.tid.clone();
        self.ins(format!("setp.eq.u32 {first}, {tid}, 0"));
        self.ins(format!(
            "@{first} atom.acq_rel.gpu.global.inc.u32 {ticket}, [{addr}], {last}"
        ));
        self.ins(format!("@{first} st.shared.b32 [tf_ticket], {ticket}"));
        self.ins("bar.sync 0");
        self.ins(format!("ld.shared.b32 {mine}, [tf_ticket]"));
        self.ins(format!("setp.ne.u32 {not_last}, {mine}, {last}"));
        self.ins(format!("@{not_last} bra $L_exit"));
        self.comment("the last block of the group: see every block's stores");
        self.ins("fence.acq_rel.gpu");
        self.in_last_point = true;
        self.exchange_reads = Some((0, u32::MAX));
        let done = self.block_of(body);
        self.in_last_point = false;
        done
    }
}
