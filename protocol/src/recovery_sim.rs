//! A seeded, deterministic simulation of checkpoints and recovery, in the style of
//! [`crate::sim`] (the migration's model): one seed drives every choice (the records' keys,
//! link delays, when a checkpoint is due, which worker is killed and when), time is a counter,
//! and the network is per-pair FIFO links with random delays, so messages are reordered
//! *across* connections, never within one.
//!
//! The model: a driver admits records to a two-operator pipeline over `workers` workers; the
//! first operator's key groups and the second's are owned by different workers, so every record
//! crosses a link between them. Each operator keeps, per key, the sequence number of the last
//! record of that key it ran (the driver numbers each key's records 1, 2, 3, …). A checkpoint is
//! the protocol `clasp run` uses: stop admitting, probe until the per-link sent and received
//! counts balance in two consecutive rounds (quiescence), ask every worker for its state and
//! counters, resume admitting, and commit them with the input's offset only a while later —
//! the parts are written while the input flows, so a kill before the commit restores the
//! previous checkpoint although admission went on past this cut. A kill (at a random moment, perhaps during a
//! checkpoint or during a recovery) loses the worker's state and everything in flight; the
//! driver notices after a delay, drops every connection (messages of the old job are never
//! delivered to the new one), restores every worker from the last committed checkpoint and
//! replays the input from its offset.
//!
//! The checker, at every execution: the record's number is exactly one more than the
//! operator's last one for that key — so a cut that saved a state ahead of, or behind, what
//! the replay sends is caught (a request in flight at the cut, lost by the restore, leaves a
//! gap; a state that already ran a replayed record repeats it). At the end: every key's last
//! number at the last operator equals its record count, and the counters restored from the
//! checkpoint plus those counted after it are exactly one uninterrupted run's.
//! `drain: false` takes the cut without waiting for quiescence: the checker must catch it.

use std::collections::{BTreeMap, BinaryHeap};

use crate::rng::SimRng;

/// Safety net against a protocol that livelocks.
pub const EVENTS_MAX: u64 = 2_000_000;

/// The simulation's knobs (times in simulated ticks).
#[derive(Clone, Debug)]
pub struct RecoverySimConfig {
    /// Workers (2..=8).
    pub workers: usize,
    /// Records the driver admits.
    pub records: u64,
    /// Distinct keys.
    pub keys: u64,
    /// A checkpoint is due every this many admitted records.
    pub checkpoint_every: u64,
    /// Workers killed during the run (each at a random moment).
    pub kills: usize,
    /// Longest link delay.
    pub delay_max: u64,
    /// Ticks from a kill to the driver noticing it.
    pub detect_after: u64,
    /// Wait for quiescence before the cut (the protocol); `false` is the broken variant.
    pub drain: bool,
}

impl Default for RecoverySimConfig {
    fn default() -> Self {
        RecoverySimConfig {
            workers: 3,
            records: 400,
            keys: 7,
            checkpoint_every: 60,
            kills: 1,
            delay_max: 40,
            detect_after: 30,
            drain: true,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryOutcome {
    /// Checkpoints committed.
    pub checkpoints: u64,
    /// Recoveries carried out.
    pub recoveries: u64,
    /// Records admitted again after a recovery.
    pub replayed: u64,
    /// Of the recoveries, those that hit a checkpoint in progress.
    pub during_checkpoint: u64,
    /// Of those, the ones that hit it while its parts were written (admission resumed, the
    /// cut not yet committed).
    pub during_persist: u64,
    /// Events simulated.
    pub events: u64,
}

/// Per operator: each key's last record number.
type OpStates = [BTreeMap<u64, u64>; 2];

/// A message; `job` is the attempt it belongs to (a restart drops the older ones).
#[derive(Clone, Debug)]
enum Body {
    /// Run operator `op` on a key's record number `seq`.
    Req { op: usize, key: u64, seq: u64 },
    /// Driver → worker: a quiescence probe.
    Probe { round: u64 },
    /// Worker → driver: its per-peer sent and received counts.
    Status {
        round: u64,
        sent: Vec<u64>,
        recv: Vec<u64>,
    },
    /// Driver → worker: send your state.
    Snapshot { id: u64 },
    /// Worker → driver: its state and counters.
    Part {
        id: u64,
        state: [BTreeMap<u64, u64>; 2],
        processed: [u64; 2],
    },
}

/// A message in flight: (delivery time, send order) first, for the heap.
#[derive(Debug)]
struct InFlight {
    at: u64,
    order: u64,
    from: usize,
    to: usize,
    job: u64,
    body: Body,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.order).cmp(&(self.at, self.order))
    }
}

#[derive(Clone, Debug, Default)]
struct Node {
    alive: bool,
    state: [BTreeMap<u64, u64>; 2],
    processed: [u64; 2],
    /// Per node (the driver is the last): requests sent and received in this job.
    sent: Vec<u64>,
    recv: Vec<u64>,
}

/// A committed checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Cut {
    admitted: u64,
    state: [BTreeMap<u64, u64>; 2],
    processed: [u64; 2],
}

/// Where the driver's checkpoint is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ck {
    Idle,
    /// Probing: the round, and the last round's counts if they balanced.
    Draining(u64, Option<Vec<Vec<u64>>>),
    /// Waiting for the parts of checkpoint `id`.
    Snapshot(u64),
    /// The cut taken and admission resumed; its parts are written until the tick given, and
    /// the cut is committed then.
    Persisting(Box<Cut>, u64),
}

struct Sim<'a> {
    cfg: &'a RecoverySimConfig,
    rng: SimRng,
    now: u64,
    order: u64,
    net: BinaryHeap<InFlight>,
    /// Per link: the last delivery time (FIFO per link).
    last_at: BTreeMap<(usize, usize), u64>,
    nodes: Vec<Node>,
    keys: Vec<u64>,
    job: u64,
    admitted: u64,
    driver_sent: Vec<u64>,
    ck: Ck,
    statuses: BTreeMap<usize, (Vec<u64>, Vec<u64>)>,
    parts: BTreeMap<usize, (OpStates, [u64; 2])>,
    cut: Cut,
    /// What the operators had processed at the cut this job started from.
    job_base: [u64; 2],
    next_id: u64,
    kills_at: Vec<u64>,
    detect_at: Option<u64>,
    out: RecoveryOutcome,
}

/// Runs one seed; `Err` names the first violation.
pub fn run(seed: u64, cfg: &RecoverySimConfig) -> Result<RecoveryOutcome, String> {
    assert!((2..=8).contains(&cfg.workers), "2..=8 workers");
    let mut rng = SimRng::new(seed);
    let keys = (0..cfg.records)
        .map(|_| rng.below(cfg.keys as usize) as u64)
        .collect();
    let horizon = cfg.records * 3;
    let kills_at = (0..cfg.kills)
        .map(|_| rng.below(horizon as usize) as u64)
        .collect();
    let n = cfg.workers + 1;
    let mut sim = Sim {
        cfg,
        rng,
        now: 0,
        order: 0,
        net: BinaryHeap::new(),
        last_at: BTreeMap::new(),
        nodes: vec![Node::default(); cfg.workers],
        keys,
        job: 0,
        admitted: 0,
        driver_sent: vec![0; n],
        ck: Ck::Idle,
        statuses: BTreeMap::new(),
        parts: BTreeMap::new(),
        cut: Cut::default(),
        job_base: [0; 2],
        next_id: 1,
        kills_at,
        detect_at: None,
        out: RecoveryOutcome::default(),
    };
    sim.restart();
    sim.main_loop()?;
    sim.check_end()?;
    Ok(sim.out)
}

impl Sim<'_> {
    fn driver(&self) -> usize {
        self.cfg.workers
    }

    /// The worker that owns `key` at operator `op` (they differ, so every record crosses).
    fn owner(&self, op: usize, key: u64) -> usize {
        let w = self.cfg.workers as u64;
        ((key + op as u64) % w) as usize
    }

    fn send(&mut self, from: usize, to: usize, body: Body) {
        let delay = 1 + self.rng.below(self.cfg.delay_max as usize) as u64;
        let last = self.last_at.get(&(from, to)).copied().unwrap_or(0);
        let at = (self.now + delay).max(last);
        self.last_at.insert((from, to), at);
        self.order += 1;
        // Requests are counted (as the transport counts request frames); control is not.
        if matches!(body, Body::Req { .. }) {
            if from == self.driver() {
                self.driver_sent[to] += 1;
            } else {
                self.nodes[from].sent[to] += 1;
            }
        }
        self.net.push(InFlight {
            at,
            order: self.order,
            from,
            to,
            job: self.job,
            body,
        });
    }

    /// A new job: every worker alive, its state from the last cut, its link counts zero.
    fn restart(&mut self) {
        let n = self.cfg.workers + 1;
        for w in 0..self.cfg.workers {
            let mut state: [BTreeMap<u64, u64>; 2] = Default::default();
            for (op, s) in state.iter_mut().enumerate() {
                *s = (self.cut.state[op].iter())
                    .filter(|(k, _)| self.owner(op, **k) == w)
                    .map(|(k, v)| (*k, *v))
                    .collect();
            }
            self.nodes[w] = Node {
                alive: true,
                state,
                processed: [0; 2],
                sent: vec![0; n],
                recv: vec![0; n],
            };
        }
        self.driver_sent = vec![0; n];
        self.admitted = self.cut.admitted;
        self.job_base = self.cut.processed;
        self.ck = Ck::Idle;
        self.statuses.clear();
        self.parts.clear();
    }

    fn main_loop(&mut self) -> Result<(), String> {
        loop {
            self.out.events += 1;
            if self.out.events > EVENTS_MAX {
                return Err(format!("no end after {EVENTS_MAX} events"));
            }
            if let Some(&k) = self.kills_at.first()
                && k <= self.now
            {
                self.kills_at.remove(0);
                self.kill();
            }
            if self.detect_at.is_some_and(|d| d <= self.now) {
                self.detect_at = None;
                self.recover();
                continue;
            }
            if let Some(m) = self.net.peek()
                && m.at <= self.now
            {
                let m = self.net.pop().expect("peeked");
                self.deliver(m)?;
                continue;
            }
            if let Ck::Persisting(cut, at) = &self.ck
                && *at <= self.now
            {
                self.cut = (**cut).clone();
                self.out.checkpoints += 1;
                self.ck = Ck::Idle;
            }
            let admitting = matches!(self.ck, Ck::Idle | Ck::Persisting(..));
            if admitting && self.admitted < self.cfg.records {
                if self.ck == Ck::Idle
                    && self.admitted > self.cut.admitted
                    && self.admitted % self.cfg.checkpoint_every == 0
                    && self.rng.below(2) == 0
                {
                    self.begin_checkpoint();
                } else {
                    self.admit();
                }
                self.now += 1;
                continue;
            }
            let done = self.admitted >= self.cfg.records
                && self.net.is_empty()
                && self.detect_at.is_none()
                && self.ck == Ck::Idle;
            if done {
                return Ok(());
            }
            self.now += 1;
        }
    }

    fn kill(&mut self) {
        let w = self.rng.below(self.cfg.workers);
        if !self.nodes[w].alive {
            return;
        }
        self.nodes[w] = Node::default();
        if matches!(self.ck, Ck::Persisting(..)) {
            self.out.during_persist += 1;
        }
        if self.ck != Ck::Idle {
            self.out.during_checkpoint += 1;
        }
        self.detect_at
            .get_or_insert(self.now + self.cfg.detect_after);
    }

    /// The driver saw the loss: a new job from the last cut (the lost worker replaced).
    fn recover(&mut self) {
        self.out.recoveries += 1;
        self.out.replayed += self.admitted.saturating_sub(self.cut.admitted);
        self.job += 1;
        self.restart();
    }

    /// Record `admitted` to its first operator, numbered per key.
    fn admit(&mut self) {
        let i = self.admitted as usize;
        let key = self.keys[i];
        let seq = self.keys[..=i].iter().filter(|&&k| k == key).count() as u64;
        let to = self.owner(0, key);
        self.send(self.driver(), to, Body::Req { op: 0, key, seq });
        self.admitted += 1;
    }

    fn begin_checkpoint(&mut self) {
        if self.cfg.drain {
            self.ck = Ck::Draining(1, None);
            self.probe(1);
        } else {
            self.snapshot();
        }
    }

    fn probe(&mut self, round: u64) {
        self.statuses.clear();
        for w in 0..self.cfg.workers {
            self.send(self.driver(), w, Body::Probe { round });
        }
    }

    fn snapshot(&mut self) {
        let id = self.next_id;
        self.next_id += 1;
        self.ck = Ck::Snapshot(id);
        self.parts.clear();
        for w in 0..self.cfg.workers {
            self.send(self.driver(), w, Body::Snapshot { id });
        }
    }

    fn deliver(&mut self, m: InFlight) -> Result<(), String> {
        // A closed connection delivers nothing of the old job; a dead worker hears nothing.
        if m.job != self.job {
            return Ok(());
        }
        if m.to == self.driver() {
            return self.at_driver(m.from, m.body);
        }
        if !self.nodes[m.to].alive {
            return Ok(());
        }
        if matches!(m.body, Body::Req { .. }) {
            self.nodes[m.to].recv[m.from] += 1;
        }
        let w = m.to;
        match m.body {
            Body::Req { op, key, seq } => {
                let node = &mut self.nodes[w];
                let last = node.state[op].get(&key).copied().unwrap_or(0);
                if seq != last + 1 {
                    return Err(format!(
                        "worker {w} op {op} key {key}: record {seq} after {last} (job {})",
                        self.job
                    ));
                }
                node.state[op].insert(key, seq);
                node.processed[op] += 1;
                if op == 0 {
                    let to = self.owner(1, key);
                    self.send(w, to, Body::Req { op: 1, key, seq });
                }
            }
            Body::Probe { round } => {
                let (sent, recv) = (self.nodes[w].sent.clone(), self.nodes[w].recv.clone());
                self.send(w, self.driver(), Body::Status { round, sent, recv });
            }
            Body::Snapshot { id } => {
                let node = &self.nodes[w];
                let (state, processed) = (node.state.clone(), node.processed);
                self.send(
                    w,
                    self.driver(),
                    Body::Part {
                        id,
                        state,
                        processed,
                    },
                );
            }
            Body::Status { .. } | Body::Part { .. } => {
                return Err(format!("worker {w} got a driver's message"));
            }
        }
        Ok(())
    }

    fn at_driver(&mut self, from: usize, body: Body) -> Result<(), String> {
        match (body, self.ck.clone()) {
            (Body::Status { round, sent, recv }, Ck::Draining(r, prev)) if round == r => {
                self.statuses.insert(from, (sent, recv));
                if self.statuses.len() == self.cfg.workers {
                    self.probe_round_done(r, prev);
                }
            }
            (
                Body::Part {
                    id,
                    state,
                    processed,
                },
                Ck::Snapshot(want),
            ) if id == want => {
                self.parts.insert(from, (state, processed));
                if self.parts.len() == self.cfg.workers {
                    self.commit();
                }
            }
            // Answers to a round or a checkpoint given up.
            _ => {}
        }
        Ok(())
    }

    /// Two consecutive balanced rounds with the same counts: quiescent, take the cut.
    fn probe_round_done(&mut self, r: u64, prev: Option<Vec<Vec<u64>>>) {
        let w = self.cfg.workers;
        let d = self.driver();
        let balanced = (0..w).all(|b| {
            self.statuses[&b].1[d] == self.driver_sent[b]
                && (0..w).all(|a| self.statuses[&a].0[b] == self.statuses[&b].1[a])
        });
        let counts: Vec<Vec<u64>> = (0..w)
            .flat_map(|a| [self.statuses[&a].0.clone(), self.statuses[&a].1.clone()])
            .collect();
        if balanced && prev.as_ref() == Some(&counts) {
            self.snapshot();
            return;
        }
        self.ck = Ck::Draining(r + 1, balanced.then_some(counts));
        self.probe(r + 1);
    }

    /// Every part is in: admission resumes, and the cut is committed once the parts are
    /// written (a random while later, perhaps after a kill: then it never is).
    fn commit(&mut self) {
        let mut cut = Cut {
            admitted: self.admitted,
            state: Default::default(),
            processed: self.job_base,
        };
        for (state, processed) in self.parts.values() {
            for op in 0..2 {
                cut.state[op].extend(state[op].iter().map(|(k, v)| (*k, *v)));
                cut.processed[op] += processed[op];
            }
        }
        let written_at = self.now + 1 + self.rng.below(2 * self.cfg.delay_max as usize) as u64;
        self.ck = Ck::Persisting(Box::new(cut), written_at);
    }

    fn check_end(&self) -> Result<(), String> {
        let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
        for &k in &self.keys {
            *expected.entry(k).or_default() += 1;
        }
        for (&key, &count) in &expected {
            let w = self.owner(1, key);
            let got = self.nodes[w].state[1].get(&key).copied().unwrap_or(0);
            if got != count {
                return Err(format!("key {key}: last record {got} of {count}"));
            }
        }
        for op in 0..2 {
            let total: u64 =
                self.job_base[op] + self.nodes.iter().map(|n| n.processed[op]).sum::<u64>();
            if total != self.cfg.records {
                return Err(format!(
                    "operator {op}: {total} processed, {} records",
                    self.cfg.records
                ));
            }
        }
        Ok(())
    }
}
