//! Sharded tensors over meshes of CPU ranks, against the unsharded
//! computation: random shapes (rank 1 to 3), sharded axes and meshes of 1
//! to 4 ranks (extents that the mesh does not divide, and extents smaller
//! than the mesh, which leave empty shards), elementwise chains with
//! sharded and replicated broadcast operands, reductions over the sharded
//! axis and others with and without `keepdim`, in f32, f64 and i32; the
//! collectives on their own; run-to-run determinism; and the misuse each
//! entry point reports.

mod common;

use common::{f64s, Lcg};
use tilefuse::mesh::{CollectiveOp, Reduced};
use tilefuse::{DType, Device, Error, Mesh, Sharded, Tensor};

/// A tensor of `shape` with values drawn uniformly from `lo..hi` (whole
/// numbers for an integer `dtype`).
fn data(rng: &mut Lcg, shape: &[usize], dtype: DType, lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            let u = rng.next() as f64 / (1u64 << 31) as f64;
            let v = lo + (hi - lo) * u;
            if dtype.is_float() {
                v
            } else {
                v.floor()
            }
        })
        .collect();
    Tensor::from_vec(vals, shape).cast(dtype)
}

/// A shape that broadcasts to `shape`: each axis kept or 1, and some
/// leading axes left out.
fn broadcast_shape(rng: &mut Lcg, shape: &[usize]) -> Vec<usize> {
    let dropped = rng.below(shape.len() as u64 + 1) as usize;
    shape[dropped..]
        .iter()
        .map(|&d| if rng.below(2) == 0 { d } else { 1 })
        .collect()
}

/// Half the distance from 1 to the next value of a float dtype.
fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f32::EPSILON as f64,
        DType::F64 => f64::EPSILON,
        _ => 0.0,
    }
}

/// Asserts `got[i]` within `tol[i]` of `want[i]`.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for i in 0..want.len() {
        assert!(
            (got[i] - want[i]).abs() <= tol[i],
            "{what}: element {i} is {} where the unsharded result is {} (tolerance {})",
            got[i],
            want[i],
            tol[i]
        );
    }
}

/// The row-major bits of a realized float or integer tensor, for
/// comparisons that must be exact.
fn bits(t: &Tensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().map(|x| x.to_bits() as u64).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().iter().map(|&x| x as u64).collect(),
        DType::I32 => t.to_vec::<i32>().unwrap().iter().map(|&x| x as u32 as u64).collect(),
        d => panic!("no bits for {d}"),
    }
}

/// Checks the shard extents of `s` against the rule, written out here: one
/// shard per rank, adding up to the whole extent, the longer ones first
/// and at most one longer than the shorter ones.
fn check_extents(s: &Sharded, ranks: usize) {
    let extents = s.shard_extents();
    let whole = s.dims()[s.axis()];
    assert_eq!(extents.len(), ranks);
    assert_eq!(extents.iter().sum::<usize>(), whole);
    for (r, &e) in extents.iter().enumerate() {
        let want = whole / ranks + usize::from(r < whole % ranks);
        assert_eq!(
            e, want,
            "shard {r} of {extents:?} for extent {whole} over {ranks} ranks"
        );
        assert_eq!(s.shards()[r].device(), s.mesh().devices()[r]);
    }
}

#[derive(Clone, Copy, Debug)]
enum Red {
    Sum,
    Max,
    Min,
    Mean,
}

impl Red {
    fn sharded(self, s: &Sharded, axes: &[isize], keepdim: bool) -> Reduced {
        match self {
            Red::Sum => s.sum(axes, keepdim),
            Red::Max => s.max(axes, keepdim),
            Red::Min => s.min(axes, keepdim),
            Red::Mean => s.mean(axes, keepdim),
        }
        .unwrap()
    }

    fn whole(self, t: &Tensor, axes: &[isize], keepdim: bool) -> Tensor {
        match self {
            Red::Sum => t.sum(axes, keepdim),
            Red::Max => t.max(axes, keepdim),
            Red::Min => t.min(axes, keepdim),
            Red::Mean => t.mean(axes, keepdim),
        }
    }
}

/// Checks the structure of a reduction of `s` over `axes` (resolved:
/// `resolved`) against the unsharded result `want`, and returns the whole
/// result.
fn check_structure(s: &Sharded, r: &Reduced, resolved: &[usize], keepdim: bool, want: &Tensor) -> Tensor {
    match r {
        Reduced::Replicated(copies) => {
            assert!(
                resolved.contains(&s.axis()),
                "replicated, yet axis {} was kept",
                s.axis()
            );
            assert_eq!(copies.len(), s.mesh().ranks());
            let first = bits(&copies[0]);
            for (rank, c) in copies.iter().enumerate() {
                assert_eq!(c.dims(), want.dims());
                assert_eq!(c.device(), s.mesh().devices()[rank]);
                assert_eq!(bits(c), first, "rank {rank}'s copy differs from rank 0's");
            }
        }
        Reduced::Sharded(out) => {
            assert!(
                !resolved.contains(&s.axis()),
                "sharded, yet axis {} was reduced",
                s.axis()
            );
            let dropped = if keepdim {
                0
            } else {
                resolved.iter().filter(|&&a| a < s.axis()).count()
            };
            assert_eq!(out.axis(), s.axis() - dropped);
            assert_eq!(out.dims(), want.dims());
            assert_eq!(out.shard_extents(), s.shard_extents());
        }
    }
    let whole = r.whole();
    assert_eq!(whole.dims(), want.dims());
    assert_eq!(whole.dtype(), want.dtype());
    whole
}

/// One random case: an elementwise chain of sharded and replicated
/// operands, then reductions, each against the unsharded computation.
fn float_case(seed: u64) {
    let mut rng = Lcg(seed.wrapping_mul(0x9e37_79b9) + 17);
    let rank = 1 + rng.below(3) as usize;
    let shape: Vec<usize> = (0..rank).map(|_| rng.pick(&[1, 2, 3, 4, 5, 7, 9, 16])).collect();
    let axis = rng.below(rank as u64) as usize;
    let ranks = 1 + rng.below(4) as usize;
    let dtype = rng.pick(&[DType::F32, DType::F64]);
    let case = format!("seed {seed}: {shape:?} {dtype} sharded on axis {axis} over {ranks}");
    let mesh = Mesh::cpu(ranks).unwrap();

    let x = data(&mut rng, &shape, dtype, -4.0, 4.0);
    let y = data(&mut rng, &shape, dtype, -2.0, 2.0);
    let bias_shape = broadcast_shape(&mut rng, &shape);
    let bias = data(&mut rng, &bias_shape, dtype, -1.0, 1.0);
    let div_shape = broadcast_shape(&mut rng, &shape);
    let den = data(&mut rng, &div_shape, dtype, 1.0, 2.0);
    let written = if rng.below(2) == 0 {
        axis as isize
    } else {
        axis as isize - rank as isize
    };
    let (sx, sy) = (x.shard(written, &mesh).unwrap(), y.shard(written, &mesh).unwrap());
    assert_eq!(sx.axis(), axis, "{case}");
    check_extents(&sx, ranks);
    assert_eq!(bits(&sx.unshard()), bits(&x), "{case}: unshard");

    let tanh = rng.below(2) == 0;
    let step = |t: &Tensor| if tanh { t.tanh() * 0.5 } else { t * 0.5 - 1.0 };
    let sz = sx
        .add(&bias)
        .and_then(|s| s.mul(&sy))
        .and_then(|s| s.sub(&bias))
        .and_then(|s| s.div(&den))
        .and_then(|s| s.map(step))
        .unwrap();
    let z = step(&(((&x + &bias) * &y - &bias) / &den));
    assert_eq!(sz.dims(), z.dims(), "{case}");
    assert_eq!(sz.axis(), axis, "{case}");
    // Each element goes through the same ops in both computations; the
    // arithmetic is correctly rounded, so only a transcendental evaluated
    // by another code path (vector body or scalar tail, at another position
    // of another kernel) may differ, by a few ulp.
    let elem_tol = |v: f64| 4.0 * eps(dtype) * v.abs().max(f64::MIN_POSITIVE);
    let zv = f64s(&z);
    let tol: Vec<f64> = zv.iter().map(|&v| elem_tol(v)).collect();
    assert_close(&format!("{case}: chain"), &f64s(&sz.unshard()), &zv, &tol);

    for _ in 0..3 {
        let red = rng.pick(&[Red::Sum, Red::Max, Red::Min, Red::Mean]);
        let mut axes: Vec<isize> = (0..rank as isize).filter(|_| rng.below(2) == 0).collect();
        if rng.below(2) == 0 && !axes.contains(&(axis as isize)) {
            axes.push(axis as isize - rank as isize);
        }
        let keepdim = rng.below(2) == 0;
        let what = format!("{case}: {red:?} over {axes:?} keepdim {keepdim}");
        let resolved: Vec<usize> = axes.iter().map(|&a| a.rem_euclid(rank as isize) as usize).collect();
        let want = red.whole(&z, &axes, keepdim);
        let got = check_structure(&sz, &red.sharded(&sz, &axes, keepdim), &resolved, keepdim, &want);
        let n: usize = resolved.iter().map(|&a| shape[a]).product();
        let abs_sum = f64s(&z.cast(DType::F64).abs().sum(&axes, keepdim));
        let wv = f64s(&want);
        let tol: Vec<f64> = match red {
            // Two orders of adding n terms differ by at most (n - 1) eps
            // times the sum of their magnitudes, and the terms themselves
            // by the chain's tolerance (4 eps each).
            Red::Sum => abs_sum.iter().map(|&a| (n + 4) as f64 * eps(dtype) * a).collect(),
            // The same, scaled by 1 / n, and the scale's rounding.
            Red::Mean => abs_sum
                .iter()
                .zip(&wv)
                .map(|(&a, &m)| (n + 4) as f64 * eps(dtype) * a / n.max(1) as f64 + 2.0 * eps(dtype) * m.abs())
                .collect(),
            // A maximum selects an element: only the chain's tolerance.
            Red::Max | Red::Min => wv.iter().map(|&v| elem_tol(v)).collect(),
        };
        assert_close(&what, &f64s(&got), &wv, &tol);
    }
}

#[test]
fn float_chains_and_reductions_match_the_unsharded_computation() {
    for seed in 0..120 {
        float_case(seed);
    }
}

#[test]
fn integer_sums_and_selections_are_exact() {
    for seed in 0..40u64 {
        let mut rng = Lcg(seed * 31 + 5);
        let rank = 1 + rng.below(3) as usize;
        let shape: Vec<usize> = (0..rank).map(|_| rng.pick(&[1, 2, 3, 6, 11])).collect();
        let axis = rng.below(rank as u64) as usize;
        let mesh = Mesh::cpu(1 + rng.below(4) as usize).unwrap();
        let x = data(&mut rng, &shape, DType::I32, -1000.0, 1000.0);
        let b_shape = broadcast_shape(&mut rng, &shape);
        let b = data(&mut rng, &b_shape, DType::I32, -50.0, 50.0);
        let s = x.shard(axis as isize, &mesh).unwrap().add(&b).unwrap();
        let z = &x + &b;
        let axes: Vec<isize> = (0..rank as isize).filter(|_| rng.below(2) == 0).collect();
        let resolved: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
        for red in [Red::Sum, Red::Max, Red::Min] {
            let keepdim = rng.below(2) == 0;
            let want = red.whole(&z, &axes, keepdim);
            let got = check_structure(&s, &red.sharded(&s, &axes, keepdim), &resolved, keepdim, &want);
            assert_eq!(
                bits(&got),
                bits(&want),
                "seed {seed}: {red:?} over {axes:?} of {shape:?}"
            );
        }
    }
}

#[test]
fn extents_smaller_than_the_mesh_leave_empty_shards() {
    let mut rng = Lcg(99);
    let mesh = Mesh::cpu(4).unwrap();
    for dtype in [DType::F32, DType::I32] {
        let x = data(&mut rng, &[2, 3], dtype, -10.0, 10.0);
        let s = x.shard(0, &mesh).unwrap();
        check_extents(&s, 4);
        assert!(s.shard_extents().contains(&0));
        for red in [Red::Sum, Red::Max, Red::Min] {
            for keepdim in [false, true] {
                let want = red.whole(&x, &[0], keepdim);
                let got = check_structure(&s, &red.sharded(&s, &[0], keepdim), &[0], keepdim, &want);
                // One or two terms per output: exact in any order.
                assert_eq!(f64s(&got), f64s(&want), "{dtype} {red:?} keepdim {keepdim}");
            }
        }
        let doubled = s.add(&s).unwrap().unshard();
        assert_eq!(f64s(&doubled), f64s(&(&x + &x)));
    }
}

#[test]
fn a_mean_over_the_sharded_axis_weighs_shards_by_their_extents() {
    // Rows 0..7 over 3 ranks: shards of 3, 2 and 2 rows, whose means
    // average to more than the whole mean.
    let x = Tensor::from_vec((0..14).map(|i| (i / 2) as f64).collect(), &[7, 2]);
    let s = x.shard(0, &Mesh::cpu(3).unwrap()).unwrap();
    let got = s.mean(&[0], false).unwrap().whole();
    let want = x.mean(&[0], false);
    assert_eq!(f64s(&got), f64s(&want));
    let shard_means: Vec<f64> = s.shards().iter().map(|t| f64s(&t.mean(&[0], false))[0]).collect();
    let mean_of_means = shard_means.iter().sum::<f64>() / 3.0;
    assert!(
        (mean_of_means - f64s(&want)[0]).abs() > 0.1,
        "the case must tell the two apart"
    );
}

#[test]
fn sharded_results_have_the_same_bits_on_every_run() {
    let run = || {
        let mut rng = Lcg(7);
        let mesh = Mesh::cpu(3).unwrap();
        let x = data(&mut rng, &[37, 23], DType::F32, -3.0, 3.0);
        let b = data(&mut rng, &[23], DType::F32, -1.0, 1.0);
        let s = x.shard(0, &mesh).unwrap().mul(&b).unwrap().map(|t| t.exp()).unwrap();
        let sum = s.sum(&[0], false).unwrap().whole();
        let mean = s.mean(&[0, 1], false).unwrap().whole();
        let rows = s.sum(&[1], true).unwrap().whole();
        (bits(&sum), bits(&mean), bits(&rows))
    };
    assert_eq!(run(), run());
}

/// Parts of whole numbers (exact in any order) for the collectives.
fn parts(ranks: usize, shape: &[usize]) -> Vec<Tensor> {
    let mut rng = Lcg(ranks as u64 * 101 + shape.len() as u64);
    (0..ranks)
        .map(|_| data(&mut rng, shape, DType::F32, -20.0, 20.0))
        .collect()
}

#[test]
fn all_reduce_combines_every_rank_s_part() {
    for ranks in 1..=4 {
        let mesh = Mesh::cpu(ranks).unwrap();
        let p = parts(ranks, &[3, 5]);
        for (op, fold) in [
            (CollectiveOp::Sum, Tensor::add as fn(&Tensor, &Tensor) -> Tensor),
            (CollectiveOp::Max, Tensor::maximum),
            (CollectiveOp::Min, Tensor::minimum),
        ] {
            let want = p[1..].iter().fold(p[0].clone(), |acc, t| fold(&acc, t));
            let got = mesh.all_reduce(&p, op).unwrap();
            assert_eq!(got.len(), ranks);
            for t in &got {
                assert_eq!(f64s(t), f64s(&want), "{op:?} over {ranks}");
            }
        }
    }
}

#[test]
fn all_gather_and_reduce_scatter_join_and_cut_in_rank_order() {
    let mesh = Mesh::cpu(4).unwrap();
    let mut rng = Lcg(3);
    let pieces: Vec<Tensor> = [3, 0, 2, 5]
        .iter()
        .map(|&e| data(&mut rng, &[2, e], DType::F64, 0.0, 9.0))
        .collect();
    let refs: Vec<&Tensor> = pieces.iter().collect();
    let want = Tensor::cat(&refs, 1);
    for t in mesh.all_gather(&pieces, -1).unwrap() {
        assert_eq!(f64s(&t), f64s(&want));
    }
    let s = Sharded::from_shards(pieces.clone(), 1, &mesh).unwrap();
    assert_eq!(s.shard_extents(), vec![3, 0, 2, 5]);
    assert_eq!(f64s(&s.all_gather().unwrap()[3]), f64s(&want));

    let p = parts(4, &[10, 3]);
    let total = p[1..].iter().fold(p[0].clone(), |acc, t| &acc + t);
    let got = mesh.reduce_scatter(&p, CollectiveOp::Sum, 0).unwrap();
    let mut start = 0;
    for (r, piece) in got.iter().enumerate() {
        let len = 10 / 4 + usize::from(r < 10 % 4);
        assert_eq!(f64s(piece), f64s(&total.narrow(0, start, len)), "rank {r}");
        start += len;
    }
}

#[test]
fn misuse_is_an_error_naming_the_op_and_the_whole_shapes() {
    assert!(matches!(
        Mesh::new(vec![]),
        Err(Error::Sharding { op: "Mesh::new", .. })
    ));
    assert!(matches!(Mesh::cpu(0), Err(Error::Sharding { op: "Mesh::cpu", .. })));
    let (m2, m3) = (Mesh::cpu(2).unwrap(), Mesh::cpu(3).unwrap());
    let x = Tensor::zeros(&[6, 4], DType::F32);
    assert!(matches!(
        x.shard(2, &m2),
        Err(Error::AxisOutOfRange {
            op: "shard",
            axis: 2,
            ..
        })
    ));
    assert!(Tensor::zeros(&[], DType::F32).shard(0, &m2).is_err());

    let (a, b) = (x.shard(0, &m2).unwrap(), x.shard(0, &m3).unwrap());
    let e = a.add(&b).unwrap_err().to_string();
    assert!(
        e.contains("add") && e.contains("meshes differ") && e.contains("[6, 4]"),
        "{e}"
    );
    let e = a.mul(&x.shard(1, &m2).unwrap()).unwrap_err().to_string();
    assert!(e.contains("mul") && e.contains("axis 0 and axis 1"), "{e}");
    let uneven = Sharded::from_shards(vec![x.narrow(0, 0, 4), x.narrow(0, 4, 2)], 0, &m2).unwrap();
    let e = a.sub(&uneven).unwrap_err().to_string();
    assert!(e.contains("sub") && e.contains("[3, 3]") && e.contains("[4, 2]"), "{e}");

    let e = a.div(&Tensor::zeros(&[5], DType::F32)).unwrap_err();
    assert!(
        matches!(&e, Error::ShapeMismatch { op: "div", lhs, rhs } if lhs == &[6, 4] && rhs == &[5]),
        "{e}"
    );
    let thin = Tensor::zeros(&[1, 4], DType::F32).shard(0, &m2).unwrap();
    let e = thin.add(&Tensor::zeros(&[3, 4], DType::F32)).unwrap_err().to_string();
    assert!(e.contains("add") && e.contains("[1, 4]") && e.contains("[3, 4]"), "{e}");

    let e = a.sum(&[3], false).unwrap_err();
    assert!(
        matches!(&e, Error::AxisOutOfRange { op: "sum", shape, .. } if shape == &[6, 4]),
        "{e}"
    );
    assert!(matches!(
        a.max(&[0, -2], true),
        Err(Error::InvalidShape { op: "max", .. })
    ));
    let ints = Tensor::zeros(&[6, 4], DType::I32).shard(1, &m3).unwrap();
    let e = ints.mean(&[1], false).unwrap_err();
    assert!(
        matches!(&e, Error::NeedsFloat { op: "mean", shape, .. } if shape == &[6, 4]),
        "{e}"
    );
    let empty = Tensor::zeros(&[0, 4], DType::F32).shard(0, &m2).unwrap();
    assert!(matches!(
        empty.min(&[0], false),
        Err(Error::InvalidShape { op: "min", .. })
    ));
    assert_eq!(f64s(&empty.sum(&[0], false).unwrap().whole()), vec![0.0; 4]);

    let reduce_rows = |p: &Tensor, q: &Tensor| p.try_add(q)?.try_sum(&[0], false);
    let e = a.zip_with("rows", &x, reduce_rows).unwrap_err().to_string();
    assert!(e.contains("rows") && e.contains("rank 1"), "{e}");
    // Right for the whole shape, not for a shard's.
    let spread = |p: &Tensor, q: &Tensor| p.try_add(q)?.try_sum(&[0], true)?.try_expand(&[6, 4]);
    let e = a.zip_with("spread", &x, spread).unwrap_err().to_string();
    assert!(e.contains("spread") && e.contains("shard 0"), "{e}");
    let e = a.map(|t| t.sum(&[1], true)).unwrap_err().to_string();
    assert!(e.contains("map") && e.contains("[6, 4]"), "{e}");
    assert!(matches!(
        Sharded::from_shards(vec![x.clone()], 0, &m2),
        Err(Error::Sharding {
            op: "Sharded::from_shards",
            ..
        })
    ));
    let e = Sharded::from_shards(vec![x.clone(), x.narrow(1, 0, 2)], 0, &m2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("off axis 0"), "{e}");

    let e = m3.all_reduce(&parts(2, &[2]), CollectiveOp::Sum).unwrap_err();
    assert!(matches!(&e, Error::Sharding { op: "all_reduce", .. }), "{e}");
    let mixed = vec![Tensor::zeros(&[2], DType::F32), Tensor::zeros(&[3], DType::F32)];
    let e = m2.reduce_scatter(&mixed, CollectiveOp::Max, 0).unwrap_err().to_string();
    assert!(e.contains("reduce_scatter") && e.contains("rank 1"), "{e}");
    let bools = vec![Tensor::zeros(&[2], DType::Bool), Tensor::zeros(&[2], DType::Bool)];
    assert!(m2.all_reduce(&bools, CollectiveOp::Sum).is_err());
    let e = m2.all_gather(&mixed, 1).unwrap_err();
    assert!(matches!(&e, Error::AxisOutOfRange { op: "all_gather", .. }), "{e}");
}

#[test]
fn a_mesh_lists_its_devices_and_compares_by_them() {
    let m = Mesh::cpu(3).unwrap();
    assert_eq!(m.ranks(), 3);
    assert_eq!(m.devices(), &[Device::Cpu; 3]);
    assert_eq!(m, Mesh::new(vec![Device::Cpu; 3]).unwrap());
    assert_ne!(m, Mesh::cpu(2).unwrap());
    assert_eq!(format!("{m:?}"), "Mesh[cpu, cpu, cpu]");
}

#[test]
fn half_precision_partial_sums_are_kept_in_f32() {
    // 2049 ones on rank 0 and one on rank 1: an f16 partial of 2049 would
    // round to 2048 (f16 has 11 significant bits) and the combined sum to
    // 2048, where the unsharded sum, accumulated in f32 and rounded once,
    // is 2050. (bf16 rounds both to 2048; it checks the rounding once.)
    let mesh = Mesh::cpu(2).unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let x = Tensor::ones(&[2050], dtype);
        let s = Sharded::from_shards(vec![x.narrow(0, 0, 2049), x.narrow(0, 2049, 1)], 0, &mesh).unwrap();
        let (got, want) = (s.sum(&[0], false).unwrap().whole(), x.sum(&[0], false));
        assert_eq!(got.dtype(), dtype);
        // Realized first: a cast fused after the sum would read its f32
        // value, which a kernel rounds only when it stores it.
        Tensor::realize_all(&[&got]).unwrap();
        want.realize().unwrap();
        assert_eq!(f64s(&got), f64s(&want), "{dtype}");
    }
}

#[test]
fn each_shard_s_chain_is_one_kernel() {
    let mut rng = Lcg(11);
    let x = data(&mut rng, &[9, 33], DType::F32, -1.0, 1.0);
    let bias = data(&mut rng, &[9, 1], DType::F32, -1.0, 1.0);
    let s = x.shard(0, &Mesh::cpu(2).unwrap()).unwrap();
    x.realize().unwrap();
    bias.realize().unwrap();
    let y = s.add(&bias).and_then(|s| s.map(|t| (t * 3.0).tanh().exp())).unwrap();
    for shard in y.shards() {
        assert!(!shard.is_realized(), "elementwise ops only record");
        assert_eq!(shard.realize_with_stats().unwrap().kernels_launched, 1);
    }
}
