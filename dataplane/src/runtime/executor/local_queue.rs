//! Requests an executor sends itself, queued in its own memory instead of its own ring.
//!
//! Why: with one executor every chained request goes to the executor itself, and the ring
//! made each one a frame written, published, read back and parsed. Here a request is its
//! header and a copy of its key and payload in a private buffer: no atomics, no frame, no
//! parse. Why a queue and not a call: run at once, inside the parent's routing, the children of
//! one request would interleave with the next request's operator, where a queue keeps a batch's
//! work together (the split of 32 sentences, then the counts of their words), as the ring did;
//! and the routing stays free of recursion, which the compiler inlines better.
//!
//! The executor drains the queue after every batch it reads and wherever else it routes
//! (`Engine::drain_local`), so the queue is empty whenever the executor reads its own ring,
//! takes a plan or a snapshot, or parks. It queues here only when its own ring holds nothing
//! it sent itself before (`Outbound::drained`), so a key's requests still run in the order
//! they were sent.

use super::Engine;
use crate::request::{Request, RequestHeader};

/// How many queued requests ahead of the one it runs the executor starts fetching the state
/// of. Fetching a whole batch's at queue time asked for 320 lookups' lines at once for WC's
/// 32 sentences, more than a core tracks in flight; 8 ahead ran one executor's WC 4–12 %
/// faster in three of four alternated runs (benches/results/wc.md).
const PREFETCH_AHEAD: usize = 8;

/// Where one queued request's key and payload sit in [`LocalQueue::bytes`].
#[derive(Clone, Copy, Debug)]
struct Span {
    key_from: u32,
    payload_from: u32,
    payload_to: u32,
}

/// A FIFO of requests (header, key, payload), reused without reallocating.
#[derive(Debug, Default)]
pub(super) struct LocalQueue {
    headers: Vec<RequestHeader>,
    spans: Vec<Span>,
    bytes: Vec<u8>,
}

impl LocalQueue {
    /// Queues a request, copying its key and payload.
    #[inline]
    pub(super) fn push(&mut self, header: RequestHeader, key: &[u8], payload: &[u8]) {
        let offset = |len: usize| u32::try_from(len).expect("a local queue below 4 GiB");
        let key_from = offset(self.bytes.len());
        self.bytes.extend_from_slice(key);
        let payload_from = offset(self.bytes.len());
        self.bytes.extend_from_slice(payload);
        self.headers.push(header);
        self.spans.push(Span {
            key_from,
            payload_from,
            payload_to: offset(self.bytes.len()),
        });
    }

    /// Requests queued.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.headers.len()
    }

    /// Whether no request is queued.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The request at `index`, borrowed from the queue.
    #[inline]
    pub(super) fn get(&self, index: usize) -> Request<'_> {
        let s = self.spans[index];
        Request {
            header: self.headers[index],
            key: &self.bytes[s.key_from as usize..s.payload_from as usize],
            payload: &self.bytes[s.payload_from as usize..s.payload_to as usize],
        }
    }

    /// Forgets every request, keeping the buffers.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.headers.clear();
        self.spans.clear();
        self.bytes.clear();
    }
}

impl Engine {
    /// Whether a request to this executor itself may skip its ring: outside a migration (whose
    /// machine sees every frame) and with nothing it sent itself still in its own ring or
    /// overflow (that must run first, in order).
    #[inline]
    pub(super) fn may_queue_local(&self) -> bool {
        self.local_queue_on && self.mig.settled && self.out.drained(self.out.executor_lane(self.me))
    }

    /// Queues a request to this executor itself.
    #[inline]
    pub(super) fn queue_local(&mut self, header: RequestHeader, key: &[u8], payload: &[u8]) {
        self.local.push(header, key, payload);
    }

    /// Starts fetching the state the queued request at `index` of `batch` will look up.
    #[inline]
    fn prefetch_queued(&self, batch: &LocalQueue, index: usize) {
        if let Some(h) = batch.headers.get(index) {
            self.prefetch_lookup(usize::from(h.operator), h.key_group, h.key_hash);
        }
    }

    /// Runs the requests this executor queued for itself, and those they queue, in order;
    /// returns how many ran. Called after every batch and wherever else requests are routed, so
    /// the queue is empty whenever the executor reads its own ring, takes a plan or parks.
    pub(super) fn drain_local(&mut self) -> usize {
        let mut ran = 0;
        while !self.local.is_empty() {
            let batch = std::mem::replace(&mut self.local, std::mem::take(&mut self.local_spare));
            let ahead = if self.keeps_state { PREFETCH_AHEAD } else { 0 };
            for i in 0..ahead {
                self.prefetch_queued(&batch, i);
            }
            for i in 0..batch.len() {
                if ahead > 0 {
                    self.prefetch_queued(&batch, i + ahead);
                }
                self.execute(&batch.get(i));
            }
            ran += batch.len();
            self.local_spare = batch;
            self.local_spare.clear();
        }
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_come_back_in_order_with_their_bytes() {
        let mut q = LocalQueue::default();
        for i in 0..5u16 {
            let h = RequestHeader {
                operator: i,
                ..RequestHeader::default()
            };
            q.push(h, &vec![b'k'; usize::from(i)], &[i as u8; 3]);
        }
        assert_eq!(q.len(), 5);
        for i in 0..5u16 {
            let r = q.get(usize::from(i));
            assert_eq!(r.header.operator, i);
            assert_eq!(r.key, vec![b'k'; usize::from(i)].as_slice());
            assert_eq!(r.payload, &[i as u8; 3]);
        }
        q.clear();
        assert!(q.is_empty());
        q.push(RequestHeader::default(), b"", b"");
        assert_eq!((q.get(0).key, q.get(0).payload), (&b""[..], &b""[..]));
    }
}
