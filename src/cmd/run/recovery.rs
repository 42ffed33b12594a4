//! `clasp run`'s checkpoints and recovery (docs/recovery.md): where the checkpoints go, what
//! the summary says about them and about every recovery, and removing them after a run that
//! succeeded.

use super::args::RunArgs;
use clasp_dataplane::checkpoint::{CheckpointStore, DirLock, FileStore, KEEP_DEFAULT, Manifest};
use clasp_dataplane::cluster::driver::{CheckpointConfig, ClusterReport};
use clasp_dataplane::paths::{entry_of, same_file};
use clasp_dataplane::source::SourceSpec;
use clasp_operators::AppSpec;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Checkpoints a run takes unless told otherwise: one a second.
pub const INTERVAL_MS_DEFAULT: u64 = 1000;

/// The run's checkpoint settings (`None`: off), its directory printed on stderr.
pub fn config(
    args: &RunArgs,
    spec: &AppSpec,
    records: u64,
) -> anyhow::Result<Option<CheckpointConfig>> {
    if let Some(dir) = &args.resume {
        let interval_ms = args.checkpoint_interval_ms.unwrap_or(INTERVAL_MS_DEFAULT);
        let interval = Duration::from_millis(interval_ms);
        if !dir.is_dir() {
            return Err(crate::cmd::usage_error(format!(
                "--resume {}: not a directory of checkpoints",
                dir.display()
            )));
        }
        let lock = take_lock(dir, "--resume")?;
        // A refused resume leaves the directory as it was: no lock file in it.
        check_resume(dir, args, spec, records).inspect_err(|_| lock.remove_file())?;
        let limit = match args.records {
            Some(n) if args.records_from_checkpoint => {
                format!(" (--records {n}, the limit of the run it goes on with)")
            }
            _ => String::new(),
        };
        note!("resuming from the checkpoints in {}{limit}", dir.display());
        return Ok(Some(CheckpointConfig {
            dir: dir.clone(),
            interval,
            keep: KEEP_DEFAULT,
            resume: true,
            lock: Some(lock),
        }));
    }
    let Some(interval_ms) = interval_ms(args)? else {
        return Ok(None);
    };
    let interval = Duration::from_millis(interval_ms);
    let mut lock = None;
    let dir = match &args.checkpoint_dir {
        Some(d) => {
            if !d.exists() {
                let _ = MADE_DIR.set(d.clone());
            }
            // Checked before any worker starts: a path that cannot hold checkpoints would
            // otherwise fail every one of them, each pausing the input for nothing.
            std::fs::create_dir_all(d).map_err(|e| {
                crate::cmd::usage_error(format!(
                    "--checkpoint-dir {}: cannot be a directory of checkpoints: {e}",
                    d.display()
                ))
            })?;
            let held = take_lock(d, "--checkpoint-dir")?;
            refuse_earlier_checkpoints(d).inspect_err(|_| held.remove_file())?;
            lock = Some(held);
            d.clone()
        }
        None => match default_dir() {
            Ok(d) => d,
            // Not asked for: the run goes on without them, and says so.
            Err(e) if args.checkpoint_interval_ms.is_none() => {
                note!(
                    "no checkpoints: {e}; a lost worker ends the run \
                     (--checkpoint-dir DIR to take them)"
                );
                return Ok(None);
            }
            Err(e) => {
                return Err(crate::cmd::usage_error(format!(
                    "--checkpoint-interval-ms {interval_ms}: {e}"
                )));
            }
        },
    };
    note!(
        "a checkpoint every {interval_ms} ms in {} (--checkpoint-interval-ms 0: none)",
        dir.display()
    );
    Ok(Some(CheckpointConfig {
        dir,
        interval,
        keep: KEEP_DEFAULT,
        resume: false,
        lock,
    }))
}

/// A `--checkpoint-dir` this run made (it did not exist): a run that fails before its first
/// checkpoint removes it again, as it does the default directory.
static MADE_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// A new run's checkpoint interval in ms, `None` for no checkpoints. Each worker writes its part
/// of a checkpoint into the directory on its own host, so workers that may be on other hosts
/// take checkpoints only into a `--checkpoint-dir` given for them: the default (under this
/// host's home) would fail every checkpoint there, and with it the run. Without one such a run
/// takes none, and says so; asking for an interval without one is refused (exit 2).
fn interval_ms(args: &RunArgs) -> anyhow::Result<Option<u64>> {
    let elsewhere = args
        .workers_elsewhere()
        .filter(|_| args.checkpoint_dir.is_none());
    let ms = match (args.checkpoint_interval_ms, elsewhere) {
        (Some(0), _) => 0,
        (Some(ms), Some(why)) => {
            return Err(crate::cmd::usage_error(format!(
                "--checkpoint-interval-ms {ms} with {why}: each worker writes its part of a \
                 checkpoint on its own host; give --checkpoint-dir DIR, a path every host shares"
            )));
        }
        (None, Some(why)) => {
            note!(
                "no checkpoints: with {why} workers may run on other hosts, and \
                 their parts of a checkpoint need a directory every host shares \
                 (--checkpoint-dir DIR); a lost worker ends the run"
            );
            0
        }
        (Some(ms), None) => ms,
        (None, None) => INTERVAL_MS_DEFAULT,
    };
    Ok((ms > 0).then_some(ms))
}

/// The run's hold on a checkpoint directory it was given (`DirLock`: one run at a time writes
/// there); another run's hold is refused (exit 2) before any worker starts. A directory made
/// for this run alone (the default) needs none.
fn take_lock(dir: &std::path::Path, flag: &str) -> anyhow::Result<Arc<DirLock>> {
    // Held by another run, or a directory that cannot take the lock file (read-only): either
    // way the directory given is unusable, before any worker starts.
    DirLock::take(dir)
        .map(Arc::new)
        .map_err(|e| crate::cmd::usage_error(format!("{flag} {}: {e}", dir.display())))
}

/// A new run's `--checkpoint-dir` must hold no checkpoint of an earlier run (one that failed
/// keeps its own): a recovery restores the newest checkpoint in the directory, and that would
/// be the other run's state, restored without an error. Refused (exit 2) naming it.
fn refuse_earlier_checkpoints(dir: &std::path::Path) -> anyhow::Result<()> {
    let store = FileStore::open(dir, KEEP_DEFAULT)?;
    let Some(newest) = store.newest_present()? else {
        return Ok(());
    };
    let what_now = if clasp_dataplane::checkpoint::holds_complete_checkpoint(dir) {
        format!(
            "go on from them with --resume {}, or remove them",
            dir.display()
        )
    } else {
        // A run killed while it wrote its first checkpoint: a resume would refuse it too.
        "none is complete, so none can be resumed: remove them".to_owned()
    };
    Err(crate::cmd::usage_error(format!(
        "--checkpoint-dir {}: holds checkpoints of an earlier run (the newest is {}): {what_now}",
        dir.display(),
        newest.display(),
    )))
}

/// A `--resume` without `--records` finishes the run it resumes: up to the record limit its
/// checkpoint holds (the limit is otherwise the default, which need not be that run's). With
/// `--records`, it must be that limit (`check_resume`). A directory that holds no checkpoint
/// is left for `check_resume` to refuse.
pub fn resumed_records(args: &mut RunArgs) -> anyhow::Result<()> {
    let Some(dir) = &args.resume else {
        return Ok(());
    };
    if args.records.is_some() || !dir.is_dir() {
        return Ok(());
    }
    let Ok(loaded) = FileStore::open(dir, KEEP_DEFAULT)?.load_latest() else {
        return Ok(());
    };
    if let Some(n) = loaded.manifest.records {
        // Said with the resume, once it is accepted (`config`).
        args.records = Some(n);
        args.records_from_checkpoint = true;
    }
    Ok(())
}

/// The first item (an operator or an edge, as [`AppSpec::shape`] writes them) where two
/// shapes differ, from each; empty where one ends first.
fn first_difference<'a>(a: &'a str, b: &'a str) -> (&'a str, &'a str) {
    let at = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    // Both agree up to `at`, so it is a character boundary of each; where one of them has a
    // separator there (one list goes on, the other ends), the items after it differ.
    let separator = |s: &str| s[at..].starts_with([',', ';']);
    let start = match separator(a) || separator(b) {
        true => at + 1,
        false => a[..at].rfind([',', ';']).map_or(0, |i| i + 1),
    };
    let item = |s: &'a str| {
        let rest = s.get(start..).unwrap_or_default();
        rest[..rest.find([',', ';']).unwrap_or(rest.len())].trim()
    };
    (item(a), item(b))
}

/// Why no run could resume from checkpoints of a run reading `source`, if none could: a file
/// that is a pipe or a device cannot be read again up to the checkpoint's byte to skip it. (A
/// regular file that is gone or shorter now may be put back: a resume checks it then.)
fn unresumable_source(source: &SourceSpec) -> Option<String> {
    let (SourceSpec::File(path) | SourceSpec::LenPrefix(path)) = source else {
        return None;
    };
    let stream = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    stream.then(|| {
        format!(
            "--source {source} is a pipe or a device: what it held before the checkpoint cannot \
             be read again to skip it"
        )
    })
}

/// [`check_resume`]'s part about the source: the checkpoint read the file `args` names (or
/// one of its directory), which still holds the bytes it read; why not, otherwise.
fn check_resume_source(m: &Manifest, args: &RunArgs) -> Result<(), String> {
    // The file the checkpoint read: the source's file, or one in the source's directory.
    // However each is spelled: a resume may name `./in.txt` where the run named `in.txt`.
    let read_by_source = |path: &str| match &args.source {
        SourceSpec::File(p) | SourceSpec::LenPrefix(p) => same_file(path.as_ref(), p),
        SourceSpec::Dir(d) => entry_of(path.as_ref(), d),
        _ => false,
    };
    let file_source = matches!(
        args.source,
        SourceSpec::File(_) | SourceSpec::LenPrefix(_) | SourceSpec::Dir(_)
    );
    match (&m.source.file, file_source) {
        (Some(pos), _) if !read_by_source(&pos.path) => {
            return Err(format!(
                "its checkpoint read {}, not --source {}",
                pos.path, args.source
            ));
        }
        (None, true) if m.admitted > 0 => {
            return Err(format!(
                "its checkpoint did not read a file, unlike --source {}",
                args.source
            ));
        }
        _ => {}
    }
    // The run goes on from the checkpoint's byte of the file it read.
    m.source_changed().map_or(Ok(()), Err)
}

/// Before any worker starts: the newest complete checkpoint in `dir` is of this run — its app,
/// seed, file source (if any) and no more than its `records` — or the resume is refused (exit
/// 2) naming what differs (a restore of another run's state would not fail: it would be
/// wrong). A checkpoint does not say which stream or generator fed it: those are not told
/// apart.
fn check_resume(
    dir: &std::path::Path,
    args: &RunArgs,
    spec: &AppSpec,
    records: u64,
) -> anyhow::Result<()> {
    let refuse = |why: String| {
        Err(crate::cmd::usage_error(format!(
            "--resume {}: {why}",
            dir.display()
        )))
    };
    if let Some(why) = unresumable_source(&args.source) {
        return refuse(why);
    }
    let store = FileStore::open(dir, KEEP_DEFAULT)?;
    let m = match store.load_latest() {
        Ok(loaded) => loaded.manifest,
        Err(e) => return refuse(e.to_string()),
    };
    if m.app != spec.name {
        return refuse(format!(
            "its checkpoint is of app {}, not {}",
            m.app, spec.name
        ));
    }
    let ours = spec.shape();
    if let Some(theirs) = m.app_shape.as_ref().filter(|&s| *s != ours) {
        let (here, there) = first_difference(&ours, theirs);
        return refuse(format!(
            "its checkpoint is of another app named {} (its operators, their kinds and \
             parameters, or its edges differ): this one has `{here}` where the checkpoint's \
             has `{there}`",
            m.app
        ));
    }
    let n = spec.operators.len();
    if m.operators.len() != n || m.routing.len() != n {
        return refuse(format!(
            "its checkpoint has {} operators and {} routing rows; app {} has {n} operators",
            m.operators.len(),
            m.routing.len(),
            spec.name
        ));
    }
    if m.seed != args.seed {
        return refuse(format!(
            "its checkpoint is of --seed {}, not {}",
            m.seed, args.seed
        ));
    }
    if let Err(why) = check_resume_source(&m, args) {
        return refuse(why);
    }
    if let (Some(given), Some(limit)) = (args.records, m.records)
        && given != limit
    {
        return refuse(format!(
            "its run admits up to {limit} records (--records), not {given}: leave --records out \
             to finish it"
        ));
    }
    if records < m.admitted {
        return refuse(format!(
            "its checkpoint admitted {} records already, more than this run's {records} \
             (--records)",
            m.admitted
        ));
    }
    Ok(())
}

/// `$XDG_STATE_HOME/clasp/checkpoints/RUN`, else `~/.local/state/clasp/checkpoints/RUN`; RUN
/// is the start time and this process's id, so runs never share one. Made and removed again
/// here, before any worker starts: a home that cannot hold it (a service account's, a
/// container's) would otherwise fail every checkpoint of the run, and the run with them.
fn default_dir() -> anyhow::Result<PathBuf> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dir = default_root()?.join(format!("{RUN_DIR_PREFIX}{secs}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::remove_dir(&dir))
        .map_err(|e| {
            anyhow::anyhow!(
                "the default checkpoint directory {} cannot be made: {e}",
                dir.display()
            )
        })?;
    Ok(dir)
}

/// How a run's default checkpoint directory is named: `run-SECS-PID`.
const RUN_DIR_PREFIX: &str = "run-";

/// The pid of the run a default checkpoint directory named `name` belongs to.
pub fn run_dir_pid(name: &str) -> Option<u32> {
    name.strip_prefix(RUN_DIR_PREFIX)?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

/// Where runs keep their checkpoints by default, one `run-SECS-PID` directory each:
/// `$XDG_STATE_HOME/clasp/checkpoints`, else `~/.local/state/clasp/checkpoints`.
pub fn default_root() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "neither XDG_STATE_HOME nor HOME is set for a default directory"
                    )
                })?;
            PathBuf::from(home).join(".local/state")
        }
    };
    Ok(base.join("clasp/checkpoints"))
}

/// Removes what failed checkpoints left in the run's directory (no manifest: nothing a
/// resume could use), so that neither the advice to resume nor a new run's refusal of a
/// directory with checkpoints is about them.
fn remove_unfinished(ck: &CheckpointConfig) {
    if !ck.dir.exists() {
        return;
    }
    if let Err(e) = FileStore::open(&ck.dir, KEEP_DEFAULT).and_then(|s| s.remove_unfinished()) {
        note!("{e}");
    }
}

/// Why no one resumes a run another clasp process started (`clasp experiment`), if one did.
fn started_by_another_clasp() -> Option<String> {
    let parent = std::env::var(crate::lifeline::PARENT_PID_ENV).ok()?;
    Some(format!(
        "the clasp process that started this run (pid {parent}) does not resume its runs"
    ))
}

/// Whether the run's directory holds a checkpoint. Opening the store makes its directory: only
/// a directory the run made is looked in.
fn any_checkpoint(ck: &CheckpointConfig) -> bool {
    ck.dir.exists()
        && matches!(
            FileStore::open(&ck.dir, KEEP_DEFAULT).and_then(|s| s.newest_present()),
            Ok(Some(_))
        )
}

/// Says where a run that did not succeed keeps its checkpoints, if it took any; whether it
/// took any.
fn say_kept(args: &RunArgs, cfg: Option<&CheckpointConfig>) -> bool {
    let Some(ck) = cfg.filter(|ck| any_checkpoint(ck)) else {
        return false;
    };
    if let Some(why) = unresumable_source(&args.source) {
        // Kept as asked (`--keep-checkpoints`), with no advice a resume would refuse.
        note!(
            "its checkpoints stay in {} (--keep-checkpoints), but no run can resume from \
             them: {why}",
            ck.dir.display()
        );
        return true;
    }
    // `--resume` and `--checkpoint-dir` do not go together: the one replaces the other.
    let how = if args.checkpoint_dir.is_some() {
        " in place of --checkpoint-dir"
    } else {
        ""
    };
    note!(
        "its checkpoints stay in {0}: the same command with --resume {0}{how} goes \
         on from the newest; remove the directory when done with it",
        ck.dir.display()
    );
    true
}

/// After a run that did not succeed: says where its checkpoints stay, if it took any (and
/// removes them, saying why, where no resume could go on from them). One that
/// failed before its first checkpoint leaves the directory as it found it: no lock file, and
/// no directory if it made it (the default one, or a `--checkpoint-dir` that did not exist).
pub fn failed(args: &RunArgs, cfg: Option<&CheckpointConfig>) {
    let Some(ck) = cfg else { return };
    remove_unfinished(ck);
    // A run another clasp process started (an experiment's measurement) is not resumed.
    let unresumable = unresumable_source(&args.source)
        .or_else(started_by_another_clasp)
        .filter(|_| !args.keep_checkpoints);
    if let Some(why) = unresumable.filter(|_| any_checkpoint(ck)) {
        // Kept, they would be advised for a resume that refuses them.
        remove_checkpoints(args, ck, &format!("no run can resume from them: {why}"));
        return;
    }
    if say_kept(args, cfg) || args.resume.is_some() {
        return;
    }
    if let Some(lock) = &ck.lock {
        lock.remove_file();
    }
    if args.checkpoint_dir.is_none() || MADE_DIR.get() == Some(&ck.dir) {
        // Fails, as it should, on a directory that holds anything.
        let _ = std::fs::remove_dir(&ck.dir);
    }
}

/// After a run that succeeded: its checkpoints are removed unless asked to keep them, and the
/// directory too if nothing else is in it — but a directory given to `--resume` is the user's,
/// and stays. A run stopped by a signal, or one that ended with faults, did not succeed, even
/// though it reports what it admitted: its checkpoints stay, for `--resume`, and it says where.
pub fn finish(args: &RunArgs, cfg: Option<&CheckpointConfig>, result: &anyhow::Result<()>) {
    let Some(ck) = cfg else { return };
    // A reader of stdout that went away does not make the run fail (`main`).
    let succeeded = result
        .as_ref()
        .map_or_else(crate::cmd::output::is_closed_stdout, |()| true);
    if !ck.dir.exists() {
        return;
    }
    if !succeeded || crate::signals::interrupted().is_some() {
        failed(args, Some(ck));
        return;
    }
    if args.keep_checkpoints {
        remove_unfinished(ck);
        return;
    }
    remove_checkpoints(args, ck, "the run succeeded; --keep-checkpoints keeps them");
}

/// Removes the run's checkpoints (and its directory, where the run made it and nothing else
/// is in it), saying so and `why`.
fn remove_checkpoints(args: &RunArgs, ck: &CheckpointConfig, why: &str) {
    // Only the checkpoints: the directory may be the user's, with other files in it.
    let removed =
        clasp_dataplane::checkpoint::FileStore::open(&ck.dir, KEEP_DEFAULT).and_then(|store| {
            if args.resume.is_some() {
                store.remove_checkpoints()
            } else {
                store.remove_all()
            }
        });
    match removed {
        // The summary named the directory: say they are gone, not found missing later.
        Ok(()) => note!("removed its checkpoints in {} ({why})", ck.dir.display()),
        Err(e) => tracing::warn!("removing the checkpoints in {}: {e}", ck.dir.display()),
    }
}

/// The summary's lines about checkpoints and recoveries.
pub fn lines(r: &ClusterReport) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = &r.checkpoints {
        out.push(format!(
            "checkpoints: {} taken ({} failed), pause mean {:.1} ms max {:.1} ms, last {} \
             ({} bytes) in {}",
            c.taken,
            c.failed,
            c.pause_ms_mean,
            c.pause_ms_max,
            c.last_id.map_or_else(|| "-".into(), |i| i.to_string()),
            c.bytes_last,
            c.dir
        ));
    }
    if let Some(id) = r.resumed_from {
        out.push(format!(
            "resumed from checkpoint {id}: {} records in, the run's clock at {:.2} s",
            r.resumed_admitted, r.resumed_run_s
        ));
    }
    for v in &r.recoveries {
        out.push(format!(
            "recovery: lost worker(s) {:?} during {}; restored {}; {} records replayed; detect \
             {} restore {:.0} ms replay {:.0} ms ({})",
            v.workers_lost,
            v.phase,
            match (v.checkpoint_id, v.checkpoint_age_ms) {
                (Some(i), Some(age_ms)) => format!("checkpoint {i} (age {age_ms:.0} ms)"),
                (Some(i), None) => format!("checkpoint {i}"),
                (None, _) => "the start of the run".into(),
            },
            v.records_replayed,
            v.detect_ms
                .map_or_else(|| "-".into(), |d| format!("{d:.0} ms")),
            v.restore_ms,
            v.replay_ms,
            v.reason
        ));
    }
    out
}

/// The summary's JSON keys about checkpoints and recoveries.
pub fn json(r: &ClusterReport) -> anyhow::Result<Vec<(String, serde_json::Value)>> {
    Ok(vec![
        ("checkpoints".into(), serde_json::to_value(&r.checkpoints)?),
        ("recoveries".into(), serde_json::to_value(&r.recoveries)?),
        ("resumed_from".into(), serde_json::to_value(r.resumed_from)?),
        ("resumed_admitted".into(), r.resumed_admitted.into()),
        ("resumed_run_s".into(), r.resumed_run_s.into()),
    ])
}

#[cfg(test)]
mod tests {
    use super::first_difference;

    #[test]
    fn the_first_difference_of_two_shapes_is_an_operator_or_an_edge_of_each() {
        let a = "operators s (split), c (count); edges s -> c";
        let b = "operators s (split), c (count), d (count); edges s -> d, s -> c";
        assert_eq!(first_difference(b, a), ("d (count)", "edges s -> c"));
        let w = "operators s (split), c (count { w = 2 }); edges s -> c";
        assert_eq!(first_difference(w, a), ("c (count { w = 2 })", "c (count)"));
        assert_eq!(first_difference("é, x", "é, y"), ("x", "y"));
        assert_eq!(first_difference("a", "a, b"), ("", "b"));
    }
}
