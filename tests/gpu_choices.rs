//! Codegen settings chosen by measurement on a GPU: a recorded choice
//! changes the module a program compiles to (and only under configs that
//! use measured choices), `Tensor::measure_choices` times every distinct
//! candidate and writes what it chose to the device's choices file, and
//! results under the chosen settings are the reference's.
//!
//! Needs a CUDA GPU; run with `cargo test --test gpu_choices -- --include-ignored`.
//! One test, so that `TILEFUSE_CHOICES` is set before the device's
//! compiler first reads its choices.

#![cfg(feature = "cuda")]

mod common;

use tilefuse::config::Config;
use tilefuse::device::cuda::choice::{candidates, choice_key, choices_file_name, MARGIN};
use tilefuse::device::cuda::CudaCompiler;
use tilefuse::kernels::ir::{Access, Builder, IndexExpr, Program};
use tilefuse::kernels::ptx_gen::generate_with;
use tilefuse::ops::{BinaryOp, Padding};
use tilefuse::{DType, Device, Scalar, Tensor};

/// `y = x + 1` over 2^20 f32 in tiles of 4096.
fn add_one() -> Program {
    let n = 1 << 20;
    let mut b = Builder::new("add_one_choice", &[n / 4096]);
    let x = b.param("x", DType::F32, n, Access::Read);
    let y = b.param("y", DType::F32, n, Access::Write);
    let vx = b.view_contiguous(x, &[n], &[4096], Padding::Zero);
    let vy = b.view_contiguous(y, &[n], &[4096], Padding::Zero);
    let t = b.load(vx, &[IndexExpr::grid(0)], false);
    let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4096]);
    let s = b.binary(BinaryOp::Add, t, one);
    b.store(vy, &[IndexExpr::grid(0)], s, false);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn measured_choices_are_recorded_used_and_right() {
    let dir = std::env::temp_dir().join(format!("tilefuse-choices-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_var("TILEFUSE_CHOICES", &dir);
    let info = tilefuse::device::cuda::probe_ordinal(0).unwrap();
    let file = dir.join(choices_file_name(&info));

    // A file an earlier process wrote: `threads 512` for `add_one`.
    let program = add_one();
    let base = Config::default();
    std::fs::write(
        &file,
        format!("{:016x} threads 512\n", choice_key(&program, &base.codegen)),
    )
    .unwrap();
    let compiler = CudaCompiler::open(0).unwrap();
    assert_eq!(compiler.choices_path().as_deref(), Some(file.as_path()));
    let mut tuned_only = base.clone();
    tuned_only.jit.quick = None;
    let chosen = candidates(&base.codegen)
        .into_iter()
        .find(|(l, _)| *l == "threads 512")
        .unwrap()
        .1;
    let module = |codegen| generate_with(&program, &compiler.target(), codegen).unwrap();
    assert_ne!(
        module(&chosen),
        module(&base.codegen),
        "the candidate changes the module"
    );
    let compiled = compiler.compile_with(&program, &tuned_only).unwrap();
    assert_eq!(*compiled.module(), module(&chosen), "the recorded choice is used");
    let mut own = tuned_only.clone();
    own.jit.measured = false;
    let compiled = compiler.compile_with(&program, &own).unwrap();
    assert_eq!(
        *compiled.module(),
        module(&base.codegen),
        "measured off keeps the config's settings"
    );

    // Measuring a softmax: every distinct candidate timed, the default
    // first, the choice written beside the earlier one.
    let (rows, cols) = (8192, 1000);
    let xs: Vec<f32> = (0..rows * cols)
        .map(|i| (i * 7919 % 2003) as f32 / 500.0 - 2.0)
        .collect();
    let want = common::softmax_rows_f64(&xs, cols);
    let x = Tensor::from_vec(xs, &[rows, cols]).to(Device::Cuda(0));
    let y = x.softmax(1);
    let choices = Tensor::measure_choices(&[&y]).unwrap();
    assert!(!choices.is_empty());
    for c in &choices {
        println!("{c:?}");
        assert_eq!(c.times[0].label, "default", "{c:?}");
        assert!(c.times.len() >= 2, "a softmax has candidates that differ: {c:?}");
        assert!(c.times.iter().all(|t| t.ms.is_finite() && t.ms > 0.0), "{c:?}");
        assert!(c.times.iter().any(|t| t.label == c.chosen), "{c:?}");
        if c.chosen != "default" {
            assert!(c.speedup() >= MARGIN, "{c:?}");
        }
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(lines, 1 + choices.len(), "{text}");
    assert!(text.contains(&format!("{:016x} threads 512", choice_key(&program, &base.codegen))));

    // The softmax realized under the choices is the reference's.
    let got = y.to_vec::<f32>().unwrap();
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!((g as f64 - w).abs() <= 2e-6 * w + 1e-9, "element {i}: {g} against {w}");
    }
    // On the CPU there is nothing to measure.
    let host = Tensor::from_vec(vec![1.0f32; 8], &[8]).exp();
    assert!(Tensor::measure_choices(&[&host]).unwrap().is_empty());
    std::fs::remove_dir_all(&dir).ok();
}
