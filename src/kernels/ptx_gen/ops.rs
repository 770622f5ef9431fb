//! Elementwise lowering: the table from IR op and dtype to PTX instructions.

use super::emitter::{Class, Emitter};
use super::math::{self, IeeeOps, MathOps};
use super::math_half;
use super::math64::{self, MathOps64};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::{AccId, Accuracy, MathMode, ScalarId, ValueId};
use crate::ops::{BinaryOp, UnaryOp};

/// The immediate operand for `s` as a value of `d` (floats by their bits).
pub(super) fn immediate(s: Scalar, d: DType) -> std::result::Result<String, String> {
    Ok(match s.cast(d) {
        Scalar::Bool(b) => (b as u8).to_string(),
        Scalar::Int(i, DType::I64) => format!("0x{:016X}", i as i64 as u64),
        Scalar::Int(i, _) => format!("0x{:08X}", i as u32),
        Scalar::Float(x, DType::F16) => format!("0x{:04X}", half::f16::from_f64(x).to_bits()),
        Scalar::Float(x, DType::BF16) => format!("0x{:04X}", half::bf16::from_f64(x).to_bits()),
        Scalar::Float(x, DType::F32) => format!("0f{:08X}", (x as f32).to_bits()),
        Scalar::Float(x, DType::F64) => format!("0d{:016X}", x.to_bits()),
        other => return Err(format!("cannot make a {d} immediate from {other}")),
    })
}

/// `mov` of an immediate into a register of `d`'s class.
pub(super) fn mov_imm(d: DType, reg: &str, imm: &str) -> String {
    let ty = match Class::of(d) {
        Class::Pred => "pred",
        Class::B16 => "b16",
        Class::B32 => "b32",
        Class::F32 => "f32",
        Class::B64 => "b64",
        Class::F64 => "f64",
    };
    format!("mov.{ty} {reg}, {imm}")
}

/// The arithmetic type suffix of a compute dtype.
fn arith(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I32 => "s32",
        DType::I64 => "s64",
        DType::F16 | DType::BF16 => "b16",
        DType::Bool => "pred",
        DType::U8 | DType::U32 => "u32",
    }
}

/// The bitwise type suffix of a dtype.
fn bits(d: DType) -> &'static str {
    match d.size_in_bytes() {
        8 => "b64",
        2 => "b16",
        _ => "b32",
    }
}

/// `-val` in `d` (integers wrap; 16-bit floats flip the sign bit).
pub(super) fn negate(e: &mut Emitter<'_>, d: DType, val: &str) -> String {
    let r = e.reg(Class::of(d));
    match d {
        DType::F16 | DType::BF16 => e.ins(format!("xor.b16 {r}, {val}, 0x8000")),
        DType::I64 => e.ins(format!("neg.s64 {r}, {val}")),
        DType::F32 | DType::F64 => e.ins(format!("neg.{} {r}, {val}", arith(d))),
        _ => e.ins(format!("neg.s32 {r}, {val}")),
    }
    r
}

/// [`IeeeOps`] as PTX instructions on `$ty` registers of class `$class`
/// for the emitter wrapper `$model`, with its `op` (an instruction into a
/// new value register) and `pred` (a comparison) helpers.
macro_rules! ieee_ops_in_ptx {
    ($model:ident, $ty:literal, $class:expr) => {
        impl $model<'_, '_> {
            fn op(&mut self, text: impl FnOnce(&str) -> String) -> String {
                let r = self.0.reg($class);
                self.0.ins(text(&r));
                r
            }
            fn pred(&mut self, cmp: &str, a: &str, b: &str) -> String {
                let p = self.0.reg(Class::Pred);
                self.0
                    .ins(format!(concat!("setp.{}.", $ty, " {}, {}, {}"), cmp, p, a, b));
                p
            }
        }

        impl IeeeOps for $model<'_, '_> {
            type V = String;
            type P = String;
            fn add(&mut self, a: &String, b: &String) -> String {
                self.op(|r| format!(concat!("add.rn.", $ty, " {}, {}, {}"), r, a, b))
            }
            fn sub(&mut self, a: &String, b: &String) -> String {
                self.op(|r| format!(concat!("sub.rn.", $ty, " {}, {}, {}"), r, a, b))
            }
            fn mul(&mut self, a: &String, b: &String) -> String {
                self.op(|r| format!(concat!("mul.rn.", $ty, " {}, {}, {}"), r, a, b))
            }
            fn fma(&mut self, a: &String, b: &String, c: &String) -> String {
                self.op(|r| format!(concat!("fma.rn.", $ty, " {}, {}, {}, {}"), r, a, b, c))
            }
            fn div(&mut self, a: &String, b: &String) -> String {
                self.op(|r| format!(concat!("div.rn.", $ty, " {}, {}, {}"), r, a, b))
            }
            fn abs(&mut self, a: &String) -> String {
                self.op(|r| format!(concat!("abs.", $ty, " {}, {}"), r, a))
            }
            fn neg(&mut self, a: &String) -> String {
                self.op(|r| format!(concat!("neg.", $ty, " {}, {}"), r, a))
            }
            fn rint(&mut self, a: &String) -> String {
                self.op(|r| format!(concat!("cvt.rni.", $ty, ".", $ty, " {}, {}"), r, a))
            }
            fn floor(&mut self, a: &String) -> String {
                self.op(|r| format!(concat!("cvt.rmi.", $ty, ".", $ty, " {}, {}"), r, a))
            }
            fn lt(&mut self, a: &String, b: &String) -> String {
                self.pred("lt", a, b)
            }
            fn eq(&mut self, a: &String, b: &String) -> String {
                self.pred("eq", a, b)
            }
            fn select(&mut self, p: &String, a: &String, b: &String) -> String {
                self.op(|r| format!(concat!("selp.", $ty, " {}, {}, {}, {}"), r, a, b, p))
            }
            fn copysign(&mut self, a: &String, b: &String) -> String {
                // PTX's operand order is (sign source, magnitude source).
                self.op(|r| format!(concat!("copysign.", $ty, " {}, {}, {}"), r, b, a))
            }
            fn constant(&mut self, x: f64) -> String {
                let imm = Self::immediate(x);
                self.op(|r| format!(concat!("mov.", $ty, " {}, {}"), r, imm))
            }
            fn pow2i(&mut self, n: &String) -> String {
                self.pow2i_sequence(n)
            }
            fn exponent(&mut self, a: &String) -> String {
                self.exponent_sequence(a)
            }
            fn mantissa(&mut self, a: &String) -> String {
                self.mantissa_sequence(a)
            }
        }
    };
}

/// The emitter as a [`MathOps`] for f32 registers.
struct Ptx<'e, 'a>(&'e mut Emitter<'a>);

ieee_ops_in_ptx!(Ptx, "f32", Class::F32);

impl Ptx<'_, '_> {
    /// The f32 immediate of `x`.
    fn immediate(x: f64) -> String {
        format!("0f{:08X}", (x as f32).to_bits())
    }

    fn pow2i_sequence(&mut self, n: &str) -> String {
        // `1.5 · 2^23 + n` holds `n` in its low mantissa bits (exactly, for
        // `|n| < 2^22`); shifted into the exponent field and biased, it is `2^n`.
        let t = self.op(|r| format!("add.rn.f32 {r}, {n}, 0f4B400000"));
        let i = self.0.reg(Class::B32);
        self.0.ins(format!("mov.b32 {i}, {t}"));
        self.0.ins(format!("shl.b32 {i}, {i}, 23"));
        self.0.ins(format!("add.s32 {i}, {i}, 0x3F800000"));
        self.op(|r| format!("mov.b32 {r}, {i}"))
    }

    fn exponent_sequence(&mut self, a: &str) -> String {
        let i = self.0.reg(Class::B32);
        self.0.ins(format!("mov.b32 {i}, {a}"));
        self.0.ins(format!("bfe.u32 {i}, {i}, 23, 8"));
        self.0.ins(format!("add.s32 {i}, {i}, -127"));
        self.op(|r| format!("cvt.rn.f32.s32 {r}, {i}"))
    }
    fn mantissa_sequence(&mut self, a: &str) -> String {
        let i = self.0.reg(Class::B32);
        self.0.ins(format!("mov.b32 {i}, {a}"));
        self.0.ins(format!("and.b32 {i}, {i}, 0x007FFFFF"));
        self.0.ins(format!("or.b32 {i}, {i}, 0x3F800000"));
        self.op(|r| format!("mov.b32 {r}, {i}"))
    }
}

impl MathOps for Ptx<'_, '_> {
    fn ex2(&mut self, a: &String) -> String {
        self.op(|r| format!("ex2.approx.f32 {r}, {a}"))
    }
    fn ex2_ftz(&mut self, a: &String) -> String {
        self.op(|r| format!("ex2.approx.ftz.f32 {r}, {a}"))
    }
    fn rcp_ftz(&mut self, a: &String) -> String {
        self.op(|r| format!("rcp.approx.ftz.f32 {r}, {a}"))
    }
    fn tanh_approx(&mut self, a: &String) -> String {
        self.0.need_version((7, 0));
        self.op(|r| format!("tanh.approx.f32 {r}, {a}"))
    }
}

/// The emitter as a [`MathOps64`] for f64 registers.
struct Ptx64<'e, 'a>(&'e mut Emitter<'a>);

ieee_ops_in_ptx!(Ptx64, "f64", Class::F64);

impl Ptx64<'_, '_> {
    /// The f64 immediate of `x`.
    fn immediate(x: f64) -> String {
        format!("0d{:016X}", x.to_bits())
    }

    fn pow2i_sequence(&mut self, n: &str) -> String {
        // The integer `n`, biased and shifted into the exponent field.
        let i = self.0.reg(Class::B64);
        self.0.ins(format!("cvt.rni.s64.f64 {i}, {n}"));
        self.0.ins(format!("add.s64 {i}, {i}, 1023"));
        self.0.ins(format!("shl.b64 {i}, {i}, 52"));
        self.op(|r| format!("mov.b64 {r}, {i}"))
    }

    fn exponent_sequence(&mut self, a: &str) -> String {
        let i = self.0.reg(Class::B64);
        self.0.ins(format!("mov.b64 {i}, {a}"));
        self.0.ins(format!("bfe.u64 {i}, {i}, 52, 11"));
        self.0.ins(format!("add.s64 {i}, {i}, -1023"));
        self.op(|r| format!("cvt.rn.f64.s64 {r}, {i}"))
    }
    fn mantissa_sequence(&mut self, a: &str) -> String {
        let i = self.0.reg(Class::B64);
        self.0.ins(format!("mov.b64 {i}, {a}"));
        self.0.ins(format!("and.b64 {i}, {i}, 0x000FFFFFFFFFFFFF"));
        self.0.ins(format!("or.b64 {i}, {i}, 0x3FF0000000000000"));
        self.op(|r| format!("mov.b64 {r}, {i}"))
    }
}

impl MathOps64 for Ptx64<'_, '_> {
    fn guarded<F: FnOnce(&mut Self) -> Vec<String>>(&mut self, needed: &String, n: usize, body: F) -> Vec<String> {
        // Zeros where the body is skipped (the callers select other values
        // there, so the zeros never show), then a branch around the body.
        let outs: Vec<String> = (0..n).map(|_| self.c(0.0)).collect();
        let skip = self.0.label();
        self.0.ins(format!("@!{needed} bra {skip}"));
        let values = body(self);
        assert_eq!(values.len(), n, "a guarded body's value count");
        for (o, v) in outs.iter().zip(&values) {
            self.0.ins(format!("mov.f64 {o}, {v}"));
        }
        self.0.place_label(&skip);
        outs
    }
    fn reduce_large(&mut self, a: &String) -> (String, String, String) {
        // `math64::reduce_large_bits`, instruction by instruction.
        let e = &mut *self.0;
        e.declare_module(math64_table());
        let b64 = |e: &mut Emitter<'_>, text: &dyn Fn(&str) -> String| {
            let r = e.reg(Class::B64);
            e.ins(text(&r));
            r
        };
        let bits = b64(e, &|r| format!("mov.b64 {r}, {a}"));
        let ex = b64(e, &|r| format!("bfe.u64 {r}, {bits}, 52, 11"));
        let m = b64(e, &|r| format!("and.b64 {r}, {bits}, 0x000FFFFFFFFFFFFF"));
        e.ins(format!("or.b64 {m}, {m}, 0x0010000000000000"));
        let j0 = b64(e, &|r| format!("sub.s64 {r}, {ex}, 1013"));
        let w = b64(e, &|r| format!("shr.u64 {r}, {j0}, 6"));
        let sh = e.reg(Class::B32);
        e.ins(format!("cvt.u32.u64 {sh}, {j0}"));
        e.ins(format!("and.b32 {sh}, {sh}, 63"));
        let rsh = e.reg(Class::B32);
        e.ins(format!("sub.s32 {rsh}, 63, {sh}"));
        let addr = b64(e, &|r| format!("mov.u64 {r}, {TABLE}"));
        e.ins(format!("mad.lo.u64 {addr}, {w}, 8, {addr}"));
        let t: Vec<String> = (0..4)
            .map(|i| b64(e, &|r| format!("ld.const.u64 {r}, [{addr}+{}]", 8 * i)))
            .collect();
        let window = |e: &mut Emitter<'_>, hi: &str, lo: &str| {
            let x = b64(e, &|r| format!("shl.b64 {r}, {hi}, {sh}"));
            let y = b64(e, &|r| format!("shr.u64 {r}, {lo}, 1"));
            e.ins(format!("shr.u64 {y}, {y}, {rsh}"));
            b64(e, &|r| format!("or.b64 {r}, {x}, {y}"))
        };
        let w2 = window(e, &t[0], &t[1]);
        let w1 = window(e, &t[1], &t[2]);
        let w0 = window(e, &t[2], &t[3]);
        let lo0 = b64(e, &|r| format!("mul.lo.u64 {r}, {m}, {w0}"));
        let hi0 = b64(e, &|r| format!("mul.hi.u64 {r}, {m}, {w0}"));
        let lo1 = b64(e, &|r| format!("mul.lo.u64 {r}, {m}, {w1}"));
        let hi1 = b64(e, &|r| format!("mul.hi.u64 {r}, {m}, {w1}"));
        let lo2 = b64(e, &|r| format!("mul.lo.u64 {r}, {m}, {w2}"));
        let word1 = b64(e, &|r| format!("add.cc.u64 {r}, {hi0}, {lo1}"));
        let word2 = b64(e, &|r| format!("addc.u64 {r}, {hi1}, {lo2}"));
        let f_hi = b64(e, &|r| format!("shl.b64 {r}, {word2}, 2"));
        let t1 = b64(e, &|r| format!("shr.u64 {r}, {word1}, 62"));
        e.ins(format!("or.b64 {f_hi}, {f_hi}, {t1}"));
        let f_lo = b64(e, &|r| format!("shl.b64 {r}, {word1}, 2"));
        let t0 = b64(e, &|r| format!("shr.u64 {r}, {lo0}, 62"));
        e.ins(format!("or.b64 {f_lo}, {f_lo}, {t0}"));
        let negative = b64(e, &|r| format!("shr.u64 {r}, {f_hi}, 63"));
        let q = b64(e, &|r| format!("shr.u64 {r}, {word2}, 62"));
        e.ins(format!("add.u64 {q}, {q}, {negative}"));
        e.ins(format!("and.b64 {q}, {q}, 3"));
        // The magnitude of the signed 128-bit fraction.
        let nh = b64(e, &|r| format!("not.b64 {r}, {f_hi}"));
        let nl = b64(e, &|r| format!("not.b64 {r}, {f_lo}"));
        e.ins(format!("add.cc.u64 {nl}, {nl}, 1"));
        e.ins(format!("addc.u64 {nh}, {nh}, 0"));
        let is_neg = e.reg(Class::Pred);
        e.ins(format!("setp.ne.u64 {is_neg}, {negative}, 0"));
        let mh = b64(e, &|r| format!("selp.b64 {r}, {nh}, {f_hi}, {is_neg}"));
        let ml = b64(e, &|r| format!("selp.b64 {r}, {nl}, {f_lo}, {is_neg}"));
        let f = self.op(|r| format!("cvt.rn.f64.u64 {r}, {mh}"));
        let e = &mut *self.0;
        let back = b64(e, &|r| format!("cvt.rzi.u64.f64 {r}, {f}"));
        let rest = b64(e, &|r| format!("sub.s64 {r}, {mh}, {back}"));
        let rest_f = self.op(|r| format!("cvt.rn.f64.s64 {r}, {rest}"));
        let ml_f = self.op(|r| format!("cvt.rn.f64.u64 {r}, {ml}"));
        let ml_f = self.op(|r| format!("mul.rn.f64 {r}, {ml_f}, 0d37F0000000000000"));
        let f_lo = self.op(|r| format!("fma.rn.f64 {r}, {rest_f}, 0d3BF0000000000000, {ml_f}"));
        let f_hi = self.op(|r| format!("mul.rn.f64 {r}, {f}, 0d3BF0000000000000"));
        let nf_hi = self.op(|r| format!("neg.f64 {r}, {f_hi}"));
        let nf_lo = self.op(|r| format!("neg.f64 {r}, {f_lo}"));
        let f_hi = self.op(|r| format!("selp.f64 {r}, {nf_hi}, {f_hi}, {is_neg}"));
        let f_lo = self.op(|r| format!("selp.f64 {r}, {nf_lo}, {f_lo}, {is_neg}"));
        let q = self.op(|r| format!("cvt.rn.f64.u64 {r}, {q}"));
        (q, f_hi, f_lo)
    }
}

/// The name of the module's copy of [`math64::TWO_OVER_PI`].
const TABLE: &str = "tf_two_over_pi";

/// The module-scope declaration of [`TABLE`], written once per process.
fn math64_table() -> &'static str {
    static DECL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECL.get_or_init(|| {
        let words: Vec<String> = math64::TWO_OVER_PI.iter().map(|w| format!("0x{w:016X}")).collect();
        format!(
            ".const .align 8 .u64 {TABLE}[{}] = {{{}}};",
            words.len(),
            words.join(", ")
        )
    })
}

impl Emitter<'_> {
    /// A copy of a register of `d`.
    pub fn mov(&mut self, d: DType, src: &str) -> String {
        let r = self.reg(Class::of(d));
        let ty = if d == DType::Bool { "pred" } else { bits(d) };
        let ty = match d {
            DType::F32 => "f32",
            DType::F64 => "f64",
            _ => ty,
        };
        self.ins(format!("mov.{ty} {r}, {src}"));
        r
    }

    /// One instruction `op.ty r, args` into a new register of `d`.
    fn emit(&mut self, d: DType, text: impl FnOnce(&str) -> String) -> String {
        let r = self.reg(Class::of(d));
        self.ins(text(&r));
        r
    }

    /// Wraps a `u8` value held in 32 bits back to 8 bits.
    fn wrap_u8(&mut self, d: DType, r: String) -> String {
        if d == DType::U8 {
            self.ins(format!("and.b32 {r}, {r}, 255"));
        }
        r
    }

    fn unsupported(&self, op: &'static str, d: DType, reason: &'static str) -> Error {
        Error::UnsupportedDType { op, dtype: d, reason }
    }

    /// `op(a, b)` on values of dtype `d`.
    pub fn binary(&mut self, op: BinaryOp, d: DType, a: &str, b: &str) -> Result<String> {
        use BinaryOp::*;
        let t = arith(d);
        if matches!(d, DType::F16 | DType::BF16) {
            return Err(self.unsupported("ptx_gen binary", d, "cast 16-bit floats to f32 before arithmetic"));
        }
        if d == DType::Bool {
            let text = match op {
                BitAnd | Mul | Minimum => "and.pred {r}, {a}, {b}",
                BitOr | Maximum | Add => "or.pred {r}, {a}, {b}",
                BitXor | Ne => "xor.pred {r}, {a}, {b}",
                Lt => "and.pred {r}, !{a}, {b}",
                Le => "or.pred {r}, !{a}, {b}",
                Gt => "and.pred {r}, {a}, !{b}",
                Ge => "or.pred {r}, {a}, !{b}",
                Eq => {
                    let x = self.emit(d, |r| format!("xor.pred {r}, {a}, {b}"));
                    return Ok(self.emit(d, |r| format!("not.pred {r}, {x}")));
                }
                Sub | Div | Pow => return Err(self.unsupported("ptx_gen binary", d, "not defined on bool")),
            };
            return Ok(self.emit(d, |r| text.replace("{r}", r).replace("{a}", a).replace("{b}", b)));
        }
        let float = d.is_float();
        if op.is_comparison() {
            let cmp = match op {
                Eq => "eq",
                Ne if float => "neu",
                Ne => "ne",
                Lt => "lt",
                Le => "le",
                Gt => "gt",
                _ => "ge",
            };
            return Ok(self.emit(DType::Bool, |r| format!("setp.{cmp}.{t} {r}, {a}, {b}")));
        }
        let fast = self.prog.math == MathMode::Fast;
        let r = match op {
            Add | Sub | Mul if float => {
                let name = format!("{op:?}").to_lowercase();
                self.emit(d, |r| format!("{name}.rn.{t} {r}, {a}, {b}"))
            }
            Add | Sub => {
                let name = format!("{op:?}").to_lowercase();
                let r = self.emit(d, |r| format!("{name}.{t} {r}, {a}, {b}"));
                self.wrap_u8(d, r)
            }
            Mul => {
                let r = self.emit(d, |r| format!("mul.lo.{t} {r}, {a}, {b}"));
                self.wrap_u8(d, r)
            }
            Div if d == DType::F32 && fast => self.emit(d, |r| format!("div.approx.f32 {r}, {a}, {b}")),
            Div if float => self.emit(d, |r| format!("div.rn.{t} {r}, {a}, {b}")),
            Div => {
                // Integer division by zero gives 0.
                let q = self.emit(d, |r| format!("div.{t} {r}, {a}, {b}"));
                let z = self.emit(DType::Bool, |p| format!("setp.eq.{t} {p}, {b}, 0"));
                self.emit(d, |r| format!("selp.{} {r}, 0, {q}, {z}", bits(d)))
            }
            Maximum | Minimum => {
                let name = if op == Maximum { "max" } else { "min" };
                match d {
                    DType::F32 if self.target.sm >= 80 => {
                        self.need_version((7, 0));
                        self.emit(d, |r| format!("{name}.NaN.f32 {r}, {a}, {b}"))
                    }
                    DType::F32 | DType::F64 => {
                        // f64 has no `.NaN`, and f32's needs sm_80: the
                        // canonical NaN it gives, selected by hand.
                        let nan = if d == DType::F32 {
                            "0f7FFFFFFF"
                        } else {
                            "0d7FF8000000000000"
                        };
                        let m = self.emit(d, |r| format!("{name}.{t} {r}, {a}, {b}"));
                        let n = self.emit(DType::Bool, |p| format!("setp.nan.{t} {p}, {a}, {b}"));
                        self.emit(d, |r| format!("selp.{t} {r}, {nan}, {m}, {n}"))
                    }
                    _ => self.emit(d, |r| format!("{name}.{t} {r}, {a}, {b}")),
                }
            }
            BitAnd | BitOr | BitXor if !float => {
                let name = match op {
                    BitAnd => "and",
                    BitOr => "or",
                    _ => "xor",
                };
                self.emit(d, |r| format!("{name}.{} {r}, {a}, {b}", bits(d)))
            }
            Pow if d == DType::F32 && self.prog.accuracy != Accuracy::F32 => {
                math_half::pow(&mut Ptx(self), &a.to_string(), &b.to_string())
            }
            Pow if d == DType::F32 => math::pow(&mut Ptx(self), &a.to_string(), &b.to_string()),
            Pow if d == DType::F64 => math64::pow(&mut Ptx64(self), &a.to_string(), &b.to_string()),
            _ => return Err(self.unsupported("ptx_gen binary", d, "the op needs another dtype")),
        };
        Ok(r)
    }

    /// `op(a)` on a value of dtype `d`.
    pub fn unary(&mut self, op: UnaryOp, d: DType, a: &str) -> Result<String> {
        use UnaryOp::*;
        let t = arith(d);
        let name = op.name();
        if matches!(d, DType::F16 | DType::BF16) {
            return Err(self.unsupported(name, d, "cast 16-bit floats to f32 before arithmetic"));
        }
        if d == DType::Bool {
            return match op {
                Not => Ok(self.emit(d, |r| format!("not.pred {r}, {a}"))),
                Abs | Relu | Floor | Ceil | Round | Sign => Ok(self.mov(d, a)),
                _ => Err(self.unsupported(name, d, "not defined on bool")),
            };
        }
        if !d.is_float() {
            let signed = d.is_signed_int();
            return match op {
                Neg => {
                    let r = negate(self, d, a);
                    Ok(self.wrap_u8(d, r))
                }
                Abs if signed => Ok(self.emit(d, |r| format!("abs.{t} {r}, {a}"))),
                Relu if signed => Ok(self.emit(d, |r| format!("max.{t} {r}, {a}, 0"))),
                Abs | Relu | Floor | Ceil | Round => Ok(self.mov(d, a)),
                Not => {
                    let r = self.emit(d, |r| format!("not.{} {r}, {a}", bits(d)));
                    Ok(self.wrap_u8(d, r))
                }
                Sign => {
                    let b = bits(d);
                    let pos = self.emit(DType::Bool, |p| format!("setp.gt.{t} {p}, {a}, 0"));
                    let neg = self.emit(DType::Bool, |p| format!("setp.lt.{t} {p}, {a}, 0"));
                    let one = self.emit(d, |r| format!("selp.{b} {r}, 1, 0, {pos}"));
                    Ok(self.emit(d, |r| format!("selp.{b} {r}, -1, {one}, {neg}")))
                }
                _ => Err(self.unsupported(name, d, "needs a float dtype")),
            };
        }
        let fast = self.prog.math == MathMode::Fast && d == DType::F32;
        let simple = match op {
            Neg => Some(format!("neg.{t} {{r}}, {a}")),
            Abs => Some(format!("abs.{t} {{r}}, {a}")),
            Floor => Some(format!("cvt.rmi.{t}.{t} {{r}}, {a}")),
            Ceil => Some(format!("cvt.rpi.{t}.{t} {{r}}, {a}")),
            Round => Some(format!("cvt.rni.{t}.{t} {{r}}, {a}")),
            Sqrt if fast => Some(format!("sqrt.approx.f32 {{r}}, {a}")),
            Sqrt => Some(format!("sqrt.rn.{t} {{r}}, {a}")),
            Recip if fast => Some(format!("rcp.approx.f32 {{r}}, {a}")),
            Recip => Some(format!("rcp.rn.{t} {{r}}, {a}")),
            Rsqrt if fast => Some(format!("rsqrt.approx.f32 {{r}}, {a}")),
            Exp2 if fast => Some(format!("ex2.approx.ftz.f32 {{r}}, {a}")),
            Log2 if fast => Some(format!("lg2.approx.ftz.f32 {{r}}, {a}")),
            Sin if fast => Some(format!("sin.approx.ftz.f32 {{r}}, {a}")),
            Cos if fast => Some(format!("cos.approx.ftz.f32 {{r}}, {a}")),
            Tanh if fast => Some(format!("tanh.approx.f32 {{r}}, {a}")),
            _ => None,
        };
        if let Some(text) = simple {
            if op == Tanh {
                self.need_version((7, 0));
            }
            return Ok(self.emit(d, |r| text.replace("{r}", r)));
        }
        match op {
            Relu => {
                let zero = if d == DType::F32 {
                    "0f00000000"
                } else {
                    "0d0000000000000000"
                };
                self.binary(BinaryOp::Maximum, d, a, zero)
            }
            Sign => {
                let (one, m1) = if d == DType::F32 {
                    ("0f3F800000", "0fBF800000")
                } else {
                    ("0d3FF0000000000000", "0dBFF0000000000000")
                };
                let zero = if d == DType::F32 {
                    "0f00000000"
                } else {
                    "0d0000000000000000"
                };
                let pos = self.emit(DType::Bool, |p| format!("setp.gt.{t} {p}, {a}, {zero}"));
                let neg = self.emit(DType::Bool, |p| format!("setp.lt.{t} {p}, {a}, {zero}"));
                let x = self.emit(d, |r| format!("selp.{t} {r}, {one}, {a}, {pos}"));
                Ok(self.emit(d, |r| format!("selp.{t} {r}, {m1}, {x}, {neg}")))
            }
            Rsqrt => {
                let s = self.emit(d, |r| format!("sqrt.rn.{t} {r}, {a}"));
                Ok(self.emit(d, |r| format!("rcp.rn.{t} {r}, {s}")))
            }
            _ if d == DType::F64 => {
                let x = a.to_string();
                let m = &mut Ptx64(self);
                match op {
                    Exp => Ok(math64::exp(m, &x)),
                    Exp2 => Ok(math64::exp2(m, &x)),
                    Log => Ok(math64::log(m, &x)),
                    Log2 => Ok(math64::log2(m, &x)),
                    Sin => Ok(math64::sin_cos(m, &x, false)),
                    Cos => Ok(math64::sin_cos(m, &x, true)),
                    Tanh => Ok(math64::tanh(m, &x)),
                    Sigmoid => Ok(math64::sigmoid(m, &x)),
                    Silu => Ok(math64::silu(m, &x)),
                    GeluTanh => Ok(math64::gelu_tanh(m, &x)),
                    GeluErf => Ok(math64::gelu_erf(m, &x)),
                    _ => Err(self.unsupported(name, d, "not defined on floats")),
                }
            }
            Exp if fast => {
                let x = self.emit(d, |r| format!("mul.f32 {r}, {a}, 0f3FB8AA3B"));
                Ok(self.emit(d, |r| format!("ex2.approx.ftz.f32 {r}, {x}")))
            }
            Log if fast => {
                let x = self.emit(d, |r| format!("lg2.approx.ftz.f32 {r}, {a}"));
                Ok(self.emit(d, |r| format!("mul.f32 {r}, {x}, 0f3F317218")))
            }
            Sigmoid | Silu | GeluTanh if fast => {
                // sigmoid(x) = 0.5 tanh(x / 2) + 0.5.
                self.need_version((7, 0));
                let u = if op == GeluTanh {
                    let x2 = self.emit(d, |r| format!("mul.f32 {r}, {a}, {a}"));
                    let p = self.emit(d, |r| format!("fma.rn.f32 {r}, {x2}, 0f3D372713, 0f3F800000"));
                    let p = self.emit(d, |r| format!("mul.f32 {r}, {p}, {a}"));
                    self.emit(d, |r| format!("mul.f32 {r}, {p}, 0f3F4C422A"))
                } else {
                    self.emit(d, |r| format!("mul.f32 {r}, {a}, 0f3F000000"))
                };
                let th = self.emit(d, |r| format!("tanh.approx.f32 {r}, {u}"));
                let s = self.emit(d, |r| format!("fma.rn.f32 {r}, {th}, 0f3F000000, 0f3F000000"));
                if op == Sigmoid {
                    Ok(s)
                } else {
                    Ok(self.emit(d, |r| format!("mul.f32 {r}, {s}, {a}")))
                }
            }
            Exp | Log | Log2 | Tanh | Sigmoid | Silu if self.prog.accuracy != Accuracy::F32 => {
                // Results rounded to f16 or bf16: the shorter sequences.
                let hardware_tanh = self.prog.accuracy == Accuracy::Bf16 && self.target.sm >= 75;
                let x = a.to_string();
                let m = &mut Ptx(self);
                Ok(match op {
                    Exp => math_half::exp(m, &x),
                    Log => math_half::log(m, &x),
                    Log2 => math_half::log2(m, &x),
                    Tanh if hardware_tanh => math_half::tanh_bf16(m, &x),
                    Tanh => math_half::tanh(m, &x),
                    Sigmoid => math_half::sigmoid(m, &x),
                    _ => math_half::silu(m, &x),
                })
            }
            _ => {
                let x = a.to_string();
                let m = &mut Ptx(self);
                Ok(match op {
                    Exp => math::exp(m, &x),
                    Exp2 => math::exp2(m, &x),
                    Log => math::log(m, &x),
                    Log2 => math::log2(m, &x),
                    Sin => math::sin_cos(m, &x, 0.0),
                    Cos => math::sin_cos(m, &x, 1.0),
                    Tanh => math::tanh(m, &x),
                    Sigmoid => math::sigmoid(m, &x),
                    Silu => math::silu(m, &x),
                    GeluTanh => math::gelu_tanh(m, &x),
                    _ => math::gelu_erf(m, &x),
                })
            }
        }
    }

    /// The f32 `f` rounded to the nearest bf16, ties to even, with integer
    /// arithmetic: `cvt.rn.bf16.f32` needs sm_80. The upper 16 bits after
    /// adding `0x7FFF` plus the lowest kept bit; a NaN (magnitude bits above
    /// `0x7F800000`) keeps its upper bits with the quiet bit set (a carry
    /// could make it an infinity).
    fn f32_to_bf16_by_bits(&mut self, f: &str) -> String {
        let bits = self.emit(DType::U32, |r| format!("mov.b32 {r}, {f}"));
        let lsb = self.emit(DType::U32, |r| format!("shr.u32 {r}, {bits}, 16"));
        self.ins(format!("and.b32 {lsb}, {lsb}, 1"));
        let sum = self.emit(DType::U32, |r| format!("add.u32 {r}, {bits}, 32767"));
        self.ins(format!("add.u32 {sum}, {sum}, {lsb}"));
        let magnitude = self.emit(DType::U32, |r| format!("and.b32 {r}, {bits}, 2147483647"));
        let nan = self.emit(DType::Bool, |p| format!("setp.gt.u32 {p}, {magnitude}, 2139095040"));
        let quiet = self.emit(DType::U32, |r| format!("or.b32 {r}, {bits}, 4194304"));
        self.ins(format!("@{nan} mov.b32 {sum}, {quiet}"));
        self.ins(format!("shr.u32 {sum}, {sum}, 16"));
        self.emit(DType::BF16, |r| format!("cvt.u16.u32 {r}, {sum}"))
    }

    /// `src` (of `from`) converted to `to`, as [`crate::kernels::ir::Inst::Cast`] defines.
    pub fn cast(&mut self, from: DType, to: DType, src: &str) -> Result<String> {
        use DType::*;
        if from == to {
            return Ok(self.mov(to, src));
        }
        // 16-bit floats widen exactly to f32 first.
        if matches!(from, F16 | BF16) {
            let f = match from {
                F16 => self.emit(F32, |r| format!("cvt.f32.f16 {r}, {src}")),
                _ => {
                    let w = self.emit(U32, |r| format!("cvt.u32.u16 {r}, {src}"));
                    self.ins(format!("shl.b32 {w}, {w}, 16"));
                    self.emit(F32, |r| format!("mov.b32 {r}, {w}"))
                }
            };
            return self.cast(F32, to, &f);
        }
        if to == Bool {
            let zero = match from {
                F32 => "0f00000000",
                F64 => "0d0000000000000000",
                _ => "0",
            };
            let cmp = if from.is_float() { "neu" } else { "ne" };
            return Ok(self.emit(Bool, |p| format!("setp.{cmp}.{} {p}, {src}, {zero}", arith(from))));
        }
        if from == Bool {
            let (one, zero) = match to {
                F16 => ("0x3C00", "0x0000"),
                BF16 => ("0x3F80", "0x0000"),
                F32 => ("0f3F800000", "0f00000000"),
                F64 => ("0d3FF0000000000000", "0d0000000000000000"),
                _ => ("1", "0"),
            };
            return Ok(self.emit(to, |r| format!("selp.{} {r}, {one}, {zero}, {src}", bits(to))));
        }
        if matches!(to, F16 | BF16) {
            // Round to f32 by rounding to odd (exact for f32 sources), then to 16 bits once.
            let f = if from == F32 {
                src.to_string()
            } else {
                let wide = if from == F64 {
                    src.to_string()
                } else {
                    self.cast(from, F64, src)?
                };
                let rz = self.emit(F32, |r| format!("cvt.rz.f32.f64 {r}, {wide}"));
                let back = self.emit(F64, |r| format!("cvt.f64.f32 {r}, {rz}"));
                let inexact = self.emit(Bool, |p| format!("setp.neu.f64 {p}, {back}, {wide}"));
                let b = self.emit(U32, |r| format!("mov.b32 {r}, {rz}"));
                self.ins(format!("@{inexact} or.b32 {b}, {b}, 1"));
                self.emit(F32, |r| format!("mov.b32 {r}, {b}"))
            };
            if to == BF16 && self.target.sm < 80 {
                return Ok(self.f32_to_bf16_by_bits(&f));
            }
            let name = if to == F16 { "f16" } else { "bf16" };
            return Ok(self.emit(to, |r| format!("cvt.rn.{name}.f32 {r}, {f}")));
        }
        let cvt_name = |d: DType| match d {
            U8 => "u8",
            I32 => "s32",
            U32 => "u32",
            I64 => "s64",
            F32 => "f32",
            _ => "f64",
        };
        if from.is_float() && !to.is_float() {
            // Truncate toward zero into i64 (saturating, NaN to 0), then wrap.
            // `cvt.rzi.s64` gives i64::MIN for NaN on the GPU, so NaN is
            // selected to 0 explicitly.
            let i = self.emit(I64, |r| format!("cvt.rzi.s64.{} {r}, {src}", arith(from)));
            let nan = self.emit(Bool, |p| format!("setp.nan.{} {p}, {src}, {src}", arith(from)));
            self.ins(format!("@{nan} mov.b64 {i}, 0"));
            return self.cast(I64, to, &i);
        }
        if to.is_float() {
            let rnd = if from == F64 || !from.is_float() { ".rn" } else { "" };
            return Ok(self.emit(to, |r| {
                format!("cvt{rnd}.{}.{} {r}, {src}", cvt_name(to), cvt_name(from))
            }));
        }
        // Integer to integer: wrap.
        Ok(match (from, to) {
            (I64, _) => {
                let r = self.emit(to, |r| format!("cvt.u32.u64 {r}, {src}"));
                self.wrap_u8(to, r)
            }
            (_, I64) => self.emit(to, |r| {
                format!("cvt.{}.{} {r}, {src}", "s64", cvt_name(from).replace("u8", "u32"))
            }),
            _ => {
                let r = self.mov(to, src);
                self.wrap_u8(to, r)
            }
        })
    }

    /// Lowers `Inst::Unary`.
    pub fn unary_inst(&mut self, dst: ValueId, op: UnaryOp, src: ValueId) -> Result<()> {
        let d = self.ty(src)?.dtype;
        let regs = self.val(src)?;
        let exact = self.prog.math != MathMode::Fast;
        if matches!(op, UnaryOp::Recip | UnaryOp::Rsqrt)
            && d == DType::F32
            && exact
            && self.tuning.row_reciprocal_f64
            && self.uniform.contains(&src)
        {
            if let Some(first) = regs.first() {
                let r = self.recip_of_uniform_f32(op, first)?;
                self.vals.insert(dst, vec![r; regs.len()]);
                return Ok(());
            }
        }
        let out = regs.iter().map(|r| self.unary(op, d, r)).collect::<Result<_>>()?;
        self.vals.insert(dst, out);
        Ok(())
    }

    /// Lowers `Inst::Binary`.
    pub fn binary_inst(&mut self, dst: ValueId, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> Result<()> {
        let d = self.ty(lhs)?.dtype;
        let (a, b) = (self.val(lhs)?, self.val(rhs)?);
        // Fast math keeps its `div.approx`; this path is the exact one.
        let exact = self.prog.math != MathMode::Fast;
        if op == BinaryOp::Div && d == DType::F32 && exact && self.uniform.contains(&rhs) && !b.is_empty() {
            let out = self.div_by_uniform_f32(&a, &b[0]);
            self.vals.insert(dst, out);
            return Ok(());
        }
        let out = a
            .iter()
            .zip(&b)
            .map(|(a, b)| self.binary(op, d, a, b))
            .collect::<Result<_>>()?;
        self.vals.insert(dst, out);
        Ok(())
    }

    /// `x / s` for every `x` of `xs`, `s` one value every thread holds (a
    /// row's sum in softmax): the reciprocal of `s` once in f64, then per
    /// element an f64 product rounded once to f32. That equals `div.rn.f32`
    /// on every input: the product is within 2^-51.9 of `x/s` (relative),
    /// while `x/s` is either an f32 rounding boundary or at least 2^-49 from
    /// every one (boundaries have 25 significant bits, `x` and `s` 24, so
    /// `x − m·s` is 0 or at least `x·2^-49`), and f64 holds every quotient
    /// of f32s without overflow or underflow. It spares ptxas one `div.rn`
    /// slow path per element, and such slow paths are much of what the JIT
    /// spends its time on in softmax (see `benches/NOTES.md`, v6 and v8).
    ///
    /// The reciprocal is `rcp.approx.ftz.f64` refined by two Newton steps
    /// (`e = 1 − s·r`, `r += r·e`, each one `fma`). Each step squares the
    /// relative error, so any start good to 2^-14 or better ends at the f64
    /// rounding of the last step, within 2^-52 relative, which the bound
    /// above allows for; the GPU test
    /// `division_and_reciprocals_of_a_row_value_are_correctly_rounded`
    /// checks the result bit for bit on 2^21 values of all exponents.
    /// `rcp.rn.f64` would be exact but brings its own slow path for ptxas
    /// to compile (see `benches/NOTES.md`, v8). `s` is an f32, so
    /// in f64 it is never subnormal and its reciprocal is finite unless `s`
    /// is 0, ±∞ or NaN; for those the steps give NaN and the hardware
    /// reciprocal (±∞, ±0, NaN: exact) is kept.
    fn div_by_uniform_f32(&mut self, xs: &[String], s: &str) -> Vec<String> {
        let rd = self.recip_f64_of_f32(s);
        xs.iter()
            .map(|x| {
                let xd = self.reg(Class::F64);
                self.ins(format!("cvt.f64.f32 {xd}, {x}"));
                self.ins(format!("mul.rn.f64 {xd}, {xd}, {rd}"));
                self.emit(DType::F32, |r| format!("cvt.rn.f32.f64 {r}, {xd}"))
            })
            .collect()
    }

    /// `1/s` in f64 for an f32 `s`, within 2^-52 relative (exact for 0,
    /// ±∞ and NaN): see [`div_by_uniform_f32`](Self::div_by_uniform_f32).
    fn recip_f64_of_f32(&mut self, s: &str) -> String {
        const ONE: &str = "0d3FF0000000000000";
        let sd = self.reg(Class::F64);
        self.ins(format!("cvt.f64.f32 {sd}, {s}"));
        let start = self.reg(Class::F64);
        self.ins(format!("rcp.approx.ftz.f64 {start}, {sd}"));
        let neg = self.reg(Class::F64);
        self.ins(format!("neg.f64 {neg}, {sd}"));
        let mut r = start.clone();
        for _ in 0..2 {
            let e = self.reg(Class::F64);
            self.ins(format!("fma.rn.f64 {e}, {neg}, {r}, {ONE}"));
            let next = self.reg(Class::F64);
            self.ins(format!("fma.rn.f64 {next}, {r}, {e}, {r}"));
            r = next;
        }
        let finite = self.reg(Class::Pred);
        self.ins(format!("testp.finite.f64 {finite}, {r}"));
        let rd = self.reg(Class::F64);
        self.ins(format!("selp.f64 {rd}, {r}, {start}, {finite}"));
        rd
    }

    /// `1/s` (`Recip`) or `1/sqrt(s)` (`Rsqrt`, as `1/sqrt.rn(s)`) of an f32
    /// value every thread holds: the reciprocal through
    /// [`recip_f64_of_f32`](Self::recip_f64_of_f32), rounded once to f32,
    /// which equals `rcp.rn.f32` (the argument of `div_by_uniform_f32` with
    /// `x = 1`) without its slow path.
    fn recip_of_uniform_f32(&mut self, op: UnaryOp, s: &str) -> Result<String> {
        let s = if op == UnaryOp::Rsqrt {
            self.unary(UnaryOp::Sqrt, DType::F32, s)?
        } else {
            s.to_string()
        };
        let rd = self.recip_f64_of_f32(&s);
        Ok(self.emit(DType::F32, |r| format!("cvt.rn.f32.f64 {r}, {rd}")))
    }

    /// Lowers `Inst::Select`.
    pub fn select_inst(&mut self, dst: ValueId, cond: ValueId, on_true: ValueId, on_false: ValueId) -> Result<()> {
        let d = self.ty(on_true)?.dtype;
        let (c, a, b) = (self.val(cond)?, self.val(on_true)?, self.val(on_false)?);
        let mut out = Vec::with_capacity(c.len());
        for ((c, a), b) in c.iter().zip(&a).zip(&b) {
            out.push(if d == DType::Bool {
                let x = self.emit(d, |r| format!("and.pred {r}, {c}, {a}"));
                let y = self.emit(d, |r| format!("and.pred {r}, !{c}, {b}"));
                self.emit(d, |r| format!("or.pred {r}, {x}, {y}"))
            } else {
                let t = match d {
                    DType::F32 => "f32",
                    DType::F64 => "f64",
                    _ => bits(d),
                };
                self.emit(d, |r| format!("selp.{t} {r}, {a}, {b}, {c}"))
            });
        }
        self.vals.insert(dst, out);
        Ok(())
    }

    /// Lowers `Inst::Cast`.
    pub fn cast_inst(&mut self, dst: ValueId, src: ValueId) -> Result<()> {
        let (from, to) = (self.ty(src)?.dtype, self.ty(dst)?.dtype);
        let regs = self.val(src)?;
        let out = regs.iter().map(|r| self.cast(from, to, r)).collect::<Result<_>>()?;
        self.vals.insert(dst, out);
        Ok(())
    }

    /// Lowers `Inst::Uniform`: Philox-4x32-10 per element ([`crate::philox`]),
    /// the keys of the ten rounds computed once per key register, then the
    /// first word (f32) or two words (f64) scaled onto the grid `2^-bits`.
    pub fn uniform_inst(&mut self, dst: ValueId, counter: ValueId, key: ValueId, bits: u8) -> Result<()> {
        let [m0, m1, w0, w1] = crate::philox::CONSTANTS;
        let d = self.ty(dst)?.dtype;
        let (counters, keys) = (self.val(counter)?, self.val(key)?);
        let mut round_keys: std::collections::HashMap<String, Vec<(String, String)>> = Default::default();
        let mut out = Vec::with_capacity(counters.len());
        for (c, k) in counters.iter().zip(&keys) {
            if !round_keys.contains_key(k) {
                let (k0, k1) = self.halves(k);
                let mut rounds = vec![(k0.clone(), k1.clone())];
                for r in 1..10u32 {
                    let (a, b) = (self.reg(Class::B32), self.reg(Class::B32));
                    self.ins(format!("add.u32 {a}, {k0}, {}", w0.wrapping_mul(r)));
                    self.ins(format!("add.u32 {b}, {k1}, {}", w1.wrapping_mul(r)));
                    rounds.push((a, b));
                }
                round_keys.insert(k.clone(), rounds);
            }
            let (c0, c1) = self.halves(c);
            let zero = self.reg(Class::B32);
            self.ins(format!("mov.u32 {zero}, 0"));
            let mut x = [c0, c1, zero.clone(), zero];
            for (k0, k1) in round_keys[k].clone() {
                let (lo0, hi0, lo1, hi1) = (self.reg(Class::B32), self.reg(Class::B32), self.reg(Class::B32), self.reg(Class::B32));
                self.ins(format!("mul.lo.u32 {lo0}, {}, {m0}", x[0]));
                self.ins(format!("mul.hi.u32 {hi0}, {}, {m0}", x[0]));
                self.ins(format!("mul.lo.u32 {lo1}, {}, {m1}", x[2]));
                self.ins(format!("mul.hi.u32 {hi1}, {}, {m1}", x[2]));
                let (n0, n2) = (self.reg(Class::B32), self.reg(Class::B32));
                self.ins(format!("xor.b32 {n0}, {hi1}, {}", x[1]));
                self.ins(format!("xor.b32 {n0}, {n0}, {k0}"));
                self.ins(format!("xor.b32 {n2}, {hi0}, {}", x[3]));
                self.ins(format!("xor.b32 {n2}, {n2}, {k1}"));
                x = [n0, lo1, n2, lo0];
            }
            let v = self.reg(Class::of(d));
            match d {
                DType::F32 if (1..=24).contains(&bits) => {
                    let t = self.reg(Class::B32);
                    self.ins(format!("shr.u32 {t}, {}, {}", x[0], 32 - bits as u32));
                    self.ins(format!("cvt.rn.f32.u32 {v}, {t}"));
                    self.ins(format!("mul.rn.f32 {v}, {v}, 0f{:08X}", (-(bits as f32)).exp2().to_bits()));
                }
                DType::F64 if (1..=53).contains(&bits) => {
                    let (a, b, b64) = (self.reg(Class::B64), self.reg(Class::B32), self.reg(Class::B64));
                    self.ins(format!("cvt.u64.u32 {a}, {}", x[0]));
                    self.ins(format!("shl.b64 {a}, {a}, 21"));
                    self.ins(format!("shr.u32 {b}, {}, 11", x[1]));
                    self.ins(format!("cvt.u64.u32 {b64}, {b}"));
                    self.ins(format!("or.b64 {a}, {a}, {b64}"));
                    if bits < 53 {
                        self.ins(format!("shr.u64 {a}, {a}, {}", 53 - bits as u32));
                    }
                    self.ins(format!("cvt.rn.f64.u64 {v}, {a}"));
                    self.ins(format!("mul.rn.f64 {v}, {v}, 0d{:016X}", (-(bits as f64)).exp2().to_bits()));
                }
                _ => return Err(self.invalid(format!("uniform values of {d} on 2^-{bits}"))),
            }
            out.push(v);
        }
        self.vals.insert(dst, out);
        Ok(())
    }

    /// The low and high 32-bit halves of a 64-bit register.
    fn halves(&mut self, r: &str) -> (String, String) {
        let (lo, hi, t) = (self.reg(Class::B32), self.reg(Class::B32), self.reg(Class::B64));
        self.ins(format!("cvt.u32.u64 {lo}, {r}"));
        self.ins(format!("shr.u64 {t}, {r}, 32"));
        self.ins(format!("cvt.u32.u64 {hi}, {t}"));
        (lo, hi)
    }

    /// Lowers `Inst::Const`: one register shared by every slot.
    pub fn constant(&mut self, dst: ValueId, value: Scalar) -> Result<()> {
        let ty = self.ty(dst)?;
        let d = ty.dtype;
        let slots = self.layout(&ty.shape).slots();
        let imm = immediate(value, d).map_err(|e| self.invalid(e))?;
        let r = self.reg(Class::of(d));
        self.ins(mov_imm(d, &r, &imm));
        self.vals.insert(dst, vec![r; slots]);
        Ok(())
    }

    /// Lowers `Inst::Scalar`: the argument's bits (the value's bytes in the
    /// low end of a `.u64` parameter) in one register shared by every slot.
    pub fn scalar_arg(&mut self, dst: ValueId, scalar: ScalarId) -> Result<()> {
        let ty = self.ty(dst)?;
        let d = ty.dtype;
        let slots = self.layout(&ty.shape).slots();
        let bits = self
            .scalars
            .get(scalar.index())
            .cloned()
            .ok_or_else(|| self.invalid(format!("scalar argument {scalar} is not declared")))?;
        let class = Class::of(d);
        let r = match class {
            Class::B64 => bits,
            Class::F64 => {
                let r = self.reg(class);
                self.ins(format!("mov.b64 {r}, {bits}"));
                r
            }
            Class::Pred => {
                let r = self.reg(class);
                self.ins(format!("setp.ne.u64 {r}, {bits}, 0"));
                r
            }
            Class::B32 => {
                let r = self.reg(class);
                self.ins(format!("cvt.u32.u64 {r}, {bits}"));
                r
            }
            Class::F32 => {
                let (w, r) = (self.reg(Class::B32), self.reg(class));
                self.ins(format!("cvt.u32.u64 {w}, {bits}"));
                self.ins(format!("mov.b32 {r}, {w}"));
                r
            }
            Class::B16 => return Err(self.invalid(format!("scalar argument {scalar} of {d}"))),
        };
        self.vals.insert(dst, vec![r; slots]);
        Ok(())
    }

    /// Lowers `Inst::AccUpdate`.
    pub fn acc_update(&mut self, acc: AccId, op: BinaryOp, src: ValueId) -> Result<()> {
        let regs = self
            .accs
            .get(acc.index())
            .cloned()
            .ok_or_else(|| self.invalid(format!("accumulator {acc} is not declared")))?;
        let d = self.prog.accs[acc.index()].ty.dtype;
        let s = self.val(src)?;
        for (a, s) in regs.iter().zip(&s) {
            let r = self.binary(op, d, a, s)?;
            let ty = match d {
                DType::Bool => "pred",
                DType::F32 => "f32",
                DType::F64 => "f64",
                _ => bits(d),
            };
            self.ins(format!("mov.{ty} {a}, {r}"));
        }
        Ok(())
    }
}
