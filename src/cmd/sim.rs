//! `clasp sim`: the cluster simulator and its experiments (placement, worker count, end to end,
//! gap).

use clap::Args;
use clap::builder::RangedU64ValueParser;
use clasp_controlplane::app::{AppModel, BUILTIN_APPS, DEFAULT_EXEC_US, SPEC_RECORDS, SPEC_SEED};
use clasp_controlplane::placement::Packing;
use clasp_controlplane::sim::costs::CostShape;
use clasp_controlplane::sim::e2e::Pattern;
use clasp_controlplane::sim::engine::ClusterConfig;
use clasp_controlplane::sim::{
    DEFAULT_SEEDS, DEFAULT_WORKERS, Experiment, MAX_WORKERS, SimSettings, simulate, write,
};

use super::apps::load_app;
use super::{output, usage_error};
use std::io::Write as _;

/// Headroom of the worker-count experiment: 1.0, because its observed optimum is defined at
/// maximum throughput; the JSON also reports CLASP at the planner's default 0.9.
const WORKER_COUNT_HEADROOM: f64 = 1.0;
/// Most seeds averaged (each is a whole simulation; the seeds are listed up front).
const MAX_SEEDS: u64 = 1000;
/// Most executors per simulated worker (the simulator models each one).
const MAX_EXECUTORS: u64 = 1024;
/// Most records of the oracle run that measures an app's fan-outs.
const MAX_SPEC_RECORDS: u64 = 100_000_000;
/// Range of the mean execution time τ (µs): the simulator's event count grows as 1/τ, and
/// rates derived from τ must stay finite.
const EXEC_US_RANGE: std::ops::RangeInclusive<f64> = 1e-3..=clasp_controlplane::app::MAX_EXEC_US;

#[derive(Args)]
pub struct SimArgs {
    /// placement | worker-count | e2e | gap
    #[arg(long)]
    experiment: String,
    /// burst | gradual (e2e only; default burst)
    #[arg(long)]
    pattern: Option<String>,
    /// Workers in the cluster (1..=1000).
    #[arg(long, default_value_t = DEFAULT_WORKERS)]
    workers: usize,
    /// A built-in app (wc, sd, aa, pl, nwm, etl, syn) or "all".
    #[arg(long, default_value = "all")]
    app: String,
    /// An app file (TOML, as `clasp oracle --app-file`; fan-outs measured by an oracle run).
    /// A `.json` file is a plain simulator model instead: {"name", "operators": [{"name",
    /// "exec_us", "keys"?, "zipf"?}], "edges": [{"from", "to", "fanout"}]}. Overrides --app.
    #[arg(long)]
    app_file: Option<std::path::PathBuf>,
    /// Input records of the oracle run that measures an app spec's fan-outs.
    #[arg(long, default_value_t = SPEC_RECORDS,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SPEC_RECORDS))]
    spec_records: u64,
    /// First seed; `--seeds` consecutive seeds are averaged.
    #[arg(long, default_value_t = DEFAULT_SEEDS[0])]
    seed: u64,
    /// How many seeds to average.
    #[arg(long, default_value_t = DEFAULT_SEEDS.len(),
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_SEEDS))]
    seeds: usize,
    /// Mean execution time τ of every operator of an app spec (built-in or TOML; µs).
    #[arg(long, default_value_t = DEFAULT_EXEC_US)]
    exec_us: f64,
    /// Executor threads per simulated worker.
    #[arg(long, default_value_t = ClusterConfig::default().executors,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_EXECUTORS))]
    executors: usize,
    /// Packing headroom h (default: 1.0 for worker-count, 0.9 otherwise).
    #[arg(long)]
    headroom: Option<f64>,
    /// any-fit (every open worker, successor hosts first) | next-fit (only the last opened).
    #[arg(long, default_value = "any-fit")]
    placement: String,
    /// The simulated cluster's ground-truth α, β, γ from a machine profile (the JSON
    /// `clasp calibrate --json` prints and `clasp calibrate` writes; default: the reference
    /// prototype's costs).
    #[arg(long)]
    cost_profile: Option<std::path::PathBuf>,
    /// How the simulated costs land on threads: model (the load model's own form) | per-batch
    /// | receiver-beta | fanin-gamma (forms the model does not capture; docs/controlplane.md).
    #[arg(long, default_value = "model")]
    cost_shape: String,
    /// e2e: an input whose worker already queues this many requests is refused and counted
    /// lost (0: unbounded queues).
    #[arg(long, default_value_t = 0)]
    input_queue: usize,
    /// e2e: also run CLASP with latency-aware packing, reported as `clasp+target`: each
    /// worker's headroom is the largest utilisation (0.5 to --headroom) at which the queueing
    /// it measures predicts an end-to-end p95 within this many ms (split over the app's
    /// longest chain).
    #[arg(long)]
    latency_target_ms: Option<f64>,
    /// e2e: apply (each operator runs on at most the decision's executors per worker) | ignore
    /// (every executor takes any request). Default apply.
    #[arg(long)]
    parallelism: Option<String>,
    /// Directory for CSV, JSON and SVG output.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Print the summary as JSON on one line (without it: the same JSON, indented).
    #[arg(long)]
    json: bool,
}

pub fn run_sim(args: SimArgs) -> anyhow::Result<()> {
    let exp = match args.experiment.as_str() {
        "placement" => Experiment::Placement,
        "worker-count" => Experiment::WorkerCount,
        "gap" => Experiment::Gap,
        "e2e" => Experiment::E2e(match args.pattern.as_deref().unwrap_or("burst") {
            "burst" => Pattern::Burst,
            "gradual" => Pattern::Gradual,
            p => {
                return Err(usage_error(format!(
                    "unknown pattern {p:?}; expected burst or gradual"
                )));
            }
        }),
        e => {
            return Err(usage_error(format!(
                "unknown experiment {e:?}; expected placement, worker-count, e2e or gap"
            )));
        }
    };
    check_e2e_only(&args, exp)?;
    if args.workers == 0 || args.workers > MAX_WORKERS {
        return Err(usage_error(format!(
            "--workers must be in 1..={MAX_WORKERS}"
        )));
    }
    if !EXEC_US_RANGE.contains(&args.exec_us) {
        return Err(usage_error(format!(
            "--exec-us {}: must be in {}..={:e}",
            super::limits::show(args.exec_us),
            EXEC_US_RANGE.start(),
            EXEC_US_RANGE.end()
        )));
    }
    // The seeds are seed, seed + 1, …: the last must exist.
    if args.seed.checked_add(args.seeds as u64 - 1).is_none() {
        return Err(usage_error(format!(
            "--seed {} with --seeds {}: the last seed overflows",
            args.seed, args.seeds
        )));
    }
    let from_spec = |spec: &clasp_operators::AppSpec| {
        AppModel::from_spec(spec, args.spec_records, SPEC_SEED, args.exec_us)
    };
    let apps: Vec<AppModel> = match &args.app_file {
        Some(path) if path.extension().is_some_and(|e| e == "json") => {
            let text = super::limits::read_input_file(path)?;
            let app: AppModel = serde_json::from_str(&text)
                .map_err(|e| usage_error(format!("{}: {e}", path.display())))?;
            app.resolve()
                .map_err(|e| usage_error(format!("{}: {e}", path.display())))?;
            vec![app]
        }
        Some(path) => vec![from_spec(&load_app(None, Some(path))?)],
        None if args.app == "all" => BUILTIN_APPS
            .iter()
            .map(|n| load_app(Some(n), None).map(|spec| from_spec(&spec)))
            .collect::<anyhow::Result<_>>()?,
        None if !BUILTIN_APPS.contains(&args.app.as_str()) => {
            return Err(usage_error(format!(
                "unknown app {:?}; expected one of {} or all (or --app-file FILE)",
                args.app,
                BUILTIN_APPS.join(", ")
            )));
        }
        None => vec![from_spec(&load_app(Some(&args.app), None)?)],
    };
    let settings = settings(&args, exp)?;
    if let Some(dir) = &args.out {
        // Before the simulation: it must not end with nowhere to put its files.
        super::run::out::prepare_dir(dir).map_err(|e| usage_error(format!("--out: {e}")))?;
    }
    let sim = simulate(exp, &settings, &apps);
    // The summary first: a directory that cannot take the files (a full disk) loses them, not
    // the figures too.
    let v = &sim.summary;
    let mut out = output::stdout();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(v)?)?;
    } else {
        writeln!(out, "{}", serde_json::to_string_pretty(v)?)?;
    }
    out.finish()?;
    if let Some(dir) = &args.out {
        write(&sim, &apps, dir)
            .map_err(|e| anyhow::anyhow!("writing the results into {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Refuses the options only the e2e experiment reads, given with another: the run would
/// silently ignore them.
fn check_e2e_only(args: &SimArgs, exp: Experiment) -> anyhow::Result<()> {
    if matches!(exp, Experiment::E2e(_)) {
        return Ok(());
    }
    let given = [
        ("--pattern", args.pattern.is_some()),
        ("--parallelism", args.parallelism.is_some()),
        ("--latency-target-ms", args.latency_target_ms.is_some()),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => Err(usage_error(format!(
            "{flag} applies to --experiment e2e only, not {}",
            args.experiment
        ))),
        None => Ok(()),
    }
}

/// The simulation's settings from the flags (each bad value a usage error naming its flag).
fn settings(args: &SimArgs, exp: Experiment) -> anyhow::Result<SimSettings> {
    let headroom = args.headroom.unwrap_or(match exp {
        Experiment::WorkerCount => WORKER_COUNT_HEADROOM,
        _ => clasp_controlplane::model::DEFAULT_HEADROOM,
    });
    if !(headroom > 0.0 && headroom <= 1.0) {
        return Err(usage_error("--headroom must be in (0, 1]"));
    }
    let packing = Packing::parse(&args.placement).ok_or_else(|| {
        usage_error(format!(
            "--placement {:?}: expected any-fit or next-fit",
            args.placement
        ))
    })?;
    let apply_parallelism = match args.parallelism.as_deref().unwrap_or("apply") {
        "apply" => true,
        "ignore" => false,
        p => {
            return Err(usage_error(format!(
                "--parallelism {p:?}: expected apply or ignore"
            )));
        }
    };
    let latency_target_ms = match args.latency_target_ms {
        Some(ms) if !(ms.is_finite() && ms > 0.0) => {
            return Err(usage_error(format!(
                "--latency-target-ms {}: must be a positive number of ms",
                super::limits::show(ms)
            )));
        }
        ms => ms,
    };
    let cost_shape = CostShape::parse(&args.cost_shape).ok_or_else(|| {
        usage_error(format!(
            "--cost-shape {:?}: expected model, per-batch, receiver-beta or fanin-gamma",
            args.cost_shape
        ))
    })?;
    let truth = match &args.cost_profile {
        Some(path) => super::profile::load(path)
            .map_err(|e| usage_error(format!("--cost-profile {}: {e}", path.display())))?
            .costs(),
        None => ClusterConfig::default().truth,
    };
    Ok(SimSettings {
        cluster: ClusterConfig {
            executors: args.executors,
            truth,
            cost_shape,
            input_queue_bound: (args.input_queue > 0).then_some(args.input_queue),
            ..ClusterConfig::default()
        },
        workers: args.workers,
        headroom,
        seeds: (0..args.seeds as u64).map(|i| args.seed + i).collect(),
        apply_parallelism,
        packing,
        latency_target_ms,
    })
}
