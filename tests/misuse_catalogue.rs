//! A catalogue of bad and edge inputs through tilefuse's public API, each
//! with the one outcome it must have.
//!
//! This is a data-driven test in the style of rust-analyzer's: one helper,
//! [`Catalogue::check`], and one entry per case. An entry names the case,
//! says how the library is called, and states the expected outcome. The
//! call is one of:
//!
//! - [`op!`]`(receiver, name / try_name(args))` or
//!   `op!(Tensor::name / try_name(args))`: an op or constructor through its
//!   `try_` form and its panicking form, from one spelling of the call;
//!   [`both`]`(try_form, panicking_form)` when the panicking form is
//!   spelled differently (an operator such as `a + b`, a chain of ops);
//! - [`try_only`], [`read`], [`read_scalar`], [`realized`]: a call that
//!   only returns a `Result` (`to_vec`, `to_scalar`, `with_bytes`,
//!   `realize`, `realize_all`);
//! - [`plain`]: a call that cannot fail by its signature (`scalar`,
//!   `clamp`, `powf`, the operators with a Rust scalar).
//!
//! The outcome is one of:
//!
//! - [`error`]`(kind, needles)`: the call is misuse. The fallible form must
//!   return `Err` of the variant `kind` (matched on [`tilefuse::Error`])
//!   whose `op` field is the first needle, the op the user called (never
//!   an op it is written with), and whose message contains every needle:
//!   the op and, where the error has shapes, the user's shape as it is
//!   printed (`"[2, 3]"`). The panicking form, where there is one, must
//!   panic with exactly the `Display` of that error.
//! - a value ([`floats`], [`near`], [`ulps`], [`ints`], [`bools`],
//!   [`empty`]): the call is a valid edge input. Every form must succeed
//!   and realize to exactly this dtype, this shape and these elements
//!   (floats exactly with NaN matching NaN, or within the stated tolerance).
//!
//! A fallible form that panics, an error of another variant or naming an
//! op the user did not call, a message without a needle, a panic message
//! that is not the error's, and a wrong value are all failures. Failures
//! are collected, not raised, so one run lists every one of them. At the
//! end the test prints `misuse catalogue: N cases, E clear errors, V
//! values`: the cases, and how many of them passed as errors and as values.
//!
//! # Adding a case
//!
//! Add one entry to the group it belongs to (`constructors`, `elementwise`,
//! `casts`, `views`, `reductions`, `compositions`, `reading`, `scalars`):
//!
//! ```text
//! c.check(
//!     "reshape: 6 elements as 4",
//!     op!(x23(), reshape / try_reshape(&[4])),
//!     error(InvalidShape, &["reshape", "shape [2, 3]", "argument [4]"]),
//! );
//! c.check(
//!     "sum: of nothing is 0",
//!     op!(zeros(&[0]), sum_all / try_sum_all()),
//!     floats(F32, &[], &[0.0]),
//! );
//! c.check(
//!     "sub: [2, 3] and [3, 2]",
//!     both(|| x23().try_sub(&zeros(&[3, 2])), || x23() - zeros(&[3, 2])),
//!     error(ShapeMismatch, &["sub", "[2, 3] and [3, 2]"]),
//! );
//! ```
//!
//! Each form makes its own inputs (the helpers `x23`, `zeros`, `f32s`,
//! `i32s`, `f16s`, ... make small ones), so the two forms never share a
//! node. Keep inputs to a few elements. A case about memory uses a shape of
//! at least 2^40 elements ([`HUGE`]), which the allocator refuses at once
//! on any machine this suite runs on, so nothing is ever touched; the
//! whole catalogue runs in well under a second.
//!
//! A case that shows the library doing something wrong is not weakened to
//! pass: it states the right outcome, and the library is fixed.

use half::{bf16, f16};
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use tilefuse::shape::MAX_NUMEL;
use tilefuse::{DType, Device, Element, Error, Result, Scalar, Tensor, MAX_RANK};
use DType::{Bool, BF16, F16, F32, F64, I32, I64, U32, U8};
use Kind::*;

/// Elements of a tensor no host memory holds (4 TiB of f32).
const HUGE: usize = 1 << 40;

// ---- the outcomes a case can expect ----

/// The variants of [`Error`] a case can expect, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ShapeMismatch,
    AxisOutOfRange,
    InvalidShape,
    UnsupportedDType,
    NeedsFloat,
    DTypeMismatch,
    LengthMismatch,
    DeviceMismatch,
    RankTooLarge,
    ShapeTooLarge,
    HostOutOfMemory,
    IndexOutOfRange,
    /// Any other variant: never what a case here expects.
    Other,
}

/// The kind of `e` and the op it names, if its variant has one.
fn kind_and_op(e: &Error) -> (Kind, Option<&'static str>) {
    match e {
        Error::ShapeMismatch { op, .. } => (ShapeMismatch, Some(*op)),
        Error::AxisOutOfRange { op, .. } => (AxisOutOfRange, Some(*op)),
        Error::InvalidShape { op, .. } => (InvalidShape, Some(*op)),
        Error::UnsupportedDType { op, .. } => (UnsupportedDType, Some(*op)),
        Error::NeedsFloat { op, .. } => (NeedsFloat, Some(*op)),
        Error::DTypeMismatch { op, .. } => (DTypeMismatch, Some(*op)),
        Error::LengthMismatch { op, .. } => (LengthMismatch, Some(*op)),
        Error::DeviceMismatch { op, .. } => (DeviceMismatch, Some(*op)),
        Error::RankTooLarge { op, .. } => (RankTooLarge, Some(*op)),
        Error::ShapeTooLarge { op, .. } => (ShapeTooLarge, Some(*op)),
        Error::HostOutOfMemory { op, .. } => (HostOutOfMemory, Some(*op)),
        Error::IndexOutOfRange { op, .. } => (IndexOutOfRange, Some(*op)),
        _ => (Other, None),
    }
}

/// The realized elements of a tensor, widened without loss.
#[derive(Debug, PartialEq)]
enum Elems {
    Bools(Vec<bool>),
    Ints(Vec<i128>),
    Floats(Vec<f64>),
}

/// How close realized floats must be to the expected ones. NaN always
/// matches NaN only, and an infinity only itself.
#[derive(Clone, Copy, Debug)]
enum Tol {
    /// Equal (`==`, so `-0.0` matches `0.0`).
    Exact,
    /// Within this much of the expected value, relative to the larger of 1
    /// and its magnitude.
    Rel(f64),
    /// Within this many ulps of the result's dtype at the expected value.
    Ulps(f64),
}

/// A realized value a case expects.
struct Want {
    dtype: DType,
    dims: Vec<usize>,
    elems: Elems,
    tol: Tol,
}

/// The outcome a case expects.
enum Expect {
    /// Misuse: an error of this kind whose op is `needles[0]` and whose
    /// message contains every needle.
    Error { kind: Kind, needles: Vec<String> },
    /// A valid edge input and the value it realizes to.
    Value(Want),
}

/// Misuse reported as an error of `kind`, naming the op `needles[0]`, with
/// every needle in its message.
fn error(kind: Kind, needles: &[&str]) -> Expect {
    assert!(!needles.is_empty(), "an error case names at least its op");
    Expect::Error {
        kind,
        needles: needles.iter().map(|n| n.to_string()).collect(),
    }
}

/// A valid edge input realizing to `elems` of `dtype` in the shape `dims`.
fn value(dtype: DType, dims: &[usize], elems: Elems, tol: Tol) -> Expect {
    Expect::Value(Want {
        dtype,
        dims: dims.to_vec(),
        elems,
        tol,
    })
}

/// Exactly these floats (NaN matching NaN).
fn floats(dtype: DType, dims: &[usize], v: &[f64]) -> Expect {
    value(dtype, dims, Elems::Floats(v.to_vec()), Tol::Exact)
}

/// These floats within `rel` (relative to the larger of 1 and the value).
fn near(dtype: DType, dims: &[usize], v: &[f64], rel: f64) -> Expect {
    value(dtype, dims, Elems::Floats(v.to_vec()), Tol::Rel(rel))
}

/// These floats (computed in f64) within `n` ulps of `dtype`.
fn ulps(dtype: DType, dims: &[usize], v: &[f64], n: f64) -> Expect {
    value(dtype, dims, Elems::Floats(v.to_vec()), Tol::Ulps(n))
}

/// Exactly these integers.
fn ints(dtype: DType, dims: &[usize], v: &[i128]) -> Expect {
    value(dtype, dims, Elems::Ints(v.to_vec()), Tol::Exact)
}

/// Exactly these bools.
fn bools(dims: &[usize], v: &[bool]) -> Expect {
    value(Bool, dims, Elems::Bools(v.to_vec()), Tol::Exact)
}

/// No elements, in a shape with an empty axis.
fn empty(dtype: DType, dims: &[usize]) -> Expect {
    assert!(dims.contains(&0), "an empty result has an empty axis");
    let elems = match dtype {
        Bool => Elems::Bools(vec![]),
        d if d.is_float() => Elems::Floats(vec![]),
        _ => Elems::Ints(vec![]),
    };
    value(dtype, dims, elems, Tol::Exact)
}

// ---- how a case calls the library ----

/// A call of the library, made when the case is checked.
enum Call<'a> {
    /// An op with a `try_` form and a panicking form.
    Both(
        Box<dyn FnOnce() -> Result<Tensor> + 'a>,
        Box<dyn FnOnce() -> Tensor + 'a>,
    ),
    /// A call with only a fallible form (reads, `realize`).
    TryOnly(Box<dyn FnOnce() -> Result<Tensor> + 'a>),
    /// A call that cannot fail by its signature (`scalar`, `clamp`, `powf`, `to`).
    Plain(Box<dyn FnOnce() -> Tensor + 'a>),
}

/// An op called through its `try_` form and its panicking form.
fn both<'a>(try_form: impl FnOnce() -> Result<Tensor> + 'a, panicking: impl FnOnce() -> Tensor + 'a) -> Call<'a> {
    Call::Both(Box::new(try_form), Box::new(panicking))
}

/// An op called through both forms from one spelling of the call, so the
/// two forms cannot drift apart: `op!(receiver, name / try_name(args))` for
/// a method, `op!(Tensor::name / try_name(args))` for a constructor. The
/// receiver and the arguments are evaluated anew for each form.
macro_rules! op {
    (Tensor :: $name:ident / $try:ident ($($arg:expr),* $(,)?)) => {
        both(|| Tensor::$try($($arg),*), || Tensor::$name($($arg),*))
    };
    ($recv:expr, $name:ident / $try:ident ($($arg:expr),* $(,)?)) => {
        both(|| $recv.$try($($arg),*), || $recv.$name($($arg),*))
    };
}

/// A call that has only a fallible form.
fn try_only<'a>(f: impl FnOnce() -> Result<Tensor> + 'a) -> Call<'a> {
    Call::TryOnly(Box::new(f))
}

/// A call that cannot fail by its signature.
fn plain<'a>(f: impl FnOnce() -> Tensor + 'a) -> Call<'a> {
    Call::Plain(Box::new(f))
}

/// A read (`to_vec`, `with_slice`, ...), its elements made a rank-1 tensor
/// again so that a value case can check them.
fn read<'a, E: Element>(f: impl FnOnce() -> Result<Vec<E>> + 'a) -> Call<'a> {
    try_only(move || {
        let v = f()?;
        let n = v.len();
        Ok(Tensor::from_vec(v, &[n]))
    })
}

/// A read of one element (`to_scalar`), made a rank-0 tensor again.
fn read_scalar<'a, E: Element>(f: impl FnOnce() -> Result<E> + 'a) -> Call<'a> {
    try_only(move || f().map(Tensor::scalar))
}

/// `t` realized in place.
fn realized<'a>(t: impl FnOnce() -> Tensor + 'a) -> Call<'a> {
    try_only(move || {
        let t = t();
        t.realize()?;
        Ok(t)
    })
}

// ---- panics, caught quietly ----

thread_local! {
    /// Whether a panic on this thread is one a case provoked (so the hook
    /// prints nothing).
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// Where the last quiet panic on this thread was raised.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that is silent for the panics cases provoke
/// and prints every other panic as the default hook does.
fn install_quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if QUIET.get() {
                LOCATION.set(info.location().map(|l| l.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, returning a panic as its message (with where it was raised,
/// in `at`).
fn catch<T>(f: impl FnOnce() -> T) -> std::result::Result<T, (String, String)> {
    let was = QUIET.replace(true);
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.set(was);
    r.map_err(|payload| {
        let at = LOCATION.take().unwrap_or_default();
        (panic_message(&*payload), at)
    })
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "<a panic without a message>".to_string()
    }
}

// ---- checking a case ----

/// The cases checked so far and their failures.
#[derive(Default)]
struct Catalogue {
    cases: usize,
    errors: usize,
    values: usize,
    failures: Vec<String>,
}

impl Catalogue {
    fn new() -> Catalogue {
        install_quiet_hook();
        Catalogue::default()
    }

    /// Makes `call` and checks that it has the outcome `expect`.
    fn check(&mut self, name: &str, call: Call<'_>, expect: Expect) {
        self.cases += 1;
        let verdict = match &expect {
            Expect::Error { kind, needles } => check_error(call, *kind, needles),
            Expect::Value(want) => check_value(call, want),
        };
        match (verdict, &expect) {
            (Ok(()), Expect::Error { .. }) => self.errors += 1,
            (Ok(()), Expect::Value(_)) => self.values += 1,
            (Err(why), _) => self.failures.push(format!("{name}: {why}")),
        }
    }

    /// Prints the counts and fails listing every failure.
    fn finish(self, what: &str) {
        println!(
            "{what}: {} cases, {} clear errors, {} values",
            self.cases, self.errors, self.values
        );
        assert!(
            self.failures.is_empty(),
            "{} of {} cases failed:\n{}",
            self.failures.len(),
            self.cases,
            self.failures.join("\n")
        );
    }
}

fn check_error(call: Call<'_>, kind: Kind, needles: &[String]) -> std::result::Result<(), String> {
    let (try_form, panicking) = match call {
        Call::Both(t, p) => (t, Some(p)),
        Call::TryOnly(t) => (t, None),
        Call::Plain(_) => return Err("a call that cannot fail cannot expect an error".into()),
    };
    let e = match catch(try_form) {
        Err((panic, at)) => return Err(format!("the fallible form panicked at {at}: {panic}")),
        Ok(Ok(t)) => return Err(format!("expected {kind:?}, got Ok({t:?})")),
        Ok(Err(e)) => e,
    };
    let msg = e.to_string();
    let (got, op) = kind_and_op(&e);
    if got != kind {
        return Err(format!("expected {kind:?}, got {e:?}: `{msg}`"));
    }
    if let Some(op) = op {
        if op != needles[0] {
            return Err(format!("the error names `{op}`, not `{}`: `{msg}`", needles[0]));
        }
    }
    if let Some(n) = needles.iter().find(|n| !msg.contains(n.as_str())) {
        return Err(format!("the message `{msg}` does not contain `{n}`"));
    }
    if let Some(p) = panicking {
        match catch(p) {
            Ok(t) => return Err(format!("the panicking form returned {t:?}; the try_ form gave `{msg}`")),
            Err((pm, _)) if pm != msg => return Err(format!("the panicking form panicked with `{pm}`, not `{msg}`")),
            Err(_) => {}
        }
    }
    Ok(())
}

fn check_value(call: Call<'_>, want: &Want) -> std::result::Result<(), String> {
    let (try_form, panicking) = match call {
        Call::Both(t, p) => (Some(t), Some(p)),
        Call::TryOnly(t) => (Some(t), None),
        Call::Plain(p) => (None, Some(p)),
    };
    if let Some(t) = try_form {
        let t = match catch(t) {
            Err((panic, at)) => return Err(format!("the fallible form panicked at {at}: {panic}")),
            Ok(Err(e)) => return Err(format!("expected a value, got {e:?}: `{e}`")),
            Ok(Ok(t)) => t,
        };
        compare(&t, want).map_err(|why| format!("fallible form: {why}"))?;
    }
    if let Some(p) = panicking {
        let t = catch(p).map_err(|(panic, at)| format!("the panicking form panicked at {at}: {panic}"))?;
        compare(&t, want).map_err(|why| format!("panicking form: {why}"))?;
    }
    Ok(())
}

/// The elements of `t`, realized and widened.
fn elements(t: &Tensor) -> Result<Elems> {
    let ints = |v: Vec<i128>| Elems::Ints(v);
    Ok(match t.dtype() {
        Bool => Elems::Bools(t.to_vec()?),
        U8 => ints(t.to_vec::<u8>()?.into_iter().map(i128::from).collect()),
        I32 => ints(t.to_vec::<i32>()?.into_iter().map(i128::from).collect()),
        I64 => ints(t.to_vec::<i64>()?.into_iter().map(i128::from).collect()),
        U32 => ints(t.to_vec::<u32>()?.into_iter().map(i128::from).collect()),
        F16 => Elems::Floats(t.to_vec::<f16>()?.into_iter().map(f64::from).collect()),
        BF16 => Elems::Floats(t.to_vec::<bf16>()?.into_iter().map(f64::from).collect()),
        F32 => Elems::Floats(t.to_vec::<f32>()?.into_iter().map(f64::from).collect()),
        F64 => Elems::Floats(t.to_vec()?),
    })
}

/// Checks the dtype, shape and elements of `t` against `want`.
fn compare(t: &Tensor, want: &Want) -> std::result::Result<(), String> {
    if t.dtype() != want.dtype || t.dims() != want.dims.as_slice() {
        return Err(format!(
            "got a {} tensor of shape {:?}, want {} of {:?}",
            t.dtype(),
            t.dims(),
            want.dtype,
            want.dims
        ));
    }
    let got = match catch(|| elements(t)) {
        Err((panic, at)) => return Err(format!("realizing it panicked at {at}: {panic}")),
        Ok(Err(e)) => return Err(format!("realizing it failed: {e}")),
        Ok(Ok(got)) => got,
    };
    let ok = match (&got, &want.elems) {
        (Elems::Floats(g), Elems::Floats(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(&g, &w)| close(g, w, want.tol, want.dtype))
        }
        (g, w) => g == w,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("got {got:?}, want {:?} ({:?})", want.elems, want.tol))
    }
}

fn close(g: f64, w: f64, tol: Tol, dtype: DType) -> bool {
    if g.is_nan() || w.is_nan() {
        return g.is_nan() && w.is_nan();
    }
    if g == w {
        return true;
    }
    if !(g.is_finite() && w.is_finite()) {
        return false;
    }
    match tol {
        Tol::Exact => false,
        Tol::Rel(r) => (g - w).abs() <= r * w.abs().max(1.0),
        Tol::Ulps(n) => (g - w).abs() <= n * ulp(dtype, w),
    }
}

/// The gap from `|x|` rounded to `dtype` to the next value of `dtype` away
/// from zero.
fn ulp(dtype: DType, x: f64) -> f64 {
    let x = x.abs();
    match dtype {
        F16 => {
            let h = f16::from_f64(x);
            f16::from_bits(h.to_bits() + 1).to_f64() - h.to_f64()
        }
        BF16 => {
            let h = bf16::from_f64(x);
            bf16::from_bits(h.to_bits() + 1).to_f64() - h.to_f64()
        }
        F32 => {
            let h = x as f32;
            f64::from(f32::from_bits(h.to_bits() + 1)) - f64::from(h)
        }
        _ => f64::from_bits(x.to_bits() + 1) - x,
    }
}

// ---- inputs ----

fn f32s(v: &[f32], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

fn f64s(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

fn i32s(v: &[i32], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

fn i64s(v: &[i64], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

fn u8s(v: &[u8], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

fn bools_of(v: &[bool], dims: &[usize]) -> Tensor {
    Tensor::from_slice(v, dims)
}

/// `v` rounded to f16.
fn f16s(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(), dims)
}

/// `v` rounded to bf16.
fn bf16s(v: &[f64], dims: &[usize]) -> Tensor {
    Tensor::from_vec(v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(), dims)
}

/// The f32 matrix `[[1, 2, 3], [4, 5, 6]]`.
fn x23() -> Tensor {
    f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
}

/// f32 zeros (a lazy constant).
fn zeros(dims: &[usize]) -> Tensor {
    Tensor::zeros(dims, F32)
}

/// `t` handled as living on CUDA device 0 (nothing moves until it is realized).
fn gpu(t: Tensor) -> Tensor {
    t.to(Device::Cuda(0))
}

// ---- f64 references ----

fn softmax_ref(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = row.iter().map(|x| (x - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

fn logsumexp_ref(row: &[f64]) -> f64 {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

fn log_softmax_ref(row: &[f64]) -> Vec<f64> {
    let l = logsumexp_ref(row);
    row.iter().map(|x| x - l).collect()
}

fn layer_norm_ref(row: &[f64], weight: &[f64], bias: &[f64], eps: f64) -> Vec<f64> {
    let n = row.len() as f64;
    let m = row.iter().sum::<f64>() / n;
    let v = row.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    let r = 1.0 / (v + eps).sqrt();
    row.iter()
        .zip(weight.iter().zip(bias))
        .map(|(x, (w, b))| (x - m) * r * w + b)
        .collect()
}

fn rms_norm_ref(row: &[f64], eps: f64) -> Vec<f64> {
    let ms = row.iter().map(|x| x * x).sum::<f64>() / row.len() as f64;
    row.iter().map(|x| x / (ms + eps).sqrt()).collect()
}

// ---- the catalogue ----

#[test]
fn misuse_catalogue() {
    let mut c = Catalogue::new();
    constructors(&mut c);
    elementwise(&mut c);
    casts(&mut c);
    views(&mut c);
    reductions(&mut c);
    compositions(&mut c);
    reading(&mut c);
    scalars(&mut c);
    names(&mut c);
    assert!(c.cases >= 100, "the catalogue has only {} cases", c.cases);
    c.finish("misuse catalogue");
}

/// `from_vec`, `from_slice`, `zeros`, `ones`, `full`, `full_scalar`,
/// `rand`, `randn`, `arange` and `scalar`.
fn constructors(c: &mut Catalogue) {
    let seven = [1usize; MAX_RANK + 1];
    let square = [1usize << 32, 1 << 32];
    let sq = "[4294967296, 4294967296]";
    c.check(
        "from_vec: 5 elements for [2, 3]",
        op!(Tensor::from_vec / try_from_vec(vec![0.0f32; 5], &[2, 3])),
        error(LengthMismatch, &["from_vec", "5 elements", "[2, 3]"]),
    );
    c.check(
        "from_vec: 7 elements for [2, 3]",
        op!(Tensor::from_vec / try_from_vec(vec![1u8; 7], &[2, 3])),
        error(LengthMismatch, &["from_vec", "7 elements", "[2, 3]"]),
    );
    c.check(
        "from_vec: no elements for a scalar",
        op!(Tensor::from_vec / try_from_vec(Vec::<i32>::new(), &[])),
        error(LengthMismatch, &["from_vec", "0 elements", "[]"]),
    );
    c.check(
        "from_vec: 2 elements for a scalar",
        op!(Tensor::from_vec / try_from_vec(vec![1i64, 2], &[])),
        error(LengthMismatch, &["from_vec", "2 elements", "[]"]),
    );
    c.check(
        "from_vec: 1 element for [0, 3]",
        op!(Tensor::from_vec / try_from_vec(vec![1.0f64], &[0, 3])),
        error(LengthMismatch, &["from_vec", "1 elements", "[0, 3]"]),
    );
    c.check(
        "from_vec: [2^32, 2^32] whose product wraps to 0",
        op!(Tensor::from_vec / try_from_vec(Vec::<f32>::new(), &square)),
        error(ShapeTooLarge, &["from_vec", sq]),
    );
    c.check(
        "from_vec: [2^62 + 1, 4] whose product wraps to 4",
        op!(Tensor::from_vec / try_from_vec(vec![1i32, 2, 3, 4], &[(1 << 62) + 1, 4])),
        error(ShapeTooLarge, &["from_vec", "[4611686018427387905, 4]"]),
    );
    c.check(
        "from_vec: an empty axis does not make room for [2^40, 2^40]",
        op!(Tensor::from_vec / try_from_vec(Vec::<f32>::new(), &[0, HUGE, HUGE])),
        error(ShapeTooLarge, &["from_vec", "[0, 1099511627776, 1099511627776]"]),
    );
    c.check(
        "from_vec: rank 7",
        op!(Tensor::from_vec / try_from_vec(vec![1.0f32], &seven)),
        error(RankTooLarge, &["from_vec", "[1, 1, 1, 1, 1, 1, 1]", "7 axes"]),
    );
    c.check(
        "from_vec: the empty [0] is fine",
        op!(Tensor::from_vec / try_from_vec(Vec::<f32>::new(), &[0])),
        empty(F32, &[0]),
    );
    c.check(
        "from_vec: one element is a scalar",
        op!(Tensor::from_vec / try_from_vec(vec![7u32], &[])),
        ints(U32, &[], &[7]),
    );
    c.check(
        "from_vec: rank MAX_RANK is fine",
        op!(Tensor::from_vec / try_from_vec(vec![true, false], &[1, 1, 2, 1, 1, 1])),
        bools(&[1, 1, 2, 1, 1, 1], &[true, false]),
    );
    c.check(
        "zeros: [2^32, 2^32]",
        op!(Tensor::zeros / try_zeros(&square, F32)),
        error(ShapeTooLarge, &["zeros", sq]),
    );
    c.check(
        "zeros: rank 8",
        op!(Tensor::zeros / try_zeros(&[2; 8], I32)),
        error(RankTooLarge, &["zeros", "[2, 2, 2, 2, 2, 2, 2, 2]", "8 axes"]),
    );
    c.check(
        "ones: [usize::MAX, 0]",
        op!(Tensor::ones / try_ones(&[usize::MAX, 0], U8)),
        error(ShapeTooLarge, &["ones", "[18446744073709551615, 0]"]),
    );
    c.check(
        "ones: rank 7",
        op!(Tensor::ones / try_ones(&seven, F64)),
        error(RankTooLarge, &["ones", "[1, 1, 1, 1, 1, 1, 1]"]),
    );
    c.check(
        "full: MAX_NUMEL + 1 elements",
        op!(Tensor::full / try_full(&[MAX_NUMEL + 1], 1.5f32)),
        error(ShapeTooLarge, &["full", "[1152921504606846976]", "1152921504606846975"]),
    );
    c.check(
        "full_scalar: rank 7",
        op!(Tensor::full_scalar / try_full_scalar(&seven, Scalar::Int(1, I32), I32)),
        error(RankTooLarge, &["full_scalar", "[1, 1, 1, 1, 1, 1, 1]"]),
    );
    c.check(
        "full_scalar: 300 wraps to 44 as u8",
        op!(Tensor::full_scalar / try_full_scalar(&[2], Scalar::Int(300, I64), U8)),
        ints(U8, &[2], &[44, 44]),
    );
    c.check(
        "full_scalar: -2.7 truncates and wraps to 254 as u8",
        op!(Tensor::full_scalar / try_full_scalar(&[1], Scalar::Float(-2.7, F64), U8)),
        ints(U8, &[1], &[254]),
    );
    c.check(
        "zeros: the empty [2, 0]",
        op!(Tensor::zeros / try_zeros(&[2, 0], I64)),
        empty(I64, &[2, 0]),
    );
    c.check(
        "ones: a bool scalar",
        op!(Tensor::ones / try_ones(&[], Bool)),
        bools(&[], &[true]),
    );
    c.check(
        "rand: an integer dtype",
        op!(Tensor::rand / try_rand(&[2], I32, 0)),
        error(UnsupportedDType, &["rand", "i32"]),
    );
    c.check(
        "randn: bool",
        op!(Tensor::randn / try_randn(&[2], Bool, 0)),
        error(UnsupportedDType, &["randn", "bool"]),
    );
    c.check(
        "rand: 2^40 f32 are generated where read, and storing them does not fit in memory",
        realized(|| Tensor::rand(&[HUGE], F32, 1)),
        error(HostOutOfMemory, &["realize", "[1099511627776]", "4398046511104 bytes"]),
    );
    c.check(
        "randn: [2^20, 2^20] f64 do not fit in memory",
        op!(Tensor::randn / try_randn(&[1 << 20, 1 << 20], F64, 1)),
        error(HostOutOfMemory, &["randn", "[1048576, 1048576]", "8796093022208 bytes"]),
    );
    c.check(
        "rand: rank 7",
        op!(Tensor::rand / try_rand(&seven, F32, 0)),
        error(RankTooLarge, &["rand", "[1, 1, 1, 1, 1, 1, 1]"]),
    );
    c.check(
        "randn: [2^32, 2^32]",
        op!(Tensor::randn / try_randn(&square, BF16, 0)),
        error(ShapeTooLarge, &["randn", sq]),
    );
    c.check(
        "rand: the empty [0, 4]",
        op!(Tensor::rand / try_rand(&[0, 4], F16, 3)),
        empty(F16, &[0, 4]),
    );
    c.check(
        "arange: an integer step of 0",
        op!(Tensor::arange / try_arange(0i32, 3, 0)),
        error(
            InvalidShape,
            &["arange", "start 0:i32, end 3:i32, step 0:i32", "must not be zero"],
        ),
    );
    c.check(
        "arange: a float step of 0",
        op!(Tensor::arange / try_arange(0.0f64, 1.0, 0.0)),
        error(
            InvalidShape,
            &["arange", "step 0.0:f64", "the step must be finite and not zero"],
        ),
    );
    c.check(
        "arange: a NaN end",
        op!(Tensor::arange / try_arange(0.0f64, f64::NAN, 1.0)),
        error(
            InvalidShape,
            &["arange", "end NaN:f64", "the start and the end must be finite"],
        ),
    );
    c.check(
        "arange: an infinite start",
        op!(Tensor::arange / try_arange(f32::NEG_INFINITY, 0.0, 1.0)),
        error(InvalidShape, &["arange", "start -inf:f32", "must be finite"]),
    );
    c.check(
        "arange: an infinite step",
        op!(Tensor::arange / try_arange(0.0f64, 1.0, f64::INFINITY)),
        error(
            InvalidShape,
            &["arange", "step inf:f64", "the step must be finite and not zero"],
        ),
    );
    c.check(
        "arange: a NaN step",
        op!(Tensor::arange / try_arange(0.0f32, 1.0, f32::NAN)),
        error(InvalidShape, &["arange", "step NaN:f32"]),
    );
    c.check(
        "arange: bool",
        op!(Tensor::arange / try_arange(false, true, true)),
        error(UnsupportedDType, &["arange", "bool"]),
    );
    c.check(
        "arange: 1e30 values",
        op!(Tensor::arange / try_arange(0.0f64, 1e30, 1.0)),
        error(
            InvalidShape,
            &["arange", "1e30 elements are more than a tensor can hold"],
        ),
    );
    c.check(
        "arange: the whole i64 range",
        op!(Tensor::arange / try_arange(i64::MIN, i64::MAX, 1)),
        error(InvalidShape, &["arange", "18446744073709551615 elements"]),
    );
    c.check(
        "arange: 2^41 i64 do not fit in memory",
        op!(Tensor::arange / try_arange(0i64, 1 << 41, 1)),
        error(HostOutOfMemory, &["arange", "[2199023255552]", "i64"]),
    );
    c.check(
        "arange: an end below the start is empty",
        op!(Tensor::arange / try_arange(3.0f64, 1.0, 1.0)),
        empty(F64, &[0]),
    );
    c.check(
        "arange: a negative integer step",
        op!(Tensor::arange / try_arange(5i32, 0, -2)),
        ints(I32, &[3], &[5, 3, 1]),
    );
    c.check(
        "arange: u8 up to 250",
        op!(Tensor::arange / try_arange(0u8, 250, 100)),
        ints(U8, &[3], &[0, 100, 200]),
    );
    c.check(
        "arange: a float step that divides the range",
        op!(Tensor::arange / try_arange(0.5f32, 2.0, 0.5)),
        floats(F32, &[3], &[0.5, 1.0, 1.5]),
    );
    c.check(
        "scalar: an f64 scalar",
        plain(|| Tensor::scalar(3.5f64)),
        floats(F64, &[], &[3.5]),
    );
    c.check(
        "scalar: a bool scalar",
        plain(|| Tensor::scalar(true)),
        bools(&[], &[true]),
    );
    c.check(
        "scalar: a NaN scalar",
        plain(|| Tensor::scalar(f32::NAN)),
        floats(F32, &[], &[f64::NAN]),
    );

    c.check(
        "arange: f16 values",
        op!(Tensor::arange / try_arange(f16::from_f64(0.0), f16::from_f64(2048.0), f16::from_f64(512.0))),
        floats(F16, &[4], &[0.0, 512.0, 1024.0, 1536.0]),
    );
    c.check(
        "arange: a step of 0.1 (computed in f64, rounded once)",
        op!(Tensor::arange / try_arange(0.0f32, 1.0, 0.1)),
        floats(
            F32,
            &[10],
            &(0..10)
                .map(|i| (f64::from(0.1f32) * i as f64) as f32 as f64)
                .collect::<Vec<_>>(),
        ),
    );
    c.check(
        "arange: a negative step that never starts is empty",
        op!(Tensor::arange / try_arange(0i32, 10, -1)),
        empty(I32, &[0]),
    );
}

/// Binary and unary ops: broadcasting, dtypes, devices, `where_`, `pow`,
/// `clamp`, division by zero, wrapping integer arithmetic, NaN.
fn elementwise(c: &mut Catalogue) {
    c.check(
        "add: [2, 3] and [4]",
        op!(x23(), add / try_add(&zeros(&[4]))),
        error(ShapeMismatch, &["add", "shapes [2, 3] and [4] do not broadcast"]),
    );
    c.check(
        "mul: [3] and [2]",
        both(|| zeros(&[3]).try_mul(&zeros(&[2])), || &zeros(&[3]) * &zeros(&[2])),
        error(ShapeMismatch, &["mul", "[3] and [2]"]),
    );
    c.check(
        "sub: [2, 3] and [3, 2]",
        both(|| x23().try_sub(&zeros(&[3, 2])), || x23() - zeros(&[3, 2])),
        error(ShapeMismatch, &["sub", "[2, 3] and [3, 2]"]),
    );
    c.check(
        "lt: [2] and [3]",
        op!(zeros(&[2]), lt / try_lt(&zeros(&[3]))),
        error(ShapeMismatch, &["lt", "[2] and [3]"]),
    );
    c.check(
        "maximum: an empty [0] and [2]",
        op!(zeros(&[0]), maximum / try_maximum(&zeros(&[2]))),
        error(ShapeMismatch, &["maximum", "[0] and [2]"]),
    );
    c.check(
        "add: a broadcast of 2^80 elements",
        op!(zeros(&[HUGE, 1]), add / try_add(&zeros(&[1, HUGE]))),
        error(
            ShapeTooLarge,
            &[
                "add",
                "[1099511627776, 1099511627776] (the broadcast of [1099511627776, 1] and [1, 1099511627776])",
            ],
        ),
    );
    c.check(
        "add: [0] and [1] broadcast to [0]",
        both(
            || zeros(&[0]).try_add(&f32s(&[1.0], &[1])),
            || zeros(&[0]) + f32s(&[1.0], &[1]),
        ),
        empty(F32, &[0]),
    );
    c.check(
        "add: [0, 3] and [3] broadcast to [0, 3]",
        both(|| zeros(&[0, 3]).try_add(&zeros(&[3])), || zeros(&[0, 3]) + zeros(&[3])),
        empty(F32, &[0, 3]),
    );
    c.check(
        "mul: [2, 1] and [1, 0] broadcast to [2, 0]",
        both(
            || zeros(&[2, 1]).try_mul(&zeros(&[1, 0])),
            || zeros(&[2, 1]) * zeros(&[1, 0]),
        ),
        empty(F32, &[2, 0]),
    );
    c.check(
        "add: a scalar tensor and [2, 3]",
        both(
            || Tensor::scalar(10.0f32).try_add(&x23()),
            || Tensor::scalar(10.0f32) + x23(),
        ),
        floats(F32, &[2, 3], &[11.0, 12.0, 13.0, 14.0, 15.0, 16.0]),
    );
    c.check(
        "add: [2, 1] and [3] broadcast to [2, 3]",
        both(
            || f32s(&[10.0, 20.0], &[2, 1]).try_add(&f32s(&[1.0, 2.0, 3.0], &[3])),
            || f32s(&[10.0, 20.0], &[2, 1]) + f32s(&[1.0, 2.0, 3.0], &[3]),
        ),
        floats(F32, &[2, 3], &[11.0, 12.0, 13.0, 21.0, 22.0, 23.0]),
    );
    c.check(
        "bitand: f32 and i32",
        both(
            || zeros(&[2]).try_bitand(&i32s(&[1, 2], &[2])),
            || zeros(&[2]) & i32s(&[1, 2], &[2]),
        ),
        error(
            UnsupportedDType,
            &["bitand", "dtype f32", "bitwise ops need integers or bools"],
        ),
    );
    c.check(
        "bitor: i32 and f64",
        both(
            || i32s(&[1], &[1]).try_bitor(&f64s(&[1.0], &[1])),
            || i32s(&[1], &[1]) | f64s(&[1.0], &[1]),
        ),
        error(UnsupportedDType, &["bitor", "dtype f64"]),
    );
    c.check(
        "bitxor: f16 and f16",
        both(
            || f16s(&[1.0], &[1]).try_bitxor(&f16s(&[1.0], &[1])),
            || f16s(&[1.0], &[1]) ^ f16s(&[1.0], &[1]),
        ),
        error(UnsupportedDType, &["bitxor", "dtype f16"]),
    );
    c.check(
        "not: f32",
        both(|| zeros(&[2]).try_not(), || !zeros(&[2])),
        error(UnsupportedDType, &["not", "dtype f32"]),
    );
    c.check(
        "add: bool and bool",
        both(
            || bools_of(&[true], &[1]).try_add(&bools_of(&[true], &[1])),
            || bools_of(&[true], &[1]) + bools_of(&[true], &[1]),
        ),
        error(UnsupportedDType, &["add", "dtype bool", "cast the bools first"]),
    );
    c.check(
        "neg: bool",
        both(|| bools_of(&[true], &[1]).try_neg(), || -bools_of(&[true], &[1])),
        error(UnsupportedDType, &["neg", "dtype bool"]),
    );
    c.check(
        "abs: bool",
        op!(bools_of(&[true], &[1]), abs / try_abs()),
        error(UnsupportedDType, &["abs", "dtype bool"]),
    );
    c.check(
        "relu: bool",
        op!(bools_of(&[false], &[1]), relu / try_relu()),
        error(UnsupportedDType, &["relu", "dtype bool"]),
    );
    c.check(
        "where: an i32 condition",
        op!(Tensor::where_ / try_where(&i32s(&[1, 0], &[2]), &x23(), &x23())),
        error(UnsupportedDType, &["where", "dtype i32", "the condition must be bool"]),
    );
    c.check(
        "where: an f32 condition",
        op!(Tensor::where_ / try_where(&zeros(&[2]), &zeros(&[2]), &zeros(&[2]))),
        error(UnsupportedDType, &["where", "dtype f32"]),
    );
    c.check(
        "where: a [2] condition and a [3] value",
        op!(Tensor::where_ / try_where(&bools_of(&[true, false], &[2]), &zeros(&[3]), &zeros(&[2]))),
        error(ShapeMismatch, &["where", "[2] and [3]"]),
    );
    c.check(
        "where: a [2, 1] condition, a [3] value and a scalar",
        both(
            || {
                let cond = bools_of(&[true, false], &[2, 1]);
                Tensor::try_where(&cond, &f32s(&[1.0, 2.0, 3.0], &[3]), &Tensor::scalar(-1.0f32))
            },
            || {
                let cond = bools_of(&[true, false], &[2, 1]);
                Tensor::where_(&cond, &f32s(&[1.0, 2.0, 3.0], &[3]), &Tensor::scalar(-1.0f32))
            },
        ),
        floats(F32, &[2, 3], &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0]),
    );
    c.check(
        "where: i32 and f32 values promote to f32",
        both(
            || {
                Tensor::try_where(
                    &bools_of(&[true, false], &[2]),
                    &i32s(&[7, 7], &[2]),
                    &f32s(&[0.5, 0.5], &[2]),
                )
            },
            || {
                Tensor::where_(
                    &bools_of(&[true, false], &[2]),
                    &i32s(&[7, 7], &[2]),
                    &f32s(&[0.5, 0.5], &[2]),
                )
            },
        ),
        floats(F32, &[2], &[7.0, 0.5]),
    );
    c.check(
        "mul: a CPU and a CUDA tensor",
        both(
            || zeros(&[2]).try_mul(&gpu(zeros(&[2]))),
            || zeros(&[2]) * gpu(zeros(&[2])),
        ),
        error(
            DeviceMismatch,
            &["mul", "operands live on different devices (cpu and cuda:0)"],
        ),
    );
    c.check(
        "add: a CUDA and a CPU tensor",
        both(
            || gpu(zeros(&[2])).try_add(&zeros(&[2])),
            || gpu(zeros(&[2])) + zeros(&[2]),
        ),
        error(DeviceMismatch, &["add", "(cuda:0 and cpu)"]),
    );
    c.check(
        "eq: tensors on two GPUs",
        op!(gpu(zeros(&[2])), eq / try_eq(&zeros(&[2]).to(Device::Cuda(1)))),
        error(DeviceMismatch, &["eq", "(cuda:0 and cuda:1)"]),
    );
    c.check(
        "add: devices are checked before shapes",
        both(
            || zeros(&[2]).try_add(&gpu(zeros(&[3]))),
            || zeros(&[2]) + gpu(zeros(&[3])),
        ),
        error(DeviceMismatch, &["add", "(cpu and cuda:0)"]),
    );
    c.check(
        "where: a CPU condition and a CUDA value",
        op!(Tensor::where_ / try_where(&bools_of(&[true], &[1]), &gpu(zeros(&[1])), &gpu(zeros(&[1])))),
        error(DeviceMismatch, &["where", "(cpu and cuda:0)"]),
    );
    c.check(
        "where: CPU values but the other one on CUDA",
        op!(Tensor::where_ / try_where(&bools_of(&[true], &[1]), &zeros(&[1]), &gpu(zeros(&[1])))),
        error(DeviceMismatch, &["where", "(cpu and cuda:0)"]),
    );
    c.check(
        "div: integers by zero give 0, and truncate toward zero",
        both(
            || i32s(&[7, -7, 7, 0], &[4]).try_div(&i32s(&[2, 2, 0, 0], &[4])),
            || i32s(&[7, -7, 7, 0], &[4]) / i32s(&[2, 2, 0, 0], &[4]),
        ),
        ints(I32, &[4], &[3, -3, 0, 0]),
    );
    c.check(
        "div: u8 by zero gives 0",
        both(
            || u8s(&[200], &[1]).try_div(&u8s(&[0], &[1])),
            || u8s(&[200], &[1]) / u8s(&[0], &[1]),
        ),
        ints(U8, &[1], &[0]),
    );
    c.check(
        "div: i32::MIN / -1 wraps",
        both(
            || i32s(&[i32::MIN], &[1]).try_div(&i32s(&[-1], &[1])),
            || i32s(&[i32::MIN], &[1]) / i32s(&[-1], &[1]),
        ),
        ints(I32, &[1], &[i32::MIN as i128]),
    );
    c.check(
        "div: floats by zero give infinities and NaN",
        both(
            || f32s(&[1.0, -1.0, 0.0], &[3]).try_div(&zeros(&[3])),
            || f32s(&[1.0, -1.0, 0.0], &[3]) / zeros(&[3]),
        ),
        floats(F32, &[3], &[f64::INFINITY, f64::NEG_INFINITY, f64::NAN]),
    );
    c.check(
        "add: i32::MAX + 1 wraps",
        both(
            || i32s(&[i32::MAX], &[1]).try_add(&i32s(&[1], &[1])),
            || i32s(&[i32::MAX], &[1]) + i32s(&[1], &[1]),
        ),
        ints(I32, &[1], &[i32::MIN as i128]),
    );
    c.check(
        "add: u8 250 + 10 wraps",
        both(
            || u8s(&[250], &[1]).try_add(&u8s(&[10], &[1])),
            || u8s(&[250], &[1]) + u8s(&[10], &[1]),
        ),
        ints(U8, &[1], &[4]),
    );
    c.check(
        "sub: u8 0 - 1 wraps",
        both(
            || u8s(&[0], &[1]).try_sub(&u8s(&[1], &[1])),
            || u8s(&[0], &[1]) - u8s(&[1], &[1]),
        ),
        ints(U8, &[1], &[255]),
    );
    c.check(
        "mul: i64::MAX * 2 wraps",
        both(
            || i64s(&[i64::MAX], &[1]).try_mul(&i64s(&[2], &[1])),
            || i64s(&[i64::MAX], &[1]) * i64s(&[2], &[1]),
        ),
        ints(I64, &[1], &[-2]),
    );
    c.check(
        "neg: i32::MIN wraps to itself",
        both(|| i32s(&[i32::MIN], &[1]).try_neg(), || -i32s(&[i32::MIN], &[1])),
        ints(I32, &[1], &[i32::MIN as i128]),
    );
    c.check(
        "abs: i32::MIN wraps to itself",
        op!(i32s(&[i32::MIN, -3], &[2]), abs / try_abs()),
        ints(I32, &[2], &[i32::MIN as i128, 3]),
    );
    c.check(
        "neg: u8 1 wraps to 255",
        both(|| u8s(&[1, 0], &[2]).try_neg(), || -u8s(&[1, 0], &[2])),
        ints(U8, &[2], &[255, 0]),
    );
    c.check(
        "pow: i32 to an i32 power computes in f32",
        op!(i32s(&[2, 3], &[2]), pow / try_pow(&i32s(&[3, 2], &[2]))),
        floats(F32, &[2], &[8.0, 9.0]),
    );
    c.check(
        "powf: 0.5 of 4, 0 and -1",
        plain(|| f32s(&[4.0, 0.0, -1.0], &[3]).powf(0.5)),
        near(F32, &[3], &[2.0, 0.0, f64::NAN], 1e-6),
    );
    c.check(
        "powf: -1 of 0 is inf",
        plain(|| f32s(&[0.0, 2.0], &[2]).powf(-1.0)),
        near(F32, &[2], &[f64::INFINITY, 0.5], 1e-6),
    );
    c.check(
        "clamp: NaN stays NaN",
        plain(|| f32s(&[-5.0, 0.5, 5.0, f32::NAN], &[4]).clamp(-1.0f32, 1.0f32)),
        floats(F32, &[4], &[-1.0, 0.5, 1.0, f64::NAN]),
    );
    c.check(
        "clamp: min above max gives max everywhere",
        plain(|| f32s(&[-5.0, 0.5, 5.0], &[3]).clamp(1.0f32, -1.0f32)),
        floats(F32, &[3], &[-1.0, -1.0, -1.0]),
    );
    c.check(
        "clamp: i32 with i32 bounds",
        plain(|| i32s(&[-5, 3, 9], &[3]).clamp(0i32, 5i32)),
        ints(I32, &[3], &[0, 3, 5]),
    );
    c.check(
        "clamp: i32 with float bounds computes in f32",
        plain(|| i32s(&[-5, 3, 9], &[3]).clamp(0.5f64, 4.5f64)),
        floats(F32, &[3], &[0.5, 3.0, 4.5]),
    );
    c.check(
        "clamp: infinite bounds leave values alone",
        plain(|| f32s(&[f32::MIN, f32::MAX], &[2]).clamp(f32::NEG_INFINITY, f32::INFINITY)),
        floats(F32, &[2], &[f32::MIN as f64, f32::MAX as f64]),
    );
    c.check(
        "maximum: NaN on either side gives NaN",
        op!(
            f32s(&[1.0, f32::NAN, 2.0], &[3]),
            maximum / try_maximum(&f32s(&[f32::NAN, 2.0, 1.0], &[3]))
        ),
        floats(F32, &[3], &[f64::NAN, f64::NAN, 2.0]),
    );
    c.check(
        "minimum: NaN on either side gives NaN",
        op!(
            f32s(&[1.0, f32::NAN, 2.0], &[3]),
            minimum / try_minimum(&f32s(&[f32::NAN, 2.0, 1.0], &[3]))
        ),
        floats(F32, &[3], &[f64::NAN, f64::NAN, 1.0]),
    );
    c.check(
        "maximum: of bools is their or",
        op!(
            bools_of(&[true, false, false], &[3]),
            maximum / try_maximum(&bools_of(&[false, false, true], &[3]))
        ),
        bools(&[3], &[true, false, true]),
    );
    c.check(
        "eq, ne, lt: NaN compares unequal and unordered",
        both(
            || {
                let n = f32s(&[f32::NAN], &[1]);
                let (eq, ne, lt) = (n.try_eq(&n)?, n.try_ne(&n)?, n.try_lt(&n)?);
                eq.try_bitor(&lt)?.try_bitxor(&ne)
            },
            || {
                let n = f32s(&[f32::NAN], &[1]);
                (n.eq(&n) | n.lt(&n)) ^ n.ne(&n)
            },
        ),
        bools(&[1], &[true]),
    );
    c.check(
        "eq: i32 1 and f32 1.0 promote and compare equal",
        op!(i32s(&[1, 2], &[2]), eq / try_eq(&f32s(&[1.0, 2.5], &[2]))),
        bools(&[2], &[true, false]),
    );
    c.check(
        "not: of u8 is bitwise",
        both(|| u8s(&[0, 15], &[2]).try_not(), || !u8s(&[0, 15], &[2])),
        ints(U8, &[2], &[255, 240]),
    );
    c.check(
        "not: of i32 is bitwise",
        both(|| i32s(&[0, 5], &[2]).try_not(), || !i32s(&[0, 5], &[2])),
        ints(I32, &[2], &[-1, -6]),
    );
    c.check(
        "not: of bools",
        both(
            || bools_of(&[true, false], &[2]).try_not(),
            || !bools_of(&[true, false], &[2]),
        ),
        bools(&[2], &[false, true]),
    );
    c.check(
        "sqrt, log: of negatives and zero",
        both(
            || {
                f32s(&[-1.0, 0.0], &[2])
                    .try_sqrt()?
                    .try_add(&f32s(&[0.0, -1.0], &[2]).try_log()?)
            },
            || f32s(&[-1.0, 0.0], &[2]).sqrt() + f32s(&[0.0, -1.0], &[2]).log(),
        ),
        floats(F32, &[2], &[f64::NAN, f64::NAN]),
    );
    c.check(
        "log: of 0 is -inf",
        op!(f32s(&[0.0], &[1]), log / try_log()),
        floats(F32, &[1], &[f64::NEG_INFINITY]),
    );
    c.check(
        "exp: overflows to inf, -inf gives 0",
        op!(f32s(&[1000.0, f32::NEG_INFINITY], &[2]), exp / try_exp()),
        floats(F32, &[2], &[f64::INFINITY, 0.0]),
    );
    c.check(
        "exp: of i32 is f32",
        op!(i32s(&[0], &[1]), exp / try_exp()),
        floats(F32, &[1], &[1.0]),
    );
    c.check(
        "recip: of i32 is f32, of 0 inf",
        op!(i32s(&[2, 0], &[2]), recip / try_recip()),
        floats(F32, &[2], &[0.5, f64::INFINITY]),
    );
    c.check(
        "rsqrt: of 0 is inf",
        op!(f32s(&[0.0, 4.0], &[2]), rsqrt / try_rsqrt()),
        near(F32, &[2], &[f64::INFINITY, 0.5], 1e-6),
    );
    c.check(
        "tanh: of large values saturates",
        op!(f32s(&[-1000.0, 1000.0], &[2]), tanh / try_tanh()),
        floats(F32, &[2], &[-1.0, 1.0]),
    );
    c.check(
        "sigmoid: of large values saturates",
        op!(f32s(&[-1000.0, 1000.0], &[2]), sigmoid / try_sigmoid()),
        floats(F32, &[2], &[0.0, 1.0]),
    );
    c.check(
        "floor: of i32 is the same i32",
        op!(i32s(&[-3, 4], &[2]), floor / try_floor()),
        ints(I32, &[2], &[-3, 4]),
    );
    c.check(
        "round: half to even",
        op!(f32s(&[0.5, 1.5, 2.5, -0.5, -1.5], &[5]), round / try_round()),
        floats(F32, &[5], &[0.0, 2.0, 2.0, -0.0, -2.0]),
    );
    c.check(
        "sign: NaN stays NaN",
        op!(f32s(&[-2.0, 0.0, 3.0, f32::NAN], &[4]), sign / try_sign()),
        floats(F32, &[4], &[-1.0, 0.0, 1.0, f64::NAN]),
    );

    c.check(
        "where: a broadcast of 2^80 elements",
        both(
            || {
                Tensor::try_where(
                    &Tensor::zeros(&[HUGE, 1, 1], Bool),
                    &zeros(&[1, HUGE, 1]),
                    &zeros(&[1, 1, HUGE]),
                )
            },
            || {
                Tensor::where_(
                    &Tensor::zeros(&[HUGE, 1, 1], Bool),
                    &zeros(&[1, HUGE, 1]),
                    &zeros(&[1, 1, HUGE]),
                )
            },
        ),
        error(ShapeTooLarge, &["where", "[1099511627776, 1099511627776, 1]"]),
    );
    c.check(
        "where: bool values",
        both(
            || {
                Tensor::try_where(
                    &bools_of(&[true, false], &[2]),
                    &bools_of(&[false; 2], &[2]),
                    &bools_of(&[true; 2], &[2]),
                )
            },
            || {
                Tensor::where_(
                    &bools_of(&[true, false], &[2]),
                    &bools_of(&[false; 2], &[2]),
                    &bools_of(&[true; 2], &[2]),
                )
            },
        ),
        bools(&[2], &[false, true]),
    );
    c.check(
        "sub: bool and bool",
        both(
            || bools_of(&[true], &[1]).try_sub(&bools_of(&[true], &[1])),
            || bools_of(&[true], &[1]) - bools_of(&[true], &[1]),
        ),
        error(UnsupportedDType, &["sub", "dtype bool"]),
    );
    c.check(
        "maximum: u32 and i32 promote to i64",
        op!(
            Tensor::from_vec(vec![u32::MAX], &[1]),
            maximum / try_maximum(&i32s(&[-1], &[1]))
        ),
        ints(I64, &[1], &[4_294_967_295]),
    );
    c.check(
        "lt: u8 255 and i32 -1 compare as i32",
        op!(u8s(&[255], &[1]), lt / try_lt(&i32s(&[-1], &[1]))),
        bools(&[1], &[false]),
    );
    c.check(
        "div: u32::MAX / 2",
        both(
            || Tensor::from_vec(vec![u32::MAX], &[1]).try_div(&Tensor::from_vec(vec![2u32], &[1])),
            || Tensor::from_vec(vec![u32::MAX], &[1]) / Tensor::from_vec(vec![2u32], &[1]),
        ),
        ints(U32, &[1], &[2_147_483_647]),
    );
    c.check(
        "powf: 0 of NaN, inf, 0 and -2 is 1",
        plain(|| f32s(&[f32::NAN, f32::INFINITY, 0.0, -2.0], &[4]).powf(0.0)),
        floats(F32, &[4], &[1.0; 4]),
    );
    c.check(
        "powf: 2 of negatives",
        plain(|| f32s(&[-3.0, -0.5], &[2]).powf(2.0)),
        near(F32, &[2], &[9.0, 0.25], 1e-6),
    );
    c.check(
        "powf: 3 of -2 is -8",
        plain(|| f32s(&[-2.0], &[1]).powf(3.0)),
        near(F32, &[1], &[-8.0], 1e-6),
    );
    c.check(
        "powf: NaN of 1 is 1",
        plain(|| f32s(&[1.0], &[1]).powf(f64::NAN)),
        floats(F32, &[1], &[1.0]),
    );
    c.check(
        "powf: of bools computes in f32",
        plain(|| bools_of(&[true, false], &[2]).powf(2.0)),
        floats(F32, &[2], &[1.0, 0.0]),
    );
    c.check(
        "clamp: bools",
        plain(|| bools_of(&[true, false], &[2]).clamp(false, false)),
        bools(&[2], &[false, false]),
    );
    c.check(
        "tanh, sigmoid: of infinities and NaN",
        both(
            || {
                let x = f32s(&[f32::NEG_INFINITY, f32::INFINITY, f32::NAN], &[3]);
                x.try_tanh()?.try_add(&x.try_sigmoid()?)
            },
            || {
                let x = f32s(&[f32::NEG_INFINITY, f32::INFINITY, f32::NAN], &[3]);
                x.tanh() + x.sigmoid()
            },
        ),
        floats(F32, &[3], &[-1.0, 2.0, f64::NAN]),
    );
    c.check(
        "silu: of large values and inf",
        op!(f32s(&[-1000.0, 1000.0, f32::INFINITY], &[3]), silu / try_silu()),
        floats(F32, &[3], &[0.0, 1000.0, f64::INFINITY]),
    );
    c.check(
        "gelu, gelu_erf: of large values",
        both(
            || {
                let x = f32s(&[-100.0, 100.0], &[2]);
                x.try_gelu()?.try_add(&x.try_gelu_erf()?)
            },
            || {
                let x = f32s(&[-100.0, 100.0], &[2]);
                x.gelu() + x.gelu_erf()
            },
        ),
        floats(F32, &[2], &[0.0, 200.0]),
    );
    c.check(
        "exp2, log2: exact powers of two",
        both(
            || {
                f32s(&[10.0, -1.0], &[2])
                    .try_exp2()?
                    .try_add(&f32s(&[8.0, 0.5], &[2]).try_log2()?)
            },
            || f32s(&[10.0, -1.0], &[2]).exp2() + f32s(&[8.0, 0.5], &[2]).log2(),
        ),
        floats(F32, &[2], &[1027.0, -0.5]),
    );
    c.check(
        "sign, relu: of integers",
        both(
            || {
                i32s(&[-5, 0, 7], &[3])
                    .try_sign()?
                    .try_add(&i32s(&[-5, 0, 7], &[3]).try_relu()?)
            },
            || i32s(&[-5, 0, 7], &[3]).sign() + i32s(&[-5, 0, 7], &[3]).relu(),
        ),
        ints(I32, &[3], &[-1, 0, 8]),
    );
    c.check(
        "abs, sign: of u8",
        both(
            || {
                u8s(&[200, 0], &[2])
                    .try_abs()?
                    .try_add(&u8s(&[200, 0], &[2]).try_sign()?)
            },
            || u8s(&[200, 0], &[2]).abs() + u8s(&[200, 0], &[2]).sign(),
        ),
        ints(U8, &[2], &[201, 0]),
    );
    c.check(
        "round: f16 halves to even",
        op!(f16s(&[2.5, 3.5], &[2]), round / try_round()),
        floats(F16, &[2], &[2.0, 4.0]),
    );
}

/// `cast`: the float to integer rule of its docs, wrapping, bools, rounding.
fn casts(c: &mut Catalogue) {
    let specials = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -1e20, 3e9, 2.7, -2.7];
    let (max, min) = (i64::MAX as i128, i64::MIN as i128);
    let table: [(DType, [i128; 7]); 4] = [
        (I64, [max, min, 0, min, 3_000_000_000, 2, -2]),
        (I32, [-1, 0, 0, 0, -1_294_967_296, 2, -2]),
        (U32, [4_294_967_295, 0, 0, 0, 3_000_000_000, 2, 4_294_967_294]),
        (U8, [255, 0, 0, 0, 0, 2, 254]),
    ];
    for (to, want) in table {
        c.check(
            &format!("cast: f32 +inf, -inf, NaN, -1e20, 3e9, 2.7, -2.7 to {to}"),
            both(
                move || f32s(&specials, &[7]).try_cast(to),
                move || f32s(&specials, &[7]).cast(to),
            ),
            ints(to, &[7], &want),
        );
    }
    let specials64 = specials.map(f64::from);
    c.check(
        "cast: f64 +inf, -inf, NaN, -1e20, 3e9, 2.7, -2.7 to i32",
        op!(f64s(&specials64, &[7]), cast / try_cast(I32)),
        ints(I32, &[7], &table[1].1),
    );
    c.check(
        "cast: integers wrap (300 and -1 as u8)",
        op!(i32s(&[300, -1, 256], &[3]), cast / try_cast(U8)),
        ints(U8, &[3], &[44, 255, 0]),
    );
    c.check(
        "cast: to bool is != 0, NaN is true",
        op!(f32s(&[0.0, -0.0, f32::NAN, 0.5], &[4]), cast / try_cast(Bool)),
        bools(&[4], &[false, false, true, true]),
    );
    c.check(
        "cast: a bool is 0 or 1",
        op!(bools_of(&[true, false], &[2]), cast / try_cast(I32)),
        ints(I32, &[2], &[1, 0]),
    );
    c.check(
        "cast: 65520 rounds to inf in f16",
        op!(f32s(&[65504.0, 65520.0], &[2]), cast / try_cast(F16)),
        floats(F16, &[2], &[65504.0, f64::INFINITY]),
    );
    c.check(
        "cast: 1 + 2^-8 ties to even (1) in bf16",
        op!(f32s(&[1.0 + 1.0 / 256.0], &[1]), cast / try_cast(BF16)),
        floats(BF16, &[1], &[1.0]),
    );
    c.check(
        "cast: 2^53 + 1 rounds to even in f64",
        op!(i64s(&[(1 << 53) + 1], &[1]), cast / try_cast(F64)),
        floats(F64, &[1], &[9007199254740992.0]),
    );
    c.check(
        "cast: i64::MAX to u32 wraps",
        op!(i64s(&[i64::MAX], &[1]), cast / try_cast(U32)),
        ints(U32, &[1], &[4_294_967_295]),
    );

    c.check(
        "cast: i64 2^24 + 1 rounds to even in f32",
        op!(i64s(&[16_777_217], &[1]), cast / try_cast(F32)),
        floats(F32, &[1], &[16_777_216.0]),
    );
    c.check(
        "cast: u32::MAX wraps to -1 as i32",
        op!(Tensor::from_vec(vec![u32::MAX], &[1]), cast / try_cast(I32)),
        ints(I32, &[1], &[-1]),
    );
    c.check(
        "cast: f16 NaN, 300 and -1 to u8",
        op!(f16s(&[f64::NAN, 300.0, -1.0], &[3]), cast / try_cast(U8)),
        ints(U8, &[3], &[0, 44, 255]),
    );
    c.check(
        "cast: bf16 +inf to i32 wraps from i64::MAX",
        op!(bf16s(&[f64::INFINITY], &[1]), cast / try_cast(I32)),
        ints(I32, &[1], &[-1]),
    );
    c.check(
        "cast: f64 1e39 overflows bf16 to inf",
        op!(f64s(&[1e39], &[1]), cast / try_cast(BF16)),
        floats(BF16, &[1], &[f64::INFINITY]),
    );
}

/// `reshape`, `flatten`, `permute`, `transpose`, `broadcast_to`,
/// `expand`, `slice`, `narrow`, `squeeze` and `unsqueeze`.
fn views(c: &mut Catalogue) {
    let six = || zeros(&[1, 2, 1, 3, 1, 2]);
    c.check(
        "reshape: 6 elements as 4",
        op!(x23(), reshape / try_reshape(&[4])),
        error(
            InvalidShape,
            &[
                "reshape",
                "6 elements cannot be viewed as 4",
                "shape [2, 3]",
                "argument [4]",
            ],
        ),
    );
    c.check(
        "reshape: 6 elements as 0",
        op!(x23(), reshape / try_reshape(&[0, 6])),
        error(InvalidShape, &["reshape", "shape [2, 3]", "argument [0, 6]"]),
    );
    c.check(
        "reshape: to rank 7",
        op!(x23(), reshape / try_reshape(&[1, 1, 1, 1, 1, 2, 3])),
        error(RankTooLarge, &["reshape", "[1, 1, 1, 1, 1, 2, 3]", "7 axes"]),
    );
    c.check(
        "reshape: to [2^40, 2^40]",
        op!(x23(), reshape / try_reshape(&[HUGE, HUGE])),
        error(ShapeTooLarge, &["reshape", "[1099511627776, 1099511627776]"]),
    );
    c.check(
        "reshape: [0, 3] to [3, 0, 5]",
        op!(zeros(&[0, 3]), reshape / try_reshape(&[3, 0, 5])),
        empty(F32, &[3, 0, 5]),
    );
    c.check(
        "reshape: a scalar to [1, 1]",
        op!(Tensor::scalar(4i32), reshape / try_reshape(&[1, 1])),
        ints(I32, &[1, 1], &[4]),
    );
    c.check(
        "flatten: a scalar is [1]",
        op!(Tensor::scalar(4i32), flatten / try_flatten()),
        ints(I32, &[1], &[4]),
    );
    c.check(
        "permute: a repeated axis",
        op!(x23(), permute / try_permute(&[0, 0])),
        error(
            InvalidShape,
            &[
                "permute",
                "not a permutation of the 2 axes",
                "shape [2, 3]",
                "argument [0, 0]",
            ],
        ),
    );
    c.check(
        "permute: too few axes",
        op!(x23(), permute / try_permute(&[0])),
        error(InvalidShape, &["permute", "shape [2, 3]", "argument [0]"]),
    );
    c.check(
        "permute: too many axes",
        op!(x23(), permute / try_permute(&[0, 1, 2])),
        error(InvalidShape, &["permute", "shape [2, 3]", "argument [0, 1, 2]"]),
    );
    c.check(
        "permute: an axis past the rank",
        op!(x23(), permute / try_permute(&[0, 5])),
        error(InvalidShape, &["permute", "shape [2, 3]", "argument [0, 5]"]),
    );
    c.check(
        "permute: [1, 0] transposes",
        op!(x23(), permute / try_permute(&[1, 0])),
        floats(F32, &[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
    );
    c.check(
        "permute: a scalar by []",
        op!(Tensor::scalar(1u8), permute / try_permute(&[])),
        ints(U8, &[], &[1]),
    );
    c.check(
        "transpose: axis 2 of a matrix",
        op!(x23(), transpose / try_transpose(0, 2)),
        error(
            AxisOutOfRange,
            &["transpose", "axis 2 is out of range for shape [2, 3]"],
        ),
    );
    c.check(
        "transpose: axis -3 of a matrix",
        op!(x23(), transpose / try_transpose(-3, 0)),
        error(AxisOutOfRange, &["transpose", "axis -3", "[2, 3]"]),
    );
    c.check(
        "transpose: a scalar",
        op!(Tensor::scalar(1.0f32), transpose / try_transpose(0, 0)),
        error(AxisOutOfRange, &["transpose", "axis 0", "shape []"]),
    );
    c.check(
        "transpose: -1 and -2",
        op!(x23(), transpose / try_transpose(-1, -2)),
        floats(F32, &[3, 2], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
    );
    c.check(
        "expand: [3] to [2, 4]",
        op!(zeros(&[3]), expand / try_expand(&[2, 4])),
        error(ShapeMismatch, &["expand", "shapes [3] and [2, 4] do not broadcast"]),
    );
    c.check(
        "broadcast_to: to a lower rank",
        op!(x23(), broadcast_to / try_broadcast_to(&[3])),
        error(ShapeMismatch, &["broadcast_to", "[2, 3] and [3]"]),
    );
    c.check(
        "broadcast_to: an empty axis to 2",
        op!(zeros(&[0]), broadcast_to / try_broadcast_to(&[2])),
        error(ShapeMismatch, &["broadcast_to", "[0] and [2]"]),
    );
    c.check(
        "broadcast_to: rank 8",
        op!(six(), broadcast_to / try_broadcast_to(&[1, 1, 1, 2, 1, 3, 1, 2])),
        error(RankTooLarge, &["broadcast_to", "[1, 1, 1, 2, 1, 3, 1, 2]", "8 axes"]),
    );
    c.check(
        "expand: to [2^40, 2^40]",
        op!(zeros(&[HUGE, 1]), expand / try_expand(&[HUGE, HUGE])),
        error(ShapeTooLarge, &["expand", "[1099511627776, 1099511627776]"]),
    );
    c.check(
        "broadcast_to: [1] to the empty [0]",
        op!(f32s(&[1.0], &[1]), broadcast_to / try_broadcast_to(&[0])),
        empty(F32, &[0]),
    );
    c.check(
        "expand: [2, 1] to [2, 0]",
        op!(zeros(&[2, 1]), expand / try_expand(&[2, 0])),
        empty(F32, &[2, 0]),
    );
    c.check(
        "expand: a scalar to [2, 2]",
        op!(Tensor::scalar(3i64), expand / try_expand(&[2, 2])),
        ints(I64, &[2, 2], &[3, 3, 3, 3]),
    );
    c.check(
        "slice: start past end",
        op!(x23(), slice / try_slice(1, 2, 1, 1)),
        error(
            InvalidShape,
            &[
                "slice",
                "needs 0 <= start <= end <= 3 and step >= 1 on axis 1",
                "shape [2, 3]",
                "argument [1, 2, 1, 1]",
            ],
        ),
    );
    c.check(
        "slice: a step of 0",
        op!(x23(), slice / try_slice(1, 0, 3, 0)),
        error(InvalidShape, &["slice", "shape [2, 3]", "argument [1, 0, 3, 0]"]),
    );
    c.check(
        "slice: a negative start",
        op!(x23(), slice / try_slice(-1, -1, 2, 1)),
        error(InvalidShape, &["slice", "shape [2, 3]", "argument [-1, -1, 2, 1]"]),
    );
    c.check(
        "slice: an end past the axis",
        op!(x23(), slice / try_slice(0, 0, 3, 1)),
        error(InvalidShape, &["slice", "end <= 2", "shape [2, 3]"]),
    );
    c.check(
        "slice: an axis out of range",
        op!(x23(), slice / try_slice(2, 0, 1, 1)),
        error(AxisOutOfRange, &["slice", "axis 2", "shape [2, 3]"]),
    );
    c.check(
        "slice: every other element",
        op!(
            f32s(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[6]),
            slice / try_slice(0, 1, 6, 2)
        ),
        floats(F32, &[3], &[1.0, 3.0, 5.0]),
    );
    c.check(
        "slice: a step past the end keeps one",
        op!(x23(), slice / try_slice(1, 1, 3, 5)),
        floats(F32, &[2, 1], &[2.0, 5.0]),
    );
    c.check(
        "slice: start == end == len is empty",
        op!(x23(), slice / try_slice(1, 3, 3, 1)),
        empty(F32, &[2, 0]),
    );
    c.check(
        "narrow: a start of 2^62",
        op!(zeros(&[4]), narrow / try_narrow(0, 1 << 62, 1)),
        error(
            InvalidShape,
            &["narrow", "shape [4]", "argument [0, 4611686018427387904, 1]"],
        ),
    );
    c.check(
        "narrow: a start of usize::MAX",
        op!(zeros(&[4]), narrow / try_narrow(0, usize::MAX, 2)),
        error(
            InvalidShape,
            &["narrow", "shape [4]", "argument [0, 9223372036854775807, 2]"],
        ),
    );
    c.check(
        "narrow: past the end of the axis",
        op!(x23(), narrow / try_narrow(1, 2, 2)),
        error(
            InvalidShape,
            &["narrow", "end <= 3", "shape [2, 3]", "argument [1, 2, 2]"],
        ),
    );
    c.check(
        "narrow: along -1",
        op!(x23(), narrow / try_narrow(-1, 1, 2)),
        floats(F32, &[2, 2], &[2.0, 3.0, 5.0, 6.0]),
    );
    c.check(
        "narrow: the last 2 of 2^60 - 1 zeros",
        op!(
            Tensor::full(&[MAX_NUMEL], 7i64),
            narrow / try_narrow(0, MAX_NUMEL - 2, 2)
        ),
        ints(I64, &[2], &[7, 7]),
    );
    c.check(
        "narrow: the end of a 2^40-wide expand of data",
        both(
            || {
                f32s(&[1.0, 2.0], &[2, 1])
                    .try_expand(&[2, HUGE])?
                    .try_narrow(1, HUGE - 2, 2)
            },
            || f32s(&[1.0, 2.0], &[2, 1]).expand(&[2, HUGE]).narrow(1, HUGE - 2, 2),
        ),
        floats(F32, &[2, 2], &[1.0, 1.0, 2.0, 2.0]),
    );
    c.check(
        "squeeze: an axis of length 3",
        op!(x23(), squeeze / try_squeeze(1)),
        error(
            InvalidShape,
            &["squeeze", "axis 1 has length 3, not 1", "shape [2, 3]", "argument [1]"],
        ),
    );
    c.check(
        "squeeze: an axis out of range",
        op!(x23(), squeeze / try_squeeze(2)),
        error(AxisOutOfRange, &["squeeze", "axis 2", "shape [2, 3]"]),
    );
    c.check(
        "squeeze: a scalar",
        op!(Tensor::scalar(1.0f32), squeeze / try_squeeze(0)),
        error(AxisOutOfRange, &["squeeze", "shape []"]),
    );
    c.check(
        "squeeze: an empty axis",
        op!(zeros(&[2, 0]), squeeze / try_squeeze(1)),
        error(InvalidShape, &["squeeze", "axis 1 has length 0", "shape [2, 0]"]),
    );
    c.check(
        "squeeze: axis -1 of [2, 1]",
        op!(f32s(&[1.0, 2.0], &[2, 1]), squeeze / try_squeeze(-1)),
        floats(F32, &[2], &[1.0, 2.0]),
    );
    c.check(
        "unsqueeze: past the insertion points",
        op!(x23(), unsqueeze / try_unsqueeze(4)),
        error(AxisOutOfRange, &["unsqueeze", "axis 4", "shape [2, 3]"]),
    );
    c.check(
        "unsqueeze: -4 of a matrix",
        op!(x23(), unsqueeze / try_unsqueeze(-4)),
        error(AxisOutOfRange, &["unsqueeze", "axis -4", "shape [2, 3]"]),
    );
    c.check(
        "unsqueeze: a rank-6 tensor",
        op!(six(), unsqueeze / try_unsqueeze(0)),
        error(RankTooLarge, &["unsqueeze", "[1, 1, 2, 1, 3, 1, 2]"]),
    );
    c.check(
        "unsqueeze: at the rank appends",
        op!(x23(), unsqueeze / try_unsqueeze(2)),
        floats(F32, &[2, 3, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    c.check(
        "unsqueeze: -1 appends",
        op!(x23(), unsqueeze / try_unsqueeze(-1)),
        floats(F32, &[2, 3, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    c.check(
        "unsqueeze: a scalar",
        op!(Tensor::scalar(2u8), unsqueeze / try_unsqueeze(0)),
        ints(U8, &[1], &[2]),
    );

    c.check(
        "broadcast_to: to a scalar",
        op!(f32s(&[1.0], &[1]), broadcast_to / try_broadcast_to(&[])),
        error(ShapeMismatch, &["broadcast_to", "[1] and []"]),
    );
    c.check(
        "slice: a step of isize::MAX keeps the first",
        op!(x23(), slice / try_slice(1, 0, 3, isize::MAX)),
        floats(F32, &[2, 1], &[1.0, 4.0]),
    );
    c.check(
        "narrow: no elements at the end",
        op!(x23(), narrow / try_narrow(1, 3, 0)),
        empty(F32, &[2, 0]),
    );
    c.check(
        "narrow: the last row of a transposed 2^40-wide expand",
        both(
            || {
                f32s(&[1.0, 2.0], &[2, 1])
                    .try_expand(&[2, HUGE])?
                    .try_transpose(0, 1)?
                    .try_narrow(0, HUGE - 1, 1)
            },
            || {
                f32s(&[1.0, 2.0], &[2, 1])
                    .expand(&[2, HUGE])
                    .transpose(0, 1)
                    .narrow(0, HUGE - 1, 1)
            },
        ),
        floats(F32, &[1, 2], &[1.0, 2.0]),
    );
}

/// Reductions: axes, empty inputs, NaN, integer accumulation, statistics.
fn reductions(c: &mut Catalogue) {
    c.check(
        "sum: axis 2 of a matrix",
        op!(x23(), sum / try_sum(&[2], true)),
        error(AxisOutOfRange, &["sum", "axis 2 is out of range for shape [2, 3]"]),
    );
    c.check(
        "sum: axis -3 of a matrix",
        op!(x23(), sum / try_sum(&[-3], false)),
        error(AxisOutOfRange, &["sum", "axis -3", "[2, 3]"]),
    );
    c.check(
        "sum: axis 0 of a scalar",
        op!(Tensor::scalar(1.0f32), sum / try_sum(&[0], false)),
        error(AxisOutOfRange, &["sum", "axis 0", "shape []"]),
    );
    c.check(
        "prod: axes 1 and -1 are one axis twice",
        op!(x23(), prod / try_prod(&[1, -1], true)),
        error(
            InvalidShape,
            &["prod", "axis 1 is given twice", "shape [2, 3]", "argument [1, -1]"],
        ),
    );
    c.check(
        "max: axis 0 twice",
        op!(x23(), max / try_max(&[0, 0], false)),
        error(InvalidShape, &["max", "given twice", "[2, 3]"]),
    );
    c.check(
        "min: axis 3",
        op!(x23(), min / try_min(&[0, 3], false)),
        error(AxisOutOfRange, &["min", "axis 3", "[2, 3]"]),
    );
    c.check(
        "mean: axis 5",
        op!(x23(), mean / try_mean(&[5], false)),
        error(AxisOutOfRange, &["mean", "axis 5", "[2, 3]"]),
    );
    c.check(
        "var: axes 0 and -2",
        op!(x23(), var / try_var(&[0, -2], false)),
        error(InvalidShape, &["var", "axis 0 is given twice", "[2, 3]"]),
    );
    c.check(
        "argmax: axis 2",
        op!(x23(), argmax / try_argmax(2, false)),
        error(AxisOutOfRange, &["argmax", "axis 2", "[2, 3]"]),
    );
    c.check(
        "argmin: axis -3",
        op!(x23(), argmin / try_argmin(-3, true)),
        error(AxisOutOfRange, &["argmin", "axis -3", "[2, 3]"]),
    );
    c.check(
        "max: over an empty axis",
        op!(zeros(&[2, 0]), max / try_max(&[1], true)),
        error(
            InvalidShape,
            &["max", "axis 1 is empty, so there is nothing to select", "shape [2, 0]"],
        ),
    );
    c.check(
        "min_all: of nothing",
        op!(zeros(&[0]), min_all / try_min_all()),
        error(InvalidShape, &["min", "axis 0 is empty", "shape [0]"]),
    );
    c.check(
        "argmax: over an empty axis",
        op!(i32s(&[], &[3, 0]), argmax / try_argmax(-1, false)),
        error(InvalidShape, &["argmax", "axis 1 is empty", "shape [3, 0]"]),
    );
    c.check(
        "argmin: over an empty axis",
        op!(zeros(&[0, 2]), argmin / try_argmin(0, true)),
        error(InvalidShape, &["argmin", "axis 0 is empty", "shape [0, 2]"]),
    );
    c.check(
        "max: over the full axis of [2, 0]",
        op!(zeros(&[2, 0]), max / try_max(&[0], false)),
        empty(F32, &[0]),
    );
    c.check(
        "sum: of nothing is 0",
        op!(zeros(&[0]), sum_all / try_sum_all()),
        floats(F32, &[], &[0.0]),
    );
    c.check(
        "sum: of empty rows is 0",
        op!(zeros(&[2, 0]), sum / try_sum(&[1], false)),
        floats(F32, &[2], &[0.0, 0.0]),
    );
    c.check(
        "prod: of nothing is 1",
        op!(f64s(&[], &[0]), prod_all / try_prod_all()),
        floats(F64, &[], &[1.0]),
    );
    c.check(
        "sum: of no i32 is an i64 0",
        op!(i32s(&[], &[0, 4]), sum / try_sum(&[0], false)),
        ints(I64, &[4], &[0, 0, 0, 0]),
    );
    c.check(
        "prod: of no u8 is an i64 1",
        op!(u8s(&[], &[0]), prod_all / try_prod_all()),
        ints(I64, &[], &[1]),
    );
    c.check(
        "mean: of nothing is NaN",
        op!(zeros(&[0]), mean_all / try_mean_all()),
        floats(F32, &[], &[f64::NAN]),
    );
    c.check(
        "mean: of empty rows is NaN",
        op!(zeros(&[2, 0]), mean / try_mean(&[1], true)),
        floats(F32, &[2, 1], &[f64::NAN, f64::NAN]),
    );
    c.check(
        "sum: over no axes changes nothing",
        op!(x23(), sum / try_sum(&[], false)),
        floats(F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    c.check(
        "sum: over -1 with keepdim",
        op!(x23(), sum / try_sum(&[-1], true)),
        floats(F32, &[2, 1], &[6.0, 15.0]),
    );
    c.check(
        "prod: over axis 0",
        op!(x23(), prod / try_prod(&[0], false)),
        floats(F32, &[3], &[4.0, 10.0, 18.0]),
    );
    c.check(
        "sum_all: of a scalar is the scalar",
        op!(Tensor::scalar(2.5f32), sum_all / try_sum_all()),
        floats(F32, &[], &[2.5]),
    );
    c.check(
        "sum: of i32::MAX and 1 does not overflow (i64)",
        op!(i32s(&[i32::MAX, 1], &[2]), sum_all / try_sum_all()),
        ints(I64, &[], &[2_147_483_648]),
    );
    c.check(
        "sum: of i64::MAX and 1 wraps",
        op!(i64s(&[i64::MAX, 1], &[2]), sum_all / try_sum_all()),
        ints(I64, &[], &[i64::MIN as i128]),
    );
    c.check(
        "prod: of u8 16 and 16 is an i64 256",
        op!(u8s(&[16, 16], &[2]), prod_all / try_prod_all()),
        ints(I64, &[], &[256]),
    );
    c.check(
        "sum: of bools counts them (i64)",
        op!(bools_of(&[true, true, false], &[3]), sum_all / try_sum_all()),
        ints(I64, &[], &[2]),
    );
    c.check(
        "sum: of two f16 65504 overflows to inf",
        op!(f16s(&[65504.0, 65504.0], &[2]), sum_all / try_sum_all()),
        floats(F16, &[], &[f64::INFINITY]),
    );
    c.check(
        "sum: of 300 bf16 ones is exactly 300",
        op!(bf16s(&[1.0; 300], &[300]), sum_all / try_sum_all()),
        floats(BF16, &[], &[300.0]),
    );
    c.check(
        "max: NaN wins",
        op!(f32s(&[1.0, f32::NAN, 3.0], &[3]), max_all / try_max_all()),
        floats(F32, &[], &[f64::NAN]),
    );
    c.check(
        "min: NaN wins",
        op!(f32s(&[1.0, 3.0, f32::NAN], &[3]), min / try_min(&[0], true)),
        floats(F32, &[1], &[f64::NAN]),
    );
    c.check(
        "max: of -inf is -inf",
        op!(f32s(&[f32::NEG_INFINITY; 2], &[2]), max_all / try_max_all()),
        floats(F32, &[], &[f64::NEG_INFINITY]),
    );
    c.check(
        "max: of bools",
        op!(bools_of(&[false, true], &[2]), max_all / try_max_all()),
        bools(&[], &[true]),
    );
    c.check(
        "min: of i32::MIN keeps i32",
        op!(i32s(&[5, i32::MIN], &[2]), min_all / try_min_all()),
        ints(I32, &[], &[i32::MIN as i128]),
    );
    c.check(
        "argmax: the first NaN is the maximum",
        op!(
            f32s(&[1.0, f32::NAN, 3.0, f32::NAN], &[4]),
            argmax / try_argmax(0, false)
        ),
        ints(I64, &[], &[1]),
    );
    c.check(
        "argmin: the first NaN is the minimum",
        op!(
            f32s(&[1.0, -3.0, f32::NAN, f32::NAN], &[4]),
            argmin / try_argmin(-1, true)
        ),
        ints(I64, &[1], &[2]),
    );
    c.check(
        "argmax: ties give the first",
        op!(i32s(&[3, 1, 3], &[3]), argmax / try_argmax(0, false)),
        ints(I64, &[], &[0]),
    );
    c.check(
        "argmax_all: the row-major index",
        op!(x23(), argmax_all / try_argmax_all()),
        ints(I64, &[], &[5]),
    );
    c.check(
        "argmin: along rows",
        op!(
            f32s(&[3.0, 1.0, 2.0, 0.0, 5.0, -1.0], &[2, 3]),
            argmin / try_argmin(1, false)
        ),
        ints(I64, &[2], &[1, 2]),
    );
    c.check(
        "mean: of i32",
        op!(i32s(&[1; 6], &[2, 3]), mean / try_mean(&[1], false)),
        error(NeedsFloat, &["mean", "dtype i32", "shape [2, 3]", "cast first"]),
    );
    c.check(
        "mean_all: of i64",
        op!(i64s(&[1, 2], &[2]), mean_all / try_mean_all()),
        error(NeedsFloat, &["mean", "dtype i64", "shape [2]"]),
    );
    c.check(
        "mean: of bools",
        op!(bools_of(&[true], &[1]), mean / try_mean(&[0], true)),
        error(NeedsFloat, &["mean", "dtype bool", "shape [1]"]),
    );
    c.check(
        "var: of u8",
        op!(u8s(&[1, 2, 3, 4], &[4]), var_all / try_var_all()),
        error(NeedsFloat, &["var", "dtype u8", "shape [4]"]),
    );
    c.check(
        "var_with_correction: of u32",
        op!(
            u8s(&[1, 2], &[2]).cast(U32),
            var_with_correction / try_var_with_correction(&[0], false, 0)
        ),
        error(NeedsFloat, &["var", "dtype u32", "shape [2]"]),
    );
    c.check(
        "mean: of an integer is refused before its axis is checked",
        op!(i32s(&[1], &[1]), mean / try_mean(&[3], false)),
        error(NeedsFloat, &["mean", "dtype i32", "shape [1]"]),
    );
    c.check(
        "var: of one element (correction 1) is NaN",
        op!(f32s(&[5.0], &[1]), var_all / try_var_all()),
        floats(F32, &[], &[f64::NAN]),
    );
    c.check(
        "var_with_correction: n == correction gives inf",
        op!(
            f32s(&[1.0, 2.0], &[2]),
            var_with_correction / try_var_with_correction(&[0], false, 2)
        ),
        floats(F32, &[], &[f64::INFINITY]),
    );
    c.check(
        "var_with_correction: correction above n gives inf",
        op!(
            f64s(&[1.0, 2.0], &[2]),
            var_with_correction / try_var_with_correction(&[0], true, 5)
        ),
        floats(F64, &[1], &[f64::INFINITY]),
    );
    c.check(
        "var: of nothing is NaN",
        op!(zeros(&[0]), var_all / try_var_all()),
        floats(F32, &[], &[f64::NAN]),
    );
    c.check(
        "var: unbiased, along rows",
        op!(x23(), var / try_var(&[1], false)),
        near(F32, &[2], &[1.0, 1.0], 1e-6),
    );
    c.check(
        "var_with_correction: 0 is the population variance",
        op!(x23(), var_with_correction / try_var_with_correction(&[-1], true, 0)),
        near(F32, &[2, 1], &[2.0 / 3.0, 2.0 / 3.0], 1e-6),
    );
    c.check(
        "mean: of a scalar over no axes is the scalar",
        op!(Tensor::scalar(2.5f64), mean / try_mean(&[], false)),
        floats(F64, &[], &[2.5]),
    );
    c.check(
        "mean: of 300 bf16 ones is exactly 1",
        op!(bf16s(&[1.0; 300], &[300]), mean_all / try_mean_all()),
        floats(BF16, &[], &[1.0]),
    );
    c.check(
        "mean: of 300 f16 ones is exactly 1",
        op!(f16s(&[1.0; 300], &[300]), mean / try_mean(&[0], false)),
        floats(F16, &[], &[1.0]),
    );
    c.check(
        "var: of 300 bf16 ones is exactly 0",
        op!(bf16s(&[1.0; 300], &[300]), var_all / try_var_all()),
        floats(BF16, &[], &[0.0]),
    );
    c.check(
        "mean: of bf16 rows of threes is exactly 3",
        op!(bf16s(&[3.0; 600], &[2, 300]), mean / try_mean(&[1], true)),
        floats(BF16, &[2, 1], &[3.0, 3.0]),
    );
    c.check(
        "var: of f16 0.1, 0.2, 0.3, 0.4 within 2 ulps",
        op!(f16s(&[0.1, 0.2, 0.3, 0.4], &[4]), var_all / try_var_all()),
        {
            let x: Vec<f64> = [0.1, 0.2, 0.3, 0.4]
                .iter()
                .map(|&v| f16::from_f64(v).to_f64())
                .collect();
            let m = x.iter().sum::<f64>() / 4.0;
            let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 3.0;
            ulps(F16, &[], &[v], 2.0)
        },
    );

    c.check(
        "argmax_all: of a scalar is 0",
        op!(Tensor::scalar(1.0f32), argmax_all / try_argmax_all()),
        ints(I64, &[], &[0]),
    );
    c.check(
        "argmin_all: ties give the first",
        op!(i64s(&[2, 1, 1], &[3]), argmin_all / try_argmin_all()),
        ints(I64, &[], &[1]),
    );
    c.check(
        "argmax: of u8 255",
        op!(u8s(&[1, 255, 3], &[3]), argmax / try_argmax(0, false)),
        ints(I64, &[], &[1]),
    );
    c.check(
        "max: of i64 extremes, keepdim",
        op!(i64s(&[i64::MIN, i64::MAX], &[2]), max / try_max(&[0], true)),
        ints(I64, &[1], &[i64::MAX as i128]),
    );
    c.check(
        "max: of u32::MAX keeps u32",
        op!(Tensor::from_vec(vec![u32::MAX, 1], &[2]), max_all / try_max_all()),
        ints(U32, &[], &[4_294_967_295]),
    );
    c.check(
        "min: of u8 keeps u8",
        op!(u8s(&[200, 255, 3], &[3]), min_all / try_min_all()),
        ints(U8, &[], &[3]),
    );
    c.check(
        "max: of -0.0 and 0.0 is a zero",
        op!(f32s(&[-0.0, 0.0], &[2]), max_all / try_max_all()),
        floats(F32, &[], &[0.0]),
    );
    c.check(
        "sum: of two u32::MAX is an i64",
        op!(
            Tensor::from_vec(vec![u32::MAX, u32::MAX], &[2]),
            sum_all / try_sum_all()
        ),
        ints(I64, &[], &[8_589_934_590]),
    );
    c.check(
        "sum: of 300 u8 255 is an i64",
        op!(u8s(&[255; 300], &[300]), sum_all / try_sum_all()),
        ints(I64, &[], &[76_500]),
    );
    c.check(
        "sum: of 300 trues is 300",
        op!(bools_of(&[true; 300], &[300]), sum_all / try_sum_all()),
        ints(I64, &[], &[300]),
    );
    c.check(
        "prod: of i64 2^62 and 4 wraps to 0",
        op!(i64s(&[1 << 62, 4], &[2]), prod_all / try_prod_all()),
        ints(I64, &[], &[0]),
    );
    c.check(
        "prod: of f16 300 and 300 overflows to inf",
        op!(f16s(&[300.0, 300.0], &[2]), prod_all / try_prod_all()),
        floats(F16, &[], &[f64::INFINITY]),
    );
    c.check(
        "sum: over three axes of a rank-6 tensor",
        op!(Tensor::ones(&[2, 1, 2, 1, 2, 1], F32), sum / try_sum(&[0, 2, 4], false)),
        floats(F32, &[1, 1, 1], &[8.0]),
    );
    c.check(
        "sum: over -1 and -2 is everything",
        op!(x23(), sum / try_sum(&[-1, -2], false)),
        floats(F32, &[], &[21.0]),
    );
    c.check(
        "sum: of a transposed view",
        both(
            || x23().try_transpose(0, 1)?.try_sum(&[1], false),
            || x23().transpose(0, 1).sum(&[1], false),
        ),
        floats(F32, &[3], &[5.0, 7.0, 9.0]),
    );
    c.check(
        "sum: of a strided slice",
        both(
            || x23().try_slice(1, 0, 3, 2)?.try_sum(&[0], false),
            || x23().slice(1, 0, 3, 2).sum(&[0], false),
        ),
        floats(F32, &[2], &[5.0, 9.0]),
    );
    c.check(
        "sum: of an expanded axis",
        both(
            || f32s(&[1.0, 2.0], &[2, 1]).try_expand(&[2, 5])?.try_sum(&[1], false),
            || f32s(&[1.0, 2.0], &[2, 1]).expand(&[2, 5]).sum(&[1], false),
        ),
        floats(F32, &[2], &[5.0, 10.0]),
    );
    c.check(
        "sum: of an axis expanded to 0",
        both(
            || f32s(&[1.0, 2.0], &[2, 1]).try_expand(&[2, 0])?.try_sum(&[1], false),
            || f32s(&[1.0, 2.0], &[2, 1]).expand(&[2, 0]).sum(&[1], false),
        ),
        floats(F32, &[2], &[0.0, 0.0]),
    );
    c.check(
        "mean: of columns, keepdim",
        op!(x23(), mean / try_mean(&[0], true)),
        floats(F32, &[1, 3], &[2.5, 3.5, 4.5]),
    );
    c.check(
        "mean: the sum of two 1e308 overflows first (the sum times 1 / n)",
        op!(f64s(&[1e308, 1e308], &[2]), mean_all / try_mean_all()),
        floats(F64, &[], &[f64::INFINITY]),
    );
    c.check(
        "mean: of two f16 60000 is 60000 (an f32 sum)",
        op!(f16s(&[60000.0; 2], &[2]), mean_all / try_mean_all()),
        floats(F16, &[], &[60000.0]),
    );
    c.check(
        "var: of two f16 60000 is 0",
        op!(f16s(&[60000.0; 2], &[2]), var_all / try_var_all()),
        floats(F16, &[], &[0.0]),
    );
    c.check(
        "sum: of two f16 60000 rounds to inf",
        op!(f16s(&[60000.0; 2], &[2]), sum_all / try_sum_all()),
        floats(F16, &[], &[f64::INFINITY]),
    );
    c.check(
        "var: of values far from zero",
        op!(f32s(&[10001.0, 10002.0, 10003.0], &[3]), var_all / try_var_all()),
        near(F32, &[], &[1.0], 1e-6),
    );
}

/// `softmax`, `log_softmax`, `logsumexp`, `layer_norm`, `rms_norm`.
fn compositions(c: &mut Catalogue) {
    let w = |n: usize| f32s(&vec![1.0; n], &[n]);
    c.check(
        "softmax: axis 2 of a matrix",
        op!(x23(), softmax / try_softmax(2)),
        error(AxisOutOfRange, &["softmax", "axis 2 is out of range for shape [2, 3]"]),
    );
    c.check(
        "softmax: axis -3 of a matrix",
        op!(x23(), softmax / try_softmax(-3)),
        error(AxisOutOfRange, &["softmax", "axis -3", "[2, 3]"]),
    );
    c.check(
        "log_softmax: axis 5",
        op!(x23(), log_softmax / try_log_softmax(5)),
        error(AxisOutOfRange, &["log_softmax", "axis 5", "[2, 3]"]),
    );
    c.check(
        "logsumexp: axis 2",
        op!(x23(), logsumexp / try_logsumexp(&[2], true)),
        error(AxisOutOfRange, &["logsumexp", "axis 2", "[2, 3]"]),
    );
    c.check(
        "logsumexp: an axis twice",
        op!(x23(), logsumexp / try_logsumexp(&[1, -1], false)),
        error(InvalidShape, &["logsumexp", "axis 1 is given twice", "shape [2, 3]"]),
    );
    c.check(
        "softmax: of i32",
        op!(i32s(&[1, 2], &[2]), softmax / try_softmax(0)),
        error(NeedsFloat, &["softmax", "dtype i32", "shape [2]"]),
    );
    c.check(
        "log_softmax: of bools",
        op!(bools_of(&[true; 6], &[2, 3]), log_softmax / try_log_softmax(0)),
        error(NeedsFloat, &["log_softmax", "dtype bool", "shape [2, 3]"]),
    );
    c.check(
        "logsumexp: of u8",
        op!(u8s(&[1, 2], &[2]), logsumexp / try_logsumexp(&[0], false)),
        error(NeedsFloat, &["logsumexp", "dtype u8", "shape [2]"]),
    );
    c.check(
        "layer_norm: of i32",
        op!(i32s(&[1; 6], &[2, 3]), layer_norm / try_layer_norm(None, None, 1e-5)),
        error(NeedsFloat, &["layer_norm", "dtype i32", "shape [2, 3]"]),
    );
    c.check(
        "rms_norm: of i64",
        op!(i64s(&[1, 2], &[1, 2]), rms_norm / try_rms_norm(None, 1e-6)),
        error(NeedsFloat, &["rms_norm", "dtype i64", "shape [1, 2]"]),
    );
    c.check(
        "layer_norm: a weight of the wrong length",
        op!(x23(), layer_norm / try_layer_norm(Some(&w(2)), None, 1e-5)),
        error(
            InvalidShape,
            &[
                "layer_norm",
                "the weight must have shape [3]",
                "shape [2, 3]",
                "argument [2]",
            ],
        ),
    );
    c.check(
        "layer_norm: a weight that broadcasts is still not [n]",
        op!(x23(), layer_norm / try_layer_norm(Some(&zeros(&[1, 3])), None, 1e-5)),
        error(
            InvalidShape,
            &[
                "layer_norm",
                "the weight must have shape [3]",
                "shape [2, 3]",
                "argument [1, 3]",
            ],
        ),
    );
    c.check(
        "layer_norm: a bias of the input's shape",
        op!(
            x23(),
            layer_norm / try_layer_norm(Some(&w(3)), Some(&zeros(&[2, 3])), 1e-5)
        ),
        error(
            InvalidShape,
            &[
                "layer_norm",
                "the bias must have shape [3]",
                "shape [2, 3]",
                "argument [2, 3]",
            ],
        ),
    );
    c.check(
        "layer_norm: a scalar bias",
        op!(
            x23(),
            layer_norm / try_layer_norm(None, Some(&Tensor::scalar(0.0f32)), 1e-5)
        ),
        error(
            InvalidShape,
            &["layer_norm", "the bias must have shape [3]", "argument []"],
        ),
    );
    c.check(
        "rms_norm: a weight of the wrong length",
        op!(x23(), rms_norm / try_rms_norm(Some(&w(4)), 1e-6)),
        error(
            InvalidShape,
            &[
                "rms_norm",
                "the weight must have shape [3]",
                "shape [2, 3]",
                "argument [4]",
            ],
        ),
    );
    c.check(
        "layer_norm: an integer input with a bad weight reports the weight",
        op!(
            i32s(&[1; 6], &[2, 3]),
            layer_norm / try_layer_norm(Some(&w(2)), None, 1e-5)
        ),
        error(
            InvalidShape,
            &["layer_norm", "the weight must have shape [3]", "shape [2, 3]"],
        ),
    );
    c.check(
        "layer_norm: of a scalar",
        op!(Tensor::scalar(1.0f32), layer_norm / try_layer_norm(None, None, 1e-5)),
        error(AxisOutOfRange, &["layer_norm", "axis -1 is out of range for shape []"]),
    );
    c.check(
        "rms_norm: of a scalar",
        op!(Tensor::scalar(1.0f32), rms_norm / try_rms_norm(None, 1e-6)),
        error(AxisOutOfRange, &["rms_norm", "axis -1", "shape []"]),
    );
    c.check(
        "layer_norm: a weight on CUDA",
        op!(x23(), layer_norm / try_layer_norm(Some(&gpu(w(3))), None, 1e-5)),
        error(DeviceMismatch, &["layer_norm", "(cpu and cuda:0)"]),
    );
    c.check(
        "layer_norm: an input on CUDA and a bias on the CPU",
        op!(gpu(x23()), layer_norm / try_layer_norm(None, Some(&w(3)), 1e-5)),
        error(DeviceMismatch, &["layer_norm", "(cuda:0 and cpu)"]),
    );
    c.check(
        "rms_norm: a weight on CUDA",
        op!(x23(), rms_norm / try_rms_norm(Some(&gpu(w(3))), 1e-6)),
        error(DeviceMismatch, &["rms_norm", "(cpu and cuda:0)"]),
    );
    c.check(
        "softmax: of a half input is checked as its own shape",
        op!(f16s(&[1.0; 6], &[2, 3]), softmax / try_softmax(2)),
        error(AxisOutOfRange, &["softmax", "axis 2", "[2, 3]"]),
    );
    c.check(
        "softmax: of 1, 2, 3",
        op!(f32s(&[1.0, 2.0, 3.0], &[3]), softmax / try_softmax(0)),
        near(F32, &[3], &softmax_ref(&[1.0, 2.0, 3.0]), 1e-6),
    );
    c.check(
        "softmax: along an empty axis is empty",
        op!(zeros(&[2, 0]), softmax / try_softmax(1)),
        empty(F32, &[2, 0]),
    );
    c.check(
        "softmax: -inf gets 0",
        op!(f32s(&[f32::NEG_INFINITY, 0.0], &[2]), softmax / try_softmax(0)),
        floats(F32, &[2], &[0.0, 1.0]),
    );
    c.check(
        "softmax: of all -inf is NaN",
        op!(f32s(&[f32::NEG_INFINITY; 2], &[2]), softmax / try_softmax(-1)),
        floats(F32, &[2], &[f64::NAN, f64::NAN]),
    );
    c.check(
        "softmax: large inputs do not overflow",
        op!(
            f32s(&[1000.0, 1000.0, 1000.0, 1000.0], &[2, 2]),
            softmax / try_softmax(1)
        ),
        floats(F32, &[2, 2], &[0.5; 4]),
    );
    c.check(
        "log_softmax: of 1, 2, 3",
        op!(f32s(&[1.0, 2.0, 3.0], &[3]), log_softmax / try_log_softmax(-1)),
        near(F32, &[3], &log_softmax_ref(&[1.0, 2.0, 3.0]), 1e-6),
    );
    c.check(
        "logsumexp: over an empty axis is -inf",
        op!(zeros(&[2, 0]), logsumexp / try_logsumexp(&[1], false)),
        floats(F32, &[2], &[f64::NEG_INFINITY; 2]),
    );
    c.check(
        "logsumexp: of +inf is +inf",
        op!(
            f32s(&[f32::INFINITY, 0.0], &[2]),
            logsumexp / try_logsumexp(&[0], false)
        ),
        floats(F32, &[], &[f64::INFINITY]),
    );
    c.check(
        "logsumexp: of all -inf is -inf",
        op!(
            f32s(&[f32::NEG_INFINITY; 2], &[2]),
            logsumexp / try_logsumexp(&[0], true)
        ),
        floats(F32, &[1], &[f64::NEG_INFINITY]),
    );
    c.check(
        "logsumexp: NaN propagates",
        op!(f32s(&[f32::NAN, 1.0], &[2]), logsumexp / try_logsumexp(&[0], false)),
        floats(F32, &[], &[f64::NAN]),
    );
    c.check(
        "logsumexp: of 1000, 1000 does not overflow",
        op!(f32s(&[1000.0, 1000.0], &[2]), logsumexp / try_logsumexp(&[-1], false)),
        near(F32, &[], &[1000.0 + std::f64::consts::LN_2], 1e-6),
    );
    c.check(
        "layer_norm: of 1, 2, 3 with eps 1e-5",
        op!(
            f32s(&[1.0, 2.0, 3.0], &[3]),
            layer_norm / try_layer_norm(None, None, 1e-5)
        ),
        near(
            F32,
            &[3],
            &layer_norm_ref(&[1.0, 2.0, 3.0], &[1.0; 3], &[0.0; 3], 1e-5),
            1e-6,
        ),
    );
    c.check(
        "layer_norm: of a constant row is the bias",
        op!(
            Tensor::full(&[2, 3], 3.0f32),
            layer_norm / try_layer_norm(Some(&w(3)), Some(&Tensor::full(&[3], 0.5f32)), 1e-5)
        ),
        floats(F32, &[2, 3], &[0.5; 6]),
    );
    c.check(
        "rms_norm: of 3, 4 with eps 0",
        op!(f32s(&[3.0, 4.0], &[1, 2]), rms_norm / try_rms_norm(None, 0.0)),
        near(F32, &[1, 2], &rms_norm_ref(&[3.0, 4.0], 0.0), 1e-6),
    );
    c.check(
        "rms_norm: of an empty batch is empty",
        op!(zeros(&[0, 3]), rms_norm / try_rms_norm(Some(&w(3)), 1e-6)),
        empty(F32, &[0, 3]),
    );
    let h = [1.0, 2.0, 3.0];
    c.check(
        "softmax: of f16 1, 2, 3 within 2 ulps",
        op!(f16s(&h, &[3]), softmax / try_softmax(0)),
        ulps(F16, &[3], &softmax_ref(&h), 2.0),
    );
    c.check(
        "log_softmax: of bf16 1, 2, 3 within 2 ulps",
        op!(bf16s(&h, &[1, 3]), log_softmax / try_log_softmax(1)),
        ulps(BF16, &[1, 3], &log_softmax_ref(&h), 2.0),
    );
    c.check(
        "logsumexp: of four f16 zeros within 2 ulps",
        op!(f16s(&[0.0; 4], &[4]), logsumexp / try_logsumexp(&[0], false)),
        ulps(F16, &[], &[4f64.ln()], 2.0),
    );
    let row = [1.0, 2.0, 3.0, 4.0];
    let (wt, bs) = ([1.0, 2.0, 0.5, 1.0], [0.0, 0.25, -0.5, 1.0]);
    c.check(
        "layer_norm: of bf16 with a bf16 weight and bias within 2 ulps",
        op!(
            bf16s(&row, &[1, 4]),
            layer_norm / try_layer_norm(Some(&bf16s(&wt, &[4])), Some(&bf16s(&bs, &[4])), 1e-5)
        ),
        ulps(BF16, &[1, 4], &layer_norm_ref(&row, &wt, &bs, 1e-5), 2.0),
    );
    c.check(
        "rms_norm: of f16 1, 2, 3 within 2 ulps",
        op!(f16s(&h, &[3]), rms_norm / try_rms_norm(None, 1e-6)),
        ulps(F16, &[3], &rms_norm_ref(&h, 1e-6), 2.0),
    );
    c.check(
        "layer_norm: of f16 with an f32 weight is f32",
        op!(f16s(&row, &[4]), layer_norm / try_layer_norm(Some(&w(4)), None, 1e-5)),
        near(F32, &[4], &layer_norm_ref(&row, &[1.0; 4], &[0.0; 4], 1e-5), 1e-6),
    );

    c.check(
        "softmax: along an axis of length 1 is 1",
        op!(f32s(&[5.0, -3.0], &[2, 1]), softmax / try_softmax(1)),
        floats(F32, &[2, 1], &[1.0, 1.0]),
    );
    c.check(
        "log_softmax: along an axis of length 1 is 0",
        op!(f32s(&[5.0, -3.0], &[2, 1]), log_softmax / try_log_softmax(-1)),
        floats(F32, &[2, 1], &[0.0, 0.0]),
    );
    c.check(
        "logsumexp: over no axes is the input",
        op!(f32s(&[1.0, 2.0], &[2]), logsumexp / try_logsumexp(&[], false)),
        floats(F32, &[2], &[1.0, 2.0]),
    );
    c.check(
        "layer_norm: along an axis of length 1 is the bias",
        op!(
            f32s(&[5.0, -3.0], &[2, 1]),
            layer_norm / try_layer_norm(None, Some(&f32s(&[0.5], &[1])), 1e-5)
        ),
        floats(F32, &[2, 1], &[0.5, 0.5]),
    );
    c.check(
        "rms_norm: of zeros with eps 0 is NaN",
        op!(zeros(&[2]), rms_norm / try_rms_norm(None, 0.0)),
        floats(F32, &[2], &[f64::NAN, f64::NAN]),
    );
    c.check(
        "rms_norm: of zeros with eps 1e-6 is 0",
        op!(zeros(&[2]), rms_norm / try_rms_norm(None, 1e-6)),
        floats(F32, &[2], &[0.0, 0.0]),
    );
    c.check(
        "softmax: of f16 60000 and 0",
        op!(f16s(&[60000.0, 0.0], &[2]), softmax / try_softmax(0)),
        floats(F16, &[2], &[1.0, 0.0]),
    );
    c.check(
        "layer_norm: of f16 60000 and -60000 within 2 ulps",
        op!(
            f16s(&[60000.0, -60000.0], &[2]),
            layer_norm / try_layer_norm(None, None, 1e-5)
        ),
        ulps(F16, &[2], &[1.0, -1.0], 2.0),
    );
}

/// `to_vec`, `to_scalar`, `with_slice`, `with_bytes` and `realize`,
/// including tensors larger than memory.
fn reading(c: &mut Catalogue) {
    c.check(
        "to_vec: f64 of an f32 tensor",
        read(|| x23().to_vec::<f64>()),
        error(DTypeMismatch, &["to_vec", "dtypes f32 and f64 differ"]),
    );
    c.check(
        "to_vec: u8 of a comparison's bools",
        read(|| x23().gt(&x23()).to_vec::<u8>()),
        error(DTypeMismatch, &["to_vec", "dtypes bool and u8 differ"]),
    );
    c.check(
        "to_vec: f16 of a bf16 tensor",
        read(|| bf16s(&[1.0], &[1]).to_vec::<f16>()),
        error(DTypeMismatch, &["to_vec", "dtypes bf16 and f16 differ"]),
    );
    c.check(
        "to_vec: i32 of an i32 sum (which is i64)",
        read(|| i32s(&[1, 2], &[2]).sum_all().to_vec::<i32>()),
        error(DTypeMismatch, &["to_vec", "dtypes i64 and i32 differ"]),
    );
    c.check(
        "with_slice: i32 of an i64 tensor",
        read(|| i64s(&[1], &[1]).with_slice(|s: &[i32]| s.to_vec())),
        error(DTypeMismatch, &["with_slice", "dtypes i64 and i32 differ"]),
    );
    c.check(
        "to_scalar: of two elements",
        read_scalar(|| zeros(&[2]).to_scalar::<f32>()),
        error(
            InvalidShape,
            &["to_scalar", "needs exactly one element, not 2", "shape [2]"],
        ),
    );
    c.check(
        "to_scalar: of nothing",
        read_scalar(|| zeros(&[0, 3]).to_scalar::<f32>()),
        error(InvalidShape, &["to_scalar", "not 0", "shape [0, 3]"]),
    );
    c.check(
        "to_scalar: of a [1, 1, 1] tensor",
        read_scalar(|| f32s(&[7.5], &[1, 1, 1]).to_scalar::<f32>()),
        floats(F32, &[], &[7.5]),
    );
    c.check(
        "to_vec: of an empty tensor",
        read(|| zeros(&[3, 0]).exp().to_vec::<f32>()),
        empty(F32, &[0]),
    );
    c.check(
        "to_vec: of a scalar",
        read(|| Tensor::scalar(-1i32).to_vec::<i32>()),
        ints(I32, &[1], &[-1]),
    );
    c.check(
        "realize: 2^40 lazily defined f32 do not fit in memory",
        realized(|| zeros(&[HUGE]).exp()),
        error(
            HostOutOfMemory,
            &["realize", "4398046511104 bytes", "shape [1099511627776]", "f32"],
        ),
    );
    c.check(
        "with_bytes: 2^40 lazily defined i64 do not fit in memory",
        read(|| Tensor::ones(&[HUGE], I64).neg().with_bytes(|b| b.to_vec())),
        error(
            HostOutOfMemory,
            &["realize", "8796093022208 bytes", "shape [1099511627776]", "i64"],
        ),
    );
    c.check(
        "to_vec: 2^40 lazily defined f32 do not fit in memory (the realization to_vec makes)",
        read(|| (zeros(&[HUGE]) + 1.0f32).to_vec::<f32>()),
        error(
            HostOutOfMemory,
            &["realize", "4398046511104 bytes", "shape [1099511627776]", "f32"],
        ),
    );
    c.check(
        "to_vec: a small tensor still computes right after it",
        read(|| {
            (f32s(&[1.0, -2.0, 3.0, 0.5], &[2, 2]) * 2.0f32 + 1.0f32)
                .sum(&[1], false)
                .to_vec::<f32>()
        }),
        floats(F32, &[2], &[0.0, 9.0]),
    );
    c.check(
        "to_vec: a slice of a tensor larger than memory computes",
        read(|| zeros(&[HUGE]).exp().narrow(0, 5, 3).to_vec::<f32>()),
        floats(F32, &[3], &[1.0, 1.0, 1.0]),
    );
    c.check(
        "add: a reduction of CUDA data and a CPU tensor",
        both(
            || gpu(x23()).try_sum(&[0], false)?.try_add(&x23()),
            || gpu(x23()).sum(&[0], false) + x23(),
        ),
        error(DeviceMismatch, &["add", "(cuda:0 and cpu)"]),
    );
    c.check(
        "with_bytes: bools are one byte each",
        read(|| bools_of(&[true, false], &[2]).with_bytes(|b| b.to_vec())),
        ints(U8, &[2], &[1, 0]),
    );
    c.check(
        "realize_all: tensors on two devices",
        try_only(|| {
            let (a, b) = (x23(), gpu(x23()));
            Tensor::realize_all(&[&a, &b])?;
            Ok(a)
        }),
        error(DeviceMismatch, &["realize_all", "(cpu and cuda:0)"]),
    );
    c.check(
        "realize_all: of no tensors does nothing",
        try_only(|| {
            Tensor::realize_all(&[])?;
            Ok(Tensor::scalar(1u8))
        }),
        ints(U8, &[], &[1]),
    );
}

/// `x * lr` and the other operators with Rust scalars, for several values.
fn scalars(c: &mut Catalogue) {
    let xs = [1.0f32, -2.0, 3.0];
    let lrs = [
        0.0f32,
        1.0,
        -2.5,
        1e-3,
        0.1,
        3e-8,
        1e30,
        f32::MAX,
        f32::INFINITY,
        f32::NAN,
        -0.0,
    ];
    for lr in lrs {
        let want: Vec<f64> = xs.iter().map(|&v| f64::from(v * lr)).collect();
        c.check(
            &format!("mul: [1, -2, 3] * {lr:e}"),
            both(
                move || f32s(&xs, &[3]).try_mul(&Tensor::scalar(lr)),
                move || &f32s(&xs, &[3]) * lr,
            ),
            floats(F32, &[3], &want),
        );
    }
    for lr in [0.1f64, 1e-300, 1e300] {
        // An f64 scalar next to an f32 tensor is rounded to f32 first.
        let want: Vec<f64> = xs.iter().map(|&v| f64::from(v * lr as f32)).collect();
        c.check(
            &format!("mul: f32 [1, -2, 3] * {lr:e}f64"),
            plain(move || &f32s(&xs, &[3]) * lr),
            floats(F32, &[3], &want),
        );
    }
    c.check(
        "mul: an f64 tensor times 0.1 keeps f64",
        plain(|| f64s(&[3.0], &[1]) * 0.1),
        floats(F64, &[1], &[3.0 * 0.1]),
    );
    c.check(
        "mul: i32 times 0.5 is f32",
        plain(|| i32s(&[1, 2, 3], &[3]) * 0.5),
        floats(F32, &[3], &[0.5, 1.0, 1.5]),
    );
    c.check(
        "mul: bools times 3 is i64",
        plain(|| bools_of(&[true, false], &[2]) * 3),
        ints(I64, &[2], &[3, 0]),
    );
    c.check(
        "add: u8 plus 300 wraps the scalar to u8 first",
        plain(|| u8s(&[1, 2], &[2]) + 300),
        ints(U8, &[2], &[45, 46]),
    );
    c.check(
        "mul: i32 times i32::MAX wraps",
        plain(|| i32s(&[2, -1], &[2]) * i32::MAX),
        ints(I32, &[2], &[-2, -(i32::MAX as i128)]),
    );
    c.check(
        "sub: a scalar on the left",
        plain(|| 1.0f32 - f32s(&xs, &[3])),
        floats(F32, &[3], &[0.0, 3.0, -2.0]),
    );
    c.check(
        "div: by a scalar 0 gives infinities",
        plain(|| f32s(&xs, &[3]) / 0.0f32),
        floats(F32, &[3], &[f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY]),
    );
    c.check(
        "div: i32 by a scalar 0 gives 0",
        plain(|| i32s(&[5, -5], &[2]) / 0i32),
        ints(I32, &[2], &[0, 0]),
    );
    c.check(
        "mul: a scalar on the left of a scalar tensor",
        plain(|| 2.0f64 * Tensor::scalar(1.5f64)),
        floats(F64, &[], &[3.0]),
    );
    c.check(
        "bitand: bools with a Rust bool",
        plain(|| bools_of(&[true, false], &[2]) & true),
        bools(&[2], &[true, false]),
    );
    c.check(
        "mul: f16 65504 times 2 rounds to inf",
        plain(|| f16s(&[65504.0], &[1]) * 2.0f32),
        floats(F16, &[1], &[f64::INFINITY]),
    );
    c.check(
        "div: bools by 2 is i64",
        plain(|| bools_of(&[true, false], &[2]) / 2),
        ints(I64, &[2], &[0, 0]),
    );
}

// ---- names and infinities ----

/// Errors under the name of the op the user called (not the op it is
/// written with), out-of-memory messages, and the softmax family's rule for
/// infinite entries.
fn names(c: &mut Catalogue) {
    c.check(
        "from_slice: 7 elements for [2, 3] names from_slice",
        op!(Tensor::from_slice / try_from_slice(&[0u8; 7], &[2, 3])),
        error(LengthMismatch, &["from_slice", "7 elements", "[2, 3]"]),
    );
    c.check(
        "to_scalar: i64 of an f32 scalar names to_scalar",
        read_scalar(|| Tensor::scalar(1.0f32).to_scalar::<i64>()),
        error(DTypeMismatch, &["to_scalar", "dtypes f32 and i64 differ"]),
    );
    c.check(
        "narrow: an axis out of range names narrow",
        op!(x23(), narrow / try_narrow(2, 0, 1)),
        error(AxisOutOfRange, &["narrow", "axis 2", "[2, 3]"]),
    );
    c.check(
        "argmax_all: of an empty [0, 3] names the shape [0, 3]",
        op!(zeros(&[0, 3]), argmax_all / try_argmax_all()),
        error(InvalidShape, &["argmax", "shape [0, 3]"]),
    );
    c.check(
        "argmin_all: of an empty [3, 0] names the shape [3, 0]",
        op!(zeros(&[3, 0]), argmin_all / try_argmin_all()),
        error(InvalidShape, &["argmin", "shape [3, 0]"]),
    );
    // A realization out of memory names the bytes and the shape of the
    // tensor realized.
    c.check(
        "realize: [2^20, 2^20] i64 out of memory names the shape [1048576, 1048576]",
        realized(|| Tensor::ones(&[1 << 20, 1 << 20], I64).neg()),
        error(
            HostOutOfMemory,
            &["realize", "8796093022208 bytes", "shape [1048576, 1048576]"],
        ),
    );
    c.check(
        "to_vec: [2^20, 2^20] i64 out of memory names the shape [1048576, 1048576]",
        read(|| Tensor::ones(&[1 << 20, 1 << 20], I64).neg().to_vec::<i64>()),
        error(HostOutOfMemory, &["realize", "shape [1048576, 1048576]"]),
    );
    // As in PyTorch: a row holding +inf is shifted by +inf, so it is NaN.
    c.check(
        "softmax: of +inf and 0 is NaN everywhere",
        op!(f32s(&[f32::INFINITY, 0.0], &[2]), softmax / try_softmax(0)),
        floats(F32, &[2], &[f64::NAN, f64::NAN]),
    );
    c.check(
        "log_softmax: of +inf and 0 is NaN everywhere",
        op!(f32s(&[f32::INFINITY, 0.0], &[2]), log_softmax / try_log_softmax(0)),
        floats(F32, &[2], &[f64::NAN, f64::NAN]),
    );
    // ---- indexing and scans ----
    c.check(
        "gather: a float index",
        op!(x23(), gather / try_gather(1, &f32s(&[0.0, 1.0], &[2, 1]))),
        error(UnsupportedDType, &["gather", "indices are i64 or i32"]),
    );
    c.check(
        "gather: an index of another rank",
        op!(x23(), gather / try_gather(1, &i64s(&[0, 1], &[2]))),
        error(InvalidShape, &["gather", "[2, 3]", "[2]"]),
    );
    c.check(
        "gather: an index wider than the input off the axis",
        op!(x23(), gather / try_gather(1, &i64s(&[0; 6], &[3, 2]))),
        error(InvalidShape, &["gather", "[2, 3]", "[3, 2]"]),
    );
    c.check(
        "gather: axis 2 of a matrix",
        op!(x23(), gather / try_gather(2, &i64s(&[0, 1], &[2, 1]))),
        error(AxisOutOfRange, &["gather", "[2, 3]"]),
    );
    c.check(
        "gather: a non-empty index into an empty axis",
        op!(zeros(&[2, 0]), gather / try_gather(1, &i64s(&[0, 0], &[2, 1]))),
        error(IndexOutOfRange, &["gather", "0..0", "[2, 0]", "[2, 1]"]),
    );
    c.check(
        "gather: an index past the axis fails the realization",
        read(|| x23().gather(1, &i64s(&[3, 0], &[2, 1])).to_vec::<f32>()),
        error(IndexOutOfRange, &["gather", "axis 1", "0..3", "[2, 3]", "[2, 1]"]),
    );
    c.check(
        "gather: a negative index fails the realization",
        read(|| x23().gather(0, &i32s(&[0, -1, 0], &[1, 3])).to_vec::<f32>()),
        error(IndexOutOfRange, &["gather", "axis 0", "0..2"]),
    );
    c.check(
        "gather: the last index of the axis, by i32",
        op!(x23(), gather / try_gather(1, &i32s(&[2, 0], &[2, 1]))),
        floats(F32, &[2, 1], &[3.0, 4.0]),
    );
    c.check(
        "gather: an empty index",
        op!(x23(), gather / try_gather(1, &i64s(&[], &[2, 0]))),
        empty(F32, &[2, 0]),
    );
    c.check(
        "index_select: a matrix index",
        op!(x23(), index_select / try_index_select(0, &i64s(&[0, 1], &[1, 2]))),
        error(InvalidShape, &["index_select", "[2, 3]", "[1, 2]"]),
    );
    c.check(
        "index_select: a row past the end fails the realization",
        read(|| x23().index_select(0, &i64s(&[1, 2], &[2])).to_vec::<f32>()),
        error(IndexOutOfRange, &["index_select", "axis 0", "0..2", "[2, 3]", "[2, 3]"]),
    );
    c.check(
        "index_select: repeated columns in any order",
        op!(x23(), index_select / try_index_select(-1, &i64s(&[2, 2, 0], &[3]))),
        floats(F32, &[2, 3], &[3.0, 3.0, 1.0, 6.0, 6.0, 4.0]),
    );
    c.check(
        "scatter_add: an index of another shape than the source",
        op!(x23(), scatter_add / try_scatter_add(1, &i64s(&[0, 1], &[2, 1]), &x23())),
        error(InvalidShape, &["scatter_add", "[2, 3]", "[2, 1]"]),
    );
    c.check(
        "scatter_add: a source of another dtype",
        op!(
            x23(),
            scatter_add / try_scatter_add(1, &i64s(&[0; 6], &[2, 3]), &x23().cast(F64))
        ),
        error(DTypeMismatch, &["scatter_add", "f32", "f64"]),
    );
    c.check(
        "scatter_add: into bools",
        op!(
            bools_of(&[true, false], &[2]),
            scatter_add / try_scatter_add(0, &i64s(&[0], &[1]), &bools_of(&[true], &[1]))
        ),
        error(UnsupportedDType, &["scatter_add", "bool"]),
    );
    c.check(
        "scatter_add: axis -3 of a matrix",
        op!(
            x23(),
            scatter_add / try_scatter_add(-3, &i64s(&[0; 6], &[2, 3]), &x23())
        ),
        error(AxisOutOfRange, &["scatter_add", "[2, 3]"]),
    );
    c.check(
        "scatter_add: an index past the axis fails the realization",
        read(|| {
            x23()
                .scatter_add(1, &i64s(&[3, 0], &[2, 1]), &f32s(&[1.0, 1.0], &[2, 1]))
                .to_vec::<f32>()
        }),
        error(IndexOutOfRange, &["scatter_add", "axis 1", "0..3", "[2, 3]", "[2, 1]"]),
    );
    c.check(
        "scatter_add: repeated positions add up, by i32",
        op!(
            x23(),
            scatter_add / try_scatter_add(1, &i32s(&[2, 2], &[1, 2]), &f32s(&[10.0, 20.0], &[1, 2]))
        ),
        floats(F32, &[2, 3], &[1.0, 2.0, 33.0, 4.0, 5.0, 6.0]),
    );
    c.check(
        "scatter_add: u8 wraps",
        op!(
            u8s(&[250], &[1]),
            scatter_add / try_scatter_add(0, &i64s(&[0, 0], &[2]), &u8s(&[3, 4], &[2]))
        ),
        ints(U8, &[1], &[1]),
    );
    c.check(
        "sort: axis 2 of a matrix",
        both(|| x23().try_sort(2, false).map(|s| s.0), || x23().sort(2, false).0),
        error(AxisOutOfRange, &["sort", "[2, 3]"]),
    );
    c.check(
        "sort: NaN last ascending, ties stable",
        both(
            || f32s(&[1.0, f32::NAN, 1.0, -1.0], &[4]).try_sort(0, false).map(|s| s.1),
            || f32s(&[1.0, f32::NAN, 1.0, -1.0], &[4]).sort(0, false).1,
        ),
        ints(I64, &[4], &[3, 0, 2, 1]),
    );
    c.check(
        "sort: an empty axis",
        both(
            || zeros(&[2, 0]).try_sort(1, true).map(|s| s.0),
            || zeros(&[2, 0]).sort(1, true).0,
        ),
        empty(F32, &[2, 0]),
    );
    c.check(
        "topk: k past the axis",
        both(|| x23().try_topk(4, 1).map(|s| s.0), || x23().topk(4, 1).0),
        error(InvalidShape, &["topk", "[2, 3]", "k = 4"]),
    );
    c.check(
        "topk: NaN first, then the largest",
        both(
            || f32s(&[1.0, f32::NAN, 3.0], &[3]).try_topk(2, 0).map(|s| s.0),
            || f32s(&[1.0, f32::NAN, 3.0], &[3]).topk(2, 0).0,
        ),
        floats(F32, &[2], &[f64::NAN, 3.0]),
    );
    c.check(
        "cumsum: axis 2 of a matrix",
        op!(x23(), cumsum / try_cumsum(2)),
        error(AxisOutOfRange, &["cumsum", "[2, 3]"]),
    );
    c.check(
        "cumsum: of a scalar",
        op!(f32s(&[1.0], &[]), cumsum / try_cumsum(0)),
        error(AxisOutOfRange, &["cumsum"]),
    );
    c.check(
        "cumsum: of u8 past 255 sums in i64",
        op!(u8s(&[200, 100, 1], &[3]), cumsum / try_cumsum(0)),
        ints(I64, &[3], &[200, 300, 301]),
    );
    c.check(
        "cumprod: of bools is i64",
        op!(bools_of(&[true, true, false], &[3]), cumprod / try_cumprod(0)),
        ints(I64, &[3], &[1, 1, 0]),
    );
    c.check(
        "cummin: NaN propagates",
        op!(f32s(&[2.0, f32::NAN, 1.0], &[3]), cummin / try_cummin(0)),
        floats(F32, &[3], &[2.0, f64::NAN, f64::NAN]),
    );
    c.check(
        "cumsum: an empty axis",
        op!(zeros(&[2, 0]), cumsum / try_cumsum(1)),
        empty(F32, &[2, 0]),
    );
    c.check(
        "logcumsumexp: of integers",
        op!(i32s(&[1, 2], &[2]), logcumsumexp / try_logcumsumexp(0)),
        error(UnsupportedDType, &["logcumsumexp", "floats"]),
    );
    c.check(
        "logcumsumexp: -inf then a finite value",
        op!(
            f32s(&[f32::NEG_INFINITY, 0.0], &[2]),
            logcumsumexp / try_logcumsumexp(0)
        ),
        floats(F32, &[2], &[f64::NEG_INFINITY, 0.0]),
    );
}
