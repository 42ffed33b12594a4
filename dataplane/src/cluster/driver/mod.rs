//! The driver of a static cluster: the ingress and the latency-ledger home of every root, and
//! the one that runs the end of the stream (see the module docs of [`super`]).
//!
//! A run is a sequence of phases, each in its own file: connect and start the workers (here),
//! admit the input (`feed.rs`) while the control channel (`channel.rs`) applies ledger
//! deltas, meters intervals (`metering.rs`), carries out migrations (`migration.rs`) and takes
//! in workers that join (`join.rs`) or leave (`leave.rs`); then the end-of-stream barrier
//! (`barrier.rs`) and the report (`report.rs`). Checkpoints are taken between admissions
//! (`checkpoint.rs`); a run that loses a worker restarts from the last one (`recovery.rs`),
//! each restart one more *attempt* of the run.

mod attempt;
mod barrier;
mod channel;
mod checkpoint;
mod error;
mod feed;
mod join;
mod leave;
mod metering;
mod migration;
mod recovery;
mod refusal;
mod report;

pub use error::DriverError;
pub use recovery::{CheckpointReport, Fault, FaultAction, MAX_RECOVERIES, Phase, RecoveryRecord};

use super::control::{Controller, IntervalView, MigrationRecord, Static, active_workers};
use super::{DRIVER_ID, Job, WorkerSummary};
use crate::message::{Message, RoutingRow};
use crate::routing::{self, Slots, Spread};
use crate::runtime::IdlePolicy;
use crate::runtime::ledger::LatencySummary;
use crate::transport::{ClusterSecret, Limits, PeerId, Transport, TransportConfig};
use barrier::{Ack, Barrier};
use channel::DriverInbox;
use clasp_operators::{AppSpec, OperatorSummary};
use clasp_protocol::planner::{Planner, PlannerConfig};
use metering::Metering;
use migration::Migrations;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A slot not heard from for a quarter of the migration timeout, and at least this long, is
/// named silent (slots report progress every 50 ms while in a migration).
const MIN_SILENT: Duration = Duration::from_secs(1);
/// How long one wait of the driver parks in the transport at most.
const DRIVER_PARK: Duration = Duration::from_millis(2);
/// How long one wait for the workers' connections parks.
const CONNECT_PARK: Duration = Duration::from_millis(20);
/// How much sooner than the run's wait for its workers a connect to one gives up (ms), so that
/// its reason, not the wait's timeout, is what the run reports.
const CONNECT_REASON_MARGIN_MS: u64 = 1_000;
/// A turn while an append waits for the peer's credit.
const CREDIT_WAIT_TURN: Duration = Duration::from_micros(200);
/// A turn between two quiescence probe rounds that found work.
const PROBE_TURN: Duration = Duration::from_micros(500);
/// A turn while the byes leave.
const BYE_TURN: Duration = Duration::from_millis(10);

/// Settings of a driver.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Where the driver listens (workers connect back to send deltas and summaries).
    pub listen: SocketAddr,
    /// The address workers use to reach `listen` (default: the bound address).
    pub advertise: Option<SocketAddr>,
    /// The cluster id.
    pub cluster_id: u64,
    /// The workers, in cluster-file order (the routing table spreads over them in this order).
    pub workers: Vec<(PeerId, SocketAddr)>,
    /// Whether `workers` log to this process's standard error (workers `clasp run` started on
    /// this host): a fault one of them reports, which it logged itself, is then not logged a
    /// second time here — only listed in the report. Workers that join log elsewhere.
    pub workers_log_here: bool,
    /// Ids reserved for workers that join the running cluster (`clasp worker --join`), in the
    /// order they may join: their slots exist from the start and own nothing until a move
    /// places key groups on them (see `join.rs`). Empty: no joins.
    pub joinable: Vec<PeerId>,
    /// The cluster secret.
    pub secret: ClusterSecret,
    /// Transport limits.
    pub limits: Limits,
    /// The app's name.
    pub app_name: String,
    /// The app's TOML (empty: built-in).
    pub app_toml: String,
    /// Executors per worker.
    pub executors: u16,
    /// How key groups are spread over all workers' executors.
    pub spread: Spread,
    /// Capacity of each request ring on the workers.
    pub ring_bytes: usize,
    /// Pin the workers' executors.
    pub pin: bool,
    /// What the workers' idle threads do (unless a worker was started with its own).
    pub idle: IdlePolicy,
    /// Records to admit.
    pub records: u64,
    /// Generator seed.
    pub seed: u64,
    /// Records per second (default: as fast as the cluster takes them).
    pub rate_per_s: Option<f64>,
    /// Tracked roots admitted and not completed, at most.
    pub max_in_flight: u64,
    /// Track 1 in N roots.
    pub sample_every: u64,
    /// How long workers may take to connect and be ready.
    pub ready_timeout: Duration,
    /// Give up when nothing progresses for this long with work outstanding.
    pub stall_timeout: Duration,
    /// How often workers report counters and the controller sees an [`IntervalView`]
    /// (`Duration::ZERO`: never).
    pub interval: Duration,
    /// Longest a migration may take before the run fails naming the silent slots.
    pub migration_timeout: Duration,
    /// How long before a move the workers copy its key groups ahead (`Duration::ZERO`: they
    /// do not; `runtime/executor/ahead.rs`).
    pub copy_ahead: Duration,
    /// Where the workers write outputs as lines (`crate::sink`), or none (digests only).
    pub sink: Option<crate::sink::SinkTarget>,
    /// Each worker writes its own `PATH.w<ID>` (workers on several hosts); else they share one
    /// host and append to `PATH`, which must have been emptied before the run.
    pub sink_per_worker: bool,
    /// Where the records come from (the app's generator by default).
    pub source: crate::source::SourceSpec,
    /// Checkpoints, and recovery from them (`None`: off; a lost worker ends the run).
    pub checkpoint: Option<CheckpointConfig>,
    /// Testing: workers to kill or stop, and when (`--fault`); those of one phase strike
    /// together.
    pub faults: Vec<Fault>,
}

/// Checkpoint settings of a run (`crate::checkpoint`, `docs/recovery.md`).
#[derive(Clone, Debug)]
pub struct CheckpointConfig {
    /// The store's directory (on several hosts: a path every host shares).
    pub dir: std::path::PathBuf,
    /// Between two checkpoints (zero: none are taken, but a run can still resume or recover
    /// from the ones in `dir`).
    pub interval: Duration,
    /// Complete checkpoints kept.
    pub keep: usize,
    /// Start from the newest complete checkpoint in `dir` (a run whose driver died).
    pub resume: bool,
    /// The hold on `dir` for the run, when it was given rather than made for this run alone
    /// (`crate::checkpoint::DirLock`): kept as long as the configuration.
    pub lock: Option<std::sync::Arc<crate::checkpoint::DirLock>>,
}

/// Per operator metrics over the cluster.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ClusterOperatorMetrics {
    /// Requests processed.
    pub processed: u64,
    /// Mean execution time.
    pub exec_ns_mean: f64,
    /// Local chained requests to each successor.
    pub chained_local: BTreeMap<String, u64>,
    /// Remote chained requests to each successor.
    pub chained_remote: BTreeMap<String, u64>,
}

/// What a cluster run produced.
#[derive(Debug)]
pub struct ClusterReport {
    /// Per operator, summed over all workers.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: keys with state.
    pub state_keys: Vec<u64>,
    /// Per operator: malformed counts by reason.
    pub malformed: Vec<Vec<(String, u64)>>,
    /// Per operator metrics.
    pub operator_metrics: Vec<ClusterOperatorMetrics>,
    /// Roots admitted.
    pub admitted: u64,
    /// Latency of tracked trees.
    pub latency: LatencySummary,
    /// How long after falling due by the rate records were admitted (empty at no rate).
    pub admission_delay: LatencySummary,
    /// From the first admitted root to the last completion.
    pub elapsed: Duration,
    /// Counters summed over workers, plus the driver's.
    pub totals: BTreeMap<String, u64>,
    /// Faults (empty on a clean run).
    pub errors: Vec<String>,
    /// Each worker's summary.
    pub workers: Vec<WorkerSummary>,
    /// Every completed migration.
    pub migrations: Vec<MigrationRecord>,
    /// Every interval (empty when `interval` is zero).
    pub intervals: Vec<IntervalView>,
    /// Seconds each worker owned key groups, summed (the run's worker-seconds).
    pub worker_seconds: f64,
    /// Connections refused before they authenticated, by the driver and every worker (stray
    /// connections: counted and logged, not faults).
    pub refused_connections: u64,
    /// Each source's offset and malformed counts when the input ended.
    pub sources: Vec<crate::source::SourceReport>,
    /// Every recovery from a lost worker.
    pub recoveries: Vec<RecoveryRecord>,
    /// The run's checkpoints (`None`: off).
    pub checkpoints: Option<CheckpointReport>,
    /// The checkpoint the run resumed from (`--resume`).
    pub resumed_from: Option<u64>,
    /// Records that checkpoint had admitted (0 for a run from the start): the input's part
    /// the run before the resume admitted.
    pub resumed_admitted: u64,
    /// The run's clock at that checkpoint's cut (s): the resumed run's goes on from it.
    pub resumed_run_s: f64,
}

struct Driver<'a> {
    cfg: &'a DriverConfig,
    slots: Slots,
    t: Transport,
    rx: DriverInbox,
    /// The workers of the run, in job order: those it started with, then those that joined.
    /// `slots.workers` also holds the ids reserved for joiners.
    ids: Vec<PeerId>,
    /// Where each worker of the run listens.
    addrs: BTreeMap<PeerId, SocketAddr>,
    joins: join::Joins,
    leaves: leave::Leaves,
    /// Frames the driver handed the transport per worker (its side of the quiescence counts).
    sent: BTreeMap<PeerId, u64>,
    /// Faults the run survived.
    errors: Vec<String>,
    /// The last time the run moved (the stall timeout counts from here).
    last_progress: Instant,
    /// The workers that did not answer the probe after a stall (stopped, hung): a recovery
    /// replaces them as it replaces the workers it lost.
    silent_at_stall: Vec<PeerId>,
    mig: Migrations,
    meter: Metering,
    barrier: Barrier,
    /// What this attempt took over from the last, and hands the next (`recovery.rs`).
    carry: recovery::Carry,
    /// What the run is doing (a lost worker is reported with it).
    phase: Phase,
    /// The run's clock at the cut whose routing table this attempt started from (`None`: it
    /// started from the initial spread).
    restored_cut_s: Option<f64>,
    /// When the last checkpoint ended (or the input began).
    last_checkpoint: Instant,
    /// The records admitted at the last cut: an input that waits with none admitted since is
    /// not checkpointed again.
    last_cut_admitted: Option<u64>,
    /// The workers' answers at the cut of the checkpoint being taken.
    snapshots: Vec<crate::message::Snapshotted>,
    /// The workers' parts of the checkpoint being written.
    parts: Vec<crate::message::PartWritten>,
    /// The checkpoint whose parts are being written (`checkpoint.rs`).
    persisting: Option<checkpoint::Persisting>,
    /// Records admitted so far.
    admitted: u64,
    /// Tracked roots admitted so far (those completed are the ledger's).
    tracked: u64,
}

impl<'a> Driver<'a> {
    /// Starts the transport and the protocol planner on the initial placement.
    fn new(
        spec: &AppSpec,
        cfg: &'a DriverConfig,
        carry: recovery::Carry,
    ) -> Result<Driver<'a>, DriverError> {
        let ids: Vec<PeerId> = cfg.workers.iter().map(|w| w.0).collect();
        let all: Vec<PeerId> = ids.iter().chain(&cfg.joinable).copied().collect();
        let distinct: std::collections::BTreeSet<PeerId> = all.iter().copied().collect();
        if ids.is_empty() || all.contains(&DRIVER_ID) || distinct.len() != all.len() {
            return Err(DriverError::Config(format!(
                "worker ids {ids:?} and joinable {:?}: need at least one worker, every id \
                 once, and {DRIVER_ID} is the driver's",
                cfg.joinable
            )));
        }
        let mut carry = carry;
        let listen = carry.listen.unwrap_or(cfg.listen);
        let mut tcfg = TransportConfig::new(DRIVER_ID, listen, cfg.secret.clone(), cfg.cluster_id);
        tcfg.limits = cfg.limits.clone();
        // Keep trying a worker for about as long as the run waits for it to be ready: a cluster
        // file's worker restarted by its supervisor after a loss may take that long. A little
        // less, so that a worker never reached fails the run with the connect's reason (not
        // listening, refused, serving another run) rather than a bare timeout.
        let ready_ms = u64::try_from(cfg.ready_timeout.as_millis()).unwrap_or(u64::MAX);
        let connect_ms = ready_ms.saturating_sub(CONNECT_REASON_MARGIN_MS);
        tcfg.limits.connect_timeout_ms = tcfg.limits.connect_timeout_ms.max(connect_ms);
        tcfg.peers = cfg.workers.clone();
        let t = start_transport(tcfg, carry.listen.is_some())?;
        carry.listen = Some(t.local_addr());
        let ops = spec.operators.len();
        let slots = Slots {
            workers: all,
            executors: cfg.executors as usize,
        };
        slots.check_count()?;
        // Over the starting workers only, whose slots come first: a reserved slot owns nothing.
        let starting = Slots {
            workers: ids.clone(),
            executors: slots.executors,
        };
        let (initial, restored_cut_s) = match attempt::resumed_table(&carry, &slots, &starting, ops)
        {
            Some(t) => (t, carry.resume_run_s()),
            None => (routing::spread(ops, &starting, cfg.spread)?, None),
        };
        let preds: Vec<Vec<usize>> = (0..ops).map(|o| spec.predecessors(o)).collect();
        let timeout_ns = cfg.migration_timeout.as_nanos() as u64;
        let pcfg = PlannerConfig {
            timeout_ns,
            silent_ns: (timeout_ns / 4).max(MIN_SILENT.as_nanos() as u64),
        };
        let active = active_workers(&initial, &slots).len();
        let mut rx = DriverInbox::new();
        if let Some(l) = carry.resume.as_ref().and_then(|r| r.ledger.clone()) {
            rx.ledger = l;
        }
        Ok(Driver {
            cfg,
            mig: Migrations::new(Planner::new(initial, preds, pcfg)),
            meter: Metering::new(slots.workers.len(), active),
            barrier: Barrier::default(),
            slots,
            t,
            rx,
            carry,
            phase: Phase::Start,
            restored_cut_s,
            last_checkpoint: Instant::now(),
            last_cut_admitted: None,
            snapshots: Vec::new(),
            parts: Vec::new(),
            persisting: None,
            admitted: 0,
            tracked: 0,
            addrs: cfg.workers.iter().copied().collect(),
            joins: join::Joins::default(),
            leaves: leave::Leaves::default(),
            ids,
            sent: BTreeMap::new(),
            errors: Vec::new(),
            last_progress: Instant::now(),
            silent_at_stall: Vec::new(),
        })
    }

    /// A worker this run started that is gone: the run stops waiting for it, after one more
    /// turn for what it said before it went (a refusal of the job is the better reason).
    fn check_exited(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        let Some((peer, how)) = ctl.exited(&self.ids) else {
            return Ok(());
        };
        self.turn(Duration::ZERO)?;
        if !self.errors.is_empty() {
            return Err(DriverError::Start(self.errors.join("; ")));
        }
        Err(DriverError::Unreachable {
            peer,
            addr: self.addr_of(peer),
            reason: how,
        })
    }

    /// Connects to every worker, sends the job and waits until every worker is ready (or one
    /// this run started is gone).
    fn start(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        let cfg = self.cfg;
        let deadline = Instant::now() + cfg.ready_timeout;
        while !self.ids.iter().all(|&p| self.t.is_connected(p)) {
            self.check_exited(ctl)?;
            if Instant::now() >= deadline {
                let missing: Vec<String> = (self.ids.iter())
                    .filter(|&&p| !self.t.is_connected(p))
                    .map(|&p| format!("worker {p} at {}", self.addr_of(p)))
                    .collect();
                return Err(DriverError::Timeout(format!(
                    "not connected within {:?}: {}",
                    cfg.ready_timeout,
                    missing.join(", ")
                )));
            }
            self.last_progress = Instant::now();
            self.turn(CONNECT_PARK)?;
        }
        let mut job = self.job(Vec::new());
        job.routing = (self.mig.planner.routing().rows())
            .map(RoutingRow::of)
            .collect();
        if let Some(r) = &self.carry.resume {
            job.restore = r.parts.clone();
        }
        self.broadcast(&Message::Job(Box::new(job)))?;
        let deadline = Instant::now() + cfg.ready_timeout;
        while self.barrier.acks(Ack::Ready) < self.ids.len() {
            self.check_exited(ctl)?;
            if !self.errors.is_empty() {
                return Err(DriverError::Start(self.errors.join("; ")));
            }
            if Instant::now() >= deadline {
                // The workers that got the job but never said ready cannot tell us why (they
                // may not reach us at all): say where they had to connect.
                return Err(DriverError::Timeout(format!(
                    "{} of {} workers ready within {:?}: each connects back to the driver at \
                     {} (--driver-advertise) and to its peers; the workers' logs say what failed",
                    self.barrier.acks(Ack::Ready),
                    self.ids.len(),
                    cfg.ready_timeout,
                    cfg.advertise.unwrap_or(self.t.local_addr())
                )));
            }
            self.last_progress = Instant::now();
            self.turn(DRIVER_PARK)?;
        }
        self.carry.restored();
        Ok(())
    }

    /// The run's job, for workers that connect to `peers` (empty: their cluster file's).
    fn job(&self, peers: Vec<(PeerId, String)>) -> Job {
        let cfg = self.cfg;
        Job {
            app_name: cfg.app_name.clone(),
            app_toml: cfg.app_toml.clone(),
            executors: cfg.executors,
            spread: cfg.spread.into(),
            ring_bytes: cfg.ring_bytes as u64,
            pin: cfg.pin,
            idle: cfg.idle.into(),
            workers: self.slots.workers.clone(),
            driver: DRIVER_ID,
            driver_addr: cfg.advertise.unwrap_or(self.t.local_addr()).to_string(),
            interval_ms: cfg.interval.as_millis().min(u32::MAX as u128) as u32,
            sink: cfg
                .sink
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            sink_per_worker: cfg.sink_per_worker,
            epoch: 0,
            routing: Vec::new(),
            peers,
            addresses: (cfg.workers.iter())
                .map(|&(id, addr)| (id, addr.to_string()))
                .collect(),
            restore: Vec::new(),
        }
    }

    /// Waits until every tracked root completed and no migration is in progress (a
    /// controller may still move).
    fn drain(
        &mut self,
        ctl: &mut dyn Controller,
        admitted: u64,
        tracked: u64,
        ops: usize,
    ) -> Result<(), DriverError> {
        loop {
            self.maintain(ctl, admitted, ops)?;
            if self.rx.ledger.completed_inputs() >= tracked
                && self.mig.in_flight.is_none()
                && self.mig.narrowing.is_none()
            {
                return Ok(());
            }
            self.turn(DRIVER_PARK)?;
        }
    }
}

/// How long a restarted attempt keeps trying to listen at the first attempt's address (its
/// port freed a moment before, perhaps briefly taken by another process).
const RELISTEN_FOR: Duration = Duration::from_secs(2);
/// The pause between two of those tries.
const RELISTEN_PAUSE: Duration = Duration::from_millis(100);

/// Starts the driver's transport; `again` (a restarted attempt, at the first one's address):
/// an address in use is tried again for [`RELISTEN_FOR`].
fn start_transport(tcfg: TransportConfig, again: bool) -> Result<Transport, DriverError> {
    let deadline = Instant::now() + RELISTEN_FOR;
    loop {
        match Transport::start(tcfg.clone()) {
            Err(crate::transport::TransportError::Listen { .. })
                if again && Instant::now() < deadline =>
            {
                std::thread::sleep(RELISTEN_PAUSE);
            }
            r => return r.map_err(|e| DriverError::transport("driver", e)),
        }
    }
}

/// Runs a static cluster job: connects to the workers (already started), feeds the input,
/// completes the end of stream and collects every worker's summary. `Err` is a fault that
/// stopped the run (a worker unreachable, refused, lost, or no progress).
pub fn run_driver(spec: &AppSpec, cfg: &DriverConfig) -> Result<ClusterReport, DriverError> {
    run_driver_with(spec, cfg, &mut Static)
}

/// [`run_driver`] steered by a [`Controller`]: its input rate, and its moves, each carried out
/// as a live migration while the input keeps flowing. With checkpoints on, a lost worker is
/// recovered from the last checkpoint (`recovery.rs`) at most [`MAX_RECOVERIES`] times.
pub fn run_driver_with(
    spec: &AppSpec,
    cfg: &DriverConfig,
    ctl: &mut dyn Controller,
) -> Result<ClusterReport, DriverError> {
    let mut carry = recovery::Carry::first(cfg)?;
    if carry.resumed_from.is_some() {
        ctl.on_resumed(carry.resumed_run_s, carry.resumed_admitted);
    }
    // After a recovery: when it was decided (s of the run's clock).
    let mut recovered_at: Option<f64> = None;
    // A resumed run: the clock of its cut.
    let mut resumed_at = carry.resumed_from.map(|_| carry.resumed_run_s);
    loop {
        let mut d = Driver::new(spec, cfg, carry)?;
        if let Some(t_s) = recovered_at.take() {
            ctl.on_recovered(t_s, d.restored_cut_s);
        } else if let Some(t_s) = resumed_at.take()
            && d.restored_cut_s.is_none()
        {
            // Resumed from a cut whose table could not be restored (it placed key groups on
            // workers that joined): the job starts from the initial table, as after a recovery.
            ctl.on_recovered(t_s, None);
        }
        let e = match d.attempt(spec, ctl) {
            Ok((fed, elapsed)) => return Ok(report::build(spec, d, fed, elapsed)),
            Err(e) => e,
        };
        // A job that did not start is not restarted: a worker that refuses it (an operator
        // kind it does not know, a bad app) would refuse it again, and the run must end with
        // its reason. Nor is a restarted job whose workers do not all come back.
        let starting = d.phase == Phase::Start;
        if starting || !e.is_recoverable() {
            return Err(e);
        }
        let seen = Instant::now();
        // A migration that timed out with every worker answering is no worker's loss (a
        // protocol fault, say): a restart would not cure it, and it must not be hidden.
        let timed_out = matches!(e, DriverError::MigrationTimedOut(_));
        let lost_first = timed_out.then(|| d.lost_workers(&e));
        if lost_first.as_ref().is_some_and(Vec::is_empty) {
            return Err(e);
        }
        // A fault a recovery would cure, not recovered: the error says why.
        let why = if cfg.checkpoint.is_none() {
            Some("the run takes no checkpoints".to_string())
        } else if !cfg.source.is_replayable() {
            Some(format!("its source {} cannot be read again", cfg.source))
        } else if d.carry.attempts >= MAX_RECOVERIES {
            Some(format!(
                "it recovered {MAX_RECOVERIES} times already, the most a run does"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(DriverError::NotRecovered {
                error: Box::new(e),
                why,
            });
        }
        let lost = match lost_first {
            Some(lost) => lost,
            None => d.lost_workers(&e),
        };
        let (phase, admitted) = (d.phase_now(), d.admitted);
        carry = d.into_carry();
        carry.recover(cfg, ctl, e, (lost, seen), phase, admitted)?;
        recovered_at = Some(carry.t0.map_or(0.0, |t| t.elapsed().as_secs_f64()));
    }
}
