//! The cases of the random sweep (BENCHMARKS.md, "The sweep"), shared by
//! the sweep report (`examples/sweep.rs`) and its test
//! (`tests/sweep_cases.rs`).
//!
//! A case is an expression of one of the classes users write, over random
//! inputs of one dtype: its structure (op, layout, widths, view, chain of
//! ops) and its shapes are data ([`Case`]), from which [`Case::build`]
//! records it in tilefuse, `reference::evaluate` computes it in f64, and
//! [`Case::spec_json`] describes it for `benches/compare_torch.py --sweep`.
//!
//! Case `index` of seed `seed` is drawn from a generator of its own seeded
//! by `(seed, index)`, so a case does not depend on which others are drawn
//! (a slice of the list is the same cases as in the whole list). Its class
//! is `Class::ALL[index % 7]`, so every seven consecutive cases hold each
//! class once; then its dtype (f32, bf16, f16, f64 in about 40/25/20/15 %),
//! its op and layout, its widths, and a size. Its minimal bytes (every
//! input read once, every output written once) land in
//! `[scale.min_bytes, scale.max_bytes]`, log-uniformly: one extent (the
//! rows, or the reduced extent of a column reduction) is solved for the
//! drawn size, and the widths are drawn up to a cap that keeps one step of
//! that extent under a sixteenth of `min_bytes`. The scale thus sets sizes
//! and caps widths, nothing else.
//!
//! Inputs are drawn from a triangular distribution on `[lo, hi]` (the mean
//! of two uniforms), signed (`[-1.5, 2.5]`) unless an op needs them
//! positive; an f16 sum uses `[-2, 2]` so that its result stays in f16's
//! range. Elementwise chains track a bound on their values and draw only
//! steps that keep them finite and in the domain of the next op.

#![allow(dead_code)]

#[path = "sweep_reference.rs"]
pub mod reference;

use tilefuse::{DType, Result, Tensor};

/// The classes of the sweep, each a label of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// sum/mean/max/min/var over the last (contiguous) axis.
    ReduceInner,
    /// The same over axis 0 of a 2-D tensor or the middle axis of a 3-D one.
    ReduceOuter,
    /// The same through a transposed or permuted view.
    ReduceTransposed,
    /// softmax, log_softmax, rms_norm, layer_norm over rows.
    RowNorm,
    /// Two statistics of one input, realized together.
    Stats,
    /// argmax/argmin over an inner or outer axis.
    Argmax,
    /// Chains of 2–5 elementwise ops with broadcast operands.
    Elementwise,
    /// `cat` of 2–4 pieces along the last axis, maybe followed by a unary
    /// op: not in the default cycle ([`Class::EXTRA`]), asked for with
    /// `--only join`.
    Join,
    /// `cumsum` or `logcumsumexp` along the last axis or axis 0: an extra
    /// ([`Class::EXTRA`]), asked for with `--only scan`.
    Scan,
    /// Cross-entropy of rows of logits with integer labels (a row's
    /// log-sum-exp less its label's logit): an extra asked for with
    /// `--only index`.
    Index,
    /// `sort` or `topk` along the last axis, values and indices: an extra
    /// asked for with `--only order`.
    Order,
    /// `scatter_add` of rows into rows of another width: an extra asked
    /// for with `--only scatter`.
    Scatter,
}

impl Class {
    /// Every class, in the order cases cycle through them.
    pub const ALL: [Class; 7] = [
        Class::ReduceInner,
        Class::ReduceOuter,
        Class::ReduceTransposed,
        Class::RowNorm,
        Class::Stats,
        Class::Argmax,
        Class::Elementwise,
    ];

    /// The classes drawn only when asked for by name: their cases have
    /// indices from [`EXTRA_BASE`], so the default cycle and its case ids
    /// stay as they were.
    pub const EXTRA: [Class; 5] = [Class::Join, Class::Scan, Class::Index, Class::Order, Class::Scatter];

    /// Every class the report labels: the cycle, then the extras.
    pub fn every() -> impl Iterator<Item = Class> {
        Class::ALL.into_iter().chain(Class::EXTRA)
    }

    /// The label of the class in the report and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::ReduceInner => "reduce_inner",
            Class::ReduceOuter => "reduce_outer",
            Class::ReduceTransposed => "reduce_transposed",
            Class::RowNorm => "row_norm",
            Class::Stats => "stats",
            Class::Argmax => "argmax",
            Class::Elementwise => "elementwise",
            Class::Join => "join",
            Class::Scan => "scan",
            Class::Index => "index",
            Class::Order => "order",
            Class::Scatter => "scatter",
        }
    }

    /// The class labelled `name`.
    pub fn parse(name: &str) -> Option<Class> {
        Class::every().find(|c| c.name() == name)
    }
}

/// The sizes cases are drawn at: every case's minimal bytes lie in
/// `[min_bytes, max_bytes]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub min_bytes: u64,
    pub max_bytes: u64,
}

impl Scale {
    /// GPU sizes: at least 256 MiB, over 4× the L2 of current GPUs, and at
    /// most 1.5 GiB, so that 200 cases run in minutes.
    pub const GPU: Scale = Scale {
        min_bytes: 256 << 20,
        max_bytes: 1536 << 20,
    };
    /// CPU sizes: at least 32 MiB, past the last-level cache of most hosts.
    pub const CPU: Scale = Scale {
        min_bytes: 32 << 20,
        max_bytes: 128 << 20,
    };

    /// The most elements a width (or a product of fixed extents) may have
    /// for elements of `dtype`: a sixteenth of `min_bytes`, over four
    /// arrays of that size (input, output, operands).
    fn width_cap(self, dtype: DType) -> usize {
        (self.min_bytes / 64 / dtype.size_in_bytes() as u64).max(2) as usize
    }
}

/// A reduction of the reduce classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    /// Unbiased (divided by `n - 1`), as `Tensor::var` and `torch.var`.
    Var,
}

/// A row op of the row_norm class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowOp {
    Softmax,
    LogSoftmax,
    /// eps 1e-6.
    RmsNorm,
    /// eps 1e-5, biased variance.
    LayerNorm,
}

/// How a row op is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The library's own op (`Tensor::softmax`, `torch.softmax`, ...).
    Library,
    /// Written from elementwise ops and reductions, as a user writes it.
    Written,
}

/// The two statistics of a stats case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    MeanVar,
    SumMax,
}

/// An elementwise op of a chain that takes only the running value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    Relu,
    Tanh,
    Sigmoid,
    Silu,
    /// The tanh approximation.
    Gelu,
    Exp,
    /// `exp(-v * v)`.
    ExpNegSq,
    /// `log(|v| + 1)`.
    Log1pAbs,
    /// Only on positive values.
    Sqrt,
    /// Only on positive values.
    Log,
}

/// A binary op of a chain between the running value and an input operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Maximum,
}

/// One step of an elementwise chain, applied to the running value `v`.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Unary(Unary),
    /// `v * scale + shift` with Rust scalars (exact in every float dtype).
    Affine {
        scale: f64,
        shift: f64,
    },
    /// `v op b`, `b` an input of `x`'s rank with extent 1 on `broadcast`
    /// axes (leading ones dropped from its shape), values on `range`.
    Operand {
        op: Binary,
        broadcast: Vec<usize>,
        range: (f64, f64),
    },
}

/// What a case computes over its input `x` (and its other inputs).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `op` over `axis` of `x` viewed through `perm` (none: `x` itself).
    Reduce {
        op: Reduction,
        perm: Option<Vec<usize>>,
        axis: usize,
    },
    /// Both statistics of `pair` over `axis`, realized together.
    Stats { pair: Pair, axis: usize },
    /// argmax (`max`) or argmin over `axis`.
    Arg { max: bool, axis: usize },
    /// A row op over the last axis, with a weight and bias of shape `[n]`
    /// where asked for (norms only).
    Row {
        op: RowOp,
        form: Form,
        weight: bool,
        bias: bool,
    },
    /// An elementwise chain starting from `x`.
    Chain { steps: Vec<Step> },
    /// `x` and pieces of the given last-axis widths (inputs `p1`, ...)
    /// joined along the last axis, then `then` where given.
    Join { widths: Vec<usize>, then: Option<Unary> },
    /// Running sums (`log`: running log-sum-exps) of `x` along `axis`.
    Scan { log: bool, axis: usize },
    /// Per row of `x`: its log-sum-exp less the logit at the row's label
    /// (input `labels` of shape `[rows, 1]`, truncated to i64).
    CrossEntropy,
    /// The stable sort of each row of `x` (last axis): values, and the i64
    /// positions they came from.
    Sort { descending: bool },
    /// The `k` largest of each row of `x` (last axis), largest first, and
    /// their i64 positions (equal values in their order along the row).
    TopK { k: usize },
    /// `base.scatter_add(1, index, x)`: each row of `x` added into the row
    /// of `base` (input `base` of shape `[rows, width]`) at the positions
    /// in `index` (input of `x`'s shape, floats below `width` truncated to
    /// i64).
    ScatterAdd { width: usize },
}

/// One input of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub name: String,
    pub shape: Vec<usize>,
    /// Values are drawn from the triangular distribution on this range.
    pub range: (f64, f64),
    /// The axes of `x` this input is broadcast along (chain operands).
    pub broadcast: Vec<usize>,
    /// The input's dtype where it is not the case's (cross-entropy's
    /// labels are f32 whatever the logits are, so that every label below
    /// the class count is representable).
    pub dtype: Option<DType>,
}

impl Input {
    /// The dtype the input is made in for a case of `case` dtype.
    pub fn dtype_in(&self, case: DType) -> DType {
        self.dtype.unwrap_or(case)
    }
}

/// One case of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub seed: u64,
    pub index: usize,
    pub class: Class,
    pub dtype: DType,
    /// The shape of `x`, the first input, as stored (row-major).
    pub dims: Vec<usize>,
    /// The range of `x`'s values.
    pub x_range: (f64, f64),
    pub op: Op,
}

/// Signed inputs: both signs, mean 0.5, never all zeros.
pub const SIGNED: (f64, f64) = (-1.5, 2.5);
/// Positive inputs, for ops that need them.
pub const POSITIVE: (f64, f64) = (0.5, 2.5);
/// Zero-mean inputs, for f16 sums.
const CENTRED: (f64, f64) = (-2.0, 2.0);
/// The eps of `rms_norm` and `layer_norm`.
pub const RMS_EPS: f64 = 1e-6;
pub const LAYER_EPS: f64 = 1e-5;

/// The cases `start..start + count` of seed `seed` among those of the
/// classes `only` (all classes when empty), at `scale`.
pub fn cases(seed: u64, start: usize, count: usize, only: &[Class], scale: Scale) -> Vec<Case> {
    let extras = !only.is_empty() && only.iter().all(|c| Class::EXTRA.contains(c));
    let first = if extras { EXTRA_BASE } else { 0 };
    (first..)
        .filter(|&i| only.is_empty() || only.contains(&class_of(i)))
        .skip(start)
        .take(count)
        .map(|i| case(seed, i, scale))
        .collect()
}

/// The first index of the extra classes' cases.
pub const EXTRA_BASE: usize = 10_000;

/// The class of case `index`: the cycle below [`EXTRA_BASE`], the extras from it.
fn class_of(index: usize) -> Class {
    match index.checked_sub(EXTRA_BASE) {
        None => Class::ALL[index % Class::ALL.len()],
        Some(i) => Class::EXTRA[i % Class::EXTRA.len()],
    }
}

/// Case `index` of seed `seed` at `scale`.
pub fn case(seed: u64, index: usize, scale: Scale) -> Case {
    let mut rng = Rng::new(seed, index as u64);
    let class = class_of(index);
    let dtype = match rng.below(20) {
        0..=7 => DType::F32,
        8..=12 => DType::BF16,
        13..=16 => DType::F16,
        _ => DType::F64,
    };
    let cap = scale.width_cap(dtype);
    let (dims, op, free) = match class {
        Class::ReduceInner => reduce_inner(&mut rng, cap),
        Class::ReduceOuter => reduce_outer(&mut rng, cap),
        Class::ReduceTransposed => reduce_transposed(&mut rng, cap),
        Class::RowNorm => row_norm(&mut rng, if dtype == DType::F16 { cap.min(1 << 15) } else { cap }),
        Class::Stats => stats(&mut rng, cap),
        Class::Argmax => argmax(&mut rng, cap),
        Class::Elementwise => elementwise(&mut rng, cap),
        Class::Join => join(&mut rng, cap),
        Class::Scan => scan(&mut rng, cap),
        Class::Index => (vec![1, width(&mut rng, 2, cap)], Op::CrossEntropy, (0, 1)),
        Class::Order => order(&mut rng, cap),
        Class::Scatter => scatter(&mut rng, cap),
    };
    let sums = matches!(
        op,
        Op::Reduce { op: Reduction::Sum, .. } | Op::Stats { pair: Pair::SumMax, .. } | Op::Scan { log: false, .. }
    );
    let x_range = match &op {
        Op::Chain { .. } if rng.chance(0.25) => POSITIVE,
        _ if sums && dtype == DType::F16 => CENTRED,
        _ => SIGNED,
    };
    let mut c = Case {
        seed,
        index,
        class,
        dtype,
        dims,
        x_range,
        op,
    };
    if let Op::Chain { steps } = &mut c.op {
        *steps = chain(&mut rng, c.dims.len(), x_range);
    }
    // Log-uniform over the scale, leaving room for one step of the free
    // extent above the floor.
    let low = scale.min_bytes as f64 * 17.0 / 16.0;
    let target = low * (scale.max_bytes as f64 / low).powf(rng.unit());
    c.fit(free, target as u64, scale);
    c
}

/// The extent of `x` solved for the size, and the least it may be.
type Free = (usize, usize);

fn reduce_inner(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let op = rng.pick(&[
        Reduction::Sum,
        Reduction::Mean,
        Reduction::Max,
        Reduction::Min,
        Reduction::Var,
    ]);
    let n = width(rng, 2, cap);
    let dims = if rng.chance(0.7) {
        vec![1, n]
    } else {
        vec![1, rng.log_uniform(2, 64).min(cap / n).max(1), n]
    };
    let axis = dims.len() - 1;
    (dims, Op::Reduce { op, perm: None, axis }, (0, 1))
}

fn reduce_outer(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let op = rng.pick(&[
        Reduction::Sum,
        Reduction::Mean,
        Reduction::Max,
        Reduction::Min,
        Reduction::Var,
    ]);
    if rng.chance(0.5) {
        let few = rng.chance(0.4);
        let kept = extent(rng, few, cap);
        (
            vec![1, kept],
            Op::Reduce {
                op,
                perm: None,
                axis: 0,
            },
            (0, 2),
        )
    } else {
        // Few or many outer points, each over a reduced middle axis.
        let outer = if rng.chance(0.5) {
            rng.range(1, 8)
        } else {
            rng.log_uniform(32, 4096)
        };
        let few = rng.chance(0.4);
        let inner = extent(rng, few, cap);
        let outer = outer.min(cap / inner).max(1);
        (
            vec![outer, 1, inner],
            Op::Reduce {
                op,
                perm: None,
                axis: 1,
            },
            (1, 2),
        )
    }
}

fn reduce_transposed(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let op = rng.pick(&[
        Reduction::Sum,
        Reduction::Mean,
        Reduction::Max,
        Reduction::Min,
        Reduction::Var,
    ]);
    let n = width(rng, 2, cap);
    if rng.chance(0.5) {
        // The view's last axis is the stored first (strided), or the view's
        // first axis is the stored last (contiguous).
        let strided = rng.chance(0.7);
        let (dims, axis, free) = if strided {
            (vec![n, 1], 1, 1)
        } else {
            (vec![1, n], 0, 0)
        };
        return (
            dims,
            Op::Reduce {
                op,
                perm: Some(vec![1, 0]),
                axis,
            },
            (free, 1),
        );
    }
    let perm = rng
        .pick(&[[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]])
        .to_vec();
    let axis = rng.below(3);
    // `perm[axis]` is the stored axis reduced; of the other two, one is
    // drawn and the other solved for the size.
    let reduced = perm[axis];
    let others: Vec<usize> = (0..3).filter(|&a| a != reduced).collect();
    let (drawn, free) = if rng.chance(0.5) {
        (others[0], others[1])
    } else {
        (others[1], others[0])
    };
    let mut dims = vec![1; 3];
    dims[reduced] = n;
    dims[drawn] = rng.log_uniform(1, 512).min(cap / n).max(1);
    (
        dims,
        Op::Reduce {
            op,
            perm: Some(perm),
            axis,
        },
        (free, 1),
    )
}

fn row_norm(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let op = rng.pick(&[RowOp::Softmax, RowOp::LogSoftmax, RowOp::RmsNorm, RowOp::LayerNorm]);
    let form = rng.pick(&[Form::Library, Form::Written]);
    let norm = matches!(op, RowOp::RmsNorm | RowOp::LayerNorm);
    let weight = norm && rng.chance(0.8);
    let bias = op == RowOp::LayerNorm && rng.chance(0.7);
    let n = width(rng, 17, cap);
    let dims = if rng.chance(0.7) {
        vec![1, n]
    } else {
        vec![1, rng.log_uniform(2, 64).min(cap / n).max(1), n]
    };
    (dims, Op::Row { op, form, weight, bias }, (0, 1))
}

/// The layout of a stats or argmax case: `x`'s shape, the reduced axis and
/// the free extent.
fn statistic_layout(rng: &mut Rng, cap: usize, inner3: bool) -> (Vec<usize>, usize, Free) {
    match rng.below(if inner3 { 4 } else { 3 }) {
        0 => (vec![1, width(rng, 2, cap)], 1, (0, 1)),
        1 => {
            let few = rng.chance(0.4);
            (vec![1, extent(rng, few, cap)], 0, (0, 2))
        }
        2 => {
            let outer = if rng.chance(0.5) {
                rng.range(1, 8)
            } else {
                rng.log_uniform(32, 4096)
            };
            let few = rng.chance(0.4);
            let inner = extent(rng, few, cap);
            (vec![outer.min(cap / inner).max(1), 1, inner], 1, (1, 2))
        }
        _ => {
            let n = width(rng, 2, cap);
            (vec![1, rng.log_uniform(2, 64).min(cap / n).max(1), n], 2, (0, 1))
        }
    }
}

fn stats(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let pair = rng.pick(&[Pair::MeanVar, Pair::SumMax]);
    let (dims, axis, free) = statistic_layout(rng, cap, false);
    (dims, Op::Stats { pair, axis }, free)
}

fn argmax(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let max = rng.chance(0.5);
    let (dims, axis, free) = statistic_layout(rng, cap, true);
    (dims, Op::Arg { max, axis }, free)
}

fn elementwise(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let wide = cap.min(1 << 16);
    let dims = match rng.below(20) {
        0..=3 => vec![1],
        4..=14 => vec![1, elementwise_width(rng, wide)],
        _ => {
            let w = elementwise_width(rng, wide);
            vec![1, rng.log_uniform(2, 256).min(wide / w).max(1), w]
        }
    };
    // The steps are drawn once the input's range is known.
    (dims, Op::Chain { steps: vec![] }, (0, 1))
}

fn join(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let pieces = rng.range(2, 4);
    let wide = (cap.min(1 << 16) / pieces).max(1);
    let mut widths: Vec<usize> = (0..pieces).map(|_| elementwise_width(rng, wide)).collect();
    let first = widths.remove(0);
    let then = rng
        .chance(0.5)
        .then(|| rng.pick(&[Unary::Relu, Unary::Sigmoid, Unary::Gelu, Unary::Tanh]));
    (vec![1, first], Op::Join { widths, then }, (0, 1))
}

fn scan(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let log = rng.chance(0.3);
    if rng.chance(0.7) {
        // Rows of any width, as many as the bytes ask for.
        let width = elementwise_width(rng, cap.min(1 << 16));
        (vec![1, width], Op::Scan { log, axis: 1 }, (0, 1))
    } else {
        // Columns of a length drawn here, as many as the bytes ask for.
        let len = rng.log_uniform(2, 4096);
        (vec![len, 1], Op::Scan { log, axis: 0 }, (1, 1))
    }
}

fn order(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    if rng.chance(0.5) {
        let descending = rng.chance(0.5);
        (
            vec![1, width(rng, 2, cap.min(1 << 16))],
            Op::Sort { descending },
            (0, 1),
        )
    } else {
        // Mostly the selection passes (k up to 8), sometimes a sort.
        let k = if rng.chance(0.8) {
            rng.range(1, 8)
        } else {
            rng.range(9, 64)
        };
        (vec![1, width(rng, k.max(2), cap.min(1 << 16))], Op::TopK { k }, (0, 1))
    }
}

fn scatter(rng: &mut Rng, cap: usize) -> (Vec<usize>, Op, Free) {
    let source = elementwise_width(rng, cap.min(1 << 16)).max(2);
    // Outputs from an eighth of the source width (about eight additions an
    // output element) to twice it.
    let width = rng.log_uniform((source / 8).max(1), 2 * source);
    (vec![1, source], Op::ScatterAdd { width }, (0, 1))
}

/// A last-axis width of an elementwise case, 1 to `cap`.
fn elementwise_width(rng: &mut Rng, cap: usize) -> usize {
    if rng.chance(0.2) {
        rng.range(1, 64)
    } else {
        width(rng, 2, cap)
    }
}

/// A reduced or row width of one of four kinds: short (`least` to 64),
/// medium (multiples of 64, 128 to 8192), long (above 8192: a multiple of
/// 256 or a power of two) or odd (17 and up); at most `cap` and at least
/// `least`.
fn width(rng: &mut Rng, least: usize, cap: usize) -> usize {
    let w = match rng.below(4) {
        0 => rng.range(least, 64),
        1 => 64 * rng.range(2, 128),
        2 => {
            let w = rng.log_uniform(8193, cap.max(8193));
            if rng.chance(0.3) {
                w.next_power_of_two()
            } else {
                w.next_multiple_of(256)
            }
        }
        _ => rng.log_uniform(17, cap.max(17)) | 1,
    };
    w.min(cap).max(least)
}

/// A kept extent: few (1 to 16) or many (17 to `cap`, odd or a multiple of 16).
fn extent(rng: &mut Rng, few: bool, cap: usize) -> usize {
    let e = if few {
        rng.range(1, 16)
    } else {
        let e = rng.log_uniform(17, cap.max(17));
        if rng.chance(0.4) {
            e | 1
        } else {
            e.next_multiple_of(16)
        }
    };
    e.min(cap).max(1)
}

/// What a chain knows of its running value: `|v| <= bound`, and whether
/// `v >= least > 0` holds.
#[derive(Debug, Clone, Copy)]
struct Bound {
    bound: f64,
    positive: Option<f64>,
}

/// The largest `|v|` a chain may reach (finite in f16 with room to spare).
const CHAIN_BOUND: f64 = 1000.0;

/// A chain of 2–5 steps over a value of rank `rank` drawn from `range`.
fn chain(rng: &mut Rng, rank: usize, range: (f64, f64)) -> Vec<Step> {
    let len = rng.range(2, 5);
    let mut at = Bound {
        bound: range.0.abs().max(range.1.abs()),
        positive: (range.0 > 0.0).then_some(range.0),
    };
    let mut steps = vec![];
    // Most chains start with a bias, as `relu(x + bias)` does.
    let mut operand_first = rng.chance(0.75);
    while steps.len() < len {
        let step = if std::mem::take(&mut operand_first) || rng.chance(0.2) {
            Step::Operand {
                op: rng.pick(&[Binary::Add, Binary::Add, Binary::Mul, Binary::Sub, Binary::Maximum]),
                broadcast: broadcast_axes(rng, rank),
                range: if rng.chance(0.3) { POSITIVE } else { SIGNED },
            }
        } else if rng.chance(0.15) {
            Step::Affine {
                scale: rng.pick(&[0.5, 1.5, -0.75, 2.0]),
                shift: rng.pick(&[0.25, -0.5, 1.0]),
            }
        } else {
            Step::Unary(rng.pick(&[
                Unary::Relu,
                Unary::Tanh,
                Unary::Sigmoid,
                Unary::Silu,
                Unary::Gelu,
                Unary::Exp,
                Unary::ExpNegSq,
                Unary::Log1pAbs,
                Unary::Sqrt,
                Unary::Log,
            ]))
        };
        if let Some(next) = after(at, &step).filter(|b| b.bound <= CHAIN_BOUND) {
            at = next;
            steps.push(step);
        }
    }
    steps
}

/// The broadcast axes of an operand of a rank-`rank` value: for rank 2 a
/// row bias (`[n]`, along axis 0) or a column bias (`[m, 1]`), for rank 3
/// any proper subset of the axes but none; sometimes none (a full operand).
fn broadcast_axes(rng: &mut Rng, rank: usize) -> Vec<usize> {
    if rank == 1 || rng.chance(0.1) {
        return vec![];
    }
    let subsets = (1..(1usize << rank) - 1).count();
    let mask = 1 + rng.below(subsets);
    (0..rank).filter(|a| mask & (1 << a) != 0).collect()
}

/// The bound after `step`, or `None` when `step` may not follow.
fn after(at: Bound, step: &Step) -> Option<Bound> {
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    let b = at.bound;
    let p = at.positive;
    let next = |bound, positive| Some(Bound { bound, positive });
    match *step {
        Step::Unary(u) => match u {
            Unary::Relu => next(b, None),
            Unary::Log1pAbs => next((b + 1.0).ln(), None),
            Unary::Tanh => next(1.0, p.map(f64::tanh)),
            Unary::Sigmoid => next(1.0, Some(sigmoid(-b))),
            Unary::Silu => next(b, p.map(|l| l * sigmoid(l))),
            Unary::Gelu => next(b, p.map(|l| 0.5 * l)),
            Unary::Exp if b <= 4.0 => next(b.exp(), Some((-b).exp())),
            Unary::Exp => None,
            Unary::ExpNegSq => next(1.0, (b <= 3.0).then(|| (-b * b).exp())),
            Unary::Sqrt => p.and_then(|l| next(b.sqrt(), Some(l.sqrt()))),
            Unary::Log => p
                .filter(|&l| l >= 1e-3)
                .and_then(|l| next(l.ln().abs().max(b.ln().abs()), None)),
        },
        Step::Affine { scale, shift } => {
            let positive = p.filter(|_| scale > 0.0 && shift >= 0.0).map(|l| scale * l + shift);
            next(scale.abs() * b + shift.abs(), positive)
        }
        Step::Operand { op, ref range, .. } => {
            let (lo, hi) = *range;
            let operand_positive = (lo > 0.0).then_some(lo);
            let extent = lo.abs().max(hi.abs());
            match op {
                Binary::Add => next(b + extent, p.zip(operand_positive).map(|(l, o)| l + o)),
                Binary::Sub => next(b + extent, None),
                Binary::Mul => next(b * extent, p.zip(operand_positive).map(|(l, o)| l * o)),
                Binary::Maximum => {
                    let positive = match (p, operand_positive) {
                        (Some(l), Some(o)) => Some(l.max(o)),
                        (l, o) => l.or(o),
                    };
                    next(b.max(extent), positive)
                }
            }
        }
    }
}

impl Case {
    /// The case's stable id: its seed and index.
    pub fn id(&self) -> String {
        format!("s{}-{:04}", self.seed, self.index)
    }

    /// Its inputs: `x` first, then a norm's weight and bias or a chain's
    /// operands, in the order [`Case::build`] takes them.
    pub fn inputs(&self) -> Vec<Input> {
        let input = |name: String, shape: Vec<usize>, range, broadcast| Input {
            name,
            shape,
            range,
            broadcast,
            dtype: None,
        };
        let mut inputs = vec![input("x".into(), self.dims.clone(), self.x_range, vec![])];
        let n = *self.dims.last().unwrap_or(&1);
        match &self.op {
            Op::Row { weight, bias, .. } => {
                if *weight {
                    inputs.push(input("weight".into(), vec![n], (0.5, 1.5), vec![]));
                }
                if *bias {
                    inputs.push(input("bias".into(), vec![n], (-0.5, 0.5), vec![]));
                }
            }
            Op::CrossEntropy => {
                // Labels as floats below the class count, truncated by the case.
                let classes = *self.dims.last().expect("logits have rows") as f64;
                inputs.push(Input {
                    dtype: Some(DType::F32),
                    ..input("labels".into(), vec![self.dims[0], 1], (0.0, 0.99 * classes), vec![])
                });
            }
            Op::ScatterAdd { width } => {
                // Positions as floats below the width, truncated by the case.
                inputs.push(Input {
                    dtype: Some(DType::F32),
                    ..input("index".into(), self.dims.clone(), (0.0, 0.99 * *width as f64), vec![])
                });
                inputs.push(input("base".into(), vec![self.dims[0], *width], SIGNED, vec![]));
            }
            Op::Join { widths, .. } => {
                let rows = self.dims[..self.dims.len() - 1].to_vec();
                for (k, &w) in widths.iter().enumerate() {
                    let mut shape = rows.clone();
                    shape.push(w);
                    inputs.push(input(format!("p{}", k + 1), shape, self.x_range, vec![]));
                }
            }
            Op::Chain { steps } => {
                for step in steps {
                    if let Step::Operand { broadcast, range, .. } = step {
                        let name = format!("b{}", inputs.len());
                        inputs.push(input(
                            name,
                            operand_shape(&self.dims, broadcast),
                            *range,
                            broadcast.clone(),
                        ));
                    }
                }
            }
            _ => {}
        }
        inputs
    }

    /// The dtypes of its outputs, in the order [`Case::build`] returns
    /// them.
    pub fn output_dtypes(&self) -> Vec<DType> {
        match self.op {
            Op::Arg { .. } => vec![DType::I64],
            Op::Sort { .. } | Op::TopK { .. } => vec![self.dtype, DType::I64],
            _ => vec![self.dtype; self.output_shapes().len()],
        }
    }

    /// The shapes of its outputs, in the order [`Case::build`] returns them.
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        let without = |dims: &[usize], axis: usize| -> Vec<usize> {
            dims.iter()
                .enumerate()
                .filter(|&(i, _)| i != axis)
                .map(|(_, &d)| d)
                .collect()
        };
        match &self.op {
            Op::Reduce { perm, axis, .. } => vec![without(&self.view_dims(perm.as_deref()), *axis)],
            Op::Stats { axis, .. } => vec![without(&self.dims, *axis); 2],
            Op::Arg { axis, .. } => vec![without(&self.dims, *axis)],
            Op::Row { .. } | Op::Chain { .. } | Op::Scan { .. } => vec![self.dims.clone()],
            Op::CrossEntropy => vec![vec![self.dims[0], 1]],
            Op::Sort { .. } => vec![self.dims.clone(); 2],
            Op::TopK { k } => vec![vec![self.dims[0], *k]; 2],
            Op::ScatterAdd { width } => vec![vec![self.dims[0], *width]],
            Op::Join { widths, .. } => {
                let mut d = self.dims.clone();
                *d.last_mut().expect("joins have rows") += widths.iter().sum::<usize>();
                vec![d]
            }
        }
    }

    /// The dims of `x` viewed through `perm`.
    pub fn view_dims(&self, perm: Option<&[usize]>) -> Vec<usize> {
        match perm {
            Some(p) => p.iter().map(|&a| self.dims[a]).collect(),
            None => self.dims.clone(),
        }
    }

    /// Minimal bytes: every input read once, every output written once.
    pub fn bytes(&self) -> u64 {
        let numel = |s: &[usize]| s.iter().product::<usize>() as u64;
        let inputs: u64 = self
            .inputs()
            .iter()
            .map(|i| numel(&i.shape) * i.dtype_in(self.dtype).size_in_bytes() as u64)
            .sum();
        let outputs: u64 = self
            .output_shapes()
            .iter()
            .zip(self.output_dtypes())
            .map(|(s, d)| numel(s) * d.size_in_bytes() as u64)
            .sum();
        inputs + outputs
    }

    /// Sets the free extent `dims[free.0]` (at least `free.1`) so that the
    /// bytes reach `target` and stay within the scale, when it can: the
    /// bytes grow linearly with that extent.
    fn fit(&mut self, free: Free, target: u64, scale: Scale) {
        let (axis, least) = free;
        let mut at = |extent: u64| {
            self.dims[axis] = extent as usize;
            self.bytes()
        };
        let (one, two) = (at(1), at(2));
        let step = two - one;
        let fixed = one - step;
        let mut extent = target.saturating_sub(fixed).div_ceil(step).max(least as u64);
        if extent > least as u64 && fixed + step * extent > scale.max_bytes {
            extent -= 1;
        }
        self.dims[axis] = extent as usize;
    }

    /// Records the case over `inputs` (as [`Case::inputs`] lists them, on
    /// any device) with the Tensor API; unrealized.
    ///
    /// # Errors
    /// An op the API refuses: a bug of the generator, never a skip.
    pub fn build(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = &inputs[0];
        Ok(match &self.op {
            Op::Reduce { op, perm, axis } => {
                let v = match perm.as_deref() {
                    None => x.clone(),
                    Some(p) => match transposition(p) {
                        Some((a, b)) => x.try_transpose(a as isize, b as isize)?,
                        None => x.try_permute(p)?,
                    },
                };
                vec![reduce(&v, *op, *axis)?]
            }
            Op::Stats { pair, axis } => match pair {
                Pair::MeanVar => vec![reduce(x, Reduction::Mean, *axis)?, reduce(x, Reduction::Var, *axis)?],
                Pair::SumMax => vec![reduce(x, Reduction::Sum, *axis)?, reduce(x, Reduction::Max, *axis)?],
            },
            Op::Arg { max: true, axis } => vec![x.try_argmax(*axis as isize, false)?],
            Op::Arg { max: false, axis } => vec![x.try_argmin(*axis as isize, false)?],
            Op::Row { op, form, weight, bias } => {
                let w = weight.then(|| &inputs[1]);
                let b = bias.then(|| &inputs[1 + usize::from(*weight)]);
                vec![row(x, *op, *form, w, b)?]
            }
            Op::CrossEntropy => {
                let labels = inputs[1].try_cast(DType::I64)?;
                let lse = x.try_logsumexp(&[1], true)?;
                vec![lse.try_sub(&x.try_gather(1, &labels)?)?]
            }
            Op::Scan { log: false, axis } => vec![x.try_cumsum(*axis as isize)?],
            Op::Scan { log: true, axis } => vec![x.try_logcumsumexp(*axis as isize)?],
            Op::Sort { descending } => {
                let (values, indices) = x.try_sort(-1, *descending)?;
                vec![values, indices]
            }
            Op::TopK { k } => {
                let (values, indices) = x.try_topk(*k, -1)?;
                vec![values, indices]
            }
            Op::ScatterAdd { .. } => {
                let index = inputs[1].try_cast(DType::I64)?;
                vec![inputs[2].try_scatter_add(1, &index, x)?]
            }
            Op::Join { then, .. } => {
                let pieces: Vec<&Tensor> = inputs.iter().collect();
                let v = Tensor::try_cat(&pieces, -1)?;
                vec![match then {
                    Some(u) => unary(&v, *u)?,
                    None => v,
                }]
            }
            Op::Chain { steps } => {
                let mut v = x.clone();
                let mut operands = inputs[1..].iter();
                for step in steps {
                    v = match step {
                        Step::Unary(u) => unary(&v, *u)?,
                        Step::Affine { scale, shift } => {
                            v.try_mul(&v.scalar_like(*scale))?.try_add(&v.scalar_like(*shift))?
                        }
                        Step::Operand { op, .. } => {
                            let b = operands.next().expect("an input per operand step");
                            match op {
                                Binary::Add => v.try_add(b)?,
                                Binary::Sub => v.try_sub(b)?,
                                Binary::Mul => v.try_mul(b)?,
                                Binary::Maximum => v.try_maximum(b)?,
                            }
                        }
                    };
                }
                vec![v]
            }
        })
    }
}

impl Case {
    /// A one-line account of the expression, for the report's table.
    pub fn describe(&self) -> String {
        let x = format!("x{:?}", self.dims);
        match &self.op {
            Op::Reduce { op, perm, axis } => {
                let v = match perm.as_deref() {
                    None => x,
                    Some(p) => match transposition(p) {
                        Some((a, b)) => format!("{x}.transpose({a}, {b})"),
                        None => format!("{x}.permute({p:?})"),
                    },
                };
                format!("{}({v}, axis {axis})", op.name())
            }
            Op::Stats { pair, axis } => format!("{}({x}, axis {axis})", pair.name()),
            Op::Arg { max, axis } => format!("{}({x}, axis {axis})", if *max { "argmax" } else { "argmin" }),
            Op::Scan { log, axis } => format!("{}({x}, axis {axis})", if *log { "logcumsumexp" } else { "cumsum" }),
            Op::CrossEntropy => format!("cross_entropy({x}, labels[{}, 1])", self.dims[0]),
            Op::Sort { descending } => format!("sort({x}, axis 1{})", if *descending { ", descending" } else { "" }),
            Op::TopK { k } => format!("topk({x}, {k}, axis 1)"),
            Op::ScatterAdd { width } => {
                format!(
                    "base[{}, {width}].scatter_add(1, index{:?}, {x})",
                    self.dims[0], self.dims
                )
            }
            Op::Row { op, form, weight, bias } => format!(
                "{}({x}{}{}), {}",
                op.name(),
                if *weight { ", w" } else { "" },
                if *bias { ", b" } else { "" },
                form.name()
            ),
            Op::Join { then, .. } => {
                let inputs = self.inputs();
                let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
                let text = format!("cat([{}], -1)", names.join(", "));
                let text = then.map_or(text.clone(), |u| format!("{}({text})", u.name()));
                let shapes: Vec<String> = inputs.iter().map(|i| format!("{}{:?}", i.name, i.shape)).collect();
                format!("{text}; {}", shapes.join(" "))
            }
            Op::Chain { steps } => {
                let inputs = self.inputs();
                let mut operands = inputs[1..].iter();
                let mut text = "x".to_string();
                for step in steps {
                    text = match step {
                        Step::Unary(u) => format!("{}({text})", u.name()),
                        Step::Affine { scale, shift } => format!("({text} * {scale} + {shift})"),
                        Step::Operand { op, .. } => {
                            let b = &operands.next().expect("an input per operand step").name;
                            match op {
                                Binary::Add => format!("({text} + {b})"),
                                Binary::Sub => format!("({text} - {b})"),
                                Binary::Mul => format!("({text} * {b})"),
                                Binary::Maximum => format!("maximum({text}, {b})"),
                            }
                        }
                    };
                }
                let shapes: Vec<String> = inputs.iter().map(|i| format!("{}{:?}", i.name, i.shape)).collect();
                format!("{text}; {}", shapes.join(" "))
            }
        }
    }

    /// The case as JSON, enough to rebuild it elsewhere (the `spec` of the
    /// sweep's JSON; `benches/compare_torch.py` documents the fields):
    /// `op`, `dtype`, `shape` (of `x`), `inputs` and `outputs`, and per op
    /// `perm` and `axis` (reductions), `axis` (stats, argmax), `form`,
    /// `weight`, `bias` and `eps` (row ops), `steps` (chains).
    pub fn spec_json(&self) -> String {
        let mut fields = vec![];
        let mut field = |key: &str, value: String| fields.push(format!("\"{key}\": {value}"));
        let op = match &self.op {
            Op::Reduce { op, .. } => op.name(),
            Op::Stats { pair, .. } => pair.name(),
            Op::Arg { max: true, .. } => "argmax",
            Op::Arg { max: false, .. } => "argmin",
            Op::Row { op, .. } => op.name(),
            Op::Chain { .. } => "chain",
            Op::Join { .. } => "cat",
            Op::Scan { log: false, .. } => "cumsum",
            Op::Scan { log: true, .. } => "logcumsumexp",
            Op::CrossEntropy => "cross_entropy",
            Op::Sort { .. } => "sort",
            Op::TopK { .. } => "topk",
            Op::ScatterAdd { .. } => "scatter_add",
        };
        field("op", format!("\"{op}\""));
        field("dtype", format!("\"{}\"", self.dtype));
        field("shape", json_list(&self.dims));
        match &self.op {
            Op::Reduce { perm, axis, .. } => {
                field("perm", perm.as_deref().map_or("null".into(), json_list));
                field("axis", axis.to_string());
            }
            Op::Stats { axis, .. } | Op::Arg { axis, .. } | Op::Scan { axis, .. } => field("axis", axis.to_string()),
            Op::CrossEntropy => field("axis", "1".into()),
            Op::Sort { descending } => {
                field("axis", "1".into());
                field("descending", descending.to_string());
            }
            Op::TopK { k } => {
                field("axis", "1".into());
                field("k", k.to_string());
            }
            Op::ScatterAdd { .. } => field("axis", "1".into()),
            Op::Row { op, form, weight, bias } => {
                field("axis", (self.dims.len() - 1).to_string());
                field("form", format!("\"{}\"", form.name()));
                field("weight", weight.to_string());
                field("bias", bias.to_string());
                let eps = match op {
                    RowOp::RmsNorm => RMS_EPS.to_string(),
                    RowOp::LayerNorm => LAYER_EPS.to_string(),
                    _ => "null".into(),
                };
                field("eps", eps);
            }
            Op::Join { then, .. } => {
                field("axis", (self.dims.len() - 1).to_string());
                field("then", then.map_or("null".into(), |u| format!("\"{}\"", u.name())));
            }
            Op::Chain { steps } => {
                let mut operand = 0;
                let steps: Vec<String> = steps
                    .iter()
                    .map(|s| match s {
                        Step::Unary(u) => format!("{{\"op\": \"{}\"}}", u.name()),
                        Step::Affine { scale, shift } => {
                            format!("{{\"op\": \"affine\", \"scale\": {scale:?}, \"shift\": {shift:?}}}")
                        }
                        Step::Operand { op, .. } => {
                            operand += 1;
                            format!("{{\"op\": \"{}\", \"input\": {operand}}}", op.name())
                        }
                    })
                    .collect();
                field("steps", format!("[{}]", steps.join(", ")));
            }
        }
        let inputs: Vec<String> = self
            .inputs()
            .iter()
            .map(|i| {
                let dtype = i.dtype.map(|d| format!(", \"dtype\": \"{d}\"")).unwrap_or_default();
                format!(
                    "{{\"name\": \"{}\", \"shape\": {}, \"range\": [{:?}, {:?}], \"broadcast_axes\": {}{dtype}}}",
                    i.name,
                    json_list(&i.shape),
                    i.range.0,
                    i.range.1,
                    json_list(&i.broadcast)
                )
            })
            .collect();
        field("inputs", format!("[{}]", inputs.join(", ")));
        let outputs: Vec<String> = self
            .output_shapes()
            .iter()
            .zip(self.output_dtypes())
            .map(|(s, d)| format!("{{\"shape\": {}, \"dtype\": \"{d}\"}}", json_list(s)))
            .collect();
        field("outputs", format!("[{}]", outputs.join(", ")));
        format!("{{{}}}", fields.join(", "))
    }
}

/// `[a, b, c]` as JSON.
pub fn json_list(xs: &[usize]) -> String {
    let items: Vec<String> = xs.iter().map(usize::to_string).collect();
    format!("[{}]", items.join(", "))
}

impl Reduction {
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
            Reduction::Max => "max",
            Reduction::Min => "min",
            Reduction::Var => "var",
        }
    }
}

impl RowOp {
    pub fn name(self) -> &'static str {
        match self {
            RowOp::Softmax => "softmax",
            RowOp::LogSoftmax => "log_softmax",
            RowOp::RmsNorm => "rms_norm",
            RowOp::LayerNorm => "layer_norm",
        }
    }
}

impl Form {
    pub fn name(self) -> &'static str {
        match self {
            Form::Library => "library",
            Form::Written => "written",
        }
    }
}

impl Pair {
    pub fn name(self) -> &'static str {
        match self {
            Pair::MeanVar => "mean_var",
            Pair::SumMax => "sum_max",
        }
    }
}

impl Unary {
    pub fn name(self) -> &'static str {
        match self {
            Unary::Relu => "relu",
            Unary::Tanh => "tanh",
            Unary::Sigmoid => "sigmoid",
            Unary::Silu => "silu",
            Unary::Gelu => "gelu_tanh",
            Unary::Exp => "exp",
            Unary::ExpNegSq => "exp_neg_sq",
            Unary::Log1pAbs => "log1p_abs",
            Unary::Sqrt => "sqrt",
            Unary::Log => "log",
        }
    }
}

impl Binary {
    pub fn name(self) -> &'static str {
        match self {
            Binary::Add => "add",
            Binary::Sub => "sub",
            Binary::Mul => "mul",
            Binary::Maximum => "maximum",
        }
    }
}

/// The shape of an operand broadcast along `broadcast` axes of `dims`:
/// extent 1 there, leading broadcast axes dropped (`[n]` for a row bias).
pub fn operand_shape(dims: &[usize], broadcast: &[usize]) -> Vec<usize> {
    let lead = (0..dims.len()).take_while(|a| broadcast.contains(a)).count();
    (lead..dims.len())
        .map(|a| if broadcast.contains(&a) { 1 } else { dims[a] })
        .collect()
}

/// The two axes `perm` swaps, when it is a transposition.
pub fn transposition(perm: &[usize]) -> Option<(usize, usize)> {
    let moved: Vec<usize> = (0..perm.len()).filter(|&i| perm[i] != i).collect();
    match moved[..] {
        [a, b] => Some((a, b)),
        _ => None,
    }
}

fn reduce(v: &Tensor, op: Reduction, axis: usize) -> Result<Tensor> {
    let axes = [axis as isize];
    match op {
        Reduction::Sum => v.try_sum(&axes, false),
        Reduction::Mean => v.try_mean(&axes, false),
        Reduction::Max => v.try_max(&axes, false),
        Reduction::Min => v.try_min(&axes, false),
        Reduction::Var => v.try_var(&axes, false),
    }
}

fn row(x: &Tensor, op: RowOp, form: Form, w: Option<&Tensor>, b: Option<&Tensor>) -> Result<Tensor> {
    let last = [-1isize];
    let affine = |y: Tensor| -> Result<Tensor> {
        let y = match w {
            Some(w) => y.try_mul(w)?,
            None => y,
        };
        match b {
            Some(b) => y.try_add(b),
            None => Ok(y),
        }
    };
    match (op, form) {
        (RowOp::Softmax, Form::Library) => x.try_softmax(-1),
        (RowOp::LogSoftmax, Form::Library) => x.try_log_softmax(-1),
        (RowOp::RmsNorm, Form::Library) => x.try_rms_norm(w, RMS_EPS),
        (RowOp::LayerNorm, Form::Library) => x.try_layer_norm(w, b, LAYER_EPS),
        (RowOp::Softmax, Form::Written) => {
            let e = x.try_sub(&x.try_max(&last, true)?)?.try_exp()?;
            e.try_div(&e.try_sum(&last, true)?)
        }
        (RowOp::LogSoftmax, Form::Written) => {
            let d = x.try_sub(&x.try_max(&last, true)?)?;
            d.try_sub(&d.try_exp()?.try_sum(&last, true)?.try_log()?)
        }
        (RowOp::RmsNorm, Form::Written) => {
            let ms = x.try_mul(x)?.try_mean(&last, true)?;
            affine(x.try_mul(&ms.try_add(&ms.scalar_like(RMS_EPS))?.try_rsqrt()?)?)
        }
        (RowOp::LayerNorm, Form::Written) => {
            let d = x.try_sub(&x.try_mean(&last, true)?)?;
            let var = d.try_mul(&d)?.try_mean(&last, true)?;
            affine(d.try_mul(&var.try_add(&var.scalar_like(LAYER_EPS))?.try_rsqrt()?)?)
        }
    }
}

fn unary(v: &Tensor, op: Unary) -> Result<Tensor> {
    match op {
        Unary::Relu => v.try_relu(),
        Unary::Tanh => v.try_tanh(),
        Unary::Sigmoid => v.try_sigmoid(),
        Unary::Silu => v.try_silu(),
        Unary::Gelu => v.try_gelu(),
        Unary::Exp => v.try_exp(),
        Unary::ExpNegSq => v.try_mul(v)?.try_neg()?.try_exp(),
        Unary::Log1pAbs => {
            let a = v.try_abs()?;
            a.try_add(&a.scalar_like(1.0))?.try_log()
        }
        Unary::Sqrt => v.try_sqrt(),
        Unary::Log => v.try_log(),
    }
}

/// A small deterministic generator (SplitMix64), one per case.
pub struct Rng(u64);

impl Rng {
    /// The generator of stream `stream` of `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_add(1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n >= 1`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.unit() * n as f64) as usize).min(n - 1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.max(lo) - lo + 1)
    }

    /// Log-uniform in `lo..=hi` (`lo >= 1`).
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = ((lo as f64).ln(), (hi.max(lo) as f64 + 1.0).ln());
        ((l + (h - l) * self.unit()).exp() as usize).clamp(lo, hi.max(lo))
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}
