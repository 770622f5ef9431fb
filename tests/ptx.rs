//! PTX generation: every program here is generated for sm_80 and sm_90 and
//! assembled by `ptxas` (skipped cleanly when it is absent unless
//! `TILEFUSE_REQUIRE_PTXAS=1`), with no local-memory spills allowed.
//! `TILEFUSE_BLESS=1` rewrites the snapshot; `TILEFUSE_DUMP_PTX=dir` writes
//! every generated module to `dir` for inspection or running elsewhere.

mod common;

use common::reference_programs::{add_one, c, iota_2x2, pv_atomic, pv_load, pv_load_masked_nan, pv_store_iota};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use tilefuse::graph::{BinaryOp, UnaryOp};
use tilefuse::kernels::ir::{Access, AtomicOp, Builder, IndexExpr, MathMode, Program, TileReduce, ValueId, ValueType};
use tilefuse::kernels::ptx_gen::ptxas::{assemble, ptxas_for_tests};
use tilefuse::kernels::ptx_gen::{generate, PtxModule, PtxTarget};
use tilefuse::tile::{Padding, ThreadScope};
use tilefuse::{DType, Error, Scalar};

static ASSEMBLED: AtomicUsize = AtomicUsize::new(0);

const SMS: [u32; 2] = [80, 90];

fn ptxas() -> Option<PathBuf> {
    ptxas_for_tests("tests/ptx.rs")
}

/// Generates `program` for each target and assembles it; returns the sm_90 module.
fn check(program: &Program) -> PtxModule {
    try_check(program).unwrap_or_else(|e| panic!("{}: {e}", program.name))
}

/// Like [`check`], but a generation error is returned (assembly errors still panic).
fn try_check(program: &Program) -> Result<PtxModule, Error> {
    let tool = ptxas();
    let mut last = None;
    for sm in SMS {
        let module = generate(program, &PtxTarget::for_driver(sm, 13000))?;
        if let Some(tool) = &tool {
            let kernels = assemble(tool, &module.text, sm)
                .unwrap_or_else(|e| panic!("{} (sm_{sm}) failed to assemble:\n{e}\n{}", program.name, module.text));
            for k in &kernels {
                assert_eq!(
                    (k.spill_store_bytes, k.spill_load_bytes),
                    (0, 0),
                    "{} spills on sm_{sm}: {k:?}",
                    program.name
                );
                eprintln!(
                    "ptxas sm_{sm} {}: {} registers, {} spill bytes, {} bytes smem",
                    k.name, k.registers, k.spill_store_bytes, k.shared_bytes
                );
            }
            let n = ASSEMBLED.fetch_add(1, Ordering::Relaxed) + 1;
            eprintln!("ptxas: {n} modules assembled so far in this run");
        }
        if let Ok(dir) = std::env::var("TILEFUSE_DUMP_PTX") {
            let path = PathBuf::from(dir).join(format!("{}.sm_{sm}.ptx", module.entry));
            std::fs::write(&path, &module.text).unwrap();
        }
        last = Some(module);
    }
    Ok(last.expect("at least one target"))
}

/// The instruction lines (comments excluded) of a module that contain `needle`.
fn count_instructions(m: &PtxModule, needle: &str) -> usize {
    m.text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//") && l.contains(needle))
        .count()
}

fn float(x: f64, d: DType) -> Scalar {
    Scalar::Float(x, d)
}

#[test]
fn reference_example_is_64_threads_with_three_16_byte_loads_and_stores() {
    let m = check(&add_one());
    assert_eq!(m.block_threads, 64);
    assert_eq!(m.grid_blocks, 1);
    assert_eq!(count_instructions(&m, "ld.global.nc.v4"), 3, "{}", m.text);
    assert_eq!(count_instructions(&m, "st.global.v4"), 3, "{}", m.text);
    assert!(m.mapping.contains("64 threads x 3 repeats x atom 4"), "{}", m.mapping);
    assert!(m.text.contains("// mapping: "));
    let Some(dir) = common::snapshot_dir("the add_one.ptx snapshot") else {
        return;
    };
    let path = dir.join("add_one.ptx");
    if std::env::var("TILEFUSE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &m.text).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("snapshot missing: run with TILEFUSE_BLESS=1");
    assert_eq!(
        m.text,
        want,
        "PTX differs from {}; rerun with TILEFUSE_BLESS=1 if intended",
        path.display()
    );
}

/// One elementwise program: load `dtype` (ragged, masked), apply `f`, store its result.
fn elementwise(name: &str, dtype: DType, out: DType, f: impl FnOnce(&mut Builder, ValueId) -> ValueId) -> Program {
    try_elementwise(name, dtype, out, f).unwrap()
}

/// [`elementwise`], or the verifier's rejection.
fn try_elementwise(
    name: &str,
    dtype: DType,
    out: DType,
    f: impl FnOnce(&mut Builder, ValueId) -> ValueId,
) -> Result<Program, Error> {
    let mut b = Builder::new(name, &[3, 2]);
    let x = b.param("x", dtype, 70 * 45, Access::Read);
    let y = b.param("y", out, 70 * 45, Access::Write);
    let vx = b.view_contiguous(x, &[70, 45], &[32, 32], Padding::Zero);
    let vy = b.view_contiguous(y, &[70, 45], &[32, 32], Padding::Zero);
    let idx = [IndexExpr::grid(0), IndexExpr::grid(1)];
    let a = b.load(vx, &idx, true);
    let r = f(&mut b, a);
    b.store(vy, &idx, r, true);
    b.finish()
}

const NUMERIC: [DType; 6] = [DType::U8, DType::I32, DType::I64, DType::U32, DType::F32, DType::F64];

#[test]
fn every_unary_op_for_every_dtype() {
    use UnaryOp::*;
    let ops = [
        Neg, Abs, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Recip, Sin, Cos, Tanh, Sigmoid, Relu, GeluTanh, GeluErf, Silu,
        Floor, Ceil, Round, Sign, Not,
    ];
    let mut generated = 0;
    for d in NUMERIC.into_iter().chain([DType::Bool]) {
        for op in ops {
            for mode in [MathMode::Precise, MathMode::Fast] {
                let prog = try_elementwise(&format!("{op:?}_{d}"), d, d, |b, a| {
                    b.math(mode);
                    b.unary(op, a)
                });
                // The verifier rejects ops a dtype does not have.
                let Ok(prog) = prog else { continue };
                match try_check(&prog) {
                    Ok(_) => generated += 1,
                    Err(e) => panic!("{op:?} on {d}: {e}"),
                }
            }
        }
    }
    eprintln!("unary: {generated} generated");
    assert!(generated >= 100, "{generated}");
}

#[test]
fn every_binary_op_for_every_dtype() {
    use BinaryOp::*;
    let ops = [
        Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, BitAnd, BitOr, BitXor,
    ];
    let mut generated = 0;
    for d in NUMERIC.into_iter().chain([DType::Bool]) {
        for op in ops {
            let out = if op.is_comparison() { DType::Bool } else { d };
            let prog = try_elementwise(&format!("{op:?}_{d}"), d, out, |b, a| {
                let c = b.unary(UnaryOp::Not, a);
                let c = if d.is_float() { b.unary(UnaryOp::Abs, a) } else { c };
                b.binary(op, a, c)
            });
            let Ok(prog) = prog else { continue };
            match try_check(&prog) {
                Ok(_) => generated += 1,
                Err(e) => panic!("{op:?} on {d}: {e}"),
            }
        }
    }
    eprintln!("binary: {generated} generated");
    assert!(generated > 60);
}

#[test]
fn every_cast() {
    for from in DType::ALL {
        for to in DType::ALL {
            check(&elementwise(&format!("cast_{from}_{to}"), from, to, |b, a| {
                b.cast(a, to)
            }));
        }
    }
}

#[test]
fn each_padding_mode_for_each_float_dtype() {
    for d in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for pad in [
            Padding::Zero,
            Padding::NegZero,
            Padding::Nan,
            Padding::PosInf,
            Padding::NegInf,
        ] {
            let mut b = Builder::new(format!("pad_{d}_{pad}"), &[2]);
            let x = b.param("x", d, 100, Access::Read);
            let y = b.param("y", d, 128, Access::Write);
            let vx = b.view_contiguous(x, &[100], &[64], pad);
            let vy = b.view_contiguous(y, &[128], &[64], Padding::Zero);
            let a = b.load(vx, &[IndexExpr::grid(0)], true);
            b.store(vy, &[IndexExpr::grid(0)], a, false);
            let m = check(&b.finish().unwrap());
            assert!(m.text.contains("@%p"), "masked loads are predicated");
        }
    }
}

#[test]
fn row_sum_with_loop_and_accumulator() {
    let mut b = Builder::new("row_sum", &[64]);
    let x = b.param("x", DType::F32, 64 * 1000, Access::Read);
    let y = b.param("y", DType::F32, 64, Access::Write);
    let vx = b.view_contiguous(x, &[64, 1000], &[1, 256], Padding::Zero);
    let vy = b.view_contiguous(y, &[64, 1], &[1, 1], Padding::Zero);
    let acc = b.acc(ValueType::new(DType::F32, &[1, 256]), float(0.0, DType::F32));
    b.loop_(4, |b, i| {
        let t = b.load(vx, &[IndexExpr::grid(0), IndexExpr::loop_var(i)], true);
        b.acc_update(acc, BinaryOp::Add, t);
    });
    let total = b.acc_read(acc);
    let s = b.reduce(TileReduce::Sum, total, 1);
    b.store(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], s, false);
    let m = check(&b.finish().unwrap());
    assert!(m.text.contains("shfl.sync.bfly"));
    assert!(m.text.contains("bar.sync"));
    assert!(m.shared_bytes > 0);
}

#[test]
fn softmax_rows() {
    let mut b = Builder::new("softmax", &[16]);
    let x = b.param("x", DType::F32, 16 * 500, Access::Read);
    let y = b.param("y", DType::F32, 16 * 500, Access::Write);
    let vx = b.view_contiguous(x, &[16, 500], &[1, 512], Padding::NegInf);
    let vy = b.view_contiguous(y, &[16, 500], &[1, 512], Padding::Zero);
    let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
    let a = b.load(vx, &idx, true);
    let m = b.reduce(TileReduce::Max, a, 1);
    let m = b.broadcast(m, &[1, 512]);
    let d = b.binary(BinaryOp::Sub, a, m);
    let e = b.unary(UnaryOp::Exp, d);
    let s = b.reduce(TileReduce::Sum, e, 1);
    let s = b.broadcast(s, &[1, 512]);
    let r = b.binary(BinaryOp::Div, e, s);
    b.store(vy, &idx, r, true);
    let m = check(&b.finish().unwrap());
    assert!(m.text.contains("max.NaN.f32"));
}

/// A column reduction of a (300, 64) tensor combined across CTAs by atomics.
fn column_atomic(op: AtomicOp, d: DType) -> Program {
    let mut b = Builder::new(format!("colsum_{op:?}_{d}"), &[10]);
    let x = b.param("x", d, 300 * 64, Access::Read);
    let y = b.param("y", d, 64, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[300, 64], &[32, 64], Padding::Zero);
    let vy = b.view_contiguous(y, &[1, 64], &[1, 64], Padding::Zero);
    let a = b.load(vx, &[IndexExpr::grid(0), IndexExpr::constant(0)], true);
    let wide = d.compute_type();
    let a = if wide != d { b.cast(a, wide) } else { a };
    let reduce = match op {
        AtomicOp::Max => TileReduce::Max,
        AtomicOp::Min => TileReduce::Min,
        _ => TileReduce::Sum,
    };
    let r = b.reduce(reduce, a, 0);
    let r = if wide != d { b.cast(r, d) } else { r };
    b.atomic(
        op,
        vy,
        &[IndexExpr::constant(0), IndexExpr::constant(0)],
        r,
        false,
        ThreadScope::Device,
    );
    b.finish().unwrap()
}

#[test]
fn column_sums_with_every_atomic_op_and_dtype() {
    use AtomicOp::*;
    for d in [DType::I32, DType::U32, DType::I64] {
        for op in [Add, Sub, And, Or, Xor, Max, Min] {
            let m = check(&column_atomic(op, d));
            assert!(m.text.contains("red.relaxed.gpu.global"));
        }
    }
    for op in [Add, Sub, Max, Min] {
        check(&column_atomic(op, DType::F32));
    }
    for op in [Add, Sub] {
        check(&column_atomic(op, DType::F64));
    }
    check(&column_atomic(Add, DType::F16));
    // bf16 atomic add exists on sm_90 only.
    let p = column_atomic(Add, DType::BF16);
    let m = generate(&p, &PtxTarget::for_driver(90, 13000)).unwrap();
    assert!(m.text.contains("red.relaxed.gpu.global.add.noftz.bf16"));
    if let Some(tool) = ptxas() {
        assemble(&tool, &m.text, 90).unwrap();
    }
    let e = generate(&p, &PtxTarget::for_driver(80, 13000)).unwrap_err();
    assert!(matches!(e, Error::UnsupportedDType { dtype: DType::BF16, .. }), "{e}");
}

#[test]
fn half_types_load_and_store_as_packed_words() {
    for d in [DType::F16, DType::BF16] {
        let p = elementwise(&format!("scale_{d}"), d, d, |b, a| {
            let f = b.cast(a, DType::F32);
            let two = b.constant(float(2.0, DType::F32), DType::F32, &[32, 32]);
            let g = b.binary(BinaryOp::Mul, f, two);
            b.cast(g, d)
        });
        let m = check(&p);
        assert!(
            m.text.contains("ld.global.nc.v4.b32") || m.text.contains("ld.global.nc.b16"),
            "{}",
            m.text
        );
    }
    let mut b = Builder::new("copy_f16", &[4]);
    let x = b.param("x", DType::F16, 1024, Access::Read);
    let y = b.param("y", DType::F16, 1024, Access::Write);
    let vx = b.view_contiguous(x, &[1024], &[256], Padding::Zero);
    let vy = b.view_contiguous(y, &[1024], &[256], Padding::Zero);
    let a = b.load(vx, &[IndexExpr::grid(0)], false);
    b.store(vy, &[IndexExpr::grid(0)], a, false);
    let m = check(&b.finish().unwrap());
    assert_eq!(m.block_threads, 32);
    assert_eq!(count_instructions(&m, "ld.global.nc.v4.b32"), 1, "{}", m.text);
}

#[test]
fn iota_in_bounds_select_and_broadcast() {
    let mut b = Builder::new("iota_mask", &[4]);
    let y = b.param("y", DType::I64, 100 * 8, Access::Write);
    let vy = b.view_contiguous(y, &[100, 8], &[32, 8], Padding::Zero);
    let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
    let rows = b.iota(&[32, 1], 0, IndexExpr::grid(0));
    let rows = b.broadcast(rows, &[32, 8]);
    let cols = b.iota(&[32, 8], 1, IndexExpr::constant(0));
    let inb = b.in_bounds(vy, &idx);
    let s = b.binary(BinaryOp::Add, rows, cols);
    let neg = b.constant(Scalar::Int(-1, DType::I64), DType::I64, &[32, 8]);
    let r = b.select(inb, s, neg);
    b.store(vy, &idx, r, true);
    check(&b.finish().unwrap());
}

#[test]
fn views_with_offsets_or_strides_fall_back_to_scalar_accesses() {
    let mut b = Builder::new("strided", &[1]);
    let x = b.param("x", DType::F32, 4096, Access::Read);
    let y = b.param("y", DType::F32, 1025, Access::Write);
    let vx = b.view(x, &[32, 32], &[1, 64], 1, &[32, 32], Padding::Zero);
    let vy = b.view(y, &[32, 32], &[32, 1], 1, &[32, 32], Padding::Zero);
    let a = b.load(vx, &[IndexExpr::constant(0); 2], false);
    b.store(vy, &[IndexExpr::constant(0); 2], a, false);
    let m = check(&b.finish().unwrap());
    assert_eq!(count_instructions(&m, ".v4"), 0, "{}", m.text);
}

#[test]
fn grids_past_two_to_the_31_blocks_use_ctaid_y() {
    let n: u64 = 3 << 30;
    let mut b = Builder::new("huge", &[n]);
    let x = b.param("x", DType::U8, n * 4, Access::ReadWrite);
    let vx = b.view_contiguous(x, &[n * 4], &[4], Padding::Zero);
    let a = b.load(vx, &[IndexExpr::grid(0)], false);
    let c = b.unary(UnaryOp::Not, a);
    b.store(vx, &[IndexExpr::grid(0)], c, false);
    let m = check(&b.finish().unwrap());
    assert!(m.text.contains("%ctaid.y"));
    assert_eq!(m.grid_dims(), ((1 << 31) - 1, 2));
}

#[test]
fn version_is_the_targets_minimum_capped_by_the_driver() {
    let p = add_one();
    let m = generate(&p, &PtxTarget::for_driver(80, 12000)).unwrap();
    assert!(m.text.contains(".version 7.0\n"));
    let m = generate(&p, &PtxTarget::for_driver(90, 12080)).unwrap();
    assert!(m.text.contains(".version 7.8\n"));
    assert_eq!(PtxTarget::for_driver(90, 13000).ptx_version, (9, 0));
    assert_eq!(PtxTarget::for_driver(90, 12080).ptx_version, (8, 7));
    let old = PtxTarget {
        sm: 90,
        ptx_version: (7, 4),
        sms: 0,
    };
    assert!(matches!(generate(&p, &old), Err(Error::InvalidProgram { .. })));
}

/// `times * iota` over a [2, 2] tile (the row-major flat index), as i32.
/// The partition-view document's examples as kernel programs: the load of
/// partition (1, 2) of a 4 × 8 i32 span in 2 × 2 partitions, the NaN-padded
/// masked load of partition (0, 2) of a 4 × 11 f32 span in 2 × 4
/// partitions, the store of `100 * iota` into partition (1, 3), and each
/// atomic update on the 1-D span of 4 in partitions of 2 at [1] and masked
/// on the 4 × 3 span in 2 × 2 partitions at (0, 1).
#[test]
fn partition_view_reference_examples() {
    check(&pv_load());
    let m = check(&pv_load_masked_nan());
    assert!(
        m.text.contains("0f7FFFFFFF") || m.text.contains("0f7FC00000"),
        "NaN padding:\n{}",
        m.text
    );
    check(&pv_store_iota());

    // The document's element types and operands.
    use AtomicOp::*;
    let (int, uint) = (DType::I32, DType::U32);
    for (op, d, operand) in [
        (And, int, 0b1111),
        (Or, int, 0b1111),
        (Xor, int, 0b1111_1111),
        (Max, uint, 4),
        (Min, uint, 4),
        (Add, uint, 10),
        (Sub, uint, 3),
    ] {
        for (extents, tile, index) in [(&[4][..], &[2][..], &[c(1)][..]), (&[4, 3], &[2, 2], &[c(0), c(1)])] {
            let m = check(&pv_atomic(op, d, operand, extents, tile, index));
            assert!(m.text.contains("red.relaxed.gpu.global"), "{}", m.text);
        }
    }
}

/// The tile document's examples as kernel programs that store their tile:
/// `iota` of a 2 × 2 i32 tile, `full(2)` of a 4 × 4 i32 tile converted to
/// f32, and a 1 × 1 f32 tile of 2 converted to f64.
#[test]
fn tile_reference_examples() {
    let mut b = Builder::new("tile_iota", &[1]);
    let y = b.param("y", DType::I32, 4, Access::Write);
    let vy = b.view_contiguous(y, &[2, 2], &[2, 2], Padding::Zero);
    let a = iota_2x2(&mut b, 1);
    b.store(vy, &[c(0), c(0)], a, false);
    check(&b.finish().unwrap());

    let mut b = Builder::new("tile_full_to_f32", &[1]);
    let y = b.param("y", DType::F32, 16, Access::Write);
    let vy = b.view_contiguous(y, &[4, 4], &[4, 4], Padding::Zero);
    let two = b.constant(Scalar::Int(2, DType::I32), DType::I32, &[4, 4]);
    let z = b.cast(two, DType::F32);
    b.store(vy, &[c(0), c(0)], z, false);
    check(&b.finish().unwrap());

    let mut b = Builder::new("tile_singleton_to_f64", &[1]);
    let y = b.param("y", DType::F64, 1, Access::Write);
    let vy = b.view_contiguous(y, &[1, 1], &[1, 1], Padding::Zero);
    let two = b.constant(float(2.0, DType::F32), DType::F32, &[1, 1]);
    let z = b.cast(two, DType::F64);
    b.store(vy, &[c(0), c(0)], z, false);
    check(&b.finish().unwrap());
}
#[test]
fn large_gpu_reductions_of_every_dtype_fit_shared_memory() {
    // Full and column reductions big enough to loop, split and use whole-tile
    // accumulators, planned for the GPU and assembled.
    use tilefuse::fusion::{plan, FusionOptions};
    use tilefuse::Tensor;
    for dtype in [
        DType::Bool,
        DType::U8,
        DType::I32,
        DType::I64,
        DType::BF16,
        DType::F32,
        DType::F64,
    ] {
        let x = Tensor::full_scalar(&[2048, 1024], Scalar::Int(1, DType::I64), DType::I64)
            .cast(dtype)
            .realize_and_keep();
        for y in [x.sum_all(), x.max_all(), x.sum(&[0], false), x.max(&[0], false)] {
            for k in &plan(&y.subgraph(), &FusionOptions::gpu()).unwrap().kernels {
                check(&k.program);
            }
        }
    }
}

/// A tensor realized on the host, so expressions over it see a data leaf.
trait RealizeAndKeep {
    fn realize_and_keep(self) -> Self;
}

impl RealizeAndKeep for tilefuse::Tensor {
    fn realize_and_keep(self) -> Self {
        self.realize().unwrap();
        self
    }
}

/// A column sum of a `[rows, 64]` f32 tile, stored.
fn column_sum(rows: u32) -> Program {
    let mut b = Builder::new(format!("colsum_{rows}"), &[1]);
    let x = b.param("x", DType::F32, u64::from(rows) * 64, Access::Read);
    let y = b.param("y", DType::F32, 64, Access::Write);
    let vx = b.view_contiguous(x, &[u64::from(rows), 64], &[rows, 64], Padding::Zero);
    let vy = b.view_contiguous(y, &[1, 64], &[1, 64], Padding::Zero);
    let a = b.load(vx, &[IndexExpr::constant(0), IndexExpr::constant(0)], false);
    let r = b.reduce(TileReduce::Sum, a, 0);
    b.store(vy, &[IndexExpr::constant(0), IndexExpr::constant(0)], r, false);
    b.finish().unwrap()
}

/// The shared-memory reads of a cross-thread reduction's first round: from
/// its comment to the first barrier after a read.
fn exchange_reads(m: &PtxModule) -> Vec<&str> {
    let start = m.text.find("// reduce Sum axis 0").expect("a cross-thread reduction");
    let mut reads = Vec::new();
    for line in m.text[start..].lines() {
        if line.contains("ld.shared") {
            reads.push(line);
        } else if line.contains("bar.sync") && !reads.is_empty() {
            break;
        }
    }
    reads
}

#[test]
fn cross_thread_reductions_guard_only_reads_that_may_not_exist() {
    // Rows that fill whole block-wide runs reduce in registers: nothing of
    // the tile is published.
    let m = check(&column_sum(32));
    assert!(m.text.contains("// reduce the leading axis"), "{}", m.text);
    assert!(!m.text.contains("// reduce Sum axis 0"), "{}", m.text);
    // Otherwise through the published tile: each output's group of threads
    // reads every `group`-th row, and only a last, partial run of rows (for
    // groups of 2 or more threads) is guarded.
    for rows in [36u32, 31] {
        let m = check(&column_sum(rows));
        let reads = exchange_reads(&m);
        let group = (m.block_threads / 64).clamp(1, 16);
        let guarded = reads.iter().filter(|l| l.contains('@')).count();
        assert_eq!(guarded, usize::from(rows % group != 0), "{rows} rows\n{}", m.text);
        assert_eq!(reads.len() as u32, rows.div_ceil(group), "{rows} rows\n{}", m.text);
    }
}

/// A scatter of 8 lines of 8 sources (lines 4 a grid point) into an
/// 8 × 8 output along its inner axis, with `out` as the output's view.
fn line_scatter(
    d: DType,
    positions: DType,
    out: impl FnOnce(&mut Builder, tilefuse::kernels::ir::ParamId) -> tilefuse::kernels::ir::ViewId,
) -> Result<Program, Error> {
    let mut b = Builder::new(format!("scatter_{d}_{positions}"), &[2]);
    let y = b.param_init("out", d, 64, Access::ReadWrite, Scalar::Int(0, d));
    let i = b.param("index", positions, 64, Access::Read);
    let x = b.param("src", d, 64, Access::Read);
    let flag = b.param_init("flag", DType::U32, 1, Access::Write, Scalar::Int(0, DType::U32));
    let vi = b.view_contiguous(i, &[8, 8], &[4, 1], Padding::Zero);
    let vx = b.view_contiguous(x, &[8, 8], &[4, 1], Padding::Zero);
    let vy = out(&mut b, y);
    b.loop_(8, |b, var| {
        let at = [IndexExpr::grid(0), IndexExpr::loop_var(var)];
        let p = b.load(vi, &at, true);
        let s = b.load(vx, &at, true);
        b.scatter_add(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], p, 1, 8, s, flag);
    });
    b.finish()
}

#[test]
fn scatters_of_every_dtype_read_add_and_store_each_element() {
    let lines = |b: &mut Builder, y| b.view(y, &[8, 1], &[8, 0], 0, &[4, 1], Padding::Zero);
    for d in [DType::U8, DType::I32, DType::U32, DType::I64, DType::F32, DType::F64] {
        for positions in [DType::I32, DType::I64] {
            let m = check(&line_scatter(d, positions, lines).unwrap());
            assert!(m.mapping.contains("scatter_add v2 tile [4, 1]"), "{}", m.mapping);
            // Each of a thread's elements: a guarded load, add and store,
            // and a guarded store of the flag.
            assert!(count_instructions(&m, "st.global.b32 [") >= 1, "{}", m.text);
            assert!(count_instructions(&m, "ld.global") >= 2, "{}", m.text);
        }
    }
    // Lines that share an output element, and a view through which one
    // tile reaches an element twice, are refused by the verifier.
    for shared in [
        (|b: &mut Builder, y| b.view(y, &[8, 1], &[0, 0], 0, &[4, 1], Padding::Zero)) as fn(&mut Builder, _) -> _,
        |b: &mut Builder, y| b.view(y, &[8, 1], &[4, 0], 0, &[4, 1], Padding::Zero),
    ] {
        let e = line_scatter(DType::F32, DType::I64, shared).unwrap_err();
        assert!(e.to_string().contains("several span indices to one element"), "{e}");
    }
    // A half-precision output is refused: scatters add in f32 or wider.
    let e = line_scatter(DType::F16, DType::I64, lines).unwrap_err();
    assert!(e.to_string().contains("a scatter adds integers, f32 or f64"), "{e}");
}
