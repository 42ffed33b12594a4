//! Behaviour of the ring on the heap backing (the same code runs on shared memory).
#![cfg(not(loom))]

use clasp_shmring::heap::{self, HeapRing};
use clasp_shmring::{
    Consumer, Error, FRAME_HEADER_BYTES, FanIn, Producer, RingConfig, WaitPolicy, frame_bytes,
};
use std::sync::Arc;
use std::time::Duration;

fn ring(capacity: usize) -> (Producer<HeapRing>, Consumer<HeapRing>) {
    heap::channel(RingConfig::new(capacity)).unwrap()
}

fn pop(c: &mut Consumer<HeapRing>) -> Option<Vec<u8>> {
    let frame = c.peek().unwrap()?;
    let v = frame.to_vec();
    frame.release();
    Some(v)
}

#[test]
fn frames_come_out_in_order_with_their_bytes() {
    let (mut p, mut c) = ring(1024);
    assert!(pop(&mut c).is_none());
    for i in 0..5u8 {
        p.push(&vec![i; i as usize * 7]).unwrap();
    }
    for i in 0..5u8 {
        assert_eq!(pop(&mut c).unwrap(), vec![i; i as usize * 7]);
    }
    assert!(pop(&mut c).is_none());
}

#[test]
fn zero_length_frames_are_frames() {
    let (mut p, mut c) = ring(64);
    p.push(&[]).unwrap();
    assert_eq!(pop(&mut c).unwrap(), Vec::<u8>::new());
    assert!(pop(&mut c).is_none());
}

#[test]
fn frames_wrap_around_many_laps() {
    let (mut p, mut c) = ring(256);
    let mut next_out = 0u32;
    for i in 0..10_000u32 {
        let len = (i as usize * 13) % 100;
        let mut payload = vec![0u8; len.max(4)];
        payload[..4].copy_from_slice(&i.to_le_bytes());
        loop {
            match p.push(&payload) {
                Ok(()) => break,
                Err(Error::Full { .. }) => {
                    let got = pop(&mut c).unwrap();
                    assert_eq!(u32::from_le_bytes(got[..4].try_into().unwrap()), next_out);
                    next_out += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    while let Some(got) = pop(&mut c) {
        assert_eq!(u32::from_le_bytes(got[..4].try_into().unwrap()), next_out);
        next_out += 1;
    }
    assert_eq!(next_out, 10_000);
}

#[test]
fn too_large_full_and_invalid_config_are_distinct_errors() {
    let (mut p, mut c) = ring(256);
    let max = p.config().max_frame_bytes;
    assert_eq!(max, 128 - FRAME_HEADER_BYTES);
    assert!(matches!(
        p.push(&vec![0; max + 1]),
        Err(Error::FrameTooLarge { .. })
    ));
    // Fill: each frame of 48 bytes takes 64.
    let mut pushed = 0;
    while p.push(&[1; 48]).is_ok() {
        pushed += 1;
    }
    assert_eq!(pushed, 256 / frame_bytes(48));
    assert!(matches!(p.push(&[1; 48]), Err(Error::Full { .. })));
    assert!(pop(&mut c).is_some());
    p.push(&[1; 48]).unwrap();
    assert!(matches!(
        heap::channel(RingConfig {
            capacity_bytes: 100,
            max_frame_bytes: 10
        }),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        heap::channel(RingConfig {
            capacity_bytes: 128,
            max_frame_bytes: 64
        }),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn a_maximal_frame_always_fits_once_the_ring_drains() {
    let (mut p, mut c) = ring(128);
    let max = p.config().max_frame_bytes;
    for shift in 0..8 {
        for _ in 0..shift {
            p.push(&[7]).unwrap();
            pop(&mut c).unwrap();
        }
        p.push(&vec![9; max]).unwrap();
        assert_eq!(pop(&mut c).unwrap(), vec![9; max]);
    }
}

#[test]
fn deferred_frames_appear_together_on_publish() {
    let (mut p, mut c) = ring(1024);
    for i in 0..4u8 {
        let mut g = p.reserve(3).unwrap();
        g.copy_from_slice(&[i; 3]);
        g.commit_deferred();
    }
    assert!(pop(&mut c).is_none(), "nothing is visible before publish");
    p.publish();
    let mut seen = Vec::new();
    assert_eq!(c.pop_batch(10, |f| seen.push(f[0])).unwrap(), 4);
    assert_eq!(seen, [0, 1, 2, 3]);
}

#[test]
fn an_uncommitted_grant_is_abandoned() {
    let (mut p, mut c) = ring(1024);
    {
        let _abandoned = p.reserve(10).unwrap();
    }
    assert!(pop(&mut c).is_none());
    p.push(b"x").unwrap();
    assert_eq!(pop(&mut c).unwrap(), b"x");
}

#[test]
fn an_abandoned_grant_past_the_end_of_a_lap_leaves_no_skip_marker_behind() {
    let (mut p, mut c) = ring(256);
    // 3 × 64 bytes: tail at 192, 64 bytes to the end of the lap.
    for i in 0..3u8 {
        p.push(&[i; 48]).unwrap();
        assert_eq!(pop(&mut c).unwrap(), [i; 48]);
    }
    {
        // 96 bytes do not fit before the end: this reservation skips to the next lap.
        let _abandoned = p.reserve(80).unwrap();
    }
    // A frame that fits before the end goes where the skip marker was.
    p.push(b"fits").unwrap();
    assert_eq!(pop(&mut c).unwrap(), b"fits");
    p.push(&[7; 80]).unwrap();
    assert_eq!(pop(&mut c).unwrap(), [7; 80]);
}

#[test]
fn deferred_release_frees_space_on_publish() {
    let (mut p, mut c) = ring(128);
    p.push(&[1; 40]).unwrap();
    p.push(&[1; 40]).unwrap();
    assert!(matches!(p.push(&[1; 40]), Err(Error::Full { .. })));
    c.peek().unwrap().unwrap().release_deferred();
    assert!(matches!(p.push(&[1; 40]), Err(Error::Full { .. })));
    c.publish_release();
    p.push(&[1; 40]).unwrap();
}

#[test]
fn closing_is_seen_after_the_last_frame() {
    let (mut p, mut c) = ring(256);
    p.push(b"last").unwrap();
    drop(p);
    c.wait(WaitPolicy::PARK, None).unwrap();
    assert_eq!(pop(&mut c).unwrap(), b"last");
    assert!(matches!(c.wait(WaitPolicy::PARK, None), Err(Error::Closed)));

    let (mut p, c) = ring(256);
    drop(c);
    assert!(p.is_closed());
    assert!(matches!(
        p.wait_for_space(8, WaitPolicy::PARK, None),
        Err(Error::Closed)
    ));
}

#[test]
fn a_wait_times_out() {
    let (_p, mut c) = ring(256);
    assert!(matches!(
        c.wait(WaitPolicy::PARK, Some(Duration::from_millis(20))),
        Err(Error::TimedOut { .. })
    ));
}

#[test]
fn a_parked_consumer_is_woken_and_a_parked_producer_too() {
    let (mut p, mut c) = ring(128);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        loop {
            match c.wait(WaitPolicy::PARK, None) {
                Ok(()) => got.push(pop(&mut c).unwrap()[0]),
                Err(Error::Closed) => return got,
                Err(e) => panic!("{e}"),
            }
        }
    });
    for i in 0..200u8 {
        p.wait_for_space(40, WaitPolicy::PARK, None).unwrap();
        p.push(&[i; 40]).unwrap();
    }
    drop(p);
    assert_eq!(reader.join().unwrap(), (0..200u8).collect::<Vec<_>>());
}

#[test]
fn fan_in_reads_every_producer_in_order_and_ends_when_all_close() {
    let bell = Arc::new(clasp_shmring::Doorbell::new());
    let mut consumers = Vec::new();
    let mut writers = Vec::new();
    for w in 0..3u8 {
        let (mut p, c) = heap::channel_with_doorbell(RingConfig::new(256), bell.clone()).unwrap();
        consumers.push(c);
        writers.push(std::thread::spawn(move || {
            for i in 0..500u32 {
                let mut msg = [w; 5];
                msg[1..].copy_from_slice(&i.to_le_bytes());
                p.wait_for_space(5, WaitPolicy::PARK, None).unwrap();
                p.push(&msg).unwrap();
            }
        }));
    }
    let mut fan = FanIn::new(consumers).unwrap();
    let mut next = [0u32; 3];
    loop {
        match fan.wait(WaitPolicy::PARK, None) {
            Ok(()) => {}
            Err(Error::Closed) => break,
            Err(e) => panic!("{e}"),
        }
        fan.poll(8, |i, f| {
            assert_eq!(f[0] as usize, i);
            assert_eq!(u32::from_le_bytes(f[1..5].try_into().unwrap()), next[i]);
            next[i] += 1;
        })
        .unwrap();
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(next, [500; 3]);
}

#[test]
fn fan_in_refuses_rings_with_different_doorbells() {
    let (_p1, c1) = ring(128);
    let (_p2, c2) = ring(128);
    assert!(matches!(
        FanIn::new(vec![c1, c2]),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn threads_exchange_many_frames_without_loss() {
    let (mut p, mut c) = ring(1024);
    let n: u64 = if cfg!(miri) { 200 } else { 100_000 };
    let writer = std::thread::spawn(move || {
        for i in 0..n {
            let len = 8 + (i % 57) as usize;
            p.wait_for_space(
                len,
                WaitPolicy::spin_then_park(Duration::from_micros(100)),
                None,
            )
            .unwrap();
            let mut g = p.reserve(len).unwrap();
            g[..8].copy_from_slice(&i.to_le_bytes());
            g[8..].fill(i as u8);
            g.commit();
        }
    });
    let mut next = 0u64;
    while next < n {
        c.wait(WaitPolicy::spin_then_park(Duration::from_micros(100)), None)
            .unwrap();
        c.pop_batch(16, |f| {
            assert_eq!(u64::from_le_bytes(f[..8].try_into().unwrap()), next);
            assert_eq!(f.len(), 8 + (next % 57) as usize);
            assert!(f[8..].iter().all(|&b| b == next as u8));
            next += 1;
        })
        .unwrap();
    }
    writer.join().unwrap();
}

#[test]
fn both_park_modes_wake_a_parked_consumer() {
    for mode in [
        clasp_shmring::ParkMode::Asymmetric,
        clasp_shmring::ParkMode::Symmetric,
    ] {
        let bell = Arc::new(clasp_shmring::Doorbell::with_mode(mode));
        let (mut p, mut c) = heap::channel_with_doorbell(RingConfig::new(256), bell).unwrap();
        let reader = std::thread::spawn(move || {
            let mut n = 0u32;
            while c.wait(WaitPolicy::PARK, None).is_ok() {
                n += c.pop_batch(8, |_| {}).unwrap() as u32;
            }
            n
        });
        for i in 0..300u32 {
            p.wait_for_space(4, WaitPolicy::PARK, None).unwrap();
            p.push(&i.to_le_bytes()).unwrap();
        }
        drop(p);
        assert_eq!(reader.join().unwrap(), 300, "{mode:?}");
    }
}

#[test]
fn a_spinning_consumer_parks_once_its_spin_is_over() {
    let bell = Arc::new(clasp_shmring::Doorbell::new());
    let (mut p, mut c) =
        heap::channel_with_doorbell(RingConfig::new(256), Arc::clone(&bell)).unwrap();
    let policy = WaitPolicy::spin_then_park(Duration::from_millis(1));
    let reader = std::thread::spawn(move || {
        c.wait(policy, Some(Duration::from_secs(30))).unwrap();
        pop(&mut c).unwrap()
    });
    // Nothing arrives: after its 1 ms of spinning the consumer must sleep on the doorbell.
    let start = std::time::Instant::now();
    while bell.sleepers() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a consumer with a 1 ms spin never parked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    p.push(b"wake").unwrap();
    assert_eq!(reader.join().unwrap(), b"wake");
}

#[test]
fn a_spinning_consumer_sees_a_frame_without_parking() {
    let (mut p, mut c) = ring(256);
    let policy = WaitPolicy::spin_then_park(Duration::from_secs(5));
    p.push(b"now").unwrap();
    c.wait(policy, None).unwrap();
    assert_eq!(pop(&mut c).unwrap(), b"now");
}
