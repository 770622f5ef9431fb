//! A reader for the PTX that `ptx_gen` writes: one kernel, one statement
//! per line, registers declared as `.reg .<type> %<prefix><<n>>`. Anything
//! outside that subset is reported as [`Unsupported`], never guessed at.

use super::Unsupported;
use std::collections::HashMap;

/// The storage width of a register or immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Width {
    Pred,
    B16,
    B32,
    B64,
}

impl Width {
    /// From a PTX type suffix (`u32`, `f64`, `pred`, ...).
    pub(crate) fn of_type(ty: &str) -> Option<Width> {
        Some(match ty {
            "pred" => Width::Pred,
            "b8" | "u8" | "s8" | "b16" | "u16" | "s16" | "f16" | "bf16" => Width::B16,
            "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" => Width::B32,
            "b64" | "u64" | "s64" | "f64" => Width::B64,
            _ => return None,
        })
    }

    /// The letter used in instruction forms: `p`, `16`, `32`, `64`.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Width::Pred => "p",
            Width::B16 => "16",
            Width::B32 => "32",
            Width::B64 => "64",
        }
    }
}

/// An immediate operand: its bits and whether it was written as a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Imm {
    Int(i64),
    F32(u32),
    F64(u64),
}

/// The base of a memory operand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Base<'a> {
    Reg(&'a str),
    Symbol(&'a str),
}

/// One operand as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg<'a> {
    Reg(&'a str),
    /// A negated predicate (`!%p1`).
    NotReg(&'a str),
    Vector(Vec<&'a str>),
    Addr(Base<'a>, i64),
    Imm(Imm, &'a str),
    Symbol(&'a str),
}

/// One instruction: `@guard op args;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inst<'a> {
    /// The guarding predicate register and whether it is negated (`@!%p`).
    pub guard: Option<(&'a str, bool)>,
    pub op: &'a str,
    pub args: Vec<Arg<'a>>,
}

/// A statement of the kernel's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    Label(&'a str),
    Inst(Inst<'a>),
}

/// The parsed kernel.
#[derive(Debug, Default)]
pub(crate) struct ParsedKernel<'a> {
    /// Parameter names, in order.
    pub params: Vec<&'a str>,
    /// Register prefix (`%rd`) to width.
    pub regs: HashMap<&'a str, Width>,
    /// Shared arrays: name, alignment, bytes.
    pub shared: Vec<(&'a str, u32, u32)>,
    /// Tables in the constant space (`.const .u64 name[n] = {...}`): name
    /// and values.
    pub tables: Vec<(&'a str, Vec<u64>)>,
    pub body: Vec<Line<'a>>,
}

impl ParsedKernel<'_> {
    /// The width of register `name`, or `None` when it is not a declared
    /// register (a special register such as `%tid.x`).
    pub(crate) fn width(&self, name: &str) -> Option<Width> {
        let prefix = name.trim_end_matches(|c: char| c.is_ascii_digit());
        if prefix.len() == name.len() {
            return None;
        }
        self.regs.get(prefix).copied()
    }
}

fn unsupported(what: impl Into<String>) -> Unsupported {
    Unsupported(what.into())
}

/// Parses one kernel of `ptx_gen`'s output.
pub(crate) fn parse(text: &str) -> Result<ParsedKernel<'_>, Unsupported> {
    let mut kernel = ParsedKernel::default();
    let mut entries = 0;
    let mut in_params = false;
    for raw in text.lines() {
        let line = match raw.find("//") {
            Some(i) => &raw[..i],
            None => raw,
        }
        .trim();
        if line.is_empty() || line == "{" || line == "}" {
            continue;
        }
        if in_params {
            if line.starts_with(')') {
                in_params = false;
                continue;
            }
            let name = line
                .strip_prefix(".param .u64 ")
                .ok_or_else(|| unsupported(format!("parameter `{line}`")))?;
            kernel.params.push(name.trim_end_matches(','));
            continue;
        }
        if let Some(rest) = line.strip_prefix('.') {
            let directive = rest.split_whitespace().next().unwrap_or("");
            match directive {
                "version" | "target" | "address_size" | "maxntid" | "minnctapersm" | "pragma" | "reqntid" => {}
                "visible" | "entry" => {
                    entries += 1;
                    if !line.ends_with('(') {
                        return Err(unsupported(format!("entry `{line}`")));
                    }
                    in_params = true;
                }
                "reg" => {
                    // .reg .b32 %r<20>;
                    let mut it = rest.split_whitespace().skip(1);
                    let (Some(ty), Some(name)) = (it.next(), it.next()) else {
                        return Err(unsupported(format!("register declaration `{line}`")));
                    };
                    let width = ty
                        .strip_prefix('.')
                        .and_then(Width::of_type)
                        .ok_or_else(|| unsupported(format!("register type `{ty}`")))?;
                    let prefix = name
                        .split('<')
                        .next()
                        .filter(|p| p.starts_with('%') && name.contains('<'))
                        .ok_or_else(|| unsupported(format!("register declaration `{line}`")))?;
                    kernel.regs.insert(prefix, width);
                }
                "const" => {
                    // .const .align 8 .u64 name[n] = {v, ...};
                    let table = (|| {
                        let (decl, values) = rest.split_once('=')?;
                        let words: Vec<&str> = decl.split_whitespace().collect();
                        let ["const", ".align", _, ".u64", named] = words.as_slice() else {
                            return None;
                        };
                        let (name, count) = named.split_once('[')?;
                        let count: usize = count.trim_end_matches(']').parse().ok()?;
                        let inner = values.trim().trim_end_matches(';').trim();
                        let inner = inner.strip_prefix('{')?.strip_suffix('}')?;
                        let values: Vec<u64> = inner
                            .split(',')
                            .map(|v| parse_int(v.trim()).map(|v| v as u64))
                            .collect::<Option<_>>()?;
                        (values.len() == count).then_some((name, values))
                    })();
                    kernel
                        .tables
                        .push(table.ok_or_else(|| unsupported(format!("constant table `{line}`")))?);
                }
                "shared" => {
                    // .shared .align 16 .b8 name[bytes];
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    // .shared .align 4 .b32 name;
                    let parsed = match words.as_slice() {
                        ["shared", ".align", align, ty, decl] => {
                            let size = match Width::of_type(ty.trim_start_matches('.')) {
                                _ if *ty == ".b8" || *ty == ".u8" => Some(1),
                                Some(Width::B16) => Some(2),
                                Some(Width::B32) => Some(4),
                                Some(Width::B64) => Some(8),
                                _ => None,
                            };
                            let decl = decl.trim_end_matches(';');
                            let (name, count) = match decl.split_once('[') {
                                Some((n, c)) => (n, c.trim_end_matches(']').parse::<u32>().ok()),
                                None => (decl, Some(1)),
                            };
                            match (align.parse::<u32>().ok(), size, count) {
                                (Some(a), Some(s), Some(c)) => u32::checked_mul(s, c).map(|bytes| (name, a, bytes)),
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    kernel
                        .shared
                        .push(parsed.ok_or_else(|| unsupported(format!("shared declaration `{line}`")))?);
                }
                _ => return Err(unsupported(format!("directive `{line}`"))),
            }
            continue;
        }
        if let Some(label) = line.strip_suffix(':') {
            kernel.body.push(Line::Label(label));
            continue;
        }
        kernel.body.push(Line::Inst(parse_inst(line)?));
    }
    if entries != 1 {
        return Err(unsupported(format!("{entries} entries")));
    }
    Ok(kernel)
}

fn parse_inst(line: &str) -> Result<Inst<'_>, Unsupported> {
    let line = line
        .strip_suffix(';')
        .ok_or_else(|| unsupported(format!("statement `{line}`")))?
        .trim();
    let (guard, line) = match line.strip_prefix('@') {
        Some(rest) => {
            let (g, rest) = rest
                .split_once(char::is_whitespace)
                .ok_or_else(|| unsupported(format!("guard in `{line}`")))?;
            let guard = match g.strip_prefix('!') {
                Some(p) => (p, true),
                None => (g, false),
            };
            (Some(guard), rest.trim())
        }
        None => (None, line),
    };
    let (op, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let args = split_args(rest.trim())
        .into_iter()
        .map(parse_arg)
        .collect::<Result<_, _>>()?;
    Ok(Inst { guard, op, args })
}

/// Splits on commas outside `{}` and `[]`.
fn split_args(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return vec![];
    }
    let mut out = vec![];
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

fn parse_arg(a: &str) -> Result<Arg<'_>, Unsupported> {
    if let Some(inner) = a.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        let regs: Vec<&str> = inner.split(',').map(str::trim).collect();
        if regs.iter().any(|r| !r.starts_with('%')) {
            return Err(unsupported(format!("vector operand `{a}`")));
        }
        return Ok(Arg::Vector(regs));
    }
    if let Some(inner) = a.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let (base, offset) = match inner.find(['+', '-']) {
            Some(i) if i > 0 => {
                let off = parse_int(inner[i..].trim_start_matches('+').trim())
                    .ok_or_else(|| unsupported(format!("address `{a}`")))?;
                (inner[..i].trim(), off)
            }
            _ => (inner.trim(), 0),
        };
        let base = if base.starts_with('%') {
            Base::Reg(base)
        } else if is_symbol(base) {
            Base::Symbol(base)
        } else {
            return Err(unsupported(format!("address `{a}`")));
        };
        return Ok(Arg::Addr(base, offset));
    }
    if let Some(r) = a.strip_prefix("!%") {
        return Ok(Arg::NotReg(&a[1..1 + 1 + r.len()]));
    }
    if a.starts_with('%') {
        // Declared registers are told from special ones by the caller.
        return Ok(Arg::Reg(a));
    }
    if let Some(hex) = a.strip_prefix("0f").filter(|h| h.len() == 8) {
        if let Ok(bits) = u32::from_str_radix(hex, 16) {
            return Ok(Arg::Imm(Imm::F32(bits), a));
        }
    }
    if let Some(hex) = a.strip_prefix("0d").filter(|h| h.len() == 16) {
        if let Ok(bits) = u64::from_str_radix(hex, 16) {
            return Ok(Arg::Imm(Imm::F64(bits), a));
        }
    }
    if let Some(v) = parse_int(a) {
        return Ok(Arg::Imm(Imm::Int(v), a));
    }
    if is_symbol(a) {
        return Ok(Arg::Symbol(a));
    }
    Err(unsupported(format!("operand `{a}`")))
}

fn is_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        u64::from_str_radix(hex.trim_end_matches('U'), 16).ok()? as i64
    } else {
        let d = digits.trim_end_matches('U');
        if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        d.parse::<u64>().ok()? as i64
    };
    Some(if neg { v.wrapping_neg() } else { v })
}
