//! Signals and crashes through the real binary: SIGTERM/SIGINT drain a run, print its summary
//! with `"interrupted": true`, leave no segment and no run directory, and exit 143/130; the
//! ingress of a killed `clasp local` ends within 2 s; `clasp clean` removes a dead process's
//! segment and leaves a live one's.
//!
//! Each clasp process runs in a process group of its own, which the test signals (as a shell
//! does) and kills whole if the test's time runs out. The tests take turns: every start of a
//! run sweeps `/dev/shm`, which would race with the planted segments of the `clean` test.

mod common;

use common::{one_at_a_time, runs, wait_for_children};
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest one test's clasp process may run.
const TEST_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a run admits input before it is signalled.
const RUN_BEFORE_SIGNAL: Duration = Duration::from_secs(1);
/// How long an orphaned ingress may live on.
const ORPHAN_EXIT: Duration = Duration::from_secs(2);

/// A clasp process in its own process group; the group is killed if the test ends early.
struct Group {
    child: Child,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
    deadline: Instant,
    /// Its state directory: an interrupted run keeps the checkpoints it took in the default
    /// directory, which goes with this one (in a directory shared by every test run they
    /// would pile up).
    _state: tempfile::TempDir,
}

impl Group {
    fn start(args: &[&str]) -> Group {
        let state = tempfile::tempdir().expect("a state directory");
        let mut child = common::clasp_command()
            .env("XDG_STATE_HOME", state.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("clasp runs");
        let collect = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut b = Vec::new();
                let _ = r.read_to_end(&mut b);
                b
            })
        };
        let out = collect(Box::new(child.stdout.take().unwrap()));
        let err = collect(Box::new(child.stderr.take().unwrap()));
        Group {
            child,
            out: Some(out),
            err: Some(err),
            deadline: Instant::now() + TEST_TIMEOUT,
            _state: state,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to the whole group.
    fn signal(&self, signal: Signal) {
        kill_process_group(Pid::from_raw(self.pid()).unwrap(), signal).expect("signal the group");
    }

    /// Waits for the process (at most until the test's deadline); its status, stdout, stderr.
    fn wait(mut self) -> (ExitStatus, String, String) {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                Instant::now() < self.deadline,
                "clasp did not finish within {TEST_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
            String::from_utf8_lossy(&h.unwrap().join().unwrap()).into_owned()
        };
        (status, text(self.out.take()), text(self.err.take()))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = Pid::from_raw(self.pid()) {
            let _ = kill_process_group(pid, Signal::KILL);
        }
        let _ = self.child.wait();
    }
}

/// Nothing of these pids in `/dev/shm`, and no run directory of the first.
fn assert_nothing_left(pids: &[i32]) {
    let shm: Vec<String> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("clasp"))
        .collect();
    for pid in pids {
        let tail = format!("-{pid}");
        let mid = format!("-{pid}-");
        let left: Vec<&String> = (shm.iter())
            .filter(|n| n.ends_with(&tail) || n.contains(&mid))
            .collect();
        assert!(left.is_empty(), "pid {pid} left {left:?} in /dev/shm");
    }
    let run_dir = format!("clasp-run-{}-", pids[0]);
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&run_dir))
        .collect();
    assert!(left.is_empty(), "run directories left: {left:?}");
}

/// Signals a run once it is under way and checks the interrupted run's ending.
/// Returns the run's stderr.
fn interrupt(args: &[&str], children: usize, signal: Signal, status: i32) -> String {
    interrupt_times(args, children, (signal, 1), status)
}

/// [`interrupt`] with the signal sent `times` times in a row.
fn interrupt_times(
    args: &[&str],
    children: usize,
    (signal, times): (Signal, usize),
    status: i32,
) -> String {
    let run = Group::start(args);
    let pid = run.pid();
    let mut pids = vec![pid];
    pids.extend(wait_for_children(pid, children));
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    for _ in 0..times {
        run.signal(signal);
    }
    let (st, out, err) = run.wait();
    assert_eq!(st.code(), Some(status), "{args:?}: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("the summary as JSON");
    assert_eq!(v["interrupted"], true, "{args:?}");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{err}");
    // `records` is the shorter run's: what was admitted before the signal, not what was asked.
    if let Some(i) = args.iter().position(|a| *a == "--records") {
        let asked: u64 = args[i + 1].parse().unwrap();
        let records = v["records"].as_u64().expect("records");
        assert!(
            0 < records && records < asked,
            "{args:?}: {records} of {asked}"
        );
    }
    assert!(
        v["state_digest"].is_string() && v["processed"].is_object(),
        "{out}"
    );
    assert_nothing_left(&pids);
    for p in &pids[1..] {
        assert!(!runs(*p), "{args:?}: child {p} still runs");
    }
    err
}

const STATIC_RUN: [&str; 12] = [
    "run",
    "--app",
    "wc",
    "--static",
    "--workers",
    "2",
    "--rate",
    "20000",
    "--records",
    "10000000",
    "--json",
    "--stall-timeout-s=30",
];

/// `clasp local` admitting far more than a test waits for, paced.
const LOCAL_RUN: [&str; 8] = [
    "local",
    "--app",
    "wc",
    "--rate",
    "20000",
    "--records",
    "10000000",
    "--json",
];

#[test]
fn sigterm_drains_a_static_run_prints_its_summary_and_exits_143() {
    let _turn = one_at_a_time();
    interrupt(&STATIC_RUN, 2, Signal::TERM, 143);
}

/// A hangup (the terminal or ssh session that ran it went away) stops a run like SIGTERM:
/// drained, summarised, cleaned up, 129 — not killed with its workers' cgroups left behind;
/// the second hangup a lost session sends is not a second signal.
#[test]
fn sighup_drains_a_static_run_and_clasp_local_and_exits_129() {
    let _turn = one_at_a_time();
    interrupt_times(&STATIC_RUN, 2, (Signal::HUP, 2), 129);
    interrupt(&LOCAL_RUN, 1, Signal::HUP, 129);
}

/// Started under `nohup`, a run keeps ignoring hangups: it runs to its end.
#[test]
fn a_run_started_under_nohup_ignores_hangups() {
    let _turn = one_at_a_time();
    if Command::new("nohup").arg("true").output().is_err() {
        eprintln!("skipped: no nohup on this machine");
        return;
    }
    let state = tempfile::tempdir().expect("a state directory");
    let records = "40000";
    let mut child = Command::new("nohup")
        .arg(env!("CARGO_BIN_EXE_clasp"))
        .args([
            "local",
            "--app",
            "wc",
            "--rate",
            "20000",
            "--records",
            records,
            "--json",
        ])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("nohup clasp runs");
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    kill_process(pid, Signal::HUP).expect("a hangup");
    let deadline = Instant::now() + TEST_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().unwrap();
    assert!(status.success(), "{status}: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("the summary as JSON");
    assert_eq!(v["interrupted"], false, "{out}");
    assert_eq!(v["records"].to_string(), records, "{out}");
}

#[test]
fn sigint_drains_a_static_run_prints_its_summary_exits_130_and_keeps_its_checkpoints() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ck = dir.path().join("checkpoints");
    let ck_arg = ck.to_str().expect("a UTF-8 path");
    let mut args = STATIC_RUN.to_vec();
    args.extend([
        "--checkpoint-interval-ms",
        "200",
        "--checkpoint-dir",
        ck_arg,
    ]);
    let said = interrupt(&args, 2, Signal::INT, 130);
    // An interrupted run did not succeed: what it checkpointed stays for `--resume`, and it
    // says where.
    assert!(
        said.contains(&format!("its checkpoints stay in {ck_arg}")),
        "{said}"
    );
    let taken = std::fs::read_dir(&ck)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("ckpt"))
                .count()
        })
        .unwrap_or(0);
    assert!(taken > 0, "no checkpoint kept in {}", ck.display());
}

/// An interrupted run that read a FIFO keeps no checkpoints and advises no `--resume`: a
/// resume could not read the FIFO again to skip what the checkpoint had read, and refuses.
#[test]
fn an_interrupted_run_on_a_fifo_removes_the_checkpoints_no_resume_could_use() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fifo = dir.path().join("fifo");
    let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, owner_rw).expect("a FIFO");
    // Writes until the run closes its end (the write then fails: SIGPIPE is ignored here).
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo)?;
            let lines = "alpha beta gamma\n".repeat(64);
            loop {
                f.write_all(lines.as_bytes())?;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let ck = dir.path().join("checkpoints");
    let (ck_arg, source) = (ck.display().to_string(), format!("file:{}", fifo.display()));
    let args = [
        "run",
        "--app",
        "wc",
        "--static",
        "--workers",
        "2",
        "--json",
        "--source",
        &source,
        "--checkpoint-interval-ms",
        "100",
        "--checkpoint-dir",
        &ck_arg,
    ];
    let said = interrupt(&args, 2, Signal::INT, 130);
    assert!(!said.contains("--resume"), "{said}");
    assert!(
        said.contains(&format!("removed its checkpoints in {ck_arg}"))
            && said.contains("is a pipe or a device"),
        "{said}"
    );
    let left: Vec<_> = std::fs::read_dir(&ck).map_or(vec![], |d| d.flatten().collect());
    assert!(left.is_empty(), "left in {ck_arg}: {left:?}");
    let ended: std::io::Result<()> = writer.join().expect("the writer");
    assert!(
        ended.is_err(),
        "the writer ends when the run closes the FIFO"
    );
}

#[test]
fn sigterm_drains_a_live_run_prints_its_summary_and_exits_143() {
    let _turn = one_at_a_time();
    let args = [
        "run",
        "--app",
        "wc",
        "--max-workers",
        "2",
        "--pattern",
        "constant",
        "--peak-rate",
        "20000",
        "--duration",
        "60",
        "--json",
    ];
    interrupt(&args, 2, Signal::TERM, 143);
}

#[test]
fn sigterm_drains_clasp_local_prints_its_summary_and_exits_143() {
    let _turn = one_at_a_time();
    interrupt(&LOCAL_RUN, 1, Signal::TERM, 143);
}

#[test]
fn a_second_signal_exits_at_once_and_still_cleans_up() {
    let _turn = one_at_a_time();
    let run = Group::start(&STATIC_RUN);
    let pid = run.pid();
    let mut pids = vec![pid];
    pids.extend(wait_for_children(pid, 2));
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    run.signal(Signal::TERM);
    // Apart, so the kernel does not merge them into one pending signal.
    std::thread::sleep(Duration::from_millis(50));
    run.signal(Signal::TERM);
    let (st, _, err) = run.wait();
    assert_eq!(st.code(), Some(143), "{err}");
    // Unless the drain was even quicker than the second signal.
    assert!(
        err.contains("a second signal: stopping now") || err.contains("ran wc to the end"),
        "{err}"
    );
    // The workers are killed by the cleanup, or by their lifeline as the run exits.
    let deadline = Instant::now() + ORPHAN_EXIT;
    while pids[1..].iter().any(|&p| runs(p)) {
        assert!(
            Instant::now() < deadline,
            "a worker outlived the run: {err}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_nothing_left(&pids);
}

#[test]
fn a_drain_longer_than_the_drain_timeout_exits_at_once_and_still_cleans_up() {
    let _turn = one_at_a_time();
    let local = Group::start(&[&LOCAL_RUN[..], &["--drain-timeout-s", "1"]].concat());
    let pid = local.pid();
    let ingress = wait_for_children(pid, 1)[0];
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    // A stopped ingress never hears the stop, so the input never ends.
    kill_process(Pid::from_raw(ingress).unwrap(), Signal::STOP).unwrap();
    let signalled = Instant::now();
    local.signal(Signal::TERM);
    let (st, out, err) = local.wait();
    assert_eq!(st.code(), Some(143), "{err}");
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "{:?}",
        signalled.elapsed()
    );
    assert!(err.contains("the drain did not finish within 1 s"), "{err}");
    assert!(out.is_empty(), "{out}");
    let deadline = Instant::now() + ORPHAN_EXIT;
    while runs(ingress) {
        assert!(Instant::now() < deadline, "the ingress outlived the run");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_nothing_left(&[pid, ingress]);
}

/// SIGTERM to one worker of a running cluster: it leaves (its key groups move to the other
/// worker) and exits 0 while the run goes on; the run, stopped later, has no fault.
#[test]
fn sigterm_to_one_worker_makes_it_leave_while_the_run_goes_on() {
    let _turn = one_at_a_time();
    let run = Group::start(&STATIC_RUN);
    let pid = run.pid();
    let workers = wait_for_children(pid, 2);
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    let victim = workers[0];
    kill_process(Pid::from_raw(victim).unwrap(), Signal::TERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while runs(victim) {
        assert!(Instant::now() < deadline, "worker {victim} did not leave");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(runs(pid), "the run ended with its worker");
    run.signal(Signal::TERM);
    let (st, out, err) = run.wait();
    assert_eq!(st.code(), Some(143), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("the summary as JSON");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{err}");
    let leave = (v["migrations"].as_array().into_iter().flatten())
        .any(|m| m["reason"].as_str().is_some_and(|r| r.starts_with("leave")));
    assert!(leave, "{out}");
    let mut pids = vec![pid];
    pids.extend(workers);
    assert_nothing_left(&pids);
}

#[test]
fn an_uninterrupted_run_says_so() {
    let _turn = one_at_a_time();
    let (st, out, err) =
        Group::start(&["local", "--app", "wc", "--records", "500", "--json"]).wait();
    assert!(st.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["interrupted"], false);
}

#[test]
fn the_ingress_of_a_killed_clasp_local_exits_within_2_s_naming_what_it_lost() {
    let _turn = one_at_a_time();
    let local = Group::start(&[
        "local",
        "--app",
        "wc",
        "--rate",
        "20000",
        "--records",
        "10000000",
    ]);
    let pid = local.pid();
    let ingress = wait_for_children(pid, 1)[0];
    std::thread::sleep(RUN_BEFORE_SIGNAL);
    kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL).unwrap();
    let killed = Instant::now();
    while runs(ingress) {
        assert!(
            killed.elapsed() < ORPHAN_EXIT,
            "the ingress {ingress} still runs {ORPHAN_EXIT:?} after its worker was killed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The ingress shares the killed process's stderr: it names the segment it lost, and removes
    // it (nobody else would).
    let (_, _, err) = local.wait();
    assert!(
        err.contains(&format!("segment /clasp-local-{pid} is gone")),
        "{err}"
    );
    assert_nothing_left(&[pid]);
}

#[test]
fn clasp_clean_removes_a_dead_processs_segment_and_keeps_a_live_ones() {
    let _turn = one_at_a_time();
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let mut live = Command::new("sleep").arg("60").spawn().unwrap();
    let stale = format!("/dev/shm/clasp-local-{dead_pid}");
    let kept = format!("/dev/shm/clasp-local-{}", live.id());
    std::fs::write(&stale, b"").unwrap();
    std::fs::write(&kept, b"").unwrap();

    let (st, out, err) = Group::start(&["clean", "--dry-run"]).wait();
    assert!(st.success(), "{err}");
    assert!(
        out.contains(&format!("would remove segment {stale}")),
        "{out}"
    );
    assert!(std::path::Path::new(&stale).exists());

    let (st, out, err) = Group::start(&["clean"]).wait();
    let kept_exists = std::path::Path::new(&kept).exists();
    let _ = std::fs::remove_file(&kept);
    let _ = live.kill();
    let _ = live.wait();
    assert!(st.success(), "{err}");
    assert!(out.contains(&format!("removed segment {stale}")), "{out}");
    assert!(!out.contains(&kept), "{out}");
    assert!(!std::path::Path::new(&stale).exists());
    assert!(kept_exists, "the live process's segment was removed");
}

/// `clasp clean` removes a dead run's directory only as clasp leaves it: named
/// `clasp-run-PID-XXXXXX`, holding at most its cluster file, which nobody holds locked (a live
/// run does, even one whose pid looks dead from another pid namespace).
#[test]
fn clasp_clean_removes_only_run_directories_as_clasp_leaves_them() {
    use rustix::fs::{FlockOperation, flock};
    let _turn = one_at_a_time();
    let tmp = tempfile::Builder::new()
        .prefix("clasp-test-clean-")
        .tempdir()
        .unwrap();
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let run_dir = |suffix: &str, files: &[&str]| {
        let dir = tmp.path().join(format!("clasp-run-{dead_pid}-{suffix}"));
        std::fs::create_dir(&dir).unwrap();
        for f in files {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        dir
    };
    let stale = run_dir("AbC123", &["cluster.toml"]);
    let kept = [
        run_dir("myresults", &["results.csv"]),
        run_dir("XyZ789", &["cluster.toml", "results.csv"]),
        run_dir("LcK456", &["cluster.toml"]),
        tmp.path().join(format!("clasp-run-{dead_pid}")),
    ];
    std::fs::create_dir(&kept[3]).unwrap();
    let lock = std::fs::File::open(kept[2].join("cluster.toml")).unwrap();
    flock(&lock, FlockOperation::NonBlockingLockExclusive).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .arg("clean")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stale.exists(), "{text}");
    for dir in &kept {
        assert!(dir.exists(), "{} was removed: {text}", dir.display());
    }
}

#[test]
fn rust_log_shows_info_events_with_timestamps_and_the_default_hides_them() {
    let _turn = one_at_a_time();
    let stale_segment = || {
        let mut dead = Command::new("true").spawn().unwrap();
        let dead_pid = dead.id();
        dead.wait().unwrap();
        let stale = format!("/dev/shm/clasp-local-{dead_pid}");
        std::fs::write(&stale, b"").unwrap();
        stale
    };
    // A worker's start sweeps the stale segment (an info event), then fails on the file.
    let worker = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_clasp"));
        cmd.args([
            "worker",
            "--id",
            "1",
            "--cluster",
            "/nonexistent/cluster.toml",
        ])
        .env_remove("RUST_LOG")
        .env_remove("CLASP_LOG")
        .envs(env.iter().copied());
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for var in ["RUST_LOG", "CLASP_LOG"] {
        let stale = stale_segment();
        let err = worker(&[(var, "info")]);
        let line = err
            .lines()
            .find(|l| l.contains("removed the stale segment"))
            .unwrap_or_else(|| panic!("{var}=info: {err}"));
        assert!(line.contains("INFO"), "{line}");
        // An RFC 3339 timestamp first: 2026-12-01T16:55:00.123456Z
        assert!(
            line.len() > 20 && line.as_bytes()[4] == b'-' && line.as_bytes()[10] == b'T',
            "{line}"
        );
        assert!(!std::path::Path::new(&stale).exists());
    }
    let stale = stale_segment();
    let err = worker(&[]);
    assert!(!err.contains("removed the stale"), "{err}");
    assert!(!std::path::Path::new(&stale).exists());
}
