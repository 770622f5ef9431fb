//! The recorded graph: CSE, constant folding, the shapes and dtypes of
//! inserted broadcasts and casts, DOT export and long chains.
//!
//! Tests run on several threads sharing the one graph, so they count the
//! nodes a tensor depends on rather than the nodes of the whole graph.

use tilefuse::graph::{BinaryOp, Op, Subgraph};
use tilefuse::{DType, Scalar, Tensor};

fn data(dtype: DType, shape: &[usize]) -> Tensor {
    Tensor::from_vec(vec![1u8; shape.iter().product()], shape).cast(dtype)
}

/// The names of the ops of a subgraph, in its topological order.
fn op_names(sub: &Subgraph) -> Vec<String> {
    sub.nodes.iter().map(|n| n.op.name()).collect()
}

#[test]
fn the_same_product_written_twice_is_one_node() {
    let a = data(DType::F32, &[4]);
    let b = data(DType::F32, &[4]);
    let p = &a * &b;
    let q = &a * &b;
    assert_eq!(p.node(), q.node());
    let s = &p + &q;
    // Each operand is u8 data and a cast; then one product and the sum.
    assert_eq!(op_names(&s.subgraph()), ["data", "cast", "data", "cast", "mul", "add"]);
    assert_eq!(s.subgraph_len(), 6);
}

#[test]
fn constants_fold_into_constants() {
    let c = Tensor::full(&[2, 3], 2.0f32) * 3.0 + 1.0;
    let sub = c.subgraph();
    assert_eq!(sub.nodes.len(), 1);
    assert_eq!(sub.nodes[0].op, Op::Full(Scalar::Float(7.0, DType::F32)));
    let wide = Tensor::full(&[3], 1i32).broadcast_to(&[2, 3]).reshape([6]);
    assert_eq!(wide.subgraph_len(), 1);
    assert_eq!(wide.subgraph().nodes[0].op, Op::Full(Scalar::Int(1, DType::I32)));
}

#[test]
fn binary_nodes_get_equal_shapes_and_dtypes() {
    let a = data(DType::I32, &[2, 3]);
    let b = data(DType::F16, &[3]);
    let c = &a + &b;
    assert_eq!((c.dims(), c.dtype()), (&[2, 3][..], DType::F16));
    let sub = c.subgraph();
    let add = &sub.nodes[sub.outputs[0]];
    assert_eq!(add.op, Op::Binary(BinaryOp::Add));
    for &i in &add.inputs {
        assert_eq!(
            (sub.nodes[i].shape.dims(), sub.nodes[i].dtype),
            (&[2, 3][..], DType::F16)
        );
    }
    // b is lifted to rank 2 by a reshape, then expanded.
    let names = op_names(&sub);
    let expand = names.iter().position(|n| n == "expand").expect("an expand");
    assert_eq!(names[expand - 1], "reshape");
    assert_eq!(sub.nodes[expand - 1].shape.dims(), &[1, 3]);
}

#[test]
fn binary_ops_follow_the_promotion_table() {
    for a in DType::ALL {
        for b in DType::ALL {
            if a == DType::Bool && b == DType::Bool {
                continue;
            }
            let c = data(a, &[2]) + data(b, &[2]);
            assert_eq!(c.dtype(), a.promote(b), "{a} + {b}");
            let m = data(a, &[2]).maximum(&data(b, &[2]));
            assert_eq!(m.dtype(), a.promote(b), "maximum({a}, {b})");
            assert_eq!(data(a, &[2]).lt(&data(b, &[2])).dtype(), DType::Bool);
        }
    }
}

#[test]
fn scalars_take_the_tensors_dtype_unless_their_kind_is_higher() {
    let check = |t: Tensor, want: DType| assert_eq!(t.dtype(), want);
    check(data(DType::F16, &[2]) * 2.0, DType::F16);
    check(data(DType::BF16, &[2]) + 1, DType::BF16);
    check(data(DType::I32, &[2]) * 2.5, DType::F32);
    check(data(DType::U8, &[2]) + 1i64, DType::U8);
    check(data(DType::Bool, &[2]) + 1, DType::I64);
    check(data(DType::Bool, &[2]) * 1.5f32, DType::F32);
    check(2.0 * data(DType::F64, &[2]), DType::F64);
    check(1.0f32 - data(DType::I64, &[2]), DType::F32);
    check(data(DType::I32, &[2]).exp(), DType::F32);
    check(data(DType::U8, &[2]).powf(2.0), DType::F32);
    check(data(DType::I32, &[2]).floor(), DType::I32);
}

#[test]
fn reductions_keep_axes_in_the_graph_and_reshape_after() {
    let x = data(DType::I32, &[2, 3, 4]);
    let s = x.sum(&[1, -1], false);
    assert_eq!((s.dims(), s.dtype()), (&[2][..], DType::I64));
    let sub = s.subgraph();
    let names = op_names(&sub);
    assert_eq!(&names[names.len() - 2..], ["reduce.sum[1, 2]", "reshape"]);
    assert_eq!(sub.nodes[sub.nodes.len() - 2].shape.dims(), &[2, 1, 1]);
    assert_eq!(x.sum(&[1], true).dims(), &[2, 1, 4]);
    assert_eq!(x.sum_all().dims(), &[] as &[usize]);
    assert_eq!(data(DType::F16, &[3]).sum_all().dtype(), DType::F16);
    assert_eq!(data(DType::F16, &[3]).mean_all().dtype(), DType::F16);
    assert!(
        data(DType::U8, &[3]).try_mean_all().is_err(),
        "integer means are refused"
    );
    assert_eq!(x.argmax(-1, false).dtype(), DType::I64);
    assert_eq!(x.argmax(-1, false).dims(), &[2, 3]);
    assert_eq!(x.max(&[0], false).dtype(), DType::I32);
}

#[test]
fn views_have_the_expected_shapes() {
    let x = data(DType::F32, &[2, 3, 4]);
    assert_eq!(x.permute(&[2, 0, 1]).dims(), &[4, 2, 3]);
    assert_eq!(x.transpose(0, -1).dims(), &[4, 3, 2]);
    assert_eq!(x.slice(2, 1, 4, 2).dims(), &[2, 3, 2]);
    assert_eq!(x.narrow(1, 1, 2).dims(), &[2, 2, 4]);
    assert_eq!(x.unsqueeze(-1).dims(), &[2, 3, 4, 1]);
    assert_eq!(x.unsqueeze(0).squeeze(0).node(), x.node());
    assert_eq!(
        x.reshape([6, 4]).reshape([24]).subgraph_len(),
        x.flatten().subgraph_len()
    );
    assert_eq!(x.contiguous().node(), x.node());
    assert_eq!(x.slice(0, 0, 2, 1).node(), x.node());
    assert_eq!(x.slice(1, 3, 3, 1).dims(), &[2, 0, 4]);
}

#[test]
fn dot_export_labels_op_shape_and_dtype() {
    let a = data(DType::F32, &[2, 3]);
    let dot = (&a * 2.0).tanh().sum(&[1], true).to_dot();
    assert!(dot.starts_with("digraph tilefuse {"), "{dot}");
    assert!(dot.contains("tanh\\n[2, 3] f32"), "{dot}");
    assert!(dot.contains("reduce.sum[1]\\n[2, 1] f32"), "{dot}");
    assert!(dot.contains("full(2.0:f32)\\n[2, 3] f32"), "{dot}");
    assert_eq!(dot.matches(" -> ").count(), 5);
}

#[test]
fn a_million_node_chain_records_without_running_and_drops() {
    let x = data(DType::F32, &[1]);
    let mut t = x.clone();
    for _ in 0..1_000_000 {
        t = &t + 1.0;
    }
    assert!(!t.is_realized());
    // The chain: data, cast, the shared constant and a million adds.
    assert_eq!(t.subgraph_len(), 1_000_003);
    drop(t);
    assert_eq!(x.subgraph_len(), 2);
}

#[test]
fn tensors_are_send_and_sync_and_combine_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
    let a = data(DType::F32, &[3]);
    let b = std::thread::spawn({
        let a = a.clone();
        move || &a * &a
    })
    .join()
    .unwrap();
    assert_eq!(b.node(), (&a * &a).node());
}
