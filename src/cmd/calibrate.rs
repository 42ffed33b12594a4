//! `clasp calibrate`: measures this machine's chained-request costs briefly and writes them as
//! the machine profile every later `clasp run` starts its estimator from.
//!
//! Why: the live estimator refines α, β, γ from what it observes, but it starts from priors, and
//! a start several times off the machine's real costs misplaces and misscales until it has
//! learned. The measurements are those of `clasp bench dispatch` (the real worker path for α,
//! the real transport on loopback for β and γ), with fewer records and repetitions, and without
//! the baselines and latencies that command adds for comparison.

use super::output;
use super::profile::{self, Machine, PROFILE_VERSION, Parent, Profile};
use super::usage_error;
use clap::Args;
use clasp_benches::dispatch::{DispatchOpts, RemoteCosts, process_cpu_s, remote_costs};
use clasp_benches::dispatch_local::measure_alpha;
use clasp_benches::wake::measure_wake_us;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much a calibration measures.
struct Effort {
    /// SYN records per α run.
    alpha_records: u64,
    /// Repetitions of every measurement (the median is kept).
    repetitions: u32,
    /// Requests per β run at batch ≥ 8.
    beta_requests: u64,
    /// Length of one γ run (ms).
    gamma_run_ms: u64,
    /// Rounds of γ runs (1, 2 and 4 destinations each; the median slope is kept).
    gamma_rounds: usize,
    /// While noise keeps the median slope from being positive, more γ rounds start until this
    /// long after the calibration began.
    extra_rounds_until: Duration,
    /// Sleeps and wake-ups timed for ω, and the gap between them.
    wakes: u64,
    wake_gap: Duration,
}

/// About 10 s on a 2-vCPU machine (under 20 s when noise needs extra γ rounds).
const FULL: Effort = Effort {
    alpha_records: 100_000,
    repetitions: 3,
    beta_requests: 300_000,
    gamma_run_ms: 200,
    gamma_rounds: 7,
    extra_rounds_until: Duration::from_secs(17),
    wakes: 2_000,
    wake_gap: Duration::from_micros(300),
};
/// About 3 s (under 8 s): for tests and a first look.
const QUICK: Effort = Effort {
    alpha_records: 15_000,
    repetitions: 3,
    beta_requests: 20_000,
    gamma_run_ms: 100,
    gamma_rounds: 5,
    extra_rounds_until: Duration::from_secs(6),
    wakes: 300,
    wake_gap: Duration::from_micros(300),
};
/// Other work on the host above this many cores, on average over the calibration, is warned
/// about: the figures are then likely off (preempted threads, shared caches).
const BUSY_HOST_CORES: f64 = 0.25;
/// The unit of `/proc/stat` (USER_HZ, 100 on every Linux architecture).
const PROC_STAT_TICKS_PER_S: f64 = 100.0;
/// The γ runs' total request rate: the same as `clasp bench dispatch`'s, so the two agree (the
/// CPU a destination costs depends on how often its batches leave).
const GAMMA_RATE_PER_S: u64 = 200_000;

#[derive(Args)]
#[command(
    after_help = "Conventions, in the planner's own units (the same as `estimates` in \
    `clasp run --json`):\n  \
    alpha_us  CPU µs per LOCAL chained request, sender and receiver together (one executor, \
    operators' own work excluded)\n  \
    beta_us   CPU µs per REMOTE chained request at the transport's default batch (32 KiB of \
    small requests), both sides: the executors' hand-offs (alpha_us) plus the transport's \
    whole-process CPU (threads and kernel work); beta_by_batch_us lists it at other batch \
    sizes, transport_by_batch_us the transport's part alone\n  \
    gamma_us  CPU µs per second per distinct remote destination, with one batch per \
    destination per ms (a live executor's turn at moderate load)\n  \
    wake_us   CPU µs a parked thread spends per sleep and wake-up (its own side); compare \
    `wake_us` in `clasp run --json`'s estimates\n\n\
    The profile is read by `clasp run` unless --cost-priors-us or --no-profile is given."
)]
pub struct CalibrateArgs {
    /// Print one JSON object (the profile and `path`) instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the profile here: a regular file, replaced, or a new name in a directory that
    /// exists; a symbolic link is followed (default: $XDG_CONFIG_HOME/clasp/profile.json, else
    /// ~/.config/clasp/profile.json, whose directory is made).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Measure less (about 3 s instead of about 10 s): noisier figures.
    #[arg(long)]
    quick: bool,
}

/// `clasp calibrate`.
pub fn run(args: CalibrateArgs) -> anyhow::Result<()> {
    let (path, parent) = destination(args.out.as_deref())?;
    let effort = if args.quick { &QUICK } else { &FULL };
    let progress = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let say = |m: &str| {
        if progress {
            let _ = writeln!(std::io::stderr(), "{m}");
        }
    };
    let host = HostLoad::start();
    say("calibrate: local chained requests (α) ...");
    let alpha = measure_alpha(effort.alpha_records, effort.repetitions)
        .map_err(|e| anyhow::anyhow!("measuring α: {e}"))?;
    say("calibrate: remote chained requests (β, γ) ...");
    let remote = remote_costs(
        &DispatchOpts {
            requests: effort.beta_requests,
            repetitions: effort.repetitions as usize,
            gamma_rate_per_s: GAMMA_RATE_PER_S,
            gamma_run_ms: effort.gamma_run_ms,
            ..DispatchOpts::default()
        },
        effort.gamma_rounds,
        host.started + effort.extra_rounds_until,
    );
    say("calibrate: a sleep and wake-up (ω) ...");
    let wake_us = measure_wake_us(effort.wakes, effort.wake_gap);
    let mut profile = build(alpha.median, &remote);
    profile.wake_us = Some(wake_us).filter(|w| w.is_finite() && *w > 0.0);
    profile.other_work_cores = host.other_work_cores();
    if let Some(cores) = profile.other_work_cores.filter(|&c| c > BUSY_HOST_CORES) {
        let _ = writeln!(
            std::io::stderr(),
            "clasp: warning: other work on this machine used {cores:.1} cores on average while \
             calibrating: the figures may be off; calibrate again when the machine is quieter"
        );
    }
    profile.check().map_err(|e| {
        anyhow::anyhow!(
            "the measurement is not usable ({e}), probably noise from other work on this \
             machine; nothing was written: run `clasp calibrate` again"
        )
    })?;
    profile::save(&path, &profile, parent)
        .map_err(|e| anyhow::anyhow!("writing the profile: {e}"))?;
    let mut out = output::stdout();
    if args.json {
        let mut v = serde_json::to_value(&profile)?;
        v["path"] = path.display().to_string().into();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        write!(out, "{}", table(&profile))?;
        writeln!(out, "wrote {}", path.display())?;
    }
    out.finish()
}

/// Where the profile goes: `--out`, else the default path (whose directory may be made), and
/// checked before anything is measured, so a target the profile cannot replace (a directory,
/// a device, a missing directory) is a usage error at once rather than a failure after seconds
/// of measurement.
fn destination(out: Option<&Path>) -> anyhow::Result<(PathBuf, Parent)> {
    let (path, parent) = match out {
        Some(p) => (p.to_path_buf(), Parent::MustExist),
        None => (
            profile::default_path().ok_or_else(|| {
                usage_error(
                    "neither XDG_CONFIG_HOME nor HOME is set: give --out FILE for the profile",
                )
            })?,
            Parent::Create,
        ),
    };
    profile::target(&path, parent).map_err(|e| match out {
        Some(_) => usage_error(format!("--out: {e}")),
        None => usage_error(format!(
            "the profile's default path: {e} (or give --out FILE)"
        )),
    })?;
    Ok((path, parent))
}

/// What the whole host did during a calibration besides this process.
struct HostLoad {
    started: std::time::Instant,
    host_busy_s: Option<f64>,
    own_cpu_s: f64,
}

impl HostLoad {
    fn start() -> HostLoad {
        HostLoad {
            started: std::time::Instant::now(),
            host_busy_s: host_busy_s(),
            own_cpu_s: process_cpu_s(),
        }
    }

    /// Cores other processes (and the hypervisor's other guests) used on average since
    /// [`HostLoad::start`]; None where `/proc/stat` cannot be read.
    fn other_work_cores(&self) -> Option<f64> {
        let host = host_busy_s()? - self.host_busy_s?;
        let own = process_cpu_s() - self.own_cpu_s;
        let wall = self.started.elapsed().as_secs_f64().max(1e-3);
        Some(((host - own) / wall).max(0.0))
    }
}

/// CPU seconds the whole host has spent not idle (all CPUs, steal included), from `/proc/stat`.
fn host_busy_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<f64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let all: f64 = fields.iter().take(8).sum();
    Some((all - fields.get(3)? - fields.get(4)?) / PROC_STAT_TICKS_PER_S)
}

/// The profile of the measured figures (ns → µs). β is α plus the transport's cost: a remote
/// request is handed off by executors as a local one is (the sending executor routes and
/// writes it, the receiving one pops and parses it), and the transport carries it between
/// them — the live estimator's convention, where β is the executors' α plus the network side.
fn build(alpha_ns: f64, remote: &RemoteCosts) -> Profile {
    let alpha_us = alpha_ns / 1e3;
    let transport_us: BTreeMap<String, f64> = remote
        .ns_per_request_by_batch
        .iter()
        .map(|(b, ns)| (b.to_string(), ns / 1e3))
        .collect();
    Profile {
        version: PROFILE_VERSION,
        alpha_us,
        beta_us: transport_us
            .get(&remote.default_batch.to_string())
            .map_or(f64::NAN, |t| alpha_us + t),
        gamma_us: remote.gamma_us_per_s(),
        beta_by_batch_us: transport_us
            .iter()
            .map(|(b, t)| (b.clone(), alpha_us + t))
            .collect(),
        transport_by_batch_us: transport_us,
        batch: remote.default_batch,
        machine: Machine::this(),
        created_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        other_work_cores: None,
        wake_us: None,
    }
}

/// The profile as a short table.
fn table(p: &Profile) -> String {
    format!(
        "machine: {}, {} CPUs, Linux {}\n\
         α {:>10.3} µs    CPU per local chained request (both sides)\n\
         β {:>10.3} µs    CPU per remote chained request at batch {} (both sides): α + the \
         transport's\n\
         \x20 by batch (µs)    {}\n\
         \x20 transport (µs)   {}\n\
         γ {:>10.0} µs/s  CPU per second per remote destination\n\
         ω {:>10} µs    CPU per sleep and wake-up of a parked thread (the sleeper's)\n",
        p.machine.cpu_model,
        p.machine.cpus,
        p.machine.kernel,
        p.alpha_us,
        p.beta_us,
        p.batch,
        by_batch(&p.beta_by_batch_us),
        by_batch(&p.transport_by_batch_us),
        p.gamma_us,
        p.wake_us
            .map_or_else(|| "n/a".to_owned(), |w| format!("{w:.3}")),
    )
}

/// `batch: µs` pairs in batch order.
fn by_batch(by_batch_us: &BTreeMap<String, f64>) -> String {
    let mut batches: Vec<(usize, f64)> = by_batch_us
        .iter()
        .filter_map(|(b, us)| Some((b.parse().ok()?, *us)))
        .collect();
    batches.sort_by_key(|&(b, _)| b);
    let pairs: Vec<String> = batches
        .iter()
        .map(|(b, us)| format!("{b}: {us:.3}"))
        .collect();
    pairs.join(", ")
}
