//! The tile vocabulary on the host: tiles, tensor spans, partition views,
//! padding, memory order, thread scope and atomic partition updates, as the
//! CUDA Tile reference documents in `shared/reference/` define them.
//!
//! - [`Tile<E, S>`](Tile): an immutable value of static shape `S` (rank 0 to
//!   5, the markers [`S0`] to [`S5`]) and element type `E` ([`TileElement`]).
//! - [`TensorSpan`] and [`TensorSpanMut`]: extents and strides over host memory.
//! - [`PartitionView`]: a span divided into tiles, with loads, stores, masked
//!   forms at ragged edges, and atomics (module [`atomic`]).
//!
//! [`Padding`], [`MemoryOrder`], [`ThreadScope`] and [`AtomicOp`] are the
//! crate's shared vocabulary, defined in [`crate::ops`] and re-exported here.
//!
//! Where the reference says "undefined behavior", these types return an
//! [`Error`](crate::Error) instead; the list is in [`PartitionView`]'s module
//! docs.
//!
//! The reference's first partition view example: a 4 × 8 span divided into
//! 2 × 2 tiles, loading partition (1, 2), and then a masked load with NaN
//! padding at a ragged edge.
//!
//! ```
//! use tilefuse::tile::{Padding, PartitionView, Tile, TensorSpan, S2};
//!
//! let x: Vec<i32> = (0..32).collect();
//! let t = TensorSpan::contiguous(&x, &[4, 8])?;
//! let p = PartitionView::new(t, S2::<2, 2>)?;
//! assert_eq!(p.load([1, 2])?, Tile::from([[20, 21], [28, 29]]));
//!
//! let y: Vec<f32> = (0..44).map(|v| v as f32).collect();
//! let p = PartitionView::new(TensorSpan::contiguous(&y, &[4, 11])?, S2::<2, 4>)?;
//! let r = p.load_masked(Padding::Nan, [0, 2])?;
//! assert_eq!(&r.as_slice()[..3], &[8.0, 9.0, 10.0]);
//! assert!(r.get(&[1, 3]).unwrap().is_nan());
//! # Ok::<(), tilefuse::Error>(())
//! ```

pub mod atomic;
mod element;
mod partition;
mod shape;
mod span;
mod tile_ops;
mod value;

pub use crate::ops::{AtomicOp, MemoryOrder, Padding, ThreadScope};
pub use atomic::{AtomicArith, AtomicInteger};
pub use element::{Bitwise, Numeric, TileElement};
pub use partition::PartitionView;
pub use shape::{PartitionIndex, ReduceAxis, Singleton, TileShape, S0, S1, S2, S3, S4, S5};
pub use span::{SpanLayout, TensorSpan, TensorSpanLike, TensorSpanMut};
pub use tile_ops::TileOperand;
pub use value::Tile;
