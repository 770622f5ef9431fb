//! The half-precision checks of `tests/half_precision.rs` on a CUDA GPU:
//! f16 and bf16 `mean`, `var`, softmax family and norms computed in f32 and
//! rounded once, against exact values and f64, and the documented float to
//! integer casts, each against the reference evaluator too.
//!
//! Every test needs a CUDA GPU and is ignored otherwise; run them with
//! `cargo test --test gpu_half_precision -- --include-ignored`.

#![cfg(feature = "cuda")]

#[path = "half_precision/cases.rs"]
mod cases;

use tilefuse::Device;

/// CUDA device 0, after checking that it can be used.
fn gpu() -> Device {
    Device::cuda(0).expect("these tests need a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn constant_inputs_give_exact_statistics() {
    cases::constant_inputs_give_exact_statistics(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_means_and_variances_are_within_two_ulps() {
    cases::random_means_and_variances_are_within_two_ulps(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn random_compositions_are_within_two_ulps() {
    cases::random_compositions_are_within_two_ulps(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transcendentals_are_within_an_ulp() {
    cases::transcendentals_are_within_an_ulp(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn casts_to_integers_follow_the_documented_rule() {
    cases::casts_to_integers_follow_the_documented_rule(gpu());
}
