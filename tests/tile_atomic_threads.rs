//! Eight threads update one partition at once; the atomics must lose no
//! update. Each test's values make the exact result computable and different
//! if any single update were lost.

use half::{bf16, f16};
use tilefuse::tile::{
    AtomicArith, MemoryOrder::Relaxed, PartitionView, TensorSpanMut, ThreadScope::Device, Tile, TileElement, S2,
};

const THREADS: u64 = 8;
const ROUNDS: u64 = 10_000;

type View<'a, E> = PartitionView<TensorSpanMut<'a, E>, S2<2, 2>>;

/// Runs `update(view, thread, round)` for every thread and round, all threads
/// at once, on partition (0, 1) of a 2 × 4 buffer that starts as `init`, and
/// returns the buffer.
fn hammer<E: TileElement>(init: E, rounds: u64, update: impl Fn(&View<'_, E>, u64, u64) + Sync) -> [E; 8] {
    let mut x = [init; 8];
    let view = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[2, 4]).unwrap(), S2::<2, 2>).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (view, update) = (&view, &update);
            s.spawn(move || (0..rounds).for_each(|k| update(view, t, k)));
        }
    });
    drop(view);
    x
}

/// Asserts that partition (0, 1) of `x` holds `want` and the rest `init`.
fn assert_partition<E: TileElement>(x: [E; 8], init: E, want: E) {
    assert_eq!(x, [init, init, want, want, init, init, want, want]);
}

#[test]
fn atomic_add_from_eight_threads_is_exact() {
    let x = hammer(5u64, ROUNDS, |p, t, k| {
        p.atomic_add(Tile::full(k + t), Relaxed, Device, [0, 1]).unwrap()
    });
    let want = 5 + (0..THREADS).flat_map(|t| (0..ROUNDS).map(move |k| k + t)).sum::<u64>();
    assert_partition(x, 5, want);
}

#[test]
fn atomic_sub_from_eight_threads_is_exact() {
    let x = hammer(0i32, ROUNDS, |p, t, k| {
        p.atomic_sub(Tile::full((k % 7 + t) as i32), Relaxed, Device, [0, 1])
            .unwrap()
    });
    let want = -(0..THREADS)
        .flat_map(|t| (0..ROUNDS).map(move |k| (k % 7 + t) as i32))
        .sum::<i32>();
    assert_partition(x, 0, want);
}

#[test]
fn atomic_max_and_min_from_eight_threads() {
    // Values rise with the round, so the greatest comes last from every
    // thread; a lost update would leave a smaller value behind.
    let x = hammer(0u32, ROUNDS, |p, t, k| {
        p.atomic_max(Tile::full((k * THREADS + t) as u32), Relaxed, Device, [0, 1])
            .unwrap()
    });
    assert_partition(x, 0, ((ROUNDS - 1) * THREADS + THREADS - 1) as u32);
    let x = hammer(i64::MAX, ROUNDS, |p, t, k| {
        let v = -((k * THREADS + t) as i64);
        p.atomic_min(Tile::full(v), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, i64::MAX, -(((ROUNDS - 1) * THREADS + THREADS - 1) as i64));
}

#[test]
fn atomic_and_or_xor_from_eight_threads() {
    // Each thread owns eight bits and clears, sets or flips one of them per round.
    let bit = |t: u64, k: u64| 1u64 << (8 * t + k % 8);
    let x = hammer(u64::MAX, ROUNDS, |p, t, k| {
        p.atomic_and(Tile::full(!bit(t, k)), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, u64::MAX, 0);
    let x = hammer(0u64, ROUNDS, |p, t, k| {
        p.atomic_or(Tile::full(bit(t, k)), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, 0, u64::MAX);
    // Xor with values that differ per thread and round: the result is the xor
    // of them all, which a lost update would change.
    let value = |t: u64, k: u64| (t << 40) | (k * 2_654_435_761 % 1_000_003);
    let x = hammer(0u64, ROUNDS, |p, t, k| {
        p.atomic_xor(Tile::full(value(t, k)), Relaxed, Device, [0, 1]).unwrap()
    });
    let want = (0..THREADS)
        .flat_map(|t| (0..ROUNDS).map(move |k| value(t, k)))
        .fold(0, |a, v| a ^ v);
    assert_partition(x, 0, want);
}

#[test]
fn float_atomic_add_from_eight_threads_is_exact() {
    let x = hammer(0.0f32, ROUNDS, |p, _, _| {
        p.atomic_add(Tile::full(1.0f32), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, 0.0, (THREADS * ROUNDS) as f32);
    let x = hammer(0.25f64, ROUNDS, |p, _, k| {
        let v = if k % 2 == 0 { 0.5 } else { -0.25 };
        p.atomic_add(Tile::full(v), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, 0.25, 0.25 + (THREADS * ROUNDS / 2) as f64 * 0.25);
}

/// Adds 1 `rounds` times from each thread, in a type whose integers are exact
/// up to the total.
fn count_up<E: AtomicArith>(rounds: u64) -> [E; 8] {
    let one: E = 1u8.convert();
    hammer(E::default(), rounds, |p, _, _| {
        p.atomic_add(Tile::full(one), Relaxed, Device, [0, 1]).unwrap()
    })
}

#[test]
fn half_precision_atomic_add_from_eight_threads_is_exact() {
    // f16 holds every integer up to 2048 and bf16 up to 256.
    assert_partition(count_up::<f16>(256), f16::ZERO, f16::from_f32(2048.0));
    assert_partition(count_up::<bf16>(32), bf16::ZERO, bf16::from_f32(256.0));
    let x = hammer(f16::from_f32(2048.0), 250, |p, _, _| {
        p.atomic_sub(Tile::full(f16::ONE), Relaxed, Device, [0, 1]).unwrap()
    });
    assert_partition(x, f16::from_f32(2048.0), f16::from_f32(48.0));
}
