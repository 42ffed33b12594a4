//! Segments on real shared memory: create, attach, validation, stale owners, endpoints.
#![cfg(not(any(miri, loom)))]

use clasp_shmring::{
    Error, Pass, RingConfig, RingSpec, Segment, SegmentLayout, WaitPolicy, frame_bytes,
};
use std::process::Command;

fn unique(tag: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("clasp-test-{tag}-{}-{n}", std::process::id())
}

fn layout(rings: usize) -> SegmentLayout {
    SegmentLayout {
        doorbells: 1,
        rings: (0..rings)
            .map(|_| RingSpec {
                config: RingConfig::new(4096),
                doorbell: 0,
            })
            .collect(),
        user_bytes: 256,
        park_mode: Default::default(),
    }
}

/// Every doorbell of a segment takes the layout's park mode, the rings' space doorbells (where a
/// producer waits for room) too: they once kept the default, so an executor waiting for room
/// paid a `membarrier` on a machine whose layout had chosen plain fences.
#[test]
fn every_doorbell_takes_the_layout_park_mode() {
    use clasp_shmring::ParkMode;
    for mode in [ParkMode::Symmetric, ParkMode::Asymmetric] {
        let seg = Segment::create_anonymous(&SegmentLayout {
            park_mode: mode,
            ..layout(2)
        })
        .unwrap();
        assert_eq!(seg.doorbell(0).unwrap().mode(), mode);
        for ring in 0..2 {
            assert_eq!(
                seg.space_doorbell(ring).unwrap().mode(),
                mode,
                "ring {ring}"
            );
        }
    }
}

#[test]
fn create_attach_and_exchange_frames() {
    let name = unique("basic");
    let owner = Segment::create(&name, &layout(2)).unwrap();
    let meta = std::fs::metadata(format!("/dev/shm/{name}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len() as usize, owner.len_bytes());

    let other = Segment::attach(&name).unwrap();
    assert_eq!(other.ring_count(), 2);
    assert_eq!(other.ring_config(1).unwrap(), RingConfig::new(4096));
    let mut p = owner.producer(1).unwrap();
    let mut c = other.consumer(1).unwrap();
    p.push(b"hello").unwrap();
    c.wait(WaitPolicy::PARK, None).unwrap();
    let f = c.peek().unwrap().unwrap();
    assert_eq!(&*f, b"hello");
    f.release();
    drop((p, c, other));
    assert!(Segment::owner_alive(&name).unwrap());
    drop(owner);
    assert!(
        Segment::attach(&name).is_err(),
        "the owner unlinks the segment"
    );
}

#[test]
fn an_endpoint_has_one_live_holder() {
    let name = unique("claim");
    let seg = Segment::create(&name, &layout(1)).unwrap();
    let _p = seg.producer(0).unwrap();
    assert!(matches!(
        seg.producer(0),
        Err(Error::EndpointTaken {
            side: "producer",
            ..
        })
    ));
    let _c = seg.consumer(0).unwrap();
    assert!(matches!(seg.consumer(0), Err(Error::EndpointTaken { .. })));
    assert!(matches!(seg.producer(7), Err(Error::InvalidConfig(_))));
}

#[test]
fn creating_a_live_segment_twice_is_refused() {
    let name = unique("twice");
    let _seg = Segment::create(&name, &layout(1)).unwrap();
    match Segment::create(&name, &layout(1)) {
        Err(Error::Exists { owner_pid, .. }) => assert_eq!(owner_pid, std::process::id()),
        other => panic!("expected Exists, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn bad_layouts_are_refused_before_anything_is_created() {
    let name = unique("badlayout");
    let mut l = layout(1);
    l.rings[0].doorbell = 3;
    assert!(matches!(
        Segment::create(&name, &l),
        Err(Error::InvalidConfig(_))
    ));
    let l = SegmentLayout {
        doorbells: 0,
        rings: vec![],
        user_bytes: 0,
        park_mode: Default::default(),
    };
    assert!(matches!(
        Segment::create(&name, &l),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Segment::create("a/b", &layout(1)),
        Err(Error::InvalidConfig(_))
    ));
    assert!(!std::path::Path::new(&format!("/dev/shm/{name}")).exists());
}

/// Overwrites `bytes` at `offset` of the named segment's file.
fn poke(name: &str, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/{name}"))
        .unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn a_corrupt_or_mismatched_header_is_refused() {
    // (offset, bytes, what the error must mention)
    let cases: &[(u64, &[u8], &str)] = &[
        (0, b"NOTCLASP", "magic"),
        (8, &99u32.to_ne_bytes(), "version"),
        (16, &1u64.to_ne_bytes(), "layout"),
        (24, &12345u64.to_ne_bytes(), "bytes"),
        (32, &0u32.to_ne_bytes(), "doorbells"),
        (36, &100_000u32.to_ne_bytes(), "rings"),
        (48, &u64::MAX.to_ne_bytes(), "outside"),
        (88, &0u32.to_ne_bytes(), "ready"),
    ];
    for (offset, bytes, what) in cases {
        let name = unique("corrupt");
        let seg = Segment::create(&name, &layout(2)).unwrap();
        poke(&name, *offset, bytes);
        match Segment::attach(&name) {
            Err(Error::SegmentMismatch(m)) => {
                assert!(
                    m.contains(what),
                    "offset {offset}: {m:?} should mention {what}"
                )
            }
            other => panic!(
                "offset {offset}: expected a mismatch, got {:?}",
                other.map(|_| ())
            ),
        }
        drop(seg);
    }
}

#[test]
fn a_corrupt_ring_descriptor_is_refused() {
    let name = unique("desc");
    let seg = Segment::create(&name, &layout(2)).unwrap();
    // The descriptor table follows the header (96 bytes, padded to 128) and one doorbell (128).
    let desc1 = 256 + 40;
    poke(&name, desc1 + 16, &3000u64.to_ne_bytes()); // capacity not a power of two
    assert!(
        matches!(Segment::attach(&name), Err(Error::SegmentMismatch(m)) if m.contains("ring 1"))
    );
    poke(&name, desc1 + 16, &4096u64.to_ne_bytes());
    poke(&name, desc1, &0u64.to_ne_bytes()); // control block overlapping the tables
    assert!(
        matches!(Segment::attach(&name), Err(Error::SegmentMismatch(m)) if m.contains("ring 1"))
    );
    drop(seg);
}

/// Where ring 0's data region starts in segment `name`: the second field of ring 0's
/// descriptor (after the 128-byte header and one 128-byte doorbell).
fn ring0_data_offset(name: &str) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let desc0 = 256u64;
    let mut f = std::fs::File::open(format!("/dev/shm/{name}")).unwrap();
    f.seek(SeekFrom::Start(desc0 + 8)).unwrap();
    let mut b = [0u8; 8];
    f.read_exact(&mut b).unwrap();
    u64::from_ne_bytes(b)
}

#[test]
fn a_corrupt_frame_header_is_an_error_not_a_crash() {
    let name = unique("frame");
    let seg = Segment::create(&name, &layout(1)).unwrap();
    let mut p = seg.producer(0).unwrap();
    let mut c = seg.consumer(0).unwrap();
    p.push(b"ok").unwrap();
    // Ring 0's data follows its control block (384 bytes) after the tables: find it by
    // reading the frame back, then corrupt the length of the next one.
    assert_eq!(&*c.peek().unwrap().unwrap(), b"ok");
    // The frame header is the first word of the data region.
    let data = ring0_data_offset(&name);
    poke(&name, data, &((1u64 << 32) | 0x00FF_FFFF).to_ne_bytes());
    assert!(matches!(c.peek(), Err(Error::Corrupt(_))));
    poke(&name, data, &(7u64 << 40).to_ne_bytes());
    assert!(matches!(c.peek(), Err(Error::Corrupt(_))));
}

#[test]
fn a_corrupt_frame_ends_a_two_pass_batch_after_the_frames_before_it() {
    let name = unique("ahead");
    let seg = Segment::create(&name, &layout(1)).unwrap();
    let mut p = seg.producer(0).unwrap();
    let mut c = seg.consumer(0).unwrap();
    for f in [b"a", b"b", b"c"] {
        p.push(f).unwrap();
    }
    // The third frame's header follows two frames of one byte.
    let third = ring0_data_offset(&name) + 2 * frame_bytes(1) as u64;
    poke(&name, third, &(7u64 << 40).to_ne_bytes());
    let mut seen = Vec::new();
    let result = c.pop_batch_ahead(10, |pass, f| seen.push((pass, f.to_vec())));
    assert!(matches!(result, Err(Error::Corrupt(_))), "{result:?}");
    let (a, b) = (b"a".to_vec(), b"b".to_vec());
    let want = [
        (Pass::Ahead, a.clone()),
        (Pass::Ahead, b.clone()),
        (Pass::Take, a),
        (Pass::Take, b),
    ];
    assert_eq!(seen, want);
}

/// A segment larger than the memory the machine has available is refused as no space, before
/// `fallocate` reserves it: a memfd's pages are the machine's memory, and reserving more than
/// it has would end processes by the kernel's out-of-memory killer.
#[test]
fn a_segment_larger_than_the_memory_available_is_refused_as_no_space() {
    // 30 rings of 2 GiB: 60 GiB, within the largest segment.
    let huge = SegmentLayout {
        doorbells: 1,
        rings: (0..30)
            .map(|_| RingSpec {
                config: RingConfig::new(1 << 31),
                doorbell: 0,
            })
            .collect(),
        user_bytes: 0,
        park_mode: Default::default(),
    };
    match clasp_shmring::available_memory_bytes() {
        Some(available) if available < 60 << 30 => {}
        other => {
            eprintln!("skipped: this machine has {other:?} bytes available, 60 GiB fit");
            return;
        }
    }
    let e = Segment::create_anonymous(&huge).map(drop).unwrap_err();
    assert!(matches!(e, Error::NoSpace { .. }), "{e}");
    assert!(e.to_string().contains("memory available"), "{e}");
}

#[test]
fn anonymous_segments_work_in_process() {
    let seg = Segment::create_anonymous(&layout(1)).unwrap();
    let fd = seg.inheritable_fd().unwrap();
    let again = Segment::attach_fd(fd).unwrap();
    let mut p = seg.producer(0).unwrap();
    let mut c = again.consumer(0).unwrap();
    p.push(b"memfd").unwrap();
    assert_eq!(&*c.peek().unwrap().unwrap(), b"memfd");
}

#[test]
fn a_killed_owners_segment_is_stale_and_cleaned_up() {
    let name = unique("stale");
    // A child process creates the segment and is killed with SIGKILL: nothing unlinks it.
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "stale_owner_child", "--nocapture", "--ignored"])
        .env("CLASP_STALE_SEGMENT", &name)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let path = format!("/dev/shm/{name}");
    let start = std::time::Instant::now();
    while !Segment::owner_alive(&name).unwrap_or(false) {
        assert!(
            start.elapsed().as_secs() < 60,
            "the child never created its segment"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(matches!(
        Segment::create(&name, &layout(1)),
        Err(Error::Exists { .. })
    ));
    assert!(
        !Segment::remove_stale(&name).unwrap(),
        "a live owner's segment is not stale"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        std::path::Path::new(&path).exists(),
        "SIGKILL leaves the segment behind"
    );
    assert!(!Segment::owner_alive(&name).unwrap());
    assert!(Segment::remove_stale(&name).unwrap());
    assert!(!std::path::Path::new(&path).exists());

    // create() replaces a stale segment by itself.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stale_owner_child", "--nocapture", "--ignored"])
        .env("CLASP_STALE_SEGMENT", &name)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while !Segment::owner_alive(&name).unwrap_or(false) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let seg = Segment::create(&name, &layout(1)).unwrap();
    assert!(Segment::owner_alive(&name).unwrap());
    drop(seg);
}

/// Run only as the child of `a_killed_owners_segment_is_stale_and_cleaned_up`.
#[test]
#[ignore = "helper process for the stale-segment test"]
fn stale_owner_child() {
    let Ok(name) = std::env::var("CLASP_STALE_SEGMENT") else {
        return;
    };
    let _seg = Segment::create(&name, &layout(1)).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(120));
}
