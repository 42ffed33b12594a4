//! One worker's side of the migration protocol (the crate docs state the rule).
//!
//! The machine owns only what the protocol needs: the routing view, the markers heard, the
//! requests it holds for key groups it is receiving, and the counters. The worker's queues,
//! executors and state store stay with the caller, which the machine drives through
//! [`Action`]s: `Process` puts a request on the local queue, `Drain` stops starting executions,
//! `ExportState` packs a key group's state and queued requests into a [`Msg::State`], and so on.
//! The caller applies actions in the order given; all sends to one peer go on one FIFO
//! connection.

use std::collections::{BTreeMap, BTreeSet};
use std::mem;
use std::sync::Arc;

mod group_map;
mod inbound;

use group_map::{GroupMap, GroupSet};

use crate::assignment::Assignment;
use crate::ids::{Epoch, KeyGroup, Slot};
use crate::message::{Msg, Peer, Req};
use crate::routing::RoutingTable;

/// How often a worker still in a migration tells the planner what it waits for (and so that
/// it is alive), in ns of the injected clock.
pub const PROGRESS_INTERVAL_NS: u64 = 100_000;

/// What the caller must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Action<P, S> {
    /// Send a request routed by this worker's current table.
    SendRequest { to: Slot, req: Req<P> },
    /// Forward an old-epoch request for a key group this worker gave up, ahead of its seal.
    ForwardRequest { to: Slot, req: Req<P> },
    /// Send the end-of-epoch marker.
    SendMarker { to: Slot, epoch: Epoch },
    /// Take the state and the queued requests (in queue order) of these key groups out of the
    /// local store and queue, and send them to `to` as [`Msg::State`].
    ExportState {
        to: Slot,
        epoch: Epoch,
        operator: usize,
        key_groups: Vec<KeyGroup>,
    },
    /// Send the seal of these key groups.
    SendSeal {
        to: Slot,
        epoch: Epoch,
        operator: usize,
        key_groups: Vec<KeyGroup>,
    },
    /// Put this state into the local store (its key groups' requests follow as `Process`).
    InstallState {
        operator: usize,
        key_groups: Vec<KeyGroup>,
        state: S,
    },
    /// Append to the local queue (executed in queue order once not paused).
    Process(Req<P>),
    /// Stop starting executions; call [`Worker::on_drained`] once the running ones finished.
    Drain,
    /// Start executing again (right after the drain: requests of key groups that do not move
    /// run while the markers are awaited).
    Resume { epoch: Epoch, pause_ns: u64 },
    /// Tell the planner this worker's part of the migration is complete.
    Completed(WorkerReport),
    /// Tell the planner what this worker still waits for.
    Progress { epoch: Epoch, waiting: Waiting },
    /// The protocol's invariants were broken (a bug, or a peer that does not follow it).
    Fault(ProtocolError),
}

/// One worker's numbers for one migration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    pub worker: Slot,
    pub epoch: Epoch,
    /// From the plan's arrival to resuming: the time no execution starts (the drain).
    pub pause_ns: u64,
    /// From the plan's arrival to the moment its expected markers were in and what it gives
    /// up was sealed: the wait that requests of moving key groups (held) and new-epoch ones
    /// of gated operators may see, while the other requests run.
    pub marker_wait_ns: u64,
    /// Queued requests that arrived with state this worker received.
    pub received_queued: u64,
    /// Old-epoch requests this worker forwarded to new owners.
    pub forwarded: u64,
    /// New-epoch requests this worker held until their key group's state and seal were in.
    pub held: u64,
    /// New-epoch requests for key groups this worker kept, held for upstream markers (gate).
    pub gated: u64,
    /// Messages that arrived before the plan and waited for it.
    pub early: u64,
}

/// What a worker in a migration still waits for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Running executions not yet drained.
    pub draining: bool,
    /// Peers whose end-of-epoch marker is missing (resume, seals and fences).
    pub markers_from: Vec<Peer>,
    /// Old owners whose state or seal of a key group this worker receives is missing.
    pub state_or_seal_from: Vec<Slot>,
}

/// A broken invariant, reported rather than acted on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("worker {worker}: request for ({operator}, {key_group}) epoch {epoch} after its seal")]
    AfterSeal {
        worker: Slot,
        operator: usize,
        key_group: KeyGroup,
        epoch: Epoch,
    },
    #[error(
        "worker {worker}: request for ({operator}, {key_group}) epoch {epoch} from {from}, \
         which this worker does not own"
    )]
    NotOwner {
        worker: Slot,
        from: Peer,
        operator: usize,
        key_group: KeyGroup,
        epoch: Epoch,
    },
    #[error("worker {worker}: unexpected {what} from {from} for epoch {epoch}")]
    Unexpected {
        worker: Slot,
        from: Peer,
        what: &'static str,
        epoch: Epoch,
    },
}

/// Phase of a key group this worker gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutPhase {
    /// Still here (before the drain): its requests go on the local queue and are exported.
    Owned,
    /// State sent: old-epoch requests are forwarded.
    Exported,
    /// Seal sent: nothing more may arrive.
    Sealed,
}

/// Where a worker is in its part of a migration (it has none outside one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The plan is in: no execution starts, the running ones finish.
    Draining,
    /// Drained and executing again: emissions use the new table, markers are sent and state
    /// exported; waiting for the markers that let it seal what it gave up.
    Sealing,
    /// Sealed; waiting for the state and seals it receives and its fence markers before it
    /// reports completion.
    Sealed,
}

/// A key group this worker receives, not yet installed.
struct Incoming<P> {
    from: Slot,
    state_in: bool,
    seal_in: bool,
    /// Queued requests exported with the state.
    exported: Vec<Req<P>>,
    /// Old-epoch requests forwarded by the old owner.
    forwarded: Vec<Req<P>>,
    /// New-epoch requests from anyone.
    held: Vec<Req<P>>,
}

/// The payload of a [`Msg::State`]: what the sender gives up of one operator's key groups.
struct StatePart<P, S> {
    /// Operator of the key groups.
    operator: usize,
    /// The key groups.
    key_groups: Vec<KeyGroup>,
    /// Their state (opaque to the protocol).
    state: S,
    /// Their queued, not yet executed requests, in queue order.
    queued: Vec<Req<P>>,
}

/// New-epoch requests for an operator's kept key groups, waiting for upstream markers: the old
/// owner of an upstream key group may still have old-epoch requests for the same key on its
/// way here on another connection than the new owner's.
struct Gate<P> {
    from: BTreeSet<Peer>,
    waiting: Vec<Req<P>>,
}

/// The current migration.
struct Migration<P> {
    epoch: Epoch,
    started_ns: u64,
    plan: Assignment,
    phase: Phase,
    markers: BTreeSet<Peer>,
    /// Markers needed to resume and seal: the plan's hear-from (and the ingress).
    resume_from: BTreeSet<Peer>,
    /// Markers needed to complete: `resume_from` and the fence.
    complete_from: BTreeSet<Peer>,
    outgoing: GroupMap<(Slot, OutPhase)>,
    incoming: GroupMap<Incoming<P>>,
    /// Per operator: peers (old hosts of its predecessors) whose markers new-epoch requests for
    /// key groups this worker keeps wait for, and those requests in arrival order.
    gates: BTreeMap<usize, Gate<P>>,
    report: WorkerReport,
    last_progress_ns: u64,
}

/// One worker's protocol state, across epochs.
pub struct Worker<P, S> {
    id: Slot,
    /// Latest epoch whose plan arrived.
    epoch: Epoch,
    /// Ownership view: the latest plan's table.
    owners: Arc<RoutingTable>,
    /// The table this worker's own chained requests are routed by (the old one until drained).
    emit_routing: Arc<RoutingTable>,
    emit_epoch: Epoch,
    migration: Option<Migration<P>>,
    /// Key groups this worker owns under the latest plan's table and did not under the one
    /// before: what they emit in this epoch is marked [`Req::from_moved`].
    moved_in: GroupSet,
    /// Messages from a newer epoch than the latest plan, and everything after them on the same
    /// connection, in arrival order.
    early: Vec<(Peer, Msg<P, S>)>,
    ahead: BTreeSet<Peer>,
}

impl<P, S> Worker<P, S> {
    /// A worker at `epoch` with `routing`.
    pub fn new(id: Slot, routing: Arc<RoutingTable>, epoch: Epoch) -> Self {
        Worker {
            id,
            epoch,
            owners: Arc::clone(&routing),
            emit_routing: routing,
            emit_epoch: epoch,
            migration: None,
            moved_in: GroupSet::default(),
            early: Vec::new(),
            ahead: BTreeSet::new(),
        }
    }

    pub fn id(&self) -> Slot {
        self.id
    }

    /// Latest epoch whose plan arrived.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// True from a plan's arrival until this worker's part of it is complete.
    pub fn in_migration(&self) -> bool {
        self.migration.is_some()
    }

    /// True when no migration is in progress and nothing waits for a plan: every request of
    /// the current epoch can be executed at once (the data plane's fast path).
    pub fn is_settled(&self) -> bool {
        self.migration.is_none() && self.early.is_empty()
    }

    /// True while the worker must not start executions: from the plan to the drain.
    ///
    /// Why not until the markers: once drained, every request the machine releases is safe to
    /// run. Old-epoch requests of a key group given up are forwarded, never released; those of
    /// a key group received are held until its state and seal; new-epoch ones of a kept key
    /// group wait at the upstream gate; and this worker's own emissions already use the new
    /// table. What remains — old-epoch requests of kept key groups, and new-epoch ones no gate
    /// holds — runs exactly as it would after the markers, so waiting for them would only add
    /// the markers' queueing delay to every request.
    pub fn paused(&self) -> bool {
        self.migration
            .as_ref()
            .is_some_and(|m| m.phase == Phase::Draining)
    }

    /// What the worker waits for, if it is in a migration.
    pub fn waiting(&self) -> Option<Waiting> {
        let m = self.migration.as_ref()?;
        let mut state_or_seal_from: Vec<Slot> = m.incoming.values().map(|i| i.from).collect();
        state_or_seal_from.sort_unstable();
        state_or_seal_from.dedup();
        Some(Waiting {
            draining: m.phase == Phase::Draining,
            markers_from: m.complete_from.difference(&m.markers).copied().collect(),
            state_or_seal_from,
        })
    }

    /// The planner's plan for a new epoch arrived.
    pub fn on_plan(&mut self, now_ns: u64, plan: Assignment) -> Vec<Action<P, S>> {
        let mut out = Vec::new();
        if plan.epoch() <= self.epoch || self.migration.is_some() {
            out.push(Action::Fault(ProtocolError::Unexpected {
                worker: self.id,
                from: Peer::Ingress,
                what: "plan",
                epoch: plan.epoch(),
            }));
            return out;
        }
        let me = self.id;
        let (operators, key_groups) = (plan.routing.operators(), plan.routing.key_groups());
        let mut outgoing = GroupMap::new(operators, key_groups);
        for t in &plan.plan.sends {
            for &g in &t.key_groups {
                outgoing.insert((t.operator, g), (t.to, OutPhase::Owned));
            }
        }
        let incoming = self.receive(&plan.routing);
        let mut resume_from: BTreeSet<Peer> = plan
            .plan
            .hear_from
            .iter()
            .map(|&w| Peer::Worker(w))
            .collect();
        if plan.plan.hear_from_ingress {
            resume_from.insert(Peer::Ingress);
        }
        // Only operators hosted here under the old table have key groups to keep; their old
        // upstream hosts are exactly this worker's fence peers, so their markers will come.
        let owners = &self.owners;
        let gates = plan
            .upstream_old
            .iter()
            .enumerate()
            .filter(|(o, _)| *o < owners.operators() && owners.row(*o).contains(&me))
            .map(|(o, ups)| {
                let from = ups
                    .iter()
                    .filter(|&&u| u != me)
                    .map(|&u| Peer::Worker(u))
                    .collect();
                (
                    o,
                    Gate {
                        from,
                        waiting: Vec::new(),
                    },
                )
            })
            .filter(|(_, g)| !g.from.is_empty())
            .collect();
        let mut complete_from = resume_from.clone();
        complete_from.extend(plan.fence_from.iter().map(|&w| Peer::Worker(w)));
        self.epoch = plan.epoch();
        self.owners = Arc::clone(&plan.routing);
        self.migration = Some(Migration {
            epoch: plan.epoch(),
            started_ns: now_ns,
            phase: Phase::Draining,
            markers: BTreeSet::new(),
            resume_from,
            complete_from,
            outgoing,
            incoming,
            gates,
            report: WorkerReport {
                worker: me,
                epoch: plan.epoch(),
                ..WorkerReport::default()
            },
            last_progress_ns: now_ns,
            plan,
        });
        out.push(Action::Drain);
        self.ahead.clear();
        let early = mem::take(&mut self.early);
        if let Some(m) = self.migration.as_mut() {
            m.report.early = early.len() as u64;
        }
        for (from, msg) in early {
            self.message(now_ns, from, msg, &mut out);
        }
        out
    }

    /// The key groups this worker receives under `new`, each waiting for its state and seal;
    /// they also become `moved_in` for the new epoch.
    fn receive(&mut self, new: &RoutingTable) -> GroupMap<Incoming<P>> {
        let me = self.id;
        let (operators, key_groups) = (new.operators(), new.key_groups());
        let mut incoming = GroupMap::new(operators, key_groups);
        self.moved_in = GroupSet::new(operators, key_groups);
        for (o, (old, new)) in self.owners.rows().zip(new.rows()).enumerate() {
            for (g, (&a, &b)) in old.iter().zip(new).enumerate() {
                if b == me && a != me {
                    self.moved_in.insert((o, KeyGroup::at(g)));
                    incoming.insert(
                        (o, KeyGroup::at(g)),
                        Incoming {
                            from: a,
                            state_in: false,
                            seal_in: false,
                            exported: Vec::new(),
                            forwarded: Vec::new(),
                            held: Vec::new(),
                        },
                    );
                }
            }
        }
        incoming
    }

    /// A message from a peer (or the ingress) arrived.
    pub fn on_message(&mut self, now_ns: u64, from: Peer, msg: Msg<P, S>) -> Vec<Action<P, S>> {
        let mut out = Vec::new();
        self.message(now_ns, from, msg, &mut out);
        out
    }

    /// Whether what an execution of a request for `parent` (operator, key group) emits now is
    /// [`Req::from_moved`]: `parent` was received in the latest plan and emissions are routed by
    /// its table. The data plane, which routes its emissions itself, marks its frames by it.
    #[inline]
    pub fn emits_from_moved(&self, parent: (usize, KeyGroup)) -> bool {
        self.emit_epoch == self.epoch && self.moved_in.contains(parent)
    }

    /// [`emits_from_moved`](Self::emits_from_moved) for emissions that belong to no one key
    /// group of `operator` (timers fired together, an end-of-stream flush): true if any of its
    /// key groups was received in the latest plan.
    pub fn emits_from_moved_any(&self, operator: usize) -> bool {
        self.emit_epoch == self.epoch && self.moved_in.any_of(operator)
    }

    /// A local execution of a request for `parent` (operator, key group) emitted a chained
    /// request: route it by the current table.
    ///
    /// # Panics
    /// If the operator or key group is outside the table (the caller's own emission).
    pub fn on_emit(
        &mut self,
        parent: (usize, KeyGroup),
        operator: usize,
        key_group: KeyGroup,
        body: P,
    ) -> Vec<Action<P, S>> {
        let mut out = Vec::new();
        let req = Req {
            operator,
            key_group,
            epoch: self.emit_epoch,
            from_moved: self.emits_from_moved(parent),
            body,
        };
        let to = self.emit_routing.owner(operator, key_group);
        if to == self.id {
            self.request(Peer::Worker(self.id), req, &mut out);
        } else {
            out.push(Action::SendRequest { to, req });
        }
        out
    }

    /// The executions that were running when [`Action::Drain`] was issued have finished.
    pub fn on_drained(&mut self, now_ns: u64) -> Vec<Action<P, S>> {
        let mut out = Vec::new();
        let Some(m) = self.migration.as_mut() else {
            return out;
        };
        if m.phase != Phase::Draining {
            return out;
        }
        debug_assert!(
            m.outgoing.values().all(|o| o.1 == OutPhase::Owned),
            "nothing is exported before the drain"
        );
        m.phase = Phase::Sealing;
        self.emit_routing = Arc::clone(&m.plan.routing);
        self.emit_epoch = m.epoch;
        // Markers first: a receiver waits for them to resume, and the state (which may be
        // large and slow to pack) is not needed for that — its key groups' requests are held
        // until state and seal are in either way, and the seal follows the state.
        let to: BTreeSet<Slot> = m
            .plan
            .plan
            .markers_to
            .union(&m.plan.fence_to)
            .copied()
            .collect();
        for to in to {
            out.push(Action::SendMarker { to, epoch: m.epoch });
        }
        for t in &m.plan.plan.sends {
            out.push(Action::ExportState {
                to: t.to,
                epoch: m.epoch,
                operator: t.operator,
                key_groups: t.key_groups.clone(),
            });
            for &g in &t.key_groups {
                if let Some(o) = m.outgoing.get_mut((t.operator, g)) {
                    o.1 = OutPhase::Exported;
                }
            }
        }
        // Executing again at once (see [`Worker::paused`]): the markers are awaited only by
        // the seals and by the requests held or gated for them.
        m.report.pause_ns = now_ns - m.started_ns;
        out.push(Action::Resume {
            epoch: m.epoch,
            pause_ns: m.report.pause_ns,
        });
        self.progress(now_ns, &mut out);
        out
    }

    /// Time passes: a worker still in a migration reports what it waits for, every
    /// [`PROGRESS_INTERVAL_NS`].
    pub fn on_tick(&mut self, now_ns: u64) -> Vec<Action<P, S>> {
        let mut out = Vec::new();
        let due = self
            .migration
            .as_ref()
            .is_some_and(|m| now_ns >= m.last_progress_ns + PROGRESS_INTERVAL_NS);
        if due {
            let waiting = self.waiting().unwrap_or_default();
            let m = self.migration.as_mut().expect("in a migration");
            m.last_progress_ns = now_ns;
            out.push(Action::Progress {
                epoch: m.epoch,
                waiting,
            });
        }
        out
    }
}
