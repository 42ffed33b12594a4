//! Child processes die with their parent.
//!
//! `clasp run` starts `clasp worker` processes, `clasp local` starts a `clasp ingress`, and
//! `clasp experiment` starts `clasp run`s. If the parent is killed outright (SIGKILL, a crash,
//! or a signal it does not catch), nothing of it runs to stop them, and they would go on or
//! wait for a driver or a worker forever, re-parented to init. So the parent passes its pid in
//! [`PARENT_PID_ENV`], and the child asks the kernel for SIGHUP ("hang-up": whoever controlled
//! it is gone) when its parent goes (`PR_SET_PDEATHSIG`), then checks that the parent is still
//! the one that started it: it may have died before the request was made. A worker ends at
//! once (after removing a cgroup it made for itself); an ingress stops its input and reports
//! the worker it lost; a run drains and stops as on a hang-up. (Not SIGTERM: the kernel may send the death signal more than once, which a second
//! SIGTERM would take for "exit now".)
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process: the
//! parents start their children from the main thread, which lives as long as the process.
//!
//! The parent also starts each child in a process group of its own, so a terminal's Ctrl-C
//! reaches only the parent, which then stops its children in order ([`command`]).
//!
//! Children start from this executable as it was when the process first started one
//! ([`this_exe`]): its file is kept open and run through `/proc/self/fd`, so replacing or
//! removing the binary while a run goes on (an upgrade) does not stop a recovery from starting
//! its workers again — `current_exe` would then name a deleted file.

use anyhow::Context;
use rustix::process::{Signal, getppid, set_parent_process_death_signal};
use std::os::fd::AsRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The variable that carries the parent's pid to a child it started.
pub const PARENT_PID_ENV: &str = "CLASP_PARENT_PID";

/// `clasp` itself as a child of this process: dies with it ([`die_with_parent`] in the child),
/// in its own process group.
pub fn command() -> anyhow::Result<Command> {
    let mut cmd = this_exe()?;
    cmd.env(PARENT_PID_ENV, std::process::id().to_string())
        .process_group(0);
    Ok(cmd)
}

/// This executable, opened the first time it is asked for, and its path then.
static EXE: OnceLock<Result<(std::fs::File, PathBuf), String>> = OnceLock::new();

/// A command that runs this executable (module docs): the file opened when this process first
/// started a child, run through `/proc/self/fd/N` (the child inherits the descriptor until it
/// execs), its `argv[0]` the path it had.
pub fn this_exe() -> anyhow::Result<Command> {
    let opened = EXE.get_or_init(|| {
        let path = std::env::current_exe().map_err(|e| format!("locating clasp: {e}"))?;
        // Removed before the first child: the link reads `PATH (deleted)`, not a name.
        let path = match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
            Some(p) => PathBuf::from(p),
            None => path,
        };
        // The kernel's link to the running image: it opens even once the file was removed.
        let file = std::fs::File::open("/proc/self/exe")
            .map_err(|e| format!("opening /proc/self/exe ({}): {e}", path.display()))?;
        Ok((file, path))
    });
    let (file, path) = opened.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut cmd = Command::new(format!("/proc/self/fd/{}", file.as_raw_fd()));
    cmd.arg0(path);
    Ok(cmd)
}

/// Bytes of a thread's name the kernel keeps (`TASK_COMM_LEN` less its NUL).
const PROCESS_NAME_BYTES_MAX: usize = 15;

/// Names this process after the program it was started as (`clasp`, or a user's binary):
/// a child run through `/proc/self/fd/N` ([`this_exe`]) is otherwise named `N` by the kernel,
/// in `ps`, `top`, `pgrep -x clasp` and `perf`.
pub fn name_this_process() {
    let name = crate::cli::program_name();
    // A name with a NUL in it is left as it is.
    let short: Vec<u8> = name.bytes().take(PROCESS_NAME_BYTES_MAX).collect();
    if let Ok(c) = std::ffi::CString::new(short) {
        let _ = rustix::thread::set_name(&c);
    }
}

/// In a child started by [`command`]: SIGHUP when the parent exits; an error if it already
/// has. Does nothing in a process started otherwise.
pub fn die_with_parent() -> anyhow::Result<()> {
    let Some(parent) = std::env::var(PARENT_PID_ENV).ok() else {
        return Ok(());
    };
    let parent: i32 = parent
        .parse()
        .with_context(|| format!("{PARENT_PID_ENV}={parent:?} is not a pid"))?;
    set_parent_process_death_signal(Some(Signal::HUP))
        .context("asking for a signal when the parent exits (PR_SET_PDEATHSIG)")?;
    if getppid().map(|p| p.as_raw_nonzero().get()) != Some(parent) {
        anyhow::bail!("the clasp process that started this one (pid {parent}) is gone");
    }
    Ok(())
}
