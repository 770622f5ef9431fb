//! Strided layouts: how a view chain addresses the memory of the buffer it
//! starts from.
//!
//! Every view op (permute, slice, expand and most reshapes) is folded into a
//! [`Layout`] of the materialised buffer below it, so fused kernels address
//! operands through partition views and never copy them.

use crate::graph::Op;
use crate::shape::Shape;

/// Extents, strides (in elements) and offset of a strided span.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    /// The extents, outermost first.
    pub dims: Vec<usize>,
    /// The strides in elements (0 on broadcast axes).
    pub strides: Vec<i64>,
    /// The element offset of index zero.
    pub offset: u64,
}

impl Layout {
    /// The row-major contiguous layout of `shape`.
    pub fn contiguous(shape: &Shape) -> Layout {
        Layout {
            dims: shape.dims().to_vec(),
            strides: shape.contiguous_strides().iter().map(|&s| s as i64).collect(),
            offset: 0,
        }
    }

    /// The layout after applying view `op` whose result has shape `out`, or
    /// `None` for a reshape that strides cannot express.
    pub fn apply(&self, op: &Op, out: &Shape) -> Option<Layout> {
        let mut l = self.clone();
        match op {
            Op::Permute(perm) => {
                l.dims = perm.iter().map(|&p| self.dims[p]).collect();
                l.strides = perm.iter().map(|&p| self.strides[p]).collect();
            }
            Op::Slice { axis, start, step } => {
                l.offset += (*start as i64 * self.strides[*axis]) as u64;
                l.strides[*axis] *= *step as i64;
                l.dims[*axis] = out.dims()[*axis];
            }
            Op::Expand => {
                for (k, &d) in out.dims().iter().enumerate() {
                    if self.dims[k] != d {
                        l.strides[k] = 0;
                    }
                }
                l.dims = out.dims().to_vec();
            }
            Op::Reshape => {
                l.strides = reshape_strides(&self.dims, &self.strides, out.dims())?;
                l.dims = out.dims().to_vec();
            }
            _ => return None,
        }
        if l.dims.contains(&0) {
            l.offset = 0;
        }
        Some(l)
    }
}

/// Strides that address the elements of a `dims`/`strides` span in row-major
/// order under the new extents `new`, when strides can express that: every
/// new axis must fall inside one run of old axes that is contiguous with
/// respect to each other.
pub(crate) fn reshape_strides(dims: &[usize], strides: &[i64], new: &[usize]) -> Option<Vec<i64>> {
    if dims.contains(&0) || new.contains(&0) {
        return Some(Shape::new(new).contiguous_strides().iter().map(|&s| s as i64).collect());
    }
    // Runs of old axes (size-1 axes dropped) that are mutually contiguous.
    let old: Vec<(usize, i64)> = dims
        .iter()
        .zip(strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let mut out = vec![0i64; new.len()];
    let (mut oi, mut ni) = (0usize, 0usize);
    while ni < new.len() {
        if new[ni] == 1 {
            out[ni] = 0;
            ni += 1;
            continue;
        }
        if oi >= old.len() {
            return None;
        }
        // Grow a chunk of old axes and a chunk of new axes until the products match.
        let (o0, n0) = (oi, ni);
        let (mut op, mut np) = (old[oi].0, new[ni]);
        oi += 1;
        ni += 1;
        while op != np {
            if op < np {
                if oi >= old.len() {
                    return None;
                }
                op *= old[oi].0;
                oi += 1;
            } else {
                if ni >= new.len() {
                    return None;
                }
                np *= new[ni];
                ni += 1;
            }
        }
        // The old chunk must be contiguous in itself.
        for k in o0..oi - 1 {
            if old[k].1 != old[k + 1].1 * old[k + 1].0 as i64 {
                return None;
            }
        }
        // Strides of the new chunk, innermost first from the chunk's last stride.
        let mut s = old[oi - 1].1;
        for k in (n0..ni).rev() {
            out[k] = s;
            s *= new[k] as i64;
        }
    }
    if oi != old.len() {
        return None;
    }
    Some(out)
}

/// The extents without their size-1 axes.
pub(crate) fn squeeze(dims: &[usize]) -> Vec<usize> {
    dims.iter().copied().filter(|&d| d != 1).collect()
}

/// Strides of `layout` over the axes of `space`, whose non-1 extents must be
/// those of the layout in the same order (size-1 axes of either side carry no
/// stride). `None` when the extents do not correspond.
pub(crate) fn map_onto(layout: &Layout, space: &[usize]) -> Option<Vec<i64>> {
    let src: Vec<(usize, i64)> = layout
        .dims
        .iter()
        .zip(&layout.strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let mut out = vec![0i64; space.len()];
    let mut it = src.iter();
    for (k, &d) in space.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let &(sd, ss) = it.next()?;
        if sd != d {
            return None;
        }
        out[k] = ss;
    }
    if it.next().is_some() {
        return None;
    }
    Some(out)
}

/// A window (`start..end` per axis of a layout of extents `dims`) over the
/// axes of `space`, paired as [`map_onto`] pairs extents: the first and
/// past-the-end index on each axis of `space` (`0..1` on its size-1 axes).
/// `None` when the extents do not correspond.
pub(crate) fn map_window(dims: &[usize], start: &[usize], end: &[usize], space: &[usize]) -> Option<(Vec<u64>, Vec<u64>)> {
    let mut src = (0..dims.len()).filter(|&k| dims[k] != 1);
    let (mut lo, mut hi) = (vec![0u64; space.len()], vec![1u64; space.len()]);
    for (k, &d) in space.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let j = src.next()?;
        if dims[j] != d {
            return None;
        }
        (lo[k], hi[k]) = (start[j] as u64, end[j] as u64);
    }
    src.next().is_none().then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_merges_and_splits_contiguous_runs() {
        assert_eq!(reshape_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]), Some(vec![4, 1]));
        assert_eq!(reshape_strides(&[24], &[1], &[2, 3, 4]), Some(vec![12, 4, 1]));
        assert_eq!(
            reshape_strides(&[4, 1, 5], &[5, 5, 1], &[1, 20, 1]),
            Some(vec![0, 1, 0])
        );
        // A transposed [3, 2] span cannot be flattened without a copy.
        assert_eq!(reshape_strides(&[3, 2], &[1, 3], &[6]), None);
        // But splitting one of its axes can.
        assert_eq!(reshape_strides(&[4, 2], &[1, 4], &[2, 2, 2]), Some(vec![2, 1, 4]));
        // A broadcast axis keeps stride 0 when split.
        assert_eq!(reshape_strides(&[6, 5], &[0, 1], &[2, 3, 5]), Some(vec![0, 0, 1]));
    }

    #[test]
    fn map_onto_matches_non_unit_axes() {
        let l = Layout {
            dims: vec![4, 1, 8],
            strides: vec![8, 8, 1],
            offset: 0,
        };
        assert_eq!(map_onto(&l, &[1, 4, 8]), Some(vec![0, 8, 1]));
        assert_eq!(map_onto(&l, &[8, 4]), None);
    }

    #[test]
    fn map_window_pairs_non_unit_axes() {
        assert_eq!(
            map_window(&[4, 1, 8], &[1, 0, 2], &[3, 1, 8], &[1, 4, 8]),
            Some((vec![0, 1, 2], vec![1, 3, 8]))
        );
        assert_eq!(map_window(&[4, 8], &[0, 0], &[4, 8], &[8, 4]), None);
    }
}
