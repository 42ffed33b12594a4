//! The one monotonic clock every process of a run stamps time with.
//!
//! Admission times travel in request headers and are compared with completion times taken by
//! another thread, or by another process on the same machine (the local ingress stamps a root,
//! the worker's coordinator completes it), so every stamp must come from the same clock:
//! `CLOCK_MONOTONIC`, read in nanoseconds.

/// Nanoseconds of `CLOCK_MONOTONIC` (comparable across the threads and processes of a machine).
#[inline]
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // A monotonic clock's fields are non-negative; the sum fits u64 for 584 years of uptime.
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time of the calling thread (user + system), in nanoseconds: the rings' own clock, the
/// one their parks are measured with.
pub use clasp_shmring::thread_cpu_ns;

#[cfg(test)]
mod tests {
    use super::monotonic_ns;

    #[test]
    fn never_goes_back() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a);
    }
}
