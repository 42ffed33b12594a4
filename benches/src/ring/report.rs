//! The report of `clasp bench ring`: the median and spread of every (implementation, size)
//! cell, and shmring against every other implementation within each repetition.
//!
//! Why the second part: on a shared host the speed of cross-core transfers moves between
//! regimes within minutes (the cache-line floor of one guest read 27–60 ns in most runs and
//! 260–290 ns in others), so medians taken minutes apart can disagree with what a side-by-side
//! comparison would say. The cells of one repetition run one after the other, seconds apart;
//! the ratio of shmring to another implementation within a repetition, and the number of
//! repetitions in which shmring was as fast or faster, are what a comparison should rest on.

use super::Cell;
use crate::dispatch_local::Spread3;
use serde::Serialize;

/// The implementation the others are compared with.
const UNDER_TEST: &str = "shmring";

/// One (implementation, size) cell of the report.
#[derive(Debug, Clone, Serialize)]
pub struct RingResult {
    #[serde(rename = "impl")]
    pub implementation: String,
    pub bytes: usize,
    /// Median one-way latency.
    pub one_way_ns: f64,
    /// Lowest and highest one-way latency over the repetitions.
    pub one_way_ns_min: f64,
    pub one_way_ns_max: f64,
    /// Median throughput (`None` for `floor`).
    pub throughput_msgs_per_s: Option<f64>,
    pub throughput_msgs_per_s_min: Option<f64>,
    pub throughput_msgs_per_s_max: Option<f64>,
    /// shmring against this implementation at this size, repetition by repetition (absent for
    /// shmring itself, or when shmring was not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shmring_against: Option<AgainstShmring>,
}

/// shmring against one other implementation, at one size, within each repetition.
#[derive(Debug, Clone, Serialize)]
pub struct AgainstShmring {
    /// shmring's one-way latency ÷ this implementation's (below 1: shmring is faster).
    pub one_way_ratio: Spread3,
    /// Repetitions in which shmring's one-way latency was at most this implementation's.
    pub one_way_at_most: u32,
    /// shmring's throughput ÷ this implementation's (above 1: shmring is faster; `None` for
    /// `floor`).
    pub throughput_ratio: Option<Spread3>,
    /// Repetitions in which shmring's throughput was at least this implementation's.
    pub throughput_at_least: Option<u32>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct RingReport {
    pub machine: String,
    /// CPUs the two threads ran on (verified with sched_getcpu), or "unpinned".
    pub cpus: String,
    pub repetitions: u32,
    pub round_trips: u64,
    pub messages: u64,
    pub results: Vec<RingResult>,
}

/// The cells of `samples` (indexed `size * impls.len() + impl`, one entry per repetition in
/// the order they ran) as report rows.
pub(super) fn summarize(impls: &[&str], sizes: &[usize], samples: &[Vec<Cell>]) -> Vec<RingResult> {
    assert_eq!(samples.len(), impls.len() * sizes.len());
    let under_test = impls.iter().position(|i| *i == UNDER_TEST);
    let mut results = Vec::with_capacity(samples.len());
    for (si, &bytes) in sizes.iter().enumerate() {
        for (ii, implementation) in impls.iter().enumerate() {
            let cell = &samples[si * impls.len() + ii];
            let lat = Spread3::of(cell.iter().map(|c| c.0).collect());
            let thr: Vec<f64> = cell.iter().filter_map(|c| c.1).collect();
            let thr = (!thr.is_empty()).then(|| Spread3::of(thr));
            let shmring_against = under_test
                .filter(|&u| u != ii)
                .map(|u| against(&samples[si * impls.len() + u], cell));
            results.push(RingResult {
                implementation: implementation.to_string(),
                bytes,
                one_way_ns: lat.median,
                one_way_ns_min: lat.min,
                one_way_ns_max: lat.max,
                throughput_msgs_per_s: thr.map(|t| t.median),
                throughput_msgs_per_s_min: thr.map(|t| t.min),
                throughput_msgs_per_s_max: thr.map(|t| t.max),
                shmring_against,
            });
        }
    }
    results
}

/// shmring's cells against another's, repetition by repetition.
fn against(shmring: &[Cell], other: &[Cell]) -> AgainstShmring {
    assert_eq!(shmring.len(), other.len(), "one sample per repetition");
    let pairs = || shmring.iter().zip(other);
    let one_way_ratio = Spread3::of(pairs().map(|(s, o)| s.0 / o.0).collect());
    let one_way_at_most = pairs().filter(|(s, o)| s.0 <= o.0).count() as u32;
    let thr: Vec<(f64, f64)> = pairs().filter_map(|(s, o)| Some((s.1?, o.1?))).collect();
    let has_thr = !thr.is_empty();
    AgainstShmring {
        one_way_ratio,
        one_way_at_most,
        throughput_ratio: has_thr.then(|| Spread3::of(thr.iter().map(|(s, o)| s / o).collect())),
        throughput_at_least: has_thr.then(|| thr.iter().filter(|(s, o)| s >= o).count() as u32),
    }
}

/// The report as aligned text tables: the cells, then shmring against the others.
pub fn table(report: &RingReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "machine: {}", report.machine);
    let _ = writeln!(
        out,
        "threads on CPUs {}; median of {} interleaved repetitions [min..max]",
        report.cpus, report.repetitions
    );
    let _ = writeln!(
        out,
        "{:<23} {:>6} {:>26} {:>36}",
        "impl", "bytes", "one-way ns", "throughput msgs/s"
    );
    for r in &report.results {
        let thr = match (
            r.throughput_msgs_per_s,
            r.throughput_msgs_per_s_min,
            r.throughput_msgs_per_s_max,
        ) {
            (Some(m), Some(lo), Some(hi)) => {
                format!("{:>10.2}M [{:.2}M..{:.2}M]", m / 1e6, lo / 1e6, hi / 1e6)
            }
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<23} {:>6} {:>9.1} [{:>6.1}..{:>6.1}] {:>36}",
            r.implementation, r.bytes, r.one_way_ns, r.one_way_ns_min, r.one_way_ns_max, thr
        );
    }
    against_table(report, &mut out);
    out
}

/// The second table: shmring ÷ each other implementation within a repetition.
fn against_table(report: &RingReport, out: &mut String) {
    use std::fmt::Write;
    if report.results.iter().all(|r| r.shmring_against.is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nshmring ÷ each, per repetition: median [min..max], repetitions where shmring was as \
         fast or faster"
    );
    let _ = writeln!(
        out,
        "{:<23} {:>6} {:>30} {:>30}",
        "against", "bytes", "one-way (lower is faster)", "throughput (higher is faster)"
    );
    let n = report.repetitions;
    let spread = |s: &Spread3, wins: u32| {
        format!("{:.2} [{:.2}..{:.2}] {wins:>2}/{n}", s.median, s.min, s.max)
    };
    for r in &report.results {
        let Some(a) = &r.shmring_against else {
            continue;
        };
        let thr = match (&a.throughput_ratio, a.throughput_at_least) {
            (Some(t), Some(w)) => spread(t, w),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<23} {:>6} {:>30} {:>30}",
            r.implementation,
            r.bytes,
            spread(&a.one_way_ratio, a.one_way_at_most),
            thr
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shmring_is_compared_repetition_by_repetition() {
        // Two repetitions: in the first the host was slow for everyone, in the second fast.
        let impls = ["floor", "shmring", "rtrb"];
        let samples = vec![
            vec![(100.0, None), (40.0, None)],
            vec![(120.0, Some(10e6)), (60.0, Some(90e6))],
            vec![(150.0, Some(20e6)), (50.0, Some(60e6))],
        ];
        let rows = summarize(&impls, &[64], &samples);
        assert!(rows[1].shmring_against.is_none(), "not against itself");
        let rtrb = rows[2].shmring_against.as_ref().unwrap();
        assert_eq!(rtrb.one_way_ratio.min, 0.8);
        assert_eq!(rtrb.one_way_ratio.max, 1.2);
        assert_eq!(rtrb.one_way_at_most, 1);
        let thr = rtrb.throughput_ratio.unwrap();
        assert_eq!((thr.min, thr.max), (0.5, 1.5));
        assert_eq!(rtrb.throughput_at_least, Some(1));
        let floor = rows[0].shmring_against.as_ref().unwrap();
        assert!((floor.one_way_ratio.median - 1.35).abs() < 1e-9);
        assert_eq!(floor.one_way_at_most, 0);
        assert!(floor.throughput_ratio.is_none());
        let text = table(&RingReport {
            machine: "test".into(),
            cpus: "0,1".into(),
            repetitions: 2,
            round_trips: 1,
            messages: 4,
            results: rows,
        });
        assert!(text.contains("0.80..1.20]  1/2"), "{text}");
    }

    #[test]
    fn without_shmring_there_is_no_comparison() {
        let rows = summarize(
            &["floor", "rtrb"],
            &[16],
            &[vec![(1.0, None)], vec![(2.0, Some(3.0))]],
        );
        assert!(rows.iter().all(|r| r.shmring_against.is_none()));
    }
}
