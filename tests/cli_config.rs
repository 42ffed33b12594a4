//! Run files: `clasp run --config FILE` takes every flag as a key, a flag beats the run file,
//! the run file beats the app file's `[run]` table, which beats the default; an unknown key and
//! a value of the wrong type are errors naming the key and the file (exit 2); `--print-config`
//! prints settings that, given back as a run file, are the same settings; and a run really
//! runs with what its run file says.

mod common;

use common::{clasp, clasp_text, json};

/// A temp file holding `text`, removed when dropped.
fn write(name: &str, text: &str) -> tempfile::TempPath {
    common::temp_file(name, text)
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// `--print-config` with these arguments: its stdout, after asserting exit 0.
fn print_config(args: &[&str]) -> String {
    let mut all = vec!["run", "--print-config"];
    all.extend_from_slice(args);
    let (code, out, err) = clasp_text(&all);
    assert_eq!(code, 0, "--print-config {args:?}: {err}");
    out
}

/// The line of `key` in `--print-config` output.
fn line<'a>(printed: &'a str, key: &str) -> &'a str {
    printed
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key} ")))
        .unwrap_or_else(|| panic!("no line for {key} in:\n{printed}"))
}

/// An app file: WC with a `[run]` table.
fn app_file(tag: &str, run_table: &str) -> tempfile::TempPath {
    let (code, wc, err) = clasp_text(&["apps", "show", "wc", "--toml"]);
    assert_eq!(code, 0, "{err}");
    write(
        &format!("app-{tag}.toml"),
        &format!("{wc}\n[run]\n{run_table}"),
    )
}

#[test]
fn a_flag_beats_the_run_file_which_beats_the_app_file_which_beats_the_default() {
    let app = app_file("precedence", "seed = 7\nduration = 9\npeak-rate = 5000\n");
    let run = write(
        "precedence.toml",
        &format!(
            "app-file = {:?}\nseed = 5\nduration = 4.5\nworker-cpu = 0.3\ncpus = [0, 1]\n",
            path(&app)
        ),
    );
    let printed = print_config(&["--config", path(&run), "--seed", "3"]);
    let run_file = format!("# run file {}", path(&run));
    let app_src = format!("# app file {}", path(&app));
    assert_eq!(line(&printed, "seed"), "seed = 3  # command line");
    assert_eq!(
        line(&printed, "duration"),
        format!("duration = 4.5  {run_file}")
    );
    assert_eq!(
        line(&printed, "peak-rate"),
        format!("peak-rate = 5000.0  {app_src}")
    );
    assert_eq!(
        line(&printed, "worker-cpu"),
        format!("worker-cpu = 0.3  {run_file}")
    );
    assert_eq!(
        line(&printed, "cpus"),
        format!("cpus = \"0,1\"  {run_file}")
    );
    assert_eq!(line(&printed, "policy"), "policy = \"clasp\"  # default");
    assert_eq!(line(&printed, "json"), "json = false  # default");
    assert!(line(&printed, "rate").starts_with("# rate "), "{printed}");

    // A flag also silences the run file's keys it conflicts with.
    let printed = print_config(&["--config", path(&run), "--uncapped"]);
    let cpu = line(&printed, "worker-cpu");
    assert!(
        cpu.starts_with("# worker-cpu") && cpu.contains("overridden by `uncapped`"),
        "{cpu}"
    );
    assert_eq!(
        line(&printed, "uncapped"),
        "uncapped = true  # command line"
    );

    // But a run file's mode switch is not silenced by a flag of the other mode: the pair is
    // refused (a static run file with --peak-rate must not become a live run).
    let static_run = write("static-mode.toml", "static = true\nworkers = 2\n");
    let (code, _, err) = clasp_text(&["run", "--config", path(&static_run), "--peak-rate", "5000"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn an_unknown_key_is_an_error_naming_it_and_the_file_with_the_closest_key() {
    let run = write("unknown.toml", "workr-cpu = 0.3\n");
    let (code, _, err) = clasp_text(&["run", "--config", path(&run)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown key `workr-cpu`"), "{err}");
    assert!(err.contains(path(&run)), "{err}");
    assert!(err.contains("did you mean `worker-cpu`"), "{err}");

    // In an app file's [run] table too, named by a flag or by the run file.
    let app = app_file("unknown", "peak_rate = 1\n");
    let only_app = write("only-app.toml", &format!("app-file = {:?}\n", path(&app)));
    for args in [
        vec!["run", "--app-file", path(&app)],
        vec!["run", "--config", path(&only_app)],
    ] {
        let (code, _, err) = clasp_text(&args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("unknown key `peak_rate`") && err.contains(path(&app)),
            "{err}"
        );
        assert!(err.contains("did you mean `peak-rate`"), "{err}");
    }
}

#[test]
fn a_value_of_the_wrong_type_is_an_error_naming_the_key_and_the_file() {
    for (text, key) in [
        ("json = \"yes\"\n", "json"),
        ("seed = 1.5\n", "seed"),
        ("duration = true\n", "duration"),
        ("app-file = 3\n", "app-file"),
        ("worker-cpu = \"a lot\"\n", "worker-cpu"),
        ("policy = \"fastest\"\n", "policy"),
        ("interval-ms = -5\n", "interval-ms"),
        // Out of range: refused as the file is read, not only by a run.
        ("rate = nan\n", "rate"),
        ("peak-rate = 0.0\n", "peak-rate"),
    ] {
        let run = write("wrong.toml", text);
        let (code, out, err) = clasp_text(&["run", "--config", path(&run), "--print-config"]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(out.is_empty(), "{text}: printed {out}");
        assert!(err.contains(&format!("`{key}`")), "{text}: {err}");
        assert!(err.contains(path(&run)), "{text}: {err}");
        assert!(!err.contains("panicked"), "{text}: {err}");
    }
    // Two keys of one file that cannot go together, like the flags.
    let run = write("conflict.toml", "workers = 2\nmax-workers = 3\n");
    let (code, _, err) = clasp_text(&["run", "--config", path(&run)]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`workers`") && err.contains("`max-workers`"),
        "{err}"
    );
}

#[test]
fn print_config_round_trips_through_a_run_file() {
    let app = app_file("round", "peak-rate = 1234.5\n");
    let run = write(
        "round.toml",
        &format!(
            "app-file = {:?}\nmoves = [\"0:1\", \"5:2\"]\njson = true\nseed = \"18446744073709551615\"\n",
            path(&app)
        ),
    );
    let args = [
        "--config",
        path(&run),
        "--duration",
        "12",
        "--worker-cpu",
        "0.5",
        "--pin",
    ];
    let first = print_config(&args);
    let again = write("printed.toml", &first);
    let second = print_config(&["--config", path(&again)]);
    let values = |printed: &str| -> Vec<String> {
        printed
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split("  #").next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        values(&first),
        values(&second),
        "first:\n{first}\nsecond:\n{second}"
    );
    assert!(values(&first).len() > 20, "{first}");
    // Every key not set is a comment in both.
    let unset = |p: &str| p.lines().filter(|l| l.contains("unset")).count();
    assert_eq!(unset(&first), unset(&second));
}

#[test]
fn a_static_run_takes_its_settings_from_the_run_file_and_the_app_file() {
    // The app file (with its [run] table) also travels to the workers, which must accept it.
    // Its suggestion for live runs (peak-rate) is dropped by --static, not an error.
    let app = app_file("static", "seed = 4\nrecords = 2000\npeak-rate = 60000\n");
    let run = write(
        "static.toml",
        &format!(
            "static = true\nworkers = 2\napp-file = {:?}\njson = true\nstall-timeout-s = 30\n",
            path(&app)
        ),
    );
    let out = json(&clasp(&["run", "--config", path(&run)]));
    assert_eq!(out["workers"], 2);
    assert_eq!(out["seed"], 4);
    common::assert_measured_run_equals_oracle("wc", "2000", "4", &out);
}

#[test]
fn an_app_files_static_rate_is_dropped_in_a_live_run_and_taken_in_a_static_one() {
    let app = app_file("rate", "rate = 50000\n");
    // Live: the suggestion is dropped and said so, not refused as `--rate` on a live run is.
    let printed = print_config(&["--app-file", path(&app)]);
    let rate = line(&printed, "rate");
    assert!(
        rate.starts_with("# rate") && rate.contains("for --static runs only"),
        "{rate}"
    );
    // Static: taken from the app file.
    let printed = print_config(&["--app-file", path(&app), "--static"]);
    assert!(
        line(&printed, "rate").starts_with("rate = 50000"),
        "{printed}"
    );
    // And the flag itself on a live run is still refused.
    let (code, _, err) = clasp_text(&["run", "--app", "wc", "--rate", "50000"]);
    assert_eq!(code, 2, "{err}");
}
