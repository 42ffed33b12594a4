//! Shared memory a process can trust: exactly one claimer of a ring's end wins, however many
//! race for it (threads or processes), and positions another process scribbled on are a clear
//! `Corrupt` error when an end is taken, never an unaligned access or a panic.
#![cfg(not(any(miri, loom)))]

use clasp_shmring::{Error, RingConfig, RingSpec, Segment, SegmentLayout};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Barrier;

const CHILD_ENV: &str = "CLASP_CLAIM_CHILD";
/// Where ring 0's descriptor starts: after the 128-byte header and one 128-byte doorbell.
const DESC0: u64 = 256;

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("clasp-test-claim-{tag}-{}-{n}", std::process::id())
}

fn layout() -> SegmentLayout {
    SegmentLayout {
        doorbells: 1,
        rings: vec![RingSpec {
            config: RingConfig::new(4096),
            doorbell: 0,
        }],
        user_bytes: 0,
        park_mode: Default::default(),
    }
}

fn read_u64(name: &str, offset: u64) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(format!("/dev/shm/{name}")).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut b = [0u8; 8];
    f.read_exact(&mut b).unwrap();
    u64::from_ne_bytes(b)
}

fn poke_u64(name: &str, offset: u64, value: u64) {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/{name}"))
        .unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(&value.to_ne_bytes()).unwrap();
}

/// Makes ring 0's producer end look held by a process that died: the race that matters is
/// over an end whose old holder is gone (a claimer must never pair a new pid with the old
/// holder's start time and take the end from a live winner).
fn held_by_the_dead(name: &str) {
    let mut dead = Command::new("true").spawn().unwrap();
    let pid = dead.id() as u64;
    dead.wait().unwrap();
    // The producer's holder word follows its tail (8 bytes) and closed flag (4 + 4 padding).
    poke_u64(name, control(name) + 16, 12_345 << 22 | pid);
}

#[test]
fn of_threads_racing_for_an_end_exactly_one_wins() {
    for _ in 0..20 {
        let name = unique("threads");
        let seg = Segment::create(&name, &layout()).unwrap();
        held_by_the_dead(&name);
        let gate = Barrier::new(8);
        let wins: usize = std::thread::scope(|s| {
            let racers: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        // A winner keeps its end (the claim is the process's until closed).
                        seg.producer(0).map(std::mem::forget).is_ok()
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap() as usize).sum()
        });
        // The winner's end was forgotten, so the segment's mapping is never dropped and never
        // unlinks the name: remove it here, or every run leaves it in /dev/shm.
        drop(seg);
        let _ = std::fs::remove_file(format!("/dev/shm/{name}"));
        assert_eq!(wins, 1);
    }
}

#[test]
fn of_processes_racing_for_an_end_exactly_one_wins() {
    const RACERS: usize = 6;
    let name = unique("race");
    let seg = Segment::create(&name, &layout()).unwrap();
    held_by_the_dead(&name);
    let go = std::env::temp_dir().join(format!("{name}.go"));
    let mut children: Vec<_> = (0..RACERS)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "claim_child", "--nocapture", "--ignored"])
                .env(CHILD_ENV, format!("{name}:{}", go.display()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::write(&go, b"").unwrap();
    let mut results = Vec::new();
    let mut outs = Vec::new();
    for c in &mut children {
        let mut out = BufReader::new(c.stdout.take().unwrap());
        let mut line = String::new();
        // Each racer says how it fared, then holds its end until its stdin closes.
        while !line.starts_with("claim:") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "a racer ended early");
        }
        results.push(line.trim().to_owned());
        outs.push(out);
    }
    for (mut c, mut out) in children.into_iter().zip(outs) {
        drop(c.stdin.take());
        // Read the racer's closing lines so that it never writes to a closed pipe.
        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
        c.wait().unwrap();
    }
    let _ = std::fs::remove_file(&go);
    drop(seg);
    let wins = results.iter().filter(|r| *r == "claim: won").count();
    assert_eq!(wins, 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|r| r == "claim: won" || r == "claim: taken"),
        "{results:?}"
    );
}

/// One racer of the test above.
#[test]
#[ignore = "helper process for of_processes_racing_for_an_end_exactly_one_wins"]
fn claim_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (name, go) = spec.split_once(':').unwrap();
    let seg = Segment::attach(name).unwrap();
    while !std::path::Path::new(go).exists() {
        std::hint::spin_loop();
    }
    let claimed = seg.producer(0);
    let verdict = match &claimed {
        Ok(_) => "won",
        Err(Error::EndpointTaken { .. }) => "taken",
        Err(e) => panic!("{e}"),
    };
    println!("claim: {verdict}");
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
}

/// Ring 0's control block: the producer's line, then the consumer's (128 bytes each).
fn control(name: &str) -> u64 {
    read_u64(name, DESC0)
}

#[test]
fn a_misaligned_or_impossible_consumer_head_is_corrupt() {
    for head in [8u64, 4096 + 16, u64::MAX - 15] {
        let name = unique("head");
        let seg = Segment::create(&name, &layout()).unwrap();
        poke_u64(&name, control(&name) + 128, head);
        match seg.consumer(0) {
            Err(Error::Corrupt(m)) => assert!(m.contains("head"), "{m}"),
            other => panic!("head {head}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_misaligned_or_impossible_producer_tail_is_corrupt() {
    for tail in [24u64, 4096 * 2, u64::MAX] {
        let name = unique("tail");
        let seg = Segment::create(&name, &layout()).unwrap();
        poke_u64(&name, control(&name), tail);
        match seg.producer(0) {
            Err(Error::Corrupt(m)) => assert!(m.contains("tail"), "{m}"),
            other => panic!("tail {tail}: {:?}", other.map(|_| ())),
        }
        match seg.consumer(0) {
            Err(Error::Corrupt(m)) => assert!(m.contains("tail"), "{m}"),
            other => panic!("tail {tail}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_scribbled_holder_word_neither_panics_nor_blocks_a_free_end() {
    let name = unique("holder");
    let seg = Segment::create(&name, &layout()).unwrap();
    // The producer's holder word follows its tail (8 bytes) and closed flag (4 + 4 padding).
    poke_u64(&name, control(&name) + 16, u64::MAX);
    // Pid 2^22 - 1 with an impossible start time: no such process, so the end is free.
    assert!(seg.producer(0).is_ok());
}
