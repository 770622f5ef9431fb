//! Device memory: a caching allocator and the buffers it hands out.
//!
//! Requests are rounded up to a size class ([`size_class`]); freed blocks wait
//! in a free list per class, so a pipeline that runs again allocates nothing
//! from the driver. A block is freed while the GPU may still use it: it keeps
//! one event per stream that used it, and is handed out again only once those
//! events completed, or, by [`CudaDevice::alloc_on`], with the new user's
//! stream told to wait for them. A block only one stream used needs no
//! event: it is handed out again at once for work on that stream, which runs
//! after the block's last use by stream order, and for work on another
//! stream after a wait on an event recorded on the owner at that moment.
//! When `cuMemAlloc` runs out of memory the cache is released and the
//! allocation tried once more; if that fails too, the answer is
//! [`Error::OutOfMemory`].

use super::stream::{query_raw, RawEvent, Stream};
use super::{driver_error, CudaDevice};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::{DeviceData, HostBuffer};
use cudarc::driver::{result, sys};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Requests up to this size are rounded to [`SMALL_GRANULE`]; larger ones to a
/// quarter step between powers of two.
const SMALL_LIMIT: usize = 1 << 20;
/// Rounding of small requests; every block is aligned to at least this.
const SMALL_GRANULE: usize = 256;

/// The number of bytes the pool allocates for a request of `bytes`: 0 for 0;
/// a multiple of 256 up to 1 MiB; above that, the next of 1, 1¼, 1½, 1¾ times
/// a power of two, so at most a quarter is wasted.
pub fn size_class(bytes: usize) -> usize {
    if bytes <= SMALL_LIMIT {
        return bytes.div_ceil(SMALL_GRANULE) * SMALL_GRANULE;
    }
    match bytes.checked_next_power_of_two() {
        Some(power) => {
            let step = power / 8;
            bytes.div_ceil(step) * step
        }
        None => bytes,
    }
}

/// Counters of one device's allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live [`DeviceBuffer`]s (their size classes).
    pub bytes_in_use: usize,
    /// Bytes in the free lists, ready for reuse.
    pub bytes_cached: usize,
    /// `cuMemAlloc` calls so far.
    pub allocations: u64,
    /// `cuMemFree` calls so far.
    pub frees: u64,
    /// Requests served from the free lists.
    pub reuses: u64,
}

/// A freed block waiting for reuse, with what says when the GPU is done
/// with it: the one stream that used it (`owner`), whose later work runs
/// after that use by stream order, or one event per stream that used it.
struct Block {
    ptr: sys::CUdeviceptr,
    owner: Option<usize>,
    pending: SmallVec<[RawEvent; 2]>,
}

// SAFETY: a device pointer and event handles are plain values the driver lets
// any thread use with the context current.
unsafe impl Send for Block {}

#[derive(Default)]
struct PoolState {
    free: HashMap<usize, Vec<Block>, foldhash::fast::FixedState>,
    stats: MemoryStats,
}

/// The caching allocator of one device.
#[derive(Default)]
pub(crate) struct Pool {
    state: Mutex<PoolState>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The owning device bound its context and synchronised before its
        // fields are dropped.
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for block in state.free.drain().flat_map(|(_, blocks)| blocks) {
            // SAFETY: the block came from `cuMemAlloc`, is owned by the pool,
            // and the device is idle.
            let _ = unsafe { result::free_sync(block.ptr) };
            for event in block.pending {
                // SAFETY: the pool owns the event.
                let _ = unsafe { result::event::destroy(event.0) };
            }
        }
    }
}

/// Device memory holding `len` elements of `dtype`, returned to its device's
/// pool when dropped. Its contents start undefined.
///
/// The pointer is aligned to 256 bytes. Work that uses the buffer on a
/// stream should get the pointer through [`DeviceBuffer::ptr_on`], so the
/// block is not reused before that work completed.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    capacity: usize,
    dtype: DType,
    len: usize,
    used_on: AtomicU32,
    device: Arc<CudaDevice>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer(cuda:{}, {}, len {})",
            self.device.ordinal(),
            self.dtype,
            self.len
        )
    }
}

impl DeviceBuffer {
    /// The device address (0 for an empty buffer).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The device address, noting that work queued on `stream` uses it.
    pub fn ptr_on(&self, stream: &Stream) -> u64 {
        self.mark_used(stream);
        self.ptr
    }

    /// Notes that work queued on `stream` uses the buffer.
    pub fn mark_used(&self, stream: &Stream) {
        self.used_on.fetch_or(1 << stream.index(), Ordering::AcqRel);
    }

    /// Indices of the streams that used the buffer.
    pub fn used_streams(&self) -> impl Iterator<Item = usize> {
        let mask = self.used_mask();
        (0..32).filter(move |i| mask & (1 << i) != 0)
    }

    /// The streams that used the buffer, one bit per stream index.
    pub(crate) fn used_mask(&self) -> u32 {
        self.used_on.load(Ordering::Acquire)
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

    /// The bytes of the elements.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype.size_in_bytes()
    }

    /// The bytes of the block behind the buffer (its size class).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The device the buffer lives on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    /// Sets every byte to zero, in order on `stream`.
    pub fn zero_on(&self, stream: &Stream) -> Result<()> {
        if self.bytes() == 0 {
            return Ok(());
        }
        stream.bind()?;
        let ptr = self.ptr_on(stream);
        // SAFETY: the range lies inside the block, which stays alive until the
        // stream is done with it (it is marked used there).
        unsafe { result::memset_d8_async(ptr, 0, self.bytes(), stream.raw()) }.map_err(driver_error("cuMemsetD8Async"))
    }
}

/// A device buffer is the memory of a device storage, downloaded by
/// [`DeviceBuffer::to_host`]; the runtime downcasts to it.
impl DeviceData for DeviceBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }

    fn device(&self) -> Device {
        Device::Cuda(self.device.ordinal())
    }

    fn download(&self) -> Result<HostBuffer> {
        self.to_host()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr != 0 {
            self.device
                .release(self.ptr, self.capacity, self.used_on.load(Ordering::Acquire));
        }
    }
}

impl CudaDevice {
    /// Memory for `len` elements of `dtype` that no queued work uses any more.
    /// Contents are undefined.
    pub fn alloc(self: &Arc<Self>, dtype: DType, len: usize) -> Result<DeviceBuffer> {
        self.alloc_inner(dtype, len, None)
    }

    /// Memory for `len` elements of `dtype` to be used on `stream`. A block
    /// still in use by queued work may be handed out: `stream` is then told
    /// to wait for that work, so nothing blocks the host.
    pub fn alloc_on(self: &Arc<Self>, dtype: DType, len: usize, stream: &Stream) -> Result<DeviceBuffer> {
        let buffer = self.alloc_inner(dtype, len, Some(stream))?;
        buffer.mark_used(stream);
        Ok(buffer)
    }

    /// The allocator's counters.
    pub fn memory_stats(&self) -> MemoryStats {
        self.memory.lock().stats
    }

    /// Returns every cached block to the driver, after waiting for the work
    /// that still used them.
    pub fn free_cached(&self) -> Result<()> {
        self.bind()?;
        let mut state = self.memory.lock();
        self.free_cached_locked(&mut state)
    }

    fn alloc_inner(self: &Arc<Self>, dtype: DType, len: usize, stream: Option<&Stream>) -> Result<DeviceBuffer> {
        let bytes = len.checked_mul(dtype.size_in_bytes()).ok_or(Error::OutOfMemory {
            bytes: usize::MAX,
            in_use: self.memory_stats().bytes_in_use,
        })?;
        let capacity = size_class(bytes);
        let ptr = if capacity == 0 {
            0
        } else {
            self.take_block(capacity, stream)?
        };
        Ok(DeviceBuffer {
            ptr,
            capacity,
            dtype,
            len,
            used_on: AtomicU32::new(0),
            device: self.clone(),
        })
    }

    /// A block of `capacity` bytes: a completed one from the free list, a
    /// pending one made safe by a wait on `stream`, or a new one.
    fn take_block(&self, capacity: usize, stream: Option<&Stream>) -> Result<sys::CUdeviceptr> {
        self.bind()?;
        let mut state = self.memory.lock();
        if let Some(block) = self.reusable_block(&mut state, capacity, stream)? {
            state.stats.reuses += 1;
            state.stats.bytes_cached -= capacity;
            state.stats.bytes_in_use += capacity;
            return Ok(block);
        }
        // SAFETY: allocating has no precondition beyond a current context.
        let ptr = match unsafe { result::malloc_sync(capacity) } {
            Ok(ptr) => ptr,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                self.free_cached_locked(&mut state)?;
                // SAFETY: as above.
                unsafe { result::malloc_sync(capacity) }.map_err(|e| {
                    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                        Error::OutOfMemory {
                            bytes: capacity,
                            in_use: state.stats.bytes_in_use,
                        }
                    } else {
                        driver_error("cuMemAlloc")(e)
                    }
                })?
            }
            Err(e) => return Err(driver_error("cuMemAlloc")(e)),
        };
        state.stats.allocations += 1;
        state.stats.bytes_in_use += capacity;
        Ok(ptr)
    }

    /// Takes a block of the class off the free list if one can be used now.
    fn reusable_block(
        &self,
        state: &mut PoolState,
        capacity: usize,
        stream: Option<&Stream>,
    ) -> Result<Option<sys::CUdeviceptr>> {
        let Some(blocks) = state.free.get_mut(&capacity) else {
            return Ok(None);
        };
        // A block the same stream used last needs nothing: stream order.
        let mut chosen = stream.and_then(|s| blocks.iter().position(|b| b.owner == Some(s.index())));
        if chosen.is_none() {
            for (i, block) in blocks.iter().enumerate() {
                if block.owner.is_none()
                    && block
                        .pending
                        .iter()
                        .try_fold(true, |done, e| Ok::<_, Error>(done && query_raw(e.0)?))?
                {
                    chosen = Some(i);
                    break;
                }
            }
        }
        let Some(i) = chosen.or(stream.and(blocks.len().checked_sub(1))) else {
            return Ok(None);
        };
        let block = blocks.swap_remove(i);
        if let Some(stream) = stream {
            if let Some(owner) = block.owner.filter(|&o| o != stream.index()) {
                // Everything queued on the owner so far includes the block's
                // last use.
                if let Err(e) = self.join_streams(stream, owner) {
                    blocks.push(block);
                    return Err(e);
                }
            }
            for event in &block.pending {
                stream.wait_raw(event.0)?;
            }
        }
        for event in block.pending {
            self.events.give(event);
        }
        Ok(Some(block.ptr))
    }

    fn free_cached_locked(&self, state: &mut PoolState) -> Result<()> {
        // Every stream owning a block once, rather than once per block. On
        // an error the blocks stay cached: nothing is freed under work that
        // may still use it, and nothing is lost.
        let mut owners: Vec<usize> = state.free.values().flatten().filter_map(|b| b.owner).collect();
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            self.stream(owner).synchronize()?;
        }
        let capacities: Vec<usize> = state.free.keys().copied().collect();
        for capacity in capacities {
            while let Some(mut block) = state.free.get_mut(&capacity).and_then(Vec::pop) {
                while let Some(event) = block.pending.pop() {
                    // SAFETY: the pool owns the event and it is alive.
                    if let Err(e) = unsafe { result::event::synchronize(event.0) } {
                        block.pending.push(event);
                        state.free.entry(capacity).or_default().push(block);
                        return Err(driver_error("cuEventSynchronize")(e));
                    }
                    self.events.give(event);
                }
                // SAFETY: the block came from `cuMemAlloc`, no buffer refers to
                // it, and the work that used it completed.
                if let Err(e) = unsafe { result::free_sync(block.ptr) } {
                    state.free.entry(capacity).or_default().push(block);
                    return Err(driver_error("cuMemFree")(e));
                }
                state.stats.frees += 1;
                state.stats.bytes_cached -= capacity.min(state.stats.bytes_cached);
            }
            state.free.remove(&capacity);
        }
        state.stats.bytes_cached = 0;
        Ok(())
    }

    /// Puts a dropped buffer's block on the free list: owned by the stream
    /// that used it if only one did (no driver call), otherwise with an
    /// event on each stream that used it. When events cannot be recorded,
    /// waits for the device instead; when even that fails, the block is
    /// leaked rather than reused unsafely.
    fn release(&self, ptr: sys::CUdeviceptr, capacity: usize, used_on: u32) {
        let block = |owner, pending| Block { ptr, owner, pending };
        if used_on.count_ones() <= 1 {
            let owner = (used_on != 0).then(|| used_on.trailing_zeros() as usize);
            self.cache_block(capacity, block(owner, SmallVec::new()));
            return;
        }
        let pending = self.bind().and_then(|()| {
            let mut pending = SmallVec::new();
            for index in (0..32).filter(|i| used_on & (1 << i) != 0) {
                let event = self.events.take()?;
                let recorded = self.stream(index).record_raw(event.0);
                pending.push(event);
                recorded?;
            }
            Ok(pending)
        });
        let pending = match pending {
            Ok(pending) => pending,
            Err(_) => match self.synchronize() {
                Ok(()) => SmallVec::new(),
                Err(_) => return,
            },
        };
        self.cache_block(capacity, block(None, pending));
    }

    /// Moves a released block of `capacity` bytes from use to the free list.
    fn cache_block(&self, capacity: usize, block: Block) {
        let mut state = self.memory.lock();
        state.stats.bytes_in_use -= capacity;
        state.stats.bytes_cached += capacity;
        state.free.entry(capacity).or_default().push(block);
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(0), 0);
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(256), 256);
        assert_eq!(size_class(257), 512);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), (1 << 20) + (1 << 18));
        assert_eq!(size_class(3 << 20), 3 << 20);
        assert_eq!(size_class((3 << 20) + 1), (7 << 20) / 2);
        for bytes in [1usize, 1000, 70_000, 1 << 20, 5_000_000, 123_456_789, 1 << 33] {
            let class = size_class(bytes);
            assert!(class >= bytes && class % 256 == 0, "{bytes} -> {class}");
            assert!(
                class - bytes <= (bytes / 4).max(255),
                "{bytes} -> {class} wastes too much"
            );
            assert_eq!(size_class(class), class, "a class is its own class");
        }
        assert_eq!(size_class(usize::MAX), usize::MAX);
    }
}
