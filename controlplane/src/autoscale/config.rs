//! The autoscaling loop's settings: one struct with a default per policy, and the sanitation
//! that makes any value usable (the loop must not panic on a bad setting, only plan with the
//! nearest sane one).

use crate::baselines::PolicyKind;
use crate::estimator::{BusyTimeConfig, EstimatorConfig, EstimatorKind};
use crate::headroom::DEFAULT_HEADROOM_FLOOR;
use crate::metrics::SaturationConfig;
use crate::model::{DEFAULT_HEADROOM, DEFAULT_SLOTS_PER_WORKER};
use crate::placement::Packing;
use crate::scaling::TriggerConfig;

/// Window over which λ and Λ are averaged for the triggers and the projection (intervals).
pub const DEFAULT_RATE_WINDOW_INTERVALS: usize = 4;
/// A window is steady (feeds the per-input profile) when Λ is within this fraction of λ.
pub const DEFAULT_PROFILE_STEADY_TOLERANCE: f64 = 0.05;
/// Weight of a steady window in the per-input profile.
pub const DEFAULT_PROFILE_SMOOTHING: f64 = 0.2;
/// The metrics interval of the prototype the planner was first built for, and of the
/// simulator (µs).
pub const DEFAULT_INTERVAL_US: f64 = 250_000.0;
/// A backlog is planned away within this time (µs): the plan adds `backlog / this` to λ.
pub const DEFAULT_BACKLOG_DRAIN_US: f64 = 2_000_000.0;
/// The cluster is "draining" (not scaled down) while its backlog exceeds this much input (µs).
pub const DEFAULT_DRAINING_BACKLOG_US: f64 = 250_000.0;
/// Plan for this much more than the input rate (see [`AutoscaleConfig::rate_margin`]).
pub const DEFAULT_RATE_MARGIN: f64 = 0.0;
/// Executor threads per worker a decision sizes parallelism for (`clasp run`'s default).
pub const DEFAULT_EXECUTORS_PER_WORKER: usize = 1;

/// Settings of the loop. [`AutoscaleConfig::new`] gives the defaults for a policy.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoscaleConfig {
    pub policy: PolicyKind,
    /// Most workers the policy may use (the cluster's size).
    pub max_workers: usize,
    /// h in `B = h·W̄`.
    pub headroom: f64,
    /// Metrics interval (µs); the rate window spans `rate_window_intervals` of them.
    pub interval_us: f64,
    pub saturation: SaturationConfig,
    pub triggers: TriggerConfig,
    /// The saturated estimator's settings.
    pub estimator: EstimatorConfig,
    /// Whose α, β, γ are planned with (W̄ always comes from the saturated estimator).
    pub estimator_kind: EstimatorKind,
    /// The busy-time estimator's settings.
    pub busy_time: BusyTimeConfig,
    /// λ and Λ are averaged over this many intervals.
    pub rate_window_intervals: usize,
    /// Λ within this fraction of λ makes a window steady (it then refreshes the profile).
    pub profile_steady_tolerance: f64,
    /// Weight of one steady window in the per-input profile.
    pub profile_smoothing: f64,
    pub slots_per_worker: usize,
    /// The packing rule of CLASP's placement (and the -SP ablations').
    pub packing: Packing,
    /// The share of β charged to a remote request's receiver in placement
    /// (`Problem::beta_receiver_share`): 0 (the paper, and the simulator) by default.
    pub beta_receiver_share: f64,
    /// Executor threads per worker: the most executors a decision gives one operator on one
    /// worker (`scaling::executor_parallelism`).
    pub executors_per_worker: usize,
    /// W̄ before any saturated sample (e.g. executors × 10^6 µs/s, or `clasp bench dispatch`).
    pub capacity_prior_us_per_s: Option<f64>,
    /// W̄ is known, not estimated: the prior is each worker's CPU cap (a worker in a cgroup
    /// with a quota has exactly that much), so saturated samples do not move it.
    pub capacity_known: bool,
    /// FaaSFlow's throughput per worker observed while saturated, before any is observed.
    pub saturated_throughput_per_worker_prior_per_s: Option<f64>,
    /// Whether samples feed the estimators (CLASP's capacity model).
    pub learn_costs: bool,
    /// Re-plan at once when a worker is saturated and throughput trails the input.
    pub saturation_trigger: bool,
    /// Plan for `λ + backlog / backlog_drain_us` (None: for λ only), the backlog being the
    /// roots admitted and not completed.
    pub backlog_drain_us: Option<f64>,
    /// No scale-down while the backlog exceeds this much input (µs of λ; None: never hold).
    pub draining_backlog_us: Option<f64>,
    /// Plan for `(1 + rate_margin)·λ`: capacity for the rise the rate trigger lets pass.
    pub rate_margin: f64,
    /// The latency-aware packing option (None: off, every worker packs to h): an end-to-end
    /// p95 latency target (ms) from which each worker's headroom h_w ≤ h is chosen using the
    /// queueing it measures (`headroom::HeadroomModel`).
    pub latency_target_ms: Option<f64>,
    /// The lowest h_w the latency target may choose (at most h).
    pub headroom_floor: f64,
}

impl AutoscaleConfig {
    /// The defaults for `policy` on at most `max_workers` workers: headroom 0.9, 250 ms
    /// intervals, the prototype's saturation thresholds, the default triggers and estimators
    /// (the busy-time one plans); the estimators learn only for CLASP.
    pub fn new(policy: PolicyKind, max_workers: usize) -> Self {
        AutoscaleConfig {
            policy,
            max_workers,
            headroom: DEFAULT_HEADROOM,
            interval_us: DEFAULT_INTERVAL_US,
            saturation: SaturationConfig::default(),
            triggers: TriggerConfig::default(),
            estimator: EstimatorConfig::default(),
            estimator_kind: EstimatorKind::default(),
            busy_time: BusyTimeConfig::default(),
            rate_window_intervals: DEFAULT_RATE_WINDOW_INTERVALS,
            profile_steady_tolerance: DEFAULT_PROFILE_STEADY_TOLERANCE,
            profile_smoothing: DEFAULT_PROFILE_SMOOTHING,
            slots_per_worker: DEFAULT_SLOTS_PER_WORKER,
            executors_per_worker: DEFAULT_EXECUTORS_PER_WORKER,
            packing: Packing::default(),
            beta_receiver_share: 0.0,
            capacity_prior_us_per_s: None,
            capacity_known: false,
            saturated_throughput_per_worker_prior_per_s: None,
            learn_costs: policy == PolicyKind::Clasp,
            saturation_trigger: true,
            backlog_drain_us: Some(DEFAULT_BACKLOG_DRAIN_US),
            draining_backlog_us: Some(DEFAULT_DRAINING_BACKLOG_US),
            rate_margin: DEFAULT_RATE_MARGIN,
            latency_target_ms: None,
            headroom_floor: DEFAULT_HEADROOM_FLOOR,
        }
    }

    /// The same settings with every number made usable (no panics on bad input): at least one
    /// worker, slot and window interval, headroom in (0, 1], positive interval, finite
    /// non-negative tolerances, priors and the latency target dropped unless positive and
    /// finite, the headroom floor within (0, h].
    pub(super) fn sanitized(mut self) -> Self {
        let finite_or = |v: f64, d: f64| if v.is_finite() { v } else { d };
        self.max_workers = self.max_workers.max(1);
        self.slots_per_worker = self.slots_per_worker.max(1);
        self.executors_per_worker = self.executors_per_worker.max(1);
        self.rate_window_intervals = self.rate_window_intervals.max(1);
        self.headroom = finite_or(self.headroom, DEFAULT_HEADROOM).clamp(0.01, 1.0);
        self.interval_us = finite_or(self.interval_us, DEFAULT_INTERVAL_US).max(1.0);
        self.profile_steady_tolerance = finite_or(
            self.profile_steady_tolerance,
            DEFAULT_PROFILE_STEADY_TOLERANCE,
        )
        .max(0.0);
        self.profile_smoothing =
            finite_or(self.profile_smoothing, DEFAULT_PROFILE_SMOOTHING).clamp(0.0, 1.0);
        let positive = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
        self.capacity_prior_us_per_s = positive(self.capacity_prior_us_per_s);
        self.saturated_throughput_per_worker_prior_per_s =
            positive(self.saturated_throughput_per_worker_prior_per_s);
        self.backlog_drain_us = positive(self.backlog_drain_us);
        self.rate_margin = finite_or(self.rate_margin, DEFAULT_RATE_MARGIN).clamp(0.0, 10.0);
        self.latency_target_ms = positive(self.latency_target_ms);
        self.headroom_floor =
            finite_or(self.headroom_floor, DEFAULT_HEADROOM_FLOOR).clamp(0.01, self.headroom);
        self.draining_backlog_us = self
            .draining_backlog_us
            .filter(|x| x.is_finite() && *x >= 0.0);
        self
    }
}
