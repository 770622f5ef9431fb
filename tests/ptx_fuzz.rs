//! Every program of the differential fuzzer's run, assembled by `ptxas`.

mod common;

use common::ptx_check::Modules;
use common::random_graph;
use std::time::Instant;
use tilefuse::fusion::{plan, FusionOptions};
use tilefuse::kernels::ptx_gen::ptxas::ptxas_for_tests;

#[test]
fn every_fuzzer_program_assembles() {
    let Some(ptxas) = ptxas_for_tests("tests/ptx_fuzz.rs") else { return };
    let t0 = Instant::now();
    let mut modules = Modules::default();
    let mut programs = 0;
    for seed in random_graph::seeds() {
        let g = random_graph::graph(seed);
        let gpu = FusionOptions::gpu();
        let nondet = FusionOptions { deterministic: false, ..gpu };
        let fuzz = random_graph::options(seed);
        let fuzz = FusionOptions { target: gpu.target, max_row_tile: fuzz.max_row_tile.min(gpu.max_row_tile), ..fuzz };
        let mut set = vec![gpu, nondet];
        if !set.contains(&fuzz) { set.push(fuzz); }
        for opts in set {
            let p = plan(&g, &opts).unwrap();
            for k in &p.kernels {
                programs += 1;
                modules.add(&format!("seed {seed} {opts:?}"), &k.program).unwrap();
            }
        }
    }
    let t1 = Instant::now();
    println!("{programs} programs, {} generated, {} distinct, {:?}", modules.generated, modules.len(), t1 - t0);
    println!("{:?}", modules.not_lowered);
    let all = modules.assemble(&ptxas).unwrap();
    println!("assembled {} in {:?}", all.len(), t1.elapsed());
}
