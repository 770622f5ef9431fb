//! The compile service of a CUDA device: tile programs in, loaded kernels
//! out.
//!
//! A [`CudaCompiler`] sits on top of one [`CudaDevice`] (the driver layer:
//! context, memory, streams, modules, transfers) and owns what turns a
//! [`Program`](crate::kernels::ir::Program) into something to launch: the
//! program cache keyed by program and settings, the quick and tuned tiers
//! and the tuner threads that load tuned modules in the background, the
//! PTX interpreter that runs a new program's first launches, and the
//! argument checks and initial fills of a launch. The driver layer below
//! never sees a program.
//!
//! | file | what it owns |
//! | --- | --- |
//! | `mod.rs` | [`CudaCompiler`]: opened once per ordinal, on top of [`CudaDevice::open`] |
//! | `program.rs` | [`CompiledProgram`]: programs compiled per device (cached per program and settings), the tiers and tuners, argument checks, initial fills, launch; [`run_program`] |
//! | `choice.rs` | codegen settings measured per program ([`CudaCompiler::measure_choice`]), their table and file |
//! | `interpreter.rs` | the PTX interpreter ([`crate::kernels::ptx_vm`]) loaded in the background when the compiler opens; [`CudaCompiler::wait_interpreter`] |

pub mod choice;
mod interpreter;
mod program;

pub use choice::{CandidateTime, MeasuredChoice};
pub use interpreter::InterpreterLoad;
pub use program::{run_program, run_program_with_scalars, CompiledProgram};

use crate::device::cuda::CudaDevice;
use crate::error::Result;
use crate::kernels::ptx_gen::PtxTarget;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The compile service of one CUDA device: its program cache, tuner
/// threads and PTX interpreter. Opened once per ordinal and shared.
///
/// ```no_run
/// # fn main() -> tilefuse::Result<()> {
/// use tilefuse::device::cuda::CudaCompiler;
/// let compiler = CudaCompiler::open(0)?;
/// println!("{} programs compiled on {}", compiler.compiled_programs(), compiler.device().info());
/// # Ok(())
/// # }
/// ```
pub struct CudaCompiler {
    device: Arc<CudaDevice>,
    programs: program::ProgramCache,
    interpreter: interpreter::InterpreterSlot,
    choices: choice::ChoiceTable,
}

impl std::fmt::Debug for CudaCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaCompiler({})", self.device.info())
    }
}

impl CudaCompiler {
    /// The compiler of device `ordinal`, opened on first use (with the
    /// device, see [`CudaDevice::open`]) and shared afterwards. Opening it
    /// starts loading the PTX interpreter in the background (unless the
    /// process default config turns it off; then the driver's JIT is
    /// started up instead, with a one-line module).
    ///
    /// # Errors
    /// Those of [`CudaDevice::open`].
    pub fn open(ordinal: usize) -> Result<Arc<CudaCompiler>> {
        type Table = Mutex<HashMap<usize, Arc<CudaCompiler>, foldhash::fast::FixedState>>;
        static COMPILERS: OnceLock<Table> = OnceLock::new();
        let mut table = COMPILERS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(compiler) = table.get(&ordinal) {
            return Ok(compiler.clone());
        }
        let device = CudaDevice::open(ordinal)?;
        let compiler = Arc::new(CudaCompiler {
            device,
            programs: Default::default(),
            interpreter: Default::default(),
            choices: Default::default(),
        });
        table.insert(ordinal, compiler.clone());
        if !compiler.start_interpreter() {
            compiler.device.warm_up_jit();
        }
        Ok(compiler)
    }

    /// The device it compiles for.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.device.ordinal()
    }

    /// The target PTX is generated for on this device: its compute
    /// capability under its driver.
    pub fn target(&self) -> PtxTarget {
        let info = self.device.info();
        let (major, minor) = info.compute_capability;
        PtxTarget::for_driver(major * 10 + minor, info.driver_version.max(0) as u32).with_sms(info.sm_count)
    }
}
