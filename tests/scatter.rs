//! `scatter_add` on the CPU executor: values against a sequential host
//! scatter in source order (f64 for floats), every numeric dtype, every
//! axis, indices narrower than the input, repeated and i32 indices,
//! views and constants as operands, the same bits run after run, bad
//! indices as errors of the realization, and misuse as errors.

mod common;

use common::f64s;
use tilefuse::{DType, Error, Tensor};

/// A deterministic tensor of `shape` whose values are exact in every dtype.
fn data(shape: &[usize], dtype: DType, seed: i64) -> Tensor {
    common::exact_tensor(shape, dtype, seed, 4.0)
}

/// Row-major indices of `shape` in `0..len`, deterministic and repeating.
fn positions(shape: &[usize], len: usize, seed: u64) -> Vec<i64> {
    let n: usize = shape.iter().product();
    let mut rng = common::Lcg(seed);
    (0..n).map(|_| rng.below(len as u64) as i64).collect()
}

/// `x` (of `dims`) with `src[p]` added at `p` with coordinate `axis`
/// replaced by `index[p]`, for `index` and `src` of `idims`, in f64.
fn scattered(x: &[f64], dims: &[usize], axis: usize, index: &[i64], idims: &[usize], src: &[f64]) -> Vec<f64> {
    let mut sums = vec![0.0; x.len()];
    for (flat, (&at, &s)) in index.iter().zip(src).enumerate() {
        let (mut rest, mut e, mut stride) = (flat, 0usize, 1usize);
        let mut coords = vec![0; dims.len()];
        for k in (0..idims.len()).rev() {
            coords[k] = rest % idims[k];
            rest /= idims[k];
        }
        coords[axis] = at as usize;
        for k in (0..dims.len()).rev() {
            e += coords[k] * stride;
            stride *= dims[k];
        }
        sums[e] += s;
    }
    x.iter().zip(sums).map(|(a, s)| a + s).collect()
}

fn close(got: &[f64], want: &[f64], rel: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= rel * w.abs().max(1.0);
        assert!(ok, "{what}: element {i} is {g}, not {w}");
    }
}

/// Checks `x.scatter_add(axis, index, src)` for an index of `idims`.
fn check(dims: &[usize], idims: &[usize], axis: usize, dtype: DType, index_dtype: DType, seed: u64) {
    let x = data(dims, dtype, seed as i64);
    let src = data(idims, dtype, seed as i64 + 7);
    let at = positions(idims, dims[axis], seed);
    let index = Tensor::from_vec(at.clone(), idims).cast(index_dtype);
    let got = x.scatter_add(axis as isize - dims.len() as isize, &index, &src);
    assert_eq!(got.dtype(), dtype);
    assert_eq!(got.dims(), dims);
    let want = scattered(&f64s(&x), dims, axis, &at, idims, &f64s(&src));
    let want: Vec<f64> = match dtype {
        // Integers wrap.
        DType::U8 => want.iter().map(|&w| (w as i64).rem_euclid(1 << 8) as f64).collect(),
        DType::U32 => want.iter().map(|&w| (w as i64).rem_euclid(1 << 32) as f64).collect(),
        _ => want,
    };
    let rel = match dtype {
        DType::F16 => 2e-3,
        DType::BF16 => 1e-2,
        DType::F32 => 1e-6,
        _ => 0.0,
    };
    close(
        &f64s(&got),
        &want,
        rel,
        &format!("scatter_add {dtype} {dims:?} axis {axis} index {idims:?} {index_dtype}"),
    );
}

#[test]
fn scatters_of_every_dtype_along_every_axis() {
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::U8,
    ] {
        for axis in 0..3 {
            check(&[5, 6, 7], &[5, 6, 7], axis, dtype, DType::I64, 1 + axis as u64);
        }
    }
}

#[test]
fn narrow_and_long_indices() {
    // Fewer lines and more sources along the axis than the input has.
    check(&[4, 9], &[3, 20], 1, DType::F32, DType::I32, 3);
    check(&[9, 4], &[20, 3], 0, DType::F64, DType::I64, 4);
    // More lines than one tile of lines, ragged.
    check(&[3, 601], &[5, 601], 0, DType::F32, DType::I64, 5);
    // One line of many sources: cut into chunks summed in order, with
    // padding (5001 is no multiple of the chunks).
    check(&[17], &[5001], 0, DType::I64, DType::I32, 6);
    check(&[3, 40], &[20_000, 2], 0, DType::F32, DType::I64, 10);
    check(&[2, 9], &[2, 9000], 1, DType::F64, DType::I64, 11);
    // Size-1 and prime extents, rank 4.
    check(&[2, 1, 3, 5], &[2, 1, 7, 5], 2, DType::F32, DType::I64, 7);
}

#[test]
fn views_and_constants_as_operands() {
    // A transposed source and a broadcast index (index_add's pattern).
    let x = data(&[6, 4], DType::F32, 2);
    let src = data(&[4, 3], DType::F32, 3).transpose(0, 1);
    let rows = Tensor::from_vec(vec![5i64, 0, 5], &[3, 1]).expand(&[3, 4]);
    let got = f64s(&x.scatter_add(0, &rows, &src));
    let (xv, sv) = (f64s(&x), f64s(&src));
    let want = scattered(&xv, &[6, 4], 0, &[5, 5, 5, 5, 0, 0, 0, 0, 5, 5, 5, 5], &[3, 4], &sv);
    close(&got, &want, 1e-6, "views");
    // A constant source: counting.
    let counts = Tensor::zeros(&[5], DType::I64).scatter_add(
        0,
        &Tensor::from_vec(vec![4i64, 4, 0, 4], &[4]),
        &Tensor::ones(&[4], DType::I64),
    );
    assert_eq!(counts.to_vec::<i64>().unwrap(), vec![1, 0, 0, 0, 3]);
    // A computed input and source, and work after the scatter.
    let y = (x.exp().scatter_add(1, &Tensor::zeros(&[6, 4], DType::I32), &(&x * 2.0)) + 1.0).sum(&[1], false);
    let xe: Vec<f64> = xv.iter().map(|v| (*v as f32).exp() as f64).collect();
    for r in 0..6 {
        let row: f64 =
            (0..4).map(|c| xe[r * 4 + c] + 1.0).sum::<f64>() + (0..4).map(|c| 2.0 * xv[r * 4 + c]).sum::<f64>();
        close(&[f64s(&y)[r]], &[row], 1e-5, "computed operands");
    }
}

#[test]
fn sums_are_the_same_run_after_run() {
    // Float sums of many sources into few positions: rounding depends on
    // the order, which is fixed.
    let src = Tensor::from_vec(
        (0..20000).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 + 1e-7).collect(),
        &[4, 5000],
    );
    let index = Tensor::from_vec(positions(&[4, 5000], 3, 9), &[4, 5000]);
    let x = Tensor::zeros(&[4, 3], DType::F32);
    let first = x.scatter_add(1, &index, &src).to_vec::<f32>().unwrap();
    for _ in 0..3 {
        let again = Tensor::zeros(&[4, 3], DType::F32).scatter_add(1, &index, &(&src * 1.0));
        let again = again.to_vec::<f32>().unwrap();
        assert_eq!(
            first.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            again.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    // And in source order exactly: four lines of 5000 are cut into two
    // chunks of 2500 each, summed in f32 in source order, then added.
    let (sv, iv) = (src.to_vec::<f32>().unwrap(), index.to_vec::<i64>().unwrap());
    let mut chunks = [[0f32; 12]; 2];
    for (p, (&s, &i)) in sv.iter().zip(&iv).enumerate() {
        chunks[(p % 5000) / 2500][(p / 5000) * 3 + i as usize] += s;
    }
    let want: Vec<f32> = (0..12).map(|e| chunks[0][e] + chunks[1][e]).collect();
    assert_eq!(first, want);
}

#[test]
fn bad_indices_fail_the_realization() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let src = Tensor::ones(&[2, 3], DType::F32);
    for bad in [3i64, -1] {
        let index = Tensor::from_vec(vec![0, 1, 2, 0, bad, 1], &[2, 3]);
        match x.scatter_add(1, &index, &src).to_vec::<f32>() {
            Err(Error::IndexOutOfRange {
                op,
                axis,
                len,
                input,
                index,
            }) => {
                assert_eq!((op, axis, len), ("scatter_add", 1, 3));
                assert_eq!((input.as_slice(), index.as_slice()), (&[2, 3][..], &[2, 3][..]));
            }
            other => panic!("index {bad}: {other:?}"),
        }
    }
    // A scatter cut into chunks names the shapes written, not the chunks'.
    let mut at = positions(&[1, 5001], 3, 12);
    at[4321] = 3;
    let index = Tensor::from_vec(at, &[1, 5001]);
    let err = x
        .narrow(0, 0, 1)
        .scatter_add(1, &index, &Tensor::ones(&[1, 5001], DType::F32))
        .to_vec::<f32>();
    assert_eq!(
        err.unwrap_err(),
        Error::IndexOutOfRange {
            op: "scatter_add",
            axis: 1,
            len: 3,
            input: vec![1, 3],
            index: vec![1, 5001],
        }
    );
}

#[test]
fn misuse_is_an_error_naming_the_op() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    let src = Tensor::ones(&[2, 3], DType::F32);
    let index = Tensor::zeros(&[2, 3], DType::I64);
    let cases: Vec<(Result<Tensor, Error>, &str)> = vec![
        (x.try_scatter_add(2, &index, &src), "AxisOutOfRange"),
        (x.try_scatter_add(-3, &index, &src), "AxisOutOfRange"),
        (x.try_scatter_add(0, &index.cast(DType::F32), &src), "UnsupportedDType"),
        (x.try_scatter_add(0, &index, &src.cast(DType::F64)), "DTypeMismatch"),
        (
            x.cast(DType::Bool).try_scatter_add(0, &index, &src.cast(DType::Bool)),
            "UnsupportedDType",
        ),
        (
            x.try_scatter_add(0, &Tensor::zeros(&[2, 2], DType::I64), &src),
            "InvalidShape",
        ),
        (
            x.try_scatter_add(
                0,
                &Tensor::zeros(&[2, 4], DType::I64),
                &Tensor::ones(&[2, 4], DType::F32),
            ),
            "InvalidShape",
        ),
        (
            x.try_scatter_add(0, &Tensor::zeros(&[6], DType::I64), &Tensor::ones(&[6], DType::F32)),
            "InvalidShape",
        ),
        (
            Tensor::zeros(&[0, 3], DType::F32).try_scatter_add(
                0,
                &Tensor::zeros(&[1, 3], DType::I64),
                &src.narrow(0, 0, 1),
            ),
            "IndexOutOfRange",
        ),
    ];
    for (i, (result, kind)) in cases.into_iter().enumerate() {
        let err = result.expect_err(&format!("case {i}"));
        assert!(format!("{err:?}").starts_with(kind), "case {i}: {err:?}");
        assert!(err.to_string().contains("scatter_add"), "case {i}: {err}");
    }
    // An empty source leaves the input as it is.
    let none = Tensor::zeros(&[2, 0], DType::I64);
    let y = x.scatter_add(1, &none, &Tensor::ones(&[2, 0], DType::F32));
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0; 6]);
}

#[test]
fn a_scatter_is_one_kernel_walking_lines() {
    let x = Tensor::zeros(&[3, 4], DType::F32);
    let index = Tensor::from_vec(vec![0i64; 12], &[3, 4]);
    let plan = x
        .scatter_add(1, &index, &Tensor::ones(&[3, 4], DType::F32))
        .explain()
        .unwrap();
    assert!(plan.contains("scatter_add(axis 1)"), "{plan}");
    // A tile of lines a grid point, the scattered axis walked in order.
    assert!(plan.contains("strategy: tiled [3/4, 4r/1]"), "{plan}");
    assert!(plan.contains("loop i0 in 0..4"), "{plan}");
}

/// Random shapes (rank 1 to 4, indices narrower than the input off the
/// axis, lines of sources long enough to be cut into chunks), dtypes and
/// index dtypes, against the host's scatter.
#[test]
fn random_scatters_match_a_host_scatter() {
    let mut rng = common::Lcg(43);
    for case in 0..50 {
        let rank = 1 + rng.below(4) as usize;
        let axis = rng.below(rank as u64) as usize;
        let dims: Vec<usize> = (0..rank).map(|_| rng.pick(&[1, 2, 3, 7, 31])).collect();
        let idims: Vec<usize> = (0..rank)
            .map(|k| {
                if k == axis {
                    rng.pick(&[1, 5, 300, 4097, 9000])
                } else {
                    1 + rng.below(dims[k] as u64) as usize
                }
            })
            .collect();
        if idims.iter().product::<usize>() > 40_000 {
            continue;
        }
        let dtype = rng.pick(&[DType::F32, DType::F64, DType::F16, DType::I32, DType::I64, DType::U8]);
        let index_dtype = rng.pick(&[DType::I32, DType::I64]);
        check(&dims, &idims, axis, dtype, index_dtype, 200 + case);
    }
}
