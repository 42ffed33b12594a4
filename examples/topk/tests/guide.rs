//! Every command of `docs/guide.md`, run as the guide says, in the order it gives them: the
//! `sh` blocks are read from the guide itself, so a command added to it is run here (or fails
//! this test until it is taught how). The guide's three hosts are three workers on 127.0.0.1:
//! the test rewrites the addresses of the guide's cluster file to free local ports.
//!
//! Exiting 0 is not enough: the guide runs the app over one input throughout (the generator's
//! 6000 readings of seed 2, generated, or read back from the file `topk gen` wrote), so every
//! summary it prints must have the oracle's digests, and so must the guide's sample summary;
//! the sink's lines must be the operator's text (the sensor as a number), and the guide's
//! sample sink line one of them.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::{Children, TempDir, example_dir, free_port, topk, wait};

/// The guide's text.
fn guide() -> String {
    let path = example_dir().join("../../docs/guide.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks of language `lang`, in order.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(tag)) if tag.trim() == lang => current = Some(String::new()),
            (Some(_), Some(_)) => out.extend(current.take()),
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The commands of a `sh` block: continuation lines joined, comments and blank lines dropped.
fn commands(block: &str) -> Vec<String> {
    let joined = block.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The guide's cluster file with its addresses replaced by free 127.0.0.1 ports.
fn local_cluster_file(text: &str) -> String {
    let toml = blocks(text, "toml")
        .into_iter()
        .find(|b| b.contains("cluster_id"))
        .expect("the guide shows a cluster file");
    toml.lines()
        .map(|l| match l.trim_start().strip_prefix("address = ") {
            Some(_) => format!("address = \"127.0.0.1:{}\"", free_port()),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The guide's driver host (10.0.0.9) and port (7100) as this host and a free port: the
/// workers here are on 127.0.0.1 too ([`local_cluster_file`]).
fn local_driver(command: &str) -> String {
    let port = free_port();
    command
        .replace("0.0.0.0:7100", &format!("0.0.0.0:{port}"))
        .replace("10.0.0.9:7100", &format!("127.0.0.1:{port}"))
}

/// `sh -c command` in `dir`, with the example's binary first on the `PATH`.
fn shell(command: &str, dir: &Path) -> Command {
    let bin = topk().parent().expect("the binary's directory");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("a PATH"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The value of the line of `text` that starts with the word `name` (`state_digest`,
/// `output_digest`: a summary's digests).
fn summary_value(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (first, rest) = l.split_once(char::is_whitespace)?;
        (first == name).then(|| rest.trim().to_owned())
    })
}

/// The `(state_digest, output_digest)` of a summary, if it has them.
fn digests(summary: &str) -> Option<(String, String)> {
    Some((
        summary_value(summary, "state_digest")?,
        summary_value(summary, "output_digest")?,
    ))
}

/// The word after `flag` in `command`.
fn flag_value<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    words.find(|w| *w == flag)?;
    words.next()
}

/// Every summary the guide's commands printed has the oracle's digests: they all run the app
/// over the same input, the `--source file:` run over the generator's own lines (a line keyed
/// by its number instead of its sensor gave `top` a window per line, and other digests). So
/// does the guide's sample summary, and its table's abbreviation of `top`'s digest.
fn check_digests(text: &str, printed: &[(String, String)]) -> (String, String) {
    let (_, oracle) = printed
        .iter()
        .find(|(c, _)| c.starts_with("topk oracle "))
        .expect("the guide runs the oracle");
    let expected = digests(oracle).expect("the oracle prints its digests");
    for (command, stdout) in printed {
        if let Some(got) = digests(stdout) {
            assert_eq!(
                got, expected,
                "`{command}` printed other digests than the oracle"
            );
        }
    }
    let from_file = printed
        .iter()
        .find(|(c, _)| c.starts_with("topk run ") && c.contains("--source file:"))
        .expect("the guide runs the app over a file");
    assert!(digests(&from_file.1).is_some(), "{}", from_file.1);
    assert_eq!(
        digests(text),
        Some(expected.clone()),
        "the guide's sample summary shows the oracle's digests"
    );
    let top = text
        .lines()
        .find(|l| l.starts_with("top "))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|d| d.strip_suffix("..."))
        .expect("the guide's sample summary has a row for `top`");
    assert!(
        expected.0.starts_with(top),
        "the sample's row for `top` abbreviates {}: {top}",
        expected.0
    );
    expected
}

/// The sink of the `--source file:` run: one line per output (as many as the output digest
/// counts), each the operator's text (not `key_b64`) with the sensor as a number, every
/// sensor there; and the guide's sample line is one of them.
fn check_sink(text: &str, printed: &[(String, String)], work: &Path, output_digest: &str) {
    let command = printed
        .iter()
        .map(|(c, _)| c)
        .find(|c| c.starts_with("topk run ") && c.contains("--source file:"))
        .expect("the guide runs the app over a file");
    let sink = flag_value(command, "--sink")
        .and_then(|s| s.strip_prefix("file:"))
        .expect("the run over a file writes a file sink");
    let path = work.join(sink);
    let lines = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect::<Vec<serde_json::Value>>();
    // A digest's last 16 hex digits count its items.
    let outputs = u64::from_str_radix(&output_digest[output_digest.len() - 16..], 16);
    assert_eq!(Ok(lines.len() as u64), outputs, "one line per output");
    let mut sensors = BTreeSet::new();
    for line in &lines {
        assert_eq!(line["operator"], "top", "{line}");
        assert!(line.get("key_b64").is_none(), "not text: {line}");
        assert!(line["value"].is_string(), "{line}");
        let sensor = line["key"].as_str().and_then(|k| k.parse::<u32>().ok());
        let sensor = sensor.unwrap_or_else(|| panic!("the key is not a sensor: {line}"));
        assert!(
            (1..=clasp_operators::apps::sd::SENSORS).contains(&sensor),
            "{line}"
        );
        sensors.insert(sensor);
    }
    assert_eq!(sensors.len(), clasp_operators::apps::sd::SENSORS as usize);
    let sample = text
        .split('`')
        .find(|s| s.starts_with("{\"operator\":"))
        .expect("the guide shows a sink line");
    let sample: serde_json::Value = serde_json::from_str(sample).expect("the sample is JSON");
    assert!(
        lines.contains(&sample),
        "the guide's sample sink line is not one the run wrote: {sample}"
    );
}

#[test]
fn every_command_of_the_guide_runs() {
    let text = guide();
    let tmp = TempDir::new("guide");
    // The guide works in a copy of the example's directory, so its files (the secret) land
    // in the temporary directory.
    let work: PathBuf = tmp.0.clone();
    std::fs::copy(example_dir().join("topk.toml"), work.join("topk.toml")).unwrap();
    std::fs::write(work.join("cluster.toml"), local_cluster_file(&text)).unwrap();
    let mut workers = Children(Vec::new());
    let mut ran = Vec::new();
    // What each awaited command printed, for the checks after the run.
    let mut printed: Vec<(String, String)> = Vec::new();
    for command in blocks(&text, "sh").iter().flat_map(|b| commands(b)) {
        if command == "cargo build -p clasp-example-topk" {
            // Built: this test is that package's, and `topk()` is the binary it built.
            assert!(topk().exists());
        } else if command.starts_with("export PATH=") || command == "cd examples/topk" {
            // What `shell` does: the binary first on the PATH, in (a copy of) the example.
        } else if command.starts_with("topk worker ") {
            // A worker serves runs until it is stopped: started, not awaited (`exec`, so that
            // the signal below reaches the worker, not the shell).
            workers.0.push(
                shell(&format!("exec {command}"), &work)
                    .spawn()
                    .expect("sh runs"),
            );
        } else if command.starts_with("topk ") || command.starts_with("head -") {
            let local = local_driver(&command);
            let out = wait(shell(&local, &work).spawn().expect("sh runs"), &command);
            assert!(
                out.status.success(),
                "`{command}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            printed.push((command.clone(), stdout));
        } else {
            panic!("the guide has a command this test does not know how to run: `{command}`");
        }
        ran.push(command);
    }
    // The three workers of the cluster run served the driver and wait for the next one:
    // SIGTERM stops each.
    assert_eq!(workers.0.len(), 3, "{ran:#?}");
    for mut w in std::mem::take(&mut workers.0) {
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let status = w.wait().expect("a worker exits");
        assert!(
            status.success(),
            "a worker of the guide's cluster run failed"
        );
    }
    assert!(
        ran.iter()
            .any(|c| c.starts_with("topk run --static --cluster")),
        "{ran:#?}"
    );
    let (_, output_digest) = check_digests(&text, &printed);
    check_sink(&text, &printed, &work, &output_digest);
}
