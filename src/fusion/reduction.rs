//! The arithmetic of reductions: accumulation dtypes, identities, and the
//! tile and accumulator ops each reduction uses.

use crate::dtype::{DType, Scalar};
use crate::kernels::ir::TileReduce;
use crate::ops::{BinaryOp, ReduceOp};

/// The dtype a reduction of a node of `dtype` accumulates in.
pub(crate) fn acc_dtype(dtype: DType) -> DType {
    match dtype {
        DType::Bool => DType::U8,
        d => d.compute_type(),
    }
}

/// The reduction actually run for `op` on `dtype`: bools reduce as `u8`,
/// where sum (or) is max and prod (and) is min.
pub(crate) fn effective(op: ReduceOp, dtype: DType) -> ReduceOp {
    match (dtype, op) {
        (DType::Bool, ReduceOp::Sum) => ReduceOp::Max,
        (DType::Bool, ReduceOp::Prod) => ReduceOp::Min,
        _ => op,
    }
}

/// The in-tile reduction for `op`.
pub(crate) fn tile_op(op: ReduceOp) -> TileReduce {
    match op {
        ReduceOp::Sum | ReduceOp::ShiftedExpSum | ReduceOp::ShiftedSquareSum => TileReduce::Sum,
        ReduceOp::Prod => TileReduce::Prod,
        ReduceOp::Max | ReduceOp::ArgMax => TileReduce::Max,
        ReduceOp::Min | ReduceOp::ArgMin => TileReduce::Min,
    }
}

/// The accumulator update for `op`.
pub(crate) fn acc_op(op: ReduceOp) -> BinaryOp {
    match op {
        ReduceOp::Sum | ReduceOp::ShiftedExpSum | ReduceOp::ShiftedSquareSum => BinaryOp::Add,
        ReduceOp::Prod => BinaryOp::Mul,
        ReduceOp::Max | ReduceOp::ArgMax => BinaryOp::Maximum,
        ReduceOp::Min | ReduceOp::ArgMin => BinaryOp::Minimum,
    }
}

/// The identity of `op` in accumulation dtype `dt`.
pub(crate) fn identity(op: ReduceOp, dt: DType) -> Scalar {
    let (lo, hi): (i128, i128) = match dt {
        DType::U8 => (0, u8::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    let v = |x: f64, i: i128| {
        if dt.is_float() {
            Scalar::Float(x, dt)
        } else {
            Scalar::Int(i, dt)
        }
    };
    match op {
        ReduceOp::Sum | ReduceOp::ShiftedExpSum | ReduceOp::ShiftedSquareSum => v(0.0, 0),
        ReduceOp::Prod => v(1.0, 1),
        ReduceOp::Max | ReduceOp::ArgMax => v(f64::NEG_INFINITY, lo),
        ReduceOp::Min | ReduceOp::ArgMin => v(f64::INFINITY, hi),
    }
}
