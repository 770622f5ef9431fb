//! Tests of the CPU executor, on programs made with the IR's `Builder`.

mod in_place;
mod memory;
mod ops;
mod programs;
mod strips;

use super::{execute, run_verified, Arg};
use crate::dtype::{DType, Scalar};
use crate::error::Result;
use crate::kernels::ir::*;
use crate::ops::{BinaryOp, Padding, ThreadScope, UnaryOp};
use crate::storage::HostBuffer;

/// Grid coordinate `axis` as a partition index term.
pub(super) fn g(axis: u8) -> IndexExpr {
    IndexExpr::grid(axis)
}

/// The constant partition index term `c`.
pub(super) fn c(c: u64) -> IndexExpr {
    IndexExpr::constant(c)
}

/// A row-major view of `param` with zero padding.
pub(super) fn dense(b: &mut Builder, param: ParamId, extents: &[u64], tile: &[u32]) -> ViewId {
    b.view_contiguous(param, extents, tile, Padding::Zero)
}

/// The type `b` gave `value`.
pub(super) fn ty(b: &Builder, value: ValueId) -> ValueType {
    b.value_type(value).expect("a value the builder made").clone()
}

/// Argument list: `inputs` read-only, then `outputs` written in place.
fn args<'a>(inputs: &[&'a HostBuffer], outputs: &'a mut [&mut HostBuffer]) -> Vec<Arg<'a>> {
    let mut args: Vec<Arg<'a>> = inputs.iter().map(|b| Arg::Read(b)).collect();
    args.extend(outputs.iter_mut().map(|b| Arg::Write(b)));
    args
}

/// Runs `program` through [`execute`] with `inputs` as the leading
/// read-only arguments and `outputs` after them.
pub(super) fn run(program: &Program, inputs: &[&HostBuffer], outputs: &mut [&mut HostBuffer]) -> Result<()> {
    execute(program, &mut args(inputs, outputs))
}

/// As [`run`], skipping the verifier: for the executor's own checks of
/// programs the verifier would refuse.
pub(super) fn run_unverified(program: &Program, inputs: &[&HostBuffer], outputs: &mut [&mut HostBuffer]) -> Result<()> {
    run_verified(program, &mut args(inputs, outputs), &[])
}

/// `n` f32 values spread over roughly [-range, range], none of them zero.
pub(super) fn sample_f32(n: usize, range: f32, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1664525).wrapping_add(1013904223);
            let unit = (state >> 8) as f32 / (1u32 << 24) as f32;
            (unit * 2.0 - 1.0) * range + 1e-3
        })
        .collect()
}
