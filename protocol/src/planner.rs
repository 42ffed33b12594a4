//! The planner's side: it runs the ingress, plans and broadcasts migrations, and waits for
//! completions — with a timeout, so that a worker that dies mid-migration turns into a report
//! naming it instead of a planner waiting forever.
//!
//! The ingress is a participant like any upstream sender: it routes each root by the planner's
//! current table and tags it with the current epoch; when the planner broadcasts a plan, the
//! ingress switches to the new table at once (it has no executions to drain) and sends its
//! end-of-epoch marker to the old owner of every moved key group of a source operator.
//!
//! Failure today: after [`PlannerConfig::timeout_ns`] the planner gives up on the migration and
//! reports which workers did not complete, which of them went silent (no completion or progress
//! report for [`PlannerConfig::silent_ns`]: the failed ones) and what each live one still waits
//! for. It does not recover: the failed worker's key groups — its state, its queued requests and
//! whatever was in flight to it — are lost, the survivors stay paused or keep holding the key
//! groups they were receiving from it, and the planner refuses further migrations. Recovering
//! the state (from a checkpoint, or by replaying the input) is later work.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::assignment::{Assignment, assignments, ingress_markers};
use crate::ids::{Epoch, KeyGroup, Slot};
use crate::message::Req;
use crate::plan;
use crate::routing::RoutingTable;
use crate::worker::{Waiting, WorkerReport};

/// How long the planner waits for every worker's completion before it reports a failure.
pub const MIGRATION_TIMEOUT_NS: u64 = 1_000_000_000;
/// A worker not heard from (completion or progress) for this long is reported as failed.
/// Several [`crate::worker::PROGRESS_INTERVAL_NS`] so that one slow report is not a failure.
pub const SILENT_NS: u64 = 20 * crate::worker::PROGRESS_INTERVAL_NS;

const _: () = assert!(SILENT_NS < MIGRATION_TIMEOUT_NS);

/// The planner's timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannerConfig {
    pub timeout_ns: u64,
    pub silent_ns: u64,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig {
            timeout_ns: MIGRATION_TIMEOUT_NS,
            silent_ns: SILENT_NS,
        }
    }
}

/// What the caller must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum PlannerAction<P> {
    /// Send a worker its part of the plan (on the control connection).
    SendPlan { to: Slot, assignment: Assignment },
    /// Send a root request from the ingress (on the ingress's data connection to `to`).
    SendRequest { to: Slot, req: Req<P> },
    /// Send the ingress's end-of-epoch marker (on the same data connection).
    SendMarker { to: Slot, epoch: Epoch },
    /// Every worker completed.
    Finished(MigrationReport),
    /// The migration timed out.
    Failed(MigrationFailure),
}

/// One migration's numbers (what `clasp run --json` prints per migration).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrationReport {
    pub epoch: Epoch,
    pub key_groups_moved: usize,
    /// Plan broadcast → last completion.
    pub planner_ns: u64,
    /// Queued requests exported with state.
    pub exported: u64,
    /// Old-epoch requests forwarded to new owners.
    pub forwarded: u64,
    /// New-epoch requests held until their key group's state and seal were in.
    pub held: u64,
    /// New-epoch requests for kept key groups held for upstream markers (the gate).
    pub gated: u64,
    /// Roots the ingress admitted while the migration was in progress.
    pub admitted_during: u64,
    /// Each slot's pause.
    pub pause_ns: Vec<(Slot, u64)>,
    /// The longest pause.
    pub pause_ns_max: u64,
    /// The longest wait from a slot's plan to its markers being in (it then sealed).
    pub marker_wait_ns_max: u64,
}

/// A migration that did not complete in time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationFailure {
    pub epoch: Epoch,
    pub waited_ns: u64,
    /// Slots whose completion is missing.
    pub not_completed: Vec<Slot>,
    /// Of those, the ones not heard from for `silent_ns`: the failed ones.
    pub silent: Vec<Slot>,
    /// What each live, incomplete slot last said it waits for.
    pub waiting: Vec<(Slot, Waiting)>,
}

impl fmt::Display for MigrationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "migration to epoch {} did not complete in {} ms: worker(s) {} silent (failed); \
             not completed: {}",
            self.epoch,
            self.waited_ns / 1_000_000,
            list(&self.silent),
            list(&self.not_completed)
        )?;
        for (w, waiting) in &self.waiting {
            write!(
                f,
                "; worker {w} waits for markers from {}, state or seal from {}",
                list(&waiting.markers_from),
                list(&waiting.state_or_seal_from)
            )?;
        }
        Ok(())
    }
}

/// `[a, b, c]` of the items' `Display`.
fn list<T: fmt::Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// Why a migration could not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlannerError {
    #[error("migration to epoch {0} is still in progress")]
    Busy(Epoch),
    #[error("an earlier migration failed; the cluster needs recovery")]
    Failed,
}

struct InFlight {
    epoch: Epoch,
    started_ns: u64,
    workers: usize,
    key_groups_moved: usize,
    admitted_at_start: u64,
    completed: BTreeMap<Slot, WorkerReport>,
    last_heard_ns: BTreeMap<Slot, u64>,
    waiting: BTreeMap<Slot, Waiting>,
}

/// The planner's protocol state: current table and epoch, the ingress, the migration in flight.
pub struct Planner {
    cfg: PlannerConfig,
    epoch: Epoch,
    routing: Arc<RoutingTable>,
    preds: Vec<Vec<usize>>,
    admitted: u64,
    in_flight: Option<InFlight>,
    failed: bool,
}

impl Planner {
    /// A planner at `routing`'s epoch; `preds[o]` lists operator o's predecessors.
    pub fn new(routing: RoutingTable, preds: Vec<Vec<usize>>, cfg: PlannerConfig) -> Self {
        Planner {
            cfg,
            epoch: routing.epoch(),
            routing: Arc::new(routing),
            preds,
            admitted: 0,
            in_flight: None,
            failed: false,
        }
    }

    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    pub fn routing(&self) -> &Arc<RoutingTable> {
        &self.routing
    }

    pub fn in_migration(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Roots admitted so far.
    pub fn admitted(&self) -> u64 {
        self.admitted
    }

    /// The ingress admits a root for `(operator, key_group)`: route it by the current table.
    ///
    /// # Panics
    /// If the operator or key group is outside the table (the caller's own admission).
    pub fn admit<P>(&mut self, operator: usize, key_group: KeyGroup, body: P) -> PlannerAction<P> {
        self.admitted += 1;
        PlannerAction::SendRequest {
            to: self.routing.owner(operator, key_group),
            req: Req {
                operator,
                key_group,
                epoch: self.epoch,
                from_moved: false,
                body,
            },
        }
    }

    /// Plans the move to `new` (whose epoch becomes the next one) on a cluster of `workers`
    /// slots and broadcasts it; the ingress switches to the new table now.
    pub fn start_migration<P>(
        &mut self,
        now_ns: u64,
        new: RoutingTable,
        workers: usize,
    ) -> Result<Vec<PlannerAction<P>>, PlannerError> {
        if self.failed {
            return Err(PlannerError::Failed);
        }
        if let Some(f) = &self.in_flight {
            return Err(PlannerError::Busy(f.epoch));
        }
        debug_assert!(self.in_flight.is_none() && !self.failed);
        let epoch = self.epoch.next();
        let new = new.with_epoch(epoch);
        let plan = plan::plan(&self.routing, &new, &self.preds);
        let new = Arc::new(new);
        let parts = assignments(&plan, &self.routing, &new, &self.preds, workers);
        let workers = parts.len();
        let mut out: Vec<PlannerAction<P>> = parts
            .into_iter()
            .enumerate()
            .map(|(to, assignment)| PlannerAction::SendPlan {
                to: Slot::at(to),
                assignment,
            })
            .collect();
        out.extend(
            ingress_markers(&plan)
                .into_iter()
                .map(|to| PlannerAction::SendMarker { to, epoch }),
        );
        self.epoch = epoch;
        self.routing = new;
        self.in_flight = Some(InFlight {
            epoch,
            started_ns: now_ns,
            workers,
            key_groups_moved: plan.key_groups_moved,
            admitted_at_start: self.admitted,
            completed: BTreeMap::new(),
            last_heard_ns: BTreeMap::new(),
            waiting: BTreeMap::new(),
        });
        Ok(out)
    }

    /// A worker's completion arrived.
    pub fn on_completed<P>(&mut self, now_ns: u64, report: WorkerReport) -> Vec<PlannerAction<P>> {
        let mut out = Vec::new();
        let Some(f) = self.in_flight.as_mut().filter(|f| f.epoch == report.epoch) else {
            return out;
        };
        f.last_heard_ns.insert(report.worker, now_ns);
        f.waiting.remove(&report.worker);
        f.completed.insert(report.worker, report);
        if f.completed.len() == f.workers {
            let f = self.in_flight.take().expect("in flight");
            let pause_ns: Vec<(Slot, u64)> = f
                .completed
                .values()
                .map(|r| (r.worker, r.pause_ns))
                .collect();
            out.push(PlannerAction::Finished(MigrationReport {
                epoch: f.epoch,
                key_groups_moved: f.key_groups_moved,
                planner_ns: now_ns - f.started_ns,
                exported: f.completed.values().map(|r| r.received_queued).sum(),
                forwarded: f.completed.values().map(|r| r.forwarded).sum(),
                held: f.completed.values().map(|r| r.held).sum(),
                gated: f.completed.values().map(|r| r.gated).sum(),
                admitted_during: self.admitted - f.admitted_at_start,
                pause_ns_max: pause_ns.iter().map(|p| p.1).max().unwrap_or(0),
                pause_ns,
                marker_wait_ns_max: f
                    .completed
                    .values()
                    .map(|r| r.marker_wait_ns)
                    .max()
                    .unwrap_or(0),
            }));
        }
        out
    }

    /// A worker's progress report arrived.
    pub fn on_progress(&mut self, now_ns: u64, worker: Slot, epoch: Epoch, waiting: Waiting) {
        if let Some(f) = self.in_flight.as_mut().filter(|f| f.epoch == epoch) {
            f.last_heard_ns.insert(worker, now_ns);
            f.waiting.insert(worker, waiting);
        }
    }

    /// Time passes: past the timeout, give up and say who failed.
    pub fn on_tick<P>(&mut self, now_ns: u64) -> Vec<PlannerAction<P>> {
        let mut out = Vec::new();
        let Some(f) = self.in_flight.as_ref() else {
            return out;
        };
        let waited_ns = now_ns - f.started_ns;
        if waited_ns < self.cfg.timeout_ns {
            return out;
        }
        let not_completed: Vec<Slot> = (0..f.workers)
            .map(Slot::at)
            .filter(|w| !f.completed.contains_key(w))
            .collect();
        let silent: BTreeSet<Slot> = not_completed
            .iter()
            .copied()
            .filter(|w| {
                f.last_heard_ns
                    .get(w)
                    .is_none_or(|&t| now_ns - t >= self.cfg.silent_ns)
            })
            .collect();
        let waiting = f
            .waiting
            .iter()
            .filter(|(w, _)| !silent.contains(w))
            .map(|(&w, x)| (w, x.clone()))
            .collect();
        out.push(PlannerAction::Failed(MigrationFailure {
            epoch: f.epoch,
            waited_ns,
            not_completed,
            silent: silent.into_iter().collect(),
            waiting,
        }));
        self.in_flight = None;
        self.failed = true;
        out
    }
}
