//! Whole programs: loops with accumulators, atomics across grid points,
//! index patterns, threading and argument errors.

use super::*;
use crate::error::Error;

/// Row sums of an [R, C] f32 matrix: one grid point per 4 rows, a loop over
/// column tiles of 16 (the last one ragged) adding into an accumulator,
/// then an in-tile reduction along the columns.
#[test]
fn row_sums_with_a_loop_and_an_accumulator() {
    let (r, cols) = (10u64, 45u64);
    let mut p = Builder::new("test", &[r.div_ceil(4)]);
    let x = p.param("p", DType::F32, r * cols, Access::Read);
    let out = p.param("p", DType::F32, r, Access::Write);
    let vx = dense(&mut p, x, &[r, cols], &[4, 16]);
    let vo = dense(&mut p, out, &[r, 1], &[4, 1]);
    let acc = p.acc(ValueType::new(DType::F32, &[4, 16]), Scalar::Float(0.0, DType::F32));
    p.loop_(cols.div_ceil(16), |p, i| {
        let tile = p.load(vx, &[g(0), IndexExpr::loop_var(i)], true);
        p.acc_update(acc, BinaryOp::Add, tile);
    });
    let total = p.acc_read(acc);
    let sums = p.reduce(TileReduce::Sum, total, 1);
    p.store(vo, &[g(0), c(0)], sums, true);
    let data = sample_f32((r * cols) as usize, 10.0, 7);
    let mut o = HostBuffer::zeros(DType::F32, r as usize);
    run(
        &p.finish().unwrap(),
        &[&HostBuffer::from_elements(&data)],
        &mut [&mut o],
    )
    .unwrap();
    for (row, got) in o.to_vec::<f32>().into_iter().enumerate() {
        let want: f64 = data[row * cols as usize..][..cols as usize]
            .iter()
            .map(|&v| v as f64)
            .sum();
        assert!((got as f64 - want).abs() < 1e-4, "row {row}: {got} want {want}");
    }
}

/// Column sums of an [M, N] matrix split over a [M/4, N/8] grid: each point
/// reduces its tile along the rows and adds the result atomically into the
/// output, which the parameter's init fills with zero first.
fn column_sums(dtype: DType, data: &HostBuffer, m: u64, n: u64) -> HostBuffer {
    let mut p = Builder::new("test", &[m.div_ceil(4), n.div_ceil(8)]);
    let x = p.param("p", dtype, m * n, Access::Read);
    let out = p.param_init("out", dtype, n, Access::Write, Scalar::Int(0, DType::I64).cast(dtype));
    let vx = dense(&mut p, x, &[m, n], &[4, 8]);
    let vo = dense(&mut p, out, &[1, n], &[1, 8]);
    let tile = p.load(vx, &[g(0), g(1)], true);
    let partial = p.reduce(TileReduce::Sum, tile, 0);
    p.atomic(AtomicOp::Add, vo, &[c(0), g(1)], partial, true, ThreadScope::Device);
    let mut o = HostBuffer::zeros(dtype, n as usize);
    o.set(0, Scalar::Int(12345, DType::I64)); // overwritten by the init fill
    run(&p.finish().unwrap(), &[data], &mut [&mut o]).unwrap();
    o
}

#[test]
fn column_sums_with_atomic_adds() {
    let (m, n) = (37u64, 21u64);
    let ints: Vec<i32> = (0..m * n).map(|i| (i as i32 * 7919) % 1000 - 500).collect();
    let got = column_sums(DType::I32, &HostBuffer::from_elements(&ints), m, n).to_vec::<i32>();
    let want: Vec<i32> = (0..n as usize)
        .map(|j| (0..m as usize).map(|i| ints[i * n as usize + j]).sum())
        .collect();
    assert_eq!(got, want);

    let floats = sample_f32((m * n) as usize, 3.0, 11);
    let got = column_sums(DType::F32, &HostBuffer::from_elements(&floats), m, n).to_vec::<f32>();
    for (j, g) in got.into_iter().enumerate() {
        let want: f64 = (0..m as usize).map(|i| floats[i * n as usize + j] as f64).sum();
        assert!((g as f64 - want).abs() < 1e-4, "column {j}: {g} want {want}");
    }
}

/// Argmax of each row (first maximum) through Iota and Select: the smallest
/// column index whose value equals the row maximum.
#[test]
fn argmax_by_iota_and_select() {
    let (r, cols) = (6u64, 9u32);
    let mut p = Builder::new("test", &[r]);
    let x = p.param("p", DType::F32, r * cols as u64, Access::Read);
    let out = p.param("p", DType::I64, r, Access::Write);
    let vx = dense(&mut p, x, &[r, cols as u64], &[1, cols]);
    let vo = dense(&mut p, out, &[r, 1], &[1, 1]);
    let row = p.load(vx, &[g(0), c(0)], false);
    let max = p.reduce(TileReduce::Max, row, 1);
    let max_b = p.broadcast(max, &[1, cols]);
    let is_max = p.binary(BinaryOp::Eq, row, max_b);
    let iota = p.iota(&[1, cols], 1, c(0));
    let none = p.constant(Scalar::Int(cols as i128, DType::I64), DType::I64, &[1, cols]);
    let candidates = p.select(is_max, iota, none);
    let first = p.reduce(TileReduce::Min, candidates, 1);
    p.store(vo, &[g(0), c(0)], first, false);
    let mut data: Vec<f32> = (0..r * cols as u64).map(|i| ((i * 37) % 11) as f32).collect();
    data[3 * cols as usize + 4] = 100.0;
    data[3 * cols as usize + 7] = 100.0;
    let mut o = HostBuffer::zeros(DType::I64, r as usize);
    run(
        &p.finish().unwrap(),
        &[&HostBuffer::from_elements(&data)],
        &mut [&mut o],
    )
    .unwrap();
    let want: Vec<i64> = data
        .chunks(cols as usize)
        .map(|row| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            row.iter().position(|&v| v == max).unwrap() as i64
        })
        .collect();
    assert_eq!(o.to_vec::<i64>(), want);
    assert_eq!(want[3], 4);
}

/// The chain pipeline `tanh(a*b + c) * sigmoid(a) - exp(-b*b)` over a
/// ragged 1-d grid, plus the per-tile sums of `(a - b)^2`.
fn chain_program(n: u64, tile: u32) -> Program {
    let mut p = Builder::new("test", &[n.div_ceil(tile as u64)]);
    let ins: Vec<ParamId> = (0..3).map(|_| p.param("p", DType::F32, n, Access::Read)).collect();
    let y = p.param("p", DType::F32, n, Access::Write);
    let sq = p.param("p", DType::F32, n.div_ceil(tile as u64), Access::Write);
    let views: Vec<ViewId> = ins.iter().map(|&a| dense(&mut p, a, &[n], &[tile])).collect();
    let vy = dense(&mut p, y, &[n], &[tile]);
    let vsq = dense(&mut p, sq, &[n.div_ceil(tile as u64)], &[1]);
    let [a, b, cc] = [0, 1, 2].map(|i| p.load(views[i], &[g(0)], true));
    let ab = p.binary(BinaryOp::Mul, a, b);
    let abc = p.binary(BinaryOp::Add, ab, cc);
    let t = p.unary(UnaryOp::Tanh, abc);
    let s = p.unary(UnaryOp::Sigmoid, a);
    let ts = p.binary(BinaryOp::Mul, t, s);
    let bb = p.binary(BinaryOp::Mul, b, b);
    let nbb = p.unary(UnaryOp::Neg, bb);
    let e = p.unary(UnaryOp::Exp, nbb);
    let out = p.binary(BinaryOp::Sub, ts, e);
    p.store(vy, &[g(0)], out, true);
    let d = p.binary(BinaryOp::Sub, a, b);
    let d2 = p.binary(BinaryOp::Mul, d, d);
    let sum = p.reduce(TileReduce::Sum, d2, 0);
    p.store(vsq, &[g(0)], sum, false);
    p.finish().unwrap()
}

#[test]
fn chain_matches_a_plain_loop_and_is_deterministic_across_threads() {
    let (n, tile) = (100_003u64, 1024u32);
    let program = chain_program(n, tile);
    let inputs: Vec<HostBuffer> = (0..3)
        .map(|s| HostBuffer::from_elements(&sample_f32(n as usize, 2.0, s)))
        .collect();
    let refs: Vec<&HostBuffer> = inputs.iter().collect();
    let tiles = n.div_ceil(tile as u64) as usize;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let runs: Vec<(HostBuffer, HostBuffer)> = (0..2)
        .map(|_| {
            let mut y = HostBuffer::zeros(DType::F32, n as usize);
            let mut sq = HostBuffer::zeros(DType::F32, tiles);
            pool.install(|| run(&program, &refs, &mut [&mut y, &mut sq])).unwrap();
            (y, sq)
        })
        .collect();
    assert_eq!(runs[0].0.bytes(), runs[1].0.bytes());
    assert_eq!(runs[0].1.bytes(), runs[1].1.bytes());
    let [a, b, c] = [0, 1, 2].map(|i| inputs[i].to_vec::<f32>());
    let y = runs[0].0.to_vec::<f32>();
    for i in 0..n as usize {
        // The same f32 operations in the same order give the same bits (the
        // executor's transcendentals are those of `vmath`).
        use crate::kernels::cpu::vmath::{exp, sigmoid, tanh};
        let want = tanh(a[i] * b[i] + c[i]) * sigmoid(a[i]) - exp(-(b[i] * b[i]));
        assert_eq!(y[i].to_bits(), want.to_bits(), "element {i}");
    }
    let sq = runs[0].1.to_vec::<f32>();
    for (t, got) in sq.into_iter().enumerate() {
        let range = t * tile as usize..((t + 1) * tile as usize).min(n as usize);
        let want: f64 = range.map(|i| ((a[i] - b[i]) as f64).powi(2)).sum();
        assert!((got as f64 - want).abs() <= 1e-5 * want, "tile {t}: {got} want {want}");
    }
}

#[test]
fn half_inputs_compute_in_f32_and_round_once() {
    let xs: Vec<half::bf16> = sample_f32(300, 4.0, 3).into_iter().map(half::bf16::from_f32).collect();
    let mut p = Builder::new("test", &[3]);
    let a = p.param("p", DType::BF16, 300, Access::Read);
    let o = p.param("p", DType::BF16, 300, Access::Write);
    let (va, vo) = (dense(&mut p, a, &[300], &[128]), dense(&mut p, o, &[300], &[128]));
    let x = p.load(va, &[g(0)], true);
    let x32 = p.cast(x, DType::F32);
    let y32 = p.unary(UnaryOp::GeluTanh, x32);
    let y = p.cast(y32, DType::BF16);
    p.store(vo, &[g(0)], y, true);
    let mut out = HostBuffer::zeros(DType::BF16, 300);
    run(
        &p.finish().unwrap(),
        &[&HostBuffer::from_elements(&xs)],
        &mut [&mut out],
    )
    .unwrap();
    for (x, got) in xs.iter().zip(out.to_vec::<half::bf16>()) {
        let x = x.to_f32();
        let k = (2.0f32 / std::f32::consts::PI).sqrt();
        let want = half::bf16::from_f32(0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh()));
        assert_eq!(got, want, "gelu({x})");
    }
}

#[test]
fn argument_errors() {
    let program = chain_program(64, 32);
    let a = HostBuffer::zeros(DType::F32, 64);
    let mut y = HostBuffer::zeros(DType::F32, 64);
    let mut sq = HostBuffer::zeros(DType::F32, 2);
    let err = run(&program, &[&a, &a], &mut [&mut y, &mut sq]).unwrap_err();
    assert!(matches!(err, Error::KernelArguments { .. }), "{err}");
    let wrong_dtype = HostBuffer::zeros(DType::F64, 64);
    let err = run(&program, &[&a, &wrong_dtype, &a], &mut [&mut y, &mut sq]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DTypeMismatch {
                lhs: DType::F32,
                rhs: DType::F64,
                ..
            }
        ),
        "{err}"
    );
    let short = HostBuffer::zeros(DType::F32, 63);
    let err = run(&program, &[&a, &a, &short], &mut [&mut y, &mut sq]).unwrap_err();
    assert!(matches!(err, Error::LengthMismatch { len: 63, .. }), "{err}");
    // An output passed read-only.
    let mut args = vec![
        Arg::Read(&a),
        Arg::Read(&a),
        Arg::Read(&a),
        Arg::Read(&y),
        Arg::Write(&mut sq),
    ];
    let err = execute(&program, &mut args).unwrap_err();
    assert!(matches!(err, Error::KernelArguments { .. }), "{err}");
}

#[test]
fn programs_are_verified_first() {
    let mut program = chain_program(64, 32);
    if let Inst::Load { index, .. } = &mut program.body[0] {
        index[0] = g(3);
    }
    let a = HostBuffer::zeros(DType::F32, 64);
    let mut y = HostBuffer::zeros(DType::F32, 64);
    let mut sq = HostBuffer::zeros(DType::F32, 2);
    let err = run(&program, &[&a, &a, &a], &mut [&mut y, &mut sq]).unwrap_err();
    assert!(matches!(err, Error::InvalidProgram { .. }), "{err}");
}
