//! Scattering by tensors: `scatter_add`.
//!
//! A scatter is a node of its own (`Op::ScatterAdd`): zeros of the
//! result's shape with the source added at the index's positions, which
//! the front end adds to `self`. Fusion gives it a kernel of its own that
//! walks each line along the axis in order (see `fusion/scatter.rs`), so
//! the sum into each element has one fixed order on the CPU and on the GPU
//! (no float atomics), and the result is the same run after run.

use super::Tensor;
use crate::dtype::DType;
use crate::error::{dims, Error};
use crate::graph::Op;

impl Tensor {
    super::fallible! {
        /// PyTorch's `scatter_add`: a copy of `self` to which each element
        /// of `src` is added at its own position with coordinate `axis`
        /// (negative counts from the end) replaced by the matching element
        /// of `index`; along `axis`, `out[.., index[p], ..] += src[p]`.
        /// `index` (i64 or i32) has `src`'s shape, `self`'s rank and at
        /// most `self`'s extents off `axis`; `src` has `self`'s dtype, which
        /// is any numeric dtype (not bool).
        ///
        /// The result is deterministic on every device: the elements added
        /// to one output element are summed in the order of their position
        /// along `axis`, starting from zero, and the sum is then added to
        /// `self`'s element (`self + (s1 + s2 + ...)`, where PyTorch's CPU
        /// adds `(self + s1) + s2 ...`: floats may differ in the last
        /// place). f16 and bf16 sum in f32 and round once; integers wrap.
        /// The kernel runs each line along `axis` in order on one thread,
        /// so its parallelism is the number of lines. Fewer than 256 lines
        /// of more than 4096 sources are cut into chunks of at least 2048
        /// (as many as bring the lines to 256, their partial outputs at
        /// most four times the sources): each chunk sums into a partial
        /// output of its own, and the partials are added in chunk order,
        /// so the sum into an element is still one fixed order.
        ///
        /// An index outside `0..self.dims()[axis]` makes the realization
        /// fail with [`Error::IndexOutOfRange`]; no element outside the
        /// axis is touched.
        ///
        /// ```
        /// use tilefuse::Tensor;
        /// let x = Tensor::from_vec(vec![1.0f32, 1.0, 1.0, 1.0, 1.0, 1.0], &[2, 3]);
        /// let index = Tensor::from_vec(vec![0i64, 2, 0, 1, 1, 1], &[2, 3]);
        /// let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        /// let y = x.scatter_add(1, &index, &src);
        /// assert_eq!(y.to_vec::<f32>()?, vec![5.0, 1.0, 3.0, 1.0, 16.0, 1.0]);
        /// let counts = Tensor::zeros(&[4], tilefuse::DType::I64)
        ///     .scatter_add(0, &Tensor::from_vec(vec![3i32, 1, 3], &[3]), &Tensor::ones(&[3], tilefuse::DType::I64));
        /// assert_eq!(counts.to_vec::<i64>()?, vec![0, 1, 0, 2]);
        /// let bad = Tensor::from_vec(vec![3i64, 0, 0, 0, 0, 0], &[2, 3]);
        /// assert!(x.scatter_add(1, &bad, &src).to_vec::<f32>().is_err());
        /// # Ok::<(), tilefuse::Error>(())
        /// ```
        ///
        /// The `try_` form returns [`Error::AxisOutOfRange`] for a bad axis
        /// (or a scalar `self`), [`Error::UnsupportedDType`] for a bool
        /// `self` or an index that is not i64 or i32,
        /// [`Error::DTypeMismatch`] for a `src` of another dtype,
        /// [`Error::InvalidShape`] for an index of another shape than
        /// `src`, of another rank than `self` or wider than it off `axis`,
        /// [`Error::IndexOutOfRange`] at once for a non-empty index into an
        /// empty axis, and [`Error::DeviceMismatch`] for tensors on
        /// different devices.
        pub fn scatter_add / try_scatter_add(&self, axis: isize, index: &Tensor, src: &Tensor) -> Tensor {
            const OP: &str = "scatter_add";
            let device = Tensor::common_device(OP, &[self, index, src])?;
            if self.rank() == 0 {
                return Err(Error::AxisOutOfRange { op: OP, axis, shape: vec![] });
            }
            let ax = self.shape().axis(OP, axis)?;
            if self.dtype() == DType::Bool {
                return Err(Error::UnsupportedDType {
                    op: OP,
                    dtype: DType::Bool,
                    reason: "scatter_add adds numbers, not bools",
                });
            }
            if !matches!(index.dtype(), DType::I64 | DType::I32) {
                return Err(Error::UnsupportedDType {
                    op: OP,
                    dtype: index.dtype(),
                    reason: "indices are i64 or i32",
                });
            }
            if src.dtype() != self.dtype() {
                return Err(Error::DTypeMismatch { op: OP, lhs: self.dtype(), rhs: src.dtype() });
            }
            let fits = index.dims() == src.dims()
                && index.rank() == self.rank()
                && (0..self.rank()).all(|k| k == ax || index.dims()[k] <= self.dims()[k]);
            if !fits {
                return Err(Error::InvalidShape {
                    op: OP,
                    shape: dims(self.dims()),
                    arg: index.dims().iter().map(|&d| d as isize).collect(),
                    reason: format!(
                        "the index of shape {:?} must have the source's shape {:?}, the input's rank and at most its extents off axis {ax}",
                        index.dims(),
                        src.dims()
                    ),
                });
            }
            if index.numel() == 0 {
                return Ok(self.clone());
            }
            if self.dims()[ax] == 0 {
                return Err(Error::IndexOutOfRange {
                    op: OP,
                    axis: ax,
                    len: 0,
                    input: dims(self.dims()),
                    index: dims(index.dims()),
                });
            }
            // f16 and bf16 sum in f32, rounded once with `self` added.
            let acc = match self.dtype() {
                DType::F16 | DType::BF16 => DType::F32,
                d => d,
            };
            let src = src.cast_to(acc);
            let sums = match chunks(self, ax, index) {
                Some(parts) => chunked_sums(self, ax, index, &src, parts)?,
                None => Tensor::record(
                    Op::ScatterAdd { axis: ax, chunked: None },
                    &[index, &src],
                    self.shape().clone(),
                    acc,
                    device,
                ),
            };
            Ok(self.cast_to(acc).try_add(&sums)?.cast_to(self.dtype()))
        }
    }
}

/// The fewest lines a scatter runs on before its sources are cut into chunks.
const FEW_LINES: usize = 256;

/// The fewest sources of a chunk.
const CHUNK: usize = 2048;

/// The number of chunks to cut each line of sources of `index` into, if
/// more than one: when there are fewer than [`FEW_LINES`] lines, each
/// longer than two chunks of [`CHUNK`], as many chunks as bring the lines
/// to [`FEW_LINES`], while the chunks' partial outputs stay within four
/// times the sources.
fn chunks(out: &Tensor, axis: usize, index: &Tensor) -> Option<usize> {
    let len = index.dims()[axis];
    let lines = index.numel() / len.max(1);
    if out.rank() >= crate::MAX_RANK || lines >= FEW_LINES || len < 2 * CHUNK {
        return None;
    }
    let budget = (4 * index.numel() / out.numel().max(1)).max(1);
    let parts = (len / CHUNK).min(FEW_LINES.div_ceil(lines)).min(budget);
    (parts > 1).then_some(parts)
}

/// The sums of a scatter whose sources are cut into `parts` chunks along
/// `axis`: each chunk scatters into a partial output of its own (a line
/// of its own, so the chunks run in parallel), and the partials are
/// summed in chunk order. The sources are padded to whole chunks with
/// zeros at position 0, which change no sum (a sum that starts from +0
/// is never -0).
fn chunked_sums(out: &Tensor, axis: usize, index: &Tensor, src: &Tensor, parts: usize) -> crate::error::Result<Tensor> {
    let len = index.dims()[axis];
    let per = len.div_ceil(parts);
    let pad = |t: &Tensor| -> crate::error::Result<Tensor> {
        if per * parts == len {
            return Ok(t.clone());
        }
        let mut dims = t.dims().to_vec();
        dims[axis] = per * parts - len;
        let zeros = Tensor::zeros(&dims, t.dtype()).to(t.device());
        Tensor::try_cat(&[t, &zeros], axis as isize)
    };
    let split = |t: &Tensor| -> crate::error::Result<Tensor> {
        let mut dims = t.dims().to_vec();
        dims[axis] = per;
        dims.insert(axis, parts);
        pad(t)?.try_reshape(&dims)
    };
    let (index, src) = (split(index)?, split(src)?);
    let mut dims = out.dims().to_vec();
    dims.insert(axis, parts);
    let shape = crate::shape::Shape::try_new("scatter_add", &dims)?;
    let partials = Tensor::record(
        Op::ScatterAdd {
            axis: axis + 1,
            chunked: Some(len),
        },
        &[&index, &src],
        shape,
        src.dtype(),
        out.device(),
    );
    partials.try_sum(&[axis as isize], false)
}
