//! The worker end to end, in-process (the ingress on a thread, or re-executed as a child
//! process where a real second process matters): every app equals the oracle, under
//! backpressure, with crossed placements, with garbage input, with a producer that dies, and
//! idle.

use clasp_dataplane::request::{FLAG_TRACKED, RequestHeader, frame_len, root_id};
use clasp_dataplane::routing::Spread;
use clasp_dataplane::runtime::ingress::{IngressConfig, run_ingress};
use clasp_dataplane::runtime::layout::{INGRESS_DONE, WorkerSegment};
use clasp_dataplane::runtime::{LocalConfig, LocalReport, run_local_worker};
use clasp_operators::{AppSpec, Comparable, apps, oracle};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const CHILD_ENV: &str = "CLASP_WORKER_TEST_CHILD";

fn config(tag: &str, executors: usize, ring_bytes: usize, spread: Spread) -> LocalConfig {
    static N: AtomicU32 = AtomicU32::new(0);
    LocalConfig {
        segment_name: format!(
            "clasp-wtest-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ),
        executors,
        ring_bytes,
        spread,
        max_in_flight: 256,
        interval: Duration::from_millis(20),
        stall_timeout: Duration::from_secs(120),
        ..LocalConfig::default()
    }
}

/// Runs `spec` on a worker with the ingress on a thread.
fn run(spec: &Arc<AppSpec>, records: u64, seed: u64, cfg: &LocalConfig) -> LocalReport {
    run_at(spec, records, seed, None, cfg)
}

/// [`run`] with the ingress paced at `rate_per_s` (None: as fast as the worker takes them).
fn run_at(
    spec: &Arc<AppSpec>,
    records: u64,
    seed: u64,
    rate_per_s: Option<f64>,
    cfg: &LocalConfig,
) -> LocalReport {
    let ingress = std::sync::Mutex::new(None);
    let report = run_local_worker(
        spec.clone(),
        cfg,
        |seg| {
            let name = seg.segment.name().unwrap().to_string();
            let spec = spec.clone();
            *ingress.lock().unwrap() = Some(std::thread::spawn(move || {
                let cfg = IngressConfig {
                    segment_name: name,
                    records,
                    seed,
                    rate_per_s,
                    stop: None,
                    source: Default::default(),
                    generator: None,
                };
                run_ingress(&spec, &cfg)
            }));
            Ok(())
        },
        || None,
    )
    .expect("the worker runs");
    let admitted = ingress
        .lock()
        .unwrap()
        .take()
        .unwrap()
        .join()
        .unwrap()
        .expect("the ingress runs");
    assert_eq!(admitted.admitted, records);
    report
}

fn assert_equals_oracle(spec: &AppSpec, records: u64, seed: u64, report: &LocalReport, what: &str) {
    assert!(
        report.errors.is_empty(),
        "{what}: faults {:?}",
        report.errors
    );
    let expected = oracle::run(spec, records, seed);
    let actual = Comparable::from_summaries(spec, &report.summaries);
    if let Err(m) = expected.compare(&actual) {
        panic!("{what}: differs from the oracle: {m}");
    }
    for (op, s) in spec.operators.iter().zip(&report.summaries) {
        assert_eq!(
            expected.processed[&op.name], s.processed,
            "{what}: processed by {}",
            op.name
        );
    }
}

#[test]
fn with_sampled_tracking_the_run_lasts_until_the_input_is_done() {
    // One root in 2^20 tracked: the last tracked tree ends near the start. The run's elapsed
    // time must still cover the input, paced to take at least 200 ms.
    let spec = Arc::new(apps::builtin("syn").unwrap());
    let cfg = LocalConfig {
        sample_every: 1 << 20,
        ..config("sampled", 1, 1 << 16, Spread::Even)
    };
    let report = run_at(&spec, 4_000, 7, Some(20_000.0), &cfg);
    assert_equals_oracle(&spec, 4_000, 7, &report, "syn, sampled tracking");
    assert!(report.latency.count <= 1, "{:?}", report.latency);
    assert!(
        report.elapsed >= Duration::from_millis(150),
        "elapsed {:?} for 4 000 records at 20 000/s",
        report.elapsed
    );
}

#[test]
fn every_app_equals_the_oracle_on_one_and_two_executors() {
    for name in apps::builtin_names() {
        let spec = Arc::new(apps::builtin(name).unwrap());
        for executors in [1, 2] {
            let cfg = config(name, executors, 1 << 16, Spread::Even);
            let report = run(&spec, 1500, 7, &cfg);
            assert_equals_oracle(
                &spec,
                1500,
                7,
                &report,
                &format!("{name} on {executors} executors"),
            );
            assert_eq!(
                report.latency.count, 1500,
                "{name}: every tree's latency is measured"
            );
        }
    }
}

#[test]
fn tiny_rings_force_wrap_around_and_a_crossed_pipeline_does_not_deadlock() {
    // 4 KiB rings hold a few dozen requests; operators alternate between two executors, so
    // every chained request crosses (o1 on A → o2 on B → o3 on A ...), in both directions.
    for name in ["wc", "syn", "etl", "nwm"] {
        let spec = Arc::new(apps::builtin(name).unwrap());
        let mut cfg = config(name, 2, 4096, Spread::Alternate);
        cfg.max_in_flight = 1024;
        let report = run(&spec, 2000, 11, &cfg);
        assert_equals_oracle(
            &spec,
            2000,
            11,
            &report,
            &format!("{name}, tiny rings, alternating"),
        );
        let frames = report.totals["frames_in"];
        // Each frame is at least 64 bytes: the rings lapped many times.
        assert!(frames * 64 > 20 * 4096, "{name}: only {frames} frames");
    }
}

#[test]
fn requests_to_the_executor_itself_skip_its_ring_and_the_outputs_equal_the_oracle() {
    // One executor owns every key group: each sentence is the one frame it reads, and each
    // word the split emits is queued in the executor's memory, never written to its own ring
    // (`executor/local_queue.rs`). Digests as the oracle's.
    for name in ["wc", "syn"] {
        let spec = Arc::new(apps::builtin(name).unwrap());
        let records = 3000;
        let report = run(&spec, records, 5, &config(name, 1, 1 << 16, Spread::Even));
        assert_equals_oracle(&spec, records, 5, &report, &format!("{name}, local queue"));
        assert_eq!(report.totals["frames_in"], records, "{name}: frames read");
        let processed: u64 = report.operator_metrics.iter().map(|m| m.processed).sum();
        assert_eq!(report.totals["local_sent"], processed - records, "{name}");
        assert_eq!(report.totals["overflowed"], 0, "{name}");
        // Execution times are sampled for runs of queued requests to an operator without
        // successors (WC's count, one call a run) as for requests one by one.
        for (op, m) in report.operator_metrics.iter().enumerate() {
            assert!(
                m.processed < 1000 || m.exec_ns_mean > 0.0,
                "{name} operator {op}: {} requests, a mean execution of {} ns",
                m.processed,
                m.exec_ns_mean
            );
        }
    }
}

#[test]
fn garbage_frames_are_counted_and_dropped_and_the_worker_goes_on() {
    let spec = Arc::new(apps::builtin("wc").unwrap());
    let cfg = config("garbage", 1, 1 << 16, Spread::Even);
    let records = 300u64;
    let feeder = std::sync::Mutex::new(None);
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let seg = seg.clone();
            let spec = spec.clone();
            *feeder.lock().unwrap() = Some(std::thread::spawn(move || {
                feed_with_garbage(&spec, &seg, records)
            }));
            Ok(())
        },
        || None,
    )
    .unwrap();
    feeder.lock().unwrap().take().unwrap().join().unwrap();
    assert_eq!(report.totals["bad_frames"], 3);
    assert_equals_oracle(
        &spec,
        records,
        1,
        &report,
        "wc with garbage frames in between",
    );
}

/// A hand-written ingress: valid records of WC (seed 1) with three garbage frames between.
fn feed_with_garbage(spec: &AppSpec, seg: &WorkerSegment, records: u64) {
    let mut p = seg.segment.producer(seg.index.ingress(0)).unwrap();
    let generator = clasp_operators::generate::generator(&spec.generator, 1).unwrap();
    let control = seg.control();
    for i in 0..records {
        if i % 100 == 50 {
            // A frame that is not a request: a short one, unknown flags, or a bad key length.
            let garbage: &[u8] = match i / 100 {
                0 => b"short",
                1 => &[
                    0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ],
                _ => &[
                    0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ],
            };
            p.push(garbage).unwrap();
        }
        let (key, payload) = generator.record(i);
        let hash = clasp_operators::key::key_hash(&key);
        let header = RequestHeader {
            operator: spec.source as u16,
            key_group: clasp_operators::key::key_group(hash),
            flags: FLAG_TRACKED,
            key_hash: hash,
            request_id: root_id(i),
            root_id: root_id(i),
            admitted_ns: 1,
            ..RequestHeader::default()
        };
        let mut frame = vec![0; frame_len(key.len(), payload.len())];
        header.write(&key, &payload, &mut frame);
        while p.push(&frame).is_err() {
            std::thread::yield_now();
        }
    }
    control.admitted.store(records, Ordering::Release);
    control.ingress_state.store(INGRESS_DONE, Ordering::Release);
}

#[test]
fn an_idle_worker_parks_instead_of_spinning() {
    let spec = Arc::new(apps::builtin("syn").unwrap());
    let cfg = config("idle", 2, 1 << 16, Spread::Even);
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let seg = seg.clone();
            std::thread::spawn(move || {
                // Attached, but no input for a second.
                let _rings: Vec<_> = (0..seg.executors())
                    .map(|e| seg.segment.producer(seg.index.ingress(e)).unwrap())
                    .collect();
                std::thread::sleep(Duration::from_secs(1));
                seg.control()
                    .ingress_state
                    .store(INGRESS_DONE, Ordering::Release);
            });
            Ok(())
        },
        || None,
    )
    .unwrap();
    // Each executor woke up only for the end of the stream (one control message per operator
    // and the stop), not every few microseconds: a spinning executor would count millions.
    let wakeups = report.totals["wakeups"];
    assert!(
        wakeups <= 2 * (10 + 2) * 2,
        "{wakeups} wake-ups in an idle second"
    );
    assert_eq!(report.totals["frames_in"], 0);
}

#[test]
fn a_dead_producer_is_reported_and_the_worker_finishes_what_it_admitted() {
    let spec = Arc::new(apps::builtin("wc").unwrap());
    let cfg = config("dead", 2, 1 << 16, Spread::Even);
    let child = std::sync::Mutex::new(None);
    let segment = std::sync::Mutex::new(None);
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let name = seg.segment.name().unwrap().to_string();
            let c = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "ingress_child", "--nocapture", "--ignored"])
                .env(CHILD_ENV, name)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            *child.lock().unwrap() = Some(c);
            *segment.lock().unwrap() = Some(seg.clone());
            Ok(())
        },
        || {
            // Kill the child once it has admitted something (it is slow: 2000 records/s),
            // however long it took to start on a loaded machine.
            let admitted = segment
                .lock()
                .unwrap()
                .as_ref()?
                .control()
                .admitted
                .load(Ordering::Acquire);
            let mut guard = child.lock().unwrap();
            let c = guard.as_mut()?;
            if admitted > 0 && c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
            None
        },
    )
    .unwrap();
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("ingress process") && e.contains("died")),
        "{:?}",
        report.errors
    );
    let admitted = report.admitted;
    assert!(admitted > 0 && admitted < 100_000, "admitted {admitted}");
    // Everything admitted was processed (the ingress may have written a few more frames than it
    // counted before it was killed; those are processed too).
    assert!(report.summaries[spec.source].processed >= admitted);
}

/// The ingress of `a_dead_producer_...`: runs until killed.
#[test]
#[ignore = "helper process for the dead-producer test"]
fn ingress_child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec = apps::builtin("wc").unwrap();
    let cfg = IngressConfig {
        segment_name: name,
        records: 100_000,
        seed: 1,
        rate_per_s: Some(2000.0),
        stop: None,
        source: Default::default(),
        generator: None,
    };
    let _ = run_ingress(&spec, &cfg);
}

#[test]
fn key_groups_move_between_executors_with_their_state() {
    let spec = Arc::new(apps::builtin("wc").unwrap());
    let cfg = config("export", 2, 1 << 16, Spread::Even);
    let mut report = run(&spec, 500, 3, &cfg);
    let count = spec
        .operators
        .iter()
        .position(|o| o.name == "count")
        .unwrap();
    let before: Vec<_> = report
        .instances
        .iter()
        .map(|i| i[count].state_digest())
        .collect();
    let total_before = {
        let mut d = before[0];
        d.combine(&before[1]);
        d
    };
    // Move every key group of executor 0 to executor 1.
    let groups = report.instances[0][count].groups_with_state();
    assert!(!groups.is_empty());
    for kg in groups {
        let bytes = report.instances[0][count].export_group(kg);
        report.instances[1][count]
            .import_group(kg, &bytes)
            .expect("a valid archive imports");
    }
    assert_eq!(report.instances[0][count].state_keys(), 0);
    let after = report.instances[1][count].state_digest();
    assert_eq!(after, total_before, "the state moved whole");
    // An occupied key group is refused rather than merged.
    let kg = report.instances[1][count].groups_with_state()[0];
    let copy = report.instances[1][count].export_group(kg);
    report.instances[1][count].import_group(kg, &copy).unwrap();
    assert!(report.instances[1][count].import_group(kg, &copy).is_err());
}
