//! Tile programs on a real GPU, checked against the CPU executor: the
//! reference documents' examples with their exact values, then tables of
//! cases (one line each) over ops, dtypes, casts, paddings, shapes,
//! reductions, atomics and grid sizes.
//!
//! Every test needs a CUDA GPU and is ignored otherwise; run them with
//! `cargo test --release --test gpu_kernels -- --include-ignored`.
//!
//! Tolerances: integers, bools and every exactly rounded float operation
//! (`+ - * /`, `sqrt`, `1/x`, `1/sqrt x`, max/min, rounding, comparisons,
//! casts, loads, stores, integer atomics) are bit-exact. The f32
//! transcendentals allow the worst error `ptx_gen` documents against f64
//! plus the CPU's own (about one ulp), over the documented ranges; f16/bf16
//! results of them, computed in f32 and rounded once, allow one ulp of
//! their type. Sums whose order differs (reductions, float atomics) allow
//! a stated absolute or relative error.

#![cfg(feature = "cuda")]

mod common;
#[path = "gpu_kernels/harness.rs"]
mod harness;

use std::f64::consts::PI;

use common::reference_programs::{add_one, c, pv_atomic, pv_load, pv_load_masked_nan, pv_store_iota};
use harness::{check_program, random, rel_abs, run_cases, ulps, Outcome, Tol, EXACT};
use tilefuse::graph::{BinaryOp, UnaryOp};
use tilefuse::kernels::ir::{Access, AtomicOp, Builder, IndexExpr, MathMode, Program, ValueId};
use tilefuse::storage::HostBuffer;
use tilefuse::tile::Padding;
use tilefuse::{DType, Error, Scalar};

fn g(axis: u8) -> IndexExpr {
    IndexExpr::grid(axis)
}

/// Runs one differential case and returns the GPU's buffers.
fn gpu_agrees(program: &Program, inputs: &[HostBuffer], tol: Tol) -> Vec<HostBuffer> {
    match check_program(program, inputs, tol) {
        Ok(Outcome::Same(gpu)) => gpu,
        Ok(Outcome::Unsupported(why)) | Err(why) => panic!("{why}"),
    }
}

// ---- The reference documents' examples ----

#[test]
#[ignore = "needs a CUDA GPU"]
fn add_one_to_a_2x32x3x4_tensor() {
    let xs: Vec<f32> = (0..768).map(|i| i as f32 * 0.5 - 100.0).collect();
    let inputs = [HostBuffer::from_elements(&xs), HostBuffer::zeros(DType::F32, 768)];
    let gpu = gpu_agrees(&add_one(), &inputs, EXACT);
    let want: Vec<f32> = xs.iter().map(|x| x + 1.0).collect();
    assert_eq!(gpu[1].to_vec::<f32>(), want);
}

fn x_4x8() -> HostBuffer {
    HostBuffer::from_elements(&(0..32).collect::<Vec<i32>>())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn partition_view_load_of_partition_1_2() {
    let gpu = gpu_agrees(&pv_load(), &[x_4x8(), HostBuffer::zeros(DType::I32, 4)], EXACT);
    assert_eq!(gpu[1].to_vec::<i32>(), [20, 21, 28, 29]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn nan_padded_masked_load_of_partition_0_2() {
    let xs = HostBuffer::from_elements(&(0..44).map(|i| i as f32).collect::<Vec<_>>());
    let gpu = gpu_agrees(&pv_load_masked_nan(), &[xs, HostBuffer::zeros(DType::F32, 8)], EXACT);
    let got = gpu[1].to_vec::<f32>();
    let want = [8., 9., 10., f32::NAN, 19., 20., 21., f32::NAN];
    assert!(
        got.iter().zip(want).all(|(g, w)| *g == w || (g.is_nan() && w.is_nan())),
        "{got:?}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn store_of_100_iota_into_partition_1_3() {
    let gpu = gpu_agrees(&pv_store_iota(), &[x_4x8()], EXACT);
    let mut want: Vec<i32> = (0..32).collect();
    (want[22], want[23], want[30], want[31]) = (0, 100, 200, 300);
    assert_eq!(gpu[0].to_vec::<i32>(), want);
}

/// `(op, operand, x before, x after, 4 × 3 x before, after)`.
type AtomicExample = (AtomicOp, i32, [i32; 4], [i32; 4], [i32; 12], [i32; 12]);

/// The partition-view document's atomic examples on i32: `(op, operand,
/// x before, x after)` for the 1-D x of 4 in partitions of 2 at [1], and
/// the masked form on the 4 × 3 x in 2 × 2 partitions at [0, 1].
#[rustfmt::skip]
const ATOMIC_EXAMPLES: [AtomicExample; 7] = [
    (AtomicOp::And, 0b1111, [1, 2, 0b10101010, 0b01010101], [1, 2, 0b1010, 0b0101],
        [1, 2, 0b10101010, 3, 4, 0b11001100, 5, 6, 0b11110000, 7, 8, 0b00110011],
        [1, 2, 0b00001010, 3, 4, 0b00001100, 5, 6, 0b11110000, 7, 8, 0b00110011]),
    (AtomicOp::Or, 0b1111, [1, 2, 0b10101010, 0b01010101], [1, 2, 0b10101111, 0b01011111],
        [1, 2, 0b10101010, 3, 4, 0b11001100, 5, 6, 0b11110000, 7, 8, 0b00110011],
        [1, 2, 0b10101111, 3, 4, 0b11001111, 5, 6, 0b11110000, 7, 8, 0b00110011]),
    (AtomicOp::Xor, 0b11111111, [1, 2, 0b10101010, 0b01010101], [1, 2, 0b01010101, 0b10101010],
        [1, 2, 0b10101010, 3, 4, 0b11001100, 5, 6, 0b11110000, 7, 8, 0b00110011],
        [1, 2, 0b01010101, 3, 4, 0b00110011, 5, 6, 0b11110000, 7, 8, 0b00110011]),
    (AtomicOp::Max, 4, [1, 2, 3, 6], [1, 2, 4, 6],
        [1, 2, 3, 3, 4, 6, 5, 6, 2, 7, 8, 8], [1, 2, 4, 3, 4, 6, 5, 6, 2, 7, 8, 8]),
    (AtomicOp::Min, 4, [1, 2, 3, 6], [1, 2, 3, 4],
        [1, 2, 3, 3, 4, 6, 5, 6, 2, 7, 8, 8], [1, 2, 3, 3, 4, 4, 5, 6, 2, 7, 8, 8]),
    (AtomicOp::Add, 10, [1, 2, 3, 4], [1, 2, 13, 14],
        [1, 2, 1, 3, 4, 2, 5, 6, 3, 7, 8, 4], [1, 2, 11, 3, 4, 12, 5, 6, 3, 7, 8, 4]),
    (AtomicOp::Sub, 3, [1, 2, 3, 4], [1, 2, 0, 1],
        [1, 2, 5, 3, 4, 8, 5, 6, 6, 7, 8, 9], [1, 2, 2, 3, 4, 5, 5, 6, 6, 7, 8, 9]),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn atomic_examples_masked_and_unmasked() {
    for (op, operand, before, after, before_2d, after_2d) in ATOMIC_EXAMPLES {
        let p = pv_atomic(op, DType::I32, operand.into(), &[4], &[2], &[c(1)]);
        let gpu = gpu_agrees(&p, &[HostBuffer::from_elements(&before)], EXACT);
        assert_eq!(gpu[0].to_vec::<i32>(), after, "{op:?}");
        let p = pv_atomic(op, DType::I32, operand.into(), &[4, 3], &[2, 2], &[c(0), c(1)]);
        let gpu = gpu_agrees(&p, &[HostBuffer::from_elements(&before_2d)], EXACT);
        assert_eq!(gpu[0].to_vec::<i32>(), after_2d, "{op:?} masked");
    }
}

// ---- Elementwise ops, casts and paddings ----

/// `out = f(x, z)` over a ragged [70, 45] tensor in [32, 32] tiles on a
/// [3, 2] grid, both loads and the store masked. f16/bf16 operands reach
/// `f` already cast to f32, and its result is cast back.
fn ewise(
    name: &str,
    d: DType,
    out: DType,
    f: impl FnOnce(&mut Builder, ValueId, ValueId) -> ValueId,
) -> Result<Program, Error> {
    let mut b = Builder::new(name, &[3, 2]);
    let n = 70 * 45;
    let (x, z) = (b.param("x", d, n, Access::Read), b.param("z", d, n, Access::Read));
    let y = b.param("y", out, n, Access::Write);
    let [vx, vz, vy] = [x, z, y].map(|p| b.view_contiguous(p, &[70, 45], &[32, 32], Padding::Zero));
    let idx = [g(0), g(1)];
    let (mut a, mut e) = (b.load(vx, &idx, true), b.load(vz, &idx, true));
    let half = d.compute_type() != d;
    if half {
        (a, e) = (b.cast(a, DType::F32), b.cast(e, DType::F32));
    }
    let mut r = f(&mut b, a, e);
    if half && out != DType::Bool {
        r = b.cast(r, out);
    }
    b.store(vy, &idx, r, true);
    b.finish()
}

/// Inputs of [`ewise`]: `x` in `ra`, `z` in `rb`, with the float specials
/// paired as (NaN, 1), (inf, -inf), (-inf, inf), (-0, 0), (0, -0), (1, NaN).
fn ewise_inputs(d: DType, out: DType, ra: (f64, f64), rb: (f64, f64), seed: u64) -> Vec<HostBuffer> {
    let n = 70 * 45;
    let x = random(d, n, ra, true, seed);
    let mut z = random(d, n, rb, true, seed + 1);
    if d.is_float() {
        for (i, v) in [1.0, f64::NEG_INFINITY, f64::INFINITY, 0.0, -0.0, f64::NAN]
            .into_iter()
            .enumerate()
        {
            z.set(i, Scalar::Float(v, DType::F64).cast(d));
        }
    }
    vec![x, z, HostBuffer::zeros(out, n)]
}

const DTYPES: [DType; 9] = DType::ALL;

/// Whether `d` is an f16 or bf16 computed in f32.
fn is_half(d: DType) -> bool {
    d.compute_type() != d
}

/// The input range of each dtype's integers: values that keep
/// multiplications within range where the dtype is unsigned and small.
fn int_range(d: DType) -> (f64, f64) {
    match d {
        DType::U8 => (1.0, 256.0),
        DType::U32 => (1.0, 1e6),
        _ => (-1e6, 1e6),
    }
}

/// Unary ops: `(op, f32 input range, f32 tolerance)`. The tolerance is the
/// documented GPU error plus about one ulp for the CPU's own.
#[rustfmt::skip]
const UNARY: [(UnaryOp, (f64, f64), Tol); 22] = [
    (UnaryOp::Neg, (-1e3, 1e3), EXACT),
    (UnaryOp::Abs, (-1e3, 1e3), EXACT),
    // 3: on the models of `ex2` at its documented extremes the GPU's `exp`
    // and the CPU executor's branch-free one are up to 3 apart (near the
    // subnormal range; `math::tests` checks every table entry so).
    (UnaryOp::Exp, (-103.0, 88.7), ulps(3)),
    (UnaryOp::Exp2, (-149.0, 127.9), ulps(2)),
    (UnaryOp::Log, (-1.0, 3e38), ulps(2)),
    (UnaryOp::Log2, (-1.0, 3e38), ulps(3)),
    (UnaryOp::Sqrt, (-1.0, 1e30), EXACT),
    (UnaryOp::Rsqrt, (-1.0, 1e30), EXACT),
    (UnaryOp::Recip, (-1e30, 1e30), EXACT),
    (UnaryOp::Sin, (-1e4, 1e4), ulps(3)),
    (UnaryOp::Cos, (-1e4, 1e4), ulps(3)),
    (UnaryOp::Tanh, (-10.0, 10.0), ulps(3)),
    (UnaryOp::Sigmoid, (-80.0, 80.0), ulps(6)),
    (UnaryOp::Relu, (-1e3, 1e3), EXACT),
    // The CPU's f32 formula 0.5 x (1 + tanh u) cancels for x < 0: it is
    // the less accurate side there, by up to ~1.5e-7 absolute.
    (UnaryOp::GeluTanh, (-5.0, 10.0), Tol { ulps: 41, abs: 4e-7, rel: 0.0 }),
    (UnaryOp::GeluErf, (-5.0, 10.0), ulps(30)),
    (UnaryOp::Silu, (-80.0, 80.0), ulps(7)),
    (UnaryOp::Floor, (-1e3, 1e3), EXACT),
    (UnaryOp::Ceil, (-1e3, 1e3), EXACT),
    (UnaryOp::Round, (-1e3, 1e3), EXACT),
    (UnaryOp::Sign, (-1e3, 1e3), EXACT),
    (UnaryOp::Not, (-1e3, 1e3), EXACT),
];

/// The tolerance of an f64 unary op against the CPU executor: the
/// documented f64 error (`ptx_gen`'s table, in ulps of the standard
/// library's result) plus one ulp for the CPU's own. The CPU's
/// `0.5 x (1 + tanh u)` loses digits for x < 0: there it is the less
/// accurate side, by up to about `|x| · 2^-53` absolute.
fn f64_unary_tol(op: UnaryOp) -> Tol {
    match op {
        UnaryOp::Exp | UnaryOp::Exp2 | UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sin | UnaryOp::Cos => ulps(2),
        UnaryOp::Tanh | UnaryOp::Sigmoid => ulps(4),
        UnaryOp::Silu => ulps(5),
        UnaryOp::GeluTanh => Tol {
            ulps: 5,
            abs: 2e-15,
            rel: 0.0,
        },
        UnaryOp::GeluErf => ulps(8),
        _ => panic!("{op:?} has no f64 tolerance"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_unary_op_for_every_dtype() {
    let cases = UNARY.into_iter().enumerate().flat_map(|(k, (op, range, tol))| {
        DTYPES.into_iter().filter_map(move |d| {
            let p = ewise(&format!("{op:?}_{d}"), d, d, |b, a, _| b.unary(op, a)).ok()?;
            let range = if d.is_float() { range } else { int_range(d) };
            let tol = match (tol == EXACT, is_half(d)) {
                (true, _) => EXACT,
                // One ulp of the 16-bit type, keeping an absolute bound
                // that covers the CPU's own error.
                (false, true) => Tol { ulps: 1, ..tol },
                (false, false) if d == DType::F64 => f64_unary_tol(op),
                (false, false) => tol,
            };
            Some((p, ewise_inputs(d, d, range, range, 10 + k as u64), tol))
        })
    });
    run_cases("unary", cases, |_| false);
}

/// f32 unary ops in [`MathMode::Fast`]: `(op, input range, tolerance)`.
/// The hardware approximations are good to about 2^-22 relative
/// (`ex2`, `lg2`, `rcp`, `rsqrt`, `sqrt`) or 2^-21 absolute (`sin`, `cos`
/// on [-π, π]); `exp` and `log` add the rounding of their scaling by
/// log2 e or ln 2; `tanh.approx` and what is built on it are good to about
/// 2^-11. Random inputs only: the fast forms flush subnormals.
#[rustfmt::skip]
const FAST: [(UnaryOp, (f64, f64), Tol); 12] = [
    (UnaryOp::Exp, (-20.0, 20.0), rel_abs(1e-5, 0.0)),
    (UnaryOp::Exp2, (-20.0, 20.0), rel_abs(1e-5, 0.0)),
    (UnaryOp::Log, (1e-3, 1e3), rel_abs(1e-5, 1e-6)),
    (UnaryOp::Log2, (1e-3, 1e3), rel_abs(1e-5, 1e-6)),
    (UnaryOp::Sqrt, (1e-3, 1e3), rel_abs(1e-5, 0.0)),
    (UnaryOp::Rsqrt, (1e-3, 1e3), rel_abs(1e-5, 0.0)),
    (UnaryOp::Recip, (1e-3, 1e3), rel_abs(1e-5, 0.0)),
    (UnaryOp::Sin, (-PI, PI), rel_abs(0.0, 2e-6)),
    (UnaryOp::Cos, (-PI, PI), rel_abs(0.0, 2e-6)),
    (UnaryOp::Tanh, (-10.0, 10.0), rel_abs(2e-3, 1e-3)),
    (UnaryOp::Sigmoid, (-20.0, 20.0), rel_abs(2e-3, 1e-3)),
    (UnaryOp::Silu, (-20.0, 20.0), rel_abs(2e-3, 1e-3)),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn fast_math_unary_ops() {
    let cases = FAST.into_iter().enumerate().map(|(k, (op, range, tol))| {
        let p = ewise(&format!("fast_{op:?}"), DType::F32, DType::F32, |b, a, _| {
            b.math(MathMode::Fast);
            b.unary(op, a)
        })
        .unwrap();
        let n = 70 * 45;
        let inputs = vec![
            random(DType::F32, n, range, false, 200 + k as u64),
            HostBuffer::zeros(DType::F32, n),
            HostBuffer::zeros(DType::F32, n),
        ];
        (p, inputs, tol)
    });
    run_cases("fast math", cases, |_| false);
}

/// Binary ops: `(op, range of x, range of z, f32 tolerance)`.
type BinaryCase = (BinaryOp, (f64, f64), (f64, f64), Tol);

#[rustfmt::skip]
const BINARY: [BinaryCase; 16] = [
    (BinaryOp::Add, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Sub, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Mul, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Div, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Pow, (0.01, 10.0), (-8.0, 8.0), ulps(34)),
    (BinaryOp::Maximum, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Minimum, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Eq, (-3.0, 3.0), (-3.0, 3.0), EXACT),
    (BinaryOp::Ne, (-3.0, 3.0), (-3.0, 3.0), EXACT),
    (BinaryOp::Lt, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Le, (-3.0, 3.0), (-3.0, 3.0), EXACT),
    (BinaryOp::Gt, (-1e3, 1e3), (-1e3, 1e3), EXACT),
    (BinaryOp::Ge, (-3.0, 3.0), (-3.0, 3.0), EXACT),
    (BinaryOp::BitAnd, (-1e6, 1e6), (-1e6, 1e6), EXACT),
    (BinaryOp::BitOr, (-1e6, 1e6), (-1e6, 1e6), EXACT),
    (BinaryOp::BitXor, (-1e6, 1e6), (-1e6, 1e6), EXACT),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_binary_op_for_every_dtype() {
    let cases = BINARY.into_iter().enumerate().flat_map(|(k, (op, ra, rb, tol))| {
        DTYPES.into_iter().filter_map(move |d| {
            let out = if op.is_comparison() { DType::Bool } else { d };
            let p = ewise(&format!("{op:?}_{d}"), d, out, |b, a, e| b.binary(op, a, e)).ok()?;
            let (ra, rb) = if d.is_float() {
                (ra, rb)
            } else {
                (int_range(d), int_range(d))
            };
            let tol = if tol != EXACT && is_half(d) {
                Tol { ulps: 1, ..tol }
            } else if op == BinaryOp::Pow && d == DType::F64 {
                // f64 pow: 2 ulp (documented) plus one for the CPU's `powf`.
                ulps(3)
            } else {
                tol
            };
            Some((p, ewise_inputs(d, out, ra, rb, 100 + k as u64), tol))
        })
    });
    run_cases("binary", cases, |_| false);
}

/// Values every cast sees besides random ones: out-of-range, fractional,
/// f16 overflow and underflow, and large integers.
const CAST_EDGES: [f64; 10] = [1e10, -1e10, 3e9, -3e9, 255.5, -1.5, 2.5, 131008.0, 1e-8, 16777217.0];

/// A cast of 300 elements in masked tiles of 128.
fn cast_program(from: DType, to: DType) -> Program {
    let mut b = Builder::new(format!("cast_{from}_{to}"), &[3]);
    let x = b.param("x", from, 300, Access::Read);
    let y = b.param("y", to, 300, Access::Write);
    let vx = b.view_contiguous(x, &[300], &[128], Padding::Zero);
    let vy = b.view_contiguous(y, &[300], &[128], Padding::Zero);
    let a = b.load(vx, &[g(0)], true);
    let r = b.cast(a, to);
    b.store(vy, &[g(0)], r, true);
    b.finish().unwrap()
}

/// Cast inputs: the specials and [`CAST_EDGES`] first, then random values.
fn cast_inputs(from: DType) -> HostBuffer {
    let range = if from.is_float() {
        (-300.0, 300.0)
    } else {
        int_range(from)
    };
    let mut xs = random(from, 300, range, true, 7);
    for (i, v) in CAST_EDGES.into_iter().enumerate() {
        let v = if from == DType::I64 { v * 1e5 } else { v };
        xs.set(harness::SPECIALS.len() + i, Scalar::Float(v, DType::F64).cast(from));
    }
    xs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_cast_between_dtypes() {
    let cases = DTYPES.into_iter().flat_map(|from| {
        DTYPES.into_iter().map(move |to| {
            (
                cast_program(from, to),
                vec![cast_inputs(from), HostBuffer::zeros(to, 300)],
                EXACT,
            )
        })
    });
    run_cases("cast", cases, |_| false);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn float_to_int_casts_follow_scalar_cast() {
    let mut failures = Vec::new();
    for from in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for to in [DType::U8, DType::I32, DType::U32, DType::I64, DType::Bool] {
            let xs = cast_inputs(from);
            let want = harness::filled(to, 300, |i| xs.get(i).cast(to));
            let gpu = harness::run_gpu(&cast_program(from, to), &[xs, HostBuffer::zeros(to, 300)]).unwrap();
            if let Err(e) = harness::compare(&format!("cast {from} to {to}"), &want, &gpu[1], EXACT) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Masked loads of a 100-element buffer in tiles of 64, each padding mode,
/// stored whole into 128 elements.
#[rustfmt::skip]
const PADDINGS: [(DType, Padding); 22] = [
    (DType::F32, Padding::Zero), (DType::F32, Padding::NegZero), (DType::F32, Padding::Nan),
    (DType::F32, Padding::PosInf), (DType::F32, Padding::NegInf),
    (DType::F64, Padding::Zero), (DType::F64, Padding::NegZero), (DType::F64, Padding::Nan),
    (DType::F64, Padding::PosInf), (DType::F64, Padding::NegInf),
    (DType::F16, Padding::Zero), (DType::F16, Padding::NegZero), (DType::F16, Padding::Nan),
    (DType::F16, Padding::PosInf), (DType::F16, Padding::NegInf),
    (DType::BF16, Padding::Zero), (DType::BF16, Padding::NegZero), (DType::BF16, Padding::Nan),
    (DType::BF16, Padding::PosInf), (DType::BF16, Padding::NegInf),
    (DType::I32, Padding::Zero), (DType::U8, Padding::Zero),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn each_padding_mode() {
    let cases = PADDINGS.into_iter().map(|(d, pad)| {
        let mut b = Builder::new(format!("pad_{d}_{pad}"), &[2]);
        let x = b.param("x", d, 100, Access::Read);
        let y = b.param("y", d, 128, Access::Write);
        let vx = b.view_contiguous(x, &[100], &[64], pad);
        let vy = b.view_contiguous(y, &[128], &[64], Padding::Zero);
        let a = b.load(vx, &[g(0)], true);
        b.store(vy, &[g(0)], a, false);
        let range = if d.is_float() { (-5.0, 5.0) } else { int_range(d) };
        let inputs = vec![random(d, 100, range, true, 3), random(d, 128, range, false, 4)];
        (b.finish().unwrap(), inputs, EXACT)
    });
    run_cases("padding", cases, |_| false);
}

#[path = "gpu_kernels/programs.rs"]
mod programs;

// ---- The last point ----

/// Column sums of `x: f32[rows, cols]` as a split reduction: grid
/// [parts, column tiles of 32], each point reducing 8 rows of its column
/// tile into the partials; the last point of each column tile to finish sums
/// that tile's partials (masked: `parts` is not a power of two).
fn last_point_column_sums(parts: u64, col_tiles: u64) -> Program {
    let (rows, cols) = (parts * 8, col_tiles * 32);
    let mut b = Builder::new("last_point_column_sums", &[parts, col_tiles]);
    let x = b.param("x", DType::F32, rows * cols, Access::Read);
    let partials = b.param("partials", DType::F32, parts * cols, Access::ReadWrite);
    let out = b.param("out", DType::F32, cols, Access::Write);
    let counter = b.param("counter", DType::U32, col_tiles, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[rows, cols], &[8, 32], Padding::Zero);
    let vp = b.view_contiguous(partials, &[parts, cols], &[1, 32], Padding::Zero);
    let vall = b.view_contiguous(
        partials,
        &[parts, cols],
        &[parts.next_power_of_two() as u32, 32],
        Padding::Zero,
    );
    let vout = b.view_contiguous(out, &[1, cols], &[1, 32], Padding::Zero);
    let t = b.load(vx, &[g(0), g(1)], false);
    let part = b.reduce(tilefuse::kernels::ir::TileReduce::Sum, t, 0);
    b.store(vp, &[g(0), g(1)], part, false);
    b.last_point(0, counter, |b| {
        let all = b.load(vall, &[IndexExpr::constant(0), g(1)], true);
        let total = b.reduce(tilefuse::kernels::ir::TileReduce::Sum, all, 0);
        b.store(vout, &[IndexExpr::constant(0), g(1)], total, false);
    });
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn last_point_combines_once_per_group_and_leaves_the_counters_at_zero() {
    let (parts, col_tiles) = (100, 7);
    let p = last_point_column_sums(parts, col_tiles);
    let x = random(
        DType::F32,
        (parts * 8 * col_tiles * 32) as usize,
        (-2.0, 2.0),
        false,
        41,
    );
    let zeros = |d, n: u64| HostBuffer::zeros(d, n as usize);
    let inputs = vec![
        x,
        zeros(DType::F32, parts * col_tiles * 32),
        zeros(DType::F32, col_tiles * 32),
        zeros(DType::U32, col_tiles),
    ];
    // Against the CPU executor: the in-tile sums may add in another order.
    let first = gpu_agrees(&p, &inputs, rel_abs(1e-5, 1e-4));
    assert_eq!(
        first[3].to_vec::<u32>(),
        vec![0; col_tiles as usize],
        "counters after one launch"
    );
    // Many launches on the same buffers: the counters return to zero each
    // time, so every launch combines once per column tile, in the same order.
    let (_guard, device) = harness::device();
    let compiler = harness::compiler();
    let stream = device.stream(0);
    let buffers: Vec<_> = inputs.iter().map(|h| device.from_host_on(h, stream).unwrap()).collect();
    let args: Vec<_> = buffers.iter().collect();
    for run in 0..50 {
        tilefuse::device::cuda::run_program(&compiler, &p, &args, stream).unwrap();
        let out = buffers[2].to_host_on(stream).unwrap();
        assert_eq!(out.bytes(), first[2].bytes(), "launch {run} differs");
        let counters = buffers[3].to_host_on(stream).unwrap();
        assert_eq!(counters.to_vec::<u32>(), vec![0; col_tiles as usize], "launch {run}");
    }
}

// ---- Division by a value every thread holds ----

/// `x / max(row of d)`: the divisor is a single-output reduction, which
/// `ptx_gen` divides by through an f64 reciprocal instead of `div.rn.f32`
/// per element. It must equal the CPU's correctly rounded division bit for
/// bit, for divisors and dividends across the whole f32 range, specials
/// included.
#[test]
#[ignore = "needs a CUDA GPU"]
fn division_by_a_reduced_value_is_correctly_rounded() {
    use tilefuse::kernels::ir::TileReduce;
    let divisors: Vec<f32> = [
        1.0,
        3.0,
        -7.0,
        0.1,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        -f32::MAX,
        1e30,
        1e-30,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ]
    .into_iter()
    .chain(random(DType::F32, 48, (-1e6, 1e6), false, 7).to_vec::<f32>())
    .collect();
    let (rows, cols) = (divisors.len() as u64, 4096u64);
    let mut b = Builder::new("div_by_row_max", &[rows]);
    let px = b.param("x", DType::F32, rows * cols, Access::Read);
    let pd = b.param("d", DType::F32, rows * cols, Access::Read);
    let py = b.param("y", DType::F32, rows * cols, Access::Write);
    let shape = [rows, cols];
    let tile = [1, cols as u32];
    let vx = b.view_contiguous(px, &shape, &tile, Padding::Zero);
    let vd = b.view_contiguous(pd, &shape, &tile, Padding::Zero);
    let vy = b.view_contiguous(py, &shape, &tile, Padding::Zero);
    let idx = [g(0), IndexExpr::constant(0)];
    let x = b.load(vx, &idx, false);
    let d = b.load(vd, &idx, false);
    let m = b.reduce(TileReduce::Max, d, 1);
    let m = b.broadcast(m, &tile);
    let q = b.binary(BinaryOp::Div, x, m);
    b.store(vy, &idx, q, false);
    let program = b.finish().unwrap();
    // Each row of `d` holds its divisor in every element (its max is the
    // divisor); `x` mixes random values of every magnitude with specials.
    let d: Vec<f32> = divisors
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, cols as usize))
        .collect();
    let mut x = random(DType::F32, (rows * cols) as usize, (-1e3, 1e3), true, 11).to_vec::<f32>();
    let mut bits = 0x2545_f491u32;
    for v in x.iter_mut().step_by(3) {
        bits ^= bits << 13;
        bits ^= bits >> 17;
        bits ^= bits << 5;
        *v = f32::from_bits(bits);
    }
    let inputs = [
        HostBuffer::from_elements(&x),
        HostBuffer::from_elements(&d),
        HostBuffer::zeros(DType::F32, (rows * cols) as usize),
    ];
    gpu_agrees(&program, &inputs, EXACT);
}
