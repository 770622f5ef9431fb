//! The plan cache: structurally equal graphs share one plan.
//!
//! The key is the graph with each `Data` leaf replaced by its position among
//! the leaves (its shape and dtype are part of the node), plus the options.
//! Keys are hashed, and a hit is confirmed by full equality of the key, so
//! two graphs never share a plan by a hash collision.

use super::{FusionOptions, Plan};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Op, Subgraph};
use crate::shape::Shape;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The number of plans kept before the cache starts over.
const CAPACITY: usize = 4096;

/// Counts of plan cache lookups since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that ran fusion.
    pub misses: u64,
}

/// The plan cache's hit and miss counts.
pub fn cache_stats() -> CacheStats {
    CacheStats {
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
    }
}

static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

/// An op with data replaced by the leaf's position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OpKey {
    Data(usize),
    Other(Op),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct NodeKey {
    op: OpKey,
    shape: Shape,
    dtype: DType,
    inputs: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GraphKey {
    nodes: Vec<NodeKey>,
    outputs: Vec<usize>,
    options: FusionOptions,
}

impl GraphKey {
    fn new(g: &Subgraph, options: &FusionOptions) -> GraphKey {
        let mut leaves = 0;
        let nodes = g
            .nodes
            .iter()
            .map(|n| NodeKey {
                op: match &n.op {
                    Op::Data(_) => {
                        leaves += 1;
                        OpKey::Data(leaves - 1)
                    }
                    op => OpKey::Other(op.clone()),
                },
                shape: n.shape.clone(),
                dtype: n.dtype,
                inputs: n.inputs.to_vec(),
            })
            .collect();
        GraphKey {
            nodes,
            outputs: g.outputs.clone(),
            options: *options,
        }
    }
}

fn cache() -> &'static Mutex<HashMap<GraphKey, Arc<Plan>>> {
    static CACHE: OnceLock<Mutex<HashMap<GraphKey, Arc<Plan>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The cached plan of `g`, or the one `make` builds (cached if it
/// succeeds), and whether it came from the cache.
pub(crate) fn get_or_insert(
    g: &Subgraph,
    options: &FusionOptions,
    make: impl FnOnce() -> Result<Arc<Plan>>,
) -> Result<(Arc<Plan>, bool)> {
    let key = GraphKey::new(g, options);
    if let Some(p) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok((p.clone(), true));
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let plan = make()?;
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= CAPACITY {
        c.clear();
    }
    c.insert(key, plan.clone());
    Ok((plan, false))
}
