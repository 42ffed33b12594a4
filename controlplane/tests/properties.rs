//! Property tests: placements feasible when recomputed independently, all demand placed unless
//! saturated, successors before predecessors; key-group plans move exactly the changed key
//! groups and every worker's expected senders match what the others send it.

use clasp_controlplane::baselines::{PolicyKind, policy};
use clasp_controlplane::exact::{DEFAULT_GRID_STEPS, place_exact};
use clasp_controlplane::migration::{
    KEY_GROUPS_PER_OPERATOR, initial_routing, key_group_counts, plan, reassign,
};
use clasp_controlplane::model::{
    CostModel, EdgeLoad, OperatorLoad, Problem, SHARE_EPSILON, worker_loads,
};
use clasp_controlplane::placement::{place, visit_order};
use proptest::prelude::*;

fn problem_strategy() -> impl Strategy<Value = Problem> {
    (2usize..8, 1usize..12, any::<u64>()).prop_map(|(n, max_workers, seed)| {
        let mut rng = clasp_controlplane::sim::rng::SimRng::new(seed);
        let operators: Vec<OperatorLoad> = (0..n)
            .map(|i| {
                let exec_us = 50.0 + 800.0 * rng.uniform();
                let demand = 900_000.0 * rng.uniform() * 1.5;
                OperatorLoad {
                    name: format!("o{i}"),
                    demand_us_per_s: demand,
                    rate_per_s: demand / exec_us,
                    exec_us,
                }
            })
            .collect();
        let mut edges = Vec::new();
        for to in 1..n {
            let from = rng.below(to);
            edges.push(EdgeLoad {
                from,
                to,
                rate_per_s: operators[from].rate_per_s * 5.0 * rng.uniform(),
            });
            if to >= 2 && rng.uniform() < 0.3 {
                let other = rng.below(to);
                if other != from {
                    edges.push(EdgeLoad {
                        from: other,
                        to,
                        rate_per_s: 500.0 * rng.uniform(),
                    });
                }
            }
        }
        Problem {
            capacity_us_per_s: 1_000_000.0,
            headroom: 0.9,
            costs: CostModel {
                alpha_us: 38.5,
                beta_us: 275.0,
                gamma_us: 51_500.0 * rng.uniform(),
            },
            max_workers,
            slots_per_worker: 10,
            operators,
            edges,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn clasp_placements_are_feasible_and_complete(p in problem_strategy()) {
        let pl = place(&p);
        let placed = p.scaled(pl.fraction_placed);
        let loads = worker_loads(&placed, &pl.shares, pl.workers);
        for &l in &loads {
            prop_assert!(l <= p.budget_us_per_s() * (1.0 + 1e-9), "load {l} > B; loads {loads:?}");
        }
        prop_assert!(pl.workers <= p.max_workers);
        for row in &pl.shares {
            prop_assert!(row.iter().all(|&s| s >= -SHARE_EPSILON));
            let sum: f64 = row.iter().sum();
            prop_assert!((sum - 1.0).abs() < 1e-6, "shares sum {sum}");
        }
        if !pl.saturated {
            prop_assert!((pl.fraction_placed - 1.0).abs() < 1e-12);
            prop_assert!(pl.workers >= p.lower_bound_workers().min(p.max_workers));
        }
    }

    #[test]
    fn successors_are_visited_before_predecessors(p in problem_strategy()) {
        let order = visit_order(&p);
        let pos: Vec<usize> = {
            let mut v = vec![0; order.len()];
            for (i, &o) in order.iter().enumerate() { v[o] = i; }
            v
        };
        prop_assert_eq!(order.len(), p.operators.len());
        for e in &p.edges {
            prop_assert!(pos[e.to] < pos[e.from]);
        }
    }

    #[test]
    fn every_policy_answers_with_honest_loads(p in problem_strategy()) {
        for k in [PolicyKind::FaasFlow, PolicyKind::Zhang24, PolicyKind::FaasFlowSp, PolicyKind::Zhang24Sp] {
            let d = policy(k).decide(&p, None);
            prop_assert!(d.placement.workers >= 1 && d.placement.workers <= p.max_workers);
            for row in &d.placement.shares {
                prop_assert_eq!(row.len(), d.placement.workers);
                prop_assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
            }
            let loads = worker_loads(&p, &d.placement.shares, d.placement.workers);
            prop_assert!(loads.iter().all(|l| l.is_finite() && *l >= 0.0));
        }
    }

    #[test]
    fn plans_move_exactly_the_changed_key_groups(
        old_shares in prop::collection::vec(prop::collection::vec(0.0f64..1.0, 1..6), 3),
        new_w in 1usize..6,
        seed in any::<u64>(),
    ) {
        let mut rng = clasp_controlplane::sim::rng::SimRng::new(seed);
        let width = old_shares.iter().map(Vec::len).max().unwrap_or(1);
        let old_shares: Vec<Vec<f64>> = old_shares.into_iter().map(|mut r| { r.resize(width, 0.0); r }).collect();
        let new_shares: Vec<Vec<f64>> = (0..3).map(|_| (0..new_w).map(|_| rng.uniform()).collect()).collect();
        let old = initial_routing(&old_shares, KEY_GROUPS_PER_OPERATOR);
        let new = reassign(&old, &new_shares);
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
        let pl = plan(7, &old, &new, &preds);
        prop_assert_eq!(pl.epoch, 7);
        // Exactly the changed key groups are sent, by their old owner to their new owner.
        let mut sent = std::collections::BTreeSet::new();
        for (w, wp) in pl.workers.iter().enumerate() {
            for t in &wp.sends {
                for &g in &t.key_groups {
                    prop_assert_eq!(old[t.operator][g], w);
                    prop_assert_eq!(new[t.operator][g], t.to);
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
            let senders: std::collections::BTreeSet<usize> =
                pl.workers.iter().enumerate().filter(|(_, v)| v.markers_to.contains(&w)).map(|(v, _)| v).collect();
            prop_assert_eq!(&wp.hear_from, &senders);
            prop_assert!(!wp.hear_from.contains(&w));
        }
    }
}

#[test]
fn upstream_senders_are_heard_from() {
    // o0 → o1. o1's key groups move from w1 to w2; w0 hosts o0 and must mark w1 (the old
    // owner), which may only seal after it: so w1 hears from w0 although w0 sends no state.
    let old = vec![vec![0; 4], vec![1; 4]];
    let new = vec![vec![0; 4], vec![2; 4]];
    let pl = plan(1, &old, &new, &[vec![], vec![0]]);
    assert!(pl.workers[1].hear_from.contains(&0));
    assert!(pl.workers[2].hear_from.contains(&1));
    assert!(pl.workers[0].markers_to.contains(&1));
    assert!(pl.workers[0].sends.is_empty());
}

#[test]
fn exact_reference_is_at_most_the_heuristic_on_small_instances() {
    let mut rng = clasp_controlplane::sim::rng::SimRng::new(11);
    let mut compared = 0;
    for _ in 0..30 {
        let p = clasp_controlplane::sim::random_instance(&mut rng);
        let h = place(&p);
        let Ok(x) = place_exact(&p, DEFAULT_GRID_STEPS) else {
            continue;
        };
        if h.saturated || x.saturated {
            continue;
        }
        compared += 1;
        let loads = worker_loads(&p, &x.shares, x.workers);
        assert!(
            loads
                .iter()
                .all(|&l| l <= p.budget_us_per_s() * (1.0 + 1e-9))
        );
        assert!(x.workers >= p.lower_bound_workers());
    }
    assert!(compared > 10);
}
