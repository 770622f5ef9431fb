//! The pipelines of the throughput suite (BENCHMARKS.md), shared by the
//! throughput report (`examples/throughput.rs`) and the GPU criterion
//! benches (`benches/gpu.rs`).
//!
//! A pipeline is its math over input tensors: [`Pipeline::build`] records
//! the expression on whatever device the inputs live on, so one definition
//! runs on the GPU, on the CPU executor, and (on small inputs) through the
//! reference evaluator.

#![allow(dead_code)]

use half::bf16;
use tilefuse::graph::UnaryOp;
use tilefuse::{DType, Tensor};

/// Rows of the matrix pipelines on a GPU.
pub const GPU_ROWS: usize = 16384;
/// Columns of the matrix pipelines on a GPU (the reduced axis of row ops).
pub const GPU_COLS: usize = 4096;
/// Elements of the flat pipelines on a GPU.
pub const GPU_FLAT: usize = 1 << 26;
/// Elements of the flat pipelines on the CPU.
pub const CPU_FLAT: usize = 1 << 24;
/// Rows of the matrix pipelines on the CPU.
pub const CPU_ROWS: usize = 4096;
/// Columns of the matrix pipelines on the CPU.
pub const CPU_COLS: usize = 1024;

/// The math of one pipeline, over its inputs in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Math {
    /// `tanh(a·b + c) · sigmoid(a) − exp(−b²)` over `[a, b, c]`.
    Chain,
    /// `gelu_tanh(x + bias)` over `[x, bias]`.
    BiasGelu,
    /// Row softmax over `[x]`.
    Softmax,
    /// `x · rsqrt(mean(x², −1) + 1e-6) · w` over `[x, w]`.
    RmsNorm,
    /// Layer norm with weight and bias over `[x, w, b]`, eps 1e-5.
    LayerNorm,
    /// `mean((a − b)²)` over `[a, b]`.
    Mse,
    /// `sum(a)` over `[a]`.
    Sum,
    /// `x.sum(axis 0)` over `[x]`.
    ColSum,
    /// One elementwise op over `[x]` (`log` of `|x| + 0.5`).
    Unary(UnaryOp),
    /// `(|a| + 0.5)^b` over `[a, b]`.
    Pow,
}

/// One pipeline of the suite at one size.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// Its id in BENCHMARKS.md.
    pub id: &'static str,
    /// The math.
    pub math: Math,
    /// The element type of its inputs and output.
    pub dtype: DType,
    /// `[rows, cols]` of a matrix pipeline, `[n]` of a flat one.
    pub shape: Vec<usize>,
}

impl Pipeline {
    /// The shapes of its inputs.
    pub fn input_shapes(&self) -> Vec<Vec<usize>> {
        let s = self.shape.clone();
        let row = vec![*s.last().unwrap_or(&1)];
        match self.math {
            Math::Chain => vec![s.clone(), s.clone(), s],
            Math::BiasGelu | Math::RmsNorm => vec![s, row],
            Math::LayerNorm => vec![s, row.clone(), row],
            Math::Mse | Math::Pow => vec![s.clone(), s],
            Math::Softmax | Math::Sum | Math::ColSum | Math::Unary(_) => vec![s],
        }
    }

    /// The expression over `inputs` (on any device), unrealized.
    pub fn build(&self, x: &[Tensor]) -> Tensor {
        match self.math {
            Math::Chain => (&x[0] * &x[1] + &x[2]).tanh() * x[0].sigmoid() - (-(&x[1] * &x[1])).exp(),
            Math::BiasGelu => (&x[0] + &x[1]).gelu(),
            Math::Softmax => x[0].softmax(-1),
            Math::RmsNorm => x[0].rms_norm(Some(&x[1]), 1e-6),
            Math::LayerNorm => x[0].layer_norm(Some(&x[1]), Some(&x[2]), 1e-5),
            Math::Mse => {
                let d = &x[0] - &x[1];
                (&d * &d).mean_all()
            }
            Math::Sum => x[0].sum_all(),
            Math::ColSum => x[0].sum(&[0], false),
            Math::Unary(op) => match op {
                UnaryOp::Exp => x[0].exp(),
                UnaryOp::Log => (&x[0].abs() + 0.5f64).log(),
                UnaryOp::Tanh => x[0].tanh(),
                UnaryOp::Sigmoid => x[0].sigmoid(),
                UnaryOp::Sin => x[0].sin(),
                UnaryOp::GeluErf => x[0].gelu_erf(),
                other => panic!("the suite has no pipeline of {other:?}"),
            },
            Math::Pow => (&x[0].abs() + 0.5f64).pow(&x[1]),
        }
    }

    /// The shape of its output.
    pub fn output_shape(&self) -> Vec<usize> {
        match self.math {
            Math::Mse | Math::Sum => vec![],
            Math::ColSum => vec![self.shape[1]],
            _ => self.shape.clone(),
        }
    }

    /// Its minimal bytes: every input read once, the output written once.
    pub fn bytes(&self) -> u64 {
        let numel = |s: &[usize]| s.iter().product::<usize>() as u64;
        let inputs: u64 = self.input_shapes().iter().map(|s| numel(s)).sum();
        (inputs + numel(&self.output_shape())) * self.dtype.size_in_bytes() as u64
    }

    /// The same pipeline with `rows` rows (matrix) or `rows` elements (flat).
    pub fn resized(&self, rows: usize) -> Pipeline {
        let mut p = self.clone();
        p.shape[0] = rows;
        p
    }

    /// The shape as text, e.g. `[16384, 4096]`.
    pub fn shape_text(&self) -> String {
        format!("{:?}", self.shape)
    }

    /// Random host inputs (never zeros): values in about [−2, 2], the same
    /// for the same `seed`.
    pub fn host_inputs(&self, seed: u64) -> Vec<Tensor> {
        self.input_shapes()
            .iter()
            .enumerate()
            .map(|(i, s)| random(s, self.dtype, seed.wrapping_mul(31).wrapping_add(i as u64)))
            .collect()
    }
}

/// The GPU suite at the sizes of BENCHMARKS.md.
pub fn gpu_suite() -> Vec<Pipeline> {
    let (m, k, n) = (GPU_ROWS, GPU_COLS, GPU_FLAT);
    let p = |id, math, dtype, shape: &[usize]| Pipeline {
        id,
        math,
        dtype,
        shape: shape.to_vec(),
    };
    vec![
        p("chain", Math::Chain, DType::F32, &[n]),
        p("bias_gelu", Math::BiasGelu, DType::F32, &[m, k]),
        p("bias_gelu_bf16", Math::BiasGelu, DType::BF16, &[m, k]),
        p("softmax", Math::Softmax, DType::F32, &[m, k]),
        p("rmsnorm", Math::RmsNorm, DType::F32, &[m, k]),
        p("layernorm", Math::LayerNorm, DType::F32, &[m, k]),
        p("mse", Math::Mse, DType::F32, &[n]),
        p("sum", Math::Sum, DType::F32, &[n]),
        p("colsum", Math::ColSum, DType::F32, &[m, k]),
    ]
}

/// f64 transcendentals at the flat GPU size (`2^25` elements, 512 MiB
/// read and written): not in BENCHMARKS.md; `throughput --f64` measures
/// them against the same copy bandwidth.
pub fn f64_suite() -> Vec<Pipeline> {
    let p = |id, math| Pipeline {
        id,
        math,
        dtype: DType::F64,
        shape: vec![GPU_FLAT / 2],
    };
    vec![
        p("exp_f64", Math::Unary(UnaryOp::Exp)),
        p("log_f64", Math::Unary(UnaryOp::Log)),
        p("tanh_f64", Math::Unary(UnaryOp::Tanh)),
        p("sigmoid_f64", Math::Unary(UnaryOp::Sigmoid)),
        p("sin_f64", Math::Unary(UnaryOp::Sin)),
        p("gelu_erf_f64", Math::Unary(UnaryOp::GeluErf)),
        p("pow_f64", Math::Pow),
    ]
}

/// The GPU suite's pipeline `id`, at its GPU size.
///
/// # Panics
/// If the suite has no pipeline `id`.
pub fn gpu_pipeline(id: &str) -> Pipeline {
    gpu_suite()
        .into_iter()
        .find(|p| p.id == id)
        .unwrap_or_else(|| panic!("the suite has no pipeline `{id}`"))
}

/// The suite's chain on 4096 elements: the small cached pipeline whose host
/// overhead per call the reports measure.
pub fn small_chain() -> Pipeline {
    gpu_pipeline("chain").resized(4096)
}

/// The median of `v` (its upper middle for an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The CPU suite at the sizes of BENCHMARKS.md.
pub fn cpu_suite() -> Vec<Pipeline> {
    let keep = ["chain", "mse", "softmax", "layernorm"];
    gpu_suite()
        .into_iter()
        .filter(|p| keep.contains(&p.id))
        .map(|p| match p.shape.len() {
            1 => p.resized(CPU_FLAT),
            _ => Pipeline {
                shape: vec![CPU_ROWS, CPU_COLS],
                ..p
            },
        })
        .collect()
}

/// A host tensor of `shape` with values in about [−2, 2] (a sum of two
/// uniforms, so not all equal and never all zero).
pub fn random(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // SplitMix64.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let values = (0..n).map(|_| {
        let r = next();
        let u = (r >> 40) as f32 / (1u64 << 24) as f32;
        let v = (r & 0xff_ffff) as f32 / (1u64 << 24) as f32;
        2.0 * (u + v) - 2.0
    });
    match dtype {
        DType::BF16 => Tensor::from_vec(values.map(bf16::from_f32).collect::<Vec<_>>(), shape),
        DType::F64 => Tensor::from_vec(values.map(f64::from).collect::<Vec<_>>(), shape),
        _ => Tensor::from_vec(values.collect::<Vec<f32>>(), shape),
    }
}

/// The elements of a realized tensor as f64 (f32, bf16 and f64 tensors).
pub fn values(t: &Tensor) -> tilefuse::Result<Vec<f64>> {
    match t.dtype() {
        DType::BF16 => Ok(t.to_vec::<bf16>()?.into_iter().map(f64::from).collect()),
        DType::F64 => t.to_vec::<f64>(),
        _ => Ok(t.to_vec::<f32>()?.into_iter().map(f64::from).collect()),
    }
}

/// ‖got − want‖ / ‖want‖, or infinity when `got` has a NaN or the lengths
/// differ.
pub fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() || got.iter().any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

/// The largest relative error a result of `dtype` may have.
pub fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::BF16 | DType::F16 => 1e-2,
        DType::F64 => 1e-13,
        _ => 1e-4,
    }
}
