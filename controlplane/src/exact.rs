//! The exact reference for small instances: the fewest workers for which *any* placement with
//! shares on a grid of 1/`steps` is feasible under the same load model, found by exhaustive
//! search with pruning. It exists to measure the heuristic's gap (`clasp sim --experiment gap`),
//! not to be used online: the space grows as C(steps+k−1, k−1)^operators.
//!
//! The search visits operators in the same reverse-topological order as CLASP, so an operator's
//! full cost (execution, dispatch to its already-placed successors, new destinations) is known
//! when it is placed and partial loads only grow — any partial load above B prunes the branch.
//! Workers are interchangeable while they are all empty, so the first operator's shares are
//! taken non-increasing across workers.
//!
//! Because the grid restricts shares, the heuristic (continuous shares) can beat the reference
//! by a worker now and then; the gap report says so rather than hiding it.

use crate::model::{Problem, Shares};
use crate::placement::{Placement, visit_order};

/// Largest instance the reference accepts.
pub const MAX_EXACT_OPERATORS: usize = 4;
/// Largest worker count the reference searches.
pub const MAX_EXACT_WORKERS: usize = 3;
/// Default grid: shares in steps of 1/10.
pub const DEFAULT_GRID_STEPS: u32 = 10;
/// Bisection steps on s when even the maximum worker count is not enough.
const EXACT_BISECTION_STEPS: usize = 14;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExactError {
    #[error("the exact reference handles at most {MAX_EXACT_OPERATORS} operators, got {0}")]
    TooManyOperators(usize),
    #[error(
        "no placement on {MAX_EXACT_WORKERS} workers fits; the exact reference searches no more"
    )]
    TooManyWorkers,
}

/// Feasible grid placement on exactly `k` workers, if any.
pub fn feasible_on(problem: &Problem, k: usize, steps: u32) -> Option<Shares> {
    let order = visit_order(problem);
    let mut shares: Shares = vec![vec![0.0; k]; problem.operators.len()];
    let mut search = Search {
        problem,
        order: &order,
        k,
        steps,
        budget: problem.budget_us_per_s() * (1.0 + 1e-9),
        out: problem.out_edges(),
    };
    let loads = vec![0.0; k];
    let reaches = vec![0u32; k];
    search
        .dfs(0, &loads, &reaches, &mut shares)
        .then_some(shares)
}

struct Search<'a> {
    problem: &'a Problem,
    order: &'a [usize],
    k: usize,
    steps: u32,
    budget: f64,
    out: Vec<Vec<usize>>,
}

impl Search<'_> {
    fn dfs(&mut self, depth: usize, loads: &[f64], reaches: &[u32], shares: &mut Shares) -> bool {
        if depth == self.order.len() {
            return true;
        }
        let o = self.order[depth];
        let mut parts = vec![0u32; self.k];
        let first = depth == 0;
        self.compositions(
            o, 0, self.steps, first, &mut parts, loads, reaches, shares, depth,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn compositions(
        &mut self,
        o: usize,
        w: usize,
        left: u32,
        first: bool,
        parts: &mut Vec<u32>,
        loads: &[f64],
        reaches: &[u32],
        shares: &mut Shares,
        depth: usize,
    ) -> bool {
        if w == self.k - 1 {
            if first && w > 0 && left > parts[w - 1] {
                return false;
            }
            parts[w] = left;
            return self.try_parts(o, parts, loads, reaches, shares, depth);
        }
        let hi = if first && w > 0 {
            left.min(parts[w - 1])
        } else {
            left
        };
        for x in (0..=hi).rev() {
            parts[w] = x;
            if self.compositions(
                o,
                w + 1,
                left - x,
                first,
                parts,
                loads,
                reaches,
                shares,
                depth,
            ) {
                return true;
            }
        }
        false
    }

    fn try_parts(
        &mut self,
        o: usize,
        parts: &[u32],
        loads: &[f64],
        reaches: &[u32],
        shares: &mut Shares,
        depth: usize,
    ) -> bool {
        let p = self.problem;
        let c = p.costs;
        let mut new_loads = loads.to_vec();
        let mut new_reaches = reaches.to_vec();
        for w in 0..self.k {
            let x = parts[w] as f64 / self.steps as f64;
            shares[o][w] = x;
            if parts[w] == 0 {
                continue;
            }
            let mut add = x * p.operators[o].demand_us_per_s;
            for &e in &self.out[o] {
                let to = p.edges[e].to;
                let local = shares[to][w];
                add += x * p.edges[e].rate_per_s * (c.alpha_us * local + c.beta_us * (1.0 - local));
                for (v, &s) in shares[to].iter().enumerate() {
                    if v != w && s > 0.0 && p.edges[e].rate_per_s > 0.0 {
                        new_reaches[w] |= 1 << v;
                    }
                }
            }
            let gained = (new_reaches[w] & !reaches[w]).count_ones();
            new_loads[w] += add + c.gamma_us * gained as f64;
            if new_loads[w] > self.budget {
                for s in shares[o].iter_mut() {
                    *s = 0.0;
                }
                return false;
            }
        }
        if self.dfs(depth + 1, &new_loads, &new_reaches, shares) {
            return true;
        }
        for s in shares[o].iter_mut() {
            *s = 0.0;
        }
        false
    }
}

/// The exact reference: the fewest workers (≤ min(max_workers, 3)) with a feasible grid
/// placement; when none fits at `max_workers ≤ 3`, the largest fraction of the input that does.
pub fn place_exact(problem: &Problem, steps: u32) -> Result<Placement, ExactError> {
    if problem.operators.len() > MAX_EXACT_OPERATORS {
        return Err(ExactError::TooManyOperators(problem.operators.len()));
    }
    let kmax = problem.max_workers.min(MAX_EXACT_WORKERS);
    for k in 1..=kmax {
        if let Some(shares) = feasible_on(problem, k, steps) {
            return Ok(Placement {
                shares,
                workers: k,
                saturated: false,
                fraction_placed: 1.0,
            });
        }
    }
    if problem.max_workers > MAX_EXACT_WORKERS {
        return Err(ExactError::TooManyWorkers);
    }
    let (mut lo, mut hi, mut best) = (0.0f64, 1.0f64, None);
    for _ in 0..EXACT_BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        match feasible_on(&problem.scaled(mid), kmax, steps) {
            Some(s) => {
                lo = mid;
                best = Some(s);
            }
            None => hi = mid,
        }
    }
    let shares = best.unwrap_or_else(|| {
        let mut s = vec![vec![0.0; kmax]; problem.operators.len()];
        for row in &mut s {
            row[0] = 1.0;
        }
        s
    });
    Ok(Placement {
        shares,
        workers: kmax,
        saturated: true,
        fraction_placed: lo,
    })
}
