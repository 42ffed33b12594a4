//! What a decision carries and reports: the new shares and routing, each operator's executors
//! before and after, and the line that explains it (the per-worker loads of the plan among
//! them). Kept apart from the loop that decides: it only describes a decision already made.

use super::{Autoscaler, ScaleDecision};
use crate::model::{Problem, Shares, worker_loads};
use crate::scaling::{Explanation, executor_parallelism, total_parallelism};
use clasp_protocol::routing::RoutingTable;

impl Autoscaler {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decision(
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
        let parallelism =
            executor_parallelism(problem, &shares, workers, self.cfg.executors_per_worker);
        let before = total_parallelism(&self.parallelism);
        let after = total_parallelism(&parallelism);
        let per_operator = self
            .names
            .iter()
            .enumerate()
            .map(|(o, n)| {
                let b = before.get(o).copied().unwrap_or(0);
                (n.clone(), b, after.get(o).copied().unwrap_or(0))
            })
            .collect();
        let exp = Explanation {
            policy: self.cfg.policy.name().into(),
            trigger: trigger.clone(),
            rate_per_s,
            projected_demand_us_per_s: problem.total_demand_us_per_s(),
            capacity_us_per_s: problem.capacity_us_per_s,
            costs: problem.costs,
            workers_before: self.workers,
            workers_after: workers,
            parallelism: per_operator,
            key_groups_moved: moved,
            loads_us_per_s: worker_loads(problem, &shares, workers),
        };
        ScaleDecision {
            t_us,
            workers_before: self.workers,
            workers,
            shares,
            routing,
            parallelism,
            key_groups_moved: moved,
            rate_per_s,
            saturated,
            fraction_placed,
            explanation: exp.line(),
            trigger,
        }
    }
}
