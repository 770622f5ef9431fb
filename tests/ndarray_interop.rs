//! `Tensor::from_ndarray` / `to_ndarray` and the `From` impls (feature
//! `ndarray`): every layout ndarray makes comes in with its values in
//! logical order, dense layouts as a view of one copy, and shaped results
//! come out; misuse is an error naming the op.
#![cfg(feature = "ndarray")]

use half::{bf16, f16};
use ndarray::{s, Array, ArrayD, Axis, IxDyn, ShapeBuilder};
use tilefuse::graph::extract;
use tilefuse::{DType, Error, Tensor};

/// The values `0, 1, ...` as f32 in an array of `shape` (row-major).
fn iota(shape: &[usize]) -> ArrayD<f32> {
    let n = shape.iter().product::<usize>();
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f32).collect()).unwrap()
}

/// The array's values in logical (row-major) order.
fn logical<E: Copy>(a: &ndarray::ArrayViewD<'_, E>) -> Vec<E> {
    a.iter().copied().collect()
}

/// The ops of the graph behind `t`, in order.
fn ops(t: &Tensor) -> Vec<String> {
    extract(&[t.node()]).nodes.iter().map(|n| n.op.name()).collect()
}

#[test]
fn row_major_arrays_come_in_as_data_and_go_out_shaped() {
    let a = iota(&[3, 4, 5]);
    let t = Tensor::from_ndarray(&a);
    assert_eq!(t.dims(), [3, 4, 5]);
    assert_eq!(t.dtype(), DType::F32);
    assert_eq!(ops(&t), ["data"]);
    assert_eq!(t.to_ndarray::<f32>().unwrap(), a);
}

#[test]
fn dense_layouts_in_any_axis_order_come_in_as_a_view_of_one_copy() {
    // Column-major, a transposed view, and a permutation of three axes.
    let f = Array::from_shape_vec((4, 6).f(), (0..24).map(|i| i as f32).collect()).unwrap();
    let c = Array::from_shape_vec((4, 6), (0..24).map(|i| i as f32).collect()).unwrap();
    let a = iota(&[2, 3, 4]);
    let p = a.view().permuted_axes(IxDyn(&[2, 0, 1]));
    let cases: Vec<(&str, ndarray::ArrayViewD<'_, f32>)> = vec![
        ("column-major", f.view().into_dyn()),
        ("transposed", c.t().into_dyn()),
        ("permuted", p.view().into_dyn()),
    ];
    for (what, v) in cases {
        let t = Tensor::from_ndarray(&v);
        assert_eq!(t.dims(), v.shape(), "{what}");
        let ops = ops(&t);
        assert_eq!(ops.len(), 2, "{what}: {ops:?}");
        assert!(ops[0] == "data" && ops[1].starts_with("permute"), "{what}: {ops:?}");
        assert_eq!(t.to_vec::<f32>().unwrap(), logical(&v), "{what}");
        // A kernel reading the view reads the values it shows.
        let doubled = (&t * 2.0f32).to_ndarray::<f32>().unwrap();
        assert_eq!(doubled, v.mapv(|x| x * 2.0), "{what}");
    }
    // The transpose of a column-major array is row-major: no view.
    assert_eq!(ops(&Tensor::from_ndarray(&f.t())), ["data"]);
    // Axes of one element do not make a view.
    let u = iota(&[3, 1, 4]);
    assert_eq!(ops(&Tensor::from_ndarray(&u)), ["data"]);
    assert_eq!(
        ops(&Tensor::from_ndarray(&u.view().permuted_axes(IxDyn(&[1, 0, 2])))),
        ["data"]
    );
}

#[test]
fn other_layouts_are_copied_in_logical_order() {
    let a = iota(&[6, 7]);
    let stepped = a.slice(s![1..;2, ..;3]);
    let reversed = a.slice(s![..;-1, ..]);
    let both = a.slice(s![..;-2, 2..;-1]);
    let column = a.index_axis(Axis(1), 3);
    let row = iota(&[7]);
    let broadcast = row.broadcast((5, 7)).unwrap();
    let cases: Vec<(&str, ndarray::ArrayViewD<'_, f32>)> = vec![
        ("stepped", stepped.into_dyn()),
        ("reversed", reversed.into_dyn()),
        ("reversed and stepped", both.into_dyn()),
        ("one column", column.into_dyn()),
        ("broadcast", broadcast.into_dyn()),
    ];
    for (what, v) in cases {
        let t = Tensor::from_ndarray(&v);
        assert_eq!(t.dims(), v.shape(), "{what}");
        assert_eq!(t.to_vec::<f32>().unwrap(), logical(&v), "{what}");
    }
}

#[test]
fn every_element_type_round_trips() {
    fn round_trip<E: tilefuse::Element + std::fmt::Debug>(values: Vec<E>) {
        let a = Array::from_shape_vec((2, values.len() / 2).f(), values).unwrap();
        let t = Tensor::from_ndarray(&a);
        assert_eq!(t.dtype(), E::DTYPE);
        let back = t.to_ndarray::<E>().unwrap();
        assert_eq!(back.shape(), a.shape());
        assert!(back.iter().zip(a.iter()).all(|(x, y)| x == y), "{:?}", E::DTYPE);
    }
    round_trip(vec![true, false, false, true]);
    round_trip(vec![1u8, 2, 255, 0]);
    round_trip(vec![-1i32, 2, i32::MIN, i32::MAX]);
    round_trip(vec![-1i64, 2, i64::MIN, i64::MAX]);
    round_trip(vec![f16::from_f32(0.5), f16::MAX, f16::MIN_POSITIVE, f16::NEG_INFINITY]);
    round_trip(vec![bf16::from_f32(-2.5), bf16::MAX, bf16::ONE, bf16::ZERO]);
    round_trip(vec![0.1f64, -1e300, f64::INFINITY, 3.0]);
}

#[test]
fn results_come_out_as_arrays_of_their_shape() {
    let a = iota(&[4, 5]);
    let b = iota(&[5]);
    let t = Tensor::from(&a);
    let y = (&t * &Tensor::from(b.clone())).sum(&[1], true);
    let got = y.to_ndarray::<f32>().unwrap();
    assert_eq!(got.shape(), [4, 1]);
    for i in 0..4 {
        let want: f64 = (0..5).map(|j| (i * 5 + j) as f64 * j as f64).sum();
        assert!(
            (got[[i, 0]] as f64 - want).abs() <= 1e-6 * want.abs().max(1.0),
            "row {i}"
        );
    }
    // Empty arrays and scalars (rank 0).
    let empty = Tensor::from_ndarray(&Array::<f32, _>::zeros((0, 3)));
    assert_eq!(empty.to_ndarray::<f32>().unwrap().shape(), [0, 3]);
    let scalar = Tensor::from_ndarray(&ndarray::arr0(7i64));
    assert_eq!(scalar.dims(), [] as [usize; 0]);
    assert_eq!(scalar.to_ndarray::<i64>().unwrap(), ndarray::arr0(7i64).into_dyn());
}

#[test]
fn misuse_is_an_error_naming_the_op() {
    let seven = ArrayD::<f32>::zeros(IxDyn(&[1; 7]));
    match Tensor::try_from_ndarray(&seven) {
        Err(e @ Error::RankTooLarge { .. }) => assert!(e.to_string().contains("from_ndarray"), "{e}"),
        other => panic!("rank 7: {other:?}"),
    }
    let t = Tensor::from_ndarray(&iota(&[2, 2]));
    let e = t.to_ndarray::<i32>().unwrap_err();
    assert!(e.to_string().contains("to_ndarray"), "{e}");
}
