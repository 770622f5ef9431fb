//! The tiled iteration space of a kernel: coalesced axes, tile shape, grid
//! and loops.
//!
//! Adjacent axes of the iteration space merge into one when every operand
//! and result addresses them as one run (`stride[i] == stride[i+1] *
//! extent[i+1]`) and both are reduced or both are kept; size-1 axes vanish.
//! A contiguous elementwise chain thus becomes a 1-D kernel, a row reduction
//! a 2-D one.

/// One axis of the coalesced iteration space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Axis {
    /// Its extent.
    pub extent: u64,
    /// Whether it is reduced.
    pub reduced: bool,
    /// The tile length along it.
    pub tile: u32,
}

impl Axis {
    /// The number of tiles along the axis.
    pub fn count(&self) -> u64 {
        self.extent.div_ceil(self.tile as u64)
    }

    /// Whether the last tile is partly out of bounds.
    pub fn ragged(&self) -> bool {
        self.extent % self.tile as u64 != 0
    }

    /// The narrowest integer dtype that holds every element index of its
    /// tiles (the last tile's padding included): i32 or i64.
    pub fn index_dtype(&self) -> crate::DType {
        if self.count() * self.tile as u64 <= i32::MAX as u64 {
            crate::DType::I32
        } else {
            crate::DType::I64
        }
    }
}

/// The groups of original axes that form each coalesced axis, given the
/// full extents, the reduced axes, and for each access its strides over the
/// full axes and whether it sees the reduced axes (a reduced-space access
/// does not).
#[cfg(test)]
pub(crate) fn coalesce(full: &[usize], reduced: &[usize], accesses: &[(Vec<i64>, bool)]) -> Vec<Vec<usize>> {
    let order: Vec<usize> = (0..full.len()).collect();
    coalesce_in(&order, full, reduced, accesses, &[])
}

/// [`coalesce`] with the axes walked in `order` (outermost first, a
/// permutation of the axes) instead of their logical order, and the axes of
/// `alone` (cut by a window) joined to no other.
pub(crate) fn coalesce_in(
    order: &[usize],
    full: &[usize],
    reduced: &[usize],
    accesses: &[(Vec<i64>, bool)],
    alone: &[usize],
) -> Vec<Vec<usize>> {
    let mut runs: Vec<Vec<usize>> = vec![];
    for &k in order {
        if full[k] == 1 {
            continue;
        }
        if let Some(run) = runs.last_mut() {
            let prev = *run.last().unwrap();
            let same_class = reduced.contains(&prev) == reduced.contains(&k) && !alone.contains(&prev) && !alone.contains(&k);
            let joins = accesses.iter().all(|(strides, sees_reduced)| {
                (!sees_reduced && reduced.contains(&k)) || strides[prev] == strides[k] * full[k] as i64
            });
            if same_class && joins {
                run.push(k);
                continue;
            }
        }
        runs.push(vec![k]);
    }
    runs
}

/// Tile lengths for `axes` (extents and reduced flags set): a row kernel
/// takes its reduced axes whole; the rest share `budget` elements, innermost
/// axes first, in powers of two, except in an elementwise kernel of rows
/// (no reduced axis, more than one axis): there the innermost axis is cut
/// evenly ([`even_tile`]) so that odd widths are not padded to a power of
/// two in every row, and each outer axis takes what the budget leaves
/// (or its whole extent), not the power of two below it. (One axis is one row: its padding is one
/// tile's, and it keeps the widest atoms.)
pub(crate) fn choose_tiles(axes: &mut [Axis], budget: u64, whole_rows: bool, atom: u64) {
    let elementwise = axes.len() > 1 && !axes.iter().any(|a| a.reduced);
    let mut left = budget.max(1);
    if whole_rows {
        for a in axes.iter_mut().filter(|a| a.reduced) {
            a.tile = pow2(a.extent) as u32;
            left = (left / a.tile as u64).max(1);
        }
    }
    let last = axes.len().saturating_sub(1);
    // The elements and the atoms of one step of the axis being tiled.
    let (mut inner, mut atom) = (1u64, atom.max(1));
    for (k, a) in axes.iter_mut().enumerate().rev() {
        if whole_rows && a.reduced {
            continue;
        }
        let mut t = pow2(a.extent).min(pow2_floor(left));
        if elementwise && k == last {
            t = even_tile(a.extent, t);
            // The layout's atoms lie within rows.
            atom = atom.min(1 << t.trailing_zeros().min(63));
        } else if elementwise {
            t = outer_tile(a.extent, t, left, inner / atom);
        }
        if whole_rows && k == last {
            // Whole rows over strided reduced axes still read whole lines:
            // at least a 32-wide piece of the innermost (kept) axis
            // (grouping keeps such tiles within its row limit).
            t = t.max(pow2(a.extent).min(WHOLE_LINE));
        }
        a.tile = t as u32;
        inner *= t;
        left = (left / t).max(1);
    }
}

/// The tile of an outer axis of an elementwise kernel of rows, where
/// `pow2t` is the power of two the budget leaves, `left` the budget left
/// and `row_atoms` the atoms of one step of the axis: `pow2t` when it lies
/// within the extent and its atoms split evenly over a block of 64 threads
/// or more (a [32, 20] f64 tile is 64 threads of five atoms each); else
/// what the budget leaves, or the whole extent when that is less. A [16,
/// 40] f32 tile of a budget of 1024 held 160 atoms of four, over 128
/// threads of two slots each, every op computed on the idle slots too;
/// [25, 40] holds 250 atoms in 256 slots (`benches/NOTES.md`, v43).
fn outer_tile(extent: u64, pow2t: u64, left: u64, row_atoms: u64) -> u64 {
    if pow2t <= extent && (pow2t * row_atoms) % 64 == 0 {
        pow2t
    } else {
        extent.min(left).max(1)
    }
}

/// The tile of an elementwise kernel's innermost axis of `extent`, where
/// `cap` (a power of two) is the tile the budget leaves: `cap` itself
/// when it pads the axis by at most an eighth; else an even extent that
/// fits is its own tile (a width of 26 takes tiles of 26, not of 32 with 6
/// idle slots a row, and its atoms of two are aligned to the rows, where
/// atoms of eight were not); else the extent cut into as few equal pieces
/// as `cap` allows, each rounded up to a multiple of 16 elements, so that a
/// piece keeps the 16-byte atoms of every dtype and only the last one is
/// ragged (2816 takes two tiles of 1408, not 2048 and a quarter-full one).
/// An odd width keeps `cap`: tiles of an odd width have atoms of one
/// element, each with an address of its own, which cost more than the
/// padding (`benches/NOTES.md`, v32).
pub(crate) fn even_tile(extent: u64, cap: u64) -> u64 {
    const ATOM: u64 = 16;
    let padded = extent.div_ceil(cap.max(1)) * cap;
    if (padded - extent) * 8 <= extent || cap < ATOM {
        return cap;
    }
    if extent <= cap {
        return if extent % 2 == 0 { extent } else { cap };
    }
    let pieces = extent.div_ceil(cap);
    extent.div_ceil(pieces).next_multiple_of(ATOM).min(cap)
}

/// The narrowest piece of a kept innermost axis a row kernel takes, and
/// the narrowest [`spread_kept`] leaves: 128 bytes of f32.
pub(crate) const WHOLE_LINE: u64 = 32;

/// For a reduction over strided axes (the innermost axis kept) whose kept
/// tiles are fewer than `few_points`: narrower pieces of the innermost
/// axis, down to [`WHOLE_LINE`], and to the reduced axes the budget this
/// frees (unless rows are taken whole). More grid points, each still
/// reading whole lines.
pub(crate) fn spread_kept(axes: &mut [Axis], budget: u64, whole_rows: bool, few_points: u64) {
    let Some(last) = axes.len().checked_sub(1) else { return };
    if axes[last].reduced || !axes.iter().any(|a| a.reduced) {
        return;
    }
    let points = |axes: &[Axis]| axes.iter().filter(|a| !a.reduced).map(Axis::count).product::<u64>();
    let before = axes[last].tile;
    while points(axes) < few_points && axes[last].tile as u64 > WHOLE_LINE {
        axes[last].tile /= 2;
    }
    if axes[last].tile == before || whole_rows {
        return;
    }
    let kept: u64 = axes.iter().filter(|a| !a.reduced).map(|a| a.tile as u64).product();
    let mut left = (budget / kept).max(1);
    for a in axes.iter_mut().rev().filter(|a| a.reduced) {
        let t = pow2(a.extent).min(pow2_floor(left));
        a.tile = t as u32;
        left = (left / t).max(1);
    }
}

/// The smallest power of two at least `x` (1 for 0).
fn pow2(x: u64) -> u64 {
    x.max(1).next_power_of_two()
}

/// The largest power of two at most `x` (`x >= 1`).
fn pow2_floor(x: u64) -> u64 {
    1u64 << (63 - x.max(1).leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_operands_coalesce_to_one_axis() {
        let runs = coalesce(&[4, 5, 6], &[], &[(vec![30, 6, 1], true), (vec![0, 6, 1], true)]);
        assert_eq!(runs, vec![vec![0], vec![1, 2]]);
        let runs = coalesce(&[4, 1, 6], &[2], &[(vec![6, 6, 1], true), (vec![1, 1, 0], false)]);
        assert_eq!(runs, vec![vec![0], vec![2]]);
    }

    #[test]
    fn row_kernels_take_rows_whole() {
        let mut axes = [
            Axis {
                extent: 8,
                reduced: false,
                tile: 1,
            },
            Axis {
                extent: 4000,
                reduced: true,
                tile: 1,
            },
        ];
        choose_tiles(&mut axes, 8192, true, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (2, 4096));
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (1, 2048));
    }

    #[test]
    fn elementwise_rows_are_cut_evenly_and_not_padded() {
        let axis = |extent| Axis {
            extent,
            reduced: false,
            tile: 1,
        };
        let mut axes = [axis(1000), axis(26)];
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (64, 26));
        // Outer axes keep their power of two where its atoms split evenly
        // over 64 threads, and fill the budget where they would not.
        let mut axes = [axis(1000), axis(40)];
        choose_tiles(&mut axes, 1024, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (25, 40));
        let mut axes = [axis(1000), axis(20)];
        choose_tiles(&mut axes, 1024, false, 2);
        assert_eq!((axes[0].tile, axes[1].tile), (32, 20));
        let mut axes = [axis(1000), axis(192)];
        choose_tiles(&mut axes, 2048, false, 8);
        assert_eq!((axes[0].tile, axes[1].tile), (8, 192));
        // An outer extent below its power of two is its own tile.
        let mut axes = [axis(1000), axis(3), axis(64)];
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile, axes[2].tile), (8, 3, 64));
        // An odd width keeps its power of two.
        let mut axes = [axis(1000), axis(49)];
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (32, 64));
        let mut axes = [axis(1000), axis(2816)];
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!((axes[0].tile, axes[1].tile), (1, 1408));
        // One axis keeps its power of two.
        let mut axes = [axis(1000)];
        choose_tiles(&mut axes, 2048, false, 4);
        assert_eq!(axes[0].tile, 1024);
        // Every piece but the last is whole, in multiples of 16, and no
        // more pieces are cut than `cap` needs.
        for extent in [1u64, 7, 16, 2047, 2048, 2049, 2816, 4095, 10_001, 237_597_379] {
            let cap = extent.next_power_of_two().min(2048);
            let t = even_tile(extent, cap);
            assert!(t <= cap && (t == cap || (t == extent && t % 2 == 0) || t % 16 == 0), "{extent}: {t}");
            assert_eq!(extent.div_ceil(t), extent.div_ceil(cap), "{extent}: {t}");
        }
        // Little padding keeps the power of two.
        assert_eq!(even_tile(60, 64), 64);
        assert_eq!(even_tile(237_597_379, 2048), 2048);
        assert_eq!(even_tile(100, 8), 8);
    }
}
