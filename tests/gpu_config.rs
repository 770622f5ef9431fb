//! Two `Config`s in one process on a GPU: each compiles its own modules
//! (the program cache is keyed by program and settings), later runs under
//! each reuse them, and both compute what an f64 reference computes.
//!
//! Needs a CUDA GPU; run with `cargo test --test gpu_config -- --include-ignored`.
//! One test, so that the device's program count is this test's alone.

#![cfg(feature = "cuda")]

mod common;

use tilefuse::config::Config;
use tilefuse::device::cuda::CudaCompiler;
use tilefuse::{Device, Tensor};

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_configs_compile_two_modules_and_both_are_right() {
    let compiler = CudaCompiler::open(0).unwrap();
    let (rows, cols) = (4096, 1000);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.0 - 1.0) * 3.0)
        .collect();
    let want = common::softmax_rows_f64(&xs, cols);
    let x = Tensor::from_vec(xs, &[rows, cols]).to(Device::Cuda(0));
    x.realize().unwrap();

    let default = Config::default();
    let mut other = Config::default();
    other.codegen.max_threads = 128;
    other.codegen.stage = false;
    other.codegen.chained_rows_in_registers = false;
    other.jit.quick = None;

    // Realizes the softmax under `config`, checks it, and says whether
    // its plan came from the cache.
    let check = |config: &Config, what: &str| -> bool {
        let y = x.softmax(1);
        let hit = config.with(|| y.realize_with_stats()).unwrap().plan_cache_hit;
        let got = y.to_vec::<f32>().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 2e-6 * w.max(1e-30) + 1e-9,
                "{what}: element {i}: {g} against {w}"
            );
        }
        hit
    };
    let before = compiler.compiled_programs();
    assert!(!check(&default, "default"));
    let after_default = compiler.compiled_programs();
    assert!(after_default > before, "the default config compiled its kernels");
    // The same plan (same fusion settings), other codegen settings: its
    // own modules, with other PTX.
    assert!(
        check(&other, "other"),
        "the fusion settings are the same: the plan is cached"
    );
    let after_other = compiler.compiled_programs();
    assert_eq!(
        after_other - after_default,
        after_default - before,
        "one module per kernel and config"
    );
    // Again under each: nothing new compiles.
    check(&default, "default again");
    check(&other, "other again");
    assert_eq!(compiler.compiled_programs(), after_other);
    // The cached modules: other text for the same program.
    let plan = x.softmax(1).plan().unwrap();
    let program = &plan.kernels[0].program;
    let (a, b) = (
        compiler.compile_with(program, &default).unwrap(),
        compiler.compile_with(program, &other).unwrap(),
    );
    assert_ne!(a.module().text, b.module().text);
    assert!(!b.has_quick_tier(), "the other config has no quick tier");
    assert_eq!(compiler.compiled_programs(), after_other);
    compiler.finish_compiles();
}
