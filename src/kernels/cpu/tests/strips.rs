//! Strip-mined chains against the same programs run one instruction over
//! whole tiles at a time: the results must agree bit for bit.

use super::*;
use crate::kernels::cpu::buffer::Buf;
use crate::kernels::cpu::shape_ops::{reduce, reduce_strip, LANES};
use crate::kernels::cpu::strips::{planned, strip_length, STRIP, WHOLE_TILES};

/// Runs `program` on `inputs` (read-only) and fresh zeroed outputs of the
/// given dtypes and lengths, strip by strip and then over whole tiles;
/// checks that strips were planned and that both runs give the same bits.
/// Returns the outputs.
fn check(program: &Program, inputs: &[HostBuffer], outputs: &[(DType, usize)]) -> Vec<HostBuffer> {
    assert!(
        planned(program).iter().any(|&(numel, strip)| strip < numel),
        "no strips planned for\n{program}"
    );
    let run_with = |whole: bool| {
        WHOLE_TILES.with(|w| w.set(whole));
        let mut outs: Vec<HostBuffer> = outputs.iter().map(|&(d, n)| HostBuffer::zeros(d, n)).collect();
        let ins: Vec<&HostBuffer> = inputs.iter().collect();
        let mut refs: Vec<&mut HostBuffer> = outs.iter_mut().collect();
        let done = run(program, &ins, &mut refs);
        WHOLE_TILES.with(|w| w.set(false));
        done.unwrap();
        outs
    };
    let strips = run_with(false);
    let whole = run_with(true);
    for (i, (s, w)) in strips.iter().zip(&whole).enumerate() {
        assert!(
            s.bytes() == w.bytes(),
            "output {i} differs from the whole-tile run of\n{program}"
        );
    }
    strips
}

/// `n` values of `dtype` from the f32 samples of `seed` (integers from
/// their scaled values, wrapping).
fn sample(dtype: DType, n: usize, seed: u32) -> HostBuffer {
    let xs = sample_f32(n, 4.0, seed);
    match dtype {
        DType::F32 => HostBuffer::from_elements(&xs),
        DType::F64 => HostBuffer::from_elements(&xs.iter().map(|&x| x as f64 * 1.25).collect::<Vec<_>>()),
        DType::F16 => HostBuffer::from_elements(&xs.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>()),
        DType::BF16 => HostBuffer::from_elements(&xs.iter().map(|&x| half::bf16::from_f32(x)).collect::<Vec<_>>()),
        DType::I32 => HostBuffer::from_elements(&xs.iter().map(|&x| (x * 1000.0) as i32).collect::<Vec<_>>()),
        DType::I64 => HostBuffer::from_elements(&xs.iter().map(|&x| (x * 1e6) as i64).collect::<Vec<_>>()),
        DType::U32 => HostBuffer::from_elements(&xs.iter().map(|&x| (x * 1000.0) as i32 as u32).collect::<Vec<_>>()),
        DType::U8 => HostBuffer::from_elements(&xs.iter().map(|&x| (x * 30.0) as i32 as u8).collect::<Vec<_>>()),
        DType::Bool => HostBuffer::from_elements(&xs.iter().map(|&x| x > 0.0).collect::<Vec<_>>()),
    }
}

/// `sum((a - b)^2)` over a ragged 1-d tensor, tile by tile in a loop into
/// an accumulator, as `mse` is planned.
#[test]
fn sum_of_squared_differences_in_every_arithmetic_dtype() {
    let (n, tile) = (3 * 4096 + 37u64, 4096u32);
    for dtype in [DType::F32, DType::F64, DType::I32, DType::I64, DType::U32, DType::U8] {
        let mut p = Builder::new("test", &[1]);
        let a = p.param("a", dtype, n, Access::Read);
        let b = p.param("b", dtype, n, Access::Read);
        let out = p.param("out", dtype, 1, Access::Write);
        let (va, vb) = (dense(&mut p, a, &[n], &[tile]), dense(&mut p, b, &[n], &[tile]));
        let vo = dense(&mut p, out, &[1], &[1]);
        let acc = p.acc(ValueType::new(dtype, &[1]), Scalar::Int(0, dtype));
        p.loop_(n.div_ceil(tile as u64), |p, i| {
            let (x, y) = (
                p.load(va, &[IndexExpr::loop_var(i)], true),
                p.load(vb, &[IndexExpr::loop_var(i)], true),
            );
            let d = p.binary(BinaryOp::Sub, x, y);
            let sq = p.binary(BinaryOp::Mul, d, d);
            let s = p.reduce(TileReduce::Sum, sq, 0);
            p.acc_update(acc, BinaryOp::Add, s);
        });
        let total = p.acc_read(acc);
        p.store(vo, &[c(0)], total, false);
        let program = p.finish().unwrap();
        let inputs = [sample(dtype, n as usize, 1), sample(dtype, n as usize, 2)];
        let got = check(&program, &inputs, &[(dtype, 1)]);
        if dtype == DType::F64 {
            let (a, b) = (inputs[0].to_vec::<f64>(), inputs[1].to_vec::<f64>());
            let want: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            let got = got[0].to_vec::<f64>()[0];
            assert!((got - want).abs() <= 1e-12 * want, "{got} against {want}");
        }
    }
}

/// Rows shifted by a per-row value (a spread repeat), scaled and shifted
/// by rows read through stride-0 views (period loads) and stored in place,
/// with their sums of squares, over rows of several widths (shorter than a
/// strip, not a power of two, longer than a strip) and ragged row tiles.
#[test]
fn rows_with_spread_operands_of_several_widths() {
    for (cols, rows_per_tile) in [(48u32, 32u32), (1000, 4), (2048, 2), (3000, 2), (12, 128)] {
        let rows = 2 * rows_per_tile as u64 + 3;
        let tile = [rows_per_tile, cols];
        let mut p = Builder::new("test", &[rows.div_ceil(rows_per_tile as u64)]);
        let x = p.param("x", DType::F32, rows * cols as u64, Access::Read);
        let m = p.param("m", DType::F32, rows, Access::Read);
        let w = p.param("w", DType::F32, cols as u64, Access::Read);
        let b = p.param("b", DType::F32, cols as u64, Access::Read);
        let y = p.param("y", DType::F32, rows * cols as u64, Access::Write);
        let sums = p.param("sums", DType::F32, rows, Access::Write);
        let extents = [rows, cols as u64];
        let vx = dense(&mut p, x, &extents, &tile);
        let vm = dense(&mut p, m, &[rows, 1], &[rows_per_tile, 1]);
        let vw = p.view(w, &extents, &[0, 1], 0, &tile, Padding::Zero);
        let vb = p.view(b, &extents, &[0, 1], 0, &tile, Padding::Zero);
        let vy = dense(&mut p, y, &extents, &tile);
        let vs = dense(&mut p, sums, &[rows, 1], &[rows_per_tile, 1]);
        let at = [g(0), c(0)];
        let tx = p.load(vx, &at, true);
        let tm = p.load(vm, &at, true);
        let mb = p.broadcast(tm, &tile);
        let d = p.binary(BinaryOp::Sub, tx, mb);
        let tw = p.load(vw, &at, true);
        let scaled = p.binary(BinaryOp::Mul, d, tw);
        let tb = p.load(vb, &at, true);
        let out = p.binary(BinaryOp::Add, scaled, tb);
        let sq = p.binary(BinaryOp::Mul, d, d);
        let ss = p.reduce(TileReduce::Sum, sq, 1);
        p.store(vy, &at, out, true);
        p.store(vs, &at, ss, true);
        let program = p.finish().unwrap();
        let len = (rows * cols as u64) as usize;
        let inputs = [
            sample(DType::F32, len, 3),
            sample(DType::F32, rows as usize, 4),
            sample(DType::F32, cols as usize, 5),
            sample(DType::F32, cols as usize, 6),
        ];
        let got = check(&program, &inputs, &[(DType::F32, len), (DType::F32, rows as usize)]);
        let (ys, sums) = (got[0].to_vec::<f32>(), got[1].to_vec::<f32>());
        let [xs, ms, ws, bs] = [0, 1, 2, 3].map(|i| inputs[i].to_vec::<f32>());
        for (r, row) in xs.chunks(cols as usize).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                let want = (v - ms[r]) * ws[k] + bs[k];
                assert_eq!(ys[r * cols as usize + k], want, "{cols} columns, row {r} column {k}");
            }
            let want: f64 = row.iter().map(|&v| ((v - ms[r]) as f64).powi(2)).sum();
            let have = sums[r] as f64;
            assert!(
                (have - want).abs() < 1e-5 * want,
                "{cols} columns, row {r}: {have} against {want}"
            );
        }
    }
}

/// Two reductions of one chain along the outer axis of tiles whose rows are
/// shorter than, equal to and longer than a strip.
#[test]
fn outer_axis_reductions_of_one_chain() {
    for (rows, cols) in [(24u32, 100u32), (8, 1024), (4, 3000)] {
        let mut p = Builder::new("test", &[1]);
        let x = p.param("x", DType::F32, (rows * cols) as u64, Access::Read);
        let sum = p.param("sum", DType::F32, cols as u64, Access::Write);
        let max = p.param("max", DType::F32, cols as u64, Access::Write);
        let vx = dense(&mut p, x, &[rows as u64, cols as u64], &[rows, cols]);
        let (vs, vm) = (
            dense(&mut p, sum, &[1, cols as u64], &[1, cols]),
            dense(&mut p, max, &[1, cols as u64], &[1, cols]),
        );
        let tx = p.load(vx, &[c(0), c(0)], false);
        let sq = p.binary(BinaryOp::Mul, tx, tx);
        let e = p.unary(UnaryOp::Exp, tx);
        let t = p.binary(BinaryOp::Sub, sq, e);
        let s = p.reduce(TileReduce::Sum, t, 0);
        let m = p.reduce(TileReduce::Max, t, 0);
        p.store(vs, &[c(0), c(0)], s, false);
        p.store(vm, &[c(0), c(0)], m, false);
        let program = p.finish().unwrap();
        let input = sample(DType::F32, (rows * cols) as usize, 6);
        let got = check(
            &program,
            std::slice::from_ref(&input),
            &[(DType::F32, cols as usize), (DType::F32, cols as usize)],
        );
        let xs = input.to_vec::<f32>();
        // Along the outer axis the rows are added in order, as here.
        let mut want = vec![0.0f32; cols as usize];
        for row in xs.chunks(cols as usize) {
            for (w, &v) in want.iter_mut().zip(row) {
                *w += v * v - super::super::vmath::exp(v);
            }
        }
        assert_eq!(got[0].to_vec::<f32>(), want, "{rows} x {cols}");
    }
}

/// f16 and bf16 loaded, computed on in f32 and stored back, over a ragged
/// last tile.
#[test]
fn half_precision_chains() {
    let (n, tile) = (5000u64, 4096u32);
    for dtype in [DType::F16, DType::BF16] {
        let mut p = Builder::new("test", &[n.div_ceil(tile as u64)]);
        let x = p.param("x", dtype, n, Access::Read);
        let y = p.param("y", dtype, n, Access::Write);
        let (vx, vy) = (dense(&mut p, x, &[n], &[tile]), dense(&mut p, y, &[n], &[tile]));
        let tx = p.load(vx, &[g(0)], true);
        let f = p.cast(tx, DType::F32);
        let neg = p.unary(UnaryOp::Neg, f);
        let e = p.unary(UnaryOp::Exp, neg);
        let m = p.binary(BinaryOp::Mul, e, f);
        let h = p.cast(m, dtype);
        p.store(vy, &[g(0)], h, true);
        check(
            &p.finish().unwrap(),
            &[sample(dtype, n as usize, 7)],
            &[(dtype, n as usize)],
        );
    }
}

/// Integers through casts, comparisons and selects, with an iota and a
/// mask hoisted to the start of the chain.
#[test]
fn integer_chain_with_compare_and_select() {
    let (n, tile) = (9000u64, 4096u32);
    let mut p = Builder::new("test", &[n.div_ceil(tile as u64)]);
    let x = p.param("x", DType::I32, n, Access::Read);
    let y = p.param("y", DType::I64, n, Access::Write);
    let (vx, vy) = (dense(&mut p, x, &[n], &[tile]), dense(&mut p, y, &[n], &[tile]));
    let tx = p.load(vx, &[g(0)], true);
    let wide = p.cast(tx, DType::I64);
    let k = p.constant(Scalar::Int(-3, DType::I64), DType::I64, &[tile]);
    let scaled = p.binary(BinaryOp::Mul, wide, k);
    let at = p.iota(&[tile], 0, g(0));
    let big = p.binary(BinaryOp::Gt, scaled, at);
    let inside = p.in_bounds(vx, &[g(0)]);
    let both = p.binary(BinaryOp::BitAnd, big, inside);
    let picked = p.select(both, scaled, at);
    p.store(vy, &[g(0)], picked, true);
    let program = p.finish().unwrap();
    let input = sample(DType::I32, n as usize, 8);
    let got = check(&program, std::slice::from_ref(&input), &[(DType::I64, n as usize)])[0].to_vec::<i64>();
    for (i, &v) in input.to_vec::<i32>().iter().enumerate() {
        let s = v as i64 * -3;
        assert_eq!(got[i], if s > i as i64 { s } else { i as i64 }, "element {i}");
    }
}

/// A result stored through a transposed view is not computed in place: its
/// strips fill its own tile, which the store then copies.
#[test]
fn results_stored_through_a_strided_view() {
    let side = 64u64;
    let mut p = Builder::new("test", &[1]);
    let x = p.param("x", DType::F64, side * side, Access::Read);
    let y = p.param("y", DType::F64, side * side, Access::Write);
    let vx = dense(&mut p, x, &[side, side], &[64, 64]);
    let vy = p.view(y, &[side, side], &[1, side as i64], 0, &[64, 64], Padding::Zero);
    let tx = p.load(vx, &[c(0), c(0)], false);
    let e = p.unary(UnaryOp::Tanh, tx);
    let m = p.binary(BinaryOp::Mul, e, tx);
    p.store(vy, &[c(0), c(0)], m, false);
    let program = p.finish().unwrap();
    let input = sample(DType::F64, (side * side) as usize, 9);
    let got = check(
        &program,
        std::slice::from_ref(&input),
        &[(DType::F64, (side * side) as usize)],
    )[0]
    .to_vec::<f64>();
    let xs = input.to_vec::<f64>();
    for i in 0..side as usize {
        for j in 0..side as usize {
            let v = xs[i * side as usize + j];
            assert_eq!(got[j * side as usize + i], v.tanh() * v);
        }
    }
}

/// An accumulator of more than one strip updated from a chain in a loop.
#[test]
fn accumulators_updated_strip_by_strip() {
    let (tile, count) = (2048u32, 5u64);
    for dtype in [DType::F32, DType::I64] {
        let mut p = Builder::new("test", &[1]);
        let x = p.param("x", dtype, tile as u64 * count, Access::Read);
        let y = p.param("y", dtype, tile as u64, Access::Write);
        let vx = dense(&mut p, x, &[tile as u64 * count], &[tile]);
        let vy = dense(&mut p, y, &[tile as u64], &[tile]);
        let acc = p.acc(ValueType::new(dtype, &[tile]), Scalar::Int(1, dtype));
        p.loop_(count, |p, i| {
            let tx = p.load(vx, &[IndexExpr::loop_var(i)], false);
            let sq = p.binary(BinaryOp::Mul, tx, tx);
            let t = p.binary(BinaryOp::Sub, sq, tx);
            p.acc_update(acc, BinaryOp::Add, t);
        });
        let r = p.acc_read(acc);
        p.store(vy, &[c(0)], r, false);
        let program = p.finish().unwrap();
        let input = sample(dtype, (tile as u64 * count) as usize, 10);
        let got = check(&program, std::slice::from_ref(&input), &[(dtype, tile as usize)]);
        if dtype == DType::I64 {
            let xs = input.to_vec::<i64>();
            let want: Vec<i64> = (0..tile as usize)
                .map(|j| {
                    (0..count as usize).fold(1i64, |a, k| {
                        let v = xs[k * tile as usize + j];
                        a.wrapping_add(v.wrapping_mul(v).wrapping_sub(v))
                    })
                })
                .collect();
            assert_eq!(got[0].to_vec::<i64>(), want);
        }
    }
}

/// Strip reductions, strip lengths that divide rows, are divided by them or
/// neither, give the whole-tile reduction's bits.
#[test]
fn strip_reductions_match_whole_tile_reductions() {
    let shapes: [&[u32]; 5] = [&[1, 5000], &[3, 1000], &[7, 33], &[40, 3], &[2, 3, 700]];
    let cases = [
        (TileReduce::Sum, DType::F32),
        (TileReduce::Sum, DType::F64),
        (TileReduce::Prod, DType::F64),
        (TileReduce::Max, DType::F32),
        (TileReduce::Min, DType::F32),
        (TileReduce::Sum, DType::I32),
        (TileReduce::Prod, DType::U8),
        (TileReduce::Max, DType::Bool),
    ];
    for shape in shapes {
        let numel: usize = shape.iter().map(|&d| d as usize).product();
        for axis in 0..shape.len() {
            let mut out_shape = shape.to_vec();
            out_shape[axis] = 1;
            let out_len: usize = out_shape.iter().map(|&d| d as usize).product();
            for (op, dtype) in cases {
                let src = sample(dtype, numel, axis as u32 + 11);
                let src = tile_of(&src, dtype);
                let mut want = Buf::try_zeros(dtype, out_len).unwrap();
                reduce(op, dtype, shape, axis, &mut want, &src).unwrap();
                for strip in [1usize, 7, 16, 100, 1024, 4096] {
                    let mut got = Buf::try_zeros(dtype, out_len).unwrap();
                    let mut lanes = Buf::try_zeros(dtype, LANES).unwrap();
                    let mut lo = 0;
                    while lo < numel {
                        let len = strip.min(numel - lo);
                        let mut part = Buf::try_zeros(dtype, len).unwrap();
                        copy_range(&src, lo, &mut part);
                        reduce_strip(op, dtype, shape, axis, lo, &mut got, &mut lanes, &part).unwrap();
                        lo += len;
                    }
                    assert!(
                        same_bits(&got, &want),
                        "{op:?} of {dtype} {shape:?} along {axis} in strips of {strip}"
                    );
                }
            }
        }
    }
}

/// Strip lengths divide every spread length or are divided by it.
#[test]
fn strip_lengths_fit_the_spreads() {
    let cases: [&[usize]; 8] = [
        &[],
        &[1024],
        &[12],
        &[1000, 1000],
        &[3000],
        &[3, 1024],
        &[7, 5],
        &[1031],
    ];
    for spreads in cases {
        for numel in [2048usize, 8192, 3 * 1024 * 7 * 5] {
            let s = strip_length(numel, spreads);
            assert!(s > 0 && s <= numel, "{spreads:?} over {numel}: {s}");
            if s < numel {
                for &r in spreads {
                    assert!(s % r == 0 || r % s == 0, "{spreads:?} over {numel}: {s}");
                }
                assert!(s * 8 >= STRIP, "{spreads:?} over {numel}: {s}");
            }
        }
    }
    assert_eq!(strip_length(8192, &[1024, 1024]), STRIP);
    assert_eq!(strip_length(8192, &[]), STRIP);
    assert_eq!(strip_length(1536, &[12]), STRIP / 12 * 12);
}

/// A tile of `dtype` holding the elements of `buffer`.
fn tile_of(buffer: &HostBuffer, dtype: DType) -> Buf {
    let mut b = Buf::try_zeros(dtype, buffer.len()).unwrap();
    copy_bytes(buffer.bytes(), &mut b);
    b
}

fn copy_bytes(bytes: &[u8], dst: &mut Buf) {
    use crate::kernels::cpu::buffer::BitsMut;
    match dst.bits_mut() {
        BitsMut::B1(d) => d.copy_from_slice(bytes),
        BitsMut::B2(d) => bytemuck::cast_slice_mut(d).copy_from_slice(bytes),
        BitsMut::B4(d) => bytemuck::cast_slice_mut(d).copy_from_slice(bytes),
        BitsMut::B8(d) => bytemuck::cast_slice_mut(d).copy_from_slice(bytes),
    }
}

/// Copies elements `lo .. lo + dst.len()` of `src` into `dst`.
fn copy_range(src: &Buf, lo: usize, dst: &mut Buf) {
    let size = src.dtype().size_in_bytes();
    let bytes = bytes_of(src);
    let len = dst.len();
    copy_bytes(&bytes[lo * size..(lo + len) * size], dst);
}

fn bytes_of(b: &Buf) -> &[u8] {
    use crate::kernels::cpu::buffer::Bits;
    match b.bits() {
        Bits::B1(v) => v,
        Bits::B2(v) => bytemuck::cast_slice(v),
        Bits::B4(v) => bytemuck::cast_slice(v),
        Bits::B8(v) => bytemuck::cast_slice(v),
    }
}

fn same_bits(a: &Buf, b: &Buf) -> bool {
    bytes_of(a) == bytes_of(b)
}

/// A chain whose loaded tile an earlier reduction has read already (so it
/// is in the cache) runs over whole tiles; the same chain reading the tile
/// first runs in strips.
#[test]
fn only_chains_that_first_read_a_loaded_tile_run_in_strips() {
    let (n, tile) = (8192u64, 8192u32);
    let plan = |reduce_first: bool| {
        let mut p = Builder::new("test", &[1]);
        let x = p.param("x", DType::F32, n, Access::Read);
        let y = p.param("y", DType::F32, n, Access::Write);
        let s = p.param("s", DType::F32, 1, Access::Write);
        let (vx, vy, vs) = (
            dense(&mut p, x, &[n], &[tile]),
            dense(&mut p, y, &[n], &[tile]),
            dense(&mut p, s, &[1], &[1]),
        );
        let tx = p.load(vx, &[c(0)], false);
        if reduce_first {
            let m = p.reduce(TileReduce::Max, tx, 0);
            p.store(vs, &[c(0)], m, false);
        }
        let e = p.unary(UnaryOp::Exp, tx);
        let t = p.binary(BinaryOp::Mul, e, tx);
        p.store(vy, &[c(0)], t, false);
        planned(&p.finish().unwrap())
    };
    assert_eq!(plan(false), vec![(n as usize, STRIP)]);
    assert_eq!(plan(true), vec![]);
}
