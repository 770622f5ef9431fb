//! Running tile kernel programs on a device: PTX generated for the device's
//! target, loaded once per (program, device), launched with its arguments
//! checked and its parameters' initial fills queued first.
//!
//! A device is one compute capability under one driver, so the per-device
//! cache is keyed by the [`Program`] and the settings it is compiled under
//! (the [`CodegenConfig`] and [`JitConfig`] of a [`Config`]); the PTX text
//! the module cache sees already encodes the target.

use super::CudaCompiler;
use crate::config::{CodegenConfig, Config, JitConfig};
use crate::device::cuda::background;
use crate::device::cuda::context::panic_message;
use crate::device::cuda::stream::{launch, Event};
use crate::device::cuda::{driver_error, DeviceBuffer, LoadedFunction, Stream};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::Program;
use crate::kernels::ptx_gen::{generate_with, PtxModule};
use crate::kernels::ptx_vm;
use cudarc::driver::{result, sys};
use smallvec::SmallVec;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// A generated module with its loaded kernel.
struct Loaded {
    module: PtxModule,
    kernel: LoadedFunction,
}

/// A program's PTX assembled for the device's interpreter (see
/// [`crate::kernels::ptx_vm`]), its code uploaded.
struct Interpreted {
    /// The module whose text is interpreted (the quick text when the
    /// program has one).
    module: PtxModule,
    code: ptx_vm::Code,
    buffer: DeviceBuffer,
    /// Recorded after the code's upload.
    copied: Event,
    /// The interpreter.
    kernel: LoadedFunction,
}

/// What a program's launches use before its tuned module is ready.
enum First {
    Jit(Loaded),
    Interpreted(Interpreted),
}

/// What launches use now.
enum Current<'a> {
    Jit(&'a Loaded),
    Interpreted(&'a Interpreted),
}

/// A program compiled for one device: its PTX module and loaded kernel.
///
/// Get one from [`CudaCompiler::compile`]; run it with
/// [`CompiledProgram::launch`].
///
/// **Two tiers.** The driver's JIT takes tens of milliseconds for one of
/// our modules at its highest optimization level, much of it spent on
/// unrolled loops and on the IEEE slow paths of `rcp.rn` (see
/// `benches/NOTES.md`, v8). A new program is therefore first
/// loaded *quickly*: its loops kept rolled (`.pragma "nounroll"`), the
/// reciprocals of row values taken through f64, an elementwise program
/// computed one element per thread so its per-element code is written once
/// (see [`CodegenConfig::quick`]), and
/// the JIT at a low optimization level, which gives the first call its
/// result sooner from a slower kernel. The *tuned* module (default
/// generation, the JIT's highest level) is loaded by background tuner
/// threads (up to four, compiling while launches go on) and replaces the
/// quick one for every launch once it is ready;
/// [`CudaCompiler::finish_compiles`] waits for that. A program whose quick
/// module would be its tuned text has no quick tier: the JIT's level alone
/// saves little on straight-line code, so it is loaded tuned at once. Both
/// tiers compute the same values: the same operations in the same order on
/// every element, with reciprocals rounded the same.
/// [`JitConfig::quick`] sets the quick tier, or turns it off.
///
/// **The interpreter.** Once the device's PTX interpreter is loaded (see
/// [`CudaCompiler::wait_interpreter`]), a new program that it can run does
/// not wait for the JIT at all: its quick text (or its tuned text, when it
/// has no quick one) is assembled for the interpreter in microseconds and
/// its launches run there until the tuned module is ready. The interpreter
/// executes the same PTX instructions in the same order, so the values are
/// again the same bit for bit.
pub struct CompiledProgram {
    program: Program,
    /// What launches use first: the quick tier, the interpreter, or the
    /// tuned module when `quick` is false.
    first: First,
    quick: bool,
    tuned: Arc<TunedSlot>,
    compile_time: Duration,
    /// Why the first launches did not go to the interpreter, when they did
    /// not and it was asked.
    not_interpreted: Option<String>,
}

/// Where a tuner thread puts a program's tuned module. Shared by the
/// program and its job in the queue, so the tuned compile can start before
/// the quick module is loaded.
struct TunedSlot {
    /// When the first compilation started.
    started: Instant,
    loaded: OnceLock<Loaded>,
    /// When (after `started`) the tuned module was ready.
    after: OnceLock<Duration>,
    /// Why the tuned module did not load, when it did not.
    error: OnceLock<Error>,
    /// Set when the compilation that queued it failed: nothing will launch
    /// the module, so the tuner skips it.
    abandoned: std::sync::atomic::AtomicBool,
    /// For a program first run on the interpreter: its quick module and JIT
    /// level, which the tuner loads instead when the tuned module fails to,
    /// so the program does not stay on the interpreter.
    fallback: Mutex<Option<(PtxModule, u32)>>,
    fallback_loaded: OnceLock<Loaded>,
}

impl TunedSlot {
    fn new(started: Instant) -> TunedSlot {
        TunedSlot {
            started,
            loaded: OnceLock::new(),
            after: OnceLock::new(),
            error: OnceLock::new(),
            abandoned: std::sync::atomic::AtomicBool::new(false),
            fallback: Mutex::new(None),
            fallback_loaded: OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for CompiledProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tier = if self.is_tuned() {
            "tuned"
        } else if self.is_interpreted() {
            "interpreted"
        } else {
            "quick"
        };
        write!(
            f,
            "CompiledProgram({} on cuda:{}, {tier}, {})",
            self.program.name,
            self.kernel().ordinal(),
            self.module().mapping.lines().next().unwrap_or_default()
        )
    }
}

impl CompiledProgram {
    /// The program this was compiled from.
    pub fn program(&self) -> &Program {
        &self.program
    }

    fn current(&self) -> Current<'_> {
        match (self.tuned.loaded.get(), &self.first) {
            (Some(tuned), _) => Current::Jit(tuned),
            (None, First::Jit(loaded)) => Current::Jit(loaded),
            (None, First::Interpreted(i)) => match self.tuned.fallback_loaded.get() {
                Some(quick) => Current::Jit(quick),
                None => Current::Interpreted(i),
            },
        }
    }

    /// Whether the program first ran on something other than its tuned
    /// module (a quick module or the interpreter), the tuned one compiling
    /// meanwhile (see [`CompiledProgram`]).
    pub fn has_quick_tier(&self) -> bool {
        self.quick
    }

    /// Whether the program's first launches run on the device's PTX
    /// interpreter (see [`CompiledProgram`]).
    pub fn first_interpreted(&self) -> bool {
        matches!(self.first, First::Interpreted(_))
    }

    /// Why the program's first launches did not run on the interpreter, when
    /// the quick tier is on and they did not (the interpreter was not loaded
    /// yet, or cannot run the kernel: an instruction it lacks, too much
    /// shared memory, ...).
    pub fn not_interpreted(&self) -> Option<&str> {
        self.not_interpreted.as_deref()
    }

    /// Whether launches run on the interpreter now: the first tier is the
    /// interpreter and the tuned module is not ready yet.
    pub fn is_interpreted(&self) -> bool {
        matches!(self.current(), Current::Interpreted(_))
    }

    /// Whether launches use the tuned module: always when the quick tier is
    /// off, otherwise once the background load finished.
    pub fn is_tuned(&self) -> bool {
        !self.quick || self.tuned.loaded.get().is_some()
    }

    /// The generated PTX module launches use now (the tuned one once it is
    /// loaded; the interpreted one before) and its launch shape.
    pub fn module(&self) -> &PtxModule {
        match self.current() {
            Current::Jit(l) => &l.module,
            Current::Interpreted(i) => &i.module,
        }
    }

    /// The loaded kernel launches use now: the interpreter's while the
    /// program runs there.
    pub fn kernel(&self) -> &LoadedFunction {
        match self.current() {
            Current::Jit(l) => &l.kernel,
            Current::Interpreted(i) => &i.kernel,
        }
    }

    /// How long PTX generation and loading (the driver's JIT, or its cache)
    /// of the first module took when the program was first compiled on this
    /// device; for a program first run on the interpreter, generation,
    /// assembly and queuing the code's upload.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// How long after the start of the first compilation the tuned module
    /// was ready; `None` while it is still being loaded, when it failed to
    /// load ([`tuning_error`](Self::tuning_error)), or when the process
    /// began to exit before its turn.
    pub fn tuned_after(&self) -> Option<Duration> {
        self.tuned.after.get().copied()
    }

    /// Why the tuned module failed to load, if it did: the program then
    /// keeps launching its quick module, which computes the same values (a
    /// program first run on the interpreter gets its quick module loaded
    /// then, when it has one, and stays on the interpreter otherwise).
    pub fn tuning_error(&self) -> Option<&Error> {
        self.tuned.error.get()
    }

    /// Queues the program on `stream` with `args`, one buffer per parameter
    /// in order: first the initial fills of the parameters that have one,
    /// then the kernel. Returns once the work is queued.
    ///
    /// The arguments are checked as the CPU executor checks them:
    /// [`Error::KernelArguments`] for a wrong count, [`Error::DTypeMismatch`]
    /// and [`Error::LengthMismatch`] for a buffer that does not fit its
    /// parameter, and [`Error::DeviceMismatch`] for a buffer or stream of
    /// another device. Every buffer is marked used on `stream`.
    pub fn launch(&self, args: &[&DeviceBuffer], stream: &Stream) -> Result<()> {
        self.launch_on(self.current(), args, &[], stream)
    }

    /// [`launch`](Self::launch) of a program with scalar arguments
    /// ([`Program::scalars`]): `scalars` holds one value per argument, in
    /// order, each converted to its argument's dtype as [`Scalar::cast`]
    /// converts ([`Error::KernelArguments`] for a wrong count).
    pub fn launch_with_scalars(&self, args: &[&DeviceBuffer], scalars: &[Scalar], stream: &Stream) -> Result<()> {
        self.launch_on(self.current(), args, scalars, stream)
    }

    /// [`launch`](Self::launch) on what the program ran on first (the quick
    /// module or the interpreter, when the program has such a tier), whether
    /// or not the tuned module is ready: for checking the tiers against each
    /// other.
    pub fn launch_first(&self, args: &[&DeviceBuffer], stream: &Stream) -> Result<()> {
        let first = match &self.first {
            First::Jit(l) => Current::Jit(l),
            First::Interpreted(i) => Current::Interpreted(i),
        };
        self.launch_on(first, args, &[], stream)
    }

    fn launch_on(&self, on: Current<'_>, args: &[&DeviceBuffer], scalars: &[Scalar], stream: &Stream) -> Result<()> {
        let shapes: SmallVec<[(DType, usize); 8]> = args.iter().map(|b| (b.dtype(), b.len())).collect();
        check_args(&self.program, &shapes)?;
        let scalars = scalar_words(&self.program, scalars)?;
        let (module, kernel) = match on {
            Current::Jit(l) => (&l.module, &l.kernel),
            Current::Interpreted(i) => (&i.module, &i.kernel),
        };
        let ordinal = kernel.ordinal();
        for (i, buffer) in args.iter().enumerate() {
            let on = buffer.device().ordinal();
            if on != ordinal || stream.ordinal() != ordinal {
                return Err(Error::DeviceMismatch {
                    op: "kernel argument",
                    lhs: format!("program `{}` on cuda:{ordinal}", self.program.name),
                    rhs: format!("argument {i} on cuda:{on}, stream on cuda:{}", stream.ordinal()),
                });
            }
        }
        let pointers: SmallVec<[u64; 8]> = args.iter().map(|b| b.ptr_on(stream)).collect();
        for ((param, buffer), &ptr) in self.program.params.iter().zip(args).zip(&pointers) {
            if let Some(init) = param.init {
                fill(ptr, buffer.len(), Fill::new(init.0, param.dtype), stream)?;
            }
        }
        let (x, y) = module.grid_dims();
        if let Current::Interpreted(i) = on {
            stream.wait(&i.copied)?;
            let mut params: SmallVec<[u64; 1 + ptx_vm::ARGS]> = SmallVec::new();
            params.push(i.buffer.ptr_on(stream));
            params.extend(pointers.iter().copied());
            params.extend(scalars.iter().copied());
            params.resize(1 + ptx_vm::ARGS, 0);
            // SAFETY: the interpreter takes the code's address and
            // `ARGS` pointers (the program's, then zeros, which the code
            // never reads: the assembler maps each parameter it loads to its
            // position); it executes the program's own instructions, so its
            // accesses are the compiled kernel's (see below); its shared
            // memory is the code's `shared_bytes`, and the code buffer is
            // marked used on `stream` like the arguments.
            return unsafe {
                launch(
                    kernel,
                    (x, y, 1),
                    (i.code.block_threads, 1, 1),
                    i.code.shared_bytes,
                    stream,
                    &params,
                )
            };
        }
        let mut words = pointers;
        words.extend(scalars.iter().copied());
        // SAFETY: the generated kernel takes one `.param .u64` pointer per
        // program parameter, in order, then one `.param .u64` per scalar
        // argument; each buffer holds the parameter's dtype and length
        // (checked above), so the kernel's accesses, which the verifier
        // bounds by the parameters' lengths, stay inside them; the buffers
        // are marked used on `stream`, so their blocks are not reused before
        // the kernel completes.
        unsafe { launch(kernel, (x, y, 1), (module.block_threads, 1, 1), 0, stream, &words) }
    }
}

/// One program's compiled form, once a compilation succeeded.
type ProgramSlot = Arc<Mutex<Option<Arc<CompiledProgram>>>>;

/// The program cache's key: a program and the settings it compiles under.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ProgramKey {
    program: Program,
    codegen: CodegenConfig,
    jit: JitConfig,
}

impl ProgramKey {
    fn new(program: &Program, config: &Config) -> ProgramKey {
        ProgramKey {
            program: program.clone(),
            codegen: config.codegen.clone(),
            jit: config.jit,
        }
    }
}

/// A tuned module waiting for a tuner thread: its slot, the module, the
/// program's name and the JIT level to load it at.
type TuningJob = (Arc<TunedSlot>, PtxModule, String, Option<u32>);

/// Compiled programs of one device, by program and settings, and the tuned
/// modules still to load.
#[derive(Default)]
pub(crate) struct ProgramCache {
    programs: Mutex<HashMap<ProgramKey, ProgramSlot>>,
    tuner: Mutex<TunerState>,
    tuned: Condvar,
}

/// Programs waiting for their tuned module.
#[derive(Default)]
struct TunerState {
    queue: VecDeque<TuningJob>,
    /// Queued programs plus the ones being loaded.
    pending: usize,
    /// Tuner threads running.
    running: usize,
    /// Of those, the ones loading a module.
    busy: usize,
}

impl TunerState {
    /// Drops the queued programs (they keep their quick modules); returns
    /// whether nothing is pending any more, for the caller to wake
    /// `finish_compiles`.
    fn drop_queued(&mut self) -> bool {
        self.pending -= self.queue.len();
        self.queue.clear();
        self.pending == 0
    }
}

/// The most tuner threads of one device: tuned modules compile in the
/// background, beside the quick modules of new programs in the foreground,
/// so they take at most half the machine's cores.
const MAX_TUNERS: usize = 4;

/// [`MAX_TUNERS`], or half the machine's parallelism when that is less (at least one).
fn max_tuners() -> usize {
    (cores() / 2).clamp(1, MAX_TUNERS)
}

/// The machine's parallelism, read once (on Linux it reads the affinity
/// mask and cgroup quotas each time it is asked).
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl CudaCompiler {
    /// `program` compiled for this device under [`Config::current`]; see
    /// [`compile_with`](Self::compile_with).
    pub fn compile(&self, program: &Program) -> Result<Arc<CompiledProgram>> {
        self.compile_with(program, &Config::current())
    }

    /// `program` compiled for this device under the codegen and JIT
    /// settings of `config`: generated and loaded on first use, then shared
    /// by every compile of the same program under the same settings. A
    /// program the generator cannot lower returns its error; one the
    /// driver's JIT rejects returns [`Error::PtxLoad`] with the JIT's log.
    ///
    /// The first compilation queues the tuned module for a tuner thread,
    /// then loads the quick tier while the tuned one compiles (see
    /// [`CompiledProgram`]).
    ///
    /// Where a measurement chose other codegen settings for the program on
    /// this device ([`measure_choice`](Self::measure_choice), in this
    /// process or an earlier one) and `config` uses measured choices
    /// ([`JitConfig::measured`]), it is compiled under those instead.
    ///
    /// # Errors
    /// Also [`Error::InvalidConfig`] for a config field out of range.
    pub fn compile_with(&self, program: &Program, config: &Config) -> Result<Arc<CompiledProgram>> {
        config.validate()?;
        // A measured choice for the program replaces the codegen settings.
        if let Some(codegen) = self.choices.lookup(program, config, self.device.info()) {
            let chosen = Config {
                codegen,
                jit: JitConfig {
                    measured: false,
                    ..config.jit
                },
                ..config.clone()
            };
            return self.compile_with(program, &chosen);
        }
        // The table is locked only to find the program's slot; the slot is
        // held through generation and the JIT, so threads asking for the same
        // program compile it once while different programs compile at once.
        let slot = self
            .programs
            .programs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(ProgramKey::new(program, config))
            .or_default()
            .clone();
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(compiled) = &*slot {
            return Ok(compiled.clone());
        }
        let started = Instant::now();
        let target = self.target();
        let tuned_module = generate_with(program, &target, &config.codegen)?;
        let tuned_level = config.jit.opt_level;
        // The quick tier's module, unless it would be the tuned text anyway
        // (a row kernel without loops or row reciprocals): the JIT's level
        // alone saves little there, so such a kernel is loaded tuned at once.
        let quick = match config.jit.quick {
            Some(tier) if tier.quick_text => {
                let module = generate_with(program, &target, &config.codegen.quick())?;
                (module != tuned_module).then_some((module, tier.level))
            }
            Some(tier) => Some((tuned_module.clone(), tier.level)),
            None => None,
        };
        let tuned = Arc::new(TunedSlot::new(started));
        // With the interpreter loaded, a program it can run needs no JIT
        // before its first launch: the tuned module compiles meanwhile.
        // The tuned text runs fewer instructions per element (an elementwise
        // quick text computes one element per thread); the quick one, with
        // its loops rolled, needs fewer registers when the tuned one does
        // not fit.
        let mut not_interpreted = None;
        if config.jit.quick.is_some() && config.jit.interpreter {
            let texts = std::iter::once(&tuned_module).chain(quick.as_ref().map(|(m, _)| m));
            match self.interpret(texts) {
                Ok(interpreted) => {
                    if let Some(q) = &quick {
                        *tuned.fallback.lock().unwrap_or_else(PoisonError::into_inner) = Some(q.clone());
                    }
                    self.queue_tuning((tuned.clone(), tuned_module, program.name.clone(), tuned_level))?;
                    let compiled = Arc::new(CompiledProgram {
                        program: program.clone(),
                        tuned,
                        compile_time: started.elapsed(),
                        first: First::Interpreted(interpreted),
                        quick: true,
                        not_interpreted: None,
                    });
                    *slot = Some(compiled.clone());
                    return Ok(compiled);
                }
                Err(why) => not_interpreted = Some(why),
            }
        }
        let (first, quick) = match quick {
            Some((module, level)) => {
                // The tuned module compiles on a tuner thread while the quick
                // one compiles here: the driver's linker runs both at once.
                self.queue_tuning((tuned.clone(), tuned_module, program.name.clone(), tuned_level))?;
                match self
                    .device
                    .load_at(&module.text, &module.entry, &program.name, Some(level))
                {
                    Ok(kernel) => (First::Jit(Loaded { module, kernel }), true),
                    Err(e) => {
                        tuned.abandoned.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            None => {
                let kernel =
                    self.device
                        .load_at(&tuned_module.text, &tuned_module.entry, &program.name, tuned_level)?;
                (
                    First::Jit(Loaded {
                        module: tuned_module,
                        kernel,
                    }),
                    false,
                )
            }
        };
        let compile_time = started.elapsed();
        if !quick {
            let _ = tuned.after.set(compile_time);
        }
        let compiled = Arc::new(CompiledProgram {
            program: program.clone(),
            tuned,
            compile_time,
            first,
            quick,
            not_interpreted,
        });
        *slot = Some(compiled.clone());
        Ok(compiled)
    }

    /// The first of `texts` that the interpreter can run, assembled and its
    /// code uploaded; otherwise why not (the caller then compiles a module).
    /// A failed upload is such a reason too: the JIT path reports the
    /// device's state if it is broken.
    fn interpret<'m>(&self, texts: impl Iterator<Item = &'m PtxModule>) -> std::result::Result<Interpreted, String> {
        // Form 0 is in every module: is any loaded?
        if self.interpreter_for(0).is_none() {
            return Err("the interpreter is not loaded (yet)".into());
        }
        let max_shared = u32::try_from(self.device.info().max_shared_memory_per_block).unwrap_or(u32::MAX);
        // The first text that assembles and that a loaded module runs.
        let mut why = String::new();
        let (module, code, kernel) = texts
            .into_iter()
            .find_map(|m| match ptx_vm::assemble(m, max_shared) {
                Ok(code) => match self.interpreter_for(code.max_form) {
                    Some(kernel) => Some((m, code, kernel)),
                    None => {
                        why = "only the interpreter's core module is loaded, and the kernel needs other forms".into();
                        None
                    }
                },
                Err(e) => {
                    why = e.to_string();
                    None
                }
            })
            .ok_or(why)?;
        // The code goes straight from its words, not through the staging
        // buffers a first call's input uploads may hold; launches on any
        // stream wait for the copy's event rather than the host.
        let upload = || -> Result<(DeviceBuffer, Event)> {
            let stream = self.device.stream(0);
            let buffer = self.device.alloc_on(DType::U32, code.words.len(), stream)?;
            let bytes: &[u8] = bytemuck::cast_slice(&code.words);
            // SAFETY: `buffer` holds `code.words.len()` u32 and is marked
            // used on `stream`; the source is the heap block of `code.words`,
            // which moves into the returned `Interpreted` without moving the
            // block and lives as long as the compiled program, which every
            // launch (and so every wait for this copy) borrows.
            unsafe { sys::cuMemcpyHtoDAsync_v2(buffer.ptr(), bytes.as_ptr().cast(), bytes.len(), stream.raw()) }
                .result()
                .map_err(driver_error("cuMemcpyHtoDAsync"))?;
            let copied = Event::new(&self.device, false)?;
            copied.record(stream)?;
            Ok((buffer, copied))
        };
        let (buffer, copied) = upload().map_err(|e| format!("uploading the interpreter's code failed: {e}"))?;
        Ok(Interpreted {
            module: module.clone(),
            code,
            buffer,
            copied,
            kernel,
        })
    }

    /// Every program of `programs` compiled for this device under
    /// [`Config::current`]; see [`compile_all_with`](Self::compile_all_with).
    pub fn compile_all(&self, programs: &[&Program]) -> Result<Vec<Arc<CompiledProgram>>> {
        self.compile_all_with(programs, &Config::current())
    }

    /// Every program of `programs` compiled for this device under `config`,
    /// in order, as [`compile_with`](Self::compile_with) would give them
    /// one by one. Those not
    /// compiled yet are compiled on up to one thread each (at most the
    /// machine's parallelism): the driver's linker compiles on several
    /// threads at once, so a plan of several new kernels waits about as
    /// long as for its slowest one. The first error, in program order, is
    /// returned.
    pub fn compile_all_with(&self, programs: &[&Program], config: &Config) -> Result<Vec<Arc<CompiledProgram>>> {
        let missing = programs.iter().filter(|p| !self.is_compiled(p, config)).count();
        let threads = cores().min(missing);
        if threads < 2 {
            return programs.iter().map(|p| self.compile_with(p, config)).collect();
        }
        // Each worker takes the next index and keeps what it compiled.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || {
            let mut done = vec![];
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(program) = programs.get(i) else { return done };
                done.push((i, self.compile_with(program, config)));
            }
        };
        let mut done = std::thread::scope(|scope| {
            // A helper that cannot start leaves its share to the others.
            let helpers: Vec<_> = (1..threads)
                .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
                .collect();
            let mut done = work();
            for helper in helpers {
                match helper.join() {
                    Ok(theirs) => done.extend(theirs),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            done
        });
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, compiled)| compiled).collect()
    }

    /// The number of programs this device has compiled (or is compiling)
    /// and keeps in its program cache: one per distinct [`Program`] (which
    /// holds no constant a user wrote: those are scalar arguments) and
    /// compile settings.
    pub fn compiled_programs(&self) -> usize {
        self.programs
            .programs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether `program` is compiled on this device under `config` already
    /// (false while another thread compiles it).
    pub(crate) fn is_compiled(&self, program: &Program, config: &Config) -> bool {
        let key = ProgramKey::new(program, config);
        let table = self.programs.programs.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .get(&key)
            .is_some_and(|slot| slot.try_lock().is_ok_and(|compiled| compiled.is_some()))
    }

    /// Waits until every program compiled so far on this device launches its
    /// tuned module (see [`CompiledProgram`]). A tuned module the JIT fails
    /// to load leaves its program on the quick tier and does not fail this
    /// call; [`CompiledProgram::is_tuned`] and
    /// [`CompiledProgram::tuning_error`] tell.
    pub fn finish_compiles(&self) {
        let mut state = self.programs.tuner.lock().unwrap_or_else(PoisonError::into_inner);
        while state.pending > 0 {
            state = self.programs.tuned.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// How many programs compiled on this device still wait for their
    /// tuned module (see [`CompiledProgram`]);
    /// [`finish_compiles`](Self::finish_compiles) waits until there are
    /// none.
    pub fn pending_compiles(&self) -> usize {
        self.programs
            .tuner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pending
    }

    /// Queues a tuned module for its slot (see [`TuningJob`]), starting
    /// another tuner thread when the queue holds more jobs than tuner
    /// threads wait for work (up to [`max_tuners`]): the driver's linker
    /// compiles on several threads at once.
    fn queue_tuning(&self, job: TuningJob) -> Result<()> {
        let mut state = self.programs.tuner.lock().unwrap_or_else(PoisonError::into_inner);
        state.queue.push_back(job);
        state.pending += 1;
        if state.running >= max_tuners() || state.running - state.busy >= state.queue.len() {
            return Ok(());
        }
        let spawned = CudaCompiler::open(self.ordinal()).and_then(|compiler| {
            background::spawn(format!("tilefuse-tuner-cuda{}", self.ordinal()), move || {
                compiler.run_tuner()
            })
            .map_err(|e| Error::Driver {
                call: "std::thread::spawn",
                message: format!("the thread loading tuned modules did not start: {e}"),
            })
        });
        match spawned {
            Ok(()) => {
                state.running += 1;
                Ok(())
            }
            // The running threads take the job.
            Err(_) if state.running > 0 => Ok(()),
            Err(e) => {
                // Nothing will load the queued modules, and no load is
                // running: `finish_compiles` must not wait.
                state.drop_queued();
                self.programs.tuned.notify_all();
                Err(e)
            }
        }
    }

    /// A tuner thread: loads queued programs' tuned modules until the
    /// queue is empty, or until the process starts to exit (the programs
    /// left keep their quick modules).
    fn run_tuner(&self) {
        loop {
            let (slot, module, name, tuned_level) = {
                let mut state = self.programs.tuner.lock().unwrap_or_else(PoisonError::into_inner);
                if background::exiting() && state.drop_queued() {
                    self.programs.tuned.notify_all();
                }
                match state.queue.pop_front() {
                    Some(job) => {
                        state.busy += 1;
                        job
                    }
                    None => {
                        state.running -= 1;
                        return;
                    }
                }
            };
            // A job whose compilation failed is skipped: no program holds
            // its slot. A panic while loading must not stop the thread with
            // the job still pending: `finish_compiles` would wait forever.
            let load = |module: &PtxModule, level: Option<u32>| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.device.load_at(&module.text, &module.entry, &name, level)
                }))
                .unwrap_or_else(|panic| {
                    Err(Error::Driver {
                        call: "tuned module load",
                        message: format!("loading the tuned module panicked: {}", panic_message(panic.as_ref())),
                    })
                })
            };
            let loaded =
                (!slot.abandoned.load(std::sync::atomic::Ordering::Relaxed)).then(|| load(&module, tuned_level));
            match loaded {
                Some(Ok(kernel)) => {
                    let _ = slot.after.set(slot.started.elapsed());
                    let _ = slot.loaded.set(Loaded { module, kernel });
                }
                Some(Err(e)) => {
                    let _ = slot.error.set(e);
                    let fallback = slot.fallback.lock().unwrap_or_else(PoisonError::into_inner).take();
                    // No new JIT once the process exits (see `background`).
                    if let Some((quick, level)) = fallback.filter(|_| !background::exiting()) {
                        if let Ok(kernel) = load(&quick, Some(level)) {
                            let _ = slot.fallback_loaded.set(Loaded { module: quick, kernel });
                        }
                    }
                }
                None => {}
            }
            let mut state = self.programs.tuner.lock().unwrap_or_else(PoisonError::into_inner);
            state.busy -= 1;
            state.pending -= 1;
            if state.pending == 0 {
                self.programs.tuned.notify_all();
            }
        }
    }
}

/// Compiles `program` with `compiler` (cached) and queues it on `stream`
/// with `args`, one buffer per parameter; see [`CompiledProgram::launch`].
pub fn run_program(compiler: &CudaCompiler, program: &Program, args: &[&DeviceBuffer], stream: &Stream) -> Result<()> {
    compiler.compile(program)?.launch(args, stream)
}

/// [`run_program`] for a program with scalar arguments; see
/// [`CompiledProgram::launch_with_scalars`].
pub fn run_program_with_scalars(
    compiler: &CudaCompiler,
    program: &Program,
    args: &[&DeviceBuffer],
    scalars: &[Scalar],
    stream: &Stream,
) -> Result<()> {
    compiler.compile(program)?.launch_with_scalars(args, scalars, stream)
}

/// Checks argument dtypes and lengths against the program's parameters,
/// with the errors the CPU executor gives.
fn check_args(program: &Program, args: &[(DType, usize)]) -> Result<()> {
    if args.len() != program.params.len() {
        return Err(Error::KernelArguments {
            program: program.name.clone(),
            reason: format!("{} arguments given for {} parameters", args.len(), program.params.len()),
        });
    }
    for (param, &(dtype, len)) in program.params.iter().zip(args) {
        if dtype != param.dtype {
            return Err(Error::DTypeMismatch {
                op: "kernel argument",
                lhs: param.dtype,
                rhs: dtype,
            });
        }
        if len as u64 != param.len {
            return Err(Error::LengthMismatch {
                op: "kernel argument",
                len,
                shape: [param.len as usize].into_iter().collect(),
            });
        }
    }
    Ok(())
}

/// The launch words of the scalar arguments: each value converted to its
/// argument's dtype, its bytes in the low end of a `u64` (as the generated
/// kernel reads them).
fn scalar_words(program: &Program, scalars: &[Scalar]) -> Result<SmallVec<[u64; 4]>> {
    program.check_scalar_count(scalars.len())?;
    Ok(program
        .scalars
        .iter()
        .zip(scalars)
        .map(|(&d, &s)| s.element_bits(d))
        .collect())
}

/// The bit pattern of a parameter's initial value, by element size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    B8(u8),
    B16(u16),
    B32(u32),
    /// An 8-byte element as its low and high words (little-endian).
    B64 {
        low: u32,
        high: u32,
    },
}

impl Fill {
    /// `value` rounded or wrapped to `dtype`, as the host buffers store it.
    fn new(value: Scalar, dtype: DType) -> Fill {
        let bits = value.element_bits(dtype);
        match dtype.size_in_bytes() {
            1 => Fill::B8(bits as u8),
            2 => Fill::B16(bits as u16),
            4 => Fill::B32(bits as u32),
            _ => Fill::B64 {
                low: bits as u32,
                high: (bits >> 32) as u32,
            },
        }
    }
}

/// Queues the fill of `len` elements at `ptr` with `value` on `stream`.
///
/// 8-byte elements with equal halves are one 32-bit memset of twice the
/// words; otherwise each half is a 2-D 32-bit memset of `len` rows of one
/// word with a pitch of 8 bytes.
fn fill(ptr: u64, len: usize, value: Fill, stream: &Stream) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    stream.bind()?;
    let s = stream.raw();
    // SAFETY: `ptr` is the start of a live buffer of `len` elements of the
    // fill's size, marked used on `stream`; each memset below writes exactly
    // those bytes.
    unsafe {
        match value {
            Fill::B8(v) => result::memset_d8_async(ptr, v, len, s).map_err(driver_error("cuMemsetD8Async")),
            Fill::B16(v) => sys::cuMemsetD16Async(ptr, v, len, s)
                .result()
                .map_err(driver_error("cuMemsetD16Async")),
            Fill::B32(v) => sys::cuMemsetD32Async(ptr, v, len, s)
                .result()
                .map_err(driver_error("cuMemsetD32Async")),
            Fill::B64 { low, high } if low == high => sys::cuMemsetD32Async(ptr, low, 2 * len, s)
                .result()
                .map_err(driver_error("cuMemsetD32Async")),
            Fill::B64 { low, high } => {
                sys::cuMemsetD2D32Async(ptr, 8, low, 1, len, s)
                    .result()
                    .map_err(driver_error("cuMemsetD2D32Async"))?;
                sys::cuMemsetD2D32Async(ptr + 4, 8, high, 1, len, s)
                    .result()
                    .map_err(driver_error("cuMemsetD2D32Async"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::ir::{Access, Builder, IndexExpr};
    use crate::kernels::ptx_gen::{generate, generate_quick};
    use crate::ops::Padding;
    use crate::storage::HostBuffer;

    fn copy_program() -> Program {
        let mut b = Builder::new("copy", &[2]);
        let x = b.param("x", DType::F32, 8, Access::Read);
        let y = b.param_init("y", DType::F64, 8, Access::Write, Scalar::Float(1.0, DType::F64));
        let vx = b.view_contiguous(x, &[8], &[4], Padding::Zero);
        let vy = b.view_contiguous(y, &[8], &[4], Padding::Zero);
        let t = b.load(vx, &[IndexExpr::grid(0)], false);
        let t = b.cast(t, DType::F64);
        b.store(vy, &[IndexExpr::grid(0)], t, false);
        b.finish().unwrap()
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn a_tuned_module_that_fails_to_load_leaves_the_quick_one_and_says_why() {
        let compiler = CudaCompiler::open(0).unwrap();
        let device = compiler.device();
        let p = copy_program();
        let module = generate_quick(&p, &compiler.target()).unwrap();
        let kernel = device.load_at(&module.text, &module.entry, &p.name, Some(1)).unwrap();
        let mut broken = module.clone();
        broken.text = broken.text.replace("ret;", "not_an_instruction;");
        let name = p.name.clone();
        let compiled = Arc::new(CompiledProgram {
            program: p,
            first: First::Jit(Loaded { module, kernel }),
            quick: true,
            not_interpreted: None,
            tuned: Arc::new(TunedSlot::new(Instant::now())),
            compile_time: Duration::ZERO,
        });
        compiler
            .queue_tuning((compiled.tuned.clone(), broken, name, None))
            .unwrap();
        compiler.finish_compiles();
        assert!(!compiled.is_tuned());
        assert_eq!(compiled.tuned_after(), None);
        let error = compiled.tuning_error().expect("the load error");
        assert!(matches!(error, Error::PtxLoad { .. }), "{error:?}");
        // The quick module still runs: y = 1.0 (its fill), then x as f64.
        let stream = device.stream(0);
        let xs: Vec<f32> = (0..8).map(|i| i as f32 - 2.5).collect();
        let x = device.from_host_on(&HostBuffer::from_elements(&xs), stream).unwrap();
        let y = device.alloc_on(DType::F64, 8, stream).unwrap();
        compiled.launch(&[&x, &y], stream).unwrap();
        let out: Vec<f64> = y.to_host_on(stream).unwrap().to_vec();
        assert_eq!(out, xs.iter().map(|&v| v as f64).collect::<Vec<_>>());
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn an_interpreted_program_whose_tuned_module_fails_gets_its_quick_module() {
        let compiler = CudaCompiler::open(0).unwrap();
        let device = compiler.device();
        compiler.wait_interpreter().unwrap();
        let p = copy_program();
        let quick = generate_quick(&p, &compiler.target()).unwrap();
        let mut broken = generate(&p, &compiler.target()).unwrap();
        let interpreted = compiler.interpret(std::iter::once(&broken)).unwrap();
        broken.text = broken.text.replace("ret;", "not_an_instruction;");
        let tuned = Arc::new(TunedSlot::new(Instant::now()));
        *tuned.fallback.lock().unwrap() = Some((quick, 1));
        let compiled = Arc::new(CompiledProgram {
            program: p.clone(),
            first: First::Interpreted(interpreted),
            quick: true,
            not_interpreted: None,
            tuned,
            compile_time: Duration::ZERO,
        });
        let stream = device.stream(0);
        let xs: Vec<f32> = (0..8).map(|i| i as f32 - 2.5).collect();
        let want: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
        let x = device.from_host_on(&HostBuffer::from_elements(&xs), stream).unwrap();
        let run = || {
            let y = device.alloc_on(DType::F64, 8, stream).unwrap();
            compiled.launch(&[&x, &y], stream).unwrap();
            y.to_host_on(stream).unwrap().to_vec::<f64>()
        };
        // On the interpreter first.
        assert!(compiled.is_interpreted());
        assert_eq!(run(), want);
        compiler
            .queue_tuning((compiled.tuned.clone(), broken, p.name.clone(), None))
            .unwrap();
        compiler.finish_compiles();
        assert!(!compiled.is_tuned());
        assert!(matches!(compiled.tuning_error(), Some(Error::PtxLoad { .. })));
        // Then on its quick module, loaded at level 1 instead.
        assert!(!compiled.is_interpreted());
        assert_eq!(compiled.kernel().jit_level(), Some(1));
        assert_eq!(run(), want);
    }

    /// f64 values for the math test: every binade of both signs (several
    /// mantissas each), a dense sweep of [-800, 800], and the specials.
    fn f64_samples() -> Vec<f64> {
        let mut xs = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
            -5e-324,
            f64::MAX,
        ];
        for e in -1074..=1023 {
            for m in [1.0, 1.1, 1.3, std::f64::consts::SQRT_2, 1.5, 1.999_999_999_999_999_8] {
                let v = m * 2f64.powi(e);
                xs.extend([v, -v]);
            }
        }
        xs.extend((0..40_000).map(|i| -800.0 + 1600.0 * i as f64 / 40_000.0));
        xs
    }

    /// Runs the one-op program `op` of `inputs` on the GPU and returns its output.
    fn run_f64(
        compiler: &CudaCompiler,
        name: &str,
        inputs: &[&[f64]],
        op: impl FnOnce(&mut Builder, &[crate::kernels::ir::ValueId]) -> crate::kernels::ir::ValueId,
    ) -> Vec<f64> {
        let n = inputs[0].len() as u64;
        let tile = 256u32;
        let mut b = Builder::new(name, &[n.div_ceil(tile as u64)]);
        let params: Vec<_> = (0..inputs.len())
            .map(|i| b.param(format!("x{i}"), DType::F64, n, Access::Read))
            .collect();
        let y = b.param("y", DType::F64, n, Access::Write);
        let loaded: Vec<_> = params
            .iter()
            .map(|&p| {
                let v = b.view_contiguous(p, &[n], &[tile], Padding::Zero);
                b.load(v, &[IndexExpr::grid(0)], true)
            })
            .collect();
        let r = op(&mut b, &loaded);
        let vy = b.view_contiguous(y, &[n], &[tile], Padding::Zero);
        b.store(vy, &[IndexExpr::grid(0)], r, true);
        let program = b.finish().unwrap();
        let device = compiler.device();
        let stream = device.stream(0);
        let bufs: Vec<DeviceBuffer> = inputs
            .iter()
            .map(|x| device.from_host_on(&HostBuffer::from_elements(x), stream).unwrap())
            .collect();
        let out = device.alloc_on(DType::F64, n as usize, stream).unwrap();
        let mut args: Vec<&DeviceBuffer> = bufs.iter().collect();
        args.push(&out);
        run_program(compiler, &program, &args, stream).unwrap();
        out.to_host_on(stream).unwrap().to_vec()
    }

    /// The f64 functions on the GPU give the bits their CPU model gives
    /// (`math64::tests`, where their errors are measured), NaNs aside.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn f64_math_matches_its_cpu_model_bit_for_bit() {
        use crate::kernels::ptx_gen::math64::{self, tests::Cpu64};
        use crate::ops::{BinaryOp, UnaryOp};
        type F = fn(&mut Cpu64, &f64) -> f64;
        let compiler = CudaCompiler::open(0).unwrap();
        let xs = f64_samples();
        let same = |what: &str, got: &[f64], want: &dyn Fn(usize) -> f64, at: &dyn Fn(usize) -> String| {
            let bad: Vec<usize> = (0..got.len())
                .filter(|&i| {
                    let w = want(i);
                    !(got[i].to_bits() == w.to_bits() || (got[i].is_nan() && w.is_nan()))
                })
                .collect();
            let shown: Vec<String> = bad
                .iter()
                .take(5)
                .map(|&i| format!("{}: gpu {:e}, cpu model {:e}", at(i), got[i], want(i)))
                .collect();
            assert!(
                bad.is_empty(),
                "{what}: {} of {} differ: {shown:?}",
                bad.len(),
                got.len()
            );
        };
        let unary: [(UnaryOp, F); 11] = [
            (UnaryOp::Exp, math64::exp),
            (UnaryOp::Exp2, math64::exp2),
            (UnaryOp::Log, math64::log),
            (UnaryOp::Log2, math64::log2),
            (UnaryOp::Sin, |m, x| math64::sin_cos(m, x, false)),
            (UnaryOp::Cos, |m, x| math64::sin_cos(m, x, true)),
            (UnaryOp::Tanh, math64::tanh),
            (UnaryOp::Sigmoid, math64::sigmoid),
            (UnaryOp::Silu, math64::silu),
            (UnaryOp::GeluTanh, math64::gelu_tanh),
            (UnaryOp::GeluErf, math64::gelu_erf),
        ];
        for (op, f) in unary {
            let got = run_f64(&compiler, &format!("{op:?}_f64"), &[&xs], |b, v| b.unary(op, v[0]));
            same(&format!("{op:?}"), &got, &|i| f(&mut Cpu64, &xs[i]), &|i| {
                format!("x = {:e}", xs[i])
            });
        }
        // pow over every sample against exponents from small integers and
        // halves to large values, and the samples themselves reversed.
        let bs: Vec<f64> = (0..xs.len())
            .map(|i| match i % 4 {
                0 => (i % 41) as f64 - 20.0,
                1 => ((i % 37) as f64 - 18.0) * 0.5,
                2 => ((i * 7919) % 20_001) as f64 / 10.0 - 1000.0,
                _ => xs[xs.len() - 1 - i],
            })
            .collect();
        let got = run_f64(&compiler, "pow_f64", &[&xs, &bs], |b, v| {
            b.binary(BinaryOp::Pow, v[0], v[1])
        });
        same("Pow", &got, &|i| math64::pow(&mut Cpu64, &xs[i], &bs[i]), &|i| {
            format!("({:e}, {:e})", xs[i], bs[i])
        });
    }

    #[test]
    fn arguments_are_checked_like_the_cpu_executor_checks_them() {
        let p = copy_program();
        assert!(check_args(&p, &[(DType::F32, 8), (DType::F64, 8)]).is_ok());
        let e = check_args(&p, &[(DType::F32, 8)]).unwrap_err();
        assert!(matches!(e, Error::KernelArguments { .. }), "{e}");
        let e = check_args(&p, &[(DType::F32, 8), (DType::F32, 8)]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DTypeMismatch {
                    lhs: DType::F64,
                    rhs: DType::F32,
                    ..
                }
            ),
            "{e}"
        );
        let e = check_args(&p, &[(DType::F32, 7), (DType::F64, 8)]).unwrap_err();
        assert!(matches!(e, Error::LengthMismatch { len: 7, .. }), "{e}");
    }

    #[test]
    fn fills_are_the_bit_patterns_of_the_rounded_value() {
        let f = |x: f64, d| Fill::new(Scalar::Float(x, d), d);
        let i = |x: i128, d| Fill::new(Scalar::Int(x, d), d);
        assert_eq!(Fill::new(Scalar::Bool(true), DType::Bool), Fill::B8(1));
        assert_eq!(i(-1, DType::U8), Fill::B8(0xff));
        assert_eq!(f(1.0, DType::F16), Fill::B16(0x3c00));
        assert_eq!(f(-1.0, DType::BF16), Fill::B16(0xbf80));
        assert_eq!(f(f64::NEG_INFINITY, DType::F32), Fill::B32(0xff80_0000));
        assert_eq!(i(-2, DType::I32), Fill::B32(0xffff_fffe));
        assert_eq!(
            f(1.0, DType::F64),
            Fill::B64 {
                low: 0,
                high: 0x3ff0_0000
            }
        );
        assert_eq!(
            i(-1, DType::I64),
            Fill::B64 {
                low: u32::MAX,
                high: u32::MAX
            }
        );
        assert_eq!(i(5, DType::I64), Fill::B64 { low: 5, high: 0 });
    }
}
