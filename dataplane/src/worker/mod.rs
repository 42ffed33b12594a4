//! One worker process: E executor threads plus a coordinator (this thread), sharing one
//! shared-memory segment that a local ingress process attaches to.
//!
//! The coordinator does no per-request work. It applies ledger deltas (latency, completions,
//! the ingress's in-flight bound), samples the executors' counters every interval, and runs
//! the end of the stream: once the ingress is done and every request is processed, it asks each
//! executor to flush operator after operator in topological order, waiting for the system to
//! be quiescent after each, exactly as the oracle drains between flushes.
//!
//! Quiescence is read from the segment: every executor parked with nothing in overflow, every
//! request ring empty, and the executors' counters unchanged between two reads.

pub mod executor;
pub mod ingress;
pub mod layout;
pub mod ledger;

use crate::routing::{self, Spread};
use clasp_operators::{AppSpec, OperatorSummary};
use clasp_shmring::{FanIn, Producer, ShmRing, WaitPolicy};
use layout::{SegmentSizes, WorkerSegment, scalar};
use ledger::{DELTA_BYTES, Delta, LatencySummary, Ledger};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the coordinator re-reads the segment for quiescence once the input is over.
const QUIESCENCE_POLL: Duration = Duration::from_millis(1);
/// Shortest wait of the coordinator (a sample that is already due still yields this long).
const COORDINATOR_WAIT_MIN: Duration = Duration::from_micros(100);

pub(crate) const REPORT_DELTAS: u64 = 1;
pub(crate) const REPORT_EOS_DONE: u64 = 2;
pub(crate) const REPORT_PRODUCER_DIED: u64 = 3;
pub(crate) const REPORT_ERROR: u64 = 4;
/// A slot completed its part of a migration (body: `migrate::encode_report`).
pub(crate) const REPORT_MIGRATED: u64 = 5;
/// A slot in a migration says what it waits for (body: `migrate::encode_progress`).
pub(crate) const REPORT_PROGRESS: u64 = 6;

/// Coordinator → executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlMsg {
    EndOfStream {
        operator: u16,
    },
    Stop,
    /// A migration plan waits in the executor's plan mailbox.
    Plan,
}

impl ControlMsg {
    pub(crate) fn encode(&self) -> [u8; 8] {
        match *self {
            ControlMsg::EndOfStream { operator } => {
                let mut b = [1, 0, 0, 0, 0, 0, 0, 0];
                b[2..4].copy_from_slice(&operator.to_le_bytes());
                b
            }
            ControlMsg::Stop => [2, 0, 0, 0, 0, 0, 0, 0],
            ControlMsg::Plan => [3, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    pub(crate) fn decode(b: &[u8]) -> Option<ControlMsg> {
        match b {
            [1, 0, lo, hi, ..] => Some(ControlMsg::EndOfStream {
                operator: u16::from_le_bytes([*lo, *hi]),
            }),
            [2, ..] => Some(ControlMsg::Stop),
            [3, ..] => Some(ControlMsg::Plan),
            _ => None,
        }
    }
}

/// Settings of a worker.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Name of its shared-memory segment (the ingress attaches by it).
    pub segment_name: String,
    /// This worker's id.
    pub worker_id: u32,
    /// Executor threads.
    pub executors: usize,
    /// How key groups are spread over executors.
    pub spread: Spread,
    /// Capacity of each request ring.
    pub ring_bytes: usize,
    /// Roots the ingress may have in flight.
    pub max_in_flight: u64,
    /// Track 1 in N roots for latency and the in-flight bound.
    pub sample_every: u64,
    /// Pin executors to cores (verified), when there are enough cores.
    pub pin: bool,
    /// Metrics sampling interval.
    pub interval: Duration,
    /// Give up when nothing progresses for this long with work outstanding.
    pub stall_timeout: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            segment_name: format!("clasp-worker-{}", std::process::id()),
            worker_id: 0,
            executors: 1,
            spread: Spread::Even,
            ring_bytes: 1 << 20,
            max_in_flight: 4096,
            sample_every: 1,
            pin: false,
            interval: Duration::from_millis(100),
            stall_timeout: Duration::from_secs(60),
        }
    }
}

/// Per-operator metrics summed over the run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct OperatorMetrics {
    /// Requests processed.
    pub processed: u64,
    /// Mean execution time.
    pub exec_ns_mean: f64,
    /// Chained requests sent to each successor, local.
    pub chained_local: std::collections::BTreeMap<String, u64>,
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

/// What a worker run produced.
pub struct WorkerReport {
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
    pub totals: std::collections::BTreeMap<&'static str, u64>,
    /// Faults seen (the producer died, a corrupt ring...). Empty on a clean run.
    pub errors: Vec<String>,
    /// The executors' operator instances (state), `[executor][operator]`.
    pub instances: Vec<Vec<Box<dyn clasp_operators::OperatorInstance>>>,
}

/// Pins the calling thread to `cpu`, verified (see [`crate::affinity`]).
pub(crate) fn pin_thread(cpu: usize) -> Result<(), String> {
    crate::affinity::pin_current_thread(cpu).map(|_| ())
}

/// Runs a worker until its ingress finished and every request was processed and flushed.
/// `ready` is called once the segment exists (start the ingress there); `watch` is asked every
/// interval whether the ingress failed (for a child process: its exit status).
pub fn run_worker(
    spec: Arc<AppSpec>,
    cfg: &WorkerConfig,
    ready: impl FnOnce(&WorkerSegment) -> Result<(), String>,
    mut watch: impl FnMut() -> Option<String>,
) -> Result<WorkerReport, String> {
    let ops = spec.operators.len();
    let slots = routing::Slots {
        workers: vec![cfg.worker_id],
        executors: cfg.executors,
    };
    let table = Arc::new(routing::spread(ops, &slots, cfg.spread)?);
    let sizes = SegmentSizes {
        executors: cfg.executors,
        operators: ops,
        ring_bytes: cfg.ring_bytes,
        max_frame_bytes: cfg.ring_bytes / 2 - clasp_shmring::FRAME_HEADER_BYTES,
    };
    let seg = WorkerSegment::create(
        &cfg.segment_name,
        &sizes,
        spec.source,
        cfg.max_in_flight,
        cfg.sample_every,
        &table,
    )?;
    let idx = seg.index;
    let mut controls: Vec<Producer<ShmRing>> = (0..cfg.executors)
        .map(|e| {
            seg.segment
                .producer(idx.control(e))
                .map_err(|err| err.to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut reports = FanIn::new(
        (0..cfg.executors)
            .map(|e| {
                seg.segment
                    .consumer(idx.report(e))
                    .map_err(|err| err.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?,
    )
    .map_err(|e| e.to_string())?;
    let runnable = cfg.executors + 1;
    let policy = WaitPolicy::for_runnable_threads(runnable + 1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut handles = Vec::new();
    let place = executor::Placement {
        routing: Arc::clone(&table),
        slots,
        index: 0,
        remote_frame_bytes_max: usize::MAX,
    };
    for e in 0..cfg.executors {
        let exec = executor::Executor::new(e, cfg.worker_id, &spec, &place, &seg, policy, None)?;
        let pin = cfg.pin && cfg.executors < cores;
        handles.push(
            std::thread::Builder::new()
                .name(format!("clasp-exec-{e}"))
                .spawn(move || {
                    let pinned = if pin { pin_thread(e + 1).err() } else { None };
                    (exec.run(), pinned)
                })
                .map_err(|err| format!("spawn executor {e}: {err}"))?,
        );
    }
    let mut errors = Vec::new();
    let ready_failed = match ready(&seg) {
        Ok(()) => false,
        Err(e) => {
            errors.push(e);
            true
        }
    };

    let control = seg.control();
    let mut ledger = Ledger::new();
    let start = Instant::now();
    let mut first_admit: Option<Instant> = None;
    let mut last_completion = Instant::now();
    let mut eos_done = vec![0usize; ops];
    let mut last_progress = (Instant::now(), 0u64, 0u64);
    let mut intervals = Vec::new();
    let mut next_sample = start + cfg.interval;
    let mut prev = Snapshot::take(&seg, 0);
    let mut prev_at = start;
    let topo = spec.topological_order();
    let mut phase = Phase::Running;
    let clock_ns = || -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    };
    let mut producer_dead = false;
    loop {
        // 1. Reports.
        let mut completed_now = 0u64;
        let mut new_errors = Vec::new();
        let now_ns = clock_ns();
        let _ = reports.poll(256, |e, f| {
            let kind = f
                .get(..8)
                .map_or(0, |k| u64::from_le_bytes(k.try_into().unwrap()));
            let body = &f[8.min(f.len())..];
            match kind {
                REPORT_DELTAS => {
                    for chunk in body.chunks_exact(DELTA_BYTES) {
                        if ledger.apply(Delta::read(chunk.try_into().unwrap()), now_ns) {
                            completed_now += 1;
                        }
                    }
                }
                REPORT_EOS_DONE => {
                    let op = body
                        .get(..8)
                        .map_or(u64::MAX, |b| u64::from_le_bytes(b.try_into().unwrap()));
                    if let Some(n) = eos_done.get_mut(op as usize) {
                        *n += 1;
                    }
                }
                REPORT_PRODUCER_DIED => {
                    let pid = body
                        .get(..8)
                        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
                    new_errors.push(format!("the ingress process (pid {pid}) died"));
                }
                REPORT_ERROR => new_errors.push(String::from_utf8_lossy(body).into_owned()),
                other => {
                    new_errors.push(format!("executor {e} sent an unknown report kind {other}"))
                }
            }
        });
        for err in new_errors {
            if err.contains("ingress process") {
                if producer_dead {
                    continue;
                }
                producer_dead = true;
            }
            if !errors.contains(&err) {
                errors.push(err);
            }
        }
        if completed_now > 0 {
            control
                .completed
                .store(ledger.completed_inputs(), Ordering::Release);
            seg.segment
                .doorbell(idx.ingress_bell())
                .map(|b| b.ring())
                .ok();
            last_completion = Instant::now();
        }
        let admitted = control.admitted.load(Ordering::Acquire);
        if first_admit.is_none() && admitted > 0 {
            first_admit = Some(Instant::now());
        }
        // 2. Metrics.
        let now = Instant::now();
        if now >= next_sample {
            let snap = Snapshot::take(&seg, ledger.completed_inputs());
            intervals.push(snap.delta(
                &prev,
                now.duration_since(start),
                now.duration_since(prev_at),
            ));
            prev = snap;
            prev_at = now;
            next_sample = now + cfg.interval;
            if !producer_dead {
                if let Some(err) = watch() {
                    producer_dead = true;
                    errors.push(err);
                }
            }
        }
        // 3. Phases.
        let ingress = control.ingress_state.load(Ordering::Acquire);
        let input_over = ingress != layout::INGRESS_RUNNING || producer_dead || ready_failed;
        let quiet = input_over && quiescent(&seg);
        match phase {
            Phase::Running if quiet => {
                control
                    .worker_state
                    .store(layout::WORKER_STOPPED, Ordering::Release);
                phase = Phase::Flushing(0);
                send(
                    &mut controls,
                    ControlMsg::EndOfStream {
                        operator: topo[0] as u16,
                    },
                );
            }
            Phase::Flushing(i) if eos_done[topo[i]] == cfg.executors && quiet => {
                if i + 1 < topo.len() {
                    phase = Phase::Flushing(i + 1);
                    send(
                        &mut controls,
                        ControlMsg::EndOfStream {
                            operator: topo[i + 1] as u16,
                        },
                    );
                } else {
                    break;
                }
            }
            _ => {}
        }
        // 4. Stalls.
        let frames_in: u64 = (0..seg.executors())
            .map(|e| seg.metrics(e).get(scalar::FRAMES_IN))
            .sum();
        if (frames_in, ledger.completed_inputs()) != (last_progress.1, last_progress.2) {
            last_progress = (Instant::now(), frames_in, ledger.completed_inputs());
        } else if last_progress.0.elapsed() > cfg.stall_timeout
            && (ledger.open() > 0 || phase != Phase::Running)
        {
            errors.push(format!(
                "no progress for {:?} with {} trees open; giving up",
                cfg.stall_timeout,
                ledger.open()
            ));
            break;
        }
        // 5. Wait for reports (short while input is over: quiescence is polled).
        let wait = if input_over {
            QUIESCENCE_POLL
        } else {
            next_sample.saturating_duration_since(Instant::now())
        };
        let _ = reports.wait(WaitPolicy::PARK, Some(wait.max(COORDINATOR_WAIT_MIN)));
    }
    control
        .worker_state
        .store(layout::WORKER_STOPPED, Ordering::Release);
    send(&mut controls, ControlMsg::Stop);
    let mut results = Vec::new();
    for (e, h) in handles.into_iter().enumerate() {
        let (r, pin_err) = h.join().map_err(|_| format!("executor {e} panicked"))?;
        if let Some(p) = pin_err {
            errors.push(format!("executor {e}: {p} (ran unpinned)"));
        }
        results.push(r);
    }
    let end = Snapshot::take(&seg, ledger.completed_inputs());
    Ok(build_report(
        &spec,
        &seg,
        results,
        &ledger,
        end,
        intervals,
        errors,
        first_admit.map_or(Duration::ZERO, |t| {
            last_completion.saturating_duration_since(t)
        }),
    ))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Flushing(usize),
}

pub(crate) fn send(controls: &mut [Producer<ShmRing>], msg: ControlMsg) {
    for c in controls.iter_mut() {
        // 64 KiB control rings hold thousands of 8-byte messages; waiting here is a bug.
        while c.push(&msg.encode()).is_err() {
            std::thread::yield_now();
        }
    }
}

/// Nothing left to do: every executor parked with no overflow, every request ring empty, and
/// the executors' counters unchanged between two reads. Needs no count from the ingress, so it
/// holds even when the ingress died between writing frames and counting them.
pub(crate) fn quiescent(seg: &WorkerSegment) -> bool {
    let idx = seg.index;
    let read = || {
        let mut idle = true;
        let mut counters = (0u64, 0u64);
        for e in 0..seg.executors() {
            let m = seg.metrics(e);
            idle &= m.get(scalar::PARKED) == 1 && m.get(scalar::OVERFLOW_BYTES) == 0;
            std::sync::atomic::fence(Ordering::Acquire);
            counters.0 += m.get(scalar::LOCAL_SENT);
            counters.1 += m.get(scalar::FRAMES_IN);
        }
        let empty = (0..idx.executors).all(|b| {
            seg.segment
                .queued_bytes(idx.ingress(b))
                .is_ok_and(|q| q == 0)
                && [idx.net_in(b), idx.net_out(b)]
                    .iter()
                    .all(|&r| seg.segment.queued_bytes(r).is_ok_and(|q| q == 0))
                && (0..idx.executors).all(|a| {
                    seg.segment
                        .queued_bytes(idx.exec(a, b))
                        .is_ok_and(|q| q == 0)
                })
        });
        (idle && empty, counters)
    };
    let a = read();
    let b = read();
    a.0 && a == b
}

/// The executors' counters at one moment.
#[derive(Clone, Default)]
struct Snapshot {
    processed: u64,
    local: u64,
    frames_in: u64,
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
            s.frames_in += m.get(scalar::FRAMES_IN);
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

#[allow(clippy::too_many_arguments)]
fn build_report(
    spec: &AppSpec,
    seg: &WorkerSegment,
    results: Vec<executor::ExecutorResult>,
    ledger: &Ledger,
    _end: Snapshot,
    intervals: Vec<IntervalSample>,
    errors: Vec<String>,
    elapsed: Duration,
) -> WorkerReport {
    let ops = spec.operators.len();
    let mut summaries = vec![OperatorSummary::default(); ops];
    let mut malformed: Vec<std::collections::BTreeMap<String, u64>> = vec![Default::default(); ops];
    let mut state_keys = vec![0usize; ops];
    let mut instances = Vec::new();
    for r in results {
        for op in 0..ops {
            summaries[op].combine(&r.summaries[op]);
            state_keys[op] += r.state_keys[op];
            for (reason, n) in &r.malformed[op] {
                *malformed[op].entry((*reason).to_owned()).or_default() += n;
            }
        }
        instances.push(r.instances);
    }
    let mut operator_metrics = vec![OperatorMetrics::default(); ops];
    let mut totals = std::collections::BTreeMap::new();
    let names = [
        ("parks", scalar::PARKS),
        ("wakeups", scalar::WAKEUPS),
        ("frames_in", scalar::FRAMES_IN),
        ("local_sent", scalar::LOCAL_SENT),
        ("overflowed", scalar::OVERFLOWED),
        ("bad_frames", scalar::BAD_FRAMES),
        ("outputs", scalar::OUTPUTS),
        ("busy_ns", scalar::BUSY_NS),
        ("cpu_ns", scalar::CPU_NS),
        ("timing_outliers", scalar::TIMING_OUTLIERS),
    ];
    let mut exec_ns = vec![0u64; ops];
    for e in 0..seg.executors() {
        let m = seg.metrics(e);
        for (name, slot) in names {
            *totals.entry(name).or_insert(0) += m.get(slot);
        }
        for op in 0..ops {
            operator_metrics[op].processed += m.get(m.processed(op));
            exec_ns[op] += m.get(m.exec_ns(op));
            for to in 0..ops {
                let n = m.get(m.edge_local(op, to));
                if n > 0 {
                    *operator_metrics[op]
                        .chained_local
                        .entry(spec.operators[to].name.clone())
                        .or_default() += n;
                }
            }
        }
    }
    for op in 0..ops {
        operator_metrics[op].exec_ns_mean =
            exec_ns[op] as f64 / operator_metrics[op].processed.max(1) as f64;
    }
    WorkerReport {
        summaries,
        malformed: malformed
            .into_iter()
            .map(|m| m.into_iter().collect())
            .collect(),
        state_keys,
        operator_metrics,
        admitted: seg.control().admitted.load(Ordering::Acquire),
        latency: ledger.summary(),
        elapsed,
        intervals,
        totals,
        errors,
        instances,
    }
}
