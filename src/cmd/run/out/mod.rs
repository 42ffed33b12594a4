//! The output side of `clasp run`: plain data in, files and text out.
//!
//! The run loop fills a [`RunRecord`] (one [`IntervalRow`] per metrics interval, one
//! [`MigrationRow`] per migration, one [`DecisionRow`] per scaling decision, and the JSON summary
//! it prints with `--json`); [`files`] checks `--out DIR` before the run ([`prepare_dir`]) and
//! turns the record into its files ([`write_out`]), [`plot`] draws
//! the SVG plots among those files, and [`text`] writes the summary at the end of a run
//! ([`render_summary`]) and the progress line ([`progress_line`]). Nothing here touches the
//! cluster.

mod files;
mod plot;
mod text;

#[cfg(test)]
mod sample;

pub use files::{check_dir, csv, prepare_dir, write_atomic, write_out};
pub use text::{progress_line, render_summary};

use serde_json::Value;

/// One metrics interval of the run, as the planner saw it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IntervalRow {
    /// Seconds since the run started, at the end of the interval.
    pub t_s: f64,
    /// Inputs admitted per second.
    pub input_per_s: f64,
    /// Request trees completed per second.
    pub throughput_per_s: f64,
    /// Active workers.
    pub workers: usize,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    /// The estimator's α (local hand-off cost), µs.
    pub alpha_us: f64,
    /// The estimator's β (remote hand-off cost), µs.
    pub beta_us: f64,
    /// The estimator's γ (per-destination cost), µs.
    pub gamma_us: f64,
    /// The estimator's worker capacity W̄, µs.
    pub w_bar_us: f64,
    /// A migration was in progress during the interval.
    pub migrating: bool,
    /// How late, after falling due by the rate, the interval's records were admitted at the
    /// 99th percentile (ms; 0 at no rate): the ingress's wait, outside the latency columns.
    pub admission_delay_p99_ms: f64,
}

/// One migration: the plan, its two durations (the planner's and the longest worker pause) and
/// its request counts.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MigrationRow {
    pub epoch: u64,
    /// Seconds since the run started, when the plan was sent.
    pub t_s: f64,
    pub workers_before: usize,
    pub workers_after: usize,
    pub key_groups_moved: usize,
    /// The decision → the plan sent (the roots in flight narrowing first).
    pub narrowing_ms: f64,
    /// Plan sent → all completions in.
    pub planner_ms: f64,
    /// The longest worker pause.
    pub worker_pause_ms: f64,
    /// The longest wait of a worker's executor for its markers (it executes meanwhile).
    pub marker_wait_ms: f64,
    pub exported: u64,
    pub forwarded: u64,
    pub held: u64,
    /// New-epoch requests held at the upstream gate.
    pub gated: u64,
    /// Inputs admitted while the migration was in progress.
    pub admitted_during: u64,
    /// `"policy"` or `"chaos"`.
    pub reason: String,
}

/// One scaling decision with its one-line explanation (`key=value` pairs).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DecisionRow {
    pub t_s: f64,
    pub line: String,
}

/// Everything a finished (or interrupted) run reports.
pub struct RunRecord {
    /// The full JSON summary (what `--json` prints), built by the caller.
    pub summary: Value,
    pub intervals: Vec<IntervalRow>,
    pub migrations: Vec<MigrationRow>,
    pub decisions: Vec<DecisionRow>,
    /// Every worker's figures, per interval.
    pub workers: Vec<WorkerRow>,
}

/// One worker over one interval: what the planner's estimator regresses (rates per second).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct WorkerRow {
    /// Seconds since the run started, at the end of the interval.
    pub t_s: f64,
    /// The worker's id (as `clasp worker N` and `workers_lost` name it).
    pub worker: usize,
    /// The worker process's CPU µs per second, idle spinning excluded (None: not measured).
    pub cpu_us_per_s: Option<f64>,
    /// Σ over operators of processed × mean execution time (µs per second).
    pub exec_us_per_s: f64,
    /// Local chained requests per second.
    pub local_per_s: f64,
    /// Remote chained requests per second.
    pub remote_per_s: f64,
    /// Remote chained requests other workers sent it, per second.
    pub remote_received_per_s: f64,
    /// Input records per second the ingress admitted to it.
    pub roots_per_s: f64,
    /// Distinct other workers it sent to.
    pub destinations: usize,
    /// Executor busy µs per second.
    pub busy_us_per_s: f64,
    /// Times per second a thread of the worker went to sleep (voluntary context switches).
    pub sleeps_per_s: f64,
    /// CPU µs per second its threads spent going to sleep and waking up (in `cpu_us_per_s`).
    pub sleep_cpu_us_per_s: f64,
    /// CPU-quota periods in which its group was throttled in the interval (None: uncapped).
    pub throttled_periods: Option<u64>,
    /// TCP batches per second its transport sent and received.
    pub batches_per_s: f64,
    /// Of `cpu_us_per_s`, its executor threads' (None: not measured); of
    /// `sleep_cpu_us_per_s` and `sleeps_per_s`, the executors' part.
    pub exec_cpu_us_per_s: Option<f64>,
    pub exec_sleep_cpu_us_per_s: f64,
    pub exec_sleeps_per_s: f64,
}
