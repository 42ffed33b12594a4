//! The placement problem as plain data, the load model `L_w(Φ)` (the load of worker w under
//! placement Φ), and the JSON problem file of `clasp place`, with the bounds that keep a problem
//! file from asking for absurd allocations or loops.
//!
//! Why one module: every policy, the exact reference, the simulator and the tests must agree on
//! what "the load of worker w" means, so [`worker_loads`] is the single implementation of
//! `L_w(Φ)` and everything else (including the incremental bookkeeping inside the packing) is
//! checked against it.

use serde::{Deserialize, Serialize};

/// A share below this fraction of an operator's demand is treated as "not hosted" when counting
/// distinct remote destinations; it only absorbs floating-point dust.
pub const SHARE_EPSILON: f64 = 1e-9;

/// The chained-request cost coefficients of the load model, in µs of worker time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Cost of dispatching one local chained request (µs).
    pub alpha_us: f64,
    /// Cost of dispatching one remote chained request (µs).
    pub beta_us: f64,
    /// Cost per second of each distinct remote destination (µs per second).
    pub gamma_us: f64,
}

/// Costs measured on a reference prototype: α = 38.5 µs, β = 275 µs, γ = 51.5 ms per second.
pub const PAPER_COSTS: CostModel = CostModel {
    alpha_us: 38.5,
    beta_us: 275.0,
    gamma_us: 51_500.0,
};
/// The reference prototype's smoothed whole-worker capacity W̄ (µs per second).
pub const PAPER_CAPACITY_US_PER_S: f64 = 850_000.0;
/// The packing headroom h of `B = h·W̄`.
pub const DEFAULT_HEADROOM: f64 = 0.9;
/// Executor slots per worker of the reference testbed; the slot-based baselines use it.
pub const DEFAULT_SLOTS_PER_WORKER: usize = 10;

/// Most workers a problem file may offer. Every policy allocates and scans per worker (the
/// packing's shares are operators × workers, its reach matrix workers × workers), so this and
/// [`MAX_OPERATORS`] bound the memory and the time of one decision; 1000 is also the largest
/// cluster the simulator models.
pub const MAX_WORKERS: usize = 1000;
/// Most executor slots per worker a problem file may give (the slot-based baselines fill
/// workers slot by slot).
pub const MAX_SLOTS_PER_WORKER: usize = 1024;
/// Most operators a problem file may hold.
pub const MAX_OPERATORS: usize = 1000;
/// Most edges a problem file may hold.
pub const MAX_EDGES: usize = 10_000;
/// Largest value any µs, µs/s or per-second number of a problem may take: `capacity_us_per_s`,
/// `alpha_us`, `beta_us`, `gamma_us` and every `demand_us_per_s`, `rate_per_s` and `exec_us`.
/// 10^15 µs/s is a billion cores and 10^15 requests/s beyond any stream, so nothing real is
/// refused; what the bound buys is arithmetic that stays finite. Unbounded, a finite file could
/// sum to infinity (1000 demands near `f64::MAX`, or a rate times β) and print loads as `null`,
/// and the -SP baselines' scale-up (`placement::place_max_throughput`) could turn a zero demand
/// into NaN. Bounded, the largest load the model sums is 10 000 edges × 10^15/s × 10^15 µs =
/// 10^34, and that scale-up keeps it below 10^62, far inside f64.
pub const MAX_QUANTITY: f64 = 1e15;
/// Smallest budget `B = h·W̄` a problem may have (µs/s). With B ≥ 1 and at most
/// [`MAX_OPERATORS`] demands of at most [`MAX_QUANTITY`], ⌈ΣD̃/B⌉ ≤ 10^18 fits a `usize`
/// ([`Problem::lower_bound_workers`] never saturates), and the fraction of the demand a
/// saturated cluster sustains (at least B over the whole load, ~10^-34) stays far above the
/// smallest f64 that `placement::place_with_budget` bisects down to.
pub const MIN_BUDGET_US_PER_S: f64 = 1.0;

/// One operator's projected load.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorLoad {
    pub name: String,
    /// Projected execution demand D̃_o (µs of worker time per second).
    pub demand_us_per_s: f64,
    /// Projected processed rate (requests per second).
    pub rate_per_s: f64,
    /// Mean execution time τ̄_o of one request (µs).
    pub exec_us: f64,
}

/// One edge's projected chained-request rate Ẽ^{o→o_s}.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeLoad {
    pub from: usize,
    pub to: usize,
    pub rate_per_s: f64,
}

/// A placement problem: what every policy and the exact reference take.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The whole worker's capacity W̄ (µs per second, all executors together).
    pub capacity_us_per_s: f64,
    /// h in `B = h·W̄`.
    pub headroom: f64,
    pub costs: CostModel,
    pub max_workers: usize,
    pub slots_per_worker: usize,
    pub operators: Vec<OperatorLoad>,
    pub edges: Vec<EdgeLoad>,
    /// Which open workers the packing may fill (`placement::Packing`; any-fit by default).
    pub packing: crate::placement::Packing,
    /// The share of β a remote request costs its *receiver* (0..=1): 0 charges all of β to the
    /// sender, as the paper's eq. 1 does (and the simulator's ground truth); ½ charges each
    /// side half, what a live data plane pays and what the busy-time estimator measures when
    /// it counts both sides. A receiver charged nothing looks idle while it saturates.
    pub beta_receiver_share: f64,
    /// `worker_headroom[w]`: h_w, the headroom of the w-th worker the packing opens, when it
    /// is below h (`headroom::HeadroomModel`, the latency-aware option); empty, or a worker
    /// beyond its end: h.
    pub worker_headroom: Vec<f64>,
}

impl Problem {
    /// [`Problem::beta_receiver_share`] made usable: within [0, 1], 0 when not finite.
    pub fn receiver_share(&self) -> f64 {
        if self.beta_receiver_share.is_finite() {
            self.beta_receiver_share.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// The budget B every worker's load must respect.
    pub fn budget_us_per_s(&self) -> f64 {
        self.headroom * self.capacity_us_per_s
    }

    /// Worker `w`'s budget as a fraction of B: `min(h_w, h) / h` (1 without a per-worker
    /// headroom; a value that is not a positive number counts as none).
    pub fn budget_factor(&self, w: usize) -> f64 {
        match self.worker_headroom.get(w) {
            Some(&hw) if hw > 0.0 && self.headroom > 0.0 => (hw / self.headroom).min(1.0),
            _ => 1.0,
        }
    }

    /// The same problem with every demand and rate multiplied by `s` (the projection of demand to a new input rate).
    pub fn scaled(&self, s: f64) -> Problem {
        let mut p = self.clone();
        for o in &mut p.operators {
            o.demand_us_per_s *= s;
            o.rate_per_s *= s;
        }
        for e in &mut p.edges {
            e.rate_per_s *= s;
        }
        p
    }

    /// Outgoing edge indices per operator.
    pub fn out_edges(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.operators.len()];
        for (i, e) in self.edges.iter().enumerate() {
            out[e.from].push(i);
        }
        out
    }

    /// Σ D̃_o: the execution demand alone.
    pub fn total_demand_us_per_s(&self) -> f64 {
        self.operators.iter().map(|o| o.demand_us_per_s).sum()
    }

    /// ⌈ΣD̃/B⌉: the trivial lower bound on the worker count (ignores every chained cost).
    /// Exact (to f64 precision) for every problem file: [`MAX_QUANTITY`] and
    /// [`MIN_BUDGET_US_PER_S`] keep it at most 10^18, so the cast to `usize` never saturates.
    pub fn lower_bound_workers(&self) -> usize {
        let budgets = self.total_demand_us_per_s() / self.budget_us_per_s();
        debug_assert!(
            budgets.is_nan() || budgets < usize::MAX as f64,
            "{budgets} budgets of demand: beyond what a validated problem holds"
        );
        (budgets.ceil() as usize).max(1)
    }

    /// Operators in a topological order (sources first); `None` when the graph has a cycle.
    pub fn topological_order(&self) -> Option<Vec<usize>> {
        let n = self.operators.len();
        let mut indeg = vec![0usize; n];
        for e in &self.edges {
            indeg[e.to] += 1;
        }
        let out = self.out_edges();
        // Smallest index first, so the order is reproducible.
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&o| indeg[o] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(o) = ready.pop_first() {
            order.push(o);
            for &ei in &out[o] {
                let t = self.edges[ei].to;
                indeg[t] -= 1;
                if indeg[t] == 0 {
                    ready.insert(t);
                }
            }
        }
        (order.len() == n).then_some(order)
    }

    /// Checks the invariants the algorithms rely on, and the bounds ([`MAX_QUANTITY`],
    /// [`MIN_BUDGET_US_PER_S`]) that keep their arithmetic finite.
    pub fn validate(&self) -> Result<(), ProblemError> {
        if !(self.capacity_us_per_s.is_finite() && self.capacity_us_per_s > 0.0) {
            return Err(ProblemError::Invalid(format!(
                "capacity_us_per_s must be positive, got {}",
                self.capacity_us_per_s
            )));
        }
        quantity("capacity_us_per_s".into(), self.capacity_us_per_s)?;
        if !(self.headroom > 0.0 && self.headroom <= 1.0) {
            return Err(ProblemError::Invalid(format!(
                "headroom must be in (0, 1], got {}",
                self.headroom
            )));
        }
        self.validate_budget()?;
        quantity("alpha_us".into(), self.costs.alpha_us)?;
        quantity("beta_us".into(), self.costs.beta_us)?;
        quantity("gamma_us".into(), self.costs.gamma_us)?;
        if self.max_workers == 0 || self.slots_per_worker == 0 {
            return Err(ProblemError::Invalid(
                "max_workers and slots_per_worker must be at least 1".into(),
            ));
        }
        if self.operators.is_empty() {
            return Err(ProblemError::Invalid("the problem has no operators".into()));
        }
        for o in &self.operators {
            quantity(format!("{}.demand_us_per_s", o.name), o.demand_us_per_s)?;
            quantity(format!("{}.rate_per_s", o.name), o.rate_per_s)?;
            quantity(format!("{}.exec_us", o.name), o.exec_us)?;
        }
        for e in &self.edges {
            let n = self.operators.len();
            if e.from >= n || e.to >= n {
                return Err(ProblemError::Invalid(format!(
                    "edge {} -> {} names no operator",
                    e.from, e.to
                )));
            }
            quantity(
                format!(
                    "edge {}->{} rate_per_s",
                    self.operators[e.from].name, self.operators[e.to].name
                ),
                e.rate_per_s,
            )?;
        }
        if self.topological_order().is_none() {
            return Err(ProblemError::Cycle);
        }
        Ok(())
    }

    /// B ≥ [`MIN_BUDGET_US_PER_S`]: a smaller budget makes ⌈ΣD̃/B⌉ and 1/s unbounded.
    fn validate_budget(&self) -> Result<(), ProblemError> {
        let b = self.budget_us_per_s();
        if b >= MIN_BUDGET_US_PER_S {
            return Ok(());
        }
        Err(ProblemError::Invalid(format!(
            "the budget headroom × capacity_us_per_s must be at least {MIN_BUDGET_US_PER_S} us/s, \
             got {} × {:e} = {b:e}",
            self.headroom, self.capacity_us_per_s
        )))
    }
}

/// A problem's µs, µs/s or per-second number `what`: finite, non-negative and at most
/// [`MAX_QUANTITY`]; the error names it and the bound it broke.
fn quantity(what: String, v: f64) -> Result<(), ProblemError> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(ProblemError::Negative(what, v));
    }
    if v > MAX_QUANTITY {
        return Err(ProblemError::Invalid(format!(
            "{what} must be at most {MAX_QUANTITY:e}, got {v:e}"
        )));
    }
    Ok(())
}

/// Why a problem was rejected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProblemError {
    #[error("{0} must be a finite non-negative number, got {1}")]
    Negative(String, f64),
    #[error("the operator graph has a cycle; an application must be a DAG")]
    Cycle,
    #[error("edge {from} -> {to}: unknown operator {unknown:?}")]
    UnknownOperator {
        from: String,
        to: String,
        unknown: String,
    },
    #[error("operator {0:?} is defined twice")]
    DuplicateOperator(String),
    #[error("{0}")]
    Invalid(String),
    #[error("malformed problem JSON: {0}")]
    Json(String),
}

/// A placement's per-operator shares: `shares[o][w] = σ_o(w)`, the fraction of o's demand on w.
pub type Shares = Vec<Vec<f64>>;

/// Number of distinct remote workers each worker's chained requests reach (δ_w(Φ)).
pub fn distinct_destinations(problem: &Problem, shares: &Shares, workers: usize) -> Vec<usize> {
    let mut reach = vec![vec![false; workers]; workers];
    // An edge that carries nothing opens no connection.
    for e in problem.edges.iter().filter(|e| e.rate_per_s > 0.0) {
        let to_hosts: Vec<usize> = (0..workers)
            .filter(|&v| share(shares, e.to, v) > SHARE_EPSILON)
            .collect();
        for (w, row) in reach.iter_mut().enumerate() {
            if share(shares, e.from, w) <= SHARE_EPSILON {
                continue;
            }
            for &v in to_hosts.iter().filter(|&&v| v != w) {
                row[v] = true;
            }
        }
    }
    reach
        .iter()
        .map(|r| r.iter().filter(|&&b| b).count())
        .collect()
}

fn share(shares: &Shares, o: usize, w: usize) -> f64 {
    shares[o].get(w).copied().unwrap_or(0.0)
}

/// L_w(Φ) for every worker, recomputed from scratch:
/// `Σ_o σ_o(w)·D̃_o + γ·δ_w + Σ_e Ẽ_e·{σ_from(w)·[α·σ_to(w) + (1−r)·β·(1−σ_to(w))]
///  + σ_to(w)·(1−σ_from(w))·r·β}`, r the receiver's share of β (0 in the paper).
pub fn worker_loads(problem: &Problem, shares: &Shares, workers: usize) -> Vec<f64> {
    let c = problem.costs;
    let delta = distinct_destinations(problem, shares, workers);
    (0..workers)
        .map(|w| {
            let exec: f64 = problem
                .operators
                .iter()
                .enumerate()
                .map(|(o, op)| share(shares, o, w) * op.demand_us_per_s)
                .sum();
            let r = problem.receiver_share();
            let dispatch: f64 = problem
                .edges
                .iter()
                .map(|e| {
                    let (from, to) = (share(shares, e.from, w), share(shares, e.to, w));
                    e.rate_per_s
                        * (from * (c.alpha_us * to + (1.0 - r) * c.beta_us * (1.0 - to))
                            + to * (1.0 - from) * r * c.beta_us)
                })
                .sum();
            exec + dispatch + c.gamma_us * delta[w] as f64
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The JSON problem file of `clasp place`.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemFile {
    capacity_us_per_s: f64,
    headroom: f64,
    alpha_us: f64,
    beta_us: f64,
    gamma_us: f64,
    /// A JSON number of any form (`10`, `1e3`, `-1`), so a bad value is reported against its
    /// bounds rather than as a type error.
    max_workers: serde_json::Number,
    slots_per_worker: serde_json::Number,
    operators: Vec<OperatorFile>,
    edges: Vec<EdgeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OperatorFile {
    name: String,
    demand_us_per_s: f64,
    rate_per_s: f64,
    exec_us: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EdgeFile {
    from: String,
    to: String,
    rate_per_s: f64,
}

/// Parses and validates a `clasp place` problem file.
pub fn parse_problem(json: &str) -> Result<Problem, ProblemError> {
    let f: ProblemFile =
        serde_json::from_str(json).map_err(|e| ProblemError::Json(e.to_string()))?;
    let max_workers = bounded_count("max_workers", &f.max_workers, MAX_WORKERS)?;
    let slots_per_worker = bounded_count(
        "slots_per_worker",
        &f.slots_per_worker,
        MAX_SLOTS_PER_WORKER,
    )?;
    if f.operators.len() > MAX_OPERATORS {
        return Err(ProblemError::Invalid(format!(
            "operators: at most {MAX_OPERATORS}, got {}",
            f.operators.len()
        )));
    }
    if f.edges.len() > MAX_EDGES {
        return Err(ProblemError::Invalid(format!(
            "edges: at most {MAX_EDGES}, got {}",
            f.edges.len()
        )));
    }
    let mut index = std::collections::HashMap::new();
    for (i, o) in f.operators.iter().enumerate() {
        if index.insert(o.name.clone(), i).is_some() {
            return Err(ProblemError::DuplicateOperator(o.name.clone()));
        }
    }
    let mut edges = Vec::with_capacity(f.edges.len());
    for e in &f.edges {
        let lookup = |n: &String| {
            index
                .get(n)
                .copied()
                .ok_or_else(|| ProblemError::UnknownOperator {
                    from: e.from.clone(),
                    to: e.to.clone(),
                    unknown: n.clone(),
                })
        };
        edges.push(EdgeLoad {
            from: lookup(&e.from)?,
            to: lookup(&e.to)?,
            rate_per_s: e.rate_per_s,
        });
    }
    let p = Problem {
        capacity_us_per_s: f.capacity_us_per_s,
        headroom: f.headroom,
        costs: CostModel {
            alpha_us: f.alpha_us,
            beta_us: f.beta_us,
            gamma_us: f.gamma_us,
        },
        max_workers,
        slots_per_worker,
        operators: f
            .operators
            .into_iter()
            .map(|o| OperatorLoad {
                name: o.name,
                demand_us_per_s: o.demand_us_per_s,
                rate_per_s: o.rate_per_s,
                exec_us: o.exec_us,
            })
            .collect(),
        edges,
        packing: crate::placement::Packing::default(),
        beta_receiver_share: 0.0,
        worker_headroom: Vec::new(),
    };
    p.validate()?;
    Ok(p)
}

/// A whole number in `1..=max` from a problem file's `field`, or an error naming the field and
/// the bound.
fn bounded_count(field: &str, n: &serde_json::Number, max: usize) -> Result<usize, ProblemError> {
    let out_of_range = || {
        ProblemError::Invalid(format!(
            "{field} must be a whole number in 1..={max}, got {n}"
        ))
    };
    // `1e3` is a float to JSON: accept it when it is whole and in range.
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (1.0..=max as f64).contains(f))
            .map(|f| f as u64)
    });
    whole
        .and_then(|v| usize::try_from(v).ok())
        .filter(|v| (1..=max).contains(v))
        .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(max_workers: &str, slots: &str, operators: usize, edges: usize) -> String {
        let ops: Vec<String> = (0..operators)
            .map(|i| {
                format!(
                    r#"{{"name": "o{i}", "demand_us_per_s": 1, "rate_per_s": 1, "exec_us": 1}}"#
                )
            })
            .collect();
        let edges = vec![r#"{"from": "o0", "to": "o1", "rate_per_s": 1}"#; edges];
        format!(
            r#"{{"capacity_us_per_s": 1e6, "headroom": 0.9, "alpha_us": 1, "beta_us": 1,
            "gamma_us": 1, "max_workers": {max_workers}, "slots_per_worker": {slots},
            "operators": [{}], "edges": [{}]}}"#,
            ops.join(","),
            edges.join(",")
        )
    }

    /// o0 on worker 0 sends 1 000 requests/s to o1 on worker 1, β = 1 µs: the receiver's share
    /// r of β moves that much of the dispatch cost from sender to receiver, none is lost.
    #[test]
    fn the_receivers_share_of_beta_moves_load_to_the_receiver() {
        let mut p = parse_problem(&problem("2", "1", 2, 1)).expect("a valid problem");
        p.edges[0].rate_per_s = 1_000.0;
        let shares: Shares = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let sender_only = worker_loads(&p, &shares, 2);
        p.beta_receiver_share = 0.5;
        let halves = worker_loads(&p, &shares, 2);
        // Demand 1 each, γ 1 for worker 0's one destination.
        assert_eq!(sender_only, vec![1.0 + 1_000.0 + 1.0, 1.0]);
        assert_eq!(halves, vec![1.0 + 500.0 + 1.0, 1.0 + 500.0]);
        p.beta_receiver_share = f64::NAN;
        assert_eq!(
            worker_loads(&p, &shares, 2),
            sender_only,
            "unusable share: sender only"
        );
    }

    fn invalid(text: &str) -> String {
        match parse_problem(text) {
            Err(ProblemError::Invalid(m)) => m,
            other => panic!("expected a bounds error, got {other:?}"),
        }
    }

    #[test]
    fn problem_file_counts_are_bounded_and_named() {
        for (workers, slots, field) in [
            ("9e18", "10", "max_workers"),
            ("100000000", "10", "max_workers"),
            ("18446744073709551616", "10", "max_workers"),
            ("0", "10", "max_workers"),
            ("-1", "10", "max_workers"),
            ("2.5", "10", "max_workers"),
            ("10", "1e9", "slots_per_worker"),
        ] {
            let m = invalid(&problem(workers, slots, 2, 1));
            assert!(m.starts_with(field), "{m}");
            assert!(m.contains("1..="), "{m}");
        }
        let m = invalid(&problem("10", "10", MAX_OPERATORS + 1, 1));
        assert!(
            m.contains("operators") && m.contains(&MAX_OPERATORS.to_string()),
            "{m}"
        );
        let m = invalid(&problem("10", "10", 2, MAX_EDGES + 1));
        assert!(
            m.contains("edges") && m.contains(&MAX_EDGES.to_string()),
            "{m}"
        );
    }

    /// Every µs, µs/s and per-second number of a file: above [`MAX_QUANTITY`] it is refused
    /// naming the field and the bound (1e300 demand used to parse, and its lower bound saturated
    /// at u64::MAX); at the bound it parses.
    #[test]
    fn problem_file_quantities_are_bounded_and_named() {
        let base = problem("4", "10", 2, 1);
        for (needle, field) in [
            (r#""capacity_us_per_s": 1e6"#, "capacity_us_per_s"),
            (r#""alpha_us": 1,"#, "alpha_us"),
            (r#""beta_us": 1,"#, "beta_us"),
            (r#""gamma_us": 1,"#, "gamma_us"),
            (r#""demand_us_per_s": 1,"#, "o0.demand_us_per_s"),
            (r#""rate_per_s": 1, "exec_us""#, "o0.rate_per_s"),
            (r#""exec_us": 1}"#, "o0.exec_us"),
            (r#""rate_per_s": 1}"#, "edge o0->o1 rate_per_s"),
        ] {
            assert!(base.contains(needle), "{needle}");
            let with = |v: &str| {
                let (key, rest) = needle.split_once(": ").expect("key: value");
                let tail = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
                base.replacen(needle, &format!("{key}: {v}{tail}"), 1)
            };
            for too_large in ["1.5e15", "1e300"] {
                let m = invalid(&with(too_large));
                assert!(m.starts_with(field) && m.contains("1e15"), "{m}");
            }
            assert!(parse_problem(&with("1e15")).is_ok(), "{field} at the bound");
        }
    }

    /// A budget h·W̄ below 1 µs/s is refused naming both fields; at 1 µs/s the largest demand a
    /// file can hold (1000 operators of 10^15) gives a lower bound of exactly 10^18 workers.
    #[test]
    fn the_budget_is_bounded_below_and_the_lower_bound_never_saturates() {
        let tiny = problem("4", "10", 2, 1).replace("1e6", "1e-300");
        let m = invalid(&tiny);
        assert!(
            m.contains("headroom") && m.contains("capacity_us_per_s") && m.contains("at least 1"),
            "{m}"
        );
        let largest = problem("4", "10", MAX_OPERATORS, 1)
            .replace("1e6", "1")
            .replace(r#""headroom": 0.9"#, r#""headroom": 1"#)
            .replace(r#""demand_us_per_s": 1,"#, r#""demand_us_per_s": 1e15,"#);
        let p = parse_problem(&largest).expect("at every bound");
        assert_eq!(p.lower_bound_workers(), 1_000_000_000_000_000_000);
    }

    #[test]
    fn problem_file_counts_at_the_bounds_parse() {
        let p = parse_problem(&problem("1e3", "1024", 2, 1)).expect("valid");
        assert_eq!((p.max_workers, p.slots_per_worker), (MAX_WORKERS, 1024));
    }
}
