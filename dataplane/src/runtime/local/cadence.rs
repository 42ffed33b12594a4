//! How often the coordinator of a worker on its own reads its executors' reports, and why it
//! mostly does not let their reports wake it.
//!
//! A coordinator parked on the report rings is woken by every report frame an executor
//! publishes: a futex call on the executor's side, a context switch on the coordinator's. A
//! busy executor publishes its ledger deltas every 100 µs (`executor/reports.rs`), so a WC
//! worker of two executors woke its coordinator about 5 000 times a second.
//!
//! So while an executor has work, the coordinator sleeps up to [`REPORT_HOLD`] without asking
//! its reports to wake it, and then reads everything that piled up. An executor reports
//! everything before it parks, and a coordinator that finds every executor parked parks on the
//! report rings as before: an idle worker's coordinator sleeps until there is something to
//! read. The hold costs the measured latency nothing: each deltas frame carries when its
//! executor wrote it, and a tree's latency ends there, not when the coordinator read it (as in
//! a cluster, where the network thread holds deltas the same way, `cluster/node/reports.rs`).
//! That also took the coordinator's own wake-up out of the latency: WC at 2 000 records/s on
//! two executors measured a p50 of 37–38 µs, against 48–56 µs when a tree ended at the
//! coordinator's read.
//!
//! What a late coordinator does delay is the ingress waiting on its in-flight bound, which
//! completions release. So a hold lasts only as long as completes a quarter of the bound (at
//! the rate measured over the last window of at least a hold), so that it leaves at least three
//! quarters of the bound queued: a whole [`REPORT_HOLD`] at moderate rates, less at high ones,
//! and none when that would be under [`HOLD_MIN`] or the bound is under
//! [`HOLD_IN_FLIGHT_MIN`] (then every report wakes it, as a latency measurement with one root in
//! flight needs). The first version did not hold at all above the rate a whole hold allowed,
//! so a fast WC worker of two executors (1.4 million sentences a second) woke its coordinator
//! for every report; holding shorter took that with it (`benches/results/wc.md`).
//!
//! And a hold is a park on a doorbell of its own rather than a sleep: an executor that runs
//! dry while the ingress waits rings it (`executor/starving.rs`), since then the coordinator's
//! read is all that keeps work from the cores. Without it a two-executor WC run kept 1.79–1.85
//! of its 2 cores busy, with it 1.88–1.93, and ran 1–9 % faster (`benches/results/wc.md`).
//!
//! Measured (`perf/stat.sh -- local --app wc --records 300000 --executors 2`, two runs of each
//! build alternated, AMD EPYC guest, 2 vCPUs): the coordinator's context switches went from
//! 3 431–3 470 to 792–798 a run and its CPU from 100–107 to 66–73 ms, the executors' context
//! switches from 885–1 284 to 322–427 each, and the run from 427 000–431 000 to 449 000–464 000
//! records/s (`benches/results/wc.md`).

use crate::runtime::coordinator::REPORT_HOLD;
use std::time::{Duration, Instant};

/// A hold may complete at most one in this many of the in-flight bound's roots (a quarter:
/// three quarters stay queued for the executors while the ingress waits for the coordinator).
const BOUND_PARTS_PER_HOLD: u128 = 4;

/// Smallest in-flight bound with which the coordinator holds at all.
pub(super) const HOLD_IN_FLIGHT_MIN: u64 = 256;

/// Shortest hold: below it a sleep costs about what the wake-ups it saves do (a timer's slack
/// on Linux is 50 µs).
const HOLD_MIN: Duration = Duration::from_micros(200);

/// The coordinator's pace: the rate roots complete at, measured over windows of at least one
/// hold (a turn can be a few microseconds, too short to tell a rate).
pub(super) struct Cadence {
    max_in_flight: u64,
    window_start: Instant,
    completed_at_window_start: u64,
    /// Roots completing in one hold at the last window's rate; `None` before the first window
    /// ends (no hold until a rate is known).
    per_hold: Option<u128>,
}

impl Cadence {
    /// For an ingress that may have `max_in_flight` tracked roots incomplete.
    pub(super) fn new(max_in_flight: u64, now: Instant) -> Self {
        Cadence {
            max_in_flight,
            window_start: now,
            completed_at_window_start: 0,
            per_hold: None,
        }
    }

    /// How long the wait that ends this turn may sleep through the executors' reports (at most
    /// [`REPORT_HOLD`]), or `None` when it must park on them: some executor has work, and at the
    /// rate roots completed over the last window, the hold completes at most a quarter of the
    /// in-flight bound. At a rate that completes more than that in a whole hold, the hold is
    /// shortened to a quarter of the bound's worth, down to [`HOLD_MIN`]. `completed` is the
    /// count of completed tracked roots so far.
    pub(super) fn may_hold(
        &mut self,
        completed: u64,
        executors_parked: bool,
        now: Instant,
    ) -> Option<Duration> {
        let window = now.saturating_duration_since(self.window_start);
        if window >= REPORT_HOLD {
            let done = completed.saturating_sub(self.completed_at_window_start);
            self.per_hold = Some(u128::from(done) * REPORT_HOLD.as_nanos() / window.as_nanos());
            self.window_start = now;
            self.completed_at_window_start = completed;
        }
        if executors_parked || self.max_in_flight < HOLD_IN_FLIGHT_MIN {
            return None;
        }
        let per_hold = self.per_hold?;
        let quarter = u128::from(self.max_in_flight) / BOUND_PARTS_PER_HOLD;
        if per_hold <= quarter {
            return Some(REPORT_HOLD);
        }
        // The hold that completes a quarter of the bound at this rate.
        let hold_ns = REPORT_HOLD.as_nanos() * quarter / per_hold;
        let hold = Duration::from_nanos(u64::try_from(hold_ns).unwrap_or(u64::MAX));
        (hold >= HOLD_MIN).then_some(hold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_only_while_an_executor_works_and_a_hold_completes_a_quarter_of_the_bound() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        let t0 = Instant::now();
        let mut c = Cadence::new(4096, t0);
        // No rate yet: no hold.
        assert_eq!(c.may_hold(100, false, t0 + us(100)), None);
        // 500 roots in the first millisecond: under 1024 a whole hold.
        assert_eq!(c.may_hold(500, false, t0 + ms(1)), Some(REPORT_HOLD));
        // Every executor parked: wake on reports.
        assert_eq!(c.may_hold(600, true, t0 + us(1500)), None);
        // 2048 in the next window: a hold of half a millisecond completes 1024.
        assert_eq!(c.may_hold(2548, false, t0 + ms(2)), Some(us(500)));
        // Short turns keep the last window's rate.
        assert_eq!(c.may_hold(2549, false, t0 + us(2100)), Some(us(500)));
        // 8192 in 1 ms: a hold of 125 µs would be under the shortest.
        assert_eq!(c.may_hold(10_740, false, t0 + ms(3)), None);
        // 400 in 2 ms: 200 a hold.
        assert_eq!(c.may_hold(11_140, false, t0 + ms(5)), Some(REPORT_HOLD));
    }

    #[test]
    fn never_holds_with_a_small_in_flight_bound() {
        let t0 = Instant::now();
        let mut c = Cadence::new(HOLD_IN_FLIGHT_MIN - 1, t0);
        assert_eq!(c.may_hold(0, false, t0 + Duration::from_millis(1)), None);
        let mut c = Cadence::new(HOLD_IN_FLIGHT_MIN, t0);
        let quarter = HOLD_IN_FLIGHT_MIN / 4;
        assert!(
            c.may_hold(quarter, false, t0 + Duration::from_millis(1))
                .is_some()
        );
    }
}
