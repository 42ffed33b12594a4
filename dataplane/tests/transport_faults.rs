//! Faults: each kind of malformed frame closes that connection with a reason while the
//! transport keeps serving its other peers; a wrong secret, a garbage client and a silent
//! client are refused, and so is a second process under a connected peer's id; fault injection
//! (delay, cut) works and a cut is reported.

mod transport_support;
use clasp_dataplane::transport::wire::{self, Kind, NET_HEADER_BYTES, NetHeader};
use clasp_dataplane::transport::{
    ClusterSecret, Cut, Direction, Event, Limits, MAX_PENDING_HANDSHAKES, Transport,
    TransportError, auth,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use transport_support::*;

const RAW_ID: u32 = 9;

fn header(kind: Kind, payload: usize, seq: u32) -> Vec<u8> {
    let mut h = vec![0u8; NET_HEADER_BYTES];
    NetHeader {
        kind,
        payload_bytes: payload as u32,
        sender: RAW_ID,
        seq,
        data_credit_bytes: 0,
        control_credit_bytes: 0,
    }
    .write(&mut h);
    h
}

fn batch(frames: &[Vec<u8>], seq: u32) -> Vec<u8> {
    let mut payload = Vec::new();
    for f in frames {
        wire::push_entry(&mut payload, f);
    }
    let mut out = header(Kind::Batch, payload.len(), seq);
    out.extend_from_slice(&payload);
    out
}

/// Authenticates as RAW_ID, writes `bytes`, then waits for the server to close (bounded).
fn raw_client(addr: SocketAddr, bytes: Vec<u8>, then_close: bool) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        let timeout = Duration::from_secs(5);
        auth::client_handshake(&mut s, &secret(), CLUSTER, RAW_ID, Some(2), timeout).unwrap();
        let _ = s.write_all(&bytes);
        if then_close {
            let _ = s.shutdown(std::net::Shutdown::Write);
        }
        let mut sink = [0u8; 1024];
        s.set_read_timeout(Some(timeout)).unwrap();
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    })
}

/// B (id 2) and C (id 3); a raw client sends `bytes` to B; B must drop it with a reason
/// containing `expect` and still take C's frames.
fn refused_and_others_served(bytes: Vec<u8>, then_close: bool, expect: &str) {
    init_logs();
    let mut ts = vec![
        Transport::start(config(2, Limits::default())).unwrap(),
        Transport::start(config(3, Limits::default())).unwrap(),
    ];
    let b_addr = ts[0].local_addr();
    ts[1].connect(2, b_addr).unwrap();
    let mut rs = vec![Recorder::default(), Recorder::default()];
    pump(&mut ts, &mut rs, |ts, _| ts[1].is_connected(2));
    let client = raw_client(b_addr, bytes, then_close);
    pump(&mut ts, &mut rs, |_, rs| !rs[0].lost().is_empty());
    let lost = rs[0].lost();
    match lost[0] {
        Event::PeerLost {
            peer,
            direction,
            reason,
        } => {
            assert_eq!((*peer, *direction), (RAW_ID, Direction::Inbound));
            assert!(
                reason.contains(expect),
                "reason {reason:?} lacks {expect:?}"
            );
        }
        _ => unreachable!(),
    }
    client.join().unwrap();
    // B still serves C.
    let mut out = Outbox::new(3, &[2], 500, 8, 3);
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[1]);
        rs[0].from(3).len() == 500
    });
    assert_in_order(&rs[0].from(3), 3, 500);
}

#[test]
fn a_corrupt_header_closes_the_connection() {
    let mut f = batch(&[request(RAW_ID, 0, 4)], 0);
    f[0] ^= 0xFF;
    refused_and_others_served(f, false, "bad magic");
}

#[test]
fn an_oversized_frame_is_refused_before_it_is_buffered() {
    let f = header(Kind::Batch, 1 << 30, 0);
    refused_and_others_served(f, false, "exceeds the limit");
}

#[test]
fn a_request_failing_validation_closes_the_connection() {
    let mut r = request(RAW_ID, 0, 4);
    r[6] = 0x80; // an unknown request flag
    refused_and_others_served(batch(&[r], 0), false, "unknown request flags");
}

#[test]
fn an_entry_overrunning_its_batch_closes_the_connection() {
    let mut f = batch(&[request(RAW_ID, 0, 4)], 0);
    f[NET_HEADER_BYTES..NET_HEADER_BYTES + 8].copy_from_slice(&4096u64.to_le_bytes());
    refused_and_others_served(f, false, "overruns the batch");
}

#[test]
fn a_truncated_frame_then_eof_closes_the_connection() {
    let f = batch(&[request(RAW_ID, 0, 64)], 0);
    refused_and_others_served(f[..f.len() - 40].to_vec(), true, "closed");
}

#[test]
fn a_wrong_sequence_number_closes_the_connection() {
    let mut f = batch(&[request(RAW_ID, 0, 4)], 0);
    f.extend(batch(&[request(RAW_ID, 1, 4)], 5));
    refused_and_others_served(f, false, "sequence 5");
}

#[test]
fn exceeding_the_credit_closes_the_connection() {
    // The default window is 512 KiB; send 40 batches of ~16 KiB without waiting for credit.
    let frames: Vec<_> = (0..150).map(|s| request(RAW_ID, s, 64)).collect();
    let mut f = Vec::new();
    for seq in 0..40 {
        f.extend(batch(&frames, seq));
    }
    refused_and_others_served(f, false, "beyond the");
}

#[test]
fn a_credit_frame_from_a_sender_closes_the_connection() {
    refused_and_others_served(
        header(Kind::Credit, 0, 0),
        false,
        "Credit frame on an Inbound connection",
    );
}

#[test]
fn wrong_secret_garbage_and_silent_clients_are_refused() {
    init_logs();
    let limits = Limits {
        handshake_timeout_ms: 300,
        ..Limits::default()
    };
    let b = Transport::start(config(2, limits.clone())).unwrap();
    let mut bad = config(5, limits);
    bad.secret = ClusterSecret::new(b"another secret, another cluster".to_vec()).unwrap();
    bad.limits.connect_timeout_ms = 1_000;
    let mut x = Transport::start(bad).unwrap();
    x.connect(2, b.local_addr()).unwrap();
    let garbage = std::thread::spawn({
        let addr = b.local_addr();
        move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let _ = s.write_all(&[0xA5; 300]);
            let mut sink = [0u8; 64];
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.read(&mut sink);
        }
    });
    let silent = TcpStream::connect(b.local_addr()).unwrap();
    let mut rs = vec![Recorder::default(), Recorder::default()];
    let mut ts = vec![b, x];
    pump(&mut ts, &mut rs, |_, rs| {
        rs[0].refused() >= 3
            && rs[1]
                .events
                .iter()
                .any(|e| matches!(e, Event::ConnectFailed { .. }))
    });
    garbage.join().unwrap();
    drop(silent);
    assert!(!ts[1].is_connected(2));
    assert!(matches!(
        ts[1].try_append(2, &request(5, 0, 0)),
        Err(TransportError::PeerLost { .. })
    ));
    assert_eq!(ts[0].counters().refused, 3);
    assert!(
        rs[0]
            .events
            .iter()
            .all(|e| matches!(e, Event::Refused { .. })),
        "{:?}",
        rs[0].events
    );
}

#[test]
fn delayed_batches_still_arrive_in_order() {
    init_logs();
    let mut ts = mesh(2, &Limits::default());
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    drop(ts);
    let mut a = config(1, Limits::default());
    a.faults.delay_batches_us = 2_000;
    let mut ts = vec![
        Transport::start(a).unwrap(),
        Transport::start(config(2, Limits::default())).unwrap(),
    ];
    let b_addr = ts[1].local_addr();
    ts[0].connect(2, b_addr).unwrap();
    pump(&mut ts, &mut rs, |ts, _| ts[0].is_connected(2));
    let mut out = Outbox::new(1, &[2], 2_000, 8, 2);
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        rs[1].from(1).len() == 2_000
    });
    assert_in_order(&rs[1].from(1), 1, 2_000);
}

#[test]
fn a_cut_connection_is_reported_and_the_other_direction_survives() {
    init_logs();
    // One batch a send, so the cut after three batches falls before most requests go out.
    let limits = Limits {
        batch_bytes_max: 1024,
        send_bytes_max: 1024,
        ..Limits::default()
    };
    let mut a = config(1, limits.clone());
    a.faults.cuts.push(Cut {
        peer: 2,
        after_batches: Some(3),
        after_bytes: None,
    });
    let mut ts = vec![
        Transport::start(a).unwrap(),
        Transport::start(config(2, limits)).unwrap(),
    ];
    let (a_addr, b_addr) = (ts[0].local_addr(), ts[1].local_addr());
    ts[0].connect(2, b_addr).unwrap();
    ts[1].connect(1, a_addr).unwrap();
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    let mut out = Outbox::new(1, &[2], 1_000, 8, 2);
    pump(&mut ts, &mut rs, |ts, rs| {
        if ts[0].is_connected(2) {
            out.push(&mut ts[0]);
        }
        !rs[0].lost().is_empty() && !rs[1].lost().is_empty()
    });
    let a_lost = rs[0].lost();
    assert!(
        matches!(a_lost[0], Event::PeerLost { peer: 2, direction: Direction::Outbound, reason } if reason.contains("fault injection"))
    );
    assert!(matches!(
        rs[1].lost()[0],
        Event::PeerLost {
            peer: 1,
            direction: Direction::Inbound,
            ..
        }
    ));
    assert!(matches!(
        ts[0].try_append(2, &request(1, 0, 0)),
        Err(TransportError::PeerLost { .. })
    ));
    // What arrived before the cut arrived in order (a prefix).
    let got = rs[1].from(1);
    assert!(got.len() < 1_000);
    assert_in_order(&got, 1, got.len() as u32);
    // B → A is another connection and still works.
    let mut back = Outbox::new(2, &[1], 300, 8, 2);
    pump(&mut ts, &mut rs, |ts, rs| {
        back.push(&mut ts[1]);
        rs[0].from(2).len() == 300
    });
}

#[test]
fn a_real_peer_connects_while_slow_peers_hold_every_handshake_slot() {
    init_logs();
    // A long handshake deadline: without eviction the slow peers would hold every slot for
    // the whole test.
    let limits = Limits {
        handshake_timeout_ms: 30_000,
        ..Limits::default()
    };
    let b = Transport::start(config(2, limits.clone())).unwrap();
    let addr = b.local_addr();
    let slow_count = 3 * MAX_PENDING_HANDSHAKES;
    // One byte of a Hello, then silence: 3× the slot count, from the real peer's address.
    let slow = std::thread::spawn(move || {
        (0..slow_count)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"C").unwrap();
                s
            })
            .collect::<Vec<_>>()
    });
    let mut ts = vec![b];
    let mut rs = vec![Recorder::default()];
    // The first `MAX_PENDING_HANDSHAKES` fill the slots; each later one evicts the oldest.
    let evictions = slow_count - MAX_PENDING_HANDSHAKES;
    pump(&mut ts, &mut rs, |_, rs| rs[0].refused() >= evictions);
    let slow = slow.join().unwrap();
    let mut c = Transport::start(config(3, limits)).unwrap();
    c.connect(2, addr).unwrap();
    ts.push(c);
    rs.push(Recorder::default());
    pump(&mut ts, &mut rs, |ts, _| ts[1].is_connected(2));
    assert!(ts[0].counters().refused >= evictions as u64);
    assert!(rs[1].lost().is_empty(), "{:?}", rs[1].events);
    drop(slow);
}

/// A peer whose listening socket accepts and then resets the connection (a killed process's,
/// torn down a moment late) is dialled again, and reached once a new process listens on the
/// same address: a recovery's replacement worker is not failed by its predecessor's socket.
#[test]
fn a_handshake_reset_by_a_dying_listener_is_dialled_again() {
    init_logs();
    let dying = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = dying.local_addr().unwrap();
    let mut a = Transport::start(config(1, Limits::default())).unwrap();
    a.connect(2, addr).unwrap();
    // The first connection is accepted, then closed with the hello unread (a reset), and the
    // listener with it; the new peer listens on the same address.
    let (conn, _) = dying.accept().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    drop(conn);
    drop(dying);
    let mut cfg = config(2, Limits::default());
    cfg.listen = addr;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let b = loop {
        match Transport::start(cfg.clone()) {
            Ok(t) => break t,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("binding {addr} again: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("cannot listen on {addr} again: {e}"),
        }
    };
    let mut ts = vec![a, b];
    let mut rs = vec![Recorder::default(), Recorder::default()];
    pump(&mut ts, &mut rs, |ts, rs| {
        ts[0].is_connected(2)
            || rs[0]
                .events
                .iter()
                .any(|e| matches!(e, Event::ConnectFailed { .. }))
    });
    assert!(ts[0].is_connected(2), "{:?}", rs[0].events);
}

/// A second transport under the id of a connected peer (a worker started twice) is refused
/// in its handshake with a reason it can tell apart (`id_taken`), dials again until its
/// connect deadline, and fails; the first keeps its connection and its requests flow. Once the
/// first is gone, the id connects again.
#[test]
fn a_second_process_under_a_connected_id_is_refused_and_told_why() {
    init_logs();
    let b = Transport::start(config(2, Limits::default())).unwrap();
    let b_addr = b.local_addr();
    let first = Transport::start(config(1, Limits::default())).unwrap();
    let mut twin_cfg = config(1, Limits::default());
    twin_cfg.limits.connect_timeout_ms = 600;
    let twin = Transport::start(twin_cfg).unwrap();
    let mut ts = vec![b, first, twin];
    let mut rs = vec![
        Recorder::default(),
        Recorder::default(),
        Recorder::default(),
    ];
    ts[1].connect(2, b_addr).unwrap();
    pump(&mut ts, &mut rs, |ts, rs| {
        ts[1].is_connected(2)
            && rs[0]
                .events
                .iter()
                .any(|e| matches!(e, Event::PeerUp { .. }))
    });
    ts[2].connect(2, b_addr).unwrap();
    pump(&mut ts, &mut rs, |_, rs| {
        rs[2]
            .events
            .iter()
            .any(|e| matches!(e, Event::ConnectFailed { .. }))
    });
    let failed = rs[2].events.iter().find_map(|e| match e {
        Event::ConnectFailed {
            peer,
            reason,
            id_taken,
            ..
        } => Some((*peer, reason.clone(), *id_taken)),
        _ => None,
    });
    let (peer, reason, id_taken) = failed.unwrap();
    assert_eq!(peer, 2);
    assert!(id_taken, "{reason}");
    assert!(reason.contains("already has a connection"), "{reason}");
    // Refused more than once (it dialled again), each one counted; the first's link stays.
    assert!(ts[0].counters().refused >= 2, "{:?}", ts[0].counters());
    assert!(rs[0].lost().is_empty(), "{:?}", rs[0].events);
    ts[1].try_append(2, &request(1, 0, 0)).unwrap();
    pump(&mut ts, &mut rs, |_, rs| !rs[0].frames.is_empty());
    // The first goes away; a process under its id is then welcome.
    drop(ts.remove(1));
    rs.remove(1);
    pump(&mut ts, &mut rs, |_, rs| !rs[0].lost().is_empty());
    ts[1].connect(2, b_addr).unwrap();
    pump(&mut ts, &mut rs, |ts, _| ts[1].is_connected(2));
}
