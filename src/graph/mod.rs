//! The op graph: a petgraph DAG of recorded operations.
//!
//! **Invariant:** `graph` knows nothing of devices or kernels.

pub mod op;
pub mod reference;
pub mod subgraph;

pub use op::{Axes, BinaryOp, Op, ReduceOp, UnaryOp};
pub use subgraph::{SubNode, Subgraph};
