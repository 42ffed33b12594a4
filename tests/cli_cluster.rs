//! `clasp run --static` and `clasp worker` through the real binary: worker processes on
//! 127.0.0.1 and the driver. Every run must equal `clasp oracle`; every wait is bounded (a
//! run that hangs is killed and fails the test).

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one clasp process of these tests may run.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs clasp with `env`, killed after `RUN_TIMEOUT`.
fn clasp_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clasp"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("clasp runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("clasp {args:?} did not finish within {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

fn clasp(args: &[&str]) -> Output {
    clasp_env(args, &[])
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
        "records",
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
    assert!(run["throughput_per_s"].as_f64().unwrap() > 0.0);
    for p in ["p50", "p95", "p99", "max"] {
        assert!(
            run["latency_us"][p].as_f64().unwrap() > 0.0,
            "{app}: latency {p}"
        );
    }
    assert_eq!(run["errors"].as_array().unwrap().len(), 0, "{app}");
}

#[test]
fn every_app_on_a_three_worker_static_cluster_equals_the_oracle() {
    let apps = json(&clasp(&["apps", "--json"]));
    let names: Vec<String> = apps
        .as_array()
        .expect("a list of apps")
        .iter()
        .map(|a| a["name"].as_str().expect("a name").to_owned())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    for app in &names {
        let run = json(&clasp(&[
            "run",
            "--static",
            "--workers",
            "3",
            "--app",
            app,
            "--records",
            "2000",
            "--seed",
            "4",
            "--json",
            "--stall-timeout-s",
            "30",
        ]));
        assert_equals_oracle(app, "2000", "4", &run);
        assert_eq!(run["workers"], 3);
    }
}

#[test]
fn a_crossed_placement_with_tiny_rings_and_credit_does_not_deadlock() {
    // Operators alternate between two workers (o1 on A → o2 on B → o3 on A): every chained
    // request is remote, through 4 KiB rings, 4 KiB batches and 4 KiB of credit.
    for app in ["wc", "etl"] {
        let run = json(&clasp(&[
            "run",
            "--static",
            "--workers",
            "2",
            "--spread",
            "alternate",
            "--ring-bytes",
            "4096",
            "--batch-bytes",
            "4096",
            "--data-credit-bytes",
            "4096",
            "--max-in-flight",
            "64",
            "--app",
            app,
            "--records",
            "2000",
            "--seed",
            "2",
            "--json",
            "--stall-timeout-s",
            "30",
        ]));
        assert_equals_oracle(app, "2000", "2", &run);
        assert!(
            run["totals"]["remote_sent"].as_u64().unwrap() > 0,
            "{app}: {}",
            run["totals"]
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

#[test]
fn a_worker_with_the_wrong_secret_is_refused_and_the_run_says_so() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cluster.toml");
    let ports = [free_port(), free_port()];
    std::fs::write(
        &file,
        format!(
            "cluster_id = 77\n[[worker]]\nid = 1\naddress = \"127.0.0.1:{}\"\n\
             [[worker]]\nid = 2\naddress = \"127.0.0.1:{}\"\n",
            ports[0], ports[1]
        ),
    )
    .unwrap();
    let good = "the right cluster secret, 32 bytes";
    let bad = "some other secret of enough bytes";
    let spawn = |id: &str, secret: &str| {
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
    let _workers = Workers(vec![spawn("1", good), spawn("2", bad)]);
    let out = clasp_env(
        &[
            "run",
            "--static",
            "--cluster",
            file.to_str().unwrap(),
            "--app",
            "wc",
            "--records",
            "100",
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", good)],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "the run must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker 2") && err.contains("secret"),
        "the reason names the worker and the secret: {err}"
    );
}

#[test]
fn a_worker_needs_a_secret_and_a_cluster_file() {
    let out = clasp_env(
        &[
            "worker",
            "--id",
            "1",
            "--cluster",
            "/nonexistent/cluster.toml",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let dir = std::env::temp_dir().join(format!("clasp-cli-cluster-s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        "cluster_id = 1\n[[worker]]\nid = 1\naddress = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clasp"));
    cmd.args(["worker", "--id", "1", "--cluster"])
        .arg(&file)
        .env_remove("CLASP_CLUSTER_SECRET");
    let out = cmd.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CLASP_CLUSTER_SECRET"));
}
