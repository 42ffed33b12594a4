//! `clasp worker`: one worker of a cluster file. It listens, authenticates its peers with the
//! cluster secret and runs the jobs drivers send it, one after another, until no job came for
//! `--job-timeout-s` (or `--max-jobs` were served), so it needs no supervisor to restart it
//! between runs (docs/cluster.md). With `--worker-cpu F` it runs in its own capped cgroup,
//! entered before any thread starts.

use crate::cgroup::{CpuCap, CpuList, enter_own};
use crate::cmd::cluster::{ClusterFile, NetArgs, read_secret};
use crate::cmd::usage_error;
use clap::Args;
use clasp_dataplane::cluster::node::{ClusterWorker, ClusterWorkerConfig, NodeError};
use clasp_dataplane::runtime::IdlePolicy;
use clasp_dataplane::transport::MAX_PEER_ID;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where a joining worker listens by default: loopback, a port the system picks.
const JOIN_LISTEN_DEFAULT: (std::net::Ipv4Addr, u16) = (std::net::Ipv4Addr::LOCALHOST, 0);

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// This worker's id in the cluster file (with --join: the id the run reserved for it).
    #[arg(long)]
    id: u32,
    /// Address to listen on (default: this worker's address in the cluster file, whose port
    /// the others dial: not port 0; with --join, 127.0.0.1 and a port the system picks). A
    /// joining worker tells the others this address, so it must be one they can reach (not
    /// 0.0.0.0).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The cluster file (TOML; docs/cluster.md).
    #[arg(long, required_unless_present = "join", conflicts_with = "join")]
    cluster: Option<PathBuf>,
    /// Join the running cluster whose driver listens at ADDR (a live `clasp run` or `clasp
    /// planner` that reserved this worker's id; it prints the command). The worker serves
    /// that run's job and exits.
    #[arg(long, value_name = "ADDR", requires = "cluster_id")]
    join: Option<SocketAddr>,
    /// With --join: the running cluster's id (the run prints it).
    #[arg(long, value_name = "N")]
    cluster_id: Option<u64>,
    /// File holding the cluster secret (default: the CLASP_CLUSTER_SECRET variable). Never
    /// on the command line.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Give up when no driver sent a job within this many seconds: an error before the first
    /// job, the normal end (exit 0) after one.
    #[arg(long, default_value_t = 300, value_parser = crate::cmd::limits::timeout_s())]
    job_timeout_s: u64,
    /// Exit after this many jobs (0: serve jobs until idle for --job-timeout-s). With 1, a
    /// failed job is the worker's failure (exit 1); otherwise it is reported and the worker
    /// waits for the next job.
    #[arg(long, default_value_t = 0)]
    max_jobs: u64,
    /// Cap this worker at F of one core (e.g. 0.3): it makes its own cgroup
    /// (`clasp-<pid>-<hex>/w<ID>`) with a CPU quota of F × 10 ms per 10 ms period, moves
    /// itself in before it starts any thread, and removes it on exit. F must be at least 0.1
    /// (the kernel's 1 ms minimum quota). Needs writable cgroups (root, or a delegated group).
    #[arg(long, value_name = "F", value_parser = CpuCap::parse_arg)]
    worker_cpu: Option<CpuCap>,
    /// Run on these CPUs only (e.g. 0,1 or 0-3), set before any thread starts; --pin (given
    /// by the driver) then pins executors inside this set.
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse_arg)]
    cpus: Option<CpuList>,
    /// What this worker's idle executors and network thread do, whatever the driver's job
    /// says (default: the job's `clasp run --idle`): `park`, `spin:US` (poll up to US µs of
    /// wall time, then sleep; `spin` alone: 50 µs) or `auto`.
    #[arg(long, value_name = "POLICY")]
    idle: Option<IdlePolicy>,
    /// On SIGTERM during a run, the worker leaves it: the driver moves its key groups to the
    /// other workers, then lets it go and it exits 0. A leave not done within this many
    /// seconds is a failure (exit 1). A second SIGTERM exits at once.
    #[arg(long, default_value_t = 30, value_parser = crate::cmd::limits::timeout_s())]
    leave_timeout_s: u64,
    #[command(flatten)]
    net: NetArgs,
}

/// `clasp worker`.
///
/// SIGTERM asks the worker to leave (see `--leave-timeout-s`; between jobs it exits 0 at once);
/// a second SIGTERM, SIGINT or SIGHUP ends it at once (its segments are anonymous, and the
/// cleanup registry removes its own cgroup, so it leaves nothing behind), and the driver of a
/// run it serves fails the run naming it.
pub fn run_worker_cmd(args: WorkerArgs) -> anyhow::Result<()> {
    crate::lifeline::die_with_parent()?;
    // First, while this process has one thread: every thread started later inherits the
    // group and the CPU set. The group is left and removed when `group` drops, or by the
    // cleanup registry when a signal ends the worker at once (no `Drop` runs then); the
    // registration drops first.
    let group = args
        .worker_cpu
        .as_ref()
        .map(|cap| enter_own(cap, args.id).map(Arc::new))
        .transpose()?;
    let id = args.id;
    let _group_cleanup = group.as_ref().map(|group| {
        let group = Arc::clone(group);
        crate::cleanup::register(move || {
            if let Err(e) = group.leave_now() {
                say(id, format!("cgroup cleanup: {e}"));
            }
        })
    });
    if let Some(cpus) = &args.cpus {
        cpus.apply_to_current_thread().map_err(usage_error)?;
    }
    // Signals first: one during the sweep (which reads every stale entry) ends the worker as
    // one later does, its group removed.
    let leave = on_signals(args.id)?;
    crate::stale::sweep_at_start();
    let cfg = config(&args, &leave)?;
    // A joiner serves the run it joined.
    let max_jobs = if args.join.is_some() {
        1
    } else {
        args.max_jobs
    };
    let mut worker = ClusterWorker::start(&cfg)?;
    say(args.id, format!("listening on {}", worker.local_addr()));
    // A joiner asks its run again while the run restarts (a recovery), but not for ever.
    let rejoin = args.join.map(|_| Duration::from_secs(args.job_timeout_s));
    serve_jobs(&mut worker, args.id, (max_jobs, rejoin), &leave)
}

/// How long a joiner whose join failed waits before it asks again.
const REJOIN_PAUSE: Duration = Duration::from_secs(1);

/// The bound address and how each job ended are what the command reports to whoever started
/// it (the address is the only way to learn a port chosen by the system): plain lines on
/// stderr, not log events a filter could hide. Not `eprintln!`, which panics when stderr is
/// full.
fn say(id: u32, line: String) {
    // One write: stderr is unbuffered, and a formatted write is a write per piece, which the
    // lines of the other workers sharing this stderr would cut into.
    let _ = std::io::stderr().write_all(format!("clasp worker {id}: {line}\n").as_bytes());
}

/// A cluster file's worker listening on `listen` where the file says `address`, which the
/// others dial. Port 0 (one the system picks, which nobody is told) is refused: the worker would
/// wait for a run that cannot reach it. Another port is said, not refused: it is right where
/// the file's port is forwarded to this one (a NAT, a container's published port).
fn check_listen_port(id: u32, listen: SocketAddr, address: SocketAddr) -> anyhow::Result<()> {
    if listen.port() == 0 {
        return Err(usage_error(format!(
            "--listen {listen}: the cluster file gives worker {id} the address {address}, which \
             the others dial; listen on port {} (any address of this host, e.g. 0.0.0.0:{}), \
             not one the system picks",
            address.port(),
            address.port()
        )));
    }
    if listen.port() != address.port() {
        say(
            id,
            format!(
                "listening on port {} where the cluster file says {address}: the others reach \
                 this worker only if port {} is forwarded to it",
                listen.port(),
                address.port()
            ),
        );
    }
    Ok(())
}

/// The worker's settings: from its cluster file, or for a joiner from `--join`.
fn config(args: &WorkerArgs, leave: &Arc<AtomicBool>) -> anyhow::Result<ClusterWorkerConfig> {
    let (cluster_id, workers, listen) = match (&args.cluster, args.join, args.cluster_id) {
        (Some(path), _, _) => {
            let file = ClusterFile::load(path)?;
            let workers = file.resolve()?;
            let me = workers.iter().find(|w| w.0 == args.id).ok_or_else(|| {
                usage_error(format!("worker {} is not in the cluster file", args.id))
            })?;
            let listen = args.listen.unwrap_or(me.1);
            check_listen_port(args.id, listen, me.1)?;
            (file.cluster_id, workers, listen)
        }
        (None, Some(_), Some(cluster_id)) => {
            if args.id == 0 || args.id > MAX_PEER_ID {
                return Err(usage_error(format!(
                    "--id {}: a worker's id is 1..={MAX_PEER_ID}",
                    args.id
                )));
            }
            let listen = args.listen.unwrap_or(JOIN_LISTEN_DEFAULT.into());
            if listen.ip().is_unspecified() {
                // A joiner tells the run where it listens; "anywhere" reaches nobody.
                return Err(usage_error(format!(
                    "--listen {listen}: a joining worker tells the others this address, so \
                     give one they can reach (IP:PORT)"
                )));
            }
            (cluster_id, vec![(args.id, listen)], listen)
        }
        _ => {
            return Err(usage_error(
                "give --cluster FILE, or --join ADDR --cluster-id N",
            ));
        }
    };
    Ok(ClusterWorkerConfig {
        id: args.id,
        listen,
        cluster_id,
        workers,
        secret: read_secret(args.secret_file.as_deref())?,
        limits: args.net.limits()?,
        job_timeout: Duration::from_secs(args.job_timeout_s),
        join: args.join,
        leave: Some(Arc::clone(leave)),
        leave_timeout: Duration::from_secs(args.leave_timeout_s),
        registry: crate::registry::get().clone(),
        idle: args.idle,
    })
}

/// Serves jobs until idle, `max_jobs` (0: no limit) were served, or the worker left. A joiner
/// (`rejoin`: how long it may keep asking) whose join fails asks again every [`REJOIN_PAUSE`],
/// and gives up with the last reason once that long passed without a job (counted from its
/// start, or from the end of a job it lost).
fn serve_jobs(
    worker: &mut ClusterWorker,
    id: u32,
    (max_jobs, rejoin): (u64, Option<Duration>),
    leave: &AtomicBool,
) -> anyhow::Result<()> {
    // Since when a joiner has been without a job (its budget for asking again).
    let mut jobless_since = std::time::Instant::now();
    let mut served = 0u64;
    // Jobs whose driver went away: not served (they do not count against --max-jobs), but a
    // worker that had them is idle after work, not a worker no driver ever reached.
    let mut abandoned = 0u64;
    // A joiner's last reason for asking again.
    let mut last_said: Option<String> = None;
    loop {
        let job = worker.run_job();
        if leave.load(Ordering::Acquire) {
            return match job {
                Ok(_) => {
                    say(id, "left the cluster (SIGTERM)".into());
                    Ok(())
                }
                Err(NodeError::Stopped) => {
                    say(id, "stopped (SIGTERM) while waiting for a job".into());
                    Ok(())
                }
                Err(e) => Err(e.into()),
            };
        }
        match job {
            Ok(exit) => say(
                id,
                format!(
                    "ran {} to the end{}",
                    exit.app,
                    if exit.errors.is_empty() {
                        String::new()
                    } else {
                        format!(" with faults: {}", exit.errors.join("; "))
                    }
                ),
            ),
            // Idle after serving: the normal end of a worker that is not told how many jobs.
            Err(NodeError::NoJob { timeout, .. }) if served + abandoned > 0 => {
                let also = match abandoned {
                    0 => String::new(),
                    n => format!(" (and {n} whose driver went away)"),
                };
                say(
                    id,
                    format!("no job within {timeout:?} after {served}{also}; exiting"),
                );
                return Ok(());
            }
            // The driver went away mid-job (it restarts the job after losing another worker,
            // or it died and is resumed): not a job served; wait for the next.
            Err(e @ NodeError::Driver(_)) if rejoin.is_some() => {
                if worker.had_job() {
                    // Its job ended with the driver gone: the budget starts now.
                    jobless_since = std::time::Instant::now();
                }
                if rejoin.is_some_and(|budget| jobless_since.elapsed() >= budget) {
                    return Err(anyhow::anyhow!(
                        "{e}; no run took this worker within --job-timeout-s"
                    ));
                }
                // Not taken, or taken and its job ended with the driver gone (a recovery
                // restarts the job): either way it asks the run again; the same reason is
                // said once, not every second.
                let line = format!("no job from the run: {e}; asking again every {REJOIN_PAUSE:?}");
                if last_said.as_ref() != Some(&line) {
                    say(id, line.clone());
                    last_said = Some(line);
                }
                std::thread::sleep(REJOIN_PAUSE);
                continue;
            }
            Err(e @ NodeError::Driver(_)) => {
                say(id, format!("the job failed: {e}; waiting for the next"));
                abandoned += 1;
                continue;
            }
            Err(e) if max_jobs != 1 && e.ends_only_the_job() => {
                say(id, format!("the job failed: {e}; waiting for the next"));
            }
            Err(e) => return Err(e.into()),
        }
        served += 1;
        if max_jobs > 0 && served >= max_jobs {
            return Ok(());
        }
    }
}

/// SIGTERM sets the returned flag (the worker then leaves its run). A second SIGTERM (status
/// 1), SIGINT (130) or SIGHUP (129: whoever started it is gone) ends the worker at once, after
/// the cleanup registry has run: it removes the cgroup of a worker capped by hand, which
/// `std::process::exit` would otherwise leave behind. On a thread of its own, since a signal
/// handler may not take locks or allocate (`crate::signals`).
fn on_signals(id: u32) -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| anyhow::anyhow!("installing the signal handler: {e}"))?;
    let leave = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("clasp-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if signal == SIGTERM && !leave.swap(true, Ordering::AcqRel) {
                    continue;
                }
                say(
                    id,
                    format!("{}: stopping now", crate::signals::name(signal)),
                );
                crate::cleanup::run_all();
                let status = match signal {
                    SIGTERM => 1,
                    other => i32::from(crate::signals::exit_status(other)),
                };
                std::process::exit(status);
            }
        })
        .map_err(|e| anyhow::anyhow!("starting the signal thread: {e}"))?;
    Ok(flag)
}
