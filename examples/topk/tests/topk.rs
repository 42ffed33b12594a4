//! The example app on a cluster: 3-worker runs with random live migrations (static, and under
//! the live planner) equal the example's oracle, and so does one reading the generator's lines
//! from a file; workers of a binary without the example's kinds refuse the job, naming the
//! kind, without a hang.

mod support;

use std::process::{Command, Stdio};
use support::{Children, TempDir, example_dir, free_port, json, plain_clasp, run, topk};

const RECORDS: &str = "6000";
const SEED: &str = "2";

#[test]
fn three_workers_with_chaos_migrations_equal_the_oracle() {
    let dir = example_dir();
    let app = [
        "--app-file",
        "topk.toml",
        "--records",
        RECORDS,
        "--seed",
        SEED,
    ];
    let oracle = json(&run(
        topk(),
        &[&["oracle"][..], &app, &["--json"]].concat(),
        dir,
        &[],
    ));
    let args = [
        &[
            "run",
            "--static",
            "--workers",
            "3",
            "--chaos-migrations",
            "4",
        ][..],
        &app,
        &["--json"],
    ]
    .concat();
    let cluster = json(&run(topk(), &args, dir, &[]));
    for key in ["app", "seed", "state_digest", "output_digest", "processed"] {
        assert_eq!(cluster[key], oracle[key], "{key}");
    }
    assert_eq!(cluster["errors"].as_array().map(Vec::len), Some(0));
    assert_eq!(cluster["migrations"].as_array().map(Vec::len), Some(4));
    // The comparison has teeth: many outputs, and a state for every sensor. (A digest's last
    // 16 hex digits count its items.)
    let count = |digest: &serde_json::Value| {
        let hex = digest.as_str().expect("a digest");
        u64::from_str_radix(&hex[hex.len() - 16..], 16).expect("hex")
    };
    assert!(count(&oracle["output_digest"]) > 1000, "{oracle}");
    assert_eq!(count(&oracle["state_digests"]["top"]), 54, "{oracle}");
}

#[test]
fn the_live_planner_with_chaos_migrations_equals_the_oracle() {
    let dir = example_dir();
    let app = [
        "--app-file",
        "topk.toml",
        "--records",
        RECORDS,
        "--seed",
        SEED,
    ];
    let oracle = json(&run(
        topk(),
        &[&["oracle"][..], &app, &["--json"]].concat(),
        dir,
        &[],
    ));
    let live = [
        "run",
        "--max-workers",
        "3",
        "--pattern",
        "constant",
        "--peak-rate",
        "5000",
        "--chaos-migrations",
        "3",
    ];
    let args = [&live[..], &app, &["--json"]].concat();
    let cluster = json(&run(topk(), &args, dir, &[]));
    for key in ["app", "seed", "state_digest", "output_digest", "processed"] {
        assert_eq!(cluster[key], oracle[key], "{key}");
    }
    assert_eq!(cluster["errors"].as_array().map(Vec::len), Some(0));
}

/// The generator's own lines read from a file (`--source`) are keyed by their sensor, as the
/// generator keys them: the run equals the oracle of the same records and seed (keyed by the
/// line number, `top` held a window per line), and its sink lines are text, keyed by the
/// sensor as a number.
#[test]
fn three_workers_reading_the_generators_lines_from_a_file_equal_the_oracle() {
    let dir = example_dir();
    let tmp = TempDir::new("file-source");
    let readings = tmp.0.join("readings.txt");
    let sink = tmp.0.join("top.jsonl");
    let generated = run(
        topk(),
        &[
            "gen",
            "--app",
            "sd",
            "--records",
            RECORDS,
            "--seed",
            SEED,
            "--out",
            readings.to_str().unwrap(),
        ],
        dir,
        &[],
    );
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let app = ["--app-file", "topk.toml", "--records", RECORDS];
    let oracle = json(&run(
        topk(),
        &[&["oracle"][..], &app, &["--seed", SEED, "--json"]].concat(),
        dir,
        &[],
    ));
    let source = format!("file:{}", readings.display());
    let sink_arg = format!("file:{}", sink.display());
    let args = [
        &[
            "run",
            "--static",
            "--workers",
            "3",
            "--chaos-migrations",
            "2",
        ][..],
        &app,
        &[
            "--source",
            source.as_str(),
            "--sink",
            sink_arg.as_str(),
            "--json",
        ],
    ]
    .concat();
    let cluster = json(&run(topk(), &args, dir, &[]));
    for key in ["state_digest", "output_digest", "processed"] {
        assert_eq!(cluster[key], oracle[key], "{key}");
    }
    assert_eq!(cluster["errors"].as_array().map(Vec::len), Some(0));
    let text = std::fs::read_to_string(&sink).expect("the sink's file");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    for line in &lines {
        let sensor = line["key"].as_str().and_then(|k| k.parse::<u32>().ok());
        assert!(sensor.is_some_and(|s| (1..=54).contains(&s)), "{line}");
        assert!(line["value"].is_string(), "{line}");
    }
    // One line per output: a digest's last 16 hex digits count its items.
    let outputs = oracle["output_digest"].as_str().expect("a digest");
    let outputs = u64::from_str_radix(&outputs[outputs.len() - 16..], 16).expect("hex");
    assert_eq!(lines.len() as u64, outputs);
}

#[test]
fn workers_without_the_kinds_refuse_the_job_naming_the_kind() {
    let tmp = TempDir::new("plain-workers");
    let file = tmp.0.join("cluster.toml");
    let mut text = String::from("cluster_id = 91\n");
    for id in 1..=2 {
        let port = free_port();
        text.push_str(&format!(
            "[[worker]]\nid = {id}\naddress = \"127.0.0.1:{port}\"\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    let secret = "a cluster secret of enough bytes";
    let clasp = plain_clasp();
    let mut workers = Children(Vec::new());
    for id in ["1", "2"] {
        let child = Command::new(&clasp)
            // One job: a worker serving several would report the refused job and wait on.
            .args([
                "worker",
                "--id",
                id,
                "--job-timeout-s",
                "20",
                "--max-jobs",
                "1",
            ])
            .arg("--cluster")
            .arg(&file)
            .env("CLASP_CLUSTER_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("clasp worker runs");
        workers.0.push(child);
    }
    let out = run(
        topk(),
        &[
            "run",
            "--static",
            "--cluster",
            file.to_str().unwrap(),
            "--app-file",
            "topk.toml",
            "--records",
            "100",
        ],
        example_dir(),
        &[("CLASP_CLUSTER_SECRET", secret)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("unknown operator kind `topk_"),
        "the error names the kind: {err}"
    );
    // The workers gave up on the job and exited by themselves.
    for (i, c) in workers.0.iter_mut().enumerate() {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                assert!(!status.success(), "worker {} refused the job", i + 1);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "worker {} exits",
                i + 1
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A live run of the example that reserves a worker to join says to start it with the
/// example's binary; a plain `clasp worker` that joins all the same cannot run the job, exits
/// 1 naming the kind, and the run, which never used it, succeeds.
#[test]
fn a_joiner_without_the_kinds_is_refused_and_the_run_goes_on() {
    use std::io::BufRead as _;
    let tmp = TempDir::new("joiner");
    let secret = tmp.0.join("secret");
    std::fs::write(&secret, "a cluster secret of enough bytes").unwrap();
    let secret = secret.to_str().unwrap();
    let args = [
        "run",
        "--app-file",
        "topk.toml",
        "--max-workers",
        "2",
        "--start-workers",
        "1",
        "--secret-file",
        secret,
        "--duration",
        "6",
        "--peak-rate",
        "2000",
        "--json",
    ];
    let mut run_child = Command::new(topk())
        .args(args)
        .current_dir(example_dir())
        .env("XDG_STATE_HOME", &tmp.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("topk runs");
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(run_child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let hint = loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the run says how to join");
        if line.contains("may join") {
            break line;
        }
    };
    assert!(
        hint.contains(&format!("{} worker --id 2", topk().display())),
        "{hint}"
    );
    let after = |flag: &str| hint.split(flag).nth(1).unwrap().split(' ').next().unwrap();
    let joiner = Command::new(plain_clasp())
        .args(["worker", "--id", "2", "--join", after("--join ")])
        .args([
            "--cluster-id",
            after("--cluster-id "),
            "--secret-file",
            secret,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clasp worker runs");
    let joined = support::wait(joiner, "the joiner");
    let said = String::from_utf8_lossy(&joined.stderr);
    assert_eq!(joined.status.code(), Some(1), "{said}");
    assert!(said.contains("unknown operator kind `topk_"), "{said}");
    let out = support::wait(run_child, "the run");
    let err = reader.join().unwrap();
    assert!(out.status.success(), "{err}");
    let v = json(&out);
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{v}");
}

/// A user's binary speaks under its own name: its version says what it is built on, its
/// usage and errors name it, not `clasp`.
#[test]
fn the_binary_names_itself_in_its_version_usage_and_errors() {
    let dir = example_dir();
    let version = run(topk(), &["--version"], dir, &[]);
    assert!(version.status.success());
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(said.starts_with("topk (clasp "), "{said}");
    let help = run(topk(), &["--help"], dir, &[]);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("Usage: topk <COMMAND>"),
        "{help:?}"
    );
    let failed = run(
        topk(),
        &["oracle", "--app", "nosuch", "--records", "10"],
        dir,
        &[],
    );
    let err = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{err}");
    assert!(err.starts_with("topk: error: "), "{err}");
}
