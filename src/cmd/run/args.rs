//! The options of `clasp run` and `clasp planner`: one set for the live planner and for a
//! static cluster, since both start (or find) the same workers and run the same driver.

use crate::cgroup::{CpuCap, CpuList};
use crate::cmd::cluster::NetArgs;
use crate::cmd::limits::{MAX_CHAOS_MIGRATIONS, MAX_COPY_AHEAD_MS, local_workers, timeout_s};
use crate::cmd::local::SpreadArg;
use clap::Args;
use clap::builder::RangedU64ValueParser;
use clasp_dataplane::runtime::IdlePolicy;
use clasp_dataplane::sink::SinkTarget;
use clasp_dataplane::source::SourceSpec;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RunArgs {
    // The live run's own options conflict with `static_` in clap rather than being refused in
    // `run_static`: an app file's `[run]` table may suggest them for its app, and the run
    // file machinery drops a suggestion that conflicts with a key set above it (`--static`)
    // instead of failing the run.
    /// A static cluster: workers and placement fixed for the run (no planner; with
    /// --chaos-migrations, random moves). Without it: the live planner autoscales.
    #[arg(long = "static")]
    pub(crate) static_: bool,
    /// Static runs: start this many `clasp worker` processes on 127.0.0.1 (1..=64).
    #[arg(long, conflicts_with_all = ["cluster", "max_workers"], value_parser = local_workers())]
    pub(crate) workers: Option<usize>,
    /// Live runs: start this many `clasp worker` processes (the most the planner may use; the
    /// ones it does not use idle, parked; 1..=64; default 3).
    #[arg(long, conflicts_with_all = ["cluster", "static_"], value_parser = local_workers())]
    pub(crate) max_workers: Option<usize>,
    /// Live runs: start only this many of the --max-workers worker processes (default: all);
    /// the other ids are reserved for workers that join the running cluster (`clasp worker
    /// --id ID --join ADDR --cluster-id N`, printed on stderr once the run listens; the run's
    /// secret then comes from --secret-file or CLASP_CLUSTER_SECRET). The planner uses a
    /// worker once it joined (docs/cluster.md, "Joining a running cluster").
    #[arg(long, conflicts_with_all = ["cluster", "static_"], value_parser = local_workers())]
    pub(crate) start_workers: Option<usize>,
    /// Live runs: the scaling policy.
    #[arg(long, default_value = "clasp", conflicts_with = "static_", value_parser = ["clasp", "faasflow", "zhang24", "faasflow-sp", "zhang24-sp", "static"])]
    pub(crate) policy: String,
    /// Live runs: the input rate over time: constant, steps, gradual (a ramp up and down),
    /// burst (shapes scaled to --peak-rate and --duration), or a file of `t_s,rate_per_s`
    /// lines (absolute rates, each holding until the next line's time).
    #[arg(long, default_value = "gradual", conflicts_with = "static_")]
    pub(crate) pattern: String,
    /// Live runs: the pattern's peak input rate (records per second, 0.001 ..= 1e9). Default:
    /// 250000 on uncapped workers; on capped ones 800000 × F (with F = 0.3, 1.3–1.4× what one
    /// worker sustains on WC on a 2-vCPU KVM guest: set yours for other apps and machines).
    #[arg(long, conflicts_with = "static_", value_parser = crate::cmd::limits::rate_arg)]
    pub(crate) peak_rate: Option<f64>,
    /// Live runs: how long to admit input (seconds); with --records, the run goes on until
    /// they are all admitted (the pattern's rate at its end holds meanwhile).
    #[arg(long, default_value_t = 30.0, conflicts_with = "static_")]
    pub(crate) duration: f64,
    /// Live runs: write the JSON summary, per-interval CSV and SVG plots into this directory.
    #[arg(long, conflicts_with = "static_")]
    pub(crate) out: Option<PathBuf>,
    /// Live runs: the estimator's starting α,β,γ in µs (local hand-off, remote hand-off, per
    /// remote destination per second); the estimator (--estimator) refines them. Default: the
    /// machine profile `clasp calibrate` wrote, else 0.3,1,50.
    #[arg(long, conflicts_with = "static_")]
    pub(crate) cost_priors_us: Option<String>,
    /// Live runs: how α, β, γ are learnt. busy-time: every interval, each worker's measured CPU
    /// time less its operators' execution time is regressed on its local and remote chained
    /// requests and remote destinations — learns at any load; a cost the run cannot separate
    /// (e.g. one placement throughout: local and remote counts move together) stays at its
    /// prior with 0 samples. busy-split (the default): the same with each worker's CPU split
    /// into its executor threads' and the rest, so α is learnt from the executors alone (a
    /// local request costs the network thread nothing; whole, α also took the per-record cost
    /// of the input, which moves with it). saturated: only intervals in which a worker was
    /// saturated teach it (differences between them cancel the unknown capacity) — learns
    /// nothing in a run that never saturates a worker. W̄ comes from saturated intervals (else
    /// the prior) either way.
    #[arg(
        long,
        default_value = "busy-split",
        conflicts_with = "static_",
        value_parser = ["busy-split", "busy-time", "saturated"]
    )]
    pub(crate) estimator: String,
    /// Live runs: the packing rule of the policy's placements: any-fit (every open worker,
    /// successor hosts first) | next-fit (only the worker opened last).
    #[arg(long, default_value = "any-fit", conflicts_with = "static_", value_parser = ["any-fit", "next-fit"])]
    pub(crate) placement: String,
    /// Metrics interval (ms): workers report counters, the planner looks at them.
    #[arg(long, default_value_t = 250)]
    pub(crate) interval_ms: u64,
    /// Use the (already running) workers of this cluster file instead.
    #[arg(long)]
    pub(crate) cluster: Option<PathBuf>,
    /// Secret file for --cluster (default: CLASP_CLUSTER_SECRET). Workers started by
    /// --workers get a fresh random secret; those of a run that workers may join
    /// (--start-workers below --max-workers) get this one.
    #[arg(long)]
    pub(crate) secret_file: Option<PathBuf>,
    /// Built-in app name (see `clasp apps`; live runs default to wc).
    #[arg(long, conflicts_with = "app_file")]
    pub(crate) app: Option<String>,
    /// App file (TOML).
    #[arg(long)]
    pub(crate) app_file: Option<PathBuf>,
    /// Input records to admit (static runs: default 100000). A live run admits exactly this
    /// many, going on past --duration until they are in, so that its outputs equal `clasp
    /// oracle`'s for the same records and seed.
    #[arg(long)]
    pub(crate) records: Option<u64>,
    /// Generator seed (the same as for `clasp oracle`).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Input rate in records per second, 0.001 ..= 1e9 (default: as fast as the cluster takes
    /// them).
    #[arg(long, value_parser = crate::cmd::limits::rate_arg)]
    pub(crate) rate: Option<f64>,
    /// Print one JSON object (the keys of `clasp local --json`).
    #[arg(long)]
    pub(crate) json: bool,
    /// Executor threads per worker (1..=64).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::cmd::limits::MAX_EXECUTORS)))]
    pub(crate) executors: u16,
    /// How key groups are spread over all workers' executors.
    #[arg(long, value_enum, default_value_t = SpreadArg::Even)]
    pub(crate) spread: SpreadArg,
    /// Capacity of each request ring in bytes (a power of two, 4096 ..= 1 GiB).
    #[arg(long, default_value_t = 1 << 20)]
    pub(crate) ring_bytes: usize,
    /// Roots admitted and not yet completed, at most.
    #[arg(long, default_value_t = 4096)]
    pub(crate) max_in_flight: u64,
    /// Track 1 in N roots for latency (and the in-flight bound).
    #[arg(long, default_value_t = 1)]
    pub(crate) sample_every: u64,
    /// Pin each executor thread to one CPU when there are enough: executor e takes the
    /// (e+1)-th CPU the worker may use (wrapping), leaving the first for its other threads.
    /// With --cpus, that is the (e+1)-th CPU of the list.
    #[arg(long)]
    pub(crate) pin: bool,
    /// What the workers' idle executors and network threads do: `park` (sleep at once),
    /// `spin:US` (poll up to US µs of wall time, then sleep; `spin` alone: 50 µs) or `auto`
    /// (executors spin 50 µs only when every thread of every worker has a core, else park;
    /// network threads park). Sent to the workers in the job; a worker started with its own
    /// --idle keeps that. Spin where the workers have cores of their own (--pin, --cpus).
    #[arg(long, value_name = "POLICY", default_value_t = IdlePolicy::Auto)]
    pub(crate) idle: IdlePolicy,
    /// Cap each worker process this run starts at F of one core (e.g. 0.3): its own cgroup
    /// with a CPU quota of F × 10 ms per 10 ms period, joined before it execs; removed after
    /// the run. F must be at least 0.1 (the kernel's 1 ms minimum quota) and at most the
    /// CPUs. Needs writable cgroups (root, or a delegated group). With --cluster, start the
    /// workers with `clasp worker --worker-cpu F` instead (docs/cluster.md).
    /// Live runs that start their workers cap them at 0.3 by default where cgroups can be
    /// written (--uncapped turns that off).
    #[arg(long, value_name = "F", value_parser = CpuCap::parse_arg)]
    pub(crate) worker_cpu: Option<CpuCap>,
    /// Live runs: do not cap the workers (they then share this machine's cores, and a second
    /// worker adds little capacity on a small machine).
    #[arg(long, conflicts_with = "worker_cpu")]
    pub(crate) uncapped: bool,
    /// Restrict the worker processes this run starts to these CPUs (e.g. 0,1 or 0-3): their
    /// affinity mask, set before they exec. --pin then pins executors inside this set.
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse_arg)]
    pub(crate) cpus: Option<CpuList>,
    /// The driver's listen address (workers connect back to it).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) driver_listen: SocketAddr,
    /// The address workers use to reach the driver (default: the bound listen address).
    #[arg(long)]
    pub(crate) driver_advertise: Option<SocketAddr>,
    /// Fail when nothing progresses for this many seconds.
    #[arg(long, default_value_t = 60, value_parser = timeout_s())]
    pub(crate) stall_timeout_s: u64,
    /// Testing mode: K live migrations at random moments (seeded by --seed) to random worker
    /// counts and placements while the input flows; the result must still equal the oracle.
    #[arg(long, default_value_t = 0, value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_CHAOS_MIGRATIONS))]
    pub(crate) chaos_migrations: usize,
    /// Live runs: migrate at these moments to an even placement on this many workers,
    /// `SECONDS:WORKERS,...` (e.g. `0:1,5:2,10:3,15:1`; seconds since the first admission,
    /// ascending). Replaces the policy: for measuring what a migration costs on your machine.
    #[arg(long, conflicts_with_all = ["chaos_migrations", "static_"])]
    pub(crate) moves: Option<String>,
    /// Before a move, how long the workers copy the key groups it moves to their new owners
    /// while still running them (ms; 0: off). The move then carries only what changed since,
    /// so the moving groups' requests wait less; the move starts this much later.
    #[arg(
        long,
        default_value_t = 10,
        value_parser = RangedU64ValueParser::<u64>::new().range(0..=MAX_COPY_AHEAD_MS)
    )]
    pub(crate) copy_ahead_ms: u64,
    /// Fail a migration that does not complete within this many seconds.
    #[arg(long, default_value_t = 30, value_parser = timeout_s())]
    pub(crate) migration_timeout_s: u64,
    /// After SIGINT/SIGTERM: how long the admitted input may take to drain before the run
    /// stops at once (seconds).
    #[arg(long, default_value_t = 10, value_parser = timeout_s())]
    pub(crate) drain_timeout_s: u64,
    #[command(flatten)]
    pub(crate) net: NetArgs,
    /// Live runs: start from this machine profile instead of the default one
    /// ($XDG_CONFIG_HOME/clasp/profile.json, else ~/.config/clasp/profile.json).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["no_profile", "static_"])]
    pub(crate) profile: Option<PathBuf>,
    /// Live runs: ignore the machine profile (start from --cost-priors-us or the built-ins).
    #[arg(long, conflicts_with_all = ["profile", "static_"])]
    pub(crate) no_profile: bool,
    /// Live runs: serve Prometheus metrics on this address while the run runs (`GET /metrics`,
    /// `GET /healthz`; e.g. 127.0.0.1:9464, port 0 picks one and says which; every metric is
    /// in docs/metrics.md). Give a non-loopback address only on a network you trust: the
    /// endpoint has no authentication.
    #[arg(long, value_name = "ADDR", conflicts_with = "static_")]
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// Live runs: write the planner's decisions and the completed migrations to this file as
    /// they happen, one JSON object per line.
    #[arg(long, value_name = "FILE", conflicts_with = "static_")]
    pub(crate) events: Option<PathBuf>,
    /// Read settings from this run file (TOML, one key per long flag: `worker-cpu = 0.3`);
    /// a flag given here wins over the file, the file over the app file's [run] table.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Print the effective settings as a run file (each with where it came from) and exit.
    /// Each value is checked as the run would read it; options that cannot go together
    /// (`--worker-cpu` with `--cluster`, say) are refused only by the run itself.
    #[arg(long)]
    pub(crate) print_config: bool,
    /// Write every output as a JSON line to file:PATH, stdout: or tcp:ADDR (each worker
    /// connects to a reader there). Workers this run starts share one PATH (emptied first);
    /// with --cluster each worker writes PATH.w<ID> on its own host. Default: none (outputs
    /// are only digested).
    #[arg(long, value_name = "SINK", value_parser = parse_sink)]
    pub(crate) sink: Option<SinkTarget>,
    #[arg(long, value_name = "SPEC", default_value = "gen:", help = crate::cmd::source::SOURCE_SHORT_HELP, long_help = crate::cmd::source::SOURCE_HELP)]
    pub(crate) source: SourceSpec,
    /// Take a consistent checkpoint every this many ms; a lost worker is then recovered from
    /// the last one (0: no checkpoints, and a lost worker ends the run). Default: 1000, but
    /// none where workers may run on other hosts (--cluster, workers that join) unless
    /// --checkpoint-dir names a directory every host shares. See docs/recovery.md.
    #[arg(long, value_name = "MS")]
    pub(crate) checkpoint_interval_ms: Option<u64>,
    /// Where checkpoints are kept (default: $XDG_STATE_HOME/clasp/checkpoints/RUN, else
    /// ~/.local/state/clasp/checkpoints/RUN; printed at the start). Workers on other hosts
    /// write their parts there too: give a path every host shares.
    #[arg(long, value_name = "DIR")]
    pub(crate) checkpoint_dir: Option<PathBuf>,
    /// Keep the checkpoints after a successful run (a failed or interrupted run keeps them).
    #[arg(long)]
    pub(crate) keep_checkpoints: bool,
    /// Restart a run whose driver died from the newest complete checkpoint in DIR, with fresh
    /// workers (give the same app, seed and source; the worker count may differ; --records may
    /// be left out: the checkpoint holds the run's limit); the run's clock, its rate pattern and
    /// --duration go on from the checkpoint's cut.
    #[arg(long, value_name = "DIR", conflicts_with = "checkpoint_dir")]
    pub(crate) resume: Option<PathBuf>,
    /// `--records` was left out with `--resume` and taken from the checkpoint (said once the
    /// resume is accepted).
    #[arg(skip)]
    pub(crate) records_from_checkpoint: bool,
    /// Testing: SIGKILL (kill-worker) or SIGSTOP (stop-worker) worker ID the first time the
    /// run is in PHASE (steady, migration, checkpoint-snapshot, checkpoint-commit); the run
    /// must recover. Repeatable: faults of one phase strike together.
    #[arg(long, hide = true, value_name = "kill-worker|stop-worker=ID@PHASE")]
    pub(crate) fault: Vec<clasp_dataplane::cluster::driver::Fault>,
}

/// `--sink`'s value, refused (exit 2) with the reason when it does not parse.
pub(crate) fn parse_sink(text: &str) -> Result<SinkTarget, String> {
    SinkTarget::parse(text).map_err(|e| e.to_string())
}

impl RunArgs {
    /// Why workers of this run may be on hosts other than this one (a cluster file's, or
    /// workers that join), where they would write their parts of a checkpoint on their own
    /// disks; `None` when the run starts every worker itself, here.
    pub(crate) fn workers_elsewhere(&self) -> Option<&'static str> {
        // The ids a live run reserves for joiners, as it counts them.
        let joinable = || super::live::start_workers(self).is_ok_and(|(_, ids)| ids > 0);
        if self.cluster.is_some() {
            Some("--cluster")
        } else if !self.static_ && joinable() {
            Some("workers that join (--start-workers below --max-workers)")
        } else {
            None
        }
    }

    /// `--chaos-migrations` spreads its moves over the run's records: with a source, their
    /// number must be given (`--records N`), since a source's length is not known ahead.
    pub(crate) fn check_chaos_source(&self) -> anyhow::Result<()> {
        if self.chaos_migrations > 0 && !self.source.is_generator() && self.records.is_none() {
            return Err(crate::cmd::usage_error(
                "--chaos-migrations with --source needs --records N (the moves are spread over \
                 the first N records; a source's length is not known ahead)",
            ));
        }
        Ok(())
    }
}
