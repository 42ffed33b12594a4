//! The placement and worker-count experiments on the simulated cluster.
//! Each returns a serde_json summary and CSV rows; `sim::run` writes them and draws the plots.

use serde_json::{Value, json};

use super::lab::{Lab, SimSettings, Window};
use crate::app::AppModel;
use crate::baselines::faasflow::faasflow_workers;
use crate::baselines::zhang24::{Zhang24, mean_instances};
use crate::baselines::{Observed, PolicyKind};
use crate::placement::place;

/// The rate levels of the worker-count experiment: 10%..100% of CLASP's maximum on N workers.
pub const LEVELS: usize = 10;
/// Above this many workers the observed optimum is found by bisection on n, not by trying all.
pub const EXHAUSTIVE_WORKERS_MAX: usize = 32;

pub(crate) fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
    (m, v.sqrt())
}

/// Runs `f` over every (app, seed) pair on two threads, results in input order.
pub(crate) fn par_map<T: Send>(
    apps: &[AppModel],
    seeds: &[u64],
    f: impl Fn(&AppModel, u64) -> T + Sync,
) -> Vec<Vec<T>> {
    let jobs: Vec<(usize, usize)> = (0..apps.len())
        .flat_map(|a| (0..seeds.len()).map(move |s| (a, s)))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 2);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<T>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(a, k)) = jobs.get(i) else { break };
                    let r = f(&apps[a], seeds[k]);
                    *results[i].lock().expect("no poisoned job") = Some(r);
                }
            });
        }
    });
    let mut flat = results
        .into_iter()
        .map(|m| m.into_inner().expect("no poison").expect("job ran"));
    apps.iter()
        .map(|_| {
            (0..seeds.len())
                .map(|_| flat.next().expect("one per job"))
                .collect()
        })
        .collect()
}

/// Each policy's throughput on N workers with unthrottled input.
pub fn placement(settings: &SimSettings, apps: &[AppModel]) -> (Value, Vec<String>) {
    let policies = [PolicyKind::Clasp, PolicyKind::FaasFlow, PolicyKind::Zhang24];
    let n = settings.workers;
    let per = par_map(apps, &settings.seeds, |app, seed| {
        let mut lab = Lab::new(app, settings, seed);
        lab.calibrate();
        policies.map(|k| {
            let shares = lab.shares_for(k, n);
            lab.max_throughput(&shares, n, false).0
        })
    });
    let mut results = serde_json::Map::new();
    let mut csv = vec!["app,policy,throughput_per_s_mean,throughput_per_s_sd".to_string()];
    for (pi, k) in policies.iter().enumerate() {
        let mut m = serde_json::Map::new();
        for (ai, app) in apps.iter().enumerate() {
            let xs: Vec<f64> = per[ai].iter().map(|r| r[pi]).collect();
            let (mean, sd) = mean_sd(&xs);
            m.insert(
                app.name.clone(),
                json!({"throughput_per_s": mean, "spread_sd": sd}),
            );
            csv.push(format!("{},{},{mean:.1},{sd:.1}", app.name, k.name()));
        }
        results.insert(k.name().to_string(), Value::Object(m));
    }
    let v = json!({"experiment": "placement", "workers": n, "seeds": settings.seeds,
                   "packing": settings.packing.name(), "results": results});
    (v, csv)
}

/// One (app, seed) of the worker-count experiment: predictions per policy for every
/// (source, target) level pair, and the observed optimum per level.
struct WcRun {
    /// OOWC(1): the fewest workers whose observed maximum meets each level.
    oowc: Vec<usize>,
    /// OOWC(h) at the experiment's headroom h: the fewest n with `h·max(n) ≥` the level.
    oowc_h: Vec<usize>,
    /// [policy][source][target] predicted workers (policy order: clasp, faasflow, zhang24, clasp@0.9).
    pred: Vec<Vec<Vec<usize>>>,
    /// Observed maximum throughput per worker count (best placement), index n-1.
    best_throughput: Vec<f64>,
    wbar: f64,
    costs: [f64; 3],
}

impl WcRun {
    /// The observed optimum a column is judged against.
    fn reference(&self, col: Column) -> &[usize] {
        if col.same_h { &self.oowc_h } else { &self.oowc }
    }
}

/// One column of the worker-count results: which prediction, against which optimum.
#[derive(Clone, Copy, Debug)]
struct Column {
    /// Index into `WcRun::pred`.
    pi: usize,
    /// Against OOWC(h) at the experiment's headroom (else OOWC(1)).
    same_h: bool,
}

/// The policies whose placements the worker-count experiment observes, in index order.
const OBSERVED_KINDS: [PolicyKind; 3] =
    [PolicyKind::Clasp, PolicyKind::FaasFlow, PolicyKind::Zhang24];

/// Observed maximum throughput of each policy's placement on n workers, each measured once.
#[derive(Default)]
struct ThroughputCache {
    /// `(policy index in OBSERVED_KINDS, n)` → throughput per second.
    measured: std::collections::BTreeMap<(usize, usize), f64>,
}

impl ThroughputCache {
    /// The observed maximum throughput of policy `ki`'s placement on `n` workers.
    fn get(&mut self, lab: &mut Lab<'_>, ki: usize, n: usize) -> f64 {
        if let Some(&t) = self.measured.get(&(ki, n)) {
            return t;
        }
        let shares = lab.shares_for(OBSERVED_KINDS[ki], n);
        let t = lab.max_throughput(&shares, n, false).0;
        self.measured.insert((ki, n), t);
        t
    }

    /// The best observed maximum throughput of any policy on `n` workers.
    fn best(&mut self, lab: &mut Lab<'_>, n: usize) -> f64 {
        (0..OBSERVED_KINDS.len())
            .map(|k| self.get(lab, k, n))
            .fold(0.0f64, f64::max)
    }
}

fn worker_count_run(settings: &SimSettings, app: &AppModel, seed: u64) -> WcRun {
    let big_n = settings.workers;
    let mut lab = Lab::new(app, settings, seed);
    lab.calibrate();
    let mut thr = ThroughputCache::default();
    let t_max = thr.get(&mut lab, 0, big_n);
    let levels: Vec<f64> = (1..=LEVELS)
        .map(|i| i as f64 / LEVELS as f64 * t_max)
        .collect();
    let (oowc, best) = observed_optimum(&mut lab, &mut thr, &levels, big_n, 1.0);
    let (oowc_h, _) = observed_optimum(&mut lab, &mut thr, &levels, big_n, settings.headroom);
    let pred = predictions(settings, &mut lab, &mut thr, &levels, &oowc);
    let c = lab.estimator.costs();
    WcRun {
        oowc,
        oowc_h,
        pred,
        best_throughput: best,
        wbar: lab.estimator.capacity_us_per_s().unwrap_or(0.0),
        costs: [c.alpha_us, c.beta_us, c.gamma_us],
    }
}

/// OOWC(h) from the best observed maximum throughput per worker count (`best[n-1]`): the
/// fewest n with `h·best[n-1] ≥ rate`, or all of them (`best.len()`) when none reaches it.
pub fn fewest_workers_at_headroom(best: &[f64], headroom: f64, rate_per_s: f64) -> usize {
    (1..=best.len())
        .find(|&n| headroom * best[n - 1] >= rate_per_s)
        .unwrap_or(best.len().max(1))
}

/// The observed optimal worker count per rate level at headroom h (the fewest workers on
/// which some policy reaches the level with h of its maximum: all counts tried up to
/// [`EXHAUSTIVE_WORKERS_MAX`], bisection above; N when none does), and the best throughput
/// per worker count probed on the way (index n-1, zero where not probed).
fn observed_optimum(
    lab: &mut Lab<'_>,
    thr: &mut ThroughputCache,
    levels: &[f64],
    big_n: usize,
    headroom: f64,
) -> (Vec<usize>, Vec<f64>) {
    let mut best = vec![0.0; big_n];
    let oowc: Vec<usize> = if big_n <= EXHAUSTIVE_WORKERS_MAX {
        for n in 1..=big_n {
            best[n - 1] = thr.best(lab, n);
        }
        levels
            .iter()
            .map(|&r| fewest_workers_at_headroom(&best, headroom, r))
            .collect()
    } else {
        levels
            .iter()
            .map(|&r| {
                let (mut lo, mut hi) = (1usize, big_n);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    let b = thr.best(lab, mid);
                    best[mid - 1] = b;
                    if headroom * b >= r {
                        hi = mid
                    } else {
                        lo = mid + 1
                    }
                }
                lo
            })
            .collect()
    };
    (oowc, best)
}

/// `[policy][source][target]` predicted workers (policy order: clasp, faasflow, zhang24,
/// clasp@0.9). The planner's view at each source level: the current configuration is the
/// observed optimum there, with CLASP's placement.
fn predictions(
    settings: &SimSettings,
    lab: &mut Lab<'_>,
    thr: &mut ThroughputCache,
    levels: &[f64],
    oowc: &[usize],
) -> Vec<Vec<Vec<usize>>> {
    let mut zhang = Zhang24::new(false);
    let mut pred = vec![vec![vec![0usize; LEVELS]; LEVELS]; 4];
    for (i, &src) in levels.iter().enumerate() {
        let n_src = oowc[i];
        let shares = lab.shares_for(PolicyKind::Clasp, n_src);
        let window = lab.observe_at(src, &shares, n_src);
        fit_zhang24(lab, &mut zhang, src, &window);
        let (agg, big_lambda) = (window.aggregate, window.throughput_per_s);
        let ff_sat = thr.get(lab, 1, n_src);
        for (j, &dst) in levels.iter().enumerate() {
            if i == j {
                continue;
            }
            let obs = Observed {
                workers: n_src,
                saturated_throughput_per_s: ff_sat,
                target_rate_per_s: dst,
            };
            let scale = dst / big_lambda.max(1e-9);
            let per_policy = predict_target(settings, lab, &zhang, &agg, scale, &obs);
            for (p, workers) in pred.iter_mut().zip(per_policy) {
                p[i][j] = workers;
            }
        }
    }
    pred
}

/// Zhang24's online r(p) fit: the scheduling fraction the workers measured in the window
/// observed at rate `src` (CPU time not spent executing operators over all busy time; never
/// the simulator's α, β, γ), at the parallelism Zhang24 computes for `src`.
fn fit_zhang24(lab: &Lab<'_>, zhang: &mut Zhang24, src: f64, window: &Window) {
    let par = zhang.parallelism(&lab.problem_at(src, 1.0));
    if let Some(p) = mean_instances(&par) {
        zhang
            .model
            .observe_times(p, window.scheduling_us_per_s, window.execution_us_per_s);
    }
}

/// Each policy's predicted workers for the target rate `scale`·Λ, re-derived from the source
/// window's aggregate `agg` (the live planner's path); order: clasp, faasflow, zhang24,
/// clasp@0.9. A saturated CLASP placement predicts all workers.
fn predict_target(
    settings: &SimSettings,
    lab: &Lab<'_>,
    zhang: &Zhang24,
    agg: &crate::metrics::Aggregate,
    scale: f64,
    obs: &Observed,
) -> [usize; 4] {
    let big_n = settings.workers;
    let lab_view = |h: f64| {
        let ctx = crate::metrics::DerivationContext {
            operator_names: &lab.names,
            edges: &lab.edges,
            capacity_us_per_s: lab.estimator.capacity_us_per_s().unwrap_or(1e6),
            headroom: h,
            costs: lab.estimator.costs(),
            max_workers: big_n,
            slots_per_worker: crate::model::DEFAULT_SLOTS_PER_WORKER,
        };
        crate::model::Problem {
            packing: settings.packing,
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
            ..crate::metrics::derive_problem(&ctx, agg, scale)
        }
    };
    let clasp_workers = |p: &crate::model::Problem| {
        let c = place(p);
        if c.saturated { big_n } else { c.workers }
    };
    let p1 = lab_view(settings.headroom);
    let clasp = clasp_workers(&p1);
    let faasflow = faasflow_workers(&p1, Some(obs));
    let zhang24 = zhang.shares_on(&p1, big_n).1;
    let clasp_09 = clasp_workers(&lab_view(crate::model::DEFAULT_HEADROOM));
    [clasp, faasflow, zhang24, clasp_09]
}

/// Predicted vs observed optimal worker count for every source → target pair.
pub fn worker_count(settings: &SimSettings, apps: &[AppModel]) -> (Value, Vec<String>) {
    let runs = par_map(apps, &settings.seeds, |app, seed| {
        worker_count_run(settings, app, seed)
    });
    // (name, prediction index, against OOWC(h) rather than OOWC(1)).
    let columns = [
        ("clasp", 0, true),
        ("clasp_vs_h1", 0, false),
        ("faasflow", 1, false),
        ("zhang24", 2, false),
        ("clasp_headroom_0.9", 3, false),
    ];
    let mut csv =
        vec!["app,seed,policy,source_pct,target_pct,predicted,observed_optimal".to_string()];
    let mut mae = serde_json::Map::new();
    let mut by_target = serde_json::Map::new();
    let mut by_gap = serde_json::Map::new();
    let mut by_dir = serde_json::Map::new();
    let mut mean_pred = serde_json::Map::new();
    for &(name, pi, same_h) in &columns {
        let col = Column { pi, same_h };
        let (per_app, errors) = policy_errors(settings, apps, &runs, col, name, &mut csv);
        mae.insert(name.to_string(), Value::Object(per_app));
        by_target.insert(name.to_string(), errors.mae_by_target());
        mean_pred.insert(name.to_string(), errors.mean_predicted_by_target());
        by_gap.insert(name.to_string(), errors.mae_by_gap());
        by_dir.insert(name.to_string(), errors.mae_by_direction());
    }
    let (oowc_mean, per_app_detail) = observed_detail(apps, &runs);
    let v = json!({
        "experiment": "worker-count",
        "packing": settings.packing.name(),
        "workers": settings.workers,
        "headroom": settings.headroom,
        "seeds": settings.seeds,
        "mae": mae,
        "mae_by_target": by_target,
        "mae_by_gap": by_gap,
        "mae_by_direction": by_dir,
        "mean_predicted_by_target": mean_pred,
        "mean_observed_optimal_by_target": oowc_mean,
        "apps": per_app_detail,
    });
    (v, csv)
}

/// One policy's absolute prediction errors (and predictions) over every run, grouped the ways
/// the figures slice them.
struct PolicyErrors {
    all: Vec<f64>,
    /// Indexed by target level.
    by_target: Vec<Vec<f64>>,
    /// Indexed by |source − target| in levels.
    by_gap: Vec<Vec<f64>>,
    up: Vec<f64>,
    down: Vec<f64>,
    up_signed: Vec<f64>,
    down_signed: Vec<f64>,
    /// Predicted workers, indexed by target level.
    predicted_by_target: Vec<Vec<f64>>,
}

impl PolicyErrors {
    fn new() -> Self {
        PolicyErrors {
            all: Vec::new(),
            by_target: vec![Vec::new(); LEVELS],
            by_gap: vec![Vec::new(); LEVELS],
            up: Vec::new(),
            down: Vec::new(),
            up_signed: Vec::new(),
            down_signed: Vec::new(),
            predicted_by_target: vec![Vec::new(); LEVELS],
        }
    }

    /// Records policy `pi`'s predictions of run `r` for every source ≠ target pair and returns
    /// that run's absolute errors (they join `all` via [`PolicyErrors::extend_all`]).
    fn add_run(&mut self, r: &WcRun, col: Column) -> Vec<f64> {
        let (pi, reference) = (col.pi, r.reference(col));
        let mut errs = Vec::new();
        for i in 0..LEVELS {
            for j in (0..LEVELS).filter(|&j| j != i) {
                let p = r.pred[pi][i][j] as f64;
                let o = reference[j] as f64;
                let e = (p - o).abs();
                errs.push(e);
                self.by_target[j].push(e);
                self.predicted_by_target[j].push(p);
                self.by_gap[i.abs_diff(j)].push(e);
                if j > i {
                    self.up.push(e);
                    self.up_signed.push(p - o);
                } else {
                    self.down.push(e);
                    self.down_signed.push(p - o);
                }
            }
        }
        errs
    }

    /// Adds one run's errors to the pooled ones.
    fn extend_all(&mut self, errs: Vec<f64>) {
        self.all.extend(errs);
    }

    /// `[{target_pct, mae}]` per target level.
    fn mae_by_target(&self) -> Value {
        json!(
            (0..LEVELS)
                .map(|j| json!({"target_pct": (j + 1) * 10, "mae": mean_sd(&self.by_target[j]).0}))
                .collect::<Vec<_>>()
        )
    }

    /// The mean predicted workers per target level.
    fn mean_predicted_by_target(&self) -> Value {
        json!(
            (0..LEVELS)
                .map(|j| mean_sd(&self.predicted_by_target[j]).0)
                .collect::<Vec<_>>()
        )
    }

    /// `[{gap_pct, mae}]` per nonzero gap between source and target level.
    fn mae_by_gap(&self) -> Value {
        json!(
            (1..LEVELS)
                .map(|g| json!({"gap_pct": g * 10, "mae": mean_sd(&self.by_gap[g]).0}))
                .collect::<Vec<_>>()
        )
    }

    /// Mean absolute and mean signed error of scaling up and of scaling down.
    fn mae_by_direction(&self) -> Value {
        json!({"up_mae": mean_sd(&self.up).0, "down_mae": mean_sd(&self.down).0,
               "up_mean_signed_error": mean_sd(&self.up_signed).0, "down_mean_signed_error": mean_sd(&self.down_signed).0})
    }
}

/// Column `col`'s errors over all apps and seeds: the per-app MAE (mean and spread over seeds,
/// plus `all` pooled) and the grouped errors; appends one CSV row per prediction.
fn policy_errors(
    settings: &SimSettings,
    apps: &[AppModel],
    runs: &[Vec<WcRun>],
    col: Column,
    name: &str,
    csv: &mut Vec<String>,
) -> (serde_json::Map<String, Value>, PolicyErrors) {
    let mut per_app = serde_json::Map::new();
    let mut errors = PolicyErrors::new();
    for (ai, app) in apps.iter().enumerate() {
        let mut seed_maes = Vec::new();
        for (si, r) in runs[ai].iter().enumerate() {
            let errs = errors.add_run(r, col);
            csv.extend(prediction_rows(&app.name, settings.seeds[si], name, r, col));
            seed_maes.push(mean_sd(&errs).0);
            errors.extend_all(errs);
        }
        let (m, sd) = mean_sd(&seed_maes);
        per_app.insert(app.name.clone(), json!(m));
        per_app.insert(format!("{}_spread_sd", app.name), json!(sd));
    }
    per_app.insert("all".into(), json!(mean_sd(&errors.all).0));
    (per_app, errors)
}

/// The CSV rows of policy `pi`'s predictions in run `r`: one per source ≠ target pair.
fn prediction_rows(app: &str, seed: u64, policy: &str, r: &WcRun, col: Column) -> Vec<String> {
    let (pi, reference) = (col.pi, r.reference(col));
    let mut rows = Vec::new();
    for i in 0..LEVELS {
        for j in (0..LEVELS).filter(|&j| j != i) {
            rows.push(format!(
                "{},{},{},{},{},{},{}",
                app,
                seed,
                policy,
                (i + 1) * 10,
                (j + 1) * 10,
                r.pred[pi][i][j] as f64,
                reference[j] as f64
            ));
        }
    }
    rows
}

/// The mean observed optimal worker count per level over all runs, and each app's detail:
/// seed 0's observed optima and best throughputs, the mean estimated W̄ and seed 0's costs.
fn observed_detail(
    apps: &[AppModel],
    runs: &[Vec<WcRun>],
) -> (Vec<f64>, serde_json::Map<String, Value>) {
    let mut oowc_mean = vec![Vec::new(); LEVELS];
    let mut per_app_detail = serde_json::Map::new();
    for (ai, app) in apps.iter().enumerate() {
        for r in &runs[ai] {
            for (m, &o) in oowc_mean.iter_mut().zip(&r.oowc) {
                m.push(o as f64);
            }
        }
        let r0 = &runs[ai][0];
        per_app_detail.insert(
            app.name.clone(),
            json!({"observed_optimal_seed0": r0.oowc, "observed_optimal_same_headroom_seed0": r0.oowc_h,
                   "best_throughput_per_s_seed0": r0.best_throughput,
                   "estimated_wbar_us_per_s": mean_sd(&runs[ai].iter().map(|r| r.wbar).collect::<Vec<_>>()).0,
                   "estimated_alpha_beta_gamma_us_seed0": r0.costs}),
        );
    }
    let means = oowc_mean.iter().map(|x| mean_sd(x).0).collect();
    (means, per_app_detail)
}

#[cfg(test)]
mod tests {
    use super::fewest_workers_at_headroom;

    #[test]
    fn oowc_at_headroom_on_a_small_case() {
        // Best maxima on 1..4 workers.
        let best = [100.0, 190.0, 270.0, 340.0];
        // h = 1: 180 needs 2 workers (190 ≥ 180).
        assert_eq!(fewest_workers_at_headroom(&best, 1.0, 180.0), 2);
        // h = 0.9: 0.9·190 = 171 < 180, 0.9·270 = 243 ≥ 180 → 3.
        assert_eq!(fewest_workers_at_headroom(&best, 0.9, 180.0), 3);
        // Exactly on the edge counts as met.
        assert_eq!(fewest_workers_at_headroom(&best, 0.9, 90.0), 1);
        // Beyond h·max(N): all N workers.
        assert_eq!(fewest_workers_at_headroom(&best, 0.9, 340.0), 4);
        assert_eq!(fewest_workers_at_headroom(&best, 1.0, 340.0), 4);
    }
}
