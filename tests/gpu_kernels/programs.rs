//! Whole programs: ragged shapes and grids, reductions with loops and
//! accumulators, softmax rows, column sums with atomics, initial fills,
//! large grids and a tensor past 2^31 elements; and the runtime's own
//! behaviour (caching, argument errors).

use super::harness::{self, check_program, compiler, device, random, rel_abs, run_cases, Outcome, Tol, EXACT};
use super::{c, g, gpu_agrees};
use std::sync::Arc;
use tilefuse::device::cuda::run_program;
use tilefuse::graph::{BinaryOp, UnaryOp};
use tilefuse::kernels::ir::{Access, AtomicOp, Builder, IndexExpr, Program, TileReduce, ValueType};
use tilefuse::storage::HostBuffer;
use tilefuse::tile::{Padding, ThreadScope};
use tilefuse::{DType, Error, Scalar};

/// Ragged shapes with prime extents: `(extents, tile)`; the grid covers
/// every partition, one grid axis per tensor axis.
#[rustfmt::skip]
const RAGGED: [(&[u64], &[u32]); 7] = [
    (&[97], &[32]),
    (&[1009], &[256]),
    (&[13, 17], &[4, 8]),
    (&[101, 3], &[16, 4]),
    (&[31, 7, 5], &[8, 4, 2]),
    (&[3, 5, 7, 11], &[2, 2, 4, 4]),
    (&[1, 1], &[1, 1]),
];

/// `y = x * z + x` over a ragged shape, all accesses masked.
fn ragged(extents: &[u64], tile: &[u32], d: DType) -> Program {
    let grid: Vec<u64> = extents.iter().zip(tile).map(|(&e, &t)| e.div_ceil(t as u64)).collect();
    let n: u64 = extents.iter().product();
    let mut b = Builder::new(format!("ragged_{d}_{extents:?}"), &grid);
    let params =
        ["x", "z", "y"].map(|name| b.param(name, d, n, if name == "y" { Access::Write } else { Access::Read }));
    let [vx, vz, vy] = params.map(|p| b.view_contiguous(p, extents, tile, Padding::Zero));
    let idx: Vec<IndexExpr> = (0..extents.len() as u8).map(g).collect();
    let (x, z) = (b.load(vx, &idx, true), b.load(vz, &idx, true));
    let wide = d.compute_type();
    let (x, z) = if wide != d {
        (b.cast(x, wide), b.cast(z, wide))
    } else {
        (x, z)
    };
    let xz = b.binary(BinaryOp::Mul, x, z);
    let r = b.binary(BinaryOp::Add, xz, x);
    let r = if wide != d { b.cast(r, d) } else { r };
    b.store(vy, &idx, r, true);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ragged_prime_shapes_and_multi_axis_grids() {
    let cases = RAGGED.into_iter().flat_map(|(extents, tile)| {
        [DType::F32, DType::I32, DType::F16, DType::BF16, DType::U8].map(|d| {
            let n = extents.iter().product::<u64>() as usize;
            let range = if d.is_float() { (-4.0, 4.0) } else { (-100.0, 100.0) };
            let inputs = vec![
                random(d, n, range, false, 1),
                random(d, n, range, false, 2),
                random(d, n, range, false, 3),
            ];
            (ragged(extents, tile, d), inputs, EXACT)
        })
    });
    run_cases("ragged", cases, |_| false);
}

/// Row reductions: `(dtype, reduction, rows, columns, tile columns, input
/// range, tolerance)`. Each grid point is one row: a loop over column
/// tiles (the last one ragged) selects the identity outside the row and
/// folds into an accumulator, then reduces it in the tile.
type RowReduction = (DType, TileReduce, u64, u64, u32, (f64, f64), Tol);

#[rustfmt::skip]
const ROW_REDUCTIONS: [RowReduction; 10] = [
    (DType::F32, TileReduce::Sum, 37, 1009, 256, (-1.0, 1.0), rel_abs(0.0, 1e-4)),
    (DType::F32, TileReduce::Max, 37, 1009, 256, (-1e3, 1e3), EXACT),
    (DType::F32, TileReduce::Min, 37, 1009, 256, (-1e3, 1e3), EXACT),
    (DType::F32, TileReduce::Prod, 5, 509, 128, (0.99, 1.01), rel_abs(1e-5, 0.0)),
    (DType::F64, TileReduce::Sum, 17, 4099, 512, (-1.0, 1.0), rel_abs(0.0, 1e-12)),
    (DType::I32, TileReduce::Sum, 37, 1009, 256, (-1e6, 1e6), EXACT),
    (DType::I32, TileReduce::Max, 37, 1009, 256, (-1e6, -1.0), EXACT),
    (DType::I64, TileReduce::Min, 9, 333, 64, (1.0, 1e12), EXACT),
    (DType::U32, TileReduce::Max, 9, 333, 64, (1.0, 1e9), EXACT),
    (DType::F16, TileReduce::Sum, 11, 2003, 1024, (-1.0, 1.0), rel_abs(0.0, 1e-4)),
];

/// The identity of `op` for `d`, and the accumulator update it needs.
fn identity(op: TileReduce, d: DType) -> (Scalar, BinaryOp) {
    let big = |sign: f64| match d {
        d if d.is_float() => Scalar::Float(sign * f64::INFINITY, d),
        DType::I32 => Scalar::Int(if sign > 0.0 { i32::MAX as i128 } else { i32::MIN as i128 }, d),
        DType::I64 => Scalar::Int(if sign > 0.0 { i64::MAX as i128 } else { i64::MIN as i128 }, d),
        DType::U32 => Scalar::Int(if sign > 0.0 { u32::MAX as i128 } else { 0 }, d),
        _ => Scalar::Int(if sign > 0.0 { 255 } else { 0 }, d),
    };
    match op {
        TileReduce::Sum => (Scalar::Int(0, DType::I64).cast(d), BinaryOp::Add),
        TileReduce::Prod => (Scalar::Int(1, DType::I64).cast(d), BinaryOp::Mul),
        TileReduce::Max => (big(-1.0), BinaryOp::Maximum),
        TileReduce::Min => (big(1.0), BinaryOp::Minimum),
        TileReduce::LogAddExp => unreachable!("logaddexp combines scans only"),
    }
}

fn row_reduction(d: DType, op: TileReduce, rows: u64, cols: u64, tc: u32) -> Program {
    let acc_d = d.compute_type();
    let mut b = Builder::new(format!("rows_{op:?}_{d}"), &[rows]);
    let x = b.param("x", d, rows * cols, Access::Read);
    let y = b.param("y", acc_d, rows, Access::Write);
    let vx = b.view_contiguous(x, &[rows, cols], &[1, tc], Padding::Zero);
    let vy = b.view_contiguous(y, &[rows, 1], &[1, 1], Padding::Zero);
    let (init, update) = identity(op, acc_d);
    let acc = b.acc(ValueType::new(acc_d, &[1, tc]), init);
    b.loop_(cols.div_ceil(tc as u64), |b, i| {
        let idx = [g(0), IndexExpr::loop_var(i)];
        let t = b.load(vx, &idx, true);
        let t = if acc_d != d { b.cast(t, acc_d) } else { t };
        let inside = b.in_bounds(vx, &idx);
        let id = b.constant(init, acc_d, &[1, tc]);
        let t = b.select(inside, t, id);
        b.acc_update(acc, update, t);
    });
    let total = b.acc_read(acc);
    let r = b.reduce(op, total, 1);
    b.store(vy, &[g(0), c(0)], r, false);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn row_reductions_with_loops_and_accumulators() {
    let cases = ROW_REDUCTIONS
        .into_iter()
        .enumerate()
        .map(|(k, (d, op, rows, cols, tc, range, tol))| {
            let n = (rows * cols) as usize;
            let inputs = vec![
                random(d, n, range, d.is_float(), 20 + k as u64),
                HostBuffer::zeros(d.compute_type(), rows as usize),
            ];
            (row_reduction(d, op, rows, cols, tc), inputs, tol)
        });
    run_cases("row reductions", cases, |_| false);
}

/// Softmax of each row of `rows` × `cols` f32 in one tile of `tile` columns.
fn softmax(rows: u64, cols: u64, tile: u32) -> Program {
    let mut b = Builder::new(format!("softmax_{cols}"), &[rows]);
    let x = b.param("x", DType::F32, rows * cols, Access::Read);
    let y = b.param("y", DType::F32, rows * cols, Access::Write);
    let vx = b.view_contiguous(x, &[rows, cols], &[1, tile], Padding::NegInf);
    let vy = b.view_contiguous(y, &[rows, cols], &[1, tile], Padding::Zero);
    let idx = [g(0), c(0)];
    let a = b.load(vx, &idx, true);
    let m = b.reduce(TileReduce::Max, a, 1);
    let m = b.broadcast(m, &[1, tile]);
    let d = b.binary(BinaryOp::Sub, a, m);
    let e = b.unary(tilefuse::graph::UnaryOp::Exp, d);
    let s = b.reduce(TileReduce::Sum, e, 1);
    let s = b.broadcast(s, &[1, tile]);
    let r = b.binary(BinaryOp::Div, e, s);
    b.store(vy, &idx, r, true);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn softmax_rows_of_4096() {
    // Exp differs by up to 2 ulp and the sums by their order: 1e-5 relative.
    let cases = [(8u64, 4096u64, 4096u32), (5, 4093, 4096), (3, 1000, 1024)].map(|(rows, cols, tile)| {
        let n = (rows * cols) as usize;
        let inputs = vec![
            random(DType::F32, n, (-10.0, 10.0), false, 5),
            HostBuffer::zeros(DType::F32, n),
        ];
        (softmax(rows, cols, tile), inputs, rel_abs(1e-5, 0.0))
    });
    run_cases("softmax", cases, |_| false);
}

/// `y = x / max(d)` per row of `cols` f32, or with `op` `y = x · op(max(d))`:
/// the row value is one value the whole block holds, which the generator
/// divides by (or takes the reciprocal of) through an f64 reciprocal (see
/// `div_by_uniform_f32`).
fn divide_by_row_max(rows: u64, cols: u64, op: Option<UnaryOp>) -> Program {
    let mut b = Builder::new(format!("divide_by_row_max_{cols}_{op:?}"), &[rows]);
    let x = b.param("x", DType::F32, rows * cols, Access::Read);
    let d = b.param("d", DType::F32, rows * cols, Access::Read);
    let y = b.param("y", DType::F32, rows * cols, Access::Write);
    let tile = [1, cols as u32];
    let vx = b.view_contiguous(x, &[rows, cols], &tile, Padding::Zero);
    let vd = b.view_contiguous(d, &[rows, cols], &tile, Padding::NegInf);
    let vy = b.view_contiguous(y, &[rows, cols], &tile, Padding::Zero);
    let idx = [g(0), c(0)];
    let a = b.load(vx, &idx, false);
    let m = b.load(vd, &idx, false);
    let s = b.reduce(TileReduce::Max, m, 1);
    let q = match op {
        None => {
            let s = b.broadcast(s, &tile);
            b.binary(BinaryOp::Div, a, s)
        }
        Some(op) => {
            let r = b.unary(op, s);
            let r = b.broadcast(r, &tile);
            b.binary(BinaryOp::Mul, a, r)
        }
    };
    b.store(vy, &idx, q, false);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn division_and_reciprocals_of_a_row_value_are_correctly_rounded() {
    // Every finite f32 bit pattern is as likely for x and for the divisor
    // (so all exponents, subnormals included, and both signs), with the
    // special values mixed in; each row's divisor is its first element of
    // `d`, the rest being -inf. The CPU executor divides in f32 (correctly
    // rounded): the GPU must agree bit for bit, NaNs aside.
    let (rows, cols) = (8192u64, 256u64);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
    ];
    let mut any = |k: u64| -> f32 {
        let r = next();
        if r % 97 == 0 {
            return specials[(r >> 8) as usize % specials.len()];
        }
        let v = f32::from_bits((r >> 16) as u32 ^ (k as u32).rotate_left(7));
        if v.is_finite() {
            v
        } else {
            v.signum() * 1.5
        }
    };
    let n = (rows * cols) as usize;
    let xs: Vec<f32> = (0..n as u64).map(&mut any).collect();
    let mut ds = vec![f32::NEG_INFINITY; n];
    for r in 0..rows as usize {
        ds[r * cols as usize] = if r < specials.len() { specials[r] } else { any(r as u64) };
    }
    let inputs = [
        HostBuffer::from_elements(&xs),
        HostBuffer::from_elements(&ds),
        HostBuffer::zeros(DType::F32, n),
    ];
    // x / s, x · (1/s) and x · (1/sqrt(s)): each rounding as on the CPU.
    for op in [None, Some(UnaryOp::Recip), Some(UnaryOp::Rsqrt)] {
        let program = divide_by_row_max(rows, cols, op);
        gpu_agrees(&program, &inputs, EXACT);
        // The quick tier takes every reciprocal of the row value in f64
        // (`run_gpu` checked it against the tuned module bit for bit).
        let target = compiler().target();
        let text = tilefuse::kernels::ptx_gen::generate_quick(&program, &target)
            .unwrap()
            .text;
        assert!(
            text.contains("rcp.approx.ftz.f64"),
            "{op:?}: the uniform path was not taken:\n{text}"
        );
        assert!(!text.contains("rcp.rn"), "{op:?}:\n{text}");
    }
}

/// Column reductions across grid points: `(op, dtype, input range, NaNs in
/// the input, tolerance)`. A (301, 67) tensor in (32, 67) tiles; each grid
/// point reduces its tile over the rows and combines into the output with
/// the atomic; the output starts at the op's identity by an initial fill.
type ColumnAtomic = (AtomicOp, DType, (f64, f64), bool, Tol);

#[rustfmt::skip]
const COLUMN_ATOMICS: [ColumnAtomic; 19] = [
    (AtomicOp::Add, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Sub, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::And, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Or, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Xor, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Max, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Min, DType::I32, (-1e6, 1e6), false, EXACT),
    (AtomicOp::Add, DType::U32, (1.0, 1e6), false, EXACT),
    (AtomicOp::Max, DType::I64, (-1e12, 1e12), false, EXACT),
    (AtomicOp::Add, DType::I64, (-1e12, 1e12), false, EXACT),
    (AtomicOp::Add, DType::F32, (-1.0, 1.0), false, rel_abs(0.0, 1e-4)),
    (AtomicOp::Sub, DType::F32, (-1.0, 1.0), false, rel_abs(0.0, 1e-4)),
    (AtomicOp::Max, DType::F32, (-100.0, -1.0), false, EXACT),
    (AtomicOp::Min, DType::F32, (-100.0, 100.0), false, EXACT),
    (AtomicOp::Max, DType::F32, (-100.0, 100.0), true, EXACT),
    (AtomicOp::Min, DType::F32, (-100.0, -1.0), true, EXACT),
    (AtomicOp::Add, DType::F64, (-1.0, 1.0), false, rel_abs(0.0, 1e-12)),
    // Ten partial sums of about 6 in magnitude, each rounded to the dtype.
    (AtomicOp::Add, DType::F16, (-1.0, 1.0), false, rel_abs(0.0, 0.05)),
    (AtomicOp::Add, DType::BF16, (-1.0, 1.0), false, rel_abs(0.0, 0.4)),
];

fn column_atomic(op: AtomicOp, d: DType) -> Program {
    let (m, n) = (301u64, 67u32);
    let wide = d.compute_type();
    let reduce = match op {
        AtomicOp::Max => TileReduce::Max,
        AtomicOp::Min => TileReduce::Min,
        _ => TileReduce::Sum,
    };
    let (init, _) = match op {
        AtomicOp::And => (Scalar::Int(-1, DType::I64).cast(d), BinaryOp::BitAnd),
        _ => identity(reduce, d),
    };
    let mut b = Builder::new(format!("colsum_{op:?}_{d}"), &[m.div_ceil(32)]);
    let x = b.param("x", d, m * n as u64, Access::Read);
    let y = b.param_init("y", d, n as u64, Access::ReadWrite, init);
    let vx = b.view_contiguous(x, &[m, n as u64], &[32, n], Padding::Zero);
    let vy = b.view_contiguous(y, &[1, n as u64], &[1, n], Padding::Zero);
    let idx = [g(0), c(0)];
    let a = b.load(vx, &idx, true);
    let a = if wide != d { b.cast(a, wide) } else { a };
    let inside = b.in_bounds(vx, &idx);
    let id = b.constant(identity(reduce, wide).0, wide, &[32, n]);
    let a = b.select(inside, a, id);
    let r = b.reduce(reduce, a, 0);
    let r = if wide != d { b.cast(r, d) } else { r };
    b.atomic(op, vy, &[c(0), c(0)], r, false, ThreadScope::Device);
    b.finish().unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn column_reductions_with_atomics() {
    let cases = COLUMN_ATOMICS
        .into_iter()
        .enumerate()
        .map(|(k, (op, d, range, nans, tol))| {
            let mut x = random(d, 301 * 67, range, false, 40 + k as u64);
            if nans {
                for at in [5, 67 * 100 + 9, 67 * 300 + 66] {
                    x.set(at, Scalar::Float(f64::NAN, d));
                }
            }
            (column_atomic(op, d), vec![x, random(d, 67, range, false, 1)], tol)
        });
    run_cases("column atomics", cases, |_| false);
}

/// An initial fill of each dtype with a value whose bytes differ: the
/// program stores its input over the first 60 of 100 elements, so the
/// last 40 hold the fill.
#[rustfmt::skip]
const FILLS: [(DType, Scalar); 9] = [
    (DType::Bool, Scalar::Bool(true)),
    (DType::U8, Scalar::Int(0xa5, DType::U8)),
    (DType::I32, Scalar::Int(-123_456_789, DType::I32)),
    (DType::U32, Scalar::Int(0xdead_beef, DType::U32)),
    (DType::I64, Scalar::Int(0x1234_5678_9abc_def0, DType::I64)),
    (DType::F16, Scalar::Float(-2.5, DType::F16)),
    (DType::BF16, Scalar::Float(3.25, DType::BF16)),
    (DType::F32, Scalar::Float(-0.0, DType::F32)),
    (DType::F64, Scalar::Float(-1.0e-300, DType::F64)),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn initial_fills_of_every_dtype() {
    let cases = FILLS.into_iter().map(|(d, init)| {
        let mut b = Builder::new(format!("fill_{d}"), &[2]);
        let x = b.param("x", d, 60, Access::Read);
        let y = b.param_init("y", d, 100, Access::Write, init);
        let vx = b.view_contiguous(x, &[60], &[32], Padding::Zero);
        let vy = b.view_contiguous(y, &[60], &[32], Padding::Zero);
        let a = b.load(vx, &[g(0)], true);
        b.store(vy, &[g(0)], a, true);
        let range = if d.is_float() { (-3.0, 3.0) } else { (1.0, 100.0) };
        (
            b.finish().unwrap(),
            vec![random(d, 60, range, false, 9), random(d, 100, range, false, 8)],
            EXACT,
        )
    });
    run_cases("initial fills", cases, |_| false);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_grid_of_more_than_65535_blocks() {
    let n: u64 = 100_000 * 128 + 5;
    let mut b = Builder::new("big_grid", &[n.div_ceil(128)]);
    let x = b.param("x", DType::F32, n, Access::Read);
    let y = b.param("y", DType::F32, n, Access::Write);
    let vx = b.view_contiguous(x, &[n], &[128], Padding::Zero);
    let vy = b.view_contiguous(y, &[n], &[128], Padding::Zero);
    let a = b.load(vx, &[g(0)], true);
    let s = b.binary(BinaryOp::Mul, a, a);
    b.store(vy, &[g(0)], s, true);
    let inputs = vec![
        random(DType::F32, n as usize, (-1e3, 1e3), true, 77),
        HostBuffer::zeros(DType::F32, n as usize),
    ];
    gpu_agrees(&b.finish().unwrap(), &inputs, EXACT);
}

/// `y = x + 1` on u8 over `n` elements in tiles of `tile`, in place.
fn add_one_u8(n: u64, tile: u32) -> Program {
    let mut b = Builder::new(format!("add_one_u8_{tile}"), &[n.div_ceil(tile as u64)]);
    let x = b.param("x", DType::U8, n, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[n], &[tile], Padding::Zero);
    let a = b.load(vx, &[g(0)], true);
    let one = b.constant(Scalar::Int(1, DType::U8), DType::U8, &[tile]);
    let s = b.binary(BinaryOp::Add, a, one);
    b.store(vx, &[g(0)], s, true);
    b.finish().unwrap()
}

/// 2^31 + 17 bytes, added to in place twice: in tiles of 4096 (64-bit
/// offsets), then in tiles of one (2^31 + 17 blocks: past `%ctaid.x`'s
/// limit, so the grid spills into `%ctaid.y`). Checked against the
/// expected bytes directly rather than the CPU executor, to keep host
/// memory and time in bounds; run it alone (it is skipped under the
/// sanitizers with `--skip huge`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn huge_u8_add_past_two_to_the_31_elements() {
    let n: u64 = (1 << 31) + 17;
    let (_guard, device) = device();
    let compiler = compiler();
    let (free, _) = device.memory_info().unwrap();
    if (free as u64) < n + (1 << 30) {
        eprintln!("skipped: {n} bytes wanted, only {free} bytes of device memory free");
        return;
    }
    let pattern = |i: usize| (i % 251) as u8;
    let host = HostBuffer::from_pod(DType::U8, &(0..n as usize).map(pattern).collect::<Vec<u8>>());
    let stream = device.stream(0);
    let x = device.from_host_on(&host, stream).unwrap();
    drop(host);
    for tile in [4096, 1] {
        let compiled = compiler.compile(&add_one_u8(n, tile)).unwrap();
        eprintln!("tile {tile}: launch grid {:?}", compiled.module().grid_dims());
        compiled.launch(&[&x], stream).unwrap();
    }
    assert_eq!(compiler.compile(&add_one_u8(n, 1)).unwrap().module().grid_dims().1, 2);
    let out = x.to_host_on(stream).unwrap();
    let bad = out
        .as_slice::<u8>()
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v != pattern(i).wrapping_add(2))
        .map(|(i, _)| i)
        .take(5)
        .collect::<Vec<_>>();
    assert!(bad.is_empty(), "wrong bytes at {bad:?}");
}

// ---- The runtime ----

#[test]
#[ignore = "needs a CUDA GPU"]
fn compiled_programs_are_cached_per_program() {
    let p = add_one_u8(1000, 256);
    let (_guard, _) = device();
    let compiler = compiler();
    let first = compiler.compile(&p).unwrap();
    let again = compiler.compile(&p.clone()).unwrap();
    assert!(Arc::ptr_eq(&first, &again));
    assert!(first.compile_time().as_nanos() > 0);
    let other = compiler.compile(&add_one_u8(1001, 256)).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    eprintln!("first compile of {}: {:?}", p.name, first.compile_time());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tuned_module_replaces_the_quick_one() {
    // A loop of 37 trips, which the quick tier keeps rolled.
    let p = row_reduction(DType::F32, TileReduce::Sum, 7, 37 * 128, 128);
    let (_guard, _) = device();
    let compiler = compiler();
    let compiled = compiler.compile(&p).unwrap();
    compiler.finish_compiles();
    assert!(compiled.has_quick_tier() && compiled.is_tuned());
    // The two tiers compile at once, so either may be ready first.
    let tuned_after = compiled.tuned_after().expect("the tuned module's time");
    assert!(tuned_after > std::time::Duration::ZERO);
    // The tuned module: default generation at the JIT's default level.
    assert_eq!(compiled.kernel().jit_level(), None);
    assert!(
        !compiled.module().text.contains("nounroll"),
        "{}",
        compiled.module().text
    );
    assert_eq!(compiled.kernel().ptx(), compiled.module().text);
    // Under the default settings: a loop-free row kernel without row
    // reciprocals has no quick tier (the first module is the tuned one);
    // an elementwise one has, computing one element per thread.
    if tilefuse::Config::process_default().jit.quick == Some(tilefuse::config::QuickTier::DEFAULT) {
        let straight = compiler.compile(&softmax(7, 1000, 1024)).unwrap();
        if straight.first_interpreted() {
            // With the interpreter, it first runs there all the same.
            compiler.finish_compiles();
            assert!(straight.has_quick_tier() && straight.is_tuned() && !straight.is_interpreted());
        } else {
            assert!(!straight.has_quick_tier() && straight.is_tuned());
            assert_eq!(straight.tuned_after(), Some(straight.compile_time()));
        }
        assert_eq!(straight.kernel().jit_level(), None);
        let elementwise = compiler.compile(&add_one_u8(999, 512)).unwrap();
        compiler.finish_compiles();
        assert!(elementwise.has_quick_tier() && elementwise.is_tuned());
        assert!(elementwise.tuned_after().is_some());
        assert!(elementwise.kernel().ptx().contains("// mapping: block 32 threads"));
    }
    eprintln!(
        "{}: quick tier after {:?}, tuned after {tuned_after:?}",
        p.name,
        compiled.compile_time()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn argument_errors_match_the_cpu_executor() {
    let p = column_atomic(AtomicOp::Add, DType::I32);
    let (_guard, device) = device();
    let compiler = compiler();
    let stream = device.stream(0);
    let x = device.alloc(DType::I32, 301 * 67).unwrap();
    let y = device.alloc(DType::I32, 67).unwrap();
    let wrong_dtype = device.alloc(DType::U32, 67).unwrap();
    let short = device.alloc(DType::I32, 66).unwrap();
    let e = run_program(&compiler, &p, &[&x], stream).unwrap_err();
    assert!(matches!(e, Error::KernelArguments { .. }), "{e}");
    let e = run_program(&compiler, &p, &[&x, &wrong_dtype], stream).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DTypeMismatch {
                lhs: DType::I32,
                rhs: DType::U32,
                ..
            }
        ),
        "{e}"
    );
    let e = run_program(&compiler, &p, &[&x, &short], stream).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { len: 66, .. }), "{e}");
    run_program(&compiler, &p, &[&x, &y], stream).unwrap();
    stream.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_and_bf16_round_trip_unchanged() {
    for d in [DType::F16, DType::BF16] {
        let mut b = Builder::new(format!("copy_{d}"), &[7]);
        let x = b.param("x", d, 1000, Access::Read);
        let y = b.param("y", d, 1000, Access::Write);
        let vx = b.view_contiguous(x, &[1000], &[150], Padding::Zero);
        let vy = b.view_contiguous(y, &[1000], &[150], Padding::Zero);
        let a = b.load(vx, &[g(0)], true);
        b.store(vy, &[g(0)], a, true);
        let xs = harness::filled(d, 1000, |i| Scalar::Float(((i * 7919) % 2000) as f64 / 7.0 - 140.0, d));
        let gpu = gpu_agrees(&b.finish().unwrap(), &[xs.clone(), HostBuffer::zeros(d, 1000)], EXACT);
        assert_eq!(gpu[1].bytes(), xs.bytes());
    }
}

/// f64 transcendentals run and agree with the CPU executor (the standard
/// library's functions, and the reference evaluator's `gelu_erf`), at the
/// edges of their ranges too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f64_transcendentals_agree_with_the_cpu_executor() {
    let program = |op: UnaryOp| {
        let mut b = Builder::new(format!("{op:?}_f64"), &[1]);
        let x = b.param("x", DType::F64, 12, Access::Read);
        let y = b.param("y", DType::F64, 12, Access::Write);
        let vx = b.view_contiguous(x, &[12], &[12], Padding::Zero);
        let vy = b.view_contiguous(y, &[12], &[12], Padding::Zero);
        let a = b.load(vx, &[c(0)], false);
        let e = b.unary(op, a);
        b.store(vy, &[c(0)], e, false);
        b.finish().unwrap()
    };
    let xs = HostBuffer::from_elements(&[
        -745.0f64, -37.0, -1.5, -0.0, 0.0, 1e-300, 0.5, 2.0, 709.0, 1e6, 1e300, 5e-324,
    ]);
    let inputs = [xs, HostBuffer::zeros(DType::F64, 12)];
    for (op, tol) in [
        (UnaryOp::Exp, harness::ulps(1)),
        (UnaryOp::Sin, harness::ulps(1)),
        (UnaryOp::Cos, harness::ulps(1)),
        (UnaryOp::Tanh, harness::ulps(3)),
        (UnaryOp::GeluErf, harness::ulps(7)),
    ] {
        let outcome = check_program(&program(op), &inputs, tol).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert!(matches!(outcome, Outcome::Same(_)), "{op:?} was declined");
    }
}

/// With the interpreter loaded (the harness waits for it), a new program
/// runs its first launches there, and they give the tuned module's values
/// bit for bit (`run_gpu` compares the two) and the CPU's within the
/// programs' usual tolerances: a row reduction with a rolled loop, a
/// softmax, an in-place u8 add, and a division by a row value (its f64
/// reciprocal).
#[test]
#[ignore = "needs a CUDA GPU"]
fn new_programs_run_first_on_the_interpreter_with_the_tuned_values() {
    let f32 = DType::F32;
    let cases = [
        (
            row_reduction(f32, TileReduce::Sum, 7, 37 * 128 + 5, 128),
            vec![
                random(f32, 7 * (37 * 128 + 5), (-1.0, 1.0), true, 3),
                HostBuffer::zeros(f32, 7),
            ],
            rel_abs(1e-5, 1e-6),
        ),
        (
            softmax(5, 4093, 4096),
            vec![
                random(f32, 5 * 4093, (-10.0, 10.0), false, 4),
                HostBuffer::zeros(f32, 5 * 4093),
            ],
            rel_abs(1e-5, 0.0),
        ),
        (
            add_one_u8(999, 512),
            vec![random(DType::U8, 999, (0.0, 255.0), false, 5)],
            EXACT,
        ),
        (
            divide_by_row_max(6, 1500, None),
            vec![
                random(f32, 6 * 1500, (-3.0, 3.0), false, 6),
                random(f32, 6 * 1500, (0.5, 2.0), false, 7),
                HostBuffer::zeros(f32, 6 * 1500),
            ],
            EXACT,
        ),
    ];
    for (p, inputs, tol) in cases {
        {
            let (_guard, _) = device();
            let compiler = compiler();
            let compiled = compiler.compile(&p).unwrap();
            assert!(
                compiled.first_interpreted(),
                "{}: {:?}",
                p.name,
                compiled.not_interpreted()
            );
            assert!(
                compiled.compile_time() < std::time::Duration::from_millis(5),
                "{:?}",
                compiled.compile_time()
            );
        }
        gpu_agrees(&p, &inputs, tol);
    }
}
