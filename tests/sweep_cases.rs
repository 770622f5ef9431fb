//! The sweep's case generator (`benches/common/sweep_cases.rs`): every
//! class, op and dtype is drawn; ids and cases are stable for a seed and a
//! slice is the same cases as the whole list; sizes lie in the scale; and,
//! at a small scale, every class's expressions realized on the CPU executor
//! agree with the f64 value computed from the case's spec, a check shown to
//! reject the values of a case that differs in one respect.

#[path = "../benches/common/sweep_cases.rs"]
mod sweep_cases;

use std::collections::HashSet;
use sweep_cases::reference::{compare, evaluate, host_inputs, values, HostData};
use sweep_cases::{case, cases, Binary, Case, Class, Form, Op, Pair, Reduction, RowOp, Scale, Step, Unary, SIGNED};
use tilefuse::{DType, Tensor};

/// Small enough for a debug build, large enough for rows of 1024.
const SMALL: Scale = Scale {
    min_bytes: 256 << 10,
    max_bytes: 1 << 20,
};

/// The first 200 cases of seeds 1, 2 and 3 at GPU sizes.
fn drawn() -> Vec<Case> {
    (1..=3).flat_map(|s| cases(s, 0, 200, &[], Scale::GPU)).collect()
}

#[test]
fn every_class_op_and_dtype_is_drawn() {
    for seed in 1..=3 {
        let list = cases(seed, 0, 200, &[], Scale::GPU);
        for class in Class::ALL {
            let n = list.iter().filter(|c| c.class == class).count();
            assert!(n >= 28, "seed {seed}: {n} cases of {}", class.name());
        }
    }
    let all = drawn();
    let mut seen = HashSet::new();
    for c in &all {
        seen.insert(format!("dtype {}", c.dtype));
        match &c.op {
            Op::Reduce { op, perm, .. } => {
                seen.insert(format!("{} {}", c.class.name(), op.name()));
                seen.insert(format!("{} rank {} perm {perm:?}", c.class.name(), c.dims.len()));
            }
            Op::Stats { pair, axis } => {
                seen.insert(format!("{} axis {axis} of rank {}", pair.name(), c.dims.len()));
            }
            Op::Arg { max, axis } => {
                seen.insert(format!("arg max={max} axis {axis} of rank {}", c.dims.len()));
            }
            Op::Row { op, form, weight, bias } => {
                seen.insert(format!("{} {}", op.name(), form.name()));
                seen.insert(format!("{} weight {weight} bias {bias}", op.name()));
            }
            Op::Join { .. } => panic!("{}: a join in the default cycle", c.id()),
            Op::Scan { .. } => panic!("{}: a scan in the default cycle", c.id()),
            Op::CrossEntropy => panic!("{}: a cross-entropy in the default cycle", c.id()),
            Op::Sort { .. } | Op::TopK { .. } => panic!("{}: a sort in the default cycle", c.id()),
            Op::ScatterAdd { .. } => panic!("{}: a scatter in the default cycle", c.id()),
            Op::Chain { steps } => {
                for s in steps {
                    let name = match s {
                        Step::Unary(u) => format!("chain {}", u.name()),
                        Step::Affine { .. } => "chain affine".into(),
                        Step::Operand { op, broadcast, .. } => {
                            seen.insert(format!("rank {} broadcast {broadcast:?}", c.dims.len()));
                            format!("chain {}", op.name())
                        }
                    };
                    seen.insert(name);
                }
            }
        }
    }
    let mut want: Vec<String> = ["f32", "f16", "bf16", "f64"]
        .iter()
        .map(|d| format!("dtype {d}"))
        .collect();
    for class in ["reduce_inner", "reduce_outer", "reduce_transposed"] {
        for op in [
            Reduction::Sum,
            Reduction::Mean,
            Reduction::Max,
            Reduction::Min,
            Reduction::Var,
        ] {
            want.push(format!("{class} {}", op.name()));
        }
    }
    for perm in [
        "[1, 0]",
        "[0, 2, 1]",
        "[1, 0, 2]",
        "[1, 2, 0]",
        "[2, 0, 1]",
        "[2, 1, 0]",
    ] {
        let rank = perm.matches(',').count() + 1;
        want.push(format!("reduce_transposed rank {rank} perm Some({perm})"));
    }
    for pair in ["mean_var", "sum_max"] {
        for (axis, rank) in [(1, 2), (0, 2), (1, 3)] {
            want.push(format!("{pair} axis {axis} of rank {rank}"));
        }
    }
    for max in [true, false] {
        for (axis, rank) in [(1, 2), (0, 2), (1, 3), (2, 3)] {
            want.push(format!("arg max={max} axis {axis} of rank {rank}"));
        }
    }
    for op in [RowOp::Softmax, RowOp::LogSoftmax, RowOp::RmsNorm, RowOp::LayerNorm] {
        for form in [Form::Library, Form::Written] {
            want.push(format!("{} {}", op.name(), form.name()));
        }
    }
    want.push("rms_norm weight true bias false".into());
    want.push("layer_norm weight true bias true".into());
    for u in [
        Unary::Relu,
        Unary::Tanh,
        Unary::Sigmoid,
        Unary::Silu,
        Unary::Gelu,
        Unary::Exp,
        Unary::ExpNegSq,
        Unary::Log1pAbs,
        Unary::Sqrt,
        Unary::Log,
    ] {
        want.push(format!("chain {}", u.name()));
    }
    for b in [Binary::Add, Binary::Sub, Binary::Mul, Binary::Maximum] {
        want.push(format!("chain {}", b.name()));
    }
    want.push("chain affine".into());
    for b in ["[0]", "[1]", "[]"] {
        want.push(format!("rank 2 broadcast {b}"));
    }
    for b in ["[0]", "[0, 1]", "[2]", "[1, 2]"] {
        want.push(format!("rank 3 broadcast {b}"));
    }
    let missing: Vec<&String> = want.iter().filter(|w| !seen.contains(*w)).collect();
    assert!(missing.is_empty(), "never drawn in 600 cases: {missing:?}");
}

#[test]
fn ids_and_cases_are_stable_for_a_seed() {
    let first = cases(7, 0, 40, &[], Scale::GPU);
    assert_eq!(first, cases(7, 0, 40, &[], Scale::GPU));
    let ids: HashSet<String> = first.iter().map(Case::id).collect();
    assert_eq!(ids.len(), first.len(), "ids repeat");
    assert_eq!(first[13].id(), "s7-0013");
    // A slice is the same cases as in the whole list.
    assert_eq!(cases(7, 10, 5, &[], Scale::GPU), first[10..15].to_vec());
    assert_eq!(case(7, 22, Scale::GPU), first[22]);
    // Filtering by class keeps the cases' ids and values.
    let only = cases(7, 1, 3, &[Class::Argmax, Class::Stats], Scale::GPU);
    let expected: Vec<Case> = [5, 11, 12].iter().map(|&i| first[i].clone()).collect();
    assert_eq!(only, expected);
    // The spec is a function of the case; another seed draws other cases.
    assert_eq!(first[3].spec_json(), cases(7, 3, 1, &[], Scale::GPU)[0].spec_json());
    let other = cases(8, 0, 40, &[], Scale::GPU);
    let same = first
        .iter()
        .zip(&other)
        .filter(|(a, b)| a.spec_json() == b.spec_json())
        .count();
    assert_eq!(same, 0, "seeds 7 and 8 drew {same} equal cases");
    // The scale changes sizes, not structure.
    let cpu = cases(7, 0, 40, &[], Scale::CPU);
    for (g, c) in first.iter().zip(&cpu) {
        assert_eq!((g.class, g.dtype, g.dims.len()), (c.class, c.dtype, c.dims.len()));
    }
}

#[test]
fn sizes_lie_in_the_scale() {
    for scale in [Scale::GPU, Scale::CPU, SMALL] {
        for seed in 1..=3 {
            for c in cases(seed, 0, 200, &[], scale) {
                let b = c.bytes();
                assert!(
                    (scale.min_bytes..=scale.max_bytes).contains(&b),
                    "{} {}: {b} bytes outside {scale:?}",
                    c.id(),
                    c.describe()
                );
            }
        }
    }
}

/// The case's outputs realized on the CPU executor, and its f64 value.
fn run(c: &Case) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let data = host_inputs(c);
    let exact: Vec<Vec<f64>> = data.iter().map(HostData::to_f64).collect();
    let inputs: Vec<Tensor> = data
        .into_iter()
        .zip(c.inputs())
        .map(|(d, i)| d.into_tensor(&i.shape))
        .collect();
    let outputs = c
        .build(&inputs)
        .unwrap_or_else(|e| panic!("{}: the API refused {}: {e}", c.id(), c.describe()));
    Tensor::realize_all(&outputs.iter().collect::<Vec<_>>()).unwrap();
    let shapes: Vec<Vec<usize>> = outputs.iter().map(|o| o.dims().to_vec()).collect();
    assert_eq!(shapes, c.output_shapes(), "{}: {}", c.id(), c.describe());
    let dtypes: Vec<DType> = outputs.iter().map(Tensor::dtype).collect();
    assert_eq!(dtypes, c.output_dtypes(), "{}: {}", c.id(), c.describe());
    let got = outputs.iter().map(|o| values(o).unwrap()).collect();
    (got, evaluate(c, &exact))
}

#[test]
fn every_class_agrees_with_its_f64_value_on_the_cpu() {
    let mut checked = HashSet::new();
    for seed in 1..=2 {
        for c in cases(seed, 0, 28, &[], SMALL) {
            let (got, want) = run(&c);
            for ((g, w), d) in got.iter().zip(&want).zip(c.output_dtypes()) {
                assert!(
                    w.iter().any(|&v| v != 0.0),
                    "{}: the expected value is all zeros",
                    c.id()
                );
                if let Err(e) = compare(g, w, d) {
                    panic!("{} ({}, {}): {e}", c.id(), c.dtype, c.describe());
                }
            }
            checked.insert(c.class);
        }
    }
    assert_eq!(checked.len(), Class::ALL.len());
}

/// `count` cases of extra class `class` (asked for by its name) from seed
/// `seed`: each of the class, within the scale, and agreeing with its f64
/// value on the CPU.
fn extra_cases(class: Class, seed: u64, count: usize) -> Vec<Case> {
    let picked = cases(seed, 0, count, &[class], SMALL);
    assert_eq!(picked.len(), count);
    assert!(Class::parse(class.name()) == Some(class));
    for c in &picked {
        assert_eq!(c.class, class);
        assert!(
            (SMALL.min_bytes..=SMALL.max_bytes).contains(&c.bytes()),
            "{}",
            c.describe()
        );
        let (got, want) = run(c);
        assert_eq!(got.len(), want.len(), "{}", c.describe());
        for (k, ((g, w), d)) in got.iter().zip(&want).zip(c.output_dtypes()).enumerate() {
            compare(g, w, d).unwrap_or_else(|e| panic!("{} ({}), output {k}: {e}", c.id(), c.describe()));
        }
    }
    picked
}

#[test]
fn join_cases_are_asked_for_by_name_and_agree_with_their_f64_value() {
    let joins = extra_cases(Class::Join, 3, 12);
    assert_eq!(joins[0].id(), "s3-10000");
    assert_eq!(cases(3, 4, 2, &[Class::Join], SMALL), joins[4..6].to_vec());
    for c in &joins {
        let Op::Join { widths, .. } = &c.op else {
            panic!("{}: not a join", c.id())
        };
        assert!((1..=3).contains(&widths.len()), "{}", c.describe());
    }
}

#[test]
fn scan_cases_are_asked_for_by_name_and_agree_with_their_f64_value() {
    let (mut logs, mut columns) = (0, 0);
    for c in extra_cases(Class::Scan, 4, 12) {
        let Op::Scan { log, axis } = c.op else {
            panic!("{}: not a scan", c.id())
        };
        logs += log as usize;
        columns += (axis == 0) as usize;
    }
    assert!(
        logs > 0 && columns > 0 && logs < 12 && columns < 12,
        "{logs} log-sum-exps, {columns} columns"
    );
}

#[test]
fn index_cases_are_asked_for_by_name_and_agree_with_their_f64_value() {
    for c in extra_cases(Class::Index, 5, 8) {
        assert_eq!(c.op, Op::CrossEntropy);
    }
    // Labels are made in f32 whatever the logits' dtype: f16 holds no
    // integer past 65504, so f16 labels of 100000 classes would lie
    // outside the axis.
    let wide = Case {
        dtype: DType::F16,
        ..f32_case(Class::Index, &[3, 100_000], Op::CrossEntropy)
    };
    assert_eq!(wide.inputs()[1].dtype_in(DType::F16), DType::F32);
    let (got, want) = run(&wide);
    compare(&got[0], &want[0], DType::F16).unwrap_or_else(|e| panic!("{}: {e}", wide.describe()));
}

#[test]
fn order_cases_are_asked_for_by_name_and_agree_with_their_f64_value() {
    let (mut sorts, mut descending, mut selections) = (0, 0, 0);
    for c in extra_cases(Class::Order, 6, 10) {
        assert_eq!(c.output_dtypes(), vec![c.dtype, DType::I64]);
        match c.op {
            Op::Sort { descending: d } => {
                sorts += 1;
                descending += d as usize;
            }
            Op::TopK { k } => {
                assert!(k >= 1 && k <= c.dims[1], "{}", c.describe());
                selections += (k <= 8) as usize;
            }
            _ => panic!("{}: not a sort or topk", c.id()),
        }
    }
    assert!(
        sorts > 0 && selections > 0 && descending > 0,
        "{sorts} sorts, {descending} descending, {selections} selections"
    );
    // Equal values keep their order along the row: bf16 values on [1, 1.05]
    // take about seven values, so most picks tie, and their positions are
    // checked exactly, for the selection passes (rows over 256) and the sort.
    for op in [
        Op::TopK { k: 5 },
        Op::Sort { descending: true },
        Op::Sort { descending: false },
    ] {
        let ties = Case {
            dtype: DType::BF16,
            x_range: (1.0, 1.05),
            ..f32_case(Class::Order, &[16, 300], op)
        };
        let (got, want) = run(&ties);
        let n = want[0].len() / 16;
        assert!(
            want[0].chunks(n).all(|r| r.windows(2).any(|p| p[0] == p[1])),
            "{}: no ties",
            ties.describe()
        );
        for (k, d) in ties.output_dtypes().into_iter().enumerate() {
            compare(&got[k], &want[k], d).unwrap_or_else(|e| panic!("{}, output {k}: {e}", ties.describe()));
        }
    }
}

#[test]
fn scatter_cases_are_asked_for_by_name_and_agree_with_their_f64_value() {
    for c in extra_cases(Class::Scatter, 7, 8) {
        let Op::ScatterAdd { width } = c.op else {
            panic!("{}: not a scatter", c.id())
        };
        let inputs = c.inputs();
        assert_eq!(inputs[1].shape, c.dims, "{}", c.describe());
        assert_eq!(inputs[2].shape, vec![c.dims[0], width], "{}", c.describe());
        assert!(inputs[1].range.1 < width as f64, "{}", c.describe());
    }
}

/// An f32 case of `class` over `x` of `dims`, for the checks below.
fn f32_case(class: Class, dims: &[usize], op: Op) -> Case {
    Case {
        seed: 5,
        index: 0,
        class,
        dtype: DType::F32,
        dims: dims.to_vec(),
        x_range: SIGNED,
        op,
    }
}

/// Each pair realizes the first case and checks it against the second's
/// value, which differs in one respect a bug could get wrong: the check
/// must fail. (Square shapes, so the outputs have the same size.)
#[test]
fn the_check_rejects_a_case_that_differs_in_one_respect() {
    let reduce = |op, perm: Option<Vec<usize>>, axis| Op::Reduce { op, perm, axis };
    let row = |op, weight| Op::Row {
        op,
        form: Form::Written,
        weight,
        bias: false,
    };
    let bias = |broadcast: Vec<usize>| Op::Chain {
        steps: vec![
            Step::Operand {
                op: Binary::Add,
                broadcast,
                range: SIGNED,
            },
            Step::Unary(Unary::Tanh),
        ],
    };
    let square = [48, 48];
    let pairs = [
        (reduce(Reduction::Sum, None, 1), reduce(Reduction::Mean, None, 1)),
        (reduce(Reduction::Var, None, 1), reduce(Reduction::Mean, None, 1)),
        (reduce(Reduction::Max, None, 0), reduce(Reduction::Max, None, 1)),
        (
            reduce(Reduction::Sum, Some(vec![1, 0]), 1),
            reduce(Reduction::Sum, None, 1),
        ),
        (
            Op::Stats {
                pair: Pair::MeanVar,
                axis: 1,
            },
            Op::Stats {
                pair: Pair::MeanVar,
                axis: 0,
            },
        ),
        (Op::Arg { max: true, axis: 1 }, Op::Arg { max: false, axis: 1 }),
        (row(RowOp::Softmax, false), row(RowOp::LogSoftmax, false)),
        (row(RowOp::RmsNorm, true), row(RowOp::RmsNorm, false)),
        (bias(vec![0]), bias(vec![1])),
    ];
    for (op, other) in pairs {
        let c = f32_case(Class::ReduceInner, &square, op);
        let d = f32_case(Class::ReduceInner, &square, other);
        let (got, want) = run(&c);
        assert!(compare(&got[0], &want[0], DType::F32).is_ok(), "{}", c.describe());
        let exact: Vec<Vec<f64>> = host_inputs(&d).iter().map(HostData::to_f64).collect();
        let wrong = evaluate(&d, &exact);
        assert!(
            compare(&got[0], &wrong[0], DType::F32).is_err(),
            "{} passed as {}",
            c.describe(),
            d.describe()
        );
    }
}
