//! Credit-based flow control: tiny windows, an `Inbound` that is full for a while, and a
//! crossed placement (A → B → A) with tiny credits and bounded queues that must not deadlock.

mod transport_support;
use clasp_dataplane::transport::{Delivered, Event, Inbound, Limits, PeerId};
use std::collections::VecDeque;
use transport_support::*;

fn tiny() -> Limits {
    Limits {
        batch_bytes_max: 512,
        data_credit_bytes: 1024,
        control_credit_bytes: 1024,
        ..Limits::default()
    }
}

#[test]
fn tiny_credits_force_flow_control_without_loss() {
    init_logs();
    let mut ts = mesh(2, &tiny());
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    let count = 3_000;
    let mut out = Outbox::new(1, &[2], count, 40, 2);
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        rs[1].frames.len() == count as usize
    });
    assert_in_order(&rs[1].from(1), 1, count);
    let c = ts[0].peer_counters(2);
    assert!(
        c.append_refusals > 0,
        "the window was exhausted at some point: {c:?}"
    );
}

#[test]
fn a_full_inbound_holds_frames_without_loss_or_reorder() {
    init_logs();
    let mut ts = mesh(2, &tiny());
    let mut rs = vec![
        Recorder::default(),
        Recorder {
            full_every: 3,
            full_budget: 2_000,
            ..Default::default()
        },
    ];
    wait_connected(&mut ts, &mut rs);
    let count = 2_000;
    let mut out = Outbox::new(1, &[2], count, 8, 2);
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        rs[1].frames.len() == count as usize
    });
    assert_in_order(&rs[1].from(1), 1, count);
    assert!(ts[1].peer_counters(1).deliveries_full > 0);
}

#[test]
fn control_passes_while_data_is_held() {
    init_logs();
    let mut ts = mesh(2, &tiny());
    // B refuses every data frame until told otherwise by a control message.
    let mut rs = vec![
        Recorder::default(),
        Recorder {
            full_every: 1,
            full_budget: u64::MAX,
            ..Default::default()
        },
    ];
    wait_connected(&mut ts, &mut rs);
    let mut out = Outbox::new(1, &[2], 200, 8, 2);
    // Fill the data window: nothing is delivered, so the sender runs out of credit.
    pump(&mut ts, &mut rs, |ts, _| {
        out.push(&mut ts[0]);
        ts[0].peer_counters(2).append_refusals > 10
    });
    assert!(ts[0].send_control(2, 7, b"release").unwrap());
    pump(&mut ts, &mut rs, |_, rs| !rs[1].controls.is_empty());
    assert!(rs[1].frames.is_empty());
    rs[1].full_budget = 0;
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        rs[1].frames.len() == 200
    });
    assert_in_order(&rs[1].from(1), 1, 200);
}

/// An operator stage with a bounded input queue: `deliver` says Full when the queue is full;
/// the stage forwards what it holds to `next` (or consumes it when `next` is None).
struct Stage {
    queue: VecDeque<Vec<u8>>,
    capacity: usize,
    consumed: Vec<u64>,
    lost: Vec<Event>,
}

impl Inbound for Stage {
    fn deliver(&mut self, _from: PeerId, frame: &[u8]) -> Delivered {
        if self.queue.len() >= self.capacity {
            return Delivered::Full;
        }
        self.queue.push_back(frame.to_vec());
        Delivered::Accepted
    }
    fn control(&mut self, _: PeerId, _: u16, _: &[u8]) {}
    fn event(&mut self, e: Event) {
        if matches!(e, Event::PeerLost { .. }) {
            self.lost.push(e);
        }
    }
}

#[test]
fn a_crossed_exchange_with_tiny_credits_does_not_deadlock() {
    // o1 on A → o2 on B → o3 on A, tiny windows, queues of 4: B forwards to A only when A's
    // transport takes it (never blocking), A's o3 consumes. A's o1 also keeps sending to B.
    init_logs();
    let mut ts = mesh(2, &tiny());
    let mut st: Vec<Stage> = (0..2)
        .map(|_| Stage {
            queue: VecDeque::new(),
            capacity: 4,
            consumed: vec![],
            lost: vec![],
        })
        .collect();
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    let count = 3_000u32;
    let mut o1 = Outbox::new(1, &[2], count, 24, 2);
    let start = std::time::Instant::now();
    while st[0].consumed.len() < count as usize {
        assert!(
            start.elapsed() < TEST_DEADLINE,
            "deadlock: {} of {count} arrived",
            st[0].consumed.len()
        );
        o1.push(&mut ts[0]);
        // o2 on B: forward, never block; what the transport does not take stays queued.
        while let Some(f) = st[1].queue.front() {
            if ts[1].try_append(1, f).unwrap() {
                st[1].queue.pop_front();
            } else {
                break;
            }
        }
        // o3 on A: consume.
        while let Some(f) = st[0].queue.pop_front() {
            st[0].consumed.push(request_id(&f));
        }
        for (t, s) in ts.iter_mut().zip(st.iter_mut()) {
            t.poll(std::time::Duration::from_micros(200), s).unwrap();
        }
    }
    assert_in_order(&st[0].consumed, 1, count);
    assert!(st.iter().all(|s| s.lost.is_empty()));
}

/// A request larger than a batch goes alone, in a batch of its own, in order with the small
/// ones around it; one larger than the peer's frame limit (or its data window) is refused.
#[test]
fn a_request_larger_than_a_batch_goes_alone_in_order() {
    init_logs();
    let limits = Limits {
        batch_bytes_max: 512,
        frame_bytes_max: 4096,
        data_credit_bytes: 8192,
        ..Limits::default()
    };
    let mut ts = mesh(2, &limits);
    let mut rs = vec![Recorder::default(), Recorder::default()];
    wait_connected(&mut ts, &mut rs);
    let count = 200;
    let mut out = Outbox {
        queues: vec![VecDeque::new(); 3],
    };
    out.queues[2] = (0..count)
        .map(|s| request(1, s, if s % 3 == 0 { 3000 } else { 40 }))
        .collect();
    pump(&mut ts, &mut rs, |ts, rs| {
        out.push(&mut ts[0]);
        rs[1].frames.len() == count as usize
    });
    assert_in_order(&rs[1].from(1), 1, count);
    let err = ts[0].try_append(2, &request(1, count, 5000)).unwrap_err();
    // Named in the terms a user sets the limit in (a bare byte count was all it said).
    let said = err.to_string();
    assert!(said.contains("exceeds the limit"), "{said}");
    assert!(said.contains("--data-credit-bytes"), "{said}");
}
