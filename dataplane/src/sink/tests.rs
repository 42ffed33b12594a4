use super::target::whole_line_pieces;
use super::*;
use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn line(i: usize, width: usize) -> Vec<u8> {
    let mut l = format!("{{\"n\":{i},\"pad\":\"").into_bytes();
    l.resize(l.len() + width, b'x');
    l.extend_from_slice(b"\"}\n");
    l
}

#[test]
fn targets_parse_and_print_back() {
    for s in [
        "file:/tmp/a b.jsonl",
        "stdout:",
        "tcp:127.0.0.1:9000",
        "tcp:[::1]:1",
    ] {
        assert_eq!(SinkTarget::parse(s).unwrap().to_string(), s);
    }
    for s in [
        "", "file:", "stdout:x", "tcp:", "tcp:host", "tcp::1", "kafka:x", "nocolon",
    ] {
        let e = SinkTarget::parse(s).unwrap_err().to_string();
        assert!(e.contains("bad sink"), "{s}: {e}");
    }
    let p = SinkTarget::file_path(std::path::Path::new("/x/out.jsonl"), Some(3));
    assert_eq!(p, std::path::Path::new("/x/out.jsonl.w3"));
}

#[test]
fn pieces_hold_whole_lines_under_the_limit() {
    let chunk = b"aaa\nbb\ncccccccc\nd\n";
    let pieces: Vec<&[u8]> = whole_line_pieces(chunk, 7).collect();
    assert_eq!(pieces, [&b"aaa\nbb\n"[..], &b"cccccccc\n"[..], &b"d\n"[..]]);
    assert_eq!(whole_line_pieces(b"", 7).count(), 0);
}

#[test]
fn writers_of_one_file_append_whole_lines() {
    let dir = tempfile_dir();
    let path = dir.join("out.jsonl");
    let target = SinkTarget::File(path.clone());
    target.truncate_shared().unwrap();
    // Two sinks (two workers) and two writers each (executors), all appending.
    let sinks: Vec<Sink> = (0..2)
        .map(|_| Sink::open(&target, None, 2, 4096).unwrap())
        .collect();
    std::thread::scope(|s| {
        for (w, sink) in sinks.iter().enumerate() {
            for e in 0..2 {
                let mut writer = sink.writer();
                s.spawn(move || {
                    for i in 0..500 {
                        writer
                            .buffer()
                            .extend_from_slice(&line(w * 10_000 + e * 1000 + i, 40));
                        writer.lines_added().unwrap();
                    }
                    writer.flush().unwrap();
                });
            }
        }
    });
    for sink in sinks {
        sink.close().unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let mut seen = 0;
    for l in text.lines() {
        let v: serde_json_lite::Line = serde_json_lite::parse(l);
        assert_eq!(v.pad, 40, "{l}");
        seen += 1;
    }
    assert_eq!(seen, 2000);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A reader taking ~1 KiB/s: the executor's writes wait for it (backpressure) and what it
/// handed over stays bounded; once the reader speeds up, every line arrives, in order.
#[test]
fn a_slow_tcp_reader_slows_the_writer_and_memory_stays_bounded() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // A small receive window (set before the connection is made, so it is what the peer is
    // told), so the kernel's buffers do not absorb the test's bytes.
    rustix::net::sockopt::set_socket_recv_buffer_size(&listener, 4096).unwrap();
    let addr = listener.local_addr().unwrap();
    let fast = Arc::new(AtomicBool::new(false));
    let read = Arc::new(AtomicUsize::new(0));
    let (f, r) = (Arc::clone(&fast), Arc::clone(&read));
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                return got;
            }
            got.extend_from_slice(&buf[..n]);
            r.fetch_add(n, Ordering::Relaxed);
            if !f.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    });
    let target = SinkTarget::Tcp(addr.to_string());
    let buffer_bytes = 4096;
    let sink = Sink::open(&target, None, 1, buffer_bytes).unwrap();
    let mut w = sink.writer();
    let total_lines = 40_000;
    let handed = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&handed);
    let executor = std::thread::spawn(move || {
        for i in 0..total_lines {
            let l = line(i, 30);
            w.buffer().extend_from_slice(&l);
            w.lines_added().unwrap();
            assert!(w.buffer().len() < buffer_bytes, "an executor buffer grew");
            h.fetch_add(l.len(), Ordering::Relaxed);
        }
        w.flush().unwrap();
    });
    std::thread::sleep(Duration::from_secs(3));
    let (handed_now, read_now) = (handed.load(Ordering::Relaxed), read.load(Ordering::Relaxed));
    let total_bytes = total_lines * line(0, 30).len();
    assert!(
        !executor.is_finished(),
        "the writer did not wait for the reader: handed {handed_now}, read {read_now}"
    );
    assert!(
        read_now < 8 << 10,
        "the reader was not slow: {read_now} bytes"
    );
    // What was handed over and not read sits in the sink's buffer and the kernel's socket
    // buffers (a few hundred KiB at most), not in a queue that grows.
    assert!(
        handed_now - read_now < 1 << 20 && handed_now < total_bytes / 2,
        "handed {handed_now} of {total_bytes} bytes, read {read_now}"
    );
    fast.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !executor.is_finished() {
        assert!(Instant::now() < deadline, "the writer never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    executor.join().unwrap();
    sink.close().unwrap();
    let got = reader.join().unwrap();
    let lines: Vec<&[u8]> = got
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), total_lines);
    assert!(lines[total_lines - 1].starts_with(format!("{{\"n\":{}", total_lines - 1).as_bytes()));
}

#[test]
fn a_full_disk_is_an_error_naming_the_sink() {
    let target = SinkTarget::File("/dev/full".into());
    let sink = Sink::open(&target, None, 1, 4096).unwrap();
    let mut w = sink.writer();
    w.buffer().extend_from_slice(&line(1, 10));
    let mut first = None;
    for _ in 0..100 {
        if let Err(e) = w.flush() {
            first = Some(e);
            break;
        }
        w.buffer().extend_from_slice(&line(1, 10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = first.expect("the error reaches the executor");
    assert!(e.contains("sink file:/dev/full: write"), "{e}");
    // Reported once; later lines are discarded, never waited on.
    for _ in 0..10_000 {
        w.buffer().extend_from_slice(&line(1, 10));
        assert_eq!(w.lines_added(), Ok(()));
    }
    drop(w);
    let e = sink.close().unwrap_err().to_string();
    assert!(e.contains("No space left"), "{e}");
}

/// A barrier passes once every line handed over before it is in the file; behind a failed
/// write it is the sink's error (a checkpoint then fails instead of counting lost lines).
#[test]
fn a_barrier_passes_behind_the_lines_before_it_or_fails_with_the_sink() {
    let dir = tempfile_dir();
    let path = dir.join("out.jsonl");
    let target = SinkTarget::File(path.clone());
    target.truncate_shared().unwrap();
    let sink = Sink::open(&target, None, 1, 4096).unwrap();
    let mut w = sink.writer();
    for i in 0..300 {
        w.buffer().extend_from_slice(&line(i, 20));
        w.lines_added().unwrap();
    }
    w.flush().unwrap();
    sink.barrier().wait().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text.lines().count(),
        300,
        "every line before the barrier written"
    );
    drop(w);
    sink.close().unwrap();
    std::fs::remove_dir_all(dir).unwrap();

    // A device holds nothing to sync: its barrier passes (`fdatasync` would say EINVAL).
    let null = Sink::open(&SinkTarget::File("/dev/null".into()), None, 1, 4096).unwrap();
    let mut w = null.writer();
    w.buffer().extend_from_slice(&line(1, 10));
    w.flush().unwrap();
    null.barrier().wait().unwrap();
    drop(w);
    null.close().unwrap();

    let full = Sink::open(&SinkTarget::File("/dev/full".into()), None, 1, 4096).unwrap();
    let mut w = full.writer();
    w.buffer().extend_from_slice(&line(1, 10));
    let _ = w.flush();
    let e = full.barrier().wait().unwrap_err();
    assert!(e.contains("sink file:/dev/full: write"), "{e}");
    // Every later barrier says so too.
    assert!(full.barrier().wait().is_err());
    drop(w);
    assert!(full.close().is_err());
}

#[test]
fn a_peer_that_goes_away_is_an_error_naming_the_sink() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let target = SinkTarget::Tcp(addr.to_string());
    let sink = Sink::open(&target, None, 1, 1 << 16).unwrap();
    drop(listener.accept().unwrap());
    drop(listener);
    let mut w = sink.writer();
    let deadline = Instant::now() + Duration::from_secs(10);
    let e = loop {
        w.buffer().extend_from_slice(&line(1, 1000));
        if let Err(e) = w.flush() {
            break e;
        }
        assert!(Instant::now() < deadline, "no error");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(e.contains(&format!("sink tcp:{addr}: write")), "{e}");
    drop(w);
    assert!(sink.close().is_err());
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = Sink::open(&SinkTarget::Tcp(addr.to_string()), None, 1, 4096)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&format!("sink tcp:{addr}: connect")), "{e}");
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "clasp-sink-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The two fields the shared-file test checks, read without a JSON dependency.
mod serde_json_lite {
    pub struct Line {
        pub pad: usize,
    }
    pub fn parse(l: &str) -> Line {
        assert!(l.starts_with("{\"n\":") && l.ends_with("\"}"), "{l}");
        let pad = l
            .split("\"pad\":\"")
            .nth(1)
            .unwrap()
            .trim_end_matches("\"}");
        assert!(pad.bytes().all(|b| b == b'x'), "{l}");
        Line { pad: pad.len() }
    }
}

/// A reader that connects and never reads: once both ends' buffers are full, the write fails
/// after the stall (here 1 s) naming it, rather than waiting on (or timing out once per
/// partial send).
#[test]
fn a_reader_that_takes_nothing_is_an_error_after_the_stall() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (_deaf, _) = l.accept().unwrap();
    s.set_write_timeout(Some(super::target::TCP_SEND_WAIT))
        .unwrap();
    let chunk = vec![b'x'; 64 << 20];
    let started = Instant::now();
    let e = super::target::write_tcp(&mut s, &chunk, Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("took nothing for 1 s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60), "bounded");
}

#[test]
fn files_under_proc_and_sys_are_refused_as_sinks() {
    for p in [
        "/proc/version",
        "/sys/kernel/mm/nothing",
        "/proc/sys/vm/new",
    ] {
        let why = super::unusable_file(std::path::Path::new(p)).expect(p);
        assert!(why.contains("/proc or /sys"), "{p}: {why}");
    }
    let ours = std::env::temp_dir().join("clasp-sink-ok.jsonl");
    assert_eq!(super::unusable_file(&ours), None);
}
