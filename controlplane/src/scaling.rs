//! Parallelism (executors per operator per worker), the re-planning triggers, and the one-line
//! explanation of a decision.
//!
//! Why parallelism is derived from the placement rather than planned on its own: a placement
//! already fixes how much of each operator's load every worker carries, so the executors an
//! operator needs on a worker follow from that load and what one executor sustains; a second,
//! independent rule could only disagree with the packing.

use crate::model::{CostModel, Problem, SHARE_EPSILON, Shares};

/// Re-plan when the input rate moved by more than this fraction from the last planned rate...
pub const DEFAULT_RATE_CHANGE_THRESHOLD: f64 = 0.2;
/// ...and stayed there for this long (µs) — when it fell (scale down lazily)...
pub const DEFAULT_RATE_HOLD_US: u64 = 2_000_000;
/// ...or for this long when it rose (scale up eagerly: every interval of waiting adds
/// `(λ − capacity) × interval` to a backlog the cluster must then drain).
pub const DEFAULT_RATE_UP_HOLD_US: u64 = 250_000;
/// Re-plan when throughput trailed the input rate for this long (µs)...
pub const DEFAULT_LAG_HOLD_US: u64 = 3_000_000;
/// ...by more than this fraction of the input rate.
pub const DEFAULT_LAG_TOLERANCE: f64 = 0.05;

/// Executors of each worker that run operator o:
/// `P_{o,w} = clamp(⌈L_{o,w} / ((B_w − γ·δ_w) / E)⌉, 1, E)` where σ_o(w) > 0, else 0, with
/// `B_w = B` unless a latency target lowered w's headroom (`Problem::budget_factor`).
///
/// `L_{o,w} = σ_o(w)·(D̃_o + Σ_{o→o_s} Ẽ·[α·σ_{o_s}(w) + β·(1 − σ_{o_s}(w))])` is the work o
/// brings to w (its execution and the dispatch of its chained requests, which the executor that
/// ran it pays); one of w's `E = executors_per_worker` executors sustains its share of the
/// budget left after the worker's connections, `(B − γ·δ_w) / E` (every executor pays its part
/// of γ, whatever operators it runs: an operator sized against `B / E` alone overloads its
/// executors by that part). A saturated placement (a fraction of the demand placed) is
/// sized for the demand as given, so its operators get up to all E executors.
/// Returns `[o][w]` for `w < workers`.
pub fn executor_parallelism(
    problem: &Problem,
    shares: &Shares,
    workers: usize,
    executors_per_worker: usize,
) -> Vec<Vec<usize>> {
    let e = executors_per_worker.max(1);
    let c = problem.costs;
    let delta = crate::model::distinct_destinations(problem, shares, workers);
    let budget = problem.budget_us_per_s();
    // At least a hundredth of the budget per executor: a worker whose connections eat it all
    // gets all its executors for anything it hosts.
    // Worker w's budget is B·`Problem::budget_factor(w)` (below B under a latency target): each
    // of its executors is sized to the same utilisation as the worker.
    let per_executor_us_per_s = |w: usize| {
        let budget = budget * problem.budget_factor(w);
        (budget - c.gamma_us * delta[w] as f64).max(0.01 * budget) / e as f64
    };
    let out = problem.out_edges();
    let share = |o: usize, w: usize| shares.get(o).and_then(|r| r.get(w)).copied().unwrap_or(0.0);
    (0..problem.operators.len())
        .map(|o| {
            (0..workers)
                .map(|w| {
                    let s = share(o, w);
                    if s <= SHARE_EPSILON {
                        return 0;
                    }
                    let dispatch: f64 = out[o]
                        .iter()
                        .map(|&ei| {
                            let edge = &problem.edges[ei];
                            let local = share(edge.to, w);
                            edge.rate_per_s * (c.alpha_us * local + c.beta_us * (1.0 - local))
                        })
                        .sum();
                    let load = s * (problem.operators[o].demand_us_per_s + dispatch);
                    let need = (load / per_executor_us_per_s(w).max(1e-9)).ceil();
                    if need.is_finite() {
                        (need as usize).clamp(1, e)
                    } else {
                        e
                    }
                })
                .collect()
        })
        .collect()
}

/// Each operator's executors summed over the workers (what a decision line reports).
pub fn total_parallelism(parallelism: &[Vec<usize>]) -> Vec<usize> {
    parallelism.iter().map(|row| row.iter().sum()).collect()
}

/// Why a re-plan fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    RateChanged,
    ThroughputLagging,
    /// A worker is saturated (the saturation detector) and throughput trails the input: the
    /// planner's model of this configuration is wrong, re-plan at once.
    Saturated,
    /// The backlog a plan made room for is gone: re-plan for the input alone.
    Drained,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::RateChanged => "rate-changed",
            Trigger::ThroughputLagging => "throughput-lagging",
            Trigger::Saturated => "saturated",
            Trigger::Drained => "drained",
        }
    }
}

/// Trigger settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TriggerConfig {
    pub rate_change_threshold: f64,
    /// Hold of a fall of the rate (µs).
    pub rate_hold_us: u64,
    /// Hold of a rise of the rate (µs).
    pub rate_up_hold_us: u64,
    pub lag_hold_us: u64,
    pub lag_tolerance: f64,
}

impl TriggerConfig {
    /// The same 2 s hold both ways (the triggers' first, symmetric design).
    pub fn symmetric() -> Self {
        TriggerConfig {
            rate_up_hold_us: DEFAULT_RATE_HOLD_US,
            ..TriggerConfig::default()
        }
    }
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig {
            rate_change_threshold: DEFAULT_RATE_CHANGE_THRESHOLD,
            rate_hold_us: DEFAULT_RATE_HOLD_US,
            rate_up_hold_us: DEFAULT_RATE_UP_HOLD_US,
            lag_hold_us: DEFAULT_LAG_HOLD_US,
            lag_tolerance: DEFAULT_LAG_TOLERANCE,
        }
    }
}

/// The two triggers as a state machine over (time, λ, Λ) samples; time is injected.
#[derive(Clone, Debug)]
pub struct Triggers {
    config: TriggerConfig,
    planned_rate_per_s: f64,
    /// When the rate moved away, and whether up.
    moved_since_us: Option<(u64, bool)>,
    lagging_since_us: Option<u64>,
}

impl Triggers {
    pub fn new(config: TriggerConfig, planned_rate_per_s: f64) -> Self {
        Triggers {
            config,
            planned_rate_per_s,
            moved_since_us: None,
            lagging_since_us: None,
        }
    }

    /// Records that a plan was made for `rate_per_s`; both windows restart.
    pub fn planned(&mut self, rate_per_s: f64) {
        self.planned_rate_per_s = rate_per_s;
        self.moved_since_us = None;
        self.lagging_since_us = None;
    }

    /// Feeds one sample; returns the trigger that fired, if any.
    pub fn observe(
        &mut self,
        now_us: u64,
        input_per_s: f64,
        throughput_per_s: f64,
    ) -> Option<Trigger> {
        self.observe_draining(now_us, input_per_s, throughput_per_s, false)
    }

    /// [`Triggers::observe`], where `draining` says the cluster still works off a backlog: a
    /// fall of the rate does not count then (a cluster that is still draining is not scaled
    /// down; the fall's hold starts once it has drained).
    pub fn observe_draining(
        &mut self,
        now_us: u64,
        input_per_s: f64,
        throughput_per_s: f64,
        draining: bool,
    ) -> Option<Trigger> {
        let c = self.config;
        let base = self.planned_rate_per_s.max(1e-9);
        let change = (input_per_s - self.planned_rate_per_s) / base;
        let rose = change > c.rate_change_threshold;
        let fell = -change > c.rate_change_threshold && !draining;
        // A move that flips direction starts its hold again.
        self.moved_since_us = match (self.moved_since_us, rose, fell) {
            (Some((t, up)), true, _) if up => Some((t, true)),
            (Some((t, up)), _, true) if !up => Some((t, false)),
            (_, true, _) => Some((now_us, true)),
            (_, _, true) => Some((now_us, false)),
            _ => None,
        };
        let lagging = throughput_per_s < (1.0 - c.lag_tolerance) * input_per_s;
        self.lagging_since_us = if lagging {
            Some(self.lagging_since_us.unwrap_or(now_us))
        } else {
            None
        };
        if let Some((t, up)) = self.moved_since_us {
            let hold = if up {
                c.rate_up_hold_us
            } else {
                c.rate_hold_us
            };
            if now_us.saturating_sub(t) >= hold {
                return Some(Trigger::RateChanged);
            }
        }
        if self
            .lagging_since_us
            .is_some_and(|t| now_us.saturating_sub(t) >= c.lag_hold_us)
        {
            return Some(Trigger::ThroughputLagging);
        }
        None
    }

    /// Since when the rate has been away from the planned rate, and whether it rose.
    pub fn moved_since_us(&self) -> Option<(u64, bool)> {
        self.moved_since_us
    }

    /// The rate the last plan was made for.
    pub fn planned_rate_per_s(&self) -> f64 {
        self.planned_rate_per_s
    }
}

/// Everything a decision line reports.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub policy: String,
    pub trigger: String,
    pub rate_per_s: f64,
    pub projected_demand_us_per_s: f64,
    pub capacity_us_per_s: f64,
    pub costs: CostModel,
    pub workers_before: usize,
    pub workers_after: usize,
    /// (operator, parallelism before, after).
    pub parallelism: Vec<(String, usize, usize)>,
    pub key_groups_moved: usize,
    /// The load L_w the plan puts on each of its workers (µs per second, in the model's units:
    /// execution, α, β, γ), to hold against h·W̄.
    pub loads_us_per_s: Vec<f64>,
}

impl Explanation {
    /// One line of `key=value` pairs separated by spaces (values contain no spaces), e.g.
    /// `policy=clasp trigger=rate-changed rate_per_s=1200 ... workers=3->4 parallelism=split:2->3,count:4->5 kg_moved=310 loads_us_per_s=510000/498000/470000/455000`.
    pub fn line(&self) -> String {
        let par: Vec<String> = self
            .parallelism
            .iter()
            .map(|(n, a, b)| format!("{n}:{a}->{b}"))
            .collect();
        format!(
            "policy={} trigger={} rate_per_s={:.1} demand_us_per_s={:.0} wbar_us_per_s={:.0} alpha_us={:.2} beta_us={:.2} gamma_us={:.0} workers={}->{} parallelism={} kg_moved={} loads_us_per_s={}",
            self.policy,
            self.trigger,
            self.rate_per_s,
            self.projected_demand_us_per_s,
            self.capacity_us_per_s,
            self.costs.alpha_us,
            self.costs.beta_us,
            self.costs.gamma_us,
            self.workers_before,
            self.workers_after,
            if par.is_empty() {
                "-".to_string()
            } else {
                par.join(",")
            },
            self.key_groups_moved,
            if self.loads_us_per_s.is_empty() {
                "-".to_string()
            } else {
                self.loads_us_per_s
                    .iter()
                    .map(|l| format!("{l:.0}"))
                    .collect::<Vec<_>>()
                    .join("/")
            }
        )
    }
}

/// Parses a decision line back into `key → value` (what a program reading the log does).
pub fn parse_line(line: &str) -> std::collections::BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}
