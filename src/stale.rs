//! What clasp processes that died without cleaning up left behind: named shared-memory segments
//! in `/dev/shm`, `clasp-run-*` directories in the temporary directory, and the empty cgroups
//! (`clasp-PID-HEX`) of a capped run killed outright.
//!
//! A process killed outright (SIGKILL, a crash, a power cut of a container) runs no cleanup, and
//! its segment holds tmpfs memory until someone removes it. Every name clasp gives these things
//! carries the creator's pid, so a start of `clasp run`, `clasp local` or `clasp worker` (and
//! `clasp clean` on demand) can find the ones whose creator is gone. Only names clasp itself
//! makes are considered, and nothing whose creator still runs is touched: the pid in the name
//! must be dead (`kill(pid, 0)`), and a segment is then removed only if nobody holds its owner
//! lock (a live owner always does, even one in another pid namespace whose pid we cannot see)
//! and the segment's own check agrees (its header's owner is gone or its lock free); a run
//! directory only if it holds nothing but its cluster file, which a live run holds locked.

use clasp_shmring::Segment;
use rustix::process::{Pid, test_kill_process};
use std::path::{Path, PathBuf};

/// Where named segments live.
pub const SHM_DIR: &str = "/dev/shm";
/// How the segments clasp names begin; the creator's pid follows, then perhaps `-N`.
const SEGMENT_PREFIXES: [&str; 4] = [
    "clasp-local-",
    "clasp-worker-",
    "clasp-bench-dispatch-",
    "clasp-bench-wc-",
];
/// How a run directory's name begins; the creator's pid follows, then `-` and
/// [`RUN_DIR_RANDOM_CHARS`] random letters and digits.
pub const RUN_DIR_PREFIX: &str = "clasp-run-";
/// Random letters and digits that end a run directory's name.
pub const RUN_DIR_RANDOM_CHARS: usize = 6;
/// The one file clasp writes in a run directory (the cluster file), locked while its creator
/// runs. A directory of a run directory's name that holds anything else is not clasp's.
pub const RUN_DIR_FILE: &str = "cluster.toml";
/// How the cgroup of a capped run (or of a worker capped by hand) begins; the creating
/// process's pid follows, then `-` and random hex (`src/cgroup/group.rs`).
const GROUP_PREFIX: &str = "clasp-";

/// One thing a dead clasp process left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// A named segment (its path under `/dev/shm`).
    Segment(PathBuf),
    /// A run directory.
    RunDir(PathBuf),
    /// A capped run's cgroup (its workers are gone; the empty groups stayed).
    Group(PathBuf),
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::Segment(p) => write!(f, "segment {}", p.display()),
            Stale::RunDir(p) => write!(f, "run directory {}", p.display()),
            Stale::Group(p) => write!(f, "cgroup {}", p.display()),
        }
    }
}

/// The pid a clasp name carries after `prefix`: `PID` or `PID-SUFFIX`.
fn pid_after(name: &str, prefix: &str) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?;
    let digits = rest.split('-').next()?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The creator's pid of a run directory named `name` (`clasp-run-PID-XXXXXX`), if clasp makes
/// such names.
pub(crate) fn temp_run_dir_pid(name: &str) -> Option<i32> {
    let (_, random) = name.strip_prefix(RUN_DIR_PREFIX)?.split_once('-')?;
    let random_ok =
        random.len() == RUN_DIR_RANDOM_CHARS && random.bytes().all(|b| b.is_ascii_alphanumeric());
    random_ok.then(|| pid_after(name, RUN_DIR_PREFIX)).flatten()
}

/// Whether run directory `dir` holds what clasp writes there and nothing else — at most its
/// cluster file, a regular file no live process holds locked.
fn holds_only_an_unlocked_cluster_file(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let entries: Vec<_> = entries.filter_map(Result::ok).collect();
    match entries.as_slice() {
        [] => true,
        [e] => e.file_name() == RUN_DIR_FILE && owner_lock_free(&e.path()),
        _ => false,
    }
}

/// The creator's pid of a segment named `name`, if clasp makes such names.
pub fn segment_pid(name: &str) -> Option<i32> {
    SEGMENT_PREFIXES.iter().find_map(|p| pid_after(name, p))
}

/// Whether no process has this pid (a pid we may not signal belongs to a live process).
fn is_dead(pid: i32) -> bool {
    match Pid::from_raw(pid) {
        Some(p) => test_kill_process(p) == Err(rustix::io::Errno::SRCH),
        None => false,
    }
}

/// The entries of `dir` whose names pass `creator` with a dead pid.
fn dead_entries(dir: &Path, creator: impl Fn(&str) -> Option<i32>) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let pid = creator(&name)?;
            is_dead(pid).then(|| (name, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Stale segments in `/dev/shm`: a dead creator's, with the owner lock free.
fn stale_segments() -> Vec<(String, PathBuf)> {
    let mut found = dead_entries(Path::new(SHM_DIR), segment_pid);
    found.retain(|(_, path)| owner_lock_free(path));
    found
}

/// Whether the entry at `path` is a segment (a regular file, not a link) and nobody holds its
/// owner lock (a shared lock is granted). Anything else of a segment's name is not clasp's:
/// a FIFO there, opened, would keep every run's sweep waiting for a writer.
fn owner_lock_free(path: &Path) -> bool {
    use rustix::fs::{FlockOperation, flock};
    use std::os::unix::fs::OpenOptionsExt as _;
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    // Not blocking and not following a link, should it be swapped in since.
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .is_ok_and(|f| flock(&f, FlockOperation::NonBlockingLockShared).is_ok())
}

/// Stale run directories in the temporary directory: real directories (never a symbolic link)
/// owned by this user, named as clasp names them, holding at most their cluster file, which
/// no live process holds locked.
fn stale_run_dirs() -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let uid = rustix::process::geteuid().as_raw();
    dead_entries(&std::env::temp_dir(), temp_run_dir_pid)
        .into_iter()
        .filter(|(_, p)| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && m.uid() == uid))
        .filter(|(_, p)| holds_only_an_unlocked_cluster_file(p))
        .map(|(_, p)| p)
        .collect()
}

/// Cgroups of capped runs whose creator is dead, beside this process's own group in every
/// cpu hierarchy (a run killed outright cannot remove them; its workers died with it). One
/// that still holds a process is in use, not stale (and could not be removed).
fn stale_groups() -> Vec<PathBuf> {
    let Ok(layout) = crate::cgroup::detect::detect() else {
        return Vec::new();
    };
    layout
        .hierarchies
        .iter()
        .flat_map(|h| dead_entries(&h.own_dir, |n| pid_after(n, GROUP_PREFIX)))
        .filter(|(_, p)| p.is_dir() && !holds_processes(p))
        .map(|(_, p)| p)
        .collect()
}

/// Whether a process is in the cgroup at `dir` or in one below it: cgroup v2 says so in
/// `cgroup.events`; in v1, each group's `cgroup.procs` is read.
fn holds_processes(dir: &Path) -> bool {
    if let Ok(events) = std::fs::read_to_string(dir.join("cgroup.events")) {
        return events.lines().any(|l| l.trim() == "populated 1");
    }
    let here = std::fs::read_to_string(dir.join("cgroup.procs"))
        .is_ok_and(|procs| !procs.trim().is_empty());
    here || std::fs::read_dir(dir).is_ok_and(|d| {
        d.filter_map(Result::ok)
            .any(|e| e.file_type().is_ok_and(|t| t.is_dir()) && holds_processes(&e.path()))
    })
}

/// Removes a group and its child groups (each must hold no task: a cgroup directory is
/// removed with `rmdir`, which the kernel refuses while a process is in it).
fn remove_group(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)?.filter_map(Result::ok) {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir(e.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// Finds what dead clasp processes left and, unless `dry_run`, removes it. Returns what it
/// found (and removed), and a line per thing it could not remove.
pub fn sweep(dry_run: bool) -> (Vec<Stale>, Vec<String>) {
    let mut found = Vec::new();
    let mut failed = Vec::new();
    for (name, path) in stale_segments() {
        let removed = if dry_run {
            Ok(true)
        } else {
            Segment::remove_stale(&name)
        };
        match removed {
            Ok(true) => found.push(Stale::Segment(path)),
            Ok(false) => {} // its owner lives after all
            Err(e) => failed.push(format!("segment {}: {e}", path.display())),
        }
    }
    for dir in stale_run_dirs() {
        let removed = if dry_run {
            Ok(())
        } else {
            std::fs::remove_dir_all(&dir)
        };
        match removed {
            Ok(()) => found.push(Stale::RunDir(dir)),
            Err(e) => failed.push(format!("run directory {}: {e}", dir.display())),
        }
    }
    for group in stale_groups() {
        let removed = if dry_run {
            Ok(())
        } else {
            remove_group(&group)
        };
        match removed {
            Ok(()) => found.push(Stale::Group(group)),
            Err(e) => failed.push(format!("cgroup {}: {e}", group.display())),
        }
    }
    (found, failed)
}

/// The sweep every start of `clasp run`, `clasp local` and `clasp worker` makes: what it removed
/// is logged, what it could not remove is a warning, and neither stops the command.
pub fn sweep_at_start() {
    let (removed, failed) = sweep(false);
    for s in removed {
        tracing::info!("removed the stale {s} of a clasp process that is gone");
    }
    for f in failed {
        tracing::warn!("could not remove a stale {f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_clasp_makes_carry_a_pid() {
        assert_eq!(segment_pid("clasp-local-1234"), Some(1234));
        assert_eq!(segment_pid("clasp-worker-77"), Some(77));
        assert_eq!(segment_pid("clasp-bench-dispatch-42-3"), Some(42));
        assert_eq!(segment_pid("clasp-bench-wc-42-0"), Some(42));
        assert_eq!(segment_pid("clasp-local-"), None);
        assert_eq!(segment_pid("clasp-local-12x"), None);
        assert_eq!(segment_pid("clasp-test-a-1-2"), None);
        assert_eq!(segment_pid("other-local-1"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-99-AbC123"), Some(99));
        // Not names clasp gives a run directory: no random part, another length, more after.
        assert_eq!(temp_run_dir_pid("clasp-run-99"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-2024"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-99-myresults"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-99-AbC12"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-99-AbC123-x"), None);
        assert_eq!(temp_run_dir_pid("clasp-run-out-x"), None);
    }

    /// A run directory is swept only if it holds nothing but its cluster file, unlocked: a
    /// locked one belongs to a live run (perhaps of another pid namespace), and anything else
    /// in it is not what clasp writes there.
    #[test]
    fn a_run_directory_with_a_locked_cluster_file_or_other_files_is_kept() {
        use rustix::fs::{FlockOperation, flock};
        let dir = tempfile::Builder::new()
            .prefix("clasp-stale-rundir-")
            .tempdir()
            .unwrap();
        assert!(holds_only_an_unlocked_cluster_file(dir.path()));
        let file = dir.path().join(RUN_DIR_FILE);
        let owner = std::fs::File::create(&file).unwrap();
        assert!(holds_only_an_unlocked_cluster_file(dir.path()));
        flock(&owner, FlockOperation::NonBlockingLockExclusive).unwrap();
        assert!(!holds_only_an_unlocked_cluster_file(dir.path()));
        drop(owner);
        assert!(holds_only_an_unlocked_cluster_file(dir.path()));
        std::fs::write(dir.path().join("results.csv"), "a,b\n").unwrap();
        assert!(!holds_only_an_unlocked_cluster_file(dir.path()));
        std::fs::remove_file(&file).unwrap();
        assert!(!holds_only_an_unlocked_cluster_file(dir.path()));
    }

    #[test]
    fn a_held_owner_lock_keeps_a_segment() {
        use rustix::fs::{FlockOperation, flock};
        let path = std::env::temp_dir().join(format!("clasp-stale-lock-{}", std::process::id()));
        let owner = std::fs::File::create(&path).unwrap();
        assert!(owner_lock_free(&path));
        flock(&owner, FlockOperation::NonBlockingLockExclusive).unwrap();
        assert!(!owner_lock_free(&path));
        drop(owner);
        assert!(owner_lock_free(&path));
        std::fs::remove_file(&path).unwrap();
    }

    /// A FIFO named as a segment is not one: the sweep leaves it, and does not wait on it (its
    /// open would, for a writer that never comes).
    #[test]
    fn a_fifo_named_as_a_segment_is_left_and_not_waited_on() {
        let path = std::env::temp_dir().join(format!("clasp-stale-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, owner_rw).unwrap();
        // On a thread: a sweep that waits on the FIFO fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let probed = path.clone();
        std::thread::spawn(move || tx.send(owner_lock_free(&probed)));
        let free = rx.recv_timeout(std::time::Duration::from_secs(10));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            free,
            Ok(false),
            "the FIFO was waited on, or taken for a segment"
        );
    }

    /// A group whose creator is gone but that still holds a process (below it, too) is in use:
    /// `clean --dry-run` listed it, and `clean` then failed on it.
    #[test]
    fn a_group_that_holds_a_process_is_not_stale() {
        let dir = tempfile::tempdir().unwrap();
        let (v1, v2) = (dir.path().join("v1"), dir.path().join("v2"));
        std::fs::create_dir_all(v1.join("child")).unwrap();
        std::fs::write(v1.join("cgroup.procs"), "").unwrap();
        std::fs::write(v1.join("child/cgroup.procs"), "").unwrap();
        assert!(!holds_processes(&v1));
        std::fs::write(v1.join("child/cgroup.procs"), "4242\n").unwrap();
        assert!(holds_processes(&v1), "a process in a child group");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        assert!(!holds_processes(&v2));
        std::fs::write(v2.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        assert!(holds_processes(&v2));
    }

    #[test]
    fn this_process_is_alive() {
        assert!(!is_dead(std::process::id() as i32));
        assert!(!is_dead(0));
    }
}
