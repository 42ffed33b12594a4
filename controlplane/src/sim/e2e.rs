//! Fig. 14: the Burst and Gradual input patterns (seeded, same total volume) run through the
//! whole loop — Table 2 metrics every interval, triggers, load derivation, a policy's decision,
//! key-group migration with pauses — for each policy, reporting throughput, p50/p95 latency and
//! worker-seconds.
//!
//! The loop itself is [`crate::autoscale::Autoscaler`], the code the live planner runs; this
//! module only feeds it the simulated cluster's metrics and carries out its decisions.

use serde_json::{Value, json};

use super::engine::Cluster;
use super::experiments::{mean_sd, par_map};
use super::lab::{Lab, SIM_SATURATION_QUEUE_DEPTH, SIM_SATURATION_WAIT_US, SimSettings};
use crate::app::AppModel;
use crate::autoscale::{AutoscaleConfig, Autoscaler};
use crate::baselines::PolicyKind;
use crate::estimator::EstimatorKind;
use crate::metrics::SaturationConfig;
pub use crate::pattern::PaperPattern as Pattern;
pub use crate::pattern::{STAGE_MAX_US, STAGE_MIN_US, stages};

/// Extra time after the pattern for the backlog to drain before throughput is counted (µs).
pub const DRAIN_US: f64 = 2_000_000.0;

/// The name of CLASP's run with the latency target (`SimSettings::latency_target_ms`).
pub const CLASP_TARGET: &str = "clasp+target";

/// One policy's run.
#[derive(Clone, Debug, Default)]
pub struct E2eResult {
    /// The policy's name, `clasp+target` for CLASP with the latency target.
    pub policy: String,
    pub throughput_per_s: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    pub worker_seconds: f64,
    /// Roots completed by the end of the drain over roots admitted.
    pub completed_fraction: f64,
    /// Inputs refused at a full input queue over inputs offered (0 with unbounded queues).
    pub lost_fraction: f64,
    /// Seconds of the pattern during which some active worker was saturated (mean queue
    /// above the saturation depth or mean wait above the saturation wait of the sim).
    pub saturated_s: f64,
    /// Mean over the pattern's intervals of the active workers' mean headroom h_w (h without
    /// the latency target).
    pub headroom_mean: f64,
    pub decisions: Vec<String>,
    /// (t_s, input_per_s, throughput_per_s, workers)
    pub timeline: Vec<(f64, f64, f64, usize)>,
}

fn run_policy(
    lab: &mut Lab<'_>,
    kind: PolicyKind,
    latency_target_ms: Option<f64>,
    pattern: &[(f64, f64)],
    t_max: f64,
    seed: u64,
) -> E2eResult {
    let settings = lab.settings;
    let big_n = settings.workers;
    let iv = settings.cluster.interval_us;
    let first_rate = pattern[0].0 * t_max;
    // Warm start (the paper's 10 000-request warm-up): FaaSFlow's per-worker throughput from
    // its own placement saturated on every worker.
    let ff_init = lab
        .max_throughput(&lab.shares_for(PolicyKind::FaasFlow, big_n), big_n, false)
        .0;
    let cfg = AutoscaleConfig {
        headroom: settings.headroom,
        interval_us: iv,
        saturation: SaturationConfig {
            queue_depth: SIM_SATURATION_QUEUE_DEPTH,
            wait_us: SIM_SATURATION_WAIT_US,
            ..SaturationConfig::default()
        },
        saturated_throughput_per_worker_prior_per_s: Some(ff_init / big_n as f64),
        // The experiment reproduces the saturated method as calibrated by the lab.
        estimator_kind: EstimatorKind::Saturated,
        executors_per_worker: settings.cluster.executors,
        packing: settings.packing,
        beta_receiver_share: 0.0,
        latency_target_ms,
        ..AutoscaleConfig::new(kind, big_n)
    };
    // The estimator and the per-input profile as calibration left them (§5.3).
    let mut auto = Autoscaler::new(lab.app, cfg, lab.estimator.costs(), first_rate)
        .with_estimator(lab.estimator.clone())
        .with_profile(lab.profile.clone());
    let d = auto.initial();
    let mut cluster = Cluster::new(lab.app, settings.cluster.clone(), big_n, &d.shares, seed);
    let parallelism = |d: &crate::autoscale::ScaleDecision| {
        settings.apply_parallelism.then(|| d.parallelism.clone())
    };
    cluster.set_parallelism(parallelism(&d).as_deref());
    let mut res = E2eResult {
        policy: match latency_target_ms {
            Some(_) => CLASP_TARGET.to_string(),
            None => kind.name().to_string(),
        },
        ..E2eResult::default()
    };
    let (mut headroom_sum, mut intervals) = (0.0, 0usize);
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
        res.timeline.push((
            t / 1e6,
            planner.input_per_s,
            planner.throughput_per_s,
            auto.workers(),
        ));
        // The pattern is over: the backlog drains on the last configuration.
        if t >= total_us {
            continue;
        }
        if samples.iter().any(|s| {
            s.queue_mean > SIM_SATURATION_QUEUE_DEPTH || s.wait_mean_us > SIM_SATURATION_WAIT_US
        }) {
            res.saturated_s += iv / 1e6;
        }
        headroom_sum += mean_headroom(&auto, settings.headroom);
        intervals += 1;
        if let Some(d) = auto.on_interval(t, &samples, &planner) {
            cluster.migrate(&d.shares);
            cluster.set_parallelism(parallelism(&d).as_deref());
            auto.migrated(t);
            res.decisions
                .push(format!("t_s={:.2} {}", t / 1e6, d.explanation));
        }
    }
    res.throughput_per_s = cluster.total_completed as f64 / (total_us / 1e6);
    res.latency_p50_ms = cluster.latency.quantile_us(0.5) / 1e3;
    res.latency_p95_ms = cluster.latency.quantile_us(0.95) / 1e3;
    res.latency_p99_ms = cluster.latency.quantile_us(0.99) / 1e3;
    res.headroom_mean = headroom_sum / intervals.max(1) as f64;
    res.worker_seconds = cluster.busy_worker_us / 1e6;
    res.completed_fraction = cluster.total_completed as f64 / cluster.total_admitted.max(1) as f64;
    let offered = cluster.total_admitted + cluster.total_lost;
    res.lost_fraction = cluster.total_lost as f64 / offered.max(1) as f64;
    res
}

/// The active workers' mean headroom h_w (`h` without the latency target).
fn mean_headroom(auto: &Autoscaler, h: f64) -> f64 {
    let hs = auto.worker_headrooms();
    let n = auto.workers().min(hs.len());
    if n == 0 {
        return h;
    }
    hs[..n].iter().sum::<f64>() / n as f64
}

/// One app's e2e runs, one per compared policy (seed of the first run).
pub type AppRuns = (String, Vec<E2eResult>);

/// The e2e experiment for one pattern: every compared policy, every app, every seed.
pub fn e2e(
    settings: &SimSettings,
    apps: &[AppModel],
    pattern: Pattern,
) -> (Value, Vec<String>, Vec<AppRuns>) {
    // The compared policies, then CLASP with the latency target when there is one.
    let mut runs: Vec<(PolicyKind, Option<f64>)> =
        PolicyKind::COMPARED.iter().map(|&k| (k, None)).collect();
    if let Some(ms) = settings.latency_target_ms {
        runs.push((PolicyKind::Clasp, Some(ms)));
    }
    let per = par_map(apps, &settings.seeds, |app, seed| {
        let mut base = Lab::new(app, settings, seed);
        base.calibrate();
        let t_max = {
            let sh = base.shares_for(PolicyKind::Clasp, settings.workers);
            base.max_throughput(&sh, settings.workers, false).0
        };
        let pat = stages(pattern, seed);
        runs.iter()
            .map(|&(k, target)| {
                let mut lab = Lab::new(app, settings, seed);
                lab.estimator = base.estimator.clone();
                lab.profile = base.profile.clone();
                run_policy(&mut lab, k, target, &pat, t_max, seed)
            })
            .collect::<Vec<_>>()
    });
    let mut results = serde_json::Map::new();
    let mut csv = vec![
        "app,policy,throughput_per_s,throughput_sd,latency_p50_ms,latency_p95_ms,worker_seconds,worker_seconds_sd,lost_fraction,saturated_s,latency_p99_ms"
            .to_string(),
    ];
    let mut first_runs = Vec::new();
    for (ki, &(k, target)) in runs.iter().enumerate() {
        let name = if target.is_some() {
            CLASP_TARGET
        } else {
            k.name()
        };
        let mut m = serde_json::Map::new();
        for (ai, app) in apps.iter().enumerate() {
            let rs: Vec<&E2eResult> = per[ai].iter().map(|v| &v[ki]).collect();
            let f =
                |g: fn(&E2eResult) -> f64| mean_sd(&rs.iter().map(|r| g(r)).collect::<Vec<_>>());
            let (thr, thr_sd) = f(|r| r.throughput_per_s);
            let (p50, _) = f(|r| r.latency_p50_ms);
            let (p95, _) = f(|r| r.latency_p95_ms);
            let (p99, _) = f(|r| r.latency_p99_ms);
            let (headroom, _) = f(|r| r.headroom_mean);
            let (ws, ws_sd) = f(|r| r.worker_seconds);
            let (done, _) = f(|r| r.completed_fraction);
            let (lost, _) = f(|r| r.lost_fraction);
            let (sat, _) = f(|r| r.saturated_s);
            m.insert(
                app.name.clone(),
                json!({"throughput_per_s": thr, "throughput_spread_sd": thr_sd, "latency_p50_ms": p50,
                       "latency_p95_ms": p95, "latency_p99_ms": p99, "headroom_mean": headroom,
                       "worker_seconds": ws, "worker_seconds_spread_sd": ws_sd,
                       "completed_fraction": done, "lost_fraction": lost, "saturated_s": sat,
                       "decisions_seed0": rs[0].decisions.len()}),
            );
            csv.push(format!(
                "{},{},{thr:.1},{thr_sd:.1},{p50:.2},{p95:.2},{ws:.1},{ws_sd:.1},{lost:.5},{sat:.2},{p99:.2}",
                app.name,
                name
            ));
        }
        results.insert(name.to_string(), Value::Object(m));
    }
    for (ai, app) in apps.iter().enumerate() {
        first_runs.push((app.name.clone(), per[ai][0].clone()));
    }
    let v = json!({"experiment": "e2e", "pattern": pattern.name(), "workers": settings.workers,
                   "seeds": settings.seeds, "parallelism_applied": settings.apply_parallelism,
                   "input_queue_bound": settings.cluster.input_queue_bound,
                   "packing": settings.packing.name(),
                   "latency_target_ms": settings.latency_target_ms, "results": results});
    (v, csv, first_runs)
}
