//! The cluster simulator and the paper's experiments on it.
//!
//! Why a simulator: ten- and thousand-worker experiments do not fit on a 2-core machine, and
//! the planner's algorithms are pure, so the same code can be driven by a modelled cluster.
//! Why it is not the planner's formula in disguise: see [`engine`] — costs land on threads,
//! capacity emerges from queueing, the estimator starts from priors ~3× off and learns only
//! from saturated samples, and the observed optimum comes from simulating every worker count.

pub mod costs;
pub mod e2e;
pub mod engine;
pub mod experiments;
mod histogram;
mod inbox;
pub mod lab;
pub mod plot;
pub mod rng;

use std::path::Path;

use serde_json::{Value, json};

use crate::app::AppModel;
use crate::exact::{DEFAULT_GRID_STEPS, place_exact};
use crate::model::{
    CostModel, EdgeLoad, OperatorLoad, PAPER_CAPACITY_US_PER_S, PAPER_COSTS, Problem, worker_loads,
};
use crate::placement::place;
use clasp_protocol::rng::SimRng;
pub use lab::SimSettings;

/// Seeds averaged by default.
pub const DEFAULT_SEEDS: [u64; 3] = [1, 2, 3];
/// Workers by default (the paper's testbed).
pub const DEFAULT_WORKERS: usize = 10;
/// The most workers `--workers` accepts.
pub const MAX_WORKERS: usize = 1000;
/// Random instances of the gap experiment.
pub const GAP_INSTANCES: usize = 200;

/// Which experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    Placement,
    WorkerCount,
    E2e(e2e::Pattern),
    Gap,
}

/// An experiment's results: its summary JSON, its CSV rows, and what its plots are drawn from.
pub struct Simulated {
    /// The experiment's file name stem (`placement`, `e2e-burst`, …).
    pub name: String,
    /// The summary JSON.
    pub summary: Value,
    csv: Vec<String>,
    plots: Plots,
}

/// What an experiment's plots and extra files are made of.
enum Plots {
    Placement,
    WorkerCount,
    E2e(Vec<e2e::AppRuns>),
    None,
}

/// Runs an experiment, writes `<name>.csv`, `<name>.json` and plots into `out` (if given),
/// and returns the summary JSON.
pub fn run(
    exp: Experiment,
    settings: &SimSettings,
    apps: &[AppModel],
    out: Option<&Path>,
) -> std::io::Result<Value> {
    let sim = simulate(exp, settings, apps);
    if let Some(d) = out {
        write(&sim, apps, d)?;
    }
    Ok(sim.summary)
}

/// Runs an experiment (nothing written).
pub fn simulate(exp: Experiment, settings: &SimSettings, apps: &[AppModel]) -> Simulated {
    let (name, summary, csv, plots) = match exp {
        Experiment::Placement => {
            let (v, c) = experiments::placement(settings, apps);
            ("placement".to_string(), v, c, Plots::Placement)
        }
        Experiment::WorkerCount => {
            let (v, c) = experiments::worker_count(settings, apps);
            ("worker-count".to_string(), v, c, Plots::WorkerCount)
        }
        Experiment::E2e(p) => {
            let (v, c, runs) = e2e::e2e(settings, apps, p);
            (format!("e2e-{}", p.name()), v, c, Plots::E2e(runs))
        }
        Experiment::Gap => {
            let (v, c) = gap(settings.seeds.first().copied().unwrap_or(1), GAP_INSTANCES);
            ("gap".to_string(), v, c, Plots::None)
        }
    };
    Simulated {
        name,
        summary,
        csv,
        plots,
    }
}

/// Writes an experiment's `<name>.csv`, `<name>.json` and plots into `d` (made if missing).
pub fn write(sim: &Simulated, apps: &[AppModel], d: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(d)?;
    let (name, v) = (&sim.name, &sim.summary);
    match &sim.plots {
        Plots::Placement => plot::placement_bars(&d.join("placement.svg"), v, apps)?,
        Plots::WorkerCount => plot::worker_count(&d.join("worker-count.svg"), v)?,
        Plots::E2e(runs) => {
            plot::e2e_timelines(&d.join(format!("{name}-timeline.svg")), runs)?;
            let mut tl = vec!["app,policy,t_s,input_per_s,throughput_per_s,workers".to_string()];
            let mut log = Vec::new();
            for (app, rs) in runs {
                for r in rs {
                    for &(t, i, th, w) in &r.timeline {
                        tl.push(format!("{app},{},{t:.2},{i:.1},{th:.1},{w}", r.policy));
                    }
                    log.extend(r.decisions.iter().map(|d| format!("app={app} {d}")));
                }
            }
            std::fs::write(d.join(format!("{name}-timeline.csv")), tl.join("\n") + "\n")?;
            std::fs::write(
                d.join(format!("{name}-decisions.log")),
                log.join("\n") + "\n",
            )?;
        }
        Plots::None => {}
    }
    std::fs::write(d.join(format!("{name}.csv")), sim.csv.join("\n") + "\n")?;
    std::fs::write(
        d.join(format!("{name}.json")),
        serde_json::to_string_pretty(v)? + "\n",
    )
}

/// A random small instance (≤ 4 operators, chain or fork-join, ≤ 3 workers' worth of demand).
pub fn random_instance(rng: &mut SimRng) -> Problem {
    let n = 2 + rng.below(3);
    let b = PAPER_CAPACITY_US_PER_S * crate::model::DEFAULT_HEADROOM;
    let mut ops = Vec::new();
    for i in 0..n {
        let exec_us = 100.0 + 700.0 * rng.uniform();
        let demand = b * (0.1 + 0.7 * rng.uniform());
        ops.push(OperatorLoad {
            name: format!("o{i}"),
            demand_us_per_s: demand,
            rate_per_s: demand / exec_us,
            exec_us,
        });
    }
    let mut edges = Vec::new();
    for i in 1..n {
        let from = if i >= 2 && rng.uniform() < 0.3 {
            i - 2
        } else {
            i - 1
        };
        let fanout = 0.5 + 3.0 * rng.uniform();
        edges.push(EdgeLoad {
            from,
            to: i,
            rate_per_s: ops[from].rate_per_s * fanout,
        });
    }
    Problem {
        capacity_us_per_s: PAPER_CAPACITY_US_PER_S,
        headroom: crate::model::DEFAULT_HEADROOM,
        costs: CostModel { ..PAPER_COSTS },
        max_workers: 3,
        slots_per_worker: crate::model::DEFAULT_SLOTS_PER_WORKER,
        operators: ops,
        edges,
        packing: crate::placement::Packing::default(),
        beta_receiver_share: 0.0,
        worker_headroom: Vec::new(),
    }
}

/// The heuristic's gap to the exact reference and to ⌈ΣD̃/B⌉ over random small instances.
pub fn gap(seed: u64, instances: usize) -> (Value, Vec<String>) {
    let mut rng = SimRng::new(seed);
    let mut csv =
        vec!["instance,clasp_workers,exact_workers,lower_bound,clasp_feasible".to_string()];
    let (mut compared, mut gap_sum, mut worse, mut better, mut lb_gap_sum) =
        (0usize, 0i64, 0, 0, 0i64);
    let mut infeasible = 0;
    for i in 0..instances {
        let p = random_instance(&mut rng);
        let h = place(&p);
        let Ok(x) = place_exact(&p, DEFAULT_GRID_STEPS) else {
            continue;
        };
        if h.saturated || x.saturated {
            continue;
        }
        let loads = worker_loads(&p, &h.shares, h.workers);
        let ok = loads
            .iter()
            .all(|&l| l <= p.budget_us_per_s() * (1.0 + 1e-9));
        infeasible += usize::from(!ok);
        let lb = p.lower_bound_workers();
        compared += 1;
        let g = h.workers as i64 - x.workers as i64;
        gap_sum += g;
        worse += usize::from(g > 0);
        better += usize::from(g < 0);
        lb_gap_sum += h.workers as i64 - lb as i64;
        csv.push(format!("{i},{},{},{lb},{ok}", h.workers, x.workers));
    }
    let c = compared.max(1) as f64;
    let v = json!({
        "experiment": "gap", "instances": compared, "grid_steps": DEFAULT_GRID_STEPS,
        "mean_gap_to_exact_workers": gap_sum as f64 / c,
        "instances_heuristic_worse": worse, "instances_heuristic_better_than_grid": better,
        "mean_gap_to_lower_bound_workers": lb_gap_sum as f64 / c,
        "heuristic_placements_infeasible": infeasible,
    });
    (v, csv)
}
