//! Stray connections against a running cluster: random bytes, an HTTP GET and slow
//! handshakes (3× the handshake slots, one byte each, then silence) at a worker's and the
//! driver's ports. They are refused and counted (a worker counts those of the run it serves,
//! not those before it); the real peers still connect, and the run exits 0 with the oracle's
//! result.

mod common;

use clasp_dataplane::transport::MAX_PENDING_HANDSHAKES;
use common::{ClusterDir, Workers, assert_measured_run_equals_oracle, json, start};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const SECRET: &str = "a cluster secret of thirty-two b";

/// `n` pseudo-random bytes (xorshift; the test needs noise, not quality).
fn noise(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Connects to `addr`, retrying until it listens (bounded).
fn connect(addr: SocketAddr) -> Option<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(s) = TcpStream::connect(addr) {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Sends `bytes` and waits (bounded) for the peer to close.
fn hit(addr: SocketAddr, bytes: &[u8]) {
    let Some(mut s) = connect(addr) else { return };
    let _ = s.write_all(bytes);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut sink = [0u8; 256];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

/// Random bytes at `addr` if it listens now (no retry), waiting at most a second for the
/// peer to close.
fn stray_once(addr: SocketAddr, seed: u64) {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return;
    };
    let _ = s.write_all(&noise(4096, seed));
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 256];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

/// Random bytes and an HTTP GET at `addr`.
fn garbage_and_http(addr: SocketAddr, seed: u64) {
    hit(addr, &noise(4096, seed));
    hit(
        addr,
        b"GET / HTTP/1.1\r\nHost: clasp\r\nConnection: close\r\n\r\n",
    );
}

fn worker_addrs(cluster: &ClusterDir) -> Vec<SocketAddr> {
    std::fs::read_to_string(&cluster.file)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("address = \""))
        .map(|a| a.trim_end_matches('"').parse().unwrap())
        .collect()
}

#[test]
fn stray_connections_and_slow_handshakes_do_not_fail_a_good_run() {
    let cluster = ClusterDir::new("cli-stray", 4343, 2);
    let _workers = Workers(vec![
        cluster.spawn_worker("1", SECRET),
        cluster.spawn_worker("2", SECRET),
    ]);
    let addrs = worker_addrs(&cluster);
    // Before the run: garbage and an HTTP GET at worker 1, then slow handshakes holding
    // every handshake slot three times over.
    garbage_and_http(addrs[0], 1);
    let slow: Vec<TcpStream> = (0..3 * MAX_PENDING_HANDSHAKES)
        .filter_map(|_| {
            let mut s = connect(addrs[0])?;
            s.write_all(b"C").ok()?;
            Some(s)
        })
        .collect();
    assert_eq!(slow.len(), 3 * MAX_PENDING_HANDSHAKES);
    let driver: SocketAddr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let listen = driver.to_string();
    let run = start(
        &[
            "run",
            "--static",
            "--cluster",
            cluster.path(),
            "--driver-listen",
            &listen,
            "--app",
            "wc",
            "--records",
            "20000",
            "--seed",
            "1",
            "--rate",
            "10000",
            "--json",
            "--stall-timeout-s",
            "30",
        ],
        &[("CLASP_CLUSTER_SECRET", SECRET)],
    );
    // During the run (about 2 s): random bytes at the driver and at worker 2, every 200 ms.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let during = std::thread::spawn({
        let done = std::sync::Arc::clone(&done);
        move || {
            let mut seed = 2;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                for addr in [driver, addrs[1]] {
                    stray_once(addr, seed);
                    seed += 1;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    let out = run.wait();
    done.store(true, std::sync::atomic::Ordering::Release);
    during.join().unwrap();
    drop(slow);
    let run = json(&out);
    assert_measured_run_equals_oracle("wc", "20000", "1", &run);
    let refused = run["refused_connections"].as_u64().unwrap();
    let by_workers = run["totals"]["net_refused"].as_u64().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The driver's part: the stray bytes and GETs at it.
    assert!(
        refused > by_workers,
        "refused {refused}, {by_workers} by workers: {stderr}"
    );
    // The workers' part, in their totals, is the run's only: worker 2's strays during it, and
    // at most the slow handshakes still held at worker 1 (64). Before the run worker 1 refused
    // the stray bytes, the GET and 2× the handshake slots (evicted), which are not the run's.
    assert!(by_workers > 0, "{stderr}");
    assert!(
        by_workers < 2 * MAX_PENDING_HANDSHAKES as u64,
        "{by_workers}: refusals from before the run counted as the run's"
    );
}
