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

/// `wakers` threads each make `rings` changes, ringing the doorbell after each, while one
/// parker waits until it has seen them all, parking whenever it has seen every change so far.
/// A lost wake-up shows as a deadlock, which loom reports.
fn parker_sees_every_ring(wakers: u32, rings: u32) {
    use clasp_shmring::Doorbell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU32, Ordering};
    model(move || {
        let bell = Arc::new(Doorbell::new());
        let done = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..wakers)
            .map(|_| {
                let (bell, done) = (bell.clone(), done.clone());
                thread::spawn(move || {
                    for _ in 0..rings {
                        done.fetch_add(1, Ordering::Relaxed);
                        bell.ring();
                    }
                })
            })
            .collect();
        let mut seen = 0;
        while seen < wakers * rings {
            let now = done.load(Ordering::Relaxed);
            if now > seen {
                seen = now;
                continue;
            }
            let token = bell.prepare_park();
            if done.load(Ordering::Relaxed) == seen {
                bell.park(token, None);
            }
            bell.finish_park(token);
        }
        for t in threads {
            t.join().unwrap();
        }
    });
}

/// Two wakers ring one doorbell: whichever rings second while the first one's wake is still
/// pending skips its system call, and the parker still never sleeps through a change.
#[test]
fn a_doorbell_rung_by_two_wakers_wakes_its_parker() {
    parker_sees_every_ring(2, 1);
}

/// One waker rings three times while its parker, woken by the first ring, has not run yet:
/// the later rings skip the system call, and the parker, announcing a new park, still sees
/// every change or is woken for it. (A first version kept the woken flag in a word of its own;
/// this model found the lost wake-up.)
#[test]
fn rings_after_a_pending_wake_are_not_lost() {
    parker_sees_every_ring(1, 3);
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
