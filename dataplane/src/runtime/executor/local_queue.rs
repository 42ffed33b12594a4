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
use crate::request::RequestHeader;

/// How many queued requests ahead of the one it runs the executor starts fetching the state
/// of. Fetching a whole batch's at queue time asked for 320 lookups' lines at once for WC's
/// 32 sentences, more than a core tracks in flight; 8 ahead ran one executor's WC 4–12 %
/// faster in three of four alternated runs (benches/results/wc.md).
const PREFETCH_AHEAD: usize = 8;

/// One queued request: its header, and where its key and payload sit in
/// [`LocalQueue::bytes`] (one vector for both: one push and one bounds check a request).
#[derive(Clone, Copy, Debug)]
struct Queued {
    header: RequestHeader,
    key_from: u32,
    payload_from: u32,
    payload_to: u32,
}

/// A FIFO of requests (header, key, payload), reused without reallocating.
#[derive(Debug, Default)]
pub(super) struct LocalQueue {
    queued: Vec<Queued>,
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
        // Many chained requests carry a key alone (WC's words): no copy call for nothing.
        if !payload.is_empty() {
            self.bytes.extend_from_slice(payload);
        }
        self.queued.push(Queued {
            header,
            key_from,
            payload_from,
            payload_to: offset(self.bytes.len()),
        });
    }

    /// Requests queued.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.queued.len()
    }

    /// Whether no request is queued.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// The request at `index` (header, key, payload), borrowed from the queue.
    #[inline]
    pub(super) fn get(&self, index: usize) -> (&RequestHeader, &[u8], &[u8]) {
        let q = &self.queued[index];
        let key = &self.bytes[q.key_from as usize..q.payload_from as usize];
        let payload = &self.bytes[q.payload_from as usize..q.payload_to as usize];
        (&q.header, key, payload)
    }

    /// Forgets every request, keeping the buffers.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.queued.clear();
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
        if let Some(q) = batch.queued.get(index) {
            let h = &q.header;
            self.prefetch_lookup(usize::from(h.operator), h.key_group, h.key_hash);
        }
    }

    /// Adds `run.1` requests to operator `run.0`'s `processed` (none: nothing).
    #[inline]
    fn count_processed(&self, run: (usize, u64)) {
        if run.1 > 0 {
            let m = self.metrics.view();
            m.add(m.processed(run.0), run.1);
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
            // A run of requests to one operator is counted in its `processed` once.
            let mut run = (usize::MAX, 0u64);
            for i in 0..batch.len() {
                if ahead > 0 {
                    self.prefetch_queued(&batch, i + ahead);
                }
                let (header, key, payload) = batch.get(i);
                let op = usize::from(header.operator);
                if op != run.0 {
                    self.count_processed(run);
                    run = (op, 0);
                }
                self.execute_uncounted(header, key, payload);
                run.1 += 1;
            }
            self.count_processed(run);
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
            let (header, key, payload) = q.get(usize::from(i));
            assert_eq!(header.operator, i);
            assert_eq!(key, vec![b'k'; usize::from(i)].as_slice());
            assert_eq!(payload, &[i as u8; 3]);
        }
        q.clear();
        assert!(q.is_empty());
        q.push(RequestHeader::default(), b"", b"");
        q.push(RequestHeader::default(), b"a", b"");
        q.push(RequestHeader::default(), b"b", b"xy");
        let bytes = |i| (q.get(i).1, q.get(i).2);
        assert_eq!(bytes(0), (&b""[..], &b""[..]));
        assert_eq!(bytes(1), (&b"a"[..], &b""[..]));
        assert_eq!(bytes(2), (&b"b"[..], &b"xy"[..]));
    }
}
