//! The `TILEFUSE_*` environment variables: the table of settings, their
//! parsing, and the reports of values they do not take.
//!
//! Every variable tilefuse reads is listed in [`SETTINGS`] with the values
//! it takes. The library's settings are read by [`from_env`] into a
//! [`Config`]; the others steer tilefuse's own tests and tools. A value the
//! setting does not take is not silently ignored: the first time it is
//! read, one line on stderr names the variable, the value and what it
//! takes, and the default applies. A `TILEFUSE_*` variable that is no
//! setting (a misspelling, say) is reported the same way, once per process.
//!
//! [`active`] lists the settings set in the environment, for reports that
//! must say how they were made (the throughput report prints them).
//!
//! ```
//! let active = tilefuse::config::active();
//! assert!(active.iter().all(|(name, _)| name.starts_with("TILEFUSE_")));
//! assert!(tilefuse::config::SETTINGS.iter().any(|s| s.name == "TILEFUSE_GPU_CP_KEEP"));
//! ```

use super::{Config, Fraction, MathMode, QuickTier, RunStaging, StageCopy};
use std::collections::HashSet;
use std::sync::{Mutex, Once};

/// One setting: its variable and the values it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// The values it takes, in words (printed when a value is refused).
    pub takes: &'static str,
    /// Whether the library reads it (and it can change what it does), as
    /// opposed to a setting of its tests, examples and tools only.
    pub library: bool,
}

const fn s(name: &'static str, takes: &'static str) -> Setting {
    Setting {
        name,
        takes,
        library: true,
    }
}

const fn tool(name: &'static str, takes: &'static str) -> Setting {
    Setting {
        name,
        takes,
        library: false,
    }
}

/// Every setting tilefuse reads: the library's (the field of [`Config`]
/// each one sets documents it) and, last, those of its tests, examples and
/// tools.
pub const SETTINGS: &[Setting] = &[
    s("TILEFUSE_GPU_MATH", "fast or precise"),
    s("TILEFUSE_GPU_TILE", "a positive number of elements"),
    s("TILEFUSE_GPU_PARTS", "a positive number"),
    s("TILEFUSE_GPU_THREADS", "a power of two from 32 to 1024"),
    s("TILEFUSE_GPU_RESIDENT", "a multiple of 32 from 32 to 2048"),
    s("TILEFUSE_GPU_UNROLL", "a number from 1 to 64"),
    s("TILEFUSE_GPU_RELOAD", "0 or 1"),
    s("TILEFUSE_GPU_STAGE", "0 or 1"),
    s("TILEFUSE_GPU_RUNS", "off, outside or all"),
    s("TILEFUSE_GPU_RUN_ELEMENT", "1, 2, 4 or 8"),
    s("TILEFUSE_GPU_STAGED_THREADS", "a power of two from 32 to 1024"),
    s("TILEFUSE_GPU_STAGED_RESIDENT", "a multiple of 32 from 32 to 2048"),
    s("TILEFUSE_GPU_ROW_RCP", "f64 or f32"),
    s("TILEFUSE_GPU_LD", "PTX qualifiers: letters, digits, '.', ':' and '_'"),
    s("TILEFUSE_GPU_CP_LEVEL", "cg, ca or regs"),
    s("TILEFUSE_GPU_CP_KEEP", "a fraction in (0, 1], or 0 or off for none"),
    s("TILEFUSE_GPU_LD_KEEP", "a fraction in (0, 1], or 0 or off for none"),
    s("TILEFUSE_GPU_CHAINED_ROWS", "registers or staged"),
    s("TILEFUSE_GPU_INTERPRETER", "on or off (1 and 0 too)"),
    s(
        "TILEFUSE_JIT_QUICK",
        "a JIT level from 0 to 3, with u for the tuned text (e.g. 1u), or off",
    ),
    s("TILEFUSE_JIT_O", "a JIT level from 0 to 4"),
    s("TILEFUSE_GPU_MEASURED", "on or off (1 and 0 too)"),
    s("TILEFUSE_CHOICES", "a directory, or off"),
    // Tests, examples and tools.
    tool("TILEFUSE_PTXAS", "the path of a ptxas executable"),
    tool("TILEFUSE_REQUIRE_PTXAS", "0 or 1"),
    tool("TILEFUSE_BLESS", "1"),
    tool("TILEFUSE_WRITE_NOTES", "1"),
    tool("TILEFUSE_FUZZ_SEED", "a number"),
    tool("TILEFUSE_FUZZ_GRAPHS", "a number"),
    tool("TILEFUSE_FUZZ_VERBOSE", "anything"),
    tool("TILEFUSE_GPU_FUZZ_SECONDS", "a number"),
    tool("TILEFUSE_GPU_FUZZ_GRAPHS", "a number"),
    tool("TILEFUSE_TEST_EXIT_CHILD", "anything"),
    tool("TILEFUSE_DUMP_PTX", "a directory"),
];

/// The default [`Config`] with what the environment sets (see
/// [`Config::from_env`]).
pub(super) fn from_env() -> Config {
    let mut c = Config::default();
    let threads = |name| number(name, 32..=1024, u64::is_power_of_two).map(|v| v as u32);
    let resident = |name| number(name, 32..=2048, |v| v % 32 == 0).map(|v| v as u32);
    let fraction = |name, default| read(name, parse_fraction).unwrap_or(default);

    let f = &mut c.fusion;
    f.math = read("TILEFUSE_GPU_MATH", |v| match v {
        "fast" => Some(MathMode::Fast),
        "precise" => Some(MathMode::Precise),
        _ => None,
    })
    .unwrap_or(f.math);
    f.gpu_tile_elements = number("TILEFUSE_GPU_TILE", 1..=1 << 40, |_| true)
        .map_or(f.gpu_tile_elements, |v| v.next_power_of_two() as usize);
    f.gpu_split_parts = number("TILEFUSE_GPU_PARTS", 1..=u64::MAX, |_| true).unwrap_or(f.gpu_split_parts);

    let g = &mut c.codegen;
    g.max_threads = threads("TILEFUSE_GPU_THREADS").unwrap_or(g.max_threads);
    g.resident_threads = resident("TILEFUSE_GPU_RESIDENT").unwrap_or(g.resident_threads);
    g.unroll = number("TILEFUSE_GPU_UNROLL", 1..=64, |_| true).or(g.unroll);
    g.reload = switch("TILEFUSE_GPU_RELOAD", g.reload);
    g.stage = switch("TILEFUSE_GPU_STAGE", g.stage);
    g.stage_runs = read("TILEFUSE_GPU_RUNS", |v| match v {
        "off" => Some(RunStaging::Off),
        "outside" => Some(RunStaging::OutsideLoops),
        "all" => Some(RunStaging::Everywhere),
        _ => None,
    })
    .unwrap_or(g.stage_runs);
    g.run_element_bytes =
        number("TILEFUSE_GPU_RUN_ELEMENT", 1..=8, u64::is_power_of_two).map_or(g.run_element_bytes, |n| n as u32);
    g.staged_threads = threads("TILEFUSE_GPU_STAGED_THREADS").unwrap_or(g.staged_threads);
    g.staged_resident_threads = resident("TILEFUSE_GPU_STAGED_RESIDENT").unwrap_or(g.staged_resident_threads);
    g.row_reciprocal_f64 = either("TILEFUSE_GPU_ROW_RCP", "f64", "f32", g.row_reciprocal_f64);
    g.load_hints = read("TILEFUSE_GPU_LD", parse_qualifiers).unwrap_or_default();
    g.stage_copy = read("TILEFUSE_GPU_CP_LEVEL", |v| match v {
        "cg" => Some(StageCopy::AsyncL2),
        "ca" => Some(StageCopy::AsyncL1),
        "regs" => Some(StageCopy::Registers),
        _ => None,
    })
    .unwrap_or(g.stage_copy);
    g.stage_keep = fraction("TILEFUSE_GPU_CP_KEEP", g.stage_keep);
    g.load_keep = fraction("TILEFUSE_GPU_LD_KEEP", g.load_keep);
    g.chained_rows_in_registers = either(
        "TILEFUSE_GPU_CHAINED_ROWS",
        "registers",
        "staged",
        g.chained_rows_in_registers,
    );

    let j = &mut c.jit;
    j.interpreter = read("TILEFUSE_GPU_INTERPRETER", |v| match v.to_ascii_lowercase().as_str() {
        "none" => Some(false),
        v => parse_switch(v),
    })
    .unwrap_or(j.interpreter);
    j.quick = read("TILEFUSE_JIT_QUICK", |v| match v {
        "off" | "none" => Some(None),
        v => parse_quick_tier(v).map(Some),
    })
    .unwrap_or(j.quick);
    j.opt_level = number("TILEFUSE_JIT_O", 0..=4, |_| true)
        .map(|v| v as u32)
        .or(j.opt_level);
    j.measured = read("TILEFUSE_GPU_MEASURED", parse_switch).unwrap_or(j.measured);
    c
}

/// The directory of the measured codegen choices: `TILEFUSE_CHOICES`
/// (`off` for none), else `$XDG_CACHE_HOME/tilefuse`, else
/// `$HOME/.cache/tilefuse`; `None` when it is off or no home is known.
#[cfg(feature = "cuda")]
pub(crate) fn choices_dir() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if std::env::var_os("TILEFUSE_CHOICES").is_some() {
        return read("TILEFUSE_CHOICES", |v| match v {
            "off" | "none" => Some(None),
            "" => None,
            v => Some(Some(PathBuf::from(v))),
        })
        .flatten();
    }
    let home = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from);
    home("XDG_CACHE_HOME")
        .or_else(|| home("HOME").map(|h| h.join(".cache")))
        .map(|d| d.join("tilefuse"))
}

/// `<level>` (0 to 3) is the quick text at that level; `<level>u` the
/// tuned text at that level; `None` for anything else.
fn parse_quick_tier(v: &str) -> Option<QuickTier> {
    let (digits, quick_text) = match v.strip_suffix('u') {
        Some(d) => (d, false),
        None => (v, true),
    };
    let level = digits.parse::<u32>().ok().filter(|&l| l <= 3)?;
    Some(QuickTier { level, quick_text })
}

/// The `ptxas` named by `TILEFUSE_PTXAS`: `Some(None)` when it is set but
/// names no file (reported), `None` when it is not set.
pub(crate) fn ptxas_path() -> Option<Option<std::path::PathBuf>> {
    std::env::var_os("TILEFUSE_PTXAS")?;
    Some(read("TILEFUSE_PTXAS", |v| {
        Some(std::path::PathBuf::from(v)).filter(|p| p.is_file())
    }))
}

/// Whether `TILEFUSE_REQUIRE_PTXAS` asks the tests to fail without `ptxas`.
pub(crate) fn require_ptxas() -> bool {
    switch("TILEFUSE_REQUIRE_PTXAS", false)
}

/// The settings set in this process's environment, with their values, in
/// the order of [`SETTINGS`].
pub fn active() -> Vec<(String, String)> {
    SETTINGS
        .iter()
        .filter_map(|s| std::env::var(s.name).ok().map(|v| (s.name.to_string(), v)))
        .collect()
}

/// The [`active`] settings that the library reads (`library`), which can
/// change what it does; the others only steer its tests and tools.
pub fn active_library() -> Vec<(String, String)> {
    active()
        .into_iter()
        .filter(|(name, _)| SETTINGS.iter().any(|s| s.library && s.name == name))
        .collect()
}

/// The `TILEFUSE_*` variables in this process's environment that are no
/// setting.
pub fn unknown() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("TILEFUSE_") && !SETTINGS.iter().any(|s| s.name == k))
        .collect()
}

/// The setting called `name`.
///
/// # Panics
/// If `name` is not in [`SETTINGS`] (a bug in tilefuse).
fn setting(name: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed in tilefuse::config::SETTINGS"))
}

/// `name`'s value parsed by `parse`; `None` when it is not set, or when
/// `parse` refuses it, which is reported once (see the module docs). The
/// value is trimmed first.
fn read<T>(name: &str, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    let setting = setting(name);
    report_unknown_once();
    let value = std::env::var(name).ok()?;
    let parsed = parse(value.trim());
    if parsed.is_none() {
        refuse(setting, &value);
    }
    parsed
}

/// `name` as a switch: `0`, `off`, `false` or `no` is `false`; `1`, `on`,
/// `true` or `yes` is `true`; unset or refused, `default`.
fn switch(name: &str, default: bool) -> bool {
    read(name, parse_switch).unwrap_or(default)
}

/// `name` as a choice of two words: `on` is `true`, `off` is `false`;
/// unset or refused, `default`.
fn either(name: &str, on: &str, off: &str, default: bool) -> bool {
    read(name, |v| parse_either(v, on, off)).unwrap_or(default)
}

/// `Some(true)` for `on`, `Some(false)` for `off`, `None` otherwise.
fn parse_either(v: &str, on: &str, off: &str) -> Option<bool> {
    (v == on || v == off).then_some(v == on)
}

/// `name` as a number in `range` that `accept` takes.
fn number(name: &str, range: std::ops::RangeInclusive<u64>, accept: impl Fn(u64) -> bool) -> Option<u64> {
    read(name, |v| {
        v.parse::<u64>().ok().filter(|n| range.contains(n) && accept(*n))
    })
}

/// A switch's value, if it is one.
fn parse_switch(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "0" | "off" | "false" | "no" => Some(false),
        "1" | "on" | "true" | "yes" => Some(true),
        _ => None,
    }
}

/// A fraction in (0, 1], or `Some(None)` for `0`, `off`, `none` or `false`.
fn parse_fraction(v: &str) -> Option<Option<Fraction>> {
    if matches!(v.to_ascii_lowercase().as_str(), "off" | "none" | "false") {
        return Some(None);
    }
    match v.parse::<f32>() {
        Ok(0.0) => Some(None),
        Ok(f) => Fraction::new(f).map(Some),
        _ => None,
    }
}

/// PTX qualifiers (letters, digits, `.`, `:` and `_`), if `v` is only those.
pub(crate) fn parse_qualifiers(v: &str) -> Option<String> {
    v.chars()
        .all(|c| c.is_ascii_alphanumeric() || ".:_".contains(c))
        .then(|| v.to_string())
}

/// Reports a refused value of `setting`, once per setting.
fn refuse(setting: &Setting, value: &str) {
    if first_report(setting.name) {
        eprintln!(
            "tilefuse: {}={value:?} is not a value it takes ({}); the default applies",
            setting.name, setting.takes
        );
    }
}

/// Reports the `TILEFUSE_*` variables that are no setting, once per process.
fn report_unknown_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for name in unknown() {
            eprintln!(
                "tilefuse: {name} is not a tilefuse setting and is ignored (tilefuse::config::SETTINGS lists them)"
            );
        }
    });
}

/// Whether `name` is reported for the first time.
fn first_report(name: &'static str) -> bool {
    static REPORTED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    reported.get_or_insert_with(HashSet::new).insert(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_parsed_or_refused() {
        assert_eq!(parse_switch("Off"), Some(false));
        assert_eq!(parse_switch("1"), Some(true));
        assert_eq!(parse_switch("2"), None);
        assert_eq!(parse_fraction("0.5"), Fraction::new(0.5).map(Some));
        assert_eq!(parse_fraction("1"), Some(Some(Fraction::ALL)));
        assert_eq!(parse_fraction("0"), Some(None));
        assert_eq!(parse_fraction("off"), Some(None));
        assert_eq!(parse_fraction("1.5"), None);
        assert_eq!(parse_fraction("-0.5"), None);
        assert_eq!(parse_fraction("half"), None);
        assert_eq!(parse_either("staged", "registers", "staged"), Some(false));
        assert_eq!(parse_either("registers", "registers", "staged"), Some(true));
        assert_eq!(parse_either("register", "registers", "staged"), None);
        assert_eq!(
            parse_quick_tier("1u"),
            Some(QuickTier {
                level: 1,
                quick_text: false
            })
        );
        assert_eq!(
            parse_quick_tier("2"),
            Some(QuickTier {
                level: 2,
                quick_text: true
            })
        );
        assert_eq!(parse_quick_tier("4"), None);
        assert_eq!(parse_quick_tier("u"), None);
        assert_eq!(parse_qualifiers(".L2::128B").as_deref(), Some(".L2::128B"));
        assert_eq!(parse_qualifiers(".cs; trap"), None);
    }

    #[test]
    fn every_setting_is_listed_once() {
        let names: HashSet<_> = SETTINGS.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SETTINGS.len());
        assert!(SETTINGS
            .iter()
            .all(|s| s.name.starts_with("TILEFUSE_") && !s.takes.is_empty()));
        let library = |name| SETTINGS.iter().find(|s| s.name == name).unwrap().library;
        assert!(library("TILEFUSE_GPU_CP_KEEP") && library("TILEFUSE_JIT_QUICK"));
        assert!(!library("TILEFUSE_PTXAS") && !library("TILEFUSE_GPU_FUZZ_SECONDS"));
    }

    #[test]
    fn the_sources_read_only_listed_settings() {
        // Every `"TILEFUSE_..."` string in the sources, tests, examples and
        // benches names a listed setting, and in `src/` only this module
        // has them.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        if !root.join("src").is_dir() {
            // The test binary runs on a machine without the sources.
            println!(
                "the_sources_read_only_listed_settings: skipped, no sources at {}",
                root.display()
            );
            return;
        }
        let mut files = vec![];
        let mut dirs: Vec<_> = ["src", "tests", "examples", "benches"]
            .iter()
            .map(|d| root.join(d))
            .collect();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs" || e == "py" || e == "sh") {
                    files.push(path);
                }
            }
        }
        let mut missing = vec![];
        let mut outside = vec![];
        let config = root.join("src/config");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            if file.starts_with(root.join("src")) && !file.starts_with(&config) && text.contains("\"TILEFUSE_") {
                outside.push(file.display().to_string());
            }
            for (i, _) in text.match_indices("\"TILEFUSE_") {
                let name: String = text[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if name.len() > "TILEFUSE_".len() && !SETTINGS.iter().any(|s| s.name == name) {
                    missing.push(format!("{name} in {}", file.display()));
                }
            }
        }
        assert!(missing.is_empty(), "settings read but not listed: {missing:?}");
        // The library reads the environment in this module only.
        assert!(outside.is_empty(), "`\"TILEFUSE_` outside src/config: {outside:?}");
    }
}
