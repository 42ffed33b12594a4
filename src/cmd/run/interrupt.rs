//! A run that SIGINT/SIGTERM can stop: the controller the driver sees says "done" once the stop
//! flag is set, so the driver stops admitting, drains what it admitted and ends the stream the
//! ordinary way; everything else is the run's own controller's, except what is done to the
//! worker processes the run started (killed or stopped by `--fault`, started again after a
//! loss).

use crate::cmd::cluster::Spawned;
use clasp_dataplane::cluster::control::{Controller, IntervalView, MigrationRecord, Move};
use clasp_dataplane::transport::PeerId;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `inner`, done as soon as `stop` is set.
pub struct Interruptible<'a> {
    pub inner: &'a mut dyn Controller,
    pub stop: Arc<AtomicBool>,
    /// The worker processes the run started (none for a cluster file's).
    pub workers: &'a mut Spawned,
}

impl Controller for Interruptible<'_> {
    fn rate_per_s(&mut self, t_s: f64) -> Option<f64> {
        self.inner.rate_per_s(t_s)
    }

    fn done(&mut self, t_s: f64, admitted: u64) -> bool {
        self.stop.load(Ordering::Acquire) || self.inner.done(t_s, admitted)
    }

    fn poll(&mut self, t_s: f64, admitted: u64) -> Option<Move> {
        // No new moves once stopping: the drain only waits for one already under way.
        if self.stop.load(Ordering::Acquire) {
            return None;
        }
        self.inner.poll(t_s, admitted)
    }

    fn on_interval(&mut self, view: &IntervalView) -> Option<Move> {
        let next = self.inner.on_interval(view);
        next.filter(|_| !self.stop.load(Ordering::Acquire))
    }

    fn on_resumed(&mut self, t_s: f64, admitted: u64) {
        self.inner.on_resumed(t_s, admitted);
    }

    fn on_migrated(&mut self, record: &MigrationRecord) {
        self.inner.on_migrated(record);
    }

    fn on_listening(&mut self, addr: std::net::SocketAddr) {
        self.inner.on_listening(addr);
    }

    fn on_joined(&mut self, worker: usize, workers: usize) {
        self.inner.on_joined(worker, workers);
    }

    fn on_left(&mut self, worker: usize, workers: usize) {
        self.inner.on_left(worker, workers);
    }

    fn exited(&mut self, among: &[PeerId]) -> Option<(PeerId, String)> {
        self.workers.exited(among)
    }

    fn kill_worker(&mut self, peer: PeerId) -> Result<(), String> {
        self.workers.kill(peer).map_err(|e| format!("{e:#}"))
    }

    fn stop_worker(&mut self, peer: PeerId) -> Result<(), String> {
        self.workers.stop(peer).map_err(|e| format!("{e:#}"))
    }

    fn replace_workers(&mut self, lost: &[PeerId]) -> Result<(), String> {
        if !self.workers.started_any() {
            // A cluster file's worker: its supervisor restarts it; the new job waits for it.
            return Ok(());
        }
        self.workers.restart(lost).map_err(|e| format!("{e:#}"))
    }

    fn on_recovered(&mut self, t_s: f64, cut_s: Option<f64>) {
        self.inner.on_recovered(t_s, cut_s);
    }
}
