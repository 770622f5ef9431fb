use super::parse::{parse, Arg, Base, Imm, Line, Width};
use super::*;
use crate::kernels::ptx_gen::PtxTarget;

const SMALL: &str = "\
.version 7.8
.target sm_90
.address_size 64
.visible .entry k(
\t.param .u64 k_param_0,
\t.param .u64 k_param_1
)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\t.reg .f32 %f<4>;
\t.reg .b64 %rd<4>;
\t.shared .align 16 .b8 tf_smem[64];
\tmov.u32 %r1, %tid.x;
\tld.param.u64 %rd1, [k_param_0];
\tsetp.lt.u32 %p1, %r1, 7;
\t@!%p1 bra $L_exit;
\tcvt.u64.u32 %rd2, %r1;
\tadd.s64 %rd3, %rd1, %rd2;
\tld.global.nc.f32 %f1, [%rd3+16];
\tmul.rn.f32 %f2, %f1, 0f40000000;
\tmov.u32 %r2, tf_smem;
\t@%p1 st.shared.f32 [%r2+4], %f2;
$L_exit:
\tret;
}
";

#[test]
fn the_reader_keeps_guards_operands_and_declarations() {
    let k = parse(SMALL).unwrap();
    assert_eq!(k.params, ["k_param_0", "k_param_1"]);
    assert_eq!(k.width("%rd3"), Some(Width::B64));
    assert_eq!(k.width("%p1"), Some(Width::Pred));
    assert_eq!(k.width("%tid.x"), None);
    assert_eq!(k.shared, [("tf_smem", 16, 64)]);
    let insts: Vec<_> = k
        .body
        .iter()
        .filter_map(|l| match l {
            Line::Inst(i) => Some(i),
            Line::Label(_) => None,
        })
        .collect();
    assert_eq!(insts[3].guard, Some(("%p1", true)));
    assert_eq!(insts[6].args[1], Arg::Addr(Base::Reg("%rd3"), 16));
    assert_eq!(insts[7].args[2], Arg::Imm(Imm::F32(0x4000_0000), "0f40000000"));
    assert!(k.body.contains(&Line::Label("$L_exit")));
}

#[test]
fn unknown_directives_and_operands_are_reported_not_guessed() {
    let with_local = SMALL.replace("\t.shared", "\t.local .align 8 .b8 stack[16];\n\t.shared");
    assert!(parse(&with_local).unwrap_err().0.contains(".local"));
    let local = SMALL.replace("mul.rn.f32 %f2, %f1, 0f40000000", "mul.rn.f32 %f2, %f1, ~3");
    assert!(parse(&local).unwrap_err().0.contains("~3"));
}

#[test]
fn instructions_become_forms_with_guards_as_branches() {
    let forms = forms_of(SMALL).unwrap();
    assert_eq!(
        forms,
        [
            "mov.u32 d32 %tid.x",
            "mov.b64 d64 s64",
            "setp.lt.u32 dp s32 s32",
            "vm.brz sp",
            "cvt.u64.u32 d64 s32",
            "add.s64 d64 s64 s64",
            "ld.global.nc.f32 d32 [a64]",
            "mul.rn.f32 d32 s32 s32",
            "vm.smem d32",
            "vm.brz sp",
            "st.shared.f32 [a32] s32",
            "vm.exit",
        ]
    );
}

fn code_of(ptx: &str, threads: u32) -> Code {
    assemble::assemble(ptx, threads, 1 << 20).unwrap()
}

fn inst(code: &Code, i: usize) -> &[u32] {
    &code.words[INST_WORDS * (1 + i)..INST_WORDS * (2 + i)]
}

#[test]
fn code_words_name_slots_constants_and_targets() {
    let code = code_of(SMALL, 32);
    assert_eq!(code.words[0], MAGIC);
    let (args, consts, nconst) = (code.words[1], code.words[2], code.words[3]);
    assert_eq!(args, 64, "after the program's 64 shared bytes");
    assert_eq!(consts, args + 8 * ARGS as u32);
    // Constants: 7 (u32) and 2.0 (f32); the address offset is a word.
    assert_eq!(nconst, 2);
    let tail = &code.words[code.words.len() - 2..];
    assert!(tail.contains(&7) && tail.contains(&0x4000_0000), "{tail:?}");
    // The parameter load reads the first argument, uniformly.
    let ld = inst(&code, 1);
    assert_eq!(ld[0], form_index("mov.b64 d64 s64").unwrap());
    assert_eq!(ld[2], args | CONST_FLAG);
    // `@!%p1 bra $L_exit` jumps to the final `ret` (instruction 11) when false.
    let br = inst(&code, 3);
    assert_eq!(br[0], form_index("vm.brz sp").unwrap());
    assert_eq!(br[2], 11);
    // The guarded store is skipped to the instruction after it.
    assert_eq!(inst(&code, 9)[2], 11);
    // The memory offset travels as a word of its own.
    assert_eq!(inst(&code, 6)[3], 16);
    // Every slot lies in the register planes, per thread.
    let planes = code.words[2] + 4 * nconst;
    for i in 0..code.instructions {
        let w = inst(&code, i);
        if w[0] == form_index("add.s64 d64 s64 s64").unwrap() {
            assert!(w[1..4].iter().all(|&s| s & CONST_FLAG == 0 && s >= planes), "{w:?}");
        }
    }
    assert!(code.shared_bytes <= planes.next_multiple_of(16) + 32 * (4 * code.planes[0] + 8 * code.planes[1]) + 16);
}

#[test]
fn registers_share_slots_when_their_lives_do_not_overlap() {
    // A chain of 40 values, each used once by the next: two planes suffice.
    let mut body = String::from("\tmov.u32 %r1, %tid.x;\n");
    for i in 2..=40 {
        body.push_str(&format!("\tadd.u32 %r{i}, %r{}, 1;\n", i - 1));
    }
    body.push_str("\tld.param.u64 %rd1, [k_param_0];\n\tst.global.b32 [%rd1], %r40;\n\tret;\n");
    let ptx = format!(
        ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .b32 %r<41>;\n\t.reg .b64 %rd<2>;\n{body}}}\n"
    );
    assert_eq!(code_of(&ptx, 64).planes, [2, 1]);
}

#[test]
fn a_value_live_around_a_loop_keeps_its_slot_through_the_loop() {
    // %r2 is defined before the loop and read after it; %r3 and %r4 live
    // inside. %r2 must not share a slot with either.
    let ptx = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\
\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<2>;\n\
\tmov.u32 %r1, %tid.x;\n\tadd.u32 %r2, %r1, 5;\n\tmov.u32 %r5, 0;\n\
$L1:\n\tadd.u32 %r3, %r5, 1;\n\tadd.u32 %r4, %r3, 2;\n\tadd.u32 %r5, %r4, 0;\n\tsetp.lt.u32 %p1, %r5, 9;\n\t@%p1 bra $L1;\n\
\tadd.u32 %r1, %r2, %r5;\n\tld.param.u64 %rd1, [k_param_0];\n\tst.global.b32 [%rd1], %r1;\n\tret;\n}\n";
    let code = code_of(ptx, 32);
    let slot = |i: usize, w: usize| inst(&code, i)[w];
    let r2 = slot(1, 1);
    for (i, w) in [(3, 1), (4, 1), (5, 1)] {
        assert_ne!(slot(i, w), r2, "instruction {i}");
    }
    // And the loop's branch goes back to its first instruction.
    assert_eq!(slot(7, 2), 3);
}

#[test]
fn shared_arrays_past_the_address_space_or_overaligned_are_reported() {
    let huge = SMALL.replace(
        "\t.shared .align 16 .b8 tf_smem[64];",
        "\t.shared .align 16 .b8 a[4294967295];\n\t.shared .align 16 .b8 tf_smem[64];",
    );
    assert!(assemble::assemble(&huge, 32, u32::MAX).unwrap_err().0.contains("4 GiB"));
    let wide = SMALL.replace(
        ".shared .align 16 .b8 tf_smem[64]",
        ".shared .align 4 .b32 tf_smem[4294967295]",
    );
    assert!(parse(&wide).unwrap_err().0.contains("shared declaration"));
    let aligned = SMALL.replace(".shared .align 16", ".shared .align 32");
    assert!(assemble::assemble(&aligned, 32, u32::MAX)
        .unwrap_err()
        .0
        .contains("aligned to 32"));
}

#[test]
fn too_much_shared_memory_is_reported() {
    let err = assemble::assemble(SMALL, 1024, 4096).unwrap_err();
    assert!(err.0.contains("bytes of shared memory"), "{err}");
}

#[test]
fn the_interpreter_has_a_case_per_form() {
    let text = interpreter(&PtxTarget::for_driver(90, 13000), forms().len()).unwrap();
    assert!(text.contains(".target sm_90"));
    for (i, form) in forms().iter().enumerate() {
        assert!(text.contains(&format!("$vm_c{i}: // {form}\n")), "{form}");
    }
    assert_eq!(text.matches("bra $vm_loop;").count(), forms().len());
    // The barrier works from divergent code.
    assert!(!text.contains("\tbar.sync"));
    // The core module has the core's cases; the other forms trap.
    let core = interpreter(&PtxTarget::for_driver(90, 13000), core_forms()).unwrap();
    assert!(core_forms() > INTERNAL.len() && core_forms() < forms().len());
    assert_eq!(core.matches("bra $vm_loop;").count(), core_forms());
    assert!(core.contains(&format!("$vm_c{}: //", core_forms() - 1)));
    assert!(!core.contains(&format!("$vm_c{}: //", core_forms())));
    assert_eq!(core.matches("$vm_trap").count(), forms().len() - core_forms() + 1);
}

#[test]
fn code_records_the_highest_form_it_uses() {
    let code = code_of(SMALL, 32);
    let used = (0..code.instructions).map(|i| inst(&code, i)[0]).max().unwrap();
    assert_eq!(code.max_form, used);
    assert!((code.max_form as usize) < core_forms());
}

#[test]
fn the_interpreter_assembles_with_ptxas_without_spilling() {
    use crate::kernels::ptx_gen::ptxas;
    let Some(path) = ptxas::ptxas_for_tests("the_interpreter_assembles_with_ptxas_without_spilling") else {
        return;
    };
    for (sm, forms) in [
        (75, forms().len()),
        (80, forms().len()),
        (90, forms().len()),
        (90, core_forms()),
    ] {
        let text = interpreter(&PtxTarget::for_driver(sm, 13000), forms).unwrap();
        assert_eq!(text.contains("\tcp.async"), sm >= 80);
        let kernels = ptxas::assemble(&path, &text, sm).unwrap_or_else(|e| panic!("sm_{sm}: {e}"));
        assert_eq!(kernels.len(), 1);
        let k = &kernels[0];
        assert_eq!(k.spill_store_bytes + k.spill_load_bytes, 0, "sm_{sm}: {k:?}");
        assert!(k.registers <= 64, "sm_{sm}: {k:?} cannot launch 1024 threads");
    }
}

#[test]
fn float_arithmetic_forms_all_carry_a_rounding_mode() {
    // Unrounded add/sub/mul may be contracted into fma by ptxas in a
    // compiled module, never in the interpreter.
    for form in forms() {
        let op = form.split(' ').next().unwrap();
        let parts: Vec<&str> = op.split('.').collect();
        if ["add", "sub", "mul"].contains(&parts[0]) && parts.iter().any(|p| *p == "f32" || *p == "f64") {
            assert!(parts.iter().any(|p| ["rn", "rz", "rm", "rp"].contains(p)), "{form}");
        }
    }
}

#[test]
fn constant_tables_travel_in_the_code_and_are_read_from_global_memory() {
    let ptx = SMALL
        .replace(
            "\t.shared .align 16 .b8 tf_smem[64];",
            "\t.shared .align 16 .b8 tf_smem[64];\n.const .align 8 .u64 tf_t[3] = {0x0000000000000000, 0xA2F9836E4E441529, 0x5};",
        )
        .replace(
            "\tmov.u32 %r2, tf_smem;",
            "\tmov.u64 %rd2, tf_t;\n\tld.const.u64 %rd3, [%rd2+8];\n\tmov.u32 %r2, tf_smem;",
        );
    let k = parse(&ptx).unwrap();
    assert_eq!(k.tables, [("tf_t", vec![0, 0xA2F9_836E_4E44_1529, 5])]);
    let forms = forms_of(&ptx).unwrap();
    assert!(forms.contains(&"vm.table d64".to_owned()) && forms.contains(&"ld.global.nc.b64 d64 [a64]".to_owned()));
    let code = code_of(&ptx, 32);
    let at = (0..code.instructions)
        .map(|i| inst(&code, i))
        .find(|w| w[0] == form_index("vm.table d64").unwrap())
        .unwrap()[2] as usize;
    assert_eq!(at % 2, 0, "8-byte aligned");
    assert_eq!(&code.words[at..at + 6], &[0, 0, 0x4E44_1529, 0xA2F9_836E, 5, 0]);
    // A table of another element type is refused, not misread.
    let u32_table = ptx.replace(".u64 tf_t[3]", ".u32 tf_t[3]");
    assert!(parse(&u32_table).unwrap_err().0.contains("constant table"));
}

#[test]
fn a_carry_pair_is_one_form_and_a_lone_carry_is_refused() {
    let with = |pair: &str| {
        SMALL.replace(
            "\tcvt.u64.u32 %rd2, %r1;\n",
            &format!("\tcvt.u64.u32 %rd2, %r1;\n{pair}"),
        )
    };
    let ptx = with("\tadd.cc.u64 %rd3, %rd1, %rd2;\n\taddc.u64 %rd2, %rd2, 0;\n");
    let forms = forms_of(&ptx).unwrap();
    let pair = "add.cc.u64 d64 s64 s64 ; addc.u64 d64 s64 s64";
    assert_eq!(forms.iter().filter(|f| *f == pair).count(), 1, "{forms:?}");
    assert!(!forms.iter().any(|f| f.starts_with("addc")));
    let code = code_of(&ptx, 32);
    let w = inst(&code, 5);
    assert_eq!(w[0], form_index(pair).unwrap());
    // Six operand words: d, s, s of each; the constant 0 is uniform.
    assert_eq!(w[6] & CONST_FLAG, CONST_FLAG);
    // The second reading what the first wrote would see the old value.
    let reads = with("\tadd.cc.u64 %rd3, %rd1, %rd2;\n\taddc.u64 %rd2, %rd3, 0;\n");
    assert!(forms_of(&reads).unwrap_err().0.contains("reading what"));
    let lone = with("\tadd.cc.u64 %rd3, %rd1, %rd2;\n");
    assert!(forms_of(&lone).unwrap_err().0.contains("then"));
}

#[test]
fn every_form_is_listed_once_and_spelled_with_known_operand_kinds() {
    let mut seen = std::collections::HashSet::new();
    let reg = |t: &str| {
        let t = t.strip_prefix('d').or_else(|| t.strip_prefix('s'));
        t.is_some_and(|w| ["p", "16", "32", "64"].contains(&w))
    };
    for form in forms() {
        assert!(seen.insert(*form), "`{form}` is listed twice");
        for part in form.split(" ; ") {
            let mut toks = part.split(' ');
            let op = toks.next().unwrap();
            assert!(!op.is_empty() && !op.contains(['{', '[', '%']), "`{form}`");
            for t in toks {
                let ok = reg(t)
                    || t == "s!p"
                    || t == "[a32]"
                    || t == "[a64]"
                    || t.starts_with('=')
                    || t.starts_with('%')
                    || t.strip_prefix('{')
                        .and_then(|v| v.strip_suffix('}'))
                        .is_some_and(|v| v.split(',').all(reg));
                assert!(ok, "`{form}`: operand `{t}`");
            }
        }
    }
}

/// `module` assembled and run on the CPU model over `inputs` (the bytes of
/// its parameters in order) and a zeroed last parameter of `out_bytes`;
/// that parameter's bytes afterwards.
fn output_on_model(module: &crate::kernels::ptx_gen::PtxModule, inputs: &[&[u8]], out_bytes: usize) -> Vec<u8> {
    let code = assemble(module, 1 << 20).unwrap_or_else(|e| panic!("{}: {e}\n{}", module.entry, module.text));
    let memory = inputs
        .iter()
        .map(|b| b.to_vec())
        .chain([vec![0u8; out_bytes]])
        .collect();
    let mut mem = emulate::Memory(memory);
    let blocks = u32::try_from(module.grid_blocks).unwrap();
    emulate::run(&code, blocks, &mut mem).unwrap_or_else(|e| panic!("{}: {e}\n{}", module.entry, module.text));
    mem.0.pop().expect("the output")
}

/// `y = (a + b) * a` (or `y = a + b` for integers) over `n` elements in
/// tiles of `tile`, the tail masked.
fn elementwise(dtype: crate::DType, n: u64, tile: u32, mul: bool) -> crate::kernels::ir::Program {
    use crate::kernels::ir::{Access, Builder, IndexExpr};
    use crate::ops::{BinaryOp, Padding};
    let mut b = Builder::new(format!("ew_{dtype}"), &[n.div_ceil(u64::from(tile))]);
    let pa = b.param("a", dtype, n, Access::Read);
    let pb = b.param("b", dtype, n, Access::Read);
    let py = b.param("y", dtype, n, Access::Write);
    let [va, vb, vy] = [pa, pb, py].map(|p| b.view_contiguous(p, &[n], &[tile], Padding::Zero));
    let idx = [IndexExpr::grid(0)];
    let x = b.load(va, &idx, true);
    let z = b.load(vb, &idx, true);
    let s = b.binary(BinaryOp::Add, x, z);
    let r = if mul { b.binary(BinaryOp::Mul, s, x) } else { s };
    b.store(vy, &idx, r, true);
    b.finish().unwrap()
}

/// The assembler against the CPU executor without a GPU: elementwise
/// kernels (tuned and quick text, tails masked) assembled and run on the
/// interpreter's CPU model give the executor's bits.
#[test]
fn assembled_elementwise_kernels_run_on_the_cpu_model_like_the_executor() {
    use crate::kernels::cpu::{execute, Arg};
    use crate::kernels::ptx_gen::{generate, generate_quick};
    use crate::storage::HostBuffer;
    use crate::DType;
    let target = PtxTarget::for_driver(90, 13000);
    let cases = [
        (DType::F32, 1000, 256, true),
        (DType::F32, 4099, 1024, true),
        (DType::I32, 777, 128, false),
        (DType::U8, 1001, 512, false),
        (DType::I64, 300, 64, false),
    ];
    for (dtype, n, tile, mul) in cases {
        let program = elementwise(dtype, n, tile, mul);
        // Inputs: a spread of bit patterns of the dtype.
        let input = |seed: u64| {
            let mut h = HostBuffer::zeros(dtype, n as usize);
            let mut x = seed;
            for b in h.bytes_mut() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                *b = (x >> 56) as u8;
            }
            if dtype == DType::F32 {
                // Keep floats finite and moderate (NaN payloads are not the
                // assembler's business).
                let v: Vec<f32> = (0..n).map(|i| ((i * 37 + seed) % 1000) as f32 * 0.013 - 6.0).collect();
                h = HostBuffer::from_elements(&v);
            }
            h
        };
        let (a, b) = (input(1), input(2));
        let mut want = HostBuffer::zeros(dtype, n as usize);
        execute(&program, &mut [Arg::Read(&a), Arg::Read(&b), Arg::Write(&mut want)]).unwrap();
        for module in [
            generate(&program, &target).unwrap(),
            generate_quick(&program, &target).unwrap(),
        ] {
            let out = output_on_model(&module, &[a.bytes(), b.bytes()], want.bytes().len());
            assert!(
                out == want.bytes(),
                "{} ({}): differs from the executor",
                program.name,
                module.mapping
            );
        }
    }
}

/// One `op` reduction per row of `rows` × `cols` in tiles of `tc` columns,
/// through a loop and an accumulator.
fn row_reduction(
    dtype: crate::DType,
    op: crate::kernels::ir::TileReduce,
    rows: u64,
    cols: u64,
    tc: u32,
) -> crate::kernels::ir::Program {
    use crate::kernels::ir::{Access, Builder, IndexExpr, TileReduce, ValueType};
    use crate::ops::{BinaryOp, Padding};
    use crate::Scalar;
    let mut b = Builder::new(format!("rows_{op:?}_{dtype}"), &[rows]);
    let x = b.param("x", dtype, rows * cols, Access::Read);
    let y = b.param("y", dtype, rows, Access::Write);
    let vx = b.view_contiguous(x, &[rows, cols], &[1, tc], Padding::Zero);
    let vy = b.view_contiguous(y, &[rows, 1], &[1, 1], Padding::Zero);
    let (init, update) = match op {
        TileReduce::Sum => (Scalar::Int(0, crate::DType::I64).cast(dtype), BinaryOp::Add),
        _ => (Scalar::Float(f64::NEG_INFINITY, dtype), BinaryOp::Maximum),
    };
    let acc = b.acc(ValueType::new(dtype, &[1, tc]), init);
    b.loop_(cols.div_ceil(u64::from(tc)), |b, i| {
        let idx = [IndexExpr::grid(0), IndexExpr::loop_var(i)];
        let t = b.load(vx, &idx, true);
        let inside = b.in_bounds(vx, &idx);
        let id = b.constant(init, dtype, &[1, tc]);
        let t = b.select(inside, t, id);
        b.acc_update(acc, update, t);
    });
    let total = b.acc_read(acc);
    let r = b.reduce(op, total, 1);
    b.store(vy, &[IndexExpr::grid(0), IndexExpr::constant(0)], r, false);
    b.finish().unwrap()
}

/// Row reductions (shuffles, shared memory, barriers, a loop) assembled and
/// run on the CPU model give the executor's values: integer sums and a
/// float maximum, whose results do not depend on the order.
#[test]
fn assembled_row_reductions_run_on_the_cpu_model_like_the_executor() {
    use crate::kernels::cpu::{execute, Arg};
    use crate::kernels::ir::TileReduce;
    use crate::kernels::ptx_gen::{generate, generate_quick};
    use crate::storage::HostBuffer;
    use crate::DType;
    let target = PtxTarget::for_driver(90, 13000);
    for (dtype, op, rows, cols, tc) in [
        (DType::I32, TileReduce::Sum, 5, 1009, 256),
        (DType::F32, TileReduce::Max, 4, 700, 128),
        (DType::I32, TileReduce::Sum, 3, 4096, 4096),
        (DType::F32, TileReduce::Max, 4, 2048, 2048),
        (DType::I64, TileReduce::Sum, 2, 1024, 1024),
    ] {
        let program = row_reduction(dtype, op, rows, cols, tc);
        let n = (rows * cols) as usize;
        let x = match dtype {
            DType::F32 => HostBuffer::from_elements(
                &(0..n)
                    .map(|i| ((i * 7919) % 10007) as f32 * 0.37 - 1800.5)
                    .collect::<Vec<_>>(),
            ),
            DType::I64 => HostBuffer::from_elements(
                &(0..n)
                    .map(|i| ((i * 7919) % 20011) as i64 * 1_000_003 - 10_000_000_000)
                    .collect::<Vec<_>>(),
            ),
            _ => HostBuffer::from_elements(&(0..n).map(|i| ((i * 7919) % 20011) as i32 - 10000).collect::<Vec<_>>()),
        };
        let mut want = HostBuffer::zeros(dtype, rows as usize);
        execute(&program, &mut [Arg::Read(&x), Arg::Write(&mut want)]).unwrap();
        let plain = generate(&program, &target).unwrap();
        for module in [plain, generate_quick(&program, &target).unwrap()] {
            let out = output_on_model(&module, &[x.bytes()], want.bytes().len());
            assert!(
                out == want.bytes(),
                "{} ({}): differs from the executor",
                program.name,
                module.mapping
            );
        }
    }
}

/// `y = x - max(row)` on rows of `cols` i32 in one tile: a row kernel that
/// uses its row again after the reduction, which the generator stages in
/// shared memory with `cp.async`.
#[test]
fn an_assembled_staged_row_kernel_runs_on_the_cpu_model_like_the_executor() {
    use crate::kernels::cpu::{execute, Arg};
    use crate::kernels::ir::{Access, Builder, IndexExpr, TileReduce};
    use crate::kernels::ptx_gen::{generate, generate_quick};
    use crate::ops::{BinaryOp, Padding};
    use crate::storage::HostBuffer;
    use crate::DType;
    let (rows, cols) = (6u64, 4096u64);
    let mut b = Builder::new("minus_row_max", &[rows]);
    let x = b.param("x", DType::I32, rows * cols, Access::Read);
    let y = b.param("y", DType::I32, rows * cols, Access::Write);
    let tile = [1, cols as u32];
    let vx = b.view_contiguous(x, &[rows, cols], &tile, Padding::Zero);
    let vy = b.view_contiguous(y, &[rows, cols], &tile, Padding::Zero);
    let idx = [IndexExpr::grid(0), IndexExpr::constant(0)];
    let t = b.load(vx, &idx, false);
    let m = b.reduce(TileReduce::Max, t, 1);
    let m = b.broadcast(m, &tile);
    let d = b.binary(BinaryOp::Sub, t, m);
    b.store(vy, &idx, d, false);
    let program = b.finish().unwrap();
    let n = (rows * cols) as usize;
    let xs = HostBuffer::from_elements(&(0..n).map(|i| ((i * 7919) % 30011) as i32 - 15000).collect::<Vec<_>>());
    let mut want = HostBuffer::zeros(DType::I32, n);
    execute(&program, &mut [Arg::Read(&xs), Arg::Write(&mut want)]).unwrap();
    let target = PtxTarget::for_driver(90, 13000);
    let mut staged = 0;
    for module in [
        generate(&program, &target).unwrap(),
        generate_quick(&program, &target).unwrap(),
    ] {
        staged += usize::from(module.text.contains("cp.async"));
        let out = output_on_model(&module, &[xs.bytes()], n * 4);
        assert!(out == want.bytes(), "{}: differs from the executor", module.mapping);
    }
    assert!(staged > 0, "the row was not staged: the test would not cover cp.async");
}

/// f32 to bf16 on a target without `cvt.rn.bf16.f32` (sm_75): the rounding
/// written with integer arithmetic gives the executor's bits on ties,
/// overflow to infinity, subnormals, signed zeros, infinities and NaNs.
#[test]
fn bf16_rounding_without_the_bf16_conversion_matches_the_executor() {
    use crate::kernels::cpu::{execute, Arg};
    use crate::kernels::ir::{Access, Builder, IndexExpr};
    use crate::kernels::ptx_gen::{generate, generate_quick};
    use crate::ops::Padding;
    use crate::storage::HostBuffer;
    use crate::DType;
    let mut bits: Vec<u32> = vec![
        0x3F80_8000, // a tie, rounds to even (down)
        0x3F81_8000, // a tie, rounds to even (up)
        0x3F80_8001,
        0x3F80_7FFF,
        0x7F7F_FFFF, // the largest f32: rounds to infinity
        0x7F7F_7FFF,
        0x0000_0001, // subnormals
        0x0000_8000,
        0x0001_8000,
        0x8000_0000, // -0
        0x0000_0000,
        0x7F80_0000, // ±infinity
        0xFF80_0000,
        0x7F80_0001, // NaNs whose rounding would carry
        0xFF80_7FFF,
        0x7FC0_0000,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while bits.len() < 3000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        bits.push((x >> 32) as u32);
    }
    let n = bits.len() as u64;
    // The raw bits (signalling NaNs stay signalling).
    let input = HostBuffer::from_pod(DType::F32, &bits);
    assert_eq!(input.as_slice::<u32>()[13], 0x7F80_0001);
    let tile = 256;
    let mut b = Builder::new("to_bf16", &[n.div_ceil(u64::from(tile))]);
    let px = b.param("x", DType::F32, n, Access::Read);
    let py = b.param("y", DType::BF16, n, Access::Write);
    let vx = b.view_contiguous(px, &[n], &[tile], Padding::Zero);
    let vy = b.view_contiguous(py, &[n], &[tile], Padding::Zero);
    let idx = [IndexExpr::grid(0)];
    let t = b.load(vx, &idx, true);
    let c = b.cast(t, DType::BF16);
    b.store(vy, &idx, c, true);
    let program = b.finish().unwrap();
    let mut want = HostBuffer::zeros(DType::BF16, n as usize);
    execute(&program, &mut [Arg::Read(&input), Arg::Write(&mut want)]).unwrap();
    let target = PtxTarget::for_driver(75, 12000);
    for module in [
        generate(&program, &target).unwrap(),
        generate_quick(&program, &target).unwrap(),
    ] {
        assert!(!module.text.contains("cvt.rn.bf16"), "{}", module.text);
        let out = output_on_model(&module, &[input.bytes()], want.bytes().len());
        for (i, (g, w)) in out.chunks(2).zip(want.bytes().chunks(2)).enumerate() {
            assert_eq!(g, w, "element {i}: f32 bits {:#010x}\n{}", bits[i], module.mapping);
        }
    }
}
