//! One app, one seed: the simulated cluster measured the way an operator of the real system
//! would — learn α, β, γ, W̄ from saturated samples (priors off by ~3×), measure maximum
//! throughput per worker count and placement, derive load from Table 2 metrics. Experiments
//! are built from these pieces.

use super::engine::{Cluster, ClusterConfig};
use crate::app::AppModel;
use crate::baselines::faasflow::faasflow_shares;
use crate::baselines::zhang24::Zhang24;
use crate::baselines::{Policy, PolicyKind, fill_scale, pad};
use crate::estimator::{CapacityEstimator, EstimatorConfig, SaturatedPoint};
use crate::metrics::{
    Aggregate, DerivationContext, SaturationConfig, SaturationDetector, WorkerSample, aggregate,
    derive_problem, scheduling_and_execution_us_per_s,
};
use crate::model::{CostModel, DEFAULT_SLOTS_PER_WORKER, Problem, Shares};
use crate::placement::{Packing, place_max_throughput};

/// The estimator's priors are the truth multiplied by these (α high, β low, γ high: ~3× off).
pub const PRIOR_FACTORS: [f64; 3] = [3.0, 1.0 / 3.0, 3.0];
/// Warm-up before a measurement window (µs of simulated time).
pub const WARMUP_US: f64 = 500_000.0;
/// Measurement window of a maximum-throughput run (µs).
pub const MEASURE_US: f64 = 1_500_000.0;
/// Saturation thresholds scaled to the simulator's sub-second intervals: mean depth and wait.
pub const SIM_SATURATION_QUEUE_DEPTH: f64 = 48.0;
pub const SIM_SATURATION_WAIT_US: f64 = 12_000.0;
/// Calibration covers worker counts 1..=this (or N if smaller), as the paper's §5.3 does.
pub const CALIBRATION_MAX_WORKERS: usize = 10;
/// Calibration passes over the worker counts.
pub const CALIBRATION_PASSES: usize = 2;

/// Settings shared by every experiment.
#[derive(Clone, Debug)]
pub struct SimSettings {
    pub cluster: ClusterConfig,
    pub workers: usize,
    pub headroom: f64,
    pub seeds: Vec<u64>,
    /// e2e: the simulated workers run each operator on at most the decision's parallelism
    /// `P_{o,w}` executors (false: every executor takes any request, the ablation).
    pub apply_parallelism: bool,
    /// The packing rule of every CLASP placement (and the -SP ablations').
    pub packing: Packing,
    /// e2e: also run CLASP with this end-to-end p95 latency target (ms) choosing each worker's
    /// headroom (`AutoscaleConfig::latency_target_ms`), reported as `clasp+target`.
    pub latency_target_ms: Option<f64>,
}

impl Default for SimSettings {
    /// The paper's testbed: 10 workers of the default cluster, h = 0.9, seeds 1–3, parallelism
    /// applied, any-fit packing.
    fn default() -> Self {
        SimSettings {
            cluster: ClusterConfig::default(),
            workers: super::DEFAULT_WORKERS,
            headroom: crate::model::DEFAULT_HEADROOM,
            seeds: super::DEFAULT_SEEDS.to_vec(),
            apply_parallelism: true,
            packing: Packing::default(),
            latency_target_ms: None,
        }
    }
}

/// One measurement window of an open-loop run, as the planner sees it.
#[derive(Clone, Debug)]
pub struct Window {
    /// Per second: requests per operator (and their mean τ), chained requests per edge.
    pub aggregate: Aggregate,
    /// λ and Λ.
    pub input_per_s: f64,
    pub throughput_per_s: f64,
    /// The workers' measured CPU time per second: not executing operators, and executing.
    pub scheduling_us_per_s: f64,
    pub execution_us_per_s: f64,
}

/// What a lab learned.
pub struct Lab<'a> {
    pub app: &'a AppModel,
    pub settings: &'a SimSettings,
    pub seed: u64,
    pub estimator: CapacityEstimator,
    /// Per input root: N_o, τ̄_o, E (from calibration metrics).
    pub profile: Aggregate,
    pub names: Vec<String>,
    pub edges: Vec<(usize, usize)>,
    runs: u64,
}

impl<'a> Lab<'a> {
    pub fn new(app: &'a AppModel, settings: &'a SimSettings, seed: u64) -> Lab<'a> {
        let t = settings.cluster.truth;
        let priors = CostModel {
            alpha_us: t.alpha_us * PRIOR_FACTORS[0],
            beta_us: t.beta_us * PRIOR_FACTORS[1],
            gamma_us: t.gamma_us * PRIOR_FACTORS[2],
        };
        let edges: Vec<(usize, usize)> = app
            .resolve()
            .expect("validated app")
            .iter()
            .map(|&(f, t, _)| (f, t))
            .collect();
        // The planner's first profile is the app's declared shape; calibration replaces it.
        let (visits, ev) = app.visits_per_input();
        let profile = Aggregate {
            processed_per_s: visits,
            exec_us: app.operators.iter().map(|o| o.exec_us).collect(),
            edges_per_s: ev,
        };
        Lab {
            app,
            settings,
            seed,
            estimator: CapacityEstimator::new(priors, None, EstimatorConfig::default()),
            profile,
            names: app.operators.iter().map(|o| o.name.clone()).collect(),
            edges,
            runs: 0,
        }
    }

    fn next_seed(&mut self) -> u64 {
        self.runs += 1;
        self.seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(self.runs)
    }

    /// The planner's problem for `rate_per_s` inputs per second with the current estimates.
    pub fn problem_at(&self, rate_per_s: f64, headroom: f64) -> Problem {
        let ctx = DerivationContext {
            operator_names: &self.names,
            edges: &self.edges,
            capacity_us_per_s: self.estimator.capacity_us_per_s().unwrap_or(1e6),
            headroom,
            costs: self.estimator.costs(),
            max_workers: self.settings.workers,
            slots_per_worker: DEFAULT_SLOTS_PER_WORKER,
        };
        Problem {
            packing: self.settings.packing,
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
            ..derive_problem(&ctx, &self.profile, rate_per_s)
        }
    }

    /// A policy's shares on exactly `n` workers for unthrottled input.
    pub fn shares_for(&self, kind: PolicyKind, n: usize) -> Shares {
        let p = self.problem_at(1.0, 1.0);
        match kind {
            PolicyKind::FaasFlow => faasflow_shares(&p.scaled(fill_scale(&p, n)), n),
            PolicyKind::Zhang24 => Zhang24::new(false).placement_on(&p, n),
            _ => pad(place_max_throughput(&p, n).shares, n),
        }
    }

    /// Closed-loop maximum throughput of `shares` on `n` workers; saturated samples feed the
    /// estimator when `learn`. Returns (throughput per second, all samples).
    pub fn max_throughput(
        &mut self,
        shares: &Shares,
        n: usize,
        learn: bool,
    ) -> (f64, Vec<WorkerSample>) {
        let seed = self.next_seed();
        let mut c = Cluster::new(self.app, self.settings.cluster.clone(), n, shares, seed);
        c.start_closed_loop();
        let iv = self.settings.cluster.interval_us;
        let mut det = SaturationDetector::new(SaturationConfig {
            queue_depth: SIM_SATURATION_QUEUE_DEPTH,
            wait_us: SIM_SATURATION_WAIT_US,
            ..SaturationConfig::default()
        });
        let mut t = 0.0;
        while t < WARMUP_US {
            t += iv;
            c.run_until(t);
            c.take_samples(iv);
        }
        let start_completed = c.total_completed;
        let mut all = Vec::new();
        while t < WARMUP_US + MEASURE_US {
            t += iv;
            c.run_until(t);
            let (samples, _) = c.take_samples(iv);
            for s in &samples {
                if det.observe(s) && learn {
                    let p = SaturatedPoint::from(s);
                    tracing::debug!(
                        exec_us_per_s = p.exec_us_per_s,
                        local_per_s = p.local_per_s,
                        remote_per_s = p.remote_per_s,
                        destinations = p.destinations,
                        costs = ?self.estimator.costs(),
                        "saturated sample"
                    );
                    self.estimator.observe(p);
                }
            }
            all.extend(samples);
        }
        let thr = (c.total_completed - start_completed) as f64 / (MEASURE_US / 1e6);
        (thr, all)
    }

    /// §5.3: run unthrottled on 1..=10 workers with CLASP's and FaaSFlow's placements (under the
    /// current estimates), learning from every saturated sample; the profile (N_o/Λ, τ̄_o, E/Λ)
    /// comes from the same metrics.
    pub fn calibrate(&mut self) {
        let kmax = self.settings.workers.min(CALIBRATION_MAX_WORKERS);
        let mut samples_all = Vec::new();
        let mut throughput_sum = 0.0;
        for _ in 0..CALIBRATION_PASSES {
            for n in 1..=kmax {
                for kind in [PolicyKind::Clasp, PolicyKind::FaasFlow, PolicyKind::Zhang24] {
                    let shares = self.shares_for(kind, n);
                    let (thr, samples) = self.max_throughput(&shares, n, true);
                    throughput_sum += thr * (MEASURE_US / 1e6);
                    samples_all.extend(samples);
                }
            }
        }
        let agg = aggregate(&samples_all, self.names.len(), self.edges.len());
        let intervals_per_s = 1e6 / self.settings.cluster.interval_us;
        // Samples are per-second rates summed over every interval: divide by the roots
        // completed per interval to get "per input".
        let roots = throughput_sum * intervals_per_s;
        if roots > 0.0 {
            self.profile = Aggregate {
                processed_per_s: agg.processed_per_s.iter().map(|x| x / roots).collect(),
                exec_us: agg.exec_us,
                edges_per_s: agg.edges_per_s.iter().map(|x| x / roots).collect(),
            };
        }
    }

    /// Runs open-loop at `rate_per_s` on `n` workers with `shares`; returns the window the
    /// planner sees of the current configuration.
    pub fn observe_at(&mut self, rate_per_s: f64, shares: &Shares, n: usize) -> Window {
        let seed = self.next_seed();
        let mut c = Cluster::new(self.app, self.settings.cluster.clone(), n, shares, seed);
        c.set_input_rate(rate_per_s);
        let iv = self.settings.cluster.interval_us;
        let mut t = 0.0;
        while t < WARMUP_US {
            t += iv;
            c.run_until(t);
            c.take_samples(iv);
        }
        let (mut lam, mut thr, mut all) = (0.0, 0.0, Vec::new());
        let mut k = 0.0;
        while t < WARMUP_US + MEASURE_US {
            t += iv;
            c.run_until(t);
            let (s, p) = c.take_samples(iv);
            lam += p.input_per_s;
            thr += p.throughput_per_s;
            k += 1.0;
            all.extend(s);
        }
        let (sched, exec) = scheduling_and_execution_us_per_s(&all);
        let mut agg = aggregate(&all, self.names.len(), self.edges.len());
        for x in agg
            .processed_per_s
            .iter_mut()
            .chain(agg.edges_per_s.iter_mut())
        {
            *x /= k;
        }
        Window {
            aggregate: agg,
            input_per_s: lam / k,
            throughput_per_s: thr / k,
            scheduling_us_per_s: sched / k,
            execution_us_per_s: exec / k,
        }
    }
}
