//! Property tests of the key-group split and the plan: plans move exactly the changed key
//! groups, the fewest possible, and every participant's expected senders match what the others
//! send it.

use clasp_protocol::ids::{Epoch, Slot};
use clasp_protocol::plan::plan;
use clasp_protocol::rng::SimRng;
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::split::{KEY_GROUPS_PER_OPERATOR, initial_routing, key_group_counts, reassign};
use proptest::prelude::*;

/// A table's owners as plain slot numbers, `[operator][key group]`.
fn numbers(t: &RoutingTable) -> Vec<Vec<usize>> {
    t.rows()
        .map(|r| r.iter().map(|s| s.index()).collect())
        .collect()
}

proptest! {
    #[test]
    fn plans_move_exactly_the_changed_key_groups(
        old_shares in prop::collection::vec(prop::collection::vec(0.0f64..1.0, 1..6), 3),
        new_w in 1usize..6,
        seed in any::<u64>(),
    ) {
        let mut rng = SimRng::new(seed);
        let width = old_shares.iter().map(Vec::len).max().unwrap_or(1);
        let old_shares: Vec<Vec<f64>> = old_shares.into_iter().map(|mut r| { r.resize(width, 0.0); r }).collect();
        let new_shares: Vec<Vec<f64>> = (0..3).map(|_| (0..new_w).map(|_| rng.uniform()).collect()).collect();
        let old_table = initial_routing(&old_shares, KEY_GROUPS_PER_OPERATOR);
        let new_table = reassign(&old_table, &new_shares);
        prop_assert_eq!(old_table.epoch(), Epoch(0));
        prop_assert_eq!(new_table.epoch(), Epoch(1));
        let (old, new) = (numbers(&old_table), numbers(&new_table));
        // Counts follow the shares, and the number moved is the minimum possible.
        for o in 0..3 {
            let target = key_group_counts(&new_shares[o], KEY_GROUPS_PER_OPERATOR);
            let mut got = vec![0usize; new_w];
            for &w in &new[o] { got[w] += 1; }
            prop_assert_eq!(&got, &target);
            let mut old_counts = vec![0usize; width.max(new_w)];
            for &w in &old[o] { old_counts[w] += 1; }
            let min_moves: usize = (0..old_counts.len()).map(|w| old_counts[w].saturating_sub(*target.get(w).unwrap_or(&0))).sum();
            let moved = old[o].iter().zip(&new[o]).filter(|(a, b)| a != b).count();
            prop_assert_eq!(moved, min_moves);
        }
        let preds = vec![vec![], vec![0], vec![0, 1]];
        let pl = plan(&old_table, &new_table.with_epoch(Epoch(7)), &preds);
        prop_assert_eq!(pl.epoch, Epoch(7));
        // Exactly the changed key groups are sent, by their old owner to their new owner.
        let mut sent = std::collections::BTreeSet::new();
        for (w, wp) in pl.workers.iter().enumerate() {
            for t in &wp.sends {
                for g in t.key_groups.iter().map(|g| g.index()) {
                    prop_assert_eq!(old[t.operator][g], w);
                    prop_assert_eq!(new[t.operator][g], t.to.index());
                    prop_assert!(sent.insert((t.operator, g)));
                }
                prop_assert!(wp.markers_to.contains(&t.to));
            }
        }
        let mut changed = std::collections::BTreeSet::new();
        for o in 0..3 {
            for g in 0..KEY_GROUPS_PER_OPERATOR {
                if old[o][g] != new[o][g] {
                    changed.insert((o, g));
                }
            }
        }
        prop_assert_eq!(&sent, &changed);
        prop_assert_eq!(pl.key_groups_moved, changed.len());
        // Each worker's expected senders are exactly the workers that send it a marker.
        for (w, wp) in pl.workers.iter().enumerate() {
            let w = Slot::at(w);
            let senders: std::collections::BTreeSet<Slot> =
                pl.workers.iter().enumerate().filter(|(_, v)| v.markers_to.contains(&w)).map(|(v, _)| Slot::at(v)).collect();
            prop_assert_eq!(&wp.hear_from, &senders);
            prop_assert!(!wp.hear_from.contains(&w));
        }
    }
}

#[test]
fn upstream_senders_are_heard_from() {
    // o0 → o1. o1's key groups move from w1 to w2; w0 hosts o0 and must mark w1 (the old
    // owner), which may only seal after it: so w1 hears from w0 although w0 sends no state.
    let table = |epoch, o1| {
        RoutingTable::from_rows(Epoch(epoch), vec![vec![Slot(0); 4], vec![Slot(o1); 4]])
            .expect("rows of one length")
    };
    let pl = plan(&table(0, 1), &table(1, 2), &[vec![], vec![0]]);
    assert!(pl.workers[1].hear_from.contains(&Slot(0)));
    assert!(pl.workers[2].hear_from.contains(&Slot(1)));
    assert!(pl.workers[0].markers_to.contains(&Slot(1)));
    assert!(pl.workers[0].sends.is_empty());
}

#[test]
fn a_host_of_an_upstream_operator_under_the_new_table_only_is_not_waited_for() {
    // o0 → o1, both moving wholly from w0 to w1 (a scale-out onto an idle slot): w1 routes by
    // the new table from its first emission, so w0 seals o1's key groups on the ingress's
    // marker alone (o0 is a source), not on w1's.
    let table = |epoch, s| {
        RoutingTable::from_rows(Epoch(epoch), vec![vec![Slot(s); 4], vec![Slot(s); 4]])
            .expect("rows of one length")
    };
    let pl = plan(&table(0, 0), &table(1, 1), &[vec![], vec![0]]);
    assert!(pl.workers[0].hear_from.is_empty(), "{:?}", pl.workers[0]);
    assert!(pl.workers[0].hear_from_ingress);
    assert!(!pl.workers[1].markers_to.contains(&Slot(0)));
    // The state receiver still hears from the sender.
    assert!(pl.workers[1].hear_from.contains(&Slot(0)));
}

#[test]
fn a_share_row_without_owners_keeps_every_key_group_on_slot_0() {
    let t = initial_routing(&[vec![], vec![1.0, 1.0]], 8);
    assert!(t.row(0).iter().all(|&s| s == Slot(0)));
    assert_eq!(t.groups_of(1, Slot(1)).count(), 4);
    let u = reassign(&t, &[vec![], vec![0.0, 1.0]]);
    assert_eq!(u.epoch(), Epoch(1));
    assert!(u.row(0).iter().all(|&s| s == Slot(0)));
    assert!(u.row(1).iter().all(|&s| s == Slot(1)));
}
