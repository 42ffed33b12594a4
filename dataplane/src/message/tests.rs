//! Every variant round-trips; no bytes panic the decoder; another version is refused by name.

use super::codec::{HEADER_BYTES, MAGIC};
use super::*;
use clasp_operators::OperatorSummary;
use clasp_operators::digest::Digest;
use proptest::collection::vec;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    "[a-z0-9 .:]{0,12}"
}

fn job() -> impl Strategy<Value = Message> {
    (
        (text(), text(), any::<u16>(), any::<bool>(), any::<u64>()),
        (
            any::<bool>(),
            vec(any::<u32>(), 0..5),
            any::<u32>(),
            text(),
            any::<u32>(),
        ),
    )
        .prop_map(|((app_name, app_toml, executors, alt, ring_bytes), rest)| {
            let (pin, workers, driver, driver_addr, interval_ms) = rest;
            Message::Job(Box::new(Job {
                addresses: workers.iter().map(|&w| (w, app_toml.clone())).collect(),
                app_name,
                app_toml,
                executors,
                spread: if alt {
                    SpreadCode::Alternate
                } else {
                    SpreadCode::Even
                },
                ring_bytes,
                pin,
                idle: match interval_ms % 3 {
                    0 => IdleCode::Auto,
                    1 => IdleCode::Park,
                    _ => IdleCode::Spin(driver),
                },
                peers: workers.iter().map(|&w| (w, driver_addr.clone())).collect(),
                workers,
                driver,
                sink: driver_addr.chars().rev().collect(),
                sink_per_worker: pin,
                epoch: u64::from(interval_ms),
                routing: Vec::new(),
                restore: vec![RestorePart {
                    path: driver_addr.clone(),
                    crc32: interval_ms,
                }],
                driver_addr,
                interval_ms,
            }))
        })
}

fn u64s() -> impl Strategy<Value = Vec<u64>> {
    vec(any::<u64>(), 0..6)
}

fn counters() -> impl Strategy<Value = Message> {
    (
        (any::<u32>(), any::<u64>(), u64s(), u64s(), u64s(), u64s()),
        (any::<u64>(), vec((any::<u32>(), any::<u64>()), 0..4)),
        (
            any::<u64>(),
            any::<u64>(),
            any::<Option<u64>>(),
            any::<u64>(),
            any::<u64>(),
            any::<Option<u64>>(),
            any::<u64>(),
            any::<u64>(),
        ),
        (
            any::<Option<u64>>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                a,
                (busy_ns, sent_to),
                (
                    queued_bytes,
                    frames_in,
                    cpu_ns,
                    idle_spin_ns,
                    sleeps,
                    throttled_periods,
                    batches,
                    sleep_cpu_ns,
                ),
                (exec_cpu_ns, exec_idle_spin_ns, exec_sleep_cpu_ns, exec_sleeps),
            )| {
                let (worker, t_ns, processed, exec_ns, edges_local, edges_remote) = a;
                Message::Counters(Box::new(Counters {
                    worker,
                    t_ns,
                    processed,
                    exec_ns,
                    edges_local,
                    edges_remote,
                    busy_ns,
                    cpu_ns,
                    idle_spin_ns,
                    sleep_cpu_ns,
                    sent_to,
                    queued_bytes,
                    frames_in,
                    sleeps,
                    throttled_periods,
                    batches,
                    exec_cpu_ns,
                    exec_idle_spin_ns,
                    exec_sleep_cpu_ns,
                    exec_sleeps,
                }))
            },
        )
}

fn digest() -> impl Strategy<Value = Digest> {
    (any::<u128>(), any::<u64>()).prop_map(|(sum, count)| Digest { sum, count })
}

fn summary() -> impl Strategy<Value = Message> {
    let op = (any::<u64>(), any::<u64>(), digest(), digest(), digest()).prop_map(
        |(processed, malformed, state, inputs, outputs)| OperatorSummary {
            processed,
            malformed,
            state,
            inputs,
            outputs,
        },
    );
    (
        (any::<u32>(), vec(op, 0..3), u64s()),
        vec(vec((text(), any::<u64>()), 0..3), 0..3),
        (u64s(), u64s(), u64s(), u64s()),
        (vec((text(), any::<u64>()), 0..3), vec(text(), 0..3)),
    )
        .prop_map(
            |((worker, summaries, state_keys), malformed, m, (totals, errors))| {
                Message::Summary(Box::new(WorkerSummary {
                    worker,
                    summaries,
                    state_keys,
                    malformed,
                    processed: m.0,
                    exec_ns: m.1,
                    edges_local: m.2,
                    edges_remote: m.3,
                    totals,
                    errors,
                }))
            },
        )
}

fn u32s() -> impl Strategy<Value = Vec<u32>> {
    vec(any::<u32>(), 0..4)
}

fn plans() -> impl Strategy<Value = Message> {
    let row = prop_oneof![
        vec((any::<u16>(), any::<u16>()), 0..4).prop_map(RoutingRow::Runs),
        vec(any::<u16>(), 0..8).prop_map(RoutingRow::Slots),
    ];
    let transfer = (any::<u16>(), any::<u32>(), vec(any::<u16>(), 0..4)).prop_map(
        |(operator, to, key_groups)| TransferCode {
            operator,
            to,
            key_groups,
        },
    );
    let slot = (
        any::<u32>(),
        vec(transfer, 0..3),
        (u32s(), u32s(), any::<bool>(), u32s(), u32s()),
    )
        .prop_map(|(slot, sends, s)| SlotPlan {
            slot,
            sends,
            markers_to: s.0,
            hear_from: s.1,
            hear_from_ingress: s.2,
            fence_to: s.3,
            fence_from: s.4,
        });
    (
        any::<u64>(),
        vec(row, 0..3),
        vec(u32s(), 0..3),
        vec(slot, 0..3),
    )
        .prop_map(|(epoch, routing, upstream_old, slots)| {
            Message::Plans(Box::new(Plans {
                epoch,
                routing,
                upstream_old,
                slots,
            }))
        })
}

fn migration() -> impl Strategy<Value = Message> {
    let peer = prop_oneof![
        Just(PeerCode::Ingress),
        any::<u32>().prop_map(PeerCode::Slot)
    ];
    prop_oneof![
        (any::<u32>(), any::<[u64; 8]>()).prop_map(|(slot, v)| Message::Migrated(Report {
            slot,
            epoch: v[0],
            pause_ns: v[1],
            marker_wait_ns: v[7],
            received_queued: v[2],
            forwarded: v[3],
            held: v[4],
            gated: v[5],
            early: v[6],
        })),
        (
            any::<u32>(),
            any::<u64>(),
            any::<bool>(),
            vec(peer, 0..4),
            u32s()
        )
            .prop_map(
                |(slot, epoch, draining, markers_from, state_or_seal_from)| {
                    Message::Progress(Progress {
                        slot,
                        epoch,
                        draining,
                        markers_from,
                        state_or_seal_from,
                    })
                }
            ),
        Just(Message::Marker),
        (any::<u16>(), vec(any::<u16>(), 0..6)).prop_map(|(operator, key_groups)| Message::Seal(
            Seal {
                operator,
                key_groups
            }
        )),
        (any::<u32>(), any::<u32>(), vec(any::<u8>(), 0..64)).prop_map(|(total, offset, bytes)| {
            Message::StatePart(StatePart {
                total,
                offset,
                bytes,
            })
        }),
        (
            any::<u16>(),
            vec((any::<u16>(), vec(any::<u8>(), 0..40)), 0..3),
            vec(vec(any::<u8>(), 0..40), 0..3)
        )
            .prop_map(
                |(operator, groups, queued)| Message::State(Box::new(StateMsg {
                    operator,
                    groups,
                    queued
                }))
            ),
        (
            any::<u16>(),
            vec((any::<u16>(), vec(any::<u8>(), 0..40)), 0..3)
        )
            .prop_map(|(operator, groups)| Message::StateAhead(Box::new(StateMsg {
                operator,
                groups,
                queued: Vec::new()
            }))),
        vec(vec(any::<u16>(), 0..4).prop_map(RoutingRow::Slots), 0..3)
            .prop_map(|routing| Message::CopyAhead { routing }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let status = (
        any::<u64>(),
        any::<bool>(),
        vec(any::<(u32, u64, u64)>(), 0..4),
    )
        .prop_map(|(round, idle, counts)| {
            Message::Status(Status {
                round,
                idle,
                counts,
            })
        });
    let delta = any::<[u64; 3]>().prop_map(|d| LedgerDelta {
        root_id: d[0],
        xor: d[1],
        admitted_ns: d[2],
    });
    prop_oneof![
        job(),
        Just(Message::Ready),
        any::<u16>().prop_map(|operator| Message::Eos { operator }),
        any::<u16>().prop_map(|operator| Message::EosAck { operator }),
        any::<u64>().prop_map(|round| Message::Probe { round }),
        status,
        Just(Message::Finish),
        Just(Message::Bye),
        vec(delta, 0..20).prop_map(Message::Deltas),
        counters(),
        summary(),
        text().prop_map(Message::Error),
        (any::<u32>(), text()).prop_map(|(peer, reason)| Message::LinkLost { peer, reason }),
        text().prop_map(|listen| Message::Join { listen }),
        (text(), any::<bool>()).prop_map(|(reason, later)| Message::JoinRefused { reason, later }),
        (any::<u32>(), text()).prop_map(|(peer, addr)| Message::PeerJoined { peer, addr }),
        Just(Message::Leave),
        any::<u32>().prop_map(|peer| Message::PeerLeft { peer }),
        plans(),
        migration(),
        (any::<u64>(), text()).prop_map(|(id, dir)| Message::Snapshot { id, dir }),
        (any::<u64>(), any::<u32>(), text(), any::<u64>()).prop_map(|(id, worker, name, bytes)| {
            Message::Snapshotted(Box::new(Snapshotted {
                id,
                worker,
                error: name.chars().rev().collect(),
                summaries: vec![OperatorSummary {
                    processed: id,
                    ..OperatorSummary::default()
                }],
                malformed: vec![vec![(name, bytes)]],
            }))
        }),
        (
            any::<u64>(),
            any::<u32>(),
            text(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(|(id, worker, name, crc32, bytes)| {
                Message::PartWritten(Box::new(PartWritten {
                    id,
                    worker,
                    crc32,
                    bytes,
                    groups: bytes / 3,
                    error: name.chars().rev().collect(),
                    name,
                }))
            }),
    ]
}

proptest! {
    #[test]
    fn every_variant_round_trips(m in message(), prefix in 0usize..3) {
        // Also behind a request header (48 bytes) or an odd prefix, as frames carry them.
        let at = [0, 48, 5][prefix];
        let mut out = vec![7u8; at];
        encode_into(&m, &mut out).unwrap();
        prop_assert_eq!(decode(&out[at..]).unwrap(), m);
    }

    #[test]
    fn random_bytes_never_panic_the_decoder(bytes in vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn random_archives_behind_a_valid_header_never_panic(body in vec(any::<u8>(), 0..400)) {
        let mut b = encode(&Message::Ready).unwrap();
        b.truncate(HEADER_BYTES);
        b.extend_from_slice(&body);
        let _ = decode(&b);
    }

    #[test]
    fn mutated_messages_never_panic(m in message(), flips in vec((any::<usize>(), any::<u8>()), 1..8)) {
        let mut b = encode(&m).unwrap();
        for (at, x) in flips {
            let i = at % b.len();
            b[i] ^= x;
        }
        let _ = decode(&b);
    }
}

#[test]
fn another_version_is_refused_naming_both() {
    let mut b = encode(&Message::Ready).unwrap();
    b[4..6].copy_from_slice(&(VERSION + 1).to_le_bytes());
    let e = decode(&b).unwrap_err();
    assert_eq!(
        e,
        MessageError::Version {
            ours: VERSION,
            theirs: VERSION + 1
        }
    );
    let text = e.to_string();
    assert!(text.contains(&format!("version {}", VERSION + 1)), "{text}");
    assert!(text.contains(&format!("version {VERSION}")), "{text}");
}

#[test]
fn malformed_headers_are_named() {
    let good = encode(&Message::Finish).unwrap();
    assert_eq!(decode(&good[..3]), Err(MessageError::Truncated(3)));
    let mut b = good.clone();
    b[0] ^= 1;
    assert!(matches!(decode(&b), Err(MessageError::Magic(m)) if m != MAGIC));
    let mut b = good.clone();
    b[9] = 1;
    assert_eq!(decode(&b), Err(MessageError::Reserved));
    assert!(matches!(
        decode(&good[..HEADER_BYTES]),
        Err(MessageError::Archive(_))
    ));
}

#[test]
fn a_marker_and_a_delta_batch_stay_small() {
    assert!(encode(&Message::Marker).unwrap().len() <= 128);
    let deltas = vec![LedgerDelta::default(); DELTAS_PER_MESSAGE];
    let n = encode(&Message::Deltas(deltas)).unwrap().len();
    assert!(n <= DELTAS_PER_MESSAGE * 24 + 256, "{n}");
    assert!(n <= crate::transport::wire::MAX_CONTROL_BODY_BYTES);
}

#[test]
fn plans_round_trip_through_the_protocol_types() {
    use clasp_operators::key::KEY_GROUPS;
    use clasp_protocol::assignment::{Assignment, assignments};
    use clasp_protocol::plan::plan;
    use clasp_protocol::{Epoch, RoutingTable, Slot};
    use std::sync::Arc;
    let routing = |epoch: u64, ops: usize, f: &dyn Fn(usize, usize) -> usize| -> RoutingTable {
        RoutingTable::from_fn(Epoch(epoch), ops, KEY_GROUPS as usize, |o, g| {
            Slot::at(f(o, g.index()))
        })
    };
    let old = routing(0, 3, &|_, g| g % 2);
    let new = Arc::new(routing(1, 3, &|o, g| {
        if o == 0 { g * 4 / 1024 } else { (g + o) % 4 }
    }));
    let preds = vec![vec![], vec![0], vec![1]];
    let p = plan(&old, &new, &preds);
    let parts = assignments(&p, &old, &new, &preds, 4);
    let refs: Vec<(Slot, &Assignment)> = parts
        .iter()
        .enumerate()
        .map(|(i, a)| (Slot::at(i), a))
        .collect();
    let m = Message::Plans(Box::new(Plans::new(&new, &refs)));
    let Message::Plans(back) = decode(&encode(&m).unwrap()).unwrap() else {
        panic!("not plans");
    };
    let back = back.assignments().unwrap();
    assert_eq!(back.len(), 4);
    for (slot, a) in back {
        assert_eq!(a, parts[slot.index()]);
    }
    // A row short of key groups, or a key group out of range, is refused.
    let mut short = Plans::new(&new, &refs);
    short.routing[0] = RoutingRow::Slots(vec![0; 3]);
    assert!(short.assignments().is_err());
    assert!(migration::key_groups_of(&[KEY_GROUPS]).is_err());
}

#[test]
fn reports_and_progress_convert_both_ways() {
    use clasp_protocol::message::Peer;
    use clasp_protocol::worker::{Waiting, WorkerReport};
    use clasp_protocol::{Epoch, Slot};
    let r = WorkerReport {
        worker: Slot(3),
        epoch: Epoch(9),
        pause_ns: 1,
        marker_wait_ns: 7,
        received_queued: 2,
        forwarded: 3,
        held: 4,
        gated: 5,
        early: 6,
    };
    assert_eq!(WorkerReport::from(Report::from(&r)), r);
    let w = Waiting {
        draining: true,
        markers_from: vec![Peer::Ingress, Peer::Worker(Slot(4))],
        state_or_seal_from: vec![Slot(1), Slot(2)],
    };
    let p = Progress::new(Slot(7), Epoch(9), &w);
    assert_eq!((p.slot, p.epoch, p.waiting()), (7, 9, w));
}
