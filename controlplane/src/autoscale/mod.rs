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
//! What the loop does per interval (docs/controlplane.md records where it departs from the
//! design it was built from):
//! 1. every active worker's sample goes through the saturation detector; saturated samples feed
//!    the saturated estimator of α, β, γ and W̄, and every worker's sample with a measured CPU
//!    time feeds the busy-time estimator (except while a migration is in progress: its CPU is
//!    the migration's); `AutoscaleConfig::estimator_kind` says whose α, β, γ are planned with,
//!    W̄ always comes from the saturated one (only CLASP learns by default: the baselines have
//!    no capacity model, they plan with whatever the estimator was given);
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
use crate::baselines::{Decision, Observed, Policy, policy};
use crate::estimator::CapacityEstimator;
use crate::headroom::{HeadroomModel, HeadroomTarget, chain_hops};
use crate::metrics::{
    Aggregate, DerivationContext, PlannerSample, SaturationDetector, WorkerSample, aggregate,
    derive_problem, projection_factor, scheduling_and_execution_us_per_s,
};
use crate::model::{CostModel, Problem, Shares};
use crate::scaling::{Trigger, Triggers};
use clasp_protocol::Slot;
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::split::reassign;

mod config;
mod explain;
mod initial;
mod learn;
mod unpriced;

use initial::moved_between;
use learn::Learner;
pub use unpriced::{MIN_CAPACITY_FRACTION, UNPRICED_SMOOTHING, Unpriced};

pub use config::{
    AutoscaleConfig, DEFAULT_BACKLOG_DRAIN_US, DEFAULT_DRAINING_BACKLOG_US,
    DEFAULT_EXECUTORS_PER_WORKER, DEFAULT_INTERVAL_US, DEFAULT_PROFILE_SMOOTHING,
    DEFAULT_PROFILE_STEADY_TOLERANCE, DEFAULT_RATE_MARGIN, DEFAULT_RATE_WINDOW_INTERVALS,
};

/// W̄ planned with while the estimator has neither a saturated sample nor a prior (µs per s):
/// one fully busy core.
pub const FALLBACK_CAPACITY_US_PER_S: f64 = 1_000_000.0;
/// Λ below this fraction of λ counts as "saturated" for FaaSFlow's per-worker throughput.
pub const FAASFLOW_LAG_FRACTION: f64 = 0.95;
/// A plan whose backlog share exceeded this fraction of λ is re-made once the backlog is gone.
pub const DRAINED_REPLAN_FRACTION: f64 = 0.1;
/// Per-interval input rates kept for the "rate since it moved" average.
const RATE_HISTORY_INTERVALS: usize = 64;
/// The rate planned for averages at most this many of the latest intervals.
const RATE_PLAN_MAX_INTERVALS: usize = 8;

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
    /// `parallelism[o][w]`: executors of worker w that run operator o
    /// (`scaling::executor_parallelism`; 0 where o has no share on w).
    pub parallelism: Vec<Vec<usize>>,
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
    /// Per coefficient, the samples behind the estimate (busy-time: rows with the regressor > 0
    /// while identified, 0 at the prior; saturated: differences that moved the regressor).
    pub alpha_samples: usize,
    pub beta_samples: usize,
    pub gamma_samples: usize,
    /// The estimator the costs come from: `busy-time` or `saturated`.
    pub estimator: &'static str,
    /// Busy-time only: CPU µs a worker thread's sleep and wake-up cost, once identified (not
    /// used by placement).
    pub wake_us: Option<f64>,
    /// Busy-time only: CPU µs per input record a worker takes in from the ingress (receipt and
    /// completion report), once identified (not used by placement).
    pub root_us: Option<f64>,
    /// CPU µs per second an active capped worker spends that α, β, γ and execution do not
    /// price, smoothed; taken off the cap to give `w_bar_us` ([`Unpriced`]). 0 when uncapped.
    pub unpriced_us_per_s: f64,
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
    learner: Learner,
    /// The capped workers' CPU the cost model does not price (taken off a known W̄).
    unpriced: Unpriced,
    detector: SaturationDetector,
    triggers: Triggers,
    profile: Aggregate,
    window: VecDeque<Interval>,
    workers: usize,
    routing: RoutingTable,
    /// The last decision's executors per operator per worker.
    parallelism: Vec<Vec<usize>>,
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
    /// Per-worker queueing fits and headrooms (`AutoscaleConfig::latency_target_ms`).
    headroom: Option<HeadroomModel>,
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
        let headroom = cfg.latency_target_ms.map(|ms| {
            HeadroomModel::new(HeadroomTarget {
                target_us: ms * 1e3,
                floor: cfg.headroom_floor,
                ceiling: cfg.headroom,
                executors: cfg.executors_per_worker,
                hops: chain_hops(app.operators.len(), &edges),
            })
        });
        Autoscaler {
            names: app.operators.iter().map(|o| o.name.clone()).collect(),
            edges,
            policy: policy(cfg.policy),
            learner: Learner::new(priors, &cfg),
            unpriced: Unpriced::default(),
            detector: SaturationDetector::new(cfg.saturation),
            triggers: Triggers::new(cfg.triggers, first),
            profile,
            window: VecDeque::new(),
            workers: 0,
            routing: RoutingTable::default(),
            parallelism: Vec::new(),
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
            headroom,
            cfg,
        }
    }

    /// Replaces the saturated estimator (one calibrated elsewhere, as the simulator's lab does).
    pub fn with_estimator(mut self, estimator: CapacityEstimator) -> Self {
        self.learner.saturated = estimator;
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

    /// One interval of metrics from the active workers and the planner, taken at `t_us`.
    /// Returns a decision when the policy wants another worker count or placement: the caller
    /// migrates, then calls [`Autoscaler::migrated`].
    pub fn on_interval(
        &mut self,
        t_us: f64,
        samples: &[WorkerSample],
        planner: &PlannerSample,
    ) -> Option<ScaleDecision> {
        self.on_interval_with_parked(t_us, samples, &[], planner)
    }

    /// [`Autoscaler::on_interval`] with the parked workers' samples too: they feed only the
    /// busy-time estimator (an idle worker's CPU time is the idle overhead it regresses out).
    pub fn on_interval_with_parked(
        &mut self,
        t_us: f64,
        samples: &[WorkerSample],
        parked: &[WorkerSample],
        planner: &PlannerSample,
    ) -> Option<ScaleDecision> {
        if self.cfg.learn_costs && !self.migrating {
            self.learner.observe_busy(t_us, samples, parked);
            self.unpriced.observe(samples);
        }
        if !self.migrating {
            // Policies with an overhead model (Zhang24) refit it from measured times.
            let (sched, exec) = scheduling_and_execution_us_per_s(samples);
            self.policy.observe_overhead(sched, exec);
        }
        let saturated = self.observe_saturation(samples);
        self.record_rates(t_us, samples, planner);
        let (lam, big_lambda) = self.window_rates();
        if big_lambda < FAASFLOW_LAG_FRACTION * lam && self.workers > 0 {
            self.saturated_per_worker_per_s = Some(big_lambda / self.workers as f64);
        }
        self.refresh_profile(t_us, lam, big_lambda);
        if !self.migrating && !saturated && self.steady(t_us, lam, big_lambda) {
            self.observe_queueing(samples);
        }
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
        let mut problem = self.problem_at(rate);
        let observed = self.observed(self.workers, rate);
        let d = self.decide(&mut problem, observed.as_ref());
        // The dead band of the rate trigger is centred on the input rate, not on the margin
        // or the backlog: the `drained` trigger takes the backlog's share away again.
        self.triggers.planned(plan.base_per_s);
        self.drain_planned_per_s = plan.drain_per_s;
        self.drained_since_us = None;
        let workers = d.placement.workers.max(1);
        let new_routing = reassign(&self.routing, &d.placement.shares);
        let moved = moved_between(&self.routing, &new_routing);
        if moved == 0 && workers == self.workers {
            return None;
        }
        // Saturated at the most workers the policy may use: another placement on the same
        // workers cannot add capacity, and each move pauses workers that are already behind
        // (a live run re-placed every few seconds, losing throughput to the moves).
        if matches!(trig, Trigger::Saturated) && workers == self.workers && d.placement.saturated {
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
        self.parallelism = decision.parallelism.clone();
        self.last_decision_us = t_us;
        self.migrating = true;
        Some(decision)
    }

    /// Step 1 of the loop: every sample through the saturation detector, saturated ones into
    /// the estimator when the policy learns costs. Whether any worker was saturated.
    fn observe_saturation(&mut self, samples: &[WorkerSample]) -> bool {
        let mut saturated = false;
        for s in samples {
            if self.detector.observe(s) {
                saturated = true;
                if self.cfg.learn_costs {
                    self.learner.observe_saturated(s);
                }
            }
        }
        saturated
    }

    /// Step 2 of the loop, bookkeeping: the backlog `Σ (λ − Λ)·Δt`, the recent input rates and
    /// the rate window.
    fn record_rates(&mut self, t_us: f64, samples: &[WorkerSample], planner: &PlannerSample) {
        let (input, done) = (
            rate_or_zero(planner.input_per_s),
            rate_or_zero(planner.throughput_per_s),
        );
        // Refused inputs were never admitted: they are not a backlog to drain.
        let admitted = (input - rate_or_zero(planner.refused_per_s)).max(0.0);
        let dt_us = match self.last_t_us {
            Some(last) if t_us.is_finite() && t_us > last => t_us - last,
            _ => self.cfg.interval_us,
        };
        if t_us.is_finite() {
            self.last_t_us = Some(t_us);
        }
        self.in_flight_roots = (self.in_flight_roots + (admitted - done) * dt_us / 1e6).max(0.0);
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
        self.learner.saturated.reset_covariance();
    }

    pub fn estimates(&self) -> Estimates {
        let c = self.learner.costs();
        let [alpha_samples, beta_samples, gamma_samples] = self.learner.samples();
        Estimates {
            alpha_us: c.alpha_us,
            beta_us: c.beta_us,
            gamma_us: c.gamma_us,
            w_bar_us: self.capacity_us_per_s(),
            capacity_us_per_s: self.learner.saturated.capacity_us_per_s(),
            alpha_samples,
            beta_samples,
            gamma_samples,
            estimator: self.learner.kind.name(),
            wake_us: self.learner.wake_us(),
            root_us: self.learner.root_us(),
            unpriced_us_per_s: if self.prices_unpriced() {
                self.unpriced
                    .us_per_s(self.learner.costs(), self.cfg.beta_receiver_share)
            } else {
                0.0
            },
        }
    }

    /// Lets later decisions use up to `max_workers` workers (the pool grew: a worker joined the
    /// running cluster). Never below the workers in use.
    pub fn set_max_workers(&mut self, max_workers: usize) {
        self.cfg.max_workers = max_workers.max(self.workers).max(1);
    }

    /// Worker `index` (of the pool, in the order decisions number workers) is gone: the pool
    /// shrinks by one, and the placement this autoscaler assumes moves that worker's key groups
    /// to the other workers in use, renumbering those after it, as the driver did.
    pub fn worker_left(&mut self, index: usize) {
        self.cfg.max_workers = self.cfg.max_workers.saturating_sub(1).max(1);
        // A decision not carried out yet may place key groups on the worker that left (the
        // driver then drops it): decide afresh rather than wait for it.
        self.migrating = false;
        if index >= self.workers || self.workers <= 1 {
            return;
        }
        let rest = self.workers - 1;
        let r = &self.routing;
        let kgs = r.key_groups();
        self.routing = RoutingTable::from_fn(r.epoch(), r.operators(), kgs, |o, g| {
            let w = r.owner(o, g).index();
            Slot::at(match w.cmp(&index) {
                std::cmp::Ordering::Less => w,
                std::cmp::Ordering::Greater => w - 1,
                std::cmp::Ordering::Equal => (o * kgs + g.index()) % rest,
            })
        });
        self.workers = rest;
        if let Some(m) = &mut self.headroom {
            m.worker_left(index);
        }
        for row in &mut self.parallelism {
            if index < row.len() {
                row.remove(index);
            }
        }
    }

    /// The most workers decisions may use.
    pub fn max_workers(&self) -> usize {
        self.cfg.max_workers
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

    /// The policy's decision on `problem`. The latency target never costs throughput: when its
    /// headrooms cannot hold the demand on the workers there are, the problem drops them and
    /// the decision plans with h.
    fn decide(&mut self, problem: &mut Problem, observed: Option<&Observed>) -> Decision {
        let d = self.policy.decide(problem, observed);
        if d.placement.saturated && !problem.worker_headroom.is_empty() {
            problem.worker_headroom.clear();
            return self.policy.decide(problem, observed);
        }
        d
    }

    /// The latency-aware option: every active worker's interval refits its queueing relation
    /// (with the costs and W̄ planned with, so ρ is the quantity the headroom bounds). Steady
    /// windows without a saturated worker only: a backlog's queueing says how far behind the
    /// cluster is, not what a utilisation costs, and fitting it would lower the headrooms,
    /// which deepens the next backlog.
    fn observe_queueing(&mut self, samples: &[WorkerSample]) {
        let (costs, w_bar) = (self.learner.costs(), self.capacity_us_per_s());
        if let Some(m) = &mut self.headroom {
            for s in samples {
                m.observe(s, costs, w_bar);
            }
        }
    }

    /// The headroom of each of the first `max_workers` workers the next plan packs: h_w from
    /// the latency target, or empty when the option is off (every worker: h).
    pub fn worker_headrooms(&self) -> Vec<f64> {
        self.headroom
            .as_ref()
            .map_or_else(Vec::new, |m| m.headrooms(self.cfg.max_workers))
    }

    /// The problem the policy would see at `rate_per_s` inputs per second now.
    pub fn problem_at(&self, rate_per_s: f64) -> Problem {
        let ctx = DerivationContext {
            operator_names: &self.names,
            edges: &self.edges,
            capacity_us_per_s: self.capacity_us_per_s(),
            headroom: self.cfg.headroom,
            costs: self.learner.costs(),
            max_workers: self.cfg.max_workers,
            slots_per_worker: self.cfg.slots_per_worker,
        };
        Problem {
            packing: self.cfg.packing,
            beta_receiver_share: self.cfg.beta_receiver_share,
            worker_headroom: self.worker_headrooms(),
            ..derive_problem(&ctx, &self.profile, rate_or_zero(rate_per_s))
        }
    }

    /// W̄: a known cap less what the model does not price (CLASP's model only: the baselines
    /// plan with the cap as they always did), else the saturated estimator's, else the fallback.
    fn capacity_us_per_s(&self) -> f64 {
        let known = self
            .cfg
            .capacity_prior_us_per_s
            .filter(|_| self.cfg.capacity_known)
            .map(|cap| {
                if self.prices_unpriced() {
                    self.unpriced.capacity_us_per_s(
                        cap,
                        self.learner.costs(),
                        self.cfg.beta_receiver_share,
                    )
                } else {
                    cap
                }
            });
        known
            .or_else(|| self.learner.saturated.capacity_us_per_s())
            .filter(|c| c.is_finite() && *c > 0.0)
            .unwrap_or(FALLBACK_CAPACITY_US_PER_S)
    }

    /// Whether W̄ is a known cap corrected for what the model does not price (see [`Unpriced`]).
    fn prices_unpriced(&self) -> bool {
        self.cfg.capacity_known && self.cfg.learn_costs
    }

    fn observed(&self, workers: usize, target_rate_per_s: f64) -> Option<Observed> {
        self.saturated_per_worker_per_s.map(|per| Observed {
            workers,
            saturated_throughput_per_s: per * workers as f64,
            target_rate_per_s,
        })
    }

    /// A full window after the last migration in which Λ is within the steady tolerance of λ.
    fn steady(&self, t_us: f64, lam: f64, big_lambda: f64) -> bool {
        let k = self.window.len();
        k == self.cfg.rate_window_intervals
            && t_us - self.last_migration_us > k as f64 * self.cfg.interval_us
            && lam > 0.0
            && big_lambda > 0.0
            && (big_lambda - lam).abs() <= self.cfg.profile_steady_tolerance * lam
    }

    /// Mixes a steady window into the per-input profile.
    fn refresh_profile(&mut self, t_us: f64, lam: f64, big_lambda: f64) {
        if !self.steady(t_us, lam, big_lambda) {
            return;
        }
        let k = self.window.len();
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
}
