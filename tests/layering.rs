//! The layer order of `src/`, checked: every `crate::` path in the code of
//! a file (its `use` lines and the paths in its items and expressions;
//! comments and string literals are not read) must name a module that the
//! file's layer may use.
//!
//! The order is written as data ([`LAYERS`]): the bottom vocabulary and
//! value types, then the tile API, storage, the kernel IR, its back ends,
//! the graph, fusion, the device layer and its compile service, the runtime and the tensor front
//! end. The imports that still go against it are listed in [`KNOWN`], each
//! with its reason, so that a new one fails this test while the list
//! documents what a later change removes; an entry that no longer matches
//! any import fails the test too, so the list only shrinks.
//!
//! The sources are read through `CARGO_MANIFEST_DIR`; where that has no
//! `src` (the test binary runs on another machine) the test prints a line
//! and passes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers of the crate, each with the layers it may use besides
/// itself; a file belongs to the longest layer its module path starts
/// with. `"bottom"` stands for every layer of [`BOTTOM`] and `"all"` for
/// every layer.
const LAYERS: &[(&str, &[&str])] = &[
    // The bottom: the shared vocabulary (op enums, padding, memory order,
    // scope), element types, the `Device` value, the config, errors and shapes.
    ("ops", &[]),
    ("dtype", &[]),
    ("place", &[]),
    ("config", &["ops", "error"]),
    ("error", &["ops", "dtype"]),
    ("shape", &["ops", "dtype", "error"]),
    // The counter-based generator every back end computes alike.
    ("philox", &["dtype"]),
    // The host tile API, and host and device storage.
    ("tile", &["bottom"]),
    ("storage", &["bottom"]),
    // The kernel IR and its back ends; `ptx_vm` runs `ptx_gen`'s modules.
    ("kernels::ir", &["bottom", "tile"]),
    ("kernels::cpu", &["bottom", "tile", "kernels::ir"]),
    ("kernels::ptx_gen", &["bottom", "tile", "kernels::ir"]),
    (
        "kernels::ptx_vm",
        &["bottom", "tile", "kernels::ir", "kernels::ptx_gen"],
    ),
    (
        "kernels",
        &[
            "bottom",
            "tile",
            "kernels::ir",
            "kernels::cpu",
            "kernels::ptx_gen",
            "kernels::ptx_vm",
        ],
    ),
    // The op graph knows nothing of devices or kernels.
    ("graph", &["bottom", "storage"]),
    ("fusion", &["bottom", "graph", "kernels::ir"]),
    // The device layer: the driver, memory, streams and modules; it never
    // sees a kernel program.
    ("device", &["bottom", "storage"]),
    // The compile service on top of it: programs to loaded kernels.
    (
        "device::cuda::compile",
        &[
            "bottom",
            "storage",
            "kernels::ir",
            "kernels::ptx_gen",
            "kernels::ptx_vm",
            "device",
        ],
    ),
    // The runtime knows every layer but the front end that calls it.
    (
        "runtime",
        &[
            "bottom",
            "tile",
            "storage",
            "kernels::ir",
            "kernels::cpu",
            "kernels::ptx_gen",
            "kernels::ptx_vm",
            "kernels",
            "graph",
            "fusion",
            "device",
            "device::cuda::compile",
        ],
    ),
    ("tensor", &["all"]),
    // Sharding over a mesh of devices, written on top of the front end.
    ("mesh", &["all"]),
    // The crate root (`lib.rs`).
    ("", &["all"]),
];

/// The layers `"bottom"` stands for.
const BOTTOM: &[&str] = &["ops", "dtype", "place", "config", "error", "shape", "philox"];

/// The items of the crate root that re-export a layer's (`crate::DType`).
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Config", "config"),
    ("Device", "place"),
    ("DType", "dtype"),
    ("Element", "dtype"),
    ("Scalar", "dtype"),
    ("Error", "error"),
    ("Result", "error"),
    ("Shape", "shape"),
    ("MAX_RANK", "shape"),
    ("Tensor", "tensor"),
    ("Mesh", "mesh"),
    ("Sharded", "mesh"),
    ("RealizeStats", "runtime"),
    ("HostBuffer", "storage"),
];

/// The imports that still go against [`LAYERS`]: a file (under `src/`), the
/// layer it uses, and why.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "kernels/cpu/mod.rs",
        "storage",
        "the executor's arguments are `HostBuffer`s, which live in `storage.rs` beside `Storage`",
    ),
    (
        "kernels/cpu/tests/mod.rs",
        "storage",
        "test only: the executor's arguments are `HostBuffer`s",
    ),
    (
        "kernels/cpu/elementwise.rs",
        "graph",
        "`gelu_erf` is the reference evaluator's own, so the two agree bit for bit",
    ),
    (
        "kernels/ptx_gen/math64/tests.rs",
        "graph",
        "test only: the f64 model is compared with the reference evaluator's `gelu_erf`",
    ),
    (
        "kernels/ir/tests/last_point.rs",
        "kernels::cpu",
        "test only: last-point programs are run on the CPU executor",
    ),
    (
        "kernels/ptx_gen/math/tests.rs",
        "kernels::cpu",
        "test only: the GPU's f32 sequences are held to the GPU tests' tolerances of the CPU executor's forms",
    ),
    (
        "kernels/ir/tests/last_point.rs",
        "storage",
        "test only: the CPU executor's arguments are `HostBuffer`s",
    ),
    (
        "kernels/ptx_vm/tests.rs",
        "kernels::cpu",
        "test only: the interpreter's CPU model is compared with the CPU executor",
    ),
    (
        "kernels/ptx_vm/tests.rs",
        "storage",
        "test only: the CPU executor's arguments are `HostBuffer`s",
    ),
    (
        "fusion/cache.rs",
        "storage",
        "test only: graphs with data leaves are built from `Storage`",
    ),
    (
        "runtime/mod.rs",
        "tensor",
        "only its tests, which build their graphs through `Tensor` (realize takes node ids)",
    ),
];

/// The layer of module path `module` (`kernels::ir::verify`): the longest
/// layer it starts with.
fn layer_of(module: &str) -> Option<&'static str> {
    LAYERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| {
            name.is_empty() || module == *name || module.strip_prefix(name).is_some_and(|r| r.starts_with("::"))
        })
        .max_by_key(|name| name.len())
}

/// The layers `layer` may use, itself included.
fn allowed(layer: &str) -> BTreeSet<&'static str> {
    let uses = LAYERS.iter().find(|(name, _)| *name == layer).unwrap().1;
    let mut set: BTreeSet<&'static str> = BTreeSet::new();
    for &u in uses {
        match u {
            "bottom" => set.extend(BOTTOM),
            "all" => set.extend(LAYERS.iter().map(|(name, _)| *name)),
            _ => {
                assert!(
                    layer_of(u) == Some(u),
                    "LAYERS: `{u}` (used by `{layer}`) is not a layer"
                );
                set.insert(u);
            }
        }
    }
    set.extend(LAYERS.iter().map(|(name, _)| *name).filter(|name| *name == layer));
    set
}

/// The module path of a file under `src/` (`kernels/ir/mod.rs` is
/// `kernels::ir`, `lib.rs` the root).
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// `text` with comments, string literals and character literals blanked
/// out (newlines kept), so that only code is searched.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !is_ident(chars.get(i.wrapping_sub(1))) {
            // A raw string: r"..." or r#"..."#.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let end: String = std::iter::once('"')
                .chain(std::iter::repeat('#').take(hashes))
                .collect();
            let start = i + 2 + hashes;
            let rest: String = chars[start..].iter().collect();
            let len = rest
                .find(&end)
                .map_or(chars.len() - start, |at| rest[..at].chars().count());
            for &k in &chars[i..(start + len + end.len()).min(chars.len())] {
                out.push(blank(k));
            }
            i = start + len + end.len();
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x' or '\n'), not a lifetime.
            out.push(' ');
            i += 1;
            if chars.get(i) == Some(&'\\') {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The paths a `crate::` path at the start of `rest` names, with use groups
/// expanded (`crate::{dtype::DType, ops}` names `dtype::DType` and `ops`),
/// each as its segments.
fn paths(rest: &str) -> Vec<Vec<String>> {
    let mut prefix = vec![];
    let mut s = rest.trim_start();
    loop {
        if let Some(group) = s.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(at, _)| at);
            let mut items = vec![];
            let (mut depth, mut start) = (0, 0);
            for (at, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[start..at]);
                        start = at + 1;
                    }
                    _ => {}
                }
            }
            items.push(&group[start..end]);
            return items
                .into_iter()
                .filter(|item| !item.trim().is_empty())
                .flat_map(paths)
                .map(|p| prefix.iter().cloned().chain(p).collect())
                .collect();
        }
        let len = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
        if len == 0 {
            return vec![prefix];
        }
        prefix.push(s[..len].to_string());
        match s[len..].trim_start().strip_prefix("::") {
            Some(more) => s = more.trim_start(),
            None => return vec![prefix],
        }
    }
}

/// The layer a path after `crate::` leads into, or `None` for a path the
/// tables do not know.
fn target_of(path: &[String]) -> Option<&'static str> {
    let first = path.first()?;
    if let Some((_, layer)) = ROOT_ITEMS.iter().find(|(item, _)| item == first) {
        return Some(layer);
    }
    let layer = layer_of(&path.join("::"))?;
    // The root matches every path; a path into no layer is unknown.
    (!layer.is_empty()).then_some(layer)
}

/// The source files under `dir`, recursively.
fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn every_import_follows_the_layer_order() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if !src.is_dir() {
        println!("layering: skipped, no sources at {}", src.display());
        return;
    }
    let mut files = vec![];
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = vec![];
    let mut used_known = BTreeSet::new();
    let mut imports = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let shown = relative.to_string_lossy().replace('\\', "/");
        let module = module_of(relative);
        let Some(layer) = layer_of(&module) else {
            problems.push(format!("src/{shown}: module `{module}` is in no layer of LAYERS"));
            continue;
        };
        let may = allowed(layer);
        let text = std::fs::read_to_string(file).unwrap();
        let code = code_only(&text);
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().next_back();
            if is_ident(before.as_ref()) {
                continue;
            }
            let line = code[..at].matches('\n').count() + 1;
            let source_line = text.lines().nth(line - 1).unwrap_or_default().trim();
            for path in paths(&code[at + "crate::".len()..]) {
                imports += 1;
                let shown_path = format!("crate::{}", path.join("::"));
                let Some(target) = target_of(&path) else {
                    problems.push(format!(
                        "src/{shown}:{line}: `{shown_path}` leads into no layer of LAYERS or ROOT_ITEMS (in `{source_line}`)"
                    ));
                    continue;
                };
                if may.contains(target) {
                    continue;
                }
                if let Some(known) = KNOWN.iter().position(|(f, t, _)| *f == shown && *t == target) {
                    used_known.insert(known);
                    continue;
                }
                let layer_name = if layer.is_empty() { "the crate root" } else { layer };
                problems.push(format!(
                    "src/{shown}:{line}: `{layer_name}` may not use `{target}`, but imports `{shown_path}` \
                     (in `{source_line}`); it may use {}",
                    may.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    for (i, (file, target, reason)) in KNOWN.iter().enumerate() {
        if !used_known.contains(&i) {
            problems.push(format!(
                "KNOWN lists src/{file} -> `{target}` ({reason}), but no such import is left: remove the entry"
            ));
        }
    }
    println!(
        "layering: {} files, {imports} crate paths, {} known exceptions",
        files.len(),
        KNOWN.len()
    );
    assert!(
        problems.is_empty(),
        "imports against the layer order of tests/layering.rs:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_reader_sees_code_only() {
    let text = "use crate::ops::Padding; // crate::graph::Op\nlet s = \"crate::device\";\n/* crate::runtime */ let c = '\"'; crate::dtype::DType";
    let code = code_only(text);
    assert_eq!(code.matches("crate::").count(), 2, "{code}");
    assert_eq!(code.lines().count(), 3);
    assert_eq!(
        paths("{dtype::{DType, Scalar}, ops}; more"),
        vec![vec!["dtype", "DType"], vec!["dtype", "Scalar"], vec!["ops"]]
    );
    assert_eq!(
        paths("kernels::ir::{\n    Access,\n    Builder,\n};"),
        vec![vec!["kernels", "ir", "Access"], vec!["kernels", "ir", "Builder"]]
    );
    assert_eq!(
        target_of(&["kernels".into(), "ir".into(), "verify".into()]),
        Some("kernels::ir")
    );
    assert_eq!(target_of(&["kernels".into()]), Some("kernels"));
    assert_eq!(target_of(&["DType".into()]), Some("dtype"));
    assert_eq!(target_of(&["nowhere".into()]), None);
}
