//! How one worker process of a `clasp run` is started, kept after the first start so that a
//! worker the run lost can be started again under the same id, at the same address, in the
//! same cgroup (a recovery: `docs/recovery.md`), and so that the testing option
//! `--fault kill-worker=ID@PHASE` can kill one by its own pid.

use super::file::SECRET_ENV;
use super::spawn::WorkerLimits;
use crate::cgroup::CpuList;
use crate::cgroup::RunGroups;
use crate::cgroup::join::{BeforeExec, install};
use crate::lifeline;
use anyhow::Context;
use std::path::PathBuf;
use std::process::{Child, Stdio};

/// How long a started worker waits for the driver's job (s).
const SPAWNED_JOB_TIMEOUT_S: &str = "60";

/// Everything a worker of the run is started with (module docs).
pub(super) struct Launcher {
    /// The run's cluster file.
    pub(super) cluster_file: PathBuf,
    /// The transport options every process of the cluster shares.
    pub(super) net_args: Vec<String>,
    pub(super) limits: WorkerLimits,
    /// The secret, for the environment (a fresh one), or the file the workers read it from.
    pub(super) fresh_secret: Option<String>,
    pub(super) secret_file: Option<PathBuf>,
}

impl Launcher {
    /// Starts worker `id` (in its cgroup and CPU set, if any).
    pub(super) fn start(&self, id: u32, groups: Option<&RunGroups>) -> anyhow::Result<Child> {
        // From this (the main) thread: the workers die when it does (`lifeline`).
        let mut cmd = lifeline::command()?;
        cmd.arg("worker")
            .args(["--id", &id.to_string()])
            .arg("--cluster")
            .arg(&self.cluster_file)
            .args(["--job-timeout-s", SPAWNED_JOB_TIMEOUT_S])
            // One run, one job: the run waits for its workers to exit after it. (A job whose
            // driver went away does not count: the run may restart it after a recovery.)
            .args(["--max-jobs", "1"])
            .args(&self.net_args)
            .stdin(Stdio::null())
            .stdout(if self.limits.inherit_stdout {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        match (&self.fresh_secret, &self.secret_file) {
            (Some(text), _) => cmd.env(SECRET_ENV, text),
            (None, Some(path)) => cmd.arg("--secret-file").arg(path),
            (None, None) => &mut cmd,
        };
        let before = BeforeExec {
            procs: match groups {
                Some(g) => g.worker_procs(id).map_err(anyhow::Error::msg)?,
                None => Vec::new(),
            },
            cpus: self.limits.cpus.as_ref().map(CpuList::to_set),
        };
        let limited = !before.is_empty();
        install(&mut cmd, before);
        cmd.spawn().with_context(|| {
            let how = if limited {
                " (in its cgroup and CPU set)"
            } else {
                ""
            };
            format!("starting clasp worker {id}{how}")
        })
    }
}
