//! Helpers for measuring the device: its copy bandwidth, buffers filled with
//! a pattern, and holding the stream pool so that timed work is queued
//! before any of it starts.

use super::{driver_error, CudaDevice, DeviceBuffer, Event, Stream};
use crate::dtype::DType;
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Warm-up copies before the timed ones in [`CudaDevice::copy_bandwidth`].
const COPY_WARMUP: usize = 3;
/// Timed copies in [`CudaDevice::copy_bandwidth`]; the median is reported.
const COPY_REPS: usize = 20;
/// The longest a [`StreamHold`] keeps the streams waiting, so that a host
/// thread blocked inside the driver (a full launch queue) cannot deadlock
/// with it.
const HOLD_LIMIT: Duration = Duration::from_secs(3);

impl DeviceBuffer {
    /// Sets every 32-bit word of the buffer to `word`, in order on `stream`
    /// (the buffer's bytes must be a multiple of 4).
    ///
    /// Useful to poison memory before checking that a kernel writes all of it:
    /// `0x7fc0_7fc0` is a NaN as f32 and as two bf16 or f16 values.
    pub fn fill_words_on(&self, word: u32, stream: &Stream) -> Result<()> {
        if self.bytes() % 4 != 0 {
            return Err(Error::Driver {
                call: "cuMemsetD32Async",
                message: format!("{} bytes are not a whole number of 32-bit words", self.bytes()),
            });
        }
        if self.bytes() == 0 {
            return Ok(());
        }
        stream.bind()?;
        let ptr = self.ptr_on(stream);
        // SAFETY: the range lies inside the block, which stays alive until the
        // stream is done with it (it is marked used there).
        unsafe { sys::cuMemsetD32Async(ptr, word, self.bytes() / 4, stream.raw()) }
            .result()
            .map_err(driver_error("cuMemsetD32Async"))
    }
}

impl CudaDevice {
    /// The device-to-device copy bandwidth in GB/s (10⁹ bytes per second),
    /// counting bytes read plus bytes written: the median of several copies
    /// of `bytes` bytes between two buffers on stream 0, each timed with CUDA
    /// events after warm-up copies. The source holds a non-zero pattern.
    ///
    /// Use a size several times the L2 cache (1 GiB on current GPUs).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when the two buffers do not fit; device
    /// failures.
    pub fn copy_bandwidth(self: &Arc<Self>, bytes: usize) -> Result<f64> {
        let words = bytes.div_ceil(4).max(1);
        let stream = self.stream(0);
        let src = self.alloc_on(DType::U32, words, stream)?;
        let dst = self.alloc_on(DType::U32, words, stream)?;
        src.fill_words_on(0x3f81_2345, stream)?;
        let copy = || {
            stream.bind()?;
            // SAFETY: both ranges lie inside live blocks marked used on `stream`.
            unsafe { result::memcpy_dtod_async(dst.ptr_on(stream), src.ptr_on(stream), words * 4, stream.raw()) }
                .map_err(driver_error("cuMemcpyDtoDAsync"))
        };
        for _ in 0..COPY_WARMUP {
            copy()?;
        }
        let mut times = Vec::with_capacity(COPY_REPS);
        for _ in 0..COPY_REPS {
            let (start, end) = (Event::new(self, true)?, Event::new(self, true)?);
            start.record(stream)?;
            copy()?;
            end.record(stream)?;
            end.synchronize()?;
            times.push(start.elapsed_ms(&end)? as f64);
        }
        times.sort_by(f64::total_cmp);
        let median_s = times[times.len() / 2] * 1e-3;
        Ok(2.0 * (words * 4) as f64 / median_s / 1e9)
    }

    /// Holds every pooled stream: work queued on any of them afterwards
    /// starts only once the hold is released (or after a few seconds, so a
    /// host thread the driver blocks cannot deadlock with it).
    ///
    /// Timing work queued while the streams are held measures the device
    /// alone: the host's cost of queuing it, and the launch latency, fall
    /// before the first timed event.
    ///
    /// # Errors
    /// Device failures.
    pub fn hold_streams(&self) -> Result<StreamHold> {
        let gate = Arc::new(Gate::default());
        let first = self.stream(0);
        first.bind()?;
        let arg = Arc::into_raw(gate.clone()) as *mut c_void;
        // SAFETY: `arg` is an `Arc<Gate>` leaked for the callback, which takes
        // it back exactly once when the driver runs it.
        let queued = unsafe { result::stream::launch_host_function(first.raw(), wait_for_gate, arg) };
        if let Err(e) = queued {
            // SAFETY: the callback was not queued, so the leaked count is
            // still ours to take back.
            drop(unsafe { Arc::from_raw(arg as *const Gate) });
            return Err(driver_error("cuLaunchHostFunc")(e));
        }
        let held = Event::new(self, false)?;
        held.record(first)?;
        for stream in self.streams().iter().skip(1) {
            stream.wait(&held)?;
        }
        Ok(StreamHold { gate })
    }
}

/// Streams held by [`CudaDevice::hold_streams`]; released by
/// [`StreamHold::release`] or when dropped.
#[derive(Debug)]
pub struct StreamHold {
    gate: Arc<Gate>,
}

impl StreamHold {
    /// Lets the held streams run.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for StreamHold {
    fn drop(&mut self) {
        let mut open = self.gate.open.lock().unwrap_or_else(PoisonError::into_inner);
        *open = true;
        self.gate.changed.notify_all();
    }
}

#[derive(Debug, Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
}

/// The host function that holds stream 0 until its gate opens.
unsafe extern "C" fn wait_for_gate(arg: *mut c_void) {
    // SAFETY: `arg` came from `Arc::into_raw` in `hold_streams`, and the
    // driver calls this function once.
    let gate = unsafe { Arc::from_raw(arg as *const Gate) };
    let open = gate.open.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = gate
        .changed
        .wait_timeout_while(open, HOLD_LIMIT, |open| !*open)
        .unwrap_or_else(PoisonError::into_inner);
}
