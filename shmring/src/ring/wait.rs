//! How an end of a ring waits for its peer: spin for as long as [`WaitPolicy`] says, then park on a
//! doorbell in slices of [`LIVENESS_POLL`], re-checking the condition after announcing the park
//! (so a wake-up between the check and the sleep is never lost) and the peer's liveness after
//! every slice (so a dead peer process is reported instead of waited for).

use crate::doorbell::Doorbell;
use crate::error::{Error, Result};
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_loop};
use std::time::{Duration, Instant};

/// How long a parked side sleeps before it checks whether its peer process is still alive.
pub const LIVENESS_POLL: Duration = Duration::from_millis(50);

/// How a side waits: poll for up to [`spin`](Self::spin) of wall time, then park.
///
/// The bound is wall time, not a poll count: a count means 10 µs on one CPU and 40 on another,
/// and what a deployment decides is how long an idle core may burn before it gives the core
/// back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Longest spin before parking. Zero when runnable threads outnumber cores: a spinner
    /// would take the core from the very thread it waits for.
    pub spin: Duration,
}

/// Spin before parking when every runnable thread has a core of its own: long enough to
/// ride out the gaps of a burst and the hand-offs along a chain of operators, short against
/// the gaps of a stream at low load (a core that spins longer is a core not given back).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Polls between two reads of the clock while spinning (a clock read costs tens of ns on a
/// virtual machine; a poll a few).
const POLLS_PER_CLOCK_READ: u32 = 32;

impl WaitPolicy {
    /// Never spin: park as soon as there is nothing to do.
    pub const PARK: WaitPolicy = WaitPolicy {
        spin: Duration::ZERO,
    };

    /// Spin up to `spin`, then park.
    pub const fn spin_then_park(spin: Duration) -> Self {
        WaitPolicy { spin }
    }

    /// The policy for a process that runs `runnable_threads` busy threads: spin
    /// [`DEFAULT_SPIN`] only when each has a core.
    pub fn for_runnable_threads(runnable_threads: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if runnable_threads > cores {
            Self::PARK
        } else {
            Self::spin_then_park(DEFAULT_SPIN)
        }
    }

    /// Whether this policy spins at all.
    pub fn spins(&self) -> bool {
        !self.spin.is_zero()
    }
}

/// Calls `poll` until it says the condition holds (`Ok(true)`) or `bound` of wall time has
/// passed (`Ok(false)`), reading the clock once every few polls. A zero bound polls nothing
/// and reads no clock (loom models stay deterministic). Every idle spin of the data plane —
/// a ring end's, a network thread's — waits this way.
pub fn spin_for<E>(
    bound: Duration,
    mut poll: impl FnMut() -> std::result::Result<bool, E>,
) -> std::result::Result<bool, E> {
    if bound.is_zero() {
        return Ok(false);
    }
    let deadline = Instant::now() + bound;
    loop {
        for _ in 0..POLLS_PER_CLOCK_READ {
            if poll()? {
                return Ok(true);
            }
            spin_loop();
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
    }
}

/// What [`park_until`] asks its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Is the condition met? A cheap poll, used while spinning.
    Poll,
    /// Is the condition met? Re-checked after announcing a park (SYNC: park); must read the
    /// shared words afresh, not a cached copy.
    Strong,
    /// Is the peer still alive? Asked after every timed-out park slice; answer `Ok(false)` or
    /// the error.
    Liveness,
}

/// Sleep on `bell` until `probe` says the condition holds, spinning first as `policy` says.
pub(crate) fn park_until(
    bell: &Doorbell,
    policy: WaitPolicy,
    timeout: Option<Duration>,
    mut probe: impl FnMut(Probe) -> Result<bool>,
) -> Result<()> {
    if spin_for(policy.spin, || probe(Probe::Poll))? {
        return Ok(());
    }
    let start = Instant::now();
    let mut last_liveness_check = start;
    loop {
        if probe(Probe::Poll)? {
            return Ok(());
        }
        let token = bell.prepare_park();
        let now_ready = probe(Probe::Strong);
        if !matches!(now_ready, Ok(false)) {
            bell.finish_park(token);
            if now_ready? {
                return Ok(());
            }
            continue;
        }
        let slice = match timeout {
            Some(t) => {
                let left = t.saturating_sub(start.elapsed());
                if left.is_zero() {
                    bell.finish_park(token);
                    return Err(Error::TimedOut {
                        waited_ms: t.as_millis() as u64,
                    });
                }
                left.min(LIVENESS_POLL)
            }
            None => LIVENESS_POLL,
        };
        bell.park(token, Some(slice));
        bell.finish_park(token);
        // Reading /proc costs microseconds: at most once per LIVENESS_POLL, not per wake-up.
        // Under loom, after every slice: a decision on the wall clock would make the model's
        // executions differ from run to run (loom then aborts, "not fully deterministic",
        // whenever a loaded machine stretches one execution past the poll interval).
        if cfg!(loom) || last_liveness_check.elapsed() >= LIVENESS_POLL {
            probe(Probe::Liveness)?;
            last_liveness_check = Instant::now();
        }
    }
}

/// Whether the registered process (its packed holder word) is alive; `Ok` when none is
/// registered, or when it closed its end before going away (a clean exit, not a death).
pub(super) fn check_alive(holder: &AtomicU64, closed: &AtomicU32) -> Result<()> {
    if closed.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let word = holder.load(Ordering::Acquire);
    if word == 0 || crate::liveness::holder_alive(word) {
        Ok(())
    } else {
        Err(Error::PeerDead {
            pid: crate::liveness::unpack(word).0,
        })
    }
}
