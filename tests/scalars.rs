//! Constants a user writes (`x * lr`, `clamp(lo, hi)`, `powf(p)`, `full`)
//! are scalar arguments of the kernels, not part of the plan: a pipeline
//! run again with new values finds its plan, and every value computes
//! right, on the CPU executor. `gpu_scalars.rs` checks the same on a GPU.

use std::sync::Arc;
use tilefuse::fusion::Plan;
use tilefuse::{DType, Tensor};

fn data(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.0 - 1.0) * 1.5)
        .collect()
}

/// Realizes `y`, checks it against `want` (within `tol` relative to the
/// larger of 1 and the value), and returns whether the plan was cached and
/// the plan itself.
fn check(y: &Tensor, want: &[f64], tol: f64) -> (bool, Arc<Plan>) {
    let plan = y.plan().unwrap();
    let stats = y.realize_with_stats().unwrap();
    let got: Vec<f64> = match y.dtype() {
        DType::F32 => y.to_vec::<f32>().unwrap().into_iter().map(f64::from).collect(),
        DType::F64 => y.to_vec::<f64>().unwrap(),
        DType::I32 => y.to_vec::<i32>().unwrap().into_iter().map(f64::from).collect(),
        DType::I64 => y.to_vec::<i64>().unwrap().into_iter().map(|v| v as f64).collect(),
        DType::U8 => y.to_vec::<u8>().unwrap().into_iter().map(f64::from).collect(),
        DType::F16 => y.to_vec::<half::f16>().unwrap().into_iter().map(f64::from).collect(),
        DType::BF16 => y.to_vec::<half::bf16>().unwrap().into_iter().map(f64::from).collect(),
        d => panic!("no reader for {d}"),
    };
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || (g - w).abs() <= tol * w.abs().max(1.0),
            "element {i}: {g} against {w}"
        );
    }
    (stats.plan_cache_hit, plan)
}

/// Runs `pipeline` for each value; the first may plan, every later one must
/// find the first one's plan.
fn one_plan_for_all<V: Copy>(values: &[V], mut pipeline: impl FnMut(V) -> (bool, Arc<Plan>)) {
    let (_, first) = pipeline(values[0]);
    for &v in &values[1..] {
        let (hit, plan) = pipeline(v);
        assert!(hit, "a new value missed the plan cache");
        assert!(Arc::ptr_eq(&first, &plan), "a new value got another plan");
    }
}

#[test]
fn a_learning_rate_changed_a_hundred_times_uses_one_plan() {
    let xs = data(1000, 1);
    let x = Tensor::from_vec(xs.clone(), &[1000]);
    let lrs: Vec<f32> = (0..100).map(|i| 0.001 + i as f32 * 0.0137).collect();
    one_plan_for_all(&lrs, |lr| {
        let y = (&x * lr).exp();
        let want: Vec<f64> = xs.iter().map(|&v| (v * lr).exp() as f64).collect();
        check(&y, &want, 2e-6)
    });
}

#[test]
fn clamp_powf_and_full_take_their_values_at_launch() {
    let xs = data(777, 2);
    let x = Tensor::from_vec(xs.clone(), &[7, 111]);
    one_plan_for_all(&[(-0.5f32, 0.25f32), (-1.0, 1.0), (0.1, 0.2)], |(lo, hi)| {
        let want: Vec<f64> = xs.iter().map(|&v| v.clamp(lo, hi) as f64).collect();
        check(&x.clamp(lo, hi), &want, 0.0)
    });
    one_plan_for_all(&[2.0f64, 0.5, 3.25], |p| {
        let want: Vec<f64> = xs.iter().map(|&v| (v.abs() as f64).powf(p)).collect();
        check(&x.abs().powf(p), &want, 1e-6)
    });
    one_plan_for_all(&[1.5f32, -2.0, 1e-3], |v| {
        let y = Tensor::full(&[7, 111], v) * &x + 1.0f32;
        let want: Vec<f64> = xs.iter().map(|&e| (v * e + 1.0) as f64).collect();
        check(&y, &want, 1e-7)
    });
    // A constant that is itself the result.
    one_plan_for_all(&[4.0f32, -0.0, f32::INFINITY], |v| {
        check(&Tensor::full(&[3, 5], v), &[v as f64; 15], 0.0)
    });
}

#[test]
fn scalars_of_every_dtype_are_rounded_to_their_node_first() {
    let ints: Vec<i32> = (0..300).map(|i| i * 37 % 101 - 50).collect();
    let x = Tensor::from_vec(ints.clone(), &[300]);
    one_plan_for_all(&[3i32, -7, i32::MAX], |k| {
        let want: Vec<f64> = ints.iter().map(|&v| v.wrapping_mul(k) as f64).collect();
        check(&(&x * k), &want, 0.0)
    });
    let x64 = x.cast(DType::I64);
    one_plan_for_all(&[1i64 << 40, -3], |k| {
        let want: Vec<f64> = ints.iter().map(|&v| (v as i64 + k) as f64).collect();
        check(&(&x64 + k), &want, 0.0)
    });
    let bytes = x.cast(DType::U8);
    one_plan_for_all(&[5u8, 250], |k| {
        let want: Vec<f64> = ints.iter().map(|&v| (v as u8).wrapping_add(k) as f64).collect();
        check(&(&bytes + &Tensor::full(&[300], k)), &want, 0.0)
    });
    // A half tensor times an f32 scalar: the scalar is rounded to f16 (the
    // operand's dtype), the product computed in f32 and rounded once.
    let xs = data(300, 3);
    let h = Tensor::from_vec(xs.iter().map(|&v| half::f16::from_f32(v)).collect(), &[300]);
    one_plan_for_all(&[0.1f32, 3.3, -1e-3], |s| {
        let s16 = half::f16::from_f32(s).to_f32();
        let want: Vec<f64> = xs
            .iter()
            .map(|&v| half::f16::from_f32(half::f16::from_f32(v).to_f32() * s16).to_f64())
            .collect();
        check(&(&h * s), &want, 0.0)
    });
    let d = Tensor::from_vec(xs.iter().map(|&v| v as f64).collect(), &[300]);
    one_plan_for_all(&[1e-300f64, 0.3], |s| {
        let want: Vec<f64> = xs.iter().map(|&v| v as f64 * s).collect();
        check(&(&d * s), &want, 1e-15)
    });
    // A bool constant in a select.
    let cond = x.gt(&x.scalar_like(0));
    one_plan_for_all(&[true, false], |b| {
        let pick = Tensor::where_(&(&cond & b), &x, &x.scalar_like(-1));
        let want: Vec<f64> = ints.iter().map(|&v| if v > 0 && b { v as f64 } else { -1.0 }).collect();
        check(&pick, &want, 0.0)
    });
}

#[test]
fn reductions_and_row_kernels_read_their_scalars_at_launch() {
    let (rows, cols) = (37, 300);
    let xs = data(rows * cols, 4);
    let x = Tensor::from_vec(xs.clone(), &[rows, cols]);
    let row = |r: usize| &xs[r * cols..(r + 1) * cols];
    one_plan_for_all(&[0.5f32, 2.0, -0.25], |t| {
        let want: Vec<f64> = (0..rows)
            .flat_map(|r| {
                let z: Vec<f64> = row(r).iter().map(|&v| (v * t) as f64).collect();
                let m = z.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
                z.into_iter().map(move |v| (v - m).exp() / s)
            })
            .collect();
        check(&(&x * t).softmax(-1), &want, 1e-5)
    });
    // (Values other than the 1 added: equal constants of one shape are one
    // node, another graph.)
    one_plan_for_all(&[1.5f32, -3.0], |s| {
        let want: Vec<f64> = (0..cols)
            .map(|c| (0..rows).map(|r| (xs[r * cols + c] * s) as f64 + 1.0).sum())
            .collect();
        check(&(&x * s + 1.0f32).sum(&[0], false), &want, 1e-5)
    });
    // A full reduction split across grid points, its scalar read in every part.
    let n = 100_000;
    let big = data(n, 5);
    let xb = Tensor::from_vec(big.clone(), &[n]);
    one_plan_for_all(&[0.75f32, 2.5], |s| {
        let want: f64 = big.iter().map(|&v| (v * s) as f64).sum();
        // The terms cancel: the f32 sum's error scales with their magnitudes.
        let magnitude: f64 = big.iter().map(|&v| (v * s).abs() as f64).sum();
        check(&(&xb * s).sum_all(), &[want], 1e-6 * magnitude / want.abs().max(1.0))
    });
}

#[test]
fn the_printed_program_names_scalar_arguments_not_values() {
    let x = Tensor::from_vec(data(64, 6), &[64]);
    let a = (&x * 0.125f32).explain().unwrap();
    let b = (&x * 8.0f32).explain().unwrap();
    let program = |e: &str| {
        e.lines()
            .filter(|l| l.contains("scalar"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(a.contains("s0: f32") && a.contains("= scalar s0"), "{a}");
    assert_eq!(program(&a), program(&b));
}

#[test]
fn a_hand_written_program_takes_its_scalars_at_launch_and_checks_their_count() {
    use tilefuse::graph::BinaryOp;
    use tilefuse::kernels::cpu::{execute, execute_with_scalars, Arg};
    use tilefuse::kernels::ir::{Access, Builder, IndexExpr};
    use tilefuse::storage::HostBuffer;
    use tilefuse::tile::Padding;
    use tilefuse::{Error, Scalar};
    let mut b = Builder::new("scale", &[2]);
    let x = b.param("x", DType::F32, 8, Access::Read);
    let y = b.param("y", DType::F32, 8, Access::Write);
    let (vx, vy) = (
        b.view_contiguous(x, &[8], &[4], Padding::Zero),
        b.view_contiguous(y, &[8], &[4], Padding::Zero),
    );
    let k = b.scalar_param(DType::F32);
    let t = b.load(vx, &[IndexExpr::grid(0)], false);
    let s = b.scalar(k, &[4]);
    let p = b.binary(BinaryOp::Mul, t, s);
    b.store(vy, &[IndexExpr::grid(0)], p, false);
    let program = b.finish().unwrap();
    assert!(program.to_string().contains("s0: f32"), "{program}");
    let xs = HostBuffer::from_elements(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    for k in [0.5f64, -3.0] {
        let mut out = HostBuffer::zeros(DType::F32, 8);
        // An f64 value is converted to the argument's f32.
        execute_with_scalars(
            &program,
            &mut [Arg::Read(&xs), Arg::Write(&mut out)],
            &[Scalar::Float(k, DType::F64)],
        )
        .unwrap();
        let want: Vec<f32> = (1..=8).map(|i| i as f32 * k as f32).collect();
        assert_eq!(out.to_vec::<f32>(), want);
    }
    let mut out = HostBuffer::zeros(DType::F32, 8);
    let err = execute(&program, &mut [Arg::Read(&xs), Arg::Write(&mut out)]).unwrap_err();
    assert!(
        matches!(&err, Error::KernelArguments { reason, .. } if reason == "0 scalar arguments given for 1 scalar parameters"),
        "{err}"
    );
}
