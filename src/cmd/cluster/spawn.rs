//! Worker processes `clasp run --workers N` starts on this machine: a fresh secret and cluster
//! id, a port each below the kernel's ephemeral range, a cluster file in a private temporary
//! directory, and a guard that stops exactly these processes (by their own pids) and removes the
//! directory.
//!
//! The directory is made 0700 under an unpredictable name (`clasp-run-PID-XXXXXX`: the pid lets
//! a later `clasp clean` find it if this process is killed), so no other user can plant a file
//! or a symbolic link where the cluster file is written. The guard also registers the children
//! and the directory with the cleanup registry, so an immediate exit on a second signal still
//! stops and removes them; the children die with this process in any case (`lifeline`).
//!
//! With `--worker-cpu`/`--cpus`, each worker joins its own capped cgroup and CPU set before it
//! execs, and the guard removes the groups once the workers are gone.

use super::file::{ClusterFile, WorkerEntry};
use super::launch::Launcher;
use super::net::NetArgs;
use crate::cgroup::{CpuCap, CpuList, RunGroups, create_for_workers};
use crate::cleanup::{self, Registration};
use crate::cmd::usage_error;
use crate::stale::{RUN_DIR_FILE, RUN_DIR_PREFIX, RUN_DIR_RANDOM_CHARS};
use anyhow::Context;
use clasp_dataplane::transport::{ClusterSecret, PeerId};
use std::io::Write as _;
use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Most workers `clasp run --workers N` starts on this machine.
const MAX_LOCAL_WORKERS: usize = 64;
/// How long spawned workers have to exit after the run.
const WORKER_EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of the random secret `clasp run` makes for the workers it starts.
const GENERATED_SECRET_BYTES: usize = 32;
/// Ports for local workers come from below the kernel's ephemeral range, so no `bind(0)` or
/// outgoing connection of any process can take one between the moment we pick it and the
/// moment the worker binds it.
const LOCAL_PORTS: std::ops::Range<u16> = 20_000..32_000;
/// How often a worker's exit is polled while waiting for it.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// The started workers, shared with the cleanup action that kills them on an immediate exit.
/// A child is only ever reaped under this lock, so that action never signals a reaped (and
/// perhaps reused) pid.
type Children = Arc<Mutex<Vec<(PeerId, Child)>>>;

/// How the workers a run starts are limited: a CPU cap each, a CPU set for all.
#[derive(Clone, Debug, Default)]
pub struct WorkerLimits {
    /// `--worker-cpu`: each worker in its own group with this cap.
    pub cpu: Option<CpuCap>,
    /// `--cpus`: the workers' affinity mask.
    pub cpus: Option<CpuList>,
    /// The workers write to this process's standard output (a `stdout:` sink); else theirs is
    /// closed.
    pub inherit_stdout: bool,
}

/// Worker processes this run started; killed (by their own pids) if the run fails.
pub struct Spawned {
    children: Children,
    dir: Option<RunDir>,
    /// The workers' cgroups. Removed in `Drop` after the workers are reaped (a group with a
    /// task in it cannot be removed).
    groups: Option<Arc<RunGroups>>,
    /// The cleanup actions for the children and the directory (dropped after they are gone).
    registrations: Vec<Registration>,
    /// How a worker is started (again, after a recovery).
    launcher: Option<Launcher>,
}

/// The children, even if a thread panicked while holding them.
fn lock(children: &Children) -> MutexGuard<'_, Vec<(PeerId, Child)>> {
    children.lock().unwrap_or_else(|e| e.into_inner())
}

impl Spawned {
    /// No processes: the workers of a cluster file were started by someone else.
    pub fn none() -> Spawned {
        Spawned {
            children: Children::default(),
            dir: None,
            groups: None,
            registrations: Vec::new(),
            launcher: None,
        }
    }

    /// Starts worker `id`, or starts it again under the same id after it was lost (its old
    /// process reaped first, so its cgroup is empty; the new one joins the same group).
    pub fn start(&mut self, id: u32) -> anyhow::Result<()> {
        self.restart(&[id])
    }

    /// Starts workers `ids` again: every old process of theirs is killed and reaped before
    /// the first new one starts, so that no new worker reaches an old one still listening (a
    /// stopped one) and loses that connection when it dies.
    pub fn restart(&mut self, ids: &[u32]) -> anyhow::Result<()> {
        let launcher = (self.launcher.as_ref())
            .ok_or_else(|| anyhow::anyhow!("workers {ids:?} were not started by this run"))?;
        let mut children = lock(&self.children);
        for id in ids {
            if let Some(i) = children.iter().position(|c| c.0 == *id) {
                let (_, mut old) = children.remove(i);
                let _ = old.kill();
                let _ = old.wait();
            }
        }
        for &id in ids {
            let child = (launcher.start(id, self.groups.as_deref()))
                .with_context(|| format!("cannot start worker {id}"))?;
            children.push((id, child));
        }
        Ok(())
    }

    /// Whether this run started its workers (else they are a cluster file's).
    pub fn started_any(&self) -> bool {
        self.launcher.is_some()
    }

    /// Kills worker `id` outright (SIGKILL; the testing option `--fault`). It is reaped later.
    pub fn kill(&mut self, id: u32) -> anyhow::Result<()> {
        let mut children = lock(&self.children);
        let (_, c) = (children.iter_mut())
            .find(|c| c.0 == id)
            .ok_or_else(|| anyhow::anyhow!("no worker {id} in this run"))?;
        c.kill().with_context(|| format!("killing worker {id}"))
    }

    /// Stops worker `id` (SIGSTOP; the testing option `--fault`): it holds its connections
    /// and answers nothing until the run replaces it (which kills it).
    pub fn stop(&mut self, id: u32) -> anyhow::Result<()> {
        let children = lock(&self.children);
        let (_, c) = (children.iter())
            .find(|c| c.0 == id)
            .ok_or_else(|| anyhow::anyhow!("no worker {id} in this run"))?;
        let pid = i32::try_from(c.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| anyhow::anyhow!("worker {id}: pid {} out of range", c.id()))?;
        rustix::process::kill_process(pid, rustix::process::Signal::STOP)
            .with_context(|| format!("stopping worker {id}"))
    }

    /// The first worker of `among` whose process has exited, and how: the run need not wait
    /// for it.
    pub fn exited(&mut self, among: &[PeerId]) -> Option<(PeerId, String)> {
        lock(&self.children).iter_mut().find_map(|(id, c)| {
            if !among.contains(id) {
                return None;
            }
            let st = c.try_wait().ok()??;
            Some((
                *id,
                format!("its process (pid {}) exited with {st}", c.id()),
            ))
        })
    }

    /// Workers that have already exited unsuccessfully, one line each.
    pub fn failures(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, c) in lock(&self.children).iter_mut() {
            if let Ok(Some(st)) = c.try_wait()
                && !st.success()
            {
                out.push(format!("worker {id} (pid {}) exited with {st}", c.id()));
            }
        }
        out
    }

    /// Waits for the workers to exit (they do after the driver's bye); kills stragglers.
    /// Returns a line per worker that failed or had to be killed (none when `kill_now`).
    pub fn finish(&mut self, kill_now: bool) -> Vec<String> {
        let deadline = Instant::now()
            + if kill_now {
                Duration::ZERO
            } else {
                WORKER_EXIT_TIMEOUT
            };
        let mut out = Vec::new();
        let count = lock(&self.children).len();
        for i in 0..count {
            if let Some(line) = finish_one(&self.children, i, deadline, kill_now) {
                out.push(line);
            }
        }
        lock(&self.children).clear();
        out
    }
}

/// Waits for worker `i` until `deadline`, then kills it; what went wrong, if anything. The
/// lock is held for one poll at a time, so an immediate exit is never kept waiting.
fn finish_one(children: &Children, i: usize, deadline: Instant, kill_now: bool) -> Option<String> {
    loop {
        let mut guard = lock(children);
        let (id, c) = &mut guard[i];
        match c.try_wait() {
            Ok(Some(st)) => {
                return (!st.success() && !kill_now)
                    .then(|| format!("worker {id} exited with {st}"));
            }
            Ok(None) if Instant::now() < deadline => {
                drop(guard);
                std::thread::sleep(EXIT_POLL);
            }
            _ => {
                let _ = c.kill();
                let _ = c.wait();
                return (!kill_now).then(|| format!("worker {id} did not exit; killed"));
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.finish(true);
        if let Some(g) = self.groups.take()
            && let Err(e) = g.remove_now()
        {
            tracing::warn!("cgroup cleanup: {e}");
        }
        if let Some(d) = self.dir.take() {
            let _ = d.dir.close();
        }
        // All gone: the cleanup actions have nothing left to do.
        self.registrations.clear();
    }
}

/// A run directory, and the lock on its cluster file that says its creator still runs.
struct RunDir {
    dir: tempfile::TempDir,
    /// An exclusive `flock` on the cluster file, held as long as the run: a sweep of stale run
    /// directories (`clasp clean`, every start's) leaves a directory whose file is locked,
    /// even one of a process in another pid namespace, whose pid looks dead from here.
    _owner: std::fs::File,
}

impl RunDir {
    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A private run directory (0700, an unpredictable name holding this process's pid) with the
/// cluster file in it, created anew (never through an existing file or link) and locked.
fn run_dir(file: &ClusterFile) -> anyhow::Result<(RunDir, std::path::PathBuf)> {
    let prefix = format!("{RUN_DIR_PREFIX}{}-", std::process::id());
    let dir = tempfile::Builder::new()
        .prefix(&prefix)
        .rand_bytes(RUN_DIR_RANDOM_CHARS)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .context("creating the run directory")?;
    let path = dir.path().join(RUN_DIR_FILE);
    let mut owner =
        std::fs::File::create_new(&path).with_context(|| format!("creating {}", path.display()))?;
    // Locked before it is written: a sweep takes a directory whose file is unlocked for one
    // whose creator is gone.
    rustix::fs::flock(&owner, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .with_context(|| format!("locking {}", path.display()))?;
    owner
        .write_all(file.to_toml().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((RunDir { dir, _owner: owner }, path))
}

/// Starts `n` `clasp worker` processes on 127.0.0.1 with `net`'s transport settings, each
/// limited by `limits`; returns their cluster file, the secret they hold and the guard that
/// stops them. The secret is a fresh random one, or with `shared` the one of that secret file
/// or else of the environment (workers that join the run must know it).
pub fn spawn_workers(
    n: usize,
    net: &NetArgs,
    limits: &WorkerLimits,
    shared: Option<Option<&std::path::Path>>,
) -> anyhow::Result<(ClusterFile, ClusterSecret, Spawned)> {
    if n == 0 || n > MAX_LOCAL_WORKERS {
        return Err(usage_error(format!(
            "{n} local workers (--workers or --max-workers): must be 1..={MAX_LOCAL_WORKERS}"
        )));
    }
    // The children read a shared secret where we did (the environment is inherited).
    let (secret, fresh_text) = match shared {
        Some(file) => (super::read_secret(file)?, None),
        None => {
            let text = random_secret()?;
            let s = ClusterSecret::new(text.clone().into_bytes())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            (s, Some(text))
        }
    };
    let secret_file = shared.flatten();
    let mut file = ClusterFile {
        // Random per run, so two runs never mistake each other, and drawn apart from the
        // secret: the id is public (the cluster file, the plaintext hello), the secret is not.
        cluster_id: u64::from_le_bytes(random_bytes::<8>("a cluster id")?),
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
    // Before the directory: a refusal here leaves nothing behind.
    let ids: Vec<u32> = file.workers.iter().map(|w| w.id).collect();
    let groups = limits
        .cpu
        .as_ref()
        .map(|cap| create_for_workers(cap, &ids).map(Arc::new))
        .transpose()?;
    let (dir, path) = run_dir(&file)?;
    let mut spawned = guard(dir, groups);
    spawned.launcher = Some(Launcher {
        cluster_file: path,
        net_args: net.to_args(),
        limits: limits.clone(),
        fresh_secret: fresh_text,
        secret_file: secret_file.map(Into::into),
    });
    for (w, listener) in file.workers.iter().zip(held) {
        // Free the port for the worker that is about to bind it.
        drop(listener);
        spawned.start(w.id)?;
    }
    Ok((file, secret, spawned))
}

/// The guard of a run's workers, its directory and its groups, each registered for an
/// immediate exit: registered last runs first, so the workers stop, then their groups and
/// their directory go.
fn guard(dir: RunDir, groups: Option<Arc<RunGroups>>) -> Spawned {
    let children = Children::default();
    let killer = Arc::clone(&children);
    let mut registrations = vec![cleanup::register_path(dir.path())];
    if let Some(g) = &groups {
        let g = Arc::clone(g);
        registrations.push(cleanup::register(move || {
            let _ = g.remove_now();
        }));
    }
    registrations.push(cleanup::register(move || {
        for (_, c) in lock(&killer).iter_mut() {
            let _ = c.kill();
            // Reaped here: a group with a task in it cannot be removed.
            let _ = c.wait();
        }
    }));
    Spawned {
        registrations,
        children,
        dir: Some(dir),
        groups,
        launcher: None,
    }
}

/// A fresh secret as hex (it travels to the workers in their environment).
fn random_secret() -> anyhow::Result<String> {
    let b = random_bytes::<GENERATED_SECRET_BYTES>("a cluster secret")?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// `N` bytes from the OS's random source; `what` names them in the error.
fn random_bytes<const N: usize>(what: &str) -> anyhow::Result<[u8; N]> {
    let mut b = [0u8; N];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .with_context(|| format!("reading /dev/urandom for {what}"))?;
    Ok(b)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_run_directory_is_private_unpredictable_and_removed_with_its_guard() {
        let file = ClusterFile {
            cluster_id: 7,
            workers: Vec::new(),
        };
        let (a, path) = run_dir(&file).unwrap();
        let (b, _) = run_dir(&file).unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{RUN_DIR_PREFIX}{}-", std::process::id())),
            "{name}"
        );
        // Named and held as the stale sweep expects of a live run's directory.
        assert!(crate::stale::temp_run_dir_pid(&name).is_some(), "{name}");
        let locked = std::fs::File::open(&path).unwrap();
        assert!(
            rustix::fs::flock(&locked, rustix::fs::FlockOperation::NonBlockingLockShared).is_err(),
            "the cluster file is not locked"
        );
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("cluster_id = 7")
        );
        let dir = a.path().to_path_buf();
        drop(a);
        assert!(!dir.exists());
    }
}
