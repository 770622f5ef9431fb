//! Opening a CUDA device: the driver check, device properties, and the
//! process-wide table of contexts.

use super::memory::Pool;
use super::module::ModuleCache;
use super::stream::{EventPool, Stream, STREAM_COUNT};
use super::transfer::StagingPool;
use super::{describe, driver_error};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys, CudaContext};
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The oldest driver tilefuse runs on, as `cuDriverGetVersion` reports it
/// (1000 × major + 10 × minor): CUDA 12.0, the version cudarc is bound to.
pub const MIN_DRIVER_VERSION: i32 = 12000;

/// Every driver symbol tilefuse's CUDA layer calls, directly or through
/// cudarc. cudarc resolves a symbol on its first call and panics when the
/// library lacks it; checking them all up front turns an old driver into an
/// error at [`CudaDevice::open`] instead.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuDriverGetVersion",
    "cuInit",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuEventDestroy_v2",
    "cuLinkCreate_v2",
    "cuLinkAddData_v2",
    "cuLinkComplete",
    "cuLinkDestroy",
    "cuModuleLoadData",
    "cuModuleLoadDataEx",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
    "cuFuncSetAttribute",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetInfo_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuMemsetD2D32Async",
];

/// What [`probe`] reports about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device ordinal.
    pub ordinal: usize,
    /// The device's name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability `(major, minor)`, e.g. `(9, 0)` for sm_90.
    pub compute_capability: (u32, u32),
    /// The driver's CUDA version as `cuDriverGetVersion` gives it: 13000 is 13.0.
    pub driver_version: i32,
    /// The number of streaming multiprocessors.
    pub sm_count: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// L2 cache size in bytes.
    pub l2_bytes: usize,
    /// The most shared memory a block can opt in to, in bytes.
    pub max_shared_memory_per_block: usize,
}

impl DeviceInfo {
    /// The `sm_XY` target name of the device, e.g. `sm_90`.
    pub fn sm_target(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// The newest PTX ISA version `(major, minor)` the driver's JIT accepts.
    pub fn max_ptx_version(&self) -> (u32, u32) {
        max_ptx_version(self.driver_version)
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cuda:{} {} ({}, {} SMs, {:.1} GiB, L2 {} MiB, driver CUDA {}.{})",
            self.ordinal,
            self.name,
            self.sm_target(),
            self.sm_count,
            self.total_memory as f64 / (1u64 << 30) as f64,
            self.l2_bytes >> 20,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10
        )
    }
}

/// The newest PTX ISA version a driver of `driver_version` accepts.
fn max_ptx_version(driver_version: i32) -> (u32, u32) {
    // The PTX ISA version each CUDA release introduced; the driver's JIT takes
    // every version up to its own.
    const TABLE: &[(i32, (u32, u32))] = &[
        (13000, (9, 0)),
        (12090, (8, 8)),
        (12080, (8, 7)),
        (12050, (8, 5)),
        (12040, (8, 4)),
        (12030, (8, 3)),
        (12020, (8, 2)),
        (12010, (8, 1)),
        (12000, (8, 0)),
    ];
    TABLE
        .iter()
        .find(|(cuda, _)| driver_version >= *cuda)
        .map_or((7, 8), |&(_, ptx)| ptx)
}

/// One CUDA device with its context, stream pool, memory pool, module cache
/// and staging buffers. Opened once per ordinal and shared.
pub struct CudaDevice {
    info: DeviceInfo,
    pub(crate) memory: Pool,
    pub(crate) modules: ModuleCache,
    pub(crate) staging: StagingPool,
    pub(crate) events: EventPool,
    streams: Vec<Stream>,
    // Declared last so that it is dropped last: everything above lives in it.
    ctx: Arc<CudaContext>,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaDevice({})", self.info)
    }
}

impl CudaDevice {
    /// The device of `ordinal`, opened on first use and shared afterwards.
    ///
    /// Returns [`Error::CudaUnavailable`] when the driver library is missing,
    /// older than CUDA 12.0, finds no GPU, or `ordinal` is out of range; never
    /// panics for any of these.
    pub fn open(ordinal: usize) -> Result<Arc<CudaDevice>> {
        static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>, foldhash::fast::FixedState>>> = OnceLock::new();
        let mut table = DEVICES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(device) = table.get(&ordinal) {
            return Ok(device.clone());
        }
        let device = Arc::new(guarded("opening the device", || CudaDevice::create(ordinal))?);
        table.insert(ordinal, device.clone());
        Ok(device)
    }

    fn create(ordinal: usize) -> Result<CudaDevice> {
        let info = probe_ordinal(ordinal)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::CudaUnavailable {
            reason: format!("could not create a context on device {ordinal}: {}", describe(e)),
        })?;
        // SAFETY: tilefuse never creates cudarc `CudaSlice`s in this context;
        // its own buffers order their uses with events (see `memory.rs`), so
        // cudarc's per-slice tracking would only add work.
        unsafe { ctx.disable_event_tracking() };
        let mut streams = Vec::with_capacity(STREAM_COUNT);
        for index in 0..STREAM_COUNT {
            streams.push(Stream::create(index, &ctx)?);
        }
        Ok(CudaDevice {
            info,
            memory: Pool::default(),
            modules: ModuleCache::default(),
            staging: StagingPool::default(),
            events: EventPool::default(),
            streams,
            ctx,
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.info.ordinal
    }

    /// The device's properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The pooled streams, [`STREAM_COUNT`] of them, all non-blocking.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// Pooled stream `index % STREAM_COUNT`.
    pub fn stream(&self, index: usize) -> &Stream {
        &self.streams[index % self.streams.len()]
    }

    /// Makes later work on `waiter` wait for the work queued so far on
    /// stream `on`, through an event of the pool.
    pub(crate) fn join_streams(&self, waiter: &Stream, on: usize) -> Result<()> {
        let event = self.events.take()?;
        let joined = self
            .stream(on)
            .record_raw(event.0)
            .and_then(|()| waiter.wait_raw(event.0));
        // A queued wait keeps the record it saw, so the event can go back now.
        self.events.give(event);
        joined
    }

    /// Makes this device's context current on the calling thread. Every
    /// driver call of this module goes through it first.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(driver_error("cuCtxSetCurrent"))
    }

    /// The cudarc context, for calls this module does not wrap.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits for all work on the device to finish.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        result::ctx::synchronize().map_err(driver_error("cuCtxSynchronize"))
    }

    /// Free and total device memory in bytes, as the driver sees them.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().map_err(driver_error("cuMemGetInfo"))
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Devices live in a process-wide table, so this runs only for one that
        // failed half way. The fields' own drops release their handles; they
        // need the context current and idle.
        if self.bind().is_ok() {
            let _ = result::ctx::synchronize();
        }
        for stream in &self.streams {
            stream.destroy();
        }
    }
}

/// Runs `f`, turning a panic inside cudarc (a driver symbol it could not
/// resolve, a library it could not load) into [`Error::CudaUnavailable`].
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(Error::CudaUnavailable {
            reason: format!(
                "the CUDA driver library failed while {what}: {}",
                panic_message(payload.as_ref())
            ),
        })
    })
}

/// The message a caught panic carried, or "unknown panic".
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic")
}

/// Loads and initialises the driver once per process and returns its
/// version; every later call returns the first answer.
fn driver() -> Result<i32> {
    static DRIVER: OnceLock<std::result::Result<i32, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            check_library()?;
            guarded("loading the driver", load_driver).map_err(|e| match e {
                Error::CudaUnavailable { reason } => reason,
                other => other.to_string(),
            })
        })
        .clone()
        .map_err(|reason| Error::CudaUnavailable { reason })
}

/// Looks for the driver library under the names cudarc tries, in its order,
/// and checks that it has every symbol tilefuse calls, so that cudarc's own
/// loading cannot panic afterwards.
fn check_library() -> std::result::Result<(), String> {
    let mut candidates: Vec<String> = Vec::new();
    for name in ["cuda", "nvcuda"]
        .iter()
        .flat_map(|name| cudarc::get_lib_name_candidates(name))
    {
        if !candidates.contains(&name) {
            candidates.push(name);
        }
    }
    for name in &candidates {
        // SAFETY: loading the CUDA driver library runs only its initialisers,
        // exactly as cudarc's own loading does next.
        let Ok(library) = (unsafe { libloading::Library::new(name) }) else {
            continue;
        };
        let missing: Vec<&str> = DRIVER_SYMBOLS
            .iter()
            .copied()
            // SAFETY: the symbol is only looked up, never called, so its type
            // does not matter.
            .filter(|symbol| unsafe { library.get::<unsafe extern "C" fn()>(symbol.as_bytes()) }.is_err())
            .collect();
        return if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the CUDA driver library {name} lacks {}: the driver is older than CUDA 12.0, which tilefuse needs",
                missing.join(", ")
            ))
        };
    }
    Err(format!(
        "no CUDA driver library could be loaded ({} names tried, such as {}); \
         is the NVIDIA driver installed and on the library path?",
        candidates.len(),
        candidates.first().map_or("libcuda.so", String::as_str)
    ))
}

/// Reads the driver version and initialises the driver.
fn load_driver() -> Result<i32> {
    let mut version = 0;
    // SAFETY: `version` is a valid place for the driver to write an int; the
    // library was checked to have the symbol.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(driver_error("cuDriverGetVersion"))?;
    if version < MIN_DRIVER_VERSION {
        return Err(Error::CudaUnavailable {
            reason: format!(
                "the CUDA driver supports CUDA {}.{}; tilefuse needs {}.{} or newer",
                version / 1000,
                version % 1000 / 10,
                MIN_DRIVER_VERSION / 1000,
                MIN_DRIVER_VERSION % 1000 / 10
            ),
        });
    }
    result::init().map_err(|e| Error::CudaUnavailable {
        reason: format!("the CUDA driver did not initialise (cuInit: {})", describe(e)),
    })?;
    Ok(version)
}

/// The number of CUDA devices, or [`Error::CudaUnavailable`] without a usable
/// driver.
pub fn device_count() -> Result<usize> {
    driver()?;
    guarded("counting devices", || {
        let count = result::device::get_count().map_err(driver_error("cuDeviceGetCount"))?;
        Ok(count.max(0) as usize)
    })
}

/// The properties of device 0, without creating a context; the error says why
/// there is no usable CUDA device.
pub fn probe() -> Result<DeviceInfo> {
    probe_ordinal(0)
}

/// The properties of device `ordinal`, without creating a context.
pub fn probe_ordinal(ordinal: usize) -> Result<DeviceInfo> {
    let driver_version = driver()?;
    let count = device_count()?;
    if count == 0 {
        return Err(Error::CudaUnavailable {
            reason: "the CUDA driver found no GPU".into(),
        });
    }
    if ordinal >= count {
        return Err(Error::CudaUnavailable {
            reason: format!("device ordinal {ordinal} is out of range: there are {count} CUDA devices"),
        });
    }
    guarded("reading device properties", || {
        use sys::CUdevice_attribute as A;
        let device = result::device::get(ordinal as i32).map_err(driver_error("cuDeviceGet"))?;
        let attribute = |a: A| -> Result<i32> {
            // SAFETY: `device` came from `cuDeviceGet` above.
            unsafe { result::device::get_attribute(device, a) }.map_err(driver_error("cuDeviceGetAttribute"))
        };
        let non_negative = |v: i32| v.max(0) as usize;
        Ok(DeviceInfo {
            ordinal,
            name: result::device::get_name(device).map_err(driver_error("cuDeviceGetName"))?,
            compute_capability: (
                non_negative(attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?) as u32,
                non_negative(attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?) as u32,
            ),
            driver_version,
            sm_count: non_negative(attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?) as u32,
            // SAFETY: `device` came from `cuDeviceGet` above.
            total_memory: unsafe { result::device::total_mem(device) }.map_err(driver_error("cuDeviceTotalMem"))?,
            l2_bytes: non_negative(attribute(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
            max_shared_memory_per_block: non_negative(attribute(
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_version_follows_the_driver() {
        assert_eq!(max_ptx_version(13000), (9, 0));
        assert_eq!(max_ptx_version(12080), (8, 7));
        assert_eq!(max_ptx_version(12060), (8, 5));
        assert_eq!(max_ptx_version(12000), (8, 0));
    }

    #[test]
    fn open_without_a_driver_is_an_error_not_a_panic() {
        // `open` must return whatever the machine offers without unwinding;
        // `catch_unwind` makes a panic a test failure with a clear message.
        let opened = catch_unwind(|| CudaDevice::open(0)).expect("CudaDevice::open panicked");
        match check_library() {
            // No driver library here (the usual CI machine): the error must say so.
            Err(_) => match opened {
                Err(Error::CudaUnavailable { reason }) => {
                    assert!(reason.contains("driver library"), "reason: {reason}");
                    assert!(matches!(probe(), Err(Error::CudaUnavailable { .. })));
                    assert!(matches!(device_count(), Err(Error::CudaUnavailable { .. })));
                }
                other => panic!("expected CudaUnavailable, got {other:?}"),
            },
            // A driver is present: opening either works or says why not.
            Ok(()) => match opened {
                Ok(device) => assert_eq!(device.ordinal(), 0),
                Err(Error::CudaUnavailable { reason }) => assert!(!reason.is_empty()),
                Err(other) => panic!("expected Ok or CudaUnavailable, got {other:?}"),
            },
        }
    }
}
