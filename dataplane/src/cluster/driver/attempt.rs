//! One *attempt* of a run — start the job, admit, drain, end the stream — and what a failed
//! attempt hands the next one after a recovery (`recovery.rs`): the workers it lost, the
//! phase it was in, and the checkpoint's table the next one starts from.

use super::recovery::{self, Phase};
use super::{DRIVER_PARK, Driver, DriverError, feed};
use crate::cluster::control::Controller;
use crate::routing::Slots;
use crate::runtime::ledger::run_elapsed;
use crate::transport::PeerId;
use clasp_operators::AppSpec;
use std::time::{Duration, Instant};

impl Driver<'_> {
    /// One attempt of the run: start the job, admit, drain, end the stream.
    pub(super) fn attempt(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
    ) -> Result<(feed::Fed, Duration), DriverError> {
        let cfg = self.cfg;
        self.start(ctl)?;
        if self.carry.attempts == 0 {
            ctl.on_listening(cfg.advertise.unwrap_or(self.t.local_addr()));
        }
        let fed = self.feed(spec, ctl)?;
        self.phase = Phase::EndOfStream;
        self.carry.replayed(fed.admitted, true);
        self.t.flush_now();
        self.drain(ctl, fed.admitted, fed.tracked, spec.operators.len())?;
        self.settle_joins(ctl)?;
        self.settle_leaves(ctl)?;
        self.settle_checkpoint(ctl)?;
        self.account_active();
        let last_completion = self.rx.last_completion;
        self.end_of_stream(spec)?;
        let elapsed = run_elapsed(
            fed.first_admit,
            last_completion,
            self.barrier.input_done,
            self.cfg.sample_every,
        );
        Ok((fed, elapsed))
    }

    /// What the run was doing.
    pub(super) fn phase_now(&self) -> Phase {
        match self.phase {
            Phase::Steady if self.mig.in_flight.is_some() => Phase::Migration,
            p => p,
        }
    }

    /// The workers lost by fault `e`: those whose connections are gone, after a moment for
    /// the transport to see it (a link reported lost names two workers, one of them alive),
    /// and those that did not answer the probe after the fault (or the stall's).
    pub(super) fn lost_workers(&mut self, e: &DriverError) -> Vec<PeerId> {
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut lost: Vec<PeerId> = Vec::new();
        if let DriverError::Lost { peer, .. } | DriverError::Unreachable { peer, .. } = e {
            lost.push(*peer);
        }
        // A worker that stopped answering with its connections up (SIGSTOP, a frozen host)
        // can time out a checkpoint, a quiescence wait, a migration or the end of the stream
        // before the stall timeout names it, or freeze beside one that was killed: the same
        // probe as a stall's names it here, or it would be kept, and the restarted job could
        // not start with it. (A stall already probed.)
        if !matches!(e, DriverError::Stalled { .. }) {
            self.stall_probe();
            // A worker that sent its summary has finished its job and answers no probe.
            let summaries = &self.barrier.summaries;
            (self.silent_at_stall).retain(|p| !summaries.iter().any(|s| s.worker == *p));
        }
        while Instant::now() < deadline {
            if self.t.poll(DRIVER_PARK, &mut self.rx).is_err() {
                break;
            }
        }
        for &p in &self.ids {
            let silent = self.silent_at_stall.contains(&p);
            if (silent || !self.t.is_connected(p)) && !lost.contains(&p) {
                lost.push(p);
            }
        }
        lost.sort_unstable();
        lost
    }

    /// Ends this attempt: what the next one takes over (its transport is dropped with it,
    /// which ends the job on every surviving worker).
    pub(super) fn into_carry(mut self) -> recovery::Carry {
        self.account_active();
        let mut c = std::mem::take(&mut self.carry);
        c.migrations.append(&mut self.mig.migrations);
        c.intervals.append(&mut self.meter.intervals);
        c.worker_seconds += self.meter.worker_seconds;
        c.attempts += 1;
        c
    }
}

/// The checkpoint's table a restarted attempt starts from, at epoch 0 (a fresh job); `None`
/// without one, or when it names slots of workers the attempt does not start with (workers
/// that joined): then the initial spread, which serves as well, since key groups are restored
/// to whichever executor owns them.
pub(super) fn resumed_table(
    carry: &recovery::Carry,
    slots: &Slots,
    starting: &Slots,
    ops: usize,
) -> Option<clasp_protocol::RoutingTable> {
    let m = carry.resume.as_ref()?.manifest.as_ref()?;
    let t = m.routing_table().ok()?.with_epoch(clasp_protocol::Epoch(0));
    slots.check(&t, ops).ok()?;
    let fits = (t.owners().iter()).all(|s| s.index() < starting.len());
    fits.then_some(t)
}
