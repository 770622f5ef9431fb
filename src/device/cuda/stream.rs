//! Streams, events and kernel launch.

use super::driver_error;
use super::module::LoadedFunction;
use super::CudaDevice;
use crate::error::{Error, Result};
use cudarc::driver::{result, sys, CudaContext};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

/// The number of pooled streams per device.
pub const STREAM_COUNT: usize = 4;

/// Dynamic shared memory a block gets without raising the kernel's limit.
const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// A pooled, non-blocking CUDA stream of one device.
///
/// Streams are created with the device and live as long as it does; get them
/// from [`CudaDevice::stream`].
pub struct Stream {
    raw: sys::CUstream,
    index: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUstream is a handle the driver lets any thread use once the
// stream's context is current, and every method binds it first.
unsafe impl Send for Stream {}
// SAFETY: as for `Send`; the driver serialises concurrent calls on one stream.
unsafe impl Sync for Stream {}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(cuda:{}, {})", self.ctx.ordinal(), self.index)
    }
}

impl Stream {
    /// Creates stream `index` in the context current on this thread.
    pub(crate) fn create(index: usize, ctx: &Arc<CudaContext>) -> Result<Stream> {
        ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))?;
        let raw =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(driver_error("cuStreamCreate"))?;
        Ok(Stream {
            raw,
            index,
            ctx: ctx.clone(),
        })
    }

    /// Destroys the stream; only the owning device calls this, when dropped.
    pub(crate) fn destroy(&self) {
        // SAFETY: the stream was created by `create` and the device that owns
        // it is being dropped, so nothing uses it afterwards.
        let _ = unsafe { result::stream::destroy(self.raw) };
    }

    /// The stream's index in its device's pool.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The ordinal of the device the stream belongs to.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The raw driver handle, for calls this module does not wrap.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }

    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))
    }

    /// Blocks until all work queued on the stream finished.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream is alive as long as `self`.
        unsafe { result::stream::synchronize(self.raw) }.map_err(driver_error("cuStreamSynchronize"))
    }

    /// Makes later work on this stream wait until `event` completes (the
    /// event's most recent record at the time of this call).
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.wait_raw(event.raw)
    }

    pub(crate) fn wait_raw(&self, event: sys::CUevent) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream and the event are alive; waiting has no other
        // precondition.
        unsafe { result::stream::wait_event(self.raw, event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
            .map_err(driver_error("cuStreamWaitEvent"))
    }

    pub(crate) fn record_raw(&self, event: sys::CUevent) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream and the event are alive and of this context.
        unsafe { result::event::record(event, self.raw) }.map_err(driver_error("cuEventRecord"))
    }
}

/// A CUDA event: a point in a stream that other streams or the host can wait
/// for, and, when made with timing, measure to.
pub struct Event {
    raw: sys::CUevent,
    timing: bool,
    ctx: Arc<CudaContext>,
}

// SAFETY: an event handle may be used from any thread once its context is
// current, which every method ensures.
unsafe impl Send for Event {}
// SAFETY: as for `Send`.
unsafe impl Sync for Event {}

impl Event {
    /// A new event of `device`. `timing: false` makes the cheap kind used for
    /// dependencies (`CU_EVENT_DISABLE_TIMING`); `timing: true` one that
    /// [`Event::elapsed_ms`] can measure.
    pub fn new(device: &CudaDevice, timing: bool) -> Result<Event> {
        device.bind()?;
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        let raw = result::event::create(flags).map_err(driver_error("cuEventCreate"))?;
        Ok(Event {
            raw,
            timing,
            ctx: device.context().clone(),
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.record_raw(self.raw)
    }

    /// Whether all work before the last record completed; never blocks.
    pub fn query(&self) -> Result<bool> {
        self.ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))?;
        query_raw(self.raw)
    }

    /// Blocks until the event completed.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))?;
        // SAFETY: the event is alive as long as `self`.
        unsafe { result::event::synchronize(self.raw) }.map_err(driver_error("cuEventSynchronize"))
    }

    /// Milliseconds from `self` to `end`; both must have been made with timing
    /// and have completed.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            return Err(Error::Driver {
                call: "cuEventElapsedTime",
                message: "both events must be created with timing".into(),
            });
        }
        self.ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))?;
        // SAFETY: both events are alive and were created with timing.
        unsafe { result::event::elapsed(self.raw, end.raw) }.map_err(driver_error("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the event is destroyed once; the driver releases it when
            // pending work completes.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

/// Whether the work before `event`'s last record completed, without blocking.
pub(crate) fn query_raw(event: sys::CUevent) -> Result<bool> {
    // SAFETY: callers pass events they own and that are alive.
    match unsafe { sys::cuEventQuery(event) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => Err(driver_error("cuEventQuery")(result::DriverError(other))),
    }
}

/// A raw event without timing, owned by a pool of the device.
#[derive(Debug)]
pub(crate) struct RawEvent(pub(crate) sys::CUevent);

// SAFETY: an event handle is usable from any thread once its context is
// current; the pool's users bind it before each call.
unsafe impl Send for RawEvent {}

/// Reused dependency events (no timing) of one device.
#[derive(Default)]
pub(crate) struct EventPool {
    free: Mutex<Vec<RawEvent>>,
}

impl EventPool {
    /// An event from the pool, or a new one; the device's context must be
    /// current.
    pub(crate) fn take(&self) -> Result<RawEvent> {
        if let Some(event) = self.free.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Ok(event);
        }
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(RawEvent)
            .map_err(driver_error("cuEventCreate"))
    }

    /// Returns an event to the pool. Work already told to wait on it keeps
    /// waiting for the record it saw, so it may be recorded again at once.
    pub(crate) fn give(&self, event: RawEvent) {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }
}

impl Drop for EventPool {
    fn drop(&mut self) {
        for event in self.free.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
            // SAFETY: pooled events are owned by the pool; the device binds its
            // context before its fields are dropped.
            let _ = unsafe { result::event::destroy(event.0) };
        }
    }
}

/// Launches `kernel` on `stream` with a `grid` of blocks of `block` threads,
/// `shared_bytes` of dynamic shared memory, and `args` as the kernel's
/// parameters, each a 64-bit value (a device pointer from
/// [`DeviceBuffer::ptr_on`](super::DeviceBuffer::ptr_on), or an integer).
///
/// More than 48 KiB of shared memory raises the kernel's limit first.
///
/// # Safety
/// The kernel must take exactly `args.len()` parameters of 8 bytes each, and
/// every pointer among them must point to device memory of this device that
/// stays alive, and is not used elsewhere in a conflicting way, until the
/// kernel completes. Nothing here can check what the kernel does with them.
pub unsafe fn launch(
    kernel: &LoadedFunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    stream: &Stream,
    args: &[u64],
) -> Result<()> {
    if kernel.ordinal() != stream.ordinal() {
        return Err(Error::DeviceMismatch {
            op: "launch",
            lhs: format!("kernel on cuda:{}", kernel.ordinal()),
            rhs: format!("stream on cuda:{}", stream.ordinal()),
        });
    }
    let dims = [grid.0, grid.1, grid.2, block.0, block.1, block.2];
    if dims.contains(&0) {
        return Err(Error::Driver {
            call: "cuLaunchKernel",
            message: format!(
                "kernel `{}`: grid {grid:?} and block {block:?} must not have a zero extent",
                kernel.name()
            ),
        });
    }
    stream.bind()?;
    if shared_bytes > DEFAULT_SHARED_BYTES {
        kernel.allow_shared(shared_bytes)?;
    }
    // The driver reads each parameter through a pointer to it when the launch
    // is queued, so values on this stack frame are enough.
    let mut values: SmallVec<[u64; 16]> = args.iter().copied().collect();
    let mut params: SmallVec<[*mut c_void; 16]> = values.iter_mut().map(|v| v as *mut u64 as *mut c_void).collect();
    // SAFETY: the function, stream and parameter array are valid for this
    // call; what the kernel does with the arguments is the caller's contract.
    unsafe { result::launch_kernel(kernel.raw(), grid, block, shared_bytes, stream.raw, &mut params) }
        .map_err(driver_error("cuLaunchKernel"))
}
