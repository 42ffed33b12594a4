//! The driver's side of live migration and of the planner's view: carrying out the protocol
//! planner's actions (plans on the control channel, the ingress's markers on the data path),
//! starting the moves a controller asks for, and turning the workers' counters into the
//! per-interval view the controller sees (with the run's worker-seconds).

use super::*;

impl Driver<'_> {
    /// Carries out what the protocol's planner asks.
    pub(super) fn planner_action(&mut self, a: PlannerAction<()>) -> Result<(), String> {
        match a {
            PlannerAction::Finished(r) => {
                let Some(f) = self.in_flight.take() else {
                    return Ok(());
                };
                let mut rec = f.record;
                rec.planner_ms = r.planner_ns as f64 / 1e6;
                rec.worker_pause_ms = r.pause_ns_max as f64 / 1e6;
                rec.exported = r.exported;
                rec.forwarded = r.forwarded;
                rec.held = r.held;
                rec.gated = r.gated;
                rec.admitted_during = r.admitted_during;
                rec.key_groups_moved = r.key_groups_moved;
                self.last_progress = Instant::now();
                self.migrations.push(rec.clone());
                self.finished.push(rec);
                Ok(())
            }
            PlannerAction::Failed(f) => {
                let slots = |v: &[usize]| {
                    v.iter()
                        .map(|&s| {
                            format!(
                                "slot {s} (worker {})",
                                self.slots.worker_of(s).unwrap_or(u32::MAX)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                Err(format!(
                    "{f}; silent: [{}]; not completed: [{}]",
                    slots(&f.silent),
                    slots(&f.not_completed)
                ))
            }
            PlannerAction::SendPlan { .. } | PlannerAction::SendRequest { .. } => Ok(()),
            PlannerAction::SendMarker { to, epoch } => {
                let mut f = Vec::new();
                control_frame(&Message::Marker, epoch, INGRESS_SLOT, to as u16, &mut f)
                    .map_err(|e| format!("a marker: {e}"))?;
                let w = self.slots.worker_of(to).ok_or("a marker for no slot")?;
                self.append(w, &f)
            }
        }
    }

    /// Appends a data frame for worker `w`, waiting for credit.
    pub(super) fn append(&mut self, w: PeerId, frame: &[u8]) -> Result<(), String> {
        loop {
            match self.t.try_append(w, frame) {
                Ok(true) => break,
                Ok(false) => self.turn(Duration::from_micros(200))?,
                Err(e) => return Err(format!("to worker {w}: {e}")),
            }
        }
        *self.sent.entry(w).or_default() += 1;
        Ok(())
    }

    /// Starts a move: plans to every worker (on the control channel), then the ingress's
    /// markers (on the data path, behind the roots routed by the old table).
    pub(super) fn start_move(&mut self, m: Move, ops: usize) -> Result<(), String> {
        self.slots
            .check(&m.routing, ops)
            .map_err(|e| format!("a move ({}): {e}", m.reason))?;
        let before = active_workers(self.planner.routing(), &self.slots).len();
        let after = active_workers(&m.routing, &self.slots).len();
        let actions = self
            .planner
            .start_migration::<()>(now_ns(), m.routing, self.slots.len())
            .map_err(|e| format!("cannot migrate: {e}"))?;
        let epoch = self.planner.epoch();
        self.in_flight = Some(InFlight {
            record: MigrationRecord {
                epoch,
                t_s: self.t0.elapsed().as_secs_f64(),
                reason: m.reason,
                workers_before: before,
                workers_after: after,
                ..MigrationRecord::default()
            },
        });
        self.interval_migrating = true;
        let mut plans: Vec<Vec<(usize, Assignment)>> = vec![Vec::new(); self.ids.len()];
        let mut rest = Vec::new();
        for a in actions {
            match a {
                PlannerAction::SendPlan { to, assignment } => {
                    plans[self.slots.worker_index(to)].push((to, assignment))
                }
                other => rest.push(other),
            }
        }
        let routing = self.planner.routing().clone();
        for (i, parts) in plans.iter().enumerate() {
            let refs: Vec<(usize, &Assignment)> = parts.iter().map(|(s, a)| (*s, a)).collect();
            let plans = Message::Plans(Box::new(Plans::new(epoch, &routing, &refs)));
            let body = encode(&plans).map_err(|e| format!("plans: {e}"))?;
            if body.len() > crate::transport::wire::MAX_CONTROL_BODY_BYTES {
                return Err(format!(
                    "the plan for worker {} is {} bytes, over the control limit (an app with \
                     this many operators cannot migrate yet)",
                    self.ids[i],
                    body.len()
                ));
            }
            let p = self.ids[i];
            loop {
                match self.t.send_control(p, CONTROL_KIND, &body) {
                    Ok(true) => break,
                    Ok(false) => self.turn(Duration::from_micros(200))?,
                    Err(e) => return Err(format!("plan to worker {p}: {e}")),
                }
            }
        }
        for a in rest {
            self.planner_action(a)?;
        }
        self.t.flush_now();
        self.account_active();
        self.active = after.max(before);
        Ok(())
    }

    /// Adds the worker-seconds of the active workers since the last call.
    pub(super) fn account_active(&mut self) {
        let now = Instant::now();
        self.worker_seconds += self.active as f64
            * now
                .saturating_duration_since(self.active_since)
                .as_secs_f64();
        self.active_since = now;
    }

    /// Between admissions: completed migrations and intervals reach the controller, whose
    /// moves start here.
    pub(super) fn maintain(
        &mut self,
        ctl: &mut dyn Controller,
        admitted: u64,
        ops: usize,
    ) -> Result<(), String> {
        for rec in std::mem::take(&mut self.finished) {
            self.account_active();
            self.active = rec.workers_after;
            ctl.on_migrated(&rec);
        }
        let mut mv = None;
        if !self.cfg.interval.is_zero() && self.interval_start.elapsed() >= self.cfg.interval {
            let view = self.close_interval(admitted);
            mv = ctl.on_interval(&view);
            self.intervals.push(view);
        }
        if self.in_flight.is_none() {
            if mv.is_none() {
                mv = ctl.poll(self.t0.elapsed().as_secs_f64(), admitted);
            }
            if let Some(m) = mv {
                self.start_move(m, ops)?;
            }
        }
        Ok(())
    }

    /// Ends the current interval.
    pub(super) fn close_interval(&mut self, admitted: u64) -> IntervalView {
        let now = Instant::now();
        let dt = now
            .saturating_duration_since(self.interval_start)
            .as_secs_f64()
            .max(1e-9);
        let completed = self.rx.ledger.completed_inputs() * self.cfg.sample_every.max(1);
        let mut workers = Vec::with_capacity(self.ids.len());
        for i in 0..self.ids.len() {
            let (Some(c), p) = (&self.counters[i], &self.prev_counters[i]) else {
                workers.push(WorkerInterval {
                    index: i,
                    ..WorkerInterval::default()
                });
                continue;
            };
            // No new counters since the last interval (the worker's timer and ours drift):
            // carry its last figures forward rather than report a worker that did nothing.
            if p.as_ref().is_some_and(|p| p.t_ns == c.t_ns)
                && let Some(last) = self.last_worker_intervals.get(i)
            {
                workers.push(last.clone());
                continue;
            }
            let zero = Counters::default();
            let p = p.as_ref().unwrap_or(&zero);
            let wdt = if p.t_ns == 0 {
                dt
            } else {
                (c.t_ns.saturating_sub(p.t_ns) as f64 / 1e9).max(1e-9)
            };
            let d = |a: &[u64], b: &[u64]| -> Vec<f64> {
                a.iter()
                    .enumerate()
                    .map(|(k, &x)| x.saturating_sub(b.get(k).copied().unwrap_or(0)) as f64 / wdt)
                    .collect()
            };
            let processed = d(&c.processed, &p.processed);
            let exec_ns = d(&c.exec_ns, &p.exec_ns);
            let sent_before =
                |peer: PeerId| p.sent_to.iter().find(|s| s.0 == peer).map_or(0, |s| s.1);
            let destinations = c
                .sent_to
                .iter()
                .filter(|&&(peer, n)| peer != DRIVER_ID && n > sent_before(peer))
                .count();
            workers.push(WorkerInterval {
                index: i,
                exec_us: exec_ns
                    .iter()
                    .zip(&processed)
                    .map(|(e, n)| if *n > 0.0 { e / n / 1000.0 } else { 0.0 })
                    .collect(),
                processed_per_s: processed,
                edges_local_per_s: d(&c.edges_local, &p.edges_local),
                edges_remote_per_s: d(&c.edges_remote, &p.edges_remote),
                busy_us_per_s: c.busy_ns.saturating_sub(p.busy_ns) as f64 / wdt / 1000.0,
                queued_bytes: c.queued_bytes,
                destinations,
            });
        }
        self.last_worker_intervals = workers.clone();
        self.prev_counters = self.counters.clone();
        let view = IntervalView {
            t_s: self.t0.elapsed().as_secs_f64(),
            dt_s: dt,
            input_per_s: admitted.saturating_sub(self.interval_admitted) as f64 / dt,
            offered_per_s: self.offered,
            throughput_per_s: completed.saturating_sub(self.interval_completed) as f64 / dt,
            backlog: self.backlog,
            latency: self.rx.ledger.take_interval(),
            workers,
            migrating: self.interval_migrating || self.in_flight.is_some(),
            active_workers: active_workers(self.planner.routing(), &self.slots).len(),
        };
        self.interval_start = now;
        self.interval_admitted = admitted;
        self.interval_completed = completed;
        self.interval_migrating = self.in_flight.is_some();
        view
    }
}
