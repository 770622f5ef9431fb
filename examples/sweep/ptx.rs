//! `--ptx DIR`: the sweep's cases as planned for a GPU, written out to be
//! read without running them: for each case, each kernel's tile program
//! (`<case>.k<i>.ir`) and its PTX for sm_90 (`<case>.k<i>.ptx`), and one
//! line per kernel in `DIR/resources.txt` with its grid, block and, where
//! `ptxas` is found, its registers, spills and shared memory. Needs no GPU:
//! the inputs are zero-filled host buffers whose pages are never touched.

use super::sweep_cases::{Case, Input};
use std::fmt::Write as _;
use tilefuse::fusion::{FusionOptions, TileTarget};
use tilefuse::kernels::ptx_gen::{self, ptxas, PtxTarget};
use tilefuse::{Config, DType, Tensor};

/// A zero-filled host tensor of `input`'s shape and `dtype`.
fn zeros(input: &Input, dtype: DType) -> Tensor {
    let n: usize = input.shape.iter().product();
    let shape = &input.shape;
    match dtype {
        DType::F16 => Tensor::from_vec(bytemuck::allocation::cast_vec::<u16, half::f16>(vec![0u16; n]), shape),
        DType::BF16 => Tensor::from_vec(bytemuck::allocation::cast_vec::<u16, half::bf16>(vec![0u16; n]), shape),
        DType::F64 => Tensor::from_vec(vec![0f64; n], shape),
        _ => Tensor::from_vec(vec![0f32; n], shape),
    }
}

/// Writes the programs, PTX and resources of `cases` under `dir`.
pub fn write(cases: &[Case], dir: &str) -> Result<(), String> {
    let io = |e: std::io::Error| format!("--ptx {dir}: {e}");
    let tf = |e: tilefuse::Error| e.to_string();
    std::fs::create_dir_all(dir).map_err(io)?;
    let target = PtxTarget::for_driver(90, 13000).with_sms(132);
    let options = FusionOptions::for_target(TileTarget::Gpu, &Config::current().fusion);
    let assembler = ptxas::find_ptxas();
    let mut table = String::new();
    for case in cases {
        let inputs: Vec<Tensor> = case.inputs().iter().map(|i| zeros(i, i.dtype_in(case.dtype))).collect();
        let outputs = case.build(&inputs).map_err(tf)?;
        let nodes: Vec<_> = outputs.iter().map(Tensor::node).collect();
        let plan = tilefuse::fusion::plan(&tilefuse::graph::extract(&nodes), &options).map_err(tf)?;
        let id = case.id();
        writeln!(table, "{id}: {}", case.describe()).unwrap();
        for (k, kernel) in plan.kernels.iter().enumerate() {
            let base = format!("{dir}/{id}.k{k}");
            std::fs::write(format!("{base}.ir"), kernel.program.to_string()).map_err(io)?;
            let codegen = &tilefuse::config::Config::process_default().codegen;
            let module = ptx_gen::generate_with(&kernel.program, &target, codegen).map_err(tf)?;
            std::fs::write(format!("{base}.ptx"), &module.text).map_err(io)?;
            let resources = match &assembler {
                Some(p) => match ptxas::assemble(p, &module.text, 90) {
                    Ok(r) => r
                        .iter()
                        .map(|r| {
                            format!(
                                "{} registers, {} B spilled, {} B shared",
                                r.registers,
                                r.spill_store_bytes + r.spill_load_bytes,
                                r.shared_bytes
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                    Err(e) => format!("ptxas: {e}"),
                },
                None => "no ptxas".into(),
            };
            writeln!(
                table,
                "  k{k} {} grid {:?} ({} blocks of {} threads), {}: {resources}",
                kernel.program.name,
                kernel.program.grid.as_slice(),
                module.grid_blocks,
                module.block_threads,
                kernel.strategy
            )
            .unwrap();
        }
    }
    std::fs::write(format!("{dir}/resources.txt"), &table).map_err(io)?;
    print!("{table}");
    Ok(())
}
