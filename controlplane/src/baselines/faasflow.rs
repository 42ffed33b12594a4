//! FaaSFlow (Li et al., 2022) as its authors describe it: the worker count by linear
//! extrapolation of the throughput per worker observed while saturated, capacity counted in
//! executor slots only, operators grouped along the heaviest edges while a group's slot demand
//! fits one worker, idle workers joining the largest group.
//!
//! The linear extrapolation is what gives FaaSFlow its bias (paper §5.6): per-worker throughput
//! falls as workers are added (more remote requests, more destinations), so extrapolating from
//! few workers under-provisions on the way up and from many over-provisions on the way down.

use super::{Decision, Observed, Policy, PolicyKind, fill_scale, sp_placement};
use crate::model::{Problem, Shares};
use crate::placement::Placement;

/// Rounds of overflow (every worker overcommitted by a whole worker's slots) beyond which the
/// rest of a group is spread over the workers in one step rather than a worker's slots at a
/// time. A demand far beyond the cluster is a worker's slots per B of it: slot at a time, that
/// is one step and one piece of the group per B (billions for a large demand), and a rest far
/// enough above 2^53 slots no longer even shrinks when a worker's slots are taken from it.
/// Within this many rounds the overflow goes a worker's slots at a time, as it always did.
const BULK_OVERFLOW_ROUNDS: f64 = 64.0;

/// FaaSFlow, or FaaSFlow-SP when `shared_placement` (its count, CLASP's placement).
#[derive(Clone, Debug)]
pub struct FaasFlow {
    pub shared_placement: bool,
}

/// A group of operators and the (worker, slots) it was given.
#[derive(Clone, Debug)]
struct Group {
    ops: Vec<usize>,
    slots: f64,
    workers: Vec<(usize, f64)>,
}

/// Slot demand of each operator: D̃_o over one slot's share of the budget.
fn slot_demands(problem: &Problem) -> Vec<f64> {
    let slot_us_per_s = problem.budget_us_per_s() / problem.slots_per_worker as f64;
    problem
        .operators
        .iter()
        .map(|o| o.demand_us_per_s / slot_us_per_s)
        .collect()
}

/// Operators merged along the heaviest edges while the merged slot demand fits one worker.
fn groups(problem: &Problem) -> Vec<Group> {
    let slots = slot_demands(problem);
    let spw = problem.slots_per_worker as f64;
    let n = slots.len();
    let mut group_of: Vec<usize> = (0..n).collect();
    let mut members: Vec<Vec<usize>> = (0..n).map(|o| vec![o]).collect();
    let mut gslots = slots.clone();
    let mut edges: Vec<usize> = (0..problem.edges.len()).collect();
    edges.sort_by(|&a, &b| {
        problem.edges[b]
            .rate_per_s
            .total_cmp(&problem.edges[a].rate_per_s)
            .then(a.cmp(&b))
    });
    for e in edges {
        let (ga, gb) = (
            group_of[problem.edges[e].from],
            group_of[problem.edges[e].to],
        );
        if ga == gb || gslots[ga] + gslots[gb] > spw {
            continue;
        }
        let (keep, gone) = (ga.min(gb), ga.max(gb));
        let moved = std::mem::take(&mut members[gone]);
        for &o in &moved {
            group_of[o] = keep;
        }
        members[keep].extend(moved);
        gslots[keep] += gslots[gone];
        gslots[gone] = 0.0;
    }
    members
        .into_iter()
        .enumerate()
        .filter(|(_, m)| !m.is_empty())
        .map(|(g, mut ops)| {
            ops.sort_unstable();
            Group {
                ops,
                slots: gslots[g],
                workers: Vec::new(),
            }
        })
        .collect()
}

/// First-fit-decreasing of the groups' slots onto workers; a group larger than a worker spans
/// several. With `limit`, overflow goes to the least-filled worker (more than
/// [`BULK_OVERFLOW_ROUNDS`] rounds of it spread evenly in one step); idle workers then join the
/// group with the most slots per worker. Returns the groups and the workers used. Without
/// `limit` (counting) it stops as soon as more than `max_workers` are needed, the groups left
/// partial: the count is clamped to `max_workers` anyway, and a demand far beyond it would open
/// a worker per B of it, each scanned by every later piece.
fn assign(problem: &Problem, limit: Option<usize>) -> (Vec<Group>, usize) {
    let spw = problem.slots_per_worker as f64;
    let mut gs = groups(problem);
    let mut idx: Vec<usize> = (0..gs.len()).collect();
    idx.sort_by(|&a, &b| gs[b].slots.total_cmp(&gs[a].slots).then(a.cmp(&b)));
    let mut used: Vec<f64> = Vec::new();
    for g in idx {
        let mut left = gs[g].slots.max(1e-9);
        while left > 1e-9 {
            let full = limit.is_some_and(|l| l > 0 && used.len() >= l);
            if full && left > BULK_OVERFLOW_ROUNDS * used.len() as f64 * spw {
                spread_overflow(&mut used, &mut gs[g].workers, left);
                break;
            }
            let fit = used.iter().position(|&u| u + left.min(spw) <= spw + 1e-9);
            let w = match (fit, limit) {
                (Some(w), _) => w,
                (None, Some(l)) if used.len() >= l => (0..used.len())
                    .min_by(|&a, &b| used[a].total_cmp(&used[b]).then(a.cmp(&b)))
                    .unwrap_or(0),
                (None, None) if used.len() > problem.max_workers => return (gs, used.len()),
                _ => {
                    used.push(0.0);
                    used.len() - 1
                }
            };
            let room = (spw - used[w]).max(0.0);
            // Overflow (no room left within the limit) overcommits the least-filled worker.
            let take = if room > 1e-9 {
                left.min(room)
            } else {
                left.min(spw)
            };
            used[w] += take;
            gs[g].workers.push((w, take));
            left -= take;
        }
    }
    if let Some(l) = limit {
        while used.len() < l {
            let w = used.len();
            let g = (0..gs.len())
                .max_by(|&a, &b| {
                    let pa = gs[a].slots / gs[a].workers.len() as f64;
                    let pb = gs[b].slots / gs[b].workers.len() as f64;
                    pa.total_cmp(&pb).then(b.cmp(&a))
                })
                .unwrap_or(0);
            let share = gs[g].slots / (gs[g].workers.len() + 1) as f64;
            for (_, s) in &mut gs[g].workers {
                *s = share;
            }
            gs[g].workers.push((w, share));
            used.push(share);
        }
    }
    let n = used.len().max(1);
    (gs, n)
}

/// Spreads a group's rest `left` evenly over every worker, one piece each: what
/// [`BULK_OVERFLOW_ROUNDS`] or more rounds of overflow a worker's slots at a time come to, to
/// within a worker's slots each (a 64th of what each gets).
fn spread_overflow(used: &mut [f64], pieces: &mut Vec<(usize, f64)>, left: f64) {
    let each = left / used.len() as f64;
    for (w, u) in used.iter_mut().enumerate() {
        *u += each;
        pieces.push((w, each));
    }
}

fn shares_of(problem: &Problem, gs: &[Group], workers: usize) -> Shares {
    let mut shares = vec![vec![0.0; workers]; problem.operators.len()];
    for g in gs {
        let total: f64 = g.workers.iter().map(|&(_, s)| s).sum::<f64>().max(1e-12);
        for &o in &g.ops {
            for &(w, s) in &g.workers {
                shares[o][w] += s / total;
            }
        }
    }
    shares
}

/// FaaSFlow's shares on exactly `workers` workers.
pub fn faasflow_shares(problem: &Problem, workers: usize) -> Shares {
    let (gs, _) = assign(problem, Some(workers));
    shares_of(problem, &gs, workers)
}

/// FaaSFlow's worker count: extrapolated from what was observed, or (with no observation, as
/// in `clasp place`) the slots its grouping fills.
pub fn faasflow_workers(problem: &Problem, observed: Option<&Observed>) -> usize {
    let n = match observed {
        Some(o) if o.saturated_throughput_per_s > 0.0 => {
            let per_worker = o.saturated_throughput_per_s / o.workers.max(1) as f64;
            (o.target_rate_per_s / per_worker).ceil() as usize
        }
        _ => assign(problem, None).1,
    };
    n.clamp(1, problem.max_workers)
}

impl Policy for FaasFlow {
    fn kind(&self) -> PolicyKind {
        if self.shared_placement {
            PolicyKind::FaasFlowSp
        } else {
            PolicyKind::FaasFlow
        }
    }

    fn decide(&mut self, problem: &Problem, observed: Option<&Observed>) -> Decision {
        let n = faasflow_workers(problem, observed);
        let placement = if self.shared_placement {
            sp_placement(problem, n)
        } else {
            Placement {
                shares: faasflow_shares(problem, n),
                workers: n,
                saturated: false,
                fraction_placed: 1.0,
            }
        };
        let basis = match observed {
            Some(o) => format!(
                "extrapolated rate_per_s={:.0} per_worker_per_s={:.0}",
                o.target_rate_per_s,
                o.saturated_throughput_per_s / o.workers.max(1) as f64
            ),
            None => format!("slots={:.2}", slot_demands(problem).iter().sum::<f64>()),
        };
        let reason = format!("policy={} workers={n} basis={basis}", self.kind().name());
        Decision {
            policy: self.kind(),
            placement,
            reason,
        }
    }

    fn placement_on(&self, problem: &Problem, workers: usize) -> Shares {
        if self.shared_placement {
            return super::Clasp::default().placement_on(problem, workers);
        }
        faasflow_shares(&problem.scaled(fill_scale(problem, workers)), workers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CostModel, OperatorLoad};
    use crate::placement::Packing;

    /// One operator of `budgets` workers' worth of demand (B = 10^6 µs/s, 10 slots a worker)
    /// on at most `max_workers` workers.
    fn one_operator(budgets: f64, max_workers: usize) -> Problem {
        Problem {
            capacity_us_per_s: 1e6,
            headroom: 1.0,
            costs: CostModel {
                alpha_us: 1.0,
                beta_us: 10.0,
                gamma_us: 1000.0,
            },
            max_workers,
            slots_per_worker: 10,
            operators: vec![OperatorLoad {
                name: "big".into(),
                demand_us_per_s: budgets * 1e6,
                rate_per_s: budgets * 1e3,
                exec_us: 1000.0,
            }],
            edges: Vec::new(),
            packing: Packing::AnyFit,
            beta_receiver_share: 0.0,
            worker_headroom: Vec::new(),
        }
    }

    /// 20 000 workers' worth on a cluster of 4: counting opens 5 workers and stops, rather than
    /// opening all 20 000 and scanning them for every piece.
    #[test]
    fn counting_stops_once_the_cluster_is_exceeded() {
        let p = one_operator(20_000.0, 4);
        assert_eq!(assign(&p, None).1, 5);
        assert_eq!(faasflow_workers(&p, None), 4);
        // Within the cluster, the count is the slots' own: 25 slots on 10-slot workers.
        assert_eq!(faasflow_workers(&one_operator(2.5, 4), None), 3);
    }

    /// 10^6 workers' worth on 4: after the 4 workers' own slots, the rest is one piece per
    /// worker, not 10^6 pieces of a worker's slots; the shares come out even either way.
    #[test]
    fn overflow_far_beyond_the_cluster_is_spread_in_one_step() {
        let p = one_operator(1e6, 4);
        let (gs, n) = assign(&p, Some(4));
        assert_eq!(n, 4);
        assert_eq!(gs[0].workers.len(), 8, "pieces: {}", gs[0].workers.len());
        let shares = faasflow_shares(&p, 4);
        for s in &shares[0] {
            assert!((s - 0.25).abs() < 1e-9, "{shares:?}");
        }
        // Within the bulk threshold the overflow still goes a worker's slots at a time: 200
        // slots on 4 workers of 10 are 20 pieces.
        let (gs, _) = assign(&one_operator(20.0, 4), Some(4));
        assert_eq!(gs[0].workers.len(), 20);
    }

    /// 10^23 µs/s on 4 workers: a rest of 10^18 slots, whose f64 spacing (128) is more than a
    /// worker's 10 slots, so taking them no longer changes it; the decision must still come back
    /// (it never did).
    #[test]
    fn a_demand_beyond_f64_slot_precision_is_decided() {
        let p = one_operator(1e17, 4);
        let d = FaasFlow {
            shared_placement: false,
        }
        .decide(&p, None);
        assert_eq!(d.placement.workers, 4);
        let sum: f64 = d.placement.shares[0].iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{:?}", d.placement.shares);
    }
}
