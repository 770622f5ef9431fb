//! The verifier's checks of memory accesses: partition index ranges,
//! bounds, access modes and disjoint stores.

use super::{Check, Verifier};
use crate::dtype::DType;
use crate::kernels::ir::{print, Access, AtomicOp, IndexExpr, ValueType, View, ViewId};

impl<'a> Verifier<'a> {
    /// The largest value `e` takes at this point of the program (its
    /// coefficients are nonnegative, so the grid coordinate and the loop
    /// variable both reach their last value together there).
    pub(super) fn reach(&self, e: &IndexExpr) -> Check<u128> {
        let mut hi = e.constant as u128;
        if let Some((axis, c)) = e.grid {
            let Some(&extent) = self.p.grid.get(axis as usize) else {
                return Err(format!(
                    "index {e} names grid axis g{axis} of a rank {} grid",
                    self.p.grid.len()
                ));
            };
            if self.last_axis == Some(axis) {
                return Err(format!(
                    "index {e} names grid axis g{axis}, which the body of a last point over g{axis} cannot see"
                ));
            }
            hi += c as u128 * (extent as u128 - 1);
        }
        if let Some((var, c)) = e.loop_var {
            let Some(&(_, count)) = self.open.iter().find(|(v, _)| *v == var) else {
                return Err(format!("index {e} uses loop variable {var} outside its loop"));
            };
            hi += c as u128 * (count as u128 - 1);
        }
        Ok(hi)
    }

    /// Checks a partition access to `view` and returns the view.
    pub(super) fn access(&self, view: ViewId, index: &[IndexExpr], masked: Option<bool>) -> Check<&'a View> {
        let Some(v) = self.p.views.get(view.index()) else {
            return Err(format!("view {view} is not declared"));
        };
        if index.len() != v.tile.len() {
            return Err(format!(
                "the index has {} axes but view {view} has rank {}",
                index.len(),
                v.tile.len()
            ));
        }
        let space = v.index_space();
        let mut last = Vec::with_capacity(index.len());
        for (k, e) in index.iter().enumerate() {
            let hi = self.reach(e)?;
            if hi >= space[k] as u128 {
                return Err(format!(
                    "index axis {k} ({e}) reaches partition {hi}, outside the index space {} of view {view} (extents {}, tile {})",
                    print::list(&space),
                    print::list(&v.extents),
                    print::list(&v.tile)
                ));
            }
            last.push(hi);
        }
        let mut reached = last.iter().zip(&v.tile).zip(&v.extents);
        if masked == Some(false) && v.is_window() {
            return Err(format!(
                "the unmasked access goes through view {view}, a window starting at {}; mask it",
                print::list(&v.lower)
            ));
        }
        if masked == Some(false) && reached.any(|((&i, &t), &e)| (i + 1) * t as u128 > e as u128) {
            return Err(format!(
                "the unmasked access reaches partition {}, partly outside view {view} (extents {}, tile {}); mask it",
                print::list(&last),
                print::list(&v.extents),
                print::list(&v.tile)
            ));
        }
        Ok(v)
    }

    /// Checks that the view's parameter may be read (or written).
    pub(super) fn param_access(&self, v: &View, write: bool) -> Check {
        let param = &self.p.params[v.param.index()];
        let allowed = match param.access {
            Access::Read => !write,
            Access::Write => write,
            Access::ReadWrite => true,
        };
        if allowed {
            Ok(())
        } else {
            let (verb, access) = if write {
                ("written", "read-only")
            } else {
                ("read", "write-only")
            };
            Err(format!("{} `{}` is {access} and cannot be {verb}", v.param, param.name))
        }
    }

    /// The tile type of `v`: the parameter's dtype (or `dtype`) and the tile shape.
    pub(super) fn tile_of(&self, v: &View, dtype: Option<DType>) -> ValueType {
        ValueType {
            dtype: dtype.unwrap_or(self.p.params[v.param.index()].dtype),
            shape: v.tile.clone(),
        }
    }

    /// Checks that no two grid points store to one element through this store.
    pub(super) fn disjoint(&self, id: ViewId, v: &View, index: &[IndexExpr]) -> Check {
        let mut axes: Vec<(u128, u64)> = (v.strides.iter().zip(&v.extents))
            .filter(|(_, &e)| e > 1)
            .map(|(&s, &e)| (s.unsigned_abs() as u128, e))
            .collect();
        axes.sort_unstable();
        let mut reach = 0u128;
        for (s, e) in axes {
            if s <= reach {
                return Err(format!(
                    "view {id} (extents {}, strides {}) maps several span indices to one element and cannot be stored to",
                    print::list(&v.extents),
                    print::list(&v.strides)
                ));
            }
            reach += s * (e as u128 - 1);
        }
        let counted = |axis: usize| self.last_axis == Some(axis as u8);
        for (axis, &extent) in (self.p.grid.iter().enumerate()).filter(|&(a, &e)| e > 1 && !counted(a)) {
            let uses: Vec<&IndexExpr> = index
                .iter()
                .filter(|e| matches!(e.grid, Some((a, c)) if a as usize == axis && c > 0))
                .collect();
            if uses.is_empty() {
                return Err(format!(
                    "grid axis g{axis} (extent {extent}) is not in the partition index, so several grid points store one partition; index by g{axis} or use an atomic"
                ));
            }
            if !uses.iter().any(|e| self.separates(e, extent)) {
                return Err(format!(
                    "the loop term of {} lets two values of g{axis} store one partition; use an atomic or a larger grid coefficient",
                    uses[0]
                ));
            }
        }
        Ok(())
    }

    /// Whether `c*g + l*i` (g below `extent`, i below the loop count) gives
    /// distinct values for distinct `g`: it does unless `c*dg = l*di` for
    /// some `0 < dg < extent`, `|di| < count`, whose smallest solution is
    /// `dg = l/gcd`, `di = c/gcd`.
    fn separates(&self, e: &IndexExpr, extent: u64) -> bool {
        let (Some((_, c)), Some((var, l))) = (e.grid, e.loop_var) else {
            return true;
        };
        let count = self.open.iter().find(|(v, _)| *v == var).map_or(1, |&(_, n)| n);
        if l == 0 || count == 1 {
            return true;
        }
        let g = gcd(c, l);
        l / g >= extent || c / g >= count
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Whether atomic `op` takes elements of dtype `d`.
pub(super) fn atomic_accepts(op: AtomicOp, d: DType) -> bool {
    let int = matches!(d, DType::I32 | DType::U32 | DType::I64);
    match op {
        AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => int,
        AtomicOp::Max | AtomicOp::Min => int || d == DType::F32,
        AtomicOp::Add | AtomicOp::Sub => int || d.is_float(),
    }
}
