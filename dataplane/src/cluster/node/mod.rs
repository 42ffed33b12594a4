//! A cluster worker: the executors of one worker segment plus the network thread (the calling
//! thread), which owns the transport and is the front of the worker's
//! [`Coordinator`](crate::runtime::coordinator) for the driver: the same coordinator as a worker
//! on its own, with input from the driver and reports forwarded to it.
//!
//! The network thread's turn: move frames from the executors' `net_out` rings into the
//! destination workers' batches (peeked and released only once the transport took them, so a
//! refused append leaves the frame where it is and nothing is dropped), forward the executors'
//! reports (ledger deltas to the driver, held up to [`REPORT_HOLD`]: `reports.rs`;
//! end-of-stream acknowledgements; faults), then one `Transport::poll`, which delivers
//! received frames into the owning executor's ring (`ingress(e)` for roots from the driver,
//! `net_in(e)` for chained requests from other workers; `Full` when it has no room, so credit
//! stops the sender) and parks when there is nothing to do. Executors wake it through the
//! transport's eventfd ([`NetLink`](crate::runtime::executor::NetLink)).
//!
//! A [`ClusterWorker`] keeps its transport (its port, its links to the other workers) from one
//! job to the next, and starts each job's executors and segment afresh (`between.rs`: what it
//! does while it waits for one); `join.rs` and `leave.rs` are its side of joining and leaving a
//! running cluster.

mod between;
mod error;
mod join;
mod leave;
mod plans;
mod receiver;
mod reports;
mod snapshot;
mod start;
mod summary;

use crate::runtime::coordinator::REPORT_HOLD;
pub use error::NodeError;
use receiver::{Receiver, Rings};

use between::{await_job, dial_cluster_peers};
use plans::{check_plans, deliver_plans};
use start::start_executors;
use summary::{counters, finish};

use super::{Counters, DELTAS_PER_MESSAGE, Job, Status, WorkerSummary};
use crate::message::{CONTROL_KIND, Decoder, Message, encode};
use crate::request::RequestHeader;
use crate::routing::Slots;
use crate::runtime::IdlePolicy;
use crate::runtime::coordinator::Coordinator;
use crate::runtime::deltas::PendingDeltas;
use crate::runtime::executor::PlanMail;
use crate::runtime::layout::{WorkerSegment, scalar};
use crate::transport::{ClusterSecret, Event, Limits, PeerId, Transport, TransportConfig};
use clasp_operators::{AppSpec, Registry};
use clasp_protocol::Slot;
use clasp_shmring::{Consumer, ShmRing};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Frames moved from one `net_out` ring per turn (then the other rings get a turn).
const NET_OUT_FRAMES_PER_TURN: usize = 1024;
/// Messages queued for the driver beyond which the executors' reports are left in their rings
/// (they keep their deltas; the report rings and then the executors' own queues hold them).
const OUTBOX_MAX_MESSAGES: usize = 256;
/// Longest park while nothing is pending (a worker with no input uses ~0% CPU).
const IDLE_PARK: Duration = Duration::from_millis(20);
/// Park while the transport holds frames our rings had no room for (nobody wakes us when an
/// executor frees room, so look again soon).
const HELD_PARK: Duration = Duration::from_micros(200);
/// Longest wait for the driver's `BYE` after the summary was sent.
const BYE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker retries binding a listen port that is still in use.
const BIND_RETRY: Duration = Duration::from_secs(5);
/// Most faults a worker reports (a fault storm must not flood the driver).
const MAX_ERRORS: usize = 64;
/// How long a worker that cannot start its job keeps trying to tell the driver why.
const START_FAULT_GRACE: Duration = Duration::from_secs(5);
/// Turns a worker that cannot start its job still polls once its reason is handed to the
/// transport, so that the reason reaches the driver before the connection closes.
const START_FAULT_LINGER_TURNS: usize = 5;
/// A turn of the network thread while it only waits for something (the job, the driver).
const WAIT_TURN: Duration = Duration::from_millis(10);
/// A turn while waiting for the job.
const JOB_WAIT_TURN: Duration = Duration::from_millis(50);
/// Between two tries to bind a listen port that is still in use.
const BIND_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Settings of a cluster worker.
#[derive(Clone, Debug)]
pub struct ClusterWorkerConfig {
    /// This worker's id (1..=`MAX_PEER_ID`).
    pub id: PeerId,
    /// Where to listen.
    pub listen: SocketAddr,
    /// The cluster id (bound into the handshake).
    pub cluster_id: u64,
    /// Every worker of the cluster, this one included, in cluster-file order.
    pub workers: Vec<(PeerId, SocketAddr)>,
    /// The cluster secret.
    pub secret: ClusterSecret,
    /// Transport limits (batch size and age, credits).
    pub limits: Limits,
    /// How long to wait for the driver's job before giving up.
    pub job_timeout: Duration,
    /// Join the running cluster whose driver listens here (`workers` then holds only this
    /// worker, and where the others reach it: `join.rs`).
    pub join: Option<SocketAddr>,
    /// Set (by SIGTERM) when this worker is to leave: during a job it asks the driver to move
    /// its key groups away and let it go; between jobs it stops at once (`leave.rs`).
    pub leave: Option<Arc<AtomicBool>>,
    /// How long a leave may take before the worker gives up on it.
    pub leave_timeout: Duration,
    /// The operator kinds this worker can run: a job whose app names another kind is refused,
    /// naming it (the worker was started from a binary that does not register it).
    pub registry: Registry,
    /// What idle executors and the network thread do; `None`: what each job says.
    pub idle: Option<IdlePolicy>,
}

/// How a cluster worker's run ended (it had a job; errors before that are `Err`).
#[derive(Debug)]
pub struct WorkerExit {
    /// The app it ran.
    pub app: String,
    /// Faults it saw (also sent to the driver where possible).
    pub errors: Vec<String>,
}

/// The executors and the segment of a running job.
struct Running {
    spec: Arc<AppSpec>,
    /// The executors, their segment and their reports.
    coordinator: Coordinator,
    executors: usize,
    net_out: Vec<Consumer<ShmRing>>,
    slots: Slots,
    /// This worker's index in the job's worker list.
    index: usize,
    /// The workers this one must be connected to before it is ready.
    peers: Vec<PeerId>,
    /// Per executor: its plan mailbox.
    plans: Vec<Arc<Mutex<VecDeque<PlanMail>>>>,
    parked: Arc<AtomicBool>,
    interval: Option<Duration>,
    /// Where this process's CPU time is read (its own cgroup when capped).
    cpu: crate::cpu_usage::CpuSource,
    /// Where its throttling is read (its own cgroup when capped).
    throttling: crate::cpu_usage::Throttling,
    /// The executors' snapshot mailboxes, and the checkpoint being taken.
    snap: snapshot::Snapshots,
    /// The process's voluntary context switches when the job started (a worker that outlives
    /// runs reports the job's own).
    sleeps_from: u64,
}

impl Running {
    fn seg(&self) -> &WorkerSegment {
        self.coordinator.segment()
    }

    /// Whether every executor is parked with nothing left in its `net_out` ring: no request
    /// for another worker is coming until new input arrives.
    fn executors_idle(&self) -> bool {
        self.coordinator.executors_parked() && self.net_out.iter().all(|c| c.pending_bytes() == 0)
    }
}

/// The network thread's state.
struct Node {
    t: Transport,
    rx: Receiver,
    id: PeerId,
    driver: Option<PeerId>,
    /// Encoded messages for the driver, in order (deltas before the acknowledgements after
    /// them).
    outbox: VecDeque<Vec<u8>>,
    /// Ledger deltas read and not yet sent, combined per root.
    deltas: PendingDeltas,
    /// When the oldest of `deltas` was read.
    deltas_since: Option<Instant>,
    /// Request frames handed to the transport, per destination.
    sent: Vec<u64>,
    /// A `net_out` frame was refused this turn.
    blocked: bool,
    errors: Vec<String>,
    /// Workers whose loss was reported to the driver.
    lost_links: Vec<PeerId>,
    /// Workers that left the run: their connections closing is not a fault.
    departed: Vec<PeerId>,
    /// The leave flag and timeout of the config, and when the leave was asked for.
    leave: leave::Leave,
}

impl Node {
    fn new(t: Transport, id: PeerId) -> Node {
        Node {
            t,
            rx: Receiver {
                rings: None,
                msgs: VecDeque::new(),
                decoder: Decoder::default(),
                events: Vec::new(),
                received: Vec::new(),
                held: false,
                faults: Vec::new(),
            },
            id,
            driver: None,
            outbox: VecDeque::new(),
            deltas: PendingDeltas::default(),
            deltas_since: None,
            sent: Vec::new(),
            blocked: false,
            errors: Vec::new(),
            lost_links: Vec::new(),
            departed: Vec::new(),
            leave: leave::Leave::default(),
        }
    }

    /// Forgets the last job: its driver, its queued messages, its quiescence counts (every
    /// job counts from zero on every worker: each starts after the last one's end was
    /// quiescent) and its faults.
    fn reset_for_job(&mut self) {
        self.driver = None;
        self.outbox.clear();
        self.deltas = PendingDeltas::default();
        self.deltas_since = None;
        self.sent.clear();
        self.blocked = false;
        self.errors.clear();
        self.lost_links.clear();
        self.departed.clear();
        self.leave.asked = None;
        let rx = &mut self.rx;
        rx.rings = None;
        rx.msgs.clear();
        rx.events.clear();
        rx.received.clear();
        rx.held = false;
        rx.faults.clear();
    }

    /// Reports a fault: logged and sent to the driver the first time, at debug level after
    /// that (every request dropped on the way to a dead worker is the same fault: hundreds of
    /// identical warnings would bury the one that matters).
    fn fault(&mut self, e: String) {
        if self.errors.contains(&e) {
            tracing::debug!("worker {}: {e} (again)", self.id);
            return;
        }
        tracing::warn!("worker {}: {e}", self.id);
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e.clone());
            self.push(&Message::Error(e));
        }
    }

    /// Tells the driver that the connection to worker `peer` is gone (once per peer).
    fn link_lost(&mut self, peer: PeerId, reason: String) {
        tracing::warn!(
            "worker {}: lost the connection to worker {peer}: {reason}",
            self.id
        );
        if !self.lost_links.contains(&peer) {
            self.lost_links.push(peer);
            self.push(&Message::LinkLost { peer, reason });
        }
    }

    /// Queues a message for the driver, behind the deltas read before it.
    fn push(&mut self, msg: &Message) {
        self.queue_deltas();
        self.push_now(msg);
    }

    fn push_now(&mut self, msg: &Message) {
        match encode(msg) {
            Ok(body) => self.outbox.push_back(body),
            // Only a bug makes encoding fail; say so rather than lose it silently.
            Err(e) => tracing::error!("worker {}: a {}: {e}", self.id, msg.name()),
        }
    }

    fn flush_outbox(&mut self) -> Result<(), NodeError> {
        let Some(driver) = self.driver else {
            return Ok(());
        };
        while let Some(body) = self.outbox.front() {
            match self.t.send_control(driver, CONTROL_KIND, body) {
                Ok(true) => {
                    self.outbox.pop_front();
                }
                Ok(false) => break,
                Err(e) => return Err(NodeError::transport("sending to the driver", e)),
            }
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, run: Option<&Running>) -> Result<(), NodeError> {
        self.rx.held = false;
        let mut timeout = timeout;
        if let Some(r) = run {
            r.parked.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // Frames the last pump could not send (no credit from their peer: one stopped or
            // slow) do not count: waiting for that credit is what the park is for. Counted, a
            // worker whose peer was stopped spun a core until the run gave up on it.
            let out = !self.blocked && r.net_out.iter().any(|c| c.pending_bytes() > 0);
            let pending = out || r.coordinator.reports_pending();
            if pending {
                timeout = Duration::ZERO;
            }
        }
        let res = self.t.poll(timeout, &mut self.rx);
        if let Some(r) = run {
            r.parked.store(false, Ordering::Relaxed);
        }
        self.rx.publish();
        res.map(|_| ())
            .map_err(|e| NodeError::transport("transport", e))
    }

    /// Moves frames from the executors' `net_out` rings into batches. Returns frames moved.
    fn pump_out(&mut self, run: &mut Running) -> usize {
        let mut moved = 0;
        self.blocked = false;
        let mut faults = Vec::new();
        for c in run.net_out.iter_mut() {
            for _ in 0..NET_OUT_FRAMES_PER_TURN {
                let frame = match c.peek() {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => {
                        faults.push(format!("net_out ring: {e}"));
                        break;
                    }
                };
                let dest = match RequestHeader::peek(&frame)
                    .ok()
                    .and_then(|h| run.slots.worker_of(Slot(u32::from(h.dest))))
                {
                    Some(w) if w != self.id => w,
                    _ => {
                        faults.push("an executor wrote a bad request frame; dropped".into());
                        frame.release_deferred();
                        continue;
                    }
                };
                match self.t.try_append(dest, &frame) {
                    Ok(true) => {
                        frame.release_deferred();
                        let i = dest as usize;
                        if self.sent.len() <= i {
                            self.sent.resize(i + 1, 0);
                        }
                        self.sent[i] += 1;
                        moved += 1;
                    }
                    Ok(false) => {
                        // No credit or batch space: the frame stays in the ring (peeked, not
                        // released) and is offered again next turn.
                        self.blocked = true;
                        break;
                    }
                    Err(e) => {
                        faults.push(format!("request to worker {dest}: {e}; dropped"));
                        frame.release_deferred();
                    }
                }
            }
            c.publish_release();
        }
        for f in faults {
            self.fault(f);
        }
        moved
    }

    fn status(&self, round: u64, run: &Running) -> Status {
        let idle = !self.rx.held && !self.blocked && run.coordinator.quiescent();
        let n = self.sent.len().max(self.rx.received.len());
        let counts = (0..n)
            .map(|p| {
                (
                    p as PeerId,
                    self.sent.get(p).copied().unwrap_or(0),
                    self.rx.received.get(p).copied().unwrap_or(0),
                )
            })
            .filter(|&(_, s, r)| s > 0 || r > 0)
            .collect();
        Status {
            round,
            idle,
            counts,
        }
    }
}

/// A cluster worker between jobs: its transport, listening, and the network thread's state.
/// [`ClusterWorker::run_job`] serves one job after another on the same transport, so a worker
/// runs for as long as drivers keep sending it work, without a supervisor to restart it.
pub struct ClusterWorker {
    cfg: ClusterWorkerConfig,
    node: Node,
    /// Whether the last `run_job` received its job (its fault, if any, was the job's).
    had_job: bool,
}

impl ClusterWorker {
    /// Binds the worker's port and starts its transport (connecting to the cluster file's
    /// other workers).
    pub fn start(cfg: &ClusterWorkerConfig) -> Result<ClusterWorker, NodeError> {
        let t = start_transport(cfg)?;
        let mut node = Node::new(t, cfg.id);
        node.leave.flag = cfg.leave.clone();
        node.leave.timeout = cfg.leave_timeout;
        Ok(ClusterWorker {
            had_job: false,
            cfg: cfg.clone(),
            node,
        })
    }

    /// Whether the last [`run_job`](Self::run_job) received its job before it ended (a
    /// fault it returned was that job's, not a failure to get one).
    pub fn had_job(&self) -> bool {
        self.had_job
    }

    /// The address the worker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.node.t.local_addr()
    }

    /// Waits for a driver's job (at most the configured job timeout: `NoJob`), runs it until
    /// the driver says `BYE` and leaves the worker ready for the next one. An `Err` is a fault
    /// that ended this job (also logged).
    pub fn run_job(&mut self) -> Result<WorkerExit, NodeError> {
        self.had_job = false;
        self.node.reset_for_job();
        dial_cluster_peers(&mut self.node, &self.cfg)?;
        if let Some(driver) = self.cfg.join {
            join::ask(&mut self.node, &self.cfg, driver)?;
        }
        let job = await_job(&mut self.node, &self.cfg)?;
        self.had_job = true;
        let result = run_one(&self.cfg, &mut self.node, &job);
        self.node.rx.rings = None;
        result
    }
}

/// Runs one cluster worker until the driver says `BYE` (one job). `listening` is called with
/// the bound address. An `Err` is a fault that ended the worker (also logged).
pub fn run_cluster_worker(
    cfg: &ClusterWorkerConfig,
    listening: impl FnOnce(SocketAddr),
) -> Result<WorkerExit, NodeError> {
    let mut w = ClusterWorker::start(cfg)?;
    listening(w.local_addr());
    w.run_job()
}

/// Runs the job the driver sent: starts the executors, serves until `FINISH`, stops them and
/// sends the summary.
fn run_one(cfg: &ClusterWorkerConfig, node: &mut Node, job: &Job) -> Result<WorkerExit, NodeError> {
    let mut run = match prepare(node, cfg, job) {
        Ok(r) => r,
        Err(e) => {
            node.fault(e.to_string());
            // Tell the driver, then give up.
            let until = Instant::now() + START_FAULT_GRACE;
            while !node.outbox.is_empty() && Instant::now() < until {
                let _ = node.flush_outbox();
                node.poll(WAIT_TURN, None)?;
            }
            // The message left the outbox for the transport; a few more turns let its send
            // complete before this process exits and closes the connection.
            node.t.flush_now();
            for _ in 0..START_FAULT_LINGER_TURNS {
                node.poll(WAIT_TURN, None)?;
            }
            return Err(e);
        }
    };
    node.rx.rings = Some(rings_of(&run, job.driver)?);
    let result = serve(node, &mut run);
    // Stop the executors whatever happened.
    let stopped = run.coordinator.stop();
    node.errors.extend(stopped.unpinned);
    if let Some(e) = stopped.sink_error
        && !node.errors.contains(&e)
    {
        node.errors.push(e);
    }
    node.errors.extend(
        stopped
            .panicked
            .iter()
            .map(|e| format!("executor {e} panicked")),
    );
    result?;
    finish(node, &run, stopped.results)?;
    Ok(WorkerExit {
        app: run.spec.name.clone(),
        errors: std::mem::take(&mut node.errors),
    })
}

/// The worker's transport, listening. A port just released by a previous run's worker can stay
/// busy for a moment (a closing connection still holds it): retry briefly rather than fail.
fn start_transport(cfg: &ClusterWorkerConfig) -> Result<Transport, NodeError> {
    if !cfg.workers.iter().any(|(p, _)| *p == cfg.id) {
        return Err(NodeError::NotInCluster(cfg.id));
    }
    let mut tcfg = TransportConfig::new(cfg.id, cfg.listen, cfg.secret.clone(), cfg.cluster_id);
    tcfg.limits = cfg.limits.clone();
    tcfg.peers = cfg
        .workers
        .iter()
        .filter(|(p, _)| *p != cfg.id)
        .copied()
        .collect();
    let bind_deadline = Instant::now() + BIND_RETRY;
    loop {
        match Transport::start(tcfg.clone()) {
            Ok(t) => return Ok(t),
            Err(crate::transport::TransportError::Listen { source, .. })
                if source.kind() == std::io::ErrorKind::AddrInUse
                    && Instant::now() < bind_deadline =>
            {
                std::thread::sleep(BIND_RETRY_PAUSE);
            }
            Err(e) => return Err(NodeError::transport(format!("worker {}", cfg.id), e)),
        }
    }
}

/// Connects back to the driver, checks the job against this worker's cluster file and starts
/// its executors.
fn prepare(node: &mut Node, cfg: &ClusterWorkerConfig, job: &Job) -> Result<Running, NodeError> {
    let ids: Vec<PeerId> = cfg.workers.iter().map(|w| w.0).collect();
    let driver_addr: SocketAddr = job
        .driver_addr
        .parse()
        .map_err(|e| NodeError::Job(format!("driver address {:?}: {e}", job.driver_addr)))?;
    node.t
        .connect(job.driver, driver_addr)
        .map_err(|e| NodeError::transport("connecting to the driver", e))?;
    node.driver = Some(job.driver);
    // The job's workers are the cluster file's, then those reserved for joiners.
    let peers = if job.peers.is_empty() {
        check_addresses(cfg, job)?;
        dial_cluster_peers(node, cfg)?;
        if !job.workers.starts_with(&ids) {
            return Err(NodeError::Job(format!(
                "the driver's workers {:?} do not start with this cluster file's {:?}",
                job.workers, ids
            )));
        }
        ids.iter().copied().filter(|&p| p != cfg.id).collect()
    } else {
        join::connect_peers(node, cfg, job)?
    };
    let spec = if job.app_toml.is_empty() {
        clasp_operators::apps::builtin(&job.app_name)
            .ok_or_else(|| NodeError::Job(format!("no built-in app {:?}", job.app_name)))?
    } else {
        // An unknown kind here means this worker's binary does not register it.
        AppSpec::from_toml_str_with(&cfg.registry, &job.app_toml)
            .map_err(|e| NodeError::Job(format!("cannot run the job's app: {e}")))?
    };
    let mut run = start_executors(cfg, job, Arc::new(spec), &node.t)
        .map_err(|e| NodeError::Job(e.to_string()))?;
    node.t
        .set_idle_spin(start::idle_policy(cfg, job).network_spin());
    // The job's own figures: a worker that outlives runs has counted the jobs before it, the
    // waits between them and the connections it refused meanwhile.
    node.t.reset_counters();
    run.peers = peers;
    Ok(run)
}

/// Refuses a job whose driver read the cluster file's workers at other ports than this worker's
/// copy of it: the copies disagree, and a link would fail seconds into the run. Another host
/// (same port) is only logged: a name may rightly resolve differently on two hosts. This
/// worker's own entry is not compared (a host's own name often resolves to a loopback address
/// there).
fn check_addresses(cfg: &ClusterWorkerConfig, job: &Job) -> Result<(), NodeError> {
    for &(id, ours) in cfg.workers.iter().filter(|w| w.0 != cfg.id) {
        let Some((_, theirs)) = job.addresses.iter().find(|a| a.0 == id) else {
            continue;
        };
        let Ok(theirs) = theirs.parse::<SocketAddr>() else {
            return Err(NodeError::Job(format!(
                "the driver's address of worker {id}, {theirs:?}, is not an address"
            )));
        };
        let what =
            format!("the driver has worker {id} at {theirs}, this worker's cluster file at {ours}");
        if theirs.port() != ours.port() {
            return Err(NodeError::Job(format!(
                "{what}: every process must read the same cluster file"
            )));
        }
        if theirs.ip() != ours.ip() {
            tracing::warn!("{what} (the name resolves differently here?)");
        }
    }
    Ok(())
}

/// The rings the network thread delivers into: each executor's `ingress` (roots from the
/// driver) and `net_in` (chained requests from other workers).
fn rings_of(run: &Running, driver: PeerId) -> Result<Rings, NodeError> {
    let seg = run.seg();
    Ok(Rings {
        slots: run.slots.clone(),
        base: run.slots.slot(run.index, 0).index(),
        driver,
        ingress: (0..run.executors)
            .map(|e| seg.segment.producer(seg.index.ingress(e)))
            .collect::<Result<_, _>>()?,
        net_in: (0..run.executors)
            .map(|e| seg.segment.producer(seg.index.net_in(e)))
            .collect::<Result<_, _>>()?,
        dirty_ingress: vec![false; run.executors],
        dirty_net_in: vec![false; run.executors],
    })
}

/// The run: until the driver says `FINISH`.
fn serve(node: &mut Node, run: &mut Running) -> Result<(), NodeError> {
    let driver = node.driver.unwrap_or(super::DRIVER_ID);
    let mut ready_sent = false;
    let mut next_counters = Instant::now();
    loop {
        leave::tick(node)?;
        if let Some(iv) = run.interval
            && ready_sent
            && Instant::now() >= next_counters
        {
            next_counters = Instant::now() + iv;
            let c = counters(node, run);
            node.push(&Message::Counters(Box::new(c)));
        }
        let moved = node.pump_out(run);
        // With every executor parked the batches will not grow before new input: send them
        // now, not after the batch age (a timer wake-up of this thread, and that much
        // latency, per quiet turn). Only on a turn that found no new frame: under load the
        // executors' metrics line (written per output) is not read on every turn.
        if moved == 0 && run.executors_idle() {
            node.t.flush_now();
        }
        let reported = node.read_reports(run);
        for f in std::mem::take(&mut node.rx.faults) {
            node.fault(f);
        }
        if !ready_sent
            && node.t.is_connected(driver)
            && run.peers.iter().all(|&p| node.t.is_connected(p))
        {
            node.push(&Message::Ready);
            ready_sent = true;
        }
        node.flush_outbox()?;
        let mut timeout = if moved > 0 || reported {
            Duration::ZERO
        } else if node.rx.held || node.blocked || !node.outbox.is_empty() {
            HELD_PARK
        } else {
            IDLE_PARK
        };
        if timeout > REPORT_HOLD {
            timeout = node.quiet_park(run, timeout);
        }
        if let Some(due) = node.deltas_due_in() {
            timeout = timeout.min(due);
        }
        node.poll(timeout, Some(run))?;
        for ev in std::mem::take(&mut node.rx.events) {
            match ev {
                Event::PeerLost { peer, reason, .. } if peer == driver => {
                    return Err(NodeError::Driver(format!(
                        "lost the driver's connection: {reason}"
                    )));
                }
                Event::ConnectFailed { peer, reason, .. } if peer == driver => {
                    return Err(NodeError::Driver(format!(
                        "cannot reach the driver: {reason}"
                    )));
                }
                // A worker that left closes its connections.
                Event::PeerLost { peer, .. } | Event::ConnectFailed { peer, .. }
                    if node.departed.contains(&peer) => {}
                // A lost link loses the requests between the two workers: the driver ends
                // the run naming both, or restarts it from its last checkpoint.
                Event::PeerLost { peer, reason, .. }
                | Event::ConnectFailed { peer, reason, .. } => node.link_lost(peer, reason),
                // Counted and logged by the transport; not a fault of the run.
                Event::Refused { .. } | Event::PeerUp { .. } => {}
            }
        }
        while let Some((from, msg)) = node.rx.msgs.pop_front() {
            if from != driver {
                node.fault(format!(
                    "a control message from {from}, not the driver; ignored"
                ));
                continue;
            }
            match msg {
                Ok(msg) => {
                    if on_message(node, run, msg)? {
                        return Ok(());
                    }
                }
                Err(e) => node.fault(format!("a bad message from the driver: {e}")),
            }
        }
    }
}

/// Handles one message from the driver. Returns whether it said `Finish`.
fn on_message(node: &mut Node, run: &mut Running, msg: Message) -> Result<bool, NodeError> {
    match msg {
        Message::Eos { operator: op } if (op as usize) < run.spec.operators.len() => {
            run.coordinator.end_of_stream(op);
        }
        Message::Eos { operator } => node.fault(format!(
            "end of stream for operator {operator}, which the app lacks"
        )),
        Message::Probe { round } => {
            // Answer only once every frame and report before the probe is out.
            node.pump_out(run);
            node.read_reports(run);
            let st = node.status(round, run);
            node.push(&Message::Status(st));
        }
        Message::Plans(plans) => {
            let parts = plans.assignments().map_err(|e| e.to_string());
            match parts.and_then(|p| check_plans(p, run)) {
                Ok(parts) => deliver_plans(node, run, parts),
                Err(e) => node.fault(format!("bad plan from the driver: {e}")),
            }
        }
        Message::CopyAhead { routing } => plans::deliver_copy_ahead(node, run, &routing),
        Message::PeerJoined { peer, addr } => join::peer_joined(node, run, peer, &addr),
        Message::PeerLeft { peer } => leave::peer_left(node, run, peer),
        Message::Snapshot { id, dir } => snapshot::start(node, run, id, dir),
        Message::Finish => return Ok(true),
        Message::Bye => {
            return Err(NodeError::Driver(
                "the driver said bye before finish".into(),
            ));
        }
        Message::Job(_) => node.fault("a second job; ignored".into()),
        other => node.fault(format!(
            "a {} message from the driver; ignored",
            other.name()
        )),
    }
    Ok(false)
}
