//! Graphs on both sides of every threshold the GPU plan's schedule chooser
//! uses, for every dtype, shared by the CPU test (`tests/thresholds.rs`,
//! GPU plans on the CPU executor) and the GPU one (`tests/gpu_pipelines.rs`).
//!
//! Each [`Pair`] holds two graphs that differ only in the one extent a
//! threshold looks at, one on each side of it. [`check`] requires the
//! [`signature`]s of their plans to differ, so a pair really straddles its
//! threshold as the chooser sees it (a threshold that moves fails the check
//! instead of leaving a side untested), then runs both against the f64
//! reference. [`sweeps`] adds extents across the choices the PTX emitter
//! makes inside one strategy (rows and columns reduced in registers, rows
//! shorter than a block, several rows a block, odd widths and unaligned
//! offsets of elementwise accesses), which do not show in the plan.
//!
//! The thresholds, as `src/fusion` states them (4-byte elements; halved for
//! 8-byte ones where noted):
//!
//! | threshold | where | extent varied |
//! | --- | --- | --- |
//! | a row reduced and broadcast back in one tile: 16384 (8192 for f64) | `group.rs`, `max_row_tile` | row length |
//! | the same along a strided axis: 8192 elements with 32 of the contiguous axis (4096 for f64) | `group.rs`, `STRIDED_ROW_TILE` | rows |
//! | a column split needs fewer than 264 kept points | `column_split.rs`, `FEW_POINTS` | outer extent |
//! | … at least four partial tiles of rows (4096 elements a tile; 2048 for arg reductions, 1024 for 8-byte ones) | `column_split.rs`, `PARTIAL_TILE` | rows |
//! | … and a million elements | `column_split.rs`, `MIN_ELEMENTS` | rows |
//! | fewer long rows than 132 are split across the grid | `lower.rs`, `FEW_POINTS / 2` | rows |
//! | an argmax or argmin over everything is split as one long row (the column split's million elements) | `lower.rs` | elements |
//! | a full reduction of at least four tiles is split (last point, or atomic when not deterministic) | `lower.rs`, `MIN_SPLIT_TILES` | elements |
//!
//! The index dtype of an arg reduction (i32 while the axis fits it) changes
//! only past 2^31 elements an axis, beyond what a test can allocate.

use super::{Lcg, G};
use std::collections::BTreeMap;
use tilefuse::fusion::{plan, FusionOptions, Plan, Strategy};
use tilefuse::graph::{reference, BinaryOp, ReduceOp, Subgraph, UnaryOp};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Scalar};

/// One graph of a threshold case.
pub struct Case {
    /// What it computes, over which shape and dtype.
    pub label: String,
    /// The graph.
    pub graph: Subgraph,
}

/// Two graphs on either side of one threshold.
pub struct Pair {
    /// The threshold's name.
    pub threshold: &'static str,
    /// The options both are planned with.
    pub options: FusionOptions,
    /// Below the threshold.
    pub below: Case,
    /// At or above it.
    pub above: Case,
}

/// Every dtype a case draws from; each op takes those it is defined on.
const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32];

/// The elements the column split needs (`MIN_ELEMENTS`).
const MILLION: usize = 1 << 20;

/// A `dtype` input of `shape` holding small integers in [-8, 8) (exact in
/// every dtype; maxima are tied many times over, so arg reductions must
/// take the first best index), with a NaN for floats at a third of the
/// elements when `nan`.
fn input(g: &mut G, dtype: DType, shape: &[usize], salt: usize, nan: bool) -> usize {
    let n: usize = shape.iter().product();
    let mut buf = HostBuffer::zeros(dtype, n);
    for i in 0..n {
        let v = ((i * 7919 + i / 3 + salt) % 16) as f64 - 8.0;
        buf.set(i, Scalar::Float(v, DType::F64));
    }
    if nan && dtype.is_float() && n > 0 {
        buf.set(n / 3, Scalar::Float(f64::NAN, DType::F64));
    }
    g.data_buf(buf, shape)
}

/// A reduction a case applies over one axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stat {
    Sum,
    Max,
    Min,
    ArgMax,
    ArgMin,
    Mean,
    /// The two-pass population variance.
    Var,
    /// `max_with_indices` of `-x`: an argmax after an elementwise chain,
    /// with the maximum of the same input beside it (one kernel).
    MaxWithIndex,
    /// `min_with_indices` of `-x`.
    MinWithIndex,
}

impl Stat {
    const ALL: [Stat; 9] = [
        Stat::Sum,
        Stat::Max,
        Stat::Min,
        Stat::ArgMax,
        Stat::ArgMin,
        Stat::Mean,
        Stat::Var,
        Stat::MaxWithIndex,
        Stat::MinWithIndex,
    ];

    fn defined_on(self, d: DType) -> bool {
        d.is_float() || !matches!(self, Stat::Mean | Stat::Var)
    }

    fn is_arg(self) -> bool {
        matches!(
            self,
            Stat::ArgMax | Stat::ArgMin | Stat::MaxWithIndex | Stat::MinWithIndex
        )
    }

    /// The results of `self` of `x` over `axis`, keepdim.
    fn apply(self, g: &mut G, x: usize, axis: usize) -> Vec<usize> {
        if let Stat::MaxWithIndex | Stat::MinWithIndex = self {
            let (arg, best) = match self {
                Stat::MaxWithIndex => (ReduceOp::ArgMax, ReduceOp::Max),
                _ => (ReduceOp::ArgMin, ReduceOp::Min),
            };
            let minus = g.scalar(-1.0, x);
            let c = g.mul(x, minus);
            let i = g.reduce(arg, c, &[axis]);
            let v = g.reduce(best, c, &[axis]);
            return vec![i, v];
        }
        let op = match self {
            Stat::Sum => ReduceOp::Sum,
            Stat::Max => ReduceOp::Max,
            Stat::Min => ReduceOp::Min,
            Stat::ArgMax => ReduceOp::ArgMax,
            Stat::ArgMin => ReduceOp::ArgMin,
            Stat::Mean => return vec![g.mean(x, &[axis])],
            Stat::Var => {
                let m = g.mean(x, &[axis]);
                let d = g.sub(x, m);
                let d2 = g.mul(d, d);
                return vec![g.mean(d2, &[axis])];
            }
            Stat::MaxWithIndex | Stat::MinWithIndex => unreachable!("handled above"),
        };
        vec![g.reduce(op, x, &[axis])]
    }

    /// The elements of one partial tile of a column split of `self` over
    /// `d` values (`PARTIAL_TILE`, halved for 8-byte accumulators, halved
    /// or quartered for arg reductions).
    fn partial_tile(self, d: DType) -> usize {
        if matches!(self, Stat::Var) {
            // A mean's sum and four statistics of the squares, 16 KiB a tile.
            return if d.size_in_bytes() >= 8 { 256 } else { 512 };
        }
        match (self.is_arg(), d.size_in_bytes() >= 8) {
            (false, false) => 4096,
            (false, true) => 2048,
            (true, false) => 2048,
            (true, true) => 1024,
        }
    }
}

/// A row operation that reduces a row and broadcasts the result back over it.
#[derive(Clone, Copy, Debug)]
enum RowOp {
    Softmax,
    /// `x - mean(x)` (`x - max(x)` for integers).
    Centre,
    /// `x * rsqrt(mean(x * x) + 1)`.
    Rms,
}

impl RowOp {
    /// What `self` computes for `d` values.
    fn name(self, d: DType) -> &'static str {
        match self {
            RowOp::Softmax if d.is_float() => "softmax",
            RowOp::Rms if d.is_float() => "x * rsqrt(mean(x * x) + 1)",
            _ if d.is_float() => "x - mean(x)",
            _ => "x - max(x)",
        }
    }

    /// `self` of `x` along `axis`.
    fn apply(self, g: &mut G, x: usize, axis: usize) -> usize {
        let d = g.dtype(x);
        match self {
            RowOp::Softmax if d.is_float() => {
                let m = g.reduce(ReduceOp::Max, x, &[axis]);
                let xm = g.sub(x, m);
                let e = g.unary(UnaryOp::Exp, xm);
                let s = g.reduce(ReduceOp::Sum, e, &[axis]);
                g.div(e, s)
            }
            RowOp::Rms if d.is_float() => {
                let sq = g.mul(x, x);
                let ms = g.mean(sq, &[axis]);
                let one = g.scalar(1.0, x);
                let me = g.add(ms, one);
                let r = g.unary(UnaryOp::Rsqrt, me);
                g.mul(x, r)
            }
            _ if d.is_float() => {
                let m = g.mean(x, &[axis]);
                g.sub(x, m)
            }
            _ => {
                let m = g.reduce(ReduceOp::Max, x, &[axis]);
                g.sub(x, m)
            }
        }
    }
}

/// A graph computing `f` of one `dtype` input of `shape`.
fn case(dtype: DType, shape: &[usize], what: String, f: impl FnOnce(&mut G, usize) -> Vec<usize>) -> Case {
    let mut g = G::default();
    let x = input(&mut g, dtype, shape, shape.len(), true);
    let outs = f(&mut g, x);
    Case {
        label: format!("{what} of {dtype}{shape:?}"),
        graph: g.finish(&outs),
    }
}

/// A stat over `axis` of `shape`.
fn stat_case(stat: Stat, dtype: DType, shape: &[usize], axis: usize) -> Case {
    case(dtype, shape, format!("{stat:?} over axis {axis}"), |g, x| {
        stat.apply(g, x, axis)
    })
}

/// A stat drawn from those defined on `dtype` (and `allowed`).
fn draw_stat(rng: &mut Lcg, dtype: DType, allowed: impl Fn(Stat) -> bool) -> Stat {
    let stats: Vec<Stat> = Stat::ALL
        .into_iter()
        .filter(|&s| s.defined_on(dtype) && allowed(s))
        .collect();
    rng.pick(&stats)
}

/// The pairs of every threshold for every dtype, the ops drawn from `seed`.
pub fn pairs(seed: u64) -> Vec<Pair> {
    let mut rng = Lcg(seed ^ 0x7468_7265_7368_0000);
    let gpu = FusionOptions::gpu();
    let mut out = vec![];
    let mut pair = |threshold, options, below, above| {
        out.push(Pair {
            threshold,
            options,
            below,
            above,
        })
    };
    for dtype in DTYPES {
        let wide = dtype.size_in_bytes() >= 8;
        // A row reduced and broadcast back within one tile, or not.
        let limit = if wide { 8192 } else { 16384 };
        let op = rng.pick(&[RowOp::Softmax, RowOp::Centre, RowOp::Rms]);
        let row = |len: usize| {
            case(dtype, &[3, len], format!("{} along axis 1", op.name(dtype)), |g, x| {
                vec![op.apply(g, x, 1)]
            })
        };
        pair("row kernel length", gpu, row(limit), row(limit + 1));
        // The same with the rows along a strided axis (whole 32-wide lines).
        let rows = if wide { 128 } else { 256 };
        let op = rng.pick(&[RowOp::Centre, RowOp::Rms]);
        let col = |r: usize| {
            case(dtype, &[r, 64], format!("{} along axis 0", op.name(dtype)), |g, x| {
                vec![op.apply(g, x, 0)]
            })
        };
        pair("strided row kernel length", gpu, col(rows), col(rows + 1));
        // A column split needs few kept points: 263 or 264 outer points of
        // one column tile each (a variance there is one row kernel that
        // broadcasts its mean, on both sides).
        let stat = draw_stat(&mut rng, dtype, |s| s != Stat::Var);
        let rows = 4 * stat.partial_tile(dtype) / 1024;
        pair(
            "column split: kept points",
            gpu,
            stat_case(stat, dtype, &[263, rows, 1024], 1),
            stat_case(stat, dtype, &[264, rows, 1024], 1),
        );
        // ... four partial tiles of rows: two columns (row tiles of half
        // the partial tile), enough outer points for a million elements.
        // Not a variance: four of its partial tiles (512 or 256 elements)
        // reach a million elements only with more kept points than a
        // column split takes, whatever the columns, so the million
        // elements decide there.
        let stat = draw_stat(&mut rng, dtype, |s| s != Stat::Var);
        let need = 4 * stat.partial_tile(dtype) / 2;
        let outer = MILLION.div_ceil(2 * need) + 4;
        pair(
            "column split: rows",
            gpu,
            stat_case(stat, dtype, &[outer, need - 1, 2], 1),
            stat_case(stat, dtype, &[outer, need, 2], 1),
        );
        // ... and a million elements: 32 columns.
        let stat = draw_stat(&mut rng, dtype, |_| true);
        pair(
            "column split: elements",
            gpu,
            stat_case(stat, dtype, &[MILLION / 32 - 1, 32], 0),
            stat_case(stat, dtype, &[MILLION / 32, 32], 0),
        );
        // Few long rows reduced along their contiguous axis are split
        // across the grid; 132 or more are a row each (a variance is a row
        // kernel on both sides).
        let stat = draw_stat(&mut rng, dtype, |s| s != Stat::Var);
        pair(
            "few long rows",
            gpu,
            stat_case(stat, dtype, &[131, 16384], 1),
            stat_case(stat, dtype, &[132, 16384], 1),
        );
        // An argmax or argmin over everything: split across the grid as
        // one long row from a million elements.
        let stat = rng.pick(&[Stat::ArgMax, Stat::ArgMin, Stat::MaxWithIndex, Stat::MinWithIndex]);
        pair(
            "arg reduction over everything",
            gpu,
            stat_case(stat, dtype, &[MILLION - 1], 0),
            stat_case(stat, dtype, &[MILLION], 0),
        );
        // A full reduction of three or four tiles (4096 elements each).
        let stat = draw_stat(&mut rng, dtype, |s| !s.is_arg() && s != Stat::Var);
        pair(
            "split full reduction",
            gpu,
            stat_case(stat, dtype, &[3 * 4096], 0),
            stat_case(stat, dtype, &[3 * 4096 + 1], 0),
        );
        // ... adding its partials atomically where order may vary.
        if matches!(dtype, DType::F32 | DType::F64 | DType::I32) {
            let loose = FusionOptions {
                deterministic: false,
                ..gpu
            };
            pair(
                "atomic full reduction",
                loose,
                stat_case(Stat::Sum, dtype, &[3 * 4096], 0),
                stat_case(Stat::Sum, dtype, &[3 * 4096 + 1], 0),
            );
        }
    }
    out
}

/// Extents across the emitter's choices within a strategy, each with a
/// dtype and op drawn from `seed`.
pub fn sweeps(seed: u64) -> Vec<Case> {
    let mut rng = Lcg(seed ^ 0x7377_6565_7000_0000);
    let mut out = vec![];
    // Rows reduced along the contiguous axis: lengths around powers of two
    // from one element to past a block's run of atoms, rows enough for a
    // few hundred thousand elements.
    for len in [
        1usize, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025,
        2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193,
    ] {
        let dtype = rng.pick(&DTYPES);
        let rows = (1 << 18) / len;
        if rng.pick(&[false, true]) {
            let stat = draw_stat(&mut rng, dtype, |_| true);
            out.push(stat_case(stat, dtype, &[rows, len], 1));
        } else {
            let op = rng.pick(&[RowOp::Softmax, RowOp::Centre, RowOp::Rms]);
            out.push(case(
                dtype,
                &[rows, len],
                format!("{} along axis 1", op.name(dtype)),
                |g, x| vec![op.apply(g, x, 1)],
            ));
        }
    }
    // An arg reduction after a chain with the maximum (minimum) beside
    // it, in one kernel, over each strategy's shapes: a row kernel, a
    // column split, few long rows split, everything split as one row.
    for dtype in DTYPES {
        let stat = rng.pick(&[Stat::MaxWithIndex, Stat::MinWithIndex]);
        for (shape, axis) in [
            (vec![67, 1000], 1),
            (vec![MILLION / 32, 32], 0),
            (vec![131, 16384], 1),
            (vec![MILLION + 3, 1], 0),
        ] {
            out.push(stat_case(stat, dtype, &shape, axis));
        }
    }
    // Columns reduced over a leading axis: widths around powers of two.
    for cols in [
        1usize, 2, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 64, 127, 128, 129, 255, 256, 257, 1000, 1024, 1025,
    ] {
        let dtype = rng.pick(&DTYPES);
        let stat = draw_stat(&mut rng, dtype, |_| true);
        let rows = ((1 << 18) / cols).max(3);
        out.push(stat_case(stat, dtype, &[rows, cols], 0));
    }
    // Elementwise: `relu(x * 2 + b)` over odd and even widths (rows past
    // a tile cut evenly among them), `b` along either axis or of `x`'s
    // shape (one axis of an odd element count when both extents are odd),
    // `x` sometimes a slice one element in (unaligned) or a transposed
    // view, the result sometimes cast to another dtype.
    for width in [
        1usize, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 2049, 2817,
    ] {
        let dtype = rng.pick(&DTYPES[..4]);
        let rows = ((1 << 17) / width).max(2) | 1;
        let view = rng.pick(&["plain", "offset", "transposed"]);
        let along = rng.pick(&[0usize, 1, 2]);
        let to = rng.pick(&[None, Some(DType::F32), Some(DType::BF16), Some(DType::F16)]);
        let mut g = G::default();
        let x = match view {
            "offset" => {
                let x = input(&mut g, dtype, &[rows, width + 1], 1, false);
                g.slice(x, 1, 1, 1, width)
            }
            "transposed" => {
                let x = input(&mut g, dtype, &[width, rows], 1, false);
                g.permute(x, &[1, 0])
            }
            _ => input(&mut g, dtype, &[rows, width], 1, false),
        };
        let b_shape = match along {
            0 => vec![width],
            1 => vec![rows, 1],
            _ => vec![rows, width],
        };
        let b = input(&mut g, dtype, &b_shape, 2, false);
        let two = g.scalar(2.0, x);
        let y = g.mul(x, two);
        let y = g.binary(BinaryOp::Add, y, b);
        let mut y = g.unary(UnaryOp::Relu, y);
        if let Some(to) = to {
            y = g.cast(y, to);
        }
        out.push(Case {
            label: format!("relu(x * 2 + b[{b_shape:?}]) of {view} {dtype}[{rows}, {width}] to {to:?}"),
            graph: g.finish(&[y]),
        });
    }
    out
}

/// The strategies of a plan's kernels, in order: what a threshold changes.
pub fn signature(p: &Plan) -> String {
    let kinds: Vec<&str> = p
        .kernels
        .iter()
        .map(|k| match &k.strategy {
            Strategy::Tiled { .. } => "tiled",
            Strategy::RowsTwice { .. } => "rows twice",
            Strategy::Flat { .. } => "flat",
            Strategy::SplitReduction { atomic: true, .. } => "atomic split",
            Strategy::SplitReduction { .. } => "split",
            Strategy::ColumnSplit { .. } => "column split",
            _ => "other",
        })
        .collect();
    kinds.join(" + ")
}

/// Runs a graph's plan on some executor.
pub type Runner<'a> = &'a dyn Fn(&Subgraph, &Plan) -> tilefuse::Result<Vec<HostBuffer>>;

/// Plans, runs and checks every pair of `seed` and every sweep case with
/// `run`: each pair's two signatures differ, each result matches the f64
/// reference, and between them the plans use every strategy. Returns the
/// number of graphs run per signature; panics with every failure.
pub fn check(seed: u64, run: Runner) -> BTreeMap<String, usize> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = vec![];
    let mut one = |case: &Case, options: &FusionOptions, failures: &mut Vec<String>| -> Option<String> {
        let here = &case.label;
        let p = match plan(&case.graph, options) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{here}: plan: {e}"));
                return None;
            }
        };
        let sig = signature(&p);
        *seen.entry(sig.clone()).or_default() += 1;
        let want = reference::evaluate(&case.graph).expect("the reference evaluates every case");
        match run(&case.graph, &p) {
            Ok(got) => {
                for (k, (got, want)) in got.iter().zip(&want).enumerate() {
                    if let Err(e) = super::compare(got, want) {
                        failures.push(format!("{here} ({sig}), output {k}: {e}"));
                    }
                }
            }
            Err(e) => failures.push(format!("{here} ({sig}): {e}")),
        }
        Some(sig)
    };
    for p in pairs(seed) {
        let below = one(&p.below, &p.options, &mut failures);
        let above = one(&p.above, &p.options, &mut failures);
        if let (Some(b), Some(a)) = (below, above) {
            if a == b {
                failures.push(format!(
                    "{}: {} and {} are both planned as {a}",
                    p.threshold, p.below.label, p.above.label
                ));
            }
        }
    }
    let gpu = FusionOptions::gpu();
    for case in sweeps(seed) {
        one(&case, &gpu, &mut failures);
    }
    for kind in ["tiled", "split", "atomic split", "column split"] {
        if !seen.keys().any(|s| s.split(" + ").any(|k| k == kind)) {
            failures.push(format!("no plan used the {kind} strategy: {seen:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    seen
}
