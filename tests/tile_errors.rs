//! Where the reference documents say "undefined behavior", the host tile API
//! returns an error naming the operation, the index and the shapes.

use tilefuse::tile::{
    AtomicOp, MemoryOrder, Padding, PartitionView, TensorSpan, TensorSpanMut, ThreadScope, Tile, S1, S2,
};
use tilefuse::Error;

/// Asserts that `message` mentions every one of `parts`.
fn assert_mentions(err: &Error, parts: &[&str]) {
    let message = err.to_string();
    for part in parts {
        assert!(message.contains(part), "{message:?} does not mention {part:?}");
    }
}

#[test]
fn partition_index_outside_the_index_space() {
    let x: Vec<i32> = (0..32).collect();
    let p = PartitionView::new(TensorSpan::contiguous(&x, &[4, 8]).unwrap(), S2::<2, 2>).unwrap();
    let err = p.load([2, 0]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PartitionOutOfRange {
                op: "PartitionView::load",
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(
        &err,
        &["PartitionView::load", "[2, 0]", "[2, 4]", "[4, 8]", "tile [2, 2]"],
    );
    // Masking does not make a wholly outside partition valid.
    let err = p.load_masked(Padding::Zero, [0, 4]).unwrap_err();
    assert!(matches!(err, Error::PartitionOutOfRange { .. }), "{err:?}");
    assert_mentions(&err, &["PartitionView::load_masked", "[0, 4]"]);
}

#[test]
fn unmasked_access_to_a_partly_out_of_bounds_partition() {
    let mut x = [0u32; 12];
    let p = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[4, 3]).unwrap(), S2::<2, 2>).unwrap();
    assert!(!p.is_fully_in_bounds([0, 1]).unwrap());
    let full = Tile::full(7);
    let calls = [
        ("PartitionView::load", p.load([0, 1]).map(|_| ())),
        ("PartitionView::store", p.store(full, [0, 1])),
        (
            "PartitionView::atomic_load",
            p.atomic_load(MemoryOrder::Acquire, ThreadScope::Device, [0, 1])
                .map(|_| ()),
        ),
        (
            "PartitionView::atomic_store",
            p.atomic_store(full, MemoryOrder::Release, ThreadScope::Device, [0, 1]),
        ),
        (
            "PartitionView::atomic_add",
            p.atomic_add(full, MemoryOrder::Relaxed, ThreadScope::Block, [0, 1]),
        ),
    ];
    for (op, result) in calls {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::PartlyOutOfBounds { .. }), "{op}: {err:?}");
        assert_mentions(&err, &[op, "partition [0, 1]", "tensor [4, 3]", "tile [2, 2]"]);
    }
    drop(p);
    assert_eq!(x, [0; 12], "a failed call writes nothing");
}

#[test]
fn index_count_that_does_not_match_the_rank() {
    let x = [0f32; 12];
    let p = PartitionView::new(TensorSpan::contiguous(&x, &[4, 3]).unwrap(), S2::<2, 2>).unwrap();
    let err = p.load(&[0, 1, 0][..]).unwrap_err();
    assert!(matches!(err, Error::RankMismatch { given: 3, rank: 2, .. }), "{err:?}");
    assert_mentions(
        &err,
        &["PartitionView::load", "3 indices", "rank 2", "[4, 3]", "[2, 2]"],
    );
    // The span and the tile shape must agree too.
    let err = PartitionView::new(TensorSpan::contiguous(&x, &[12]).unwrap(), S2::<2, 2>).unwrap_err();
    assert!(matches!(err, Error::RankMismatch { given: 1, rank: 2, .. }), "{err:?}");
    assert_mentions(&err, &["PartitionView::new", "[12]", "[2, 2]"]);
}

#[test]
fn store_through_a_span_that_is_not_injective() {
    let mut x = [0i64; 8];
    // A zero stride on an axis longer than one: reading broadcasts, storing fails.
    let span = TensorSpanMut::strided(&mut x, 0, &[2, 4], &[0, 1]).unwrap();
    let p = PartitionView::new(span, S2::<2, 2>).unwrap();
    assert_eq!(p.load([0, 1]).unwrap(), Tile::from([[0, 0], [0, 0]]));
    let err = p.store(Tile::full(1), [0, 0]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotInjective {
                op: "PartitionView::store",
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["PartitionView::store", "[2, 4]", "[0, 1]"]);
    let err = p
        .atomic_add_masked(Tile::full(1), MemoryOrder::Relaxed, ThreadScope::Device, [0, 1])
        .unwrap_err();
    assert!(matches!(err, Error::NotInjective { .. }), "{err:?}");
    drop(p);
    // Overlapping strides without a zero: rows of 4 that start 2 apart.
    let span = TensorSpanMut::strided(&mut x, 0, &[3, 4], &[2, 1]).unwrap();
    assert!(!span.is_injective());
    let p = PartitionView::new(span, S2::<1, 2>).unwrap();
    let err = p.store_masked(Tile::full(1), [1, 1]).unwrap_err();
    assert_mentions(&err, &["PartitionView::store_masked", "[3, 4]", "[2, 1]"]);
    drop(p);
    assert_eq!(x, [0; 8]);
}

#[test]
fn span_outside_its_memory() {
    let x = [0u8; 31];
    let err = TensorSpan::contiguous(&x, &[4, 8]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SpanOutOfMemory {
                needed: 32,
                len: 31,
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["TensorSpan::contiguous", "[4, 8]", "32", "31"]);
    let mut y = [0u8; 10];
    let err = TensorSpanMut::strided(&mut y, 2, &[3], &[4]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SpanOutOfMemory {
                needed: 11,
                len: 10,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn memory_orders_and_scopes_the_operations_do_not_allow() {
    let mut x = [0i32; 4];
    let p = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[4]).unwrap(), S1::<2>).unwrap();
    let one = Tile::full(1);
    let cases = [
        (
            "PartitionView::atomic_load",
            "release",
            p.atomic_load(MemoryOrder::Release, ThreadScope::Device, [0])
                .map(|_| ()),
        ),
        (
            "PartitionView::atomic_load_masked",
            "weak",
            p.atomic_load_masked(Padding::Zero, MemoryOrder::Weak, ThreadScope::Device, [0])
                .map(|_| ()),
        ),
        (
            "PartitionView::atomic_store",
            "acquire",
            p.atomic_store(one, MemoryOrder::Acquire, ThreadScope::Device, [0]),
        ),
        (
            "PartitionView::atomic_store_masked",
            "acq_rel",
            p.atomic_store_masked(one, MemoryOrder::AcqRel, ThreadScope::Block, [0]),
        ),
        (
            "PartitionView::atomic_add",
            "acquire",
            p.atomic_add(one, MemoryOrder::Acquire, ThreadScope::Device, [0]),
        ),
        (
            "PartitionView::atomic_xor_masked",
            "release",
            p.atomic_xor_masked(one, MemoryOrder::Release, ThreadScope::Device, [0]),
        ),
        (
            "PartitionView::atomic_max",
            "relaxed",
            p.atomic_max(one, MemoryOrder::Relaxed, ThreadScope::System, [0]),
        ),
    ];
    for (op, order, result) in cases {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::InvalidOrdering { .. }), "{op}: {err:?}");
        assert_mentions(&err, &[op, order]);
    }
    // The allowed combinations go through.
    p.atomic_load(MemoryOrder::Acquire, ThreadScope::System, [1]).unwrap();
    p.atomic_store(one, MemoryOrder::Release, ThreadScope::Block, [1])
        .unwrap();
    p.atomic_min(one, MemoryOrder::Relaxed, ThreadScope::Block, [1])
        .unwrap();
    drop(p);
    assert_eq!(x, [0, 0, 1, 1], "only the allowed calls wrote");
}

#[test]
fn element_type_an_atomic_does_not_support() {
    let mut x = [1.5f32; 4];
    let p = PartitionView::new(TensorSpanMut::contiguous(&mut x, &[4]).unwrap(), S1::<2>).unwrap();
    let two = Tile::full(2.0f32);
    let err = p
        .atomic_update(AtomicOp::And, two, MemoryOrder::Relaxed, ThreadScope::Device, [1])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsupportedDType {
                op: "PartitionView::atomic_and",
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["PartitionView::atomic_and", "f32", "integer"]);
    let err = p
        .atomic_update_masked(AtomicOp::Max, two, MemoryOrder::Relaxed, ThreadScope::Device, [1])
        .unwrap_err();
    assert_mentions(&err, &["PartitionView::atomic_max_masked", "f32"]);
    // Add is supported for f32, through the same entry point.
    p.atomic_update(AtomicOp::Add, two, MemoryOrder::Relaxed, ThreadScope::Device, [1])
        .unwrap();
    drop(p);
    assert_eq!(x, [1.5, 1.5, 3.5, 3.5]);

    let mut b = [true; 2];
    let p = PartitionView::new(TensorSpanMut::contiguous(&mut b, &[2]).unwrap(), S1::<2>).unwrap();
    let err = p
        .atomic_update(
            AtomicOp::Or,
            Tile::full(false),
            MemoryOrder::Relaxed,
            ThreadScope::Device,
            [0],
        )
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedDType { .. }), "{err:?}");
    assert_mentions(&err, &["bool"]);
}

#[test]
fn padding_the_element_type_has_no_value_for() {
    let x = [1i32, 2, 3];
    let p = PartitionView::new(TensorSpan::contiguous(&x, &[3]).unwrap(), S1::<2>).unwrap();
    let err = p.load_masked(Padding::Nan, [1]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::IncompatiblePadding {
                padding: Padding::Nan,
                element: "i32",
                ..
            }
        ),
        "{err:?}"
    );
    assert_mentions(&err, &["PartitionView::load_masked", "nan", "i32", "[3]", "[2]"]);
    assert_eq!(p.load_masked(Padding::Zero, [1]).unwrap(), Tile::from([3, 0]));
}
