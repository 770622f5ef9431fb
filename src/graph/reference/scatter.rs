//! Scatters of the reference evaluator: their semantics are the module
//! docs of [`super`].

use super::{malformed, Input, Kind, Values};
use crate::dtype::{round_to, wrap_int, DType};
use crate::error::{dims, Error, Result};
use crate::graph::subgraph::SubNode;

/// `out = zeros; out[p with p[axis] = index[p]] += src[p]`, summed exactly
/// (f64 for floats, i128 for integers) and rounded or wrapped to the
/// node's dtype once; an index outside the axis is
/// [`Error::IndexOutOfRange`].
pub(super) fn scatter_add(
    node: &SubNode,
    axis: usize,
    chunked: Option<usize>,
    index: &Input,
    src: &Input,
) -> Result<Values> {
    let out = node.shape.dims();
    let fits = axis < out.len()
        && index.dims == src.dims
        && index.dims.len() == out.len()
        && index.dtype.is_int()
        && src.dtype == node.dtype
        && super::kind(node.dtype) != Kind::Bool
        && (0..out.len()).all(|k| k == axis || index.dims[k] <= out[k]);
    if !fits {
        return Err(malformed(node, format!("inputs do not scatter along axis {axis} into the node's shape")));
    }
    let strides = crate::shape::Shape::new(out).contiguous_strides();
    let positions = index.ints(DType::I64);
    let len = out[axis];
    let mut targets = Vec::with_capacity(positions.len());
    for (flat, &at) in positions.iter().enumerate() {
        if at < 0 || at >= len as i128 {
            let (axis, input, index) = crate::graph::op::scatter_report(axis, chunked, out, index.dims);
            return Err(Error::IndexOutOfRange {
                op: "scatter_add",
                axis,
                len,
                input: dims(&input),
                index: dims(&index),
            });
        }
        let (mut rest, mut e) = (flat, 0usize);
        for k in (0..out.len()).rev() {
            let c = if k == axis { at as usize } else { rest % index.dims[k] };
            rest /= index.dims[k];
            e += c * strides[k] as usize;
        }
        targets.push(e);
    }
    let numel = node.shape.numel();
    Ok(if node.dtype.is_float() {
        let mut sums = vec![0.0f64; numel];
        for (&t, x) in targets.iter().zip(src.floats(node.dtype)) {
            sums[t] += x;
        }
        Values::F(sums.into_iter().map(|s| round_to(s, node.dtype)).collect())
    } else {
        let mut sums = vec![0i128; numel];
        for (&t, x) in targets.iter().zip(src.ints(node.dtype)) {
            sums[t] = sums[t].wrapping_add(x);
        }
        Values::I(sums.into_iter().map(|s| wrap_int(s, node.dtype)).collect())
    })
}
