//! The CUDA driver layer: contexts, modules, memory, transfers, streams;
//! and on top of it, in `compile/`, the compile service.
//!
//! Everything here talks to the CUDA driver through cudarc's `driver::result`
//! and `driver::sys` layers, with cudarc's dynamic loading: the crate builds
//! and runs on machines without CUDA, and every entry point returns
//! [`Error::CudaUnavailable`] there instead of panicking.
//!
//! | file | what it owns |
//! | --- | --- |
//! | `context.rs` | [`CudaDevice`]: one context per device, cached per ordinal (its compile service is a [`CudaCompiler`]); [`probe`], [`DeviceInfo`]; the driver check |
//! | `module.rs` | [`LoadedFunction`]: PTX compiled by the driver's linker (`cuLinkAddData`/`cuLinkComplete`) with the JIT's error log and loaded as a cubin, cached per (PTX, entry) |
//! | `memory.rs` | [`DeviceBuffer`] (the [`DeviceData`](crate::storage::DeviceData) of device storage) and the caching allocator behind it; [`MemoryStats`] |
//! | `transfer.rs` | host ↔ device copies through reused pinned staging buffers |
//! | `stream.rs` | [`Stream`], [`Event`], [`launch`] |
//! | `measure.rs` | [`CudaDevice::copy_bandwidth`], [`CudaDevice::hold_streams`] ([`StreamHold`]), [`DeviceBuffer::fill_words_on`]: measuring the device |
//! | `schedule.rs` | [`Scheduler`]: assigns launches to streams and places the event waits between them |
//! | `compile/` | [`CudaCompiler`], the compile service on top of this layer: [`CompiledProgram`]s cached per program and settings, their quick and tuned tiers, the PTX interpreter, argument checks and launches. The only part of `device` that sees a kernel program. |
//! | `background.rs` | the threads that call the driver in the background, counted so that process exit waits for their loads |
//!
//! **Invariant:** tilefuse orders GPU work itself. A buffer remembers the
//! streams that used it ([`DeviceBuffer::ptr_on`]); its block goes back to
//! the pool with an event recorded on each of them and is handed out again
//! only once those events completed or the new user's stream waits on them.
//! cudarc's own per-slice event tracking is switched off.
//!
//! **Invariant:** no call here panics on a missing or old driver, a missing
//! GPU, a failed allocation or a bad PTX module; each comes back as an
//! [`Error`] value.
//!
//! ```no_run
//! # fn main() -> tilefuse::Result<()> {
//! use tilefuse::device::cuda::CudaDevice;
//! use tilefuse::storage::HostBuffer;
//! let device = CudaDevice::open(0)?;
//! let x = device.from_host(&HostBuffer::from_elements(&[1.0f32, 2.0, 3.0]))?;
//! assert_eq!(x.to_host()?.to_vec::<f32>(), vec![1.0, 2.0, 3.0]);
//! # Ok(())
//! # }
//! ```

mod background;
mod compile;
mod context;
mod measure;
mod memory;
mod module;
mod schedule;
mod stream;
mod transfer;

pub use compile::choice;
pub use compile::{
    run_program, run_program_with_scalars, CandidateTime, CompiledProgram, CudaCompiler, InterpreterLoad, MeasuredChoice,
};
pub use context::{device_count, probe, probe_ordinal, CudaDevice, DeviceInfo, MIN_DRIVER_VERSION};
pub use measure::StreamHold;
pub use memory::{size_class, DeviceBuffer, MemoryStats};
pub use module::{LoadedFunction, ModuleStats};
pub use schedule::{BufferId, LaunchPlan, PlannedLaunch, ScheduledLaunch, Scheduler};
pub use stream::{launch, Event, Stream, STREAM_COUNT};
pub use transfer::STAGING_CHUNK_BYTES;

use crate::error::Error;
use cudarc::driver::result::DriverError;

/// Turns a driver error into [`Error::Driver`], naming the call that failed.
pub(crate) fn driver_error(call: &'static str) -> impl FnOnce(DriverError) -> Error {
    move |e| Error::Driver {
        call,
        message: describe(e),
    }
}

/// The driver's name and text for an error code, e.g.
/// `CUDA_ERROR_INVALID_VALUE: invalid argument`.
pub(crate) fn describe(e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(text) => format!("{name}: {}", text.to_string_lossy()),
        Err(_) => name,
    }
}
