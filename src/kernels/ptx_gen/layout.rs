//! The thread mapping: how a tile's elements are spread over a block.
//!
//! In the operand model of the reference documents a tile is
//! `(group…, repeat…, atom…)`: the block's threads, the instructions each
//! thread repeats, and the elements one memory instruction moves. Here a tile
//! of `n` elements (row-major) with atom `A` and `T` threads puts element
//! `e = (r · T + t) · A + a` in slot `r · A + a` of thread `t`: each thread
//! holds `R = ceil(n / (T · A))` atoms of `A` consecutive elements, and the
//! threads of a warp touch consecutive atoms, so memory accesses coalesce.
//! The mapping depends only on the tile's shape (and the program's `T` and
//! largest atom), so every value of one shape is spread alike and
//! elementwise ops never move data between threads; reductions and
//! broadcasts, which change the shape, exchange values through shared
//! memory.

use crate::dtype::DType;
use crate::kernels::ir::{Inst, Program};

/// The program-wide choices: threads per block and the largest atom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BlockShape {
    /// Threads per block (a multiple of 32).
    pub threads: u32,
    /// The most elements one atom may hold: 16 bytes of the narrowest
    /// element type the program moves through global memory.
    pub max_atom: u32,
}

/// How one tile shape is spread over the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Elements of the tile.
    pub numel: u32,
    /// Elements per atom (a power of two dividing the innermost extent).
    pub atom: u32,
    /// Atoms per thread.
    pub repeats: u32,
    /// Whether the last repeat of some threads lies past the tile's end.
    pub partial: bool,
}

impl Layout {
    /// Slots (registers) per thread.
    pub fn slots(&self) -> usize {
        (self.repeats * self.atom) as usize
    }
}

/// The layout of `shape` under `block`.
pub(super) fn layout(block: BlockShape, shape: &[u32]) -> Layout {
    let numel: u32 = shape.iter().product();
    let inner = shape.last().copied().unwrap_or(1);
    let mut atom = block.max_atom;
    while atom > 1 && inner % atom != 0 {
        atom /= 2;
    }
    let per_block = block.threads * atom;
    let repeats = numel.div_ceil(per_block).max(1);
    Layout {
        numel,
        atom,
        repeats,
        partial: repeats * per_block != numel,
    }
}

/// Collects the dtypes of every parameter the program loads or stores.
fn memory_dtypes(program: &Program, body: &[Inst], out: &mut Vec<DType>) {
    for inst in body {
        match inst {
            Inst::Load { view, .. } | Inst::Store { view, .. } | Inst::Gather { view, .. } => {
                if let Some(v) = program.views.get(view.index()) {
                    if let Some(p) = program.params.get(v.param.index()) {
                        out.push(p.dtype);
                    }
                }
            }
            Inst::Loop { body, .. } => memory_dtypes(program, body, out),
            _ => {}
        }
    }
}

/// Whether `body` computes every element on its own: no reductions, loops,
/// atomic updates or last-point sections, so how its tiles are spread over
/// threads changes no value.
pub(super) fn elementwise_only(body: &[Inst]) -> bool {
    body.iter().all(|inst| {
        matches!(
            inst,
            Inst::Load { .. }
                | Inst::Gather { .. }
                | Inst::Store { .. }
                | Inst::InBounds { .. }
                | Inst::Const { .. }
                | Inst::Scalar { .. }
                | Inst::Iota { .. }
                | Inst::Unary { .. }
                | Inst::Binary { .. }
                | Inst::Select { .. }
                | Inst::Cast { .. }
                | Inst::Broadcast { .. }
        )
    })
}

/// Whether `body` reduces only inside tiles (a row kernel's in-tile
/// reductions and broadcasts back): no loops, atomic updates or last-point
/// sections, so each grid point reads its tile once.
fn in_tile_only(body: &[Inst]) -> bool {
    body.iter().all(|inst| {
        matches!(inst, Inst::Reduce { .. } | Inst::Scan { .. }) || elementwise_only(std::slice::from_ref(inst))
    })
}

/// The largest atom (in elements, a power of two, at most 16) at which
/// every contiguous view of `program` (innermost stride 1, more than one
/// element wide) is aligned: its offset and outer strides are multiples of
/// it (for a window, its origin and innermost start).
fn aligned_atom(program: &Program) -> u32 {
    let mut atom = 16u64;
    for v in &program.views {
        let (Some((&inner, outer)), Some(&width)) = (v.strides.split_last(), v.extents.last()) else {
            continue;
        };
        if inner != 1 || width < 2 {
            continue;
        }
        let outer = outer
            .iter()
            .zip(&v.extents)
            .filter(|(_, &e)| e > 1)
            .map(|(&s, _)| s.unsigned_abs());
        // A window's origin (which may lie below the buffer) and the start
        // of its innermost axis count as offsets.
        let origin = (v.origin().unsigned_abs() as u64, v.lower(v.extents.len() - 1));
        for x in outer.chain([origin.0, origin.1]) {
            if x != 0 {
                atom = atom.min(1 << x.trailing_zeros().min(4));
            }
        }
    }
    atom as u32
}

/// The shape of the program's largest tile value or accumulator.
fn largest_tile(program: &Program) -> Vec<u32> {
    program
        .values
        .iter()
        .chain(program.accs.iter().map(|a| &a.ty))
        .max_by_key(|t| t.numel())
        .map(|t| t.shape.to_vec())
        .unwrap_or_default()
}

/// [`choose_block`], with atoms narrowed to every contiguous view's
/// alignment ([`aligned_atom`]) where that costs no addressing. Atoms
/// wider than a view's alignment make its accesses scalar, a thread's
/// scalars `A` elements apart, so a warp instruction touches `A` times the
/// lines it needs (L1 catches the rest); narrower atoms read consecutive
/// elements with each instruction, but a thread then has more repeats,
/// each an address and masks of its own unless every block-wide run of
/// atoms lies inside one row of the tile (the repeats then sit at fixed
/// distances, immediate offsets of one address). So the narrow atoms are
/// taken for one repeat a thread or rows a multiple of the run, where the
/// addressing costs nothing more, and only in elementwise programs (a
/// reduction's exchanges and loops are laid out by atom, and its narrow
/// atoms measured slower); the measurements are in `benches/NOTES.md`,
/// v32.
pub(super) fn choose_block_aligned(program: &Program, most: u32, atom_cap: u32) -> BlockShape {
    let wide = choose_block(program, most, atom_cap);
    let aligned = aligned_atom(program);
    let largest = largest_tile(program);
    // Row kernels narrow only with one row a tile: several short rows a
    // tile at atoms of one lost (`benches/NOTES.md`, v34).
    let one_row = largest.iter().rev().skip(1).all(|&d| d == 1);
    if aligned >= wide.max_atom || !(elementwise_only(&program.body) || (in_tile_only(&program.body) && one_row)) {
        return wide;
    }
    let narrow = choose_block(program, most, atom_cap.min(aligned));
    let l = layout(narrow, &largest);
    let inner = largest.last().copied().unwrap_or(1);
    if l.repeats == 1 || inner % (narrow.threads * l.atom) == 0 {
        narrow
    } else {
        wide
    }
}

/// Chooses the block for a program: the atom from its narrowest memory
/// dtype, and the threads from its largest tile so that every thread has at
/// least one atom (up to `most` threads, preferring a count of at least 64
/// that divides the atoms evenly), doubled up to 1024 while a thread would hold more than 32
/// elements. `atom_cap` caps the atom below the 16-byte one (a power of
/// two; 16 or more leaves it uncapped).
pub(super) fn choose_block(program: &Program, most: u32, atom_cap: u32) -> BlockShape {
    let mut dtypes = Vec::new();
    memory_dtypes(program, &program.body, &mut dtypes);
    let narrowest = dtypes.iter().map(|d| d.size_in_bytes() as u32).min().unwrap_or(4);
    let max_atom = (16 / narrowest).min(atom_cap.max(1));
    let largest = largest_tile(program);
    let probe = layout(BlockShape { threads: 1, max_atom }, &largest);
    let atoms = probe.numel / probe.atom;
    let candidates = [1024u32, 512, 256, 128, 64, 32];
    let fitting: Vec<u32> = candidates
        .into_iter()
        .filter(|&t| t <= most && t <= atoms.max(32))
        .collect();
    // A count that divides the atoms, unless it would be a block narrower
    // than 64 threads (or `most`): 32-thread blocks of a [32, 31] tile
    // would leave an SM half its threads (at most 32 blocks are resident);
    // a partial last repeat costs less.
    let floor = most.min(64);
    let mut threads = fitting
        .iter()
        .copied()
        .find(|&t| atoms % t == 0 && (t >= floor || t == atoms.max(32)))
        .unwrap_or(fitting[0]);
    while threads < 1024 && layout(BlockShape { threads, max_atom }, &largest).slots() > 32 {
        threads *= 2;
    }
    // Accumulators live through their loops: more than `ACC_WORDS` 32-bit
    // words of them a thread (an f64 variance's sums over a strided axis,
    // 96 at 256 threads) spill beside the loads of a trip.
    while threads < 1024 && acc_words(program, BlockShape { threads, max_atom }) > ACC_WORDS {
        threads *= 2;
    }
    BlockShape { threads, max_atom }
}

/// The atoms a thread of `block` holds of `program`'s largest tile.
pub(super) fn atoms_per_thread(program: &Program, block: BlockShape) -> u32 {
    layout(block, &largest_tile(program)).repeats
}

/// The most 32-bit words of accumulators a thread of [`choose_block`]'s
/// blocks holds, where more threads can share them.
const ACC_WORDS: usize = 64;

/// The 32-bit words of accumulators a thread of `block` holds.
fn acc_words(program: &Program, block: BlockShape) -> usize {
    program
        .accs
        .iter()
        .map(|a| layout(block, &a.ty.shape).slots() * a.ty.dtype.size_in_bytes().div_ceil(4))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_tile_is_64_threads_of_three_16_byte_atoms() {
        let block = BlockShape {
            threads: 64,
            max_atom: 4,
        };
        let l = layout(block, &[2, 32, 3, 4]);
        assert_eq!((l.numel, l.atom, l.repeats, l.partial), (768, 4, 3, false));
    }

    #[test]
    fn ragged_shapes_get_narrower_atoms_and_partial_repeats() {
        let block = BlockShape {
            threads: 32,
            max_atom: 4,
        };
        let l = layout(block, &[5, 6]);
        assert_eq!((l.numel, l.atom, l.repeats, l.partial), (30, 2, 1, true));
        let l = layout(block, &[64, 25]);
        assert_eq!((l.numel, l.atom, l.repeats, l.partial), (1600, 1, 50, false));
        let l = layout(block, &[]);
        assert_eq!((l.numel, l.atom, l.repeats, l.partial), (1, 1, 1, true));
    }
}
