//! Indirect updates ([`Inst::ScatterAdd`](crate::kernels::ir::Inst::ScatterAdd)).

use super::{at, Check};
use crate::dtype::Scalar;
use crate::error::Result;
use crate::kernels::ir::{ParamId, PartitionExprs, ValueId, ViewId};
use crate::kernels::ptx_gen::emitter::{Class, Emitter};
use crate::kernels::ptx_gen::ops::immediate;
use crate::ops::BinaryOp;

impl Emitter<'_> {
    /// An indirect read-modify-write, element by element, addressed as
    /// [`Emitter::gather`] addresses its loads: each position is widened
    /// to 64 bits and compared unsigned with `bound`; an in-bounds element
    /// in range loads its target, adds its own value and stores the sum
    /// (`ld.global`, `add`, `st.global` on one thread, so a later update
    /// of the same element by the same thread sees it), and an in-bounds
    /// element out of range stores 1 to the flag.
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_add(
        &mut self,
        view: ViewId,
        index: &PartitionExprs,
        positions: ValueId,
        stride: i64,
        bound: u64,
        src: ValueId,
        flag: ParamId,
    ) -> Result<()> {
        let v = self.view(view)?;
        let d = self.prog.params[v.param.index()].dtype;
        let zero = immediate(Scalar::Int(0, d), d).map_err(|e| self.invalid(e))?;
        let pos_dtype = self.prog.values[positions.index()].dtype;
        let pos = self.val(positions)?;
        let values = self.val(src)?;
        self.note_mapping("scatter_add", view, &format!("ld.global{0} + st.global{0} scalar", super::mem_type(d)));
        let esize = d.size_in_bytes() as i64;
        let inner = *v.strides.last().unwrap_or(&0);
        let l = self.layout(&v.tile);
        let site = self.site(v, index)?;
        let flag = self.params[flag.index()].clone();
        let one = self.reg(Class::B32);
        self.ins(format!("mov.u32 {one}, 1"));
        for r in 0..l.repeats {
            let addr = self.address(view, &site, r)?;
            let masks = self.masks(v, &site, r, true, Check::Each);
            for (a, inside) in masks.into_iter().enumerate() {
                let slot = r as usize * l.atom as usize + a;
                let p = &pos[slot];
                let wide = self.wide_position(p, pos_dtype, "scatter")?;
                let ok = self.reg(Class::Pred);
                self.ins(format!("setp.lt.u64 {ok}, {wide}, {bound}"));
                let take = self.and(inside.clone(), ok.clone());
                let bad = self.reg(Class::Pred);
                match &inside {
                    Some(m) => self.ins(format!("and.pred {bad}, !{ok}, {m}")),
                    None => self.ins(format!("not.pred {bad}, {ok}")),
                }
                self.ins(format!("@{bad} st.global.b32 [{flag}], {one}"));
                let moved = self.reg(Class::B64);
                self.ins(format!("mad.lo.s64 {moved}, {wide}, {}, {addr}", stride * esize));
                let target = at(&moved, a as i64 * inner * esize);
                let old = self.reg(Class::of(d));
                self.load_chunk("ld.global", d, &take, &target, std::slice::from_ref(&old), Some(&zero));
                let sum = self.binary(BinaryOp::Add, d, &old, &values[slot])?;
                self.store_chunk("global", d, &take, &target, std::slice::from_ref(&sum));
            }
        }
        Ok(())
    }
}
