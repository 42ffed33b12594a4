//! `clasp bench ...`: microbenchmarks that print a table, or one JSON object with `--json`.
//! The harnesses live in the `clasp-benches` crate so the criterion benches share them.

use std::io::Write as _;

use clap::{Args, Subcommand};

use super::limits::MAX_REPETITIONS;
use super::output;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// One-way latency and throughput of an SPSC frame ring between two threads on two cores:
    /// the hardware floor (a cache-line ping-pong), shmring and std's mpsc (and rtrb and
    /// crossbeam's ArrayQueue in a build with `--features baselines`), side by side in one run;
    /// then shmring ÷ each within every repetition, which a host whose speed drifts during the
    /// run does not skew.
    Ring(RingArgs),
    /// What a chained request costs through the real worker path: CPU ns per local chained
    /// request (α) on SYN, across cores, the cost of latency tracking; one-way hop latency at
    /// low load, local and remote, with idle threads parking and spinning, side by side.
    Dispatch(DispatchArgs),
    /// CLASP placement time for 10 operators × 100 workers and 100 × 1000 (median, ms).
    Place(PlaceBenchArgs),
    /// Word count on clasp (the `wc` app through the real worker path, as `clasp local` runs
    /// it) against timely dataflow (built with `--features baselines`), on the same
    /// pre-generated sentences and the same number of executors / workers, side by side in
    /// one run; checks that both produce the same (word, count) outputs.
    Wc(WcArgs),
}

#[derive(Args)]
pub struct WcArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Sentences per run (10 words each).
    #[arg(long, default_value_t = 300_000,
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=100_000_000))]
    records: u64,
    /// clasp executors = timely workers, each count measured (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    executors: Vec<usize>,
    /// Interleaved repetitions; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = repetitions())]
    repetitions: u32,
    /// Run one system only (to profile it alone): `clasp` or `timely`; the outputs are then
    /// not compared.
    #[arg(long, value_parser = ["clasp", "timely"])]
    only: Option<String>,
}

#[derive(Args)]
pub struct PlaceBenchArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Timed repetitions of the 10 × 100 case (a tenth of them for 100 × 1000).
    #[arg(long, default_value_t = clasp_benches::place::DEFAULT_REPETITIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_REPETITIONS))]
    repetitions: usize,
}

#[derive(Args)]
pub struct DispatchArgs {
    /// Only the local half (shared-memory rings inside one worker).
    #[arg(long, conflicts_with = "remote")]
    local: bool,
    /// Only the remote half (io_uring TCP between two transports on loopback, and the tokio
    /// baseline).
    #[arg(long)]
    remote: bool,
    /// Requests per remote run at batch ≥ 32 (1..=10⁹).
    #[arg(long, default_value_t = 1_000_000, value_parser = count(1, MAX_REMOTE_REQUESTS))]
    remote_requests: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// SYN records per throughput run (1..=10⁸).
    #[arg(long, default_value_t = 200_000, value_parser = count(1, MAX_DISPATCH_RECORDS))]
    records: u64,
    /// Interleaved repetitions; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = repetitions())]
    repetitions: u32,
}

#[derive(Args)]
pub struct RingArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Interleaved repetitions of every (implementation, size) cell; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = repetitions())]
    repetitions: u32,
    /// Round trips per latency measurement (4..=10⁸; std_mpsc makes a quarter of them).
    #[arg(long, default_value_t = 200_000, value_parser = count(MIN_RING_COUNT, MAX_ROUND_TRIPS))]
    round_trips: u64,
    /// Messages per throughput measurement (4..=10¹⁰).
    #[arg(long, default_value_t = 2_000_000, value_parser = count(MIN_RING_COUNT, MAX_RING_MESSAGES))]
    messages: u64,
    /// Do not pin the two threads to separate cores (for machines where pinning misbehaves).
    #[arg(long)]
    no_pin: bool,
    /// Measure only these implementations (comma-separated): floor, shmring, std_mpsc, and
    /// with `--features baselines` rtrb and crossbeam_array_queue.
    #[arg(long, value_delimiter = ',')]
    impls: Vec<String>,
    /// Measure only these payload sizes in bytes (comma-separated; from 16, 64, 256, 1024, and
    /// on request 32 and 80: the frames shmring writes for 16- and 64-byte payloads, to see a
    /// fixed-size queue move the same bytes per message).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
}

pub fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Ring(args) => ring(args),
        BenchCommand::Dispatch(args) => dispatch(args),
        BenchCommand::Wc(args) => wc(args),
        BenchCommand::Place(args) => {
            let v = clasp_benches::place::run(args.repetitions);
            let mut out = output::stdout();
            if args.json {
                writeln!(out, "{v}")?;
            } else {
                writeln!(
                    out,
                    "placement, 10 operators x 100 workers:   {:.3} ms",
                    v["ops_10_workers_100_ms"].as_f64().unwrap_or(f64::NAN)
                )?;
                writeln!(
                    out,
                    "placement, 100 operators x 1000 workers: {:.3} ms",
                    v["ops_100_workers_1000_ms"].as_f64().unwrap_or(f64::NAN)
                )?;
            }
            out.finish()
        }
    }
}

fn ring(args: RingArgs) -> anyhow::Result<()> {
    let cfg = clasp_benches::ring::RingBenchConfig {
        repetitions: args.repetitions,
        round_trips: args.round_trips,
        messages: args.messages,
        pin: !args.no_pin,
        impls: args.impls,
        sizes_bytes: args.sizes,
    };
    clasp_benches::ring::selection(&cfg).map_err(crate::cmd::usage_error)?;
    run_and_print(
        args.json,
        cfg.repetitions,
        |progress| clasp_benches::ring::run(&cfg, progress),
        clasp_benches::ring::table,
    )
}

fn dispatch(args: DispatchArgs) -> anyhow::Result<()> {
    let _segments = exit_at_once_on_signal("bench dispatch")?;
    let show_progress = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let local = if args.remote {
        None
    } else {
        let cfg = clasp_benches::dispatch_local::LocalDispatchConfig {
            records: args.records,
            repetitions: args.repetitions,
        };
        let report = clasp_benches::dispatch_local::run(&cfg, |rep| {
            if show_progress {
                say_raw!("\rlocal: repetition {rep}/{}", cfg.repetitions);
            }
        })
        .map_err(anyhow::Error::msg)?;
        if show_progress {
            say!();
        }
        Some(report)
    };
    let remote = if args.local {
        None
    } else {
        if show_progress {
            say!("remote: {} repetitions ...", args.repetitions);
        }
        let opts = clasp_benches::dispatch::DispatchOpts {
            requests: args.remote_requests,
            repetitions: args.repetitions as usize,
            ..Default::default()
        };
        Some(clasp_benches::dispatch::run(&opts))
    };
    let mut out = output::stdout();
    if args.json {
        let mut v = serde_json::Map::new();
        if let Some(l) = &local {
            if let serde_json::Value::Object(m) = serde_json::to_value(l)? {
                v.extend(m);
            }
        }
        if let Some(r) = &remote {
            if let serde_json::Value::Object(m) = serde_json::to_value(r)? {
                v.extend(m);
            }
        }
        writeln!(out, "{}", serde_json::Value::Object(v))?;
    } else {
        if let Some(l) = &local {
            write!(out, "{}", clasp_benches::dispatch_local::table(l))?;
        }
        if let Some(r) = &remote {
            if local.is_none() {
                // The local table names the machine; alone, the remote one does.
                writeln!(out, "machine: {}", r.machine)?;
            }
            write_remote(&mut out, r)?;
        }
    }
    out.finish()
}

/// The remote half of `bench dispatch`'s table.
fn write_remote(
    out: &mut impl std::io::Write,
    r: &clasp_benches::dispatch::RemoteDispatch,
) -> std::io::Result<()> {
    writeln!(
        out,
        "remote (io_uring TCP, ring-format batches), CPU ns per request, both sides:"
    )?;
    // Keyed by the batch as text (the JSON's object keys): listed by size.
    let mut batches: Vec<(&String, &f64)> = r.remote_ns_per_request.iter().collect();
    batches.sort_by_key(|(batch, _)| batch.parse::<u64>().unwrap_or(u64::MAX));
    for (batch, ns) in batches {
        let per_send = r.remote_batches_per_send.get(batch);
        let per_send = per_send.map_or(String::new(), |b| format!("  ({b:.1} batches a send)"));
        writeln!(out, "  batch {batch:>4}: {ns:8.1} ns{per_send}")?;
    }
    for (batch, ns) in &r.remote_one_send_per_batch_ns_per_request {
        writeln!(out, "  batch {batch:>4}, one batch a send: {ns:8.1} ns")?;
    }
    for (batch, ns) in &r.baseline_remote_ns_per_request {
        writeln!(
            out,
            "  tokio + postcard baseline, batch {batch}: {ns:.1} ns"
        )?;
    }
    if r.baseline_one_way_us.is_none() {
        writeln!(
            out,
            "  (the tokio + postcard baseline is built with `--features baselines`)"
        )?;
    }
    writeln!(
        out,
        "  each extra destination: {:.1} ns per request",
        r.per_destination_ns
    )?;
    writeln!(
        out,
        "  one-way latency, network threads on cores of their own, per idle policy \
         (median [min..max]):"
    )?;
    for row in &r.remote_idle {
        writeln!(
            out,
            "    {:<8} {:.1} µs [{:.1}..{:.1}]",
            row.policy, row.one_way_us, row.one_way_us_min, row.one_way_us_max
        )?;
    }
    if let Some([mid, lo, hi]) = r.tcp_floor_one_way_us {
        writeln!(
            out,
            "    floor: loopback TCP, plain write and busy-polled read, {mid:.1} µs \
             [{lo:.1}..{hi:.1}]"
        )?;
    }
    Ok(())
}

/// A benchmark interrupted stops at once (its figures would be partial): the signal removes
/// the segments it made on the way out, while the registration returned is held.
fn exit_at_once_on_signal(what: &'static str) -> anyhow::Result<crate::cleanup::Registration> {
    crate::signals::install_exit_at_once(what)?;
    Ok(crate::cleanup::register(
        clasp_benches::segments::remove_made,
    ))
}

fn wc(args: WcArgs) -> anyhow::Result<()> {
    if let Some(e) = args.executors.iter().find(|&&e| e == 0 || e > 64) {
        return Err(crate::cmd::usage_error(format!(
            "--executors {e}: each count must be in 1..=64"
        )));
    }
    let given = &args.executors;
    if let Some(i) = (1..given.len()).find(|&i| given[..i].contains(&given[i])) {
        return Err(crate::cmd::usage_error(format!(
            "--executors: {} given twice",
            given[i]
        )));
    }
    let _segments = exit_at_once_on_signal("bench wc")?;
    let cfg = clasp_benches::wc::WcBenchConfig {
        records: args.records,
        executors: args.executors,
        repetitions: args.repetitions,
        clasp: args.only.as_deref() != Some("timely"),
        timely: args.only.as_deref() != Some("clasp"),
    };
    if args.only.as_deref() == Some("timely") && !cfg!(feature = "baselines") {
        return Err(crate::cmd::usage_error(
            "--only timely: the timely dataflow baseline is not built (build with \
             `--features baselines`)",
        ));
    }
    if !cfg!(feature = "baselines") {
        say!(
            "clasp bench wc: the timely dataflow baseline is not built (build with \
             `--features baselines`); measuring clasp alone"
        );
    }
    run_and_print(
        args.json,
        cfg.repetitions,
        |progress| clasp_benches::wc::run(&cfg, progress),
        clasp_benches::wc::table,
    )
}

/// Runs a benchmark of `repetitions`, showing which repetition it is on where stderr is a
/// terminal (and the output is not JSON), then prints its report as JSON or as `table` says.
fn run_and_print<R: serde::Serialize>(
    json: bool,
    repetitions: u32,
    run: impl FnOnce(&mut dyn FnMut(u32)) -> Result<R, String>,
    table: impl Fn(&R) -> String,
) -> anyhow::Result<()> {
    let show_progress = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let report = run(&mut |rep| {
        if show_progress {
            say_raw!("\rrepetition {rep}/{repetitions}");
        }
    })
    .map_err(anyhow::Error::msg)?;
    if show_progress {
        say!();
    }
    let mut out = output::stdout();
    if json {
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        write!(out, "{}", table(&report))?;
    }
    out.finish()
}

/// Most requests of one remote dispatch run (a few minutes at the slowest batch).
const MAX_REMOTE_REQUESTS: u64 = 1_000_000_000;
/// Most SYN records of one local dispatch run.
const MAX_DISPATCH_RECORDS: u64 = 100_000_000;
/// Fewest round trips or messages of a ring measurement: std_mpsc makes a quarter of them,
/// and none would be an endless latency.
const MIN_RING_COUNT: u64 = 4;
/// Most round trips of one ring latency measurement.
const MAX_ROUND_TRIPS: u64 = 100_000_000;
/// Most messages of one ring throughput measurement.
const MAX_RING_MESSAGES: u64 = 10_000_000_000;

/// A count of a benchmark's work in `min..=max`: at most what runs in minutes, so a mistyped
/// size is refused rather than run until killed.
fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// `--repetitions` of the ring and dispatch benchmarks: 1..=[`MAX_REPETITIONS`].
fn repetitions() -> clap::builder::RangedU64ValueParser<u32> {
    clap::builder::RangedU64ValueParser::new().range(1..=MAX_REPETITIONS)
}
