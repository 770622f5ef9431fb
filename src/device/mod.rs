//! Devices that run tile kernels: the CPU executor and, with the `cuda`
//! feature, CUDA GPUs.

#[cfg(feature = "cuda")]
pub mod cuda;
