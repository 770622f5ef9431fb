//! Threads that call the driver in the background (the JIT warm-up and the
//! tuner that loads tuned modules), and process exit.
//!
//! At exit the CUDA driver tears itself down; a thread still inside
//! `cuModuleLoadDataEx` at that moment can crash the process after `main`
//! has returned. So every background thread is started through [`spawn`]
//! and counted, and the first one registers an exit handler that tells the
//! tuners to take no more work ([`exiting`]) and waits, up to
//! [`EXIT_WAIT`], for the loads already running to end. Exit handlers run
//! in the reverse order of their registration; the handler is registered
//! after the driver was initialized and after its compiler library was
//! loaded, so it runs before their teardown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

/// The longest the exit handler waits for running background loads.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Set when the process has started to exit.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Background threads still running.
static RUNNING: Mutex<usize> = Mutex::new(0);
static FINISHED: Condvar = Condvar::new();

/// Whether the process is exiting: a background thread should start no new
/// driver work.
pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::Acquire)
}

/// One running background thread; dropping it (also by unwinding) counts
/// the thread as finished.
struct Running;

impl Running {
    fn start() -> Running {
        *RUNNING.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        *running -= 1;
        if *running == 0 {
            FINISHED.notify_all();
        }
    }
}

/// Starts `f` on a new named thread, counted until it returns, and makes
/// sure the exit handler is registered.
pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    register_exit_handler();
    let running = Running::start();
    std::thread::Builder::new().name(name).spawn(move || {
        let _running = running;
        f()
    })?;
    Ok(())
}

extern "C" {
    /// The C library's `atexit`.
    fn atexit(handler: extern "C" fn()) -> std::os::raw::c_int;
}

/// The driver's PTX compiler, a library the driver loads at its first JIT.
#[cfg(unix)]
const JIT_LIBRARY: &str = "libnvidia-ptxjitcompiler.so.1";
#[cfg(windows)]
const JIT_LIBRARY: &str = "nvptxjitcompiler64.dll";

fn register_exit_handler() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // The compiler library registers its own teardown when it is
        // loaded; loading it here first puts that teardown before ours in
        // the registration order, so ours runs first. It stays loaded (the
        // driver loads it anyway); if it cannot be loaded here, the driver's
        // JIT cannot load it either.
        // SAFETY: loading the driver's own compiler library runs only its
        // initialisers, as the driver's first JIT would.
        if let Ok(library) = unsafe { libloading::Library::new(JIT_LIBRARY) } {
            std::mem::forget(library);
        }
        // SAFETY: `at_exit` is a function valid for the whole life of the
        // process that never unwinds (nothing in it panics; poisoned locks
        // are taken over). Should registering fail, exit only loses the
        // wait.
        unsafe {
            atexit(at_exit);
        }
    });
}

/// The exit handler: no new background work, then wait for what runs.
extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Release);
    let deadline = Instant::now() + EXIT_WAIT;
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        running = FINISHED
            .wait_timeout(running, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}
