//! Sums of shifted terms rewritten as two-input reductions.
//!
//! `(x - s).exp().sum(axes)` and `((x - s) * (x - s)).sum(axes)`, where `s`
//! is a value of the kept shape computed from a reduction over the same
//! axes of the same space (the maximum of a softmax, the mean of a
//! variance) and broadcast back, become one node each:
//! [`ReduceOp::ShiftedExpSum`] and [`ReduceOp::ShiftedSquareSum`], of
//! inputs `x` and `s`. Their sum no longer reads `s` in the full space, so
//! the reduction that makes `s` and this one are one reduction group that
//! needs no broadcast back: where a row fits one tile the kernel computes
//! exactly what the two-level form did (`s` first, then the terms), and
//! where it does not, one pass over the row keeps, per element of the tile,
//! statistics from which the sum follows once `s` is known after the pass:
//!
//! - for `exp`, the running maximum `m` of the element's values and
//!   `sum(exp(x - m))`, rescaled when `m` grows; the sum is then
//!   `Σ sum · exp(m - s)` over the tile's elements;
//! - for squares, the element's first value `k` as a shift, `Σ (x - k)`
//!   and `Σ (x - k)^2` and the count `c`; each element's values then give
//!   `Σ (x - s)^2 = M2 + c (mean - s)^2`, with `M2` the centred sum of
//!   squares and `mean - s` taken as `(k - s) + Σ (x - k) / c`, both small
//!   where the values are near one another, so a large mean costs no
//!   digits. Since `k` is one of the element's own values, `(k - mean)^2`
//!   is at most `c` times its variance, so the first shift loses no more
//!   than a sum of `c` terms rounds anyway.
//!
//! Where a group of such a sum would be split across the grid (a full
//! reduction, few kept columns), which these statistics do not do, the
//! plan is made again without the rewrite.

use crate::graph::{Op, ReduceOp, Subgraph, UnaryOp};
use crate::ops::BinaryOp;

/// `g` with each shifted sum rewritten, and whether there was one.
pub(crate) fn rewrite(g: &mut Subgraph) -> bool {
    let mut any = false;
    for r in 0..g.nodes.len() {
        if let Some((op, x, shift)) = shifted_sum(g, r) {
            let Op::Reduce { axes, .. } = &g.nodes[r].op else {
                unreachable!("a shifted sum is a reduction")
            };
            g.nodes[r].op = Op::Reduce { op, axes: axes.clone() };
            g.nodes[r].inputs = [x, shift].into_iter().collect();
            any = true;
        }
    }
    any
}

/// `(op, x, s)` when node `r` is a float sum of `exp(x - s)` or of
/// `(x - s)^2` with `s` broadcast back along exactly the reduced axes and
/// computed from a reduction over those axes of `x`'s space.
fn shifted_sum(g: &Subgraph, r: usize) -> Option<(ReduceOp, usize, usize)> {
    let node = &g.nodes[r];
    let Op::Reduce {
        op: ReduceOp::Sum,
        axes,
    } = &node.op
    else {
        return None;
    };
    if !node.dtype.is_float() {
        return None;
    }
    let term = node.inputs[0];
    let (op, diff) = match (&g.nodes[term].op, g.nodes[term].inputs.as_slice()) {
        (Op::Unary(UnaryOp::Exp), &[d]) => (ReduceOp::ShiftedExpSum, d),
        (Op::Binary(BinaryOp::Mul), &[a, b]) if a == b => (ReduceOp::ShiftedSquareSum, a),
        _ => return None,
    };
    let (Op::Binary(BinaryOp::Sub), &[x, e]) = (&g.nodes[diff].op, g.nodes[diff].inputs.as_slice()) else {
        return None;
    };
    let Op::Expand = g.nodes[e].op else { return None };
    let shift = g.nodes[e].inputs[0];
    let full = g.nodes[x].shape.dims();
    let same = |n: usize| g.nodes[n].dtype == node.dtype;
    if g.nodes[shift].shape != node.shape || !same(x) || !same(shift) || !same(diff) || !same(term) {
        return None;
    }
    reduced_over(g, shift, full, axes).then_some((op, x, shift))
}

/// Whether `n`, through elementwise ops and views of its own shape, comes
/// from a reduction over `axes` of a tensor of shape `full`.
fn reduced_over(g: &Subgraph, n: usize, full: &[usize], axes: &[usize]) -> bool {
    let mut stack = vec![n];
    let mut seen = vec![false; g.nodes.len()];
    while let Some(m) = stack.pop() {
        if std::mem::replace(&mut seen[m], true) {
            continue;
        }
        let node = &g.nodes[m];
        match &node.op {
            Op::Reduce { axes: a, .. }
                if a.as_slice() == axes && g.nodes[node.inputs[0]].shape.dims() == full =>
            {
                return true;
            }
            op if op.is_elementwise() || matches!(op, Op::Reshape) => stack.extend(node.inputs.iter().copied()),
            _ => {}
        }
    }
    false
}
