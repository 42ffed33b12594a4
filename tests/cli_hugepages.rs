//! Every clasp process runs with transparent huge pages off (`src/hugepages.rs`), unless
//! `MIMALLOC_ALLOW_THP` is set: read from `/proc/PID/status` of a worker once it listens (so
//! its start-up, where the switch is made, is over). "It listens" means this worker's own pid
//! holds the listening socket on its port: a connection that succeeds proves less, since any
//! other process may have bound that port after the test picked it.

mod common;

use common::{ClusterDir, start};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SECRET: &str = "a cluster secret of thirty-two b";

/// The `THP_enabled` field of a process's status: `None` when the kernel does not report it.
fn thp_enabled(status_path: &str) -> Option<bool> {
    let status = std::fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("THP_enabled:"))?;
    Some(line.split_whitespace().nth(1)? == "1")
}

/// Why these tests cannot tell anything here, if they cannot: the field must exist and read 1
/// for this test process, or a worker that reads 0 proves nothing.
fn cannot_tell() -> Option<&'static str> {
    match thp_enabled("/proc/self/status") {
        None => Some("this kernel's /proc/PID/status has no THP_enabled field"),
        Some(false) => Some("transparent huge pages are already off for this test process"),
        Some(true) => None,
    }
}

/// The worker's address in the cluster file.
fn address(cluster: &ClusterDir) -> SocketAddr {
    let text = std::fs::read_to_string(&cluster.file).unwrap();
    let line = text.lines().find(|l| l.starts_with("address")).unwrap();
    line.split('"').nth(1).unwrap().parse().unwrap()
}

/// The inodes of the TCP sockets listening on `port` in this network namespace
/// (`/proc/net/tcp`: local address `IP:PORT` in hex, state `0A` is LISTEN, inode in field 9).
fn listening_inodes(port: u16) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port_hex = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let listens = fields.get(3) == Some(&"0A");
            let on_port = fields.get(1).is_some_and(|a| a.ends_with(&port_hex));
            (listens && on_port).then(|| fields.get(9).map(|i| i.to_string()))?
        })
        .collect()
}

/// Whether process `pid` holds a socket listening on `port`.
fn holds_listener(pid: u32, port: u16) -> bool {
    let inodes = listening_inodes(port);
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        let target = std::fs::read_link(fd.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        inodes.iter().any(|i| target == format!("socket:[{i}]"))
    })
}

/// Starts a worker with `env`, waits until it listens, and reads its `THP_enabled`.
fn worker_thp(tag: &str, env: &[(&str, &str)]) -> bool {
    let cluster = ClusterDir::new(tag, 7, 1);
    let mut all_env = vec![("CLASP_CLUSTER_SECRET", SECRET)];
    all_env.extend_from_slice(env);
    let args = ["worker", "--id", "1", "--job-timeout-s", "20", "--cluster"];
    let args: Vec<&str> = args.into_iter().chain([cluster.path()]).collect();
    let mut worker = start(&args, &all_env);
    let status_path = format!("/proc/{}/status", worker.pid());
    let port = address(&cluster).port();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !holds_listener(worker.pid(), port) {
        if worker.finished() || Instant::now() >= deadline {
            let out = worker.kill();
            panic!(
                "the worker did not listen on port {port} within 20 s; it wrote: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = thp_enabled(&status_path);
    let out = worker.kill();
    seen.unwrap_or_else(|| {
        panic!(
            "no THP_enabled in the running worker's status; it wrote: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Checks that a worker started with `env` runs with huge pages `on` (unless this machine
/// cannot tell, which it prints).
fn check(tag: &str, env: &[(&str, &str)], on: bool, what: &str) {
    if let Some(why) = cannot_tell() {
        println!("skipped: {why}");
        return;
    }
    assert_eq!(worker_thp(tag, env), on, "{what}");
}

#[test]
fn a_worker_runs_without_transparent_huge_pages() {
    let what = "the worker runs with transparent huge pages enabled";
    check("thp-off", &[], false, what);
}

#[test]
fn mimalloc_allow_thp_leaves_them_to_the_kernel() {
    let what = "MIMALLOC_ALLOW_THP=1 did not leave huge pages on";
    check("thp-on", &[("MIMALLOC_ALLOW_THP", "1")], true, what);
}
