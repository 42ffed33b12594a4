//! `--source` as `clasp run` and `clasp local` take it: its help, how many records a run
//! admits by default when it reads a source, and how a run's sources are printed.

use clasp_dataplane::paths::same_file;
use clasp_dataplane::source::{SourceReport, SourceSpec};

/// `--source`'s one-line help (`-h`).
pub const SOURCE_SHORT_HELP: &str = "Where the input records come from: file:PATH, \
    lenprefix:PATH, dir:PATH, stdin:, tcp:ADDR or gen: (the default); records over 128 KiB are \
    skipped and counted (--help says more)";

/// `--source`'s help (`--help`).
pub const SOURCE_HELP: &str = "Where the input records come from: file:PATH (one record per \
    line, the newline stripped, and a carriage return before it), lenprefix:PATH (each record a u32 little-endian byte count \
    and that many bytes), dir:PATH (every regular file in it, in name order, one record per \
    line), stdin: (one record per line), tcp:ADDR (listen on ADDR, e.g. 127.0.0.1:9000; \
    connections are read one after another, one record per line, and the input ends when one \
    closes and no other is waiting; when the cluster does not keep up the source stops \
    reading, so a fast client is slowed, never dropped), or gen: (the app's seeded generator, \
    the default). A record over 128 KiB (a line, or a length prefix above it) and a length \
    prefix cut short at the end of a file are skipped and counted as malformed. The app's \
    first operator keys each record. Without --records, every record of the source is read.";

/// The records a run admits: `--records` if given; else, for a source, all of them; for the
/// generator, `generated`.
pub fn records(source: &SourceSpec, given: Option<u64>, generated: u64) -> u64 {
    match given {
        Some(n) => n,
        None if source.is_generator() => generated,
        None => u64::MAX,
    }
}

/// The `"sources"` key of a run's JSON.
pub fn json(sources: &[SourceReport]) -> anyhow::Result<(String, serde_json::Value)> {
    Ok(("sources".into(), serde_json::to_value(sources)?))
}

/// One line of text per source read (none for the generator, whose offset is the records).
pub fn lines(sources: &[SourceReport]) -> Vec<String> {
    let generator = SourceSpec::Generator.to_string();
    sources
        .iter()
        .filter(|s| s.source != generator)
        .map(|s| {
            let at = s.offset.file.as_ref().map_or(String::new(), |f| {
                format!(
                    ", last one ending at byte {} of file {} ({})",
                    f.byte_offset, f.file_index, f.path
                )
            });
            let bad: Vec<String> = s
                .malformed
                .iter()
                .map(|(reason, n)| format!("{n} × {reason}"))
                .collect();
            let bad = if bad.is_empty() {
                String::new()
            } else {
                format!("; malformed: {}", bad.join(", "))
            };
            // `stdin:` and `gen:` end in a colon already.
            let name = s.source.strip_suffix(':').unwrap_or(&s.source);
            format!("source {name}: {} records{at}{bad}", s.offset.records)
        })
        .collect()
}

/// Refuses, as a usage error (exit 2), an `--events` file that would write over the
/// `--source`'s input, over one of `read` (the other files the run read, each with the option
/// that named it), or share a file of `sink`, the run's `--sink` (the events file is emptied
/// when the run starts, and two writers of one file interleave their lines): its `PATH`, which
/// the workers share on this host, or with `sink_per_worker` (a cluster file's workers, each
/// writing `PATH.w<ID>` on its own host, which may be this one) any `PATH.w<ID>`.
pub fn check_events(
    events: &std::path::Path,
    source: &SourceSpec,
    read: &[(&str, &std::path::Path)],
    sink: Option<&clasp_dataplane::sink::SinkTarget>,
    sink_per_worker: bool,
) -> anyhow::Result<()> {
    use clasp_dataplane::sink::SinkTarget;
    let as_sink = SinkTarget::File(events.to_owned());
    let read_file = read.iter().find(|(_, path)| same_file(events, path));
    let clash = if as_sink.overwrites(source) {
        Some(format!("would write over the input of --source {source}"))
    } else if let Some((option, path)) = read_file {
        Some(format!(
            "would write over the file of {option} {}",
            path.display()
        ))
    } else if let Some(target @ SinkTarget::File(path)) = sink
        && !sink_per_worker
        && same_file(events, path)
    {
        Some(format!("is the file of --sink {target}"))
    } else if let Some(target @ SinkTarget::File(path)) = sink
        && sink_per_worker
        && is_worker_file(events, path)
    {
        Some(format!(
            "is a worker's file of --sink {target} (each writes {}.w<ID> on its host)",
            path.display()
        ))
    } else {
        None
    };
    match clash {
        Some(why) => Err(crate::cmd::usage_error(format!(
            "--events {} {why}: give the events another path",
            events.display()
        ))),
        None => Ok(()),
    }
}

/// Whether `path` is the file a cluster file's worker writes for a `file:SINK` sink on its
/// own host (which may be this one): `SINK.w<ID>` as the worker spells it, for the id `path`'s
/// name ends in, under any name (a link, a hard link).
fn is_worker_file(path: &std::path::Path, sink: &std::path::Path) -> bool {
    let id = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit_once(".w"))
        .and_then(|(_, id)| id.parse::<u32>().ok());
    id.is_some_and(|id| {
        let written = clasp_dataplane::sink::SinkTarget::file_path(sink, Some(id));
        same_file(path, &written)
    })
}

/// Refuses, as usage errors (exit 2), a `--sink` that would write over the `--source`'s own
/// input (a file sink opened for the run is emptied before the source reads it) and, where the
/// sink is a file on this host (`here`), one whose directory does not exist — before anything
/// starts, as a missing source file is refused.
pub fn check_sink(
    source: &SourceSpec,
    sink: Option<&clasp_dataplane::sink::SinkTarget>,
    here: bool,
) -> anyhow::Result<()> {
    use clasp_dataplane::sink::SinkTarget;
    match sink {
        Some(sink) if sink.overwrites(source) => Err(crate::cmd::usage_error(format!(
            "--sink {sink} would write over the input of --source {source}: give the sink \
             another path"
        ))),
        Some(target @ SinkTarget::File(path))
            if let Some(why) = clasp_dataplane::sink::unusable_file(path) =>
        {
            Err(crate::cmd::usage_error(format!(
                "--sink {target}: {} {why}",
                path.display()
            )))
        }
        Some(target @ SinkTarget::File(path)) if here => {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if dir.is_dir() {
                Ok(())
            } else {
                Err(crate::cmd::usage_error(format!(
                    "--sink {target}: the directory {} does not exist",
                    dir.display()
                )))
            }
        }
        _ => Ok(()),
    }
}
