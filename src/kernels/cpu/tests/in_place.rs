//! Tiles read and written in place: zero-copy loads, spread broadcast
//! operands and forwarded stores, at whole and ragged partitions.

use super::*;

/// `y = (x - max(x, row)) * w + x` over an [R, C] matrix with R ragged for
/// the [4, C] tiles, `w` a row read through a stride-0 view: the max is a
/// spread broadcast, `w` a period load, `y` stored in place except at the
/// ragged last partition.
#[test]
fn row_program_with_spread_operands_matches_a_plain_loop() {
    let (r, cols) = (10u64, 16u64);
    let mut p = Builder::new("test", &[r.div_ceil(4)]);
    let x = p.param("x", DType::F32, r * cols, Access::Read);
    let w = p.param("w", DType::F32, cols, Access::Read);
    let y = p.param("y", DType::F32, r * cols, Access::Write);
    let vx = dense(&mut p, x, &[r, cols], &[4, 16]);
    let vw = p.view(w, &[r, cols], &[0, 1], 0, &[4, 16], Padding::Zero);
    let vy = dense(&mut p, y, &[r, cols], &[4, 16]);
    let tx = p.load(vx, &[g(0), c(0)], true);
    let m = p.reduce(TileReduce::Max, tx, 1);
    let mb = p.broadcast(m, &[4, 16]);
    let d = p.binary(BinaryOp::Sub, tx, mb);
    let tw = p.load(vw, &[g(0), c(0)], true);
    let scaled = p.binary(BinaryOp::Mul, tw, d);
    let out = p.binary(BinaryOp::Add, scaled, tx);
    p.store(vy, &[g(0), c(0)], out, true);
    let (xs, ws) = (
        sample_f32((r * cols) as usize, 4.0, 3),
        sample_f32(cols as usize, 2.0, 4),
    );
    let mut o = HostBuffer::zeros(DType::F32, (r * cols) as usize);
    let inputs = [&HostBuffer::from_elements(&xs), &HostBuffer::from_elements(&ws)];
    run(&p.finish().unwrap(), &inputs, &mut [&mut o]).unwrap();
    let got = o.to_vec::<f32>();
    for (row, x) in xs.chunks(cols as usize).enumerate() {
        let m = x.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        for (k, (&x, &w)) in x.iter().zip(&ws).enumerate() {
            let want = w * (x - m) + x;
            assert_eq!(got[row * cols as usize + k], want, "row {row} column {k}");
        }
    }
}

/// A load of the stored parameter between a result and its store must see
/// the old values, so that store is not computed in place.
#[test]
fn a_load_between_a_result_and_its_store_reads_the_old_values() {
    let n = 64u64;
    let mut p = Builder::new("test", &[n / 16]);
    let x = p.param("x", DType::F32, n, Access::Read);
    let y = p.param("y", DType::F32, n, Access::ReadWrite);
    let old = p.param("old", DType::F32, n, Access::Write);
    let (vx, vy, vo) = (
        dense(&mut p, x, &[n], &[16]),
        dense(&mut p, y, &[n], &[16]),
        dense(&mut p, old, &[n], &[16]),
    );
    let tx = p.load(vx, &[g(0)], false);
    let doubled = p.binary(BinaryOp::Add, tx, tx);
    let before = p.load(vy, &[g(0)], false);
    p.store(vy, &[g(0)], doubled, false);
    p.store(vo, &[g(0)], before, false);
    let xs = sample_f32(n as usize, 3.0, 5);
    let ys = sample_f32(n as usize, 3.0, 6);
    let mut ybuf = HostBuffer::from_elements(&ys);
    let mut obuf = HostBuffer::zeros(DType::F32, n as usize);
    run(
        &p.finish().unwrap(),
        &[&HostBuffer::from_elements(&xs)],
        &mut [&mut ybuf, &mut obuf],
    )
    .unwrap();
    assert_eq!(obuf.to_vec::<f32>(), ys);
    let doubled: Vec<f32> = xs.iter().map(|&v| v + v).collect();
    assert_eq!(ybuf.to_vec::<f32>(), doubled);
}

/// A frame's tiles go back to their thread when the frame ends and the next
/// frame there takes them, the newest first when the thread keeps too many:
/// debug builds fill every tile a frame takes with all-one bits, so a
/// float program that read a tile before writing it would give NaN (the
/// suite runs in debug in CI).
#[test]
fn tiles_are_reused_on_their_thread_and_poisoned_in_debug() {
    use crate::kernels::cpu::buffer::{typed, Buf};
    let ptr = |b: &Buf| typed::<f32>(b).unwrap().as_ptr();
    std::thread::spawn(move || {
        let poisoned = |b: &Buf| typed::<f32>(b).unwrap().iter().all(|v| v.to_bits() == u32::MAX);
        let zero = |b: &Buf| typed::<f32>(b).unwrap().iter().all(|&v| v == 0.0);
        let fresh = Buf::scratch(DType::F32, 1000).unwrap();
        assert!(if cfg!(debug_assertions) {
            poisoned(&fresh)
        } else {
            zero(&fresh)
        });
        let at = ptr(&fresh);
        fresh.recycle();
        // Another dtype or length does not take it.
        let (_other, _wider) = (
            Buf::scratch(DType::F32, 999).unwrap(),
            Buf::scratch(DType::F64, 1000).unwrap(),
        );
        assert_eq!(Buf::spares(), (1, 4000), "another dtype or length took the spare");
        let reused = Buf::scratch(DType::F32, 1000).unwrap();
        assert_eq!(ptr(&reused), at, "the spare is taken");
        if cfg!(debug_assertions) {
            assert!(poisoned(&reused));
        }
        // Taken once: the next one is new.
        let next = Buf::scratch(DType::F32, 1000).unwrap();
        assert_ne!(ptr(&next), at);
        // Over 2 MiB of spares, the oldest go: three of 1 MiB keep the last one.
        let big: Vec<Buf> = (0..3).map(|_| Buf::scratch(DType::F32, 1 << 18).unwrap()).collect();
        let ptrs: Vec<_> = big.iter().map(ptr).collect();
        for b in big {
            b.recycle();
        }
        assert_eq!(Buf::spares(), (2, 2 << 20));
        let (a, b) = (
            Buf::scratch(DType::F32, 1 << 18).unwrap(),
            Buf::scratch(DType::F32, 1 << 18).unwrap(),
        );
        assert_eq!(Buf::spares(), (0, 0), "the oldest was dropped");
        assert_eq!(
            (ptr(&a), ptr(&b)),
            (ptrs[2], ptrs[1]),
            "the newest two are kept, newest first"
        );
    })
    .join()
    .unwrap();
}

/// The same program run again and again on one thread, on new data each
/// time and with its output stored in place: every run gives its own
/// result, and no run writes into an earlier run's output.
#[test]
fn repeated_runs_on_reused_tiles_give_their_own_results() {
    std::thread::spawn(|| {
        let n = 256u64;
        let mut p = Builder::new("again", &[1]);
        let x = p.param("x", DType::F32, n, Access::Read);
        let y = p.param("y", DType::F32, n, Access::Write);
        let vx = dense(&mut p, x, &[n], &[n as u32]);
        let vy = dense(&mut p, y, &[n], &[n as u32]);
        let t = p.load(vx, &[c(0)], false);
        let s = p.reduce(TileReduce::Sum, t, 0);
        let s = p.broadcast(s, &[n as u32]);
        let e = p.unary(UnaryOp::Exp, t);
        let out = p.binary(BinaryOp::Add, e, s);
        p.store(vy, &[c(0)], out, false);
        let program = p.finish().unwrap();
        let mut outputs = Vec::new();
        for k in 0..4u64 {
            let xs = sample_f32(n as usize, 1.0, 10 + k as u32);
            let mut o = HostBuffer::zeros(DType::F32, n as usize);
            run(&program, &[&HostBuffer::from_elements(&xs)], &mut [&mut o]).unwrap();
            let sum: f64 = xs.iter().map(|&v| f64::from(v)).sum();
            for (i, (&g, &x)) in o.to_vec::<f32>().iter().zip(&xs).enumerate() {
                let want = f64::from(x).exp() + sum;
                assert!(
                    (f64::from(g) - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "run {k}, {i}: {g} against {want}"
                );
            }
            outputs.push((o.to_vec::<f32>(), o));
        }
        for (k, (first, o)) in outputs.iter().enumerate() {
            assert_eq!(first, &o.to_vec::<f32>(), "run {k}'s output changed later");
        }
    })
    .join()
    .unwrap();
}
