//! Workers that outlive a run: `clasp worker` serves job after job and ends when idle, and a
//! worker started after a live run began joins it (`clasp worker --join`) and is used by the
//! run's next move. Every run must equal `clasp oracle`; every wait is bounded.

mod common;

use common::{ClusterDir, Workers, assert_equals_oracle, clasp_env, json};
use std::process::{Child, Command, Stdio};
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

#[test]
fn a_worker_serves_job_after_job_and_exits_when_idle() {
    let cluster = ClusterDir::new("serve-jobs", 91, 2);
    let mut workers = Workers(vec![worker(&cluster, "1", "4"), worker(&cluster, "2", "4")]);
    for (app, seed) in [("wc", "1"), ("etl", "2")] {
        let run = json(&clasp_env(
            &[
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
            ],
            &[("CLASP_CLUSTER_SECRET", SECRET)],
        ));
        assert_equals_oracle(app, "2000", seed, &run);
    }
    // Idle for --job-timeout-s after serving: the normal end.
    for c in &mut workers.0 {
        let st = exit_within(c, Duration::from_secs(20));
        assert!(st.success(), "{st}");
    }
}
