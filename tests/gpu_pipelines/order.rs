//! Order statistics and scatters on the GPU: `scatter_add` gives the CPU
//! executor's bits (both sum each line's sources in source order) run
//! after run, and reports bad indices through its kernel's flag; `sort`
//! and `topk` give the CPU executor's values and indices exactly.

use super::common::compare;
use super::{gpu, host_of, GPU};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Error, Tensor};

/// `n` positions in `0..len`, deterministic and repeating.
fn positions(n: usize, len: usize, salt: usize) -> Vec<i64> {
    (0..n).map(|i| ((i * 7919 + salt * 104729) % len) as i64).collect()
}

/// Scatters along the last and the first axis (lines shorter and longer
/// than a tile of lines, an index narrower than the input, a spread
/// index as `index_add` uses, i64 and i32 positions, a one-dimensional
/// scatter cut into chunks), in every numeric dtype: the GPU's bytes are
/// the CPU executor's for integers, f32 and f64 (the same additions in the
/// same order), within the tolerance table for f16 and bf16 and for the
/// chunks' float partials (added by a reduction), and the same on a second
/// run; a bad index fails the GPU realization as on the CPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn scatters_compute_as_on_the_cpu_run_after_run_and_report_bad_indices() {
    let _g = gpu();
    let (rows, cols) = (517, 301);
    for dtype in DType::ALL.into_iter().filter(|&d| d != DType::Bool) {
        let raw: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 201) as f32 * 0.01 - 1.0).collect();
        let x = Tensor::from_vec(raw.clone(), &[rows, cols]).cast(dtype);
        let src = Tensor::from_vec(raw.iter().rev().copied().collect(), &[rows, cols]).cast(dtype);
        x.realize().unwrap();
        src.realize().unwrap();
        let along_rows = Tensor::from_vec(positions(rows * cols, cols, 1), &[rows, cols]);
        let along_cols = Tensor::from_vec(positions(200 * cols, rows, 2), &[200, cols]).cast(DType::I32);
        let spread = Tensor::from_vec(positions(300, rows, 3), &[300, 1]);
        let line = Tensor::from_vec(positions(20_000, 97, 4), &[20_000]);
        let line_src = Tensor::from_vec((0..20_000).map(|i| (i % 13) as f32 * 0.1).collect(), &[20_000]).cast(dtype);
        let build = |d: tilefuse::Device| {
            let (x, src) = (x.to(d), src.to(d));
            vec![
                x.scatter_add(1, &along_rows.to(d), &src),
                x.scatter_add(0, &along_cols.to(d), &src.narrow(0, 0, 200)),
                x.scatter_add(
                    -2,
                    &spread.to(d).expand(&[300, 40]),
                    &src.narrow(0, 0, 300).narrow(1, 0, 40),
                ),
                Tensor::zeros(&[97], dtype)
                    .to(d)
                    .scatter_add(0, &line.to(d), &line_src.to(d)),
            ]
        };
        let on_cpu = build(tilefuse::Device::Cpu);
        let on_gpu = build(GPU);
        let again = build(GPU);
        for (k, ((c, g), a)) in on_cpu.iter().zip(&on_gpu).zip(&again).enumerate() {
            let (c, g, a) = (host_of(c), host_of(g), host_of(a));
            assert_eq!(g.bytes(), a.bytes(), "{dtype}, output {k}: two GPU runs differ");
            // Output 3 (one line of 20000) is cut into chunks whose
            // partials a reduction adds, in its own order on each device.
            if matches!(dtype, DType::F16 | DType::BF16) || (k == 3 && dtype.is_float()) {
                compare(&g, &c).unwrap_or_else(|e| panic!("{dtype}, output {k}: {e}"));
            } else {
                assert_eq!(
                    g.bytes(),
                    c.bytes(),
                    "{dtype}, output {k}: the GPU's bytes differ from the CPU's"
                );
            }
        }
        let mut bad = positions(rows * cols, cols, 5);
        bad[rows * cols / 2] = cols as i64;
        bad[rows * cols - 1] = -3;
        let bad = Tensor::from_vec(bad, &[rows, cols]).to(GPU);
        let err = x.to(GPU).scatter_add(1, &bad, &src.to(GPU)).realize().unwrap_err();
        assert_eq!(
            err,
            Error::IndexOutOfRange {
                op: "scatter_add",
                axis: 1,
                len: cols,
                input: vec![rows, cols],
                index: vec![rows, cols],
            },
            "{dtype}"
        );
    }
}

/// Sorts (both directions, along the last and the first axis, ties and
/// NaN, a line longer than a GPU tile) and `topk` by selection and by
/// sorting, in every dtype: the GPU's values and indices are the CPU
/// executor's, byte for byte (a sort moves values and counts in integers).
#[test]
#[ignore = "needs a CUDA GPU"]
fn sorts_and_topk_compute_as_on_the_cpu() {
    let _g = gpu();
    for dtype in DType::ALL {
        let raw: Vec<f32> = (0..61 * 301)
            .map(|i| match (i * 7919) % 23 {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                r => (r % 9) as f32 * 0.5 - 2.0,
            })
            .collect();
        let x = Tensor::from_vec(raw, &[61, 301]).cast(dtype);
        x.realize().unwrap();
        let build = |d: tilefuse::Device| {
            let x = x.to(d);
            let mut outs = vec![];
            for (a, b) in [x.sort(1, false), x.sort(0, true), x.topk(5, -1), x.topk(20, 0)] {
                outs.push(a);
                outs.push(b);
            }
            let (a, b) = x.reshape([61 * 301]).sort(0, true);
            outs.push(a);
            outs.push(b);
            outs
        };
        let on_cpu = build(tilefuse::Device::Cpu);
        let on_gpu = build(GPU);
        for (k, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
            let (c, g) = (host_of(c), host_of(g));
            if k % 2 == 0 && matches!(dtype, DType::F16 | DType::BF16) {
                // A 2-byte NaN comes out of the GPU's conversion from f32
                // as the canonical NaN (PTX `cvt`), whatever its payload:
                // every other value keeps its bits.
                let floats = |h: &HostBuffer| (0..h.len()).map(|i| h.get(i).to_f64()).collect::<Vec<f64>>();
                let (c, g) = (floats(&c), floats(&g));
                assert_eq!(c.len(), g.len(), "{dtype}, output {k}");
                for (i, (a, b)) in c.iter().zip(&g).enumerate() {
                    let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                    assert!(same, "{dtype}, output {k}, element {i}: {a} on the CPU, {b} on the GPU");
                }
            } else {
                assert_eq!(g.bytes(), c.bytes(), "{dtype}, output {k}");
            }
        }
    }
}
