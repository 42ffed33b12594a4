//! CLASP placement: reverse-topological bin-packing of divisible operator demands onto the
//! fewest workers, counting the chained-request cost each share adds.
//!
//! Why reverse-topological: the dispatch cost of o's chained requests on w depends on where o's
//! successors are (α if local, β if remote, γ per new destination). Placing successors first
//! makes that cost known exactly when o is placed, so every worker's load stays within B by
//! construction and no later step can push an already-filled worker over its budget (a
//! predecessor placed later charges its sends to *its own* worker).
//!
//! Which open workers an operator may go to is [`Packing`]: any-fit (the default) tries every
//! open worker, successor hosts first; next-fit only the last one opened, so a worker once left
//! behind is closed for good (fewer candidates, and the classic bin-packing rule to compare with).
//!
//! The packing works in fraction space (σ rather than φ = σ·D̃): one unit of σ costs
//! `D̃_o + Σ_{o_s} Ẽ^{o→o_s}·[α·σ_{o_s}(w) + β·(1−σ_{o_s}(w))]` on w, which is D̃_o·m_w (m_w:
//! o's cost multiplier on w) and stays defined for an operator with no execution demand.

use crate::model::{Problem, SHARE_EPSILON, Shares};

/// Remaining fraction below which an operator counts as fully placed.
const DONE_EPSILON: f64 = 1e-9;
/// A share smaller than this (that would not finish the operator) is not worth a γ: skip it.
const MIN_SHARE: f64 = 1e-6;
/// Relative margin kept below B so floating-point dust never lands a load above it.
const BUDGET_MARGIN: f64 = 1e-7;
/// Bisection steps on the sustainable fraction s every saturated placement takes (2^-30 ≈ 1e-9
/// resolution on [0, 1]).
const BISECTION_STEPS: usize = 30;
/// Width of the final bisection bracket relative to the fraction found (2^-20 ≈ 1e-6). A demand
/// far beyond `max_workers` leaves a fraction below 2^-30, which [`BISECTION_STEPS`] steps on
/// [0, 1] cannot tell from zero; so the bisection goes on halving until something fits and then
/// narrows the bracket to this share of s. A fraction of 2^-10 or more meets it within the first
/// [`BISECTION_STEPS`], so those placements are what they always were.
const RELATIVE_RESOLUTION: f64 = 1.0 / (1u64 << 20) as f64;
/// A bound on the bisection: halving 1.0 reaches zero in 1075 steps, and the relative
/// resolution takes 21 more. A validated problem (`model::MAX_QUANTITY`,
/// `model::MIN_BUDGET_US_PER_S`) holds a fraction of at least ~10^-34, ~10^-62 of the -SP
/// scale-up in [`place_max_throughput`]: at most ~230 steps.
const MAX_BISECTION_STEPS: usize = 1100;

/// Which open workers the packing tries for an operator before it opens a new one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Packing {
    /// Every open worker, in affinity order (the hosts of the operator's successors first).
    #[default]
    AnyFit,
    /// Only the worker opened last; once a new one is opened, the others are closed.
    NextFit,
}

impl Packing {
    /// Both rules, the default first.
    pub const ALL: [Packing; 2] = [Packing::AnyFit, Packing::NextFit];

    /// The rule's name on the command line: `any-fit` or `next-fit`.
    pub fn name(self) -> &'static str {
        match self {
            Packing::AnyFit => "any-fit",
            Packing::NextFit => "next-fit",
        }
    }

    /// The rule named `s`, if any.
    pub fn parse(s: &str) -> Option<Packing> {
        Packing::ALL.into_iter().find(|p| p.name() == s)
    }
}

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
    let mut packer = Packer::new(problem, budget_us_per_s, max_workers);
    for o in visit_order(problem) {
        let succ_hosts = packer.successor_hosts(o);
        packer.rank_candidates(o, &succ_hosts);
        let remaining = packer.fill(o, &succ_hosts);
        packer.clear_marks(&succ_hosts);
        if remaining > DONE_EPSILON {
            return None;
        }
        packer.complete_shares(o);
    }
    Some(packer.finish())
}

/// The packing in progress: the shares placed so far and the workers opened for them, plus
/// scratch space reused from one operator to the next.
struct Packer<'a> {
    problem: &'a Problem,
    /// `out[o]`: indices of o's out-edges.
    out: Vec<Vec<usize>>,
    /// The budget B, less a hair of margin (worker w's: B·`Problem::budget_factor(w)`).
    budget_us_per_s: f64,
    /// Free budget at or below which a worker counts as full.
    budget_eps: f64,
    max_workers: usize,
    shares: Shares,
    /// `hosts[o]`: the workers o has a share on, in placement order.
    hosts: Vec<Vec<usize>>,
    open: Vec<OpenWorker>,
    /// `is_succ_host[w]`: w hosts a successor of the operator being placed.
    is_succ_host: Vec<bool>,
    /// `affinity[w]`: what placing the current operator on w saves in sends (successor hosts
    /// only; zero elsewhere).
    affinity: Vec<f64>,
    /// The open workers to try for the current operator, best first.
    candidates: Vec<usize>,
}

impl<'a> Packer<'a> {
    /// An empty packing of `problem` under `budget_us_per_s` on at most `max_workers`.
    fn new(problem: &'a Problem, budget_us_per_s: f64, max_workers: usize) -> Self {
        // A hair of margin absorbs the rounding dust added when a share is completed.
        let budget_us_per_s = budget_us_per_s * (1.0 - BUDGET_MARGIN);
        Packer {
            problem,
            out: problem.out_edges(),
            budget_us_per_s,
            budget_eps: budget_us_per_s * 1e-12,
            max_workers,
            shares: vec![vec![0.0; max_workers]; problem.operators.len()],
            hosts: vec![Vec::new(); problem.operators.len()],
            open: Vec::new(),
            is_succ_host: vec![false; max_workers],
            affinity: vec![0.0f64; max_workers],
            candidates: Vec::with_capacity(max_workers),
        }
    }

    /// Workers hosting any successor of `o` (over edges with traffic), in index order: the
    /// possible remote destinations of o. Marks them in `is_succ_host`.
    fn successor_hosts(&mut self, o: usize) -> Vec<usize> {
        let edges = &self.problem.edges;
        let mut succ_hosts: Vec<usize> = Vec::new();
        for &e in self.out[o].iter().filter(|&&e| edges[e].rate_per_s > 0.0) {
            for &v in &self.hosts[edges[e].to] {
                if !self.is_succ_host[v] {
                    self.is_succ_host[v] = true;
                    succ_hosts.push(v);
                }
            }
        }
        succ_hosts.sort_unstable();
        succ_hosts
    }

    /// Orders the open workers for `o` by affinity, highest first (ties by index). Affinity is
    /// Σ σ_{o_s}(w)·Ẽ·(β−α): only successor hosts have any. Next-fit has one candidate: the
    /// worker opened last.
    fn rank_candidates(&mut self, o: usize, succ_hosts: &[usize]) {
        if self.problem.packing == Packing::NextFit {
            self.candidates.clear();
            self.candidates.extend(self.open.len().checked_sub(1));
            return;
        }
        let (edges, c) = (&self.problem.edges, self.problem.costs);
        for &w in succ_hosts {
            self.affinity[w] = self.out[o]
                .iter()
                .map(|&e| self.shares[edges[e].to][w] * edges[e].rate_per_s)
                .sum::<f64>()
                * (c.beta_us - c.alpha_us);
        }
        let affinity = &self.affinity;
        self.candidates.clear();
        self.candidates.extend(0..self.open.len());
        self.candidates
            .sort_by(|&a, &b| affinity[b].total_cmp(&affinity[a]).then(a.cmp(&b)));
    }

    /// Spreads `o` over the candidates, then over fresh workers, until it is placed or no
    /// worker takes more; returns the fraction of o left unplaced.
    fn fill(&mut self, o: usize, succ_hosts: &[usize]) -> f64 {
        let mut remaining = 1.0f64;
        let mut tried = 0;
        while remaining > DONE_EPSILON {
            let Some((w, fresh)) = self.next_worker(&mut tried) else {
                break;
            };
            match self.take_share(o, w, remaining, succ_hosts) {
                Some(x) => remaining -= x,
                None if fresh => {
                    // An empty worker takes nothing: no further new worker would either.
                    self.open.pop();
                    break;
                }
                None => {}
            }
        }
        remaining
    }

    /// The next worker to try: the ranked candidates in turn (`tried` counts them), then a
    /// freshly opened worker while fewer than `max_workers` are open. `(worker, fresh)`, or
    /// `None` when there is none left.
    fn next_worker(&mut self, tried: &mut usize) -> Option<(usize, bool)> {
        if let Some(&w) = self.candidates.get(*tried) {
            *tried += 1;
            return Some((w, false));
        }
        if self.open.len() < self.max_workers {
            self.open.push(OpenWorker {
                load_us_per_s: 0.0,
                reaches: vec![false; self.max_workers],
            });
            return Some((self.open.len() - 1, true));
        }
        None
    }

    /// Puts as much of `o`'s `remaining` fraction on worker `w` as its budget allows, charging
    /// the unit cost and a γ per new remote destination. Returns the fraction placed, or `None`
    /// when w has no room or only for a share too small to be worth it.
    fn take_share(
        &mut self,
        o: usize,
        w: usize,
        remaining: f64,
        succ_hosts: &[usize],
    ) -> Option<f64> {
        let c = self.problem.costs;
        let ow = &self.open[w];
        // A latency-aware headroom lowers some workers' budgets (`Problem::budget_factor`).
        let free = self.budget_us_per_s * self.problem.budget_factor(w) - ow.load_us_per_s;
        let new_dests = succ_hosts
            .iter()
            .filter(|&&v| v != w && !ow.reaches[v])
            .count();
        let avail = free - c.gamma_us * new_dests as f64;
        if free <= self.budget_eps || avail <= 0.0 {
            return None;
        }
        let unit_cost = self.unit_cost(o, w);
        let x = if unit_cost <= 0.0 {
            remaining
        } else {
            remaining.min(avail / unit_cost)
        };
        if x < MIN_SHARE && x < remaining {
            return None;
        }
        self.shares[o][w] += x;
        self.hosts[o].push(w);
        let ow = &mut self.open[w];
        ow.load_us_per_s += x * unit_cost + c.gamma_us * new_dests as f64;
        for &v in succ_hosts {
            if v != w {
                ow.reaches[v] = true;
            }
        }
        Some(x)
    }

    /// What one unit of `o`'s fraction costs on `w`: its demand plus each chained request at α
    /// for the successor's share on w and β for the rest (D̃_o·m_w) — with a receiver's share r
    /// of β (`Problem::beta_receiver_share`), (1−r)·β for the rest, and r·β for each request
    /// `o` receives from its predecessors' shares elsewhere (placed already: the order is
    /// topological).
    fn unit_cost(&self, o: usize, w: usize) -> f64 {
        let (edges, c) = (&self.problem.edges, self.problem.costs);
        let r = self.problem.receiver_share();
        let sent: f64 = self.out[o]
            .iter()
            .map(|&e| {
                let local = self.shares[edges[e].to][w];
                edges[e].rate_per_s * (c.alpha_us * local + (1.0 - r) * c.beta_us * (1.0 - local))
            })
            .sum();
        let received: f64 = if r > 0.0 {
            edges
                .iter()
                .filter(|e| e.to == o && e.from != o)
                .map(|e| e.rate_per_s * (1.0 - self.shares[e.from][w]) * r * c.beta_us)
                .sum()
        } else {
            0.0
        };
        self.problem.operators[o].demand_us_per_s + sent + received
    }

    /// Clears the per-operator marks of the successor hosts.
    fn clear_marks(&mut self, succ_hosts: &[usize]) {
        for &w in succ_hosts {
            self.is_succ_host[w] = false;
            self.affinity[w] = 0.0;
        }
    }

    /// Rounding dust: makes the shares of `o` sum to exactly 1 on its largest host.
    fn complete_shares(&mut self, o: usize) {
        let shares = &mut self.shares[o];
        let sum: f64 = shares.iter().sum();
        if let Some(&w) = self.hosts[o]
            .iter()
            .max_by(|&&a, &&b| shares[a].total_cmp(&shares[b]).then(b.cmp(&a)))
        {
            shares[w] += 1.0 - sum;
        }
        debug_assert!(shares.iter().all(|&s| s >= -SHARE_EPSILON));
    }

    /// The shares, trimmed to the workers opened (at least one), and that worker count.
    fn finish(mut self) -> (Shares, usize) {
        let workers = self.open.len().max(1);
        for s in &mut self.shares {
            s.truncate(workers);
        }
        (self.shares, workers)
    }
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
    let (fraction_placed, best) = largest_fraction_that_fits(problem, budget_us_per_s, max_workers);
    let (shares, workers) = best.unwrap_or_else(|| {
        // Only a budget that holds nothing (zero, or not a number) gets here: any positive B
        // holds a small enough fraction of a finite demand on one worker, where no γ is paid.
        // Everything on worker 0, fraction 0.
        (vec![vec![1.0]; problem.operators.len()], 1)
    });
    Placement {
        shares,
        workers,
        saturated: true,
        fraction_placed,
    }
}

/// Bisection on the fraction s of the demand that `max_workers` workers hold, given that all
/// of it (s = 1) does not fit: the largest s found and its packing (`None` when none fits).
/// Not a fixed number of steps: a fraction below 2^-30 would end with nothing found and the
/// demand reported as unplaceable, where it only needs a smaller s (see
/// [`RELATIVE_RESOLUTION`]).
fn largest_fraction_that_fits(
    problem: &Problem,
    budget_us_per_s: f64,
    max_workers: usize,
) -> (f64, Option<(Shares, usize)>) {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut best = None;
    for step in 0..MAX_BISECTION_STEPS {
        let narrow = hi - lo <= lo * RELATIVE_RESOLUTION;
        if step >= BISECTION_STEPS && best.is_some() && narrow {
            break;
        }
        let mid = 0.5 * (lo + hi);
        match pack(&problem.scaled(mid), budget_us_per_s, max_workers) {
            Some(p) => {
                lo = mid;
                best = Some(p);
            }
            None => hi = mid,
        }
    }
    (lo, best)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::random_instance;
    use clasp_protocol::rng::SimRng;

    /// Operators placed (in visit order) on a worker opened before the last worker any
    /// earlier operator used: what next-fit must never do.
    fn returns_to_closed_workers(problem: &Problem) -> usize {
        let p = place(problem);
        let mut last_opened = 0usize;
        let mut returns = 0;
        for o in visit_order(problem) {
            let hosts: Vec<usize> = (0..p.workers)
                .filter(|&w| p.shares[o][w] > SHARE_EPSILON)
                .collect();
            if hosts.iter().any(|&w| w < last_opened) {
                returns += 1;
            }
            last_opened = last_opened.max(hosts.iter().copied().max().unwrap_or(0));
        }
        returns
    }

    /// T (1.9 B) fills w0 and most of w1; X → T cannot take w1's rest (it would need γ for
    /// w0) and opens w2; Y (no sends) fits in w1's rest — any-fit goes back there.
    fn goes_back_instance() -> Problem {
        use crate::model::{CostModel, EdgeLoad, OperatorLoad};
        let op = |name: &str, demand: f64| OperatorLoad {
            name: name.into(),
            demand_us_per_s: demand,
            rate_per_s: 1000.0,
            exec_us: demand / 1000.0,
        };
        Problem {
            capacity_us_per_s: 1e6,
            headroom: 1.0,
            costs: CostModel {
                alpha_us: 1.0,
                beta_us: 10.0,
                gamma_us: 150_000.0,
            },
            max_workers: 4,
            slots_per_worker: 10,
            operators: vec![op("t", 1.9e6), op("x", 0.2e6), op("y", 0.05e6)],
            edges: vec![EdgeLoad {
                from: 1,
                to: 0,
                rate_per_s: 1000.0,
            }],
            packing: Packing::AnyFit,
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
        }
    }

    #[test]
    fn next_fit_never_places_on_a_closed_worker() {
        let mut p = goes_back_instance();
        assert_eq!(returns_to_closed_workers(&p), 1, "any-fit puts y on w1");
        assert_eq!(place(&p).workers, 3);
        p.packing = Packing::NextFit;
        assert_eq!(
            returns_to_closed_workers(&p),
            0,
            "next-fit reopened a worker"
        );
        let pl = place(&p);
        assert_eq!(pl.workers, 3);
        assert!(
            pl.shares[2][2] > 1.0 - 1e-9,
            "y on the last worker: {:?}",
            pl.shares
        );
        // And on random instances: never back, always within B.
        let mut rng = SimRng::new(7);
        for _ in 0..300 {
            let mut p = random_instance(&mut rng);
            p.max_workers = 8;
            p = p.scaled(1.0 + 2.0 * rng.uniform());
            p.packing = Packing::NextFit;
            assert_eq!(
                returns_to_closed_workers(&p),
                0,
                "next-fit reopened a worker"
            );
            let pl = place(&p);
            let loads =
                crate::model::worker_loads(&p.scaled(pl.fraction_placed), &pl.shares, pl.workers);
            assert!(
                loads
                    .iter()
                    .all(|&l| l <= p.budget_us_per_s() * (1.0 + 1e-9))
            );
        }
    }

    #[test]
    fn each_worker_stays_within_its_own_headroom() {
        let mut rng = SimRng::new(11);
        for _ in 0..200 {
            let mut p = random_instance(&mut rng);
            p.max_workers = 8;
            let uniform = place(&p);
            p.worker_headroom = (0..8).map(|_| 0.5 + 0.5 * rng.uniform()).collect();
            let pl = place(&p);
            let loads =
                crate::model::worker_loads(&p.scaled(pl.fraction_placed), &pl.shares, pl.workers);
            for (w, &l) in loads.iter().enumerate() {
                let b = p.budget_us_per_s() * p.budget_factor(w);
                assert!(l <= b * (1.0 + 1e-9), "worker {w}: {l} > {b}");
            }
            // h_w above h changes nothing: h stays the ceiling.
            p.worker_headroom = vec![1.0; 8];
            assert_eq!(place(&p), uniform);
        }
    }

    /// `split` (demand `split_us_per_s`) sends 10 000 requests/s to `count` (1 200 µs/s), with
    /// the reference prototype's costs and B = 765 000 µs/s, on at most `max_workers`.
    fn split_count(split_us_per_s: f64, max_workers: usize) -> Problem {
        use crate::model::{
            DEFAULT_HEADROOM, EdgeLoad, OperatorLoad, PAPER_CAPACITY_US_PER_S, PAPER_COSTS,
        };
        let op = |name: &str, demand: f64, rate: f64| OperatorLoad {
            name: name.into(),
            demand_us_per_s: demand,
            rate_per_s: rate,
            exec_us: 400.0,
        };
        Problem {
            capacity_us_per_s: PAPER_CAPACITY_US_PER_S,
            headroom: DEFAULT_HEADROOM,
            costs: PAPER_COSTS,
            max_workers,
            slots_per_worker: 10,
            operators: vec![
                op("split", split_us_per_s, 1000.0),
                op("count", 1200.0, 10_000.0),
            ],
            edges: vec![EdgeLoad {
                from: 0,
                to: 1,
                rate_per_s: 10_000.0,
            }],
            packing: Packing::AnyFit,
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
        }
    }

    /// A demand far beyond 4 workers is placed saturated on all 4, at the largest fraction they
    /// hold: 4·B less 3 γ (w1..w3 send to `count` on w0) over the demand, ~95 % of the bound
    /// 4·B/ΣD̃. At 10^16 that fraction (~3·10^-10) is below the 2^-30 a fixed 30-step bisection
    /// resolves: it came back as 1 worker, fraction 0, nothing placed; at 10^15 as 91 %.
    #[test]
    fn a_demand_far_beyond_the_cluster_fills_every_worker() {
        for demand in [1e9, 1e12, 1e15, 1e16, 1e30] {
            let p = split_count(demand, 4);
            let pl = place(&p);
            let b = p.budget_us_per_s();
            let bound = 4.0 * b / p.total_demand_us_per_s();
            assert!(pl.saturated, "{demand}");
            assert_eq!(pl.workers, 4, "{demand}: {pl:?}");
            let s = pl.fraction_placed;
            assert!(
                s <= bound && s > 0.94 * bound,
                "{demand}: s = {s}, bound {bound}"
            );
            let placed = p.scaled(s);
            let loads = crate::model::worker_loads(&placed, &pl.shares, pl.workers);
            assert!(loads.iter().all(|&l| l <= b * (1.0 + 1e-9)), "{loads:?}");
        }
    }

    /// Operators with no execution demand: the -SP scale-up starts 4·W·B/10^-9 above the demand,
    /// where what fits is ~10^-16 of it; it came back as nothing placed. Here `count` and part
    /// of `split` share w0 (α per request), the rest of `split` sends from w1 (β, γ): more than
    /// w0 alone holds, B/(10 000·α).
    #[test]
    fn max_throughput_of_chained_cost_alone_is_found() {
        let mut p = split_count(0.0, 2);
        p.operators[1].demand_us_per_s = 0.0;
        let pl = place_max_throughput(&p, 2);
        let b = p.budget_us_per_s();
        let one_worker = b / (p.edges[0].rate_per_s * p.costs.alpha_us);
        assert_eq!(pl.workers, 2, "{pl:?}");
        assert!(pl.fraction_placed > one_worker, "{pl:?}");
        let placed = p.scaled(pl.fraction_placed);
        let loads = crate::model::worker_loads(&placed, &pl.shares, pl.workers);
        assert!(loads.iter().all(|&l| l <= b * (1.0 + 1e-9)), "{loads:?}");
    }

    #[test]
    fn packing_names_round_trip() {
        for p in Packing::ALL {
            assert_eq!(Packing::parse(p.name()), Some(p));
        }
        assert_eq!(Packing::parse("best-fit"), None);
    }
}
