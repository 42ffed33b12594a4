use super::*;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("clasp-source-{name}-{}", std::process::id()));
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

/// Every record of `spec`, and its final report.
fn read_all(spec: &SourceSpec) -> (Vec<Vec<u8>>, SourceReport) {
    let mut feed = SourceFeed::open(spec).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match feed.poll().unwrap() {
            Polled::Record(r) => records.push(r.to_vec()),
            Polled::Pending => std::thread::sleep(Duration::from_millis(1)),
            Polled::End => return (records, feed.report()),
        }
        feed.admitted();
        assert!(Instant::now() < deadline, "the source did not end");
    }
}

#[test]
fn specs_parse_and_print_back() {
    for s in [
        "file:/a b",
        "lenprefix:x",
        "dir:d",
        "stdin:",
        "tcp:127.0.0.1:9000",
        "gen:",
    ] {
        assert_eq!(s.parse::<SourceSpec>().unwrap().to_string(), s);
    }
    for bad in [
        "file:",
        "stdin:x",
        "tcp:localhost",
        "tcp:127.0.0.1:0",
        "ftp:x",
        "file",
    ] {
        let e = bad.parse::<SourceSpec>().unwrap_err().to_string();
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn lines_are_records_and_an_overlong_line_is_counted() {
    let d = TempDir::new("lines");
    let mut text = b"one two\n\nthree".to_vec();
    text.splice(
        8..8,
        vec![b'x'; MAX_RECORD_BYTES + 1].into_iter().chain([b'\n']),
    );
    let p = d.file("a.txt", &text);
    let (records, report) = read_all(&SourceSpec::File(p.clone()));
    assert_eq!(
        records,
        vec![b"one two".to_vec(), b"".to_vec(), b"three".to_vec()]
    );
    assert_eq!(report.offset.records, 3);
    let at = report.offset.file.unwrap();
    assert_eq!((at.file_index, at.byte_offset), (0, text.len() as u64));
    assert_eq!(report.malformed[malformed::TOO_LONG], 1);
}

#[test]
fn lines_ended_by_crlf_are_records_without_the_carriage_return() {
    let d = TempDir::new("crlf");
    let text = b"one two\r\n\r\nthree\rfour\r\nfive\r\n\r";
    let p = d.file("a.txt", text);
    let (records, _) = read_all(&SourceSpec::File(p));
    let want: [&[u8]; 4] = [b"one two", b"", b"three\rfour", b"five"];
    assert_eq!(records, want.map(<[u8]>::to_vec));
}

#[test]
fn a_crlf_line_of_a_whole_record_is_kept_and_one_byte_more_is_counted() {
    let d = TempDir::new("crlf-limit");
    let record = vec![b'x'; MAX_RECORD_BYTES];
    let mut text = record.clone();
    text.extend_from_slice(b"\r\n");
    text.extend_from_slice(&record);
    text.extend_from_slice(b"y\r\n");
    // The last line, without a line end: a whole record and its carriage return.
    text.extend_from_slice(&record);
    text.push(b'\r');
    let (records, report) = read_all(&SourceSpec::File(d.file("a.txt", &text)));
    assert_eq!(records, vec![record.clone(), record]);
    assert_eq!(report.malformed[malformed::TOO_LONG], 1);
}

#[test]
fn length_prefixed_records_and_a_truncated_tail() {
    let d = TempDir::new("lenprefix");
    let mut bytes = Vec::new();
    for r in [&b"ab"[..], b"", b"line\nwith newline"] {
        bytes.extend_from_slice(&(r.len() as u32).to_le_bytes());
        bytes.extend_from_slice(r);
    }
    let whole = bytes.len() as u64;
    bytes.extend_from_slice(&(10u32).to_le_bytes());
    bytes.extend_from_slice(b"short");
    let (records, report) = read_all(&SourceSpec::LenPrefix(d.file("r.bin", &bytes)));
    assert_eq!(records.len(), 3);
    assert_eq!(records[2], b"line\nwith newline");
    assert_eq!(report.offset.file.unwrap().byte_offset, whole);
    assert_eq!(report.malformed[malformed::TRUNCATED], 1);
    // A prefix cut short.
    let (records, report) = read_all(&SourceSpec::LenPrefix(
        d.file("p.bin", &[1, 0, 0, 0, b'z', 7]),
    ));
    assert_eq!(records, vec![b"z".to_vec()]);
    assert_eq!(report.malformed[malformed::TRUNCATED], 1);
}

#[test]
fn a_directory_is_read_in_name_order() {
    let d = TempDir::new("dir");
    d.file("b", b"3\n4\n");
    d.file("a", b"1\n2");
    std::fs::create_dir(d.0.join("c-subdir")).unwrap();
    let (records, report) = read_all(&SourceSpec::Dir(d.0.clone()));
    assert_eq!(records, [b"1", b"2", b"3", b"4"].map(|r| r.to_vec()));
    let at = report.offset.file.unwrap();
    assert_eq!((at.file_index, at.byte_offset), (1, 4));
    assert!(at.path.ends_with("/b"), "{}", at.path);
}

#[test]
fn tcp_connections_are_read_until_none_is_left() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let mut feed = SourceFeed::open(&SourceSpec::Tcp(addr)).unwrap();
    assert_eq!(feed.poll().unwrap(), Polled::Pending);
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"a\nb\nc").unwrap();
    drop(c);
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match feed.poll().unwrap() {
            Polled::Record(_) => n += 1,
            Polled::Pending => std::thread::sleep(Duration::from_millis(1)),
            Polled::End => break,
        }
        feed.admitted();
        assert!(Instant::now() < deadline);
    }
    assert_eq!(n, 3);
    let report = feed.report();
    assert_eq!((report.offset.records, report.offset.file), (3, None));
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let e = SourceFeed::open(&SourceSpec::File("/nonexistent/x".into()))
        .err()
        .unwrap();
    assert!(e.to_string().contains("/nonexistent/x"), "{e}");
}

/// Every record of share `index` of `shares` of `spec`.
fn read_share(spec: &SourceSpec, index: u32, shares: u32) -> Vec<Vec<u8>> {
    let mut feed = SourceFeed::open_share(spec, Share { index, shares }).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match feed.poll().unwrap() {
            Polled::Record(r) => records.push(r.to_vec()),
            Polled::Pending => std::thread::sleep(Duration::from_millis(1)),
            Polled::End => return records,
        }
        feed.admitted();
        assert!(Instant::now() < deadline, "the source did not end");
    }
}

#[test]
fn shares_of_a_file_split_it_by_byte_range_at_line_boundaries() {
    let d = TempDir::new("shares");
    // Lines of every length from 0 to 40, some without letters, the last without a newline.
    let mut text = Vec::new();
    let mut want = Vec::new();
    for i in 0..300usize {
        let line: Vec<u8> = (0..(i * 7) % 41)
            .map(|j| b'a' + ((i + j) % 26) as u8)
            .collect();
        text.extend_from_slice(&line);
        text.push(b'\n');
        want.push(line);
    }
    text.extend_from_slice(b"last");
    want.push(b"last".to_vec());
    let spec = SourceSpec::File(d.file("lines.txt", &text));
    for shares in 1..=7 {
        let got: Vec<Vec<u8>> = (0..shares)
            .flat_map(|i| read_share(&spec, i, shares))
            .collect();
        assert_eq!(got, want, "{shares} shares");
    }
    // More shares than bytes: the empty ones read nothing.
    let tiny = SourceSpec::File(d.file("tiny.txt", b"a\nb\n"));
    let got: Vec<Vec<u8>> = (0..9).flat_map(|i| read_share(&tiny, i, 9)).collect();
    assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn shares_of_a_directory_split_it_by_file_and_streams_go_to_share_0() {
    let d = TempDir::new("dir-shares");
    for (name, text) in [("a", "1\n"), ("b", "2\n"), ("c", "3\n")] {
        d.file(name, text.as_bytes());
    }
    let spec = SourceSpec::Dir(d.0.clone());
    assert_eq!(read_share(&spec, 0, 2), [b"1", b"3"].map(|r| r.to_vec()));
    assert_eq!(read_share(&spec, 1, 2), [b"2"].map(|r| r.to_vec()));
    let lp = SourceSpec::LenPrefix(d.file("r.bin", &[1, 0, 0, 0, b'x']));
    assert_eq!(read_share(&lp, 0, 2), vec![b"x".to_vec()]);
    assert!(read_share(&lp, 1, 2).is_empty());
}

#[test]
fn the_offset_is_that_of_the_last_record_admitted_not_polled() {
    let d = TempDir::new("admitted");
    let p = d.file("a.txt", b"one\ntwo\n");
    let mut feed = SourceFeed::open(&SourceSpec::File(p)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while feed.poll().unwrap() == Polled::Pending {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    feed.admitted();
    assert_eq!(feed.poll().unwrap(), Polled::Record(b"two"));
    // "two" is polled and not admitted (a run that stopped): a replay must read it again.
    let report = feed.report();
    assert_eq!(report.offset.records, 1);
    assert_eq!(report.offset.file.unwrap().byte_offset, 4);
}

#[test]
fn a_file_that_is_a_fifo_is_opened_once_and_read_whole_by_share_0() {
    let d = TempDir::new("fifo");
    let path = d.0.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .unwrap();
    // The writer's open waits for a reader: an open by the check, or by a share that does
    // not read it, would let it write into a pipe that is then closed, losing the lines.
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(&path)?;
            w.write_all(b"a\nb\nc\n")
        })
    };
    let spec = SourceSpec::File(path);
    spec.check().unwrap();
    assert!(!spec.is_replayable(), "a pipe cannot be read again");
    assert!(read_share(&spec, 1, 2).is_empty());
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !writer.is_finished(),
        "the FIFO was opened before its reader"
    );
    let (records, _) = read_all(&spec);
    assert_eq!(records, [b"a", b"b", b"c"].map(|r| r.to_vec()));
    writer.join().unwrap().unwrap();
}

#[test]
fn a_file_whose_size_reads_0_is_read_to_its_end() {
    // Most of /proc says 0 bytes and holds more.
    let spec = SourceSpec::File("/proc/self/status".into());
    assert_eq!(std::fs::metadata("/proc/self/status").unwrap().len(), 0);
    let (records, _) = read_all(&spec);
    assert!(
        records.iter().any(|r| r.starts_with(b"Name:")),
        "{} records",
        records.len()
    );
}

#[test]
fn a_directory_as_a_file_source_is_refused_up_front() {
    let d = TempDir::new("file-dir");
    let e = SourceSpec::File(d.0.clone())
        .check()
        .unwrap_err()
        .to_string();
    assert!(e.contains("dir:PATH"), "{e}");
}

#[test]
fn a_file_truncated_while_it_is_read_ends_the_source_with_an_error() {
    truncated_while_read("truncated-file", |path| {
        SourceSpec::File(path.to_path_buf())
    });
}

#[test]
fn a_file_of_a_dir_source_truncated_while_it_is_read_ends_the_source_with_an_error() {
    // Read to its end (not cut by size as a `file:` is), it ended quietly with a cut line.
    truncated_while_read("truncated-dir", |path| {
        SourceSpec::Dir(path.parent().unwrap().to_path_buf())
    });
}

/// A source made by `spec` of a file of lines that is cut short while it is read.
fn truncated_while_read(name: &str, spec: impl Fn(&std::path::Path) -> SourceSpec) {
    let d = TempDir::new(name);
    // 4 MiB of lines: more than the reader's queue of batches holds, so it waits for the
    // feed to be polled before it reaches the end.
    let line = b"one two three four five six seven eight nine ten eleven twelve\n";
    let text: Vec<u8> = line
        .iter()
        .copied()
        .cycle()
        .take(line.len() * 65_536)
        .collect();
    let path = d.file("lines.txt", &text);
    let mut feed = SourceFeed::open(&spec(&path)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut records = 0u64;
    let e = loop {
        match feed.poll() {
            Ok(Polled::Record(r)) => {
                assert_eq!(
                    r,
                    &line[..line.len() - 1],
                    "a cut line was taken for a record"
                );
                records += 1;
                // Cut short once the reader has it open (its first record is here).
                if records == 1 {
                    let f = std::fs::OpenOptions::new().write(true).open(&path);
                    f.unwrap().set_len(1000).unwrap();
                }
            }
            Ok(Polled::Pending) => std::thread::sleep(Duration::from_millis(1)),
            Ok(Polled::End) => panic!("the source ended quietly after {records} records"),
            Err(e) => break e.to_string(),
        }
        feed.admitted();
        assert!(Instant::now() < deadline, "the source did not end");
    };
    assert!(e.contains("truncated while it was read"), "{e}");
    assert!(e.contains("lines.txt"), "{e}");
    assert!(records < 65_536, "{records} records");
}

#[test]
fn a_file_that_says_more_bytes_than_it_holds_is_read_without_an_error() {
    // sysfs says 4 096 bytes for every attribute and holds a line: its end comes early, and it
    // did not shrink.
    let path = std::path::Path::new("/sys/class/net/lo/address");
    let Ok(meta) = std::fs::metadata(path) else {
        eprintln!("skipped: no {} here", path.display());
        return;
    };
    assert!(
        meta.len() > 100,
        "{} says {} bytes",
        path.display(),
        meta.len()
    );
    let (records, _) = read_all(&SourceSpec::File(path.into()));
    assert_eq!(records.len(), 1, "{records:?}");
}
