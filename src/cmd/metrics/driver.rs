//! The driver's metric families, updated once per metrics interval from what the planner sees:
//! the workers' cumulative counters (exported as totals, so a scraper's `rate()` is exact),
//! the input and throughput, the latency ledger's buckets, the estimates, and every decision
//! and migration.

use super::histogram::BulkHistogram;
use clasp_controlplane::autoscale::Estimates;
use clasp_dataplane::cluster::control::{IntervalView, MigrationRecord};
use clasp_dataplane::message::Counters;
use clasp_dataplane::runtime::ledger::LATENCY_BUCKET_BOUNDS_US;
use clasp_dataplane::transport::PeerId;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

type Labels = Vec<(&'static str, String)>;
type Count = Family<Labels, Counter>;
type Seconds = Family<Labels, Counter<f64, AtomicU64>>;
type Level = Family<Labels, Gauge<f64, AtomicU64>>;

/// Upper bounds (s) of the migration duration histograms: 1 ms to 10 s.
const MIGRATION_BOUNDS_S: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 10.0];

/// Every family the driver exports (names and help in `docs/metrics.md`).
pub struct DriverMetrics {
    operators: Vec<String>,
    /// The app's edges (from, to), in the order the workers count chained requests in.
    edges: Vec<(usize, usize)>,
    /// Each worker's counters at the last update (totals are exported as their increments).
    last: Vec<Option<Counters>>,
    processed: Count,
    exec: Seconds,
    chained: Count,
    cpu: Seconds,
    busy: Seconds,
    sleeps: Count,
    sleep_cpu: Seconds,
    frames_in: Count,
    queued_bytes: Level,
    rates: Level,
    backlog: Gauge,
    workers_active: Gauge,
    latency: BulkHistogram,
    admission_delay: BulkHistogram,
    costs: Level,
    capacity: Gauge<f64, AtomicU64>,
    decisions: Counter,
    migrations: Count,
    migration_planner: Histogram,
    migration_pause: Histogram,
}

impl DriverMetrics {
    /// The families for this app's operators and edges, registered in a fresh registry the
    /// endpoint serves.
    pub fn new(spec: &clasp_operators::AppSpec) -> (Self, Arc<Mutex<Registry>>) {
        let m = DriverMetrics {
            operators: spec.operators.iter().map(|o| o.name.clone()).collect(),
            edges: spec.edges.iter().map(|e| (e.from, e.to)).collect(),
            last: Vec::new(),
            processed: Count::default(),
            exec: Seconds::default(),
            chained: Count::default(),
            cpu: Seconds::default(),
            busy: Seconds::default(),
            sleeps: Count::default(),
            sleep_cpu: Seconds::default(),
            frames_in: Count::default(),
            queued_bytes: Level::default(),
            rates: Level::default(),
            backlog: Gauge::default(),
            workers_active: Gauge::default(),
            latency: BulkHistogram::new(LATENCY_BUCKET_BOUNDS_US.iter().map(|&us| us as f64 / 1e6)),
            admission_delay: BulkHistogram::new(
                LATENCY_BUCKET_BOUNDS_US.iter().map(|&us| us as f64 / 1e6),
            ),
            costs: Level::default(),
            capacity: Gauge::default(),
            decisions: Counter::default(),
            migrations: Count::default(),
            migration_planner: Histogram::new(MIGRATION_BOUNDS_S),
            migration_pause: Histogram::new(MIGRATION_BOUNDS_S),
        };
        let mut r = Registry::with_prefix("clasp");
        m.register(&mut r);
        (m, Arc::new(Mutex::new(r)))
    }

    fn register(&self, r: &mut Registry) {
        r.register(
            "operator_processed",
            "Requests an operator processed, summed over workers",
            self.processed.clone(),
        );
        r.register(
            "operator_exec_seconds",
            "CPU time an operator's requests ran (sampled and scaled)",
            self.exec.clone(),
        );
        r.register(
            "chained_requests",
            "Chained requests by edge, kind local (same worker) or remote",
            self.chained.clone(),
        );
        r.register(
            "worker_cpu_seconds",
            "A worker process's CPU time (its cgroup's when capped), idle spinning included",
            self.cpu.clone(),
        );
        r.register(
            "worker_executor_busy_seconds",
            "Time a worker's executors were busy, summed over executors",
            self.busy.clone(),
        );
        r.register(
            "worker_sleeps",
            "Times a thread of a worker went to sleep (voluntary context switches)",
            self.sleeps.clone(),
        );
        r.register(
            "worker_sleep_cpu_seconds",
            "CPU time a worker's threads spent going to sleep and waking up (in its CPU time)",
            self.sleep_cpu.clone(),
        );
        r.register(
            "worker_frames_in",
            "Frames a worker's executors read",
            self.frames_in.clone(),
        );
        r.register(
            "worker_queued_bytes",
            "Bytes waiting in a worker's inbound rings",
            self.queued_bytes.clone(),
        );
        r.register("rate_per_second", "Records per second over the last interval: input (admitted, the planner's lambda), offered, throughput (completed trees)", self.rates.clone());
        r.register(
            "backlog_records",
            "Records due by the rate pattern but not admitted yet",
            self.backlog.clone(),
        );
        r.register(
            "workers_active",
            "Workers owning at least one key group",
            self.workers_active.clone(),
        );
        r.register(
            "latency_seconds",
            "End-to-end latency of completed trees",
            self.latency.clone(),
        );
        r.register(
            "admission_delay_seconds",
            "How late records were admitted after falling due by the rate (not in the latency)",
            self.admission_delay.clone(),
        );
        r.register(
            "planner_cost_microseconds",
            "The planner's cost estimates: alpha, beta, gamma, and wake (busy-time, once learnt)",
            self.costs.clone(),
        );
        r.register(
            "planner_capacity_microseconds_per_second",
            "The per-worker capacity W-bar the planner plans with",
            self.capacity.clone(),
        );
        r.register(
            "planner_decisions",
            "Scaling decisions the planner made",
            self.decisions.clone(),
        );
        r.register(
            "migrations",
            "Completed migrations by reason (policy or chaos)",
            self.migrations.clone(),
        );
        r.register(
            "migration_planner_seconds",
            "A migration's duration: plan broadcast to every slot done",
            self.migration_planner.clone(),
        );
        r.register(
            "migration_pause_seconds",
            "A migration's longest executor pause",
            self.migration_pause.clone(),
        );
    }

    /// One metrics interval.
    pub fn on_interval(&mut self, v: &IntervalView, est: Option<&Estimates>) {
        if self.last.len() < v.workers.len() {
            self.last.resize(v.workers.len(), None);
        }
        for w in &v.workers {
            let before = self.last[w.index].take();
            self.add_worker(w.worker, &w.totals, before.as_ref());
            self.last[w.index] = Some(w.totals.clone());
        }
        let rate = |kind: &'static str| {
            self.rates
                .get_or_create(&vec![("kind", kind.to_owned())])
                .clone()
        };
        rate("input").set(v.input_per_s);
        rate("offered").set(v.offered_per_s.unwrap_or(f64::NAN));
        rate("throughput").set(v.throughput_per_s);
        self.backlog
            .set(i64::try_from(v.backlog).unwrap_or(i64::MAX));
        self.workers_active.set(v.active_workers as i64);
        self.latency.add(&v.latency.buckets, v.latency.sum_us / 1e6);
        let delay = &v.admission_delay;
        self.admission_delay.add(&delay.buckets, delay.sum_us / 1e6);
        if let Some(e) = est {
            let cost = |name: &'static str| {
                self.costs
                    .get_or_create(&vec![("cost", name.to_owned())])
                    .clone()
            };
            cost("alpha").set(e.alpha_us);
            cost("beta").set(e.beta_us);
            cost("gamma").set(e.gamma_us);
            if let Some(w) = e.wake_us {
                cost("wake").set(w);
            }
            self.capacity.set(e.w_bar_us);
        }
    }

    /// A worker's counters since `before` (its first report: everything so far).
    fn add_worker(&self, worker: PeerId, now: &Counters, before: Option<&Counters>) {
        let zero = Counters::default();
        let p = before.unwrap_or(&zero);
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let inc = |now: u64, then: u64| now.saturating_sub(then);
        for (o, name) in self.operators.iter().enumerate() {
            let op = vec![("operator", name.clone())];
            self.processed
                .get_or_create(&op)
                .inc_by(inc(at(&now.processed, o), at(&p.processed, o)));
            let ns = inc(at(&now.exec_ns, o), at(&p.exec_ns, o));
            self.exec.get_or_create(&op).inc_by(ns as f64 / 1e9);
        }
        for (i, &(from, to)) in self.edges.iter().enumerate() {
            for (kind, n, m) in [
                ("local", &now.edges_local, &p.edges_local),
                ("remote", &now.edges_remote, &p.edges_remote),
            ] {
                let d = inc(at(n, i), at(m, i));
                if d > 0 {
                    let edge = vec![
                        ("from", self.operators[from].clone()),
                        ("to", self.operators[to].clone()),
                        ("kind", kind.to_owned()),
                    ];
                    self.chained.get_or_create(&edge).inc_by(d);
                }
            }
        }
        let w = vec![("worker", worker.to_string())];
        if let (Some(c), Some(b)) = (now.cpu_ns, p.cpu_ns.or(Some(0))) {
            self.cpu.get_or_create(&w).inc_by(inc(c, b) as f64 / 1e9);
        }
        self.busy
            .get_or_create(&w)
            .inc_by(inc(now.busy_ns, p.busy_ns) as f64 / 1e9);
        self.sleeps
            .get_or_create(&w)
            .inc_by(inc(now.sleeps, p.sleeps));
        self.sleep_cpu
            .get_or_create(&w)
            .inc_by(inc(now.sleep_cpu_ns, p.sleep_cpu_ns) as f64 / 1e9);
        self.frames_in
            .get_or_create(&w)
            .inc_by(inc(now.frames_in, p.frames_in));
        self.queued_bytes
            .get_or_create(&w)
            .set(now.queued_bytes as f64);
    }

    /// The planner decided to move.
    pub fn on_decision(&self) {
        self.decisions.inc();
    }

    /// A migration completed.
    pub fn on_migrated(&self, r: &MigrationRecord) {
        let reason = r.reason.split(':').next().unwrap_or("").trim().to_owned();
        self.migrations
            .get_or_create(&vec![("reason", reason)])
            .inc();
        self.migration_planner.observe(r.planner_ms / 1e3);
        self.migration_pause.observe(r.worker_pause_ms / 1e3);
    }
}
