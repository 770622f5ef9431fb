//! Timing each kernel launch of a realization with CUDA events, on request.
//!
//! Off by default: a timed launch costs two event records. With
//! [`time_launches`]`(true)`, every launch the calling thread queues gets an
//! event with timing recorded on its stream just before and just after it;
//! [`launch_times`] waits for them and reports each launch's start and end
//! relative to the earliest start. Two launches on different streams overlap
//! when one starts before the other ends.

use crate::device::cuda::{CudaDevice, Event, Stream};
use crate::error::Result;
use std::cell::RefCell;

/// When one kernel launch ran, in milliseconds from the earliest start
/// among the launches reported together.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchTime {
    /// The kernel program's name.
    pub kernel: String,
    /// The index of the stream it ran on, in its device's pool.
    pub stream: usize,
    /// When the stream reached the launch.
    pub start_ms: f32,
    /// When the kernel finished.
    pub end_ms: f32,
}

struct Pending {
    kernel: String,
    stream: usize,
    start: Event,
    end: Event,
}

thread_local! {
    static TIMED: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
}

/// Turns timing of the calling thread's kernel launches on or off; turning
/// it off drops what was recorded.
pub fn time_launches(on: bool) {
    TIMED.with(|t| *t.borrow_mut() = on.then(Vec::new));
}

/// The launches timed on this thread since the last call, in launch order,
/// after waiting for them to finish.
///
/// # Errors
/// Device failures while waiting or measuring.
pub fn launch_times() -> Result<Vec<LaunchTime>> {
    let pending = TIMED.with(|t| t.borrow_mut().as_mut().map(std::mem::take).unwrap_or_default());
    for p in &pending {
        p.end.synchronize()?;
    }
    let Some(first) = pending.first() else {
        return Ok(Vec::new());
    };
    let mut times = Vec::with_capacity(pending.len());
    for p in &pending {
        times.push(LaunchTime {
            kernel: p.kernel.clone(),
            stream: p.stream,
            start_ms: first.start.elapsed_ms(&p.start)?,
            end_ms: first.start.elapsed_ms(&p.end)?,
        });
    }
    let earliest = times.iter().map(|t| t.start_ms).fold(0.0f32, f32::min);
    for t in &mut times {
        t.start_ms -= earliest;
        t.end_ms -= earliest;
    }
    Ok(times)
}

/// Runs `launch`, which queues kernel `kernel` on `stream`, between two
/// timing events when this thread times its launches.
pub(super) fn timed(
    device: &CudaDevice,
    stream: &Stream,
    kernel: &str,
    launch: impl FnOnce() -> Result<()>,
) -> Result<()> {
    if TIMED.with(|t| t.borrow().is_none()) {
        return launch();
    }
    let start = Event::new(device, true)?;
    start.record(stream)?;
    launch()?;
    let end = Event::new(device, true)?;
    end.record(stream)?;
    TIMED.with(|t| {
        if let Some(pending) = t.borrow_mut().as_mut() {
            pending.push(Pending {
                kernel: kernel.to_string(),
                stream: stream.index(),
                start,
                end,
            });
        }
    });
    Ok(())
}
