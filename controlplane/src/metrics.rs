//! The runtime metrics of the paper's Table 2 as plain data, saturation detection, and load
//! derivation: what a worker (or the simulator) reports each interval and what
//! the planner makes of it.

use std::collections::VecDeque;

use crate::model::{CostModel, EdgeLoad, OperatorLoad, Problem};

/// Intervals over which the inbound queue must have grown for a sample to count as saturated.
pub const DEFAULT_SATURATION_GROWTH_INTERVALS: usize = 3;
/// Mean queue depth above which (together with the wait below) a worker is saturated.
pub const DEFAULT_SATURATION_QUEUE_DEPTH: f64 = 500.0;
/// Mean queueing delay above which (together with the depth above) a worker is saturated (µs).
pub const DEFAULT_SATURATION_WAIT_US: f64 = 100_000.0;

/// One operator's figures on one worker over one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorSample {
    /// N_{w,o}: processed requests per second.
    pub processed_per_s: f64,
    /// τ̄_{w,o}: mean execution time (µs).
    pub exec_us: f64,
}

/// Table 2, worker w, one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerSample {
    pub worker: usize,
    /// Q_w: inbound queue length at the end of the interval.
    pub queue_len: usize,
    /// Mean queue depth over the interval.
    pub queue_mean: f64,
    /// Mean queueing delay of the requests started in the interval (µs).
    pub wait_mean_us: f64,
    /// R^l_w: local chained requests generated per second.
    pub local_per_s: f64,
    /// R^r_w: remote chained requests generated per second.
    pub remote_per_s: f64,
    /// Remote chained requests other workers sent it, per second (None: not measured). The
    /// busy-time estimator prices a remote request on both sides with it.
    pub remote_received_per_s: Option<f64>,
    /// Input records per second it took in from the ingress (0: not measured).
    pub roots_per_s: f64,
    /// δ_w: distinct remote workers reached.
    pub destinations: usize,
    /// Per operator (indexed like the app).
    pub operators: Vec<OperatorSample>,
    /// E_w^{o→o_s} per edge (indexed like the app's edges), per second.
    pub edges_per_s: Vec<f64>,
    /// Beyond the paper: busy µs per second of all executors together and of the network thread.
    pub executor_busy_us_per_s: f64,
    pub network_busy_us_per_s: f64,
    /// The worker process's measured CPU µs per second, idle spinning excluded (None: not
    /// measured). The busy-time estimator regresses it on the chained-request counts.
    pub cpu_us_per_s: Option<f64>,
    /// Times per second a thread of the worker went to sleep (voluntary context switches; 0:
    /// not measured). Each costs a wake-up the busy-time estimator prices on its own.
    pub sleeps_per_s: f64,
    /// CPU µs per second the worker's threads spent inside their sleeping waits — going to
    /// sleep and waking up, measured with thread CPU clocks (part of `cpu_us_per_s`; 0: not
    /// measured). The busy-time estimator takes it out of the CPU it explains by requests.
    pub sleep_cpu_us_per_s: f64,
    /// CPU-quota periods in which the worker's group was throttled in the interval (None: not
    /// capped, or not measured). Throttled, its CPU time is held at the cap: a bound, not a
    /// measurement of what its work cost.
    pub throttled_periods: Option<u64>,
    /// Of `cpu_us_per_s`, its executor threads' CPU µs per second (None: not measured), and
    /// of `sleep_cpu_us_per_s` and `sleeps_per_s` their part. The split busy-time estimator
    /// learns α from the executors alone: a local request costs nothing on the network thread.
    pub exec_cpu_us_per_s: Option<f64>,
    pub exec_sleep_cpu_us_per_s: f64,
    pub exec_sleeps_per_s: f64,
    /// TCP batches per second the worker's transport sent and received (0: not measured):
    /// how full its batches were. Recorded (`workers.csv`), not regressed on: a batch's cost
    /// rides on β, which is therefore β at the batch sizes the run had (`docs/planner.md`).
    pub batches_per_s: f64,
}

impl WorkerSample {
    /// E_w = Σ_o N_{w,o}·τ̄_{w,o}.
    pub fn exec_load_us_per_s(&self) -> f64 {
        self.operators
            .iter()
            .map(|o| o.processed_per_s * o.exec_us)
            .sum()
    }
}

/// Scheduling and execution time of a set of workers (µs per second, summed): execution is
/// `Σ E_w`, scheduling the rest of the executors' and network threads' busy time (dispatch,
/// hand-offs, connections) — what Zhang24's overhead model is refitted from.
pub fn scheduling_and_execution_us_per_s(samples: &[WorkerSample]) -> (f64, f64) {
    samples.iter().fold((0.0, 0.0), |(sched, exec), s| {
        let e = s.exec_load_us_per_s();
        let busy = s.executor_busy_us_per_s + s.network_busy_us_per_s;
        (sched + (busy - e).max(0.0), exec + e)
    })
}

/// Table 2, planner p, one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannerSample {
    /// Q_p: the planner's inbound queue.
    pub queue_len: usize,
    /// λ_p: input rate per second (offered: admitted or refused).
    pub input_per_s: f64,
    /// Of λ_p, the inputs refused at a full input queue per second (never admitted: they add
    /// to no backlog).
    pub refused_per_s: f64,
    /// Λ: throughput per second (roots completed end to end).
    pub throughput_per_s: f64,
}

/// Saturation settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SaturationConfig {
    pub growth_intervals: usize,
    pub queue_depth: f64,
    pub wait_us: f64,
}

impl Default for SaturationConfig {
    fn default() -> Self {
        SaturationConfig {
            growth_intervals: DEFAULT_SATURATION_GROWTH_INTERVALS,
            queue_depth: DEFAULT_SATURATION_QUEUE_DEPTH,
            wait_us: DEFAULT_SATURATION_WAIT_US,
        }
    }
}

/// Per-worker saturation detector: the queue grew over each of the last `growth_intervals`
/// intervals, or mean depth and mean wait both exceed their thresholds.
#[derive(Clone, Debug, Default)]
pub struct SaturationDetector {
    config: SaturationConfig,
    history: Vec<VecDeque<usize>>,
}

impl SaturationDetector {
    pub fn new(config: SaturationConfig) -> Self {
        SaturationDetector {
            config,
            history: Vec::new(),
        }
    }

    /// Feeds one sample; true when it is saturated.
    pub fn observe(&mut self, s: &WorkerSample) -> bool {
        if self.history.len() <= s.worker {
            self.history.resize(s.worker + 1, VecDeque::new());
        }
        let h = &mut self.history[s.worker];
        h.push_back(s.queue_len);
        while h.len() > self.config.growth_intervals + 1 {
            h.pop_front();
        }
        let grew = h.len() == self.config.growth_intervals + 1
            && h.iter().zip(h.iter().skip(1)).all(|(a, b)| b > a);
        grew || (s.queue_mean > self.config.queue_depth && s.wait_mean_us > self.config.wait_us)
    }

    /// Forget history (after a migration the queues are rebuilt).
    pub fn reset(&mut self) {
        self.history.clear();
    }
}

/// The cluster-wide aggregates of load derivation: N_o, τ̄_o (rate-weighted), E^{o→o_s}.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregate {
    pub processed_per_s: Vec<f64>,
    pub exec_us: Vec<f64>,
    pub edges_per_s: Vec<f64>,
}

/// Aggregates one interval's (or a window's averaged) worker samples.
pub fn aggregate(samples: &[WorkerSample], operators: usize, edges: usize) -> Aggregate {
    let mut n = vec![0.0; operators];
    let mut busy = vec![0.0; operators];
    let mut e = vec![0.0; edges];
    for s in samples {
        for (o, os) in s.operators.iter().enumerate().take(operators) {
            n[o] += os.processed_per_s;
            busy[o] += os.processed_per_s * os.exec_us;
        }
        for (i, r) in s.edges_per_s.iter().enumerate().take(edges) {
            e[i] += r;
        }
    }
    let tau = n
        .iter()
        .zip(&busy)
        .map(|(&n, &b)| if n > 0.0 { b / n } else { 0.0 })
        .collect();
    Aggregate {
        processed_per_s: n,
        exec_us: tau,
        edges_per_s: e,
    }
}

/// s = λ_p / Λ (1 when nothing has been processed yet).
pub fn projection_factor(input_per_s: f64, throughput_per_s: f64) -> f64 {
    if throughput_per_s > 0.0 {
        input_per_s / throughput_per_s
    } else {
        1.0
    }
}

/// The inputs of load derivation that are not measured per interval.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivationContext<'a> {
    pub operator_names: &'a [String],
    /// (from, to) per edge, indexed like the samples' edges.
    pub edges: &'a [(usize, usize)],
    pub capacity_us_per_s: f64,
    pub headroom: f64,
    pub costs: CostModel,
    pub max_workers: usize,
    pub slots_per_worker: usize,
}

/// Load derivation and projection: `D̃_o = s·N_o·τ̄_o`, `Ẽ = s·E`, budget `B = h·W̄`.
pub fn derive_problem(ctx: &DerivationContext<'_>, agg: &Aggregate, s: f64) -> Problem {
    Problem {
        capacity_us_per_s: ctx.capacity_us_per_s,
        headroom: ctx.headroom,
        costs: ctx.costs,
        max_workers: ctx.max_workers,
        slots_per_worker: ctx.slots_per_worker,
        operators: ctx
            .operator_names
            .iter()
            .enumerate()
            .map(|(o, name)| OperatorLoad {
                name: name.clone(),
                demand_us_per_s: s * agg.processed_per_s[o] * agg.exec_us[o],
                rate_per_s: s * agg.processed_per_s[o],
                exec_us: agg.exec_us[o],
            })
            .collect(),
        edges: ctx
            .edges
            .iter()
            .enumerate()
            .map(|(i, &(from, to))| EdgeLoad {
                from,
                to,
                rate_per_s: s * agg.edges_per_s[i],
            })
            .collect(),
        packing: crate::placement::Packing::default(),
        beta_receiver_share: 0.0,
        worker_headroom: Vec::new(),
    }
}
