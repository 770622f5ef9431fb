//! A CPU model of the interpreter, for tests: runs assembled [`Code`] over
//! the forms it knows (integer and exact float arithmetic, comparisons,
//! selection, integer conversions, global and shared loads and stores,
//! `cp.async` copies, the ticket atomic, butterfly shuffles, barriers) and
//! reports the first form it does not. It checks
//! the assembler (slots, live ranges, words, constants, guards, branches)
//! against the CPU executor without a GPU; the instructions' own semantics
//! are the GPU's business and the GPU tests'.

use super::kernel::{parse_form, Spec};
use super::{forms, Code, ARGS, CONST_FLAG, INST_WORDS};

/// Global memory: the buffer of parameter `i` lives at `(i + 1) << 32`.
pub struct Memory(pub Vec<Vec<u8>>);

impl Memory {
    fn at(&mut self, addr: u64, len: usize) -> &mut [u8] {
        let buf = &mut self.0[(addr >> 32) as usize - 1];
        let off = (addr & 0xffff_ffff) as usize;
        &mut buf[off..off + len]
    }

    /// The address of parameter `i`'s buffer.
    pub fn address(i: usize) -> u64 {
        (i as u64 + 1) << 32
    }
}

fn bytes_of(w: &str) -> usize {
    match w {
        "64" => 8,
        "16" => 2,
        _ => 4,
    }
}

/// The type suffix at the end of `op` (`f32`, `u64`, ...).
fn last_type(op: &str) -> &str {
    op.rsplit('.').next().unwrap_or_default()
}

fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn f64_of(v: u64) -> f64 {
    f64::from_bits(v)
}

fn sext(v: u64, bits: u32) -> i64 {
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

/// Where a thread stands between steps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    /// At a shuffle: the instruction's index.
    Shuffle(usize),
    /// At a barrier (past it once released).
    Barrier,
    Done,
}

/// Runs `code` on a grid of `blocks` blocks (x only), or returns the first
/// form it does not model. A block's threads run one at a time up to a
/// shuffle (resolved when its warp's live lanes all reach one) or a barrier
/// (released when every live thread of the block reaches one).
///
/// # Errors
/// The first form it does not model, or threads that wait for each other
/// for ever, or a run of more than 10^8 steps.
///
/// # Panics
/// On an access outside a parameter's buffer (the code's, not the model's,
/// fault; a test should fail loudly).
pub fn run(code: &Code, blocks: u32, mem: &mut Memory) -> Result<(), String> {
    run_with_scalars(code, blocks, mem, &[])
}

/// [`run`] of a kernel with scalar arguments: `scalars` holds their launch
/// words ([`Scalar::element_bits`](crate::dtype::Scalar::element_bits)),
/// which follow the buffers' addresses among the kernel's parameters.
pub fn run_with_scalars(code: &Code, blocks: u32, mem: &mut Memory, scalars: &[u64]) -> Result<(), String> {
    let words = &code.words;
    let (args_off, consts_off, nconst, consts_at) = (
        words[1] as usize,
        words[2] as usize,
        words[3] as usize,
        words[4] as usize,
    );
    let parsed: Vec<(&str, Vec<Spec>)> = forms().iter().map(|f| parse_form(f)).collect();
    let threads = code.block_threads as usize;
    for block in 0..blocks {
        let mut smem = vec![0u8; code.shared_bytes as usize];
        let args = (0..mem.0.len()).map(Memory::address).chain(scalars.iter().copied());
        for (i, word) in args.take(ARGS).enumerate() {
            smem[args_off + 8 * i..args_off + 8 * i + 8].copy_from_slice(&word.to_le_bytes());
        }
        for i in 0..nconst {
            smem[consts_off + 4 * i..consts_off + 4 * i + 4].copy_from_slice(&words[consts_at + i].to_le_bytes());
        }
        let mut pcs = vec![0usize; threads];
        let mut status = vec![Status::Running; threads];
        let mut steps = 0u64;
        while status.iter().any(|&s| s != Status::Done) {
            let mut progress = false;
            for tid in 0..threads {
                while status[tid] == Status::Running {
                    steps += 1;
                    if steps > 100_000_000 {
                        return Err("no exit after 10^8 steps".into());
                    }
                    progress = true;
                    let pc = pcs[tid];
                    let inst = &words[INST_WORDS * (1 + pc)..INST_WORDS * (2 + pc)];
                    let form = forms()[inst[0] as usize];
                    pcs[tid] += 1;
                    let ctx = Thread {
                        tid: tid as u32,
                        block,
                        blocks,
                        threads: code.block_threads,
                    };
                    match form {
                        "vm.exit" => status[tid] = Status::Done,
                        "vm.jmp" => pcs[tid] = inst[1] as usize,
                        "vm.brz sp" | "vm.brnz sp" => {
                            let p = ctx.read(&smem, inst[1], "p") != 0;
                            if p == (form == "vm.brnz sp") {
                                pcs[tid] = inst[2] as usize;
                            }
                        }
                        "vm.smem d32" => ctx.write(&mut smem, inst[1], "32", u64::from(inst[2])),
                        f if f.starts_with("shfl.sync.bfly.b32 ") => status[tid] = Status::Shuffle(pc),
                        f if f.starts_with("bar.sync") => status[tid] = Status::Barrier,
                        _ => ctx.execute(&parsed[inst[0] as usize], inst, form, &mut smem, mem)?,
                    }
                }
            }
            // Shuffles: a warp whose live lanes all wait at one.
            for warp in (0..threads).step_by(32) {
                let lanes = warp..(warp + 32).min(threads);
                let waiting = lanes
                    .clone()
                    .filter(|&t| matches!(status[t], Status::Shuffle(_)))
                    .count();
                let live = lanes.clone().filter(|&t| status[t] != Status::Done).count();
                if waiting == 0 || waiting != live {
                    continue;
                }
                // Each waiting lane's value and lane mask; a lane reads its
                // partner's value, or its own when the partner has none.
                let thread = |t: usize| Thread {
                    tid: t as u32,
                    block,
                    blocks,
                    threads: code.block_threads,
                };
                let inst_at = |t: usize| match status[t] {
                    Status::Shuffle(pc) => Some(&words[INST_WORDS * (1 + pc)..INST_WORDS * (2 + pc)]),
                    _ => None,
                };
                let values: Vec<Option<(u64, u64)>> = lanes
                    .clone()
                    .map(|t| inst_at(t).map(|i| (thread(t).read(&smem, i[2], "32"), thread(t).read(&smem, i[3], "32"))))
                    .collect();
                for t in lanes.clone() {
                    let (Some(inst), Some((own, mask))) = (inst_at(t), values[t - warp]) else {
                        continue;
                    };
                    let partner = (t - warp) ^ mask as usize;
                    let v = values.get(partner).copied().flatten().map_or(own, |(v, _)| v);
                    thread(t).write(&mut smem, inst[1], "32", v);
                }
                for t in lanes {
                    if matches!(status[t], Status::Shuffle(_)) {
                        status[t] = Status::Running;
                    }
                }
                progress = true;
            }
            // A barrier every live thread reached.
            let live = status.iter().filter(|&&s| s != Status::Done).count();
            let at_bar = status.iter().filter(|&&s| s == Status::Barrier).count();
            if live > 0 && at_bar == live {
                for s in status.iter_mut().filter(|s| **s == Status::Barrier) {
                    *s = Status::Running;
                }
                progress = true;
            }
            if !progress {
                return Err("threads wait for each other for ever".into());
            }
        }
    }
    Ok(())
}

/// One thread's view: its slots and special registers.
struct Thread {
    tid: u32,
    block: u32,
    blocks: u32,
    threads: u32,
}

impl Thread {
    fn addr(&self, w: u32, width: &str) -> usize {
        if w & CONST_FLAG != 0 {
            (w & !CONST_FLAG) as usize
        } else {
            w as usize + self.tid as usize * if width == "64" { 8 } else { 4 }
        }
    }

    fn read(&self, smem: &[u8], w: u32, width: &str) -> u64 {
        let a = self.addr(w, width);
        let mut b = [0u8; 8];
        b[..bytes_of(width)].copy_from_slice(&smem[a..a + bytes_of(width)]);
        u64::from_le_bytes(b)
    }

    fn write(&self, smem: &mut [u8], w: u32, width: &str, v: u64) {
        let a = self.addr(w, width);
        let n = if width == "p" { 4 } else { bytes_of(width) };
        smem[a..a + n].copy_from_slice(&v.to_le_bytes()[..n]);
    }

    fn execute(
        &self,
        (op, specs): &(&str, Vec<Spec>),
        inst: &[u32],
        form: &str,
        smem: &mut [u8],
        mem: &mut Memory,
    ) -> Result<(), String> {
        let mut k = 1;
        let (mut srcs, mut dsts, mut addrs) = (vec![], vec![], vec![]);
        for spec in specs {
            match spec {
                Spec::Reg(false, w) => {
                    srcs.push(self.read(smem, inst[k], w));
                    k += 1;
                }
                Spec::NotPred => {
                    srcs.push(u64::from(self.read(smem, inst[k], "p") == 0));
                    k += 1;
                }
                Spec::Reg(true, w) => {
                    dsts.push((inst[k], *w));
                    k += 1;
                }
                Spec::Addr(w) => {
                    let base = self.read(smem, inst[k], w);
                    addrs.push(base.wrapping_add(inst[k + 1] as i32 as i64 as u64));
                    k += 2;
                }
                Spec::Vector(regs) => {
                    for &(dst, w) in regs {
                        if dst {
                            dsts.push((inst[k], w));
                        } else {
                            srcs.push(self.read(smem, inst[k], w));
                        }
                        k += 1;
                    }
                }
                Spec::Verbatim(s) => match *s {
                    "%tid.x" => srcs.push(u64::from(self.tid)),
                    "%ctaid.x" => srcs.push(u64::from(self.block)),
                    "%ntid.x" => srcs.push(u64::from(self.threads)),
                    "%nctaid.x" => srcs.push(u64::from(self.blocks)),
                    "%ctaid.y" => srcs.push(0),
                    "%nctaid.y" => srcs.push(1),
                    // Literal operands (copy sizes, fractions) are in the op.
                    _ if !s.starts_with('%') => srcs.push(s.parse().unwrap_or(0)),
                    _ => return Err(format!("operand `{s}` of `{form}`")),
                },
            }
        }
        let results = eval(op, &srcs, dsts.len(), &addrs, smem, mem).ok_or_else(|| format!("form `{form}`"))?;
        assert_eq!(results.len(), dsts.len(), "{form}");
        for ((w, width), v) in dsts.into_iter().zip(results) {
            self.write(smem, w, width, v);
        }
        Ok(())
    }
}

/// One instruction's results, or `None` when it is not modelled.
fn eval(op: &str, s: &[u64], ndst: usize, addrs: &[u64], smem: &mut [u8], mem: &mut Memory) -> Option<Vec<u64>> {
    let parts: Vec<&str> = op.split('.').collect();
    let ty = last_type(op);
    let bits: u32 = ty.trim_start_matches(|c: char| c.is_alphabetic()).parse().unwrap_or(32);
    let mask = match (ty, bits) {
        ("pred", _) => 1,
        (_, 64) => u64::MAX,
        _ => (1u64 << bits) - 1,
    };
    let signed = ty.starts_with('s');
    let one = |v: u64| Some(vec![v & mask]);
    Some(match parts[0] {
        // Packing and unpacking halves: `mov.b64 d, {lo, hi}` and back.
        "mov" if s.len() == 2 => vec![(s[0] & ((1 << (bits / 2)) - 1)) | (s[1] << (bits / 2))],
        "mov" if ndst == 2 => vec![s[0] & ((1 << (bits / 2)) - 1), (s[0] & mask) >> (bits / 2)],
        "mov" | "cvta" => vec![s[0]],
        "add" if ty == "f32" => one(u64::from((f32_of(s[0]) + f32_of(s[1])).to_bits()))?,
        "sub" if ty == "f32" => one(u64::from((f32_of(s[0]) - f32_of(s[1])).to_bits()))?,
        "mul" if ty == "f32" => one(u64::from((f32_of(s[0]) * f32_of(s[1])).to_bits()))?,
        "fma" if ty == "f32" => one(u64::from(f32_of(s[0]).mul_add(f32_of(s[1]), f32_of(s[2])).to_bits()))?,
        "add" if ty == "f64" => vec![(f64_of(s[0]) + f64_of(s[1])).to_bits()],
        "mul" if ty == "f64" => vec![(f64_of(s[0]) * f64_of(s[1])).to_bits()],
        "add" => one(s[0].wrapping_add(s[1]))?,
        "sub" => one(s[0].wrapping_sub(s[1]))?,
        "mul" if parts[1] == "lo" => one(s[0].wrapping_mul(s[1]))?,
        "mul" if parts[1] == "hi" => {
            let (a, b) = if signed {
                (sext(s[0], bits) as i128, sext(s[1], bits) as i128)
            } else {
                ((s[0] & mask) as i128, (s[1] & mask) as i128)
            };
            one(((a * b) >> bits) as u64)?
        }
        "mul" if parts[1] == "wide" => {
            let (a, b) = if signed {
                (sext(s[0], 32) as u64, sext(s[1], 32) as u64)
            } else {
                (s[0], s[1])
            };
            vec![a.wrapping_mul(b)]
        }
        "mad" if parts[1] == "lo" => one(s[0].wrapping_mul(s[1]).wrapping_add(s[2]))?,
        "and" => one(s[0] & s[1])?,
        "or" => one(s[0] | s[1])?,
        "xor" => one(s[0] ^ s[1])?,
        "not" => one(!s[0])?,
        "shl" => one(if s[1] >= u64::from(bits) { 0 } else { s[0] << s[1] })?,
        "shr" if signed => one((sext(s[0], bits) >> s[1].min(u64::from(bits) - 1)) as u64)?,
        "shr" => one(if s[1] >= u64::from(bits) {
            0
        } else {
            (s[0] & mask) >> s[1]
        })?,
        // A zero divisor gives all ones here (the generator selects the
        // result away); a signed overflow wraps.
        "div" | "rem" if !ty.starts_with('f') && s[1] & mask == 0 => one(mask)?,
        "div" if signed => one(sext(s[0], bits).wrapping_div(sext(s[1], bits)) as u64)?,
        "rem" if signed => one(sext(s[0], bits).wrapping_rem(sext(s[1], bits)) as u64)?,
        "div" if !ty.starts_with('f') => one((s[0] & mask) / (s[1] & mask))?,
        "rem" if !ty.starts_with('f') => one((s[0] & mask) % (s[1] & mask))?,
        "neg" if signed => one(s[0].wrapping_neg())?,
        "abs" if signed => one(sext(s[0], bits).wrapping_abs() as u64)?,
        "max" if op.contains(".NaN.f32") => {
            let (a, b) = (f32_of(s[0]), f32_of(s[1]));
            vec![u64::from(
                if a.is_nan() || b.is_nan() { f32::NAN } else { a.max(b) }.to_bits(),
            )]
        }
        "min" if op.contains(".NaN.f32") => {
            let (a, b) = (f32_of(s[0]), f32_of(s[1]));
            vec![u64::from(
                if a.is_nan() || b.is_nan() { f32::NAN } else { a.min(b) }.to_bits(),
            )]
        }
        "min" if signed => one(sext(s[0], bits).min(sext(s[1], bits)) as u64)?,
        "max" if signed => one(sext(s[0], bits).max(sext(s[1], bits)) as u64)?,
        "min" if !ty.starts_with('f') => one((s[0] & mask).min(s[1] & mask))?,
        "max" if !ty.starts_with('f') => one((s[0] & mask).max(s[1] & mask))?,
        "fence" | "createpolicy" => vec![0; usize::from(parts[0] == "createpolicy")],
        "cp" if op.starts_with("cp.async.commit") || op.starts_with("cp.async.wait") => vec![],
        "cp" => {
            // cp.async...: [shared], [global], size (literal), then a
            // policy (`.L2::cache_hint`) or the source's size (the rest of
            // the copy zero-filled).
            let size = s[0] as usize;
            let read = match s.get(1) {
                Some(&n) if !op.contains("cache_hint") => (n as usize).min(size),
                _ => size,
            };
            let mut src = mem.at(addrs[1], read).to_vec();
            src.resize(size, 0);
            smem[addrs[0] as usize..addrs[0] as usize + size].copy_from_slice(&src);
            vec![]
        }
        "atom" if op.ends_with("global.inc.u32") => {
            let cell = mem.at(addrs[0], 4);
            let old = u32::from_le_bytes(cell[..4].try_into().ok()?);
            let new = if u64::from(old) >= s[0] { 0 } else { old + 1 };
            cell.copy_from_slice(&new.to_le_bytes());
            vec![u64::from(old)]
        }
        "selp" => vec![if s[2] != 0 { s[0] } else { s[1] }],
        "setp" => {
            let cmp = parts[1];
            // `None`: unordered (a NaN operand).
            let ord = if ty.starts_with('f') {
                let (a, b) = if ty == "f32" {
                    (f64::from(f32_of(s[0])), f64::from(f32_of(s[1])))
                } else {
                    (f64_of(s[0]), f64_of(s[1]))
                };
                a.partial_cmp(&b)
            } else if signed {
                Some(sext(s[0], bits).cmp(&sext(s[1], bits)))
            } else {
                Some((s[0] & mask).cmp(&(s[1] & mask)))
            };
            use std::cmp::Ordering::*;
            // The ordered comparisons are false on NaN, the unordered
            // ones (`equ`, `neu`, ...) true, as PTX defines them.
            let (base, unordered) = match cmp.strip_suffix('u') {
                Some(base) => (base, true),
                None => (cmp, false),
            };
            let r = match (base, ord) {
                ("num", o) => o.is_some(),
                ("nan", o) => o.is_none(),
                (_, None) => unordered,
                ("eq", Some(o)) => o == Equal,
                ("ne", Some(o)) => o != Equal,
                ("lt", Some(o)) => o == Less,
                ("le", Some(o)) => o != Greater,
                ("gt", Some(o)) => o == Greater,
                ("ge", Some(o)) => o != Less,
                _ => return None,
            };
            // setp.cmp.and/or/xor.type d, a, b, c combines with c.
            let r = match parts[2] {
                "and" => r && s[2] != 0,
                "or" => r || s[2] != 0,
                "xor" => r != (s[2] != 0),
                _ => r,
            };
            vec![u64::from(r)]
        }
        // Integer to float, rounded to nearest even (as Rust's `as`).
        "cvt" if parts.len() == 4 && parts[1] == "rn" && !parts[3].starts_with('f') && parts[2].starts_with('f') => {
            let sb: u32 = parts[3][1..].parse().ok()?;
            let v = s[0] & ((1u128 << sb) - 1) as u64;
            let x = if parts[3].starts_with('s') { sext(v, sb) as f64 } else { v as f64 };
            let exact = if parts[3].starts_with('s') { sext(v, sb) as f32 } else { v as f32 };
            match parts[2] {
                "f32" => vec![u64::from(exact.to_bits())],
                "f64" => vec![x.to_bits()],
                _ => return None,
            }
        }
        "cvt" if parts.len() == 3 => {
            // Integer widening and narrowing: cvt.dst.src.
            let (d, src) = (parts[1], parts[2]);
            if d.starts_with('f') || src.starts_with('f') {
                return None;
            }
            let sb: u32 = src[1..].parse().ok()?;
            let v = if src.starts_with('s') {
                sext(s[0], sb) as u64
            } else {
                s[0] & ((1u128 << sb) - 1) as u64
            };
            let db: u32 = d[1..].parse().ok()?;
            vec![v & ((1u128 << db) - 1) as u64]
        }
        "ld" | "st" if matches!(parts[1], "global" | "shared") => {
            let shared = parts[1] == "shared";
            let size = (bits / 8) as usize;
            let at = |i: usize| addrs[0] + (i * size) as u64;
            if parts[0] == "st" {
                for (i, v) in s.iter().enumerate() {
                    bytes(shared, at(i), size, smem, mem).copy_from_slice(&v.to_le_bytes()[..size]);
                }
                return Some(vec![]);
            }
            let n = parts
                .iter()
                .find_map(|p| p.strip_prefix('v'))
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            (0..n)
                .map(|i| {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(bytes(shared, at(i), size, smem, mem));
                    u64::from_le_bytes(b)
                })
                .collect()
        }
        _ => return None,
    })
}

/// `size` bytes at `addr` of shared memory or of a parameter's buffer.
fn bytes<'m>(shared: bool, addr: u64, size: usize, smem: &'m mut [u8], mem: &'m mut Memory) -> &'m mut [u8] {
    if shared {
        &mut smem[addr as usize..addr as usize + size]
    } else {
        mem.at(addr, size)
    }
}
