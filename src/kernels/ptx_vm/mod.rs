//! An interpreter of `ptx_gen`'s PTX that runs on the GPU, so a new program
//! runs its first call without waiting for the driver's JIT.
//!
//! The driver's JIT costs milliseconds per module before it looks at a
//! single instruction, and more for every instruction after that, so a new
//! fused kernel waits tens of milliseconds for its first launch (see
//! `benches/NOTES.md`, v16). The interpreter is one
//! module, compiled once per device (in the background when its compiler
//! opens); a new program is *assembled* for it in microseconds and runs at
//! once, while its own module compiles.
//!
//! # How it runs
//!
//! [`assemble`] reads the PTX `ptx_gen` wrote for a program and turns every
//! instruction into a numbered *form*: its mnemonic and the width and role
//! of each operand (`fma.rn.f32 d32 s32 s32 s32`), followed by up to seven
//! 32-bit operand words. Registers get slots in shared memory, one plane of
//! `block_threads` words per slot, given out by live range so a kernel of
//! hundreds of virtual registers needs a few dozen planes; immediates and
//! the kernel's parameters become uniform values beside them. Guarded
//! instructions become a branch around the instruction.
//!
//! [`interpreter`] writes the interpreter: a loop that fetches a form
//! number and its words, jumps through a `brx.idx` table to the form's
//! case, loads the operands from their slots, executes **the same PTX
//! instruction** with the same modifiers, and stores the results. It is
//! launched with the program's grid and block, so `%tid`, `%ctaid`, shuffles
//! and barriers mean what they meant; the program's shared arrays sit at
//! the start of the interpreter's dynamic shared memory. Since every
//! operation is the instruction the compiled kernel would execute, in the
//! same order on the same values, the results are bit for bit those of the
//! compiled module (the GPU tests check this).
//!
//! A program with an instruction outside the interpreter's forms (see
//! [`forms`]), more than [`ARGS`] parameters, or more shared memory than a
//! block may have is reported as [`Unsupported`], and its first call waits
//! for the JIT as before.

mod assemble;
pub mod emulate;
mod kernel;
mod parse;
#[cfg(test)]
mod tests;

pub use kernel::{interpreter, ENTRY};

use crate::kernels::ptx_gen::PtxModule;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Words per instruction: the form number and up to seven operand words.
pub const INST_WORDS: usize = 8;
/// The header occupies the first instruction's words.
pub(crate) const HEADER_WORDS: usize = INST_WORDS;
/// The most kernel parameters an assembled program may have.
pub const ARGS: usize = 16;
/// Set on an operand word that names a uniform value (a constant or a
/// parameter) rather than a per-thread register slot.
pub(crate) const CONST_FLAG: u32 = 1 << 31;
/// The header's first word.
pub(crate) const MAGIC: u32 = 0x6d76_6674;

/// Why a program cannot run on the interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the interpreter cannot run this kernel: {}", self.0)
    }
}

/// A program assembled for the interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// The header, the instructions ([`INST_WORDS`] words each), then the
    /// constants' words; upload as is.
    pub words: Vec<u32>,
    /// Dynamic shared memory per block: the program's shared arrays, the
    /// parameters, the constants and the register planes.
    pub shared_bytes: u32,
    /// Threads per block the register planes are laid out for.
    pub block_threads: u32,
    /// Bytes of the program's own shared arrays.
    pub program_shared: u32,
    /// Instructions, the final exit included.
    pub instructions: usize,
    /// Register planes: 32-bit, 64-bit.
    pub planes: [u32; 2],
    /// The highest form number the code uses: an interpreter of the first
    /// `max_form + 1` forms runs it.
    pub max_form: u32,
}

/// The interpreter's own forms, ahead of the PTX ones.
const INTERNAL: [&str; 6] = [
    "vm.exit",
    "vm.jmp",
    "vm.brz sp",
    "vm.brnz sp",
    "vm.smem d32",
    "vm.table d64",
];

/// Every form the interpreter executes, by number: its own control forms,
/// then the PTX instruction forms of `forms.txt`.
pub fn forms() -> &'static [&'static str] {
    &form_table().0
}

/// How many of [`forms`] make the *core*: the interpreter's control forms
/// and every form of the suite's and the PTX fuzzer's kernels. A module of
/// the core alone loads in about a quarter of the time of the full one; see
/// [`interpreter`].
pub fn core_forms() -> usize {
    form_table().1
}

fn form_table() -> &'static (Vec<&'static str>, usize) {
    static FORMS: OnceLock<(Vec<&'static str>, usize)> = OnceLock::new();
    FORMS.get_or_init(|| {
        let mut forms: Vec<&'static str> = INTERNAL.to_vec();
        let mut core = None;
        for line in include_str!("forms.txt").lines().map(str::trim) {
            if line == "# end of core" {
                core = Some(forms.len());
            } else if !line.is_empty() && !line.starts_with('#') {
                forms.push(line);
            }
        }
        let core = core.unwrap_or(forms.len());
        (forms, core)
    })
}

pub(crate) fn form_index(form: &str) -> Option<u32> {
    static INDEX: OnceLock<HashMap<&'static str, u32>> = OnceLock::new();
    INDEX
        .get_or_init(|| forms().iter().enumerate().map(|(i, f)| (*f, i as u32)).collect())
        .get(form)
        .copied()
}

/// Assembles `module` for the interpreter, within `max_shared` bytes of
/// shared memory per block.
pub fn assemble(module: &PtxModule, max_shared: u32) -> Result<Code, Unsupported> {
    assemble::assemble(&module.text, module.block_threads, max_shared)
}

/// The instruction forms of a kernel's PTX, in order, whether or not the
/// interpreter has them: for extending `forms.txt`.
pub fn forms_of(ptx: &str) -> Result<Vec<String>, Unsupported> {
    assemble::forms_of(ptx)
}
