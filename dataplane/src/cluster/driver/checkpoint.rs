//! Taking a checkpoint (`crate::checkpoint`) while the input flows: the simplest consistent
//! cut. The driver stops admitting, waits until the cluster is quiescent (the probe rounds of
//! the end-of-stream barrier: every frame sent was received and every worker is idle, so no
//! request is in flight anywhere and there is no channel state to save), asks every worker to
//! copy its state (`Message::Snapshot`), and resumes once each answered `Snapshotted` with its
//! counters at the cut. The workers then write their parts on threads of their own while the
//! input flows; when every `PartWritten` is in, the driver writes the manifest with the
//! input's offset, the routing and the counters of the cut — only then does the checkpoint
//! exist. A checkpoint's cut never overlaps a migration: it is only taken between them, and no
//! move starts while it is taken (one may while the parts are written: the copies are made).
//! One checkpoint is written at a time.
//!
//! What it costs: admission pauses for the drain (the work already admitted, at most the
//! in-flight window) plus the copy of the state (`docs/recovery.md` has the figures).

use super::recovery::{Fault, FaultAction, Phase, unix_ms};
use super::{DRIVER_PARK, Driver, DriverError};
use crate::checkpoint::{CheckpointStore, Manifest, PartRef};
use crate::cluster::control::Controller;
use crate::message::{Message, Snapshotted};
use crate::runtime::ledger::Ledger;
use crate::source::SourceOffset;
use clasp_operators::AppSpec;
use std::time::Instant;

/// A checkpoint whose cut is taken and whose parts are being written.
pub(super) struct Persisting {
    /// Its manifest, complete but for the parts.
    manifest: Manifest,
    /// The driver's ledger at the cut.
    ledger: Ledger,
    /// The workers at the cut, each of which writes a part.
    workers: usize,
    /// When the input resumed (the parts are waited for up to the stall timeout from here).
    resumed: Instant,
}

impl Driver<'_> {
    /// Whether a checkpoint is due: checkpoints on, the interval passed, nothing else under
    /// way (a migration, or a move waiting to start — for the roots to narrow, or for a
    /// worker to join; a join, a leave, the parts of the last checkpoint). A cut never falls
    /// between a controller's asking for a move and the move's plan, so the cut's table holds
    /// every move the controller asked for before it (a resumed run makes none of them
    /// again).
    pub(super) fn checkpoint_due(&self) -> bool {
        let Some(ck) = &self.cfg.checkpoint else {
            return false;
        };
        !ck.interval.is_zero()
            && self.last_checkpoint.elapsed() >= ck.interval
            && !self.migrating()
            && !self.joins.holds_a_move()
            && self.persisting.is_none()
            && !self.joins.busy()
            && !self.leaves.busy()
    }

    /// Takes checkpoint's cut at record `admitted` (module docs); its parts are written after
    /// this returns. A checkpoint that cannot be taken is a fault the run survives (the
    /// previous one stays the newest); losing a worker meanwhile is the run's error, as
    /// anywhere else.
    pub(super) fn checkpoint(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
        admitted: u64,
        source: SourceOffset,
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        self.t.flush_now();
        let mut round = self.barrier.round;
        let quiet = self.quiesce(&mut round);
        self.barrier.round = round;
        quiet?;
        let id = self.carry.next_id;
        self.carry.next_id += 1;
        self.phase = Phase::CheckpointSnapshot;
        self.snapshots.clear();
        self.parts.clear();
        let dir = self.checkpoint_dir();
        self.broadcast(&Message::Snapshot { id, dir })?;
        self.inject(Phase::CheckpointSnapshot, ctl);
        let deadline = Instant::now() + self.cfg.stall_timeout;
        while self.snapshots.len() < self.ids.len() {
            if Instant::now() >= deadline {
                let answered: Vec<u32> = self.snapshots.iter().map(|s| s.worker).collect();
                return Err(DriverError::Timeout(format!(
                    "checkpoint {id}: the state of workers {answered:?} of {:?} within {:?}",
                    self.ids, self.cfg.stall_timeout
                )));
            }
            self.turn(DRIVER_PARK)?;
        }
        // The pause is over whether or not the parts are written: every cut counts.
        let pause_ms = started.elapsed().as_secs_f64() * 1e3;
        self.carry.pauses_ms.push(pause_ms);
        self.phase = Phase::Steady;
        self.last_checkpoint = Instant::now();
        self.last_cut_admitted = Some(admitted);
        match self.manifest_at_cut(spec, id, admitted, source, pause_ms) {
            Ok(manifest) => {
                self.persisting = Some(Persisting {
                    manifest,
                    ledger: self.rx.ledger.clone(),
                    workers: self.ids.len(),
                    resumed: Instant::now(),
                });
            }
            Err(e) => self.checkpoint_failed(id, e),
        }
        Ok(())
    }

    fn checkpoint_dir(&self) -> String {
        (self.cfg.checkpoint.as_ref()).map_or_else(String::new, |ck| ck.dir.display().to_string())
    }

    /// Commits the checkpoint being written once every part is in (module docs).
    pub(super) fn advance_checkpoint(&mut self, ctl: &mut dyn Controller) {
        let Some(p) = &self.persisting else {
            return;
        };
        let (id, waited, workers) = (p.manifest.id, p.resumed.elapsed(), p.workers);
        let failed = self
            .parts
            .iter()
            .find(|w| w.id == id && !w.error.is_empty());
        if let Some(w) = failed {
            let why = format!("worker {}: {}", w.worker, w.error);
            self.persisting = None;
            self.checkpoint_failed(id, why);
            return;
        }
        let written = self.parts.iter().filter(|w| w.id == id).count();
        if written < workers {
            if waited >= self.cfg.stall_timeout {
                self.persisting = None;
                let why = format!("{written} of {workers} parts written within {waited:?}");
                self.checkpoint_failed(id, why);
            }
            return;
        }
        let Some(mut p) = self.persisting.take() else {
            return;
        };
        self.phase = Phase::CheckpointCommit;
        self.inject(Phase::CheckpointCommit, ctl);
        self.phase = Phase::Steady;
        // Only this checkpoint's: a late answer about one given up may be here too.
        let mut parts: Vec<_> = (std::mem::take(&mut self.parts).into_iter())
            .filter(|w| w.id == id)
            .collect();
        parts.sort_by_key(|w| w.worker);
        p.manifest.parts = (parts.into_iter())
            .map(|w| PartRef {
                name: w.name,
                crc32: w.crc32,
                bytes: w.bytes,
                groups: w.groups,
            })
            .collect();
        match self.commit(&p.manifest) {
            Ok(()) => self.committed(p),
            Err(e) => self.checkpoint_failed(id, e),
        }
    }

    /// Waits for the checkpoint being written (the end of the input: it is complete before
    /// the run ends, so `--resume` finds it).
    pub(super) fn settle_checkpoint(
        &mut self,
        ctl: &mut dyn Controller,
    ) -> Result<(), DriverError> {
        while self.persisting.is_some() {
            self.turn(DRIVER_PARK)?;
            self.advance_checkpoint(ctl);
        }
        Ok(())
    }

    fn committed(&mut self, p: Persisting) {
        let m = p.manifest;
        let bytes: u64 = m.parts.iter().map(|p| p.bytes).sum();
        let c = &mut self.carry;
        c.checkpoints.taken += 1;
        c.checkpoints.last_id = Some(m.id);
        c.checkpoints.bytes_last = bytes;
        c.ledger_at_cut = Some((m.id, p.ledger));
        // The admission times kept for a replay now start at this cut.
        let dropped = tracked_in(c.admitted_ns_from, m.admitted, self.cfg.sample_every);
        c.admitted_ns
            .drain(..(dropped as usize).min(c.admitted_ns.len()));
        c.admitted_ns_from = m.admitted;
        tracing::debug!(
            "checkpoint {}: {bytes} bytes, paused {:.1} ms",
            m.id,
            m.pause_ms
        );
    }

    fn checkpoint_failed(&mut self, id: u64, why: String) {
        // An input waiting at the same record takes the next one again.
        self.last_cut_admitted = None;
        if let Some(ck) = &self.cfg.checkpoint
            && let Ok(store) = super::recovery::open(ck)
        {
            store.discard(id);
        }
        self.carry.checkpoints.failed += 1;
        let kept = if self.carry.checkpoints.taken > 0 {
            "the previous one is kept"
        } else {
            "none was taken before it"
        };
        self.fault(format!("checkpoint {id} failed ({kept}): {why}"));
    }

    /// Checkpoint `id`'s manifest, but for its parts, from the workers' answers at the cut;
    /// why not, if they do not make one.
    fn manifest_at_cut(
        &mut self,
        spec: &AppSpec,
        id: u64,
        admitted: u64,
        source: SourceOffset,
        pause_ms: f64,
    ) -> Result<Manifest, String> {
        let ops = spec.operators.len();
        let mut operators = self.carry.base(ops);
        let mut answers: Vec<Snapshotted> = std::mem::take(&mut self.snapshots);
        answers.sort_by_key(|s| s.worker);
        for s in answers {
            if !s.error.is_empty() {
                return Err(format!("worker {}: {}", s.worker, s.error));
            }
            if s.summaries.len() != ops || s.malformed.len() != ops {
                return Err(format!("worker {} answered for another app", s.worker));
            }
            for (op, base) in operators.iter_mut().enumerate() {
                let sum = &s.summaries[op];
                base.processed += sum.processed;
                base.malformed += sum.malformed;
                base.inputs.combine(&sum.inputs);
                base.outputs.combine(&sum.outputs);
                for (r, n) in &s.malformed[op] {
                    *base.malformed_reasons.entry(r.clone()).or_default() += n;
                }
            }
        }
        let routing = self.mig.planner.routing();
        // A few KiB read from the source's file, once a checkpoint.
        let source_tail_crc32 = source.file.as_ref().and_then(|f| f.tail_crc32());
        Ok(Manifest {
            id,
            created_unix_ms: unix_ms(),
            app: spec.name.clone(),
            seed: self.cfg.seed,
            epoch: routing.epoch().0,
            routing: Manifest::rows_of(routing),
            workers: self.slots.workers.clone(),
            executors: self.cfg.executors,
            admitted,
            source,
            operators,
            parts: Vec::new(),
            pause_ms,
            run_s: self.meter.t0.elapsed().as_secs_f64(),
            records: (self.cfg.records != u64::MAX).then_some(self.cfg.records),
            app_shape: Some(spec.shape()),
            source_tail_crc32,
        })
    }

    /// Writes a manifest into the store (module docs).
    fn commit(&self, m: &Manifest) -> Result<(), String> {
        let Some(ck) = &self.cfg.checkpoint else {
            return Err("checkpoints are off".into());
        };
        let store = super::recovery::open(ck).map_err(|e| e.to_string())?;
        store.commit(m).map_err(|e| e.to_string())
    }

    /// The testing option `--fault`: kills or stops its workers the first time the run is in
    /// `phase`, every fault of that phase at once.
    pub(super) fn inject(&mut self, phase: Phase, ctl: &mut dyn Controller) {
        if !self.carry.faults.iter().any(|f| f.phase == phase) {
            return;
        }
        let (now, later) = (std::mem::take(&mut self.carry.faults).into_iter())
            .partition::<Vec<Fault>, _>(|f| f.phase == phase);
        self.carry.faults = later;
        for f in now {
            let (done, what) = match f.action {
                FaultAction::Kill => (ctl.kill_worker(f.worker), "killed"),
                FaultAction::Stop => (ctl.stop_worker(f.worker), "stopped"),
            };
            match done {
                Ok(()) => {
                    tracing::warn!("--fault: {what} worker {} ({})", f.worker, phase.name());
                    self.carry.faulted_at.get_or_insert((Instant::now(), phase));
                }
                Err(e) => self.fault(format!("--fault: {e}")),
            }
        }
    }
}

/// Tracked roots among records `from..to` when every `sample`-th record is tracked (record `i`
/// is when `i % sample == 0`, as admission decides).
fn tracked_in(from: u64, to: u64, sample: u64) -> u64 {
    let sample = sample.max(1);
    to.div_ceil(sample).saturating_sub(from.div_ceil(sample))
}

#[cfg(test)]
mod tests {
    use super::tracked_in;

    #[test]
    fn the_tracked_roots_between_two_cuts_are_counted_as_admission_tracks_them() {
        for sample in [0, 1, 2, 3, 64] {
            for from in 0..70 {
                for to in from..140 {
                    let by_count = (from..to).filter(|i| i % sample.max(1) == 0).count();
                    assert_eq!(
                        tracked_in(from, to, sample),
                        by_count as u64,
                        "{sample} {from} {to}"
                    );
                }
            }
        }
    }
}
