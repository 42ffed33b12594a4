//! Taking a checkpoint (`crate::checkpoint`) while the input flows: the simplest consistent
//! cut. The driver stops admitting, waits until the cluster is quiescent (the probe rounds of
//! the end-of-stream barrier: every frame sent was received and every worker is idle, so no
//! request is in flight anywhere and there is no channel state to save), asks every worker to
//! write its part (`Message::Snapshot`), writes the manifest with the input's offset and the
//! counters at the cut, and resumes. A checkpoint never overlaps a migration: it is only
//! started between them, and no move starts while it is taken.
//!
//! What it costs: admission pauses for the drain (the work already admitted, at most the
//! in-flight window) plus the export and the writes (`docs/recovery.md` has the figures).

use super::recovery::{Phase, unix_ms};
use super::{DRIVER_PARK, Driver, DriverError};
use crate::checkpoint::{CheckpointStore, Manifest, PartRef};
use crate::cluster::control::Controller;
use crate::message::{Message, Snapshotted};
use crate::source::SourceOffset;
use clasp_operators::AppSpec;
use std::time::Instant;

impl Driver<'_> {
    /// Whether a checkpoint is due: checkpoints on, the interval passed, nothing else under
    /// way (a migration, a join, a leave).
    pub(super) fn checkpoint_due(&self) -> bool {
        let Some(ck) = &self.cfg.checkpoint else {
            return false;
        };
        !ck.interval.is_zero()
            && self.last_checkpoint.elapsed() >= ck.interval
            && self.mig.in_flight.is_none()
            && !self.joins.busy()
            && !self.leaves.busy()
    }

    /// Takes one checkpoint at record `admitted` (module docs). A checkpoint that cannot be
    /// written is a fault the run survives (the previous one stays the newest); losing a
    /// worker meanwhile is the run's error, as anywhere else.
    pub(super) fn checkpoint(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
        admitted: u64,
        source: SourceOffset,
    ) -> Result<(), DriverError> {
        let Some(ck) = self.cfg.checkpoint.clone() else {
            return Ok(());
        };
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
        let dir = ck.dir.display().to_string();
        self.broadcast(&Message::Snapshot { id, dir })?;
        self.inject(Phase::CheckpointSnapshot, ctl);
        let deadline = Instant::now() + self.cfg.stall_timeout;
        while self.snapshots.len() < self.ids.len() {
            if Instant::now() >= deadline {
                let answered: Vec<u32> = self.snapshots.iter().map(|s| s.worker).collect();
                return Err(DriverError::Timeout(format!(
                    "checkpoint {id}: parts from workers {answered:?} of {:?} within {:?}",
                    self.ids, self.cfg.stall_timeout
                )));
            }
            self.turn(DRIVER_PARK)?;
        }
        self.phase = Phase::CheckpointCommit;
        self.inject(Phase::CheckpointCommit, ctl);
        let result = self.commit(spec, id, admitted, source, started);
        self.phase = Phase::Steady;
        self.last_checkpoint = Instant::now();
        let store = super::recovery::open(&ck)?;
        match result {
            Ok(m) => {
                let bytes: u64 = m.parts.iter().map(|p| p.bytes).sum();
                let c = &mut self.carry;
                c.checkpoints.taken += 1;
                c.checkpoints.last_id = Some(id);
                c.checkpoints.bytes_last = bytes;
                c.pauses_ms.push(m.pause_ms);
                c.ledger_at_cut = Some((id, self.rx.ledger.clone()));
                c.admitted_ns.clear();
                c.admitted_ns_from = admitted;
                tracing::debug!(
                    "checkpoint {id}: {bytes} bytes, paused {:.1} ms",
                    m.pause_ms
                );
            }
            Err(e) => {
                store.discard(id);
                self.carry.checkpoints.failed += 1;
                self.fault(format!(
                    "checkpoint {id} failed (the previous one is kept): {e}"
                ));
            }
        }
        Ok(())
    }

    /// Writes checkpoint `id`'s manifest from the workers' answers; why not, if it cannot.
    fn commit(
        &mut self,
        spec: &AppSpec,
        id: u64,
        admitted: u64,
        source: SourceOffset,
        started: Instant,
    ) -> Result<Manifest, String> {
        let Some(ck) = &self.cfg.checkpoint else {
            return Err("checkpoints are off".into());
        };
        let ops = spec.operators.len();
        let mut operators = self.carry.base(ops);
        let mut parts = Vec::new();
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
            parts.push(PartRef {
                name: s.name,
                crc32: s.crc32,
                bytes: s.bytes,
                groups: s.groups,
            });
        }
        let routing = self.mig.planner.routing();
        let m = Manifest {
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
            parts,
            pause_ms: started.elapsed().as_secs_f64() * 1e3,
        };
        let store = super::recovery::open(ck).map_err(|e| e.to_string())?;
        store.commit(&m).map_err(|e| e.to_string())?;
        Ok(m)
    }

    /// The testing option `--fault`: kills its worker the first time the run is in `phase`.
    pub(super) fn inject(&mut self, phase: Phase, ctl: &mut dyn Controller) {
        let Some(f) = self.carry.fault else { return };
        if f.phase != phase {
            return;
        }
        self.carry.fault = None;
        match ctl.kill_worker(f.worker) {
            Ok(()) => {
                tracing::warn!("--fault: killed worker {} ({})", f.worker, phase.name());
                self.carry.killed_at = Some((Instant::now(), phase));
            }
            Err(e) => self.fault(format!("--fault: {e}")),
        }
    }
}
