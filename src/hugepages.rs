//! Transparent huge pages off for every clasp process, unless the user asks for them.
//!
//! Why: mimalloc asks the kernel for transparent huge pages on its arenas
//! (`madvise(MADV_HUGEPAGE)`), so the first touch of a fresh 2 MiB region faults in and zeroes
//! a whole huge page inside whatever allocation touched it. In a guest the host backs that page
//! too, and the fault took 3–5 ms of system time: an executor packing migrated state stalled
//! that long on one allocation in about one encode in thirty, and the planner's moves of
//! ~42 000 words took 12–14 ms instead of 5–8. With huge pages off, `clasp local --app wc
//! --executors 1 --records 600000` kept its throughput (797–814 k against 763–810 k records/s)
//! and its p99 fell from 9.1–9.5 ms to 5.6–6.2 ms (`benches/results/migrations.md`); the
//! allocation-heavy `clasp oracle --app wc --records 2000000 --seed 1` took 3.30–3.33 s with
//! them off and 3.40–3.45 s with them on (two runs each, alternated).
//!
//! The switch is `prctl(PR_SET_THP_DISABLE)`: it covers the whole process (memory the
//! allocator mapped before `main` too, at its next fault) and is inherited by the workers and
//! other children a command starts. A user who wants huge pages — a large state map on bare
//! metal, where the TLB matters more than the fault — sets `MIMALLOC_ALLOW_THP=1`, and clasp
//! leaves the kernel's and the allocator's defaults alone; `MIMALLOC_ALLOW_THP=0` is mimalloc's
//! own way of turning them off.

/// The environment variable that hands the choice back to mimalloc and the kernel.
pub const ALLOW_THP_ENV: &str = "MIMALLOC_ALLOW_THP";

/// Turns transparent huge pages off for this process and its children, unless
/// [`ALLOW_THP_ENV`] is set. A kernel without the `prctl` leaves them as they were (a debug
/// log line says so): this is a latency tuning, not something a run depends on.
pub fn disable_unless_asked() {
    if std::env::var_os(ALLOW_THP_ENV).is_some() {
        return;
    }
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!("transparent huge pages stay as the kernel set them: {e}");
    }
}
