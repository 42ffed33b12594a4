//! Placement time (target: a 10-operator app on 100 workers within 1 ms): CLASP's packing
//! on a synthetic layered DAG, checked feasible before it is timed.

use clasp_controlplane::model::{
    CostModel, EdgeLoad, OperatorLoad, PAPER_CAPACITY_US_PER_S, Problem, worker_loads,
};
use clasp_controlplane::placement::place;

/// Repetitions timed per size; the median is reported.
pub const DEFAULT_REPETITIONS: usize = 51;

/// A DAG of `operators` operators (a chain with a skip edge every third operator) whose
/// demand needs about `workers`·0.8 workers of capacity, so the packing opens most of them.
pub fn problem(operators: usize, workers: usize) -> Problem {
    let budget = 0.9 * PAPER_CAPACITY_US_PER_S;
    let total = 0.8 * workers as f64 * budget;
    let ops: Vec<OperatorLoad> = (0..operators)
        .map(|i| {
            let weight = 1.0 + (i % 3) as f64;
            let exec_us = 200.0 + 100.0 * (i % 5) as f64;
            let demand = total * weight / (2.0 * operators as f64);
            OperatorLoad {
                name: format!("op{i}"),
                demand_us_per_s: demand,
                rate_per_s: demand / exec_us,
                exec_us,
            }
        })
        .collect();
    let mut edges = Vec::new();
    for i in 1..operators {
        edges.push(EdgeLoad {
            from: i - 1,
            to: i,
            rate_per_s: ops[i - 1].rate_per_s * 0.1,
        });
        if i >= 2 && i % 3 == 0 {
            edges.push(EdgeLoad {
                from: i - 2,
                to: i,
                rate_per_s: ops[i - 2].rate_per_s * 0.02,
            });
        }
    }
    Problem {
        capacity_us_per_s: PAPER_CAPACITY_US_PER_S,
        headroom: 0.9,
        costs: CostModel {
            alpha_us: 38.5,
            beta_us: 275.0,
            gamma_us: 5_150.0,
        },
        max_workers: workers,
        slots_per_worker: 10,
        operators: ops,
        edges,
        packing: Default::default(),
        beta_receiver_share: 0.0,
        worker_headroom: Vec::new(),
    }
}

/// Panics unless CLASP's placement of `p` is feasible: the check before the timing.
pub fn check(p: &Problem) {
    let pl = place(p);
    let loads = worker_loads(&p.scaled(pl.fraction_placed), &pl.shares, pl.workers);
    assert!(
        loads
            .iter()
            .all(|&l| l <= p.budget_us_per_s() * (1.0 + 1e-9)),
        "infeasible placement"
    );
}

/// Median wall time of one placement, in milliseconds.
pub fn median_ms(p: &Problem, repetitions: usize) -> f64 {
    check(p);
    let mut times: Vec<f64> = (0..repetitions.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(place(std::hint::black_box(p)));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// `clasp bench place`: `{"ops_10_workers_100_ms": .., "ops_100_workers_1000_ms": ..}`.
pub fn run(repetitions: usize) -> serde_json::Value {
    let small = median_ms(&problem(10, 100), repetitions);
    let large = median_ms(&problem(100, 1000), repetitions.div_ceil(10));
    serde_json::json!({"ops_10_workers_100_ms": small, "ops_100_workers_1000_ms": large})
}
