//! The migration driver: starting the moves a controller asks for (plans on the control
//! channel, then the ingress's markers on the data path, behind the roots routed by the old
//! table) and carrying out what the protocol's planner asks until the move completes.

use super::{Driver, DriverError};
use crate::clock::monotonic_ns as now_ns;
use crate::cluster::control::{Controller, MigrationRecord, Move, active_workers};
use crate::message::{Message, Plans, Report, encode};
use crate::migrate::control_frame;
use crate::request::INGRESS_SLOT;
use crate::transport::PeerId;
use clasp_protocol::Slot;
use clasp_protocol::assignment::Assignment;
use clasp_protocol::planner::{Planner, PlannerAction};
use std::time::{Duration, Instant};

/// Tracked roots in flight, at most, from a move's decision until its migration completes
/// (when `max_in_flight` is larger).
///
/// Why narrower then: the ingress's markers, which every old owner of a source key group
/// waits for before it seals, go out behind every root already admitted, and so do the
/// workers' markers behind the chained requests those roots emit. At the default bound of
/// 4 096 roots a capped worker needs tens of ms to reach them; meanwhile the requests of the
/// key groups that move are held. A move therefore waits (at most [`NARROWING_MAX`]) until the
/// roots in flight fall to this bound, and the bound holds until the move completes.
pub(super) const MIGRATION_IN_FLIGHT: u64 = 256;
/// The longest a move waits for the roots in flight to fall to [`MIGRATION_IN_FLIGHT`]; then
/// it starts regardless.
const NARROWING_MAX: Duration = Duration::from_millis(200);

/// The driver's migrations: the protocol's planner, the one in progress, and those done.
pub(super) struct Migrations {
    pub(super) planner: Planner,
    pub(super) in_flight: Option<InFlight>,
    pub(super) migrations: Vec<MigrationRecord>,
    /// Completed migrations the controller has not been told about.
    pub(super) finished: Vec<MigrationRecord>,
    /// A move waiting for the roots in flight to fall to [`MIGRATION_IN_FLIGHT`], and since
    /// when (a newer move replaces it and keeps the time).
    pub(super) narrowing: Option<(Move, Instant)>,
    /// When the waiting move was announced for copying ahead.
    pub(super) ahead_since: Option<Instant>,
}

impl Migrations {
    pub(super) fn new(planner: Planner) -> Self {
        Migrations {
            planner,
            in_flight: None,
            migrations: Vec::new(),
            finished: Vec::new(),
            narrowing: None,
            ahead_since: None,
        }
    }
}

/// A migration in progress.
pub(super) struct InFlight {
    pub(super) record: MigrationRecord,
}

impl Driver<'_> {
    /// Carries out what the protocol's planner asks.
    pub(super) fn planner_action(&mut self, a: PlannerAction<()>) -> Result<(), DriverError> {
        match a {
            PlannerAction::Finished(r) => {
                let Some(f) = self.mig.in_flight.take() else {
                    return Ok(());
                };
                let mut rec = f.record;
                rec.planner_ms = r.planner_ns as f64 / 1e6;
                rec.worker_pause_ms = r.pause_ns_max as f64 / 1e6;
                rec.marker_wait_ms = r.marker_wait_ns_max as f64 / 1e6;
                rec.exported = r.exported;
                rec.forwarded = r.forwarded;
                rec.held = r.held;
                rec.gated = r.gated;
                rec.admitted_during = r.admitted_during;
                rec.key_groups_moved = r.key_groups_moved;
                self.last_progress = Instant::now();
                self.mig.migrations.push(rec.clone());
                self.mig.finished.push(rec);
                Ok(())
            }
            PlannerAction::Failed(f) => {
                let slots = |v: &[Slot]| {
                    v.iter()
                        .map(|s| {
                            format!(
                                "slot {s} (worker {})",
                                self.slots.worker_of(*s).unwrap_or(u32::MAX)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                Err(DriverError::MigrationTimedOut(format!(
                    "{f}; silent: [{}]; not completed: [{}]",
                    slots(&f.silent),
                    slots(&f.not_completed)
                )))
            }
            PlannerAction::SendPlan { .. } | PlannerAction::SendRequest { .. } => Ok(()),
            PlannerAction::SendMarker { to, epoch } => {
                let mut f = Vec::new();
                control_frame(&Message::Marker, epoch, INGRESS_SLOT, to.0 as u16, &mut f)
                    .map_err(|e| DriverError::Migration(format!("a marker: {e}")))?;
                let w = self.slots.worker_of(to).ok_or_else(|| {
                    DriverError::Migration(format!("a marker for slot {to}, which is no worker's"))
                })?;
                self.append(w, &f)
            }
        }
    }

    /// Appends a data frame for worker `w`, waiting for credit.
    pub(super) fn append(&mut self, w: PeerId, frame: &[u8]) -> Result<(), DriverError> {
        loop {
            match self.t.try_append(w, frame) {
                Ok(true) => break,
                Ok(false) => self.turn(super::CREDIT_WAIT_TURN)?,
                Err(e) => return Err(DriverError::transport(format!("to worker {w}"), e)),
            }
        }
        *self.sent.entry(w).or_default() += 1;
        Ok(())
    }

    /// Starts a move: plans to every worker (on the control channel), then the ingress's
    /// markers (on the data path, behind the roots routed by the old table).
    pub(super) fn start_move(&mut self, m: Move, ops: usize) -> Result<(), DriverError> {
        self.slots
            .check(&m.routing, ops)
            .map_err(|e| DriverError::Migration(format!("a move ({}): {e}", m.reason)))?;
        let before = active_workers(self.mig.planner.routing(), &self.slots).len();
        let after = active_workers(&m.routing, &self.slots).len();
        let actions = self
            .mig
            .planner
            .start_migration::<()>(now_ns(), m.routing, self.slots.len())
            .map_err(|e| DriverError::Migration(format!("cannot migrate: {e}")))?;
        let epoch = self.mig.planner.epoch();
        self.mig.in_flight = Some(InFlight {
            record: MigrationRecord {
                epoch: epoch.0,
                t_s: self.meter.t0.elapsed().as_secs_f64(),
                reason: m.reason,
                workers_before: before,
                workers_after: after,
                ..MigrationRecord::default()
            },
        });
        self.meter.interval_migrating = true;
        let mut plans: Vec<Vec<(Slot, Assignment)>> = vec![Vec::new(); self.slots.workers.len()];
        let mut rest = Vec::new();
        for a in actions {
            match a {
                PlannerAction::SendPlan { to, assignment } => {
                    plans[self.slots.worker_index(to)].push((to, assignment))
                }
                other => rest.push(other),
            }
        }
        let routing = self.mig.planner.routing().clone();
        let mut reserved = Vec::new();
        for (i, parts) in plans.iter().enumerate() {
            let id = self.slots.workers[i];
            if !self.ids.contains(&id) {
                // Not joined: it hosts nothing under either table (a move onto it waits for
                // the join), so its part is empty and the driver completes it.
                reserved.extend(parts.iter().map(|(s, _)| *s));
                continue;
            }
            let refs: Vec<(Slot, &Assignment)> = parts.iter().map(|(s, a)| (*s, a)).collect();
            let plans = Message::Plans(Box::new(Plans::new(&routing, &refs)));
            let body = encode(&plans).map_err(|e| DriverError::Migration(format!("plans: {e}")))?;
            if body.len() > crate::transport::wire::MAX_CONTROL_BODY_BYTES {
                return Err(DriverError::Migration(format!(
                    "the plan for worker {id} is {} bytes, over the control limit (an app with \
                     this many operators cannot migrate yet)",
                    body.len()
                )));
            }
            self.send_control(id, &body, "plan to worker")?;
        }
        for a in rest {
            self.planner_action(a)?;
        }
        for slot in reserved {
            let done = Report {
                slot: slot.0,
                epoch: epoch.0,
                ..Report::default()
            };
            for a in self.mig.planner.on_completed::<()>(now_ns(), done.into()) {
                self.planner_action(a)?;
            }
        }
        self.t.flush_now();
        tracing::trace!(epoch = epoch.0, "plans sent");
        self.account_active();
        self.meter.active = after.max(before);
        Ok(())
    }

    /// Between admissions: completed migrations and intervals reach the controller, whose
    /// moves start here.
    pub(super) fn maintain(
        &mut self,
        ctl: &mut dyn Controller,
        admitted: u64,
        ops: usize,
    ) -> Result<(), DriverError> {
        self.advance_checkpoint(ctl);
        for rec in std::mem::take(&mut self.mig.finished) {
            self.account_active();
            self.meter.active = rec.workers_after;
            ctl.on_migrated(&rec);
        }
        let mut mv = None;
        if !self.cfg.interval.is_zero() && self.meter.interval_start.elapsed() >= self.cfg.interval
        {
            let view = self.close_interval(admitted);
            mv = ctl.on_interval(&view);
            self.meter.intervals.push(view);
        }
        self.advance_joins(ctl)?;
        self.advance_leaves(ctl)?;
        if self.mig.in_flight.is_none() {
            // A controller's own moves (`poll`: chaos, scripted) are asked for only when none
            // waits for the roots to narrow, so each one is carried out; an interval's decision
            // above may still replace a waiting one (the newer view of the load wins).
            if mv.is_none() && self.mig.narrowing.is_none() {
                mv = ctl.poll(self.meter.t0.elapsed().as_secs_f64(), admitted);
            }
            if let Some(m) = self.move_to_start(mv) {
                let since = self.mig.narrowing.take().map_or_else(Instant::now, |n| n.1);
                self.copy_ahead(&m.routing)?;
                self.mig.narrowing = Some((m, since));
            }
            if let Some((m, since)) = self.mig.narrowing.take() {
                let copied =
                    (self.mig.ahead_since).is_none_or(|t| t.elapsed() >= self.cfg.copy_ahead);
                if (self.in_flight_roots() <= self.migration_in_flight() && copied)
                    || since.elapsed() >= NARROWING_MAX
                {
                    self.mig.ahead_since = None;
                    let narrowing_ms = since.elapsed().as_secs_f64() * 1e3;
                    self.start_move(m, ops)?;
                    if let Some(f) = self.mig.in_flight.as_mut() {
                        f.record.narrowing_ms = narrowing_ms;
                        // A testing fault for this phase strikes now, with the plans out: a
                        // move can complete between two of admission's checks.
                        self.inject(super::Phase::Migration, ctl);
                    }
                } else {
                    self.mig.narrowing = Some((m, since));
                }
            }
        }
        Ok(())
    }

    /// Announces a move to `routing` to every worker, which copies the key groups it moves
    /// ahead (unless copying ahead is off).
    fn copy_ahead(&mut self, routing: &clasp_protocol::RoutingTable) -> Result<(), DriverError> {
        if self.cfg.copy_ahead.is_zero() {
            return Ok(());
        }
        let msg = Message::CopyAhead {
            routing: routing.rows().map(crate::message::RoutingRow::of).collect(),
        };
        let body = encode(&msg).map_err(|e| DriverError::Migration(format!("copy ahead: {e}")))?;
        if body.len() > crate::transport::wire::MAX_CONTROL_BODY_BYTES {
            // Too large to announce (as a plan would be): the move carries its state whole.
            return Ok(());
        }
        for id in self.ids.clone() {
            self.send_control(id, &body, "copy-ahead to worker")?;
        }
        self.t.flush_now();
        self.mig.ahead_since = Some(Instant::now());
        Ok(())
    }

    /// A move is migrating, or waiting for the roots in flight to narrow (an interval that saw
    /// either counts as migrating: admission is narrowed).
    pub(super) fn migrating(&self) -> bool {
        self.mig.in_flight.is_some() || self.mig.narrowing.is_some()
    }

    /// Tracked roots admitted and not completed.
    pub(super) fn in_flight_roots(&self) -> u64 {
        self.tracked
            .saturating_sub(self.rx.ledger.completed_inputs())
    }

    /// The bound on tracked roots in flight while a move waits or migrates.
    fn migration_in_flight(&self) -> u64 {
        MIGRATION_IN_FLIGHT.min(self.cfg.max_in_flight.max(1))
    }

    /// The bound on tracked roots in flight now: narrower from a move's decision until its
    /// migration completes (see [`MIGRATION_IN_FLIGHT`]).
    pub(super) fn in_flight_bound(&self) -> u64 {
        if self.migrating() {
            self.migration_in_flight()
        } else {
            self.cfg.max_in_flight.max(1)
        }
    }
}
