//! Memory that holds tensor data: host buffers, and device buffers with the
//! CUDA backend.

#[cfg(feature = "cuda")]
use crate::device::cuda::DeviceBuffer;
use crate::device::Device;
use crate::dtype::{DType, Element, Scalar};
use crate::error::{dims, Error, Result};
use bytemuck::Pod;
#[cfg(feature = "cuda")]
use std::sync::OnceLock;

/// A typed, contiguous host buffer.
///
/// The bytes live in a `Vec<u64>`, so any element type can be viewed through
/// `bytemuck` without copying or misalignment. Booleans are stored as one
/// byte, 0 or 1.
#[derive(Clone, PartialEq)]
pub struct HostBuffer {
    dtype: DType,
    len: usize,
    words: Vec<u64>,
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({}, len {})", self.dtype, self.len)
    }
}

impl HostBuffer {
    /// A zero-filled buffer of `len` elements, for small buffers.
    ///
    /// # Panics
    /// If the allocator refuses the buffer, with the message of the error
    /// [`HostBuffer::try_zeros`] returns.
    #[track_caller]
    pub fn zeros(dtype: DType, len: usize) -> HostBuffer {
        crate::error::or_panic(HostBuffer::try_zeros(dtype, len))
    }

    /// A zero-filled buffer of `len` elements, or
    /// [`Error::HostOutOfMemory`] if the allocator refuses it (the
    /// process goes on). The memory comes zeroed from the allocator, so
    /// the pages of a large buffer are only backed when first touched.
    pub fn try_zeros(dtype: DType, len: usize) -> Result<HostBuffer> {
        HostBuffer::try_zeros_for("HostBuffer::try_zeros", &[len], dtype)
    }

    /// A zero-filled buffer of the elements of `shape`, or
    /// [`Error::HostOutOfMemory`] naming `op`, the bytes and `shape`.
    pub(crate) fn try_zeros_for(op: &'static str, shape: &[usize], dtype: DType) -> Result<HostBuffer> {
        let out_of_memory = |bytes: usize| Error::HostOutOfMemory {
            op,
            bytes,
            shape: dims(shape),
            dtype,
        };
        let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let bytes = len.and_then(|len| len.checked_mul(dtype.size_in_bytes()));
        let (Some(len), Some(bytes)) = (len, bytes) else {
            return Err(out_of_memory(usize::MAX));
        };
        let words =
            bytemuck::allocation::try_zeroed_vec::<u64>(bytes.div_ceil(8)).map_err(|()| out_of_memory(bytes))?;
        Ok(HostBuffer { dtype, len, words })
    }

    /// A copy of the buffer, or [`Error::HostOutOfMemory`] naming `op` if
    /// the allocator refuses it.
    pub(crate) fn try_clone_for(&self, op: &'static str) -> Result<HostBuffer> {
        let mut words = Vec::new();
        words
            .try_reserve_exact(self.words.len())
            .map_err(|_| Error::HostOutOfMemory {
                op,
                bytes: self.words.len() * 8,
                shape: dims(&[self.len]),
                dtype: self.dtype,
            })?;
        words.extend_from_slice(&self.words);
        Ok(HostBuffer {
            dtype: self.dtype,
            len: self.len,
            words,
        })
    }

    /// A buffer holding a copy of `data`, whose Rust type must be `dtype`'s
    /// storage type (`u8` for bool).
    ///
    /// # Panics
    /// If `size_of::<T>()` differs from `dtype`'s element size.
    pub fn from_pod<T: Pod>(dtype: DType, data: &[T]) -> HostBuffer {
        let mut b = HostBuffer::zeros(dtype, data.len());
        b.as_mut_slice::<T>().copy_from_slice(data);
        b
    }

    /// A buffer of Rust elements.
    pub fn from_elements<E: Element>(data: &[E]) -> HostBuffer {
        let mut b = HostBuffer::zeros(E::DTYPE, data.len());
        for (i, &x) in data.iter().enumerate() {
            b.set(i, x.to_scalar());
        }
        b
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw bytes of the elements.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len * self.dtype.size_in_bytes()]
    }

    /// The raw bytes of the elements, mutable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.len * self.dtype.size_in_bytes();
        &mut bytemuck::cast_slice_mut(&mut self.words)[..n]
    }

    /// The elements viewed as `T`, zero-copy.
    ///
    /// # Panics
    /// If `size_of::<T>()` differs from the dtype's element size.
    pub fn as_slice<T: Pod>(&self) -> &[T] {
        assert_eq!(
            std::mem::size_of::<T>(),
            self.dtype.size_in_bytes(),
            "as_slice: element size of {}",
            self.dtype
        );
        bytemuck::cast_slice(self.bytes())
    }

    /// The elements viewed as `T`, mutable and zero-copy.
    ///
    /// # Panics
    /// If `size_of::<T>()` differs from the dtype's element size.
    pub fn as_mut_slice<T: Pod>(&mut self) -> &mut [T] {
        assert_eq!(
            std::mem::size_of::<T>(),
            self.dtype.size_in_bytes(),
            "as_mut_slice: element size of {}",
            self.dtype
        );
        bytemuck::cast_slice_mut(self.bytes_mut())
    }

    /// Element `i` as a scalar of the buffer's dtype.
    pub fn get(&self, i: usize) -> Scalar {
        let d = self.dtype;
        match d {
            DType::Bool => Scalar::Bool(self.as_slice::<u8>()[i] != 0),
            DType::U8 => Scalar::Int(self.as_slice::<u8>()[i] as i128, d),
            DType::I32 => Scalar::Int(self.as_slice::<i32>()[i] as i128, d),
            DType::I64 => Scalar::Int(self.as_slice::<i64>()[i] as i128, d),
            DType::U32 => Scalar::Int(self.as_slice::<u32>()[i] as i128, d),
            DType::F16 => Scalar::Float(self.as_slice::<half::f16>()[i].to_f64(), d),
            DType::BF16 => Scalar::Float(self.as_slice::<half::bf16>()[i].to_f64(), d),
            DType::F32 => Scalar::Float(self.as_slice::<f32>()[i] as f64, d),
            DType::F64 => Scalar::Float(self.as_slice::<f64>()[i], d),
        }
    }

    /// Sets element `i` to `v`, rounded or wrapped to the buffer's dtype.
    pub fn set(&mut self, i: usize, v: Scalar) {
        let size = self.dtype.size_in_bytes();
        let bits = v.element_bits(self.dtype).to_le_bytes();
        self.bytes_mut()[i * size..(i + 1) * size].copy_from_slice(&bits[..size]);
    }

    /// The elements as Rust values of type `E`, converted from the buffer's
    /// dtype as [`Scalar::cast`] does.
    pub fn to_vec<E: Element>(&self) -> Vec<E> {
        (0..self.len).map(|i| E::from_scalar(self.get(i))).collect()
    }
}

/// Where a realized tensor's data lives.
///
/// Data in a graph node never changes once stored, which the variants rely
/// on to cache copies:
///
/// - A `Storage::Cuda` (with the `cuda` feature) keeps a host copy, made
///   by the first [`Storage::host`] call (a download) and reused by every
///   later one.
/// - A [`Storage::Host`] used on a CUDA device is uploaded once per device;
///   the runtime keeps the device copy in a per-device table keyed by the
///   storage's address, holding only a weak reference to the storage, so
///   the copy lives as long as the storage does: dropping the storage
///   releases its device copies at once. Realizing the same pipeline again
///   on the same inputs copies nothing between host and device, and a
///   realization costs the same however many storages have device copies.
#[derive(Debug)]
#[non_exhaustive]
pub enum Storage {
    /// Host memory.
    Host(HostBuffer),
    /// Memory of a CUDA device, with a host copy made on first use.
    #[cfg(feature = "cuda")]
    Cuda(CudaStorage),
}

/// Called with the address of every [`Storage`] dropped once the CUDA
/// runtime set it (at its first upload): the runtime forgets the storage's
/// device copies then, instead of looking for dropped storages on every run.
#[cfg(feature = "cuda")]
static DROP_HOOK: OnceLock<fn(usize)> = OnceLock::new();

/// Sets the function every later drop of a [`Storage`] calls with the
/// storage's address (the first call wins). The function must not drop a
/// `Storage` while it holds a lock it takes itself.
#[cfg(feature = "cuda")]
pub(crate) fn on_drop(hook: fn(usize)) {
    let _ = DROP_HOOK.get_or_init(|| hook);
}

impl Drop for Storage {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        if let Some(hook) = DROP_HOOK.get() {
            hook(self as *const Storage as usize);
        }
    }
}

impl Storage {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Host(b) => b.dtype(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(c) => c.buffer.dtype(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::Host(b) => b.len(),
            #[cfg(feature = "cuda")]
            Storage::Cuda(c) => c.buffer.len(),
        }
    }

    /// Whether the storage holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data in host memory: the buffer itself for host storage; for
    /// device storage, a copy downloaded on the first call (after the work
    /// that computes it) and kept.
    ///
    /// # Errors
    /// Device failures while downloading; [`Error::HostOutOfMemory`] if the
    /// host copy does not fit in memory (the next call tries again).
    pub fn host(&self) -> Result<&HostBuffer> {
        match self {
            Storage::Host(b) => Ok(b),
            #[cfg(feature = "cuda")]
            Storage::Cuda(c) => c.host(),
        }
    }

    /// The device buffer of device storage; `None` for host storage.
    #[cfg(feature = "cuda")]
    pub fn device_buffer(&self) -> Option<&DeviceBuffer> {
        match self {
            Storage::Host(_) => None,
            Storage::Cuda(c) => Some(&c.buffer),
        }
    }

    /// The device this storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Host(_) => Device::Cpu,
            #[cfg(feature = "cuda")]
            Storage::Cuda(c) => Device::Cuda(c.buffer.device().ordinal()),
        }
    }
}

/// Data in the memory of a CUDA device, and its host copy once one was
/// asked for.
#[cfg(feature = "cuda")]
#[derive(Debug)]
pub struct CudaStorage {
    buffer: DeviceBuffer,
    host: OnceLock<HostBuffer>,
}

#[cfg(feature = "cuda")]
impl CudaStorage {
    /// Storage holding `buffer`, whose contents must not change afterwards
    /// (work still queued to compute them is fine: reads wait for it).
    pub fn new(buffer: DeviceBuffer) -> CudaStorage {
        CudaStorage {
            buffer,
            host: OnceLock::new(),
        }
    }

    /// The device buffer.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }

    /// The host copy, downloaded on the first call.
    ///
    /// # Errors
    /// Device failures while downloading; [`Error::HostOutOfMemory`] if the
    /// host copy does not fit in memory.
    pub fn host(&self) -> Result<&HostBuffer> {
        if let Some(h) = self.host.get() {
            return Ok(h);
        }
        let downloaded = self.buffer.to_host()?;
        Ok(self.host.get_or_init(|| downloaded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_rounds_and_get_reads_back() {
        let mut b = HostBuffer::zeros(DType::BF16, 3);
        b.set(0, Scalar::Float(1.0 / 3.0, DType::F64));
        assert_eq!(
            b.get(0),
            Scalar::Float(half::bf16::from_f64(1.0 / 3.0).to_f64(), DType::BF16)
        );
        let mut i = HostBuffer::zeros(DType::U8, 1);
        i.set(0, Scalar::Int(300, DType::I64));
        assert_eq!(i.to_vec::<u8>(), vec![44]);
    }
}
