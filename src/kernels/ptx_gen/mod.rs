//! PTX generation: one tile program to one PTX module, as text.
//!
//! [`generate`] lowers a [`Program`] for a [`PtxTarget`]: one CTA per grid point
//! (the N-d grid flattened into `%ctaid.x`, spilling into `%ctaid.y` past
//! 2³¹ − 1 blocks, and decomposed by div/mod in 64 bits), each tile spread
//! over the block's threads as `(group, repeat, atom)` (see `layout`), each
//! instruction lowered by a table from op and dtype to PTX (see `ops`).
//! This module returns a `String` and never touches a driver.
//!
//! # Example
//!
//! ```
//! use tilefuse::kernels::ptx_gen::{generate, PtxTarget};
//! # use tilefuse::kernels::ir::*;
//! # use tilefuse::{DType, Scalar};
//! # use smallvec::smallvec;
//! # let view = |param| View { param: ParamId(param), extents: smallvec![8], strides: smallvec![1],
//! #     offset: 0, lower: smallvec![], upper: smallvec![], tile: smallvec![8], padding: Default::default() };
//! # let param = |name: &str, access| Param { name: name.into(), dtype: DType::F32, len: 8, access, init: None };
//! # let ty = ValueType { dtype: DType::F32, shape: smallvec![8] };
//! # let program = Program { name: "add_one".into(),
//! #     params: vec![param("x", Access::Read), param("y", Access::Write)], scalars: vec![], views: vec![view(0), view(1)],
//! #     values: vec![ty.clone(), ty.clone(), ty], accs: vec![], loops: 0, grid: smallvec![1],
//! #     body: vec![
//! #         Inst::Load { dst: ValueId(0), view: ViewId(0), index: smallvec![IndexExpr::constant(0)], masked: false },
//! #         Inst::Const { dst: ValueId(1), value: ScalarKey(Scalar::Float(1.0, DType::F32)) },
//! #         Inst::Binary { dst: ValueId(2), op: tilefuse::graph::BinaryOp::Add, lhs: ValueId(0), rhs: ValueId(1) },
//! #         Inst::Store { view: ViewId(1), index: smallvec![IndexExpr::constant(0)], src: ValueId(2), masked: false },
//! #     ], math: MathMode::Precise, accuracy: Default::default() };
//! let module = generate(&program, &PtxTarget::for_driver(90, 13000))?;
//! assert!(module.text.contains(".target sm_90"));
//! assert_eq!(module.block_threads, 32);
//! # Ok::<(), tilefuse::Error>(())
//! ```
//!
//! # Numerics
//!
//! Float `+ - *` are `.rn` (never contracted into fma, as on the CPU);
//! `max`/`min` propagate NaN (`max.NaN.f32`; f64, and f32 before sm_80, by `setp.nan` + `selp`);
//! f16/bf16 move as 16 bits and convert with `cvt.f32.f16`, a shift (bf16),
//! `cvt.rn.f16.f32` and `cvt.rn.bf16.f32` (integer rounding before sm_80), rounding f64 and integer sources
//! to f32 by round-to-odd first so they round once. Integer division by zero
//! gives 0; float to integer truncates into i64 (saturating, NaN to 0) and
//! wraps, as `Scalar::cast` does.
//!
//! In [`MathMode::Precise`](crate::kernels::ir::MathMode::Precise) `/`, `sqrt`, `1/x` are `div.rn`, `sqrt.rn`,
//! `rcp.rn` (an f32 division by, or reciprocal of, a value every thread
//! holds, such as a row's sum, is a Newton-refined f64 reciprocal and
//! product rounded once, which equals `div.rn`/`rcp.rn`), `rsqrt` is
//! `rcp.rn(sqrt.rn(x))` and the f32 transcendentals are
//! the range-reduced sequences of `math`: IEEE-rounded operations plus the
//! hardware `ex2.approx.f32` (in `exp`, `exp2`, `tanh`, `pow`, `sigmoid`,
//! `silu`; `gelu_tanh` uses its flush-to-zero form) and
//! `rcp.approx.ftz.f32` of arguments near `[1, 2]`, where flushing changes
//! nothing, refined by Newton steps (in `tanh`, `sigmoid`, `silu`;
//! `gelu_tanh` takes one unrefined reciprocal of `1 + e^{-z}`). Their worst errors against f64, measured by running the same
//! sequences on the CPU (`math::tests`): the IEEE operations exactly, the two
//! approximations at the exact value and at the extremes of their documented
//! bounds (2 ulp, 1 ulp), so these bound the GPU's errors on the samples:
//!
//! | function | range | worst error |
//! | --- | --- | --- |
//! | exp | [−103, 88.7] | 2.50 ulp |
//! | exp2 | [−149, 127.9] | 2.00 ulp |
//! | log | [1e-38, 3e38] | 0.71 ulp |
//! | log2 | [1e-38, 3e38] | 1.25 ulp |
//! | sin | [−1e4, 1e4] | 1.68 ulp |
//! | cos | [−1e4, 1e4] | 1.73 ulp |
//! | tanh | [−10, 10] | 1.64 ulp |
//! | sigmoid | [−80, 80] | 4.74 ulp, at x ≈ −4.8 |
//! | silu | [−80, 80] | 5.42 ulp, at x ≈ −1.9 |
//! | gelu_tanh | [−5, 10] | 39 ulp, at x ≈ −4.9; ±0 below x ≈ −9.1 |
//! | gelu_erf | [−5, 10] | 28 ulp, at x ≈ −5 |
//! | pow | a in [0.01, 10], b in [−8, 8] | 17 ulp |
//!
//! `exp` and `exp2` are as accurate as the hardware `ex2` allows (its 2 ulp
//! plus the final rounding); everything but sigmoid, silu, the two GELUs
//! and `pow` is within 2.5 ulp. `sigmoid` and `silu` carry the relative
//! error of the hardware `ex2` of `−|z|` into `e/(1 + e)` for negative `z`,
//! about 4 ulp of a result at the top of a binade; the IEEE-only
//! exponential would keep them near 2 ulp but costs about three times the
//! instructions. The GELUs' and `pow`'s errors come from rounding the f32
//! argument of the inner exponential (`2u` for gelu_tanh, `z²` for
//! gelu_erf) or from `log2` (`pow`), so they grow with that argument: the
//! negative tails of the GELUs (x < −5), where the result is below 1e-5,
//! and large `|b log2 a|` are less accurate still.
//!
//! A program whose written results are all f16 or bf16 (its
//! [`Accuracy`](crate::kernels::ir::Accuracy), set by the fusion pass) cannot
//! show those last f32 ulps: its `exp`, `log`, `log2`, `tanh`, `sigmoid`,
//! `silu` and `pow` take the shorter sequences of `math_half` (the hardware
//! `ex2` of the rounded product, no argument correction; unrefined hardware
//! reciprocals; `log` without a division; bf16's `tanh` is `tanh.approx.f32`,
//! sm_75 on), about half the instructions. `exp2` is `ex2` at every
//! accuracy; `sin`, `cos` and the GELUs keep the f32 sequences. Measured as
//! above (`math_half::tests`, the models also at the extremes of
//! `tanh.approx`'s 2^-10.987), the worst distance of the rounded result from
//! the exact value, in ulps of the output dtype (correct rounding is 0.5),
//! and the worst relative error of the f32 value before rounding:
//!
//! | function | f16 results: range, ulp, relative | bf16 results: range, ulp, relative |
//! | --- | --- | --- |
//! | exp | [−17.5, 11.08]: 0.501, 2^-20.5 | [−92, 88.7]: 0.500, 2^-17.9 |
//! | log | [1e-38, 3e38]: 0.500, 2^-22.0 | [1e-38, 3e38]: 0.500, 2^-22.0 |
//! | log2 | [1e-38, 3e38]: 0.500, 2^-21.8 | [1e-38, 3e38]: 0.500, 2^-21.8 |
//! | tanh | [−10, 10]: 0.500, 2^-20.4 | [−10, 10]: 0.626, 2^-11.0 |
//! | sigmoid | [−20, 20]: 0.500, 2^-20.4 | [−92, 88]: 0.500, 2^-17.9 |
//! | silu | [−20, 20]: 0.501, 2^-19.8 | [−92, 88]: 0.502, 2^-15.2 |
//! | pow | a in [0.05, 10], b in [−3, 3]: 0.501 | the same: 0.501 |
//!
//! A program with any f32, f64, integer or boolean result (the partials of
//! a split reduction included) keeps the f32 sequences.
//!
//! In [`MathMode::Fast`](crate::kernels::ir::MathMode::Fast) f32 uses the hardware approximations
//! (`ex2.approx.ftz`, `lg2.approx.ftz`, `sin/cos.approx.ftz`,
//! `tanh.approx`, `rsqrt.approx`, `rcp.approx`, `sqrt.approx`,
//! `div.approx`; sigmoid, silu and gelu_tanh through `tanh.approx`);
//! `gelu_erf` and `pow` stay precise.
//!
//! f64 transcendentals (in either mode) are the sequences of `math64`, IEEE
//! operations only, so the CPU runs them bit for bit as the GPU does (a GPU
//! test checks that on every binade of both signs, a sweep of [−800, 800]
//! and the specials). Worst distances, in whole ulps, from the standard
//! library's f64 functions (`math64::tests`; those are themselves within
//! about an ulp of the exact values, so against exact values add up to one):
//!
//! | function | range | worst error |
//! | --- | --- | --- |
//! | exp | [−745, 709.7] | 1 ulp |
//! | exp2 | [−1074, 1023.9] | 1 ulp |
//! | log, log2 | [1e-320, 1.7e308] | 1 ulp |
//! | sin, cos | [−1e6, 1e6], and [1e6, 1e300] | 1 ulp |
//! | tanh | [−25, 25] | 3 ulp |
//! | sigmoid | [−700, 700] | 3 ulp |
//! | silu | [−700, 700] | 3 ulp |
//! | gelu_tanh | [−5, 10] | 4 ulp (against a double-double argument) |
//! | gelu_erf | [−37, 10] | 7 ulp against the reference evaluator's f64 `gelu_erf`; within 1 ulp of 50-digit values at 13 points, subnormal results included |
//! | pow | a in [0.01, 10], b in [−8, 8]; a in [0.5, 2], b in [−1000, 1000]; a in [1e-300, 1e300], b in [−1, 1] | 1, 2, 1 ulp |
//!
//! `sin` and `cos` reduce every finite argument exactly enough (Payne–Hanek
//! past 10⁶; the hardest double, `x mod π/2 ≈ 4.7e-19`, is correctly
//! rounded). `sigmoid`, `silu`, `gelu_tanh` and `gelu_erf` apply the scale
//! of `e^{−|z|}` last, so tiny and subnormal results are rounded once
//! (within 2 ulp of 60-digit values in the tests).

mod emitter;
mod exchange;
mod last_point;
mod layout;
mod math;
mod math_half;
pub(crate) mod math64;
mod memory;
mod ops;
#[doc(hidden)]
pub mod ptxas;
mod reload;

pub use crate::config::{CodegenConfig, RunStaging, StageCopy};
use crate::error::{Error, Result};
use crate::kernels::ir::{Access, Inst, Program};
use emitter::Emitter;

/// The GPU and driver a module is generated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PtxTarget {
    /// The compute capability as `major * 10 + minor` (80, 90, ...).
    pub sm: u32,
    /// The newest PTX ISA version the driver accepts.
    pub ptx_version: (u32, u32),
    /// The device's streaming multiprocessors, where known (0: not known);
    /// see [`PtxTarget::with_sms`].
    pub sms: u32,
}

impl PtxTarget {
    /// The target for compute capability `sm` under a driver reporting
    /// `driver_version` (`cuDriverGetVersion`: 12080 for CUDA 12.8).
    pub fn for_driver(sm: u32, driver_version: u32) -> PtxTarget {
        let (major, minor) = (driver_version / 1000, (driver_version % 1000) / 10);
        let ptx_version = match major {
            0..=10 => (6, 4),
            11 => (7, minor.min(8)),
            12 => match minor {
                0..=4 => (8, minor),
                5 | 6 => (8, 5),
                7 | 8 => (8, 7),
                _ => (8, 8),
            },
            _ => (9, minor),
        };
        PtxTarget { sm, ptx_version, sms: 0 }
    }

    /// This target on a device of `sms` streaming multiprocessors: a grid
    /// that fits one wave of resident blocks there asks ptxas for as many
    /// resident blocks as that wave needs (up to 1024 resident threads, a
    /// budget of 64 registers a thread), rather than running in two.
    pub fn with_sms(self, sms: u32) -> PtxTarget {
        PtxTarget { sms, ..self }
    }

    /// The oldest PTX ISA version that can target `sm_<sm>`.
    pub fn min_version(&self) -> (u32, u32) {
        match self.sm {
            0..=75 => (6, 3),
            80 => (7, 0),
            81..=86 => (7, 1),
            87 => (7, 4),
            88..=90 => (7, 8),
            91..=100 => (8, 6),
            _ => (8, 7),
        }
    }
}

/// A generated module and how to launch it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxModule {
    /// The PTX text.
    pub text: String,
    /// The name of its one `.entry`.
    pub entry: String,
    /// Threads per block.
    pub block_threads: u32,
    /// Blocks in all: the product of the program's grid.
    pub grid_blocks: u64,
    /// The chosen thread mapping, human-readable (also a comment in `text`).
    pub mapping: String,
    /// Bytes of static shared memory per block: the exchanges' and the
    /// staged tiles'.
    pub shared_bytes: u32,
}

/// The most blocks along `%ctaid.x`.
const MAX_GRID_X: u64 = (1 << 31) - 1;

impl PtxModule {
    /// The launch grid `(x, y)`: all blocks along x, or rows of `2^31 − 1`
    /// along y when there are more (blocks past the end exit at once).
    pub fn grid_dims(&self) -> (u32, u32) {
        let x = self.grid_blocks.clamp(1, MAX_GRID_X);
        (x as u32, self.grid_blocks.div_ceil(x).max(1) as u32)
    }
}

/// The `.version` to write: the target's minimum raised to what the program
/// needs, or an error when that is above what the driver accepts.
pub fn choose_version(program: &str, target: &PtxTarget, needs: (u32, u32)) -> Result<(u32, u32)> {
    let v = target.min_version().max(needs);
    if v > target.ptx_version {
        return Err(Error::InvalidProgram {
            program: program.to_string(),
            reason: format!(
                "needs PTX ISA {}.{} for sm_{}, but the driver accepts at most {}.{}",
                v.0, v.1, target.sm, target.ptx_version.0, target.ptx_version.1
            ),
        });
    }
    Ok(v)
}

/// Lowers `program` (which must pass the verifier) to a PTX module for
/// `target`, under the default [`CodegenConfig`].
pub fn generate(program: &Program, target: &PtxTarget) -> Result<PtxModule> {
    generate_with(program, target, &CodegenConfig::default())
}

/// [`generate`] under the quick tier's settings ([`CodegenConfig::quick`]
/// of the default): every loop written once and marked `nounroll`, the
/// reciprocals of row values (an f32 every thread holds) through a
/// Newton-refined f64 reciprocal rather than `rcp.rn`, and a program
/// without reductions or loops spread one element per thread, so its
/// per-element code is written once, not once per element of a 16-byte
/// atom: a module the driver's JIT compiles faster, for a program's first
/// call while the [`generate`]d one is loaded in the background. It
/// computes the same values: the same operations in the same order on
/// every element, and reciprocals rounded the same. It carries no load
/// cache policy besides the staging copies', which only the tuned module
/// measures, so the PTX interpreter (`ptx_vm`) can run it.
pub fn generate_quick(program: &Program, target: &PtxTarget) -> Result<PtxModule> {
    generate_with(program, target, &CodegenConfig::default().quick())
}

/// [`generate`] under the settings `tuning`.
///
/// A block's static shared memory is limited to 48 KiB in all. Staged
/// tiles take at most `STAGE_LIMIT` of it and an exchange at most the
/// whole, so a kernel with both may need more; it is generated again
/// without staging, its tiles kept in registers.
pub fn generate_with(program: &Program, target: &PtxTarget, tuning: &CodegenConfig) -> Result<PtxModule> {
    // `cp.async` needs sm_80: before it, a staged tile goes to shared
    // memory through registers.
    let through_registers;
    let tuning = if target.sm < 80 && tuning.stage_copy != StageCopy::Registers {
        through_registers = CodegenConfig {
            stage_copy: StageCopy::Registers,
            ..tuning.clone()
        };
        &through_registers
    } else {
        tuning
    };
    let module = generate_once(program, target, tuning)?;
    if module.shared_bytes > exchange::SHARED_LIMIT && (tuning.stage || tuning.stage_runs != RunStaging::Off) {
        let unstaged = CodegenConfig {
            stage: false,
            stage_runs: RunStaging::Off,
            ..tuning.clone()
        };
        return generate_once(program, target, &unstaged);
    }
    Ok(module)
}

/// [`generate_with`], as the tuning says.
fn generate_once(program: &Program, target: &PtxTarget, tuning: &CodegenConfig) -> Result<PtxModule> {
    crate::kernels::ir::verify(program)?;
    let mut reloaded = if tuning.reload || tuning.stage {
        reload::reload_after_reductions(program)
    } else {
        None
    };
    // A row the default would stage, held across two or more reductions,
    // stays in registers instead (`CodegenConfig::chained_rows_in_registers`).
    let chained;
    let tuning = if tuning.stage
        && !tuning.reload
        && tuning.chained_rows_in_registers
        && reloaded.is_some()
        && chained_rows_fit_registers(program)
    {
        reloaded = None;
        chained = CodegenConfig {
            stage: false,
            max_threads: 512,
            resident_threads: 2048,
            load_keep: tuning.load_keep.or(tuning.chained_rows_keep),
            ..tuning.clone()
        };
        &chained
    } else {
        tuning
    };
    if let Some((p, _)) = &reloaded {
        crate::kernels::ir::verify(p)?;
    }
    let program = reloaded.as_ref().map_or(program, |(p, _)| p);
    // The most threads a block starts from, and the cap on its atom.
    let (most, atom_cap) = if tuning.one_element_per_thread && layout::elementwise_only(&program.body) {
        (1024, 1)
    } else if tuning.stage && reloaded.is_some() {
        // A kernel whose row is staged in shared memory runs wider blocks:
        // the row no longer takes registers, so more of its rows are in
        // flight.
        (tuning.staged_threads, u32::MAX)
    } else {
        (tuning.max_threads, u32::MAX)
    };
    let mut block = layout::choose_block_aligned(program, most, atom_cap);
    // A staged kernel whose threads would hold one atom of its largest tile
    // each spends its time in the block's reductions, not its loads: its
    // block halves (to 128 threads at least) until a thread holds two
    // (`benches/NOTES.md`, v40 and v42).
    if tuning.stage && reloaded.is_some() {
        while block.threads > 128 && layout::atoms_per_thread(program, block) < 2 {
            block = layout::choose_block_aligned(program, block.threads / 2, atom_cap);
        }
    }
    let grid_blocks: u64 = program.grid.iter().product();
    let entry = format!(
        "tf_{}",
        program
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect::<String>()
    );
    let mut e = Emitter::new(program, target, block, tuning);
    if let Some((_, values)) = &reloaded {
        e.reloads.extend(values.iter().copied());
    }
    e.begin(&entry, grid_blocks, grid_blocks > MAX_GRID_X);
    e.init_accs()?;
    e.block_of(&program.body)?;
    let mut mapping = vec![format!("block {} threads, grid {grid_blocks} blocks", block.threads)];
    mapping.append(&mut std::mem::take(&mut e.mapping));
    let mapping = mapping.join("\n");
    let version = choose_version(&program.name, target, e.needs_version)?;
    let shared_bytes = e.shared_bytes + e.staged_bytes + e.run_bytes;
    let params: Vec<String> = (0..program.params.len() + program.scalars.len())
        .map(|i| format!("\t.param .u64 {entry}_param_{i}"))
        .collect();
    let mut header = format!(
        "//\n// Generated by tilefuse for program `{}`.\n//\n.version {}.{}\n.target sm_{}\n.address_size 64\n\n",
        program.name, version.0, version.1, target.sm
    );
    for line in mapping.lines() {
        header.push_str(&format!("// mapping: {line}\n"));
    }
    for decl in &e.module_decls {
        header.push_str(decl);
        header.push('\n');
    }
    // `.minnctapersm` asks for 512 resident threads per SM, which gives ptxas
    // a budget of 128 registers a thread. Left to `.maxntid` alone it may
    // aim at more resident blocks and spill to local memory to get there.
    // A kernel with a staged row holds little in registers and asks for
    // 2048 (a full SM: 32 registers), so that a few more live values (an
    // f64 reciprocal) do not cost it a resident block.
    // Unless its accumulators alone would take most of those 32 registers
    // (the four of a long row's shifted variance spilled).
    let words: Vec<usize> = e
        .accs
        .iter()
        .zip(&program.accs)
        .map(|(regs, a)| regs.len() * a.ty.dtype.size_in_bytes().div_ceil(4))
        .collect();
    let acc_words: usize = words.iter().sum();
    let resident = if e.staged_bytes > 0 && acc_words <= STAGED_ACC_WORDS {
        tuning.staged_resident_threads
    } else {
        tuning.resident_threads
    };
    let mut blocks = (resident / block.threads).max(1);
    if point_acc_words(program, &words) <= WAVE_ACC_WORDS {
        blocks = one_wave(grid_blocks, target.sms, block.threads, blocks);
    }
    let residency = format!(".minnctapersm {blocks}");
    header.push_str(&format!(
        ".visible .entry {entry}(\n{}\n)\n.maxntid {}, 1, 1\n{residency}\n",
        params.join(",\n"),
        block.threads,
    ));
    Ok(PtxModule {
        text: e.finish(&header),
        entry,
        block_threads: block.threads,
        grid_blocks,
        mapping,
        shared_bytes,
    })
}

/// The resident threads per SM that [`one_wave`] asks for at most: 64
/// registers a thread.
const WAVE_RESIDENT: u32 = 1024;

/// The most 32-bit words of accumulators a thread holds where [`one_wave`]
/// applies: more leave too few of the 64 registers for the loads, and
/// spill (`benches/NOTES.md`, v42).
const WAVE_ACC_WORDS: usize = 16;

/// The resident blocks per SM to ask for: `blocks`, or more where a grid of
/// `grid` blocks of `threads` would then run in one wave over `sms` SMs
/// and not in two or more: the last wave's few blocks would leave most SMs
/// idle while they run (`benches/NOTES.md`, v40, v42).
fn one_wave(grid: u64, sms: u32, threads: u32, blocks: u32) -> u32 {
    if sms == 0 {
        return blocks;
    }
    let need = grid.div_ceil(sms as u64);
    if need > blocks as u64 && need * threads as u64 <= WAVE_RESIDENT as u64 {
        need as u32
    } else {
        blocks
    }
}

/// The 32-bit words of accumulators a thread holds outside last-point
/// sections, `words` a thread of each of `program`'s: a last-point section
/// runs once per group of points, so what it spills costs little.
fn point_acc_words(program: &Program, words: &[usize]) -> usize {
    fn mark(body: &[Inst], used: &mut [bool]) {
        for inst in body {
            match inst {
                Inst::AccUpdate { acc, .. } | Inst::AccRead { acc, .. } => used[acc.index()] = true,
                Inst::Loop { body, .. } => mark(body, used),
                _ => {}
            }
        }
    }
    let mut used = vec![false; words.len()];
    mark(&program.body, &mut used);
    words.iter().zip(&used).filter(|(_, &u)| u).map(|(w, _)| w).sum()
}

/// The most 32-bit words of accumulators a thread of a kernel with a
/// staged tile holds and still asks for `staged_resident_threads`.
const STAGED_ACC_WORDS: usize = 8;

/// Whether `program`, whose row the default would stage (a read-only tile
/// used again after a reduction), keeps it in registers under
/// [`CodegenConfig::chained_rows_in_registers`]: the kernel the measurements were
/// of, nothing wider. Its body has:
/// - a grid of at least 1024 rows (where residency decides the bandwidth);
/// - two or more reductions, all of f32 tiles (an argmax's index reduction
///   holds i64 indices too), and no loop;
/// - at most four unary operations (each transcendental takes registers of
///   its own);
/// - before the first reduction, only unmasked loads of f32 tiles of at
///   most 4096 elements (8 a thread in 512 threads) from read-only
///   parameters, and at least one.
///
/// Past these bounds the 32 registers of a full SM spill, or the schedule
/// was not measured.
fn chained_rows_fit_registers(program: &Program) -> bool {
    let (mut unary, mut reductions, mut rows) = (0, 0, 0);
    for inst in &program.body {
        match inst {
            Inst::Loop { .. } => return false,
            Inst::Unary { .. } => unary += 1,
            Inst::Reduce { src, .. } => {
                if program.values[src.index()].dtype != crate::DType::F32 {
                    return false;
                }
                reductions += 1;
            }
            Inst::Load { dst, view, masked, .. }
                if reductions == 0
                    && program.params[program.views[view.index()].param.index()].access == Access::Read =>
            {
                let t = &program.values[dst.index()];
                if *masked || t.numel() > 4096 || t.dtype != crate::DType::F32 {
                    return false;
                }
                rows += 1;
            }
            _ => {}
        }
    }
    program.grid.iter().product::<u64>() >= 1024 && unary <= 4 && reductions >= 2 && rows > 0
}

#[cfg(test)]
mod tuning_tests {
    use super::*;
    use crate::config::Fraction;
    use crate::kernels::ir::{Access, Builder, IndexExpr, TileReduce, ValueType};
    use crate::ops::{BinaryOp, Padding};
    use crate::{DType, Scalar};

    /// Sums 5 tiles of each row in a loop (a trip count no unroll divides).
    fn row_sum() -> Program {
        row_sum_of(5)
    }

    /// Sums `trips` tiles of each row in a loop.
    fn row_sum_of(trips: u64) -> Program {
        let mut b = Builder::new("row_sum", &[8]);
        let x = b.param("x", DType::F32, 8 * trips * 256, Access::Read);
        let y = b.param("y", DType::F32, 8, Access::Write);
        let vx = b.view_contiguous(x, &[8, trips * 256], &[1, 256], Padding::Zero);
        let vy = b.view_contiguous(y, &[8, 1], &[1, 1], Padding::Zero);
        let acc = b.acc(ValueType::new(DType::F32, &[1, 256]), Scalar::Float(0.0, DType::F32));
        b.loop_(trips, |b, i| {
            let t = b.load(vx, &[IndexExpr::grid(0), IndexExpr::loop_var(i)], false);
            b.acc_update(acc, BinaryOp::Add, t);
        });
        let total = b.acc_read(acc);
        let s = b.reduce(TileReduce::Sum, total, 1);
        b.store(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], s, false);
        b.finish().unwrap()
    }

    fn count(text: &str, needle: &str) -> usize {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("//") && l.contains(needle))
            .count()
    }

    /// `program` generated for sm_90 under `tuning`, and assembled by ptxas
    /// where it is available.
    fn gen(program: &Program, tuning: CodegenConfig) -> PtxModule {
        static PTXAS: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
        let m = generate_with(program, &PtxTarget::for_driver(90, 13000), &tuning).unwrap();
        if let Some(tool) = PTXAS.get_or_init(|| super::ptxas::ptxas_for_tests("ptx_gen::tuning_tests")) {
            super::ptxas::assemble(tool, &m.text, 90).unwrap_or_else(|e| panic!("{e}\n{}", m.text));
        }
        m
    }

    #[test]
    fn unrolled_loops_keep_the_trip_count_and_write_the_remainder_first() {
        let program = row_sum();
        let plain = gen(&program, CodegenConfig::default());
        assert_eq!(count(&plain.text, "ld.global"), 1);
        assert_eq!(count(&plain.text, "nounroll"), 0);
        for (n, loads) in [(1, 1), (2, 3), (3, 5), (4, 5), (5, 5), (9, 5)] {
            let m = gen(
                &program,
                CodegenConfig {
                    unroll: Some(n),
                    ..CodegenConfig::default()
                },
            );
            assert_eq!(count(&m.text, "ld.global"), loads, "unroll {n}:\n{}", m.text);
            assert_eq!(count(&m.text, ".pragma \"nounroll\""), 1, "unroll {n}");
            let trips: Vec<&str> = m.text.lines().filter(|l| l.contains("setp.lt.u64")).collect();
            assert!(trips.len() == 1 && trips[0].ends_with(", 5;"), "unroll {n}: {trips:?}");
            // The remainder runs before the loop: `5 % n` bodies precede the label.
            let head = m.text.split("$L1:").next().unwrap();
            assert_eq!(count(head, "ld.global"), 5 % n.min(5) as usize, "unroll {n}");
        }
    }

    #[test]
    fn the_quick_tier_keeps_loops_rolled_and_changes_nothing_else() {
        let target = PtxTarget::for_driver(90, 13000);
        let looped = row_sum();
        let quick = generate_quick(&looped, &target).unwrap();
        let tuned = generate(&looped, &target).unwrap();
        assert_eq!(count(&quick.text, ".pragma \"nounroll\""), 1, "{}", quick.text);
        assert_eq!(count(&tuned.text, "nounroll"), 0, "{}", tuned.text);
        assert_eq!(
            (quick.block_threads, quick.grid_blocks, quick.shared_bytes),
            (tuned.block_threads, tuned.grid_blocks, tuned.shared_bytes)
        );
        // A reciprocal square root of a row value: `rcp.rn` in the tuned
        // module, the f64 reciprocal in the quick one.
        let mut b = Builder::new("rms", &[8]);
        let x = b.param("x", DType::F32, 8 * 1024, Access::Read);
        let y = b.param("y", DType::F32, 8 * 1024, Access::Write);
        let vx = b.view_contiguous(x, &[8, 1024], &[1, 1024], Padding::Zero);
        let vy = b.view_contiguous(y, &[8, 1024], &[1, 1024], Padding::Zero);
        let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
        let t = b.load(vx, &idx, false);
        let s = b.reduce(TileReduce::Sum, t, 1);
        let r = b.unary(crate::ops::UnaryOp::Rsqrt, s);
        let r = b.broadcast(r, &[1, 1024]);
        let q = b.binary(BinaryOp::Mul, t, r);
        b.store(vy, &idx, q, false);
        let rms = b.finish().unwrap();
        let tuned = generate(&rms, &target).unwrap().text;
        let quick = generate_quick(&rms, &target).unwrap().text;
        assert!(
            tuned.contains("rcp.rn.f32") && !tuned.contains("rcp.approx.ftz.f64"),
            "{tuned}"
        );
        assert!(
            quick.contains("rcp.approx.ftz.f64") && !quick.contains("rcp.rn"),
            "{quick}"
        );
        // Without a loop or a row reciprocal the two tiers are the same text.
        let straight = normalize(1024, false);
        assert_eq!(
            generate_quick(&straight, &target).unwrap(),
            generate(&straight, &target).unwrap()
        );
    }

    #[test]
    fn the_quick_tier_computes_an_elementwise_program_one_element_per_thread() {
        // y = tanh(a * b) on tiles of 1024: the tuned module spreads a tile
        // as 256 threads of 4-element atoms and writes the tanh four times;
        // the quick one has 1024 threads of one element and writes it once.
        let mut b = Builder::new("ew", &[64]);
        let a = b.param("a", DType::F32, 64 * 1024, Access::Read);
        let c = b.param("b", DType::F32, 64 * 1024, Access::Read);
        let y = b.param("y", DType::F32, 64 * 1024, Access::Write);
        let views: Vec<_> = [a, c, y]
            .into_iter()
            .map(|p| b.view_contiguous(p, &[64 * 1024], &[1024], Padding::Zero))
            .collect();
        let idx = [IndexExpr::grid(0)];
        let ta = b.load(views[0], &idx, false);
        let tb = b.load(views[1], &idx, false);
        let p = b.binary(BinaryOp::Mul, ta, tb);
        let t = b.unary(crate::ops::UnaryOp::Tanh, p);
        b.store(views[2], &idx, t, false);
        let ew = b.finish().unwrap();
        let tuned = gen(&ew, CodegenConfig::default());
        let quick = gen(
            &ew,
            CodegenConfig {
                one_element_per_thread: true,
                ..CodegenConfig::default()
            },
        );
        assert_eq!((tuned.block_threads, quick.block_threads), (256, 1024));
        assert_eq!((tuned.grid_blocks, quick.grid_blocks), (64, 64));
        assert_eq!(count(&tuned.text, "ld.global.nc.v4.f32"), 2, "{}", tuned.text);
        assert_eq!(count(&quick.text, "ld.global.nc.f32"), 2, "{}", quick.text);
        assert_eq!(count(&tuned.text, "ex2.approx"), 4, "{}", tuned.text);
        assert_eq!(count(&quick.text, "ex2.approx"), 1, "{}", quick.text);
        assert_eq!(
            generate_quick(&ew, &PtxTarget::for_driver(90, 13000)).unwrap().text,
            quick.text
        );
        // A reduction keeps its mapping: spreading it differently would
        // change the order of its sums.
        let looped = gen(
            &row_sum(),
            CodegenConfig {
                one_element_per_thread: true,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(looped.text, gen(&row_sum(), CodegenConfig::default()).text);
    }

    #[test]
    fn consecutive_row_reductions_alternate_their_partials_and_wait_once_each() {
        // sum(x), max(x) and sum(x * x) of each row, added and stored: each
        // reduction's warp partials go where the previous one's readers are
        // not reading, so each needs one barrier (before its readers).
        let mut b = Builder::new("three", &[8]);
        let x = b.param("x", DType::F32, 8 * 1024, Access::Read);
        let y = b.param("y", DType::F32, 8, Access::Write);
        let vx = b.view_contiguous(x, &[8, 1024], &[1, 1024], Padding::Zero);
        let vy = b.view_contiguous(y, &[8, 1], &[1, 1], Padding::Zero);
        let t = b.load(vx, &[IndexExpr::grid(0), IndexExpr::constant(0)], false);
        let s = b.reduce(TileReduce::Sum, t, 1);
        let m = b.reduce(TileReduce::Max, t, 1);
        let sq = b.binary(BinaryOp::Mul, t, t);
        let q = b.reduce(TileReduce::Sum, sq, 1);
        let sm = b.binary(BinaryOp::Add, s, m);
        let all = b.binary(BinaryOp::Add, sm, q);
        b.store(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], all, false);
        let m = gen(&b.finish().unwrap(), CodegenConfig::default());
        assert_eq!(count(&m.text, "bar.sync"), 3, "{}", m.text);
        // The offsets added to `tf_smem`, in order: each reduction's
        // partial store and its readers' gather use one base; the bases go
        // 0, then past the first's bytes, then 0 again.
        let bases: Vec<&str> = m
            .text
            .lines()
            .zip(m.text.lines().skip(1))
            .filter(|(a, _)| a.trim_end().ends_with(", tf_smem;"))
            .filter_map(|(_, b)| b.trim().strip_suffix(';')?.rsplit(", ").next())
            .collect();
        let mut runs = bases.clone();
        runs.dedup();
        let second = (m.block_threads / 32 * 4).to_string();
        assert_eq!(runs, ["0", second.as_str(), "0"], "{bases:?}\n{}", m.text);
        // After a loop every exchange waits first, as before.
        let looped = gen(&row_sum(), CodegenConfig::default());
        assert_eq!(count(&looped.text, "bar.sync"), 2, "{}", looped.text);
    }

    #[test]
    fn staged_kernels_ask_for_a_full_sm_and_take_row_reciprocals_in_f64() {
        // y = x / sum(x): the row is staged, and the division by the row's
        // sum goes through the f64 reciprocal, never `rcp.rn`/`div.rn`.
        let m = gen(&normalize(1024, false), CodegenConfig::default());
        assert!(m.shared_bytes > 0, "{}", m.text);
        assert!(
            m.text.contains(&format!(".minnctapersm {}\n", 2048 / m.block_threads)),
            "{}",
            m.text
        );
        assert!(m.text.contains("rcp.approx.ftz.f64"), "{}", m.text);
        assert!(!m.text.contains("rcp.rn") && !m.text.contains("div.rn"), "{}", m.text);
        // Not staged: the general budget (512 resident threads).
        let m = gen(&row_sum(), CodegenConfig::default());
        assert!(!m.text.contains("cp.async"), "{}", m.text);
        assert!(
            m.text
                .contains(&format!(".minnctapersm {}\n", (512 / m.block_threads).max(1))),
            "{}",
            m.text
        );
    }

    #[test]
    fn resident_threads_set_the_blocks_per_sm_asked_for() {
        let program = row_sum();
        for resident in [512, 2048, 128, 32] {
            let m = gen(
                &program,
                CodegenConfig {
                    resident_threads: resident,
                    ..CodegenConfig::default()
                },
            );
            let blocks = (resident / m.block_threads).max(1);
            assert!(
                m.text.contains(&format!(".minnctapersm {blocks}\n")),
                "{resident}: {}",
                m.text
            );
        }
    }

    /// Sums rows of `trips` tiles of 256 over a grid of `points`, in an
    /// accumulator of `acc` elements a tile (a multiple of 256).
    fn grid_sum(points: u64, acc: u32) -> Program {
        let mut b = Builder::new("grid_sum", &[points]);
        let cols = 4 * acc as u64;
        let x = b.param("x", DType::F32, points * cols, Access::Read);
        let y = b.param("y", DType::F32, points, Access::Write);
        let vx = b.view_contiguous(x, &[points, cols], &[1, acc], Padding::Zero);
        let vy = b.view_contiguous(y, &[points, 1], &[1, 1], Padding::Zero);
        let a = b.acc(ValueType::new(DType::F32, &[1, acc]), Scalar::Float(0.0, DType::F32));
        b.loop_(4, |b, i| {
            let t = b.load(vx, &[IndexExpr::grid(0), IndexExpr::loop_var(i)], false);
            b.acc_update(a, BinaryOp::Add, t);
        });
        let total = b.acc_read(a);
        let s = b.reduce(TileReduce::Sum, total, 1);
        b.store(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], s, false);
        b.finish().unwrap()
    }

    #[test]
    fn a_grid_that_fits_one_wave_asks_for_the_blocks_it_needs() {
        let on = |sms: u32, p: &Program| {
            generate_with(p, &PtxTarget::for_driver(90, 13000).with_sms(sms), &CodegenConfig::default()).unwrap()
        };
        let blocks = |m: &PtxModule| {
            let line = m.text.lines().find(|l| l.starts_with(".minnctapersm")).unwrap();
            line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
        };
        // 512 points of 256 threads on 132 SMs: four blocks an SM hold them
        // in one wave, where the default budget (512 threads) gives two.
        let p = grid_sum(512, 1024);
        let m = on(132, &p);
        assert_eq!(m.block_threads, 256, "{}", m.text);
        assert_eq!(blocks(&m), 4, "{}", m.text);
        // The device unknown, or a grid of several waves even at 1024
        // resident threads: the default.
        assert_eq!(blocks(&on(0, &p)), 2);
        assert_eq!(blocks(&on(132, &grid_sum(4096, 1024))), 2);
        // Accumulators of 32 words a thread would spill at 64 registers.
        let big = on(132, &grid_sum(512, 8192));
        assert_eq!(big.block_threads, 256, "{}", big.text);
        assert_eq!(blocks(&big), 2, "{}", big.text);
        assert_eq!(one_wave(300, 132, 256, 2), 3);
        assert_eq!(one_wave(264, 132, 256, 2), 2);
        assert_eq!(one_wave(600, 132, 256, 2), 2);
    }

    #[test]
    fn staged_blocks_halve_until_a_thread_holds_two_atoms() {
        // [1, 2048] f32 rows: 512 atoms of four, one a thread at 512
        // threads; 256 threads hold two. [1, 4096] rows keep 512.
        let m = gen(&normalize(2048, false), CodegenConfig::default());
        assert!(m.shared_bytes > 0, "{}", m.text);
        assert_eq!(m.block_threads, 256);
        let m = gen(&normalize(4096, false), CodegenConfig::default());
        assert!(m.shared_bytes > 0, "{}", m.text);
        assert_eq!(m.block_threads, 512);
    }

    /// y = x / sum(x) over rows of `cols`: x is used after the reduction.
    fn normalize(cols: u64, masked: bool) -> Program {
        let mut b = Builder::new("normalize", &[8]);
        let x = b.param("x", DType::F32, 8 * cols, Access::Read);
        let y = b.param("y", DType::F32, 8 * cols, Access::Write);
        let vx = b.view_contiguous(x, &[8, cols], &[1, cols as u32], Padding::Zero);
        let vy = b.view_contiguous(y, &[8, cols], &[1, cols as u32], Padding::Zero);
        let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
        let t = b.load(vx, &idx, masked);
        let s = b.reduce(TileReduce::Sum, t, 1);
        let s = b.broadcast(s, &[1, cols as u32]);
        let q = b.binary(BinaryOp::Div, t, s);
        b.store(vy, &idx, q, masked);
        b.finish().unwrap()
    }

    #[test]
    fn rows_that_cannot_be_staged_stay_in_registers() {
        // Masked, or larger than the staging bound (16384 f32 = 64 KiB):
        // one global load of the row, held in registers across the
        // reduction, as without staging.
        for (cols, masked) in [(256, true), (16384, false)] {
            let m = gen(&normalize(cols, masked), CodegenConfig::default());
            assert_eq!(count(&m.text, "cp.async"), 0, "{cols} {masked}");
            assert!(!m.text.contains("tf_stage"), "{cols} {masked}");
            let loads = m
                .text
                .lines()
                .filter(|l| l.contains("ld.global") && !l.contains("//"))
                .count();
            let expected = if cols == 256 {
                1
            } else {
                (cols / 4 / m.block_threads as u64) as usize
            };
            assert_eq!(loads, expected, "{cols} {masked}:\n{}", m.text);
            let after = m.text.rsplit("bar.sync").next().unwrap();
            assert_eq!(count(after, "ld.global"), 0, "{cols} {masked}");
        }
    }

    #[test]
    fn reloads_read_the_row_again_after_the_reduction() {
        let program = normalize(256, false);
        let plain = gen(
            &program,
            CodegenConfig {
                stage: false,
                ..CodegenConfig::default()
            },
        );
        let again = gen(
            &program,
            CodegenConfig {
                reload: true,
                stage: false,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(
            (count(&plain.text, "ld.global.nc"), count(&plain.text, "ld.global")),
            (1, 1)
        );
        // The reload is a plain `ld.global` after the reduction's barriers.
        assert_eq!(
            (count(&again.text, "ld.global.nc"), count(&again.text, "ld.global")),
            (1, 2)
        );
        let after = again.text.rsplit("bar.sync").next().unwrap();
        assert_eq!(count(after, "ld.global"), 1, "{}", again.text);
        // Staged (the default): one 16-byte `cp.async` per slot (256 f32 on
        // 64 threads of one atom), read from shared memory before the
        // reduction and again after it, with no global load left for the row.
        let staged = gen(&program, CodegenConfig::default());
        assert_eq!(staged.block_threads, 64, "{}", staged.text);
        assert_eq!(count(&staged.text, "cp.async.cg.shared.global"), 1, "{}", staged.text);
        assert_eq!(count(&staged.text, "cp.async.wait_group 0"), 1);
        assert_eq!(count(&staged.text, "ld.global"), 0, "{}", staged.text);
        let (before, after) = staged.text.split_once("bar.sync").unwrap();
        assert_eq!(count(before, "ld.shared.v4.f32"), 1, "{}", staged.text);
        assert_eq!(count(after.rsplit("bar.sync").next().unwrap(), "ld.shared.v4.f32"), 1);
        assert!(
            staged.text.contains(".shared .align 16 .b8 tf_stage0[1024];"),
            "{}",
            staged.text
        );
    }
    #[test]
    fn a_loop_of_one_trip_is_written_without_a_loop() {
        // Unrolled by ptxas, and rolled as in the quick tier.
        let rolled = CodegenConfig {
            unroll: Some(1),
            ..CodegenConfig::default()
        };
        for tuning in [CodegenConfig::default(), rolled] {
            let once = gen(&row_sum_of(1), tuning.clone());
            assert_eq!(count(&once.text, "bra $L"), 0, "{}", once.text);
            assert_eq!(count(&once.text, "ld.global"), 1, "{}", once.text);
            let twice = gen(&row_sum_of(2), tuning);
            assert_eq!(count(&twice.text, "bra $L"), 1, "{}", twice.text);
        }
    }

    #[test]
    fn staged_copies_keep_their_lines_in_l2_unless_told_not_to() {
        let program = normalize(256, false);
        // The default: one `evict_last` policy over all lines, on the copy.
        let kept = gen(&program, CodegenConfig::default());
        assert_eq!(
            count(&kept.text, "createpolicy.fractional.L2::evict_last.b64"),
            1,
            "{}",
            kept.text
        );
        assert_eq!(count(&kept.text, ", 0f3F800000;"), 1, "{}", kept.text);
        assert_eq!(
            count(&kept.text, "cp.async.cg.shared.global.L2::cache_hint ["),
            1,
            "{}",
            kept.text
        );
        // A fraction, and none.
        let half = gen(
            &program,
            CodegenConfig {
                stage_keep: Fraction::new(0.5),
                ..CodegenConfig::default()
            },
        );
        assert_eq!(count(&half.text, ", 0f3F000000;"), 1, "{}", half.text);
        let none = gen(
            &program,
            CodegenConfig {
                stage_keep: None,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(count(&none.text, "createpolicy"), 0, "{}", none.text);
        assert_eq!(count(&none.text, "cache_hint"), 0, "{}", none.text);
        assert_eq!(count(&none.text, "cp.async.cg.shared.global ["), 1, "{}", none.text);
        // Copies through registers carry no policy.
        let via = gen(
            &program,
            CodegenConfig {
                stage_copy: StageCopy::Registers,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(count(&via.text, "createpolicy"), 0, "{}", via.text);
    }

    #[test]
    fn load_cache_policies_are_tuning_settings() {
        let program = normalize(256, false);
        let plain = gen(&program, CodegenConfig::default());
        assert_eq!(count(&plain.text, "st.global.v4.f32 ["), 1, "{}", plain.text);
        // An evict_last policy on the read-only loads of an unstaged kernel:
        // the row is loaded once, into registers, with the hint.
        let unstaged = CodegenConfig {
            stage: false,
            load_keep: Some(Fraction::ALL),
            ..CodegenConfig::default()
        };
        let loaded = gen(&program, unstaged.clone());
        assert_eq!(count(&loaded.text, "cp.async"), 0, "{}", loaded.text);
        assert!(
            count(&loaded.text, "ld.global.nc.L2::cache_hint.v4.f32") >= 1,
            "{}",
            loaded.text
        );
        assert_eq!(count(&loaded.text, "ld.global.nc.v4.f32"), 0, "{}", loaded.text);
        let load_sites = loaded
            .text
            .lines()
            .filter(|l| l.starts_with("// mapping: load "))
            .count();
        assert_eq!(
            count(&loaded.text, "createpolicy.fractional.L2::evict_last.b64"),
            load_sites,
            "one policy per load site: {}",
            loaded.text
        );
        // Not on a target without cache hints: sm_75, or sm_80 under a
        // driver whose PTX ISA is older than 7.4, where the default staging
        // policy is left out too.
        let old = generate_with(&program, &PtxTarget::for_driver(75, 13000), &unstaged).unwrap();
        assert_eq!(count(&old.text, "cache_hint"), 0, "{}", old.text);
        let half = CodegenConfig {
            load_keep: Fraction::new(0.5),
            ..CodegenConfig::default()
        };
        for tuning in [half.clone(), unstaged.clone()] {
            let old = generate_with(&program, &PtxTarget::for_driver(80, 11020), &tuning).unwrap();
            assert_eq!(count(&old.text, "createpolicy"), 0, "{}", old.text);
            assert_eq!(count(&old.text, "cache_hint"), 0, "{}", old.text);
            let new = generate_with(&program, &PtxTarget::for_driver(80, 11040), &tuning).unwrap();
            assert!(count(&new.text, "createpolicy") > 0, "{}", new.text);
        }
        // The quick tier does not carry it (the PTX interpreter has no
        // forms for it), only the staging policy.
        let quick = gen(&program, half.quick());
        assert_eq!(count(&quick.text, "ld.global.nc.L2::cache_hint"), 0, "{}", quick.text);
        assert_eq!(
            count(&quick.text, "createpolicy.fractional.L2::evict_last.b64"),
            1,
            "{}",
            quick.text
        );
        let quick = gen(&program, unstaged.quick());
        assert_eq!(count(&quick.text, "cache_hint"), 0, "{}", quick.text);
    }

    #[test]
    fn the_staging_level_is_a_tuning_setting() {
        let program = normalize(256, false);
        let tuned = gen(
            &program,
            CodegenConfig {
                stage_copy: StageCopy::AsyncL1,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(count(&tuned.text, "cp.async.ca.shared.global"), 1, "{}", tuned.text);
        assert_eq!(count(&tuned.text, "cp.async.cg"), 0);
        let default = gen(&program, CodegenConfig::default());
        // Through registers: one load and one shared store per slot, no
        // asynchronous copy, and the same reads from shared memory.
        let via = gen(
            &program,
            CodegenConfig {
                stage_copy: StageCopy::Registers,
                ..CodegenConfig::default()
            },
        );
        assert_eq!(count(&via.text, "cp.async"), 0, "{}", via.text);
        assert_eq!(count(&via.text, "ld.global.nc.v4.f32"), 1, "{}", via.text);
        assert_eq!(count(&via.text, "st.shared.v4.f32"), 1, "{}", via.text);
        assert_eq!(
            count(&via.text, "ld.shared.v4.f32"),
            count(&default.text, "ld.shared.v4.f32"),
            "{}",
            via.text
        );
    }

    /// `y = (x - m) / Σ (x - m)²` per row of `cols` elements of `dtype`,
    /// `m` the row's mean: two chained reductions of the row (one with
    /// `chained = false`: `y = x / Σ x`).
    fn centred(dtype: DType, cols: u64, chained: bool) -> Program {
        centred_rows(dtype, 1024, cols, chained)
    }

    /// [`centred`] over `rows` rows.
    fn centred_rows(dtype: DType, rows: u64, cols: u64, chained: bool) -> Program {
        centred_from(dtype, dtype, rows, cols, cols as u32, chained)
    }

    /// [`centred_rows`] computed in `dtype` from rows of `stored` elements
    /// (cast on load), in tiles of `tile_cols` (masked where `cols` is less).
    fn centred_from(stored: DType, dtype: DType, rows: u64, cols: u64, tile_cols: u32, chained: bool) -> Program {
        let mut b = Builder::new("centred", &[rows]);
        let x = b.param("x", stored, rows * cols, Access::Read);
        let y = b.param("y", dtype, rows * cols, Access::Write);
        let tile = [1, tile_cols];
        let vx = b.view_contiguous(x, &[rows, cols], &tile, Padding::Zero);
        let vy = b.view_contiguous(y, &[rows, cols], &tile, Padding::Zero);
        let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
        let masked = u64::from(tile_cols) != cols;
        let t = b.load(vx, &idx, masked);
        let t = if stored == dtype { t } else { b.cast(t, dtype) };
        let s = b.reduce(TileReduce::Sum, t, 1);
        let out = if chained {
            let inv = b.constant(Scalar::Float(1.0 / cols as f64, dtype), dtype, &[1, 1]);
            let m = b.binary(BinaryOp::Mul, s, inv);
            let m = b.broadcast(m, &tile);
            let d = b.binary(BinaryOp::Sub, t, m);
            let sq = b.binary(BinaryOp::Mul, d, d);
            let q = b.reduce(TileReduce::Sum, sq, 1);
            let q = b.broadcast(q, &tile);
            b.binary(BinaryOp::Div, d, q)
        } else {
            let s = b.broadcast(s, &tile);
            b.binary(BinaryOp::Div, t, s)
        };
        b.store(vy, &idx, out, masked);
        b.finish().unwrap()
    }

    /// `y = x · Σ int(x - max(x))` per row of 4096 f32: two chained
    /// reductions, the second of an i32 tile.
    fn integer_second() -> Program {
        let mut b = Builder::new("integer_second", &[1024]);
        let x = b.param("x", DType::F32, 1024 * 4096, Access::Read);
        let y = b.param("y", DType::F32, 1024 * 4096, Access::Write);
        let tile = [1, 4096];
        let vx = b.view_contiguous(x, &[1024, 4096], &tile, Padding::Zero);
        let vy = b.view_contiguous(y, &[1024, 4096], &tile, Padding::Zero);
        let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
        let t = b.load(vx, &idx, false);
        let m = b.reduce(TileReduce::Max, t, 1);
        let m = b.broadcast(m, &tile);
        let d = b.binary(BinaryOp::Sub, t, m);
        let d = b.cast(d, DType::I32);
        let s = b.reduce(TileReduce::Sum, d, 1);
        let s = b.broadcast(s, &tile);
        let s = b.cast(s, DType::F32);
        let out = b.binary(BinaryOp::Mul, t, s);
        b.store(vy, &idx, out, false);
        b.finish().unwrap()
    }

    /// [`centred`] with `y = exp(-exp(|sin(tanh((x - m) / q)|))`: five
    /// unary operations.
    fn five_unary() -> Program {
        use crate::ops::UnaryOp;
        let mut p = centred(DType::F32, 4096, true);
        let Some(Inst::Store { src, .. }) = p.body.pop() else {
            panic!("the program ends with its store")
        };
        let mut b_insts = Vec::new();
        let mut v = src;
        for op in [UnaryOp::Tanh, UnaryOp::Sin, UnaryOp::Abs, UnaryOp::Exp, UnaryOp::Neg] {
            let dst = crate::kernels::ir::ValueId(p.values.len() as u32);
            p.values.push(p.values[v.index()].clone());
            b_insts.push(Inst::Unary { dst, op, src: v });
            v = dst;
        }
        p.body.extend(b_insts);
        p.body.push(Inst::Store {
            view: crate::kernels::ir::ViewId(1),
            index: smallvec::smallvec![IndexExpr::grid(0), IndexExpr::constant(0)],
            src: v,
            masked: false,
        });
        crate::kernels::ir::verify(&p).unwrap();
        p
    }

    /// Whether the row of `m` is held in registers in 512-thread blocks of
    /// a full SM with the L2 `evict_last` policy on its loads.
    fn rows_in_registers(m: &PtxModule) -> bool {
        let loads = count(&m.text, "ld.global");
        !m.text.contains("cp.async")
            && m.text.contains(".maxntid 512, 1, 1\n.minnctapersm 4")
            && loads > 0
            && count(&m.text, "ld.global.nc.L2::cache_hint") == loads
            && count(&m.text, "createpolicy.fractional.L2::evict_last") >= 1
    }

    #[test]
    fn rows_held_across_two_reductions_stay_in_registers() {
        // Two reductions over a row of 4096 f32: registers, with the load
        // policy; in the quick tier without it.
        let program = centred(DType::F32, 4096, true);
        let m = gen(&program, CodegenConfig::default());
        assert!(rows_in_registers(&m));
        // Both tiers take the rule's block, whatever the others would be:
        // the quick tier reduces in the same order.
        let narrow = CodegenConfig {
            max_threads: 64,
            staged_threads: 128,
            ..CodegenConfig::default()
        };
        let m = gen(&program, narrow.clone());
        assert!(rows_in_registers(&m));
        let quick = gen(&program, narrow.quick());
        assert_eq!(count(&quick.text, "cp.async"), 0, "{}", quick.text);
        assert_eq!(count(&quick.text, "L2::cache_hint"), 0, "{}", quick.text);
        assert_eq!((m.block_threads, quick.block_threads), (512, 512));
        assert_eq!(m.mapping, quick.mapping);
        // Not in registers: one reduction; rows of more than 4096
        // elements, of f64, of f16 (cast to f32), or masked; a reduction
        // of another dtype than f32; fewer than 1024 rows; five unary
        // operations; rows loaded again after the first (`reload`); or the
        // rule turned off. `staged`: whether the row is staged instead.
        let off = CodegenConfig {
            chained_rows_in_registers: false,
            ..CodegenConfig::default()
        };
        let reload = CodegenConfig {
            reload: true,
            ..CodegenConfig::default()
        };
        let f16 = centred_from(DType::F16, DType::F32, 1024, 4096, 4096, true);
        let masked = centred_from(DType::F32, DType::F32, 1024, 4000, 4096, true);
        for (what, program, tuning, staged) in [
            (
                "one reduction",
                centred(DType::F32, 4096, false),
                CodegenConfig::default(),
                true,
            ),
            (
                "8192 elements",
                centred(DType::F32, 8192, true),
                CodegenConfig::default(),
                true,
            ),
            ("f64", centred(DType::F64, 2048, true), CodegenConfig::default(), true),
            ("f16", f16, CodegenConfig::default(), false),
            ("masked", masked, CodegenConfig::default(), false),
            ("an i32 reduction", integer_second(), CodegenConfig::default(), true),
            (
                "1023 rows",
                centred_rows(DType::F32, 1023, 4096, true),
                CodegenConfig::default(),
                true,
            ),
            ("five unary operations", five_unary(), CodegenConfig::default(), true),
            ("reload", centred(DType::F32, 4096, true), reload, true),
            ("the rule off", centred(DType::F32, 4096, true), off, true),
        ] {
            let m = gen(&program, tuning);
            assert!(!rows_in_registers(&m), "{what}");
            assert_eq!(m.text.contains("cp.async"), staged, "{what}");
            assert!(!m.text.contains("ld.global.nc.L2::cache_hint"), "{what}");
        }
        // A load policy set for every kernel is the one the rows carry.
        let kept = gen(
            &program,
            CodegenConfig {
                load_keep: Fraction::new(0.5),
                ..CodegenConfig::default()
            },
        );
        assert!(rows_in_registers(&kept));
        assert!(
            kept.text.contains("createpolicy.fractional.L2::evict_last.b64 %rd") && kept.text.contains("0f3F000000")
        );
        // Without staging the rule has nothing to change.
        let unstaged = CodegenConfig {
            stage: false,
            ..CodegenConfig::default()
        };
        let m = gen(&program, unstaged);
        assert!(
            !m.text.contains("cp.async") && !m.text.contains("L2::cache_hint"),
            "{}",
            m.text
        );
    }
}
