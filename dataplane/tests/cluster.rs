//! Clusters in one process: worker threads and a driver over real TCP (127.0.0.1), compared
//! with the oracle — static, and with live migrations (random ones, and scripted ones: moves
//! that move nothing, growing from one worker, shrinking to one). The multi-process runs are in
//! the CLI's `tests/cli_cluster.rs`.

use clasp_dataplane::cluster::control::{Chaos, Controller, Move, Static};
use clasp_dataplane::cluster::driver::{ClusterReport, DriverConfig, run_driver_with};
use clasp_dataplane::cluster::node::{ClusterWorkerConfig, NodeError, run_cluster_worker};
use clasp_dataplane::routing::{Slots, Spread};
use clasp_dataplane::runtime::IdlePolicy;
use clasp_dataplane::transport::{ClusterSecret, Limits};
use clasp_operators::{Comparable, apps, oracle};
use clasp_protocol::ids::{Epoch, Slot};
use clasp_protocol::routing::RoutingTable;
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

thread_local! {
    /// The idle policy of the next `run_with` on this thread: the job's, and worker 1's own.
    static IDLE: std::cell::Cell<(IdlePolicy, Option<IdlePolicy>)> =
        const { std::cell::Cell::new((IdlePolicy::Auto, None)) };
}

fn run(app: &str, workers: u32, spread: Spread, ring_bytes: usize, limits: Limits, records: u64) {
    run_with(
        app,
        workers,
        1,
        spread,
        ring_bytes,
        limits,
        records,
        &mut Static,
    );
}

#[allow(clippy::too_many_arguments)]
fn run_with(
    app: &str,
    workers: u32,
    executors: u16,
    spread: Spread,
    ring_bytes: usize,
    limits: Limits,
    records: u64,
    ctl: &mut dyn Controller,
) -> ClusterReport {
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
                join: None,
                leave: None,
                leave_timeout: Duration::from_secs(20),
                registry: clasp_operators::Registry::builtin(),
                idle: if id == 1 { IDLE.get().1 } else { None },
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
        executors,
        spread,
        ring_bytes,
        idle: IDLE.get().0,
        records,
        ..driver_config(app, addrs.clone(), secret, limits)
    };
    let report = run_driver_with(&spec, &cfg, ctl).expect("cluster run");
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
    report
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

#[test]
fn a_job_that_spins_runs_to_the_oracle_beside_a_worker_that_parks() {
    // The job asks every worker to spin (executors and network threads); worker 1 was started
    // with its own policy and parks. Every chained request crosses between the two.
    IDLE.set((IdlePolicy::Spin { us: 20 }, Some(IdlePolicy::Park)));
    let limits = Limits::default();
    let report = run_with(
        "syn",
        2,
        1,
        Spread::Alternate,
        1 << 16,
        limits,
        2000,
        &mut Static,
    );
    IDLE.set((IdlePolicy::Auto, None));
    // Worker 2 took the job's spin: its executors spun (and counted it apart from work).
    let spun_ns = report.totals.get("idle_spin_ns").copied().unwrap_or(0);
    assert!(spun_ns > 0, "{:?}", report.totals);
    // Worker 1's executors parked, and what their sleeps cost was measured apart from work.
    let slept_ns = report.totals.get("sleep_cpu_ns").copied().unwrap_or(0);
    assert!(slept_ns > 0, "{:?}", report.totals);
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

/// Random live migrations while the input flows, on every app, with two executors per worker
/// (so key groups also move between executors of one worker).
#[test]
fn every_app_with_random_live_migrations_equals_the_oracle() {
    let mut moved_with_input = 0;
    for app in apps::builtin_names() {
        let ops = apps::builtin(app).unwrap().operators.len();
        let slots = Slots {
            workers: vec![1, 2, 3],
            executors: 2,
        };
        let records = 3000;
        let mut chaos = Chaos::new(6, records, slots, ops, 11);
        let r = run_with(
            app,
            3,
            2,
            Spread::Even,
            1 << 20,
            Limits::default(),
            records,
            &mut chaos,
        );
        assert_eq!(r.migrations.len(), 6, "{app}: {:?}", r.migrations);
        moved_with_input += r
            .migrations
            .iter()
            .filter(|m| m.admitted_during > 0)
            .count();
    }
    // Not stop-the-world: the ingress kept admitting during migrations.
    assert!(moved_with_input > 0);
}

/// A scripted controller: moves at given admitted counts.
struct Script {
    moves: Vec<(u64, RoutingTable)>,
}

impl Controller for Script {
    fn poll(&mut self, _t_s: f64, admitted: u64) -> Option<Move> {
        if self.moves.first().is_some_and(|m| admitted >= m.0) {
            let (_, routing) = self.moves.remove(0);
            return Some(Move {
                routing,
                reason: "script".into(),
            });
        }
        None
    }
}

/// Every operator's key groups split evenly over `slots`.
fn over(ops: usize, slots: &[u32]) -> RoutingTable {
    RoutingTable::from_fn(Epoch(0), ops, 1024, |_, g| {
        Slot(slots[g.index() * slots.len() / 1024])
    })
}

#[test]
fn scripted_moves_grow_from_one_worker_shrink_to_one_and_move_nothing() {
    for app in ["wc", "etl"] {
        let ops = apps::builtin(app).unwrap().operators.len();
        let mut script = Script {
            moves: vec![
                // To one worker, then grow to three, then the same table again (nothing moves),
                // then back to one.
                (1, over(ops, &[0])),
                (800, over(ops, &[0, 1, 2])),
                (1600, over(ops, &[0, 1, 2])),
                (2400, over(ops, &[2])),
            ],
        };
        let r = run_with(
            app,
            3,
            1,
            Spread::Even,
            1 << 20,
            Limits::default(),
            3000,
            &mut script,
        );
        let m = &r.migrations;
        assert_eq!(m.len(), 4, "{app}: {m:?}");
        assert_eq!((m[0].workers_before, m[0].workers_after), (3, 1));
        assert_eq!((m[1].workers_before, m[1].workers_after), (1, 3));
        assert_eq!(m[2].key_groups_moved, 0);
        assert_eq!((m[3].workers_before, m[3].workers_after), (3, 1));
        assert!(r.worker_seconds > 0.0);
    }
}

/// State moves in parts that fit the transport's batches: with 4 KiB batches and credit, WC's
/// state still arrives whole.
#[test]
fn live_migrations_through_tiny_batches_and_rings_equal_the_oracle() {
    let slots = Slots {
        workers: vec![1, 2],
        executors: 1,
    };
    let records = 3000;
    let mut chaos = Chaos::new(5, records, slots, 2, 5);
    let r = run_with(
        "wc",
        2,
        1,
        Spread::Even,
        8192,
        tiny_limits(),
        records,
        &mut chaos,
    );
    assert_eq!(r.migrations.len(), 5, "{:?}", r.migrations);
}

/// A driver of `app` over `workers`, with the tests' timeouts and one executor a worker.
fn driver_config(
    app: &str,
    workers: Vec<(u32, SocketAddr)>,
    secret: ClusterSecret,
    limits: Limits,
) -> DriverConfig {
    DriverConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        advertise: None,
        cluster_id: 0xC1,
        workers,
        workers_log_here: false,
        joinable: Vec::new(),
        secret,
        limits,
        app_name: app.into(),
        app_toml: String::new(),
        executors: 1,
        spread: Spread::Even,
        ring_bytes: 1 << 20,
        pin: false,
        idle: IdlePolicy::Auto,
        records: 1000,
        seed: 3,
        rate_per_s: None,
        max_in_flight: 256,
        sample_every: 1,
        ready_timeout: Duration::from_secs(20),
        stall_timeout: Duration::from_secs(20),
        interval: Duration::from_millis(100),
        migration_timeout: Duration::from_secs(20),
        copy_ahead: Duration::from_millis(5),
        sink: None,
        sink_per_worker: false,
        source: Default::default(),
        checkpoint: None,
        faults: Vec::new(),
    }
}

/// A worker's job timeout does not run out while a driver is connected to it and waits for
/// another worker it cannot reach: the run fails naming the unreachable worker, not this one
/// (which gave up and was "lost"). Once the driver is gone, the worker's timeout runs again.
#[test]
fn a_connected_driver_holds_a_workers_job_timeout() {
    let secret = ClusterSecret::new(b"a test secret of enough bytes".to_vec()).unwrap();
    let (listen, fd) = free_addr();
    // Bound and never listening, for the whole test: every connect to worker 2 is refused.
    let (unreachable, _held) = free_addr();
    let addrs = vec![(1, listen), (2, unreachable)];
    drop(fd);
    let cfg = ClusterWorkerConfig {
        id: 1,
        listen,
        cluster_id: 0xC1,
        workers: addrs.clone(),
        secret: secret.clone(),
        limits: Limits::default(),
        job_timeout: Duration::from_secs(1),
        join: None,
        leave: None,
        leave_timeout: Duration::from_secs(20),
        registry: clasp_operators::Registry::builtin(),
        idle: None,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || run_cluster_worker(&cfg, |_| tx.send(()).unwrap()));
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the worker listens");
    let spec = apps::builtin("wc").unwrap();
    let cfg = DriverConfig {
        ready_timeout: Duration::from_secs(3),
        ..driver_config("wc", addrs, secret, Limits::default())
    };
    let err = run_driver_with(&spec, &cfg, &mut Static)
        .expect_err("worker 2 cannot be reached")
        .to_string();
    assert!(err.contains("worker 2"), "{err}");
    assert!(!err.contains("worker 1"), "{err}");
    let exit = worker.join().unwrap();
    assert!(matches!(exit, Err(NodeError::NoJob { .. })), "{exit:?}");
}

/// A worker whose copy of the cluster file has another worker at another port than the
/// driver's refuses the job at once, naming both addresses, instead of failing a link to the
/// wrong port seconds into the run.
#[test]
fn a_worker_whose_cluster_file_disagrees_with_the_drivers_refuses_the_job() {
    let secret = ClusterSecret::new(b"a test secret of enough bytes".to_vec()).unwrap();
    let (one, fd1) = free_addr();
    let (two, fd2) = free_addr();
    // Where worker 2's copy puts worker 1: bound, never listening.
    let (elsewhere, _held) = free_addr();
    let drivers = vec![(1, one), (2, two)];
    drop((fd1, fd2));
    let (tx, rx) = std::sync::mpsc::channel();
    let handles: Vec<_> = [(1, drivers.clone()), (2, vec![(1, elsewhere), (2, two)])]
        .into_iter()
        .map(|(id, workers)| {
            let cfg = ClusterWorkerConfig {
                id,
                listen: if id == 1 { one } else { two },
                cluster_id: 0xC1,
                workers,
                secret: secret.clone(),
                limits: Limits::default(),
                job_timeout: Duration::from_secs(20),
                join: None,
                leave: None,
                leave_timeout: Duration::from_secs(20),
                registry: clasp_operators::Registry::builtin(),
                idle: None,
            };
            let tx = tx.clone();
            std::thread::spawn(move || run_cluster_worker(&cfg, |_| tx.send(()).unwrap()))
        })
        .collect();
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a worker listens");
    }
    let spec = apps::builtin("wc").unwrap();
    let cfg = driver_config("wc", drivers, secret, Limits::default());
    let err = run_driver_with(&spec, &cfg, &mut Static)
        .expect_err("worker 2 refuses the job")
        .to_string();
    let says =
        format!("the driver has worker 1 at {one}, this worker's cluster file at {elsewhere}");
    assert!(err.contains(&says), "{err}");
    for h in handles {
        let _ = h.join().unwrap();
    }
}
