//! `clasp run` (the live planner) through the real binary: worker processes on 127.0.0.1,
//! live migrations while the input flows. Runs must equal `clasp oracle`; every wait is
//! bounded (a run that hangs is killed and fails the test). The tests that start runs
//! take turns (`common::one_at_a_time`).

mod common;

use common::{ClusterDir, Workers, assert_equals_oracle, clasp, json, one_at_a_time, start};
use std::time::Duration;

#[test]
fn a_live_run_with_chaos_migrations_equals_the_oracle_while_the_input_flows() {
    let _turn = one_at_a_time();
    for app in ["wc", "nwm"] {
        // WC's copies are refreshed a round every millisecond once they are all out; a copy
        // window of 50 ms instead of 10 leaves room for rounds on a loaded machine, where the
        // first thousand copies alone took longer than 10 ms and the moves came first.
        let extra: &[&str] = if app == "wc" {
            &["--copy-ahead-ms", "50"]
        } else {
            &[]
        };
        let run = chaos_run(app, "8", extra);
        let migrations = run["migrations"].as_array().expect("a migrations list");
        // The policy's first placement, then the chaos moves.
        assert!(migrations.len() >= 8, "{app}: {migrations:?}");
        for m in migrations {
            for k in [
                "planner_ms",
                "worker_pause_ms",
                "exported",
                "forwarded",
                "held",
                "gated",
                "admitted_during",
            ] {
                assert!(m[k].as_f64().is_some(), "{app}: {k} in {m}");
            }
        }
        // Not stop-the-world: inputs were admitted while migrations were in progress.
        assert!(
            migrations
                .iter()
                .any(|m| m["admitted_during"].as_u64().unwrap() > 0),
            "{app}: {migrations:?}"
        );
        // Key groups were copied ahead and moved as their changes (and still nothing lost).
        let totals = &run["totals"];
        // Moved key groups emitted requests marked as theirs (the upstream gate's mark).
        for k in [
            "groups_copied_ahead",
            "groups_moved_as_changes",
            "sent_from_moved",
        ] {
            assert!(totals[k].as_u64().unwrap() > 0, "{app}: {k} in {totals}");
        }
        // WC's counts change all the time, so its copies were refreshed before the moves
        // (about a thousand times in this run; NWM's few state changes may leave none).
        if app == "wc" {
            let k = "copies_refreshed_ahead";
            assert!(totals[k].as_u64().unwrap() > 0, "{app}: {k} in {totals}");
        }
    }
}

/// `clasp run --app APP` with `migrations` chaos migrations and `extra` options, checked
/// against the oracle; its JSON summary.
fn chaos_run(app: &str, migrations: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "run",
        "--app",
        app,
        "--records",
        "6000",
        "--seed",
        "9",
        "--peak-rate",
        "40000",
        "--max-workers",
        "3",
        "--chaos-migrations",
        migrations,
        "--json",
    ];
    args.extend_from_slice(extra);
    let run = json(&clasp(&args));
    assert_equals_oracle(app, "6000", "9", &run);
    run
}

/// `--copy-ahead-ms 0`: every key group moves whole, as before copies ahead, losing nothing.
#[test]
fn with_copy_ahead_off_key_groups_move_whole() {
    let _turn = one_at_a_time();
    let run = chaos_run("wc", "4", &["--copy-ahead-ms", "0"]);
    let totals = &run["totals"];
    for k in [
        "groups_copied_ahead",
        "copies_refreshed_ahead",
        "groups_moved_as_changes",
    ] {
        assert_eq!(totals[k].as_u64(), Some(0), "{k} in {totals}");
    }
}

#[test]
fn a_live_run_writes_its_summary_series_and_plots() {
    let _turn = one_at_a_time();
    let dir = std::env::temp_dir().join(format!("clasp-cli-planner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = json(&clasp(&[
        "run",
        "--app",
        "sd",
        "--duration",
        "2",
        "--peak-rate",
        "20000",
        "--pattern",
        "steps",
        "--interval-ms",
        "100",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]));
    for f in [
        "summary.json",
        "intervals.csv",
        "migrations.csv",
        "decisions.txt",
        "workers.csv",
        "rate.svg",
        "latency.svg",
        "estimates.svg",
    ] {
        assert!(dir.join(f).exists(), "{f} in {}", dir.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(run["policy"], "clasp");
    assert!(!run["decisions"].as_array().unwrap().is_empty());
    assert!(run["intervals"].as_array().unwrap().len() >= 5);
    assert!(run["worker_seconds"].as_f64().unwrap() > 0.0);
    // A paced run says how late it admitted each record, over the run and per interval.
    let delay = &run["admission_delay_us"];
    assert!(delay["count"].as_u64().unwrap() > 0, "{delay}");
    assert!(delay["max"].as_f64().unwrap() >= delay["p50"].as_f64().unwrap());
    for iv in run["intervals"].as_array().unwrap() {
        assert!(
            iv["admission_delay_p99_ms"].as_f64().unwrap() >= 0.0,
            "{iv}"
        );
    }
    for k in ["alpha_us", "beta_us", "gamma_us", "w_bar_us"] {
        assert!(run["estimates"][k].as_f64().is_some(), "{k}");
    }
}

/// `--moves`: scripted migrations at their times, to even placements on the workers asked for,
/// and still every record processed exactly once.
#[test]
fn scripted_moves_happen_in_order_and_lose_nothing() {
    let _turn = one_at_a_time();
    let run = json(&clasp(&[
        "run",
        "--app",
        "wc",
        "--records",
        "8000",
        "--seed",
        "4",
        "--peak-rate",
        "8000",
        "--pattern",
        "constant",
        "--max-workers",
        "3",
        "--moves",
        "0:1,0.3:3,0.6:2",
        "--json",
    ]));
    assert_equals_oracle("wc", "8000", "4", &run);
    assert_eq!(run["policy"], "script");
    let moves: Vec<(u64, u64)> = run["migrations"]
        .as_array()
        .expect("a migrations list")
        .iter()
        .inspect(|m| assert_eq!(m["reason"], "script", "{m}"))
        .map(|m| {
            let n = |k: &str| m[k].as_u64().unwrap();
            (n("workers_before"), n("workers_after"))
        })
        .collect();
    assert_eq!(moves, [(3, 1), (1, 3), (3, 2)]);
}

#[test]
fn bad_live_options_are_named() {
    for (args, needle) in [
        (&["run", "--pattern", "zigzag"][..], "zigzag"),
        (&["run", "--duration=0"][..], "--duration"),
        (&["run", "--policy", "magic"][..], "magic"),
        (&["run", "--app", "nope"][..], "nope"),
        (&["run", "--moves", "2:1,1:2"][..], "ascend"),
        (&["run", "--moves", "1:9"][..], "1..=3"),
        (
            &["run", "--source", "stdin:", "--chaos-migrations", "2"][..],
            "--records",
        ),
        (
            &["run", "--static", "--workers", "1", "--moves", "1:1"][..],
            "cannot be used with",
        ),
    ] {
        let out = clasp(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A worker killed (SIGKILL) while the planner keeps migrating: the run ends with an error
/// naming the lost worker instead of hanging. (Its key groups' state is lost; recovering it is
/// later work.)
#[test]
fn a_worker_killed_during_migrations_is_a_clear_error_not_a_hang() {
    let _turn = one_at_a_time();
    let cluster = ClusterDir::new("cli-planner-kill", 78, 2);
    let secret = "a cluster secret of enough bytes!";
    let mut workers = Workers(vec![
        cluster.spawn_worker("1", secret),
        cluster.spawn_worker("2", secret),
    ]);
    let run = start(
        &[
            "run",
            "--cluster",
            cluster.path(),
            "--app",
            "wc",
            "--records",
            "400000",
            "--pattern",
            "constant",
            "--peak-rate",
            "20000",
            "--chaos-migrations",
            "300",
            // Without checkpoints a lost worker ends the run (tests/cli_recovery.rs recovers).
            "--checkpoint-interval-ms",
            "0",
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", secret)],
    );
    std::thread::sleep(Duration::from_millis(2500));
    let killed = workers.0[1].id().to_string();
    let _ = workers.0[1].kill();
    let _ = workers.0[1].wait();
    let out = run.wait();
    // Nothing of the killed worker is left in /dev/shm (a cluster worker's segment is
    // anonymous, so no crash can leave it behind).
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("clasp") && n.contains(&killed))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "segments of the killed worker left: {left:?}"
    );
    assert!(!out.status.success(), "the run must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker 2"),
        "the error names the worker: {err}"
    );
}

/// The main job caps its workers where cgroups can be written and says so on its first line;
/// elsewhere it says why not and how to get caps. `--uncapped` runs without, saying so, and
/// `--json` has `worker_cpu` either way.
#[test]
fn a_live_run_says_first_whether_its_workers_are_capped() {
    let _turn = one_at_a_time();
    let base = [&SMALL_LIVE_RUN[..], &["--json"]].concat();
    let uncapped = clasp(&[&base[..], &["--uncapped"]].concat());
    let err = String::from_utf8_lossy(&uncapped.stderr);
    assert!(
        err.lines()
            .next()
            .unwrap_or("")
            .contains("uncapped workers (--uncapped)"),
        "{err}"
    );
    let run = json(&uncapped);
    assert!(run["worker_cpu"].is_null(), "{}", run["worker_cpu"]);
    assert_equals_oracle("wc", "3000", "2", &run);

    let default = clasp(&base);
    let err = String::from_utf8_lossy(&default.stderr);
    let first = err.lines().next().unwrap_or("");
    let run = json(&default);
    if run["worker_cpu"].is_null() {
        // No writable cgroups here: the line says why and how to get them.
        assert!(
            first.contains("uncapped workers") && first.contains("to cap them"),
            "{err}"
        );
    } else {
        assert_eq!(run["worker_cpu"], 0.3);
        assert!(
            first.contains("capped workers: each at 0.3 of a core"),
            "{err}"
        );
    }
    assert_equals_oracle("wc", "3000", "2", &run);
}

/// A short paced live run of WC on at most two workers.
const SMALL_LIVE_RUN: [&str; 13] = [
    "run",
    "--app",
    "wc",
    "--records",
    "3000",
    "--seed",
    "2",
    "--duration",
    "2",
    "--peak-rate",
    "3000",
    "--max-workers",
    "2",
];

/// A paced live run's text summary says how late its records were admitted.
#[test]
fn a_live_runs_text_says_how_late_records_were_admitted() {
    let _turn = one_at_a_time();
    let out = clasp(&SMALL_LIVE_RUN);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("admission delay µs p50"), "{text}");
}
