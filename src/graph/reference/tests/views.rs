//! Reshape, permute, expand and slice, alone and chained.

use super::*;

#[test]
fn reshape_and_permute() {
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[1, 2, 3, 4, 5, 6i32]);
    let t = g.view(Op::Permute(axes(&[1, 0])), x, &[3, 2]);
    assert_eq!(g.run::<i32>(t), vec![1, 4, 2, 5, 3, 6]);

    // x[i, 0, k] = 3i + k; axis 0 of the result is axis 2 of x.
    let mut g = Builder::default();
    let x = g.data(&[2, 1, 3], &[0, 1, 2, 3, 4, 5i64]);
    let p = g.view(Op::Permute(axes(&[2, 0, 1])), x, &[3, 2, 1]);
    assert_eq!(g.run::<i64>(p), vec![0, 3, 1, 4, 2, 5]);

    // Reshaping a transposed tensor reads it in its own row-major order.
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[1, 2, 3, 4, 5, 6u8]);
    let t = g.view(Op::Permute(axes(&[1, 0])), x, &[3, 2]);
    let r = g.view(Op::Reshape, t, &[6]);
    assert_eq!(g.run::<u8>(r), vec![1, 4, 2, 5, 3, 6]);

    let mut g = Builder::default();
    let x = g.data(&[1, 1], &[7.5f32]);
    let r = g.view(Op::Reshape, x, &[]);
    assert_eq!(g.run::<f32>(r), vec![7.5]);
}

#[test]
fn expand_repeats_size_one_axes() {
    let mut g = Builder::default();
    let row = g.data(&[1, 3], &[1, 2, 3i32]);
    let rows = g.view(Op::Expand, row, &[2, 3]);
    let col = g.data(&[2, 1], &[10, 20i32]);
    let cols = g.view(Op::Expand, col, &[2, 3]);
    let sum = g.binary(Add, rows, cols);
    let empty = g.view(Op::Expand, row, &[0, 3]);
    let out = g.evaluate(&[rows, cols, sum, empty]).unwrap();
    assert_eq!(out[0].to_vec::<i32>(), vec![1, 2, 3, 1, 2, 3]);
    assert_eq!(out[1].to_vec::<i32>(), vec![10, 10, 10, 20, 20, 20]);
    assert_eq!(out[2].to_vec::<i32>(), vec![11, 12, 13, 21, 22, 23]);
    assert!(out[3].is_empty());
}

#[test]
fn slice_takes_every_step_th_element() {
    let mut g = Builder::default();
    let x = g.data(&[2, 5], &(0..10).collect::<Vec<i32>>());
    let odd = g.view(
        Op::Slice {
            axis: 1,
            start: 1,
            step: 2,
        },
        x,
        &[2, 2],
    );
    let last = g.view(
        Op::Slice {
            axis: 1,
            start: 4,
            step: 3,
        },
        x,
        &[2, 1],
    );
    let row = g.view(
        Op::Slice {
            axis: 0,
            start: 1,
            step: 1,
        },
        x,
        &[1, 5],
    );
    let huge_step = g.view(
        Op::Slice {
            axis: 0,
            start: 1,
            step: usize::MAX,
        },
        x,
        &[1, 5],
    );
    let none = g.view(
        Op::Slice {
            axis: 1,
            start: 5,
            step: 1,
        },
        x,
        &[2, 0],
    );
    let out = g.evaluate(&[odd, last, row, none, huge_step]).unwrap();
    assert_eq!(out[0].to_vec::<i32>(), vec![1, 3, 6, 8]);
    assert_eq!(out[1].to_vec::<i32>(), vec![4, 9]);
    assert_eq!(out[2].to_vec::<i32>(), vec![5, 6, 7, 8, 9]);
    assert!(out[3].is_empty());
    assert_eq!(out[4].to_vec::<i32>(), vec![5, 6, 7, 8, 9]);
}

#[test]
fn chains_of_views_compose() {
    // x = [[0, 1, 2], [3, 4, 5]]; its transpose [[0, 3], [1, 4], [2, 5]];
    // column 1 of that, [[3], [4], [5]]; expanded to 4 columns; transposed back.
    let mut g = Builder::default();
    let x = g.data(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0f64]);
    let t = g.view(Op::Permute(axes(&[1, 0])), x, &[3, 2]);
    let col = g.view(
        Op::Slice {
            axis: 1,
            start: 1,
            step: 1,
        },
        t,
        &[3, 1],
    );
    let wide = g.view(Op::Expand, col, &[3, 4]);
    let back = g.view(Op::Permute(axes(&[1, 0])), wide, &[4, 3]);
    let every_other = g.view(
        Op::Slice {
            axis: 0,
            start: 1,
            step: 2,
        },
        back,
        &[2, 3],
    );
    let flat = g.view(Op::Reshape, every_other, &[6]);
    let total = g.reduce(Sum, wide, &[1], F64);
    let out = g.evaluate(&[wide, flat, total]).unwrap();
    let want: Vec<f64> = [3.0, 4.0, 5.0].iter().flat_map(|&v| [v; 4]).collect();
    assert_eq!(out[0].to_vec::<f64>(), want);
    assert_eq!(out[1].to_vec::<f64>(), vec![3.0, 4.0, 5.0, 3.0, 4.0, 5.0]);
    assert_eq!(out[2].to_vec::<f64>(), vec![12.0, 16.0, 20.0]);
}

#[test]
fn views_reject_inconsistent_shapes() {
    let cases: Vec<(Op, Vec<usize>, &str)> = vec![
        (Op::Reshape, vec![4], "reshape"),
        (Op::Permute(axes(&[0, 0])), vec![2, 2], "permute"),
        (Op::Permute(axes(&[1, 0])), vec![2, 3], "permute"),
        (Op::Permute(axes(&[1])), vec![3], "permute"),
        (Op::Permute(axes(&[1, 0])), vec![3, 2, 1], "permute"),
        (
            Op::Slice {
                axis: 1,
                start: 2,
                step: usize::MAX,
            },
            vec![2, 2],
            "slice",
        ),
        (Op::Expand, vec![4, 3], "expand"),
        (Op::Expand, vec![1, 2, 3], "expand"),
        (
            Op::Slice {
                axis: 1,
                start: 1,
                step: 2,
            },
            vec![2, 2],
            "slice",
        ),
        (
            Op::Slice {
                axis: 0,
                start: 0,
                step: 0,
            },
            vec![1, 3],
            "slice",
        ),
        (
            Op::Slice {
                axis: 2,
                start: 0,
                step: 1,
            },
            vec![2, 3],
            "slice",
        ),
        (
            Op::Slice {
                axis: 1,
                start: 0,
                step: 1,
            },
            vec![1, 2],
            "slice",
        ),
    ];
    for (op, shape, name) in cases {
        let mut g = Builder::default();
        let x = g.data(&[2, 3], &[0i32; 6]);
        let v = g.view(op.clone(), x, &shape);
        let err = g.error(v);
        assert!(
            matches!(err, Error::InvalidShape { op, .. } if op == name),
            "{} to {shape:?}: {err}",
            op.name()
        );
    }
    let mut g = Builder::default();
    let x = g.data(&[2], &[0i32; 2]);
    let v = g.node(Op::Reshape, &[2], I64, &[x]);
    assert!(matches!(
        g.error(v),
        Error::DTypeMismatch {
            op: "reshape",
            lhs: I32,
            rhs: I64
        }
    ));
}
