//! The [`Device`] value: where a tensor lives, as a name.
//!
//! It sits at the bottom of the layers so that storage can say which device
//! its memory belongs to without knowing any back end. Opening a device and
//! choosing one ([`Device::cuda`], [`Device::best`]) belong to the device
//! layer, [`crate::device`], which re-exports the type.

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

    /// Whether this is a CUDA device.
    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
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
