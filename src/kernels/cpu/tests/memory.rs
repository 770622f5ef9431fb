//! Loads, stores, masks and padding through partition views.

use super::*;
use crate::error::Error;

/// The reference example: add one to a (2, 32, 3, 4) f32 tensor, one grid
/// point per (warp, lane) holding its 3 x 4 values.
#[test]
fn add_one_to_a_2_32_3_4_tensor() {
    let mut p = Builder::new("test", &[2, 32]);
    let a = p.param("p", DType::F32, 768, Access::Read);
    let b = p.param("p", DType::F32, 768, Access::Write);
    let (va, vb) = (
        dense(&mut p, a, &[2, 32, 3, 4], &[1, 1, 3, 4]),
        dense(&mut p, b, &[2, 32, 3, 4], &[1, 1, 3, 4]),
    );
    let at = [g(0), g(1), c(0), c(0)];
    let x = p.load(va, &at, false);
    let one = p.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[1, 1, 3, 4]);
    let y = p.binary(BinaryOp::Add, x, one);
    p.store(vb, &at, y, false);
    let program = p.finish().unwrap();
    let input: Vec<f32> = (0..768).map(|i| i as f32).collect();
    let mut out = HostBuffer::zeros(DType::F32, 768);
    run(&program, &[&HostBuffer::from_elements(&input)], &mut [&mut out]).unwrap();
    let want: Vec<f32> = input.iter().map(|x| x + 1.0).collect();
    assert_eq!(out.to_vec::<f32>(), want);
}

/// Copies partition `at` of `view` (built by `make`) into a dense output of
/// the tile's shape and returns it.
fn copy_partition<T: crate::Element>(
    input: &HostBuffer,
    make: impl Fn(&mut Builder, ParamId) -> ViewId,
    at: &[IndexExpr],
    masked: bool,
) -> Vec<T> {
    let mut p = Builder::new("test", &[1]);
    let src = p.param("p", input.dtype(), input.len() as u64, Access::Read);
    let view = make(&mut p, src);
    let x = p.load(view, at, masked);
    let shape: Vec<u64> = ty(&p, x).shape.iter().map(|&d| d as u64).collect();
    let n: u64 = shape.iter().product();
    let dst = p.param("p", input.dtype(), n, Access::Write);
    let tile: Vec<u32> = shape.iter().map(|&d| d as u32).collect();
    let out_view = dense(&mut p, dst, &shape, &tile);
    let zeros = vec![c(0); shape.len()];
    p.store(out_view, &zeros, x, false);
    let mut out = HostBuffer::zeros(input.dtype(), n as usize);
    run(&p.finish().unwrap(), &[input], &mut [&mut out]).unwrap();
    out.to_vec()
}

#[test]
fn reference_load_of_partition_1_2() {
    let x: Vec<i32> = (0..32).collect();
    let got: Vec<i32> = copy_partition(
        &HostBuffer::from_elements(&x),
        |p, a| dense(p, a, &[4, 8], &[2, 2]),
        &[c(1), c(2)],
        false,
    );
    assert_eq!(got, vec![20, 21, 28, 29]);
}

#[test]
fn reference_masked_load_with_nan_padding() {
    let x: Vec<f32> = (0..44).map(|i| i as f32).collect();
    let got: Vec<f32> = copy_partition(
        &HostBuffer::from_elements(&x),
        |p, a| p.view_contiguous(a, &[4, 11], &[2, 4], Padding::Nan),
        &[c(0), c(2)],
        true,
    );
    assert_eq!(&got[..3], &[8.0, 9.0, 10.0]);
    assert_eq!(&got[4..7], &[19.0, 20.0, 21.0]);
    assert!(got[3].is_nan() && got[7].is_nan(), "{got:?}");
}

#[test]
fn reference_store_to_partition_1_3() {
    let mut p = Builder::new("test", &[1]);
    let src = p.param("p", DType::I32, 4, Access::Read);
    let dst = p.param("p", DType::I32, 32, Access::ReadWrite);
    let vs = dense(&mut p, src, &[2, 2], &[2, 2]);
    let vd = dense(&mut p, dst, &[4, 8], &[2, 2]);
    let a = p.load(vs, &[c(0), c(0)], false);
    p.store(vd, &[c(1), c(3)], a, false);
    let mut x = HostBuffer::from_elements(&(0..32).collect::<Vec<i32>>());
    run(
        &p.finish().unwrap(),
        &[&HostBuffer::from_elements(&[0, 100, 200, 300])],
        &mut [&mut x],
    )
    .unwrap();
    let mut want: Vec<i32> = (0..32).collect();
    want[22..24].copy_from_slice(&[0, 100]);
    want[30..32].copy_from_slice(&[200, 300]);
    assert_eq!(x.to_vec::<i32>(), want);
}

#[test]
fn strided_permuted_broadcast_and_reversed_views() {
    let x: Vec<f64> = (0..12).map(|i| i as f64).collect();
    let buf = HostBuffer::from_elements(&x);
    // A [3, 4] row-major buffer read transposed: every row strided.
    let t: Vec<f64> = copy_partition(
        &buf,
        |p, a| p.view(a, &[4, 3], &[1, 4], 0, &[4, 3], Padding::Zero),
        &[c(0), c(0)],
        false,
    );
    let want: Vec<f64> = (0..4).flat_map(|j| (0..3).map(move |i| (i * 4 + j) as f64)).collect();
    assert_eq!(t, want);
    // Inner stride 2 from offset 1: the odd elements.
    let odd: Vec<f64> = copy_partition(
        &buf,
        |p, a| p.view(a, &[6], &[2], 1, &[3], Padding::Zero),
        &[c(1)],
        false,
    );
    assert_eq!(odd, vec![7.0, 9.0, 11.0]);
    // A broadcast row (stride 0 on the outer axis) and a broadcast column (inner).
    let rows: Vec<f64> = copy_partition(
        &buf,
        |p, a| p.view(a, &[3, 4], &[0, 1], 4, &[3, 4], Padding::Zero),
        &[c(0), c(0)],
        false,
    );
    assert_eq!(rows, [4.0, 5.0, 6.0, 7.0].repeat(3));
    let cols: Vec<f64> = copy_partition(
        &buf,
        |p, a| p.view(a, &[2, 3], &[4, 0], 0, &[2, 3], Padding::Zero),
        &[c(0), c(0)],
        false,
    );
    assert_eq!(cols, vec![0.0, 0.0, 0.0, 4.0, 4.0, 4.0]);
    // A negative stride walks backwards from the offset.
    let rev: Vec<f64> = copy_partition(
        &buf,
        |p, a| p.view(a, &[12], &[-1], 11, &[4], Padding::Zero),
        &[c(2)],
        false,
    );
    assert_eq!(rev, vec![3.0, 2.0, 1.0, 0.0]);
}

#[test]
fn ragged_masked_loads_give_each_padding() {
    let x: Vec<f32> = (1..=5).map(|i| i as f32).collect();
    let buf = HostBuffer::from_elements(&x);
    for (padding, check) in [
        (Padding::Zero, (|v: f32| v.to_bits() == 0) as fn(f32) -> bool),
        (Padding::NegZero, |v: f32| v.to_bits() == (-0.0f32).to_bits()),
        (Padding::Nan, f32::is_nan),
        (Padding::PosInf, |v: f32| v == f32::INFINITY),
        (Padding::NegInf, |v: f32| v == f32::NEG_INFINITY),
    ] {
        let got: Vec<f32> = copy_partition(&buf, |p, a| p.view_contiguous(a, &[5], &[4], padding), &[c(1)], true);
        assert_eq!(got[0], 5.0, "{padding}");
        assert!(got[1..].iter().all(|&v| check(v)), "{padding}: {got:?}");
    }
}

#[test]
fn ragged_2d_masked_load_and_store_touch_only_the_span() {
    // A [5, 7] input tiled [2, 4]: every partition on the last row or column
    // is ragged. Copy it through masked loads and stores into a [5, 7] output
    // holding a sentinel, then read the padding through an in_bounds mask.
    let mut p = Builder::new("test", &[3, 2]);
    let src = p.param("p", DType::I64, 35, Access::Read);
    let dst = p.param("p", DType::I64, 35, Access::Write);
    let (vs, vd) = (
        dense(&mut p, src, &[5, 7], &[2, 4]),
        dense(&mut p, dst, &[5, 7], &[2, 4]),
    );
    let x = p.load(vs, &[g(0), g(1)], true);
    p.store(vd, &[g(0), g(1)], x, true);
    let x: Vec<i64> = (0..35).map(|i| i * 3 - 7).collect();
    let mut out = HostBuffer::zeros(DType::I64, 35);
    run(&p.finish().unwrap(), &[&HostBuffer::from_elements(&x)], &mut [&mut out]).unwrap();
    assert_eq!(out.to_vec::<i64>(), x);

    let mut p = Builder::new("test", &[1]);
    let src = p.param("p", DType::I64, 35, Access::Read);
    let dst = p.param("p", DType::Bool, 8, Access::Write);
    let vs = dense(&mut p, src, &[5, 7], &[2, 4]);
    let vd = dense(&mut p, dst, &[2, 4], &[2, 4]);
    let mask = p.in_bounds(vs, &[c(2), c(1)]);
    p.store(vd, &[c(0), c(0)], mask, false);
    let mut out = HostBuffer::zeros(DType::Bool, 8);
    run(&p.finish().unwrap(), &[&HostBuffer::from_elements(&x)], &mut [&mut out]).unwrap();
    // Rows 4..6 of 5 and columns 4..8 of 7: only row 4, columns 4..7.
    assert_eq!(out.to_vec::<u8>(), vec![1, 1, 1, 0, 0, 0, 0, 0]);
}

#[test]
fn masked_store_skips_out_of_bounds_elements() {
    let mut p = Builder::new("test", &[2]);
    let src = p.param("p", DType::U32, 8, Access::Read);
    let dst = p.param("p", DType::U32, 6, Access::Write);
    let vs = dense(&mut p, src, &[8], &[4]);
    // The output span covers 5 of the 6 elements; the sixth must keep its value.
    let vd = p.view(dst, &[5], &[1], 0, &[4], Padding::Zero);
    let x = p.load(vs, &[g(0)], false);
    p.store(vd, &[g(0)], x, true);
    let mut out = HostBuffer::from_elements(&[9u32; 6]);
    let input = HostBuffer::from_elements(&[1u32, 2, 3, 4, 5, 6, 7, 8]);
    run(&p.finish().unwrap(), &[&input], &mut [&mut out]).unwrap();
    assert_eq!(out.to_vec::<u32>(), vec![1, 2, 3, 4, 5, 9]);
}

/// A program copying partition 0 of a 5-element view through a masked
/// load into a 4-element output, for the tests below to break.
fn copy_first_partition() -> Program {
    let mut p = Builder::new("test", &[1]);
    let a = p.param("a", DType::F32, 5, Access::Read);
    let o = p.param("o", DType::F32, 4, Access::Write);
    let (va, vo) = (dense(&mut p, a, &[5], &[4]), dense(&mut p, o, &[4], &[4]));
    let v = p.load(va, &[c(0)], true);
    p.store(vo, &[c(0)], v, false);
    p.finish().unwrap()
}

/// The executor's own checks of programs the verifier refuses.
#[test]
fn out_of_bounds_partitions_are_errors_without_the_verifier() {
    let x = HostBuffer::from_elements(&[1.0f32; 5]);
    let mut out = HostBuffer::zeros(DType::F32, 4);
    let with_load = |index: u64, masked: bool| {
        let mut program = copy_first_partition();
        program.body[0] = Inst::Load {
            dst: ValueId(0),
            view: ViewId(0),
            index: [c(index)].into_iter().collect(),
            masked,
        };
        program
    };
    let err = run_unverified(&with_load(1, false), &[&x], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, Error::PartlyOutOfBounds { .. }), "{err}");
    let err = run_unverified(&with_load(2, true), &[&x], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, Error::PartitionOutOfRange { .. }), "{err}");
    // Through `execute`, the verifier refuses them first.
    let err = run(&with_load(1, false), &[&x], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, Error::InvalidProgram { .. }), "{err}");
}

#[test]
fn bad_views_are_errors_without_the_verifier() {
    let x = HostBuffer::from_elements(&[1.0f32; 5]);
    let mut out = HostBuffer::zeros(DType::F32, 4);
    // A view reaching past its buffer.
    let mut program = copy_first_partition();
    program.views[0].strides[0] = 2;
    let err = run_unverified(&program, &[&x], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, Error::SpanOutOfMemory { needed: 9, len: 5, .. }), "{err}");
    // A store through a broadcast axis.
    let mut program = copy_first_partition();
    program.views[1].strides[0] = 0;
    let err = run_unverified(&program, &[&x], &mut [&mut out]).unwrap_err();
    assert!(matches!(err, Error::NotInjective { .. }), "{err}");
    // A loaded tile whose type is not the view's.
    let mut program = copy_first_partition();
    program.values[0].shape[0] = 3;
    let err = run_unverified(&program, &[&x], &mut [&mut out]).unwrap_err();
    assert!(
        matches!(err, Error::InvalidProgram { ref program, .. } if program == "test"),
        "{err}"
    );
}
