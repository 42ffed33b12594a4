//! Shared helpers of the transport tests: request frames with sequence numbers, a recording
//! `Inbound`, and a driver that polls several transports until a condition holds or a
//! deadline passes (so no test can hang).
#![allow(dead_code)]

use clasp_dataplane::request::{RequestHeader, frame_len};
use clasp_dataplane::transport::{
    ClusterSecret, Delivered, Event, Inbound, Limits, PeerId, Transport, TransportConfig,
};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Every test ends within this, pass or fail.
pub const TEST_DEADLINE: Duration = Duration::from_secs(30);
pub const CLUSTER: u64 = 0xC1A5_7E57;

pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::WARN)
        .try_init();
}

pub fn secret() -> ClusterSecret {
    ClusterSecret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap()
}

pub fn config(id: PeerId, limits: Limits) -> TransportConfig {
    let mut c = TransportConfig::new(id, "127.0.0.1:0".parse().unwrap(), secret(), CLUSTER);
    c.limits = limits;
    c.limits.connect_timeout_ms = 5_000;
    c
}

/// A request frame whose request id is `(sender << 32) | seq`, with a payload of `extra` bytes.
pub fn request(sender: PeerId, seq: u32, extra: usize) -> Vec<u8> {
    let key = seq.to_le_bytes();
    let payload = vec![(seq % 251) as u8; extra];
    let mut out = vec![0; frame_len(key.len(), payload.len())];
    RequestHeader {
        request_id: ((sender as u64) << 32) | seq as u64,
        key_group: (seq % 1024) as u16,
        ..Default::default()
    }
    .write(&key, &payload, &mut out);
    out
}

pub fn request_id(frame: &[u8]) -> u64 {
    RequestHeader::peek(frame).unwrap().request_id
}

/// Records everything; reports `Full` while `full_budget > 0` every `full_every`-th offer.
#[derive(Default)]
pub struct Recorder {
    pub frames: Vec<(PeerId, u64)>,
    pub controls: Vec<(PeerId, u16, Vec<u8>)>,
    pub events: Vec<Event>,
    pub full_every: u64,
    pub full_budget: u64,
    pub offers: u64,
}

impl Inbound for Recorder {
    fn deliver(&mut self, from: PeerId, frame: &[u8]) -> Delivered {
        self.offers += 1;
        if self.full_budget > 0 && self.full_every > 0 && self.offers % self.full_every == 0 {
            self.full_budget -= 1;
            return Delivered::Full;
        }
        self.frames.push((from, request_id(frame)));
        Delivered::Accepted
    }
    fn control(&mut self, from: PeerId, kind: u16, body: &[u8]) {
        self.controls.push((from, kind, body.to_vec()));
    }
    fn event(&mut self, event: Event) {
        self.events.push(event);
    }
}

impl Recorder {
    pub fn from(&self, peer: PeerId) -> Vec<u64> {
        self.frames
            .iter()
            .filter(|(p, _)| *p == peer)
            .map(|(_, id)| *id)
            .collect()
    }
    pub fn lost(&self) -> Vec<&Event> {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::PeerLost { .. }))
            .collect()
    }
    pub fn refused(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Refused { .. }))
            .count()
    }
}

/// Starts transports with ids 1..=n and connects every ordered pair.
pub fn mesh(n: u32, limits: &Limits) -> Vec<Transport> {
    let mut ts: Vec<Transport> = (1..=n)
        .map(|id| Transport::start(config(id, limits.clone())).unwrap())
        .collect();
    let addrs: Vec<_> = ts.iter().map(|t| t.local_addr()).collect();
    for (i, t) in ts.iter_mut().enumerate() {
        for (j, a) in addrs.iter().enumerate() {
            if i != j {
                t.connect(j as u32 + 1, *a).unwrap();
            }
        }
    }
    ts
}

/// Polls every transport (each with its recorder) until `done` or the deadline.
pub fn pump(
    ts: &mut [Transport],
    rs: &mut [Recorder],
    mut done: impl FnMut(&mut [Transport], &mut [Recorder]) -> bool,
) {
    let start = Instant::now();
    while !done(ts, rs) {
        assert!(start.elapsed() < TEST_DEADLINE, "test deadline passed");
        for (t, r) in ts.iter_mut().zip(rs.iter_mut()) {
            t.poll(Duration::from_micros(200), r).unwrap();
        }
    }
}

/// Waits until every ordered pair is connected.
pub fn wait_connected(ts: &mut [Transport], rs: &mut [Recorder]) {
    let n = ts.len() as u32;
    pump(ts, rs, |ts, _| {
        ts.iter()
            .enumerate()
            .all(|(i, t)| (1..=n).all(|p| p == i as u32 + 1 || t.is_connected(p)))
    });
}

/// Per-destination queues of frames to send, with their sequence numbers.
pub struct Outbox {
    pub queues: Vec<VecDeque<Vec<u8>>>,
}

impl Outbox {
    /// `count` frames from `from` to each of `to`, numbered 0.. per destination.
    pub fn new(from: PeerId, to: &[PeerId], count: u32, extra: usize, peers: usize) -> Self {
        let mut queues = vec![VecDeque::new(); peers + 1];
        for &d in to {
            queues[d as usize] = (0..count)
                .map(|s| request(from, s, extra + (s as usize % 7) * 3))
                .collect();
        }
        Outbox { queues }
    }
    /// Appends as many as the transport takes now.
    pub fn push(&mut self, t: &mut Transport) {
        for (d, q) in self.queues.iter_mut().enumerate() {
            while let Some(f) = q.front() {
                if t.try_append(d as u32, f).unwrap() {
                    q.pop_front();
                } else {
                    break;
                }
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.is_empty())
    }
}

/// Asserts that `got` is exactly `from`'s frames 0..count, in order.
pub fn assert_in_order(got: &[u64], from: PeerId, count: u32) {
    assert_eq!(
        got.len(),
        count as usize,
        "frames from {from}: lost or duplicated"
    );
    for (i, id) in got.iter().enumerate() {
        assert_eq!(
            *id,
            ((from as u64) << 32) | i as u64,
            "frame {i} from {from} out of order"
        );
    }
}
