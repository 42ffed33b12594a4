//! Online estimation of the capacity model's costs: α (CPU per local chained request), β (per
//! remote chained request), γ (per remote destination per second) and the worker capacity W̄.
//!
//! Two estimators, because they need different evidence:
//! - [`saturated`] ("saturated") learns only from intervals in which a worker was saturated:
//!   there its capacity is all spent, so differences of saturated samples cancel the unknown
//!   capacity and expose α, β, γ; the same samples give W̄. It needs no CPU measurement, but a
//!   cluster that is never pushed to its limit never teaches it anything.
//! - [`busy`] ("busy-time") regresses each worker's measured CPU time on its execution time and
//!   chained-request counts in every interval, at any load, so the costs are learnt while the
//!   cluster runs comfortably. It cannot see W̄ (an unsaturated worker does not show its
//!   limit), so W̄ stays with the saturated estimator or the prior (a CPU cap).
//!
//! [`EstimatorKind`] names which one's α, β, γ the planner plans with.

pub mod busy;
pub mod busy_csv;
pub mod saturated;

pub use busy::{
    BusyRow, BusyTimeConfig, BusyTimeEstimator, DEFAULT_BUSY_FORGETTING, DEFAULT_BUSY_RIDGE,
    DEFAULT_INTERCEPT_BOUND_US_PER_S, DEFAULT_MAX_PRIOR_MULTIPLE, DEFAULT_MAX_RELATIVE_ERROR,
    DEFAULT_MIN_INDEPENDENCE, DEFAULT_MIN_ROWS, DEFAULT_WAKE_PRIOR_US,
};
pub use busy_csv::{BusyCsvError, rows_from_csv};
pub use saturated::{
    CapacityEstimator, DEFAULT_CAPACITY_SMOOTHING, DEFAULT_COVARIANCE_TRACE_BOUND,
    DEFAULT_FORGETTING, DEFAULT_INITIAL_COVARIANCE, DEFAULT_LOAD_SCALE_US_PER_S,
    DEFAULT_MIN_REGRESSOR, DEFAULT_MIN_REMOTE_PER_S, DEFAULT_STEP_CLAMP, EstimatorConfig,
    SaturatedPoint, StepOutcome,
};

/// Which estimator's α, β, γ the planner plans with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EstimatorKind {
    /// Differences of saturated intervals (learns only when a worker saturates).
    Saturated,
    /// Measured CPU time regressed on the chained-request counts (learns at any load).
    #[default]
    BusyTime,
    /// The same, each worker's CPU split into its executors' and the rest (α from the
    /// executors alone; see [`busy`]). What live runs use; the simulator's workers have no
    /// threads to split.
    BusySplit,
}

impl EstimatorKind {
    /// Every kind, in the order they are listed to users.
    pub const ALL: [EstimatorKind; 3] = [
        EstimatorKind::BusySplit,
        EstimatorKind::BusyTime,
        EstimatorKind::Saturated,
    ];

    /// The name on the command line and in JSON: `busy-split`, `busy-time` or `saturated`.
    pub fn name(self) -> &'static str {
        match self {
            EstimatorKind::Saturated => "saturated",
            EstimatorKind::BusyTime => "busy-time",
            EstimatorKind::BusySplit => "busy-split",
        }
    }

    /// The kind named `name` (see [`EstimatorKind::name`]).
    pub fn parse(name: &str) -> Option<EstimatorKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}
