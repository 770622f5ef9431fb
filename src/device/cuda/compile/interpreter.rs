//! The PTX interpreter on a device (see [`crate::kernels::ptx_vm`]): loaded
//! once per device on a background thread when its compiler opens, then used
//! for the first launches of every new program it can run, while the
//! program's own module compiles.
//!
//! It is loaded unless the process default config turns it off
//! ([`JitConfig::interpreter`](crate::config::JitConfig::interpreter));
//! a compile under a config that turns it off does not use it. Without it,
//! new programs wait for their quick module.

use super::CudaCompiler;
use crate::device::cuda::background;
use crate::device::cuda::context::panic_message;
use crate::device::cuda::LoadedFunction;
use crate::error::{Error, Result};
use crate::kernels::ptx_vm;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where a device's interpreter stands.
#[derive(Default)]
pub(crate) struct InterpreterSlot {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    phase: Phase,
    /// The module of the core forms, once loaded (and when the full one is
    /// not loaded at once instead).
    core: Option<(LoadedFunction, Duration)>,
    /// The module of all forms, once loaded.
    full: Option<(LoadedFunction, Duration)>,
    /// Why the module of all forms did not load, when the core one did.
    full_error: Option<Error>,
}

#[derive(Default)]
enum Phase {
    /// Not started (or turned off).
    #[default]
    Idle,
    Loading,
    Done,
    Failed(Error),
}

/// How long the interpreter's two modules took to load, from the start of
/// the load when the compiler opened (see [`CudaCompiler::wait_interpreter`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InterpreterLoad {
    /// The core module: every form of the suite's and the fuzzer's kernels.
    pub core: Duration,
    /// The module of all forms; `None` when it failed to load
    /// ([`full_error`](Self::full_error)).
    pub full: Option<Duration>,
    /// Why the module of all forms failed to load after the core one did:
    /// programs within the core forms still run on the core module.
    pub full_error: Option<Error>,
}

/// Whether the interpreter is loaded when a compiler opens: unless the
/// process default config turns it off.
pub(crate) fn enabled() -> bool {
    crate::Config::process_default().jit.interpreter
}

impl CudaCompiler {
    /// Starts loading the interpreter on a background thread, once: first
    /// a module of its core forms, then one of all; returns whether a load
    /// was started (false when it is off, already started, or the thread
    /// did not start).
    pub(crate) fn start_interpreter(self: &Arc<Self>) -> bool {
        if !enabled() {
            return false;
        }
        {
            let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
            if !matches!(state.phase, Phase::Idle) {
                return false;
            }
            state.phase = Phase::Loading;
        }
        let device = self.clone();
        let spawned = background::spawn(format!("tilefuse-interpreter-cuda{}", self.ordinal()), move || {
            let started = Instant::now();
            let all = ptx_vm::forms().len();
            let core = ptx_vm::core_forms();
            let stages: &[usize] = if core < all { &[core, all] } else { &[all] };
            let last = stages[stages.len() - 1];
            for &forms in stages {
                let outcome = if background::exiting() {
                    Err(Error::Driver {
                        call: "ptx interpreter",
                        message: "the process began to exit before the interpreter loaded".into(),
                    })
                } else {
                    // A panic must not leave the slot loading: `wait_interpreter`
                    // would wait for ever.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| device.load_interpreter(forms)))
                        .unwrap_or_else(|panic| {
                            Err(Error::Driver {
                                call: "ptx interpreter",
                                message: format!("loading the interpreter panicked: {}", panic_message(panic.as_ref())),
                            })
                        })
                        .map(|k| (k, started.elapsed()))
                };
                let failed = outcome.is_err();
                device.interpreter_loaded(forms == all, forms == last, outcome);
                if failed {
                    return;
                }
            }
        });
        if let Err(e) = spawned {
            self.interpreter_loaded(
                true,
                true,
                Err(Error::Driver {
                    call: "std::thread::spawn",
                    message: format!("the thread loading the PTX interpreter did not start: {e}"),
                }),
            );
            return false;
        }
        true
    }

    fn load_interpreter(&self, forms: usize) -> Result<LoadedFunction> {
        self.device.bind()?;
        let text = ptx_vm::interpreter(&self.target(), forms)?;
        let name = if forms < ptx_vm::forms().len() {
            "ptx interpreter (core)"
        } else {
            "ptx interpreter"
        };
        let kernel = self.device.load(&text, ptx_vm::ENTRY, name)?;
        // Once for all launches: each needs what its program's code asks.
        let max = u32::try_from(self.device.info().max_shared_memory_per_block).unwrap_or(u32::MAX);
        kernel.allow_shared(max)?;
        Ok(kernel)
    }

    fn interpreter_loaded(&self, full: bool, last: bool, outcome: Result<(LoadedFunction, Duration)>) {
        let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(loaded) => {
                if full {
                    state.full = Some(loaded);
                } else {
                    state.core = Some(loaded);
                }
                if last {
                    state.phase = Phase::Done;
                }
            }
            // The core module keeps running what it can.
            Err(e) if state.core.is_some() => {
                state.full_error = Some(e);
                state.phase = Phase::Done;
            }
            Err(e) => state.phase = Phase::Failed(e),
        }
        self.interpreter.changed.notify_all();
    }

    /// The interpreter kernel that runs code using forms up to `max_form`,
    /// when one is loaded (never waits): the full module, or before it the
    /// core one for code within the core forms.
    pub(crate) fn interpreter_for(&self, max_form: u32) -> Option<LoadedFunction> {
        let state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
        match (&state.full, &state.core) {
            (Some((full, _)), _) => Some(full.clone()),
            (None, Some((core, _))) if (max_form as usize) < ptx_vm::core_forms() => Some(core.clone()),
            _ => None,
        }
    }

    /// Waits for the PTX interpreter (see [`crate::kernels::ptx_vm`]) to
    /// load on this device, which it starts doing in the background when
    /// the compiler opens: a module of its core forms first, then one of all
    /// forms. Returns how long after the start of the load each was ready.
    /// New programs compiled once a module is loaded run their first
    /// launches on it when it can run them, instead of waiting for the
    /// driver's JIT.
    ///
    /// Returns [`Error::CudaUnavailable`] when it is turned off (by the
    /// process default config, [`JitConfig::interpreter`](crate::config::JitConfig::interpreter)), and the load's error when no module
    /// loaded (new programs then wait for the JIT, as without it); when only
    /// the core one did, `Ok` with [`InterpreterLoad::full_error`].
    pub fn wait_interpreter(&self) -> Result<InterpreterLoad> {
        let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &state.phase {
                Phase::Done => {
                    let time = |m: &Option<(LoadedFunction, Duration)>| m.as_ref().map(|(_, t)| *t);
                    let (core, full) = (time(&state.core), time(&state.full));
                    return Ok(InterpreterLoad {
                        core: core.or(full).unwrap_or_default(),
                        full,
                        full_error: state.full_error.clone(),
                    });
                }
                Phase::Failed(e) => return Err(e.clone()),
                Phase::Idle => {
                    return Err(Error::CudaUnavailable {
                        reason: "the PTX interpreter is off (the process default config's jit.interpreter)".into(),
                    })
                }
                Phase::Loading => {
                    state = self
                        .interpreter
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner)
                }
            }
        }
    }
}
