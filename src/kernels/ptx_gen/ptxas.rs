//! Assembling PTX text with NVIDIA's `ptxas`, for tests.
//!
//! Tests of every module that generates PTX assemble it here, so that a
//! module the driver's JIT would reject fails on a machine without a GPU.
//! `ptxas` is found through the environment variable `TILEFUSE_PTXAS`, else
//! on `PATH`, else at `.tools/cuda/nvidia/cu13/bin/ptxas` under the crate root
//! (where `scripts/install-ptxas.sh` puts it). With `TILEFUSE_REQUIRE_PTXAS=1`
//! a missing `ptxas` fails [`ptxas_for_tests`] instead of skipping.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// What `ptxas -v` reports about one kernel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelResources {
    /// The entry's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of local memory written by register spills.
    pub spill_store_bytes: u32,
    /// Bytes of local memory read by register spills.
    pub spill_load_bytes: u32,
    /// Bytes of stack frame per thread.
    pub stack_bytes: u32,
    /// Bytes of static shared memory.
    pub shared_bytes: u32,
}

/// Where `ptxas` is, if anywhere (see the module docs for the search order).
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(named) = crate::config::ptxas_path() {
        // A path that is no file is reported (see `crate::config`).
        return named;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        if let Some(p) = std::env::split_paths(&paths)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
        {
            return Some(p);
        }
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/cuda/nvidia/cu13/bin/ptxas");
    local.is_file().then_some(local)
}

/// `ptxas` for a test: `Some(path)`, or `None` after printing a skip line.
///
/// # Panics
///
/// When `ptxas` is missing and `TILEFUSE_REQUIRE_PTXAS=1` is set.
pub fn ptxas_for_tests(test: &str) -> Option<PathBuf> {
    let found = find_ptxas();
    if found.is_none() {
        if crate::config::require_ptxas() {
            panic!("{test}: ptxas not found and TILEFUSE_REQUIRE_PTXAS=1 (run scripts/install-ptxas.sh)");
        }
        eprintln!("SKIPPED {test}: ptxas not found (set TILEFUSE_PTXAS or run scripts/install-ptxas.sh)");
    }
    found
}

/// Assembles `ptx` for `sm_<sm>` with `ptxas -v`. Returns the resources of
/// each kernel, or `ptxas`'s error output.
pub fn assemble(ptxas: &Path, ptx: &str, sm: u32) -> Result<Vec<KernelResources>, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let stem = format!(
        "tilefuse-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir();
    let input = dir.join(format!("{stem}.ptx"));
    let output = dir.join(format!("{stem}.cubin"));
    std::fs::write(&input, ptx).map_err(|e| format!("writing {}: {e}", input.display()))?;
    let run = Command::new(ptxas)
        .arg("-v")
        .arg(format!("-arch=sm_{sm}"))
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output();
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
    let run = run.map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    if !run.status.success() {
        return Err(text);
    }
    Ok(parse_verbose(&text))
}

/// Parses the `-v` report of `ptxas` into one entry per kernel.
pub fn parse_verbose(text: &str) -> Vec<KernelResources> {
    let mut kernels: Vec<KernelResources> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            kernels.push(KernelResources {
                name,
                ..KernelResources::default()
            });
        } else if let Some(k) = kernels.last_mut() {
            // "8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads".
            let number_before = |word: &str, back: usize| -> Option<u32> {
                let words: Vec<&str> = line.split_whitespace().collect();
                let at = words.iter().position(|w| w.trim_end_matches(',') == word)?;
                words.get(at.checked_sub(back)?)?.parse().ok()
            };
            if line.contains("stack frame") {
                k.stack_bytes = number_before("stack", 2).unwrap_or(0);
                k.spill_store_bytes = number_before("stores", 3).unwrap_or(0);
                k.spill_load_bytes = number_before("loads", 3).unwrap_or(0);
            } else if line.contains("Used") && line.contains("registers") {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let Some(at) = words.iter().position(|w| *w == "Used") {
                    k.registers = words.get(at + 1).and_then(|w| w.parse().ok()).unwrap_or(0);
                }
                if let Some(at) = words.iter().position(|w| w.starts_with("smem")) {
                    k.shared_bytes = words.get(at.wrapping_sub(2)).and_then(|w| w.parse().ok()).unwrap_or(0);
                }
            }
        }
    }
    kernels
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_verbose_report() {
        let text = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'k1' for 'sm_90'\n\
            ptxas info    : Function properties for k1\n    \
            8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
            ptxas info    : Used 23 registers, 1024 bytes smem, 368 bytes cmem[0]\n";
        let k = &super::parse_verbose(text)[0];
        assert_eq!(
            (
                k.name.as_str(),
                k.registers,
                k.spill_store_bytes,
                k.spill_load_bytes,
                k.stack_bytes,
                k.shared_bytes
            ),
            ("k1", 23, 4, 12, 8, 1024)
        );
    }
}
