//! Persistent row kernels with their staged tiles double-buffered in shared
//! memory: a grid of at most as many blocks as the GPU holds at once, each
//! running grid point after grid point (`point = ctaid.x, ctaid.x +
//! nctaid.x, …`).
//!
//! A block of the one-point-per-block form copies its row to shared memory
//! and then has no load of its own in flight while it reduces the row and
//! stores the result; only the other resident blocks keep the memory system
//! busy. Here each staged tile has two buffers: while a block computes a
//! point from one, the `cp.async` copies of its next point fill the other,
//! so every block always has a row on its way. Each thread copies exactly
//! the pieces it reads itself, as in the one-point form, so the buffers
//! need no barrier: the copies of point `k + 1` are issued after the same
//! thread's reads of point `k − 1` from that buffer, and
//! `cp.async.wait_group 1` waits for point `k`'s copies only.
//!
//! Everything else (the weights of a norm, the stores) runs in the loop's
//! body exactly as in the one-point form, and every point computes the same
//! operations in the same order: results are bit for bit the same. The
//! body's first exchange waits for the previous point's readers of shared
//! memory (`Emitter::exchange_reads` is reset at the top of the loop).

use super::emit::{Class, Emitter};
use crate::error::Result;
use crate::kernels::ir::{Inst, PartitionIndex, Program, ValueId, ViewId};

/// Most bytes of shared memory the double buffers of a block take; with
/// the exchange area, the block stays under the 48 KiB of static shared
/// memory.
const PREFETCH_LIMIT: u32 = 32 * 1024;

/// Whether `program` may loop over its grid points: more than one point,
/// no accumulators (each point starts its own), and no loops, last points
/// or atomic updates at any depth.
pub(super) fn eligible(program: &Program, grid_blocks: u64) -> bool {
    grid_blocks > 1
        && grid_blocks <= super::MAX_GRID_X
        && program.accs.is_empty()
        && program
            .body
            .iter()
            .all(|i| i.nested().is_none() && !matches!(i, Inst::Atomic { .. } | Inst::Barrier))
}

/// A staged load the loop issues one point ahead.
struct Prefetch<'p> {
    dst: ValueId,
    view: ViewId,
    index: &'p PartitionIndex,
    /// The shared array holding its two buffers.
    array: String,
    /// Bytes of one buffer.
    bytes: u32,
    /// The current buffer's byte offset (0 or `bytes`), and the other's.
    current: String,
    next: String,
}

impl Emitter<'_> {
    /// Lowers the whole program as a persistent kernel (see the module
    /// docs). Returns `false`, having emitted nothing, when the program has
    /// no tile to stage or its buffers would not fit; the caller then
    /// lowers it one point per block.
    pub fn persistent(&mut self, entry: &str, grid_blocks: u64) -> Result<bool> {
        let prog = self.prog;
        let mut prefetches = Vec::new();
        let mut total = 0;
        for inst in &prog.body {
            if let Inst::Load {
                dst,
                view,
                index,
                masked,
            } = inst
            {
                if self.stages(*dst, *view, *masked)? {
                    let bytes = self.stage_bytes(*view)?;
                    total += 2 * bytes;
                    prefetches.push((*dst, *view, index, bytes));
                }
            }
        }
        if prefetches.is_empty() || total > PREFETCH_LIMIT {
            return Ok(false);
        }
        let first = self.begin_block(entry, grid_blocks, false);
        let prefetches: Vec<Prefetch> = prefetches
            .into_iter()
            .map(|(dst, view, index, bytes)| {
                let array = format!("tf_stage{}", self.stage_decls.len());
                self.stage_decls
                    .push(format!(".shared .align 16 .b8 {array}[{}];", 2 * bytes));
                self.staged_bytes += 2 * bytes;
                self.staged.insert(dst, array.clone());
                self.prefetched.insert(dst, array.clone());
                let (current, next) = (self.reg(Class::B32), self.reg(Class::B32));
                self.stage_offsets.insert(array.clone(), current.clone());
                Prefetch {
                    dst,
                    view,
                    index,
                    array,
                    bytes,
                    current,
                    next,
                }
            })
            .collect();
        let (lin, next, step) = (self.reg(Class::B64), self.reg(Class::B64), self.reg(Class::B32));
        self.ins(format!("mov.u64 {lin}, {first}"));
        self.ins(format!("mov.u32 {step}, %nctaid.x"));
        // The first point's copies, into buffer 0.
        for p in &prefetches {
            self.ins(format!("mov.u32 {}, 0", p.current));
        }
        self.grid_coords = self.point_coords(&lin, grid_blocks);
        for p in &prefetches {
            self.stage_slots(p.view, p.index, &p.array, true)?;
        }
        self.ins("cp.async.commit_group");
        let top = self.label();
        self.place_label(&top);
        self.ins(format!("cvt.u64.u32 {next}, {step}"));
        self.ins(format!("add.u64 {next}, {lin}, {next}"));
        let more = self.reg(Class::Pred);
        self.ins(format!("setp.lt.u64 {more}, {next}, {grid_blocks}"));
        for p in &prefetches {
            self.ins(format!("sub.u32 {}, {}, {}", p.next, p.bytes, p.current));
        }
        // The next point's copies, into the other buffers.
        let skip = self.label();
        self.ins(format!("@!{more} bra {skip}"));
        self.grid_coords = self.point_coords(&next, grid_blocks);
        for p in &prefetches {
            self.stage_offsets.insert(p.array.clone(), p.next.clone());
            self.stage_slots(p.view, p.index, &p.array, true)?;
            self.stage_offsets.insert(p.array.clone(), p.current.clone());
        }
        self.place_label(&skip);
        // An empty group when there is no next point: `wait_group 1` then
        // still waits for this point's copies.
        self.ins("cp.async.commit_group");
        self.ins("cp.async.wait_group 1");
        self.grid_coords = self.point_coords(&lin, grid_blocks);
        self.exchange_reads = Some((0, u32::MAX));
        for inst in &prog.body {
            self.inst(inst)?;
        }
        for p in &prefetches {
            debug_assert!(self.vals.contains_key(&p.dst));
            self.ins(format!("mov.u32 {}, {}", p.current, p.next));
        }
        self.ins(format!("mov.u64 {lin}, {next}"));
        self.ins(format!("@{more} bra {top}"));
        Ok(true)
    }
}
