//! `cumsum`, `cumprod`, `cummax`, `cummin` and `logcumsumexp` on the CPU executor: values
//! against a sequential host scan (f64 for floats), every dtype, every
//! axis, lines longer than a tile (carried from tile to tile), views as
//! input, the kernel counts that show a scan fused with the work around it,
//! and misuse as errors.

mod common;

use common::f64s;
use tilefuse::fusion::FusionOptions;
use tilefuse::graph::{Op, ScanOp};
use tilefuse::{DType, Error, Tensor};

/// A deterministic tensor of `shape` whose values are exact in every dtype.
fn data(shape: &[usize], dtype: DType, seed: i64) -> Tensor {
    common::exact_tensor(shape, dtype, seed, 4.0)
}

/// The inclusive scan of row-major `x` of `dims` along `axis` by `f`.
fn scanned(x: &[f64], dims: &[usize], axis: usize, f: fn(f64, f64) -> f64) -> Vec<f64> {
    let inner: usize = dims[axis + 1..].iter().product();
    let len = dims[axis];
    let mut out = x.to_vec();
    for base in 0..x.len() {
        if (base / inner) % len == 0 {
            for k in 1..len {
                out[base + k * inner] = f(out[base + (k - 1) * inner], out[base + k * inner]);
            }
        }
    }
    out
}

fn close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * w.abs().max(1.0);
        assert!(ok, "{what}: element {i} is {g}, not {w}");
    }
}

#[test]
fn scans_of_every_dtype_along_every_axis() {
    let dims = [5, 6, 7];
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
    ] {
        let x = data(&dims, dtype, 1);
        let xv = f64s(&x);
        for axis in 0..3 {
            let a = axis as isize;
            let rel = match dtype {
                DType::F16 => 2e-3,
                DType::BF16 => 1e-2,
                DType::F32 => 1e-6,
                _ => 1e-12,
            };
            let sums = x.cumsum(a);
            assert_eq!(sums.dtype(), if dtype.is_float() { dtype } else { DType::I64 });
            close(
                &f64s(&sums),
                &scanned(&xv, &dims, axis, |p, v| p + v),
                rel,
                &format!("cumsum {dtype} {axis}"),
            );
            let maxes = x.cummax(a);
            assert_eq!(maxes.dtype(), dtype);
            close(
                &f64s(&maxes),
                &scanned(&xv, &dims, axis, f64::max),
                0.0,
                &format!("cummax {dtype} {axis}"),
            );
            close(
                &f64s(&x.cummin(a)),
                &scanned(&xv, &dims, axis, f64::min),
                0.0,
                &format!("cummin {dtype} {axis}"),
            );
        }
    }
    // Products of small values, and bools summed as counts.
    let p = Tensor::from_vec(vec![1.5f64, -2.0, 0.5, 3.0, 2.0, 1.0], &[2, 3]);
    assert_eq!(
        p.cumprod(1).to_vec::<f64>().unwrap(),
        vec![1.5, -3.0, -1.5, 3.0, 6.0, 6.0]
    );
    let i = Tensor::from_vec(vec![2i32, 3, 4, 5], &[4]);
    assert_eq!(i.cumprod(0).to_vec::<i64>().unwrap(), vec![2, 6, 24, 120]);
    let b = Tensor::from_vec(vec![true, false, true, true], &[4]);
    assert_eq!(b.cumsum(0).to_vec::<i64>().unwrap(), vec![1, 1, 2, 3]);
    assert_eq!(b.cummax(0).dtype(), DType::Bool);
    assert_eq!(
        Tensor::from_vec(vec![false, true, false], &[3])
            .cummax(0)
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true, true]
    );
    // NaN propagates through running maxima and minima.
    let n = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0], &[3]);
    let m = n.cummax(0).to_vec::<f32>().unwrap();
    assert!(m[0] == 1.0 && m[1].is_nan() && m[2].is_nan(), "{m:?}");
}

#[test]
fn long_lines_carry_from_tile_to_tile() {
    // Lines far longer than a tile, along the last and the first axis, and
    // a small row tile so that even short lines take several tiles.
    for (dims, axis) in [(vec![3, 50_000], 1usize), (vec![20_000, 3], 0), (vec![2, 9, 1_000], 1)] {
        let x = data(&dims, DType::I64, 2);
        let want = scanned(&f64s(&x), &dims, axis, |p, v| p + v);
        assert_eq!(f64s(&x.cumsum(axis as isize)), want, "{dims:?} along {axis}");
        let f = x.cast(DType::F64);
        close(&f64s(&f.cumsum(axis as isize)), &want, 1e-12, &format!("f64 {dims:?}"));
    }
    // Tiles of 64 elements: a line of 301 takes five tiles, planned for the
    // CPU and for the GPU, run on the executor against the reference.
    for target in [FusionOptions::cpu(), FusionOptions::gpu()] {
        let opts = FusionOptions {
            tile_elements: 64,
            max_row_tile: 16,
            ..target
        };
        for op in [ScanOp::Sum, ScanOp::Max, ScanOp::LogSumExp] {
            let mut g = common::G::default();
            let x = g.data_f32(&[7, 301], |i| ((i * 37) % 19) as f32 - 9.0);
            let y = g.push(Op::Scan { op, axis: 1 }, &[7, 301], DType::F32, &[x]);
            let graph = g.finish(&[y]);
            let plan = tilefuse::fusion::plan(&graph, &opts).unwrap();
            assert!(plan.kernels[0].program.to_string().contains("loop"), "{op:?}: carried");
            let got = common::run_plan(&graph, &plan).unwrap();
            let want = tilefuse::graph::reference::evaluate(&graph).unwrap();
            let as_f64 = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
            let (got, want) = (as_f64(got[0].as_slice::<f32>()), as_f64(want[0].as_slice::<f32>()));
            close(&got, &want, 1e-6, &format!("{op:?} in tiles of 64"));
        }
    }
}

#[test]
fn scans_read_views_and_fuse_with_the_work_around_them() {
    let base = data(&[9, 40], DType::F32, 4);
    // A transposed and a stepped view scanned.
    for (x, axis) in [
        (base.transpose(0, 1), 1usize),
        (base.slice(1, 1, 40, 3), 1),
        (base.transpose(0, 1), 0),
    ] {
        let want = scanned(&f64s(&x), x.dims(), axis, |p, v| p + v);
        close(
            &f64s(&x.cumsum(axis as isize)),
            &want,
            1e-6,
            &format!("{:?} along {axis}", x.dims()),
        );
    }
    // The work before and after a scan: one kernel.
    let w = data(&[1, 40], DType::F32, 5);
    let y = ((&base * &w).cumsum(1) / 3.0).relu();
    let stats = y.realize_with_stats().unwrap();
    assert_eq!(stats.kernels_launched, 1);
    let prod: Vec<f64> = f64s(&base)
        .iter()
        .enumerate()
        .map(|(i, v)| v * f64s(&w)[i % 40])
        .collect();
    let want: Vec<f64> = scanned(&prod, &[9, 40], 1, |p, v| p + v)
        .iter()
        .map(|v| (v / 3.0).max(0.0))
        .collect();
    close(&f64s(&y), &want, 1e-5, "fused");
    // Run after run, the same bits (a fixed order of combination).
    let long = data(&[3, 30_000], DType::F32, 10);
    let runs: Vec<Vec<f64>> = (0..3).map(|_| f64s(&(&long * 1.0).cumsum(1))).collect();
    assert!(runs.windows(2).all(|w| w[0] == w[1]));
    // A scan then a reduction over the scanned axis, and a normalisation by
    // the row's total: the scan and what reads it in one kernel each way.
    let s = base.cumsum(1).sum(&[1], true);
    assert_eq!(s.realize_with_stats().unwrap().kernels_launched, 1);
    let cdf = &base.exp().cumsum(1) / &base.exp().sum(&[1], true);
    let got = f64s(&cdf);
    for r in 0..9 {
        assert!(
            (got[r * 40 + 39] - 1.0).abs() < 1e-5,
            "row {r} ends at {}",
            got[r * 40 + 39]
        );
    }
}

#[test]
fn scan_misuse_is_an_error_naming_the_op() {
    let x = data(&[3, 4], DType::F32, 6);
    assert!(matches!(
        x.try_cumsum(2),
        Err(Error::AxisOutOfRange {
            op: "cumsum",
            axis: 2,
            ..
        })
    ));
    assert!(matches!(
        x.try_cumprod(-3),
        Err(Error::AxisOutOfRange { op: "cumprod", .. })
    ));
    let s = Tensor::scalar(1.0f32);
    assert!(matches!(
        s.try_cummax(0),
        Err(Error::AxisOutOfRange { op: "cummax", .. })
    ));
    // An empty axis scans to an empty result.
    let e = data(&[3, 0], DType::F32, 7);
    assert_eq!(e.cumsum(1).dims(), &[3, 0]);
    assert!(e.cumsum(1).to_vec::<f32>().unwrap().is_empty());
}

/// `log(exp(a) + exp(b))` in f64, infinities as they are.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if !m.is_finite() {
        return m;
    }
    m + (-(a - b).abs()).exp().ln_1p()
}

#[test]
fn logcumsumexp_neither_overflows_nor_underflows() {
    // Lines that would overflow exp (1000) and underflow it (-1000), with
    // -inf and +inf: the pairwise combination keeps every prefix exact to
    // a few ulp.
    let v = vec![
        0.0f64,
        0.0,
        -1000.0,
        1000.0,
        f64::NEG_INFINITY,
        999.0,
        1.0,
        f64::INFINITY,
    ];
    let want = scanned(&v, &[8], 0, log_add_exp);
    let got = Tensor::from_vec(v.clone(), &[8])
        .logcumsumexp(0)
        .to_vec::<f64>()
        .unwrap();
    close(&got, &want, 1e-14, "f64 extremes");
    let lead = Tensor::from_vec(vec![f64::NEG_INFINITY, f64::NEG_INFINITY, -5.0], &[3]);
    let got = lead.logcumsumexp(0).to_vec::<f64>().unwrap();
    assert!(
        got[0] == f64::NEG_INFINITY && got[1] == f64::NEG_INFINITY && got[2] == -5.0,
        "{got:?}"
    );
    // Every float dtype, both axes, lines short and carried over tiles.
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (dims, axis) in [(vec![5, 33], 1usize), (vec![40, 3], 0), (vec![2, 30_000], 1)] {
            let x = data(&dims, dtype, 8);
            let want = scanned(&f64s(&x), &dims, axis, log_add_exp);
            // f32 rounds each of thousands of steps: errors add up as in
            // any sequential f32 accumulation.
            let rel = match dtype {
                DType::F16 => 2e-3,
                DType::BF16 => 1e-2,
                DType::F32 => 1e-4,
                _ => 1e-11,
            };
            let y = x.logcumsumexp(axis as isize);
            assert_eq!(y.dtype(), dtype);
            close(&f64s(&y), &want, rel, &format!("{dtype} {dims:?} along {axis}"));
        }
    }
    // Fused: a log-softmax-like cumulative form, one kernel.
    let x = data(&[6, 50], DType::F32, 9);
    let y = &x - &x.logcumsumexp(1);
    assert_eq!(y.realize_with_stats().unwrap().kernels_launched, 1);
    assert!(matches!(
        Tensor::from_vec(vec![1i32, 2], &[2]).try_logcumsumexp(0),
        Err(Error::UnsupportedDType { op: "logcumsumexp", .. })
    ));
}
