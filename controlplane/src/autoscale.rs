//! The autoscaling loop as one pure state machine: saturation detection → estimator → rate
//! window and per-input profile → triggers → load derivation → the policy's decision → the
//! one-line explanation.
//!
//! Why a type of its own: the simulator's e2e experiment and the live planner (`clasp run`)
//! must run the *same* loop, or the simulator's verdict on the policies says nothing about the
//! real system. So nothing in here does I/O or reads a clock: the caller feeds one interval of
//! Table 2 metrics with the time it was taken (`on_interval`), migrates when a decision comes
//! back, and says when the migration is over (`migrated`).
//!
//! What the loop does per interval (DESIGN.md §6, with the departures docs/controlplane.md
//! records):
//! 1. every active worker's sample goes through the saturation detector; saturated samples feed
//!    the RLS estimator of α, β, γ and W̄ (only for CLASP by default: the baselines have no
//!    capacity model, they plan with whatever the estimator was given);
//! 2. λ (input) and Λ (throughput) are averaged over a short window, and the backlog — roots
//!    admitted and not completed, `Σ (λ − Λ)·Δt` — is kept; FaaSFlow's "throughput per worker
//!    observed while saturated" is refreshed when Λ trails λ;
//! 3. the per-input profile (requests per operator, mean τ, chained requests per edge, all per
//!    root) is refreshed from *steady* windows only — Λ within a few % of λ and no migration in
//!    the window — because over a backlog or right after a migration root completions lag the
//!    input by the pipeline's depth and `s = λ/Λ` projects 10–100× too much;
//! 4. the triggers decide whether to re-plan: the rate rose by more than 20 % (held 250 ms:
//!    scale up eagerly, every interval of waiting adds to a backlog) or fell by more than 20 %
//!    (held 2 s, and not while a backlog drains: scale down lazily); a worker saturated while
//!    throughput trails the input, on a window that shows the current configuration only (the
//!    model was wrong — react at once); throughput trailing for 3 s; and a plan that made room
//!    for a backlog whose backlog is gone (held 2 s);
//! 5. the plan is for the input since it moved (the window average still holds intervals from
//!    before a step) plus the backlog spread over 2 s, `λ_plan × profile` with the estimator's
//!    W̄ and α, β, γ; the policy answers with a worker count and shares;
//! 6. the shares become key groups (fewest moves); a decision that changes nothing (same
//!    workers, same key groups) is not returned — the caller would pause workers for nothing —
//!    and while a decision's migration is in progress no other is made.
//!
//! The triggers, the backlog and the plan are the planner's, not the policy's: every policy
//! (CLASP and the baselines) runs through the same loop, so a comparison measures the policies'
//! worker counts and placements, not who got the better reflexes.
//!
//! Worker indices in samples are the active workers', 0..workers.

use std::collections::VecDeque;

use crate::app::AppModel;
use crate::baselines::{Observed, Policy, PolicyKind, policy};
use crate::estimator::{CapacityEstimator, EstimatorConfig, SaturatedPoint};
use crate::metrics::{
    Aggregate, DerivationContext, PlannerSample, SaturationConfig, SaturationDetector,
    WorkerSample, aggregate, derive_problem, projection_factor,
};
use crate::model::{CostModel, DEFAULT_HEADROOM, DEFAULT_SLOTS_PER_WORKER, Problem, Shares};
use crate::scaling::{Explanation, Trigger, TriggerConfig, Triggers};
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::split::{KEY_GROUPS_PER_OPERATOR, initial_routing, reassign};

/// Window over which λ and Λ are averaged for the triggers and the projection (intervals).
pub const DEFAULT_RATE_WINDOW_INTERVALS: usize = 4;
/// A window is steady (feeds the per-input profile) when Λ is within this fraction of λ.
pub const DEFAULT_PROFILE_STEADY_TOLERANCE: f64 = 0.05;
/// Weight of a steady window in the per-input profile.
pub const DEFAULT_PROFILE_SMOOTHING: f64 = 0.2;
/// The metrics interval of the paper's prototype and the simulator (µs).
pub const DEFAULT_INTERVAL_US: f64 = 250_000.0;
/// W̄ planned with while the estimator has neither a saturated sample nor a prior (µs per s):
/// one fully busy core.
pub const FALLBACK_CAPACITY_US_PER_S: f64 = 1_000_000.0;
/// Λ below this fraction of λ counts as "saturated" for FaaSFlow's per-worker throughput.
pub const FAASFLOW_LAG_FRACTION: f64 = 0.95;
/// A backlog is planned away within this time (µs): the plan adds `backlog / this` to λ.
pub const DEFAULT_BACKLOG_DRAIN_US: f64 = 2_000_000.0;
/// The cluster is "draining" (not scaled down) while its backlog exceeds this much input (µs).
pub const DEFAULT_DRAINING_BACKLOG_US: f64 = 250_000.0;
/// Plan for this much more than the input rate (see [`AutoscaleConfig::rate_margin`]).
pub const DEFAULT_RATE_MARGIN: f64 = 0.0;
/// A plan whose backlog share exceeded this fraction of λ is re-made once the backlog is gone.
pub const DRAINED_REPLAN_FRACTION: f64 = 0.1;
/// Per-interval input rates kept for the "rate since it moved" average.
const RATE_HISTORY_INTERVALS: usize = 64;
/// The rate planned for averages at most this many of the latest intervals.
const RATE_PLAN_MAX_INTERVALS: usize = 8;

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
    pub estimator: EstimatorConfig,
    /// λ and Λ are averaged over this many intervals.
    pub rate_window_intervals: usize,
    /// Λ within this fraction of λ makes a window steady (it then refreshes the profile).
    pub profile_steady_tolerance: f64,
    /// Weight of one steady window in the per-input profile.
    pub profile_smoothing: f64,
    pub slots_per_worker: usize,
    /// W̄ before any saturated sample (e.g. executors × 10^6 µs/s, or `clasp bench dispatch`).
    pub capacity_prior_us_per_s: Option<f64>,
    /// FaaSFlow's throughput per worker observed while saturated, before any is observed.
    pub saturated_throughput_per_worker_prior_per_s: Option<f64>,
    /// Whether saturated samples feed the estimator (CLASP's capacity model).
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
}

impl AutoscaleConfig {
    /// The defaults for `policy` on at most `max_workers` workers: headroom 0.9, 250 ms
    /// intervals, the prototype's saturation thresholds, the default triggers and estimator;
    /// the estimator learns only for CLASP.
    pub fn new(policy: PolicyKind, max_workers: usize) -> Self {
        AutoscaleConfig {
            policy,
            max_workers,
            headroom: DEFAULT_HEADROOM,
            interval_us: DEFAULT_INTERVAL_US,
            saturation: SaturationConfig::default(),
            triggers: TriggerConfig::default(),
            estimator: EstimatorConfig::default(),
            rate_window_intervals: DEFAULT_RATE_WINDOW_INTERVALS,
            profile_steady_tolerance: DEFAULT_PROFILE_STEADY_TOLERANCE,
            profile_smoothing: DEFAULT_PROFILE_SMOOTHING,
            slots_per_worker: DEFAULT_SLOTS_PER_WORKER,
            capacity_prior_us_per_s: None,
            saturated_throughput_per_worker_prior_per_s: None,
            learn_costs: policy == PolicyKind::Clasp,
            saturation_trigger: true,
            backlog_drain_us: Some(DEFAULT_BACKLOG_DRAIN_US),
            draining_backlog_us: Some(DEFAULT_DRAINING_BACKLOG_US),
            rate_margin: DEFAULT_RATE_MARGIN,
        }
    }

    /// The same settings with every number made usable (no panics on bad input): at least one
    /// worker, slot and window interval, headroom in (0, 1], positive interval, finite
    /// non-negative tolerances, priors dropped unless positive and finite.
    fn sanitized(mut self) -> Self {
        let finite_or = |v: f64, d: f64| if v.is_finite() { v } else { d };
        self.max_workers = self.max_workers.max(1);
        self.slots_per_worker = self.slots_per_worker.max(1);
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
        self.draining_backlog_us = self
            .draining_backlog_us
            .filter(|x| x.is_finite() && *x >= 0.0);
        self
    }
}

/// What the caller must do: run `workers` workers with `shares` (key groups: `routing`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleDecision {
    /// When it was decided (the caller's clock, µs).
    pub t_us: f64,
    /// Active workers before (0 for the initial placement).
    pub workers_before: usize,
    pub workers: usize,
    /// `shares[o][w]`: the fraction of operator o's demand on worker w (`workers` columns).
    pub shares: Shares,
    /// The shares as key groups, keeping as many as possible where they were.
    pub routing: RoutingTable,
    /// Key groups whose owner changed.
    pub key_groups_moved: usize,
    /// The input rate planned for (per second).
    pub rate_per_s: f64,
    /// True when even `max_workers` cannot hold the demand (CLASP's bisection on s).
    pub saturated: bool,
    /// The fraction of the demand placed.
    pub fraction_placed: f64,
    /// [`Explanation::line`]: one line of `key=value`, `scaling::parse_line` reads it back.
    pub explanation: String,
    /// What fired: `initial`, `rate-changed(s=…)`, `throughput-lagging(s=…)`.
    pub trigger: String,
}

/// The current estimates (for summaries and plots).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimates {
    pub alpha_us: f64,
    pub beta_us: f64,
    pub gamma_us: f64,
    /// The W̄ the planner plans with (µs per second): the estimate, else the prior, else
    /// [`FALLBACK_CAPACITY_US_PER_S`].
    pub w_bar_us: f64,
    /// The estimator's own W̄: None until a saturated sample or a prior.
    pub capacity_us_per_s: Option<f64>,
}

/// One interval in the rate window.
#[derive(Clone, Debug)]
struct Interval {
    samples: Vec<WorkerSample>,
    input_per_s: f64,
    throughput_per_s: f64,
}

/// The autoscaling loop; see the module docs.
pub struct Autoscaler {
    cfg: AutoscaleConfig,
    names: Vec<String>,
    edges: Vec<(usize, usize)>,
    policy: Box<dyn Policy + Send>,
    estimator: CapacityEstimator,
    detector: SaturationDetector,
    triggers: Triggers,
    profile: Aggregate,
    window: VecDeque<Interval>,
    workers: usize,
    routing: RoutingTable,
    first_rate_per_s: f64,
    saturated_per_worker_per_s: Option<f64>,
    last_migration_us: f64,
    /// (t_us, λ) of the last intervals.
    recent_rates: VecDeque<(f64, f64)>,
    /// Roots admitted and not yet completed (Σ (λ − Λ)·Δt).
    in_flight_roots: f64,
    last_t_us: Option<f64>,
    last_decision_us: f64,
    /// The backlog's share of the last plan (per second).
    drain_planned_per_s: f64,
    /// Since when the backlog of a plan with a drain share has been gone.
    drained_since_us: Option<f64>,
    /// A decision was returned and its migration is not over yet.
    migrating: bool,
}

/// The rate a decision plans for: `base·(1 + margin) + drain`.
#[derive(Clone, Copy, Debug)]
struct Plan {
    base_per_s: f64,
    drain_per_s: f64,
    rate_per_s: f64,
}

impl std::fmt::Debug for Autoscaler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autoscaler")
            .field("policy", &self.cfg.policy)
            .field("workers", &self.workers)
            .field("estimates", &self.estimates())
            .finish_non_exhaustive()
    }
}

/// `x` if finite and non-negative, else 0.
fn rate_or_zero(x: f64) -> f64 {
    if x.is_finite() { x.max(0.0) } else { 0.0 }
}

impl Autoscaler {
    /// `app`: names, edges and the per-input profile the app declares (requests per operator
    /// and chained requests per edge per input root, τ per operator) — the planner's first
    /// profile, replaced by measurements from steady windows as they come. The estimator
    /// starts from `priors` (each must be > 0 to be learnable) and `cfg.capacity_prior_us_per_s`.
    /// An invalid app (unknown operator, cycle) leaves its edges out rather than panicking.
    pub fn new(
        app: &AppModel,
        cfg: AutoscaleConfig,
        priors: CostModel,
        first_rate_per_s: f64,
    ) -> Self {
        let cfg = cfg.sanitized();
        let edges: Vec<(usize, usize)> = app
            .resolve()
            .unwrap_or_default()
            .iter()
            .map(|&(f, t, _)| (f, t))
            .collect();
        let (visits, per_edge) = app.visits_per_input();
        let profile = Aggregate {
            processed_per_s: visits,
            exec_us: app.operators.iter().map(|o| o.exec_us).collect(),
            edges_per_s: per_edge,
        };
        let first = rate_or_zero(first_rate_per_s);
        Autoscaler {
            names: app.operators.iter().map(|o| o.name.clone()).collect(),
            edges,
            policy: policy(cfg.policy),
            estimator: CapacityEstimator::new(priors, cfg.capacity_prior_us_per_s, cfg.estimator),
            detector: SaturationDetector::new(cfg.saturation),
            triggers: Triggers::new(cfg.triggers, first),
            profile,
            window: VecDeque::new(),
            workers: 0,
            routing: RoutingTable::default(),
            first_rate_per_s: first,
            saturated_per_worker_per_s: cfg.saturated_throughput_per_worker_prior_per_s,
            last_migration_us: f64::NEG_INFINITY,
            recent_rates: VecDeque::new(),
            in_flight_roots: 0.0,
            last_t_us: None,
            last_decision_us: f64::NEG_INFINITY,
            drain_planned_per_s: 0.0,
            drained_since_us: None,
            migrating: false,
            cfg,
        }
    }

    /// Replaces the estimator (one calibrated elsewhere, as the simulator's lab does).
    pub fn with_estimator(mut self, estimator: CapacityEstimator) -> Self {
        self.estimator = estimator;
        self
    }

    /// Replaces the per-input profile (per input root: requests per operator, mean τ, chained
    /// requests per edge; indexed like the app). Rows of the wrong length are ignored.
    pub fn with_profile(mut self, profile: Aggregate) -> Self {
        let n = self.names.len();
        if profile.processed_per_s.len() == n
            && profile.exec_us.len() == n
            && profile.edges_per_s.len() == self.edges.len()
        {
            self.profile = profile;
        }
        self
    }

    /// The first placement (before any metrics): the policy's answer at the first rate.
    pub fn initial(&mut self) -> ScaleDecision {
        let rate = self.first_rate_per_s * (1.0 + self.cfg.rate_margin);
        let problem = self.problem_at(rate);
        let observed = self.observed(self.cfg.max_workers, rate);
        let d = self.policy.decide(&problem, observed.as_ref());
        let shares = d.placement.shares;
        let workers = d.placement.workers.max(1);
        self.routing = initial_routing(&shares, KEY_GROUPS_PER_OPERATOR);
        let decision = self.decision(
            0.0,
            "initial".into(),
            &problem,
            rate,
            workers,
            shares,
            self.routing.clone(),
            0,
            (d.placement.saturated, d.placement.fraction_placed),
        );
        self.workers = workers;
        self.triggers.planned(self.first_rate_per_s);
        decision
    }

    /// One interval of metrics from the active workers and the planner, taken at `t_us`.
    /// Returns a decision when the policy wants another worker count or placement: the caller
    /// migrates, then calls [`Autoscaler::migrated`].
    pub fn on_interval(
        &mut self,
        t_us: f64,
        samples: &[WorkerSample],
        planner: &PlannerSample,
    ) -> Option<ScaleDecision> {
        let mut saturated = false;
        for s in samples {
            if self.detector.observe(s) {
                saturated = true;
                if self.cfg.learn_costs {
                    self.estimator.observe(SaturatedPoint::from(s));
                }
            }
        }
        let (input, done) = (
            rate_or_zero(planner.input_per_s),
            rate_or_zero(planner.throughput_per_s),
        );
        let dt_us = match self.last_t_us {
            Some(last) if t_us.is_finite() && t_us > last => t_us - last,
            _ => self.cfg.interval_us,
        };
        if t_us.is_finite() {
            self.last_t_us = Some(t_us);
        }
        self.in_flight_roots = (self.in_flight_roots + (input - done) * dt_us / 1e6).max(0.0);
        self.recent_rates.push_back((t_us, input));
        while self.recent_rates.len() > RATE_HISTORY_INTERVALS {
            self.recent_rates.pop_front();
        }
        self.window.push_back(Interval {
            samples: samples.to_vec(),
            input_per_s: input,
            throughput_per_s: done,
        });
        while self.window.len() > self.cfg.rate_window_intervals {
            self.window.pop_front();
        }
        let (lam, big_lambda) = self.window_rates();
        if big_lambda < FAASFLOW_LAG_FRACTION * lam && self.workers > 0 {
            self.saturated_per_worker_per_s = Some(big_lambda / self.workers as f64);
        }
        self.refresh_profile(t_us, lam, big_lambda);
        let now_us = if t_us.is_finite() {
            t_us.max(0.0) as u64
        } else {
            0
        };
        let draining = self
            .cfg
            .draining_backlog_us
            .is_some_and(|d| self.in_flight_roots > lam * d / 1e6);
        let lagging = big_lambda < (1.0 - self.cfg.triggers.lag_tolerance) * lam;
        // The window must show the current configuration only: right after a decision the
        // backlog it was made for still shows as deep queues and Λ < λ.
        let settled = t_us - self.last_decision_us.max(self.last_migration_us)
            > self.window.len() as f64 * self.cfg.interval_us;
        let fired = self
            .triggers
            .observe_draining(now_us, lam, big_lambda, draining);
        // A plan that included a backlog's drain is re-made once the backlog is gone (lazily,
        // with the fall's hold), or the drain's workers would stay until the rate moves.
        let drained_hold = if self.drain_planned_per_s > DRAINED_REPLAN_FRACTION * lam && !draining
        {
            let since = *self.drained_since_us.get_or_insert(t_us);
            t_us - since >= self.cfg.triggers.rate_hold_us as f64
        } else {
            self.drained_since_us = None;
            false
        };
        if self.migrating {
            // One migration at a time: the metrics keep flowing, decisions wait.
            return None;
        }
        let trig = match fired {
            Some(t) => t,
            None if drained_hold => Trigger::Drained,
            None if self.cfg.saturation_trigger && saturated && lagging && settled => {
                Trigger::Saturated
            }
            None => return None,
        };
        let s = projection_factor(lam, big_lambda);
        let plan = self.plan_rate(lam);
        let rate = plan.rate_per_s;
        let problem = self.problem_at(rate);
        let observed = self.observed(self.workers, rate);
        let d = self.policy.decide(&problem, observed.as_ref());
        // The dead band of the rate trigger is centred on the input rate, not on the margin
        // or the backlog: the `drained` trigger takes the backlog's share away again.
        self.triggers.planned(plan.base_per_s);
        self.drain_planned_per_s = plan.drain_per_s;
        self.drained_since_us = None;
        let workers = d.placement.workers.max(1);
        let new_routing = reassign(&self.routing, &d.placement.shares);
        let moved = self
            .routing
            .owners()
            .iter()
            .zip(new_routing.owners())
            .filter(|(x, y)| x != y)
            .count();
        if moved == 0 && workers == self.workers {
            return None;
        }
        let decision = self.decision(
            t_us,
            format!(
                "{}(s={s:.2},input_per_s={:.1},backlog_roots={:.0})",
                trig.name(),
                plan.base_per_s,
                self.in_flight_roots
            ),
            &problem,
            rate,
            workers,
            d.placement.shares,
            new_routing.clone(),
            moved,
            (d.placement.saturated, d.placement.fraction_placed),
        );
        self.routing = new_routing;
        self.workers = workers;
        self.last_decision_us = t_us;
        self.migrating = true;
        Some(decision)
    }

    /// The rate to plan for: the input since it moved away from the last plan (the window
    /// average still holds intervals from before a step), else the window's λ; plus the
    /// backlog spread over [`AutoscaleConfig::backlog_drain_us`].
    fn plan_rate(&self, window_lam: f64) -> Plan {
        let moved = self
            .triggers
            .moved_since_us()
            .map_or(f64::NEG_INFINITY, |(t0, _)| t0 as f64);
        let from = moved.max(self.last_decision_us + 1.0);
        let xs: Vec<f64> = self
            .recent_rates
            .iter()
            .rev()
            .take(RATE_PLAN_MAX_INTERVALS)
            .filter(|(t, _)| *t >= from)
            .map(|r| r.1)
            .collect();
        let base = if xs.is_empty() {
            window_lam
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        };
        let drain = self
            .cfg
            .backlog_drain_us
            .map_or(0.0, |d| self.in_flight_roots / (d / 1e6));
        let base = rate_or_zero(base);
        Plan {
            base_per_s: base,
            drain_per_s: rate_or_zero(drain),
            rate_per_s: rate_or_zero(base * (1.0 + self.cfg.rate_margin) + drain),
        }
    }

    /// Roots admitted and not completed yet, as the planner's counts say.
    pub fn backlog_roots(&self) -> f64 {
        self.in_flight_roots
    }

    /// The migration of the last decision is over at `t_us`: queues were rebuilt, so the
    /// saturation history and the estimator's last point no longer describe the cluster, and
    /// the next windows are not steady.
    pub fn migrated(&mut self, t_us: f64) {
        self.migrating = false;
        self.last_migration_us = t_us;
        self.detector.reset();
        self.estimator.reset_covariance();
    }

    pub fn estimates(&self) -> Estimates {
        let c = self.estimator.costs();
        Estimates {
            alpha_us: c.alpha_us,
            beta_us: c.beta_us,
            gamma_us: c.gamma_us,
            w_bar_us: self.capacity_us_per_s(),
            capacity_us_per_s: self.estimator.capacity_us_per_s(),
        }
    }

    /// Active workers (0 before [`Autoscaler::initial`]).
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The current key-group routing (`routing[o][g]` = worker).
    pub fn routing(&self) -> &RoutingTable {
        &self.routing
    }

    /// λ and Λ averaged over the rate window (per second).
    pub fn window_rates(&self) -> (f64, f64) {
        let k = self.window.len().max(1) as f64;
        (
            self.window.iter().map(|w| w.input_per_s).sum::<f64>() / k,
            self.window.iter().map(|w| w.throughput_per_s).sum::<f64>() / k,
        )
    }

    /// The per-input profile the planner projects with.
    pub fn profile(&self) -> &Aggregate {
        &self.profile
    }

    pub fn config(&self) -> &AutoscaleConfig {
        &self.cfg
    }

    /// The problem the policy would see at `rate_per_s` inputs per second now.
    pub fn problem_at(&self, rate_per_s: f64) -> Problem {
        let ctx = DerivationContext {
            operator_names: &self.names,
            edges: &self.edges,
            capacity_us_per_s: self.capacity_us_per_s(),
            headroom: self.cfg.headroom,
            costs: self.estimator.costs(),
            max_workers: self.cfg.max_workers,
            slots_per_worker: self.cfg.slots_per_worker,
        };
        derive_problem(&ctx, &self.profile, rate_or_zero(rate_per_s))
    }

    fn capacity_us_per_s(&self) -> f64 {
        self.estimator
            .capacity_us_per_s()
            .filter(|c| c.is_finite() && *c > 0.0)
            .unwrap_or(FALLBACK_CAPACITY_US_PER_S)
    }

    fn observed(&self, workers: usize, target_rate_per_s: f64) -> Option<Observed> {
        self.saturated_per_worker_per_s.map(|per| Observed {
            workers,
            saturated_throughput_per_s: per * workers as f64,
            target_rate_per_s,
        })
    }

    /// Mixes a steady window into the per-input profile.
    fn refresh_profile(&mut self, t_us: f64, lam: f64, big_lambda: f64) {
        let k = self.window.len();
        let steady = k == self.cfg.rate_window_intervals
            && t_us - self.last_migration_us > k as f64 * self.cfg.interval_us
            && lam > 0.0
            && big_lambda > 0.0
            && (big_lambda - lam).abs() <= self.cfg.profile_steady_tolerance * lam;
        if !steady {
            return;
        }
        let all: Vec<WorkerSample> = self
            .window
            .iter()
            .flat_map(|w| w.samples.iter().cloned())
            .collect();
        let agg = aggregate(&all, self.names.len(), self.edges.len());
        let per_input = 1.0 / (k as f64 * big_lambda);
        let a = self.cfg.profile_smoothing;
        let mix = |old: &mut Vec<f64>, new: &[f64], scale: f64| {
            for (o, n) in old.iter_mut().zip(new) {
                *o = (1.0 - a) * *o + a * n * scale;
            }
        };
        mix(
            &mut self.profile.processed_per_s,
            &agg.processed_per_s,
            per_input,
        );
        mix(&mut self.profile.edges_per_s, &agg.edges_per_s, per_input);
        mix(&mut self.profile.exec_us, &agg.exec_us, 1.0);
    }

    #[allow(clippy::too_many_arguments)]
    fn decision(
        &self,
        t_us: f64,
        trigger: String,
        problem: &Problem,
        rate_per_s: f64,
        workers: usize,
        shares: Shares,
        routing: RoutingTable,
        moved: usize,
        (saturated, fraction_placed): (bool, f64),
    ) -> ScaleDecision {
        let exp = Explanation {
            policy: self.cfg.policy.name().into(),
            trigger: trigger.clone(),
            rate_per_s,
            projected_demand_us_per_s: problem.total_demand_us_per_s(),
            capacity_us_per_s: problem.capacity_us_per_s,
            costs: problem.costs,
            workers_before: self.workers,
            workers_after: workers,
            parallelism: Vec::new(),
            key_groups_moved: moved,
        };
        ScaleDecision {
            t_us,
            workers_before: self.workers,
            workers,
            shares,
            routing,
            key_groups_moved: moved,
            rate_per_s,
            saturated,
            fraction_placed,
            explanation: exp.line(),
            trigger,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{AppEdge, AppOperator};
    use crate::model::PAPER_COSTS;
    use crate::scaling::parse_line;

    const IV_US: f64 = 250_000.0;
    const EXEC_US: f64 = 400.0;
    const FANOUT: f64 = 2.0;
    /// W̄ of the synthetic workers: two executors.
    const CAPACITY_US_PER_S: f64 = 2_000_000.0;

    /// A two-operator pipeline `a → b`, two chained requests per input.
    fn app() -> AppModel {
        let op = |n: &str| AppOperator {
            name: n.into(),
            exec_us: EXEC_US,
            keys: 1000,
            zipf: 0.0,
        };
        AppModel {
            name: "pipe".into(),
            operators: vec![op("a"), op("b")],
            edges: vec![AppEdge {
                from: "a".into(),
                to: "b".into(),
                fanout: FANOUT,
            }],
        }
    }

    fn config() -> AutoscaleConfig {
        AutoscaleConfig {
            capacity_prior_us_per_s: Some(CAPACITY_US_PER_S),
            ..AutoscaleConfig::new(PolicyKind::Clasp, 8)
        }
    }

    /// One interval of a synthetic cluster of `workers` workers sharing `input` roots per
    /// second evenly, of which it completes `throughput`; each worker's queue is `queue`.
    fn interval(
        workers: usize,
        input: f64,
        throughput: f64,
        queue: usize,
    ) -> (Vec<WorkerSample>, PlannerSample) {
        let per = throughput / workers as f64;
        let samples = (0..workers)
            .map(|w| WorkerSample {
                worker: w,
                queue_len: queue,
                queue_mean: queue as f64,
                wait_mean_us: queue as f64 * EXEC_US / 2.0,
                local_per_s: per * FANOUT / workers as f64,
                remote_per_s: per * FANOUT * (workers - 1) as f64 / workers as f64,
                destinations: workers - 1,
                operators: vec![
                    crate::metrics::OperatorSample {
                        processed_per_s: per,
                        exec_us: EXEC_US,
                    },
                    crate::metrics::OperatorSample {
                        processed_per_s: per * FANOUT,
                        exec_us: EXEC_US,
                    },
                ],
                edges_per_s: vec![per * FANOUT],
                executor_busy_us_per_s: 0.0,
                network_busy_us_per_s: 0.0,
            })
            .collect();
        let planner = PlannerSample {
            queue_len: queue * workers,
            input_per_s: input,
            throughput_per_s: throughput,
        };
        (samples, planner)
    }

    /// Feeds `intervals` intervals from `t_us` on; returns the decisions with their times.
    fn run(
        a: &mut Autoscaler,
        t_us: &mut f64,
        intervals: usize,
        input: f64,
        throughput_of: impl Fn(usize) -> f64,
        queue_of: impl Fn(usize, usize) -> usize,
    ) -> Vec<ScaleDecision> {
        let mut out = Vec::new();
        for i in 0..intervals {
            *t_us += IV_US;
            let n = a.workers();
            let (s, p) = interval(n, input, throughput_of(n), queue_of(n, i));
            if let Some(d) = a.on_interval(*t_us, &s, &p) {
                a.migrated(*t_us);
                out.push(d);
            }
        }
        out
    }

    /// Roots per second `n` workers sustain in the synthetic cluster (3 executions per root).
    fn capacity_roots(n: usize) -> f64 {
        n as f64 * CAPACITY_US_PER_S / ((1.0 + FANOUT) * EXEC_US) * 0.8
    }

    #[test]
    fn initial_placement_fits_the_first_rate_and_explains_itself() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
        assert_eq!(a.workers(), 0);
        let d = a.initial();
        assert_eq!(d.workers_before, 0);
        assert!(d.workers >= 1 && d.workers == a.workers());
        assert_eq!(d.shares.len(), 2);
        assert_eq!(d.routing.operators(), 2);
        assert_eq!(d.trigger, "initial");
        let kv = parse_line(&d.explanation);
        assert_eq!(kv["policy"], "clasp");
        assert_eq!(kv["trigger"], "initial");
        assert_eq!(kv["workers"], format!("0->{}", d.workers));
        // 500 roots/s × 3 × 400 µs = 0.6 s/s of execution: one 2 s/s worker at h = 0.9.
        assert_eq!(d.workers, 1);
        let e = a.estimates();
        assert_eq!(e.capacity_us_per_s, Some(CAPACITY_US_PER_S));
        assert_eq!(e.w_bar_us, CAPACITY_US_PER_S);
        assert_eq!(e.alpha_us, PAPER_COSTS.alpha_us);
    }

    #[test]
    fn an_unchanged_rate_decides_nothing() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 1000.0);
        a.initial();
        let n0 = a.workers();
        let mut t = 0.0;
        let ds = run(&mut a, &mut t, 240, 1000.0, |_| 1000.0, |_, _| 2);
        assert!(
            ds.is_empty(),
            "{:?}",
            ds.iter().map(|d| &d.explanation).collect::<Vec<_>>()
        );
        assert_eq!(a.workers(), n0);
    }

    #[test]
    fn a_saturated_cluster_scales_up() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
        a.initial();
        assert_eq!(a.workers(), 1);
        let mut t = 0.0;
        let input = 4000.0;
        // The cluster completes what its workers can; queues grow every interval.
        let ds = run(
            &mut a,
            &mut t,
            40,
            input,
            |n| capacity_roots(n).min(input),
            |n, i| {
                if capacity_roots(n) < input {
                    100 * (i + 1)
                } else {
                    1
                }
            },
        );
        let first = ds.first().expect("a decision");
        assert!(
            first.workers > first.workers_before,
            "{}",
            first.explanation
        );
        // Eagerly: within two intervals of the rise, not after the 2 s hold of a fall.
        assert!(first.t_us <= 2.0 * IV_US, "decided at {} µs", first.t_us);
        assert!(
            capacity_roots(a.workers()) >= input,
            "ends with {} workers",
            a.workers()
        );
        assert!(
            parse_line(&first.explanation)["trigger"].starts_with("rate-changed"),
            "{}",
            first.explanation
        );
    }

    #[test]
    fn a_falling_rate_scales_down_after_the_trigger_hold() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 6000.0);
        let d0 = a.initial();
        assert!(d0.workers >= 3, "{}", d0.explanation);
        let mut t = 0.0;
        assert!(run(&mut a, &mut t, 20, 6000.0, |_| 6000.0, |_, _| 1).is_empty());
        let fell_at = t;
        let ds = run(&mut a, &mut t, 40, 1000.0, |_| 1000.0, |_, _| 1);
        let d = ds.first().expect("a scale-down");
        assert!(d.workers < d0.workers, "{}", d.explanation);
        let hold = a.config().triggers.rate_hold_us as f64;
        assert!(
            d.t_us - fell_at >= hold,
            "decided {} µs after the fall",
            d.t_us - fell_at
        );
        assert!(d.key_groups_moved > 0);
        assert_eq!(ds.len(), 1, "one decision, then quiet");
    }

    #[test]
    fn a_cluster_the_model_overrates_is_re_planned_at_once() {
        // The rate does not move, but the workers cannot keep up (the model overrates them):
        // saturation plus lag re-plans without waiting for the 3 s lag hold.
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 3000.0);
        let d0 = a.initial();
        let mut t = 0.0;
        let input = 3000.0;
        let real = |n: usize| 0.5 * capacity_roots(n);
        let ds = run(
            &mut a,
            &mut t,
            12,
            input,
            |n| real(n).min(input),
            |n, i| if real(n) < input { 100 * (i + 1) } else { 1 },
        );
        let d = ds.first().expect("a re-plan");
        assert!(d.trigger.starts_with("saturated"), "{}", d.explanation);
        assert!(d.workers > d0.workers, "{}", d.explanation);
        assert!(d.t_us < a.config().triggers.lag_hold_us as f64);
        // It planned for the input plus the backlog that built up.
        assert!(d.rate_per_s > input, "{}", d.explanation);
        assert!(a.backlog_roots() > 0.0);
    }

    #[test]
    fn no_scale_down_while_a_backlog_drains() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 6000.0);
        let d0 = a.initial();
        let mut t = 0.0;
        // A backlog builds up (6000 in, 3000 out for 1 s)...
        run(&mut a, &mut t, 4, 6000.0, |_| 3000.0, |_, _| 1);
        assert!(a.backlog_roots() > 2000.0, "{}", a.backlog_roots());
        let n = a.workers();
        assert!(n >= d0.workers);
        // ...and the rate falls to 1000/s while it drains slowly (1100/s out).
        let ds = run(&mut a, &mut t, 16, 1000.0, |_| 1100.0, |_, _| 50);
        assert!(
            ds.iter().all(|d| d.workers >= n),
            "scaled down while draining: {:?}",
            ds.iter().map(|d| &d.explanation).collect::<Vec<_>>()
        );
        // Drained (fast now), the fall counts after its hold.
        let ds = run(&mut a, &mut t, 40, 1000.0, |_| 3000.0, |_, _| 1);
        assert!(a.backlog_roots() < 1.0);
        assert!(ds.iter().any(|d| d.workers < n), "never scaled down");
    }

    #[test]
    fn one_migration_at_a_time() {
        let mut b = Autoscaler::new(&app(), config(), PAPER_COSTS, 500.0);
        b.initial();
        let mut t = 0.0;
        let mut decided = false;
        for _ in 0..40 {
            t += IV_US;
            let (s, p) = interval(b.workers(), 6000.0, 1000.0, 500);
            if let Some(d) = b.on_interval(t, &s, &p) {
                assert!(
                    !decided,
                    "a second decision before `migrated`: {}",
                    d.explanation
                );
                decided = true;
            }
        }
        assert!(decided);
        b.migrated(t);
        let mut again = false;
        for _ in 0..40 {
            t += IV_US;
            let (s, p) = interval(b.workers(), 12_000.0, 1000.0, 500);
            again |= b.on_interval(t, &s, &p).is_some();
        }
        assert!(again, "decisions resume after `migrated`");
    }

    #[test]
    fn a_plan_made_for_a_backlog_shrinks_once_it_is_drained() {
        let mut a = Autoscaler::new(&app(), config(), PAPER_COSTS, 1000.0);
        a.initial();
        let mut t = 0.0;
        // The rate triples and the cluster lags for a while: the plan includes the backlog.
        let ds = run(&mut a, &mut t, 3, 3000.0, |_| 1000.0, |_, _| 300);
        let up = ds.last().expect("scaled up");
        assert!(up.rate_per_s > 3000.0, "{}", up.explanation);
        let peak = a.workers();
        // It drains quickly, then the input stays at 3000/s: the backlog's workers go again.
        let ds = run(&mut a, &mut t, 40, 3000.0, |_| 5000.0, |_, _| 1);
        let ds2 = run(&mut a, &mut t, 40, 3000.0, |_| 3000.0, |_, _| 1);
        let all: Vec<&ScaleDecision> = ds.iter().chain(&ds2).collect();
        assert!(
            all.iter()
                .any(|d| d.trigger.starts_with("drained") && d.workers < peak),
            "{:?}",
            all.iter().map(|d| &d.explanation).collect::<Vec<_>>()
        );
    }

    #[test]
    fn bad_input_does_not_panic() {
        let cfg = AutoscaleConfig {
            max_workers: 0,
            headroom: f64::NAN,
            interval_us: -1.0,
            rate_window_intervals: 0,
            capacity_prior_us_per_s: Some(f64::INFINITY),
            ..AutoscaleConfig::new(PolicyKind::FaasFlow, 4)
        };
        let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, f64::NAN);
        a.initial();
        let garbage = WorkerSample {
            worker: 7,
            operators: vec![],
            edges_per_s: vec![f64::NAN; 5],
            ..WorkerSample::default()
        };
        let p = PlannerSample {
            queue_len: 0,
            input_per_s: f64::NAN,
            throughput_per_s: -3.0,
        };
        for i in 0..40 {
            a.on_interval(i as f64 * IV_US, std::slice::from_ref(&garbage), &p);
            a.on_interval(f64::NAN, &[], &PlannerSample::default());
        }
        assert!(a.workers() >= 1);
        // An invalid app: its edges are left out.
        let mut bad = app();
        bad.edges[0].to = "nowhere".into();
        let mut b = Autoscaler::new(&bad, config(), PAPER_COSTS, 100.0);
        assert!(b.initial().workers >= 1);
    }

    #[test]
    fn every_policy_runs_the_same_loop() {
        for kind in PolicyKind::COMPARED {
            let cfg = AutoscaleConfig {
                saturated_throughput_per_worker_prior_per_s: Some(capacity_roots(1)),
                ..AutoscaleConfig {
                    policy: kind,
                    learn_costs: kind == PolicyKind::Clasp,
                    ..config()
                }
            };
            let mut a = Autoscaler::new(&app(), cfg, PAPER_COSTS, 500.0);
            let d = a.initial();
            assert_eq!(parse_line(&d.explanation)["policy"], kind.name());
            let mut t = 0.0;
            let input = 4000.0;
            let ds = run(
                &mut a,
                &mut t,
                40,
                input,
                |n| capacity_roots(n).min(input),
                |n, i| {
                    if capacity_roots(n) < input {
                        100 * (i + 1)
                    } else {
                        1
                    }
                },
            );
            assert!(!ds.is_empty(), "{}: no decision", kind.name());
            assert!(
                a.workers() > d.workers,
                "{}: {} workers",
                kind.name(),
                a.workers()
            );
        }
    }
}
