//! Sorting long lines by merging sorted runs, from fused ops.
//!
//! A line of `n` elements is padded to `N`, a power of two of at least
//! [`RUN`], with padding that sorts after every value. Runs of [`RUN`]
//! elements are sorted by ranks (`RUN` comparisons an element), then
//! pairs of sorted runs of length `L` are merged into runs of `2L` until
//! one run remains: `log2(N / RUN)` passes.
//!
//! A merge pass is one gather kernel. Output position `q` of a merged
//! pair takes the element that the merge path gives it: with `k` its
//! offset in the pair, the number `i` of elements the first `k` outputs
//! take from the left run is found by a binary search (`log2(L) + 1`
//! steps, each two gathers from each run), where taking `i` is too many
//! when the right run's element `k - i` comes strictly before the left
//! run's element `i - 1`. Ties take the left run first, whose elements
//! come from earlier positions, so the merge is stable. The output is
//! then the left run's element `i` or the right run's `k - i`, whichever
//! comes first. Every output finds its own element, so a pass has no
//! scatter, and no result depends on a schedule.
//!
//! Cost: `N · RUN` comparisons for the runs, then per pass `N` outputs of
//! `log2(L) + 2` steps of four gathers within the line (`O(N log² N)`
//! gathers in all); each pass reads the previous pass's keys and order
//! and writes its own (16 bytes an element for f32 keys).

use super::{ahead_of, positions, ranked_order};
use crate::error::Result;
use crate::tensor::Tensor;

/// The length of the runs sorted by ranks before merging.
pub(super) const RUN: usize = 128;

/// The stable order (positions along axis 1, i64) of the lines of `keys`
/// (`[outer, n, inner]`).
pub(super) fn merged_order(keys: &Tensor, descending: bool) -> Result<Tensor> {
    let &[outer, n, inner] = keys.dims() else {
        unreachable!("merged lines are three-dimensional")
    };
    let total = n.next_power_of_two().max(RUN);
    let padded = if total > n {
        let pad = Tensor::zeros(&[outer, total - n, inner], keys.dtype()).to(keys.device());
        Tensor::try_cat(&[keys, &pad], 1)?
    } else {
        keys.clone()
    };
    let runs = total / RUN;
    let run_shape = [outer, runs, RUN, inner];
    // Sorted runs, by ranks within each run, holding positions in the line.
    let at = positions(total, &[1, runs, RUN, 1], keys)?;
    let pads = at.try_ge(&Tensor::scalar(n as i64).to(keys.device()))?;
    let at = at.try_expand(&run_shape)?;
    let order = ranked_order(&padded.try_reshape(run_shape)?, 2, Some(&pads), &at, descending)?;
    let mut order = order.try_reshape([outer, total, inner])?;
    let mut sorted = padded.try_gather(1, &order)?;
    let mut len = RUN;
    while len < total {
        (order, sorted) = merge_pass(&order, &sorted, len, n, descending)?;
        len *= 2;
    }
    order.try_narrow(1, 0, n)
}

/// One pass merging pairs of sorted runs of `len` of the lines of
/// `sorted` (`[outer, N, inner]` keys, in the order `order` gives,
/// positions at or past `n` being padding): the new order and keys.
fn merge_pass(order: &Tensor, sorted: &Tensor, len: usize, n: usize, descending: bool) -> Result<(Tensor, Tensor)> {
    let total = order.dims()[1];
    let device = order.device();
    let int = |v: usize| Tensor::scalar(v as i64).to(device);
    let q = positions(total, &[1, total, 1], order)?;
    // The pair's first position, and the offset of `q` in it.
    let base = q.try_div(&int(2 * len))?.try_mul(&int(2 * len))?;
    let k = q.try_sub(&base)?;
    let lowest = k.try_sub(&int(len))?.try_maximum(&int(0))?;
    let highest = k.try_minimum(&int(len))?;
    let right_base = base.try_add(&int(len))?;
    let last = int(len - 1);
    let n = int(n);
    // The keys and padding of the left run's element `i` and the right
    // run's element `j` (both clamped into their runs).
    let element = |start: &Tensor, at: &Tensor| -> Result<(Tensor, Tensor)> {
        let index = start.try_add(&at.try_maximum(&int(0))?.try_minimum(&last)?)?;
        let index = index.try_expand(order.dims())?;
        let pad = order.try_gather(1, &index)?.try_ge(&n)?;
        Ok((sorted.try_gather(1, &index)?, pad))
    };
    // Whether the right element comes strictly before the left one.
    let right_first = |i: &Tensor, j: &Tensor| -> Result<Tensor> {
        let (lk, lp) = element(&base, i)?;
        let (rk, rp) = element(&right_base, j)?;
        ahead_of(&rk, Some(&rp), &lk, Some(&lp), descending)
    };
    // The largest `i` in `lowest..=highest` that is not too many.
    let mut taken = lowest.clone();
    let mut step = len;
    while step > 0 {
        let candidate = taken.try_add(&int(step))?;
        let fits = candidate.try_le(&highest)?;
        let c = candidate.try_minimum(&highest)?;
        let too_many = right_first(&c.try_sub(&int(1))?, &k.try_sub(&c)?)?;
        taken = Tensor::try_where(&fits.try_bitand(&too_many.try_not()?)?, &candidate, &taken)?;
        step /= 2;
    }
    let from_right = k.try_sub(&taken)?;
    let left_open = taken.try_lt(&int(len))?;
    let right_open = from_right.try_lt(&int(len))?;
    let right_wins = right_first(&taken, &from_right)?;
    let take_left = left_open.try_bitand(&right_open.try_not()?.try_bitor(&right_wins.try_not()?)?)?;
    let left = base.try_add(&taken.try_minimum(&last)?)?;
    let right = right_base.try_add(&from_right.try_minimum(&last)?)?;
    let source = Tensor::try_where(&take_left, &left, &right)?.try_expand(order.dims())?;
    Ok((order.try_gather(1, &source)?, sorted.try_gather(1, &source)?))
}
