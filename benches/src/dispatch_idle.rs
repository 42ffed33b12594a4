//! The idle-policy half of `clasp bench dispatch --local`: per policy (`park`, `spin:50`),
//! side by side in every repetition, the local hop at low load — alone (`hop.rs`) and through
//! the worker — and α. Apart from `dispatch_local.rs` because it is one question (what the
//! idle policy changes) asked of the same harness.

use crate::dispatch_local::{Deploy, LocalDispatchReport, Spread3, alpha, run_syn};
use clasp_dataplane::runtime::IdlePolicy;
use clasp_operators::AppSpec;
use serde::Serialize;
use std::sync::Arc;

/// What one idle policy gives, executors pinned to cores of their own.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRow {
    /// The policy, as `--idle` takes it.
    pub policy: String,
    /// The hop alone (`hop.rs`): one-way latency of a chained hop between two pinned threads
    /// waiting as executors wait (ns).
    pub ring_hop_ns: Spread3,
    /// The same for the first hop after an idle gap (the far end wakes from its park), ns.
    pub ring_first_hop_ns: Spread3,
    /// Through the worker: the latency one hop adds at low load (ns).
    pub one_way_ns: Spread3,
    /// Median end-to-end latency of a ten-stage SYN tree at low load (µs).
    pub chain_us: Spread3,
    /// α with this policy: CPU ns per local chained request, one executor, its idle spin
    /// left out.
    pub alpha_ns_per_request: Spread3,
    /// CPU the executors spent spinning idle per tree at low load (ns; 0 for `park`).
    pub idle_spin_ns_per_tree: Spread3,
}

/// The idle policies compared: parking at once, and the default spin.
pub fn idle_policies() -> [IdlePolicy; 2] {
    [
        IdlePolicy::Park,
        IdlePolicy::Spin {
            us: clasp_shmring::DEFAULT_SPIN.as_micros() as u32,
        },
    ]
}

/// Rate of the low-load runs (records per second): trees never overlap.
const LOW_RATE_PER_S: f64 = 2000.0;
/// Records of a low-load run.
const LOW_RECORDS: u64 = 1000;
/// Rounds of a hop-alone run (`hop.rs`).
const HOP_ROUNDS: usize = 1000;

/// One repetition of one idle policy, executors pinned: (chained and first hop alone, ns a
/// hop adds at low load, µs of a ten-stage tree, α, idle-spin ns per tree).
pub(crate) fn idle_sample(
    syn10: &Arc<AppSpec>,
    syn2: &Arc<AppSpec>,
    idle: IdlePolicy,
    records: u64,
) -> Result<[f64; 6], String> {
    let alone = crate::hop::measure(idle.wait_policy(2), HOP_ROUNDS)?;
    let pinned = Deploy {
        pin: true,
        idle,
        ..Deploy::ALTERNATE
    };
    let low = |spec| run_syn(spec, pinned, LOW_RECORDS, 1, Some(LOW_RATE_PER_S));
    let (long, short) = (low(syn10)?, low(syn2)?);
    let hops = (syn10.operators.len() - syn2.operators.len()) as f64;
    let hop_ns = (long.latency.p50 - short.latency.p50) * 1000.0 / hops;
    let spin_ns = long.totals["idle_spin_ns"] as f64 / LOW_RECORDS as f64;
    let one = Deploy {
        pin: true,
        idle,
        ..Deploy::ONE
    };
    let (a, _) = alpha(&run_syn(syn10, one, records, 1, None)?);
    Ok([
        alone.chained_ns,
        alone.first_ns,
        hop_ns,
        long.latency.p50,
        a,
        spin_ns,
    ])
}

/// The idle-policy rows as text.
pub(crate) fn idle_table(r: &LocalDispatchReport) -> String {
    let mut out = String::from(
        "local hop at low load, per idle policy (median [min..max] over the repetitions):\n\
         \x20 the hop alone, two threads pinned to two cores:\n",
    );
    for row in &r.idle {
        out += &format!(
            "    {:<8} chained hop {:>7.0} ns [{:.0}..{:.0}]; first hop after an idle gap \
             {:.0} ns [{:.0}..{:.0}]\n",
            row.policy,
            row.ring_hop_ns.median,
            row.ring_hop_ns.min,
            row.ring_hop_ns.max,
            row.ring_first_hop_ns.median,
            row.ring_first_hop_ns.min,
            row.ring_first_hop_ns.max,
        );
    }
    out += "  through the worker (SYN, two executors, --pin):\n";
    for row in &r.idle {
        let h = &row.one_way_ns;
        // The difference of two trees' medians: on a busy host the noise can outweigh it.
        let hop = if h.median < 0.0 {
            format!("below the noise ([{:.0}..{:.0}] ns)", h.min, h.max)
        } else {
            format!("{:>7.0} ns [{:.0}..{:.0}]", h.median, h.min, h.max)
        };
        out += &format!(
            "    {:<8} one-way hop {hop}; ten-stage tree {:.1} µs; \
             α {:.1} ns [{:.1}..{:.1}]; idle spin {:.1} µs CPU per tree\n",
            row.policy,
            row.chain_us.median,
            row.alpha_ns_per_request.median,
            row.alpha_ns_per_request.min,
            row.alpha_ns_per_request.max,
            row.idle_spin_ns_per_tree.median / 1e3,
        );
    }
    out
}
