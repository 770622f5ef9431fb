//! The back ends a realization can run on, and their public entry points:
//! the CPU executor always, a CUDA device with the `cuda` feature.
//!
//! This is the one file of the runtime that looks at the build's features.
//! The CUDA back end's files (`cuda.rs`, `timing.rs`) sit beside it and are
//! declared here, so that nothing else in the runtime needs to know whether
//! they are built; the runtime re-exports what this file exports.

use super::host::HostBackend;
use super::Backend;
use crate::config::Config;
use crate::device::Device;
use crate::error::Result;

#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
mod cuda;
#[cfg(feature = "cuda")]
#[path = "timing.rs"]
mod timing;

pub use super::host::run_plan as run_plan_on_host;
#[cfg(feature = "cuda")]
pub use cuda::{run_plan as run_plan_on_cuda, upload_count};
#[cfg(feature = "cuda")]
pub use timing::{launch_times, time_launches, LaunchTime};

/// `device`, opened for the whole realization under `config` (which a GPU
/// compiles its kernels under); fails for a device this build or machine
/// cannot run on.
#[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
pub(super) fn open(device: Device, config: &Config) -> Result<Box<dyn Backend + '_>> {
    match device {
        Device::Cpu => Ok(Box::new(HostBackend)),
        #[cfg(feature = "cuda")]
        Device::Cuda(ordinal) => Ok(Box::new(cuda::CudaBackend::open(ordinal, config)?)),
        // Without the feature, opening a CUDA device fails and says why.
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(ordinal) => Device::cuda(ordinal).map(|_| Box::new(HostBackend) as Box<dyn Backend>),
    }
}
