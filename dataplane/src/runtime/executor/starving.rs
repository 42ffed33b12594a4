//! An executor that runs dry wakes a coordinator sleeping through its reports.
//!
//! A local coordinator reads its executors' reports in holds, sleeps their reports do not
//! interrupt (`local/cadence.rs`), and only its reads release the ingress's in-flight bound.
//! So once the ingress waits on that bound, the executors eat what is queued and then idle
//! until the hold ends. In a two-executor WC run on the 2-vCPU AMD guest a core sat idle
//! 0.3–0.8 ms at a time, every other cycle of refill (`perf sched timehist`): the hold was
//! sized from a completion rate that those idle stretches had lowered, so it grew to the whole
//! millisecond and the idle stretches with it. An executor about to park while the ingress
//! waits therefore rings the coordinator's hold doorbell, and a hold is a park on it with a
//! timeout, not a sleep (`benches/results/wc.md`, "A hold that an idle executor ends").
//!
//! It is a hint, and one-sided on purpose: an executor that went idle before the coordinator
//! announced its hold is not seen, and the hold then runs its course (as every hold did
//! before); a wake-up missed costs the rest of a hold, never a request. Rechecking the
//! executors from the coordinator's side, or having the ingress ring when it starts to wait
//! with an executor parked, was tried: both woke the coordinator again and again while one
//! executor still held the roots the ingress waited for, and cost more CPU than the idle
//! stretches did.

use crate::runtime::layout::WorkerSegment;
use clasp_shmring::Segment;
use std::sync::atomic::{Ordering, fence};

/// What an executor needs to wake a holding coordinator: the segment and two doorbells.
pub(crate) struct HoldWake {
    segment: Segment,
    ingress_bell: usize,
    hold_bell: usize,
}

impl HoldWake {
    pub(crate) fn new(seg: &WorkerSegment) -> Self {
        HoldWake {
            segment: seg.segment.clone(),
            ingress_bell: seg.index.ingress_bell(),
            hold_bell: seg.index.hold_bell(),
        }
    }

    /// Called once this executor's `PARKED` reads 1: rings the hold doorbell if the ingress
    /// waits for completions. A ring finds the coordinator asleep only while it holds (and a
    /// cluster worker's coordinator, its network thread, never parks there).
    #[inline]
    pub(crate) fn going_idle(&self) {
        // The ingress's announcement is read after this executor's last report and `PARKED`
        // are stored; the fence keeps the load from passing those stores.
        fence(Ordering::SeqCst);
        let ingress_waits = self
            .segment
            .doorbell(self.ingress_bell)
            .is_ok_and(|b| b.sleepers() > 0);
        if ingress_waits && let Ok(hold) = self.segment.doorbell(self.hold_bell) {
            hold.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::layout::test_segment;
    use std::sync::mpsc::{self, Receiver};
    use std::thread::JoinHandle;
    use std::time::Duration;

    /// A coordinator's hold on `seg`'s hold doorbell, far longer than a test may take: says
    /// when it has announced itself and when it woke.
    fn holding_coordinator(seg: &WorkerSegment) -> (Receiver<()>, JoinHandle<()>) {
        let (hold, hold_bell) = (seg.segment.clone(), seg.index.hold_bell());
        let (announced_tx, announced) = mpsc::channel();
        let (woke_tx, woke) = mpsc::channel();
        let coordinator = std::thread::spawn(move || {
            let bell = hold.doorbell(hold_bell).unwrap();
            let token = bell.prepare_hint_park();
            announced_tx.send(()).unwrap();
            bell.park(token, Some(Duration::from_secs(120)));
            bell.finish_park(token);
            woke_tx.send(()).unwrap();
        });
        announced.recv().unwrap();
        (woke, coordinator)
    }

    /// Ends the hold whatever happened, so that the thread and its mapping are gone before
    /// the segment is removed.
    fn end(seg: &WorkerSegment, coordinator: JoinHandle<()>) {
        seg.segment.doorbell(seg.index.hold_bell()).unwrap().ring();
        coordinator.join().unwrap();
    }

    #[test]
    fn an_executor_going_idle_while_the_ingress_waits_ends_a_hold() {
        let seg = test_segment(&format!("clasp-starving-test-{}", std::process::id()), 2);
        let (woke, coordinator) = holding_coordinator(&seg);
        // The ingress waits for completions: it has announced a park on its doorbell.
        let ingress = seg.segment.doorbell(seg.index.ingress_bell()).unwrap();
        let token = ingress.prepare_park();
        HoldWake::new(&seg).going_idle();
        let result = woke.recv_timeout(Duration::from_secs(30));
        ingress.finish_park(token);
        end(&seg, coordinator);
        assert!(
            result.is_ok(),
            "the hold was not ended by the idle executor"
        );
    }

    #[test]
    fn without_a_waiting_ingress_an_idle_executor_leaves_the_hold_alone() {
        let seg = test_segment(
            &format!("clasp-starving-quiet-test-{}", std::process::id()),
            2,
        );
        let (woke, coordinator) = holding_coordinator(&seg);
        HoldWake::new(&seg).going_idle();
        // Nothing rang, so the hold goes on (only a spurious futex wake-up could end it).
        let result = woke.recv_timeout(Duration::from_millis(200));
        end(&seg, coordinator);
        assert!(
            result.is_err(),
            "an idle executor ended a hold with no ingress waiting"
        );
    }
}
