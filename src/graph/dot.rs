//! Graphviz DOT text of a subgraph, for looking at what was recorded.

use super::subgraph::Subgraph;
use std::fmt::Write;

/// The DOT text of `sub`: one box per node labelled with its op, shape and
/// dtype, and one edge per operand labelled with the operand's position.
/// Requested outputs are drawn with a double border.
///
/// ```
/// use tilefuse::Tensor;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
/// let dot = (&a * 2.0).exp().to_dot();
/// assert!(dot.starts_with("digraph"));
/// assert!(dot.contains("exp\\n[2] f32"));
/// ```
pub fn to_dot(sub: &Subgraph) -> String {
    let mut out = String::from("digraph tilefuse {\n  node [shape=box];\n");
    for (i, n) in sub.nodes.iter().enumerate() {
        let label = format!("{}\\n{} {}", n.op.name(), n.shape, n.dtype).replace('"', "\\\"");
        let border = if sub.outputs.contains(&i) {
            ", peripheries=2"
        } else {
            ""
        };
        let _ = writeln!(out, "  n{i} [label=\"{label}\"{border}];");
    }
    for (i, n) in sub.nodes.iter().enumerate() {
        for (pos, input) in n.inputs.iter().enumerate() {
            let _ = writeln!(out, "  n{input} -> n{i} [label=\"{pos}\"];");
        }
    }
    out.push_str("}\n");
    out
}
