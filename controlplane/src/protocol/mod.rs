//! The coordinated-migration protocol (DESIGN.md §7) as sans-I/O state machines.
//!
//! Why sans-I/O: the protocol's correctness hinges on message orders that a real cluster only
//! produces now and then (a marker overtaking a straggler, a seal racing a held request). Written
//! as plain state machines — inputs are messages, local events and an injected `now_ns`; outputs
//! are [`worker::Action`]s and [`planner::PlannerAction`]s the caller carries out in order — the
//! same code runs inside the live worker and inside [`sim`], a seeded deterministic simulation
//! that reorders messages across connections, delays them and kills workers (DESIGN.md §10).
//!
//! Participants:
//! - [`worker::Worker`], one per worker process, across any number of epochs;
//! - [`planner::Planner`], which runs the ingress (roots are routed by its table and tagged with
//!   its epoch; it switches epochs the moment it broadcasts a plan and sends its markers then),
//!   broadcasts plans, and waits for completions with a timeout that names a silent worker.
//!
//! The rule (§7), per moved key group G = (operator o, key group g), old owner A, new owner B:
//! 1. on the plan, every worker stops starting executions and drains the running ones (their
//!    chained requests are still routed by the old table); then it switches its routing to the
//!    new table, sends an end-of-epoch marker to every peer in its plan — also when it had
//!    nothing else for it — and exports the state and queued requests of every group it gives
//!    up (markers first: receivers resume on markers, and packing state can take a while);
//! 2. A forwards every old-epoch request for G that reaches it after the export to B, and sends
//!    G's *seal* only once it has the marker of every peer that can send to o (hosts of o's
//!    predecessors and the ingress); markers and forwards share the FIFO connection A → B, so
//!    everything old for G is at B before the seal;
//! 3. B holds every request for G until G's state and seal are both in, then releases, in this
//!    order, the queued requests exported with the state, the forwarded ones, and the held
//!    new-epoch ones (each in arrival order);
//! 4. a worker resumes as soon as its own expected markers are in (no global barrier), and
//!    reports completion once it has also sealed what it gave up, installed what it receives,
//!    and collected its *fence* markers (below).
//!
//! **Upstream gate and fence (beyond §7; the simulation's first finding).** §7 protects the
//! key group that moves, not the ones *downstream* of it. When upstream key group U moves from
//! C to D while downstream key group H stays on X, the requests of one key reach H over two
//! connections: C's old-epoch ones (emitted before C drained) and D's new-epoch ones (emitted
//! after D installed U). Nothing orders them: with the plan's markers alone 44 of 1000 pipeline
//! seeds and 110 of 1000 diamond seeds reordered a key (`without_the_gate_*` in
//! `tests/protocol.rs` replay it). So:
//! - every worker also sends a marker on every connection it could have used under the old
//!   table (`fence_to`: to each old host of an operator it hosted a predecessor of);
//! - a worker holds new-epoch requests for an operator's key groups it *keeps* until the
//!   markers of every old host of that operator's predecessors are in (`upstream_old`); old-
//!   epoch requests still run at once — per key they all come first;
//! - a worker reports completion only once all those markers are in (`fence_from`).
//!
//! The last point also makes a completed migration a flush: no request routed by an older
//! table is still in flight, which is what lets the plan's hear-from lists look only at the old
//! and the new table (a worker that hosted a predecessor two tables ago is in neither). The
//! gate costs no pause: a worker resumes on its plan's markers, and only the gated requests
//! wait; fence markers are sent at the drain, unconditionally, so waiting on them cannot
//! deadlock.
//!
//! The data plane runs one machine per *executor* (its "worker" here is an executor slot), so a
//! key group moving between two executors of one worker follows the same rule as between
//! workers (`dataplane::worker::executor`'s `migrating` module).
//!
//! Types are plain: operators, key groups and workers are indices (the data plane's request
//! header narrows them to `u16`), epochs are `u64` (the header carries their low 16 bits).

pub mod planner;
pub mod sim;
pub mod worker;

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::migration::{MigrationPlan, Routing, WorkerPlan};

/// A migration epoch; epoch 0 is the initial table.
pub type Epoch = u64;

/// Who sent a message to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// The planner's ingress (roots, and its end-of-epoch marker).
    Ingress,
    /// Another worker, or this worker itself for a local chained request.
    Worker(usize),
}

/// A request as the protocol sees it: where it goes, the epoch whose table routed it, and an
/// opaque body (the dataplane's frame; the simulation's `(key, sequence, path)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Req<P> {
    /// Target operator.
    pub operator: usize,
    /// Key group of the request's key for that operator.
    pub key_group: usize,
    /// Epoch of the routing table the sender routed it by (kept when forwarded).
    pub epoch: Epoch,
    /// Everything else.
    pub body: P,
}

/// A message on a worker-to-worker (or ingress-to-worker) FIFO connection.
#[derive(Clone, Debug, PartialEq)]
pub enum Msg<P, S> {
    /// A request, routed or forwarded.
    Request(Req<P>),
    /// End of the sender's old epoch on this connection.
    Marker {
        /// The new epoch.
        epoch: Epoch,
    },
    /// State and queued requests of key groups the sender gives up.
    State {
        /// The new epoch.
        epoch: Epoch,
        /// Operator of the key groups.
        operator: usize,
        /// The key groups.
        key_groups: Vec<usize>,
        /// Their state (opaque to the protocol).
        state: S,
        /// Their queued, not yet executed requests, in queue order.
        queued: Vec<Req<P>>,
    },
    /// Nothing older for these key groups will follow on this connection.
    Seal {
        /// The new epoch.
        epoch: Epoch,
        /// Operator of the key groups.
        operator: usize,
        /// The key groups.
        key_groups: Vec<usize>,
    },
}

impl<P, S> Msg<P, S> {
    /// The epoch the message belongs to (a request's routing epoch).
    pub fn epoch(&self) -> Epoch {
        match self {
            Msg::Request(r) => r.epoch,
            Msg::Marker { epoch } | Msg::State { epoch, .. } | Msg::Seal { epoch, .. } => *epoch,
        }
    }
}

/// One worker's part of a migration, as broadcast by the planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The new epoch.
    pub epoch: Epoch,
    /// The new routing table.
    pub routing: Arc<Routing>,
    /// What [`crate::migration::plan`] says this worker sends and hears from.
    pub plan: WorkerPlan,
    /// Peers this worker could send to under the old table (fence markers go there too).
    pub fence_to: BTreeSet<usize>,
    /// Peers that could send to this worker under the old table (their markers gate completion).
    pub fence_from: BTreeSet<usize>,
    /// `upstream_old[o]`: workers hosting a predecessor of operator o under the old table. New-
    /// epoch requests for a key group this worker keeps wait for these workers' markers.
    pub upstream_old: Arc<Vec<BTreeSet<usize>>>,
}

/// Per-worker assignments for `plan` on a cluster of `workers` workers (workers beyond the
/// plan's own count get an empty plan: they still switch epochs and report completion).
pub fn assignments(
    plan: &MigrationPlan,
    old: &Routing,
    new: &Arc<Routing>,
    preds: &[Vec<usize>],
    workers: usize,
) -> Vec<Assignment> {
    let workers = workers.max(plan.workers.len());
    let hosts = hosts_of(old);
    let upstream_old: Arc<Vec<BTreeSet<usize>>> = Arc::new(
        preds
            .iter()
            .map(|ps| ps.iter().flat_map(|&p| hosts[p].iter().copied()).collect())
            .collect(),
    );
    let mut out: Vec<Assignment> = (0..workers)
        .map(|w| Assignment {
            epoch: plan.epoch,
            routing: Arc::clone(new),
            plan: plan.workers.get(w).cloned().unwrap_or_default(),
            fence_to: BTreeSet::new(),
            fence_from: BTreeSet::new(),
            upstream_old: Arc::clone(&upstream_old),
        })
        .collect();
    for (u, v) in fence_pairs(old, preds) {
        if u < workers && v < workers {
            out[u].fence_to.insert(v);
            out[v].fence_from.insert(u);
        }
    }
    out
}

/// Every connection `u → v` (u ≠ v) that can carry a request under `routing`: u hosts a key
/// group of a predecessor of an operator that v hosts a key group of.
pub fn fence_pairs(routing: &Routing, preds: &[Vec<usize>]) -> BTreeSet<(usize, usize)> {
    let hosts = hosts_of(routing);
    let mut pairs = BTreeSet::new();
    for (o, ps) in preds.iter().enumerate() {
        for &p in ps {
            for &u in &hosts[p] {
                for &v in &hosts[o] {
                    if u != v {
                        pairs.insert((u, v));
                    }
                }
            }
        }
    }
    pairs
}

/// `hosts[o]`: the workers owning some key group of operator o.
fn hosts_of(routing: &Routing) -> Vec<BTreeSet<usize>> {
    routing
        .iter()
        .map(|owners| owners.iter().copied().collect())
        .collect()
}

/// Workers the ingress sends its marker to: old owners of moved key groups of source operators.
pub fn ingress_markers(plan: &MigrationPlan) -> BTreeSet<usize> {
    plan.workers
        .iter()
        .enumerate()
        .filter(|(_, p)| p.hear_from_ingress)
        .map(|(w, _)| w)
        .collect()
}
