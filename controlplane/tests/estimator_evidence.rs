//! Which estimator should the planner use by default? Both run on the simulator (which knows
//! every busy µs exactly) with priors ~3× off, fed as the planner feeds them: every interval's
//! samples through the saturation detector into the saturated estimator, every sample's CPU
//! time into the busy-time estimator.
//!
//! - At moderate load (about 15–50 % of a worker, placements moving between 1, 2 and 3
//!   workers) the busy-time estimator finds α, β and γ; the saturated one learns nothing.
//! - Under saturation (the simulator's own calibration runs) both learn; the table printed
//!   (`--nocapture`) shows how close each gets.
//!
//! docs/planner.md records the table.

use clasp_controlplane::app::AppModel;
use clasp_controlplane::baselines::PolicyKind;
use clasp_controlplane::estimator::{
    BusyRow, BusyTimeConfig, BusyTimeEstimator, CapacityEstimator, EstimatorConfig, SaturatedPoint,
};
use clasp_controlplane::metrics::{SaturationConfig, SaturationDetector, WorkerSample};
use clasp_controlplane::model::{CostModel, Shares};
use clasp_controlplane::sim::SimSettings;
use clasp_controlplane::sim::engine::{Cluster, ClusterConfig};
use clasp_controlplane::sim::lab::{
    Lab, PRIOR_FACTORS, SIM_SATURATION_QUEUE_DEPTH, SIM_SATURATION_WAIT_US,
};
use clasp_protocol::rng::SimRng;

const WORKERS: usize = 3;
/// Operator execution time in the simulated app (µs).
const EXEC_US: f64 = 400.0;
/// Placements of the moderate-load run, 12 intervals each.
const PHASES: [usize; 8] = [1, 2, 3, 2, 1, 2, 3, 2];
const PHASE_INTERVALS: usize = 12;

/// Both estimators, fed as the planner feeds them.
struct Pair {
    busy: BusyTimeEstimator,
    saturated: CapacityEstimator,
    detector: SaturationDetector,
}

impl Pair {
    fn new(priors: CostModel) -> Pair {
        Pair {
            busy: BusyTimeEstimator::new(priors, BusyTimeConfig::default()),
            saturated: CapacityEstimator::new(priors, None, EstimatorConfig::default()),
            detector: SaturationDetector::new(SaturationConfig {
                queue_depth: SIM_SATURATION_QUEUE_DEPTH,
                wait_us: SIM_SATURATION_WAIT_US,
                ..SaturationConfig::default()
            }),
        }
    }

    fn feed(&mut self, t_s: f64, samples: &[WorkerSample]) {
        let rows: Vec<BusyRow> = samples
            .iter()
            .filter_map(|s| BusyRow::from_sample(s, t_s))
            .collect();
        self.busy.observe_interval(&rows);
        for s in samples {
            if self.detector.observe(s) {
                self.saturated.observe(SaturatedPoint::from(s));
            }
        }
    }
}

fn even(n: usize, operators: usize) -> Shares {
    vec![vec![1.0 / n as f64; n]; operators]
}

fn priors(truth: CostModel) -> CostModel {
    CostModel {
        alpha_us: truth.alpha_us * PRIOR_FACTORS[0],
        beta_us: truth.beta_us * PRIOR_FACTORS[1],
        gamma_us: truth.gamma_us * PRIOR_FACTORS[2],
    }
}

/// Relative errors of α, β, γ against the truth.
fn errors(c: CostModel, t: CostModel) -> [f64; 3] {
    [
        (c.alpha_us - t.alpha_us) / t.alpha_us,
        (c.beta_us - t.beta_us) / t.beta_us,
        (c.gamma_us - t.gamma_us) / t.gamma_us,
    ]
}

fn settings(seed: u64) -> SimSettings {
    SimSettings {
        cluster: ClusterConfig::default(),
        workers: WORKERS,
        headroom: 1.0,
        seeds: vec![seed],
        ..SimSettings::default()
    }
}

/// Open-loop input at 15–50 % of the placement's maximum, moving between 1, 2 and 3 workers.
fn moderate_load(app: &AppModel, seed: u64) -> Pair {
    let s = settings(seed);
    let ops = app.operators.len();
    let mut lab = Lab::new(app, &s, seed);
    let max: Vec<f64> = (1..=WORKERS)
        .map(|n| lab.max_throughput(&even(n, ops), n, false).0)
        .collect();
    let mut pair = Pair::new(priors(s.cluster.truth));
    let mut c = Cluster::new(app, s.cluster.clone(), WORKERS, &even(1, ops), seed);
    let mut rng = SimRng::new(seed ^ 0xE5);
    let iv = s.cluster.interval_us;
    let mut t = 0.0;
    for (k, &n) in PHASES.iter().enumerate() {
        if k > 0 && PHASES[k - 1] != n {
            c.migrate(&even(n, ops));
        }
        for i in 0..PHASE_INTERVALS {
            c.set_input_rate(max[n - 1] * (0.15 + 0.35 * rng.uniform()));
            t += iv;
            c.run_until(t);
            let (samples, _) = c.take_samples(iv);
            // The planner skips the interval of a migration.
            if i > 0 {
                pair.feed(t / 1e6, &samples);
            }
        }
    }
    pair
}

/// The simulator's calibration (closed-loop, saturated runs of CLASP's, FaaSFlow's and
/// Zhang24's placements on 1..=3 workers, twice): its lab feeds the saturated estimator; the
/// same samples feed the busy-time one.
fn saturated_load(app: &AppModel, seed: u64) -> Pair {
    let s = settings(seed);
    let mut lab = Lab::new(app, &s, seed);
    let mut pair = Pair::new(priors(s.cluster.truth));
    let mut t_s = 0.0;
    for _ in 0..2 {
        for n in 1..=WORKERS {
            for kind in [PolicyKind::Clasp, PolicyKind::FaasFlow, PolicyKind::Zhang24] {
                let shares = lab.shares_for(kind, n);
                let (_, samples) = lab.max_throughput(&shares, n, true);
                for interval in samples.chunks(n) {
                    t_s += s.cluster.interval_us / 1e6;
                    let rows: Vec<BusyRow> = interval
                        .iter()
                        .filter_map(|w| BusyRow::from_sample(w, t_s))
                        .collect();
                    pair.busy.observe_interval(&rows);
                }
            }
        }
    }
    pair.saturated = lab.estimator.clone();
    pair
}

fn report(name: &str, pair: &Pair, truth: CostModel) -> ([f64; 3], [f64; 3]) {
    let b = errors(pair.busy.costs(), truth);
    let s = errors(pair.saturated.costs(), truth);
    eprintln!(
        "{name:<28} busy-time α {:+6.1}% β {:+6.1}% γ {:+6.1}% samples {:?} | saturated α \
         {:+6.1}% β {:+6.1}% γ {:+6.1}% updates {}",
        100.0 * b[0],
        100.0 * b[1],
        100.0 * b[2],
        pair.busy.samples(),
        100.0 * s[0],
        100.0 * s[1],
        100.0 * s[2],
        pair.saturated.updates,
    );
    (b, s)
}

#[test]
fn busy_time_learns_at_moderate_load_where_saturated_learns_nothing() {
    let truth = ClusterConfig::default().truth;
    for (app, seed) in [("wc", 1), ("wc", 2), ("sd", 1)] {
        let model = AppModel::builtin(app, EXEC_US).expect("builtin");
        let pair = moderate_load(&model, seed);
        let (b, s) = report(&format!("{app} seed {seed} moderate load"), &pair, truth);
        assert_eq!(pair.busy.identified(), [true; 3], "{app} {seed}");
        assert!(b.iter().all(|e| e.abs() < 0.15), "{app} {seed}: {b:?}");
        assert!(
            b.iter().zip(&s).all(|(b, s)| b.abs() < s.abs()),
            "{app} {seed}: busy-time {b:?} saturated {s:?}"
        );
    }
}

#[test]
fn under_saturation_both_learn_and_busy_time_is_closer() {
    let truth = ClusterConfig::default().truth;
    for (app, seed) in [("wc", 1), ("sd", 1)] {
        let model = AppModel::builtin(app, EXEC_US).expect("builtin");
        let pair = saturated_load(&model, seed);
        let (b, s) = report(&format!("{app} seed {seed} saturated"), &pair, truth);
        assert!(pair.saturated.updates > 0, "{app}: no saturated update");
        assert_eq!(pair.busy.identified(), [true; 3], "{app} {seed}");
        assert!(
            b.iter()
                .zip(&s)
                .all(|(b, s)| b.abs() < 0.1 && b.abs() < s.abs()),
            "{app} {seed}: busy-time {b:?} saturated {s:?}"
        );
    }
}
