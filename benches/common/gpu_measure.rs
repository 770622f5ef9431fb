//! Measuring pipelines on a GPU, shared by the throughput report
//! (`examples/throughput/gpu.rs`) and the sweep (`examples/sweep/gpu.rs`):
//! poisoning the memory outputs will land on, and timing calls with CUDA
//! events while the stream pool is held.

#![allow(dead_code)]

use std::sync::Arc;
use tilefuse::device::cuda::CudaDevice;
use tilefuse::runtime::{launch_times, time_launches};
use tilefuse::{DType, Error, Result};

/// Calls queued under one hold of the streams.
pub const BATCH: usize = 20;

/// Fills a block of each size of `bytes` on every stream with NaNs and
/// gives them back to the allocator, so outputs of those sizes likely land
/// on them: an element a kernel fails to write then shows as a NaN (as f32,
/// f16 and bf16; a huge value as f64 or i64).
pub fn poison(dev: &Arc<CudaDevice>, bytes: &[usize]) -> Result<()> {
    for s in 0..dev.streams().len() {
        let mut blocks = Vec::with_capacity(bytes.len());
        for &b in bytes {
            let block = dev.alloc_on(DType::U32, b.max(1).div_ceil(4), dev.stream(s))?;
            block.fill_words_on(0x7fc0_7fc0, dev.stream(s))?;
            blocks.push(block);
        }
    }
    dev.synchronize()
}

/// The device time of `reps` calls, in seconds, each made by `call(i)`
/// (which queues one call's kernels, `launches` of them, and must not wait
/// for them): the calls are queued [`BATCH`] at a time while the stream pool
/// is held ([`CudaDevice::hold_streams`]), every launch between two CUDA
/// events on its stream, and a call's time runs from its first launch's
/// start to its last launch's end.
///
/// # Errors
/// Those of `call` and of the device; a batch whose launches are not
/// `launches` per call.
pub fn timed_calls(
    dev: &CudaDevice,
    reps: usize,
    launches: usize,
    mut call: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    if launches == 0 {
        return Err(miscount("a call that launches no kernel cannot be timed"));
    }
    let mut samples = Vec::with_capacity(reps);
    let mut calls = 0;
    time_launches(true);
    let timed = (|| {
        while samples.len() < reps {
            let hold = dev.hold_streams()?;
            let batch = BATCH.min(reps - samples.len());
            for _ in 0..batch {
                call(calls)?;
                calls += 1;
            }
            hold.release();
            let times = launch_times()?;
            if times.len() != batch * launches {
                return Err(miscount(&format!(
                    "{batch} calls launched {} kernels, not {launches} each",
                    times.len()
                )));
            }
            for call in times.chunks(launches) {
                let start = call.iter().map(|t| t.start_ms).fold(f32::INFINITY, f32::min);
                let end = call.iter().map(|t| t.end_ms).fold(f32::NEG_INFINITY, f32::max);
                samples.push(f64::from(end - start) * 1e-3);
            }
        }
        Ok(())
    })();
    time_launches(false);
    timed.map(|()| samples)
}

/// The kernels `queue` launches (it queues them and does not wait).
///
/// # Errors
/// Those of `queue` and of the device.
pub fn launches(queue: impl FnOnce() -> Result<()>) -> Result<usize> {
    time_launches(true);
    let counted = queue().and_then(|()| launch_times());
    time_launches(false);
    Ok(counted?.len())
}

fn miscount(reason: &str) -> Error {
    Error::InvalidProgram {
        program: "timed calls".into(),
        reason: reason.into(),
    }
}
