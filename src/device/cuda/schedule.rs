//! Spreading kernel launches over the stream pool.
//!
//! Planning is pure: [`Scheduler::plan`] turns a list of launches with the
//! buffers they read and write into a [`LaunchPlan`] (a stream per launch and
//! the earlier launches it must wait for on other streams), without touching
//! the driver. [`Scheduler::run`] then replays the plan on a device with
//! events.
//!
//! Rules of the plan:
//! - A launch depends on the launches it names in `after`, on the last writer
//!   of each buffer it reads or writes, and on the readers of each buffer it
//!   writes since that buffer's last write.
//! - A launch without dependencies goes to the next stream round-robin, so
//!   independent kernels run side by side. A launch whose dependency is the
//!   last launch queued on a stream follows it there (stream order is free);
//!   otherwise it goes round-robin too.
//! - A dependency on another stream becomes an event wait, unless an earlier
//!   wait on that stream already covers it (each stream keeps a vector clock of
//!   the positions it has waited for on every other stream).

use super::stream::RawEvent;
use super::CudaDevice;
use super::Stream;
use crate::error::{Error, Result};
use std::collections::HashMap;

/// Names a buffer for dependency tracking; any id unique within one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// One kernel launch to schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduledLaunch {
    /// Buffers the kernel reads.
    pub reads: Vec<BufferId>,
    /// Buffers the kernel writes.
    pub writes: Vec<BufferId>,
    /// Indices of earlier launches it must follow, beyond what the buffers imply.
    pub after: Vec<usize>,
}

/// Where and after what one launch runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedLaunch {
    /// Index of the stream in the device's pool.
    pub stream: usize,
    /// Earlier launches on other streams to wait for, by index.
    pub wait_for: Vec<usize>,
    /// Whether a later launch waits for this one, so an event is recorded
    /// after it.
    pub record_event: bool,
}

/// A stream and the waits for every launch, in launch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPlan {
    /// One entry per launch, in the order given.
    pub launches: Vec<PlannedLaunch>,
}

/// Plans and runs launches over a pool of streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduler {
    streams: usize,
}

impl Scheduler {
    /// A scheduler over `streams` streams (at least one).
    pub fn new(streams: usize) -> Scheduler {
        Scheduler {
            streams: streams.max(1),
        }
    }

    /// Assigns each launch a stream and the waits it needs. Launches must be
    /// in an order where each follows its dependencies.
    pub fn plan(&self, launches: &[ScheduledLaunch]) -> Result<LaunchPlan> {
        let deps = dependencies(launches)?;
        let n = self.streams;
        let mut stream_of = Vec::with_capacity(launches.len());
        let mut position = Vec::with_capacity(launches.len());
        let mut clock_after: Vec<Vec<usize>> = Vec::with_capacity(launches.len());
        let mut planned: Vec<PlannedLaunch> = Vec::with_capacity(launches.len());
        // Per stream: its last launch, its length, and how far along every
        // stream it is known to have waited.
        let mut tail: Vec<Option<usize>> = vec![None; n];
        let mut length = vec![0usize; n];
        let mut clock = vec![vec![0usize; n]; n];
        let mut next = 0;
        for (i, deps) in deps.iter().enumerate() {
            let follow = deps.iter().copied().find(|&d| tail[stream_of[d]] == Some(d));
            let stream = match follow {
                Some(d) => stream_of[d],
                None => {
                    let s = next;
                    next = (next + 1) % n;
                    s
                }
            };
            let mut wait_for = Vec::new();
            // Latest first: its clock usually covers the earlier ones.
            for &d in deps.iter().rev() {
                let other = stream_of[d];
                if other == stream || clock[stream][other] >= position[d] {
                    continue;
                }
                wait_for.push(d);
                planned[d].record_event = true;
                let seen: &Vec<usize> = &clock_after[d];
                for (mine, &theirs) in clock[stream].iter_mut().zip(seen) {
                    *mine = (*mine).max(theirs);
                }
            }
            wait_for.sort_unstable();
            length[stream] += 1;
            clock[stream][stream] = length[stream];
            tail[stream] = Some(i);
            stream_of.push(stream);
            position.push(length[stream]);
            clock_after.push(clock[stream].clone());
            planned.push(PlannedLaunch {
                stream,
                wait_for,
                record_event: false,
            });
        }
        Ok(LaunchPlan { launches: planned })
    }

    /// Queues the plan on `device`: for each launch, in order, the waits it
    /// needs, then `launch(index, stream)` (which should get its buffer
    /// pointers through [`DeviceBuffer::ptr_on`](super::DeviceBuffer::ptr_on)),
    /// then an event if a later launch waits for it. Returns once everything
    /// is queued.
    pub fn run(
        &self,
        device: &CudaDevice,
        plan: &LaunchPlan,
        mut launch: impl FnMut(usize, &Stream) -> Result<()>,
    ) -> Result<()> {
        device.bind()?;
        // Events stay out of the pool until every wait on them is queued:
        // another thread could otherwise record one again first.
        let mut events: Vec<RawEvent> = Vec::new();
        let mut event_of: HashMap<usize, usize> = HashMap::new();
        let mut outcome = Ok(());
        for (i, step) in plan.launches.iter().enumerate() {
            let stream = device.stream(step.stream % self.streams);
            let queued = step
                .wait_for
                .iter()
                .try_for_each(|w| match event_of.get(w) {
                    Some(&e) => stream.wait_raw(events[e].0),
                    None => Err(Error::InvalidProgram {
                        program: "launch plan".into(),
                        reason: format!("launch {i} waits for launch {w}, which records no event before it"),
                    }),
                })
                .and_then(|()| launch(i, stream))
                .and_then(|()| {
                    if step.record_event {
                        let event = device.events.take()?;
                        let recorded = stream.record_raw(event.0);
                        event_of.insert(i, events.len());
                        events.push(event);
                        recorded?;
                    }
                    Ok(())
                });
            if let Err(e) = queued {
                outcome = Err(e);
                break;
            }
        }
        for event in events {
            device.events.give(event);
        }
        outcome
    }
}

/// The launches each launch depends on, sorted, from `after` and from the
/// buffers it touches.
fn dependencies(launches: &[ScheduledLaunch]) -> Result<Vec<Vec<usize>>> {
    let mut last_writer: HashMap<BufferId, usize> = HashMap::new();
    let mut readers: HashMap<BufferId, Vec<usize>> = HashMap::new();
    let mut all = Vec::with_capacity(launches.len());
    for (i, launch) in launches.iter().enumerate() {
        let mut deps = Vec::new();
        for &d in &launch.after {
            if d >= i {
                return Err(Error::InvalidProgram {
                    program: "launch plan".into(),
                    reason: format!("launch {i} is listed after launch {d}, which does not come before it"),
                });
            }
            deps.push(d);
        }
        for b in &launch.reads {
            deps.extend(last_writer.get(b));
        }
        for b in &launch.writes {
            deps.extend(last_writer.get(b));
            deps.extend(readers.get(b).into_iter().flatten());
        }
        for &b in &launch.reads {
            readers.entry(b).or_default().push(i);
        }
        for &b in &launch.writes {
            last_writer.insert(b, i);
            readers.remove(&b);
        }
        deps.sort_unstable();
        deps.dedup();
        all.push(deps);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(reads: &[u64], writes: &[u64]) -> ScheduledLaunch {
        ScheduledLaunch {
            reads: reads.iter().map(|&b| BufferId(b)).collect(),
            writes: writes.iter().map(|&b| BufferId(b)).collect(),
            after: Vec::new(),
        }
    }

    /// Plans `launches` over `streams` streams and compares (stream, waits,
    /// record) per launch.
    fn check(streams: usize, launches: &[ScheduledLaunch], expect: &[(usize, &[usize], bool)]) {
        let plan = Scheduler::new(streams).plan(launches).unwrap();
        let got: Vec<(usize, Vec<usize>, bool)> = plan
            .launches
            .iter()
            .map(|p| (p.stream, p.wait_for.clone(), p.record_event))
            .collect();
        let expect: Vec<(usize, Vec<usize>, bool)> = expect.iter().map(|&(s, w, r)| (s, w.to_vec(), r)).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn independent_launches_go_round_robin() {
        let independent: Vec<_> = (0..5).map(|b| launch(&[], &[b])).collect();
        check(
            4,
            &independent,
            &[
                (0, &[], false),
                (1, &[], false),
                (2, &[], false),
                (3, &[], false),
                (0, &[], false),
            ],
        );
    }

    #[test]
    fn a_chain_stays_on_one_stream_without_waits() {
        check(
            4,
            &[launch(&[], &[1]), launch(&[1], &[2]), launch(&[2], &[3])],
            &[(0, &[], false), (0, &[], false), (0, &[], false)],
        );
    }

    #[test]
    fn a_diamond_waits_across_streams() {
        // 0 writes a; 1 and 2 read a; 3 reads both results.
        check(
            4,
            &[
                launch(&[], &[1]),
                launch(&[1], &[2]),
                launch(&[1], &[3]),
                launch(&[2, 3], &[4]),
            ],
            &[(0, &[], true), (0, &[], false), (1, &[0], true), (0, &[2], false)],
        );
    }

    #[test]
    fn write_after_read_is_a_dependency() {
        // 3 reads buffer 1 on stream 1; 4 overwrites buffer 1 on stream 0 and
        // must wait for that read.
        check(
            2,
            &[
                launch(&[], &[1]),
                launch(&[], &[2]),
                launch(&[1], &[]),
                launch(&[1, 2], &[3]),
                launch(&[], &[1]),
            ],
            &[
                (0, &[], true),
                (1, &[], false),
                (0, &[], false),
                (1, &[0], true),
                (0, &[3], false),
            ],
        );
    }

    #[test]
    fn covered_waits_are_left_out() {
        // 3 on stream 1 waits for 2 on stream 0, which follows 0 there; 4
        // follows 3 on stream 1 and needs 0, which that wait already covers.
        let mut last = launch(&[4], &[]);
        last.after = vec![0];
        check(
            2,
            &[
                launch(&[], &[1]),
                launch(&[], &[2]),
                launch(&[1], &[3]),
                launch(&[2, 3], &[4]),
                last,
            ],
            &[
                (0, &[], false),
                (1, &[], false),
                (0, &[], true),
                (1, &[2], false),
                (1, &[], false),
            ],
        );
    }

    #[test]
    fn one_stream_never_waits() {
        check(
            1,
            &[launch(&[], &[1]), launch(&[], &[2]), launch(&[1, 2], &[3])],
            &[(0, &[], false), (0, &[], false), (0, &[], false)],
        );
    }

    #[test]
    fn a_dependency_on_a_later_launch_is_rejected() {
        let mut bad = launch(&[], &[1]);
        bad.after = vec![0];
        let err = Scheduler::new(2).plan(&[bad]).unwrap_err();
        assert!(matches!(err, Error::InvalidProgram { .. }), "{err}");
    }
}
