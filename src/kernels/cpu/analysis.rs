//! What the executor works out about a program before running it: which
//! results it computes straight into memory, and which broadcast operands it
//! reads in place.
//!
//! **Forwarded stores.** When the only use of an elementwise result is a store later in the same
//! block, and nothing in between touches the stored parameter's memory, the
//! executor points the result's tile at the stored partition before
//! computing it (when that partition is whole and contiguous at run time),
//! and the store finds its data already in place. This saves the copy out of
//! the tile, and the tile's own buffer never enters the cache.

use crate::kernels::ir::{Inst, PartitionExprs, Program, ValueId, ViewId};
use crate::ops::BinaryOp;

/// The store a value is forwarded to.
#[derive(Debug, Clone)]
pub(crate) struct Forward {
    /// The view stored to.
    pub view: ViewId,
    /// The stored partition.
    pub index: PartitionExprs,
    /// Whether the store is masked.
    pub masked: bool,
}

/// For each value of `program`, the store it may be computed into.
pub(crate) fn forwarded_stores(program: &Program) -> Vec<Option<Forward>> {
    let mut uses = vec![0u32; program.values.len()];
    super::for_each_inst(&program.body, &mut |inst| {
        for v in inst.operands() {
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
            Inst::Loop { body, .. } | Inst::LastPoint { body, .. } => {
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
            Inst::Load { view, .. }
            | Inst::Gather { view, .. }
            | Inst::ScatterAdd { view, .. }
            | Inst::Store { view, .. }
            | Inst::Atomic { view, .. } => program.views[view.index()].param == param,
            Inst::Loop { .. } | Inst::LastPoint { .. } => true,
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

/// How a value's elements are held at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// In its own tile, one element per element.
    Dense,
    /// Element `i` is element `i / rep` of value `src`.
    Repeat {
        /// The value spread.
        src: usize,
        /// How many result elements each source element covers.
        rep: usize,
    },
    /// Element `i` is element `i % period` of value `src`.
    Cycle {
        /// The value spread.
        src: usize,
        /// The length of the run that repeats.
        period: usize,
    },
}

/// The spread operands of `program`: the form of every broadcast that is
/// never materialised (others [`Form::Dense`]), and whether each value is a
/// load that may read one period of memory.
pub(crate) fn spread_operands(program: &Program) -> (Vec<Form>, Vec<bool>) {
    let n = program.values.len();
    // For each value, the other operand of each of its uses, or `None` for
    // a use that needs the value materialised.
    let mut partners: Vec<Vec<Option<ValueId>>> = vec![Vec::new(); n];
    super::for_each_inst(&program.body, &mut |inst| match inst {
        Inst::Binary { op, lhs, rhs, .. } if spreads(*op) && lhs != rhs => {
            partners[lhs.index()].push(Some(*rhs));
            partners[rhs.index()].push(Some(*lhs));
        }
        _ => {
            for v in inst.operands() {
                partners[v.index()].push(None);
            }
        }
    });
    let mut forms = vec![Form::Dense; n];
    let mut cycle_loads = vec![false; n];
    let mut spread = vec![false; n];
    super::for_each_inst(&program.body, &mut |inst| {
        let (dst, form, load) = match inst {
            Inst::Broadcast { dst, src } => match broadcast_form(program, *dst, *src) {
                Some(form) => (*dst, form, false),
                None => return,
            },
            Inst::Load { dst, view, .. } => {
                let v = &program.views[view.index()];
                if !v.strides.iter().zip(&v.tile).any(|(&s, &t)| s == 0 && t > 1) {
                    return;
                }
                (*dst, Form::Dense, true)
            }
            _ => return,
        };
        let uses = &partners[dst.index()];
        if !uses.is_empty() && uses.iter().all(|p| p.is_some_and(|p| !spread[p.index()])) {
            spread[dst.index()] = true;
            forms[dst.index()] = form;
            cycle_loads[dst.index()] = load;
        }
    });
    (forms, cycle_loads)
}

/// Whether a binary op reads spread operands.
fn spreads(op: BinaryOp) -> bool {
    use BinaryOp::*;
    matches!(op, Add | Sub | Mul | Div | Maximum | Minimum)
}

/// How `dst = broadcast(src)` spreads `src`, if it repeats each element
/// over trailing axes or cycles over leading ones.
fn broadcast_form(program: &Program, dst: ValueId, src: ValueId) -> Option<Form> {
    let (d, s) = (&program.values[dst.index()].shape, &program.values[src.index()].shape);
    if d.len() != s.len() {
        return None;
    }
    let prod = |x: &[u32]| x.iter().map(|&v| v as usize).product::<usize>();
    // The first axis from which `src` is all ones, and the last up to which it is.
    let tail = (0..=s.len()).rev().take_while(|&k| k == s.len() || s[k] == 1).last()?;
    let head = (0..=s.len()).take_while(|&k| k == 0 || s[k - 1] == 1).last()?;
    if s[..tail] == d[..tail] {
        Some(Form::Repeat {
            src: src.index(),
            rep: prod(&d[tail..]),
        })
    } else if s[head..] == d[head..] {
        Some(Form::Cycle {
            src: src.index(),
            period: prod(&d[head..]),
        })
    } else {
        None
    }
}
