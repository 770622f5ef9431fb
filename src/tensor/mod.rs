//! Lazy tensors: cheap handles on nodes of the op graph.
//!
//! Every op on a [`Tensor`] only records a node (checking shapes and dtypes
//! at once, so misuse is reported at the line that made it); work runs when a
//! result is asked for with [`Tensor::to_vec`], [`Tensor::to_scalar`],
//! [`Tensor::with_slice`] or [`Tensor::realize`].
//!
//! ```
//! use tilefuse::{DType, Tensor};
//! # fn main() -> tilefuse::Result<()> {
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
//! let b = Tensor::full(&[3], 0.5f32); // broadcast along the rows
//! let c = Tensor::zeros(&[2, 1], DType::F32);
//! let y = (&a * &b + &c).tanh().sum(&[1], true);
//! assert_eq!(y.dims(), &[2, 1]);
//! let v: Vec<f32> = y.to_vec()?;
//! let want = |r: [f32; 3]| r.iter().map(|x| (x * 0.5).tanh()).sum::<f32>();
//! assert!((v[0] - want([1.0, 2.0, 3.0])).abs() < 1e-6);
//! assert!((v[1] - want([4.0, 5.0, 6.0])).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```
//!
//! # Ownership
//!
//! The op graph is one per process (the graph module's `store`). A tensor
//! is an `Arc` of a handle that holds its node's index and counts as one use
//! of that node; cloning a tensor clones the `Arc`, and when the last clone
//! drops the node is released, together with every input only it used.
//!
//! # Errors and panics
//!
//! Every op has a panicking form (`add`, `sum`, `reshape`, ...) and a `try_`
//! form (`try_add`, `try_sum`, `try_reshape`, ...) that returns the same
//! misuse as an [`Error`] naming the op and the shapes; so do the
//! constructors (`from_vec`, `zeros`, `full`, `rand`, `arange`, ...). A
//! shape no tensor can have (more than [`crate::MAX_RANK`] axes or more
//! than [`crate::shape::MAX_NUMEL`] elements) is misuse at the op that made
//! it. Only device failures wait until a result is realized; host memory
//! that runs out is [`Error::HostOutOfMemory`] from the call that
//! allocates (a constructor of data, a realization, a read).

mod compose;
mod index;
mod join;
#[cfg(feature = "ndarray")]
mod ndarray;
mod ops;
mod print;
mod random;
mod reduce;
mod scan;
mod scatter;
mod sort;
mod view;

pub use view::ReshapeShape;

use crate::device::Device;
use crate::dtype::{DType, Element, Scalar};
use crate::error::{dims, Error, Result};
use crate::graph::{self, NodeIndex, Op, Subgraph};
use crate::shape::Shape;
use crate::storage::{HostBuffer, Storage};
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// Defines an op's panicking form and its `try_` form from one body that
/// returns `Result`.
macro_rules! fallible {
    ($(
        $(#[$doc:meta])*
        pub fn $name:ident / $try:ident (&$self:ident $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty $body:block
    )*) => {$(
        $(#[$doc])*
        ///
        /// # Panics
        #[doc = concat!("On misuse, with the message of the error [`Tensor::", stringify!($try), "`] returns.")]
        #[track_caller]
        pub fn $name(&self $(, $arg: $ty)*) -> $ret {
            crate::tensor::or_panic(self.$try($($arg),*))
        }

        #[doc = concat!("[`Tensor::", stringify!($name), "`], returning misuse as an `Err` instead of panicking.")]
        pub fn $try(&$self $(, $arg: $ty)*) -> crate::error::Result<$ret> $body
    )*};
}
pub(crate) use fallible;

/// A lazy n-dimensional array on a [`Device`]: a cheap-to-clone handle on a
/// node of the op graph.
///
/// A tensor has at most [`crate::MAX_RANK`] (6) axes and at most
/// [`crate::shape::MAX_NUMEL`] (`2^60 - 1`) elements; every constructor and
/// op that would make a larger shape (`from_vec`, `zeros`, `reshape`,
/// `unsqueeze`, `broadcast_to`, a binary op's broadcast, ...) returns
/// [`Error::RankTooLarge`] or [`Error::ShapeTooLarge`] from its `try_`
/// form, naming the op and the shape, and panics with that message from
/// the panicking form. Host memory that runs out while a tensor is made,
/// realized or read is [`Error::HostOutOfMemory`], not an abort.
///
/// The arithmetic operators take tensors (owned or borrowed) and Rust
/// scalars; `a += &b` (and `-=`, `*=`, `/=`) records `a + b` and rebinds
/// `a` to it, keeping `a`'s shape and dtype as PyTorch's in-place ops do
/// (a float result into an integer tensor, or a broadcast that grows `a`,
/// panics; the `try_` methods return those as errors). Other handles of the
/// old `a` keep their value.
///
/// ```
/// use tilefuse::{DType, Tensor};
/// let mut acc = Tensor::zeros(&[3], DType::F32);
/// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
/// let before = acc.clone();
/// acc += &x;
/// acc *= 2.0;
/// assert_eq!(acc.to_vec::<f32>()?, vec![2.0, 4.0, 6.0]);
/// assert_eq!(before.to_vec::<f32>()?, vec![0.0, 0.0, 0.0]);
/// # Ok::<(), tilefuse::Error>(())
/// ```
///
/// A float literal makes an f64 constant where no tensor gives it a
/// dtype: `Tensor::full(&[3], 0.5)` is f64 (write `0.5f32` for f32),
/// while `&x * 0.5` takes `x`'s dtype.
#[derive(Clone)]
pub struct Tensor(Arc<Handle>);

/// One use of a graph node, released when dropped.
struct Handle {
    node: NodeIndex,
    shape: Shape,
    dtype: DType,
    device: Device,
}

impl Drop for Handle {
    fn drop(&mut self) {
        graph::with_graph(|g| g.release(self.node));
    }
}

pub(crate) use crate::error::or_panic;

impl Tensor {
    /// Records `op` on `inputs` and returns a handle on the node.
    pub(crate) fn record(op: Op, inputs: &[&Tensor], shape: Shape, dtype: DType, device: Device) -> Tensor {
        let ids: SmallVec<[NodeIndex; 3]> = inputs.iter().map(|t| t.0.node).collect();
        let node = graph::with_graph(|g| g.insert(op, &ids, shape.clone(), dtype));
        Tensor(Arc::new(Handle {
            node,
            shape,
            dtype,
            device,
        }))
    }

    /// A tensor holding `buf` (row-major) with `shape`, on the CPU.
    pub(crate) fn from_buffer(buf: HostBuffer, shape: Shape) -> Tensor {
        let dtype = buf.dtype();
        Tensor::record(Op::Data(Arc::new(Storage::Host(buf))), &[], shape, dtype, Device::Cpu)
    }

    /// A tensor of `shape` holding `data` in row-major order, on the CPU.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_from_vec`] returns.
    #[track_caller]
    pub fn from_vec<E: Element>(data: Vec<E>, shape: &[usize]) -> Tensor {
        or_panic(Tensor::try_from_vec(data, shape))
    }

    /// [`Tensor::from_vec`], returning misuse as an `Err` instead of
    /// panicking: [`Error::LengthMismatch`] if `data.len()` is not the
    /// number of elements of `shape`, [`Error::RankTooLarge`] or
    /// [`Error::ShapeTooLarge`] for a shape no tensor can have, and
    /// [`Error::HostOutOfMemory`] if the copy does not fit in memory.
    pub fn try_from_vec<E: Element>(data: Vec<E>, shape: &[usize]) -> Result<Tensor> {
        Tensor::copied_from("from_vec", &data, shape)
    }

    /// A tensor of `shape` holding a copy of `data` in row-major order, on the CPU.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_from_slice`] returns.
    #[track_caller]
    pub fn from_slice<E: Element>(data: &[E], shape: &[usize]) -> Tensor {
        or_panic(Tensor::try_from_slice(data, shape))
    }

    /// [`Tensor::from_slice`], returning misuse as an `Err` instead of
    /// panicking (the errors of [`Tensor::try_from_vec`], naming `from_slice`).
    pub fn try_from_slice<E: Element>(data: &[E], shape: &[usize]) -> Result<Tensor> {
        Tensor::copied_from("from_slice", data, shape)
    }

    /// A tensor holding a copy of `data` in `shape`, its errors naming `op`.
    fn copied_from<E: Element>(op: &'static str, data: &[E], shape: &[usize]) -> Result<Tensor> {
        let shape = Shape::try_new(op, shape)?;
        if data.len() != shape.numel() {
            return Err(Error::LengthMismatch {
                op,
                len: data.len(),
                shape: dims(shape.dims()),
            });
        }
        let mut buf = HostBuffer::try_zeros_for(op, shape.dims(), E::DTYPE)?;
        buf.bytes_mut().copy_from_slice(element_bytes(data));
        Ok(Tensor::from_buffer(buf, shape))
    }

    /// A constant node of `shape` and `dtype` holding `value`, on the CPU.
    pub(crate) fn constant(shape: Shape, value: Scalar, dtype: DType) -> Tensor {
        Tensor::record(Op::Full(value.cast(dtype)), &[], shape, dtype, Device::Cpu)
    }

    /// A constant of the shape `dims`, checked with `op` named in errors.
    fn constant_as(op: &'static str, dims: &[usize], value: Scalar, dtype: DType) -> Result<Tensor> {
        Ok(Tensor::constant(Shape::try_new(op, dims)?, value, dtype))
    }

    /// A tensor of `shape` and `dtype` with every element `value` (rounded or
    /// wrapped to `dtype`), on the CPU. It is a constant node: no memory is
    /// filled until it is realized.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_full_scalar`] returns.
    #[track_caller]
    pub fn full_scalar(shape: &[usize], value: Scalar, dtype: DType) -> Tensor {
        or_panic(Tensor::try_full_scalar(shape, value, dtype))
    }

    /// [`Tensor::full_scalar`], returning [`Error::RankTooLarge`] or
    /// [`Error::ShapeTooLarge`] for a shape no tensor can have instead of
    /// panicking.
    pub fn try_full_scalar(shape: &[usize], value: Scalar, dtype: DType) -> Result<Tensor> {
        Tensor::constant_as("full_scalar", shape, value, dtype)
    }

    /// A tensor of `shape` with every element `value`, of `value`'s dtype.
    /// An unsuffixed float literal is an `f64` in Rust, so
    /// `Tensor::full(&[3], 0.5)` is an f64 tensor, which promotes the f32
    /// tensors it meets to f64; write `0.5f32` (or use [`Tensor::scalar_like`]
    /// or `&x * 0.5`, which take `x`'s dtype).
    ///
    /// ```
    /// use tilefuse::{DType, Tensor};
    /// assert_eq!(Tensor::full(&[3], 0.5).dtype(), DType::F64);
    /// assert_eq!(Tensor::full(&[3], 0.5f32).dtype(), DType::F32);
    /// ```
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_full`] returns.
    #[track_caller]
    pub fn full<E: Element>(shape: &[usize], value: E) -> Tensor {
        or_panic(Tensor::try_full(shape, value))
    }

    /// [`Tensor::full`], returning misuse as an `Err` (as
    /// [`Tensor::try_full_scalar`]) instead of panicking.
    pub fn try_full<E: Element>(shape: &[usize], value: E) -> Result<Tensor> {
        Tensor::constant_as("full", shape, value.to_scalar(), E::DTYPE)
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar<E: Element>(value: E) -> Tensor {
        Tensor::constant(Shape::scalar(), value.to_scalar(), E::DTYPE)
    }

    /// A tensor of zeros.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_zeros`] returns.
    #[track_caller]
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        or_panic(Tensor::try_zeros(shape, dtype))
    }

    /// [`Tensor::zeros`], returning misuse as an `Err` (as
    /// [`Tensor::try_full_scalar`]) instead of panicking.
    pub fn try_zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::constant_as("zeros", shape, Scalar::Bool(false), dtype)
    }

    /// A tensor of ones.
    ///
    /// # Panics
    /// On misuse, with the message of the error [`Tensor::try_ones`] returns.
    #[track_caller]
    pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
        or_panic(Tensor::try_ones(shape, dtype))
    }

    /// [`Tensor::ones`], returning misuse as an `Err` (as
    /// [`Tensor::try_full_scalar`]) instead of panicking.
    pub fn try_ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::constant_as("ones", shape, Scalar::Bool(true), dtype)
    }

    /// The same node, handled as living on `device`.
    ///
    /// Moving is lazy like every op: data moves when a result is realized,
    /// or when the moved tensor itself is ([`Tensor::realize`] of a GPU
    /// tensor holding host data uploads it, once), which is also where an
    /// unusable device is reported.
    pub fn to(&self, device: Device) -> Tensor {
        graph::with_graph(|g| g.retain(self.0.node));
        Tensor(Arc::new(Handle {
            node: self.0.node,
            shape: self.0.shape.clone(),
            dtype: self.0.dtype,
            device,
        }))
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.0.shape
    }

    /// The extents, outermost first.
    pub fn dims(&self) -> &[usize] {
        self.0.shape.dims()
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.0.shape.rank()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.0.shape.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The device this tensor lives on.
    pub fn device(&self) -> Device {
        self.0.device
    }

    internal_fn! {
        /// The graph node this tensor is a handle on.
        fn node(&self) -> NodeIndex {
            self.0.node
        }
    }

    /// Whether the tensor's value is held as data (created from data, or realized).
    pub fn is_realized(&self) -> bool {
        graph::with_graph(|g| matches!(g.node(self.0.node).op, Op::Data(_)))
    }

    internal_fn! {
        /// The part of the op graph this tensor depends on.
        fn subgraph(&self) -> Subgraph {
            graph::extract(&[self.0.node])
        }
    }

    /// The number of graph nodes this tensor depends on, itself included.
    pub fn subgraph_len(&self) -> usize {
        self.subgraph().nodes.len()
    }

    /// Graphviz DOT text of the graph this tensor depends on.
    pub fn to_dot(&self) -> String {
        graph::dot::to_dot(&self.subgraph())
    }

    internal_fn! {
        /// The fusion plan realizing this tensor on its device would run (from
        /// the plan cache when a structurally equal graph was planned before).
        ///
        /// # Errors
        /// A graph fusion cannot plan.
        fn plan(&self) -> Result<std::sync::Arc<crate::fusion::Plan>> {
            let config = crate::Config::current();
            crate::fusion::plan(
                &self.subgraph(),
                &crate::runtime::fusion_options(self.device(), &config.fusion),
            )
        }
    }

    /// A readable account of how this tensor would be computed: the kernels,
    /// the graph nodes each one computes, each kernel's printed tile program,
    /// and a DOT picture of the graph with one cluster per kernel.
    ///
    /// # Errors
    /// A graph fusion cannot plan.
    pub fn explain(&self) -> Result<String> {
        let config = crate::Config::current();
        crate::fusion::explain(
            &self.subgraph(),
            &crate::runtime::fusion_options(self.device(), &config.fusion),
        )
    }

    /// Measures, on their GPU, the codegen candidates of every kernel that
    /// realizing `tensors` together ([`Tensor::realize_all`]) would launch,
    /// and records the fastest for each
    /// (see `CudaCompiler::measure_choice`): later compiles of those
    /// programs on that device, in this process and later ones, use the
    /// chosen settings. Nothing is realized, and the tensors' data is not
    /// read: each kernel runs over scratch buffers of its sizes. The
    /// realizations that follow compile their kernels again under what was
    /// chosen (a first call never measures; only this does).
    ///
    /// On the CPU there is nothing to measure: an empty list.
    ///
    /// ```no_run
    /// # fn main() -> tilefuse::Result<()> {
    /// use tilefuse::{Device, Tensor};
    /// let x = Tensor::from_slice(&vec![0.5f32; 1 << 24], &[4096, 4096]).to(Device::cuda(0)?);
    /// let y = x.softmax(1);
    /// for choice in Tensor::measure_choices(&[&y])? {
    ///     println!("{}: {} ({:.2}x the default)", choice.program, choice.chosen, choice.speedup());
    /// }
    /// y.realize()?; // compiled under the chosen settings
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// A graph fusion cannot plan; [`Error::DeviceMismatch`] for tensors on
    /// different devices; a kernel whose default settings fail to compile
    /// or launch; [`Error::OutOfMemory`] when a kernel's buffers do not
    /// fit; [`Error::ChoicesFile`] when the choices cannot be written (they
    /// hold for this process).
    #[cfg(feature = "cuda")]
    pub fn measure_choices(tensors: &[&Tensor]) -> Result<Vec<crate::device::cuda::MeasuredChoice>> {
        let device = Tensor::common_device("measure_choices", tensors)?;
        let Device::Cuda(ordinal) = device else {
            return Ok(vec![]);
        };
        let nodes: SmallVec<[NodeIndex; 4]> = tensors.iter().map(|t| t.node()).collect();
        let config = crate::Config::current();
        let options = crate::runtime::fusion_options(device, &config.fusion);
        let plan = crate::fusion::plan(&graph::extract(&nodes), &options)?;
        crate::runtime::measure_choices(&plan, ordinal, &config)
    }

    /// Computes the value and keeps it: the node becomes data and is not
    /// recomputed, and nodes only it used are freed.
    ///
    /// # Errors
    /// Device failures, including a tensor on a device that cannot be used.
    ///
    /// On a CUDA device this returns once the kernels are queued; the result
    /// stays in device memory, and reading it waits for them.
    ///
    /// The realization uses [`Config::current`](crate::Config::current);
    /// [`realize_with`](Self::realize_with) takes a config.
    pub fn realize(&self) -> Result<()> {
        self.realize_with(&crate::Config::current())
    }

    /// [`Tensor::realize`] under `config`: its fusion settings plan the
    /// graph, and on a GPU its codegen and JIT settings compile the kernels
    /// (a plan or module made under another config is not reused). The
    /// nodes this realization computes keep their data, so later reads do
    /// not compute them again under another config.
    ///
    /// ```
    /// use tilefuse::{config::MathMode, Config, Tensor};
    /// let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).tanh();
    /// y.realize_with(&Config::default().with_math(MathMode::Fast))?;
    /// assert_eq!(y.to_vec::<f32>()?.len(), 2);
    /// # Ok::<(), tilefuse::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a config field out of range; as
    /// [`Tensor::realize`] otherwise.
    pub fn realize_with(&self, config: &crate::Config) -> Result<()> {
        crate::runtime::realize(&[self.node()], self.device(), config).map(|_| ())
    }

    /// [`Tensor::realize`], returning what the realization did: whether the
    /// plan was cached, fusion and compile times, kernels launched, uploads.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let y = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).exp();
    /// let stats = y.realize_with_stats().unwrap();
    /// assert_eq!(stats.kernels_launched, 1);
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::realize`].
    pub fn realize_with_stats(&self) -> Result<crate::runtime::RealizeStats> {
        crate::runtime::realize(&[self.node()], self.device(), &crate::Config::current())
    }

    /// Realizes several tensors together, sharing the work they have in
    /// common; on a GPU, kernels that do not depend on each other run on
    /// different streams at once.
    ///
    /// # Errors
    /// As [`Tensor::realize`], and [`Error::DeviceMismatch`] for tensors on
    /// different devices.
    pub fn realize_all(tensors: &[&Tensor]) -> Result<()> {
        let device = Tensor::common_device("realize_all", tensors)?;
        let nodes: SmallVec<[NodeIndex; 4]> = tensors.iter().map(|t| t.node()).collect();
        crate::runtime::realize(&nodes, device, &crate::Config::current()).map(|_| ())
    }

    /// The device of all of `tensors` (the CPU for none), or
    /// [`Error::DeviceMismatch`] naming `op`.
    fn common_device(op: &'static str, tensors: &[&Tensor]) -> Result<Device> {
        let device = tensors.first().map_or(Device::Cpu, |t| t.device());
        match tensors.iter().find(|t| t.device() != device) {
            Some(other) => Err(Error::DeviceMismatch {
                op,
                lhs: device.to_string(),
                rhs: other.device().to_string(),
            }),
            None => Ok(device),
        }
    }

    /// The realized storage of this tensor.
    fn storage(&self) -> Result<Arc<Storage>> {
        self.realize()?;
        graph::with_graph(|g| match &g.node(self.0.node).op {
            Op::Data(s) => Ok(s.clone()),
            op => unreachable!("a realized node holds data, not {}", op.name()),
        })
    }

    /// The realized elements in host memory (downloaded from a device on
    /// the first read), with a download that does not fit in host memory
    /// reported as [`Error::HostOutOfMemory`] naming `op` and this
    /// tensor's shape.
    fn host_data<'s>(&self, op: &'static str, storage: &'s Storage) -> Result<&'s HostBuffer> {
        storage.host().map_err(|e| match e {
            Error::HostOutOfMemory { bytes, dtype, .. } => Error::HostOutOfMemory {
                op,
                bytes,
                shape: dims(self.dims()),
                dtype,
            },
            e => e,
        })
    }

    /// Checks that `E` is this tensor's element type.
    fn check_element<E: Element>(&self, op: &'static str) -> Result<()> {
        if E::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: self.dtype(),
                rhs: E::DTYPE,
            });
        }
        Ok(())
    }

    /// The elements in row-major order. `E` must be the tensor's dtype.
    ///
    /// # Errors
    /// [`Error::DTypeMismatch`] if `E` is another dtype;
    /// [`Error::HostOutOfMemory`] if the elements (or, for a tensor on a
    /// GPU, their download) do not fit in host memory; device failures.
    pub fn to_vec<E: Element>(&self) -> Result<Vec<E>> {
        self.check_element::<E>("to_vec")?;
        let storage = self.storage()?;
        host_elements(self.host_data("to_vec", &storage)?, self.shape())
    }

    /// The single element of a tensor with one element (of any rank).
    ///
    /// # Errors
    /// [`Error::InvalidShape`] if the tensor has another number of elements;
    /// as [`Tensor::to_vec`] otherwise.
    pub fn to_scalar<E: Element>(&self) -> Result<E> {
        self.check_element::<E>("to_scalar")?;
        if self.numel() != 1 {
            return Err(Error::InvalidShape {
                op: "to_scalar",
                shape: dims(self.dims()),
                arg: vec![],
                reason: format!("needs exactly one element, not {}", self.numel()),
            });
        }
        Ok(self.to_vec::<E>()?[0])
    }

    /// Calls `f` on the realized elements in row-major order, without copying.
    ///
    /// ```
    /// use tilefuse::Tensor;
    /// let t = Tensor::from_vec(vec![1i32, 2, 3], &[3]);
    /// let total = t.with_slice(|s: &[i32]| s.iter().sum::<i32>()).unwrap();
    /// assert_eq!(total, 6);
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::to_vec`] (a host copy is made only for a tensor on a GPU).
    pub fn with_slice<E: Element + bytemuck::Pod, R>(&self, f: impl FnOnce(&[E]) -> R) -> Result<R> {
        self.check_element::<E>("with_slice")?;
        let storage = self.storage()?;
        Ok(f(self.host_data("with_slice", &storage)?.as_slice::<E>()))
    }

    /// Calls `f` on the raw bytes of the realized elements in row-major
    /// order (native endianness; bools one byte each), without copying.
    ///
    /// # Errors
    /// Device failures; [`Error::HostOutOfMemory`] if the download of a
    /// tensor on a GPU does not fit in host memory.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let storage = self.storage()?;
        Ok(f(self.host_data("with_bytes", &storage)?.bytes()))
    }
}

/// The bytes of a slice of elements.
fn element_bytes<E: Element>(data: &[E]) -> &[u8] {
    // SAFETY: `Element` is sealed and implemented only for bool, the integer
    // types, f16, bf16, f32 and f64: plain values without padding whose size
    // is their dtype's element size, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// A host buffer's elements (of a tensor of `shape`) as Rust values of its
/// own dtype `E`, or [`Error::HostOutOfMemory`] naming `to_vec` if they do
/// not fit in memory.
fn host_elements<E: Element>(buf: &HostBuffer, shape: &Shape) -> Result<Vec<E>> {
    debug_assert_eq!(E::DTYPE, buf.dtype());
    let mut out = Vec::<E>::new();
    out.try_reserve_exact(buf.len()).map_err(|_| Error::HostOutOfMemory {
        op: "to_vec",
        bytes: buf.bytes().len(),
        shape: dims(shape.dims()),
        dtype: buf.dtype(),
    })?;
    if E::DTYPE == DType::Bool {
        out.extend((0..buf.len()).map(|i| E::from_scalar(buf.get(i))));
        return Ok(out);
    }
    let bytes = buf.bytes();
    // SAFETY: `E` is a numeric element type of the buffer's dtype (checked by
    // the caller), for which every bit pattern is a valid value, the buffer
    // holds exactly `len` elements of its size, and `out` has room for them.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len());
        out.set_len(buf.len());
    }
    Ok(out)
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({}, {}, {})", self.shape(), self.dtype(), self.device())
    }
}
