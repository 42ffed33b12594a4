//! Zhang24 (Zhang et al., 2024a) as its authors describe it: per-operator parallelism from the
//! overhead model `r(p) = b·(1 − e^{−k·p})` (r = scheduling / (scheduling + execution) time),
//! refitted online from the scheduling and execution time the workers measure (never from the
//! cost model's α, β, γ); the smallest p with `p·(slot/τ_o)·(1 − r(p))·0.9 ≥ rate_o`; instances placed
//! in topological order by `0.5·data-affinity + 0.5·load-balance` over all workers.
//!
//! One unit choice of ours: the original writes the per-instance rate as 10^6/τ_o (one executor
//! second per second); we use one slot's share of the worker capacity, W̄/slots, so a Zhang24
//! instance is the same size as a FaaSFlow slot and both live in the units of the problem file.
//! Load balancing over *all* workers is what makes it spread each operator widely and use every
//! worker early (paper §5.6).

use super::{Decision, Observed, Policy, PolicyKind, fill_scale, sp_placement};
use crate::model::{Problem, Shares};
use crate::placement::Placement;

/// Prior of the overhead model's rate constant k.
pub const PRIOR_K: f64 = 0.155;
/// Prior of the overhead model's asymptote b.
pub const PRIOR_B: f64 = 0.335;
/// The utilisation target of the parallelism rule.
pub const TARGET_UTILISATION: f64 = 0.9;
/// Weight of data affinity in the instance score (load balance gets the rest).
pub const AFFINITY_WEIGHT: f64 = 0.5;
/// Weight of the prior curve against observed points in the online fit (pseudo-observations).
const PRIOR_WEIGHT: f64 = 1.0;
/// Parallelism cap per operator (a bound on the search).
const MAX_PARALLELISM: usize = 10_000;
/// Observed points the online fit keeps (the latest; older ones describe older configurations).
pub const MAX_OBSERVED_POINTS: usize = 256;

/// The online fit of r(p): least squares over observed (p, r) points plus the prior curve.
#[derive(Clone, Debug)]
pub struct OverheadModel {
    pub k: f64,
    pub b: f64,
    points: Vec<(f64, f64)>,
}

impl Default for OverheadModel {
    fn default() -> Self {
        OverheadModel {
            k: PRIOR_K,
            b: PRIOR_B,
            points: Vec::new(),
        }
    }
}

impl OverheadModel {
    pub fn r(&self, p: f64) -> f64 {
        self.b * (1.0 - (-self.k * p).exp())
    }

    /// Records an observed scheduling fraction r at parallelism p and refits (the latest
    /// [`MAX_OBSERVED_POINTS`] points count).
    pub fn observe(&mut self, p: f64, r: f64) {
        if p.is_finite() && p > 0.0 && r.is_finite() && (0.0..1.0).contains(&r) {
            if self.points.len() == MAX_OBSERVED_POINTS {
                self.points.remove(0);
            }
            self.points.push((p, r));
            self.fit();
        }
    }

    /// Records one measurement at parallelism p: the workers' scheduling time (CPU time not
    /// spent executing operators: dispatch, hand-offs, connections) and execution time, both
    /// per second or both per request; `r = scheduling / (scheduling + execution)`.
    pub fn observe_times(&mut self, p: f64, scheduling_us: f64, execution_us: f64) {
        let total = scheduling_us.max(0.0) + execution_us;
        if execution_us > 0.0 && total.is_finite() {
            self.observe(p, scheduling_us.max(0.0) / total);
        }
    }

    /// Observed points behind the fit.
    pub fn observed_points(&self) -> usize {
        self.points.len()
    }

    /// Grid over k; for each k, b is the closed-form least-squares solution.
    fn fit(&mut self) {
        let prior: Vec<(f64, f64, f64)> = (1..=10)
            .map(|p| {
                (
                    p as f64,
                    PRIOR_B * (1.0 - (-PRIOR_K * p as f64).exp()),
                    PRIOR_WEIGHT,
                )
            })
            .collect();
        let pts: Vec<(f64, f64, f64)> = self
            .points
            .iter()
            .map(|&(p, r)| (p, r, 1.0))
            .chain(prior)
            .collect();
        let mut best = (f64::INFINITY, self.k, self.b);
        for i in 1..=400 {
            let k = i as f64 * 0.005;
            let (mut num, mut den) = (0.0, 0.0);
            for &(p, r, wt) in &pts {
                let f = 1.0 - (-k * p).exp();
                num += wt * f * r;
                den += wt * f * f;
            }
            let b = if den > 0.0 {
                (num / den).clamp(0.0, 0.95)
            } else {
                PRIOR_B
            };
            let err: f64 = pts
                .iter()
                .map(|&(p, r, wt)| wt * (r - b * (1.0 - (-k * p).exp())).powi(2))
                .sum();
            if err < best.0 {
                best = (err, k, b);
            }
        }
        self.k = best.1;
        self.b = best.2;
    }
}

/// Zhang24, or Zhang24-SP when `shared_placement`.
#[derive(Clone, Debug)]
pub struct Zhang24 {
    pub shared_placement: bool,
    pub model: OverheadModel,
    /// Mean instances per operator of the last decision: the p a measurement is taken at.
    last_parallelism: Option<f64>,
}

impl Zhang24 {
    pub fn new(shared_placement: bool) -> Self {
        Zhang24 {
            shared_placement,
            model: OverheadModel::default(),
            last_parallelism: None,
        }
    }

    /// The smallest p with `p·(slot/τ)·(1 − r(p))·0.9 ≥ rate` for each operator.
    pub fn parallelism(&self, problem: &Problem) -> Vec<usize> {
        let slot_us_per_s = problem.capacity_us_per_s / problem.slots_per_worker as f64;
        problem
            .operators
            .iter()
            .map(|o| {
                if o.demand_us_per_s <= 0.0 {
                    return 1;
                }
                let exec_us = if o.exec_us > 0.0 {
                    o.exec_us
                } else {
                    o.demand_us_per_s / o.rate_per_s.max(1e-9)
                };
                let per_instance = slot_us_per_s / exec_us.max(1e-9);
                (1..=MAX_PARALLELISM)
                    .find(|&p| {
                        p as f64
                            * per_instance
                            * (1.0 - self.model.r(p as f64))
                            * TARGET_UTILISATION
                            >= o.rate_per_s
                    })
                    .unwrap_or(MAX_PARALLELISM)
            })
            .collect()
    }

    /// Instances placed over `workers` workers; returns shares and the workers that got any.
    pub fn shares_on(&self, problem: &Problem, workers: usize) -> (Shares, usize) {
        let par = self.parallelism(problem);
        let spw = problem.slots_per_worker;
        let order = problem
            .topological_order()
            .unwrap_or_else(|| (0..problem.operators.len()).collect());
        let mut preds = vec![Vec::new(); problem.operators.len()];
        for e in &problem.edges {
            preds[e.to].push(e.from);
        }
        let mut inst = vec![vec![0usize; workers]; problem.operators.len()];
        let mut used = vec![0usize; workers];
        for &o in &order {
            let pred_total: usize = preds[o].iter().map(|&p| par[p]).sum();
            for _ in 0..par[o] {
                let full = used.iter().all(|&u| u >= spw);
                let score = |w: usize| {
                    let aff = if pred_total == 0 {
                        0.0
                    } else {
                        preds[o].iter().map(|&p| inst[p][w]).sum::<usize>() as f64
                            / pred_total as f64
                    };
                    let balance = 1.0 - used[w] as f64 / spw as f64;
                    AFFINITY_WEIGHT * aff + (1.0 - AFFINITY_WEIGHT) * balance
                };
                let w = (0..workers)
                    .filter(|&w| full || used[w] < spw)
                    .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(b.cmp(&a)))
                    .unwrap_or(0);
                inst[o][w] += 1;
                used[w] += 1;
            }
        }
        let shares = inst
            .iter()
            .zip(&par)
            .map(|(row, &p)| row.iter().map(|&i| i as f64 / p as f64).collect())
            .collect();
        (shares, used.iter().filter(|&&u| u > 0).count().max(1))
    }
}

impl Policy for Zhang24 {
    fn kind(&self) -> PolicyKind {
        if self.shared_placement {
            PolicyKind::Zhang24Sp
        } else {
            PolicyKind::Zhang24
        }
    }

    fn decide(&mut self, problem: &Problem, _observed: Option<&Observed>) -> Decision {
        let (shares, n) = self.shares_on(problem, problem.max_workers);
        let par = self.parallelism(problem);
        self.last_parallelism = mean_instances(&par);
        let placement = if self.shared_placement {
            sp_placement(problem, n)
        } else {
            // Compact the used workers to indices 0..n (instances went to the best-scored ones).
            let used: Vec<usize> = (0..problem.max_workers)
                .filter(|&w| shares.iter().any(|row| row[w] > 0.0))
                .collect();
            let shares = shares
                .iter()
                .map(|row| used.iter().map(|&w| row[w]).collect())
                .collect();
            Placement {
                shares,
                workers: n,
                saturated: false,
                fraction_placed: 1.0,
            }
        };
        let reason = format!(
            "policy={} workers={n} instances={} k={:.3} b={:.3}",
            self.kind().name(),
            par.iter().sum::<usize>(),
            self.model.k,
            self.model.b
        );
        Decision {
            policy: self.kind(),
            placement,
            reason,
        }
    }

    fn observe_overhead(&mut self, scheduling_us_per_s: f64, execution_us_per_s: f64) {
        if let Some(p) = self.last_parallelism {
            self.model
                .observe_times(p, scheduling_us_per_s, execution_us_per_s);
        }
    }

    fn placement_on(&self, problem: &Problem, workers: usize) -> Shares {
        if self.shared_placement {
            return super::Clasp::default().placement_on(problem, workers);
        }
        self.shares_on(&problem.scaled(fill_scale(problem, workers)), workers)
            .0
    }
}

/// Mean instances per operator (the p of r(p)); `None` without operators.
pub fn mean_instances(parallelism: &[usize]) -> Option<f64> {
    (!parallelism.is_empty())
        .then(|| parallelism.iter().sum::<usize>() as f64 / parallelism.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_protocol::rng::SimRng;

    #[test]
    fn refit_converges_on_measured_times_alone() {
        // Synthetic measurements from b = 0.25, k = 0.4 with ±5 % noise on the scheduling
        // time: only times go in, no cost model.
        let (b, k) = (0.25, 0.4);
        let mut m = OverheadModel::default();
        let mut rng = SimRng::new(11);
        for i in 0..400 {
            let p = 1.0 + (i % 20) as f64;
            let r = b * (1.0 - (-k * p).exp());
            let exec_us = 1000.0;
            let sched_us = exec_us * r / (1.0 - r) * (0.95 + 0.1 * rng.uniform());
            m.observe_times(p, sched_us, exec_us);
        }
        assert_eq!(m.observed_points(), MAX_OBSERVED_POINTS);
        assert!((m.k - k).abs() < 0.05, "k {} b {}", m.k, m.b);
        assert!((m.b - b).abs() < 0.02, "k {} b {}", m.k, m.b);
    }

    #[test]
    fn the_policy_refits_at_its_own_parallelism() {
        let mut z = Zhang24::new(false);
        // Nothing decided yet: no parallelism to pair a measurement with.
        z.observe_overhead(100.0, 900.0);
        assert_eq!(z.model.observed_points(), 0);
        let p = crate::sim::random_instance(&mut SimRng::new(3));
        z.decide(&p, None);
        for _ in 0..50 {
            z.observe_overhead(600.0, 400.0);
        }
        assert_eq!(z.model.observed_points(), 50);
        let at = mean_instances(&z.parallelism(&p)).expect("operators");
        assert!(
            (z.model.r(at) - 0.6).abs() < 0.05,
            "r({at}) = {}",
            z.model.r(at)
        );
    }
}
