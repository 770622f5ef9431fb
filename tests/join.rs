//! `cat`, `stack` and `pad` on the CPU executor: values against a host
//! computation of the joined elements (f64 for float math), every dtype,
//! pieces that are views (transposed, stepped, broadcast), and the kernel
//! counts that show a concatenation is addressing in its consumer.

mod common;

use common::f64s;
use tilefuse::{DType, Tensor};

/// A deterministic tensor of `shape` whose values are exact in every dtype.
fn data(shape: &[usize], dtype: DType, seed: i64) -> Tensor {
    common::exact_tensor(shape, dtype, seed, 1.0)
}

/// The row-major elements of `pieces` joined along `axis`, computed on the host.
fn joined(pieces: &[&Tensor], axis: usize) -> Vec<f64> {
    let dims = pieces[0].dims();
    let outer: usize = dims[..axis].iter().product();
    let mut out = vec![];
    let vals: Vec<Vec<f64>> = pieces.iter().map(|p| f64s(p)).collect();
    for o in 0..outer {
        for (p, v) in pieces.iter().zip(&vals) {
            let run = p.dims()[axis..].iter().product::<usize>();
            out.extend_from_slice(&v[o * run..(o + 1) * run]);
        }
    }
    out
}

#[test]
fn cat_joins_pieces_of_every_dtype_along_every_axis() {
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
        for axis in 0..3 {
            let mut shapes = [[3, 4, 5]; 3];
            shapes[1][axis] = 1;
            shapes[2][axis] = 7;
            let pieces: Vec<Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| data(s, dtype, i as i64))
                .collect();
            let refs: Vec<&Tensor> = pieces.iter().collect();
            let y = Tensor::cat(&refs, axis as isize);
            let mut want_dims = vec![3, 4, 5];
            want_dims[axis] = [3, 4, 5][axis] + 1 + 7;
            assert_eq!(y.dims(), want_dims.as_slice());
            assert_eq!(y.dtype(), dtype);
            assert_eq!(f64s(&y), joined(&refs, axis), "{dtype} along {axis}");
        }
    }
}

#[test]
fn cat_of_views_and_empty_pieces_reads_each_through_its_layout() {
    let base = data(&[6, 9], DType::F32, 1);
    // A transposed piece, a stepped slice, a broadcast row and an empty piece.
    let t = base.transpose(0, 1).narrow(0, 0, 4); // [4, 6]
    let s = data(&[4, 13], DType::F32, 2).slice(1, 1, 13, 2); // [4, 6]
    let b = data(&[1, 6], DType::F32, 3).expand(&[4, 6]);
    let e = data(&[0, 6], DType::F32, 4);
    let y = Tensor::cat(&[&t, &e, &s, &b], 0);
    assert_eq!(y.dims(), &[12, 6]);
    assert_eq!(f64s(&y), joined(&[&t, &e, &s, &b], 0));
    let z = Tensor::cat(&[&t, &s, &b], 1);
    assert_eq!(f64s(&z), joined(&[&t, &s, &b], 1));
}

#[test]
fn cat_read_by_elementwise_work_is_one_kernel() {
    let a = data(&[37, 61], DType::F32, 1);
    let b = data(&[37, 3], DType::F32, 2);
    let c = data(&[37, 129], DType::F32, 3);
    let bias = data(&[193], DType::F32, 4);
    let y = (Tensor::cat(&[&a, &b, &c], 1) * 0.5 + &bias).tanh();
    let stats = y.realize_with_stats().unwrap();
    assert_eq!(stats.kernels_launched, 1);
    let j = joined(&[&a, &b, &c], 1);
    let bias = f64s(&bias);
    let got = f64s(&y);
    for (i, (&g, &x)) in got.iter().zip(&j).enumerate() {
        let want = ((x as f32 * 0.5) as f64 + bias[i % 193]).tanh();
        assert!((g - want).abs() < 1e-6, "at {i}: {g} against {want}");
    }
}

#[test]
fn reductions_over_a_cat_along_and_across_the_joined_axis_are_one_kernel() {
    for dtype in [DType::F32, DType::BF16, DType::I32] {
        let a = data(&[50, 33], dtype, 1);
        let b = data(&[17, 33], dtype, 2);
        let x = Tensor::cat(&[&a, &b], 0);
        let j = joined(&[&a, &b], 0);
        for axis in [0usize, 1] {
            let s = x.sum(&[axis as isize], false);
            let stats = s.realize_with_stats().unwrap();
            assert_eq!(stats.kernels_launched, 1, "{dtype} sum over {axis}");
            let (rows, cols) = (67, 33);
            let want: Vec<f64> = if axis == 0 {
                (0..cols).map(|c| (0..rows).map(|r| j[r * cols + c]).sum()).collect()
            } else {
                (0..rows).map(|r| j[r * cols..(r + 1) * cols].iter().sum()).collect()
            };
            let got = f64s(&s);
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0) + if dtype == DType::BF16 { 0.5 } else { 0.0 },
                    "{dtype} over {axis}: {g} against {w}"
                );
            }
            let m = x.max(&[axis as isize], false);
            let want: Vec<f64> = if axis == 0 {
                (0..cols)
                    .map(|c| (0..rows).map(|r| j[r * cols + c]).fold(f64::MIN, f64::max))
                    .collect()
            } else {
                (0..rows)
                    .map(|r| j[r * cols..(r + 1) * cols].iter().copied().fold(f64::MIN, f64::max))
                    .collect()
            };
            assert_eq!(f64s(&m), want, "{dtype} max over {axis}");
        }
    }
}

#[test]
fn pad_borders_take_the_value_and_fuse_into_the_consumer() {
    let x = data(&[5, 7, 3], DType::F32, 1);
    let y = x.pad(&[(2, 1), (0, 3)], -4.0f32);
    assert_eq!(y.dims(), &[5, 10, 6]);
    let xs = f64s(&x);
    let got = f64s(&y);
    for i in 0..5 {
        for r in 0..10 {
            for c in 0..6 {
                let inside = (2..9).contains(&r) && c < 3;
                let want = if inside { xs[(i * 7 + r - 2) * 3 + c] } else { -4.0 };
                assert_eq!(got[(i * 10 + r) * 6 + c], want, "at [{i}, {r}, {c}]");
            }
        }
    }
    // Padding and the work after it: one kernel, no buffer for the padded tensor.
    let z = x.pad(&[(1, 1)], 0.0f32).exp().sum(&[-1], false);
    assert_eq!(z.realize_with_stats().unwrap().kernels_launched, 1);
    let want: Vec<f64> = (0..35)
        .map(|r| 2.0 + (0..3).map(|c| (xs[r * 3 + c] as f32).exp() as f64).sum::<f64>())
        .collect();
    for (g, w) in f64s(&z).iter().zip(&want) {
        assert!((g - w).abs() < 1e-5 * w.abs(), "{g} against {w}");
    }
    // An integer tensor padded with a wrapped value.
    let i = data(&[2, 2], DType::U8, 5).pad(&[(1, 0)], 300i32);
    assert_eq!(i.to_vec::<u8>().unwrap()[..1], [44]);
}

#[test]
fn stack_joins_along_a_new_axis_and_cat_under_views_is_copied_first() {
    let a = data(&[3, 4], DType::I64, 1);
    let b = data(&[3, 4], DType::I64, 2);
    let s = Tensor::stack(&[&a, &b], -1);
    assert_eq!(s.dims(), &[3, 4, 2]);
    let (av, bv) = (f64s(&a), f64s(&b));
    let want: Vec<f64> = (0..12).flat_map(|i| [av[i], bv[i]]).collect();
    assert_eq!(f64s(&s), want);
    // A view of a concatenation, and a concatenation of computed pieces.
    let c = Tensor::cat(&[&a, &(&b * 2)], 0).transpose(0, 1);
    assert_eq!(c.dims(), &[4, 6]);
    let j = joined(&[&a, &(&b * 2)], 0);
    let want: Vec<f64> = (0..4)
        .flat_map(|col| (0..6).map(move |r| (r, col)))
        .map(|(r, col)| j[r * 4 + col])
        .collect();
    assert_eq!(f64s(&c), want);
    // Nested concatenations flatten into one set of pieces.
    let n = Tensor::cat(&[&Tensor::cat(&[&a, &b], 1), &Tensor::cat(&[&b, &a], 1)], 0) + 1i64;
    assert_eq!(n.realize_with_stats().unwrap().kernels_launched, 1);
    let top = joined(&[&a, &b], 1);
    let bottom = joined(&[&b, &a], 1);
    let want: Vec<f64> = top.iter().chain(&bottom).map(|v| v + 1.0).collect();
    assert_eq!(f64s(&n), want);
    // Mixed dtypes promote as arithmetic does.
    let m = Tensor::cat(&[&a.cast(DType::I32), &b.cast(DType::F32)], 0);
    assert_eq!(m.dtype(), DType::F32);
}
