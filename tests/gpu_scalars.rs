//! Scalar arguments on a GPU: a pipeline run with a hundred values of its
//! constant plans once and compiles one module, and every value computes
//! what the CPU executor computes.
//!
//! Needs a CUDA GPU; run with `cargo test --test gpu_scalars -- --include-ignored`.
//! One test, so that the device's program count is this test's alone.

#![cfg(feature = "cuda")]

use tilefuse::device::cuda::CudaCompiler;
use tilefuse::{DType, Device, Tensor};

fn data(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.0 - 1.0) * 1.5)
        .collect()
}

/// `y` realized on the GPU and on the CPU (each rounded to its dtype when
/// stored), as f64 values.
fn both(y: impl Fn(Device) -> Tensor) -> (Vec<f64>, Vec<f64>) {
    let read = |t: &Tensor| -> Vec<f64> { t.cast(DType::F64).to_vec::<f64>().unwrap() };
    let (g, c) = (y(Device::Cuda(0)), y(Device::Cpu));
    g.realize().unwrap();
    c.realize().unwrap();
    (read(&g), read(&c))
}

fn close(gpu: &[f64], cpu: &[f64], tol: f64, what: &str) {
    assert_eq!(gpu.len(), cpu.len());
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            g == c || (g.is_nan() && c.is_nan()) || (g - c).abs() <= tol * c.abs().max(1.0),
            "{what}: element {i}: GPU {g}, CPU {c}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scalars_are_launch_arguments_on_the_gpu() {
    let compiler = CudaCompiler::open(0).unwrap();
    let xs = data(1 << 16, 1);
    let x = Tensor::from_vec(xs.clone(), &[1 << 16]).to(Device::Cuda(0));
    x.realize().unwrap();
    // Warm up: the first value plans and compiles.
    let first = (&x * 0.5f32).exp();
    first.realize().unwrap();
    let before = compiler.compiled_programs();
    for i in 0..100 {
        let lr = 0.001 + i as f32 * 0.0137;
        let y = (&x * lr).exp();
        let stats = y.realize_with_stats().unwrap();
        assert!(stats.plan_cache_hit, "value {lr} missed the plan cache");
        let got = y.to_vec::<f32>().unwrap();
        for (j, (&g, &v)) in got.iter().zip(&xs).enumerate() {
            let want = ((v * lr) as f64).exp();
            assert!(
                (g as f64 - want).abs() <= 2e-6 * want,
                "lr {lr}: element {j}: {g} against {want}"
            );
        }
    }
    assert_eq!(
        compiler.compiled_programs(),
        before,
        "a new value compiled a new module"
    );

    // Every kind of kernel, every scalar dtype, against the CPU.
    let xs = data(37 * 300, 2);
    let host = Tensor::from_vec(xs.clone(), &[37, 300]);
    for t in [0.5f32, -2.0] {
        let (g, c) = both(|d| (&host.to(d) * t).softmax(-1));
        close(&g, &c, 1e-6, "softmax of x * t");
        let (g, c) = both(|d| (&host.to(d) * t + 1.0f32).sum(&[0], false));
        close(&g, &c, 1e-5, "column sum of x * t + 1");
        let (g, c) = both(|d| host.to(d).clamp(t.min(0.1), t.max(0.1)));
        close(&g, &c, 0.0, "clamp");
        let (g, c) = both(|d| Tensor::full(&[37, 300], t).to(d) * host.to(d).abs().powf(t as f64));
        close(&g, &c, 1e-6, "full times powf");
    }
    let bigs = data(1 << 20, 3);
    let big = Tensor::from_vec(bigs.clone(), &[1 << 20]);
    for s in [0.75f32, 2.5] {
        let (g, c) = both(|d| (&big.to(d) * s).sum_all());
        // The terms cancel, and the two sum in other orders: their f32
        // rounding errors scale with the terms' magnitudes.
        let magnitude: f64 = bigs.iter().map(|&v| (v * s).abs() as f64).sum();
        close(&g, &c, 1e-6 * magnitude / c[0].abs().max(1.0), "split sum of x * s");
    }
    let ints = Tensor::from_vec((0..4096).map(|i| i * 37 % 101 - 50).collect::<Vec<i32>>(), &[4096]);
    for k in [3i32, -7, i32::MAX] {
        let (g, c) = both(|d| &ints.to(d) * k);
        close(&g, &c, 0.0, "i32 times a scalar");
        let (g, c) = both(|d| &ints.to(d).cast(DType::I64) + (k as i64) * (1 << 33));
        close(&g, &c, 0.0, "i64 plus a scalar");
        let (g, c) = both(|d| &ints.to(d).cast(DType::U8) + &Tensor::full(&[4096], k as u8).to(d));
        close(&g, &c, 0.0, "u8 plus a scalar");
        let (g, c) = both(|d| &ints.to(d).cast(DType::F64) * (k as f64 * 1e-300));
        close(&g, &c, 0.0, "f64 times a scalar");
        let (g, c) = both(|d| &ints.to(d).cast(DType::F16) * (k as f32 * 1e-3));
        close(&g, &c, 0.0, "f16 times a scalar");
    }
    for b in [true, false] {
        let (g, c) = both(|d| {
            let x = ints.to(d);
            Tensor::where_(&(&x.gt(&x.scalar_like(0)) & b), &x, &x.scalar_like(-1))
        });
        close(&g, &c, 0.0, "a bool scalar in a select");
    }
}
