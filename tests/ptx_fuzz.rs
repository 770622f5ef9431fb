//! Every program of the differential fuzzer's run, generated as PTX for
//! sm_75, sm_80 and sm_90 and assembled by `ptxas -v`; kernels that spill to local
//! memory are listed.
//!
//! The graphs are those of `tests/fuzz.rs` (the same generator and seeds,
//! `TILEFUSE_FUZZ_GRAPHS` and `TILEFUSE_FUZZ_SEED` included). Each graph is
//! planned for the GPU with `FusionOptions::gpu()` and, where the fuzzer
//! plans it differently (small row tiles, non-deterministic reductions), with
//! the fuzzer's options as well, on the GPU target. Identical modules are
//! assembled once. Programs `ptx_gen` does not lower (`UnsupportedDType`;
//! none are known) are counted and printed, grouped by reason; any
//! other generation error fails the test. Skipped cleanly when `ptxas` is
//! absent unless `TILEFUSE_REQUIRE_PTXAS=1`.

mod common;

use common::fuzzgen;
use common::ptx_check::{spilling, summary, Modules};
use std::time::Instant;
use tilefuse::fusion::{plan, FusionOptions};
use tilefuse::kernels::ptx_gen::ptxas::ptxas_for_tests;
use tilefuse::kernels::ptx_vm;

/// The GPU options graph `seed` is planned with: `FusionOptions::gpu()`,
/// and the fuzzer's own options moved to the GPU target where they differ.
fn gpu_options(seed: u64) -> Vec<FusionOptions> {
    let gpu = FusionOptions::gpu();
    let fuzz = fuzzgen::options(seed);
    let fuzz = FusionOptions {
        max_row_tile: fuzz.max_row_tile.min(gpu.max_row_tile),
        deterministic: fuzz.deterministic,
        reread_row_bytes: fuzz.reread_row_bytes.max(gpu.reread_row_bytes),
        two_pass_rows: fuzz.two_pass_rows.min(gpu.two_pass_rows),
        ..gpu
    };
    if fuzz == gpu {
        vec![gpu]
    } else {
        vec![gpu, fuzz]
    }
}

#[test]
fn every_program_of_the_fuzzer_assembles() {
    let Some(ptxas) = ptxas_for_tests("tests/ptx_fuzz.rs") else {
        return;
    };
    let start = Instant::now();
    let seeds = fuzzgen::seeds();
    let (mut graphs, mut programs) = (0, 0);
    let mut modules = Modules::default();
    for seed in seeds.clone() {
        let g = fuzzgen::generate(seed).0;
        graphs += 1;
        for opts in gpu_options(seed) {
            let p = plan(&g, &opts).unwrap_or_else(|e| panic!("seed {seed}: plan failed with {opts:?}: {e}"));
            for k in &p.kernels {
                programs += 1;
                let label = format!("seed {seed} ({opts:?})");
                modules.add(&label, &k.program).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    let generated = start.elapsed();
    let all = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "ptx_fuzz: {graphs} graphs (seeds {}..{}), {programs} programs, {} modules generated, {} distinct",
        seeds.start,
        seeds.end,
        modules.generated,
        modules.len()
    );
    for (reason, n) in &modules.not_lowered {
        println!("ptx_fuzz: not lowered: {n} programs, {reason}");
    }
    println!(
        "ptx_fuzz: {} in {:.1} s ({:.1} s generating, the rest in ptxas)",
        summary(&all),
        start.elapsed().as_secs_f64(),
        generated.as_secs_f64()
    );
    if let Some(a) = all.iter().max_by_key(|a| a.resources.registers) {
        println!("ptx_fuzz: most registers: {a}");
    }
    // Spills are reported, not failed: the suite's own kernels are held to
    // none (tests/ptx_pipelines.rs, tests/ptx.rs).
    let spills = spilling(&all);
    println!(
        "ptx_fuzz: {} of {} kernels spill to local memory",
        spills.len(),
        all.len()
    );
    for a in &spills {
        println!("ptx_fuzz: spills: {a}");
    }
    assert_eq!(all.len(), modules.len(), "every distinct module is assembled");

    // The GPU interpreter: which kernels it can run, and why not the others.
    // Every refusal must be one of the known kinds (a form it lacks, too
    // much shared memory); anything else is a reader bug.
    let (mut runs, mut refused) = (0, std::collections::BTreeMap::<String, usize>::new());
    for (sm, m) in modules.modules() {
        if sm != 90 {
            continue;
        }
        match ptx_vm::assemble(m, 232_448) {
            Ok(code) => {
                // The core module, loaded first, holds every form of the
                // fuzzer's kernels.
                assert!(
                    (code.max_form as usize) < ptx_vm::core_forms(),
                    "{}: form `{}` is outside the core",
                    m.entry,
                    ptx_vm::forms()[code.max_form as usize]
                );
                runs += 1
            }
            Err(e) => {
                let known = e.0.starts_with("form `") || e.0.contains("bytes of shared memory");
                assert!(known, "{}: {e}", m.entry);
                let kind = if e.0.contains("bytes of shared memory") {
                    "more shared memory than a block has".to_string()
                } else {
                    // The reason up to its first space inside the quotes
                    // (`.const` tables print whole otherwise).
                    let quoted = e.0.split('`').nth(1).unwrap_or_default();
                    format!(
                        "{}`{}",
                        e.0.split('`').next().unwrap_or_default(),
                        quoted.split(' ').next().unwrap_or_default()
                    )
                };
                *refused.entry(kind).or_default() += 1;
            }
        }
    }
    println!(
        "ptx_fuzz: the interpreter runs {runs} of {} sm_90 kernels",
        runs + refused.values().sum::<usize>()
    );
    for (kind, n) in &refused {
        println!("ptx_fuzz: interpreter refuses {n}: {kind}");
    }
}

/// What running one program on the interpreter's CPU model gave.
#[derive(Debug, PartialEq)]
enum ModelRun {
    /// Every module (tuned and quick) ran and matched the executor's bytes.
    Ran(usize),
    /// Some module has a form the model lacks (the message).
    NotModelled(String),
}

/// Runs integer `program` on the CPU executor and, generated for sm_90
/// (tuned and quick text) and assembled for the GPU interpreter, on its CPU
/// model (`ptx_vm::emulate`), over inputs and scalars drawn from a stream
/// seeded by `seed`; panics where a parameter's bytes differ. Modules that
/// do not generate or assemble are skipped (not counted in `Ran`).
fn run_on_model(program: &tilefuse::kernels::ir::Program, seed: u64) -> ModelRun {
    run_on_model_with(program, seed, &|_, _| {}).0
}

/// [`run_on_model`] under codegen settings `tuning` (and their quick tier).
fn run_on_model_tuned(
    program: &tilefuse::kernels::ir::Program,
    seed: u64,
    tuning: &tilefuse::kernels::ptx_gen::CodegenConfig,
) -> ModelRun {
    run_on_model_full(program, seed, &|_, _| {}, tuning).0
}

/// [`run_on_model`] with the random inputs then changed by `fill` (given
/// each parameter's position and buffer).
fn run_on_model_with(
    program: &tilefuse::kernels::ir::Program,
    seed: u64,
    fill: &dyn Fn(usize, &mut tilefuse::storage::HostBuffer),
) -> (ModelRun, Vec<tilefuse::storage::HostBuffer>) {
    run_on_model_full(program, seed, fill, &Default::default())
}

/// [`run_on_model_with`] under codegen settings `tuning`.
fn run_on_model_full(
    program: &tilefuse::kernels::ir::Program,
    seed: u64,
    fill: &dyn Fn(usize, &mut tilefuse::storage::HostBuffer),
    tuning: &tilefuse::kernels::ptx_gen::CodegenConfig,
) -> (ModelRun, Vec<tilefuse::storage::HostBuffer>) {
    use tilefuse::kernels::cpu::{execute_with_scalars, Arg};
    use tilefuse::kernels::ptx_gen::generate_with;
    use tilefuse::kernels::ptx_vm::emulate::{self, Memory};
    use tilefuse::storage::HostBuffer;
    use tilefuse::{DType, Scalar};
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    // Inputs: bytes of a stream seeded by the program, bools 0 or 1.
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    // The ticket counters of a last point start at zero, as the runtimes
    // keep them.
    let counters: Vec<usize> = program
        .body
        .iter()
        .filter_map(|i| match i {
            tilefuse::kernels::ir::Inst::LastPoint { counter, .. } => Some(counter.index()),
            _ => None,
        })
        .collect();
    let inputs: Vec<HostBuffer> = program
        .params
        .iter()
        .enumerate()
        .map(|(k, q)| {
            let mut h = HostBuffer::zeros(q.dtype, q.len as usize);
            if counters.contains(&k) {
                return h;
            }
            for b in h.bytes_mut() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (x >> 56) as u8 & if q.dtype == DType::Bool { 1 } else { 0xff };
            }
            fill(k, &mut h);
            h
        })
        .collect();
    // Scalar arguments from the same stream, of every width.
    let scalars: Vec<Scalar> = program
        .scalars
        .iter()
        .map(|&d| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            match d {
                DType::Bool => Scalar::Bool(x >> 63 == 1),
                d if d.is_float() => Scalar::Float((x >> 40) as f64 / 65536.0 - 128.0, d),
                d => Scalar::Int((x as i64) as i128, d),
            }
        })
        .collect();
    let words: Vec<u64> = program
        .scalars
        .iter()
        .zip(&scalars)
        .map(|(&d, &s)| s.element_bits(d))
        .collect();
    let mut want = inputs.clone();
    let mut args: Vec<Arg<'_>> = want.iter_mut().map(Arg::Write).collect();
    execute_with_scalars(program, &mut args, &scalars).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    // The launch fills what has an initial value first.
    let filled: Vec<Vec<u8>> = program
        .params
        .iter()
        .zip(&inputs)
        .map(|(q, h)| match q.init {
            Some(init) => {
                let mut one = HostBuffer::zeros(q.dtype, 1);
                one.set(0, init.0);
                one.bytes().repeat(q.len as usize)
            }
            None => h.bytes().to_vec(),
        })
        .collect();
    let mut ran = 0;
    for module in [
        generate_with(program, &target, tuning),
        generate_with(program, &target, &tuning.quick()),
    ] {
        let Ok(module) = module else { continue };
        let Ok(code) = ptx_vm::assemble(&module, 232_448) else {
            continue;
        };
        let mut mem = Memory(filled.clone());
        let blocks = u32::try_from(module.grid_blocks).unwrap();
        match emulate::run_with_scalars(&code, blocks, &mut mem, &words) {
            Ok(()) => {
                for (i, (got, w)) in mem.0.iter().zip(&want).enumerate() {
                    assert!(
                        got == w.bytes(),
                        "seed {seed}: {} ({}): parameter {i} differs from the executor\n{}",
                        program.name,
                        module.mapping,
                        module.text
                    );
                }
                ran += 1;
            }
            Err(e) if e.starts_with("form") || e.starts_with("operand") => return (ModelRun::NotModelled(e), want),
            Err(e) => panic!("seed {seed}: {}: {e}", program.name),
        }
    }
    (ModelRun::Ran(ran), want)
}

/// The fuzzer's integer programs (every parameter an integer or bool, so
/// no result depends on an order of float operations), generated for sm_90
/// (tuned and quick text), assembled for the GPU interpreter and run on its
/// CPU model (`ptx_vm::emulate`), give the CPU executor's bytes in every
/// parameter. Programs with a form the model lacks are counted, not run.
#[test]
fn integer_programs_of_the_fuzzer_run_on_the_interpreter_model_like_the_executor() {
    let (mut ran, mut not_modelled, mut skipped) = (0, std::collections::BTreeMap::<String, usize>::new(), 0);
    // Enough modules to cover the generator's shapes, few enough for a
    // debug build.
    const MODULES: usize = 6000;
    for seed in fuzzgen::seeds() {
        if ran >= MODULES {
            break;
        }
        let g = fuzzgen::generate(seed).0;
        for opts in gpu_options(seed) {
            let p = plan(&g, &opts).unwrap();
            for k in &p.kernels {
                let program = &k.program;
                let integer = program.params.iter().all(|q| !q.dtype.is_float());
                let small = program.params.iter().all(|q| q.len <= 1 << 20);
                if !integer || !small {
                    skipped += 1;
                    continue;
                }
                match run_on_model(program, seed) {
                    ModelRun::Ran(n) => {
                        ran += n;
                        skipped += 2 - n;
                    }
                    ModelRun::NotModelled(e) => *not_modelled.entry(e).or_default() += 1,
                }
            }
        }
    }
    println!(
        "interpreter model: {ran} modules ran like the executor (stopping past {MODULES}); {skipped} programs or modules skipped (floats, size, not assembled)"
    );
    for (e, n) in &not_modelled {
        println!("interpreter model: not modelled in {n}: {e}");
    }
    assert!(
        ran >= 100,
        "only {ran} modules ran on the model: the test checks too little"
    );
}

/// Row reductions of every row length from a few elements to past a
/// block-wide run, in i32 and i64 (sums, maxima, argmax): rows several to a
/// run reduce in registers and by shuffles within a row's lanes; each
/// planned kernel runs on the interpreter's model like the executor.
#[test]
fn row_reductions_of_every_length_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::DType;
    let mut ran = 0;
    for cols in [2, 3, 8, 16, 33, 48, 64, 100, 200, 256, 300, 700, 1024, 1500] {
        for (dtype, op) in [
            (DType::I32, ReduceOp::Sum),
            (DType::I64, ReduceOp::Max),
            (DType::I32, ReduceOp::ArgMax),
            (DType::U8, ReduceOp::Min),
        ] {
            let mut g = G::default();
            let x = g.data(dtype, &[37, cols]);
            let r = g.reduce(op, x, &[1]);
            let g = g.finish(&[r]);
            for k in &plan(&g, &FusionOptions::gpu()).unwrap().kernels {
                match run_on_model(&k.program, cols as u64) {
                    ModelRun::Ran(n) => ran += n,
                    ModelRun::NotModelled(e) => panic!("{op:?} of {dtype}[37, {cols}]: not modelled: {e}"),
                }
            }
        }
    }
    assert!(ran >= 100, "only {ran} modules ran");
}

/// Reductions over a leading or middle axis (columns kept), in i32, i64
/// and u8 (sums, maxima, minima, argmax), over row counts and column widths
/// on both sides of a block-wide run: tiles whose columns divide a run
/// reduce their rows in registers and by shuffles across the lanes holding
/// the same columns; each planned kernel runs on the interpreter's model
/// like the executor, and some take that path.
#[test]
fn column_reductions_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::DType;
    let (mut ran, mut in_registers) = (0, 0);
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    for (lead, rows, cols) in [
        (1, 3, 64),
        (1, 17, 8),
        (1, 64, 32),
        (1, 100, 48),
        (1, 300, 4),
        (1, 40, 1024),
        (1, 1000, 2),
        (3, 17, 100),
        (2, 64, 256),
        (4, 9, 16),
    ] {
        for (dtype, op) in [
            (DType::I32, ReduceOp::Sum),
            (DType::I64, ReduceOp::Max),
            (DType::I32, ReduceOp::ArgMax),
            (DType::U8, ReduceOp::Min),
        ] {
            let mut g = G::default();
            let x = g.data(dtype, &[lead, rows, cols]);
            let r = g.reduce(op, x, &[1]);
            let g = g.finish(&[r]);
            for k in &plan(&g, &FusionOptions::gpu()).unwrap().kernels {
                let text = tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap().text;
                in_registers += text.contains("reduce the leading axis") as usize;
                match run_on_model(&k.program, (rows * cols) as u64) {
                    ModelRun::Ran(n) => ran += n,
                    ModelRun::NotModelled(e) => {
                        panic!("{op:?} of {dtype}[{lead}, {rows}, {cols}]: not modelled: {e}")
                    }
                }
            }
        }
    }
    assert!(ran >= 60, "only {ran} modules ran");
    assert!(
        in_registers >= 10,
        "only {in_registers} kernels reduced columns in registers"
    );
}

/// An argmin over everything (a million and three i32, through a
/// trailing axis of one) split across the grid as one long row: its kernel
/// runs on the interpreter's model like the executor, the ragged last run
/// and the first-index rule across runs included.
#[test]
fn arg_reductions_over_everything_split_and_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::DType;
    for (shape, op) in [(vec![(1usize << 20) + 3, 1], ReduceOp::ArgMin)] {
        let mut g = G::default();
        let x = g.data(DType::I32, &shape);
        let r = g.reduce(op, x, &[0]);
        let g = g.finish(&[r]);
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        assert!(
            p.kernels
                .iter()
                .any(|k| matches!(k.strategy, tilefuse::fusion::Strategy::ColumnSplit { .. })),
            "{op:?} of {shape:?}: {:?}",
            p.kernels.iter().map(|k| k.strategy.to_string()).collect::<Vec<_>>()
        );
        for k in &p.kernels {
            match run_on_model(&k.program, shape[0] as u64) {
                ModelRun::Ran(n) => assert!(n > 0, "{op:?} of {shape:?}: no module ran"),
                ModelRun::NotModelled(e) => panic!("{op:?} of {shape:?}: not modelled: {e}"),
            }
        }
    }
}

/// Graphs whose kernels need large exchanges through shared memory: once a
/// staged tile (up to 32 KiB) beside an exchange of 33 KiB (an i64 argmax
/// over [64, 64] tiles) needed more than a block's 48 KiB of static shared
/// memory. Tiles are no longer staged, and that argmax now reduces by
/// shuffles; the fuzzer's graphs with exchanges of over 32 KiB still
/// assemble and every module fits.
#[test]
fn kernels_with_a_staged_tile_and_a_large_exchange_fit_static_shared_memory() {
    let Some(ptxas) = ptxas_for_tests("tests/ptx_fuzz.rs (shared memory)") else {
        return;
    };
    // The first three graphs from seed 200000 on with an exchange over 32
    // KiB (found by generating, so the test follows the fuzzer's changes).
    let mut modules = Modules::default();
    let mut found = 0;
    for seed in 200_000..220_000 {
        let g = fuzzgen::generate(seed).0;
        let mut these = Modules::default();
        for opts in gpu_options(seed) {
            let p = plan(&g, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            for k in &p.kernels {
                these
                    .add(&format!("seed {seed} ({opts:?})"), &k.program)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        if these.modules().any(|(_, m)| m.shared_bytes > 32 * 1024) {
            for k in gpu_options(seed)
                .iter()
                .flat_map(|o| plan(&g, o).unwrap().kernels.clone())
            {
                modules
                    .add(&format!("seed {seed}"), &k.program)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            found += 1;
            if found == 3 {
                break;
            }
        }
    }
    let all = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    assert!(all.iter().all(|a| a.resources.shared_bytes <= 48 * 1024));
    let widest = modules.modules().map(|(_, m)| m.shared_bytes).max().unwrap_or(0);
    assert!(
        widest > 32 * 1024,
        "the seed no longer makes a large exchange ({widest} bytes): the test checks nothing"
    );
}

/// Elementwise kernels over odd widths, odd element counts and slices one
/// element in, in u8, i32 and i64 (`x * 2 + b`, `b` along either axis or
/// of `x`'s shape): aligned atoms of a masked axis whose extent is no
/// multiple of the atom move as vectors with a scalar edge, unaligned ones
/// as coalesced single elements; each kernel runs on the interpreter's
/// model like the executor, and some take the edge path.
#[test]
fn elementwise_odd_widths_and_counts_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::DType;
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    let (mut ran, mut edges, mut flats) = (0, 0, 0);
    for (rows, width) in [
        (37, 25),
        (9, 61),
        (101, 61),
        (37, 257),
        (5, 2049),
        (3, 2817),
        (1001, 3),
        (17, 1000),
    ] {
        for dtype in [DType::U8, DType::I32, DType::I64] {
            for (along, offset) in [(0, false), (1, true), (2, false), (2, true)] {
                let mut g = G::default();
                let x = if offset {
                    let x = g.data(dtype, &[rows, width + 1]);
                    g.slice(x, 1, 1, 1, width)
                } else {
                    g.data(dtype, &[rows, width])
                };
                let b = match along {
                    0 => g.data(dtype, &[width]),
                    1 => g.data(dtype, &[rows, 1]),
                    _ => g.data(dtype, &[rows, width]),
                };
                let two = g.scalar(2.0, x);
                let y = g.mul(x, two);
                let y = g.add(y, b);
                let g = g.finish(&[y]);
                for k in &plan(&g, &FusionOptions::gpu()).unwrap().kernels {
                    let module = tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap();
                    edges += module.mapping.contains("scalar at the edge") as usize;
                    flats += matches!(k.strategy, tilefuse::fusion::Strategy::Flat { .. }) as usize;
                    match run_on_model(&k.program, (rows * width) as u64) {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => {
                            panic!("{dtype}[{rows}, {width}] (b along {along}, offset {offset}): not modelled: {e}")
                        }
                    }
                }
            }
        }
    }
    assert!(ran >= 100, "only {ran} modules ran");
    assert!(edges >= 8, "only {edges} kernels moved vectors with a scalar edge");
    // Odd widths with an operand broadcast along either axis are flat
    // kernels, their broadcast operand read by position.
    assert!(flats >= 20, "only {flats} flat kernels");
}

/// An argmax (argmin) after an elementwise chain, with the maximum
/// (minimum) of the same input beside it, in i32, over a row kernel and a
/// column split: one kernel each, which runs on the interpreter's model
/// like the executor (the other strategies are checked against the
/// reference by `tests/thresholds.rs` and on the GPU).
#[test]
fn arg_reductions_with_their_chain_and_best_value_are_one_kernel_on_the_interpreter_model() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::DType;
    let mut strategies = std::collections::BTreeSet::new();
    for (shape, axis) in [(vec![67usize, 1000], 1usize), (vec![(1 << 20) / 32, 32], 0)] {
        for (dtype, arg, best) in [
            (DType::I32, ReduceOp::ArgMax, ReduceOp::Max),
            (DType::I32, ReduceOp::ArgMin, ReduceOp::Min),
        ] {
            let mut g = G::default();
            let x = g.data(dtype, &shape);
            let three = g.scalar(3.0, x);
            let c = g.mul(x, three);
            let i = g.reduce(arg, c, &[axis]);
            let v = g.reduce(best, c, &[axis]);
            let g = g.finish(&[i, v]);
            let p = plan(&g, &FusionOptions::gpu()).unwrap();
            assert_eq!(
                p.kernels.len(),
                1,
                "{arg:?} of {dtype}{shape:?}: {} kernels",
                p.kernels.len()
            );
            strategies.insert(
                p.kernels[0]
                    .strategy
                    .to_string()
                    .split(' ')
                    .next()
                    .unwrap_or("")
                    .to_string(),
            );
            for k in &p.kernels {
                match run_on_model(&k.program, shape[0] as u64) {
                    ModelRun::Ran(n) => assert!(n > 0, "{arg:?} of {dtype}{shape:?}: no module ran"),
                    ModelRun::NotModelled(e) => panic!("{arg:?} of {dtype}{shape:?}: not modelled: {e}"),
                }
            }
        }
    }
    assert!(strategies.len() >= 2, "strategies: {strategies:?}");
}

/// Windows (views whose span starts above index zero) of offset, strided
/// and transposed spans, over tiles that cut them anywhere: a masked load
/// and its in-bounds mask pick the window's elements into a tile of the
/// whole index space, on the CPU executor as an element-by-element
/// reference computes them, and on the interpreter's model of the
/// generated PTX with the executor's bytes.
#[test]
fn windows_load_their_span_and_mask_the_rest_on_the_executor_and_the_interpreter_model() {
    use tilefuse::kernels::cpu::{execute, Arg};
    use tilefuse::kernels::ir::{Access, Builder, IndexExpr};
    use tilefuse::ops::Padding;
    use tilefuse::storage::HostBuffer;
    use tilefuse::{DType, Scalar};
    let mut ran = 0;
    // (extents of the whole, window start, transposed source, tile)
    type Case = ([u64; 2], [u64; 2], bool, [u32; 2]);
    let cases: [Case; 8] = [
        ([9, 70], [0, 13], false, [4, 32]),
        ([9, 70], [3, 0], false, [4, 32]),
        ([9, 70], [5, 40], true, [2, 16]),
        ([33, 100], [7, 64], false, [1, 64]),
        ([33, 100], [7, 64], false, [8, 4]),
        ([12, 48], [4, 16], false, [1, 128]),
        ([64, 20], [31, 1], true, [32, 4]),
        ([5, 300], [0, 299], false, [1, 256]),
    ];
    for (dtype, fill) in [(DType::I32, 7i128), (DType::U8, 200), (DType::I64, -3)] {
        for &(ext, lower, transposed, tile) in &cases {
            // The window's elements: rows and columns from `lower` to
            // `upper` (short of the extents on some axes), read from a source
            // of one more column (offset 1), possibly transposed.
            let upper = [ext[0] - (ext[0] - lower[0]) / 3, ext[1] - (ext[1] % 3)];
            let (rows, cols) = (upper[0] - lower[0], upper[1] - lower[1]);
            let (src_len, strides) = if transposed {
                ((cols + 1) * rows, [1i64, rows as i64])
            } else {
                (rows * (cols + 1), [(cols + 1) as i64, 1])
            };
            let offset = if transposed { rows } else { 1 };
            let grid = [ext[0].div_ceil(tile[0] as u64), ext[1].div_ceil(tile[1] as u64)];
            let mut b = Builder::new(
                format!("window_{}x{}_from_{}_{}", ext[0], ext[1], lower[0], lower[1]),
                &grid,
            );
            let x = b.param("x", dtype, src_len, Access::Read);
            let y = b.param("y", dtype, ext[0] * ext[1], Access::Write);
            let win = b.window(x, &lower, &upper, &ext, &strides, offset, &tile, Padding::Zero);
            let out = b.view_contiguous(y, &ext, &tile, Padding::Zero);
            let at = [IndexExpr::grid(0), IndexExpr::grid(1)];
            let v = b.load(win, &at, true);
            let m = b.in_bounds(win, &at);
            let c = b.constant(Scalar::Int(fill, dtype), dtype, &tile);
            let s = b.select(m, v, c);
            b.store(out, &at, s, true);
            let program = b.finish().unwrap();
            let mut xs = HostBuffer::zeros(dtype, src_len as usize);
            for i in 0..src_len as usize {
                xs.set(i, Scalar::Int((i as i128 * 37 + 11) % 251 - 100, dtype));
            }
            let mut ys = HostBuffer::zeros(dtype, (ext[0] * ext[1]) as usize);
            execute(&program, &mut [Arg::Read(&xs), Arg::Write(&mut ys)]).unwrap();
            for r in 0..ext[0] {
                for col in 0..ext[1] {
                    let want = if (lower[0]..upper[0]).contains(&r) && (lower[1]..upper[1]).contains(&col) {
                        let at =
                            offset as i64 + (r - lower[0]) as i64 * strides[0] + (col - lower[1]) as i64 * strides[1];
                        xs.get(at as usize)
                    } else {
                        Scalar::Int(fill, dtype).cast(dtype)
                    };
                    let got = ys.get((r * ext[1] + col) as usize);
                    assert_eq!(got, want, "{} at [{r}, {col}] ({dtype})", program.name);
                }
            }
            match run_on_model(&program, ext[0] * 1000 + ext[1]) {
                ModelRun::Ran(n) => ran += n,
                ModelRun::NotModelled(e) => panic!("{}: not modelled: {e}", program.name),
            }
        }
    }
    assert!(ran >= 30, "only {ran} modules ran");
}

/// Concatenations and pads read by elementwise work and reductions, planned
/// for the GPU, in integer dtypes over odd widths and pieces that start and
/// end inside tiles and atoms: each kernel, generated for sm_90 and run on
/// the interpreter's model, gives the executor's bytes; at least some of
/// the windows are read with vectors.
#[test]
fn concatenations_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::{BinaryOp, Op, ReduceOp};
    use tilefuse::DType;
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    let (mut ran, mut vectors) = (0, 0);
    for (rows, widths) in [
        (37, [61, 4, 129]),
        (9, [8, 16, 1000]),
        (130, [1, 3, 2]),
        (5, [2048, 7, 2049]),
    ] {
        for dtype in [DType::U8, DType::I32, DType::I64] {
            for (axis, consumer) in [(1, 0), (1, 1), (0, 2), (1, 3)] {
                let mut g = G::default();
                let pieces: Vec<usize> = widths
                    .iter()
                    .map(|&w| {
                        let shape = if axis == 1 { [rows, w] } else { [w, rows] };
                        g.data(dtype, &shape)
                    })
                    .collect();
                let x = g.cat(&pieces, axis);
                let shape = g.shape(x);
                let y = match consumer {
                    0 => {
                        let two = g.scalar(3.0, x);
                        g.binary(BinaryOp::Mul, x, two)
                    }
                    1 => g.reduce(ReduceOp::Max, x, &[1]),
                    2 => g.reduce(ReduceOp::Sum, x, &[0]),
                    _ => {
                        // A pad of the last axis by a constant, then a sum of rows.
                        let fill = g.full(5.0, dtype, &[shape[0], 3]);
                        let p = g.push(Op::Cat { axis: 1 }, &[shape[0], shape[1] + 6], dtype, &[fill, x, fill]);
                        g.reduce(ReduceOp::Sum, p, &[1])
                    }
                };
                let graph = g.finish(&[y]);
                let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
                assert_eq!(
                    plan.kernels.len(),
                    1,
                    "{dtype} {rows}x{widths:?} along {axis}, consumer {consumer}"
                );
                for k in &plan.kernels {
                    let module = tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap();
                    vectors += module
                        .mapping
                        .lines()
                        .any(|l| l.starts_with("load") && l.contains(".v")) as usize;
                    match run_on_model(&k.program, (rows * widths[0]) as u64 + consumer as u64) {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{dtype} {rows}x{widths:?}: not modelled: {e}"),
                    }
                }
            }
        }
    }
    assert!(ran >= 80, "only {ran} modules ran");
    assert!(vectors >= 4, "only {vectors} kernels read a window with vectors");
}

/// Row kernels whose rows start off the 16-byte grid (an odd width) read
/// coalesced single elements when a tile holds one row, and keep wide
/// atoms when a tile holds several short rows (see `benches/NOTES.md`,
/// v34); either way each runs on the interpreter's model like the
/// executor.
#[test]
fn odd_rows_narrow_their_atoms_only_with_one_row_a_tile() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::DType;
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    for (rows, width, atom) in [(9, 5823, "atom 1"), (64, 319, "atom 4")] {
        let mut g = G::default();
        let x = g.data(DType::I32, &[rows, width]);
        let m = g.reduce(ReduceOp::Max, x, &[1]);
        let e = g.broadcast_to(m, &[rows, width]);
        let y = g.sub(x, e);
        let graph = g.finish(&[y]);
        let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
        assert_eq!(plan.kernels.len(), 1);
        let k = &plan.kernels[0];
        let module = tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap();
        let load = module.mapping.lines().find(|l| l.starts_with("load")).unwrap();
        assert!(load.contains(atom), "[{rows}, {width}]: {load}");
        assert!(matches!(run_on_model(&k.program, width as u64), ModelRun::Ran(n) if n > 0));
    }
}

/// Row kernels over rows of odd widths (a row reduced, broadcast back and
/// stored) read and write each tile of whole rows as one run of 16-byte
/// pieces through shared memory, short last tiles included, and read the
/// pieces of runs that start off the 16-byte grid (rows of several tiles,
/// tiles of rows whose run is no multiple of 16 bytes), outside loops and,
/// where the settings ask, inside them; the integer ones run on the
/// interpreter's model like the executor, and every dtype's kernel
/// assembles for the interpreter within its core forms.
#[test]
fn odd_row_tiles_move_as_runs_and_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::ReduceOp;
    use tilefuse::kernels::ptx_gen::{generate_with, CodegenConfig, RunStaging};
    use tilefuse::DType;
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    let (mut ran, mut loads, mut stores, mut unaligned, mut looped) = (0, 0, 0, 0, 0);
    for staging in [RunStaging::OutsideLoops, RunStaging::Everywhere] {
        // Every element width moves as a run here (the default keeps runs
        // to 2-byte elements and narrower), so the integer kernels that run
        // on the model cover 1-, 4- and 8-byte runs.
        let mut tuning = CodegenConfig::default();
        tuning.stage_runs = staging;
        tuning.run_element_bytes = 8;
        for (rows, width) in [
            (37, 58),
            (101, 61),
            (1000, 25),
            (9, 61),
            (130, 19),
            (67, 5),
            (3, 5001),
            (40, 1431),
            (2, 40001),
        ] {
            for dtype in [
                DType::U8,
                DType::I32,
                DType::I64,
                DType::F16,
                DType::BF16,
                DType::F32,
                DType::F64,
            ] {
                let mut g = G::default();
                let x = g.data(dtype, &[rows, width]);
                let m = g.reduce(ReduceOp::Max, x, &[1]);
                let e = g.broadcast_to(m, &[rows, width]);
                let y = g.sub(x, e);
                let graph = g.finish(&[y]);
                for k in &plan(&graph, &FusionOptions::gpu()).unwrap().kernels {
                    let module = generate_with(&k.program, &target, &tuning).unwrap();
                    let default = generate_with(&k.program, &target, &CodegenConfig::default()).unwrap();
                    if dtype.size_in_bytes() > 2 {
                        assert!(
                            !default.mapping.contains("(run)"),
                            "{dtype}[{rows}, {width}] moved as a run by default:\n{}",
                            default.mapping
                        );
                    } else if module.mapping.contains("load (run)") && staging == RunStaging::OutsideLoops {
                        assert!(
                            default.mapping.contains("load (run)"),
                            "{dtype}[{rows}, {width}]: no run by default:\n{}",
                            default.mapping
                        );
                    }
                    loads += module.mapping.contains("load (run)") as usize;
                    stores += module.mapping.contains("store (run)") as usize;
                    unaligned += module.mapping.contains("unaligned") as usize;
                    let in_loop = k
                        .program
                        .body
                        .iter()
                        .any(|i| matches!(i, tilefuse::kernels::ir::Inst::Loop { .. }));
                    looped += (in_loop && module.mapping.contains("(run)")) as usize;
                    let code = ptx_vm::assemble(&module, 232_448)
                        .unwrap_or_else(|e| panic!("{dtype}[{rows}, {width}]: {e:?}\n{}", module.text));
                    assert!(
                        (code.max_form as usize) < ptx_vm::core_forms(),
                        "{dtype}[{rows}, {width}]: form `{}` is outside the core",
                        ptx_vm::forms()[code.max_form as usize]
                    );
                    if dtype.is_float() {
                        continue;
                    }
                    match run_on_model_tuned(&k.program, (rows * width) as u64, &tuning) {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{dtype}[{rows}, {width}]: not modelled: {e}"),
                    }
                }
            }
        }
    }
    assert!(ran >= 60, "only {ran} modules ran");
    assert!(
        loads >= 40 && stores >= 40,
        "{loads} loads and {stores} stores moved as runs"
    );
    assert!(unaligned >= 8, "{unaligned} runs started off the 16-byte grid");
    assert!(looped >= 4, "{looped} kernels moved runs inside a loop");
}

/// Gathers planned for the GPU (along either axis of a matrix, by an index
/// of its own shape or spread like `index_select`'s, by i64 and i32
/// positions, alone, reduced after, or beside a row reduction as in a
/// cross-entropy), one kernel each, run on the interpreter's model like the
/// executor (f32 data only moved: the model lacks f16 conversions), flags
/// included: some indices all in range, some with a few
/// outside the axis (negative and past its end), which set the flag and
/// read nothing.
#[test]
fn gathers_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::{BinaryOp, Op, ReduceOp};
    use tilefuse::{DType, Scalar};
    let (mut ran, mut flagged, mut clean) = (0, 0, 0);
    for (rows, cols, k) in [(37, 61, 5), (9, 300, 130), (130, 3, 7), (4, 2049, 1)] {
        for dtype in [DType::U8, DType::I32, DType::I64, DType::F32] {
            for (axis, consumer, spread) in [
                (1, 0, false),
                (0, 0, false),
                (1, 0, true),
                (1, 1, false),
                (1, 2, false),
                (0, 1, true),
            ] {
                if dtype.is_float() && consumer != 0 {
                    continue; // float sums may differ in their order of additions
                }
                // i64 and i32 positions by turns.
                let index_dtype = if (rows + axis + consumer + spread as usize + dtype.size_in_bytes()) % 2 == 0 {
                    DType::I64
                } else {
                    DType::I32
                };
                {
                    let mut g = G::default();
                    let x = g.data(dtype, &[rows, cols]);
                    let len = if axis == 1 { cols } else { rows };
                    let out = if axis == 1 { [rows, k] } else { [k, cols] };
                    let idx = if spread {
                        let lifted = if axis == 1 { [1, k] } else { [k, 1] };
                        let i = g.data(index_dtype, &lifted);
                        g.broadcast_to(i, &out)
                    } else {
                        g.data(index_dtype, &out)
                    };
                    let y = g.push(Op::Gather { axis, select: spread }, &out, dtype, &[x, idx]);
                    let z = match consumer {
                        0 => y,
                        1 => g.reduce(ReduceOp::Sum, y, &[1]),
                        _ => {
                            // A row's maximum less the gathered element (k = 1 a row).
                            let m = g.reduce(ReduceOp::Max, x, &[1]);
                            let one = g.push(
                                Op::Slice {
                                    axis: 1,
                                    start: 0,
                                    step: 1,
                                },
                                &[rows, 1],
                                dtype,
                                &[y],
                            );
                            g.binary(BinaryOp::Sub, m, one)
                        }
                    };
                    let graph = g.finish(&[z]);
                    let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
                    let here = format!("{dtype} [{rows}, {cols}] along {axis} by {index_dtype} [{k}], consumer {consumer}, spread {spread}");
                    if consumer != 2 {
                        assert_eq!(plan.kernels.len(), 1, "{here}");
                    }
                    for kernel in &plan.kernels {
                        for some_bad in [false, true] {
                            // The index leaf (input 1) holds positions in range,
                            // or every 16th outside it.
                            let index_param = kernel
                                .args
                                .iter()
                                .position(|a| *a == tilefuse::fusion::BufferRef::Input(1));
                            let fill = |p: usize, h: &mut tilefuse::storage::HostBuffer| {
                                if Some(p) != index_param {
                                    return;
                                }
                                for i in 0..h.len() {
                                    let mut v = (i * 7919 + 13) % len;
                                    let v = if some_bad && i % 16 == 5 {
                                        if i % 32 == 5 {
                                            -1 - v as i64
                                        } else {
                                            (len + v) as i64
                                        }
                                    } else {
                                        v = v.min(len - 1);
                                        v as i64
                                    };
                                    h.set(i, Scalar::Int(v as i128, index_dtype));
                                }
                            };
                            let (run, executed) = run_on_model_with(&kernel.program, (rows * cols) as u64, &fill);
                            match run {
                                ModelRun::Ran(n) => ran += n,
                                ModelRun::NotModelled(e) => panic!("{here}: not modelled: {e}"),
                            }
                            // Whether the executor's flag was set.
                            let flags: Vec<usize> = plan.index_checks().map(|(t, _)| t).collect();
                            let flag_params: Vec<usize> = kernel
                                .args
                                .iter()
                                .enumerate()
                                .filter(|(_, a)| matches!(a, tilefuse::fusion::BufferRef::Temp(t) if flags.contains(t)))
                                .map(|(p, _)| p)
                                .collect();
                            assert!(!flag_params.is_empty() || consumer == 2, "{here}: no flag");
                            if let Some(p) = index_param {
                                // Every position of the index is read, so the
                                // flag is set exactly when one is bad.
                                let bad = some_bad && executed[p].len() > 5;
                                for &f in &flag_params {
                                    assert_eq!(executed[f].as_slice::<u32>()[0], bad as u32, "{here}: the flag");
                                }
                                if some_bad {
                                    flagged += 1;
                                } else {
                                    clean += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(ran >= 150, "only {ran} modules ran");
    assert!(
        flagged >= 40 && clean >= 40,
        "{flagged} runs with bad indices, {clean} without"
    );
}

/// Scatters planned for the GPU (along either axis of a matrix, by an
/// index as wide as the input or narrower, spread like `index_add`'s or of
/// its own, by i64 and i32 positions, into integers, f32 and f64), one
/// kernel each, run on the interpreter's model like the executor, bit for
/// bit (float sums included: both add each line's sources in source
/// order), flags included: some indices all in range, some with a few
/// outside the axis (negative and past its end), which set the flag and
/// update nothing.
#[test]
fn scatters_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::Op;
    use tilefuse::{DType, Scalar};
    let (mut ran, mut flagged, mut clean, mut assembled) = (0, 0, 0, 0);
    let ptxas = ptxas_for_tests("tests/ptx_fuzz.rs (scatters)");
    for (rows, cols, k) in [(37, 61, 5), (9, 300, 33), (130, 3, 7), (1, 300, 300), (300, 1, 2)] {
        for dtype in [DType::U8, DType::I32, DType::I64, DType::F32, DType::F64] {
            for (axis, spread) in [(1, false), (0, false), (0, true)] {
                let index_dtype = if (rows + axis + spread as usize + dtype.size_in_bytes()) % 2 == 0 {
                    DType::I64
                } else {
                    DType::I32
                };
                let mut g = G::default();
                let len = if axis == 1 { cols } else { rows };
                let sources = if axis == 1 { [rows, k] } else { [k, cols] };
                let idx = if spread {
                    let lifted = if axis == 1 { [1, k] } else { [k, 1] };
                    let i = g.data(index_dtype, &lifted);
                    g.broadcast_to(i, &sources)
                } else {
                    g.data(index_dtype, &sources)
                };
                let src = g.data(dtype, &sources);
                let y = g.push(
                    Op::ScatterAdd { axis, chunked: None },
                    &[rows, cols],
                    dtype,
                    &[idx, src],
                );
                let graph = g.finish(&[y]);
                let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
                let here =
                    format!("{dtype} [{rows}, {cols}] along {axis} by {index_dtype} {sources:?}, spread {spread}");
                assert_eq!(plan.kernels.len(), 1, "{here}");
                let kernel = &plan.kernels[0];
                if let Some(ptxas) = &ptxas {
                    for sm in [80, 90] {
                        let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(sm, 13000);
                        let module =
                            tilefuse::kernels::ptx_gen::generate_with(&kernel.program, &target, &Default::default())
                                .unwrap_or_else(|e| panic!("{here}: {e}"));
                        tilefuse::kernels::ptx_gen::ptxas::assemble(ptxas, &module.text, sm)
                            .unwrap_or_else(|e| panic!("{here}: ptxas for sm_{sm}: {e}\n{}", module.text));
                        assembled += 1;
                    }
                }
                let index_param = kernel
                    .args
                    .iter()
                    .position(|a| *a == tilefuse::fusion::BufferRef::Input(0))
                    .expect("the index is a parameter");
                let src_param = kernel
                    .args
                    .iter()
                    .position(|a| *a == tilefuse::fusion::BufferRef::Input(1))
                    .expect("the source is a parameter");
                let flag_param = kernel
                    .args
                    .iter()
                    .position(|a| matches!(a, tilefuse::fusion::BufferRef::Temp(t) if plan.index_checks().any(|(f, _)| f == *t)))
                    .expect("a scatter has a flag");
                for some_bad in [false, true] {
                    let fill = |p: usize, h: &mut tilefuse::storage::HostBuffer| {
                        if p == src_param && dtype.is_float() {
                            // Finite sources (NaN payloads may differ).
                            for i in 0..h.len() {
                                h.set(i, Scalar::Float(((i * 31) % 17) as f64 * 0.37 - 3.1, dtype));
                            }
                        }
                        if p != index_param {
                            return;
                        }
                        for i in 0..h.len() {
                            let v = (i * 7919 + 13) % len;
                            let v = if some_bad && i % 16 == 5 {
                                if i % 32 == 5 {
                                    -1 - v as i64
                                } else {
                                    (len + v) as i64
                                }
                            } else {
                                v as i64
                            };
                            h.set(i, Scalar::Int(v as i128, index_dtype));
                        }
                    };
                    let (run, executed) = run_on_model_with(&kernel.program, (rows * cols) as u64, &fill);
                    match run {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{here}: not modelled: {e}"),
                    }
                    let bad = some_bad && executed[index_param].len() > 5;
                    assert_eq!(
                        executed[flag_param].as_slice::<u32>()[0],
                        bad as u32,
                        "{here}: the flag"
                    );
                    if bad {
                        flagged += 1;
                    } else {
                        clean += 1;
                    }
                }
            }
        }
    }
    assert!(ran >= 120, "only {ran} modules ran");
    assert!(
        flagged >= 50 && clean >= 70,
        "{flagged} runs with bad indices, {clean} without"
    );
    assert!(
        ptxas.is_none() || assembled >= 150,
        "only {assembled} modules assembled"
    );
}

/// The kernels of sorts and `topk` planned for the GPU (the rank
/// reduction over a broadcast comparison, the scatter of positions to
/// their ranks, the gather of the values, the merge passes of a line
/// longer than the rank sort's; `topk`'s selection passes), in
/// i32, f32 and u8, along either axis, run on the interpreter's model like
/// the executor, bit for bit: a sort's outputs are integers or moved
/// values (NaN keys included, the model's unordered comparisons), and
/// `topk`'s selection passes run on finite keys; each assembles for sm_80
/// and sm_90.
#[test]
fn sorts_and_topk_run_on_the_interpreter_model_like_the_executor() {
    use tilefuse::{DType, Tensor};
    let mut ran = 0;
    let ptxas = ptxas_for_tests("tests/ptx_fuzz.rs (sorts)");
    for (dtype, rows, cols) in [
        (DType::I32, 5, 37),
        (DType::F32, 5, 37),
        (DType::U8, 5, 37),
        (DType::F32, 2, 300),
    ] {
        let x = Tensor::from_vec((0..rows * cols).map(|i| (i % 7) as f32).collect(), &[rows, cols]).cast(dtype);
        x.realize().unwrap();
        for axis in [0, 1] {
            let (v, i) = x.sort(axis, axis == 0);
            let (tv, ti) = x.topk(2, axis);
            for (k, t) in [v, i, tv, ti].iter().enumerate() {
                let plan = plan(&t.subgraph(), &FusionOptions::gpu()).unwrap();
                // A selection pass stores reduced maxima, whose NaN may be
                // another NaN than the executor's: finite keys there.
                let finite = |_: usize, h: &mut tilefuse::storage::HostBuffer| {
                    if k >= 2 && h.dtype().is_float() {
                        for e in 0..h.len() {
                            h.set(e, tilefuse::Scalar::Float((e % 11) as f64 - 5.0, h.dtype()));
                        }
                    }
                };
                for kernel in &plan.kernels {
                    if let Some(ptxas) = &ptxas {
                        for sm in [80, 90] {
                            let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(sm, 13000);
                            let module = tilefuse::kernels::ptx_gen::generate_with(
                                &kernel.program,
                                &target,
                                &Default::default(),
                            )
                            .unwrap_or_else(|e| panic!("{dtype} axis {axis} output {k}: {e}"));
                            tilefuse::kernels::ptx_gen::ptxas::assemble(ptxas, &module.text, sm)
                                .unwrap_or_else(|e| panic!("{dtype} axis {axis} output {k}: ptxas for sm_{sm}: {e}"));
                        }
                    }
                    match run_on_model_with(&kernel.program, (k * 2 + axis as usize) as u64 + 1, &finite).0 {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{dtype} axis {axis} output {k}: not modelled: {e}"),
                    }
                }
            }
        }
    }
    assert!(ran >= 60, "only {ran} modules ran");
}

/// Scans planned for the GPU (sum, max and min along the last and the
/// first axis of a matrix, lines shorter than a tile, a tile long, and many
/// tiles long, carried from tile to tile; alone and with the work before
/// and after them), in i64, i32 and u8 (sums of integers are i64), one
/// kernel each, run on the interpreter's model like the executor.
#[test]
fn scans_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::{BinaryOp, Op, ReduceOp, ScanOp};
    use tilefuse::DType;
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    let (mut ran, mut looped, mut tree) = (0, 0, 0);
    for (rows, cols) in [(37, 61), (3, 4096), (2, 9000), (300, 5), (1, 1)] {
        for dtype in [DType::I64, DType::I32, DType::U8] {
            for (axis, op, consumer) in [
                (1, ScanOp::Sum, 0),
                (1, ScanOp::Max, 1),
                (0, ScanOp::Sum, 1),
                (0, ScanOp::Min, 0),
                (1, ScanOp::Sum, 2),
            ] {
                let mut g = G::default();
                let x = g.data(dtype, &[rows, cols]);
                let out = if op == ScanOp::Sum { DType::I64 } else { dtype };
                let x = if out != dtype { g.cast(x, out) } else { x };
                let y = g.push(Op::Scan { op, axis }, &[rows, cols], out, &[x]);
                let z = match consumer {
                    0 => y,
                    1 => {
                        let two = g.scalar(3.0, y);
                        g.binary(BinaryOp::Mul, y, two)
                    }
                    _ => g.reduce(ReduceOp::Max, y, &[1]),
                };
                let graph = g.finish(&[z]);
                let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
                let here = format!("{op:?} of {dtype} [{rows}, {cols}] along {axis}, consumer {consumer}");
                assert_eq!(plan.kernels.len(), 1, "{here}");
                for k in &plan.kernels {
                    let text = k.program.to_string();
                    looped += text.contains("loop") as usize;
                    let module = tilefuse::kernels::ptx_gen::generate(&k.program, &target)
                        .unwrap_or_else(|e| panic!("{here}: {e}\n{}", k.program));
                    tree += module.text.contains("bar.sync") as usize;
                    match run_on_model(&k.program, (rows * cols) as u64 + consumer as u64) {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{here}: not modelled: {e}"),
                    }
                }
            }
        }
    }
    assert!(ran >= 100, "only {ran} modules ran");
    assert!(
        looped >= 6 && tree >= 30,
        "{looped} carried, {tree} scanned through shared memory"
    );
}

/// Random tensors planned for the GPU (f32 and f64, alone, in a row
/// reduction (f32), and a dropout-like mask), one kernel each,
/// run on the interpreter's model like the executor: the values are
/// integer rounds and exact conversions, so every byte agrees.
#[test]
fn random_tensors_run_on_the_interpreter_model_like_the_executor() {
    use common::G;
    use tilefuse::graph::{BinaryOp, Op, ReduceOp};
    use tilefuse::DType;
    let mut ran = 0;
    for (rows, cols) in [(37, 61), (3, 4096), (1, 1), (300, 5)] {
        for dtype in [DType::F32, DType::F64] {
            for consumer in 0..3 {
                if dtype == DType::F64 && consumer == 1 {
                    continue; // the model has no f64 max
                }
                let mut g = G::default();
                let seed = g.full(12345.0, DType::I64, &[]);
                let r = g.push(Op::Random, &[rows, cols], dtype, &[seed]);
                let z = match consumer {
                    0 => r,
                    1 => g.reduce(ReduceOp::Max, r, &[1]),
                    _ => {
                        let half = g.scalar(0.5, r);
                        let keep = g.binary(BinaryOp::Ge, r, half);
                        g.cast(keep, DType::U8)
                    }
                };
                let graph = g.finish(&[z]);
                let plan = plan(&graph, &FusionOptions::gpu()).unwrap();
                let here = format!("{dtype} [{rows}, {cols}], consumer {consumer}");
                assert_eq!(plan.kernels.len(), 1, "{here}");
                for k in &plan.kernels {
                    match run_on_model(&k.program, (rows * cols) as u64 + consumer) {
                        ModelRun::Ran(n) => ran += n,
                        ModelRun::NotModelled(e) => panic!("{here}: not modelled: {e}"),
                    }
                }
            }
        }
    }
    assert!(ran >= 30, "only {ran} modules ran");
}
