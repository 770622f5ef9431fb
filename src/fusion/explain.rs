//! A readable account of a plan: its kernels, the graph nodes each
//! computes, their printed programs, and a DOT picture of the graph with one
//! cluster per kernel.

use super::{plan, FusionOptions, Plan};
use crate::error::Result;
use crate::graph::Subgraph;
use std::fmt::Write as _;

/// The plan of `graph` under `options`, as text followed by a DOT graph.
///
/// ```
/// use std::sync::Arc;
/// use tilefuse::fusion::{explain, FusionOptions};
/// use tilefuse::graph::{Op, SubNode, Subgraph, UnaryOp};
/// use tilefuse::storage::{HostBuffer, Storage};
/// use tilefuse::{DType, Shape};
///
/// let x = Op::Data(Arc::new(Storage::Host(HostBuffer::zeros(DType::F32, 4))));
/// let node = |op, inputs: &[usize]| SubNode { op, shape: Shape::new(&[4]), dtype: DType::F32, inputs: inputs.into() };
/// let g = Subgraph { nodes: vec![node(x, &[]), node(Op::Unary(UnaryOp::Exp), &[0])], outputs: vec![1] };
/// let text = explain(&g, &FusionOptions::default())?;
/// assert!(text.contains("kernel 0: exp"));
/// assert!(text.contains("subgraph cluster_0"));
/// # Ok::<(), tilefuse::Error>(())
/// ```
pub fn explain(graph: &Subgraph, options: &FusionOptions) -> Result<String> {
    let p = plan(graph, options)?;
    let graph = &*super::prepared(graph, p.shifted);
    Ok(format!("{}\n{}", describe(graph, &p), dot(graph, &p)))
}

/// The kernels of `p` with their nodes and programs.
fn describe(g: &Subgraph, p: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "plan: {} kernel(s), {} buffer(s)", p.kernels.len(), p.buffers.len());
    for (i, b) in p.buffers.iter().enumerate() {
        let _ = writeln!(s, "  t{i}: {}[{}]", b.dtype, b.len);
    }
    let _ = writeln!(s, "  outputs: {:?}", p.outputs);
    for (i, k) in p.kernels.iter().enumerate() {
        let names: Vec<String> = k.nodes.iter().map(|&n| g.nodes[n].op.name()).collect();
        let _ = writeln!(s, "kernel {i}: {}", names.join(", "));
        let _ = writeln!(s, "  nodes {:?}, args {:?}", k.nodes, k.args);
        let _ = writeln!(s, "  strategy: {}", k.strategy);
        for line in k.program.to_string().lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    s
}

/// The graph in DOT, kernels as clusters (a node recomputed by several
/// kernels is drawn in the first).
fn dot(g: &Subgraph, p: &Plan) -> String {
    let mut s = String::from("digraph plan {\n  node [shape=box];\n");
    let mut drawn = vec![false; g.nodes.len()];
    for (i, k) in p.kernels.iter().enumerate() {
        let _ = writeln!(s, "  subgraph cluster_{i} {{\n    label=\"kernel {i}\";");
        for &n in &k.nodes {
            if !drawn[n] {
                drawn[n] = true;
                let _ = writeln!(s, "    n{n} [label=\"{}\"];", label(g, n));
            }
        }
        s.push_str("  }\n");
    }
    for (n, d) in drawn.iter().enumerate() {
        if !d {
            let _ = writeln!(s, "  n{n} [label=\"{}\", style=dashed];", label(g, n));
        }
    }
    for (n, node) in g.nodes.iter().enumerate() {
        for &i in &node.inputs {
            let _ = writeln!(s, "  n{i} -> n{n};");
        }
    }
    s.push_str("}\n");
    s
}

fn label(g: &Subgraph, n: usize) -> String {
    let node = &g.nodes[n];
    format!("{n}: {} {}{}", node.op.name(), node.dtype, node.shape).replace('"', "'")
}
