//! The `clasp` command line as a library function, so that a user's own binary — one that
//! registers its own operator kinds — is the driver, the workers and the child processes of its
//! own cluster: `fn main() -> ExitCode { clasp::cli::main_with(registry) }`.
//!
//! Every command that names an app (`run`, `run --static`, `local`, `worker`, `ingress`,
//! `oracle`, `sim`, ...) resolves its operator kinds in the registry given here, and every
//! process a command starts is the current executable, so a run never mixes two sets of
//! kinds by accident. A worker given a job whose app names a kind it does not have (started
//! from another binary) refuses it with an error naming the kind, and the run fails with it.

use std::io::Write as _;

use clap::{Parser, Subcommand};
use clasp_operators::Registry;

use crate::{cmd, signals};

#[derive(Parser)]
#[command(
    name = "clasp",
    version,
    about = "CLASP: a stream-processing data plane that packs operators onto the fewest workers",
    long_about = "CLASP: a stream-processing data plane for bare-metal clusters.\n\n\
        A stream application is a DAG of operators; workers run them on pinned executor threads, \
        hand chained requests to each other through shared-memory rings (same worker) or batched \
        zero-copy frames over io_uring TCP (other workers), and a planner packs the operators onto \
        the fewest workers that sustain the input rate."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Microbenchmarks of the data plane on this machine (a table, or JSON with --json).
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// Measure this machine's chained-request costs (α, β, γ) briefly and write them as the
    /// machine profile `clasp run` starts from (a table, or JSON with --json).
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// The benchmark apps (a table, or JSON with --json); `apps show NAME` for one app.
    Apps(cmd::apps::AppsArgs),
    /// Generate an app's input records (one per line) to stdout or a file.
    Gen(cmd::apps::GenArgs),
    /// Run an app single-threaded over generated input and print the digests every
    /// distributed run must reproduce.
    Oracle(cmd::apps::OracleArgs),
    /// One placement decision on a problem file, for any policy (CLASP, the baselines, exact).
    Place(cmd::place::PlaceArgs),
    /// Run one worker process and a separate ingress process on this machine over generated
    /// input or a --source; print throughput, latency, metrics and the digests `clasp oracle`
    /// prints.
    Local(cmd::local::LocalArgs),
    /// The ingress process `clasp local` starts (not for direct use): attach to a worker's
    /// shared-memory segment by name and feed it an app's generated input or a --source.
    Ingress(cmd::local::IngressArgs),
    /// One worker of a cluster: listens, authenticates its peers with the cluster secret, and
    /// runs the jobs drivers send it, static or live; --join adds it to a running live run
    /// (docs/cluster.md).
    Worker(cmd::worker::WorkerArgs),
    /// Run an app on a cluster: by default the live planner autoscales up to --max-workers
    /// local worker processes under a rate pattern, migrating state live (docs/planner.md);
    /// `--static` fixes the workers and placement (docs/cluster.md).
    Run(cmd::run::RunArgs),
    /// The live planner alone, for workers that are already running (`clasp worker`, here or
    /// on other hosts): the same as `clasp run --cluster FILE` (docs/planner.md).
    // The options about the workers `clasp run` starts itself do not apply: hidden here (and
    // refused if given, `run_planner`).
    #[command(
        mut_arg("static_", |a| a.hide(true)),
        mut_arg("workers", |a| a.hide(true)),
        mut_arg("max_workers", |a| a.hide(true)),
        mut_arg("start_workers", |a| a.hide(true)),
        mut_arg("worker_cpu", |a| a.hide(true)),
        mut_arg("uncapped", |a| a.hide(true)),
        mut_arg("cpus", |a| a.hide(true)),
        mut_arg("cluster", |a| a.help("The cluster file of the running workers (required)")),
        mut_arg("secret_file", |a| a
            .help("Secret file for --cluster (default: CLASP_CLUSTER_SECRET)")),
        mut_arg("app", |a| a.help("Built-in app name (see `clasp apps`; default wc)")),
        mut_arg("peak_rate", |a| a.help(
            "The pattern's peak input rate (records per second, 0.001 ..= 1e9). Default: \
             250000; set yours for the app and the workers' machines"
        ))
    )]
    Planner(cmd::run::RunArgs),
    /// The cluster simulator and its experiments (placement, worker-count, e2e, gap).
    Sim(cmd::sim::SimArgs),
    /// The live experiments on capacity-capped workers (scaling, latency, migrations,
    /// estimates, policies): each writes a CSV, a markdown table and an SVG chart
    /// (docs/planner.md, "Capped workers and the live experiments").
    Experiment(cmd::experiment::ExperimentArgs),
    /// Regenerate every figure of the evaluation that has a counterpart here (simulated at 10
    /// and 100 workers, live on capped workers) and a README table that sets each beside the
    /// original's headline numbers (docs/paper/).
    Paper(cmd::paper::PaperArgs),
    /// Remove what clasp processes that died left behind: named segments in /dev/shm,
    /// clasp-run-PID-XXXXXX directories and the empty cgroups of capped runs (every start of
    /// run, local and worker does this too); list the checkpoints runs that did not succeed
    /// keep for --resume (never removed here), and remove the default checkpoint directories
    /// gone runs left empty.
    Clean(cmd::clean::CleanArgs),
}

/// The whole `clasp` command line, with the operator kinds of `registry`: what the `clasp`
/// binary runs with [`Registry::builtin`], and what a user's own binary runs with the kinds it
/// registered. Parses the process's arguments, runs the command and returns its exit status.
///
/// Call it once, from `main`: it installs the process's log subscriber (unless the binary
/// installed its own first) and turns transparent huge pages off for the process unless
/// `MIMALLOC_ALLOW_THP` is set (`src/hugepages.rs` says why). The workers and child processes
/// a command starts are this same executable, so they know the same kinds.
pub fn main_with(registry: Registry) -> std::process::ExitCode {
    crate::registry::install(registry);
    crate::lifeline::name_this_process();
    init_logs();
    crate::hugepages::disable_unless_asked();
    // `clasp run --config FILE` fills in from the file what the command line left out;
    // `--print-config` prints the settings instead of running (`None`).
    let result = match cmd::run::config::parse_cli::<Cli>() {
        Ok(Some(cli)) => dispatch(cli.command),
        Ok(None) => Ok(()),
        Err(err) => Err(err),
    };
    // A run stopped by SIGINT/SIGTERM exits with 128 + the signal, whatever else happened.
    let interrupted = signals::interrupted().map(signals::exit_status);
    match result {
        Ok(()) => interrupted.map_or(std::process::ExitCode::SUCCESS, Into::into),
        // The reader of our output went away (`clasp apps | head -1`): nothing to report.
        Err(err) if cmd::output::is_closed_stdout(&err) => {
            interrupted.map_or(std::process::ExitCode::SUCCESS, Into::into)
        }
        Err(err) => {
            // Not `eprintln!`, which panics when stderr fails too (`2>/dev/full`).
            // One write (stderr is unbuffered): not cut into by other processes' lines.
            let line = format!("{}: error: {}\n", program_name(), error_text(&err));
            let _ = std::io::stderr().write_all(line.as_bytes());
            std::process::ExitCode::from(interrupted.unwrap_or_else(|| cmd::exit_code(&err)))
        }
    }
}

/// The name this program was started as (the file name of `argv[0]`): `clasp`, or a user's
/// own binary built on this library (`topk`). Its messages and `--version` use it.
pub fn program_name() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "clasp".into())
}

/// Runs one subcommand.
fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Bench(c) => cmd::bench::run(c),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Local(a) => cmd::local::run_local(a),
        Command::Ingress(a) => cmd::local::run_ingress_cmd(a),
        Command::Worker(a) => cmd::worker::run_worker_cmd(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Planner(a) => cmd::run::run_planner(a),
        Command::Place(a) => cmd::place::run(a),
        Command::Sim(a) => cmd::sim::run_sim(a),
        Command::Experiment(a) => cmd::experiment::run_experiment(a),
        Command::Paper(a) => cmd::paper::run_paper(a),
        Command::Apps(a) => cmd::apps::run_apps(a),
        Command::Gen(a) => cmd::apps::run_gen(a),
        Command::Oracle(a) => cmd::apps::run_oracle(a),
        Command::Clean(a) => cmd::clean::run_clean(a),
    }
}

/// Logs: faults a run survives (a refused connection, a worker's error, a transport's
/// completion-queue overflow) are `tracing` events of the libraries. They go to stderr with
/// timestamps (stdout stays the command's output), filtered by `RUST_LOG` (`CLASP_LOG` when
/// `RUST_LOG` is unset), in the usual directive syntax (`info`, `clasp_dataplane=debug`, ...);
/// `warn` when both are unset. Directives that do not parse are skipped, not fatal. A binary
/// that set its own subscriber before calling [`main_with`] keeps it.
fn init_logs() {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::filter::LevelFilter;
    let spec = std::env::var("RUST_LOG")
        .or_else(|_| std::env::var("CLASP_LOG"))
        .unwrap_or_default();
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse_lossy(spec);
    let _already_set = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// An error and its causes, each said once. Many errors print their cause in their own message
/// (`"{what}: {source}"`) and also report it as their source, which `{:#}` would repeat.
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    /// An error that says its cause in its message and reports it as its source too.
    #[derive(Debug)]
    struct Says(std::io::Error);

    impl std::fmt::Display for Says {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "worker 1: {}", self.0)
        }
    }

    impl std::error::Error for Says {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let io = || std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let err = anyhow::Error::new(Says(io()));
        assert_eq!(error_text(&err), format!("worker 1: {}", io()));
        // A context's cause is said after it.
        let err = anyhow::Error::new(io()).context("binding 127.0.0.1:7001");
        assert_eq!(
            error_text(&err),
            format!("binding 127.0.0.1:7001: {}", io())
        );
    }
}
