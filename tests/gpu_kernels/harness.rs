//! The differential harness: one program run on the CPU executor and on the
//! GPU from the same inputs, every written parameter compared under a
//! stated tolerance.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tilefuse::device::cuda::{CudaCompiler, CudaDevice, DeviceBuffer};
use tilefuse::kernels::cpu::{execute, Arg};
use tilefuse::kernels::ir::{Access, Program};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Error, Scalar};

/// Device 0, and a guard that runs the tests of this file one at a time
/// (the large test wants the device's memory to itself).
/// The compile service of device 0 (take [`device`]'s guard first).
pub fn compiler() -> Arc<CudaCompiler> {
    CudaCompiler::open(0).expect("these tests need a CUDA GPU")
}

pub fn device() -> (MutexGuard<'static, ()>, Arc<CudaDevice>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let compiler = compiler();
    let device = compiler.device().clone();
    // New programs run first on the interpreter once it is loaded: wait, so
    // that every program's first tier is the same from test to test.
    // (A process default config without it runs them on the quick modules.)
    if let Err(e) = compiler.wait_interpreter() {
        assert!(
            !tilefuse::Config::process_default().jit.interpreter,
            "the PTX interpreter did not load: {e}"
        );
    }
    (guard, device)
}

/// How far a GPU element may be from the CPU's. An element passes when the
/// two are the same bits (any NaN matches any NaN), or, for floats, when
/// any one stated bound holds: at most `ulps` representable values apart
/// (counted in the element's own dtype, so f16 ulps for f16), `|gpu - cpu|
/// <= abs`, or `|gpu - cpu| <= rel * |cpu|`. Integers and bools are always
/// compared bit for bit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tol {
    /// Representable values apart.
    pub ulps: u64,
    /// Absolute difference.
    pub abs: f64,
    /// Difference relative to the CPU's value.
    pub rel: f64,
}

/// Bit-exact (NaN matches NaN; `-0` does not match `+0`).
pub const EXACT: Tol = Tol {
    ulps: 0,
    abs: 0.0,
    rel: 0.0,
};

/// At most `n` ulps apart.
pub const fn ulps(n: u64) -> Tol {
    Tol {
        ulps: n,
        abs: 0.0,
        rel: 0.0,
    }
}

/// At most `r` relative (to the CPU's value) or `a` absolute apart.
pub const fn rel_abs(r: f64, a: f64) -> Tol {
    Tol {
        ulps: 0,
        abs: a,
        rel: r,
    }
}

/// The position of a float's bits on the number line: adjacent floats
/// differ by one, and both zeros are 0.
fn ordered(bits: u64, width: u32) -> i128 {
    let sign = 1u64 << (width - 1);
    let magnitude = (bits & (sign - 1)) as i128;
    if bits & sign != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The raw bits of element `i`.
fn bits(b: &HostBuffer, i: usize) -> u64 {
    let size = b.dtype().size_in_bytes();
    let mut raw = [0u8; 8];
    raw[..size].copy_from_slice(&b.bytes()[i * size..(i + 1) * size]);
    u64::from_le_bytes(raw)
}

/// Whether element `i` of `gpu` is close enough to that of `cpu`.
fn element_ok(cpu: &HostBuffer, gpu: &HostBuffer, i: usize, tol: Tol) -> bool {
    let (c, g) = (bits(cpu, i), bits(gpu, i));
    if c == g {
        return true;
    }
    let d = cpu.dtype();
    if !d.is_float() {
        return false;
    }
    let (cv, gv) = (cpu.get(i).to_f64(), gpu.get(i).to_f64());
    if cv.is_nan() || gv.is_nan() {
        return cv.is_nan() && gv.is_nan();
    }
    if cv.is_infinite() || gv.is_infinite() {
        return false;
    }
    let width = 8 * d.size_in_bytes() as u32;
    (ordered(c, width) - ordered(g, width)).unsigned_abs() <= tol.ulps as u128
        || (gv - cv).abs() <= tol.abs
        || (gv - cv).abs() <= tol.rel * cv.abs()
}

/// Compares two buffers element by element; the error lists the first
/// mismatches and their count.
pub fn compare(what: &str, cpu: &HostBuffer, gpu: &HostBuffer, tol: Tol) -> Result<(), String> {
    if cpu.dtype() != gpu.dtype() || cpu.len() != gpu.len() {
        return Err(format!(
            "{what}: cpu {} x {} vs gpu {} x {}",
            cpu.dtype(),
            cpu.len(),
            gpu.dtype(),
            gpu.len()
        ));
    }
    let bad: Vec<usize> = (0..cpu.len()).filter(|&i| !element_ok(cpu, gpu, i, tol)).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = bad
        .iter()
        .take(6)
        .map(|&i| {
            format!(
                "[{i}] cpu {} ({:#x}) gpu {} ({:#x})",
                cpu.get(i),
                bits(cpu, i),
                gpu.get(i),
                bits(gpu, i)
            )
        })
        .collect();
    Err(format!(
        "{what}: {} of {} elements differ beyond {tol:?}: {}",
        bad.len(),
        cpu.len(),
        shown.join("; ")
    ))
}

/// Runs `program` on the CPU executor; returns every parameter's buffer
/// afterwards.
pub fn run_cpu(program: &Program, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, Error> {
    let mut buffers = inputs.to_vec();
    let mut args: Vec<Arg<'_>> = buffers.iter_mut().map(Arg::Write).collect();
    execute(program, &mut args)?;
    Ok(buffers)
}

/// Uploads `inputs`, runs `program` on the GPU, and downloads every
/// parameter's buffer.
///
/// A program compiled here for the first time runs twice: with the module
/// its first call gets (the quick tier), and again from fresh copies of the
/// inputs once the tuned module is loaded. The two must agree bit for bit
/// (they run the same operations in the same order), unless the kernel adds
/// floats atomically, whose order varies from run to run; the tuned run's
/// buffers are returned.
pub fn run_gpu(program: &Program, inputs: &[HostBuffer]) -> Result<Vec<HostBuffer>, Error> {
    let (_guard, device) = device();
    let compiler = compiler();
    let stream = device.stream(0);
    let compiled = compiler.compile(program)?;
    let run = |first_module: bool| -> Result<Vec<HostBuffer>, Error> {
        let buffers = inputs
            .iter()
            .map(|h| device.from_host_on(h, stream))
            .collect::<Result<Vec<DeviceBuffer>, Error>>()?;
        let args: Vec<&DeviceBuffer> = buffers.iter().collect();
        if first_module {
            compiled.launch_first(&args, stream)?;
        } else {
            compiled.launch(&args, stream)?;
        }
        buffers.iter().map(|b| b.to_host_on(stream)).collect()
    };
    // The quick module, whether or not the tuned one (compiling at the same
    // time) is ready yet; then the tuned one.
    let first = run(true)?;
    if !compiled.has_quick_tier() {
        return Ok(first);
    }
    compiler.finish_compiles();
    assert!(compiled.is_tuned(), "{}: the tuned module did not load", program.name);
    let tuned = run(false)?;
    if program.adds_floats_atomically() {
        return Ok(tuned);
    }
    let tier = if compiled.first_interpreted() {
        "the interpreter"
    } else {
        "the quick module"
    };
    for (i, (a, b)) in first.iter().zip(&tuned).enumerate() {
        if a.bytes() == b.bytes() {
            continue;
        }
        // Float NaNs match whatever their payloads: the JIT may give a NaN
        // another payload than the same instruction run alone gives it
        // (measured: a division by a NaN row value).
        let size = a.dtype().size_in_bytes();
        let nan = |buf: &HostBuffer, e: usize| a.dtype().is_float() && buf.get(e).to_f64().is_nan();
        let differ: Vec<usize> = (0..a.len())
            .filter(|&e| a.bytes()[e * size..(e + 1) * size] != b.bytes()[e * size..(e + 1) * size])
            .filter(|&e| !(nan(a, e) && nan(b, e)))
            .collect();
        if differ.is_empty() {
            continue;
        }
        let show = |buf: &HostBuffer, e: usize| format!("{:02x?}", &buf.bytes()[e * size..(e + 1) * size]);
        let first_few: Vec<String> = differ
            .iter()
            .take(4)
            .map(|&e| format!("[{e}] {} vs {}", show(a, e), show(b, e)))
            .collect();
        panic!(
            "{}: parameter {i} differs between {tier} and the tuned module at {} of {} elements, first: {}",
            program.name,
            differ.len(),
            a.len(),
            first_few.join(", ")
        );
    }
    Ok(tuned)
}

/// The outcome of one differential case.
pub enum Outcome {
    /// Both ran and agree; the GPU's buffers.
    Same(Vec<HostBuffer>),
    /// The PTX generator declines the program (`UnsupportedDType`).
    Unsupported(String),
}

/// Runs `program` on the CPU and the GPU from `inputs` (one buffer per
/// parameter, outputs included) and compares every parameter the program
/// writes or fills under `tol`. The error says what differs or failed.
pub fn check_program(program: &Program, inputs: &[HostBuffer], tol: Tol) -> Result<Outcome, String> {
    let name = &program.name;
    let cpu = run_cpu(program, inputs).map_err(|e| format!("{name}: cpu: {e}"))?;
    let gpu = match run_gpu(program, inputs) {
        Ok(gpu) => gpu,
        Err(e @ Error::UnsupportedDType { .. }) => return Ok(Outcome::Unsupported(format!("{name}: {e}"))),
        Err(e) => return Err(format!("{name}: gpu: {e}")),
    };
    for (i, param) in program.params.iter().enumerate() {
        if param.access != Access::Read || param.init.is_some() {
            compare(&format!("{name}: parameter `{}`", param.name), &cpu[i], &gpu[i], tol)?;
        }
    }
    Ok(Outcome::Same(gpu))
}

/// Runs a table of cases, printing each result, and fails listing every
/// case that failed. `unsupported_ok` says whether the generator may decline
/// a case with `UnsupportedDType` (none of the tables' cases, today).
pub fn run_cases(
    table: &str,
    cases: impl IntoIterator<Item = (Program, Vec<HostBuffer>, Tol)>,
    unsupported_ok: impl Fn(&Program) -> bool,
) {
    let (mut passed, mut skipped, mut failures) = (0, 0, Vec::new());
    for (program, inputs, tol) in cases {
        match check_program(&program, &inputs, tol) {
            Ok(Outcome::Same(_)) => passed += 1,
            Ok(Outcome::Unsupported(why)) if unsupported_ok(&program) => {
                eprintln!("  declined as documented: {why}");
                skipped += 1;
            }
            Ok(Outcome::Unsupported(why)) => failures.push(why),
            Err(why) => failures.push(why),
        }
    }
    eprintln!(
        "{table}: {passed} cases agree, {skipped} declined as documented, {} fail",
        failures.len()
    );
    assert!(failures.is_empty(), "{table}:\n{}", failures.join("\n"));
    assert!(passed > 0, "{table}: no case ran");
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The float values every float input starts with, before random ones.
pub const SPECIALS: [f64; 6] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0, 1.0];

/// `n` elements of `dtype`: for floats the [`SPECIALS`] (when `specials`)
/// then uniform values in `[lo, hi)` that are never zero; for integers
/// nonzero values in `[lo, hi)` (wrapped to the dtype); for bools random
/// bits.
pub fn random(dtype: DType, n: usize, (lo, hi): (f64, f64), specials: bool, seed: u64) -> HostBuffer {
    let mut rng = Rng::new(seed);
    let mut b = HostBuffer::zeros(dtype, n);
    for i in 0..n {
        let value = if dtype == DType::Bool {
            Scalar::Bool(rng.next() & 1 == 1)
        } else if dtype.is_float() {
            let x = match SPECIALS.get(i) {
                Some(&s) if specials => s,
                _ => loop {
                    let x = rng.uniform(lo, hi);
                    if x != 0.0 {
                        break x;
                    }
                },
            };
            Scalar::Float(x, DType::F64).cast(dtype)
        } else {
            let x = loop {
                let x = rng.uniform(lo, hi).floor() as i128;
                if x != 0 {
                    break x;
                }
            };
            Scalar::Int(x, DType::I64).cast(dtype)
        };
        b.set(i, value);
    }
    b
}

/// A buffer of `dtype` whose elements are `f(i)`.
pub fn filled(dtype: DType, n: usize, f: impl Fn(usize) -> Scalar) -> HostBuffer {
    let mut b = HostBuffer::zeros(dtype, n);
    for i in 0..n {
        b.set(i, f(i));
    }
    b
}
