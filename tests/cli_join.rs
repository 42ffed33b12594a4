//! Workers that outlive a run: `clasp worker` serves job after job and ends when idle, and a
//! worker started after a live run began joins it (`clasp worker --join`) and is used by the
//! run's next move. Every run must equal `clasp oracle`; every wait is bounded.

mod common;

use common::{
    ClusterDir, Workers, assert_equals_oracle, assert_recovered_run_equals_oracle, clasp_env, json,
};
use rustix::process::{Pid, Signal, kill_process};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const SECRET: &str = "a cluster secret of at least 32 bytes";

/// `clasp worker --id ID` of `cluster`, giving up after `idle_s` without a job.
fn worker(cluster: &ClusterDir, id: &str, idle_s: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(["worker", "--id", id, "--job-timeout-s", idle_s, "--cluster"])
        .arg(&cluster.file)
        .env("CLASP_CLUSTER_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("clasp worker runs")
}

/// Waits for `c` to exit, at most `limit`; its exit status.
fn exit_within(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "worker {} still runs", c.id());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `clasp run --static` of 2000 records of `app` over the workers of `cluster`: its JSON.
fn static_run(cluster: &ClusterDir, app: &str, seed: &str) -> serde_json::Value {
    let args = [
        "run",
        "--static",
        "--cluster",
        cluster.path(),
        "--app",
        app,
        "--records",
        "2000",
        "--seed",
        seed,
        "--json",
    ];
    json(&clasp_env(&args, &[("CLASP_CLUSTER_SECRET", SECRET)]))
}

#[test]
fn a_worker_serves_job_after_job_and_exits_when_idle() {
    let _turn = common::one_at_a_time();
    let cluster = ClusterDir::new("serve-jobs", 91, 2);
    let mut workers = Workers(vec![worker(&cluster, "1", "4"), worker(&cluster, "2", "4")]);
    for (app, seed) in [("wc", "1"), ("etl", "2")] {
        let run = static_run(&cluster, app, seed);
        assert_equals_oracle(app, "2000", seed, &run);
    }
    // Idle for --job-timeout-s after serving: the normal end.
    for c in &mut workers.0 {
        let st = exit_within(c, Duration::from_secs(20));
        assert!(st.success(), "{st}");
    }
}

/// `clasp` with its default log filter (the tests wait for its warnings, whatever
/// `RUST_LOG` the tests run with).
fn clasp_showing_warnings() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clasp"));
    c.env_remove("RUST_LOG").env_remove("CLASP_LOG");
    c
}

/// A `clasp run` whose stderr lines arrive on a channel as they are printed.
struct LiveRun {
    child: Child,
    out: JoinHandle<String>,
    err: JoinHandle<String>,
    lines: Receiver<String>,
}

impl LiveRun {
    fn start(args: &[&str], dir: &Path) -> LiveRun {
        let mut child = clasp_showing_warnings()
            .args(args)
            .env("XDG_CONFIG_HOME", dir.join("no-config"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("clasp run runs");
        let mut stdout = child.stdout.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let err = std::thread::spawn(move || {
            let mut all = String::new();
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        LiveRun {
            child,
            out,
            err,
            lines,
        }
    }

    /// The first stderr line holding `needle`.
    fn line_with(&self, needle: &str) -> String {
        loop {
            let line = (self.lines)
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no line with {needle:?}: {e}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Waits for the end (killed after `limit`): exit status, stdout, stderr.
    fn wait(mut self, limit: Duration) -> (std::process::ExitStatus, String, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("the run did not end: {}", self.err.join().unwrap());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        (status, self.out.join().unwrap(), self.err.join().unwrap())
    }
}

/// The word after `flag` in `line`.
fn after(line: &str, flag: &str) -> String {
    let at = line
        .find(flag)
        .unwrap_or_else(|| panic!("{flag} in {line}"))
        + flag.len();
    line[at..].split_whitespace().next().unwrap().to_string()
}

/// `clasp worker --id ID --join` as the run's line `hint` says, with the secret in `secret`;
/// its stderr piped (`true`) or dropped.
fn joiner(hint: &str, id: &str, secret: &str, piped: bool) -> Child {
    joiner_with(hint, id, secret, piped, &[])
}

/// [`joiner`] with `extra` options.
fn joiner_with(hint: &str, id: &str, secret: &str, piped: bool, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(["worker", "--id", id, "--join", &after(hint, "--join ")])
        .args(extra)
        .args(["--cluster-id", &after(hint, "--cluster-id ")])
        .args(["--secret-file", secret])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if piped { Stdio::piped() } else { Stdio::null() })
        .spawn()
        .expect("clasp worker --join runs")
}

/// Waits (at most 30 s) for the joiner `c` (stderr piped) to exit 1 saying `says`.
fn assert_refused(c: &mut Child, says: &str) {
    let st = exit_within(c, Duration::from_secs(30));
    let mut said = String::new();
    c.stderr.take().unwrap().read_to_string(&mut said).unwrap();
    assert_eq!(st.code(), Some(1), "{said}");
    assert!(said.contains(says), "{said}");
}

/// `clasp run` live over worker 1, worker 2 reserved to join; `extra` are further options.
/// Once the run says how, worker 2 is started with `clasp worker --join`: the run and the
/// joiner, and the run's line that says how to join (the caller removes `dir`).
fn run_with_a_joiner(dir: &Path, extra: &[&str]) -> (LiveRun, Workers, String) {
    run_of_with_a_joiner(dir, "24000", extra)
}

/// [`run_with_a_joiner`] of `records` records (3 000 a second).
fn run_of_with_a_joiner(dir: &Path, records: &str, extra: &[&str]) -> (LiveRun, Workers, String) {
    std::fs::create_dir_all(dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, SECRET).unwrap();
    let secret_path = secret_file.to_str().unwrap();
    let mut args = vec![
        "run",
        "--app",
        "wc",
        "--records",
        records,
        "--seed",
        "6",
        "--peak-rate",
        "3000",
        "--pattern",
        "constant",
        "--max-workers",
        "2",
        "--start-workers",
        "1",
        "--moves",
        "1.5:2",
        "--uncapped",
        "--json",
        "--secret-file",
        secret_path,
    ];
    args.extend_from_slice(extra);
    let run = LiveRun::start(&args, dir);
    // "clasp run: workers 2..=2 may join, in order: clasp worker --id 2 --join ADDR
    // --cluster-id N (...)"
    let hint = run.line_with("may join");
    assert_eq!(after(&hint, "--id "), "2", "{hint}");
    let first = joiner(&hint, "2", secret_path, false);
    (run, Workers(vec![first]), hint)
}

/// The (workers before, workers after) of each migration in a run's JSON.
fn moves(run: &serde_json::Value) -> Vec<(u64, u64)> {
    (run["migrations"]
        .as_array()
        .expect("a migrations list")
        .iter())
    .map(|m| {
        let n = |k: &str| m[k].as_u64().unwrap();
        (n("workers_before"), n("workers_after"))
    })
    .collect()
}

/// A live run with one of its two workers started (12 s of input); the test starts the
/// second with `clasp worker --join` once the run says how, and the scripted move to two
/// workers (held until the join, if it comes later) places key groups on it. Nothing is lost.
/// A worker asking to join with an id the run did not reserve is told so and exits 1, and so
/// do a second process under the id of the worker the run started (also with a job timeout
/// shorter than the handshake's retries) and one with another secret.
#[test]
fn a_worker_started_after_the_run_began_joins_it_and_is_used() {
    let _turn = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-join-{}", std::process::id()));
    // 12 s of input: the twin below is refused for 10 s while worker 1 still runs.
    let (run, mut workers, hint) = run_of_with_a_joiner(&dir, "36000", &[]);
    let secret = dir.join("secret");
    let stray = joiner(&hint, "5", secret.to_str().unwrap(), true);
    // A second process under the id of the worker the run started: refused in its handshake
    // until its connect deadline (10 s), then told why.
    let twin = joiner(&hint, "1", secret.to_str().unwrap(), true);
    // The same with a 2 s job timeout: told why at its end, not that it timed out.
    let quick_twin = joiner_with(
        &hint,
        "1",
        secret.to_str().unwrap(),
        true,
        &["--job-timeout-s", "2"],
    );
    // Another secret: refused in its handshake, which asking again cannot change.
    let other_secret = dir.join("other-secret");
    std::fs::write(&other_secret, "another secret of at least 32 bytes").unwrap();
    let outsider = joiner(&hint, "2", other_secret.to_str().unwrap(), true);
    workers.0.extend([stray, twin, outsider, quick_twin]);
    assert_refused(&mut workers.0[1], "reserved ids [2] for workers that join");
    assert_refused(&mut workers.0[2], "worker 1 is already in it");
    assert_refused(&mut workers.0[3], "does not hold the same cluster secret");
    assert_refused(&mut workers.0[4], "worker 1 is already in it");
    let (status, stdout, stderr) = run.wait(Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("worker 2 joined"), "{stderr}");
    // The twin's refusals are logged once per connect timeout, not once a second.
    let twin_lines = stderr.matches("a second process under its id").count();
    assert!((1..=2).contains(&twin_lines), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the run's JSON");
    assert_equals_oracle("wc", "36000", "6", &v);
    assert_eq!(moves(&v), [(1, 2)], "{stderr}");
    // The joiner served the run it joined, then exited.
    let st = exit_within(&mut workers.0[0], Duration::from_secs(20));
    assert!(st.success(), "{st}");
}

/// A worker that joined is SIGKILLed once it holds key groups: the run recovers from its
/// checkpoint on the worker it started with (it does not try to start the joiner, which runs
/// elsewhere), and still equals the oracle.
#[test]
fn a_joined_worker_that_is_killed_is_recovered_without_it() {
    let _turn = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-join-kill-{}", std::process::id()));
    let ck = dir.join("checkpoints");
    let (run, mut workers, _) =
        run_with_a_joiner(&dir, &["--checkpoint-dir", ck.to_str().unwrap()]);
    run.line_with("worker 2 joined");
    // The move onto it follows the join at once; a moment later it holds its key groups.
    std::thread::sleep(Duration::from_millis(1500));
    workers.0[0].kill().expect("SIGKILL to the joiner");
    let (status, stdout, stderr) = run.wait(Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("joined the run and are not restarted"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the run's JSON");
    assert_recovered_run_equals_oracle("wc", "24000", "6", &v);
    let lost: Vec<&serde_json::Value> = (v["recoveries"].as_array().unwrap().iter())
        .map(|r| &r["workers_lost"])
        .collect();
    assert_eq!(lost, [&serde_json::json!([2])], "{stderr}");
}

/// The worker the run started is SIGKILLed during the move onto a worker that joined: the
/// restarted job listens where the first did, so the joiner, told that address once, joins it
/// again, the scripted move is made again onto it, and it serves the run to the end.
#[test]
fn a_joined_worker_joins_the_job_a_recovery_restarts() {
    let _turn = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-join-again-{}", std::process::id()));
    let ck = dir.join("checkpoints");
    let (run, mut workers, _) = run_with_a_joiner(
        &dir,
        &[
            "--checkpoint-dir",
            ck.to_str().unwrap(),
            "--fault",
            "kill-worker=1@migration",
        ],
    );
    let (status, stdout, stderr) = run.wait(Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(stderr.matches("worker 2 joined").count(), 2, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the run's JSON");
    assert_recovered_run_equals_oracle("wc", "24000", "6", &v);
    assert_eq!(v["recoveries"].as_array().unwrap().len(), 1, "{stderr}");
    // The move the loss interrupted is the script's placement still: made again, onto it.
    assert_eq!(moves(&v), [(1, 2)], "{stderr}");
    let st = exit_within(&mut workers.0[0], Duration::from_secs(20));
    assert!(st.success(), "the joiner: {st}");
}

/// SIGTERM to a worker of a running cluster: its key groups move to the other worker, it
/// exits 0 while the run goes on, and the run still equals the oracle.
#[test]
fn sigterm_to_a_worker_of_a_running_cluster_makes_it_leave() {
    let _turn = common::one_at_a_time();
    let cluster = ClusterDir::new("leave", 92, 2);
    let mut workers = Workers(vec![
        worker(&cluster, "1", "20"),
        worker(&cluster, "2", "20"),
    ]);
    let leaver = workers.0[1].id();
    let path = cluster.path().to_string();
    // About 6 s of input; the worker is told to leave 2.5 s after the run started.
    let run = std::thread::spawn(move || {
        json(&clasp_env(
            &[
                "run",
                "--static",
                "--cluster",
                &path,
                "--app",
                "wc",
                "--records",
                "48000",
                "--seed",
                "8",
                "--rate",
                "8000",
                "--json",
            ],
            &[("CLASP_CLUSTER_SECRET", SECRET)],
        ))
    });
    std::thread::sleep(Duration::from_millis(2500));
    kill_process(Pid::from_raw(leaver as i32).unwrap(), Signal::TERM).expect("SIGTERM");
    let run = run.join().unwrap();
    assert_equals_oracle("wc", "48000", "8", &run);
    let moves: Vec<(u64, u64, String)> = run["migrations"]
        .as_array()
        .expect("a migrations list")
        .iter()
        .map(|m| {
            let n = |k: &str| m[k].as_u64().unwrap();
            let reason = m["reason"].as_str().unwrap_or_default().to_string();
            (n("workers_before"), n("workers_after"), reason)
        })
        .collect();
    assert_eq!(moves, [(2, 1, "leave: worker 2".to_string())], "{run}");
    let st = exit_within(&mut workers.0[1], Duration::from_secs(20));
    assert!(st.success(), "the worker that left: {st}");
}

#[test]
fn bad_join_options_are_named() {
    let _turn = common::one_at_a_time();
    for (args, needle) in [
        (
            &["run", "--max-workers", "2", "--start-workers", "3"][..],
            "--start-workers 3",
        ),
        (
            &["run", "--static", "--workers", "2", "--start-workers", "1"][..],
            "cannot be used with",
        ),
        (
            &["worker", "--id", "2", "--join", "127.0.0.1:9"][..],
            "--cluster-id",
        ),
        (
            &[
                "worker",
                "--id",
                "0",
                "--join",
                "127.0.0.1:9",
                "--cluster-id",
                "1",
            ][..],
            "--id 0",
        ),
        (
            &[
                "worker",
                "--id",
                "2",
                "--join",
                "127.0.0.1:9",
                "--cluster-id",
                "1",
                "--listen",
                "0.0.0.0:0",
            ][..],
            "--listen 0.0.0.0:0",
        ),
    ] {
        let out = clasp_env(args, &[("CLASP_CLUSTER_SECRET", SECRET)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A joiner whose run never takes it (no driver at the address) asks again once a second, not
/// in a tight loop, and gives up with the reason once `--job-timeout-s` passed (exit 1).
#[test]
fn a_joiner_that_no_run_takes_gives_up_after_its_job_timeout() {
    let _turn = common::one_at_a_time();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let driver = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let out = clasp_env(
        &[
            "worker",
            "--id",
            "2",
            "--join",
            &driver,
            "--cluster-id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--job-timeout-s",
            "2",
        ],
        &[("CLASP_CLUSTER_SECRET", SECRET)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no run took this worker"), "{err}");
    assert!(err.contains(&driver), "{err}");
    // Each attempt waits for its connection up to the timeout, or fails at once and pauses
    // a second: never a tight loop (which asked thousands of times in 2 s). The bound is far
    // from the 2–3 a slow machine may reach, so it does not time anything.
    let asked = err.matches("asking again").count();
    assert!(
        asked <= 20,
        "asked again {asked} times in {:?}: {err}",
        started.elapsed()
    );
}

/// A long-lived worker that could not reach another before any job (it was down) does not
/// hand that old fault to the next driver: once the other is up, a run over both succeeds.
#[test]
fn a_worker_does_not_report_a_peer_it_missed_before_the_job() {
    let _turn = common::one_at_a_time();
    let cluster = ClusterDir::new("missed", 93, 2);
    let mut first = clasp_showing_warnings()
        .args(["worker", "--id", "1", "--job-timeout-s", "40", "--cluster"])
        .arg(&cluster.file)
        .env("CLASP_CLUSTER_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clasp worker runs");
    let stderr = BufReader::new(first.stderr.take().unwrap());
    let mut workers = Workers(vec![first]);
    // Worker 1 dials worker 2 at start and gives up after its connect timeout (10 s): wait for
    // it to say so (at most 40 s), so that worker 2 starts only after the missed attempt.
    let (tx, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Read to the end: the worker's stderr stays drained.
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("cannot reach worker 2 before any job") {
                let _ = tx.send(true);
            }
        }
    });
    let missed = said.recv_timeout(Duration::from_secs(40));
    assert_eq!(missed, Ok(true), "worker 1 never said it missed worker 2");
    workers.0.push(worker(&cluster, "2", "40"));
    let run = static_run(&cluster, "wc", "3");
    assert_equals_oracle("wc", "2000", "3", &run);
}

/// Reserved ids join in order: worker 3 asking first is told to wait and asks again, worker 2
/// joins, then worker 3; the scripted move to three workers (held until both joined) uses both.
#[test]
fn a_joiner_whose_turn_has_not_come_asks_again_and_is_taken() {
    let _turn = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-join-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret_file = dir.join("secret");
    std::fs::write(&secret_file, SECRET).unwrap();
    let secret = secret_file.to_str().unwrap();
    let run = LiveRun::start(
        &[
            "run",
            "--app",
            "wc",
            "--records",
            "24000",
            "--seed",
            "7",
            "--peak-rate",
            "3000",
            "--pattern",
            "constant",
            "--max-workers",
            "3",
            "--start-workers",
            "1",
            "--moves",
            "1.5:3",
            "--uncapped",
            "--json",
            "--secret-file",
            secret,
        ],
        &dir,
    );
    let hint = run.line_with("may join");
    let mut workers = Workers(vec![joiner(&hint, "3", secret, false)]);
    run.line_with("worker 2 must join first");
    workers.0.push(joiner(&hint, "2", secret, false));
    let (status, stdout, stderr) = run.wait(Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the run's JSON");
    assert_equals_oracle("wc", "24000", "7", &v);
    assert_eq!(moves(&v), [(1, 3)], "{stderr}");
    for w in &mut workers.0 {
        let st = exit_within(w, Duration::from_secs(20));
        assert!(st.success(), "a joiner: {st}");
    }
}

/// A joiner told to leave (SIGTERM) leaves the run and exits 0; the same id asking to join
/// again is told it left this run and exits 1; the run still equals the oracle.
#[test]
fn a_joiner_that_left_is_not_taken_again() {
    let _turn = common::one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-join-left-{}", std::process::id()));
    let (run, mut workers, hint) = run_with_a_joiner(&dir, &[]);
    run.line_with("worker 2 joined");
    // Once the move onto it is made, it holds key groups: leaving moves them back.
    std::thread::sleep(Duration::from_millis(1000));
    let pid = Pid::from_raw(workers.0[0].id() as i32).unwrap();
    kill_process(pid, Signal::TERM).expect("SIGTERM to the joiner");
    run.line_with("worker 2 left");
    let st = exit_within(&mut workers.0[0], Duration::from_secs(30));
    assert!(st.success(), "the joiner that left: {st}");
    let again = joiner(&hint, "2", dir.join("secret").to_str().unwrap(), true);
    workers.0.push(again);
    assert_refused(&mut workers.0[1], "worker 2 left this run");
    let (status, stdout, stderr) = run.wait(Duration::from_secs(120));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status}: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("the run's JSON");
    assert_equals_oracle("wc", "24000", "6", &v);
}
