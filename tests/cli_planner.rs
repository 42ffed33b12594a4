//! `clasp run` (the live planner) through the real binary: worker processes on 127.0.0.1,
//! live migrations while the input flows. Runs must equal `clasp oracle`; every wait is
//! bounded (a run that hangs is killed and fails the test).

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one clasp process of these tests may run.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Starts clasp with `env`; stdout and stderr are collected by two threads.
fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clasp"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
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

struct Running {
    args: Vec<String>,
    child: Child,
    out: std::thread::JoinHandle<Vec<u8>>,
    err: std::thread::JoinHandle<Vec<u8>>,
}

impl Running {
    /// Waits at most `RUN_TIMEOUT` (then kills it and fails the test).
    fn wait(mut self) -> Output {
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

fn clasp(args: &[&str]) -> Output {
    start(args, &[]).wait()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "clasp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn assert_equals_oracle(app: &str, records: &str, seed: &str, run: &serde_json::Value) {
    let oracle = json(&clasp(&[
        "oracle",
        "--app",
        app,
        "--records",
        records,
        "--seed",
        seed,
        "--json",
    ]));
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
        assert_eq!(run[key], oracle[key], "{app}: {key}");
    }
    assert_eq!(run["errors"].as_array().unwrap().len(), 0, "{app}");
}

#[test]
fn a_live_run_with_chaos_migrations_equals_the_oracle_while_the_input_flows() {
    for app in ["wc", "nwm"] {
        let run = json(&clasp(&[
            "run",
            "--app",
            app,
            "--records",
            "6000",
            "--seed",
            "9",
            "--peak-rate",
            "40000",
            "--max-workers",
            "3",
            "--chaos-migrations",
            "8",
            "--json",
        ]));
        assert_equals_oracle(app, "6000", "9", &run);
        let migrations = run["migrations"].as_array().expect("a migrations list");
        // The policy's first placement, then the chaos moves.
        assert!(migrations.len() >= 8, "{app}: {migrations:?}");
        for m in migrations {
            for k in [
                "planner_ms",
                "worker_pause_ms",
                "exported",
                "forwarded",
                "held",
                "admitted_during",
            ] {
                assert!(m[k].as_f64().is_some(), "{app}: {k} in {m}");
            }
        }
        // Not stop-the-world: inputs were admitted while migrations were in progress.
        assert!(
            migrations
                .iter()
                .any(|m| m["admitted_during"].as_u64().unwrap() > 0),
            "{app}: {migrations:?}"
        );
    }
}

#[test]
fn a_live_run_writes_its_summary_series_and_plots() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-planner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = json(&clasp(&[
        "run",
        "--app",
        "sd",
        "--duration",
        "2",
        "--peak-rate",
        "20000",
        "--pattern",
        "steps",
        "--interval-ms",
        "100",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]));
    for f in [
        "summary.json",
        "intervals.csv",
        "migrations.csv",
        "decisions.txt",
        "rate.svg",
        "latency.svg",
        "estimates.svg",
    ] {
        assert!(dir.join(f).exists(), "{f} in {}", dir.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(run["policy"], "clasp");
    assert!(!run["decisions"].as_array().unwrap().is_empty());
    assert!(run["intervals"].as_array().unwrap().len() >= 5);
    assert!(run["worker_seconds"].as_f64().unwrap() > 0.0);
    for k in ["alpha_us", "beta_us", "gamma_us", "w_bar_us"] {
        assert!(run["estimates"][k].as_f64().is_some(), "{k}");
    }
}

#[test]
fn bad_live_options_are_named() {
    for (args, needle) in [
        (&["run", "--pattern", "zigzag"][..], "zigzag"),
        (&["run", "--duration=0"][..], "--duration"),
        (&["run", "--policy", "magic"][..], "magic"),
        (&["run", "--app", "nope"][..], "nope"),
    ] {
        let out = clasp(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Workers started by the test itself, killed when it ends.
struct Workers(Vec<Child>);

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

/// A worker killed (SIGKILL) while the planner keeps migrating: the run ends with an error
/// naming the lost worker instead of hanging. (Its key groups' state is lost; recovering it is
/// later work.)
#[test]
fn a_worker_killed_during_migrations_is_a_clear_error_not_a_hang() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-planner-k-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cluster.toml");
    let ports = [free_port(), free_port()];
    std::fs::write(
        &file,
        format!(
            "cluster_id = 78\n[[worker]]\nid = 1\naddress = \"127.0.0.1:{}\"\n\
             [[worker]]\nid = 2\naddress = \"127.0.0.1:{}\"\n",
            ports[0], ports[1]
        ),
    )
    .unwrap();
    let secret = "a cluster secret of enough bytes!";
    let spawn = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_clasp"))
            .args(["worker", "--id", id, "--job-timeout-s", "20", "--cluster"])
            .arg(&file)
            .env("CLASP_CLUSTER_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("clasp worker runs")
    };
    let mut workers = Workers(vec![spawn("1"), spawn("2")]);
    let run = start(
        &[
            "run",
            "--cluster",
            file.to_str().unwrap(),
            "--app",
            "wc",
            "--records",
            "400000",
            "--pattern",
            "constant",
            "--peak-rate",
            "20000",
            "--chaos-migrations",
            "300",
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", secret)],
    );
    std::thread::sleep(Duration::from_millis(2500));
    let _ = workers.0[1].kill();
    let out = run.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "the run must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker 2"),
        "the error names the worker: {err}"
    );
}
