//! `clasp calibrate` and the machine profile `clasp run` starts from, through the real binary.
//! Every test has its own config directory (`XDG_CONFIG_HOME` in a temporary directory), so
//! none reads or writes the user's real profile; every run is bounded (common::RUN_TIMEOUT).

mod common;

use common::{clasp_env, clasp_text, json};
use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

/// A fresh temporary directory for one test.
fn temp_dir(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("clasp-cli-calibrate-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A profile as `clasp calibrate` writes it, under `config/clasp/profile.json`.
fn write_profile(config: &Path, alpha: f64, beta: f64, gamma: f64) -> PathBuf {
    let path = config.join("clasp/profile.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let profile = serde_json::json!({
        "version": 2, "alpha_us": alpha, "beta_us": beta, "gamma_us": gamma,
        "beta_by_batch_us": {"1": 2.0, "8": 0.5, "32": 0.3, "128": 0.15},
        "batch": 341,
        "machine": {"cpu_model": "test", "cpus": 2, "kernel": "test"},
        "created_unix_s": 1,
    });
    std::fs::write(&path, profile.to_string()).unwrap();
    path
}

/// A short live run with `extra` options and `config` as XDG_CONFIG_HOME: (its JSON, stderr).
fn live_run(config: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec![
        "run",
        "--records",
        "2000",
        "--peak-rate",
        "20000",
        "--duration",
        "2",
        "--max-workers",
        "1",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = clasp_env(&args, &[("XDG_CONFIG_HOME", config.to_str().unwrap())]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (json(&out), stderr)
}

fn assert_priors(run: &serde_json::Value, source: &str, costs: [f64; 3]) {
    let p = &run["priors"];
    assert_eq!(p["source"], source, "{p}");
    for (key, want) in ["alpha_us", "beta_us", "gamma_us"].into_iter().zip(costs) {
        assert_eq!(p[key].as_f64(), Some(want), "{key} in {p}");
    }
}

/// `clasp calibrate --quick` with `args` and `config` as XDG_CONFIG_HOME: its stdout. A busy
/// machine can make a figure unusable, which calibrate refuses with a clear error (writing
/// nothing to `written`): a few attempts.
fn calibrate(args: &[&str], config: &Path, written: &Path) -> String {
    let mut all = vec!["calibrate", "--quick"];
    all.extend_from_slice(args);
    let mut attempts = Vec::new();
    loop {
        let out = clasp_env(&all, &[("XDG_CONFIG_HOME", config.to_str().unwrap())]);
        if out.status.success() {
            return String::from_utf8(out.stdout).expect("utf-8");
        }
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(stderr.contains("not usable"), "{stderr}");
        assert!(
            !written.exists(),
            "a refused calibration wrote {}",
            written.display()
        );
        attempts.push(stderr);
        assert!(attempts.len() < 4, "{attempts:?}");
    }
}

#[test]
fn calibrate_writes_a_profile_with_positive_costs_and_prints_it() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("writes");
    let out_path = dir.join("deep/er/profile.json");
    // An explicit --out goes into a directory that exists (the refusals are below).
    std::fs::create_dir_all(out_path.parent().unwrap()).unwrap();
    let out_arg = out_path.to_str().unwrap();
    let config = dir.join("config");
    let stdout = calibrate(&["--json", "--out", out_arg], &config, &out_path);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    for key in ["alpha_us", "beta_us", "gamma_us"] {
        let x = v[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x > 0.0, "{key} = {x} in {v}");
    }
    assert_eq!(v["version"], 2);
    assert_eq!(v["path"], out_arg);
    let batch = v["batch"].as_u64().expect("batch");
    for b in ["1", "8", "32", "128"] {
        assert!(v["beta_by_batch_us"][b].as_f64().unwrap() > 0.0, "{v}");
    }
    assert_eq!(v["beta_by_batch_us"][batch.to_string()], v["beta_us"]);
    // β is the executors' hand-offs (α) plus the transport's part, at every batch.
    let alpha = v["alpha_us"].as_f64().unwrap();
    for (b, beta) in v["beta_by_batch_us"].as_object().expect("by batch") {
        let transport = v["transport_by_batch_us"][b]
            .as_f64()
            .expect("transport part");
        let beta = beta.as_f64().unwrap();
        assert!(
            transport > 0.0 && (beta - (alpha + transport)).abs() < 1e-9,
            "{b}: {v}"
        );
    }
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    // The file holds the same profile, and nothing went to the config directory.
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).expect("written")).expect("json");
    for key in ["alpha_us", "beta_us", "gamma_us", "batch", "created_unix_s"] {
        assert_eq!(file[key], v[key], "{key}");
    }
    assert!(!config.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_profile_calibrate_writes_to_the_config_directory_is_what_the_next_run_starts_from() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("roundtrip");
    let path = dir.join("clasp/profile.json");
    let stdout = calibrate(&[], &dir, &path);
    for needle in ["α", "β", "γ", &format!("wrote {}", path.display())] {
        assert!(stdout.contains(needle), "{needle} in {stdout}");
    }
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("written")).expect("json");
    let costs = ["alpha_us", "beta_us", "gamma_us"].map(|k| file[k].as_f64().expect(k));
    let (run, _) = live_run(&dir, &[]);
    assert_priors(&run, "profile", costs);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_run_starts_from_the_profile_and_says_so() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("profile");
    let path = write_profile(&dir, 0.08, 0.17, 12_000.0);
    let (run, stderr) = live_run(&dir, &[]);
    assert_priors(&run, "profile", [0.08, 0.17, 12_000.0]);
    assert_eq!(run["priors"]["path"], path.to_str().unwrap());
    assert!(
        stderr.contains(&format!("priors: profile {}", path.display())),
        "{stderr}"
    );
    // --no-profile ignores it; --profile FILE picks another one.
    let (run, stderr) = live_run(&dir, &["--no-profile"]);
    assert_priors(&run, "built-in", [0.3, 1.0, 50.0]);
    assert_eq!(run["priors"]["path"], serde_json::Value::Null);
    assert!(stderr.contains("priors: built-in"), "{stderr}");
    let other = write_profile(&dir.join("other"), 0.5, 0.6, 70.0);
    let (run, _) = live_run(&dir, &["--profile", other.to_str().unwrap()]);
    assert_priors(&run, "profile", [0.5, 0.6, 70.0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cost_priors_on_the_command_line_win_over_the_profile() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("flag");
    write_profile(&dir, 0.08, 0.17, 12_000.0);
    let (run, stderr) = live_run(&dir, &["--cost-priors-us", "0.2,0.4,30"]);
    assert_priors(&run, "flag", [0.2, 0.4, 30.0]);
    assert!(stderr.contains("priors: --cost-priors-us"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_profile_is_a_warning_and_the_run_uses_the_built_in_priors() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("corrupt");
    let path = write_profile(&dir, 0.08, 0.17, 12_000.0);
    std::fs::write(&path, "{\"version\": 1, \"alpha_us\": ").unwrap();
    let (run, stderr) = live_run(&dir, &[]);
    assert_priors(&run, "built-in", [0.3, 1.0, 50.0]);
    assert!(
        stderr.contains("warning") && stderr.contains(path.to_str().unwrap()),
        "{stderr}"
    );
    // A profile of another version (here the last one, whose β was the transport's part
    // alone) is refused the same way.
    write_profile(&dir, 0.08, 0.17, 12_000.0);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"version\":2", "\"version\":1");
    std::fs::write(&path, text).unwrap();
    let (run, stderr) = live_run(&dir, &[]);
    assert_priors(&run, "built-in", [0.3, 1.0, 50.0]);
    assert!(stderr.contains("version 1 "), "{stderr}");
    // An explicit --profile that cannot be used is an error, not a silent fallback.
    let out = clasp_env(
        &[
            "run",
            "--records",
            "10",
            "--profile",
            "/nonexistent/profile.json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/profile.json"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_run_without_a_profile_uses_the_built_in_priors() {
    let _turn = common::one_at_a_time();
    let dir = temp_dir("none");
    let (run, stderr) = live_run(&dir, &[]);
    assert_priors(&run, "built-in", [0.3, 1.0, 50.0]);
    assert!(stderr.contains("priors: built-in"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

// `--out PATH` refused before anything is measured: a node that is not a regular file (a
// rename over it would replace the node itself), a directory, a path under a directory that
// does not exist (an explicit --out makes none). Every target is the test's own, in a temporary
// directory: none that a missing check would destroy (never /dev/full or /dev/null).

/// A fresh temporary directory, removed when dropped.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("clasp-test-calibrate-out-")
        .tempdir()
        .expect("a temp dir")
}

/// Asserts that `clasp calibrate --quick --out OUT` is refused as a usage error (exit 2) whose
/// message names `named` and says `why`, and printed nothing. Exit 2 means it was refused
/// before measuring: a failed measurement or a failed write exits 1, a written profile 0.
fn assert_refused(out: &Path, named: &Path, why: &str) {
    let (code, stdout, stderr) =
        clasp_text(&["calibrate", "--quick", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 2, "{}: {stderr}", out.display());
    assert_eq!(stdout, "", "{}", out.display());
    assert!(
        stderr.contains("--out") && stderr.contains(&named.display().to_string()),
        "{stderr}"
    );
    assert!(stderr.contains(why), "{why} in {stderr}");
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

#[test]
fn calibrate_refuses_an_out_that_is_a_fifo_or_a_link_to_one_and_leaves_the_fifo() {
    let dir = scratch();
    let fifo = dir.path().join("fifo");
    let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, owner_rw).expect("a FIFO");
    assert_refused(&fifo, &fifo, "is not a regular file");
    assert!(is_fifo(&fifo), "{} was replaced", fifo.display());
    // A link is followed: the node it leads to is refused like the node, and both stay.
    let link = dir.path().join("profile.json");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    assert_refused(&link, &link, "is not a regular file");
    assert!(is_fifo(&fifo), "{} was replaced", fifo.display());
    let link_meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(link_meta.file_type().is_symlink(), "{}", link.display());
}

#[test]
fn calibrate_refuses_an_out_that_is_a_directory_and_leaves_nothing_in_it() {
    let dir = scratch();
    assert_refused(dir.path(), dir.path(), "is a directory");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn calibrate_refuses_an_out_under_a_missing_directory_and_makes_none() {
    let dir = scratch();
    let missing = dir.path().join("no/such");
    let out = missing.join("profile.json");
    let why = format!("the directory {} does not exist", missing.display());
    assert_refused(&out, &missing, &why);
    assert!(!dir.path().join("no").exists(), "a directory was made");
}

/// A directory that takes no new file (here /proc) is found before measuring: the profile is
/// written beside its file and renamed over it.
#[test]
fn calibrate_refuses_an_out_in_a_directory_it_cannot_write() {
    let out = Path::new("/proc/version");
    assert_refused(out, out, "cannot write into /proc");
}
