//! The CPU tile executor: runs any tile kernel [`Program`] on host threads.
//!
//! [`execute`] checks the arguments against the program's parameters,
//! applies the parameters' initial fills, and runs the body once per grid
//! point, spread over the rayon thread pool.
//!
//! # How it is fast
//!
//! - **Grid points in parallel.** The flattened grid is cut into a few chunks
//!   per thread. Each worker owns a frame: one typed buffer per SSA value
//!   and accumulator, allocated once when the worker starts and reused for
//!   every grid point, so a grid point costs only its instruction loop.
//!   Constant tiles are filled when the frame is made, not per point.
//!   When a frame ends its buffers stay with their thread (the newest
//!   2 MiB of them), and the next frames there take them instead of
//!   allocating and zeroing new ones: a small program run again and again
//!   allocates and zeroes nothing for its tiles.
//! - **Typed loops.** Each instruction dispatches on its dtype once and then
//!   runs a tight monomorphised loop over the tile's elements, which the
//!   compiler vectorises; a fused chain of ops stays in L1/L2 between
//!   instructions. Copy-only instructions (loads, stores, select, broadcast)
//!   are compiled per element size, not per dtype.
//! - **Row copies.** A load or store copies the partition's in-bounds box
//!   row by row after merging axes that are contiguous in both the tile and
//!   memory, so a contiguous partition is one `memcpy`, a broadcast axis
//!   (stride 0) is a fill, and only truly strided rows take an element loop.
//!   Padding is written only for partitions at ragged edges.
//! - **No copies where none are needed** (worked out per program in
//!   `analysis`): a whole contiguous partition of read-only memory is read
//!   in place (a zero-copy load); an elementwise result whose only use is a
//!   store of a whole contiguous partition is computed straight into that
//!   memory; a broadcast used only by arithmetic is never materialised (the
//!   op spreads its source itself), nor is a row read through a stride-0
//!   view (a bias) copied once per tile row.
//! - **Reductions** along a contiguous axis keep 16 independent partial
//!   results (vectorised, and more accurate for float sums than one running
//!   sum); along an outer axis they add whole rows elementwise.
//!
//! Memory written by several grid points is shared through raw pointers
//! whose soundness rests on the program's own guarantees (see `SharedMem`):
//! non-atomic stores of different grid points never overlap, and shared
//! elements are only updated atomically (relaxed, CAS loops for floats).
//!
//! Programs that break a rule the executor relies on are reported as
//! [`Error::InvalidProgram`], never a panic; the unmasked access of a
//! partition that is partly out of bounds is [`Error::PartlyOutOfBounds`].
//!
//! # Example
//!
//! Adding one to eight f32 values, as two partitions of four:
//!
//! ```
//! use tilefuse::graph::BinaryOp;
//! use tilefuse::kernels::cpu::{execute, Arg};
//! use tilefuse::kernels::ir::{Access, Builder, IndexExpr};
//! use tilefuse::storage::HostBuffer;
//! use tilefuse::tile::Padding;
//! use tilefuse::{DType, Scalar};
//!
//! let mut b = Builder::new("add_one", &[2]);
//! let x = b.param("x", DType::F32, 8, Access::Read);
//! let y = b.param("y", DType::F32, 8, Access::Write);
//! let (vx, vy) = (b.view_contiguous(x, &[8], &[4], Padding::Zero), b.view_contiguous(y, &[8], &[4], Padding::Zero));
//! let t = b.load(vx, &[IndexExpr::grid(0)], false);
//! let one = b.constant(Scalar::Float(1.0, DType::F32), DType::F32, &[4]);
//! let sum = b.binary(BinaryOp::Add, t, one);
//! b.store(vy, &[IndexExpr::grid(0)], sum, false);
//! let program = b.finish()?;
//!
//! let x = HostBuffer::from_elements(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
//! let mut y = HostBuffer::zeros(DType::F32, 8);
//! execute(&program, &mut [Arg::Read(&x), Arg::Write(&mut y)])?;
//! assert_eq!(y.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
//! # Ok::<(), tilefuse::Error>(())
//! ```

mod analysis;
mod buffer;
mod elementwise;
mod memory;
mod shape_ops;
mod strips;
#[cfg(test)]
mod tests;
pub(crate) mod vmath;

use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::kernels::ir::{verify, IndexExpr, Inst, PartitionExprs, Program, ValueId};
use crate::storage::HostBuffer;
use analysis::Form;
use buffer::{malformed, typed_mut, Buf, ScalarBits};
use elementwise::Spread;
use memory::{SharedMem, ViewPlan};
use rayon::prelude::*;
use strips::Step;

/// One kernel argument: the buffer bound to one of the program's parameters.
#[derive(Debug)]
pub enum Arg<'a> {
    /// A buffer the program only reads.
    Read(&'a HostBuffer),
    /// A buffer the program writes (it may read it too).
    Write(&'a mut HostBuffer),
}

impl Arg<'_> {
    fn buffer(&self) -> &HostBuffer {
        match self {
            Arg::Read(b) => b,
            Arg::Write(b) => b,
        }
    }
}

/// Below this many tile elements of work in all, a program runs on the
/// calling thread: spreading it would cost more than it saves.
const SERIAL_WORK: u64 = 1 << 15;

/// Chunks of grid points per thread: enough to balance uneven points.
const CHUNKS_PER_THREAD: u64 = 8;

/// Runs `program` with `args`, one per parameter in order.
///
/// Verifies the program ([`verify`]), checks that the arguments match the
/// parameters (count, dtype, length, and an [`Arg::Write`] for every
/// parameter the program writes or fills), applies the parameters' initial
/// fills, then runs the body for every grid point. On error the written
/// buffers may hold partial results.
pub fn execute(program: &Program, args: &mut [Arg<'_>]) -> Result<()> {
    execute_with_scalars(program, args, &[])
}

/// [`execute`] for a program with scalar arguments ([`Program::scalars`]):
/// `scalars` holds one value per argument, in order, each converted to its
/// argument's dtype as [`Scalar::cast`] converts.
pub fn execute_with_scalars(program: &Program, args: &mut [Arg<'_>], scalars: &[Scalar]) -> Result<()> {
    verify(program)?;
    run_verified(program, args, scalars)
}

/// [`execute`] after verification. The executor still checks, as it meets
/// them, the rules that keep it memory-safe and panic-free (types and
/// lengths of tiles, partitions inside the index space and the buffers), so
/// a program that slipped past the verifier gets an error; what it relies
/// on without checking is that every id, grid axis and loop variable named
/// exists, and that plain stores of different grid points do not overlap.
fn run_verified(program: &Program, args: &mut [Arg<'_>], scalars: &[Scalar]) -> Result<()> {
    let mems = bind_args(program, args)?;
    program.check_scalar_count(scalars.len())?;
    let context = Context::new(program, &mems, scalars).map_err(|e| name_program(e, &program.name))?;
    context.run().map_err(|e| name_program(e, &program.name))
}

/// Fills in the program's name in errors raised below the entry point.
fn name_program(e: Error, name: &str) -> Error {
    match e {
        Error::InvalidProgram { program, reason } if program.is_empty() => Error::InvalidProgram {
            program: name.to_string(),
            reason,
        },
        e => e,
    }
}

/// Checks the arguments, applies initial fills, and returns the memory of
/// each parameter.
fn bind_args(program: &Program, args: &mut [Arg<'_>]) -> Result<Vec<SharedMem>> {
    let arguments_error = |reason: String| Error::KernelArguments {
        program: program.name.clone(),
        reason,
    };
    if args.len() != program.params.len() {
        return Err(arguments_error(format!(
            "{} arguments given for {} parameters",
            args.len(),
            program.params.len()
        )));
    }
    for (i, (param, arg)) in program.params.iter().zip(args.iter()).enumerate() {
        let buf = arg.buffer();
        if buf.dtype() != param.dtype {
            return Err(Error::DTypeMismatch {
                op: "kernel argument",
                lhs: param.dtype,
                rhs: buf.dtype(),
            });
        }
        if buf.len() as u64 != param.len {
            return Err(Error::LengthMismatch {
                op: "kernel argument",
                len: buf.len(),
                shape: [param.len as usize].into_iter().collect(),
            });
        }
        let written = param.access != crate::kernels::ir::Access::Read || param.init.is_some();
        if written && matches!(arg, Arg::Read(_)) {
            return Err(arguments_error(format!(
                "argument {i} for parameter `{}` is read-only, but the program writes or fills it",
                param.name
            )));
        }
    }
    for (param, arg) in program.params.iter().zip(args.iter_mut()) {
        if let (Some(init), Arg::Write(buf)) = (param.init, arg) {
            let value = ScalarBits::new(init.0, param.dtype);
            match param.dtype.size_in_bytes() {
                1 => buf.as_mut_slice::<u8>().fill(value.get()),
                2 => buf.as_mut_slice::<u16>().fill(value.get()),
                4 => buf.as_mut_slice::<u32>().fill(value.get()),
                _ => buf.as_mut_slice::<u64>().fill(value.get()),
            }
        }
    }
    Ok(args
        .iter_mut()
        .map(|arg| match arg {
            Arg::Read(b) => SharedMem {
                ptr: b.bytes().as_ptr() as *mut u8,
                len: b.len(),
                dtype: b.dtype(),
                writable: false,
            },
            Arg::Write(b) => SharedMem {
                ptr: b.bytes_mut().as_mut_ptr(),
                len: b.len(),
                dtype: b.dtype(),
                writable: true,
            },
        })
        .collect())
}

/// Calls `f` on every instruction, loop bodies included, in program order.
fn for_each_inst(body: &[Inst], f: &mut impl FnMut(&Inst)) {
    for inst in body {
        f(inst);
        if let Some(body) = inst.nested() {
            for_each_inst(body, f);
        }
    }
}

/// Everything the workers share for one execution.
struct Context<'p> {
    program: &'p Program,
    views: Vec<ViewPlan>,
    /// Values defined by `Const` or `Scalar`, with their bits: filled once
    /// per frame.
    consts: Vec<(usize, ScalarBits)>,
    /// The initial value of each accumulator.
    acc_init: Vec<ScalarBits>,
    /// Tile elements touched per grid point, loops counted (a cost estimate).
    work_per_point: u64,
    /// For each value, the store it is computed into when possible.
    forward: Vec<Option<analysis::Forward>>,
    /// For each value, its form when it is a broadcast never materialised.
    forms: Vec<Form>,
    /// For each value, whether it is a load that may read one period.
    cycle_loads: Vec<bool>,
    /// The parameters' memory (for the flags gathers set).
    mems: Vec<SharedMem>,
    /// What the body runs, and the body of its last point.
    steps: Vec<Step<'p>>,
    last_steps: Vec<Step<'p>>,
    /// The dtype of each slot of reduction lanes the steps use.
    lanes: Vec<crate::DType>,
}

impl<'p> Context<'p> {
    fn new(program: &'p Program, mems: &[SharedMem], scalars: &[Scalar]) -> Result<Context<'p>> {
        let mut stored = vec![false; program.views.len()];
        let mut consts = Vec::new();
        for_each_inst(&program.body, &mut |inst| match inst {
            Inst::Store { view, .. } => stored[view.index()] = true,
            Inst::Const { dst, value } => {
                consts.push((dst.index(), ScalarBits::new(value.0, program.values[dst.index()].dtype)))
            }
            Inst::Scalar { dst, scalar } => {
                let d = program.values[dst.index()].dtype;
                consts.push((dst.index(), ScalarBits::new(scalars[scalar.index()].cast(d), d)))
            }
            _ => {}
        });
        let views = program
            .views
            .iter()
            .zip(&stored)
            .map(|(view, &stored)| {
                let p = view.param.index();
                ViewPlan::new(view, &program.params[p], mems[p], stored)
            })
            .collect::<Result<Vec<_>>>()?;
        let acc_init = program
            .accs
            .iter()
            .map(|a| ScalarBits::new(a.init.0, a.ty.dtype))
            .collect();
        let (forms, cycle_loads) = analysis::spread_operands(program);
        let forward = analysis::forwarded_stores(program);
        let mut facts = strips::Facts::new(
            program,
            &forms,
            &cycle_loads,
            forward.iter().map(Option::is_some).collect(),
        );
        let steps = strips::schedule(program, &program.body, &mut facts);
        let last_steps = match program.body.last() {
            Some(Inst::LastPoint { body, .. }) => strips::schedule(program, body, &mut facts),
            _ => Vec::new(),
        };
        let lanes = facts.lanes;
        Ok(Context {
            program,
            views,
            consts,
            acc_init,
            work_per_point: work(program, &program.body),
            forward,
            forms,
            cycle_loads,
            mems: mems.to_vec(),
            steps,
            last_steps,
            lanes,
        })
    }

    /// Runs the body for every grid point, in parallel when it pays.
    fn run(&self) -> Result<()> {
        let points = self
            .program
            .grid
            .iter()
            .try_fold(1u64, |n, &g| n.checked_mul(g))
            .ok_or_else(|| malformed(format!("grid {:?} has more than 2^64 points", self.program.grid)))?;
        if points == 0 {
            return Ok(());
        }
        let threads = rayon::current_num_threads() as u64;
        if threads <= 1 || points == 1 || points.saturating_mul(self.work_per_point) < SERIAL_WORK {
            self.run_points(&mut Frame::new(self)?, 0, points)?;
        } else {
            let chunks = points.min(threads * CHUNKS_PER_THREAD);
            let bound = |c: u64| (c as u128 * points as u128 / chunks as u128) as u64;
            (0..chunks).into_par_iter().try_for_each_init(
                || Frame::new(self),
                |frame, c| self.run_points(frame.as_mut().map_err(|e| e.clone())?, bound(c), bound(c + 1)),
            )?;
        }
        self.run_last_points(points)
    }

    /// Runs the body of the program's last point, if it has one, once per
    /// group of grid points, now that every point has run: at the group's
    /// last point along the counted axis (the body cannot tell which).
    fn run_last_points(&self, points: u64) -> Result<()> {
        let Some(Inst::LastPoint { axis, .. }) = self.program.body.last() else {
            return Ok(());
        };
        let grid = &self.program.grid;
        let axis = *axis as usize;
        let extent = *grid.get(axis).ok_or_else(|| {
            malformed(format!(
                "last point over grid axis {axis} of a rank {} grid",
                grid.len()
            ))
        })?;
        let mut frame = Frame::new(self)?;
        for group in 0..points / extent {
            let mut rest = group;
            for k in (0..grid.len()).rev() {
                if k == axis {
                    frame.grid[k] = extent - 1;
                } else {
                    frame.grid[k] = rest % grid[k];
                    rest /= grid[k];
                }
            }
            for (acc, &init) in frame.accs.iter_mut().zip(&self.acc_init) {
                acc.fill(init);
            }
            self.run_block(&mut frame, &self.last_steps)?;
        }
        Ok(())
    }

    /// Sets element 0 of the `u32` flag parameter `flag` to 1.
    fn raise(&self, flag: crate::kernels::ir::ParamId) -> Result<()> {
        let mem = self.mems[flag.index()];
        if mem.dtype != crate::DType::U32 || !mem.writable || mem.len == 0 {
            return Err(malformed(format!("flag {flag} is not a written u32 buffer")));
        }
        // SAFETY: the buffer is a live, writable u32 buffer of at least one
        // element (checked above) that other workers touch only atomically.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(mem.ptr as *mut u32) }
            .store(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Runs the grid points `lo..hi` (row-major order) on one frame.
    fn run_points(&self, frame: &mut Frame, lo: u64, hi: u64) -> Result<()> {
        let grid = &self.program.grid;
        let mut rest = lo;
        for k in (0..grid.len()).rev() {
            frame.grid[k] = rest % grid[k];
            rest /= grid[k];
        }
        for _ in lo..hi {
            for (acc, &init) in frame.accs.iter_mut().zip(&self.acc_init) {
                acc.fill(init);
            }
            self.run_block(frame, &self.steps)?;
            for k in (0..grid.len()).rev() {
                frame.grid[k] += 1;
                if frame.grid[k] < grid[k] {
                    break;
                }
                frame.grid[k] = 0;
            }
        }
        Ok(())
    }

    /// Runs `steps` at the frame's grid point.
    fn run_block(&self, frame: &mut Frame, steps: &[Step<'_>]) -> Result<()> {
        for step in steps {
            match step {
                Step::Inst(inst) => self.run_inst(frame, inst)?,
                Step::Loop { var, count, body } => {
                    for i in 0..*count {
                        frame.loops[var.index()] = i;
                        self.run_block(frame, body)?;
                    }
                }
                Step::Strips(group) => self.run_strips(frame, group)?,
            }
        }
        Ok(())
    }

    /// Interprets one instruction over whole tiles, computing an
    /// elementwise result into the memory it is stored to where it can.
    fn run_inst(&self, frame: &mut Frame, inst: &Inst) -> Result<()> {
        if let Inst::Unary { dst, .. }
        | Inst::Binary { dst, .. }
        | Inst::Select { dst, .. }
        | Inst::Uniform { dst, .. }
        | Inst::Cast { dst, .. } = inst
        {
            self.place(frame, *dst);
        }
        self.compute(frame, inst)
    }

    /// Interprets one instruction on the frame's tiles as they are pointed.
    fn compute(&self, frame: &mut Frame, inst: &Inst) -> Result<()> {
        let program = self.program;
        let dtype = |v: &crate::kernels::ir::ValueId| program.values[v.index()].dtype;
        let shape = |v: &crate::kernels::ir::ValueId| &program.values[v.index()].shape[..];
        match inst {
            Inst::Load {
                dst,
                view,
                index,
                masked,
            } => {
                let part = frame.partition(index);
                let (plan, tile) = (&self.views[view.index()], &mut frame.values[dst.index()]);
                frame.forms[dst.index()] = if self.cycle_loads[dst.index()] {
                    match plan.load_period(&part, *masked, tile)? {
                        Some(period) => Form::Cycle {
                            src: dst.index(),
                            period,
                        },
                        None => Form::Dense,
                    }
                } else {
                    plan.load(&part, *masked, tile)?;
                    Form::Dense
                };
            }
            Inst::Store {
                view,
                index,
                src,
                masked,
            } => {
                let part = frame.partition(index);
                self.views[view.index()].store(&part, *masked, &frame.values[src.index()])?;
            }
            Inst::Gather {
                dst,
                view,
                index,
                at,
                stride,
                bound,
                flag,
            } => {
                let part = frame.partition(index);
                let mut bad = false;
                let plan = &self.views[view.index()];
                frame.with_dst(dst.index(), |d, v| {
                    bad = plan.gather(&part, &v[at.index()], *stride, *bound, d)?;
                    Ok(())
                })?;
                if let (true, Some(flag)) = (bad, flag) {
                    self.raise(*flag)?;
                }
            }
            Inst::ScatterAdd {
                view,
                index,
                at,
                stride,
                bound,
                src,
                flag,
            } => {
                let part = frame.partition(index);
                let plan = &self.views[view.index()];
                if plan.scatter_add(
                    &part,
                    &frame.values[at.index()],
                    *stride,
                    *bound,
                    &frame.values[src.index()],
                )? {
                    self.raise(*flag)?;
                }
            }
            Inst::InBounds { dst, view, index } => {
                let part = frame.partition(index);
                let mask = &mut frame.values[dst.index()];
                if mask.dtype() != crate::DType::Bool {
                    return Err(malformed(format!("in_bounds into a {} tile", mask.dtype())));
                }
                self.views[view.index()].in_bounds(&part, typed_mut(mask)?)?;
            }
            // Constant tiles were filled when the frame was made.
            Inst::Const { .. } | Inst::Scalar { .. } => {}
            Inst::Iota { dst, axis, index } => {
                let i = frame.eval(index);
                shape_ops::iota(shape(dst), *axis as usize, i, &mut frame.values[dst.index()])?;
            }
            Inst::Unary { dst, op, src } => frame.with_dst(dst.index(), |d, v| {
                elementwise::unary(*op, dtype(src), d, &v[src.index()])
            })?,
            Inst::Binary { dst, op, lhs, rhs } => {
                let (l, r) = (frame.operand(*lhs), frame.operand(*rhs));
                frame.with_dst(dst.index(), |d, v| match (l, r) {
                    ((l, Spread::Dense), (r, Spread::Dense)) => {
                        elementwise::binary(*op, dtype(lhs), d, Some(&v[l]), &v[r])
                    }
                    ((l, ls), (r, rs)) => elementwise::arith_spread(*op, dtype(lhs), d, (&v[l], ls), (&v[r], rs)),
                })?
            }
            Inst::Select {
                dst,
                cond,
                on_true,
                on_false,
            } => frame.with_dst(dst.index(), |d, v| {
                elementwise::select(d, &v[cond.index()], &v[on_true.index()], &v[on_false.index()])
            })?,
            Inst::Uniform {
                dst,
                counter,
                key,
                bits,
            } => frame.with_dst(dst.index(), |d, v| {
                shape_ops::uniform(d, &v[counter.index()], &v[key.index()], *bits)
            })?,
            Inst::Cast { dst, src } => frame.with_dst(dst.index(), |d, v| elementwise::cast(d, &v[src.index()]))?,
            // A spread broadcast is read through its source by its users.
            Inst::Broadcast { dst, .. } if self.forms[dst.index()] != Form::Dense => {}
            Inst::Broadcast { dst, src } => frame.with_dst(dst.index(), |d, v| {
                shape_ops::broadcast(shape(dst), shape(src), d, &v[src.index()])
            })?,
            Inst::Reduce { dst, op, src, axis } => frame.with_dst(dst.index(), |d, v| {
                shape_ops::reduce(*op, dtype(src), shape(src), *axis as usize, d, &v[src.index()])
            })?,
            Inst::Scan { dst, op, src, axis } => frame.with_dst(dst.index(), |d, v| {
                shape_ops::scan(*op, dtype(src), shape(src), *axis as usize, d, &v[src.index()])
            })?,
            Inst::AccUpdate { acc, op, src } => {
                use crate::ops::BinaryOp::{Add, Maximum, Minimum, Mul};
                if !matches!(op, Add | Mul | Maximum | Minimum) {
                    return Err(malformed(format!("accumulator update with {op:?}")));
                }
                let acc_dtype = program.accs[acc.index()].ty.dtype;
                let operand = &frame.values[src.index()];
                elementwise::binary(*op, acc_dtype, &mut frame.accs[acc.index()], None, operand)?;
            }
            Inst::AccRead { dst, acc } => frame.values[dst.index()].copy_from(&frame.accs[acc.index()])?,
            // Run by the steps of their blocks.
            Inst::Loop { .. } => {}
            Inst::Atomic {
                op,
                view,
                index,
                src,
                masked,
                scope: _,
            } => {
                // Every scope is honoured by host atomics, which are
                // atomic with respect to all threads.
                let part = frame.partition(index);
                self.views[view.index()].atomic(*op, &part, *masked, &frame.values[src.index()])?;
            }
            // One host thread runs a grid point, so there is nothing to wait for.
            Inst::Barrier => {}
            // Run once per group after every grid point, by `run_last_points`.
            Inst::LastPoint { .. } => {}
        }
        Ok(())
    }
}

impl Context<'_> {
    /// Points the tile of `dst` at the memory it will be stored to, if its
    /// store is forwarded and that partition can be written in place here;
    /// otherwise at its own buffer.
    fn place(&self, frame: &mut Frame, dst: ValueId) {
        let Some(f) = &self.forward[dst.index()] else { return };
        let part = frame.partition(&f.index);
        let tile = &mut frame.values[dst.index()];
        match self.views[f.view.index()].store_in_place(&part, f.masked, tile) {
            // SAFETY: the partition lies in writable memory that only this
            // grid point stores to (plain stores of different points do not
            // overlap), nothing reads or writes it before the forwarded store
            // (`forward::forwarded_stores`), and the tile is only written by
            // its defining instruction and read by that store.
            Some(ptr) => unsafe { tile.borrow(ptr, self.program.values[dst.index()].numel() as usize, true) },
            None => tile.release(),
        }
    }
}

/// Tile elements an instruction list touches, loop trip counts multiplied in.
fn work(program: &Program, body: &[Inst]) -> u64 {
    body.iter()
        .map(|inst| match inst {
            Inst::Loop { count, body, .. } => count.saturating_mul(work(program, body)),
            // Run once per group, not per point.
            Inst::LastPoint { .. } => 0,
            Inst::Store { src: v, .. } | Inst::Atomic { src: v, .. } | Inst::ScatterAdd { src: v, .. } => {
                program.values[v.index()].numel()
            }
            Inst::AccUpdate { src: v, .. } => program.values[v.index()].numel(),
            Inst::Barrier => 0,
            Inst::Load { dst, .. }
            | Inst::Gather { dst, .. }
            | Inst::InBounds { dst, .. }
            | Inst::Const { dst, .. }
            | Inst::Scalar { dst, .. }
            | Inst::Iota { dst, .. }
            | Inst::Unary { dst, .. }
            | Inst::Binary { dst, .. }
            | Inst::Select { dst, .. }
            | Inst::Cast { dst, .. }
            | Inst::Uniform { dst, .. }
            | Inst::Broadcast { dst, .. }
            | Inst::Reduce { dst, .. }
            | Inst::Scan { dst, .. }
            | Inst::AccRead { dst, .. } => program.values[dst.index()].numel(),
        })
        .fold(0u64, u64::saturating_add)
}

/// One worker's state: the value and accumulator buffers, reused for every
/// grid point it runs, and the current grid point and loop variables.
struct Frame {
    values: Vec<Buf>,
    /// How each value is held: spread broadcasts and period loads refer to
    /// another value's elements or to fewer elements of their own.
    forms: Vec<Form>,
    accs: Vec<Buf>,
    grid: Vec<u64>,
    loops: Vec<u64>,
    /// The partial results of strip reductions, one slot each.
    lanes: Vec<Buf>,
    /// Scratch lists of a strip-mined chain, kept to reuse.
    windows: Vec<strips::Window>,
    spread: Vec<(usize, Form)>,
}

impl Drop for Frame {
    /// Hands the tiles back for the next frame on this thread.
    fn drop(&mut self) {
        for b in self
            .values
            .drain(..)
            .chain(self.accs.drain(..))
            .chain(self.lanes.drain(..))
        {
            b.recycle();
        }
    }
}

impl Frame {
    fn new(context: &Context<'_>) -> Result<Frame> {
        let program = context.program;
        let mut values: Vec<Buf> = program
            .values
            .iter()
            .map(|t| Buf::scratch(t.dtype, t.numel() as usize))
            .collect::<Result<_>>()?;
        for &(v, bits) in &context.consts {
            values[v].fill(bits);
        }
        Ok(Frame {
            values,
            forms: context.forms.clone(),
            accs: program
                .accs
                .iter()
                .map(|a| Buf::scratch(a.ty.dtype, a.ty.numel() as usize))
                .collect::<Result<_>>()?,
            grid: vec![0; program.grid.len()],
            loops: vec![0; program.loops as usize],
            lanes: context
                .lanes
                .iter()
                .map(|&d| Buf::scratch(d, shape_ops::LANES))
                .collect::<Result<_>>()?,
            windows: Vec::new(),
            spread: Vec::new(),
        })
    }

    /// The value of one index expression at the current grid point and loop
    /// variables; overflow saturates, so it fails the index-space check.
    fn eval(&self, e: &IndexExpr) -> u64 {
        let mut v = e.constant;
        if let Some((axis, coeff)) = e.grid {
            v = v.saturating_add(self.grid[axis as usize].saturating_mul(coeff));
        }
        if let Some((var, coeff)) = e.loop_var {
            v = v.saturating_add(self.loops[var.index()].saturating_mul(coeff));
        }
        v
    }

    fn partition(&self, index: &PartitionExprs) -> crate::kernels::ir::Dims<u64> {
        index.iter().map(|e| self.eval(e)).collect()
    }

    /// Where the elements of operand `v` are: a value and how it spreads.
    fn operand(&self, v: ValueId) -> (usize, Spread) {
        match self.forms[v.index()] {
            Form::Dense => (v.index(), Spread::Dense),
            Form::Repeat { src, rep } => (src, Spread::Repeat(rep)),
            Form::Cycle { src, period } => (src, Spread::Cycle(period)),
        }
    }

    /// Runs `f` with value `dst` taken out of the table (mutable) and the
    /// rest of the table (for its operands), then puts `dst` back.
    fn with_dst(&mut self, dst: usize, f: impl FnOnce(&mut Buf, &[Buf]) -> Result<()>) -> Result<()> {
        let mut d = std::mem::replace(&mut self.values[dst], Buf::placeholder());
        let result = f(&mut d, &self.values);
        self.values[dst] = d;
        result
    }
}
