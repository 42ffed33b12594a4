//! `--sink` through the real binary: the lines a run writes (file, stdout, TCP), their `seq`
//! across migrations, a slow TCP reader, and sink errors. Small sizes; every run is bounded
//! (a run that hangs is killed and fails the test).

mod common;

use common::{
    ClusterDir, SmallTmpfs, Workers, assert_equals_oracle, clasp, clasp_env, clasp_text, json,
};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A fresh directory for one test's files.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clasp-sink-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Word counts of `clasp gen`'s lines, normalised as `text_split` does (lowercase, split on
/// anything that is not a letter), computed here without the system.
fn counted_words(app: &str, records: &str, seed: &str) -> BTreeMap<String, u64> {
    let out = clasp(&["gen", "--app", app, "--records", records, "--seed", seed]);
    assert!(out.status.success());
    let mut counts = BTreeMap::new();
    for word in String::from_utf8(out.stdout)
        .unwrap()
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_default() += 1;
    }
    counts
}

/// The last count of every word in sink lines, checking on the way that each line is one JSON
/// object of the `count` operator and that a word's `seq`s are 0, 1, 2, … with its count
/// = seq + 1 (WC outputs every occurrence), whatever the order of the lines.
fn last_counts(lines: &str) -> BTreeMap<String, u64> {
    let mut seqs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in lines.lines().filter(|l| l.starts_with("{\"operator\"")) {
        let v: serde_json::Value = serde_json::from_str(line).expect(line);
        assert_eq!(v["operator"], "count", "{line}");
        let key = v["key"].as_str().expect(line).to_owned();
        let value: u64 = v["value"].as_str().expect(line).parse().expect(line);
        let seq = v["seq"].as_u64().expect(line);
        assert_eq!(value, seq + 1, "{line}");
        seqs.entry(key).or_default().push(seq);
    }
    seqs.into_iter()
        .map(|(word, mut s)| {
            s.sort_unstable();
            assert!(
                s.iter().enumerate().all(|(i, &q)| q == i as u64),
                "{word}: seqs {s:?}"
            );
            (word, s.len() as u64)
        })
        .collect()
}

#[test]
fn wc_through_a_file_sink_on_a_static_cluster_with_chaos_migrations_counts_every_word() {
    let _turn = common::one_at_a_time();
    let dir = scratch("static");
    let path = dir.join("counts.jsonl");
    // A stale file is emptied, not appended to.
    std::fs::write(&path, "{\"operator\":\"count\",\"key\":\"stale\"}\n").unwrap();
    let sink = format!("file:{}", path.display());
    let run = json(&clasp(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "3000",
        "--seed",
        "4",
        "--chaos-migrations",
        "4",
        "--sink",
        &sink,
        "--json",
    ]));
    assert_equals_oracle("wc", "3000", "4", &run);
    assert!(run["migrations"].as_array().unwrap().len() >= 4, "{run}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(last_counts(&text), counted_words("wc", "3000", "4"));
    assert_eq!(text.lines().count(), 30_000);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn wc_text_through_a_file_sink_in_a_live_run_counts_every_word_while_it_moves() {
    let _turn = common::one_at_a_time();
    let dir = scratch("live");
    let path = dir.join("counts.jsonl");
    let sink = format!("file:{}", path.display());
    let run = json(&clasp(&[
        "run",
        "--app",
        "wc-text",
        "--records",
        "3000",
        "--seed",
        "6",
        "--peak-rate",
        "20000",
        "--max-workers",
        "2",
        "--chaos-migrations",
        "3",
        "--sink",
        &sink,
        "--json",
    ]));
    assert_equals_oracle("wc-text", "3000", "6", &run);
    assert!(run["migrations"].as_array().unwrap().len() >= 3, "{run}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(last_counts(&text), counted_words("wc-text", "3000", "6"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Workers of a cluster file may be on several hosts: each writes `PATH.w<ID>` on its own.
#[test]
fn workers_of_a_cluster_file_each_write_their_own_file() {
    let _turn = common::one_at_a_time();
    let cluster = ClusterDir::new("sink-cluster", 91, 2);
    let secret = "a cluster secret of at least 32 bytes";
    let _workers = Workers(vec![
        cluster.spawn_worker("1", secret),
        cluster.spawn_worker("2", secret),
    ]);
    let path = cluster.dir.join("counts.jsonl");
    let sink = format!("file:{}", path.display());
    let out = clasp_env(
        &[
            "run",
            "--static",
            "--cluster",
            cluster.path(),
            "--app",
            "wc",
            "--records",
            "1000",
            "--seed",
            "8",
            "--chaos-migrations",
            "2",
            "--sink",
            &sink,
            "--json",
        ],
        &[("CLASP_CLUSTER_SECRET", secret)],
    );
    assert_equals_oracle("wc", "1000", "8", &json(&out));
    assert!(!path.exists(), "no shared file");
    let mut all = String::new();
    for id in [1, 2] {
        let mine = std::fs::read_to_string(format!("{}.w{id}", path.display())).unwrap();
        assert!(!mine.is_empty(), "worker {id} wrote nothing");
        all.push_str(&mine);
    }
    assert_eq!(last_counts(&all), counted_words("wc", "1000", "8"));
}

#[test]
fn a_stdout_sink_writes_the_lines_of_every_worker_before_the_summary() {
    let _turn = common::one_at_a_time();
    let (code, out, err) = clasp_text(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "300",
        "--seed",
        "2",
        "--sink",
        "stdout:",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(last_counts(&out), counted_words("wc", "300", "2"));
    let summary = out.find("app wc").expect("the summary");
    assert!(
        !out[summary..].contains("{\"operator\""),
        "lines after the summary"
    );
    // `clasp local`: the same lines, then the JSON summary.
    let (code, out, err) = clasp_text(&[
        "local",
        "--app",
        "wc",
        "--records",
        "300",
        "--seed",
        "2",
        "--sink",
        "stdout:",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(last_counts(&out), counted_words("wc", "300", "2"));
    let json_start = out.find("{\n").expect("the JSON summary");
    let summary: serde_json::Value = serde_json::from_str(&out[json_start..]).unwrap();
    assert_eq!(summary["totals"]["outputs"], 3000);
}

/// Each worker connects to the reader; the reader takes ~1 KiB/s for a while, then the rest:
/// the run waits for it and every line arrives.
#[test]
fn a_tcp_sink_feeds_a_slow_reader_every_line() {
    let _turn = common::one_at_a_time();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let slow_until = Instant::now() + Duration::from_secs(3);
    let reader = std::thread::spawn(move || {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (mut s, _) = listener.accept().unwrap();
                s.set_read_timeout(Some(Duration::from_secs(100))).unwrap();
                std::thread::spawn(move || {
                    let (mut got, mut buf) = (Vec::new(), [0u8; 128]);
                    loop {
                        let n = s.read(&mut buf).unwrap();
                        if n == 0 {
                            return got;
                        }
                        got.extend_from_slice(&buf[..n]);
                        if Instant::now() < slow_until {
                            std::thread::sleep(Duration::from_millis(250));
                        }
                    }
                })
            })
            .collect();
        readers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect::<Vec<u8>>()
    });
    let sink = format!("tcp:{addr}");
    let (code, _, err) = clasp_text(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "200",
        "--seed",
        "3",
        "--sink",
        &sink,
    ]);
    assert_eq!(code, 0, "{err}");
    let got = String::from_utf8(reader.join().unwrap()).unwrap();
    assert_eq!(last_counts(&got), counted_words("wc", "200", "3"));
}

/// A `stdout:` sink whose reader goes away (`| head -c 100`) fails the run, naming the sink —
/// even though the summary, on the same closed stdout, cannot be printed either.
#[test]
fn a_stdout_sink_whose_reader_goes_away_fails_the_run() {
    let _turn = common::one_at_a_time();
    for args in [
        &["local", "--app", "wc"][..],
        // A run that fails keeps its checkpoints (for --resume): none here.
        &[
            "run",
            "--static",
            "--workers",
            "2",
            "--app",
            "wc",
            "--checkpoint-interval-ms",
            "0",
        ],
    ] {
        let mut child = common::clasp_command()
            .args(args)
            .args(["--records", "20000", "--sink", "stdout:"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("clasp starts");
        let mut head = [0u8; 100];
        let mut stdout = child.stdout.take().expect("piped");
        stdout.read_exact(&mut head).expect("the first lines");
        drop(stdout);
        let mut stderr = child.stderr.take().expect("piped");
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} did not end after its stdout closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = err.join().expect("stderr");
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("sink stdout: write: Broken pipe"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A file system that fills up during the run (a 64 KiB tmpfs; 1.6 MB of lines).
#[test]
fn a_disk_that_fills_up_is_a_clear_error_naming_the_sink() {
    let _turn = common::one_at_a_time();
    let fs = match SmallTmpfs::mount("sink", "64k") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs ({why}); /dev/full is tested below");
            return;
        }
    };
    let sink = format!("file:{}", fs.0.join("counts.jsonl").display());
    let (code, _, err) = clasp_text(&[
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "3000",
        // A run that fails keeps its checkpoints (for --resume): none here, where it fails on
        // purpose.
        "--checkpoint-interval-ms",
        "0",
        "--sink",
        &sink,
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("sink {sink}: write: No space left on device")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sink_errors_are_clear_errors_naming_the_sink() {
    let _turn = common::one_at_a_time();
    // A full disk (a device that is always full), on a cluster and on one worker.
    for args in [
        &["run", "--static", "--workers", "2"][..],
        &["local", "--executors", "2"][..],
    ] {
        let mut a = args.to_vec();
        a.extend([
            "--app",
            "wc",
            "--records",
            "300",
            "--sink",
            "file:/dev/full",
        ]);
        let (code, _, err) = clasp_text(&a);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("sink file:/dev/full: write: No space left on device"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Nobody listening, a directory that does not exist, and a sink that does not parse.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let tcp = format!("tcp:{closed}");
    for (sink, code, says) in [
        (tcp.as_str(), 1, format!("sink {tcp}: connect")),
        // Refused before anything starts, as a missing source is.
        (
            "file:/nonexistent-dir/x",
            2,
            "sink file:/nonexistent-dir/x: the directory /nonexistent-dir does not exist"
                .to_owned(),
        ),
        ("kafka:topic", 2, "bad sink `kafka:topic`".to_owned()),
    ] {
        for args in [&["run", "--static", "--workers", "2"][..], &["local"][..]] {
            let mut a = args.to_vec();
            a.extend(["--app", "wc", "--records", "100", "--sink", sink]);
            let (got, _, err) = clasp_text(&a);
            assert_eq!(got, code, "{a:?}: {err}");
            assert!(err.contains(&says), "{a:?}: {err}");
        }
    }
    // A cluster run that failed before its first checkpoint leaves no checkpoint directory.
    let state = tempfile::tempdir().unwrap();
    let state_home = state.path().to_str().unwrap();
    let args = [
        "run",
        "--static",
        "--workers",
        "2",
        "--app",
        "wc",
        "--records",
        "100",
    ];
    let mut a = args.to_vec();
    a.extend(["--sink", &tcp]);
    let out = clasp_env(&a, &[("XDG_STATE_HOME", state_home)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let runs = state.path().join("clasp/checkpoints");
    let left: Vec<_> = std::fs::read_dir(&runs).map_or(Vec::new(), |d| d.collect());
    assert!(left.is_empty(), "left in {}: {left:?}", runs.display());
}

/// A file sink that is the source's own file (or in its directory) is refused before anything
/// is written, and the input is left as it was.
#[test]
fn a_sink_over_the_source_is_refused_and_the_input_kept() {
    let _turn = common::one_at_a_time();
    let input = common::temp_file("sink-over-source.txt", "hello world\nbye now\n");
    let path = input.to_str().unwrap();
    let dir = input.parent().unwrap().to_str().unwrap();
    let other = format!(
        "file:{dir}/clasp-sink-over-source-{}.out",
        std::process::id()
    );
    for args in [
        vec![
            "local",
            "--app",
            "wc",
            "--source",
            &format!("file:{path}")[..],
            "--sink",
        ],
        vec![
            "run",
            "--static",
            "--workers",
            "1",
            "--app",
            "wc",
            "--source",
            &format!("file:{path}")[..],
            "--sink",
        ],
    ] {
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.push(format!("file:{path}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = common::clasp(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("would write over the input"), "{err}");
    }
    let out = common::clasp(&[
        "local",
        "--app",
        "wc",
        "--source",
        &format!("dir:{dir}"),
        "--sink",
        &other,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a sink in the source's directory"
    );
    // The source's file under another name (a hard link).
    let linked = format!("{dir}/clasp-sink-hard-link-{}.txt", std::process::id());
    std::fs::hard_link(path, &linked).unwrap();
    let sink = format!("file:{linked}");
    let out = common::clasp(&["local", "--app", "wc", "--source", &format!("file:{path}")]);
    assert!(out.status.success());
    let out = common::clasp(&[
        "local",
        "--app",
        "wc",
        "--source",
        &format!("file:{path}"),
        "--sink",
        &sink,
    ]);
    let _ = std::fs::remove_file(&linked);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a hard link: {err}");
    assert!(err.contains("would write over the input"), "{err}");
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "hello world\nbye now\n"
    );
}

/// Files a run's workers cannot share as a sink are refused before anything starts: a FIFO
/// (its open would wait for a reader), a name for the opening process's own descriptor, a
/// directory.
#[test]
fn a_fifo_a_descriptor_name_or_a_directory_is_refused_as_a_sink() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rw).unwrap();
    let fifo = format!("file:{}", fifo.display());
    let directory = format!("file:{}", dir.path().display());
    for (sink, says) in [
        (fifo.as_str(), "is a FIFO"),
        ("file:/dev/stdout", "use stdout:"),
        ("file:/proc/self/fd/1", "use stdout:"),
        (directory.as_str(), "is a directory"),
    ] {
        for args in [&["run", "--static", "--workers", "2"][..], &["local"][..]] {
            let mut a = args.to_vec();
            a.extend(["--app", "wc", "--records", "100", "--sink", sink]);
            let (code, _, err) = clasp_text(&a);
            assert_eq!(code, 2, "{a:?}: {err}");
            assert!(
                err.contains(&format!("--sink {sink}")) && err.contains(says),
                "{err}"
            );
        }
    }
}

/// `--events` naming the source's file, the sink's, or the `--app-file` or `--config` the run
/// read is refused before any is touched (the events file is emptied when it opens: the input
/// was lost and the run exited 0).
#[test]
fn events_over_the_source_or_the_sink_are_refused_and_the_input_kept() {
    let input = common::temp_file("events-over-source.txt", "hello world\nbye now\n");
    let path = input.to_str().unwrap();
    let sink = format!("{path}.out");
    let source = format!("file:{path}");
    let run = |extra: &[&str]| {
        #[rustfmt::skip]
        let base = ["run", "--app", "wc", "--max-workers", "1", "--uncapped", "--source", &source];
        common::clasp(&[&base[..], extra].concat())
    };
    let out = run(&["--events", path]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("would write over the input of --source"),
        "{err}"
    );
    let dotted = format!(
        "{}/./{}",
        input.parent().unwrap().display(),
        sink.rsplit('/').next().unwrap()
    );
    let out = run(&["--sink", &format!("file:{sink}"), "--events", &dotted]);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is the file of --sink"), "{err}");
    // The sink's file under another name (a hard link).
    std::fs::write(&sink, "").unwrap();
    let linked = format!("{path}.linked");
    std::fs::hard_link(&sink, &linked).unwrap();
    let out = run(&["--sink", &format!("file:{sink}"), "--events", &linked]);
    let err = common::stderr(&out);
    let _ = (std::fs::remove_file(&sink), std::fs::remove_file(&linked));
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is the file of --sink"), "{err}");
    // A cluster file's worker writes `PATH.w<ID>` on its host, which may be this one: refused
    // before the cluster file is read (this one does not exist).
    #[rustfmt::skip]
    let clustered = ["run", "--app", "wc", "--cluster", "/nonexistent/clasp-cluster.toml",
        "--sink", &format!("file:{sink}"), "--events", &format!("{sink}.w1")];
    let out = common::clasp(&clustered);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is a worker's file of --sink"), "{err}");
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "hello world\nbye now\n"
    );
    // The files the run reads its app and its settings from.
    let text = |out: std::process::Output| String::from_utf8(out.stdout).unwrap();
    let app = text(common::clasp(&["apps", "show", "wc", "--toml"]));
    let app_path = common::temp_file("events-app.toml", &app);
    let app_file = app_path.to_str().unwrap();
    let config = text(common::clasp(&["run", "--app", "wc", "--print-config"]));
    let config_path = common::temp_file("events-run.toml", &config);
    let config_file = config_path.to_str().unwrap();
    #[rustfmt::skip]
    let with_app = ["run", "--app-file", app_file, "--max-workers", "1", "--uncapped",
        "--events", app_file];
    #[rustfmt::skip]
    let with_config = ["run", "--config", config_file, "--max-workers", "1", "--uncapped",
        "--events", config_file];
    for (args, names) in [(&with_app, "--app-file"), (&with_config, "--config")] {
        let out = common::clasp(args);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("would write over the file of {names}")),
            "{err}"
        );
    }
    assert_eq!(std::fs::read_to_string(app_file).unwrap(), app);
    assert_eq!(std::fs::read_to_string(config_file).unwrap(), config);
}
