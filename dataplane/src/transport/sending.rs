//! The send path of the event loop: appending requests to a peer's batch, queueing control,
//! starting due sends each turn, and completing sends.
//!
//! `try_append` is the hot path (once per remote request): it copies the request into the
//! batch and, only when the batch is full and no send is in flight, hands it to the kernel at
//! once. Everything else is started by [`Transport::flush`] once per turn: control first, then
//! batches that are due, and on inbound connections the credit owed.

use super::conn::credit::grant_age;
use super::conn::send::{Sending, Urgency};
use super::event_loop::{Result, Transport, push_sqe};
use super::handshake::Link;
use super::lifecycle::CloseReason;
use super::op::ConnRef;
use super::wire::{self, NET_HEADER_BYTES};
use super::{CONTROL_QUEUE_MAX, Direction, PeerId, TransportError};
use std::time::Duration;

/// The slot and generation of our connection to `peer` if `link` (its outbound link) is up;
/// `Ok(None)` while it is connecting.
#[inline]
fn up_slot(peer: PeerId, link: &Link) -> Result<Option<(usize, u32)>> {
    match link {
        Link::Up { slot, gen_ } => Ok(Some((*slot, *gen_))),
        Link::Connecting => Ok(None),
        Link::None => Err(TransportError::UnknownPeer(peer)),
        Link::Lost(reason) => Err(TransportError::PeerLost {
            peer,
            reason: reason.clone(),
        }),
    }
}

impl Transport {
    /// Appends one request frame to the outbound batch for `peer`. `Ok(false)`: not now (no
    /// credit; the batches gathered behind the send in flight reach `send_bytes_max`; or the
    /// connection is not up yet) — keep the frame and retry after a `poll`.
    #[inline]
    pub fn try_append(&mut self, peer: PeerId, frame: &[u8]) -> Result<bool> {
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return Err(TransportError::UnknownPeer(peer));
        };
        let Some((slot, gen_)) = up_slot(peer, &p.out)? else {
            return Ok(false);
        };
        let entry = wire::entry_bytes(frame.len());
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(false);
        };
        debug_assert_eq!(conn.gen_, gen_);
        let limit_bytes = conn.send.batch.limit_bytes;
        // A request too large for a batch goes alone, in a batch of its own.
        let alone = NET_HEADER_BYTES + entry > limit_bytes;
        if alone {
            let lone_limit_bytes = conn.send.batch.lone_limit_bytes;
            if NET_HEADER_BYTES + entry > lone_limit_bytes {
                return Err(TransportError::TooLarge {
                    frame_bytes: frame.len(),
                    limit_bytes: lone_limit_bytes - NET_HEADER_BYTES - wire::ENTRY_HEADER_BYTES,
                    what: "what a request may take alone: the receiver's --data-credit-bytes \
                           or largest transport frame, less the batch's headers",
                });
            }
        }
        if frame.len() < wire::MIN_REQUEST_FRAME_BYTES {
            crate::request::Request::parse(frame)?;
        }
        let counters = &mut p.counters;
        // Whether the request starts a new frame behind the send in flight.
        let mut open = false;
        if !conn.send.batch.fits(entry, alone) {
            // Full: hand it to the kernel now if the previous batch is done.
            if !conn.send.busy() && !conn.is_closing() {
                counters.flushes_by_size += 1;
                let e = conn.start_batch_send(slot, self.cfg.id);
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
            }
            // Still full (a send is in flight): the next frame starts behind it, to go out
            // with it in the next send, while there is room for it (`conn/send.rs`).
            open = !conn.send.batch.fits(entry, alone);
            if open && (conn.is_closing() || !conn.send.batch.may_open_frame(entry)) {
                counters.append_refusals += 1;
                return Ok(false);
            }
        }
        let batch = &mut conn.send.batch;
        let header = if open { NET_HEADER_BYTES } else { 0 };
        if (batch.buf.len() + header + entry) as u64 > conn.credit.data_bytes {
            batch.block_on_credit();
            counters.append_refusals += 1;
            return Ok(false);
        }
        if open {
            batch.open_frame();
        }
        batch.push(frame, self.now);
        Ok(true)
    }

    /// Sends every non-empty outbound batch at the next `poll`, whatever its size or age (end
    /// of input, or a caller that knows no more requests are coming for a while).
    pub fn flush_now(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            if c.direction == Direction::Outbound && c.send.batch.requests > 0 {
                c.send.batch.urgency = Urgency::Requested;
            }
        }
    }

    /// Queues a control or state message for `peer`; sent ahead of data, in its own credit
    /// class. `Ok(false)`: the queue is full; retry after a `poll`.
    pub fn send_control(&mut self, peer: PeerId, kind: u16, body: &[u8]) -> Result<bool> {
        if body.len() > wire::MAX_CONTROL_BODY_BYTES {
            return Err(TransportError::TooLarge {
                frame_bytes: body.len(),
                limit_bytes: wire::MAX_CONTROL_BODY_BYTES,
                what: "the largest control message",
            });
        }
        let id = self.cfg.id;
        let Some(p) = self.peers.get(peer as usize) else {
            return Err(TransportError::UnknownPeer(peer));
        };
        let Some((slot, _)) = up_slot(peer, &p.out)? else {
            return Ok(false);
        };
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(false);
        };
        if conn.send.control_q.len() >= CONTROL_QUEUE_MAX {
            return Ok(false);
        }
        let mut frame = Vec::new();
        wire::encode_control(id, kind, body, &mut frame)?;
        if frame.len() as u64 > conn.credit.control_window_bytes {
            return Err(TransportError::TooLarge {
                frame_bytes: frame.len(),
                limit_bytes: conn.credit.control_window_bytes as usize,
                what: "the receiver's control window",
            });
        }
        conn.send.control_q.push_back(frame);
        Ok(true)
    }

    /// Starts due sends: control first, then batches; credit grants on inbound connections.
    pub(super) fn flush(&mut self) -> Result<bool> {
        let age = Duration::from_micros(self.cfg.limits.batch_age_max_us);
        let delay = Duration::from_micros(self.cfg.faults.delay_batches_us);
        let (id, now) = (self.cfg.id, self.now);
        let mut any = false;
        for slot in 0..self.conns.len() {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.send.busy() || conn.is_closing() {
                continue;
            }
            let counters = &mut self.peers[conn.peer as usize].counters;
            let entry = match conn.direction {
                Direction::Outbound => {
                    if conn.start_control_send(counters) {
                        Some(conn.send_entry(slot, Sending::Control))
                    } else if conn.send.batch_due(now, age, delay) {
                        let b = &conn.send.batch;
                        if b.buf.len() >= b.limit_bytes {
                            counters.flushes_by_size += 1;
                        } else {
                            counters.flushes_by_age += 1;
                        }
                        Some(conn.start_batch_send(slot, id))
                    } else {
                        None
                    }
                }
                Direction::Inbound => conn
                    .credit
                    .grant_due(now, grant_age(age))
                    .then(|| conn.start_credit_send(slot, id)),
            };
            if let Some(e) = entry {
                any = true;
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
            }
        }
        Ok(any)
    }

    /// A send completed: the rest of a short send, or counters and fault-injection cuts.
    pub(super) fn complete_send(&mut self, c: ConnRef, res: i32) -> Result<()> {
        self.inflight -= 1;
        let cuts = &self.cfg.faults.cuts;
        let Some(conn) = (match self.conns.get_mut(c.slot) {
            Some(Some(conn)) if conn.gen_ == c.gen_ => Some(conn),
            _ => None,
        }) else {
            return Ok(());
        };
        conn.ops -= 1;
        let sending = conn.send.in_flight.take();
        debug_assert!(sending.is_some(), "a send completed with none in flight");
        let mut close_reason = None;
        if res < 0 {
            close_reason = Some(CloseReason::SendFailed(std::io::Error::from_raw_os_error(
                -res,
            )));
        } else if !conn.is_closing() {
            conn.send.off += res as usize;
            if conn.send.off < conn.send.buf.len() {
                // A short send: the rest, from the same buffer.
                let e = conn.send_entry(c.slot, sending.unwrap_or(Sending::Control));
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
                return Ok(());
            }
            let bytes = conn.send.buf.len() as u64;
            conn.send.sent_bytes += bytes;
            let counters = &mut self.peers[conn.peer as usize].counters;
            counters.bytes_sent += bytes;
            if let Some(Sending::Batch { requests, frames }) = sending {
                conn.send.sent_batches += u64::from(frames);
                counters.batches_sent += u64::from(frames);
                counters.batch_sends += 1;
                counters.frames_sent += u64::from(requests);
            }
            let outbound = conn.direction == Direction::Outbound;
            for cut in cuts.iter().filter(|cut| cut.peer == conn.peer && outbound) {
                let (batches, bytes) = (conn.send.sent_batches, conn.send.sent_bytes);
                let by_batches = cut.after_batches.is_some_and(|n| batches >= n);
                let by_bytes = cut.after_bytes.is_some_and(|n| bytes >= n);
                if by_batches || by_bytes {
                    close_reason = Some(CloseReason::Cut { batches, bytes });
                }
            }
        }
        if let Some(reason) = close_reason {
            self.close_conn(c.slot, reason);
        }
        self.free_if_done(c.slot);
        Ok(())
    }
}
