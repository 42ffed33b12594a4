//! Where an executor's frames go: one [`Lane`] per ring it writes — to each executor of its
//! worker (itself included), and, in a cluster, to the network thread — each with its overflow.
//!
//! Why one abstraction: whether a chained request stays on this worker or leaves it, the
//! executor does the same thing — find the lane of the destination slot, write the frame in
//! place (reserve → write → commit, published once per batch), or queue it behind the frames
//! already waiting for that lane. What differs is who reads the ring and how they are woken,
//! which the lane carries ([`Wake`]); the caller asks [`Outbound::is_remote`] only to count.

use super::NetLink;
use clasp_shmring::{Error as RingError, Producer, ShmRing, WaitPolicy};
use std::collections::VecDeque;
use std::time::Duration;

/// A lane of an [`Outbound`]: lanes `0..executors` are the executors of this worker (by
/// index), the one after them the network thread's (cluster mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lane(usize);

/// How the reader of a lane learns that a batch was published.
pub(crate) enum Wake {
    /// It parks on the segment's doorbells, which the ring rings itself.
    Doorbell,
    /// It parks in io_uring: write its eventfd if it announced a park.
    Network(NetLink),
}

struct Ring {
    producer: Producer<ShmRing>,
    wake: Wake,
    /// Written since the last publish.
    dirty: bool,
    /// Frames that found the ring full (or behind others that did), in order.
    overflow: VecDeque<Box<[u8]>>,
}

/// What became of a frame.
#[derive(Debug)]
pub(crate) enum Sent {
    /// Written into its ring (published with the next [`Outbound::publish`]).
    Written,
    /// Queued in its lane's overflow.
    Queued,
    /// Dropped, for this reason.
    Dropped(String),
}

/// The rings an executor writes request frames into.
pub(crate) struct Outbound {
    rings: Vec<Ring>,
    /// First slot of this worker: slots `slot_base..slot_base + executors` are its executors.
    slot_base: usize,
    executors: usize,
    /// The lane to every other worker's slots (none for a worker without peers).
    network: Option<Lane>,
    overflow_bytes: usize,
    frame_bytes_max: usize,
}

impl Outbound {
    /// Lanes to `executors` (in order; each woken by its doorbell), then, when `network` is
    /// given, one to the network thread.
    pub(crate) fn new(
        executors: Vec<Producer<ShmRing>>,
        network: Option<(Producer<ShmRing>, NetLink)>,
        slot_base: usize,
        frame_bytes_max: usize,
    ) -> Outbound {
        let ring = |producer, wake| Ring {
            producer,
            wake,
            dirty: false,
            overflow: VecDeque::new(),
        };
        let count = executors.len();
        let mut rings: Vec<Ring> = executors
            .into_iter()
            .map(|p| ring(p, Wake::Doorbell))
            .collect();
        let network = network.map(|(p, link)| {
            rings.push(ring(p, Wake::Network(link)));
            Lane(count)
        });
        Outbound {
            rings,
            slot_base,
            executors: count,
            network,
            overflow_bytes: 0,
            frame_bytes_max,
        }
    }

    /// The lane that leads to `slot`: its executor's on this worker, else the network's
    /// (`None` for a worker without peers).
    #[inline]
    pub(crate) fn lane_of(&self, slot: usize) -> Option<Lane> {
        let local = slot.wrapping_sub(self.slot_base);
        if local < self.executors {
            Some(Lane(local))
        } else {
            self.network
        }
    }

    /// The lane to executor `e` of this worker.
    pub(crate) fn executor_lane(&self, e: usize) -> Lane {
        debug_assert!(e < self.executors);
        Lane(e)
    }

    /// Whether `lane` leaves this worker (the one lane after the executors' is the network's).
    #[inline]
    pub(crate) fn is_remote(&self, lane: Lane) -> bool {
        debug_assert!(lane.0 < self.executors || Some(lane) == self.network);
        lane.0 >= self.executors
    }

    /// Waits until the first lane other than `own` (the caller's own ring, which only it
    /// drains) with frames in its overflow has room for the oldest of them, at most `timeout`.
    /// Whether there is room now (true at once when no such overflow waits; false after the
    /// timeout). Its consumer rings the ring's space doorbell as it frees room. A consumer
    /// that closed or died ends the wait (false): what becomes of its frames is decided where
    /// that is noticed, not here.
    pub(crate) fn wait_for_space(
        &mut self,
        own: Lane,
        policy: WaitPolicy,
        timeout: Option<Duration>,
    ) -> bool {
        let Some(ring) = (self.rings.iter_mut().enumerate())
            .find(|(i, r)| *i != own.0 && !r.overflow.is_empty())
            .map(|(_, r)| r)
        else {
            return true;
        };
        let len = ring.overflow.front().map_or(0, |f| f.len());
        ring.producer.wait_for_space(len, policy, timeout).is_ok()
    }

    /// Bytes waiting in every lane's overflow.
    #[inline]
    pub(crate) fn overflow_bytes(&self) -> usize {
        self.overflow_bytes
    }

    /// Whether frames wait in `lane`'s overflow.
    pub(crate) fn has_overflow(&self, lane: Lane) -> bool {
        !self.rings[lane.0].overflow.is_empty()
    }

    /// Whether every frame sent down `lane` was read and released: nothing in its overflow,
    /// and its consumer's `head` at everything written, published or not.
    #[inline]
    pub(crate) fn drained(&self, lane: Lane) -> bool {
        let ring = &self.rings[lane.0];
        ring.overflow.is_empty() && ring.producer.drained()
    }

    /// Writes a frame of `len` bytes with `write` in place into `lane`'s ring, or, when the
    /// ring is full or frames already wait for it, into its overflow (FIFO with them).
    #[inline]
    pub(crate) fn send_with(
        &mut self,
        lane: Lane,
        len: usize,
        write: impl FnOnce(&mut [u8]),
    ) -> Sent {
        if len > self.frame_bytes_max {
            return Sent::Dropped(format!(
                "a frame of {len} bytes exceeds the ring's maximum frame of {} bytes; dropped",
                self.frame_bytes_max
            ));
        }
        let ring = &mut self.rings[lane.0];
        if ring.overflow.is_empty() {
            match ring.producer.reserve(len) {
                Ok(mut g) => {
                    debug_assert_eq!(g.len(), len, "a reservation is as long as asked");
                    write(&mut g);
                    g.commit_deferred();
                    ring.dirty = true;
                    return Sent::Written;
                }
                Err(RingError::Full { .. }) => {}
                Err(e) => return Sent::Dropped(format!("ring of lane {}: {e}", lane.0)),
            }
        }
        let mut frame = vec![0u8; len].into_boxed_slice();
        write(&mut frame);
        ring.overflow.push_back(frame);
        self.overflow_bytes += len;
        Sent::Queued
    }

    /// Moves overflowed frames into their rings, in order, and publishes. Returns how many
    /// moved.
    pub(crate) fn drain_overflow(&mut self) -> usize {
        if self.overflow_bytes == 0 {
            return 0;
        }
        let mut moved = 0;
        for ring in &mut self.rings {
            while let Some(f) = ring.overflow.front() {
                let Ok(mut g) = ring.producer.reserve(f.len()) else {
                    break;
                };
                g.copy_from_slice(f);
                g.commit_deferred();
                ring.dirty = true;
                debug_assert!(self.overflow_bytes >= f.len());
                self.overflow_bytes -= f.len();
                ring.overflow.pop_front();
                moved += 1;
            }
        }
        debug_assert!(
            self.overflow_bytes > 0 || self.rings.iter().all(|r| r.overflow.is_empty()),
            "overflow accounting"
        );
        self.publish();
        moved
    }

    /// Publishes every ring written since the last call, and wakes its reader if it must be.
    #[inline]
    pub(crate) fn publish(&mut self) {
        for ring in &mut self.rings {
            if std::mem::take(&mut ring.dirty) {
                ring.producer.publish();
                if let Wake::Network(link) = &ring.wake {
                    link.nudge();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::layout::{WorkerSegment, test_segment};

    /// A worker of two executors whose first slot is 4, and executor 0's lanes.
    fn outbound(tag: &str) -> (WorkerSegment, Outbound) {
        let name = format!("clasp-outbound-test-{tag}-{}", std::process::id());
        let seg = test_segment(&name, 1);
        let rings = (0..2)
            .map(|b| seg.segment.producer(seg.index.exec(0, b)).expect("a ring"))
            .collect();
        (seg, Outbound::new(rings, None, 4, 1024))
    }

    #[test]
    fn slots_of_this_worker_have_lanes_and_others_none_without_a_network() {
        let (_seg, out) = outbound("lanes");
        assert_eq!(out.lane_of(4), Some(out.executor_lane(0)));
        assert_eq!(out.lane_of(5), Some(out.executor_lane(1)));
        assert_eq!(out.lane_of(3), None);
        assert_eq!(out.lane_of(6), None);
        assert!(!out.is_remote(out.executor_lane(1)));
    }

    #[test]
    fn a_full_ring_overflows_in_order_and_drains_in_order() {
        let (seg, mut out) = outbound("order");
        let lane = out.executor_lane(1);
        let mut reader = seg.segment.consumer(seg.index.exec(0, 1)).expect("a ring");
        let mut queued = 0;
        for i in 0..200u32 {
            match out.send_with(lane, 64, |b| b[..4].copy_from_slice(&i.to_le_bytes())) {
                Sent::Written => assert_eq!(queued, 0, "a frame overtook the overflow"),
                Sent::Queued => queued += 1,
                Sent::Dropped(why) => panic!("{why}"),
            }
        }
        assert!(queued > 0 && out.has_overflow(lane));
        assert_eq!(out.overflow_bytes(), queued * 64);
        assert!(matches!(
            out.send_with(lane, 2048, |_| {}),
            Sent::Dropped(_)
        ));
        out.publish();
        let mut seen = Vec::new();
        while seen.len() < 200 {
            reader
                .pop_batch(usize::MAX, |f| {
                    seen.push(u32::from_le_bytes([f[0], f[1], f[2], f[3]]))
                })
                .expect("a frame");
            out.drain_overflow();
        }
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        assert_eq!(out.overflow_bytes(), 0);
        assert!(!out.has_overflow(lane));
    }

    #[test]
    fn a_blocked_executor_waits_for_room_in_the_ring_it_overflowed_not_in_its_own() {
        let (seg, mut out) = outbound("space");
        let (own, other) = (out.executor_lane(0), out.executor_lane(1));
        while !out.has_overflow(other) {
            assert!(!matches!(
                out.send_with(other, 64, |_| {}),
                Sent::Dropped(_)
            ));
        }
        out.publish();
        // Nobody drains the other ring yet: no room by the (zero) timeout.
        assert!(!out.wait_for_space(own, WaitPolicy::PARK, Some(Duration::ZERO)));
        // Its own ring's overflow is never waited for — only the executor itself drains it —
        // so with nothing else overflowing there is nothing to wait for.
        let (_seg2, mut alone) = outbound("space-own");
        while !alone.has_overflow(own) {
            assert!(!matches!(
                alone.send_with(own, 64, |_| {}),
                Sent::Dropped(_)
            ));
        }
        assert!(alone.wait_for_space(own, WaitPolicy::PARK, Some(Duration::ZERO)));
        // The other lane's consumer frees room from another thread: the wait ends with room.
        let mut reader = seg.segment.consumer(seg.index.exec(0, 1)).expect("a ring");
        let freed = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let mut n = 0;
            reader.pop_batch(usize::MAX, |_| n += 1).expect("frames");
            // The reader stays open until joined: a closed ring also ends the wait (no room).
            (n, reader)
        });
        assert!(out.wait_for_space(own, WaitPolicy::PARK, Some(Duration::from_secs(30))));
        assert!(freed.join().expect("the reader").0 > 0);
        assert!(
            out.drain_overflow() > 0,
            "room for the oldest frame after the wait"
        );
    }
}
