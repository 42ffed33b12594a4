//! Two real processes over a named segment: the test binary re-executes itself as the
//! consumer, which attaches by name and checks every frame's sequence number, length and
//! checksum. Nothing may be lost, duplicated, reordered or corrupted.
//!
//! 100 000 frames by default; `CLASP_TWO_PROCESS_FRAMES` sets the count (`.ci/run` runs
//! 1 000 000 in an optimised build).
#![cfg(not(any(miri, loom)))]

use clasp_shmring::{Error, RingConfig, RingSpec, Segment, SegmentLayout, WaitPolicy};
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "CLASP_TWO_PROCESS_CHILD";

fn frames() -> u64 {
    std::env::var("CLASP_TWO_PROCESS_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// splitmix64: the frame contents and sizes, identical on both sides.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Frame `i`: [seq u64][checksum of the rest u64][body of 0..=300 bytes].
fn fill(i: u64, buf: &mut [u8]) {
    let mut state = mix(i);
    for b in buf[16..].iter_mut() {
        state = mix(state);
        *b = state as u8;
    }
    buf[..8].copy_from_slice(&i.to_le_bytes());
    let sum = fnv1a(&buf[16..]);
    buf[8..16].copy_from_slice(&sum.to_le_bytes());
}

fn len_of(i: u64) -> usize {
    16 + (mix(i ^ 0xABCD) % 301) as usize
}

fn layout() -> SegmentLayout {
    // A small ring, so the run laps it many times and both sides park and wake.
    SegmentLayout {
        doorbells: 1,
        rings: vec![RingSpec {
            config: RingConfig::new(16 * 1024),
            doorbell: 0,
        }],
        user_bytes: 0,
        park_mode: Default::default(),
    }
}

fn spawn_child(name: &str, role: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_process", "--nocapture", "--ignored"])
        .env(CHILD_ENV, format!("{role}:{name}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

#[test]
fn a_child_process_receives_every_frame_intact() {
    let name = format!("clasp-test-2proc-{}", std::process::id());
    let seg = Segment::create(&name, &layout()).unwrap();
    let mut p = seg.producer(0).unwrap();
    let child = spawn_child(&name, "consume");
    let n = frames();
    let policy = WaitPolicy::for_runnable_threads(2);
    let mut buf = vec![0u8; 400];
    for i in 0..n {
        let len = len_of(i);
        fill(i, &mut buf[..len]);
        loop {
            match p.push(&buf[..len]) {
                Ok(()) => break,
                Err(Error::Full { .. }) => p
                    .wait_for_space(len, policy, Some(Duration::from_secs(120)))
                    .unwrap(),
                Err(e) => panic!("frame {i}: {e}"),
            }
        }
    }
    drop(p);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    assert!(stdout.contains(&format!("received {n} frames")), "{stdout}");
}

#[test]
fn a_consumer_sees_its_producer_process_die() {
    let name = format!("clasp-test-2proc-dead-{}", std::process::id());
    let seg = Segment::create(&name, &layout()).unwrap();
    let mut c = seg.consumer(0).unwrap();
    let mut child = spawn_child(&name, "produce-then-hang");
    // The child registers as producer and sends one frame, then hangs until killed.
    c.wait(WaitPolicy::PARK, Some(Duration::from_secs(60)))
        .unwrap();
    assert_eq!(&*c.peek().unwrap().unwrap(), b"one");
    c.peek().unwrap().unwrap().release();
    child.kill().unwrap();
    child.wait().unwrap();
    match c.wait(WaitPolicy::PARK, Some(Duration::from_secs(60))) {
        Err(Error::PeerDead { pid }) => assert_eq!(pid, child.id()),
        other => panic!("expected PeerDead, got {other:?}"),
    }
}

/// The child side of the tests above.
#[test]
#[ignore = "helper process for the two-process tests"]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (role, name) = spec.split_once(':').unwrap();
    let seg = Segment::attach(name).unwrap();
    match role {
        "consume" => {
            let mut c = seg.consumer(0).unwrap();
            let policy = WaitPolicy::for_runnable_threads(2);
            let mut next = 0u64;
            loop {
                match c.wait(policy, Some(Duration::from_secs(120))) {
                    Ok(()) => {}
                    Err(Error::Closed) => break,
                    Err(e) => panic!("after {next} frames: {e}"),
                }
                c.pop_batch(64, |f| {
                    assert!(f.len() >= 16, "frame {next}: {} bytes", f.len());
                    let seq = u64::from_le_bytes(f[..8].try_into().unwrap());
                    assert_eq!(seq, next, "lost, duplicated or reordered");
                    assert_eq!(f.len(), len_of(seq), "frame {seq}: wrong length");
                    let sum = u64::from_le_bytes(f[8..16].try_into().unwrap());
                    assert_eq!(sum, fnv1a(&f[16..]), "frame {seq}: corrupted");
                    next += 1;
                })
                .unwrap();
            }
            println!("received {next} frames");
        }
        "produce-then-hang" => {
            let mut p = seg.producer(0).unwrap();
            p.push(b"one").unwrap();
            std::thread::sleep(Duration::from_secs(300));
        }
        other => panic!("unknown role {other}"),
    }
}
