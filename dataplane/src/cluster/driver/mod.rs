//! The driver of a static cluster: the ingress and the latency-ledger home of every root, and
//! the one that runs the end of the stream (see the module docs of [`super`]).

mod moves;

use super::control::{
    Controller, IntervalView, MigrationRecord, Move, Static, WorkerInterval, active_workers,
};
use super::{Counters, DRIVER_ID, Job, Status, WorkerSummary, now_ns};
use crate::message::{CONTROL_KIND, Decoder, Message, MessageError, Plans, encode};
use crate::migrate::{Slots, control_frame};
use crate::request::{FLAG_TRACKED, INGRESS_SLOT, RequestHeader, frame_len, root_id};
use crate::routing::{RoutingTable, Spread};
use crate::transport::{
    ClusterSecret, Delivered, Event, Inbound, Limits, PeerId, Transport, TransportConfig,
};
use crate::worker::ledger::{LatencySummary, Ledger};
use clasp_controlplane::protocol::Assignment;
use clasp_controlplane::protocol::planner::{Planner, PlannerAction, PlannerConfig};
use clasp_operators::key::{key_group, key_hash};
use clasp_operators::{AppSpec, OperatorSummary};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Records admitted between two turns of the transport while feeding.
const POLL_EVERY_RECORDS: u64 = 64;
/// The shortest wait between admissions when pacing: the records due meanwhile go out
/// back to back (at 250 k records/s, 25 of them).
const PACING_QUANTUM: Duration = Duration::from_micros(100);
/// A slot not heard from for a quarter of the migration timeout, and at least this long, is
/// named silent (slots report progress every 50 ms while in a migration).
const MIN_SILENT: Duration = Duration::from_secs(1);
/// How long one wait of the driver parks in the transport at most.
const DRIVER_PARK: Duration = Duration::from_millis(2);
/// Quiescence probes: consecutive clean rounds with unchanged counters required.
const QUIET_ROUNDS: u32 = 2;

/// One worker's per-peer counts in a probe round: (worker, [(peer, sent, received)]).
type PeerCounts = (PeerId, Vec<(PeerId, u64, u64)>);

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
}

struct DriverInbox {
    ledger: Ledger,
    last_completion: Instant,
    /// Messages from workers (ledger deltas are applied on arrival instead), or why one
    /// could not be read.
    msgs: VecDeque<(PeerId, Result<Message, MessageError>)>,
    decoder: Decoder,
    events: Vec<Event>,
}

impl Inbound for DriverInbox {
    fn deliver(&mut self, from: PeerId, _frame: &[u8]) -> Delivered {
        let e = "sent the driver a request frame; dropped".to_string();
        self.msgs.push_back((from, Ok(Message::Error(e))));
        Delivered::Accepted
    }

    fn control(&mut self, from: PeerId, k: u16, body: &[u8]) {
        let msg = if k == CONTROL_KIND {
            self.decoder.decode(body)
        } else {
            Err(MessageError::Kind(k))
        };
        if let Ok(Message::Deltas(deltas)) = msg {
            let now = now_ns();
            let mut done = false;
            for d in deltas {
                done |= self.ledger.apply(d.into(), now);
            }
            if done {
                self.last_completion = Instant::now();
            }
        } else {
            self.msgs.push_back((from, msg));
        }
    }

    fn event(&mut self, e: Event) {
        self.events.push(e);
    }
}

/// What workers acknowledge, each counted until every worker did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ack {
    /// Ready for input.
    Ready,
    /// Every executor flushed this operator at the end of the stream.
    EosDone(u16),
}

/// A migration in progress.
struct InFlight {
    record: MigrationRecord,
}

struct Driver<'a> {
    cfg: &'a DriverConfig,
    slots: Slots,
    planner: Planner,
    in_flight: Option<InFlight>,
    migrations: Vec<MigrationRecord>,
    /// Completed migrations the controller has not been told about.
    finished: Vec<MigrationRecord>,
    /// Latest counters per worker index, and those at the previous interval.
    counters: Vec<Option<Counters>>,
    prev_counters: Vec<Option<Counters>>,
    /// Each worker's figures of the last interval.
    last_worker_intervals: Vec<WorkerInterval>,
    intervals: Vec<IntervalView>,
    /// Start of the run (first admission), the current interval, and its admissions.
    t0: Instant,
    interval_start: Instant,
    interval_admitted: u64,
    interval_completed: u64,
    interval_migrating: bool,
    /// Records due by the rate and not admitted.
    backlog: u64,
    offered: Option<f64>,
    active: usize,
    worker_seconds: f64,
    active_since: Instant,
    t: Transport,
    rx: DriverInbox,
    ids: Vec<PeerId>,
    sent: BTreeMap<PeerId, u64>,
    errors: Vec<String>,
    acks: BTreeMap<Ack, usize>,
    statuses: BTreeMap<u64, Vec<(PeerId, Status)>>,
    summaries: Vec<WorkerSummary>,
    last_progress: Instant,
}

impl Driver<'_> {
    fn addr_of(&self, peer: PeerId) -> String {
        self.cfg
            .workers
            .iter()
            .find(|w| w.0 == peer)
            .map_or_else(|| "?".into(), |w| w.1.to_string())
    }

    /// One turn: poll, then handle events and messages. A worker lost is fatal.
    fn turn(&mut self, timeout: Duration) -> Result<(), String> {
        let completed = self.rx.ledger.completed_inputs();
        self.t
            .poll(timeout, &mut self.rx)
            .map_err(|e| format!("driver transport: {e}"))?;
        if self.rx.ledger.completed_inputs() != completed {
            self.last_progress = Instant::now();
        }
        for ev in std::mem::take(&mut self.rx.events) {
            match ev {
                Event::ConnectFailed { peer, reason } => {
                    return Err(format!(
                        "worker {peer} at {} cannot be used: {reason}",
                        self.addr_of(peer)
                    ));
                }
                Event::PeerLost { peer, reason, .. } => {
                    let during = match &self.in_flight {
                        Some(f) => format!(
                            " during the migration to epoch {} (its key groups' state is lost; \
                             recovery is not implemented)",
                            f.record.epoch
                        ),
                        None => String::new(),
                    };
                    return Err(format!(
                        "lost worker {peer} at {}{during}: {reason}",
                        self.addr_of(peer)
                    ));
                }
                Event::Refused { addr, reason } => {
                    let e = format!("refused a connection from {addr:?}: {reason}");
                    tracing::warn!("{e}");
                    if !self.errors.contains(&e) {
                        self.errors.push(e);
                    }
                }
                Event::PeerUp { .. } => {}
            }
        }
        while let Some((from, msg)) = self.rx.msgs.pop_front() {
            let msg = msg.map_err(|e| format!("worker {from}: {e}"))?;
            self.on_message(from, msg)?;
        }
        for a in self.planner.on_tick::<()>(now_ns()) {
            self.planner_action(a)?;
        }
        if self.last_progress.elapsed() > self.cfg.stall_timeout {
            return Err(format!(
                "no progress for {:?} ({} of {} tracked roots open); giving up{}",
                self.cfg.stall_timeout,
                self.rx.ledger.open(),
                self.rx.ledger.completed_inputs() + self.rx.ledger.open() as u64,
                if self.errors.is_empty() {
                    String::new()
                } else {
                    format!(" (faults: {})", self.errors.join("; "))
                }
            ));
        }
        Ok(())
    }

    /// Handles one message from worker `from`.
    fn on_message(&mut self, from: PeerId, msg: Message) -> Result<(), String> {
        // Periodic messages (counters, a migration's progress, faults) say a worker lives,
        // not that the run moves: they must not hold off the stall timeout.
        if !matches!(
            msg,
            Message::Counters(_) | Message::Progress(_) | Message::Error(_)
        ) {
            self.last_progress = Instant::now();
        }
        match msg {
            Message::Ready => *self.acks.entry(Ack::Ready).or_default() += 1,
            Message::EosAck { operator } => {
                *self.acks.entry(Ack::EosDone(operator)).or_default() += 1;
            }
            Message::Status(st) => self.statuses.entry(st.round).or_default().push((from, st)),
            Message::Migrated(r) => {
                if self.slots.worker_of(r.slot as usize) != Some(from) {
                    return Err(format!(
                        "worker {from} reported a migration for slot {}, which is not its own",
                        r.slot
                    ));
                }
                for a in self.planner.on_completed::<()>(now_ns(), r.into()) {
                    self.planner_action(a)?;
                }
            }
            Message::Progress(p) => {
                let waiting = p.waiting();
                self.planner
                    .on_progress(now_ns(), p.slot as usize, p.epoch, waiting);
            }
            Message::Counters(c) => {
                if let Some(i) = self.ids.iter().position(|&p| p == c.worker) {
                    self.counters[i] = Some(*c);
                }
            }
            Message::Summary(s) => self.summaries.push(*s),
            Message::Error(e) => {
                let e = format!("worker {from}: {e}");
                tracing::warn!("{e}");
                if !self.errors.contains(&e) {
                    self.errors.push(e);
                }
            }
            other => self.errors.push(format!(
                "worker {from} sent the driver a {} message",
                other.name()
            )),
        }
        Ok(())
    }

    fn broadcast(&mut self, msg: &Message) -> Result<(), String> {
        let body = encode(msg).map_err(|e| format!("a {}: {e}", msg.name()))?;
        for i in 0..self.ids.len() {
            let p = self.ids[i];
            loop {
                match self.t.send_control(p, CONTROL_KIND, &body) {
                    Ok(true) => break,
                    Ok(false) => self.turn(Duration::from_micros(200))?,
                    Err(e) => return Err(format!("to worker {p}: {e}")),
                }
            }
        }
        Ok(())
    }

    fn wait_acks(&mut self, key: Ack, what: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while self.acks.get(&key).copied().unwrap_or(0) < self.ids.len() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "{what}: {} of {} workers answered within {timeout:?}",
                    self.acks.get(&key).copied().unwrap_or(0),
                    self.ids.len()
                ));
            }
            self.turn(DRIVER_PARK)?;
        }
        Ok(())
    }

    /// Waits until the cluster is quiescent (module docs).
    fn quiesce(&mut self, round: &mut u64) -> Result<(), String> {
        let mut clean = 0u32;
        let mut prev: Option<Vec<PeerCounts>> = None;
        loop {
            *round += 1;
            let r = *round;
            self.broadcast(&Message::Probe { round: r })?;
            while self.statuses.get(&r).map_or(0, |v| v.len()) < self.ids.len() {
                self.turn(DRIVER_PARK)?;
            }
            let mut sts = self.statuses.remove(&r).unwrap_or_default();
            sts.sort_by_key(|s| s.0);
            let all_idle = sts.iter().all(|(_, s)| s.idle);
            let sent = |a: PeerId, b: PeerId| -> u64 {
                if a == DRIVER_ID {
                    return self.sent.get(&b).copied().unwrap_or(0);
                }
                sts.iter()
                    .find(|s| s.0 == a)
                    .and_then(|s| s.1.counts.iter().find(|c| c.0 == b))
                    .map_or(0, |c| c.1)
            };
            let received = |b: PeerId, a: PeerId| -> u64 {
                sts.iter()
                    .find(|s| s.0 == b)
                    .and_then(|s| s.1.counts.iter().find(|c| c.0 == a))
                    .map_or(0, |c| c.2)
            };
            let mut balanced = true;
            for &b in &self.ids {
                for a in std::iter::once(DRIVER_ID).chain(self.ids.iter().copied()) {
                    if a != b && sent(a, b) != received(b, a) {
                        balanced = false;
                    }
                }
            }
            let counts: Vec<_> = sts.iter().map(|(p, s)| (*p, s.counts.clone())).collect();
            if all_idle && balanced && prev.as_ref() == Some(&counts) {
                clean += 1;
                if clean + 1 >= QUIET_ROUNDS {
                    return Ok(());
                }
            } else {
                clean = 0;
            }
            prev = Some(counts);
            if !(all_idle && balanced) {
                self.turn(Duration::from_micros(500))?;
            }
        }
    }
}

/// Runs a static cluster job: connects to the workers (already started), feeds the input,
/// completes the end of stream and collects every worker's summary. `Err` is a fault that
/// stopped the run (a worker unreachable, refused, lost, or no progress).
pub fn run_driver(spec: &AppSpec, cfg: &DriverConfig) -> Result<ClusterReport, String> {
    run_driver_with(spec, cfg, &mut Static)
}

/// [`run_driver`] steered by a [`Controller`]: its input rate, and its moves, each carried out
/// as a live migration while the input keeps flowing.
pub fn run_driver_with(
    spec: &AppSpec,
    cfg: &DriverConfig,
    ctl: &mut dyn Controller,
) -> Result<ClusterReport, String> {
    let ids: Vec<PeerId> = cfg.workers.iter().map(|w| w.0).collect();
    if ids.is_empty() || ids.contains(&DRIVER_ID) {
        return Err(format!(
            "worker ids {ids:?}: need at least one, and {DRIVER_ID} is the driver's"
        ));
    }
    let mut tcfg = TransportConfig::new(DRIVER_ID, cfg.listen, cfg.secret.clone(), cfg.cluster_id);
    tcfg.limits = cfg.limits.clone();
    tcfg.peers = cfg.workers.clone();
    let t = Transport::start(tcfg).map_err(|e| format!("driver: {e}"))?;
    let advertise = cfg.advertise.unwrap_or(t.local_addr());
    let ops = spec.operators.len();
    let slots = Slots {
        workers: ids.clone(),
        executors: cfg.executors as usize,
    };
    slots.check_count()?;
    let table = RoutingTable::spread(ops, &ids, cfg.executors, cfg.spread);
    let initial = slots.routing_of(&table)?;
    let preds: Vec<Vec<usize>> = (0..ops).map(|o| spec.predecessors(o)).collect();
    let pcfg = PlannerConfig {
        timeout_ns: cfg.migration_timeout.as_nanos() as u64,
        silent_ns: (cfg.migration_timeout.as_nanos() as u64 / 4).max(MIN_SILENT.as_nanos() as u64),
    };
    let active = active_workers(&initial, &slots).len();
    let mut d = Driver {
        cfg,
        planner: Planner::new(initial, preds, pcfg),
        slots,
        in_flight: None,
        migrations: Vec::new(),
        finished: Vec::new(),
        counters: vec![None; ids.len()],
        prev_counters: vec![None; ids.len()],
        last_worker_intervals: Vec::new(),
        intervals: Vec::new(),
        t0: Instant::now(),
        interval_start: Instant::now(),
        interval_admitted: 0,
        interval_completed: 0,
        interval_migrating: false,
        backlog: 0,
        offered: None,
        active,
        worker_seconds: 0.0,
        active_since: Instant::now(),
        t,
        rx: DriverInbox {
            ledger: Ledger::new(),
            last_completion: Instant::now(),
            msgs: VecDeque::new(),
            decoder: Decoder::default(),
            events: Vec::new(),
        },
        ids: ids.clone(),
        sent: BTreeMap::new(),
        errors: Vec::new(),
        acks: BTreeMap::new(),
        statuses: BTreeMap::new(),
        summaries: Vec::new(),
        last_progress: Instant::now(),
    };
    // 1. Connect, send the job, wait until every worker is ready.
    let deadline = Instant::now() + cfg.ready_timeout;
    while !ids.iter().all(|&p| d.t.is_connected(p)) {
        if Instant::now() >= deadline {
            let missing: Vec<String> = ids
                .iter()
                .filter(|&&p| !d.t.is_connected(p))
                .map(|&p| format!("worker {p} at {}", d.addr_of(p)))
                .collect();
            return Err(format!(
                "not connected within {:?}: {}",
                cfg.ready_timeout,
                missing.join(", ")
            ));
        }
        d.last_progress = Instant::now();
        d.turn(Duration::from_millis(20))?;
    }
    let job = Job {
        app_name: cfg.app_name.clone(),
        app_toml: cfg.app_toml.clone(),
        executors: cfg.executors,
        spread: cfg.spread.into(),
        ring_bytes: cfg.ring_bytes as u64,
        pin: cfg.pin,
        workers: ids.clone(),
        driver: DRIVER_ID,
        driver_addr: advertise.to_string(),
        interval_ms: cfg.interval.as_millis().min(u32::MAX as u128) as u32,
    };
    d.broadcast(&Message::Job(Box::new(job)))?;
    {
        let deadline = Instant::now() + cfg.ready_timeout;
        while d.acks.get(&Ack::Ready).copied().unwrap_or(0) < ids.len() {
            if !d.errors.is_empty() {
                return Err(format!("workers failed to start: {}", d.errors.join("; ")));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} of {} workers ready within {:?}",
                    d.acks.get(&Ack::Ready).copied().unwrap_or(0),
                    ids.len(),
                    cfg.ready_timeout
                ));
            }
            d.last_progress = Instant::now();
            d.turn(DRIVER_PARK)?;
        }
    }
    // 2. Feed.
    let generator = clasp_operators::generate::generator(&spec.generator, cfg.seed)
        .ok_or_else(|| format!("app {} has no generator {}", spec.name, spec.generator))?;
    let sample = cfg.sample_every.max(1);
    let max_in_flight = cfg.max_in_flight.max(1);
    let (mut key, mut payload, mut frame) = (Vec::new(), Vec::new(), Vec::new());
    let mut tracked = 0u64;
    let mut first_admit: Option<Instant> = None;
    d.last_progress = Instant::now();
    d.t0 = Instant::now();
    d.interval_start = d.t0;
    d.active_since = d.t0;
    // A move asked for before any input (an autoscaler's first placement).
    d.maintain(ctl, 0, ops)?;
    // Pacing: a token bucket filled at the controller's current rate, re-read every turn (a
    // rate that changes, or a run that ends, is seen at once). Tokens beyond one are records
    // due and not yet admitted: the ingress's queue when the cluster does not keep up.
    let mut due = 0.0f64;
    let mut last_fill = Instant::now();
    let mut i = 0u64;
    loop {
        let t_s = d.t0.elapsed().as_secs_f64();
        if i >= cfg.records || ctl.done(t_s, i) {
            break;
        }
        let rate = ctl.rate_per_s(t_s).or(cfg.rate_per_s);
        d.offered = rate;
        if let Some(rate) = rate {
            let now = Instant::now();
            let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
            due += rate * now.saturating_duration_since(last_fill).as_secs_f64();
            last_fill = now;
            d.backlog = due as u64;
            if due < 1.0 {
                d.t.flush_now();
                d.last_progress = Instant::now();
                // Wait at least a pacing quantum: one wait per record would cost a system call and
                // a timer per record (half the machine's CPU at 100 k records/s under `perf`).
                let wait = if rate > 0.0 {
                    Duration::from_secs_f64((1.0 - due) / rate)
                        .max(PACING_QUANTUM)
                        .min(DRIVER_PARK)
                } else {
                    DRIVER_PARK
                };
                d.turn(wait)?;
                d.maintain(ctl, i, ops)?;
                continue;
            }
            due -= 1.0;
        }
        let is_tracked = i % sample == 0;
        if is_tracked {
            while tracked - d.rx.ledger.completed_inputs() >= max_in_flight {
                d.t.flush_now();
                d.turn(DRIVER_PARK)?;
                d.maintain(ctl, i, ops)?;
            }
            tracked += 1;
        }
        generator.record_into(i, &mut key, &mut payload);
        let hash = key_hash(&key);
        let kg = key_group(hash);
        let PlannerAction::SendRequest { to, req } = d.planner.admit(spec.source, kg as usize, ())
        else {
            unreachable!("admit routes");
        };
        let owner = d.slots.worker_of(to).ok_or("the routing names no worker")?;
        let id = root_id(i);
        let header = RequestHeader {
            operator: spec.source as u16,
            key_group: kg,
            flags: if is_tracked { FLAG_TRACKED } else { 0 },
            epoch: req.epoch as u16,
            dest: to as u16,
            root_home: DRIVER_ID as u16,
            source: INGRESS_SLOT,
            key_hash: hash,
            request_id: id,
            root_id: id,
            admitted_ns: now_ns(),
        };
        frame.resize(frame_len(key.len(), payload.len()), 0);
        header.write(&key, &payload, &mut frame);
        loop {
            match d.t.try_append(owner, &frame) {
                Ok(true) => break,
                Ok(false) => d.turn(Duration::from_micros(200))?,
                Err(e) => return Err(format!("record {i} to worker {owner}: {e}")),
            }
        }
        first_admit.get_or_insert_with(Instant::now);
        *d.sent.entry(owner).or_default() += 1;
        i += 1;
        if i % POLL_EVERY_RECORDS == 0 {
            d.turn(Duration::ZERO)?;
            d.maintain(ctl, i, ops)?;
        }
    }
    let admitted = i;
    d.t.flush_now();
    // 3. Every tracked root completes, and every migration (a controller may still move).
    loop {
        d.maintain(ctl, admitted, ops)?;
        if d.rx.ledger.completed_inputs() >= tracked && d.in_flight.is_none() {
            break;
        }
        d.turn(DRIVER_PARK)?;
    }
    d.account_active();
    let last_completion = d.rx.last_completion;
    // 4. End of stream, operator by operator.
    let mut round = 0u64;
    d.quiesce(&mut round)?;
    for op in spec.topological_order() {
        let op = op as u16;
        d.broadcast(&Message::Eos { operator: op })?;
        d.wait_acks(Ack::EosDone(op), "end of stream", cfg.stall_timeout)?;
        d.quiesce(&mut round)?;
    }
    // 5. Summaries.
    d.broadcast(&Message::Finish)?;
    let deadline = Instant::now() + cfg.stall_timeout;
    while d.summaries.len() < ids.len() {
        if Instant::now() >= deadline {
            return Err(format!(
                "{} of {} worker summaries within {:?}",
                d.summaries.len(),
                ids.len(),
                cfg.stall_timeout
            ));
        }
        d.turn(DRIVER_PARK)?;
    }
    d.broadcast(&Message::Bye)?;
    // Let the byes leave (the workers close their connections when they exit).
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let _ = d.t.poll(Duration::from_millis(10), &mut d.rx);
    }
    let elapsed = first_admit.map_or(Duration::ZERO, |t| {
        last_completion.saturating_duration_since(t)
    });
    Ok(build(spec, d, admitted, elapsed))
}

fn build(spec: &AppSpec, d: Driver, admitted: u64, elapsed: Duration) -> ClusterReport {
    let ops = spec.operators.len();
    let mut summaries = vec![OperatorSummary::default(); ops];
    let mut state_keys = vec![0u64; ops];
    let mut malformed: Vec<BTreeMap<String, u64>> = vec![Default::default(); ops];
    let mut metrics = vec![ClusterOperatorMetrics::default(); ops];
    let mut exec_ns = vec![0u64; ops];
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors = d.errors;
    let mut workers = d.summaries;
    workers.sort_by_key(|w| w.worker);
    for w in &workers {
        let ok = w.summaries.len() == ops
            && w.state_keys.len() == ops
            && w.malformed.len() == ops
            && w.processed.len() == ops
            && w.exec_ns.len() == ops
            && w.edges_local.len() == ops * ops
            && w.edges_remote.len() == ops * ops;
        if !ok {
            errors.push(format!(
                "worker {} sent a summary of another shape",
                w.worker
            ));
            continue;
        }
        for op in 0..ops {
            summaries[op].combine(&w.summaries[op]);
            state_keys[op] += w.state_keys[op];
            for (r, n) in &w.malformed[op] {
                *malformed[op].entry(r.clone()).or_default() += n;
            }
            metrics[op].processed += w.processed[op];
            exec_ns[op] += w.exec_ns[op];
            for to in 0..ops {
                let name = &spec.operators[to].name;
                let m = &mut metrics[op];
                for (edges, map) in [
                    (&w.edges_local, &mut m.chained_local),
                    (&w.edges_remote, &mut m.chained_remote),
                ] {
                    let n = edges[op * ops + to];
                    if n > 0 {
                        *map.entry(name.clone()).or_default() += n;
                    }
                }
            }
        }
        for (k, v) in &w.totals {
            if k == "remote_destinations" {
                let e = totals.entry(k.clone()).or_default();
                *e = (*e).max(*v);
            } else {
                *totals.entry(k.clone()).or_default() += v;
            }
        }
        for e in &w.errors {
            let e = format!("worker {}: {e}", w.worker);
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    for op in 0..ops {
        metrics[op].exec_ns_mean = exec_ns[op] as f64 / metrics[op].processed.max(1) as f64;
    }
    totals.insert("driver_sent".into(), d.sent.values().sum());
    totals.insert("migrations".into(), d.migrations.len() as u64);
    ClusterReport {
        summaries,
        state_keys,
        malformed: malformed
            .into_iter()
            .map(|m| m.into_iter().collect())
            .collect(),
        operator_metrics: metrics,
        admitted,
        latency: d.rx.ledger.summary(),
        elapsed,
        totals,
        errors,
        workers,
        migrations: d.migrations,
        intervals: d.intervals,
        worker_seconds: d.worker_seconds,
    }
}
