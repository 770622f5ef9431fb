//! Realization: the one place that knows every layer.
//!
//! `realize` reads as the pipeline: collect → simplify → fuse (plans are
//! cached by the subgraph's structure) → run → write back. The graph lock is held only to collect and to write back, never
//! while work runs, so other threads keep recording ops meanwhile.

mod host;

pub use host::run_plan as run_plan_on_host;

use crate::device::Device;
use crate::error::Result;
use crate::fusion::{self, FusionOptions, Plan};
use crate::graph::{self, NodeIndex, Op, Subgraph};
use crate::storage::{HostBuffer, Storage};
use crate::tensor::Tensor;
use std::sync::Arc;

/// Computes `outputs` that are not realized yet and stores each result in
/// its node, which becomes `Op::Data` and lets go of its inputs.
pub(crate) fn realize(outputs: &[&Tensor]) -> Result<()> {
    check_devices(outputs)?;
    let Some((nodes, sub)) = collect(outputs) else {
        return Ok(());
    };
    let sub = simplify(sub);
    let plan = fuse(&sub)?;
    let buffers = run(&plan, &sub)?;
    write_back(&nodes, buffers);
    Ok(())
}

/// Fails for tensors on a device this build cannot run on.
fn check_devices(outputs: &[&Tensor]) -> Result<()> {
    for t in outputs {
        if let Device::Cuda(ordinal) = t.device() {
            Device::cuda(ordinal)?;
        }
    }
    Ok(())
}

/// The distinct output nodes that still need computing, and the subgraph
/// they depend on; `None` if every output is realized.
fn collect(outputs: &[&Tensor]) -> Option<(Vec<NodeIndex>, Subgraph)> {
    graph::with_graph(|g| {
        let mut nodes: Vec<NodeIndex> = Vec::new();
        for t in outputs {
            let n = t.node();
            if !matches!(g.node(n).op, Op::Data(_)) && !nodes.contains(&n) {
                nodes.push(n);
            }
        }
        (!nodes.is_empty()).then(|| {
            let sub = g.extract(&nodes);
            (nodes, sub)
        })
    })
}

/// Graph-level rewrites before evaluation. Common subexpressions, constant
/// folding and view peepholes are applied when nodes are recorded, so the
/// collected subgraph is already simplified; this is where passes that need
/// the whole subgraph go.
fn simplify(sub: Subgraph) -> Subgraph {
    sub
}

/// How graphs realized on `device` are fused.
pub fn fusion_options(device: Device) -> FusionOptions {
    match device {
        Device::Cpu => FusionOptions::cpu(),
        Device::Cuda(_) => FusionOptions::gpu(),
    }
}

/// The kernels that compute `sub`: from the plan cache when a structurally
/// equal subgraph was fused before.
fn fuse(sub: &Subgraph) -> Result<Arc<Plan>> {
    fusion::plan(sub, &fusion_options(Device::Cpu))
}

/// Runs the plan's kernels; one row-major host buffer per output of `sub`.
fn run(plan: &Plan, sub: &Subgraph) -> Result<Vec<HostBuffer>> {
    host::run_plan(plan, sub)
}

/// Stores each computed buffer in its node.
fn write_back(nodes: &[NodeIndex], buffers: Vec<HostBuffer>) {
    // The storages are made before locking so no allocation happens under the lock.
    let storages: Vec<Arc<Storage>> = buffers.into_iter().map(|b| Arc::new(Storage::Host(b))).collect();
    graph::with_graph(|g| {
        for (&n, s) in nodes.iter().zip(storages) {
            g.set_data(n, s);
        }
    });
}
