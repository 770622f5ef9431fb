//! Lists the instruction forms of PTX files (as `ptx_gen` writes them) that
//! the GPU interpreter lacks, most frequent first: the tool that extends
//! `src/kernels/ptx_vm/forms.txt`.
//!
//! `cargo run --example ptx_vm_forms -- FILE.ptx...` prints, per missing
//! form, how many kernels use it, and how many kernels the interpreter can
//! already run (or could not be read). With `--core` first, forms outside
//! the core (the forms the interpreter's first module has) count as missing.

use std::collections::{HashMap, HashSet};
use tilefuse::kernels::ptx_vm::{forms, forms_of};

fn main() {
    let core = std::env::args().nth(1).is_some_and(|a| a == "--core");
    let known: HashSet<&str> = forms()
        .iter()
        .copied()
        .take(if core {
            tilefuse::kernels::ptx_vm::core_forms()
        } else {
            usize::MAX
        })
        .collect();
    let mut missing: HashMap<String, usize> = HashMap::new();
    let (mut runnable, mut unreadable, mut total) = (0, 0, 0);
    for path in std::env::args().skip(1 + usize::from(core)) {
        total += 1;
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{path}: {e}");
                unreadable += 1;
                continue;
            }
        };
        match forms_of(&text) {
            Ok(list) => {
                let lacking: HashSet<String> = list.into_iter().filter(|f| !known.contains(f.as_str())).collect();
                if lacking.is_empty() {
                    runnable += 1;
                }
                for f in lacking {
                    *missing.entry(f).or_default() += 1;
                }
            }
            Err(e) => {
                eprintln!("{path}: {e}");
                unreadable += 1;
            }
        }
    }
    let mut missing: Vec<_> = missing.into_iter().collect();
    missing.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (form, n) in &missing {
        println!("{n:8} {form}");
    }
    eprintln!("{total} kernels: {runnable} run on the interpreter as it is, {unreadable} not readable");
}
