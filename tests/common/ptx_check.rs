//! Assembling many generated PTX modules with `ptxas`, quickly.
//!
//! [`Modules`] collects the modules of many programs for sm_75, sm_80 and sm_90,
//! keeps one of each distinct text (two programs that differ only in name
//! give the same module up to the entry's name), and [`Modules::assemble`]
//! runs `ptxas -v` on batches of modules: the modules of one batch share
//! their `.version`/`.target` header and are concatenated into one module,
//! each entry renamed by a numeric suffix so the names are unique (and each
//! module-scope `.const` table declared once). Labels,
//! registers and spills are reported per kernel under its original name.
//! `TILEFUSE_DUMP_PTX=dir` writes every distinct module to `dir`.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use tilefuse::kernels::ir::Program;
use tilefuse::kernels::ptx_gen::ptxas::{assemble, KernelResources};
use tilefuse::kernels::ptx_gen::{generate, PtxModule, PtxTarget};
use tilefuse::Error;

/// The targets every program is generated for: sm_75 (no `cp.async`, no
/// bf16 conversion, no `.NaN` min/max) and sm_80 under a CUDA 12.0 driver
/// (the oldest the crate binds), and sm_90 under CUDA 13.0.
pub fn targets() -> [PtxTarget; 3] {
    [
        PtxTarget::for_driver(75, 12000),
        PtxTarget::for_driver(80, 12000),
        PtxTarget::for_driver(90, 13000),
    ]
}

/// Modules per `ptxas` run.
const BATCH: usize = 48;
/// The most `ptxas` processes at a time.
const MAX_THREADS: usize = 4;

/// One kernel as `ptxas -v` reported it.
#[derive(Debug, Clone)]
pub struct Assembled {
    /// Where the program came from (the first label it was added under).
    pub label: String,
    /// The target's compute capability.
    pub sm: u32,
    /// The module as generated.
    pub module: PtxModule,
    /// What `ptxas -v` reported, under the module's own entry name.
    pub resources: KernelResources,
}

/// Distinct generated modules, and the programs that could not be lowered.
#[derive(Default)]
pub struct Modules {
    /// `(sm, first label, module)` for each distinct canonical text, in the order added.
    distinct: Vec<(u32, String, PtxModule)>,
    /// The canonical texts of `distinct`, with their targets.
    seen: HashSet<(u32, String)>,
    /// Modules generated in all, duplicates included.
    pub generated: usize,
    /// Programs `ptx_gen` rejected with `UnsupportedDType`, per target and reason.
    pub not_lowered: BTreeMap<String, usize>,
}

impl Modules {
    /// The distinct modules with their targets' `sm`.
    #[allow(dead_code)]
    pub fn modules(&self) -> impl Iterator<Item = (u32, &PtxModule)> {
        self.distinct.iter().map(|(sm, _, m)| (*sm, m))
    }

    /// Generates `program` for every target. A program `ptx_gen` rejects
    /// with `UnsupportedDType` is counted in [`Modules::not_lowered`]; any
    /// other error is returned.
    pub fn add(&mut self, label: &str, program: &Program) -> Result<(), String> {
        for target in targets() {
            match generate(program, &target) {
                Ok(m) => {
                    self.generated += 1;
                    if self.seen.insert((target.sm, canonical(&m))) {
                        self.distinct.push((target.sm, label.to_string(), m));
                    }
                }
                Err(e @ Error::UnsupportedDType { .. }) => {
                    *self.not_lowered.entry(format!("sm_{}: {e}", target.sm)).or_default() += 1;
                }
                Err(e) => {
                    return Err(format!(
                        "{label}: generating {} for sm_{}: {e}",
                        program.name, target.sm
                    ))
                }
            }
        }
        Ok(())
    }

    /// The number of distinct modules.
    pub fn len(&self) -> usize {
        self.distinct.len()
    }

    /// Assembles every distinct module with `ptxas -v`, in batches, a few
    /// processes at a time. `Err` names the first module `ptxas` rejects,
    /// with its log and text.
    pub fn assemble(&self, ptxas: &Path) -> Result<Vec<Assembled>, String> {
        if let Some(dir) = std::env::var_os("TILEFUSE_DUMP_PTX") {
            for (i, (sm, _, m)) in self.distinct.iter().enumerate() {
                let path = Path::new(&dir).join(format!("{i:05}_{}.sm_{sm}.ptx", m.entry));
                std::fs::write(&path, &m.text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
        }
        let mut groups: BTreeMap<(u32, &str), Vec<usize>> = BTreeMap::new();
        for (i, (sm, _, m)) in self.distinct.iter().enumerate() {
            groups.entry((*sm, header(&m.text).0)).or_default().push(i);
        }
        let batches: Vec<(u32, &[usize])> = groups
            .iter()
            .flat_map(|(&(sm, _), ids)| ids.chunks(BATCH).map(move |c| (sm, c)))
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS));
        let results: Vec<Result<Vec<Assembled>, String>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut out = vec![];
                        loop {
                            let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(sm, ids)) = batches.get(b) else { break };
                            out.push(self.assemble_batch(ptxas, sm, ids));
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("ptxas worker"))
                .collect()
        });
        let mut all = vec![];
        for r in results {
            all.extend(r?);
        }
        Ok(all)
    }

    /// Assembles the modules `ids` (all of one header) as one module.
    fn assemble_batch(&self, ptxas: &Path, sm: u32, ids: &[usize]) -> Result<Vec<Assembled>, String> {
        let (head, _) = header(&self.distinct[ids[0]].2.text);
        let mut text = head.to_string();
        // Module-scope tables (the same text in every module that has one)
        // are declared once per batch.
        let mut declared = HashSet::new();
        for (k, &i) in ids.iter().enumerate() {
            let m = &self.distinct[i].2;
            let body = renamed(header(&m.text).1, &m.entry, &format!("{}_b{k}", m.entry));
            for line in body.lines() {
                if !line.starts_with(".const ") || declared.insert(line.to_string()) {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        let kernels = match assemble(ptxas, &text, sm) {
            Ok(k) => k,
            // Find the module that fails on its own, for a useful message.
            Err(log) => {
                for &i in ids {
                    let (_, label, m) = &self.distinct[i];
                    if let Err(e) = assemble(ptxas, &m.text, sm) {
                        return Err(format!(
                            "{label}: {} (sm_{sm}) failed to assemble:\n{e}\n{}",
                            m.entry, m.text
                        ));
                    }
                }
                return Err(format!("a batch of {} modules failed, none alone:\n{log}", ids.len()));
            }
        };
        let mut out = Vec::with_capacity(ids.len());
        for (k, &i) in ids.iter().enumerate() {
            let (sm, label, m) = &self.distinct[i];
            let name = format!("{}_b{k}", m.entry);
            let mut resources = kernels
                .iter()
                .find(|r| r.name == name)
                .cloned()
                .ok_or_else(|| format!("ptxas -v reported nothing for {name}"))?;
            resources.name.clone_from(&m.entry);
            out.push(Assembled {
                label: label.clone(),
                sm: *sm,
                module: m.clone(),
                resources,
            });
        }
        Ok(out)
    }
}

/// A module's text split after its header (`.version`, `.target`,
/// `.address_size`): the header directives, and everything after them.
fn header(text: &str) -> (&str, &str) {
    const END: &str = "\n.address_size 64\n";
    let at = text
        .find(END)
        .expect("every generated module declares .address_size 64")
        + END.len();
    let start = text.find(".version").expect("every generated module declares .version");
    (&text[start..at], &text[at..])
}

/// `body` with the entry `from` and its parameters renamed to `to`.
fn renamed(body: &str, from: &str, to: &str) -> String {
    body.replace(&format!(".entry {from}("), &format!(".entry {to}("))
        .replace(&format!("{from}_param_"), &format!("{to}_param_"))
}

/// The module's text as a key: the header and body with the entry named
/// `tf_kernel` (the leading comment, which names the program, dropped).
fn canonical(m: &PtxModule) -> String {
    let (head, body) = header(&m.text);
    format!("{head}{}", renamed(body, &m.entry, "tf_kernel"))
}

/// The kernels that spill registers to local memory.
pub fn spilling(all: &[Assembled]) -> Vec<&Assembled> {
    all.iter()
        .filter(|a| a.resources.spill_store_bytes + a.resources.spill_load_bytes > 0)
        .collect()
}

impl std::fmt::Display for Assembled {
    /// "label entry (sm_90): R registers, S bytes smem, A / B bytes spill stores / loads".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.resources;
        write!(
            f,
            "{} {} (sm_{}): {} registers, {} bytes smem, {} / {} bytes spill stores / loads",
            self.label, r.name, self.sm, r.registers, r.shared_bytes, r.spill_store_bytes, r.spill_load_bytes
        )
    }
}

/// "assembled N modules (a for sm_75, b for sm_80, c for sm_90)".
pub fn summary(all: &[Assembled]) -> String {
    let per: Vec<String> = targets()
        .iter()
        .map(|t| format!("{} for sm_{}", all.iter().filter(|a| a.sm == t.sm).count(), t.sm))
        .collect();
    format!("assembled {} modules ({})", all.len(), per.join(", "))
}
