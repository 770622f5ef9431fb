//! The GPU plans of graphs on both sides of every threshold the schedule
//! chooser uses, for every dtype (`common/thresholds.rs`), run on the CPU
//! executor against the f64 reference; `tests/gpu_pipelines.rs` runs the
//! same graphs on a GPU.

mod common;

#[test]
fn gpu_plans_on_both_sides_of_every_threshold_match_the_reference() {
    for seed in [1, 2, 3] {
        let seen = common::thresholds::check(seed, &|g, p| common::run_plan(g, p));
        println!("seed {seed}: graphs per plan signature: {seen:?}");
    }
}
