//! Property test: the ring against a `VecDeque` model, over random frame sizes and random
//! interleavings of pushes, deferred commits, abandoned reservations, publishes, peeks, batch
//! pops and two-pass batch pops (wrap-around included: the ring is small and the sequences
//! long). An abandoned reservation may already have written the skip marker in front of its
//! frame; the frames after it must not see it.
#![cfg(not(loom))]

use clasp_shmring::heap;
use clasp_shmring::{AHEAD_MAX_FRAMES, Error, Pass, RingConfig};
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
enum Op {
    Push(usize),
    PushDeferred(usize),
    Abandon(usize),
    Publish,
    Pop,
    PopBatch(usize),
    PopBatchAhead(usize),
    PeekWithoutRelease,
}

fn op(max_len: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=max_len).prop_map(Op::Push),
        2 => (0..=max_len).prop_map(Op::PushDeferred),
        1 => (0..=max_len).prop_map(Op::Abandon),
        1 => Just(Op::Publish),
        3 => Just(Op::Pop),
        1 => (1usize..6).prop_map(Op::PopBatch),
        1 => (1usize..40).prop_map(Op::PopBatchAhead),
        1 => Just(Op::PeekWithoutRelease),
    ]
}

fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 31 + i) as u8).collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        // Miri isolates the file system, where failures would be persisted.
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..Default::default()
    })]

    #[test]
    fn ring_behaves_like_a_queue(
        capacity_log2 in 6u32..10,
        ops in prop::collection::vec(op(200), 1..if cfg!(miri) { 60 } else { 300 }),
    ) {
        let config = RingConfig::new(1 << capacity_log2);
        let max = config.max_frame_bytes;
        let (mut p, mut c) = heap::channel(config).unwrap();
        let mut visible: VecDeque<Vec<u8>> = VecDeque::new();
        let mut deferred: Vec<Vec<u8>> = Vec::new();
        let mut seq = 0u32;
        for op in ops {
            match op {
                Op::Push(len) | Op::PushDeferred(len) => {
                    let defer = matches!(op, Op::PushDeferred(_));
                    let data = payload(seq, len);
                    match p.reserve(len) {
                        Ok(mut g) => {
                            g.copy_from_slice(&data);
                            if defer {
                                g.commit_deferred();
                                deferred.push(data);
                            } else {
                                g.commit();
                                visible.extend(deferred.drain(..));
                                visible.push_back(data);
                            }
                            seq += 1;
                        }
                        Err(Error::FrameTooLarge { .. }) => prop_assert!(len > max),
                        Err(Error::Full { .. }) => {
                            prop_assert!(len <= max);
                            // A frame that fits the limits always fits an empty ring.
                            prop_assert!(!visible.is_empty() || !deferred.is_empty(),
                                "full while empty");
                        }
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Abandon(len) => {
                    if let Ok(mut g) = p.reserve(len) {
                        g.fill(0xAB);
                    }
                }
                Op::Publish => {
                    p.publish();
                    visible.extend(deferred.drain(..));
                }
                Op::Pop => {
                    let got = c.peek().unwrap().map(|f| { let v = f.to_vec(); f.release(); v });
                    prop_assert_eq!(got, visible.pop_front());
                }
                Op::PopBatch(k) => {
                    let mut got = Vec::new();
                    let n = c.pop_batch(k, |f| got.push(f.to_vec())).unwrap();
                    prop_assert_eq!(n, got.len());
                    let want: Vec<_> = (0..k.min(visible.len())).map(|_| visible.pop_front().unwrap()).collect();
                    prop_assert_eq!(got, want);
                }
                Op::PopBatchAhead(k) => {
                    let (mut ahead, mut taken) = (Vec::new(), Vec::new());
                    let n = c.pop_batch_ahead(k, |pass, f| match pass {
                        Pass::Ahead => ahead.push(f.to_vec()),
                        Pass::Take => taken.push(f.to_vec()),
                    }).unwrap();
                    let k = k.min(AHEAD_MAX_FRAMES).min(visible.len());
                    let want: Vec<_> = (0..k).map(|_| visible.pop_front().unwrap()).collect();
                    prop_assert_eq!(n, want.len());
                    prop_assert_eq!(&ahead, &want);
                    prop_assert_eq!(taken, want);
                }
                Op::PeekWithoutRelease => {
                    let got = c.peek().unwrap().map(|f| f.to_vec());
                    prop_assert_eq!(got.as_ref(), visible.front());
                }
            }
        }
        p.publish();
        visible.extend(deferred.drain(..));
        let mut rest = Vec::new();
        c.pop_batch(usize::MAX, |f| rest.push(f.to_vec())).unwrap();
        prop_assert_eq!(rest, Vec::from(visible));
    }
}
