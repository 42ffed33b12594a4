//! The discrete-event cluster: workers with executor threads serving their inbound requests
//! oldest first ([`super::inbox`]; optionally at most the decided executors per operator) and
//! one network thread, stochastic (log-normal) execution times, Zipf-skewed keys hashed to key
//! groups, routing by key-group ownership, batched remote hand-offs with link latency, a
//! per-destination housekeeping cost, migrations that pause workers for a time growing with the
//! key groups they move, an optionally bounded input, and the Table 2 metrics a real worker
//! reports.
//!
//! What it is *not*: the planner's formula. Costs land on specific threads (an executor runs
//! the operator and pays α or its part of β per child it dispatches; the network thread pays
//! the rest of β; each remote destination costs the executors γ per second while its
//! connection is open — used within the last metrics interval), so a worker's capacity emerges
//! from queueing on its busiest thread, key-group cost and service-time noise — which the
//! single-pool model of eq. 1 only approximates. [`CostShape`] can move those costs into forms
//! the model does not have at all (per batch, on the receiver, growing with fan-in).
//!
//! Not modelled: key groups pinned to one executor (the data plane's executor-level ownership;
//! here an executor allowed to run an operator takes any of its requests), operator state size
//! beyond the migration pause, credit-based backpressure between workers (chained requests
//! queue without bound; only the input can be refused), network bandwidth limits, failures.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::costs::CostShape;
pub use super::histogram::Histogram;
use super::inbox::Inbox;
use super::rng::KeyGroupSampler;
use crate::app::AppModel;
use crate::metrics::{OperatorSample, PlannerSample, WorkerSample};
use crate::model::{CostModel, PAPER_COSTS, Shares};
use clasp_protocol::ids::KeyGroup;
use clasp_protocol::rng::SimRng;
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::split::{KEY_GROUPS_PER_OPERATOR, initial_routing, reassign};

/// Executor threads per simulated worker.
pub const DEFAULT_EXECUTORS: usize = 2;
/// Fraction of β that the network thread (not the sending executor) pays.
pub const DEFAULT_NETWORK_SHARE_OF_BETA: f64 = 0.2;
/// One-way link latency (µs).
pub const DEFAULT_LINK_LATENCY_US: f64 = 100.0;
/// Batch age limit: a remote request waits up to this long for its batch (µs).
pub const DEFAULT_BATCH_AGE_US: f64 = 50.0;
/// Period of the per-destination housekeeping charge (µs).
pub const DEFAULT_FLUSH_INTERVAL_US: f64 = 10_000.0;
/// Coefficient of variation of execution and dispatch times.
pub const DEFAULT_SERVICE_CV: f64 = 0.3;
/// Metrics interval (µs).
pub const DEFAULT_INTERVAL_US: f64 = 250_000.0;
/// Closed-loop ("unthrottled") roots in flight per worker.
pub const DEFAULT_ROOTS_IN_FLIGHT_PER_WORKER: usize = 64;
/// Migration pause: fixed part (µs)...
pub const DEFAULT_PAUSE_BASE_US: f64 = 2_000.0;
/// ...plus this per key group the worker sends or receives (µs).
pub const DEFAULT_PAUSE_PER_KEY_GROUP_US: f64 = 5.0;

/// Mixed into the seed of the input's random stream.
const INPUT_STREAM: u64 = 0x1_4B07_5EED;

/// The modelled cluster's ground truth and mechanics.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    pub executors: usize,
    pub truth: CostModel,
    pub network_share_of_beta: f64,
    pub link_latency_us: f64,
    pub batch_age_us: f64,
    pub flush_interval_us: f64,
    pub service_cv: f64,
    pub interval_us: f64,
    pub roots_in_flight_per_worker: usize,
    pub pause_base_us: f64,
    pub pause_per_key_group_us: f64,
    /// How the costs land on threads (the load model's own form by default).
    pub cost_shape: CostShape,
    /// An input whose worker already queues this many requests is refused and lost (the
    /// ingress's backpressure); None: queues grow without bound. Chained requests are never
    /// refused.
    pub input_queue_bound: Option<usize>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            executors: DEFAULT_EXECUTORS,
            truth: PAPER_COSTS,
            network_share_of_beta: DEFAULT_NETWORK_SHARE_OF_BETA,
            link_latency_us: DEFAULT_LINK_LATENCY_US,
            batch_age_us: DEFAULT_BATCH_AGE_US,
            flush_interval_us: DEFAULT_FLUSH_INTERVAL_US,
            service_cv: DEFAULT_SERVICE_CV,
            interval_us: DEFAULT_INTERVAL_US,
            roots_in_flight_per_worker: DEFAULT_ROOTS_IN_FLIGHT_PER_WORKER,
            pause_base_us: DEFAULT_PAUSE_BASE_US,
            pause_per_key_group_us: DEFAULT_PAUSE_PER_KEY_GROUP_US,
            cost_shape: CostShape::default(),
            input_queue_bound: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Req {
    op: u32,
    kg: u32,
    root: u32,
    enqueued_us: f64,
    /// A chained request from another worker (its receiver pays β under `receiver-beta`).
    remote: bool,
}

enum Ev {
    ExecDone { w: usize, e: usize },
    Arrive { w: usize, req: Req },
    Input,
    Flush,
    Resume { w: usize },
}

struct Timed {
    t: f64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, sequence).
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
struct Executor {
    busy: bool,
    job: Option<Req>,
    children: Vec<(u32, u32)>,
    debt_us: f64,
}

#[derive(Default, Clone)]
struct Counters {
    processed: Vec<f64>,
    exec_sum_us: Vec<f64>,
    edges: Vec<f64>,
    local: f64,
    remote: f64,
    exec_busy_us: f64,
    net_busy_us: f64,
    wait_sum_us: f64,
    started: f64,
    queue_sum: f64,
    queue_samples: f64,
}

struct Worker {
    /// The inbound requests, served oldest first by every executor of the worker (see the
    /// module docs), per operator at most the decision's parallelism at once when applied.
    queue: Inbox<Req>,
    execs: Vec<Executor>,
    net_free_us: f64,
    paused_until_us: f64,
    c: Counters,
    /// Interval stamp per destination (δ over the metrics interval).
    dest_interval: Vec<u64>,
    /// Last time each destination was used (µs); a destination used within the last metrics
    /// interval is an open connection that costs housekeeping.
    dest_last_us: Vec<f64>,
    /// Destinations with a possibly open connection (deduplicated by `dest_listed`).
    dest_open: Vec<usize>,
    dest_listed: Vec<bool>,
    /// `per-batch`: when the batch to each destination was opened (µs).
    batch_opened_us: Vec<f64>,
}

/// The simulated cluster.
pub struct Cluster {
    cfg: ClusterConfig,
    exec_us: Vec<f64>,
    out: Vec<Vec<(usize, u32, f64)>>, // (edge index, to, fanout)
    sources: Vec<u32>,
    samplers: Vec<KeyGroupSampler>,
    pub routing: RoutingTable,
    pub active_workers: usize,
    workers: Vec<Worker>,
    heap: BinaryHeap<Timed>,
    seq: u64,
    pub now_us: f64,
    rng: SimRng,
    /// The input's own stream (arrival times, sources, keys): every policy run on a seed sees
    /// exactly the same input, whatever its service times draw (common random numbers), so
    /// their throughputs differ only by what they complete, not by Poisson noise.
    input_rng: SimRng,
    roots: Vec<(f64, u32)>,
    free_roots: Vec<u32>,
    closed_loop: bool,
    input_rate_per_s: f64,
    input_scheduled: bool,
    interval_id: u64,
    /// Inputs offered this interval (admitted or refused): the planner's λ.
    offered: f64,
    /// Of those, refused at a full input queue.
    refused: f64,
    completed: f64,
    pub total_completed: u64,
    pub total_admitted: u64,
    /// Inputs refused because their worker's inbound queue was at
    /// [`ClusterConfig::input_queue_bound`].
    pub total_lost: u64,
    pub latency: Histogram,
    pub busy_worker_us: f64,
    last_account_us: f64,
    epoch: u64,
}

impl Cluster {
    /// A cluster of `max_workers` workers, `workers` of them active with `shares`.
    pub fn new(
        app: &AppModel,
        cfg: ClusterConfig,
        max_workers: usize,
        shares: &Shares,
        seed: u64,
    ) -> Cluster {
        let edges = app.resolve().expect("app validated by the caller");
        let n_ops = app.operators.len();
        let mut out = vec![Vec::new(); n_ops];
        let mut has_pred = vec![false; n_ops];
        for (i, &(f, t, x)) in edges.iter().enumerate() {
            out[f].push((i, t as u32, x));
            has_pred[t] = true;
        }
        let active = shares.first().map_or(1, Vec::len).max(1);
        let mk_counters = || Counters {
            processed: vec![0.0; n_ops],
            exec_sum_us: vec![0.0; n_ops],
            edges: vec![0.0; edges.len()],
            ..Counters::default()
        };
        let n_workers = max_workers.max(active);
        let workers = (0..n_workers)
            .map(|_| Worker {
                queue: Inbox::new(app.operators.len()),
                execs: (0..cfg.executors.max(1))
                    .map(|_| Executor::default())
                    .collect(),
                net_free_us: 0.0,
                paused_until_us: 0.0,
                c: mk_counters(),
                dest_interval: vec![u64::MAX; n_workers],
                dest_last_us: vec![f64::NEG_INFINITY; n_workers],
                dest_open: Vec::new(),
                dest_listed: vec![false; n_workers],
                batch_opened_us: vec![f64::NEG_INFINITY; n_workers],
            })
            .collect();
        let mut c = Cluster {
            exec_us: app.operators.iter().map(|o| o.exec_us).collect(),
            out,
            sources: (0..n_ops)
                .filter(|&o| !has_pred[o])
                .map(|o| o as u32)
                .collect(),
            samplers: app
                .operators
                .iter()
                .map(|o| KeyGroupSampler::new(o.keys, o.zipf, KEY_GROUPS_PER_OPERATOR))
                .collect(),
            routing: initial_routing(shares, KEY_GROUPS_PER_OPERATOR),
            active_workers: active,
            workers,
            heap: BinaryHeap::new(),
            seq: 0,
            now_us: 0.0,
            rng: SimRng::new(seed),
            input_rng: SimRng::new(seed ^ INPUT_STREAM),
            roots: Vec::new(),
            free_roots: Vec::new(),
            closed_loop: false,
            input_rate_per_s: 0.0,
            input_scheduled: false,
            interval_id: 0,
            offered: 0.0,
            refused: 0.0,
            completed: 0.0,
            total_completed: 0,
            total_admitted: 0,
            total_lost: 0,
            latency: Histogram::default(),
            busy_worker_us: 0.0,
            last_account_us: 0.0,
            epoch: 0,
            cfg,
        };
        let f = c.cfg.flush_interval_us;
        c.push(f, Ev::Flush);
        c
    }

    fn push(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Timed {
            t,
            seq: self.seq,
            ev,
        });
    }

    /// Unthrottled input: keep `roots_in_flight_per_worker × workers` roots in flight.
    pub fn start_closed_loop(&mut self) {
        self.closed_loop = true;
        let k = self.cfg.roots_in_flight_per_worker * self.active_workers;
        for _ in 0..k {
            self.admit();
        }
    }

    /// Open-loop Poisson input at `rate_per_s` from now on.
    pub fn set_input_rate(&mut self, rate_per_s: f64) {
        self.input_rate_per_s = rate_per_s.max(0.0);
        if !self.input_scheduled && self.input_rate_per_s > 0.0 {
            self.input_scheduled = true;
            let dt = self.input_rng.exponential(1e6 / self.input_rate_per_s);
            self.push(self.now_us + dt, Ev::Input);
        }
    }

    fn admit(&mut self) {
        // The input's draws come first and do not depend on whether it is admitted, so every
        // run of a seed sees the same input.
        let op = self.sources[self.input_rng.below(self.sources.len())];
        let kg = self.samplers[op as usize].sample(&mut self.input_rng) as u32;
        let w = owner_of(&self.routing, op as usize, kg as usize);
        self.offered += 1.0;
        if self
            .cfg
            .input_queue_bound
            .is_some_and(|b| self.workers[w].queue.len() >= b)
        {
            // Backpressure at the ingress: the input is refused, and lost.
            self.total_lost += 1;
            self.refused += 1.0;
            return;
        }
        let root = match self.free_roots.pop() {
            Some(r) => {
                self.roots[r as usize] = (self.now_us, 1);
                r
            }
            None => {
                self.roots.push((self.now_us, 1));
                (self.roots.len() - 1) as u32
            }
        };
        self.total_admitted += 1;
        let t = self.now_us + self.cfg.link_latency_us;
        self.push(
            t,
            Ev::Arrive {
                w,
                req: Req {
                    op,
                    kg,
                    root,
                    enqueued_us: t,
                    remote: false,
                },
            },
        );
    }

    fn enqueue(&mut self, w: usize, mut req: Req) {
        let owner = owner_of(&self.routing, req.op as usize, req.kg as usize);
        if owner != w {
            // Routed before a migration: forward to the new owner.
            req.enqueued_us = self.now_us + self.cfg.link_latency_us;
            self.push(req.enqueued_us, Ev::Arrive { w: owner, req });
            return;
        }
        self.workers[w].queue.push(req.op as usize, req);
        if let Some(e) = self.workers[w].execs.iter().position(|x| !x.busy) {
            self.try_start(w, e);
        }
    }

    fn try_start(&mut self, w: usize, e: usize) {
        let now = self.now_us;
        if self.workers[w].execs[e].busy || self.workers[w].paused_until_us > now {
            return;
        }
        let debt = std::mem::take(&mut self.workers[w].execs[e].debt_us);
        if debt > 0.0 {
            self.workers[w].execs[e].busy = true;
            self.workers[w].execs[e].job = None;
            self.workers[w].c.exec_busy_us += debt;
            self.push(now + debt, Ev::ExecDone { w, e });
            return;
        }
        let Some((_, req)) = self.workers[w].queue.start_next() else {
            return;
        };
        let cv = self.cfg.service_cv;
        let op = req.op as usize;
        let exec = self.rng.lognormal(self.exec_us[op].max(1e-3), cv);
        let mut children = std::mem::take(&mut self.workers[w].execs[e].children);
        children.clear();
        let truth = self.cfg.truth;
        let shape = self.cfg.cost_shape;
        let beta_exec = truth.beta_us * (1.0 - self.cfg.network_share_of_beta);
        let mut dispatch = if req.remote {
            shape.receiver_remote_us(beta_exec)
        } else {
            0.0
        };
        for i in 0..self.out[op].len() {
            let (edge, to, fanout) = self.out[op][i];
            let k = self.rng.count(fanout);
            self.workers[w].c.edges[edge] += k as f64;
            for _ in 0..k {
                let kg = self.samplers[to as usize].sample(&mut self.rng) as u32;
                let owner = owner_of(&self.routing, to as usize, kg as usize);
                let jitter = 0.9 + 0.2 * self.rng.uniform();
                let wk = &mut self.workers[w];
                if owner == w {
                    dispatch += truth.alpha_us * jitter;
                    wk.c.local += 1.0;
                } else {
                    let (cost, opens) =
                        shape.sender_remote_us(beta_exec, now, wk.batch_opened_us[owner]);
                    if opens {
                        wk.batch_opened_us[owner] = now;
                    }
                    dispatch += cost * jitter;
                    wk.c.remote += 1.0;
                    wk.dest_interval[owner] = self.interval_id;
                    wk.dest_last_us[owner] = now;
                    if !wk.dest_listed[owner] {
                        wk.dest_listed[owner] = true;
                        wk.dest_open.push(owner);
                    }
                }
                children.push((to, kg));
            }
        }
        let wk = &mut self.workers[w];
        wk.c.processed[op] += 1.0;
        wk.c.exec_sum_us[op] += exec;
        wk.c.exec_busy_us += exec + dispatch;
        wk.c.wait_sum_us += now - req.enqueued_us;
        wk.c.started += 1.0;
        let ex = &mut wk.execs[e];
        ex.children = children;
        ex.busy = true;
        ex.job = Some(req);
        self.push(now + exec + dispatch, Ev::ExecDone { w, e });
    }

    fn exec_done(&mut self, w: usize, e: usize) {
        let now = self.now_us;
        // The executor stays busy while it hands out children, so a local child cannot start
        // on it (and reuse its child buffer) before the hand-out is over.
        let job = self.workers[w].execs[e].job.take();
        if let Some(req) = job {
            let children = std::mem::take(&mut self.workers[w].execs[e].children);
            let net_cost = self.cfg.truth.beta_us * self.cfg.network_share_of_beta;
            for &(to, kg) in &children {
                let child = Req {
                    op: to,
                    kg,
                    root: req.root,
                    enqueued_us: now,
                    remote: false,
                };
                let owner = owner_of(&self.routing, to as usize, kg as usize);
                if owner == w {
                    self.enqueue(w, child);
                } else {
                    let wk = &mut self.workers[w];
                    let start = wk.net_free_us.max(now);
                    wk.net_free_us = start + net_cost;
                    wk.c.net_busy_us += net_cost;
                    let t = wk.net_free_us
                        + self.cfg.link_latency_us
                        + self.rng.uniform() * self.cfg.batch_age_us;
                    self.push(
                        t,
                        Ev::Arrive {
                            w: owner,
                            req: Req {
                                enqueued_us: t,
                                remote: true,
                                ..child
                            },
                        },
                    );
                }
            }
            let n = children.len() as u32;
            let mut children = children;
            children.clear();
            self.workers[w].execs[e].children = children;
            self.workers[w].queue.finished(req.op as usize);
            let r = &mut self.roots[req.root as usize];
            r.1 = r.1 + n - 1;
            if r.1 == 0 {
                let admitted_at = r.0;
                self.latency.record(now - admitted_at);
                self.completed += 1.0;
                self.total_completed += 1;
                self.free_roots.push(req.root);
                if self.closed_loop {
                    self.admit();
                }
            }
        }
        self.workers[w].execs[e].busy = false;
        self.try_start(w, e);
        if self.workers[w].queue.capped() {
            // The finished request freed a place under its operator's cap: an executor left
            // idle by that cap may start now (this one may be paying housekeeping debt).
            self.wake(w);
        }
    }

    /// Every idle executor of `w` tries to start a request.
    fn wake(&mut self, w: usize) {
        for e in 0..self.workers[w].execs.len() {
            self.try_start(w, e);
        }
    }

    /// Caps how many executors of each worker run each operator at once:
    /// `parallelism[o][w]` (a decision's parallelism); `None` lifts every cap, so any idle
    /// executor takes the oldest request (the single pool the load model assumes).
    pub fn set_parallelism(&mut self, parallelism: Option<&[Vec<usize>]>) {
        for w in 0..self.workers.len() {
            let limits: Option<Vec<usize>> = parallelism.map(|p| {
                p.iter()
                    .map(|row| row.get(w).copied().unwrap_or(0))
                    .collect()
            });
            let was_capped = self.workers[w].queue.capped();
            self.workers[w].queue.set_limits(limits.as_deref());
            // Only a cap that changed can leave a startable request waiting (an uncapped pool
            // stays as it was: runs without caps reproduce the single pool exactly).
            if was_capped || self.workers[w].queue.capped() {
                self.wake(w);
            }
        }
    }

    /// Closes the connections of `w` not used within the last metrics interval.
    fn close_idle_connections(&mut self, w: usize) {
        let (now, open_for_us) = (self.now_us, self.cfg.interval_us);
        let wk = &mut self.workers[w];
        let (last, listed) = (&wk.dest_last_us, &mut wk.dest_listed);
        wk.dest_open.retain(|&v| {
            let open = now - last[v] <= open_for_us;
            if !open {
                listed[v] = false;
            }
            open
        });
    }

    fn flush(&mut self) {
        let charge_per_dest = self.cfg.truth.gamma_us * self.cfg.flush_interval_us / 1e6;
        let shape = self.cfg.cost_shape;
        // `fanin-gamma` prices a connection by how many workers send to its destination.
        let mut fan_in = vec![0usize; self.workers.len()];
        if shape == CostShape::FaninGamma {
            for w in 0..self.active_workers {
                self.close_idle_connections(w);
                for &v in &self.workers[w].dest_open {
                    fan_in[v] += 1;
                }
            }
        }
        for w in 0..self.active_workers {
            self.close_idle_connections(w);
            let wk = &mut self.workers[w];
            let cost = if shape == CostShape::FaninGamma {
                wk.dest_open
                    .iter()
                    .map(|&v| charge_per_dest * shape.gamma_factor(fan_in[v]))
                    .sum()
            } else {
                charge_per_dest * wk.dest_open.len() as f64
            };
            let per = cost / wk.execs.len() as f64;
            for ex in &mut wk.execs {
                ex.debt_us += per;
            }
            wk.c.queue_sum += wk.queue.len() as f64;
            wk.c.queue_samples += 1.0;
            for e in 0..self.workers[w].execs.len() {
                self.try_start(w, e);
            }
        }
        let t = self.now_us + self.cfg.flush_interval_us;
        self.push(t, Ev::Flush);
    }

    fn account(&mut self) {
        self.busy_worker_us += (self.now_us - self.last_account_us) * self.active_workers as f64;
        self.last_account_us = self.now_us;
    }

    /// Runs every event up to `t_us`.
    pub fn run_until(&mut self, t_us: f64) {
        while let Some(top) = self.heap.peek() {
            if top.t > t_us {
                break;
            }
            let Timed { t, ev, .. } = self.heap.pop().expect("peeked");
            self.now_us = t;
            match ev {
                Ev::ExecDone { w, e } => self.exec_done(w, e),
                Ev::Arrive { w, req } => self.enqueue(w, req),
                Ev::Flush => self.flush(),
                Ev::Resume { w } => self.wake(w),
                Ev::Input => {
                    self.input_scheduled = false;
                    if self.input_rate_per_s > 0.0 {
                        self.admit();
                        self.input_scheduled = true;
                        let dt = self.input_rng.exponential(1e6 / self.input_rate_per_s);
                        self.push(self.now_us + dt, Ev::Input);
                    }
                }
            }
        }
        self.now_us = t_us;
        self.account();
    }

    /// Table 2 for the interval since the last call, and resets the interval counters.
    pub fn take_samples(&mut self, interval_us: f64) -> (Vec<WorkerSample>, PlannerSample) {
        let per_s = 1e6 / interval_us.max(1.0);
        let mut out = Vec::with_capacity(self.active_workers);
        let mut queued_total = 0;
        for w in 0..self.active_workers {
            let wk = &mut self.workers[w];
            let fresh = Counters {
                processed: vec![0.0; wk.c.processed.len()],
                exec_sum_us: vec![0.0; wk.c.exec_sum_us.len()],
                edges: vec![0.0; wk.c.edges.len()],
                ..Counters::default()
            };
            let c = std::mem::replace(&mut wk.c, fresh);
            let queue_len = wk.queue.len();
            queued_total += queue_len;
            let destinations = wk
                .dest_interval
                .iter()
                .filter(|&&s| s == self.interval_id)
                .count();
            out.push(WorkerSample {
                worker: w,
                queue_len,
                queue_mean: if c.queue_samples > 0.0 {
                    c.queue_sum / c.queue_samples
                } else {
                    queue_len as f64
                },
                wait_mean_us: if c.started > 0.0 {
                    c.wait_sum_us / c.started
                } else {
                    0.0
                },
                local_per_s: c.local * per_s,
                remote_per_s: c.remote * per_s,
                // The simulator's CPU time charges a remote request to its sender only.
                remote_received_per_s: None,
                // Input records cost nothing beyond their execution in the simulator.
                roots_per_s: 0.0,
                destinations,
                operators: c
                    .processed
                    .iter()
                    .zip(&c.exec_sum_us)
                    .map(|(&n, &s)| OperatorSample {
                        processed_per_s: n * per_s,
                        exec_us: if n > 0.0 { s / n } else { 0.0 },
                    })
                    .collect(),
                edges_per_s: c.edges.iter().map(|x| x * per_s).collect(),
                executor_busy_us_per_s: c.exec_busy_us * per_s,
                network_busy_us_per_s: c.net_busy_us * per_s,
                // The simulator knows every busy µs exactly: executors and network thread.
                cpu_us_per_s: Some((c.exec_busy_us + c.net_busy_us) * per_s),
                // Its executors charge the sender all of a remote request, which the split
                // rows do not assume: its rows are used whole.
                exec_cpu_us_per_s: None,
                exec_sleep_cpu_us_per_s: 0.0,
                exec_sleeps_per_s: 0.0,
                // Threads that sleep and wake are not simulated: no wake-up cost to price.
                sleeps_per_s: 0.0,
                sleep_cpu_us_per_s: 0.0,
                throttled_periods: None,
                // Nor are TCP batches: a remote request's cost is all in β.
                batches_per_s: 0.0,
            });
        }
        self.interval_id += 1;
        let planner = PlannerSample {
            queue_len: queued_total,
            input_per_s: self.offered * per_s,
            refused_per_s: self.refused * per_s,
            throughput_per_s: self.completed * per_s,
        };
        self.offered = 0.0;
        self.refused = 0.0;
        self.completed = 0.0;
        (out, planner)
    }

    /// Moves to `shares` on `workers` workers: key groups reassigned with the fewest moves,
    /// queued requests of moved key groups forwarded, every worker involved paused for
    /// `pause_base + pause_per_kg × key groups it sends or receives`. Returns key groups moved.
    pub fn migrate(&mut self, shares: &Shares) -> usize {
        let new_active = shares
            .first()
            .map_or(1, Vec::len)
            .max(1)
            .min(self.workers.len());
        let new_routing = reassign(&self.routing, shares);
        let mut involved = vec![0usize; self.workers.len()];
        let mut moved = 0;
        for (a, b) in self.routing.rows().zip(new_routing.rows()) {
            for (&x, &y) in a.iter().zip(b) {
                if x != y {
                    moved += 1;
                    involved[x.index()] += 1;
                    involved[y.index()] += 1;
                }
            }
        }
        self.account();
        self.routing = new_routing;
        self.active_workers = new_active;
        self.epoch += 1;
        for (w, &kgs) in involved.iter().enumerate() {
            if kgs == 0 {
                continue;
            }
            let pause = self.cfg.pause_base_us + self.cfg.pause_per_key_group_us * kgs as f64;
            let until = self.now_us + pause;
            self.workers[w].paused_until_us = until;
            // Forward queued requests whose key group left this worker.
            let routing = &self.routing;
            let gone = self.workers[w]
                .queue
                .retain_or_take(|_, req| owner_of(routing, req.op as usize, req.kg as usize) == w);
            for req in gone {
                let owner = owner_of(&self.routing, req.op as usize, req.kg as usize);
                let t = until + self.cfg.link_latency_us;
                self.push(t, Ev::Arrive { w: owner, req });
            }
            self.push(until, Ev::Resume { w });
        }
        moved
    }
}

/// The worker owning key group `kg` of operator `op` (the simulator's slots are workers).
fn owner_of(routing: &RoutingTable, op: usize, kg: usize) -> usize {
    routing.owner(op, KeyGroup::at(kg)).index()
}
