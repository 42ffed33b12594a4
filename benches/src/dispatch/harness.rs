//! What every measured run of the remote dispatch benchmark shares: the CPU clocks, the request
//! both paths send, the receiving worker's ring, the transports' rendezvous, the barriers that
//! bound the measured section, and the pinning of the two sides to their own cores.

use clasp_dataplane::request::{RequestHeader, frame_len};
use clasp_dataplane::transport::{
    ClusterSecret, Delivered, Inbound, Limits, PeerId, Transport, TransportConfig, wire,
};
use clasp_shmring::{Consumer, Producer, RingConfig, heap::HeapRing};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Bytes of a request's key.
pub(super) const KEY_BYTES: usize = 8;
/// Bytes of a request's payload.
pub(super) const PAYLOAD_BYTES: usize = 16;
/// Bytes of the receiver's ring.
const RING_BYTES: usize = 1 << 20;
/// A measured run gives up after this (a bug, not a slow machine).
pub(super) const RUN_DEADLINE: Duration = Duration::from_secs(20);

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
pub(super) fn thread_cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD covers the calling thread.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Writes request `seq` into `out` (the emission; the frame is written once).
#[inline]
pub(super) fn emit(seq: u64, out: &mut [u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)]) {
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
pub(super) struct RingSink {
    pub(super) producer: Producer<HeapRing>,
    pub(super) consumer: Consumer<HeapRing>,
    /// Requests delivered into the ring.
    pub(super) received: u64,
    /// Sum of the request ids drained (every request arrived intact).
    pub(super) checksum: u64,
    echo: bool,
    /// Requests delivered and not yet echoed back (latency runs).
    pub(super) echo_pending: u64,
}

impl RingSink {
    pub(super) fn new(echo: bool) -> Self {
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
    pub(super) fn drain(&mut self) {
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

/// How a run's sender sends its batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sends {
    /// The transport's default: batches that fill while a send is in flight go out together
    /// in the next (`Limits::send_bytes_max`).
    Coalesced,
    /// One batch a send (`send_bytes_max` at the batch), as the tokio baseline writes.
    OnePerBatch,
}

pub(super) fn limits_for(batch: usize, age_us: u64, sends: Sends) -> Limits {
    let entry = wire::entry_bytes(frame_len(KEY_BYTES, PAYLOAD_BYTES));
    let batch_bytes_max = wire::NET_HEADER_BYTES + batch * entry;
    let mut l = Limits {
        batch_bytes_max,
        batch_age_max_us: age_us,
        ..Limits::default()
    };
    if sends == Sends::OnePerBatch {
        l.send_bytes_max = batch_bytes_max;
    }
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
pub(super) struct Rendezvous {
    addrs: std::sync::Mutex<BTreeMap<PeerId, std::net::SocketAddr>>,
    listening: Barrier,
    up: std::sync::atomic::AtomicUsize,
    parties: usize,
}

impl Rendezvous {
    pub(super) fn new(parties: usize) -> Arc<Self> {
        Arc::new(Rendezvous {
            addrs: std::sync::Mutex::new(BTreeMap::new()),
            listening: Barrier::new(parties),
            up: std::sync::atomic::AtomicUsize::new(0),
            parties,
        })
    }

    /// Starts transport `id` on this thread, connects it to `peers`, and polls until every
    /// party's connections are up.
    pub(super) fn join(&self, id: PeerId, peers: &[PeerId], limits: &Limits) -> Transport {
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
pub(super) fn spawn_named<T: Send + 'static>(
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
pub(super) fn worker_edge(b: &Barrier) {
    b.wait();
    b.wait();
}

pub(super) fn main_edge<T>(b: &Barrier, read: impl FnOnce() -> T) -> T {
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
pub(super) fn pin(side: usize) {
    if std::env::var_os("CLASP_DISPATCH_NO_PIN").is_some() {
        return;
    }
    let cpus = crate::affinity::allowed_cpus();
    if cpus.len() < 2 {
        return;
    }
    if let Err(e) = crate::affinity::pin_current_thread(cpus[side % cpus.len()]) {
        tracing::warn!("dispatch bench: {e}; this side runs unpinned");
    }
}
