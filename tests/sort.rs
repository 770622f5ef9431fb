//! `sort` and `topk` on the CPU executor: values and indices against a
//! stable host sort (NaN largest), every dtype, every axis, ties and NaN,
//! both directions, `topk` by selection (small `k`) and by sorting, edge
//! extents, and misuse as errors.

mod common;

use common::f64s;
use tilefuse::{DType, Error, Tensor};

/// Values with many ties (and NaN for floats) of `shape`.
fn data(shape: &[usize], dtype: DType, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = common::Lcg(seed);
    let v: Vec<f64> = (0..n)
        .map(|_| match rng.below(20) {
            0 if dtype.is_float() => f64::NAN,
            1 if dtype.is_float() => f64::NEG_INFINITY,
            2 if dtype.is_float() => -0.0,
            r => (r as f64 - 9.0) * 0.5,
        })
        .collect();
    let t = Tensor::from_vec(v, shape).cast(dtype);
    t.realize().unwrap();
    t
}

/// Whether `a` comes strictly before `b` ascending, NaN largest.
fn less(a: f64, b: f64) -> bool {
    a < b || (b.is_nan() && !a.is_nan())
}

/// The stable order of every line of `x` (of `dims`) along `axis`:
/// (values, indices) in row-major order.
fn sorted(x: &[f64], dims: &[usize], axis: usize, descending: bool) -> (Vec<f64>, Vec<i64>) {
    let inner: usize = dims[axis + 1..].iter().product();
    let n = dims[axis];
    let (mut values, mut indices) = (x.to_vec(), vec![0i64; x.len()]);
    for base in 0..x.len() {
        if (base / inner) % n != 0 {
            continue;
        }
        let mut order: Vec<usize> = (0..n).collect();
        let key = |i: usize| x[base + i * inner];
        order.sort_by(|&i, &j| {
            let (a, b) = (key(i), key(j));
            let (a, b) = if descending { (b, a) } else { (a, b) };
            if less(a, b) {
                std::cmp::Ordering::Less
            } else if less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        for (r, &i) in order.iter().enumerate() {
            values[base + r * inner] = key(i);
            indices[base + r * inner] = i as i64;
        }
    }
    (values, indices)
}

/// Equal as values, NaN equal to NaN and -0 to 0.
fn same(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "{what}: element {i} is {g}, not {w}"
        );
    }
}

fn check_sort(x: &Tensor, axis: usize, descending: bool, what: &str) {
    let (values, indices) = x.sort(axis as isize, descending);
    assert_eq!((values.dtype(), indices.dtype()), (x.dtype(), DType::I64), "{what}");
    let (want_v, want_i) = sorted(&f64s(x), x.dims(), axis, descending);
    assert_eq!(indices.to_vec::<i64>().unwrap(), want_i, "{what}: indices");
    same(&f64s(&values), &want_v, &format!("{what}: values"));
}

#[test]
fn sorts_of_every_dtype_along_every_axis_both_ways() {
    for dtype in DType::ALL {
        let x = data(&[4, 9, 5], dtype, 1);
        for axis in 0..3 {
            for descending in [false, true] {
                check_sort(
                    &x,
                    axis,
                    descending,
                    &format!("{dtype} axis {axis} descending {descending}"),
                );
            }
        }
    }
}

#[test]
fn sorts_of_edge_shapes() {
    check_sort(&data(&[300], DType::F32, 2), 0, false, "one long line");
    check_sort(&data(&[2, 1, 3, 1, 7, 2], DType::I32, 3), 4, true, "rank 6");
    check_sort(&data(&[3, 1], DType::F64, 4), 1, false, "lines of one");
    let (v, i) = Tensor::zeros(&[0, 4], DType::F32).sort(1, false);
    assert_eq!((v.dims(), i.dims()), (&[0, 4][..], &[0, 4][..]));
    // A view as input, sorted by its negative axis.
    let x = data(&[6, 5], DType::F32, 5).transpose(0, 1);
    let (values, indices) = x.sort(-1, true);
    let (want_v, want_i) = sorted(&f64s(&x), &[5, 6], 1, true);
    assert_eq!(indices.to_vec::<i64>().unwrap(), want_i);
    same(&f64s(&values), &want_v, "a transposed view");
}

#[test]
fn topk_by_selection_and_by_sorting() {
    // Lines past 256, and on the CPU lines past four elements a pick: k up
    // to 8 by selection, larger k by sorting.
    for (dtype, n) in [DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool]
        .into_iter()
        .flat_map(|d| [(d, 300), (d, 40)])
    {
        let x = data(&[3, n, 2], dtype, 6);
        let (all_v, all_i) = sorted(&f64s(&x), &[3, n, 2], 1, true);
        for k in [0, 1, 3, 8, 9, n] {
            let (values, indices) = x.topk(k, -2);
            assert_eq!((values.dims(), indices.dims()), (&[3, k, 2][..], &[3, k, 2][..]));
            assert_eq!(values.dtype(), dtype);
            // The first k of each line of the full descending sort.
            let keep = |all: &[f64]| -> Vec<f64> {
                (0..3 * k * 2)
                    .map(|p| {
                        let (o, r, c) = (p / (k * 2), (p / 2) % k, p % 2);
                        all[o * n * 2 + r * 2 + c]
                    })
                    .collect()
            };
            let what = format!("{dtype} top {k}");
            let want_i = keep(&all_i.iter().map(|&i| i as f64).collect::<Vec<_>>());
            let got_i: Vec<f64> = indices.to_vec::<i64>().unwrap().iter().map(|&i| i as f64).collect();
            assert_eq!(got_i, want_i, "{what}: indices");
            same(&f64s(&values), &keep(&all_v), &format!("{what}: values"));
        }
    }
}

#[test]
fn misuse_is_an_error_naming_the_op() {
    let x = Tensor::zeros(&[2, 3], DType::F32);
    for (result, op, kind) in [
        (x.try_sort(2, false).map(|_| ()), "sort", "AxisOutOfRange"),
        (
            Tensor::scalar(1.0f32).try_sort(0, false).map(|_| ()),
            "sort",
            "AxisOutOfRange",
        ),
        (x.try_topk(4, 1).map(|_| ()), "topk", "InvalidShape"),
        (x.try_topk(1, -3).map(|_| ()), "topk", "AxisOutOfRange"),
    ] {
        let err: Error = result.expect_err(op);
        assert!(format!("{err:?}").starts_with(kind), "{err:?}");
        assert!(err.to_string().contains(op), "{err}");
    }
}

#[test]
fn long_lines_sort_by_merging_runs() {
    // Past the rank sort's longest line: padded runs merged pairwise.
    check_sort(&data(&[2049], DType::F32, 8), 0, false, "2049, padded");
    check_sort(&data(&[2, 3000, 3], DType::I32, 9), 1, true, "[2, 3000, 3] descending");
    check_sort(
        &data(&[5000, 2], DType::F64, 10),
        0,
        false,
        "[5000, 2] along the first axis",
    );
    check_sort(
        &data(&[3, 4096], DType::BF16, 11),
        1,
        true,
        "4096 bf16 descending, unpadded",
    );
    check_sort(&data(&[8193], DType::U8, 12), 0, false, "8193 u8");
    let x = data(&[2, 3000], DType::F32, 13);
    let (values, indices) = x.topk(100, 1);
    let (all_v, all_i) = sorted(&f64s(&x), &[2, 3000], 1, true);
    let keep = |all: &[f64]| -> Vec<f64> { (0..200).map(|p| all[(p / 100) * 3000 + p % 100]).collect() };
    let got_i: Vec<f64> = indices.to_vec::<i64>().unwrap().iter().map(|&i| i as f64).collect();
    assert_eq!(got_i, keep(&all_i.iter().map(|&i| i as f64).collect::<Vec<_>>()));
    same(&f64s(&values), &keep(&all_v), "top 100 of 3000");
}

/// Random shapes (rank 1 to 4, extents 1, primes and lines past the rank
/// sort's 256), dtypes, axes and directions, sorted and topk'd against the
/// host's stable sort.
#[test]
fn random_sorts_and_topk_match_a_stable_host_sort() {
    let mut rng = common::Lcg(41);
    for case in 0..60 {
        let rank = 1 + rng.below(4) as usize;
        let axis = rng.below(rank as u64) as usize;
        let dims: Vec<usize> = (0..rank)
            .map(|k| {
                if k == axis {
                    rng.pick(&[1, 2, 7, 31, 255, 256, 257, 600])
                } else {
                    rng.pick(&[1, 2, 3, 5])
                }
            })
            .collect();
        let dtype = rng.pick(&DType::ALL);
        let descending = rng.below(2) == 1;
        let x = data(&dims, dtype, 100 + case);
        let what = format!("case {case}: {dtype} {dims:?} axis {axis} descending {descending}");
        check_sort(&x, axis, descending, &what);
        let n = dims[axis];
        let k = rng.below(n as u64 + 1) as usize;
        let (values, indices) = x.topk(k, axis as isize);
        let (full_v, full_i) = x.sort(axis as isize, true);
        let (want_v, want_i) = (full_v.narrow(axis as isize, 0, k), full_i.narrow(axis as isize, 0, k));
        assert_eq!(
            indices.to_vec::<i64>().unwrap(),
            want_i.to_vec::<i64>().unwrap(),
            "{what}: top {k}"
        );
        same(&f64s(&values), &f64s(&want_v), &format!("{what}: top {k} values"));
    }
}
