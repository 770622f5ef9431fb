//! The unfused reference evaluator, and with it the definition of what every
//! op means.
//!
//! [`evaluate`] realizes a [`Subgraph`] node by node on the host, as a plain
//! eager library would. Every fused path (the CPU executor, the GPU) is
//! checked against it, so it is written to be obviously right, not fast.
//!
//! # Values
//!
//! A node's result is held exactly: floats as f64 rounded to the node's dtype
//! once the node is computed (so a chain of f16 nodes rounds at every node),
//! integers as i128 wrapped to the node's dtype, bools as bools.
//!
//! # Semantics
//!
//! - **Leaves.** `Data` is host memory of the node's dtype and element count,
//!   row-major. `Full(s)` fills the node with `s.cast(dtype)`.
//! - **Operands.** Elementwise ops and reductions first convert their operands
//!   to the node's dtype with [`Scalar::cast`] (graphs from the front end
//!   already agree, as it inserts casts). Comparisons convert both operands to
//!   [`DType::promote`] of their dtypes; `Where` converts its condition to
//!   bool. Views and arg-reductions take their input as it is.
//! - **Floats.** Each op is computed in f64 on the operand values, then
//!   rounded to the node's dtype. `Rsqrt = 1/sqrt(x)`, `Sigmoid = 1/(1+e^-x)`,
//!   `Silu = x * sigmoid(x)`, `GeluTanh` as written in [`UnaryOp`](super::UnaryOp), and
//!   `GeluErf = x/2 * erfc(-x/sqrt 2)` ([`erf::gelu_erf`]), which equals
//!   `x/2 (1 + erf(x/sqrt 2))` without its cancellation for negative `x`. The formulas apply literally
//!   to infinities, so `Silu`, `GeluTanh` and `GeluErf` of `-inf` are NaN.
//!   `Round` rounds half to even; `Sign` is NaN for NaN and `+0` for `±0`;
//!   `Relu(NaN)` is NaN and `Relu(-0)` is `+0`. `Maximum`, `Minimum` and the
//!   max/min reductions propagate NaN. Comparisons with NaN are false except
//!   `Ne`. `Pow` is `powf`. `Not` and the bitwise ops reject float dtypes.
//! - **Integers.** Each op is computed exactly in i128, then wrapped (two's
//!   complement) to the node's dtype: `Add`, `Sub`, `Mul`, `Neg` and `Abs`
//!   wrap (`-1u8 = 255`, `abs(i32::MIN) = i32::MIN`). `Div` truncates toward
//!   zero, **`x / 0 = 0`**, and `MIN / -1` wraps to `MIN`. `Not` and the
//!   bitwise ops act on the bits; `Sign` is -1, 0 or 1; `Relu` is `max(x, 0)`;
//!   `Floor`, `Ceil` and `Round` are the identity. The float-only ops (`Exp`
//!   through `Silu`, and `Pow`) reject integer dtypes.
//! - **Bools.** `Not` and the bitwise ops are logical; comparisons order
//!   `false < true`. Other arithmetic computes on 0 and 1 as integers and
//!   stores `!= 0` (so `Add` and `Maximum` are or, `Mul` and `Minimum` are
//!   and). `Neg` and the float-only ops reject bool.
//! - **Cast** is [`Scalar::cast`]: to a float rounds to nearest even; float to
//!   integer truncates toward zero into i64 (saturating, NaN to 0) and then
//!   wraps; integer to integer wraps; anything to bool is `!= 0` (NaN is
//!   true); bool to a number is 0 or 1.
//! - **Reductions** keep each reduced axis with length 1; `axes` are distinct
//!   and ascending. Elements are combined in row-major order. `Sum` and `Prod`
//!   run in f64 for floats (rounded once at the end) and in wrapping i128 for
//!   integers (wrapped to the dtype at the end). **Over an empty axis each
//!   reduction gives its identity:** `Sum` 0, `Prod` 1, `Max` `-inf` (floats),
//!   the dtype's minimum (integers) or false, `Min` `+inf`, the dtype's
//!   maximum or true. `ArgMax`/`ArgMin` reduce exactly one axis into an `i64`
//!   node, give the index of the first maximum/minimum, count NaN as both the
//!   maximum and the minimum (so the first NaN wins), and **reject an empty
//!   axis**, which has no index to give.
//! - **Views.** `Reshape` reads the input in row-major order; `Permute`: axis
//!   `i` of the node is axis `perm[i]` of the input; `Expand` repeats the
//!   input's size-1 axes (same rank); `Slice` takes `start, start + step, ...`
//!   along `axis`, as many as the node's shape says. All four are one strided
//!   gather.
//! - **Gathers and scatters.** `Gather` reads the input at each index
//!   element's position with coordinate `axis` replaced by the index's
//!   value. `ScatterAdd` starts from zeros of the node's shape and adds
//!   each source element at its position with coordinate `axis` replaced
//!   by the index's value; the sums are exact (f64, or i128 for integers)
//!   and rounded or wrapped once. An index outside the axis is
//!   [`Error::IndexOutOfRange`] for both.
//!
//! # Errors
//!
//! A malformed graph is reported, never run: an input that does not come
//! before its user, a wrong number of inputs, an operand whose shape is not
//! the node's, an inconsistent view or reduction shape, `Data` of another
//! dtype or length, and a dtype an op rejects (listed above).

mod elementwise;
pub mod erf;
mod reduce;
mod scatter;
#[cfg(test)]
mod tests;

use super::op::Op;
use super::subgraph::{SubNode, Subgraph};
use crate::dtype::{DType, Scalar};
use crate::error::{dims, Error, Result};
use crate::ops::{ReduceOp, ScanOp};
use crate::shape::Shape;
use crate::storage::{HostBuffer, Storage};
use elementwise::{binary, select, unary};
use reduce::reduce;

/// Evaluates `graph` unfused and returns one row-major buffer per entry of
/// `graph.outputs`, in order.
///
/// ```
/// use smallvec::smallvec;
/// use tilefuse::graph::{reference::evaluate, BinaryOp, Op, SubNode, Subgraph};
/// use tilefuse::{DType, Scalar, Shape};
///
/// let full = |x: f64| SubNode {
///     op: Op::Full(Scalar::Float(x, DType::F32)),
///     shape: Shape::new(&[2]),
///     dtype: DType::F32,
///     inputs: smallvec![],
/// };
/// let add = SubNode { op: Op::Binary(BinaryOp::Add), inputs: smallvec![0, 1], ..full(0.0) };
/// let graph = Subgraph { nodes: vec![full(1.5), full(2.0), add], outputs: vec![2] };
/// assert_eq!(evaluate(&graph)?[0].to_vec::<f32>(), vec![3.5, 3.5]);
/// # Ok::<(), tilefuse::Error>(())
/// ```
pub fn evaluate(graph: &Subgraph) -> Result<Vec<HostBuffer>> {
    let mut values: Vec<Values> = Vec::with_capacity(graph.nodes.len());
    for (position, node) in graph.nodes.iter().enumerate() {
        if let Some(&late) = node.inputs.iter().find(|&&i| i >= position) {
            let reason = format!("node {position} reads node {late}, which does not come before it");
            return Err(malformed(node, reason));
        }
        let inputs: Vec<Input> = node
            .inputs
            .iter()
            .map(|&i| Input {
                values: &values[i],
                dtype: graph.nodes[i].dtype,
                dims: graph.nodes[i].shape.dims(),
            })
            .collect();
        let result = evaluate_node(node, &inputs)?;
        debug_assert_eq!(
            result.len(),
            node.shape.numel(),
            "{} produced the wrong length",
            node.op.name()
        );
        values.push(result);
    }
    graph
        .outputs
        .iter()
        .map(|&o| match graph.nodes.get(o) {
            Some(node) => Ok(values[o].to_host(node.dtype)),
            None => Err(Error::InvalidShape {
                op: "evaluate",
                shape: dims(&[graph.nodes.len()]),
                arg: graph.outputs.iter().map(|&o| o as isize).collect(),
                reason: format!("output {o} is not a node of the subgraph"),
            }),
        })
        .collect()
}

/// A node's result.
#[derive(Debug, Clone, PartialEq)]
enum Values {
    /// Floats, each already rounded to the node's dtype.
    F(Vec<f64>),
    /// Integers, each already wrapped to the node's dtype.
    I(Vec<i128>),
    /// Bools.
    B(Vec<bool>),
}

/// The three domains values are computed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Float,
    Int,
    Bool,
}

fn kind(dtype: DType) -> Kind {
    if dtype.is_float() {
        Kind::Float
    } else if dtype.is_int() {
        Kind::Int
    } else {
        Kind::Bool
    }
}

impl Values {
    /// Scalars cast to `dtype` (a no-op when they already are of it).
    fn from_scalars(dtype: DType, scalars: impl Iterator<Item = Scalar>) -> Values {
        let cast = scalars.map(|s| s.cast(dtype));
        match kind(dtype) {
            Kind::Float => Values::F(cast.map(Scalar::to_f64).collect()),
            Kind::Int => Values::I(cast.map(int_of).collect()),
            Kind::Bool => Values::B(cast.map(|s| !s.is_zero()).collect()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::F(v) => v.len(),
            Values::I(v) => v.len(),
            Values::B(v) => v.len(),
        }
    }

    /// Element `i`, whose dtype is `dtype`.
    fn get(&self, i: usize, dtype: DType) -> Scalar {
        match self {
            Values::F(v) => Scalar::Float(v[i], dtype),
            Values::I(v) => Scalar::Int(v[i], dtype),
            Values::B(v) => Scalar::Bool(v[i]),
        }
    }

    /// The elements at `offsets`, in that order.
    fn gather(&self, offsets: &[usize]) -> Values {
        match self {
            Values::F(v) => Values::F(offsets.iter().map(|&o| v[o]).collect()),
            Values::I(v) => Values::I(offsets.iter().map(|&o| v[o]).collect()),
            Values::B(v) => Values::B(offsets.iter().map(|&o| v[o]).collect()),
        }
    }

    fn to_host(&self, dtype: DType) -> HostBuffer {
        let mut buffer = HostBuffer::zeros(dtype, self.len());
        for i in 0..self.len() {
            buffer.set(i, self.get(i, dtype));
        }
        buffer
    }
}

/// The integer in a scalar already cast to an integer or bool dtype.
fn int_of(s: Scalar) -> i128 {
    match s {
        Scalar::Int(i, _) => i,
        Scalar::Bool(b) => b as i128,
        Scalar::Float(x, _) => x as i128,
    }
}

/// An operand of the node being evaluated.
struct Input<'a> {
    values: &'a Values,
    dtype: DType,
    dims: &'a [usize],
}

impl Input<'_> {
    fn scalars(&self) -> impl Iterator<Item = Scalar> + '_ {
        (0..self.values.len()).map(|i| self.values.get(i, self.dtype))
    }

    /// The elements cast to float dtype `to`.
    fn floats(&self, to: DType) -> Vec<f64> {
        self.scalars().map(|s| s.cast(to).to_f64()).collect()
    }

    /// The elements cast to integer or bool dtype `to`, as integers.
    fn ints(&self, to: DType) -> Vec<i128> {
        self.scalars().map(|s| int_of(s.cast(to))).collect()
    }

    /// The elements cast to bool.
    fn bools(&self) -> Vec<bool> {
        self.scalars().map(|s| !s.is_zero()).collect()
    }

    /// The elements cast to `to`.
    fn cast(&self, to: DType) -> Values {
        Values::from_scalars(to, self.scalars())
    }
}

fn evaluate_node(node: &SubNode, inputs: &[Input]) -> Result<Values> {
    let arity = match node.op {
        Op::Data(_) | Op::Full(_) => 0,
        Op::Binary(_) | Op::Gather { .. } | Op::ScatterAdd { .. } => 2,
        Op::Where => 3,
        Op::Cat { .. } => inputs.len().max(1),
        _ => 1,
    };
    if inputs.len() != arity {
        return Err(malformed(node, format!("takes {arity} inputs, not {}", inputs.len())));
    }
    if node.op.is_elementwise() {
        if let Some((k, input)) = inputs.iter().enumerate().find(|(_, x)| x.dims != node.shape.dims()) {
            return Err(malformed(
                node,
                format!("operand {k} has shape {:?}, not the node's", input.dims),
            ));
        }
    }
    let dtype = node.dtype;
    let numel = node.shape.numel();
    match &node.op {
        Op::Data(storage) => data(node, storage),
        Op::Full(s) => Ok(Values::from_scalars(dtype, std::iter::repeat(*s).take(numel))),
        Op::Unary(op) => unary(*op, &inputs[0], dtype),
        Op::Binary(op) => binary(*op, &inputs[0], &inputs[1], dtype),
        Op::Where => {
            let cond = inputs[0].bools();
            let (a, b) = (&inputs[1], &inputs[2]);
            Ok(match kind(dtype) {
                Kind::Float => Values::F(select(&cond, a.floats(dtype), b.floats(dtype))),
                Kind::Int => Values::I(select(&cond, a.ints(dtype), b.ints(dtype))),
                Kind::Bool => Values::B(select(&cond, a.bools(), b.bools())),
            })
        }
        Op::Cast => Ok(inputs[0].cast(dtype)),
        Op::Reduce { op, axes } => reduce(node, *op, axes, &inputs[0], inputs.get(1)),
        Op::Reshape | Op::Permute(_) | Op::Expand | Op::Slice { .. } => view(node, &inputs[0]),
        &Op::Cat { axis } => cat(node, axis, inputs),
        &Op::Gather { axis, select } => gather(node, axis, select, &inputs[0], &inputs[1]),
        &Op::Scan { op, axis } => reduce::scan(node, op, axis, &inputs[0]),
        &Op::ScatterAdd { axis, chunked } => scatter::scatter_add(node, axis, chunked, &inputs[0], &inputs[1]),
        Op::Random => random(node, &inputs[0]),
    }
}

/// The uniform values of the node's dtype for the seed `seed` (one i64).
fn random(node: &SubNode, seed: &Input) -> Result<Values> {
    let bits = crate::philox::significand_bits(node.dtype);
    if seed.values.len() != 1 || !seed.dtype.is_int() || bits == 0 {
        return Err(malformed(node, "a random tensor is of a float dtype, from one integer seed".into()));
    }
    let key = int_of(seed.values.get(0, seed.dtype)) as i64 as u64;
    let n = node.shape.numel() as u64;
    Ok(Values::F((0..n).map(|i| crate::philox::uniform(i, key, bits)).collect()))
}

/// `out[p] = input[p with p[axis] = index[p]]`; an index outside the axis
/// is [`Error::IndexOutOfRange`].
fn gather(node: &SubNode, axis: usize, select: bool, input: &Input, index: &Input) -> Result<Values> {
    let out = node.shape.dims();
    let fits = axis < out.len()
        && input.dims.len() == out.len()
        && index.dims == out
        && index.dtype.is_int()
        && input.dtype == node.dtype
        && (0..out.len()).all(|k| k == axis || out[k] <= input.dims[k]);
    if !fits {
        return Err(malformed(node, format!("inputs do not gather along axis {axis} into the node's shape")));
    }
    let strides = crate::shape::Shape::new(input.dims).contiguous_strides();
    let positions = index.ints(DType::I64);
    let len = input.dims[axis];
    let mut scalars = Vec::with_capacity(positions.len());
    for (flat, &at) in positions.iter().enumerate() {
        if at < 0 || at >= len as i128 {
            return Err(Error::IndexOutOfRange {
                op: if select { "index_select" } else { "gather" },
                axis,
                len,
                input: dims(input.dims),
                index: dims(out),
            });
        }
        let (mut rest, mut e) = (flat, 0usize);
        for k in (0..out.len()).rev() {
            let c = if k == axis { at as usize } else { rest % out[k] };
            rest /= out[k];
            e += c * strides[k] as usize;
        }
        scalars.push(input.values.get(e, input.dtype));
    }
    Ok(Values::from_scalars(node.dtype, scalars.into_iter()))
}

/// The inputs one after another along `axis`: each output row of the axes
/// before it is the inputs' rows of that index, in order.
fn cat(node: &SubNode, axis: usize, inputs: &[Input]) -> Result<Values> {
    let out = node.shape.dims();
    let fits = axis < out.len()
        && inputs.iter().all(|x| {
            x.dtype == node.dtype
                && x.dims.len() == out.len()
                && (0..out.len()).all(|k| k == axis || x.dims[k] == out[k])
        })
        && inputs.iter().map(|x| x.dims[axis]).sum::<usize>() == out[axis];
    if !fits {
        return Err(malformed(node, format!("inputs do not join along axis {axis} into the node's shape")));
    }
    let outer: usize = out[..axis].iter().product();
    let inner: usize = out[axis + 1..].iter().product();
    let mut scalars = Vec::with_capacity(node.shape.numel());
    for o in 0..outer {
        for x in inputs {
            let run = x.dims[axis] * inner;
            scalars.extend((o * run..(o + 1) * run).map(|i| x.values.get(i, x.dtype)));
        }
    }
    Ok(Values::from_scalars(node.dtype, scalars.into_iter()))
}

fn data(node: &SubNode, storage: &Storage) -> Result<Values> {
    // Device data is downloaded once; the storage keeps the host copy.
    let buffer = storage.host()?;
    if buffer.dtype() != node.dtype {
        return Err(Error::DTypeMismatch {
            op: "data",
            lhs: node.dtype,
            rhs: buffer.dtype(),
        });
    }
    if buffer.len() != node.shape.numel() {
        return Err(Error::LengthMismatch {
            op: "data",
            len: buffer.len(),
            shape: dims(node.shape.dims()),
        });
    }
    Ok(Values::from_scalars(
        node.dtype,
        (0..buffer.len()).map(|i| buffer.get(i)),
    ))
}

/// A view as a strided gather: each element of the node reads the input at
/// `offset + sum(index * stride)`.
fn view(node: &SubNode, input: &Input) -> Result<Values> {
    let name = op_name(&node.op);
    if input.dtype != node.dtype {
        return Err(Error::DTypeMismatch {
            op: name,
            lhs: input.dtype,
            rhs: node.dtype,
        });
    }
    let (in_dims, out_dims) = (input.dims, node.shape.dims());
    let bad = |reason: &str| Error::InvalidShape {
        op: name,
        shape: dims(in_dims),
        arg: out_dims.iter().map(|&d| d as isize).collect(),
        reason: format!("{reason} (the node's shape is the argument)"),
    };
    let in_strides = row_major_strides(in_dims);
    let (strides, offset) = match &node.op {
        Op::Permute(perm) => {
            let mut seen = vec![false; in_dims.len()];
            let is_perm = perm.len() == in_dims.len()
                && out_dims.len() == in_dims.len()
                && perm
                    .iter()
                    .all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
            if !is_perm || perm.iter().zip(out_dims).any(|(&p, &d)| in_dims[p] != d) {
                return Err(bad(&format!(
                    "{:?} is not a permutation giving the node's shape",
                    perm.as_slice()
                )));
            }
            (perm.iter().map(|&p| in_strides[p]).collect(), 0)
        }
        Op::Expand => {
            let fits = in_dims.len() == out_dims.len() && in_dims.iter().zip(out_dims).all(|(&i, &o)| i == o || i == 1);
            if !fits {
                return Err(bad("only size-1 axes can be expanded, keeping the rank"));
            }
            let strides = in_strides.iter().zip(in_dims.iter().zip(out_dims));
            (strides.map(|(&s, (&i, &o))| if i == o { s } else { 0 }).collect(), 0)
        }
        &Op::Slice { axis, start, step } => {
            let others_kept =
                in_dims.len() == out_dims.len() && (0..in_dims.len()).all(|a| a == axis || in_dims[a] == out_dims[a]);
            if axis >= in_dims.len() || step == 0 || !others_kept {
                return Err(bad(&format!(
                    "slice(axis {axis}, step {step}) does not give the node's shape"
                )));
            }
            let n = out_dims[axis];
            let last = (n.max(1) - 1).checked_mul(step).and_then(|x| x.checked_add(start));
            if n > 0 && last.map_or(true, |last| last >= in_dims[axis]) {
                return Err(bad(&format!(
                    "{n} elements from {start} by {step} run past axis {axis}"
                )));
            }
            let mut strides = in_strides.clone();
            // A single element along `axis` never moves by the stride, however large.
            strides[axis] = strides[axis].saturating_mul(step);
            (strides, if n > 0 { start * in_strides[axis] } else { 0 })
        }
        // The remaining view, `Reshape`, reads the input in row-major order.
        _ if node.shape.numel() != in_dims.iter().product::<usize>() => return Err(bad("the element count changes")),
        _ => (row_major_strides(out_dims), 0),
    };
    Ok(input.values.gather(&strided_offsets(out_dims, &strides, offset)))
}

fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    Shape::new(shape)
        .contiguous_strides()
        .iter()
        .map(|&s| s as usize)
        .collect()
}

/// `offset + sum(index[a] * strides[a])` for every multi-index of `shape`,
/// in row-major order. This one walk serves every view and reduction.
fn strided_offsets(shape: &[usize], strides: &[usize], offset: usize) -> Vec<usize> {
    let numel: usize = shape.iter().product();
    let mut offsets = Vec::with_capacity(numel);
    if numel == 0 {
        return offsets;
    }
    let mut index = vec![0; shape.len()];
    let mut current = offset;
    loop {
        offsets.push(current);
        // Advance the innermost axis, carrying into outer ones.
        let mut axis = shape.len();
        loop {
            if axis == 0 {
                return offsets;
            }
            axis -= 1;
            if index[axis] + 1 < shape[axis] {
                index[axis] += 1;
                current += strides[axis];
                break;
            }
            current -= strides[axis] * index[axis];
            index[axis] = 0;
        }
    }
}

/// The error for a node whose inputs do not fit its op.
fn malformed(node: &SubNode, reason: String) -> Error {
    Error::InvalidShape {
        op: op_name(&node.op),
        shape: dims(node.shape.dims()),
        arg: node.inputs.iter().map(|&i| i as isize).collect(),
        reason,
    }
}

/// The op's name for error messages.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Data(_) => "data",
        Op::Full(_) => "full",
        Op::Unary(u) => u.name(),
        Op::Binary(b) => b.name(),
        Op::Where => "where",
        Op::Cast => "cast",
        Op::Reduce { op, .. } => reduce_name(*op),
        Op::Reshape => "reshape",
        Op::Permute(_) => "permute",
        Op::Expand => "expand",
        Op::Slice { .. } => "slice",
        Op::Cat { .. } => "cat",
        Op::Gather { select: true, .. } => "index_select",
        Op::Scan { op: ScanOp::Sum, .. } => "cumsum",
        Op::Scan { op: ScanOp::Prod, .. } => "cumprod",
        Op::Scan { op: ScanOp::Max, .. } => "cummax",
        Op::Scan { op: ScanOp::Min, .. } => "cummin",
        Op::Scan { .. } => "logcumsumexp",
        Op::Random => "rand",
        Op::Gather { .. } => "gather",
        Op::ScatterAdd { .. } => "scatter_add",
    }
}

fn reduce_name(op: ReduceOp) -> &'static str {
    match op {
        ReduceOp::Sum => "sum",
        ReduceOp::Max => "max",
        ReduceOp::Min => "min",
        ReduceOp::Prod => "prod",
        ReduceOp::ArgMax => "argmax",
        ReduceOp::ArgMin => "argmin",
        ReduceOp::ShiftedExpSum => "shifted_exp_sum",
        ReduceOp::ShiftedSquareSum => "shifted_square_sum",
    }
}
