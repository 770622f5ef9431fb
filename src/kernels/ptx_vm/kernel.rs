//! The interpreter kernel's PTX, written from the form list.

use super::{ARGS, INST_WORDS};
use crate::error::Result;
use crate::kernels::ptx_gen::{choose_version, PtxTarget};
use std::fmt::Write;

/// The interpreter's entry point.
pub const ENTRY: &str = "tf_vm";

/// One operand of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Spec {
    /// A register written (`true`) or read, of a width tag (`p`, `16`, `32`, `64`).
    Reg(bool, &'static str),
    /// A predicate read negated (`!%p`).
    NotPred,
    /// A memory operand: a 32- or 64-bit base register and an offset word.
    Addr(&'static str),
    Vector(Vec<(bool, &'static str)>),
    /// Written as is (a special register or a literal).
    Verbatim(&'static str),
}

fn reg_spec(tok: &'static str) -> Option<(bool, &'static str)> {
    let (dst, w) = match tok.as_bytes().first()? {
        b'd' => (true, &tok[1..]),
        b's' => (false, &tok[1..]),
        _ => return None,
    };
    matches!(w, "p" | "16" | "32" | "64").then_some((dst, w))
}

pub(super) fn parse_form(form: &'static str) -> (&'static str, Vec<Spec>) {
    let mut toks = form.split(' ');
    let op = toks.next().unwrap_or_default();
    let specs = toks
        .map(|t| {
            if let Some(w) = t.strip_prefix("[a").and_then(|r| r.strip_suffix(']')) {
                Spec::Addr(w)
            } else if let Some(inner) = t.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
                Spec::Vector(inner.split(',').filter_map(reg_spec).collect())
            } else if t == "s!p" {
                Spec::NotPred
            } else if let Some(lit) = t.strip_prefix('=') {
                Spec::Verbatim(lit)
            } else if let Some(r) = reg_spec(t) {
                Spec::Reg(r.0, r.1)
            } else {
                Spec::Verbatim(t)
            }
        })
        .collect();
    (op, specs)
}

/// Temporaries of one case.
#[derive(Default)]
struct Temps {
    b32: u32,
    b64: u32,
    b16: u32,
    pred: u32,
    addr: u32,
    max: [u32; 5],
}

impl Temps {
    fn take(&mut self, w: &str) -> String {
        let (name, n) = match w {
            "32" => ("%x", &mut self.b32),
            "64" => ("%y", &mut self.b64),
            "16" => ("%h", &mut self.b16),
            "p" => ("%q", &mut self.pred),
            _ => ("%a", &mut self.addr),
        };
        *n += 1;
        format!("{name}{}", *n - 1)
    }

    fn reset(&mut self) {
        let now = [self.b32, self.b64, self.b16, self.pred, self.addr];
        for (m, n) in self.max.iter_mut().zip(now) {
            *m = (*m).max(n);
        }
        (self.b32, self.b64, self.b16, self.pred, self.addr) = (0, 0, 0, 0, 0);
    }
}

/// Loads the operand of word `k` into a new temporary of width `w`.
fn load(out: &mut String, t: &mut Temps, k: usize, w: &'static str) -> String {
    let (q, off, base) = (t.take("p"), t.take("a"), t.take("a"));
    let tid = if w == "64" { "%vt8" } else { "%vt4" };
    let _ = writeln!(out, "\tsetp.lt.s32 {q}, %w{k}, 0;");
    let _ = writeln!(out, "\tand.b32 {off}, %w{k}, 2147483647;");
    let _ = writeln!(out, "\tselp.b32 {base}, %smem, {tid}, {q};");
    let _ = writeln!(out, "\tadd.u32 {off}, {off}, {base};");
    let r = t.take(w);
    match w {
        "p" => {
            let x = t.take("32");
            let _ = writeln!(out, "\tld.shared.b32 {x}, [{off}];");
            let _ = writeln!(out, "\tsetp.ne.b32 {r}, {x}, 0;");
        }
        _ => {
            let _ = writeln!(out, "\tld.shared.b{w} {r}, [{off}];");
        }
    }
    r
}

/// Stores temporary `r` of width `w` into the slot of word `k`.
fn store(out: &mut String, t: &mut Temps, k: usize, w: &str, r: &str) {
    let a = t.take("a");
    let tid = if w == "64" { "%vt8" } else { "%vt4" };
    let _ = writeln!(out, "\tadd.u32 {a}, %w{k}, {tid};");
    if w == "p" {
        let x = t.take("32");
        let _ = writeln!(out, "\tselp.b32 {x}, 1, 0, {r};");
        let _ = writeln!(out, "\tst.shared.b32 [{a}], {x};");
    } else {
        let _ = writeln!(out, "\tst.shared.b{w} [{a}], {r};");
    }
}

/// One case's body (after its label), ending in a jump back to the loop.
fn case(out: &mut String, t: &mut Temps, form: &'static str) {
    match form {
        "vm.exit" => out.push_str("\texit;\n"),
        "vm.jmp" => out.push_str("\tmov.u32 %pc, %w1;\n"),
        "vm.brz sp" | "vm.brnz sp" => {
            let p = load(out, t, 1, "p");
            let neg = if form == "vm.brz sp" { "!" } else { "" };
            let _ = writeln!(out, "\t@{neg}{p} mov.u32 %pc, %w2;");
        }
        "vm.smem d32" => {
            let x = t.take("32");
            let _ = writeln!(out, "\tadd.u32 {x}, %smem, %w2;");
            store(out, t, 1, "32", &x);
        }
        "vm.table d64" => {
            // A constant table's global address: in the code, past its words.
            let (o, y) = (t.take("64"), t.take("64"));
            let _ = writeln!(out, "\tmul.wide.u32 {o}, %w2, 4;");
            let _ = writeln!(out, "\tadd.s64 {y}, %code0, {o};");
            store(out, t, 1, "64", &y);
        }
        _ => {
            // One instruction, or a carry pair joined by " ; ": every
            // operand is loaded first, then the instructions run, then the
            // results are stored.
            let mut k = 1;
            let mut texts = vec![];
            let mut stores = vec![];
            for part in form.split(" ; ") {
                let (op, specs) = parse_form(part);
                let mut text = vec![];
                for spec in &specs {
                    match spec {
                        Spec::Reg(false, w) => {
                            text.push(load(out, t, k, w));
                            k += 1;
                        }
                        Spec::NotPred => {
                            let p = load(out, t, k, "p");
                            text.push(format!("!{p}"));
                            k += 1;
                        }
                        Spec::Reg(true, w) => {
                            let r = t.take(w);
                            stores.push((k, *w, r.clone()));
                            text.push(r);
                            k += 1;
                        }
                        Spec::Addr(w) => {
                            let base = load(out, t, k, w);
                            let a = if *w == "64" {
                                let (o, a) = (t.take("64"), t.take("64"));
                                let _ = writeln!(out, "\tcvt.s64.s32 {o}, %w{};", k + 1);
                                let _ = writeln!(out, "\tadd.s64 {a}, {base}, {o};");
                                a
                            } else {
                                let a = t.take("32");
                                let _ = writeln!(out, "\tadd.u32 {a}, {base}, %w{};", k + 1);
                                a
                            };
                            text.push(format!("[{a}]"));
                            k += 2;
                        }
                        Spec::Vector(regs) => {
                            let mut names = vec![];
                            for &(dst, w) in regs {
                                if dst {
                                    let r = t.take(w);
                                    stores.push((k, w, r.clone()));
                                    names.push(r);
                                } else {
                                    names.push(load(out, t, k, w));
                                }
                                k += 1;
                            }
                            text.push(format!("{{{}}}", names.join(", ")));
                        }
                        Spec::Verbatim(s) => text.push((*s).to_owned()),
                    }
                }
                // Non-aligned barriers: the interpreter's threads reach a
                // case from anywhere in the loop.
                let op = match op {
                    "bar.sync" => "barrier.sync",
                    other => other,
                };
                texts.push(if text.is_empty() {
                    format!("\t{op};")
                } else {
                    format!("\t{op} {};", text.join(", "))
                });
            }
            for text in texts {
                out.push_str(&text);
                out.push('\n');
            }
            for (k, w, r) in stores {
                store(out, t, k, w, &r);
            }
        }
    }
    out.push_str("\tbra $vm_loop;\n");
    t.reset();
}

/// The oldest compute capability a form's instruction exists on.
fn min_sm(form: &str) -> u32 {
    let op = form.split(' ').next().unwrap_or_default();
    if op.starts_with("cp.async") || op.starts_with("createpolicy") || op.contains("bf16") || op.contains(".NaN") {
        80
    } else if op.starts_with("tanh.approx") {
        75
    } else if op.contains(".relaxed") || op.contains(".acq_rel") || op.starts_with("fence") {
        70
    } else {
        0
    }
}

/// The interpreter's PTX for `target`: one `.entry` ([`ENTRY`]) taking the
/// assembled code's device address and the program's [`ARGS`] parameters,
/// launched with the program's grid and block and the code's
/// `shared_bytes` of dynamic shared memory. It executes the first `forms`
/// forms (all of them: `forms().len()`; the core: [`core_forms`]); the
/// others trap, so it runs code whose `max_form` is below `forms`.
///
/// [`core_forms`]: super::core_forms
pub fn interpreter(target: &PtxTarget, forms: usize) -> Result<String> {
    let limit = forms;
    let version = choose_version("ptx interpreter", target, (7, 8))?;
    let mut cases = String::new();
    let mut temps = Temps::default();
    let forms = super::forms();
    for (i, form) in forms.iter().enumerate().take(limit) {
        let _ = writeln!(cases, "$vm_c{i}: // {form}");
        if target.sm < min_sm(form) {
            // ptx_gen writes no such instruction for this target.
            cases.push_str("\ttrap;\n");
            continue;
        }
        case(&mut cases, &mut temps, form);
    }
    temps.reset();
    let [b32, b64, b16, pred, addr] = temps.max.map(|m| m.max(1));
    let mut out = format!(
        "//\n// Generated by tilefuse: the PTX interpreter ({} of {} forms).\n//\n.version {}.{}\n.target sm_{}\n.address_size 64\n\n",
        limit.min(forms.len()),
        forms.len(),
        version.0,
        version.1,
        target.sm
    );
    out.push_str(".extern .shared .align 16 .b8 vm_smem[];\n\n");
    let _ = write!(out, ".visible .entry {ENTRY}(\n\t.param .u64 vm_code");
    for i in 0..ARGS {
        let _ = write!(out, ",\n\t.param .u64 vm_a{i}");
    }
    out.push_str("\n)\n.maxntid 1024, 1, 1\n{\n");
    let _ = writeln!(
        out,
        "\t.reg .b32 %x<{b32}>;\n\t.reg .b64 %y<{b64}>;\n\t.reg .b16 %h<{b16}>;\n\t.reg .pred %q<{pred}>;\n\t.reg .b32 %a<{addr}>;"
    );
    out.push_str("\t.reg .b32 %w<8>;\n\t.reg .b32 %hd<8>;\n\t.reg .b32 %pc, %op, %smem, %vtid, %vntid, %vt4, %vt8, %i, %v, %s;\n");
    out.push_str("\t.reg .b64 %code, %code0, %ia, %ya;\n\t.reg .pred %done;\n");
    let targets: Vec<String> = (0..forms.len())
        .map(|i| {
            if i < limit {
                format!("$vm_c{i}")
            } else {
                "$vm_trap".to_owned()
            }
        })
        .collect();
    let _ = writeln!(out, "$vm_table: .branchtargets {};", targets.join(", "));
    // The prologue: parameters and constants into shared memory.
    out.push_str(
        "\tmov.u32 %smem, vm_smem;\n\
         \tmov.u32 %vtid, %tid.x;\n\
         \tmov.u32 %vntid, %ntid.x;\n\
         \tld.param.u64 %code, [vm_code];\n\
         \tcvta.to.global.u64 %code, %code;\n\
         \tmov.b64 %code0, %code;\n\
         \tld.global.nc.v4.u32 {%hd0, %hd1, %hd2, %hd3}, [%code];\n\
         \tld.global.nc.v4.u32 {%hd4, %hd5, %hd6, %hd7}, [%code+16];\n\
         \tsetp.ne.u32 %done, %vtid, 0;\n\
         \t@%done bra $vm_args_done;\n\
         \tadd.u32 %s, %smem, %hd1;\n",
    );
    for i in 0..ARGS {
        let _ = writeln!(
            out,
            "\tld.param.u64 %ia, [vm_a{i}];\n\tst.shared.u64 [%s+{}], %ia;",
            8 * i
        );
    }
    out.push_str(
        "$vm_args_done:\n\
         \tmov.u32 %i, %vtid;\n\
         $vm_consts:\n\
         \tsetp.ge.u32 %done, %i, %hd3;\n\
         \t@%done bra $vm_consts_done;\n\
         \tadd.u32 %v, %hd4, %i;\n\
         \tmul.wide.u32 %ya, %v, 4;\n\
         \tadd.s64 %ya, %code, %ya;\n\
         \tld.global.nc.u32 %v, [%ya];\n\
         \tshl.b32 %s, %i, 2;\n\
         \tadd.u32 %s, %s, %hd2;\n\
         \tadd.u32 %s, %s, %smem;\n\
         \tst.shared.u32 [%s], %v;\n\
         \tadd.u32 %i, %i, %vntid;\n\
         \tbra $vm_consts;\n\
         $vm_consts_done:\n\
         \tbarrier.sync 0;\n\
         \tshl.b32 %vt4, %vtid, 2;\n\
         \tadd.u32 %vt4, %vt4, %smem;\n\
         \tshl.b32 %vt8, %vtid, 3;\n\
         \tadd.u32 %vt8, %vt8, %smem;\n",
    );
    let _ = writeln!(out, "\tadd.s64 %code, %code, {};", INST_WORDS * 4);
    out.push_str(
        "\tmov.u32 %pc, 0;\n\
         $vm_loop:\n\
         \tmul.wide.u32 %ia, %pc, 32;\n\
         \tadd.s64 %ia, %ia, %code;\n\
         \tld.global.nc.v4.u32 {%op, %w1, %w2, %w3}, [%ia];\n\
         \tld.global.nc.v4.u32 {%w4, %w5, %w6, %w7}, [%ia+16];\n\
         \tadd.u32 %pc, %pc, 1;\n\
         \tbrx.idx %op, $vm_table;\n",
    );
    out.push_str(&cases);
    out.push_str("$vm_trap:\n\ttrap;\n}\n");
    Ok(out)
}
