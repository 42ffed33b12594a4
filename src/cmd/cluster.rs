//! `clasp worker` and `clasp run --static`: a static cluster of worker processes and a driver
//! (docs/cluster.md). `clasp run --static --workers N` starts N `clasp worker` processes on
//! 127.0.0.1 and drives them; `clasp run --static --cluster FILE` drives workers that are
//! already running (on this host or others). Either way it prints what `clasp local` prints.

use crate::cmd::apps::load_app;
use crate::cmd::local::SpreadArg;
use crate::cmd::usage_error;
use anyhow::Context;
use clap::Args;
use clasp_dataplane::cluster::control::{Chaos, Controller, Static};
use clasp_dataplane::cluster::driver::{ClusterReport, DriverConfig, run_driver_with};
use clasp_dataplane::cluster::worker::{ClusterWorkerConfig, run_cluster_worker};
use clasp_dataplane::routing::Slots;
use clasp_dataplane::routing::Spread;
use clasp_dataplane::transport::{ClusterSecret, Limits, MAX_PEER_ID, PeerId};
use clasp_operators::AppSpec;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable holding the cluster secret (when no `--secret-file`).
pub const SECRET_ENV: &str = "CLASP_CLUSTER_SECRET";
/// Most workers `clasp run --static --workers N` starts on this machine.
const MAX_LOCAL_WORKERS: usize = 64;
/// How long spawned workers have to exit after the run.
const WORKER_EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of the random secret `clasp run` makes for the workers it starts.
const GENERATED_SECRET_BYTES: usize = 32;

/// The cluster file (TOML; docs/cluster.md).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Bound into every handshake: workers of another cluster are refused.
    pub cluster_id: u64,
    /// The workers, in the order key groups are spread over.
    #[serde(rename = "worker")]
    pub workers: Vec<WorkerEntry>,
}

/// One worker of a cluster file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerEntry {
    /// 1..=4095 (0 is the driver).
    pub id: u32,
    /// `host:port` other workers and the driver connect to.
    pub address: String,
}

impl ClusterFile {
    fn load(path: &Path) -> anyhow::Result<ClusterFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the cluster file {}", path.display()))?;
        let f: ClusterFile = toml::from_str(&text)
            .map_err(|e| usage_error(format!("cluster file {}: {e}", path.display())))?;
        f.check()
            .map_err(|e| usage_error(format!("cluster file {}: {e}", path.display())))?;
        Ok(f)
    }

    fn check(&self) -> Result<(), String> {
        if self.workers.is_empty() {
            return Err("no [[worker]]".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for w in &self.workers {
            if w.id == 0 || w.id > MAX_PEER_ID {
                return Err(format!("worker id {} is not in 1..={MAX_PEER_ID}", w.id));
            }
            if !seen.insert(w.id) {
                return Err(format!("worker id {} appears twice", w.id));
            }
        }
        Ok(())
    }

    fn resolve(&self) -> anyhow::Result<Vec<(PeerId, SocketAddr)>> {
        self.workers
            .iter()
            .map(|w| {
                use std::net::ToSocketAddrs;
                let a = w
                    .address
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut i| i.next())
                    .ok_or_else(|| {
                        usage_error(format!("worker {}: cannot resolve {:?}", w.id, w.address))
                    })?;
                Ok((w.id, a))
            })
            .collect()
    }

    fn to_toml(&self) -> String {
        let mut s = format!(
            "# written by clasp run --static\ncluster_id = {}\n",
            self.cluster_id
        );
        for w in &self.workers {
            s.push_str(&format!(
                "\n[[worker]]\nid = {}\naddress = \"{}\"\n",
                w.id, w.address
            ));
        }
        s
    }
}

fn read_secret(file: Option<&Path>) -> anyhow::Result<ClusterSecret> {
    let bytes = match file {
        Some(p) => {
            let mut b = std::fs::read(p)
                .with_context(|| format!("reading the secret file {}", p.display()))?;
            while b.last().is_some_and(|c| c.is_ascii_whitespace()) {
                b.pop();
            }
            b
        }
        None => std::env::var(SECRET_ENV)
            .map_err(|_| {
                usage_error(format!(
                    "no cluster secret: give --secret-file PATH or set {SECRET_ENV}"
                ))
            })?
            .into_bytes(),
    };
    ClusterSecret::new(bytes).map_err(|e| usage_error(e.to_string()))
}

/// Transport settings shared by `worker` and `run`.
#[derive(Args, Debug, Clone)]
pub struct NetArgs {
    /// Flush a batch at this many bytes.
    #[arg(long, default_value_t = clasp_dataplane::transport::DEFAULT_BATCH_BYTES_MAX)]
    batch_bytes: usize,
    /// ... or when its first request is this old (µs).
    #[arg(long, default_value_t = clasp_dataplane::transport::DEFAULT_BATCH_AGE_MAX_US)]
    batch_age_us: u64,
    /// Data credit granted to each sender (bytes in flight).
    #[arg(long, default_value_t = clasp_dataplane::transport::DEFAULT_DATA_CREDIT_BYTES)]
    data_credit_bytes: u32,
}

impl NetArgs {
    fn limits(&self) -> anyhow::Result<Limits> {
        let l = Limits {
            batch_bytes_max: self.batch_bytes,
            batch_age_max_us: self.batch_age_us,
            data_credit_bytes: self.data_credit_bytes,
            ..Limits::default()
        };
        l.validate().map_err(|e| usage_error(e.to_string()))?;
        Ok(l)
    }

    fn to_args(&self) -> Vec<String> {
        vec![
            "--batch-bytes".into(),
            self.batch_bytes.to_string(),
            "--batch-age-us".into(),
            self.batch_age_us.to_string(),
            "--data-credit-bytes".into(),
            self.data_credit_bytes.to_string(),
        ]
    }
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// This worker's id in the cluster file.
    #[arg(long)]
    id: u32,
    /// Address to listen on (default: this worker's address in the cluster file).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The cluster file (TOML; docs/cluster.md).
    #[arg(long)]
    cluster: PathBuf,
    /// File holding the cluster secret (default: the CLASP_CLUSTER_SECRET variable). Never
    /// on the command line.
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Give up when no driver sent a job within this many seconds.
    #[arg(long, default_value_t = 300)]
    job_timeout_s: u64,
    #[command(flatten)]
    net: NetArgs,
}

pub fn run_worker_cmd(args: WorkerArgs) -> anyhow::Result<()> {
    let file = ClusterFile::load(&args.cluster)?;
    let workers = file.resolve()?;
    let me = workers
        .iter()
        .find(|w| w.0 == args.id)
        .ok_or_else(|| usage_error(format!("worker {} is not in the cluster file", args.id)))?;
    let cfg = ClusterWorkerConfig {
        id: args.id,
        listen: args.listen.unwrap_or(me.1),
        cluster_id: file.cluster_id,
        workers: workers.clone(),
        secret: read_secret(args.secret_file.as_deref())?,
        limits: args.net.limits()?,
        job_timeout: Duration::from_secs(args.job_timeout_s),
    };
    let exit = run_cluster_worker(&cfg, |addr| {
        eprintln!("clasp worker {}: listening on {addr}", args.id)
    })
    .map_err(anyhow::Error::msg)?;
    eprintln!(
        "clasp worker {}: ran {} to the end{}",
        args.id,
        exit.app,
        if exit.errors.is_empty() {
            String::new()
        } else {
            format!(" with faults: {}", exit.errors.join("; "))
        }
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A static cluster: workers and placement fixed for the run (no planner; with
    /// --chaos-migrations, random moves). Without it: the live planner autoscales.
    #[arg(long = "static")]
    pub(crate) static_: bool,
    /// Static runs: start this many `clasp worker` processes on 127.0.0.1.
    #[arg(long, conflicts_with_all = ["cluster", "max_workers"])]
    pub(crate) workers: Option<usize>,
    /// Live runs: start this many `clasp worker` processes (the most the planner may use; the
    /// ones it does not use idle, parked).
    #[arg(long, conflicts_with = "cluster")]
    pub(crate) max_workers: Option<usize>,
    /// Live runs: the scaling policy.
    #[arg(long, default_value = "clasp", value_parser = ["clasp", "faasflow", "zhang24", "faasflow-sp", "zhang24-sp", "static"])]
    pub(crate) policy: String,
    /// Live runs: the input rate over time: constant, steps, gradual (a ramp up and down),
    /// burst (shapes scaled to --peak-rate and --duration), or a file of `t_s,rate_per_s`
    /// lines (absolute rates, each holding until the next line's time).
    #[arg(long, default_value = "gradual")]
    pub(crate) pattern: String,
    /// Live runs: the pattern's peak input rate (records per second).
    #[arg(long, default_value_t = 250_000.0)]
    pub(crate) peak_rate: f64,
    /// Live runs: how long to admit input (seconds), unless --records comes first.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) duration: f64,
    /// Live runs: write the JSON summary, per-interval CSV and SVG plots into this directory.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Live runs: the estimator's starting α,β,γ in µs (local hand-off, remote hand-off, per
    /// remote destination per second); it refines them from saturated intervals. `clasp bench
    /// dispatch` measures α and β on this machine.
    #[arg(long, default_value = "0.3,1,50")]
    pub(crate) cost_priors_us: String,
    /// Metrics interval (ms): workers report counters, the planner looks at them.
    #[arg(long, default_value_t = 250)]
    pub(crate) interval_ms: u64,
    /// Use the (already running) workers of this cluster file instead.
    #[arg(long)]
    pub(crate) cluster: Option<PathBuf>,
    /// Secret file for --cluster (default: CLASP_CLUSTER_SECRET). Workers started by
    /// --workers get a fresh random secret.
    #[arg(long)]
    pub(crate) secret_file: Option<PathBuf>,
    /// Built-in app name (see `clasp apps`; live runs default to wc).
    #[arg(long, conflicts_with = "app_file")]
    pub(crate) app: Option<String>,
    /// App file (TOML).
    #[arg(long)]
    pub(crate) app_file: Option<PathBuf>,
    /// Input records to admit (static runs: default 100000; live runs: stop at this many or
    /// at --duration, whichever comes first).
    #[arg(long)]
    pub(crate) records: Option<u64>,
    /// Generator seed (the same as for `clasp oracle`).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Input rate in records per second (default: as fast as the cluster takes them).
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// Print one JSON object (the keys of `clasp local --json`).
    #[arg(long)]
    pub(crate) json: bool,
    /// Executor threads per worker.
    #[arg(long, default_value_t = 1)]
    pub(crate) executors: u16,
    /// How key groups are spread over all workers' executors.
    #[arg(long, value_enum, default_value_t = SpreadArg::Even)]
    pub(crate) spread: SpreadArg,
    /// Capacity of each request ring in bytes (a power of two ≥ 4096).
    #[arg(long, default_value_t = 1 << 20)]
    pub(crate) ring_bytes: usize,
    /// Roots admitted and not yet completed, at most.
    #[arg(long, default_value_t = 4096)]
    pub(crate) max_in_flight: u64,
    /// Track 1 in N roots for latency (and the in-flight bound).
    #[arg(long, default_value_t = 1)]
    pub(crate) sample_every: u64,
    /// Pin executors to cores when there are enough.
    #[arg(long)]
    pub(crate) pin: bool,
    /// The driver's listen address (workers connect back to it).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) driver_listen: SocketAddr,
    /// The address workers use to reach the driver (default: the bound listen address).
    #[arg(long)]
    pub(crate) driver_advertise: Option<SocketAddr>,
    /// Fail when nothing progresses for this many seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) stall_timeout_s: u64,
    /// Testing mode: K live migrations at random moments (seeded by --seed) to random worker
    /// counts and placements while the input flows; the result must still equal the oracle.
    #[arg(long, default_value_t = 0)]
    pub(crate) chaos_migrations: usize,
    /// Fail a migration that does not complete within this many seconds.
    #[arg(long, default_value_t = 30)]
    pub(crate) migration_timeout_s: u64,
    #[command(flatten)]
    pub(crate) net: NetArgs,
}

fn random_secret() -> anyhow::Result<String> {
    let mut b = [0u8; GENERATED_SECRET_BYTES];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for a cluster secret")?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Ports for local workers come from below the kernel's ephemeral range, so no `bind(0)` or
/// outgoing connection of any process can take one between the moment we pick it and the
/// moment the worker binds it.
const LOCAL_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A free port on 127.0.0.1, outside the ephemeral range, held by the returned socket until
/// the caller drops it (just before the worker that will bind it starts), so two concurrent
/// runs cannot pick the same one. The socket is bound but never listens: a worker that
/// connects to the port early is refused (and retries) instead of reaching us.
fn free_port() -> anyhow::Result<(u16, rustix::fd::OwnedFd)> {
    let mut seed = [0u8; 2];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
        .context("reading /dev/urandom")?;
    let span = LOCAL_PORTS.end - LOCAL_PORTS.start;
    let start = u16::from_le_bytes(seed) % span;
    for i in 0..span {
        let port = LOCAL_PORTS.start + (start + i) % span;
        use rustix::net::{AddressFamily, SocketFlags, SocketType, bind, ipproto, socket_with};
        // Close-on-exec: the workers we start must not inherit the ports held for the others.
        let fd = socket_with(
            AddressFamily::INET,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            Some(ipproto::TCP),
        )
        .context("creating a socket")?;
        let addr = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
        if bind(&fd, &addr).is_ok() {
            return Ok((port, fd));
        }
    }
    anyhow::bail!("no free port on 127.0.0.1 in {LOCAL_PORTS:?}")
}

/// Worker processes this run started; killed (by their own pids) if the run fails.
pub(crate) struct Spawned {
    children: Vec<(PeerId, Child)>,
    dir: Option<PathBuf>,
}

impl Spawned {
    fn failures(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, c) in &mut self.children {
            if let Ok(Some(st)) = c.try_wait()
                && !st.success()
            {
                out.push(format!("worker {id} (pid {}) exited with {st}", c.id()));
            }
        }
        out
    }

    /// Waits for the workers to exit (they do after the driver's bye); kills stragglers.
    fn finish(&mut self, kill_now: bool) -> Vec<String> {
        let deadline = Instant::now()
            + if kill_now {
                Duration::ZERO
            } else {
                WORKER_EXIT_TIMEOUT
            };
        let mut out = Vec::new();
        for (id, c) in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(st)) => {
                        if !st.success() && !kill_now {
                            out.push(format!("worker {id} exited with {st}"));
                        }
                        break;
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        if !kill_now {
                            out.push(format!("worker {id} did not exit; killed"));
                        }
                        break;
                    }
                }
            }
        }
        self.children.clear();
        out
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.finish(true);
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn spawn_workers(
    n: usize,
    args: &RunArgs,
) -> anyhow::Result<(ClusterFile, ClusterSecret, Spawned)> {
    if n == 0 || n > MAX_LOCAL_WORKERS {
        return Err(usage_error(format!(
            "{n} local workers (--workers or --max-workers): must be 1..={MAX_LOCAL_WORKERS}"
        )));
    }
    let secret_text = random_secret()?;
    let secret =
        ClusterSecret::new(secret_text.clone().into_bytes()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut file = ClusterFile {
        // Random per run (the secret is random hex), so two runs never mistake each other.
        cluster_id: u64::from_str_radix(&secret_text[..16], 16).context("cluster id")?,
        workers: Vec::new(),
    };
    let mut held = Vec::new();
    for id in 1..=n as u32 {
        let (port, listener) = free_port()?;
        held.push(listener);
        file.workers.push(WorkerEntry {
            id,
            address: format!("127.0.0.1:{port}"),
        });
    }
    let dir = std::env::temp_dir().join(format!("clasp-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("cluster.toml");
    std::fs::write(&path, file.to_toml()).with_context(|| format!("writing {}", path.display()))?;
    let mut spawned = Spawned {
        children: Vec::new(),
        dir: Some(dir),
    };
    let exe = std::env::current_exe().context("locating clasp")?;
    for (w, listener) in file.workers.iter().zip(held) {
        // Free the port for the worker that is about to bind it.
        drop(listener);
        let child = Command::new(&exe)
            .arg("worker")
            .args(["--id", &w.id.to_string()])
            .arg("--cluster")
            .arg(&path)
            .args(["--job-timeout-s", "60"])
            .args(args.net.to_args())
            .env(SECRET_ENV, &secret_text)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .context("starting a clasp worker")?;
        spawned.children.push((w.id, child));
    }
    Ok((file, secret, spawned))
}

/// `clasp run`: live (the planner) unless `--static`.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.static_ {
        run_static(args)
    } else {
        crate::cmd::run::run_live(args)
    }
}

/// `clasp planner`: the live planner over the workers of a cluster file.
pub fn run_planner(args: RunArgs) -> anyhow::Result<()> {
    if args.cluster.is_none() || args.static_ {
        return Err(usage_error(
            "clasp planner drives running workers: give --cluster FILE (and no --static); \
             `clasp run` starts local workers itself",
        ));
    }
    crate::cmd::run::run_live(args)
}

pub fn run_static(args: RunArgs) -> anyhow::Result<()> {
    if args.workers.is_none() && args.cluster.is_none() {
        return Err(usage_error(
            "clasp run --static needs --workers N or --cluster FILE",
        ));
    }
    if args.max_workers.is_some() {
        return Err(usage_error(
            "--max-workers is for live runs; a --static run takes --workers N",
        ));
    }
    if args.migration_timeout_s == 0 {
        return Err(usage_error("--migration-timeout-s must be at least 1"));
    }
    let spec = load_app(args.app.as_deref(), args.app_file.as_deref())?;
    let records = args.records.unwrap_or(100_000);
    let (cfg, spawned) = prepare(&args, args.workers, &spec, records)?;
    let mut chaos;
    let ctl: &mut dyn Controller = if args.chaos_migrations > 0 {
        let slots = Slots {
            workers: cfg.workers.iter().map(|w| w.0).collect(),
            executors: usize::from(args.executors),
        };
        chaos = Chaos::new(
            args.chaos_migrations,
            records,
            slots,
            spec.operators.len(),
            args.seed,
        );
        &mut chaos
    } else {
        &mut Static
    };
    let report = drive(spawned, &spec, &cfg, ctl)?;
    print_report(&spec, &args, records, cfg.workers.len(), &report)?;
    if !report.errors.is_empty() {
        anyhow::bail!("the run had faults: {}", report.errors.join("; "));
    }
    Ok(())
}

/// Validates the cluster options, starts `spawn` local workers (or reads the cluster file)
/// and returns the driver's settings.
pub(crate) fn prepare(
    args: &RunArgs,
    spawn: Option<usize>,
    spec: &AppSpec,
    records: u64,
) -> anyhow::Result<(DriverConfig, Spawned)> {
    if let Some(r) = args.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(usage_error(format!(
            "--rate {r}: must be a positive number"
        )));
    }
    if !args.ring_bytes.is_power_of_two() || args.ring_bytes < 4096 {
        return Err(usage_error(format!(
            "--ring-bytes {}: must be a power of two ≥ 4096",
            args.ring_bytes
        )));
    }
    if args.executors == 0 || args.executors > 64 {
        return Err(usage_error(format!(
            "--executors {}: must be 1..=64",
            args.executors
        )));
    }
    if args.max_in_flight == 0 || args.sample_every == 0 {
        return Err(usage_error(
            "--max-in-flight and --sample-every must be positive",
        ));
    }
    let limits = args.net.limits()?;
    let (file, secret, spawned) = match (spawn, &args.cluster) {
        (Some(n), _) => spawn_workers(n, args)?,
        (None, Some(path)) => (
            ClusterFile::load(path)?,
            read_secret(args.secret_file.as_deref())?,
            Spawned {
                children: Vec::new(),
                dir: None,
            },
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
        records,
        seed: args.seed,
        rate_per_s: args.rate,
        max_in_flight: args.max_in_flight,
        sample_every: args.sample_every,
        ready_timeout: Duration::from_secs(30),
        stall_timeout: Duration::from_secs(args.stall_timeout_s),
        interval: Duration::from_millis(args.interval_ms),
        migration_timeout: Duration::from_secs(args.migration_timeout_s),
    };
    Ok((cfg, spawned))
}

/// Runs the driver; on failure stops the workers this run started and says how they exited.
pub(crate) fn drive(
    mut spawned: Spawned,
    spec: &AppSpec,
    cfg: &DriverConfig,
    ctl: &mut dyn Controller,
) -> anyhow::Result<ClusterReport> {
    match run_driver_with(spec, cfg, ctl) {
        Ok(mut report) => {
            report.errors.extend(spawned.finish(false));
            Ok(report)
        }
        Err(e) => {
            // Give the workers a moment to print their side, then stop them.
            std::thread::sleep(Duration::from_millis(100));
            let exits = spawned.failures();
            spawned.finish(true);
            let mut msg = format!("the cluster run failed: {e}");
            if !exits.is_empty() {
                msg.push_str(&format!(" ({})", exits.join("; ")));
            }
            anyhow::bail!(msg);
        }
    }
}

pub(crate) fn print_report(
    spec: &AppSpec,
    args: &RunArgs,
    records: u64,
    workers: usize,
    r: &ClusterReport,
) -> anyhow::Result<()> {
    crate::cmd::report::print(&run_view(spec, args, records, workers, r)?, args.json)
}

/// What `clasp run` prints, as the shared run view.
pub(crate) fn run_view<'a>(
    spec: &'a AppSpec,
    args: &RunArgs,
    records: u64,
    workers: usize,
    r: &'a ClusterReport,
) -> anyhow::Result<crate::cmd::report::RunView<'a>> {
    let t = |k: &str| r.totals.get(k).copied().unwrap_or(0);
    let view = crate::cmd::report::RunView {
        spec,
        records,
        seed: args.seed,
        executors: usize::from(args.executors),
        workers: Some(workers),
        summaries: &r.summaries,
        state_keys: r.state_keys.clone(),
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
        totals: serde_json::to_value(&r.totals)?,
        totals_line: format!(
            "executors: {} frames in, {} local and {} remote chained requests, {} overflowed, \
             {} bad frames, {} parks; {} batches sent",
            t("frames_in"),
            t("local_sent"),
            t("remote_sent"),
            t("overflowed"),
            t("bad_frames"),
            t("parks"),
            t("net_batches_sent")
        ),
        intervals: serde_json::to_value(&r.intervals)?,
        errors: &r.errors,
        extra: vec![
            ("migrations".into(), serde_json::to_value(&r.migrations)?),
            ("worker_seconds".into(), r.worker_seconds.into()),
        ],
        extra_lines: r
            .migrations
            .iter()
            .map(|m| {
                format!(
                    "migration to epoch {} at {:.3} s ({}): workers {} → {}, {} key groups moved; \
                     planner {:.2} ms, longest pause {:.2} ms; exported {}, forwarded {}, held {}, \
                     gated {}; {} inputs admitted meanwhile",
                    m.epoch,
                    m.t_s,
                    m.reason,
                    m.workers_before,
                    m.workers_after,
                    m.key_groups_moved,
                    m.planner_ms,
                    m.worker_pause_ms,
                    m.exported,
                    m.forwarded,
                    m.held,
                    m.gated,
                    m.admitted_during
                )
            })
            .collect(),
    };
    Ok(view)
}
