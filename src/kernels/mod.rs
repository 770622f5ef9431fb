//! Tile kernels: the IR, and its two back ends (the CPU executor and PTX
//! generation), plus `ptx_vm`, which runs the generated PTX on the GPU
//! through an interpreter kernel while the driver compiles it.

pub mod cpu;
pub mod ir;
internal_mod!(ptx_gen);
internal_mod!(ptx_vm);
