//! A static cluster whose workers each live in their own network namespace, joined to the
//! driver (in the root namespace) by veth pairs on a bridge: the same digests as the oracle
//! across real (virtual) links. Skipped, with the reason printed, where namespaces cannot be
//! made (not root, no `ip`, a sandbox without CAP_NET_ADMIN).

mod common;

use common::{Running, clasp, clasp_env, json, start};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "a namespace test secret of enough bytes";
const WORKERS: u32 = 3;

/// The namespaces, veths and bridge of one test; removed on drop, workers killed.
struct Hosts {
    tag: u32,
    workers: Vec<Child>,
    dir: std::path::PathBuf,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
        for i in 1..=WORKERS {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(i)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Hosts {
    fn ns(&self, i: u32) -> String {
        format!("clasp-c{}-{i}", self.tag)
    }
    fn bridge(&self) -> String {
        format!("cbr{}", self.tag % 100_000)
    }
    /// 10.79.S.0/24 with S from the pid, so concurrent runs do not share a subnet.
    fn addr(&self, host: u32) -> String {
        format!("10.79.{}.{host}", self.tag % 250)
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn make(h: &Hosts) -> Result<(), String> {
    let br = h.bridge();
    ip(&["link", "add", &br, "type", "bridge"])?;
    ip(&["addr", "add", &format!("{}/24", h.addr(254)), "dev", &br])?;
    ip(&["link", "set", &br, "up"])?;
    for i in 1..=WORKERS {
        let ns = h.ns(i);
        let (host_end, ns_end) = (
            format!("cvh{}x{i}", h.tag % 10_000),
            format!("cvn{}x{i}", h.tag % 10_000),
        );
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
        ])?;
        ip(&["link", "set", &host_end, "master", &br])?;
        ip(&["link", "set", &host_end, "up"])?;
        ip(&["link", "set", &ns_end, "netns", &ns])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", h.addr(i)),
            "dev",
            &ns_end,
        ])?;
        ip(&["-n", &ns, "link", "set", &ns_end, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    }
    Ok(())
}

/// Makes the hosts of test `tag` and writes their cluster file; `None` (the reason printed)
/// where namespaces cannot be made.
fn hosts(tag: u32) -> Option<(Hosts, std::path::PathBuf)> {
    let h = Hosts {
        tag,
        workers: Vec::new(),
        dir: std::env::temp_dir().join(format!("clasp-netns-{tag}")),
    };
    if let Err(reason) = make(&h) {
        println!("skipped: network namespaces unavailable: {reason}");
        return None;
    }
    std::fs::create_dir_all(&h.dir).unwrap();
    let mut file = format!("cluster_id = {}\n", 7000 + h.tag % 1000);
    for i in 1..=WORKERS {
        file += &format!("\n[[worker]]\nid = {i}\naddress = \"{}:7400\"\n", h.addr(i));
    }
    let path = h.dir.join("cluster.toml");
    std::fs::write(&path, file).unwrap();
    Some((h, path))
}

/// Starts every worker in its namespace (workers serve one job and exit: once per run).
fn start_workers(h: &mut Hosts, path: &std::path::Path) {
    for w in &mut h.workers {
        let until = Instant::now() + Duration::from_secs(30);
        while w.try_wait().ok().flatten().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = w.kill();
        let _ = w.wait();
    }
    h.workers.clear();
    for i in 1..=WORKERS {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &h.ns(i),
                env!("CARGO_BIN_EXE_clasp"),
                "worker",
            ])
            .args(["--id", &i.to_string(), "--cluster"])
            .arg(path)
            .args(["--job-timeout-s", "60"])
            .env("CLASP_CLUSTER_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("ip netns exec clasp worker");
        h.workers.push(child);
    }
}

#[test]
fn a_cluster_across_network_namespaces_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let Some((mut h, path)) = hosts(std::process::id() * 2) else {
        return;
    };
    let driver = format!("{}:0", h.addr(254));
    for app in ["wc", "etl"] {
        start_workers(&mut h, &path);
        let args = ["--app", app, "--records", "1500", "--seed", "9"];
        let oracle = json(&clasp(&[&["oracle", "--json"][..], &args].concat()));
        let path_str = path.to_str().unwrap();
        let run_args = [
            &[
                "run",
                "--static",
                "--json",
                "--cluster",
                path_str,
                "--driver-listen",
                &driver,
            ][..],
            &args,
        ]
        .concat();
        let run = json(&clasp_env(&run_args, &[("CLASP_CLUSTER_SECRET", SECRET)]));
        for key in ["state_digest", "output_digest", "processed"] {
            assert_eq!(run[key], oracle[key], "{app}: {key} across namespaces");
        }
    }
}

/// Whether worker `i`'s namespace holds an established connection to worker `j`.
fn linked(h: &Hosts, i: u32, j: u32) -> bool {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h.ns(i),
            "ss",
            "-Htn",
            "state",
            "established",
            "dst",
        ])
        .arg(h.addr(j))
        .output();
    out.is_ok_and(|o| o.status.success() && !o.stdout.is_empty())
}

/// A paced static run over the namespaced workers, still admitting when a test cuts a link,
/// returned once workers 1 and 2 are linked both ways.
fn start_linked_run(h: &Hosts, path: &std::path::Path, stall_s: u64) -> Running {
    let driver = format!("{}:0", h.addr(254));
    let stall = stall_s.to_string();
    let run = start(
        &[
            "run",
            "--static",
            "--cluster",
            path.to_str().unwrap(),
            "--driver-listen",
            &driver,
            "--app",
            "wc",
            "--records",
            "1000000",
            "--rate",
            "5000",
            "--stall-timeout-s",
            &stall,
            // What a cut link does to a run that cannot recover: a clear error naming the
            // link. (With checkpoints the run would restart its job from the last one, and
            // stall again on a link that stays cut, up to its recovery limit.)
            "--checkpoint-interval-ms",
            "0",
        ],
        &[("CLASP_CLUSTER_SECRET", SECRET)],
    );
    let until = Instant::now() + Duration::from_secs(30);
    while !(linked(h, 1, 2) && linked(h, 2, 1)) {
        assert!(Instant::now() < until, "workers 1 and 2 never linked");
        std::thread::sleep(Duration::from_millis(50));
    }
    run
}

#[test]
fn a_cut_link_between_two_workers_is_an_error_naming_both_within_the_stall_timeout() {
    let _turn = common::one_at_a_time();
    let Some((mut h, path)) = hosts(std::process::id() * 2 + 1) else {
        return;
    };
    start_workers(&mut h, &path);
    const STALL_S: u64 = 5;
    let run = start_linked_run(&h, &path, STALL_S);
    std::thread::sleep(Duration::from_millis(500));
    // Cut it for real: worker 1's sockets to worker 2 are destroyed (both ends see a reset).
    let cut = Command::new("ip")
        .args(["netns", "exec", &h.ns(1), "ss", "-K", "dst"])
        .arg(h.addr(2))
        .output()
        .expect("ss -K");
    if !cut.status.success() {
        println!(
            "skipped: ss -K failed: {}",
            String::from_utf8_lossy(&cut.stderr)
        );
        return;
    }
    let cut_at = Instant::now();
    let out = run.wait();
    let took = cut_at.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(STALL_S), "took {took:?}: {err}");
    assert!(
        err.contains("lost the link between worker")
            && err.contains("worker 1 at")
            && err.contains("worker 2 at"),
        "{err}"
    );
}

#[test]
fn a_silently_cut_link_between_two_workers_ends_the_run_within_the_stall_timeout() {
    let _turn = common::one_at_a_time();
    let Some((mut h, path)) = hosts(std::process::id() * 2 + 3) else {
        return;
    };
    start_workers(&mut h, &path);
    const STALL_S: u64 = 4;
    let run = start_linked_run(&h, &path, STALL_S);
    std::thread::sleep(Duration::from_millis(500));
    // Packets between the two vanish: no reset, no error on either side, only silence.
    for (i, j) in [(1, 2), (2, 1)] {
        let to = format!("{}/32", h.addr(j));
        if let Err(e) = ip(&["-n", &h.ns(i), "route", "add", "blackhole", &to]) {
            println!("skipped: {e}");
            return;
        }
    }
    let cut_at = Instant::now();
    let out = run.wait();
    let took = cut_at.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The stall timeout, then at most a second for the last probe round that names the link.
    assert!(
        took < Duration::from_secs(STALL_S + 3),
        "took {took:?}: {err}"
    );
    assert!(err.contains("no progress for"), "{err}");
    // Either direction's counts may be the ones that differ, or both.
    let one_way = |a: u32, b: u32| {
        err.contains(&format!(
            "worker {a} at {}:7400 sent worker {b} at",
            h.addr(a)
        ))
    };
    assert!(one_way(1, 2) || one_way(2, 1), "{err}");
}
