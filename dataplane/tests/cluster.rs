//! Static clusters in one process: worker threads and a driver over real TCP (127.0.0.1),
//! compared with the oracle. The multi-process runs are in the CLI's `tests/cli_cluster.rs`.

use clasp_dataplane::cluster::driver::{DriverConfig, run_driver};
use clasp_dataplane::cluster::worker::{ClusterWorkerConfig, run_cluster_worker};
use clasp_dataplane::routing::Spread;
use clasp_dataplane::transport::{ClusterSecret, Limits};
use clasp_operators::{Comparable, apps, oracle};
use std::net::SocketAddr;
use std::time::Duration;

/// A free port below the kernel's ephemeral range (so no `bind(0)` or outgoing connection of
/// another test can take it), held by a bound socket that never listens (so an early connect
/// is refused and retried, not accepted by us) until the worker is about to bind it.
fn free_addr() -> (SocketAddr, rustix::fd::OwnedFd) {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, bind, ipproto, socket_with};
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let span = 12_000u16;
    let start = (std::process::id() as u16).wrapping_mul(7919) % span;
    loop {
        let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % span;
        let port = 20_000 + (start + i) % span;
        let fd = socket_with(
            AddressFamily::INET,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            Some(ipproto::TCP),
        )
        .unwrap();
        let addr = std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
        if bind(&fd, &addr).is_ok() {
            return (addr.into(), fd);
        }
    }
}

fn run(app: &str, workers: u32, spread: Spread, ring_bytes: usize, limits: Limits, records: u64) {
    let spec = apps::builtin(app).unwrap();
    let secret = ClusterSecret::new(b"a test secret of enough bytes".to_vec()).unwrap();
    let (addrs, mut held): (Vec<(u32, SocketAddr)>, Vec<_>) = (1..=workers)
        .map(|i| {
            let (addr, fd) = free_addr();
            ((i, addr), Some(fd))
        })
        .unzip();
    let (tx, rx) = std::sync::mpsc::channel();
    let handles: Vec<_> = addrs
        .iter()
        .zip(held.iter_mut())
        .map(|(&(id, listen), fd)| {
            // Free the port for the worker about to bind it.
            drop(fd.take());
            let cfg = ClusterWorkerConfig {
                id,
                listen,
                cluster_id: 0xC1,
                workers: addrs.clone(),
                secret: secret.clone(),
                limits: limits.clone(),
                job_timeout: Duration::from_secs(20),
            };
            let tx = tx.clone();
            std::thread::spawn(move || {
                run_cluster_worker(&cfg, |_| {
                    let _ = tx.send(());
                })
            })
        })
        .collect();
    // Every worker has bound its port before the driver binds an ephemeral one (which could
    // otherwise be a port `free_addr` just released).
    for _ in 0..workers {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a worker listens");
    }
    let cfg = DriverConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        cluster_id: 0xC1,
        workers: addrs.clone(),
        secret,
        limits,
        app_name: app.into(),
        app_toml: String::new(),
        executors: 1,
        spread,
        ring_bytes,
        pin: false,
        records,
        seed: 3,
        rate_per_s: None,
        max_in_flight: 256,
        sample_every: 1,
        ready_timeout: Duration::from_secs(20),
        stall_timeout: Duration::from_secs(20),
    };
    let report = run_driver(&spec, &cfg).expect("cluster run");
    for h in handles {
        h.join().unwrap().expect("worker");
    }
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let got = Comparable::from_summaries(&spec, &report.summaries);
    if let Err(m) = oracle::run(&spec, records, 3).compare(&got) {
        panic!("{app}: {m:?}");
    }
    // Some apps keep one key from source to sink (every hop local under an even spread);
    // a crossed placement makes every chained request remote.
    if app == "wc" || spread == Spread::Alternate {
        assert!(
            report.totals.get("remote_sent").copied().unwrap_or(0) > 0,
            "{app}: {:?}",
            report.totals
        );
    }
}

#[test]
fn two_workers_in_one_process_equal_the_oracle() {
    run("wc", 2, Spread::Even, 1 << 20, Limits::default(), 3000);
}

#[test]
fn every_app_on_three_workers_in_one_process_equals_the_oracle() {
    for app in apps::builtin_names() {
        run(app, 3, Spread::Even, 1 << 20, Limits::default(), 1500);
    }
}

/// Tiny batches and credit: the data window holds one small batch.
fn tiny_limits() -> Limits {
    Limits {
        batch_bytes_max: 4096,
        data_credit_bytes: 4096,
        recv_buffer_bytes: 4096,
        recv_buffers: 8,
        ..Limits::default()
    }
}

#[test]
fn a_crossed_placement_with_tiny_rings_and_credit_does_not_deadlock() {
    // Alternate: operator o wholly on worker o % 2 (one executor each), so every chained
    // request crosses (o1 on A → o2 on B → o3 on A), through 4 KiB rings and 4 KiB credit.
    for app in ["wc", "etl", "syn"] {
        run(app, 2, Spread::Alternate, 4096, tiny_limits(), 2000);
    }
}
