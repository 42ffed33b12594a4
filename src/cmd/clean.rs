//! `clasp clean`: removes what clasp processes that died without cleaning up left behind (named
//! segments in `/dev/shm`, `clasp-run-*` directories); every start of `run`, `local` and
//! `worker` does the same sweep quietly. Prints one line per thing removed.

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
    out.finish()?;
    if !failed.is_empty() {
        anyhow::bail!("could not remove: {}", failed.join("; "));
    }
    Ok(())
}
