//! Fig. 14: the Burst and Gradual input patterns (seeded, same total volume) run through the
//! whole loop — Table 2 metrics every interval, triggers, load derivation, a policy's decision,
//! key-group migration with pauses — for each policy, reporting throughput, p50/p95 latency and
//! worker-seconds.

use serde_json::{Value, json};

use super::engine::Cluster;
use super::experiments::{mean_sd, par_map};
use super::lab::{Lab, SIM_SATURATION_QUEUE_DEPTH, SIM_SATURATION_WAIT_US, SimSettings};
use super::rng::SimRng;
use crate::app::AppModel;
use crate::baselines::{Observed, Policy, PolicyKind, policy};
use crate::estimator::SaturatedPoint;
use crate::metrics::{SaturationConfig, SaturationDetector, aggregate, projection_factor};
use crate::migration::{KEY_GROUPS_PER_OPERATOR, initial_routing, reassign};
use crate::scaling::{Explanation, TriggerConfig, Triggers};

/// Stage length bounds of both patterns (µs), as the paper's 5–10 s.
pub const STAGE_MIN_US: f64 = 5_000_000.0;
pub const STAGE_MAX_US: f64 = 10_000_000.0;
/// Window over which λ and Λ are averaged for the triggers and the projection (intervals).
pub const RATE_WINDOW_INTERVALS: usize = 4;
/// A window is steady (feeds the per-input profile) when Λ is within this fraction of λ.
pub const PROFILE_STEADY_TOLERANCE: f64 = 0.05;
/// Weight of a steady window in the per-input profile.
pub const PROFILE_SMOOTHING: f64 = 0.2;
/// Extra time after the pattern for the backlog to drain before throughput is counted (µs).
pub const DRAIN_US: f64 = 2_000_000.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Burst,
    Gradual,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Burst => "burst",
            Pattern::Gradual => "gradual",
        }
    }
}

/// Stages as (fraction of the maximum rate, duration µs). Gradual: 10%→100%→10% in 10% steps;
/// Burst: alternating low (10–30%) and high (70–100%) stages until the same volume.
pub fn stages(pattern: Pattern, seed: u64) -> Vec<(f64, f64)> {
    let mut rng = SimRng::new(seed ^ 0x005E_ED0F_5EED);
    let dur = |rng: &mut SimRng| STAGE_MIN_US + rng.uniform() * (STAGE_MAX_US - STAGE_MIN_US);
    let mut gradual = Vec::new();
    for i in (1..=10).chain((1..10).rev()) {
        gradual.push((i as f64 / 10.0, dur(&mut rng)));
    }
    if pattern == Pattern::Gradual {
        return gradual;
    }
    let volume: f64 = gradual.iter().map(|(r, d)| r * d).sum();
    let mut burst = Vec::new();
    let mut acc = 0.0;
    let mut high = false;
    while acc < volume {
        let r = if high {
            0.7 + 0.3 * rng.uniform()
        } else {
            0.1 + 0.2 * rng.uniform()
        };
        let mut d = dur(&mut rng);
        if acc + r * d > volume {
            d = (volume - acc) / r;
        }
        acc += r * d;
        burst.push((r, d));
        high = !high;
    }
    burst
}

/// One policy's run.
#[derive(Clone, Debug, Default)]
pub struct E2eResult {
    pub throughput_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub worker_seconds: f64,
    pub decisions: Vec<String>,
    /// (t_s, input_per_s, throughput_per_s, workers)
    pub timeline: Vec<(f64, f64, f64, usize)>,
}

fn run_policy(
    lab: &mut Lab<'_>,
    kind: PolicyKind,
    pattern: &[(f64, f64)],
    t_max: f64,
    seed: u64,
) -> E2eResult {
    let settings = lab.settings;
    let big_n = settings.workers;
    let iv = settings.cluster.interval_us;
    let mut pol: Box<dyn Policy> = policy(kind);
    let first_rate = pattern[0].0 * t_max;
    let mut problem = lab.problem_at(first_rate, settings.headroom);
    problem.max_workers = big_n;
    // Warm start (the paper's 10 000-request warm-up): the policy's first answer.
    let ff_init = lab
        .max_throughput(&lab.shares_for(PolicyKind::FaasFlow, big_n), big_n, false)
        .0;
    let mut ff_per_worker = ff_init / big_n as f64;
    let observed = |n: usize, per: f64, target: f64| Observed {
        workers: n,
        saturated_throughput_per_s: per * n as f64,
        target_rate_per_s: target,
    };
    let d = pol.decide(&problem, Some(&observed(big_n, ff_per_worker, first_rate)));
    let mut workers = d.placement.workers;
    let mut cluster = Cluster::new(
        lab.app,
        settings.cluster.clone(),
        big_n,
        &d.placement.shares,
        seed,
    );
    let mut routing = initial_routing(&d.placement.shares, KEY_GROUPS_PER_OPERATOR);
    let mut triggers = Triggers::new(TriggerConfig::default(), first_rate);
    let mut det = SaturationDetector::new(SaturationConfig {
        queue_depth: SIM_SATURATION_QUEUE_DEPTH,
        wait_us: SIM_SATURATION_WAIT_US,
        ..SaturationConfig::default()
    });
    let mut res = E2eResult::default();
    // Per-input load profile (N_o/Λ, E/Λ), refreshed from steady windows only: root
    // completions lag the input by the pipeline's depth under a backlog and right after a
    // migration, and s = λ/Λ over such a window projects nonsense (see docs/controlplane.md).
    let mut profile = lab.profile.clone();
    let mut last_migration_us = f64::NEG_INFINITY;
    let mut window: std::collections::VecDeque<(Vec<crate::metrics::WorkerSample>, f64, f64)> =
        Default::default();
    let total_us: f64 = pattern.iter().map(|p| p.1).sum();
    let (mut t, mut stage, mut stage_end) = (0.0, 0usize, pattern[0].1);
    cluster.set_input_rate(first_rate);
    while t < total_us + DRAIN_US {
        t += iv;
        if t < total_us {
            while t > stage_end && stage + 1 < pattern.len() {
                stage += 1;
                stage_end += pattern[stage].1;
                cluster.set_input_rate(pattern[stage].0 * t_max);
            }
        } else {
            cluster.set_input_rate(0.0);
        }
        cluster.run_until(t);
        let (samples, planner) = cluster.take_samples(iv);
        for s in &samples {
            if det.observe(s) && kind == PolicyKind::Clasp {
                lab.estimator.observe(SaturatedPoint::from(s));
            }
        }
        res.timeline.push((
            t / 1e6,
            planner.input_per_s,
            planner.throughput_per_s,
            workers,
        ));
        window.push_back((samples, planner.input_per_s, planner.throughput_per_s));
        if window.len() > RATE_WINDOW_INTERVALS {
            window.pop_front();
        }
        if t >= total_us {
            continue;
        }
        let k = window.len() as f64;
        let lam = window.iter().map(|w| w.1).sum::<f64>() / k;
        let big_lambda = window.iter().map(|w| w.2).sum::<f64>() / k;
        if big_lambda < 0.95 * lam {
            ff_per_worker = big_lambda / workers as f64;
        }
        let steady = window.len() == RATE_WINDOW_INTERVALS
            && t - last_migration_us > RATE_WINDOW_INTERVALS as f64 * iv
            && lam > 0.0
            && (big_lambda - lam).abs() <= PROFILE_STEADY_TOLERANCE * lam;
        if steady {
            let all: Vec<_> = window.iter().flat_map(|w| w.0.iter().cloned()).collect();
            let agg = aggregate(&all, lab.names.len(), lab.edges.len());
            let per_input = 1.0 / (k * big_lambda);
            let mix = |old: &mut Vec<f64>, new: &[f64], scale: f64| {
                for (o, n) in old.iter_mut().zip(new) {
                    *o = (1.0 - PROFILE_SMOOTHING) * *o + PROFILE_SMOOTHING * n * scale;
                }
            };
            mix(
                &mut profile.processed_per_s,
                &agg.processed_per_s,
                per_input,
            );
            mix(&mut profile.edges_per_s, &agg.edges_per_s, per_input);
            mix(&mut profile.exec_us, &agg.exec_us, 1.0);
        }
        let Some(trig) = triggers.observe(t as u64, lam, big_lambda) else {
            continue;
        };
        let s = projection_factor(lam, big_lambda);
        let ctx = crate::metrics::DerivationContext {
            operator_names: &lab.names,
            edges: &lab.edges,
            capacity_us_per_s: lab.estimator.capacity_us_per_s().unwrap_or(1e6),
            headroom: settings.headroom,
            costs: lab.estimator.costs(),
            max_workers: big_n,
            slots_per_worker: crate::model::DEFAULT_SLOTS_PER_WORKER,
        };
        let problem = crate::metrics::derive_problem(&ctx, &profile, lam);
        let d = pol.decide(&problem, Some(&observed(workers, ff_per_worker, lam)));
        let new_routing = reassign(&routing, &d.placement.shares);
        let moved = cluster.migrate(&d.placement.shares);
        last_migration_us = t;
        det.reset();
        lab.estimator.reset_covariance();
        let exp = Explanation {
            policy: kind.name().into(),
            trigger: format!("{}(s={s:.2})", trig.name()),
            rate_per_s: lam,
            projected_demand_us_per_s: problem.total_demand_us_per_s(),
            capacity_us_per_s: problem.capacity_us_per_s,
            costs: problem.costs,
            workers_before: workers,
            workers_after: d.placement.workers,
            parallelism: Vec::new(),
            key_groups_moved: moved,
        };
        res.decisions
            .push(format!("t_s={:.2} {}", t / 1e6, exp.line()));
        routing = new_routing;
        workers = d.placement.workers;
        triggers.planned(lam);
    }
    res.throughput_per_s = cluster.total_completed as f64 / (total_us / 1e6);
    res.latency_p50_ms = cluster.latency.quantile_us(0.5) / 1e3;
    res.latency_p95_ms = cluster.latency.quantile_us(0.95) / 1e3;
    res.worker_seconds = cluster.busy_worker_us / 1e6;
    res
}

/// One app's e2e runs, one per compared policy (seed of the first run).
pub type AppRuns = (String, Vec<E2eResult>);

/// The e2e experiment for one pattern: every compared policy, every app, every seed.
pub fn e2e(
    settings: &SimSettings,
    apps: &[AppModel],
    pattern: Pattern,
) -> (Value, Vec<String>, Vec<AppRuns>) {
    let kinds = PolicyKind::COMPARED;
    let per = par_map(apps, &settings.seeds, |app, seed| {
        let mut base = Lab::new(app, settings, seed);
        base.calibrate();
        let t_max = {
            let sh = base.shares_for(PolicyKind::Clasp, settings.workers);
            base.max_throughput(&sh, settings.workers, false).0
        };
        let pat = stages(pattern, seed);
        kinds
            .iter()
            .map(|&k| {
                let mut lab = Lab::new(app, settings, seed);
                lab.estimator = base.estimator.clone();
                lab.profile = base.profile.clone();
                run_policy(&mut lab, k, &pat, t_max, seed)
            })
            .collect::<Vec<_>>()
    });
    let mut results = serde_json::Map::new();
    let mut csv = vec![
        "app,policy,throughput_per_s,throughput_sd,latency_p50_ms,latency_p95_ms,worker_seconds,worker_seconds_sd"
            .to_string(),
    ];
    let mut first_runs = Vec::new();
    for (ki, k) in kinds.iter().enumerate() {
        let mut m = serde_json::Map::new();
        for (ai, app) in apps.iter().enumerate() {
            let rs: Vec<&E2eResult> = per[ai].iter().map(|v| &v[ki]).collect();
            let f =
                |g: fn(&E2eResult) -> f64| mean_sd(&rs.iter().map(|r| g(r)).collect::<Vec<_>>());
            let (thr, thr_sd) = f(|r| r.throughput_per_s);
            let (p50, _) = f(|r| r.latency_p50_ms);
            let (p95, _) = f(|r| r.latency_p95_ms);
            let (ws, ws_sd) = f(|r| r.worker_seconds);
            m.insert(
                app.name.clone(),
                json!({"throughput_per_s": thr, "throughput_spread_sd": thr_sd, "latency_p50_ms": p50,
                       "latency_p95_ms": p95, "worker_seconds": ws, "worker_seconds_spread_sd": ws_sd,
                       "decisions_seed0": rs[0].decisions.len()}),
            );
            csv.push(format!(
                "{},{},{thr:.1},{thr_sd:.1},{p50:.2},{p95:.2},{ws:.1},{ws_sd:.1}",
                app.name,
                k.name()
            ));
        }
        results.insert(k.name().to_string(), Value::Object(m));
    }
    for (ai, app) in apps.iter().enumerate() {
        first_runs.push((app.name.clone(), per[ai][0].clone()));
    }
    let v = json!({"experiment": "e2e", "pattern": pattern.name(), "workers": settings.workers,
                   "seeds": settings.seeds, "results": results});
    (v, csv, first_runs)
}
