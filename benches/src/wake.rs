//! What one sleep and its wake-up cost the sleeping thread, in CPU time: the price a worker
//! pays per park at low load, when every request arrives alone (the busy-time estimator's ω).
//!
//! A thread parks on a [`Doorbell`] — the executors' own parking — and another rings it at a
//! fixed gap long enough that the sleeper is always asleep when rung. The sleeper's CPU clock
//! over the run, divided by its wake-ups, is the figure: the futex wait, the context switches
//! out and back in, and on a virtual machine the idle and timer exits that come with them. The
//! waker's side (a futex wake) is not included.

use clasp_dataplane::clock::thread_cpu_ns;
use clasp_shmring::Doorbell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The longest one park may last: a lost ring only costs this.
const PARK_TIMEOUT: Duration = Duration::from_millis(20);

/// CPU µs the sleeping thread spends per sleep and wake-up, over `wakes` rings `gap` apart.
pub fn measure_wake_us(wakes: u64, gap: Duration) -> f64 {
    let bell = Arc::new(Doorbell::new());
    let rung = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sleeper = std::thread::spawn({
        let (bell, rung, done) = (Arc::clone(&bell), Arc::clone(&rung), Arc::clone(&done));
        move || {
            let from_ns = thread_cpu_ns();
            let mut seen = 0u64;
            let mut woken = 0u64;
            while !done.load(Ordering::Acquire) {
                let token = bell.prepare_park();
                if rung.load(Ordering::Acquire) == seen {
                    bell.park(token, Some(PARK_TIMEOUT));
                    woken += 1;
                }
                bell.finish_park(token);
                seen = rung.load(Ordering::Acquire);
            }
            (thread_cpu_ns().saturating_sub(from_ns), woken)
        }
    });
    for i in 1..=wakes {
        std::thread::sleep(gap);
        rung.store(i, Ordering::Release);
        bell.ring();
    }
    done.store(true, Ordering::Release);
    rung.fetch_add(1, Ordering::Release);
    bell.ring();
    let (cpu_ns, woken) = sleeper.join().expect("the sleeper does not panic");
    cpu_ns as f64 / 1e3 / woken.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_costs_some_cpu_but_not_the_gap() {
        let gap = Duration::from_micros(500);
        let us = measure_wake_us(200, gap);
        assert!(
            us > 0.0 && us < gap.as_secs_f64() * 1e6,
            "{us} µs per wake-up"
        );
    }
}
