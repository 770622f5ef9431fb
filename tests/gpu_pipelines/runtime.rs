//! The runtime on the device: results that stay there, streams that
//! overlap, steady-state allocation, running out of memory, several host
//! threads, ragged and very large shapes.

use super::common::{compare_with, tolerance};
use super::{compare, data_f32, gpu, host_of, reference_of, GPU};
use tilefuse::device::cuda::{CudaCompiler, CudaDevice};
use tilefuse::runtime::{last_realize_stats, launch_times, time_launches, upload_count};
use tilefuse::{DType, Device, Error, Tensor};

#[test]
#[ignore = "needs a CUDA GPU"]
fn results_stay_on_the_device_and_inputs_upload_once() {
    let _g = gpu();
    let n = 100_003;
    let before = upload_count(0);
    let x = Tensor::from_vec(data_f32(n, 1), &[n]).to(GPU);
    let y = x.exp();
    let want_y = reference_of(&y);
    let stats = y.realize_with_stats().unwrap();
    assert_eq!((stats.device, stats.uploads, stats.upload_bytes), (GPU, 1, 4 * n));
    assert_eq!(upload_count(0), before + 1);
    // A pipeline on the result reads it where it is.
    let z = (&y * 2.0f32).sum_all();
    let want_z = reference_of(&z);
    let stats = z.realize_with_stats().unwrap();
    assert_eq!(stats.uploads, 0);
    compare_with(&host_of(&z), &want_z, 1e-4, 64.0).unwrap();
    // The CPU reads device data through its host copy.
    let on_cpu = y.to(Device::Cpu).sin();
    let want_cpu = reference_of(&on_cpu);
    compare(&host_of(&on_cpu), &want_cpu).unwrap();
    compare(&host_of(&y), &want_y).unwrap();
    // The device copy of the input goes when the input does.
    drop(x);
    assert_eq!(upload_count(0), before);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_new_pipeline_on_host_data_compiles_while_it_uploads() {
    let _g = gpu();
    let compiler = CudaCompiler::open(0).unwrap();
    let device = compiler.device();
    // An expression and length no other test uses, so its kernel is
    // compiled in this call.
    let n = 3_000_017;
    let host = |seed| Tensor::from_vec(data_f32(n, seed), &[n]).to(GPU);
    let build = |a: &Tensor, b: &Tensor, c: &Tensor| (&(a * b) - c).abs().sqrt();
    let (a, b, c) = (host(11), host(12), host(13));
    let y = build(&a, &b, &c);
    let want = reference_of(&y);
    let loads = device.module_stats().loads;
    let stats = y.realize_with_stats().unwrap();
    // Its module is loaded in the call, or (when the interpreter ran the
    // first call) in the background.
    compiler.finish_compiles();
    assert!(device.module_stats().loads > loads, "the call compiled its kernel");
    assert_eq!((stats.uploads, stats.upload_bytes), (3, 3 * 4 * n));
    assert!(!stats.plan_cache_hit && stats.compile_time > std::time::Duration::ZERO);
    let timed: std::time::Duration = stats.phases().iter().map(|&(_, d)| d).sum();
    assert!(timed <= stats.total_time, "{stats:?}");
    compare(&host_of(&y), &want).unwrap();
    // The same pipeline on other host data: prepared already, it uploads
    // and compiles nothing; on the uploaded data again, it does neither.
    compiler.finish_compiles();
    let loads = device.module_stats().loads;
    let (d, e, f) = (host(14), host(15), host(16));
    let z = build(&d, &e, &f);
    let want = reference_of(&z);
    let stats = z.realize_with_stats().unwrap();
    assert_eq!((stats.uploads, stats.plan_cache_hit), (3, true));
    compare(&host_of(&z), &want).unwrap();
    let again = build(&d, &e, &f);
    assert_eq!(again.realize_with_stats().unwrap().uploads, 0);
    compare(&host_of(&again), &want).unwrap();
    assert_eq!(device.module_stats().loads, loads);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn realizing_a_moved_host_tensor_uploads_it_once() {
    let _g = gpu();
    let n = 4099;
    let before = upload_count(0);
    let x = Tensor::from_vec(data_f32(n, 3), &[n]).to(GPU);
    let stats = x.realize_with_stats().unwrap();
    assert_eq!(
        (stats.uploads, stats.upload_bytes, stats.kernels_launched),
        (1, 4 * n, 0)
    );
    assert_eq!(upload_count(0), before + 1);
    // Realizing it again, and computing from it, uploads nothing more.
    assert_eq!(x.realize_with_stats().unwrap().uploads, 0);
    let y = x.exp();
    let want = reference_of(&y);
    assert_eq!(y.realize_with_stats().unwrap().uploads, 0);
    compare(&host_of(&y), &want).unwrap();
    drop(x);
    assert_eq!(upload_count(0), before);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn uploads_are_forgotten_when_their_tensors_drop_on_any_thread() {
    let _g = gpu();
    let before = upload_count(0);
    // Host tensors moved to the device, as a model's weights would be: one
    // device copy each, made by the first realization.
    let weights: Vec<Tensor> = (0..400)
        .map(|i| Tensor::from_vec(data_f32(64, 100 + i), &[64]).to(GPU))
        .collect();
    for w in &weights {
        assert_eq!(w.realize_with_stats().unwrap().uploads, 1);
    }
    assert_eq!(upload_count(0), before + weights.len());
    let kept = weights[0].clone();
    // Four threads drop the weights while this one realizes pipelines on
    // new host data and on the kept weight, whose copy must survive.
    let mut chunks: Vec<Vec<Tensor>> = vec![vec![]; 4];
    for (i, w) in weights.into_iter().enumerate() {
        chunks[i % 4].push(w);
    }
    let droppers: Vec<_> = chunks
        .into_iter()
        .map(|chunk| std::thread::spawn(move || chunk.into_iter().for_each(drop)))
        .collect();
    for i in 0..50 {
        let x = Tensor::from_vec(data_f32(64, 1000 + i), &[64]).to(GPU);
        let y = (&x * &kept).sum_all();
        let want = reference_of(&y);
        compare_with(&host_of(&y), &want, 1e-5, 64.0).unwrap_or_else(|e| panic!("run {i}: {e}"));
    }
    for t in droppers {
        t.join().unwrap();
    }
    // The kept weight's copy and nothing else: every dropped tensor took
    // its copy with it, with no run in between needed to find it.
    assert_eq!(upload_count(0), before + 1);
    assert_eq!((&kept * 2.0f32).realize_with_stats().unwrap().uploads, 0);
    drop(kept);
    assert_eq!(upload_count(0), before);
}

/// A compute-heavy elementwise chain: one long kernel.
fn heavy(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    for _ in 0..24 {
        y = (y.sin() * 1.5f32).tanh();
    }
    y
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_independent_pipelines_overlap_on_two_streams() {
    let _g = gpu();
    // Different lengths, so that fusion keeps the two pipelines apart.
    let (n, m) = (1 << 24, (1 << 24) - 4096);
    let a = Tensor::from_vec(data_f32(n, 1), &[n]).to(GPU).sin();
    let b = Tensor::from_vec(data_f32(m, 2), &[m]).to(GPU).cos();
    Tensor::realize_all(&[&a, &b]).unwrap();
    // Compiled once before timing.
    heavy(&a).realize().unwrap();
    time_launches(true);
    let (ya, yb) = (heavy(&a), heavy(&b));
    Tensor::realize_all(&[&ya, &yb]).unwrap();
    let times = launch_times().unwrap();
    time_launches(false);
    for t in &times {
        println!(
            "{} on stream {}: {:.3} .. {:.3} ms",
            t.kernel, t.stream, t.start_ms, t.end_ms
        );
    }
    assert_eq!(times.len(), 2, "{times:?}");
    let (first, second) = (&times[0], &times[1]);
    assert_ne!(first.stream, second.stream, "independent pipelines share a stream");
    assert!(
        second.start_ms < first.end_ms,
        "the second kernel started at {} ms, after the first ended at {} ms",
        second.start_ms,
        first.end_ms
    );
    assert!(
        first.end_ms - first.start_ms > 0.1,
        "the kernels are too short to show overlap"
    );
    let sample = |t: &Tensor| t.narrow(0, 12_345, 4).to_vec::<f32>().unwrap();
    let want = |x: &[f32]| -> Vec<f32> {
        x.iter()
            .map(|&v| {
                let mut y = v;
                for _ in 0..24 {
                    y = (y.sin() * 1.5).tanh();
                }
                y
            })
            .collect()
    };
    for (got, input) in [(sample(&ya), sample(&a)), (sample(&yb), sample(&b))] {
        for (g, w) in got.iter().zip(want(&input)) {
            assert!((g - w).abs() < 1e-4, "{g} vs {w}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_repeated_pipeline_stops_allocating_after_the_first_run() {
    let _g = gpu();
    let device = CudaDevice::open(0).unwrap();
    let (rows, cols) = (300, 1000);
    let x = Tensor::from_vec(data_f32(rows * cols, 3), &[rows, cols]).to(GPU);
    let w = Tensor::from_vec(data_f32(cols, 4), &[cols]).to(GPU);
    let want = reference_of(&(&x * &w).softmax(-1).sum(&[0], false));
    let mut allocations = vec![];
    for _ in 0..10 {
        let y = (&x * &w).softmax(-1).sum(&[0], false);
        let stats = y.realize_with_stats().unwrap();
        assert!(stats.kernels_launched >= 2, "{stats:?}");
        compare_with(&host_of(&y), &want, 1e-4, 16.0).unwrap();
        allocations.push(device.memory_stats().allocations);
    }
    println!("cuMemAlloc calls after each of 10 runs: {allocations:?}");
    assert!(
        allocations.iter().all(|&a| a == allocations[0]),
        "allocations grew: {allocations:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn running_out_of_memory_is_an_error_and_the_next_realize_works() {
    let _g = gpu();
    let device = CudaDevice::open(0).unwrap();
    let (_, total) = device.memory_info().unwrap();
    let in_use = device.memory_stats().bytes_in_use;
    // Twice the device's memory of f32.
    let n = total / 2;
    let x = Tensor::from_vec(vec![1.0f32; 1 << 10], &[1 << 10]).to(GPU);
    let huge = x.reshape([1, 1 << 10]).expand(&[n / (1 << 10), 1 << 10]).exp();
    match huge.realize() {
        Err(Error::OutOfMemory { bytes, .. }) => println!("out of memory as expected, allocating {bytes} bytes"),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert!(!huge.is_realized());
    let after = device.memory_stats().bytes_in_use;
    // Compiled programs keep their interpreter code: a few KiB.
    assert!(
        after <= in_use + 64 * 1024,
        "the failed run holds {after} bytes, {in_use} before"
    );
    let y = (&x + 1.0f32).sum_all();
    assert_eq!(y.to_scalar::<f32>().unwrap(), 2048.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn host_threads_realize_on_one_device_at_once() {
    let _g = gpu();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                // A few shapes, so most runs find their programs compiled.
                let shapes = [(17, 100), (300, 1024), (5, 4099)];
                for i in 0..20 {
                    let (rows, cols) = shapes[(t + i) % shapes.len()];
                    let data = data_f32(rows * cols, 10 * t + i);
                    let build = |device| {
                        let x = Tensor::from_vec(data.clone(), &[rows, cols]).to(device);
                        (x.softmax(-1) * 3.0f32 + x.sum(&[0], true)).tanh()
                    };
                    let (on_gpu, on_cpu) = (build(GPU), build(Device::Cpu));
                    compare(&host_of(&on_gpu), &host_of(&on_cpu))
                        .unwrap_or_else(|e| panic!("thread {t}, run {i} ({rows} x {cols}): {e}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ragged_shapes_match_the_reference() {
    let _g = gpu();
    for &(rows, cols) in &[(1, 1), (3, 1), (7, 33), (129, 1023), (5, 8193), (2, 20_000)] {
        let x = Tensor::from_vec(data_f32(rows * cols, rows), &[rows, cols]).to(GPU);
        let outs = [
            x.softmax(-1),
            x.sum(&[0], false),
            x.layer_norm(None, None, 1e-5),
            x.max(&[1], false),
            x.transpose(0, 1).cast(DType::F16).exp(),
        ];
        for (k, out) in outs.iter().enumerate() {
            let want = reference_of(out);
            compare_with(&host_of(out), &want, tolerance(want.dtype()), 16.0)
                .unwrap_or_else(|e| panic!("[{rows}, {cols}] output {k}: {e}"));
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn u8_and_bool_ops_past_two_to_the_31_elements() {
    let _g = gpu();
    let n = (1usize << 31) + 7;
    let device = CudaDevice::open(0).unwrap();
    let (free, _) = device.memory_info().unwrap();
    if free < 4 * n + (1 << 30) {
        println!("note: skipped, {free} bytes free on the device is too little for three {n}-byte tensors");
        return;
    }
    let value = |i: usize| (i % 251) as u8;
    let x = Tensor::from_vec((0..n).map(value).collect::<Vec<u8>>(), &[n]).to(GPU);
    let y = &x + 1u8;
    let big = x.gt(&Tensor::full(&[], 200u8).to(GPU));
    Tensor::realize_all(&[&y, &big]).unwrap();
    let tail = y.narrow(0, n - 9, 9).to_vec::<u8>().unwrap();
    let want: Vec<u8> = (n - 9..n).map(|i| value(i) + 1).collect();
    assert_eq!(tail, want);
    let flags = big.narrow(0, n - 300, 300).to_vec::<bool>().unwrap();
    let want: Vec<bool> = (n - 300..n).map(|i| value(i) > 200).collect();
    assert_eq!(flags, want);
    let count = big.cast(DType::I64).sum_all().to_scalar::<i64>().unwrap();
    let total = y.cast(DType::I64).sum_all().to_scalar::<i64>().unwrap();
    let (mut want_count, mut want_total) = (0i64, 0i64);
    for i in 0..n {
        want_count += (value(i) > 200) as i64;
        want_total += value(i) as i64 + 1;
    }
    assert_eq!((count, total), (want_count, want_total));
    println!("{n} elements: {count} above 200, sum of x + 1 = {total}");
}

/// Set in the child processes of the exit test.
const EXIT_CHILD: &str = "TILEFUSE_TEST_EXIT_CHILD";
/// A child's exit status when it exited with a tuned module still loading,
/// and when the tuned module was already there.
const RACED: i32 = 42;
const NOT_RACED: i32 = 43;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_process_exits_cleanly_while_tuned_modules_load() {
    // Child: its input already on the device, a first call queues its tuned
    // module for the background thread, and the process exits at once,
    // while that module loads.
    if std::env::var_os(EXIT_CHILD).is_some() {
        let compiler = CudaCompiler::open(0).unwrap();
        let device = compiler.device();
        let x = Tensor::from_vec(data_f32(1 << 20, 5), &[1 << 20]).to(GPU);
        x.realize().unwrap();
        device.synchronize().unwrap();
        let y = ((&x * 1.5f32 + 0.25f32).tanh() * &x).exp();
        y.realize().unwrap();
        let pending = compiler.pending_compiles();
        eprintln!("tuned modules pending at exit: {pending}");
        std::process::exit(if pending > 0 { RACED } else { NOT_RACED });
    }
    let _g = gpu();
    let name = "runtime::a_process_exits_cleanly_while_tuned_modules_load";
    let (mut raced, mut last) = (0, String::new());
    for _ in 0..12 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--include-ignored", "--nocapture"])
            .env(EXIT_CHILD, "1")
            // Each child JITs its modules itself, with the quick tier on.
            .env("CUDA_CACHE_DISABLE", "1")
            .env_remove("TILEFUSE_JIT_QUICK")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(120) {
                let _ = child.kill();
                panic!("a child did not exit within 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        match out.status.code() {
            Some(RACED) if last.contains("tuned modules pending at exit: ") => raced += 1,
            Some(NOT_RACED) => {}
            // Anything else, a crash or a run that never reached the child's
            // code (status 0 from a filter that matched nothing), fails.
            _ => panic!("the child ended with {:?}:\n{last}", out.status),
        }
    }
    assert!(
        raced > 0,
        "no child exited while its tuned module loaded; the last said:\n{last}"
    );
}

/// Column sums, row sums, the maximum and row sums of exponentials of `x`:
/// outputs that fuse into several kernels.
fn four_reductions(x: &Tensor) -> Vec<Tensor> {
    vec![
        x.sum(&[0], false),
        x.sum(&[1], false),
        x.max_all(),
        (x * 0.5f32).exp().sum(&[1], true),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn new_programs_compile_on_several_threads_like_one_by_one_and_tune() {
    let _g = gpu();
    let compiler = CudaCompiler::open(0).unwrap();
    let device = compiler.device();
    // Shapes no other test uses, so every program is new.
    let x = Tensor::from_vec(data_f32(333 * 517, 21), &[333, 517]).to(GPU);
    // compile_all on the programs of each output's plan, as a plan of
    // several new kernels does.
    let plans: Vec<_> = four_reductions(&x).iter().map(|t| t.plan().unwrap()).collect();
    let programs: Vec<_> = plans
        .iter()
        .flat_map(|p| p.kernels.iter().map(|k| &*k.program))
        .collect();
    assert!(programs.len() >= 4, "{} programs", programs.len());
    compiler.finish_compiles();
    let loads = device.module_stats().loads;
    let compiled = compiler.compile_all(&programs).unwrap();
    // Loaded now, or in the background for programs the interpreter runs
    // first.
    compiler.finish_compiles();
    assert!(
        device.module_stats().loads - loads >= programs.len() as u64,
        "every program was new and loaded"
    );
    for (program, c) in programs.iter().zip(&compiled) {
        assert!(
            std::sync::Arc::ptr_eq(c, &compiler.compile(program).unwrap()),
            "{}",
            program.name
        );
    }
    compiler.finish_compiles();
    for c in &compiled {
        assert!(
            c.is_tuned() && c.tuning_error().is_none(),
            "{c:?}: {:?}",
            c.tuning_error()
        );
    }

    // Through realize: a plan of several new kernels (compiled at once) gives
    // the reference's values, and its tuned modules the same bits.
    let x = Tensor::from_vec(data_f32(335 * 519, 22), &[335, 519]).to(GPU);
    let outputs = four_reductions(&x);
    let wants: Vec<_> = outputs.iter().map(reference_of).collect();
    Tensor::realize_all(&outputs.iter().collect::<Vec<_>>()).unwrap();
    let stats = last_realize_stats().unwrap();
    assert!(stats.kernels_launched >= 2, "{stats:?}");
    for (out, want) in outputs.iter().zip(&wants) {
        compare_with(&host_of(out), want, tolerance(want.dtype()), 64.0).unwrap();
    }
    compiler.finish_compiles();
    let again = four_reductions(&x);
    Tensor::realize_all(&again.iter().collect::<Vec<_>>()).unwrap();
    for (a, b) in again.iter().zip(&outputs) {
        assert_eq!(host_of(a).bytes(), host_of(b).bytes());
    }
}
