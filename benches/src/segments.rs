//! Names of the shared-memory segments the benchmarks make, remembered so that a benchmark a
//! signal ends at once (no owner's `Drop` runs then) removes exactly its own and nothing of
//! another process's, even one whose pid reads the same from another pid namespace.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Where named segments live.
const SHM_DIR: &str = "/dev/shm";

/// Every name [`new_name`] gave out.
static MADE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn made() -> MutexGuard<'static, Vec<String>> {
    MADE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new segment name, `clasp-bench-KIND-PID-N` (the pid lets a later run's sweep find it if
/// this process is killed outright), remembered for [`remove_made`].
pub fn new_name(kind: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("clasp-bench-{kind}-{}-{n}", std::process::id());
    made().push(name.clone());
    name
}

/// Removes the segments named by [`new_name`] that still exist. A segment made after this
/// runs is not removed: the caller exits right after it, and a later sweep finds that one.
pub fn remove_made() {
    for name in made().drain(..) {
        let _ = std::fs::remove_file(std::path::Path::new(SHM_DIR).join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_kind_and_pid_and_are_removed_once() {
        let (a, b) = (new_name("test"), new_name("test"));
        let pid = std::process::id();
        assert!(a.starts_with(&format!("clasp-bench-test-{pid}-")), "{a}");
        assert_ne!(a, b);
        let path = std::path::Path::new(SHM_DIR).join(&a);
        if std::fs::write(&path, b"x").is_ok() {
            remove_made();
            assert!(!path.exists());
        }
        assert!(made().is_empty());
    }
}
