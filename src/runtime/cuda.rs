//! Running a fusion plan on a CUDA device.
//!
//! The passes of one run, in order:
//!
//! 1. **Compile** every kernel's program for the device and plan the stream
//!    schedule, once per (device, cached plan): a pipeline seen before
//!    costs one lookup by the plan's address.
//! 2. **Inputs**: data leaves already on the device are used as they are;
//!    host data (or data of another device) is uploaded once and kept by the
//!    storage (see below), so running a pipeline again on the same inputs
//!    copies nothing. When a run both compiles and uploads (a new pipeline
//!    on host data), the compile runs on a helper thread during the
//!    uploads, so the two overlap.
//! 3. **Schedule**: the scheduler spreads the launches over the device's
//!    pooled streams (independent kernels on different streams, event waits
//!    for dependencies).
//! 4. **Allocate** every intermediate and output buffer from the caching
//!    allocator, each on the stream of its first user, before any launch: an
//!    allocation that fails leaves nothing half queued.
//! 5. **Launch**: first every stream of the plan waits for the work that
//!    produced the inputs (one event per stream that used them, recorded
//!    before this run queues anything, so the run's own streams never wait
//!    for each other through an input); then the kernels, in plan order.
//!
//! The run returns once everything is queued: the outputs are
//! [`Storage::Device`] values holding [`DeviceBuffer`]s, which remember the
//! streams that write them, and a download ([`Storage::host`]) waits for
//! those streams. Intermediate buffers go back to the allocator with an event on each
//! stream that used them, so their memory is reused only after the kernels
//! are done with it.
//!
//! # Device copies of host data
//!
//! The device copy of a host storage is kept by the storage itself, in its
//! [`HostBuffer`](crate::storage::HostBuffer) (for device storage used on
//! another device, in its host copy), as an [`Upload`]: the storage owns
//! it, and dropping the storage drops it, which returns its memory to the
//! allocator. A run looks for a copy on its device among the storage's own
//! few copies, so its cost does not grow with the number of host tensors
//! that have device copies. [`upload_count`] counts the live uploads of a
//! device.
//!
//! Out of memory, a run frees the allocator's cached blocks and tries once
//! more; the copies of live storages stay (they are their storages', and
//! the next run would upload them again), while those of dropped storages
//! are gone already.

use super::timing;
use crate::config::{CodegenConfig, Config, JitConfig};
use crate::device::cuda::{
    BufferId, CompiledProgram, CudaCompiler, CudaDevice, DeviceBuffer, LaunchPlan, MeasuredChoice, ScheduledLaunch,
    Scheduler, STREAM_COUNT,
};
use crate::device::Device;
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::fusion::{BufferKind, BufferRef, Plan};
use crate::graph::Subgraph;
use crate::kernels::ir::Access;
use crate::runtime::{data_leaves, full_values, kernel_scalars, Backend, RealizeStats};
use crate::shape::Shape;
use crate::storage::{DeviceData, DeviceStorage, HostBuffer, Storage};
use smallvec::SmallVec;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Instant;

/// A CUDA device as the back end of a realization, and the config its
/// kernels compile under.
pub(super) struct CudaBackend<'a>(Arc<CudaCompiler>, &'a Config);

impl<'a> CudaBackend<'a> {
    /// CUDA device `ordinal`, opened (or found open), compiling under `config`.
    pub(super) fn open(ordinal: usize, config: &'a Config) -> Result<CudaBackend<'a>> {
        CudaCompiler::open(ordinal).map(|compiler| CudaBackend(compiler, config))
    }
}

impl Backend for CudaBackend<'_> {
    fn device(&self) -> Device {
        Device::Cuda(self.0.ordinal())
    }

    fn run(
        &self,
        plan: &Arc<Plan>,
        leaves: &[Arc<Storage>],
        scalars: &[Scalar],
        _shapes: &[Shape],
        stats: &mut RealizeStats,
        since: Instant,
    ) -> Result<(Vec<Arc<Storage>>, Instant)> {
        run(plan, leaves, scalars, &self.0, self.1, stats, since)
    }

    fn make_resident(&self, host: &[Arc<Storage>], stats: &mut RealizeStats) -> Result<()> {
        upload_all(self.0.device(), host, stats)
    }
}

/// Runs every kernel of `plan` on CUDA device `ordinal` over the data leaves
/// of `sub` and returns one storage per output of the plan, on the device
/// (an output that is a data leaf is that leaf's storage).
///
/// Returns once the work is queued; reading a result waits for it.
///
/// # Errors
/// [`Error::CudaUnavailable`] for a device that cannot be used;
/// [`Error::PtxLoad`] with the JIT's log for a kernel the driver rejects;
/// [`Error::OutOfMemory`] when the buffers do not fit even after every
/// cached block was freed; other device failures.
///
/// The kernels are compiled under [`Config::current`].
pub fn run_plan(plan: &Plan, sub: &Subgraph, ordinal: usize) -> Result<Vec<Arc<Storage>>> {
    let compiler = CudaCompiler::open(ordinal)?;
    run(
        &Arc::new(plan.clone()),
        &data_leaves(sub),
        &full_values(sub),
        &compiler,
        &Config::current(),
        &mut RealizeStats::default(),
        Instant::now(),
    )
    .map(|(out, _)| out)
}

/// [`run_plan`] on an open device, its kernels compiled under `config`
/// (its codegen and JIT settings), adding what it did to `stats`, its
/// phases timed from `since`; also returns when the launches were queued.
/// Out of memory once, it frees the allocator's cached blocks and tries
/// again; the device copies of live storages stay (see the module
/// documentation).
fn run(
    plan: &Arc<Plan>,
    leaves: &[Arc<Storage>],
    scalars: &[Scalar],
    compiler: &Arc<CudaCompiler>,
    config: &Config,
    stats: &mut RealizeStats,
    since: Instant,
) -> Result<(Vec<Arc<Storage>>, Instant)> {
    match run_once(plan, leaves, scalars, compiler, config, stats, since) {
        Err(Error::OutOfMemory { .. }) => {
            compiler.device().free_cached()?;
            run_once(plan, leaves, scalars, compiler, config, stats, Instant::now())
        }
        other => other,
    }
}

/// Up to this many inputs, buffers or outputs, a run keeps its lists on
/// the stack.
const INLINE: usize = 8;

fn run_once(
    plan: &Arc<Plan>,
    leaves: &[Arc<Storage>],
    scalars: &[Scalar],
    compiler: &Arc<CudaCompiler>,
    config: &Config,
    stats: &mut RealizeStats,
    since: Instant,
) -> Result<(Vec<Arc<Storage>>, Instant)> {
    let device = compiler.device();
    // Each phase ends at one reading of the clock, where the next begins
    // (compile and inputs may run together; see `prepare_and_upload`).
    let (prepared, inputs, uploaded) = prepare_and_upload(compiler, plan, leaves, config, stats, since)?;
    let Prepared {
        compiled,
        schedule,
        first_stream,
        counters,
        launch_streams,
        ..
    } = &*prepared;

    let mut temps: SmallVec<[Option<DeviceBuffer>; INLINE]> = SmallVec::with_capacity(plan.buffers.len());
    for (decl, stream) in plan.buffers.iter().zip(first_stream) {
        if decl.kind == BufferKind::Counters {
            // Kept by the prepared plan, zero between runs.
            temps.push(None);
            continue;
        }
        let len = usize::try_from(decl.len).map_err(|_| Error::OutOfMemory {
            bytes: usize::MAX,
            in_use: device.memory_stats().bytes_in_use,
        })?;
        let buffer = device.alloc_on(decl.dtype, len, device.stream(stream.unwrap_or(0)))?;
        if stream.is_none() {
            // No kernel uses it: the host path's buffers start at zero.
            buffer.zero_on(device.stream(0))?;
        }
        temps.push(Some(buffer));
    }

    let launching = Instant::now();
    stats.alloc_time += launching - uploaded;
    wait_for_inputs(device, &inputs, *launch_streams)?;
    Scheduler::new(STREAM_COUNT).run(device, schedule, |i, stream| {
        let kernel = &plan.kernels[i];
        let args = kernel
            .args
            .iter()
            .map(|arg| match *arg {
                BufferRef::Input(k) => inputs
                    .get(k)
                    .and_then(Input::buffer)
                    .ok_or_else(|| bad_plan(&kernel.program.name, "an input position past the data leaves")),
                BufferRef::Temp(t) => temps
                    .get(t)
                    .and_then(Option::as_ref)
                    .or_else(|| counters.get(t).and_then(Option::as_ref))
                    .ok_or_else(|| bad_plan(&kernel.program.name, "a buffer position past the plan's buffers")),
            })
            .collect::<Result<SmallVec<[&DeviceBuffer; 8]>>>()?;
        let values = kernel_scalars(kernel, scalars)?;
        timing::timed(device, stream, &kernel.program.name, || {
            compiled[i].launch_with_scalars(&args, &values, stream)
        })
    })?;
    stats.kernels_launched += plan.kernels.len();
    let launched = Instant::now();
    stats.launch_time += launched - launching;
    // A gather that met an index outside its axis set its flag: the run
    // waits for the flags (the only plans that wait before returning) and
    // reports the first one set.
    for (t, check) in plan.index_checks() {
        let flag = temps.get(t).and_then(Option::as_ref);
        let flag = flag.ok_or_else(|| bad_plan("index checks", "a flag buffer is missing"))?;
        if flag.to_host()?.as_slice::<u32>().iter().any(|&f| f != 0) {
            return Err(check.error());
        }
    }

    // An output listed twice is one storage.
    let mut shared: SmallVec<[(usize, Arc<Storage>); INLINE]> = SmallVec::new();
    let outputs = plan
        .outputs
        .iter()
        .map(|out| match *out {
            BufferRef::Input(k) => leaves
                .get(k)
                .map(|s| (*s).clone())
                .ok_or_else(|| bad_plan("plan outputs", "an input position past the data leaves")),
            BufferRef::Temp(t) => {
                if let Some((_, s)) = shared.iter().find(|(u, _)| *u == t) {
                    return Ok(s.clone());
                }
                let buffer = temps
                    .get_mut(t)
                    .and_then(Option::take)
                    .ok_or_else(|| bad_plan("plan outputs", "an output buffer is missing"))?;
                let s = Arc::new(Storage::Device(DeviceStorage::new(buffer)));
                shared.push((t, s.clone()));
                Ok(s)
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((outputs, launched))
}

/// The prepared run of `plan` and the device copies of its data leaves,
/// with the compile and inputs phases added to `stats` (timed from
/// `since`); also returns when both were done.
///
/// A plan with a kernel still to compile on the device and with host data
/// to upload compiles on a helper thread while this one uploads: the
/// driver's JIT and the copies of a first call overlap instead of adding
/// up. `compile_time` is then the compile's own time and `upload_time` the
/// rest of the wait (the part of the uploads that outlasted the compile),
/// so the two still add up to the time they took together. A compile that
/// fails stops the uploads at the next input.
fn prepare_and_upload(
    compiler: &Arc<CudaCompiler>,
    plan: &Arc<Plan>,
    leaves: &[Arc<Storage>],
    config: &Config,
    stats: &mut RealizeStats,
    since: Instant,
) -> Result<(Arc<Prepared>, SmallVec<[Input; INLINE]>, Instant)> {
    let device = compiler.device();
    let compile_failed = AtomicBool::new(false);
    let upload_all = |stats: &mut RealizeStats| {
        let mut inputs = SmallVec::<[Input; INLINE]>::new();
        for s in leaves {
            if compile_failed.load(Ordering::Relaxed) {
                break;
            }
            inputs.push(Input::on(device, s, stats)?);
        }
        Ok::<_, Error>(inputs)
    };
    let cached = cached_prepared(device, plan, leaves.len(), config);
    let overlap = cached.is_none()
        && plan.kernels.iter().any(|k| !compiler.is_compiled(&k.program, config))
        && leaves.iter().any(|s| needs_upload(device, s));
    if overlap {
        let overlapped = std::thread::scope(|scope| {
            let compile = || {
                let started = Instant::now();
                let prepared = make_prepared(compiler, plan, leaves.len(), config);
                compile_failed.store(prepared.is_err(), Ordering::Relaxed);
                (prepared, started.elapsed())
            };
            // A helper that cannot start leaves the compile to this thread.
            let helper = std::thread::Builder::new().spawn_scoped(scope, compile).ok()?;
            let inputs = upload_all(stats);
            let compiled = helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            Some((compiled, inputs))
        });
        if let Some(((prepared, compile_time), inputs)) = overlapped {
            let uploaded = Instant::now();
            stats.compile_time += compile_time;
            stats.upload_time += (uploaded - since).saturating_sub(compile_time);
            return Ok((prepared?, inputs?, uploaded));
        }
    }
    // One after the other.
    let prepared = match cached {
        Some(prepared) => prepared,
        None => make_prepared(compiler, plan, leaves.len(), config)?,
    };
    let compiled_at = Instant::now();
    stats.compile_time += compiled_at - since;
    let inputs = upload_all(stats)?;
    let uploaded = Instant::now();
    stats.upload_time += uploaded - compiled_at;
    Ok((prepared, inputs, uploaded))
}

/// What a run of one plan on one device needs beyond its data: the
/// compiled kernels, the stream schedule, the stream on which each
/// buffer is first used, and the plan's ticket counters. It depends only on
/// the plan, so it is computed once per (device, plan) and kept while the
/// plan lives.
///
/// **Invariant:** the counters of a [`BufferKind::Counters`] buffer are
/// zeroed once, here, on the stream of the kernel that uses them, and every
/// run launches that kernel on that same stream (the schedule is computed
/// once per prepared plan). So two launches that share a counter never
/// overlap, and each finds the counter back at zero, where the previous
/// launch's last ticket left it (`atom.inc` wraps).
struct Prepared {
    /// The plan it was made for; a dead plan's entry is replaced.
    plan: Weak<Plan>,
    /// The settings its kernels were compiled under.
    codegen: CodegenConfig,
    jit: JitConfig,
    compiled: Vec<Arc<CompiledProgram>>,
    schedule: LaunchPlan,
    first_stream: Vec<Option<usize>>,
    /// For each buffer of the plan: its device memory when it holds
    /// counters, kept for every run; `None` for the buffers of one run.
    counters: Vec<Option<DeviceBuffer>>,
    /// The streams the schedule launches on, one bit each.
    launch_streams: u32,
}

/// The prepared runs of live plans, by (device, plan address, data leaves,
/// a hash of the compile settings); an entry is used only when its settings
/// are equal to the run's.
type PreparedTable = HashMap<(usize, usize, usize, u64), Arc<Prepared>, foldhash::fast::FixedState>;

/// The prepared runs of live plans (see [`PreparedTable`]).
fn prepared_table() -> std::sync::MutexGuard<'static, PreparedTable> {
    static TABLE: OnceLock<Mutex<PreparedTable>> = OnceLock::new();
    TABLE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The key of the prepared run of `plan` on `device` with `inputs` data
/// leaves under `config`.
fn prepared_key(device: &CudaDevice, plan: &Arc<Plan>, inputs: usize, config: &Config) -> (usize, usize, usize, u64) {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    config.codegen.hash(&mut h);
    config.jit.hash(&mut h);
    (device.ordinal(), Arc::as_ptr(plan) as usize, inputs, h.finish())
}

/// The prepared run of `plan` on `device` with `inputs` data leaves under
/// `config`, when this plan (the same allocation, still alive) ran there
/// before under the same compile settings.
fn cached_prepared(device: &CudaDevice, plan: &Arc<Plan>, inputs: usize, config: &Config) -> Option<Arc<Prepared>> {
    prepared_table()
        .get(&prepared_key(device, plan, inputs, config))
        .filter(|p| {
            p.plan.upgrade().is_some_and(|live| Arc::ptr_eq(&live, plan))
                && p.codegen == config.codegen
                && p.jit == config.jit
        })
        .cloned()
}

/// Compiles and schedules the run of `plan` on `device` with `inputs` data
/// leaves, and keeps it for [`cached_prepared`] if someone else (the plan
/// cache) holds the plan too.
fn make_prepared(compiler: &CudaCompiler, plan: &Arc<Plan>, inputs: usize, config: &Config) -> Result<Arc<Prepared>> {
    let device = compiler.device();
    let key = prepared_key(device, plan, inputs, config);
    let programs: Vec<&crate::kernels::ir::Program> = plan.kernels.iter().map(|k| &*k.program).collect();
    let compiled = compiler.compile_all_with(&programs, config)?;
    let schedule = Scheduler::new(STREAM_COUNT).plan(&scheduled_launches(plan, inputs))?;
    let mut first_stream: Vec<Option<usize>> = vec![None; plan.buffers.len()];
    for (kernel, step) in plan.kernels.iter().zip(&schedule.launches) {
        for arg in &kernel.args {
            if let BufferRef::Temp(t) = *arg {
                first_stream[t].get_or_insert(step.stream);
            }
        }
    }
    let counters = plan_counters(device, plan, &schedule, &first_stream)?;
    let launch_streams = schedule.launches.iter().fold(0, |mask, l| mask | 1 << l.stream);
    let prepared = Arc::new(Prepared {
        plan: Arc::downgrade(plan),
        codegen: config.codegen.clone(),
        jit: config.jit,
        compiled,
        schedule,
        first_stream,
        counters,
        launch_streams,
    });
    if Arc::strong_count(plan) > 1 {
        let mut table = prepared_table();
        table.retain(|_, p| p.plan.strong_count() > 0);
        table.insert(key, prepared.clone());
    }
    Ok(prepared)
}

/// Measures the codegen candidates of every kernel of `plan` on device
/// `ordinal` against `config` ([`CudaCompiler::measure_choice`]), one
/// kernel at a time, and forgets the prepared runs of that device so that
/// later runs compile under what was chosen.
///
/// # Errors
/// Those of [`CudaCompiler::open`] and [`CudaCompiler::measure_choice`].
pub fn measure_choices(plan: &Plan, ordinal: usize, config: &Config) -> Result<Vec<MeasuredChoice>> {
    let compiler = CudaCompiler::open(ordinal)?;
    let mut out = Vec::with_capacity(plan.kernels.len());
    for kernel in &plan.kernels {
        out.push(compiler.measure_choice(&kernel.program, config)?);
    }
    prepared_table().retain(|&(device, ..), _| device != ordinal);
    Ok(out)
}

/// The counter buffers of `plan`, zeroed on the stream of the kernel that
/// uses each; see [`Prepared`] for why once is enough. Fails when a counter
/// would be used on two streams, where launches could overlap.
fn plan_counters(
    device: &Arc<CudaDevice>,
    plan: &Plan,
    schedule: &LaunchPlan,
    first_stream: &[Option<usize>],
) -> Result<Vec<Option<DeviceBuffer>>> {
    let mut counters = Vec::with_capacity(plan.buffers.len());
    for (t, decl) in plan.buffers.iter().enumerate() {
        let Some(stream) = first_stream[t].filter(|_| decl.kind == BufferKind::Counters) else {
            counters.push(None);
            continue;
        };
        let users = plan.kernels.iter().zip(&schedule.launches);
        let uses_it = |k: &crate::fusion::PlannedKernel| k.args.contains(&BufferRef::Temp(t));
        if let Some((k, _)) = users.filter(|(k, _)| uses_it(k)).find(|(_, l)| l.stream != stream) {
            return Err(bad_plan(
                &k.program.name,
                "ticket counters used by kernels on two streams, whose launches could overlap",
            ));
        }
        let len = usize::try_from(decl.len).map_err(|_| bad_plan("plan counters", "too many counters"))?;
        let buffer = device.alloc_on(decl.dtype, len, device.stream(stream))?;
        buffer.zero_on(device.stream(stream))?;
        counters.push(Some(buffer));
    }
    Ok(counters)
}

/// The buffers each kernel reads and writes, for the scheduler: input `k`
/// is buffer `k`, temp `t` is buffer `inputs + t`.
fn scheduled_launches(plan: &Plan, inputs: usize) -> Vec<ScheduledLaunch> {
    let id = |r: BufferRef| match r {
        BufferRef::Input(k) => BufferId(k as u64),
        BufferRef::Temp(t) => BufferId((inputs + t) as u64),
    };
    plan.kernels
        .iter()
        .map(|k| {
            let mut launch = ScheduledLaunch::default();
            for (param, &arg) in k.program.params.iter().zip(&k.args) {
                match param.access {
                    Access::Read => launch.reads.push(id(arg)),
                    Access::Write => launch.writes.push(id(arg)),
                    Access::ReadWrite => {
                        launch.reads.push(id(arg));
                        launch.writes.push(id(arg));
                    }
                }
            }
            launch
        })
        .collect()
}

/// Makes every stream in `targets` (one bit per stream) wait for the work
/// queued so far on the streams that used the inputs (their uploads, or the
/// kernels of earlier runs that computed them).
fn wait_for_inputs(device: &CudaDevice, inputs: &[Input], targets: u32) -> Result<()> {
    let used: u32 = inputs
        .iter()
        .filter_map(Input::buffer)
        .fold(0, |mask, b| mask | b.used_mask());
    if used == 0 || targets == 0 {
        return Ok(());
    }
    device.bind()?;
    let mut events = Vec::new();
    let outcome = (|| {
        for from in (0..STREAM_COUNT).filter(|s| used & (1 << s) != 0 && targets & !(1 << s) != 0) {
            let event = device.events.take()?;
            let recorded = device.stream(from).record_raw(event.0);
            events.push(event);
            recorded?;
            for to in (0..STREAM_COUNT).filter(|&s| s != from && targets & (1 << s) != 0) {
                device.stream(to).wait_raw(events[events.len() - 1].0)?;
            }
        }
        Ok(())
    })();
    // Waits already queued keep the record they saw, so the events can be
    // reused at once.
    for event in events {
        device.events.give(event);
    }
    outcome
}

/// A data leaf as a device buffer of the run's device.
enum Input {
    /// Data that already lives on the device.
    Resident(Arc<Storage>),
    /// The device copy of host data (or of another device's data).
    Uploaded(Arc<dyn DeviceData>),
}

impl Input {
    fn on(device: &Arc<CudaDevice>, storage: &Arc<Storage>, stats: &mut RealizeStats) -> Result<Input> {
        if is_resident(device, storage) {
            return Ok(Input::Resident(storage.clone()));
        }
        upload(device, storage, stats).map(Input::Uploaded)
    }

    /// The device buffer; `Input::on` makes `Resident` only of storage
    /// holding a buffer of the device, and `Uploaded` only of an
    /// [`Upload`], so this is `None` for no input it made.
    fn buffer(&self) -> Option<&DeviceBuffer> {
        match self {
            Input::Uploaded(copy) => cuda_buffer(&**copy),
            Input::Resident(s) => s.device_data().and_then(cuda_buffer),
        }
    }
}

/// The CUDA buffer behind `data`, when it is one of this back end's: the
/// memory of a run's result (a [`DeviceBuffer`]) or an [`Upload`].
fn cuda_buffer(data: &dyn DeviceData) -> Option<&DeviceBuffer> {
    let any = data.as_any();
    any.downcast_ref::<DeviceBuffer>()
        .or_else(|| any.downcast_ref::<Upload>().map(|up| &up.0))
}

/// The device copy of host data, kept by the host buffer it copies (see
/// the module documentation) and counted in [`upload_count`] while it
/// lives.
#[derive(Debug)]
struct Upload(DeviceBuffer);

/// The number of live [`Upload`]s, by device ordinal.
static LIVE_UPLOADS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

impl Upload {
    /// `buffer`, a copy of host data, counted.
    fn new(buffer: DeviceBuffer) -> Upload {
        let ordinal = buffer.device().ordinal();
        let mut live = LIVE_UPLOADS.lock().unwrap_or_else(PoisonError::into_inner);
        if live.len() <= ordinal {
            live.resize(ordinal + 1, 0);
        }
        live[ordinal] += 1;
        Upload(buffer)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let ordinal = self.0.device().ordinal();
        let mut live = LIVE_UPLOADS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = live.get_mut(ordinal) {
            *n = n.saturating_sub(1);
        }
    }
}

impl DeviceData for Upload {
    fn dtype(&self) -> DType {
        self.0.dtype()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn device(&self) -> Device {
        Device::Cuda(self.0.device().ordinal())
    }

    fn download(&self) -> Result<HostBuffer> {
        self.0.to_host()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The number of live device copies of host data on CUDA device `ordinal`:
/// those that storages keep (each goes when its storage drops), and any
/// that a run in progress still holds.
pub fn upload_count(ordinal: usize) -> usize {
    LIVE_UPLOADS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(ordinal)
        .copied()
        .unwrap_or(0)
}

/// Whether `storage` is data on `device` itself.
fn is_resident(device: &CudaDevice, storage: &Storage) -> bool {
    storage
        .device_data()
        .and_then(cuda_buffer)
        .is_some_and(|b| b.device().ordinal() == device.ordinal())
}

/// The copy of `storage` on `device` that the storage keeps, if any.
fn kept_copy(device: &CudaDevice, storage: &Storage) -> Option<Arc<dyn DeviceData>> {
    storage
        .device_copy(Device::Cuda(device.ordinal()))
        .filter(|copy| cuda_buffer(&**copy).is_some())
}

/// Whether [`Input::on`] would copy `storage` to `device` now.
fn needs_upload(device: &CudaDevice, storage: &Storage) -> bool {
    !is_resident(device, storage) && kept_copy(device, storage).is_none()
}

/// The device copy of `storage`: the one the storage keeps, or uploaded
/// now and kept by it.
fn upload(device: &Arc<CudaDevice>, storage: &Storage, stats: &mut RealizeStats) -> Result<Arc<dyn DeviceData>> {
    if let Some(copy) = kept_copy(device, storage) {
        return Ok(copy);
    }
    // Nothing is locked while copying: another thread may upload the same
    // storage meanwhile, and the first copy stored wins.
    let host = storage.host()?;
    let buffer = device.from_host_on(host, device.stream(0))?;
    stats.uploads += 1;
    stats.upload_bytes += host.bytes().len();
    Ok(host.keep_device_copy(Arc::new(Upload::new(buffer))))
}

/// Makes the device copies of `storages` (uploading those that keep none
/// yet), so later runs find them.
fn upload_all(device: &Arc<CudaDevice>, storages: &[Arc<Storage>], stats: &mut RealizeStats) -> Result<()> {
    let started = Instant::now();
    for s in storages {
        upload(device, s, stats)?;
    }
    stats.upload_time += started.elapsed();
    Ok(())
}

fn bad_plan(program: &str, reason: &str) -> Error {
    Error::KernelArguments {
        program: program.to_string(),
        reason: reason.to_string(),
    }
}
