//! Every clasp process runs with transparent huge pages off (`src/hugepages.rs`), unless
//! `MIMALLOC_ALLOW_THP` is set: read from `/proc/PID/status` of a worker waiting for its job.

mod common;

use common::{ClusterDir, start};
use rustix::process::{Pid, Signal, kill_process};
use std::time::{Duration, Instant};

const SECRET: &str = "a cluster secret of thirty-two b";

/// The `THP_enabled` field of `pid`'s status: `None` when the kernel does not report it.
fn thp_enabled(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
    Some(line.split_whitespace().nth(1)? == "1")
}

/// Starts a worker with `env` and returns what its status says once it settles to `want`,
/// or what it said last after 10 s (`None`: the kernel has no such field).
fn worker_thp(tag: &str, env: &[(&str, &str)], want: bool) -> Option<bool> {
    let cluster = ClusterDir::new(tag, 7, 1);
    let mut all_env = vec![("CLASP_CLUSTER_SECRET", SECRET)];
    all_env.extend_from_slice(env);
    let args = ["worker", "--id", "1", "--job-timeout-s", "20", "--cluster"];
    let args: Vec<&str> = args.into_iter().chain([cluster.path()]).collect();
    let mut worker = start(&args, &all_env);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = thp_enabled(worker.pid());
    // The switch is made at start-up, after the log subscriber: wait for it.
    while seen.is_some_and(|s| s != want) && Instant::now() < deadline && !worker.finished() {
        std::thread::sleep(Duration::from_millis(20));
        seen = thp_enabled(worker.pid());
    }
    let _ = kill_process(Pid::from_raw(worker.pid() as i32).unwrap(), Signal::KILL);
    let _ = worker.wait();
    seen
}

#[test]
fn a_worker_runs_without_transparent_huge_pages() {
    match worker_thp("thp-off", &[], false) {
        None => println!("skipped: this kernel's /proc/PID/status has no THP_enabled field"),
        Some(on) => assert!(!on, "the worker runs with transparent huge pages enabled"),
    }
}

#[test]
fn mimalloc_allow_thp_leaves_them_to_the_kernel() {
    match worker_thp("thp-on", &[("MIMALLOC_ALLOW_THP", "1")], true) {
        None => println!("skipped: this kernel's /proc/PID/status has no THP_enabled field"),
        Some(on) => assert!(on, "MIMALLOC_ALLOW_THP=1 did not leave huge pages on"),
    }
}
