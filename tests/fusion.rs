//! Fusion plans: kernel counts of the benchmark pipelines, snapshots of
//! their printed programs, and the plan cache.
//!
//! Snapshots live in `tests/snapshots/*.ir`; run with `TILEFUSE_BLESS=1` to
//! rewrite them after an intended change.

mod common;

use common::{pipelines, G};
use tilefuse::fusion::{cache_stats, explain, plan, BufferRef, FusionOptions, Plan};
use tilefuse::graph::{ReduceOp, Subgraph, UnaryOp};
use tilefuse::kernels::ir::verify;
use tilefuse::DType;

fn planned(g: &Subgraph) -> std::sync::Arc<Plan> {
    let p = plan(g, &FusionOptions::default()).unwrap();
    for k in &p.kernels {
        verify(&k.program).unwrap();
        assert_eq!(k.args.len(), k.program.params.len());
    }
    p
}

/// The number of kernels of `g` under the CPU and GPU options.
fn check_kernels(g: &Subgraph, expect: usize) {
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        let p = plan(g, &opts).unwrap();
        assert_eq!(
            p.kernels.len(),
            expect,
            "{:?}:\n{}",
            opts.target,
            explain(g, &opts).unwrap()
        );
    }
}

/// One kernel, under the CPU and GPU options, whether split or not.
#[test]
fn chain_is_one_kernel() {
    check_kernels(&pipelines::chain(100_003), 1);
}

#[test]
fn plans_record_the_strategy_of_each_kernel_and_explain_prints_it() {
    // The chain: one tiled 1-D kernel; the sum: split across the grid.
    let opts = FusionOptions::gpu();
    let chain = plan(&pipelines::chain(100_003), &opts).unwrap();
    let tilefuse::fusion::Strategy::Tiled { axes } = &chain.kernels[0].strategy else {
        panic!("{:?}", chain.kernels[0].strategy)
    };
    assert_eq!(axes.len(), 1);
    assert_eq!((axes[0].0, axes[0].2), (100_003, false));
    let sum = plan(&pipelines::sum(1 << 22), &opts).unwrap();
    assert!(
        matches!(sum.kernels[0].strategy, tilefuse::fusion::Strategy::SplitReduction { parts, atomic: false, .. } if parts > 1),
        "{:?}",
        sum.kernels[0].strategy
    );
    let text = explain(&pipelines::sum(1 << 22), &opts).unwrap();
    assert!(text.contains("strategy: split reduction:"), "{text}");
}

#[test]
fn bias_gelu_is_one_kernel() {
    check_kernels(&pipelines::bias_gelu(64, 4096), 1);
}

#[test]
fn mse_is_one_kernel() {
    check_kernels(&pipelines::mse(100_003), 1);
}

#[test]
fn sum_is_one_kernel() {
    check_kernels(&pipelines::sum(100_003), 1);
}

#[test]
fn softmax_is_one_kernel() {
    check_kernels(&pipelines::softmax(8, 4096), 1);
}

#[test]
fn log_softmax_is_one_kernel() {
    check_kernels(&pipelines::log_softmax(8, 4096), 1);
}

#[test]
fn layer_norm_is_one_kernel() {
    check_kernels(&pipelines::layer_norm(8, 4096), 1);
}

#[test]
fn rms_norm_is_one_kernel() {
    check_kernels(&pipelines::rms_norm(8, 4096), 1);
}

#[test]
fn colsum_is_one_kernel() {
    check_kernels(&pipelines::colsum(1000, 300), 1);
}

#[test]
fn large_full_sums_split_across_grid_points() {
    let g = pipelines::sum(1 << 20);
    let p = planned(&g);
    // The partials and, at the last point to finish, their combine: one kernel.
    assert_eq!(p.kernels.len(), 1);
    assert!(p.kernels[0].program.grid[0] > 1);
    assert!(p.kernels[0].program.to_string().contains("last_point g0"));
    // Without determinism the partials are added atomically into the result.
    let opts = FusionOptions {
        deterministic: false,
        ..FusionOptions::gpu()
    };
    let p = plan(&g, &opts).unwrap();
    assert_eq!(p.kernels.len(), 1);
    let text = p.kernels[0].program.to_string();
    assert!(text.contains("atomic"), "{text}");
    assert!(text.contains("init 0"), "{text}");
    // A mean has a consumer, so it keeps the deterministic combine.
    let p = plan(&pipelines::mse(1 << 20), &opts).unwrap();
    assert_eq!(p.kernels.len(), 1);
    assert!(p.kernels[0].program.to_string().contains("last_point g0"));
}

#[test]
fn rows_too_long_for_one_tile_take_a_statistics_kernel_and_an_output_kernel() {
    // Softmax with rows of 2^15: the max and the sum of exponentials in one
    // pass over the row, the output in a second.
    let g = pipelines::softmax(2, 1 << 15);
    assert_eq!(plan(&g, &FusionOptions::cpu()).unwrap().kernels.len(), 2);
    // Two rows do not fill the GPU's grid: the row is split across it, and
    // the max, the sum and the output each take a kernel.
    assert_eq!(plan(&g, &FusionOptions::gpu()).unwrap().kernels.len(), 3);
    // Enough rows to fill it keep the one-pass statistics; rows of up to
    // 128 KiB are walked twice in one kernel instead (the second walk from
    // L2), longer ones take the output kernel.
    let kernels = |g: &Subgraph| plan(g, &FusionOptions::gpu()).unwrap().kernels.len();
    assert_eq!(kernels(&pipelines::softmax(512, 1 << 15)), 1);
    assert_eq!(kernels(&pipelines::softmax(512, 1 << 16)), 2);
    // Too few rows to walk one a grid point: the statistics kernel and
    // the output kernel.
    assert_eq!(kernels(&pipelines::softmax(100, 1 << 15)), 2);
    let opts = FusionOptions {
        max_row_tile: 1 << 16,
        ..FusionOptions::cpu()
    };
    assert_eq!(plan(&g, &opts).unwrap().kernels.len(), 1);
}

#[test]
fn long_rows_walked_twice_compute_as_the_reference() {
    // Rows longer than the row tile, broadcast back: with enough rows each
    // grid point walks its row for the statistics, then again for the
    // output, in one kernel with two loops; ragged rows (1000 = 3 tiles of
    // 256 + 232) and one tile (200) too.
    let opts = FusionOptions {
        max_row_tile: 256,
        tile_elements: 256,
        two_pass_rows: 4,
        ..FusionOptions::gpu()
    };
    for cols in [1000, 1024, 200] {
        let graphs = [
            ("softmax", pipelines::softmax(6, cols)),
            ("log_softmax", pipelines::log_softmax(6, cols)),
            ("layer_norm", pipelines::layer_norm(6, cols)),
            ("rms_norm", pipelines::rms_norm(6, cols)),
        ];
        for (name, g) in &graphs {
            let p = plan(g, &opts).unwrap();
            let text = explain(g, &opts).unwrap();
            assert_eq!(p.kernels.len(), 1, "{name} {cols}: {text}");
            let program = p.kernels[0].program.to_string();
            let loops = program.matches("loop i").count();
            assert_eq!(loops, if cols > 256 { 2 } else { 0 }, "{name} {cols}: {program}");
            assert_eq!(text.contains("rows walked twice"), cols > 256, "{name} {cols}: {text}");
            let want = tilefuse::graph::reference::evaluate(g).unwrap();
            let got = common::run_plan(g, &p).unwrap();
            common::compare(&got[0], &want[0]).unwrap_or_else(|e| panic!("{name} {cols}: {e}\n{text}"));
        }
    }
    // Fewer rows than `two_pass_rows`, or rows over `reread_row_bytes`:
    // the statistics are stored for a second kernel.
    for opts in [
        FusionOptions {
            two_pass_rows: 7,
            ..opts
        },
        FusionOptions {
            reread_row_bytes: 999 * 4,
            ..opts
        },
    ] {
        let g = pipelines::softmax(6, 1000);
        assert!(
            plan(&g, &opts).unwrap().kernels.len() > 1,
            "{}",
            explain(&g, &opts).unwrap()
        );
    }
}

#[test]
fn column_sum_loops_over_rows_without_transposing() {
    let p = planned(&pipelines::colsum(1000, 300));
    let text = p.kernels[0].program.to_string();
    assert!(text.contains("loop i0"), "{text}");
    assert!(text.contains("reduce.sum"), "{text}");
    // The input is read in its own memory order: unit stride on the inner axis.
    assert!(text.contains("strides [300, 1]"), "{text}");
}

#[test]
fn transposed_reshape_is_copied_once() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[3, 5]);
    let t = g.permute(x, &[1, 0]);
    let r = g.reshape(t, &[15]);
    let y = g.unary(UnaryOp::Exp, r);
    let p = planned(&g.finish(&[y]));
    assert_eq!(p.kernels.len(), 2);
    assert_eq!(p.buffers.len(), 2);
}

#[test]
fn a_view_of_data_as_output_is_copied_and_data_is_returned_as_is() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[3, 5]);
    let t = g.permute(x, &[1, 0]);
    let p = planned(&g.finish(&[t, x]));
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.outputs, vec![BufferRef::Temp(0), BufferRef::Input(0)]);
}

#[test]
fn constants_are_never_buffers() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[4, 4]);
    let two = g.full(2.0, DType::F32, &[4]);
    let y = g.mul(x, two);
    let p = planned(&g.finish(&[y]));
    assert_eq!(p.kernels.len(), 1);
    assert_eq!(p.kernels[0].program.params.len(), 2);
}

#[test]
fn shared_expensive_node_is_materialised_once_and_cheap_one_recomputed() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[64, 64]);
    let e = g.unary(UnaryOp::Exp, x); // cheap: recomputed by both users
    let s = g.reduce(ReduceOp::Sum, e, &[0]);
    let m = g.reduce(ReduceOp::Max, e, &[1]);
    let p = planned(&g.finish(&[s, m]));
    assert_eq!(p.kernels.len(), 2);
    assert_eq!(p.buffers.len(), 2, "only the two outputs are buffers");
}

#[test]
fn argmax_is_correctly_planned_for_short_and_long_rows() {
    for cols in [10, 100_000] {
        let mut g = G::default();
        let x = g.data(DType::F16, &[3, cols]);
        let a = g.reduce(ReduceOp::ArgMax, x, &[1]);
        let p = planned(&g.finish(&[a]));
        assert_eq!(p.kernels.len(), 1);
    }
}

#[test]
fn structurally_equal_graphs_share_a_plan() {
    let opts = FusionOptions {
        max_row_tile: 4096 + 1,
        ..FusionOptions::cpu()
    };
    let before = cache_stats();
    let p1 = plan(&pipelines::softmax(8, 4096), &opts).unwrap();
    // Fresh data allocations, same structure: a hit.
    let p2 = plan(&pipelines::softmax(8, 4096), &opts).unwrap();
    assert!(std::sync::Arc::ptr_eq(&p1, &p2));
    // Another shape: a miss.
    let p3 = plan(&pipelines::softmax(8, 4000), &opts).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&p1, &p3));
    let after = cache_stats();
    assert!(after.hits > before.hits);
    assert!(after.misses >= before.misses + 2);
}

#[test]
fn malformed_graphs_are_errors() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[4]);
    let mut bad = g.finish(&[x]);
    bad.nodes[0].inputs.push(0);
    assert!(plan(&bad, &FusionOptions::default()).is_err());
    let mut g = G::default();
    let x = g.data(DType::F32, &[4]);
    let mut bad = g.finish(&[x]);
    bad.outputs = vec![3];
    assert!(plan(&bad, &FusionOptions::default()).is_err());
}

#[test]
fn explain_names_kernels_and_draws_clusters() {
    let text = explain(&pipelines::softmax(8, 4096), &FusionOptions::default()).unwrap();
    assert!(text.contains("kernel 0: "), "{text}");
    assert!(text.contains("reduce.max"), "{text}");
    assert!(text.contains("subgraph cluster_0"), "{text}");
    assert!(text.contains("broadcast"), "{text}");
}

/// Compares the printed programs of `g` with `tests/snapshots/{name}.ir`.
fn snapshot(name: &str, g: &Subgraph) {
    let p = planned(g);
    let text: String = p.kernels.iter().map(|k| format!("{}\n", k.program)).collect();
    let Some(dir) = common::snapshot_dir(&format!("snapshot {name}")) else {
        return;
    };
    let path = dir.join(format!("{name}.ir"));
    if std::env::var_os("TILEFUSE_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expect = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {}; run with TILEFUSE_BLESS=1", path.display()));
    assert_eq!(
        text, expect,
        "printed IR of {name} changed; run with TILEFUSE_BLESS=1 if intended"
    );
}

#[test]
fn snapshots_of_the_pipelines() {
    snapshot("chain", &pipelines::chain(100_003));
    snapshot("bias_gelu", &pipelines::bias_gelu(64, 4096));
    snapshot("softmax", &pipelines::softmax(8, 4096));
    snapshot("layernorm", &pipelines::layer_norm(8, 4096));
    snapshot("rmsnorm", &pipelines::rms_norm(8, 4096));
    snapshot("mse", &pipelines::mse(100_003));
    snapshot("sum", &pipelines::sum(100_003));
    snapshot("colsum", &pipelines::colsum(1000, 300));
}

#[test]
fn pipelines_match_the_reference_evaluator() {
    let graphs = [
        ("chain", pipelines::chain(10_007)),
        ("bias_gelu", pipelines::bias_gelu(6, 1000)),
        ("mse", pipelines::mse(100_003)),
        ("sum", pipelines::sum(100_003)),
        ("colsum", pipelines::colsum(1000, 300)),
        ("softmax", pipelines::softmax(5, 1000)),
        ("softmax_long_rows", pipelines::softmax(2, 40_000)),
        ("log_softmax", pipelines::log_softmax(5, 1000)),
        ("layer_norm", pipelines::layer_norm(5, 1000)),
        ("rms_norm", pipelines::rms_norm(5, 1000)),
    ];
    for (name, g) in &graphs {
        let want = tilefuse::graph::reference::evaluate(g).unwrap();
        for opts in [
            FusionOptions::cpu(),
            FusionOptions::gpu(),
            FusionOptions {
                deterministic: false,
                ..FusionOptions::gpu()
            },
        ] {
            let p = plan(g, &opts).unwrap();
            let got = common::run_plan(g, &p).unwrap();
            for (o, (a, b)) in got.iter().zip(&want).enumerate() {
                if let Err(e) = common::compare(a, b) {
                    panic!(
                        "{name} output {o} ({:?}): {e}\n{}",
                        opts.target,
                        explain(g, &opts).unwrap()
                    );
                }
            }
        }
    }
}

#[test]
fn f64_transcendentals_in_a_reduction_take_a_quarter_tile_on_the_gpu() {
    // sum(sin(x), axis 1) over short rows: many rows share a tile.
    let tile_of = |dtype: DType| {
        let mut g = G::default();
        let x = g.data(dtype, &[4096, 32]);
        let s = g.unary(UnaryOp::Sin, x);
        let r = g.reduce(ReduceOp::Sum, s, &[1]);
        let g = g.finish(&[r]);
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        assert_eq!(p.kernels.len(), 1, "{}", explain(&g, &FusionOptions::gpu()).unwrap());
        let tile: Vec<u32> = p.kernels[0].program.views[0].tile.to_vec();
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        common::compare(&run(&g, &FusionOptions::gpu())[0], &want[0]).unwrap();
        tile
    };
    assert_eq!(tile_of(DType::F32), vec![128, 32], "f32 keeps the element budget");
    assert_eq!(tile_of(DType::F64), vec![32, 32], "f64 takes a quarter of it");
}

/// Runs `g` fused with `opts` and returns its outputs.
fn run(g: &Subgraph, opts: &FusionOptions) -> Vec<tilefuse::storage::HostBuffer> {
    common::run_plan(g, &plan(g, opts).unwrap()).unwrap()
}

#[test]
fn argmax_takes_the_first_maximum_and_nan_wins() {
    let rows: Vec<f32> = vec![
        1.0,
        3.0,
        3.0,
        -1.0,
        0.0, //
        f32::NAN,
        5.0,
        f32::NAN,
        1.0,
        2.0, //
        -4.0,
        -2.0,
        -3.0,
        -2.0,
        -9.0,
    ];
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        for (op, want) in [(ReduceOp::ArgMax, [1i64, 0, 1]), (ReduceOp::ArgMin, [3, 0, 4])] {
            let mut g = G::default();
            let x = g.data_buf(tilefuse::storage::HostBuffer::from_elements(&rows), &[3, 5]);
            let a = g.reduce(op, x, &[1]);
            let got = run(&g.finish(&[a]), &opts);
            assert_eq!(got[0].to_vec::<i64>(), want, "{op:?}");
        }
    }
}

#[test]
fn reductions_over_empty_axes_give_the_identity() {
    let mut g = G::default();
    let x = g.data(DType::F32, &[3, 0]);
    let s = g.reduce(ReduceOp::Sum, x, &[1]);
    let m = g.reduce(ReduceOp::Max, x, &[1]);
    let p = g.reduce(ReduceOp::Prod, x, &[1]);
    let got = run(&g.finish(&[s, m, p]), &FusionOptions::default());
    assert_eq!(got[0].to_vec::<f32>(), vec![0.0; 3]);
    assert_eq!(got[1].to_vec::<f32>(), vec![f32::NEG_INFINITY; 3]);
    assert_eq!(got[2].to_vec::<f32>(), vec![1.0; 3]);
}

#[test]
fn argmax_of_rows_longer_than_a_tile_reads_them_once_on_the_gpu_and_twice_on_the_cpu() {
    // On a GPU the best value and its index accumulate together, element
    // by element (one loop); the CPU executor finds the maximum first and
    // then its first index (two loops).
    let n = 20_000;
    let mut v = vec![0.0f32; 2 * n];
    // Row 0: the maximum 7 first at 9000 (second tile) and again at 15000.
    v[9000] = 7.0;
    v[15000] = 7.0;
    // Row 1: a NaN at 19999 (the ragged last tile) wins over a larger value.
    v[n + 3] = 9.0;
    v[n + 19999] = f32::NAN;
    let mut g = G::default();
    let x = g.data_buf(tilefuse::storage::HostBuffer::from_elements(&v), &[2, n]);
    let a = g.reduce(ReduceOp::ArgMax, x, &[1]);
    let g = g.finish(&[a]);
    for (opts, loops) in [(FusionOptions::gpu(), 1), (FusionOptions::cpu(), 2)] {
        let p = plan(&g, &opts).unwrap();
        let text = p.kernels[0].program.to_string();
        assert_eq!(text.matches("loop").count(), loops, "{:?}: {text}", opts.target);
        assert_eq!(
            run(&g, &opts)[0].to_vec::<i64>(),
            vec![9000, 19999],
            "{:?}",
            opts.target
        );
    }
}

#[test]
fn large_gpu_column_reductions_split_the_rows_and_match_the_reference() {
    // Ragged columns, a fused operand, and max as well as sum.
    for (rows, cols, op) in [
        (4096, 300, ReduceOp::Sum),
        (2048, 1000, ReduceOp::Max),
        (6000, 257, ReduceOp::Sum),
    ] {
        let mut g = G::default();
        let a = g.data_f32(&[rows, cols], |i| ((i * 7919) % 1009) as f32 / 256.0 - 2.0);
        let b = g.data_f32(&[rows, cols], |i| ((i * 104_729) % 997) as f32 / 512.0);
        let x = g.binary(tilefuse::graph::BinaryOp::Mul, a, b);
        let r = g.reduce(op, x, &[0]);
        let out = g.reshape(r, &[cols]);
        let g = g.finish(&[out]);
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        assert_eq!(p.kernels.len(), 1, "{}", explain(&g, &FusionOptions::gpu()).unwrap());
        assert!(p.kernels[0].program.to_string().contains("last_point g0"));
        assert!(p.kernels[0].program.grid.iter().product::<u64>() >= 128);
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        common::compare(&run(&g, &FusionOptions::gpu())[0], &want[0]).unwrap();
        // The CPU keeps one kernel.
        assert_eq!(plan(&g, &FusionOptions::cpu()).unwrap().kernels.len(), 1);
    }
}

/// A `dtype` input of `shape` holding small integers in [-8, 8) (exact in
/// every dtype), so sums of the narrow float types stay meaningful.
fn small_ints(g: &mut G, dtype: DType, shape: &[usize]) -> usize {
    let n = shape.iter().product();
    let mut buf = tilefuse::storage::HostBuffer::zeros(dtype, n);
    for i in 0..n {
        buf.set(i, tilefuse::Scalar::Float(((i * 7919) % 16) as f64 - 8.0, DType::F64));
    }
    g.data_buf(buf, shape)
}

#[test]
fn single_kernel_split_reductions_match_the_reference_on_the_cpu_executor() {
    // GPU plans, whose split reductions combine at the last point, run by
    // the CPU executor: ragged tails, f16/bf16 accumulating in f32, integers.
    let opts = FusionOptions::gpu();
    for n in [(1 << 20) + 37, 300_007, 4 * 4096 + 1] {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32] {
            let mut ops = vec![(ReduceOp::Sum, false), (ReduceOp::Max, false), (ReduceOp::Min, false)];
            if dtype.is_float() {
                ops.push((ReduceOp::Sum, true));
            }
            for (op, mean) in ops {
                let mut g = G::default();
                let x = small_ints(&mut g, dtype, &[n]);
                let r = if mean { g.mean(x, &[0]) } else { g.reduce(op, x, &[0]) };
                let g = g.finish(&[r]);
                let p = plan(&g, &opts).unwrap();
                let here = format!("{op:?} (mean {mean}) of {dtype}[{n}]");
                assert_eq!(p.kernels.len(), 1, "{here}");
                assert!(p.kernels[0].program.to_string().contains("last_point g0"), "{here}");
                let want = tilefuse::graph::reference::evaluate(&g).unwrap();
                common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
            }
        }
    }
    // Column sums split across the rows, with ragged column tiles.
    for (rows, cols, dtype) in [
        (6000, 257, DType::I32),
        (4096, 300, DType::F64),
        (2048, 1000, DType::F32),
    ] {
        let mut g = G::default();
        let x = small_ints(&mut g, dtype, &[rows, cols]);
        let r = g.reduce(ReduceOp::Sum, x, &[0]);
        let g = g.finish(&[r]);
        let p = plan(&g, &opts).unwrap();
        let here = format!("column sum of {dtype}[{rows}, {cols}]");
        assert_eq!(p.kernels.len(), 1, "{here}");
        assert!(
            p.kernels[0].program.grid.len() == 2,
            "{here}: {:?}",
            p.kernels[0].program.grid
        );
        assert!(p.kernels[0].program.to_string().contains("last_point g0"), "{here}");
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
    }
}

#[test]
fn column_reductions_of_every_float_dtype_with_nodes_after_them_split_and_match_the_reference() {
    // A column reduction split across the rows keeps its partials in the
    // accumulation dtype (f32 for f16 and bf16) and runs what follows the
    // reduction (a mean's scale, a cast, an op with a kept-space operand)
    // where the partials combine: one kernel, many grid points.
    let opts = FusionOptions::gpu();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for case in ["mean", "max_cast", "sum_plus_bias", "var"] {
            // Rows longer than a row kernel takes whole: the variance's
            // squares are a shifted sum whose runs' statistics combine
            // beside the mean's sum, one kernel.
            let (rows, cols) = if case == "var" { (20000, 257) } else { (4096, 300) };
            let mut g = G::default();
            let x = small_ints(&mut g, dtype, &[rows, cols]);
            let out = match case {
                "mean" => g.mean(x, &[0]),
                "max_cast" => {
                    let m = g.reduce(ReduceOp::Max, x, &[0]);
                    g.cast(m, DType::F32)
                }
                "sum_plus_bias" => {
                    let s = g.reduce(ReduceOp::Sum, x, &[0]);
                    let s = g.reshape(s, &[cols]);
                    let bias = small_ints(&mut g, dtype, &[cols]);
                    g.add(s, bias)
                }
                _ => {
                    // The two-pass variance: a mean, then the mean of the
                    // squared deviations (one split kernel).
                    let m = g.mean(x, &[0]);
                    let m = g.broadcast_to(m, &[rows, cols]);
                    let d = g.sub(x, m);
                    let d2 = g.mul(d, d);
                    g.mean(d2, &[0])
                }
            };
            let g = g.finish(&[out]);
            let p = plan(&g, &opts).unwrap();
            let here = format!("{case} over axis 0 of {dtype}[{rows}, {cols}]");
            assert_eq!(p.kernels.len(), 1, "{here}: {}", explain(&g, &opts).unwrap());
            for k in &p.kernels {
                let text = k.program.to_string();
                assert!(text.contains("last_point g0"), "{here}: {text}");
                assert!(
                    k.program.grid.iter().product::<u64>() >= 128,
                    "{here}: {:?}",
                    k.program.grid
                );
            }
            let want = tilefuse::graph::reference::evaluate(&g).unwrap();
            common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
        }
    }
}

#[test]
fn reductions_through_permuted_views_walk_memory_in_order_and_match_the_reference() {
    // The kernel's innermost axis is the one contiguous in the largest
    // operand's memory, whatever the view's logical order: a reduction
    // through a transposed view becomes a row or column reduction of the
    // underlying buffer. Values, including argmax indices, are the view's.
    for opts in [FusionOptions::gpu(), FusionOptions::cpu()] {
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            for case in [
                "sum0_of_3d",
                "max_last_of_2d",
                "mean_middle",
                "argmax_last",
                "argmin_first",
                "sum_plus_view",
            ] {
                let mut g = G::default();
                let out = match case {
                    "sum0_of_3d" => {
                        // [60, 5, 203] in memory, seen as [203, 5, 60].
                        let x = small_ints(&mut g, dtype, &[60, 5, 203]);
                        let v = g.permute(x, &[2, 1, 0]);
                        g.reduce(ReduceOp::Sum, v, &[0])
                    }
                    "max_last_of_2d" => {
                        // [6000, 257] in memory, seen as [257, 6000], max over its last axis.
                        let x = small_ints(&mut g, dtype, &[6000, 257]);
                        let v = g.permute(x, &[1, 0]);
                        g.reduce(ReduceOp::Max, v, &[1])
                    }
                    "mean_middle" => {
                        let x = small_ints(&mut g, dtype, &[30, 700, 41]);
                        let v = g.permute(x, &[2, 0, 1]);
                        g.mean(v, &[1])
                    }
                    "argmax_last" => {
                        let x = small_ints(&mut g, dtype, &[3001, 129]);
                        let v = g.permute(x, &[1, 0]);
                        g.reduce(ReduceOp::ArgMax, v, &[1])
                    }
                    "argmin_first" => {
                        let x = small_ints(&mut g, dtype, &[129, 3001]);
                        let v = g.permute(x, &[1, 0]);
                        g.reduce(ReduceOp::ArgMin, v, &[0])
                    }
                    _ => {
                        // Two operands in different orders: the larger one's order is walked.
                        let x = small_ints(&mut g, dtype, &[400, 300]);
                        let y = small_ints(&mut g, dtype, &[300, 400]);
                        let yt = g.permute(y, &[1, 0]);
                        let s = g.add(x, yt);
                        g.reduce(ReduceOp::Sum, s, &[0])
                    }
                };
                let g = g.finish(&[out]);
                let here = format!("{case} of {dtype} on {:?}", opts.target);
                let want = tilefuse::graph::reference::evaluate(&g).unwrap();
                common::compare(&run(&g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{here}: {e}"));
            }
        }
    }
    // A column reduction through a transposed view gets the column split.
    let mut g = G::default();
    let x = small_ints(&mut g, DType::BF16, &[20000, 300]);
    let v = g.permute(x, &[1, 0]);
    let r = g.reduce(ReduceOp::Max, v, &[1]);
    let g = g.finish(&[r]);
    let p = plan(&g, &FusionOptions::gpu()).unwrap();
    assert_eq!(p.kernels.len(), 1);
    assert!(p.kernels[0].program.to_string().contains("last_point g0"));
    assert!(
        p.kernels[0].program.grid.iter().product::<u64>() >= 128,
        "{:?}",
        p.kernels[0].program.grid
    );
}

/// A view of a short elementwise chain of data is moved below the chain,
/// so the chain is recomputed in its consumer's kernel: a transposed cast,
/// a broadcast `exp` and a gather through a cast index are one kernel
/// each, on both targets, with the reference's values.
#[test]
fn views_of_leaf_chains_are_recomputed_in_their_consumer() {
    let mut graphs = vec![];
    let mut g = G::default();
    let x = g.data_f32(&[100, 200], |i| (i % 17) as f32 * 0.25 - 2.0);
    let x = g.cast(x, DType::F16);
    let c = g.cast(x, DType::F32);
    let t = g.permute(c, &[1, 0]);
    let b = g.data_f32(&[200, 100], |i| (i % 5) as f32);
    let y = g.add(t, b);
    graphs.push(("transposed cast", g.finish(&[y])));
    let mut g = G::default();
    let x = g.data_f32(&[100], |i| (i % 7) as f32 * 0.5 - 1.0);
    let e = g.unary(UnaryOp::Exp, x);
    let e = g.unary(UnaryOp::Neg, e);
    let e = g.broadcast_to(e, &[200, 100]);
    let b = g.data_f32(&[200, 100], |i| (i % 3) as f32);
    let y = g.mul(e, b);
    graphs.push(("broadcast exp", g.finish(&[y])));
    let mut g = G::default();
    let x = g.data_f32(&[40, 30], |i| i as f32);
    let at: Vec<i64> = (0..9).map(|i| (i * 13 % 40) as i64).collect();
    let i = g.data_buf(tilefuse::storage::HostBuffer::from_elements(&at), &[9]);
    let i = g.cast(i, DType::I32);
    let i = g.reshape(i, &[9, 1]);
    let i = g.broadcast_to(i, &[9, 30]);
    let y = g.push(
        tilefuse::graph::Op::Gather { axis: 0, select: true },
        &[9, 30],
        DType::F32,
        &[x, i],
    );
    graphs.push(("gather", g.finish(&[y])));
    for (name, g) in &graphs {
        check_kernels(g, 1);
        let want = tilefuse::graph::reference::evaluate(g).unwrap();
        for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
            common::compare(&run(g, &opts)[0], &want[0]).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}

/// A gather of a cast of data gathers the data and casts what it gathered,
/// in the kernel of the gather's consumer, on the CPU's and the GPU's
/// options; the values are the reference's.
#[test]
fn a_gather_of_a_cast_is_one_kernel() {
    let (rows, cols) = (301, 517);
    let raw: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 201) as f32 - 100.0).collect();
    let x = tilefuse::Tensor::from_vec(raw, &[rows, cols]).cast(DType::F16);
    x.realize().unwrap();
    let labels: Vec<i64> = (0..rows as i64).map(|i| i * 7919 % cols as i64).collect();
    let labels = tilefuse::Tensor::from_vec(labels, &[rows, 1]);
    let f = x.cast(DType::F32);
    let y = &f.logsumexp(&[1], true) - &f.gather(1, &labels);
    let g = tilefuse::graph::extract(&[y.node()]);
    let want = tilefuse::graph::reference::evaluate(&g).unwrap();
    for opts in [FusionOptions::cpu(), FusionOptions::gpu()] {
        let p = plan(&g, &opts).unwrap();
        assert_eq!(
            p.kernels.len(),
            1,
            "{:?}:\n{}",
            opts.target,
            explain(&g, &opts).unwrap()
        );
        let got = common::run_plan(&g, &p).unwrap();
        common::compare(&got[0], &want[0]).unwrap();
    }
}

/// An elementwise kernel over rows of an odd width with an operand
/// broadcast along the rows or the columns is flat on the GPU: one axis,
/// the broadcast operand read by position (tiled, its rows would move
/// element by element). Rows whose width keeps 16-byte atoms stay tiled,
/// and so does the CPU plan. Values on the CPU executor are the
/// reference's.
#[test]
fn odd_widths_with_a_broadcast_operand_are_flat_on_the_gpu() {
    use tilefuse::fusion::Strategy;
    let cases: [(&[usize], &[usize], DType, bool); 8] = [
        (&[3001, 45], &[45], DType::F32, true),
        (&[3001, 45], &[3001, 1], DType::F16, true),
        (&[702, 6, 45], &[45], DType::BF16, true),
        (&[702, 6, 45], &[6, 1], DType::F32, true),
        (&[5003, 3], &[3], DType::F64, true),
        (&[401, 20], &[20], DType::BF16, true),
        // 16-byte rows: tiled.
        (&[3001, 64], &[64], DType::F32, false),
        (&[3001, 8], &[3001, 1], DType::F16, false),
    ];
    for (shape, bshape, dtype, flat) in cases {
        let mut g = G::default();
        let x = g.data(dtype, shape);
        let b = g.data(dtype, bshape);
        let y = g.add(x, b);
        let y = g.unary(UnaryOp::Tanh, y);
        let g = g.finish(&[y]);
        let here = format!("tanh(x{shape:?} + b{bshape:?}) {dtype}");
        let gpu = plan(&g, &FusionOptions::gpu()).unwrap();
        assert_eq!(gpu.kernels.len(), 1, "{here}");
        let k = &gpu.kernels[0];
        assert_eq!(
            matches!(k.strategy, Strategy::Flat { broadcasts: 1, .. }),
            flat,
            "{here}: {}",
            k.strategy
        );
        if flat {
            assert!(
                explain(&g, &FusionOptions::gpu()).unwrap().contains("strategy: flat ["),
                "{here}"
            );
            let cpu = plan(&g, &FusionOptions::cpu()).unwrap();
            assert!(!matches!(cpu.kernels[0].strategy, Strategy::Flat { .. }), "{here}");
        }
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        let got = common::run_plan(&g, &gpu).unwrap();
        for (got, want) in got.iter().zip(&want) {
            common::compare(got, want).unwrap_or_else(|e| panic!("{here}: {e}"));
        }
    }
}
