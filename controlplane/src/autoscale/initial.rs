//! The first placement: the policy's answer at the first rate, made from nothing (the
//! simulator's start) or from the even spread a live run's workers start on, whose decision
//! line then counts what it changes from there.

use super::{Autoscaler, ScaleDecision};
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::split::{KEY_GROUPS_PER_OPERATOR, even_slot, initial_routing};
use clasp_protocol::{Epoch, Slot};

impl Autoscaler {
    /// The first placement (before any metrics): the policy's answer at the first rate, made
    /// from nothing (no worker runs anything yet: the simulator's start).
    pub fn initial(&mut self) -> ScaleDecision {
        self.first_placement(None)
    }

    /// The first placement for a run whose `started` workers already run every operator with
    /// its key groups in equal ranges over all their executors (a live run starts on that
    /// spread): the decision says what it changes from there — those workers and executors
    /// before, the key groups that leave their worker — not from nothing.
    pub fn initial_from_spread(&mut self, started: usize) -> ScaleDecision {
        let executors = self.cfg.executors_per_worker.max(1);
        self.workers = started;
        self.parallelism = vec![vec![executors; started]; self.names.len()];
        let spread = even_spread(self.names.len(), started, executors);
        self.first_placement(Some(&spread))
    }

    /// The first placement, with the key groups moved counted from `from` where the run
    /// already runs on one.
    fn first_placement(&mut self, from: Option<&RoutingTable>) -> ScaleDecision {
        let rate = self.first_rate_per_s * (1.0 + self.cfg.rate_margin);
        let problem = self.problem_at(rate);
        let observed = self.observed(self.cfg.max_workers, rate);
        let d = self.policy.decide(&problem, observed.as_ref());
        let shares = d.placement.shares;
        let workers = d.placement.workers.max(1);
        self.routing = initial_routing(&shares, KEY_GROUPS_PER_OPERATOR);
        let moved = from.map_or(0, |t| moved_between(t, &self.routing));
        let decision = self.decision(
            0.0,
            "initial".into(),
            &problem,
            rate,
            workers,
            shares,
            self.routing.clone(),
            moved,
            (d.placement.saturated, d.placement.fraction_placed),
        );
        self.workers = workers;
        self.parallelism = decision.parallelism.clone();
        self.triggers.planned(self.first_rate_per_s);
        decision
    }
}

/// Key groups (of every operator) whose worker differs between two tables.
pub(super) fn moved_between(before: &RoutingTable, after: &RoutingTable) -> usize {
    (before.owners().iter())
        .zip(after.owners())
        .filter(|(x, y)| x != y)
        .count()
}

/// The worker of each key group when `workers` workers of `executors` executors each split
/// every operator's key groups into equal ranges over all executors (the live run's starting
/// spread): executor slot `g · slots / groups`, on worker `slot / executors`.
fn even_spread(operators: usize, workers: usize, executors: usize) -> RoutingTable {
    let (groups, slots) = (KEY_GROUPS_PER_OPERATOR, workers * executors);
    RoutingTable::from_fn(Epoch::INITIAL, operators, groups, |_, g| {
        Slot::at(even_slot(g.index(), groups, slots) / executors)
    })
}
