//! Tensors sharded over a mesh of devices, and the collectives that
//! combine their shards.
//!
//! A [`Mesh`] is an ordered list of devices; a device's position in it is
//! its *rank*. A [`Sharded`] tensor is one tensor cut along one axis into
//! one consecutive piece per rank ([`Tensor::shard`]), each piece a view
//! (`narrow`) handled as living on its rank's device. Work on a sharded
//! tensor is the same work on every shard:
//!
//! - Elementwise ops ([`Sharded::add`], [`Sharded::zip_with`],
//!   [`Sharded::map`], ...) run shard by shard. Their other operand is
//!   either sharded the same way or a *replicated* plain [`Tensor`] written
//!   against the whole shape: where it has the sharded axis with its full
//!   extent, each shard gets the matching piece of it; where that axis is
//!   1 or missing, each shard gets all of it (broadcasting). Each shard's
//!   expression is a graph of its own, so it fuses into its own kernels.
//! - Reductions over axes that leave the sharded axis alone run shard by
//!   shard, and the result stays sharded ([`Reduced::Sharded`]).
//! - A reduction over the sharded axis computes one partial result per
//!   rank (the reduced axes kept) and combines the partials with an
//!   all-reduce ([`Collectives::all_reduce`]): every rank gets the whole
//!   result ([`Reduced::Replicated`]). A mean is a sum that is all-reduced
//!   and then divided by the whole extent, so shards of different lengths
//!   weigh by their lengths.
//!
//! ```
//! use tilefuse::{mesh::Reduced, Mesh, Tensor};
//! # fn main() -> tilefuse::Result<()> {
//! let mesh = Mesh::cpu(3)?;
//! let x = Tensor::from_vec((0..14).map(|i| i as f32).collect(), &[7, 2]);
//! let bias = Tensor::from_vec(vec![0.5f32, -0.5], &[2]); // replicated
//! let s = x.shard(0, &mesh)?; // rows 3 + 2 + 2
//! assert_eq!(s.shard_extents(), vec![3, 2, 2]);
//! let y = s.add(&bias)?.map(|t| t * 2.0)?;
//! let Reduced::Replicated(per_rank) = y.sum(&[0], false)? else { unreachable!() };
//! assert_eq!(per_rank.len(), 3); // one copy per rank
//! let want: Vec<f32> = ((&x + &bias) * 2.0f32).sum(&[0], false).to_vec()?;
//! assert_eq!(per_rank[2].to_vec::<f32>()?, want);
//! # Ok(())
//! # }
//! ```
//!
//! # Determinism
//!
//! The host collectives ([`HostCollectives`]) realize each rank's part on
//! its own (each rank's kernels are deterministic) and combine the parts
//! in rank order, `((p0 ∘ p1) ∘ p2) ∘ ...`. So a sharded result has the
//! same bits every run. It may differ from the unsharded result in the
//! last bits of a float sum, since the sharded sum adds the shards'
//! partial sums, an order the unsharded kernel does not use; `max` and
//! `min` are exact either way.
//!
//! # Testing on the CPU
//!
//! A mesh of CPU ranks ([`Mesh::cpu`]) is `n` logical devices that are all
//! [`Device::Cpu`]: the sharding, the per-shard ops, the partial
//! reductions and the collectives are the same code a GPU mesh runs, so
//! `tests/mesh.rs` checks them against the unsharded computation on any
//! machine.
//!
//! # Where NCCL plugs in
//!
//! The collectives are a trait, [`Collectives`], that a mesh holds
//! ([`Mesh::with_collectives`]); [`Mesh::new`] gives every mesh the host
//! implementation. An NCCL implementation for a mesh of CUDA devices would
//! sit behind a cargo feature: it creates one communicator for the mesh
//! (`ncclGetUniqueId` once, then `ncclCommInitRank` for each rank's
//! device) when the mesh is made and keeps it in its state; its
//! `all_reduce` realizes each rank's partial on its own device (the
//! per-device partial kernels) and runs `ncclAllReduce` over the ranks'
//! buffers on their streams, in one group, with `ncclSum`, `ncclMax` or
//! `ncclMin`; `all_gather` and `reduce_scatter` map to `ncclAllGather` and
//! `ncclReduceScatter` the same way. Nothing above the trait changes.
//! NCCL's ring and tree algorithms fix their own combine order per
//! communicator, so its results are deterministic for one mesh but may
//! differ from the host order in the last bits of a float sum.
//!
//! The host implementation also accepts meshes with CUDA ranks: each part
//! is realized on its rank's device, and the combine runs on the host.
//!
//! A collective is where work runs, as between devices it takes buffers:
//! the reductions over the sharded axis and [`Sharded::all_gather`]
//! realize the ranks' parts when called (ops on a sharded tensor otherwise
//! only record, as on a tensor).

mod collectives;
mod reduce;
mod sharded;

pub use collectives::{CollectiveOp, Collectives, HostCollectives};
pub use reduce::Reduced;
pub use sharded::{Operand, Sharded};

use crate::error::{Error, Result};
use crate::place::Device;
use crate::tensor::Tensor;
use std::fmt;
use std::sync::Arc;

/// An ordered list of devices that tensors are sharded over, with the
/// collectives that combine their parts. Cheap to clone (an `Arc`).
///
/// Two meshes are equal when they list the same devices in the same
/// order; sharded operands of equal meshes work together.
#[derive(Clone)]
pub struct Mesh(Arc<MeshInner>);

struct MeshInner {
    devices: Vec<Device>,
    collectives: Arc<dyn Collectives>,
}

impl Mesh {
    /// A mesh of `devices`, rank `r` being `devices[r]`, combining with the
    /// host collectives ([`HostCollectives`]).
    ///
    /// # Errors
    /// [`Error::Sharding`] for an empty list.
    pub fn new(devices: Vec<Device>) -> Result<Mesh> {
        Mesh::with_collectives(devices, Arc::new(HostCollectives))
    }

    /// A mesh of `n` CPU ranks: `n` logical devices, all [`Device::Cpu`].
    ///
    /// # Errors
    /// [`Error::Sharding`] for `n` of zero.
    pub fn cpu(n: usize) -> Result<Mesh> {
        Mesh::new(vec![Device::Cpu; n]).map_err(|e| e.with_op("Mesh::cpu"))
    }

    /// A mesh of `devices` whose collectives are `collectives`.
    ///
    /// # Errors
    /// [`Error::Sharding`] for an empty list.
    pub fn with_collectives(devices: Vec<Device>, collectives: Arc<dyn Collectives>) -> Result<Mesh> {
        if devices.is_empty() {
            return Err(Error::Sharding {
                op: "Mesh::new",
                shapes: vec![],
                reason: "a mesh needs at least one device".into(),
            });
        }
        Ok(Mesh(Arc::new(MeshInner { devices, collectives })))
    }

    /// The number of ranks (at least 1).
    pub fn ranks(&self) -> usize {
        self.0.devices.len()
    }

    /// The devices, rank 0 first.
    pub fn devices(&self) -> &[Device] {
        &self.0.devices
    }

    /// The collectives this mesh combines with.
    pub fn collectives(&self) -> &dyn Collectives {
        &*self.0.collectives
    }

    /// The extents of the shards an axis of length `extent` is cut into:
    /// one per rank, as even as possible, the first `extent % ranks` one
    /// longer than the rest. An extent smaller than the mesh leaves the
    /// last ranks empty shards (extent 0).
    ///
    /// ```
    /// use tilefuse::Mesh;
    /// let mesh = Mesh::cpu(4)?;
    /// assert_eq!(mesh.shard_extents(10), vec![3, 3, 2, 2]);
    /// assert_eq!(mesh.shard_extents(2), vec![1, 1, 0, 0]);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    pub fn shard_extents(&self, extent: usize) -> Vec<usize> {
        let n = self.ranks();
        let (base, longer) = (extent / n, extent % n);
        (0..n).map(|r| base + usize::from(r < longer)).collect()
    }

    /// [`Collectives::all_reduce`] of this mesh's collectives.
    ///
    /// # Errors
    /// As [`Collectives::all_reduce`].
    pub fn all_reduce(&self, parts: &[Tensor], op: CollectiveOp) -> Result<Vec<Tensor>> {
        self.collectives().all_reduce(self, parts, op)
    }

    /// [`Collectives::all_gather`] of this mesh's collectives.
    ///
    /// # Errors
    /// As [`Collectives::all_gather`].
    pub fn all_gather(&self, parts: &[Tensor], axis: isize) -> Result<Vec<Tensor>> {
        self.collectives().all_gather(self, parts, axis)
    }

    /// [`Collectives::reduce_scatter`] of this mesh's collectives.
    ///
    /// # Errors
    /// As [`Collectives::reduce_scatter`].
    pub fn reduce_scatter(&self, parts: &[Tensor], op: CollectiveOp, axis: isize) -> Result<Vec<Tensor>> {
        self.collectives().reduce_scatter(self, parts, op, axis)
    }
}

impl PartialEq for Mesh {
    fn eq(&self, other: &Mesh) -> bool {
        self.devices() == other.devices()
    }
}

impl Eq for Mesh {}

impl fmt::Debug for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Mesh[")?;
        for (r, d) in self.devices().iter().enumerate() {
            if r > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
