//! The tile vocabulary on the host: tiles, tensor spans, partition views,
//! padding, memory order, thread scope and atomic partition updates.

mod padding;

pub use padding::{MemoryOrder, Padding, ThreadScope};
