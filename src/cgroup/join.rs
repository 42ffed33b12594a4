//! Joining a worker's groups and CPU set in the child process, between `fork` and `exec`, so
//! that no thread of the worker ever runs uncapped or on another CPU.
//!
//! Between `fork` and `exec` only async-signal-safe calls are allowed (the parent's other
//! threads may have held the allocator's lock when it forked), so everything is built before
//! the fork — the `cgroup.procs` paths as C strings and the CPU set — and the child makes only
//! raw `open`, `write`, `close` and `sched_setaffinity` system calls through rustix, which
//! neither allocates nor locks.

// `pre_exec` is unsafe by contract; this is the one module of the binary that needs it.
#![allow(unsafe_code)]

use rustix::fs::{Mode, OFlags};
use rustix::thread::CpuSet;
use std::ffi::CString;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// What a child does before it execs: join these groups, then take this CPU set.
pub struct BeforeExec {
    /// `cgroup.procs` of each of the worker's groups; writing "0" moves the writer.
    pub procs: Vec<CString>,
    /// The worker's affinity mask (`--cpus`).
    pub cpus: Option<CpuSet>,
}

impl BeforeExec {
    /// Whether there is anything to do.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty() && self.cpus.is_none()
    }

    /// Runs in the child: raw system calls only (see the module's doc).
    fn apply(&self) -> std::io::Result<()> {
        for p in &self.procs {
            let fd = rustix::fs::open(
                p.as_c_str(),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rustix::io::write(&fd, b"0")?;
            // `fd` closes here (a plain `close`).
        }
        if let Some(set) = &self.cpus {
            rustix::thread::sched_setaffinity(None, set)?;
        }
        Ok(())
    }
}

/// Makes `cmd`'s child apply `before` before it execs; a failure makes `spawn` fail with the
/// child's error.
///
/// The closure runs in the forked child before exec, where only async-signal-safe code may
/// run. It only reads `before` (moved in, built before the fork) and makes raw
/// open/write/close/sched_setaffinity system calls through rustix: no allocation, no lock, no
/// access to state another thread of the parent could have been changing. Its error is an
/// `io::Error` from a raw errno, which does not allocate either.
pub fn install(cmd: &mut Command, before: BeforeExec) {
    if before.is_empty() {
        return;
    }
    // SAFETY: `before.apply` is async-signal-safe (raw system calls on data built before the
    // fork, no allocation, no lock), as `pre_exec` requires; see this function's docs.
    unsafe {
        cmd.pre_exec(move || before.apply());
    }
}
