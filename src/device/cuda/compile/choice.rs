//! Codegen settings chosen per program by measuring them on the device.
//!
//! The plan's cost model picks a kernel's strategy; how its PTX is then
//! written (block size, resident threads, staging, cache hints, unrolling)
//! follows [`CodegenConfig`], whose defaults were measured on a few
//! kernels. Where those do not suit a program,
//! [`CudaCompiler::measure_choice`] compiles the program under each of a
//! small set of candidate settings ([`candidates`]), times every distinct
//! module on the device with CUDA events, and records the fastest, unless
//! no candidate beats the default by more than [`MARGIN`] (the noise of
//! such timings): the default then stays.
//!
//! A recorded choice is used by every later compile of the program under
//! the same base settings on this device ([`JitConfig::measured`] on, the
//! default), and written to a file per device, driver and crate version in
//! the choices directory (`choices_dir`: `TILEFUSE_CHOICES`, else
//! `$XDG_CACHE_HOME/tilefuse` or `~/.cache/tilefuse`), which later
//! processes read the first time they compile a program on that device. A
//! first call never measures: measuring is asked for explicitly, and a
//! compile only looks its program up in the table.
//!
//! The file holds one line per program, `<key> <candidate>`: the key a
//! 64-bit FNV-1a hash (in hex) of the program's printed text and its base
//! codegen settings, the candidate one of [`candidates`]' labels. A line
//! that does not parse is skipped (and reported once on stderr).
//!
//! [`JitConfig::measured`]: crate::config::JitConfig::measured

use super::CudaCompiler;
use crate::config::{choices_dir, CodegenConfig, Config, JitConfig};
use crate::device::cuda::{DeviceBuffer, DeviceInfo, Event};
use crate::dtype::{DType, Scalar};
use crate::error::{Error, Result};
use crate::kernels::ir::{Access, Program};
use crate::kernels::ptx_gen::generate_with;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// How much faster than the default a candidate must be to be chosen.
pub const MARGIN: f64 = 1.03;

/// Timed rounds per candidate; the fastest round counts.
const ROUNDS: usize = 5;

/// The device time one round of launches aims at, in milliseconds.
const ROUND_MS: f64 = 2.0;

/// The candidate settings measured against `base`, each with its label:
/// `base` itself first (`default`), then one change each of the block
/// size, the resident threads a thread's registers are capped for, the
/// block size of staged row kernels, staging, the L1 policy of read-only
/// loads and unrolling.
pub fn candidates(base: &CodegenConfig) -> Vec<(&'static str, CodegenConfig)> {
    let with = |f: &dyn Fn(&mut CodegenConfig)| {
        let mut c = base.clone();
        f(&mut c);
        c
    };
    vec![
        ("default", base.clone()),
        ("threads 128", with(&|c| c.max_threads = 128)),
        ("threads 512", with(&|c| c.max_threads = 512)),
        ("threads 1024", with(&|c| c.max_threads = 1024)),
        ("resident 1024", with(&|c| c.resident_threads = 1024)),
        ("resident 2048", with(&|c| c.resident_threads = 2048)),
        ("staged threads 256", with(&|c| c.staged_threads = 256)),
        ("staged threads 1024", with(&|c| c.staged_threads = 1024)),
        ("registers, not staged", with(&|c| c.stage = false)),
        ("loads L1::no_allocate", with(&|c| c.load_hints = ".L1::no_allocate".into())),
        ("unroll 4", with(&|c| c.unroll = Some(4))),
    ]
}

/// One candidate's time.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateTime {
    /// Its label (see [`candidates`]).
    pub label: &'static str,
    /// The fastest round's time per launch, in milliseconds.
    pub ms: f64,
}

/// What [`CudaCompiler::measure_choice`] measured for one program.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredChoice {
    /// The program's name.
    pub program: String,
    /// The distinct candidates (those whose modules differ) that compiled
    /// and launched, in [`candidates`] order, the default first.
    pub times: Vec<CandidateTime>,
    /// The label chosen: the fastest, or `default` when none beats it by
    /// [`MARGIN`].
    pub chosen: &'static str,
}

impl MeasuredChoice {
    /// The default's time over the chosen one's (1 when the default stays).
    pub fn speedup(&self) -> f64 {
        let time = |label| self.times.iter().find(|t| t.label == label).map(|t| t.ms);
        match (time("default"), time(self.chosen)) {
            (Some(d), Some(c)) if c > 0.0 => d / c,
            _ => 1.0,
        }
    }
}

/// The choices of one device: read from its file on first use, added to by
/// measurements.
#[derive(Default)]
pub(crate) struct ChoiceTable {
    state: Mutex<TableState>,
}

#[derive(Default)]
struct TableState {
    /// Whether the file was read (or there is none to read).
    loaded: bool,
    /// The file, when there is a choices directory.
    path: Option<PathBuf>,
    /// Key to candidate label.
    chosen: HashMap<u64, String>,
}

/// The key of `program` compiled from `base`: FNV-1a over its text and the
/// settings.
pub fn choice_key(program: &Program, base: &CodegenConfig) -> u64 {
    let text = format!("{program}\n{base:?}");
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The file name of `info`'s choices: the device's name, compute
/// capability and driver, and the crate's version.
pub fn choices_file_name(info: &DeviceInfo) -> String {
    let name: String = info
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    let (major, minor) = info.compute_capability;
    format!(
        "choices-{name}-sm{major}{minor}-driver{}-v{}.txt",
        info.driver_version,
        env!("CARGO_PKG_VERSION")
    )
}

/// The lines of a choices file that parse, and how many did not.
fn parse(text: &str) -> (HashMap<u64, String>, usize) {
    let labels: Vec<&str> = candidates(&CodegenConfig::default()).iter().map(|(l, _)| *l).collect();
    let mut chosen = HashMap::new();
    let mut bad = 0;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let parsed = line
            .split_once(' ')
            .and_then(|(key, label)| Some((u64::from_str_radix(key, 16).ok()?, label.trim())));
        match parsed {
            Some((key, label)) if labels.contains(&label) => {
                chosen.insert(key, label.to_string());
            }
            _ => bad += 1,
        }
    }
    (chosen, bad)
}

/// The text of a choices file holding `chosen`, in key order.
fn format(chosen: &HashMap<u64, String>) -> String {
    let mut lines: Vec<(u64, &String)> = chosen.iter().map(|(k, v)| (*k, v)).collect();
    lines.sort();
    let mut text = String::from("# tilefuse: codegen candidates measured fastest per program (key, label)\n");
    for (key, label) in lines {
        text.push_str(&format!("{key:016x} {label}\n"));
    }
    text
}

impl ChoiceTable {
    fn state(&self, info: &DeviceInfo) -> std::sync::MutexGuard<'_, TableState> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !s.loaded {
            s.loaded = true;
            s.path = choices_dir().map(|d| d.join(choices_file_name(info)));
            if let Some(text) = s.path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
                let (chosen, bad) = parse(&text);
                if bad > 0 {
                    eprintln!(
                        "tilefuse: {bad} lines of {} are no choice and were skipped",
                        s.path.as_ref().map_or(String::new(), |p| p.display().to_string())
                    );
                }
                s.chosen = chosen;
            }
        }
        s
    }

    /// The codegen settings recorded for `program` under `config`, when
    /// `config` uses measured choices and one other than the default was
    /// recorded.
    pub(crate) fn lookup(&self, program: &Program, config: &Config, info: &DeviceInfo) -> Option<CodegenConfig> {
        if !config.jit.measured {
            return None;
        }
        let s = self.state(info);
        if s.chosen.is_empty() {
            return None;
        }
        let label = s.chosen.get(&choice_key(program, &config.codegen))?;
        candidates(&config.codegen)
            .into_iter()
            .find(|(l, _)| l == label && *l != "default")
            .map(|(_, c)| c)
    }

    /// Records `label` for `key` and rewrites the file.
    fn record(&self, key: u64, label: &str, info: &DeviceInfo) -> Result<()> {
        let mut s = self.state(info);
        s.chosen.insert(key, label.to_string());
        let Some(path) = s.path.clone() else {
            return Ok(());
        };
        let text = format(&s.chosen);
        let io = |e: std::io::Error| Error::ChoicesFile {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // Written beside it and renamed over it: a reader never sees half a file.
        let temp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&temp, text).map_err(io)?;
        std::fs::rename(&temp, &path).map_err(io)
    }

    /// Where the choices are kept, if anywhere.
    pub(crate) fn path(&self, info: &DeviceInfo) -> Option<PathBuf> {
        self.state(info).path.clone()
    }
}

/// A buffer for parameter `dtype[len]` of a measured program: read-only
/// ones hold a pattern of finite values (`0x3f80` in every 16-bit half:
/// 1.0 as bf16, about 1.004 as f32), the others start at zero (ticket
/// counters must).
fn argument(compiler: &CudaCompiler, dtype: DType, len: u64, access: Access) -> Result<DeviceBuffer> {
    let device = compiler.device();
    let stream = device.stream(0);
    let len = usize::try_from(len).map_err(|_| Error::OutOfMemory {
        bytes: usize::MAX,
        in_use: device.memory_stats().bytes_in_use,
    })?;
    let buffer = device.alloc_on(dtype, len, stream)?;
    buffer.zero_on(stream)?;
    if access == Access::Read && buffer.bytes() % 4 == 0 && dtype != DType::Bool {
        buffer.fill_words_on(0x3f80_3f80, stream)?;
    }
    Ok(buffer)
}

impl CudaCompiler {
    /// Measures the [`candidates`] of `program` against `config`'s codegen
    /// settings on this device and records the choice (see the
    /// [module documentation](self)): every distinct module is compiled at
    /// the JIT's full level, then launched over buffers of the program's
    /// sizes (read-only ones holding a pattern) in `ROUNDS` interleaved
    /// rounds of about 2 ms each, timed with CUDA events.
    ///
    /// # Errors
    /// The default settings failing to compile or launch (another
    /// candidate that does is left out); [`Error::OutOfMemory`]
    /// when the program's buffers do not fit; [`Error::ChoicesFile`] when
    /// the choice cannot be written (it is recorded for this process
    /// still).
    pub fn measure_choice(&self, program: &Program, config: &Config) -> Result<MeasuredChoice> {
        config.validate()?;
        let target = self.target();
        let jit = JitConfig {
            quick: None,
            measured: false,
            ..config.jit
        };
        let mut distinct: Vec<(&'static str, crate::kernels::ptx_gen::PtxModule, Config)> = vec![];
        for (label, codegen) in candidates(&config.codegen) {
            let module = generate_with(program, &target, &codegen)?;
            if distinct.iter().any(|(_, m, _)| *m == module) {
                continue;
            }
            let candidate = Config {
                codegen,
                jit,
                ..config.clone()
            };
            distinct.push((label, module, candidate));
        }
        let buffers = program
            .params
            .iter()
            .map(|p| argument(self, p.dtype, p.len, p.access))
            .collect::<Result<Vec<_>>>()?;
        let args: Vec<&DeviceBuffer> = buffers.iter().collect();
        let scalars: Vec<Scalar> = program.scalars.iter().map(|_| Scalar::Float(1.0, DType::F64)).collect();
        let device = self.device();
        let stream = device.stream(0);
        // Each compiled, launched once to warm up and once timed to size
        // its rounds. A candidate other than the default that does not
        // compile or launch (too many registers for its block, say) is
        // left out.
        let (start, end) = (Event::new(device, true)?, Event::new(device, true)?);
        let mut compiled = vec![];
        let mut labels = vec![];
        let mut reps = vec![];
        for (k, (label, _, candidate)) in distinct.iter().enumerate() {
            let ready = || -> Result<_> {
                let c = self.compile_with(program, candidate)?;
                c.launch_with_scalars(&args, &scalars, stream)?;
                start.record(stream)?;
                c.launch_with_scalars(&args, &scalars, stream)?;
                end.record(stream)?;
                end.synchronize()?;
                Ok((c, start.elapsed_ms(&end)? as f64))
            };
            match ready() {
                Ok((c, ms)) => {
                    compiled.push(c);
                    labels.push(*label);
                    reps.push(((ROUND_MS / ms.max(1e-3)).ceil() as usize).clamp(3, 200));
                }
                Err(e) if k == 0 => return Err(e),
                Err(_) => {}
            }
        }
        let mut best = vec![f64::INFINITY; compiled.len()];
        for _ in 0..ROUNDS {
            let mut events = vec![];
            for (c, &n) in compiled.iter().zip(&reps) {
                let (start, end) = (Event::new(device, true)?, Event::new(device, true)?);
                start.record(stream)?;
                for _ in 0..n {
                    c.launch_with_scalars(&args, &scalars, stream)?;
                }
                end.record(stream)?;
                events.push((start, end));
            }
            for (k, (start, end)) in events.iter().enumerate() {
                end.synchronize()?;
                let ms = start.elapsed_ms(end)? as f64 / reps[k] as f64;
                best[k] = best[k].min(ms);
            }
        }
        let times: Vec<CandidateTime> = labels
            .iter()
            .zip(&best)
            .map(|(&label, &ms)| CandidateTime { label, ms })
            .collect();
        let fastest = times
            .iter()
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .expect("the default is a candidate");
        let chosen = if times[0].ms > fastest.ms * MARGIN {
            fastest.label
        } else {
            "default"
        };
        let choice = MeasuredChoice {
            program: program.name.clone(),
            times,
            chosen,
        };
        self.choices
            .record(choice_key(program, &config.codegen), chosen, device.info())?;
        Ok(choice)
    }

    /// Where this device's measured choices are kept: `None` when
    /// `TILEFUSE_CHOICES` is `off` (or no home directory is known); they
    /// then last for the process only.
    pub fn choices_path(&self) -> Option<PathBuf> {
        self.choices.path(self.device().info())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choices_file_reads_back_what_was_written_and_skips_what_is_no_choice() {
        let mut chosen = HashMap::new();
        chosen.insert(0x1234_5678_9abc_def0, "threads 512".to_string());
        chosen.insert(7, "default".to_string());
        let text = format(&chosen);
        assert_eq!(parse(&text), (chosen.clone(), 0));
        let damaged = format!("{text}zz threads 512\n00ff no such candidate\n12\n");
        assert_eq!(parse(&damaged), (chosen, 3));
    }

    #[test]
    fn candidates_are_distinct_valid_settings_with_the_default_first() {
        let base = CodegenConfig::default();
        let all = candidates(&base);
        assert_eq!(all[0], ("default", base.clone()));
        for (k, (label, c)) in all.iter().enumerate() {
            let config = Config {
                codegen: c.clone(),
                ..Config::default()
            };
            config.validate().unwrap_or_else(|e| panic!("{label}: {e}"));
            assert!(all[..k].iter().all(|(l, o)| l != label && o != c), "{label}");
        }
    }

    #[test]
    fn keys_follow_the_program_text_and_the_base_settings() {
        use crate::kernels::ir::Builder;
        let program = |n: u64| {
            let mut b = Builder::new("k", &[1]);
            b.param("x", DType::F32, n, Access::Read);
            b.finish().unwrap()
        };
        let base = CodegenConfig::default();
        let other = CodegenConfig {
            max_threads: 512,
            ..base.clone()
        };
        assert_eq!(choice_key(&program(8), &base), choice_key(&program(8), &base));
        assert_ne!(choice_key(&program(8), &base), choice_key(&program(9), &base));
        assert_ne!(choice_key(&program(8), &base), choice_key(&program(8), &other));
    }
}
