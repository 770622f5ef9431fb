//! Differential fuzzing of fusion: random graphs run fused on the CPU
//! executor and compared with the reference evaluator.
//!
//! The generator lives in `tests/common/fuzzgen.rs`, shared with the GPU
//! fuzzer. Each graph is generated from a seed: up to about 30 ops mixing unary and
//! binary elementwise ops, comparisons and `where`, casts, broadcasts,
//! views (permute, slice, expand, reshape) and reductions, over every dtype,
//! with shapes that include 1, primes, ragged tile edges and empty axes.
//! Every kernel program passes `verify` (checked in `run_plan`).
//!
//! Tolerances are the table of `common::tolerance`: exact for integers and
//! bools, relative 1e-4 for f32, looser for f16/bf16. Ops that turn a small
//! rounding difference into a large one are kept away from computed floats:
//! comparisons, `floor`/`ceil`/`round`/`sign`, float-to-integer casts and
//! arg reductions only take data leaves (which both paths read exactly);
//! divisions divide by `|y| + 1`; `exp`, `sin` and `cos` take `tanh` of
//! their operand, `log` and `sqrt` take `|x| + 1`; products reduce at most 8
//! elements of `tanh` of computed values. f16 overflows at 65504 where the
//! fused path's f32 does not, so f16 products and reductions also take
//! `tanh` of computed operands and f16 sums add at most 64 elements.
//!
//! `TILEFUSE_FUZZ_GRAPHS=N` checks N graphs instead of the default 5,000;
//! `TILEFUSE_FUZZ_SEED=S` starts at another seed.

mod common;

use common::fuzzgen::{check, options, seeds};
use common::run_plan;

#[test]
fn fused_graphs_match_the_reference() {
    let seeds = seeds();
    let (start, count) = (seeds.start, seeds.end - seeds.start);
    let mut failures = vec![];
    for seed in seeds {
        let result = std::panic::catch_unwind(|| check(seed, options(seed), run_plan).map_err(|f| f.to_string()))
            .unwrap_or_else(|_| Err("panicked".into()));
        if let Err(e) = result {
            if std::env::var_os("TILEFUSE_FUZZ_VERBOSE").is_some() {
                println!("seed {seed} failed: {}", e.lines().next().unwrap_or(""));
            }
            failures.push((seed, e));
        }
    }
    println!(
        "fuzz: checked {count} graphs from seed {start}, {} failed",
        failures.len()
    );
    if let Some((seed, e)) = failures.first() {
        let seeds: Vec<u64> = failures.iter().map(|f| f.0).take(20).collect();
        panic!(
            "{} of {count} graphs failed (seeds {seeds:?}); first, seed {seed}:\n{e}",
            failures.len()
        );
    }
}
