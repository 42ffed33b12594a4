//! `clasp bench wc`, run as the built binary on a small input: both systems count every word
//! (and, where timely is built, the same outputs), and a build without the baseline says so.

mod common;

use common::{clasp_text, json};
use rustix::process::{Pid, Signal, kill_process};
use std::time::{Duration, Instant};

#[test]
fn bench_wc_counts_every_word_and_says_whether_timely_is_built() {
    let out = common::clasp(&[
        "bench",
        "wc",
        "--records",
        "2000",
        "--repetitions",
        "1",
        "--executors",
        "1,2",
        "--json",
    ]);
    let v = json(&out);
    let built = cfg!(feature = "baselines");
    assert_eq!(v["timely_built"], built);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["words"], 20_000, "{row}");
        assert!(row["clasp_sentences_per_s"]["median"].as_f64().unwrap() > 0.0);
        // Every sentence costs some CPU; a process cannot use more than its run's wall time
        // on every core (2 000 sentences: far under a second per sentence).
        let cpu = &row["clasp_cpu_us_per_sentence"];
        assert!(cpu["min"].as_f64().unwrap() > 0.0, "{row}");
        assert!(cpu["max"].as_f64().unwrap() < 1e6, "{row}");
        // Each thread's part is some CPU, and the parts are within the whole (the whole also
        // holds the run's setup outside these threads; one repetition, so each median is that
        // run's figure and the sum compares like with like).
        let median = |k: &str| row[k]["median"].as_f64().unwrap();
        let parts = [
            "clasp_executor_cpu_us_per_sentence",
            "clasp_ingress_cpu_us_per_sentence",
            "clasp_coordinator_cpu_us_per_sentence",
        ];
        for k in parts {
            assert!(median(k) > 0.0, "{k}: {row}");
        }
        let sum: f64 = parts.iter().map(|k| median(k)).sum();
        assert!(
            sum <= median("clasp_cpu_us_per_sentence") * 1.05,
            "the parts exceed the whole: {row}"
        );
        // Some core was busy, and no more than the machine has (plus rounding of the clocks).
        let cores = row["clasp_cores_busy"]["median"].as_f64().unwrap();
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(cores > 0.0 && cores <= machine * 1.05, "{row}");
        if built {
            assert!(
                row["timely_cores_busy"]["median"].as_f64().unwrap() > 0.0,
                "{row}"
            );
            assert!(row["timely_cpu_us_per_sentence"]["min"].as_f64().unwrap() > 0.0);
            assert_eq!(row["digests_equal"], true, "{row}");
            assert!(row["ratio"].as_f64().unwrap() > 0.0);
        } else {
            assert!(row["timely_sentences_per_s"].is_null(), "{row}");
            assert!(row["timely_cpu_us_per_sentence"].is_null(), "{row}");
            assert!(row["timely_cores_busy"].is_null(), "{row}");
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.contains("baseline is not built"), !built, "{stderr}");
}

#[test]
fn bench_wc_refuses_bad_options_naming_them() {
    let (code, _, err) = clasp_text(&["bench", "wc", "--executors", "0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--executors"), "{err}");
    if !cfg!(feature = "baselines") {
        let (code, _, err) = clasp_text(&["bench", "wc", "--only", "timely"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not built"), "{err}");
    }
}

/// Interrupted, a benchmark stops at once with 128 + the signal and removes the segment its
/// in-process worker made (it stayed in `/dev/shm` until some later run's sweep): `bench wc`
/// by SIGINT, `bench dispatch` by SIGTERM.
#[test]
fn an_interrupted_benchmark_exits_at_once_and_removes_its_segment() {
    let _turn = common::one_at_a_time();
    #[rustfmt::skip]
    let wc = ["bench", "wc", "--only", "clasp", "--executors", "1", "--records", "2000000"];
    interrupt_once_its_segment_exists(&wc, "clasp-bench-wc", Signal::INT, 130);
    let dispatch = ["bench", "dispatch", "--repetitions", "50"];
    interrupt_once_its_segment_exists(&dispatch, "clasp-bench-dispatch", Signal::TERM, 143);
}

/// Starts clasp with `args`, waits (at most 60 s) until a segment named `kind-PID-*` exists,
/// sends `signal`, and checks that clasp exits `code` saying so and leaves no such segment.
fn interrupt_once_its_segment_exists(args: &[&str], kind: &str, signal: Signal, code: i32) {
    let mut run = common::start(args, &[]);
    let pid = run.pid();
    let ours = || -> Vec<String> {
        let names = std::fs::read_dir("/dev/shm")
            .unwrap()
            .filter_map(Result::ok);
        let prefix = format!("{kind}-{pid}-");
        (names.filter_map(|e| e.file_name().into_string().ok()))
            .filter(|n| n.starts_with(&prefix))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while ours().is_empty() {
        assert!(!run.finished(), "{args:?} ended before its worker started");
        assert!(
            Instant::now() < deadline,
            "no segment of pid {pid} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = Pid::from_raw(pid as i32).unwrap();
    kill_process(target, signal).expect("signal the benchmark");
    let out = run.wait();
    let said = common::stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {said}");
    assert!(said.contains("stopping now"), "{args:?}: {said}");
    assert_eq!(ours(), Vec::<String>::new(), "{args:?}");
}
