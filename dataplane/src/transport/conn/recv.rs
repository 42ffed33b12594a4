//! The receive side of a connection: the receive operation's state, reassembly of a frame
//! split across receives, and deliveries held for ring space.
//!
//! Why held deliveries: a destination ring may be full. The rest of that batch, and every data
//! frame after it, is then kept here in order and offered again on later turns; its credit is
//! returned only once every request of it is delivered, which is what slows the sender. Nothing
//! is dropped, and control frames are not held behind data (they are delivered on arrival).

use super::super::wire::{self, NET_HEADER_BYTES, NetHeader};
use super::super::{Delivered, Inbound, PeerCounters};
use super::Conn;
use std::time::Instant;

/// Whether a receive is armed on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvOp {
    /// None: one is submitted at the next chance (unless the connection is closing).
    Idle,
    /// Submitted, its final completion not yet reaped.
    Armed,
}

/// Whole data frames waiting for ring space, in order.
#[derive(Default)]
pub(crate) struct Held {
    pub bytes: Vec<u8>,
    /// Start of the frame being delivered.
    pub off: usize,
    /// Payload offset of that frame's next undelivered entry.
    pub entry: usize,
}

impl Held {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.off = 0;
        self.entry = 0;
    }
}

/// The receive side.
pub(crate) struct RecvHalf {
    pub op: RecvOp,
    /// Fallback receive buffer (empty with a provided-buffer ring); the kernel owns it while
    /// a plain receive is in flight.
    pub buf: Box<[u8]>,
    /// A frame arriving across receive buffers, reassembled.
    pub partial: Vec<u8>,
    pub held: Held,
    /// Sequence number the next frame must carry.
    pub expect_seq: u32,
}

impl RecvHalf {
    /// `buffer_bytes`: the fallback receive buffer's size (0 with a provided-buffer ring).
    pub(crate) fn new(buffer_bytes: usize) -> RecvHalf {
        RecvHalf {
            op: RecvOp::Idle,
            buf: vec![0u8; buffer_bytes].into_boxed_slice(),
            partial: Vec::new(),
            held: Held::default(),
            expect_seq: 0,
        }
    }
}

/// Where delivered requests are counted.
pub(crate) struct Tally<'a> {
    pub counters: &'a mut PeerCounters,
    /// Requests, control messages and events handed over this turn.
    pub delivered: &'a mut usize,
    pub now: Instant,
}

impl Conn {
    /// Delivers a validated batch `frame` (header included) of `frame_bytes`, or holds it
    /// (and the rest) if a ring is full or frames are already held.
    pub(crate) fn deliver_batch(
        &mut self,
        frame: &[u8],
        tally: &mut Tally<'_>,
        inbound: &mut impl Inbound,
    ) {
        let held = &mut self.recv.held;
        if !held.is_empty() {
            held.bytes.extend_from_slice(frame);
            return;
        }
        let payload = &frame[NET_HEADER_BYTES..];
        let mut at = 0;
        while let Some((req, next)) = wire::next_validated(payload, at) {
            match inbound.deliver(self.peer, req) {
                Delivered::Accepted => {
                    *tally.delivered += 1;
                    at = next;
                }
                Delivered::Full => {
                    tally.counters.deliveries_full += 1;
                    held.bytes.extend_from_slice(frame);
                    held.off = 0;
                    held.entry = at;
                    return;
                }
            }
        }
        self.credit.data_delivered(frame.len() as u64, tally.now);
    }

    /// Delivers held frames in order until one meets a full ring again.
    pub(crate) fn deliver_held(&mut self, tally: &mut Tally<'_>, inbound: &mut impl Inbound) {
        let held = &mut self.recv.held;
        while held.off < held.bytes.len() {
            let frame_start = held.off;
            // Our own copy of a frame that passed validation: its header decodes.
            let decoded = NetHeader::decode(&held.bytes[frame_start..], wire::FRAME_BYTES_MAX);
            debug_assert!(decoded.is_ok(), "a held frame no longer decodes");
            let Ok(h) = decoded else {
                held.bytes.clear();
                break;
            };
            let end = frame_start + h.frame_bytes();
            let payload = &held.bytes[frame_start + NET_HEADER_BYTES..end];
            let mut at = held.entry;
            while let Some((req, next)) = wire::next_validated(payload, at) {
                if inbound.deliver(self.peer, req) == Delivered::Full {
                    tally.counters.deliveries_full += 1;
                    held.entry = at;
                    return;
                }
                *tally.delivered += 1;
                at = next;
            }
            held.off = end;
            held.entry = 0;
            self.credit
                .data_delivered(h.frame_bytes() as u64, tally.now);
        }
        held.clear();
    }
}
