//! What the example's tests share: running the `topk` binary (and the plain `clasp` one) with
//! a deadline, and a cluster file of free 127.0.0.1 ports.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest any one process of these tests may run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The example's binary.
pub fn topk() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_topk"))
}

/// The example's directory (its app file is there).
pub fn example_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The plain `clasp` binary of this workspace, beside `topk` in the target directory (built
/// with the workspace; built here if it is missing).
pub fn plain_clasp() -> PathBuf {
    let exe = topk().with_file_name(format!("clasp{}", std::env::consts::EXE_SUFFIX));
    if !exe.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "clasp", "--bin", "clasp"])
            .current_dir(example_dir())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the clasp binary");
    }
    exe
}

/// Waits for `child` at most [`RUN_TIMEOUT`], then kills it and fails the test.
pub fn wait(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + RUN_TIMEOUT;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Runs `exe args` in `dir` with `env` added, bounded by [`RUN_TIMEOUT`].
pub fn run(exe: &Path, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    wait(cmd.spawn().expect("the binary runs"), &format!("{args:?}"))
}

/// The JSON a successful run printed.
pub fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "the run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// Processes a test started, killed when it ends.
pub struct Children(pub Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free 127.0.0.1 port (free now; the worker binds it soon after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A private temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("clasp-topk-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
