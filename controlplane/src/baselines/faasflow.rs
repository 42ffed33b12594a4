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
/// several. With `limit`, overflow goes to the least-filled worker; idle workers then join the
/// group with the most slots per worker. Returns the groups and the workers used.
fn assign(problem: &Problem, limit: Option<usize>) -> (Vec<Group>, usize) {
    let spw = problem.slots_per_worker as f64;
    let mut gs = groups(problem);
    let mut idx: Vec<usize> = (0..gs.len()).collect();
    idx.sort_by(|&a, &b| gs[b].slots.total_cmp(&gs[a].slots).then(a.cmp(&b)));
    let mut used: Vec<f64> = Vec::new();
    for g in idx {
        let mut left = gs[g].slots.max(1e-9);
        while left > 1e-9 {
            let fit = used.iter().position(|&u| u + left.min(spw) <= spw + 1e-9);
            let w = match (fit, limit) {
                (Some(w), _) => w,
                (None, Some(l)) if used.len() >= l => (0..used.len())
                    .min_by(|&a, &b| used[a].total_cmp(&used[b]).then(a.cmp(&b)))
                    .unwrap_or(0),
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
