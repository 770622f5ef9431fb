//! The data side of the sweep's cases: random inputs, the f64 value of a
//! case, reading results back, and the check of a result against the
//! value it should have.
//!
//! [`evaluate`] computes a case from its spec in f64, written directly
//! from the math (not through tilefuse's graph), on the inputs' values as
//! stored in the case's dtype: so it checks the expressions
//! `Case::build` records as well as the kernels that run them.

use super::{Binary, Case, Op, Pair, Reduction, RowOp, Step, Unary, LAYER_EPS, RMS_EPS};
use half::{bf16, f16};
use rayon::prelude::*;
use tilefuse::{DType, Result, Tensor};

/// Elements generated from one generator stream, so inputs are made in
/// parallel and stay the same whatever the thread count.
const CHUNK: usize = 1 << 16;

/// The values of one input, in the case's dtype.
pub enum HostData {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl HostData {
    /// The values as f64.
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostData::F16(v) => v.par_iter().map(|x| x.to_f64()).collect(),
            HostData::BF16(v) => v.par_iter().map(|x| x.to_f64()).collect(),
            HostData::F32(v) => v.par_iter().map(|&x| f64::from(x)).collect(),
            HostData::F64(v) => v.clone(),
        }
    }

    /// A host tensor of `shape` holding the values.
    pub fn into_tensor(self, shape: &[usize]) -> Tensor {
        match self {
            HostData::F16(v) => Tensor::from_vec(v, shape),
            HostData::BF16(v) => Tensor::from_vec(v, shape),
            HostData::F32(v) => Tensor::from_vec(v, shape),
            HostData::F64(v) => Tensor::from_vec(v, shape),
        }
    }
}

/// The case's inputs with random values (each from its range, the same
/// for the same case), in the order of `Case::inputs`.
pub fn host_inputs(case: &Case) -> Vec<HostData> {
    case.inputs()
        .iter()
        .enumerate()
        .map(|(k, input)| {
            let n: usize = input.shape.iter().product();
            let seed = super::Rng::new(case.seed, ((case.index as u64) << 8) | k as u64).next_u64();
            let (lo, hi) = input.range;
            match input.dtype_in(case.dtype) {
                DType::F16 => HostData::F16(random(n, lo, hi, seed, f16::from_f64)),
                DType::BF16 => HostData::BF16(random(n, lo, hi, seed, bf16::from_f64)),
                DType::F64 => HostData::F64(random(n, lo, hi, seed, |x| x)),
                _ => HostData::F32(random(n, lo, hi, seed, |x| x as f32)),
            }
        })
        .collect()
}

/// `n` values of the triangular distribution on `[lo, hi]` (the mean of
/// two uniforms: continuous, so never all zeros), made in parallel.
fn random<E: Copy + Default + Send>(
    n: usize,
    lo: f64,
    hi: f64,
    seed: u64,
    convert: impl Fn(f64) -> E + Sync,
) -> Vec<E> {
    let mut out = vec![E::default(); n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, chunk)| {
        let mut rng = super::Rng::new(seed, c as u64);
        for e in chunk {
            let u = rng.unit() + rng.unit();
            *e = convert(lo + (hi - lo) * u / 2.0);
        }
    });
    out
}

/// The elements of a tensor as f64 (float dtypes and i64), realizing it.
pub fn values(t: &Tensor) -> Result<Vec<f64>> {
    Ok(match t.dtype() {
        DType::F16 => t.to_vec::<f16>()?.into_iter().map(f64::from).collect(),
        DType::BF16 => t.to_vec::<bf16>()?.into_iter().map(f64::from).collect(),
        DType::F32 => t.to_vec::<f32>()?.into_iter().map(f64::from).collect(),
        DType::F64 => t.to_vec::<f64>()?,
        DType::I64 => t.to_vec::<i64>()?.into_iter().map(|i| i as f64).collect(),
        other => unreachable!("the sweep makes no {other} outputs"),
    })
}

/// The largest relative error (‖got − want‖ / ‖want‖) a result of `dtype`
/// may have: f16 and bf16 round every stored value to 8 or 11 bits.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        DType::F64 => 1e-10,
        _ => 1e-4,
    }
}

/// Checks `got` against `want` for an output of `dtype`: indices (i64)
/// exactly, floats within [`tolerance`] in relative error. Returns the
/// relative error, or what is wrong.
pub fn compare(got: &[f64], want: &[f64], dtype: DType) -> std::result::Result<f64, String> {
    if got.len() != want.len() {
        return Err(format!("{} elements where {} were expected", got.len(), want.len()));
    }
    if let Some(i) = want.iter().position(|w| !w.is_finite()) {
        return Err(format!("the expected value {} at {i} is not finite", want[i]));
    }
    if dtype == DType::I64 {
        let wrong: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
        return match wrong.first() {
            None => Ok(0.0),
            Some(&i) => Err(format!(
                "{} of {} indices differ; the first at {i}: {} where {} was expected",
                wrong.len(),
                got.len(),
                got[i],
                want[i]
            )),
        };
    }
    if let Some(i) = got.iter().position(|g| !g.is_finite()) {
        return Err(format!("{} at {i} where {} was expected", got[i], want[i]));
    }
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    let err = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
    if err <= tolerance(dtype) {
        return Ok(err);
    }
    let worst = (0..got.len())
        .max_by(|&a, &b| (got[a] - want[a]).abs().total_cmp(&(got[b] - want[b]).abs()))
        .unwrap_or(0);
    Err(format!(
        "relative error {err:.3e} over the tolerance {:.0e}; the largest difference at {worst}: {} where {} was expected",
        tolerance(dtype),
        got[worst],
        want[worst]
    ))
}

/// The case's outputs computed in f64 from its inputs' values (as
/// `Case::inputs` orders them), in the order `Case::build` returns them.
pub fn evaluate(case: &Case, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let x = &inputs[0];
    let dims = &case.dims;
    let identity: Vec<usize> = (0..dims.len()).collect();
    match &case.op {
        Op::Reduce { op, perm, axis } => {
            vec![lanes(x, dims, perm.as_deref().unwrap_or(&identity), *axis, |l| {
                reduction(*op, l)
            })]
        }
        Op::Stats { pair, axis } => {
            let (a, b) = match pair {
                Pair::MeanVar => (Reduction::Mean, Reduction::Var),
                Pair::SumMax => (Reduction::Sum, Reduction::Max),
            };
            vec![
                lanes(x, dims, &identity, *axis, |l| reduction(a, l)),
                lanes(x, dims, &identity, *axis, |l| reduction(b, l)),
            ]
        }
        Op::Arg { max, axis } => vec![lanes(x, dims, &identity, *axis, |l| arg(*max, l))],
        // The written and the library forms compute the same values.
        Op::Row { op, weight, bias, .. } => {
            let n = *dims.last().unwrap_or(&1);
            let w = weight.then(|| inputs[1].as_slice());
            let b = bias.then(|| inputs[1 + usize::from(*weight)].as_slice());
            let mut out = vec![0.0; x.len()];
            out.par_chunks_mut(n)
                .zip(x.par_chunks(n))
                .for_each(|(o, r)| row(*op, r, w, b, o));
            vec![out]
        }
        Op::Chain { steps } => vec![chain(case, steps, inputs)],
        Op::CrossEntropy => {
            // Per row: the log-sum-exp less the label's logit.
            let n = dims[1];
            let out: Vec<f64> = x
                .chunks(n.max(1))
                .zip(&inputs[1])
                .map(|(row, &label)| {
                    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                    lse - row[label.trunc() as usize]
                })
                .collect();
            vec![out]
        }
        Op::Scan { log, axis } => {
            // Each line along the axis in order, in f64.
            let inner: usize = dims[axis + 1..].iter().product();
            let len = dims[*axis];
            let mut out = x.clone();
            for base in (0..x.len()).filter(|b| (b / inner.max(1)) % len.max(1) == 0) {
                for k in 1..len {
                    let (p, v) = (out[base + (k - 1) * inner], out[base + k * inner]);
                    out[base + k * inner] = if *log { log_add_exp(p, v) } else { p + v };
                }
            }
            vec![out]
        }
        Op::Sort { descending } => {
            // Each row's positions in stable order of their values.
            let n = dims[1].max(1);
            let (mut values, mut positions) = (Vec::with_capacity(x.len()), Vec::with_capacity(x.len()));
            for row in x.chunks(n) {
                for p in stable_order(row, *descending) {
                    values.push(row[p]);
                    positions.push(p as f64);
                }
            }
            vec![values, positions]
        }
        Op::TopK { k } => {
            // The first `k` of each row in stable descending order.
            let n = dims[1].max(1);
            let (mut values, mut positions) = (vec![], vec![]);
            for row in x.chunks(n) {
                for p in stable_order(row, true).into_iter().take(*k) {
                    values.push(row[p]);
                    positions.push(p as f64);
                }
            }
            vec![values, positions]
        }
        Op::ScatterAdd { width } => {
            // Each source element added at its position, in row order.
            let n = dims[1].max(1);
            let mut out = inputs[2].clone();
            for (r, (row, index)) in x.chunks(n).zip(inputs[1].chunks(n)).enumerate() {
                for (&v, &at) in row.iter().zip(index) {
                    out[r * width + at.trunc() as usize] += v;
                }
            }
            vec![out]
        }
        Op::Join { then, .. } => {
            // Row by row, each input's row in turn.
            let shapes = case.inputs();
            let rows = inputs[0].len() / dims.last().copied().unwrap_or(1).max(1);
            let mut out = Vec::with_capacity(inputs.iter().map(Vec::len).sum());
            for r in 0..rows {
                for (v, input) in inputs.iter().zip(&shapes) {
                    let w = *input.shape.last().unwrap_or(&1);
                    out.extend(v[r * w..(r + 1) * w].iter().map(|&e| then.map_or(e, |u| unary(u, e))));
                }
            }
            vec![out]
        }
    }
}

/// The positions of `row` in ascending (`descending`: descending) order
/// of their values, equal values in their order along the row.
fn stable_order(row: &[f64], descending: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..row.len()).collect();
    if descending {
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
    } else {
        order.sort_by(|&a, &b| row[a].total_cmp(&row[b]));
    }
    order
}

/// `f` of every lane along `axis` of `x` (of `dims`, row-major) viewed
/// through `perm`, in the row-major order of the other axes of the view.
fn lanes(x: &[f64], dims: &[usize], perm: &[usize], axis: usize, f: impl Fn(&[f64]) -> f64 + Sync) -> Vec<f64> {
    let strides = row_major_strides(dims);
    let view: Vec<(usize, usize)> = perm.iter().map(|&p| (dims[p], strides[p])).collect();
    let (len, stride) = view[axis];
    let kept: Vec<(usize, usize)> = (0..view.len()).filter(|&i| i != axis).map(|i| view[i]).collect();
    let count: usize = kept.iter().map(|k| k.0).product();
    (0..count)
        .into_par_iter()
        .map_init(
            || Vec::with_capacity(len),
            |lane, o| {
                // The base offset of output `o`: its index along each kept axis.
                let (mut rest, mut base) = (o, 0);
                for &(extent, s) in kept.iter().rev() {
                    base += rest % extent * s;
                    rest /= extent;
                }
                lane.clear();
                lane.extend((0..len).map(|k| x[base + k * stride]));
                f(lane)
            },
        )
        .collect()
}

fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for a in (0..dims.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * dims[a + 1];
    }
    strides
}

fn mean(l: &[f64]) -> f64 {
    l.iter().sum::<f64>() / l.len() as f64
}

/// The variance with `n - correction` in the denominator.
fn variance(l: &[f64], correction: usize) -> f64 {
    let m = mean(l);
    l.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (l.len() - correction) as f64
}

fn reduction(op: Reduction, l: &[f64]) -> f64 {
    match op {
        Reduction::Sum => l.iter().sum(),
        Reduction::Mean => mean(l),
        Reduction::Max => l.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Reduction::Min => l.iter().copied().fold(f64::INFINITY, f64::min),
        Reduction::Var => variance(l, 1),
    }
}

/// The index of the first maximum (`max`) or minimum of `l`.
fn arg(max: bool, l: &[f64]) -> f64 {
    let mut best = 0;
    for (i, &v) in l.iter().enumerate() {
        if (max && v > l[best]) || (!max && v < l[best]) {
            best = i;
        }
    }
    best as f64
}

/// One row of a row op into `out`.
fn row(op: RowOp, r: &[f64], w: Option<&[f64]>, b: Option<&[f64]>, out: &mut [f64]) {
    let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match op {
        RowOp::Softmax => {
            let sum: f64 = r.iter().map(|v| (v - max).exp()).sum();
            for (o, v) in out.iter_mut().zip(r) {
                *o = (v - max).exp() / sum;
            }
        }
        RowOp::LogSoftmax => {
            let log_sum = r.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            for (o, v) in out.iter_mut().zip(r) {
                *o = v - max - log_sum;
            }
        }
        RowOp::RmsNorm | RowOp::LayerNorm => {
            let (shift, scale) = if op == RowOp::RmsNorm {
                let ms = r.iter().map(|v| v * v).sum::<f64>() / r.len() as f64;
                (0.0, 1.0 / (ms + RMS_EPS).sqrt())
            } else {
                (mean(r), 1.0 / (variance(r, 0) + LAYER_EPS).sqrt())
            };
            for (i, (o, v)) in out.iter_mut().zip(r).enumerate() {
                *o = (v - shift) * scale * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]);
            }
        }
    }
}

/// An elementwise chain over `x`, its operands read through their broadcasts.
fn chain(case: &Case, steps: &[Step], inputs: &[Vec<f64>]) -> Vec<f64> {
    let dims = &case.dims;
    let strides = row_major_strides(dims);
    // Each operand's stride along each axis of `x`: 0 where it is broadcast.
    let operand_strides: Vec<Vec<usize>> = case.inputs()[1..]
        .iter()
        .map(|input| {
            let full: Vec<usize> = (0..dims.len())
                .map(|a| if input.broadcast.contains(&a) { 1 } else { dims[a] })
                .collect();
            let s = row_major_strides(&full);
            (0..dims.len()).map(|a| if full[a] == 1 { 0 } else { s[a] }).collect()
        })
        .collect();
    (0..inputs[0].len())
        .into_par_iter()
        .map(|i| {
            let index = |k: usize| -> usize {
                (0..dims.len())
                    .map(|a| i / strides[a] % dims[a] * operand_strides[k][a])
                    .sum()
            };
            let mut v = inputs[0][i];
            let mut k = 0;
            for step in steps {
                v = match *step {
                    Step::Unary(u) => unary(u, v),
                    Step::Affine { scale, shift } => v * scale + shift,
                    Step::Operand { op, .. } => {
                        let b = inputs[1 + k][index(k)];
                        k += 1;
                        match op {
                            Binary::Add => v + b,
                            Binary::Sub => v - b,
                            Binary::Mul => v * b,
                            Binary::Maximum => v.max(b),
                        }
                    }
                };
            }
            v
        })
        .collect()
}

/// `log(exp(a) + exp(b))` in f64.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    m + (-(a - b).abs()).exp().ln_1p()
}

fn unary(op: Unary, v: f64) -> f64 {
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    match op {
        Unary::Relu => v.max(0.0),
        Unary::Tanh => v.tanh(),
        Unary::Sigmoid => sigmoid(v),
        Unary::Silu => v * sigmoid(v),
        Unary::Gelu => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())
        }
        Unary::Exp => v.exp(),
        Unary::ExpNegSq => (-v * v).exp(),
        Unary::Log1pAbs => (v.abs() + 1.0).ln(),
        Unary::Sqrt => v.sqrt(),
        Unary::Log => v.ln(),
    }
}
