//! Where tensors live and run.
//!
//! A [`Device`] is a small value: the host CPU, or a CUDA GPU by ordinal.
//! The op graph knows nothing of devices; a device is carried by each tensor
//! handle and only consulted when a result is realized.
//!
//! This build runs everything on the CPU: [`Device::cuda`] reports why no
//! CUDA device can be used, and [`Device::best`] picks the CPU, with
//! [`Device::best_reason`] saying why.

#[cfg(feature = "cuda")]
pub mod cuda;

use crate::error::{Error, Result};
use std::fmt;

/// A place where tensors are stored and computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The host CPU.
    #[default]
    Cpu,
    /// The CUDA GPU with this ordinal.
    Cuda(usize),
}

impl Device {
    /// The host CPU.
    pub fn cpu() -> Device {
        Device::Cpu
    }

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
    pub fn cuda(ordinal: usize) -> Result<Device> {
        let _ = ordinal;
        Err(Error::CudaUnavailable {
            reason: cuda_unavailable_reason().into(),
        })
    }

    /// The fastest device available: a CUDA GPU when one can be used, the CPU otherwise.
    pub fn best() -> Device {
        Device::cuda(0).unwrap_or(Device::Cpu)
    }

    /// Why [`Device::best`] picks the device it picks, for logs and reports.
    pub fn best_reason() -> String {
        match Device::cuda(0) {
            Ok(d) => format!("{d}: a CUDA device is available"),
            Err(e) => format!("cpu: {e}"),
        }
    }

    /// Whether this is a CUDA device.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

/// Why this build cannot use a CUDA device.
fn cuda_unavailable_reason() -> &'static str {
    if cfg!(feature = "cuda") {
        "this build has no CUDA execution backend; tensors run on the CPU"
    } else {
        "built without the `cuda` feature"
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Device;

    #[test]
    fn best_is_the_cpu_and_says_why() {
        assert_eq!(Device::best(), Device::Cpu);
        assert!(Device::best_reason().starts_with("cpu: CUDA is not available"));
        assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    }
}
