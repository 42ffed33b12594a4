//! Parallelism (eq. 7–8), the re-planning triggers, and the one-line explanation of a decision.

use crate::model::{CostModel, Shares};

/// P_tot may grow by at most this factor in one decision.
pub const PARALLELISM_GROWTH_CAP: f64 = 2.0;
/// Re-plan when the input rate moved by more than this fraction from the last planned rate...
pub const DEFAULT_RATE_CHANGE_THRESHOLD: f64 = 0.2;
/// ...and stayed there for this long (µs).
pub const DEFAULT_RATE_HOLD_US: u64 = 2_000_000;
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
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::RateChanged => "rate-changed",
            Trigger::ThroughputLagging => "throughput-lagging",
        }
    }
}

/// Trigger settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TriggerConfig {
    pub rate_change_threshold: f64,
    pub rate_hold_us: u64,
    pub lag_hold_us: u64,
    pub lag_tolerance: f64,
}

impl Default for TriggerConfig {
    fn default() -> Self {
        TriggerConfig {
            rate_change_threshold: DEFAULT_RATE_CHANGE_THRESHOLD,
            rate_hold_us: DEFAULT_RATE_HOLD_US,
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
    moved_since_us: Option<u64>,
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
        let c = self.config;
        let base = self.planned_rate_per_s.max(1e-9);
        let moved =
            ((input_per_s - self.planned_rate_per_s) / base).abs() > c.rate_change_threshold;
        self.moved_since_us = if moved {
            Some(self.moved_since_us.unwrap_or(now_us))
        } else {
            None
        };
        let lagging = throughput_per_s < (1.0 - c.lag_tolerance) * input_per_s;
        self.lagging_since_us = if lagging {
            Some(self.lagging_since_us.unwrap_or(now_us))
        } else {
            None
        };
        if self
            .moved_since_us
            .is_some_and(|t| now_us - t >= c.rate_hold_us)
        {
            return Some(Trigger::RateChanged);
        }
        if self
            .lagging_since_us
            .is_some_and(|t| now_us - t >= c.lag_hold_us)
        {
            return Some(Trigger::ThroughputLagging);
        }
        None
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
