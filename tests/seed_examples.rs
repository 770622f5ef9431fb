//! Every "Example" block of the two CUDA Tile reference documents
//! (`shared/reference/cuda-tile-tile.txt` and
//! `shared/reference/cuda-tile-partition-view.txt`), with its exact input and
//! exact expected output, one test each, named after the section it is in.

use half::f16;
use tilefuse::tile::{
    MemoryOrder::Relaxed, Padding, PartitionView, TensorSpan, TensorSpanMut, ThreadScope::Device, Tile, TileElement,
    S0, S1, S2,
};

/// Asserts two equally long float slices are equal, NaN matching NaN.
fn assert_same_floats(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    let same = got.iter().zip(want).all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
    assert!(same, "got {got:?}, want {want:?}");
}

/// A view of the 1D `x` (of the atomic examples) in partitions of 2.
fn view_1d<E: TileElement>(x: &mut [E]) -> PartitionView<TensorSpanMut<'_, E>, S1<2>> {
    PartitionView::new(TensorSpanMut::contiguous(x, &[4]).unwrap(), S1::<2>).unwrap()
}

/// A view of the 4 × 3 `x` (of the masked atomic examples) in 2 × 2 partitions.
fn view_4x3<E: TileElement>(x: &mut [[E; 3]; 4]) -> PartitionView<TensorSpanMut<'_, E>, S2<2, 2>> {
    PartitionView::new(
        TensorSpanMut::contiguous(x.as_flattened_mut(), &[4, 3]).unwrap(),
        S2::<2, 2>,
    )
    .unwrap()
}

/// The 4 × 8 array of the partition view, load and store examples.
fn x_4x8() -> [[i32; 8]; 4] {
    [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [8, 9, 10, 11, 12, 13, 14, 15],
        [16, 17, 18, 19, 20, 21, 22, 23],
        [24, 25, 26, 27, 28, 29, 30, 31],
    ]
}

// ---- cuda-tile-tile.txt ----

#[test]
fn tile_example_iota_and_deep_copy() {
    let x = Tile::<i32, S2<2, 2>>::iota();
    let y = x;
    assert_eq!(x.as_slice(), &[0, 1, 2, 3]);
    assert_eq!(y, Tile::from([[0, 1], [2, 3]]));
    // The copies stay independent: a new value built from one leaves the other.
    let y = y + 10;
    assert_eq!(x, Tile::from([[0, 1], [2, 3]]));
    assert_eq!(y, Tile::from([[10, 11], [12, 13]]));
}

#[test]
fn conversions_from_tile_like_example() {
    let x = Tile::<i32, S0>::from(2);
    assert_eq!(x.item(), 2);
    let y = Tile::<i32, S2<4, 4>>::full(2);
    // Integer to float narrows in C++ terms, so it is an explicit call.
    let z: Tile<f32, S2<4, 4>> = y.convert();
    assert_eq!(z, Tile::from([[2.0f32; 4]; 4]));
    assert_eq!(z.as_slice(), &[2.0f32; 16]);
}

#[test]
fn construction_from_a_constant_array_example() {
    let v = Tile::<i32, S1<4>>::from([1, 2, 3, 4]);
    assert_eq!(v.as_slice(), &[1, 2, 3, 4]);
    let m = Tile::<f32, S2<2, 2>>::from([[0.0f32, 1.0], [2.0, 3.0]]);
    assert_eq!(m.as_slice(), &[0.0, 1.0, 2.0, 3.0]);
    assert_eq!(m.get(&[1, 0]), Some(2.0));
    // A narrowing source (i32 to i8) needs the explicit conversion.
    let b: Tile<i8, S1<4>> = Tile::from([1i32, 2, 3, 4]).convert();
    assert_eq!(b.as_slice(), &[1i8, 2, 3, 4]);
}

#[test]
fn conversions_to_scalars_example() {
    let x = Tile::<f32, S2<1, 1>>::full(2.0);
    let y = f64::from(x);
    assert_eq!(y, 2.0f64);
    let z: f64 = x.into();
    assert_eq!(z, 2.0);
    assert_eq!(x.into_scalar::<f16>(), f16::from_f32(2.0));
}

#[test]
fn deduction_guide_scalar_example() {
    let x = Tile::from(2);
    let deduced: &Tile<i32, S0> = &x;
    assert_eq!(deduced.shape(), &[] as &[usize]);
    assert_eq!(deduced.as_slice(), &[2]);
}

#[test]
fn deduction_guide_nested_array_example() {
    let x = Tile::from([[0, 1, 2, 3], [10, 11, 12, 13]]);
    let deduced: &Tile<i32, S2<2, 4>> = &x;
    assert_eq!(deduced.shape(), &[2, 4]);
    assert_eq!(deduced.as_slice(), &[0, 1, 2, 3, 10, 11, 12, 13]);
}

// ---- cuda-tile-partition-view.txt ----

#[test]
fn partition_view_example_load() {
    let x = x_4x8();
    let t = TensorSpan::contiguous(x.as_flattened(), &[4, 8]).unwrap();
    let p = PartitionView::new(t, S2::<2, 2>).unwrap();
    let r = p.load([1, 2]).unwrap();
    assert_eq!(r, Tile::from([[20, 21], [28, 29]]));
}

#[test]
fn loads_example_nan_padded_masked_load() {
    let x: [[f32; 11]; 4] = [
        [0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10.],
        [11., 12., 13., 14., 15., 16., 17., 18., 19., 20., 21.],
        [22., 23., 24., 25., 26., 27., 28., 29., 30., 31., 32.],
        [33., 34., 35., 36., 37., 38., 39., 40., 41., 42., 43.],
    ];
    let t = TensorSpan::contiguous(x.as_flattened(), &[4, 11]).unwrap();
    let p = PartitionView::new(t, S2::<2, 4>).unwrap();
    let r = p.load_masked(Padding::Nan, [0, 2]).unwrap();
    let nan = f32::NAN;
    assert_same_floats(r.as_slice(), &[8., 9., 10., nan, 19., 20., 21., nan]);
}

#[test]
fn stores_example() {
    let mut x = x_4x8();
    {
        let t = TensorSpanMut::contiguous(x.as_flattened_mut(), &[4, 8]).unwrap();
        let p = PartitionView::new(t, S2::<2, 2>).unwrap();
        let a = 100 * Tile::<i32, S2<2, 2>>::iota();
        assert_eq!(a, Tile::from([[0, 100], [200, 300]]));
        p.store(a, [1, 3]).unwrap();
    }
    let want = [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [8, 9, 10, 11, 12, 13, 14, 15],
        [16, 17, 18, 19, 20, 21, 0, 100],
        [24, 25, 26, 27, 28, 29, 200, 300],
    ];
    assert_eq!(x, want);
}

/// The 4 × 3 array of the masked and, or and xor examples.
const BITS_4X3: [[i32; 3]; 4] = [
    [1, 2, 0b10101010],
    [3, 4, 0b11001100],
    [5, 6, 0b11110000],
    [7, 8, 0b00110011],
];

#[test]
fn atomic_and_example() {
    let mut x = [0x1, 0x2, 0b10101010, 0b01010101];
    let a = Tile::<i32, S1<2>>::full(0b00001111);
    view_1d(&mut x).atomic_and(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 0b00001010, 0b00000101]);
}

#[test]
fn atomic_and_masked_example() {
    let mut x = BITS_4X3;
    let a = Tile::<i32, S2<2, 2>>::full(0b00001111);
    view_4x3(&mut x).atomic_and_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(
        x,
        [
            [1, 2, 0b00001010],
            [3, 4, 0b00001100],
            [5, 6, 0b11110000],
            [7, 8, 0b00110011]
        ]
    );
}

#[test]
fn atomic_or_example() {
    let mut x = [0x1, 0x2, 0b10101010, 0b01010101];
    let a = Tile::<i32, S1<2>>::full(0b00001111);
    view_1d(&mut x).atomic_or(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 0b10101111, 0b01011111]);
}

#[test]
fn atomic_or_masked_example() {
    let mut x = BITS_4X3;
    let a = Tile::<i32, S2<2, 2>>::full(0b00001111);
    view_4x3(&mut x).atomic_or_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(
        x,
        [
            [1, 2, 0b10101111],
            [3, 4, 0b11001111],
            [5, 6, 0b11110000],
            [7, 8, 0b00110011]
        ]
    );
}

#[test]
fn atomic_xor_example() {
    let mut x = [0x1, 0x2, 0b10101010, 0b01010101];
    let a = Tile::<i32, S1<2>>::full(0b11111111);
    view_1d(&mut x).atomic_xor(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 0b01010101, 0b10101010]);
}

#[test]
fn atomic_xor_masked_example() {
    let mut x = BITS_4X3;
    let a = Tile::<i32, S2<2, 2>>::full(0b11111111);
    view_4x3(&mut x).atomic_xor_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(
        x,
        [
            [1, 2, 0b01010101],
            [3, 4, 0b00110011],
            [5, 6, 0b11110000],
            [7, 8, 0b00110011]
        ]
    );
}

#[test]
fn atomic_max_example() {
    let mut x = [1u32, 2, 3, 6];
    let a = Tile::<u32, S1<2>>::full(4);
    view_1d(&mut x).atomic_max(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 4, 6]);
}

#[test]
fn atomic_max_masked_example() {
    let mut x: [[u32; 3]; 4] = [[1, 2, 3], [3, 4, 6], [5, 6, 2], [7, 8, 8]];
    let a = Tile::<u32, S2<2, 2>>::full(4);
    view_4x3(&mut x).atomic_max_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(x, [[1, 2, 4], [3, 4, 6], [5, 6, 2], [7, 8, 8]]);
}

#[test]
fn atomic_min_example() {
    let mut x = [1u32, 2, 3, 6];
    let a = Tile::<u32, S1<2>>::full(4);
    view_1d(&mut x).atomic_min(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 3, 4]);
}

#[test]
fn atomic_min_masked_example() {
    let mut x: [[u32; 3]; 4] = [[1, 2, 3], [3, 4, 6], [5, 6, 2], [7, 8, 8]];
    let a = Tile::<u32, S2<2, 2>>::full(4);
    view_4x3(&mut x).atomic_min_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(x, [[1, 2, 3], [3, 4, 4], [5, 6, 2], [7, 8, 8]]);
}

#[test]
fn atomic_add_example() {
    let mut x = [1u32, 2, 3, 4];
    let a = Tile::<u32, S1<2>>::full(10);
    view_1d(&mut x).atomic_add(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 13, 14]);
}

#[test]
fn atomic_add_masked_example() {
    let mut x: [[u32; 3]; 4] = [[1, 2, 1], [3, 4, 2], [5, 6, 3], [7, 8, 4]];
    let a = Tile::<u32, S2<2, 2>>::full(10);
    view_4x3(&mut x).atomic_add_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(x, [[1, 2, 11], [3, 4, 12], [5, 6, 3], [7, 8, 4]]);
}

#[test]
fn atomic_sub_example() {
    let mut x = [1u32, 2, 3, 4];
    let a = Tile::<u32, S1<2>>::full(3);
    view_1d(&mut x).atomic_sub(a, Relaxed, Device, [1]).unwrap();
    assert_eq!(x, [1, 2, 0, 1]);
}

#[test]
fn atomic_sub_masked_example() {
    let mut x: [[u32; 3]; 4] = [[1, 2, 5], [3, 4, 8], [5, 6, 6], [7, 8, 9]];
    let a = Tile::<u32, S2<2, 2>>::full(3);
    view_4x3(&mut x).atomic_sub_masked(a, Relaxed, Device, [0, 1]).unwrap();
    assert_eq!(x, [[1, 2, 2], [3, 4, 5], [5, 6, 6], [7, 8, 9]]);
}
