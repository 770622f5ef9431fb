//! The differential fuzzer's graph generator and checker, shared by the
//! CPU fuzzer (`tests/fuzz.rs`) and the GPU one (`tests/gpu_pipelines.rs`).
//!
//! Each graph is generated from a seed: up to about 30 ops mixing unary and
//! binary elementwise ops, comparisons and `where`, casts, broadcasts,
//! views (permute, slice, expand, reshape) and reductions, over every dtype,
//! with shapes that include 1, primes, ragged tile edges and empty axes.
//! See `tests/fuzz.rs` for the numerical rules the generator follows.

use super::{compare_with, tolerance, G};
use tilefuse::fusion::{explain, plan, FusionOptions, Plan};
use tilefuse::graph::Subgraph;
use tilefuse::graph::{reference, BinaryOp, ReduceOp, UnaryOp};
use tilefuse::storage::HostBuffer;
use tilefuse::{DType, Error, Scalar};

/// A xorshift generator: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const EXTENTS: [usize; 12] = [1, 1, 2, 3, 4, 5, 7, 8, 13, 17, 33, 64];
const FLOAT_UNARY: [UnaryOp; 8] = [
    UnaryOp::Neg,
    UnaryOp::Abs,
    UnaryOp::Tanh,
    UnaryOp::Sigmoid,
    UnaryOp::Relu,
    UnaryOp::Silu,
    UnaryOp::GeluTanh,
    UnaryOp::GeluErf,
];

/// A generator state: the graph so far and which nodes are data leaves
/// (possibly viewed), which comparisons and rounding ops may take.
struct Gen {
    g: G,
    rng: Rng,
    leaf: Vec<bool>,
}

impl Gen {
    fn push_leaf(&mut self, n: usize, leaf: bool) -> usize {
        self.leaf.resize(self.g.nodes.len(), false);
        self.leaf[n] = leaf;
        n
    }

    fn shape(&mut self) -> Vec<usize> {
        let rank = self.rng.below(4);
        let mut s: Vec<usize> = (0..rank).map(|_| self.rng.pick(&EXTENTS)).collect();
        if self.rng.chance(3) && rank > 0 {
            let k = self.rng.below(rank);
            s[k] = 0;
        }
        while s.iter().product::<usize>() > 3000 {
            let k = self.rng.below(s.len());
            s[k] = s[k].div_ceil(4);
        }
        s
    }

    fn data(&mut self, dtype: DType, shape: &[usize]) -> usize {
        // At times a random tensor instead, generated where it is read.
        if dtype.is_float() && self.rng.chance(10) {
            let seed = self.rng.next() as i64;
            let key = self.g.push(
                tilefuse::graph::Op::Full(Scalar::Int(seed as i128, DType::I64)),
                &[],
                DType::I64,
                &[],
            );
            let r = self.g.push(tilefuse::graph::Op::Random, shape, dtype, &[key]);
            return self.push_leaf(r, true);
        }
        let n: usize = shape.iter().product();
        let mut buf = HostBuffer::zeros(dtype, n);
        for i in 0..n {
            let r = self.rng.below(65) as i128 - 32;
            let v = match dtype {
                DType::Bool => Scalar::Bool(r & 1 == 1),
                d if d.is_float() => Scalar::Float(r as f64 / 8.0, d),
                DType::U8 | DType::U32 => Scalar::Int(r + 32 + if self.rng.chance(10) { 200 } else { 0 }, dtype),
                d => Scalar::Int(r * if self.rng.chance(10) { 1 << 20 } else { 1 }, d),
            };
            buf.set(i, v);
        }
        let x = self.g.data_buf(buf, shape);
        self.push_leaf(x, true)
    }

    /// A random node of `dtype`, preferring recent ones.
    fn operand(&mut self, dtype: DType) -> Option<usize> {
        let cands: Vec<usize> = (0..self.g.nodes.len()).filter(|&n| self.g.dtype(n) == dtype).collect();
        if cands.is_empty() {
            return None;
        }
        let k = cands.len() - 1 - self.rng.below(cands.len()).min(self.rng.below(cands.len()));
        Some(cands[k])
    }

    /// A node of `dtype` whose shape broadcasts with `x`'s, or a new leaf.
    fn partner(&mut self, x: usize, dtype: DType) -> usize {
        let sx = self.g.shape(x);
        let cands: Vec<usize> = (0..self.g.nodes.len())
            .filter(|&n| {
                self.g.dtype(n) == dtype
                    && tilefuse::Shape::broadcast("fuzz", &self.g.nodes[x].shape, &self.g.nodes[n].shape).is_ok()
            })
            .collect();
        if !cands.is_empty() && self.rng.chance(70) {
            return self.rng.pick(&cands);
        }
        // A fresh leaf broadcasting against x: some axes of x set to 1, maybe a shorter rank.
        let drop = self.rng.below(sx.len() + 1);
        let shape: Vec<usize> = sx[drop..]
            .iter()
            .map(|&d| if self.rng.chance(30) { 1 } else { d })
            .collect();
        self.data(dtype, &shape)
    }

    fn step(&mut self, dtype: DType) {
        let Some(x) = self.operand(dtype) else { return };
        let float = dtype.is_float();
        let rank = self.g.shape(x).len();
        match self.rng.below(14) {
            0 | 1 if float => {
                let op = self.rng.pick(&FLOAT_UNARY);
                self.g.unary(op, x);
            }
            2 if float => {
                let t = self.g.unary(UnaryOp::Tanh, x);
                let op = self.rng.pick(&[UnaryOp::Exp, UnaryOp::Sin, UnaryOp::Cos]);
                self.g.unary(op, t);
            }
            3 if float => {
                let a = self.g.unary(UnaryOp::Abs, x);
                let one = self.g.scalar(1.0, x);
                let a1 = self.g.add(a, one);
                let op = self
                    .rng
                    .pick(&[UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Rsqrt, UnaryOp::Recip]);
                self.g.unary(op, a1);
            }
            4 if float && self.leaf[x] => {
                let op = self
                    .rng
                    .pick(&[UnaryOp::Floor, UnaryOp::Ceil, UnaryOp::Round, UnaryOp::Sign]);
                self.g.unary(op, x);
            }
            0..=4 if !float => {
                let ops: &[UnaryOp] = if dtype == DType::Bool {
                    &[UnaryOp::Not]
                } else {
                    &[UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Not, UnaryOp::Relu, UnaryOp::Sign]
                };
                let op = self.rng.pick(ops);
                self.g.unary(op, x);
            }
            5..=7 => {
                let y = self.partner(x, dtype);
                let op = match dtype {
                    DType::Bool => self.rng.pick(&[BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor]),
                    d if d.is_float() => self.rng.pick(&[
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Maximum,
                        BinaryOp::Minimum,
                        BinaryOp::Div,
                    ]),
                    _ => self.rng.pick(&[
                        BinaryOp::Add,
                        BinaryOp::Sub,
                        BinaryOp::Mul,
                        BinaryOp::Div,
                        BinaryOp::Maximum,
                        BinaryOp::BitXor,
                        BinaryOp::BitAnd,
                    ]),
                };
                // f16 overflows where the fused path's f32 does not: keep products small.
                let (x, y) = if op == BinaryOp::Mul && dtype == DType::F16 {
                    (self.g.unary(UnaryOp::Tanh, x), self.g.unary(UnaryOp::Tanh, y))
                } else {
                    (x, y)
                };
                let y = if op == BinaryOp::Div && float {
                    let a = self.g.unary(UnaryOp::Abs, y);
                    let one = self.g.scalar(1.0, y);
                    self.g.add(a, one)
                } else {
                    y
                };
                self.g.binary(op, x, y);
            }
            8 if !float || self.leaf[x] => {
                let y = self.partner(x, dtype);
                if float && !self.leaf[y] {
                    return;
                }
                let op = self
                    .rng
                    .pick(&[BinaryOp::Lt, BinaryOp::Le, BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Ge]);
                let c = self.g.binary(op, x, y);
                let c = self.push_leaf(c, true);
                // Use it in a where with two operands of some dtype.
                let d = self.rng.pick(&DType::ALL);
                let Some(a) = self.operand(d) else { return };
                let (sc, sa) = (self.g.nodes[c].shape.clone(), self.g.nodes[a].shape.clone());
                let Ok(s) = tilefuse::Shape::broadcast("fuzz", &sc, &sa) else {
                    return;
                };
                let b = self.partner(a, d);
                let Ok(s) = tilefuse::Shape::broadcast("fuzz", &s, &self.g.nodes[b].shape.clone()) else {
                    return;
                };
                let (c, a, b) = (
                    self.g.broadcast_to(c, s.dims()),
                    self.g.broadcast_to(a, s.dims()),
                    self.g.broadcast_to(b, s.dims()),
                );
                self.g.where_(c, a, b);
            }
            9 => {
                let to = self.rng.pick(&DType::ALL);
                if float && !to.is_float() && !self.leaf[x] {
                    return;
                }
                self.g.cast(x, to);
            }
            10 | 11 if rank > 0 => {
                let shape = self.g.shape(x);
                let axes: Vec<usize> = (0..rank).filter(|_| self.rng.chance(50)).collect();
                let axes = if axes.is_empty() {
                    vec![self.rng.below(rank)]
                } else {
                    axes
                };
                let count: usize = axes.iter().map(|&a| shape[a]).product();
                let mut ops = vec![ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];
                if count <= 8 {
                    ops.push(ReduceOp::Prod);
                }
                if axes.len() == 1 && count > 0 && (self.leaf[x] || !float) {
                    ops.extend([ReduceOp::ArgMax, ReduceOp::ArgMin]);
                }
                if dtype == DType::F16 && count > 64 {
                    ops.retain(|&o| o != ReduceOp::Sum);
                }
                let op = self.rng.pick(&ops);
                // Products and f16 reductions take bounded operands (no overflow).
                let x = if float && !self.leaf[x] && (op == ReduceOp::Prod || dtype == DType::F16) {
                    self.g.unary(UnaryOp::Tanh, x)
                } else {
                    x
                };
                let axes = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
                    &axes[..1]
                } else {
                    &axes[..]
                };
                // At times a scan along the first axis instead, in the
                // dtypes the front end gives scans.
                if !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) && self.rng.chance(25) {
                    use tilefuse::graph::ScanOp;
                    let op = match op {
                        _ if float && self.rng.chance(30) => ScanOp::LogSumExp,
                        ReduceOp::Sum => ScanOp::Sum,
                        ReduceOp::Prod => ScanOp::Prod,
                        ReduceOp::Max => ScanOp::Max,
                        _ => ScanOp::Min,
                    };
                    let out = match (op, dtype) {
                        (ScanOp::Sum | ScanOp::Prod, d) if !d.is_float() => DType::I64,
                        (_, DType::Bool) => DType::U8,
                        (_, d) => d,
                    };
                    let x = if out != dtype { self.g.cast(x, out) } else { x };
                    self.g
                        .push(tilefuse::graph::Op::Scan { op, axis: axes[0] }, &shape, out, &[x]);
                    return;
                }
                let r = self.g.reduce(op, x, axes);
                // Often broadcast the keepdim result back, as row patterns do.
                if self.rng.chance(50) && !matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
                    let e = self.g.broadcast_to(r, &shape);
                    let bop = if dtype == DType::Bool {
                        BinaryOp::BitXor
                    } else {
                        BinaryOp::Sub
                    };
                    self.g.binary(bop, x, e);
                }
            }
            _ => self.view(x),
        }
    }

    fn view(&mut self, x: usize) {
        let shape = self.g.shape(x);
        let rank = shape.len();
        let leaf = self.leaf[x];
        if rank > 0 && self.rng.chance(8) {
            self.gather(x, &shape, leaf);
            return;
        }
        if rank > 0 && self.rng.chance(5) && self.g.dtype(x) != DType::Bool {
            self.scatter(x, &shape, leaf);
            return;
        }
        // Comparisons take data leaves or integers (see tests/fuzz.rs).
        if rank > 0 && self.rng.chance(5) && (leaf || !self.g.dtype(x).is_float()) && self.g.dtype(x) != DType::Bool {
            self.sort(x, &shape, leaf);
            return;
        }
        if rank > 0 && self.rng.chance(20) {
            // A concatenation with x itself, a fresh leaf, a slice of x or a
            // constant (a piece like a pad's border), in any order.
            let axis = self.rng.below(rank);
            let dtype = self.g.dtype(x);
            let mut pieces = vec![x];
            let mut exact = leaf;
            for _ in 0..1 + self.rng.below(2) {
                let mut s = shape.clone();
                s[axis] = self.rng.pick(&[0, 1, 3, 5, 17]);
                let p = match self.rng.below(4) {
                    0 => x,
                    1 if shape[axis] > 1 => self.g.slice(x, axis, 1, 1, shape[axis] - 1),
                    2 => {
                        let v = self.rng.below(9) as f64 - 4.0;
                        self.g.full(v, dtype, &s)
                    }
                    _ => self.data(dtype, &s),
                };
                exact &= self.leaf.get(p).copied().unwrap_or(true)
                    || matches!(self.g.nodes[p].op, tilefuse::graph::Op::Full(_));
                let at = self.rng.below(pieces.len() + 1);
                pieces.insert(at, p);
            }
            if pieces
                .iter()
                .map(|&p| self.g.shape(p).iter().product::<usize>())
                .sum::<usize>()
                > 6000
            {
                return;
            }
            let c = self.g.cat(&pieces, axis);
            self.push_leaf(c, exact);
            return;
        }
        let v = match self.rng.below(4) {
            0 if rank > 1 => {
                let mut perm: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    perm.swap(i, self.rng.below(i + 1));
                }
                self.g.permute(x, &perm)
            }
            1 if rank > 0 => {
                let axis = self.rng.below(rank);
                let d = shape[axis];
                let start = self.rng.below(d + 1);
                let step = 1 + self.rng.below(3);
                let len = (d - start).div_ceil(step);
                let len = self.rng.below(len + 1).max(len.min(1));
                self.g.slice(x, axis, start, step, len)
            }
            2 if shape.contains(&1) => {
                let to: Vec<usize> = shape
                    .iter()
                    .map(|&d| if d == 1 { self.rng.pick(&[1, 3, 5, 8]) } else { d })
                    .collect();
                if to.iter().product::<usize>() > 4000 {
                    return;
                }
                self.g.broadcast_to(x, &to)
            }
            _ => {
                // Flatten, split one axis, or merge two neighbours.
                let n: usize = shape.iter().product();
                let to = match self.rng.below(3) {
                    0 => vec![n],
                    1 if rank > 0 => {
                        let k = self.rng.below(rank);
                        let f = self.rng.pick(&[1, 2, 3]);
                        let mut t = shape.clone();
                        if shape[k] % f == 0 {
                            t[k] = shape[k] / f;
                            t.insert(k + 1, f);
                        }
                        t
                    }
                    _ if rank > 1 => {
                        let k = self.rng.below(rank - 1);
                        let mut t = shape.clone();
                        t[k] *= t[k + 1];
                        t.remove(k + 1);
                        t
                    }
                    _ => {
                        let mut t = shape.clone();
                        t.push(1);
                        t
                    }
                };
                self.g.reshape(x, &to)
            }
        };
        self.push_leaf(v, leaf);
    }
}

impl Gen {
    /// A gather from `x` along a random axis by an index leaf of positions
    /// in range (i64 or i32): of the index's own shape (narrower than `x`
    /// off the axis at times), or one row of positions spread over the
    /// result like `index_select`'s.
    fn gather(&mut self, x: usize, shape: &[usize], leaf: bool) {
        let axis = self.rng.below(shape.len());
        let len = shape[axis];
        let mut out: Vec<usize> = shape
            .iter()
            .map(|&d| if self.rng.chance(25) { self.rng.below(d + 1) } else { d })
            .collect();
        out[axis] = self.rng.pick(&[0, 1, 2, 5, 17]);
        if len == 0 && out.iter().product::<usize>() > 0 {
            out[axis] = 0;
        }
        if out.iter().product::<usize>() > 4000 {
            return;
        }
        let index_dtype = self.rng.pick(&[DType::I64, DType::I32]);
        let spread = self.rng.chance(30);
        let lifted: Vec<usize> = if spread {
            (0..out.len()).map(|k| if k == axis { out[k] } else { 1 }).collect()
        } else {
            out.clone()
        };
        let n: usize = lifted.iter().product();
        let mut buf = HostBuffer::zeros(index_dtype, n);
        for i in 0..n {
            let at = self.rng.below(len.max(1));
            buf.set(i, Scalar::Int(at as i128, index_dtype));
        }
        let mut index = self.g.data_buf(buf, &lifted);
        if spread && lifted != out {
            index = self.g.broadcast_to(index, &out);
        }
        let dtype = self.g.dtype(x);
        let y = self.g.push(
            tilefuse::graph::Op::Gather { axis, select: spread },
            &out,
            dtype,
            &[x, index],
        );
        self.push_leaf(y, leaf);
    }
}

impl Gen {
    /// A scatter of `x` (f16 and bf16 cast to f32 first, as the front end
    /// sums them) along a random axis into zeros of a shape as wide as `x`
    /// or wider off the axis, by an index leaf of positions in range (i64
    /// or i32): of `x`'s shape, or one row of positions spread over it like
    /// `index_add`'s.
    fn scatter(&mut self, x: usize, shape: &[usize], leaf: bool) {
        let axis = self.rng.below(shape.len());
        let mut out: Vec<usize> = shape
            .iter()
            .map(|&d| d + if self.rng.chance(25) { self.rng.below(3) } else { 0 })
            .collect();
        out[axis] = self.rng.pick(&[1, 2, 5, 17]);
        if out.iter().product::<usize>() > 4000 || shape.iter().product::<usize>() > 4000 {
            return;
        }
        let x = match self.g.dtype(x) {
            DType::F16 | DType::BF16 => self.g.cast(x, DType::F32),
            _ => x,
        };
        let index_dtype = self.rng.pick(&[DType::I64, DType::I32]);
        let spread = self.rng.chance(30);
        let lifted: Vec<usize> = if spread {
            (0..shape.len()).map(|k| if k == axis { shape[k] } else { 1 }).collect()
        } else {
            shape.to_vec()
        };
        let n: usize = lifted.iter().product();
        let mut buf = HostBuffer::zeros(index_dtype, n);
        for i in 0..n {
            let at = self.rng.below(out[axis]);
            buf.set(i, Scalar::Int(at as i128, index_dtype));
        }
        let mut index = self.g.data_buf(buf, &lifted);
        if spread && lifted != shape {
            index = self.g.broadcast_to(index, shape);
        }
        let dtype = self.g.dtype(x);
        let y = self.g.push(
            tilefuse::graph::Op::ScatterAdd { axis, chunked: None },
            &out,
            dtype,
            &[index, x],
        );
        self.push_leaf(y, leaf);
    }
}

impl Gen {
    /// A stable ascending sort of `x` along a random axis as the front end
    /// writes one: each element's rank from a reduction over a broadcast
    /// comparison with its line, positions scattered to their ranks, the
    /// values gathered by them.
    fn sort(&mut self, x: usize, shape: &[usize], leaf: bool) {
        use tilefuse::graph::Op;
        let axis = self.rng.below(shape.len());
        let n = shape[axis];
        let (outer, inner): (usize, usize) = (shape[..axis].iter().product(), shape[axis + 1..].iter().product());
        if !(2..=64).contains(&n) || outer * n * n * inner > 20_000 {
            return;
        }
        let line = [outer, n, inner];
        let square = [outer, n, n, inner];
        let dtype = self.g.dtype(x);
        let x3 = self.g.reshape(x, &line);
        let xi = self.g.reshape(x3, &[outer, n, 1, inner]);
        let xi = self.g.broadcast_to(xi, &square);
        let xj = self.g.reshape(x3, &[outer, 1, n, inner]);
        let xj = self.g.broadcast_to(xj, &square);
        let at = |gen: &mut Gen, dims: &[usize]| {
            let mut buf = HostBuffer::zeros(DType::I64, n);
            for i in 0..n {
                buf.set(i, Scalar::Int(i as i128, DType::I64));
            }
            gen.g.data_buf(buf, dims)
        };
        let (j, i) = (at(self, &[1, 1, n, 1]), at(self, &[1, n, 1, 1]));
        let earlier = self.g.binary(BinaryOp::Lt, j, i);
        let less = self.g.binary(BinaryOp::Lt, xj, xi);
        let equal = self.g.binary(BinaryOp::Eq, xj, xi);
        let tie = self.g.binary(BinaryOp::BitAnd, equal, earlier);
        let before = self.g.binary(BinaryOp::BitOr, less, tie);
        let before = self.g.cast(before, DType::I64);
        let rank = self.g.reduce(ReduceOp::Sum, before, &[2]);
        let rank = self.g.reshape(rank, &line);
        let positions = at(self, &[1, n, 1]);
        let positions = self.g.broadcast_to(positions, &line);
        let order = self.g.push(
            Op::ScatterAdd { axis: 1, chunked: None },
            &line,
            DType::I64,
            &[rank, positions],
        );
        let values = self
            .g
            .push(Op::Gather { axis: 1, select: false }, &line, dtype, &[x3, order]);
        let y = self.g.reshape(values, shape);
        self.push_leaf(y, leaf);
    }
}

/// Graph number `seed` and its requested outputs.
pub fn generate(seed: u64) -> (Subgraph, Vec<usize>) {
    let mut gen = Gen {
        g: G::default(),
        rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        leaf: vec![],
    };
    let dtype = gen.rng.pick(&DType::ALL);
    let shape = gen.shape();
    gen.data(dtype, &shape);
    let ops = 1 + gen.rng.below(30);
    while gen.g.nodes.len() < ops + 1 {
        let d = if gen.rng.chance(80) {
            dtype
        } else {
            gen.rng.pick(&DType::ALL)
        };
        if gen.operand(d).is_none() {
            let s = gen.shape();
            gen.data(d, &s);
        }
        gen.step(d);
        gen.leaf.resize(gen.g.nodes.len(), false);
    }
    let n = gen.g.nodes.len();
    let mut outputs = vec![n - 1];
    for _ in 0..gen.rng.below(3) {
        outputs.push(gen.rng.below(n));
    }
    (gen.g.finish(&outputs), outputs)
}

/// The seeds of a run: `TILEFUSE_FUZZ_SEED` (default 1) and the
/// `TILEFUSE_FUZZ_GRAPHS` (default 5,000) that follow it.
pub fn seeds() -> std::ops::Range<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let count = var("TILEFUSE_FUZZ_GRAPHS").unwrap_or(5000);
    let start = var("TILEFUSE_FUZZ_SEED").unwrap_or(1);
    start..start + count
}

/// The options the CPU fuzzer plans graph `seed` with: CPU and GPU tiling
/// alternately, varied by [`vary_options`].
pub fn options(seed: u64) -> FusionOptions {
    vary_options(seed, [FusionOptions::cpu(), FusionOptions::gpu()][(seed % 2) as usize])
}

/// `base` varied by seed: small row tiles now and then, so row patterns
/// also take the multi-kernel path or, every third time, walk their rows
/// twice in one kernel, and non-deterministic reductions.
pub fn vary_options(seed: u64, base: FusionOptions) -> FusionOptions {
    if seed % 5 == 0 {
        let twice = seed % 3 == 0;
        FusionOptions {
            max_row_tile: 16,
            deterministic: seed % 10 != 0,
            reread_row_bytes: if twice { 1 << 20 } else { base.reread_row_bytes },
            two_pass_rows: if twice { 1 } else { base.two_pass_rows },
            ..base
        }
    } else {
        base
    }
}

/// Why a graph did not pass.
#[derive(Debug)]
pub enum Failure {
    /// Planning or running failed with this error; the text describes the graph.
    Run(Box<Error>, String),
    /// Anything else: the reference rejected the graph, or a result differs.
    Mismatch(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Run(e, graph) => write!(f, "run failed: {e}\n{graph}"),
            Failure::Mismatch(text) => f.write_str(text),
        }
    }
}

/// Generates graph number `seed`, plans it with `options`, runs the plan
/// with `run` and compares every output with the reference evaluator.
pub fn check(
    seed: u64,
    options: FusionOptions,
    run: impl FnOnce(&Subgraph, &Plan) -> tilefuse::Result<Vec<HostBuffer>>,
) -> Result<(), Failure> {
    let (g, outputs) = generate(seed);
    if std::env::var_os("TILEFUSE_FUZZ_VERBOSE").is_some_and(|v| v == "3") {
        for (i, n) in g.nodes.iter().enumerate() {
            println!(
                "{i}: {} {} {:?} <- {:?}",
                n.op.name(),
                n.dtype,
                n.shape,
                n.inputs.as_slice()
            );
        }
        println!("outputs {outputs:?}");
    }
    let rejected = |e: Error| Failure::Mismatch(format!("the reference rejects the graph: {e}"));
    let want = reference::evaluate(&g).map_err(rejected)?;
    let every = Subgraph {
        nodes: g.nodes.clone(),
        outputs: (0..g.nodes.len()).collect(),
    };
    let all = reference::evaluate(&every).map_err(rejected)?;
    let describe = || format!("{}\n{g:#?}", explain(&g, &options).unwrap_or_default());
    let p = plan(&g, &options).map_err(|e| Failure::Run(Box::new(e), format!("{g:#?}")))?;
    if std::env::var_os("TILEFUSE_FUZZ_VERBOSE").is_some_and(|v| v == "2") {
        let numel: usize = g.nodes.iter().map(|n| n.shape.numel()).sum();
        println!(
            "seed {seed}: {} nodes, {} elements, {} kernels",
            g.nodes.len(),
            numel,
            p.kernels.len()
        );
    }
    let got = run(&g, &p).map_err(|e| Failure::Run(Box::new(e), describe()))?;
    for (o, (a, b)) in got.iter().zip(&want).enumerate() {
        let (tol, scale) = chain_tolerance(&g, &all, outputs[o]);
        compare_with(a, b, tol, scale)
            .map_err(|e| Failure::Mismatch(format!("output {o} (node {}): {e}\n{}", outputs[o], describe())))?;
    }
    Ok(())
}

/// The tolerance and scale of node `o`: the loosest tolerance of its own
/// dtype and every float dtype it was computed through (a value computed in
/// f16 and cast to f64 keeps the f16 path's difference), and the largest
/// finite magnitude among those nodes' reference values (rounding errors of
/// intermediates survive cancellation at their own scale).
fn chain_tolerance(g: &Subgraph, all: &[HostBuffer], o: usize) -> (f64, f64) {
    let mut seen = vec![false; g.nodes.len()];
    let mut stack = vec![o];
    let mut tol = tolerance(g.nodes[o].dtype);
    let mut scale = 1.0f64;
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n], true) {
            continue;
        }
        if g.nodes[o].dtype.is_float() {
            tol = tol.max(tolerance(g.nodes[n].dtype));
            if g.nodes[n].dtype.is_float() {
                let v = &all[n];
                scale = (0..v.len())
                    .map(|i| v.get(i).to_f64().abs())
                    .filter(|x| x.is_finite())
                    .fold(scale, f64::max);
            }
        }
        stack.extend(g.nodes[n].inputs.iter().copied());
    }
    (tol, scale)
}
