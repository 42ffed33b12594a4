//! `clasp experiment`: an experiment runs real `clasp run`s and writes its CSV, markdown and SVG
//! (the quick sizes; the figures themselves are in `docs/live/`), and bad options are named.

mod common;
use common::clasp;

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
