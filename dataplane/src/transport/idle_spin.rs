//! The network thread's idle spin: before `poll` waits in the kernel it may watch its ring for
//! a while, so that a request arriving soon is taken without a sleep and a wake-up (tens of µs
//! on a virtual machine, the better part of a remote hop at low load).
//!
//! Kept apart from the event loop because it is a deployment's choice (`--idle spin:US`,
//! [`crate::runtime::IdlePolicy`]), off by default, and touches nothing the loop owns but two
//! words of the ring it reads. What it watches: the completion queue's tail, and — for a
//! single-issuer ring, whose completions the kernel keeps until we enter — the submission
//! queue's `IORING_SQ_TASKRUN` flag, which says such work waits. Either means the next
//! `io_uring_enter` returns something. The time spun is counted
//! ([`TransportCounters::idle_spin_ns`](super::TransportCounters::idle_spin_ns)): it is not
//! work, and a worker's CPU figure must be able to leave it out.

use super::Transport;
use std::time::Duration;

impl Transport {
    /// How long an idle `poll` watches its ring before it waits in the kernel (zero: it waits
    /// at once, the default). Never longer than the `poll`'s own wait.
    pub fn set_idle_spin(&mut self, spin: Duration) {
        self.idle_spin = spin;
    }

    /// The idle spin set by [`set_idle_spin`](Self::set_idle_spin).
    pub fn idle_spin(&self) -> Duration {
        self.idle_spin
    }

    /// Watches the ring for up to the idle spin (at most `wait`). Whether something arrived:
    /// the caller then enters without waiting.
    pub(super) fn spin_for_completion(&mut self, wait: Duration) -> bool {
        let bound = self.idle_spin.min(wait);
        if bound.is_zero() {
            return false;
        }
        let from_ns = crate::clock::thread_cpu_ns();
        let Ok(arrived) = clasp_shmring::spin_for(bound, || {
            Ok::<_, std::convert::Infallible>(self.ring_has_work())
        });
        self.counters.idle_spin_ns += crate::clock::thread_cpu_ns().saturating_sub(from_ns);
        arrived
    }

    /// A completion is posted, or the kernel holds completion work for our next enter.
    fn ring_has_work(&mut self) -> bool {
        let mut sq = self.ring.submission();
        sq.sync();
        if sq.taskrun() || sq.cq_overflow() {
            return true;
        }
        drop(sq);
        let mut cq = self.ring.completion();
        cq.sync();
        !cq.is_empty()
    }
}
