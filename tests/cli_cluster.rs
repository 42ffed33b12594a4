//! `clasp run --static` and `clasp worker` through the real binary: worker processes on
//! 127.0.0.1 and the driver. Every run must equal `clasp oracle`; every wait is bounded (a
//! run that hangs is killed and fails the test).

mod common;

use common::{ClusterDir, Workers, assert_measured_run_equals_oracle, clasp, clasp_env, json};
use std::process::Command;

#[test]
fn every_app_on_a_three_worker_static_cluster_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let apps = json(&clasp(&["apps", "--json"]));
    let names: Vec<String> = apps
        .as_array()
        .expect("a list of apps")
        .iter()
        .map(|a| a["name"].as_str().expect("a name").to_owned())
        .collect();
    // The seven benchmark apps and wc-text.
    assert_eq!(names.len(), 8, "{names:?}");
    for app in &names {
        let run = json(&clasp(&[
            "run",
            "--static",
            "--workers",
            "3",
            "--app",
            app,
            "--records",
            "2000",
            "--seed",
            "4",
            "--json",
            "--stall-timeout-s",
            "30",
        ]));
        assert_measured_run_equals_oracle(app, "2000", "4", &run);
        assert_eq!(run["workers"], 3);
    }
}

/// An app file of `n` forward operators in a chain.
fn chain_app(n: usize) -> tempfile::TempPath {
    let mut text = format!("name = \"chain{n}\"\ngenerator = \"syn\"\n");
    for i in 1..=n {
        text += &format!("\n[[operator]]\nname = \"s{i}\"\nkind = \"forward\"\n");
        if i < n {
            text += &format!("successors = [\"s{}\"]\n", i + 1);
        }
    }
    common::temp_file(&format!("chain{n}.toml"), &text)
}

/// The most operators an app may have run on a cluster (what a worker reports grows with the
/// app's edges, not its operators squared); one more is refused before any worker starts.
#[test]
fn an_app_of_the_most_operators_runs_on_a_cluster_and_one_more_is_refused() {
    let _turn = common::one_at_a_time();
    let app = chain_app(256);
    let path = app.to_str().unwrap();
    let run = json(&clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app-file",
        path,
        "--records",
        "2000",
        "--seed",
        "3",
        "--json",
    ]));
    common::assert_digests_equal_oracle(&["--app-file", path], "2000", "3", &run);
    assert_eq!(run["errors"].as_array().unwrap().len(), 0, "{run}");
    let too_many = chain_app(257);
    let out = clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app-file",
        too_many.to_str().unwrap(),
        "--records",
        "10",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("more than the limit of 256"), "{err}");
    assert!(
        !err.contains("worker"),
        "refused before any worker started: {err}"
    );
}

#[test]
fn a_crossed_placement_with_tiny_rings_and_credit_does_not_deadlock() {
    let _turn = common::one_at_a_time();
    // Operators alternate between two workers (o1 on A → o2 on B → o3 on A): every chained
    // request is remote, through 4 KiB rings, 4 KiB batches and 4 KiB of credit.
    for app in ["wc", "etl"] {
        let run = json(&clasp(&[
            "run",
            "--static",
            "--workers",
            "2",
            "--spread",
            "alternate",
            "--ring-bytes",
            "4096",
            "--batch-bytes",
            "4096",
            "--data-credit-bytes",
            "4096",
            "--max-in-flight",
            "64",
            "--app",
            app,
            "--records",
            "2000",
            "--seed",
            "2",
            "--json",
            "--stall-timeout-s",
            "30",
        ]));
        assert_measured_run_equals_oracle(app, "2000", "2", &run);
        assert!(
            run["totals"]["remote_sent"].as_u64().unwrap() > 0,
            "{app}: {}",
            run["totals"]
        );
    }
}

#[test]
fn a_worker_with_the_wrong_secret_is_refused_and_the_run_says_so() {
    let _turn = common::one_at_a_time();
    let cluster = ClusterDir::new("cli-cluster", 77, 2);
    let good = "the right cluster secret, 32 bytes";
    let bad = "some other secret of enough bytes";
    let _workers = Workers(vec![
        cluster.spawn_worker("1", good),
        cluster.spawn_worker("2", bad),
    ]);
    let out = clasp_env(
        &[
            "run",
            "--static",
            "--cluster",
            cluster.path(),
            "--app",
            "wc",
            "--records",
            "100",
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", good)],
    );
    assert!(!out.status.success(), "the run must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker 2") && err.contains("secret"),
        "the reason names the worker and the secret: {err}"
    );
}

#[test]
fn a_worker_needs_a_secret_and_a_cluster_file() {
    let _turn = common::one_at_a_time();
    let out = clasp_env(
        &[
            "worker",
            "--id",
            "1",
            "--cluster",
            "/nonexistent/cluster.toml",
        ],
        &[],
    );
    // A file that cannot be read is a usage error, as a missing --app-file is.
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cluster.toml"));
    let dir = std::env::temp_dir().join(format!("clasp-cli-cluster-s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        "cluster_id = 1\n[[worker]]\nid = 1\naddress = \"127.0.0.1:1\"\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clasp"));
    cmd.args(["worker", "--id", "1", "--cluster"])
        .arg(&file)
        .env_remove("CLASP_CLUSTER_SECRET");
    let out = cmd.output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CLASP_CLUSTER_SECRET"));
}

/// A run whose stderr cannot be written (a log on a full disk) still runs and prints its
/// result: its notes are lost, not the run (`eprintln!` would panic on the first one).
#[test]
fn a_run_whose_stderr_fails_still_runs_and_prints_its_result() {
    let _turn = common::one_at_a_time();
    for args in [
        &["run", "--static", "--workers", "2"][..],
        &["run", "--duration", "2", "--uncapped"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let mut child = common::clasp_command()
            .args(args)
            .args(["--app", "wc", "--records", "2000", "--seed", "4", "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(full)
            .spawn()
            .expect("clasp starts");
        let mut stdout = child.stdout.take().expect("piped");
        let out = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut stdout, &mut s).map(|_| s)
        });
        let deadline = std::time::Instant::now() + common::RUN_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?} did not end");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let out = out.join().unwrap().expect("stdout");
        assert_eq!(status.code(), Some(0), "{args:?}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("the run's JSON");
        assert_measured_run_equals_oracle("wc", "2000", "4", &v);
    }
}
