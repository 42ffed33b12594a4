//! Cleanup that must happen even when the process exits at once.
//!
//! The normal way out of a run is its return path: every guard's `Drop` stops the processes it
//! started and removes the files and segments it made. A second SIGINT/SIGTERM (or a drain that
//! overruns its timeout) cannot wait for that path, and `std::process::exit` runs no `Drop`. So
//! a guard that owns something outside the process (a run directory, a named segment, child
//! processes, a cgroup) also registers an action here that undoes it, and drops that
//! registration once it cleaned up itself. [`run_all`] runs every action still registered,
//! each at most once, newest first (the order the guards would have dropped in).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// One cleanup action.
type Action = Box<dyn FnOnce() + Send>;

/// The registered actions, each with the id its [`Registration`] carries.
struct Registry {
    next_id: u64,
    actions: Vec<(u64, Action)>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next_id: 0,
    actions: Vec::new(),
});

/// The registry, even if a thread panicked while holding it (the list stays consistent: every
/// change is a single push or remove).
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A registered action. Dropping it unregisters the action without running it (its owner
/// cleaned up by itself); [`Registration::remove_now`] runs it and unregisters it.
#[must_use = "dropping the registration unregisters the action at once"]
#[derive(Debug)]
pub struct Registration {
    id: u64,
}

impl Registration {
    /// Runs the action now (if [`run_all`] has not already) and unregisters it.
    #[allow(
        dead_code,
        reason = "for guards that undo their resource through the action"
    )]
    pub fn remove_now(self) {
        if let Some(action) = take(self.id) {
            action();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        drop(take(self.id));
    }
}

/// Removes the action with `id` from the registry, if it is still there.
fn take(id: u64) -> Option<Action> {
    let mut r = registry();
    let at = r.actions.iter().position(|(i, _)| *i == id)?;
    Some(r.actions.remove(at).1)
}

/// Registers `action`, to run if the process exits at once while the registration lives.
pub fn register(action: impl FnOnce() + Send + 'static) -> Registration {
    let mut r = registry();
    let id = r.next_id;
    r.next_id += 1;
    r.actions.push((id, Box::new(action)));
    Registration { id }
}

/// Registers the removal of `path` (a directory with everything in it, or a file). Symbolic
/// links are removed, never followed.
pub fn register_path(path: impl Into<PathBuf>) -> Registration {
    let path = path.into();
    register(move || {
        let _ = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => Ok(()),
        };
    })
}

/// Runs every registered action once, newest first. Actions run outside the registry's lock,
/// so an action may register or unregister others.
pub fn run_all() {
    let actions = std::mem::take(&mut registry().actions);
    for (_, action) in actions.into_iter().rev() {
        action();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The registry is process-wide: these tests share it, so they run as one.
    #[test]
    fn actions_run_once_newest_first_and_dropped_ones_never() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let push = |n: u32| {
            let order = Arc::clone(&order);
            move || order.lock().unwrap().push(n)
        };
        let first = register(push(1));
        let dropped = register(push(2));
        let second = register(push(3));
        drop(dropped);
        run_all();
        run_all();
        assert_eq!(*order.lock().unwrap(), [3, 1]);
        // Already run: unregistering them does nothing.
        drop(first);
        second.remove_now();
        assert_eq!(*order.lock().unwrap(), [3, 1]);

        let runs = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&runs);
        let now = register(move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
        now.remove_now();
        run_all();
        assert_eq!(runs.load(Ordering::Relaxed), 1);

        let dir = std::env::temp_dir().join(format!("clasp-cleanup-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        std::fs::write(dir.join("inner/file"), b"x").unwrap();
        let keep = register_path(&dir);
        run_all();
        assert!(!dir.exists());
        drop(keep);
    }
}
