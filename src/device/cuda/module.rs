//! Loading PTX into the driver, with the JIT's error log, cached per PTX text
//! and entry.

use super::{describe, driver_error, CudaDevice};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys, CudaContext};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Bytes kept of the JIT's error and info logs.
const LOG_BYTES: usize = 16 * 1024;

/// A loaded module; unloaded when the last kernel of it is dropped.
struct Module {
    raw: sys::CUmodule,
    ptx: String,
    /// The JIT optimization level it was loaded at (`None`: the driver's
    /// default).
    level: Option<u32>,
    load_time: Duration,
    /// The dynamic shared memory its entry may use, once raised past the
    /// default (our modules have one entry). Only ever raised, under
    /// `shared_raise`, so a launch that found it high enough stays valid
    /// while another thread raises it.
    shared_limit: std::sync::atomic::AtomicU32,
    shared_raise: std::sync::Mutex<()>,
    ctx: Arc<CudaContext>,
}

// SAFETY: a module handle is usable from any thread with its context current,
// and `Drop` binds it.
unsafe impl Send for Module {}
// SAFETY: as for `Send`; the module is never mutated after loading.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module was loaded by `load_module` and no function of
            // it is used after the last `LoadedFunction` holding it is gone.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

/// A kernel entry of a loaded PTX module, ready for [`launch`](super::launch).
/// Cheap to clone.
#[derive(Clone)]
pub struct LoadedFunction {
    function: sys::CUfunction,
    module: Arc<Module>,
    name: String,
    entry: String,
    ordinal: usize,
}

// SAFETY: a function handle is usable from any thread with its context
// current; `launch` binds it.
unsafe impl Send for LoadedFunction {}
// SAFETY: as for `Send`; the handle is never mutated.
unsafe impl Sync for LoadedFunction {}

impl std::fmt::Debug for LoadedFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LoadedFunction({} `{}` on cuda:{})",
            self.name, self.entry, self.ordinal
        )
    }
}

impl LoadedFunction {
    /// The program name given at load, used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The PTX entry name.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// The ordinal of the device the kernel was loaded on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// How long the driver took to load (JIT) the module holding this kernel,
    /// when it was first loaded.
    pub fn load_time(&self) -> Duration {
        self.module.load_time
    }

    /// The PTX text the kernel was loaded from.
    pub fn ptx(&self) -> &str {
        &self.module.ptx
    }

    /// The JIT optimization level the module was loaded at; `None` for the
    /// driver's default (the highest, 4).
    pub fn jit_level(&self) -> Option<u32> {
        self.module.level
    }

    /// The raw driver handle, for calls this module does not wrap.
    pub fn raw(&self) -> sys::CUfunction {
        self.function
    }

    /// Lets launches of this kernel use `bytes` of dynamic shared memory
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`). The limit only
    /// grows, so threads launching with different sizes at once never see
    /// it lowered under them.
    pub(crate) fn allow_shared(&self, bytes: u32) -> Result<()> {
        use std::sync::atomic::Ordering;
        let module = &self.module;
        if module.shared_limit.load(Ordering::Acquire) >= bytes {
            return Ok(());
        }
        let _raising = module.shared_raise.lock().unwrap_or_else(PoisonError::into_inner);
        if module.shared_limit.load(Ordering::Acquire) >= bytes {
            return Ok(());
        }
        // SAFETY: the function handle is alive as long as `self`.
        unsafe {
            result::function::set_function_attribute(
                self.function,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(super::driver_error("cuFuncSetAttribute"))?;
        module.shared_limit.store(bytes, Ordering::Release);
        Ok(())
    }
}

/// Counters of one device's module cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Modules loaded through the JIT.
    pub loads: u64,
    /// Requests answered from the cache.
    pub hits: u64,
    /// Time spent in the JIT, all loads together.
    pub total_load_time: Duration,
    /// Time the most recent JIT load took.
    pub last_load_time: Option<Duration>,
}

#[derive(Default)]
struct CacheState {
    modules: HashMap<u64, Vec<Arc<Module>>>,
    kernels: HashMap<(u64, String), Vec<LoadedFunction>>,
    stats: ModuleStats,
}

/// Loaded modules and kernels of one device.
#[derive(Default)]
pub(crate) struct ModuleCache {
    state: Mutex<CacheState>,
}

fn hash_text(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl CudaDevice {
    /// Starts the driver's PTX compiler up in the background (once per
    /// process), unless something else does: see [`warm_up_jit`].
    pub(crate) fn warm_up_jit(&self) {
        warm_up_jit(self.context().clone());
    }

    /// The kernel `entry` of the PTX module `ptx`, loaded on first use and
    /// cached per (PTX text, entry): the text already encodes the program and
    /// its target. `name` names the program in errors.
    ///
    /// Different modules load concurrently: the JIT runs without the
    /// cache's lock, and the driver's linker compiles on several threads at
    /// once without holding up launches (see `load_module`). Two threads
    /// loading the same new text at once may both run the JIT, and one
    /// module is kept.
    ///
    /// A module the JIT rejects, or one without `entry`, returns
    /// [`Error::PtxLoad`] with the JIT's own log.
    ///
    /// The JIT runs at the driver's default optimization level.
    pub fn load(&self, ptx: &str, entry: &str, name: &str) -> Result<LoadedFunction> {
        self.load_at(ptx, entry, name, None)
    }

    /// [`load`](Self::load) at JIT optimization level `level` (0 to 4;
    /// `None`: the driver's default). Modules are cached per (text, level).
    pub fn load_at(&self, ptx: &str, entry: &str, name: &str, level: Option<u32>) -> Result<LoadedFunction> {
        if let Some(l) = level.filter(|&l| l > 4) {
            return Err(Error::PtxLoad {
                program: name.to_string(),
                log: format!("JIT optimization level {l} is not one of 0 to 4"),
            });
        }
        let hash = hash_text(ptx);
        let key = (hash, entry.to_string());
        let find_module = |state: &CacheState| {
            state
                .modules
                .get(&hash)
                .and_then(|ms| ms.iter().find(|m| m.ptx == ptx && m.level == level))
                .cloned()
        };
        let cached = {
            let mut state = self.modules.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(kernel) = state
                .kernels
                .get(&key)
                .and_then(|ks| ks.iter().find(|k| k.module.ptx == ptx && k.module.level == level))
            {
                let kernel = kernel.clone();
                state.stats.hits += 1;
                return Ok(kernel);
            }
            find_module(&state)
        };
        self.bind()?;
        let module = match cached {
            Some(module) => module,
            None => {
                // The JIT runs without the lock, so different modules load at
                // once; callers that must not load one module twice (the
                // program cache) serialise themselves.
                let started = Instant::now();
                let raw = load_module(ptx, name, level)?;
                let load_time = started.elapsed();
                let loaded = Arc::new(Module {
                    raw,
                    ptx: ptx.to_string(),
                    level,
                    load_time,
                    shared_limit: Default::default(),
                    shared_raise: Default::default(),
                    ctx: self.context().clone(),
                });
                let mut state = self.modules.state.lock().unwrap_or_else(PoisonError::into_inner);
                match find_module(&state) {
                    // Another thread loaded the same text meanwhile: use its
                    // module and let this one unload.
                    Some(module) => module,
                    None => {
                        state.modules.entry(hash).or_default().push(loaded.clone());
                        state.stats.loads += 1;
                        state.stats.total_load_time += load_time;
                        state.stats.last_load_time = Some(load_time);
                        loaded
                    }
                }
            }
        };
        let function = get_function(&module, entry, name)?;
        let kernel = LoadedFunction {
            function,
            module,
            name: name.to_string(),
            entry: entry.to_string(),
            ordinal: self.ordinal(),
        };
        let mut state = self.modules.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.kernels.entry(key).or_default().push(kernel.clone());
        Ok(kernel)
    }

    /// The module cache's counters.
    pub fn module_stats(&self) -> ModuleStats {
        self.modules.state.lock().unwrap_or_else(PoisonError::into_inner).stats
    }
}

/// A one-instruction kernel whose only use is to start the driver's compiler.
const WARM_UP_PTX: &str = ".version 7.8\n.target sm_52\n.address_size 64\n.visible .entry tf_warm_up()\n{\n\tret;\n}\n";

/// Starts the driver's PTX compiler on a background thread by loading (and
/// unloading) a trivial module. The first JIT of a process pays the
/// compiler's start-up: a one-line module takes several times longer to
/// load the first time than again (see `benches/NOTES.md`, v6). Done while
/// the caller is still
/// uploading inputs or recording ops, it leaves the first pipeline only its
/// own compile. Best effort: any failure
/// just leaves the start-up to the first real load.
fn warm_up_jit(ctx: Arc<CudaContext>) {
    // The start-up is the process's, not a device's: once is enough.
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let spawned = super::background::spawn("tilefuse-jit-warm-up".into(), move || {
        if super::background::exiting() || ctx.bind_to_thread().is_err() {
            return;
        }
        if let Ok(module) = load_module(WARM_UP_PTX, "JIT warm-up", None) {
            // SAFETY: the module was just loaded on this thread's current
            // context and no function of it was ever taken.
            let _ = unsafe { result::module::unload(module) };
        }
    });
    drop(spawned);
}

/// Compiles PTX text to a cubin with the driver's linker (`cuLinkCreate`,
/// `cuLinkAddData`, `cuLinkComplete`) at JIT optimization level `level`
/// (`None`: the driver's default), asking for the JIT's logs, and loads the
/// cubin with `cuModuleLoadData`.
///
/// The linker rather than `cuModuleLoadDataEx` on the PTX: a module load
/// that JITs holds the driver's lock for its whole compile, so every
/// `cuLaunchKernel` of the process (a cached pipeline on another thread, or
/// the same program's quick module) waits for a background compile to
/// finish, and compiles on several threads run one after another. The
/// linker compiles outside that lock: launches go on meanwhile and compiles
/// on several threads run at once (see `benches/NOTES.md`, v12). Loading
/// the finished cubin costs little next to the compile. The linker uses the
/// driver's JIT cache too.
fn load_module(ptx: &str, name: &str, level: Option<u32>) -> Result<sys::CUmodule> {
    let image = CString::new(ptx).map_err(|_| Error::PtxLoad {
        program: name.to_string(),
        log: "the PTX text contains a NUL byte".into(),
    })?;
    let mut error_log = vec![0u8; LOG_BYTES];
    let mut info_log = vec![0u8; LOG_BYTES];
    use sys::CUjit_option as O;
    let mut options = [
        O::CU_JIT_ERROR_LOG_BUFFER,
        O::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        O::CU_JIT_INFO_LOG_BUFFER,
        O::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        O::CU_JIT_OPTIMIZATION_LEVEL,
    ];
    // Sizes and levels are passed in the pointer-sized value slots, as the
    // driver API specifies for integer options.
    let mut values = [
        error_log.as_mut_ptr() as *mut c_void,
        LOG_BYTES as *mut c_void,
        info_log.as_mut_ptr() as *mut c_void,
        LOG_BYTES as *mut c_void,
        level.unwrap_or(4) as usize as *mut c_void,
    ];
    let count = if level.is_some() { 5 } else { 4 };
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    // SAFETY: the option arrays have the same length, of which the first
    // `count` are passed; each log buffer holds the number of bytes given
    // for it, and it and `values` (where the driver writes the logs'
    // sizes) outlive the link state, which `LinkState` destroys first.
    let loaded =
        match unsafe { sys::cuLinkCreate_v2(count, options.as_mut_ptr(), values.as_mut_ptr(), &mut state) }.result() {
            Err(e) => Err(("cuLinkCreate", e)),
            Ok(()) => link_and_load(&LinkState(state), &image, name),
        };
    loaded.map_err(|(call, e)| {
        let log = [log_text(&error_log), log_text(&info_log)]
            .into_iter()
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        Error::PtxLoad {
            program: name.to_string(),
            log: format!("{call}: {}\n{log}", describe(e)),
        }
    })
}

/// A link state, destroyed when dropped (on every path, unwinding included);
/// a module loaded from its cubin has its own copy of the code.
struct LinkState(sys::CUlinkState);

impl Drop for LinkState {
    fn drop(&mut self) {
        // SAFETY: the state was created by `cuLinkCreate` and is destroyed
        // only here, once.
        let _ = unsafe { sys::cuLinkDestroy(self.0) };
    }
}

/// Adds `image` (NUL-terminated PTX) to the link `state`, completes it and
/// loads the cubin; on failure, the driver call that failed and its error.
fn link_and_load(
    state: &LinkState,
    image: &CString,
    name: &str,
) -> std::result::Result<sys::CUmodule, (&'static str, result::DriverError)> {
    let bytes = image.as_bytes_with_nul();
    let input_name = CString::new(format!("{}.ptx", name.replace('\0', ""))).unwrap_or_default();
    // SAFETY: `state` is a live link state; `bytes` is the PTX text with its
    // NUL, valid for the call; no per-input options are passed.
    unsafe {
        sys::cuLinkAddData_v2(
            state.0,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_ptr() as *mut c_void,
            bytes.len(),
            input_name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(|e| ("cuLinkAddData", e))?;
    let mut cubin: *mut c_void = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: `state` holds one PTX input; the cubin stays owned by `state`.
    unsafe { sys::cuLinkComplete(state.0, &mut cubin, &mut size) }
        .result()
        .map_err(|e| ("cuLinkComplete", e))?;
    let mut module = std::ptr::null_mut();
    // SAFETY: `cubin` is the image `cuLinkComplete` just produced, alive
    // until `state` is destroyed, after this call.
    unsafe { sys::cuModuleLoadData(&mut module, cubin as *const c_void) }
        .result()
        .map_err(|e| ("cuModuleLoadData", e))?;
    Ok(module)
}

/// The text of a log buffer, up to its first NUL.
fn log_text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

fn get_function(module: &Module, entry: &str, name: &str) -> Result<sys::CUfunction> {
    let c_entry = CString::new(entry).map_err(|_| Error::PtxLoad {
        program: name.to_string(),
        log: format!("entry name {entry:?} contains a NUL byte"),
    })?;
    // SAFETY: the module is loaded and alive as long as `module`.
    unsafe { result::module::get_function(module.raw, c_entry) }.map_err(|e| {
        if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            Error::PtxLoad {
                program: name.to_string(),
                log: format!("the module has no entry `{entry}`"),
            }
        } else {
            driver_error("cuModuleGetFunction")(e)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_stops_at_nul_and_trims() {
        let mut buffer = b"line 3: syntax error \n".to_vec();
        buffer.extend([0, b'x', b'y']);
        assert_eq!(log_text(&buffer), "line 3: syntax error");
        assert_eq!(log_text(&[0; 8]), "");
    }

    #[test]
    fn equal_texts_hash_equal() {
        assert_eq!(hash_text(".version 8.0"), hash_text(".version 8.0"));
        assert_ne!(hash_text(".version 8.0"), hash_text(".version 8.1"));
    }
}
