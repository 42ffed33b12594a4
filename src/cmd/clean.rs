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

/// The default checkpoint directories that hold checkpoints of runs that are gone (a running
/// one's is in use; one a run emptied is not worth a line).
fn kept_checkpoints() -> Vec<std::path::PathBuf> {
    let Ok(root) = crate::cmd::run::recovery::default_root() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut kept: Vec<_> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let pid = name
                .to_str()
                .and_then(crate::cmd::run::recovery::run_dir_pid);
            pid.is_some_and(|p| !std::path::Path::new("/proc").join(p.to_string()).exists())
                && holds_checkpoints(&e.path())
        })
        .map(|e| e.path())
        .collect();
    kept.sort();
    kept
}

/// Whether `dir` holds a checkpoint directory, complete or not.
fn holds_checkpoints(dir: &std::path::Path) -> bool {
    clasp_dataplane::checkpoint::checkpoint_ids(dir).is_ok_and(|ids| !ids.is_empty())
}

/// `clasp clean [--dry-run]`.
pub fn run_clean(args: CleanArgs) -> anyhow::Result<()> {
    let (found, failed) = sweep(args.dry_run);
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
    for dir in kept_checkpoints() {
        let d = dir.display();
        if clasp_dataplane::checkpoint::holds_complete_checkpoint(&dir) {
            writeln!(
                out,
                "kept {d}: checkpoints of a run that is gone (--resume {d} goes on from them; \
                 remove the directory when done with it)"
            )?;
        } else {
            writeln!(
                out,
                "kept {d}: unfinished checkpoints of a run that is gone (none is complete, so \
                 none can be resumed; remove the directory)"
            )?;
        }
    }
    out.finish()?;
    if !failed.is_empty() {
        anyhow::bail!("could not remove: {}", failed.join("; "));
    }
    Ok(())
}
