//! Recovery through the real binary: a worker SIGKILLed (`--fault kill-worker=ID@PHASE`) at
//! each phase of a run — steady, during a migration, while a checkpoint's parts are written,
//! before its manifest is — or SIGSTOPped (`stop-worker`, or from outside) leaves a result
//! equal to `clasp oracle` on every app, and the summary reports the recovery; a run whose
//! driver was killed resumes from its checkpoints, a live one on its clock; a file sink is
//! at-least-once, and exactly the uninterrupted run's lines once deduplicated by (operator,
//! key, seq). Small runs, each bounded by the runner's timeout.

mod common;

use common::{
    SmallTmpfs, assert_recovered_run_equals_oracle, clasp, json, start, until_a_checkpoint,
};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clasp-recovery-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A static run of `app` on two workers that kills worker 2 in `phase`; its summary.
fn static_run_killing(
    app: &str,
    records: &str,
    seed: &str,
    phase: &str,
    tag: &str,
) -> serde_json::Value {
    static_run_with_fault(
        app,
        records,
        seed,
        &format!("kill-worker=2@{phase}"),
        &[],
        tag,
    )
}

/// A static run of `app` with `--fault FAULT` (its phase after the `@`) and the `extra`
/// arguments, on two workers unless they say `--workers`; its summary.
fn static_run_with_fault(
    app: &str,
    records: &str,
    seed: &str,
    fault: &str,
    extra: &[&str],
    tag: &str,
) -> serde_json::Value {
    let dir = scratch(tag);
    let dir_s = dir.display().to_string();
    let args = fault_run_args(app, (records, seed), fault, extra, &dir_s);
    let run = json(&clasp(&args));
    assert!(
        !dir.exists(),
        "{app}: a successful run removes its checkpoints"
    );
    run
}

/// A static run of `app` (`records` of `seed`) with `--fault FAULT` (its phase after the `@`)
/// and the `extra` arguments, checkpointing into `dir`, on two workers unless they say
/// `--workers`.
fn fault_run_args<'a>(
    app: &'a str,
    (records, seed): (&'a str, &'a str),
    fault: &'a str,
    extra: &[&'a str],
    dir: &'a str,
) -> Vec<&'a str> {
    let phase = fault.rsplit('@').next().expect("a phase");
    let mut args = vec![
        "run",
        "--static",
        "--app",
        app,
        "--records",
        records,
        "--seed",
        seed,
        "--rate",
        "5000",
        "--checkpoint-interval-ms",
        "150",
        "--checkpoint-dir",
        dir,
        "--fault",
        fault,
        "--json",
    ];
    if !extra.contains(&"--workers") {
        args.extend(["--workers", "2"]);
    }
    args.extend(extra);
    if phase == "migration" {
        args.extend(["--chaos-migrations", "6"]);
    }
    args
}

/// The one recovery a run reports: in `phase`, worker 2 lost, the records replayed counted.
fn assert_one_recovery(app: &str, run: &serde_json::Value, phase: &str) {
    let r = run["recoveries"].as_array().expect("a recoveries list");
    assert_eq!(r.len(), 1, "{app}: {r:?}");
    assert_eq!(r[0]["phase"], phase, "{app}: {r:?}");
    assert_eq!(r[0]["workers_lost"], serde_json::json!([2]), "{app}: {r:?}");
    for k in ["records_replayed", "restore_ms", "replay_ms"] {
        assert!(r[0][k].as_f64().is_some(), "{app}: {k} in {r:?}");
    }
    // An age for a checkpoint restored; none for a restart from the start of the run.
    assert_eq!(
        r[0]["checkpoint_age_ms"].is_number(),
        r[0]["checkpoint_id"].is_number(),
        "{app}: {r:?}"
    );
    assert!(
        r[0]["detect_ms"].as_f64().is_some(),
        "{app}: a --fault kill is timed"
    );
}

#[test]
fn a_worker_killed_at_any_phase_is_recovered_on_every_app_and_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let cases = [
        ("wc", "steady"),
        ("sd", "checkpoint-snapshot"),
        ("aa", "checkpoint-commit"),
        ("pl", "migration"),
        ("nwm", "steady"),
        ("etl", "checkpoint-snapshot"),
        ("syn", "migration"),
        ("wc-text", "checkpoint-commit"),
    ];
    for (app, phase) in cases {
        let run = static_run_killing(app, "5000", "7", phase, app);
        assert_recovered_run_equals_oracle(app, "5000", "7", &run);
        assert_one_recovery(app, &run, phase);
        assert!(
            run["checkpoints"]["taken"].as_u64().unwrap() >= 1,
            "{app}: {run}"
        );
    }
}

/// A worker stopped (SIGSTOP) in any phase holds its connections and answers nothing: a
/// checkpoint's snapshot or a quiescence wait times out before the stall timeout, and the
/// probe after it must name the worker, or the restarted job would wait for it in vain.
#[test]
fn a_worker_stopped_at_any_phase_is_replaced_and_the_run_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let cases = [
        ("wc", "checkpoint-snapshot"),
        ("sd", "checkpoint-commit"),
        ("pl", "migration"),
        ("aa", "steady"),
    ];
    for (app, phase) in cases {
        let fault = format!("stop-worker=2@{phase}");
        // A short stall timeout, so that the stopped worker is noticed soon; long enough that
        // a slow disk does not fail a checkpoint's parts.
        let tag = format!("stop-{app}");
        let run =
            static_run_with_fault(app, "5000", "7", &fault, &["--stall-timeout-s", "3"], &tag);
        assert_recovered_run_equals_oracle(app, "5000", "7", &run);
        assert_one_recovery(app, &run, phase);
    }
}

/// A worker stopped in a migration, with the default stall timeout (60 s): the migration
/// times out first, and the probe after it names the worker, which is replaced. Before, a
/// migration that timed out ended the run.
#[test]
fn a_worker_stopped_in_a_migration_is_replaced_when_the_migration_times_out() {
    let _turn = common::one_at_a_time();
    let extra = ["--migration-timeout-s", "2"];
    let run = static_run_with_fault("wc", "5000", "7", "stop-worker=2@migration", &extra, "mig");
    assert_recovered_run_equals_oracle("wc", "5000", "7", &run);
    assert_one_recovery("wc", &run, "migration");
    let reason = run["recoveries"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not complete in"), "{reason}");
}

/// One worker killed and another stopped at the same moment: the kill is seen at once, and
/// the probe after it names the stopped one too, so one recovery replaces both.
#[test]
fn a_killed_and_a_stopped_worker_are_replaced_in_one_recovery() {
    let _turn = common::one_at_a_time();
    let extra = ["--workers", "3", "--fault", "stop-worker=3@steady"];
    let run = static_run_with_fault("sd", "5000", "7", "kill-worker=2@steady", &extra, "two");
    assert_recovered_run_equals_oracle("sd", "5000", "7", &run);
    let r = run["recoveries"].as_array().expect("a recoveries list");
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["workers_lost"], serde_json::json!([2, 3]), "{r:?}");
}

#[test]
fn a_live_run_with_chaos_migrations_recovers_a_worker_killed_mid_migration() {
    let _turn = common::one_at_a_time();
    let dir = scratch("live");
    let dir_s = dir.display().to_string();
    let run = json(&clasp(&[
        "run",
        "--app",
        "wc",
        "--records",
        "6000",
        "--seed",
        "9",
        "--peak-rate",
        "20000",
        "--max-workers",
        "3",
        "--chaos-migrations",
        "8",
        "--checkpoint-interval-ms",
        "150",
        "--checkpoint-dir",
        &dir_s,
        "--fault",
        "kill-worker=2@migration",
        "--json",
    ]));
    assert_recovered_run_equals_oracle("wc", "6000", "9", &run);
    assert_one_recovery("wc", &run, "migration");
}

/// `--resume` of `dir` (`common`'s checkpoint of the built-in `wc`) with an app file of that
/// name and another graph is refused: its state would land in the wrong operators.
fn refuses_a_resume_with_an_app_of_another_shape(common: &[&str], dir: &std::path::Path) {
    let dir_s = dir.display().to_string();
    let app_file = dir.with_extension("toml");
    let app = "name = \"wc\"\ndescription = \"two counts\"\ngenerator = \"wc\"\n\
        [[operator]]\nname = \"split\"\nkind = \"wc_split\"\nsuccessors = [\"again\", \"count\"]\n\
        [[operator]]\nname = \"count\"\nkind = \"wc_count\"\n\
        [[operator]]\nname = \"again\"\nkind = \"wc_count\"\n";
    std::fs::write(&app_file, app).unwrap();
    let at = common.iter().position(|a| *a == "--app").unwrap();
    let mut other: Vec<&str> = [&common[..at], &common[at + 2..]].concat();
    other.extend(["--app-file", app_file.to_str().unwrap(), "--resume", &dir_s]);
    let out = clasp(&other);
    let _ = std::fs::remove_file(&app_file);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("another app named wc"), "{err}");
}

/// Kills `clasp run` itself (SIGKILL: its workers die with it) once it has checkpoints, then
/// `--resume` finishes the run from them with fresh workers.
#[test]
fn a_run_whose_driver_was_killed_resumes_from_its_checkpoints_and_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let dir = scratch("resume");
    let dir_s = dir.display().to_string();
    let common = [
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "12000",
        "--seed",
        "4",
        "--rate",
        "4000",
    ];
    let mut first: Vec<&str> = common.to_vec();
    first.extend([
        "--checkpoint-interval-ms",
        "150",
        "--checkpoint-dir",
        &dir_s,
        "--json",
    ]);
    let mut run = start(&first, &[]);
    until_a_checkpoint(&dir, &mut run);
    // While it runs, its directory is its own: neither a resume nor a new run may write there.
    for flag in ["--resume", "--checkpoint-dir"] {
        let mut other: Vec<&str> = common.to_vec();
        other.extend([flag, &dir_s]);
        let out = clasp(&other);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{other:?}: {err}");
        assert!(err.contains("in use by another run (pid "), "{err}");
    }
    // The driver dies outright (SIGKILL); its workers die with it.
    assert!(!run.kill().status.success());
    // Another run's flags are refused before any worker starts, naming what differs.
    for (flag, value, needle) in [
        ("--seed", "5", "--seed 4, not 5"),
        (
            "--records",
            "20000",
            "admits up to 12000 records (--records), not 20000",
        ),
        ("--app", "sd", "app wc, not sd"),
        ("--source", "file:/etc/hostname", "did not read a file"),
    ] {
        let mut other: Vec<&str> = common.to_vec();
        let at = other.iter().position(|a| *a == flag).unwrap_or(other.len());
        if at < other.len() {
            other[at + 1] = value;
        } else {
            other.extend([flag, value]);
        }
        other.extend(["--resume", &dir_s]);
        let out = clasp(&other);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{other:?}: {err}");
        assert!(err.contains(needle) && !err.contains("listening"), "{err}");
    }
    refuses_a_resume_with_an_app_of_another_shape(&common, &dir);
    // A new run in that directory is refused: a recovery of it would restore the killed
    // run's state.
    let fresh: Vec<&str> = first.iter().copied().filter(|a| *a != "--json").collect();
    let out = clasp(&fresh);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{fresh:?}: {err}");
    assert!(
        err.contains("holds checkpoints of an earlier run") && err.contains("--resume"),
        "{err}"
    );
    // Without --records: up to the limit the checkpoint holds, 12 000, not the default.
    let mut again: Vec<&str> = (common.iter().copied())
        .filter(|a| !["--records", "12000"].contains(a))
        .collect();
    again.extend(["--resume", &dir_s, "--json"]);
    let resumed = json(&clasp(&again));
    assert_recovered_run_equals_oracle("wc", "12000", "4", &resumed);
    assert!(resumed["resumed_from"].as_u64().is_some(), "{resumed}");
    // Its throughput counts the records it admitted itself, not those before the checkpoint.
    let before = resumed["resumed_admitted"]
        .as_u64()
        .expect("resumed_admitted");
    let here =
        resumed["throughput_per_s"].as_f64().unwrap() * resumed["elapsed_s"].as_f64().unwrap();
    let expected = (12_000 - before) as f64;
    assert!(
        (here - expected).abs() <= 1.0 + expected * 1e-6,
        "{here} vs {expected}: {resumed}"
    );
    // A resumed run that succeeded removes its checkpoints and keeps the directory it was
    // given, so a new run may use it again.
    assert_emptied(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dir` is there, and nothing is in it (no checkpoint, no lock file).
fn assert_emptied(dir: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?} left in {}", dir.display());
}

/// The run's clock at the newest complete checkpoint in `dir` (s), if there is one.
fn newest_cut_s(dir: &std::path::Path) -> Option<f64> {
    use clasp_dataplane::checkpoint::{CheckpointStore, FileStore, KEEP_DEFAULT};
    if !dir.exists() {
        return None;
    }
    let store = FileStore::open(dir, KEEP_DEFAULT).ok()?;
    Some(store.load_latest().ok()?.manifest.run_s)
}

/// A live run resumed after its driver was killed goes on from the checkpoint's clock: its
/// intervals start there, the scripted move that fell due before the cut is not made again,
/// the one after it is, and the run still equals the oracle over the records it admitted.
#[test]
fn a_resumed_live_run_goes_on_from_the_checkpoints_clock() {
    let _turn = common::one_at_a_time();
    let dir = scratch("resume-live");
    let dir_s = dir.display().to_string();
    let common = [
        "run",
        "--app",
        "wc",
        "--seed",
        "3",
        "--duration",
        "5",
        "--peak-rate",
        "4000",
        "--pattern",
        "constant",
        "--max-workers",
        "2",
        "--uncapped",
        "--policy",
        "static",
        "--moves",
        "0.5:2,4:1",
    ];
    let mut first: Vec<&str> = common.to_vec();
    first.extend([
        "--checkpoint-interval-ms",
        "200",
        "--checkpoint-dir",
        &dir_s,
    ]);
    let mut run = start(&first, &[]);
    // Until a checkpoint cut after the first move (1.5 s of the run's clock), at most 20 s.
    let cut_after_move = || newest_cut_s(&dir).is_some_and(|s| s >= 1.5);
    for _ in 0..400 {
        if cut_after_move() || run.finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(cut_after_move(), "no checkpoint after 1.5 s within 20 s");
    // The driver dies outright (SIGKILL); its workers die with it.
    assert!(!run.kill().status.success());
    let cut = newest_cut_s(&dir).expect("a checkpoint");
    let mut again: Vec<&str> = common.to_vec();
    again.extend(["--resume", &dir_s, "--json"]);
    let resumed = json(&clasp(&again));
    let resumed_at = resumed["resumed_run_s"].as_f64().expect("resumed_run_s");
    assert!((resumed_at - cut).abs() < 1e-6, "{resumed_at} vs {cut}");
    for i in resumed["intervals"].as_array().expect("intervals") {
        assert!(
            i["t_s"].as_f64().unwrap() >= cut,
            "{i} before the cut at {cut} s"
        );
    }
    let moves: Vec<f64> = (resumed["migrations"].as_array().expect("migrations").iter())
        .map(|m| m["t_s"].as_f64().unwrap())
        .collect();
    assert_eq!(moves.len(), 1, "only the move at 4 s is left: {moves:?}");
    assert!(moves[0] >= 4.0, "{moves:?}");
    let records = resumed["records"].as_u64().expect("records").to_string();
    assert_recovered_run_equals_oracle("wc", &records, "3", &resumed);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file sink through a recovery: every line of the uninterrupted run is there, replayed
/// ones at most repeated (same operator, key, seq and value); deduplicated, WC's counts are
/// the oracle's.
#[test]
fn a_file_sink_is_at_least_once_and_exact_after_deduplication_by_seq() {
    let _turn = common::one_at_a_time();
    let dir = scratch("sink");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("counts.jsonl");
    let sink = format!("file:{}", out.display());
    let ck = dir.join("ck").display().to_string();
    let run = json(&clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "4000",
        "--seed",
        "3",
        "--rate",
        "4000",
        "--checkpoint-interval-ms",
        "150",
        "--checkpoint-dir",
        &ck,
        "--fault",
        "kill-worker=2@steady",
        "--sink",
        &sink,
        "--json",
    ]));
    assert_recovered_run_equals_oracle("wc", "4000", "3", &run);
    let text = std::fs::read_to_string(&out).unwrap();
    let mut distinct: BTreeSet<(String, String, u64)> = BTreeSet::new();
    let mut lines = 0u64;
    let mut last: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect(line);
        let key = v["key"].as_str().unwrap().to_string();
        let seq = v["seq"].as_u64().unwrap();
        let value: u64 = v["value"].as_str().unwrap().parse().unwrap();
        assert_eq!(value, seq + 1, "a replayed line repeats its first: {line}");
        lines += 1;
        distinct.insert((v["operator"].as_str().unwrap().into(), key.clone(), seq));
        let e = last.entry(key).or_default();
        *e = (*e).max((seq, value));
    }
    // Deduplicated: exactly the outputs the oracle digests (their count ends its digest).
    let oracle = json(&clasp(&[
        "oracle",
        "--app",
        "wc",
        "--records",
        "4000",
        "--seed",
        "3",
        "--json",
    ]));
    let digest = oracle["output_digest"].as_str().unwrap();
    let outputs = u64::from_str_radix(&digest[digest.len() - 16..], 16).unwrap();
    assert_eq!(distinct.len() as u64, outputs);
    assert!(lines >= outputs);
    // Every key's seqs are 0..n with no gap.
    let words: u64 = last.values().map(|&(seq, _)| seq + 1).sum();
    assert_eq!(words, outputs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A checkpoint store on a full disk (a 64 KiB tmpfs; WC's parts are about 700 KB per worker
/// at the end, and over 200 KB already at the first checkpoint, 200 ms in): every checkpoint
/// fails with the disk's error, the run goes on without them, its result is the oracle's, and
/// it exits non-zero naming the failures.
#[test]
fn checkpoints_on_a_full_disk_fail_alone_and_the_run_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let fs = match SmallTmpfs::mount("checkpoints", "64k") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs ({why})");
            return;
        }
    };
    let dir_s = fs.0.join("ck").display().to_string();
    let out = clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "40000",
        "--seed",
        "4",
        "--rate",
        "40000",
        "--checkpoint-interval-ms",
        "200",
        "--checkpoint-dir",
        &dir_s,
        "--json",
    ]);
    // The run finishes and prints its summary, and exits non-zero: it had faults.
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON summary");
    let ck = &run["checkpoints"];
    assert_eq!(ck["taken"], 0, "{ck}");
    assert!(ck["failed"].as_u64().unwrap() >= 1, "{ck}");
    let errors = run["errors"].as_array().unwrap();
    assert!(!errors.is_empty(), "each failure is reported");
    for e in errors {
        let e = e.as_str().unwrap();
        assert!(e.contains("checkpoint") && e.contains("failed"), "{e}");
        assert!(e.contains("No space left on device"), "{e}");
    }
    common::assert_digests_equal_oracle(&["--app", "wc"], "40000", "4", &run);
    // Nothing to resume from: no advice to, and no directory left (the run made it).
    let err = common::stderr(&out);
    assert!(!err.contains("--resume"), "{err}");
    assert!(!fs.0.join("ck").exists(), "{err}");
}

/// A worker that stops answering while its connections stay up (SIGSTOP) is named by the
/// probe after a stall and replaced as a lost one is; the run equals the oracle.
#[test]
fn a_stopped_worker_is_replaced_and_the_run_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let dir = scratch("stopped");
    let dir_s = dir.display().to_string();
    let run = start(
        &[
            "run",
            "--static",
            "--workers",
            "2",
            "--app",
            "wc",
            "--records",
            "40000",
            "--seed",
            "2",
            "--rate",
            "10000",
            "--stall-timeout-s",
            "2",
            "--checkpoint-interval-ms",
            "300",
            "--checkpoint-dir",
            &dir_s,
            "--json",
        ],
        &[],
    );
    let workers = common::wait_for_children(run.pid() as i32, 2);
    std::thread::sleep(Duration::from_millis(1500));
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &workers[0].to_string()])
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    let out = run.wait();
    assert!(out.status.success(), "{out:?}");
    let run = json(&out);
    assert_recovered_run_equals_oracle("wc", "40000", "2", &run);
    let r = run["recoveries"].as_array().expect("a recoveries list");
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        r[0]["workers_lost"].as_array().map(Vec::len),
        Some(1),
        "{r:?}"
    );
    assert!(!common::runs(workers[0]), "the stopped worker was killed");
}

/// The binary replaced or removed while a run goes on (an upgrade) does not stop the run from
/// starting its workers, nor a recovery from starting a lost one again: children start from
/// the image the run started with.
#[test]
fn a_run_whose_binary_was_removed_still_starts_and_recovers_its_workers() {
    let _turn = common::one_at_a_time();
    let dir = scratch("removed-binary");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("clasp");
    std::fs::copy(env!("CARGO_BIN_EXE_clasp"), &copy).unwrap();
    // A process another test thread forks while the copy is written holds its descriptor
    // until it execs, and the copy cannot run meanwhile ("Text file busy"): wait that out.
    for _ in 0..100 {
        match std::process::Command::new(&copy).arg("--version").output() {
            Err(e) if e.raw_os_error() == Some(26) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => break,
        }
    }
    let ck = dir.join("checkpoints");
    let ck = ck.to_str().expect("a UTF-8 path");
    let (records, seed) = ("20000", "3");
    let args = fault_run_args("wc", (records, seed), "kill-worker=2@steady", &[], ck);
    let mut cmd = common::command_at(&copy);
    cmd.args(&args);
    let run = common::spawn_running(cmd, &args);
    // Gone before the run starts any worker.
    std::fs::remove_file(&copy).unwrap();
    let out = run.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_one_recovery("wc", &run, "steady");
    assert_recovered_run_equals_oracle("wc", records, seed, &run);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A loss a recovery would cure, not recovered, says why: here a source that cannot be read
/// again (standard input).
#[test]
fn a_loss_that_is_not_recovered_says_why() {
    let _turn = common::one_at_a_time();
    let dir = scratch("not-recovered");
    std::fs::create_dir_all(&dir).unwrap();
    let input = clasp(&["gen", "--app", "wc", "--records", "20000", "--seed", "1"]);
    assert!(input.status.success());
    let ck = dir.join("checkpoints");
    let ck = ck.to_str().expect("a UTF-8 path");
    let args = fault_run_args(
        "wc",
        ("20000", "1"),
        "kill-worker=2@steady",
        &["--source", "stdin:"],
        ck,
    );
    let mut child = common::clasp_command()
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("clasp runs");
    let mut stdin = child.stdin.take().unwrap();
    let feed = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &input.stdout);
    });
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = child.wait().unwrap();
    feed.join().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("(not recovered: its source stdin: cannot be read again)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
