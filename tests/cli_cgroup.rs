//! Capped workers (`--worker-cpu`, `--cpus`) through the real binary: each worker process in
//! its own CPU cgroup, throttled at its cap, the run still equal to `clasp oracle`, and no
//! group left behind. The tests that need writable cgroups skip, saying why, where this
//! process cannot create one (not root, no cpu hierarchy); as root they run.

mod common;

use common::{ClusterDir, Workers, assert_equals_oracle, clasp_text, json, start};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for a worker process to show up in its group.
const APPEAR_TIMEOUT: Duration = Duration::from_secs(30);

/// The mount point of the hierarchy with `controller` (v1), or the unified one (v2, `None`).
fn mount_of(controller: Option<&str>) -> Option<PathBuf> {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mi.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let r: Vec<&str> = right.split(' ').collect();
        let hit = match controller {
            None => r[0] == "cgroup2",
            Some(c) => r[0] == "cgroup" && r.get(2)?.split(',').any(|x| x == c),
        };
        hit.then(|| PathBuf::from(left.split(' ').nth(4).unwrap()))
    })
}

/// Where the cpu controller is: (mount point, v2?).
fn cpu_mount() -> Option<(PathBuf, bool)> {
    if let Some(m) = mount_of(None)
        && std::fs::read_to_string(m.join("cgroup.controllers"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "cpu")
    {
        return Some((m, true));
    }
    mount_of(Some("cpu")).map(|m| (m, false))
}

/// Why capped cgroups cannot be made here, if they cannot.
fn skip_reason() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    // `Uid: real effective saved fs`: the effective one.
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some("not root".into());
    }
    let Some((mount, _)) = cpu_mount() else {
        return Some("no cgroup hierarchy with the cpu controller".into());
    };
    let probe = mount.join(format!("clasp-test-probe-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&probe) {
        return Some(format!("cannot create {}: {e}", probe.display()));
    }
    let _ = std::fs::remove_dir(&probe);
    None
}

macro_rules! need_cgroups {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("skipped: cgroups are not writable here ({why})");
            return;
        }
    };
}

/// A process's group in each hierarchy, from `/proc/PID/cgroup`: (controllers, path).
fn groups_of(pid: u32) -> Vec<(String, String)> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            Some((ctl.to_owned(), path.to_owned()))
        })
        .collect()
}

/// The process's group in the cpu hierarchy (v1 `cpu` line, or v2 `0::`).
fn cpu_group_of(pid: u32, v2: bool) -> Option<String> {
    groups_of(pid).into_iter().find_map(|(ctl, path)| {
        let hit = if v2 {
            ctl.is_empty()
        } else {
            ctl.split(',').any(|c| c == "cpu")
        };
        hit.then_some(path)
    })
}

/// The children of `parent`, from every `/proc/PID/stat`'s ppid.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`; comm may hold spaces, so split after its ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

/// `nr_throttled` of a cpu group.
fn nr_throttled(group_dir: &Path) -> u64 {
    std::fs::read_to_string(group_dir.join("cpu.stat"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("nr_throttled ")?.trim().parse().ok())
        .unwrap_or(0)
}

/// Group names starting with `prefix` directly under `dir`.
fn groups_named(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// No `clasp-<pid>-*` group of the process `pid` is left in the cpu or cpuacct hierarchy.
fn assert_no_groups_left(pid: u32) {
    let prefix = format!("clasp-{pid}-");
    let mounts = [cpu_mount().map(|m| m.0), mount_of(Some("cpuacct"))];
    for m in mounts.into_iter().flatten() {
        let left = groups_named(&m, &prefix);
        assert!(left.is_empty(), "left behind in {}: {left:?}", m.display());
    }
}

/// A worker process as the test saw it during the run.
#[derive(Debug)]
struct Seen {
    pid: u32,
    /// Its group in the cpu hierarchy.
    group: String,
    /// `nr_throttled > 0` in its group's cpu.stat at some look.
    throttled: bool,
    /// In this run's group in a separate cpuacct hierarchy (or there is none).
    in_acct: bool,
}

#[test]
fn a_capped_two_worker_static_run_is_throttled_equals_the_oracle_and_leaves_no_group() {
    let _turn = common::one_at_a_time();
    need_cgroups!();
    let (mount, v2) = cpu_mount().unwrap();
    let mut run = start(
        &[
            "run",
            "--static",
            "--workers",
            "2",
            "--worker-cpu",
            "0.3",
            "--app",
            "wc",
            "--records",
            "20000",
            "--json",
        ],
        &[],
    );
    let pid = run.pid();
    let prefix = format!("/clasp-{pid}-");
    let mut seen: Vec<Seen> = Vec::new();
    let deadline = Instant::now() + APPEAR_TIMEOUT;
    while !run.finished() && Instant::now() < deadline {
        for w in children_of(pid) {
            let Some(group) = cpu_group_of(w, v2).filter(|g| g.contains(&prefix)) else {
                continue;
            };
            let throttled = nr_throttled(&mount.join(group.trim_start_matches('/'))) > 0;
            // Where cpuacct is a hierarchy of its own, the worker is in this run's group there
            // too (the CPU usage of its group is read from there).
            let acct = groups_of(w)
                .into_iter()
                .find(|(c, _)| c.split(',').any(|x| x == "cpuacct"))
                .is_none_or(|(_, path)| path.contains(&prefix));
            match seen.iter_mut().find(|s| s.pid == w) {
                Some(s) => {
                    s.throttled |= throttled;
                    s.in_acct |= acct;
                }
                None => seen.push(Seen {
                    pid: w,
                    group,
                    throttled,
                    in_acct: acct,
                }),
            }
        }
        if seen.len() == 2 && seen.iter().all(|s| s.throttled && s.in_acct) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let v = json(&run.wait());
    assert_equals_oracle("wc", "20000", "1", &v);
    let mut names: Vec<&str> = seen
        .iter()
        .map(|s| s.group.rsplit('/').next().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["w1", "w2"],
        "each worker in its own group: {seen:?}"
    );
    for s in &seen {
        assert!(s.throttled, "never throttled at 0.3 of a core: {s:?}");
        assert!(s.in_acct, "not in its cpuacct group: {s:?}");
    }
    assert_no_groups_left(pid);
}

#[test]
fn a_capped_live_run_pinned_inside_its_cpu_set_equals_the_oracle_and_leaves_no_group() {
    let _turn = common::one_at_a_time();
    // `--pin` inside `--cpus 0-1`: the executor takes CPU 1 and verifies it runs there (a
    // failed pin would be a fault in `errors`, which the oracle comparison requires empty).
    need_cgroups!();
    let run = start(
        &[
            "run",
            "--max-workers",
            "2",
            "--worker-cpu",
            "0.5",
            "--cpus",
            "0-1",
            "--pin",
            "--app",
            "wc",
            "--records",
            "4000",
            "--peak-rate",
            "20000",
            "--json",
        ],
        &[],
    );
    let pid = run.pid();
    let v = json(&run.wait());
    assert_equals_oracle("wc", "4000", "1", &v);
    assert_no_groups_left(pid);
}

/// The secret of the clusters of workers capped by hand.
const CAPPED_SECRET: &str = "a cluster secret of at least 32 bytes";

/// `clasp worker --id 1 --worker-cpu 0.5` of `cluster` with `extra` options, once it is in
/// its own group (at most [`APPEAR_TIMEOUT`]): the worker and that group.
fn capped_worker(cluster: &ClusterDir, extra: &[&str], v2: bool) -> (Workers, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(["worker", "--id", "1", "--worker-cpu", "0.5"])
        .args(extra)
        .args(["--cluster", cluster.path()])
        .env("CLASP_CLUSTER_SECRET", CAPPED_SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("clasp worker runs");
    let w = child.id();
    let workers = Workers(vec![child]);
    let deadline = Instant::now() + APPEAR_TIMEOUT;
    let group = loop {
        match cpu_group_of(w, v2) {
            Some(g) if g.contains(&format!("/clasp-{w}-")) => break g,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            g => panic!("worker {w} never joined its group: {g:?}"),
        }
    };
    // It joins its group before it handles signals: the test signals it once it listens.
    let text = std::fs::read_to_string(&cluster.file).unwrap();
    let address = (text.lines())
        .find_map(|l| l.strip_prefix("address = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("the worker's address");
    while std::net::TcpStream::connect(address).is_err() {
        assert!(
            Instant::now() < deadline,
            "worker {w} never listened at {address}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (workers, group)
}

#[test]
fn a_worker_started_by_hand_caps_itself_and_removes_its_group_on_exit() {
    let _turn = common::one_at_a_time();
    need_cgroups!();
    let (mount, v2) = cpu_mount().unwrap();
    let cluster = ClusterDir::new("cgroup-by-hand", 77, 1);
    let secret = CAPPED_SECRET;
    let job = ["--job-timeout-s", "30", "--max-jobs", "1", "--cpus", "0"];
    let (mut workers, group) = capped_worker(&cluster, &job, v2);
    let w = workers.0[0].id();
    assert!(group.ends_with("/w1"), "{group}");
    let dir = mount.join(group.trim_start_matches('/'));
    let quota = if v2 { "cpu.max" } else { "cpu.cfs_quota_us" };
    let q = std::fs::read_to_string(dir.join(quota)).unwrap();
    assert!(q.starts_with("5000"), "{quota}: {q}");
    // The CPU set is applied as the worker starts, after it joined its group: wait for it.
    let deadline = Instant::now() + APPEAR_TIMEOUT;
    loop {
        let status = std::fs::read_to_string(format!("/proc/{w}/status")).unwrap();
        if status.lines().any(|l| l == "Cpus_allowed_list:\t0") {
            break;
        }
        assert!(Instant::now() < deadline, "--cpus 0: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = common::clasp_env(
        &[
            "run",
            "--static",
            "--cluster",
            cluster.path(),
            "--app",
            "wc",
            "--records",
            "2000",
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", secret)],
    );
    assert_equals_oracle("wc", "2000", "1", &json(&run));
    let st = workers.0[0].wait().unwrap();
    assert!(st.success(), "{st}");
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_no_groups_left(w);
}

/// A worker capped by hand that a signal ends at once (SIGINT, SIGHUP, a second SIGTERM)
/// removes its group all the same: `std::process::exit` runs no `Drop`, the cleanup registry
/// does the group's.
#[test]
fn a_worker_capped_by_hand_that_a_signal_ends_at_once_removes_its_group() {
    use rustix::process::{Pid, Signal, kill_process};
    let _turn = common::one_at_a_time();
    need_cgroups!();
    let (_, v2) = cpu_mount().unwrap();
    let cluster = ClusterDir::new("cgroup-signal", 78, 1);
    // (A second SIGTERM takes the same path; between jobs the first one already ends the
    // worker the ordinary way, and two sent at once may arrive as one.)
    for (signal, status) in [(Signal::INT, 130), (Signal::HUP, 129)] {
        let (mut workers, _) = capped_worker(&cluster, &[], v2);
        let w = workers.0[0].id();
        kill_process(Pid::from_raw(w as i32).unwrap(), signal).unwrap();
        let st = workers.0[0].wait().unwrap();
        assert_eq!(st.code(), Some(status), "{signal:?}: {st}");
        assert_no_groups_left(w);
    }
}

#[test]
fn caps_the_kernel_refuses_and_caps_on_workers_it_did_not_start_are_usage_errors() {
    let _turn = common::one_at_a_time();
    let (code, _, err) = clasp_text(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--worker-cpu",
        "0.01",
        "--app",
        "wc",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1 ms minimum"), "{err}");
    let (code, _, err) =
        clasp_text(&["worker", "--id", "1", "--cluster", "x", "--worker-cpu", "0"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = clasp_text(&[
        "run",
        "--static",
        "--cluster",
        "/nonexistent",
        "--worker-cpu",
        "0.3",
        "--app",
        "wc",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("clasp worker --worker-cpu"), "{err}");
    let (code, _, err) = clasp_text(&["run", "--static", "--workers", "1", "--cpus", "1-0"]);
    assert_eq!(code, 2, "{err}");
}

/// A capped run killed outright (SIGKILL) cannot remove its groups; its workers die with it and
/// the empty groups stay. `clasp clean` (and every start of run, local or worker) removes the
/// groups of a creator that is gone, and never one whose creator lives.
#[test]
fn clasp_clean_removes_the_empty_groups_of_a_run_killed_outright() {
    let _turn = common::one_at_a_time();
    need_cgroups!();
    let (mount, v2) = cpu_mount().expect("a cpu hierarchy");
    let own = cpu_group_of(std::process::id(), v2).unwrap_or_default();
    let parent = mount.join(own.trim_start_matches('/'));
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let stale = parent.join(format!("clasp-{dead_pid}-00ff00ff"));
    let live = parent.join(format!("clasp-{}-00ff00ff", std::process::id()));
    for g in [&stale, &live] {
        std::fs::create_dir(g).unwrap();
        std::fs::create_dir(g.join("w1")).unwrap();
    }
    let (code, out, err) = clasp_text(&["clean"]);
    let stale_left = stale.exists();
    let live_kept = live.exists();
    for g in [&stale, &live] {
        let _ = std::fs::remove_dir(g.join("w1"));
        let _ = std::fs::remove_dir(g);
    }
    assert_eq!(code, 0, "{err}");
    assert!(
        !stale_left,
        "{} is still there: {out}{err}",
        stale.display()
    );
    assert!(live_kept, "a live process's group was removed");
    assert!(out.contains("cgroup"), "{out}");
}
