//! The network thread's receive side: frames from the driver and from other workers go into
//! the owning executor's ring (`ingress(e)` for roots, `net_in(e)` for chained requests), by
//! the slot the frame is addressed to; control messages are decoded and queued for the turn.

use crate::message::{CONTROL_KIND, Decoder, Message, MessageError};
use crate::request::RequestHeader;
use crate::routing::Slots;
use crate::transport::{Delivered, Event, Inbound, PeerId};
use clasp_shmring::{Producer, ShmRing};
use std::collections::VecDeque;

pub(super) struct Rings {
    pub(super) slots: Slots,
    /// This worker's first slot.
    pub(super) base: usize,
    pub(super) driver: PeerId,
    pub(super) ingress: Vec<Producer<ShmRing>>,
    pub(super) net_in: Vec<Producer<ShmRing>>,
    pub(super) dirty_ingress: Vec<bool>,
    pub(super) dirty_net_in: Vec<bool>,
}

/// The network thread's receive side.
pub(super) struct Receiver {
    pub(super) rings: Option<Rings>,
    pub(super) msgs: VecDeque<(PeerId, Result<Message, MessageError>)>,
    pub(super) decoder: Decoder,
    pub(super) events: Vec<Event>,
    /// Frames delivered into our rings, per sender.
    pub(super) received: Vec<u64>,
    /// A delivery found its ring full this turn.
    pub(super) held: bool,
    pub(super) faults: Vec<String>,
}

impl Receiver {
    fn count(&mut self, from: PeerId) {
        let i = from as usize;
        if self.received.len() <= i {
            self.received.resize(i + 1, 0);
        }
        self.received[i] += 1;
    }

    pub(super) fn publish(&mut self) {
        if let Some(r) = &mut self.rings {
            for (p, d) in r.ingress.iter_mut().zip(r.dirty_ingress.iter_mut()) {
                if std::mem::take(d) {
                    p.publish();
                }
            }
            for (p, d) in r.net_in.iter_mut().zip(r.dirty_net_in.iter_mut()) {
                if std::mem::take(d) {
                    p.publish();
                }
            }
        }
    }
}

impl Inbound for Receiver {
    fn deliver(&mut self, from: PeerId, frame: &[u8]) -> Delivered {
        let Some(r) = &mut self.rings else {
            // Requests before the job: a peer that does not follow the protocol.
            self.faults.push(format!(
                "worker received a request from {from} before its job"
            ));
            return Delivered::Accepted;
        };
        // Frames name the executor slot they are addressed to (a forwarded request is not
        // where the current table would send it).
        let e = match RequestHeader::peek(frame) {
            Ok(h) => (h.dest as usize).wrapping_sub(r.base),
            Err(e) => {
                self.faults
                    .push(format!("bad request frame from {from}: {e}; dropped"));
                return Delivered::Accepted;
            }
        };
        if e >= r.slots.executors {
            self.faults.push(format!(
                "a frame from {from} for slot {}, which is not on this worker; dropped",
                e.wrapping_add(r.base)
            ));
            return Delivered::Accepted;
        }
        let (ring, dirty) = if from == r.driver {
            (&mut r.ingress[e], &mut r.dirty_ingress[e])
        } else {
            (&mut r.net_in[e], &mut r.dirty_net_in[e])
        };
        match ring.reserve(frame.len()) {
            Ok(mut g) => {
                g.copy_from_slice(frame);
                g.commit_deferred();
                *dirty = true;
                self.count(from);
                Delivered::Accepted
            }
            Err(clasp_shmring::Error::Full { .. }) => {
                // Publish what is there so the executor can make room.
                ring.publish();
                *dirty = false;
                self.held = true;
                Delivered::Full
            }
            Err(err) => {
                self.faults
                    .push(format!("ring to executor {e}: {err}; request dropped"));
                Delivered::Accepted
            }
        }
    }

    fn control(&mut self, from: PeerId, kind: u16, body: &[u8]) {
        let msg = if kind == CONTROL_KIND {
            self.decoder.decode(body)
        } else {
            Err(MessageError::Kind(kind))
        };
        self.msgs.push_back((from, msg));
    }

    fn event(&mut self, event: Event) {
        self.events.push(event);
    }
}
