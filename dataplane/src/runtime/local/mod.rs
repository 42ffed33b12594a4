//! A worker on its own (`clasp local`): a cluster of one worker, fed by a local ingress
//! process through the worker's shared-memory segment instead of by a driver over the network.
//!
//! This is the front of the worker's coordinator ([`super::coordinator`]) for that case. The
//! coordinator starts the executors and decodes their reports as in a cluster; this front
//! applies the ledger deltas here (latency, completions, the ingress's in-flight bound),
//! samples the executors' counters every interval, and runs the end of the stream: once the
//! ingress is done and every request is processed, it asks the executors to flush operator
//! after operator in topological order, waiting for the worker to be quiescent after each,
//! exactly as the oracle drains between flushes (in a cluster the driver does this across
//! every worker).
//!
//! Quiescence is read from the segment: every executor parked with nothing in overflow, every
//! request ring empty, and the executors' counters unchanged between two reads.

mod cadence;
mod report;

use cadence::Cadence;
pub use report::{IntervalSample, LocalReport, OperatorMetrics};

use super::RuntimeError;
use super::coordinator::{Coordinator, Launch, REPORT_FRAMES_PER_TURN, StallWatch};
use super::executor::Seat;
use super::idle::IdlePolicy;
use super::layout::{self, SegmentSizes, WorkerSegment};
use super::ledger::{Ledger, run_elapsed};
use super::messages::Report;
use crate::routing::{self, Slots, Spread};
use crate::sink::{SINK_BUFFER_BYTES_MAX, Sink, SinkTarget};
use clasp_operators::AppSpec;
use report::Sampler;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the coordinator re-reads the segment for quiescence once the input is over.
const QUIESCENCE_POLL: Duration = Duration::from_millis(1);
/// Shortest wait of the coordinator (a sample that is already due still yields this long).
const COORDINATOR_WAIT_MIN: Duration = Duration::from_micros(100);

/// Settings of a worker on its own.
#[derive(Debug, Clone)]
pub struct LocalConfig {
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
    /// What idle executors do: park, or spin a while first.
    pub idle: IdlePolicy,
    /// Metrics sampling interval.
    pub interval: Duration,
    /// Give up when nothing progresses for this long with work outstanding.
    pub stall_timeout: Duration,
    /// Where outputs are written as lines (a `file:` sink is emptied first), or none.
    pub sink: Option<SinkTarget>,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            segment_name: format!("clasp-worker-{}", std::process::id()),
            worker_id: 0,
            executors: 1,
            spread: Spread::Even,
            ring_bytes: 1 << 20,
            max_in_flight: 4096,
            sample_every: 1,
            pin: false,
            idle: IdlePolicy::Auto,
            interval: Duration::from_millis(100),
            stall_timeout: Duration::from_secs(60),
            sink: None,
        }
    }
}

/// Runs a worker on its own until its ingress finished and every request was processed and
/// flushed. `ready` is called once the segment exists (start the ingress there); `watch` is
/// asked every interval whether the ingress failed (for a child process: its exit status).
pub fn run_local_worker(
    spec: Arc<AppSpec>,
    cfg: &LocalConfig,
    ready: impl FnOnce(&WorkerSegment) -> Result<(), String>,
    mut watch: impl FnMut() -> Option<String>,
) -> Result<LocalReport, RuntimeError> {
    let coordinator = start(&spec, cfg)?;
    let mut front = LocalFront::new(coordinator, &spec, cfg);
    if let Err(e) = ready(front.coordinator.segment()) {
        front.fault(e);
        front.ready_failed = true;
    }
    while front.turn(&mut watch) == Turn::Continue {}
    front.finish(&spec)
}

/// Makes the segment and starts the executors: one worker, every key group its own.
fn start(spec: &Arc<AppSpec>, cfg: &LocalConfig) -> Result<Coordinator, RuntimeError> {
    let ops = spec.operators.len();
    let executors = u16::try_from(cfg.executors)
        .ok()
        .filter(|&e| e > 0 && usize::from(e) <= layout::MAX_EXECUTORS)
        .ok_or_else(|| {
            RuntimeError::Seat(format!(
                "{} executors; a worker runs 1..={}",
                cfg.executors,
                layout::MAX_EXECUTORS
            ))
        })?;
    let slots = Slots {
        workers: vec![cfg.worker_id],
        executors: usize::from(executors),
    };
    let table = Arc::new(
        routing::spread(ops, &slots, cfg.spread).map_err(|e| RuntimeError::Seat(e.to_string()))?,
    );
    let sizes = SegmentSizes {
        executors: cfg.executors,
        operators: ops,
        ring_bytes: cfg.ring_bytes,
        max_frame_bytes: crate::runtime::layout::ring_frame_bytes_max(cfg.ring_bytes),
    };
    let seg = WorkerSegment::create(
        Some(&cfg.segment_name),
        &sizes,
        spec.source,
        cfg.max_in_flight,
        cfg.sample_every,
        &table,
    )?;
    let seat = Seat {
        routing: Arc::clone(&table),
        slots,
        index: 0,
        remote_frame_bytes_max: usize::MAX,
    };
    let sink = match &cfg.sink {
        Some(target) => {
            target.truncate_shared()?;
            Some(Sink::open(
                target,
                None,
                cfg.executors,
                SINK_BUFFER_BYTES_MAX,
            )?)
        }
        None => None,
    };
    let launch = Launch {
        spec,
        worker: cfg.worker_id,
        seat: &seat,
        // The executors, the coordinator and the ingress.
        policy: cfg.idle.wait_policy(cfg.executors + 2),
        pin: cfg.pin,
        links: vec![None; cfg.executors],
        sink,
    };
    Coordinator::start(seg, launch)
}

/// Where the end of the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Input flows (or the last of it is processed).
    Running,
    /// Flushing the operator at this position of the topological order.
    Flushing(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    Continue,
    Done,
}

/// The coordinator's front for a worker on its own (see the module docs).
struct LocalFront {
    coordinator: Coordinator,
    ledger: Ledger,
    errors: Vec<String>,
    /// The ingress died (reported once).
    producer_dead: bool,
    /// The ingress could not be started.
    ready_failed: bool,
    first_admit: Option<Instant>,
    /// When the last tracked tree completed.
    last_completion: Instant,
    /// When the worker was first found quiescent after the input ended: every admitted root,
    /// tracked or not, was processed by then.
    input_done: Option<Instant>,
    sampler: Sampler,
    topo: Vec<usize>,
    phase: Phase,
    stall: StallWatch,
    cadence: Cadence,
}

impl LocalFront {
    fn new(coordinator: Coordinator, spec: &AppSpec, cfg: &LocalConfig) -> Self {
        let sampler = Sampler::new(coordinator.segment(), cfg.interval);
        LocalFront {
            coordinator,
            ledger: Ledger::new(),
            errors: Vec::new(),
            producer_dead: false,
            ready_failed: false,
            first_admit: None,
            last_completion: Instant::now(),
            input_done: None,
            sampler,
            topo: spec.topological_order(),
            phase: Phase::Running,
            stall: StallWatch::new(cfg.stall_timeout),
            cadence: Cadence::new(cfg.max_in_flight, Instant::now()),
        }
    }

    /// Records a fault once.
    fn fault(&mut self, e: String) {
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// The ingress failed (noticed by an executor or by `watch`): recorded once.
    fn producer_failed(&mut self, e: String) {
        if !self.producer_dead {
            self.producer_dead = true;
            self.fault(e);
        }
    }

    /// One turn: reports, a metrics sample when due, the end of stream, stalls, then a wait.
    fn turn(&mut self, watch: &mut impl FnMut() -> Option<String>) -> Turn {
        self.read_reports();
        let control = self.coordinator.segment().control();
        if self.first_admit.is_none() && control.admitted.load(Ordering::Acquire) > 0 {
            self.first_admit = Some(Instant::now());
        }
        if self.sampler.due() {
            self.sampler
                .sample(self.coordinator.segment(), self.ledger.completed_inputs());
            if !self.producer_dead
                && let Some(err) = watch()
            {
                self.producer_failed(err);
            }
        }
        let control = self.coordinator.segment().control();
        let ingress = control.ingress_state.load(Ordering::Acquire);
        let input_over =
            ingress != layout::INGRESS_RUNNING || self.producer_dead || self.ready_failed;
        if self.end_of_stream(input_over) == Turn::Done || self.stalled() {
            return Turn::Done;
        }
        // Short waits once the input is over: quiescence is polled.
        let wait = if input_over {
            QUIESCENCE_POLL
        } else {
            self.sampler.until_due()
        };
        self.wait(wait.max(COORDINATOR_WAIT_MIN), input_over);
        Turn::Continue
    }

    /// Waits up to `timeout` for the next turn: while the input flows and an executor has work,
    /// a hold their reports do not interrupt (an executor running dry does), else a park they end
    /// (`cadence.rs`).
    fn wait(&mut self, timeout: Duration, input_over: bool) {
        let parked = self.coordinator.executors_parked();
        let completed = self.ledger.completed_inputs();
        let hold = self.cadence.may_hold(completed, parked, Instant::now());
        if let Some(hold) = hold.filter(|_| !input_over) {
            self.coordinator.hold(timeout.min(hold));
        } else {
            self.coordinator.wait_reports(timeout);
        }
    }

    /// Applies the executors' reports; tells the ingress about completions. A tree completes
    /// when its executor wrote the report that closed it, not when it is read here.
    fn read_reports(&mut self) {
        let mut completed = 0u64;
        let mut last_written_ns = 0u64;
        let mut faults = Vec::new();
        let mut died = None;
        let ledger = &mut self.ledger;
        let polled =
            self.coordinator
                .poll_reports(REPORT_FRAMES_PER_TURN, |e, report| match report {
                    Report::Deltas(batch) => {
                        let written_ns = batch.written_ns();
                        let before = completed;
                        completed += ledger.apply_all(batch.iter(), written_ns);
                        if completed > before {
                            last_written_ns = last_written_ns.max(written_ns);
                        }
                    }
                    Report::Flushed { .. } => {}
                    Report::ProducerDied { pid } => {
                        died = Some(format!("the ingress process (pid {pid}) died"))
                    }
                    Report::Error(e) => faults.push(e.into_owned()),
                    Report::Migrated(_) | Report::Progress(_) | Report::Snapshotted => {
                        faults.push(format!("executor {e} reported a migration on its own"))
                    }
                });
        if let Err(e) = polled {
            faults.push(format!("report rings: {e}"));
        }
        if let Some(d) = died {
            self.producer_failed(d);
        }
        for f in faults {
            self.fault(f);
        }
        if completed > 0 {
            let seg = self.coordinator.segment();
            seg.control()
                .completed
                .store(self.ledger.completed_inputs(), Ordering::Release);
            // The ingress may wait for completions (its in-flight bound).
            seg.segment
                .doorbell(seg.index.ingress_bell())
                .map(|b| b.ring())
                .ok();
            let ago_ns = crate::clock::monotonic_ns().saturating_sub(last_written_ns);
            let now = Instant::now();
            self.last_completion = now.checked_sub(Duration::from_nanos(ago_ns)).unwrap_or(now);
        }
    }

    /// Advances the end of the stream: once the input is over and the worker quiescent, flush
    /// the next operator. `Done` when the last one is flushed and the worker quiescent again.
    fn end_of_stream(&mut self, input_over: bool) -> Turn {
        let quiet = input_over && self.coordinator.quiescent();
        let next = match self.phase {
            Phase::Running if quiet => {
                self.input_done = Some(Instant::now());
                let control = self.coordinator.segment().control();
                control
                    .worker_state
                    .store(layout::WORKER_STOPPED, Ordering::Release);
                0
            }
            Phase::Flushing(i) if quiet && self.coordinator.is_flushed(self.topo[i]) => i + 1,
            _ => return Turn::Continue,
        };
        let Some(&op) = self.topo.get(next) else {
            return Turn::Done;
        };
        self.phase = Phase::Flushing(next);
        self.coordinator.end_of_stream(op as u16);
        Turn::Continue
    }

    /// Whether nothing progressed for the stall timeout with work outstanding (recorded).
    fn stalled(&mut self) -> bool {
        let progress = (self.coordinator.frames_in(), self.ledger.completed_inputs());
        let outstanding = self.ledger.open() > 0 || self.phase != Phase::Running;
        if !outstanding {
            // Waiting for input (a source with nothing to read yet) is not a stall, however
            // long: the timeout counts from when work is outstanding again.
            self.stall.restart(progress);
            return false;
        }
        if !self.stall.stalled(progress) {
            return false;
        }
        let e = format!(
            "no progress for {:?} with {} trees open; giving up",
            self.stall.timeout(),
            self.ledger.open()
        );
        self.errors.push(e);
        true
    }

    /// When the first record was admitted: the first tree's admission time (the ingress's
    /// clock), or when this front first saw a record admitted if that was earlier. The front
    /// looks between its waits, up to a hold after the admission, while the last completion
    /// is dated back to its report: a run shorter than a hold would otherwise end before it
    /// began.
    fn first_admit(&self) -> Option<Instant> {
        let admitted = self.ledger.first_admitted_ns().map(|ns| {
            let ago_ns = crate::clock::monotonic_ns().saturating_sub(ns);
            let now = Instant::now();
            now.checked_sub(Duration::from_nanos(ago_ns)).unwrap_or(now)
        });
        match (self.first_admit, admitted) {
            (Some(seen), Some(admitted)) => Some(seen.min(admitted)),
            (seen, admitted) => seen.or(admitted),
        }
    }

    /// Stops the executors and sums up the run.
    fn finish(mut self, spec: &AppSpec) -> Result<LocalReport, RuntimeError> {
        let seg = self.coordinator.segment();
        seg.control()
            .worker_state
            .store(layout::WORKER_STOPPED, Ordering::Release);
        let stopped = self.coordinator.stop();
        if let Some(&e) = stopped.panicked.first() {
            return Err(RuntimeError::Panicked(e));
        }
        self.errors.extend(stopped.unpinned);
        if let Some(e) = stopped.sink_error
            && !self.errors.contains(&e)
        {
            self.errors.push(e);
        }
        let elapsed = run_elapsed(
            self.first_admit(),
            self.last_completion,
            self.input_done,
            self.coordinator.segment().control().sample_every,
        );
        Ok(report::build(
            spec,
            self.coordinator.segment(),
            stopped.results,
            &self.ledger,
            self.sampler.into_intervals(),
            self.errors,
            elapsed,
        ))
    }
}
