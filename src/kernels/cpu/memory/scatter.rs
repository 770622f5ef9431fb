//! The CPU executor's indirect updates
//! ([`Inst::ScatterAdd`](crate::kernels::ir::Inst::ScatterAdd)).

use super::{Positions, Region, ViewPlan};
use crate::error::Result;
use crate::kernels::cpu::buffer::{malformed, Buf};

impl ViewPlan {
    /// Adds each element of `src` to the element of partition `part` moved
    /// `at[j] * stride` elements in memory, in tile order: elements outside
    /// the extents are skipped, and so are those whose position is outside
    /// `0 .. bound`. Returns whether some element inside the extents had a
    /// position out of range. Integers wrap; floats add in their own dtype.
    pub fn scatter_add(&self, part: &[u64], at: &Buf, stride: i64, bound: u64, src: &Buf) -> Result<bool> {
        let region = self.region(part, true, "kernel scatter_add")?;
        self.check_tile(src, "scatter_add")?;
        if !self.mem.writable || self.mem.dtype != src.dtype() {
            return Err(malformed(format!(
                "scatter_add of a {} tile into a {} parameter that is {}",
                src.dtype(),
                self.mem.dtype,
                if self.mem.writable { "writable" } else { "read-only" }
            )));
        }
        let positions = Positions::of(at)?;
        if positions.len() != self.numel {
            return Err(malformed(format!(
                "scatter positions of {} elements for {}-element partitions",
                positions.len(),
                self.numel
            )));
        }
        let bound = bound.min(i64::MAX as u64) as i64;
        let (r, p) = (&region, &positions);
        Ok(match src {
            Buf::U8(s) => self.scatter_typed(r, p, stride, bound, s, u8::wrapping_add),
            Buf::I32(s) => self.scatter_typed(r, p, stride, bound, s, i32::wrapping_add),
            Buf::U32(s) => self.scatter_typed(r, p, stride, bound, s, u32::wrapping_add),
            Buf::I64(s) => self.scatter_typed(r, p, stride, bound, s, i64::wrapping_add),
            Buf::F32(s) => self.scatter_typed(r, p, stride, bound, s, |a, b| a + b),
            Buf::F64(s) => self.scatter_typed(r, p, stride, bound, s, |a, b| a + b),
            other => return Err(malformed(format!("scatter_add of a {} tile", other.dtype()))),
        })
    }

    fn scatter_typed<T: bytemuck::Pod>(
        &self,
        region: &Region,
        at: &Positions,
        stride: i64,
        bound: i64,
        src: &[T],
        add: impl Fn(T, T) -> T,
    ) -> bool {
        let mem = self.mem.ptr as *mut T;
        let len = self.mem.len as i64;
        let mut bad = false;
        region.for_each_row(|t, m, (n, ms, ts)| {
            for i in 0..n {
                let j = t + i * ts;
                let p = at.get(j);
                if !(0..bound).contains(&p) {
                    bad = true;
                    continue;
                }
                let e = m + i as i64 * ms + p * stride;
                // The verifier bounds the scattered span by the buffer; the
                // check keeps every access inside it regardless.
                if (0..len).contains(&e) {
                    // SAFETY: `e` is an element of the writable buffer (just
                    // checked) that only this grid point updates (the
                    // verifier's disjointness check on the moved span).
                    unsafe {
                        let slot = mem.offset(e as isize);
                        *slot = add(*slot, src[j]);
                    }
                }
            }
        });
        bad
    }
}
