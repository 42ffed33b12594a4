//! The atomics every lock-free structure of this crate uses, from one place: under `cfg(loom)`
//! they are loom's model-checked types, otherwise the standard library's. The ring protocol is
//! written once against these names, so loom checks the very code that runs on shared memory.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(all(not(loom), miri))]
pub(crate) use std::sync::atomic::fence;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// One iteration of a busy-wait. Under loom it yields, so a spinning model makes progress.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
