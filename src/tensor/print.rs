//! `Display` for tensors: the values in nested brackets, as PyTorch prints
//! them, then the shape, dtype and device.
//!
//! Printing realizes the tensor and reads it (a GPU tensor is downloaded).
//! Tensors of more than [`SUMMARY`] elements are summarized: along every
//! axis longer than `2 * EDGE`, the first and last [`EDGE`] indices are
//! shown with `...` between them. Floats share one format per tensor:
//! whole numbers as `1.`, others with four decimals, and scientific
//! notation where the magnitudes span more than 1000× or reach 1e8 or
//! fall below 1e-4. A tensor that cannot be read prints the error in place
//! of its values.

use super::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use std::fmt;

/// The most elements printed in full.
pub const SUMMARY: usize = 1000;

/// The indices shown at each end of a summarized axis.
pub const EDGE: usize = 3;

/// The values of a tensor as printed text, one string per element.
fn cells(t: &Tensor) -> Result<Vec<String>> {
    let d = t.dtype();
    if d == DType::Bool {
        return Ok(t.to_vec::<bool>()?.into_iter().map(|b| b.to_string()).collect());
    }
    if !d.is_float() {
        return Ok(t
            .cast(DType::I64)
            .to_vec::<i64>()?
            .into_iter()
            .map(|v| v.to_string())
            .collect());
    }
    let v = t.cast(DType::F64).to_vec::<f64>()?;
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).map(f64::abs).collect();
    let whole = finite.iter().all(|x| x.fract() == 0.0);
    let max = finite.iter().copied().fold(0.0, f64::max);
    let min = finite
        .iter()
        .copied()
        .filter(|&x| x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let scientific = max >= 1e8 || (min.is_finite() && (min < 1e-4 || max / min > 1000.0) && !whole);
    Ok(v.into_iter()
        .map(|x| {
            if x.is_nan() {
                "nan".into()
            } else if x.is_infinite() {
                if x > 0.0 { "inf" } else { "-inf" }.into()
            } else if scientific {
                format!("{x:.4e}")
            } else if whole {
                format!("{x:.0}.")
            } else {
                format!("{x:.4}")
            }
        })
        .collect())
}

/// The indices of an axis of length `n` that are shown, `None` marking the
/// elision.
fn shown(n: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    }
}

/// What every block of one printed tensor shares.
struct Printer<'a> {
    cells: &'a [String],
    dims: &'a [usize],
    /// The width every element is right-aligned to.
    width: usize,
    /// The column of the outermost bracket.
    indent: usize,
    summarize: bool,
}

impl Printer<'_> {
    /// Writes the block of axis `axis` starting at flat offset `base`.
    fn block(&self, out: &mut String, axis: usize, base: usize) {
        out.push('[');
        let stride: usize = self.dims[axis + 1..].iter().product();
        let last = axis + 1 == self.dims.len();
        for (k, item) in shown(self.dims[axis], self.summarize).into_iter().enumerate() {
            if k > 0 {
                if last {
                    out.push_str(", ");
                } else {
                    out.push(',');
                    // A blank line between blocks of rank 3 and more, as PyTorch.
                    for _ in 0..self.dims.len() - axis - 1 {
                        out.push('\n');
                    }
                    out.push_str(&" ".repeat(self.indent + axis + 1));
                }
            }
            match item {
                None => out.push_str("..."),
                Some(i) if last => out.push_str(&format!("{:>w$}", self.cells[base + i * stride], w = self.width)),
                Some(i) => self.block(out, axis + 1, base + i * stride),
            }
        }
        out.push(']');
    }
}

impl fmt::Display for Tensor {
    /// The values as PyTorch prints them, then the shape, dtype and
    /// device:
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.5, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(
    ///     x.to_string(),
    ///     "tensor([[ 1.0000, -2.5000],\n        [ 3.0000,  4.0000]], shape=[2, 2], dtype=f32, device=cpu)"
    /// );
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tail = format!(
            "shape={:?}, dtype={}, device={}",
            self.dims(),
            self.dtype(),
            self.device()
        );
        let cells = match cells(self) {
            Ok(c) => c,
            Err(e) => return write!(f, "tensor(<not readable: {e}>, {tail})"),
        };
        let dims = self.dims();
        if dims.is_empty() {
            return write!(f, "tensor({}, {tail})", cells[0]);
        }
        let printer = Printer {
            cells: &cells,
            dims,
            width: cells.iter().map(|c| c.chars().count()).max().unwrap_or(0),
            indent: "tensor(".len(),
            summarize: cells.len() > SUMMARY,
        };
        let mut out = String::new();
        printer.block(&mut out, 0, 0);
        write!(f, "tensor({out}, {tail})")
    }
}
