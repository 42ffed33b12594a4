//! `clasp run --out DIR`: the run's record as files a user opens without clasp — the JSON
//! summary, one CSV row per interval and per migration (RFC 4180), the decisions as text, and
//! the plots ([`super::plot`]). Each file is written atomically (a temporary name, synced, then
//! renamed), and [`prepare_dir`] checks the directory before a run starts, so a run never ends
//! with its output lost to a directory it could not write.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{IntervalRow, MigrationRow, RunRecord, WorkerRow};

/// The columns of `intervals.csv`, in [`IntervalRow`]'s field order.
const INTERVAL_HEADER: [&str; 13] = [
    "t_s",
    "input_per_s",
    "throughput_per_s",
    "workers",
    "latency_p50_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "alpha_us",
    "beta_us",
    "gamma_us",
    "w_bar_us",
    "migrating",
    "admission_delay_p99_ms",
];

/// The columns of `migrations.csv`, in [`MigrationRow`]'s field order.
const MIGRATION_HEADER: [&str; 15] = [
    "epoch",
    "t_s",
    "workers_before",
    "workers_after",
    "key_groups_moved",
    "narrowing_ms",
    "planner_ms",
    "worker_pause_ms",
    "marker_wait_ms",
    "exported",
    "forwarded",
    "held",
    "gated",
    "admitted_during",
    "reason",
];

/// The columns of `workers.csv`, in [`WorkerRow`]'s field order.
const WORKER_HEADER: [&str; 17] = [
    "t_s",
    "worker",
    "cpu_us_per_s",
    "exec_us_per_s",
    "local_per_s",
    "remote_per_s",
    "destinations",
    "busy_us_per_s",
    "sleeps_per_s",
    "remote_received_per_s",
    "roots_per_s",
    "throttled_periods",
    "batches_per_s",
    "sleep_cpu_us_per_s",
    "exec_cpu_us_per_s",
    "exec_sleep_cpu_us_per_s",
    "exec_sleeps_per_s",
];

fn worker_fields(r: &WorkerRow) -> [String; 17] {
    [
        r.t_s.to_string(),
        r.worker.to_string(),
        r.cpu_us_per_s.map(|c| c.to_string()).unwrap_or_default(),
        r.exec_us_per_s.to_string(),
        r.local_per_s.to_string(),
        r.remote_per_s.to_string(),
        r.destinations.to_string(),
        r.busy_us_per_s.to_string(),
        r.sleeps_per_s.to_string(),
        r.remote_received_per_s.to_string(),
        r.roots_per_s.to_string(),
        r.throttled_periods
            .map(|n| n.to_string())
            .unwrap_or_default(),
        r.batches_per_s.to_string(),
        r.sleep_cpu_us_per_s.to_string(),
        r.exec_cpu_us_per_s
            .map(|c| c.to_string())
            .unwrap_or_default(),
        r.exec_sleep_cpu_us_per_s.to_string(),
        r.exec_sleeps_per_s.to_string(),
    ]
}

fn interval_fields(r: &IntervalRow) -> [String; 13] {
    [
        r.t_s.to_string(),
        r.input_per_s.to_string(),
        r.throughput_per_s.to_string(),
        r.workers.to_string(),
        r.latency_p50_ms.to_string(),
        r.latency_p95_ms.to_string(),
        r.latency_p99_ms.to_string(),
        r.alpha_us.to_string(),
        r.beta_us.to_string(),
        r.gamma_us.to_string(),
        r.w_bar_us.to_string(),
        r.migrating.to_string(),
        r.admission_delay_p99_ms.to_string(),
    ]
}

fn migration_fields(m: &MigrationRow) -> [String; 15] {
    [
        m.epoch.to_string(),
        m.t_s.to_string(),
        m.workers_before.to_string(),
        m.workers_after.to_string(),
        m.key_groups_moved.to_string(),
        m.narrowing_ms.to_string(),
        m.planner_ms.to_string(),
        m.worker_pause_ms.to_string(),
        m.marker_wait_ms.to_string(),
        m.exported.to_string(),
        m.forwarded.to_string(),
        m.held.to_string(),
        m.gated.to_string(),
        m.admitted_during.to_string(),
        m.reason.clone(),
    ]
}

/// RFC 4180 quoting: only fields with a comma, quote or line break are quoted.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A CSV file's text: the header, then one line per row, fields quoted where they must be.
pub fn csv<R: AsRef<[String]>>(header: &[&str], rows: impl Iterator<Item = R>) -> String {
    let mut out = header.join(",");
    out.push('\n');
    for row in rows {
        let fields: Vec<String> = row.as_ref().iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// Writes `contents` to `path` atomically: into a temporary file in the same directory, synced,
/// then renamed over `path`, so a reader (or a crash) sees the old file or the whole new one,
/// never a torn one. The temporary file is removed when any step fails.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}: {e}", path.display())
    })
}

/// Makes sure `--out DIR` can take the run's files before the run starts: creates DIR (and
/// parents) and writes, syncs and removes a probe file in it. An error names the directory.
pub fn prepare_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("creating output directory {}: {e}", dir.display()))?;
    let probe = dir.join(format!(".clasp-probe-{}", std::process::id()));
    write_atomic(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe).map_err(|e| e.to_string()))
        .map_err(|e| format!("output directory {} is not writable: {e}", dir.display()))
}

/// [`prepare_dir`] for a run that makes `--out DIR` only when it writes its files at the end:
/// the directories it had to make for the check are removed again, so a run that fails
/// before then (a bad flag checked later, a cluster that does not start) leaves none behind.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
    let checked = prepare_dir(dir);
    // Deepest first; each was empty but for the probe, already removed.
    for made in missing {
        let _ = std::fs::remove_dir(made);
    }
    checked
}

/// Writes DIR/summary.json (pretty), DIR/intervals.csv (header + one row per interval, all
/// [`IntervalRow`] fields), DIR/migrations.csv, DIR/decisions.txt, DIR/workers.csv (every
/// worker per interval: the estimator's inputs), and three SVG plots:
/// DIR/rate.svg (input rate and throughput per s on the left axis, active workers as a step line
/// on a secondary axis, migrations marked), DIR/latency.svg (p50/p95/p99 ms over time),
/// DIR/estimates.svg (α, β, γ, W̄ µs over time). Creates DIR (and parents); each file is
/// written atomically. Returns the files written, in that order; an error names the path that
/// failed.
pub fn write_out(dir: &Path, rec: &RunRecord) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("creating output directory {}: {e}", dir.display()))?;
    let mut summary = serde_json::to_string_pretty(&rec.summary)
        .map_err(|e| format!("serialising {}: {e}", dir.join("summary.json").display()))?;
    summary.push('\n');
    let mut decisions = String::new();
    for d in &rec.decisions {
        let _ = writeln!(decisions, "t={:.3}s {}", d.t_s, d.line);
    }
    let mut files = vec![
        ("summary.json", summary),
        (
            "intervals.csv",
            csv(&INTERVAL_HEADER, rec.intervals.iter().map(interval_fields)),
        ),
        (
            "migrations.csv",
            csv(
                &MIGRATION_HEADER,
                rec.migrations.iter().map(migration_fields),
            ),
        ),
        ("decisions.txt", decisions),
        (
            "workers.csv",
            csv(&WORKER_HEADER, rec.workers.iter().map(worker_fields)),
        ),
    ];
    files.extend(super::plot::render_plots(rec)?);
    let mut written = Vec::new();
    for (name, contents) in files {
        let path = dir.join(name);
        write_atomic(&path, contents.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;
    use serde_json::Value;

    /// A directory under the system temp dir, removed when dropped (also on a failed assert).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            TempDir(std::env::temp_dir().join(format!(
                "clasp-run-out-{name}-{}-{nanos}",
                std::process::id()
            )))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// RFC 4180 lines (no embedded line breaks in these tests) back into fields.
    fn parse_csv_line(line: &str) -> Vec<String> {
        let mut fields = vec![String::new()];
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    fields.last_mut().unwrap().push('"');
                }
                ('"', _) => quoted = !quoted,
                (',', false) => fields.push(String::new()),
                (c, _) => fields.last_mut().unwrap().push(c),
            }
        }
        fields
    }

    fn parse_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let mut lines = text.lines();
        let header = parse_csv_line(lines.next().expect("a header line"));
        (header, lines.map(parse_csv_line).collect())
    }

    const FILES: [&str; 8] = [
        "summary.json",
        "intervals.csv",
        "migrations.csv",
        "decisions.txt",
        "workers.csv",
        "rate.svg",
        "latency.svg",
        "estimates.svg",
    ];

    fn check_files(dir: &Path, written: &[PathBuf]) {
        let expected: Vec<PathBuf> = FILES.iter().map(|f| dir.join(f)).collect();
        assert_eq!(written, expected.as_slice());
        for p in &expected {
            assert!(p.is_file(), "{} missing", p.display());
        }
        // Written atomically: no temporary file is left beside them.
        let names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "{names:?}");
        for svg in &expected[5..] {
            let text = std::fs::read_to_string(svg).unwrap();
            assert!(text.starts_with("<svg"), "{}", svg.display());
            assert!(text.trim_end().ends_with("</svg>"), "{}", svg.display());
        }
    }

    #[test]
    fn run_out_writes_every_file_and_they_read_back() {
        let tmp = TempDir::new("full");
        let dir = tmp.0.join("nested").join("out");
        let rec = sample::record();
        let written = write_out(&dir, &rec).unwrap();
        check_files(&dir, &written);

        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary, rec.summary);

        let (header, rows) =
            parse_csv(&std::fs::read_to_string(dir.join("intervals.csv")).unwrap());
        assert_eq!(header, INTERVAL_HEADER);
        assert_eq!(rows.len(), rec.intervals.len());
        for (row, r) in rows.iter().zip(&rec.intervals) {
            assert_eq!(row.len(), INTERVAL_HEADER.len());
            assert_eq!(row[0].parse::<f64>().unwrap(), r.t_s);
            assert_eq!(row[3].parse::<usize>().unwrap(), r.workers);
            let p99 = row[6].parse::<f64>().unwrap();
            assert!(p99 == r.latency_p99_ms || (p99.is_nan() && r.latency_p99_ms.is_nan()));
            assert_eq!(row[11].parse::<bool>().unwrap(), r.migrating);
            assert_eq!(row[12].parse::<f64>().unwrap(), r.admission_delay_p99_ms);
        }

        let (header, rows) =
            parse_csv(&std::fs::read_to_string(dir.join("migrations.csv")).unwrap());
        assert_eq!(header, MIGRATION_HEADER);
        assert_eq!(rows.len(), rec.migrations.len());
        for (row, m) in rows.iter().zip(&rec.migrations) {
            assert_eq!(row.len(), MIGRATION_HEADER.len());
            assert_eq!(row[0].parse::<u64>().unwrap(), m.epoch);
            assert_eq!(row[5].parse::<f64>().unwrap(), m.narrowing_ms);
            assert_eq!(row[6].parse::<f64>().unwrap(), m.planner_ms);
            assert_eq!(row[8].parse::<f64>().unwrap(), m.marker_wait_ms);
            assert_eq!(row[12].parse::<u64>().unwrap(), m.gated);
            assert_eq!(row[13].parse::<u64>().unwrap(), m.admitted_during);
            assert_eq!(row[14], m.reason);
        }

        let decisions = std::fs::read_to_string(dir.join("decisions.txt")).unwrap();
        assert_eq!(decisions.lines().count(), rec.decisions.len());
        for d in &rec.decisions {
            assert!(decisions.contains(&d.line));
        }
        let rate = std::fs::read_to_string(dir.join("rate.svg")).unwrap();
        assert!(rate.contains("migration (policy)"));
        assert!(rate.contains("migration (chaos)"));
        assert!(rate.contains("workers (right axis)"));
    }

    #[test]
    fn run_out_workers_csv_has_a_row_per_worker_per_interval() {
        let tmp = TempDir::new("workers");
        let rec = sample::record();
        write_out(&tmp.0, &rec).unwrap();
        let (h, rows) = parse_csv(&std::fs::read_to_string(tmp.0.join("workers.csv")).unwrap());
        assert_eq!(h, WORKER_HEADER);
        assert_eq!(rows.len(), rec.workers.len());
        // An unmeasured CPU figure is an empty cell, not a made-up zero.
        assert_eq!(rows[0][2], "");
        assert_eq!(rows[1][2], "250000");
    }

    #[test]
    fn run_out_empty_record_still_writes_valid_files() {
        let tmp = TempDir::new("empty");
        let rec = RunRecord {
            summary: serde_json::json!({}),
            intervals: vec![],
            migrations: vec![],
            decisions: vec![],
            workers: vec![],
        };
        let written = write_out(&tmp.0, &rec).unwrap();
        check_files(&tmp.0, &written);
        for (file, header) in [
            ("intervals.csv", &INTERVAL_HEADER[..]),
            ("migrations.csv", &MIGRATION_HEADER[..]),
        ] {
            let (h, rows) = parse_csv(&std::fs::read_to_string(tmp.0.join(file)).unwrap());
            assert_eq!(h, header);
            assert!(rows.is_empty());
        }
        assert_eq!(
            std::fs::read_to_string(tmp.0.join("decisions.txt")).unwrap(),
            ""
        );
    }

    #[test]
    fn run_out_error_names_the_path() {
        let tmp = TempDir::new("err");
        std::fs::create_dir_all(&tmp.0).unwrap();
        let file = tmp.0.join("a-file");
        std::fs::write(&file, "x").unwrap();
        let dir = file.join("out");
        let rec = sample::record();
        let e = write_out(&dir, &rec).unwrap_err();
        assert!(e.contains(&dir.display().to_string()), "{e}");
    }

    #[test]
    fn run_out_dir_is_checked_before_the_run() {
        let tmp = TempDir::new("prepare");
        let dir = tmp.0.join("a").join("b");
        prepare_dir(&dir).unwrap();
        assert!(dir.is_dir());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "the probe is removed"
        );
        // The check alone leaves what it made as it was.
        let later = tmp.0.join("c").join("d");
        check_dir(&later).unwrap();
        assert!(!tmp.0.join("c").exists());
        let file = tmp.0.join("a-file");
        std::fs::write(&file, "x").unwrap();
        assert!(check_dir(&file.join("out")).is_err());
        let e = prepare_dir(&file.join("out")).unwrap_err();
        assert!(e.contains(&file.display().to_string()), "{e}");
        // A rewrite replaces the whole file.
        write_atomic(&dir.join("f"), b"long contents").unwrap();
        write_atomic(&dir.join("f"), b"short").unwrap();
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"short");
    }

    #[test]
    fn run_out_headers_name_every_field() {
        let keys = |v: Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let sorted = |h: &[&str]| -> Vec<String> {
            let mut k: Vec<String> = h.iter().map(|s| s.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(serde_json::to_value(IntervalRow::default()).unwrap()),
            sorted(&INTERVAL_HEADER)
        );
        assert_eq!(
            keys(serde_json::to_value(MigrationRow::default()).unwrap()),
            sorted(&MIGRATION_HEADER)
        );
    }
}
