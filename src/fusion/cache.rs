//! The plan cache: structurally equal graphs share one plan.
//!
//! The key is the graph with each `Data` leaf replaced by its position among
//! the leaves (its shape and dtype are part of the node) and each `Full`
//! constant by its position among the constants (its value is a scalar
//! argument of the kernels that read it, given at launch), plus the options,
//! written as a flat list of words with no allocation per node. Keys are
//! hashed, and a hit is confirmed by full equality of the key, so two graphs
//! never share a plan by a hash collision. When the cache holds
//! [`CAPACITY`] plans, a new one replaces the least recently used.

use super::{FusionOptions, Plan};
use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Op, Subgraph};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The number of plans kept.
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

/// The structure of a graph, written as words: each node's op (a data
/// leaf only as "data" and a constant only as "full": their positions among
/// the leaves and constants follow from the order), dtype, shape and
/// inputs, then the outputs. Every list is preceded
/// by its length, so two graphs have the same words only if they are
/// structurally equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GraphKey {
    options: FusionOptions,
    words: Vec<u64>,
}

impl GraphKey {
    pub(crate) fn new(g: &Subgraph, options: &FusionOptions) -> GraphKey {
        let mut key = KeyWriter::with_capacity(g.nodes.len());
        for n in &g.nodes {
            key.node(&n.op, n.dtype, n.shape.dims(), &n.inputs);
        }
        key.finish(&g.outputs, options)
    }
}

/// A [`GraphKey`] written node by node, in topological order, by whoever
/// walks the graph: [`Subgraph`]'s nodes, or the live graph's nodes as
/// [`Graph::walk`](crate::graph::Graph::walk) visits them, which gives the
/// key of the subgraph [`Graph::extract`](crate::graph::Graph::extract)
/// would detach without detaching it.
pub(crate) struct KeyWriter {
    words: Vec<u64>,
    nodes: u64,
}

impl KeyWriter {
    /// A key for about `nodes` nodes.
    pub(crate) fn with_capacity(nodes: usize) -> KeyWriter {
        let mut words = Vec::with_capacity(8 * nodes + 4);
        // The node count, filled in by `finish`.
        words.push(0);
        KeyWriter { words, nodes: 0 }
    }

    /// Adds the next node: its op, dtype, shape and the positions of its inputs.
    pub(crate) fn node(&mut self, op: &Op, dtype: DType, dims: &[usize], inputs: &[usize]) {
        push_op(&mut self.words, op);
        self.words.push(dtype as u64);
        push_list(&mut self.words, dims);
        push_list(&mut self.words, inputs);
        self.nodes += 1;
    }

    /// The key, with the positions of the outputs and the options.
    pub(crate) fn finish(mut self, outputs: &[usize], options: &FusionOptions) -> GraphKey {
        self.words[0] = self.nodes;
        push_list(&mut self.words, outputs);
        GraphKey {
            options: *options,
            words: self.words,
        }
    }
}

/// Node tags of the key: one per op, so that ops never share words.
mod tag {
    pub const DATA: u64 = 0;
    pub const FULL: u64 = 1;
    pub const UNARY: u64 = 2;
    pub const BINARY: u64 = 3;
    pub const WHERE: u64 = 4;
    pub const CAST: u64 = 5;
    pub const REDUCE: u64 = 6;
    pub const RESHAPE: u64 = 7;
    pub const PERMUTE: u64 = 8;
    pub const EXPAND: u64 = 9;
    pub const SLICE: u64 = 10;
    pub const CAT: u64 = 11;
    pub const GATHER: u64 = 12;
    pub const SCAN: u64 = 13;
    pub const RANDOM: u64 = 14;
    pub const SCATTER_ADD: u64 = 15;
}

/// `list`'s length, then its elements.
fn push_list(words: &mut Vec<u64>, list: &[usize]) {
    words.push(list.len() as u64);
    words.extend(list.iter().map(|&x| x as u64));
}

/// The words of one op: its tag, then what tells it from the other ops of
/// that tag.
fn push_op(words: &mut Vec<u64>, op: &Op) {
    match op {
        Op::Data(_) => words.push(tag::DATA),
        // The value is a launch argument, not part of the plan.
        Op::Full(_) => words.push(tag::FULL),
        Op::Unary(u) => words.extend([tag::UNARY, *u as u64]),
        Op::Binary(b) => words.extend([tag::BINARY, *b as u64]),
        Op::Where => words.push(tag::WHERE),
        Op::Cast => words.push(tag::CAST),
        Op::Reduce { op, axes } => {
            words.extend([tag::REDUCE, *op as u64]);
            push_list(words, axes);
        }
        Op::Reshape => words.push(tag::RESHAPE),
        Op::Permute(perm) => {
            words.push(tag::PERMUTE);
            push_list(words, perm);
        }
        Op::Expand => words.push(tag::EXPAND),
        Op::Slice { axis, start, step } => {
            words.extend([tag::SLICE, *axis as u64, *start as u64, *step as u64]);
        }
        Op::Cat { axis } => words.extend([tag::CAT, *axis as u64]),
        Op::Gather { axis, select } => words.extend([tag::GATHER, *axis as u64, *select as u64]),
        Op::Scan { op, axis } => words.extend([tag::SCAN, *op as u64, *axis as u64]),
        Op::ScatterAdd { axis, chunked } => {
            words.extend([tag::SCATTER_ADD, *axis as u64, chunked.map_or(0, |len| len as u64 + 1)])
        }
        Op::Random => words.push(tag::RANDOM),
    }
}

/// Plans by their graphs' keys, each with the tick of its last use.
#[derive(Default)]
struct Plans {
    plans: HashMap<GraphKey, (Arc<Plan>, u64), foldhash::fast::FixedState>,
    /// Counts uses; the plan with the oldest tick is evicted first.
    tick: u64,
}

impl Plans {
    /// The plan of `key`, marked used now.
    fn get(&mut self, key: &GraphKey) -> Option<Arc<Plan>> {
        self.tick += 1;
        let tick = self.tick;
        self.plans.get_mut(key).map(|(plan, used)| {
            *used = tick;
            plan.clone()
        })
    }

    /// Caches `plan` under `key`, evicting the least recently used plan
    /// when the cache is full.
    fn insert(&mut self, key: GraphKey, plan: Arc<Plan>) {
        if self.plans.len() >= CAPACITY && !self.plans.contains_key(&key) {
            let oldest = self
                .plans
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.plans.remove(&oldest);
            }
        }
        self.tick += 1;
        self.plans.insert(key, (plan, self.tick));
    }
}

fn cache() -> &'static Mutex<Plans> {
    static CACHE: OnceLock<Mutex<Plans>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The cached plan of the graph whose key is `key`, counted as a hit; `None`
/// (not counted) if there is none, for the caller to plan the graph with
/// [`get_or_insert`].
pub(crate) fn lookup(key: &GraphKey) -> Option<Arc<Plan>> {
    let plan = cache().lock().unwrap_or_else(|e| e.into_inner()).get(key);
    if plan.is_some() {
        HITS.fetch_add(1, Ordering::Relaxed);
    }
    plan
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
        return Ok((p, true));
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let plan = make()?;
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, plan.clone());
    Ok((plan, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{DType, Scalar};
    use crate::graph::SubNode;
    use crate::ops::{BinaryOp, ReduceOp, UnaryOp};
    use crate::shape::Shape;
    use crate::storage::{HostBuffer, Storage};

    fn node(op: Op, dims: &[usize], dtype: DType, inputs: &[usize]) -> SubNode {
        SubNode {
            op,
            shape: Shape::new(dims),
            dtype,
            inputs: inputs.iter().copied().collect(),
        }
    }

    fn data(dims: &[usize], dtype: DType) -> SubNode {
        let len = dims.iter().product();
        node(
            Op::Data(Arc::new(Storage::Host(HostBuffer::zeros(dtype, len)))),
            dims,
            dtype,
            &[],
        )
    }

    /// `sum(exp(a * b) + 2, axis 1)` over two fresh `[4, 8]` f32 leaves.
    fn base() -> Subgraph {
        let f = DType::F32;
        Subgraph {
            nodes: vec![
                data(&[4, 8], f),
                data(&[4, 8], f),
                node(Op::Binary(BinaryOp::Mul), &[4, 8], f, &[0, 1]),
                node(Op::Unary(UnaryOp::Exp), &[4, 8], f, &[2]),
                node(Op::Full(Scalar::Float(2.0, f)), &[4, 8], f, &[]),
                node(Op::Binary(BinaryOp::Add), &[4, 8], f, &[3, 4]),
                node(
                    Op::Reduce {
                        op: ReduceOp::Sum,
                        axes: [1].into_iter().collect(),
                    },
                    &[4, 1],
                    f,
                    &[5],
                ),
            ],
            outputs: vec![6],
        }
    }

    fn key(g: &Subgraph) -> GraphKey {
        GraphKey::new(g, &FusionOptions::cpu())
    }

    #[test]
    fn keys_tell_apart_graphs_that_differ_in_one_thing() {
        let b = base();
        assert_eq!(key(&b), key(&base()), "other data, same structure: one key");
        let mut variants: Vec<(&str, Subgraph)> = Vec::new();
        let mut v = base();
        v.nodes[3].op = Op::Unary(UnaryOp::Log);
        variants.push(("unary op", v));
        let mut v = base();
        v.nodes[2].op = Op::Binary(BinaryOp::Sub);
        variants.push(("binary op", v));
        let mut v = base();
        v.nodes[3].op = Op::Cast;
        variants.push(("op kind", v));
        let mut v = base();
        v.nodes[6].op = Op::Reduce {
            op: ReduceOp::Sum,
            axes: [0].into_iter().collect(),
        };
        variants.push(("reduced axes", v));
        let mut v = base();
        v.nodes[0] = data(&[8, 4], DType::F32);
        variants.push(("leaf shape", v));
        let mut v = base();
        v.nodes[6].shape = Shape::new(&[4]);
        variants.push(("node shape", v));
        let mut v = base();
        v.nodes[1] = data(&[4, 8], DType::F16);
        variants.push(("leaf dtype", v));
        let mut v = base();
        v.nodes[3].dtype = DType::F64;
        variants.push(("node dtype", v));
        let mut v = base();
        v.nodes[2].inputs[1] = 0;
        variants.push(("edge", v));
        let mut v = base();
        v.nodes[5].inputs.swap(0, 1);
        variants.push(("operand order", v));
        // A constant's value is a launch argument: every value shares the key.
        for value in [
            Scalar::Float(3.0, DType::F32),
            Scalar::Float(-0.0, DType::F32),
            Scalar::Int(2, DType::F32),
        ] {
            let mut v = base();
            v.nodes[4].op = Op::Full(value);
            assert_eq!(key(&b), key(&v), "the constant {value} changed the key");
        }
        let mut v = base();
        v.nodes[4].dtype = DType::F64;
        variants.push(("constant dtype", v));
        let mut v = base();
        v.nodes[4] = data(&[4, 8], DType::F32);
        variants.push(("constant made data", v));
        let mut v = base();
        v.outputs = vec![5];
        variants.push(("output", v));
        let mut v = base();
        v.outputs.push(3);
        variants.push(("output count", v));
        for (what, v) in &variants {
            assert_ne!(key(&b), key(v), "graphs differing in the {what} share a key");
        }
        for (i, (what, v)) in variants.iter().enumerate() {
            for (other, w) in &variants[i + 1..] {
                assert_ne!(key(v), key(w), "the {what} and {other} variants share a key");
            }
        }
        let gpu = GraphKey::new(&b, &FusionOptions::gpu());
        assert_ne!(key(&b), gpu, "other options, other key");
    }

    #[test]
    fn graphs_differing_in_one_thing_get_different_plans() {
        let opts = FusionOptions::cpu();
        let plan_of = |g: &Subgraph| crate::fusion::plan_traced(g, &opts).unwrap();
        let (first, _) = plan_of(&base());
        let (again, hit) = plan_of(&base());
        assert!(hit && Arc::ptr_eq(&first, &again), "the same structure shares its plan");
        let mut v = base();
        v.nodes[3].op = Op::Unary(UnaryOp::Tanh);
        let mut x = base();
        x.nodes[2].inputs[1] = 0;
        for g in [v, x] {
            let (p, _) = plan_of(&g);
            assert!(!Arc::ptr_eq(&first, &p), "a different graph got the base graph's plan");
        }
        let mut w = base();
        w.nodes[4].op = Op::Full(Scalar::Float(2.5, DType::F32));
        let (p, hit) = plan_of(&w);
        assert!(hit && Arc::ptr_eq(&first, &p), "another constant value shares the plan");
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_used_plan() {
        let mut plans = Plans::default();
        let key_of = |i: usize| {
            let mut g = base();
            g.nodes[0] = data(&[4, 8 + i], DType::F32);
            key(&g)
        };
        let plan = Arc::new(Plan {
            buffers: vec![],
            kernels: vec![],
            outputs: vec![],
            shifted: false,
        });
        for i in 0..CAPACITY {
            plans.insert(key_of(i), plan.clone());
        }
        // Plan 0 is used again, so plan 1 is now the oldest.
        assert!(plans.get(&key_of(0)).is_some());
        plans.insert(key_of(CAPACITY), plan.clone());
        assert_eq!(plans.plans.len(), CAPACITY);
        assert!(plans.get(&key_of(0)).is_some(), "the plan used last is kept");
        assert!(
            plans.get(&key_of(1)).is_none(),
            "the least recently used plan is evicted"
        );
        assert!(plans.get(&key_of(CAPACITY)).is_some() && plans.get(&key_of(2)).is_some());
    }
}
