//! Values of tensor ops against hand-computed results.

use half::{bf16, f16};
use tilefuse::{DType, Tensor};

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape)
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.to_vec::<f32>().unwrap()
}

/// Asserts `got` equals `want` within 1e-6 relative, NaN matching NaN.
#[track_caller]
fn close(got: &Tensor, want: &[f32]) {
    let got = f32s(got);
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= 1e-6 * w.abs().max(1.0);
        assert!(ok, "got {got:?}, want {want:?}");
    }
}

#[test]
fn arithmetic_with_tensors_and_scalars() {
    let a = t(&[1.0, 2.0, 3.0], &[3]);
    let b = t(&[4.0, 5.0, 6.0], &[3]);
    close(&(&a + &b), &[5.0, 7.0, 9.0]);
    close(&(&a - &b), &[-3.0, -3.0, -3.0]);
    close(&(&a * &b), &[4.0, 10.0, 18.0]);
    close(&(&b / &a), &[4.0, 2.5, 2.0]);
    close(&(a.clone() + b.clone()), &[5.0, 7.0, 9.0]);
    close(&(&a + b.clone()), &[5.0, 7.0, 9.0]);
    close(&(a.clone() + &b), &[5.0, 7.0, 9.0]);
    close(&-&a, &[-1.0, -2.0, -3.0]);
    close(&(&a * 2.0), &[2.0, 4.0, 6.0]);
    close(&(&a + 1), &[2.0, 3.0, 4.0]);
    close(&(&a - 0.5f32), &[0.5, 1.5, 2.5]);
    close(&(2.0 * &a), &[2.0, 4.0, 6.0]);
    close(&(1.0f32 - &a), &[0.0, -1.0, -2.0]);
    close(&(6.0 / a.clone()), &[6.0, 3.0, 2.0]);
}

#[test]
fn integer_arithmetic_truncates_and_wraps() {
    let a = Tensor::from_vec(vec![7i32, -7, 5, i32::MAX], &[4]);
    let b = Tensor::from_vec(vec![2i32, 2, 0, 1], &[4]);
    assert_eq!((&a / &b).to_vec::<i32>().unwrap(), vec![3, -3, 0, i32::MAX]);
    assert_eq!((&a + &b).to_vec::<i32>().unwrap(), vec![9, -5, 5, i32::MIN]);
    let u = Tensor::from_vec(vec![250u8, 3], &[2]);
    assert_eq!((&u + 10).to_vec::<u8>().unwrap(), vec![4, 13]);
    assert_eq!((&u * 0.5).to_vec::<f32>().unwrap(), vec![125.0, 1.5]);
}

#[test]
fn unary_ops_match_known_values() {
    let e = std::f32::consts::E;
    close(&t(&[0.0, 1.0], &[2]).exp(), &[1.0, e]);
    close(&t(&[3.0, -1.0], &[2]).exp2(), &[8.0, 0.5]);
    close(&t(&[1.0, e], &[2]).log(), &[0.0, 1.0]);
    close(&t(&[8.0, 0.0], &[2]).log2(), &[3.0, f32::NEG_INFINITY]);
    close(&t(&[4.0, -1.0], &[2]).sqrt(), &[2.0, f32::NAN]);
    close(&t(&[4.0, 0.25], &[2]).rsqrt(), &[0.5, 2.0]);
    close(&t(&[2.0, 0.0], &[2]).recip(), &[0.5, f32::INFINITY]);
    close(&t(&[std::f32::consts::FRAC_PI_2, 0.0], &[2]).sin(), &[1.0, 0.0]);
    close(&t(&[0.0, std::f32::consts::PI], &[2]).cos(), &[1.0, -1.0]);
    close(&t(&[0.0, 100.0], &[2]).tanh(), &[0.0, 1.0]);
    close(&t(&[0.0, 100.0], &[2]).sigmoid(), &[0.5, 1.0]);
    close(&t(&[-1.0, 2.0], &[2]).relu(), &[0.0, 2.0]);
    close(&t(&[1.0, 0.0], &[2]).gelu(), &[0.841_192, 0.0]);
    close(&t(&[1.0, -1.0], &[2]).gelu_erf(), &[0.841_344_7, -0.158_655_26]);
    close(&t(&[1.0, 0.0], &[2]).silu(), &[0.731_058_6, 0.0]);
    close(&t(&[-1.5, 1.5], &[2]).floor(), &[-2.0, 1.0]);
    close(&t(&[-1.5, 1.5], &[2]).ceil(), &[-1.0, 2.0]);
    close(&t(&[2.5, 3.5, -0.5], &[3]).round(), &[2.0, 4.0, -0.0]);
    close(
        &t(&[-3.0, 0.0, 2.0, f32::NAN], &[4]).sign(),
        &[-1.0, 0.0, 1.0, f32::NAN],
    );
    close(&t(&[-2.0, 2.0], &[2]).abs(), &[2.0, 2.0]);
    close(&t(&[2.0, 4.0], &[2]).pow(&t(&[10.0, 0.5], &[2])), &[1024.0, 2.0]);
    close(&t(&[3.0], &[1]).powf(2.0), &[9.0]);
}

#[test]
fn float_only_ops_on_integers_compute_in_f32() {
    let i = Tensor::from_vec(vec![1i32, 4], &[2]);
    assert_eq!(i.sqrt().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    assert_eq!(i.floor().to_vec::<i32>().unwrap(), vec![1, 4]);
    assert_eq!((-&i).abs().to_vec::<i32>().unwrap(), vec![1, 4]);
}

#[test]
fn maximum_minimum_and_clamp_propagate_nan() {
    let a = t(&[1.0, f32::NAN, 5.0, -0.5], &[4]);
    let b = t(&[2.0, 0.0, f32::NAN, -1.0], &[4]);
    close(&a.maximum(&b), &[2.0, f32::NAN, f32::NAN, -0.5]);
    close(&a.minimum(&b), &[1.0, f32::NAN, f32::NAN, -1.0]);
    close(&a.clamp(0.0, 2.0), &[1.0, f32::NAN, 2.0, 0.0]);
}

#[test]
fn comparisons_where_and_logic() {
    let a = t(&[1.0, 2.0, f32::NAN], &[3]);
    let b = t(&[1.0, 3.0, f32::NAN], &[3]);
    let bools = |x: Tensor| x.to_vec::<bool>().unwrap();
    assert_eq!(bools(a.eq(&b)), [true, false, false]);
    assert_eq!(bools(a.ne(&b)), [false, true, true]);
    assert_eq!(bools(a.lt(&b)), [false, true, false]);
    assert_eq!(bools(a.le(&b)), [true, true, false]);
    assert_eq!(bools(a.gt(&b)), [false, false, false]);
    assert_eq!(bools(a.ge(&b)), [true, false, false]);
    close(&Tensor::where_(&a.lt(&b), &a, &(&b * 10.0)), &[10.0, 2.0, f32::NAN]);
    // The condition broadcasts along rows, the scalar branch everywhere.
    let m = Tensor::from_vec(vec![true, false], &[2, 1]);
    let w = Tensor::where_(&m, &t(&[1.0, 2.0], &[2]), &Tensor::scalar(0.0f32));
    assert_eq!(w.dims(), &[2, 2]);
    close(&w, &[1.0, 2.0, 0.0, 0.0]);

    let p = Tensor::from_vec(vec![true, true, false, false], &[4]);
    let q = Tensor::from_vec(vec![true, false, true, false], &[4]);
    assert_eq!(bools(&p & &q), [true, false, false, false]);
    assert_eq!(bools(&p | &q), [true, true, true, false]);
    assert_eq!(bools(&p ^ &q), [false, true, true, false]);
    assert_eq!(bools(!&p), [false, false, true, true]);
    let x = Tensor::from_vec(vec![0b1100i32, 0b1010], &[2]);
    assert_eq!((&x & 0b0110).to_vec::<i32>().unwrap(), [0b0100, 0b0010]);
    assert_eq!((&x | 1).to_vec::<i32>().unwrap(), [0b1101, 0b1011]);
    assert_eq!((!&x).to_vec::<i32>().unwrap(), [!0b1100, !0b1010]);
    let u = Tensor::from_vec(vec![0u8, 255], &[2]);
    assert_eq!(u.not().to_vec::<u8>().unwrap(), [255, 0]);
}

#[test]
fn broadcasting_over_size_one_axes_ranks_and_scalars() {
    let col = t(&[1.0, 2.0], &[2, 1]);
    let row = t(&[10.0, 20.0, 30.0], &[3]);
    let s = &col + &row;
    assert_eq!(s.dims(), &[2, 3]);
    close(&s, &[11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    let cube = Tensor::arange(0.0f32, 8.0, 1.0).reshape([2, 2, 2]);
    close(
        &(&cube * &t(&[1.0, -1.0], &[2])),
        &[0.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0, -7.0],
    );
    close(
        &(&cube + &Tensor::scalar(1.0f32)),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
    close(&t(&[5.0], &[1]).broadcast_to(&[2, 2]), &[5.0; 4]);
}

#[test]
fn reductions_over_axes_and_all() {
    let x = Tensor::arange(1.0f32, 7.0, 1.0).reshape([2, 3]);
    close(&x.sum(&[1], true), &[6.0, 15.0]);
    assert_eq!(x.sum(&[1], true).dims(), &[2, 1]);
    close(&x.sum(&[0], false), &[5.0, 7.0, 9.0]);
    close(&x.sum(&[0, 1], false), &[21.0]);
    assert_eq!(x.sum_all().to_scalar::<f32>().unwrap(), 21.0);
    close(&x.mean(&[1], false), &[2.0, 5.0]);
    close(&x.max(&[0], false), &[4.0, 5.0, 6.0]);
    close(&x.min(&[-1], false), &[1.0, 4.0]);
    close(&x.prod(&[1], false), &[6.0, 120.0]);
    assert_eq!(x.argmax(1, false).to_vec::<i64>().unwrap(), vec![2, 2]);
    assert_eq!(x.argmin(0, false).to_vec::<i64>().unwrap(), vec![0, 0, 0]);
    assert_eq!(x.argmax_all().to_scalar::<i64>().unwrap(), 5);
    close(&x.var(&[1], false), &[1.0, 1.0]);
    close(&x.var_with_correction(&[1], false, 0), &[2.0 / 3.0, 2.0 / 3.0]);
    close(&x.var_all(), &[3.5]);
    close(&x.mean_all(), &[3.5]);
}

#[test]
fn integer_and_half_sums_follow_pytorch_dtypes() {
    let i = Tensor::from_vec(vec![i32::MAX, i32::MAX], &[2]);
    assert_eq!(i.sum_all().to_scalar::<i64>().unwrap(), 2 * i32::MAX as i64);
    let b = Tensor::from_vec(vec![true, true, false], &[3]);
    assert_eq!(b.sum_all().to_scalar::<i64>().unwrap(), 2);
    assert_eq!(
        Tensor::from_vec(vec![3u8, 4], &[2])
            .prod_all()
            .to_scalar::<i64>()
            .unwrap(),
        12
    );
    // The mean of integers needs a float dtype chosen by the caller, as in PyTorch.
    let i = Tensor::from_vec(vec![1i32, 2], &[2]);
    assert!(i.try_mean_all().is_err());
    assert_eq!(i.cast(DType::F32).mean_all().to_scalar::<f32>().unwrap(), 1.5);
    let h = Tensor::from_vec(vec![f16::from_f32(0.1); 10], &[10]);
    let s = h.sum_all();
    assert_eq!(s.dtype(), DType::F16);
    let exact = f16::from_f64(10.0 * f16::from_f32(0.1).to_f64());
    assert_eq!(s.to_scalar::<f16>().unwrap(), exact);
}

#[test]
fn nan_and_inf_in_reductions() {
    let x = t(&[1.0, f32::NAN, 3.0, f32::NEG_INFINITY, 2.0, f32::INFINITY], &[2, 3]);
    close(&x.max(&[1], false), &[f32::NAN, f32::INFINITY]);
    close(&x.min(&[1], false), &[f32::NAN, f32::NEG_INFINITY]);
    close(&x.sum(&[1], false), &[f32::NAN, f32::NAN]);
    assert_eq!(x.argmax(1, false).to_vec::<i64>().unwrap(), vec![1, 2]);
    let y = t(&[f32::INFINITY, 1.0], &[2]);
    close(&y.sum_all(), &[f32::INFINITY]);
}

#[test]
fn every_dtype_round_trips_and_casts() {
    assert_eq!(
        Tensor::from_vec(vec![true, false], &[2]).to_vec::<bool>().unwrap(),
        [true, false]
    );
    assert_eq!(Tensor::from_vec(vec![1u8, 255], &[2]).to_vec::<u8>().unwrap(), [1, 255]);
    assert_eq!(Tensor::from_vec(vec![-1i32, 7], &[2]).to_vec::<i32>().unwrap(), [-1, 7]);
    assert_eq!(
        Tensor::from_vec(vec![i64::MIN, 7], &[2]).to_vec::<i64>().unwrap(),
        [i64::MIN, 7]
    );
    assert_eq!(
        Tensor::from_vec(vec![u32::MAX, 7], &[2]).to_vec::<u32>().unwrap(),
        [u32::MAX, 7]
    );
    let h = vec![f16::from_f32(1.5), f16::from_f32(-2.0)];
    assert_eq!(Tensor::from_vec(h.clone(), &[2]).to_vec::<f16>().unwrap(), h);
    let bh = vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)];
    assert_eq!(Tensor::from_vec(bh.clone(), &[2]).to_vec::<bf16>().unwrap(), bh);
    assert_eq!(Tensor::from_vec(vec![0.1f64], &[1]).to_vec::<f64>().unwrap(), [0.1]);

    let x = t(&[-2.7, 0.0, 300.0], &[3]);
    assert_eq!(x.cast(DType::I32).to_vec::<i32>().unwrap(), [-2, 0, 300]);
    assert_eq!(x.cast(DType::U8).to_vec::<u8>().unwrap(), [254, 0, 44]);
    assert_eq!(x.cast(DType::Bool).to_vec::<bool>().unwrap(), [true, false, true]);
    assert_eq!(
        t(&[1.0 / 3.0], &[1]).cast(DType::BF16).to_vec::<bf16>().unwrap(),
        [bf16::from_f32(1.0 / 3.0)]
    );
    // u32 with i32 promotes to i64, so no value wraps.
    let big = Tensor::from_vec(vec![u32::MAX], &[1]) + Tensor::from_vec(vec![1i32], &[1]);
    assert_eq!(big.to_vec::<i64>().unwrap(), [u32::MAX as i64 + 1]);
    // f16 with bf16 promotes to f32.
    let mixed = Tensor::from_vec(h, &[2]) + Tensor::from_vec(bh, &[2]);
    assert_eq!(mixed.to_vec::<f32>().unwrap(), [3.0, -4.0]);
}

#[test]
fn views_on_non_contiguous_layouts() {
    let x = Tensor::arange(0i32, 24, 1).reshape([2, 3, 4]);
    // Permute to [4, 2, 3], take rows 1 and 3 of axis 0, then flatten.
    let y = x.permute(&[2, 0, 1]).slice(0, 1, 4, 2).reshape([2, 6]);
    let want: Vec<i32> = [1, 3]
        .iter()
        .flat_map(|&k| (0..2).flat_map(move |i| (0..3).map(move |j| i * 12 + j * 4 + k)))
        .collect();
    assert_eq!(y.to_vec::<i32>().unwrap(), want);
    let tr = x.transpose(1, 2).narrow(2, 1, 2).contiguous();
    assert_eq!(tr.dims(), &[2, 4, 2]);
    assert_eq!(tr.to_vec::<i32>().unwrap()[..4], [4, 8, 5, 9]);
    assert_eq!(
        x.unsqueeze(1).squeeze(1).to_vec::<i32>().unwrap(),
        (0..24).collect::<Vec<_>>()
    );
    let e = x.expand(&[3, 2, 3, 4]).sum(&[0], false);
    assert_eq!(
        e.to_vec::<i64>().unwrap(),
        (0..24).map(|v| 3 * v as i64).collect::<Vec<_>>()
    );
}

#[test]
fn empty_tensors() {
    let e = Tensor::zeros(&[2, 0], DType::F32);
    assert_eq!((&e + 1.0).to_vec::<f32>().unwrap(), Vec::<f32>::new());
    close(&e.sum(&[1], false), &[0.0, 0.0]);
    close(&e.prod(&[1], false), &[1.0, 1.0]);
    close(&e.mean(&[1], false), &[f32::NAN, f32::NAN]);
    assert_eq!(e.sum(&[0], true).dims(), &[1, 0]);
    let d = Tensor::from_vec(Vec::<i32>::new(), &[0, 3]);
    assert_eq!(d.transpose(0, 1).dims(), &[3, 0]);
    assert_eq!(d.sum_all().to_scalar::<i64>().unwrap(), 0);
}

#[test]
fn compositions() {
    let x = t(&[1.0, 2.0, 3.0, 1000.0, 1000.0, f32::NEG_INFINITY], &[2, 3]);
    let z = 1.0 + (-1.0f32).exp() + (-2.0f32).exp();
    close(
        &x.softmax(1),
        &[(-2.0f32).exp() / z, (-1.0f32).exp() / z, 1.0 / z, 0.5, 0.5, 0.0],
    );
    close(
        &x.log_softmax(-1),
        &[
            -2.0 - z.ln(),
            -1.0 - z.ln(),
            -z.ln(),
            -(2.0f32.ln()),
            -(2.0f32.ln()),
            f32::NEG_INFINITY,
        ],
    );
    close(&x.logsumexp(&[1], false), &[3.0 + z.ln(), 1000.0 + 2.0f32.ln()]);
    let inf = t(&[f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY, 0.0], &[2, 2]);
    close(&inf.logsumexp(&[1], false), &[f32::NEG_INFINITY, f32::INFINITY]);

    let y = t(&[1.0, 2.0, 3.0, 4.0], &[1, 4]);
    let (mean, var) = (2.5f32, 1.25f32);
    let norm: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .map(|v| (v - mean) / (var + 1e-5).sqrt())
        .collect();
    close(&y.layer_norm(None, None, 1e-5), &norm);
    let w = t(&[1.0, 2.0, 1.0, 2.0], &[4]);
    let b = t(&[0.0, 0.0, 1.0, 1.0], &[4]);
    let affine: Vec<f32> = norm
        .iter()
        .zip([1.0, 2.0, 1.0, 2.0])
        .zip([0.0, 0.0, 1.0, 1.0])
        .map(|((n, w), b)| n * w + b)
        .collect();
    close(&y.layer_norm(Some(&w), Some(&b), 1e-5), &affine);
    let rms = (7.5f32 + 1e-6).sqrt();
    close(
        &y.rms_norm(Some(&w), 1e-6),
        &[1.0 / rms, 4.0 / rms, 3.0 / rms, 8.0 / rms],
    );
}

#[test]
fn compositions_over_empty_axes_follow_pytorch() {
    // Nothing to normalize: a softmax along an empty axis is empty, and the
    // log of an empty sum of exponentials is -inf.
    let e = Tensor::zeros(&[2, 0], DType::F32);
    assert_eq!(e.softmax(1).dims(), &[2, 0]);
    assert_eq!(e.log_softmax(-1).dims(), &[2, 0]);
    close(&e.logsumexp(&[1], false), &[f32::NEG_INFINITY; 2]);
    assert_eq!(e.layer_norm(None, None, 1e-5).dims(), &[2, 0]);
    assert_eq!(
        e.cast(DType::F16).logsumexp(&[1], true).to_vec::<f16>().unwrap(),
        vec![f16::NEG_INFINITY; 2]
    );
    // Along the other axis the rows are empty, so there is nothing to reduce.
    assert_eq!(e.softmax(0).dims(), &[2, 0]);
    close(
        &Tensor::zeros(&[0, 3], DType::F32).logsumexp(&[0], false),
        &[f32::NEG_INFINITY; 3],
    );
}

#[test]
fn creation_and_results() {
    assert_eq!(Tensor::arange(5i64, 0, -2).to_vec::<i64>().unwrap(), [5, 3, 1]);
    assert_eq!(
        Tensor::arange(0.0f64, 1.0, 0.25).to_vec::<f64>().unwrap(),
        [0.0, 0.25, 0.5, 0.75]
    );
    assert_eq!(Tensor::ones(&[2], DType::U32).to_vec::<u32>().unwrap(), [1, 1]);
    assert_eq!(Tensor::full(&[2], -3i64).to_vec::<i64>().unwrap(), [-3, -3]);
    let r1 = f32s(&Tensor::rand(&[1000], DType::F32, 7));
    assert_eq!(r1, f32s(&Tensor::rand(&[1000], DType::F32, 7)));
    assert_ne!(r1, f32s(&Tensor::rand(&[1000], DType::F32, 8)));
    assert!(r1.iter().all(|&v| (0.0..1.0).contains(&v)));
    let n = Tensor::randn(&[10_000], DType::F64, 3);
    let (m, v) = (
        n.mean_all().to_scalar::<f64>().unwrap(),
        n.var_all().to_scalar::<f64>().unwrap(),
    );
    assert!(m.abs() < 0.05 && (v - 1.0).abs() < 0.05, "mean {m}, var {v}");
    assert_eq!(Tensor::randn(&[4], DType::BF16, 1).to_vec::<bf16>().unwrap().len(), 4);

    let s = (t(&[1.0, 2.0], &[2]) * 3.0).sum_all();
    assert!(!s.is_realized());
    s.realize().unwrap();
    assert!(s.is_realized());
    assert_eq!(s.subgraph_len(), 1, "a realized tensor is data");
    assert_eq!(s.to_scalar::<f32>().unwrap(), 9.0);
    let bytes = s.with_bytes(|b| b.to_vec()).unwrap();
    assert_eq!(bytes, 9.0f32.to_ne_bytes());
    assert_eq!(s.reshape([1, 1]).with_slice(|v: &[f32]| v[0]).unwrap(), 9.0);
}

#[test]
fn maximum_and_minimum_of_bools_are_or_and_and() {
    let a = Tensor::from_vec(vec![true, true, false, false], &[4]);
    let b = Tensor::from_vec(vec![true, false, true, false], &[4]);
    assert_eq!(a.maximum(&b).to_vec::<bool>().unwrap(), [true, true, true, false]);
    assert_eq!(a.minimum(&b).to_vec::<bool>().unwrap(), [true, false, false, false]);
}

#[test]
fn std_any_all_masked_fill_and_where_scalar_match_references() {
    // std over either axis, with either correction, every float dtype,
    // against an f64 two-pass reference of the dtype's values.
    let (rows, cols) = (37usize, 1001usize);
    let raw: Vec<f64> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1013) as f64 / 97.0 - 5.0)
        .collect();
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let x = Tensor::from_vec(raw.clone(), &[rows, cols]).cast(dtype);
        let vals: Vec<f64> = x.cast(DType::F64).to_vec::<f64>().unwrap();
        for (axis, correction) in [(0usize, 1usize), (1, 0), (1, 1)] {
            let (n, m) = if axis == 0 { (rows, cols) } else { (cols, rows) };
            let at = |j: usize, k: usize| {
                if axis == 0 {
                    vals[k * cols + j]
                } else {
                    vals[j * cols + k]
                }
            };
            let s = x.std(&[axis as isize], false, correction);
            assert_eq!(s.dtype(), dtype);
            let got = s.cast(DType::F64).to_vec::<f64>().unwrap();
            assert_eq!(got.len(), m);
            let tol = match dtype {
                DType::F64 => 1e-12,
                DType::F32 => 1e-5,
                _ => 1e-2,
            };
            for (j, g) in got.iter().enumerate() {
                let mean = (0..n).map(|k| at(j, k)).sum::<f64>() / n as f64;
                let ss = (0..n).map(|k| (at(j, k) - mean).powi(2)).sum::<f64>();
                let want = (ss / (n - correction) as f64).sqrt();
                assert!(
                    (g - want).abs() <= tol * want,
                    "{dtype} axis {axis}: {g} against {want}"
                );
            }
        }
    }
    assert!(matches!(
        Tensor::from_vec(vec![1i32, 2], &[2]).try_std(&[0], false, 1),
        Err(tilefuse::Error::NeedsFloat { op: "std", .. })
    ));

    // any / all: nonzero is true (NaN too), empty axes give false / true.
    let x = Tensor::from_vec(vec![0.0f32, f32::NAN, 0.0, 0.0, 1.0, -2.0], &[3, 2]);
    assert_eq!(x.any(&[1], false).to_vec::<bool>().unwrap(), vec![true, false, true]);
    assert_eq!(x.all(&[1], false).to_vec::<bool>().unwrap(), vec![false, false, true]);
    assert_eq!(x.any(&[0, 1], false).to_vec::<bool>().unwrap(), vec![true]);
    let b = Tensor::from_vec(vec![true, true, false, true], &[2, 2]);
    assert_eq!(b.all(&[0], true).to_vec::<bool>().unwrap(), vec![false, true]);
    assert_eq!(b.all(&[0], true).dims(), &[1, 2]);
    let empty = Tensor::from_vec(Vec::<i64>::new(), &[2, 0]);
    assert_eq!(empty.any(&[1], false).to_vec::<bool>().unwrap(), vec![false, false]);
    assert_eq!(empty.all(&[1], false).to_vec::<bool>().unwrap(), vec![true, true]);
    assert!(x.try_any(&[2], false).is_err());

    // masked_fill keeps the tensor's dtype; a bad mask is an error naming the op.
    let h = Tensor::from_vec(vec![1.5f32, 2.5, 3.5], &[3]).cast(DType::F16);
    let m = Tensor::from_vec(vec![false, true, false], &[3]);
    let filled = h.masked_fill(&m, 7.25);
    assert_eq!(filled.dtype(), DType::F16);
    assert_eq!(filled.cast(DType::F32).to_vec::<f32>().unwrap(), vec![1.5, 7.25, 3.5]);
    let e = h.try_masked_fill(&h, 0.0).unwrap_err().to_string();
    assert!(e.contains("masked_fill") && e.contains("bool"), "{e}");
    let wide = Tensor::from_vec(vec![true; 6], &[2, 3]);
    let e = h.try_masked_fill(&wide, 0.0).unwrap_err().to_string();
    assert!(e.contains("masked_fill") && e.contains("[2, 3]"), "{e}");

    // where_scalar: a scalar arm, the scalar-operand dtype rules.
    let i = Tensor::from_vec(vec![1i32, -2, 3], &[3]);
    let pos = i.gt(&i.scalar_like(0));
    let w = Tensor::where_scalar(&pos, &i, 0);
    assert_eq!((w.dtype(), w.to_vec::<i32>().unwrap()), (DType::I32, vec![1, 0, 3]));
    let w = Tensor::where_scalar(&pos, &i, 0.5);
    assert_eq!(
        (w.dtype(), w.to_vec::<f32>().unwrap()),
        (DType::F32, vec![1.0, 0.5, 3.0])
    );
}

#[test]
fn one_hot_of_integer_labels_and_a_cross_entropy_through_it() {
    let labels = Tensor::from_vec(vec![3i32, 0, 4, 1, 7], &[5]);
    let h = labels.one_hot(5);
    assert_eq!((h.dtype(), h.dims()), (DType::I64, &[5usize, 5][..]));
    let want: Vec<i64> = [3usize, 0, 4, 1, 7]
        .iter()
        .flat_map(|&l| (0..5).map(move |c| (c == l) as i64))
        .collect();
    assert_eq!(h.to_vec::<i64>().unwrap(), want, "7 is outside [0, 5): a row of zeros");
    let e = Tensor::from_vec(vec![0.5f32], &[1])
        .try_one_hot(2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("one_hot"), "{e}");

    // Cross-entropy of [rows, classes] logits against the f64 reference.
    let (rows, classes) = (6usize, 11usize);
    let logits: Vec<f32> = (0..rows * classes)
        .map(|i| ((i * 37) % 23) as f32 / 7.0 - 1.5)
        .collect();
    let ls: Vec<i64> = (0..rows as i64).map(|r| (r * 5) % classes as i64).collect();
    let x = Tensor::from_vec(logits.clone(), &[rows, classes]);
    let l = Tensor::from_vec(ls.clone(), &[rows]);
    let picked = (&x * &l.one_hot(classes).cast(DType::F32)).sum(&[1], false);
    let loss = (&x.logsumexp(&[1], false) - &picked).mean_all();
    let want = (0..rows)
        .map(|r| {
            let row = &logits[r * classes..(r + 1) * classes];
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let lse = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
            lse - row[ls[r] as usize] as f64
        })
        .sum::<f64>()
        / rows as f64;
    let got = loss.to_vec::<f32>().unwrap()[0] as f64;
    assert!((got - want).abs() <= 1e-6 * want.abs().max(1.0), "{got} against {want}");
}

#[test]
fn split_and_chunk_are_views_that_cover_the_axis() {
    let x = Tensor::from_vec((0..24).map(|i| i as f32).collect::<Vec<_>>(), &[2, 3, 4]);
    let parts = x.split(&[1, 0, 3], -1);
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0].to_vec::<f32>().unwrap(), vec![0.0, 4.0, 8.0, 12.0, 16.0, 20.0]);
    assert_eq!(parts[1].dims(), &[2, 3, 0]);
    assert_eq!(parts[2].dims(), &[2, 3, 3]);
    // A consumer of a piece reads it where it lies: the sum over a split.
    let s = parts[2].sum(&[2], false);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![6.0, 18.0, 30.0, 42.0, 54.0, 66.0]);
    let c = x.chunk(2, 1);
    assert_eq!(
        c.iter().map(|t| t.dims().to_vec()).collect::<Vec<_>>(),
        vec![vec![2, 2, 4], vec![2, 1, 4]]
    );
    assert_eq!(
        c[1].to_vec::<f32>().unwrap(),
        vec![8.0, 9.0, 10.0, 11.0, 20.0, 21.0, 22.0, 23.0]
    );
    assert_eq!(
        x.chunk(10, 0).len(),
        2,
        "fewer chunks than asked where the axis is short"
    );
    let e = x.try_split(&[1, 1], 2).unwrap_err().to_string();
    assert!(
        e.contains("split") && e.contains("[2, 3, 4]") && e.contains("add up"),
        "{e}"
    );
    let e = x.try_chunk(0, 0).unwrap_err().to_string();
    assert!(e.contains("chunk"), "{e}");
    assert!(x.try_split(&[2], 3).is_err());
    let empty = Tensor::from_vec(Vec::<f32>::new(), &[0, 2]);
    assert_eq!(empty.chunk(3, 0).len(), 1);
}

#[test]
fn compound_assignment_rebinds_and_keeps_shape_and_dtype() {
    let mut a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let old = a.clone();
    a += &Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3]);
    a -= 1;
    a *= Tensor::from_vec(vec![2.0f32, 3.0], &[2, 1]);
    a /= 2.0;
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![10.0, 21.0, 32.0, 19.5, 36.0, 52.5]);
    assert_eq!(old.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // The dtype stays: an f16 tensor plus f32 values is rounded back to f16.
    let mut h = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).cast(DType::F16);
    h += &Tensor::from_vec(vec![0.25f32, 0.5], &[2]);
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.cast(DType::F32).to_vec::<f32>().unwrap(), vec![1.25, 2.5]);
    let mut i = Tensor::from_vec(vec![7i32, 9], &[2]);
    i += 3;
    assert_eq!((i.dtype(), i.to_vec::<i32>().unwrap()), (DType::I32, vec![10, 12]));
    // A float result into an integer tensor, or a broadcast that grows the
    // tensor, panics with the operator and the shapes or dtypes.
    let grow = std::panic::catch_unwind(|| {
        let mut v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
        v += &Tensor::zeros(&[2, 3], DType::F32);
    });
    let msg = grow.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.contains("+=") && msg.contains("[3]") && msg.contains("[2, 3]"),
        "{msg}"
    );
    let truncate = std::panic::catch_unwind(|| {
        let mut v = Tensor::from_vec(vec![1i32, 2], &[2]);
        v *= 0.5;
    });
    let msg = truncate.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.contains("*=") && msg.contains("i32") && msg.contains("f32"),
        "{msg}"
    );
}

#[test]
fn reshape_infers_one_extent_from_minus_one() {
    let x = Tensor::from_vec((0..24).collect::<Vec<i64>>(), &[2, 3, 4]);
    assert_eq!(x.reshape([-1]).dims(), &[24]);
    assert_eq!(x.reshape([4, -1]).dims(), &[4, 6]);
    assert_eq!(x.reshape(vec![2isize, -1, 2]).dims(), &[2, 6, 2]);
    assert_eq!(
        x.reshape([3usize, 8]).to_vec::<i64>().unwrap(),
        (0..24).collect::<Vec<_>>()
    );
    let empty = Tensor::from_vec(Vec::<f32>::new(), &[0, 5]);
    assert_eq!(empty.reshape([-1, 5]).dims(), &[0, 5]);
    for (bad, what) in [
        (vec![-1isize, -1], "one of them may be -1"),
        (vec![5, -1], "whole -1"),
        (vec![-2, 12], "at least 0"),
    ] {
        let e = x.try_reshape(&bad).unwrap_err().to_string();
        assert!(
            e.contains("reshape") && e.contains("[2, 3, 4]") && e.contains(what),
            "{bad:?}: {e}"
        );
    }
    assert!(
        empty.try_reshape([0, -1]).is_err(),
        "0 elements do not determine a -1 beside a 0"
    );
}

#[test]
fn display_prints_values_like_pytorch_with_shape_dtype_and_device() {
    let s = |t: &Tensor| t.to_string();
    assert_eq!(
        s(&Tensor::from_vec(vec![1i64, -20, 3], &[3])),
        "tensor([  1, -20,   3], shape=[3], dtype=i64, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::from_vec(vec![1.0f32, 2.0, 30.0, 4.0], &[2, 2])),
        "tensor([[ 1.,  2.],\n        [30.,  4.]], shape=[2, 2], dtype=f32, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::from_vec(vec![true, false], &[2])),
        "tensor([ true, false], shape=[2], dtype=bool, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::full(&[], 0.5f32)),
        "tensor(0.5000, shape=[], dtype=f32, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::from_vec(vec![f32::NAN, f32::INFINITY, 1.5], &[3]).cast(DType::BF16)),
        "tensor([   nan,    inf, 1.5000], shape=[3], dtype=bf16, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::from_vec(vec![1e-6f64, 1.0], &[2])),
        "tensor([1.0000e-6,  1.0000e0], shape=[2], dtype=f64, device=cpu)"
    );
    assert_eq!(
        s(&Tensor::from_vec(Vec::<f32>::new(), &[0, 3])),
        "tensor([], shape=[0, 3], dtype=f32, device=cpu)"
    );
    // Rank 3: a blank line between the blocks.
    let x = Tensor::from_vec((0..8).collect::<Vec<i32>>(), &[2, 2, 2]);
    assert_eq!(
        s(&x),
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]], shape=[2, 2, 2], dtype=i32, device=cpu)"
    );
    // More than 1000 elements: three at each end of every long axis.
    let big = Tensor::from_vec((0..40 * 50).collect::<Vec<i64>>(), &[40, 50]).to_string();
    let rows: Vec<&str> = big.lines().collect();
    assert_eq!(rows.len(), 7, "{big}");
    assert!(
        rows[0].starts_with("tensor([[   0,    1,    2, ...,   47,   48,   49],"),
        "{big}"
    );
    assert_eq!(rows[3].trim(), "...,");
    assert!(
        rows[6].ends_with("1997, 1998, 1999]], shape=[40, 50], dtype=i64, device=cpu)"),
        "{big}"
    );
}

#[test]
fn max_and_min_with_indices_are_one_kernel_and_match_the_reference() {
    use tilefuse::fusion::{plan, FusionOptions};
    use tilefuse::graph::extract;
    // f32 values with ties and a NaN, over each axis of [3, 4].
    let data = [2.0, 7.0, 7.0, -1.0, f32::NAN, 0.5, 3.0, 0.5, -4.0, -4.0, 9.0, 1.0];
    let x = t(&data, &[3, 4]);
    for axis in [0usize, 1] {
        let (outer, inner) = if axis == 1 { (3, 4) } else { (4, 3) };
        let at = |o: usize, i: usize| {
            if axis == 1 {
                data[o * 4 + i] as f64
            } else {
                data[i * 4 + o] as f64
            }
        };
        for max in [true, false] {
            let (v, i) = if max {
                x.max_with_indices(axis as isize, false)
            } else {
                x.min_with_indices(axis as isize, false)
            };
            for o in [FusionOptions::gpu(), FusionOptions::cpu()] {
                let p = plan(&extract(&[v.node(), i.node()]), &o).unwrap();
                assert_eq!(p.kernels.len(), 1, "axis {axis}: {} kernels", p.kernels.len());
            }
            Tensor::realize_all(&[&v, &i]).unwrap();
            let (vs, is) = (f32s(&v), i.to_vec::<i64>().unwrap());
            for o in 0..outer {
                // The f64 reference: the first extreme, NaN counting as it.
                let mut best = 0;
                for k in 1..inner {
                    let (a, b) = (at(o, k), at(o, best));
                    let better = if b.is_nan() {
                        false
                    } else if a.is_nan() {
                        true
                    } else if max {
                        a > b
                    } else {
                        a < b
                    };
                    if better {
                        best = k;
                    }
                }
                assert_eq!(is[o], best as i64, "axis {axis} max {max} point {o}");
                let want = at(o, best);
                assert!(
                    vs[o] as f64 == want || (want.is_nan() && vs[o].is_nan()),
                    "axis {axis} point {o}"
                );
            }
        }
    }
    // Integers, keepdim, and a negative axis.
    let n = Tensor::from_vec(vec![3i32, -2, 3, 8, 8, 0], &[2, 3]);
    let (v, i) = n.max_with_indices(-1, true);
    assert_eq!((v.dims(), i.dims()), ([2, 1].as_slice(), [2, 1].as_slice()));
    assert_eq!(v.to_vec::<i32>().unwrap(), [3, 8]);
    assert_eq!(i.to_vec::<i64>().unwrap(), [0, 0]);
    // Misuse names the op.
    let e = x.try_max_with_indices(2, false).unwrap_err().to_string();
    assert!(e.contains("max_with_indices"), "{e}");
    let e = Tensor::zeros(&[0, 2], DType::F32)
        .try_min_with_indices(0, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("min_with_indices") && e.contains("empty"), "{e}");
}
