//! The random sweep of BENCHMARKS.md: seeded random cases of the classes
//! users write, each checked and then timed on the default device, as a
//! share of the device's copy bandwidth measured in the same run.
//!
//! ```text
//! cargo run --release --example sweep -- [--seed S] [--start K] [--cases N] [--only CLASS[,CLASS]]
//!     [--reps N] [--json PATH] [--cpu] [--sizes gpu|cpu] [--list] [--ptx DIR] [--measure]
//!     [--dims D0,D1,...] [--dtype f32|f16|bf16|f64]
//! ```
//!
//! The cases (`benches/common/sweep_cases.rs`): case `i` of seed `S` is
//! drawn from its own generator, its class cycling through reduce_inner,
//! reduce_outer, reduce_transposed, row_norm, stats, argmax and
//! elementwise; `--only` keeps the cases of some classes, and `--start K
//! --cases N` takes N of them from the K-th on (default 0 and 200), so a
//! long sweep can be split across calls with the same ids. Sizes: on a GPU
//! every case's minimal bytes (inputs read once + outputs written once) lie
//! in 256 MiB–1.5 GiB, on the CPU in 32–128 MiB (`--sizes` picks either
//! whatever the device). `--list` prints the cases and their class counts
//! and runs nothing; `--ptx DIR` writes each case's kernels as planned for
//! a GPU (tile programs, sm_90 PTX, `ptxas -v` resources where `ptxas` is
//! found) and runs nothing, with or without a GPU. `--dims` and `--dtype`
//! replace the drawn shape of `x` and the dtype of every case (an op's
//! other parameters stay as drawn), for a fixed shape beside PyTorch, e.g.
//! `--only index --cases 1 --dims 16384,32768 --dtype f32` for the
//! cross-entropy of 16384 rows of 32768 logits; a case whose rank differs
//! from `--dims` is an error.
//!
//! For each case, on fresh random inputs (never all zeros):
//! 1. the first call: wall time from recording the expression to its
//!    synchronised result, with nothing of the case cached in the process
//!    (other cases of the same structure aside);
//! 2. the check, before any timing: on a GPU against the CPU executor on
//!    the same inputs, the first call's result and then, once the tuned
//!    modules are loaded, a second call's (the outputs' memory is poisoned
//!    with NaNs first); on the CPU against the case's f64 value computed
//!    from its spec (`sweep_reference::evaluate`). Tolerances: relative
//!    error 1e-4 (f32), 1e-2 (f16, bf16), 1e-10 (f64); indices exactly. A
//!    case that fails is reported with the error and not timed;
//! 3. the timed calls (`--reps`, default 50 on a GPU and 5 on the CPU),
//!    each a freshly recorded expression: on a GPU after three warm-up
//!    calls, queued while the stream pool is held and timed with CUDA
//!    events around every launch, a call's time running from its first
//!    launch's start to its last launch's end; on the CPU with `Instant`
//!    around recording and realizing. The median is reported;
//! 4. with `--measure` (GPU only), the codegen candidates of the case's
//!    kernels are then measured (`Tensor::measure_choices`, which records
//!    the choices in the choices directory, `TILEFUSE_CHOICES`), and the
//!    case is checked and timed again under what was chosen: the table's
//!    result column and `measured_ms`/`choices` in the JSON, and the
//!    summary's ratio of default to measured times.
//!
//! Copy bandwidth, measured first: on a GPU `CudaDevice::copy_bandwidth`
//! of 1 GiB; on the CPU a 256 MiB host `memcpy` split over the executor's
//! threads (the executor runs on all of them), bytes read + written.
//! `kernels` and `strategy` come from the case's fusion plan.
//!
//! Output: a table line per case, then the distribution of % of copy over
//! the passed cases (median, 10th percentile, min), per-class medians and
//! the failures. `--json PATH` writes the figures, rewritten after every
//! case so a run cut short keeps what it measured:
//!
//! ```text
//! {"copy_gbps": f64, "device": str, "seed": u64, "start": usize, "reps": usize,
//!  "scale": {"min_bytes": u64, "max_bytes": u64}, "settings": {str: str},
//!  "cases": [{"case": str (stable id), "class": str, "description": str,
//!             "spec": {...} (see compare_torch.py), "bytes": u64,
//!             "time_ms", "gbps", "pct_copy", "first_call_ms", "rel_error": f64 | null,
//!             "kernels": usize | null, "strategy": str | null,
//!             "ok": bool, "error": str | null,
//!             "measured_ms": f64 | null, "choices": str | null}, ...]}
//! ```
//! `benches/compare_torch.py --sweep PATH` rebuilds the cases in PyTorch.

#[path = "../benches/common/sweep_cases.rs"]
mod sweep_cases;

#[path = "../benches/common/json.rs"]
mod json;

#[cfg(feature = "cuda")]
#[path = "../benches/common/gpu_measure.rs"]
mod gpu_measure;

#[cfg(feature = "cuda")]
#[path = "sweep/gpu.rs"]
mod gpu;

#[path = "sweep/report.rs"]
mod report;

#[path = "sweep/ptx.rs"]
mod ptx;

use rayon::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sweep_cases::reference::{self, HostData};
use sweep_cases::{Case, Class, Scale};
use tilefuse::fusion::Plan;
use tilefuse::{Config, DType, Device, Tensor};

const USAGE: &str = "usage: sweep [--seed S] [--start K] [--cases N] [--only CLASS[,CLASS]] [--reps N] \
                     [--json PATH] [--cpu] [--sizes gpu|cpu] [--list] [--ptx DIR] [--measure] \
                     [--dims D0,D1,...] [--dtype f32|f16|bf16|f64]";

/// Options from the command line.
#[derive(Debug)]
pub struct Args {
    seed: u64,
    start: usize,
    cases: usize,
    only: Vec<Class>,
    reps: Option<usize>,
    json: Option<String>,
    cpu: bool,
    sizes: Option<Scale>,
    list: bool,
    ptx: Option<String>,
    measure: bool,
    dims: Option<Vec<usize>>,
    dtype: Option<DType>,
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        seed: 1,
        start: 0,
        cases: 200,
        only: vec![],
        reps: None,
        json: None,
        cpu: false,
        sizes: None,
        list: false,
        ptx: None,
        measure: false,
        dims: None,
        dtype: None,
    };
    let mut it = args;
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{a} {v}: {e}"));
        match a.as_str() {
            "--seed" => {
                let v = value()?;
                out.seed = v.parse().map_err(|e| format!("--seed {v}: {e}"))?;
            }
            "--start" => out.start = number(value()?)?,
            "--cases" => out.cases = number(value()?)?,
            "--reps" => {
                out.reps = Some(number(value()?)?).filter(|&r| r >= 1);
                if out.reps.is_none() {
                    return Err("--reps must be at least 1".into());
                }
            }
            "--json" => out.json = Some(value()?),
            "--cpu" => out.cpu = true,
            "--list" => out.list = true,
            "--measure" => out.measure = true,
            "--ptx" => out.ptx = Some(value()?),
            "--sizes" => {
                out.sizes = Some(match value()?.as_str() {
                    "gpu" => Scale::GPU,
                    "cpu" => Scale::CPU,
                    other => return Err(format!("--sizes takes gpu or cpu, not {other}")),
                })
            }
            "--only" => {
                for name in value()?.split(',').filter(|n| !n.is_empty()) {
                    let class = Class::parse(name).ok_or_else(|| {
                        let known: Vec<&str> = Class::every().map(|c| c.name()).collect();
                        format!("--only: no class {name}; the classes are {}", known.join(", "))
                    })?;
                    out.only.push(class);
                }
            }
            "--dims" => {
                let v = value()?;
                let dims = v
                    .split(',')
                    .map(|d| d.trim().parse::<usize>().ok().filter(|&d| d > 0))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or(format!("--dims {v}: expected positive extents separated by commas"))?;
                out.dims = Some(dims);
            }
            "--dtype" => {
                out.dtype = Some(match value()?.as_str() {
                    "f32" => DType::F32,
                    "f16" => DType::F16,
                    "bf16" => DType::BF16,
                    "f64" => DType::F64,
                    other => return Err(format!("--dtype takes f32, f16, bf16 or f64, not {other}")),
                })
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(out)
}

/// A case that did not pass, and why.
pub struct Failure(String);

impl From<tilefuse::Error> for Failure {
    fn from(e: tilefuse::Error) -> Failure {
        Failure(e.to_string())
    }
}

/// What was measured of one case; `None` where it was not reached.
#[derive(Debug, Default)]
pub struct Measured {
    pub first_call: Option<Duration>,
    /// Median time of a call.
    pub time: Option<Duration>,
    /// Kernels of the case's fusion plan.
    pub kernels: Option<usize>,
    pub strategy: Option<String>,
    /// The largest relative error of the checks.
    pub rel_error: Option<f64>,
    pub error: Option<String>,
    /// With `--measure`: the median time once the kernels' codegen
    /// candidates were measured, and the label chosen for each kernel.
    pub measured_time: Option<Duration>,
    pub choices: Option<String>,
}

/// One case and its figures.
pub struct Row {
    pub case: Case,
    pub m: Measured,
}

impl Row {
    pub fn gbps(&self) -> Option<f64> {
        let t = self.m.time?;
        Some(self.case.bytes() as f64 / t.as_secs_f64() / 1e9)
    }

    pub fn ok(&self) -> bool {
        self.m.error.is_none()
    }
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("sweep: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&args) {
        eprintln!("sweep: {e}");
        std::process::exit(1);
    }
}

/// `cases` with the shape of `x` and the dtype `--dims` and `--dtype` give.
/// A case whose rank differs from `--dims` ends the run.
fn fixed(mut cases: Vec<Case>, args: &Args) -> Vec<Case> {
    for c in &mut cases {
        if let Some(dims) = &args.dims {
            if dims.len() != c.dims.len() {
                eprintln!(
                    "sweep: --dims {dims:?} has rank {}, but {} ({}) takes x of rank {}",
                    dims.len(),
                    c.id(),
                    c.describe(),
                    c.dims.len()
                );
                std::process::exit(2);
            }
            c.dims = dims.clone();
        }
        if let Some(dtype) = args.dtype {
            c.dtype = dtype;
        }
    }
    cases
}

fn run(args: &Args) -> tilefuse::Result<()> {
    let device = if args.cpu { Device::Cpu } else { Device::best() };
    let on_gpu = matches!(device, Device::Cuda(_));
    let scale = args.sizes.unwrap_or(if on_gpu { Scale::GPU } else { Scale::CPU });
    let cases = fixed(
        sweep_cases::cases(args.seed, args.start, args.cases, &args.only, scale),
        args,
    );
    if args.list {
        report::print_list(&cases, scale);
        return Ok(());
    }
    if let Some(dir) = &args.ptx {
        let cases = fixed(
            sweep_cases::cases(
                args.seed,
                args.start,
                args.cases,
                &args.only,
                args.sizes.unwrap_or(Scale::GPU),
            ),
            args,
        );
        if let Err(e) = ptx::write(&cases, dir) {
            eprintln!("sweep: {e}");
            std::process::exit(1);
        }
        return Ok(());
    }
    let reps = args.reps.unwrap_or(if on_gpu { 50 } else { 5 });
    println!("device: {}", Device::best_reason());
    let mut backend = Backend::open(device)?;
    let copy_gbps = backend.copy_gbps()?;
    println!("{}", report::header(&backend.name(), copy_gbps));
    let mut rows = vec![];
    for case in cases {
        let mut m = Measured::default();
        let result = catch_unwind(AssertUnwindSafe(|| backend.measure(&case, reps, args.measure, &mut m)));
        m.error = match result {
            Ok(Ok(())) => None,
            Ok(Err(Failure(e))) => Some(e),
            Err(panic) => Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )),
        };
        let row = Row { case, m };
        println!("{}", report::line(&row, copy_gbps));
        rows.push(row);
        if let Some(path) = &args.json {
            let doc = report::json(&backend.name(), copy_gbps, args, reps, scale, &rows);
            std::fs::write(path, doc).map_err(|e| tilefuse::Error::InvalidProgram {
                program: "sweep".into(),
                reason: format!("could not write {path}: {e}"),
            })?;
        }
    }
    println!("\n{}", report::summary(&rows, copy_gbps));
    if let Some(path) = &args.json {
        println!("wrote {path}");
    }
    Ok(())
}

/// Where the cases run.
enum Backend {
    Cpu,
    #[cfg(feature = "cuda")]
    Gpu(gpu::Gpu),
}

impl Backend {
    fn open(device: Device) -> tilefuse::Result<Backend> {
        match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(ordinal) => Ok(Backend::Gpu(gpu::Gpu::open(ordinal)?)),
            _ => Ok(Backend::Cpu),
        }
    }

    fn name(&self) -> String {
        match self {
            Backend::Cpu => format!("cpu ({} threads)", rayon::current_num_threads()),
            #[cfg(feature = "cuda")]
            Backend::Gpu(g) => g.name(),
        }
    }

    fn copy_gbps(&mut self) -> tilefuse::Result<f64> {
        match self {
            Backend::Cpu => Ok(host_copy_gbps()),
            #[cfg(feature = "cuda")]
            Backend::Gpu(g) => g.copy_gbps(),
        }
    }

    fn measure(&self, case: &Case, reps: usize, choose: bool, m: &mut Measured) -> Result<(), Failure> {
        // `--measure` chooses GPU codegen candidates: the CPU has none.
        #[cfg(not(feature = "cuda"))]
        let _ = choose;
        match self {
            Backend::Cpu => measure_cpu(case, reps, m),
            #[cfg(feature = "cuda")]
            Backend::Gpu(g) => g.measure(case, reps, choose, m),
        }
    }
}

/// Bytes of the host copy that measures the CPU's bandwidth.
const HOST_COPY_BYTES: usize = 256 << 20;

/// Host copy bandwidth (GB/s, bytes read + written): the median of five
/// copies of [`HOST_COPY_BYTES`] after one that touches the pages, split
/// into one part per thread of the pool the CPU executor runs on.
fn host_copy_gbps() -> f64 {
    let src = vec![0x5au8; HOST_COPY_BYTES];
    let mut dst = vec![0u8; HOST_COPY_BYTES];
    let part = HOST_COPY_BYTES.div_ceil(rayon::current_num_threads());
    let mut times = vec![];
    for _ in 0..6 {
        let t = Instant::now();
        dst.par_chunks_mut(part)
            .zip(std::hint::black_box(&src).par_chunks(part))
            .for_each(|(d, s)| d.copy_from_slice(s));
        times.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    2.0 * HOST_COPY_BYTES as f64 / median(times[1..].to_vec()) / 1e9
}

/// The median of `v` (the mean of the two middle values for an even
/// count, as `benches/compare_torch.py` computes it).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 0 => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        _ => v[n / 2],
    }
}

/// Realizes `outputs` together, on their device.
pub fn realize(outputs: &[Tensor]) -> tilefuse::Result<()> {
    Tensor::realize_all(&outputs.iter().collect::<Vec<_>>())
}

/// The fusion plan realizing `outputs` together would run.
pub fn plan_of(outputs: &[Tensor]) -> tilefuse::Result<Arc<Plan>> {
    let nodes: Vec<_> = outputs.iter().map(Tensor::node).collect();
    let options = tilefuse::runtime::fusion_options(outputs[0].device(), &Config::current().fusion);
    tilefuse::fusion::plan(&tilefuse::graph::extract(&nodes), &options)
}

/// The plan's strategy as the report labels it: each kernel's program
/// name, grid and chosen schedule.
pub fn strategy(plan: &Plan) -> String {
    let kernels: Vec<String> = plan
        .kernels
        .iter()
        .map(|k| format!("{}{:?} ({})", k.program.name, k.program.grid.as_slice(), k.strategy))
        .collect();
    kernels.join(" + ")
}

/// Records the kernels and strategy of the plan of a fresh `case.build`
/// over `inputs` (not realized: a realized node plans to nothing).
pub fn record_plan(case: &Case, inputs: &[Tensor], m: &mut Measured) -> Result<(), Failure> {
    let outputs = case.build(inputs)?;
    let plan = plan_of(&outputs)?;
    m.kernels = Some(plan.kernels.len());
    m.strategy = Some(strategy(&plan));
    Ok(())
}

/// Checks that `outputs` have the case's shapes and dtype.
pub fn check_shapes(case: &Case, outputs: &[Tensor]) -> Result<(), Failure> {
    let want = case.output_shapes();
    let dtypes = case.output_dtypes();
    if outputs.len() != want.len() {
        return Err(Failure(format!(
            "{} outputs where the case has {}",
            outputs.len(),
            want.len()
        )));
    }
    for (k, ((o, w), d)) in outputs.iter().zip(&want).zip(dtypes).enumerate() {
        if o.dims() != w.as_slice() || o.dtype() != d {
            return Err(Failure(format!(
                "output {k} is {} {:?} where the case expects {d} {w:?}",
                o.dtype(),
                o.dims(),
            )));
        }
    }
    Ok(())
}

/// Checks each of `outputs` against `want` (computed by `against`);
/// returns the largest relative error.
pub fn check(case: &Case, outputs: &[Tensor], want: &[Vec<f64>], against: &str) -> Result<f64, Failure> {
    let mut worst = 0.0f64;
    for (k, ((o, w), d)) in outputs.iter().zip(want).zip(case.output_dtypes()).enumerate() {
        let got = reference::values(o)?;
        let err = reference::compare(&got, w, d)
            .map_err(|e| Failure(format!("output {k} differs from the {against}: {e}")))?;
        worst = worst.max(err);
    }
    Ok(worst)
}

/// Host tensors of the case's inputs.
pub fn host_tensors(case: &Case, data: Vec<HostData>) -> Vec<Tensor> {
    data.into_iter()
        .zip(case.inputs())
        .map(|(d, input)| d.into_tensor(&input.shape))
        .collect()
}

/// The fresh recording of `case` over `inputs`, refusing one that is
/// already computed (a result still alive that the recording was merged
/// into would time nothing).
pub fn fresh(case: &Case, inputs: &[Tensor]) -> tilefuse::Result<Vec<Tensor>> {
    let outputs = case.build(inputs)?;
    if outputs.iter().any(Tensor::is_realized) {
        return Err(tilefuse::Error::InvalidProgram {
            program: case.id(),
            reason: "the expression was already computed".into(),
        });
    }
    Ok(outputs)
}

/// A case on the CPU: checked against its f64 value, timed with `Instant`.
fn measure_cpu(case: &Case, reps: usize, m: &mut Measured) -> Result<(), Failure> {
    let data = reference::host_inputs(case);
    let values: Vec<Vec<f64>> = data.iter().map(HostData::to_f64).collect();
    let inputs = host_tensors(case, data);

    let started = Instant::now();
    let outputs = fresh(case, &inputs)?;
    realize(&outputs)?;
    m.first_call = Some(started.elapsed());
    check_shapes(case, &outputs)?;
    let want = reference::evaluate(case, &values);
    drop(values);
    m.rel_error = Some(check(case, &outputs, &want, "f64 reference")?);
    drop((outputs, want));
    record_plan(case, &inputs, m)?;

    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let outputs = fresh(case, &inputs)?;
        realize(&outputs)?;
        times.push(t.elapsed().as_secs_f64());
    }
    m.time = Some(Duration::from_secs_f64(median(times)));
    Ok(())
}
