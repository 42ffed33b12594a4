//! The saturated-interval estimator of α, β, γ and the worker capacity W̄.
//!
//! A saturated worker spends its whole capacity W on execution plus chained-request overhead,
//! `W = E + α·R^l + β·R^r + γ·δ`, so between two saturated samples the unknown capacity W cancels:
//! `ΔE = −α·ΔR^l − β·ΔR^r − γ·Δδ + ε`. Recursive least squares runs on regressors divided by
//! the priors and by a load scale, so every normalised coefficient starts at 1 and the three
//! columns — whose raw magnitudes differ by orders (requests per second vs a destination count)
//! — are equally conditioned. The step clamp keeps one outlier (a migration, a GC pause) from
//! throwing the estimate far; the skip rules keep uninformative differences out; the trace
//! bound keeps a quiet period (forgetting with no excitation) from winding the covariance up,
//! which would make the next sample move the estimate wildly.

use nalgebra::{Matrix3, Vector3};

use crate::metrics::WorkerSample;
use crate::model::CostModel;

/// Forgetting factor of the RLS.
pub const DEFAULT_FORGETTING: f64 = 0.97;
/// Initial covariance P0 = 0.1·I (in normalised units).
pub const DEFAULT_INITIAL_COVARIANCE: f64 = 0.1;
/// Largest change of a normalised coefficient in one step.
pub const DEFAULT_STEP_CLAMP: f64 = 0.15;
/// The wind-up guard: trace(P) is bounded by this multiple of trace(P0).
pub const DEFAULT_COVARIANCE_TRACE_BOUND: f64 = 10.0;
/// No step when every normalised regressor moved less than this.
pub const DEFAULT_MIN_REGRESSOR: f64 = 0.1;
/// No step when both samples' remote rate is below this (per second): β is then unidentifiable.
pub const DEFAULT_MIN_REMOTE_PER_S: f64 = 1.0;
/// W̄ ← (1−w)·W̄ + w·Ŵ with w = this.
pub const DEFAULT_CAPACITY_SMOOTHING: f64 = 0.05;
/// The load scale dividing both sides of the regression (µs per second).
pub const DEFAULT_LOAD_SCALE_US_PER_S: f64 = 100_000.0;

/// Estimator settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    pub forgetting: f64,
    pub initial_covariance: f64,
    pub step_clamp: f64,
    pub covariance_trace_bound: f64,
    pub min_regressor: f64,
    pub min_remote_per_s: f64,
    pub capacity_smoothing: f64,
    pub load_scale_us_per_s: f64,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            forgetting: DEFAULT_FORGETTING,
            initial_covariance: DEFAULT_INITIAL_COVARIANCE,
            step_clamp: DEFAULT_STEP_CLAMP,
            covariance_trace_bound: DEFAULT_COVARIANCE_TRACE_BOUND,
            min_regressor: DEFAULT_MIN_REGRESSOR,
            min_remote_per_s: DEFAULT_MIN_REMOTE_PER_S,
            capacity_smoothing: DEFAULT_CAPACITY_SMOOTHING,
            load_scale_us_per_s: DEFAULT_LOAD_SCALE_US_PER_S,
        }
    }
}

/// The regressors of one saturated sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SaturatedPoint {
    /// E_w (µs per second).
    pub exec_us_per_s: f64,
    pub local_per_s: f64,
    pub remote_per_s: f64,
    pub destinations: f64,
}

impl From<&WorkerSample> for SaturatedPoint {
    fn from(s: &WorkerSample) -> Self {
        SaturatedPoint {
            exec_us_per_s: s.exec_load_us_per_s(),
            local_per_s: s.local_per_s,
            remote_per_s: s.remote_per_s,
            destinations: s.destinations as f64,
        }
    }
}

/// What one observation did (for the decision log and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// The first saturated sample: nothing to difference against yet.
    First,
    Updated,
    SkippedFlat,
    SkippedNoRemote,
}

/// RLS over normalised θ = (α/α0, β/β0, γ/γ0), plus W̄ smoothing.
#[derive(Clone, Debug)]
pub struct CapacityEstimator {
    config: EstimatorConfig,
    priors: CostModel,
    theta: Vector3<f64>,
    p: Matrix3<f64>,
    last: Option<SaturatedPoint>,
    capacity_us_per_s: Option<f64>,
    /// Updates in which α's, β's, γ's normalised regressor moved at least `min_regressor`.
    excited: [usize; 3],
    pub updates: usize,
}

impl CapacityEstimator {
    /// Starts at the priors (each must be > 0); `capacity_prior` seeds W̄ if given.
    pub fn new(
        priors: CostModel,
        capacity_prior_us_per_s: Option<f64>,
        config: EstimatorConfig,
    ) -> Self {
        CapacityEstimator {
            config,
            priors,
            theta: Vector3::new(1.0, 1.0, 1.0),
            p: Matrix3::identity() * config.initial_covariance,
            last: None,
            capacity_us_per_s: capacity_prior_us_per_s,
            excited: [0; 3],
            updates: 0,
        }
    }

    /// Current α, β, γ.
    pub fn costs(&self) -> CostModel {
        CostModel {
            alpha_us: self.theta[0] * self.priors.alpha_us,
            beta_us: self.theta[1] * self.priors.beta_us,
            gamma_us: self.theta[2] * self.priors.gamma_us,
        }
    }

    /// Current W̄ (µs per second), once any saturated sample was seen or a prior given.
    pub fn capacity_us_per_s(&self) -> Option<f64> {
        self.capacity_us_per_s
    }

    /// Per coefficient (α, β, γ): the updates in which its own regressor moved by at least
    /// `min_regressor` (normalised), i.e. the differences that carried information about it.
    pub fn samples(&self) -> [usize; 3] {
        self.excited
    }

    /// trace(P), for the wind-up test.
    pub fn covariance_trace(&self) -> f64 {
        self.p.trace()
    }

    /// Resets the covariance (after a migration) and forgets the last point.
    pub fn reset_covariance(&mut self) {
        self.p = Matrix3::identity() * self.config.initial_covariance;
        self.last = None;
    }

    /// Feeds one saturated sample (pooled across workers).
    pub fn observe(&mut self, pt: SaturatedPoint) -> StepOutcome {
        let outcome = match self.last {
            None => StepOutcome::First,
            Some(prev) => self.step(prev, pt),
        };
        self.last = Some(pt);
        let c = self.costs();
        let w_hat = pt.exec_us_per_s
            + c.alpha_us * pt.local_per_s
            + c.beta_us * pt.remote_per_s
            + c.gamma_us * pt.destinations;
        let a = self.config.capacity_smoothing;
        self.capacity_us_per_s = Some(match self.capacity_us_per_s {
            Some(w) => (1.0 - a) * w + a * w_hat,
            None => w_hat,
        });
        outcome
    }

    fn step(&mut self, prev: SaturatedPoint, pt: SaturatedPoint) -> StepOutcome {
        let cfg = self.config;
        let scale = cfg.load_scale_us_per_s;
        let x = Vector3::new(
            -(pt.local_per_s - prev.local_per_s) * self.priors.alpha_us / scale,
            -(pt.remote_per_s - prev.remote_per_s) * self.priors.beta_us / scale,
            -(pt.destinations - prev.destinations) * self.priors.gamma_us / scale,
        );
        if x.iter().all(|v| v.abs() < cfg.min_regressor) {
            return StepOutcome::SkippedFlat;
        }
        if pt.remote_per_s.max(prev.remote_per_s) < cfg.min_remote_per_s {
            return StepOutcome::SkippedNoRemote;
        }
        let y = (pt.exec_us_per_s - prev.exec_us_per_s) / scale;
        let px = self.p * x;
        let denom = cfg.forgetting + x.dot(&px);
        let k = px / denom;
        let err = y - x.dot(&self.theta);
        let delta = (k * err).map(|d| d.clamp(-cfg.step_clamp, cfg.step_clamp));
        self.theta = (self.theta + delta).map(|t| t.max(0.0));
        self.p = (self.p - k * px.transpose()) / cfg.forgetting;
        // Keep P symmetric and bounded.
        self.p = 0.5 * (self.p + self.p.transpose());
        let bound = cfg.covariance_trace_bound * 3.0 * cfg.initial_covariance;
        let tr = self.p.trace();
        if !tr.is_finite() || tr <= 0.0 {
            self.p = Matrix3::identity() * cfg.initial_covariance;
        } else if tr > bound {
            self.p *= bound / tr;
        }
        self.updates += 1;
        for (n, xi) in self.excited.iter_mut().zip(x.iter()) {
            if xi.abs() >= cfg.min_regressor {
                *n += 1;
            }
        }
        StepOutcome::Updated
    }
}
