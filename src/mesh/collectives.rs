//! The collectives that combine the ranks' parts, and their host
//! implementation.

use super::Mesh;
use crate::error::{dims, Dims, Error, Result};
use crate::place::Device;
use crate::tensor::Tensor;

/// How an all-reduce or a reduce-scatter combines the ranks' parts,
/// element by element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveOp {
    /// The sum.
    Sum,
    /// The maximum (NaN if any part's element is NaN).
    Max,
    /// The minimum (NaN if any part's element is NaN).
    Min,
}

/// The operations that combine one part per rank of a [`Mesh`]. Each takes
/// `parts[r]` from rank `r` and returns one tensor per rank, handled as
/// living on that rank's device.
///
/// An implementation is chosen per mesh ([`Mesh::with_collectives`]); the
/// module docs say where an NCCL one plugs in.
pub trait Collectives: Send + Sync {
    /// Every rank gets the parts combined by `op` element by element.
    ///
    /// # Errors
    /// [`Error::Sharding`] for a number of parts other than the mesh's
    /// ranks, or parts of different shapes or dtypes; the errors of the
    /// combining op (a sum of bools); device failures computing a part.
    fn all_reduce(&self, mesh: &Mesh, parts: &[Tensor], op: CollectiveOp) -> Result<Vec<Tensor>>;

    /// Every rank gets the parts joined along `axis` in rank order.
    ///
    /// # Errors
    /// [`Error::Sharding`] for a number of parts other than the mesh's
    /// ranks; the errors of [`Tensor::try_cat`] (named `all_gather`) for
    /// parts that do not join; device failures computing a part.
    fn all_gather(&self, mesh: &Mesh, parts: &[Tensor], axis: isize) -> Result<Vec<Tensor>>;

    /// The parts combined by `op` and cut along `axis` as
    /// [`Mesh::shard_extents`] cuts it: rank `r` gets piece `r`.
    ///
    /// # Errors
    /// As [`Collectives::all_reduce`], and [`Error::AxisOutOfRange`] for a
    /// bad axis.
    fn reduce_scatter(&self, mesh: &Mesh, parts: &[Tensor], op: CollectiveOp, axis: isize) -> Result<Vec<Tensor>>;
}

/// The collectives on the host. As a collective between devices takes
/// buffers, each rank's part is realized first, on the rank's device and
/// apart from the others' (so each rank runs its own kernels and its part
/// is rounded to its dtype when stored, as a GPU rank's would be). The
/// parts are then combined in rank order, `((p0 ∘ p1) ∘ p2) ∘ ...`, as ops
/// recorded on the CPU (run when a result is read), so the results are the
/// same bits on every run. Each rank's result is a handle on the one
/// combined tensor.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostCollectives;

impl Collectives for HostCollectives {
    fn all_reduce(&self, mesh: &Mesh, parts: &[Tensor], op: CollectiveOp) -> Result<Vec<Tensor>> {
        let combined = combine("all_reduce", mesh, parts, op)?;
        Ok(replicate(mesh, &combined))
    }

    fn all_gather(&self, mesh: &Mesh, parts: &[Tensor], axis: isize) -> Result<Vec<Tensor>> {
        check_count("all_gather", mesh, parts)?;
        realize_each(parts)?;
        let host: Vec<Tensor> = parts.iter().map(|p| on(p, Device::Cpu)).collect();
        let refs: Vec<&Tensor> = host.iter().collect();
        let whole = Tensor::try_cat(&refs, axis).map_err(|e| e.with_op("all_gather"))?;
        Ok(replicate(mesh, &whole))
    }

    fn reduce_scatter(&self, mesh: &Mesh, parts: &[Tensor], op: CollectiveOp, axis: isize) -> Result<Vec<Tensor>> {
        let combined = combine("reduce_scatter", mesh, parts, op)?;
        let ax = combined.shape().axis("reduce_scatter", axis)?;
        let pieces = combined
            .try_split(&mesh.shard_extents(combined.dims()[ax]), ax as isize)
            .map_err(|e| e.with_op("reduce_scatter"))?;
        Ok(pieces.iter().zip(mesh.devices()).map(|(p, &d)| on(p, d)).collect())
    }
}

/// `t` handled as living on `device` (itself if it does).
pub(super) fn on(t: &Tensor, device: Device) -> Tensor {
    if t.device() == device {
        t.clone()
    } else {
        t.to(device)
    }
}

/// One handle on `t` per rank of `mesh`, on that rank's device.
fn replicate(mesh: &Mesh, t: &Tensor) -> Vec<Tensor> {
    mesh.devices().iter().map(|&d| on(t, d)).collect()
}

/// Realizes each part on its own device, one rank after another.
fn realize_each(parts: &[Tensor]) -> Result<()> {
    parts.iter().try_for_each(Tensor::realize)
}

/// The shapes of `parts`, for messages.
fn shapes(parts: &[Tensor]) -> Vec<Dims> {
    parts.iter().map(|p| dims(p.dims())).collect()
}

/// Checks that there is one part per rank of `mesh`.
fn check_count(op: &'static str, mesh: &Mesh, parts: &[Tensor]) -> Result<()> {
    if parts.len() == mesh.ranks() {
        return Ok(());
    }
    Err(Error::Sharding {
        op,
        shapes: shapes(parts),
        reason: format!("{} parts for a mesh of {} ranks", parts.len(), mesh.ranks()),
    })
}

/// The parts, one per rank and all of one shape and dtype, combined by
/// `op` in rank order on the host.
fn combine(name: &'static str, mesh: &Mesh, parts: &[Tensor], op: CollectiveOp) -> Result<Tensor> {
    check_count(name, mesh, parts)?;
    let first = &parts[0];
    if let Some((r, p)) = parts
        .iter()
        .enumerate()
        .find(|(_, p)| p.dims() != first.dims() || p.dtype() != first.dtype())
    {
        return Err(Error::Sharding {
            op: name,
            shapes: shapes(parts),
            reason: format!(
                "the part of rank {r} ({:?}, {}) differs from rank 0's ({:?}, {})",
                p.dims(),
                p.dtype(),
                first.dims(),
                first.dtype()
            ),
        });
    }
    realize_each(parts)?;
    let mut acc = on(first, Device::Cpu);
    for p in &parts[1..] {
        let p = on(p, Device::Cpu);
        acc = match op {
            CollectiveOp::Sum => acc.try_add(&p),
            CollectiveOp::Max => acc.try_maximum(&p),
            CollectiveOp::Min => acc.try_minimum(&p),
        }
        .map_err(|e| e.with_op(name))?;
    }
    Ok(acc)
}
