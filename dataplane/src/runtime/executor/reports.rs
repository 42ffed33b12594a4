//! What an executor tells its coordinator (in a cluster, its worker's network thread): ledger
//! deltas and the other reports, through its report ring.
//!
//! Why a busy executor lets its deltas wait: each report frame it publishes wakes a parked
//! reader, a futex call on the executor's side and a context switch on the reader's. Written
//! after every loop turn (at most 32 frames from each input), that was about a sixth of a WC
//! executor's CPU (`benches/results/wc.md`). So while it
//! has work, an executor reports its deltas once [`REPORT_EARLY_DELTAS`] wait or the oldest
//! has waited [`REPORT_AGE_MAX_NS`], whichever comes first; an executor about to park reports
//! everything first, so at low load a tree is reported as soon as the turn that completed it
//! ends. Other reports (end of stream, migrations, errors) go at once, behind the deltas
//! before them.
//!
//! Why deltas alone do not wake a cluster worker's network thread: it collects them on its own
//! turns (it comes back within its report hold while an executor has work, and an executor
//! reports everything before it parks), and each frame carries the time it was written, so
//! the wait costs the measured latency nothing. Nudged for every deltas frame, a WC worker at
//! 50 000 records/s woke its network thread about 10 000 times a second for them (see
//! `cluster/node/reports.rs`). Other reports still nudge: they are rare, and some are waited on.

use super::{DELTAS_PER_REPORT, ERROR_REPORT_BYTES_MAX, Engine};
use crate::runtime::ledger::Delta;
use crate::runtime::messages::{Report, deltas_frame_bytes, encode_deltas, truncate_utf8};

/// A busy executor reports once this many deltas wait…
pub(super) const REPORT_EARLY_DELTAS: usize = 512;
/// …or once the oldest has waited this long (ns): the most a busy executor adds to a
/// tree's measured latency.
pub(super) const REPORT_AGE_MAX_NS: u64 = 100_000;
const _: () = assert!(REPORT_EARLY_DELTAS <= DELTAS_PER_REPORT);

impl Engine {
    /// Queues a ledger delta, XORed into the one before it when both are of the same root.
    /// A root's chained requests often run back to back (WC's ten words of one sentence), and
    /// a root's ledger is the XOR of its deltas, so the combined delta closes the tree exactly
    /// as its parts would: one frame entry, one read by the network thread and one ledger
    /// update instead of several. Only the newest is compared — a lookup of every waiting
    /// root cost more than it saved (`deltas.rs`).
    #[inline]
    pub(super) fn add_delta(&mut self, d: Delta) {
        match self.deltas.last_mut() {
            Some(last) if last.root_id == d.root_id => {
                debug_assert_eq!(last.admitted_ns, d.admitted_ns, "one root, one admission");
                last.xor ^= d.xor;
            }
            _ => self.deltas.push(d),
        }
    }

    pub(super) fn report_error(&mut self, message: String) {
        let message = truncate_utf8(&message, ERROR_REPORT_BYTES_MAX);
        self.push_report(&Report::Error(message.into()));
    }

    /// Queues a report (other than deltas) behind those waiting for room.
    pub(super) fn push_report(&mut self, report: &Report<'_>) {
        self.pending_reports.push_back(report.encode());
    }

    /// After a busy loop turn: reports if another report waits, or the deltas are due.
    pub(super) fn flush_reports_if_due(&mut self) {
        if self.pending_reports.is_empty() {
            if self.deltas.is_empty() {
                return;
            }
            let now = self.clock.raw();
            let since = *self.deltas_since.get_or_insert(now);
            let waited_ns = self.clock.delta_as_nanos(since, now);
            if self.deltas.len() < REPORT_EARLY_DELTAS && waited_ns < REPORT_AGE_MAX_NS {
                return;
            }
        }
        self.flush_reports();
    }

    /// Sends ledger deltas, then other reports, as room allows (deltas first: a report that
    /// follows them, such as end-of-stream done, must not overtake them).
    pub(super) fn flush_reports(&mut self) {
        // Leaves queued here are folded into their parents' deltas (`ledger.rs`): those
        // deltas must not leave before the leaves ran.
        debug_assert!(
            self.local.is_empty(),
            "reports with requests queued locally"
        );
        let reports_before = self.pending_reports.len();
        self.write_reports();
        if self.deltas.is_empty() {
            self.deltas_since = None;
        }
        if reports_before != self.pending_reports.len()
            && let Some(n) = &self.net
        {
            n.nudge();
        }
    }

    fn write_reports(&mut self) {
        if !self.deltas.is_empty() {
            // One clock read per flush: the frames of one flush are written together.
            let written_ns = crate::clock::monotonic_ns();
            while !self.deltas.is_empty() {
                let n = self.deltas.len().min(DELTAS_PER_REPORT);
                let Ok(mut g) = self.report.reserve(deltas_frame_bytes(n)) else {
                    return;
                };
                // Encoded in place: the frame is written once, into the ring.
                encode_deltas(self.deltas.drain(..n), written_ns, &mut g);
                g.commit();
            }
        }
        while let Some(f) = self.pending_reports.front() {
            match self.report.push(f) {
                Ok(()) => {
                    self.pending_reports.pop_front();
                }
                Err(_) => return,
            }
        }
    }
}
