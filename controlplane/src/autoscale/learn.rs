//! The loop's cost model: both estimators fed side by side, one of them ([`EstimatorKind`])
//! giving the α, β, γ the planner plans with.
//!
//! Why both run whichever is selected: W̄ can only be seen when a worker saturates, so the
//! saturated estimator keeps W̄ current even when the busy-time estimator gives the costs; and
//! running the other one too costs microseconds per interval and lets a run's log compare them.

use crate::estimator::{
    BusyRow, BusyTimeConfig, BusyTimeEstimator, CapacityEstimator, EstimatorKind, SaturatedPoint,
};
use crate::metrics::WorkerSample;
use crate::model::CostModel;

use super::AutoscaleConfig;

/// The saturated and the busy-time estimators, and which one plans.
#[derive(Clone, Debug)]
pub(super) struct Learner {
    pub(super) kind: EstimatorKind,
    pub(super) saturated: CapacityEstimator,
    pub(super) busy: BusyTimeEstimator,
}

impl Learner {
    pub(super) fn new(priors: CostModel, cfg: &AutoscaleConfig) -> Self {
        Learner {
            kind: cfg.estimator_kind,
            saturated: CapacityEstimator::new(priors, cfg.capacity_prior_us_per_s, cfg.estimator),
            busy: BusyTimeEstimator::new(
                priors,
                BusyTimeConfig {
                    split_sides: cfg.busy_time.split_sides
                        || cfg.estimator_kind == EstimatorKind::BusySplit,
                    ..cfg.busy_time
                },
            ),
        }
    }

    /// One saturated sample (pooled across workers) for the saturated estimator.
    pub(super) fn observe_saturated(&mut self, s: &WorkerSample) {
        self.saturated.observe(SaturatedPoint::from(s));
    }

    /// One interval's rows for the busy-time estimator: the active workers' and the parked
    /// ones' (which pin the idle overhead). Samples without a CPU time are left out.
    pub(super) fn observe_busy(
        &mut self,
        t_us: f64,
        active: &[WorkerSample],
        parked: &[WorkerSample],
    ) {
        let t_s = t_us / 1e6;
        let rows: Vec<BusyRow> = active
            .iter()
            .chain(parked)
            .filter_map(|s| BusyRow::from_sample(s, t_s))
            .collect();
        if !rows.is_empty() {
            self.busy.observe_interval(&rows);
        }
    }

    /// The α, β, γ the planner plans with.
    pub(super) fn costs(&self) -> CostModel {
        match self.kind {
            EstimatorKind::Saturated => self.saturated.costs(),
            EstimatorKind::BusyTime | EstimatorKind::BusySplit => self.busy.costs(),
        }
    }

    /// The busy-time estimator's price of a sleep and wake-up, when it plans with it and the
    /// data identify it.
    pub(super) fn wake_us(&self) -> Option<f64> {
        match self.kind {
            EstimatorKind::Saturated => None,
            EstimatorKind::BusyTime | EstimatorKind::BusySplit => self.busy.wake_us(),
        }
    }

    /// The busy-time estimator's price of an input record taken in from the ingress, when it
    /// plans with it and the data identify it.
    pub(super) fn root_us(&self) -> Option<f64> {
        match self.kind {
            EstimatorKind::Saturated => None,
            EstimatorKind::BusyTime | EstimatorKind::BusySplit => self.busy.root_us(),
        }
    }

    /// Per coefficient (α, β, γ): the samples behind the planning estimate.
    pub(super) fn samples(&self) -> [usize; 3] {
        match self.kind {
            EstimatorKind::Saturated => self.saturated.samples(),
            EstimatorKind::BusyTime | EstimatorKind::BusySplit => self.busy.samples(),
        }
    }
}
