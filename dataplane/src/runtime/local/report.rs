//! What a worker on its own reports: per-interval samples of its executors' counters while it
//! runs, and at the end its operators' summaries, metrics, latency and counter totals.

use crate::runtime::executor::ExecutorResult;
use crate::runtime::layout::{WorkerSegment, scalar};
use crate::runtime::ledger::{LatencySummary, Ledger};
use crate::runtime::results::{TOTALS, counter_totals, merge};
use clasp_operators::{AppSpec, OperatorSummary};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Per-operator metrics summed over the run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct OperatorMetrics {
    /// Requests processed.
    pub processed: u64,
    /// Mean execution time.
    pub exec_ns_mean: f64,
    /// Chained requests sent to each successor, local.
    pub chained_local: BTreeMap<String, u64>,
}

/// One metrics sample (per interval, all executors).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct IntervalSample {
    /// Seconds since the worker started.
    pub t_s: f64,
    /// Requests processed in the interval, per second.
    pub processed_per_s: f64,
    /// Local chained requests per second.
    pub local_per_s: f64,
    /// Roots completed per second.
    pub completed_per_s: f64,
    /// Bytes queued in the executors' inbound rings at the sample.
    pub queued_bytes: u64,
    /// Executor busy time, µs per second (summed over executors).
    pub busy_us_per_s: f64,
}

/// What a worker on its own produced.
pub struct LocalReport {
    /// Per operator, summed over executors.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed counts by reason.
    pub malformed: Vec<Vec<(String, u64)>>,
    /// Per operator: keys with state.
    pub state_keys: Vec<usize>,
    /// Per operator metrics.
    pub operator_metrics: Vec<OperatorMetrics>,
    /// Roots admitted by the ingress.
    pub admitted: u64,
    /// Latency of tracked trees.
    pub latency: LatencySummary,
    /// From the first admitted root to the last completion.
    pub elapsed: Duration,
    /// Per-interval samples.
    pub intervals: Vec<IntervalSample>,
    /// Counters over the run: parks, wake-ups, frames in, local chained requests, overflowed and
    /// bad frames, outputs, operator execution ns (`busy_ns`) and executor thread CPU ns.
    pub totals: BTreeMap<&'static str, u64>,
    /// Faults seen (the producer died, a corrupt ring...). Empty on a clean run.
    pub errors: Vec<String>,
    /// The executors' operator instances (state), `[executor][operator]`.
    pub instances: Vec<Vec<Box<dyn clasp_operators::OperatorInstance>>>,
}

/// Takes a [`Snapshot`] every interval and keeps the differences.
pub(super) struct Sampler {
    interval: Duration,
    start: Instant,
    next: Instant,
    prev: Snapshot,
    prev_at: Instant,
    intervals: Vec<IntervalSample>,
}

impl Sampler {
    pub(super) fn new(seg: &WorkerSegment, interval: Duration) -> Self {
        let start = Instant::now();
        Sampler {
            interval,
            start,
            next: start + interval,
            prev: Snapshot::take(seg, 0),
            prev_at: start,
            intervals: Vec::new(),
        }
    }

    /// Whether a sample is due.
    pub(super) fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Time until the next sample.
    pub(super) fn until_due(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Samples the counters now (`completed`: input trees completed so far).
    pub(super) fn sample(&mut self, seg: &WorkerSegment, completed: u64) {
        let now = Instant::now();
        let snap = Snapshot::take(seg, completed);
        self.intervals.push(snap.delta(
            &self.prev,
            now.duration_since(self.start),
            now.duration_since(self.prev_at),
        ));
        self.prev = snap;
        self.prev_at = now;
        self.next = now + self.interval;
    }

    pub(super) fn into_intervals(self) -> Vec<IntervalSample> {
        self.intervals
    }
}

/// The executors' counters at one moment.
#[derive(Clone, Default)]
struct Snapshot {
    processed: u64,
    local: u64,
    completed: u64,
    busy_ns: u64,
    queued_bytes: u64,
}

impl Snapshot {
    fn take(seg: &WorkerSegment, completed: u64) -> Snapshot {
        let mut s = Snapshot {
            completed,
            ..Snapshot::default()
        };
        for e in 0..seg.executors() {
            let m = seg.metrics(e);
            s.processed += (0..m.operators())
                .map(|op| m.get(m.processed(op)))
                .sum::<u64>();
            s.local += m.get(scalar::LOCAL_SENT);
            s.busy_ns += m.get(scalar::BUSY_NS);
        }
        let idx = seg.index;
        s.queued_bytes = (0..idx.executors)
            .flat_map(|b| {
                std::iter::once(idx.ingress(b))
                    .chain((0..idx.executors).map(move |a| idx.exec(a, b)))
            })
            .filter_map(|r| seg.segment.queued_bytes(r).ok())
            .sum();
        s
    }

    fn delta(&self, prev: &Snapshot, t: Duration, dt: Duration) -> IntervalSample {
        let per_s =
            |now: u64, before: u64| now.saturating_sub(before) as f64 / dt.as_secs_f64().max(1e-9);
        IntervalSample {
            t_s: t.as_secs_f64(),
            processed_per_s: per_s(self.processed, prev.processed),
            local_per_s: per_s(self.local, prev.local),
            completed_per_s: per_s(self.completed, prev.completed),
            queued_bytes: self.queued_bytes,
            busy_us_per_s: per_s(self.busy_ns, prev.busy_ns) / 1000.0,
        }
    }
}

/// Per operator: requests processed, mean execution time and local chained requests per
/// successor, summed over the executors of `seg`.
fn operator_metrics(spec: &AppSpec, seg: &WorkerSegment) -> Vec<OperatorMetrics> {
    let ops = spec.operators.len();
    let mut metrics = vec![OperatorMetrics::default(); ops];
    let mut exec_ns = vec![0u64; ops];
    for e in 0..seg.executors() {
        let m = seg.metrics(e);
        for op in 0..ops {
            metrics[op].processed += m.get(m.processed(op));
            exec_ns[op] += m.get(m.exec_ns(op));
            for to in 0..ops {
                let n = m.get(m.edge_local(op, to));
                if n > 0 {
                    *metrics[op]
                        .chained_local
                        .entry(spec.operators[to].name.clone())
                        .or_default() += n;
                }
            }
        }
    }
    for (m, ns) in metrics.iter_mut().zip(exec_ns) {
        m.exec_ns_mean = ns as f64 / m.processed.max(1) as f64;
    }
    metrics
}

/// The report of a finished run.
pub(super) fn build(
    spec: &AppSpec,
    seg: &WorkerSegment,
    results: Vec<ExecutorResult>,
    ledger: &Ledger,
    intervals: Vec<IntervalSample>,
    errors: Vec<String>,
    elapsed: Duration,
) -> LocalReport {
    let merged = merge(spec.operators.len(), results);
    LocalReport {
        summaries: merged.summaries,
        malformed: merged.malformed,
        state_keys: merged.state_keys,
        operator_metrics: operator_metrics(spec, seg),
        admitted: seg.control().admitted.load(Ordering::Acquire),
        latency: ledger.summary(),
        elapsed,
        intervals,
        totals: counter_totals(seg, &TOTALS),
        errors,
        instances: merged.instances,
    }
}
