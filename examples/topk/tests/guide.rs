//! Every command of `docs/guide.md`, run as the guide says, in the order it gives them: the
//! `sh` blocks are read from the guide itself, so a command added to it is run here (or fails
//! this test until it is taught how). The guide's three hosts are three workers on 127.0.0.1:
//! the test rewrites the addresses of the guide's cluster file to free local ports.

mod support;

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
            let out = wait(shell(&command, &work).spawn().expect("sh runs"), &command);
            assert!(
                out.status.success(),
                "`{command}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
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
}
