//! [`Sharded`]: a tensor cut along one axis over a mesh, and its
//! elementwise ops.

use super::collectives::on;
use super::Mesh;
use crate::dtype::DType;
use crate::error::{dims, Error, Result};
use crate::place::Device;
use crate::shape::Shape;
use crate::tensor::Tensor;

/// A tensor cut along one axis into one consecutive shard per rank of a
/// [`Mesh`], shard `r` handled as living on rank `r`'s device. Made by
/// [`Tensor::shard`] or [`Sharded::from_shards`]; see the
/// [module docs](crate::mesh) for what its ops compute where.
///
/// **Invariant:** there is one shard per rank; the shards have the whole
/// tensor's rank and dtype and its extents off the sharded axis, and their
/// extents along it add up to the whole's.
#[derive(Clone, Debug)]
pub struct Sharded {
    mesh: Mesh,
    axis: usize,
    shards: Vec<Tensor>,
    shape: Shape,
}

/// The other operand of an elementwise op on a [`Sharded`] tensor: one
/// sharded the same way, or a replicated plain tensor written against the
/// whole shape (broadcast as usual).
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A sharded tensor.
    Sharded(&'a Sharded),
    /// A tensor every rank has whole.
    Replicated(&'a Tensor),
}

impl<'a> From<&'a Sharded> for Operand<'a> {
    fn from(s: &'a Sharded) -> Operand<'a> {
        Operand::Sharded(s)
    }
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Operand<'a> {
        Operand::Replicated(t)
    }
}

impl Operand<'_> {
    /// The whole shape, as the user wrote it.
    fn shape(&self) -> &Shape {
        match self {
            Operand::Sharded(s) => s.shape(),
            Operand::Replicated(t) => t.shape(),
        }
    }

    /// The dtype.
    fn dtype(&self) -> DType {
        match self {
            Operand::Sharded(s) => s.dtype(),
            Operand::Replicated(t) => t.dtype(),
        }
    }
}

impl Tensor {
    /// This tensor cut along `axis` (negative counts from the end) into one
    /// shard per rank of `mesh`, as even as possible, the first ones one
    /// longer where the mesh does not divide the extent
    /// ([`Mesh::shard_extents`]). An extent smaller than the mesh gives the
    /// last ranks empty shards, which every op accepts. The shards are
    /// views (`narrow`): nothing is copied.
    ///
    /// ```
    /// use tilefuse::{Mesh, Tensor};
    /// # fn main() -> tilefuse::Result<()> {
    /// let x = Tensor::from_vec((0..10).collect::<Vec<i32>>(), &[2, 5]);
    /// let s = x.shard(1, &Mesh::cpu(2)?)?;
    /// assert_eq!(s.shard_extents(), vec![3, 2]);
    /// assert_eq!(s.shards()[1].to_vec::<i32>()?, vec![3, 4, 8, 9]);
    /// assert_eq!(s.unshard().to_vec::<i32>()?, x.to_vec::<i32>()?);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::AxisOutOfRange`] for a bad axis (a rank-0 tensor has none).
    pub fn shard(&self, axis: isize, mesh: &Mesh) -> Result<Sharded> {
        let ax = self.shape().axis("shard", axis)?;
        let mut start = 0;
        let mut shards = Vec::with_capacity(mesh.ranks());
        for (len, &device) in mesh.shard_extents(self.dims()[ax]).into_iter().zip(mesh.devices()) {
            let piece = self
                .try_narrow(ax as isize, start, len)
                .map_err(|e| e.with_op("shard"))?;
            shards.push(on(&piece, device));
            start += len;
        }
        Ok(Sharded {
            mesh: mesh.clone(),
            axis: ax,
            shards,
            shape: self.shape().clone(),
        })
    }
}

impl Sharded {
    /// A sharded tensor of the given shards, `shards[r]` on rank `r` (and
    /// handled as living on its device), cut along `axis`. The shards may
    /// have any extents along it, empty ones included.
    ///
    /// # Errors
    /// [`Error::Sharding`] for a number of shards other than the mesh's
    /// ranks, or shards of different ranks, dtypes or extents off the
    /// axis; [`Error::AxisOutOfRange`] for a bad axis.
    pub fn from_shards(shards: Vec<Tensor>, axis: isize, mesh: &Mesh) -> Result<Sharded> {
        let op = "Sharded::from_shards";
        let bad = |reason: String| Error::Sharding {
            op,
            shapes: shards.iter().map(|s| dims(s.dims())).collect(),
            reason,
        };
        if shards.len() != mesh.ranks() {
            return Err(bad(format!(
                "{} shards for a mesh of {} ranks",
                shards.len(),
                mesh.ranks()
            )));
        }
        let first = &shards[0];
        let ax = first.shape().axis(op, axis)?;
        let fits = |s: &Tensor| {
            s.rank() == first.rank()
                && s.dtype() == first.dtype()
                && (0..s.rank()).all(|k| k == ax || s.dims()[k] == first.dims()[k])
        };
        if let Some(r) = shards.iter().position(|s| !fits(s)) {
            let reason = format!(
                "shard {r} ({:?}, {}) does not fit shard 0 ({:?}, {}) off axis {ax}",
                shards[r].dims(),
                shards[r].dtype(),
                first.dims(),
                first.dtype()
            );
            return Err(bad(reason));
        }
        let mut whole = first.dims().to_vec();
        whole[ax] = shards.iter().map(|s| s.dims()[ax]).sum();
        let shape = Shape::try_new(op, &whole)?;
        let shards = shards.iter().zip(mesh.devices()).map(|(s, &d)| on(s, d)).collect();
        Ok(Sharded {
            mesh: mesh.clone(),
            axis: ax,
            shards,
            shape,
        })
    }

    /// The mesh the shards are spread over.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The sharded axis (resolved, so never negative).
    pub fn axis(&self) -> usize {
        self.axis
    }

    /// The shards, rank 0 first.
    pub fn shards(&self) -> &[Tensor] {
        &self.shards
    }

    /// The extent of each shard along the sharded axis, rank 0 first.
    pub fn shard_extents(&self) -> Vec<usize> {
        self.shards.iter().map(|s| s.dims()[self.axis]).collect()
    }

    /// The shape of the whole tensor.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The extents of the whole tensor, outermost first.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.shards[0].dtype()
    }

    /// The whole tensor: the shards joined along the sharded axis, on rank
    /// 0's device.
    pub fn unshard(&self) -> Tensor {
        let device = self.mesh.devices()[0];
        let pieces: Vec<Tensor> = self.shards.iter().map(|s| on(s, device)).collect();
        let refs: Vec<&Tensor> = pieces.iter().collect();
        // The shards share rank, dtype and the extents off the axis (the
        // type's invariant) and now a device, and their join is the whole
        // shape, which is a valid one: `cat` has nothing to refuse.
        Tensor::try_cat(&refs, self.axis as isize)
            .unwrap_or_else(|e| unreachable!("the shards of one sharding join: {e}"))
    }

    /// The whole tensor on every rank ([`Collectives::all_gather`] of the
    /// shards).
    ///
    /// [`Collectives::all_gather`]: super::Collectives::all_gather
    ///
    /// # Errors
    /// As [`Collectives::all_gather`](super::Collectives::all_gather).
    pub fn all_gather(&self) -> Result<Vec<Tensor>> {
        self.mesh.all_gather(&self.shards, self.axis as isize)
    }

    /// `f` applied to every shard: an elementwise chain (casts, unary ops,
    /// ops with scalars) each shard computes in its own kernels. `f` must
    /// keep a shard's shape.
    ///
    /// # Errors
    /// [`Error::Sharding`] naming `map` if `f` changes a shard's shape.
    pub fn map(&self, f: impl Fn(&Tensor) -> Tensor) -> Result<Sharded> {
        self.try_map(|t| Ok(f(t)))
    }

    /// [`Sharded::map`] with a fallible `f`, whose first error is returned.
    ///
    /// # Errors
    /// The errors of `f`; [`Error::Sharding`] naming `map` if `f` changes a
    /// shard's shape.
    pub fn try_map(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Sharded> {
        let mut shards = Vec::with_capacity(self.shards.len());
        for (r, s) in self.shards.iter().enumerate() {
            let out = f(s)?;
            if out.dims() != s.dims() {
                return Err(Error::Sharding {
                    op: "map",
                    shapes: vec![dims(self.dims())],
                    reason: format!(
                        "the function turned shard {r} of shape {:?} into shape {:?}; it must keep the shape",
                        s.dims(),
                        out.dims()
                    ),
                });
            }
            shards.push(out);
        }
        Ok(self.with_shards(shards, self.axis, self.shape.clone()))
    }

    /// This sharding's mesh with other `shards` along `axis` of a whole of
    /// `shape`.
    pub(super) fn with_shards(&self, shards: Vec<Tensor>, axis: usize, shape: Shape) -> Sharded {
        Sharded {
            mesh: self.mesh.clone(),
            axis,
            shards,
            shape,
        }
    }

    /// `self + rhs`, shard by shard.
    ///
    /// # Errors
    /// As [`Sharded::zip_with`].
    pub fn add<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Sharded> {
        self.zip_with("add", rhs, Tensor::try_add)
    }

    /// `self - rhs`, shard by shard.
    ///
    /// # Errors
    /// As [`Sharded::zip_with`].
    pub fn sub<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Sharded> {
        self.zip_with("sub", rhs, Tensor::try_sub)
    }

    /// `self * rhs`, shard by shard.
    ///
    /// # Errors
    /// As [`Sharded::zip_with`].
    pub fn mul<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Sharded> {
        self.zip_with("mul", rhs, Tensor::try_mul)
    }

    /// `self / rhs`, shard by shard.
    ///
    /// # Errors
    /// As [`Sharded::zip_with`].
    pub fn div<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Sharded> {
        self.zip_with("div", rhs, Tensor::try_div)
    }

    /// The binary elementwise op `f` (named `op` in errors) of this tensor
    /// and `rhs`, shard by shard. A sharded `rhs` must be sharded the same
    /// way: the same mesh, the sharded axes at the same place counted from
    /// the end, the same shard extents. A replicated `rhs` broadcasts
    /// against the whole shape: each shard gets its piece of the sharded
    /// axis where `rhs` has that axis longer than 1, and all of `rhs`
    /// where not; it may not make the sharded axis longer.
    ///
    /// `f` is first applied once to stand-ins of the whole shapes
    /// (constants, which run nothing), so its misuse is reported as the
    /// unsharded op would report it, with the shapes the user wrote.
    ///
    /// ```
    /// use tilefuse::{Mesh, Tensor};
    /// # fn main() -> tilefuse::Result<()> {
    /// let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).shard(0, &Mesh::cpu(2)?)?;
    /// let y = x.zip_with("maximum", &x.map(|t| -t)?, Tensor::try_maximum)?;
    /// assert_eq!(y.unshard().to_vec::<f64>()?, vec![1.0, 2.0, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// The errors of `f` on the whole shapes ([`Error::ShapeMismatch`] for
    /// shapes that do not broadcast, naming `op`); [`Error::Sharding`]
    /// naming `op` and both whole shapes for sharded operands of different
    /// meshes, axes or shard extents, a replicated operand that would
    /// make the sharded axis longer, or an `f` that is not elementwise
    /// (whose shards' results do not make up its whole result).
    pub fn zip_with<'a>(
        &self,
        op: &'static str,
        rhs: impl Into<Operand<'a>>,
        f: impl Fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<Sharded> {
        let rhs = rhs.into();
        let device = self.mesh.devices()[0];
        let out = f(
            &stand_in(self.shape(), self.dtype(), device)?,
            &stand_in(rhs.shape(), rhs.dtype(), device)?,
        )?;
        let mismatch = |reason: String| Error::Sharding {
            op,
            shapes: vec![dims(self.dims()), dims(rhs.shape().dims())],
            reason,
        };
        let Some(axis) = (self.axis + out.rank()).checked_sub(self.shape.rank()) else {
            return Err(mismatch(format!(
                "the op gives a result of rank {}, below the sharded operand's; it must be elementwise",
                out.rank()
            )));
        };
        if out.dims()[axis] != self.dims()[self.axis] {
            return Err(mismatch(format!(
                "the result's axis {axis} would be {} long, but the sharded axis {} is {}",
                out.dims()[axis],
                self.axis,
                self.dims()[self.axis]
            )));
        }
        let pieces = match rhs {
            Operand::Sharded(other) => {
                self.check_same_sharding(other, axis, out.rank()).map_err(mismatch)?;
                other.shards.clone()
            }
            Operand::Replicated(t) => self.pieces_of(t, axis, out.rank())?,
        };
        let shards = self
            .shards
            .iter()
            .zip(&pieces)
            .map(|(s, p)| f(s, &on(p, s.device())))
            .collect::<Result<Vec<Tensor>>>()?;
        // The whole shape's check above holds for each shard when `f` is
        // elementwise; a function that is not may still give shards that
        // do not make up the whole.
        for (r, (shard, len)) in shards.iter().zip(self.shard_extents()).enumerate() {
            let mut want = out.dims().to_vec();
            want[axis] = len;
            if shard.dims() != want {
                return Err(mismatch(format!(
                    "the op turned shard {r} into shape {:?} where {want:?} makes up the whole {:?}; it must be elementwise",
                    shard.dims(),
                    out.dims()
                )));
            }
        }
        Ok(self.with_shards(shards, axis, out.shape().clone()))
    }

    /// Why `other` is not sharded as this tensor is, for a result of rank
    /// `rank` whose sharded axis is `axis`.
    fn check_same_sharding(&self, other: &Sharded, axis: usize, rank: usize) -> std::result::Result<(), String> {
        if self.mesh != other.mesh {
            return Err(format!("the meshes differ ({:?} and {:?})", self.mesh, other.mesh));
        }
        if other.axis + rank - other.shape.rank() != axis {
            return Err(format!(
                "sharded along axis {} and axis {}, which do not line up",
                self.axis, other.axis
            ));
        }
        let (a, b) = (self.shard_extents(), other.shard_extents());
        if a != b {
            return Err(format!("shard extents {a:?} and {b:?} differ"));
        }
        Ok(())
    }

    /// What each shard gets of the replicated `t`, for a result of rank
    /// `rank` sharded along `axis`: its piece along that axis where `t`
    /// has it longer than 1, else all of it.
    fn pieces_of(&self, t: &Tensor, axis: usize, rank: usize) -> Result<Vec<Tensor>> {
        let Some(t_axis) = (axis + t.rank()).checked_sub(rank) else {
            return Ok(vec![t.clone(); self.shards.len()]);
        };
        if t.dims()[t_axis] <= 1 {
            return Ok(vec![t.clone(); self.shards.len()]);
        }
        let mut start = 0;
        self.shard_extents()
            .into_iter()
            .map(|len| {
                let piece = t.try_narrow(t_axis as isize, start, len)?;
                start += len;
                Ok(piece)
            })
            .collect()
    }
}

/// A constant of `shape` and `dtype` on `device`: something to check an
/// op against the whole shapes without running anything.
pub(super) fn stand_in(shape: &Shape, dtype: DType, device: Device) -> Result<Tensor> {
    Ok(on(&Tensor::try_zeros(shape.dims(), dtype)?, device))
}
