//! Memory that holds tensor data: host buffers, and the memory of a device
//! through a handle its back end implements.
//!
//! Storage knows no back end. A back end hands its memory over as a
//! [`DeviceData`] (the CUDA runtime's buffers are one), and gets its own
//! type back by downcasting ([`DeviceData::as_any`]). Copies that a back
//! end makes of host data are kept by the [`HostBuffer`] they copy, so
//! dropping a storage drops its device copies with it.

use crate::dtype::{DType, Element, Scalar};
use crate::error::{dims, Error, Result};
use crate::place::Device;
use bytemuck::Pod;
use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Memory of a device, with the data of one storage, as its back end
/// implements it.
///
/// The data must not change once the handle is made (work still queued to
/// compute it is fine: [`DeviceData::download`] waits for it).
pub trait DeviceData: Send + Sync + std::fmt::Debug + Any {
    /// The element type.
    fn dtype(&self) -> DType;

    /// The number of elements.
    fn len(&self) -> usize;

    /// Whether the memory holds no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device the memory belongs to.
    fn device(&self) -> Device;

    /// A copy of the data in host memory, after the work that computes it.
    ///
    /// # Errors
    /// Device failures; [`Error::HostOutOfMemory`] if the copy does not fit
    /// in memory.
    fn download(&self) -> Result<HostBuffer>;

    /// The handle as [`Any`], for its back end to downcast to its own type.
    fn as_any(&self) -> &dyn Any;
}

/// The device copies of a host buffer's data, at most one per device,
/// dropped with the buffer.
#[derive(Default)]
struct DeviceCopies(Mutex<Vec<Arc<dyn DeviceData>>>);

impl DeviceCopies {
    /// The copies, for reading or adding to.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn DeviceData>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every copy: the data they copied is about to change.
    fn clear(&mut self) {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

/// A typed, contiguous host buffer.
///
/// The bytes live in a `Vec<u64>`, so any element type can be viewed through
/// `bytemuck` without copying or misalignment. Booleans are stored as one
/// byte, 0 or 1.
///
/// A buffer also keeps the copies of its data that back ends made on their
/// devices ([`HostBuffer::keep_device_copy`]), so that data uploaded once
/// is found there by the next run. They go with the buffer, and with any
/// change to its data (every mutable access drops them); a clone starts
/// without them, and they play no part in equality.
pub struct HostBuffer {
    dtype: DType,
    len: usize,
    words: Vec<u64>,
    copies: DeviceCopies,
}

impl Clone for HostBuffer {
    fn clone(&self) -> HostBuffer {
        HostBuffer {
            dtype: self.dtype,
            len: self.len,
            words: self.words.clone(),
            copies: DeviceCopies::default(),
        }
    }
}

impl PartialEq for HostBuffer {
    fn eq(&self, other: &HostBuffer) -> bool {
        (self.dtype, self.len) == (other.dtype, other.len) && self.words == other.words
    }
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
        Ok(HostBuffer {
            dtype,
            len,
            words,
            copies: DeviceCopies::default(),
        })
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
            copies: DeviceCopies::default(),
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

    /// The raw bytes of the elements, mutable. The device copies of the
    /// buffer are dropped, as they would no longer match it.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.copies.clear();
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

    /// The copy of the buffer's data on `device` that a back end kept with
    /// [`HostBuffer::keep_device_copy`], if any.
    pub fn device_copy(&self, device: Device) -> Option<Arc<dyn DeviceData>> {
        self.copies.lock().iter().find(|c| c.device() == device).cloned()
    }

    /// Keeps `copy`, which must hold the buffer's data, as the buffer's copy
    /// on its device, and returns it; when the buffer has a copy there
    /// already (another thread stored one meanwhile), that one is returned
    /// and `copy` dropped: the first copy stored wins.
    pub fn keep_device_copy(&self, copy: Arc<dyn DeviceData>) -> Arc<dyn DeviceData> {
        let device = copy.device();
        let mut copies = self.copies.lock();
        if let Some(kept) = copies.iter().find(|c| c.device() == device) {
            return kept.clone();
        }
        copies.push(copy.clone());
        copy
    }
}

/// Where a realized tensor's data lives.
///
/// Data in a graph node never changes once stored, which the variants rely
/// on to cache copies:
///
/// - A [`Storage::Device`] keeps a host copy, made by the first
///   [`Storage::host`] call (a download) and reused by every later one.
/// - A [`Storage::Host`] used on a device is uploaded once per device: the
///   back end keeps the copy in the storage's [`HostBuffer`] (as it does in
///   the host copy of a device storage used on another device). The copy
///   lives as long as the storage does: dropping the storage drops its
///   device copies at once. Realizing the same pipeline again on the same
///   inputs copies nothing between host and device, and looking for a copy
///   costs the same however many storages have one.
#[derive(Debug)]
#[non_exhaustive]
pub enum Storage {
    /// Host memory.
    Host(HostBuffer),
    /// Memory of a device, with a host copy made on first use.
    Device(DeviceStorage),
}

impl Storage {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Storage::Host(b) => b.dtype(),
            Storage::Device(d) => d.data.dtype(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Storage::Host(b) => b.len(),
            Storage::Device(d) => d.data.len(),
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
            Storage::Device(d) => d.host(),
        }
    }

    /// The device memory of device storage; `None` for host storage.
    pub fn device_data(&self) -> Option<&dyn DeviceData> {
        match self {
            Storage::Host(_) => None,
            Storage::Device(d) => Some(d.data()),
        }
    }

    /// The device this storage lives on.
    pub fn device(&self) -> Device {
        match self {
            Storage::Host(_) => Device::Cpu,
            Storage::Device(d) => d.data.device(),
        }
    }

    /// The copy of the storage's data on `device` that a back end kept in
    /// its host buffer (the buffer itself, or the host copy of device
    /// storage once one was made), found without copying anything.
    pub fn device_copy(&self, device: Device) -> Option<Arc<dyn DeviceData>> {
        match self {
            Storage::Host(b) => b.device_copy(device),
            Storage::Device(d) => d.host.get().and_then(|h| h.device_copy(device)),
        }
    }
}

/// Data in the memory of a device, and its host copy once one was asked
/// for.
#[derive(Debug)]
pub struct DeviceStorage {
    data: Box<dyn DeviceData>,
    host: OnceLock<HostBuffer>,
}

impl DeviceStorage {
    /// Storage holding `data`, whose contents must not change afterwards
    /// (work still queued to compute them is fine: reads wait for it).
    pub fn new(data: impl DeviceData) -> DeviceStorage {
        DeviceStorage {
            data: Box::new(data),
            host: OnceLock::new(),
        }
    }

    /// The device memory.
    pub fn data(&self) -> &dyn DeviceData {
        &*self.data
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
        let downloaded = self.data.download()?;
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

    /// A device copy for the tests: a host buffer that says it lives on
    /// `device`, counting how many of its kind are alive.
    #[derive(Debug)]
    struct FakeCopy {
        data: HostBuffer,
        device: Device,
        _live: Arc<()>,
    }

    impl DeviceData for FakeCopy {
        fn dtype(&self) -> DType {
            self.data.dtype()
        }
        fn len(&self) -> usize {
            self.data.len()
        }
        fn device(&self) -> Device {
            self.device
        }
        fn download(&self) -> Result<HostBuffer> {
            Ok(self.data.clone())
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn a_storage_keeps_one_copy_per_device_and_drops_them_with_it() {
        let live = Arc::new(());
        let copy_of = |b: &HostBuffer, device| -> Arc<dyn DeviceData> {
            Arc::new(FakeCopy {
                data: b.clone(),
                device,
                _live: live.clone(),
            })
        };
        let storage = Arc::new(Storage::Host(HostBuffer::from_elements(&[1.0f32, 2.0])));
        let host = storage.host().unwrap();
        assert!(storage.device_copy(Device::Cuda(0)).is_none());
        let first = host.keep_device_copy(copy_of(host, Device::Cuda(0)));
        // A second copy for the same device loses to the first; another
        // device gets its own.
        let again = host.keep_device_copy(copy_of(host, Device::Cuda(0)));
        assert!(Arc::ptr_eq(&first, &again));
        host.keep_device_copy(copy_of(host, Device::Cuda(1)));
        let found = storage.device_copy(Device::Cuda(0)).unwrap();
        assert!(Arc::ptr_eq(&first, &found));
        assert_eq!(
            found.as_any().downcast_ref::<FakeCopy>().unwrap().device,
            Device::Cuda(0)
        );
        assert_eq!(Arc::strong_count(&live), 3);
        // A clone starts without copies and is equal all the same.
        let cloned = host.clone();
        assert!(cloned.device_copy(Device::Cuda(0)).is_none());
        assert_eq!(&cloned, host);
        drop((first, again, found));
        drop(storage);
        assert_eq!(Arc::strong_count(&live), 1, "the copies went with the storage");
    }

    #[test]
    fn changing_a_buffer_drops_its_device_copies() {
        let live = Arc::new(());
        let mut b = HostBuffer::from_elements(&[1i32, 2, 3]);
        let copy = FakeCopy {
            data: b.clone(),
            device: Device::Cuda(0),
            _live: live.clone(),
        };
        b.keep_device_copy(Arc::new(copy));
        assert!(b.device_copy(Device::Cuda(0)).is_some());
        b.set(1, Scalar::Int(5, DType::I32));
        assert!(b.device_copy(Device::Cuda(0)).is_none());
        assert_eq!(Arc::strong_count(&live), 1);
    }

    #[test]
    fn device_storage_downloads_once_and_keeps_copies_in_its_host_copy() {
        let live = Arc::new(());
        let data = HostBuffer::from_elements(&[4u8, 5]);
        let storage = Storage::Device(DeviceStorage::new(FakeCopy {
            data,
            device: Device::Cuda(0),
            _live: live.clone(),
        }));
        assert_eq!(
            (storage.device(), storage.dtype(), storage.len()),
            (Device::Cuda(0), DType::U8, 2)
        );
        assert!(storage.device_data().is_some());
        // No host copy yet: nothing to look in, and nothing downloaded.
        assert!(storage.device_copy(Device::Cuda(1)).is_none());
        let host = storage.host().unwrap();
        assert!(std::ptr::eq(host, storage.host().unwrap()));
        assert_eq!(host.to_vec::<u8>(), vec![4, 5]);
        host.keep_device_copy(Arc::new(FakeCopy {
            data: host.clone(),
            device: Device::Cuda(1),
            _live: live.clone(),
        }));
        assert!(storage.device_copy(Device::Cuda(1)).is_some());
        drop(storage);
        assert_eq!(Arc::strong_count(&live), 1);
    }
}
