//! The back ends a realization can run on, and their public entry points:
//! the CPU executor always, a CUDA device with the `cuda` feature; and the
//! methods of [`Device`] that open one ([`Device::cuda`], [`Device::best`]).
//!
//! This is the one file of the runtime that looks at the build's features.
//! The CUDA back end's files (`cuda.rs`, `timing.rs`) sit beside it and are
//! declared here, so that nothing else in the runtime needs to know whether
//! they are built; the runtime re-exports what this file exports.

use super::host::HostBackend;
use super::Backend;
use crate::config::Config;
use crate::device::Device;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
mod cuda;
#[cfg(feature = "cuda")]
#[path = "timing.rs"]
mod timing;

pub use super::host::run_plan as run_plan_on_host;
#[cfg(feature = "cuda")]
pub use cuda::{measure_choices, run_plan as run_plan_on_cuda, upload_count};
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

impl Device {
    /// The CUDA GPU with this ordinal, or [`Error::CudaUnavailable`] saying
    /// why it cannot be used.
    ///
    /// ```
    /// use tilefuse::{Device, Error};
    /// match Device::cuda(0) {
    ///     Ok(d) => assert_eq!(d, Device::Cuda(0)),
    ///     Err(Error::CudaUnavailable { reason }) => assert!(!reason.is_empty()),
    ///     Err(e) => panic!("unexpected error {e}"),
    /// }
    /// ```
    ///
    /// Opening it starts its compile service: the PTX interpreter loads in
    /// the background while the caller records ops.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        #[cfg(feature = "cuda")]
        {
            crate::device::cuda::CudaCompiler::open(ordinal).map(|_| Device::Cuda(ordinal))
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(crate::error::Error::CudaUnavailable {
                reason: "built without the `cuda` feature".into(),
            })
        }
    }

    /// The fastest device available: CUDA device 0 when it can be used, the
    /// CPU otherwise. Prints nothing; [`Device::best_reason`] says why.
    pub fn best() -> Device {
        Device::cuda(0).unwrap_or(Device::Cpu)
    }

    /// Why [`Device::best`] picks the device it picks, for logs and reports:
    /// `cuda:0: NVIDIA H200 (...)` or `cpu: CUDA is not available: ...`.
    pub fn best_reason() -> String {
        #[cfg(feature = "cuda")]
        if let Ok(compiler) = crate::device::cuda::CudaCompiler::open(0) {
            return format!("cuda:0: {}", compiler.device().info());
        }
        match Device::cuda(0) {
            Ok(d) => format!("{d}: a CUDA device is available"),
            Err(e) => format!("cpu: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::device::Device;

    #[test]
    fn best_follows_cuda_availability_and_says_why() {
        let reason = Device::best_reason();
        match Device::cuda(0) {
            Ok(d) => {
                assert_eq!(Device::best(), d);
                assert!(reason.starts_with("cuda:0: "), "{reason}");
            }
            Err(e) => {
                assert_eq!(Device::best(), Device::Cpu);
                assert!(reason.starts_with("cpu: CUDA is not available"), "{reason}");
                if cfg!(not(feature = "cuda")) {
                    assert!(e.to_string().contains("built without the `cuda` feature"), "{e}");
                }
            }
        }
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    }

    #[test]
    fn an_absurd_ordinal_is_an_error_not_a_panic() {
        assert!(Device::cuda(1 << 20).is_err());
    }
}
