//! `clasp local` through the real binary: a worker process and a separate ingress process.
//! Its digests and processed counts must equal `clasp oracle`'s on every app.

mod common;

use common::{assert_measured_run_equals_oracle, clasp, clasp_text, json};
use std::time::{Duration, Instant};

#[test]
fn local_equals_the_oracle_on_every_app() {
    for app in ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"] {
        for executors in ["1", "2"] {
            let local = json(&clasp(&[
                "local",
                "--app",
                app,
                "--records",
                "3000",
                "--seed",
                "5",
                "--executors",
                executors,
                "--ring-bytes",
                "16384",
                "--json",
            ]));
            assert_measured_run_equals_oracle(app, "3000", "5", &local);
            // The run lasts from the first admission to the last completion: at least as long
            // as any one tree took.
            let elapsed_us = local["elapsed_s"].as_f64().unwrap() * 1e6;
            let max_us = local["latency_us"]["max"].as_f64().unwrap();
            assert!(elapsed_us >= max_us * 0.99, "{app}: {local}");
        }
    }
}

/// The most executors `--executors` accepts fit one worker's segment (its rings).
/// The most executors a worker takes run; with `--pin` and no CPU for each of them, the run
/// says they run unpinned rather than leaving it silent.
#[test]
fn the_most_executors_a_worker_takes_run() {
    let out = clasp(&[
        "local",
        "--app",
        "wc",
        "--records",
        "500",
        "--seed",
        "5",
        "--executors",
        "64",
        "--ring-bytes",
        "16384",
        "--pin",
        "--json",
    ]);
    let local = json(&out);
    assert_measured_run_equals_oracle("wc", "500", "5", &local);
    // Counted as the worker counts them: the CPUs it may run on (not a quota).
    let cpus = clasp_dataplane::affinity::allowed_cpus().len();
    let err = String::from_utf8_lossy(&out.stderr);
    if cpus <= 64 {
        assert!(
            err.contains(&format!("--pin: 64 executors on {cpus} CPUs run unpinned")),
            "{err}"
        );
    } else {
        eprintln!("skipped the --pin note: {cpus} CPUs hold 64 pinned executors");
    }
}

/// With a rate, the report says how late each record was admitted after it fell due (a
/// root's latency starts at its admission, so that wait is not in the latency); without
/// one, nothing falls due and nothing is counted.
#[test]
fn a_paced_run_reports_how_late_records_were_admitted() {
    let paced = [
        "local",
        "--app",
        "wc",
        "--records",
        "2000",
        "--rate",
        "20000",
        "--idle",
        "park",
    ];
    let run = json(&clasp(&[&paced[..], &["--json"]].concat()));
    let delay = &run["admission_delay_us"];
    assert_eq!(delay["count"].as_u64(), Some(2000), "every record: {delay}");
    let (p50, max) = (
        delay["p50"].as_f64().unwrap(),
        delay["max"].as_f64().unwrap(),
    );
    assert!(0.0 <= p50 && p50 <= max, "{delay}");
    // A paced executor runs dry between records: it waits (parks) and, parking at once, sleeps.
    let totals = &run["totals"];
    let waits = |k: &str| {
        totals[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {totals}"))
    };
    assert!(waits("parks") > 0 && waits("sleeps") > 0, "{totals}");
    let (code, text, err) = clasp_text(&paced);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("admission delay µs p50"),
        "the text report says it:\n{text}"
    );
    let unpaced = json(&clasp(&[
        "local",
        "--app",
        "wc",
        "--records",
        "500",
        "--json",
    ]));
    assert_eq!(unpaced["admission_delay_us"]["count"].as_u64(), Some(0));
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["local", "--app", "nope"], "unknown app"),
        (&["local", "--app", "wc", "--executors", "0"], "--executors"),
        (
            &["local", "--app", "wc", "--ring-bytes", "1000"],
            "--ring-bytes",
        ),
        (&["local", "--app", "wc", "--rate=-3"], "--rate"),
        (
            &[
                "ingress",
                "--segment",
                "clasp-no-such-segment",
                "--app",
                "wc",
                "--records",
                "1",
                "--seed",
                "1",
            ],
            "clasp-no-such-segment",
        ),
    ];
    for (args, needle) in cases {
        let out = clasp(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// A second `clasp ingress` pointed at a running `clasp local` segment is refused, naming the
/// rings another ingress holds, and the run it tried to join finishes whole.
#[test]
fn a_second_ingress_is_refused_and_the_run_goes_on() {
    let _turn = common::one_at_a_time();
    let args = [
        "local",
        "--app",
        "wc",
        "--records",
        "4000",
        "--rate",
        "2000",
        "--seed",
        "1",
        "--json",
    ];
    let run = common::start(&args, &[]);
    let segment = format!("clasp-local-{}", run.pid());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::path::Path::new("/dev/shm").join(&segment).exists() {
        assert!(Instant::now() < deadline, "no segment {segment}");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The run's own ingress starts with the segment and claims its rings at once.
    std::thread::sleep(Duration::from_millis(500));
    let (code, _, err) = clasp_text(&[
        "ingress",
        "--segment",
        &segment,
        "--app",
        "wc",
        "--records",
        "10",
        "--seed",
        "2",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already has a live producer"), "{err}");
    let out = run.wait();
    assert!(out.status.success(), "{out:?}");
    assert_measured_run_equals_oracle("wc", "4000", "1", &json(&out));
}
