//! The send side of a connection: the batch being filled, the control queue, and the one send
//! in flight.
//!
//! Why batching: requests for the same peer are appended to one batch that crosses the kernel
//! once, when it is full, old (`Limits::batch_age_max_us`), blocked on credit, or flushed on
//! request. A connection has at most one send in flight; while the kernel owns the send buffer
//! the next batch fills a second buffer, and the two are swapped when it goes out. Control
//! frames are queued whole and go out ahead of the next batch, several coalesced in one send.
//!
//! Why several batches a send: on loopback and fast links a send costs the kernel microseconds
//! whatever it carries, so a sender that fills batches faster than the kernel sends them paid
//! that once per batch and waited between. Now a batch that fills while a send is in flight is
//! closed as a frame of its own and the next one starts behind it in the same buffer, up to
//! `Limits::send_bytes_max`; the next send takes them all. Nothing waits that would not have
//! waited anyway (only a batch already full, behind a send already in flight), each frame
//! stays within the peer's frame limit, and frames are stamped with their sequence numbers
//! only when they go out, so control frames queued meanwhile still go out ahead of them.

use super::super::op::Op;
use super::super::wire::{self, Kind, NET_HEADER_BYTES, NetHeader};
use super::super::{PeerCounters, PeerId};
use super::Conn;
use io_uring::{opcode, squeue, types};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Most control frames coalesced into one send.
pub(crate) const CONTROL_SEND_BYTES_MAX: usize = 256 << 10;

const _: () = assert!(CONTROL_SEND_BYTES_MAX >= wire::FRAME_BYTES_MAX / 4);

/// What the send in flight carries (counted by kind when it completes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sending {
    /// This many batch frames, carrying this many requests in all.
    Batch { requests: u32, frames: u32 },
    /// One or more control frames.
    Control,
    /// A credit frame.
    Credit,
}

/// Why a batch may go out before it is full or old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// Only size or age send it.
    Normal,
    /// A request was refused for lack of credit: send what is batched so credit comes back.
    CreditBlocked,
    /// `flush_now` asked for it: send at the next chance, whatever its size or age.
    Requested,
}

/// The outbound batches being filled: one frame (header space first) or, behind a send in
/// flight, several frames one after another.
pub(crate) struct Batch {
    pub buf: Vec<u8>,
    /// Requests in every frame of `buf`.
    pub requests: u32,
    /// Where the frame being filled starts in `buf` (its header; 0 for the first).
    frame_from: usize,
    /// Requests in the frame being filled.
    frame_requests: u32,
    /// Where each closed frame before it starts in `buf` (empty while there is one frame).
    closed_from: Vec<usize>,
    /// Most bytes of frames one send carries (`Limits::send_bytes_max`; at least
    /// `limit_bytes`).
    pub send_bytes_max: usize,
    /// When its first request was appended.
    pub started: Instant,
    /// Largest batch frame this connection sends (our limit, the peer's frame limit and its
    /// data window, whichever is least).
    pub limit_bytes: usize,
    /// Largest frame this connection may send at all (the peer's frame limit and its data
    /// window, whichever is less; at least `limit_bytes`): a request too large for a batch
    /// goes out alone in a batch of its own, up to this.
    pub lone_limit_bytes: usize,
    pub urgency: Urgency,
}

impl Batch {
    /// A request was refused for lack of credit.
    #[inline]
    pub(crate) fn block_on_credit(&mut self) {
        if self.requests > 0 && self.urgency == Urgency::Normal {
            self.urgency = Urgency::CreditBlocked;
        }
    }

    /// Credit came back: a batch held only for credit waits for size or age again.
    #[inline]
    pub(crate) fn credit_returned(&mut self) {
        if self.urgency == Urgency::CreditBlocked {
            self.urgency = Urgency::Normal;
        }
    }

    /// Whether an entry of `entry` bytes fits the frame being filled (`alone`: a request too
    /// large for a batch, which goes in a frame of its own).
    #[inline]
    pub(crate) fn fits(&self, entry: usize, alone: bool) -> bool {
        if alone {
            self.frame_requests == 0
        } else {
            self.buf.len() - self.frame_from + entry <= self.limit_bytes
        }
    }

    /// Whether a new frame holding an entry of `entry` bytes may start behind the one being
    /// filled (which has requests) within `send_bytes_max`.
    #[inline]
    pub(crate) fn may_open_frame(&self, entry: usize) -> bool {
        self.frame_requests > 0 && self.buf.len() + NET_HEADER_BYTES + entry <= self.send_bytes_max
    }

    /// Closes the frame being filled and starts the next behind it.
    #[inline]
    pub(crate) fn open_frame(&mut self) {
        debug_assert!(self.frame_requests > 0, "an empty frame closed");
        self.closed_from.push(self.frame_from);
        self.frame_from = self.buf.len();
        self.buf.resize(self.frame_from + NET_HEADER_BYTES, 0);
        self.frame_requests = 0;
    }

    /// Appends one request frame to the frame being filled.
    #[inline]
    pub(crate) fn push(&mut self, frame: &[u8], now: Instant) {
        if self.requests == 0 {
            self.started = now;
        }
        wire::push_entry(&mut self.buf, frame);
        self.requests += 1;
        self.frame_requests += 1;
    }

    /// Whether a frame has been closed behind a send in flight (so the batch is full).
    #[inline]
    fn has_closed_frames(&self) -> bool {
        !self.closed_from.is_empty()
    }
}

/// The send side.
pub(crate) struct SendHalf {
    /// The kernel owns `buf[off..]` while `in_flight` is set.
    pub buf: Vec<u8>,
    pub off: usize,
    pub in_flight: Option<Sending>,
    /// Sequence number of the next frame sent.
    pub next_seq: u32,
    pub batch: Batch,
    pub control_q: VecDeque<Vec<u8>>,
    pub sent_bytes: u64,
    pub sent_batches: u64,
}

impl SendHalf {
    pub(crate) fn new(
        batch_limit_bytes: usize,
        lone_limit_bytes: usize,
        send_bytes_max: usize,
        now: Instant,
    ) -> SendHalf {
        debug_assert!(lone_limit_bytes >= batch_limit_bytes);
        let mut batch = Vec::with_capacity(batch_limit_bytes);
        batch.resize(NET_HEADER_BYTES, 0);
        SendHalf {
            buf: Vec::with_capacity(batch_limit_bytes.max(NET_HEADER_BYTES)),
            off: 0,
            in_flight: None,
            next_seq: 0,
            batch: Batch {
                buf: batch,
                requests: 0,
                frame_from: 0,
                frame_requests: 0,
                closed_from: Vec::new(),
                send_bytes_max: send_bytes_max.max(batch_limit_bytes),
                started: now,
                limit_bytes: batch_limit_bytes,
                lone_limit_bytes,
                urgency: Urgency::Normal,
            },
            control_q: VecDeque::new(),
            sent_bytes: 0,
            sent_batches: 0,
        }
    }

    /// Whether a send is in flight.
    #[inline]
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Takes the next sequence number.
    #[inline]
    fn take_seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = s.wrapping_add(1);
        s
    }

    /// Whether the batch should go out now: full, blocked on credit, requested, or old —
    /// and in every case at least `delay` old (fault injection).
    pub(crate) fn batch_due(&self, now: Instant, age_max: Duration, delay: Duration) -> bool {
        let b = &self.batch;
        if b.requests == 0 {
            return false;
        }
        let age = now.saturating_duration_since(b.started);
        let full =
            b.buf.len() >= b.limit_bytes || b.has_closed_frames() || b.urgency != Urgency::Normal;
        (full || age >= age_max) && age >= delay
    }
}

impl Conn {
    /// Moves the filled batch (one frame or several) into the send buffer, stamps each frame's
    /// header, takes their credit and returns the send.
    pub(crate) fn start_batch_send(&mut self, slot: usize, id: PeerId) -> squeue::Entry {
        let s = &mut self.send;
        debug_assert!(!s.busy() && s.batch.requests > 0);
        debug_assert!(s.batch.frame_requests > 0, "an empty frame to send");
        std::mem::swap(&mut s.batch.buf, &mut s.buf);
        s.batch.buf.clear();
        s.batch.buf.resize(NET_HEADER_BYTES, 0);
        let mut starts = std::mem::take(&mut s.batch.closed_from);
        starts.push(s.batch.frame_from);
        for (i, &from) in starts.iter().enumerate() {
            let to = starts.get(i + 1).copied().unwrap_or(s.buf.len());
            let seq = s.take_seq();
            NetHeader {
                kind: Kind::Batch,
                payload_bytes: (to - from - NET_HEADER_BYTES) as u32,
                sender: id,
                seq,
                data_credit_bytes: 0,
                control_credit_bytes: 0,
            }
            .write(&mut s.buf[from..]);
        }
        let frames = starts.len() as u32;
        starts.clear();
        s.batch.closed_from = starts;
        self.credit.spend_data(s.buf.len() as u64);
        let requests = s.batch.requests;
        s.batch.requests = 0;
        s.batch.frame_from = 0;
        s.batch.frame_requests = 0;
        s.batch.urgency = Urgency::Normal;
        s.off = 0;
        self.send_entry(slot, Sending::Batch { requests, frames })
    }

    /// Moves queued control frames into the send buffer, as many as credit and
    /// [`CONTROL_SEND_BYTES_MAX`] allow, stamping their sequence numbers. Whether any moved.
    pub(crate) fn start_control_send(&mut self, counters: &mut PeerCounters) -> bool {
        let s = &mut self.send;
        let mut started = false;
        while let Some(f) = s.control_q.front() {
            let len = f.len() as u64;
            if len > self.credit.control_bytes
                || (started && s.buf.len() + f.len() > CONTROL_SEND_BYTES_MAX)
            {
                break;
            }
            if !started {
                s.buf.clear();
                started = true;
            }
            let at = s.buf.len();
            s.buf.extend_from_slice(f);
            let seq = s.next_seq;
            s.next_seq = seq.wrapping_add(1);
            wire::stamp_seq(&mut s.buf[at..], seq);
            self.credit.spend_control(len);
            counters.control_sent += 1;
            s.control_q.pop_front();
        }
        if started {
            s.off = 0;
        }
        started
    }

    /// Writes a credit frame returning what is owed into the send buffer; returns its send.
    pub(crate) fn start_credit_send(&mut self, slot: usize, id: PeerId) -> squeue::Entry {
        let (data, control) = self.credit.take_grant();
        let s = &mut self.send;
        s.buf.clear();
        s.buf.resize(NET_HEADER_BYTES, 0);
        let seq = s.take_seq();
        wire::write_credit(&mut s.buf, id, seq, data, control);
        s.off = 0;
        self.send_entry(slot, Sending::Credit)
    }

    /// The send of `buf[off..]`; the kernel owns that buffer until its completion.
    pub(crate) fn send_entry(&mut self, slot: usize, what: Sending) -> squeue::Entry {
        debug_assert!(self.send.off < self.send.buf.len(), "an empty send");
        self.send.in_flight = Some(what);
        self.ops += 1;
        let rest = &self.send.buf[self.send.off..];
        opcode::Send::new(
            types::Fd(self.fd.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(Op::Send(self.conn_ref(slot)).user_data())
    }
}
