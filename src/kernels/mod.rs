//! Tile kernels: the IR, and its two back ends.

pub mod cpu;
pub mod ir;
