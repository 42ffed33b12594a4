//! What a worker's executors produced, summed over the executors: the operators' summaries
//! (the digests the oracle compares), malformed counts, keys with state, and the counter
//! totals. Both fronts report the same sums (see [`super::coordinator`]).

use super::executor::ExecutorResult;
use super::layout::{WorkerSegment, scalar};
use clasp_operators::{OperatorInstance, OperatorSummary};
use std::collections::BTreeMap;

/// The executors' results, per operator, summed.
pub(crate) struct Merged {
    /// Per operator.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed counts by reason.
    pub malformed: Vec<Vec<(String, u64)>>,
    /// Per operator: keys holding state.
    pub state_keys: Vec<usize>,
    /// The operator instances, `[executor][operator]`.
    pub instances: Vec<Vec<Box<dyn OperatorInstance>>>,
}

/// Sums the results of the executors of an app of `operators` operators.
pub(crate) fn merge(operators: usize, results: Vec<ExecutorResult>) -> Merged {
    let mut summaries = vec![OperatorSummary::default(); operators];
    let mut malformed: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); operators];
    let mut state_keys = vec![0usize; operators];
    let mut instances = Vec::with_capacity(results.len());
    for r in results {
        for op in 0..operators {
            summaries[op].combine(&r.summaries[op]);
            state_keys[op] += r.state_keys[op];
            for (reason, n) in &r.malformed[op] {
                *malformed[op].entry((*reason).to_owned()).or_default() += n;
            }
        }
        instances.push(r.instances);
    }
    Merged {
        summaries,
        malformed: malformed
            .into_iter()
            .map(|m| m.into_iter().collect())
            .collect(),
        state_keys,
        instances,
    }
}

/// Counters every worker reports in its totals, by name.
pub(crate) const TOTALS: [(&str, usize); 13] = [
    ("parks", scalar::PARKS),
    ("sleeps", scalar::SLEEPS),
    ("wakeups", scalar::WAKEUPS),
    ("frames_in", scalar::FRAMES_IN),
    ("local_sent", scalar::LOCAL_SENT),
    ("overflowed", scalar::OVERFLOWED),
    ("bad_frames", scalar::BAD_FRAMES),
    ("outputs", scalar::OUTPUTS),
    ("busy_ns", scalar::BUSY_NS),
    ("cpu_ns", scalar::CPU_NS),
    ("timing_outliers", scalar::TIMING_OUTLIERS),
    ("idle_spin_ns", scalar::IDLE_SPIN_NS),
    ("sleep_cpu_ns", scalar::SLEEP_CPU_NS),
];

/// The counters `names` summed over the executors of `seg`.
pub(crate) fn counter_totals(
    seg: &WorkerSegment,
    names: &[(&'static str, usize)],
) -> BTreeMap<&'static str, u64> {
    let mut totals = BTreeMap::new();
    for e in 0..seg.executors() {
        let m = seg.metrics(e);
        for &(name, slot) in names {
            *totals.entry(name).or_insert(0) += m.get(slot);
        }
    }
    totals
}
