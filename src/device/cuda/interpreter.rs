//! The PTX interpreter on a device (see [`crate::kernels::ptx_vm`]): loaded
//! once per device on a background thread when the device opens, then used
//! for the first launches of every new program it can run, while the
//! program's own module compiles.
//!
//! `TILEFUSE_GPU_INTERPRETER=0` (or `off`) turns it off: new programs then
//! wait for their quick module, as without it.

use super::module::Kernel;
use super::CudaDevice;
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
enum State {
    /// Not started (or turned off).
    #[default]
    Idle,
    Loading,
    Ready(Kernel, Duration),
    Failed(Error),
}

/// Whether the interpreter is on: unless `TILEFUSE_GPU_INTERPRETER` is
/// `0`, `off`, `false` or `none`. Read once.
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("TILEFUSE_GPU_INTERPRETER").map_or(true, |v| {
            !matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "none")
        })
    })
}

impl CudaDevice {
    /// Starts loading the interpreter on a background thread, once; returns
    /// whether a load was started (false when it is off, already started,
    /// or the thread did not start).
    pub(crate) fn start_interpreter(self: &Arc<Self>) -> bool {
        if !enabled() {
            return false;
        }
        {
            let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
            if !matches!(*state, State::Idle) {
                return false;
            }
            *state = State::Loading;
        }
        let device = self.clone();
        let spawned = super::background::spawn(format!("tilefuse-interpreter-cuda{}", self.ordinal()), move || {
            let outcome = if super::background::exiting() {
                Err(Error::Driver {
                    call: "ptx interpreter",
                    message: "the process began to exit before the interpreter loaded".into(),
                })
            } else {
                device.load_interpreter()
            };
            device.interpreter_loaded(outcome);
        });
        if let Err(e) = spawned {
            self.interpreter_loaded(Err(Error::Driver {
                call: "std::thread::spawn",
                message: format!("the thread loading the PTX interpreter did not start: {e}"),
            }));
            return false;
        }
        true
    }

    fn load_interpreter(&self) -> Result<(Kernel, Duration)> {
        let started = Instant::now();
        self.bind()?;
        let text = ptx_vm::interpreter(&self.target())?;
        let kernel = self.load(&text, ptx_vm::ENTRY, "ptx interpreter")?;
        // Once for all launches: each needs what its program's code asks.
        let max = u32::try_from(self.info().max_shared_memory_per_block).unwrap_or(u32::MAX);
        kernel.allow_shared(max)?;
        Ok((kernel, started.elapsed()))
    }

    fn interpreter_loaded(&self, outcome: Result<(Kernel, Duration)>) {
        let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = match outcome {
            Ok((kernel, took)) => State::Ready(kernel, took),
            Err(e) => State::Failed(e),
        };
        self.interpreter.changed.notify_all();
    }

    /// The interpreter's kernel, when it is loaded (never waits).
    pub(crate) fn interpreter(&self) -> Option<Kernel> {
        match &*self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Ready(kernel, _) => Some(kernel.clone()),
            _ => None,
        }
    }

    /// Waits for the PTX interpreter (see [`crate::kernels::ptx_vm`]) to
    /// load on this device, which it starts doing in the background when
    /// the device opens; returns how long its load took. New programs
    /// compiled after this returns run their first launches on it when it
    /// can run them, instead of waiting for the driver's JIT.
    ///
    /// Returns [`Error::CudaUnavailable`] when it is turned off
    /// (`TILEFUSE_GPU_INTERPRETER=0`), and the load's error when it failed
    /// to load (new programs then wait for the JIT, as without it).
    pub fn wait_interpreter(&self) -> Result<Duration> {
        let mut state = self.interpreter.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &*state {
                State::Ready(_, took) => return Ok(*took),
                State::Failed(e) => return Err(e.clone()),
                State::Idle => {
                    return Err(Error::CudaUnavailable {
                        reason: "the PTX interpreter is off (TILEFUSE_GPU_INTERPRETER)".into(),
                    })
                }
                State::Loading => {
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
