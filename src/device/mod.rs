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
//! asked for with [`Device::best_reason`]. Those methods open a back end
//! (the driver and the compile service on top of it), so they are defined
//! by the runtime, which knows the back ends.
//!
//! Without the `cuda` feature nothing touches a driver and [`Device::cuda`]
//! always returns [`Error::CudaUnavailable`].

internal_mod!(
    #[cfg(feature = "cuda")]
    cuda
);

#[cfg(doc)]
use crate::error::Error;
pub use crate::place::Device;
