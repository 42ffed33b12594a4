//! The remote half of `clasp bench dispatch`: what a remote chained request costs through the
//! real transport (io_uring, ring-format batches, credits) between two transports on loopback,
//! against a peer baseline a user would write by hand (tokio/epoll TCP, postcard, one write per
//! batch, buffers reused).
//!
//! CPU per request is user + system CPU of the whole process (`getrusage(RUSAGE_SELF)`: both
//! sides' threads and io_uring's kernel workers) over the measured section only, divided by the
//! requests, at saturation: the sender appends as fast as the transport takes requests. Each
//! figure is the median of interleaved repetitions (every configuration once per round), so a
//! burst of load from other work on the machine hits all of them alike.
//!
//! Both paths do the same work per request: the sender writes a request (a 48-byte header, an
//! 8-byte key, a 16-byte payload) and hands it to its batch; the receiver validates it and
//! copies it once into a shared-memory-layout ring (`shmring` on the heap), which it drains.

use clasp_dataplane::request::{Request, RequestHeader, frame_len};
use clasp_dataplane::transport::{
    ClusterSecret, Delivered, Inbound, Limits, PeerId, Transport, TransportConfig, wire,
};
use clasp_shmring::{Consumer, Producer, RingConfig, heap::HeapRing};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Batch sizes of β.
pub const BATCH_SIZES: [usize; 4] = [1, 8, 32, 128];
/// Destination counts of γ.
pub const DESTINATIONS: [usize; 3] = [1, 2, 4];
const KEY_BYTES: usize = 8;
const PAYLOAD_BYTES: usize = 16;
/// Bytes of the receiver's ring.
const RING_BYTES: usize = 1 << 20;
/// A measured run gives up after this (a bug, not a slow machine).
/// How long the receiver parks when idle. Parking beats busy polling here: with a receiver
/// that polls without waiting, batch 32 cost 471 ns per request against 202 ns parked.
const RX_WAIT: Duration = Duration::from_millis(1);
/// How long the sender parks when the transport refuses a request (until a completion).
const TX_WAIT: Duration = Duration::from_millis(1);
const RUN_DEADLINE: Duration = Duration::from_secs(20);

/// How much to measure.
#[derive(Clone, Debug)]
pub struct DispatchOpts {
    /// Requests per measured run at batch ≥ 32 (smaller batches use fewer; see `requests_for`).
    pub requests: u64,
    /// Interleaved repetitions (the median is reported).
    pub repetitions: usize,
    /// Round trips for the latency.
    pub round_trips: usize,
    /// Request rate for γ (requests per second, spread over the destinations).
    pub gamma_rate_per_s: u64,
    /// Length of one γ run.
    pub gamma_run_ms: u64,
}

impl Default for DispatchOpts {
    fn default() -> Self {
        DispatchOpts {
            requests: 1_000_000,
            repetitions: 5,
            round_trips: 5_000,
            gamma_rate_per_s: 200_000,
            gamma_run_ms: 500,
        }
    }
}

impl DispatchOpts {
    /// A fast configuration for tests.
    pub fn quick() -> Self {
        DispatchOpts {
            requests: 20_000,
            repetitions: 1,
            round_trips: 200,
            gamma_rate_per_s: 50_000,
            gamma_run_ms: 50,
        }
    }

    fn requests_for(&self, batch: usize) -> u64 {
        // Batch 1 pays a send per request: a quarter of the requests keeps runs short.
        if batch < 8 {
            (self.requests / 4).max(1000)
        } else {
            self.requests
        }
    }
}

/// The remote half of `clasp bench dispatch --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoteDispatch {
    /// CPU ns per remote chained request (both sides) by batch size.
    pub remote_ns_per_request: BTreeMap<String, f64>,
    /// Added CPU ns per request for each extra remote destination at the same total rate
    /// (slope over 1, 2, 4 destinations).
    pub per_destination_ns: f64,
    /// CPU ns per request by number of destinations at `gamma_rate_per_s`.
    pub per_destination_detail_ns: BTreeMap<String, f64>,
    /// The total request rate of the γ runs.
    pub gamma_rate_per_s: u64,
    /// The tokio + postcard baseline, CPU ns per request, by batch size.
    pub baseline_remote_ns_per_request: BTreeMap<String, f64>,
    /// One-way latency of one request (half a round trip), median, µs.
    pub remote_one_way_us: f64,
    /// The same for the baseline, µs.
    pub baseline_one_way_us: f64,
    /// Receive path the transport used ("multishot" or "plain").
    pub receive_path: String,
    /// Repetitions each median is over.
    pub repetitions: usize,
}

/// CPU seconds (user + system) of this process so far.
pub fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF covers every thread of the process.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU seconds (user + system) of the calling thread so far (for the debug output).
fn thread_cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD covers the calling thread.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Writes request `seq` into `out` (the emission; the frame is written once).
#[inline]
fn emit(seq: u64, out: &mut [u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)]) {
    let key = seq.to_le_bytes();
    let payload = [seq as u8; PAYLOAD_BYTES];
    RequestHeader {
        operator: 1,
        key_group: (seq % 1024) as u16,
        request_id: seq,
        root_id: seq,
        key_hash: seq.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ..Default::default()
    }
    .write(&key, &payload, out);
}

fn secret() -> ClusterSecret {
    match ClusterSecret::new(b"clasp-bench-dispatch-secret-0001".to_vec()) {
        Ok(s) => s,
        Err(_) => unreachable!("the constant secret has a valid length"),
    }
}

/// The receiving worker's side: copy into the ring, drain it, count.
struct RingSink {
    producer: Producer<HeapRing>,
    consumer: Consumer<HeapRing>,
    received: u64,
    checksum: u64,
    echo: bool,
    echo_pending: u64,
}

impl RingSink {
    fn new(echo: bool) -> Self {
        let (producer, consumer) =
            clasp_shmring::heap::channel(RingConfig::new(RING_BYTES)).expect("heap ring");
        RingSink {
            producer,
            consumer,
            received: 0,
            checksum: 0,
            echo,
            echo_pending: 0,
        }
    }

    /// The executor's half, kept minimal: read each frame's id in place and release.
    fn drain(&mut self) {
        let mut sum = 0u64;
        let _ = self.consumer.pop_batch(usize::MAX, |f| {
            sum = sum.wrapping_add(RequestHeader::peek(f).map_or(0, |h| h.request_id));
        });
        self.checksum = self.checksum.wrapping_add(sum);
    }
}

impl Inbound for RingSink {
    #[inline]
    fn deliver(&mut self, _from: PeerId, frame: &[u8]) -> Delivered {
        match self.producer.reserve(frame.len()) {
            Ok(mut g) => {
                g.copy_from_slice(frame);
                g.commit();
                self.received += 1;
                if self.echo {
                    self.echo_pending += 1;
                }
                Delivered::Accepted
            }
            Err(_) => Delivered::Full,
        }
    }
    fn control(&mut self, _: PeerId, _: u16, _: &[u8]) {}
}

fn limits_for(batch: usize, age_us: u64) -> Limits {
    let entry = wire::entry_bytes(frame_len(KEY_BYTES, PAYLOAD_BYTES));
    let mut l = Limits {
        batch_bytes_max: wire::NET_HEADER_BYTES + batch * entry,
        batch_age_max_us: age_us,
        ..Limits::default()
    };
    // Ablations, for the README's "what each change bought".
    if let Some(us) = std::env::var("CLASP_DISPATCH_PARK_MIN_WAIT_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        l.park_min_wait_us = us;
    }
    if std::env::var_os("CLASP_DISPATCH_SHARED_RING").is_some() {
        l.single_issuer = false;
    }
    l
}

/// Where the transports of one run find each other. Each transport is created, polled and
/// dropped on its own thread (the network thread of its worker), as a single-issuer ring
/// requires.
struct Rendezvous {
    addrs: std::sync::Mutex<BTreeMap<PeerId, std::net::SocketAddr>>,
    listening: Barrier,
    up: std::sync::atomic::AtomicUsize,
    parties: usize,
}

impl Rendezvous {
    fn new(parties: usize) -> Arc<Self> {
        Arc::new(Rendezvous {
            addrs: std::sync::Mutex::new(BTreeMap::new()),
            listening: Barrier::new(parties),
            up: std::sync::atomic::AtomicUsize::new(0),
            parties,
        })
    }

    /// Starts transport `id` on this thread, connects it to `peers`, and polls until every
    /// party's connections are up.
    fn join(&self, id: PeerId, peers: &[PeerId], limits: &Limits) -> Transport {
        let mut c =
            TransportConfig::new(id, "127.0.0.1:0".parse().expect("addr"), secret(), 0xBE7C);
        c.limits = limits.clone();
        let mut t = Transport::start(c).expect("transport");
        self.addrs.lock().expect("addrs").insert(id, t.local_addr());
        self.listening.wait();
        for &p in peers {
            let addr = self.addrs.lock().expect("addrs")[&p];
            t.connect(p, addr).expect("connect");
        }
        let mut sink = RingSink::new(false);
        let start = Instant::now();
        while !peers.iter().all(|&p| t.is_connected(p)) {
            assert!(start.elapsed() < RUN_DEADLINE, "transports did not connect");
            t.poll(Duration::from_millis(1), &mut sink).expect("poll");
        }
        self.up.fetch_add(1, Ordering::AcqRel);
        // Keep serving the others' handshakes until everyone is connected.
        while self.up.load(Ordering::Acquire) < self.parties {
            assert!(start.elapsed() < RUN_DEADLINE, "transports did not connect");
            t.poll(Duration::from_millis(1), &mut sink).expect("poll");
        }
        // Nobody sends before everyone has stopped polling into this throwaway sink.
        self.listening.wait();
        t
    }
}

/// A named thread (profiles tell the sides apart by name).
fn spawn_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn")
}

/// The measured section's edges. Workers call [`worker_edge`] and the main thread
/// [`main_edge`] at its start and at its end: every worker has arrived (set up, or done)
/// before the main thread reads the CPU clock, and none moves on until it has read it, so the
/// reading neither misses work (a worker running ahead while the main thread waits for a
/// core) nor counts set-up or teardown.
fn worker_edge(b: &Barrier) {
    b.wait();
    b.wait();
}

fn main_edge<T>(b: &Barrier, read: impl FnOnce() -> T) -> T {
    b.wait();
    let v = read();
    b.wait();
    v
}

/// Pins the calling thread to the `side`-th allowed CPU (0: sender, 1: receiver) when the
/// process may use at least two, so that the two sides of every run (transport and baseline
/// alike) run on their own cores, as two workers would, instead of wherever the scheduler
/// puts them that moment (sharing one core makes both paths look cheaper, and which happens
/// varies from run to run with the machine's other load). `CLASP_DISPATCH_NO_PIN=1` turns it
/// off. Verified with `sched_getcpu` ([`crate::affinity`]).
fn pin(side: usize) {
    if std::env::var_os("CLASP_DISPATCH_NO_PIN").is_some() {
        return;
    }
    let cpus = crate::affinity::allowed_cpus();
    if cpus.len() < 2 {
        return;
    }
    if let Err(e) = crate::affinity::pin_current_thread(cpus[side % cpus.len()]) {
        eprintln!("dispatch bench: {e}; this side runs unpinned");
    }
}

/// β: CPU ns per request at `batch` requests per batch, at saturation.
fn remote_run(batch: usize, requests: u64) -> (f64, bool) {
    // A long age limit: batches leave full (by size), as at saturation.
    let limits = limits_for(batch, 1_000_000);
    let meet = Rendezvous::new(2);
    let barrier = Arc::new(Barrier::new(3));
    let done = Arc::new(AtomicBool::new(false));
    let rx = {
        let (barrier, done, meet, limits) =
            (barrier.clone(), done.clone(), meet.clone(), limits.clone());
        spawn_named("dispatch-rx", move || {
            pin(1);
            let mut b = meet.join(2, &[1], &limits);
            let mut sink = RingSink::new(false);
            worker_edge(&barrier);
            let cpu0 = thread_cpu_s();
            let start = Instant::now();
            while sink.received < requests {
                assert!(
                    start.elapsed() < RUN_DEADLINE,
                    "receiver stalled at {}",
                    sink.received
                );
                b.poll(RX_WAIT, &mut sink).expect("poll");
                sink.drain();
            }
            done.store(true, Ordering::Release);
            let cpu = thread_cpu_s() - cpu0;
            worker_edge(&barrier);
            (sink.checksum, b.counters(), cpu)
        })
    };
    let tx = {
        let (barrier, done, meet) = (barrier.clone(), done.clone(), meet.clone());
        spawn_named("dispatch-tx", move || {
            pin(0);
            let mut a = meet.join(1, &[2], &limits);
            let mut sink = RingSink::new(false);
            let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
            worker_edge(&barrier);
            let cpu0 = thread_cpu_s();
            let mut seq = 0u64;
            while seq < requests {
                emit(seq, &mut frame);
                while !a.try_append(2, &frame).expect("append") {
                    // Refused (no credit, or the batch is full while the last one is being
                    // sent): poll with a timeout, as a network thread would, so the sender
                    // parks until a completion instead of spinning on empty turns.
                    a.poll(TX_WAIT, &mut sink).expect("poll");
                }
                seq += 1;
            }
            a.flush_now();
            while !done.load(Ordering::Acquire) {
                a.poll(Duration::from_micros(100), &mut sink).expect("poll");
            }
            let cpu = thread_cpu_s() - cpu0;
            worker_edge(&barrier);
            (a.counters(), a.peer_counters(2), cpu)
        })
    };
    let (cpu0, t0) = main_edge(&barrier, || (process_cpu_s(), Instant::now()));
    let (cpu1, wall) = main_edge(&barrier, || (process_cpu_s(), t0.elapsed()));
    let cpu = cpu1 - cpu0;
    let (checksum, rx_counters, rx_cpu) = rx.join().expect("receiver");
    let (tx_counters, tx_peer, tx_cpu) = tx.join().expect("sender");
    if std::env::var_os("CLASP_DISPATCH_DEBUG").is_some() {
        eprintln!(
            "batch {batch}: {requests} requests, wall {wall:?}, cpu {cpu:.3}s (sender thread \
             {tx_cpu:.3}s, receiver thread {rx_cpu:.3}s), sender {tx_counters:?} {tx_peer:?}, \
             receiver {rx_counters:?}",
        );
    }
    let want: u64 = (0..requests).fold(0u64, |s, i| s.wrapping_add(i));
    assert_eq!(checksum, want, "requests lost or corrupted");
    (cpu * 1e9 / requests as f64, tx_counters.multishot)
}

/// γ: CPU ns per request at a fixed total rate spread over `dests` destinations (batches
/// leave by size or by the default 50 µs age).
fn gamma_run(dests: usize, rate_per_s: u64, run_ms: u64) -> f64 {
    let limits = Limits::default();
    let meet = Rendezvous::new(dests + 1);
    let total = rate_per_s * run_ms / 1000;
    let barrier = Arc::new(Barrier::new(dests + 2));
    let done = Arc::new(AtomicBool::new(false));
    let per_dest = total / dests as u64;
    let rxs: Vec<_> = (0..dests)
        .map(|d| {
            let (barrier, done, meet, limits) =
                (barrier.clone(), done.clone(), meet.clone(), limits.clone());
            std::thread::spawn(move || {
                pin(1);
                let mut r = meet.join(d as PeerId + 2, &[], &limits);
                let mut sink = RingSink::new(false);
                worker_edge(&barrier);
                while sink.received < per_dest && !done.load(Ordering::Acquire) {
                    r.poll(Duration::from_millis(1), &mut sink).expect("poll");
                    sink.drain();
                }
                worker_edge(&barrier);
                // Serve on until the sender is done with us.
                while !done.load(Ordering::Acquire) {
                    r.poll(Duration::from_millis(1), &mut sink).expect("poll");
                }
                sink.received
            })
        })
        .collect();
    let tx = {
        let (barrier, meet) = (barrier.clone(), meet.clone());
        std::thread::spawn(move || {
            pin(0);
            let peers: Vec<PeerId> = (0..dests).map(|d| d as PeerId + 2).collect();
            let mut a = meet.join(1, &peers, &limits);
            let mut sink = RingSink::new(false);
            let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
            worker_edge(&barrier);
            // Paced in 100 µs ticks: each tick appends its share round-robin, then parks.
            let tick = Duration::from_micros(100);
            let per_tick = (rate_per_s / 10_000).max(1);
            let t0 = Instant::now();
            let mut seq = 0u64;
            let mut next = t0;
            while seq < per_dest * dests as u64 {
                for _ in 0..per_tick {
                    if seq >= per_dest * dests as u64 {
                        break;
                    }
                    emit(seq, &mut frame);
                    let d = (seq % dests as u64) as u32 + 2;
                    while !a.try_append(d, &frame).expect("append") {
                        a.poll(TX_WAIT, &mut sink).expect("poll");
                    }
                    seq += 1;
                }
                next += tick;
                while Instant::now() < next {
                    a.poll(next.saturating_duration_since(Instant::now()), &mut sink)
                        .expect("poll");
                }
            }
            let end = Instant::now() + Duration::from_millis(50);
            while Instant::now() < end {
                a.poll(Duration::from_millis(1), &mut sink).expect("poll");
            }
            worker_edge(&barrier);
        })
    };
    let cpu0 = main_edge(&barrier, process_cpu_s);
    let cpu = main_edge(&barrier, process_cpu_s) - cpu0;
    tx.join().expect("sender");
    done.store(true, Ordering::Release);
    let got: u64 = rxs.into_iter().map(|h| h.join().expect("receiver")).sum();
    assert_eq!(got, per_dest * dests as u64, "γ run lost requests");
    cpu * 1e9 / got as f64
}

/// One-way latency: half the median round trip of one request A → B → A, batches leaving at
/// once (age limit 0).
fn remote_latency_us(round_trips: usize) -> f64 {
    let limits = limits_for(1, 0);
    let meet = Rendezvous::new(2);
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (stop, meet, limits) = (stop.clone(), meet.clone(), limits.clone());
        std::thread::spawn(move || {
            let mut b = meet.join(2, &[1], &limits);
            let mut sink = RingSink::new(true);
            while !stop.load(Ordering::Acquire) {
                b.poll(Duration::from_millis(1), &mut sink).expect("poll");
                let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
                while sink.echo_pending > 0 {
                    let mut got = None;
                    let _ = sink.consumer.pop_batch(1, |f| {
                        let n = frame.len().min(f.len());
                        frame[..n].copy_from_slice(&f[..n]);
                        got = Some(());
                    });
                    if got.is_none() {
                        break;
                    }
                    while !b.try_append(1, &frame).expect("append") {
                        b.poll(Duration::ZERO, &mut sink).expect("poll");
                    }
                    sink.echo_pending -= 1;
                }
            }
        })
    };
    let mut a = meet.join(1, &[2], &limits);
    let mut sink = RingSink::new(false);
    let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
    let mut rtts = Vec::with_capacity(round_trips);
    for i in 0..round_trips as u64 {
        emit(i, &mut frame);
        let t0 = Instant::now();
        while !a.try_append(2, &frame).expect("append") {
            a.poll(Duration::ZERO, &mut sink).expect("poll");
        }
        a.flush_now();
        let want = sink.received + 1;
        while sink.received < want {
            assert!(
                t0.elapsed() < RUN_DEADLINE,
                "echo {i} lost: {:?} {:?}",
                a.counters(),
                a.peer_counters(2)
            );
            a.poll(Duration::from_millis(1), &mut sink).expect("poll");
        }
        rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        sink.drain();
    }
    stop.store(true, Ordering::Release);
    echo.join().expect("echo");
    median(rtts) / 2.0
}

/// The baseline's request on the wire: the same fields, serde-encoded with postcard.
#[derive(Serialize, Deserialize)]
struct WireRequest<'a> {
    operator: u16,
    key_group: u16,
    flags: u16,
    epoch: u16,
    dest: u16,
    root_home: u16,
    source: u16,
    key_hash: u64,
    request_id: u64,
    root_id: u64,
    admitted_ns: u64,
    #[serde(borrow)]
    key: &'a [u8],
    #[serde(borrow)]
    payload: &'a [u8],
}

mod baseline {
    //! Tokio (epoll) TCP with postcard: what a user would write by hand. Batches are a
    //! 4-byte length and a 4-byte count followed by postcard-encoded requests, written with
    //! one `write_all` per batch from a reused buffer; the receiver reads into a reused
    //! buffer, decodes each request and writes it into the ring as a request frame.
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("tokio runtime")
    }

    /// Encodes request `seq` the way a user would: fill the struct, serialize.
    #[inline]
    fn encode(seq: u64, buf: &mut Vec<u8>) {
        let key = seq.to_le_bytes();
        let payload = [seq as u8; PAYLOAD_BYTES];
        let r = WireRequest {
            operator: 1,
            key_group: (seq % 1024) as u16,
            flags: 0,
            epoch: 0,
            dest: 0,
            root_home: 0,
            source: 0,
            key_hash: seq.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            request_id: seq,
            root_id: seq,
            admitted_ns: 0,
            key: &key,
            payload: &payload,
        };
        let before = buf.len();
        buf.resize(before + 128, 0);
        let used = postcard::to_slice(&r, &mut buf[before..])
            .map(|s| s.len())
            .unwrap_or(0);
        buf.truncate(before + used);
    }

    /// Decodes every complete batch in `buf[..len]` into the sink; returns bytes consumed.
    fn decode(buf: &[u8], sink: &mut RingSink) -> usize {
        let mut at = 0;
        while buf.len() - at >= 8 {
            let blen = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or([0; 4])) as usize;
            let count = u32::from_le_bytes(buf[at + 4..at + 8].try_into().unwrap_or([0; 4]));
            if buf.len() - at - 8 < blen {
                break;
            }
            let mut body = &buf[at + 8..at + 8 + blen];
            for _ in 0..count {
                let Ok((r, rest)) = postcard::take_from_bytes::<WireRequest<'_>>(body) else {
                    break;
                };
                body = rest;
                let len = frame_len(r.key.len(), r.payload.len());
                loop {
                    match sink.producer.reserve(len) {
                        Ok(mut g) => {
                            RequestHeader {
                                operator: r.operator,
                                key_group: r.key_group,
                                flags: r.flags,
                                epoch: r.epoch,
                                dest: r.dest,
                                root_home: r.root_home,
                                source: r.source,
                                key_hash: r.key_hash,
                                request_id: r.request_id,
                                root_id: r.root_id,
                                admitted_ns: r.admitted_ns,
                            }
                            .write(r.key, r.payload, &mut g);
                            g.commit();
                            sink.received += 1;
                            break;
                        }
                        Err(_) => sink.drain(),
                    }
                }
            }
            at += 8 + blen;
        }
        at
    }

    /// CPU ns per request at `batch`, saturated.
    pub(super) fn run(batch: usize, requests: u64) -> f64 {
        let listener = runtime()
            .block_on(async { TcpListener::bind("127.0.0.1:0").await })
            .expect("bind");
        let std_listener = listener.into_std().expect("std listener");
        let addr = std_listener.local_addr().expect("addr");
        let barrier = Arc::new(Barrier::new(3));
        let rx = {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                pin(1);
                let rt = runtime();
                rt.block_on(async move {
                    let l = TcpListener::from_std(std_listener).expect("listener");
                    let (mut s, _) = l.accept().await.expect("accept");
                    s.set_nodelay(true).expect("nodelay");
                    let mut sink = RingSink::new(false);
                    let mut buf = vec![0u8; 1 << 20];
                    let mut filled = 0;
                    worker_edge(&barrier);
                    while sink.received < requests {
                        let n = s.read(&mut buf[filled..]).await.expect("read");
                        assert!(n > 0, "baseline sender closed early");
                        filled += n;
                        let used = decode(&buf[..filled], &mut sink);
                        buf.copy_within(used..filled, 0);
                        filled -= used;
                        sink.drain();
                    }
                    worker_edge(&barrier);
                    sink.checksum
                })
            })
        };
        let tx = {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                pin(0);
                let rt = runtime();
                rt.block_on(async move {
                    let mut s = TcpStream::connect(addr).await.expect("connect");
                    s.set_nodelay(true).expect("nodelay");
                    let mut buf = Vec::with_capacity(1 << 16);
                    worker_edge(&barrier);
                    let mut seq = 0;
                    while seq < requests {
                        buf.clear();
                        buf.extend_from_slice(&[0; 8]);
                        let n = (batch as u64).min(requests - seq);
                        for _ in 0..n {
                            encode(seq, &mut buf);
                            seq += 1;
                        }
                        let blen = (buf.len() - 8) as u32;
                        buf[..4].copy_from_slice(&blen.to_le_bytes());
                        buf[4..8].copy_from_slice(&(n as u32).to_le_bytes());
                        s.write_all(&buf).await.expect("write");
                    }
                    worker_edge(&barrier);
                })
            })
        };
        let cpu0 = main_edge(&barrier, process_cpu_s);
        let cpu = main_edge(&barrier, process_cpu_s) - cpu0;
        let checksum = rx.join().expect("receiver");
        tx.join().expect("sender");
        let want: u64 = (0..requests).fold(0u64, |s, i| s.wrapping_add(i));
        assert_eq!(checksum, want, "baseline lost requests");
        cpu * 1e9 / requests as f64
    }

    /// Half the median round trip of one request, µs.
    pub(super) fn latency_us(round_trips: usize) -> f64 {
        let rt = runtime();
        let listener = rt
            .block_on(async { TcpListener::bind("127.0.0.1:0").await })
            .expect("bind");
        let std_listener = listener.into_std().expect("std");
        let addr = std_listener.local_addr().expect("addr");
        let echo = std::thread::spawn(move || {
            runtime().block_on(async move {
                let l = TcpListener::from_std(std_listener).expect("listener");
                let (mut s, _) = l.accept().await.expect("accept");
                s.set_nodelay(true).expect("nodelay");
                let mut buf = vec![0u8; 4096];
                loop {
                    let mut hdr = [0u8; 8];
                    if s.read_exact(&mut hdr).await.is_err() {
                        return;
                    }
                    let blen = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) as usize;
                    if blen > buf.len() || s.read_exact(&mut buf[..blen]).await.is_err() {
                        return;
                    }
                    let mut sink = RingSink::new(false);
                    let mut whole = hdr.to_vec();
                    whole.extend_from_slice(&buf[..blen]);
                    decode(&whole, &mut sink);
                    if s.write_all(&whole).await.is_err() {
                        return;
                    }
                }
            })
        });
        let rtts = rt.block_on(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.set_nodelay(true).expect("nodelay");
            let mut buf = Vec::with_capacity(256);
            let mut back = vec![0u8; 256];
            let mut rtts = Vec::with_capacity(round_trips);
            for i in 0..round_trips as u64 {
                let t0 = Instant::now();
                buf.clear();
                buf.extend_from_slice(&[0; 8]);
                encode(i, &mut buf);
                let blen = (buf.len() - 8) as u32;
                buf[..4].copy_from_slice(&blen.to_le_bytes());
                buf[4..8].copy_from_slice(&1u32.to_le_bytes());
                s.write_all(&buf).await.expect("write");
                s.read_exact(&mut back[..buf.len()]).await.expect("read");
                rtts.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            rtts
        });
        echo.join().expect("echo");
        median(rtts) / 2.0
    }
}

/// Checks that both paths deliver every request intact before anything is timed.
fn check() {
    let (ns, _) = remote_run(8, 2_000);
    assert!(ns.is_finite());
    assert!(baseline::run(8, 2_000).is_finite());
    let frame = {
        let mut f = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
        emit(7, &mut f);
        f
    };
    assert!(Request::parse(&frame).is_ok());
}

/// The batch-32 comparison alone (for tuning): `reps` interleaved pairs of a transport run and
/// a baseline run at `batch`; returns (transport ns/request, baseline ns/request), every run.
/// `CLASP_DISPATCH_ONLY=transport` (or `baseline`) runs one side only, for profiling.
pub fn compare(batch: usize, requests: u64, reps: usize) -> (Vec<f64>, Vec<f64>) {
    check();
    let (mut t, mut b) = (Vec::new(), Vec::new());
    let only = std::env::var("CLASP_DISPATCH_ONLY").unwrap_or_default();
    for _ in 0..reps {
        if only != "baseline" {
            t.push(remote_run(batch, requests).0);
        }
        if only != "transport" {
            b.push(baseline::run(batch, requests));
        }
    }
    (t, b)
}

/// The one-way latency alone (transport, then baseline), µs.
pub fn latency(round_trips: usize) -> (f64, f64) {
    (
        remote_latency_us(round_trips),
        baseline::latency_us(round_trips),
    )
}

/// Runs the remote half of the dispatch benchmark.
pub fn run(opts: &DispatchOpts) -> RemoteDispatch {
    check();
    let mut remote: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut base: Vec<f64> = Vec::new();
    let mut gamma: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut multishot = false;
    for _ in 0..opts.repetitions {
        for &b in &BATCH_SIZES {
            let (ns, m) = remote_run(b, opts.requests_for(b));
            multishot = m;
            remote.entry(b).or_default().push(ns);
        }
        base.push(baseline::run(32, opts.requests));
        for &d in &DESTINATIONS {
            gamma.entry(d).or_default().push(gamma_run(
                d,
                opts.gamma_rate_per_s,
                opts.gamma_run_ms,
            ));
        }
    }
    let detail: BTreeMap<String, f64> = gamma
        .into_iter()
        .map(|(d, v)| (d.to_string(), median(v)))
        .collect();
    let g1 = detail.get("1").copied().unwrap_or(f64::NAN);
    let g4 = detail.get("4").copied().unwrap_or(f64::NAN);
    RemoteDispatch {
        remote_ns_per_request: remote
            .into_iter()
            .map(|(b, v)| (b.to_string(), median(v)))
            .collect(),
        per_destination_ns: (g4 - g1) / 3.0,
        per_destination_detail_ns: detail,
        gamma_rate_per_s: opts.gamma_rate_per_s,
        baseline_remote_ns_per_request: [("32".to_string(), median(base))].into_iter().collect(),
        remote_one_way_us: remote_latency_us(opts.round_trips),
        baseline_one_way_us: baseline::latency_us(opts.round_trips),
        receive_path: if multishot {
            "multishot".into()
        } else {
            "plain".into()
        },
        repetitions: opts.repetitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_dispatch_bench_runs_and_reports_every_field() {
        let r = run(&DispatchOpts::quick());
        assert_eq!(r.remote_ns_per_request.len(), 4);
        assert!(
            r.remote_ns_per_request
                .values()
                .all(|v| v.is_finite() && *v > 0.0)
        );
        assert!(r.baseline_remote_ns_per_request["32"] > 0.0);
        assert!(r.remote_one_way_us > 0.0);
        let json = serde_json::to_value(&r).expect("json");
        assert!(json.get("per_destination_ns").is_some());
    }
}
