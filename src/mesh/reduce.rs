//! Reductions of [`Sharded`] tensors: shard by shard off the sharded axis,
//! partial results and an all-reduce over it.

use super::collectives::CollectiveOp;
use super::sharded::{stand_in, Sharded};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::graph::Axes;
use crate::tensor::Tensor;

/// The result of a reduction of a [`Sharded`] tensor.
#[derive(Clone, Debug)]
pub enum Reduced {
    /// The sharded axis was not reduced: the result is sharded along it
    /// (its position adjusted when earlier axes were dropped).
    Sharded(Sharded),
    /// The sharded axis was reduced: every rank holds the whole result,
    /// `tensors[r]` on rank `r`'s device, all equal.
    Replicated(Vec<Tensor>),
}

impl Reduced {
    /// The whole result as one tensor: the shards joined on rank 0's
    /// device, or rank 0's copy.
    pub fn whole(&self) -> Tensor {
        match self {
            Reduced::Sharded(s) => s.unshard(),
            Reduced::Replicated(copies) => copies[0].clone(),
        }
    }

    /// The sharded result, if the sharded axis was not reduced.
    pub fn into_sharded(self) -> Option<Sharded> {
        match self {
            Reduced::Sharded(s) => Some(s),
            Reduced::Replicated(_) => None,
        }
    }

    /// The ranks' copies, if the sharded axis was reduced.
    pub fn replicas(&self) -> Option<&[Tensor]> {
        match self {
            Reduced::Sharded(_) => None,
            Reduced::Replicated(copies) => Some(copies),
        }
    }
}

/// The reductions a sharded tensor offers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sum,
    Max,
    Min,
    Mean,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sum => "sum",
            Kind::Max => "max",
            Kind::Min => "min",
            Kind::Mean => "mean",
        }
    }

    /// The unsharded reduction of `x`.
    fn apply(self, x: &Tensor, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        match self {
            Kind::Sum => x.try_sum(axes, keepdim),
            Kind::Max => x.try_max(axes, keepdim),
            Kind::Min => x.try_min(axes, keepdim),
            Kind::Mean => x.try_mean(axes, keepdim),
        }
    }

    /// How the ranks' partial results combine.
    fn collective(self) -> CollectiveOp {
        match self {
            Kind::Sum | Kind::Mean => CollectiveOp::Sum,
            Kind::Max => CollectiveOp::Max,
            Kind::Min => CollectiveOp::Min,
        }
    }
}

impl Sharded {
    /// The sum over `axes` (dtypes as [`Tensor::sum`]: i64 for integers
    /// and bools). Over the sharded axis, f16 and bf16 partial sums are
    /// f32 and the combined sum is rounded once, as the unsharded sum
    /// accumulates.
    ///
    /// ```
    /// use tilefuse::{Mesh, Tensor};
    /// # fn main() -> tilefuse::Result<()> {
    /// let x = Tensor::from_vec((1..=6).collect::<Vec<i32>>(), &[3, 2]).shard(0, &Mesh::cpu(2)?)?;
    /// assert_eq!(x.sum(&[1], false)?.whole().to_vec::<i64>()?, vec![3, 7, 11]); // stays sharded
    /// let per_rank = x.sum(&[0], true)?;
    /// assert_eq!(per_rank.replicas().unwrap()[1].to_vec::<i64>()?, vec![9, 12]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// The errors of [`Tensor::try_sum`] on the whole tensor; over the
    /// sharded axis, device failures computing the partials, which the
    /// all-reduce realizes.
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Reduced> {
        self.reduce(Kind::Sum, axes, keepdim)
    }

    /// The maximum over `axes` (NaN propagates). A rank whose shard is
    /// empty contributes the maximum's identity to the all-reduce.
    ///
    /// # Errors
    /// The errors of [`Tensor::try_max`] on the whole tensor; over the
    /// sharded axis, device failures computing the partials, which the
    /// all-reduce realizes.
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Reduced> {
        self.reduce(Kind::Max, axes, keepdim)
    }

    /// The minimum over `axes` (NaN propagates). A rank whose shard is
    /// empty contributes the minimum's identity to the all-reduce.
    ///
    /// # Errors
    /// The errors of [`Tensor::try_min`] on the whole tensor; over the
    /// sharded axis, device failures computing the partials, which the
    /// all-reduce realizes.
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<Reduced> {
        self.reduce(Kind::Min, axes, keepdim)
    }

    /// The mean over `axes`, computed as [`Tensor::mean`] is (in f32 for
    /// f16 and bf16). Over the sharded axis the ranks' partial *sums* are
    /// all-reduced and then scaled by `1 / n`, `n` the whole count, so
    /// shards of different extents weigh by their extents.
    ///
    /// # Errors
    /// The errors of [`Tensor::try_mean`] on the whole tensor
    /// ([`Error::NeedsFloat`](crate::Error::NeedsFloat) for integers); over
    /// the sharded axis, device failures computing the partials.
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Reduced> {
        self.reduce(Kind::Mean, axes, keepdim)
    }

    /// The reduction `kind` over `axes`.
    fn reduce(&self, kind: Kind, axes: &[isize], keepdim: bool) -> Result<Reduced> {
        // The unsharded op on a stand-in checks the axes and dtype and
        // reports misuse with the whole shape; its shape is the result's.
        let whole = stand_in(self.shape(), self.dtype(), self.mesh().devices()[0])?;
        let out = kind.apply(&whole, axes, keepdim)?;
        let resolved = whole.reduced_axes(kind.name(), axes)?;
        if !resolved.contains(&self.axis()) {
            let shards = self
                .shards()
                .iter()
                .map(|s| kind.apply(s, axes, keepdim))
                .collect::<Result<Vec<Tensor>>>()?;
            let dropped = if keepdim {
                0
            } else {
                resolved.iter().filter(|&&a| a < self.axis()).count()
            };
            return Ok(Reduced::Sharded(self.with_shards(
                shards,
                self.axis() - dropped,
                out.shape().clone(),
            )));
        }
        let partials = self
            .shards()
            .iter()
            .map(|s| partial(kind, s, axes, &resolved))
            .collect::<Result<Vec<Tensor>>>()?;
        let combined = self.mesh().all_reduce(&partials, kind.collective())?;
        let count: usize = resolved.iter().map(|&a| self.dims()[a]).product();
        let dropped: Vec<isize> = resolved.iter().map(|&a| a as isize).collect();
        let finish = |t: &Tensor| -> Result<Tensor> {
            let t = match kind {
                Kind::Mean => t.try_mul(&t.scalar_like(1.0 / count as f64))?.cast_to(self.dtype()),
                Kind::Sum => t.cast_to(out.dtype()),
                Kind::Max | Kind::Min => t.clone(),
            };
            if keepdim {
                Ok(t)
            } else {
                t.drop_axes(kind.name(), &dropped)
            }
        };
        Ok(Reduced::Replicated(combined.iter().map(finish).collect::<Result<_>>()?))
    }
}

/// One rank's partial result of `kind` over `axes` (resolved: `resolved`,
/// which include the sharded axis) of its shard `s`, the reduced axes
/// kept. Sums (and a mean's sums) are in the accumulator dtype: f32 for
/// f16 and bf16, i64 for integers and bools. The maximum or minimum of an
/// empty shard is the op's identity.
fn partial(kind: Kind, s: &Tensor, axes: &[isize], resolved: &Axes) -> Result<Tensor> {
    let d = s.dtype();
    match kind {
        Kind::Sum | Kind::Mean if matches!(d, DType::F16 | DType::BF16) => s.cast_to(DType::F32).try_sum(axes, true),
        Kind::Sum | Kind::Mean => s.try_sum(axes, true),
        Kind::Max | Kind::Min if resolved.iter().any(|&a| s.dims()[a] == 0) => {
            let value = identity(kind == Kind::Max, d);
            Ok(Tensor::try_full_scalar(&s.kept_dims(resolved), value, d)?.to(s.device()))
        }
        Kind::Max | Kind::Min => kind.apply(s, axes, true),
    }
}

/// The identity of the maximum (`max`) or minimum of dtype `d`: the value
/// no element of `d` is below (above).
fn identity(max: bool, d: DType) -> Scalar {
    let int = |lo: i128, hi: i128| Scalar::Int(if max { lo } else { hi }, d);
    match d {
        DType::Bool => Scalar::Bool(!max),
        DType::U8 => int(0, u8::MAX.into()),
        DType::U32 => int(0, u32::MAX.into()),
        DType::I32 => int(i32::MIN.into(), i32::MAX.into()),
        DType::I64 => int(i64::MIN.into(), i64::MAX.into()),
        _ => Scalar::Float(if max { f64::NEG_INFINITY } else { f64::INFINITY }, d),
    }
}
