//! Tensors realized on a CUDA GPU, end to end: the reference examples
//! through the tensor API, the differential fuzzer with every graph run as
//! GPU kernels, every dtype, and the throughput suite's pipelines at
//! moderate sizes, each against the reference evaluator. The runtime's
//! behaviour on the device (streams, allocation, memory exhaustion, threads,
//! large tensors) is in `gpu_pipelines/runtime.rs`.
//!
//! Every test needs a CUDA GPU and is ignored otherwise; run them with
//! `cargo test --test gpu_pipelines -- --include-ignored`. They run one at a
//! time (a mutex), since some fill the device or time it.

#![cfg(feature = "cuda")]

mod common;
#[path = "gpu_pipelines/order.rs"]
mod order;
#[path = "gpu_pipelines/runtime.rs"]
mod runtime;

use common::fuzzgen::{check, vary_options, Failure};
use common::{compare, compare_with, tolerance};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tilefuse::device::cuda::CudaCompiler;
use tilefuse::fusion::FusionOptions;
use tilefuse::graph::reference;
use tilefuse::runtime::{last_realize_stats, run_plan_on_cuda};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Device, Tensor};

/// CUDA device 0.
const GPU: Device = Device::Cuda(0);

/// A guard that runs the tests of this target one at a time, after checking
/// that the GPU can be used.
fn gpu() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    Device::cuda(0).expect("these tests need a CUDA GPU");
    // The interpreter loads in the background when the compiler opens;
    // wait, so its load does not land inside a test's count of module loads.
    if let Ok(compiler) = CudaCompiler::open(0) {
        let _ = compiler.wait_interpreter();
    }
    guard
}

/// The realized value of `t` as a host buffer.
fn host_of(t: &Tensor) -> HostBuffer {
    let mut b = HostBuffer::zeros(t.dtype(), t.numel());
    t.with_bytes(|bytes| b.bytes_mut().copy_from_slice(bytes)).unwrap();
    b
}

/// The reference evaluator's value of an unrealized `t`.
fn reference_of(t: &Tensor) -> HostBuffer {
    reference::evaluate(&t.subgraph()).unwrap().remove(0)
}

/// Deterministic f32 data in about [-2, 2].
fn data_f32(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % 4001) as f32 / 1000.0 - 2.0)
        .collect()
}

// ---- the reference examples, as tensor programs ----

/// `x` with `f(x, a)` applied where `mask` holds: what an atomic update of
/// one partition does to the memory it covers.
fn update_where(x: &Tensor, mask: &[bool], f: impl Fn(&Tensor, &Tensor) -> Tensor, a: &Tensor) -> Tensor {
    let m = Tensor::from_slice(mask, x.dims()).to(GPU);
    Tensor::where_(&m, &f(x, a), x)
}

/// The mask of partition [1] of a 1-D view of 4 elements in tiles of 2.
const PART_1D: [bool; 4] = [false, false, true, true];

/// The mask of partition [0, 1] of a 4 × 3 view in 2 × 2 tiles: rows 0–1,
/// column 2 (column 3 is outside the array).
fn part_4x3() -> Vec<bool> {
    (0..12).map(|i| i / 3 < 2 && i % 3 == 2).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reference_examples_through_the_tensor_api() {
    let _g = gpu();
    // Iota and deep copy: a new value built from a tile leaves the tile as it was.
    let x = Tensor::arange(0i32, 4, 1).reshape([2, 2]).to(GPU);
    let y = &x + 10i32;
    assert_eq!(y.to_vec::<i32>().unwrap(), [10, 11, 12, 13]);
    assert_eq!(x.to_vec::<i32>().unwrap(), [0, 1, 2, 3]);
    // The partition view load: 2 × 2 partition [1, 2] of the 4 × 8 array.
    let a = Tensor::from_vec((0..32).collect::<Vec<i32>>(), &[4, 8]).to(GPU);
    assert_eq!(
        a.narrow(0, 2, 2).narrow(1, 4, 2).to_vec::<i32>().unwrap(),
        [20, 21, 28, 29]
    );
    // The atomic examples as masked elementwise updates of the partition.
    let bits = [0x1, 0x2, 0b10101010, 0b01010101];
    let b1 = Tensor::from_slice(&bits, &[4]).to(GPU);
    let k = |v: i32| Tensor::full(&[], v).to(GPU);
    let check_i32 = |t: Tensor, want: &[i32]| assert_eq!(t.to_vec::<i32>().unwrap(), want);
    check_i32(
        update_where(&b1, &PART_1D, Tensor::bitand, &k(0b1111)),
        &[1, 2, 0b1010, 0b0101],
    );
    check_i32(
        update_where(&b1, &PART_1D, Tensor::bitor, &k(0b1111)),
        &[1, 2, 0b10101111, 0b01011111],
    );
    check_i32(
        update_where(&b1, &PART_1D, Tensor::bitxor, &k(0xff)),
        &[1, 2, 0b01010101, 0b10101010],
    );
    let bits_4x3 = [1, 2, 0b10101010, 3, 4, 0b11001100, 5, 6, 0b11110000, 7, 8, 0b00110011];
    let b2 = Tensor::from_slice(&bits_4x3, &[4, 3]).to(GPU);
    check_i32(
        update_where(&b2, &part_4x3(), Tensor::bitand, &k(0b1111)),
        &[1, 2, 0b1010, 3, 4, 0b1100, 5, 6, 0b11110000, 7, 8, 0b00110011],
    );
    check_i32(
        update_where(&b2, &part_4x3(), Tensor::bitor, &k(0b1111)),
        &[1, 2, 0b10101111, 3, 4, 0b11001111, 5, 6, 0b11110000, 7, 8, 0b00110011],
    );
    check_i32(
        update_where(&b2, &part_4x3(), Tensor::bitxor, &k(0xff)),
        &[1, 2, 0b01010101, 3, 4, 0b00110011, 5, 6, 0b11110000, 7, 8, 0b00110011],
    );
    let u = |v: &[u32], shape: &[usize]| Tensor::from_slice(v, shape).to(GPU);
    let ku = |v: u32| Tensor::full(&[], v).to(GPU);
    let check_u32 = |t: Tensor, want: &[u32]| assert_eq!(t.to_vec::<u32>().unwrap(), want);
    let x1 = u(&[1, 2, 3, 6], &[4]);
    check_u32(update_where(&x1, &PART_1D, Tensor::maximum, &ku(4)), &[1, 2, 4, 6]);
    check_u32(update_where(&x1, &PART_1D, Tensor::minimum, &ku(4)), &[1, 2, 3, 4]);
    let x1 = u(&[1, 2, 3, 4], &[4]);
    check_u32(update_where(&x1, &PART_1D, Tensor::add, &ku(10)), &[1, 2, 13, 14]);
    check_u32(update_where(&x1, &PART_1D, Tensor::sub, &ku(3)), &[1, 2, 0, 1]);
    let m = u(&[1, 2, 3, 3, 4, 6, 5, 6, 2, 7, 8, 8], &[4, 3]);
    check_u32(
        update_where(&m, &part_4x3(), Tensor::maximum, &ku(4)),
        &[1, 2, 4, 3, 4, 6, 5, 6, 2, 7, 8, 8],
    );
    check_u32(
        update_where(&m, &part_4x3(), Tensor::minimum, &ku(4)),
        &[1, 2, 3, 3, 4, 4, 5, 6, 2, 7, 8, 8],
    );
    let add = u(&[1, 2, 1, 3, 4, 2, 5, 6, 3, 7, 8, 4], &[4, 3]);
    check_u32(
        update_where(&add, &part_4x3(), Tensor::add, &ku(10)),
        &[1, 2, 11, 3, 4, 12, 5, 6, 3, 7, 8, 4],
    );
    let sub = u(&[1, 2, 5, 3, 4, 8, 5, 6, 6, 7, 8, 9], &[4, 3]);
    check_u32(
        update_where(&sub, &part_4x3(), Tensor::sub, &ku(3)),
        &[1, 2, 2, 3, 4, 5, 5, 6, 6, 7, 8, 9],
    );
}

// ---- the differential fuzzer on the GPU ----

/// Checks fuzz graph `seed` run as GPU kernels; a panic is a failure.
fn check_on_gpu(seed: u64) -> Result<(), Failure> {
    let options = vary_options(seed, FusionOptions::gpu());
    std::panic::catch_unwind(|| {
        check(seed, options, |g, p| {
            run_plan_on_cuda(p, g, 0)?.iter().map(|s| s.host().cloned()).collect()
        })
    })
    .unwrap_or_else(|_| Err(Failure::Mismatch("panicked".into())))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_fuzzer_matches_the_reference() {
    let _g = gpu();
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default);
    let count = env("TILEFUSE_GPU_FUZZ_GRAPHS", 2500);
    let deadline = Instant::now() + Duration::from_secs(env("TILEFUSE_GPU_FUZZ_SECONDS", 3600));
    // Graphs are checked on several host threads: most of the time goes to
    // the driver's JIT of new programs. Seeds are handed out in order; no
    // new graph starts after the deadline, and the count checked is printed.
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get().min(12));
    let next = AtomicU64::new(1);
    let running: Mutex<HashMap<usize, (u64, Instant)>> = Mutex::new(HashMap::new());
    let done = AtomicBool::new(false);
    let results: Vec<(u64, Result<(), Failure>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (next, running) = (&next, &running);
                scope.spawn(move || {
                    let mut results = vec![];
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed > count || Instant::now() > deadline {
                            break results;
                        }
                        running.lock().unwrap().insert(t, (seed, Instant::now()));
                        results.push((seed, check_on_gpu(seed)));
                        running.lock().unwrap().remove(&t);
                    }
                })
            })
            .collect();
        // A watchdog: progress every 10 s, and the seeds of graphs that run
        // for more than 30 s (a kernel that does not finish) before giving up.
        let started = Instant::now();
        let (done, next, running) = (&done, &next, &running);
        scope.spawn(move || {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if last.elapsed() >= Duration::from_secs(10) {
                    last = Instant::now();
                    let handed = next.load(Ordering::Relaxed).min(count + 1) - 1;
                    eprintln!("gpu fuzz: {handed} graphs started after {:.0?}", started.elapsed());
                }
                let stuck: Vec<u64> = running
                    .lock()
                    .unwrap()
                    .values()
                    .filter(|(_, since)| since.elapsed() > Duration::from_secs(30))
                    .map(|(seed, _)| *seed)
                    .collect();
                if !stuck.is_empty() {
                    eprintln!("gpu fuzz: seeds {stuck:?} have run for more than 30 s; giving up");
                    std::process::exit(3);
                }
            }
        });
        let results = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        results
    });
    let count = results.len() as u64;
    // Every op is lowered for every dtype it has: an `UnsupportedDType` is
    // a failure like any other.
    let mut failures: Vec<(u64, String)> = results
        .into_iter()
        .filter_map(|(seed, outcome)| outcome.err().map(|f| (seed, f.to_string())))
        .collect();
    failures.sort_by_key(|f| f.0);
    println!(
        "gpu fuzz: {count} graphs, {} passed, {} failed",
        count as usize - failures.len(),
        failures.len()
    );
    if let Some((seed, e)) = failures.first() {
        let seeds: Vec<u64> = failures.iter().map(|f| f.0).take(20).collect();
        panic!(
            "{} of {count} graphs failed on the GPU (seeds {seeds:?}); first, seed {seed}:\n{e}",
            failures.len()
        );
    }
}

/// The graphs of `common/thresholds.rs`, on both sides of every threshold
/// of the schedule chooser for every dtype, run as GPU kernels against the
/// f64 reference (every strategy, and the emitter's choices within each).
#[test]
#[ignore = "needs a CUDA GPU"]
fn both_sides_of_every_threshold_match_the_reference_on_the_gpu() {
    let _g = gpu();
    for seed in [1, 2, 3] {
        let seen = common::thresholds::check(seed, &|g, p| {
            run_plan_on_cuda(p, g, 0)?.iter().map(|s| s.host().cloned()).collect()
        });
        println!("seed {seed}: graphs per plan signature: {seen:?}");
    }
}

// ---- dtypes ----

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_dtype_computes_as_on_the_cpu() {
    let _g = gpu();
    for dtype in DType::ALL {
        let n = 4099;
        let raw: Vec<f32> = (0..n).map(|i| ((i * 37) % 201) as f32 - 100.0).collect();
        let x = Tensor::from_vec(raw, &[n]).cast(dtype);
        let y = Tensor::from_vec(data_f32(n, 3), &[n]).cast(dtype);
        let build = |x: &Tensor, y: &Tensor| -> Vec<Tensor> {
            // `maximum` of bools is not lowered yet; `|` is the same on bools.
            let larger = if dtype == DType::Bool {
                x.bitor(y)
            } else {
                Tensor::maximum(x, y)
            };
            let mut outs = vec![larger, x.eq(y), x.cast(DType::F32).sum(&[0], false)];
            let x2 = x.narrow(0, 0, 29 * 141).reshape([29, 141]);
            outs.extend([x2.any(&[1], false), x2.all(&[0], false), x2.all(&[1], true)]);
            if dtype != DType::Bool {
                outs.push(x + y);
                outs.push(x.max(&[0], true));
                outs.push(x.masked_fill(&x.gt(y), 3));
                if !dtype.is_float() {
                    outs.push(x.one_hot(17));
                }
            }
            if dtype.is_float() {
                outs.push((x * y).tanh());
                outs.push(x2.std(&[0], false, 1));
                outs.push(x2.std(&[1], true, 0));
            }
            outs
        };
        let on_cpu = build(&x, &y);
        let on_gpu = build(&x.to(GPU), &y.to(GPU));
        let refs: Vec<&Tensor> = on_gpu.iter().collect();
        Tensor::realize_all(&refs).unwrap();
        for (k, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
            let (want, got) = (host_of(c), host_of(g));
            compare(&got, &want).unwrap_or_else(|e| panic!("{dtype}, output {k}: {e}"));
        }
    }
}

/// `cat`, `stack` and `pad` in every dtype, read by elementwise work and
/// reductions (one kernel each, the joined tensor never written), over
/// odd widths, offsets and windows that start and end inside tiles and
/// atoms: the GPU's values are the CPU executor's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn joins_fused_into_their_consumers_compute_as_on_the_cpu() {
    let _g = gpu();
    for dtype in DType::ALL {
        let make = |rows: usize, cols: usize, salt: usize| {
            let raw: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 37 + salt * 11) % 201) as f32 - 100.0)
                .collect();
            let t = Tensor::from_vec(raw, &[rows, cols]).cast(dtype);
            t.realize().unwrap();
            t
        };
        let (a, b, c) = (make(300, 61, 1), make(300, 4, 2), make(300, 1029, 3));
        let w = make(1, 1094, 4);
        let build = |a: &Tensor, b: &Tensor, c: &Tensor, w: &Tensor| -> Vec<Tensor> {
            let wide = Tensor::cat(&[a, b, c], 1);
            let tall = Tensor::cat(&[&a.narrow(1, 1, 60), &a.narrow(0, 7, 200).narrow(1, 0, 60)], 0);
            let mut outs = vec![
                wide.clone(),
                Tensor::stack(&[a, &a.narrow(0, 0, 300)], 0),
                a.pad(&[(3, 2), (5, 17)], 1),
            ];
            if dtype != DType::Bool {
                outs.push(&wide + w);
                outs.push(wide.max(&[1], true));
                outs.push(tall.max(&[0], false));
                outs.push(a.pad(&[(1, 1)], 0).min(&[-1], false));
            }
            if dtype.is_float() {
                outs.push((&wide * w).tanh());
                outs.push(tall.cast(DType::F32).sum(&[0], false));
                outs.push(wide.cast(DType::F32).mean(&[1], false));
            }
            outs
        };
        let on_cpu = build(&a, &b, &c, &w);
        let (ga, gb, gc, gw) = (a.to(GPU), b.to(GPU), c.to(GPU), w.to(GPU));
        let on_gpu = build(&ga, &gb, &gc, &gw);
        for (k, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
            let stats = g.realize_with_stats().unwrap();
            if k > 0 {
                assert_eq!(stats.kernels_launched, 1, "{dtype}, output {k}: one kernel");
            }
            let (want, got) = (host_of(c), host_of(g));
            compare(&got, &want).unwrap_or_else(|e| panic!("{dtype}, output {k}: {e}"));
        }
    }
}

/// Gathers and index selects in every dtype, alone and fused (a
/// cross-entropy's logsumexp beside its label logit, one kernel; a row sum
/// of gathered elements), over odd widths: the GPU's values are the CPU
/// executor's; an index outside its axis fails the GPU realization with
/// the same error as on the CPU, through the kernel's flag.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gathers_compute_as_on_the_cpu_and_report_bad_indices() {
    let _g = gpu();
    let (rows, cols) = (1031, 517);
    let positions = |n: usize, len: usize, salt: usize| -> Vec<i64> {
        (0..n).map(|i| ((i * 7919 + salt * 104729) % len) as i64).collect()
    };
    for dtype in DType::ALL {
        let raw: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 201) as f32 - 100.0).collect();
        let x = Tensor::from_vec(raw, &[rows, cols]).cast(dtype);
        x.realize().unwrap();
        let labels = Tensor::from_vec(positions(rows, cols, 1), &[rows, 1]);
        let picks = Tensor::from_vec(positions(rows * 9, cols, 2), &[rows, 9]).cast(DType::I32);
        let cols_of = Tensor::from_vec(positions(33, cols, 3), &[33]);
        let rows_of = Tensor::from_vec(positions(65, rows, 4), &[65]).cast(DType::I32);
        let build = |x: &Tensor, labels: &Tensor, picks: &Tensor, cols_of: &Tensor, rows_of: &Tensor| {
            let mut outs = vec![
                (x.gather(1, labels), 1),
                (x.gather(1, picks), 1),
                (x.index_select(1, cols_of), 1),
                (x.index_select(0, rows_of), 1),
                (x.transpose(0, 1).gather(0, &picks.transpose(0, 1)), 1),
            ];
            if dtype.is_float() {
                let f = x.cast(DType::F32);
                outs.push((&f.logsumexp(&[1], true) - &f.gather(1, labels), 1));
                outs.push((f.gather(1, picks).sum(&[1], true), 1));
            }
            outs
        };
        let on_cpu = build(&x, &labels, &picks, &cols_of, &rows_of);
        let on_gpu = build(
            &x.to(GPU),
            &labels.to(GPU),
            &picks.to(GPU),
            &cols_of.to(GPU),
            &rows_of.to(GPU),
        );
        for (k, ((c, _), (g, kernels))) in on_cpu.iter().zip(&on_gpu).enumerate() {
            let stats = g.realize_with_stats().unwrap();
            assert_eq!(stats.kernels_launched, *kernels, "{dtype}, output {k}");
            compare(&host_of(g), &host_of(c)).unwrap_or_else(|e| panic!("{dtype}, output {k}: {e}"));
        }
        let mut bad = positions(rows, cols, 5);
        bad[rows / 2] = cols as i64;
        bad[rows - 1] = -3;
        let bad = Tensor::from_vec(bad, &[rows, 1]).to(GPU);
        let err = x.to(GPU).gather(1, &bad).realize().unwrap_err();
        assert_eq!(
            err,
            tilefuse::Error::IndexOutOfRange {
                op: "gather",
                axis: 1,
                len: cols,
                input: vec![rows, cols],
                index: vec![rows, 1],
            },
            "{dtype}"
        );
    }
}

/// Scans in every dtype along either axis, lines shorter than a tile and
/// many tiles long, alone and with the work before and after them (one
/// kernel each): the GPU's values are the CPU executor's (float sums to
/// the comparison's tolerance: the GPU adds in a tree within a tile).
#[test]
#[ignore = "needs a CUDA GPU"]
fn scans_compute_as_on_the_cpu() {
    let _g = gpu();
    for dtype in DType::ALL {
        for (rows, cols) in [(301, 61), (3, 20_000), (5_000, 7)] {
            let raw: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 7) as f32 - 3.0).collect();
            let x = Tensor::from_vec(raw, &[rows, cols]).cast(dtype);
            x.realize().unwrap();
            let build = |x: &Tensor| -> Vec<Tensor> {
                let mut outs = vec![x.cumsum(1), x.cumsum(0), x.cummax(1), x.cummin(0)];
                if dtype.is_float() {
                    outs.push((x * 0.5).cumsum(1).relu());
                }
                outs
            };
            let (on_cpu, on_gpu) = (build(&x), build(&x.to(GPU)));
            for (k, (c, g)) in on_cpu.iter().zip(&on_gpu).enumerate() {
                let stats = g.realize_with_stats().unwrap();
                assert_eq!(stats.kernels_launched, 1, "{dtype} [{rows}, {cols}], output {k}");
                compare(&host_of(g), &host_of(c))
                    .unwrap_or_else(|e| panic!("{dtype} [{rows}, {cols}], output {k}: {e}"));
            }
        }
    }
}

/// Random tensors on the GPU are the CPU's bit for bit (every float
/// dtype, alone and fused), and a dropout draws its mask in its kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn random_tensors_are_the_same_bits_as_on_the_cpu() {
    let _g = gpu();
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for dims in [vec![1031, 517], vec![3, 20_000], vec![1]] {
            let r = Tensor::rand(&dims, dtype, 77);
            let on_gpu = r.to(GPU);
            compare(&host_of(&on_gpu), &host_of(&r)).unwrap_or_else(|e| panic!("{dtype} {dims:?}: {e}"));
            assert_eq!(host_of(&on_gpu), host_of(&r), "{dtype} {dims:?}: not the same bits");
            let x = Tensor::full(&dims, 3.0f32).cast(dtype);
            let (c, g) = (x.dropout(0.3, 5), x.to(GPU).dropout(0.3, 5));
            assert_eq!(g.realize_with_stats().unwrap().kernels_launched, 1, "{dtype} {dims:?}");
            assert_eq!(host_of(&g), host_of(&c), "{dtype} {dims:?}: dropout");
        }
    }
}

// ---- the throughput suite's pipelines ----

/// A pipeline of the throughput suite on the GPU: builds the output
/// tensor from inputs made once, so each call records a structurally equal
/// graph on the same data.
struct Case {
    name: &'static str,
    build: Box<dyn Fn() -> Tensor>,
}

fn case(name: &'static str, build: impl Fn() -> Tensor + 'static) -> Case {
    Case {
        name,
        build: Box::new(build),
    }
}

fn benchmark_cases() -> Vec<Case> {
    let (m, k) = (512, 4096);
    let t = |v: Vec<f32>, shape: &[usize]| Tensor::from_vec(v, shape).to(GPU);
    let n = 1 << 20;
    let (a, b, c) = (
        t(data_f32(n, 1), &[n]),
        t(data_f32(n, 2), &[n]),
        t(data_f32(n, 3), &[n]),
    );
    let x = t(data_f32(m * k, 4), &[m, k]);
    let w = t(data_f32(k, 5), &[k]);
    let bias = t(data_f32(k, 6), &[k]);
    let (xb, bb) = (x.cast(DType::BF16), bias.cast(DType::BF16));
    // The bf16 inputs are data, as in the benchmark.
    Tensor::realize_all(&[&xb, &bb]).unwrap();
    let big = 1 << 22;
    let (p, q) = (t(data_f32(big, 7), &[big]), t(data_f32(big, 8), &[big]));
    let (x1, x2, x3, x4, x5, w1, w2, b1, b2, p1) = (
        x.clone(),
        x.clone(),
        x.clone(),
        x.clone(),
        x.clone(),
        w.clone(),
        w.clone(),
        bias.clone(),
        bias.clone(),
        p.clone(),
    );
    vec![
        case("chain", move || {
            (&a * &b + &c).tanh() * a.sigmoid() - (-(&b * &b)).exp()
        }),
        case("bias_gelu", move || (&x1 + &b1).gelu()),
        case("bias_gelu_bf16", move || (&xb + &bb).gelu()),
        case("softmax", move || x2.softmax(-1)),
        case("rmsnorm", move || x3.rms_norm(Some(&w1), 1e-6)),
        case("layernorm", move || x4.layer_norm(Some(&w2), Some(&b2), 1e-5)),
        case("mse", move || {
            let d = &p - &q;
            (&d * &d).mean_all()
        }),
        case("sum", move || p1.sum_all()),
        case("colsum", move || x5.sum(&[0], false)),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn benchmark_pipelines_match_the_reference_and_report_first_call_latency() {
    let _g = gpu();
    println!("pipeline        kernels | first call: realize    +read    fuse  compile | again: realize  plan hit");
    for Case { name, build } in benchmark_cases() {
        let out = build();
        let want = reference_of(&out);
        // Sums of many f32 values: the error grows with what was summed. The
        // inputs repeat with period 4001, so the rounding errors of the
        // partial sums are correlated rather than random: the CPU executor's
        // own f32 sum of the 2^22 values of `sum` is 0.024 off the f64 sum
        // of -3.412. The bound, 1e-4 · (|want| + √(2^22)), is 0.2 there.
        let scale = if matches!(name, "sum" | "colsum" | "mse") {
            2048.0
        } else {
            1.0
        };
        let started = Instant::now();
        let first = out.realize_with_stats().unwrap();
        let got = host_of(&out);
        let first_ms = started.elapsed().as_secs_f64() * 1e3;
        compare_with(&got, &want, tolerance(want.dtype()), scale).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The same pipeline again on the same inputs: everything is cached,
        // and once the tuned modules are in, they run in place of the
        // first call's quick ones, with the same bits.
        CudaCompiler::open(0).unwrap().finish_compiles();
        let again = build();
        let second = again.realize_with_stats().unwrap();
        assert_eq!(last_realize_stats(), Some(second));
        assert!(
            second.plan_cache_hit,
            "{name}: the second plan must come from the cache"
        );
        assert_eq!(
            second.uploads, 0,
            "{name}: inputs already on the device are not copied again"
        );
        assert_eq!(second.kernels_launched, first.kernels_launched);
        let tuned = host_of(&again);
        assert!(
            tuned.bytes() == got.bytes(),
            "{name}: the tuned kernels' result differs from the first call's"
        );
        println!(
            "{name:<15} {:>7} | {:>16.2} ms {:>7.2} {:>7.2} {:>8.2} | {:>11.3} ms  {}",
            first.kernels_launched,
            first.total_time.as_secs_f64() * 1e3,
            first_ms,
            first.fuse_time.as_secs_f64() * 1e3,
            first.compile_time.as_secs_f64() * 1e3,
            second.total_time.as_secs_f64() * 1e3,
            second.plan_cache_hit,
        );
    }
}

// ---- split reductions: one launch, the same bits every run ----

/// Runs of each split reduction below: enough for a counter that does not
/// return to zero, or a combine that races the partials, to show.
const REPEATS: usize = 50;

/// Full and column reductions that split across the grid and combine at
/// the last block to finish: each is one launch, matches the reference, and
/// gives bit-identical results when realized again and again (the plan's
/// ticket counters are zeroed once and must return to zero every launch).
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_reductions_are_one_launch_and_bit_identical_over_many_runs() {
    let _g = gpu();
    let t = |v: Vec<f32>, shape: &[usize]| Tensor::from_vec(v, shape).to(GPU);
    let mut cases: Vec<(String, Box<dyn Fn() -> Tensor>)> = vec![];
    // Ragged tails, a length with no small divisor, and an exact power of two.
    for n in [(1 << 20) + 37, 3_000_017, 1 << 22] {
        let (a, b) = (t(data_f32(n, 11), &[n]), t(data_f32(n, 12), &[n]));
        let (a1, a2, a3, a4, b1) = (a.clone(), a.clone(), a.clone(), a.clone(), b.clone());
        cases.push((format!("sum {n}"), Box::new(move || a1.sum_all())));
        cases.push((format!("mean {n}"), Box::new(move || a2.mean_all())));
        cases.push((format!("max {n}"), Box::new(move || a3.max_all())));
        cases.push((
            format!("mse {n}"),
            Box::new(move || {
                let d = &a4 - &b1;
                (&d * &d).mean_all()
            }),
        ));
        let ai = a.cast(DType::I32);
        let ah = a.cast(DType::F16);
        Tensor::realize_all(&[&ai, &ah]).unwrap();
        cases.push((format!("sum i32 {n}"), Box::new(move || ai.sum_all())));
        cases.push((format!("sum f16 {n}"), Box::new(move || ah.sum_all())));
    }
    for (rows, cols) in [(4096, 4096), (6000, 257), (2048, 1000)] {
        let x = t(data_f32(rows * cols, 13), &[rows, cols]);
        let (x1, x2) = (x.clone(), x.clone());
        cases.push((format!("colsum {rows}x{cols}"), Box::new(move || x1.sum(&[0], false))));
        cases.push((format!("colmean {rows}x{cols}"), Box::new(move || x2.mean(&[0], false))));
        // Partials in f32 for the half types, and nodes after the reduction.
        let (xh, xb) = (x.cast(DType::F16), x.cast(DType::BF16));
        Tensor::realize_all(&[&xh, &xb]).unwrap();
        let (xh1, xb1, x3) = (xh.clone(), xb.clone(), x.clone());
        cases.push((
            format!("colsum f16 {rows}x{cols}"),
            Box::new(move || xh1.sum(&[0], false)),
        ));
        cases.push((
            format!("colmean bf16 {rows}x{cols}"),
            Box::new(move || xb1.mean(&[0], false)),
        ));
        cases.push((
            format!("colmax f16 as f32 {rows}x{cols}"),
            Box::new(move || xh.max(&[0], false).cast(DType::F32)),
        ));
        let bias = t(data_f32(cols, 14), &[cols]);
        cases.push((
            format!("colmax bf16 + bias {rows}x{cols}"),
            Box::new(move || xb.max(&[0], false).cast(DType::F32) + &bias),
        ));
        cases.push((
            format!("colmean as f16 {rows}x{cols}"),
            Box::new(move || x3.mean(&[0], false).cast(DType::F16)),
        ));
    }
    // Middle axes with few outer points and row counts the parts do not
    // divide (9973 is prime), argmax and argmin over strided axes (the
    // periodic data ties the maximum many times: the first index wins).
    for shape in [vec![9973, 130], vec![6, 9973, 40], vec![4, 4096, 72]] {
        let axis = shape.len() - 2;
        let n: usize = shape.iter().product();
        let x = t(data_f32(n, 15), &shape);
        let xb = x.cast(DType::BF16);
        xb.realize().unwrap();
        let (x1, x2, x3, x4, x5) = (x.clone(), x.clone(), x.clone(), x.clone(), xb.clone());
        let a = axis as isize;
        cases.push((
            format!("sum axis {axis} {shape:?}"),
            Box::new(move || x1.sum(&[a], false)),
        ));
        cases.push((
            format!("mean axis {axis} {shape:?}"),
            Box::new(move || x2.mean(&[a], false)),
        ));
        cases.push((
            format!("argmax axis {axis} {shape:?}"),
            Box::new(move || x3.argmax(a, false)),
        ));
        cases.push((
            format!("argmin axis {axis} {shape:?}"),
            Box::new(move || x4.argmin(a, false)),
        ));
        cases.push((
            format!("argmax bf16 axis {axis} {shape:?}"),
            Box::new(move || x5.argmax(a, false)),
        ));
        cases.push((
            format!("max bf16 axis {axis} {shape:?}"),
            Box::new(move || xb.max(&[a], false)),
        ));
    }
    for (name, build) in cases {
        let out = build();
        let want = reference_of(&out);
        let stats = out.realize_with_stats().unwrap();
        assert_eq!(stats.kernels_launched, 1, "{name}: one launch");
        let first = host_of(&out);
        // The periodic inputs make f32 rounding errors correlated: bound sums
        // of up to 2^22 values as in the benchmark-pipeline test.
        compare_with(&first, &want, tolerance(want.dtype()), 2048.0).unwrap_or_else(|e| panic!("{name}: {e}"));
        for run in 1..REPEATS {
            let again = build();
            let stats = again.realize_with_stats().unwrap();
            assert!(stats.plan_cache_hit && stats.kernels_launched == 1, "{name}, run {run}");
            let got = host_of(&again);
            assert_eq!(got.bytes(), first.bytes(), "{name}: run {run} differs from the first");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sibling_reductions_of_one_tensor_match_the_reference() {
    // Sum and max of one tensor, realized together, over a strided axis
    // (one split kernel) and over rows.
    let _g = gpu();
    for (shape, axis) in [(vec![6, 9973, 40], 1isize), (vec![9973, 130], 0), (vec![300, 5000], 1)] {
        let n: usize = shape.iter().product();
        let x = Tensor::from_vec(data_f32(n, 16), &shape).to(GPU);
        let (s, m) = (x.sum(&[axis], false), x.max(&[axis], false));
        let want = [reference_of(&s), reference_of(&m)];
        Tensor::realize_all(&[&s, &m]).unwrap();
        for (got, want) in [host_of(&s), host_of(&m)].iter().zip(&want) {
            compare_with(got, want, tolerance(want.dtype()), 2048.0)
                .unwrap_or_else(|e| panic!("{shape:?} axis {axis}: {e}"));
        }
    }
}

/// Row statistics whose shifted sums are one pass (logsumexp, var, mean
/// with var; softmax, log_softmax and layer_norm, whose normalisation adds
/// a second kernel when a row is longer than one tile): on the device in
/// every float dtype, at rows of one tile and rows many tiles long, and at
/// the edges (infinite and NaN elements, constant rows, values whose
/// exponentials overflow unshifted), against the reference evaluator.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_pass_row_statistics_match_the_reference() {
    let _g = gpu();
    let cols = 17_000;
    let edges = common::edge_rows(300, cols);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for (dims, long) in [([2000, 700], false), ([300, cols], true)] {
            let n = dims[0] * dims[1];
            let x = Tensor::from_vec(data_f32(n, 21), &dims).cast(dtype).to(GPU);
            let e = edges.cast(dtype).to(GPU);
            Tensor::realize_all(&[&x, &e]).unwrap();
            // Long rows of at most `reread_row_bytes` are walked twice in
            // one kernel; longer ones (f64 here) take an output kernel.
            let row_bytes = (dtype.size_in_bytes() * cols) as u64;
            let normalised = if long && row_bytes > FusionOptions::gpu().reread_row_bytes {
                2
            } else {
                1
            };
            let cases: Vec<(&str, Vec<Tensor>, usize)> = vec![
                ("logsumexp", vec![x.logsumexp(&[1], true)], 1),
                ("var", vec![x.var(&[1], false)], 1),
                ("mean and var", vec![x.mean(&[1], true), x.var(&[1], true)], 1),
                ("softmax", vec![x.softmax(1)], normalised),
                ("log_softmax", vec![x.log_softmax(1)], normalised),
                ("layer_norm", vec![x.layer_norm(None, None, 1e-5)], normalised),
            ];
            let mut all = cases;
            if long {
                all.push(("logsumexp of edge rows", vec![e.logsumexp(&[1], false)], 1));
                all.push(("softmax of edge rows", vec![e.softmax(1)], normalised));
            }
            for (name, outs, kernels) in all {
                let want: Vec<HostBuffer> = outs.iter().map(reference_of).collect();
                let refs: Vec<&Tensor> = outs.iter().collect();
                Tensor::realize_all(&refs).unwrap();
                let stats = last_realize_stats().unwrap();
                assert_eq!(stats.kernels_launched, kernels, "{name} of {dtype}{dims:?}");
                for (k, (got, want)) in outs.iter().zip(&want).enumerate() {
                    compare(&host_of(got), want)
                        .unwrap_or_else(|err| panic!("{name} of {dtype}{dims:?}, output {k}: {err}"));
                }
            }
        }
    }
}

/// Shifted statistics split across the grid (over a leading or middle
/// axis with few kept columns, over few long rows), their runs' statistics
/// combined at the last point: kernel counts as planned and values against
/// the reference in every float dtype, edge values laid out as columns too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn split_row_statistics_match_the_reference() {
    let _g = gpu();
    let e = common::edge_rows(6, 20000).to_vec::<f32>().unwrap();
    let columns: Vec<f32> = (0..20000 * 6).map(|i| e[(i % 6) * 20000 + i / 6]).collect();
    let edges = Tensor::from_vec(columns, &[20000, 6]);
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let cols = Tensor::from_vec(data_f32(20011 * 40, 31), &[20011, 40])
            .cast(dtype)
            .to(GPU);
        let middle = Tensor::from_vec(data_f32(6 * 9001 * 5, 32), &[6, 9001, 5])
            .cast(dtype)
            .to(GPU);
        let few = Tensor::from_vec(data_f32(3 * 400_009, 33), &[3, 400_009])
            .cast(dtype)
            .to(GPU);
        let e = edges.cast(dtype).to(GPU);
        Tensor::realize_all(&[&cols, &middle, &few, &e]).unwrap();
        let cases: Vec<(&str, Vec<Tensor>, usize)> = vec![
            ("var over axis 0", vec![cols.var(&[0], true)], 1),
            ("logsumexp over axis 0", vec![cols.logsumexp(&[0], false)], 1),
            (
                "mean and var over axis 0",
                vec![cols.mean(&[0], true), cols.var(&[0], true)],
                1,
            ),
            ("softmax over axis 0", vec![cols.softmax(0)], 2),
            ("var over a middle axis", vec![middle.var(&[1], false)], 1),
            ("logsumexp of few long rows", vec![few.logsumexp(&[1], true)], 1),
            ("var of few long rows", vec![few.var(&[1], false)], 1),
            ("layer_norm of few long rows", vec![few.layer_norm(None, None, 1e-5)], 2),
            ("logsumexp of edge columns", vec![e.logsumexp(&[0], true)], 1),
            ("var of edge columns", vec![e.var(&[0], true)], 1),
        ];
        for (name, outs, kernels) in cases {
            let want: Vec<HostBuffer> = outs.iter().map(reference_of).collect();
            let refs: Vec<&Tensor> = outs.iter().collect();
            Tensor::realize_all(&refs).unwrap();
            let stats = last_realize_stats().unwrap();
            assert_eq!(stats.kernels_launched, kernels, "{name} of {dtype}");
            for (k, (got, want)) in outs.iter().zip(&want).enumerate() {
                compare(&host_of(got), want).unwrap_or_else(|err| panic!("{name} of {dtype}, output {k}: {err}"));
            }
        }
    }
}
