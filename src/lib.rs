//! tilefuse: a tensor library with lazy tile-graph fusion.
//!
//! Tensor expressions are recorded, not run. When a result is asked for, the
//! op graph is simplified, grouped into tile kernels over partition views and
//! run on the CPU executor or, with the `cuda` feature and a GPU, as PTX
//! generated in Rust.
//!
//! See `ARCHITECTURE.md` for the map of the crate.

#![warn(missing_docs)]

pub mod config;
pub mod device;
pub mod dtype;
pub mod error;
pub mod fusion;
pub mod graph;
pub mod kernels;
pub mod ops;
mod place;
pub mod runtime;
pub mod shape;
pub mod storage;
pub mod tensor;
pub mod tile;

pub use config::Config;
pub use dtype::{DType, Element, Scalar};
pub use error::{Error, Result};
pub use place::Device;
pub use shape::{Shape, MAX_RANK};
pub use tensor::Tensor;

// The README's example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
