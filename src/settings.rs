//! Settings from `TILEFUSE_*` environment variables.
//!
//! Every variable tilefuse reads is listed in [`SETTINGS`] with the values it
//! takes. Each is read once, where it is used, the first time it is needed.
//! A value the setting does not take is not silently ignored: the first time
//! it is read, one line on stderr names the variable, the value and what it
//! takes, and the default applies. A `TILEFUSE_*` variable that is no
//! setting (a misspelling, say) is reported the same way, once per process,
//! when the first setting is read.
//!
//! [`active`] lists the settings set in the environment, for reports that
//! must say how they were made (the throughput report prints them).
//!
//! ```
//! // Nothing set: no setting is active.
//! let active = tilefuse::settings::active();
//! assert!(active.iter().all(|(name, _)| name.starts_with("TILEFUSE_")));
//! assert!(tilefuse::settings::SETTINGS.iter().any(|s| s.name == "TILEFUSE_GPU_CP_KEEP"));
//! ```

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

/// Every setting tilefuse reads: the library's (what each one does is in
/// the README) and, last, those of its tests, examples and tools.
pub const SETTINGS: &[Setting] = &[
    s("TILEFUSE_GPU_THREADS", "a power of two from 32 to 1024"),
    s("TILEFUSE_GPU_RESIDENT", "a multiple of 32 from 32 to 2048"),
    s("TILEFUSE_GPU_UNROLL", "a number from 1 to 64"),
    s("TILEFUSE_GPU_RELOAD", "0 or 1"),
    s("TILEFUSE_GPU_STAGE", "0 or 1"),
    s("TILEFUSE_GPU_ROW_RCP", "f64 or f32"),
    s("TILEFUSE_GPU_STAGED_THREADS", "a power of two from 32 to 1024"),
    s("TILEFUSE_GPU_STAGED_RESIDENT", "a multiple of 32 from 32 to 2048"),
    s("TILEFUSE_GPU_LD", "PTX qualifiers: letters, digits, '.', ':' and '_'"),
    s("TILEFUSE_GPU_ST", "PTX qualifiers: letters, digits, '.', ':' and '_'"),
    s(
        "TILEFUSE_GPU_LD_INVARIANT",
        "PTX qualifiers: letters, digits, '.', ':' and '_'",
    ),
    s("TILEFUSE_GPU_CP", "PTX qualifiers: letters, digits, '.', ':' and '_'"),
    s("TILEFUSE_GPU_CP_LEVEL", "cg, ca or regs"),
    s("TILEFUSE_GPU_CP_KEEP", "a fraction in (0, 1], or 0 or off for none"),
    s("TILEFUSE_GPU_ST_EVICT", "first, normal, last, unchanged, or off"),
    s("TILEFUSE_GPU_LD_KEEP", "a fraction in (0, 1], or 0 or off for none"),
    s("TILEFUSE_GPU_MAXNREG", "a number from 16 to 255"),
    s("TILEFUSE_GPU_STAGE_RELOAD", "global or shared"),
    s("TILEFUSE_GPU_CHAINED_ROWS", "registers or staged"),
    s("TILEFUSE_GPU_GATHER", "loads or shuffles"),
    s("TILEFUSE_GPU_TILE", "a positive number of elements"),
    s("TILEFUSE_GPU_PARTS", "a positive number"),
    s("TILEFUSE_GPU_COLUMN_POINTS", "a number from 1 to 1048576"),
    s("TILEFUSE_GPU_MATH", "fast or precise"),
    s("TILEFUSE_GPU_INTERPRETER", "on, off or core (1 and 0 too)"),
    s(
        "TILEFUSE_JIT_QUICK",
        "a JIT level from 0 to 3, with u for the tuned text (e.g. 1u), or off",
    ),
    s("TILEFUSE_JIT_O", "a JIT level from 0 to 4"),
    s("TILEFUSE_JIT_LINK", "0 or 1"),
    s("TILEFUSE_JIT_WARM_UP", "0 or 1"),
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
        .unwrap_or_else(|| panic!("{name} is not listed in tilefuse::settings::SETTINGS"))
}

/// `name`'s value parsed by `parse`; `None` when it is not set, or when
/// `parse` refuses it, which is reported once (see the module docs). The
/// value is trimmed first.
pub(crate) fn read<T>(name: &str, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
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
pub(crate) fn switch(name: &str, default: bool) -> bool {
    read(name, parse_switch).unwrap_or(default)
}

/// `name` as a choice of two words: `on` is `true`, `off` is `false`;
/// unset or refused, `default`.
pub(crate) fn either(name: &str, on: &str, off: &str, default: bool) -> bool {
    read(name, |v| parse_either(v, on, off)).unwrap_or(default)
}

/// `Some(true)` for `on`, `Some(false)` for `off`, `None` otherwise.
pub(crate) fn parse_either(v: &str, on: &str, off: &str) -> Option<bool> {
    (v == on || v == off).then_some(v == on)
}

/// `name` as a number in `range` that `accept` takes.
pub(crate) fn number(name: &str, range: std::ops::RangeInclusive<u64>, accept: impl Fn(u64) -> bool) -> Option<u64> {
    read(name, |v| {
        v.parse::<u64>().ok().filter(|n| range.contains(n) && accept(*n))
    })
}

/// A switch's value, if it is one.
pub(crate) fn parse_switch(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "0" | "off" | "false" | "no" => Some(false),
        "1" | "on" | "true" | "yes" => Some(true),
        _ => None,
    }
}

/// A fraction in (0, 1], or `Some(None)` for `0`, `off`, `none` or `false`.
pub(crate) fn parse_fraction(v: &str) -> Option<Option<f32>> {
    if matches!(v.to_ascii_lowercase().as_str(), "off" | "none" | "false") {
        return Some(None);
    }
    match v.parse::<f32>() {
        Ok(0.0) => Some(None),
        Ok(f) if f > 0.0 && f <= 1.0 => Some(Some(f)),
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
                "tilefuse: {name} is not a tilefuse setting and is ignored (tilefuse::settings::SETTINGS lists them)"
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
        assert_eq!(parse_fraction("0.5"), Some(Some(0.5)));
        assert_eq!(parse_fraction("1"), Some(Some(1.0)));
        assert_eq!(parse_fraction("0"), Some(None));
        assert_eq!(parse_fraction("off"), Some(None));
        assert_eq!(parse_fraction("1.5"), None);
        assert_eq!(parse_fraction("-0.5"), None);
        assert_eq!(parse_fraction("half"), None);
        assert_eq!(parse_either("loads", "shuffles", "loads"), Some(false));
        assert_eq!(parse_either("shuffles", "shuffles", "loads"), Some(true));
        assert_eq!(parse_either("shuffle", "shuffles", "loads"), None);
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
        // benches names a listed setting.
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
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
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
    }
}
