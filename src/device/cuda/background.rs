//! Threads that call the driver in the background (the JIT warm-up and the
//! tuners that load tuned modules), and process exit.
//!
//! At exit the CUDA driver tears itself down; a thread still inside the
//! driver's JIT at that moment can crash the process after `main`
//! has returned. So every background thread is started through [`spawn`]
//! and counted, and the first one registers an exit handler that tells the
//! tuners to take no more work ([`exiting`]) and waits, up to
//! [`EXIT_WAIT`], for the loads already running to end. Exit handlers run
//! in the reverse order of their registration; on Linux the handler is
//! registered after the driver was initialized and after its compiler
//! library was loaded, so it runs before the teardown those libraries
//! registered when they were loaded (without that order a process exiting
//! during a background JIT died with SIGSEGV; with it, it exits cleanly:
//! see `benches/NOTES.md`, v10).
//!
//! Not covered: teardown a library registers later (at its first use of a
//! static), a load still running after [`EXIT_WAIT`], a thread's own
//! thread-local destructors (they run after it is counted as finished), a
//! process that forks while a background thread runs (the child waits the
//! full [`EXIT_WAIT`] at exit), and `std::process::exit` on Windows (it
//! does not run the C library's exit handlers).

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

/// The driver's PTX compiler, a library the driver loads at its first JIT,
/// found by the dynamic loader's search as the driver finds it. Only on
/// Linux: elsewhere a library loaded by bare name may come from the working
/// directory.
#[cfg(target_os = "linux")]
fn load_jit_library() {
    // SAFETY: loading the driver's own compiler library runs only its
    // initialisers, as the driver's first JIT would.
    if let Ok(library) = unsafe { libloading::Library::new("libnvidia-ptxjitcompiler.so.1") } {
        // It stays loaded: the driver loads it anyway.
        std::mem::forget(library);
    }
}

#[cfg(not(target_os = "linux"))]
fn load_jit_library() {}

fn register_exit_handler() {
    static REGISTERED: Once = Once::new();
    REGISTERED.call_once(|| {
        // The compiler library registers its own teardown when it is
        // loaded; loading it here first puts that teardown before ours in
        // the registration order, so ours runs first. If it cannot be
        // loaded here, the driver's JIT cannot load it either.
        load_jit_library();
        // SAFETY: `at_exit` is a function valid for the whole life of the
        // process that never unwinds (nothing in it panics: poisoned locks
        // are taken over, the deadline is computed without overflow).
        // Should registering fail, exit only loses the wait.
        unsafe {
            atexit(at_exit);
        }
    });
}

/// The exit handler: no new background work, then wait for what runs.
extern "C" fn at_exit() {
    EXITING.store(true, Ordering::Release);
    wait_for_running(EXIT_WAIT);
}

/// Waits until no counted thread runs or `limit` has passed; returns
/// whether none runs.
fn wait_for_running(limit: Duration) -> bool {
    let now = Instant::now();
    let deadline = now.checked_add(limit).unwrap_or(now);
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        running = FINISHED
            .wait_timeout(running, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    // Other tests may run counted threads at the same time (a GPU test's
    // tuner), so these only check their own thread.

    #[test]
    fn the_wait_ends_once_the_counted_threads_have_returned() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        spawn("tilefuse-test-background".into(), move || {
            std::thread::sleep(Duration::from_millis(150));
            flag.store(true, Ordering::Release);
        })
        .unwrap();
        let started = Instant::now();
        assert!(wait_for_running(Duration::from_secs(30)));
        assert!(
            done.load(Ordering::Acquire),
            "the wait ended before the thread returned"
        );
        // Woken by the last thread's return, not by the limit.
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn the_wait_gives_up_at_its_limit() {
        let release = Arc::new(AtomicBool::new(false));
        let stop = release.clone();
        spawn("tilefuse-test-background-slow".into(), move || {
            let started = Instant::now();
            while !stop.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .unwrap();
        let started = Instant::now();
        assert!(!wait_for_running(Duration::from_millis(100)));
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_secs(10),
            "{waited:?}"
        );
        release.store(true, Ordering::Release);
        assert!(wait_for_running(Duration::from_secs(30)));
    }
}
