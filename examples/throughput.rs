//! The throughput report of BENCHMARKS.md: every pipeline of the suite on
//! the default device, as a share of the device's copy bandwidth measured in
//! the same run.
//!
//! ```text
//! cargo run --release --example throughput -- [--json PATH] [--reps N] [--only a,b] [--cpu] [--ptx DIR] [--f64] [--raw DIR] [--rotate N]
//! ```
//!
//! `--f64` measures f64 transcendentals (`suite::f64_suite`, not part of
//! BENCHMARKS.md) instead of the suite, the same way.
//!
//! `--rotate N` makes the timed calls cycle through N input sets, so no
//! call finds its inputs left in L2 by the one before (`compare_torch.py
//! --rotate N` times PyTorch the same way).
//!
//! `--raw DIR` also times each single-kernel pipeline's kernel without the
//! runtime: launched through `CompiledProgram::launch` on buffers of ones,
//! on one stream, each launch between its own two events (median), and 20
//! launches between two events (median of ten batches, per launch); the
//! PTX it loaded is written to `DIR/<pipeline>.ptx`. Every launch reuses
//! the same buffers, as the report's calls do without `--rotate`. Only
//! f32 and bf16 kernels without fills are timed this way.
//!
//! On a GPU (`Device::best()`), for each pipeline of the GPU suite:
//! 1. the first call: graph → fusion → PTX → module load → result on the
//!    device, wall time, with the fusion and compile parts;
//!    The first call runs the quick tier of each new kernel (see
//!    `CompiledProgram`); the report waits for the tuned modules
//!    (`CudaCompiler::finish_compiles`) and gives that time too;
//! 2. the full result, of the quick and of the tuned kernels, checked against the CPU executor on the same inputs,
//!    and the same pipeline on a small random input checked against the
//!    reference evaluator (the output memory is poisoned with NaNs first);
//! 3. `--reps` calls (default 100) after warm-up, each a freshly recorded
//!    expression, queued while the stream pool is held
//!    ([`CudaDevice::hold_streams`]) and timed with CUDA events around every
//!    launch on its stream; a call's time runs from its first launch's start
//!    to its last launch's end, and the median is reported.
//!
//! Then the host overhead of a cached pipeline on 4096 elements (the chain):
//! the wall time per call of recording + realizing + dropping, without the
//! device work (the calls are only queued), and end to end with a
//! synchronisation per call. Last, the first call of a new pipeline whose
//! inputs are still on the host (it compiles while it uploads), beside the
//! same uploads alone. `--json PATH` writes the figures in the schema of
//! `benches/compare_torch.py`.
//!
//! On the CPU it runs the CPU suite (chain and mse on [2^24], softmax and
//! layernorm on [4096, 1024]) timed with `Instant`, against a host memcpy.
//!
//! `--ptx DIR` needs no GPU: it writes the PTX of every kernel of the GPU
//! suite for sm_90 into `DIR`, and the first-call (quick) module into
//! `DIR/quick` where it differs, and prints each kernel's thread mapping.

#[path = "../benches/common/suite.rs"]
mod suite;

use json::json_string;
use std::time::{Duration, Instant};
use suite::{median, relative_error, tolerance, values, Pipeline};
use tilefuse::graph::reference;
use tilefuse::{Device, Error, Result, Tensor};

#[cfg(feature = "cuda")]
#[path = "throughput/gpu.rs"]
mod gpu;
#[cfg(feature = "cuda")]
#[path = "../benches/common/gpu_measure.rs"]
mod gpu_measure;
#[path = "../benches/common/json.rs"]
mod json;

/// Options from the command line.
#[derive(Debug, Default)]
struct Args {
    json: Option<String>,
    reps: usize,
    only: Vec<String>,
    cpu: bool,
    ptx: Option<String>,
    f64: bool,
    raw: Option<String>,
    rotate: usize,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args {
        reps: 100,
        rotate: 1,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--json" => args.json = Some(value()?),
            "--reps" => args.reps = value()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--only" => args.only = value()?.split(',').map(str::to_string).collect(),
            "--ptx" => args.ptx = Some(value()?),
            "--cpu" => args.cpu = true,
            "--f64" => args.f64 = true,
            "--raw" => args.raw = Some(value()?),
            "--rotate" => args.rotate = value()?.parse().map_err(|e| format!("--rotate: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.reps < 1 {
        return Err("--reps must be at least 1".into());
    }
    Ok(args)
}

/// One pipeline's figures.
#[derive(Debug, Clone)]
struct Row {
    pipeline: Pipeline,
    /// Median time of a cached call.
    time: Duration,
    /// Kernels launched per call.
    kernels: usize,
    /// Graph → result on the device, first call of the pipeline.
    first_call: Duration,
    /// The fusion and compile parts of the first call.
    first_fuse: Duration,
    first_compile: Duration,
    /// From the first call's start until every kernel of the pipeline ran
    /// its tuned module (GPU: the JIT's background tier); `None` on the CPU.
    tuned_after: Option<Duration>,
    /// Relative errors against the CPU executor and the reference.
    err_cpu: f64,
    err_ref: f64,
}

impl Row {
    fn gbps(&self) -> f64 {
        self.pipeline.bytes() as f64 / self.time.as_secs_f64() / 1e9
    }
}

/// Host overhead of a cached small pipeline, medians per call.
#[derive(Debug, Clone, Copy)]
struct Overhead {
    /// Recording the expression.
    record: Duration,
    /// `realize()` alone (the work is queued, not waited for).
    realize: Duration,
    /// Recording + realizing + dropping the result.
    host: Duration,
    /// The same plus waiting for the device.
    end_to_end: Duration,
    /// `host` while `other_uploads` other host tensors with device copies
    /// are alive.
    with_uploads: Duration,
    /// How many.
    other_uploads: usize,
    /// One bare launch of an already loaded one-block kernel
    /// (`CompiledProgram::launch`): the driver's share of the launch phase.
    bare_launch: Duration,
    /// Calls of the cached pipeline made while a new pipeline's tuned
    /// module compiled in the background; `None` when there was no tuned
    /// compile to time (no quick tier, or the driver's JIT cache answered).
    during_tuning: Option<DuringTuning>,
    /// The first call of a new pipeline on inputs still on the host.
    host_first_call: HostFirstCall,
}

/// The first call of a new pipeline whose inputs are uploaded by that call,
/// and the same uploads alone.
#[derive(Debug, Clone, Copy)]
struct HostFirstCall {
    /// Bytes the call uploaded.
    bytes: usize,
    /// Host buffers it uploaded.
    uploads: usize,
    /// From recording to the result on the device.
    first_call: Duration,
    /// Its compile phase.
    compile: Duration,
    /// Its inputs phase: the uploads' time beyond the compile.
    beyond_compile: Duration,
    /// Uploading the same sizes alone, in another realization.
    upload_alone: Duration,
}

/// Host times of calls of a cached pipeline made while another pipeline's
/// tuned module compiled: a launch held up by that compile shows as a long call.
#[derive(Debug, Clone, Copy)]
struct DuringTuning {
    /// Calls made before the tuned module was ready.
    calls: usize,
    /// Their median host time.
    median: Duration,
    /// Their longest host time.
    max: Duration,
    /// From the new pipeline's first call until its tuned module was ready.
    tuned_after: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The reference evaluator's value of an unrealized tensor.
fn reference_values(t: &Tensor) -> Result<Vec<f64>> {
    let out = reference::evaluate(&t.subgraph())?.remove(0);
    Ok((0..out.len()).map(|i| out.get(i).to_f64()).collect())
}

/// Checks `got` against `want` under the pipeline's tolerance.
fn check(p: &Pipeline, against: &str, got: &[f64], want: &[f64]) -> Result<f64> {
    let err = relative_error(got, want);
    if err <= tolerance(p.dtype) && want.iter().all(|w| w.is_finite()) {
        return Ok(err);
    }
    Err(Error::InvalidProgram {
        program: p.id.to_string(),
        reason: format!(
            "result differs from the {against}: relative error {err:.3e} (tolerance {:.0e})",
            tolerance(p.dtype)
        ),
    })
}

/// Runs `p` on `small_rows` rows of fresh random input on `device` and
/// checks it against the reference evaluator; returns the relative error.
fn check_small(p: &Pipeline, small_rows: usize, device: Device) -> Result<f64> {
    let small = p.resized(small_rows);
    let host = small.host_inputs(7);
    let on_device: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
    let y = small.build(&on_device);
    y.realize()?;
    check(
        p,
        "reference evaluator",
        &values(&y)?,
        &reference_values(&small.build(&host))?,
    )
}

/// The CPU suite, timed with `Instant`.
fn run_cpu(args: &Args) -> Result<(f64, Vec<Row>)> {
    let bytes = 256 << 20;
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut copies = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        copies.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    let copy_gbps = 2.0 * bytes as f64 / median(copies) / 1e9;
    let mut rows = vec![];
    for p in suite::cpu_suite().into_iter().filter(|p| selected(args, p)) {
        let inputs = p.host_inputs(1);
        let started = Instant::now();
        let y = p.build(&inputs);
        let stats = y.realize_with_stats()?;
        let first_call = started.elapsed();
        drop(y);
        let err_ref = check_small(&p, if p.shape.len() == 1 { 65_539 } else { 64 }, Device::Cpu)?;
        let mut times = vec![];
        for _ in 0..args.reps.min(7) {
            let t = Instant::now();
            let y = p.build(&inputs);
            y.realize()?;
            times.push(t.elapsed().as_secs_f64());
        }
        rows.push(Row {
            pipeline: p,
            time: Duration::from_secs_f64(median(times)),
            kernels: stats.kernels_launched,
            first_call,
            first_fuse: stats.fuse_time,
            first_compile: stats.compile_time,
            tuned_after: None,
            err_cpu: 0.0,
            err_ref,
        });
    }
    Ok((copy_gbps, rows))
}

/// The GPU pipelines `args` ask for: the suite, or with `--f64` the f64
/// transcendentals.
fn gpu_pipelines(args: &Args) -> Vec<Pipeline> {
    let all = if args.f64 {
        suite::f64_suite()
    } else {
        suite::gpu_suite()
    };
    all.into_iter().filter(|p| selected(args, p)).collect()
}

fn selected(args: &Args, p: &Pipeline) -> bool {
    args.only.is_empty() || args.only.iter().any(|o| o == p.id)
}

fn print_table(device: &str, copy_gbps: f64, rows: &[Row], overhead: Option<Overhead>) {
    println!("\ntilefuse throughput on {device}; copy bandwidth {copy_gbps:.0} GB/s (r + w)\n");
    println!(
        "| pipeline | dtype | shape | minimal bytes | time (ms) | GB/s | % of copy | kernels | first call (ms) | fuse + compile (ms) | tuned after (ms) | err vs CPU | err vs ref |"
    );
    println!("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {:.4} | {:.0} | {:.1} % | {} | {:.1} | {:.1} + {:.1} | {} | {:.1e} | {:.1e} |",
            r.pipeline.id,
            r.pipeline.dtype,
            r.pipeline.shape_text(),
            r.pipeline.bytes(),
            ms(r.time),
            r.gbps(),
            100.0 * r.gbps() / copy_gbps,
            r.kernels,
            ms(r.first_call),
            ms(r.first_fuse),
            ms(r.first_compile),
            r.tuned_after.map_or("—".to_string(), |d| format!("{:.1}", ms(d))),
            r.err_cpu,
            r.err_ref,
        );
    }
    if let Some(o) = overhead {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        println!(
            "\nhost overhead, cached chain on [4096], median per call: record {:.1} µs + realize {:.1} µs; \
             host per call (record + realize + drop) {:.1} µs; end to end (with synchronize) {:.1} µs; \
             a bare launch of a loaded kernel {:.1} µs",
            us(o.record),
            us(o.realize),
            us(o.host),
            us(o.end_to_end),
            us(o.bare_launch)
        );
        println!(
            "the same host per call with {} other host tensors with device copies alive: {:.1} µs",
            o.other_uploads,
            us(o.with_uploads)
        );
        match o.during_tuning {
            Some(t) => println!(
                "while a new pipeline's tuned module compiled ({:.1} ms after its first call), the cached chain ran \
                 {} calls: median {:.1} µs, longest {:.1} µs",
                ms(t.tuned_after),
                t.calls,
                us(t.median),
                us(t.max)
            ),
            None => println!(
                "no tuned compile to time calls against (no quick tier, or the driver's JIT cache held the module)"
            ),
        }
        let h = o.host_first_call;
        println!(
            "first call of a new pipeline on host data ({} uploads, {} MiB): {:.1} ms, its compile {:.1} ms with \
             the uploads alongside ({:.1} ms beyond the compile); the same uploads alone {:.1} ms",
            h.uploads,
            h.bytes >> 20,
            ms(h.first_call),
            ms(h.compile),
            ms(h.beyond_compile),
            ms(h.upload_alone)
        );
    }
}

fn write_json(path: &str, copy_gbps: f64, rows: &[Row], overhead: Option<Overhead>) -> Result<()> {
    let mut entries = vec![];
    for r in rows {
        entries.push(format!(
            "    {{\"pipeline\": \"{}\", \"dtype\": \"{}\", \"shape\": \"{}\", \"bytes\": {}, \"time_ms\": {:.6}, \
             \"gbps\": {:.3}, \"pct_copy\": {:.3}, \"kernels\": {}, \"first_call_ms\": {:.3}, \"tuned_after_ms\": {}}}",
            r.pipeline.id,
            r.pipeline.dtype,
            r.pipeline.shape_text(),
            r.pipeline.bytes(),
            ms(r.time),
            r.gbps(),
            100.0 * r.gbps() / copy_gbps,
            r.kernels,
            ms(r.first_call),
            r.tuned_after.map_or("null".to_string(), |d| format!("{:.3}", ms(d)))
        ));
    }
    let extra = overhead.map_or(String::new(), |o| {
        format!(
            "  \"host_overhead_us\": {{\"record\": {:.3}, \"realize\": {:.3}, \"host_per_call\": {:.3}, \"end_to_end\": {:.3}, \"bare_launch\": {:.3}, \
             \"host_per_call_with_uploads\": {:.3}}},\n  \
             \"during_tuning\": {},\n  \"host_first_call\": {{\"uploads\": {}, \"bytes\": {}, \"first_call_ms\": {:.3}, \
             \"compile_ms\": {:.3}, \"inputs_ms\": {:.3}, \"upload_alone_ms\": {:.3}}},\n",
            o.record.as_secs_f64() * 1e6,
            o.realize.as_secs_f64() * 1e6,
            o.host.as_secs_f64() * 1e6,
            o.end_to_end.as_secs_f64() * 1e6,
            o.bare_launch.as_secs_f64() * 1e6,
            o.with_uploads.as_secs_f64() * 1e6,
            o.during_tuning.map_or("null".to_string(), |t| format!(
                "{{\"calls\": {}, \"median_us\": {:.3}, \"max_us\": {:.3}, \"tuned_after_ms\": {:.3}}}",
                t.calls,
                t.median.as_secs_f64() * 1e6,
                t.max.as_secs_f64() * 1e6,
                ms(t.tuned_after)
            )),
            o.host_first_call.uploads,
            o.host_first_call.bytes,
            ms(o.host_first_call.first_call),
            ms(o.host_first_call.compile),
            ms(o.host_first_call.beyond_compile),
            ms(o.host_first_call.upload_alone)
        )
    });
    let settings: Vec<String> = tilefuse::config::active()
        .iter()
        .map(|(k, v)| format!("{}: {}", json_string(k), json_string(v)))
        .collect();
    let text = format!(
        "{{\n  \"copy_gbps\": {copy_gbps:.3},\n  \"settings\": {{{}}},\n{extra}  \"pipelines\": [\n{}\n  ]\n}}\n",
        settings.join(", "),
        entries.join(",\n")
    );
    std::fs::write(path, text).map_err(|e| Error::InvalidProgram {
        program: "throughput".into(),
        reason: format!("could not write {path}: {e}"),
    })
}

/// Writes the PTX of every kernel of the GPU suite for sm_90 into `dir`.
fn dump_ptx(args: &Args, dir: &str) -> Result<()> {
    use tilefuse::fusion::{plan, FusionOptions};
    use tilefuse::kernels::ptx_gen::{generate, generate_quick, PtxTarget};
    // Creates `dir` too.
    std::fs::create_dir_all(format!("{dir}/quick")).map_err(|e| Error::InvalidProgram {
        program: "throughput".into(),
        reason: format!("could not create {dir}/quick: {e}"),
    })?;
    let target = PtxTarget::for_driver(90, 13000);
    for p in gpu_pipelines(args) {
        let y = p.build(&p.host_inputs(1));
        for k in &plan(&y.subgraph(), &FusionOptions::gpu())?.kernels {
            let m = generate(&k.program, &target)?;
            let quick = generate_quick(&k.program, &target)?;
            let write = |path: String, text: &str| {
                std::fs::write(&path, text).map_err(|e| Error::InvalidProgram {
                    program: p.id.into(),
                    reason: format!("could not write {path}: {e}"),
                })
            };
            write(format!("{dir}/{}__{}.ptx", p.id, m.entry), &m.text)?;
            if quick.text != m.text {
                write(format!("{dir}/quick/{}__{}.ptx", p.id, m.entry), &quick.text)?;
            }
            println!(
                "{}: {} ({} bytes of PTX)\n  {}",
                p.id,
                m.entry,
                m.text.len(),
                m.mapping.replace('\n', "\n  ")
            );
        }
    }
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("throughput: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("throughput: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    if let Some(dir) = &args.ptx {
        return dump_ptx(args, dir);
    }
    let device = if args.cpu { Device::Cpu } else { Device::best() };
    println!("device: {}", Device::best_reason());
    let settings: Vec<String> = tilefuse::config::active()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if settings.is_empty() {
        println!("settings: none set (the defaults)");
    } else {
        println!("settings: {}", settings.join(" "));
    }
    let (copy_gbps, rows, overhead) = match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(_) => {
            let (copy, rows, overhead) = gpu::run(args, device)?;
            (copy, rows, Some(overhead))
        }
        _ => {
            let (copy, rows) = run_cpu(args)?;
            (copy, rows, None)
        }
    };
    print_table(&device.to_string(), copy_gbps, &rows, overhead);
    if let Some(path) = &args.json {
        write_json(path, copy_gbps, &rows, overhead)?;
        println!("\nwrote {path}");
    }
    Ok(())
}
