//! PTX of one kernel to the interpreter's code: every instruction becomes a
//! numbered *form* (its mnemonic and the widths and kinds of its operands)
//! with its operands as 32-bit words, registers are given slots in shared
//! memory by their live ranges, and immediates become uniform constants.

use super::parse::{parse, Arg, Base, Imm, Inst, Line, ParsedKernel, Width};
use super::{form_index, Code, Unsupported, ARGS, CONST_FLAG, HEADER_WORDS, INST_WORDS, MAGIC};
use std::collections::HashMap;

fn unsupported(what: impl Into<String>) -> Unsupported {
    Unsupported(what.into())
}

/// An operand word before layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    /// A register's slot (resolved after allocation).
    Reg(u32),
    /// A uniform value at a byte offset of shared memory (the arguments).
    Uniform(u32),
    /// A constant, placed with the others.
    Const(Width, u64),
    /// A plain number.
    Raw(u32),
    /// An instruction index (resolved from a label).
    Label(u32),
    /// The word index of a constant table in the code (resolved at the end).
    Table(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Next,
    Jump(u32),
    /// Jumps when the predicate in the first word is false.
    JumpIfNot(u32),
    /// Jumps when it is true.
    JumpIf(u32),
    Exit,
}

#[derive(Debug)]
struct VInst {
    form: String,
    words: Vec<Word>,
    uses: Vec<u32>,
    defs: Vec<u32>,
    flow: Flow,
}

/// Registers by name, with their widths.
#[derive(Default)]
struct Regs {
    ids: HashMap<String, u32>,
    widths: Vec<Width>,
}

impl Regs {
    fn id(&mut self, name: &str, width: Width) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.widths.len() as u32;
        self.ids.insert(name.to_owned(), id);
        self.widths.push(width);
        id
    }

    fn temp(&mut self, width: Width) -> u32 {
        let name = format!("%vm.t{}", self.widths.len());
        self.id(&name, width)
    }
}

/// Whether an instruction's first operand is written (the usual case) or
/// read (stores, copies, barriers).
fn writes_first(op: &str) -> bool {
    ![
        "st.", "red.", "bar", "barrier", "cp.async", "fence", "prefetch", "membar",
    ]
    .iter()
    .any(|p| op.starts_with(p))
}

/// Immediates that PTX requires as literals stay in the form.
fn literal_immediates(op: &str) -> bool {
    op.starts_with("cp.async") || op.starts_with("createpolicy") || op.starts_with("bar")
}

/// The width of an immediate source operand at position `pos` of `op`.
fn imm_width(op: &str, pos: usize) -> Option<Width> {
    let base = op.split('.').next().unwrap_or("");
    if matches!(base, "shl" | "shr" | "bfe" | "shf") && pos >= 2 {
        return Some(Width::B32);
    }
    if base == "shfl" || base == "bar" || base == "barrier" {
        return Some(Width::B32);
    }
    // The last type suffix: the source type of `cvt` and `setp`, the type
    // of everything else.
    // A predicate immediate (`mov.pred %p, 1`) is a 32-bit 0 or 1 that the
    // case reads as a predicate.
    op.rsplit('.').find_map(Width::of_type)
}

struct Assembler<'a> {
    kernel: ParsedKernel<'a>,
    regs: Regs,
    out: Vec<VInst>,
    labels: HashMap<String, u32>,
    /// Pending label references: (instruction, word) to a label name.
    fixups: Vec<(usize, usize, String)>,
    shared: HashMap<&'a str, u32>,
    shared_bytes: u32,
    args_offset: u32,
    fresh_label: u32,
}

/// Assembles `ptx` (one kernel of `ptx_gen`) for blocks of `block_threads`
/// threads, with at most `max_shared` bytes of shared memory per block.
pub(crate) fn assemble(ptx: &str, block_threads: u32, max_shared: u32) -> Result<Code, Unsupported> {
    let asm = lower(ptx)?;
    if asm.kernel.params.len() > ARGS {
        return Err(unsupported(format!(
            "{} parameters (at most {ARGS})",
            asm.kernel.params.len()
        )));
    }
    asm.finish(block_threads, max_shared)
}

/// The kernel read, its shared arrays placed, its instructions lowered to
/// forms with their branches resolved.
fn lower(ptx: &str) -> Result<Assembler<'_>, Unsupported> {
    let kernel = parse(ptx)?;
    // Program shared memory first, at the interpreter's shared base.
    // The interpreter's shared memory is aligned to 16 bytes.
    let mut shared = HashMap::new();
    let mut offset = 0u32;
    let too_big = || unsupported("shared arrays past 4 GiB");
    for &(name, align, bytes) in &kernel.shared {
        if !(1..=16).contains(&align) || !align.is_power_of_two() {
            return Err(unsupported(format!("shared array `{name}` aligned to {align} bytes")));
        }
        offset = offset.checked_next_multiple_of(align).ok_or_else(too_big)?;
        shared.insert(name, offset);
        offset = offset.checked_add(bytes).ok_or_else(too_big)?;
    }
    let args_offset = offset.checked_next_multiple_of(16).ok_or_else(too_big)?;
    let mut asm = Assembler {
        kernel,
        regs: Regs::default(),
        out: vec![],
        labels: HashMap::new(),
        fixups: vec![],
        shared,
        shared_bytes: offset,
        args_offset,
        fresh_label: 0,
    };
    let body = std::mem::take(&mut asm.kernel.body);
    asm.body(&body)?;
    // A kernel falling off its end exits.
    asm.push("vm.exit", vec![], vec![], vec![], Flow::Exit);
    for (i, w, label) in std::mem::take(&mut asm.fixups) {
        let target = *asm
            .labels
            .get(&label)
            .ok_or_else(|| unsupported(format!("label `{label}` not defined")))?;
        asm.out[i].words[w] = Word::Label(target);
        asm.out[i].flow = match asm.out[i].flow {
            Flow::Jump(_) => Flow::Jump(target),
            Flow::JumpIf(_) => Flow::JumpIf(target),
            Flow::JumpIfNot(_) => Flow::JumpIfNot(target),
            f => f,
        };
    }
    Ok(asm)
}

impl<'a> Assembler<'a> {
    fn push(&mut self, form: &str, words: Vec<Word>, uses: Vec<u32>, defs: Vec<u32>, flow: Flow) {
        self.out.push(VInst {
            form: form.to_owned(),
            words,
            uses,
            defs,
            flow,
        });
    }

    fn reg(&mut self, name: &str) -> Result<(u32, Width), Unsupported> {
        let width = self
            .kernel
            .width(name)
            .ok_or_else(|| unsupported(format!("register `{name}`")))?;
        Ok((self.regs.id(name, width), width))
    }

    /// A branch to `label`, resolved at the end.
    fn branch(&mut self, form: &str, pred: Option<u32>, label: &str, flow: Flow) {
        let mut words = vec![];
        let mut uses = vec![];
        if let Some(p) = pred {
            words.push(Word::Reg(p));
            uses.push(p);
        }
        self.fixups.push((self.out.len(), words.len(), label.to_owned()));
        words.push(Word::Label(0));
        self.push(form, words, uses, vec![], flow);
    }

    fn inst(&mut self, inst: &Inst<'a>) -> Result<(), Unsupported> {
        let guard = match inst.guard {
            Some((p, negated)) => {
                let (id, w) = self.reg(p)?;
                if w != Width::Pred {
                    return Err(unsupported(format!("guard `{p}`")));
                }
                Some((id, negated))
            }
            None => None,
        };
        let op = inst.op;
        if op == "bra" || op == "bra.uni" {
            let [Arg::Symbol(label)] = inst.args.as_slice() else {
                return Err(unsupported(format!("branch `{op}`")));
            };
            match guard {
                None => self.branch("vm.jmp", None, label, Flow::Jump(0)),
                Some((p, false)) => self.branch("vm.brnz sp", Some(p), label, Flow::JumpIf(0)),
                Some((p, true)) => self.branch("vm.brz sp", Some(p), label, Flow::JumpIfNot(0)),
            }
            return Ok(());
        }
        // Any other guarded instruction: a branch around it.
        let skip = guard.map(|(p, negated)| {
            let label = format!("$vm.skip{}", self.fresh_label);
            self.fresh_label += 1;
            if negated {
                self.branch("vm.brnz sp", Some(p), &label, Flow::JumpIf(0));
            } else {
                self.branch("vm.brz sp", Some(p), &label, Flow::JumpIfNot(0));
            }
            label
        });
        if op == "ret" || op == "exit" {
            if !inst.args.is_empty() {
                return Err(unsupported(format!("`{op}` with operands")));
            }
            self.push("vm.exit", vec![], vec![], vec![], Flow::Exit);
        } else {
            self.plain(inst)?;
        }
        if let Some(label) = skip {
            self.labels.insert(label, self.out.len() as u32);
        }
        Ok(())
    }

    /// A shared array's address into a fresh register (or `dst`).
    fn shared_address(&mut self, symbol: &str, dst: Option<u32>) -> Result<u32, Unsupported> {
        let offset = *self
            .shared
            .get(symbol)
            .ok_or_else(|| unsupported(format!("symbol `{symbol}`")))?;
        let d = dst.unwrap_or_else(|| self.regs.temp(Width::B32));
        self.push(
            "vm.smem d32",
            vec![Word::Reg(d), Word::Raw(offset)],
            vec![],
            vec![d],
            Flow::Next,
        );
        Ok(d)
    }

    fn plain(&mut self, inst: &Inst<'a>) -> Result<(), Unsupported> {
        let op = inst.op;
        // Kernel parameters become uniform values.
        if op == "ld.param.u64" || op == "ld.param.b64" {
            let [Arg::Reg(d), Arg::Addr(Base::Symbol(name), 0)] = inst.args.as_slice() else {
                return Err(unsupported(format!("`{op}` operands")));
            };
            let k = self
                .kernel
                .params
                .iter()
                .position(|p| p == name)
                .ok_or_else(|| unsupported(format!("parameter `{name}`")))?;
            let (d, w) = self.reg(d)?;
            if w != Width::B64 {
                return Err(unsupported("a parameter into a narrow register"));
            }
            let words = vec![Word::Reg(d), Word::Uniform(self.args_offset + 8 * k as u32)];
            self.push("mov.b64 d64 s64", words, vec![], vec![d], Flow::Next);
            return Ok(());
        }
        // A constant table's address: the table travels in the code.
        if let [Arg::Reg(d), Arg::Symbol(sym)] = inst.args.as_slice() {
            if let Some(k) = self.kernel.tables.iter().position(|(name, _)| name == sym) {
                let (d, w) = self.reg(d)?;
                if op != "mov.u64" && op != "mov.b64" || w != Width::B64 {
                    return Err(unsupported(format!("`{op}` of the table `{sym}`")));
                }
                self.push(
                    "vm.table d64",
                    vec![Word::Reg(d), Word::Table(k)],
                    vec![],
                    vec![d],
                    Flow::Next,
                );
                return Ok(());
            }
        }
        // A shared array's address.
        if let [Arg::Reg(d), Arg::Symbol(sym)] = inst.args.as_slice() {
            if op == "mov.u32" || op == "mov.b32" {
                let (d, w) = self.reg(d)?;
                if w != Width::B32 {
                    return Err(unsupported(format!("`{op}` of a symbol into a {w:?} register")));
                }
                self.shared_address(sym, Some(d))?;
                return Ok(());
            }
        }
        // Constant tables are in global memory, read only.
        let op = match op {
            "ld.const.u64" | "ld.const.b64" => "ld.global.nc.b64",
            other => other,
        };
        let mut o = Operands {
            form: op.to_owned(),
            ..Default::default()
        };
        self.operands(op, &inst.args, &mut o)?;
        if o.words.len() > INST_WORDS - 1 {
            return Err(unsupported(format!("`{op}` has {} operand words", o.words.len())));
        }
        self.push(&o.form, o.words, o.uses, o.defs, Flow::Next);
        Ok(())
    }

    /// Reads `args` of an instruction `op` into `o`: its form, words, uses
    /// and definitions.
    fn operands(&mut self, op: &str, args: &[Arg<'a>], o: &mut Operands) -> Result<(), Unsupported> {
        for (pos, arg) in args.iter().enumerate() {
            let dst = pos == 0 && writes_first(op);
            o.form.push(' ');
            match arg {
                Arg::Reg(name) => match self.kernel.width(name) {
                    Some(_) => {
                        let (id, w) = self.reg(name)?;
                        o.register(dst, id, w);
                    }
                    None if !dst => o.form.push_str(name),
                    None => return Err(unsupported(format!("writing `{name}`"))),
                },
                Arg::NotReg(name) => {
                    let (id, w) = self.reg(name)?;
                    if dst || w != Width::Pred {
                        return Err(unsupported(format!("operand `!{name}` of `{op}`")));
                    }
                    o.form.push_str("s!p");
                    o.words.push(Word::Reg(id));
                    o.uses.push(id);
                }
                Arg::Vector(regs) => {
                    o.form.push('{');
                    for (i, name) in regs.iter().enumerate() {
                        let (id, w) = self.reg(name)?;
                        if i > 0 {
                            o.form.push(',');
                        }
                        o.register(dst, id, w);
                    }
                    o.form.push('}');
                }
                Arg::Addr(base, offset) => {
                    let offset = i32::try_from(*offset).map_err(|_| unsupported("a 64-bit address offset"))?;
                    let (id, w) = match base {
                        Base::Reg(name) => self.reg(name)?,
                        Base::Symbol(sym) => (self.shared_address(sym, None)?, Width::B32),
                    };
                    if !matches!(w, Width::B32 | Width::B64) {
                        return Err(unsupported("an address in a narrow register"));
                    }
                    o.form.push_str(&format!("[a{}]", w.tag()));
                    o.words.push(Word::Reg(id));
                    o.words.push(Word::Raw(offset as u32));
                    o.uses.push(id);
                }
                Arg::Imm(imm, text) => {
                    if dst {
                        return Err(unsupported(format!("an immediate destination in `{op}`")));
                    }
                    if literal_immediates(op) {
                        o.form.push('=');
                        o.form.push_str(text);
                        continue;
                    }
                    let width =
                        imm_width(op, pos).ok_or_else(|| unsupported(format!("the type of `{text}` in `{op}`")))?;
                    let bits = match (imm, width) {
                        (Imm::F32(b), Width::B32) => u64::from(*b),
                        (Imm::F64(b), Width::B64) => *b,
                        (Imm::Int(v), Width::B64) => *v as u64,
                        (Imm::Int(v), Width::B32) => u64::from(*v as u32),
                        (Imm::Int(v), Width::B16) => u64::from(*v as u16),
                        (Imm::Int(v), Width::Pred) => u64::from(*v != 0),
                        _ => return Err(unsupported(format!("immediate `{text}` in `{op}`"))),
                    };
                    o.form.push('s');
                    o.form.push_str(width.tag());
                    o.words.push(Word::Const(width, bits));
                }
                Arg::Symbol(sym) => {
                    if dst || !self.shared.contains_key(sym) {
                        return Err(unsupported(format!("symbol `{sym}` in `{op}`")));
                    }
                    let id = self.shared_address(sym, None)?;
                    o.form.push_str("s32");
                    o.words.push(Word::Reg(id));
                    o.uses.push(id);
                }
            }
        }
        Ok(())
    }

    /// A carry pair, `add.cc.u64` then `addc.u64`, as one form: the carry
    /// flag lives only between two adjacent instructions of one case.
    fn carry_pair(&mut self, first: &Inst<'a>, second: &Inst<'a>) -> Result<(), Unsupported> {
        let mut o = Operands {
            form: first.op.to_owned(),
            ..Default::default()
        };
        self.operands(first.op, &first.args, &mut o)?;
        let written = o.defs.clone();
        o.form.push_str(" ;");
        let before = o.uses.len();
        o.form.push(' ');
        o.form.push_str(second.op);
        self.operands(second.op, &second.args, &mut o)?;
        // The case loads every operand before either instruction runs.
        if o.uses[before..].iter().any(|u| written.contains(u)) {
            return Err(unsupported("an `addc` reading what its `add.cc` wrote"));
        }
        if o.words.len() > INST_WORDS - 1 {
            return Err(unsupported("a carry pair with more than seven operand words"));
        }
        self.push(&o.form, o.words, o.uses, o.defs, Flow::Next);
        Ok(())
    }

    /// The kernel's body: labels, instructions, carry pairs.
    fn body(&mut self, body: &[Line<'a>]) -> Result<(), Unsupported> {
        let mut i = 0;
        while i < body.len() {
            match &body[i] {
                Line::Label(l) => {
                    self.labels.insert((*l).to_owned(), self.out.len() as u32);
                }
                Line::Inst(inst) if inst.op.contains(".cc") => {
                    let Some(Line::Inst(next)) = body.get(i + 1) else {
                        return Err(unsupported(format!("`{}` without its carry reader", inst.op)));
                    };
                    let pair = matches!(
                        (inst.op, next.op),
                        ("add.cc.u64", "addc.u64") | ("add.cc.u32", "addc.u32")
                    );
                    if !pair || inst.guard.is_some() || next.guard.is_some() {
                        return Err(unsupported(format!("`{}` then `{}`", inst.op, next.op)));
                    }
                    self.carry_pair(inst, next)?;
                    i += 1;
                }
                Line::Inst(inst) => self.inst(inst)?,
            }
            i += 1;
        }
        Ok(())
    }

    /// Liveness, slots, constants and the code words.
    fn finish(self, block_threads: u32, max_shared: u32) -> Result<Code, Unsupported> {
        let n = self.out.len();
        let nregs = self.regs.widths.len();
        let forms: Vec<u32> = self
            .out
            .iter()
            .map(|v| form_index(&v.form).ok_or_else(|| unsupported(format!("form `{}`", v.form))))
            .collect::<Result<_, _>>()?;
        // Live-in sets by backward iteration to a fixed point.
        let words_per = nregs.div_ceil(64).max(1);
        let mut live_in = vec![0u64; n * words_per];
        let succ = |i: usize| -> [Option<usize>; 2] {
            match self.out[i].flow {
                Flow::Next => [Some(i + 1).filter(|&s| s < n), None],
                Flow::Jump(t) => [Some(t as usize), None],
                Flow::JumpIf(t) | Flow::JumpIfNot(t) => [Some(i + 1).filter(|&s| s < n), Some(t as usize)],
                Flow::Exit => [None, None],
            }
        };
        let mut live_out = vec![0u64; n * words_per];
        loop {
            let mut changed = false;
            for i in (0..n).rev() {
                let mut out = vec![0u64; words_per];
                for s in succ(i).into_iter().flatten() {
                    for (o, l) in out.iter_mut().zip(&live_in[s * words_per..(s + 1) * words_per]) {
                        *o |= l;
                    }
                }
                let mut inn = out.clone();
                for &d in &self.out[i].defs {
                    inn[d as usize / 64] &= !(1 << (d % 64));
                }
                for &u in &self.out[i].uses {
                    inn[u as usize / 64] |= 1 << (u % 64);
                }
                live_out[i * words_per..(i + 1) * words_per].copy_from_slice(&out);
                let slot = &mut live_in[i * words_per..(i + 1) * words_per];
                if slot != inn.as_slice() {
                    slot.copy_from_slice(&inn);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Each register's interval: every instruction where it is live or written.
        let mut interval: Vec<Option<(usize, usize)>> = vec![None; nregs];
        let mut touch = |r: usize, i: usize| {
            let e = interval[r].get_or_insert((i, i));
            e.0 = e.0.min(i);
            e.1 = e.1.max(i);
        };
        for i in 0..n {
            for r in 0..nregs {
                let bit = 1u64 << (r % 64);
                if (live_in[i * words_per + r / 64] | live_out[i * words_per + r / 64]) & bit != 0 {
                    touch(r, i);
                }
            }
            for &d in &self.out[i].defs {
                touch(d as usize, i);
            }
        }
        // Linear scan, per plane kind (64-bit registers in their own planes).
        let mut slot = vec![0u32; nregs];
        let mut planes = [0u32; 2];
        for wide in [false, true] {
            let mut order: Vec<(usize, usize, usize)> = (0..nregs)
                .filter(|&r| (self.regs.widths[r] == Width::B64) == wide)
                .filter_map(|r| interval[r].map(|(s, e)| (s, e, r)))
                .collect();
            order.sort_unstable();
            let mut active: Vec<(usize, u32)> = vec![];
            let mut free: Vec<u32> = vec![];
            for (start, end, r) in order {
                active.retain(|&(e, s)| {
                    if e < start {
                        free.push(s);
                        false
                    } else {
                        true
                    }
                });
                free.sort_unstable_by(|a, b| b.cmp(a));
                let s = free.pop().unwrap_or_else(|| {
                    planes[wide as usize] += 1;
                    planes[wide as usize] - 1
                });
                slot[r] = s;
                active.push((end, s));
            }
        }
        // Constants: 64-bit first (8-aligned), then 32-bit ones.
        let consts_offset = self.args_offset + 8 * ARGS as u32;
        let mut consts: Vec<(Width, u64)> = self
            .out
            .iter()
            .flat_map(|v| &v.words)
            .filter_map(|w| match w {
                Word::Const(width, bits) => Some((*width, *bits)),
                _ => None,
            })
            .collect();
        consts.sort_unstable_by_key(|&(w, b)| (w != Width::B64, b, w.tag()));
        consts.dedup();
        let mut const_words = vec![];
        let mut const_at = HashMap::new();
        for &(w, bits) in &consts {
            const_at.insert((w, bits), consts_offset + 4 * const_words.len() as u32);
            if w == Width::B64 {
                const_words.extend([bits as u32, (bits >> 32) as u32]);
            } else {
                const_words.push(bits as u32);
            }
        }
        // In 64 bits: the program's arrays may already take most of 4 GiB.
        let align16 = |x: u64| x.next_multiple_of(16);
        let regs32 = align16(u64::from(consts_offset) + 4 * const_words.len() as u64);
        let regs64 = align16(regs32 + u64::from(planes[0]) * u64::from(block_threads) * 4);
        let total = regs64 + u64::from(planes[1]) * u64::from(block_threads) * 8;
        if total > u64::from(max_shared) {
            return Err(unsupported(format!(
                "{total} bytes of shared memory ({} + {} register planes of {block_threads} threads)",
                planes[0], planes[1]
            )));
        }
        // All within `max_shared`, a u32.
        let (regs32, regs64, total) = (regs32 as u32, regs64 as u32, total as u32);
        let mut words = vec![0u32; INST_WORDS * (1 + n)];
        let header = [
            MAGIC,
            self.args_offset,
            consts_offset,
            const_words.len() as u32,
            (INST_WORDS * (1 + n)) as u32,
            self.kernel.params.len() as u32,
        ];
        words[..header.len()].copy_from_slice(&header);
        debug_assert!(header.len() <= HEADER_WORDS);
        for (i, v) in self.out.iter().enumerate() {
            let at = INST_WORDS * (1 + i);
            words[at] = forms[i];
            for (k, w) in v.words.iter().enumerate() {
                words[at + 1 + k] = match *w {
                    Word::Reg(r) => {
                        let s = slot[r as usize];
                        if self.regs.widths[r as usize] == Width::B64 {
                            regs64 + s * block_threads * 8
                        } else {
                            regs32 + s * block_threads * 4
                        }
                    }
                    Word::Uniform(off) => off | CONST_FLAG,
                    Word::Const(w, bits) => const_at[&(w, bits)] | CONST_FLAG,
                    Word::Raw(x) => x,
                    Word::Label(t) => t,
                    // Filled in once the tables are placed.
                    Word::Table(_) => 0,
                };
            }
        }
        words.extend(const_words);
        // Constant tables, 8-byte aligned (the code buffer is).
        let mut table_at = vec![];
        for (_, values) in &self.kernel.tables {
            if words.len() % 2 == 1 {
                words.push(0);
            }
            table_at.push(words.len() as u32);
            words.extend(values.iter().flat_map(|&v| [v as u32, (v >> 32) as u32]));
        }
        for (i, v) in self.out.iter().enumerate() {
            for (k, w) in v.words.iter().enumerate() {
                if let Word::Table(t) = *w {
                    words[INST_WORDS * (1 + i) + 1 + k] = table_at[t];
                }
            }
        }
        Ok(Code {
            max_form: forms.iter().copied().max().unwrap_or(0),
            words,
            shared_bytes: total,
            block_threads,
            program_shared: self.shared_bytes,
            instructions: n,
            planes,
        })
    }
}

/// An instruction's form, operand words, and registers read and written,
/// as its operands are read.
#[derive(Default)]
struct Operands {
    form: String,
    words: Vec<Word>,
    uses: Vec<u32>,
    defs: Vec<u32>,
}

impl Operands {
    /// A register operand: its role and width into the form, its slot into
    /// the words, and the register into the uses or definitions.
    fn register(&mut self, dst: bool, id: u32, w: Width) {
        self.form.push_str(if dst { "d" } else { "s" });
        self.form.push_str(w.tag());
        self.words.push(Word::Reg(id));
        if dst {
            self.defs.push(id);
        } else {
            self.uses.push(id);
        }
    }
}

/// The forms of `ptx`'s instructions, in order (for building the form list).
pub(crate) fn forms_of(ptx: &str) -> Result<Vec<String>, Unsupported> {
    let mut out = lower(ptx)?.out;
    // Not the exit `lower` adds after the kernel's last instruction.
    out.pop();
    Ok(out.into_iter().map(|v| v.form).collect())
}
