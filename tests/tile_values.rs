//! `Tile<E, S>` as a value: constructors, conversions, operators,
//! comparisons and reductions.

use half::{bf16, f16};
use tilefuse::tile::{Tile, S0, S1, S2, S3, S5};

#[test]
fn constructors_fill_in_row_major_order() {
    assert_eq!(Tile::<u8, S2<2, 3>>::iota().as_slice(), &[0, 1, 2, 3, 4, 5]);
    assert_eq!(
        Tile::<f16, S1<3>>::iota(),
        Tile::from([0.0, 1.0, 2.0].map(f16::from_f32))
    );
    assert_eq!(Tile::<bool, S1<2>>::zeros(), Tile::from([false, false]));
    assert_eq!(Tile::<i64, S0>::full(-3).item(), -3);
    let t = Tile::<i32, S3<2, 2, 2>>::from([[[0, 1], [2, 3]], [[4, 5], [6, 7]]]);
    assert_eq!(t, Tile::iota());
    assert_eq!(t.get(&[1, 0, 1]), Some(5));
    assert_eq!(t.get(&[1, 2, 0]), None);
    assert_eq!(t.get(&[1, 0]), None);
    assert_eq!(
        Tile::<u16, S2<1, 2>>::from_slice(&[4, 5]).unwrap(),
        Tile::from([[4, 5]])
    );
    assert!(Tile::<u16, S2<1, 2>>::from_slice(&[4, 5, 6]).is_err());
    let five = Tile::from([[[[[1u64, 2]]]]]);
    let _: &Tile<u64, S5<1, 1, 1, 1, 2>> = &five;
    assert_eq!(five.shape(), &[1, 1, 1, 1, 2]);
}

#[test]
fn widening_conversions_go_through_from() {
    let a = Tile::from([[-1i16, 300]]);
    let b: Tile<i32, S2<1, 2>> = a.into();
    let c: Tile<i64, S2<1, 2>> = b.into();
    assert_eq!(c, Tile::from([[-1i64, 300]]));
    let h = Tile::from([f16::from_f32(0.5), f16::MAX]);
    let f: Tile<f32, S1<2>> = h.into();
    assert_eq!(f, Tile::from([0.5f32, 65504.0]));
    let d: Tile<f64, S1<2>> = f.into();
    assert_eq!(d.as_slice(), &[0.5, 65504.0]);
    let flags: Tile<u8, S1<2>> = Tile::from([true, false]).into();
    assert_eq!(flags, Tile::from([1u8, 0]));
    assert_eq!(u64::from(Tile::from([[7u32]])), 7);
    assert_eq!(i32::from(Tile::from(9i32)), 9);
}

#[test]
fn narrowing_conversions_are_explicit_and_defined() {
    let wide = Tile::from([300i32, -1, 1 << 20]);
    assert_eq!(wide.convert::<u8>(), Tile::from([44u8, 255, 0]));
    assert_eq!(wide.convert::<i16>(), Tile::from([300i16, -1, 0]));
    let floats = Tile::from([2.7f64, -2.7, 1e10, f64::NAN]);
    assert_eq!(floats.convert::<i32>(), Tile::from([2, -2, i32::MAX, 0]));
    assert_eq!(floats.convert::<bool>(), Tile::from([true, true, true, true]));
    assert_eq!(Tile::from([16_777_217i64]).convert::<f32>().item(), 16_777_216.0);
    assert_eq!(
        Tile::from([1.0f32 / 3.0]).convert::<bf16>().item(),
        bf16::from_f32(1.0 / 3.0)
    );
    assert_eq!(Tile::from([[2.5f32]]).into_scalar::<i8>(), 2);
}

#[test]
fn arithmetic_with_tiles_and_scalars_on_either_side() {
    let a = Tile::from([[1, 2], [3, 4]]);
    let b = Tile::from([[10, 20], [30, 40]]);
    assert_eq!(a + b, Tile::from([[11, 22], [33, 44]]));
    assert_eq!(b - a, Tile::from([[9, 18], [27, 36]]));
    assert_eq!(a * b, Tile::from([[10, 40], [90, 160]]));
    assert_eq!(b / a, Tile::from([[10, 10], [10, 10]]));
    assert_eq!(b % 7, Tile::from([[3, 6], [2, 5]]));
    assert_eq!(a * 2, 2 * a);
    assert_eq!(100 - a, Tile::from([[99, 98], [97, 96]]));
    assert_eq!(12 / a, Tile::from([[12, 6], [4, 3]]));
    assert_eq!(-a, Tile::from([[-1, -2], [-3, -4]]));
    // Integer arithmetic wraps.
    assert_eq!(Tile::from([250u8]) + 10, Tile::from([4u8]));
    assert_eq!(-Tile::from([i32::MIN]), Tile::from([i32::MIN]));
    // f16 computes in f32 and rounds once.
    let h = Tile::from([f16::from_f32(1.0)]) + f16::from_f32(0.000_5);
    assert_eq!(h.item(), f16::from_f32(1.0 + 0.000_5));
    assert_eq!(Tile::from([7.5f64]) % 2.0, Tile::from([1.5]));
}

#[test]
fn bitwise_operators_on_integers_and_bools() {
    let a = Tile::from([0b1100u32, 0b1010]);
    assert_eq!(a & 0b1000, Tile::from([0b1000, 0b1000]));
    assert_eq!(a | Tile::from([1, 1]), Tile::from([0b1101, 0b1011]));
    assert_eq!(0b0110 ^ a, Tile::from([0b1010, 0b1100]));
    assert_eq!(!Tile::from([0u8]), Tile::from([255u8]));
    let p = Tile::from([true, true, false, false]);
    let q = Tile::from([true, false, true, false]);
    assert_eq!(p & q, Tile::from([true, false, false, false]));
    assert_eq!(p | q, Tile::from([true, true, true, false]));
    assert_eq!(p ^ q, Tile::from([false, true, true, false]));
    assert_eq!(!p, Tile::from([false, false, true, true]));
}

#[test]
fn comparisons_give_bool_tiles() {
    let a = Tile::from([1.0f32, 2.0, f32::NAN]);
    let b = Tile::from([2.0f32, 2.0, 2.0]);
    assert_eq!(a.eq(b), Tile::from([false, true, false]));
    assert_eq!(a.ne(b), Tile::from([true, false, true]));
    assert_eq!(a.lt(b), Tile::from([true, false, false]));
    assert_eq!(a.le(2.0), Tile::from([true, true, false]));
    assert_eq!(a.gt(1.0), Tile::from([false, true, false]));
    assert_eq!(a.ge(b), Tile::from([false, true, false]));
}

#[test]
fn reductions_keep_the_axis_with_extent_one() {
    let a = Tile::from([[1, 2, 3], [4, 5, 6]]);
    let rows: Tile<i32, S2<2, 1>> = a.reduce_sum::<1>();
    assert_eq!(rows, Tile::from([[6], [15]]));
    let cols: Tile<i32, S2<1, 3>> = a.reduce_prod::<0>();
    assert_eq!(cols, Tile::from([[4, 10, 18]]));
    assert_eq!(a.reduce_max::<0>(), Tile::from([[4, 5, 6]]));
    assert_eq!(a.reduce_min::<1>(), Tile::from([[1], [4]]));
    let t = Tile::<i64, S3<2, 3, 4>>::iota();
    assert_eq!(t.reduce_sum::<1>().as_slice(), &[12, 15, 18, 21, 48, 51, 54, 57]);
    // NaN propagates through max and min; an empty axis gives the identity.
    let f = Tile::from([[1.0f32, f32::NAN], [3.0, 2.0]]);
    let m = f.reduce_max::<1>();
    assert!(m.get(&[0, 0]).unwrap().is_nan());
    assert_eq!(m.get(&[1, 0]), Some(3.0));
    assert_eq!(
        Tile::<f32, S2<2, 0>>::zeros().reduce_max::<1>(),
        Tile::full(f32::NEG_INFINITY)
    );
    assert_eq!(Tile::<u8, S1<0>>::zeros().reduce_prod::<0>(), Tile::from([1]));
    // f16 sums accumulate in f32: 4096 ones sum exactly past f16's 2048 step.
    let ones = Tile::<f16, S1<4096>>::full(f16::ONE);
    assert_eq!(ones.reduce_sum::<0>().item(), f16::from_f32(4096.0));
    assert_eq!(
        Tile::from([f16::ONE, f16::ONE]).maximum(f16::from_f32(1.5)),
        Tile::full(f16::from_f32(1.5))
    );
    assert_eq!(Tile::from([4, -2]).minimum(0), Tile::from([0, -2]));
}

#[test]
fn copies_are_independent_values() {
    let a = Tile::<u32, S2<2, 2>>::full(1);
    let mut b = a;
    b = b + 1;
    assert_eq!(a, Tile::full(1));
    assert_eq!(b, Tile::full(2));
    assert_eq!(std::mem::size_of::<Tile<u16, S2<3, 5>>>(), 30);
    assert_eq!(format!("{:?}", Tile::from([1u8, 2])), "Tile<u8, [2]>[1, 2]");
}
