//! Tile kernels: the IR, and its two back ends.

pub mod ir;
