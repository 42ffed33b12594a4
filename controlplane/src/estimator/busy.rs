//! The busy-time estimator: α, β, γ from every interval, saturated or not (`busy-time`, and
//! `busy-split` with each worker's CPU split by thread; below).
//!
//! Each worker's measured CPU time per second, less the time its operators ran and the time its
//! threads spent inside their sleeping waits, is what its chained requests and its idle
//! housekeeping cost:
//!
//! `cpu_w − E_w − P_w = c0 + α·R^l_w + β·R^r_w + γ·δ_w + ω·S_w + ρ·I_w`
//!
//! (the ρ·I_w term is below). `P_w` is measured by the worker's threads themselves: each reads
//! its CPU clock around the waits that put it to sleep (an executor's futex park, the network
//! thread's waiting `io_uring_enter`). On a virtual machine that CPU is most of what a lightly
//! loaded worker spends, and what one sleep costs swings with what the host does, so no
//! coefficient on the sleep count prices it: left in `y`, it is noise many times the requests'
//! own cost, and α and β were never identified in a live run (measured on the main job:
//! taken out, the residual's spread halves). `S_w` is how often the worker's threads went to
//! sleep (voluntary context switches per second) and ω what a sleep costs beyond `P_w`: the
//! waker's side, and the switch back. Beyond the paper, and needed on real
//! machines: at low load every request arrives alone, a thread sleeps and wakes around it, and
//! on a virtual machine each such pair costs tens of µs of the worker's own CPU (timer and idle
//! exits) — far more than the hand-off itself. Left out of the regression, that cost lands on
//! α (the local count moves with the load, and so do the wake-ups), which then says what a
//! request costs at one load, not what it costs. Wake-ups do not grow with the load as the
//! counts do (batches grow instead, and a saturated worker never sleeps), so the two separate
//! as the load moves. ω is reported but not used by placement: a saturated worker does not
//! sleep.
//!
//! `I_w` is the input records per second the worker took in from the ingress, and ρ what one
//! costs it beyond its operators' execution: receiving it from the network and reporting its
//! completion (the latency ledger's deltas). Also beyond the paper: left out, ρ lands on α,
//! since every input record brings a fixed number of local requests (measured on WC: α at 3×
//! its calibrated value). On one placement I and R^l move together; a placement that puts the
//! source and its successors on different workers separates them. ρ is reported, not used by
//! placement.
//!
//! **Split rows** (`split_sides`, the `busy-split` estimator live runs use). On WC every input
//! record brings ten local requests on the worker that takes it in, so I and R^l move together
//! on every placement the planner picks and ρ is never identified: it rode on α, which came out
//! at 3–8× what `clasp calibrate` measures for a local request (its network-thread share: the
//! record's receipt, the executor's wake-up, the ledger delta forwarded). But a local request
//! costs the network thread nothing. So where a worker reports its executor threads' CPU apart
//! (their thread clocks), its row is split in two rows of the same regression:
//!
//! `exec_w − E_w − P^e_w = α·(R^l_w + R̄^r_w) + ω·S^e_w` (no intercept: parked executors use
//! nothing else), and
//! `cpu_w − exec_w − P^n_w = c0 + β_n·R̄^r_w + γ·δ_w + ω·S^n_w + ρ·I_w`,
//!
//! where R̄^r is the remote regressor below: an executor hands a remote request off (sender)
//! or takes it in (receiver) as it does a local one, half on each side. β, what a remote
//! request costs in all, is α + β_n, learnt when both are. The executors' rows pin α whatever
//! the network side does. Measured on the default job's recorded rows (the fixture
//! `capped_wc_workers_split.csv`): whole α 0.138 µs, split 0.066 µs; `clasp calibrate` on the
//! same machine: 0.042 µs. A row without the executors' CPU is used whole, with the same
//! parameters (α on R^l + R̄^r, β_n on R̄^r).
//!
//! One row per worker per interval (idle workers too: they pin the intercept c0, the cost of
//! timers and the network thread with nothing to do). α and β are the CPU a chained request
//! costs on *both* sides — the sender's hand-off and the receiver's. A local request's two sides
//! are on one worker. A remote request's are not: its receiver pays its side too, so a row's
//! remote regressor is the mean of the requests the worker sent and those it received
//! ([`BusyRow::remote_regressor`]). Counting only the sent ones would leave the receiving side
//! with no regressor on the receiver's row, where it lands on α (a receiver that runs the heavy
//! operator has many local requests too) — measured: α 3× its calibrated value, β not learnt.
//!
//! Why weighted least squares solved afresh each interval rather than a recursive update: the
//! information matrix `A = Σ λ^age·x·xᵀ` is kept explicitly, so the estimate is always the exact
//! ridge solution `(A + R)⁻¹(b + R·θ₀)` — there is no covariance to wind up, and
//! identifiability can be read off A. Regressors are normalised by the priors and a load scale,
//! as in the saturated estimator, so every normalised coefficient starts at 1. The ridge R is
//! diagonal and proportional to A's own diagonal (`ρ·A_ii`): a pull towards the priors that is
//! the same small fraction of the data's weight for every column — a destination count and a
//! request rate differ by orders of magnitude, and a fixed ridge would hold the small column at
//! its prior whatever the data said. In a direction the data do not see (two regressors moving
//! together) only the ridge acts, so the solution stays at the priors there.
//!
//! A coefficient is *identified* when (1) the part of its regressor that the others (and the
//! intercept) do not explain — the Schur complement of A relative to its diagonal — is at least
//! `min_independence` (on one placement R^l and R^r scale together with the rate: only their
//! combination is known), (2) at least `min_rows` rows had the regressor > 0, and (3) its
//! standard error (from the weighted residuals) is at most `max_relative_error` of its value;
//! and, to become identified the first time, (4) the interval's own rows carry the regressor
//! (a cost that crossed the bounds on older rows alone would be learnt with no sample behind
//! it).
//!
//! Rows of throttled workers are used like any other. A throttled row's CPU is the cap, but
//! its counts are the work that CPU did, not the work the worker was offered, so the row is a
//! measurement, not a censored one. They were left out once, on the argument that at the cap
//! a worker does more per wake-up and its requests cost less: with the sleeping CPU measured
//! and taken out, the data say the opposite — a request costs a capped worker more at its cap
//! (stalled every quota period, it restarts on cold caches), and those rows are where
//! placement binds. Left out, the estimator learnt the costs of a lightly loaded worker from
//! the few rows left (β 0.09–0.11 µs where the cap's rows say 0.2–0.3), and the planner packed
//! the peak onto workers that could not carry it.
//! An unidentified coefficient reports its prior and 0 samples — never a value the data cannot
//! support. Each coefficient is clamped to [0, `max_prior_multiple` × prior].

use nalgebra::{Matrix5, Matrix6, Vector5, Vector6};

use crate::metrics::WorkerSample;
use crate::model::CostModel;

use super::saturated::DEFAULT_LOAD_SCALE_US_PER_S;

/// Weight of the previous intervals' rows after one more interval.
pub const DEFAULT_BUSY_FORGETTING: f64 = 0.99;
/// The prior's weight ρ relative to the data's (`ρ·A_ii` per column): a weak pull that keeps
/// unidentified directions at the priors without biasing identified ones.
pub const DEFAULT_BUSY_RIDGE: f64 = 1e-5;
/// Identified only if this fraction of the (weighted) regressor is independent of the others.
pub const DEFAULT_MIN_INDEPENDENCE: f64 = 0.05;
/// Identified only after this many rows with the regressor > 0: a few seconds of a live run.
/// With 5, the main job once identified α at 3.4 µs (20× its calibrated value) from the first
/// rows of its first second, and the hold kept it for the whole run.
pub const DEFAULT_MIN_ROWS: usize = 20;
/// Identified only if the standard error is at most this fraction of the value.
pub const DEFAULT_MAX_RELATIVE_ERROR: f64 = 0.2;
/// A coefficient is clamped to [0, this × its prior].
pub const DEFAULT_MAX_PRIOR_MULTIPLE: f64 = 1000.0;
/// ω's prior: CPU µs per sleep and wake-up of a worker thread. It only sets the column's scale
/// (every normalised coefficient starts at 1); the data replace it once ω is identified.
pub const DEFAULT_WAKE_PRIOR_US: f64 = 20.0;
/// |c0| is clamped to this (µs per second: four busy cores of idle overhead is no longer idle).
pub const DEFAULT_INTERCEPT_BOUND_US_PER_S: f64 = 4_000_000.0;
/// A row claiming more CPU than a thousand cores is not a measurement: skipped.
const MAX_CPU_US_PER_S: f64 = 1e9;
/// A row claiming more requests per second than this is not a measurement: skipped.
const MAX_RATE_PER_S: f64 = 1e10;
/// A row claiming more remote destinations than this is not a measurement: skipped.
const MAX_DESTINATIONS: f64 = 1e6;
/// The column of S (sleeps per second) in the regression: after 1, R^l, R^r, δ.
const WAKE_COLUMN: usize = 4;
/// The column of I (input records per second the worker took in from the ingress).
const ROOT_COLUMN: usize = 5;
/// The columns of the regression: 1, R^l, R^r, δ, S, I.
const COLUMNS: usize = 6;
/// ρ's prior: CPU µs per input record a worker takes in from the ingress (its receipt, and the
/// completion report back). Like ω's, it only sets the column's scale.
pub const DEFAULT_ROOT_PRIOR_US: f64 = 2.0;
/// Relative size of the jitter that keeps a singular sub-block of A invertible.
const SINGULAR_JITTER: f64 = 1e-12;
/// The ridge of a column no row has touched (normalised units): keeps A + R invertible.
const RIDGE_FLOOR: f64 = 1e-12;

/// Settings of the busy-time estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BusyTimeConfig {
    pub forgetting: f64,
    pub ridge: f64,
    /// The load scale dividing both sides of the regression (µs per second).
    pub load_scale_us_per_s: f64,
    pub min_independence: f64,
    pub min_rows: usize,
    pub max_relative_error: f64,
    pub max_prior_multiple: f64,
    pub intercept_bound_us_per_s: f64,
    /// Split each row into its executors' side and the rest (see the module docs): α from the
    /// executors' CPU alone. Rows without the executors' CPU are used whole.
    pub split_sides: bool,
}

impl Default for BusyTimeConfig {
    fn default() -> Self {
        BusyTimeConfig {
            forgetting: DEFAULT_BUSY_FORGETTING,
            ridge: DEFAULT_BUSY_RIDGE,
            load_scale_us_per_s: DEFAULT_LOAD_SCALE_US_PER_S,
            min_independence: DEFAULT_MIN_INDEPENDENCE,
            min_rows: DEFAULT_MIN_ROWS,
            max_relative_error: DEFAULT_MAX_RELATIVE_ERROR,
            max_prior_multiple: DEFAULT_MAX_PRIOR_MULTIPLE,
            intercept_bound_us_per_s: DEFAULT_INTERCEPT_BOUND_US_PER_S,
            split_sides: false,
        }
    }
}

impl BusyTimeConfig {
    /// The same settings made usable: forgetting in (0, 1], positive ridge and scale, finite
    /// non-negative thresholds, a clamp of at least 1× the prior.
    fn sanitized(self) -> Self {
        let d = BusyTimeConfig::default();
        let pos = |v: f64, dv: f64| if v.is_finite() && v > 0.0 { v } else { dv };
        let nonneg = |v: f64, dv: f64| if v.is_finite() && v >= 0.0 { v } else { dv };
        BusyTimeConfig {
            forgetting: pos(self.forgetting, d.forgetting).min(1.0),
            ridge: pos(self.ridge, d.ridge),
            load_scale_us_per_s: pos(self.load_scale_us_per_s, d.load_scale_us_per_s),
            min_independence: nonneg(self.min_independence, d.min_independence),
            min_rows: self.min_rows,
            max_relative_error: nonneg(self.max_relative_error, d.max_relative_error),
            max_prior_multiple: pos(self.max_prior_multiple, d.max_prior_multiple).max(1.0),
            intercept_bound_us_per_s: nonneg(
                self.intercept_bound_us_per_s,
                d.intercept_bound_us_per_s,
            ),
            split_sides: self.split_sides,
        }
    }
}

/// One worker over one interval: the regression's row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BusyRow {
    pub worker: usize,
    /// End of the interval (seconds; rows of one interval share it).
    pub t_s: f64,
    /// The worker process's CPU µs per second, idle spinning excluded.
    pub cpu_us_per_s: f64,
    /// E_w: µs per second its operators ran.
    pub exec_us_per_s: f64,
    /// R^l_w and R^r_w: chained requests per second it generated.
    pub local_per_s: f64,
    pub remote_per_s: f64,
    /// Remote chained requests per second the other workers sent it (None: not measured).
    pub remote_received_per_s: Option<f64>,
    /// δ_w: distinct remote workers it sent to.
    pub destinations: f64,
    /// S_w: times per second a thread of it went to sleep (0: not measured).
    pub sleeps_per_s: f64,
    /// CPU µs per second its threads spent inside their sleeping waits (0: not measured):
    /// taken out of `cpu_us_per_s` before the fit.
    pub sleep_cpu_us_per_s: f64,
    /// I_w: input records per second it took in from the ingress (0: not measured).
    pub roots_per_s: f64,
    /// CPU-quota periods in which its group was throttled in the interval (None: uncapped or
    /// not measured). Counted, and used like any other row (see the module docs).
    pub throttled_periods: Option<u64>,
    /// Of `cpu_us_per_s`, its executor threads' CPU µs per second, idle spinning excluded
    /// (None: not measured); of `sleep_cpu_us_per_s` and `sleeps_per_s`, the executors' part.
    pub exec_cpu_us_per_s: Option<f64>,
    pub exec_sleep_cpu_us_per_s: f64,
    pub exec_sleeps_per_s: f64,
}

impl BusyRow {
    /// The row of a sample taken at `t_s`; None when its CPU time was not measured.
    pub fn from_sample(s: &WorkerSample, t_s: f64) -> Option<BusyRow> {
        Some(BusyRow {
            worker: s.worker,
            t_s,
            cpu_us_per_s: s.cpu_us_per_s?,
            exec_us_per_s: s.exec_load_us_per_s(),
            local_per_s: s.local_per_s,
            remote_per_s: s.remote_per_s,
            remote_received_per_s: s.remote_received_per_s,
            destinations: s.destinations as f64,
            sleeps_per_s: s.sleeps_per_s,
            sleep_cpu_us_per_s: s.sleep_cpu_us_per_s,
            roots_per_s: s.roots_per_s,
            throttled_periods: s.throttled_periods,
            exec_cpu_us_per_s: s.exec_cpu_us_per_s,
            exec_sleep_cpu_us_per_s: s.exec_sleep_cpu_us_per_s,
            exec_sleeps_per_s: s.exec_sleeps_per_s,
        })
    }

    /// Whether the kernel throttled the worker in the interval: its CPU time is then the cap,
    /// and its counts what that CPU did.
    pub fn throttled(&self) -> bool {
        self.throttled_periods.is_some_and(|n| n > 0)
    }

    /// A measurement, not garbage: finite, non-negative, below the sanity bounds.
    fn plausible(&self) -> bool {
        let ok = |v: f64, max: f64| v.is_finite() && (0.0..=max).contains(&v);
        ok(self.cpu_us_per_s, MAX_CPU_US_PER_S)
            && ok(self.exec_us_per_s, MAX_CPU_US_PER_S)
            && ok(self.local_per_s, MAX_RATE_PER_S)
            && ok(self.remote_per_s, MAX_RATE_PER_S)
            && ok(self.remote_received_per_s.unwrap_or(0.0), MAX_RATE_PER_S)
            && ok(self.destinations, MAX_DESTINATIONS)
            && ok(self.sleeps_per_s, MAX_RATE_PER_S)
            && ok(self.sleep_cpu_us_per_s, MAX_CPU_US_PER_S)
            && ok(self.roots_per_s, MAX_RATE_PER_S)
            && ok(self.exec_cpu_us_per_s.unwrap_or(0.0), MAX_CPU_US_PER_S)
            && ok(self.exec_sleep_cpu_us_per_s, MAX_CPU_US_PER_S)
            && ok(self.exec_sleeps_per_s, MAX_RATE_PER_S)
    }

    /// The regression's rows of this worker-interval: `(x, y)` in raw units over the columns
    /// (1, R^l, R^r, δ, S, I). Whole: one row, the worker's CPU. Split: its executors' row —
    /// what they used beyond execution and their sleeps, explained by α over every request
    /// they handed off or took in (a remote one's hand-off on its sender's executor and
    /// take-in on its receiver's: half of a local request on each side) and their sleeps,
    /// with no intercept (parked executors use nothing else) — and the rest's row: the
    /// network thread and the kernel, explained by the idle overhead c0, the network side of
    /// a remote request β_n, destinations, sleeps and input records. A row without the
    /// executors' CPU is their sum (the same parameters).
    fn design(&self, split: bool) -> Vec<([f64; COLUMNS], f64)> {
        let remote = self.remote_regressor();
        // Split, α prices every hand-off an executor makes or takes, remote ones included.
        let handoffs = if split {
            self.local_per_s + remote
        } else {
            self.local_per_s
        };
        let exec_cpu = match self.exec_cpu_us_per_s {
            Some(exec_cpu) if split => exec_cpu,
            _ => {
                let x = [
                    1.0,
                    handoffs,
                    remote,
                    self.destinations,
                    self.sleeps_per_s,
                    self.roots_per_s,
                ];
                return vec![(x, self.explained_us_per_s())];
            }
        };
        let exec_y = exec_cpu - self.exec_us_per_s - self.exec_sleep_cpu_us_per_s;
        let exec_x = [0.0, handoffs, 0.0, 0.0, self.exec_sleeps_per_s, 0.0];
        let rest_y = (self.cpu_us_per_s - exec_cpu)
            - (self.sleep_cpu_us_per_s - self.exec_sleep_cpu_us_per_s).max(0.0);
        let rest_sleeps = (self.sleeps_per_s - self.exec_sleeps_per_s).max(0.0);
        let rest_x = [
            1.0,
            0.0,
            remote,
            self.destinations,
            rest_sleeps,
            self.roots_per_s,
        ];
        vec![(exec_x, exec_y), (rest_x, rest_y)]
    }

    /// What the regression explains: the CPU left once the operators' execution and the
    /// measured sleeping waits are taken out.
    pub fn explained_us_per_s(&self) -> f64 {
        self.cpu_us_per_s - self.exec_us_per_s - self.sleep_cpu_us_per_s
    }

    /// The regressor of β: where the receiving side was measured, the mean of the requests
    /// sent and received, so that β is what one remote request costs on *both* sides (its
    /// sender's hand-off and its receiver's), each side charged to the worker that pays it;
    /// otherwise the requests sent (β then also carries the receiver's side, pooled over
    /// workers).
    pub fn remote_regressor(&self) -> f64 {
        match self.remote_received_per_s {
            Some(received) => 0.5 * (self.remote_per_s + received),
            None => self.remote_per_s,
        }
    }
}

/// Weighted least squares of `cpu − E` on (1, R^l, R^r, δ, S, I); see the module docs.
#[derive(Clone, Debug)]
pub struct BusyTimeEstimator {
    cfg: BusyTimeConfig,
    priors: CostModel,
    /// Per column (1, R^l, R^r, δ, S, I): raw regressor → normalised (prior / load scale; 0 for
    /// an unusable prior). The intercept's column is 1, so its θ is c0 / load scale.
    norm: Vector6<f64>,
    /// Σ w·x·xᵀ, Σ w·x·y, Σ w·y², Σ w over the rows (normalised units).
    info: Matrix6<f64>,
    xy: Vector6<f64>,
    yy: f64,
    weight: f64,
    /// The clamped ridge solution (normalised), and what is reported.
    theta: Vector6<f64>,
    /// Whether ω and ρ are identified, like `identified` for α, β, γ.
    wake_identified: bool,
    wake_positive_rows: usize,
    root_identified: bool,
    root_positive_rows: usize,
    identified: [bool; 3],
    /// Per coefficient, its last identified value (normalised): reported while it is not
    /// identified now but the rows still carry weight (see [`BusyTimeEstimator::costs`]).
    held: [Option<f64>; 3],
    independence: [f64; 3],
    /// Per coefficient, its standard error over its value at the last solve (∞ when unknown).
    relative_error: [f64; 3],
    positive_rows: [usize; 3],
    samples: [usize; 3],
    rows_used: usize,
    rows_skipped: usize,
    rows_throttled: usize,
}

impl BusyTimeEstimator {
    /// Starts at the priors (a prior that is not positive and finite is never learnt).
    pub fn new(priors: CostModel, cfg: BusyTimeConfig) -> Self {
        let cfg = cfg.sanitized();
        let s = cfg.load_scale_us_per_s;
        let usable = |p: f64| if p.is_finite() && p > 0.0 { p / s } else { 0.0 };
        BusyTimeEstimator {
            cfg,
            priors,
            norm: Vector6::new(
                1.0,
                usable(priors.alpha_us),
                usable(priors.beta_us),
                usable(priors.gamma_us),
                usable(DEFAULT_WAKE_PRIOR_US),
                usable(DEFAULT_ROOT_PRIOR_US),
            ),
            info: Matrix6::zeros(),
            xy: Vector6::zeros(),
            yy: 0.0,
            weight: 0.0,
            theta: Self::prior_theta(),
            wake_identified: false,
            wake_positive_rows: 0,
            root_identified: false,
            root_positive_rows: 0,
            identified: [false; 3],
            held: [None; 3],
            independence: [0.0; 3],
            relative_error: [f64::INFINITY; 3],
            positive_rows: [0; 3],
            samples: [0; 3],
            rows_used: 0,
            rows_skipped: 0,
            rows_throttled: 0,
        }
    }

    /// The normalised prior: no idle overhead, every cost at its prior.
    fn prior_theta() -> Vector6<f64> {
        Vector6::new(0.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    }

    /// One interval's rows (one per worker with a measured CPU time): forgets the older rows
    /// by one step, adds these, and re-solves. Implausible rows are skipped and counted; rows of
    /// throttled workers are used, and counted too.
    pub fn observe_interval(&mut self, rows: &[BusyRow]) {
        let f = self.cfg.forgetting;
        self.info *= f;
        self.xy *= f;
        self.yy *= f;
        self.weight *= f;
        let mut positive = [0usize; 3];
        for r in rows {
            if self.add_row(r) {
                self.rows_used += 1;
                self.rows_throttled += usize::from(r.throttled());
                let local = if self.cfg.split_sides {
                    r.local_per_s + r.remote_regressor()
                } else {
                    r.local_per_s
                };
                let regs = [local, r.remote_regressor(), r.destinations];
                for (p, v) in positive.iter_mut().zip(regs) {
                    *p += usize::from(v > 0.0);
                }
                self.wake_positive_rows += usize::from(r.sleeps_per_s > 0.0);
                self.root_positive_rows += usize::from(r.roots_per_s > 0.0);
            } else {
                self.rows_skipped += 1;
            }
        }
        for (total, p) in self.positive_rows.iter_mut().zip(positive) {
            *total += p;
        }
        let held_before = self.held;
        self.refresh();
        // A cost first becomes learnt only in an interval whose rows carry its regressor: one
        // that crossed the bounds on older rows alone would be reported with no sample behind
        // it.
        for i in 0..3 {
            if self.identified[i] && held_before[i].is_none() && positive[i] == 0 {
                self.identified[i] = false;
                self.held[i] = None;
            }
        }
        for ((n, p), id) in self.samples.iter_mut().zip(positive).zip(self.identified) {
            if id {
                *n += p;
            }
        }
    }

    /// Adds one worker-interval's rows when it is plausible and their contributions finite.
    fn add_row(&mut self, r: &BusyRow) -> bool {
        if !r.plausible() {
            return false;
        }
        let mut sums = (Matrix6::zeros(), Vector6::zeros(), 0.0, 0.0);
        for (raw, y_raw) in r.design(self.cfg.split_sides) {
            let x = Vector6::from(raw).component_mul(&self.norm);
            let y = y_raw / self.cfg.load_scale_us_per_s;
            let xxt = x * x.transpose();
            if !(xxt.iter().all(|v| v.is_finite()) && y.is_finite() && (y * y).is_finite()) {
                return false;
            }
            sums.0 += xxt;
            sums.1 += x * y;
            sums.2 += y * y;
            sums.3 += 1.0;
        }
        self.info += sums.0;
        self.xy += sums.1;
        self.yy += sums.2;
        self.weight += sums.3;
        true
    }

    /// `(A + R)⁻¹` and the ridge solution, solved on the Jacobi-scaled system (the columns'
    /// magnitudes differ by orders); None when the sums are not usable.
    fn solve(&self) -> Option<(Matrix6<f64>, Vector6<f64>)> {
        let ridge = self
            .info
            .diagonal()
            .map(|d| self.cfg.ridge * d.max(0.0) + RIDGE_FLOOR);
        let m = self.info + Matrix6::from_diagonal(&ridge);
        let rhs = self.xy + ridge.component_mul(&Self::prior_theta());
        let d_inv = m.diagonal().map(|d| 1.0 / d.sqrt());
        let scale = Matrix6::from_diagonal(&d_inv);
        let chol = (scale * m * scale).cholesky()?;
        let raw = scale * chol.solve(&(scale * rhs));
        let m_inv = scale * chol.inverse() * scale;
        let finite = raw.iter().chain(m_inv.iter()).all(|v| v.is_finite());
        finite.then_some((m_inv, raw))
    }

    /// Re-solves the ridge system and re-decides which coefficients are identified.
    fn refresh(&mut self) {
        let Some((m_inv, raw)) = self.solve() else {
            // Only non-finite sums get here (A + R is positive definite otherwise): start over.
            self.forget_all();
            return;
        };
        let sigma2 = self.residual_variance(&raw);
        let c0_bound = self.cfg.intercept_bound_us_per_s / self.cfg.load_scale_us_per_s;
        let max = self.cfg.max_prior_multiple;
        self.theta = Vector6::from_fn(|i, _| {
            if i == 0 {
                raw[0].clamp(-c0_bound, c0_bound)
            } else {
                raw[i].clamp(0.0, max)
            }
        });
        if !self.theta.iter().all(|v| v.is_finite()) {
            self.forget_all();
            return;
        }
        let identified = |col: usize, independence: f64, positive_rows: usize| {
            let std_err = (sigma2 * m_inv[(col, col)]).max(0.0).sqrt();
            self.norm[col] > 0.0
                && independence >= self.cfg.min_independence
                && positive_rows >= self.cfg.min_rows.max(1)
                && self.theta[col] > 0.0
                && std_err.is_finite()
                && std_err <= self.cfg.max_relative_error * self.theta[col]
        };
        for i in 0..3 {
            let col = i + 1;
            self.independence[i] = schur_ratio(&self.info, col);
            self.relative_error[i] = (sigma2 * m_inv[(col, col)]).max(0.0).sqrt() / self.theta[col];
            self.identified[i] = identified(col, self.independence[i], self.positive_rows[i]);
            if self.identified[i] {
                self.held[i] = Some(self.theta[col]);
            }
        }
        self.wake_identified = identified(
            WAKE_COLUMN,
            schur_ratio(&self.info, WAKE_COLUMN),
            self.wake_positive_rows,
        );
        self.root_identified = identified(
            ROOT_COLUMN,
            schur_ratio(&self.info, ROOT_COLUMN),
            self.root_positive_rows,
        );
    }

    /// The weighted residual variance of the fit `raw` (∞ with too few rows to tell).
    fn residual_variance(&self, raw: &Vector6<f64>) -> f64 {
        let dof = self.weight - COLUMNS as f64;
        if dof <= 0.0 {
            return f64::INFINITY;
        }
        let rss = self.yy - 2.0 * raw.dot(&self.xy) + raw.dot(&(self.info * raw));
        let v = rss.max(0.0) / dof;
        if v.is_finite() { v } else { f64::INFINITY }
    }

    /// Drops every row (the sums stopped being finite): back to the priors.
    fn forget_all(&mut self) {
        self.info = Matrix6::zeros();
        self.xy = Vector6::zeros();
        self.yy = 0.0;
        self.weight = 0.0;
        self.theta = Self::prior_theta();
        self.wake_identified = false;
        self.root_identified = false;
        self.identified = [false; 3];
        self.held = [None; 3];
        self.independence = [0.0; 3];
    }

    /// Current α, β, γ: the estimate where identified, the prior elsewhere.
    ///
    /// A cost identified once and not at the moment (one noisy interval can push a standard
    /// error over the bound) keeps its last identified value while the kept rows still weigh
    /// at least `min_rows`: a learnt figure is better than a prior several times off, and the
    /// planner should not swing between the two. When the rows have faded (a long quiet
    /// period), it returns to the prior.
    pub fn costs(&self) -> CostModel {
        let pick = |i: usize, prior: f64| self.learnt(i).map_or(prior, |theta| theta * prior);
        // Split, β is the executors' side (α) plus the network side β_n: learnt only when both
        // are, else the prior (β_n alone is not what a remote request costs).
        let beta_us = if self.cfg.split_sides {
            (self.learnt(0).zip(self.learnt(1))).map_or(self.priors.beta_us, |(a, n)| {
                a * self.priors.alpha_us + n * self.priors.beta_us
            })
        } else {
            pick(1, self.priors.beta_us)
        };
        CostModel {
            alpha_us: pick(0, self.priors.alpha_us),
            beta_us,
            gamma_us: pick(2, self.priors.gamma_us),
        }
    }

    /// The joint solution whether identified or not (clamped), for diagnostics.
    pub fn solution(&self) -> CostModel {
        let alpha_us = self.theta[1] * self.priors.alpha_us;
        let network_us = self.theta[2] * self.priors.beta_us;
        CostModel {
            alpha_us,
            beta_us: if self.cfg.split_sides {
                alpha_us + network_us
            } else {
                network_us
            },
            gamma_us: self.theta[3] * self.priors.gamma_us,
        }
    }

    /// ω: CPU µs per sleep and wake-up of a worker thread, when the data identify it (not used
    /// by placement: a saturated worker does not sleep).
    pub fn wake_us(&self) -> Option<f64> {
        self.wake_identified
            .then(|| self.theta[WAKE_COLUMN] * DEFAULT_WAKE_PRIOR_US)
    }

    /// ρ: CPU µs per input record a worker takes in from the ingress, when the data identify
    /// it (reported, not used by placement).
    pub fn root_us(&self) -> Option<f64> {
        self.root_identified
            .then(|| self.theta[ROOT_COLUMN] * DEFAULT_ROOT_PRIOR_US)
    }

    /// c0: the idle overhead (µs per second per worker); not used by placement.
    pub fn intercept_us_per_s(&self) -> f64 {
        self.theta[0] * self.cfg.load_scale_us_per_s
    }

    /// Per coefficient (α, β, γ): rows with its regressor > 0 in intervals after which it was
    /// identified; 0 while it is not identified.
    pub fn samples(&self) -> [usize; 3] {
        std::array::from_fn(|i| {
            // Split, β is learnt only with α (it is their sum).
            let with_alpha = i != 1 || !self.cfg.split_sides || self.learnt(0).is_some();
            if self.learnt(i).is_some() && with_alpha {
                self.samples[i]
            } else {
                0
            }
        })
    }

    /// Coefficient i's normalised value when it is learnt: identified now, or identified
    /// before while the rows still weigh enough (see [`BusyTimeEstimator::costs`]).
    fn learnt(&self, i: usize) -> Option<f64> {
        if self.identified[i] {
            return Some(self.theta[i + 1]);
        }
        self.held[i].filter(|_| self.weight >= self.cfg.min_rows.max(1) as f64)
    }

    /// Per coefficient (α, β, γ): whether the data identify it now.
    pub fn identified(&self) -> [bool; 3] {
        self.identified
    }

    /// Per coefficient: the fraction of its weighted regressor the others do not explain.
    pub fn independence(&self) -> [f64; 3] {
        self.independence
    }

    /// Per coefficient: its standard error over its value at the last solve (∞ when unknown).
    pub fn relative_error(&self) -> [f64; 3] {
        self.relative_error
    }

    /// Rows that entered the regression, and rows skipped as implausible.
    pub fn rows(&self) -> (usize, usize) {
        (self.rows_used, self.rows_skipped)
    }

    /// Of the rows used, those whose worker was throttled (at its cap in the interval).
    pub fn rows_throttled(&self) -> usize {
        self.rows_throttled
    }

    /// The priors it started from.
    pub fn priors(&self) -> CostModel {
        self.priors
    }
}

/// `s_i / A_ii`, where `s_i = A_ii − a_iᵀ·A_{−i,−i}⁻¹·a_i` is the part of column i that the
/// other columns do not explain (0 for an empty column).
fn schur_ratio(a: &Matrix6<f64>, i: usize) -> f64 {
    let aii = a[(i, i)];
    if !(aii.is_finite() && aii > 0.0) {
        return 0.0;
    }
    let others: Vec<usize> = (0..COLUMNS).filter(|&j| j != i).collect();
    let sub = Matrix5::from_fn(|r, c| a[(others[r], others[c])]);
    let col = Vector5::from_fn(|r, _| a[(others[r], i)]);
    let jitter = SINGULAR_JITTER * (sub.trace().abs() + 1e-300);
    let Some(chol) = (sub + Matrix5::identity() * jitter).cholesky() else {
        return 0.0;
    };
    let explained = col.dot(&chol.solve(&col));
    ((aii - explained) / aii).clamp(0.0, 1.0)
}
