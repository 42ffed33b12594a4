//! `clasp local`: one worker process and a separate ingress process on this machine, running
//! an app over generated input and printing what `clasp oracle` prints (same digests and
//! counts) plus throughput, latency and per-operator metrics. `clasp ingress` is that second
//! process, usable on its own against a running worker's segment.
//!
//! SIGINT/SIGTERM: `clasp local` passes the stop on to its ingress (which runs in a process group
//! of its own, so a terminal's Ctrl-C reaches only `clasp local`), the ingress admits no more and
//! says it is done, the worker drains and ends the stream as after a full input, and the summary
//! is printed. The ingress dies with `clasp local`; an ingress whose worker is gone ends with an
//! error naming the worker's segment, and removes it.

use crate::cmd::apps::load_app;
use crate::cmd::ingress_child::{IngressChild, reap, register_cleanup, watch_ingress};
use crate::cmd::limits::{
    check_executors, check_positive, check_rate, check_ring_bytes, check_ring_memory, timeout_s,
};
use crate::cmd::usage_error;
use crate::{lifeline, signals};
use clap::{Args, ValueEnum};
use clasp_dataplane::routing::Spread;
use clasp_dataplane::runtime::ingress::{IngressConfig, IngressError, run_ingress};
use clasp_dataplane::runtime::ledger::LatencySummary;
use clasp_dataplane::runtime::{IdlePolicy, LocalConfig, LocalReport, run_local_worker};
use clasp_dataplane::source::{SourceReport, SourceSpec};
use clasp_operators::AppSpec;
use clasp_shmring::Segment;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// How key groups are spread over executors.
/// Input records `clasp local` admits from the generator without `--records`.
const DEFAULT_RECORDS: u64 = 100_000;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SpreadArg {
    /// Equal ranges of key groups on every executor; same-key operators together.
    Even,
    /// Operator i wholly on executor i mod E: every chained request crosses executors.
    Alternate,
}

#[derive(Args, Debug)]
pub struct LocalArgs {
    /// Built-in app name (see `clasp apps`).
    #[arg(
        long,
        required_unless_present = "app_file",
        conflicts_with = "app_file"
    )]
    app: Option<String>,
    /// App file (TOML; see the `clasp-operators` crate docs).
    #[arg(long)]
    app_file: Option<PathBuf>,
    /// Input records to admit (default: 100000 generated, or every record of --source).
    #[arg(long)]
    records: Option<u64>,
    /// Generator seed (the same as for `clasp oracle`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Executor threads of the worker.
    #[arg(long, default_value_t = 1)]
    executors: usize,
    /// Input rate in records per second, 0.001 ..= 1e9 (default: as fast as the worker takes
    /// them). With a rate the report also says how late records were admitted after falling
    /// due (`admission_delay_us`): latency starts at admission, so that wait is not in it.
    #[arg(long, value_parser = crate::cmd::limits::rate_arg)]
    rate: Option<f64>,
    /// Print one JSON object (the oracle's keys plus throughput, latency and metrics).
    #[arg(long)]
    json: bool,
    /// Capacity of each request ring in bytes (a power of two, 4096 ..= 1 GiB).
    #[arg(long, default_value_t = 1 << 20)]
    ring_bytes: usize,
    /// Roots admitted and not yet completed, at most.
    #[arg(long, default_value_t = 4096)]
    max_in_flight: u64,
    /// Track 1 in N roots for latency (and the in-flight bound).
    #[arg(long, default_value_t = 1)]
    sample_every: u64,
    /// How key groups are spread over executors.
    #[arg(long, value_enum, default_value_t = SpreadArg::Even)]
    spread: SpreadArg,
    /// Pin executors to cores (verified with sched_getcpu) when there are enough cores.
    #[arg(long)]
    pin: bool,
    /// What idle executors do: `park` (sleep at once), `spin:US` (poll up to US µs of wall
    /// time, then sleep; `spin` alone: 50 µs) or `auto` (spin 50 µs only when every busy
    /// thread has a core, else park). Spin where the executors have cores of their own
    /// (--pin): a hop at low load then takes a cache miss instead of a wake-up.
    #[arg(long, value_name = "POLICY", default_value_t = IdlePolicy::Auto)]
    idle: IdlePolicy,
    /// Metrics sampling interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// After SIGINT/SIGTERM: how long the admitted input may take to drain before the run
    /// stops at once (seconds).
    #[arg(long, default_value_t = 10, value_parser = timeout_s())]
    drain_timeout_s: u64,
    /// Write every output as a JSON line to file:PATH (emptied first), stdout: or tcp:ADDR.
    /// Default: none (outputs are only digested).
    #[arg(long, value_name = "SINK", value_parser = crate::cmd::run::args::parse_sink)]
    sink: Option<clasp_dataplane::sink::SinkTarget>,
    #[arg(long, value_name = "SPEC", default_value = "gen:", help = crate::cmd::source::SOURCE_SHORT_HELP, long_help = crate::cmd::source::SOURCE_HELP)]
    source: SourceSpec,
}

#[derive(Args, Debug)]
pub struct IngressArgs {
    /// The worker's shared-memory segment name.
    #[arg(long)]
    segment: String,
    /// Built-in app name (must be what the worker runs).
    #[arg(
        long,
        required_unless_present = "app_file",
        conflicts_with = "app_file"
    )]
    app: Option<String>,
    /// App file (TOML).
    #[arg(long)]
    app_file: Option<PathBuf>,
    /// Records to admit.
    #[arg(long)]
    records: u64,
    /// Generator seed.
    #[arg(long)]
    seed: u64,
    /// Records per second (default: as fast as the worker takes them).
    #[arg(long)]
    rate: Option<f64>,
    /// Where the records come from (see `clasp local --help`); with a source other than the
    /// generator, or a rate, the source's offset and malformed counts and how late records
    /// were admitted are printed on stdout at the end as one JSON line,
    /// `{"sources": [...], "admission_delay_us": {...}}`.
    #[arg(long, value_name = "SPEC", default_value = "gen:")]
    source: SourceSpec,
}

pub fn run_ingress_cmd(args: IngressArgs) -> anyhow::Result<()> {
    // The handler first: the death signal of a parent that dies meanwhile is then a stop,
    // reported as the loss of its worker, not a silent end.
    signals::install("ingress", None, signals::Hangup::ParentGone)?;
    lifeline::die_with_parent()?;
    let spec = load_app(args.app.as_deref(), args.app_file.as_deref())?;
    check_rate("--rate", args.rate)?;
    let cfg = IngressConfig {
        segment_name: args.segment,
        records: args.records,
        seed: args.seed,
        rate_per_s: args.rate,
        stop: Some(signals::stop_flag()),
        source: args.source.clone(),
        generator: None,
    };
    let report = match run_ingress(&spec, &cfg) {
        // Stopped because the parent is gone: under `clasp local` that is the worker, whose
        // process may take a moment to be seen dead.
        Ok(r) if r.stopped && signals::hung_up() && worker_dies(&cfg.segment_name) => {
            return Err(lost_worker(&cfg.segment_name, r.admitted));
        }
        Ok(r) => r,
        Err(IngressError::WorkerGone { segment, admitted }) => {
            return Err(lost_worker(&segment, admitted));
        }
        Err(e) => return Err(anyhow::Error::msg(e)),
    };
    if !args.source.is_generator() || args.rate.is_some() {
        let line = serde_json::json!({
            "sources": [&report.source],
            "admission_delay_us": report.admission_delay,
        });
        let mut out = crate::cmd::output::stdout();
        writeln!(out, "{line}")?;
        out.finish()?;
    }
    // The ingress's result, for whoever started it (not a log event a filter could hide).
    let _ = writeln!(
        std::io::stderr(),
        "ingress: admitted {} records in {:.3} s{}",
        report.admitted,
        report.elapsed.as_secs_f64(),
        if report.stopped {
            " (stopped early)"
        } else {
            ""
        }
    );
    Ok(())
}

/// How long an ingress whose parent is gone waits to see the worker's process gone too.
const WORKER_DEATH_WAIT: Duration = Duration::from_secs(1);

/// Whether the worker owning `segment` is (or within [`WORKER_DEATH_WAIT`] becomes) gone.
fn worker_dies(segment: &str) -> bool {
    let deadline = std::time::Instant::now() + WORKER_DEATH_WAIT;
    loop {
        if !Segment::owner_alive(segment).unwrap_or(true) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The error of an ingress whose worker is gone; removes the worker's segment, which nobody
/// else will (the worker died with it still named).
fn lost_worker(segment: &str, admitted: u64) -> anyhow::Error {
    let e = IngressError::WorkerGone {
        segment: segment.to_string(),
        admitted,
    };
    let removed = Segment::remove_stale(segment).unwrap_or(false);
    let note = if removed { "; removed its segment" } else { "" };
    anyhow::anyhow!("{e}{note}")
}

pub fn run_local(args: LocalArgs) -> anyhow::Result<()> {
    signals::install(
        "local",
        Some(Duration::from_secs(args.drain_timeout_s)),
        signals::Hangup::Stop,
    )?;
    crate::stale::sweep_at_start();
    let spec = Arc::new(load_app(args.app.as_deref(), args.app_file.as_deref())?);
    if let Some(table) = spec.def().run.as_ref().filter(|t| !t.is_empty()) {
        let keys: Vec<&str> = table.keys().map(String::as_str).collect();
        say!(
            "clasp local: the app file's [run] table ({}) is for `clasp run`; not read here \
             (give --source and --sink)",
            keys.join(", ")
        );
    }
    check_rate("--rate", args.rate)?;
    check_executors(args.executors)?;
    args.source
        .check()
        .map_err(|e| usage_error(e.to_string()))?;
    crate::cmd::source::check_sink(&args.source, args.sink.as_ref(), true)?;
    let records = crate::cmd::source::records(&args.source, args.records, DEFAULT_RECORDS);
    check_ring_bytes(args.ring_bytes)?;
    check_ring_memory(args.ring_bytes, args.executors)?;
    check_positive(&[
        ("--max-in-flight", args.max_in_flight),
        ("--sample-every", args.sample_every),
        ("--interval-ms", args.interval_ms),
    ])?;
    let cfg = LocalConfig {
        segment_name: format!("clasp-local-{}", std::process::id()),
        executors: args.executors,
        spread: match args.spread {
            SpreadArg::Even => Spread::Even,
            SpreadArg::Alternate => Spread::Alternate,
        },
        ring_bytes: args.ring_bytes,
        max_in_flight: args.max_in_flight,
        sample_every: args.sample_every,
        pin: args.pin,
        idle: args.idle,
        interval: Duration::from_millis(args.interval_ms),
        sink: args.sink.clone(),
        ..LocalConfig::default()
    };
    let child = IngressChild::default();
    let ingress_out = std::sync::Mutex::new(None);
    let registrations = register_cleanup(&cfg.segment_name, &child);
    let mut stop_sent = false;
    // `ready` runs on this (the main) thread: the ingress dies when it does (`lifeline`).
    let mut report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let segment = seg.segment.name().unwrap_or_default();
            let mut c = ingress_command(&args, records, segment)?
                .spawn()
                .map_err(|e| format!("starting the ingress process: {e}"))?;
            *ingress_out.lock().unwrap_or_else(|e| e.into_inner()) = c.stdout.take();
            child.set(c);
            Ok(())
        },
        || watch_ingress(&child, &mut stop_sent),
    )
    .map_err(anyhow::Error::msg)?;
    reap(&child);
    // An ingress whose source failed ends the stream as it exits: the worker may have
    // finished before the watch above saw it exit.
    if let Some(why) = watch_ingress(&child, &mut stop_sent)
        && !report.errors.contains(&why)
    {
        report.errors.push(why);
    }
    // The segment is unlinked (its owner's handle dropped) and the ingress reaped.
    drop(registrations);
    let out = ingress_out.into_inner().unwrap_or_else(|e| e.into_inner());
    let (sources, admission_delay) = ingress_line(&args.source, out, report.admitted);
    let shown = if args.source.is_generator() {
        records
    } else {
        report.admitted
    };
    let printed = print_report(&spec, &args, shown, (&sources, &admission_delay), &report);
    crate::cmd::output::run_result(printed, &report.errors)
}

/// The `clasp ingress` process of a `clasp local` run on `segment`: the run's app, records,
/// seed, rate and source (standard input passed on to whatever source it reads: `stdin:`, or
/// a `file:` such as `/dev/stdin`); its stdout, where it prints its source's offset, is piped.
fn ingress_command(
    args: &LocalArgs,
    records: u64,
    segment: &str,
) -> Result<std::process::Command, String> {
    let mut cmd = lifeline::command().map_err(|e| format!("{e:#}"))?;
    cmd.arg("ingress")
        .args(["--segment", segment])
        .args(["--records", &records.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .args(["--source", &args.source.to_string()])
        .stdin(if args.source.is_generator() {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .stdout(Stdio::piped());
    match (&args.app, &args.app_file) {
        (_, Some(f)) => cmd.arg("--app-file").arg(f),
        (Some(a), None) => cmd.args(["--app", a]),
        (None, None) => unreachable!("clap requires one"),
    };
    if let Some(r) = args.rate {
        cmd.args(["--rate", &r.to_string()]);
    }
    Ok(cmd)
}

/// The sources the ingress read and how late it admitted records, from the line it printed
/// (the generator's offset is the records admitted; no line, no delays: none were counted).
fn ingress_line(
    source: &SourceSpec,
    out: Option<std::process::ChildStdout>,
    admitted: u64,
) -> (Vec<SourceReport>, LatencySummary) {
    let mut text = String::new();
    if let Some(mut out) = out {
        let _ = std::io::Read::read_to_string(&mut out, &mut text);
    }
    #[derive(serde::Deserialize)]
    struct Line {
        sources: Vec<SourceReport>,
        admission_delay_us: Option<LatencySummary>,
    }
    let line = text
        .lines()
        .find_map(|l| serde_json::from_str::<Line>(l).ok());
    let delay = line
        .as_ref()
        .and_then(|l| l.admission_delay_us)
        .unwrap_or_default();
    if source.is_generator() {
        let mut generated = SourceReport {
            source: source.to_string(),
            ..SourceReport::default()
        };
        generated.offset.records = admitted;
        return (vec![generated], delay);
    }
    (line.map_or_else(Vec::new, |l| l.sources), delay)
}

fn print_report(
    spec: &AppSpec,
    args: &LocalArgs,
    records: u64,
    (sources, admission_delay): (&[SourceReport], &LatencySummary),
    r: &LocalReport,
) -> anyhow::Result<()> {
    let t = &r.totals;
    let view = crate::cmd::report::RunView {
        spec,
        records,
        seed: args.seed,
        generated: args.source.is_generator(),
        executors: args.executors,
        workers: None,
        summaries: &r.summaries,
        state_keys: r.state_keys.iter().map(|&k| k as u64).collect(),
        exec_ns_mean: r.operator_metrics.iter().map(|m| m.exec_ns_mean).collect(),
        operators_json: r
            .operator_metrics
            .iter()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
            .collect(),
        malformed: &r.malformed,
        latency: &r.latency,
        elapsed: r.elapsed,
        admitted: r.admitted,
        admitted_here: r.admitted,
        totals: serde_json::to_value(t)?,
        totals_line: format!(
            "executors: {} frames in, {} local chained requests, {} overflowed, {} bad frames, \
             {} idle waits, {} sleeps",
            t["frames_in"],
            t["local_sent"],
            t["overflowed"],
            t["bad_frames"],
            t["parks"],
            t["sleeps"]
        ),
        intervals: serde_json::to_value(&r.intervals)?,
        extra: vec![
            crate::cmd::source::json(sources)?,
            (
                "admission_delay_us".into(),
                serde_json::to_value(admission_delay)?,
            ),
        ],
        extra_lines: crate::cmd::report::admission_delay_line(admission_delay)
            .into_iter()
            .chain(crate::cmd::source::lines(sources))
            .collect(),
        errors: &r.errors,
        interrupted: crate::cmd::report::RunView::interrupted_now(),
    };
    let mut out = crate::cmd::output::stdout();
    crate::cmd::report::print(&mut out, &view, args.json)?;
    out.finish()
}
