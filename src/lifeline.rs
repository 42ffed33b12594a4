//! Child processes die with their parent.
//!
//! `clasp run` starts `clasp worker` processes and `clasp local` starts a `clasp ingress`. If the
//! parent is killed outright (SIGKILL, a crash), nothing of it runs to stop them, and they would
//! wait for a driver or a worker forever, re-parented to init. So the parent passes its pid in
//! [`PARENT_PID_ENV`], and the child asks the kernel for SIGHUP ("hang-up": whoever controlled
//! it is gone) when its parent goes (`PR_SET_PDEATHSIG`), then checks that the parent is still
//! the one that started it: it may have died before the request was made. A worker ends at
//! once (after removing a cgroup it made for itself); an ingress stops its input and reports the worker it
//! lost. (Not SIGTERM: the kernel may send the death signal more than once, which a second
//! SIGTERM would take for "exit now".)
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process: the
//! parents start their children from the main thread, which lives as long as the process.
//!
//! The parent also starts each child in a process group of its own, so a terminal's Ctrl-C
//! reaches only the parent, which then stops its children in order ([`command`]).

use anyhow::Context;
use rustix::process::{Signal, getppid, set_parent_process_death_signal};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// The variable that carries the parent's pid to a child it started.
pub const PARENT_PID_ENV: &str = "CLASP_PARENT_PID";

/// `clasp` itself as a child of this process: dies with it ([`die_with_parent`] in the child),
/// in its own process group.
pub fn command() -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("locating clasp")?;
    let mut cmd = Command::new(exe);
    cmd.env(PARENT_PID_ENV, std::process::id().to_string())
        .process_group(0);
    Ok(cmd)
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
