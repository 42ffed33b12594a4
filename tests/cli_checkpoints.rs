//! Checkpoints through the real binary while the input waits: a slow rate or a source with
//! nothing to read yet still has what it admitted checkpointed every interval (they were taken
//! only at every 64th record, so a run admitting 10 records a second took none), and a wait
//! with nothing admitted since the last cut takes no more.

mod common;

use common::{assert_equals_oracle, clasp, clasp_command, json, one_at_a_time};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A run whose source the test feeds: `records` WC sentences, then a pause until a
/// checkpoint in `ck` holds all of them (at most 30 s) and 400 ms more, then the end of the
/// stream. Returns its
/// summary and whether that checkpoint came.
fn stdin_run_pausing(records: usize, ck: &Path, extra: &[&str]) -> (serde_json::Value, bool) {
    let n = records.to_string();
    let sentences = clasp(&["gen", "--app", "wc", "--records", &n, "--seed", "1"]);
    assert!(sentences.status.success(), "gen failed");
    let ck_arg = ck.display().to_string();
    let mut args = vec!["run", "--static", "--workers", "2", "--app", "wc"];
    args.extend(["--source", "stdin:", "--json", "--stall-timeout-s=30"]);
    args.extend(["--keep-checkpoints", "--checkpoint-dir", &ck_arg]);
    args.extend(extra);
    let mut child = clasp_command()
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clasp runs");
    let mut stdin = child.stdin.take().expect("its stdin");
    stdin
        .write_all(&sentences.stdout)
        .expect("the sentences are written");
    let holds_all = format!("\"admitted\": {records},");
    let deadline = Instant::now() + Duration::from_secs(30);
    let came = loop {
        if manifests(ck).iter().any(|m| m.contains(&holds_all)) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Four more intervals of the pause: time for copies of the same cut, if it took them.
    std::thread::sleep(Duration::from_millis(400));
    drop(stdin);
    let out = child.wait_with_output().expect("the run ends");
    (json(&out), came)
}

/// The manifests of the complete checkpoints in `ck`, as text.
fn manifests(ck: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(ck) else {
        return Vec::new();
    };
    (dir.filter_map(Result::ok))
        .filter_map(|e| std::fs::read(e.path().join("MANIFEST")).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect()
}

#[test]
fn a_paced_run_is_checkpointed_every_interval_between_its_records() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ck = dir.path().join("ck").display().to_string();
    // 20 records at 10 a second: 2 s, none of them a 64th after the first.
    let run = json(&clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "20",
        "--rate",
        "10",
        "--seed",
        "1",
        "--json",
        "--checkpoint-interval-ms",
        "200",
        "--checkpoint-dir",
        &ck,
    ]));
    assert_equals_oracle("wc", "20", "1", &run);
    let taken = run["checkpoints"]["taken"]
        .as_u64()
        .expect("checkpoints taken");
    // Before: none. At most one a record admitted (21 counts, 0 to 20): no copies of a cut.
    assert!((2..=21).contains(&taken), "{}", run["checkpoints"]);
}

#[test]
fn a_source_that_pauses_is_checkpointed_once_for_what_it_sent() {
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ck = dir.path().join("ck");
    let (run, came) = stdin_run_pausing(100, &ck, &["--checkpoint-interval-ms", "100"]);
    // Taken while the source paused with its 100 records admitted (100 is no multiple of 64,
    // where the run took its checkpoints before): none came in 30 s before.
    assert!(
        came,
        "no checkpoint of all 100 records: {}",
        run["checkpoints"]
    );
    assert_equals_oracle("wc", "100", "1", &run);
    // And not once more each interval of the pause: the cut would be the same.
    let holds_all = "\"admitted\": 100,";
    let copies = manifests(&ck)
        .iter()
        .filter(|m| m.contains(holds_all))
        .count();
    assert_eq!(copies, 1, "{}", run["checkpoints"]);
}
