//! Persistent row kernels: a grid of as many blocks as the GPU holds at
//! once, each running grid point after grid point
//! (`point = ctaid.x, ctaid.x + nctaid.x, …`).
//!
//! A one-block-per-point kernel that reduces its tile leaves the memory
//! system idle while the block waits on its reductions' barriers and
//! stores its result; only other blocks keep loads in flight. The
//! persistent form loads what never changes between points (a norm's
//! weights) once per block, and with prefetching issues the next point's
//! tile loads before the current point's reductions, so each block always
//! has a row on its way. Every point still computes exactly what the
//! one-block form computes, in the same order: results are identical.
//!
//! Shared memory is reused from one point to the next; every exchange
//! already begins with a barrier (readers of an earlier exchange may still
//! be reading), so no extra barrier is needed between points.

use super::emit::{Class, Emitter};
use crate::error::Result;
use crate::kernels::ir::{Access, Inst, Program, ValueId};

/// Whether `program` may run persistently: a reduction at the top level
/// (a row kernel), no loops, accumulators or last points, and more than
/// one grid point.
pub(super) fn eligible(program: &Program, grid_blocks: u64) -> bool {
    grid_blocks > 1
        && grid_blocks <= super::MAX_GRID_X
        && program.accs.is_empty()
        && program.body.iter().all(|i| i.nested().is_none())
        && program.body.iter().any(|i| matches!(i, Inst::Reduce { .. }))
}

/// The top-level instructions split in three, each in program order: loads
/// of read-only parameters at a fixed address, loads of read-only
/// parameters whose partition follows the grid point, and the rest.
/// Read-only memory is written by no instruction of the kernel, so moving
/// its loads ahead of the rest reads the same values.
fn split_body(program: &Program) -> (Vec<&Inst>, Vec<&Inst>, Vec<&Inst>) {
    let (mut fixed, mut streamed, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    for inst in &program.body {
        match inst {
            Inst::Load {
                view, index, masked, ..
            } if program.params[program.views[view.index()].param.index()].access == Access::Read => {
                // An axis the view broadcasts (stride 0) moves no address;
                // unmasked, its index does not matter either.
                let v = &program.views[view.index()];
                let moves = |(x, &stride): (&crate::kernels::ir::IndexExpr, &i64)| {
                    (x.grid.is_some() || x.loop_var.is_some()) && (*masked || stride != 0)
                };
                if !index.iter().zip(&v.strides).any(moves) {
                    fixed.push(inst);
                } else {
                    streamed.push(inst);
                }
            }
            _ => rest.push(inst),
        }
    }
    (fixed, streamed, rest)
}

/// The `mov` type of a register, from its class prefix.
fn mov_type(reg: &str) -> &'static str {
    Class::ALL
        .iter()
        .filter(|c| {
            reg.strip_prefix(c.prefix())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|c| c.mov_type())
        .next()
        .unwrap_or("b32")
}

impl Emitter<'_> {
    /// Lowers the whole program as a persistent kernel (see the module
    /// docs); `prefetch` loads each next point's streamed tiles one point
    /// ahead.
    pub fn persistent(&mut self, entry: &str, grid_blocks: u64, prefetch: bool) -> Result<()> {
        let prog = self.prog;
        let first = self.begin_block(entry, grid_blocks, false);
        let (lin, next, step) = (self.reg(Class::B64), self.reg(Class::B64), self.reg(Class::B64));
        let blocks = self.reg(Class::B32);
        self.ins(format!("mov.u64 {lin}, {first}"));
        self.ins(format!("mov.u32 {blocks}, %nctaid.x"));
        self.ins(format!("cvt.u64.u32 {step}, {blocks}"));
        let (fixed, streamed, rest) = split_body(prog);
        // The first point's coordinates: fixed loads may name the grid
        // along axes that do not move their address.
        self.grid_coords = self.point_coords(&lin, grid_blocks);
        for inst in fixed {
            self.inst(inst)?;
        }
        let streamed_values: Vec<ValueId> = streamed
            .iter()
            .filter_map(|i| match i {
                Inst::Load { dst, .. } => Some(*dst),
                _ => None,
            })
            .collect();
        let mut held: Vec<Vec<String>> = Vec::new();
        if prefetch {
            for inst in &streamed {
                self.inst(inst)?;
            }
            held = streamed_values.iter().map(|v| self.val(*v)).collect::<Result<_>>()?;
        }
        let top = self.label();
        self.place_label(&top);
        self.ins(format!("add.u64 {next}, {lin}, {step}"));
        let more = self.reg(Class::Pred);
        self.ins(format!("setp.lt.u64 {more}, {next}, {grid_blocks}"));
        let mut fetched: Vec<Vec<String>> = Vec::new();
        if prefetch {
            let skip = self.label();
            self.ins(format!("@!{more} bra {skip}"));
            self.grid_coords = self.point_coords(&next, grid_blocks);
            for inst in &streamed {
                self.inst(inst)?;
            }
            fetched = streamed_values.iter().map(|v| self.val(*v)).collect::<Result<_>>()?;
            self.place_label(&skip);
            for (v, regs) in streamed_values.iter().zip(&held) {
                self.vals.insert(*v, regs.clone());
            }
        }
        self.grid_coords = self.point_coords(&lin, grid_blocks);
        if !prefetch {
            for inst in &streamed {
                self.inst(inst)?;
            }
        }
        for inst in rest {
            self.inst(inst)?;
        }
        for (to, from) in held.iter().flatten().zip(fetched.iter().flatten()) {
            self.ins(format!("mov.{} {to}, {from}", mov_type(to)));
        }
        self.ins(format!("mov.u64 {lin}, {next}"));
        self.ins(format!("@{more} bra {top}"));
        Ok(())
    }
}
