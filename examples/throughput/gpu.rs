//! The GPU half of the throughput report: copy bandwidth, each pipeline's
//! first call, checks and event-timed median, and the host overhead of a
//! cached small pipeline.

use super::{check, check_small, gpu_measure, median, suite, Args, DuringTuning, HostFirstCall, Overhead, Row};
use std::sync::Arc;
use std::time::{Duration, Instant};
use suite::{values, Pipeline};
use tilefuse::device::cuda::{CudaCompiler, CudaDevice, Event};
use tilefuse::graph::UnaryOp;
use tilefuse::kernels::ir::{Access, Builder, IndexExpr};
use tilefuse::runtime::RealizeStats;
use tilefuse::tile::Padding;
use tilefuse::{DType, Device, Error, Result, Tensor};

/// Bytes of the copy that measures the bandwidth.
const COPY_BYTES: usize = 1 << 30;
/// Untimed calls before the timed ones.
const WARMUP: usize = 3;
/// Calls of the host-overhead measurement.
const OVERHEAD_CALLS: usize = 2000;

/// Copy bandwidth (GB/s), the pipelines' rows, and the host overhead.
pub(super) fn run(args: &Args, device: Device) -> Result<(f64, Vec<Row>, Overhead)> {
    let Device::Cuda(ordinal) = device else {
        unreachable!("called for CUDA devices only")
    };
    let compiler = CudaCompiler::open(ordinal)?;
    let dev = compiler.device();
    let copy_gbps = dev.copy_bandwidth(COPY_BYTES)?;
    println!("copy bandwidth: {copy_gbps:.0} GB/s ({} MiB, r + w)", COPY_BYTES >> 20);
    // Loaded in the background since the device opened; first calls of new
    // pipelines run on it.
    match compiler.wait_interpreter() {
        Ok(took) => println!(
            "ptx interpreter: core forms loaded after {:.1} ms, all forms after {}, in the background from the device's opening",
            super::ms(took.core),
            match (took.full, &took.full_error) {
                (Some(t), _) => format!("{:.1} ms", super::ms(t)),
                (None, Some(e)) => format!("(failed: {e})"),
                (None, None) => "(not loaded)".to_string(),
            }
        ),
        Err(e) => println!("ptx interpreter: not used ({e})"),
    }
    let mut rows = vec![];
    for p in super::gpu_pipelines(args) {
        let row = measure(&p, &compiler, device, args.reps, args.rotate.max(1))?;
        println!(
            "{:<15} {:>9.4} ms {:>6.1} % of copy, first call {:>7.1} ms (fuse {:.1}, compile {:.1}), tuned after {:.1} ms, errors {:.1e} / {:.1e}",
            p.id,
            super::ms(row.time),
            100.0 * row.gbps() / copy_gbps,
            super::ms(row.first_call),
            super::ms(row.first_fuse),
            super::ms(row.first_compile),
            row.tuned_after.map_or(0.0, super::ms),
            row.err_cpu,
            row.err_ref
        );
        rows.push(row);
        if let Some(dir) = &args.raw {
            if let Some((each, batched)) = raw_kernel(&compiler, &p, device, dir)? {
                println!(
                    "{:<15} kernel alone: {:.1} µs a launch timed one by one, {:.1} µs a launch 20 back to back",
                    p.id,
                    each.as_secs_f64() * 1e6,
                    batched.as_secs_f64() * 1e6
                );
            }
        }
    }
    let overhead = host_overhead(&compiler, device)?;
    Ok((copy_gbps, rows, overhead))
}

/// Poisons the memory `p`'s output will likely land on (see
/// [`gpu_measure::poison`]).
fn poison(dev: &Arc<CudaDevice>, p: &Pipeline) -> Result<()> {
    let len = p.output_shape().iter().product::<usize>().max(1);
    gpu_measure::poison(dev, &[len * p.dtype.size_in_bytes()])
}

fn measure(p: &Pipeline, compiler: &Arc<CudaCompiler>, device: Device, reps: usize, rotate: usize) -> Result<Row> {
    let dev = compiler.device();
    let host = p.host_inputs(1);
    let inputs: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
    Tensor::realize_all(&inputs.iter().collect::<Vec<_>>())?;
    poison(dev, p)?;

    // The first call: nothing of this pipeline is cached yet.
    let started = Instant::now();
    let y = p.build(&inputs);
    let stats = y.realize_with_stats()?;
    let queued = started.elapsed();
    dev.synchronize()?;
    let first_call = started.elapsed();
    println!(
        "{}: first call queued after {:.1} ms (record {:.1}, {}; {} uploads), result after {:.1} ms",
        p.id,
        super::ms(queued),
        super::ms(queued.saturating_sub(stats.total_time)),
        stats
            .phases()
            .iter()
            .map(|(name, d)| format!("{name} {:.1}", super::ms(*d)))
            .collect::<Vec<_>>()
            .join(", "),
        stats.uploads,
        super::ms(first_call)
    );

    compiler.finish_compiles();
    let tuned_after = started.elapsed();
    let want = p.build(&host);
    want.realize()?;
    let want = values(&want)?;
    let quick = check(p, "CPU executor", &values(&y)?, &want)?;
    drop(y);
    poison(dev, p)?;
    let y = p.build(&inputs);
    y.realize()?;
    let err_cpu = quick.max(check(p, "CPU executor (tuned kernels)", &values(&y)?, &want)?);
    drop((y, want));
    let err_ref = check_small(p, if p.shape.len() == 1 { 65_539 } else { 64 }, device)?;

    let kernels = stats.kernels_launched;
    // The timed calls cycle through `rotate` input sets (the first is `inputs`).
    let mut sets = vec![inputs.clone()];
    for k in 1..rotate {
        let more: Vec<Tensor> = p.host_inputs(1 + k as u64).iter().map(|t| t.to(device)).collect();
        Tensor::realize_all(&more.iter().collect::<Vec<_>>())?;
        sets.push(more);
    }
    for i in 0..WARMUP {
        p.build(&sets[i % rotate]).realize()?;
    }
    dev.synchronize()?;
    let samples = gpu_measure::timed_calls(dev, reps, kernels, |call| {
        let y = p.build(&sets[call % rotate]);
        if y.is_realized() {
            return Err(recomputed(p, "the expression was already computed"));
        }
        if y.realize_with_stats()?.kernels_launched != kernels {
            return Err(recomputed(p, "a call launched a different number of kernels"));
        }
        Ok(())
    })?;
    Ok(Row {
        pipeline: p.clone(),
        time: Duration::from_secs_f64(median(samples)),
        kernels,
        first_call,
        first_fuse: stats.fuse_time,
        first_compile: stats.compile_time,
        tuned_after: Some(tuned_after),
        err_cpu,
        err_ref,
    })
}

fn recomputed(p: &Pipeline, reason: &str) -> Error {
    Error::InvalidProgram {
        program: p.id.to_string(),
        reason: reason.to_string(),
    }
}

/// The host overhead of the chain on 4096 elements, once cached.
fn host_overhead(compiler: &Arc<CudaCompiler>, device: Device) -> Result<Overhead> {
    let dev = compiler.device();
    let p = suite::small_chain();
    let host = p.host_inputs(3);
    let inputs: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
    Tensor::realize_all(&inputs.iter().collect::<Vec<_>>())?;
    let y = p.build(&inputs);
    y.realize()?;
    let want = p.build(&host);
    check(&p, "CPU executor", &values(&y)?, &values(&want)?)?;
    drop((y, want));
    compiler.finish_compiles();
    for _ in 0..200 {
        p.build(&inputs).realize()?;
    }
    dev.synchronize()?;
    let (mut record, mut realize, mut total) = (vec![], vec![], vec![]);
    let mut phases: [Vec<f64>; 7] = Default::default();
    for i in 0..OVERHEAD_CALLS {
        let t0 = Instant::now();
        let y = p.build(&inputs);
        let t1 = Instant::now();
        let stats = y.realize_with_stats()?;
        let t2 = Instant::now();
        for (v, (_, d)) in phases.iter_mut().zip(stats.phases()) {
            v.push(d.as_secs_f64());
        }
        drop(y);
        let t3 = Instant::now();
        record.push((t1 - t0).as_secs_f64());
        realize.push((t2 - t1).as_secs_f64());
        total.push((t3 - t0).as_secs_f64());
        if i % 64 == 63 {
            dev.synchronize()?;
        }
    }
    let parts: Vec<String> = RealizeStats::default()
        .phases()
        .iter()
        .map(|(name, _)| name)
        .zip(phases)
        .map(|(n, v)| format!("{n} {:.2}", median(v) * 1e6))
        .collect();
    println!("realize phases of a cached call, medians in µs: {}", parts.join(", "));
    let mut end_to_end = vec![];
    for _ in 0..OVERHEAD_CALLS / 4 {
        let t0 = Instant::now();
        let y = p.build(&inputs);
        y.realize()?;
        dev.synchronize()?;
        drop(y);
        end_to_end.push(t0.elapsed().as_secs_f64());
    }
    let with_uploads = with_other_uploads(dev, device, &p, &inputs)?;
    let d = |v: Vec<f64>| Duration::from_secs_f64(median(v));
    Ok(Overhead {
        record: d(record),
        realize: d(realize),
        host: d(total),
        end_to_end: d(end_to_end),
        with_uploads,
        other_uploads: OTHER_UPLOADS,
        bare_launch: d(bare_launches(compiler)?),
        during_tuning: calls_during_tuning(compiler, device, &p, &inputs)?,
        host_first_call: host_first_call(compiler, device)?,
    })
}

/// Host tensors with device copies besides the cached chain's inputs, for
/// [`with_other_uploads`]: a model's weights kept as host tensors.
const OTHER_UPLOADS: usize = 1000;

/// Record + realize + drop of the cached chain (median per call) while
/// [`OTHER_UPLOADS`] other host tensors with device copies are alive.
fn with_other_uploads(dev: &Arc<CudaDevice>, device: Device, p: &Pipeline, inputs: &[Tensor]) -> Result<Duration> {
    let others: Vec<Tensor> = (0..OTHER_UPLOADS)
        .map(|i| Tensor::from_vec(vec![i as f32; 16], &[16]).to(device))
        .collect();
    Tensor::realize_all(&others.iter().collect::<Vec<_>>())?;
    for _ in 0..200 {
        p.build(inputs).realize()?;
    }
    dev.synchronize()?;
    let mut host = vec![];
    for i in 0..OVERHEAD_CALLS {
        let t0 = Instant::now();
        let y = p.build(inputs);
        y.realize()?;
        drop(y);
        host.push(t0.elapsed().as_secs_f64());
        if i % 64 == 63 {
            dev.synchronize()?;
        }
    }
    drop(others);
    dev.synchronize()?;
    Ok(Duration::from_secs_f64(median(host)))
}

/// The first call of a new pipeline (mean squared error at a shape of its
/// own, [2^24]) whose inputs are still on the host, beside uploading the
/// same bytes alone: the run compiles while it uploads, so the call should
/// take about the longer of the two rather than their sum. The result is
/// checked against the CPU executor.
fn host_first_call(compiler: &Arc<CudaCompiler>, device: Device) -> Result<HostFirstCall> {
    let dev = compiler.device();
    let q = Pipeline {
        shape: vec![1 << 24],
        ..suite::gpu_pipeline("mse")
    };
    compiler.finish_compiles();
    dev.synchronize()?;
    // Uploads alone: other host tensors of the same sizes, twice, timing
    // the second, whose blocks come from the allocator's cache as the first
    // call's do.
    let mut upload_alone = Duration::ZERO;
    for seed in [5, 7] {
        let others: Vec<Tensor> = q.host_inputs(seed).iter().map(|t| t.to(device)).collect();
        let started = Instant::now();
        Tensor::realize_all(&others.iter().collect::<Vec<_>>())?;
        dev.synchronize()?;
        upload_alone = started.elapsed();
    }

    let host = q.host_inputs(9);
    let inputs: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
    let started = Instant::now();
    let y = q.build(&inputs);
    let stats = y.realize_with_stats()?;
    dev.synchronize()?;
    let first_call = started.elapsed();
    check(&q, "CPU executor", &values(&y)?, &values(&q.build(&host))?)?;
    compiler.finish_compiles();
    Ok(HostFirstCall {
        bytes: stats.upload_bytes,
        uploads: stats.uploads,
        first_call,
        compile: stats.compile_time,
        beyond_compile: stats.upload_time,
        upload_alone,
    })
}

/// Calls `p` (cached, on `inputs`) again and again while a pipeline no
/// call compiled before (the column sum at a shape of its own) has its tuned
/// module compiled in the background, after checking that pipeline's first
/// result. A launch that had to wait for the compile shows as a long call.
/// `None` when no tuned module was left to compile after the first call
/// (no quick tier, or the driver's JIT cache held both modules): the
/// measurement needs `CUDA_CACHE_DISABLE=1` or a cold cache.
fn calls_during_tuning(
    compiler: &Arc<CudaCompiler>,
    device: Device,
    p: &Pipeline,
    inputs: &[Tensor],
) -> Result<Option<DuringTuning>> {
    let dev = compiler.device();
    let q = Pipeline {
        shape: vec![6144, 3072],
        ..suite::gpu_pipeline("colsum")
    };
    let host = q.host_inputs(5);
    let q_inputs: Vec<Tensor> = host.iter().map(|t| t.to(device)).collect();
    Tensor::realize_all(&q_inputs.iter().collect::<Vec<_>>())?;
    compiler.finish_compiles();
    dev.synchronize()?;
    let started = Instant::now();
    let y = q.build(&q_inputs);
    y.realize()?;
    let mut times = vec![];
    while compiler.pending_compiles() > 0 && times.len() < 1_000_000 {
        let t = Instant::now();
        p.build(inputs).realize()?;
        times.push(t.elapsed().as_secs_f64());
        if times.len() % 64 == 0 {
            dev.synchronize()?;
        }
    }
    compiler.finish_compiles();
    let tuned_after = started.elapsed();
    dev.synchronize()?;
    check(&q, "CPU executor", &values(&y)?, &values(&q.build(&host))?)?;
    if times.is_empty() {
        return Ok(None);
    }
    let max = times.iter().copied().fold(0.0, f64::max);
    Ok(Some(DuringTuning {
        calls: times.len(),
        median: Duration::from_secs_f64(median(times)),
        max: Duration::from_secs_f64(max),
        tuned_after,
    }))
}

/// The kernel of a single-kernel pipeline timed without the runtime
/// (`--raw`): its compiled program launched on stream 0 over buffers of
/// ones, each launch between two events (median of 100), and 20 launches
/// between two events (median of 10 batches, per launch); its PTX is
/// written to `dir`. `None` for
/// pipelines of several kernels or with counters or fills.
fn raw_kernel(
    compiler: &Arc<CudaCompiler>,
    p: &Pipeline,
    device: Device,
    dir: &str,
) -> Result<Option<(Duration, Duration)>> {
    let dev = compiler.device();
    let inputs: Vec<Tensor> = p.host_inputs(1).iter().map(|t| t.to(device)).collect();
    let plan = tilefuse::fusion::plan(&p.build(&inputs).subgraph(), &tilefuse::fusion::FusionOptions::gpu())?;
    let skip = |why: &str| {
        println!("{:<15} kernel alone: not timed ({why})", p.id);
        Ok(None)
    };
    let [kernel] = plan.kernels.as_slice() else {
        return skip("several kernels");
    };
    let program = &kernel.program;
    let stream = dev.stream(0);
    let mut buffers = vec![];
    for param in &program.params {
        let word = match param.dtype {
            DType::F32 => 0x3F80_0000,
            DType::BF16 => 0x3F80_3F80,
            other => return skip(&format!("a {other} parameter")),
        };
        if param.init.is_some() {
            return skip("a parameter filled before the launch");
        }
        let b = dev.alloc_on(param.dtype, param.len as usize, stream)?;
        if let Err(e) = b.fill_words_on(word, stream) {
            return skip(&format!("filling `{}`: {e}", param.name));
        }
        buffers.push(b);
    }
    let args: Vec<&tilefuse::device::cuda::DeviceBuffer> = buffers.iter().collect();
    let compiled = compiler.compile(program)?;
    compiler.finish_compiles();
    let path = std::path::Path::new(dir).join(format!("{}.ptx", p.id));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, compiled.kernel().ptx())) {
        eprintln!("--raw: writing {}: {e}", path.display());
    }
    for _ in 0..5 {
        compiled.launch(&args, stream)?;
    }
    // `batches` groups of `per` launches, each group between two events:
    // the median time of one launch.
    let timed = |batches: usize, per: usize| -> Result<Duration> {
        let marks: Vec<Event> = (0..2 * batches).map(|_| Event::new(dev, true)).collect::<Result<_>>()?;
        for pair in marks.chunks(2) {
            pair[0].record(stream)?;
            for _ in 0..per {
                compiled.launch(&args, stream)?;
            }
            pair[1].record(stream)?;
        }
        stream.synchronize()?;
        let times = marks
            .chunks(2)
            .map(|pair| pair[0].elapsed_ms(&pair[1]).map(|ms| f64::from(ms) * 1e-3 / per as f64))
            .collect::<Result<Vec<f64>>>()?;
        Ok(Duration::from_secs_f64(median(times)))
    };
    let each = timed(100, 1)?;
    let batched = timed(10, 20)?;
    Ok(Some((each, batched)))
}

/// Host times of `OVERHEAD_CALLS` launches of a loaded one-block kernel
/// (`x[i] = -x[i]` on 1024 f32) through `CompiledProgram::launch` alone:
/// the part of a call's launch phase that the driver takes.
fn bare_launches(compiler: &Arc<CudaCompiler>) -> Result<Vec<f64>> {
    let dev = compiler.device();
    let mut b = Builder::new("bare_launch", &[1]);
    let x = b.param("x", DType::F32, 1024, Access::ReadWrite);
    let v = b.view_contiguous(x, &[1024], &[1024], Padding::Zero);
    let t = b.load(v, &[IndexExpr::constant(0)], false);
    let t = b.unary(UnaryOp::Neg, t);
    b.store(v, &[IndexExpr::constant(0)], t, false);
    let compiled = compiler.compile(&b.finish()?)?;
    compiler.finish_compiles();
    let stream = dev.stream(0);
    let buffer = dev.alloc_on(DType::F32, 1024, stream)?;
    buffer.fill_words_on(0, stream)?;
    for _ in 0..200 {
        compiled.launch(&[&buffer], stream)?;
    }
    dev.synchronize()?;
    let mut times = Vec::with_capacity(OVERHEAD_CALLS);
    for i in 0..OVERHEAD_CALLS {
        let t0 = Instant::now();
        compiled.launch(&[&buffer], stream)?;
        times.push(t0.elapsed().as_secs_f64());
        if i % 64 == 63 {
            dev.synchronize()?;
        }
    }
    dev.synchronize()?;
    Ok(times)
}
