//! Each equation of the capacity model (eq. 1–8 of the CLASP paper) on hand-computed cases.

use clasp_controlplane::metrics::{
    DerivationContext, OperatorSample, SaturationConfig, SaturationDetector, WorkerSample,
    aggregate, derive_problem, projection_factor,
};
use clasp_controlplane::model::{
    CostModel, EdgeLoad, OperatorLoad, Problem, parse_problem, worker_loads,
};
use clasp_controlplane::placement::{pack, place, visit_order};
use clasp_controlplane::scaling::{
    Explanation, Trigger, TriggerConfig, Triggers, executor_parallelism, parse_line,
    total_parallelism,
};

fn costs() -> CostModel {
    CostModel {
        alpha_us: 10.0,
        beta_us: 100.0,
        gamma_us: 1000.0,
    }
}

fn two_ops(demand_a: f64, demand_b: f64, edge_rate: f64) -> Problem {
    Problem {
        capacity_us_per_s: 100_000.0,
        headroom: 1.0,
        costs: costs(),
        max_workers: 4,
        slots_per_worker: 10,
        operators: vec![
            OperatorLoad {
                name: "a".into(),
                demand_us_per_s: demand_a,
                rate_per_s: 100.0,
                exec_us: demand_a / 100.0,
            },
            OperatorLoad {
                name: "b".into(),
                demand_us_per_s: demand_b,
                rate_per_s: edge_rate,
                exec_us: 1.0,
            },
        ],
        edges: vec![EdgeLoad {
            from: 0,
            to: 1,
            rate_per_s: edge_rate,
        }],
        packing: Default::default(),
        beta_receiver_share: 0.0,
        worker_headroom: Vec::new(),
    }
}

#[test]
fn load_of_eq5_by_hand() {
    // a: 50/50 on w0,w1; b: all on w1. Edge 100/s.
    let p = two_ops(20_000.0, 10_000.0, 100.0);
    let shares = vec![vec![0.5, 0.5], vec![0.0, 1.0]];
    let l = worker_loads(&p, &shares, 2);
    // w0: exec 10000 + 100·0.5·(10·0 + 100·1) = 5000, δ=1 → +1000 → 16000.
    assert!((l[0] - 16_000.0).abs() < 1e-9, "{l:?}");
    // w1: exec 10000 + 10000, dispatch 100·0.5·(10·1) = 500, δ=0 → 20500.
    assert!((l[1] - 20_500.0).abs() < 1e-9, "{l:?}");
}

#[test]
fn phi_max_with_g_and_m_by_hand() {
    // b (no successors) fills w0 with 30000. Then a (demand 100000, edge 100/s to b):
    // on w0: free 70000, g=0, m per unit σ = 100000 + 100·10 = 101000 → x = 70000/101000.
    let p = two_ops(100_000.0, 30_000.0, 100.0);
    let (shares, workers) = pack(&p, 100_000.0, 4).expect("fits in 4");
    let x0 = 70_000.0 / 101_000.0;
    assert!((shares[0][0] - x0).abs() < 1e-6, "{shares:?}");
    // w1 (new): remote to w0 → g=1, unit cost 100000 + 100·100 → x = (100000−1000)/110000,
    // more than the 1 − x0 left, so a ends there.
    assert!((shares[0][1] - (1.0 - shares[0][0])).abs() < 1e-9);
    assert_eq!(workers, 2);
    let loads = worker_loads(&p, &shares, workers);
    assert!((loads[0] - 100_000.0).abs() < 0.1, "{loads:?}");
    assert!(
        (loads[1] - ((1.0 - shares[0][0]) * 110_000.0 + 1000.0)).abs() < 1e-6,
        "{loads:?}"
    );
}

#[test]
fn bisection_reports_the_sustainable_fraction() {
    let mut p = two_ops(300_000.0, 300_000.0, 0.0);
    p.edges[0].rate_per_s = 0.0;
    p.max_workers = 3;
    let pl = place(&p);
    assert!(pl.saturated);
    // 600000 of demand, no chained cost, 3×100000 budget → s = 0.5.
    assert!(
        (pl.fraction_placed - 0.5).abs() < 1e-6,
        "{}",
        pl.fraction_placed
    );
    assert_eq!(pl.workers, 3);
}

#[test]
fn visit_order_is_post_order_heaviest_edge_first() {
    // Figure 6 of the paper: A→B→C→E (heavy), A→D→E (light): E, C, B, D, A.
    let op = |n: &str| OperatorLoad {
        name: n.into(),
        demand_us_per_s: 1.0,
        rate_per_s: 1.0,
        exec_us: 1.0,
    };
    let e = |f, t, r| EdgeLoad {
        from: f,
        to: t,
        rate_per_s: r,
    };
    let p = Problem {
        operators: ["A", "B", "C", "D", "E"].iter().map(|n| op(n)).collect(),
        edges: vec![
            e(0, 1, 10.0),
            e(1, 2, 10.0),
            e(2, 4, 10.0),
            e(0, 3, 1.0),
            e(3, 4, 1.0),
        ],
        ..two_ops(1.0, 1.0, 1.0)
    };
    assert_eq!(visit_order(&p), vec![4, 2, 1, 3, 0]);
}

#[test]
fn load_derivation_and_projection() {
    let sample = |w: usize, n: f64, tau: f64, e: f64| WorkerSample {
        worker: w,
        operators: vec![
            OperatorSample {
                processed_per_s: n,
                exec_us: tau,
            },
            OperatorSample::default(),
        ],
        edges_per_s: vec![e],
        ..WorkerSample::default()
    };
    let agg = aggregate(
        &[
            sample(0, 100.0, 200.0, 300.0),
            sample(1, 300.0, 400.0, 900.0),
        ],
        2,
        1,
    );
    assert_eq!(agg.processed_per_s[0], 400.0);
    // Rate-weighted τ̄ = (100·200 + 300·400)/400 = 350.
    assert!((agg.exec_us[0] - 350.0).abs() < 1e-9);
    assert_eq!(agg.edges_per_s[0], 1200.0);
    let s = projection_factor(1500.0, 1000.0);
    assert!((s - 1.5).abs() < 1e-12);
    let names = vec!["a".to_string(), "b".to_string()];
    let ctx = DerivationContext {
        operator_names: &names,
        edges: &[(0, 1)],
        capacity_us_per_s: 1e6,
        headroom: 0.9,
        costs: costs(),
        max_workers: 3,
        slots_per_worker: 10,
    };
    let p = derive_problem(&ctx, &agg, s);
    assert!((p.operators[0].demand_us_per_s - 1.5 * 400.0 * 350.0).abs() < 1e-6);
    assert!((p.edges[0].rate_per_s - 1800.0).abs() < 1e-9);
    assert!((p.budget_us_per_s() - 900_000.0).abs() < 1e-6);
}

#[test]
fn parallelism_from_load_over_one_executor() {
    // B = 100 000 µs/s, 4 executors. w0 sends to w1 (δ = 1, γ = 1000): one executor sustains
    // (100 000 − 1000)/4 = 24 750 µs/s there; w1 sends nowhere: 25 000.
    // a: 60 000 on w0 (σ 0.6) + sends: 100/s·0.6·(α·0 + β·1) = 6 000 → 66 000 → ⌈2.67⌉ = 3;
    //    40 000 on w1 (σ 0.4) + 100·0.4·(α·1) = 400 → 40 400 → ⌈1.616⌉ = 2.
    // b: 10 000 all on w1 → 1; none on w0 → 0.
    let p = two_ops(100_000.0, 10_000.0, 100.0);
    let shares = vec![vec![0.6, 0.4], vec![0.0, 1.0]];
    let par = executor_parallelism(&p, &shares, 2, 4);
    assert_eq!(par, vec![vec![3, 2], vec![0, 1]]);
    assert_eq!(total_parallelism(&par), vec![5, 1]);
    // The connections' γ comes out of the executors' budget: with γ = 26 000, w0's executors
    // sustain (100 000 − 26 000)/4 = 18 500 each → a needs ⌈66 000/18 500⌉ = 4 there.
    let mut costly = p.clone();
    costly.costs.gamma_us = 26_000.0;
    assert_eq!(executor_parallelism(&costly, &shares, 2, 4)[0][0], 4);
    // Never more than the worker's executors, never 0 where the operator has a share.
    let heavy = two_ops(1e9, 1.0, 100.0);
    let par = executor_parallelism(&heavy, &vec![vec![1.0], vec![1.0]], 1, 4);
    assert_eq!(par, vec![vec![4], vec![1]]);
}

#[test]
fn triggers_hold_windows() {
    // The symmetric form: 2 s either way.
    let mut t = Triggers::new(TriggerConfig::symmetric(), 1000.0);
    assert_eq!(t.observe(0, 1300.0, 1300.0), None);
    assert_eq!(t.observe(1_000_000, 1300.0, 1300.0), None);
    assert_eq!(
        t.observe(2_000_000, 1300.0, 1300.0),
        Some(Trigger::RateChanged)
    );
    t.planned(1300.0);
    assert_eq!(t.observe(3_000_000, 1300.0, 1000.0), None);
    assert_eq!(t.observe(5_000_000, 1300.0, 1000.0), None);
    assert_eq!(
        t.observe(6_000_000, 1300.0, 1000.0),
        Some(Trigger::ThroughputLagging)
    );
    // A blip that returns resets the window.
    let mut t = Triggers::new(TriggerConfig::symmetric(), 1000.0);
    t.observe(0, 1500.0, 1500.0);
    t.observe(1_000_000, 1000.0, 1000.0);
    assert_eq!(t.observe(2_500_000, 1500.0, 1500.0), None);
}

#[test]
fn triggers_scale_up_eagerly_and_down_lazily() {
    let c = TriggerConfig::default();
    assert!(c.rate_up_hold_us < c.rate_hold_us);
    // A rise fires after the short hold.
    let mut t = Triggers::new(c, 1000.0);
    assert_eq!(t.observe(0, 1300.0, 1300.0), None);
    assert_eq!(t.moved_since_us(), Some((0, true)));
    assert_eq!(
        t.observe(c.rate_up_hold_us, 1300.0, 1300.0),
        Some(Trigger::RateChanged)
    );
    // A fall waits for the long one.
    let mut t = Triggers::new(c, 1000.0);
    assert_eq!(t.observe(0, 700.0, 700.0), None);
    assert_eq!(t.observe(c.rate_up_hold_us, 700.0, 700.0), None);
    assert_eq!(t.observe(c.rate_hold_us - 1, 700.0, 700.0), None);
    assert_eq!(
        t.observe(c.rate_hold_us, 700.0, 700.0),
        Some(Trigger::RateChanged)
    );
    // ...and does not count while the cluster drains a backlog: its hold starts afterwards.
    let mut t = Triggers::new(c, 1000.0);
    assert_eq!(t.observe_draining(0, 700.0, 900.0, true), None);
    assert_eq!(t.observe_draining(3_000_000, 700.0, 900.0, true), None);
    assert_eq!(t.moved_since_us(), None);
    assert_eq!(t.observe_draining(3_250_000, 700.0, 700.0, false), None);
    assert_eq!(
        t.observe_draining(5_250_000, 700.0, 700.0, false),
        Some(Trigger::RateChanged)
    );
    // A move that flips direction starts its hold again.
    let mut t = Triggers::new(c, 1000.0);
    assert_eq!(t.observe(0, 700.0, 700.0), None);
    assert_eq!(t.observe(1_900_000, 1300.0, 1300.0), None);
    assert_eq!(t.moved_since_us(), Some((1_900_000, true)));
}

#[test]
fn saturation_by_growth_or_by_depth_and_wait() {
    let mut d = SaturationDetector::new(SaturationConfig::default());
    let s = |q: usize| WorkerSample {
        queue_len: q,
        ..WorkerSample::default()
    };
    assert!(!d.observe(&s(1)));
    assert!(!d.observe(&s(2)));
    assert!(!d.observe(&s(3)));
    assert!(d.observe(&s(4)));
    assert!(!d.observe(&s(4)));
    let deep = WorkerSample {
        queue_mean: 600.0,
        wait_mean_us: 150_000.0,
        ..WorkerSample::default()
    };
    assert!(d.observe(&deep));
}

#[test]
fn explanation_line_round_trips() {
    let e = Explanation {
        policy: "clasp".into(),
        trigger: "rate-changed".into(),
        rate_per_s: 1200.0,
        projected_demand_us_per_s: 2e6,
        capacity_us_per_s: 850_000.0,
        costs: costs(),
        workers_before: 3,
        workers_after: 4,
        parallelism: vec![("split".into(), 2, 3)],
        key_groups_moved: 310,
        loads_us_per_s: vec![510_000.4, 498_000.0],
    };
    let kv = parse_line(&e.line());
    assert_eq!(kv["loads_us_per_s"], "510000/498000");
    assert_eq!(kv["workers"], "3->4");
    assert_eq!(kv["parallelism"], "split:2->3");
    assert_eq!(kv["kg_moved"], "310");
    assert_eq!(kv["rate_per_s"], "1200.0");
}

#[test]
fn malformed_problems_are_rejected() {
    let base = r#"{"capacity_us_per_s": 850000, "headroom": 0.9, "alpha_us": 38.5, "beta_us": 275,
        "gamma_us": 51500, "max_workers": 10, "slots_per_worker": 10,
        "operators": [{"name": "a", "demand_us_per_s": 1000, "rate_per_s": 10, "exec_us": 100},
                      {"name": "b", "demand_us_per_s": 1000, "rate_per_s": 10, "exec_us": 100}],
        "edges": EDGES}"#;
    let ok = base.replace("EDGES", r#"[{"from": "a", "to": "b", "rate_per_s": 10}]"#);
    assert!(parse_problem(&ok).is_ok());
    let cycle = base.replace(
        "EDGES",
        r#"[{"from": "a", "to": "b", "rate_per_s": 1}, {"from": "b", "to": "a", "rate_per_s": 1}]"#,
    );
    assert!(
        parse_problem(&cycle)
            .unwrap_err()
            .to_string()
            .contains("cycle")
    );
    let unknown = base.replace("EDGES", r#"[{"from": "a", "to": "zz", "rate_per_s": 1}]"#);
    assert!(
        parse_problem(&unknown)
            .unwrap_err()
            .to_string()
            .contains("zz")
    );
    let negative = base.replace("EDGES", r#"[{"from": "a", "to": "b", "rate_per_s": -1}]"#);
    assert!(
        parse_problem(&negative)
            .unwrap_err()
            .to_string()
            .contains("non-negative")
    );
}
