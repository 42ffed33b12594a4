//! `clasp paper`: the orchestration end to end on a tiny subset (two simulated figures, one app,
//! three workers): the README table lists every figure with a verdict, the selected ones
//! judged from the files the run wrote; a figure that does not exist is named.

mod common;
use common::clasp;

/// The verdicts a row may carry.
const VERDICTS: [&str; 5] = ["agree", "disagree", "no counterpart", "not run", "missing"];

#[test]
fn a_tiny_paper_run_writes_every_row_with_a_verdict() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-paper-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = clasp(&[
        "paper",
        "--quick",
        "--only",
        "fig10,fig12",
        "--sim-workers",
        "3",
        "--apps",
        "sd",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let rows: Vec<Vec<&str>> = readme
        .lines()
        .filter(|l| l.starts_with("| fig") && !l.starts_with("| figure"))
        .map(|l| l.split(" | ").collect())
        .collect();
    for fig in [
        "fig2", "fig3", "fig4", "fig8", "fig9", "fig10", "fig11", "fig12", "fig13", "fig14",
    ] {
        assert!(
            rows.iter().any(|r| r[0] == format!("| {fig}")),
            "no row for {fig}:\n{readme}"
        );
    }
    for r in &rows {
        assert_eq!(r.len(), 7, "{r:?}");
        let verdict = r[5].trim_matches('*');
        assert!(VERDICTS.contains(&verdict), "{r:?}");
        let selected = r[0] == "| fig10" || r[0] == "| fig12";
        let judged = verdict == "agree" || verdict == "disagree";
        assert_eq!(selected, judged, "{r:?}");
        if selected {
            // Ours is computed from the run: it names the app count or a deviation.
            assert!(!r[3].is_empty() && r[6].contains("clasp sim"), "{r:?}");
        }
    }
    assert!(readme.contains("--quick"), "{readme}");
    assert!(dir.join("sim-3/placement.svg").exists());
    assert!(dir.join("sim-3/worker-count.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_figure_is_named() {
    let out = clasp(&["paper", "--only", "fig99", "--out", "/nonexistent/never"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fig99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
