//! Differential fuzzing of fusion: random graphs run fused on the CPU
//! executor and compared with the reference evaluator.
//!
//! Each graph is generated from a seed by `common::random_graph`: up to
//! about 30 ops mixing unary and binary elementwise ops, comparisons and
//! `where`, casts, broadcasts, views (permute, slice, expand, reshape) and
//! reductions, over every dtype, with shapes that include 1, primes, ragged
//! tile edges and empty axes.
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

use common::{compare_with, random_graph, run_plan, tolerance};
use tilefuse::fusion::{explain, plan};
use tilefuse::graph::{reference, Subgraph};
use tilefuse::storage::HostBuffer;

/// Generates graph number `seed` and checks it; `Err` explains a failure.
fn check(seed: u64) -> Result<(), String> {
    let g = random_graph::graph(seed);
    let outputs = &g.outputs;
    if std::env::var_os("TILEFUSE_FUZZ_VERBOSE").is_some_and(|v| v == "3") {
        for (i, n) in g.nodes.iter().enumerate() {
            println!(
                "{i}: {} {} {:?} <- {:?}",
                n.op.name(),
                n.dtype,
                n.shape,
                n.inputs.as_slice()
            );
        }
        println!("outputs {outputs:?}");
    }
    let want = reference::evaluate(&g).map_err(|e| format!("the reference rejects the graph: {e}"))?;
    let every = Subgraph {
        nodes: g.nodes.clone(),
        outputs: (0..g.nodes.len()).collect(),
    };
    let all = reference::evaluate(&every).map_err(|e| format!("the reference rejects the graph: {e}"))?;
    let opts = random_graph::options(seed);
    let describe = || format!("{}\n{g:#?}", explain(&g, &opts).unwrap_or_default());
    let p = plan(&g, &opts).map_err(|e| format!("plan failed: {e}\n{g:#?}"))?;
    if std::env::var_os("TILEFUSE_FUZZ_VERBOSE").is_some_and(|v| v == "2") {
        let numel: usize = g.nodes.iter().map(|n| n.shape.numel()).sum();
        println!(
            "seed {seed}: {} nodes, {} elements, {} kernels",
            g.nodes.len(),
            numel,
            p.kernels.len()
        );
    }
    let got = run_plan(&g, &p).map_err(|e| format!("run failed: {e}\n{}", describe()))?;
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        let (tol, scale) = chain_tolerance(&g, &all, outputs[o]);
        compare_with(a, b, tol, scale).map_err(|e| format!("output {o} (node {}): {e}\n{}", outputs[o], describe()))?;
    }
    Ok(())
}

/// The tolerance and scale of node `o`: the loosest tolerance of its own
/// dtype and every float dtype it was computed through (a value computed in
/// f16 and cast to f64 keeps the f16 path's difference), and the largest
/// finite magnitude among those nodes' reference values (rounding errors of
/// intermediates survive cancellation at their own scale).
fn chain_tolerance(g: &Subgraph, all: &[HostBuffer], o: usize) -> (f64, f64) {
    let mut seen = vec![false; g.nodes.len()];
    let mut stack = vec![o];
    let mut tol = tolerance(g.nodes[o].dtype);
    let mut scale = 1.0f64;
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n], true) {
            continue;
        }
        if g.nodes[o].dtype.is_float() {
            tol = tol.max(tolerance(g.nodes[n].dtype));
            if g.nodes[n].dtype.is_float() {
                let v = &all[n];
                scale = (0..v.len())
                    .map(|i| v.get(i).to_f64().abs())
                    .filter(|x| x.is_finite())
                    .fold(scale, f64::max);
            }
        }
        stack.extend(g.nodes[n].inputs.iter().copied());
    }
    (tol, scale)
}

#[test]
fn fused_graphs_match_the_reference() {
    let seeds = random_graph::seeds();
    let (start, count) = (seeds.start, seeds.end - seeds.start);
    let mut failures = vec![];
    for seed in seeds {
        let result = std::panic::catch_unwind(|| check(seed)).unwrap_or_else(|_| Err("panicked".into()));
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
