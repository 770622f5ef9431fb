//! Realization: the one place that knows every layer.
//!
//! `realize` reads as the pipeline: collect → fuse (plans are cached by the
//! subgraph's structure) → run on the outputs' device → write back. The
//! graph lock is held only to collect and to write back, never while work
//! runs, so other threads keep recording ops meanwhile. Collecting walks the
//! live graph once for the subgraph's plan-cache key and data leaves; only a
//! plan-cache miss detaches the subgraph (a [`Subgraph`]) to fuse it.
//!
//! On the CPU the plan runs on the tile executor and realize returns when
//! the results are computed. On a CUDA device the kernels are compiled
//! (cached per device and program), queued on the device's streams, and
//! realize returns once they are queued: the results are device storage,
//! and reading one ([`Tensor::to_vec`](crate::Tensor::to_vec) and friends) waits for the kernels
//! that compute it. Device failures found while queueing come back from
//! realize; a failure inside a kernel comes back from the read that waits.
//!
//! Each realization measures itself ([`RealizeStats`]): whether the plan
//! came from the cache, the time spent fusing and compiling (the first-call
//! latency of a new pipeline), the kernels launched and the bytes uploaded.
//! [`Tensor::realize_with_stats`](crate::Tensor::realize_with_stats) returns them; [`last_realize_stats`] gives
//! those of the calling thread's last realization, including the ones
//! `to_vec` makes. With the `cuda` feature, on request (`time_launches`)
//! each GPU kernel launch is timed with CUDA events (`launch_times`).

mod backends;
mod host;

pub use backends::*;

use crate::config::{Config, FusionConfig};
use crate::device::Device;
use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::fusion::{self, FusionOptions, Plan, TileTarget};
use crate::graph::{self, NodeIndex, Op, Subgraph};
use crate::shape::Shape;
use crate::storage::Storage;
use smallvec::SmallVec;
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one realization did and how long its host-side steps took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealizeStats {
    /// The device the outputs were computed on.
    pub device: Device,
    /// Whether the fusion plan came from the plan cache (false when nothing
    /// needed computing).
    pub plan_cache_hit: bool,
    /// Time spent walking the live graph for what needs computing: the
    /// plan-cache key and the data leaves of its subgraph.
    pub collect_time: Duration,
    /// Time spent looking the plan up by that key, and on a miss detaching
    /// the subgraph and grouping it into kernels.
    pub fuse_time: Duration,
    /// Time spent generating PTX and loading modules (or finding them in the
    /// device's program cache), planning the streams and setting up the
    /// plan's counters; zero on the CPU. When a new pipeline compiles while
    /// its host inputs upload, this is the compile's own time.
    pub compile_time: Duration,
    /// Kernels launched (queued on a GPU, run on the CPU).
    pub kernels_launched: usize,
    /// Host buffers copied to the device for this realization.
    pub uploads: usize,
    /// Bytes of those copies.
    pub upload_bytes: usize,
    /// Time spent finding the inputs on the device, or uploading them; zero
    /// on the CPU. When the kernels were compiled during the uploads (a new
    /// pipeline on host data), only the part of the uploads that outlasted
    /// the compile.
    pub upload_time: Duration,
    /// Time spent taking the output and intermediate buffers from the
    /// allocator; zero on the CPU.
    pub alloc_time: Duration,
    /// Time spent queueing (GPU) or running (CPU) the kernels.
    pub launch_time: Duration,
    /// Time spent storing the results in their nodes, which lets go of the
    /// nodes' inputs.
    pub write_back_time: Duration,
    /// Host time of the whole realization. On a GPU the kernels are only
    /// queued by then, so this is the host's cost, not the kernels' time.
    pub total_time: Duration,
}

impl RealizeStats {
    /// The timed phases of the realization, in the order they begin, named.
    /// Compile and inputs may run at the same time (a new pipeline on host
    /// data compiles while it uploads); their times are then split so that
    /// together they take the time they took at once, and all the phases
    /// together take at most `total_time`.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).exp();
    /// let stats = y.realize_with_stats().unwrap();
    /// let timed: std::time::Duration = stats.phases().iter().map(|&(_, d)| d).sum();
    /// assert!(timed <= stats.total_time);
    /// assert!(stats.launch_time > std::time::Duration::ZERO);
    /// ```
    pub fn phases(&self) -> [(&'static str, Duration); 7] {
        [
            ("collect", self.collect_time),
            ("fuse", self.fuse_time),
            ("compile", self.compile_time),
            ("inputs", self.upload_time),
            ("alloc", self.alloc_time),
            ("launch", self.launch_time),
            ("write back", self.write_back_time),
        ]
    }
}

thread_local! {
    static LAST: Cell<Option<RealizeStats>> = const { Cell::new(None) };
}

/// The statistics of the calling thread's most recent realization that had
/// something to compute, if any.
pub fn last_realize_stats() -> Option<RealizeStats> {
    LAST.with(Cell::get)
}

/// Computes the graph nodes `outputs` that are not realized yet, on
/// `device` under `config`, and stores each result in its node, which
/// becomes `Op::Data` and lets go of its inputs.
pub(crate) fn realize(outputs: &[NodeIndex], device: Device, config: &Config) -> Result<RealizeStats> {
    let started = Instant::now();
    config.validate()?;
    let target = backends::open(device, config)?;
    let mut stats = RealizeStats {
        device: target.device(),
        ..RealizeStats::default()
    };
    let options = fusion_options(stats.device, &config.fusion);
    let Some(collected) = collect(outputs, &options) else {
        make_resident(outputs, &*target, &mut stats)?;
        return Ok(stats);
    };
    // Each phase ends at one reading of the clock, where the next begins.
    let collected_at = Instant::now();
    stats.collect_time = collected_at - started;
    let Collected {
        nodes,
        shapes,
        key,
        leaves,
        scalars,
    } = collected;
    let (plan, leaves, scalars, fused) = fuse(&nodes, &key, leaves, scalars, &options, &mut stats, collected_at)?;
    let (storages, ran) = target.run(&plan, &leaves, &scalars, &shapes, &mut stats, fused)?;
    write_back(&nodes, storages);
    drop((leaves, plan));
    let written = Instant::now();
    stats.write_back_time = written - ran;
    stats.total_time = written - started;
    LAST.with(|last| last.set(Some(stats)));
    Ok(stats)
}

/// A device a realization runs on, opened once for the whole realization:
/// the CPU executor (`host.rs`) or a back end of the build's features
/// (`backends.rs` opens them).
trait Backend {
    /// The device as the tensors name it.
    fn device(&self) -> Device;

    /// Runs the plan's kernels over the data leaves `leaves` and the
    /// constants `scalars` (`shapes` are the outputs', for messages),
    /// adding what it did to `stats`, its phases timed from `since`; one
    /// storage per output of the plan, and when the kernels were run (CPU)
    /// or queued (GPU).
    fn run(
        &self,
        plan: &Arc<Plan>,
        leaves: &[Arc<Storage>],
        scalars: &[Scalar],
        shapes: &[Shape],
        stats: &mut RealizeStats,
        since: Instant,
    ) -> Result<(Vec<Arc<Storage>>, Instant)>;

    /// Makes the device copies of `host` (host storages of outputs handled
    /// as living on this device) that later runs find, adding the uploads
    /// to `stats`.
    fn make_resident(&self, host: &[Arc<Storage>], stats: &mut RealizeStats) -> Result<()>;
}

/// Uploads the data of outputs that are handled as living on a GPU but hold
/// host data (a [`Tensor::to`](crate::Tensor::to) of host data), so that
/// realizing such a tensor leaves it resident on its device, as for a
/// computed one.
fn make_resident(outputs: &[NodeIndex], target: &dyn Backend, stats: &mut RealizeStats) -> Result<()> {
    let host: Vec<Arc<Storage>> = graph::with_graph(|g| {
        outputs
            .iter()
            .filter_map(|&n| match &g.node(n).op {
                Op::Data(s) if matches!(**s, Storage::Host(_)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    });
    if host.is_empty() {
        return Ok(());
    }
    target.make_resident(&host, stats)
}

/// The storages of a subgraph's data leaves, in node order: the inputs of its plan.
type Leaves = SmallVec<[Arc<Storage>; 8]>;

/// The values of a subgraph's `Full` constants, in node order: the scalar
/// arguments of its plan's kernels.
type Scalars = SmallVec<[Scalar; 4]>;

/// What a realization computes, as one walk of the live graph found it.
struct Collected {
    /// The distinct output nodes that still need computing.
    nodes: Vec<NodeIndex>,
    /// Their shapes.
    shapes: Vec<Shape>,
    /// The plan-cache key of the subgraph they depend on.
    key: fusion::GraphKey,
    /// That subgraph's data leaves.
    leaves: Leaves,
    /// That subgraph's constants.
    scalars: Scalars,
}

/// The output nodes that still need computing, with the key and the data
/// leaves of the subgraph they depend on, written by one walk of the live
/// graph without detaching the subgraph (a plan-cache hit needs no more);
/// `None` if every output is realized. Common subexpressions, constant
/// folding and view peepholes were applied when the nodes were recorded.
fn collect(outputs: &[NodeIndex], options: &FusionOptions) -> Option<Collected> {
    graph::with_graph(|g| {
        let mut nodes: Vec<NodeIndex> = Vec::new();
        let mut shapes: Vec<Shape> = Vec::new();
        for &n in outputs {
            let node = g.node(n);
            if !matches!(node.op, Op::Data(_)) && !nodes.contains(&n) {
                nodes.push(n);
                shapes.push(node.shape.clone());
            }
        }
        if nodes.is_empty() {
            return None;
        }
        let mut key = fusion::KeyWriter::with_capacity(16);
        let mut leaves = Leaves::new();
        let mut scalars = Scalars::new();
        let positions = g.walk(&nodes, |node, inputs| {
            key.node(&node.op, node.dtype, node.shape.dims(), inputs);
            match &node.op {
                Op::Data(s) => leaves.push(s.clone()),
                Op::Full(s) => scalars.push(*s),
                _ => {}
            }
        });
        Some(Collected {
            key: key.finish(&positions, options),
            nodes,
            shapes,
            leaves,
            scalars,
        })
    })
}

/// The plan of the subgraph `nodes` depend on, whose key, data leaves and
/// constants [`collect`] found, and its data leaves and constants: from the plan cache when a
/// structurally equal subgraph was fused before with the same options, else
/// the subgraph is detached and fused (and cached). Timed from
/// `since`; also returns when it was done.
fn fuse(
    nodes: &[NodeIndex],
    key: &fusion::GraphKey,
    leaves: Leaves,
    scalars: Scalars,
    options: &FusionOptions,
    stats: &mut RealizeStats,
    since: Instant,
) -> Result<(Arc<Plan>, Leaves, Scalars, Instant)> {
    let (plan, leaves, scalars, hit) = match fusion::cached_plan(key) {
        Some(plan) => (plan, leaves, scalars, true),
        None => {
            // Detached now, the subgraph may differ from the walk's if
            // another thread realized some of its nodes meanwhile; its plan,
            // leaves and constants are taken from it alone, so they agree.
            // (Its key is written again from it: a miss costs a fusion anyway.)
            let sub = graph::extract(nodes);
            let (plan, hit) = fusion::plan_traced(&sub, options)?;
            (plan, data_leaves(&sub), full_values(&sub), hit)
        }
    };
    let fused = Instant::now();
    stats.plan_cache_hit = hit;
    stats.fuse_time = fused - since;
    Ok((plan, leaves, scalars, fused))
}

/// The storages of `sub`'s data leaves, in node order.
pub(super) fn data_leaves(sub: &Subgraph) -> Leaves {
    sub.nodes
        .iter()
        .filter_map(|n| match &n.op {
            Op::Data(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// The values of `sub`'s `Full` constants, in node order.
pub(super) fn full_values(sub: &Subgraph) -> Scalars {
    sub.nodes
        .iter()
        .filter_map(|n| match n.op {
            Op::Full(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// The values of `kernel`'s scalar arguments, taken from the constants of
/// the subgraph its plan runs on.
pub(super) fn kernel_scalars(kernel: &fusion::PlannedKernel, scalars: &[Scalar]) -> Result<SmallVec<[Scalar; 4]>> {
    kernel
        .scalars
        .iter()
        .map(|&k| {
            scalars.get(k).copied().ok_or_else(|| Error::KernelArguments {
                program: kernel.program.name.clone(),
                reason: "a constant position past the subgraph's constants".into(),
            })
        })
        .collect()
}

/// How graphs realized on `device` under the fusion settings `config` are
/// fused.
pub fn fusion_options(device: Device, config: &FusionConfig) -> FusionOptions {
    let target = match device {
        Device::Cpu => TileTarget::Cpu,
        Device::Cuda(_) => TileTarget::Gpu,
    };
    FusionOptions::for_target(target, config)
}

/// Stores each computed storage in its node.
fn write_back(nodes: &[NodeIndex], storages: Vec<Arc<Storage>>) {
    graph::with_graph(|g| {
        for (&n, s) in nodes.iter().zip(storages) {
            g.set_data(n, s);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    /// The graph nodes of `tensors`.
    fn nodes_of(tensors: &[&Tensor]) -> Vec<NodeIndex> {
        tensors.iter().map(|t| t.node()).collect()
    }

    /// What `collect` finds for `outputs` against the detached subgraph:
    /// the same plan-cache key and the same leaves, in the same order.
    fn check_collect(outputs: &[&Tensor]) {
        for options in [FusionOptions::cpu(), FusionOptions::gpu()] {
            let c = collect(&nodes_of(outputs), &options).expect("something to compute");
            let sub = graph::extract(&c.nodes);
            assert_eq!(c.key, fusion::GraphKey::new(&sub, &options));
            let leaves = data_leaves(&sub);
            assert_eq!(c.leaves.len(), leaves.len());
            assert!(c.leaves.iter().zip(&leaves).all(|(a, b)| Arc::ptr_eq(a, b)));
        }
    }

    #[test]
    fn the_walk_writes_the_key_and_leaves_of_the_detached_subgraph() {
        let a = Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[3, 4]);
        let b = Tensor::from_vec((0..12).map(|i| (i * 7 % 5) as f32).collect(), &[3, 4]);
        let w = Tensor::from_vec(vec![0.5f32, 1.0, 1.5, 2.0], &[4]);
        // A diamond (a shared input and a shared node), a broadcast, a
        // constant, a reduction kept and one dropped.
        let s = &a * &b;
        let y = ((&s + &w).exp() - &s * 2.0f32).sum(&[1], true);
        check_collect(&[&y]);
        // Several outputs, one listed twice, one the input of another, and a
        // realized node inside the subgraph (a data leaf there).
        let z = (&a - &b).tanh();
        let m = z.max(&[0], false);
        check_collect(&[&m, &z, &m, &y]);
        s.realize().unwrap();
        let u = (&s + &a).relu();
        check_collect(&[&u, &y]);
        // The same structure over the leaves in the other order: one key,
        // the leaves in the order the walk meets them.
        let v = (&b - &a).sigmoid();
        check_collect(&[&v]);
        let opts = FusionOptions::cpu();
        let u = (&a - &b).sigmoid();
        let (cv, cu) = (
            collect(&[v.node()], &opts).unwrap(),
            collect(&[u.node()], &opts).unwrap(),
        );
        assert_eq!(cv.key, cu.key);
        assert!(Arc::ptr_eq(&cv.leaves[0], &cu.leaves[1]) && Arc::ptr_eq(&cv.leaves[1], &cu.leaves[0]));
    }

    #[test]
    fn a_cache_hit_runs_on_its_own_leaves_in_order() {
        // Three leaves of three shapes, in an order that matters: a leaf
        // out of place gives wrong values or a length error.
        let pipeline = |k: f32| {
            let a: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37 + k).sin()).collect();
            let w: Vec<f32> = (0..4).map(|i| 0.5 + i as f32 * k).collect();
            let c: Vec<f32> = (0..3).map(|i| 1.0 - i as f32 * 0.25 * k).collect();
            let want: Vec<f32> = (0..3)
                .map(|r| {
                    (0..4)
                        .map(|j| ((a[r * 4 + j] as f64 - w[j] as f64) * c[r] as f64).exp())
                        .sum::<f64>() as f32
                })
                .collect();
            let y = ((Tensor::from_vec(a, &[3, 4]) - Tensor::from_vec(w, &[4])) * Tensor::from_vec(c, &[3, 1]))
                .exp()
                .sum(&[1], false);
            let stats = y.realize_with_stats().unwrap();
            let got = y.to_vec::<f32>().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{got:?} against {want:?}");
            }
            stats.plan_cache_hit
        };
        pipeline(0.5);
        for k in [0.25, 1.5, -0.75] {
            assert!(pipeline(k), "a repeated pipeline finds its plan");
        }
    }

    #[test]
    fn a_repeated_pipeline_finds_its_plan_from_the_walk() {
        let run = || {
            let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3]);
            let y = (&x * &x + 1.0f32).sqrt().sum(&[1], false);
            let stats = y.realize_with_stats().unwrap();
            (y.to_vec::<f32>().unwrap(), stats)
        };
        let (first, _) = run();
        let hits = fusion::cache_stats().hits;
        let (again, stats) = run();
        assert!(stats.plan_cache_hit);
        assert!(fusion::cache_stats().hits > hits);
        let opts = FusionOptions::cpu();
        let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3]);
        let y = (&x * &x + 1.0f32).sqrt().sum(&[1], false);
        let c = collect(&[y.node()], &opts).unwrap();
        assert!(
            fusion::cached_plan(&c.key).is_some(),
            "the walk's key finds the plan the first call cached"
        );
        assert_eq!(first, again);
        let want: Vec<f32> = [[1.0f64, -2.0, 3.0], [-4.0, 5.0, -6.0]]
            .iter()
            .map(|r| r.iter().map(|v| (v * v + 1.0).sqrt()).sum::<f64>() as f32)
            .collect();
        for (g, w) in again.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5 * w.abs(), "{g} against {w}");
        }
    }
}
