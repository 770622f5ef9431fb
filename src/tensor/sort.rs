//! Order statistics: `sort` and `topk` along one axis.
//!
//! A sort is written from ops the rest of the library already fuses, so
//! it runs on every device with no kernel of its own, and it is exact (no
//! arithmetic on the values) and depends on no schedule.
//!
//! A line of up to [`RANK_SORT_MAX`] elements is sorted by *ranks*:
//!
//! 1. The rank of each element in its line (of `n` elements) is the
//!    number of elements that come before it in the sorted order: those
//!    that compare less (more, descending) and the equal ones at smaller
//!    positions, which makes the sort stable. This is a reduction over a
//!    broadcast `[.., n, n, ..]` comparison that fusion computes in one
//!    kernel without storing it: `n²` comparisons a line, read from the
//!    line itself, one i64 written per element.
//! 2. The ranks are a permutation of `0..n` in each line; scattering each
//!    element's position to its rank (`Op::ScatterAdd`, one addition per
//!    output element) gives the indices of the sorted order.
//! 3. The values are a gather of the input by those indices.
//!
//! A longer line sorts runs of `merge::RUN` elements by ranks and merges
//! them pairwise, `log2(n / RUN)` passes, each output finding its element
//! by a binary search along the merge path (`merge.rs`): `O(n log² n)`
//! gathers in all. A `topk` with a small `k` takes `k` selection passes
//! over each line instead (see [`Tensor::topk`]).

use super::Tensor;
use crate::dtype::{DType, Scalar};
use crate::error::{dims, Error, Result};
use crate::graph::Op;
use crate::shape::Shape;

mod merge;

/// Whether `a` comes strictly before `b` in ascending (`descending`:
/// descending) order of values, NaN the largest, as bools of their
/// broadcast shape.
fn ahead(a: &Tensor, b: &Tensor, descending: bool) -> Result<Tensor> {
    let (a, b) = if descending { (b, a) } else { (a, b) };
    let less = a.try_lt(b)?;
    if !a.dtype().is_float() {
        return Ok(less);
    }
    // `b` is NaN and `a` is not.
    less.try_bitor(&b.try_ne(b)?.try_bitand(&a.try_eq(a)?)?)
}

/// Whether `a` and `b` hold equal values (NaN equal to NaN).
fn same(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let eq = a.try_eq(b)?;
    if !a.dtype().is_float() {
        return Ok(eq);
    }
    eq.try_bitor(&a.try_ne(a)?.try_bitand(&b.try_ne(b)?)?)
}

/// The lowest value of `x`'s dtype (-inf for floats), as a scalar on its device.
fn lowest(x: &Tensor) -> Tensor {
    let d = x.dtype();
    let s = match d {
        d if d.is_float() => Scalar::Float(f64::NEG_INFINITY, d),
        DType::I32 => Scalar::Int(i32::MIN as i128, d),
        DType::I64 => Scalar::Int(i64::MIN as i128, d),
        _ => Scalar::Int(0, d),
    };
    Tensor::constant(Shape::scalar(), s, d).to(x.device())
}

/// Whether `a` comes strictly before `b` where some elements are padding,
/// which comes after every value (`None`: no padding).
fn ahead_of(
    a: &Tensor,
    a_pad: Option<&Tensor>,
    b: &Tensor,
    b_pad: Option<&Tensor>,
    descending: bool,
) -> Result<Tensor> {
    let by_value = ahead(a, b, descending)?;
    match (a_pad, b_pad) {
        (Some(ap), Some(bp)) => {
            let a_real = ap.try_not()?;
            a_real
                .try_bitand(bp)?
                .try_bitor(&a_real.try_bitand(&bp.try_not()?)?.try_bitand(&by_value)?)
        }
        _ => Ok(by_value),
    }
}

/// Whether `a` and `b` are equal in the order: both padding, or both
/// values and equal (NaN equal to NaN).
fn same_as(a: &Tensor, a_pad: Option<&Tensor>, b: &Tensor, b_pad: Option<&Tensor>) -> Result<Tensor> {
    let by_value = same(a, b)?;
    match (a_pad, b_pad) {
        (Some(ap), Some(bp)) => ap.try_eq(bp)?.try_bitand(&ap.try_bitor(&by_value)?),
        _ => Ok(by_value),
    }
}

/// The stable order of the lines of `keys` along `axis` by ranks: for
/// each element the number of elements of its line that come before it
/// (`pads`, bools broadcast to `keys`, marks padding, which comes last),
/// and at each rank the element of `at` (of `keys`' shape) at the position
/// of the element of that rank. `n²` comparisons a line of `n`.
fn ranked_order(keys: &Tensor, axis: usize, pads: Option<&Tensor>, at: &Tensor, descending: bool) -> Result<Tensor> {
    let dims = keys.dims().to_vec();
    let m = dims[axis];
    let mut square = dims.clone();
    square.insert(axis + 1, m);
    let a = axis as isize;
    // Element i of a line along `axis`, element j along `axis + 1`.
    let xi = keys.try_unsqueeze(a + 1)?.try_expand(&square)?;
    let xj = keys.try_unsqueeze(a)?.try_expand(&square)?;
    let (pi, pj) = match pads {
        Some(p) => (Some(p.try_unsqueeze(a + 1)?), Some(p.try_unsqueeze(a)?)),
        None => (None, None),
    };
    let mut along = vec![1; square.len()];
    along[axis + 1] = m;
    let j = positions(m, &along, keys)?;
    along[axis + 1] = 1;
    along[axis] = m;
    let i = positions(m, &along, keys)?;
    let tie = same_as(&xj, pj.as_ref(), &xi, pi.as_ref())?.try_bitand(&j.try_lt(&i)?)?;
    let before = ahead_of(&xj, pj.as_ref(), &xi, pi.as_ref(), descending)?.try_bitor(&tie)?;
    let rank = before.cast_to(DType::I64).try_sum(&[a + 1], false)?;
    let shape = Shape::try_new("sort", &dims)?;
    Ok(Tensor::record(
        Op::ScatterAdd { axis, chunked: None },
        &[&rank, at],
        shape,
        DType::I64,
        keys.device(),
    ))
}

/// The longest line sorted by ranks alone; longer ones sort runs of
/// `merge::RUN` by ranks and merge them (both chosen by timing the CPU
/// executor: a line of 10⁶ and 512 lines of 2048).
const RANK_SORT_MAX: usize = 256;

/// `0..n` as i64 of shape `at` (ones but `n` on one axis) on `like`'s device.
fn positions(n: usize, at: &[usize], like: &Tensor) -> Result<Tensor> {
    Tensor::arange(0i64, n as i64, 1).to(like.device()).try_reshape(at)
}

impl Tensor {
    /// The stable sort of `self` along `axis`: values and i64 indices.
    fn sort_as(&self, op: &'static str, axis: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        if self.rank() == 0 {
            return Err(Error::AxisOutOfRange {
                op,
                axis,
                shape: vec![],
            });
        }
        let ax = self.shape().axis(op, axis)?;
        let d = self.dims().to_vec();
        let n = d[ax];
        if self.numel() == 0 || n == 1 {
            let zeros = Tensor::zeros(&d, DType::I64).to(self.device());
            return Ok((self.clone(), zeros));
        }
        let outer: usize = d[..ax].iter().product();
        let inner: usize = d[ax + 1..].iter().product();
        let line = [outer, n, inner];
        let keys = if self.dtype() == DType::Bool {
            self.cast_to(DType::U8)
        } else {
            self.clone()
        };
        let keys = keys.try_reshape(line)?;
        let order = if n <= RANK_SORT_MAX {
            let at = positions(n, &[1, n, 1], self)?.try_expand(&line)?;
            ranked_order(&keys, 1, None, &at, descending)?
        } else {
            merge::merged_order(&keys, descending)?
        };
        let values = self.try_reshape(line)?.try_gather(1, &order)?;
        Ok((values.try_reshape(&d)?, order.try_reshape(&d)?))
    }

    /// `topk` by `k` selection passes: each finds the largest value
    /// among the elements after the previous pick in descending stable
    /// order, then the first position holding it.
    fn select_top(&self, k: usize, ax: usize) -> Result<(Tensor, Tensor)> {
        let d = self.dims().to_vec();
        let n = d[ax];
        let outer: usize = d[..ax].iter().product();
        let inner: usize = d[ax + 1..].iter().product();
        let keys = if self.dtype() == DType::Bool {
            self.cast_to(DType::U8)
        } else {
            self.clone()
        };
        let keys = keys.try_reshape([outer, n, inner])?;
        let at = positions(n, &[1, n, 1], self)?;
        // The value and position of each pick.
        let (mut values, mut indices): (Vec<Tensor>, Vec<Tensor>) = (vec![], vec![]);
        for _ in 0..k {
            // The elements still to pick: all at first, then those after
            // the last pick (value `v` at position `p`).
            let open = match (values.last(), indices.last()) {
                (Some(v), Some(p)) => {
                    Some(ahead(v, &keys, true)?.try_bitor(&same(v, &keys)?.try_bitand(&p.try_lt(&at)?)?)?)
                }
                _ => None,
            };
            let candidates = match &open {
                Some(open) => Tensor::try_where(open, &keys, &lowest(&keys))?,
                None => keys.clone(),
            };
            let best = candidates.try_max(&[1], true)?;
            let mut hit = same(&keys, &best)?;
            if let Some(open) = &open {
                hit = hit.try_bitand(open)?;
            }
            let none =
                Tensor::constant(Shape::scalar(), Scalar::Int(n as i128, DType::I64), DType::I64).to(self.device());
            let first = Tensor::try_where(&hit, &at, &none)?.try_min(&[1], true)?;
            values.push(best);
            indices.push(first);
        }
        let i: Vec<&Tensor> = indices.iter().collect();
        let mut out = d.clone();
        out[ax] = k;
        // The values are gathered, so they are the input's own bits (a
        // reduced maximum may be another NaN; on a GPU a 2-byte NaN
        // passes through f32 and comes out canonical).
        let order = Tensor::try_cat(&i, 1)?;
        let v = self.try_reshape([outer, n, inner])?.try_gather(1, &order)?;
        Ok((v.try_reshape(&out)?, order.try_reshape(&out)?))
    }

    super::fallible! {
        /// Sorts `self` along `axis` (negative counts from the end):
        /// the sorted values and, as i64, the position along `axis` each
        /// came from, as PyTorch's `sort(dim, descending, stable=True)`.
        /// The sort is stable: equal values keep their order (also when
        /// descending). NaN sorts as the largest value (last ascending,
        /// first descending); -0.0 and 0.0 are equal; bools order false
        /// first. Every dtype. The values are the input's, bit for bit,
        /// except that on a GPU an f16 or bf16 NaN comes out as the
        /// canonical NaN (the values pass through f32 there).
        ///
        /// Cost (a line of `n` elements along `axis`): up to 256
        /// elements, `n²` comparisons in one fused reduction; longer
        /// lines sort runs of 128 that way (`128 n` comparisons) and merge
        /// them in `log2(n / 128)` passes, each a gather kernel of
        /// `log2(run) + 2` binary-search steps an element: `O(n log² n)`.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![3.0f32, f32::NAN, 1.0, 3.0, -2.0, 0.5], &[2, 3]);
        /// let (values, indices) = x.sort(1, false);
        /// let v = values.to_vec::<f32>()?;
        /// assert_eq!(&v[..2], &[1.0, 3.0]);
        /// assert!(v[2].is_nan());
        /// assert_eq!(&v[3..], &[-2.0, 0.5, 3.0]);
        /// assert_eq!(indices.to_vec::<i64>()?, vec![2, 0, 1, 1, 2, 0]);
        /// let (_, stable) = Tensor::from_vec(vec![1i32, 2, 1, 2], &[4]).sort(0, true);
        /// assert_eq!(stable.to_vec::<i64>()?, vec![1, 3, 0, 2]);
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        ///
        /// The `try_` form returns [`Error::AxisOutOfRange`] for a bad axis
        /// or a scalar `self`.
        pub fn sort / try_sort(&self, axis: isize, descending: bool) -> (Tensor, Tensor) {
            self.sort_as("sort", axis, descending)
        }

        /// The `k` largest elements along `axis` (negative counts from the
        /// end), largest first, and their i64 positions along `axis`, as
        /// PyTorch's `topk(k, dim)`: equal values in their order along the
        /// axis, NaN the largest. Every dtype; `k = 0` gives empty results.
        ///
        /// Cost: a line of more than 256 elements with `k` up to 8 (on
        /// the CPU, of more than `4k` elements) is picked from, element by
        /// element: each pick is two reductions over the line (its largest
        /// value after the previous pick, then the first position holding
        /// it), `2k` passes over `n` elements, `k` launches deep. Otherwise
        /// the whole line is sorted ([`Tensor::sort`]; a line of up to 256
        /// in one fused pass of `n` comparisons an element) and its first
        /// `k` kept.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1.0f32, 5.0, 3.0, 5.0, f32::NAN, 2.0], &[6]);
        /// let (values, indices) = x.topk(3, 0);
        /// let v = values.to_vec::<f32>()?;
        /// assert!(v[0].is_nan() && v[1] == 5.0 && v[2] == 5.0);
        /// assert_eq!(indices.to_vec::<i64>()?, vec![4, 1, 3]);
        /// assert!(x.try_topk(7, 0).is_err());
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        ///
        /// The `try_` form returns [`Error::AxisOutOfRange`] for a bad axis
        /// or a scalar `self`, and [`Error::InvalidShape`] for a `k` larger
        /// than the axis.
        pub fn topk / try_topk(&self, k: usize, axis: isize) -> (Tensor, Tensor) {
            const OP: &str = "topk";
            if self.rank() == 0 {
                return Err(Error::AxisOutOfRange { op: OP, axis, shape: vec![] });
            }
            let ax = self.shape().axis(OP, axis)?;
            let n = self.dims()[ax];
            if k > n {
                return Err(Error::InvalidShape {
                    op: OP,
                    shape: dims(self.dims()),
                    arg: vec![k as isize, axis],
                    reason: format!("k = {k} is larger than axis {ax} of extent {n}"),
                });
            }
            if k == 0 {
                let mut out = self.dims().to_vec();
                out[ax] = 0;
                let none = Tensor::zeros(&out, DType::I64).to(self.device());
                return Ok((self.try_narrow(axis, 0, 0)?, none));
            }
            // A short line sorts in one fused pass, cheaper than 2k on a
            // GPU; the CPU executor pays each of the `n` comparisons of the
            // ranks an element, more than the 2k passes' work.
            let cpu = self.device() == crate::Device::Cpu;
            if k <= TOPK_SELECTION_MAX && (n > RANK_SORT_MAX || (cpu && n > TOPK_CPU_RANKS_PER_PICK * k)) {
                return self.select_top(k, ax);
            }
            let (values, indices) = self.sort_as(OP, axis, true)?;
            Ok((values.try_narrow(axis, 0, k)?, indices.try_narrow(axis, 0, k)?))
        }
    }
}

/// The largest `k` for which [`Tensor::topk`] picks element by element
/// instead of sorting the line.
const TOPK_SELECTION_MAX: usize = 8;

/// On the CPU, [`Tensor::topk`] picks element by element from lines longer
/// than this many elements a pick, however short.
const TOPK_CPU_RANKS_PER_PICK: usize = 4;
