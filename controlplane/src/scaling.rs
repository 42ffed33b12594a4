//! Parallelism (eq. 7–8), the re-planning triggers, and the one-line explanation of a decision.

use crate::model::{CostModel, Shares};

/// P_tot may grow by at most this factor in one decision.
pub const PARALLELISM_GROWTH_CAP: f64 = 2.0;
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

/// Per-operator total parallelism (eq. 7–8): `P_tot = s·P_tot^cur` (capped at
/// [`PARALLELISM_GROWTH_CAP`]× the current), split in proportion to `N_o·τ̄_o`.
pub fn operator_parallelism(current_total: f64, s: f64, exec_load_us_per_s: &[f64]) -> Vec<f64> {
    let p_tot = (s * current_total)
        .min(PARALLELISM_GROWTH_CAP * current_total)
        .max(1.0);
    let total: f64 = exec_load_us_per_s.iter().sum();
    exec_load_us_per_s
        .iter()
        .map(|&l| {
            if total > 0.0 {
                p_tot * l / total
            } else {
                p_tot / exec_load_us_per_s.len().max(1) as f64
            }
        })
        .collect()
}

/// Executors of w that own key groups of o: `P_{o,w} = max(1, ⌈P_o·σ_o(w)⌉)` where σ_o(w) > 0,
/// else 0.
pub fn worker_parallelism(operator_parallelism: &[f64], shares: &Shares) -> Vec<Vec<usize>> {
    operator_parallelism
        .iter()
        .zip(shares)
        .map(|(&p, row)| {
            row.iter()
                .map(|&s| {
                    if s > crate::model::SHARE_EPSILON {
                        ((p * s).ceil() as usize).max(1)
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect()
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
}

impl Explanation {
    /// One line of `key=value` pairs separated by spaces (values contain no spaces), e.g.
    /// `policy=clasp trigger=rate-changed rate_per_s=1200 ... workers=3->4 parallelism=split:2->3,count:4->5 kg_moved=310`.
    pub fn line(&self) -> String {
        let par: Vec<String> = self
            .parallelism
            .iter()
            .map(|(n, a, b)| format!("{n}:{a}->{b}"))
            .collect();
        format!(
            "policy={} trigger={} rate_per_s={:.1} demand_us_per_s={:.0} wbar_us_per_s={:.0} alpha_us={:.2} beta_us={:.2} gamma_us={:.0} workers={}->{} parallelism={} kg_moved={}",
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
            self.key_groups_moved
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
