//! Helpers shared by every test that drives the `clasp` binary: a bounded runner, the oracle
//! comparison, and workers started from a cluster file by the test itself. Each test file
//! declares `mod common;` and uses these instead of its own.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Takes this test binary's turn: tests that start clusters of worker processes, or that sweep
/// and plant shared-memory segments, run one at a time. Several clusters at once on a small
/// machine starve each other and turn timing into failures (a move that came before any
/// refresh of its copies, say). Hold the guard for the whole test.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Longest any one clasp process of these tests may run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A started clasp process whose stdout and stderr two threads collect.
pub struct Running {
    args: Vec<String>,
    child: Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

/// Starts clasp with `env` added to its environment.
pub fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = clasp_command();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    spawn_running(cmd, args)
}

/// Starts `cmd` (a clasp command given `args`), its stdout and stderr collected.
pub fn spawn_running(mut cmd: Command, args: &[&str]) -> Running {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("clasp runs");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    Running {
        args: args.iter().map(|s| s.to_string()).collect(),
        child,
        out: std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = out.read_to_end(&mut b);
            b
        }),
        err: std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = err.read_to_end(&mut b);
            b
        }),
    }
}

/// The clasp binary as every test starts it: away from the user's configuration and state.
pub fn clasp_command() -> Command {
    command_at(Path::new(env!("CARGO_BIN_EXE_clasp")))
}

/// [`clasp_command`] of the clasp binary at `exe` (a copy).
pub fn command_at(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    // No test reads the user's machine profile (`clasp calibrate`): a config directory that
    // does not exist, unless the test gives its own.
    cmd.env("XDG_CONFIG_HOME", no_config_dir());
    // Checkpoints of runs that fail or are interrupted on purpose stay out of the user's state
    // directory: in one directory every test run shares (one per process would leave a
    // directory per run).
    cmd.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("clasp-tests-state"),
    );
    cmd
}

/// A config directory that holds nothing.
fn no_config_dir() -> PathBuf {
    std::env::temp_dir().join(format!("clasp-tests-no-config-{}", std::process::id()))
}

impl Running {
    /// The process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (its status is kept for [`Running::wait`]).
    pub fn finished(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Kills the process (if it still runs) and returns what it wrote.
    pub fn kill(mut self) -> Output {
        let _ = self.child.kill();
        let status = self.child.wait().expect("wait");
        Output {
            status,
            stdout: self.out.join().unwrap(),
            stderr: self.err.join().unwrap(),
        }
    }

    /// Waits at most [`RUN_TIMEOUT`] (then kills the process and fails the test).
    pub fn wait(mut self) -> Output {
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "clasp {:?} did not finish within {RUN_TIMEOUT:?}",
                    self.args
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: self.out.join().unwrap(),
            stderr: self.err.join().unwrap(),
        }
    }
}

/// Runs clasp with `env`, bounded by [`RUN_TIMEOUT`].
pub fn clasp_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    start(args, env).wait()
}

/// Runs clasp, bounded by [`RUN_TIMEOUT`].
pub fn clasp(args: &[&str]) -> Output {
    clasp_env(args, &[])
}

/// Runs clasp, bounded by [`RUN_TIMEOUT`]: its exit code (-1 when killed by a signal), stdout
/// and stderr as text.
pub fn clasp_text(args: &[&str]) -> (i32, String, String) {
    let out = clasp(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON a successful run printed.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "clasp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// A run equals `clasp oracle` on the same app, records and seed, had no faults, and needed
/// no recovery (one would hide a fault: a migration that hung, say, and was restarted).
pub fn assert_equals_oracle(app: &str, records: &str, seed: &str, run: &serde_json::Value) {
    assert_recovered_run_equals_oracle(app, records, seed, run);
    let recoveries = run["recoveries"].as_array().map_or(0, Vec::len);
    assert_eq!(recoveries, 0, "{app}: {}", run["recoveries"]);
}

/// [`assert_equals_oracle`] for a run that was meant to recover: recoveries allowed.
pub fn assert_recovered_run_equals_oracle(
    app: &str,
    records: &str,
    seed: &str,
    run: &serde_json::Value,
) {
    assert_digests_equal_oracle(&["--app", app], records, seed, run);
    assert_eq!(run["errors"].as_array().unwrap().len(), 0, "{app}");
}

/// Asserts that `run` (a run's `--json`) has the digests and counts `clasp oracle` computes
/// for the same app (`app_args`: `--app NAME` or `--app-file PATH`), records and seed — and
/// nothing about its errors (a run with faults it survived must still equal the oracle).
pub fn assert_digests_equal_oracle(
    app_args: &[&str],
    records: &str,
    seed: &str,
    run: &serde_json::Value,
) {
    let mut args = vec!["oracle"];
    args.extend_from_slice(app_args);
    args.extend(["--records", records, "--seed", seed, "--json"]);
    let oracle = json(&clasp(&args));
    for key in [
        "app",
        "seed",
        "state_digest",
        "output_digest",
        "processed",
        // Not `state_digests`: the per-operator map also lists racy operators (NWM's join),
        // whose state legitimately depends on how branches interleave; `state_digest` sums
        // exactly what the oracle comparison covers (their inputs instead of their state).
    ] {
        assert_eq!(run[key], oracle[key], "{app_args:?}: {key}");
    }
}

/// [`assert_equals_oracle`], plus what a measured run (`clasp local`, `clasp run --static`)
/// reports: the records it was asked for, a positive throughput and positive latencies.
pub fn assert_measured_run_equals_oracle(
    app: &str,
    records: &str,
    seed: &str,
    run: &serde_json::Value,
) {
    assert_equals_oracle(app, records, seed, run);
    assert_eq!(run["records"].as_u64(), records.parse().ok(), "{app}");
    assert!(run["throughput_per_s"].as_f64().unwrap() > 0.0, "{app}");
    for p in ["p50", "p95", "p99", "max"] {
        assert!(
            run["latency_us"][p].as_f64().unwrap() > 0.0,
            "{app}: latency {p}"
        );
    }
}

/// Worker processes started by a test, killed when it ends.
pub struct Workers(pub Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temporary directory holding a cluster file of `workers` workers (ids 1..) on free
/// 127.0.0.1 ports; removed on drop.
pub struct ClusterDir {
    pub dir: PathBuf,
    pub file: PathBuf,
}

impl ClusterDir {
    pub fn new(tag: &str, cluster_id: u64, workers: u32) -> ClusterDir {
        let dir = std::env::temp_dir().join(format!("clasp-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cluster.toml");
        let mut text = format!("cluster_id = {cluster_id}\n");
        for id in 1..=workers {
            text.push_str(&format!(
                "[[worker]]\nid = {id}\naddress = \"127.0.0.1:{}\"\n",
                free_port()
            ));
        }
        std::fs::write(&file, text).unwrap();
        ClusterDir { dir, file }
    }

    pub fn path(&self) -> &str {
        self.file.to_str().unwrap()
    }

    /// Starts `clasp worker --id ID` of this file with `secret` in its environment.
    pub fn spawn_worker(&self, id: &str, secret: &str) -> Child {
        spawn_worker(&self.file, id, secret)
    }
}

impl Drop for ClusterDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spawn_worker(file: &Path, id: &str, secret: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(["worker", "--id", id, "--job-timeout-s", "20", "--cluster"])
        .arg(file)
        .env("CLASP_CLUSTER_SECRET", secret)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("clasp worker runs")
}

/// A small tmpfs, unmounted (and its directory removed) when dropped: a disk that fills up.
pub struct SmallTmpfs(pub PathBuf);

impl SmallTmpfs {
    /// A tmpfs of `size` (e.g. `64k`) on a fresh directory named after `tag`, or why there is
    /// none (mounting needs root).
    pub fn mount(tag: &str, size: &str) -> Result<SmallTmpfs, String> {
        let dir = std::env::temp_dir().join(format!("clasp-tmpfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(SmallTmpfs(dir))
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A file holding `text`, named `clasp-test-…-NAME` in the temp directory and removed when the
/// returned path is dropped (a test binary leaves nothing behind).
pub fn temp_file(name: &str, text: &str) -> tempfile::TempPath {
    let mut f = tempfile::Builder::new()
        .prefix("clasp-test-")
        .suffix(&format!("-{name}"))
        .tempfile()
        .expect("a temp file");
    std::io::Write::write_all(&mut f, text.as_bytes()).expect("write the temp file");
    f.into_temp_path()
}

/// The pids whose parent is `parent` (from `/proc/*/stat`).
pub fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if stat_field(pid, 1).and_then(|p| p.parse().ok()) == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Field `n` (0-based) after the command name of `/proc/PID/stat`: 0 is the state, 1 the ppid.
pub fn stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(n).map(str::to_string)
}

/// Whether `pid` runs (a zombie has exited).
pub fn runs(pid: i32) -> bool {
    stat_field(pid, 0).is_some_and(|s| s != "Z" && s != "X")
}

/// Waits until `parent` has at least `n` children (the workers or the ingress it starts).
pub fn wait_for_children(parent: i32, n: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let c = children_of(parent);
        if c.len() >= n {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "{parent} did not start {n} children"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a run wrote on stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// No panic message, no backtrace, no abort.
pub fn assert_no_panic(out: &Output, what: &str) {
    let err = stderr(out);
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "{what}: {err}"
    );
    assert_ne!(out.status.code(), Some(101), "{what}: {err}");
}

/// Runs clasp with `args` and checks it exits 2 without a panic, naming the option given last
/// (the one with the value it refuses).
pub fn assert_refused_naming_the_last_option(args: &[&str]) {
    let out = clasp(args);
    assert_no_panic(&out, &format!("{args:?}"));
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    let option = args[args.len() - 2];
    assert!(stderr(&out).contains(option), "{args:?}: {}", stderr(&out));
}

/// Waits until the run writing into `dir` has completed a checkpoint (its manifest exists),
/// at most 20 s.
pub fn until_a_checkpoint(dir: &Path, run: &mut Running) {
    let complete = || {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .any(|e| e.path().join("MANIFEST").exists())
            })
            .unwrap_or(false)
    };
    for _ in 0..400 {
        if complete() || run.finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(complete(), "no checkpoint within 20 s");
}
