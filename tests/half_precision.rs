//! f16 and bf16 statistics computed as PyTorch computes them: `mean`, `var`
//! and the compositions (softmax family, norms) accumulate in f32, keep every
//! intermediate in f32 and round once at the output. Each check runs on the
//! CPU executor and in the reference evaluator; `tests/gpu_half_precision.rs`
//! runs the same checks on a GPU. Also the float to integer casts of
//! `Tensor::cast`'s docs.

#[path = "half_precision/cases.rs"]
mod cases;

use half::f16;
use tilefuse::graph::Op;
use tilefuse::{DType, Device, Tensor};

#[test]
fn constant_inputs_give_exact_statistics() {
    cases::constant_inputs_give_exact_statistics(Device::Cpu);
}

#[test]
fn random_means_and_variances_are_within_two_ulps() {
    cases::random_means_and_variances_are_within_two_ulps(Device::Cpu);
}

#[test]
fn random_compositions_are_within_two_ulps() {
    cases::random_compositions_are_within_two_ulps(Device::Cpu);
}

#[test]
fn transcendentals_are_within_an_ulp() {
    cases::transcendentals_are_within_an_ulp(Device::Cpu);
}

#[test]
fn casts_to_integers_follow_the_documented_rule() {
    cases::casts_to_integers_follow_the_documented_rule(Device::Cpu);
}

/// The recorded graph of a half statistic: the input cast to f32, every
/// node after it f32, and one cast back to the input's dtype, at the end.
#[test]
fn half_statistics_record_f32_nodes_and_one_rounding_at_the_end() {
    let x = Tensor::from_vec(vec![f16::ONE; 12], &[3, 4]);
    let w = Tensor::from_vec(vec![f16::ONE; 4], &[4]);
    for (name, y) in [
        ("mean", x.mean(&[1], false)),
        ("var", x.var_all()),
        ("softmax", x.softmax(-1)),
        ("log_softmax", x.log_softmax(0)),
        ("logsumexp", x.logsumexp(&[1], true)),
        ("layer_norm", x.layer_norm(Some(&w), Some(&w), 1e-5)),
        ("rms_norm", x.rms_norm(Some(&w), 1e-6)),
    ] {
        let sub = y.subgraph();
        let last = sub.nodes.last().unwrap();
        assert_eq!(
            (&last.op, last.dtype),
            (&Op::Cast, DType::F16),
            "{name}: one rounding at the end"
        );
        for (i, n) in sub.nodes[..sub.nodes.len() - 1].iter().enumerate() {
            // Only the data, and views of it that every user casts or views
            // again, are f16: the half values are lifted to f32 and stay there.
            let lift = |op: &Op| matches!(op, Op::Cast | Op::Reshape | Op::Expand);
            let lifted = matches!(n.op, Op::Data(_) | Op::Reshape | Op::Expand)
                && sub.nodes.iter().filter(|m| m.inputs.contains(&i)).all(|m| lift(&m.op));
            assert!(
                n.dtype != DType::F16 || lifted,
                "{name}: node {i} ({}) is f16",
                n.op.name()
            );
        }
        let reduces = sub.nodes.iter().filter(|n| matches!(n.op, Op::Reduce { .. }));
        assert!(
            reduces.clone().count() > 0 && reduces.into_iter().all(|n| n.dtype == DType::F32),
            "{name}"
        );
    }
    // Plain reductions keep the half dtype: the kernel accumulates in f32
    // and rounds once by itself.
    assert_eq!(x.sum_all().dtype(), DType::F16);
    assert_eq!(x.max_all().dtype(), DType::F16);
}
