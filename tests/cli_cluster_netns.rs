//! A static cluster whose workers each live in their own network namespace, joined to the
//! driver (in the root namespace) by veth pairs on a bridge: the same digests as the oracle
//! across real (virtual) links. Skipped, with the reason printed, where namespaces cannot be
//! made (not root, no `ip`, a sandbox without CAP_NET_ADMIN).

mod common;

use common::{clasp, clasp_env, json};
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

#[test]
fn a_cluster_across_network_namespaces_equals_the_oracle() {
    let mut h = Hosts {
        tag: std::process::id(),
        workers: Vec::new(),
        dir: std::env::temp_dir().join(format!("clasp-netns-{}", std::process::id())),
    };
    if let Err(reason) = make(&h) {
        println!("skipped: network namespaces unavailable: {reason}");
        return;
    }
    std::fs::create_dir_all(&h.dir).unwrap();
    let mut file = format!("cluster_id = {}\n", 7000 + h.tag % 1000);
    for i in 1..=WORKERS {
        file += &format!("\n[[worker]]\nid = {i}\naddress = \"{}:7400\"\n", h.addr(i));
    }
    let path = h.dir.join("cluster.toml");
    std::fs::write(&path, file).unwrap();
    let driver = format!("{}:0", h.addr(254));
    for app in ["wc", "etl"] {
        // Workers serve one job and exit: start them for each app.
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
                .arg(&path)
                .args(["--job-timeout-s", "60"])
                .env("CLASP_CLUSTER_SECRET", SECRET)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .expect("ip netns exec clasp worker");
            h.workers.push(child);
        }
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
