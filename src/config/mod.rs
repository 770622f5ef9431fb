//! What tilefuse's generated code and its compilation depend on, as one
//! value: [`Config`].
//!
//! A `Config` holds three groups of settings:
//!
//! - [`FusionConfig`]: how graphs are planned into kernels: the math mode,
//!   whether results may depend on scheduling, and the GPU tile sizes;
//! - [`CodegenConfig`]: how a kernel program is written as PTX (block sizes,
//!   staging, cache policies);
//! - [`JitConfig`]: how a GPU compiles and first runs a new program (the
//!   quick tier, the JIT's optimization level, the PTX interpreter).
//!
//! Its [`Default`] is what the measurements in `benches/NOTES.md` chose. A
//! config is part of every cache key it affects: the plan cache keys plans
//! by the fusion settings, and a GPU keeps one compiled module per
//! (program, codegen settings, JIT settings). Two configs used in one
//! process therefore get two plans or two modules, side by side.
//!
//! # Which config a realization uses
//!
//! [`Tensor::realize_with`](crate::Tensor::realize_with) takes one
//! explicitly. Everything else (`to_vec`, `realize`, ...) uses
//! [`Config::current`]: the innermost config set on the calling thread by
//! [`Config::scope`] or [`Config::with`], else the process default, which
//! is [`Config::from_env`] read once.
//!
//! ```
//! use tilefuse::config::{Config, MathMode};
//! use tilefuse::Tensor;
//!
//! let x = Tensor::from_slice(&[0.5f32, 1.0, 2.0], &[3]);
//! let fast = Config::default().with_math(MathMode::Fast);
//! // One realization under `fast`...
//! let y = x.exp();
//! y.realize_with(&fast)?;
//! // ...or everything the closure realizes.
//! let z: Vec<f32> = fast.with(|| x.tanh().to_vec())?;
//! assert_eq!(z.len(), 3);
//! # Ok::<(), tilefuse::Error>(())
//! ```
//!
//! # The environment
//!
//! [`Config::from_env`] is the one place where `TILEFUSE_*` variables are
//! read: [`SETTINGS`] lists each with the values it takes and the field it
//! sets. A value a setting does not take is reported once on stderr and the
//! default applies; so is a `TILEFUSE_*` name that is no setting.

mod env;

pub use crate::ops::MathMode;
#[cfg(feature = "cuda")]
pub(crate) use env::choices_dir;
pub use env::{active, active_library, unknown, Setting, SETTINGS};
pub(crate) use env::{ptxas_path, require_ptxas};

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

/// Everything the generated code and its compilation depend on; see the
/// [module documentation](self).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Config {
    /// How graphs are planned into kernels.
    pub fusion: FusionConfig,
    /// How kernel programs are written as PTX.
    pub codegen: CodegenConfig,
    /// How a GPU compiles and first runs a new program.
    pub jit: JitConfig,
}

/// How graphs are planned into kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FusionConfig {
    /// How transcendental functions are computed on the GPU
    /// (`TILEFUSE_GPU_MATH`): [`MathMode::Precise`] by default;
    /// [`MathMode::Fast`] takes the hardware approximations. The CPU
    /// executor computes the same values in both modes.
    pub math: MathMode,
    /// Whether results must not depend on how the GPU schedules a kernel's
    /// blocks (true by default). With `false`, a full sum without consumers
    /// adds its partials atomically in one kernel, in whatever order they
    /// finish, so float results may differ in the last bits from run to
    /// run.
    pub deterministic: bool,
    /// The elements a GPU tile aims at (`TILEFUSE_GPU_TILE`; 4096, a power
    /// of two; other values are rounded up to one). Rows of row kernels may
    /// exceed it; elementwise kernels with a transcendental take a quarter.
    /// Other budgets were measured slower (`benches/NOTES.md`, v6 and v9).
    pub gpu_tile_elements: usize,
    /// The grid points a full GPU reduction is split into
    /// (`TILEFUSE_GPU_PARTS`; 256): one wave of the split kernels' blocks
    /// (v19).
    pub gpu_split_parts: u64,
}

impl Default for FusionConfig {
    fn default() -> FusionConfig {
        FusionConfig {
            math: MathMode::Precise,
            deterministic: true,
            gpu_tile_elements: 4096,
            gpu_split_parts: 256,
        }
    }
}

/// A fraction in (0, 1], of the cache lines a cache policy covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction(f32);

impl Fraction {
    /// All lines.
    pub const ALL: Fraction = Fraction(1.0);

    /// `f` as a fraction, if it is in (0, 1].
    pub fn new(f: f32) -> Option<Fraction> {
        (f > 0.0 && f <= 1.0).then_some(Fraction(f))
    }

    /// The value, in (0, 1].
    pub fn get(self) -> f32 {
        self.0
    }
}

impl Eq for Fraction {}

impl std::hash::Hash for Fraction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state)
    }
}

/// Which unaligned tiles move as contiguous runs (see
/// [`CodegenConfig::stage_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStaging {
    /// None: scalar accesses.
    Off,
    /// Those accessed outside loops (a short-row kernel's tile).
    OutsideLoops,
    /// Those inside loops too (the tiles of a long row).
    Everywhere,
}

/// How a staged tile is copied to shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageCopy {
    /// `cp.async.cg`: through L2 only (the default).
    AsyncL2,
    /// `cp.async.ca`: through L1 too; measured slower (v11).
    AsyncL1,
    /// `ld.global.nc` into registers, then `st.shared`: what targets before
    /// sm_80, which have no `cp.async`, always do; measured slower (v11).
    Registers,
}

impl StageCopy {
    /// The `cp.async` cache level, or `None` when the copy goes through registers.
    pub(crate) fn async_level(self) -> Option<&'static str> {
        match self {
            StageCopy::AsyncL2 => Some("cg"),
            StageCopy::AsyncL1 => Some("ca"),
            StageCopy::Registers => None,
        }
    }
}

/// How a kernel program is written as PTX. The defaults are what the
/// measurements in `benches/NOTES.md` chose; the other values are there to
/// measure against them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CodegenConfig {
    /// The most threads a block starts from (`TILEFUSE_GPU_THREADS`; 256, a
    /// power of two from 32 to 1024); the alternatives are measured in v6.
    pub max_threads: u32,
    /// The resident threads per SM that `.minnctapersm` asks ptxas to allow
    /// for (`TILEFUSE_GPU_RESIDENT`; 512, a multiple of 32 up to 2048): more
    /// resident threads cap a thread's registers lower. 2048 made the split
    /// sum slower (v19).
    pub resident_threads: u32,
    /// Every loop body written this many times per trip and the loop marked
    /// `nounroll` (`TILEFUSE_GPU_UNROLL`, 1 to 64); `None` (the default)
    /// lets ptxas unroll as it likes: unrolling less shortens the JIT and
    /// slows the loops (v6); the quick tier writes loops once.
    pub unroll: Option<u64>,
    /// Read-only tiles loaded before a reduction are loaded again after it
    /// instead of being held (`TILEFUSE_GPU_RELOAD`; off; slower on the norms,
    /// v18).
    pub reload: bool,
    /// Row tiles held across a reduction are copied to shared memory with
    /// `cp.async` and read from there before and after it, instead of held
    /// in registers (`TILEFUSE_GPU_STAGE`; on): more rows in flight per SM
    /// (v7). A tile that cannot be staged (masked, not in
    /// 16-byte pieces, past the shared-memory bound) stays in registers.
    pub stage: bool,
    /// Where a tile that is one contiguous run of memory, but whose atoms
    /// are not aligned (rows of an odd width: a row of 58 bf16 is 116
    /// bytes), moves between memory and shared memory as that run, in
    /// 16-byte pieces, the threads reading or writing their own elements
    /// in shared memory (`TILEFUSE_GPU_RUNS`: `off`, `outside` (the
    /// default) or `all`). Elsewhere each element of such a tile is its own
    /// scalar access. Inside a loop a run waits for its copy every trip.
    pub stage_runs: RunStaging,
    /// The widest element, in bytes, of a tile moved as a run
    /// (`TILEFUSE_GPU_RUN_ELEMENT`: 1, 2 (the default), 4 or 8). On the H200
    /// runs made odd-width f16/bf16 rows 1.4–2.4× faster, but an f32
    /// argmin over rows of 49 11 % slower and a column argmin's i64 store
    /// 41 % slower (v39): scalar 2-byte accesses spend twice the L1
    /// wavefronts a byte that 4-byte ones do.
    pub run_element_bytes: u32,
    /// The most threads of a block with a staged tile
    /// (`TILEFUSE_GPU_STAGED_THREADS`; 512, a power of two from 32 to
    /// 1024); 256 and 1024 were slower (v8). Blocks whose threads would
    /// hold one atom of the tile each halve from it, to 128 at least (v42).
    pub staged_threads: u32,
    /// `resident_threads` of a kernel with a staged tile
    /// (`TILEFUSE_GPU_STAGED_RESIDENT`; 2048), so that a few more live
    /// values do not cost a resident block (v8).
    pub staged_resident_threads: u32,
    /// `1/x` and `1/sqrt(x)` of an f32 every thread holds through a
    /// Newton-refined f64 reciprocal instead of `rcp.rn.f32`
    /// (`TILEFUSE_GPU_ROW_RCP=f64`; off). Both round the same; the f64 form
    /// has no slow path for the JIT, so the quick tier takes it, while the
    /// tuned norms ran slower with it (v8).
    pub row_reciprocal_f64: bool,
    /// A program without reductions or loops spreads its tiles one element
    /// per thread over up to 1024 threads, so its per-element code is
    /// written once: a shorter module for the JIT, at the cost of scalar
    /// accesses. Off; the quick tier turns it on. Values do not change.
    pub one_element_per_thread: bool,
    /// Cache qualifiers of read-only loads (`TILEFUSE_GPU_LD`, e.g.
    /// `.L1::no_allocate`; none by default): which pays depends on the
    /// kernel (v19). Only
    /// letters, digits, `.`, `:` and `_` are taken (checked by
    /// [`Config::validate`]); the JIT rejects qualifiers that are no PTX.
    pub load_hints: String,
    /// How a staged tile gets to shared memory (`TILEFUSE_GPU_CP_LEVEL`:
    /// `cg`, the default, `ca` or `regs`).
    pub stage_copy: StageCopy,
    /// The `cp.async` copies that stage a tile carry an L2 `evict_last`
    /// policy over this fraction of their lines (`TILEFUSE_GPU_CP_KEEP`;
    /// all by default, `0` or `off` for none): the input's lines stay in L2
    /// for the reads that follow (v15, v17).
    pub stage_keep: Option<Fraction>,
    /// The read-only loads that do not stage a tile carry an L2
    /// `evict_last` policy over this fraction of their lines
    /// (`TILEFUSE_GPU_LD_KEEP`; none). sm_80 and later.
    pub load_keep: Option<Fraction>,
    /// A row kernel with two or more reductions (a layer norm, a softmax)
    /// keeps its rows in registers instead of staging them, in blocks of up
    /// to 512 threads with 2048 resident, its read-only loads carrying an L2
    /// `evict_last` policy over `chained_rows_keep` of their lines (unless
    /// `load_keep` sets one for every kernel); only where the rows fit 32
    /// registers a thread, and not with `reload`
    /// (`TILEFUSE_GPU_CHAINED_ROWS`: `registers`, the default, or `staged`).
    /// Measured against staging in v18.
    pub chained_rows_in_registers: bool,
    /// See `chained_rows_in_registers`: all lines, and none in the quick
    /// tier; the register rows need it to pay (v18).
    pub chained_rows_keep: Option<Fraction>,
}

impl Default for CodegenConfig {
    fn default() -> CodegenConfig {
        CodegenConfig {
            max_threads: 256,
            resident_threads: 512,
            unroll: None,
            reload: false,
            stage: true,
            stage_runs: RunStaging::OutsideLoops,
            run_element_bytes: 2,
            staged_threads: 512,
            staged_resident_threads: 2048,
            row_reciprocal_f64: false,
            one_element_per_thread: false,
            load_hints: String::new(),
            stage_copy: StageCopy::AsyncL2,
            stage_keep: Some(Fraction::ALL),
            load_keep: None,
            chained_rows_in_registers: true,
            chained_rows_keep: Some(Fraction::ALL),
        }
    }
}

impl CodegenConfig {
    /// The settings of the quick tier on top of these: every loop written
    /// once and marked `nounroll`, row reciprocals through f64, elementwise
    /// programs one element per thread, and no load cache policy besides
    /// the staging copies'. A module the driver's JIT compiles faster, which
    /// computes the same values (see
    /// `ptx_gen::generate_quick`).
    pub fn quick(&self) -> CodegenConfig {
        CodegenConfig {
            unroll: Some(1),
            row_reciprocal_f64: true,
            one_element_per_thread: true,
            load_keep: None,
            chained_rows_keep: None,
            ..self.clone()
        }
    }
}

/// How a program's quick tier is generated and loaded (see
/// [`JitConfig::quick`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuickTier {
    /// The JIT optimization level, 0 to 3.
    pub level: u32,
    /// The quick text ([`CodegenConfig::quick`]) rather than the tuned
    /// text at that level.
    pub quick_text: bool,
}

impl QuickTier {
    /// The quick text at JIT level 1.
    pub const DEFAULT: QuickTier = QuickTier {
        level: 1,
        quick_text: true,
    };
}

/// How a GPU compiles and first runs a new program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct JitConfig {
    /// The quick tier a new program is first loaded with while its tuned
    /// module compiles in the background (`TILEFUSE_JIT_QUICK`: a level
    /// from 0 to 3, with `u` for the tuned text at that level, or `off`;
    /// [`QuickTier::DEFAULT`]). `None` loads the tuned module at once and
    /// only, which makes first calls wait longer (v13).
    pub quick: Option<QuickTier>,
    /// The JIT optimization level of tuned modules (`TILEFUSE_JIT_O`, 0 to
    /// 4); `None` (the default) is the driver's, 4; lower levels gave
    /// slower kernels (v6).
    pub opt_level: Option<u32>,
    /// A new program's first launches run on the device's PTX interpreter
    /// while its modules compile (`TILEFUSE_GPU_INTERPRETER`; on), so a
    /// first call does not wait for the JIT (v16). The interpreter is loaded
    /// when a device's compiler opens, unless the process default config turns it off.
    pub interpreter: bool,
    /// A program is compiled with the codegen settings a measurement on
    /// the device chose for it, when one did
    /// (`CudaCompiler::measure_choice` of the `cuda` feature,
    /// kept per device in the choices directory, `TILEFUSE_CHOICES`);
    /// `TILEFUSE_GPU_MEASURED`; on. Off compiles every program under the
    /// config's own settings.
    pub measured: bool,
}

impl Default for JitConfig {
    fn default() -> JitConfig {
        JitConfig {
            quick: Some(QuickTier::DEFAULT),
            opt_level: None,
            interpreter: true,
            measured: true,
        }
    }
}

impl Config {
    /// The default config with what the `TILEFUSE_*` variables of the
    /// environment set (see [`SETTINGS`]), read now. Refused values and
    /// unknown names are reported on stderr, once per process each.
    pub fn from_env() -> Config {
        env::from_env()
    }

    /// The process default: [`Config::from_env`] as read the first time
    /// it is asked for.
    pub fn process_default() -> &'static Arc<Config> {
        static DEFAULT: OnceLock<Arc<Config>> = OnceLock::new();
        DEFAULT.get_or_init(|| Arc::new(Config::from_env()))
    }

    /// The config realizations on this thread use: the innermost one set by
    /// [`scope`](Self::scope) or [`with`](Self::with), else the
    /// [process default](Self::process_default).
    pub fn current() -> Arc<Config> {
        SCOPED
            .with(|s| s.borrow().last().cloned())
            .unwrap_or_else(|| Config::process_default().clone())
    }

    /// Makes this config [`current`](Self::current) on the calling thread
    /// until the returned guard drops. Scopes nest; dropping a guard ends
    /// its scope and every scope opened inside it.
    pub fn scope(&self) -> ConfigScope {
        let depth = SCOPED.with(|s| {
            let mut s = s.borrow_mut();
            s.push(Arc::new(self.clone()));
            s.len() - 1
        });
        ConfigScope {
            depth,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Runs `f` with this config [`current`](Self::current) on the calling
    /// thread.
    pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _scope = self.scope();
        f()
    }

    /// This config with `math` as its math mode.
    pub fn with_math(mut self, math: MathMode) -> Config {
        self.fusion.math = math;
        self
    }

    /// This config with results that do (`true`) or may not (`false`)
    /// depend on scheduling; see [`FusionConfig::deterministic`].
    pub fn with_deterministic(mut self, deterministic: bool) -> Config {
        self.fusion.deterministic = deterministic;
        self
    }

    /// Checks every field against the values it takes.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first field that is out of range.
    pub fn validate(&self) -> Result<()> {
        let bad =
            |field: &'static str, value: String, takes: &'static str| Err(Error::InvalidConfig { field, value, takes });
        let f = &self.fusion;
        if f.gpu_tile_elements == 0 || f.gpu_tile_elements > 1 << 40 {
            return bad("fusion.gpu_tile_elements", f.gpu_tile_elements.to_string(), "1 to 2^40");
        }
        if f.gpu_split_parts == 0 {
            return bad("fusion.gpu_split_parts", "0".into(), "a positive number");
        }
        let c = &self.codegen;
        const THREADS: &str = "a power of two from 32 to 1024";
        const RESIDENT: &str = "a multiple of 32 from 32 to 2048";
        for (field, v, takes) in [
            ("codegen.max_threads", c.max_threads, THREADS),
            ("codegen.staged_threads", c.staged_threads, THREADS),
            ("codegen.resident_threads", c.resident_threads, RESIDENT),
            ("codegen.staged_resident_threads", c.staged_resident_threads, RESIDENT),
        ] {
            let ok = if takes == THREADS {
                (32..=1024).contains(&v) && v.is_power_of_two()
            } else {
                (32..=2048).contains(&v) && v % 32 == 0
            };
            if !ok {
                return bad(field, v.to_string(), takes);
            }
        }
        if ![1, 2, 4, 8].contains(&c.run_element_bytes) {
            return bad(
                "codegen.run_element_bytes",
                c.run_element_bytes.to_string(),
                "1, 2, 4 or 8",
            );
        }
        if c.unroll.is_some_and(|u| !(1..=64).contains(&u)) {
            return bad("codegen.unroll", format!("{:?}", c.unroll), "None or 1 to 64");
        }
        if env::parse_qualifiers(&c.load_hints).is_none() {
            return bad(
                "codegen.load_hints",
                format!("{:?}", c.load_hints),
                "PTX qualifiers: letters, digits, '.', ':' and '_'",
            );
        }
        let j = &self.jit;
        if j.quick.is_some_and(|q| q.level > 3) {
            return bad("jit.quick", format!("{:?}", j.quick), "None or a level from 0 to 3");
        }
        if j.opt_level.is_some_and(|l| l > 4) {
            return bad("jit.opt_level", format!("{:?}", j.opt_level), "None or 0 to 4");
        }
        Ok(())
    }
}

thread_local! {
    /// The configs of the calling thread's open scopes, innermost last.
    static SCOPED: RefCell<Vec<Arc<Config>>> = const { RefCell::new(Vec::new()) };
}

/// A config made current on one thread by [`Config::scope`]; dropping it
/// ends the scope (and any opened inside it).
#[must_use = "the scope ends when the guard drops"]
pub struct ConfigScope {
    depth: usize,
    /// Scopes are per thread: the guard stays on the thread that made it.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::fmt::Debug for ConfigScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigScope").field("depth", &self.depth).finish()
    }
}

impl Drop for ConfigScope {
    fn drop(&mut self) {
        // Released outside the borrow: a config's drop runs no code of ours,
        // but the vector's storage is kept for the next scope.
        let ended: Vec<Arc<Config>> = SCOPED.with(|s| {
            let mut s = s.borrow_mut();
            let at = self.depth.min(s.len());
            s.split_off(at)
        });
        drop(ended);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_end_with_their_guards() {
        let base = Config::current();
        let fast = Config::default().with_math(MathMode::Fast);
        let loose = Config::default().with_deterministic(false);
        {
            let _a = fast.scope();
            assert_eq!(*Config::current(), fast);
            loose.with(|| assert_eq!(*Config::current(), loose));
            assert_eq!(*Config::current(), fast);
            let inner = loose.scope();
            assert_eq!(*Config::current(), loose);
            drop(inner);
            assert_eq!(*Config::current(), fast);
        }
        assert_eq!(Config::current(), base);
        // An outer guard dropped first ends the inner scope too.
        let outer = fast.scope();
        let inner = loose.scope();
        drop(outer);
        assert_eq!(Config::current(), base);
        drop(inner);
        assert_eq!(Config::current(), base);
        // Other threads do not see a scope.
        let _a = fast.scope();
        let there = std::thread::spawn(|| (*Config::current()).clone()).join().unwrap();
        assert_eq!(there, **Config::process_default());
    }

    #[test]
    fn the_default_validates_and_bad_fields_are_named() {
        Config::default().validate().unwrap();
        let mut c = Config::default();
        c.codegen.max_threads = 100;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("codegen.max_threads") && e.contains("100"), "{e}");
        let mut c = Config::default();
        c.codegen.load_hints = ".cs; trap".into();
        assert!(c.validate().unwrap_err().to_string().contains("codegen.load_hints"));
        let mut c = Config::default();
        c.fusion.gpu_split_parts = 0;
        assert!(c.validate().unwrap_err().to_string().contains("fusion.gpu_split_parts"));
        let mut c = Config::default();
        c.jit.opt_level = Some(5);
        assert!(c.validate().unwrap_err().to_string().contains("jit.opt_level"));
    }

    #[test]
    fn fractions_are_in_zero_to_one() {
        assert_eq!(Fraction::new(0.5).map(Fraction::get), Some(0.5));
        assert_eq!(Fraction::new(1.0), Some(Fraction::ALL));
        assert_eq!(Fraction::new(0.0), None);
        assert_eq!(Fraction::new(1.5), None);
        assert_eq!(Fraction::new(f32::NAN), None);
    }

    #[test]
    fn the_quick_tier_changes_only_its_fields() {
        let base = CodegenConfig::default();
        let quick = base.quick();
        assert_eq!(quick.unroll, Some(1));
        assert!(quick.row_reciprocal_f64 && quick.one_element_per_thread);
        assert_eq!((quick.load_keep, quick.chained_rows_keep), (None, None));
        assert_eq!(
            CodegenConfig {
                unroll: None,
                row_reciprocal_f64: false,
                one_element_per_thread: false,
                chained_rows_keep: base.chained_rows_keep,
                ..quick
            },
            base
        );
    }
}
