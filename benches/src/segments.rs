//! Names of the shared-memory segments the benchmarks make, remembered while they may exist so
//! that a benchmark a signal ends at once (no owner's `Drop` runs then) removes exactly its own
//! and nothing of another process's, even one whose pid reads the same from another pid
//! namespace.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Where named segments live.
const SHM_DIR: &str = "/dev/shm";

/// The names [`new_name`] gave out whose [`SegmentName`] is still held.
static MADE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn made() -> MutexGuard<'static, Vec<String>> {
    MADE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A segment name given out by [`new_name`]: remembered for [`remove_made`] until dropped,
/// which its holder does once the segment is gone (its owner removed it).
#[derive(Debug)]
pub struct SegmentName(String);

impl SegmentName {
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Drop for SegmentName {
    fn drop(&mut self) {
        made().retain(|n| *n != self.0);
    }
}

/// A new segment name, `clasp-bench-KIND-PID-N` (the pid lets a later run's sweep find it if
/// this process is killed outright), remembered for [`remove_made`] while it is held.
pub fn new_name(kind: &str) -> SegmentName {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("clasp-bench-{kind}-{}-{n}", std::process::id());
    made().push(name.clone());
    SegmentName(name)
}

/// Removes the segments named by [`new_name`] whose names are still held. A segment made
/// after this runs is not removed: the caller exits right after it, and a later sweep finds it.
pub fn remove_made() {
    for name in made().drain(..) {
        let _ = std::fs::remove_file(std::path::Path::new(SHM_DIR).join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_carry_the_kind_and_pid_and_only_held_ones_are_removed() {
        let (a, b) = (new_name("test"), new_name("test"));
        let pid = std::process::id();
        assert!(
            a.as_str().starts_with(&format!("clasp-bench-test-{pid}-")),
            "{a:?}"
        );
        assert_ne!(a.as_str(), b.as_str());
        let (path_a, path_b) = (
            Path::new(SHM_DIR).join(a.as_str()),
            Path::new(SHM_DIR).join(b.as_str()),
        );
        // b's segment was removed by its owner and the name dropped: whatever holds that name
        // now is not ours.
        drop(b);
        let writable =
            std::fs::write(&path_a, b"x").is_ok() && std::fs::write(&path_b, b"x").is_ok();
        remove_made();
        assert!(made().is_empty());
        if writable {
            assert!(!path_a.exists());
            assert!(path_b.exists());
        } else {
            eprintln!("skipped the removal: {SHM_DIR} cannot be written here");
        }
        let _ = (std::fs::remove_file(&path_a), std::fs::remove_file(&path_b));
    }
}
