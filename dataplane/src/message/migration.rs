//! The bodies of a live migration's messages: a worker's plans (driver → worker), a slot's
//! completion report and progress (worker → driver), and the seals and state that executors
//! send each other in line with their requests.
//!
//! These are plain wire structs with their own checked conversions to and from the
//! protocol's types: a value that decodes is well-formed, and a conversion is where its
//! content is checked against what it means (a key group below `KEY_GROUPS`, a routing row of
//! every key group).

use super::MessageError;
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::assignment::Assignment;
use clasp_protocol::message::Peer;
use clasp_protocol::plan::{Transfer, WorkerPlan};
use clasp_protocol::worker::{Waiting, WorkerReport};
use clasp_protocol::{Epoch, KeyGroup, RoutingTable, Slot};
use rkyv::{Archive, Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

fn content(what: String) -> MessageError {
    MessageError::Content(what)
}

/// One operator's row of a routing table: runs of equal owners or, when shorter, one slot per
/// key group (a scattered placement has no runs).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum RoutingRow {
    /// `(key groups, slot)` runs, in key-group order.
    Runs(Vec<(u16, u16)>),
    /// The slot of every key group.
    Slots(Vec<u16>),
}

/// The routing table of `epoch` whose rows are `rows` (checked: every row holds every key
/// group, every key group is in range).
pub fn table_of(epoch: u64, rows: &[RoutingRow]) -> Result<RoutingTable, MessageError> {
    let rows: Vec<Vec<Slot>> = rows
        .iter()
        .enumerate()
        .map(|(op, r)| r.expand(op))
        .collect::<Result<_, _>>()?;
    RoutingTable::from_rows(Epoch(epoch), rows).map_err(|e| content(e.to_string()))
}

impl RoutingRow {
    /// The shorter form of `row`.
    pub fn of(row: &[Slot]) -> RoutingRow {
        let mut runs: Vec<(u16, u16)> = Vec::new();
        for s in row {
            match runs.last_mut() {
                Some((n, last)) if *last == s.0 as u16 => *n += 1,
                _ => runs.push((1, s.0 as u16)),
            }
        }
        if runs.len() * 2 < row.len() {
            RoutingRow::Runs(runs)
        } else {
            RoutingRow::Slots(row.iter().map(|s| s.0 as u16).collect())
        }
    }

    /// The row, checked to hold every key group.
    pub fn expand(&self, op: usize) -> Result<Vec<Slot>, MessageError> {
        let kgs = KEY_GROUPS as usize;
        let row: Vec<Slot> = match self {
            RoutingRow::Runs(runs) => {
                let mut row = Vec::with_capacity(kgs);
                for &(n, s) in runs {
                    if row.len() + n as usize > kgs {
                        return Err(content(format!(
                            "operator {op}: more than {kgs} key groups"
                        )));
                    }
                    row.extend(std::iter::repeat_n(Slot(u32::from(s)), n as usize));
                }
                row
            }
            RoutingRow::Slots(slots) => slots.iter().map(|&s| Slot(u32::from(s))).collect(),
        };
        if row.len() != kgs {
            return Err(content(format!("operator {op}: {} key groups", row.len())));
        }
        Ok(row)
    }
}

/// A transfer of key groups of one operator to one slot.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TransferCode {
    /// The operator.
    pub operator: u16,
    /// The receiving slot.
    pub to: u32,
    /// The key groups.
    pub key_groups: Vec<u16>,
}

/// One slot's part of a migration.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SlotPlan {
    /// The slot.
    pub slot: u32,
    /// What it sends.
    pub sends: Vec<TransferCode>,
    /// Slots that get its end-of-epoch marker.
    pub markers_to: Vec<u32>,
    /// Slots whose marker it waits for before resuming.
    pub hear_from: Vec<u32>,
    /// The ingress sends it a marker too.
    pub hear_from_ingress: bool,
    /// Slots it could send to under the old table.
    pub fence_to: Vec<u32>,
    /// Slots that could send to it under the old table.
    pub fence_from: Vec<u32>,
}

/// A worker's plans: the new table once, then each of its slots' parts.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Plans {
    /// The new epoch.
    pub epoch: u64,
    /// The new routing table, per operator.
    pub routing: Vec<RoutingRow>,
    /// Per operator: slots hosting a predecessor under the old table.
    pub upstream_old: Vec<Vec<u32>>,
    /// Each slot's part.
    pub slots: Vec<SlotPlan>,
}

fn set_code(s: &BTreeSet<Slot>) -> Vec<u32> {
    s.iter().map(|x| x.0).collect()
}

fn set_of(v: &[u32]) -> BTreeSet<Slot> {
    v.iter().map(|&x| Slot(x)).collect()
}

/// Key groups, each checked to be below `KEY_GROUPS`.
pub fn key_groups_of(v: &[u16]) -> Result<Vec<KeyGroup>, MessageError> {
    v.iter()
        .map(|&g| {
            if g >= KEY_GROUPS {
                return Err(content(format!("key group {g} out of range")));
            }
            Ok(KeyGroup(g))
        })
        .collect()
}

impl Plans {
    /// The plans of one worker: `parts` are its slots' assignments (all of `routing`'s epoch
    /// and table).
    pub fn new(routing: &RoutingTable, parts: &[(Slot, &Assignment)]) -> Plans {
        let upstream_old = parts
            .first()
            .map(|(_, a)| a.upstream_old.iter().map(set_code).collect())
            .unwrap_or_default();
        let slots = parts
            .iter()
            .map(|(slot, a)| SlotPlan {
                slot: slot.0,
                sends: a
                    .plan
                    .sends
                    .iter()
                    .map(|t| TransferCode {
                        operator: t.operator as u16,
                        to: t.to.0,
                        key_groups: t.key_groups.iter().map(|g| g.0).collect(),
                    })
                    .collect(),
                markers_to: set_code(&a.plan.markers_to),
                hear_from: set_code(&a.plan.hear_from),
                hear_from_ingress: a.plan.hear_from_ingress,
                fence_to: set_code(&a.fence_to),
                fence_from: set_code(&a.fence_from),
            })
            .collect();
        Plans {
            epoch: routing.epoch().0,
            routing: routing.rows().map(RoutingRow::of).collect(),
            upstream_old,
            slots,
        }
    }

    /// `(slot, assignment)` per slot, the table shared (checked: every row holds every key
    /// group, every key group is in range).
    pub fn assignments(&self) -> Result<Vec<(Slot, Assignment)>, MessageError> {
        let routing = Arc::new(table_of(self.epoch, &self.routing)?);
        let upstream_old = Arc::new(self.upstream_old.iter().map(|s| set_of(s)).collect());
        let mut out = Vec::with_capacity(self.slots.len());
        for p in &self.slots {
            let sends = p
                .sends
                .iter()
                .map(|t| {
                    Ok(Transfer {
                        operator: t.operator as usize,
                        to: Slot(t.to),
                        key_groups: key_groups_of(&t.key_groups)?,
                    })
                })
                .collect::<Result<_, MessageError>>()?;
            let plan = WorkerPlan {
                sends,
                markers_to: set_of(&p.markers_to),
                hear_from: set_of(&p.hear_from),
                hear_from_ingress: p.hear_from_ingress,
            };
            let a = Assignment {
                routing: Arc::clone(&routing),
                plan,
                fence_to: set_of(&p.fence_to),
                fence_from: set_of(&p.fence_from),
                upstream_old: Arc::clone(&upstream_old),
            };
            out.push((Slot(p.slot), a));
        }
        Ok(out)
    }
}

/// A slot completed its part of a migration.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The slot.
    pub slot: u32,
    /// The epoch completed.
    pub epoch: u64,
    /// From the plan's arrival to resuming (the drain).
    pub pause_ns: u64,
    /// From the plan's arrival to its expected markers being in (the seal).
    pub marker_wait_ns: u64,
    /// Queued requests that arrived with state.
    pub received_queued: u64,
    /// Old-epoch requests forwarded to new owners.
    pub forwarded: u64,
    /// New-epoch requests held until their key group's state and seal were in.
    pub held: u64,
    /// New-epoch requests held at the upstream gate.
    pub gated: u64,
    /// Messages that arrived before the plan and waited for it.
    pub early: u64,
}

impl From<&WorkerReport> for Report {
    fn from(r: &WorkerReport) -> Self {
        Report {
            slot: r.worker.0,
            epoch: r.epoch.0,
            pause_ns: r.pause_ns,
            marker_wait_ns: r.marker_wait_ns,
            received_queued: r.received_queued,
            forwarded: r.forwarded,
            held: r.held,
            gated: r.gated,
            early: r.early,
        }
    }
}

impl From<Report> for WorkerReport {
    fn from(r: Report) -> Self {
        WorkerReport {
            worker: Slot(r.slot),
            epoch: Epoch(r.epoch),
            pause_ns: r.pause_ns,
            marker_wait_ns: r.marker_wait_ns,
            received_queued: r.received_queued,
            forwarded: r.forwarded,
            held: r.held,
            gated: r.gated,
            early: r.early,
        }
    }
}

/// A protocol peer on the wire.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerCode {
    /// [`Peer::Ingress`].
    Ingress,
    /// [`Peer::Worker`]: a slot.
    Slot(u32),
}

/// A slot in a migration says what it still waits for.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The slot.
    pub slot: u32,
    /// The epoch it migrates to.
    pub epoch: u64,
    /// Running executions not yet drained.
    pub draining: bool,
    /// Peers whose end-of-epoch marker is missing.
    pub markers_from: Vec<PeerCode>,
    /// Old owners whose state or seal is missing.
    pub state_or_seal_from: Vec<u32>,
}

impl Progress {
    /// Slot `slot`'s progress towards `epoch`.
    pub fn new(slot: Slot, epoch: Epoch, w: &Waiting) -> Progress {
        Progress {
            slot: slot.0,
            epoch: epoch.0,
            draining: w.draining,
            markers_from: w
                .markers_from
                .iter()
                .map(|p| match p {
                    Peer::Ingress => PeerCode::Ingress,
                    Peer::Worker(s) => PeerCode::Slot(s.0),
                })
                .collect(),
            state_or_seal_from: w.state_or_seal_from.iter().map(|s| s.0).collect(),
        }
    }

    /// What the slot waits for.
    pub fn waiting(&self) -> Waiting {
        Waiting {
            draining: self.draining,
            markers_from: self
                .markers_from
                .iter()
                .map(|p| match p {
                    PeerCode::Ingress => Peer::Ingress,
                    PeerCode::Slot(s) => Peer::Worker(Slot(*s)),
                })
                .collect(),
            state_or_seal_from: self.state_or_seal_from.iter().map(|&s| Slot(s)).collect(),
        }
    }
}

/// A seal: the sender will send no more state of these key groups of `operator`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Seal {
    /// The operator.
    pub operator: u16,
    /// The key groups.
    pub key_groups: Vec<u16>,
}

/// One part of an encoded [`StateMsg`] message (a state message can be larger than a frame;
/// parts travel in order on one FIFO path and are reassembled per sender).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatePart {
    /// Bytes of the whole encoded message.
    pub total: u32,
    /// Offset of these bytes in it.
    pub offset: u32,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// A state message: one operator's key groups, their exported state, and their queued
/// requests (whole request frames, in queue order).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StateMsg {
    /// The operator.
    pub operator: u16,
    /// Per key group: its archive (`OperatorInstance::export_group`), the one body the
    /// message layer carries without reading (the operator's own codec reads it).
    pub groups: Vec<(u16, Vec<u8>)>,
    /// Queued request frames (the data path's request format, checked on arrival).
    pub queued: Vec<Vec<u8>>,
}
