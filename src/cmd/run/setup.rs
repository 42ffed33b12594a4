//! From `clasp run`'s options to a running driver: check the options, start the local workers
//! (or read the cluster file of running ones), build the driver's settings, and run the driver
//! so that a failure stops the workers this run started and says how they exited.

use super::args::RunArgs;
use super::interrupt::Interruptible;
use crate::cmd::cluster::{ClusterFile, Spawned, WorkerLimits, read_secret, spawn_workers};
use crate::cmd::limits::{
    check_executors, check_positive, check_rate, check_ring_bytes, check_ring_memory,
    check_workers_memory,
};
use crate::cmd::local::SpreadArg;
use crate::cmd::usage_error;
use clasp_dataplane::cluster::control::Controller;
use clasp_dataplane::cluster::driver::{ClusterReport, DriverConfig, run_driver_with};
use clasp_dataplane::routing::Spread;
use clasp_dataplane::sink::SinkTarget;
use clasp_dataplane::transport::PeerId;
use clasp_operators::AppSpec;
use std::time::Duration;

/// How long the driver waits for every worker to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a failed run gives the workers to print their side before they are stopped.
const FAILURE_GRACE: Duration = Duration::from_millis(100);

/// Validates the cluster options, starts `spawn` local workers (or reads the cluster file)
/// and returns the driver's settings, with `joinable` more ids reserved for workers that join.
pub fn prepare(
    args: &RunArgs,
    spawn: Option<usize>,
    joinable: usize,
    spec: &AppSpec,
    records: u64,
) -> anyhow::Result<(DriverConfig, Spawned)> {
    check(args)?;
    if let Some(n) = spawn {
        let flag = match (args.static_, args.start_workers) {
            (true, _) => "--workers",
            (false, Some(_)) => "--start-workers",
            (false, None) => "--max-workers",
        };
        check_workers_memory(args.ring_bytes, usize::from(args.executors), n, flag)?;
    }
    args.source
        .check()
        .map_err(|e| usage_error(e.to_string()))?;
    // A cluster file's workers write their sink files on their own hosts.
    crate::cmd::source::check_sink(&args.source, args.sink.as_ref(), spawn.is_some())?;
    let limits = args.net.limits()?;
    check_faults(args, spawn)?;
    // Before any worker starts: a bad checkpoint directory is refused with nothing to stop.
    let checkpoint = super::recovery::config(args, spec, records)?;
    let worker_limits = WorkerLimits {
        cpu: args.worker_cpu,
        cpus: args.cpus.clone(),
        inherit_stdout: args.sink == Some(SinkTarget::Stdout),
    };
    // Workers this run starts share this host and one file, emptied before they append to it;
    // a cluster file's workers each write their own `PATH.w<ID>` on their host.
    let sink_per_worker = spawn.is_none();
    // A resumed run appends to what the run it resumes wrote.
    if let (Some(sink), false, None) = (&args.sink, sink_per_worker, &args.resume) {
        sink.truncate_shared()?;
    }
    let (file, secret, spawned) = match (spawn, &args.cluster) {
        (Some(n), _) => {
            // Workers that join need the secret: the run's own, not a fresh one.
            let shared = (joinable > 0).then_some(args.secret_file.as_deref());
            spawn_workers(n, &args.net, &worker_limits, shared)?
        }
        (None, Some(path)) => (
            ClusterFile::load(path)?,
            read_secret(args.secret_file.as_deref())?,
            Spawned::none(),
        ),
        (None, None) => {
            return Err(usage_error("give a worker count or --cluster FILE"));
        }
    };
    let app_toml = if args.app_file.is_some() {
        spec.to_toml_string()
    } else {
        String::new()
    };
    let cfg = DriverConfig {
        listen: args.driver_listen,
        advertise: args.driver_advertise,
        cluster_id: file.cluster_id,
        workers: file.resolve()?,
        // Workers started here share this terminal (a cluster file's log on their hosts).
        workers_log_here: spawn.is_some(),
        joinable: (0..joinable as u32)
            .map(|i| file.workers.len() as u32 + 1 + i)
            .collect(),
        secret,
        limits,
        app_name: spec.name.clone(),
        app_toml,
        executors: args.executors,
        spread: match args.spread {
            SpreadArg::Even => Spread::Even,
            SpreadArg::Alternate => Spread::Alternate,
        },
        ring_bytes: args.ring_bytes,
        pin: args.pin,
        idle: args.idle,
        records,
        seed: args.seed,
        rate_per_s: args.rate,
        max_in_flight: args.max_in_flight,
        sample_every: args.sample_every,
        ready_timeout: READY_TIMEOUT,
        stall_timeout: Duration::from_secs(args.stall_timeout_s),
        interval: Duration::from_millis(args.interval_ms),
        migration_timeout: Duration::from_secs(args.migration_timeout_s),
        copy_ahead: Duration::from_millis(args.copy_ahead_ms),
        sink: args.sink.clone(),
        sink_per_worker,
        source: args.source.clone(),
        checkpoint,
        faults: args.fault.clone(),
    };
    Ok((cfg, spawned))
}

/// `--fault` (testing) names workers this run starts (ids 1..=N), before any starts: a worker
/// of a cluster file runs elsewhere, and an id past N would only fail the run at its end.
fn check_faults(args: &RunArgs, spawn: Option<usize>) -> anyhow::Result<()> {
    if args.fault.is_empty() {
        return Ok(());
    }
    let Some(n) = spawn else {
        return Err(usage_error(
            "--fault kills or stops a worker this run starts; the workers of --cluster FILE \
             run elsewhere",
        ));
    };
    if args.checkpoint_interval_ms == Some(0) {
        // Faults strike once the run has checkpointed: without any, none would.
        return Err(usage_error(
            "--fault tests recovery, which needs checkpoints: --checkpoint-interval-ms 0 takes \
             none",
        ));
    }
    match args
        .fault
        .iter()
        .find(|f| f.worker == 0 || f.worker as usize > n)
    {
        Some(f) => Err(usage_error(format!(
            "--fault: no worker {} in this run (it starts workers 1..={n})",
            f.worker
        ))),
        None => Ok(()),
    }
}

/// The options every cluster run checks, live or static.
fn check(args: &RunArgs) -> anyhow::Result<()> {
    check_rate("--rate", args.rate)?;
    check_ring_bytes(args.ring_bytes)?;
    check_executors(usize::from(args.executors))?;
    check_ring_memory(args.ring_bytes, usize::from(args.executors))?;
    check_positive(&[
        ("--max-in-flight", args.max_in_flight),
        ("--sample-every", args.sample_every),
        ("--interval-ms", args.interval_ms),
    ])?;
    if args.cluster.is_some() && (args.worker_cpu.is_some() || args.cpus.is_some()) {
        return Err(usage_error(
            "--worker-cpu and --cpus apply to the workers this run starts; the workers of \
             --cluster FILE run already: start each with `clasp worker --worker-cpu F` \
             (and --cpus LIST) instead",
        ));
    }
    check_driver_address(args)
}

/// The address the workers connect back to must be one they can reach: `0.0.0.0` (or `[::]`)
/// is where the driver may listen, but a worker on another host that dials it dials itself.
/// Workers this run starts share its host, where it works.
fn check_driver_address(args: &RunArgs) -> anyhow::Result<()> {
    let Some(path) = &args.cluster else {
        return Ok(());
    };
    match args.driver_advertise {
        Some(a) if a.ip().is_unspecified() => Err(usage_error(format!(
            "--driver-advertise {a}: the workers of --cluster FILE connect to it, so it must \
             be an address they reach (this host's, as they see it)"
        ))),
        None if args.driver_listen.ip().is_unspecified() => Err(usage_error(format!(
            "--driver-listen {}: the workers of --cluster FILE connect back to the address the \
             driver advertises, and {} is none they can reach: give --driver-advertise \
             HOST:PORT (this host's address as they see it, and the port)",
            args.driver_listen,
            args.driver_listen.ip()
        ))),
        // A file that does not load is refused where it is read for the run.
        _ => match ClusterFile::load(path).and_then(|f| f.resolve()) {
            Ok(workers) => check_driver_reachable(args, &workers),
            Err(_) => Ok(()),
        },
    }
}

/// A driver that advertises a loopback address (the default listen address, 127.0.0.1) to
/// workers on other hosts is one they cannot reach: each would dial itself, and the run would
/// wait out its ready timeout. Refused before anything else is said, naming the options.
fn check_driver_reachable(
    args: &RunArgs,
    workers: &[(PeerId, std::net::SocketAddr)],
) -> anyhow::Result<()> {
    let advertised = args.driver_advertise.unwrap_or(args.driver_listen);
    // A worker at one of this host's own addresses (its LAN address, say) reaches a loopback
    // driver as well: only one that no socket here can bind is elsewhere.
    let elsewhere = |a: &std::net::SocketAddr| {
        !a.ip().to_canonical().is_loopback() && std::net::UdpSocket::bind((a.ip(), 0)).is_err()
    };
    let Some((id, remote)) = workers.iter().find(|(_, a)| elsewhere(a)) else {
        return Ok(());
    };
    if !advertised.ip().to_canonical().is_loopback() {
        return Ok(());
    }
    let option = match args.driver_advertise {
        Some(_) => "--driver-advertise",
        None => "--driver-listen",
    };
    Err(usage_error(format!(
        "{option} {advertised}: worker {id} of --cluster FILE is at {remote}, and a loopback \
         address is none it can reach: give --driver-listen 0.0.0.0:PORT --driver-advertise \
         HOST:PORT (this host's address as the workers see it, and the port)"
    )))
}

/// Runs the driver (stopped early by SIGINT/SIGTERM); on failure stops the workers this run
/// started and says how they exited.
pub fn drive(
    mut spawned: Spawned,
    spec: &AppSpec,
    cfg: &DriverConfig,
    ctl: &mut dyn Controller,
) -> anyhow::Result<ClusterReport> {
    let mut ctl = Interruptible {
        inner: ctl,
        stop: crate::signals::stop_flag(),
        workers: &mut spawned,
    };
    let result = run_driver_with(spec, cfg, &mut ctl);
    match result {
        Ok(mut report) => {
            report.errors.extend(spawned.finish(false));
            Ok(report)
        }
        Err(e) => {
            // Give the workers a moment to print their side, then stop them.
            std::thread::sleep(FAILURE_GRACE);
            let mut exits = spawned.failures();
            spawned.finish(true);
            let mut msg = format!("the cluster run failed: {e}");
            // An exit the error names already (a worker gone before it was ready) is not
            // said twice.
            exits.retain(|x| {
                let pid = x.split("(pid ").nth(1).and_then(|r| r.split(')').next());
                pid.is_none_or(|p| !msg.contains(&format!("(pid {p})")))
            });
            if !exits.is_empty() {
                msg.push_str(&format!(" ({})", exits.join("; ")));
            }
            anyhow::bail!(msg);
        }
    }
}
