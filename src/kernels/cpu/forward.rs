//! Forwarded stores: tiles computed straight into the memory they are
//! stored to.
//!
//! When the only use of an elementwise result is a store later in the same
//! block, and nothing in between touches the stored parameter's memory, the
//! executor points the result's tile at the stored partition before
//! computing it (when that partition is whole and contiguous at run time),
//! and the store finds its data already in place. This saves the copy out of
//! the tile, and the tile's own buffer never enters the cache.

use crate::kernels::ir::{Inst, PartitionIndex, Program, ValueId, ViewId};
use smallvec::SmallVec;

/// The store a value is forwarded to.
#[derive(Debug, Clone)]
pub(crate) struct Forward {
    /// The view stored to.
    pub view: ViewId,
    /// The stored partition.
    pub index: PartitionIndex,
    /// Whether the store is masked.
    pub masked: bool,
}

/// For each value of `program`, the store it may be computed into.
pub(crate) fn forwarded_stores(program: &Program) -> Vec<Option<Forward>> {
    let mut uses = vec![0u32; program.values.len()];
    super::for_each_inst(&program.body, &mut |inst| {
        for v in operands(inst) {
            uses[v.index()] += 1;
        }
    });
    let mut forward = vec![None; program.values.len()];
    scan(program, &program.body, &uses, &mut forward);
    forward
}

/// Finds the forwardable stores of `body` and of the blocks inside it.
fn scan(program: &Program, body: &[Inst], uses: &[u32], forward: &mut [Option<Forward>]) {
    for (j, inst) in body.iter().enumerate() {
        let (view, index, src, masked) = match inst {
            Inst::Loop { body, .. } => {
                scan(program, body, uses, forward);
                continue;
            }
            Inst::Store {
                view,
                index,
                src,
                masked,
            } => (*view, index, *src, *masked),
            _ => continue,
        };
        if uses[src.index()] != 1 {
            continue;
        }
        let Some(i) = body[..j].iter().position(|d| elementwise_dst(d) == Some(src)) else {
            continue;
        };
        let param = program.views[view.index()].param;
        let touches = |inst: &Inst| match inst {
            Inst::Load { view, .. } | Inst::Store { view, .. } | Inst::Atomic { view, .. } => {
                program.views[view.index()].param == param
            }
            Inst::Loop { .. } => true,
            _ => false,
        };
        if !body[i + 1..j].iter().any(touches) {
            forward[src.index()] = Some(Forward {
                view,
                index: index.clone(),
                masked,
            });
        }
    }
}

/// The result of an instruction that writes every element of its result
/// from operands alone.
fn elementwise_dst(inst: &Inst) -> Option<ValueId> {
    match inst {
        Inst::Unary { dst, .. } | Inst::Binary { dst, .. } | Inst::Select { dst, .. } | Inst::Cast { dst, .. } => {
            Some(*dst)
        }
        _ => None,
    }
}

/// The values an instruction reads (loop bodies not included).
fn operands(inst: &Inst) -> SmallVec<[ValueId; 3]> {
    match inst {
        Inst::Store { src, .. }
        | Inst::Atomic { src, .. }
        | Inst::Unary { src, .. }
        | Inst::Cast { src, .. }
        | Inst::Broadcast { src, .. }
        | Inst::Reduce { src, .. }
        | Inst::AccUpdate { src, .. } => smallvec::smallvec![*src],
        Inst::Binary { lhs, rhs, .. } => smallvec::smallvec![*lhs, *rhs],
        Inst::Select {
            cond,
            on_true,
            on_false,
            ..
        } => smallvec::smallvec![*cond, *on_true, *on_false],
        Inst::Load { .. }
        | Inst::InBounds { .. }
        | Inst::Const { .. }
        | Inst::Iota { .. }
        | Inst::AccRead { .. }
        | Inst::Loop { .. }
        | Inst::Barrier => SmallVec::new(),
    }
}
