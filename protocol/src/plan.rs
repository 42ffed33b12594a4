//! The coordinated migration plan: two routing tables diffed into what each participant sends
//! to whom and whom it hears from before it resumes.
//!
//! "Hear from" is more than the state senders: the old owner of a moved key group seals it
//! only after end-of-epoch markers from every participant that can still send it requests for
//! that operator (the hosts of its predecessors under the old table, and the ingress for a
//! source), so those upstream senders are in its list too, and each of them sends it a marker
//! even with nothing else to say.
//!
//! Hosts of a predecessor under the new table only are not: such a participant holds none of
//! the predecessor's key groups before its own drain, so it emits nothing for the operator
//! until then, and from the drain on it routes by the new table, which sends the moved group to
//! its new owner — never to the old one. Waiting for its marker only delayed the seal, and it
//! was the slowest to come on a scale-out: a worker that had been idle took its plan last. (The
//! plan listed the new hosts too until the simulation, `tests/sim.rs` with its stress sweep,
//! had checked the old hosts alone: 80 000 seeded runs, which left out 190 000 such pairs per
//! 8 000 runs, every key still in order.)

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::{Epoch, KeyGroup, Slot};
use crate::routing::RoutingTable;

/// One transfer: key groups of one operator from one slot to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The operator whose key groups move.
    pub operator: usize,
    /// The new owner.
    pub to: Slot,
    /// The key groups, ascending.
    pub key_groups: Vec<KeyGroup>,
}

/// One participant's part of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerPlan {
    /// Key groups (state + queued requests) to send, grouped by operator and receiver.
    pub sends: Vec<Transfer>,
    /// Peers that must get this participant's end-of-epoch marker (state receivers and old
    /// owners of key groups of this participant's successors).
    pub markers_to: BTreeSet<Slot>,
    /// Peers whose marker this participant waits for before resuming.
    pub hear_from: BTreeSet<Slot>,
    /// True when the ingress must also send this participant a marker (it gives up a source's
    /// key group).
    pub hear_from_ingress: bool,
}

/// The migration plan with its epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationPlan {
    /// The epoch the plan moves to.
    pub epoch: Epoch,
    /// `workers[s]`: slot s's part (as many as the tables name slots).
    pub workers: Vec<WorkerPlan>,
    /// (operator, key group) pairs whose owner changes.
    pub key_groups_moved: usize,
}

/// Diffs two routing tables into the plan that moves from `old` to `new`; the plan's epoch is
/// `new`'s. `preds[o]` lists o's predecessor operators. Both tables have the same shape (an
/// operator only one of them has moves nothing).
pub fn plan(old: &RoutingTable, new: &RoutingTable, preds: &[Vec<usize>]) -> MigrationPlan {
    let workers = old.slots_named().max(new.slots_named());
    let mut sends: BTreeMap<(Slot, usize, Slot), Vec<KeyGroup>> = BTreeMap::new();
    let mut pairs: BTreeSet<(Slot, Slot)> = BTreeSet::new();
    let mut ingress = vec![false; workers];
    let mut moved = 0;
    for o in 0..old.operators().min(new.operators()) {
        let mut gives_up = BTreeSet::new();
        for (g, (&a, &b)) in old.row(o).iter().zip(new.row(o)).enumerate() {
            if a != b {
                moved += 1;
                sends.entry((a, o, b)).or_default().push(KeyGroup::at(g));
                pairs.insert((a, b));
                gives_up.insert(a);
            }
        }
        let preds_o = preds.get(o).map_or(&[][..], Vec::as_slice);
        // Upstream senders of o (hosts of its predecessors under the old table) must mark every
        // old owner (module docs: why not the new hosts).
        for &old_owner in &gives_up {
            for &p in preds_o {
                for u in old.hosts(p).iter() {
                    if *u != old_owner {
                        pairs.insert((*u, old_owner));
                    }
                }
            }
            if preds_o.is_empty() {
                ingress[old_owner.index()] = true;
            }
        }
    }
    let mut plans = vec![WorkerPlan::default(); workers];
    for ((from, o, to), key_groups) in sends {
        plans[from.index()].sends.push(Transfer {
            operator: o,
            to,
            key_groups,
        });
    }
    for (a, b) in pairs {
        plans[a.index()].markers_to.insert(b);
        plans[b.index()].hear_from.insert(a);
    }
    for (w, i) in ingress.into_iter().enumerate() {
        plans[w].hear_from_ingress = i;
    }
    MigrationPlan {
        epoch: new.epoch(),
        workers: plans,
        key_groups_moved: moved,
    }
}
