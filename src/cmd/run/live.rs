//! `clasp run` without `--static`: the live planner. It starts up to `--max-workers` worker
//! processes, offers an app's input at a rate pattern, and lets a scaling policy move the
//! cluster — every move a live migration of state and queued requests while the input keeps
//! flowing (docs/planner.md).
//!
//! The planner is the driver of a cluster run plus a [`Controller`] built here around the
//! controlplane's [`Autoscaler`] — the very loop the simulator runs — fed with the workers'
//! counters each interval, turned into the planner's per-worker samples.

use super::args::RunArgs;
use super::caps::{self, UNCAPPED_PEAK_PER_S};
use super::out::{self, DecisionRow, IntervalRow, MigrationRow, RunRecord, WorkerRow};
use super::setup::{drive, prepare};
use super::view::run_view;
use crate::cmd::apps::load_app;
use crate::cmd::metrics::Watch;
use crate::cmd::priors::{self, Priors};
use crate::cmd::report::{self, RunView};
use crate::cmd::{output, usage_error};
use clasp_controlplane::app::AppModel;
use clasp_controlplane::autoscale::{AutoscaleConfig, Autoscaler};
use clasp_controlplane::baselines::PolicyKind;
use clasp_controlplane::estimator::EstimatorKind;
use clasp_controlplane::metrics::{OperatorSample, PlannerSample, WorkerSample};
use clasp_controlplane::pattern::RatePattern;
use clasp_controlplane::placement::Packing;
use clasp_dataplane::cluster::control::{
    Chaos, Controller, IntervalView, MigrationRecord, Move, WorkerInterval,
};
use clasp_dataplane::cluster::driver::ClusterReport;
use clasp_dataplane::cluster::script::{Scripted, parse_moves};
use clasp_dataplane::routing::Slots;
use clasp_operators::AppSpec;
use clasp_protocol::routing::RoutingTable;
use std::io::IsTerminal;
use std::io::Write as _;

/// Default workers a live run starts.
pub const DEFAULT_MAX_WORKERS: usize = 3;
/// The app a live run runs without `--app` or `--app-file`.
const DEFAULT_APP: &str = "wc";
/// Shortest metrics interval a live run accepts (ms): counters are a control message per
/// worker per interval.
const MIN_INTERVAL_MS: u64 = 10;
/// A pattern's mean rate as a fraction of its peak, for spreading chaos moves.
const MEAN_RATE_OF_PEAK: f64 = 0.5;
/// Mean request frame (bytes) for turning queued ring bytes into a queue length.
const MEAN_FRAME_BYTES: f64 = 96.0;
/// Records the oracle runs to measure the app's per-input profile (the planner's first).
const PROFILE_RECORDS: u64 = 2_000;
/// τ the planner assumes before it measured any (µs).
const EXEC_US_PRIOR: f64 = 1.0;
/// Mean queueing delay above which a live worker counts as saturated (µs).
const LIVE_SATURATION_WAIT_US: f64 = 12_000.0;
/// The share of β a live placement charges to a remote request's receiver.
const LIVE_BETA_RECEIVER_SHARE: f64 = 0.5;

/// The live controller: rate pattern, autoscaler, optional chaos, and the run's record.
struct Live {
    pattern: RatePattern,
    duration_s: f64,
    peak_per_s: f64,
    seed: u64,
    limited_by_records: bool,
    slots: Slots,
    /// For each edge of the model (the planner's order), its index in the app's edge list
    /// (the order the workers count chained requests in).
    edge_slots: Vec<usize>,
    operators: usize,
    auto: Option<Autoscaler>,
    /// The initial move (before any input), then moves decided at intervals.
    pending: Option<Move>,
    /// Moves made whatever the load: `--chaos-migrations` or `--moves`.
    mover: Option<Box<dyn Controller>>,
    rows: Vec<IntervalRow>,
    decisions: Vec<DecisionRow>,
    progress: bool,
    migrations: usize,
    /// The estimator's starting costs (None without an estimator).
    priors: Option<Priors>,
    /// The workers the policy may use, as indices of `slots.workers`, in the order its
    /// decisions number them: those started, then those that joined, less those that left.
    pool: Vec<usize>,
    /// The cluster id and the ids reserved for joiners, when workers may join.
    join_hint: Option<(u64, Vec<u32>)>,
    /// The metrics endpoint and events file, when asked for.
    watch: Watch,
}

impl Live {
    /// The autoscaler's worker-level key groups on the first `n` workers → slots (key group g of
    /// a worker's share runs on executor `g % executors`, so a key group that stays on its worker
    /// stays on its executor).
    fn slot_routing(&self, routing: &RoutingTable) -> RoutingTable {
        let e = self.slots.executors;
        let worker = |i: usize| self.pool.get(i).copied().unwrap_or(i);
        RoutingTable::from_fn(
            routing.epoch(),
            routing.operators(),
            routing.key_groups(),
            |o, g| {
                self.slots
                    .slot(worker(routing.owner(o, g).index()), g.index() % e)
            },
        )
    }

    fn sample(&self, w: &WorkerInterval, worker: usize) -> WorkerSample {
        let ops = self.operators;
        let processed: f64 = w.processed_per_s.iter().sum();
        let queue_len = w.queued_bytes as f64 / MEAN_FRAME_BYTES;
        let m = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0);
        WorkerSample {
            worker,
            queue_len: queue_len as usize,
            queue_mean: queue_len,
            // Little's law over the interval.
            wait_mean_us: if processed > 0.0 {
                queue_len / processed * 1e6
            } else {
                0.0
            },
            local_per_s: w.edges_local_per_s.iter().sum(),
            remote_per_s: w.edges_remote_per_s.iter().sum(),
            remote_received_per_s: Some(w.remote_received_per_s),
            roots_per_s: w.roots_per_s,
            destinations: w.destinations,
            operators: (0..ops)
                .map(|o| OperatorSample {
                    processed_per_s: m(&w.processed_per_s, o),
                    exec_us: m(&w.exec_us, o),
                })
                .collect(),
            edges_per_s: self
                .edge_slots
                .iter()
                .map(|&i| m(&w.edges_local_per_s, i) + m(&w.edges_remote_per_s, i))
                .collect(),
            executor_busy_us_per_s: w.busy_us_per_s,
            network_busy_us_per_s: 0.0,
            cpu_us_per_s: w.cpu_us_per_s,
            sleeps_per_s: w.sleeps_per_s,
            sleep_cpu_us_per_s: w.sleep_cpu_us_per_s,
            throttled_periods: w.throttled_periods,
            batches_per_s: w.batches_per_s,
            exec_cpu_us_per_s: w.exec_cpu_us_per_s,
            exec_sleep_cpu_us_per_s: w.exec_sleep_cpu_us_per_s,
            exec_sleeps_per_s: w.exec_sleeps_per_s,
        }
    }
}

impl Controller for Live {
    fn rate_per_s(&mut self, t_s: f64) -> Option<f64> {
        Some(
            self.pattern
                .rate_at(t_s, self.duration_s, self.peak_per_s, self.seed),
        )
    }

    fn done(&mut self, t_s: f64, _admitted: u64) -> bool {
        !self.limited_by_records && t_s >= self.duration_s
    }

    fn on_resumed(&mut self, t_s: f64, admitted: u64) {
        if let Some(m) = self.mover.as_mut() {
            m.on_resumed(t_s, admitted);
        }
    }

    fn poll(&mut self, t_s: f64, admitted: u64) -> Option<Move> {
        if let Some(m) = self.pending.take() {
            return Some(m);
        }
        self.mover.as_mut()?.poll(t_s, admitted)
    }

    fn on_interval(&mut self, v: &IntervalView) -> Option<Move> {
        let input = v.offered_per_s.unwrap_or(v.input_per_s);
        if let Some(n) = self.auto.as_ref().map(|a| a.workers()) {
            // Parked workers (index n and up) feed only the busy-time estimator: their CPU time
            // is the idle overhead it regresses out.
            let mut samples: Vec<WorkerSample> = (self.pool.iter())
                .filter_map(|&w| v.workers.get(w))
                .enumerate()
                .map(|(i, w)| self.sample(w, i))
                .collect();
            let parked = samples.split_off(n.min(samples.len()));
            let auto = self.auto.as_mut().expect("present");
            let planner = PlannerSample {
                queue_len: v.backlog as usize,
                input_per_s: input,
                // The live ingress slows down; it never refuses an input.
                refused_per_s: 0.0,
                throughput_per_s: v.throughput_per_s,
            };
            if let Some(d) = auto.on_interval_with_parked(v.t_s * 1e6, &samples, &parked, &planner)
            {
                self.decisions.push(DecisionRow {
                    t_s: v.t_s,
                    line: d.explanation.clone(),
                });
                self.watch.on_decision(v.t_s, &d.explanation);
                let routing = self.slot_routing(&d.routing);
                self.pending = Some(Move {
                    routing,
                    reason: format!("policy: {}", d.explanation),
                });
            }
        }
        let est = self.auto.as_ref().map(|a| a.estimates());
        self.watch.on_interval(v, est.as_ref());
        let row = IntervalRow {
            t_s: v.t_s,
            input_per_s: input,
            throughput_per_s: v.throughput_per_s,
            workers: v.active_workers,
            latency_p50_ms: v.latency.p50 / 1e3,
            latency_p95_ms: v.latency.p95 / 1e3,
            latency_p99_ms: v.latency.p99 / 1e3,
            alpha_us: est.map_or(0.0, |e| e.alpha_us),
            beta_us: est.map_or(0.0, |e| e.beta_us),
            gamma_us: est.map_or(0.0, |e| e.gamma_us),
            w_bar_us: est.map_or(0.0, |e| e.w_bar_us),
            migrating: v.migrating,
            admission_delay_p99_ms: v.admission_delay.p99 / 1e3,
        };
        if self.progress {
            say_raw!("\r{}", out::progress_line(&row, self.migrations));
        }
        self.rows.push(row);
        None
    }

    fn on_listening(&mut self, addr: std::net::SocketAddr) {
        if let Some((cluster_id, ids)) = &self.join_hint {
            let (first, last) = (ids[0], ids[ids.len() - 1]);
            note!(
                "workers {first}..={last} may join, in order: {} worker --id \
                 {first} --join {addr} --cluster-id {cluster_id} (with this run's secret)",
                this_program()
            );
        }
    }

    fn on_joined(&mut self, worker: usize, workers: usize) {
        self.pool.push(worker);
        if let Some(a) = self.auto.as_mut() {
            a.set_max_workers(self.pool.len());
        }
        let id = self.slots.workers.get(worker).copied().unwrap_or(0);
        note!("worker {id} joined; the planner may use {workers} workers");
    }

    fn on_left(&mut self, worker: usize, workers: usize) {
        if let Some(i) = self.pool.iter().position(|&w| w == worker) {
            self.pool.remove(i);
            if let Some(a) = self.auto.as_mut() {
                a.worker_left(i);
            }
        }
        let id = self.slots.workers.get(worker).copied().unwrap_or(0);
        note!("worker {id} left; the planner may use {workers} workers");
    }

    fn on_recovered(&mut self, t_s: f64, cut_s: Option<f64>) {
        // A policy move under way was abandoned with the job: decide afresh from here.
        if let Some(a) = self.auto.as_mut() {
            a.migrated(t_s * 1e6);
        }
        if let Some(m) = self.mover.as_mut() {
            m.on_recovered(t_s, cut_s);
        }
    }

    fn on_migrated(&mut self, r: &MigrationRecord) {
        self.migrations += 1;
        self.watch.on_migrated(r);
        if let Some(m) = self.mover.as_mut() {
            m.on_migrated(r);
        }
        // Only the policy's own moves end the autoscaler's wait (a chaos move is not the
        // placement it decided).
        if r.reason.starts_with("policy")
            && let Some(a) = self.auto.as_mut()
        {
            a.migrated(r.t_s * 1e6 + r.planner_ms * 1e3);
        }
    }
}

fn policy_kind(name: &str) -> anyhow::Result<Option<PolicyKind>> {
    if name == "static" {
        return Ok(None);
    }
    PolicyKind::parse(name)
        .map(Some)
        .ok_or_else(|| usage_error(format!("--policy {name}: unknown")))
}

/// `clasp run` (live).
pub fn run_live(mut args: RunArgs) -> anyhow::Result<()> {
    let spec: AppSpec = match (&args.app, &args.app_file) {
        (None, None) => load_app(Some(DEFAULT_APP), None)?,
        (a, f) => load_app(a.as_deref(), f.as_deref())?,
    };
    check_live(&args)?;
    let pattern = RatePattern::parse(&args.pattern).map_err(usage_error)?;
    check_pattern_ends(&args, &pattern)?;
    // The metrics endpoint and the events file too: a port in use or a path that cannot be
    // written is refused before any worker starts (the events file, emptied here, was checked
    // by `check_live` to be neither the input nor the sink's file).
    let watch = Watch::start(args.metrics_listen, args.events.as_deref(), &spec)?;
    let caps = caps::settle(&mut args)?;
    // The first line: whether the workers are capped, and why (never a silent uncapped run).
    note!("{}", caps.note);
    // A script replaces the policy: its moves, not the load's, are the point.
    let kind = if args.moves.is_some() {
        None
    } else {
        policy_kind(&args.policy)?
    };
    let priors = match kind {
        Some(_) => Some(start_priors(&args)?),
        None => None,
    };
    let (start, joinable) = start_workers(&args)?;
    let records = args.records.unwrap_or(u64::MAX);
    let (mut cfg, spawned) = prepare(&args, start, joinable, &spec, records)?;
    cfg.rate_per_s = None;
    // Every slot worker: those started, then the ids reserved for joiners.
    let n = cfg.workers.len() + cfg.joinable.len();
    let slots = Slots {
        workers: (cfg.workers.iter().map(|w| w.0))
            .chain(cfg.joinable.iter().copied())
            .collect(),
        executors: usize::from(args.executors),
    };
    let model = AppModel::from_spec(&spec, PROFILE_RECORDS, args.seed, EXEC_US_PRIOR);
    let edges = model.resolve().map_err(anyhow::Error::msg)?;
    let first_rate = pattern.rate_at(0.0, args.duration, caps.peak_rate_per_s, args.seed);
    let mut live = Live {
        pattern,
        duration_s: args.duration,
        peak_per_s: caps.peak_rate_per_s,
        seed: args.seed,
        limited_by_records: args.records.is_some(),
        slots: slots.clone(),
        edge_slots: edge_slots(&spec, &edges)?,
        operators: spec.operators.len(),
        auto: None,
        pending: None,
        mover: mover(&args, slots, spec.operators.len())?,
        rows: Vec::new(),
        decisions: Vec::new(),
        progress: !args.json && std::io::stderr().is_terminal(),
        migrations: 0,
        priors,
        pool: (0..cfg.workers.len()).collect(),
        join_hint: (!cfg.joinable.is_empty()).then(|| (cfg.cluster_id, cfg.joinable.clone())),
        watch,
    };
    if let Some(kind) = kind {
        // Decisions use the workers there are; the pool grows as workers join.
        start_autoscaler(
            &mut live,
            &args,
            &model,
            kind,
            cfg.workers.len(),
            first_rate,
        )?;
    }
    let report = drive(spawned, &spec, &cfg, &mut live)
        .inspect_err(|_| super::recovery::failed(&args, cfg.checkpoint.as_ref()))?;
    if live.progress {
        say!();
    }
    let mut view = run_view(&spec, &args, report.admitted, n, &report)?;
    // The planner's summary below lists the migrations with their reasons.
    view.extra_lines = crate::cmd::report::admission_delay_line(&report.admission_delay)
        .into_iter()
        .chain(crate::cmd::source::lines(&report.sources))
        .collect();
    view.extra_lines.extend(super::recovery::lines(&report));
    let rec = record(&args, n, &view, live, &report)?;
    // The output first: a failure to write the files must not lose it.
    let printed = (|| -> anyhow::Result<()> {
        let mut stdout = output::stdout();
        if args.json {
            writeln!(stdout, "{}", serde_json::to_string_pretty(&rec.summary)?)?;
        } else {
            report::print(&mut stdout, &view, false)?;
            writeln!(stdout)?;
            write!(stdout, "{}", out::render_summary(&rec))?;
        }
        stdout.finish()
    })();
    let wrote = args.out.as_ref().map(|dir| {
        let files = out::write_out(dir, &rec).map_err(anyhow::Error::msg)?;
        if !args.json {
            say!("wrote {} files into {}", files.len(), dir.display());
        }
        anyhow::Ok(())
    });
    let result = outcome(output::run_result(printed, &report.errors), wrote);
    super::recovery::finish(&args, cfg.checkpoint.as_ref(), &result);
    result
}

/// The run's result from what it printed (`ran`) and its `--out` files: a failed `--out` wins
/// over a reader of stdout that went away, which alone is no failure.
fn outcome(ran: anyhow::Result<()>, wrote: Option<anyhow::Result<()>>) -> anyhow::Result<()> {
    match (ran, wrote) {
        (Err(e), _) if !output::is_closed_stdout(&e) => Err(e),
        (_, Some(Err(e))) => Err(e),
        (ran, _) => ran,
    }
}

/// How many workers the run starts and how many ids it reserves for workers that join
/// (`--start-workers` of `--max-workers`; a cluster file's workers are all there already).
pub(super) fn start_workers(args: &RunArgs) -> anyhow::Result<(Option<usize>, usize)> {
    if args.cluster.is_some() {
        return Ok((None, 0));
    }
    let max = args.max_workers.unwrap_or(DEFAULT_MAX_WORKERS);
    let start = args.start_workers.unwrap_or(max);
    if start > max {
        return Err(usage_error(format!(
            "--start-workers {start} is more than --max-workers {max}"
        )));
    }
    Ok((Some(start), max - start))
}

/// The estimator's priors (`--cost-priors-us`, the machine profile, or the built-ins), said on
/// stderr before anything starts.
fn start_priors(args: &RunArgs) -> anyhow::Result<Priors> {
    let p = priors::resolve(
        args.cost_priors_us.as_deref(),
        args.profile.as_deref(),
        args.no_profile,
    )?;
    let _ = writeln!(std::io::stderr(), "{}", p.line());
    Ok(p)
}

/// A run of `--records` admits them all, past `--duration` if need be, at the rate the pattern
/// ends on: a pattern file whose last point is a rate of 0 would never let it end. (The built-in
/// patterns end on a share of the peak, which is positive.)
fn check_pattern_ends(args: &RunArgs, pattern: &RatePattern) -> anyhow::Result<()> {
    if let (Some(records), RatePattern::File(points)) = (args.records, pattern)
        && points.last().is_some_and(|&(_, rate)| rate <= 0.0)
    {
        return Err(usage_error(format!(
            "--pattern {}: it ends at rate 0, so a run of --records {records} (which goes on \
             past --duration until they are all admitted) would never end; end it on a \
             positive rate, or leave --records out",
            args.pattern
        )));
    }
    Ok(())
}

/// The options only a live run checks, before any worker starts (the cluster's are checked by
/// `prepare`), and the `--out` directory it prepares.
fn check_live(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(events) = &args.events {
        // A cluster file's workers write their sinks on their own hosts, as `PATH.w<ID>`.
        let per_worker = args.cluster.is_some();
        let read: Vec<(&str, &std::path::Path)> = [
            ("--app-file", args.app_file.as_deref()),
            ("--config", args.config.as_deref()),
        ]
        .into_iter()
        .filter_map(|(option, path)| Some((option, path?)))
        .collect();
        let sink = args.sink.as_ref();
        crate::cmd::source::check_events(events, &args.source, &read, sink, per_worker)?;
    }
    if !(args.duration.is_finite() && args.duration > 0.0) {
        return Err(usage_error(format!(
            "--duration {}: must be a positive number of seconds",
            args.duration
        )));
    }
    if args.interval_ms < MIN_INTERVAL_MS {
        return Err(usage_error(format!(
            "--interval-ms {}: must be at least {MIN_INTERVAL_MS}",
            args.interval_ms
        )));
    }
    if args.migration_timeout_s == 0 {
        return Err(usage_error("--migration-timeout-s must be at least 1"));
    }
    if args.rate.is_some() {
        return Err(usage_error(
            "--rate is for --static runs; live runs take --pattern and --peak-rate",
        ));
    }
    // Checked here, not by clap: a run file's keys are each checked by their flag's parser.
    if let Some(n) = args.workers {
        return Err(usage_error(format!(
            "--workers {n} is for --static runs; a live run starts --max-workers (default \
             {DEFAULT_MAX_WORKERS}) and the planner uses as many as the load needs"
        )));
    }
    args.check_chaos_source()?;
    if let Some(path) = &args.cluster {
        // Read once up front: a bad file is refused before anything is said or started.
        crate::cmd::cluster::ClusterFile::load(path)?.resolve()?;
    }
    if let Some(text) = &args.moves {
        // Before any worker starts (a cluster file's worker count is checked once it is read).
        let most = match args.cluster {
            Some(_) => usize::MAX,
            None => args.max_workers.unwrap_or(DEFAULT_MAX_WORKERS),
        };
        let moves = parse_moves(text, most).map_err(|e| usage_error(format!("--moves {e}")))?;
        // A run of --duration (no --records to go past it) ends before a later move is due.
        if let Some(late) = moves.iter().find(|m| m.t_s >= args.duration)
            && args.records.is_none()
        {
            return Err(usage_error(format!(
                "--moves {text}: the move at {} s is due after the run's --duration {} s ends; \
                 it would never be made",
                late.t_s, args.duration
            )));
        }
    }
    if let Some(dir) = &args.out {
        // Before any worker starts: a run must not end with nowhere to put its files.
        out::check_dir(dir).map_err(|e| usage_error(format!("--out: {e}")))?;
    }
    Ok(())
}

/// For each of the model's edges, its index in the app's edge list (the order the workers
/// count chained requests in).
fn edge_slots(spec: &AppSpec, edges: &[(usize, usize, f64)]) -> anyhow::Result<Vec<usize>> {
    (edges.iter())
        .map(|&(f, t, _)| {
            let slot = spec.edges.iter().position(|e| (e.from, e.to) == (f, t));
            slot.ok_or_else(|| anyhow::anyhow!("the model has an edge {f} -> {t} the app has not"))
        })
        .collect()
}

/// `--chaos-migrations K` or `--moves T:N,...`: the moves made whatever the load.
fn mover(
    args: &RunArgs,
    slots: Slots,
    operators: usize,
) -> anyhow::Result<Option<Box<dyn Controller>>> {
    if let Some(text) = &args.moves {
        let moves = parse_moves(text, slots.workers.len())
            .map_err(|e| usage_error(format!("--moves {e}")))?;
        return Ok(Some(Box::new(Scripted::new(moves, slots, operators))));
    }
    Ok((args.chaos_migrations > 0)
        .then(|| Box::new(chaos(args, slots, operators)) as Box<dyn Controller>))
}

/// `--chaos-migrations K`: K random moves over the run's records.
fn chaos(args: &RunArgs, slots: Slots, operators: usize) -> Chaos {
    Chaos::new(
        args.chaos_migrations,
        // Without --records: spread over roughly the records the pattern offers (a ramp up
        // and down averages half its peak).
        args.records.unwrap_or(
            (args.peak_rate.unwrap_or(UNCAPPED_PEAK_PER_S) * args.duration * MEAN_RATE_OF_PEAK)
                .max(1.0) as u64,
        ),
        slots,
        operators,
        args.seed,
    )
}

/// Builds the policy's autoscaler for `n` workers and queues its initial placement as the
/// first move (made before any input).
fn start_autoscaler(
    live: &mut Live,
    args: &RunArgs,
    model: &AppModel,
    kind: PolicyKind,
    n: usize,
    first_rate: f64,
) -> anyhow::Result<()> {
    let mut acfg = AutoscaleConfig::new(kind, n);
    acfg.interval_us = args.interval_ms as f64 * 1e3;
    acfg.executors_per_worker = usize::from(args.executors);
    // W̄ starts at the cap: a capped worker has its cap's share of a core, however many
    // executors share it (the planner then takes off what the cost model does not price,
    // `clasp_controlplane::autoscale::Unpriced`).
    let executors = f64::from(args.executors);
    acfg.capacity_prior_us_per_s = Some(
        1e6 * args
            .worker_cpu
            .map_or(executors, |c| c.fraction.min(executors)),
    );
    acfg.capacity_known = args.worker_cpu.is_some();
    // A live worker pays the receiving side of every remote request it is sent (the network
    // thread's receipt and the hand-off to an executor): placement charges each side half of
    // β, as the busy-time estimator measures it. Charged to the sender only, the worker that
    // receives a heavy operator's input looks idle while it saturates (measured on WC).
    acfg.beta_receiver_share = LIVE_BETA_RECEIVER_SHARE;
    // A live worker's queue is bounded by the ingress's in-flight limit: a saturated one
    // holds tens of ms of work, not the prototype's 100 ms.
    acfg.saturation.wait_us = LIVE_SATURATION_WAIT_US;
    acfg.estimator_kind = EstimatorKind::parse(&args.estimator)
        .ok_or_else(|| usage_error(format!("--estimator {}: unknown", args.estimator)))?;
    acfg.packing = Packing::parse(&args.placement)
        .ok_or_else(|| usage_error(format!("--placement {}: unknown", args.placement)))?;
    let priors = live.priors.as_ref().map_or_else(
        || priors::parse(priors::BUILT_IN_PRIORS_US),
        |p| Ok(p.costs),
    )?;
    let mut auto = Autoscaler::new(model, acfg, priors, first_rate);
    // The workers start on the even spread (unless --spread or a resumed checkpoint's table
    // says otherwise): the first plan is a move from there.
    let from_spread =
        args.resume.is_none() && matches!(args.spread, crate::cmd::local::SpreadArg::Even);
    let d = if from_spread {
        auto.initial_from_spread(n)
    } else {
        auto.initial()
    };
    live.decisions.push(DecisionRow {
        t_s: 0.0,
        line: d.explanation.clone(),
    });
    // The first decision is one like the rest: in `--events` and in the decisions counter.
    live.watch.on_decision(0.0, &d.explanation);
    live.pending = Some(Move {
        routing: live.slot_routing(&d.routing),
        reason: format!("policy: {}", d.explanation),
    });
    live.auto = Some(auto);
    Ok(())
}

/// The run's record: the run view's JSON plus the planner's keys, and the rows behind them.
fn record(
    args: &RunArgs,
    workers: usize,
    view: &RunView<'_>,
    live: Live,
    report: &ClusterReport,
) -> anyhow::Result<RunRecord> {
    let migrations: Vec<MigrationRow> = report.migrations.iter().map(migration_row).collect();
    let est = live.auto.as_ref().map(|a| a.estimates());
    let mut summary = report::json(view);
    summary["policy"] = if args.moves.is_some() {
        "script".into()
    } else {
        args.policy.clone().into()
    };
    summary["pattern"] = args.pattern.clone().into();
    summary["peak_rate_per_s"] = args.peak_rate.into();
    summary["worker_cpu"] = args.worker_cpu.map(|c| c.fraction).into();
    summary["max_workers"] = workers.into();
    summary["decisions"] = serde_json::to_value(&live.decisions)?;
    summary["intervals"] = serde_json::to_value(&live.rows)?;
    summary["migrations"] = serde_json::to_value(&migrations)?;
    summary["estimates"] = match est {
        Some(e) => serde_json::json!({
            "alpha_us": e.alpha_us, "beta_us": e.beta_us, "gamma_us": e.gamma_us,
            "w_bar_us": e.w_bar_us,
            "alpha_samples": e.alpha_samples, "beta_samples": e.beta_samples,
            "gamma_samples": e.gamma_samples, "estimator": e.estimator,
            "wake_us": e.wake_us, "root_us": e.root_us,
            "unpriced_us_per_s": e.unpriced_us_per_s,
        }),
        None => serde_json::Value::Null,
    };
    summary["priors"] = live
        .priors
        .as_ref()
        .map_or(serde_json::Value::Null, Priors::json);
    Ok(RunRecord {
        summary,
        intervals: live.rows,
        migrations,
        decisions: live.decisions,
        workers: worker_rows(report),
    })
}

/// Every worker's figures per interval, as `workers.csv` has them.
fn worker_rows(report: &ClusterReport) -> Vec<WorkerRow> {
    let row = |t_s: f64, w: &WorkerInterval| WorkerRow {
        t_s,
        worker: w.worker as usize,
        cpu_us_per_s: w.cpu_us_per_s,
        exec_us_per_s: w
            .processed_per_s
            .iter()
            .zip(&w.exec_us)
            .map(|(n, e)| n * e)
            .sum(),
        local_per_s: w.edges_local_per_s.iter().sum(),
        remote_per_s: w.edges_remote_per_s.iter().sum(),
        remote_received_per_s: w.remote_received_per_s,
        roots_per_s: w.roots_per_s,
        destinations: w.destinations,
        busy_us_per_s: w.busy_us_per_s,
        sleeps_per_s: w.sleeps_per_s,
        sleep_cpu_us_per_s: w.sleep_cpu_us_per_s,
        throttled_periods: w.throttled_periods,
        batches_per_s: w.batches_per_s,
        exec_cpu_us_per_s: w.exec_cpu_us_per_s,
        exec_sleep_cpu_us_per_s: w.exec_sleep_cpu_us_per_s,
        exec_sleeps_per_s: w.exec_sleeps_per_s,
    };
    report
        .intervals
        .iter()
        .flat_map(|v| v.workers.iter().map(move |w| row(v.t_s, w)))
        .collect()
}

/// A migration as the planner reports it (`reason`: `policy`, `chaos`, `script` or `leave`).
fn migration_row(m: &MigrationRecord) -> MigrationRow {
    MigrationRow {
        epoch: m.epoch,
        t_s: m.t_s,
        workers_before: m.workers_before,
        workers_after: m.workers_after,
        key_groups_moved: m.key_groups_moved,
        planner_ms: m.planner_ms,
        narrowing_ms: m.narrowing_ms,
        worker_pause_ms: m.worker_pause_ms,
        marker_wait_ms: m.marker_wait_ms,
        exported: m.exported,
        forwarded: m.forwarded,
        held: m.held,
        gated: m.gated,
        admitted_during: m.admitted_during,
        reason: if m.reason == "chaos" {
            "chaos".into()
        } else if m.reason.starts_with("script") {
            "script".into()
        } else if m.reason.starts_with("leave") {
            "leave".into()
        } else {
            "policy".into()
        },
    }
}

/// The program as it was started (`clasp`, or a user's own binary built on
/// `clasp::cli::main_with`, whose operator kinds a joiner must have too).
fn this_program() -> String {
    std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "clasp".into())
}
