//! Reductions over a strided axis (a first or middle axis, or one a view
//! makes strided) planned for a GPU: the reduced rows are split across the
//! grid and combined at the last point, for every reduction, argmax and
//! argmin included, every dtype, row counts the parts divide and ones they
//! do not (prime), with and without an outer kept axis. The plans run on
//! the CPU executor and are checked against the f64 reference.

mod common;

use common::ptx_check::{spilling, summary, Modules};
use common::{Lcg, G};
use tilefuse::fusion::{explain, plan, FusionOptions, Strategy};
use tilefuse::graph::{ReduceOp, Subgraph};
use tilefuse::kernels::ptx_gen::ptxas::ptxas_for_tests;
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Scalar};

fn run(g: &Subgraph, opts: &FusionOptions) -> Vec<HostBuffer> {
    common::run_plan(g, &plan(g, opts).unwrap()).unwrap()
}

/// A `dtype` input of `shape` holding small integers in [-8, 8) (exact in
/// every dtype, so sums of narrow floats are exact and maxima are tied
/// many times over), with NaN at the flat positions `nans` (floats only).
fn input(g: &mut G, dtype: DType, shape: &[usize], nans: &[usize]) -> usize {
    let n = shape.iter().product();
    let mut buf = HostBuffer::zeros(dtype, n);
    for i in 0..n {
        let v = ((i * 7919 + i / 3) % 16) as f64 - 8.0;
        buf.set(i, Scalar::Float(v, DType::F64));
    }
    if dtype.is_float() {
        for &i in nans {
            buf.set(i, Scalar::Float(f64::NAN, DType::F64));
        }
    }
    g.data_buf(buf, shape)
}

/// Plans `g` for a GPU, checks it is one kernel split across at least 128
/// grid points that combine at a last point, and that its values on the
/// CPU executor are the reference's.
fn check_split(g: &Subgraph, here: &str) {
    let opts = FusionOptions::gpu();
    let p = plan(g, &opts).unwrap();
    assert_eq!(p.kernels.len(), 1, "{here}: {}", explain(g, &opts).unwrap());
    let k = &p.kernels[0];
    let text = k.program.to_string();
    assert!(text.contains("last_point"), "{here}: {text}");
    assert!(
        matches!(k.strategy, Strategy::ColumnSplit { parts, .. } if parts > 1),
        "{here}: {}",
        k.strategy
    );
    assert!(explain(g, &opts).unwrap().contains("strategy: column split"), "{here}");
    assert!(
        k.program.grid.iter().product::<u64>() >= 128,
        "{here}: grid {:?}",
        k.program.grid
    );
    let want = tilefuse::graph::reference::evaluate(g).unwrap();
    let got = run(g, &opts);
    for (got, want) in got.iter().zip(&want) {
        common::compare(got, want).unwrap_or_else(|e| panic!("{here}: {e}"));
    }
}

/// Shapes and the axis reduced: a first axis with a prime row count (the
/// parts overlap), a middle axis with few outer points, prime and not.
const SHAPES: [(&[usize], usize); 3] = [(&[9973, 130], 0), (&[6, 9973, 40], 1), (&[4, 4096, 72], 1)];

/// Sums, maxima, minima and means over the strided axes of [`SHAPES`],
/// for every dtype (the ops rotate with the case).
fn reduction_cases() -> Vec<(String, Subgraph)> {
    let mut cases = vec![];
    let mut k = 0;
    for (shape, axis) in SHAPES {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32] {
            let ops = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
            let op = ops[k % 3];
            k += 1;
            let mean = dtype.is_float() && k % 2 == 0;
            let mut g = G::default();
            let x = input(&mut g, dtype, shape, &[]);
            let r = if mean {
                g.mean(x, &[axis])
            } else {
                g.reduce(op, x, &[axis])
            };
            let here = format!("{op:?} (mean {mean}) over axis {axis} of {dtype}{shape:?}");
            cases.push((here, g.finish(&[r])));
        }
    }
    cases
}

/// Argmax and argmin over the strided axes of [`SHAPES`], with NaN in
/// some columns, in the first and in a later part, so that the first NaN
/// of a column wins across parts.
fn arg_cases() -> Vec<(String, Subgraph)> {
    let mut cases = vec![];
    for (shape, axis) in SHAPES {
        for dtype in [DType::F32, DType::BF16, DType::F64, DType::I32] {
            for op in [ReduceOp::ArgMax, ReduceOp::ArgMin] {
                let numel: usize = shape.iter().product();
                let cols = *shape.last().unwrap();
                let nans = [
                    3 * cols + 5,
                    numel - 2 * cols + 5,
                    numel / 2 + 7,
                    numel / 2 + 7 + 40 * cols,
                ];
                let mut g = G::default();
                let x = input(&mut g, dtype, shape, &nans);
                let r = g.reduce(op, x, &[axis]);
                let here = format!("{op:?} over axis {axis} of {dtype}{shape:?}");
                cases.push((here, g.finish(&[r])));
            }
        }
    }
    cases
}

/// Reductions through a transposed view: [130, 9973] in memory, seen as
/// [9973, 130], reduced over the view's last axis (memory's first).
fn transposed_cases() -> Vec<(String, Subgraph)> {
    [ReduceOp::Sum, ReduceOp::ArgMax]
        .into_iter()
        .map(|op| {
            let mut g = G::default();
            let x = input(&mut g, DType::F32, &[9973, 130], &[777]);
            let v = g.permute(x, &[1, 0]);
            let r = g.reduce(op, v, &[1]);
            (format!("{op:?} of a transposed [9973, 130]"), g.finish(&[r]))
        })
        .collect()
}

#[test]
fn strided_sums_maxima_and_means_split_across_the_grid_and_match_the_reference() {
    for (here, g) in reduction_cases() {
        check_split(&g, &here);
    }
}

#[test]
fn strided_argmax_and_argmin_split_across_the_grid_take_the_first_best_index() {
    for (here, g) in arg_cases() {
        check_split(&g, &here);
    }
}

#[test]
fn strided_reductions_through_a_transposed_view_split_across_the_grid() {
    for (here, g) in transposed_cases() {
        check_split(&g, &here);
    }
}

#[test]
fn every_split_program_assembles_without_spilling() {
    let Some(ptxas) = ptxas_for_tests("tests/strided_reductions.rs") else {
        return;
    };
    let mut modules = Modules::default();
    let all = [
        reduction_cases(),
        arg_cases(),
        transposed_cases(),
        row_arg_cases(),
        several_column_cases(),
    ]
    .concat();
    for (here, g) in &all {
        for k in &plan(g, &FusionOptions::gpu()).unwrap().kernels {
            modules.add(here, &k.program).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let assembled = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&assembled));
    let spills: Vec<String> = spilling(&assembled).iter().map(|a| a.label.clone()).collect();
    assert!(spills.is_empty(), "spilling: {spills:?}");
}

/// Row argmax and argmin over rows of several tiles: ties across tiles, a
/// NaN in the ragged last tile, a row of one repeated value (its first
/// index), every dtype.
fn row_arg_cases() -> Vec<(String, Subgraph)> {
    let (rows, n) = (3, 20_011);
    let mut cases = vec![];
    for dtype in [DType::F32, DType::F16, DType::F64, DType::I32] {
        for op in [ReduceOp::ArgMax, ReduceOp::ArgMin] {
            let mut buf = HostBuffer::zeros(dtype, rows * n);
            for i in 0..n {
                let v = ((i * 31) % 7) as f64;
                buf.set(i, Scalar::Float(v, DType::F64));
                buf.set(2 * n + i, Scalar::Float(4.0, DType::F64));
            }
            if dtype.is_float() {
                buf.set(n + n - 3, Scalar::Float(f64::NAN, DType::F64));
            }
            let mut g = G::default();
            let x = g.data_buf(buf, &[rows, n]);
            let r = g.reduce(op, x, &[1]);
            cases.push((format!("{op:?} of rows of {dtype}[{rows}, {n}]"), g.finish(&[r])));
        }
    }
    cases
}

#[test]
fn row_argmax_and_argmin_read_their_rows_once_on_the_gpu() {
    let opts = FusionOptions::gpu();
    for (here, g) in row_arg_cases() {
        let p = plan(&g, &opts).unwrap();
        let text = p.kernels[0].program.to_string();
        assert_eq!(text.matches("loop").count(), 1, "{here}: {text}");
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
    }
}

#[test]
fn sibling_reductions_of_one_input_are_one_kernel_that_reads_it_once() {
    // Sum and max of one tensor over one axis: one kernel (split across the
    // grid over a strided axis), both results the reference's.
    for (shape, axis) in SHAPES {
        for dtype in [DType::F32, DType::BF16] {
            let mut g = G::default();
            let x = input(&mut g, dtype, shape, &[]);
            let s = g.reduce(ReduceOp::Sum, x, &[axis]);
            let m = g.reduce(ReduceOp::Max, x, &[axis]);
            let g = g.finish(&[s, m]);
            check_split(&g, &format!("sum and max over axis {axis} of {dtype}{shape:?}"));
        }
    }
    // Over rows, on either target.
    for opts in [FusionOptions::gpu(), FusionOptions::cpu()] {
        let mut g = G::default();
        let x = input(&mut g, DType::F32, &[300, 5000], &[]);
        let s = g.reduce(ReduceOp::Sum, x, &[1]);
        let m = g.reduce(ReduceOp::Min, x, &[1]);
        let g = g.finish(&[s, m]);
        let p = plan(&g, &opts).unwrap();
        assert_eq!(p.kernels.len(), 1, "{:?}: {}", opts.target, explain(&g, &opts).unwrap());
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        for (got, want) in run(&g, &opts).iter().zip(&want) {
            common::compare(got, want).unwrap();
        }
    }
}

/// The two-pass variance of `x` over `axis`: the mean of the squared
/// deviations from the mean.
fn variance(g: &mut G, x: usize, axis: usize) -> usize {
    let shape = g.shape(x);
    let m = g.mean(x, &[axis]);
    let m = g.broadcast_to(m, &shape);
    let d = g.sub(x, m);
    let d2 = g.mul(d, d);
    g.mean(d2, &[axis])
}

#[test]
fn a_variance_over_a_strided_axis_keeps_whole_lines_of_the_contiguous_axis() {
    // A kernel that broadcasts the mean back over the rows must hold whole
    // rows of a 32-wide piece of the contiguous (kept) axis: [8, 7424, 96]
    // cannot (8192 x 32 elements), so its variance is one column split
    // whose runs keep shifted statistics and combine them; [8, 99, 1162]
    // can (128 x 32). One kernel each, with 32 or more columns.
    let opts = FusionOptions::gpu();
    for (shape, kernels) in [([8usize, 7424, 96], 1), ([8, 99, 1162], 1)] {
        let mut g = G::default();
        let x = input(&mut g, DType::F32, &shape, &[]);
        let v = variance(&mut g, x, 1);
        let g = g.finish(&[v]);
        let p = plan(&g, &opts).unwrap();
        let here = format!("variance over axis 1 of {shape:?}");
        assert_eq!(p.kernels.len(), kernels, "{here}: {}", explain(&g, &opts).unwrap());
        for k in &p.kernels {
            let text = k.program.to_string();
            // The views of the input (parameter p0) in the program's text.
            let inner = |line: &str| -> u32 {
                let tile = line.split("tile [").nth(1).and_then(|t| t.split(']').next()).unwrap();
                tile.rsplit(", ").next().unwrap().parse().unwrap()
            };
            let views: Vec<&str> = text.lines().filter(|l| l.contains(" = view p0 ")).collect();
            assert!(
                !views.is_empty() && views.iter().all(|l| inner(l) >= 32),
                "{here}: {text}"
            );
        }
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
    }
}

#[test]
fn a_strided_reduction_with_few_kept_tiles_takes_narrower_ones_to_fill_the_gpu() {
    // 12 rows are too few to split, and 4096-wide tiles of [4, 12, 100000]
    // give 100 grid points: narrower pieces of the contiguous axis (at
    // least 32) give every SM blocks, and the rows the budget they free.
    let mut g = G::default();
    let x = input(&mut g, DType::F32, &[4, 12, 100_000], &[]);
    let r = g.reduce(ReduceOp::Max, x, &[1]);
    let g = g.finish(&[r]);
    let opts = FusionOptions::gpu();
    let p = plan(&g, &opts).unwrap();
    let k = &p.kernels[0];
    assert_eq!(p.kernels.len(), 1);
    assert!(
        k.program.grid.iter().product::<u64>() >= 264,
        "grid {:?}",
        k.program.grid
    );
    assert!(!k.program.to_string().contains("last_point"));
    let want = tilefuse::graph::reference::evaluate(&g).unwrap();
    common::compare(&run(&g, &opts)[0], &want[0]).unwrap();
}

#[test]
fn random_strided_reductions_on_both_sides_of_the_split_thresholds_match_the_reference() {
    // Shapes drawn around the thresholds the GPU plan uses (a million
    // elements, four row tiles, 264 kept grid points, 32-wide kept tiles,
    // rows the parts divide or not), every reduction and dtype, reduced
    // over a first or middle axis, directly or through a transposed view,
    // sometimes with a sibling reduction: GPU plans on the CPU executor
    // against the f64 reference.
    let mut rng = Lcg(0x5eed_2027);
    let opts = FusionOptions::gpu();
    let (mut split, mut unsplit) = (0, 0);
    for case in 0..120 {
        let dtype = rng.pick(&[DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32]);
        let op = rng.pick(&[
            ReduceOp::Sum,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::ArgMax,
            ReduceOp::ArgMin,
            ReduceOp::Sum,
        ]);
        let mean = op == ReduceOp::Sum && dtype.is_float() && rng.below(2) == 0;
        let cols = rng.pick(&[1usize, 5, 31, 32, 33, 96, 130, 257, 1000, 4100]);
        let outer = rng.pick(&[1usize, 1, 2, 3, 7]);
        // Rows near the element threshold for these columns, odd or even.
        let target = (1usize << 20) / (cols * outer);
        let rows = (target as f64 * rng.pick(&[0.3, 0.9, 1.1, 2.5])) as usize | rng.below(2) as usize;
        let rows = rows.clamp(3, 200_000);
        let shape: Vec<usize> = if outer > 1 {
            vec![outer, rows, cols]
        } else {
            vec![rows, cols]
        };
        let axis = shape.len() - 2;
        let transposed = rng.below(4) == 0;
        let sibling = !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) && rng.below(3) == 0;
        let numel: usize = shape.iter().product();
        let nans = [numel / 3, numel / 3 + cols];
        let mut g = G::default();
        let (x, axis) = if transposed {
            // The same memory seen with its last two axes swapped: the
            // reduction over the view's last axis is over memory's rows.
            let x = input(&mut g, dtype, &shape, &nans);
            let mut perm: Vec<usize> = (0..shape.len()).collect();
            perm.swap(axis, axis + 1);
            (g.permute(x, &perm), axis + 1)
        } else {
            (input(&mut g, dtype, &shape, &nans), axis)
        };
        let r = if mean {
            g.mean(x, &[axis])
        } else {
            g.reduce(op, x, &[axis])
        };
        let mut outs = vec![r];
        if sibling {
            outs.push(g.reduce(ReduceOp::Max, x, &[axis]));
        }
        let g = g.finish(&outs);
        let here = format!(
            "case {case}: {op:?} (mean {mean}, sibling {sibling}, transposed {transposed}) over axis {axis} of {dtype}{shape:?}"
        );
        let p = plan(&g, &opts).unwrap_or_else(|e| panic!("{here}: {e}"));
        if p.kernels.iter().any(|k| k.program.to_string().contains("last_point")) {
            split += 1;
        } else {
            unsplit += 1;
        }
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        let got = run(&g, &opts);
        for (got, want) in got.iter().zip(&want) {
            common::compare(got, want).unwrap_or_else(|e| panic!("{here}: {e}"));
        }
    }
    // Both sides of the thresholds were drawn.
    assert!(split >= 20 && unsplit >= 20, "{split} split, {unsplit} not");
}

/// Fewer long rows than the device has multiprocessors, reduced along
/// their contiguous axis: split across the grid (the rows as the outer
/// axis of a column split over a unit column axis), with the reference's
/// values; argmax keeps the first best index across the runs.
#[test]
fn few_long_rows_split_across_the_grid_and_match_the_reference() {
    let shape = [5usize, 1_000_003];
    for (dtype, op, mean) in [
        (DType::F32, ReduceOp::Sum, false),
        (DType::BF16, ReduceOp::Max, false),
        (DType::F32, ReduceOp::Sum, true),
        (DType::I32, ReduceOp::ArgMax, false),
        (DType::F16, ReduceOp::ArgMin, false),
    ] {
        let mut g = G::default();
        let x = input(&mut g, dtype, &shape, &[777_777, 2_500_001]);
        let r = if mean { g.mean(x, &[1]) } else { g.reduce(op, x, &[1]) };
        check_split(
            &g.finish(&[r]),
            &format!("{op:?} (mean {mean}) over the rows of {dtype}{shape:?}"),
        );
    }
}

/// On the CPU, a reduction over a leading or middle axis whose kept
/// columns are fewer than four tiles of 4096 (one grid point a tile) is split
/// across the rows so the pool's threads share it, and matches the
/// reference in every dtype (variances included, two split kernels);
/// wider columns (whose split, as tried, was slower: `benches/NOTES.md`,
/// v33) and arg reductions (two passes on the CPU) keep the tiled plan.
#[test]
fn narrow_column_reductions_split_across_the_rows_on_the_cpu() {
    let opts = FusionOptions::cpu();
    for (k, dtype) in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32]
        .into_iter()
        .enumerate()
    {
        for (shape, axis) in [(&[87383usize, 12][..], 0usize), (&[3, 40961, 11][..], 1)] {
            let mut g = G::default();
            let x = input(&mut g, dtype, shape, &[]);
            let r = if dtype.is_float() && k % 2 == 0 {
                variance(&mut g, x, axis)
            } else {
                g.reduce([ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min][k % 3], x, &[axis])
            };
            let g = g.finish(&[r]);
            let here = format!("{dtype}{shape:?} over axis {axis}");
            let p = plan(&g, &opts).unwrap();
            assert!(
                p.kernels
                    .iter()
                    .all(|k| matches!(k.strategy, Strategy::ColumnSplit { parts, .. } if parts > 1)),
                "{here}: {}",
                explain(&g, &opts).unwrap()
            );
            let want = tilefuse::graph::reference::evaluate(&g).unwrap();
            for (got, want) in run(&g, &opts).iter().zip(&want) {
                common::compare(got, want).unwrap_or_else(|e| panic!("{here}: {e}"));
            }
        }
    }
    for op in [ReduceOp::Sum, ReduceOp::ArgMax] {
        let (shape, axis) = if op == ReduceOp::Sum {
            (&[512usize, 20000][..], 0)
        } else {
            (&[87383usize, 12][..], 0)
        };
        let mut g = G::default();
        let x = input(&mut g, DType::F32, shape, &[]);
        let r = g.reduce(op, x, &[axis]);
        let g = g.finish(&[r]);
        let p = plan(&g, &opts).unwrap();
        assert!(
            p.kernels
                .iter()
                .all(|k| !matches!(k.strategy, Strategy::ColumnSplit { .. })),
            "{op:?} of {shape:?}: {}",
            explain(&g, &opts).unwrap()
        );
    }
}

/// Reductions over a strided axis whose kept axes after the rows do not
/// coalesce, because the result orders them otherwise than memory does
/// (a permuted view): the split keeps them as column axes of their own,
/// with an outer kept axis or without, for sums, means, maxima and arg
/// reductions.
fn several_column_cases() -> Vec<(String, Subgraph)> {
    /// Shape, permutation, dtype, reduction, and whether it is a mean.
    type Case = (&'static [usize], &'static [usize], DType, ReduceOp, bool);
    let cases: [Case; 6] = [
        (&[4001, 130, 3], &[2, 0, 1], DType::F16, ReduceOp::Sum, false),
        (&[4001, 130, 3], &[2, 0, 1], DType::F32, ReduceOp::Sum, true),
        (&[4001, 130, 3], &[2, 0, 1], DType::BF16, ReduceOp::ArgMax, false),
        (&[4001, 130, 3], &[2, 0, 1], DType::I32, ReduceOp::Max, false),
        (&[3, 4001, 5, 67], &[0, 1, 3, 2], DType::F64, ReduceOp::Min, false),
        (&[3, 4001, 5, 67], &[0, 1, 3, 2], DType::F32, ReduceOp::ArgMin, false),
    ];
    cases
        .into_iter()
        .map(|(shape, perm, dtype, op, mean)| {
            let numel: usize = shape.iter().product();
            let mut g = G::default();
            let x = input(&mut g, dtype, shape, &[numel / 3, numel / 3 + 7, numel - 5]);
            let v = g.permute(x, perm);
            let r = if mean { g.mean(v, &[1]) } else { g.reduce(op, v, &[1]) };
            let here = format!("{op:?} (mean {mean}) over axis 1 of {dtype}{shape:?} permuted {perm:?}");
            (here, g.finish(&[r]))
        })
        .collect()
}

#[test]
fn strided_reductions_with_several_kept_axes_after_the_rows_split_across_the_grid() {
    for (here, g) in several_column_cases() {
        check_split(&g, &here);
        // The columns stay apart: the strategy names two column axes.
        let k = &plan(&g, &FusionOptions::gpu()).unwrap().kernels[0];
        assert!(
            matches!(&k.strategy, Strategy::ColumnSplit { columns, .. } if columns.len() == 2),
            "{here}: {}",
            k.strategy
        );
    }
}
