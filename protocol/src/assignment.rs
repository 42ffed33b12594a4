//! One participant's part of a migration as the planner broadcasts it: the plan's sends and
//! markers plus the fence (see the crate docs, "Upstream gate and fence").

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::ids::{Epoch, Slot};
use crate::plan::{MigrationPlan, WorkerPlan};
use crate::routing::RoutingTable;

/// One participant's part of a migration, as broadcast by the planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The new routing table (its epoch is the migration's).
    pub routing: Arc<RoutingTable>,
    /// What [`crate::plan::plan`] says this participant sends and hears from.
    pub plan: WorkerPlan,
    /// Peers this participant could send to under the old table (fence markers go there too).
    pub fence_to: BTreeSet<Slot>,
    /// Peers that could send to this participant under the old table (their markers gate
    /// completion).
    pub fence_from: BTreeSet<Slot>,
    /// `upstream_old[o]`: slots hosting a predecessor of operator o under the old table. New-
    /// epoch requests for a key group this participant keeps wait for these slots' markers.
    pub upstream_old: Arc<Vec<BTreeSet<Slot>>>,
}

impl Assignment {
    /// The epoch the migration moves to.
    #[inline]
    pub fn epoch(&self) -> Epoch {
        self.routing.epoch()
    }
}

/// Per-slot assignments for `plan` (from `old` to `new`) on a cluster of `slots` slots (slots
/// beyond the plan's own count get an empty plan: they still switch epochs and report
/// completion).
pub fn assignments(
    plan: &MigrationPlan,
    old: &RoutingTable,
    new: &Arc<RoutingTable>,
    preds: &[Vec<usize>],
    slots: usize,
) -> Vec<Assignment> {
    debug_assert_eq!(plan.epoch, new.epoch(), "the plan moves to the new table");
    let slots = slots.max(plan.workers.len());
    let upstream_old: Arc<Vec<BTreeSet<Slot>>> = Arc::new(
        preds
            .iter()
            .map(|ps| ps.iter().flat_map(|&p| old.hosts(p)).collect())
            .collect(),
    );
    let mut out: Vec<Assignment> = (0..slots)
        .map(|s| Assignment {
            routing: Arc::clone(new),
            plan: plan.workers.get(s).cloned().unwrap_or_default(),
            fence_to: BTreeSet::new(),
            fence_from: BTreeSet::new(),
            upstream_old: Arc::clone(&upstream_old),
        })
        .collect();
    for (u, v) in fence_pairs(old, preds) {
        if u.index() < slots && v.index() < slots {
            out[u.index()].fence_to.insert(v);
            out[v.index()].fence_from.insert(u);
        }
    }
    out
}

/// Every connection `u → v` (u ≠ v) that can carry a request under `routing`: u hosts a key
/// group of a predecessor of an operator that v hosts a key group of.
pub fn fence_pairs(routing: &RoutingTable, preds: &[Vec<usize>]) -> BTreeSet<(Slot, Slot)> {
    let hosts: Vec<BTreeSet<Slot>> = (0..routing.operators()).map(|o| routing.hosts(o)).collect();
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

/// Slots the ingress sends its marker to: old owners of moved key groups of source operators.
pub fn ingress_markers(plan: &MigrationPlan) -> BTreeSet<Slot> {
    plan.workers
        .iter()
        .enumerate()
        .filter(|(_, p)| p.hear_from_ingress)
        .map(|(s, _)| Slot::at(s))
        .collect()
}
