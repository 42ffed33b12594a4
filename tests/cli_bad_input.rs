//! Bad input and a bad stdout never panic: absurd problem sizes are refused naming the field
//! (exit 2), a full disk under stdout is an error with a message (exit 1), a closed pipe ends
//! the program quietly, and an unwritable `--out` fails before any worker starts (exit 2).

mod common;

use common::{assert_no_panic, assert_refused_naming_the_last_option, clasp, clasp_env, stderr};
use std::io::Read as _;
use std::process::{Output, Stdio};

const PROBLEM: &str = r#"{"capacity_us_per_s": 850000, "headroom": 0.9,
 "alpha_us": 38.5, "beta_us": 275, "gamma_us": 51500,
 "max_workers": MAXW, "slots_per_worker": SLOTS,
 "operators": [{"name": "split", "demand_us_per_s": 400000, "rate_per_s": 1000, "exec_us": 400},
               {"name": "count", "demand_us_per_s": 1200000, "rate_per_s": 10000, "exec_us": 120}],
 "edges": [{"from": "split", "to": "count", "rate_per_s": 10000}]}"#;

/// A temp file holding `text`, removed when dropped.
fn write(name: &str, text: &str) -> tempfile::TempPath {
    common::temp_file(name, text)
}

#[test]
fn place_refuses_absurd_sizes_naming_the_field() {
    let many_operators = {
        let ops: Vec<String> = (0..1001)
            .map(|i| {
                format!(
                    r#"{{"name": "o{i}", "demand_us_per_s": 1, "rate_per_s": 1, "exec_us": 1}}"#
                )
            })
            .collect();
        PROBLEM
            .replace("MAXW", "10")
            .replace("SLOTS", "10")
            .replacen(
                r#""operators": ["#,
                &format!(r#""operators": [{},"#, ops.join(",")),
                1,
            )
    };
    for (name, text, field) in [
        ("w1.json", PROBLEM.replace("MAXW", "9e18"), "max_workers"),
        ("w2.json", PROBLEM.replace("MAXW", "1e8"), "max_workers"),
        (
            "w3.json",
            PROBLEM.replace("MAXW", "9000000000000000000"),
            "max_workers",
        ),
        (
            "s.json",
            PROBLEM.replace("SLOTS", "1e9"),
            "slots_per_worker",
        ),
        ("o.json", many_operators, "operators"),
    ] {
        let text = text.replace("MAXW", "10").replace("SLOTS", "10");
        let f = write(name, &text);
        for policy in ["clasp", "zhang24-sp", "exact"] {
            let out = clasp(&[
                "place",
                "--problem",
                f.to_str().expect("utf8"),
                "--policy",
                policy,
            ]);
            assert_no_panic(&out, name);
            assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
            let err = stderr(&out);
            assert!(err.contains(field), "{name}: {err}");
            assert!(
                err.contains("1000") || err.contains("1024"),
                "{name}: {err}"
            );
        }
    }
    // Quantities beyond 10^15 (a load could overflow, the bound on workers saturate).
    let text = PROBLEM
        .replace("MAXW", "4")
        .replace("SLOTS", "10")
        .replace(r#""demand_us_per_s": 400000"#, r#""demand_us_per_s": 1e16"#);
    let f = write("huge.json", &text);
    let out = clasp(&["place", "--problem", f.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("split.demand_us_per_s must be at most 1e15"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn place_refuses_an_endless_problem_file() {
    let out = clasp(&["place", "--problem", "/dev/zero"]);
    assert_no_panic(&out, "/dev/zero");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("larger than"), "{}", stderr(&out));
}

#[test]
fn absurd_numeric_options_exit_2_naming_the_option() {
    for args in [
        &[
            "sim",
            "--experiment",
            "placement",
            "--seeds",
            "1000000000000000000",
        ][..],
        &[
            "sim",
            "--experiment",
            "placement",
            "--executors",
            "1000000000000",
        ],
        &[
            "sim",
            "--experiment",
            "placement",
            "--seed",
            "18446744073709551615",
        ],
        &["sim", "--experiment", "placement", "--exec-us", "1e-300"],
        // A scripted move due after the run ends would never be made.
        &["run", "--duration", "3", "--moves", "10:2"],
        // Options only the e2e experiment reads are refused with another, not ignored.
        &["sim", "--experiment", "placement", "--pattern", "gradual"],
        &["sim", "--experiment", "gap", "--parallelism", "ignore"],
        &[
            "sim",
            "--experiment",
            "worker-count",
            "--latency-target-ms",
            "5",
        ],
        &["bench", "place", "--repetitions", "1000000000000000000"],
        &["bench", "ring", "--impls", "foo"],
        &["bench", "ring", "--sizes", "17"],
        &["run", "--duration", "1", "--checkpoint-dir", "/dev/null"],
        // The planner drives running workers: options about starting them do not apply.
        &["planner", "--cluster", "/dev/null", "--worker-cpu", "0.3"],
        &["planner", "--cluster", "/dev/null", "--max-workers", "2"],
        // A live run's workers are --max-workers: --workers without --static is refused.
        &["run", "--duration", "1", "--workers", "2"],
        // A static run has no planner: the live run's outputs are refused, not ignored.
        &["run", "--static", "--workers", "1", "--out", "/tmp/never"],
        &[
            "run",
            "--static",
            "--workers",
            "1",
            "--metrics-listen",
            "127.0.0.1:1",
        ],
        &["experiment", "scaling", "--quick", "--worker-cpu", "0.05"],
        &["run", "--duration", "1", "--max-workers", "100000"],
        &["run", "--static", "--workers", "100000"],
        &[
            "run",
            "--static",
            "--app",
            "wc",
            "--workers",
            "1",
            "--rate",
            "1e-300",
        ],
        &[
            "run",
            "--static",
            "--workers",
            "1",
            "--stall-timeout-s",
            "18446744073709551615",
        ],
        &[
            "run",
            "--static",
            "--app",
            "wc",
            "--workers",
            "1",
            "--ring-bytes",
            "1099511627776",
        ],
        &[
            "local",
            "--app",
            "wc",
            "--records",
            "10",
            "--seed",
            "1",
            "--rate",
            "1e-300",
        ],
    ] {
        assert_refused_naming_the_last_option(args);
    }
}

/// Values each in range but that cannot run together, or 0 where a count or a period must be
/// positive: refused before anything starts, in the flags' terms.
#[test]
fn settings_that_cannot_run_exit_2_naming_the_option() {
    for args in [
        // Rings that fit no shared-memory segment.
        &[
            "local",
            "--app",
            "wc",
            "--ring-bytes",
            "1073741824",
            "--executors",
            "8",
        ][..],
        &[
            "run",
            "--static",
            "--workers",
            "1",
            "--app",
            "wc",
            "--interval-ms",
            "0",
        ],
        &["local", "--app", "wc", "--max-in-flight", "0"],
    ] {
        assert_refused_naming_the_last_option(args);
    }
}

/// Runs clasp with /dev/full as its stdout.
fn to_dev_full(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    common::clasp_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .expect("clasp runs")
}

#[test]
fn a_full_disk_under_stdout_is_an_error_with_a_message() {
    for args in [
        &["apps"][..],
        &["apps", "--json"],
        &["apps", "show", "wc", "--dot"],
        &[
            "oracle",
            "--app",
            "wc",
            "--records",
            "100",
            "--seed",
            "1",
            "--json",
        ],
        &["oracle", "--app", "wc", "--records", "100", "--seed", "1"],
        &["gen", "--app", "wc", "--records", "100", "--seed", "1"],
    ] {
        let out = to_dev_full(args);
        assert_no_panic(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("writing to stdout") && err.contains("No space left"),
            "{args:?}: {err}"
        );
    }
}

/// Starts clasp with its stdout a pipe, reads at most `keep` bytes, closes the pipe and waits.
fn with_closed_pipe(args: &[&str], keep: usize) -> Output {
    let mut child = common::clasp_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clasp runs");
    let mut stdout = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; keep];
    if keep > 0 {
        stdout.read_exact(&mut buf).expect("some output");
    }
    drop(stdout);
    let mut err = Vec::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_end(&mut err)
        .expect("stderr");
    let status = child.wait().expect("wait");
    Output {
        status,
        stdout: buf,
        stderr: err,
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    for (args, keep) in [
        (&["apps"][..], 0),
        (&["apps", "--json"], 1),
        (
            &["oracle", "--app", "wc", "--records", "100", "--seed", "1"],
            1,
        ),
        // Far more than a pipe holds: the write after the reader left must fail.
        (
            &["gen", "--app", "wc", "--records", "2000000", "--seed", "1"],
            1,
        ),
    ] {
        let out = with_closed_pipe(args, keep);
        assert_no_panic(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}");
    }
}

#[test]
fn an_unwritable_out_dir_fails_before_any_worker_starts() {
    let out = clasp(&[
        "run",
        "--max-workers",
        "1",
        "--duration",
        "30",
        "--out",
        "/proc/forbidden/clasp-out",
    ]);
    assert_no_panic(&out, "--out");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("/proc/forbidden/clasp-out"),
        "{}",
        stderr(&out)
    );
    // The check came first: a started worker would have written its "listening on" line to
    // the stderr it inherits, and a run would have printed progress; there is only the error.
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("clasp: error: --out:"), "{err}");
    assert!(out.stdout.is_empty());
    // A run refused after the check makes no --out directory.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/out");
    let out = clasp(&[
        "run",
        "--out",
        dir.to_str().unwrap(),
        "--profile",
        "/nonexistent/profile.json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!tmp.path().join("new").exists(), "{}", stderr(&out));
}

#[test]
fn a_failure_to_write_out_files_still_prints_the_json_first() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-bad-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The directory is writable (the check before the run passes), but `summary.json` is a
    // non-empty directory, so renaming the written file over it fails after the run.
    std::fs::create_dir_all(dir.join("summary.json").join("occupied")).expect("dirs");
    // No checkpoints: the run fails (exit 1) and would keep them in the tests' state directory.
    let out = clasp(&[
        "run",
        "--app",
        "wc",
        "--records",
        "2000",
        "--peak-rate",
        "20000",
        "--max-workers",
        "1",
        "--checkpoint-interval-ms",
        "0",
        "--out",
        dir.to_str().expect("utf8"),
        "--json",
    ]);
    assert_no_panic(&out, "--out");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("summary.json"), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the JSON");
    assert_eq!(run["app"], "wc");
    // No temporary file is left behind.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn sim_and_place_refuse_unknown_rules_and_bad_cost_profiles_naming_the_flag() {
    let stale = write(
        "stale-profile.json",
        r#"{"version": 99, "alpha_us": 1, "beta_us": 1, "gamma_us": 1}"#,
    );
    let negative = write(
        "negative-profile.json",
        r#"{"version": 2, "alpha_us": 1, "beta_us": -1, "gamma_us": 1}"#,
    );
    let problem = write(
        "placement-problem.json",
        &PROBLEM.replace("MAXW", "10").replace("SLOTS", "10"),
    );
    let sim = |extra: &[&str]| {
        let mut a = vec!["sim", "--experiment", "e2e", "--app", "wc", "--seeds", "1"];
        a.extend_from_slice(extra);
        clasp(&a)
    };
    for (out, flag) in [
        (sim(&["--placement", "best-fit"]), "--placement"),
        (sim(&["--parallelism", "maybe"]), "--parallelism"),
        (sim(&["--cost-shape", "cubic"]), "--cost-shape"),
        (sim(&["--latency-target-ms", "0"]), "--latency-target-ms"),
        (sim(&["--latency-target-ms", "NaN"]), "--latency-target-ms"),
        (
            clasp(&["run", "--app", "wc", "--placement", "best-fit"]),
            "--placement",
        ),
        (
            sim(&["--cost-profile", "/nonexistent/profile.json"]),
            "--cost-profile",
        ),
        (
            sim(&["--cost-profile", stale.to_str().expect("utf8")]),
            "version 99",
        ),
        (
            sim(&["--cost-profile", negative.to_str().expect("utf8")]),
            "beta_us",
        ),
        (
            clasp(&[
                "place",
                "--problem",
                problem.to_str().expect("utf8"),
                "--placement",
                "worst-fit",
            ]),
            "--placement",
        ),
    ] {
        assert_no_panic(&out, flag);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
}

/// `--fault` (a testing option) for a worker the run does not start is refused before any
/// worker starts, naming why.
#[test]
fn a_fault_for_a_worker_the_run_does_not_start_is_refused_up_front() {
    for (args, says) in [
        (
            &[
                "run",
                "--static",
                "--app",
                "wc",
                "--workers",
                "2",
                "--fault",
                "kill-worker=9@steady",
            ][..],
            "no worker 9 in this run",
        ),
        (
            &[
                "run",
                "--static",
                "--app",
                "wc",
                "--workers",
                "2",
                "--checkpoint-interval-ms",
                "0",
                "--fault",
                "kill-worker=2@steady",
            ],
            "needs checkpoints",
        ),
        (
            &[
                "run",
                "--static",
                "--app",
                "wc",
                "--cluster",
                "/dev/null",
                "--fault",
                "stop-worker=1@steady",
            ],
            "the workers of --cluster FILE run elsewhere",
        ),
    ] {
        let out = assert_usage_error(args, says);
        assert!(
            !stderr(&out).contains("listening"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Runs clasp with `args` and checks it exits 2 without a panic, saying `says`.
fn assert_usage_error(args: &[&str], says: &str) -> Output {
    let out = clasp(args);
    assert_no_panic(&out, &format!("{args:?}"));
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    out
}

/// Workers on other hosts write their parts of a checkpoint on their own disks: a run whose
/// workers may be elsewhere takes no checkpoints by default (and says so), and asking for them
/// without a directory every host shares is refused before any worker starts.
#[test]
fn checkpoints_with_workers_on_other_hosts_need_a_directory_they_share() {
    let cases: [(&[&str], &str); 2] = [
        (
            &[
                "run",
                "--static",
                "--app",
                "wc",
                "--cluster",
                "/dev/null",
                "--checkpoint-interval-ms",
                "500",
            ],
            "give --checkpoint-dir DIR, a path every host shares",
        ),
        (
            &[
                "run",
                "--duration",
                "1",
                "--start-workers",
                "1",
                "--checkpoint-interval-ms",
                "500",
            ],
            "with workers that join",
        ),
    ];
    for (args, says) in cases {
        assert_usage_error(args, says);
    }
    // Not asked for: none, said on stderr (the empty cluster file then ends the run).
    let out = clasp(&["run", "--static", "--app", "wc", "--cluster", "/dev/null"]);
    assert_no_panic(&out, "--cluster without checkpoint flags");
    assert!(
        stderr(&out).contains("no checkpoints: with --cluster"),
        "{}",
        stderr(&out)
    );
}

/// A cluster file whose workers share an address, or an address no peer could connect to
/// (without a port, port 0 — drawn at random when the worker binds —, a port out of range), or
/// one that cannot be read, is refused before anything starts, naming the file and the worker,
/// by a run (static or live) and by a worker alike (exit 2).
#[test]
fn cluster_files_with_shared_or_portless_addresses_are_refused() {
    let dir = std::env::temp_dir().join(format!("clasp-bad-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "a cluster secret of at least 32 bytes").unwrap();
    let worker =
        |id: u32, address: &str| format!("[[worker]]\nid = {id}\naddress = \"{address}\"\n");
    for (name, body, says) in [
        (
            "shared.toml",
            worker(1, "127.0.0.1:47101") + &worker(2, "127.0.0.1:47101"),
            "workers 1 and 2 are both at 127.0.0.1:47101",
        ),
        (
            "portless.toml",
            worker(1, "127.0.0.1"),
            "worker 1: address \"127.0.0.1\": no port (HOST:PORT)",
        ),
        (
            "port-0.toml",
            worker(1, "127.0.0.1:0") + &worker(2, "127.0.0.1:47102"),
            "worker 1: address \"127.0.0.1:0\": port 0 is chosen at random",
        ),
        (
            "port-99999.toml",
            worker(1, "127.0.0.1:99999"),
            "worker 1: address \"127.0.0.1:99999\": invalid port \"99999\" (1..=65535)",
        ),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, format!("cluster_id = 7\n{body}")).unwrap();
        let (file, secret) = (file.to_str().unwrap(), secret.to_str().unwrap());
        let says = &format!("cluster file {file}: {says}");
        let live = [
            "run",
            "--app",
            "wc",
            "--cluster",
            file,
            "--secret-file",
            secret,
        ];
        let statics: Vec<&str> = [&live[..1], &["--static"], &live[1..]].concat();
        assert_usage_error(&statics, says);
        // A live run reads it before it says anything else.
        let out = assert_usage_error(&live, says);
        assert!(!stderr(&out).contains("no checkpoints"), "{}", stderr(&out));
        // Bounded: a worker that wrongly accepted the file would wait for a job.
        let serve = [
            "worker",
            "--id",
            "1",
            "--cluster",
            file,
            "--secret-file",
            secret,
        ];
        let serve = [&serve[..], &["--job-timeout-s", "1", "--max-jobs", "1"]].concat();
        assert_usage_error(&serve, says);
    }
    let missing = dir.join("missing.toml");
    let missing = missing.to_str().unwrap();
    assert_usage_error(
        &["run", "--app", "wc", "--cluster", missing],
        "reading the cluster file",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A live run's own options given to `--static` are refused naming both (they would be
/// ignored), and so are a live run's `--interval-ms 0` and a pattern or secret file that is
/// not one, each in its own terms.
#[test]
fn options_a_run_would_ignore_or_cannot_use_are_refused_naming_them() {
    let fixed = ["run", "--static", "--workers", "1", "--app", "wc"];
    for extra in [
        &["--duration", "1"][..],
        &["--policy", "faasflow"],
        &["--pattern", "constant"],
        &["--estimator", "saturated"],
        &["--placement", "next-fit"],
        &["--cost-priors-us", "1,1,1"],
        &["--no-profile"],
    ] {
        let args: Vec<&str> = fixed.iter().chain(extra).copied().collect();
        let out = assert_usage_error(&args, extra[0]);
        assert!(
            stderr(&out).contains("--static"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_usage_error(
        &["run", "--app", "wc", "--interval-ms", "0"],
        "--interval-ms 0: must be at least",
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_usage_error(&["run", "--app", "wc", "--pattern", d], "(a directory)");
    // A run of --records goes on until they are in: a pattern that ends at 0 never would.
    let to_zero = dir.path().join("to-zero.csv");
    std::fs::write(&to_zero, "0,5000\n2,0\n").unwrap();
    let to_zero = to_zero.to_str().unwrap();
    let run = [
        "run",
        "--app",
        "wc",
        "--records",
        "30000",
        "--pattern",
        to_zero,
    ];
    assert_usage_error(&run, "it ends at rate 0");
    let missing = dir.path().join("no-secret");
    assert_usage_error(
        &[
            "worker",
            "--id",
            "1",
            "--join",
            "127.0.0.1:9",
            "--cluster-id",
            "1",
            "--secret-file",
            missing.to_str().unwrap(),
        ],
        "--secret-file",
    );
}

/// A default checkpoint directory that cannot be made (no writable home; /proc takes no
/// directories, even from root): the run takes no checkpoints and says so, exit 0 — or, asked
/// for an interval, is refused before any worker starts (exit 2).
#[test]
fn an_unusable_default_checkpoint_directory_means_none_said_or_a_refusal() {
    let env = [("XDG_STATE_HOME", "/proc/clasp-no-state")];
    let run = [
        "run",
        "--static",
        "--workers",
        "1",
        "--app",
        "wc",
        "--records",
        "2000",
    ];
    let out = clasp_env(&run, &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("no checkpoints: the default checkpoint directory /proc/clasp-no-state"),
        "{}",
        stderr(&out)
    );
    let asked: Vec<&str> = run
        .iter()
        .copied()
        .chain(["--checkpoint-interval-ms", "500"])
        .collect();
    let out = clasp_env(&asked, &env);
    assert_no_panic(&out, "an interval without a usable directory");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--checkpoint-interval-ms 500: the default checkpoint directory"),
        "{}",
        stderr(&out)
    );
}

/// A refused `--resume` and a run that failed before its first checkpoint leave the directory
/// they were given as they found it: no lock file, and no `--checkpoint-dir` they made.
#[test]
fn a_refused_resume_or_an_early_failure_leaves_the_checkpoint_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("readme"), "not a checkpoint").unwrap();
    let docs_s = docs.to_str().unwrap();
    let run = ["run", "--static", "--workers", "2", "--app", "wc"];
    let resume = [&run[..], &["--records", "100", "--resume", docs_s]].concat();
    assert_usage_error(&resume, "no complete checkpoint");
    let left: Vec<_> = std::fs::read_dir(&docs).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    // Nobody listens at the sink: the workers fail to start.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let new = dir.path().join("new");
    let (new_s, sink) = (new.to_str().unwrap(), format!("tcp:{closed}"));
    let fails = [&run[..], &["--checkpoint-dir", new_s, "--sink", &sink]].concat();
    let out = clasp(&fails);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(!new.exists(), "{}", stderr(&out));
}
