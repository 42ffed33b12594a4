//! An executor: one thread that owns the state of its key groups and runs operators on the
//! requests in its inbound rings.
//!
//! Per batch of up to 32 frames from one ring, when an operator here keeps keyed state: a first
//! pass reads each header's operator, key group and key hash and prefetches the state the
//! request will look up (`OperatorInstance::state_lines`), so the batch's cache misses overlap
//! instead of each request waiting for its own; a hint only — a frame whose key hash is wrong
//! is still looked up by its key. Then per request: parse the header in place, run the
//! operator (the instance owns the key group's state; no lock), then route each emission by
//! (operator, key group) and write it once, as a request frame, straight into the target
//! executor's ring (reserve → write → commit, published once per batch). A tracked request
//! that emits no request reports one ledger delta for its root; one that does hands its id on
//! to its last child (`ledger.rs`).
//!
//! A request to this executor itself skips the ring: it is queued in the executor's own memory
//! (`local_queue.rs`: header, key and payload, no frame, no parse) and run once the batch that
//! emitted it is done, each request's state prefetched a few requests before it runs. Not
//! during a migration (the protocol machine must see every frame), and not while anything it
//! sent itself still waits in its own ring or overflow (per-key order: that runs first); then
//! it takes the ring.
//! `CLASP_LOCAL_QUEUE=0` turns it off.
//!
//! It never blocks in the middle of emitting: a frame whose ring is full goes to a per-target
//! overflow queue (kept in FIFO order with what follows it), and while any overflow is
//! pending the executor stops reading new input from the ingress — but keeps serving the other
//! executors, so a pipeline crossing back and forth between executors (o1 on A → o2 on B → o3
//! on A) cannot deadlock on full rings. With the ingress admitting a bounded number of roots,
//! the overflow is bounded too.
//!
//! In a cluster, an emission whose key group another worker owns is written the same way into
//! `net_out(e)`, the ring to the worker's network thread (which finds the destination from the
//! frame's header and appends it to that worker's batch): every ring written is a lane of one
//! `Outbound` (its `outbound` module), with its own overflow queue. Requests from other
//! workers arrive on `net_in(e)`, which is served like the other executors' rings (never
//! gated: refusing it could block a peer that waits for us).

use super::RuntimeError;
use super::layout::{ExecutorMetrics, MESSAGE_FRAME_BYTES_MAX, WorkerSegment, scalar};
use super::ledger::{ChildIds, Delta};
use super::messages::{Command, Report, deltas_frame_bytes};
use crate::request::{FLAG_CONTROL, FLAG_TRACKED, Request, RequestHeader};
use crate::routing::{FlatRouting, Slots, flatten};
use crate::sink::SinkWriter;
use clasp_operators::key::{key_group, key_hash};
use clasp_operators::{AppSpec, Emitter, OperatorInstance, OperatorSummary, Target};
use clasp_protocol::assignment::Assignment;
use clasp_protocol::ids::Epoch;
use clasp_protocol::routing::RoutingTable;
use clasp_shmring::{
    Error as RingError, FanIn, Pass, Producer, ShmRing, WaitPolicy, prefetch_read,
};
use outbound::Outbound;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod ahead;
mod installs;
mod local_queue;
mod migrating;
use migrating::EmittedBy;
mod outbound;
mod outputs;
mod reports;
mod sending;
mod snapshot;
mod spans;
mod starving;
mod timers;
mod timing;

pub use snapshot::{ExecutorSnapshot, SnapshotBox};

/// Longest error message an executor reports (a frame must fit its report ring).
const ERROR_REPORT_BYTES_MAX: usize = 4096;
/// Frames read from one ring before the executor looks at the others.
const BATCH_FRAMES: usize = 32;
/// Ledger deltas per report frame (a frame must fit its report ring).
const DELTAS_PER_REPORT: usize = 1024;
const _: () = assert!(deltas_frame_bytes(DELTAS_PER_REPORT) <= MESSAGE_FRAME_BYTES_MAX);
const _: () = assert!(ERROR_REPORT_BYTES_MAX < MESSAGE_FRAME_BYTES_MAX);
/// Execution time is measured on 1 request in this many and scaled up: two clock reads per
/// request cost about as much as dispatching it (`clasp bench dispatch --local` reports the
/// metrics' cost), and the capacity model needs the mean τ̄, which sampling estimates without
/// bias. (A leaf's queued requests are timed a run at a time, one request in four times this
/// many: `local_queue.rs`.)
pub const EXEC_TIMING_SAMPLE: u32 = 16;
/// Smallest state part (rings and batches are far larger: a ring is at least 4 KiB).
const MIN_STATE_PART_BYTES: usize = 256;
/// Whether requests to an executor itself skip its ring (`local_queue.rs`): yes, unless
/// `CLASP_LOCAL_QUEUE=0` asks for every chained request to take a ring (read once per executor,
/// when it is made; to measure the ring path alone, as `clasp bench dispatch --local` on one
/// executor).
fn local_queue_enabled() -> bool {
    std::env::var_os("CLASP_LOCAL_QUEUE").is_none_or(|v| v != "0")
}

/// How long an executor with pending overflow sleeps before retrying.
const OVERFLOW_RETRY: Duration = Duration::from_micros(200);

/// Input order of an executor's fan-in: commands, the ingress, each executor of the worker
/// ([`input_exec`]), then the network thread ([`input_net_in`]).
const INPUT_CONTROL: usize = 0;
const INPUT_INGRESS: usize = 1;

/// The fan-in input of the ring from executor `a`.
const fn input_exec(a: usize) -> usize {
    2 + a
}

/// The fan-in input of the ring from the network thread, after the executors' rings.
const fn input_net_in(executors: usize) -> usize {
    input_exec(executors)
}

/// What the network thread leaves an executor about migrations, in its plan mailbox.
#[derive(Debug)]
pub enum PlanMail {
    /// Its part of a migration.
    Plan(Assignment),
    /// A move to this routing table is coming: copy the key groups it takes from this slot to
    /// their new owners ahead (`executor/ahead.rs`).
    CopyAhead(Arc<clasp_protocol::RoutingTable>),
}

/// How an executor reaches its worker's network thread (cluster mode only): the network thread
/// parks in io_uring, not on its doorbell, so after publishing to `net_out` or a report the
/// executor writes its transport's eventfd — only when the thread announced that it parks.
#[derive(Clone, Debug)]
pub struct NetLink {
    /// Set by the network thread just before it parks (SeqCst), cleared when it wakes.
    pub parked: Arc<AtomicBool>,
    /// Ends the network thread's park.
    pub waker: crate::transport::Waker,
    /// Migration plans for this executor (announced by `Command::Plan`).
    pub plans: Arc<Mutex<VecDeque<PlanMail>>>,
    /// Snapshots for checkpoints, and the key groups to restore (`snapshot.rs`).
    pub snapshot: Arc<Mutex<SnapshotBox>>,
}

impl NetLink {
    /// Wakes the network thread if it parks (after a publish: the fence orders the publish
    /// before the read of `parked`, pairing with the network thread's fence after its store).
    #[inline]
    pub fn nudge(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) && self.parked.swap(false, Ordering::AcqRel) {
            self.waker.wake();
        }
    }
}

/// What an executor hands back when it stops.
pub struct ExecutorResult {
    /// Per operator.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed requests by reason.
    pub malformed: Vec<Vec<(&'static str, u64)>>,
    /// Per operator: keys holding state.
    pub state_keys: Vec<usize>,
    /// The instances themselves (for key-group export by tests and migrations).
    pub instances: Vec<Box<dyn OperatorInstance>>,
}

/// Where an executor sits in the cluster (the slots of every worker, and this worker's place
/// among them) and the table it starts with.
#[derive(Clone, Debug)]
pub struct Seat {
    /// The cluster's slots.
    pub slots: Slots,
    /// This worker's index in `slots.workers`.
    pub index: usize,
    /// The initial (epoch 0) slot routing.
    pub routing: Arc<RoutingTable>,
    /// Longest frame the transport carries to another worker (state is sent in parts that
    /// fit; `usize::MAX` for a worker without peers).
    pub remote_frame_bytes_max: usize,
}

pub(crate) struct Engine {
    me: usize,
    worker: u32,
    /// (operator, key group) → slot: the table emissions are routed by (the protocol table's
    /// flat form).
    table: FlatRouting,
    /// Epoch of `table`.
    epoch: Epoch,
    /// This executor's slot.
    my_slot: u16,
    /// The migration protocol and its queues.
    mig: migrating::Migration,
    /// Key groups copied ahead of a move (`executor/ahead.rs`).
    ahead: ahead::CopyAhead,
    /// Bytes of state per control frame (fits the rings and the transport's batches).
    state_part_bytes: usize,
    instances: Vec<Box<dyn OperatorInstance>>,
    /// Some instance keeps keyed state: batches are read in two passes, the first prefetching
    /// each request's state ([`Engine::prefetch_state`]); otherwise in one.
    keeps_state: bool,
    /// The rings request frames go into.
    out: Outbound,
    report: Producer<ShmRing>,
    /// Deltas not yet reported.
    deltas: Vec<Delta>,
    /// When a busy turn first found deltas waiting (raw clock), until they are reported.
    deltas_since: Option<u64>,
    /// Report frames (other than deltas) waiting for room.
    pending_reports: VecDeque<Vec<u8>>,
    emitter: Emitter,
    /// Requests to this executor itself, to run after the current batch (`local_queue.rs`).
    local: local_queue::LocalQueue,
    /// The queue's other buffer: drained requests queue more into a fresh one.
    local_spare: local_queue::LocalQueue,
    /// Whether requests to itself skip its ring ([`local_queue_enabled`]).
    local_queue_on: bool,
    /// Per operator: it has no successors, so a run of queued requests to it goes to it in
    /// one call (`local_queue.rs`).
    leaves: Vec<bool>,
    metrics: ExecutorMetrics,
    clock: quanta::Clock,
    /// Requests handled, for sampling execution time.
    tick: u32,
    /// Which sampled times are executions (`timing.rs`).
    timing: timing::SampleFilter,
    /// Executors of each worker (a slot's worker is `slot / executors`).
    executors: usize,
    /// The network thread (cluster mode), woken when a report is published.
    net: Option<NetLink>,
    /// Remote workers reached (bit `worker % 64`), mirrored in `REMOTE_DESTINATIONS`.
    remote_mask: u64,
    /// Where outputs are written as lines (a run with a sink), or none: digests only.
    sink: Option<SinkWriter>,
}

pub(crate) struct Executor {
    inputs: FanIn<ShmRing>,
    engine: Engine,
    policy: WaitPolicy,
    /// Wakes a coordinator holding its reads when this executor runs dry (`starving.rs`).
    hold_wake: starving::HoldWake,
}

impl Executor {
    pub(crate) fn new(
        me: usize,
        worker: u32,
        spec: &AppSpec,
        seat: &Seat,
        seg: &WorkerSegment,
        policy: WaitPolicy,
        net: Option<NetLink>,
    ) -> Result<Executor, RuntimeError> {
        let idx = seg.index;
        let s = &seg.segment;
        let e = |what: &'static str| {
            move |source| RuntimeError::Ring {
                executor: me,
                what,
                source,
            }
        };
        let mut consumers = vec![
            s.consumer(idx.control(me)).map_err(e("control"))?,
            s.consumer(idx.ingress(me)).map_err(e("ingress"))?,
        ];
        for a in 0..idx.executors {
            consumers.push(s.consumer(idx.exec(a, me)).map_err(e("exec"))?);
        }
        consumers.push(s.consumer(idx.net_in(me)).map_err(e("net_in"))?);
        let to_executors = (0..idx.executors)
            .map(|b| s.producer(idx.exec(me, b)).map_err(e("exec")))
            .collect::<Result<Vec<_>, _>>()?;
        let to_network = match &net {
            Some(link) => Some((
                s.producer(idx.net_out(me)).map_err(e("net_out"))?,
                link.clone(),
            )),
            None => None,
        };
        let frame_bytes_max = s
            .ring_config(idx.exec(me, me))
            .map_err(e("exec"))?
            .max_frame_bytes;
        if seat.slots.executors != idx.executors || seat.index >= seat.slots.workers.len() {
            return Err(RuntimeError::Seat(format!(
                "executor {me}: the seat does not fit the segment"
            )));
        }
        let slot_base = seat.slots.slot(seat.index, 0).index();
        let my_slot = (slot_base + me) as u16;
        let plans = net.as_ref().map(|n| n.plans.clone());
        let mut instances: Vec<Box<dyn OperatorInstance>> = (0..spec.operators.len())
            .map(|op| spec.instantiate(op))
            .collect();
        if let Some(link) = &net {
            let restore = match link.snapshot.lock() {
                Ok(mut b) => std::mem::take(&mut b.restore),
                Err(_) => return Err(RuntimeError::Restore("a poisoned mailbox".into())),
            };
            snapshot::restore(&mut instances, &restore).map_err(RuntimeError::Restore)?;
        }
        Ok(Executor {
            inputs: FanIn::new(consumers).map_err(e("fan-in"))?,
            engine: Engine {
                me,
                worker,
                table: flatten(&seat.routing),
                // The table's epoch: a worker that joins a running cluster starts mid-run.
                epoch: seat.routing.epoch(),
                my_slot,
                mig: migrating::Migration::new(my_slot, Arc::clone(&seat.routing), plans),
                ahead: Default::default(),
                state_part_bytes: crate::migrate::STATE_PART_BYTES_MAX
                    .min(frame_bytes_max.min(seat.remote_frame_bytes_max))
                    .saturating_sub(crate::request::REQUEST_HEADER_BYTES)
                    .max(MIN_STATE_PART_BYTES),
                keeps_state: instances.iter().any(|i| i.keeps_state()),
                instances,
                out: Outbound::new(to_executors, to_network, slot_base, frame_bytes_max),
                report: s.producer(idx.report(me)).map_err(e("report"))?,
                deltas: Vec::new(),
                deltas_since: None,
                pending_reports: VecDeque::new(),
                emitter: Emitter::new(),
                local: Default::default(),
                local_spare: Default::default(),
                local_queue_on: local_queue_enabled(),
                leaves: (0..spec.operators.len())
                    .map(|op| spec.successors(op).is_empty())
                    .collect(),
                metrics: seg.executor_metrics(me),
                clock: quanta::Clock::new(),
                tick: 0,
                timing: timing::SampleFilter::new(spec.operators.len()),
                executors: idx.executors,
                net,
                remote_mask: 0,
                sink: None,
            },
            policy,
            hold_wake: starving::HoldWake::new(seg),
        })
    }

    /// Writes this executor's outputs to `sink` as lines, numbering them per operator and key.
    pub(crate) fn with_sink(mut self, sink: Option<SinkWriter>) -> Self {
        if sink.is_some() {
            for instance in &mut self.engine.instances {
                instance.track_output_seq();
            }
        }
        self.engine.sink = sink;
        self
    }

    /// Runs until the coordinator says stop.
    pub(crate) fn run(mut self) -> ExecutorResult {
        let executors = self.engine.executors;
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        (self.engine.metrics.view()).set(scalar::TID, u64::try_from(tid).unwrap_or(0));
        let mut stop = false;
        while !stop {
            let mut work = self.engine.out.drain_overflow();
            // Commands first: they are rare and tell us to flush or stop.
            let mut commands = Vec::new();
            work += self.poll_input(INPUT_CONTROL, 16, |_, f| commands.push(Command::decode(f)));
            for cmd in commands {
                match cmd {
                    Ok(Command::EndOfStream { operator }) => {
                        self.engine.flush_installs();
                        self.engine.end_of_stream(operator)
                    }
                    Ok(Command::Stop) => stop = true,
                    Ok(Command::Plan) => {
                        self.run_own_queue();
                        self.engine.take_plans()
                    }
                    Ok(Command::Snapshot) => {
                        self.run_own_queue();
                        self.engine.flush_installs();
                        self.engine.snapshot()
                    }
                    Err(e) => {
                        let me = self.engine.me;
                        self.engine
                            .report_error(format!("executor {me}: a command it cannot read: {e}"))
                    }
                }
            }
            for a in 0..executors {
                work += self.poll_input(input_exec(a), BATCH_FRAMES, |eng, f| eng.handle(f));
            }
            work += self.poll_input(input_net_in(executors), BATCH_FRAMES, |eng, f| {
                eng.handle(f)
            });
            if self.engine.out.overflow_bytes() == 0 {
                work += self.poll_input(INPUT_INGRESS, BATCH_FRAMES, |eng, f| eng.handle(f));
            }
            work += self.engine.run_ready(BATCH_FRAMES);
            work += self.engine.run_exports();
            work += self.engine.run_copy_ahead();
            work += self.engine.fire_processing_timers();
            self.engine.migration_tick();
            // What the released requests and the timers sent the executor itself.
            work += self.engine.drain_local();
            self.engine.out.publish();
            if work > 0 {
                self.engine.flush_reports_if_due();
            }
            self.engine.metrics.view().set(
                scalar::OVERFLOW_BYTES,
                self.engine.out.overflow_bytes() as u64,
            );
            if work == 0 && !stop {
                self.idle();
            }
        }
        // What was received is installed before the state is summarised.
        self.engine.flush_installs();
        self.engine.flush_sink();
        self.engine.out.publish();
        self.engine.flush_reports();
        self.engine
            .metrics
            .view()
            .set(scalar::CPU_NS, crate::clock::thread_cpu_ns());
        let instances = std::mem::take(&mut self.engine.instances);
        ExecutorResult {
            summaries: instances.iter().map(|i| i.summary()).collect(),
            malformed: instances.iter().map(|i| i.malformed_reasons()).collect(),
            state_keys: instances.iter().map(|i| i.state_keys()).collect(),
            instances,
        }
    }

    /// Runs every request this executor sent itself (its own ring and its overflow) before it
    /// takes a plan: that ring is its local queue, not a connection a marker could close, so
    /// what is in it must run (or be exported) under the old table — running it now is the
    /// simplest. Ends because an app is a DAG.
    fn run_own_queue(&mut self) {
        let me = input_exec(self.engine.me);
        let own = self.engine.out.executor_lane(self.engine.me);
        loop {
            self.engine.out.drain_overflow();
            self.engine.out.publish();
            let n = self.poll_input(me, usize::MAX, |eng, f| eng.handle(f));
            if n == 0 && !self.engine.out.has_overflow(own) {
                break;
            }
            if n == 0 {
                // Our own ring is full of nothing we can read: yield to let it drain.
                std::thread::yield_now();
            }
        }
        self.engine.out.publish();
    }

    /// Reads up to `max` frames of input `i`; a corrupt ring is reported and retired.
    fn poll_input(&mut self, i: usize, max: usize, mut f: impl FnMut(&mut Engine, &[u8])) -> usize {
        if self.inputs.is_retired(i) {
            return 0;
        }
        let engine = &mut self.engine;
        let input = self.inputs.input(i);
        let read = if engine.keeps_state {
            input.pop_batch_ahead(max, |pass, frame| match pass {
                Pass::Ahead => engine.prefetch_state(frame),
                Pass::Take => f(engine, frame),
            })
        } else {
            input.pop_batch(max, |frame| f(engine, frame))
        };
        // What the batch sent the executor itself runs now, before anything else is read (also
        // what the frames before a corrupt one sent).
        let ran = engine.drain_local();
        let read = read.map(|n| n + ran);
        match read {
            Ok(n) => n,
            Err(e) => {
                self.engine.report_error(format!(
                    "executor {} input {i}: {e}; input retired",
                    self.engine.me
                ));
                self.inputs.retire(i);
                1
            }
        }
    }

    fn idle(&mut self) {
        if self.engine.mig.outgoing_is_empty() {
            self.engine.free_exported();
        }
        // Lines wait in the executor's buffer only while it has work.
        self.engine.flush_sink();
        self.engine.flush_reports();
        let overflow_bytes = self.engine.out.overflow_bytes();
        // In a migration, wake now and then to tell the planner what we wait for.
        let busy = overflow_bytes > 0
            || !self.engine.deltas.is_empty()
            || !self.engine.pending_reports.is_empty()
            || !self.engine.mig.settled;
        let timeout = if !self.engine.mig.settled && overflow_bytes == 0 {
            Some(migrating::PROGRESS_POLL)
        } else {
            busy.then_some(OVERFLOW_RETRY)
        };
        // Wake for the next processing-time timer.
        let timeout = match (timeout, self.engine.until_next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let m = self.engine.metrics.view();
        m.add(scalar::PARKS, 1);
        // Everything reported above happens before PARKED reads 1: a cluster worker's network
        // thread that sees every executor parked reads their report rings once more and then
        // parks long, since executors do not wake it for deltas (`cluster/node/reports.rs`).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        m.set(scalar::PARKED, 1);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // Dry, not waiting for room in an output ring or for a migration: the coordinator may
        // be all that keeps more work from it.
        if overflow_bytes == 0 && self.engine.mig.settled {
            self.hold_wake.going_idle();
        }
        // A spin burns CPU that is not work: measured, so the planner's CPU figure can leave it
        // out. A park costs the kernel's way to sleep and back — on a virtual machine most of
        // what a lightly loaded worker spends, which the busy-time estimator must not read as
        // the cost of requests: the doorbell measures it, only when it calls the kernel (a
        // clock read is a system call here, and a busy executor goes idle often).
        let spin_from_ns = self.policy.spins().then(crate::clock::thread_cpu_ns);
        let parked_from_ns = clasp_shmring::thread_park_cpu_ns();
        let sleeps_from = clasp_shmring::thread_parks();
        // Frames waiting for room in an output ring stop the executor taking new roots, whose
        // ring is then never empty: a wait on the inputs would return at once, and the
        // executor spun millions of times a second on the CPU its network thread needed to
        // drain that output (a capped WC worker that sends every word: 72 million turns in
        // 27 s, half its throughput). So it waits for the room instead; its other inputs are
        // looked at after the wait, at the latest after the retry interval.
        let result = if overflow_bytes > 0 {
            let own = self.engine.out.executor_lane(self.engine.me);
            // No room by the timeout is not an error: the next turn retries.
            let _room = self.engine.out.wait_for_space(own, self.policy, timeout);
            Ok(())
        } else {
            self.inputs.wait(self.policy, timeout)
        };
        let parked_ns = clasp_shmring::thread_park_cpu_ns().wrapping_sub(parked_from_ns);
        if let Some(from) = spin_from_ns {
            let waited_ns = crate::clock::thread_cpu_ns().saturating_sub(from);
            m.add(scalar::IDLE_SPIN_NS, waited_ns.saturating_sub(parked_ns));
        }
        m.add(scalar::SLEEP_CPU_NS, parked_ns);
        m.add(
            scalar::SLEEPS,
            clasp_shmring::thread_parks().wrapping_sub(sleeps_from),
        );
        m.set(scalar::PARKED, 0);
        m.add(scalar::WAKEUPS, 1);
        match result {
            Ok(()) | Err(RingError::TimedOut { .. }) | Err(RingError::Closed) => {}
            Err(RingError::PeerDead { pid }) => {
                if let Some(i) = self.inputs.dead_input() {
                    self.inputs.retire(i);
                }
                let died = Report::ProducerDied { pid };
                self.engine.pending_reports.push_back(died.encode());
            }
            Err(e) => self
                .engine
                .report_error(format!("executor {}: {e}", self.engine.me)),
        }
    }
}

impl Engine {
    /// Starts fetching the state the request in `frame` will look up (the first pass over a
    /// batch, [`Pass::Ahead`]): reads only the header; anything that is not a plain request is
    /// left for `handle` to judge.
    #[inline]
    fn prefetch_state(&self, frame: &[u8]) {
        let Ok(h) = RequestHeader::peek(frame) else {
            return;
        };
        if h.flags & FLAG_CONTROL == 0 {
            self.prefetch_lookup(usize::from(h.operator), h.key_group, h.key_hash);
        }
    }

    /// Starts fetching the lines where operator `op`'s lookup of the state of a key of
    /// `key_group` with hash `key_hash` starts (none for an operator without keyed state).
    #[inline]
    fn prefetch_lookup(&self, op: usize, key_group: u16, key_hash: u64) {
        let instance = self.instances.get(op);
        if let Some((ctrl, slot)) = instance.and_then(|i| i.state_lines(key_group, key_hash)) {
            prefetch_read(ctrl.as_ptr());
            prefetch_read(slot.as_ptr());
        }
    }

    /// Handles one request frame.
    #[inline]
    fn handle(&mut self, frame: &[u8]) {
        self.metrics.view().add(scalar::FRAMES_IN, 1);
        let req = match Request::parse(frame) {
            Ok(r) if r.header.flags & FLAG_CONTROL != 0 => {
                self.on_control_frame(&r.header, frame);
                return;
            }
            Ok(r) if (r.header.operator as usize) < self.instances.len() => r,
            _ => {
                self.metrics.view().add(scalar::BAD_FRAMES, 1);
                return;
            }
        };
        // Outside a migration every request of the current epoch runs at once; anything else
        // goes through the protocol machine (forwarded, held, or queued in order).
        if !self.mig.settled || req.header.epoch != self.epoch.0 as u16 {
            self.on_unsettled_request(&req.header, frame);
            return;
        }
        self.execute(&req);
    }

    /// Runs one request (already checked), routes what it emits and counts it.
    #[inline]
    fn execute(&mut self, req: &Request<'_>) {
        self.execute_uncounted(&req.header, req.key, req.payload);
        let m = self.metrics.view();
        m.add(m.processed(req.header.operator as usize), 1);
    }

    /// Runs one request (already checked) and routes what it emits; the caller counts it in
    /// the operator's `processed` (`drain_local` once for a run of requests to one operator).
    /// The header by reference: moving a parsed request (built field by field) into a by-value
    /// argument copied it in 16-byte loads that waited on those narrow stores.
    #[inline]
    fn execute_uncounted(&mut self, header: &RequestHeader, key: &[u8], payload: &[u8]) {
        let op = header.operator as usize;
        self.tick = self.tick.wrapping_add(1);
        let key_hash = header.key_hash;
        // A malformed request is counted by the instance under its reason and dropped.
        if self.tick % EXEC_TIMING_SAMPLE == 0 {
            let t0 = self.clock.raw();
            let _ = self.instances[op].process(key_hash, key, payload, &mut self.emitter);
            let sample_ns = self.clock.delta_as_nanos(t0, self.clock.raw());
            let m = self.metrics.view();
            if !self.timing.keep(op, sample_ns) {
                m.add(scalar::TIMING_OUTLIERS, 1);
            } else {
                let ns = sample_ns * u64::from(EXEC_TIMING_SAMPLE);
                m.add(m.exec_ns(op), ns);
                m.add(scalar::BUSY_NS, ns);
            }
        } else {
            let _ = self.instances[op].process(key_hash, key, payload, &mut self.emitter);
        }
        self.route(op, header, EmittedBy::KeyGroup(header.key_group));
    }

    /// Routes what operator `from` emitted while handling `parent`; `by` says which of its key
    /// groups, for the migration's mark ([`Engine::moved_flag`]).
    #[inline]
    fn route(&mut self, from: usize, parent: &RequestHeader, by: EmittedBy) {
        let tracked = parent.flags & FLAG_TRACKED != 0;
        // The last child bound for an operator carries the parent's id (`ledger.rs`).
        let Some(carrier) = self.emitter.last_to_operator() else {
            self.route_outputs(from, parent);
            return;
        };
        let moved = self.moved_flag(from, by);
        let flags = (parent.flags & FLAG_TRACKED) | moved;
        let mut chained = 0u64;
        // Local children counted once a run of them to one operator ends (WC's split: ten).
        let mut local_run = (usize::MAX, 0u64);
        let carrier = tracked.then_some(carrier);
        // Exact for the whole loop: while it holds, this loop queues its own requests here and
        // writes nothing to its own ring; while it does not, nothing here makes it hold.
        let local_ok = self.may_queue_local();
        let emitter = std::mem::take(&mut self.emitter);
        let mut ids = ChildIds::new(parent.root_id, parent.request_id, carrier);
        let base = RequestHeader {
            flags,
            epoch: self.epoch.0 as u16,
            root_home: parent.root_home,
            source: self.my_slot,
            root_id: parent.root_id,
            admitted_ns: parent.admitted_ns,
            ..RequestHeader::default()
        };
        for (i, e) in emitter.iter().enumerate() {
            match e.target {
                Target::Operator(to) => {
                    let hash = key_hash(e.key);
                    let kg = key_group(hash);
                    let slot = self.table.slot(to as usize, kg);
                    let Some(lane) = self.out.lane_of(slot as usize) else {
                        // A worker without peers owns every key group.
                        self.report_error(format!(
                            "operator {to} key group {kg} is owned by slot {slot}"
                        ));
                        continue;
                    };
                    let local = local_ok && lane == self.out.executor_lane(self.me);
                    // A leaf queued here runs in this executor's drain, before anything it
                    // reports: its work is its parent's, which reports after it (`ledger.rs`).
                    let folded = local && self.leaves.get(usize::from(to)) == Some(&true);
                    if folded && tracked {
                        ids.forget_carrier();
                    }
                    let id = if tracked && !folded { ids.next(i) } else { 0 };
                    let header = || RequestHeader {
                        operator: to,
                        key_group: kg,
                        dest: slot,
                        key_hash: hash,
                        request_id: id,
                        ..base
                    };
                    // Built apart in each branch, and one call site for the queue: a header
                    // built on the stack and copied read its two-byte fields back in wider
                    // loads, each a failed store forwarding.
                    if local {
                        let flags = if folded { flags & !FLAG_TRACKED } else { flags };
                        self.queue_local(RequestHeader { flags, ..header() }, e.key, e.payload);
                    } else {
                        self.send_request(lane, &header(), e.key, e.payload);
                    }
                    if self.out.is_remote(lane) {
                        self.count_remote(from, to as usize, slot);
                    } else if local_run.0 == to as usize {
                        local_run.1 += 1;
                    } else {
                        self.count_local(from, local_run);
                        local_run = (to as usize, 1);
                    }
                    chained += 1;
                }
                Target::Output => self.route_output(from, e.key, e.payload, emitter.seq(i)),
            }
        }
        self.count_local(from, local_run);
        if moved != 0 {
            self.metrics.view().add(scalar::SENT_FROM_MOVED, chained);
        }
        self.sink_lines_added();
        self.emitter = emitter;
        self.emitter.clear();
        if tracked && let Some(xor) = ids.delta() {
            self.add_delta(Delta {
                root_id: parent.root_id,
                xor,
                admitted_ns: parent.admitted_ns,
            });
        }
    }

    /// Runs `operator`'s end-of-stream flush and routes what it emits (untracked).
    fn end_of_stream(&mut self, operator: u16) {
        let op = operator as usize;
        if op < self.instances.len() {
            self.instances[op].end_of_stream(&mut self.emitter);
            let parent = RequestHeader {
                root_home: self.worker as u16,
                ..RequestHeader::default()
            };
            self.route(op, &parent, EmittedBy::AnyKeyGroup);
            self.drain_local();
            self.out.publish();
            self.flush_sink();
        }
        self.push_report(&Report::Flushed { operator });
    }

    /// Hands the sink whatever lines are buffered (waiting while its queue is full).
    fn flush_sink(&mut self) {
        if let Some(Err(e)) = self.sink.as_mut().map(SinkWriter::flush) {
            self.report_error(e);
        }
    }
}
