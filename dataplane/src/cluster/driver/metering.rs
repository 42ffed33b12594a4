//! Interval metering: the workers' cumulative counters turned into the per-interval view a
//! controller sees, and the run's worker-seconds.

use super::Driver;
use crate::cluster::control::{IntervalView, WorkerInterval, active_workers};
use crate::cluster::{Counters, DRIVER_ID};
use crate::runtime::ledger::Latencies;
use crate::transport::PeerId;
use std::time::Instant;

/// What the driver meters, per interval and over the run.
pub(super) struct Metering {
    /// Latest counters per worker index, and those at the previous interval.
    pub(super) counters: Vec<Option<Counters>>,
    pub(super) prev_counters: Vec<Option<Counters>>,
    /// Each worker's figures of the last interval.
    pub(super) last_worker_intervals: Vec<WorkerInterval>,
    pub(super) intervals: Vec<IntervalView>,
    /// Start of the run (first admission), the current interval, and its admissions.
    pub(super) t0: Instant,
    pub(super) interval_start: Instant,
    pub(super) interval_admitted: u64,
    pub(super) interval_completed: u64,
    pub(super) interval_migrating: bool,
    /// Records admitted to each worker by the end of the previous interval.
    pub(super) admitted_to_before: std::collections::BTreeMap<PeerId, u64>,
    /// Records due by the rate and not admitted.
    pub(super) backlog: u64,
    /// How long after it fell due by the rate each record was admitted (ns): the wait at the
    /// ingress that a root's latency, which starts at its admission, leaves out.
    ///
    /// Why apart from the latency: that wait is the load generator's as much as clasp's — the
    /// driver admits paced records a batch at a time (up to 1 ms of a batch's wait by design), the
    /// in-flight bound holds records back while a migration runs, and a driver that is scheduled
    /// late on a busy host admits late. Counted into the latency, it would blur what the data plane
    /// itself takes; left out unreported, it would hide a stall (coordinated omission). Runs at no
    /// rate admit as fast as the cluster takes records and record nothing here.
    pub(super) admission_delay: Latencies,
    /// The rate offered now (`None`: unthrottled).
    pub(super) offered: Option<f64>,
    /// Workers owning key groups now, the worker-seconds so far, and since when.
    pub(super) active: usize,
    pub(super) worker_seconds: f64,
    pub(super) active_since: Instant,
}

impl Metering {
    /// Nothing metered yet, for `workers` workers of which `active` own key groups.
    pub(super) fn new(workers: usize, active: usize) -> Self {
        let now = Instant::now();
        Metering {
            counters: vec![None; workers],
            prev_counters: vec![None; workers],
            last_worker_intervals: Vec::new(),
            intervals: Vec::new(),
            t0: now,
            interval_start: now,
            interval_admitted: 0,
            interval_completed: 0,
            interval_migrating: false,
            admitted_to_before: Default::default(),
            backlog: 0,
            admission_delay: Latencies::default(),
            offered: None,
            active,
            worker_seconds: 0.0,
            active_since: now,
        }
    }

    /// Starts the run's clock (the first admission).
    pub(super) fn start(&mut self) {
        self.t0 = Instant::now();
        self.interval_start = self.t0;
        self.active_since = self.t0;
    }
}

impl Driver<'_> {
    /// Adds the worker-seconds of the active workers since the last call.
    pub(super) fn account_active(&mut self) {
        let now = Instant::now();
        self.meter.worker_seconds += self.meter.active as f64
            * now
                .saturating_duration_since(self.meter.active_since)
                .as_secs_f64();
        self.meter.active_since = now;
    }

    /// Ends the current interval.
    pub(super) fn close_interval(&mut self, admitted: u64) -> IntervalView {
        let now = Instant::now();
        let dt = now
            .saturating_duration_since(self.meter.interval_start)
            .as_secs_f64()
            .max(1e-9);
        let completed = self.rx.ledger.completed_inputs() * self.cfg.sample_every.max(1);
        // One per slot worker, joined or not (a reserved worker's figures stay zero until it
        // joins and reports).
        let mut workers = Vec::with_capacity(self.slots.workers.len());
        for i in 0..self.slots.workers.len() {
            let (Some(c), p) = (&self.meter.counters[i], &self.meter.prev_counters[i]) else {
                workers.push(WorkerInterval {
                    index: i,
                    worker: self.slots.workers[i],
                    ..WorkerInterval::default()
                });
                continue;
            };
            // No new counters since the last interval (the worker's timer and ours drift):
            // carry its last figures forward rather than report a worker that did nothing.
            if p.as_ref().is_some_and(|p| p.t_ns == c.t_ns)
                && let Some(last) = self.meter.last_worker_intervals.get(i)
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
                worker: self.slots.workers[i],
                exec_us: exec_ns
                    .iter()
                    .zip(&processed)
                    .map(|(e, n)| if *n > 0.0 { e / n / 1000.0 } else { 0.0 })
                    .collect(),
                processed_per_s: processed,
                edges_local_per_s: d(&c.edges_local, &p.edges_local),
                edges_remote_per_s: d(&c.edges_remote, &p.edges_remote),
                busy_us_per_s: c.busy_ns.saturating_sub(p.busy_ns) as f64 / wdt / 1000.0,
                cpu_us_per_s: cpu_us_per_s(c, p, wdt),
                queued_bytes: c.queued_bytes,
                destinations,
                sleeps_per_s: c.sleeps.saturating_sub(p.sleeps) as f64 / wdt,
                sleep_cpu_us_per_s: c.sleep_cpu_ns.saturating_sub(p.sleep_cpu_ns) as f64
                    / wdt
                    / 1000.0,
                batches_per_s: c.batches.saturating_sub(p.batches) as f64 / wdt,
                exec_cpu_us_per_s: exec_cpu_us_per_s(c, p, wdt),
                exec_sleep_cpu_us_per_s: c.exec_sleep_cpu_ns.saturating_sub(p.exec_sleep_cpu_ns)
                    as f64
                    / wdt
                    / 1000.0,
                exec_sleeps_per_s: c.exec_sleeps.saturating_sub(p.exec_sleeps) as f64 / wdt,
                throttled_periods: c
                    .throttled_periods
                    .zip(p.throttled_periods)
                    .map(|(now, before)| now.saturating_sub(before)),
                // Set from every worker's counters once all are in (`count_received`).
                remote_received_per_s: 0.0,
                roots_per_s: 0.0,
                totals: c.clone(),
            });
        }
        self.count_received(&mut workers);
        self.meter.last_worker_intervals = workers.clone();
        self.meter.prev_counters = self.meter.counters.clone();
        let view = IntervalView {
            t_s: self.meter.t0.elapsed().as_secs_f64(),
            dt_s: dt,
            input_per_s: admitted.saturating_sub(self.meter.interval_admitted) as f64 / dt,
            offered_per_s: self.meter.offered,
            throughput_per_s: completed.saturating_sub(self.meter.interval_completed) as f64 / dt,
            backlog: self.meter.backlog,
            latency: self.rx.ledger.take_interval(),
            admission_delay: self.meter.admission_delay.take_interval(),
            workers,
            migrating: self.meter.interval_migrating || self.migrating(),
            active_workers: active_workers(self.mig.planner.routing(), &self.slots).len(),
        };
        self.meter.interval_start = now;
        self.meter.interval_admitted = admitted;
        self.meter.interval_completed = completed;
        self.meter.interval_migrating = self.migrating();
        view
    }
}

impl Driver<'_> {
    /// Sets each worker's remote requests received per second from the others' counts of
    /// what they sent it this interval, and the input records this driver admitted to it. A
    /// worker's CPU includes its receiving side, so the busy-time estimator needs both.
    fn count_received(&mut self, workers: &mut [WorkerInterval]) {
        let interval_s = self.meter.interval_start.elapsed().as_secs_f64().max(1e-9);
        for (&peer, &n) in &self.sent {
            let before = self
                .meter
                .admitted_to_before
                .get(&peer)
                .copied()
                .unwrap_or(0);
            if let Some(j) = self.slots.workers.iter().position(|&w| w == peer)
                && let Some(w) = workers.get_mut(j)
            {
                w.roots_per_s = n.saturating_sub(before) as f64 / interval_s;
            }
        }
        self.meter.admitted_to_before = self.sent.clone();
        let mut received = vec![0.0; workers.len()];
        for (c, p) in self.meter.counters.iter().zip(&self.meter.prev_counters) {
            let Some(c) = c else { continue };
            let zero = Counters::default();
            let p = p.as_ref().unwrap_or(&zero);
            if p.t_ns == c.t_ns && p.t_ns != 0 {
                continue;
            }
            let dt_s = if p.t_ns == 0 {
                self.meter.interval_start.elapsed().as_secs_f64()
            } else {
                c.t_ns.saturating_sub(p.t_ns) as f64 / 1e9
            }
            .max(1e-9);
            for &(peer, n) in &c.sent_to {
                let before = p.sent_to.iter().find(|s| s.0 == peer).map_or(0, |s| s.1);
                if let Some(j) = self.slots.workers.iter().position(|&w| w == peer) {
                    received[j] += n.saturating_sub(before) as f64 / dt_s;
                }
            }
        }
        for (w, r) in workers.iter_mut().zip(received) {
            w.remote_received_per_s = r;
        }
    }
}

/// Its executor threads' CPU µs per second between two counters, their idle spinning left out;
/// `None` when either reading is missing.
fn exec_cpu_us_per_s(c: &Counters, p: &Counters, wdt_s: f64) -> Option<f64> {
    let (now, before) = (c.exec_cpu_ns?, p.exec_cpu_ns?);
    let spin_ns = c.exec_idle_spin_ns.saturating_sub(p.exec_idle_spin_ns);
    let work_ns = now.saturating_sub(before).saturating_sub(spin_ns);
    Some(work_ns as f64 / wdt_s / 1000.0)
}

/// A worker's CPU µs per second between two counters, its idle spinning left out; `None` when
/// either reading is missing (the first interval differences against zero: not an interval).
fn cpu_us_per_s(c: &Counters, p: &Counters, wdt_s: f64) -> Option<f64> {
    let (now, before) = (c.cpu_ns?, p.cpu_ns?);
    let spin_ns = c.idle_spin_ns.saturating_sub(p.idle_spin_ns);
    let work_ns = now.saturating_sub(before).saturating_sub(spin_ns);
    Some(work_ns as f64 / wdt_s / 1000.0)
}
