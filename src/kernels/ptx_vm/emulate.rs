//! A CPU model of the interpreter for tests: runs assembled code one thread
//! after another, for kernels whose threads do not talk to each other (no
//! shared arrays, barriers or shuffles), over the forms below. It checks
//! the assembler (slots, live ranges, words, constants, guards, branches)
//! against the CPU executor without a GPU; the instructions' own semantics
//! are the GPU's business and the GPU tests'.

use super::kernel::{parse_form, Spec};
use super::{forms, Code, ARGS, CONST_FLAG, INST_WORDS};

/// Global memory: parameter `i` lives at `(i + 1) << 32`.
pub(super) struct Memory(pub Vec<Vec<u8>>);

impl Memory {
    fn at(&mut self, addr: u64, len: usize) -> &mut [u8] {
        let buf = &mut self.0[(addr >> 32) as usize - 1];
        let off = (addr & 0xffff_ffff) as usize;
        &mut buf[off..off + len]
    }

    pub(super) fn address(i: usize) -> u64 {
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

/// Runs `code` on a grid of `blocks` blocks (x only), or returns the first
/// form it does not model.
pub(super) fn run(code: &Code, blocks: u32, mem: &mut Memory) -> Result<(), String> {
    assert_eq!(code.program_shared, 0, "threads would share memory");
    let words = &code.words;
    let (args_off, consts_off, nconst, consts_at) = (
        words[1] as usize,
        words[2] as usize,
        words[3] as usize,
        words[4] as usize,
    );
    let mut smem = vec![0u8; code.shared_bytes as usize];
    for i in 0..ARGS.min(mem.0.len()) {
        smem[args_off + 8 * i..args_off + 8 * i + 8].copy_from_slice(&Memory::address(i).to_le_bytes());
    }
    for i in 0..nconst {
        smem[consts_off + 4 * i..consts_off + 4 * i + 4].copy_from_slice(&words[consts_at + i].to_le_bytes());
    }
    let parsed: Vec<(&str, Vec<Spec>)> = forms().iter().map(|f| parse_form(f)).collect();
    for block in 0..blocks {
        for tid in 0..code.block_threads {
            let mut pc = 0usize;
            let mut steps = 0u64;
            loop {
                steps += 1;
                if steps > 10_000_000 {
                    return Err("no exit after 10^7 steps".into());
                }
                let inst = &words[INST_WORDS * (1 + pc)..INST_WORDS * (2 + pc)];
                pc += 1;
                let form = forms()[inst[0] as usize];
                // Operand access.
                let addr = |w: u32, width: &str| -> usize {
                    if w & CONST_FLAG != 0 {
                        (w & !CONST_FLAG) as usize
                    } else {
                        w as usize + tid as usize * if width == "64" { 8 } else { 4 }
                    }
                };
                let read = |smem: &[u8], w: u32, width: &str| -> u64 {
                    let a = addr(w, width);
                    let mut b = [0u8; 8];
                    b[..bytes_of(width)].copy_from_slice(&smem[a..a + bytes_of(width)]);
                    u64::from_le_bytes(b)
                };
                let write = |smem: &mut [u8], w: u32, width: &str, v: u64| {
                    let a = addr(w, width);
                    let n = if width == "p" { 4 } else { bytes_of(width) };
                    smem[a..a + n].copy_from_slice(&v.to_le_bytes()[..n]);
                };
                match form {
                    "vm.exit" => break,
                    "vm.jmp" => pc = inst[1] as usize,
                    "vm.brz sp" | "vm.brnz sp" => {
                        let p = read(&smem, inst[1], "p") != 0;
                        if p == (form == "vm.brnz sp") {
                            pc = inst[2] as usize;
                        }
                    }
                    _ => {
                        let (op, specs) = &parsed[inst[0] as usize];
                        // Sources in order, the destination's word and width.
                        let mut k = 1;
                        let mut srcs = vec![];
                        let mut dsts = vec![];
                        let mut addrs = vec![];
                        for spec in specs {
                            match spec {
                                Spec::Reg(false, w) => {
                                    srcs.push(read(&smem, inst[k], w));
                                    k += 1;
                                }
                                Spec::NotPred => {
                                    srcs.push(u64::from(read(&smem, inst[k], "p") == 0));
                                    k += 1;
                                }
                                Spec::Reg(true, w) => {
                                    dsts.push((inst[k], *w));
                                    k += 1;
                                }
                                Spec::Addr(w) => {
                                    let base = read(&smem, inst[k], w);
                                    addrs.push(base.wrapping_add(inst[k + 1] as i32 as i64 as u64));
                                    k += 2;
                                }
                                Spec::Vector(regs) => {
                                    for &(dst, w) in regs {
                                        if dst {
                                            dsts.push((inst[k], w));
                                        } else {
                                            srcs.push(read(&smem, inst[k], w));
                                        }
                                        k += 1;
                                    }
                                }
                                Spec::Verbatim(s) => srcs.push(match *s {
                                    "%tid.x" => u64::from(tid),
                                    "%ctaid.x" => u64::from(block),
                                    "%ntid.x" => u64::from(code.block_threads),
                                    "%nctaid.x" => u64::from(blocks),
                                    "%ctaid.y" => 0,
                                    "%nctaid.y" => 1,
                                    _ => return Err(format!("operand `{s}` of `{form}`")),
                                }),
                            }
                        }
                        let results = eval(op, &srcs, &mut addrs, mem).ok_or_else(|| format!("form `{form}`"))?;
                        assert_eq!(results.len(), dsts.len(), "{form}");
                        for ((w, width), v) in dsts.into_iter().zip(results) {
                            write(&mut smem, w, width, v);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// One instruction's results, or `None` when it is not modelled.
fn eval(op: &str, s: &[u64], addrs: &mut [u64], mem: &mut Memory) -> Option<Vec<u64>> {
    let parts: Vec<&str> = op.split('.').collect();
    let ty = last_type(op);
    let bits: u32 = ty.trim_start_matches(|c: char| c.is_alphabetic()).parse().unwrap_or(32);
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let signed = ty.starts_with('s');
    let one = |v: u64| Some(vec![v & mask]);
    Some(match parts[0] {
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
        "div" if !signed && s[1] & mask != 0 => one((s[0] & mask) / (s[1] & mask))?,
        "rem" if !signed && s[1] & mask != 0 => one((s[0] & mask) % (s[1] & mask))?,
        "min" if !signed => one((s[0] & mask).min(s[1] & mask))?,
        "max" if !signed => one((s[0] & mask).max(s[1] & mask))?,
        "selp" => vec![if s[2] != 0 { s[0] } else { s[1] }],
        "setp" => {
            let cmp = parts[1];
            let ord = if ty.starts_with('f') {
                let (a, b) = if ty == "f32" {
                    (f64::from(f32_of(s[0])), f64::from(f32_of(s[1])))
                } else {
                    (f64_of(s[0]), f64_of(s[1]))
                };
                a.partial_cmp(&b)?
            } else if signed {
                sext(s[0], bits).cmp(&sext(s[1], bits))
            } else {
                (s[0] & mask).cmp(&(s[1] & mask))
            };
            use std::cmp::Ordering::*;
            let r = match cmp {
                "eq" => ord == Equal,
                "ne" => ord != Equal,
                "lt" => ord == Less,
                "le" => ord != Greater,
                "gt" => ord == Greater,
                "ge" => ord != Less,
                _ => return None,
            };
            vec![u64::from(r)]
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
        "ld" if parts[1] == "global" => {
            let n = parts
                .iter()
                .find_map(|p| p.strip_prefix('v'))
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            let size = (bits / 8) as usize;
            (0..n)
                .map(|i| {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(mem.at(addrs[0] + (i * size) as u64, size));
                    u64::from_le_bytes(b)
                })
                .collect()
        }
        "st" if parts[1] == "global" => {
            let size = (bits / 8) as usize;
            for (i, v) in s.iter().enumerate() {
                mem.at(addrs[0] + (i * size) as u64, size)
                    .copy_from_slice(&v.to_le_bytes()[..size]);
            }
            vec![]
        }
        _ => return None,
    })
}
