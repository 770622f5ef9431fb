//! Copies between host buffers and device buffers through pinned staging
//! memory.
//!
//! Pageable host memory cannot be copied asynchronously, so every copy goes
//! through page-locked staging buffers of [`STAGING_CHUNK_BYTES`] each
//! (`cuMemHostAlloc`), kept in a pool and reused. Two of them alternate, so
//! the host copies one chunk while the DMA engine moves the other. The host
//! side of a chunk (pageable to pinned memory, or back) is copied in pieces
//! on the rayon pool: one thread's `memcpy` is several times slower than
//! the DMA engine.

use super::stream::{RawEvent, Stream};
use super::{driver_error, CudaDevice, DeviceBuffer};
use crate::error::Result;
use crate::storage::HostBuffer;
use cudarc::driver::{result, sys};
use rayon::prelude::*;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

/// The size of one pinned staging buffer: copies larger than this go in
/// chunks.
pub const STAGING_CHUNK_BYTES: usize = 16 << 20;

/// The bytes one thread copies between pageable and pinned memory: a chunk
/// is copied in pieces of this size in parallel.
const COPY_PIECE_BYTES: usize = 1 << 20;

/// Copies `src` into `dst`, of the same length, in pieces on the rayon pool
/// when it is longer than one piece.
fn copy_in_pieces(dst: &mut [u8], src: &[u8]) {
    if src.len() <= COPY_PIECE_BYTES {
        dst.copy_from_slice(src);
    } else {
        dst.par_chunks_mut(COPY_PIECE_BYTES)
            .zip(src.par_chunks(COPY_PIECE_BYTES))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// One page-locked host buffer and the event of the last copy that used it.
struct Staging {
    ptr: *mut u8,
    event: RawEvent,
    in_flight: bool,
}

// SAFETY: the pinned pointer is owned by this value alone; the event handle is
// usable from any thread with the context current.
unsafe impl Send for Staging {}

impl Staging {
    /// Blocks until the copy that last used the buffer completed.
    fn wait_idle(&mut self) -> Result<()> {
        if self.in_flight {
            // SAFETY: the event is owned by this staging buffer and alive.
            unsafe { result::event::synchronize(self.event.0) }.map_err(driver_error("cuEventSynchronize"))?;
            self.in_flight = false;
        }
        Ok(())
    }

    /// Marks the end of a copy queued on `stream` that uses the buffer.
    fn record(&mut self, stream: &Stream) -> Result<()> {
        stream.record_raw(self.event.0)?;
        self.in_flight = true;
        Ok(())
    }
}

/// The staging buffers of one device.
#[derive(Default)]
pub(crate) struct StagingPool {
    free: Mutex<Vec<Staging>>,
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        // The owning device bound its context and synchronised before its
        // fields are dropped.
        for staging in self.free.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
            // SAFETY: the pointer came from `cuMemHostAlloc` and the event from
            // `cuEventCreate`; both are owned by the pool and idle.
            unsafe {
                let _ = result::free_host(staging.ptr as *mut c_void);
                let _ = result::event::destroy(staging.event.0);
            }
        }
    }
}

impl CudaDevice {
    /// A staging buffer from the pool, or a new one.
    fn take_staging(&self) -> Result<Staging> {
        if let Some(staging) = self.staging.free.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Ok(staging);
        }
        // SAFETY: the context is current (callers bind it); the memory is
        // only ever accessed as bytes, so its initial contents do not matter.
        let ptr = unsafe { result::malloc_host(STAGING_CHUNK_BYTES, 0) }.map_err(driver_error("cuMemHostAlloc"))?;
        let event = match self.events.take() {
            Ok(event) => event,
            Err(e) => {
                // SAFETY: `ptr` was just allocated and is not used elsewhere.
                let _ = unsafe { result::free_host(ptr) };
                return Err(e);
            }
        };
        Ok(Staging {
            ptr: ptr as *mut u8,
            event,
            in_flight: false,
        })
    }

    fn give_staging(&self, stages: Vec<Staging>) {
        self.staging
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(stages);
    }

    /// Takes up to two staging buffers for a copy of `bytes`, runs `copy` with
    /// them, and returns them to the pool whatever happened.
    fn with_staging<T>(&self, bytes: usize, copy: impl FnOnce(&mut [Staging]) -> Result<T>) -> Result<T> {
        let wanted = bytes.div_ceil(STAGING_CHUNK_BYTES).min(2);
        let mut stages = Vec::with_capacity(wanted);
        let outcome = (0..wanted)
            .try_for_each(|_| {
                stages.push(self.take_staging()?);
                Ok(())
            })
            .and_then(|()| copy(&mut stages));
        self.give_staging(stages);
        outcome
    }

    /// Copies `host` to a new device buffer, queued on stream 0.
    pub fn from_host(self: &Arc<Self>, host: &HostBuffer) -> Result<DeviceBuffer> {
        self.from_host_on(host, self.stream(0))
    }

    /// Copies `host` to a new device buffer, queued on `stream`. The call
    /// returns once the data is in pinned memory; the buffer is ready for work
    /// queued on `stream` (or on streams that wait for it).
    pub fn from_host_on(self: &Arc<Self>, host: &HostBuffer, stream: &Stream) -> Result<DeviceBuffer> {
        let buffer = self.alloc_on(host.dtype(), host.len(), stream)?;
        let bytes = host.bytes();
        self.with_staging(bytes.len(), |stages| {
            let count = stages.len();
            for (i, chunk) in bytes.chunks(STAGING_CHUNK_BYTES).enumerate() {
                let staging = &mut stages[i % count];
                staging.wait_idle()?;
                // SAFETY: the staging buffer holds STAGING_CHUNK_BYTES bytes, no
                // copy uses it any more (waited above), `chunk` is no larger,
                // and nothing else refers to the buffer while it is borrowed.
                let pinned = unsafe { std::slice::from_raw_parts_mut(staging.ptr, chunk.len()) };
                copy_in_pieces(pinned, chunk);
                let dst = buffer.ptr() + (i * STAGING_CHUNK_BYTES) as u64;
                // SAFETY: the destination range lies inside `buffer`, which is
                // marked used on `stream`; the source is pinned memory that
                // stays untouched until the event recorded next completes.
                unsafe { sys::cuMemcpyHtoDAsync_v2(dst, staging.ptr as *const c_void, chunk.len(), stream.raw()) }
                    .result()
                    .map_err(driver_error("cuMemcpyHtoDAsync"))?;
                staging.record(stream)?;
            }
            Ok(())
        })?;
        Ok(buffer)
    }
}

impl DeviceBuffer {
    /// Copies the buffer to the host, after all queued work that used it.
    pub fn to_host(&self) -> Result<HostBuffer> {
        let device = self.device();
        let stream = device.stream(self.used_streams().next().unwrap_or(0));
        self.to_host_on(stream)
    }

    /// Copies the buffer to the host on `stream`, after all queued work that
    /// used it on any stream. Blocks until the data arrived. A host buffer
    /// the allocator refuses is [`crate::Error::HostOutOfMemory`] (naming
    /// `download`), before anything is copied.
    pub fn to_host_on(&self, stream: &Stream) -> Result<HostBuffer> {
        let device = self.device().clone();
        device.bind()?;
        for other in self.used_streams().filter(|&i| i != stream.index()) {
            device.join_streams(stream, other)?;
        }
        let src = self.ptr_on(stream);
        let mut host = HostBuffer::try_zeros_for("download", &[self.len()], self.dtype())?;
        let out = host.bytes_mut();
        let chunks: Vec<(usize, usize)> = (0..out.len())
            .step_by(STAGING_CHUNK_BYTES)
            .map(|start| (start, STAGING_CHUNK_BYTES.min(out.len() - start)))
            .collect();
        device.with_staging(out.len(), |stages| {
            let count = stages.len();
            let issue = |staging: &mut Staging, (start, len): (usize, usize)| -> Result<()> {
                staging.wait_idle()?;
                // SAFETY: the source range lies inside this buffer, marked used
                // on `stream`; the staging buffer holds at least `len` bytes and
                // is not read until the event recorded next completes.
                unsafe { sys::cuMemcpyDtoHAsync_v2(staging.ptr as *mut c_void, src + start as u64, len, stream.raw()) }
                    .result()
                    .map_err(driver_error("cuMemcpyDtoHAsync"))?;
                staging.record(stream)
            };
            if let Some(&first) = chunks.first() {
                issue(&mut stages[0], first)?;
            }
            for (i, &(start, len)) in chunks.iter().enumerate() {
                // Queue the next chunk before copying this one out, so the two overlap.
                if let Some(&next) = chunks.get(i + 1) {
                    issue(&mut stages[(i + 1) % count], next)?;
                }
                let staging = &mut stages[i % count];
                staging.wait_idle()?;
                // SAFETY: the copy into the staging buffer completed (waited
                // above), `len` bytes of it were written, and no copy writes
                // it while it is borrowed.
                let pinned = unsafe { std::slice::from_raw_parts(staging.ptr, len) };
                copy_in_pieces(&mut out[start..start + len], pinned);
            }
            Ok(())
        })?;
        Ok(host)
    }
}
