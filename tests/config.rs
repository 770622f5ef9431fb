//! `Config` as a value: two configs in one process get two plans (and, on
//! a GPU, two modules; see `tests/gpu_config.rs`), each giving the values
//! an f64 reference gives; scopes and explicit configs reach planning and
//! code generation.

mod common;

use tilefuse::config::{CodegenConfig, Config, MathMode};
use tilefuse::fusion::{cache_stats, plan, FusionOptions, TileTarget};
use tilefuse::kernels::ptx_gen::{generate_with, PtxTarget};
use tilefuse::{Error, Tensor};

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.0 - 1.0) * 2.0)
        .collect()
}

/// `sum(tanh(x * 0.5 + 1), axis 1)` of a [rows, cols] input, in f64.
fn reference(xs: &[f32], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| (0..cols).map(|c| (xs[r * cols + c] as f64 * 0.5 + 1.0).tanh()).sum())
        .collect()
}

fn pipeline(x: &Tensor) -> Tensor {
    (x * 0.5f32 + 1.0f32).tanh().sum(&[1], false)
}

fn close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}: row {i}: {g} against {w}"
        );
    }
}

#[test]
fn two_configs_in_one_process_plan_twice_and_both_are_right() {
    let (rows, cols) = (37, 611);
    let xs = data(rows * cols);
    let want = reference(&xs, rows, cols);
    let x = Tensor::from_vec(xs, &[rows, cols]);
    let precise = Config::default();
    let fast = Config::default().with_math(MathMode::Fast).with_deterministic(false);

    // The first realization under each config plans; the second of each
    // finds its own plan.
    let mut hits = vec![];
    for config in [&precise, &fast, &precise, &fast] {
        let y = pipeline(&x);
        let stats = config.with(|| y.realize_with_stats()).unwrap();
        hits.push(stats.plan_cache_hit);
        close(&y.to_vec::<f32>().unwrap(), &want, &format!("{config:?}"));
    }
    assert_eq!(hits, [false, false, true, true]);

    // `realize_with` takes the config explicitly, scope or not.
    let before = cache_stats();
    let y = pipeline(&x);
    precise.with(|| y.realize_with(&fast)).unwrap();
    let after = cache_stats();
    assert_eq!((after.hits - before.hits, after.misses - before.misses), (1, 0));
    close(&y.to_vec::<f32>().unwrap(), &want, "realize_with");

    // The plans differ where the configs do: the math mode is in the program.
    let printed = |c: &Config| c.with(|| pipeline(&x).plan()).unwrap().kernels[0].program.to_string();
    let (p, f) = (printed(&precise), printed(&fast));
    assert_ne!(p, f);
    assert!(f.contains("fast") && !p.contains("fast"), "{f}");
}

#[test]
fn gpu_tile_settings_make_other_plans_that_compute_the_same() {
    let rows = 64;
    let g = common::pipelines::softmax(rows, 300);
    let mut small = Config::default();
    small.fusion.gpu_tile_elements = 1024;
    small.fusion.gpu_split_parts = 8;
    let a = plan(
        &g,
        &FusionOptions::for_target(TileTarget::Gpu, &Config::default().fusion),
    )
    .unwrap();
    let b = plan(&g, &FusionOptions::for_target(TileTarget::Gpu, &small.fusion)).unwrap();
    assert_ne!(
        a.kernels.iter().map(|k| k.program.to_string()).collect::<Vec<_>>(),
        b.kernels.iter().map(|k| k.program.to_string()).collect::<Vec<_>>(),
        "other tile sizes, other programs"
    );
    // Both plans run on the CPU executor and agree with the reference.
    for p in [&a, &b] {
        let got = common::run_plan(&g, p).unwrap();
        let want = tilefuse::graph::reference::evaluate(&g).unwrap();
        for (got, want) in got.iter().zip(&want) {
            common::compare_with(got, want, 1e-5, 1.0).unwrap();
        }
    }
}

#[test]
fn codegen_settings_change_the_ptx_and_nothing_else() {
    let g = common::pipelines::softmax(256, 1000);
    let p = plan(&g, &FusionOptions::gpu()).unwrap();
    let program = &p.kernels[0].program;
    let target = PtxTarget::for_driver(90, 13000);
    let default = generate_with(program, &target, &CodegenConfig::default()).unwrap();
    let mut narrow = CodegenConfig::default();
    narrow.stage = false;
    narrow.max_threads = 128;
    let other = generate_with(program, &target, &narrow).unwrap();
    assert_ne!(default.text, other.text);
    assert_eq!(
        default.text,
        tilefuse::kernels::ptx_gen::generate(program, &target).unwrap().text,
        "generate is generate_with the default"
    );
}

#[test]
fn a_config_out_of_range_is_an_error_naming_its_field() {
    let x = Tensor::from_vec(data(10), &[10]);
    let mut bad = Config::default();
    bad.codegen.max_threads = 48;
    let y = x.exp();
    match y.realize_with(&bad) {
        Err(e @ Error::InvalidConfig { .. }) => {
            let text = e.to_string();
            assert!(text.contains("codegen.max_threads") && text.contains("48"), "{text}");
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    // Nothing was computed: the default config still realizes it.
    assert_eq!(y.to_vec::<f32>().unwrap().len(), 10);
}
