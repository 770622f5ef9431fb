//! Misuse is reported at the op: the panicking form's message and the `try_`
//! form's error both name the op and the shapes (or dtypes) involved.

use tilefuse::{DType, Device, Error, Tensor};

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::from_vec(vec![0.0f32; shape.iter().product()], shape)
}

/// Checks the `Err` of a `try_` form by its message.
fn check_err(r: tilefuse::Result<Tensor>, want: &str) {
    let e = r.expect_err("misuse must be an error");
    assert_eq!(e.to_string(), want);
}

#[test]
#[should_panic(expected = "add: shapes [2, 3] and [4] do not broadcast")]
fn add_of_shapes_that_do_not_broadcast_panics() {
    let _ = &f32s(&[2, 3]) + &f32s(&[4]);
}

#[test]
fn try_add_of_shapes_that_do_not_broadcast_is_an_error() {
    let r = f32s(&[2, 3]).try_add(&f32s(&[4]));
    assert!(
        matches!(&r, Err(Error::ShapeMismatch { op: "add", lhs, rhs }) if lhs.as_slice() == [2, 3] && rhs.as_slice() == [4])
    );
    check_err(r, "add: shapes [2, 3] and [4] do not broadcast");
    check_err(
        f32s(&[3]).try_broadcast_to(&[2, 4]),
        "broadcast_to: shapes [3] and [2, 4] do not broadcast",
    );
    check_err(
        Tensor::try_where(&f32s(&[2]).gt(&f32s(&[2])), &f32s(&[3]), &f32s(&[2])),
        "where: shapes [2] and [3] do not broadcast",
    );
}

#[test]
#[should_panic(expected = "sum: axis 2 is out of range for shape [2, 3]")]
fn sum_over_an_axis_out_of_range_panics() {
    let _ = f32s(&[2, 3]).sum(&[2], true);
}

#[test]
fn axis_out_of_range_is_an_error_for_every_axis_op() {
    let x = f32s(&[2, 3]);
    check_err(x.try_sum(&[-3], false), "sum: axis -3 is out of range for shape [2, 3]");
    check_err(
        x.try_argmax(5, false),
        "argmax: axis 5 is out of range for shape [2, 3]",
    );
    check_err(
        x.try_transpose(0, 2),
        "transpose: axis 2 is out of range for shape [2, 3]",
    );
    check_err(x.try_unsqueeze(4), "unsqueeze: axis 4 is out of range for shape [2, 3]");
    check_err(x.try_softmax(2), "softmax: axis 2 is out of range for shape [2, 3]");
}

#[test]
#[should_panic(expected = "reshape: 6 elements cannot be viewed as 8 (shape [2, 3], argument [2, 4])")]
fn reshape_that_changes_the_element_count_panics() {
    let _ = f32s(&[2, 3]).reshape([2, 4]);
}

#[test]
fn invalid_view_arguments_are_errors() {
    let x = f32s(&[2, 3]);
    check_err(
        x.try_reshape([7]),
        "reshape: 6 elements cannot be viewed as 7 (shape [2, 3], argument [7])",
    );
    check_err(
        x.try_permute(&[0, 0]),
        "permute: not a permutation of the 2 axes (shape [2, 3], argument [0, 0])",
    );
    check_err(
        x.try_squeeze(1),
        "squeeze: axis 1 has length 3, not 1 (shape [2, 3], argument [1])",
    );
    check_err(
        x.try_sum(&[1, -1], true),
        "sum: axis 1 is given twice (shape [2, 3], argument [1, -1])",
    );
}

#[test]
#[should_panic(
    expected = "slice: needs 0 <= start <= end <= 3 and step >= 1 on axis 1 (shape [2, 3], argument [1, -1, 2, 1])"
)]
fn slice_with_a_negative_start_panics() {
    let _ = f32s(&[2, 3]).slice(1, -1, 2, 1);
}

#[test]
fn slice_out_of_range_is_an_error() {
    let x = f32s(&[2, 3]);
    check_err(
        x.try_slice(0, 3, 3, 1),
        "slice: needs 0 <= start <= end <= 2 and step >= 1 on axis 0 (shape [2, 3], argument [0, 3, 3, 1])",
    );
    check_err(
        x.try_slice(1, 0, 4, 1),
        "slice: needs 0 <= start <= end <= 3 and step >= 1 on axis 1 (shape [2, 3], argument [1, 0, 4, 1])",
    );
    check_err(
        x.try_narrow(1, 2, 2),
        "narrow: needs 0 <= start <= end <= 3 and step >= 1 on axis 1 (shape [2, 3], argument [1, 2, 2])",
    );
}

#[test]
#[should_panic(expected = "bitand: dtype f32 is not supported (bitwise ops need integers or bools)")]
fn bitwise_op_on_floats_panics() {
    let _ = &f32s(&[2]) & &Tensor::from_vec(vec![1i32, 2], &[2]);
}

#[test]
fn bitwise_ops_on_floats_are_errors() {
    let (f, i) = (f32s(&[2]), Tensor::from_vec(vec![1i32, 2], &[2]));
    check_err(
        i.try_bitor(&f),
        "bitor: dtype f32 is not supported (bitwise ops need integers or bools)",
    );
    check_err(
        f.try_not(),
        "not: dtype f32 is not supported (bitwise ops need integers or bools)",
    );
    let b = i.gt(&i);
    check_err(
        b.try_add(&b),
        "add: dtype bool is not supported (arithmetic needs numbers; cast the bools first)",
    );
    check_err(
        Tensor::try_where(&i, &f, &f),
        "where: dtype i32 is not supported (the condition must be bool)",
    );
}

#[test]
#[should_panic(expected = "mul: operands live on different devices (cpu and cuda:0)")]
fn mixing_devices_panics() {
    let a = f32s(&[2]);
    let _ = &a * &a.to(Device::Cuda(0));
}

#[test]
fn mixing_devices_is_an_error_and_realizing_on_cuda_fails() {
    let a = f32s(&[2]);
    let g = a.to(Device::Cuda(0));
    check_err(
        a.try_sub(&g),
        "sub: operands live on different devices (cpu and cuda:0)",
    );
    assert!(matches!(g.realize(), Err(Error::CudaUnavailable { .. })));
}

#[test]
#[should_panic(expected = "from_vec: 5 elements do not fill shape [2, 3]")]
fn from_vec_with_the_wrong_length_panics() {
    let _ = Tensor::from_vec(vec![0.0f32; 5], &[2, 3]);
}

#[test]
fn wrong_lengths_dtypes_and_empty_selections_are_errors() {
    assert_eq!(
        Tensor::try_from_vec(vec![0u8; 7], &[2, 3]).unwrap_err(),
        Error::LengthMismatch {
            op: "from_vec",
            len: 7,
            shape: [2, 3].into_iter().collect()
        }
    );
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    assert_eq!(
        x.to_vec::<f64>().unwrap_err(),
        Error::DTypeMismatch {
            op: "to_vec",
            lhs: DType::F32,
            rhs: DType::F64
        }
    );
    assert!(matches!(
        x.to_scalar::<f32>(),
        Err(Error::InvalidShape { op: "to_scalar", .. })
    ));
    check_err(
        Tensor::zeros(&[2, 0], DType::F32).try_max(&[1], true),
        "max: axis 1 is empty, so there is nothing to select (shape [2, 0], argument [1])",
    );
    assert!(matches!(
        Tensor::try_rand(&[2], DType::I32, 0),
        Err(Error::UnsupportedDType { op: "rand", .. })
    ));
    assert!(matches!(
        Tensor::try_arange(0i32, 3, 0),
        Err(Error::InvalidShape { op: "arange", .. })
    ));
}

#[test]
#[should_panic(
    expected = "mean: dtype i32 is not supported (shape [2, 3]); it needs a float dtype, so cast first, e.g. `x.cast(DType::F32)`"
)]
fn mean_of_integers_panics() {
    let _ = Tensor::from_vec(vec![1i32; 6], &[2, 3]).mean(&[1], false);
}

#[test]
fn statistics_of_integers_and_bools_are_errors_naming_the_op_dtype_and_shape() {
    let i = Tensor::from_vec(vec![1i32; 6], &[2, 3]);
    let b = i.gt(&Tensor::scalar(0i32));
    let u = Tensor::from_vec(vec![1u8; 4], &[4]);
    assert_eq!(
        i.try_mean(&[1], false).unwrap_err(),
        Error::NeedsFloat {
            op: "mean",
            dtype: DType::I32,
            shape: vec![2, 3]
        }
    );
    let need = |op: &str, dtype: &str, shape: &str| {
        format!("{op}: dtype {dtype} is not supported (shape {shape}); it needs a float dtype, so cast first, e.g. `x.cast(DType::F32)`")
    };
    let cases: [(tilefuse::Result<Tensor>, &str, &str, &str); 12] = [
        (i.try_mean_all(), "mean", "i32", "[2, 3]"),
        (b.try_mean(&[0], true), "mean", "bool", "[2, 3]"),
        (u.try_var_all(), "var", "u8", "[4]"),
        (i.try_var(&[1], false), "var", "i32", "[2, 3]"),
        (b.try_var_with_correction(&[1], false, 0), "var", "bool", "[2, 3]"),
        (i.try_softmax(-1), "softmax", "i32", "[2, 3]"),
        (b.try_log_softmax(0), "log_softmax", "bool", "[2, 3]"),
        (u.try_logsumexp(&[0], false), "logsumexp", "u8", "[4]"),
        (i.try_layer_norm(None, None, 1e-5), "layer_norm", "i32", "[2, 3]"),
        (i.cast(DType::I64).try_rms_norm(None, 1e-6), "rms_norm", "i64", "[2, 3]"),
        (u.cast(DType::U32).try_mean_all(), "mean", "u32", "[4]"),
        (b.try_rms_norm(None, 1e-6), "rms_norm", "bool", "[2, 3]"),
    ];
    for (r, op, dtype, shape) in cases {
        check_err(r, &need(op, dtype, shape));
    }
    // Cast first: the caller chooses the float dtype.
    assert_eq!(i.cast(DType::F32).mean_all().to_scalar::<f32>().unwrap(), 1.0);
}

#[test]
#[should_panic(
    expected = "layer_norm: the weight must have shape [3], the length of the normalized last axis (shape [2, 3], argument [2])"
)]
fn layer_norm_with_a_weight_of_the_wrong_shape_panics() {
    let _ = f32s(&[2, 3]).layer_norm(Some(&f32s(&[2])), None, 1e-5);
}

#[test]
fn compositions_report_errors_under_their_own_name_and_the_callers_shapes() {
    let x = f32s(&[2, 3]);
    let weight = |n: usize, what: &str, shape: &str, arg: &str| {
        format!("{what}: the weight must have shape [{n}], the length of the normalized last axis (shape {shape}, argument {arg})")
    };
    check_err(
        x.try_layer_norm(Some(&f32s(&[2])), None, 1e-5),
        &weight(3, "layer_norm", "[2, 3]", "[2]"),
    );
    // A weight that would broadcast is still not one of shape [n].
    check_err(
        x.try_layer_norm(Some(&f32s(&[1, 3])), None, 1e-5),
        &weight(3, "layer_norm", "[2, 3]", "[1, 3]"),
    );
    check_err(
        x.try_layer_norm(None, Some(&f32s(&[2, 3])), 1e-5),
        "layer_norm: the bias must have shape [3], the length of the normalized last axis (shape [2, 3], argument [2, 3])",
    );
    check_err(
        x.try_layer_norm(Some(&f32s(&[3])), Some(&f32s(&[])), 1e-5),
        "layer_norm: the bias must have shape [3], the length of the normalized last axis (shape [2, 3], argument [])",
    );
    check_err(
        x.try_rms_norm(Some(&f32s(&[4])), 1e-6),
        &weight(3, "rms_norm", "[2, 3]", "[4]"),
    );
    check_err(
        f32s(&[]).try_layer_norm(None, None, 1e-5),
        "layer_norm: axis -1 is out of range for shape []",
    );
    check_err(
        f32s(&[]).try_rms_norm(None, 1e-6),
        "rms_norm: axis -1 is out of range for shape []",
    );
    check_err(
        x.try_layer_norm(Some(&f32s(&[3]).to(Device::Cuda(0))), None, 1e-5),
        "layer_norm: operands live on different devices (cpu and cuda:0)",
    );
    check_err(
        x.try_rms_norm(Some(&f32s(&[3]).to(Device::Cuda(0))), 1e-6),
        "rms_norm: operands live on different devices (cpu and cuda:0)",
    );
    check_err(
        x.try_log_softmax(-3),
        "log_softmax: axis -3 is out of range for shape [2, 3]",
    );
    check_err(
        x.try_logsumexp(&[2], true),
        "logsumexp: axis 2 is out of range for shape [2, 3]",
    );
    check_err(
        x.try_logsumexp(&[1, -1], false),
        "logsumexp: axis 1 is given twice (shape [2, 3], argument [1, -1])",
    );
    check_err(
        x.try_var(&[0, 0], false),
        "var: axis 0 is given twice (shape [2, 3], argument [0, 0])",
    );
    check_err(
        x.try_mean(&[-3], false),
        "mean: axis -3 is out of range for shape [2, 3]",
    );
    // Half inputs are checked the same way, before they are widened to f32.
    let h = x.cast(DType::F16);
    check_err(h.try_softmax(2), "softmax: axis 2 is out of range for shape [2, 3]");
    check_err(h.try_mean(&[4], true), "mean: axis 4 is out of range for shape [2, 3]");
    check_err(
        h.try_layer_norm(Some(&f32s(&[2]).cast(DType::F16)), None, 1e-5),
        &weight(3, "layer_norm", "[2, 3]", "[2]"),
    );
}

/// The line of the panic `f` makes, seen by a panic hook that records the
/// location on the panicking thread (tests run on several threads).
fn panic_location(f: impl FnOnce() + std::panic::UnwindSafe) -> (String, u32) {
    use std::cell::RefCell;
    thread_local!(static LAST: RefCell<Option<(String, u32)>> = const { RefCell::new(None) });
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let loc = info.location().map(|l| (l.file().to_string(), l.line()));
            LAST.with(|last| *last.borrow_mut() = loc);
            previous(info);
        }));
    });
    assert!(std::panic::catch_unwind(f).is_err(), "expected a panic");
    LAST.with(|last| last.borrow_mut().take())
        .expect("the hook saw the panic")
}

#[test]
fn panics_point_at_the_callers_line() {
    let x = f32s(&[2, 3]);
    let (file, line) = panic_location(|| drop(x.reshape([5])));
    assert_eq!((file.as_str(), line), (file!(), line!() - 1));
    let (file, line) = panic_location(|| drop(&x + &f32s(&[4])));
    assert_eq!((file.as_str(), line), (file!(), line!() - 1));
    let (file, line) = panic_location(|| drop(x.sum(&[9], false)));
    assert_eq!((file.as_str(), line), (file!(), line!() - 1));
    let (file, line) = panic_location(|| drop(Tensor::zeros(&[1; 7], DType::F32)));
    assert_eq!((file.as_str(), line), (file!(), line!() - 1));
    let (file, line) = panic_location(|| drop(Tensor::full(&[1 << 40, 1 << 40], 1u8)));
    assert_eq!((file.as_str(), line), (file!(), line!() - 1));
}

/// The `Err` of a `try_` form, as a message.
fn err_of(r: tilefuse::Result<Tensor>) -> String {
    r.expect_err("misuse must be an error").to_string()
}

#[test]
fn shapes_too_large_for_memory_are_refused_by_every_constructor() {
    let square = [1usize << 32, 1 << 32];
    let too_large = |op: &str, shape: &str| {
        format!(
            "{op}: shape {shape} has more elements than a tensor can hold (at most 1152921504606846975, \
             so that their size at 8 bytes each fits in an isize)"
        )
    };
    let sq = "[4294967296, 4294967296]";
    // An unchecked product wraps to 0 and accepted the empty vector.
    assert_eq!(
        err_of(Tensor::try_from_vec(Vec::<f32>::new(), &square)),
        too_large("from_vec", sq)
    );
    assert_eq!(
        err_of(Tensor::try_from_slice(&[1i32, 2, 3, 4], &[(1 << 62) + 1, 4])),
        too_large("from_slice", "[4611686018427387905, 4]")
    );
    assert_eq!(err_of(Tensor::try_zeros(&square, DType::F32)), too_large("zeros", sq));
    assert_eq!(err_of(Tensor::try_ones(&square, DType::U8)), too_large("ones", sq));
    assert_eq!(err_of(Tensor::try_full(&square, 1.5f64)), too_large("full", sq));
    let one = tilefuse::Scalar::Int(1, DType::I32);
    assert_eq!(
        err_of(Tensor::try_full_scalar(&square, one, DType::I32)),
        too_large("full_scalar", sq)
    );
    assert_eq!(err_of(Tensor::try_rand(&square, DType::F32, 1)), too_large("rand", sq));
    assert_eq!(
        err_of(Tensor::try_randn(&square, DType::F32, 1)),
        too_large("randn", sq)
    );
    // An empty axis does not make room for the others.
    let e = Tensor::try_zeros(&[0, 1 << 40, 1 << 40], DType::F32).unwrap_err();
    assert!(matches!(&e, Error::ShapeTooLarge { op: "zeros", shape, .. } if shape.as_slice() == [0, 1 << 40, 1 << 40]));
    // The largest shape a tensor can have is fine while it stays lazy.
    let most = Tensor::zeros(&[tilefuse::shape::MAX_NUMEL], DType::F64);
    assert_eq!(most.numel(), tilefuse::shape::MAX_NUMEL);
}

#[test]
#[should_panic(expected = "ones: shape [1099511627776, 1099511627776] has more elements than a tensor can hold")]
fn ones_of_a_shape_too_large_panics() {
    // Once summed to 0.0: the element count wrapped around.
    let _ = Tensor::ones(&[1 << 40, 1 << 40], DType::F32).sum_all();
}

#[test]
fn ops_that_make_a_shape_too_large_are_errors() {
    let x = f32s(&[4]);
    let wide = Tensor::zeros(&[1 << 40, 1], DType::F32);
    let tall = Tensor::zeros(&[1, 1 << 40], DType::F32);
    let big = "[1099511627776, 1099511627776]";
    let too_large = |op: &str, rest: &str| {
        format!(
            "{op}: shape {big}{rest} has more elements than a tensor can hold (at most 1152921504606846975, \
             so that their size at 8 bytes each fits in an isize)"
        )
    };
    let r = wide.try_add(&tall);
    assert!(matches!(
        &r,
        Err(Error::ShapeTooLarge { op: "add", shape, operands, .. })
            if shape.as_slice() == [1 << 40, 1 << 40] && operands.len() == 2
    ));
    let of = " (the broadcast of [1099511627776, 1] and [1, 1099511627776])";
    assert_eq!(err_of(r), too_large("add", of));
    assert_eq!(err_of(wide.try_lt(&tall)), too_large("lt", of));
    let cond = Tensor::zeros(&[1 << 40, 1], DType::Bool);
    assert_eq!(err_of(Tensor::try_where(&cond, &tall, &tall)), too_large("where", of));
    assert_eq!(
        err_of(wide.try_broadcast_to(&[1 << 40, 1 << 40])),
        too_large("broadcast_to", "")
    );
    assert_eq!(err_of(tall.try_expand(&[1 << 40, 1 << 40])), too_large("expand", ""));
    assert_eq!(err_of(x.try_reshape([1usize << 40, 1 << 40])), too_large("reshape", ""));
    // Bounds past isize::MAX are out of range, not wrapped.
    check_err(
        x.try_narrow(0, 1 << 62, 1),
        "narrow: needs 0 <= start <= end <= 4 and step >= 1 on axis 0 (shape [4], argument [0, 4611686018427387904, 1])",
    );
    check_err(
        x.try_narrow(0, usize::MAX, 2),
        "narrow: needs 0 <= start <= end <= 4 and step >= 1 on axis 0 \
         (shape [4], argument [0, 9223372036854775807, 2])",
    );
}

#[test]
fn ranks_above_max_rank_are_refused_at_the_op() {
    assert_eq!(tilefuse::MAX_RANK, 6);
    let seven = [1usize; 7];
    let msg = |op: &str, shape: &str, rank: usize| {
        format!("{op}: shape {shape} has {rank} axes, more than the 6 a tensor can have")
    };
    let ones7 = "[1, 1, 1, 1, 1, 1, 1]";
    let e = Tensor::try_from_vec(vec![1.0f32], &seven).unwrap_err();
    assert_eq!(
        e,
        Error::RankTooLarge {
            op: "from_vec",
            shape: seven.to_vec(),
            max: 6
        }
    );
    assert_eq!(
        err_of(Tensor::try_zeros(&[2; 8], DType::F32)),
        msg("zeros", "[2, 2, 2, 2, 2, 2, 2, 2]", 8)
    );
    assert_eq!(err_of(Tensor::try_ones(&seven, DType::F32)), msg("ones", ones7, 7));
    assert_eq!(err_of(Tensor::try_full(&seven, 2i64)), msg("full", ones7, 7));
    assert_eq!(err_of(Tensor::try_rand(&seven, DType::F32, 0)), msg("rand", ones7, 7));
    assert_eq!(err_of(Tensor::try_randn(&seven, DType::F32, 0)), msg("randn", ones7, 7));
    let six = f32s(&[1, 2, 1, 3, 1, 2]);
    assert_eq!(
        err_of(six.try_reshape([1, 1, 2, 1, 3, 1, 2])),
        msg("reshape", "[1, 1, 2, 1, 3, 1, 2]", 7)
    );
    assert_eq!(
        err_of(six.try_unsqueeze(0)),
        msg("unsqueeze", "[1, 1, 2, 1, 3, 1, 2]", 7)
    );
    assert_eq!(
        err_of(six.try_unsqueeze(-1)),
        msg("unsqueeze", "[1, 2, 1, 3, 1, 2, 1]", 7)
    );
    let eight = [1, 1, 1, 2, 1, 3, 1, 2];
    let eight_s = "[1, 1, 1, 2, 1, 3, 1, 2]";
    assert_eq!(err_of(six.try_broadcast_to(&eight)), msg("broadcast_to", eight_s, 8));
    assert_eq!(err_of(six.try_expand(&eight)), msg("expand", eight_s, 8));
    // No rank-8 operand can be made, so a rank-8 broadcast-add is refused
    // where its operand would be, never at realize.
    assert!(Tensor::try_zeros(&eight, DType::F32).is_err());
    assert!(f32s(&[2]).try_reshape([1, 1, 1, 1, 1, 1, 1, 2]).is_err());
}

#[test]
#[should_panic(expected = "zeros: shape [1, 1, 1, 1, 1, 1, 1] has 7 axes, more than the 6 a tensor can have")]
fn zeros_of_rank_seven_panics() {
    let _ = Tensor::zeros(&[1; 7], DType::F32) + 1.0;
}

#[test]
fn rank_six_tensors_run_through_every_kind_of_kernel() {
    // The largest rank a tensor can have fuses and runs: a broadcast, an
    // expand, row and column reductions, a full reduction, a permuted softmax.
    let dims = [2usize, 1, 3, 2, 1, 4];
    let xs: Vec<f32> = (0..48).map(|i| (i as f32 * 0.37).sin()).collect();
    let bias = [0.5f32, -1.0, 2.0, 0.25];
    let x = Tensor::from_vec(xs.clone(), &dims);
    let y = (&x + &Tensor::from_vec(bias.to_vec(), &[4])).expand(&[2, 5, 3, 2, 1, 4]);
    // y[i0, i1, i2, i3, 0, i5] for any i1.
    let at = |i0: usize, i2: usize, i3: usize, i5: usize| xs[((i0 * 3 + i2) * 2 + i3) * 4 + i5] + bias[i5];
    let close = |g: f32, w: f32| (g - w).abs() <= 1e-5 * w.abs().max(1.0);
    let total: f32 = y.sum_all().to_scalar().unwrap();
    let mut want = 0.0f32;
    for (i0, i2, i3, i5) in (0..48).map(|i| (i / 24, i / 8 % 3, i / 4 % 2, i % 4)) {
        want += 5.0 * at(i0, i2, i3, i5);
    }
    assert!(close(total, want), "{total} against {want}");
    // Rows: shape [2, 5, 3, 2, 1]; (1, 2, 1, 1, 0) is element ((1*5+2)*3+1)*2+1.
    let rows: Vec<f32> = y.sum(&[-1], false).to_vec().unwrap();
    assert_eq!(rows.len(), 60);
    let row: f32 = (0..4).map(|i5| at(1, 1, 1, i5)).sum();
    assert!(close(rows[((5 + 2) * 3 + 1) * 2 + 1], row));
    // Columns: shape [3, 2, 1, 4]; (2, 1, 0, 3) is element (2*2+1)*4+3.
    let cols: Vec<f32> = y.sum(&[0, 1], false).to_vec().unwrap();
    assert!(close(
        cols[(2 * 2 + 1) * 4 + 3],
        5.0 * (at(0, 2, 1, 3) + at(1, 2, 1, 3))
    ));
    // Softmax over the first axis of shape [4, 1, 2, 3, 5, 2]: a stride of 60.
    let p: Vec<f32> = y.permute(&[5, 4, 3, 2, 1, 0]).softmax(0).to_vec().unwrap();
    for start in [0, 7, 59] {
        let sum: f32 = (0..4).map(|k| p[start + k * 60]).sum();
        assert!(close(sum, 1.0), "softmax over axis 0 sums to {sum}");
    }
}

#[test]
fn arange_with_arguments_that_are_not_finite_or_too_many_is_an_error() {
    let bad = |r: tilefuse::Result<Tensor>, want: &str| {
        let e = r.expect_err("misuse must be an error");
        assert!(matches!(e, Error::InvalidShape { op: "arange", .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("arange: {want} (shape [], argument [])"));
    };
    let finite = "the start and the end must be finite";
    bad(
        Tensor::try_arange(0.0, f64::NAN, 1.0),
        &format!("start 0.0:f64, end NaN:f64, step 1.0:f64: {finite}"),
    );
    bad(
        Tensor::try_arange(0.0f32, f32::INFINITY, 1.0),
        &format!("start 0.0:f32, end inf:f32, step 1.0:f32: {finite}"),
    );
    bad(
        Tensor::try_arange(f64::NEG_INFINITY, 0.0, 1.0),
        &format!("start -inf:f64, end 0.0:f64, step 1.0:f64: {finite}"),
    );
    bad(
        Tensor::try_arange(f64::NAN, 0.0, -1.0),
        &format!("start NaN:f64, end 0.0:f64, step -1.0:f64: {finite}"),
    );
    bad(
        Tensor::try_arange(0.0, 1.0, f64::NAN),
        "start 0.0:f64, end 1.0:f64, step NaN:f64: the step must be finite and not zero",
    );
    bad(
        Tensor::try_arange(0i32, 3, 0),
        "start 0:i32, end 3:i32, step 0:i32: the step must not be zero",
    );
    let most = "more than a tensor can hold (1152921504606846975)";
    bad(
        Tensor::try_arange(0.0, 1e30, 1.0),
        &format!("start 0.0:f64, end 1e30:f64, step 1.0:f64: 1e30 elements are {most}"),
    );
    // An end minus start that overflows to infinity.
    bad(
        Tensor::try_arange(-f64::MAX, f64::MAX, 1e300),
        &format!(
            "start -1.7976931348623157e308:f64, end 1.7976931348623157e308:f64, step 1e300:f64: inf elements are {most}"
        ),
    );
    bad(
        Tensor::try_arange(i64::MIN, i64::MAX, 1),
        &format!("start -9223372036854775808:i64, end 9223372036854775807:i64, step 1:i64: 18446744073709551615 elements are {most}"),
    );
    // Empty and ordinary ranges are still fine.
    assert_eq!(Tensor::arange(3.0f64, 1.0, 1.0).numel(), 0);
    assert_eq!(
        Tensor::arange(0.5f32, 2.0, 0.5).to_vec::<f32>().unwrap(),
        [0.5, 1.0, 1.5]
    );
}

#[test]
#[should_panic(expected = "arange: start 0.0:f64, end NaN:f64, step 1.0:f64: the start and the end must be finite")]
fn arange_to_nan_panics() {
    let _ = Tensor::arange(0.0, f64::NAN, 1.0);
}
