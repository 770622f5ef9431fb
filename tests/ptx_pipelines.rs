//! The GPU pipelines of the throughput suite, at their benchmark shapes,
//! planned with `FusionOptions::gpu()` (deterministic and not), generated as
//! PTX for sm_80 and sm_90 and assembled by `ptxas -v`: no kernel may spill
//! to local memory (`KNOWN_SPILLS` is empty). Prints, for sm_90, each kernel's registers, shared
//! memory and spills; `TILEFUSE_WRITE_NOTES=1` also writes that table into
//! `benches/NOTES.md`. Skipped cleanly when `ptxas` is absent unless
//! `TILEFUSE_REQUIRE_PTXAS=1`.

mod common;

use common::pipelines::{self, Inputs};
use common::ptx_check::{spilling, summary, Assembled, Modules};
use std::path::Path;
use tilefuse::fusion::{plan, BufferKind, FusionOptions};
use tilefuse::graph::Subgraph;
use tilefuse::kernels::ptx_gen::ptxas::ptxas_for_tests;
use tilefuse::DType;

/// Rows and columns of the suite's matrices.
const M: usize = 16384;
const K: usize = 4096;
/// Elements of the suite's vectors.
const N: usize = 1 << 26;

/// The GPU pipelines at their benchmark shapes, with zero inputs (plans
/// depend only on shapes and dtypes; the zeros are never touched).
fn suite() -> Vec<(&'static str, Subgraph)> {
    let f32 = Inputs::Zeros(DType::F32);
    vec![
        ("chain", pipelines::chain_of(f32, N)),
        ("bias_gelu", pipelines::bias_gelu_of(f32, M, K)),
        (
            "bias_gelu_bf16",
            pipelines::bias_gelu_of(Inputs::Zeros(DType::BF16), M, K),
        ),
        ("softmax", pipelines::softmax_of(f32, M, K)),
        ("rmsnorm", pipelines::rms_norm_of(f32, M, K)),
        ("layernorm", pipelines::layer_norm_of(f32, M, K)),
        ("mse", pipelines::mse_of(f32, N)),
        ("sum", pipelines::sum_of(f32, N)),
        ("colsum", pipelines::colsum_of(f32, M, K)),
    ]
}

#[test]
fn suite_reductions_are_one_kernel_each() {
    // sum, mse and colsum split their reduction across the grid and combine
    // the partials at the last point to finish, in the same launch.
    for (name, g) in suite() {
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        if ["sum", "mse", "colsum"].contains(&name) {
            assert_eq!(p.kernels.len(), 1, "{name}");
            let program = &p.kernels[0].program;
            assert!(
                program.grid.iter().product::<u64>() >= 256,
                "{name}: {:?}",
                program.grid
            );
            assert!(program.to_string().contains("last_point g0"), "{name}");
            let counters = p.buffers.iter().filter(|b| b.kind == BufferKind::Counters).count();
            assert_eq!(counters, 1, "{name}");
        } else {
            assert!(p.buffers.iter().all(|b| b.kind == BufferKind::Temp), "{name}");
        }
    }
}

/// The shape of the generated code that the throughput depends on, checked
/// in the PTX text so a regression shows without a GPU: no general integer
/// division (ptxas makes `div`/`rem` by an immediate a reciprocal-based
/// sequence, and the 64-bit ones a subroutine call), row reductions that
/// keep the row in registers (no tile published to shared memory, one
/// barrier per reduction to one element, whose broadcast needs none), and
/// memory accesses after the first of a tile addressed by immediate offsets,
/// a quarter tile for elementwise kernels with transcendentals, and no
/// per-element `div.rn`.
#[test]
fn suite_kernels_keep_their_fast_shapes() {
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    for (name, g) in suite() {
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        for k in &p.kernels {
            let text = tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap().text;
            let code: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.starts_with("//")).collect();
            let count = |needle: &str| code.iter().filter(|l| l.contains(needle)).count();
            assert_eq!(count("div.u") + count("rem.u"), 0, "{name}: an integer division");
            // The suite divides only by a row's sum (softmax): one f64
            // reciprocal, not a `div.rn` (and its slow path) per element.
            assert_eq!(count("div.rn"), 0, "{name}: a per-element division");
            let reductions = match name {
                "softmax" | "layernorm" => 2,
                "rmsnorm" => 1,
                _ => 0,
            };
            if reductions > 0 {
                // One barrier per reduction: each one's warp partials go
                // where the previous one's readers are not reading.
                assert_eq!(count("bar.sync"), reductions, "{name}: barriers");
                assert_eq!(
                    count("st.shared"),
                    reductions,
                    "{name}: one warp partial stored per reduction"
                );
                assert_eq!(
                    text.matches("in registers").count(),
                    reductions,
                    "{name}: reductions in registers"
                );
            }
            if ["softmax", "rmsnorm", "layernorm"].contains(&name) {
                // The global address: `ld.global`'s only one, `cp.async`'s second.
                let offset = code.iter().any(|&l| {
                    let address = if l.starts_with("ld.global") {
                        l.split('[').nth(1)
                    } else if l.starts_with("cp.async.cg.shared.global") {
                        l.split('[').nth(2)
                    } else {
                        None
                    };
                    address.is_some_and(|a| a.contains('+') && !a.contains("+0]"))
                });
                assert!(offset, "{name}: no load addressed by an immediate offset");
                assert!(text.contains("// mapping: block 512 threads"), "{name}: block");
                if reductions == 1 {
                    // The row goes through shared memory (16-byte
                    // `cp.async` pieces, read there before and after the
                    // reduction); it is not loaded from global twice.
                    assert!(
                        text.contains("mapping: load (staged) v0 tile [1, 4096]"),
                        "{name}: row not staged"
                    );
                    assert_eq!(
                        count("cp.async.cg.shared.global"),
                        2,
                        "{name}: two 16-byte pieces a thread"
                    );
                    assert_eq!(count("cp.async.wait_group 0"), 1, "{name}: one wait");
                } else {
                    // Rows held across two reductions stay in registers,
                    // 2048 threads resident, every load with an L2
                    // `evict_last` policy (`Tuning::chained_rows_in_registers`).
                    assert_eq!(count("cp.async"), 0, "{name}: a staged row");
                    assert!(text.contains(".minnctapersm 4"), "{name}: residency");
                    assert!(count("createpolicy.fractional.L2::evict_last") >= 1, "{name}: policy");
                    let loads = count("ld.global");
                    assert!(loads >= 2, "{name}: loads");
                    assert_eq!(
                        count("ld.global.nc.L2::cache_hint.v4.f32"),
                        loads,
                        "{name}: a load without the policy"
                    );
                }
            }
            // Elementwise kernels with transcendentals take a quarter of the
            // tile: one 16-byte vector per thread and access.
            if ["chain", "bias_gelu", "bias_gelu_bf16"].contains(&name) {
                let accesses: Vec<&str> = text
                    .lines()
                    .filter(|l| l.contains("mapping: load") || l.contains("mapping: store"))
                    .collect();
                assert!(!accesses.is_empty(), "{name}: no mapping lines");
                for a in accesses {
                    assert!(a.contains("256 threads x 1 repeats"), "{name}: {a}");
                }
            }
        }
    }
}

/// Kernels of the suite that `ptxas` makes spill, in the form `Assembled`
/// prints: none. A spill is a test failure.
const KNOWN_SPILLS: &[&str] = &[];

#[test]
fn suite_kernels_assemble_without_new_spills() {
    let Some(ptxas) = ptxas_for_tests("tests/ptx_pipelines.rs") else {
        return;
    };
    let mut modules = Modules::default();
    for (name, g) in suite() {
        for deterministic in [true, false] {
            let opts = FusionOptions {
                deterministic,
                ..FusionOptions::gpu()
            };
            let p = plan(&g, &opts).unwrap_or_else(|e| panic!("{name}: plan failed: {e}"));
            assert!(!p.kernels.is_empty(), "{name}: no kernels");
            // A kernel both plans share is listed once, under the deterministic plan.
            let label = if deterministic {
                name.to_string()
            } else {
                format!("{name} (non-deterministic)")
            };
            for k in &p.kernels {
                modules.add(&label, &k.program).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
    assert!(
        modules.not_lowered.is_empty(),
        "the suite's programs all lower: {:?}",
        modules.not_lowered
    );
    let all = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    let table = table(&all, 90, &version(&ptxas));
    println!("{table}");
    println!("ptx_pipelines: {}", summary(&all));
    assert_eq!(all.len(), modules.len(), "every distinct module is assembled");
    assert!(
        all.iter().all(|a| a.resources.registers > 0),
        "ptxas -v reported registers"
    );
    let spills: Vec<String> = spilling(&all).iter().map(|a| a.to_string()).collect();
    let known: Vec<String> = KNOWN_SPILLS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        spills, known,
        "spills to local memory differ from KNOWN_SPILLS (no new spill is allowed; a fixed one leaves the list)"
    );
    if std::env::var("TILEFUSE_WRITE_NOTES").is_ok_and(|v| v == "1") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/NOTES.md");
        write_section(&path, HEADING, &table).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("ptx_pipelines: wrote the table to {}", path.display());
    }
}

/// The heading of the table in `benches/NOTES.md`.
const HEADING: &str = "## ptxas -v of the suite's kernels";

/// The Markdown table of the kernels assembled for `sm_<sm>`, and a line
/// on the spills of the other target.
fn table(all: &[Assembled], sm: u32, ptxas_version: &str) -> String {
    let mut out = format!(
        "The GPU pipelines of BENCHMARKS.md at their benchmark shapes, planned with \
         `FusionOptions::gpu()` (deterministic; a kernel only the non-deterministic plan has is \
         marked), as `ptxas -v` ({ptxas_version}) reports them for sm_{sm}. Regenerate with \
         `TILEFUSE_WRITE_NOTES=1 cargo test --test ptx_pipelines`.\n\n\
         | pipeline | kernel | threads | blocks | registers | shared bytes | spill bytes (stores / loads) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for a in all.iter().filter(|a| a.sm == sm) {
        let r = &a.resources;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} / {} |\n",
            a.label,
            r.name,
            a.module.block_threads,
            a.module.grid_blocks,
            r.registers,
            r.shared_bytes,
            r.spill_store_bytes,
            r.spill_load_bytes
        ));
    }
    let others: Vec<String> = spilling(all)
        .iter()
        .filter(|a| a.sm != sm)
        .map(|a| format!("`{a}`"))
        .collect();
    out.push_str(&format!(
        "\nSpills on the other targets: {}.\n",
        if others.is_empty() {
            "none".to_string()
        } else {
            others.join("; ")
        }
    ));
    out
}

/// The last line of `ptxas --version` ("Build cuda_13.0.r13.0/...").
fn version(ptxas: &Path) -> String {
    let out = std::process::Command::new(ptxas)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("running {} --version: {e}", ptxas.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().unwrap_or("unknown version").trim().to_string()
}

/// Writes `body` under `heading` in the Markdown file `path`, replacing the
/// section's old text (up to the next `## ` heading), or appending the
/// section, or creating the file.
fn write_section(path: &Path, heading: &str, body: &str) -> std::io::Result<()> {
    let old = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "# Benchmark notes\n".to_string(),
        Err(e) => return Err(e),
    };
    let section = format!("{heading}\n\n{body}");
    let new = match old.find(&format!("{heading}\n")) {
        Some(at) => {
            let after = at + heading.len();
            let end = old[after..].find("\n## ").map_or(old.len(), |e| after + e + 1);
            let gap = if end < old.len() { "\n" } else { "" };
            format!("{}{section}{gap}{}", &old[..at], &old[end..])
        }
        None => format!("{}\n\n{section}", old.trim_end()),
    };
    std::fs::write(path, new)
}

/// The PTX of the chain, softmax and mse pipelines (at their benchmark
/// shapes, for sm_90 with a CUDA 13.0 driver) against the snapshots in
/// `tests/snapshots/*.ptx`; `TILEFUSE_BLESS=1` rewrites them. Needs no ptxas.
#[test]
fn suite_ptx_matches_snapshots() {
    let target = tilefuse::kernels::ptx_gen::PtxTarget::for_driver(90, 13000);
    let Some(dir) = common::snapshot_dir("suite_ptx_matches_snapshots") else {
        return;
    };
    let bless = std::env::var("TILEFUSE_BLESS").is_ok_and(|v| v == "1");
    for (name, graph) in suite()
        .into_iter()
        .filter(|(n, _)| ["chain", "softmax", "mse"].contains(n))
    {
        let p = plan(&graph, &FusionOptions::gpu()).unwrap();
        let text: String = p
            .kernels
            .iter()
            .map(|k| tilefuse::kernels::ptx_gen::generate(&k.program, &target).unwrap().text)
            .collect::<Vec<_>>()
            .join("\n");
        let path = dir.join(format!("{name}.ptx"));
        if bless {
            std::fs::write(&path, &text).unwrap();
        }
        let want = std::fs::read_to_string(&path).expect("snapshot missing: run with TILEFUSE_BLESS=1");
        assert!(
            text == want,
            "PTX of {name} differs from {}; rerun with TILEFUSE_BLESS=1 if intended",
            path.display()
        );
    }
}

/// Every suite kernel's quick text runs on the GPU interpreter (so its
/// first call needs no JIT), within an H200 block's shared memory, and so
/// does its tuned text where it carries no load cache policy. A load
/// policy (the default for rows held across two reductions, as in softmax
/// and layernorm, or `TILEFUSE_GPU_LD_KEEP`) and other library settings
/// (`tilefuse::config::active_library`) can give the tuned text
/// instructions the interpreter has no form for; first calls then run the
/// quick text on it.
#[test]
fn suite_kernels_run_on_the_interpreter() {
    use tilefuse::kernels::ptx_gen::{generate, generate_quick, PtxTarget};
    use tilefuse::kernels::ptx_vm;
    let target = PtxTarget::for_driver(90, 13000);
    let defaults = tilefuse::config::active_library().is_empty();
    for (name, g) in suite() {
        let p = plan(&g, &FusionOptions::gpu()).unwrap();
        for k in &p.kernels {
            let tuned = generate(&k.program, &target).unwrap();
            let quick = generate_quick(&k.program, &target).unwrap();
            // A load cache policy (the default for rows held across two
            // reductions) is not in the interpreter's forms either.
            assert!(
                !quick.text.contains("ld.global.nc.L2::cache_hint"),
                "{name}: a load policy in the quick text"
            );
            let modules = if defaults && !tuned.text.contains("ld.global.nc.L2::cache_hint") {
                vec![tuned, quick]
            } else {
                vec![quick]
            };
            for module in modules {
                let code = ptx_vm::assemble(&module, 232_448).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(code.block_threads, module.block_threads);
                // The core module, loaded first, runs it.
                assert!((code.max_form as usize) < ptx_vm::core_forms(), "{name}");
                assert!(code.program_shared >= module.shared_bytes, "{name}");
                println!(
                    "{name}: {} instructions, {} + {} register planes, {} bytes of shared memory",
                    code.instructions, code.planes[0], code.planes[1], code.shared_bytes
                );
            }
        }
    }
}

#[test]
fn rows_up_to_two_to_the_fourteen_stay_in_one_kernel_and_do_not_spill() {
    // Softmax, log-softmax, layer and RMS norm over rows of up to 2^14
    // (values computed in f32; 2^13 for f64): one kernel each on a GPU,
    // the row in registers, and no spills. Longer rows would need more
    // than 64 registers a thread at 1024 threads (f32 2^15 spills).
    let Some(ptxas) = ptxas_for_tests("tests/ptx_pipelines.rs (long rows)") else {
        return;
    };
    let mut modules = Modules::default();
    for (dtype, cols) in [
        (DType::F32, 16384),
        (DType::F32, 9001),
        (DType::F16, 16384),
        (DType::BF16, 12000),
        (DType::F64, 8192),
        (DType::F64, 5000),
    ] {
        let x = Inputs::Zeros(dtype);
        for (name, g) in [
            ("softmax", pipelines::softmax_of(x, 64, cols)),
            ("log_softmax", pipelines::log_softmax_of(x, 64, cols)),
            ("layer_norm", pipelines::layer_norm_of(x, 64, cols)),
            ("rms_norm", pipelines::rms_norm_of(x, 64, cols)),
        ] {
            let p = plan(&g, &FusionOptions::gpu()).unwrap();
            let here = format!("{name} {dtype}[64, {cols}]");
            assert_eq!(p.kernels.len(), 1, "{here}");
            modules
                .add(&here, &p.kernels[0].program)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let all = modules.assemble(&ptxas).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", summary(&all));
    for a in all.iter().filter(|a| a.sm == 90) {
        let r = &a.resources;
        let spilled = r.spill_store_bytes + r.spill_load_bytes;
        println!(
            "{}: {} threads, {} registers, {spilled} B spilled",
            a.label, a.module.block_threads, r.registers
        );
    }
    let spills: Vec<&str> = spilling(&all).iter().map(|a| a.label.as_str()).collect();
    assert!(spills.is_empty(), "spilling: {spills:?}");
}
