//! Loom models of the ring protocol and of parking. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p clasp-shmring --test loom_ring --release`.
//! Each model is small (a few frames, a tiny ring); preemptions are bounded to keep the state
//! space finite (`LOOM_MAX_PREEMPTIONS`, default 3 here).
#![cfg(loom)]

use clasp_shmring::heap::{self, HeapRing};
use clasp_shmring::{Consumer, Error, Producer, RingConfig, WaitPolicy};
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

fn frame(i: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| i.wrapping_mul(17).wrapping_add(k as u8))
        .collect()
}

/// Pushes with a spin (yield) on Full.
fn push_spinning(p: &mut Producer<HeapRing>, data: &[u8]) {
    loop {
        match p.push(data) {
            Ok(()) => return,
            Err(Error::Full { .. }) => thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Pops `lens.len()` frames with a spin (yield) on empty, checking order and content.
fn pop_spinning(c: &mut Consumer<HeapRing>, lens: &[usize]) {
    for (i, &len) in lens.iter().enumerate() {
        loop {
            if let Some(f) = c.peek().unwrap() {
                assert_eq!(&*f, &frame(i as u8, len)[..], "frame {i}");
                f.release();
                break;
            }
            thread::yield_now();
        }
    }
    assert!(c.peek().unwrap().is_none(), "a frame appeared twice");
}

/// Index protocol without wrap markers: each frame ends exactly where the next lap starts.
#[test]
fn frames_pass_in_order_across_laps() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig {
            capacity_bytes: 64,
            max_frame_bytes: 16,
        })
        .unwrap();
        let lens = [16usize, 1, 9];
        let writer = thread::spawn(move || {
            for (i, &len) in lens.iter().enumerate() {
                push_spinning(&mut p, &frame(i as u8, len));
            }
        });
        pop_spinning(&mut c, &lens);
        writer.join().unwrap();
    });
}

/// Wrap-around: the third frame does not fit before the end, so a wrap marker is written.
#[test]
fn wrap_markers_are_followed() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig {
            capacity_bytes: 128,
            max_frame_bytes: 48,
        })
        .unwrap();
        let lens = [16usize, 48, 40];
        let writer = thread::spawn(move || {
            for (i, &len) in lens.iter().enumerate() {
                push_spinning(&mut p, &frame(i as u8, len));
            }
        });
        pop_spinning(&mut c, &lens);
        writer.join().unwrap();
    });
}

/// Frames longer than two cache lines start on a line boundary: the second frame (192 bytes)
/// is preceded by a skip marker over 32 bytes of padding, and the fourth (256 bytes) wraps.
#[test]
fn line_padding_is_skipped() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig {
            capacity_bytes: 512,
            max_frame_bytes: 240,
        })
        .unwrap();
        let lens = [8usize, 150, 8, 200];
        let writer = thread::spawn(move || {
            for (i, &len) in lens.iter().enumerate() {
                push_spinning(&mut p, &frame(i as u8, len));
            }
        });
        pop_spinning(&mut c, &lens);
        writer.join().unwrap();
    });
}

/// A batch published with one store is seen whole and in order.
#[test]
fn a_deferred_batch_is_published_at_once() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig {
            capacity_bytes: 128,
            max_frame_bytes: 48,
        })
        .unwrap();
        let writer = thread::spawn(move || {
            for i in 0..2u8 {
                let mut g = p.reserve(4).unwrap();
                g.copy_from_slice(&frame(i, 4));
                g.commit_deferred();
            }
            p.publish();
        });
        let mut got = Vec::new();
        while got.len() < 2 {
            let n = c.pop_batch(4, |f| got.push(f.to_vec())).unwrap();
            assert!(n == 0 || got.len() == 2, "half a batch was visible");
            if n == 0 {
                thread::yield_now();
            }
        }
        assert_eq!(got, vec![frame(0, 4), frame(1, 4)]);
        writer.join().unwrap();
    });
}

/// A consumer that parks at once is always woken: by each frame, and by the close.
/// A lost wake-up shows as a deadlock, which loom reports.
#[test]
fn a_parked_consumer_is_never_forgotten() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig::new(128)).unwrap();
        let writer = thread::spawn(move || {
            p.push(&frame(0, 3)).unwrap();
            p.push(&frame(1, 3)).unwrap();
        });
        let mut got = 0u8;
        loop {
            match c.wait(WaitPolicy::PARK, None) {
                Ok(()) => {
                    let f = c.peek().unwrap().unwrap();
                    assert_eq!(&*f, &frame(got, 3)[..]);
                    f.release();
                    got += 1;
                }
                Err(Error::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, 2);
        writer.join().unwrap();
    });
}

/// A producer that parks for space is woken by the consumer's release.
#[test]
fn a_parked_producer_is_never_forgotten() {
    model(|| {
        let (mut p, mut c) = heap::channel(RingConfig {
            capacity_bytes: 64,
            max_frame_bytes: 16,
        })
        .unwrap();
        let writer = thread::spawn(move || {
            for i in 0..2u8 {
                p.wait_for_space(16, WaitPolicy::PARK, None).unwrap();
                p.push(&frame(i, 16)).unwrap();
            }
        });
        for i in 0..2u8 {
            c.wait(WaitPolicy::PARK, None).unwrap();
            let f = c.peek().unwrap().unwrap();
            assert_eq!(&*f, &frame(i, 16)[..]);
            f.release();
        }
        writer.join().unwrap();
    });
}
