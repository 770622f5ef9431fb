//! Property tests of the partition view mapping `p(I, J) = I·S + J` against
//! a plain index formula, over random extents, permuted, gapped, negative and
//! zero strides, offsets, tile shapes and partition indices (ragged edges
//! included). Loads must return exactly the data inside and the padding
//! outside; stores must write exactly the mapped elements and nothing else in
//! the whole buffer, gaps between strided elements included.

use proptest::prelude::*;
use tilefuse::tile::{Padding, PartitionView, TensorSpan, TensorSpanMut, Tile, TileShape, S1, S2, S3, S4};
use tilefuse::Error;

/// A random span over a buffer, and the seeds of a partition index.
#[derive(Debug, Clone)]
struct Case {
    extents: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
    len: usize,
    index_seeds: Vec<u32>,
    padding: Padding,
}

const PADDINGS: [Padding; 5] = [
    Padding::Zero,
    Padding::NegZero,
    Padding::Nan,
    Padding::PosInf,
    Padding::NegInf,
];

/// Spans of rank `rank`: axes nested in a random order, with gaps between
/// them, some axes reversed (negative strides) and a few broadcast (stride 0).
fn cases(rank: usize) -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1usize..=7, rank),
        Just((0..rank).collect::<Vec<_>>()).prop_shuffle(),
        prop::collection::vec(0usize..=2, rank),
        prop::collection::vec(prop::bool::weighted(0.3), rank),
        prop::collection::vec(prop::bool::weighted(0.1), rank),
        (0usize..=3, 0usize..=3),
        prop::collection::vec(any::<u32>(), rank),
        0..PADDINGS.len(),
    )
        .prop_map(
            |(extents, order, gaps, reversed, broadcast, (lead, trail), index_seeds, pad)| {
                let mut strides = vec![0isize; extents.len()];
                let mut step = 1usize;
                for &axis in order.iter().rev() {
                    let stride = step * (1 + gaps[axis]);
                    step = stride * extents[axis];
                    strides[axis] = if broadcast[axis] {
                        0
                    } else if reversed[axis] {
                        -(stride as isize)
                    } else {
                        stride as isize
                    };
                }
                let reach = |negative: bool| -> usize {
                    let far = extents.iter().zip(&strides).filter(|(_, &s)| (s < 0) == negative);
                    far.map(|(&e, &s)| (e - 1) * s.unsigned_abs()).sum()
                };
                let offset = lead + reach(true);
                let len = offset + reach(false) + 1 + trail;
                Case {
                    extents,
                    strides,
                    offset,
                    len,
                    index_seeds,
                    padding: PADDINGS[pad],
                }
            },
        )
}

/// The element a span of `case` maps `index` to, by the plain formula.
fn element_of(case: &Case, index: &[usize]) -> usize {
    let delta: isize = index.iter().zip(&case.strides).map(|(&i, &s)| i as isize * s).sum();
    (case.offset as isize + delta) as usize
}

/// Whether two floats are the same value, sign of zero and NaN included.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// For tile shape `S`: the index space, loads (masked and not) and stores
/// (masked and not) of one partition of the span `case` describes.
fn check<S: TileShape>(case: &Case) {
    let tile = S::EXTENTS;
    let buffer: Vec<f32> = (0..case.len).map(|i| 1000.0 + i as f32).collect();
    let span = TensorSpan::strided(&buffer, case.offset, &case.extents, &case.strides).unwrap();
    let view = PartitionView::new(span, S::default()).unwrap();

    let space: Vec<usize> = case.extents.iter().zip(tile).map(|(&e, &s)| e.div_ceil(s)).collect();
    assert_eq!(view.index_space().as_slice(), space.as_slice());
    let index: Vec<usize> = case
        .index_seeds
        .iter()
        .zip(&space)
        .map(|(&r, &n)| r as usize % n)
        .collect();
    let inside_all = index
        .iter()
        .zip(tile)
        .zip(&case.extents)
        .all(|((&i, &s), &e)| (i + 1) * s <= e);
    assert_eq!(view.is_fully_in_bounds(&index[..]).unwrap(), inside_all);

    // Where each element of the tile lands: `Some(memory element)` or `None` outside.
    let mut targets = Vec::new();
    let mut within = vec![0usize; S::RANK];
    for j in 0..S::SIZE {
        let mut rest = j;
        for k in (0..S::RANK).rev() {
            within[k] = rest % tile[k];
            rest /= tile[k];
        }
        let mapped: Vec<usize> = (0..S::RANK).map(|k| index[k] * tile[k] + within[k]).collect();
        let inside = mapped.iter().zip(&case.extents).all(|(p, e)| p < e);
        targets.push(inside.then(|| element_of(case, &mapped)));
    }

    let pad = case.padding.value() as f32;
    let masked = view.load_masked(case.padding, &index[..]).unwrap();
    for (j, target) in targets.iter().enumerate() {
        let want = target.map_or(pad, |o| buffer[o]);
        assert!(same(masked.as_slice()[j], want), "element {j}: {masked:?}, want {want}");
    }
    match view.load(&index[..]) {
        Ok(t) => assert!(inside_all && t == masked, "{t:?} vs {masked:?}"),
        Err(e) => assert!(!inside_all && matches!(e, Error::PartlyOutOfBounds { .. }), "{e:?}"),
    }

    // Stores: a tile of negative values, so every write is visible.
    let value = Tile::<f32, S>::from_fn(|j| -1.0 - j as f32);
    for masked_store in [true, false] {
        let mut memory = buffer.clone();
        let span = TensorSpanMut::strided(&mut memory, case.offset, &case.extents, &case.strides).unwrap();
        let injective = span.is_injective();
        let view = PartitionView::new(span, S::default()).unwrap();
        let result = if masked_store {
            view.store_masked(value, &index[..])
        } else {
            view.store(value, &index[..])
        };
        drop(view);
        let mut want = buffer.clone();
        match result {
            Ok(()) => {
                assert!(injective && (masked_store || inside_all));
                for (j, target) in targets.iter().enumerate() {
                    if let Some(o) = target {
                        want[*o] = value.as_slice()[j];
                    }
                }
            }
            Err(Error::NotInjective { .. }) => assert!(!injective),
            Err(Error::PartlyOutOfBounds { .. }) => assert!(!masked_store && !inside_all),
            Err(e) => panic!("unexpected {e:?}"),
        }
        assert_eq!(memory, want, "the whole buffer after a store (masked: {masked_store})");
    }

    // The first index past the index space is rejected on every axis.
    for k in 0..S::RANK {
        let mut outside = index.clone();
        outside[k] = space[k];
        let err = view.load_masked(Padding::Zero, &outside[..]).unwrap_err();
        assert!(matches!(err, Error::PartitionOutOfRange { .. }), "{err:?}");
    }
}

/// Whether the strides of a case map two indices of its extents to one element.
fn broadcasts(case: &Case) -> bool {
    case.extents.iter().zip(&case.strides).any(|(&e, &s)| e > 1 && s == 0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn rank_1_tiles_of_3(case in cases(1)) {
        check::<S1<3>>(&case);
    }

    #[test]
    fn rank_2_tiles_of_2x3(case in cases(2)) {
        check::<S2<2, 3>>(&case);
    }

    #[test]
    fn rank_2_tiles_of_4x1(case in cases(2)) {
        check::<S2<4, 1>>(&case);
    }

    #[test]
    fn rank_3_tiles_of_2x1x3(case in cases(3)) {
        check::<S3<2, 1, 3>>(&case);
    }

    #[test]
    fn rank_4_tiles_of_1x2x2x3(case in cases(4)) {
        check::<S4<1, 2, 2, 3>>(&case);
    }

    #[test]
    fn injectivity_matches_a_brute_force_count(case in cases(3)) {
        let buffer = vec![0u8; case.len];
        let mut seen = std::collections::HashSet::new();
        let (e0, e1, e2) = (case.extents[0], case.extents[1], case.extents[2]);
        let mut distinct = true;
        for i in 0..e0 {
            for j in 0..e1 {
                for k in 0..e2 {
                    distinct &= seen.insert(element_of(&case, &[i, j, k]));
                }
            }
        }
        let mut memory = buffer.clone();
        let span = TensorSpanMut::strided(&mut memory, case.offset, &case.extents, &case.strides).unwrap();
        prop_assert_eq!(span.is_injective(), distinct);
        prop_assert_eq!(distinct, !broadcasts(&case));
    }
}
