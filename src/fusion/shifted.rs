//! Emitting the shifted sums of [`super::online`]: in-tile, where the shift
//! is known before the terms, and as per-element statistics over a loop,
//! where it is known only after the loop.

use super::emit::Lowerer;
use super::group::Space;
use super::reduction::acc_dtype;
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::graph::Op;
use crate::kernels::ir::{AccId, Builder, ValueId, ValueType};
use crate::ops::{BinaryOp, ReduceOp, UnaryOp};

/// The accumulators of one shifted sum over a loop, each a whole tile of
/// the full space in the accumulation dtype.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stats {
    /// Each element's running maximum and `sum(exp(x - max))`.
    Exp { max: AccId, sum: AccId },
    /// Each element's first value `shift`, `Σ (x - shift)`, `Σ (x - shift)^2`
    /// and the number of values.
    Square {
        shift: ValueId,
        first: AccId,
        second: AccId,
        count: AccId,
    },
    /// Over whole rows (no column split, no split loop): one shift per row,
    /// the mean of the row's first tile (`shift`, in the reduced space,
    /// and `over`, broadcast over the full tile), and each element's
    /// `Σ (x - shift)` and `Σ (x - shift)^2`. Two accumulator words an
    /// element where `Square` holds four (its shift, two sums and a
    /// count), and the same bound on cancellation: a first tile of `m` of
    /// a row's `n` values has its mean within `sqrt(n / m)` standard
    /// deviations of the row's, as one value (`Square`'s shift) is within
    /// `sqrt(trips)` of its element's.
    Row {
        shift: ValueId,
        over: ValueId,
        first: AccId,
        second: AccId,
    },
}

/// The shifted sum's op of node `n`, if it is one.
pub(crate) fn shifted_op(lw: &Lowerer, n: usize) -> Option<ReduceOp> {
    match lw.cx.g.nodes[n].op {
        Op::Reduce { op, .. } if op.is_shifted() => Some(op),
        _ => None,
    }
}

impl Lowerer<'_> {
    fn float(&self, b: &mut Builder, v: f64, dt: DType, space: Space) -> ValueId {
        b.constant(Scalar::Float(v, dt), dt, &self.tile(space))
    }

    /// The shift of shifted sum `n` (its operand 1, in the reduced space)
    /// broadcast over the full tile, in dtype `dt`.
    fn shift_over_tile(&mut self, b: &mut Builder, n: usize, dt: DType) -> Result<ValueId> {
        let s = self.operand(b, n, 1)?;
        let s = self.coerce(b, s, dt);
        Ok(b.broadcast(s, &self.tile(Space::Full)))
    }

    /// Shifted sum `n` of a tile holding whole rows: the terms about the
    /// known shift, reduced (the two-level form's arithmetic).
    pub(crate) fn shifted_in_tile(&mut self, b: &mut Builder, n: usize, op: ReduceOp) -> Result<ValueId> {
        let dtype = self.cx.g.nodes[n].dtype;
        let dt = dtype.compute_type();
        let x = self.operand(b, n, 0)?;
        let x = self.coerce(b, x, dt);
        let s = self.shift_over_tile(b, n, dt)?;
        let d = b.binary(BinaryOp::Sub, x, s);
        let t = match op {
            ReduceOp::ShiftedExpSum => b.unary(UnaryOp::Exp, d),
            _ => b.binary(BinaryOp::Mul, d, d),
        };
        Ok(self.reduce_tile(b, t, ReduceOp::Sum, dtype))
    }

    /// Declares the accumulators of shifted sum `n` before its loop; the
    /// squares' shift is the element's value in the loop's first tile, so
    /// the group's full-space nodes are computed for that tile first (in a
    /// scope of their own, storing nothing).
    pub(crate) fn shifted_stats(&mut self, b: &mut Builder, n: usize, op: ReduceOp) -> Result<Stats> {
        let ad = acc_dtype(self.cx.g.nodes[n].dtype);
        let ty = ValueType::new(ad, &self.tile(Space::Full));
        let zero = Scalar::Float(0.0, ad);
        if op == ReduceOp::ShiftedExpSum {
            return Ok(Stats::Exp {
                max: b.acc(ty.clone(), Scalar::Float(f64::NEG_INFINITY, ad)),
                sum: b.acc(ty, zero),
            });
        }
        let rows = self.split.is_none();
        let saved = self.scope_snapshot();
        // The first tile of what the reductions read (of a row walked twice,
        // not what uses the reductions).
        let feeds = self.feeding_reductions();
        for m in self.group.nodes.clone() {
            if m < n && self.space(m) == Space::Full && feeds.contains(&m) {
                let v = self.node(b, m)?;
                self.define_value(m, v);
            }
        }
        let x = self.operand(b, n, 0)?;
        if rows {
            let dtype = self.cx.g.nodes[n].dtype;
            let v = self.reducible(b, x, ReduceOp::Sum, dtype);
            let total = self.reduce_over(b, v, ReduceOp::Sum);
            let m = self.counted(b, true, ad);
            let zero_r = self.float(b, 0.0, ad, Space::Reduced);
            let shift = mean_of(b, total, m, zero_r);
            let over = b.broadcast(shift, &self.tile(Space::Full));
            self.restore_scope(saved);
            return Ok(Stats::Row {
                shift,
                over,
                first: b.acc(ty.clone(), zero),
                second: b.acc(ty, zero),
            });
        }
        let shift = self.coerce(b, x, ad);
        self.restore_scope(saved);
        Ok(Stats::Square {
            shift,
            first: b.acc(ty.clone(), zero),
            second: b.acc(ty.clone(), zero),
            count: b.acc(ty, zero),
        })
    }

    /// One tile's update of the statistics of shifted sum `n`.
    pub(crate) fn shifted_update(&mut self, b: &mut Builder, n: usize, stats: Stats) -> Result<()> {
        let ad = acc_dtype(self.cx.g.nodes[n].dtype);
        let x = self.operand(b, n, 0)?;
        let x = self.coerce(b, x, self.cx.g.nodes[n].dtype.compute_type());
        let x = self.coerce(b, x, ad);
        let mask = self.mask(b);
        let one = self.float(b, 1.0, ad, Space::Full);
        let zero = self.float(b, 0.0, ad, Space::Full);
        match stats {
            Stats::Exp { max, sum } => {
                // exp(-|x - m|) is the new term when x does not exceed the
                // maximum m, and the factor that rescales the sum when it
                // does (the sum then gains exp(0) = 1). Equal values (two
                // infinities included) add 1.
                let m = b.acc_read(max);
                let d = b.binary(BinaryOp::Sub, x, m);
                let a = b.unary(UnaryOp::Abs, d);
                let a = b.unary(UnaryOp::Neg, a);
                let e = b.unary(UnaryOp::Exp, a);
                let equal = b.binary(BinaryOp::Eq, x, m);
                let e = b.select(equal, one, e);
                let up = b.binary(BinaryOp::Gt, x, m);
                let mut factor = b.select(up, e, one);
                let mut term = b.select(up, one, e);
                let mut candidate = x;
                if let Some(k) = mask {
                    factor = b.select(k, factor, one);
                    term = b.select(k, term, zero);
                    let low = self.float(b, f64::NEG_INFINITY, ad, Space::Full);
                    candidate = b.select(k, x, low);
                }
                b.acc_update(sum, BinaryOp::Mul, factor);
                b.acc_update(sum, BinaryOp::Add, term);
                b.acc_update(max, BinaryOp::Maximum, candidate);
            }
            Stats::Row {
                over, first, second, ..
            } => {
                let mut d = b.binary(BinaryOp::Sub, x, over);
                if let Some(k) = mask {
                    d = b.select(k, d, zero);
                }
                let sq = b.binary(BinaryOp::Mul, d, d);
                b.acc_update(first, BinaryOp::Add, d);
                b.acc_update(second, BinaryOp::Add, sq);
            }
            Stats::Square {
                shift,
                first,
                second,
                count,
            } => {
                let mut d = b.binary(BinaryOp::Sub, x, shift);
                let mut c = one;
                if let Some(k) = mask {
                    d = b.select(k, d, zero);
                    c = b.select(k, one, zero);
                }
                let sq = b.binary(BinaryOp::Mul, d, d);
                b.acc_update(first, BinaryOp::Add, d);
                b.acc_update(second, BinaryOp::Add, sq);
                b.acc_update(count, BinaryOp::Add, c);
            }
        }
        Ok(())
    }

    /// Shifted sum `n` from its statistics after the loop, once its shift
    /// (a reduced value computed after the loop) is known.
    pub(crate) fn shifted_total(&mut self, b: &mut Builder, n: usize, stats: Stats) -> Result<ValueId> {
        let ad = acc_dtype(self.cx.g.nodes[n].dtype);
        let sum = |lw: &mut Self, b: &mut Builder, v: ValueId| lw.reduce_over(b, v, ReduceOp::Sum);
        match stats {
            Stats::Exp { max, sum: s } => {
                // Σ sum · exp(m - shift) over the tile's elements.
                let (m, s) = (b.acc_read(max), b.acc_read(s));
                let shift = self.shift_over_tile(b, n, ad)?;
                let d = b.binary(BinaryOp::Sub, m, shift);
                let e = b.unary(UnaryOp::Exp, d);
                let w = b.binary(BinaryOp::Mul, s, e);
                Ok(sum(self, b, w))
            }
            Stats::Square {
                shift,
                first,
                second,
                count,
            } => {
                // Per element of the tile: its centred sum of squares, plus
                // its count times the square of its mean's distance from
                // the shift, Σ (x - s)^2 = M2 + c (mean - s)^2. The distance
                // is taken as (k - s) + Σ (x - k) / c, both small where the
                // values are near one another, so a large mean costs no
                // digits.
                let (s1, s2, c) = (b.acc_read(first), b.acc_read(second), b.acc_read(count));
                let zero = self.float(b, 0.0, ad, Space::Full);
                let some = b.binary(BinaryOp::Gt, c, zero);
                let ratio = b.binary(BinaryOp::Div, s1, c);
                let back = b.binary(BinaryOp::Mul, s1, ratio);
                let centred = b.binary(BinaryOp::Sub, s2, back);
                let s = self.shift_over_tile(b, n, ad)?;
                let near = b.binary(BinaryOp::Sub, shift, s);
                let dev = b.binary(BinaryOp::Add, near, ratio);
                let dev2 = b.binary(BinaryOp::Mul, dev, dev);
                let spread = b.binary(BinaryOp::Mul, c, dev2);
                let part = b.binary(BinaryOp::Add, centred, spread);
                let part = b.select(some, part, zero);
                Ok(sum(self, b, part))
            }
            Stats::Row { .. } => {
                // Over the row's n values: Σ (x - s)^2 = M2 + n ((k - s) +
                // S1 / n)^2 with M2 = S2 - S1^2 / n, S1 and S2 about shift
                // k: the statistics a column split's part stores, combined
                // as its last point combines them.
                let v = self.shifted_columns(b, n, stats);
                let c = Combined::Square {
                    shift: v[0],
                    mean: v[1],
                    m2: v[2],
                    count: v[3],
                };
                self.shifted_combined(b, n, c)
            }
        }
    }

    /// The number of values each element of the reduced space counts, in
    /// dtype `ad`: those of the loop's first tile (`first`) or of all its
    /// trips. Every ragged reduced axis is masked from its extent on, the
    /// first trip starting at 0; a column split's part counts its first
    /// `step` rows, the last part all of its rows.
    fn counted(&mut self, b: &mut Builder, first: bool, ad: DType) -> ValueId {
        let pr = self.part_rows.filter(|pr| self.axes[pr.axis].extent != pr.step);
        let fixed: u64 = (0..self.axes.len())
            .filter(|&k| self.axes[k].reduced && pr.map_or(true, |pr| pr.axis != k))
            .map(|k| {
                let a = &self.axes[k];
                if first {
                    a.extent.min(a.tile as u64)
                } else {
                    a.extent
                }
            })
            .product();
        let fixed = self.float(b, fixed as f64, ad, Space::Reduced);
        let Some(pr) = pr else { return fixed };
        let shape = self.tile(Space::Reduced);
        let int = |b: &mut Builder, v: u64| b.constant(Scalar::Int(v as i128, DType::I64), DType::I64, &shape);
        let part = b.iota(&shape, pr.part_axis as u8, self.index(pr.part_axis, Space::Reduced));
        let last = int(b, pr.parts - 1);
        let is_last = b.binary(BinaryOp::Eq, part, last);
        let (all, step) = (int(b, self.axes[pr.axis].extent), int(b, pr.step));
        let mut rows = b.select(is_last, all, step);
        if first {
            let tile = int(b, self.axes[pr.axis].tile as u64);
            rows = b.binary(BinaryOp::Minimum, rows, tile);
        }
        let rows = self.coerce(b, rows, ad);
        b.binary(BinaryOp::Mul, rows, fixed)
    }
}

/// The statistics of a shifted sum over a column split's rows, one value
/// per kept element: where the partials of its runs have been combined at
/// the last point, the sum follows from them and the shift.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Combined {
    /// The largest value and `Σ exp(x - max)`.
    Exp { max: ValueId, sum: ValueId },
    /// A shift (a mean of some of the values), the mean's distance from it, the sum
    /// of squared deviations from the mean, and the count.
    Square {
        shift: ValueId,
        mean: ValueId,
        m2: ValueId,
        count: ValueId,
    },
}

impl Lowerer<'_> {
    /// The statistics of shifted sum `n` after the loop over a column
    /// split's run of rows, combined over the tile's rows into one value
    /// per column each: for `exp`, the largest maximum `M` and `Σ sum ·
    /// exp(max - M)`; for squares, a shift `K` (the largest of the
    /// elements' shifts, one of the values), the mean's distance from it
    /// (the elements' distances `(k - K) + Σ (x - k) / c` weighted by their
    /// counts: small numbers, so a large mean costs no digits), the sum of
    /// squared deviations from the mean (each element's centred sum plus
    /// its count times its distance's squared distance from the mean's) and
    /// the count. In that order, in the reduced space.
    pub(crate) fn shifted_columns(&mut self, b: &mut Builder, n: usize, stats: Stats) -> Vec<ValueId> {
        let ad = acc_dtype(self.cx.g.nodes[n].dtype);
        let full = self.tile(Space::Full);
        let zero = self.float(b, 0.0, ad, Space::Full);
        match stats {
            Stats::Exp { max, sum } => {
                let (m, s) = (b.acc_read(max), b.acc_read(sum));
                let top = self.reduce_over(b, m, ReduceOp::Max);
                let top_b = b.broadcast(top, &full);
                let one = self.float(b, 1.0, ad, Space::Full);
                let w = rescaled(b, s, m, top_b, one);
                let total = self.reduce_over(b, w, ReduceOp::Sum);
                vec![top, total]
            }
            Stats::Square {
                shift,
                first,
                second,
                count,
            } => {
                let (s1, s2, c) = (b.acc_read(first), b.acc_read(second), b.acc_read(count));
                let some = b.binary(BinaryOp::Gt, c, zero);
                let ratio = b.binary(BinaryOp::Div, s1, c);
                let ratio = b.select(some, ratio, zero);
                let top = self.reduce_over(b, shift, ReduceOp::Max);
                let top_b = b.broadcast(top, &full);
                let near = b.binary(BinaryOp::Sub, shift, top_b);
                let mean_i = b.binary(BinaryOp::Add, near, ratio);
                let back = b.binary(BinaryOp::Mul, s1, ratio);
                let centred = b.binary(BinaryOp::Sub, s2, back);
                let count = self.reduce_over(b, c, ReduceOp::Sum);
                let weighted = b.binary(BinaryOp::Mul, c, mean_i);
                let weighted = b.select(some, weighted, zero);
                let weighted = self.reduce_over(b, weighted, ReduceOp::Sum);
                let zero_r = self.float(b, 0.0, ad, Space::Reduced);
                let mean = mean_of(b, weighted, count, zero_r);
                let mean_b = b.broadcast(mean, &full);
                let part = spread(b, centred, c, mean_i, mean_b);
                let part = b.select(some, part, zero);
                let m2 = self.reduce_over(b, part, ReduceOp::Sum);
                vec![top, mean, m2, count]
            }
            Stats::Row {
                shift, first, second, ..
            } => {
                let (s1, s2) = (b.acc_read(first), b.acc_read(second));
                let s1 = self.reduce_over(b, s1, ReduceOp::Sum);
                let s2 = self.reduce_over(b, s2, ReduceOp::Sum);
                let count = self.counted(b, false, ad);
                let zero_r = self.float(b, 0.0, ad, Space::Reduced);
                let mean = mean_of(b, s1, count, zero_r);
                let back = b.binary(BinaryOp::Mul, s1, mean);
                let m2 = b.binary(BinaryOp::Sub, s2, back);
                vec![shift, mean, m2, count]
            }
        }
    }

    /// Shifted sum `n` from its combined statistics and its shift:
    /// `sum · exp(max - s)`, or `M2 + count · ((K - s) + mean)^2` with the
    /// mean's distance `mean` from the statistics' shift `K`.
    pub(crate) fn shifted_combined(&mut self, b: &mut Builder, n: usize, c: Combined) -> Result<ValueId> {
        let ad = acc_dtype(self.cx.g.nodes[n].dtype);
        let s = self.operand(b, n, 1)?;
        let s = self.coerce(b, s, ad);
        Ok(match c {
            Combined::Exp { max, sum } => {
                let d = b.binary(BinaryOp::Sub, max, s);
                let e = b.unary(UnaryOp::Exp, d);
                b.binary(BinaryOp::Mul, sum, e)
            }
            Combined::Square { shift, mean, m2, count } => {
                let near = b.binary(BinaryOp::Sub, shift, s);
                let d = b.binary(BinaryOp::Add, near, mean);
                let d2 = b.binary(BinaryOp::Mul, d, d);
                let spread = b.binary(BinaryOp::Mul, count, d2);
                b.binary(BinaryOp::Add, m2, spread)
            }
        })
    }
}

/// `sum · exp(max - top)`, the factor 1 where `max == top` (so equal
/// infinities, and the `-inf` of elements that saw no value, keep their
/// sums).
pub(crate) fn rescaled(b: &mut Builder, sum: ValueId, max: ValueId, top: ValueId, one: ValueId) -> ValueId {
    let d = b.binary(BinaryOp::Sub, max, top);
    let e = b.unary(UnaryOp::Exp, d);
    let equal = b.binary(BinaryOp::Eq, max, top);
    let e = b.select(equal, one, e);
    b.binary(BinaryOp::Mul, sum, e)
}

/// `weighted / count`, `zero` where the count is 0.
pub(crate) fn mean_of(b: &mut Builder, weighted: ValueId, count: ValueId, zero: ValueId) -> ValueId {
    let some = b.binary(BinaryOp::Gt, count, zero);
    let mean = b.binary(BinaryOp::Div, weighted, count);
    b.select(some, mean, zero)
}

/// `m2 + count · (mean_i - mean)^2`: a group's centred sum of squares
/// about the combined mean.
pub(crate) fn spread(b: &mut Builder, m2: ValueId, count: ValueId, mean_i: ValueId, mean: ValueId) -> ValueId {
    let dev = b.binary(BinaryOp::Sub, mean_i, mean);
    let dev2 = b.binary(BinaryOp::Mul, dev, dev);
    let w = b.binary(BinaryOp::Mul, count, dev2);
    b.binary(BinaryOp::Add, m2, w)
}
