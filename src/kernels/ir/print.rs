//! The text form of programs, used in snapshot tests, kernel dumps and
//! verifier messages.
//!
//! The form is stable: the same program always prints the same text, one
//! item per line, loops as indented blocks:
//!
//! ```text
//! kernel chain(grid [4]) math=precise
//!   p0 a: f32[1000] read
//!   p1 out: f32[1000] write
//!   v0 = view p0 extents [1000] strides [1] offset 0 tile [256] pad zero
//!   v1 = view p1 extents [1000] strides [1] offset 0 tile [256] pad zero
//!   %0: f32[256] = load.masked v0[g0]
//!   %1: f32[256] = tanh %0
//!   store.masked v1[g0], %1
//! ```
//!
//! Index expressions print as their nonzero terms: `g0`, `g0*4+i0+1`, `3`.

use super::{Access, Accuracy, IndexExpr, Inst, MathMode, Program, ScalarKey, TileReduce, ValueId, ValueType, ViewId};
use crate::dtype::Scalar;
use std::fmt::{self, Write as _};

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let math = match self.math {
            MathMode::Precise => "precise",
            MathMode::Fast => "fast",
        };
        let accuracy = match self.accuracy {
            Accuracy::F32 => "",
            Accuracy::F16 => " accuracy=f16",
            Accuracy::Bf16 => " accuracy=bf16",
        };
        writeln!(
            f,
            "kernel {}(grid {}) math={math}{accuracy}",
            self.name,
            list(&self.grid)
        )?;
        for (i, p) in self.params.iter().enumerate() {
            let access = match p.access {
                Access::Read => "read",
                Access::Write => "write",
                Access::ReadWrite => "read_write",
            };
            write!(f, "  p{i} {}: {}[{}] {access}", p.name, p.dtype, p.len)?;
            match p.init {
                Some(init) => writeln!(f, " init {}", scalar(init))?,
                None => writeln!(f)?,
            }
        }
        for (i, d) in self.scalars.iter().enumerate() {
            writeln!(f, "  s{i}: {d}")?;
        }
        for (i, v) in self.views.iter().enumerate() {
            let window = if v.is_window() {
                format!(
                    " window {}..{}",
                    list(&v.lower),
                    list(&(0..v.extents.len()).map(|k| v.upper(k)).collect::<Vec<_>>())
                )
            } else {
                String::new()
            };
            writeln!(
                f,
                "  v{i} = view {}{window} extents {} strides {} offset {} tile {} pad {}",
                v.param,
                list(&v.extents),
                list(&v.strides),
                v.offset,
                list(&v.tile),
                v.padding
            )?;
        }
        for (i, a) in self.accs.iter().enumerate() {
            writeln!(f, "  acc{i}: {} init {}", a.ty, scalar(a.init))?;
        }
        block(f, self, &self.body, 1)
    }
}

/// Prints `insts` at `depth` levels of indentation, loops as blocks.
fn block(f: &mut fmt::Formatter<'_>, program: &Program, insts: &[Inst], depth: usize) -> fmt::Result {
    for inst in insts {
        let pad = "  ".repeat(depth);
        writeln!(
            f,
            "{pad}{}{}",
            inst_line(program, inst),
            if inst.nested().is_some() { " {" } else { "" }
        )?;
        if let Some(body) = inst.nested() {
            block(f, program, body, depth + 1)?;
            writeln!(f, "{pad}}}")?;
        }
    }
    Ok(())
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, list(&self.shape))
    }
}

impl fmt::Display for IndexExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms = Vec::new();
        if let Some((axis, c)) = self.grid {
            terms.push(term(&format!("g{axis}"), c));
        }
        if let Some((var, c)) = self.loop_var {
            terms.push(term(&var.to_string(), c));
        }
        if self.constant != 0 || terms.is_empty() {
            terms.push(self.constant.to_string());
        }
        f.write_str(&terms.join("+"))
    }
}

/// `name` times `coeff`, the coefficient left out when it is 1.
fn term(name: &str, coeff: u64) -> String {
    if coeff == 1 {
        name.to_string()
    } else {
        format!("{name}*{coeff}")
    }
}

fn reduce_name(op: TileReduce) -> &'static str {
    match op {
        TileReduce::Sum => "sum",
        TileReduce::Max => "max",
        TileReduce::Min => "min",
        TileReduce::Prod => "prod",
        TileReduce::LogAddExp => "logaddexp",
    }
}

/// One line of text for `inst` (a loop's header without its body), with
/// its result's type taken from `program`. Never panics, even on programs
/// that reference values or views that do not exist.
pub(crate) fn inst_line(program: &Program, inst: &Inst) -> String {
    let def = |dst: &ValueId| match program.values.get(dst.index()) {
        Some(ty) => format!("{dst}: {ty} = "),
        None => format!("{dst}: ? = "),
    };
    let masked = |m: &bool| if *m { ".masked" } else { "" };
    match inst {
        Inst::Load {
            dst,
            view,
            index,
            masked: m,
        } => format!("{}load{} {}", def(dst), masked(m), AccessView(*view, index)),
        Inst::Store {
            view,
            index,
            src,
            masked: m,
        } => format!("store{} {}, {src}", masked(m), AccessView(*view, index)),
        Inst::Gather {
            dst,
            view,
            index,
            at,
            stride,
            bound,
            flag,
        } => format!(
            "{}gather {}, {at} stride {stride} bound {bound}{}",
            def(dst),
            AccessView(*view, index),
            flag.map(|f| format!(" flag {f}")).unwrap_or_default()
        ),
        Inst::ScatterAdd {
            view,
            index,
            at,
            stride,
            bound,
            src,
            flag,
        } => format!(
            "scatter_add {}, {at} stride {stride} bound {bound}, {src} flag {flag}",
            AccessView(*view, index)
        ),
        Inst::InBounds { dst, view, index } => format!("{}in_bounds {}", def(dst), AccessView(*view, index)),
        Inst::Const { dst, value } => format!("{}const {}", def(dst), scalar(*value)),
        Inst::Scalar { dst, scalar } => format!("{}scalar {scalar}", def(dst)),
        Inst::Iota { dst, axis, index } => format!("{}iota axis {axis} index {index}", def(dst)),
        Inst::Unary { dst, op, src } => format!("{}{} {src}", def(dst), snake_case(&format!("{op:?}"))),
        Inst::Binary { dst, op, lhs, rhs } => {
            format!("{}{} {lhs}, {rhs}", def(dst), snake_case(&format!("{op:?}")))
        }
        Inst::Select {
            dst,
            cond,
            on_true,
            on_false,
        } => format!("{}select {cond}, {on_true}, {on_false}", def(dst)),
        Inst::Cast { dst, src } => format!("{}cast {src}", def(dst)),
        Inst::Uniform {
            dst,
            counter,
            key,
            bits,
        } => format!("{}uniform {counter}, {key} bits {bits}", def(dst)),
        Inst::Broadcast { dst, src } => format!("{}broadcast {src}", def(dst)),
        Inst::Reduce { dst, op, src, axis } => format!("{}reduce.{} {src} axis {axis}", def(dst), reduce_name(*op)),
        Inst::Scan { dst, op, src, axis } => format!("{}scan.{} {src} axis {axis}", def(dst), reduce_name(*op)),
        Inst::AccUpdate { acc, op, src } => format!("{acc} = {} {acc}, {src}", snake_case(&format!("{op:?}"))),
        Inst::AccRead { dst, acc } => format!("{}read {acc}", def(dst)),
        Inst::Loop { var, count, .. } => format!("loop {var} in 0..{count}"),
        Inst::Atomic {
            op,
            view,
            index,
            src,
            masked: m,
            scope,
        } => format!(
            "atomic.{}.{}{} {}, {src}",
            snake_case(&format!("{op:?}")),
            scope.name(),
            masked(m),
            AccessView(*view, index)
        ),
        Inst::Barrier => "barrier".to_string(),
        Inst::LastPoint { axis, counter, .. } => format!("last_point g{axis} counter {counter}"),
    }
}

/// A view and a partition index, printed `v0[g0, i0*2]`.
struct AccessView<'a>(ViewId, &'a [IndexExpr]);

impl fmt::Display for AccessView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.0)?;
        for (k, e) in self.1.iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("]")
    }
}

/// A constant without its dtype suffix (the dtype is in the value's type).
fn scalar(value: ScalarKey) -> String {
    match value.0 {
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i, _) => i.to_string(),
        Scalar::Float(x, _) => format!("{x:?}"),
    }
}

/// `[a, b, c]`.
pub(crate) fn list<T: fmt::Display>(items: &[T]) -> String {
    let mut s = String::from("[");
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{x}");
    }
    s.push(']');
    s
}

/// `GeluTanh` → `gelu_tanh`.
fn snake_case(camel: &str) -> String {
    let mut s = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_lowercase());
    }
    s
}
