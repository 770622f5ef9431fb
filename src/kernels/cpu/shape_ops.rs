//! Tile kernels that move elements between axes: reductions along one axis,
//! broadcasts of size-1 axes and iota, plus the row walk they and the memory
//! accesses share.

use super::buffer::{malformed, typed, typed_mut, unsupported, Bits, BitsMut, Buf};
use super::elementwise::Num;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernels::ir::TileReduce;
use smallvec::SmallVec;

/// Calls `f(a, b)` for every point of the box `outer` (axes given as
/// `(length, stride_a, stride_b)`, outermost first), where `a` and `b` are
/// the two offsets of the point starting from `start`, in row-major order.
#[inline]
pub(crate) fn walk(outer: &[(usize, i64, i64)], start: (i64, i64), mut f: impl FnMut(i64, i64)) {
    let mut idx: SmallVec<[usize; 8]> = smallvec::smallvec![0; outer.len()];
    let (mut a, mut b) = start;
    if outer.iter().any(|&(len, _, _)| len == 0) {
        return;
    }
    loop {
        f(a, b);
        // Advance the odometer, innermost axis first.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            let (len, sa, sb) = outer[k];
            idx[k] += 1;
            a += sa;
            b += sb;
            if idx[k] < len {
                break;
            }
            idx[k] = 0;
            a -= sa * len as i64;
            b -= sb * len as i64;
        }
    }
}

/// `(product of dims before axis, dims[axis], product of dims after axis)`.
fn split_at_axis(shape: &[u32], axis: usize) -> (usize, usize, usize) {
    let prod = |d: &[u32]| d.iter().map(|&x| x as usize).product::<usize>();
    (prod(&shape[..axis]), shape[axis] as usize, prod(&shape[axis + 1..]))
}

/// `dst` = `src` (of shape `shape` and `dtype`) reduced along `axis`.
pub(crate) fn reduce(op: TileReduce, dtype: DType, shape: &[u32], axis: usize, dst: &mut Buf, src: &Buf) -> Result<()> {
    if axis >= shape.len() {
        return Err(malformed(format!(
            "reduction along axis {axis} of a rank-{} tile",
            shape.len()
        )));
    }
    let split = split_at_axis(shape, axis);
    macro_rules! run {
        ($($d:ident => $t:ty),*) => {
            match dtype {
                $(DType::$d => reduce_typed::<$t>(op, split, typed_mut(dst)?, typed(src)?),)*
                _ => Err(unsupported("tile reduce", dtype, "reductions take bool (max/min), integers, f32 and f64")),
            }
        };
    }
    match op {
        TileReduce::Max | TileReduce::Min => {
            run!(Bool => u8, U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        TileReduce::Sum | TileReduce::Prod if dtype != DType::Bool => {
            run!(U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        TileReduce::LogAddExp => Err(unsupported("tile reduce", dtype, "logaddexp combines scans only")),
        _ => Err(unsupported(
            "tile reduce",
            dtype,
            "sums and products of bools are taken after a cast",
        )),
    }
}

fn reduce_typed<T: Num>(op: TileReduce, split: (usize, usize, usize), d: &mut [T], s: &[T]) -> Result<()> {
    let (outer, n, inner) = split;
    if d.len() != outer * inner || s.len() != outer * n * inner {
        return Err(malformed(format!(
            "reduction of {} elements into {} (expected {} of {})",
            s.len(),
            d.len(),
            outer * inner,
            outer * n * inner
        )));
    }
    match op {
        TileReduce::Sum => reduce_with(split, d, s, T::ZERO, T::add),
        TileReduce::Prod => reduce_with(split, d, s, T::ONE, T::mul),
        TileReduce::Max => reduce_with(split, d, s, T::LOWEST, T::maximum),
        TileReduce::Min => reduce_with(split, d, s, T::HIGHEST, T::minimum),
        TileReduce::LogAddExp => return Err(malformed("a logaddexp reduction".into())),
    }
    Ok(())
}

/// Adds one strip of a tile to its reduction: `src` holds the elements
/// `lo .. lo + src.len()` (row-major) of a tile of `shape` and `dtype`
/// reduced along `axis` into `dst`. Strips must come in order from `lo = 0`
/// and cover the tile; `lanes` (of [`LANES`] elements of `dtype`) carries a
/// row's partial results from one strip to the next. The result is the
/// same, bit for bit, as [`reduce`] of the whole tile.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_strip(
    op: TileReduce,
    dtype: DType,
    shape: &[u32],
    axis: usize,
    lo: usize,
    dst: &mut Buf,
    lanes: &mut Buf,
    src: &Buf,
) -> Result<()> {
    if axis >= shape.len() || shape[axis] == 0 {
        return Err(malformed(format!("strip reduction along axis {axis} of {shape:?}")));
    }
    let split = split_at_axis(shape, axis);
    macro_rules! run {
        ($($d:ident => $t:ty),*) => {
            match dtype {
                $(DType::$d => {
                    let lanes: &mut [$t; LANES] = typed_mut(lanes)?
                        .try_into()
                        .map_err(|_| malformed("reduction lanes of another length".into()))?;
                    strip_typed::<$t>(op, split, lo, typed_mut(dst)?, lanes, typed(src)?)
                })*
                _ => Err(unsupported("tile reduce", dtype, "reductions take bool (max/min), integers, f32 and f64")),
            }
        };
    }
    match op {
        TileReduce::Max | TileReduce::Min => {
            run!(Bool => u8, U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        TileReduce::Sum | TileReduce::Prod if dtype != DType::Bool => {
            run!(U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64)
        }
        _ => Err(unsupported(
            "tile reduce",
            dtype,
            "this reduction does not take this dtype",
        )),
    }
}

fn strip_typed<T: Num>(
    op: TileReduce,
    split: (usize, usize, usize),
    lo: usize,
    d: &mut [T],
    lanes: &mut [T; LANES],
    s: &[T],
) -> Result<()> {
    let (outer, n, inner) = split;
    if d.len() != outer * inner || lo + s.len() > outer * n * inner {
        return Err(malformed(format!(
            "strip {lo}..{} of a {}-element reduction into {}",
            lo + s.len(),
            outer * n * inner,
            d.len()
        )));
    }
    match op {
        TileReduce::Sum => strip_with(split, lo, d, lanes, s, T::ZERO, T::add),
        TileReduce::Prod => strip_with(split, lo, d, lanes, s, T::ONE, T::mul),
        TileReduce::Max => strip_with(split, lo, d, lanes, s, T::LOWEST, T::maximum),
        TileReduce::Min => strip_with(split, lo, d, lanes, s, T::HIGHEST, T::minimum),
        TileReduce::LogAddExp => return Err(malformed("a logaddexp reduction".into())),
    }
    Ok(())
}

/// [`reduce_with`] for the elements `lo .. lo + s.len()`, in the same order.
#[inline(always)]
fn strip_with<T: Copy>(
    (_, n, inner): (usize, usize, usize),
    lo: usize,
    d: &mut [T],
    lanes: &mut [T; LANES],
    mut s: &[T],
    identity: T,
    f: impl Fn(T, T) -> T,
) {
    let mut i = lo;
    if inner == 1 {
        // Rows of `n` elements; a row's lanes are folded at its end.
        while !s.is_empty() {
            let (row, at) = (i / n, i % n);
            if at == 0 {
                *lanes = [identity; LANES];
            }
            let take = (n - at).min(s.len());
            add_to_lanes(lanes, at, &s[..take], &f);
            if at + take == n {
                d[row] = fold_lanes(*lanes, &f);
            }
            s = &s[take..];
            i += take;
        }
        return;
    }
    if lo == 0 {
        d.fill(identity);
    }
    // Rows of `inner` elements, each combined into its outer index's row of `d`.
    while !s.is_empty() {
        let (o, j) = (i / (n * inner), i % inner);
        let take = (inner - j).min(s.len());
        for (d, &x) in d[o * inner + j..][..take].iter_mut().zip(&s[..take]) {
            *d = f(*d, x);
        }
        s = &s[take..];
        i += take;
    }
}

/// Lowers `Inst::Uniform`: each element from its counter and key.
pub(crate) fn uniform(dst: &mut Buf, counter: &Buf, key: &Buf, bits: u8) -> Result<()> {
    let (c, k) = (typed::<i64>(counter)?, typed::<i64>(key)?);
    let value = |i: usize| crate::philox::uniform(c[i] as u64, k[i] as u64, bits as u32);
    fn fill<T>(d: &mut [T], n: usize, value: impl Fn(usize) -> T) -> Result<()> {
        if d.len() != n {
            return Err(malformed("uniform values of another shape than their counters".into()));
        }
        d.iter_mut().enumerate().for_each(|(i, x)| *x = value(i));
        Ok(())
    }
    let n = if c.len() == k.len() { c.len() } else { usize::MAX };
    match dst {
        Buf::F32(_) => fill(typed_mut::<f32>(dst)?, n, |i| value(i) as f32),
        Buf::F64(_) => fill(typed_mut::<f64>(dst)?, n, value),
        other => Err(unsupported("uniform", other.dtype(), "uniform values are f32 or f64")),
    }
}

/// Lowers `Inst::Scan`: each line along `axis` of `src` scanned in order
/// into `dst` (same shape).
pub(crate) fn scan(op: TileReduce, dtype: DType, shape: &[u32], axis: usize, dst: &mut Buf, src: &Buf) -> Result<()> {
    if axis >= shape.len() {
        return Err(malformed(format!(
            "scan along axis {axis} of a rank-{} tile",
            shape.len()
        )));
    }
    let split = split_at_axis(shape, axis);
    macro_rules! run {
        ($($d:ident => $t:ty),*) => {
            match dtype {
                $(DType::$d => scan_typed::<$t>(op, split, typed_mut(dst)?, typed(src)?),)*
                _ => Err(unsupported("tile scan", dtype, "scans take integers, f32 and f64")),
            }
        };
    }
    match (op, dtype) {
        (TileReduce::LogAddExp, DType::F32) => scan_lines(split, typed_mut(dst)?, typed::<f32>(src)?, |a, b| {
            log_add_exp(a as f64, b as f64) as f32
        }),
        (TileReduce::LogAddExp, DType::F64) => scan_lines(split, typed_mut(dst)?, typed::<f64>(src)?, log_add_exp),
        (TileReduce::LogAddExp, _) => Err(unsupported("tile scan", dtype, "logaddexp takes f32 and f64")),
        _ => run!(U8 => u8, I32 => i32, I64 => i64, U32 => u32, F32 => f32, F64 => f64),
    }
}

/// `log(exp(a) + exp(b))` as `max + ln(1 + exp(-|a - b|))`; an infinite
/// or NaN maximum as it is.
fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) };
    if !m.is_finite() {
        return m;
    }
    m + (-(a - b).abs()).exp().ln_1p()
}

fn scan_typed<T: Num>(op: TileReduce, split: (usize, usize, usize), d: &mut [T], s: &[T]) -> Result<()> {
    let f: fn(T, T) -> T = match op {
        TileReduce::Sum => T::add,
        TileReduce::Prod => T::mul,
        TileReduce::Max => T::maximum,
        TileReduce::Min => T::minimum,
        TileReduce::LogAddExp => return Err(malformed("logaddexp of integers".into())),
    };
    scan_lines(split, d, s, f)
}

/// Each line along the middle axis of `(outer, n, inner)` combined in order by `f`.
fn scan_lines<T: Copy>(
    (outer, n, inner): (usize, usize, usize),
    d: &mut [T],
    s: &[T],
    f: impl Fn(T, T) -> T,
) -> Result<()> {
    if d.len() != s.len() || s.len() != outer * n * inner {
        return Err(malformed(format!(
            "scan of {} elements into {} (expected {})",
            s.len(),
            d.len(),
            outer * n * inner
        )));
    }
    d.copy_from_slice(s);
    for block in d.chunks_exact_mut((n * inner).max(1)).take(outer) {
        for k in 1..n {
            let (done, rest) = block.split_at_mut(k * inner);
            let prev = &done[(k - 1) * inner..];
            for (x, &p) in rest[..inner].iter_mut().zip(prev) {
                *x = f(p, *x);
            }
        }
    }
    Ok(())
}

/// Lanes of independent partial results when reducing a contiguous row:
/// they let the loop vectorise and keep float sums accurate.
pub(crate) const LANES: usize = 16;

/// Combines `xs`, the elements of a row from position `at` on, into the
/// row's partial results: the element at position `p` into lane `p % LANES`.
#[inline(always)]
fn add_to_lanes<T: Copy>(lanes: &mut [T; LANES], at: usize, xs: &[T], f: &impl Fn(T, T) -> T) {
    // A local copy stays in registers.
    let mut acc = *lanes;
    let head = ((LANES - at % LANES) % LANES).min(xs.len());
    for (k, &x) in xs[..head].iter().enumerate() {
        let i = (at + k) % LANES;
        acc[i] = f(acc[i], x);
    }
    let chunks = xs[head..].chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..LANES {
            acc[i] = f(acc[i], c[i]);
        }
    }
    for (a, &x) in acc.iter_mut().zip(rest) {
        *a = f(*a, x);
    }
    *lanes = acc;
}

/// The lanes combined pairwise into one result.
#[inline(always)]
fn fold_lanes<T: Copy>(mut acc: [T; LANES], f: &impl Fn(T, T) -> T) -> T {
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] = f(acc[i], acc[i + width]);
        }
    }
    acc[0]
}

#[inline(always)]
fn reduce_with<T: Copy>(split: (usize, usize, usize), d: &mut [T], s: &[T], identity: T, f: impl Fn(T, T) -> T) {
    let (_, n, inner) = split;
    if inner == 1 {
        for (d, row) in d.iter_mut().zip(s.chunks_exact(n.max(1))) {
            let mut lanes = [identity; LANES];
            add_to_lanes(&mut lanes, 0, row, &f);
            *d = if n == 0 { identity } else { fold_lanes(lanes, &f) };
        }
        return;
    }
    for (o, dst) in d.chunks_exact_mut(inner).enumerate() {
        dst.fill(identity);
        for r in 0..n {
            let row = &s[(o * n + r) * inner..][..inner];
            for (d, &x) in dst.iter_mut().zip(row) {
                *d = f(*d, x);
            }
        }
    }
}

/// `dst` (of shape `dst_shape`) = `src` (of shape `src_shape`, same rank)
/// with its size-1 axes repeated.
pub(crate) fn broadcast(dst_shape: &[u32], src_shape: &[u32], dst: &mut Buf, src: &Buf) -> Result<()> {
    let fits = dst_shape.len() == src_shape.len()
        && dst_shape.iter().zip(src_shape).all(|(&d, &s)| d == s || s == 1)
        && dst.dtype() == src.dtype();
    if !fits {
        return Err(malformed(format!(
            "broadcast of a {} tile {src_shape:?} to a {} tile {dst_shape:?}",
            src.dtype(),
            dst.dtype()
        )));
    }
    // Axes as (length, source stride, destination stride), size-1 axes dropped.
    let mut axes = Vec::with_capacity(dst_shape.len());
    let (mut src_stride, mut dst_stride) = (1i64, 1i64);
    for (&d, &s) in dst_shape.iter().zip(src_shape).rev() {
        if d > 1 {
            axes.push((d as usize, if s == 1 { 0 } else { src_stride }, dst_stride));
        }
        src_stride *= s as i64;
        dst_stride *= d as i64;
    }
    axes.reverse();
    match (dst.bits_mut(), src.bits()) {
        (BitsMut::B1(d), Bits::B1(s)) => broadcast_typed(&axes, d, s),
        (BitsMut::B2(d), Bits::B2(s)) => broadcast_typed(&axes, d, s),
        (BitsMut::B4(d), Bits::B4(s)) => broadcast_typed(&axes, d, s),
        (BitsMut::B8(d), Bits::B8(s)) => broadcast_typed(&axes, d, s),
        _ => Err(malformed("broadcast between tiles of different element sizes".into())),
    }
}

fn broadcast_typed<T: Copy>(axes: &[(usize, i64, i64)], d: &mut [T], s: &[T]) -> Result<()> {
    let want_dst: usize = axes.iter().map(|a| a.0).product();
    let want_src: usize = axes.iter().filter(|a| a.1 != 0).map(|a| a.0).product();
    if d.len() != want_dst || s.len() != want_src {
        return Err(malformed("broadcast tiles do not match their types".into()));
    }
    let Some((&(len, ss, _), outer)) = axes.split_last() else {
        d[0] = s[0];
        return Ok(());
    };
    walk(outer, (0, 0), |a, b| {
        let (a, b) = (a as usize, b as usize);
        let row = &mut d[b..b + len];
        if ss == 0 {
            row.fill(s[a]);
        } else {
            row.copy_from_slice(&s[a..a + len]);
        }
    });
    Ok(())
}

/// `dst` (an i64 or i32 tile of `shape`) = `index * shape[axis] + j[axis]` at each
/// element `j`.
pub(crate) fn iota(shape: &[u32], axis: usize, index: u64, dst: &mut Buf) -> Result<()> {
    if axis >= shape.len() {
        return Err(malformed(format!(
            "iota along axis {axis} of a rank-{} tile",
            shape.len()
        )));
    }
    let (outer, n, inner) = split_at_axis(shape, axis);
    let start = (index as i64).wrapping_mul(n as i64);
    // Runs of `inner` equal values, `n` of them counting up from `start`,
    // repeated `outer` times.
    fn fill<T: Copy>(d: &mut [T], n: usize, inner: usize, at: impl Fn(usize) -> T) {
        for block in d.chunks_exact_mut((n * inner).max(1)) {
            if inner == 1 {
                for (j, v) in block.iter_mut().enumerate() {
                    *v = at(j);
                }
            } else {
                for (j, run) in block.chunks_exact_mut(inner.max(1)).enumerate() {
                    run.fill(at(j));
                }
            }
        }
    }
    let len = outer * n * inner;
    if let Ok(d) = typed_mut::<i32>(dst) {
        // The low 32 bits, as the GPU's 32-bit arithmetic gives them.
        if d.len() != len {
            return Err(malformed("iota tile does not match its type".into()));
        }
        let start = start as i32;
        fill(d, n, inner, |j| start.wrapping_add(j as i32));
        return Ok(());
    }
    let d = typed_mut::<i64>(dst)?;
    if d.len() != len {
        return Err(malformed("iota tile does not match its type".into()));
    }
    fill(d, n, inner, |j| start.wrapping_add(j as i64));
    Ok(())
}
