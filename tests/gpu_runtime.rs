//! The CUDA runtime layer on a real GPU: device info, the caching allocator,
//! transfers, PTX loading, launches, streams and the scheduler.
//!
//! Every test needs a CUDA GPU and is ignored otherwise; run them with
//! `cargo test --test gpu_runtime -- --include-ignored`.

#![cfg(feature = "cuda")]

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tilefuse::device::cuda::{
    launch, probe, BufferId, CudaCompiler, CudaDevice, DeviceBuffer, Event, LoadedFunction, ScheduledLaunch, Scheduler,
    Stream, STAGING_CHUNK_BYTES, STREAM_COUNT,
};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Error};

/// Adds one to each of `n` f32 values at `x`.
const ADD_ONE_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry add_one(.param .u64 p_x, .param .u64 p_n)
{
    .reg .pred %p;
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p_x];
    ld.param.u64 %rd2, [p_n];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd3, %r1, %r2;
    cvt.u64.u32 %rd4, %r3;
    add.u64 %rd3, %rd3, %rd4;
    setp.ge.u64 %p, %rd3, %rd2;
    @%p bra DONE;
    cvta.to.global.u64 %rd5, %rd1;
    shl.b64 %rd6, %rd3, 2;
    add.u64 %rd5, %rd5, %rd6;
    ld.global.f32 %f1, [%rd5];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd5], %f2;
DONE:
    ret;
}
"#;

/// One thread spins for `ns` nanoseconds of `%globaltimer` and writes its
/// start and end times to `out[0]` and `out[1]`.
const SPIN_PTX: &str = r#"
.version 8.0
.target sm_80
.address_size 64

.visible .entry spin(.param .u64 p_out, .param .u64 p_ns)
{
    .reg .pred %p;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u64 %rd2, [p_ns];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u64 %rd3, %globaltimer;
    add.u64 %rd4, %rd3, %rd2;
LOOP:
    mov.u64 %rd5, %globaltimer;
    setp.lt.u64 %p, %rd5, %rd4;
    @%p bra LOOP;
    st.global.u64 [%rd1], %rd3;
    st.global.u64 [%rd1+8], %rd5;
    ret;
}
"#;

/// Device 0, and a guard that runs the tests of this file one at a time: the
/// out-of-memory test fills the device and the timing tests want it idle.
fn device() -> (MutexGuard<'static, ()>, Arc<CudaDevice>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    (guard, CudaDevice::open(0).expect("a CUDA device"))
}

fn add_one(device: &CudaDevice) -> LoadedFunction {
    device.load(ADD_ONE_PTX, "add_one", "add_one").expect("add_one loads")
}

fn spin(device: &CudaDevice) -> LoadedFunction {
    device.load(SPIN_PTX, "spin", "spin").expect("spin loads")
}

/// Queues `add_one` over all of `x` on `stream`.
fn launch_add_one(kernel: &LoadedFunction, x: &DeviceBuffer, stream: &Stream) {
    let n = x.len();
    let grid = (n.div_ceil(256).max(1) as u32, 1, 1);
    // SAFETY: add_one takes a pointer to `n` f32 values and `n`; `x` holds them
    // and is marked used on `stream` by `ptr_on`.
    unsafe { launch(kernel, grid, (256, 1, 1), 0, stream, &[x.ptr_on(stream), n as u64]) }.expect("launch add_one");
}

/// Queues `spin` for `ns` nanoseconds on `stream`, writing its times to `out`.
fn launch_spin(kernel: &LoadedFunction, out: &DeviceBuffer, ns: u64, stream: &Stream) {
    assert!(out.dtype() == DType::I64 && out.len() >= 2);
    // SAFETY: spin writes two u64 values at its pointer, which `out` holds.
    unsafe { launch(kernel, (1, 1, 1), (1, 1, 1), 0, stream, &[out.ptr_on(stream), ns]) }.expect("launch spin");
}

/// The (start, end) `%globaltimer` values a spin kernel wrote.
fn times(out: &DeviceBuffer) -> (i64, i64) {
    let t = out.to_host().unwrap().to_vec::<i64>();
    (t[0], t[1])
}

fn pattern(dtype: DType, len: usize) -> HostBuffer {
    let mut host = HostBuffer::zeros(dtype, len);
    for (i, b) in host.bytes_mut().iter_mut().enumerate() {
        let v = (i.wrapping_mul(31) + 7 + i / 251) as u8;
        *b = if dtype == DType::Bool { v & 1 } else { v };
    }
    host
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn opens_device_zero_and_reports_it() {
    let info = probe().expect("probe");
    println!("{info}");
    assert!(!info.name.is_empty());
    assert!(info.compute_capability >= (7, 0), "{info:?}");
    assert!(
        info.sm_count > 0 && info.total_memory > 0 && info.l2_bytes > 0,
        "{info:?}"
    );
    assert!(info.driver_version >= tilefuse::device::cuda::MIN_DRIVER_VERSION);
    let (_one, a) = device();
    let b = CudaDevice::open(0).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one context per device");
    assert_eq!(a.info(), &info);
    assert_eq!(a.streams().len(), STREAM_COUNT);
    match CudaDevice::open(1000) {
        Err(Error::CudaUnavailable { reason }) => assert!(reason.contains("out of range"), "{reason}"),
        other => panic!("expected CudaUnavailable for ordinal 1000, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_allocations_come_from_the_cache() {
    let (_one, device) = device();
    let kernel = add_one(&device);
    let stream = device.stream(1);
    let lens = [1000usize, 3 << 18, (5 << 18) + 7, 1];
    let mut allocations_after_first = None;
    for round in 0..5 {
        let mut buffers = Vec::new();
        for &len in &lens {
            let host = HostBuffer::from_elements(&vec![round as f32; len]);
            let x = device.from_host_on(&host, stream).unwrap();
            launch_add_one(&kernel, &x, stream);
            buffers.push(x);
        }
        let scratch = device.alloc(DType::F64, 4096).unwrap();
        assert_eq!(scratch.ptr() % 256, 0, "blocks are 256-byte aligned");
        for (x, &len) in buffers.iter().zip(&lens) {
            assert_eq!(x.ptr() % 256, 0);
            let back = x.to_host().unwrap().to_vec::<f32>();
            assert_eq!(back, vec![round as f32 + 1.0; len]);
        }
        drop(buffers);
        drop(scratch);
        let stats = device.memory_stats();
        println!("round {round}: {stats:?}");
        match allocations_after_first {
            None => allocations_after_first = Some(stats.allocations),
            Some(first) => assert_eq!(stats.allocations, first, "no cuMemAlloc in steady state"),
        }
    }
    // Blocks freed while kernels may still run are reused through a wait on
    // the new user's stream, with no host synchronisation in between.
    let before = device.memory_stats();
    for _ in 0..20 {
        let x = device.alloc_on(DType::F32, 1 << 20, stream).unwrap();
        launch_add_one(&kernel, &x, stream);
    }
    stream.synchronize().unwrap();
    let after = device.memory_stats();
    assert!(after.allocations <= before.allocations + 1, "{before:?} -> {after:?}");
    assert!(after.reuses >= before.reuses + 19, "{before:?} -> {after:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn out_of_memory_is_an_error_and_the_cache_is_freed_to_retry() {
    let (_one, device) = device();
    let total = device.info().total_memory;
    match device.alloc(DType::U8, total * 2) {
        Err(Error::OutOfMemory { bytes, .. }) => assert!(bytes >= total * 2),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // Fill most of the free memory with cached blocks, then ask for a block
    // that fits only once the cache is released.
    let (free, _) = device.memory_info().unwrap();
    // A power of two is its own size class, so three pieces cache exactly
    // three times `piece`, between half and three quarters of `free`.
    let piece = 1usize << (free / 4).ilog2();
    let pieces: Vec<_> = (0..3).map(|_| device.alloc(DType::U8, piece).unwrap()).collect();
    drop(pieces);
    let cached = device.memory_stats();
    assert!(cached.bytes_cached >= 3 * piece, "{cached:?}");
    let big = device
        .alloc(DType::U8, free / 2)
        .expect("fits after the cache is freed");
    let after = device.memory_stats();
    assert!(after.frees >= cached.frees + 3, "{cached:?} -> {after:?}");
    drop(big);
    let x = device.from_host(&HostBuffer::from_elements(&[1.0f32, 2.0])).unwrap();
    assert_eq!(x.to_host().unwrap().to_vec::<f32>(), vec![1.0, 2.0]);
    // A block two streams used is cached behind an event on each; freeing
    // the cache waits for them and frees it with the others.
    let shared = device.alloc_on(DType::F32, 1 << 20, device.stream(1)).unwrap();
    shared.zero_on(device.stream(1)).unwrap();
    shared.mark_used(device.stream(2));
    drop(shared);
    let before = device.memory_stats();
    assert!(before.bytes_cached >= 4 << 20, "{before:?}");
    device.free_cached().unwrap();
    let freed = device.memory_stats();
    assert_eq!(freed.bytes_cached, 0, "{freed:?}");
    assert!(freed.frees >= before.frees + 2, "{before:?} -> {freed:?}");
    assert_eq!(x.to_host().unwrap().to_vec::<f32>(), vec![1.0, 2.0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_dtype_round_trips_through_staging() {
    let (_one, device) = device();
    for dtype in DType::ALL {
        let size = dtype.size_in_bytes();
        let chunk = STAGING_CHUNK_BYTES / size;
        for len in [0, 1, 3, 1000, chunk - 1, chunk, chunk + 3, 2 * chunk + 5, 3 * chunk + 1] {
            let host = pattern(dtype, len);
            for stream in [device.stream(0), device.stream(3)] {
                let x = device.from_host_on(&host, stream).unwrap();
                assert_eq!((x.dtype(), x.len(), x.bytes()), (dtype, len, len * size));
                let back = x.to_host().unwrap();
                assert_eq!((back.dtype(), back.len()), (dtype, len));
                assert!(
                    back.bytes() == host.bytes(),
                    "{dtype} x {len} differs after a round trip"
                );
            }
        }
        let zeroed = device.from_host(&pattern(dtype, 777)).unwrap();
        zeroed.zero_on(device.stream(2)).unwrap();
        assert!(
            zeroed.to_host().unwrap().bytes().iter().all(|&b| b == 0),
            "{dtype} zero_on"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_ptx_kernel_loads_once_and_runs() {
    let (_one, device) = device();
    // The interpreter loads in the background when the compiler opens: let
    // that load be counted before.
    let _ = CudaCompiler::open(0).unwrap().wait_interpreter();
    let before = device.module_stats();
    let kernel = add_one(&device);
    println!("first load of add_one: {:?}", kernel.load_time());
    let again = add_one(&device);
    assert_eq!(again.load_time(), kernel.load_time());
    let after = device.module_stats();
    assert!(after.hits > before.hits, "{before:?} -> {after:?}");
    assert!(after.loads <= before.loads + 1, "{before:?} -> {after:?}");
    for n in [1usize, 255, 256, 257, 100_003] {
        let data: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
        let x = device.from_host(&HostBuffer::from_elements(&data)).unwrap();
        launch_add_one(&kernel, &x, device.stream(0));
        let expect: Vec<f32> = data.iter().map(|v| v + 1.0).collect();
        assert_eq!(x.to_host().unwrap().to_vec::<f32>(), expect, "n = {n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_ptx_returns_the_jit_log() {
    let (_one, device) = device();
    let broken = ".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry broken()\n{\n    bogus.instruction %r1;\n    ret;\n}\n";
    match device.load(broken, "broken", "broken_program") {
        Err(Error::PtxLoad { program, log }) => {
            println!("JIT log:\n{log}");
            assert_eq!(program, "broken_program");
            assert!(log.lines().count() >= 2, "the log has the JIT's own text: {log}");
        }
        other => panic!("expected PtxLoad, got {other:?}"),
    }
    match device.load(ADD_ONE_PTX, "no_such_entry", "add_one") {
        Err(Error::PtxLoad { log, .. }) => assert!(log.contains("no_such_entry"), "{log}"),
        other => panic!("expected PtxLoad for a missing entry, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn independent_kernels_on_two_streams_overlap() {
    let (_one, device) = device();
    let kernel = spin(&device);
    let (s0, s1) = (device.stream(0), device.stream(1));
    let a = device.alloc_on(DType::I64, 2, s0).unwrap();
    let b = device.alloc_on(DType::I64, 2, s1).unwrap();
    let (start, end) = (Event::new(&device, true).unwrap(), Event::new(&device, true).unwrap());
    device.synchronize().unwrap();
    start.record(s0).unwrap();
    let ns = 100_000_000;
    launch_spin(&kernel, &a, ns, s0);
    launch_spin(&kernel, &b, ns, s1);
    s0.wait(&{
        let done = Event::new(&device, false).unwrap();
        done.record(s1).unwrap();
        done
    })
    .unwrap();
    end.record(s0).unwrap();
    end.synchronize().unwrap();
    let (ta, tb) = (times(&a), times(&b));
    let elapsed = start.elapsed_ms(&end).unwrap();
    println!("stream 0 spin {ta:?}, stream 1 spin {tb:?}, both in {elapsed:.1} ms");
    assert!(tb.0 < ta.1 && ta.0 < tb.1, "the spins overlap in time");
    assert!(elapsed < 1.5 * (ns as f32 / 1e6), "two 100 ms spins took {elapsed} ms");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_scheduler_runs_independent_launches_apart_and_waits_for_dependencies() {
    let (_one, device) = device();
    let kernel = spin(&device);
    let outs: Vec<_> = (0..3).map(|_| device.alloc(DType::I64, 2).unwrap()).collect();
    // 0 and 1 are independent; 2 must follow both.
    let launches = [
        ScheduledLaunch {
            writes: vec![BufferId(0)],
            ..Default::default()
        },
        ScheduledLaunch {
            writes: vec![BufferId(1)],
            ..Default::default()
        },
        ScheduledLaunch {
            writes: vec![BufferId(2)],
            after: vec![0, 1],
            ..Default::default()
        },
    ];
    let scheduler = Scheduler::new(STREAM_COUNT);
    let plan = scheduler.plan(&launches).unwrap();
    assert_ne!(plan.launches[0].stream, plan.launches[1].stream);
    scheduler
        .run(&device, &plan, |i, stream| {
            launch_spin(&kernel, &outs[i], 30_000_000, stream);
            Ok(())
        })
        .unwrap();
    let t: Vec<_> = outs.iter().map(times).collect();
    println!("scheduled spins: {t:?}");
    assert!(t[1].0 < t[0].1, "independent launches overlap");
    assert!(
        t[2].0 >= t[0].1 && t[2].0 >= t[1].1,
        "the dependent launch starts after both"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn many_host_threads_launch_at_once() {
    let (_one, device) = device();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let device = device.clone();
            std::thread::spawn(move || {
                let kernel = add_one(&device);
                let stream = device.stream(t);
                for round in 0..25 {
                    let n = 1000 + 97 * t + round;
                    let data: Vec<f32> = (0..n).map(|i| (i + t * 1000) as f32).collect();
                    let x = device.from_host_on(&HostBuffer::from_elements(&data), stream).unwrap();
                    launch_add_one(&kernel, &x, stream);
                    launch_add_one(&kernel, &x, stream);
                    let back = x.to_host_on(stream).unwrap().to_vec::<f32>();
                    let expect: Vec<f32> = data.iter().map(|v| v + 2.0).collect();
                    assert_eq!(back, expect, "thread {t}, round {round}");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a launching thread failed");
    }
    println!("{:?}", device.memory_stats());
}
