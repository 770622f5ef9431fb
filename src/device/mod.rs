//! Where tensors live and run.
//!
//! A [`Device`] is a small value: the host CPU, or a CUDA GPU by ordinal.
//! The op graph knows nothing of devices; a device is carried by each tensor
//! handle and only consulted when a result is realized. The type is defined
//! at the bottom of the layers (`src/place.rs`), where storage can name it;
//! the methods that open and choose devices are here.
//!
//! [`Device::cuda`] opens a GPU (once per process; later calls find it) or
//! says why it cannot be used; [`Device::best`] picks CUDA device 0 when it
//! can be used and the CPU otherwise. `best` prints nothing: a library
//! should not write to stderr on its own, so the reason for the choice is
//! asked for with [`Device::best_reason`].
//!
//! Without the `cuda` feature nothing touches a driver and [`Device::cuda`]
//! always returns [`Error::CudaUnavailable`].

#[cfg(feature = "cuda")]
pub mod cuda;

#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
pub use crate::place::Device;

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
    pub fn cuda(ordinal: usize) -> Result<Device> {
        #[cfg(feature = "cuda")]
        {
            cuda::CudaDevice::open(ordinal).map(|_| Device::Cuda(ordinal))
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
        if let Ok(device) = cuda::CudaDevice::open(0) {
            return format!("cuda:0: {}", device.info());
        }
        match Device::cuda(0) {
            Ok(d) => format!("{d}: a CUDA device is available"),
            Err(e) => format!("cpu: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Device;

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
