//! The network thread's side of its executors' reports: ledger deltas held and sent to the
//! driver, and the other reports forwarded.
//!
//! Why ledger deltas wait here: every message to the driver is a send, and on loopback the
//! send also runs the driver's receive in this thread; every deltas frame an executor nudged
//! for was a wake-up of this thread. A WC worker at 50 000 records/s on 0.3 of a core spent
//! about 40 % of its network thread's CPU that way (perf: sends 20 %, wake-ups, clock reads).
//! So executors do not nudge for deltas, and deltas are sent once [`DELTAS_PER_MESSAGE`] wait,
//! the oldest has waited [`REPORT_HOLD`], or another message to the driver goes out (the
//! deltas go first: nothing read after them overtakes them). While an executor has work, the
//! thread parks at most [`REPORT_HOLD`], so no delta waits longer for it. The wait costs the
//! measured latency nothing: each delta's admission time moves later by its wait, and the
//! driver's ledger measures each tree up to when its executor reported it.

use super::{DELTAS_PER_MESSAGE, Node, OUTBOX_MAX_MESSAGES, Running, snapshot};
use crate::message::{LedgerDelta, Message};
use crate::runtime::coordinator::{REPORT_FRAMES_PER_TURN, REPORT_HOLD};
use crate::runtime::messages::Report;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Node {
    /// Queues the waiting deltas for the driver, each admission moved later by its wait.
    pub(super) fn queue_deltas(&mut self) {
        if self.deltas.is_empty() {
            return;
        }
        self.deltas_since = None;
        let now_ns = crate::clock::monotonic_ns();
        let held: Vec<LedgerDelta> = self
            .deltas
            .drain_held(now_ns)
            .map(LedgerDelta::from)
            .collect();
        for chunk in held.chunks(DELTAS_PER_MESSAGE) {
            self.push_now(&Message::Deltas(chunk.to_vec()));
        }
    }

    /// The park of a turn with nothing to do. Executors do not wake this thread for deltas:
    /// while one has work, come back for them within the hold. All parked, they reported
    /// everything before parking (read again here: a report may have landed since the turn's
    /// read, and then there is more to do at once).
    pub(super) fn quiet_park(&mut self, run: &mut Running, timeout: Duration) -> Duration {
        if !run.executors_idle() {
            return timeout.min(REPORT_HOLD);
        }
        // Pairs with the executor's fence before it sets PARKED: its reports are seen.
        std::sync::atomic::fence(Ordering::Acquire);
        if self.read_reports(run) {
            Duration::ZERO
        } else {
            timeout
        }
    }

    /// How long the thread may park before the waiting deltas are due (None: none wait, or
    /// the outbox is full and reports are not read until it drains — a due time then would
    /// only spin the thread).
    pub(super) fn deltas_due_in(&self) -> Option<Duration> {
        if self.outbox.len() >= OUTBOX_MAX_MESSAGES {
            return None;
        }
        self.deltas_since
            .map(|t| REPORT_HOLD.saturating_sub(t.elapsed()))
    }

    /// Reads executors' reports. Returns whether any was read.
    pub(super) fn read_reports(&mut self, run: &mut Running) -> bool {
        if self.outbox.len() >= OUTBOX_MAX_MESSAGES {
            return false;
        }
        let mut faults = Vec::new();
        let deltas = &mut self.deltas;
        let mut migration = Vec::new();
        let snap = &mut run.snap;
        let n = run
            .coordinator
            .poll_reports(REPORT_FRAMES_PER_TURN, |_, report| match report {
                Report::Deltas(batch) => {
                    let written_ns = batch.written_ns();
                    batch.iter().for_each(|d| deltas.push(d, written_ns));
                }
                Report::Flushed { .. } | Report::ProducerDied { .. } => {}
                // Already a message (the executor encoded it): forwarded as it is.
                Report::Migrated(body) | Report::Progress(body) => migration.push(body.to_vec()),
                Report::Error(e) => faults.push(e.into_owned()),
                Report::Snapshotted => snap.reported(),
            });
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                faults.push(format!("report rings: {e}"));
                0
            }
        };
        // Deltas go out before anything read after them (`push` sends them first); a root's
        // deltas from every executor and turn of the hold travel as one.
        if !self.deltas.is_empty() {
            let since = *self.deltas_since.get_or_insert_with(Instant::now);
            if self.deltas.len() >= DELTAS_PER_MESSAGE
                || since.elapsed() >= REPORT_HOLD
                || !migration.is_empty()
            {
                self.queue_deltas();
            }
        }
        self.outbox.extend(migration);
        for f in faults {
            self.fault(f);
        }
        for op in run.coordinator.take_flushed() {
            self.push(&Message::EosAck { operator: op });
        }
        snapshot::advance(self, run);
        snapshot::collect(self, run);
        n > 0
    }
}
