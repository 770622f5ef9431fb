//! Shifted sums (`sum(exp(x - max))`, `sum((x - mean)^2)`) planned as one
//! pass: kernel counts of the row statistics at rows of one tile and rows
//! longer than a tile, on the CPU's and the GPU's options, and their values
//! against the f64 reference, in every float dtype and at the edges
//! (infinite and NaN elements, rows of one repeated value, a large mean).

mod common;

use tilefuse::fusion::{plan, FusionOptions};
use tilefuse::{DType, Tensor};

/// Plans `outputs` with `opts`, checks every output against the reference
/// and returns the number of kernels.
fn kernels(name: &str, outputs: &[&Tensor], opts: &FusionOptions) -> usize {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let g = tilefuse::graph::extract(&nodes);
    let want = tilefuse::graph::reference::evaluate(&g).unwrap();
    let p = plan(&g, opts).unwrap();
    let got = common::run_plan(&g, &p).unwrap();
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = common::compare(got, want) {
            panic!("{name} on {:?}, output {i}: {e}", opts.target);
        }
    }
    p.kernels.len()
}

/// The row statistics of `x` over its last axis, each with the kernels it
/// must take when a row is longer than one tile (`long`) or fits one.
fn statistics(x: &Tensor, long: bool, opts: &FusionOptions) {
    let last = x.rank() - 1;
    let axis = last as isize;
    let normalised = if long { 2 } else { 1 };
    let cases: Vec<(&str, Vec<Tensor>, usize)> = vec![
        ("logsumexp", vec![x.logsumexp(&[axis], true)], 1),
        ("var", vec![x.var(&[axis], false)], 1),
        ("std", vec![x.std(&[axis], true, 0)], 1),
        ("mean and var", vec![x.mean(&[axis], true), x.var(&[axis], true)], 1),
        ("softmax", vec![x.softmax(axis)], normalised),
        ("log_softmax", vec![x.log_softmax(axis)], normalised),
        ("layer_norm", vec![x.layer_norm(None, None, 1e-5)], normalised),
    ];
    for (name, outs, want) in cases {
        let refs: Vec<&Tensor> = outs.iter().collect();
        let name = format!("{name} of {}{:?}", x.dtype(), x.dims());
        assert_eq!(kernels(&name, &refs, opts), want, "{name} on {:?}", opts.target);
    }
}

#[test]
fn row_statistics_of_one_tile_take_one_kernel() {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = common::exact_tensor(&[24, 300], dtype, 3, 16.0);
        statistics(&x, false, &FusionOptions::cpu());
        statistics(&x, false, &FusionOptions::gpu());
    }
}

#[test]
fn row_statistics_longer_than_a_tile_read_the_row_once() {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        // Longer than the CPU's row tile.
        let x = common::exact_tensor(&[6, 20000], dtype, 4, 16.0);
        statistics(&x, true, &FusionOptions::cpu());
        // With enough rows to fill the GPU's grid unsplit.
        let x = common::exact_tensor(&[140, 17000], dtype, 5, 16.0);
        statistics(&x, true, &FusionOptions::gpu());
    }
}

#[test]
fn edge_values_match_the_two_pass_reference() {
    let x = common::edge_rows(6, 20000);
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        for (name, y) in [
            ("logsumexp", x.logsumexp(&[1], true)),
            ("softmax", x.softmax(1)),
            ("log_softmax", x.log_softmax(1)),
            ("var", x.var(&[1], true)),
            ("layer_norm", x.layer_norm(None, None, 1e-5)),
        ] {
            kernels(name, &[&y], &opts);
        }
    }
}

/// The variance of long rows with a mean of 1e4 and deviations below 1
/// (which `E[x^2] - E[x]^2` would lose in f32) is right to 2.5e-5 of
/// itself, on both options' plans: within half the `n / (n - 1)` factor
/// between a biased and an unbiased variance (5e-5 here), above what the
/// f32 sums of 20000 terms lose.
#[test]
fn variance_of_a_large_mean_keeps_its_digits() {
    let (rows, cols) = (140, 20000);
    let vals: Vec<f32> = (0..rows * cols)
        .map(|i| 1e4 + ((i % cols * 37 + i / cols * 11) % 101) as f32 / 101.0)
        .collect();
    let x = Tensor::from_vec(vals.clone(), &[rows, cols]);
    let g = tilefuse::graph::extract(&[x.var(&[1], false).node()]);
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        let p = plan(&g, &opts).unwrap();
        assert_eq!(p.kernels.len(), 1, "{:?}", opts.target);
        let got = &common::run_plan(&g, &p).unwrap()[0];
        for (r, row) in vals.chunks(cols).enumerate() {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            // `var` divides by n - 1.
            let want = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (cols - 1) as f64;
            let got = got.get(r).to_f64();
            assert!(
                (got - want).abs() <= 2.5e-5 * want,
                "var of row {r} on {:?}: got {got}, want {want}",
                opts.target
            );
        }
    }
}

/// Long rows and long columns whose first tile lies far from the rest (the
/// first 4096 values of each 100 above the others, which vary by less than
/// 1): the shift of a looped variance, the first tile's mean, is about two
/// standard deviations from the row's mean, and the variance stays right to
/// 1e-5 of itself, on both options' plans, over rows and over columns.
#[test]
fn variance_with_a_first_tile_far_from_the_rest_is_right() {
    let (rows, cols) = (6, 20000);
    let value = |r: usize, c: usize| {
        let step = if c < 4096 { 100.0 } else { 0.0 };
        step + ((c * 37 + r * 11) % 101) as f32 / 101.0
    };
    let vals: Vec<f32> = (0..rows * cols).map(|i| value(i / cols, i % cols)).collect();
    let by_rows = Tensor::from_vec(vals.clone(), &[rows, cols]);
    let transposed: Vec<f32> = (0..rows * cols).map(|i| value(i % rows, i / rows)).collect();
    let by_cols = Tensor::from_vec(transposed, &[cols, rows]);
    let want: Vec<f64> = vals
        .chunks(cols)
        .map(|row| {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            // `var` divides by n - 1.
            row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (cols - 1) as f64
        })
        .collect();
    for (what, y) in [
        ("rows", by_rows.var(&[1], false)),
        ("columns", by_cols.var(&[0], false)),
    ] {
        let g = tilefuse::graph::extract(&[y.node()]);
        for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
            let p = plan(&g, &opts).unwrap();
            let got = &common::run_plan(&g, &p).unwrap()[0];
            for (r, &want) in want.iter().enumerate() {
                let got = got.get(r).to_f64();
                assert!(
                    (got - want).abs() <= 2.5e-5 * want,
                    "var over {what}, {r} on {:?}: got {got}, want {want}",
                    opts.target
                );
            }
        }
    }
}

/// Groups the statistics cannot run unsplit are planned without the
/// rewrite, and stay right: a full variance, a few long rows on the GPU, a
/// variance over the leading axis, over a middle axis, and through a
/// transposed view.
#[test]
fn statistics_that_need_a_split_are_still_right() {
    let long = common::exact_tensor(&[4, 30000], DType::F32, 6, 16.0);
    let cols = common::exact_tensor(&[3000, 40], DType::BF16, 7, 16.0);
    let middle = common::exact_tensor(&[6, 3000, 5], DType::F16, 8, 16.0);
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        for (name, y) in [
            ("var_all", long.var_all()),
            ("logsumexp of few rows", long.logsumexp(&[1], false)),
            ("softmax of few rows", long.softmax(1)),
            ("var over axis 0", cols.var(&[0], true)),
            ("logsumexp over axis 0", cols.logsumexp(&[0], true)),
            ("var over a middle axis", middle.var(&[1], false)),
            ("var of a transposed view", cols.transpose(0, 1).var(&[1], true)),
        ] {
            kernels(name, &[&y], &opts);
        }
    }
}

/// Shifts that are not the group's own statistic: the maximum of another
/// tensor, a maximum that is an output too, a shift used by a second sum.
#[test]
fn shifts_from_elsewhere_are_right() {
    for (dims, opts) in [([6, 20000], FusionOptions::cpu()), ([140, 17000], FusionOptions::gpu())] {
        let x = common::exact_tensor(&dims, DType::F32, 9, 16.0);
        let y = common::exact_tensor(&dims, DType::F32, 10, 8.0);
        let other = (&x - &y.max(&[1], true)).exp().sum(&[1], true);
        kernels("exp sum about another tensor's max", &[&other], &opts);
        let m = x.max(&[1], true);
        let lse = (&x - &m).exp().sum(&[1], true).log() + &m;
        kernels("logsumexp with its max", &[&lse, &m], &opts);
        let mean = x.mean(&[1], true);
        let d = &x - &mean;
        let both = [(&d * &d).sum(&[1], true), d.exp().sum(&[1], true)];
        kernels("two sums about one mean", &[&both[0], &both[1]], &opts);
    }
}

/// Shifted statistics split across the grid (a reduction over a strided
/// axis with few kept columns, few long rows) keep one pass: each run of
/// rows stores its statistics (a maximum and a rescaled sum, or a mean, a
/// centred sum of squares and a count) and the last point of each column
/// tile combines them in row order, so a variance, a logsumexp or a mean
/// with its variance is one kernel on the GPU's plan, a softmax or a layer
/// norm of few long rows two. Values against the reference at the edges
/// too (the edge rows' values laid out as columns), and a large mean
/// keeps its digits.
#[test]
fn split_statistics_combine_their_runs_in_one_kernel() {
    let gpu = FusionOptions::gpu();
    let cols = common::exact_tensor(&[20011, 40], DType::F32, 11, 16.0);
    let middle = common::exact_tensor(&[6, 9001, 5], DType::BF16, 12, 16.0);
    let few = common::exact_tensor(&[3, 400_009], DType::F16, 13, 16.0);
    let wide = common::exact_tensor(&[7, 200_003], DType::F64, 14, 16.0);
    let cases: Vec<(&str, Vec<Tensor>, usize)> = vec![
        ("var over axis 0", vec![cols.var(&[0], true)], 1),
        ("logsumexp over axis 0", vec![cols.logsumexp(&[0], false)], 1),
        (
            "mean and var over axis 0",
            vec![cols.mean(&[0], true), cols.var(&[0], true)],
            1,
        ),
        ("softmax over axis 0", vec![cols.softmax(0)], 2),
        ("var over a middle axis", vec![middle.var(&[1], false)], 1),
        ("std over a middle axis", vec![middle.std(&[1], true, 1)], 1),
        ("logsumexp of few long rows", vec![few.logsumexp(&[1], true)], 1),
        ("var of few long rows", vec![wide.var(&[1], false)], 1),
        (
            "layer_norm of few long rows",
            vec![wide.layer_norm(None, None, 1e-5)],
            2,
        ),
        ("log_softmax of few long rows", vec![few.log_softmax(1)], 2),
    ];
    for (name, outs, want) in cases {
        let refs: Vec<&Tensor> = outs.iter().collect();
        assert_eq!(kernels(name, &refs, &gpu), want, "{name}");
        kernels(name, &refs, &FusionOptions::cpu());
    }
    // The edge rows as columns: -inf, +inf, NaN, one finite value among
    // -inf, a repeated value, values whose exponentials overflow.
    let e = common::edge_rows(6, 20000).to_vec::<f32>().unwrap();
    let t: Vec<f32> = (0..20000 * 6).map(|i| e[(i % 6) * 20000 + i / 6]).collect();
    let x = Tensor::from_vec(t, &[20000, 6]);
    for (name, y, want) in [
        ("logsumexp of edge columns", x.logsumexp(&[0], true), 1),
        ("var of edge columns", x.var(&[0], true), 1),
        ("softmax of edge columns", x.softmax(0), 2),
    ] {
        assert_eq!(kernels(name, &[&y], &gpu), want, "{name}");
    }
    // A mean of 1e4 with deviations below 1, over columns: the squares'
    // statistics keep their digits (E[x^2] - E[x]^2 in f32 would be off by
    // about 10). The variance is about the graph's f32 mean, which sums
    // 20000 values of 1e4 and is off by about 0.009 here, adding its
    // square: 1e-3 of the variance.
    let (rows, n) = (20000, 40);
    let vals: Vec<f32> = (0..rows * n)
        .map(|i| 1e4 + ((i % n * 37 + i / n * 11) % 101) as f32 / 101.0)
        .collect();
    let x = Tensor::from_vec(vals.clone(), &[rows, n]);
    let g = tilefuse::graph::extract(&[x.var(&[0], false).node()]);
    let p = plan(&g, &gpu).unwrap();
    assert_eq!(p.kernels.len(), 1);
    let got = &common::run_plan(&g, &p).unwrap()[0];
    for c in 0..n {
        let col: Vec<f64> = (0..rows).map(|r| vals[r * n + c] as f64).collect();
        let mean = col.iter().sum::<f64>() / rows as f64;
        let want = col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / rows as f64;
        let g = got.get(c).to_f64();
        assert!((g - want).abs() <= 2e-3 * want, "column {c}: {g} against {want}");
    }
}

/// The split statistics' kernels assemble for every target without
/// spilling, in every float dtype.
#[test]
fn split_statistics_assemble_without_spilling() {
    use common::ptx_check::{spilling, summary, Modules};
    let Some(ptxas) = tilefuse::kernels::ptx_gen::ptxas::ptxas_for_tests("tests/online.rs") else {
        return;
    };
    let mut modules = Modules::default();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let cols = common::exact_tensor(&[20011, 40], dtype, 1, 16.0);
        let middle = common::exact_tensor(&[6, 9001, 5], dtype, 2, 16.0);
        let few = common::exact_tensor(&[3, 400_009], dtype, 3, 16.0);
        for (name, y) in [
            ("var over axis 0", cols.var(&[0], true)),
            ("logsumexp over axis 0", cols.logsumexp(&[0], false)),
            ("softmax over axis 0", cols.softmax(0)),
            ("var over a middle axis", middle.var(&[1], false)),
            ("logsumexp of few long rows", few.logsumexp(&[1], true)),
            ("layer_norm of few long rows", few.layer_norm(None, None, 1e-5)),
        ] {
            let g = tilefuse::graph::extract(&[y.node()]);
            for k in &plan(&g, &FusionOptions::gpu()).unwrap().kernels {
                modules
                    .add(&format!("{name} {dtype}"), &k.program)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    let assembled = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&assembled));
    let spills: Vec<String> = spilling(&assembled).iter().map(|a| a.label.clone()).collect();
    assert!(spills.is_empty(), "spilling: {spills:?}");
}
