//! Parking and waking across threads and processes on one 32-bit futex word.
//!
//! A [`Doorbell`] lives in shared memory. A consumer fed by several rings parks on one doorbell
//! that all of their producers ring, so it sleeps in one system call whatever the number of
//! inputs. Ringing a doorbell nobody sleeps on costs no system call: the waker reads the
//! `sleepers` count and returns.
//!
//! The protocol (SYNC: park) is the store-buffering pattern made safe by a SeqCst fence on each
//! side:
//! - the parker reads `seq` (its token), increments `sleepers`, fences, re-checks its wait
//!   condition, and only then `futex_wait(seq, token)`;
//! - the waker publishes its change to the condition, fences, then loads `sleepers`; when
//!   non-zero it bumps `seq` and calls `futex_wake`.
//!
//! Fences rather than SeqCst accesses: the two are equivalent here, but loom models only the
//! fences faithfully (it treats SeqCst accesses as AcqRel), and we want loom to check the code
//! that ships.
//!
//! # Asymmetric fences
//! Ringing happens on every publish, parking only when a side is idle, so the fence is moved
//! to the side that can afford it: where the kernel has `membarrier(GLOBAL_EXPEDITED)`, each
//! process registers once, the waker's fence becomes a compiler fence, and the parker calls
//! `membarrier`, which makes every running thread of every registered process execute a full
//! barrier (the technique of liburcu and folly's `asymmetricHeavyBarrier`). Either a waker's
//! load of `sleepers` comes after that barrier and sees the sleeper, or its publishing store
//! comes before it and the parker's re-check sees it. A mfence per publish was the largest
//! cost of the ring's fast path (see `benches/results/rings.md`). Where the call is missing (or
//! under loom and Miri) both sides use plain fences, which loom checks.
//!
//! Either the waker sees the sleeper, or the parker sees the new condition; and a `seq` bump
//! between the token read and the wait makes the wait return at once. No wake-up is lost; the
//! loom models in `tests/loom_ring.rs` check it.
//!
//! # One wake per park
//! A woken thread stays counted in `sleepers` until it runs again and finishes its park. Where
//! runnable threads outnumber cores that can take a while, and every ring in between used to
//! pay a futex call that found nobody left to wake. So the word that counts sleepers also
//! holds a [`WOKEN`] bit (SYNC: wake-once): the first wake after a park's announcement sets it
//! (one `fetch_or`) and makes the call, which ends every wait begun with an older token; a ring
//! that finds it set returns. Each announcement clears the bit in the same read-modify-write
//! that counts the sleeper, so a waker that sees that sleeper sees the bit clear, and one that
//! does not see it is the case the fences above already cover: the parker's re-check sees the
//! change. Being one word, loom checks it (`tests/loom_ring.rs`). Segment format version 4.

use crate::sync::{AtomicU32, Ordering};

#[cfg(not(loom))]
std::thread_local! {
    /// CPU ns the calling thread has spent inside [`Doorbell::park`]'s futex wait.
    static PARK_CPU_NS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Futex waits the calling thread has entered in [`Doorbell::park`].
    static PARKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// CPU ns the calling thread has spent inside doorbell parks, cumulative: what going to sleep
/// and waking up cost it (a system call, a context switch each way and, on a virtual machine,
/// the exits around them), apart from its work. Read it before and after a wait; the clock is
/// read only around a park that calls the kernel, never on a wait that finds its condition met.
pub fn thread_park_cpu_ns() -> u64 {
    #[cfg(not(loom))]
    {
        PARK_CPU_NS.with(|c| c.get())
    }
    #[cfg(loom)]
    {
        0
    }
}

/// Times the calling thread has gone to sleep in a doorbell park (futex waits entered),
/// cumulative: with [`thread_park_cpu_ns`], what its sleeps cost and how many there were.
pub fn thread_parks() -> u64 {
    #[cfg(not(loom))]
    {
        PARKS.with(|c| c.get())
    }
    #[cfg(loom)]
    {
        0
    }
}

/// CPU time of the calling thread (user + system), in nanoseconds (0 under Miri, which does
/// not model thread CPU clocks).
pub fn thread_cpu_ns() -> u64 {
    if cfg!(miri) {
        return 0;
    }
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The fences of the park protocol: plain on both sides, or asymmetric (see the module docs).
#[cfg(not(any(loom, miri)))]
pub(crate) mod barrier {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering, compiler_fence, fence};

    /// Whether this process registered for expedited global membarriers, so its wakers may
    /// use compiler fences.
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    /// Whether the kernel has expedited global membarriers (parkers then issue one).
    static SUPPORTED: OnceLock<bool> = OnceLock::new();

    /// Queries the kernel and registers this process; idempotent. Called before any ring of
    /// this crate is built.
    pub(crate) fn init() -> bool {
        *SUPPORTED.get_or_init(|| {
            use rustix::thread::{MembarrierCommand as Cmd, membarrier, membarrier_query};
            let q = membarrier_query();
            let ok = q.contains_command(Cmd::GlobalExpedited)
                && q.contains_command(Cmd::RegisterGlobalExpedited)
                && membarrier(Cmd::RegisterGlobalExpedited).is_ok();
            REGISTERED.store(ok, Ordering::Release);
            ok
        })
    }

    /// The waker's side: after publishing, before loading `sleepers`.
    #[inline]
    pub(crate) fn waker(asymmetric: bool) {
        waker_cached(waker_fence_free(asymmetric));
    }

    /// Whether the waker's fence may be a compiler fence. Once true it stays true (a process
    /// never unregisters), so a ring end may look it up once when it is made.
    #[inline]
    pub(crate) fn waker_fence_free(asymmetric: bool) -> bool {
        asymmetric && REGISTERED.load(Ordering::Relaxed)
    }

    /// [`waker`] with [`waker_fence_free`] looked up by the caller.
    #[inline(always)]
    pub(crate) fn waker_cached(fence_free: bool) {
        if fence_free {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// The parker's side: after announcing itself, before re-checking.
    pub(crate) fn parker(asymmetric: bool) {
        fence(Ordering::SeqCst);
        if asymmetric && init() {
            // Cannot fail once the query said the command exists; if it did, the waker side
            // would still be a full fence in every process that failed to register.
            let _ = rustix::thread::membarrier(rustix::thread::MembarrierCommand::GlobalExpedited);
        }
    }
}

#[cfg(any(loom, miri))]
pub(crate) mod barrier {
    use crate::sync::{Ordering, fence};

    pub(crate) fn init() -> bool {
        false
    }

    #[inline]
    pub(crate) fn waker(_asymmetric: bool) {
        fence(Ordering::SeqCst);
    }

    pub(crate) fn waker_fence_free(_asymmetric: bool) -> bool {
        false
    }

    #[inline(always)]
    pub(crate) fn waker_cached(_fence_free: bool) {
        fence(Ordering::SeqCst);
    }

    pub(crate) fn parker(_asymmetric: bool) {
        fence(Ordering::SeqCst);
    }
}
use std::time::Duration;

/// The bit of the sleepers word set by the first wake since the last park's announcement.
const WOKEN: u32 = 1 << 31;

/// Whether a waker that read `sleepers_word` must wake: someone announced a park and no wake
/// has come since.
#[inline(always)]
fn needs_wake(sleepers_word: u32) -> bool {
    sleepers_word != 0 && sleepers_word & WOKEN == 0
}

/// A 32-bit futex word plus a count of sleepers, alone on a 128-byte line (two lines on x86-64,
/// because of the adjacent-line prefetcher).
#[repr(C, align(128))]
pub struct Doorbell {
    /// Bumped by every wake that found a sleeper. The futex word.
    seq: AtomicU32,
    /// Threads between `prepare_park` and `finish_park` (in 0..=number of parkers), plus
    /// [`WOKEN`] once a wake came after the last announcement.
    sleepers: AtomicU32,
    /// 1: asymmetric fences ([`ParkMode::Asymmetric`]); 0: a fence on each side. Fixed when
    /// the doorbell is made, so wakers and parkers always agree.
    asymmetric: AtomicU32,
    #[cfg(loom)]
    lock: loom::sync::Mutex<()>,
    #[cfg(loom)]
    cond: loom::sync::Condvar,
}

/// Which side of the park protocol pays for the fence (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParkMode {
    /// Wakers use a compiler fence, parkers `membarrier` (where the kernel has it): for
    /// threads that mostly run and rarely park — every core has one.
    #[default]
    Asymmetric,
    /// A full fence on both sides: for threads that park often — more runnable threads than
    /// cores — where a `membarrier` per park costs more than a fence per publish.
    Symmetric,
}

impl ParkMode {
    /// The mode for a process running `runnable_threads` busy threads on this machine.
    pub fn for_runnable_threads(runnable_threads: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if runnable_threads > cores {
            ParkMode::Symmetric
        } else {
            ParkMode::Asymmetric
        }
    }
}

/// What a parker got from [`Doorbell::prepare_park`]: the `seq` value to wait on.
#[derive(Debug, Clone, Copy)]
#[must_use = "finish_park must be called after prepare_park"]
pub struct ParkToken(u32);

impl Default for Doorbell {
    fn default() -> Self {
        Self::new()
    }
}

impl Doorbell {
    /// A doorbell with nobody parked, in the default mode.
    pub fn new() -> Self {
        Self::with_mode(ParkMode::default())
    }

    /// A doorbell with nobody parked.
    pub fn with_mode(mode: ParkMode) -> Self {
        Doorbell {
            seq: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            asymmetric: AtomicU32::new(u32::from(mode == ParkMode::Asymmetric)),
            #[cfg(loom)]
            lock: loom::sync::Mutex::new(()),
            #[cfg(loom)]
            cond: loom::sync::Condvar::new(),
        }
    }

    /// Announce that the caller is about to sleep. The caller must then re-check its wait
    /// condition, call [`park`](Self::park) only if it still holds, and call
    /// [`finish_park`](Self::finish_park) in every case.
    #[inline]
    pub fn prepare_park(&self) -> ParkToken {
        let token = self.prepare_hint_park();
        // SYNC: park — pairs with the fence in `ring`: either the waker sees this sleeper or
        // the re-check that follows sees the waker's change.
        barrier::parker(self.asymmetric.load(Ordering::Relaxed) == 1);
        token
    }

    /// [`prepare_park`](Self::prepare_park) for a sleep that a ring may only cut short: a
    /// timed wait with no condition to re-check. Without the barrier against the wakers, a
    /// ring whose waker's fence is a compiler fence ([`ParkMode::Asymmetric`]) may miss this
    /// sleeper, and the sleep then runs to its timeout; in exchange the sleeper does not pay a
    /// `membarrier` for every sleep.
    #[inline]
    pub fn prepare_hint_park(&self) -> ParkToken {
        let token = self.seq.load(Ordering::Acquire);
        // One step (SYNC: wake-once): a waker that sees this sleeper sees `WOKEN` clear.
        let _ = self
            .sleepers
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some((w & !WOKEN) + 1)
            });
        ParkToken(token)
    }

    /// Sleep until the doorbell is rung after `token` was taken, the timeout passes, or a
    /// spurious wake-up. Callers loop and re-check.
    pub fn park(&self, token: ParkToken, timeout: Option<Duration>) {
        #[cfg(not(loom))]
        {
            let ts = timeout.map(|t| rustix::time::Timespec {
                tv_sec: t.as_secs().min(i64::MAX as u64) as i64,
                tv_nsec: t.subsec_nanos().into(),
            });
            // Not FUTEX_PRIVATE: the word may be shared between processes. EAGAIN (the word
            // moved), EINTR and ETIMEDOUT all mean "re-check", so the result is ignored.
            let from_ns = thread_cpu_ns();
            let _ = rustix::thread::futex::wait(
                &self.seq,
                rustix::thread::futex::Flags::empty(),
                token.0,
                ts.as_ref(),
            );
            let spent_ns = thread_cpu_ns().saturating_sub(from_ns);
            PARK_CPU_NS.with(|c| c.set(c.get().wrapping_add(spent_ns)));
            PARKS.with(|c| c.set(c.get().wrapping_add(1)));
        }
        #[cfg(loom)]
        {
            // Loom has no futex: a mutex and condition variable give the same contract (the
            // value check and the sleep are atomic with respect to a wake). Loom has no time
            // either, so a model that needs the timeout to progress is reported as a deadlock.
            let _ = timeout;
            let guard = self.lock.lock().unwrap();
            if self.seq.load(Ordering::SeqCst) == token.0 {
                drop(self.cond.wait(guard).unwrap());
            }
        }
    }

    /// End a park started with [`prepare_park`](Self::prepare_park).
    #[inline]
    pub fn finish_park(&self, _token: ParkToken) {
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
    }

    /// Wake every sleeper, if there is one. Call it after publishing the change sleepers wait
    /// for. No system call when nobody sleeps.
    #[inline]
    pub fn ring(&self) {
        // SYNC: park — pairs with the fence in `prepare_park`.
        barrier::waker(self.asymmetric.load(Ordering::Relaxed) == 1);
        if needs_wake(self.sleepers.load(Ordering::Relaxed)) {
            self.wake_all();
        }
    }

    /// Whether [`ring`](Self::ring)'s fence is only a compiler fence in this process (see the
    /// module docs). Fixed once true, so a ring end looks it up once, when it is made, and
    /// rings with [`ring_cached`](Self::ring_cached): two loads and a branch fewer per publish.
    #[inline]
    pub(crate) fn waker_fence_free(&self) -> bool {
        barrier::waker_fence_free(self.asymmetric.load(Ordering::Relaxed) == 1)
    }

    /// [`ring`](Self::ring), with the fence chosen by a [`waker_fence_free`](Self::waker_fence_free)
    /// looked up earlier for this doorbell. A stale `false` is only slower, never wrong.
    #[inline(always)]
    pub(crate) fn ring_cached(&self, fence_free: bool) {
        // SYNC: park — pairs with the fence in `prepare_park`.
        barrier::waker_cached(fence_free);
        if needs_wake(self.sleepers.load(Ordering::Relaxed)) {
            self.wake_all();
        }
    }

    /// Wakes every sleeper, unless a wake since the last `prepare_park` already did (SYNC:
    /// wake-once): a woken thread stays counted until it runs, and on a machine with more
    /// runnable threads than cores that can be long — every publish in between paid a futex
    /// call that found nobody to wake (`benches/results/wc.md`, "Fewer wake-ups").
    #[cold]
    fn wake_all(&self) {
        if !needs_wake(self.sleepers.fetch_or(WOKEN, Ordering::Relaxed)) {
            return;
        }
        self.seq.fetch_add(1, Ordering::SeqCst);
        #[cfg(not(loom))]
        {
            let _ = rustix::thread::futex::wake(
                &self.seq,
                rustix::thread::futex::Flags::empty(),
                u32::MAX >> 1,
            );
        }
        #[cfg(loom)]
        {
            let _guard = self.lock.lock().unwrap();
            self.cond.notify_all();
        }
    }

    /// Which side of the park protocol pays for the fence.
    pub fn mode(&self) -> ParkMode {
        if self.asymmetric.load(Ordering::Relaxed) == 1 {
            ParkMode::Asymmetric
        } else {
            ParkMode::Symmetric
        }
    }

    /// Number of threads parked or about to park (for inspection and tests).
    pub fn sleepers(&self) -> u32 {
        self.sleepers.load(Ordering::Relaxed) & !WOKEN
    }
}
