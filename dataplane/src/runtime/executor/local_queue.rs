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
//!
//! A run of queued requests to an operator without successors (WC's `count`, the words of a
//! batch of sentences) goes to it a chunk at a time in one call each
//! (`OperatorInstance::process_run`), not a call a request: such an operator emits only
//! outputs, so what each request emitted need not be told apart, and the per-call costs — the
//! vtable, the runtime's set-up around `process`, the routing of the emissions — are paid once
//! a chunk. On one executor that took 3–4 % off WC's CPU a sentence (benches/results/wc.md).
//!
//! Such a leaf also has no id of its own in the latency ledger (`ledger.rs`): it runs in this
//! drain, before the executor reports anything, so its parent's delta — sent after the drain
//! — already stands for it. Its parent hands it no id and it reports none: per word of WC on
//! one executor, an id's hash and a delta's bookkeeping fewer, another 3–4 % of the CPU a
//! sentence.

use super::{EXEC_TIMING_SAMPLE, Engine};
use crate::request::{FLAG_TRACKED, RequestHeader};
use crate::runtime::layout::scalar;
use clasp_operators::{RequestRun, RequestSpan};
use std::ops::Range;

/// How many queued requests ahead of the one it runs the executor starts fetching the state
/// of. Fetching a whole batch's at queue time asked for 320 lookups' lines at once for WC's
/// 32 sentences, more than a core tracks in flight; 8 ahead ran one executor's WC 4–12 %
/// faster in three of four alternated runs (benches/results/wc.md).
const PREFETCH_AHEAD: usize = 8;

/// Requests a call in a run to an operator without successors: as many as are fetched ahead,
/// so the next chunk's state is on its way while one runs.
const LEAF_CHUNK: usize = PREFETCH_AHEAD;

/// One request in this many of a leaf's runs is timed ([`Engine::process_leaf_chunk`]).
const LEAF_TIMING_SAMPLE: u32 = 4 * EXEC_TIMING_SAMPLE;

/// A FIFO of requests (header, key, payload), reused without reallocating. Keys and payloads
/// lie back to back in one buffer and each request's span says where, so a run of requests
/// to one operator is handed over as it lies ([`RequestRun`]).
#[derive(Debug, Default)]
pub(super) struct LocalQueue {
    headers: Vec<RequestHeader>,
    spans: Vec<RequestSpan>,
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
        self.spans.push(RequestSpan {
            key_hash: header.key_hash,
            key_from,
            payload_from,
            payload_to: offset(self.bytes.len()),
        });
        self.headers.push(header);
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

    /// The request at `index` (header, key, payload), borrowed from the queue.
    #[inline]
    pub(super) fn get(&self, index: usize) -> (&RequestHeader, &[u8], &[u8]) {
        let (_, key, payload) = self.run(index..index + 1).get(0);
        (&self.headers[index], key, payload)
    }

    /// The header of the request at `index`.
    #[inline]
    fn header(&self, index: usize) -> &RequestHeader {
        &self.headers[index]
    }

    /// The requests at `range`, as one run.
    #[inline]
    fn run(&self, range: Range<usize>) -> RequestRun<'_> {
        RequestRun::new(&self.bytes, &self.spans[range])
    }

    /// Where the run of requests to one operator that starts at `from` ends.
    #[inline]
    fn run_end(&self, from: usize) -> usize {
        let op = self.headers[from].operator;
        let rest = &self.headers[from..];
        from + rest
            .iter()
            .position(|h| h.operator != op)
            .unwrap_or(rest.len())
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
            let mut from = 0;
            while from < batch.len() {
                // A run of requests to one operator, counted in its `processed` once.
                let to = batch.run_end(from);
                let op = usize::from(batch.header(from).operator);
                if self.leaves.get(op).is_some_and(|&leaf| leaf) {
                    self.execute_leaf_run(&batch, op, from..to, ahead);
                } else {
                    for i in from..to {
                        if ahead > 0 {
                            self.prefetch_queued(&batch, i + ahead);
                        }
                        let (header, key, payload) = batch.get(i);
                        self.execute_uncounted(header, key, payload);
                    }
                }
                self.count_processed((op, (to - from) as u64));
                from = to;
            }
            ran += batch.len();
            self.local_spare = batch;
            self.local_spare.clear();
        }
        ran
    }

    /// Runs the queued requests `range` of `batch` to `op`, an operator without successors,
    /// [`LEAF_CHUNK`] requests a call ([`OperatorInstance::process_run`]), fetching the next
    /// chunk's state (`ahead` > 0) while one runs, and routes their outputs. None reports to
    /// the ledger: a leaf queued here is folded into its parent's entry (`Engine::route`).
    /// The caller counts them.
    ///
    /// [`OperatorInstance::process_run`]: clasp_operators::OperatorInstance::process_run
    fn execute_leaf_run(
        &mut self,
        batch: &LocalQueue,
        op: usize,
        range: Range<usize>,
        ahead: usize,
    ) {
        let mut from = range.start;
        while from < range.end {
            let to = (from + LEAF_CHUNK).min(range.end);
            if ahead > 0 {
                for i in to..to + LEAF_CHUNK {
                    self.prefetch_queued(batch, i);
                }
            }
            debug_assert!(
                (from..to).all(|i| batch.header(i).flags & FLAG_TRACKED == 0),
                "a queued leaf is folded into its parent's ledger entry"
            );
            self.process_leaf_chunk(op, batch.run(from..to));
            self.route_outputs_of(op);
            from = to;
        }
    }

    /// One call of `op`'s [`OperatorInstance::process_run`], timed on the wall clock when the
    /// run holds a request whose number is a multiple of [`LEAF_TIMING_SAMPLE`]: the run's
    /// time, scaled as those requests' samples would be, is what the operator's execution
    /// time gains. (A run of eight is timed in full, so one in 64 requests still gives a
    /// WC count thousands of samples a second; timing one in 16, as
    /// [`Engine::execute_uncounted`] does, read the clock for every other run, 2 % of WC's CPU.)
    ///
    /// [`OperatorInstance::process_run`]: clasp_operators::OperatorInstance::process_run
    #[inline]
    fn process_leaf_chunk(&mut self, op: usize, run: RequestRun<'_>) {
        let n = run.len() as u32;
        let sample = LEAF_TIMING_SAMPLE;
        // Requests whose tick is a multiple of the sample, among the ticks this run takes.
        let sampled = (self.tick % sample + n) / sample;
        self.tick = self.tick.wrapping_add(n);
        if sampled == 0 {
            self.instances[op].process_run(run, &mut self.emitter);
            return;
        }
        let t0 = self.clock.raw();
        self.instances[op].process_run(run, &mut self.emitter);
        let run_ns = self.clock.delta_as_nanos(t0, self.clock.raw());
        let m = self.metrics.view();
        if !self.timing.keep_run(op, run_ns, n) {
            m.add(scalar::TIMING_OUTLIERS, u64::from(sampled));
        } else {
            let ns = run_ns * u64::from(sample * sampled) / u64::from(n.max(1));
            m.add(m.exec_ns(op), ns);
            m.add(scalar::BUSY_NS, ns);
        }
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
