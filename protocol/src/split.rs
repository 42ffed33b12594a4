//! Shares → key groups: how a placement's fractional shares become whole key groups.
//!
//! Key groups are the unit of routing and of state: each operator's key groups are split over
//! its owners in proportion to their shares (largest remainder), and a new split keeps every
//! key group it can where it already is — on each owner, `min(old count, new count)` stay and
//! only the surplus moves, which is the fewest moves any assignment with those counts can make.
//! A share row is indexed by owner (a worker for the planner, a slot for the data plane).

use crate::ids::{Epoch, Slot};
use crate::routing::RoutingTable;

/// Key groups per operator (as Flink's default max parallelism is a power of two).
pub const KEY_GROUPS_PER_OPERATOR: usize = 1024;

/// The slot of key group `group` (of `groups`) when every operator's key groups are split into
/// equal contiguous ranges over `slots` slots: the even spread a run's workers start on (the
/// data plane's routing) and that the planner's first decision counts its moves from.
pub fn even_slot(group: usize, groups: usize, slots: usize) -> usize {
    debug_assert!(group < groups, "key group {group} of {groups}");
    group * slots / groups
}

/// Key groups per owner for shares `row` (largest remainder; ties to the lower owner).
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

/// Key groups per owner for `row`, and all of them on slot 0 when the row names no owner.
fn counts_or_first(row: &[f64], key_groups: usize) -> Vec<usize> {
    if row.is_empty() {
        vec![key_groups]
    } else {
        key_group_counts(row, key_groups)
    }
}

/// Initial routing (epoch 0): contiguous key group ranges in slot order. `shares[o][s]` is
/// slot s's share of operator o.
pub fn initial_routing(shares: &[Vec<f64>], key_groups: usize) -> RoutingTable {
    let mut owners: Vec<Slot> = Vec::with_capacity(shares.len() * key_groups);
    for row in shares {
        for (s, &c) in counts_or_first(row, key_groups).iter().enumerate() {
            owners.extend(std::iter::repeat_n(Slot::at(s), c));
        }
    }
    RoutingTable::from_fn(Epoch::INITIAL, shares.len(), key_groups, |o, g| {
        owners[o * key_groups + g.index()]
    })
}

/// New routing for `shares` (at the epoch after `old`'s), keeping as many key groups as
/// possible with their old owner. Operators beyond the shares' rows are dropped.
pub fn reassign(old: &RoutingTable, shares: &[Vec<f64>]) -> RoutingTable {
    let key_groups = old.key_groups();
    let operators = old.operators().min(shares.len());
    let mut owners: Vec<Slot> = Vec::with_capacity(operators * key_groups);
    for (row_old, row) in old.rows().zip(shares) {
        let target = counts_or_first(row, key_groups);
        let mut kept = vec![0usize; target.len()];
        let mut new = vec![Slot(u32::MAX); key_groups];
        let mut free = Vec::new();
        for (g, &s) in row_old.iter().enumerate() {
            let w = s.index();
            if w < target.len() && kept[w] < target[w] {
                kept[w] += 1;
                new[g] = s;
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
            new[g] = Slot::at(w);
        }
        owners.extend(new);
    }
    RoutingTable::from_fn(old.epoch().next(), operators, key_groups, |o, g| {
        owners[o * key_groups + g.index()]
    })
}
