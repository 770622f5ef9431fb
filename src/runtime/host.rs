//! Running a fusion plan on the CPU executor.

use super::{Backend, RealizeStats};
use crate::device::Device;
use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::fusion::{BufferRef, Plan};
use crate::graph::Subgraph;
use crate::kernels::cpu::{execute_with_scalars, Arg};
use crate::kernels::ir::Access;
use crate::shape::Shape;
use crate::storage::{HostBuffer, Storage};
use std::sync::Arc;
use std::time::Instant;

/// The CPU executor as the back end of a realization.
pub(super) struct HostBackend;

impl Backend for HostBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn run(
        &self,
        plan: &Arc<Plan>,
        leaves: &[Arc<Storage>],
        scalars: &[Scalar],
        shapes: &[Shape],
        stats: &mut RealizeStats,
        since: Instant,
    ) -> Result<(Vec<Arc<Storage>>, Instant)> {
        let buffers = run_leaves(plan, leaves, scalars, shapes)?;
        let ran = Instant::now();
        stats.launch_time = ran - since;
        stats.kernels_launched = plan.kernels.len();
        Ok((buffers.into_iter().map(|b| Arc::new(Storage::Host(b))).collect(), ran))
    }

    /// Nothing to do: host data is where the CPU reads it.
    fn make_resident(&self, _host: &[Arc<Storage>], _stats: &mut RealizeStats) -> Result<()> {
        Ok(())
    }
}

/// Runs every kernel of `plan` on the CPU executor over the data leaves of
/// `sub` (device data is downloaded first) and returns one row-major buffer per
/// output of the plan.
pub fn run_plan(plan: &Plan, sub: &Subgraph) -> Result<Vec<HostBuffer>> {
    let shapes: Vec<Shape> = sub.outputs.iter().map(|&o| sub.nodes[o].shape.clone()).collect();
    run_leaves(plan, &super::data_leaves(sub), &super::full_values(sub), &shapes)
}

/// [`run_plan`] over the storages of the data leaves and the values of the
/// constants, in node order; `shapes` are the outputs' shapes, which a
/// buffer that does not fit in memory is reported with when it holds one.
pub(super) fn run_leaves(
    plan: &Plan,
    leaves: &[Arc<Storage>],
    scalars: &[Scalar],
    shapes: &[Shape],
) -> Result<Vec<HostBuffer>> {
    let inputs = leaves.iter().map(|s| s.host()).collect::<Result<Vec<_>>>()?;
    let mut temps: Vec<Option<HostBuffer>> = plan
        .buffers
        .iter()
        .enumerate()
        .map(|(t, b)| {
            let output = plan.outputs.iter().position(|&o| o == BufferRef::Temp(t));
            let flat = [b.len as usize];
            let shape = output.and_then(|i| shapes.get(i)).map_or(&flat[..], |s| s.dims());
            HostBuffer::try_zeros_for("realize", shape, b.dtype).map(Some)
        })
        .collect::<Result<_>>()?;
    for kernel in &plan.kernels {
        // Buffers the kernel writes are taken out of `temps` for the call, so
        // the ones it only reads can be borrowed from `temps` meanwhile.
        let mut written: Vec<(usize, HostBuffer)> = Vec::new();
        for (param, arg) in kernel.program.params.iter().zip(&kernel.args) {
            if let (BufferRef::Temp(t), Access::Write | Access::ReadWrite) = (arg, param.access) {
                if let Some(buf) = temps[*t].take() {
                    written.push((*t, buf));
                }
            }
        }
        {
            let mut write_slots: Vec<(usize, Option<&mut HostBuffer>)> =
                written.iter_mut().map(|(t, b)| (*t, Some(b))).collect();
            let mut args = Vec::with_capacity(kernel.args.len());
            for arg in &kernel.args {
                args.push(match *arg {
                    BufferRef::Input(i) => Arg::Read(input(&inputs, i, &kernel.program.name)?),
                    BufferRef::Temp(t) => match &temps[t] {
                        Some(buf) => Arg::Read(buf),
                        None => {
                            let slot = write_slots.iter_mut().find(|(w, _)| *w == t);
                            match slot.and_then(|(_, b)| b.take()) {
                                Some(buf) => Arg::Write(buf),
                                None => {
                                    return Err(bad_plan(
                                        &kernel.program.name,
                                        "one buffer bound to two written parameters",
                                    ))
                                }
                            }
                        }
                    },
                });
            }
            execute_with_scalars(&kernel.program, &mut args, &super::kernel_scalars(kernel, scalars)?)?;
        }
        for (t, buf) in written {
            temps[t] = Some(buf);
        }
        // A gather that met an index outside its axis read nothing there,
        // but its result is not the user's: the error, before any kernel
        // reads it.
        for (t, check) in plan.index_checks() {
            if temps[t].as_ref().is_some_and(|b| b.as_slice::<u32>().iter().any(|&f| f != 0)) {
                return Err(check.error());
            }
        }
    }
    plan.outputs
        .iter()
        .map(|out| match *out {
            BufferRef::Input(i) => input(&inputs, i, "plan outputs").and_then(|b| b.try_clone_for("realize")),
            BufferRef::Temp(t) => {
                let used_again = plan.outputs.iter().filter(|&&o| o == *out).count() > 1;
                let buf = if used_again {
                    temps[t].as_ref().map(|b| b.try_clone_for("realize")).transpose()?
                } else {
                    temps[t].take()
                };
                buf.ok_or_else(|| bad_plan("plan outputs", "an output buffer is missing"))
            }
        })
        .collect()
}

fn input<'a>(inputs: &[&'a HostBuffer], i: usize, program: &str) -> Result<&'a HostBuffer> {
    inputs
        .get(i)
        .copied()
        .ok_or_else(|| bad_plan(program, "an input position past the subgraph's data leaves"))
}

fn bad_plan(program: &str, reason: &str) -> Error {
    Error::KernelArguments {
        program: program.to_string(),
        reason: reason.to_string(),
    }
}
