//! `--source`: records read from a file, standard input, a TCP connection; bad data counted;
//! memory that does not grow with the input. Word counts are checked against a count the test
//! computes itself from the text: the digest of every word with its count, which is what the
//! `count` operator's state digest is.

mod common;

use clasp_operators::codec::StateCodec;
use clasp_operators::digest::{Digest, DigestDomain, domain_seed};
use common::{RUN_TIMEOUT, assert_measured_run_equals_oracle, clasp, json, start};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("clasp-cli-source-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lines` lines of lowercase words from a small vocabulary, seeded.
/// `clasp run --static --workers N` followed by `rest`.
fn static_run<'a>(workers: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--static", "--workers", workers];
    args.extend_from_slice(rest);
    args
}

fn text(lines: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home",
    ];
    let mut x = seed | 1;
    let mut out = Vec::new();
    for _ in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let words = 1 + (x % 9) as usize;
        for w in 0..words {
            if w > 0 {
                out.extend_from_slice(if (x >> (w + 3)) & 1 == 0 { b" " } else { b"  " });
            }
            out.extend_from_slice(WORDS[((x >> (5 * w)) % 12) as usize].as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// Every word of `text` with its count (lines that are not all lowercase letters and spaces
/// are skipped, as WC's `split` counts them malformed).
fn word_counts(text: &[u8]) -> BTreeMap<Vec<u8>, u64> {
    let mut counts = BTreeMap::new();
    for line in text.split(|&b| b == b'\n') {
        if !line.iter().all(|&b| b.is_ascii_lowercase() || b == b' ') {
            continue;
        }
        for w in line.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
            *counts.entry(w.to_vec()).or_default() += 1;
        }
    }
    counts
}

/// The state digest of WC's `count` holding `counts`.
fn count_digest(counts: &BTreeMap<Vec<u8>, u64>) -> String {
    let seed = domain_seed("count", DigestDomain::State);
    let mut d = Digest::EMPTY;
    let (mut value, mut scratch) = (Vec::new(), Vec::new());
    for (word, n) in counts {
        value.clear();
        n.encode(&mut value);
        d.add_keyed(seed, word, &value, &mut scratch);
    }
    d.to_hex()
}

/// The run counted exactly `counts`, read `lines` records and had no faults.
fn assert_counted(run: &serde_json::Value, counts: &BTreeMap<Vec<u8>, u64>, lines: u64) {
    assert_eq!(run["errors"], serde_json::json!([]), "{run}");
    assert_eq!(run["processed"]["split"], lines, "{run}");
    assert_eq!(run["sources"][0]["records"], lines, "{run}");
    assert_eq!(run["state_digests"]["count"], count_digest(counts), "{run}");
}

#[test]
fn wc_over_a_file_on_a_two_worker_static_cluster_counts_every_word() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("wc-file");
    let corpus = text(3000, 7);
    let path = d.file("corpus.txt", &corpus);
    let source = format!("file:{}", path.display());
    let counts = word_counts(&corpus);
    let run = json(&clasp(&static_run(
        "2",
        &["--app", "wc", "--source", &source, "--json"],
    )));
    assert_counted(&run, &counts, 3000);
    let s = &run["sources"][0];
    assert_eq!(s["source"], source);
    assert_eq!(s["byte_offset"], corpus.len() as u64, "{s}");
    assert_eq!(s["file_index"], 0);
    // With migrations while the input flows (their moments spread over --records).
    let run = json(&clasp(&static_run(
        "2",
        &[
            "--app",
            "wc",
            "--source",
            &source,
            "--records",
            "3000",
            "--chaos-migrations",
            "2",
            "--json",
        ],
    )));
    assert_counted(&run, &counts, 3000);
    assert_eq!(run["migrations"].as_array().map(Vec::len), Some(2), "{run}");
}

/// An app's generated input, written to a file and read back as a source, keyed by the app's
/// first operator: the run equals the oracle on the generator, for every app.
#[test]
fn every_app_reading_its_generated_input_from_a_file_equals_the_oracle() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("gen");
    for app in ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"] {
        let path = d.0.join(format!("{app}.txt"));
        let path = path.to_str().unwrap();
        let out = clasp(&[
            "gen",
            "--app",
            app,
            "--records",
            "3000",
            "--seed",
            "5",
            "--out",
            path,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = json(&clasp(&static_run(
            "2",
            &[
                "--app",
                app,
                "--seed",
                "5",
                "--source",
                &format!("file:{path}"),
                "--json",
            ],
        )));
        assert_measured_run_equals_oracle(app, "3000", "5", &run);
    }
}

#[test]
fn a_live_run_reads_a_file_while_it_migrates() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("wc-live");
    let corpus = text(6000, 13);
    let path = d.file("corpus.txt", &corpus);
    let source = format!("file:{}", path.display());
    let run = json(&clasp(&[
        "run",
        "--app",
        "wc",
        "--source",
        &source,
        "--records",
        "6000",
        "--peak-rate",
        "40000",
        "--max-workers",
        "3",
        "--chaos-migrations",
        "4",
        "--json",
    ]));
    assert_counted(&run, &word_counts(&corpus), 6000);
    assert!(run["migrations"].as_array().unwrap().len() >= 4, "{run}");
    assert_eq!(
        run["sources"][0]["byte_offset"],
        corpus.len() as u64,
        "{run}"
    );
}

#[test]
fn a_directory_is_read_file_after_file() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("wc-dir");
    let (a, b) = (text(500, 3), text(700, 5));
    d.file("b.txt", &b);
    d.file("a.txt", &a);
    let counts = word_counts(&[a.clone(), b.clone()].concat());
    let source = format!("dir:{}", d.0.display());
    let run = json(&clasp(&static_run(
        "2",
        &["--app", "wc", "--source", &source, "--json"],
    )));
    assert_counted(&run, &counts, 1200);
    let s = &run["sources"][0];
    assert_eq!(
        (s["file_index"].as_u64(), s["byte_offset"].as_u64()),
        (Some(1), Some(b.len() as u64))
    );
    assert!(s["path"].as_str().unwrap().ends_with("b.txt"), "{s}");
}

/// Runs clasp with `input` on its standard input.
fn clasp_with_stdin(args: &[&str], input: Vec<u8>) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(args)
        .env("XDG_CONFIG_HOME", "/nonexistent-clasp-test-config")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clasp runs");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + RUN_TIMEOUT;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            if !Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().expect("the input is written");
    let _ = watchdog;
    out
}

#[test]
fn stdin_is_a_source_of_clasp_local_and_of_a_static_cluster() {
    let _turn = common::one_at_a_time();
    let corpus = text(2000, 11);
    let counts = word_counts(&corpus);
    for args in [
        &["local", "--app", "wc", "--executors", "2"][..],
        &static_run("2", &["--app", "wc"]),
    ] {
        let args: Vec<&str> = [args, &["--source", "stdin:", "--json"][..]].concat();
        let run = json(&clasp_with_stdin(&args, corpus.clone()));
        assert_counted(&run, &counts, 2000);
        assert_eq!(run["sources"][0]["source"], "stdin:");
        assert!(run["sources"][0].get("byte_offset").is_none(), "{run}");
    }
}

/// A pipe named as a file (`file:/dev/stdin`: its size reads 0) is read to its end, not taken
/// for an empty file; `clasp local`'s ingress process reads the standard input it was given.
#[test]
fn a_pipe_named_as_a_file_is_read_to_its_end() {
    let _turn = common::one_at_a_time();
    let corpus = text(500, 5);
    let counts = word_counts(&corpus);
    for args in [
        &["local", "--app", "wc"][..],
        &static_run("2", &["--app", "wc"]),
    ] {
        let args: Vec<&str> = [args, &["--source", "file:/dev/stdin", "--json"][..]].concat();
        let run = json(&clasp_with_stdin(&args, corpus.clone()));
        assert_counted(&run, &counts, 500);
    }
}

/// A named pipe (FIFO) as a `file:` source, read while checkpoints are taken: each checkpoint
/// notes where the source stands without opening it again (a FIFO whose writer is gone would
/// keep that open waiting for ever), and the run reads it to its end.
#[test]
fn a_fifo_source_is_read_to_its_end_while_checkpoints_are_taken() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("fifo");
    let fifo = d.0.join("fifo");
    let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, owner_rw).expect("a FIFO");
    let corpus = text(400, 9);
    let counts = word_counts(&corpus);
    let writer = {
        let (fifo, corpus) = (fifo.clone(), corpus.clone());
        std::thread::spawn(move || std::fs::write(fifo, corpus))
    };
    let source = format!("file:{}", fifo.display());
    let checkpoints = d.0.join("ck").display().to_string();
    let args = [
        "--app", "wc", "--rate", "2000", "--source", &source, "--json",
    ];
    let more = [
        "--checkpoint-interval-ms",
        "40",
        "--checkpoint-dir",
        &checkpoints,
    ];
    let out = clasp(&static_run("2", &[&args[..], &more].concat()));
    // A run that never opened the FIFO leaves the writer waiting for a reader: one that
    // opens and closes it at once ends that wait (the write then fails, said below).
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(&fifo);
    let run = json(&out);
    assert_counted(&run, &counts, 400);
    assert!(run["checkpoints"]["taken"].as_u64() > Some(0), "{run}");
    writer.join().unwrap().expect("the input is written");
}

#[test]
fn bad_source_data_is_counted_and_nothing_else_is_lost() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("bad");
    // Lines: good, invalid UTF-8 (WC's split counts it), over 128 KiB (the source counts it),
    // one word of 100 KiB (larger than a transport batch: sent alone; WC's split counts it),
    // good, a word over 1024 bytes, and a last line without a newline.
    let mut lines = b"alpha beta\n\xff\xfe gamma\n".to_vec();
    lines.extend(std::iter::repeat_n(b'x', (128 << 10) + 1));
    lines.push(b'\n');
    lines.extend(std::iter::repeat_n(b'y', 100 << 10));
    lines.extend_from_slice(b"\ngamma delta\nbeta ");
    // A word too long to be a key (WC's split counts it).
    lines.extend(std::iter::repeat_n(b'z', 2000));
    lines.extend_from_slice(b"\nalpha");
    let path = d.file("bad.txt", &lines);
    let run = json(&clasp(&static_run(
        "2",
        &[
            "--app",
            "wc",
            "--source",
            &format!("file:{}", path.display()),
            "--json",
        ],
    )));
    let counts = word_counts(b"alpha beta\ngamma delta\nalpha");
    assert_eq!(
        run["state_digests"]["count"],
        count_digest(&counts),
        "{run}"
    );
    assert_eq!(run["processed"]["split"], 6, "{run}");
    let split_malformed = &run["malformed"]["split"];
    assert_eq!(
        split_malformed["sentence has a character that is not a lowercase letter"], 1,
        "{run}"
    );
    assert_eq!(
        split_malformed["emitted a key longer than 1024 bytes"], 2,
        "{run}"
    );
    let s = &run["sources"][0];
    assert_eq!(s["records"], 6, "{s}");
    assert_eq!(s["malformed"]["record longer than 128 KiB"], 1, "{s}");
    assert_eq!(s["byte_offset"], lines.len() as u64, "{s}");
    // Length-prefixed: two records, then one cut short by the end of the file.
    let mut bytes = Vec::new();
    for r in [&b"alpha beta"[..], b"gamma"] {
        bytes.extend_from_slice(&(r.len() as u32).to_le_bytes());
        bytes.extend_from_slice(r);
    }
    bytes.extend_from_slice(&100u32.to_le_bytes());
    bytes.extend_from_slice(b"delta");
    let path = d.file("records.bin", &bytes);
    let out = clasp(&[
        "local",
        "--app",
        "wc",
        "--source",
        &format!("lenprefix:{}", path.display()),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("2 records, last one ending at byte 23 of file 0")
            && text.contains("1 × truncated length-prefixed record at end of file"),
        "{text}"
    );
    let counts = word_counts(b"alpha beta\ngamma");
    assert!(text.contains(&count_digest(&counts)), "{text}");
}

#[test]
fn a_paced_tcp_source_slows_a_fast_client_and_drops_nothing() {
    let _turn = common::one_at_a_time();
    const LINES: usize = 3000;
    const LINE_BYTES: usize = 4096;
    const RATE: usize = 1000;
    // What the socket buffers and the source's queue can take without the run admitting
    // (under 5 MiB of the 12 MiB): the client must spend at least the rest's admission time
    // (7 MiB at 4 MiB/s, rounded down), and the run at least the lines' time at RATE less the
    // half second of its first interval.
    const MIN_WRITING: Duration = Duration::from_secs(1);
    const MIN_RUN_S: f64 = (LINES / RATE) as f64 - 0.5;
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let run = start(
        &static_run(
            "1",
            &[
                "--app",
                "syn",
                "--source",
                &format!("tcp:{addr}"),
                "--rate",
                &RATE.to_string(),
                "--json",
            ],
        ),
        &[],
    );
    let client = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut conn = loop {
            match std::net::TcpStream::connect(addr) {
                Ok(c) => break c,
                Err(e) if Instant::now() > deadline => panic!("the source never listened: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let line: Vec<u8> = (0..LINE_BYTES - 1)
            .map(|i| b'a' + (i % 26) as u8)
            .chain([b'\n'])
            .collect();
        let started = Instant::now();
        for _ in 0..LINES {
            conn.write_all(&line).unwrap();
        }
        let took = started.elapsed();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        let _ = conn.read(&mut [0u8; 1]);
        took
    });
    let out = run.wait();
    let writing = client.join().unwrap();
    let run = json(&out);
    assert_eq!(run["errors"], serde_json::json!([]), "{run}");
    assert_eq!(run["sources"][0]["records"], LINES, "{run}");
    assert_eq!(run["processed"]["s1"], LINES, "{run}");
    assert_eq!(run["processed"]["s10"], LINES, "{run}");
    // Lower bounds only (pacing, not speed): the client could not write faster than the run
    // admitted.
    assert!(writing >= MIN_WRITING, "the client wrote in {writing:?}");
    assert!(run["elapsed_s"].as_f64().unwrap() >= MIN_RUN_S, "{run}");
}

/// The peak resident memory of process `pid` so far, in KiB (None once it is gone).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The driver's peak resident memory reading `path` (one word per line) on one worker.
fn driver_peak_kib(path: &Path) -> u64 {
    let source = format!("file:{}", path.display());
    let mut run = start(
        &static_run("1", &["--app", "wc", "--source", &source, "--json"]),
        &[],
    );
    let pid = run.pid();
    let mut peak = 0;
    while !run.finished() {
        peak = peak_rss_kib(pid).unwrap_or(0).max(peak);
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = json(&run.wait());
    assert_eq!(run["errors"], serde_json::json!([]), "{run}");
    peak
}

#[test]
fn reading_a_large_file_does_not_grow_memory() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("memory");
    // Lines of 4 KiB (four words of 1000 letters): few records, many bytes.
    let word = "w".repeat(1000);
    let line = format!("{word} {word} {word} {word}\n").into_bytes();
    let small = d.file("small.txt", &line.repeat(256));
    let large_path = d.0.join("large.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&large_path).unwrap());
        for _ in 0..16 * 1024 {
            f.write_all(&line).unwrap();
        }
    }
    let small_kib = driver_peak_kib(&small);
    let large_kib = driver_peak_kib(&large_path);
    // 1 MiB against 64 MiB of input: the reader holds a few batches, not the file.
    assert!(
        large_kib < small_kib + 16 * 1024,
        "peak RSS {large_kib} KiB reading 64 MiB against {small_kib} KiB reading 1 MiB"
    );
}

#[test]
fn a_bad_source_is_refused_naming_it() {
    let _turn = common::one_at_a_time();
    for (args, named) in [
        (
            static_run("1", &["--app", "wc", "--source", "ftp:x"]),
            "ftp:x",
        ),
        (
            static_run(
                "1",
                &["--app", "wc", "--source", "file:/nonexistent/corpus"],
            ),
            "/nonexistent/corpus",
        ),
        (
            vec!["local", "--app", "wc", "--source", "dir:/nonexistent/dir"],
            "/nonexistent/dir",
        ),
        // A relative path names the directory it was looked for in.
        (
            vec![
                "local",
                "--app",
                "wc",
                "--source",
                "file:no-such-corpus.txt",
            ],
            "no-such-corpus.txt (in /",
        ),
        (
            static_run("1", &["--app", "wc", "--source", "tcp:nowhere"]),
            "tcp:nowhere",
        ),
        (
            static_run(
                "1",
                &[
                    "--app",
                    "wc",
                    "--source",
                    "stdin:",
                    "--chaos-migrations",
                    "1",
                ],
            ),
            "--records",
        ),
    ] {
        let out = clasp(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
    }
    // An address already taken is refused before any worker starts.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let source = format!("tcp:{}", taken.local_addr().unwrap());
    let out = clasp(&static_run("1", &["--app", "wc", "--source", &source]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("in use") && !err.contains("listening"),
        "{err}"
    );
    let help = String::from_utf8_lossy(&clasp(&["run", "--help"]).stdout).into_owned();
    assert!(
        help.contains("lenprefix:PATH") && help.contains("128 KiB"),
        "{help}"
    );
}

/// The last count of every word in a file sink, by the highest `seq` of its key.
fn sink_counts(path: &Path) -> BTreeMap<Vec<u8>, u64> {
    let text = std::fs::read_to_string(path).expect("the sink's file");
    let mut last: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect(line);
        let word = v["key"].as_str().expect(line).as_bytes().to_vec();
        let count: u64 = v["value"].as_str().expect(line).parse().expect(line);
        let seq = v["seq"].as_u64().expect(line);
        let e = last.entry(word).or_insert((seq, count));
        if seq >= e.0 {
            *e = (seq, count);
        }
    }
    last.into_iter().map(|(w, (_, c))| (w, c)).collect()
}

/// The pipeline end to end, named by an app file: WC reads a file of text and writes its
/// counts to a file sink on a 2-worker cluster while chaos migrations move its state; the last
/// count of every word in the sink equals the count the test computes. `--sink` on the command
/// line overrides the app file's.
#[test]
fn an_app_file_names_its_source_and_sink_and_the_flags_override_them() {
    let _turn = common::one_at_a_time();
    let d = TempDir::new("app-file");
    let corpus = text(2000, 11);
    let path = d.file("corpus.txt", &corpus);
    let named = d.0.join("counts.jsonl");
    let app = clasp(&["apps", "show", "wc", "--toml"]);
    assert!(app.status.success());
    let mut toml = String::from_utf8(app.stdout).unwrap();
    toml += &format!(
        "\n[run]\nsource = \"file:{}\"\nsink = \"file:{}\"\n",
        path.display(),
        named.display()
    );
    let app_file = d.file("wc-file.toml", toml.as_bytes());
    let app_arg = app_file.to_str().unwrap();
    let counts = word_counts(&corpus);
    let run = json(&clasp(&static_run(
        "2",
        &[
            "--app-file",
            app_arg,
            "--records",
            "2000",
            "--chaos-migrations",
            "2",
            "--json",
        ],
    )));
    assert_counted(&run, &counts, 2000);
    assert_eq!(sink_counts(&named), counts);
    let other = d.0.join("other.jsonl");
    let sink = format!("file:{}", other.display());
    std::fs::remove_file(&named).unwrap();
    let run = json(&clasp(&static_run(
        "2",
        &["--app-file", app_arg, "--sink", &sink, "--json"],
    )));
    assert_counted(&run, &counts, 2000);
    assert_eq!(sink_counts(&other), counts);
    assert!(!named.exists(), "the app file's sink was overridden");
}

/// A file truncated while it is read fails the run, on one worker as on a cluster: the
/// ingress's failure is not lost because the worker finished the stream it had ended.
#[test]
fn a_source_that_fails_partway_fails_the_run() {
    let _turn = common::one_at_a_time();
    let dir = TempDir::new("fails-partway");
    for args in [
        &["local", "--app", "wc"][..],
        // A run that fails keeps its checkpoints (for --resume): none here, where it fails on
        // purpose.
        &static_run("2", &["--app", "wc", "--checkpoint-interval-ms", "0"]),
    ] {
        let path = dir.file("shrinks.txt", &text(200_000, 9));
        let source = format!("file:{}", path.display());
        let args: Vec<&str> = [args, &["--source", &source, "--rate", "5000"][..]].concat();
        let run = start(&args, &[]);
        std::thread::sleep(Duration::from_millis(1000));
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(1000).unwrap();
        let out = run.wait();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("truncated while it was read"),
            "{args:?}: {err}"
        );
    }
}

/// A record longer than a worker's rings take stops a cluster run at once, naming the record
/// and the rings' size, as `clasp local` stops at it: a worker would drop its request, the tree
/// would never end, and every restart would meet it again.
#[test]
fn a_record_longer_than_the_rings_take_stops_the_run_at_once() {
    let _turn = common::one_at_a_time();
    let dir = TempDir::new("too-long");
    let mut body = b"hello world\n".to_vec();
    body.extend(std::iter::repeat_n(b'a', 40_000));
    body.extend_from_slice(b"\nmore words\n");
    let path = dir.file("big.txt", &body);
    let source = format!("file:{}", path.display());
    let out = clasp(&static_run(
        "2",
        &[
            "--app",
            "wc-text",
            "--source",
            &source,
            "--ring-bytes",
            "65536",
            "--stall-timeout-s",
            "20",
            // A failed run keeps its checkpoints: none here.
            "--checkpoint-interval-ms",
            "0",
        ],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("record 1 (") && err.contains("--ring-bytes 65536"),
        "{err}"
    );
}

/// Connections that close without sending a byte (a port scan, a health check) do not end a
/// `tcp:` source's input: the run waits on for its producer and reads every line it sends.
#[test]
fn a_tcp_source_ignores_connections_that_send_nothing() {
    let _turn = common::one_at_a_time();
    const LINES: usize = 500;
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let source = format!("tcp:{addr}");
    let run = start(
        &static_run(
            "1",
            &[
                "--app",
                "wc",
                "--source",
                &source,
                "--json",
                "--checkpoint-interval-ms",
                "0",
            ],
        ),
        &[],
    );
    let connect = || {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match std::net::TcpStream::connect(addr) {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => panic!("the source never listened: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    };
    // Two scans: connected and closed at once.
    for _ in 0..2 {
        drop(connect());
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut producer = connect();
    for i in 0..LINES {
        writeln!(producer, "the quick brown fox {i}").unwrap();
    }
    producer.shutdown(std::net::Shutdown::Write).unwrap();
    let out = run.wait();
    let run = json(&out);
    assert_eq!(run["errors"], serde_json::json!([]), "{run}");
    assert_eq!(run["sources"][0]["records"], LINES, "{run}");
}
