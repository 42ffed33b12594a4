//! CLASP placement (eq. 5–6 of the CLASP paper): reverse-topological bin-packing of divisible
//! operator demands onto the fewest workers, counting the chained-request cost each share adds.
//!
//! Why reverse-topological: the dispatch cost of o's chained requests on w depends on where o's
//! successors are (α if local, β if remote, γ per new destination). Placing successors first
//! makes that cost known exactly when o is placed, so every worker's load stays within B by
//! construction and no later step can push an already-filled worker over its budget (a
//! predecessor placed later charges its sends to *its own* worker).
//!
//! The packing works in fraction space (σ rather than φ = σ·D̃): one unit of σ costs
//! `D̃_o + Σ_{o_s} Ẽ^{o→o_s}·[α·σ_{o_s}(w) + β·(1−σ_{o_s}(w))]` on w, which is D̃_o·m_w of eq. 6
//! and stays defined for an operator with no execution demand.

use crate::model::{Problem, SHARE_EPSILON, Shares};

/// Remaining fraction below which an operator counts as fully placed.
const DONE_EPSILON: f64 = 1e-9;
/// A share smaller than this (that would not finish the operator) is not worth a γ: skip it.
const MIN_SHARE: f64 = 1e-6;
/// Relative margin kept below B so floating-point dust never lands a load above it.
const BUDGET_MARGIN: f64 = 1e-7;
/// Bisection steps on the sustainable fraction s (2^-30 ≈ 1e-9 resolution).
const BISECTION_STEPS: usize = 30;

/// The outcome of a placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// `shares[o][w]`: fraction of o's demand on worker w; `w < workers`.
    pub shares: Shares,
    /// Workers the packing opened.
    pub workers: usize,
    /// True when even `max_workers` cannot hold the whole demand.
    pub saturated: bool,
    /// The fraction s of the input rate the placement sustains (1.0 unless saturated).
    pub fraction_placed: f64,
}

/// The reverse-topological visit order: a post-order DFS from the sources that explores
/// successors heaviest edge first (ties by operator index), so every operator comes after all
/// its successors and heavy edges end up adjacent.
pub fn visit_order(problem: &Problem) -> Vec<usize> {
    let n = problem.operators.len();
    let out = problem.out_edges();
    let mut succ: Vec<Vec<(f64, usize)>> = out
        .iter()
        .map(|es| {
            es.iter()
                .map(|&e| (problem.edges[e].rate_per_s, problem.edges[e].to))
                .collect()
        })
        .collect();
    for s in &mut succ {
        s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    }
    let mut has_pred = vec![false; n];
    for e in &problem.edges {
        has_pred[e.to] = true;
    }
    let mut visited = vec![false; n];
    let mut order = Vec::with_capacity(n);
    // Iterative DFS (deep chains must not overflow the stack): (operator, next successor index).
    let roots: Vec<usize> = (0..n).filter(|&o| !has_pred[o]).chain(0..n).collect();
    for root in roots {
        if visited[root] {
            continue;
        }
        visited[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let o = top.0;
            if let Some(&(_, s)) = succ[o].get(top.1) {
                top.1 += 1;
                if !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            } else {
                order.push(o);
                stack.pop();
            }
        }
    }
    order
}

/// Per-worker bookkeeping of an open worker during packing.
struct OpenWorker {
    load_us_per_s: f64,
    /// `reaches[v]`: w already sends to remote worker v.
    reaches: Vec<bool>,
}

/// Packs the problem (already scaled) into at most `max_workers` workers with budget
/// `budget_us_per_s`; `None` when it does not fit.
pub fn pack(
    problem: &Problem,
    budget_us_per_s: f64,
    max_workers: usize,
) -> Option<(Shares, usize)> {
    let n = problem.operators.len();
    let c = problem.costs;
    let out = problem.out_edges();
    let mut shares: Shares = vec![vec![0.0; max_workers]; n];
    let mut hosts: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut open: Vec<OpenWorker> = Vec::new();
    let mut is_succ_host = vec![false; max_workers];
    let mut affinity = vec![0.0f64; max_workers];
    let mut candidates: Vec<usize> = Vec::with_capacity(max_workers);
    // A hair of margin absorbs the rounding dust added below when a share is completed.
    let budget_us_per_s = budget_us_per_s * (1.0 - BUDGET_MARGIN);
    let budget_eps = budget_us_per_s * 1e-12;

    for o in visit_order(problem) {
        let demand = problem.operators[o].demand_us_per_s;
        // Workers hosting any successor: the possible remote destinations of o.
        let mut succ_hosts: Vec<usize> = Vec::new();
        for &e in out[o]
            .iter()
            .filter(|&&e| problem.edges[e].rate_per_s > 0.0)
        {
            for &v in &hosts[problem.edges[e].to] {
                if !is_succ_host[v] {
                    is_succ_host[v] = true;
                    succ_hosts.push(v);
                }
            }
        }
        succ_hosts.sort_unstable();
        // Affinity = Σ σ_{o_s}(w)·Ẽ·(β−α): only successor hosts have any.
        for &w in &succ_hosts {
            affinity[w] = out[o]
                .iter()
                .map(|&e| shares[problem.edges[e].to][w] * problem.edges[e].rate_per_s)
                .sum::<f64>()
                * (c.beta_us - c.alpha_us);
        }
        candidates.clear();
        candidates.extend(0..open.len());
        candidates.sort_by(|&a, &b| affinity[b].total_cmp(&affinity[a]).then(a.cmp(&b)));

        let mut remaining = 1.0f64;
        let mut i = 0;
        while remaining > DONE_EPSILON {
            let (w, fresh) = if i < candidates.len() {
                i += 1;
                (candidates[i - 1], false)
            } else if open.len() < max_workers {
                open.push(OpenWorker {
                    load_us_per_s: 0.0,
                    reaches: vec![false; max_workers],
                });
                (open.len() - 1, true)
            } else {
                break;
            };
            let ow = &mut open[w];
            let free = budget_us_per_s - ow.load_us_per_s;
            let new_dests = succ_hosts
                .iter()
                .filter(|&&v| v != w && !ow.reaches[v])
                .count();
            let avail = free - c.gamma_us * new_dests as f64;
            if free <= budget_eps || avail <= 0.0 {
                if fresh {
                    // An empty worker takes nothing: no further new worker would either.
                    open.pop();
                    break;
                }
                continue;
            }
            let unit_cost = demand
                + out[o]
                    .iter()
                    .map(|&e| {
                        let local = shares[problem.edges[e].to][w];
                        problem.edges[e].rate_per_s
                            * (c.alpha_us * local + c.beta_us * (1.0 - local))
                    })
                    .sum::<f64>();
            let x = if unit_cost <= 0.0 {
                remaining
            } else {
                remaining.min(avail / unit_cost)
            };
            if x < MIN_SHARE && x < remaining {
                if fresh {
                    open.pop();
                    break;
                }
                continue;
            }
            shares[o][w] += x;
            hosts[o].push(w);
            ow.load_us_per_s += x * unit_cost + c.gamma_us * new_dests as f64;
            for &v in &succ_hosts {
                if v != w {
                    ow.reaches[v] = true;
                }
            }
            remaining -= x;
        }
        for &w in &succ_hosts {
            is_succ_host[w] = false;
            affinity[w] = 0.0;
        }
        if remaining > DONE_EPSILON {
            return None;
        }
        // Rounding dust: make the shares of o sum to exactly 1 on its largest host.
        let sum: f64 = shares[o].iter().sum();
        if let Some(&w) = hosts[o]
            .iter()
            .max_by(|&&a, &&b| shares[o][a].total_cmp(&shares[o][b]).then(b.cmp(&a)))
        {
            shares[o][w] += 1.0 - sum;
        }
        debug_assert!(shares[o].iter().all(|&s| s >= -SHARE_EPSILON));
    }
    let workers = open.len().max(1);
    for s in &mut shares {
        s.truncate(workers);
    }
    Some((shares, workers))
}

/// CLASP placement: the fewest workers the packing opens for the whole demand, or — when even
/// `max_workers` cannot hold it — the placement of the largest fraction s of the input that
/// fits (bisection on s), reported as saturated.
pub fn place(problem: &Problem) -> Placement {
    place_with_budget(problem, problem.budget_us_per_s(), problem.max_workers)
}

/// [`place`] with an explicit budget and worker cap.
pub fn place_with_budget(problem: &Problem, budget_us_per_s: f64, max_workers: usize) -> Placement {
    if let Some((shares, workers)) = pack(problem, budget_us_per_s, max_workers) {
        return Placement {
            shares,
            workers,
            saturated: false,
            fraction_placed: 1.0,
        };
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut best = None;
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        match pack(&problem.scaled(mid), budget_us_per_s, max_workers) {
            Some(p) => {
                lo = mid;
                best = Some(p);
            }
            None => hi = mid,
        }
    }
    let (shares, workers) = best.unwrap_or_else(|| {
        // Not even a sliver fits (γ alone exceeds B): everything on worker 0, fraction 0.
        (vec![vec![1.0]; problem.operators.len()], 1)
    });
    Placement {
        shares,
        workers,
        saturated: true,
        fraction_placed: lo,
    }
}

/// The placement that sustains the most input on exactly `workers` workers: the demand is
/// scaled up until the packing needs all of them (used by the simulator's unthrottled runs and
/// by the "-SP" baselines, which keep their own worker count but take CLASP's placement).
pub fn place_max_throughput(problem: &Problem, workers: usize) -> Placement {
    let total = problem.total_demand_us_per_s().max(1e-9);
    // Start from a scale at which the demand alone is far beyond `workers` budgets.
    let s0 = 4.0 * workers as f64 * problem.budget_us_per_s() / total;
    let p = place_with_budget(&problem.scaled(s0), problem.budget_us_per_s(), workers);
    Placement {
        fraction_placed: p.fraction_placed * s0,
        ..p
    }
}
