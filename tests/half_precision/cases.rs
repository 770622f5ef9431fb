//! The half-precision value checks, written once for any device: the CPU
//! runs them in `tests/half_precision.rs`, a CUDA GPU in
//! `tests/gpu_half_precision.rs`.
//!
//! Every check realizes a tensor on the device and also evaluates the
//! recorded graph with the reference evaluator (the oracle of every other
//! test), and holds both to the same value: an exact one for the constant
//! inputs, or the statistic computed in f64 from the half inputs within two
//! half ulps for random ones. Statistics of f16 and bf16 compute in f32 and
//! round once, as in PyTorch, so one rounding (half an ulp) plus f32's own
//! error is all they may be off by.

use half::{bf16, f16};
use tilefuse::graph::reference;
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Device, Scalar, Tensor};

/// The two half dtypes.
pub const HALVES: [DType; 2] = [DType::F16, DType::BF16];

/// `values` as a tensor of `dtype` (rounded to it) and `shape` on `device`.
pub fn tensor(values: &[f64], dtype: DType, shape: &[usize], device: Device) -> Tensor {
    let t = match dtype {
        DType::F16 => Tensor::from_vec(values.iter().map(|&v| f16::from_f64(v)).collect::<Vec<_>>(), shape),
        DType::BF16 => Tensor::from_vec(values.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>(), shape),
        DType::F32 => Tensor::from_vec(values.iter().map(|&v| v as f32).collect::<Vec<_>>(), shape),
        DType::F64 => Tensor::from_slice(values, shape),
        d => panic!("no float data of {d} here"),
    };
    t.to(device)
}

/// `values` rounded to `dtype`, as f64: what a tensor of them holds.
pub fn rounded(values: &[f64], dtype: DType) -> Vec<f64> {
    values
        .iter()
        .map(|&v| Scalar::Float(v, DType::F64).cast(dtype).to_f64())
        .collect()
}

/// The elements of a buffer.
fn elements(b: &HostBuffer) -> Vec<Scalar> {
    (0..b.len()).map(|i| b.get(i)).collect()
}

/// The elements of an unrealized `t`: realized on its device, and from the
/// reference evaluator (run first, while the graph is still there).
pub fn device_and_reference_scalars(t: &Tensor) -> (Vec<Scalar>, Vec<Scalar>) {
    let want = reference::evaluate(&t.subgraph()).unwrap().remove(0);
    assert_eq!(want.dtype(), t.dtype());
    let mut got = HostBuffer::zeros(t.dtype(), t.numel());
    t.with_bytes(|bytes| got.bytes_mut().copy_from_slice(bytes)).unwrap();
    (elements(&got), elements(&want))
}

/// [`device_and_reference_scalars`] as f64.
pub fn device_and_reference(t: &Tensor) -> (Vec<f64>, Vec<f64>) {
    let (got, want) = device_and_reference_scalars(t);
    let f64s = |v: Vec<Scalar>| v.into_iter().map(Scalar::to_f64).collect();
    (f64s(got), f64s(want))
}

/// Asserts that `t` is exactly `want` everywhere, on its device and in the
/// reference evaluator.
#[track_caller]
pub fn exactly(what: &str, t: &Tensor, want: f64) {
    let (got, reference) = device_and_reference(t);
    for (who, values) in [("device", got), ("reference", reference)] {
        assert!(
            values.iter().all(|&v| v == want),
            "{what}: the {who} gives {:?}, not {want}",
            &values[..values.len().min(4)]
        );
    }
}

/// The distance from `|x|` rounded to `dtype` to the next value of
/// `dtype` away from zero: one ulp of `dtype` at `x` (the larger of the two
/// gaps at a power of two).
pub fn ulp(dtype: DType, x: f64) -> f64 {
    let x = x.abs();
    match dtype {
        DType::F16 => {
            let h = f16::from_f64(x);
            (f16::from_bits(h.to_bits() + 1) - h).to_f64()
        }
        DType::BF16 => {
            let h = bf16::from_f64(x);
            (bf16::from_bits(h.to_bits() + 1) - h).to_f64()
        }
        DType::F32 => {
            let h = x as f32;
            (f32::from_bits(h.to_bits() + 1) - h) as f64
        }
        d => panic!("no ulp of {d} here"),
    }
}

/// Asserts that `t` (of a half or f32 dtype) is within `ulps` ulps of
/// `want` (computed in f64) at every element, on its device and in the
/// reference evaluator.
#[track_caller]
pub fn within_ulps(what: &str, t: &Tensor, want: &[f64], ulps: f64) {
    let (got, reference) = device_and_reference(t);
    assert_eq!(got.len(), want.len(), "{what}");
    for (who, values) in [("device", &got), ("reference", &reference)] {
        for (i, (&g, &w)) in values.iter().zip(want).enumerate() {
            let err = (g - w).abs() / ulp(t.dtype(), w);
            assert!(
                err <= ulps,
                "{what}: the {who} gives {g} at {i}, want {w} ({err:.2} ulps of {})",
                t.dtype()
            );
        }
    }
}

/// Deterministic values in `[lo, hi)`: a linear congruential sequence.
pub fn uniform(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

// ---- f64 statistics of each row ----

/// The mean of `row`.
pub fn mean(row: &[f64]) -> f64 {
    row.iter().sum::<f64>() / row.len() as f64
}

/// The variance of `row` divided by `n - correction`.
pub fn var(row: &[f64], correction: usize) -> f64 {
    let m = mean(row);
    row.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (row.len() - correction) as f64
}

/// The softmax of `row`.
pub fn softmax(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = row.iter().map(|x| (x - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// The logarithm of the sum of the exponentials of `row`.
pub fn logsumexp(row: &[f64]) -> f64 {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// The layer norm of `row` with `weight`, `bias` and `eps`.
pub fn layer_norm(row: &[f64], weight: &[f64], bias: &[f64], eps: f64) -> Vec<f64> {
    let (m, v) = (mean(row), var(row, 0));
    let r = 1.0 / (v + eps).sqrt();
    row.iter()
        .zip(weight.iter().zip(bias))
        .map(|(x, (w, b))| (x - m) * r * w + b)
        .collect()
}

/// The RMS norm of `row` with `weight` and `eps`.
pub fn rms_norm(row: &[f64], weight: &[f64], eps: f64) -> Vec<f64> {
    let ms = row.iter().map(|x| x * x).sum::<f64>() / row.len() as f64;
    let r = 1.0 / (ms + eps).sqrt();
    row.iter().zip(weight).map(|(x, w)| x * r * w).collect()
}

/// `f` of each row of `values` (rows of `cols`), concatenated.
pub fn per_row<T: IntoIterator<Item = f64>>(values: &[f64], cols: usize, f: impl Fn(&[f64]) -> T) -> Vec<f64> {
    values.chunks(cols).flat_map(f).collect()
}

// ---- the checks ----

/// The values that scaling a half sum by a half `1 / n` got wrong: each is
/// exact when the sum, the scale and the second moment are f32.
pub fn constant_inputs_give_exact_statistics(device: Device) {
    let ones = |n: usize, d: DType| tensor(&vec![1.0; n], d, &[n], device);
    for d in HALVES {
        exactly(&format!("{d} mean of 300 ones"), &ones(300, d).mean_all(), 1.0);
        exactly(&format!("{d} var of 300 ones"), &ones(300, d).var_all(), 0.0);
        exactly(
            &format!("{d} population var of 300 ones"),
            &ones(300, d).var_with_correction(&[0], false, 0),
            0.0,
        );
        exactly(&format!("{d} mean of 10^6 ones"), &ones(1_000_000, d).mean_all(), 1.0);
        exactly(&format!("{d} var of 10^6 ones"), &ones(1_000_000, d).var_all(), 0.0);
        let twos = tensor(&vec![2.0; 50_000], d, &[50_000], device);
        exactly(&format!("{d} mean of 50,000 twos"), &twos.mean_all(), 2.0);
        let rows = tensor(&vec![3.0; 4 * 300], d, &[4, 300], device);
        exactly(&format!("{d} row means of threes"), &rows.mean(&[1], false), 3.0);
        exactly(&format!("{d} column means of threes"), &rows.mean(&[0], true), 3.0);
        exactly(&format!("{d} row vars of threes"), &rows.var(&[-1], true), 0.0);
        // A row of one repeated value normalizes to 0 (times the weight,
        // plus the bias); its RMS norm is 1.
        let w = tensor(&[1.0; 300], d, &[300], device);
        let b = tensor(&[0.5; 300], d, &[300], device);
        exactly(
            &format!("{d} layer norm of threes"),
            &rows.layer_norm(Some(&w), Some(&b), 1e-5),
            0.5,
        );
        exactly(&format!("{d} rms norm of threes"), &rows.rms_norm(None, 0.0), 1.0);
        let n = 1000;
        exactly(
            &format!("{d} softmax of {n} equal values"),
            &tensor(&vec![7.0; n], d, &[1, n], device).softmax(-1),
            rounded(&[1.0 / n as f64], d)[0],
        );
        exactly(
            &format!("{d} logsumexp of 1024 zeros"),
            &tensor(&[0.0; 1024], d, &[1024], device).logsumexp(&[0], false),
            rounded(&[1024f64.ln()], d)[0],
        );
    }
}

/// `mean` and `var` of random half data, over rows and over everything,
/// for lengths up to 10^6, within two half ulps of f64.
pub fn random_means_and_variances_are_within_two_ulps(device: Device) {
    for d in HALVES {
        for (rows, cols) in [(5, 1000), (2, 100_000), (1, 1_000_000)] {
            // A mean away from zero, so the check is of the rounding and not
            // of f32's cancellation in a sum of values of either sign.
            let x = rounded(&uniform(rows * cols, -1.0, 3.0, (rows * cols) as u64), d);
            let t = tensor(&x, d, &[rows, cols], device);
            let here = format!("{d}[{rows}, {cols}]");
            within_ulps(
                &format!("mean of {here}"),
                &t.mean(&[1], false),
                &per_row(&x, cols, |r| [mean(r)]),
                2.0,
            );
            within_ulps(
                &format!("var of {here}"),
                &t.var(&[1], false),
                &per_row(&x, cols, |r| [var(r, 1)]),
                2.0,
            );
            within_ulps(
                &format!("population var of {here}"),
                &t.var_with_correction(&[-1], true, 0),
                &per_row(&x, cols, |r| [var(r, 0)]),
                2.0,
            );
            within_ulps(&format!("mean_all of {here}"), &t.mean_all(), &[mean(&x)], 2.0);
            within_ulps(&format!("var_all of {here}"), &t.var_all(), &[var(&x, 1)], 2.0);
        }
        // Column means: the reduced axis is the outer one.
        let (rows, cols) = (3000, 7);
        let x = rounded(&uniform(rows * cols, 0.0, 4.0, 99), d);
        let t = tensor(&x, d, &[rows, cols], device);
        let want: Vec<f64> = (0..cols)
            .map(|c| mean(&(0..rows).map(|r| x[r * cols + c]).collect::<Vec<_>>()))
            .collect();
        within_ulps(
            &format!("column means of {d}[{rows}, {cols}]"),
            &t.mean(&[0], false),
            &want,
            2.0,
        );
    }
}

/// The softmax family and the norms of random half data (a half weight and
/// bias), within two half ulps of f64; with an f32 weight the norms give
/// f32, still computed from the f32 statistics.
pub fn random_compositions_are_within_two_ulps(device: Device) {
    for d in HALVES {
        for (rows, cols) in [(4, 1000), (2, 50_000)] {
            let x = rounded(&uniform(rows * cols, -4.0, 4.0, cols as u64 + 1), d);
            let w = rounded(&uniform(cols, 0.5, 2.0, 7), d);
            let b = rounded(&uniform(cols, -1.0, 1.0, 8), d);
            let t = tensor(&x, d, &[rows, cols], device);
            let (tw, tb) = (tensor(&w, d, &[cols], device), tensor(&b, d, &[cols], device));
            let here = format!("{d}[{rows}, {cols}]");
            let sm = per_row(&x, cols, softmax);
            within_ulps(&format!("softmax of {here}"), &t.softmax(-1), &sm, 2.0);
            let lsm = per_row(&x, cols, |r| {
                let l = logsumexp(r);
                r.iter().map(move |v| v - l).collect::<Vec<_>>()
            });
            within_ulps(&format!("log_softmax of {here}"), &t.log_softmax(1), &lsm, 2.0);
            let lse = per_row(&x, cols, |r| [logsumexp(r)]);
            within_ulps(&format!("logsumexp of {here}"), &t.logsumexp(&[1], false), &lse, 2.0);
            let eps = 1e-5;
            let ln = per_row(&x, cols, |r| layer_norm(r, &w, &b, eps));
            let y = t.layer_norm(Some(&tw), Some(&tb), eps);
            assert_eq!(y.dtype(), d);
            within_ulps(&format!("layer_norm of {here}"), &y, &ln, 2.0);
            let ones = vec![1.0; cols];
            let ln_plain = per_row(&x, cols, |r| layer_norm(r, &ones, &vec![0.0; cols], eps));
            within_ulps(
                &format!("plain layer_norm of {here}"),
                &t.layer_norm(None, None, eps),
                &ln_plain,
                2.0,
            );
            let rms = per_row(&x, cols, |r| rms_norm(r, &w, 1e-6));
            within_ulps(&format!("rms_norm of {here}"), &t.rms_norm(Some(&tw), 1e-6), &rms, 2.0);
            // An f32 weight makes an f32 result (PyTorch's promotion), from
            // the same f32 statistics: f32 is exact to far less than these
            // half-input errors, so the bound is in f32 ulps.
            let y = t.rms_norm(Some(&tw.cast(DType::F32)), 1e-6);
            assert_eq!(y.dtype(), DType::F32);
            within_ulps(&format!("rms_norm of {here}, f32 weight"), &y, &rms, 64.0);
        }
    }
}

/// The float to integer examples of `Tensor::cast`'s docs, from f32 and
/// f64: truncation into i64 (saturating, NaN to 0), then wrapping.
pub fn casts_to_integers_follow_the_documented_rule(device: Device) {
    let inputs = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -1e20, 3e9, 2.7, -2.7];
    let (max, min) = (i64::MAX as i128, i64::MIN as i128);
    let table: [(DType, [i128; 7]); 4] = [
        (DType::I64, [max, min, 0, min, 3_000_000_000, 2, -2]),
        (DType::I32, [-1, 0, 0, 0, -1_294_967_296, 2, -2]),
        (DType::U32, [4_294_967_295, 0, 0, 0, 3_000_000_000, 2, 4_294_967_294]),
        (DType::U8, [255, 0, 0, 0, 0, 2, 254]),
    ];
    for from in [DType::F32, DType::F64] {
        let x = tensor(&inputs, from, &[inputs.len()], device);
        for (to, want) in table {
            let want: Vec<Scalar> = want.iter().map(|&i| Scalar::Int(i, to)).collect();
            let (got, reference) = device_and_reference_scalars(&x.cast(to));
            assert_eq!(got, want, "{from} to {to} on the device");
            assert_eq!(reference, want, "{from} to {to} in the reference");
        }
    }
}

/// Elementwise transcendentals of f16/bf16 tensors, one at a time and in a
/// chain, against f64: a result rounded once from an f32 value within the
/// documented relative error (2^-16 for f16 results; bf16's `tanh` 2^-10.9)
/// is within an ulp of the exact value.
pub fn transcendentals_are_within_an_ulp(device: Device) {
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    for d in HALVES {
        let n = 40_000;
        let x = rounded(&uniform(n, -9.0, 9.0, 11), d);
        let p = rounded(&uniform(n, 0.05, 40.0, 12), d);
        let q = rounded(&uniform(n, -2.0, 2.0, 13), d);
        let (tx, tp, tq) = (
            tensor(&x, d, &[n], device),
            tensor(&p, d, &[n], device),
            tensor(&q, d, &[n], device),
        );
        let map = |v: &[f64], f: &dyn Fn(f64) -> f64| v.iter().map(|&v| f(v)).collect::<Vec<_>>();
        within_ulps(&format!("exp of {d}"), &tx.exp(), &map(&x, &f64::exp), 1.0);
        within_ulps(&format!("log of {d}"), &tp.log(), &map(&p, &f64::ln), 1.0);
        within_ulps(&format!("log2 of {d}"), &tp.log2(), &map(&p, &f64::log2), 1.0);
        within_ulps(&format!("tanh of {d}"), &tx.tanh(), &map(&x, &f64::tanh), 1.0);
        within_ulps(&format!("sigmoid of {d}"), &tx.sigmoid(), &map(&x, &sigmoid), 1.0);
        within_ulps(&format!("silu of {d}"), &tx.silu(), &map(&x, &|v| v * sigmoid(v)), 1.0);
        let pq: Vec<f64> = p.iter().zip(&q).map(|(a, b)| a.powf(*b)).collect();
        within_ulps(&format!("pow of {d}"), &tp.pow(&tq), &pq, 1.0);
        // A chain: the kernels keep the intermediates in f32 and round once,
        // at the end (the reference evaluator rounds after every op, so only
        // the device is held to this).
        let a = tx.abs();
        let chain = (&a + &a.scalar_like(1.0)).log().tanh() * tx.sigmoid();
        let want = map(&x, &|v| (v.abs() + 1.0).ln().tanh() * sigmoid(v));
        let (got, _) = device_and_reference(&chain);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let err = (g - w).abs() / ulp(d, w);
            assert!(
                err <= 1.0,
                "tanh(log(1 + |x|)) · sigmoid(x) of {d}: {g} at {i}, want {w} ({err:.2} ulps)"
            );
        }
    }
}
