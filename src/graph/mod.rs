//! The op graph: a petgraph DAG of recorded operations.
//!
//! **Invariant:** `graph` knows nothing of devices or kernels.

pub mod dot;
mod fold;
pub mod op;
pub mod reference;
pub mod store;
pub mod subgraph;

pub use crate::ops::{BinaryOp, ReduceOp, ScanOp, UnaryOp};
pub use op::{Axes, Op};
pub use petgraph::stable_graph::NodeIndex;
pub(crate) use store::with_graph;
pub use store::{extract, live_nodes, Graph, Node};
pub use subgraph::{SubNode, Subgraph};
