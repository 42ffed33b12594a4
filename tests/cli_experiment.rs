//! `clasp experiment`: an experiment runs real `clasp run`s and writes its CSV, markdown and SVG
//! (the quick sizes; the figures themselves are in `docs/live/`), and bad options are named.

mod common;
use common::clasp;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[test]
fn a_quick_scaling_experiment_writes_its_table_and_chart() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-experiment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = clasp(&[
        "experiment",
        "scaling",
        "--quick",
        "--uncapped",
        "--apps",
        "wc",
        "--max-workers",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let csv = std::fs::read_to_string(dir.join("scaling.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows[0],
        "app,workers,throughput_per_s,vs_one_worker,host_idle,driver_cores,host_bound"
    );
    assert_eq!(rows.len(), 3, "{csv}");
    for (row, workers) in rows[1..].iter().zip(["1", "2"]) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!((cells[0], cells[1]), ("wc", workers), "{row}");
        let tput: f64 = cells[2].parse().unwrap();
        assert!(tput > 0.0, "{row}");
    }
    let md = std::fs::read_to_string(dir.join("scaling.md")).unwrap();
    assert!(md.contains("| wc | 2 |"), "{md}");
    assert!(md.contains("uncapped"), "{md}");
    let svg = std::fs::read_to_string(dir.join("scaling.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_experiment_options_are_named() {
    for (args, needle) in [
        (&["experiment", "scaling", "--apps", "nope"][..], "nope"),
        (
            &["experiment", "scaling", "--max-workers", "0"][..],
            "--max-workers 0: must be 1..=8",
        ),
        (&["experiment", "scaling", "--seeds", "0"][..], "--seeds 0"),
        (
            &["experiment", "scaling", "--duration", "1"][..],
            "--duration 1",
        ),
        (
            &["experiment", "scaling", "--records", "0"][..],
            "--records 0",
        ),
        (&["experiment", "fig99"][..], "fig99"),
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

/// An experiment interrupted on its own (SIGINT to its pid, not its process group) takes the
/// `clasp run` it started with it: the run stops, and so do its workers, and it keeps no
/// checkpoints for a resume nobody will make. They ran on, orphaned, with their cgroups, until
/// the run ended by itself.
#[test]
fn an_interrupted_experiment_stops_the_run_it_started() {
    let _turn = common::one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out").display().to_string();
    #[rustfmt::skip]
    let args = [
        "experiment", "scaling", "--uncapped", "--apps", "wc", "--max-workers", "1",
        "--records", "100000000", "--out", &out,
    ];
    let experiment = common::start(&args, &[]);
    let pid = experiment.pid() as i32;
    let run = common::wait_for_children(pid, 1)[0];
    let workers = common::wait_for_children(run, 1);
    let state = std::env::temp_dir().join("clasp-tests-state/clasp/checkpoints");
    let mine = format!("-{run}");
    let runs_checkpoints = || -> Vec<PathBuf> {
        let entries = std::fs::read_dir(&state).map_or(vec![], |d| d.flatten().collect());
        (entries.into_iter())
            .filter(|e| e.file_name().to_string_lossy().ends_with(&mine))
            .map(|e| e.path())
            .collect()
    };
    let complete = |d: &PathBuf| {
        std::fs::read_dir(d).is_ok_and(|c| c.flatten().any(|e| e.path().join("MANIFEST").exists()))
    };
    // Once the run has a checkpoint (one a second by default).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !runs_checkpoints().iter().any(complete) {
        assert!(Instant::now() < deadline, "no checkpoint within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let experiment_pid = rustix::process::Pid::from_raw(pid).unwrap();
    rustix::process::kill_process(experiment_pid, rustix::process::Signal::INT)
        .expect("the experiment is signalled");
    let ended = experiment.wait();
    assert!(!ended.status.success(), "{ended:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while [run].iter().chain(&workers).any(|p| common::runs(*p)) {
        assert!(Instant::now() < deadline, "the run or its workers ran on");
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = runs_checkpoints();
    assert!(left.is_empty(), "checkpoints left: {left:?}");
}
