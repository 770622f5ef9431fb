//! Global memory: loads, stores, atomics, masks and the partition addressing.
//!
//! An access to partition `I` of a view adds, per repeat, the thread's
//! offset `Σ j_k · stride_k` (computed once in the prologue) to the
//! partition's offset `offset + Σ I_k · tile_k · stride_k`, all in 64 bits.
//! An atom moves as 16-byte (or narrower) vectors when its alignment is
//! proven: innermost stride 1, the view's offset and every outer stride a
//! multiple of the atom, and (for masked accesses) the innermost extent a
//! multiple of the atom so an atom is wholly in or out of bounds. Parameter
//! bases are 16-byte aligned by the runtime's allocator. Otherwise each
//! element is its own predicated scalar access.
//!
//! A read-only tile used again after a reduction (the row of a softmax or
//! a norm) is staged: `cp.async` copies it to shared memory in 16-byte
//! pieces, each thread the pieces it reads itself (so only a
//! `cp.async.wait_group`, no barrier), and the tile is read there before
//! the reduction and again after it, so the row takes no registers across
//! the reduction's barriers. Masked tiles, tiles not in 16-byte pieces and
//! tiles past `STAGE_LIMIT` stay in registers.
//!
//! A tile of whole rows whose atoms are not aligned (rows of an odd width)
//! but which is one contiguous run of memory, 16-byte aligned at its start,
//! moves as that run (see [`Run`]): the block copies it between global and
//! shared memory in 16-byte pieces, and each thread reads or writes its own
//! elements in shared memory, so global memory sees whole vectors where it
//! would see one scalar access per element.

use super::emitter::{Class, Emitter};
use super::ops::{immediate, mov_imm};
use crate::config::RunStaging;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::{Access, AtomicOp, IndexExpr, ParamId, PartitionExprs, ValueId, View, ViewId};
use crate::ops::ThreadScope;

mod scatter;

/// Most bytes of staged tiles per block (`CodegenConfig::stage`); static
/// shared memory is limited to 48 KiB in all, and the exchanges need some.
const STAGE_LIMIT: u32 = 32 * 1024;

/// Most bytes of one run's shared array (see [`Run`]).
const RUN_LIMIT: u32 = 16 * 1024;

/// A tile that is one contiguous run of memory: its view is dense and
/// row-major from axis `axis` in, the tile covers every axis past `axis`
/// whole and is one wide on every axis before it. Moved through a shared
/// array; a run that may start off the 16-byte grid (loads only) is copied
/// from the 16 bytes below its start and read `lead` bytes in.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// The axis whose tile the run spans.
    axis: usize,
    /// The tile's extent along `axis`.
    rows: u32,
    /// Elements from one index of `axis` to the next (its stride).
    row: u64,
    /// Bytes of a whole tile's run.
    bytes: u32,
    /// Whether some tile is short along `axis` (the last, masked).
    ragged: bool,
    /// Whether every run starts on 16 bytes and `bytes` is a multiple of
    /// 16.
    aligned: bool,
}

impl Run {
    /// Bytes of its shared array: room for the bytes below an unaligned
    /// start.
    fn array_bytes(self) -> u32 {
        if self.aligned {
            self.bytes
        } else {
            self.bytes.div_ceil(16) * 16 + 16
        }
    }
}

/// Where one partition of a view starts.
struct Site {
    /// `I_k · tile_k` per axis (`u64` operands).
    base: Vec<String>,
    /// The partition's element offset (an `s64` register).
    offset: String,
}

/// How the atoms of one access move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moves {
    /// As vectors: the atoms are aligned and each is wholly in or out of
    /// bounds.
    Vector,
    /// As vectors where an atom is wholly in bounds, element by element
    /// where it is not: aligned atoms of a masked view whose innermost
    /// extent is no multiple of the atom and spans several tiles (odd
    /// element counts, rows wider than a tile), in elementwise programs.
    /// A branch on the atom's last element picks the path, so only the
    /// threads at an edge take the scalar one.
    Peeled,
    /// Element by element: alignment is not proven.
    Scalar,
}

/// Which elements of an atom a mask checks along the innermost axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Each element on its own.
    Each,
    /// The first element, for the whole atom (atoms wholly in or out).
    First,
    /// The last element, for the whole atom: true only where every element
    /// is in bounds.
    Last,
}

/// The labels of a peeled access's scalar edge and of its end.
struct Edge {
    start: String,
    done: String,
}

/// Elements per memory instruction for an atom of `atom` elements of `esize` bytes.
fn chunk_elems(esize: u32, atom: u32) -> u32 {
    if esize == 1 {
        atom.min(4)
    } else {
        atom.min(16 / esize)
    }
}

/// `.v2`/`.v4` or nothing.
fn vec_suffix(n: u32) -> String {
    if n == 1 {
        String::new()
    } else {
        format!(".v{n}")
    }
}

/// A register list operand: `%r1` or `{%r1, %r2}`.
fn reg_list(regs: &[String]) -> String {
    if regs.len() == 1 {
        regs[0].clone()
    } else {
        format!("{{{}}}", regs.join(", "))
    }
}

/// The type suffix of a memory instruction on whole elements of `d`.
fn mem_type(d: DType) -> &'static str {
    match d {
        DType::F32 => ".f32",
        DType::F64 => ".f64",
        DType::I64 => ".b64",
        DType::F16 | DType::BF16 => ".b16",
        DType::Bool | DType::U8 => ".u8",
        DType::I32 | DType::U32 => ".b32",
    }
}

/// `@p ` or nothing.
fn guard(p: &Option<String>) -> String {
    p.as_ref().map(|p| format!("@{p} ")).unwrap_or_default()
}

impl Emitter<'_> {
    /// Position `p` of `dtype` (an index of a gather or scatter, `what`)
    /// as a 64-bit register, signed or not as its dtype is.
    pub(super) fn wide_position(&mut self, p: &str, dtype: DType, what: &str) -> Result<String> {
        let cvt = match dtype {
            DType::I64 => return Ok(p.to_string()),
            DType::I32 => "cvt.s64.s32",
            DType::U32 | DType::U8 => "cvt.u64.u32",
            other => return Err(self.invalid(format!("{what} positions of {other}"))),
        };
        let w = self.reg(Class::B64);
        self.ins(format!("{cvt} {w}, {p}"));
        Ok(w)
    }

    fn site(&mut self, v: &View, index: &PartitionExprs) -> Result<Site> {
        if index.len() != v.tile.len() {
            return Err(self.invalid(format!(
                "partition index of rank {} for a view of rank {}",
                index.len(),
                v.tile.len()
            )));
        }
        let offset = self.reg(Class::B64);
        let mut constant = v.origin();
        let mut terms = Vec::new();
        let mut base = Vec::new();
        for ((x, &t), &s) in index.iter().zip(&v.tile).zip(&v.strides) {
            let i = self.index(x)?;
            if let Ok(c) = i.parse::<u64>() {
                let b = c as i128 * t as i128;
                constant += b * s as i128;
                base.push(b.to_string());
            } else {
                let b = self.reg(Class::B64);
                self.ins(format!("mul.lo.u64 {b}, {i}, {t}"));
                terms.push((b.clone(), s));
                base.push(b);
            }
        }
        let constant = i64::try_from(constant).map_err(|_| self.invalid("a partition offset overflows 64 bits"))?;
        self.ins(format!("mov.u64 {offset}, {constant}"));
        for (b, s) in terms {
            if s != 0 {
                self.ins(format!("mad.lo.s64 {offset}, {b}, {s}, {offset}"));
            }
        }
        Ok(Site { base, offset })
    }

    /// How atoms of `atom` elements of view `v` move (see [`Moves`]).
    fn moves(&self, v: &View, atom: u32, masked: bool) -> Moves {
        let Some((&inner, outer)) = v.strides.split_last() else {
            return Moves::Scalar;
        };
        let a = atom as i64;
        let start = v.lower(outer.len());
        let aligned = atom > 1
            && inner == 1
            && v.origin().rem_euclid(a as i128) == 0
            && start % atom as u64 == 0
            && outer.iter().all(|s| s % a == 0);
        if !aligned {
            Moves::Scalar
        } else if masked && v.upper(outer.len()) % atom as u64 != 0 {
            // Peeled only where a row spans several tiles, so that the edge
            // is in the last tile of each row and few warps branch to it (a
            // row of one ragged tile would make every warp diverge), and
            // only in elementwise programs (a reduction reading such a view
            // in its loop would branch in every trip); see
            // `benches/NOTES.md`, v32.
            let (e, t) = (v.upper(outer.len()), v.tile[v.tile.len() - 1] as u64);
            if e > t && !v.is_window() && self.elementwise {
                Moves::Peeled
            } else {
                Moves::Scalar
            }
        } else {
            Moves::Vector
        }
    }

    /// The address of repeat `r`'s first element (a `u64` register).
    fn address(&mut self, view: ViewId, site: &Site, r: u32) -> Result<String> {
        let v = self.view(view)?;
        let esize = self.prog.params[v.param.index()].dtype.size_in_bytes();
        let toff = self.thread_offset(view, r)?;
        let param = self.params[v.param.index()].clone();
        let addr = self.reg(Class::B64);
        self.ins(format!("add.s64 {addr}, {}, {toff}", site.offset));
        self.ins(format!("mad.lo.s64 {addr}, {addr}, {esize}, {param}"));
        Ok(addr)
    }

    /// Repeat 0's address register and each repeat's byte distance from
    /// it, when those distances are the same for every thread: when every
    /// block-wide run of atoms (`T · A` elements) lies inside one row of the
    /// tile, thread `t`'s atom of repeat `r`, element `r · T · A + t · A`,
    /// sits at the coordinates of `r · T · A` plus `t · A` along the last
    /// axis, so its address is repeat 0's plus a constant that the memory
    /// instructions take as an immediate offset. `None` otherwise (one
    /// address computation per repeat), and where an offset would not fit
    /// the 32-bit immediate.
    fn repeat_bases(&mut self, view: ViewId, v: &View, site: &Site, esize: u32) -> Result<Option<(String, Vec<i64>)>> {
        let l = self.layout(&v.tile);
        let run = self.block.threads as u64 * l.atom as u64;
        let Some(&inner) = v.tile.last() else {
            return Ok(None);
        };
        if l.repeats < 2 || l.partial || inner as u64 % run != 0 {
            return Ok(None);
        }
        let mut shifts = Vec::with_capacity(l.repeats as usize);
        for r in 0..l.repeats as u64 {
            let mut e = r * run;
            let mut elements: i128 = 0;
            for (&ext, &stride) in v.tile.iter().zip(&v.strides).rev() {
                elements += (e % ext as u64) as i128 * stride as i128;
                e /= ext as u64;
            }
            match i32::try_from(elements * esize as i128) {
                Ok(bytes) => shifts.push(bytes as i64),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some((self.address(view, site, 0)?, shifts)))
    }

    /// `a and b` for optional predicates.
    pub(super) fn and(&mut self, a: Option<String>, b: String) -> Option<String> {
        Some(match a {
            None => b,
            Some(a) => {
                let p = self.reg(Class::Pred);
                self.ins(format!("and.pred {p}, {a}, {b}"));
                p
            }
        })
    }

    /// One predicate per atom element of repeat `r`: the slot is in the
    /// tile and, if `masked`, the element in the view's extents, checked
    /// along the innermost axis as `check` says.
    fn masks(&mut self, v: &View, site: &Site, r: u32, masked: bool, check: Check) -> Vec<Option<String>> {
        let l = self.layout(&v.tile);
        let mut common = self.slot_valid(&v.tile, r);
        let (_, cs) = self.coords(&v.tile, r);
        let rank = v.tile.len();
        // The innermost coordinate and whether it is checked above and
        // below, when each atom element is checked on its own.
        let mut last_g = None;
        for (k, c) in cs.iter().enumerate() {
            let (e, t, start) = (v.upper(k), v.tile[k] as u64, v.lower(k));
            let (above, below) = (masked && (e % t != 0 || e < v.extents[k]), masked && start > 0);
            if !above && !below {
                continue;
            }
            let g = self.reg(Class::B64);
            self.ins(format!("cvt.u64.u32 {g}, {c}"));
            self.ins(format!("add.u64 {g}, {g}, {}", site.base[k]));
            if k + 1 == rank && check == Check::Each {
                last_g = Some((g, above, below));
                continue;
            }
            if above {
                let p = self.reg(Class::Pred);
                if k + 1 == rank && check == Check::Last {
                    let bound = e as i64 - (l.atom as i64 - 1);
                    self.ins(format!("setp.lt.s64 {p}, {g}, {bound}"));
                } else {
                    self.ins(format!("setp.lt.u64 {p}, {g}, {e}"));
                }
                common = self.and(common, p);
            }
            if below {
                // Innermost, the atom is aligned to the start (`moves`), so
                // its first element decides for all of it.
                let p = self.reg(Class::Pred);
                self.ins(format!("setp.ge.u64 {p}, {g}, {start}"));
                common = self.and(common, p);
            }
        }
        (0..l.atom)
            .map(|a| match &last_g {
                None => common.clone(),
                Some((g, above, below)) => {
                    let mut m = common.clone();
                    if *above {
                        let p = self.reg(Class::Pred);
                        let bound = v.upper(rank - 1) as i64 - a as i64;
                        self.ins(format!("setp.lt.s64 {p}, {g}, {bound}"));
                        m = self.and(m, p);
                    }
                    if *below {
                        let p = self.reg(Class::Pred);
                        let bound = v.lower(rank - 1) as i64 - a as i64;
                        self.ins(format!("setp.ge.s64 {p}, {g}, {bound}"));
                        m = self.and(m, p);
                    }
                    m
                }
            })
            .collect()
    }

    /// Records the mapping chosen for one access, once per view and kind.
    fn note_mapping(&mut self, kind: &str, view: ViewId, instr: &str) {
        let v = &self.prog.views[view.index()];
        let l = self.layout(&v.tile);
        let line = format!(
            "{kind} {view} tile {:?}: {} threads x {} repeats x atom {} ({instr})",
            v.tile.as_slice(),
            self.block.threads,
            l.repeats,
            l.atom
        );
        if !self.mapping.contains(&line) {
            self.mapping.push(line);
        }
    }

    /// A register holding an L2 cache policy of `priority` (`evict_last`,
    /// `evict_first`, ...) over `fraction` of the lines, for the
    /// `.L2::cache_hint` of loads, stores and copies; `None` where the
    /// target takes no cache policies (before sm_80 or PTX ISA 7.4), and the
    /// tuning settings that ask for them are left out.
    fn l2_policy(&mut self, priority: &str, fraction: f32) -> Option<String> {
        if self.target.sm < 80 || self.target.ptx_version < (7, 4) {
            return None;
        }
        self.need_version((7, 4));
        let policy = self.reg(Class::B64);
        self.ins(format!(
            "createpolicy.fractional.L2::{priority}.b64 {policy}, 0f{:08X}",
            fraction.to_bits()
        ));
        Some(policy)
    }

    /// Loads `dst` from partition `index` of `view`.
    pub fn load(&mut self, dst: ValueId, view: ViewId, index: &PartitionExprs, masked: bool) -> Result<()> {
        let v = self.view(view)?;
        let param = &self.prog.params[v.param.index()];
        let d = param.dtype;
        let pad = if masked {
            if v.padding.needs_float() && !d.is_float() {
                return Err(self.invalid(format!(
                    "padding {} of view {view} needs a float dtype, not {d}",
                    v.padding
                )));
            }
            Some(immediate(Scalar::Float(v.padding.value(), d), d).map_err(|e| self.invalid(e))?)
        } else {
            None
        };
        // Memory the program writes is read in a last point's body through
        // L2 (`.cg`), which is coherent with the other blocks' stores; the
        // non-coherent path is only for memory no block writes.
        let read_only = format!("ld.global.nc{}", self.tuning.load_hints);
        let op = match param.access {
            Access::Read if self.reloads.contains_key(&dst) => "ld.global",
            Access::Read => read_only.as_str(),
            _ if self.in_last_point => "ld.global.cg",
            _ => "ld.global",
        };
        let l = self.layout(&v.tile);
        let moves = self.moves(v, l.atom, masked);
        let esize = d.size_in_bytes() as u32;
        let ce = if moves == Moves::Scalar { 1 } else { chunk_elems(esize, l.atom) };
        let site = self.site(v, index)?;
        let stride = *v.strides.last().unwrap_or(&0);
        let mut regs = Vec::with_capacity(l.slots());
        // Staging: the original load of a reloaded row tile is
        // copied to shared memory by `cp.async`, each thread copying the
        // slots it later reads itself (so no barrier), and it and its
        // reload read the copy.
        let staged_from = self.reloads.get(&dst).copied().filter(|o| self.staged.contains_key(o));
        let stage_here = self.tuning.stage
            && staged_from.is_none()
            && param.access == Access::Read
            && !masked
            && !self.in_last_point
            && ce * esize == 16
            && self.reloads.values().any(|o| *o == dst)
            && self.staged_bytes + l.slots() as u32 * self.block.threads * esize <= STAGE_LIMIT;
        if let Some(orig) = self.reloads.get(&dst).copied() {
            if self.tuning.stage && !self.tuning.reload && staged_from.is_none() {
                // A reload of a tile kept in registers: the same registers.
                let regs = self.val(orig)?;
                self.vals.insert(dst, regs);
                return Ok(());
            }
        }
        if !stage_here && staged_from.is_none() && param.access == Access::Read {
            if let Some(run) = self.run_of(view, v, index, l.atom, moves, masked, false) {
                return self.load_run(dst, view, v, &site, run, masked, pad.as_deref());
            }
        }
        if stage_here {
            let copy = match self.tuning.stage_copy.async_level() {
                Some(level) => format!("cp.async.{level}.shared.global"),
                None => "ld.global.nc and st.shared".to_string(),
            };
            let kind = format!("{copy} 16 B, then ld.shared{}{}", vec_suffix(ce), mem_type(d));
            self.note_mapping("load (staged)", view, &kind);
        } else if staged_from.is_none() {
            let edge = if moves == Moves::Peeled { ", scalar at the edge" } else { "" };
            self.note_mapping("load", view, &format!("{op}{}{}{edge}", vec_suffix(ce), mem_type(d)));
        }
        if stage_here || staged_from.is_some() {
            let name = match staged_from {
                Some(o) => self.staged[&o].clone(),
                None => {
                    let name = format!("tf_stage{}", self.stage_decls.len());
                    let bytes = l.slots() as u32 * self.block.threads * esize;
                    self.stage_decls.push(format!(".shared .align 16 .b8 {name}[{bytes}];"));
                    self.staged_bytes += bytes;
                    self.staged.insert(dst, name.clone());
                    name
                }
            };
            let bases = self.repeat_bases(view, v, &site, esize)?;
            // An L2 evict_last policy for the copies (`CodegenConfig::stage_keep`):
            // the qualifier and the operand it adds to each `cp.async`.
            let policy = match (
                staged_from,
                self.tuning.stage_copy.async_level(),
                self.tuning.stage_keep,
            ) {
                (None, Some(_), Some(fraction)) => self.l2_policy("evict_last", fraction.get()),
                _ => None,
            };
            let (cache_hint, policy_operand) = match policy {
                Some(policy) => (".L2::cache_hint", format!(", {policy}")),
                None => ("", String::new()),
            };
            let mut slots = Vec::new();
            for r in 0..l.repeats {
                let (el, _) = self.coords(&v.tile, r);
                let s_at = self.reg(Class::B32);
                self.ins(format!("mov.u32 {s_at}, {name}"));
                self.ins(format!("mad.lo.u32 {s_at}, {el}, {esize}, {s_at}"));
                let (addr, shift) = match &bases {
                    Some((base, shifts)) => (base.clone(), shifts[r as usize]),
                    None => (self.address(view, &site, r)?, 0),
                };
                for c in 0..l.atom / ce {
                    let byte = shift + (c * ce) as i64 * stride * esize as i64;
                    let s_byte = c * ce * esize;
                    match (staged_from, self.tuning.stage_copy.async_level()) {
                        // Staged by the original load.
                        (Some(_), _) => {}
                        (None, Some(level)) => self.ins(format!(
                            "cp.async.{level}.shared.global{cache_hint} [{s_at}+{s_byte}], {}, 16{policy_operand}",
                            at(&addr, byte)
                        )),
                        (None, None) => {
                            // Through registers: a plain load, then a store
                            // to shared memory (a tuning variant of `cp.async`).
                            let tmp: Vec<String> = (0..ce).map(|_| self.reg(Class::of(d))).collect();
                            self.ins(format!(
                                "ld.global.nc{}{}{} {}, {}",
                                self.tuning.load_hints,
                                vec_suffix(ce),
                                mem_type(d),
                                reg_list(&tmp),
                                at(&addr, byte)
                            ));
                            self.ins(format!(
                                "st.shared{}{} [{s_at}+{s_byte}], {}",
                                vec_suffix(ce),
                                mem_type(d),
                                reg_list(&tmp)
                            ));
                        }
                    }
                    slots.push(format!("[{s_at}+{s_byte}]"));
                }
            }
            if staged_from.is_none() && self.tuning.stage_copy.async_level().is_some() {
                self.need_version((7, 0));
                self.ins("cp.async.commit_group");
                self.ins("cp.async.wait_group 0");
            }
            for s_at in slots {
                let dsts: Vec<String> = (0..ce).map(|_| self.reg(Class::of(d))).collect();
                self.ins(format!(
                    "ld.shared{}{} {}, {s_at}",
                    vec_suffix(ce),
                    mem_type(d),
                    reg_list(&dsts)
                ));
                regs.extend(dsts);
            }
            self.vals.insert(dst, regs);
            return Ok(());
        }
        let bases = self.repeat_bases(view, v, &site, esize)?;
        // An L2 evict_last policy for read-only loads (`CodegenConfig::load_keep`).
        let policy = match self.tuning.load_keep {
            Some(fraction) if op == read_only => self.l2_policy("evict_last", fraction.get()),
            _ => None,
        };
        let hinted = format!("{op}.L2::cache_hint");
        let op = if policy.is_some() { hinted.as_str() } else { op };
        for r in 0..l.repeats {
            let (addr, shift) = match &bases {
                Some((base, shifts)) => (base.clone(), shifts[r as usize]),
                None => (self.address(view, &site, r)?, 0),
            };
            // The address of the atom's element `a`, with the cache policy.
            let at_element = |a: u32| {
                let at = at(&addr, shift + a as i64 * stride * esize as i64);
                match &policy {
                    Some(policy) => format!("{at}, {policy}"),
                    None => at,
                }
            };
            let dsts: Vec<String> = (0..l.atom).map(|_| self.reg(Class::of(d))).collect();
            let (masks, edge) = self.repeat_masks(moves, v, &site, r, masked);
            for c in 0..l.atom / ce {
                let (first, chunk) = ((c * ce) as usize, ce as usize);
                let at = at_element(c * ce);
                self.load_chunk(op, d, &masks[first], &at, &dsts[first..first + chunk], pad.as_deref());
            }
            if let Some(edge) = edge {
                let each = self.enter_edge(&edge, v, &site, r, masked);
                for (a, (dst, p)) in dsts.iter().zip(&each).enumerate() {
                    self.load_chunk(op, d, p, &at_element(a as u32), std::slice::from_ref(dst), pad.as_deref());
                }
                self.place_label(&edge.done);
            }
            regs.extend(dsts);
        }
        self.vals.insert(dst, regs);
        Ok(())
    }

    /// The masks of repeat `r`'s atom elements for an access that moves as
    /// `moves`, and for a [`Moves::Peeled`] one the edge it branches to
    /// unless the whole atom is in bounds (then the vector accesses that
    /// follow need no masks). `None` for any other access, or where the
    /// atom is always in bounds.
    fn repeat_masks(
        &mut self,
        moves: Moves,
        v: &View,
        site: &Site,
        r: u32,
        masked: bool,
    ) -> (Vec<Option<String>>, Option<Edge>) {
        if moves == Moves::Peeled {
            if let Some(whole) = self.masks(v, site, r, masked, Check::Last).swap_remove(0) {
                let edge = Edge {
                    start: self.label(),
                    done: self.label(),
                };
                self.ins(format!("@!{whole} bra {}", edge.start));
                return (vec![None; self.layout(&v.tile).atom as usize], Some(edge));
            }
        }
        let check = if moves == Moves::Vector { Check::First } else { Check::Each };
        (self.masks(v, site, r, masked, check), None)
    }

    /// Ends the vector path of a peeled access and starts its edge: the
    /// masks of each element, for the scalar accesses the caller writes
    /// before placing `edge.done`.
    fn enter_edge(&mut self, edge: &Edge, v: &View, site: &Site, r: u32, masked: bool) -> Vec<Option<String>> {
        self.ins(format!("bra {}", edge.done));
        self.place_label(&edge.start);
        self.masks(v, site, r, masked, Check::Each)
    }

    /// One memory instruction loading `dsts.len()` consecutive elements.
    fn load_chunk(&mut self, op: &str, d: DType, p: &Option<String>, at: &str, dsts: &[String], pad: Option<&str>) {
        let n = dsts.len() as u32;
        let g = guard(p);
        match d {
            DType::Bool | DType::U8 => {
                let tmps: Vec<String> = (0..n).map(|_| self.reg(Class::B32)).collect();
                for t in &tmps {
                    self.ins(format!("mov.u32 {t}, 0"));
                }
                self.ins(format!("{g}{op}{}.u8 {}, {at}", vec_suffix(n), reg_list(&tmps)));
                for (t, dst) in tmps.iter().zip(dsts) {
                    if d == DType::Bool {
                        self.ins(format!("setp.ne.u32 {dst}, {t}, 0"));
                    } else {
                        self.ins(format!("mov.u32 {dst}, {t}"));
                    }
                }
            }
            DType::F16 | DType::BF16 if n > 1 => {
                let words: Vec<String> = (0..n / 2).map(|_| self.reg(Class::B32)).collect();
                if let Some(pad) = pad {
                    let bits = u32::from_str_radix(pad.trim_start_matches("0x"), 16).unwrap_or(0);
                    for w in &words {
                        self.ins(format!("mov.b32 {w}, {}", bits | bits << 16));
                    }
                }
                self.ins(format!("{g}{op}{}.b32 {}, {at}", vec_suffix(n / 2), reg_list(&words)));
                for (w, pair) in words.iter().zip(dsts.chunks(2)) {
                    self.ins(format!("mov.b32 {{{}, {}}}, {w}", pair[0], pair[1]));
                }
            }
            _ => {
                if let Some(pad) = pad {
                    for dst in dsts {
                        self.ins(mov_imm(d, dst, pad));
                    }
                }
                self.ins(format!(
                    "{g}{op}{}{} {}, {at}",
                    vec_suffix(n),
                    mem_type(d),
                    reg_list(dsts)
                ));
            }
        }
    }

    /// Stores `src` to partition `index` of `view`.
    pub fn store(&mut self, view: ViewId, index: &PartitionExprs, src: ValueId, masked: bool) -> Result<()> {
        let v = self.view(view)?;
        let d = self.prog.params[v.param.index()].dtype;
        let regs = self.val(src)?;
        let l = self.layout(&v.tile);
        let moves = self.moves(v, l.atom, masked);
        let esize = d.size_in_bytes() as u32;
        let ce = if moves == Moves::Scalar { 1 } else { chunk_elems(esize, l.atom) };
        if let Some(run) = self.run_of(view, v, index, l.atom, moves, masked, true) {
            let site = self.site(v, index)?;
            return self.store_run(view, v, &site, run, masked, &regs);
        }
        let edge = if moves == Moves::Peeled { ", scalar at the edge" } else { "" };
        self.note_mapping("store", view, &format!("st.global{}{}{edge}", vec_suffix(ce), mem_type(d)));
        let site = self.site(v, index)?;
        let stride = *v.strides.last().unwrap_or(&0);
        let bases = self.repeat_bases(view, v, &site, esize)?;
        for r in 0..l.repeats {
            let (addr, shift) = match &bases {
                Some((base, shifts)) => (base.clone(), shifts[r as usize]),
                None => (self.address(view, &site, r)?, 0),
            };
            let at_element = |a: u32| at(&addr, shift + a as i64 * stride * esize as i64);
            let srcs = &regs[(r * l.atom) as usize..((r + 1) * l.atom) as usize];
            let (masks, edge) = self.repeat_masks(moves, v, &site, r, masked);
            for c in 0..l.atom / ce {
                let (first, chunk) = ((c * ce) as usize, ce as usize);
                self.store_chunk("global", d, &masks[first], &at_element(c * ce), &srcs[first..first + chunk]);
            }
            if let Some(edge) = edge {
                let each = self.enter_edge(&edge, v, &site, r, masked);
                for (a, p) in each.iter().enumerate() {
                    self.store_chunk("global", d, p, &at_element(a as u32), &srcs[a..a + 1]);
                }
                self.place_label(&edge.done);
            }
        }
        Ok(())
    }

    /// One memory instruction storing `srcs.len()` consecutive elements to
    /// state space `space` (`global` or `shared`).
    fn store_chunk(&mut self, space: &str, d: DType, p: &Option<String>, at: &str, srcs: &[String]) {
        let n = srcs.len() as u32;
        let g = guard(p);
        match d {
            DType::Bool => {
                let tmps: Vec<String> = srcs
                    .iter()
                    .map(|s| {
                        let t = self.reg(Class::B32);
                        self.ins(format!("selp.u32 {t}, 1, 0, {s}"));
                        t
                    })
                    .collect();
                self.ins(format!("{g}st.{space}{}.u8 {at}, {}", vec_suffix(n), reg_list(&tmps)));
            }
            DType::F16 | DType::BF16 if n > 1 => {
                let words: Vec<String> = srcs
                    .chunks(2)
                    .map(|pair| {
                        let w = self.reg(Class::B32);
                        self.ins(format!("mov.b32 {w}, {{{}, {}}}", pair[0], pair[1]));
                        w
                    })
                    .collect();
                self.ins(format!(
                    "{g}st.{space}{}.b32 {at}, {}",
                    vec_suffix(n / 2),
                    reg_list(&words)
                ));
            }
            _ => self.ins(format!(
                "{g}st.{space}{}{} {at}, {}",
                vec_suffix(n),
                mem_type(d),
                reg_list(srcs)
            )),
        }
    }

    /// An indirect load ([`Inst::Gather`](crate::kernels::ir::Inst::Gather)),
    /// element by element: each element's position is widened to 64 bits
    /// and compared unsigned with `bound` (a negative one is out of range
    /// too); in-bounds elements in range load through the view's address
    /// moved by `position * stride`, the others keep the padding, and an
    /// in-bounds element out of range stores 1 to the flag.
    #[allow(clippy::too_many_arguments)]
    pub fn gather(
        &mut self,
        dst: ValueId,
        view: ViewId,
        index: &PartitionExprs,
        positions: ValueId,
        stride: i64,
        bound: u64,
        flag: Option<ParamId>,
    ) -> Result<()> {
        let v = self.view(view)?;
        let d = self.prog.params[v.param.index()].dtype;
        let pad = immediate(Scalar::Float(v.padding.value(), d), d).map_err(|e| self.invalid(e))?;
        let pos_dtype = self.prog.values[positions.index()].dtype;
        let pos = self.val(positions)?;
        let op = match self.prog.params[v.param.index()].access {
            Access::Read => "ld.global.nc",
            _ if self.in_last_point => "ld.global.cg",
            _ => "ld.global",
        };
        self.note_mapping("gather", view, &format!("{op}{} scalar", mem_type(d)));
        let esize = d.size_in_bytes() as i64;
        let inner = *v.strides.last().unwrap_or(&0);
        let l = self.layout(&v.tile);
        let site = self.site(v, index)?;
        let flag = flag.map(|f| self.params[f.index()].clone());
        let one = self.reg(Class::B32);
        if flag.is_some() {
            self.ins(format!("mov.u32 {one}, 1"));
        }
        let mut regs = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let addr = self.address(view, &site, r)?;
            let masks = self.masks(v, &site, r, true, Check::Each);
            for (a, inside) in masks.into_iter().enumerate() {
                let p = &pos[r as usize * l.atom as usize + a];
                let wide = self.wide_position(p, pos_dtype, "gather")?;
                let ok = self.reg(Class::Pred);
                self.ins(format!("setp.lt.u64 {ok}, {wide}, {bound}"));
                let take = self.and(inside.clone(), ok.clone());
                if let Some(flag) = &flag {
                    let bad = self.reg(Class::Pred);
                    match &inside {
                        Some(m) => self.ins(format!("and.pred {bad}, !{ok}, {m}")),
                        None => self.ins(format!("not.pred {bad}, {ok}")),
                    }
                    self.ins(format!("@{bad} st.global.b32 [{flag}], {one}"));
                }
                let moved = self.reg(Class::B64);
                self.ins(format!("mad.lo.s64 {moved}, {wide}, {}, {addr}", stride * esize));
                let out = self.reg(Class::of(d));
                self.load_chunk(op, d, &take, &at(&moved, a as i64 * inner * esize), std::slice::from_ref(&out), Some(&pad));
                regs.push(out);
            }
        }
        self.vals.insert(dst, regs);
        Ok(())
    }

    /// `dst = which elements of partition `index` of `view` are in bounds`.
    pub fn in_bounds(&mut self, dst: ValueId, view: ViewId, index: &PartitionExprs) -> Result<()> {
        let v = self.view(view)?;
        let l = self.layout(&v.tile);
        let site = self.site(v, index)?;
        let mut regs = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            for m in self.masks(v, &site, r, true, Check::Each) {
                let p = self.reg(Class::Pred);
                match m {
                    Some(m) => self.ins(format!("mov.pred {p}, {m}")),
                    None => self.ins(format!("mov.pred {p}, 1")),
                }
                regs.push(p);
            }
        }
        self.vals.insert(dst, regs);
        Ok(())
    }

    /// `dst[j] = index · tile[axis] + j[axis]` as i64.
    pub fn iota(&mut self, dst: ValueId, axis: u8, index: &IndexExpr) -> Result<()> {
        let shape = self.ty(dst)?.shape.clone();
        let axis = axis as usize;
        let Some(&t) = shape.get(axis) else {
            return Err(self.invalid(format!(
                "iota axis {axis} is out of range for shape {:?}",
                shape.as_slice()
            )));
        };
        let l = self.layout(&shape);
        let i = self.index(index)?;
        if self.ty(dst)?.dtype == DType::I32 {
            // The low 32 bits of the same values.
            let base = self.reg(Class::B32);
            self.ins(format!("cvt.u32.u64 {base}, {i}"));
            self.ins(format!("mul.lo.u32 {base}, {base}, {t}"));
            let mut regs = Vec::with_capacity(l.slots());
            for r in 0..l.repeats {
                let (_, cs) = self.coords(&shape, r);
                for a in 0..l.atom {
                    let x = self.reg(Class::B32);
                    let extra = if axis + 1 == shape.len() { a } else { 0 };
                    self.ins(format!("add.u32 {x}, {}, {base}", cs[axis]));
                    if extra > 0 {
                        self.ins(format!("add.u32 {x}, {x}, {extra}"));
                    }
                    regs.push(x);
                }
            }
            self.vals.insert(dst, regs);
            return Ok(());
        }
        let base = self.reg(Class::B64);
        self.ins(format!("mul.lo.u64 {base}, {i}, {t}"));
        let mut regs = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let (_, cs) = self.coords(&shape, r);
            for a in 0..l.atom {
                let x = self.reg(Class::B64);
                self.ins(format!("cvt.u64.u32 {x}, {}", cs[axis]));
                let extra = if axis + 1 == shape.len() { a } else { 0 };
                self.ins(format!("add.u64 {x}, {x}, {base}"));
                if extra > 0 {
                    self.ins(format!("add.u64 {x}, {x}, {extra}"));
                }
                regs.push(x);
            }
        }
        self.vals.insert(dst, regs);
        Ok(())
    }

    /// A relaxed atomic update of each element of a partition.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        view: ViewId,
        index: &PartitionExprs,
        src: ValueId,
        masked: bool,
        scope: ThreadScope,
    ) -> Result<()> {
        let v = self.view(view)?;
        let d = self.prog.params[v.param.index()].dtype;
        let regs = self.val(src)?;
        let scope = match scope {
            ThreadScope::Block => "cta",
            ThreadScope::Device => "gpu",
            ThreadScope::System => "sys",
        };
        let unsupported = |reason: &'static str| Error::UnsupportedDType {
            op: "ptx_gen atomic",
            dtype: d,
            reason,
        };
        if matches!(d, DType::Bool | DType::U8) {
            return Err(unsupported("atomics need 16-, 32- or 64-bit elements"));
        }
        if d.is_float() && matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) {
            return Err(unsupported("bitwise atomics need integer elements"));
        }
        if matches!(d, DType::F16 | DType::BF16) && matches!(op, AtomicOp::Max | AtomicOp::Min) {
            return Err(unsupported("atomic max/min of 16-bit floats is not supported"));
        }
        if d == DType::BF16 {
            if self.target.sm < 90 {
                return Err(unsupported("atomic add of bf16 needs sm_90 (red.add.noftz.bf16)"));
            }
            self.need_version((7, 8));
        }
        let esize = d.size_in_bytes() as i64;
        let stride = *v.strides.last().unwrap_or(&0);
        let l = self.layout(&v.tile);
        self.note_mapping("atomic", view, &format!("red.relaxed.{scope}.global {op:?} scalar"));
        let site = self.site(v, index)?;
        for r in 0..l.repeats {
            let addr = self.address(view, &site, r)?;
            let masks = self.masks(v, &site, r, masked, Check::Each);
            for a in 0..l.atom {
                let val = regs[(r * l.atom + a) as usize].clone();
                let at = format!("[{addr}+{}]", a as i64 * stride * esize);
                let red = format!("red.relaxed.{scope}.global");
                self.atomic_one(op, d, &red, &masks[a as usize], &at, &val);
            }
        }
        Ok(())
    }

    fn atomic_one(&mut self, op: AtomicOp, d: DType, red: &str, p: &Option<String>, at: &str, val: &str) {
        let g = guard(p);
        let bits = matches!(d, DType::I64 | DType::F64);
        let (s, u, b) = if bits {
            ("s64", "u64", "b64")
        } else {
            ("s32", "u32", "b32")
        };
        let val = if op == AtomicOp::Sub {
            super::ops::negate(self, d, val)
        } else {
            val.to_string()
        };
        match (op, d) {
            (AtomicOp::Add | AtomicOp::Sub, DType::F16) => self.ins(format!("{g}{red}.add.noftz.f16 {at}, {val}")),
            (AtomicOp::Add | AtomicOp::Sub, DType::BF16) => self.ins(format!("{g}{red}.add.noftz.bf16 {at}, {val}")),
            (AtomicOp::Add | AtomicOp::Sub, DType::F32) => self.ins(format!("{g}{red}.add.f32 {at}, {val}")),
            (AtomicOp::Add | AtomicOp::Sub, DType::F64) => self.ins(format!("{g}{red}.add.f64 {at}, {val}")),
            (AtomicOp::Add | AtomicOp::Sub, _) => self.ins(format!("{g}{red}.add.{u} {at}, {val}")),
            (AtomicOp::And, _) => self.ins(format!("{g}{red}.and.{b} {at}, {val}")),
            (AtomicOp::Or, _) => self.ins(format!("{g}{red}.or.{b} {at}, {val}")),
            (AtomicOp::Xor, _) => self.ins(format!("{g}{red}.xor.{b} {at}, {val}")),
            (AtomicOp::Max | AtomicOp::Min, DType::F32 | DType::F64) => {
                // Floats with the sign bit clear order like signed integers;
                // with it set, in reverse like unsigned ones. NaN becomes the
                // bit pattern that wins the chosen comparison.
                let max = op == AtomicOp::Max;
                let r = self.reg(if bits { Class::B64 } else { Class::B32 });
                let nan = self.reg(Class::Pred);
                let neg = self.reg(Class::Pred);
                let ty = if bits { "f64" } else { "f32" };
                let canon = match (bits, max) {
                    (false, true) => "0x7FFFFFFF",
                    (false, false) => "0xFFFFFFFF",
                    (true, true) => "0x7FFFFFFFFFFFFFFF",
                    (true, false) => "0xFFFFFFFFFFFFFFFF",
                };
                self.ins(format!("mov.{b} {r}, {val}"));
                self.ins(format!("setp.nan.{ty} {nan}, {val}, {val}"));
                self.ins(format!("selp.{b} {r}, {canon}, {r}, {nan}"));
                self.ins(format!("setp.lt.{s} {neg}, {r}, 0"));
                let (pos_op, neg_op) = if max { ("max", "min") } else { ("min", "max") };
                let (pp, pn) = (self.reg(Class::Pred), self.reg(Class::Pred));
                match p {
                    Some(m) => {
                        self.ins(format!("and.pred {pp}, {m}, !{neg}"));
                        self.ins(format!("and.pred {pn}, {m}, {neg}"));
                    }
                    None => {
                        self.ins(format!("not.pred {pp}, {neg}"));
                        self.ins(format!("mov.pred {pn}, {neg}"));
                    }
                }
                self.ins(format!("@{pp} {red}.{pos_op}.{s} {at}, {r}"));
                self.ins(format!("@{pn} {red}.{neg_op}.{u} {at}, {r}"));
            }
            (AtomicOp::Max, _) => self.ins(format!(
                "{g}{red}.max.{} {at}, {val}",
                if d == DType::U32 { u } else { s }
            )),
            (AtomicOp::Min, _) => self.ins(format!(
                "{g}{red}.min.{} {at}, {val}",
                if d == DType::U32 { u } else { s }
            )),
        }
    }
}

/// Tiles moved as runs (see [`Run`]).
impl Emitter<'_> {
    /// The run an access of partition `index` of `v` moves as, where it
    /// would otherwise be one scalar access per element of atoms wider
    /// than one (`moves` is [`Moves::Scalar`]): `None` elsewhere, in a last
    /// point's body, for loads before sm_80 (no `cp.async`), and where the
    /// shared arrays would pass `STAGE_LIMIT`.
    #[allow(clippy::too_many_arguments)]
    fn run_of(
        &self,
        view: ViewId,
        v: &View,
        index: &PartitionExprs,
        atom: u32,
        moves: Moves,
        masked: bool,
        store: bool,
    ) -> Option<Run> {
        let wanted = match self.tuning.stage_runs {
            RunStaging::Off => false,
            RunStaging::OutsideLoops => !self.in_loop(),
            RunStaging::Everywhere => true,
        };
        if !wanted || self.in_last_point || moves != Moves::Scalar || atom < 2 {
            return None;
        }
        if !store && (self.target.sm < 80 || self.target.ptx_version < (7, 0)) {
            return None;
        }
        let rank = v.tile.len();
        if rank == 0 || v.is_window() || index.len() != rank || v.strides[rank - 1] != 1 {
            return None;
        }
        // The run's axis: the first the tile is wider than one along.
        let axis = v.tile.iter().position(|&t| t > 1).unwrap_or(rank - 1);
        // Dense and row-major from it in: each axis's stride is the next
        // one's times its extent.
        for k in axis..rank - 1 {
            let next = v.strides[k + 1].checked_mul(i64::try_from(v.extents[k + 1]).ok()?)?;
            if v.strides[k] != next {
                return None;
            }
        }
        // One tile covers every axis past it, at partition 0.
        for k in axis + 1..rank {
            let x = &index[k];
            if (v.tile[k] as u64) < v.extents[k] || x.constant != 0 || x.grid.is_some() || x.loop_var.is_some() {
                return None;
            }
        }
        let esize = self.prog.params[v.param.index()].dtype.size_in_bytes() as i128;
        if esize > self.tuning.run_element_bytes as i128 {
            return None;
        }
        let row = u64::try_from(v.strides[axis]).ok()?;
        let bytes = (v.tile[axis] as u64).checked_mul(row)?.checked_mul(esize as u64)?;
        if bytes > RUN_LIMIT as u64 {
            return None;
        }
        let aligned = bytes % 16 == 0
            && (v.origin() * esize) % 16 == 0
            && v.strides[..axis].iter().all(|&s| (s as i128 * esize) % 16 == 0);
        if store && !aligned {
            return None;
        }
        let run = Run {
            axis,
            rows: v.tile[axis],
            row,
            bytes: bytes as u32,
            ragged: masked && v.extents[axis] % v.tile[axis] as u64 != 0,
            aligned,
        };
        let known = self.runs.contains_key(&(view, store));
        let room = self.staged_bytes + self.run_bytes + run.array_bytes() <= STAGE_LIMIT;
        (known || room).then_some(run)
    }

    /// The shared array of `view`'s run for loads or for stores, and
    /// whether an earlier access wrote or read it (then a barrier keeps
    /// the new writes behind that access's readers).
    fn run_array(&mut self, view: ViewId, store: bool, run: Run) -> (String, bool) {
        if let Some((name, used)) = self.runs.get_mut(&(view, store)) {
            let was = std::mem::replace(used, true);
            return (name.clone(), was);
        }
        let name = format!("tf_run{}", self.runs.len());
        self.stage_decls.push(format!(".shared .align 16 .b8 {name}[{}];", run.array_bytes()));
        self.run_bytes += run.array_bytes();
        self.runs.insert((view, store), (name.clone(), true));
        (name, false)
    }

    /// The bytes of this partition's run (a `u32` register) where a tile
    /// may be short, `None` where every run is whole. A partition past the
    /// end has none.
    fn run_valid_bytes(&mut self, v: &View, site: &Site, run: Run) -> Option<String> {
        if !run.ragged {
            return None;
        }
        let esize = self.prog.params[v.param.index()].dtype.size_in_bytes() as u64;
        let extent = v.extents[run.axis];
        let n = self.reg(Class::B32);
        if let Ok(first) = site.base[run.axis].parse::<u64>() {
            let rows = extent.saturating_sub(first).min(run.rows as u64);
            self.ins(format!("mov.u32 {n}, {}", rows * run.row * esize));
            return Some(n);
        }
        let (first, left) = (self.reg(Class::B64), self.reg(Class::B64));
        self.ins(format!("min.u64 {first}, {}, {extent}", site.base[run.axis]));
        self.ins(format!("mov.u64 {left}, {extent}"));
        self.ins(format!("sub.u64 {left}, {left}, {first}"));
        self.ins(format!("min.u64 {left}, {left}, {}", run.rows));
        self.ins(format!("mul.lo.u64 {left}, {left}, {}", run.row * esize));
        self.ins(format!("cvt.u32.u64 {n}, {left}"));
        Some(n)
    }

    /// This thread's first 16-byte piece of a run: its byte in the run (a
    /// `u32` register), its shared address and its global address; for an
    /// unaligned run, bytes count from the 16 bytes below its start, and
    /// the fourth value is the run's first byte there (`lead`).
    fn run_piece(&mut self, name: &str, v: &View, site: &Site, run: Run) -> (String, String, String, Option<String>) {
        let esize = self.prog.params[v.param.index()].dtype.size_in_bytes();
        let tid = self.tid.clone();
        let (byte, shared) = self.prologue(|e| {
            let (byte, shared) = (e.reg(Class::B32), e.reg(Class::B32));
            e.ins(format!("shl.b32 {byte}, {tid}, 4"));
            e.ins(format!("mov.u32 {shared}, {name}"));
            e.ins(format!("add.u32 {shared}, {shared}, {byte}"));
            (byte, shared)
        });
        let param = self.params[v.param.index()].clone();
        let (global, wide) = (self.reg(Class::B64), self.reg(Class::B64));
        let lead = if run.aligned {
            self.ins(format!("mad.lo.s64 {global}, {}, {esize}, {param}", site.offset));
            None
        } else {
            // Parameter bases are 16-byte aligned: the start's distance
            // from the grid is that of its byte offset.
            let (offset, low, lead) = (self.reg(Class::B64), self.reg(Class::B64), self.reg(Class::B32));
            self.ins(format!("mul.lo.s64 {offset}, {}, {esize}", site.offset));
            self.ins(format!("and.b64 {low}, {offset}, 15"));
            self.ins(format!("sub.s64 {offset}, {offset}, {low}"));
            self.ins(format!("add.s64 {global}, {param}, {offset}"));
            self.ins(format!("cvt.u32.u64 {lead}, {low}"));
            Some(lead)
        };
        self.ins(format!("cvt.u64.u32 {wide}, {byte}"));
        self.ins(format!("add.s64 {global}, {global}, {wide}"));
        (byte, shared, global, lead)
    }

    /// The shared address of repeat `r`'s first atom element in a run
    /// array (a `u32` register, the same for every partition).
    fn run_slot(&mut self, name: &str, v: &View, r: u32) -> String {
        let esize = self.prog.params[v.param.index()].dtype.size_in_bytes() as i64;
        let (_, cs) = self.coords(&v.tile, r);
        let strides = v.strides.clone();
        self.prologue(|e| {
            let at = e.reg(Class::B32);
            e.ins(format!("mov.u32 {at}, {name}"));
            for (c, s) in cs.iter().zip(&strides) {
                if c != "0" {
                    e.ins(format!("mad.lo.u32 {at}, {c}, {}, {at}", s * esize));
                }
            }
            at
        })
    }

    /// Whether piece `j` of each thread is in a whole run: a predicate, or
    /// `None` when it always is.
    fn run_piece_whole(&mut self, byte: &str, run: Run, j: u32) -> Option<String> {
        let (threads, pieces) = (self.block.threads, run.bytes / 16);
        if (j + 1) * threads <= pieces {
            return None;
        }
        let p = self.reg(Class::Pred);
        self.ins(format!("setp.lt.u32 {p}, {byte}, {}", run.bytes - j * threads * 16));
        Some(p)
    }

    /// Loads `dst` from a tile moved as a run: `cp.async` copies the run to
    /// shared memory in 16-byte pieces (a piece the run ends inside copies
    /// its bytes and zero-fills the rest; an unaligned run is copied from
    /// the 16 bytes below its start), then each thread reads its elements.
    #[allow(clippy::too_many_arguments)]
    fn load_run(
        &mut self,
        dst: ValueId,
        view: ViewId,
        v: &View,
        site: &Site,
        run: Run,
        masked: bool,
        pad: Option<&str>,
    ) -> Result<()> {
        let d = self.prog.params[v.param.index()].dtype;
        let esize = d.size_in_bytes() as u32;
        self.need_version((7, 0));
        let kind = format!(
            "cp.async.cg 16 B pieces of a{} {}-byte run, then ld.shared{}",
            if run.aligned { "" } else { "n unaligned" },
            run.bytes,
            mem_type(d)
        );
        self.note_mapping("load (run)", view, &kind);
        let (name, used) = self.run_array(view, false, run);
        if used || self.in_loop() {
            self.ins("bar.sync 0");
        }
        let valid = self.run_valid_bytes(v, site, run);
        let (byte, shared, global, lead) = self.run_piece(&name, v, site, run);
        // The bytes to copy, where they are not every piece's 16.
        let end = match (&lead, valid) {
            (None, valid) => valid,
            (Some(lead), valid) => {
                let end = self.reg(Class::B32);
                let n = valid.unwrap_or_else(|| run.bytes.to_string());
                self.ins(format!("add.u32 {end}, {lead}, {n}"));
                Some(end)
            }
        };
        for j in 0..(run.array_bytes() / 16).div_ceil(self.block.threads) {
            let off = j * self.block.threads * 16;
            let (p, size) = match &end {
                Some(n) => {
                    let (at, p, size) = (self.reg(Class::B32), self.reg(Class::Pred), self.reg(Class::B32));
                    self.ins(format!("add.u32 {at}, {byte}, {off}"));
                    self.ins(format!("setp.lt.u32 {p}, {at}, {n}"));
                    self.ins(format!("sub.u32 {size}, {n}, {at}"));
                    self.ins(format!("min.u32 {size}, {size}, 16"));
                    (Some(p), format!(", {size}"))
                }
                None => (self.run_piece_whole(&byte, run, j), String::new()),
            };
            self.ins(format!(
                "{}cp.async.cg.shared.global [{shared}+{off}], [{global}+{off}], 16{size}",
                guard(&p)
            ));
        }
        self.ins("cp.async.commit_group");
        self.ins("cp.async.wait_group 0");
        self.ins("bar.sync 0");
        let l = self.layout(&v.tile);
        let mut regs = Vec::with_capacity(l.slots());
        for r in 0..l.repeats {
            let mut at = self.run_slot(&name, v, r);
            if let Some(lead) = &lead {
                let moved = self.reg(Class::B32);
                self.ins(format!("add.u32 {moved}, {at}, {lead}"));
                at = moved;
            }
            let masks = self.masks(v, site, r, masked, Check::Each);
            for (a, p) in masks.iter().enumerate() {
                let reg = self.reg(Class::of(d));
                let slot = format!("[{at}+{}]", a as u32 * esize);
                self.load_chunk("ld.shared", d, p, &slot, std::slice::from_ref(&reg), pad);
                regs.push(reg);
            }
        }
        self.vals.insert(dst, regs);
        Ok(())
    }

    /// Stores `regs` to a tile moved as a run: each thread writes its
    /// elements to shared memory, then the block copies the run out in
    /// 16-byte pieces (the last piece of a short run element by element).
    fn store_run(&mut self, view: ViewId, v: &View, site: &Site, run: Run, masked: bool, regs: &[String]) -> Result<()> {
        let d = self.prog.params[v.param.index()].dtype;
        let esize = d.size_in_bytes() as u32;
        let kind = format!("st.shared{}, then 16 B pieces of a {}-byte run", mem_type(d), run.bytes);
        self.note_mapping("store (run)", view, &kind);
        let (name, used) = self.run_array(view, true, run);
        if used || self.in_loop() {
            self.ins("bar.sync 0");
        }
        let l = self.layout(&v.tile);
        for r in 0..l.repeats {
            let at = self.run_slot(&name, v, r);
            let masks = self.masks(v, site, r, masked, Check::Each);
            for (a, p) in masks.iter().enumerate() {
                let src = &regs[(r * l.atom) as usize + a..][..1];
                self.store_chunk("shared", d, p, &format!("[{at}+{}]", a as u32 * esize), src);
            }
        }
        self.ins("bar.sync 0");
        let valid = self.run_valid_bytes(v, site, run);
        let (byte, shared, global, _) = self.run_piece(&name, v, site, run);
        let (raw, class) = match esize {
            1 => (".u8", Class::B32),
            2 => (".b16", Class::B16),
            4 => (".b32", Class::B32),
            _ => (".b64", Class::B64),
        };
        for j in 0..(run.bytes / 16).div_ceil(self.block.threads) {
            let off = j * self.block.threads * 16;
            let words: Vec<String> = (0..4).map(|_| self.reg(Class::B32)).collect();
            let p = match &valid {
                Some(n) => {
                    let (at, end, p) = (self.reg(Class::B32), self.reg(Class::B32), self.reg(Class::Pred));
                    self.ins(format!("add.u32 {at}, {byte}, {off}"));
                    self.ins(format!("add.u32 {end}, {at}, 16"));
                    self.ins(format!("setp.le.u32 {p}, {end}, {n}"));
                    // A piece the run ends inside: element by element.
                    let (skip, some) = (self.label(), self.reg(Class::Pred));
                    self.ins(format!("@{p} bra {skip}"));
                    self.ins(format!("setp.lt.u32 {some}, {at}, {n}"));
                    self.ins(format!("@!{some} bra {skip}"));
                    for e in 0..16 / esize {
                        let (q, x, el) = (self.reg(Class::Pred), self.reg(class), self.reg(Class::B32));
                        self.ins(format!("add.u32 {el}, {at}, {}", e * esize));
                        self.ins(format!("setp.lt.u32 {q}, {el}, {n}"));
                        let byte = off + e * esize;
                        self.ins(format!("@{q} ld.shared{raw} {x}, [{shared}+{byte}]"));
                        self.ins(format!("@{q} st.global{raw} [{global}+{byte}], {x}"));
                    }
                    self.place_label(&skip);
                    Some(p)
                }
                None => self.run_piece_whole(&byte, run, j),
            };
            let g = guard(&p);
            let list = reg_list(&words);
            self.ins(format!("{g}ld.shared.v4.b32 {list}, [{shared}+{off}]"));
            self.ins(format!("{g}st.global.v4.b32 [{global}+{off}], {list}"));
        }
        Ok(())
    }
}

/// The operand `[addr+byte]` (`[addr-|byte|]` for a negative offset).
fn at(addr: &str, byte: i64) -> String {
    if byte < 0 {
        format!("[{addr}-{}]", byte.unsigned_abs())
    } else {
        format!("[{addr}+{byte}]")
    }
}
