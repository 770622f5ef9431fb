//! The main job: a few pipelines of the throughput suite, fused and run on
//! the best device there is.
//!
//! For each pipeline it prints the fusion plan (how many kernels, which ops
//! each computes), runs it, checks the result against the unfused reference
//! evaluator (computed in f64), and reports the median time and the
//! effective bandwidth over the pipeline's minimal bytes.
//!
//! ```sh
//! cargo run --release --example quickstart
//! ```

use std::time::Instant;
use tilefuse::graph::reference;
use tilefuse::{DType, Device, Tensor};

/// One pipeline: its name, its minimal bytes and how to build its result.
struct Pipeline {
    name: &'static str,
    shape: String,
    bytes: usize,
    build: Box<dyn Fn() -> Tensor>,
}

fn main() -> tilefuse::Result<()> {
    let device = Device::best();
    println!("device: {} ({})", device, Device::best_reason());
    // The CPU sizes of the throughput suite, or larger ones on a GPU.
    let (n, rows, cols) = if device.is_cuda() {
        (1 << 24, 8192, 4096)
    } else {
        (1 << 22, 1024, 1024)
    };

    let input = |shape: &[usize], seed: u64| -> tilefuse::Result<Tensor> {
        let t = Tensor::randn(shape, DType::F32, seed).to(device);
        t.realize()?;
        Ok(t)
    };
    let (a, b, c) = (input(&[n], 1)?, input(&[n], 2)?, input(&[n], 3)?);
    let x = input(&[rows, cols], 4)?;
    let (w, bias) = (input(&[cols], 5)?, input(&[cols], 6)?);

    let pipelines = vec![
        Pipeline {
            name: "chain",
            shape: format!("[{n}]"),
            bytes: 16 * n,
            build: {
                let (a, b, c) = (a.clone(), b.clone(), c.clone());
                Box::new(move || (&a * &b + &c).tanh() * a.sigmoid() - (-(&b * &b)).exp())
            },
        },
        Pipeline {
            name: "mse",
            shape: format!("[{n}]"),
            bytes: 8 * n,
            build: {
                let (a, b) = (a.clone(), b.clone());
                Box::new(move || {
                    let d = &a - &b;
                    (&d * &d).mean_all()
                })
            },
        },
        Pipeline {
            name: "softmax",
            shape: format!("[{rows}, {cols}]"),
            bytes: 8 * rows * cols,
            build: {
                let x = x.clone();
                Box::new(move || x.softmax(-1))
            },
        },
        Pipeline {
            name: "layernorm",
            shape: format!("[{rows}, {cols}]"),
            bytes: 8 * rows * cols + 8 * cols,
            build: {
                let (x, w, bias) = (x.clone(), w.clone(), bias.clone());
                Box::new(move || x.layer_norm(Some(&w), Some(&bias), 1e-5))
            },
        },
    ];

    println!();
    println!(
        "{:<10} {:<14} {:>8} {:>11} {:>9} {:>10}",
        "pipeline", "shape", "kernels", "max error", "time", "GB/s"
    );
    for p in &pipelines {
        let y = (p.build)();
        let plan = y.plan()?;
        let expected = reference::evaluate(&y.subgraph())?.remove(0).to_vec::<f64>();
        let got: Vec<f64> = y.to_vec::<f32>()?.into_iter().map(f64::from).collect();
        let err = max_relative_error(&got, &expected);
        assert!(
            err < 1e-3,
            "{}: fused result differs from the reference by {err:e}",
            p.name
        );
        drop(y);

        let mut times = Vec::new();
        for _ in 0..7 {
            // A fresh expression each time: a realized one would not be recomputed.
            let y = (p.build)();
            let start = Instant::now();
            y.realize()?;
            y.to_vec::<f32>()?;
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{:<10} {:<14} {:>8} {:>11.2e} {:>7.2}ms {:>10.1}",
            p.name,
            p.shape,
            plan.kernels.len(),
            err,
            median * 1e3,
            p.bytes as f64 / median / 1e9
        );
        for (k, kernel) in plan.kernels.iter().enumerate() {
            println!(
                "    kernel {k}: {} (grid {:?})",
                kernel.program.name,
                kernel.program.grid.as_slice()
            );
        }
    }
    println!();
    println!("Times include copying the result back to the host; the throughput report");
    println!("(examples/throughput.rs) times device work alone.");
    Ok(())
}

/// The largest `|got - want| / max(|want|, 1e-3 * max|want|)` over all elements.
fn max_relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs())) * 1e-3;
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            if g.is_nan() || w.is_nan() {
                if g.is_nan() == w.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (g - w).abs() / w.abs().max(scale).max(f64::MIN_POSITIVE)
            }
        })
        .fold(0.0, f64::max)
}
