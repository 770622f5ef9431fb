//! Correctly rounded f32 `sqrt` and `1/x` built from the approximate
//! hardware instructions and `fma`, bit-identical to `sqrt.rn.f32` and
//! `rcp.rn.f32` on every input.
//!
//! ptxas expands each `.rn` instruction into a fast path plus a slow-path
//! subroutine for the rare operands, and the driver's JIT pays for that
//! subroutine: on an H200 the rmsnorm and layernorm kernels took about 7 ms
//! longer to JIT with `sqrt.rn`/`rcp.rn` than without. Here the rare
//! operands are scaled into the fast path's range instead, so the whole
//! operation is a short straight line of code:
//!
//! - Both start from the approximate instruction (`rsqrt.approx` or
//!   `rcp.approx`) and take one Newton step: `s = x·y`, `r = fma(-s, s, x)`,
//!   `s + r·y/2` for the root; `e = fma(-x, y, 1)`, `fma(e, y, y)` for the
//!   reciprocal. That lands within an ulp of the exact value but not
//!   always on its rounding (a tie in the last `fma` can go the wrong
//!   way), so the result is then checked against the midpoints to its two
//!   neighbours, which are exact in f64 along with the sign of the
//!   residual against each, and moved to the neighbour the exact value
//!   rounds to.
//! - `sqrt`: `x < 2^-100` is scaled by 2^64 (exact) and the root by 2^-32
//!   (exact, as every root of an f32 is normal), keeping the residual
//!   normal.
//! - `1/x`: a subnormal `|x|` is scaled by 2^24 and the result by 2^24
//!   (exact, or correctly overflowing). `|x| > 2^125` is scaled by 2^-3,
//!   keeping `rcp.approx.ftz` clear of subnormals; where the result is
//!   subnormal, scaling it back rounds a second time, so the scaled result
//!   is first moved one ulp towards the exact value when it sits exactly on
//!   a rounding midpoint (the sign of the exact residual tells the side).
//! - `0`, `inf`, `NaN` and negative square roots take the approximate
//!   instructions' results, which are the IEEE ones for those operands.
//!
//! The GPU test `correctly_rounded_sequences_match_the_hardware_on_every_f32`
//! runs both sequences, and `1/sqrt x` built from them, on all 2^32 bit
//! patterns against the `.rn` instructions.

use super::emit::{Class, Emitter};

/// Which function [`Emitter::round_exactly`] rounds: the inverse of `y²` or
/// of `x·y`.
#[derive(Clone, Copy)]
enum Inverse {
    Square,
    Product,
}

/// 2^-126, the smallest normal f32.
const MIN_NORMAL: &str = "0f00800000";
/// 2^-100: below it a root's residual would be subnormal.
const TWO_M100: &str = "0f0D800000";
/// 2^125.
const TWO_125: &str = "0f7E000000";
const INF: &str = "0f7F800000";

impl Emitter<'_> {
    fn f32_op(&mut self, text: impl FnOnce(&str) -> String) -> String {
        let r = self.reg(Class::F32);
        self.ins(text(&r));
        r
    }

    fn pred_op(&mut self, text: impl FnOnce(&str) -> String) -> String {
        let p = self.reg(Class::Pred);
        self.ins(text(&p));
        p
    }

    /// A predicate that `a` is positive and finite (false for NaN).
    fn positive_finite(&mut self, a: &str) -> String {
        let pos = self.pred_op(|p| format!("setp.gt.f32 {p}, {a}, 0f00000000"));
        let fin = self.pred_op(|p| format!("setp.lt.f32 {p}, {a}, {INF}"));
        self.pred_op(|p| format!("and.pred {p}, {pos}, {fin}"))
    }

    /// `sqrt.rn.f32 a`, without the instruction.
    pub(super) fn sqrt_rn_f32(&mut self, a: &str) -> String {
        let small = self.pred_op(|p| format!("setp.lt.f32 {p}, {a}, {TWO_M100}"));
        let scaled = self.f32_op(|r| format!("mul.rn.f32 {r}, {a}, 0f5F800000"));
        let x = self.f32_op(|r| format!("selp.f32 {r}, {scaled}, {a}, {small}"));
        let y = self.f32_op(|r| format!("rsqrt.approx.ftz.f32 {r}, {x}"));
        let s = self.f32_op(|r| format!("mul.rn.f32 {r}, {x}, {y}"));
        let h = self.f32_op(|r| format!("mul.rn.f32 {r}, {y}, 0f3F000000"));
        let res = self.f32_op(|r| format!("neg.f32 {r}, {s}"));
        let res = self.f32_op(|r| format!("fma.rn.f32 {r}, {res}, {s}, {x}"));
        let root = self.f32_op(|r| format!("fma.rn.f32 {r}, {res}, {h}, {s}"));
        let root = self.round_exactly(Inverse::Square, &x, &root);
        let unscaled = self.f32_op(|r| format!("mul.rn.f32 {r}, {root}, 0f2F800000"));
        let root = self.f32_op(|r| format!("selp.f32 {r}, {unscaled}, {root}, {small}"));
        let ok = self.positive_finite(a);
        let special = self.f32_op(|r| format!("sqrt.approx.f32 {r}, {a}"));
        self.f32_op(|r| format!("selp.f32 {r}, {root}, {special}, {ok}"))
    }

    /// `y`, a positive normal within one ulp of `sqrt(x)` or `1/x` (`x`
    /// positive and normal), moved to the neighbour the exact value rounds
    /// to. The two midpoints between `y` and its neighbours are exact in
    /// f64, and so is the sign of the residual against each of them.
    fn round_exactly(&mut self, of: Inverse, x: &str, y: &str) -> String {
        let bits = self.reg(Class::B32);
        self.ins(format!("mov.b32 {bits}, {y}"));
        let [ub, db] = [self.reg(Class::B32), self.reg(Class::B32)];
        self.ins(format!("add.u32 {ub}, {bits}, 1"));
        self.ins(format!("sub.u32 {db}, {bits}, 1"));
        let up = self.f32_op(|r| format!("mov.b32 {r}, {ub}"));
        let down = self.f32_op(|r| format!("mov.b32 {r}, {db}"));
        let wide = |e: &mut Self, v: &str| {
            let r = e.reg(Class::F64);
            e.ins(format!("cvt.f64.f32 {r}, {v}"));
            r
        };
        let (xd, yd, upd, downd) = (wide(self, x), wide(self, y), wide(self, &up), wide(self, &down));
        let side = |e: &mut Self, n: &str| {
            let m = e.reg(Class::F64);
            e.ins(format!("add.rn.f64 {m}, {yd}, {n}"));
            e.ins(format!("mul.rn.f64 {m}, {m}, 0d3FE0000000000000"));
            // The sign of (exact − midpoint): x − m² for a root, 1 − x·m
            // for a reciprocal.
            let t = e.reg(Class::F64);
            match of {
                Inverse::Square => e.ins(format!("neg.f64 {t}, {m}")),
                Inverse::Product => e.ins(format!("neg.f64 {t}, {xd}")),
            }
            let r = e.reg(Class::F64);
            match of {
                Inverse::Square => e.ins(format!("fma.rn.f64 {r}, {t}, {m}, {xd}")),
                Inverse::Product => e.ins(format!("fma.rn.f64 {r}, {t}, {m}, 0d3FF0000000000000")),
            }
            r
        };
        let (above, below) = (side(self, &upd), side(self, &downd));
        let p_up = self.pred_op(|p| format!("setp.gt.f64 {p}, {above}, 0d0000000000000000"));
        let p_down = self.pred_op(|p| format!("setp.lt.f64 {p}, {below}, 0d0000000000000000"));
        let y = self.f32_op(|r| format!("selp.f32 {r}, {up}, {y}, {p_up}"));
        self.f32_op(|r| format!("selp.f32 {r}, {down}, {y}, {p_down}"))
    }

    /// `rcp.rn.f32 a`, without the instruction.
    pub(super) fn rcp_rn_f32(&mut self, a: &str) -> String {
        let ax = self.f32_op(|r| format!("abs.f32 {r}, {a}"));
        let small = self.pred_op(|p| format!("setp.lt.f32 {p}, {ax}, {MIN_NORMAL}"));
        let big = self.pred_op(|p| format!("setp.gt.f32 {p}, {ax}, {TWO_125}"));
        // The operand scaled so that it and its reciprocal are normal.
        let up = self.f32_op(|r| format!("mul.rn.f32 {r}, {ax}, 0f4B800000"));
        let down = self.f32_op(|r| format!("mul.rn.f32 {r}, {ax}, 0f3E000000"));
        let x = self.f32_op(|r| format!("selp.f32 {r}, {up}, {ax}, {small}"));
        let x = self.f32_op(|r| format!("selp.f32 {r}, {down}, {x}, {big}"));
        let y = self.f32_op(|r| format!("rcp.approx.ftz.f32 {r}, {x}"));
        let nx = self.f32_op(|r| format!("neg.f32 {r}, {x}"));
        let e = self.f32_op(|r| format!("fma.rn.f32 {r}, {nx}, {y}, 0f3F800000"));
        let y = self.f32_op(|r| format!("fma.rn.f32 {r}, {e}, {y}, {y}"));
        let y = self.round_exactly(Inverse::Product, &x, &y);
        // For `big`, `y` times 1/8 is subnormal below 2^-126: 2 bits of `y`
        // drop below 2^-124, 1 bit below 2^-123. On an exact midpoint, step
        // one ulp towards the exact value (`e` > 0: it is above `y`) so the
        // scaling rounds once, the right way.
        let e = self.f32_op(|r| format!("fma.rn.f32 {r}, {nx}, {y}, 0f3F800000"));
        let bits = self.reg(Class::B32);
        self.ins(format!("mov.b32 {bits}, {y}"));
        let two_dropped = self.pred_op(|p| format!("setp.lt.f32 {p}, {y}, 0f01800000"));
        let one_dropped = self.pred_op(|p| format!("setp.lt.f32 {p}, {y}, 0f02000000"));
        let mask = self.reg(Class::B32);
        self.ins(format!("selp.b32 {mask}, 1, 0, {one_dropped}"));
        self.ins(format!("@{two_dropped} mov.b32 {mask}, 3"));
        let half = self.reg(Class::B32);
        self.ins(format!("selp.b32 {half}, 2, 1, {two_dropped}"));
        let low = self.reg(Class::B32);
        self.ins(format!("and.b32 {low}, {bits}, {mask}"));
        let midpoint = self.pred_op(|p| format!("setp.eq.u32 {p}, {low}, {half}"));
        let above = self.pred_op(|p| format!("setp.gt.f32 {p}, {e}, 0f00000000"));
        let below = self.pred_op(|p| format!("setp.lt.f32 {p}, {e}, 0f00000000"));
        let step = self.reg(Class::B32);
        self.ins(format!("selp.b32 {step}, 1, 0, {above}"));
        self.ins(format!("@{below} mov.b32 {step}, -1"));
        self.ins(format!("@!{midpoint} mov.b32 {step}, 0"));
        let nudged = self.reg(Class::B32);
        self.ins(format!("add.s32 {nudged}, {bits}, {step}"));
        let nudged_f = self.f32_op(|r| format!("mov.b32 {r}, {nudged}"));
        let tiny = self.f32_op(|r| format!("mul.rn.f32 {r}, {nudged_f}, 0f3E000000"));
        let huge = self.f32_op(|r| format!("mul.rn.f32 {r}, {y}, 0f4B800000"));
        let unsigned = self.f32_op(|r| format!("selp.f32 {r}, {huge}, {y}, {small}"));
        let unsigned = self.f32_op(|r| format!("selp.f32 {r}, {tiny}, {unsigned}, {big}"));
        let signed = self.f32_op(|r| format!("copysign.f32 {r}, {a}, {unsigned}"));
        // 0, inf, NaN: the approximate instruction gives the IEEE result.
        let nonzero = self.pred_op(|p| format!("setp.gt.f32 {p}, {ax}, 0f00000000"));
        let finite = self.pred_op(|p| format!("setp.lt.f32 {p}, {ax}, {INF}"));
        let ok = self.pred_op(|p| format!("and.pred {p}, {nonzero}, {finite}"));
        let special = self.f32_op(|r| format!("rcp.approx.f32 {r}, {a}"));
        self.f32_op(|out| format!("selp.f32 {out}, {signed}, {special}, {ok}"))
    }
}

/// A kernel that runs the correctly rounded `sqrt`, `1/x` and `1/sqrt x`
/// sequences on all 2^32 f32 bit patterns next to `sqrt.rn.f32`,
/// `rcp.rn.f32` and their composition, for a GPU test to check that they
/// agree bit for bit (any NaN matches any NaN).
///
/// Launch it with a grid of 2^24 blocks of 256 threads and one parameter:
/// six zeroed `u32`s, which receive the number of mismatches of each
/// function and the largest mismatching bit pattern of each.
#[doc(hidden)]
pub fn rounding_check_module(target: &super::Target) -> crate::error::Result<super::PtxModule> {
    use crate::kernels::ir::{MathMode, Program};
    let program = Program {
        name: "rounding_check".into(),
        params: vec![],
        views: vec![],
        values: vec![],
        accs: vec![],
        loops: 0,
        grid: [1u64].as_slice().into(),
        body: vec![],
        math: MathMode::Precise,
    };
    let block = super::layout::BlockShape {
        threads: 256,
        max_atom: 1,
    };
    let mut e = Emitter::new(&program, target, block);
    let entry = "tf_rounding_check";
    let param = e.reg(Class::B64);
    e.ins(format!("ld.param.u64 {param}, [{entry}_param_0]"));
    e.ins(format!("cvta.to.global.u64 {param}, {param}"));
    let [tid, cta, bits] = [e.reg(Class::B32), e.reg(Class::B32), e.reg(Class::B32)];
    e.ins(format!("mov.u32 {tid}, %tid.x"));
    e.ins(format!("mov.u32 {cta}, %ctaid.x"));
    e.ins(format!("mad.lo.u32 {bits}, {cta}, 256, {tid}"));
    let x = e.f32_op(|r| format!("mov.b32 {r}, {bits}"));
    for i in 0..3 {
        let (ours, want) = match i {
            0 => (e.sqrt_rn_f32(&x), e.f32_op(|r| format!("sqrt.rn.f32 {r}, {x}"))),
            1 => (e.rcp_rn_f32(&x), e.f32_op(|r| format!("rcp.rn.f32 {r}, {x}"))),
            _ => {
                let s = e.sqrt_rn_f32(&x);
                let ours = e.rcp_rn_f32(&s);
                let s = e.f32_op(|r| format!("sqrt.rn.f32 {r}, {x}"));
                (ours, e.f32_op(|r| format!("rcp.rn.f32 {r}, {s}")))
            }
        };
        let [ob, wb] = [e.reg(Class::B32), e.reg(Class::B32)];
        e.ins(format!("mov.b32 {ob}, {ours}"));
        e.ins(format!("mov.b32 {wb}, {want}"));
        let differ = e.pred_op(|p| format!("setp.ne.u32 {p}, {ob}, {wb}"));
        let nan_ours = e.pred_op(|p| format!("testp.notanumber.f32 {p}, {ours}"));
        let nan_want = e.pred_op(|p| format!("testp.notanumber.f32 {p}, {want}"));
        let both_nan = e.pred_op(|p| format!("and.pred {p}, {nan_ours}, {nan_want}"));
        let bad = e.pred_op(|p| format!("and.pred {p}, {differ}, !{both_nan}"));
        let old = e.reg(Class::B32);
        e.ins(format!("@{bad} atom.global.add.u32 {old}, [{param}+{}], 1", 4 * i));
        e.ins(format!(
            "@{bad} atom.global.max.u32 {old}, [{param}+{}], {bits}",
            12 + 4 * i
        ));
    }
    let header = format!(
        ".version {}.{}\n.target sm_{}\n.address_size 64\n\n.visible .entry {entry}(\n\t.param .u64 {entry}_param_0\n)\n.maxntid 256, 1, 1\n",
        target.min_version().0,
        target.min_version().1,
        target.sm
    );
    Ok(super::PtxModule {
        text: e.finish(&header),
        entry: entry.into(),
        block_threads: 256,
        grid_blocks: 1 << 24,
        mapping: "one thread per f32 bit pattern".into(),
        shared_bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{ptxas, Target};

    #[test]
    fn the_check_kernel_assembles_and_has_no_rn_in_the_sequences_it_checks() {
        let target = Target::for_driver(90, 13000);
        let m = super::rounding_check_module(&target).unwrap();
        // The references are the only `.rn` roots and reciprocals.
        assert_eq!(m.text.matches("sqrt.rn.f32").count(), 2);
        assert_eq!(m.text.matches("rcp.rn.f32").count(), 2);
        if let Some(tool) = ptxas::ptxas_for_tests("ptx_gen::rounding") {
            ptxas::assemble(&tool, &m.text, 90).unwrap_or_else(|e| panic!("{e}\n{}", m.text));
        }
    }
}
