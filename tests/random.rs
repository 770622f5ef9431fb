//! Random tensors generated inside kernels: `rand`'s values are
//! Philox-4x32-10 of each element's position and the seed, bit for bit
//! (every float dtype, through views, fused with other work); their
//! statistics; `bernoulli` and `dropout`, whose masks are never stored;
//! misuse as errors naming the op.

use tilefuse::philox::{significand_bits, uniform};
use tilefuse::{DType, Error, Tensor};

fn f64s(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).to_vec::<f64>().unwrap()
}

#[test]
fn rand_is_philox_of_each_position_and_the_seed() {
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for seed in [0u64, 7, u64::MAX] {
            let dims = [37, 61];
            let got = f64s(&Tensor::rand(&dims, dtype, seed));
            let bits = significand_bits(dtype);
            let want: Vec<f64> = (0..37 * 61).map(|i| uniform(i, seed, bits)).collect();
            assert_eq!(got, want, "{dtype}, seed {seed}");
            assert!(
                got.iter().all(|&u| (0.0..1.0).contains(&u)),
                "{dtype}: a value outside [0, 1)"
            );
        }
    }
    // A view reads the same elements: the transpose of rand is rand's
    // values transposed; a slice is the elements at their positions.
    let r = Tensor::rand(&[5, 8], DType::F32, 3);
    let all = f64s(&r);
    let t = f64s(&r.transpose(0, 1));
    for i in 0..5 {
        for j in 0..8 {
            assert_eq!(t[j * 5 + i], all[i * 8 + j]);
        }
    }
    assert_eq!(
        f64s(&r.narrow(1, 2, 3)),
        (0..5)
            .flat_map(|i| all[i * 8 + 2..i * 8 + 5].to_vec())
            .collect::<Vec<_>>()
    );
    // Fused with the work around it, the values are the same.
    let x = Tensor::from_vec((0..40).map(|i| i as f32).collect::<Vec<_>>(), &[5, 8]);
    let y = &x + &r;
    assert_eq!(y.realize_with_stats().unwrap().kernels_launched, 1);
    let want: Vec<f64> = all
        .iter()
        .enumerate()
        .map(|(i, u)| (i as f64 + u) as f32 as f64)
        .collect();
    assert_eq!(f64s(&y), want);
    // A row reduction of rand: its rows summed in one kernel.
    let s = r.sum(&[1], true);
    assert_eq!(s.realize_with_stats().unwrap().kernels_launched, 1);
    for (i, v) in f64s(&s).iter().enumerate() {
        let w: f64 = all[i * 8..(i + 1) * 8].iter().sum();
        assert!((v - w).abs() < 1e-5, "row {i}: {v} against {w}");
    }
}

#[test]
fn seeds_repeat_and_differ_and_values_are_uniform() {
    let n = 200_000;
    let a = Tensor::rand(&[n], DType::F32, 1);
    assert_eq!(f64s(&a), f64s(&Tensor::rand(&[n], DType::F32, 1)));
    let b = f64s(&Tensor::rand(&[n], DType::F32, 2));
    let a = f64s(&a);
    let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
    assert!(same < 50, "{same} equal values of two seeds");
    let mean = a.iter().sum::<f64>() / n as f64;
    let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
    assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    assert!((var - 1.0 / 12.0).abs() < 0.002, "variance {var}");
    // Ten equal bins hold about a tenth each.
    let mut bins = [0usize; 10];
    for x in &a {
        bins[(x * 10.0) as usize] += 1;
    }
    assert!(
        bins.iter().all(|&c| (c as f64 - n as f64 / 10.0).abs() < 1000.0),
        "{bins:?}"
    );
}

#[test]
fn bernoulli_and_dropout_draw_their_masks_in_the_kernel() {
    let n = 100_000;
    let p = Tensor::full(&[n], 0.3f32);
    let hits = f64s(&p.bernoulli(5));
    assert!(hits.iter().all(|&h| h == 0.0 || h == 1.0));
    let rate = hits.iter().sum::<f64>() / n as f64;
    assert!((rate - 0.3).abs() < 0.01, "rate {rate}");
    // The draw is rand's: a hit where the uniform is below the probability.
    let u = f64s(&Tensor::rand(&[n], DType::F32, 5));
    assert!(u.iter().zip(&hits).all(|(u, h)| (*u < 0.3) == (*h == 1.0)));

    let x = Tensor::from_vec((0..n).map(|i| 1.0 + (i % 7) as f32).collect::<Vec<_>>(), &[n]);
    let y = (x.dropout(0.25, 9) * 2.0).relu();
    let stats = y.realize_with_stats().unwrap();
    assert_eq!(stats.kernels_launched, 1, "the mask is drawn where it is used");
    let (xv, yv) = (f64s(&x), f64s(&y));
    let u = f64s(&Tensor::rand(&[n], DType::F32, 9));
    for i in 0..n {
        let want = if u[i] >= 0.25 {
            (xv[i] / 0.75 * 2.0) as f32 as f64
        } else {
            0.0
        };
        assert!(
            (yv[i] - want).abs() <= 1e-6 * want.abs(),
            "{i}: {} against {want}",
            yv[i]
        );
    }
    let kept = yv.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
    assert!((kept - 0.75).abs() < 0.01, "kept {kept}");
    assert_eq!(f64s(&x.dropout(0.0, 1)), xv);
    assert!(f64s(&x.dropout(1.0, 1)).iter().all(|&v| v == 0.0));
}

#[test]
fn a_new_seed_reuses_the_plan() {
    let x = Tensor::from_vec((0..4096).map(|i| i as f32).collect::<Vec<_>>(), &[64, 64]);
    let first = x.dropout(0.5, 1).sum(&[1], true).realize_with_stats().unwrap();
    let again = x.dropout(0.5, 2).sum(&[1], true);
    let stats = again.realize_with_stats().unwrap();
    assert!(
        stats.plan_cache_hit,
        "seed 2 planned again (first: hit {})",
        first.plan_cache_hit
    );
    // And the values are seed 2's, not seed 1's.
    let one = f64s(&x.dropout(0.5, 1).sum(&[1], true));
    assert_ne!(f64s(&again), one);
}

#[test]
fn random_misuse_is_an_error_naming_the_op() {
    let x = Tensor::full(&[4], 1.0f32);
    assert!(matches!(
        x.try_dropout(1.5, 0),
        Err(Error::InvalidShape { op: "dropout", .. })
    ));
    assert!(matches!(
        x.try_dropout(f64::NAN, 0),
        Err(Error::InvalidShape { op: "dropout", .. })
    ));
    let i = Tensor::from_vec(vec![1i32, 2], &[2]);
    assert!(matches!(
        i.try_dropout(0.5, 0),
        Err(Error::UnsupportedDType { op: "dropout", .. })
    ));
    assert!(matches!(
        i.try_bernoulli(0),
        Err(Error::UnsupportedDType { op: "bernoulli", .. })
    ));
    assert!(matches!(
        Tensor::try_rand(&[2], DType::I64, 0),
        Err(Error::UnsupportedDType { op: "rand", .. })
    ));
    // An empty random tensor.
    assert!(Tensor::rand(&[3, 0], DType::F32, 0).to_vec::<f32>().unwrap().is_empty());
}
