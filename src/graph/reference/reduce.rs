//! Reductions of the reference evaluator: their semantics are the module
//! docs of [`super`].

use super::elementwise::{nan_max, nan_min};
use super::{kind, reduce_name, row_major_strides, strided_offsets, Input, Kind, Values};
use crate::dtype::{round_to, wrap_int, DType};
use crate::error::{dims, Error, Result};
use crate::graph::subgraph::SubNode;
use crate::ops::{ReduceOp, ScanOp};

pub(super) fn reduce(
    node: &SubNode,
    op: ReduceOp,
    axes: &[usize],
    input: &Input,
    shift: Option<&Input>,
) -> Result<Values> {
    let name = reduce_name(op);
    let in_dims = input.dims;
    let bad = |reason: String| Error::InvalidShape {
        op: name,
        shape: dims(in_dims),
        arg: axes.iter().map(|&a| a as isize).collect(),
        reason,
    };
    if axes.windows(2).any(|w| w[0] >= w[1]) || axes.last().is_some_and(|&a| a >= in_dims.len()) {
        return Err(bad("the axes must be distinct, ascending and within the rank".into()));
    }
    let kept: Vec<usize> = in_dims
        .iter()
        .enumerate()
        .map(|(a, &d)| if axes.contains(&a) { 1 } else { d })
        .collect();
    if node.shape.dims() != kept.as_slice() {
        return Err(bad(format!("the node's shape {:?} is not {kept:?}", node.shape.dims())));
    }
    // The output slot of each input element, in row-major input order.
    let mut out_strides = row_major_strides(&kept);
    for &a in axes {
        out_strides[a] = 0;
    }
    let slots = strided_offsets(in_dims, &out_strides, 0);
    let n_out = node.shape.numel();
    let dtype = node.dtype;
    if op.is_shifted() {
        // Each element less its slot's shift, then exp or squared, summed.
        let Some(shift) = shift.filter(|s| s.dims == node.shape.dims()) else {
            return Err(bad(format!("a shifted sum takes a shift of shape {:?}", node.shape.dims())));
        };
        if !dtype.is_float() || input.dtype != dtype || shift.dtype != dtype {
            return Err(Error::UnsupportedDType {
                op: name,
                dtype,
                reason: "a shifted sum takes two floats of its dtype",
            });
        }
        let (x, s) = (input.floats(dtype), shift.floats(dtype));
        let f = if op == ReduceOp::ShiftedExpSum { f64::exp } else { |d: f64| d * d };
        let terms: Vec<f64> = x.iter().zip(&slots).map(|(&v, &k)| f(v - s[k])).collect();
        let sums = fold(&terms, &slots, n_out, 0.0, |a, b| a + b);
        return Ok(Values::F(sums.into_iter().map(|v| round_to(v, dtype)).collect()));
    }
    if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
        let &[axis] = axes else {
            return Err(bad("an arg-reduction takes exactly one axis".into()));
        };
        if in_dims[axis] == 0 {
            return Err(bad(format!("axis {axis} is empty, so there is no index to give")));
        }
        if dtype != DType::I64 {
            return Err(Error::UnsupportedDType {
                op: name,
                dtype,
                reason: "an index is i64",
            });
        }
        let mut axis_strides = vec![0; in_dims.len()];
        axis_strides[axis] = 1;
        let positions = strided_offsets(in_dims, &axis_strides, 0);
        let is_max = op == ReduceOp::ArgMax;
        let indices = match kind(input.dtype) {
            Kind::Float => best_index(
                &input.floats(input.dtype),
                &slots,
                &positions,
                n_out,
                |x: f64, best: f64| !best.is_nan() && (x.is_nan() || if is_max { x > best } else { x < best }),
            ),
            _ => best_index(&input.ints(input.dtype), &slots, &positions, n_out, |x, best| {
                if is_max {
                    x > best
                } else {
                    x < best
                }
            }),
        };
        return Ok(Values::I(indices));
    }
    Ok(match kind(dtype) {
        Kind::Float => {
            let (identity, f): (f64, fn(f64, f64) -> f64) = match op {
                ReduceOp::Sum => (0.0, |a, b| a + b),
                ReduceOp::Prod => (1.0, |a, b| a * b),
                ReduceOp::Max => (f64::NEG_INFINITY, nan_max),
                _ => (f64::INFINITY, nan_min),
            };
            let sums = fold(&input.floats(dtype), &slots, n_out, identity, f);
            Values::F(sums.into_iter().map(|v| round_to(v, dtype)).collect())
        }
        Kind::Int | Kind::Bool => {
            let (min, max) = int_range(dtype);
            let (identity, f): (i128, fn(i128, i128) -> i128) = match op {
                ReduceOp::Sum => (0, i128::wrapping_add),
                ReduceOp::Prod => (1, i128::wrapping_mul),
                ReduceOp::Max => (min, i128::max),
                _ => (max, i128::min),
            };
            let exact = fold(&input.ints(dtype), &slots, n_out, identity, f);
            match kind(dtype) {
                Kind::Bool => Values::B(exact.into_iter().map(|v| v != 0).collect()),
                _ => Values::I(exact.into_iter().map(|v| wrap_int(v, dtype)).collect()),
            }
        }
    })
}

/// The inclusive scan along `axis`: in the node's dtype (the input cast to
/// it), floats combined in f64 and each prefix rounded once, integers
/// exactly then wrapped.
pub(super) fn scan(node: &SubNode, op: ScanOp, axis: usize, input: &Input) -> Result<Values> {
    let d = input.dims;
    let dtype = node.dtype;
    let name = super::op_name(&node.op);
    if axis >= d.len() || node.shape.dims() != d {
        return Err(Error::InvalidShape {
            op: name,
            shape: dims(d),
            arg: vec![axis as isize],
            reason: "a scan keeps its input's shape and scans one of its axes".into(),
        });
    }
    if op == ScanOp::LogSumExp && !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            op: name,
            dtype,
            reason: "logcumsumexp takes floats",
        });
    }
    let (inner, len) = (d[axis + 1..].iter().product::<usize>(), d[axis]);
    let outer = d[..axis].iter().product::<usize>();
    // Each line along the axis: its first element and the stride between.
    fn lines<T: Copy>(xs: &mut [T], outer: usize, len: usize, inner: usize, f: impl Fn(T, T) -> T) {
        for o in 0..outer {
            for i in 0..inner {
                let base = o * len * inner + i;
                for k in 1..len {
                    xs[base + k * inner] = f(xs[base + (k - 1) * inner], xs[base + k * inner]);
                }
            }
        }
    }
    Ok(match kind(dtype) {
        Kind::Float => {
            let mut xs = input.floats(dtype);
            let f: fn(f64, f64) -> f64 = match op {
                ScanOp::Sum => |a, b| a + b,
                ScanOp::Prod => |a, b| a * b,
                ScanOp::Max => nan_max,
                ScanOp::Min => nan_min,
                ScanOp::LogSumExp => log_add_exp,
            };
            lines(&mut xs, outer, len, inner, f);
            Values::F(xs.into_iter().map(|v| round_to(v, dtype)).collect())
        }
        Kind::Int | Kind::Bool => {
            let mut xs = input.ints(dtype);
            let f: fn(i128, i128) -> i128 = match op {
                ScanOp::Sum => |a, b| wrap_int(a.wrapping_add(b), DType::I64),
                ScanOp::Prod => |a, b| wrap_int(a.wrapping_mul(b), DType::I64),
                ScanOp::Max => i128::max,
                _ => i128::min,
            };
            lines(&mut xs, outer, len, inner, f);
            match kind(dtype) {
                Kind::Bool => Values::B(xs.into_iter().map(|v| v != 0).collect()),
                _ => Values::I(xs.into_iter().map(|v| wrap_int(v, dtype)).collect()),
            }
        }
    })
}

/// `log(exp(a) + exp(b))` without overflow: the larger plus
/// `ln(1 + exp(-|a - b|))`; infinities of one sign (and NaN) as they are.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = nan_max(a, b);
    if m.is_infinite() || m.is_nan() {
        return m;
    }
    m + (-(a - b).abs()).exp().ln_1p()
}

/// Combines each element into the accumulator of its slot, in order.
fn fold<T: Copy>(xs: &[T], slots: &[usize], n_out: usize, identity: T, f: fn(T, T) -> T) -> Vec<T> {
    let mut acc = vec![identity; n_out];
    for (&x, &s) in xs.iter().zip(slots) {
        acc[s] = f(acc[s], x);
    }
    acc
}

/// For each slot, the position of the first element no later element is
/// `better` than.
fn best_index<T: Copy>(
    xs: &[T],
    slots: &[usize],
    positions: &[usize],
    n_out: usize,
    better: impl Fn(T, T) -> bool,
) -> Vec<i128> {
    let mut best: Vec<Option<(T, usize)>> = vec![None; n_out];
    for ((&x, &s), &p) in xs.iter().zip(slots).zip(positions) {
        if best[s].map_or(true, |(b, _)| better(x, b)) {
            best[s] = Some((x, p));
        }
    }
    best.into_iter().map(|b| b.map_or(0, |(_, p)| p as i128)).collect()
}

/// The smallest and largest value of an integer or bool dtype.
fn int_range(dtype: DType) -> (i128, i128) {
    match dtype {
        DType::U8 => (0, u8::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        _ => (0, 1),
    }
}
