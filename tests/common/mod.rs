//! A small hand-written graph builder for fusion tests: each method appends
//! one node and returns its position; binary ops broadcast NumPy-style by
//! inserting the reshape and expand nodes the front end would.

#![allow(dead_code)]

pub mod ptx_check;
pub mod reference_programs;

use std::sync::Arc;
use tilefuse::graph::{BinaryOp, Op, ReduceOp, SubNode, Subgraph, UnaryOp};
use tilefuse::storage::{HostBuffer, Storage};
use tilefuse::{DType, Scalar, Shape};

pub mod fuzzgen;
pub mod thresholds;

/// `rows` rows of `cols` (more than 7777) values at the edges of row
/// statistics, repeating every six rows: all `-inf`; one `+inf`; one NaN;
/// one finite value among `-inf`; one repeated value; values whose
/// exponentials overflow f32 unshifted.
pub fn edge_rows(rows: usize, cols: usize) -> tilefuse::Tensor {
    let v: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            let u = ((c * 37 + r * 11) % 101) as f32 / 101.0;
            match r % 6 {
                0 => f32::NEG_INFINITY,
                1 if c == 5000 => f32::INFINITY,
                2 if c == cols - 1 => f32::NAN,
                3 if c == 7777 => 2.5,
                3 => f32::NEG_INFINITY,
                4 => 0.75,
                _ => 80.0 + 8.0 * u,
            }
        })
        .collect();
    tilefuse::Tensor::from_vec(v, &[rows, cols])
}

/// A realized tensor of `shape` whose values `((7i + 13 seed) % 23 - 11) /
/// divisor` (a power-of-two `divisor`) are exact in every dtype.
pub fn exact_tensor(shape: &[usize], dtype: DType, seed: i64, divisor: f64) -> tilefuse::Tensor {
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n as i64)
        .map(|i| ((i * 7 + seed * 13) % 23 - 11) as f64 / divisor)
        .collect();
    let t = tilefuse::Tensor::from_vec(vals, shape).cast(dtype);
    t.realize().unwrap();
    t
}

/// The elements of `t` as f64.
pub fn f64s(t: &tilefuse::Tensor) -> Vec<f64> {
    t.cast(DType::F64).to_vec::<f64>().unwrap()
}

/// A small deterministic generator (a 64-bit LCG, its high bits) for
/// drawing test cases.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// The softmax of each row of `cols` values of `xs`, in f64.
pub fn softmax_rows_f64(xs: &[f32], cols: usize) -> Vec<f64> {
    xs.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}

/// The snapshot directory, `tests/snapshots` under `CARGO_MANIFEST_DIR`, or
/// `None` after printing a line that `test` is skipped when it does not
/// exist (the test binary runs on a machine without the sources).
pub fn snapshot_dir(test: &str) -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("{test}: skipped, no snapshots at {}", dir.display());
        None
    }
}

/// A subgraph under construction.
#[derive(Default)]
pub struct G {
    pub nodes: Vec<SubNode>,
}

impl G {
    pub fn push(&mut self, op: Op, shape: &[usize], dtype: DType, inputs: &[usize]) -> usize {
        self.nodes.push(SubNode {
            op,
            shape: Shape::new(shape),
            dtype,
            inputs: inputs.iter().copied().collect(),
        });
        self.nodes.len() - 1
    }

    pub fn shape(&self, x: usize) -> Vec<usize> {
        self.nodes[x].shape.dims().to_vec()
    }

    pub fn dtype(&self, x: usize) -> DType {
        self.nodes[x].dtype
    }

    /// A data leaf holding `buf`, of `shape`.
    pub fn data_buf(&mut self, buf: HostBuffer, shape: &[usize]) -> usize {
        let dtype = buf.dtype();
        self.push(Op::Data(Arc::new(Storage::Host(buf))), shape, dtype, &[])
    }

    /// A data leaf of zeros.
    pub fn data(&mut self, dtype: DType, shape: &[usize]) -> usize {
        let n = shape.iter().product();
        self.data_buf(HostBuffer::zeros(dtype, n), shape)
    }

    /// A data leaf of f32 values `f(i)`.
    pub fn data_f32(&mut self, shape: &[usize], f: impl Fn(usize) -> f32) -> usize {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(f).collect();
        self.data_buf(HostBuffer::from_elements(&v), shape)
    }

    pub fn full(&mut self, v: f64, dtype: DType, shape: &[usize]) -> usize {
        let s = if dtype.is_float() {
            Scalar::Float(v, dtype)
        } else if dtype == DType::Bool {
            Scalar::Bool(v != 0.0)
        } else {
            Scalar::Int(v as i128, dtype)
        };
        self.push(Op::Full(s), shape, dtype, &[])
    }

    pub fn unary(&mut self, op: UnaryOp, x: usize) -> usize {
        let (s, d) = (self.shape(x), self.dtype(x));
        self.push(Op::Unary(op), &s, d, &[x])
    }

    pub fn cast(&mut self, x: usize, dtype: DType) -> usize {
        let s = self.shape(x);
        self.push(Op::Cast, &s, dtype, &[x])
    }

    /// `x` broadcast to `shape` (reshape to the rank, then expand), if needed.
    pub fn broadcast_to(&mut self, x: usize, shape: &[usize]) -> usize {
        let mut s = self.shape(x);
        let mut x = x;
        if s.len() < shape.len() {
            let mut t = vec![1; shape.len() - s.len()];
            t.extend(&s);
            let d = self.dtype(x);
            x = self.push(Op::Reshape, &t, d, &[x]);
            s = t;
        }
        if s != shape {
            let d = self.dtype(x);
            x = self.push(Op::Expand, shape, d, &[x]);
        }
        x
    }

    pub fn binary(&mut self, op: BinaryOp, a: usize, b: usize) -> usize {
        let shape = Shape::broadcast("test", &self.nodes[a].shape, &self.nodes[b].shape)
            .unwrap()
            .dims()
            .to_vec();
        let a = self.broadcast_to(a, &shape);
        let b = self.broadcast_to(b, &shape);
        let d = if op.is_comparison() { DType::Bool } else { self.dtype(a) };
        self.push(Op::Binary(op), &shape, d, &[a, b])
    }

    pub fn where_(&mut self, c: usize, a: usize, b: usize) -> usize {
        let s = self.shape(a);
        let d = self.dtype(a);
        self.push(Op::Where, &s, d, &[c, a, b])
    }

    pub fn add(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Mul, a, b)
    }
    pub fn div(&mut self, a: usize, b: usize) -> usize {
        self.binary(BinaryOp::Div, a, b)
    }

    /// A scalar constant of `x`'s dtype, shaped `[]`.
    pub fn scalar(&mut self, v: f64, like: usize) -> usize {
        let d = self.dtype(like);
        self.full(v, d, &[])
    }

    /// Reduction over `axes`, keepdim.
    pub fn reduce(&mut self, op: ReduceOp, x: usize, axes: &[usize]) -> usize {
        let mut s = self.shape(x);
        for &a in axes {
            s[a] = 1;
        }
        let d = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
            DType::I64
        } else {
            self.dtype(x)
        };
        self.push(
            Op::Reduce {
                op,
                axes: axes.iter().copied().collect(),
            },
            &s,
            d,
            &[x],
        )
    }

    pub fn reshape(&mut self, x: usize, shape: &[usize]) -> usize {
        let d = self.dtype(x);
        self.push(Op::Reshape, shape, d, &[x])
    }

    pub fn permute(&mut self, x: usize, perm: &[usize]) -> usize {
        let s = self.shape(x);
        let shape: Vec<usize> = perm.iter().map(|&p| s[p]).collect();
        let d = self.dtype(x);
        self.push(Op::Permute(perm.iter().copied().collect()), &shape, d, &[x])
    }

    pub fn slice(&mut self, x: usize, axis: usize, start: usize, step: usize, len: usize) -> usize {
        let mut s = self.shape(x);
        s[axis] = len;
        let d = self.dtype(x);
        self.push(Op::Slice { axis, start, step }, &s, d, &[x])
    }

    /// Mean over `axes`, keepdim: a sum times `1/n`.
    pub fn mean(&mut self, x: usize, axes: &[usize]) -> usize {
        let n: usize = axes.iter().map(|&a| self.shape(x)[a]).product();
        let s = self.reduce(ReduceOp::Sum, x, axes);
        let k = self.scalar(1.0 / n as f64, x);
        self.mul(s, k)
    }

    /// The nodes joined along `axis`.
    pub fn cat(&mut self, xs: &[usize], axis: usize) -> usize {
        let mut s = self.shape(xs[0]);
        s[axis] = xs.iter().map(|&x| self.shape(x)[axis]).sum();
        let d = self.dtype(xs[0]);
        self.push(Op::Cat { axis }, &s, d, xs)
    }

    pub fn finish(self, outputs: &[usize]) -> Subgraph {
        Subgraph {
            nodes: self.nodes,
            outputs: outputs.to_vec(),
        }
    }
}

/// The benchmark pipelines, each on hand-written small shapes.
pub mod pipelines {
    use super::*;

    /// How a pipeline's data leaves are made.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Inputs {
        /// f32 test values (a pattern per input).
        Values,
        /// Zeros of a float dtype. `HostBuffer::zeros` is calloc-backed,
        /// so this is cheap at any size; plans and PTX depend only on
        /// shapes and dtypes.
        Zeros(DType),
    }

    impl Inputs {
        /// A data leaf of `shape`: values `f(i)`, or zeros.
        fn leaf(self, g: &mut G, shape: &[usize], f: impl Fn(usize) -> f32) -> usize {
            match self {
                Inputs::Values => g.data_f32(shape, f),
                Inputs::Zeros(dtype) => g.data(dtype, shape),
            }
        }
    }

    /// `tanh(a*b + c) * sigmoid(a) - exp(-(b*b))` on `[n]`.
    pub fn chain(n: usize) -> Subgraph {
        chain_of(Inputs::Values, n)
    }

    /// [`chain`] with its inputs made as `inputs` says.
    pub fn chain_of(inputs: Inputs, n: usize) -> Subgraph {
        let mut g = G::default();
        let a = inputs.leaf(&mut g, &[n], |i| (i % 97) as f32 / 50.0 - 1.0);
        let b = inputs.leaf(&mut g, &[n], |i| (i % 89) as f32 / 40.0 - 1.0);
        let c = inputs.leaf(&mut g, &[n], |i| (i % 13) as f32 / 7.0);
        let ab = g.mul(a, b);
        let t = g.add(ab, c);
        let t = g.unary(UnaryOp::Tanh, t);
        let s = g.unary(UnaryOp::Sigmoid, a);
        let l = g.mul(t, s);
        let bb = g.mul(b, b);
        let nb = g.unary(UnaryOp::Neg, bb);
        let e = g.unary(UnaryOp::Exp, nb);
        let out = g.sub(l, e);
        g.finish(&[out])
    }

    /// `gelu_tanh(x + bias)`, x `[rows, cols]`, bias `[cols]`.
    pub fn bias_gelu(rows: usize, cols: usize) -> Subgraph {
        bias_gelu_of(Inputs::Values, rows, cols)
    }

    /// [`bias_gelu`] with its inputs made as `inputs` says.
    pub fn bias_gelu_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = inputs.leaf(&mut g, &[rows, cols], |i| (i % 101) as f32 / 25.0 - 2.0);
        let b = inputs.leaf(&mut g, &[cols], |i| (i % 7) as f32 / 10.0);
        let y = g.add(x, b);
        let out = g.unary(UnaryOp::GeluTanh, y);
        g.finish(&[out])
    }

    /// `mean((a - b)^2)` over `[n]`, as a scalar.
    pub fn mse(n: usize) -> Subgraph {
        mse_of(Inputs::Values, n)
    }

    /// [`mse`] with its inputs made as `inputs` says.
    pub fn mse_of(inputs: Inputs, n: usize) -> Subgraph {
        let mut g = G::default();
        let a = inputs.leaf(&mut g, &[n], |i| (i % 31) as f32 / 10.0);
        let b = inputs.leaf(&mut g, &[n], |i| (i % 17) as f32 / 10.0);
        let d = g.sub(a, b);
        let sq = g.mul(d, d);
        let m = g.mean(sq, &[0]);
        let out = g.reshape(m, &[]);
        g.finish(&[out])
    }

    /// `x.sum()` over `[n]`, as a scalar.
    pub fn sum(n: usize) -> Subgraph {
        sum_of(Inputs::Values, n)
    }

    /// [`sum`] with its inputs made as `inputs` says.
    pub fn sum_of(inputs: Inputs, n: usize) -> Subgraph {
        let mut g = G::default();
        let x = inputs.leaf(&mut g, &[n], |i| (i % 11) as f32 / 4.0 - 1.0);
        let s = g.reduce(ReduceOp::Sum, x, &[0]);
        let out = g.reshape(s, &[]);
        g.finish(&[out])
    }

    /// `x.sum(axis 0)` of `[rows, cols]`, as `[cols]`.
    pub fn colsum(rows: usize, cols: usize) -> Subgraph {
        colsum_of(Inputs::Values, rows, cols)
    }

    /// [`colsum`] with its inputs made as `inputs` says.
    pub fn colsum_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = inputs.leaf(&mut g, &[rows, cols], |i| (i % 23) as f32 / 8.0 - 1.0);
        let s = g.reduce(ReduceOp::Sum, x, &[0]);
        let out = g.reshape(s, &[cols]);
        g.finish(&[out])
    }

    fn rows_input(g: &mut G, inputs: Inputs, rows: usize, cols: usize) -> usize {
        inputs.leaf(g, &[rows, cols], |i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
    }

    /// Softmax over the last axis of `[rows, cols]`.
    pub fn softmax(rows: usize, cols: usize) -> Subgraph {
        softmax_of(Inputs::Values, rows, cols)
    }

    /// [`softmax`] with its inputs made as `inputs` says.
    pub fn softmax_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = rows_input(&mut g, inputs, rows, cols);
        let m = g.reduce(ReduceOp::Max, x, &[1]);
        let xm = g.sub(x, m);
        let e = g.unary(UnaryOp::Exp, xm);
        let s = g.reduce(ReduceOp::Sum, e, &[1]);
        let out = g.div(e, s);
        g.finish(&[out])
    }

    /// Log-softmax over the last axis of `[rows, cols]`.
    pub fn log_softmax(rows: usize, cols: usize) -> Subgraph {
        log_softmax_of(Inputs::Values, rows, cols)
    }

    /// [`log_softmax`] with its inputs made as `inputs` says.
    pub fn log_softmax_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = rows_input(&mut g, inputs, rows, cols);
        let m = g.reduce(ReduceOp::Max, x, &[1]);
        let xm = g.sub(x, m);
        let e = g.unary(UnaryOp::Exp, xm);
        let s = g.reduce(ReduceOp::Sum, e, &[1]);
        let l = g.unary(UnaryOp::Log, s);
        let out = g.sub(xm, l);
        g.finish(&[out])
    }

    /// Layer norm over the last axis of `[rows, cols]` with weight and bias.
    pub fn layer_norm(rows: usize, cols: usize) -> Subgraph {
        layer_norm_of(Inputs::Values, rows, cols)
    }

    /// [`layer_norm`] with its inputs made as `inputs` says.
    pub fn layer_norm_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = rows_input(&mut g, inputs, rows, cols);
        let w = inputs.leaf(&mut g, &[cols], |i| 1.0 + (i % 5) as f32 / 10.0);
        let b = inputs.leaf(&mut g, &[cols], |i| (i % 3) as f32 / 10.0);
        let mean = g.mean(x, &[1]);
        let xc = g.sub(x, mean);
        let sq = g.mul(xc, xc);
        let var = g.mean(sq, &[1]);
        let eps = g.scalar(1e-5, x);
        let ve = g.add(var, eps);
        let r = g.unary(UnaryOp::Rsqrt, ve);
        let y = g.mul(xc, r);
        let y = g.mul(y, w);
        let out = g.add(y, b);
        g.finish(&[out])
    }

    /// RMS norm over the last axis of `[rows, cols]` with weight.
    pub fn rms_norm(rows: usize, cols: usize) -> Subgraph {
        rms_norm_of(Inputs::Values, rows, cols)
    }

    /// [`rms_norm`] with its inputs made as `inputs` says.
    pub fn rms_norm_of(inputs: Inputs, rows: usize, cols: usize) -> Subgraph {
        let mut g = G::default();
        let x = rows_input(&mut g, inputs, rows, cols);
        let w = inputs.leaf(&mut g, &[cols], |i| 1.0 + (i % 5) as f32 / 10.0);
        let sq = g.mul(x, x);
        let ms = g.mean(sq, &[1]);
        let eps = g.scalar(1e-6, x);
        let me = g.add(ms, eps);
        let r = g.unary(UnaryOp::Rsqrt, me);
        let y = g.mul(x, r);
        let out = g.mul(y, w);
        g.finish(&[out])
    }
}

/// Runs `plan` for `g` on the CPU executor, returning the outputs.
pub fn run_plan(g: &Subgraph, plan: &tilefuse::fusion::Plan) -> tilefuse::Result<Vec<HostBuffer>> {
    tilefuse::runtime::run_plan_on_host(plan, g)
}

/// Per-dtype tolerance of fused results against the reference evaluator.
///
/// | dtype | allowed difference |
/// | --- | --- |
/// | bool, u8, i32, i64, u32 | none |
/// | f64 | `1e-9 * (|ref| + scale)` |
/// | f32 | `1e-4 * (|ref| + scale)` |
/// | f16 | `2e-2 * (|ref| + scale)` |
/// | bf16 | `8e-2 * (|ref| + scale)` |
///
/// `scale` is the largest magnitude in the reference output (at least 1):
/// sums accumulate f32 in f32 where the reference uses f64, so their error
/// grows with the magnitude of what was summed, not of the result. f16 and
/// bf16 are looser because the reference rounds after every node while a
/// fused kernel rounds once at the store; the two differ by a few ulps per
/// node of the chain. NaN matches NaN, infinities match themselves.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-9,
        DType::F32 => 1e-4,
        DType::F16 => 2e-2,
        DType::BF16 => 8e-2,
        _ => 0.0,
    }
}

/// Compares `got` with `want` under [`tolerance`]; `Err` describes the
/// first mismatch.
pub fn compare(got: &HostBuffer, want: &HostBuffer) -> Result<(), String> {
    compare_with(got, want, tolerance(want.dtype()), 1.0)
}

/// Compares `got` with `want` allowing a difference of `tol * (|want| +
/// scale)`, where `scale` is the larger of `min_scale` and the largest
/// finite magnitude in `want` (see [`tolerance`]).
pub fn compare_with(got: &HostBuffer, want: &HostBuffer, tol: f64, min_scale: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.len() != want.len() {
        return Err(format!(
            "got {}[{}], want {}[{}]",
            got.dtype(),
            got.len(),
            want.dtype(),
            want.len()
        ));
    }
    let scale = (0..want.len())
        .map(|i| want.get(i).to_f64().abs())
        .filter(|x| x.is_finite())
        .fold(min_scale.max(1.0), f64::max);
    for i in 0..want.len() {
        let (g, w) = (got.get(i), want.get(i));
        let ok = match (g, w) {
            (Scalar::Float(a, _), Scalar::Float(b, _)) => {
                (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (b.abs() + scale)
            }
            _ => g == w,
        };
        if !ok {
            return Err(format!(
                "element {i}: got {g}, want {w} (tolerance {tol}, scale {scale})"
            ));
        }
    }
    Ok(())
}
