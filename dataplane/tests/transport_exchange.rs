//! Transports exchanging many request frames: nothing lost, duplicated or reordered per
//! connection, on both receive paths (multishot into provided buffers, and plain recv).

mod transport_support;
use clasp_dataplane::transport::{Limits, Transport, wire};
use transport_support::*;

fn exchange(n: u32, count: u32, limits: Limits) -> Vec<Transport> {
    init_logs();
    let mut ts = mesh(n, &limits);
    let mut rs: Vec<Recorder> = (0..n).map(|_| Recorder::default()).collect();
    wait_connected(&mut ts, &mut rs);
    let mut outs: Vec<Outbox> = (1..=n)
        .map(|me| {
            let to: Vec<u32> = (1..=n).filter(|&p| p != me).collect();
            Outbox::new(me, &to, count, 16, n as usize)
        })
        .collect();
    pump(&mut ts, &mut rs, |ts, rs| {
        for (t, o) in ts.iter_mut().zip(outs.iter_mut()) {
            o.push(t);
        }
        // Every frame delivered, and every send's completion reaped: a receiver can hold
        // the last batch before its sender has counted it sent.
        let sent = |(i, t): (usize, &Transport)| {
            (1..=n)
                .filter(|&p| p != i as u32 + 1)
                .all(|p| t.peer_counters(p).frames_sent == u64::from(count))
        };
        rs.iter()
            .all(|r| r.frames.len() == (count * (n - 1)) as usize)
            && ts.iter().enumerate().all(sent)
    });
    for (i, r) in rs.iter().enumerate() {
        for from in (1..=n).filter(|&p| p != i as u32 + 1) {
            assert_in_order(&r.from(from), from, count);
        }
        assert!(r.lost().is_empty(), "{:?}", r.events);
    }
    ts
}

#[test]
fn two_transports_exchange_in_order_multishot() {
    let ts = exchange(2, 20_000, Limits::default());
    assert!(
        ts[0].counters().multishot,
        "this kernel has provided-buffer rings"
    );
    let c = ts[0].peer_counters(2);
    assert_eq!(c.frames_sent, 20_000);
    assert_eq!(c.frames_received, 20_000);
    assert!(c.batches_sent < 20_000, "requests were batched: {c:?}");
}

#[test]
fn two_transports_exchange_in_order_plain_recv() {
    let limits = Limits {
        force_plain_recv: true,
        ..Limits::default()
    };
    let ts = exchange(2, 20_000, limits);
    assert!(!ts[0].counters().multishot);
}

#[test]
fn three_transports_exchange_in_order() {
    exchange(3, 5_000, Limits::default());
}

#[test]
fn small_receive_buffers_split_frames_across_receives() {
    // 4 KiB buffers and 16 KiB batches: most frames arrive in pieces and are reassembled.
    let limits = Limits {
        recv_buffer_bytes: 4096,
        recv_buffers: 8,
        batch_bytes_max: 16 << 10,
        ..Limits::default()
    };
    exchange(2, 10_000, limits.clone());
    exchange(
        2,
        10_000,
        Limits {
            force_plain_recv: true,
            ..limits
        },
    );
}

/// Batches of four requests: a sender that appends faster than the kernel sends fills many
/// while one send is in flight.
fn small_batches(send_bytes_max: usize) -> Limits {
    let entry = wire::entry_bytes(16 + clasp_dataplane::request::REQUEST_HEADER_BYTES);
    Limits {
        batch_bytes_max: wire::NET_HEADER_BYTES + 4 * entry,
        send_bytes_max,
        ..Limits::default()
    }
}

#[test]
fn batches_that_fill_behind_a_send_go_out_together_in_order() {
    let ts = exchange(2, 20_000, small_batches(64 << 10));
    let c = ts[0].peer_counters(2);
    assert_eq!(c.frames_received, 20_000);
    assert!(c.batches_sent >= 5_000, "batches of at most four: {c:?}");
    assert!(
        c.batch_sends < c.batches_sent,
        "batches filled behind a send went out together: {c:?}"
    );
}

#[test]
fn one_batch_a_send_where_send_bytes_max_is_the_batch() {
    let limits = small_batches(0);
    let ts = exchange(2, 5_000, limits);
    let c = ts[0].peer_counters(2);
    assert_eq!(c.batch_sends, c.batches_sent, "{c:?}");
}

#[test]
fn control_between_coalesced_batches_keeps_the_sequence() {
    init_logs();
    let mut ts = mesh(2, &small_batches(64 << 10));
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    let mut out = Outbox::new(1, &[2], 8_000, 16, 2);
    let mut controls = 0u16;
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        // A control frame queued while batches wait behind a send goes out ahead of them.
        if controls < 200 && ts[0].send_control(2, controls, b"between").unwrap() {
            controls += 1;
        }
        rs[1].frames.len() == 8_000 && rs[1].controls.len() == 200
    });
    assert_in_order(&rs[1].from(1), 1, 8_000);
    assert!(rs[1].lost().is_empty(), "{:?}", rs[1].events);
    let c = ts[0].peer_counters(2);
    assert!(c.batch_sends < c.batches_sent, "{c:?}");
}

#[test]
fn control_messages_arrive_validated() {
    init_logs();
    let mut ts = mesh(2, &Limits::default());
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    for i in 0..100u16 {
        assert!(
            ts[0]
                .send_control(2, i, &vec![i as u8; i as usize * 10])
                .unwrap()
        );
    }
    pump(&mut ts, &mut rs, |_, rs| rs[1].controls.len() == 100);
    for (i, (from, kind, body)) in rs[1].controls.iter().enumerate() {
        assert_eq!((*from, *kind as usize, body.len()), (1, i, i * 10));
    }
}
