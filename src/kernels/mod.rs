//! Tile kernels: the IR, and its two back ends.

pub mod cpu;
pub mod ir;
pub mod ptx_gen;
pub mod ptx_vm;
