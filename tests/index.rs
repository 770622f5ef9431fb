//! `gather` and `index_select` on the CPU executor: values against a host
//! computation of the indexed elements, every dtype, every axis, views as
//! data and as index, indices out of range as errors of the realization,
//! misuse as errors naming the op and the shapes, and the kernel counts
//! that show a gather fused with the work around it.

mod common;

use common::f64s;
use tilefuse::{DType, Error, Tensor};

/// A deterministic tensor of `shape` whose values are exact in every dtype.
fn data(shape: &[usize], dtype: DType, seed: i64) -> Tensor {
    common::exact_tensor(shape, dtype, seed, 1.0)
}

/// Positions in `0..len` for an index of `shape`, repeats and all.
fn positions(shape: &[usize], len: usize, seed: u64) -> Vec<i64> {
    let n: usize = shape.iter().product();
    (0..n as u64)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed.wrapping_mul(40503)) % len as u64) as i64)
        .collect()
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

/// `gather` computed on the host from the row-major values of its operands.
fn gathered(x: &[f64], xdims: &[usize], axis: usize, index: &[i64], idims: &[usize]) -> Vec<f64> {
    let (xs, is) = (strides(xdims), strides(idims));
    (0..index.len())
        .map(|flat| {
            let e: usize = (0..idims.len())
                .map(|k| {
                    let c = if k == axis {
                        index[flat] as usize
                    } else {
                        flat / is[k] % idims[k]
                    };
                    c * xs[k]
                })
                .sum();
            x[e]
        })
        .collect()
}

#[test]
fn gather_reads_every_dtype_along_every_axis() {
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ] {
        let xdims = [4, 5, 6];
        let x = data(&xdims, dtype, 1);
        let xv = f64s(&x);
        for axis in 0..3 {
            // The index: narrower than the data off the axis, any length along it.
            let mut idims = vec![3, 5, 4];
            idims[axis] = 7;
            for index_dtype in [DType::I64, DType::I32] {
                let pos = positions(&idims, xdims[axis], axis as u64);
                let index = Tensor::from_vec(pos.clone(), &idims).cast(index_dtype);
                let y = x.gather(axis as isize, &index);
                assert_eq!(y.dims(), idims.as_slice());
                assert_eq!(y.dtype(), dtype);
                assert_eq!(
                    f64s(&y),
                    gathered(&xv, &xdims, axis, &pos, &idims),
                    "{dtype} along {axis} by {index_dtype}"
                );
            }
        }
    }
}

#[test]
fn index_select_takes_slices_in_index_order_with_repeats() {
    let x = data(&[5, 3, 4], DType::F32, 2);
    let xv = f64s(&x);
    for axis in 0..3usize {
        let len = x.dims()[axis];
        let pos: Vec<i64> = vec![len as i64 - 1, 0, 1, 0, len as i64 - 1];
        let index = Tensor::from_vec(pos.clone(), &[pos.len()]);
        let y = x.index_select(axis as isize - 3, &index);
        let mut want_dims = x.dims().to_vec();
        want_dims[axis] = pos.len();
        assert_eq!(y.dims(), want_dims.as_slice());
        // index_select is a gather by the index spread over the result.
        let spread: Vec<i64> = (0..want_dims.iter().product::<usize>())
            .map(|flat| pos[flat / strides(&want_dims)[axis] % pos.len()])
            .collect();
        assert_eq!(
            f64s(&y),
            gathered(&xv, x.dims(), axis, &spread, &want_dims),
            "axis {axis}"
        );
    }
    // An empty index gives an empty result; a 0-d index one slice.
    let none = Tensor::from_vec(Vec::<i64>::new(), &[0]);
    assert_eq!(x.index_select(1, &none).dims(), &[5, 0, 4]);
    let one = Tensor::from_vec(vec![2i32], &[]);
    assert_eq!(f64s(&x.index_select(0, &one)), f64s(&x.narrow(0, 2, 1)));
}

#[test]
fn gather_reads_views_as_data_and_as_index() {
    // Transposed, stepped and broadcast data; a transposed and a broadcast index.
    let base = data(&[6, 8], DType::F32, 3);
    let t = base.transpose(0, 1); // [8, 6]
    let s = base.slice(1, 1, 8, 2); // [6, 4]
    let b = data(&[1, 5], DType::F32, 4).expand(&[6, 5]);
    for (x, axis) in [(&t, 1usize), (&t, 0), (&s, 1), (&b, 0), (&b, 1)] {
        let xv = f64s(x);
        let idims = [x.dims()[0].min(4), 3];
        let pos = positions(&[idims[1], idims[0]], x.dims()[axis], 9);
        // The index is stored transposed.
        let index = Tensor::from_vec(pos, &[idims[1], idims[0]]).transpose(0, 1);
        let want_pos: Vec<i64> = index.to_vec::<i64>().unwrap();
        let y = x.gather(axis as isize, &index);
        assert_eq!(
            f64s(&y),
            gathered(&xv, x.dims(), axis, &want_pos, &idims),
            "{:?} along {axis}",
            x.dims()
        );
        let row = Tensor::from_vec(vec![1i64, 0, 1], &[1, 3]).expand(&idims);
        let z = x.gather(axis as isize, &row);
        let want: Vec<i64> = row.to_vec::<i64>().unwrap();
        assert_eq!(f64s(&z), gathered(&xv, x.dims(), axis, &want, &idims));
    }
}

#[test]
fn gathers_fuse_with_the_work_around_them() {
    // Cross-entropy with integer labels: the row's logsumexp and the
    // label's logit in one kernel, then the mean.
    let (rows, classes) = (37, 53);
    let logits = data(&[rows, classes], DType::F32, 5) * 0.25;
    let logits = logits.cast(DType::F32);
    logits.realize().unwrap();
    let labels: Vec<i64> = positions(&[rows], classes, 1);
    let label = Tensor::from_vec(labels.clone(), &[rows, 1]);
    let picked = logits.gather(1, &label);
    let per_row = &logits.logsumexp(&[1], true) - &picked;
    let stats = per_row.realize_with_stats().unwrap();
    assert_eq!(stats.kernels_launched, 1, "logsumexp and the gather: one kernel");
    let lv = f64s(&logits);
    let want: Vec<f64> = (0..rows)
        .map(|r| {
            let row = &lv[r * classes..(r + 1) * classes];
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln() - row[labels[r] as usize]
        })
        .collect();
    for (g, w) in f64s(&per_row).iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} against {w}");
    }
    // A gather of computed data: the data is written first, the gather and
    // the reduction after it are one kernel.
    let x = data(&[9, 7], DType::I32, 6);
    let y = &x * 3;
    let index = Tensor::from_vec(positions(&[9, 4], 7, 2), &[9, 4]);
    let s = y.gather(1, &index).sum(&[1], true);
    assert_eq!(s.realize_with_stats().unwrap().kernels_launched, 2);
    let yv = f64s(&y);
    let pos = index.to_vec::<i64>().unwrap();
    let g = gathered(&yv, &[9, 7], 1, &pos, &[9, 4]);
    let want: Vec<f64> = g.chunks(4).map(|r| r.iter().sum()).collect();
    assert_eq!(f64s(&s), want);
    // A gather of a constant.
    let c = Tensor::full(&[3, 4], 2.5f32);
    let k = c.gather(0, &Tensor::from_vec(vec![2i64, 0, 1], &[3, 1]));
    assert_eq!(k.to_vec::<f32>().unwrap(), vec![2.5; 3]);
}

#[test]
fn an_index_outside_its_axis_fails_the_realization() {
    let x = data(&[4, 6], DType::F32, 7);
    for bad in [6i64, -1, 1 << 40] {
        let index = Tensor::from_vec(vec![0, 1, bad, 2], &[4, 1]);
        let err = x.gather(1, &index).to_vec::<f32>().unwrap_err();
        assert_eq!(
            err,
            Error::IndexOutOfRange {
                op: "gather",
                axis: 1,
                len: 6,
                input: vec![4, 6],
                index: vec![4, 1],
            }
        );
        assert!(
            err.to_string().contains("gather") && err.to_string().contains("0..6"),
            "{err}"
        );
        // Fused with work after it, the same error.
        let fused = (x.gather(1, &index) * 2.0).sum_all();
        assert!(matches!(
            fused.to_vec::<f32>(),
            Err(Error::IndexOutOfRange { op: "gather", .. })
        ));
    }
    let rows = Tensor::from_vec(vec![3i32, 4], &[2]);
    let err = x.index_select(0, &rows).to_vec::<f32>().unwrap_err();
    assert!(
        matches!(&err, Error::IndexOutOfRange { op: "index_select", axis: 0, len: 4, input, index } if input == &[4, 6] && index == &[2, 6]),
        "{err}"
    );
    // Into an empty axis, every index is out of range at once.
    let empty = data(&[3, 0], DType::F32, 8);
    let err = empty
        .try_gather(1, &Tensor::from_vec(vec![0i64; 3], &[3, 1]))
        .unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { len: 0, .. }), "{err}");
    // The same tensors with good indices still realize afterwards.
    let good = Tensor::from_vec(vec![5i64, 0, 3, 2], &[4, 1]);
    assert_eq!(x.gather(1, &good).dims(), &[4, 1]);
    x.gather(1, &good).realize().unwrap();
}

#[test]
fn misuse_is_an_error_naming_the_op_and_the_shapes() {
    let x = data(&[4, 6], DType::F32, 9);
    let float_index = Tensor::from_vec(vec![0.0f32; 4], &[4, 1]);
    assert!(matches!(
        x.try_gather(1, &float_index),
        Err(Error::UnsupportedDType {
            op: "gather",
            dtype: DType::F32,
            ..
        })
    ));
    let flat = Tensor::from_vec(vec![0i64; 4], &[4]);
    match x.try_gather(1, &flat) {
        Err(Error::InvalidShape {
            op: "gather",
            shape,
            arg,
            ..
        }) => {
            assert_eq!(shape, vec![4, 6]);
            assert_eq!(arg, vec![4]);
        }
        other => panic!("{other:?}"),
    }
    let wide = Tensor::from_vec(vec![0i64; 10], &[5, 2]);
    assert!(matches!(
        x.try_gather(1, &wide),
        Err(Error::InvalidShape { op: "gather", .. })
    ));
    assert!(matches!(
        x.try_gather(2, &flat.reshape([4, 1])),
        Err(Error::AxisOutOfRange {
            op: "gather",
            axis: 2,
            ..
        })
    ));
    let square = Tensor::from_vec(vec![0i64; 4], &[2, 2]);
    assert!(matches!(
        x.try_index_select(0, &square),
        Err(Error::InvalidShape { op: "index_select", .. })
    ));
    assert!(matches!(
        x.try_index_select(0, &Tensor::from_vec(vec![0u8], &[1])),
        Err(Error::UnsupportedDType { op: "index_select", .. })
    ));
}
