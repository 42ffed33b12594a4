//! `clasp clean`: removes what clasp processes that died without cleaning up left behind (named
//! segments in `/dev/shm`, `clasp-run-PID-XXXXXX` directories); every start of `run`, `local` and
//! `worker` does the same sweep quietly. Prints one line per thing removed.
//!
//! The checkpoints a run that did not succeed keeps in the default directory are the user's
//! to resume from, never removed here: they are listed, so they do not pile up unseen.

use crate::cmd::output;
use crate::stale::sweep;
use clap::Args;
use std::io::Write as _;

#[derive(Args, Debug)]
pub struct CleanArgs {
    /// Only print what would be removed.
    #[arg(long)]
    dry_run: bool,
}

/// The default checkpoint directories (`run-SECS-PID`) of runs that are gone, in name order.
fn gone_runs_dirs() -> Vec<std::path::PathBuf> {
    let Ok(root) = crate::cmd::run::recovery::default_root() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut dirs: Vec<_> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let pid = name
                .to_str()
                .and_then(crate::cmd::run::recovery::run_dir_pid);
            pid.is_some_and(|p| !std::path::Path::new("/proc").join(p.to_string()).exists())
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// Whether `dir` is empty: what a resume that succeeded leaves of the default directory it was
/// given (a run or a resume working in one holds its lock file there).
fn is_empty_dir(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// Whether `dir` holds a checkpoint directory, complete or not.
fn holds_checkpoints(dir: &std::path::Path) -> bool {
    clasp_dataplane::checkpoint::checkpoint_ids(dir).is_ok_and(|ids| !ids.is_empty())
}

/// What the checkpoints a gone run kept in `dir` are good for, if it holds any (what else a
/// user keeps there is theirs, and not worth a line).
fn kept_because(dir: &std::path::Path) -> Option<String> {
    let d = dir.display();
    if clasp_dataplane::checkpoint::holds_complete_checkpoint(dir) {
        Some(format!(
            "checkpoints of a run that is gone (--resume {d} goes on from them; remove the \
             directory when done with it)"
        ))
    } else if holds_checkpoints(dir) {
        Some(
            "unfinished checkpoints of a run that is gone (none is complete, so none can be \
             resumed; remove the directory)"
                .to_owned(),
        )
    } else {
        None
    }
}

/// `clasp clean [--dry-run]`.
pub fn run_clean(args: CleanArgs) -> anyhow::Result<()> {
    let (found, mut failed) = sweep(args.dry_run);
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut out = output::stdout();
    for s in &found {
        writeln!(out, "{verb} {s}")?;
    }
    writeln!(
        out,
        "{verb} {} stale item{} of clasp processes that are gone",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    )?;
    for dir in gone_runs_dirs() {
        let d = dir.display();
        if is_empty_dir(&dir) {
            // `remove_dir` removes only an empty directory: a resume that just took it keeps it.
            let removed = if args.dry_run {
                Ok(())
            } else {
                std::fs::remove_dir(&dir)
            };
            match removed {
                Ok(()) => writeln!(out, "{verb} the emptied checkpoint directory {d}")?,
                Err(e) => failed.push(format!("checkpoint directory {d}: {e}")),
            }
        } else if let Some(why) = kept_because(&dir) {
            writeln!(out, "kept {d}: {why}")?;
        }
    }
    out.finish()?;
    if !failed.is_empty() {
        anyhow::bail!("could not remove: {}", failed.join("; "));
    }
    Ok(())
}
