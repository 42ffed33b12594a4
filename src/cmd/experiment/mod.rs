//! `clasp experiment NAME`: the live experiments, each one command that runs real clusters of
//! capacity-capped workers and writes a CSV, a markdown table and an SVG chart into a
//! directory (`docs/live/` in the repository; docs/planner.md describes each):
//!
//! - `scaling`: each app's throughput on 1..N workers with an even spread, unthrottled;
//! - `latency`: p95 latency at 0.9× one worker's maximum rate, on 1..N workers;
//! - `migrations`: planner duration and worker pause of 1→2, 2→3, 3→2, 2→1, 1→3, 3→1 for every
//!   app once its state has filled (`clasp run --moves`);
//! - `estimates`: the estimator's α, β, γ over a live run started from the built-in priors,
//!   against `clasp calibrate`'s figures;
//! - `policies`: the five policies and `static` on burst and gradual input over several seeds.
//!
//! Every point is its own `clasp run` process tree ([`runner`]); a point measured while the
//! host had under 10 % idle CPU, or while the driver used more than 0.8 of a core, is marked
//! host-bound: it measured the machine, not the cluster.

mod live;
mod runner;
mod scaling;
mod table;

use crate::cmd::usage_error;
use clap::{Args, ValueEnum};
use clasp_operators::apps::builtin_names;
use runner::Runner;
use std::io::Write as _;
use std::path::PathBuf;

/// The options' defaults (the flags' and `clasp paper`'s).
const DEFAULT_WORKER_CPU: f64 = 0.3;
const DEFAULT_MAX_WORKERS: usize = 3;
const DEFAULT_DURATION_S: f64 = 20.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    Scaling,
    Latency,
    Migrations,
    Estimates,
    Policies,
    /// Every experiment in turn.
    All,
}

/// `--worker-cpu`'s parser: a cap `clasp run --worker-cpu` takes (checked here, before any run
/// starts or any file is written), as its fraction of a core.
fn worker_cpu_fraction(s: &str) -> Result<f64, String> {
    crate::cgroup::CpuCap::parse_arg(s).map(|cap| cap.fraction)
}

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// Which experiment.
    #[arg(value_enum)]
    name: Experiment,
    /// Directory for the CSV, markdown and SVG files (created; relative to the current
    /// directory: the default, run from the repository, replaces its committed figures).
    #[arg(long, default_value = "docs/live")]
    out: PathBuf,
    /// Each worker's CPU cap, as a fraction of one core (0.1 ..= CPUs).
    #[arg(long, default_value_t = DEFAULT_WORKER_CPU, conflicts_with = "uncapped",
          value_parser = worker_cpu_fraction)]
    worker_cpu: f64,
    /// Run the workers uncapped (they then share the host's cores).
    #[arg(long)]
    uncapped: bool,
    /// Most workers a point uses (1 ..= 8).
    #[arg(long, default_value_t = DEFAULT_MAX_WORKERS)]
    max_workers: usize,
    /// Apps, comma-separated (default: all seven).
    #[arg(long, value_delimiter = ',')]
    apps: Vec<String>,
    /// Seeds per configuration of `policies`.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Seconds of input per live run (`migrations` uses at least 21).
    #[arg(long, default_value_t = DEFAULT_DURATION_S)]
    duration: f64,
    /// Small sizes (seconds instead of minutes), for a smoke test of the harness.
    #[arg(long)]
    quick: bool,
    /// Records of each static throughput point of `scaling` (default 100 000; 4 000 with
    /// --quick, too few for steady figures on fast apps).
    #[arg(long)]
    records: Option<u64>,
}

/// Records of a static throughput point.
const RECORDS: u64 = 100_000;
/// The same with `--quick`.
const QUICK_RECORDS: u64 = 4_000;
/// Seconds of input of a live or latency point with `--quick`.
pub const QUICK_SECONDS: f64 = 3.0;

/// What every experiment needs.
pub struct Setup {
    pub runner: Runner,
    pub apps: Vec<String>,
    pub max_workers: usize,
    pub seeds: u64,
    pub duration_s: f64,
    pub quick: bool,
    /// Records a static throughput point admits.
    pub records: u64,
}

impl Setup {
    /// Records a static throughput point admits.
    pub fn records(&self) -> u64 {
        self.records
    }
}

impl ExperimentArgs {
    /// `clasp experiment NAME --out OUT [--quick] --seeds SEEDS --duration DURATION_S`, every
    /// other option at its default: how `clasp paper` runs the live experiments in-process.
    pub fn new(name: Experiment, out: PathBuf, quick: bool, seeds: u64, duration_s: f64) -> Self {
        ExperimentArgs {
            name,
            out,
            worker_cpu: DEFAULT_WORKER_CPU,
            uncapped: false,
            max_workers: DEFAULT_MAX_WORKERS,
            apps: Vec::new(),
            seeds,
            duration: duration_s,
            quick,
            records: None,
        }
    }

    /// The same, with `records` per static throughput point.
    pub fn with_records(mut self, records: u64) -> Self {
        self.records = Some(records);
        self
    }
}

/// `clasp experiment`.
pub fn run_experiment(args: ExperimentArgs) -> anyhow::Result<()> {
    let written = run_experiments(&args)?;
    let mut out = crate::cmd::output::stdout();
    for f in &written {
        writeln!(out, "wrote {}", f.display())?;
    }
    out.finish()
}

/// Runs the experiment(s) `args` names; the files written.
pub fn run_experiments(args: &ExperimentArgs) -> anyhow::Result<Vec<PathBuf>> {
    let refused = [
        (!(1..=8).contains(&args.max_workers))
            .then(|| format!("--max-workers {}: must be 1..=8", args.max_workers)),
        (args.seeds == 0).then(|| "--seeds 0: must be at least 1".to_owned()),
        (!(args.duration.is_finite() && args.duration >= 2.0))
            .then(|| format!("--duration {}: must be at least 2 s", args.duration)),
        (args.records == Some(0)).then(|| "--records 0: must be at least 1".to_owned()),
    ];
    if let Some(why) = refused.into_iter().flatten().next() {
        return Err(usage_error(why));
    }
    let apps: Vec<String> = if args.apps.is_empty() {
        builtin_names().iter().map(|s| (*s).to_owned()).collect()
    } else {
        args.apps.clone()
    };
    if let Some(bad) = apps.iter().find(|a| !builtin_names().contains(&a.as_str())) {
        return Err(usage_error(format!(
            "--apps: `{bad}` is not a built-in app ({})",
            builtin_names().join(", ")
        )));
    }
    crate::cmd::run::out::prepare_dir(&args.out).map_err(|e| usage_error(format!("--out: {e}")))?;
    let setup = Setup {
        runner: Runner::new((!args.uncapped).then_some(args.worker_cpu))?,
        apps,
        max_workers: args.max_workers,
        seeds: args.seeds,
        duration_s: args.duration,
        quick: args.quick,
        records: args
            .records
            .unwrap_or(if args.quick { QUICK_RECORDS } else { RECORDS }),
    };
    let all = args.name == Experiment::All;
    let mut written = Vec::new();
    // One capped worker's maximum per app: measured by `scaling`, else once on first need.
    let mut known = None;
    if all || args.name == Experiment::Scaling {
        let (files, m) = scaling::scaling(&setup, &args.out)?;
        written.extend(files);
        known = Some(m);
    }
    let mut maxima = || -> anyhow::Result<scaling::Maxima> {
        if known.is_none() {
            known = Some(scaling::single_worker_maxima(&setup)?);
        }
        Ok(known.clone().expect("just measured"))
    };
    if all || args.name == Experiment::Latency {
        written.extend(scaling::latency(&setup, &args.out, &maxima()?)?);
    }
    if all || args.name == Experiment::Migrations {
        written.extend(live::migrations(&setup, &args.out, &maxima()?)?);
    }
    if all || args.name == Experiment::Estimates {
        written.extend(live::estimates(&setup, &args.out)?);
    }
    if all || args.name == Experiment::Policies {
        written.extend(live::policies(&setup, &args.out, &maxima()?)?);
    }
    Ok(written)
}

/// Progress on stderr: experiments take minutes.
fn progress(line: &str) {
    say!("clasp experiment: {line}");
}
