//! A seeded, deterministic simulation of the migration protocol.
//!
//! Why a simulation rather than only unit tests: the protocol's bugs live in interleavings —
//! which connection delivers first — and a seeded event loop explores thousands of them in a
//! second and replays any one exactly. One seed drives every choice (input keys and timing,
//! service times, link delays, plans, the victim of a kill); time is a counter; the network is a
//! set of per-pair FIFO links with random delays, so messages are reordered *across*
//! connections (never within one), with a tail of slow deliveries that makes stragglers.
//!
//! The cluster: `workers_max` workers (some idle: the planner adds and removes workers by
//! giving them key groups or taking them all away) plus the planner with its ingress, running an
//! app DAG (a 3-operator pipeline or a diamond). Each request's body is `(key, sequence, path)`:
//! the ingress numbers each key's roots 1, 2, 3, …, and every operator passes the key and the
//! number on to each successor, extending the path. Each worker keeps, as its operator state,
//! per key group the last number seen per (path, key) — state that moves with the key group.
//!
//! The checker, at every execution: the number is exactly one more than the state's last one
//! for that (path, key) — so nothing is lost, duplicated or reordered per key along any path,
//! and the state moved with its key group before any of the group's requests ran there. At the
//! end: every key's last number along every path equals the number of roots the ingress emitted
//! for it (complete), every key group's state is on exactly one worker, every migration
//! finished and every worker resumed, nothing is left queued, and no machine reported a fault.
//! With a kill: the planner must time out and name exactly the killed worker as failed.

mod apply;
mod check;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::assignment::Assignment;
use crate::ids::{Epoch, KeyGroup, Slot};
use crate::message::{Msg, Peer, Req};
use crate::planner::{MigrationFailure, MigrationReport, Planner, PlannerAction, PlannerConfig};
use crate::rng::SimRng;
use crate::routing::RoutingTable;
use crate::split::{initial_routing, reassign};
use crate::worker::{Waiting, Worker, WorkerReport};

/// Safety net against a protocol that livelocks: no seed of the default size comes near it.
pub const EVENTS_MAX: u64 = 5_000_000;
/// Bits per operator in a request's path (operator index + 1).
const PATH_BITS: u32 = 4;

/// The app DAG the simulation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// 0 → 1 → 2.
    Pipeline,
    /// 0 → {1, 2} → 3: operator 3 sees each key along two paths.
    Diamond,
}

impl Shape {
    /// `preds[o]`: o's predecessors.
    pub fn preds(self) -> Vec<Vec<usize>> {
        match self {
            Shape::Pipeline => vec![vec![], vec![0], vec![1]],
            Shape::Diamond => vec![vec![], vec![0], vec![0], vec![1, 2]],
        }
    }
}

/// The simulation's knobs; times in ns of simulated time.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub shape: Shape,
    pub workers_max: usize,
    pub key_groups: usize,
    pub keys: usize,
    /// Roots the ingress emits (each for a random key).
    pub inputs: usize,
    pub input_gap_ns_mean: f64,
    /// Migrations per run: uniform in 1..=migrations_max, at random moments of the input.
    pub migrations_max: usize,
    pub link_delay_ns: (u64, u64),
    /// Probability and upper bound of a slow delivery.
    pub slow_link_p: f64,
    pub slow_link_ns_max: u64,
    pub service_ns: (u64, u64),
    /// Kill one worker during a migration.
    pub kill: bool,
    /// Send and await fence markers and gate kept key groups on them; off, the workers follow
    /// the rule with the plan's markers only, which reorders keys (see the crate docs).
    pub fence: bool,
    pub tick_ns: u64,
    pub planner: PlannerConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            shape: Shape::Pipeline,
            workers_max: 4,
            key_groups: 8,
            keys: 12,
            inputs: 120,
            input_gap_ns_mean: 4_000.0,
            migrations_max: 3,
            link_delay_ns: (1_000, 20_000),
            slow_link_p: 0.03,
            slow_link_ns_max: 400_000,
            service_ns: (500, 3_000),
            kill: false,
            fence: true,
            tick_ns: 100_000,
            planner: PlannerConfig {
                timeout_ns: 20_000_000,
                silent_ns: 2_000_000,
            },
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct SimOutcome {
    pub migrations: Vec<MigrationReport>,
    pub failure: Option<MigrationFailure>,
    pub killed: Option<Slot>,
    pub processed: u64,
    pub admitted: u64,
    pub events: u64,
    pub end_ns: u64,
}

/// A request's body: the key, its number at the ingress, the operators it went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    pub key: u32,
    pub seq: u32,
    pub path: u64,
}

/// Per key group: last number seen per (path, key).
type Store = BTreeMap<(u64, u32), u32>;
/// Exported state: the stores of the key groups, by (operator, key group).
type GroupState = Vec<((usize, KeyGroup), Store)>;
type SimMsg = Msg<Body, GroupState>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Ingress,
    Control,
    Planner,
    Worker(Slot),
}

enum Event {
    Net {
        to: Slot,
        from: Peer,
        msg: SimMsg,
    },
    Plan {
        to: Slot,
        assignment: Assignment,
    },
    Completed(WorkerReport),
    Progress {
        from: Slot,
        epoch: Epoch,
        waiting: Waiting,
    },
    Admit,
    ExecDone(usize),
    Migrate,
    Tick,
    Kill(usize),
}

struct Node {
    sm: Worker<Body, GroupState>,
    queue: VecDeque<Req<Body>>,
    busy: bool,
    drain_pending: bool,
    store: BTreeMap<(usize, KeyGroup), Store>,
    alive: bool,
}

struct Sim<'c> {
    cfg: &'c SimConfig,
    rng: SimRng,
    now: u64,
    next_id: u64,
    events: BTreeMap<(u64, u64), Event>,
    link_last: BTreeMap<(End, End), u64>,
    planner: Planner,
    nodes: Vec<Node>,
    succs: Vec<Vec<usize>>,
    sources: Vec<usize>,
    emitted: Vec<u32>,
    waiting_migrations: usize,
    migrations_started: usize,
    kill_in: Option<usize>,
    ticking: bool,
    probe_started: bool,
    error: Option<String>,
    out: SimOutcome,
}

/// Key group of `key` for `operator` (a fixed mix, so groups differ per operator).
pub fn key_group(key: u32, operator: usize, key_groups: usize) -> KeyGroup {
    let x = (u64::from(key) ^ (operator as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    KeyGroup::at(((x >> 32) % key_groups as u64) as usize)
}

/// Runs one seed; `Err` says what broke (the caller prints the seed).
pub fn run(seed: u64, cfg: &SimConfig) -> Result<SimOutcome, String> {
    let mut rng = SimRng::new(seed);
    let preds = cfg.shape.preds();
    let ops = preds.len();
    let mut succs = vec![Vec::new(); ops];
    for (o, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(o);
        }
    }
    let sources = (0..ops).filter(|&o| preds[o].is_empty()).collect();
    let initial_workers = 1 + rng.below(cfg.workers_max);
    let shares = random_shares(&mut rng, ops, cfg.workers_max, initial_workers);
    let routing = initial_routing(&shares, cfg.key_groups);
    let planner = Planner::new(routing.clone(), preds, cfg.planner);
    let routing = std::sync::Arc::new(routing);
    let nodes = (0..cfg.workers_max)
        .map(|w| Node {
            sm: Worker::new(Slot::at(w), std::sync::Arc::clone(&routing), Epoch::INITIAL),
            queue: VecDeque::new(),
            busy: false,
            drain_pending: false,
            store: BTreeMap::new(),
            alive: true,
        })
        .collect();
    let migrations = 1 + rng.below(cfg.migrations_max);
    let input_span_ns = (cfg.inputs as f64 * cfg.input_gap_ns_mean) as u64;
    let mut sim = Sim {
        cfg,
        rng,
        now: 0,
        next_id: 0,
        events: BTreeMap::new(),
        link_last: BTreeMap::new(),
        planner,
        nodes,
        succs,
        sources,
        emitted: vec![0; cfg.keys],
        waiting_migrations: 0,
        migrations_started: 0,
        kill_in: None,
        ticking: false,
        probe_started: false,
        error: None,
        out: SimOutcome::default(),
    };
    if cfg.kill {
        sim.kill_in = Some(sim.rng.below(migrations));
    }
    for _ in 0..migrations {
        let at = sim.rng.below(input_span_ns.max(1) as usize) as u64;
        sim.at(at, Event::Migrate);
    }
    sim.at(0, Event::Admit);
    sim.run()?;
    sim.check()?;
    Ok(sim.out)
}

/// Shares over `workers_max` workers of which a random `count` host something.
fn random_shares(rng: &mut SimRng, ops: usize, workers_max: usize, count: usize) -> Vec<Vec<f64>> {
    let mut all: Vec<usize> = (0..workers_max).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i + 1));
    }
    let chosen = &all[..count];
    (0..ops)
        .map(|_| {
            let mut row = vec![0.0; workers_max];
            for &w in chosen {
                if rng.uniform() < 0.8 {
                    row[w] = 0.2 + rng.uniform();
                }
            }
            if row.iter().all(|&s| s == 0.0) {
                row[chosen[0]] = 1.0;
            }
            row
        })
        .collect()
}

impl Sim<'_> {
    fn at(&mut self, t: u64, e: Event) {
        self.next_id += 1;
        self.events.insert((t, self.next_id), e);
    }

    fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(format!("t={} ns: {msg}", self.now));
        }
    }

    /// Delivery time on the FIFO link `from → to`: a random delay, never before the link's
    /// previous delivery.
    fn link(&mut self, from: End, to: End) -> u64 {
        let (lo, hi) = self.cfg.link_delay_ns;
        let mut d = lo + self.rng.below((hi - lo + 1) as usize) as u64;
        if self.rng.uniform() < self.cfg.slow_link_p {
            d += self.rng.below(self.cfg.slow_link_ns_max as usize) as u64;
        }
        let last = self.link_last.entry((from, to)).or_insert(0);
        let t = (self.now + d).max(*last);
        *last = t;
        t
    }

    fn send(&mut self, from: Peer, to: Slot, msg: SimMsg) {
        let src = match from {
            Peer::Ingress => End::Ingress,
            Peer::Worker(w) => End::Worker(w),
        };
        let t = self.link(src, End::Worker(to));
        self.at(t, Event::Net { to, from, msg });
    }

    fn run(&mut self) -> Result<(), String> {
        loop {
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
            if self.out.failure.is_some() {
                // The planner gave up: the run ends with its report (survivors stay as they are).
                return Ok(());
            }
            let Some(((t, _), e)) = self.events.pop_first() else {
                if self.out.killed.is_some() && !self.probe_started {
                    // The victim died outside a migration or after completing its part: one
                    // more migration (moving nothing) must still notice it.
                    self.probe_started = true;
                    let routing = (**self.planner.routing()).clone();
                    self.start_with(routing);
                    continue;
                }
                return Ok(());
            };
            self.now = t;
            self.out.events += 1;
            if self.out.events > EVENTS_MAX {
                return Err(format!("more than {EVENTS_MAX} events"));
            }
            self.handle(e);
        }
    }

    fn handle(&mut self, e: Event) {
        let now = self.now;
        match e {
            Event::Net { to, from, msg } => {
                let to = to.index();
                if self.nodes[to].alive {
                    let acts = self.nodes[to].sm.on_message(now, from, msg);
                    self.apply(to, acts);
                }
            }
            Event::Plan { to, assignment } => {
                let to = to.index();
                if self.nodes[to].alive {
                    let acts = self.nodes[to].sm.on_plan(now, assignment);
                    self.apply(to, acts);
                }
            }
            Event::Completed(report) => {
                let acts = self.planner.on_completed(now, report);
                self.apply_planner(acts);
            }
            Event::Progress {
                from,
                epoch,
                waiting,
            } => self.planner.on_progress(now, from, epoch, waiting),
            Event::Admit => self.admit(),
            Event::ExecDone(w) => self.exec_done(w),
            Event::Migrate => {
                if self.planner.in_migration() {
                    self.waiting_migrations += 1;
                } else {
                    self.start_random();
                }
            }
            Event::Tick => {
                for w in 0..self.nodes.len() {
                    if self.nodes[w].alive {
                        let acts = self.nodes[w].sm.on_tick(now);
                        self.apply(w, acts);
                    }
                }
                let acts = self.planner.on_tick(now);
                self.apply_planner(acts);
                if self.planner.in_migration() {
                    self.at(now + self.cfg.tick_ns, Event::Tick);
                } else {
                    self.ticking = false;
                }
            }
            Event::Kill(w) => {
                self.nodes[w].alive = false;
                self.out.killed = Some(Slot::at(w));
            }
        }
    }

    fn admit(&mut self) {
        let key = self.rng.below(self.cfg.keys) as u32;
        self.emitted[key as usize] += 1;
        let seq = self.emitted[key as usize];
        for i in 0..self.sources.len() {
            let s = self.sources[i];
            let body = Body {
                key,
                seq,
                path: s as u64 + 1,
            };
            let act = self
                .planner
                .admit(s, key_group(key, s, self.cfg.key_groups), body);
            self.apply_planner(vec![act]);
        }
        self.out.admitted += 1;
        if (self.out.admitted as usize) < self.cfg.inputs {
            let gap = 1 + self.rng.exponential(self.cfg.input_gap_ns_mean) as u64;
            self.at(self.now + gap, Event::Admit);
        }
    }

    fn start_random(&mut self) {
        let ops = self.succs.len();
        let old = (**self.planner.routing()).clone();
        let new = if self.rng.uniform() < 0.1 {
            old
        } else {
            let count = 1 + self.rng.below(self.cfg.workers_max);
            let shares = random_shares(&mut self.rng, ops, self.cfg.workers_max, count);
            reassign(&old, &shares)
        };
        if self.kill_in == Some(self.migrations_started) {
            let hosts: BTreeSet<Slot> = old_and_new_hosts(self.planner.routing(), &new);
            let hosts: Vec<Slot> = hosts.into_iter().collect();
            let victim = hosts[self.rng.below(hosts.len())].index();
            let after = self.rng.below(4 * self.cfg.link_delay_ns.1 as usize) as u64;
            self.at(self.now + after, Event::Kill(victim));
        }
        self.start_with(new);
    }

    fn start_with(&mut self, new: RoutingTable) {
        self.migrations_started += 1;
        match self
            .planner
            .start_migration(self.now, new, self.cfg.workers_max)
        {
            Ok(acts) => self.apply_planner(acts),
            Err(e) => self.fail(format!("planner refused a migration: {e}")),
        }
        if !self.ticking {
            self.ticking = true;
            self.at(self.now + self.cfg.tick_ns, Event::Tick);
        }
    }

    fn apply_planner(&mut self, acts: Vec<PlannerAction<Body>>) {
        for a in acts {
            match a {
                PlannerAction::SendPlan { to, mut assignment } => {
                    if !self.cfg.fence {
                        assignment.fence_to.clear();
                        assignment.fence_from.clear();
                        assignment.upstream_old = Default::default();
                    }
                    let t = self.link(End::Control, End::Worker(to));
                    self.at(t, Event::Plan { to, assignment });
                }
                PlannerAction::SendRequest { to, req } => {
                    self.send(Peer::Ingress, to, Msg::Request(req));
                }
                PlannerAction::SendMarker { to, epoch } => {
                    self.send(Peer::Ingress, to, Msg::Marker { epoch });
                }
                PlannerAction::Finished(report) => {
                    self.out.migrations.push(report);
                    if self.waiting_migrations > 0 {
                        self.waiting_migrations -= 1;
                        self.start_random();
                    }
                }
                PlannerAction::Failed(f) => self.out.failure = Some(f),
            }
        }
    }
}

fn old_and_new_hosts(old: &RoutingTable, new: &RoutingTable) -> BTreeSet<Slot> {
    old.owners().iter().chain(new.owners()).copied().collect()
}
