//! `clasp local` through the real binary: a worker process and a separate ingress process.
//! Its digests and processed counts must equal `clasp oracle`'s on every app.

mod common;

use common::{assert_measured_run_equals_oracle, clasp, json};

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
