//! CPU throughput of the suite's pipelines (BENCHMARKS.md, "CPU pipelines"):
//! chain and mse on [2^24] f32, softmax and layer norm on [4096, 1024] f32.
//!
//! Each pipeline is measured four ways, as criterion groups named
//! `PIPELINE/VARIANT`:
//! - `tilefuse`: the expression built from realized inputs and realized, every
//!   iteration, through the `Tensor` API, so it measures whatever realization
//!   does (whichever evaluator or executor sits behind it);
//! - `hand_fused`: one hand-written Rust loop per pipeline, parallel with
//!   rayon over chunks of the output (a map-reduce for mse), in f32;
//! - `unfused`: the same math as an eager library runs it, one full pass per
//!   op that materialises its result (broadcast operands are read in place,
//!   not expanded), each pass parallel on the same rayon threads;
//! - `unfused_ndarray`: plain single-threaded `ndarray` expressions, one
//!   materialised array per op, the "ndarray, unfused" baseline of
//!   BENCHMARKS.md that the CPU targets are stated against.
//!
//! Every variant returns a freshly allocated result, as realization must.
//! Throughput is the pipeline's minimal bytes (every input read once, every
//! output written once), so criterion reports GB/s. Before timing, each
//! pipeline checks that the tilefuse and both unfused results match the
//! hand-fused loop, and panics if they do not.
//!
//! Run with `cargo bench --bench cpu`; add `-- --quick` for a short check.

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use ndarray::{Array1, Array2, Axis};
use rayon::prelude::*;
use std::time::Duration;
use tilefuse::{DType, Tensor};

/// Elements of each chain and mse operand.
const FLAT_LEN: usize = 1 << 24;
/// Rows of the softmax and layer norm input.
const ROWS: usize = 4096;
/// Columns of the softmax and layer norm input (the normalised axis).
const COLS: usize = 1024;
/// The layer norm epsilon.
const EPS: f64 = 1e-5;
/// Elements per parallel task of the flat loops.
const CHUNK: usize = 1 << 14;
/// Independent accumulators of a sum, so its loop vectorises.
const LANES: usize = 8;
/// Relative tolerance of the result check.
const RTOL: f32 = 1e-4;
/// Absolute tolerance of the result check.
const ATOL: f32 = 1e-5;

/// A realized standard-normal f32 tensor and a copy of its elements.
fn input(shape: &[usize], seed: u64) -> (Tensor, Vec<f32>) {
    let t = Tensor::randn(shape, DType::F32, seed);
    let v = t.to_vec::<f32>().expect("reading a generated tensor");
    assert!(v.iter().any(|&x| x != 0.0), "benchmark inputs must not be zeros");
    (t, v)
}

/// Realizes a tensor built by `build`, checking that the work is not already
/// done (a live identical expression would be shared by the graph).
fn realize(build: impl FnOnce() -> Tensor) -> Tensor {
    let y = build();
    assert!(!y.is_realized(), "the benchmarked expression was already computed");
    y.realize().expect("realizing the pipeline");
    y
}

/// Panics unless `got` matches `want` elementwise within the tolerances.
fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: result length");
    let worst = got
        .iter()
        .zip(want)
        .enumerate()
        .map(|(i, (&g, &w))| (i, (g - w).abs() - (ATOL + RTOL * w.abs())))
        .fold(
            (0, f32::NEG_INFINITY),
            |a, b| if b.1 > a.1 || b.1.is_nan() { b } else { a },
        );
    let (i, excess) = worst;
    assert!(
        excess <= 0.0,
        "{what}: element {i} is {} but the hand-fused loop gives {}",
        got[i],
        want[i]
    );
}

/// A group for one pipeline, configured to finish quickly on a small machine.
fn group<'a>(c: &'a mut Criterion, name: &str, bytes: usize) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(bytes as u64));
    g
}

/// `1 / (1 + e^-x)`.
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The sum of `f(x[i], y[i])` over two equally long slices, with [`LANES`]
/// accumulators.
fn lane_sum2(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f32) -> f32 {
    let (xs, ys) = (x.chunks_exact(LANES), y.chunks_exact(LANES));
    let tail: f32 = xs.remainder().iter().zip(ys.remainder()).map(|(&u, &v)| f(u, v)).sum();
    let mut acc = [0.0f32; LANES];
    for (xl, yl) in xs.zip(ys) {
        for ((s, &u), &v) in acc.iter_mut().zip(xl).zip(yl) {
            *s += f(u, v);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// The sum of `f(x[i])`, with [`LANES`] accumulators.
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    lane_sum2(x, x, |u, _| f(u))
}

/// The maximum of a row.
fn row_max(row: &[f32]) -> f32 {
    row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// Fills the output chunk by chunk in parallel: `f(range, out_chunk)`.
fn par_fill(len: usize, chunk: usize, f: impl Fn(std::ops::Range<usize>, &mut [f32]) + Sync) -> Vec<f32> {
    let mut out = vec![0.0f32; len];
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, o)| {
        let start = i * chunk;
        f(start..start + o.len(), o)
    });
    out
}

// ---- Hand-fused loops: one pass over the data per pipeline. ----

/// `tanh(a*b + c) * sigmoid(a) - exp(-(b*b))` in one parallel loop.
fn chain_hand_fused(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    par_fill(a.len(), CHUNK, |r, o| {
        for (((y, &a), &b), &c) in o.iter_mut().zip(&a[r.clone()]).zip(&b[r.clone()]).zip(&c[r]) {
            *y = (a * b + c).tanh() * sigmoid(a) - (-(b * b)).exp();
        }
    })
}

/// `mean((a - b)^2)` as a parallel map-reduce (f32 within a chunk, f64 across chunks).
fn mse_hand_fused(a: &[f32], b: &[f32]) -> f32 {
    let total: f64 = a
        .par_chunks(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .map(|(x, y)| {
            f64::from(lane_sum2(x, y, |u, v| {
                let d = u - v;
                d * d
            }))
        })
        .sum();
    (total / a.len() as f64) as f32
}

/// Row softmax over the last axis, one row per task: max, exp and sum, scale.
fn softmax_hand_fused(x: &[f32], cols: usize) -> Vec<f32> {
    par_fill(x.len(), cols, |r, o| {
        let row = &x[r];
        let m = row_max(row);
        for (y, &v) in o.iter_mut().zip(row) {
            *y = (v - m).exp();
        }
        let inv = 1.0 / lane_sum(o, |e| e);
        o.iter_mut().for_each(|y| *y *= inv);
    })
}

/// Layer norm over the last axis with weight and bias, one row per task.
fn layer_norm_hand_fused(x: &[f32], w: &[f32], b: &[f32]) -> Vec<f32> {
    let cols = w.len();
    par_fill(x.len(), cols, |r, o| {
        let row = &x[r];
        let mean = lane_sum(row, |v| v) / cols as f32;
        let var = lane_sum(row, |v| (v - mean) * (v - mean)) / cols as f32;
        let rstd = 1.0 / (var + EPS as f32).sqrt();
        for (((y, &v), &w), &b) in o.iter_mut().zip(row).zip(w).zip(b) {
            *y = (v - mean) * rstd * w + b;
        }
    })
}

// ---- Unfused eager passes: one full pass per op, each result materialised. ----

/// `f(x)` elementwise, as one pass.
fn map(x: &[f32], f: impl Fn(f32) -> f32 + Sync) -> Vec<f32> {
    x.par_iter().map(|&u| f(u)).collect()
}

/// `f(x, y)` elementwise on equal shapes, as one pass.
fn zip_map(x: &[f32], y: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Vec<f32> {
    x.par_iter().zip(y).map(|(&u, &v)| f(u, v)).collect()
}

/// `f(x[r, c], per_row[r])`: a binary op with an operand broadcast along the rows.
fn rows_map(x: &[f32], per_row: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Vec<f32> {
    let cols = x.len() / per_row.len();
    par_fill(x.len(), cols, |r, o| {
        let s = per_row[r.start / cols];
        for (y, &u) in o.iter_mut().zip(&x[r]) {
            *y = f(u, s);
        }
    })
}

/// `f(x[r, c], per_col[c])`: a binary op with an operand broadcast along the columns.
fn cols_map(x: &[f32], per_col: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) -> Vec<f32> {
    par_fill(x.len(), per_col.len(), |r, o| {
        for ((y, &u), &v) in o.iter_mut().zip(&x[r]).zip(per_col) {
            *y = f(u, v);
        }
    })
}

/// `g` of each row of `x`: a reduction over the last axis, as one pass.
fn row_reduce(x: &[f32], cols: usize, g: impl Fn(&[f32]) -> f32 + Sync) -> Vec<f32> {
    x.par_chunks(cols).map(&g).collect()
}

/// The sum of all elements, as one pass.
fn sum_all(x: &[f32]) -> f64 {
    x.par_chunks(CHUNK).map(|c| f64::from(lane_sum(c, |v| v))).sum()
}

/// The chain, one pass per op.
fn chain_unfused(a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    let ab = zip_map(a, b, |u, v| u * v);
    let abc = zip_map(&ab, c, |u, v| u + v);
    let t = map(&abc, f32::tanh);
    let s = map(a, sigmoid);
    let ts = zip_map(&t, &s, |u, v| u * v);
    let bb = zip_map(b, b, |u, v| u * v);
    let nbb = map(&bb, |u| -u);
    let e = map(&nbb, f32::exp);
    zip_map(&ts, &e, |u, v| u - v)
}

/// mse, one pass per op.
fn mse_unfused(a: &[f32], b: &[f32]) -> f32 {
    let d = zip_map(a, b, |u, v| u - v);
    let sq = zip_map(&d, &d, |u, v| u * v);
    (sum_all(&sq) / a.len() as f64) as f32
}

/// Softmax, one pass per op.
fn softmax_unfused(x: &[f32], cols: usize) -> Vec<f32> {
    let m = row_reduce(x, cols, row_max);
    let d = rows_map(x, &m, |u, v| u - v);
    let e = map(&d, f32::exp);
    let s = row_reduce(&e, cols, |row| lane_sum(row, |v| v));
    rows_map(&e, &s, |u, v| u / v)
}

/// Layer norm, one pass per op.
fn layer_norm_unfused(x: &[f32], w: &[f32], b: &[f32]) -> Vec<f32> {
    let n = w.len() as f32;
    let mean = map(&row_reduce(x, w.len(), |row| lane_sum(row, |v| v)), |s| s / n);
    let d = rows_map(x, &mean, |u, v| u - v);
    let sq = zip_map(&d, &d, |u, v| u * v);
    let var = map(&row_reduce(&sq, w.len(), |row| lane_sum(row, |v| v)), |s| s / n);
    let rstd = map(&var, |v| 1.0 / (v + EPS as f32).sqrt());
    let norm = rows_map(&d, &rstd, |u, v| u * v);
    let scaled = cols_map(&norm, w, |u, v| u * v);
    cols_map(&scaled, b, |u, v| u + v)
}

// ---- Unfused ndarray: one materialised array per op, one thread. ----

/// The chain as ndarray expressions.
fn chain_ndarray(a: &Array1<f32>, b: &Array1<f32>, c: &Array1<f32>) -> Array1<f32> {
    let abc = &(a * b) + c;
    let ts = &abc.mapv(f32::tanh) * &a.mapv(sigmoid);
    let e = (-(b * b)).mapv(f32::exp);
    &ts - &e
}

/// mse as ndarray expressions. A plain f32 `sum()` of 2^24 squares is off
/// by about 1e-3 relative, so the squares are summed in rows of [`COLS`]
/// (f32, as ndarray vectorises them) and the row sums in f64.
fn mse_ndarray(a: &Array1<f32>, b: &Array1<f32>) -> f32 {
    let d = a - b;
    let rows = (&d * &d)
        .into_shape_with_order((a.len() / COLS, COLS))
        .expect("a length divisible by COLS")
        .sum_axis(Axis(1));
    (rows.mapv(f64::from).sum() / a.len() as f64) as f32
}

/// Softmax as ndarray expressions.
fn softmax_ndarray(x: &Array2<f32>) -> Array2<f32> {
    let m = x.map_axis(Axis(1), |row| row.fold(f32::NEG_INFINITY, |m, &v| m.max(v)));
    let e = (x - &m.insert_axis(Axis(1))).mapv(f32::exp);
    let s = e.sum_axis(Axis(1));
    &e / &s.insert_axis(Axis(1))
}

/// Layer norm as ndarray expressions.
fn layer_norm_ndarray(x: &Array2<f32>, w: &Array1<f32>, b: &Array1<f32>) -> Array2<f32> {
    let n = x.ncols() as f32;
    let mean = x.sum_axis(Axis(1)) / n;
    let d = x - &mean.insert_axis(Axis(1));
    let var = (&d * &d).sum_axis(Axis(1)) / n;
    let rstd = var.mapv(|v| 1.0 / (v + EPS as f32).sqrt());
    let norm = &d * &rstd.insert_axis(Axis(1));
    &(&norm * w) + b
}

/// A row-major `[ROWS, COLS]` ndarray of `x`.
fn matrix(x: &[f32]) -> Array2<f32> {
    Array2::from_shape_vec((ROWS, COLS), x.to_vec()).expect("a [ROWS, COLS] input")
}

/// The elements of an ndarray result in row-major order.
fn elements<D: ndarray::Dimension>(x: &ndarray::Array<f32, D>) -> Vec<f32> {
    x.iter().copied().collect()
}

// ---- The groups. ----

/// The chain expression on tensors.
fn chain_tilefuse(a: &Tensor, b: &Tensor, c: &Tensor) -> Tensor {
    (a * b + c).tanh() * a.sigmoid() - (-(b * b)).exp()
}

/// The mse expression on tensors.
fn mse_tilefuse(a: &Tensor, b: &Tensor) -> Tensor {
    let d = a - b;
    (&d * &d).mean_all()
}

fn bench_chain(c: &mut Criterion) {
    let (ta, a) = input(&[FLAT_LEN], 1);
    let (tb, b) = input(&[FLAT_LEN], 2);
    let (tc, cv) = input(&[FLAT_LEN], 3);
    let want = chain_hand_fused(&a, &b, &cv);
    let got = realize(|| chain_tilefuse(&ta, &tb, &tc))
        .to_vec::<f32>()
        .expect("reading chain");
    assert_close("chain/tilefuse", &got, &want);
    assert_close("chain/unfused", &chain_unfused(&a, &b, &cv), &want);
    let (na, nb, nc) = (
        Array1::from(a.clone()),
        Array1::from(b.clone()),
        Array1::from(cv.clone()),
    );
    assert_close("chain/unfused_ndarray", &elements(&chain_ndarray(&na, &nb, &nc)), &want);
    drop((got, want));

    let mut g = group(c, "chain", 16 * FLAT_LEN);
    g.bench_function("tilefuse", |it| it.iter(|| realize(|| chain_tilefuse(&ta, &tb, &tc))));
    g.bench_function("hand_fused", |it| it.iter(|| chain_hand_fused(&a, &b, &cv)));
    g.bench_function("unfused", |it| it.iter(|| chain_unfused(&a, &b, &cv)));
    g.bench_function("unfused_ndarray", |it| it.iter(|| chain_ndarray(&na, &nb, &nc)));
    g.finish();
}

fn bench_mse(c: &mut Criterion) {
    let (ta, a) = input(&[FLAT_LEN], 4);
    let (tb, b) = input(&[FLAT_LEN], 5);
    let want = mse_hand_fused(&a, &b);
    let got = realize(|| mse_tilefuse(&ta, &tb))
        .to_scalar::<f32>()
        .expect("reading mse");
    assert_close("mse/tilefuse", &[got], &[want]);
    assert_close("mse/unfused", &[mse_unfused(&a, &b)], &[want]);
    let (na, nb) = (Array1::from(a.clone()), Array1::from(b.clone()));
    assert_close("mse/unfused_ndarray", &[mse_ndarray(&na, &nb)], &[want]);

    let mut g = group(c, "mse", 8 * FLAT_LEN);
    g.bench_function("tilefuse", |it| it.iter(|| realize(|| mse_tilefuse(&ta, &tb))));
    g.bench_function("hand_fused", |it| it.iter(|| mse_hand_fused(&a, &b)));
    g.bench_function("unfused", |it| it.iter(|| mse_unfused(&a, &b)));
    g.bench_function("unfused_ndarray", |it| it.iter(|| mse_ndarray(&na, &nb)));
    g.finish();
}

fn bench_softmax(c: &mut Criterion) {
    let (tx, x) = input(&[ROWS, COLS], 6);
    let want = softmax_hand_fused(&x, COLS);
    let got = realize(|| tx.softmax(-1)).to_vec::<f32>().expect("reading softmax");
    assert_close("softmax/tilefuse", &got, &want);
    assert_close("softmax/unfused", &softmax_unfused(&x, COLS), &want);
    let nx = matrix(&x);
    assert_close("softmax/unfused_ndarray", &elements(&softmax_ndarray(&nx)), &want);

    let mut g = group(c, "softmax", 8 * ROWS * COLS);
    g.bench_function("tilefuse", |it| it.iter(|| realize(|| tx.softmax(-1))));
    g.bench_function("hand_fused", |it| it.iter(|| softmax_hand_fused(&x, COLS)));
    g.bench_function("unfused", |it| it.iter(|| softmax_unfused(&x, COLS)));
    g.bench_function("unfused_ndarray", |it| it.iter(|| softmax_ndarray(&nx)));
    g.finish();
}

fn bench_layer_norm(c: &mut Criterion) {
    let (tx, x) = input(&[ROWS, COLS], 7);
    let (tw, w) = input(&[COLS], 8);
    let (tb, b) = input(&[COLS], 9);
    let tilefuse = || tx.layer_norm(Some(&tw), Some(&tb), EPS);
    let want = layer_norm_hand_fused(&x, &w, &b);
    let got = realize(tilefuse).to_vec::<f32>().expect("reading layer_norm");
    assert_close("layer_norm/tilefuse", &got, &want);
    assert_close("layer_norm/unfused", &layer_norm_unfused(&x, &w, &b), &want);
    let (nx, nw, nb) = (matrix(&x), Array1::from(w.clone()), Array1::from(b.clone()));
    assert_close(
        "layer_norm/unfused_ndarray",
        &elements(&layer_norm_ndarray(&nx, &nw, &nb)),
        &want,
    );

    let mut g = group(c, "layer_norm", 8 * ROWS * COLS + 8 * COLS);
    g.bench_function("tilefuse", |it| it.iter(|| realize(tilefuse)));
    g.bench_function("hand_fused", |it| it.iter(|| layer_norm_hand_fused(&x, &w, &b)));
    g.bench_function("unfused", |it| it.iter(|| layer_norm_unfused(&x, &w, &b)));
    g.bench_function("unfused_ndarray", |it| it.iter(|| layer_norm_ndarray(&nx, &nw, &nb)));
    g.finish();
}

criterion_group!(benches, bench_chain, bench_mse, bench_softmax, bench_layer_norm);
criterion_main!(benches);
