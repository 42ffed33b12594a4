//! Property tests: placements feasible when recomputed independently, all demand placed unless
//! saturated, successors before predecessors.

use clasp_controlplane::baselines::{PolicyKind, policy};
use clasp_controlplane::exact::{DEFAULT_GRID_STEPS, place_exact};
use clasp_controlplane::model::{
    CostModel, EdgeLoad, OperatorLoad, Problem, SHARE_EPSILON, worker_loads,
};
use clasp_controlplane::placement::{place, visit_order};
use proptest::prelude::*;

fn problem_strategy() -> impl Strategy<Value = Problem> {
    (2usize..8, 1usize..12, any::<u64>()).prop_map(|(n, max_workers, seed)| {
        let mut rng = clasp_protocol::rng::SimRng::new(seed);
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
            packing: Default::default(),
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
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
}

#[test]
fn exact_reference_is_at_most_the_heuristic_on_small_instances() {
    let mut rng = clasp_protocol::rng::SimRng::new(11);
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
