//! Which sampled execution times to believe. An executor times one request in
//! [`EXEC_TIMING_SAMPLE`](super::EXEC_TIMING_SAMPLE) on the wall clock and scales it up; a
//! thread descheduled in the middle of a timed request (preempted by another thread on a busy
//! or virtual machine, or held by its CPU quota) turns that one sample into tens or hundreds of
//! µs, sixteen-fold once scaled. On a 2-vCPU machine with capped workers such samples made a
//! WC `count` look 0.44–0.52 µs a request; with this filter the same job measures 0.23 µs (and
//! 0.11 µs alone in one process, `clasp local`): the capacity model had charged the operators
//! for their neighbours' CPU.
//!
//! A run of requests handed to an operator in one call (a leaf's queued requests,
//! `local_queue.rs`) is timed whole, when it holds one request in four times
//! [`EXEC_TIMING_SAMPLE`](super::EXEC_TIMING_SAMPLE), and judged as a run
//! ([`SampleFilter::keep_run`]): a preemption adds its length to the run, not to each request.
//!
//! So a sample far above what the operator usually takes is left out (and counted): above
//! [`OUTLIER_RATIO`] times its running mean, and above [`OUTLIER_FLOOR_NS`] whatever the mean
//! (a fast operator's occasional slow request — a map growing — is kept). The running mean
//! follows every sample, a dropped one at the bound, so an operator that really becomes slower
//! raises its bound within a few samples instead of being dropped for good. Nothing above
//! [`OUTLIER_MAX_NS`] is kept: stream operators do not run that long on one request.

/// A sample this many times the operator's running mean is taken for a preemption.
pub const OUTLIER_RATIO: u64 = 32;
/// Samples up to this are kept whatever the mean.
pub const OUTLIER_FLOOR_NS: u64 = 20_000;
/// Samples above this are never kept.
pub const OUTLIER_MAX_NS: u64 = 1_000_000;
/// The running mean's weight of a new sample: 1/2^this.
const MEAN_SHIFT: u32 = 5;

/// Per operator: the running mean of its sampled execution times.
#[derive(Debug, Default)]
pub(super) struct SampleFilter {
    /// ns × 2^[`MEAN_SHIFT`], per operator; 0 until its first sample.
    mean_scaled: Vec<u64>,
}

impl SampleFilter {
    pub(super) fn new(operators: usize) -> Self {
        SampleFilter {
            mean_scaled: vec![0; operators],
        }
    }

    /// Whether `op`'s sample of `ns` is an execution time (else a preemption, left out).
    #[inline]
    pub(super) fn keep(&mut self, op: usize, ns: u64) -> bool {
        self.keep_run(op, ns, 1)
    }

    /// Whether `op`'s sample of `run_ns` for a run of `requests` requests timed together is
    /// execution time. The bound is the run's: [`OUTLIER_RATIO`] times the mean for each of
    /// its requests, but at least [`OUTLIER_FLOOR_NS`] for the whole run — a preemption adds
    /// its length to the run, not to each request, so the floor compared with the run's
    /// average would let one through eight times as long for a run of eight. The running mean
    /// is of one request's time.
    #[inline]
    pub(super) fn keep_run(&mut self, op: usize, run_ns: u64, requests: u32) -> bool {
        let requests = u64::from(requests.max(1));
        let max_ns = OUTLIER_MAX_NS.saturating_mul(requests);
        let Some(m) = self.mean_scaled.get_mut(op) else {
            return run_ns <= max_ns;
        };
        let mean_ns = *m >> MEAN_SHIFT;
        let bound_ns = if *m == 0 {
            max_ns
        } else {
            let run_mean_ns = mean_ns.saturating_mul(requests);
            (run_mean_ns.saturating_mul(OUTLIER_RATIO)).clamp(OUTLIER_FLOOR_NS, max_ns)
        };
        let counted = run_ns.min(bound_ns) / requests;
        *m = if *m == 0 {
            counted << MEAN_SHIFT
        } else {
            *m - mean_ns + counted
        };
        run_ns <= bound_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preempted_sample_is_left_out_and_a_real_one_kept() {
        let mut f = SampleFilter::new(2);
        for _ in 0..100 {
            assert!(f.keep(0, 300));
        }
        assert!(!f.keep(0, 150_000), "a preemption of 150 µs");
        assert!(f.keep(0, 9_000), "under the floor");
        assert!(!f.keep(0, 2_000_000), "never");
        // The other operator has a mean of its own: its first sample sets it.
        assert!(f.keep(1, 400_000));
        assert!(f.keep(1, 900_000));
        assert!(
            !f.keep(5, 1_000_001),
            "an unknown operator still has the maximum"
        );
    }

    #[test]
    fn a_preemption_inside_a_timed_run_is_left_out_whatever_the_runs_length() {
        let mut f = SampleFilter::new(1);
        for _ in 0..100 {
            assert!(f.keep_run(0, 8 * 300, 8), "eight requests of 300 ns");
        }
        // 100 µs of preemption among eight requests: 12.8 µs each on average, under the
        // floor for one request, but the run as a whole is far over it.
        assert!(!f.keep_run(0, 8 * 300 + 100_000, 8));
        // A run slower than usual but not by a preemption's length is kept.
        assert!(f.keep_run(0, 8 * 900, 8));
        // The mean is one request's: a single request of the usual time is kept.
        assert!(f.keep(0, 310));
    }

    #[test]
    fn an_operator_that_becomes_slower_is_followed() {
        let mut f = SampleFilter::new(1);
        for _ in 0..100 {
            f.keep(0, 200);
        }
        // Now it takes 100 µs a request: dropped at first, kept within a few dozen samples.
        let dropped = (0..200).take_while(|_| !f.keep(0, 100_000)).count();
        assert!((1..64).contains(&dropped), "{dropped}");
        assert!((0..20).all(|_| f.keep(0, 100_000)));
    }
}
