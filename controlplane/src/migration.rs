//! Shares → key groups, and the coordinated migration plan (DESIGN.md §6 last bullet, §7).
//!
//! Key groups are the unit of routing and of state: each operator's 1024 key groups are split
//! over its workers in proportion to σ (largest remainder), and the split keeps every key group
//! it can where it already is — on each worker, `min(old count, new count)` stay and only the
//! surplus moves, which is the fewest moves any assignment with those counts can make.
//!
//! The plan tells each worker what to send to whom and whom to hear from before it resumes.
//! Per §7, "hear from" is more than the state senders: the old owner of a moved key group seals
//! it only after end-of-epoch markers from every worker that can send to that operator (the
//! hosts of its predecessors, old and new, and the ingress for a source), so those upstream
//! senders are in its list too, and each of them sends it a marker even with nothing else to say.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Shares;

/// Key groups per operator (as Flink's default max parallelism is a power of two).
pub const KEY_GROUPS_PER_OPERATOR: usize = 1024;

/// `owners[o][g]`: the worker owning key group g of operator o.
pub type Routing = Vec<Vec<usize>>;

/// Key groups per worker for shares `row` (largest remainder; ties to the lower worker).
pub fn key_group_counts(row: &[f64], key_groups: usize) -> Vec<usize> {
    let total: f64 = row.iter().map(|s| s.max(0.0)).sum();
    if row.is_empty() {
        return Vec::new();
    }
    if total <= 0.0 {
        let mut c = vec![0; row.len()];
        c[0] = key_groups;
        return c;
    }
    let exact: Vec<f64> = row
        .iter()
        .map(|s| s.max(0.0) / total * key_groups as f64)
        .collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut left = key_groups - counts.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    for &w in order.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[w] += 1;
        left -= 1;
    }
    counts
}

/// Initial routing: contiguous key group ranges in worker order.
pub fn initial_routing(shares: &Shares, key_groups: usize) -> Routing {
    shares
        .iter()
        .map(|row| {
            let mut owners = Vec::with_capacity(key_groups);
            for (w, &c) in key_group_counts(row, key_groups).iter().enumerate() {
                owners.extend(std::iter::repeat_n(w, c));
            }
            owners
        })
        .collect()
}

/// New routing for `shares`, keeping as many key groups as possible with their old owner.
pub fn reassign(old: &Routing, shares: &Shares) -> Routing {
    old.iter()
        .zip(shares)
        .map(|(owners, row)| {
            let target = key_group_counts(row, owners.len());
            let mut kept = vec![0usize; target.len()];
            let mut new = vec![usize::MAX; owners.len()];
            let mut free = Vec::new();
            for (g, &w) in owners.iter().enumerate() {
                if w < target.len() && kept[w] < target[w] {
                    kept[w] += 1;
                    new[g] = w;
                } else {
                    free.push(g);
                }
            }
            let mut w = 0;
            for g in free {
                while kept[w] >= target[w] {
                    w += 1;
                }
                kept[w] += 1;
                new[g] = w;
            }
            new
        })
        .collect()
}

/// One transfer: key groups of one operator from a worker to another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub operator: usize,
    pub to: usize,
    pub key_groups: Vec<usize>,
}

/// One worker's part of the plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerPlan {
    /// Key groups (state + queued requests) to send, grouped by operator and receiver.
    pub sends: Vec<Transfer>,
    /// Peers that must get this worker's end-of-epoch marker (state receivers and old owners
    /// of key groups of this worker's successors).
    pub markers_to: BTreeSet<usize>,
    /// Peers whose marker this worker waits for before resuming.
    pub hear_from: BTreeSet<usize>,
    /// True when the ingress must also send this worker a marker (it gives up a source's key group).
    pub hear_from_ingress: bool,
}

/// The migration plan with its epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationPlan {
    pub epoch: u64,
    pub workers: Vec<WorkerPlan>,
    pub key_groups_moved: usize,
}

/// Diffs two routing tables into a plan. `preds[o]` lists o's predecessor operators.
pub fn plan(epoch: u64, old: &Routing, new: &Routing, preds: &[Vec<usize>]) -> MigrationPlan {
    let workers = old
        .iter()
        .chain(new)
        .flatten()
        .map(|&w| w + 1)
        .max()
        .unwrap_or(0);
    let mut sends: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    let mut ingress = vec![false; workers];
    let hosts = |r: &Routing, o: usize| -> BTreeSet<usize> { r[o].iter().copied().collect() };
    let mut moved = 0;
    for o in 0..old.len() {
        let mut gives_up = BTreeSet::new();
        for (g, (&a, &b)) in old[o].iter().zip(&new[o]).enumerate() {
            if a != b {
                moved += 1;
                sends.entry((a, o, b)).or_default().push(g);
                pairs.insert((a, b));
                gives_up.insert(a);
            }
        }
        // Upstream senders of o (hosts of its predecessors, old and new) must mark every old owner.
        for &old_owner in &gives_up {
            for &p in &preds[o] {
                for u in hosts(old, p).union(&hosts(new, p)) {
                    if *u != old_owner {
                        pairs.insert((*u, old_owner));
                    }
                }
            }
            if preds[o].is_empty() {
                ingress[old_owner] = true;
            }
        }
    }
    let mut plans = vec![WorkerPlan::default(); workers];
    for ((from, o, to), key_groups) in sends {
        plans[from].sends.push(Transfer {
            operator: o,
            to,
            key_groups,
        });
    }
    for (a, b) in pairs {
        plans[a].markers_to.insert(b);
        plans[b].hear_from.insert(a);
    }
    for (w, i) in ingress.into_iter().enumerate() {
        plans[w].hear_from_ingress = i;
    }
    MigrationPlan {
        epoch,
        workers: plans,
        key_groups_moved: moved,
    }
}
