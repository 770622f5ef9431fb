//! tilefuse: a tensor library with lazy tile-graph fusion.
//!
//! Tensor expressions are recorded, not run. When a result is asked for, the
//! op graph is simplified, grouped into tile kernels over partition views and
//! run on the CPU executor or, with the `cuda` feature and a GPU, as PTX
//! generated in Rust.
//!
//! See `ARCHITECTURE.md` for the map of the crate.
//!
//! # The public surface
//!
//! What this crate promises: [`Tensor`], [`Device`], [`DType`] and
//! [`Element`], [`Scalar`], [`Shape`], [`Error`], [`Config`] (module
//! [`config`]), the shared op vocabulary ([`ops`]), the host tile API
//! ([`tile`]), the tile IR ([`kernels::ir`]) and its CPU executor
//! ([`kernels::cpu`], over [`HostBuffer`]s) for hand-written programs,
//! [`Tensor::explain`] and [`Tensor::to_dot`], [`RealizeStats`], and
//! tensors sharded over a mesh of devices ([`Mesh`], [`Sharded`], module
//! [`mesh`]).
//!
//! The other layers (the op graph, fusion, the PTX generator and
//! interpreter, the CUDA driver and compile service, the runtime, storage)
//! are internal. The `internals` feature makes them public for the
//! crate's own tests, benches and examples and for measuring; nothing
//! behind it is a promise, and it may change in any release.

#![warn(missing_docs)]
// Without `internals`, the internal layers are crate-private, and items
// that only the tests, benches or examples call would each be reported as
// unused; with it (as in every test build) the same items are public and
// the lint sees what it saw before they were made private.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

/// Declares module `$name`: public with the `internals` feature,
/// crate-private without it.
macro_rules! internal_mod {
    ($(#[$attr:meta])* $name:ident) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    };
}

/// Declares a method or function public with the `internals` feature and
/// crate-private without it.
macro_rules! internal_fn {
    ($(#[$attr:meta])* fn $($rest:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internals")]
        pub fn $($rest)*
        $(#[$attr])*
        #[cfg(not(feature = "internals"))]
        pub(crate) fn $($rest)*
    };
}

pub mod config;
pub mod device;
pub mod dtype;
pub mod error;
internal_mod!(fusion);
internal_mod!(graph);
pub mod kernels;
pub mod mesh;
pub mod ops;
pub mod philox;
mod place;
internal_mod!(runtime);
pub mod shape;
internal_mod!(storage);
pub mod tensor;
pub mod tile;

pub use config::Config;
pub use dtype::{DType, Element, Scalar};
pub use error::{Error, Result};
pub use mesh::{Mesh, Sharded};
pub use place::Device;
pub use runtime::RealizeStats;
pub use shape::{Shape, MAX_RANK};
pub use storage::HostBuffer;
pub use tensor::Tensor;

// The README's example is compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctest;
