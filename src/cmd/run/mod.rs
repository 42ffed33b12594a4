//! `clasp run` and `clasp planner`: an app on a cluster of `clasp worker` processes.
//!
//! - [`args`]: the options both commands take;
//! - [`config`]: the same options from a run file (`--config`, `--print-config`);
//! - [`caps`]: whether a live run caps its workers, and the peak rate that goes with it;
//! - [`interrupt`]: SIGINT/SIGTERM stop the admission and drain;
//! - [`setup`]: options → started (or found) workers → the driver's settings, and the driver
//!   run that stops the started workers on failure;
//! - [`live`]: the live planner (the default): a rate pattern, a scaling policy and live
//!   migrations (docs/planner.md);
//! - [`static_run`]: `--static`, fixed workers and placement (docs/cluster.md);
//! - [`view`]: a finished run as the run view `clasp local` prints too;
//! - [`out`]: a live run's record as files, a text summary and a progress line;
//! - [`recovery`]: where checkpoints go, what the summary says of them and of recoveries.
//!
//! Cluster setup that is not about these options (the cluster file, the secret, spawning
//! workers) lives in `cmd::cluster`, which knows nothing of this module.

/// A note on stderr from this command, prefixed with who says it ([`who`]).
macro_rules! note {
    ($($arg:tt)*) => {
        say!("{}: {}", $crate::cmd::run::who(), format_args!($($arg)*))
    };
}

pub mod args;
pub mod caps;
pub mod config;
pub mod interrupt;
pub mod live;
pub mod out;
pub mod recovery;
pub mod setup;
pub mod static_run;
pub mod view;

pub use args::RunArgs;

/// Which of the two commands this process runs, for [`who`].
static COMMAND: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Who this process's notes on stderr come from: `clasp run` or `clasp planner` (a user's
/// binary's name in place of `clasp`).
pub fn who() -> String {
    let command = COMMAND.get().copied().unwrap_or("run");
    format!("{} {command}", crate::cli::program_name())
}

use crate::cmd::usage_error;

/// `clasp run`: live (the planner) unless `--static`.
pub fn run(mut args: RunArgs) -> anyhow::Result<()> {
    start(&args)?;
    recovery::resumed_records(&mut args)?;
    if args.static_ {
        static_run::run_static(args)
    } else {
        live::run_live(args)
    }
}

/// `clasp planner`: the live planner over the workers of a cluster file.
pub fn run_planner(args: RunArgs) -> anyhow::Result<()> {
    let _ = COMMAND.set("planner");
    if args.cluster.is_none() || args.static_ {
        return Err(usage_error(
            "clasp planner drives running workers: give --cluster FILE (and no --static); \
             `clasp run` starts local workers itself",
        ));
    }
    let starts_workers = [
        ("--workers", args.workers.is_some()),
        ("--max-workers", args.max_workers.is_some()),
        ("--start-workers", args.start_workers.is_some()),
        ("--worker-cpu", args.worker_cpu.is_some()),
        ("--uncapped", args.uncapped),
        ("--cpus", args.cpus.is_some()),
    ];
    if let Some((flag, _)) = starts_workers.iter().find(|(_, given)| *given) {
        return Err(usage_error(format!(
            "{flag} is about the workers `clasp run` starts; clasp planner drives the running \
             workers of --cluster FILE (start each with `clasp worker`, and its options there)"
        )));
    }
    start(&args)?;
    let mut args = args;
    recovery::resumed_records(&mut args)?;
    live::run_live(args)
}

/// What every cluster run does first: the SIGINT/SIGTERM handler (with the drain timeout) and
/// the sweep of what dead clasp processes left.
fn start(args: &RunArgs) -> anyhow::Result<()> {
    crate::signals::install(
        "run",
        Some(std::time::Duration::from_secs(args.drain_timeout_s)),
        crate::signals::Hangup::Stop,
    )?;
    // A run an experiment started stops (drained, cleaned up) when the experiment is gone.
    crate::lifeline::die_with_parent()?;
    crate::stale::sweep_at_start();
    Ok(())
}
