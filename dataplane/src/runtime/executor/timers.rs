//! Processing-time timers, fired from the executor's loop on its wall clock.
//!
//! Why here and not in a request: a processing-time timer is due because time passed, not
//! because a request arrived, so the loop looks at the clock — only while some instance holds
//! one (reading the clock costs nothing otherwise) — and fires what is due like an
//! end-of-stream flush: the emissions are routed untracked (they belong to no root). Timers
//! fire only while no migration is under way: a key group's timers fire where its state is
//! settled, and a group in flight brings its timers along to fire at its new owner.

use std::time::Duration;

use super::Engine;
use crate::request::RequestHeader;
use clasp_operators::timers::wall_clock_ms;

/// The longest an idle executor sleeps before it looks at its pending timers again.
pub(super) const TIMER_POLL_MAX: Duration = Duration::from_millis(50);

impl Engine {
    /// The earliest time any instance's processing-time timer may be due (ms since the Unix
    /// epoch), if any is pending.
    fn next_timer_ms(&self) -> Option<u64> {
        self.instances
            .iter()
            .filter_map(|i| i.next_processing_timer_ms())
            .min()
    }

    /// Fires the processing-time timers that are due; returns how many instances fired.
    pub(super) fn fire_processing_timers(&mut self) -> usize {
        if !self.mig.settled {
            return 0;
        }
        let Some(next) = self.next_timer_ms() else {
            return 0;
        };
        let now_ms = wall_clock_ms();
        if now_ms < next {
            return 0;
        }
        let mut fired = 0;
        for op in 0..self.instances.len() {
            let due = self.instances[op]
                .next_processing_timer_ms()
                .is_some_and(|t| t <= now_ms);
            if due {
                self.instances[op].fire_processing_timers(now_ms, &mut self.emitter);
                let parent = RequestHeader {
                    root_home: self.worker as u16,
                    ..RequestHeader::default()
                };
                self.route(op, &parent, super::EmittedBy::AnyKeyGroup);
                fired += 1;
            }
        }
        fired
    }

    /// How long an idle executor may sleep before a pending timer is due (`None`: no timer).
    pub(super) fn until_next_timer(&self) -> Option<Duration> {
        let next = self.next_timer_ms()?;
        let wait_ms = next.saturating_sub(wall_clock_ms());
        Some(Duration::from_millis(wait_ms).min(TIMER_POLL_MAX))
    }
}
