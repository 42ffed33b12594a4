//! `clasp local` through the real binary: a worker process and a separate ingress process.
//! Its digests and processed counts must equal `clasp oracle`'s on every app.

use std::process::Command;

fn clasp(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(args)
        .output()
        .expect("clasp runs")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "clasp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn local_equals_the_oracle_on_every_app() {
    for app in ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"] {
        let oracle = json(&clasp(&[
            "oracle",
            "--app",
            app,
            "--records",
            "3000",
            "--seed",
            "5",
            "--json",
        ]));
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
            for key in [
                "state_digest",
                "output_digest",
                "processed",
                "app",
                "records",
                "seed",
            ] {
                assert_eq!(
                    local[key], oracle[key],
                    "{app} on {executors} executors: {key}"
                );
            }
            assert!(local["throughput_per_s"].as_f64().unwrap() > 0.0);
            for p in ["p50", "p95", "p99", "max"] {
                assert!(
                    local["latency_us"][p].as_f64().unwrap() > 0.0,
                    "{app}: latency {p}"
                );
            }
            assert_eq!(local["errors"].as_array().unwrap().len(), 0);
        }
    }
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
