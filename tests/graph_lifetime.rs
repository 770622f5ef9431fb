//! Nodes live exactly as long as a tensor handle reaches them. This file
//! holds one test so that no other test changes the global node count.

use tilefuse::graph::live_nodes;
use tilefuse::{DType, Tensor};

#[test]
fn unreachable_nodes_are_removed_and_realize_frees_inputs() {
    let base = live_nodes();
    let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]);
    let c = (&a + &b).exp();
    assert_eq!(live_nodes(), base + 4);
    let d = c.clone();
    drop(c);
    assert_eq!(live_nodes(), base + 4, "a clone keeps the node");
    drop(a);
    drop(b);
    assert_eq!(live_nodes(), base + 4, "inputs stay while used");
    drop(d);
    assert_eq!(live_nodes(), base, "the chain is freed");

    let big = Tensor::zeros(&[3], DType::F32);
    let small = Tensor::from_vec(vec![1.0f32], &[1]);
    let s = &big + &small;
    assert_eq!(live_nodes(), base + 4); // full, data, expand, add
    drop(small);
    drop(big);
    s.realize().unwrap();
    assert!(s.is_realized());
    assert_eq!(live_nodes(), base + 1, "a realized node lets go of its inputs");
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![1.0; 3]);
}
