//! Scaling policies behind one interface: CLASP, the paper's baselines (FaaSFlow, Zhang24) and
//! their "-SP" ablations (their worker counts, CLASP's placement), plus the exact reference.
//!
//! A policy sees the projected problem (`metrics::derive_problem`) and, when the caller has
//! one, what was observed in the current configuration; it returns a worker count and shares.
//! The baselines are written from their published descriptions: they deliberately do
//! not count chained-request cost, which is the paper's point — `worker_loads` on their shares
//! shows what that costs.

pub mod faasflow;
pub mod zhang24;

use crate::exact::{DEFAULT_GRID_STEPS, place_exact};
use crate::model::{Problem, Shares};
use crate::placement::{Placement, place, place_max_throughput};

/// Which policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    Clasp,
    FaasFlow,
    Zhang24,
    FaasFlowSp,
    Zhang24Sp,
    Exact,
}

impl PolicyKind {
    /// The policies the simulator compares (the paper's five).
    pub const COMPARED: [PolicyKind; 5] = [
        PolicyKind::Clasp,
        PolicyKind::FaasFlow,
        PolicyKind::Zhang24,
        PolicyKind::FaasFlowSp,
        PolicyKind::Zhang24Sp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Clasp => "clasp",
            PolicyKind::FaasFlow => "faasflow",
            PolicyKind::Zhang24 => "zhang24",
            PolicyKind::FaasFlowSp => "faasflow-sp",
            PolicyKind::Zhang24Sp => "zhang24-sp",
            PolicyKind::Exact => "exact",
        }
    }

    pub fn parse(s: &str) -> Option<PolicyKind> {
        [
            PolicyKind::Clasp,
            PolicyKind::FaasFlow,
            PolicyKind::Zhang24,
            PolicyKind::FaasFlowSp,
            PolicyKind::Zhang24Sp,
            PolicyKind::Exact,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }

    /// True for the policies whose placement is CLASP's.
    pub fn uses_clasp_placement(self) -> bool {
        matches!(
            self,
            PolicyKind::Clasp | PolicyKind::FaasFlowSp | PolicyKind::Zhang24Sp
        )
    }
}

/// What was observed in the current configuration, for policies that extrapolate from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observed {
    /// Workers in the current configuration.
    pub workers: usize,
    /// System throughput observed while the current configuration was saturated (per second).
    pub saturated_throughput_per_s: f64,
    /// The input rate to plan for (per second).
    pub target_rate_per_s: f64,
}

/// A policy's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub policy: PolicyKind,
    pub placement: Placement,
    /// Why, in one line of `key=value` pairs.
    pub reason: String,
}

/// The one interface every policy implements.
pub trait Policy {
    fn kind(&self) -> PolicyKind;
    /// The worker count and shares for the (projected) problem.
    fn decide(&mut self, problem: &Problem, observed: Option<&Observed>) -> Decision;
    /// The policy's shares on exactly `workers` workers, for unthrottled input (Fig. 10).
    fn placement_on(&self, problem: &Problem, workers: usize) -> Shares;
    /// One interval's measured CPU time of the active workers: scheduling (everything but
    /// operator execution) and execution, µs per second. Only policies with an overhead model
    /// (Zhang24) use it.
    fn observe_overhead(&mut self, _scheduling_us_per_s: f64, _execution_us_per_s: f64) {}
}

/// The demand scale at which the raw execution demand fills `workers` budgets: how a policy
/// that does not count chained cost sizes "unthrottled" input.
pub(crate) fn fill_scale(problem: &Problem, workers: usize) -> f64 {
    workers as f64 * problem.budget_us_per_s() / problem.total_demand_us_per_s().max(1e-9)
}

/// CLASP (and the exact reference, when asked for).
#[derive(Clone, Debug, Default)]
pub struct Clasp {
    pub exact: bool,
}

impl Policy for Clasp {
    fn kind(&self) -> PolicyKind {
        if self.exact {
            PolicyKind::Exact
        } else {
            PolicyKind::Clasp
        }
    }

    fn decide(&mut self, problem: &Problem, _observed: Option<&Observed>) -> Decision {
        let placement = if self.exact {
            place_exact(problem, DEFAULT_GRID_STEPS).unwrap_or_else(|_| place(problem))
        } else {
            place(problem)
        };
        let reason = format!(
            "policy={} packing={} workers={} saturated={} fraction_placed={:.4} budget_us_per_s={:.0}",
            self.kind().name(),
            problem.packing.name(),
            placement.workers,
            placement.saturated,
            placement.fraction_placed,
            problem.budget_us_per_s()
        );
        Decision {
            policy: self.kind(),
            placement,
            reason,
        }
    }

    fn placement_on(&self, problem: &Problem, workers: usize) -> Shares {
        pad(place_max_throughput(problem, workers).shares, workers)
    }
}

/// Widens shares to exactly `workers` columns.
pub(crate) fn pad(mut shares: Shares, workers: usize) -> Shares {
    for s in &mut shares {
        s.resize(workers, 0.0);
    }
    shares
}

/// "-SP": a baseline's worker count with CLASP's placement on that many workers.
pub fn sp_placement(problem: &Problem, workers: usize) -> Placement {
    let direct = place(problem);
    if !direct.saturated && direct.workers <= workers {
        // CLASP would need fewer: spread over the given workers, as the baseline provisioned them.
        let p = place_max_throughput(problem, workers);
        return Placement {
            shares: pad(p.shares, workers),
            workers,
            saturated: false,
            fraction_placed: 1.0,
        };
    }
    let p = place_max_throughput(problem, workers);
    let fraction = p.fraction_placed.min(1.0);
    Placement {
        shares: pad(p.shares, workers),
        workers,
        saturated: fraction < 1.0,
        fraction_placed: fraction,
    }
}

/// A boxed policy by kind.
pub fn policy(kind: PolicyKind) -> Box<dyn Policy + Send> {
    match kind {
        PolicyKind::Clasp => Box::new(Clasp { exact: false }),
        PolicyKind::Exact => Box::new(Clasp { exact: true }),
        PolicyKind::FaasFlow => Box::new(faasflow::FaasFlow {
            shared_placement: false,
        }),
        PolicyKind::FaasFlowSp => Box::new(faasflow::FaasFlow {
            shared_placement: true,
        }),
        PolicyKind::Zhang24 => Box::new(zhang24::Zhang24::new(false)),
        PolicyKind::Zhang24Sp => Box::new(zhang24::Zhang24::new(true)),
    }
}
