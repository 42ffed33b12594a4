//! `clasp bench ring`: one-way latency and throughput of single-producer single-consumer
//! hand-offs between two threads on two cores, for several implementations side by side.
//!
//! - `floor`: two atomics on separate 128-byte lines bounced between the threads — one cache
//!   line transfer per hop, the hardware's floor. No payload; no throughput.
//! - `shmring`: this project's ring, on a real shared-memory (memfd) segment.
//! - `rtrb`, `crossbeam_array_queue`, `std_mpsc` (a bounded `sync_channel`): what a user would
//!   otherwise reach for. The first two are built only with the `baselines` feature
//!   (`cargo run --release --features baselines -- bench ring`), so the default binary does not
//!   link them; `std_mpsc` is always there.
//!
//! Every implementation moves the same payload (`bytes` bytes, copied in by the sender and out
//! by the receiver) one message per operation (no batching), and every wait is a busy poll.
//! One-way latency is half a ping-pong round trip; throughput is a one-way stream. Cells are
//! measured in interleaved repetitions (every implementation and size once per repetition) and
//! the median is reported with the spread, because this machine is noisy.

mod report;

pub use report::{AgainstShmring, RingReport, RingResult, table};

use crate::affinity;
use clasp_shmring::{
    Consumer, Error, Producer, RingConfig, RingSpec, Segment, SegmentLayout, ShmRing,
};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Payload sizes measured by default.
pub const SIZES_BYTES: [usize; 4] = [16, 64, 256, 1024];
/// Payload sizes measured only when asked for: the frames shmring writes for 16- and 64-byte
/// payloads (a 16-byte header in front), so a fixed-size queue can be measured moving the same
/// bytes per message (`benches/results/rings.md`).
pub const FRAME_SIZES_BYTES: [usize; 2] = [32, 80];
/// Implementations measured, in report order (`rtrb` and `crossbeam_array_queue` only with
/// the `baselines` feature: the default binary does not link them).
pub const IMPLS: &[&str] = if cfg!(feature = "baselines") {
    &[
        "floor",
        "shmring",
        "rtrb",
        "crossbeam_array_queue",
        "std_mpsc",
    ]
} else {
    &["floor", "shmring", "std_mpsc"]
};
/// Messages each queue holds (shmring gets the bytes the same number of frames need).
pub const QUEUE_SLOTS: usize = 1024;

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct RingBenchConfig {
    /// Interleaved repetitions of every cell.
    pub repetitions: u32,
    /// Round trips per latency measurement.
    pub round_trips: u64,
    /// Messages per throughput measurement.
    pub messages: u64,
    /// Pin the two threads to two different CPUs (verified).
    pub pin: bool,
    /// Implementations to measure (empty: all of [`IMPLS`]).
    pub impls: Vec<String>,
    /// Payload sizes to measure (empty: all of [`SIZES_BYTES`]).
    pub sizes_bytes: Vec<usize>,
}

/// A channel as the benchmark drives it: non-blocking send and receive of a fixed payload.
trait Channel<const N: usize> {
    type Tx: Send;
    type Rx: Send;
    fn make() -> (Self::Tx, Self::Rx);
    fn try_send(tx: &mut Self::Tx, msg: &[u8; N]) -> bool;
    fn try_recv(rx: &mut Self::Rx, out: &mut [u8; N]) -> bool;
}

struct ShmringChannel;
/// Keeps the segment mapping alive as long as the ends (they hold it too; this is for clarity).
impl<const N: usize> Channel<N> for ShmringChannel {
    type Tx = Producer<ShmRing>;
    type Rx = Consumer<ShmRing>;
    fn make() -> (Self::Tx, Self::Rx) {
        let capacity = (QUEUE_SLOTS * clasp_shmring::frame_bytes(N) + 64).next_power_of_two();
        let layout = SegmentLayout {
            doorbells: 1,
            rings: vec![RingSpec {
                config: RingConfig::new(capacity),
                doorbell: 0,
            }],
            user_bytes: 0,
            park_mode: Default::default(),
        };
        let seg = Segment::create_anonymous(&layout).expect("memfd segment for the benchmark");
        (seg.producer(0).unwrap(), seg.consumer(0).unwrap())
    }
    #[inline]
    fn try_send(tx: &mut Self::Tx, msg: &[u8; N]) -> bool {
        match tx.reserve(N) {
            Ok(mut g) => {
                g.copy_from_slice(msg);
                g.commit();
                true
            }
            Err(Error::Full { .. }) => false,
            Err(e) => panic!("shmring: {e}"),
        }
    }
    #[inline]
    fn try_recv(rx: &mut Self::Rx, out: &mut [u8; N]) -> bool {
        match rx.peek() {
            Ok(Some(f)) => {
                out.copy_from_slice(&f);
                f.release();
                true
            }
            Ok(None) => false,
            Err(e) => panic!("shmring: {e}"),
        }
    }
}

#[cfg(feature = "baselines")]
struct RtrbChannel;
#[cfg(feature = "baselines")]
impl<const N: usize> Channel<N> for RtrbChannel {
    type Tx = rtrb::Producer<[u8; N]>;
    type Rx = rtrb::Consumer<[u8; N]>;
    fn make() -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(QUEUE_SLOTS)
    }
    #[inline]
    fn try_send(tx: &mut Self::Tx, msg: &[u8; N]) -> bool {
        tx.push(*msg).is_ok()
    }
    #[inline]
    fn try_recv(rx: &mut Self::Rx, out: &mut [u8; N]) -> bool {
        match rx.pop() {
            Ok(m) => {
                *out = m;
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(feature = "baselines")]
struct CrossbeamChannel;
#[cfg(feature = "baselines")]
impl<const N: usize> Channel<N> for CrossbeamChannel {
    type Tx = std::sync::Arc<crossbeam_queue::ArrayQueue<[u8; N]>>;
    type Rx = std::sync::Arc<crossbeam_queue::ArrayQueue<[u8; N]>>;
    fn make() -> (Self::Tx, Self::Rx) {
        let q = std::sync::Arc::new(crossbeam_queue::ArrayQueue::new(QUEUE_SLOTS));
        (q.clone(), q)
    }
    #[inline]
    fn try_send(tx: &mut Self::Tx, msg: &[u8; N]) -> bool {
        tx.push(*msg).is_ok()
    }
    #[inline]
    fn try_recv(rx: &mut Self::Rx, out: &mut [u8; N]) -> bool {
        match rx.pop() {
            Some(m) => {
                *out = m;
                true
            }
            None => false,
        }
    }
}

struct MpscChannel;
impl<const N: usize> Channel<N> for MpscChannel {
    type Tx = std::sync::mpsc::SyncSender<[u8; N]>;
    type Rx = std::sync::mpsc::Receiver<[u8; N]>;
    fn make() -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(QUEUE_SLOTS)
    }
    #[inline]
    fn try_send(tx: &mut Self::Tx, msg: &[u8; N]) -> bool {
        tx.try_send(*msg).is_ok()
    }
    #[inline]
    fn try_recv(rx: &mut Self::Rx, out: &mut [u8; N]) -> bool {
        match rx.try_recv() {
            Ok(m) => {
                *out = m;
                true
            }
            Err(_) => false,
        }
    }
}

/// Runs `a` and `b` on two threads (pinned to `cpus` if given), starting them together.
/// Returns what `a` returns.
fn on_two_cores<R: Send>(
    cpus: Option<(usize, usize)>,
    a: impl FnOnce() -> R + Send,
    b: impl FnOnce() + Send,
) -> Result<R, String> {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let hb = s.spawn(|| {
            if let Some((_, cb)) = cpus {
                affinity::pin_current_thread(cb)?;
            }
            barrier.wait();
            b();
            Ok::<(), String>(())
        });
        if let Some((ca, _)) = cpus {
            if let Err(e) = affinity::pin_current_thread(ca) {
                barrier.wait();
                return Err(e);
            }
        }
        barrier.wait();
        let r = a();
        hb.join()
            .map_err(|_| "benchmark thread panicked".to_string())??;
        Ok(r)
    })
}

/// Ping-pong over two channels; returns the one-way latency in ns.
fn latency<C: Channel<N>, const N: usize>(
    cpus: Option<(usize, usize)>,
    round_trips: u64,
) -> Result<f64, String> {
    let (mut ping_tx, mut ping_rx) = C::make();
    let (mut pong_tx, mut pong_rx) = C::make();
    on_two_cores(
        cpus,
        move || {
            let mut msg = [0u8; N];
            let mut back = [0u8; N];
            // Warm up and check the echo before timing.
            for i in 0..1000u64 {
                msg[..8.min(N)].copy_from_slice(&i.to_le_bytes()[..8.min(N)]);
                while !C::try_send(&mut ping_tx, &msg) {}
                while !C::try_recv(&mut pong_rx, &mut back) {}
                assert_eq!(msg, back, "the echo must return the same bytes");
            }
            let start = Instant::now();
            for i in 0..round_trips {
                msg[0] = i as u8;
                while !C::try_send(&mut ping_tx, &msg) {}
                while !C::try_recv(&mut pong_rx, &mut back) {}
            }
            let elapsed = start.elapsed();
            msg[0] = 0xFF; // tells the echo to stop
            msg[1] = 0xEE;
            while !C::try_send(&mut ping_tx, &msg) {}
            elapsed.as_nanos() as f64 / round_trips as f64 / 2.0
        },
        move || {
            let mut buf = [0u8; N];
            let total = 1000 + round_trips + 1;
            for _ in 0..total {
                while !C::try_recv(&mut ping_rx, &mut buf) {}
                while !C::try_send(&mut pong_tx, &buf) {}
            }
        },
    )
}

/// One-way stream; returns messages per second.
fn throughput<C: Channel<N>, const N: usize>(
    cpus: Option<(usize, usize)>,
    messages: u64,
) -> Result<f64, String> {
    let (mut tx, mut rx) = C::make();
    let received = on_two_cores(
        cpus,
        move || {
            let mut buf = [0u8; N];
            let mut last = 0u64;
            let start = Instant::now();
            for i in 0..messages {
                while !C::try_recv(&mut rx, &mut buf) {}
                if N >= 8 {
                    last = u64::from_le_bytes(buf[..8].try_into().unwrap());
                    debug_assert_eq!(last, i);
                }
            }
            (start.elapsed(), last)
        },
        move || {
            let mut msg = [0u8; N];
            for i in 0..messages {
                if N >= 8 {
                    msg[..8].copy_from_slice(&i.to_le_bytes());
                }
                while !C::try_send(&mut tx, &msg) {}
            }
        },
    )?;
    let (elapsed, last) = received;
    if N >= 8 && last != messages - 1 {
        return Err(format!(
            "the stream ended at message {last}, expected {}",
            messages - 1
        ));
    }
    Ok(messages as f64 / elapsed.as_secs_f64())
}

/// The cache-line ping-pong floor, one-way ns.
fn floor_latency(cpus: Option<(usize, usize)>, round_trips: u64) -> Result<f64, String> {
    #[repr(align(128))]
    struct Line(AtomicU64);
    let a = Line(AtomicU64::new(0));
    let b = Line(AtomicU64::new(0));
    on_two_cores(
        cpus,
        || {
            let start = Instant::now();
            for i in 1..=round_trips {
                a.0.store(i, Ordering::Release);
                while b.0.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
            }
            start.elapsed().as_nanos() as f64 / round_trips as f64 / 2.0
        },
        || {
            for i in 1..=round_trips {
                while a.0.load(Ordering::Acquire) != i {
                    std::hint::spin_loop();
                }
                b.0.store(i, Ordering::Release);
            }
        },
    )
}

/// One measurement of a cell: one-way latency ns, throughput msgs/s (`None` for `floor`).
pub(crate) type Cell = (f64, Option<f64>);

fn measure<const N: usize>(
    implementation: &str,
    cpus: Option<(usize, usize)>,
    cfg: &RingBenchConfig,
) -> Result<Cell, String> {
    let (rt, m) = (cfg.round_trips, cfg.messages);
    Ok(match implementation {
        "floor" => (floor_latency(cpus, rt)?, None),
        "shmring" => (
            latency::<ShmringChannel, N>(cpus, rt)?,
            Some(throughput::<ShmringChannel, N>(cpus, m)?),
        ),
        #[cfg(feature = "baselines")]
        "rtrb" => (
            latency::<RtrbChannel, N>(cpus, rt)?,
            Some(throughput::<RtrbChannel, N>(cpus, m)?),
        ),
        #[cfg(feature = "baselines")]
        "crossbeam_array_queue" => (
            latency::<CrossbeamChannel, N>(cpus, rt)?,
            Some(throughput::<CrossbeamChannel, N>(cpus, m)?),
        ),
        // std's channel is an order of magnitude slower; fewer messages keep the run short.
        "std_mpsc" => (
            latency::<MpscChannel, N>(cpus, rt / 4)?,
            Some(throughput::<MpscChannel, N>(cpus, m / 4)?),
        ),
        other => return Err(format!("unknown implementation {other}")),
    })
}

fn measure_size(
    implementation: &str,
    bytes: usize,
    cpus: Option<(usize, usize)>,
    cfg: &RingBenchConfig,
) -> Result<Cell, String> {
    match bytes {
        16 => measure::<16>(implementation, cpus, cfg),
        32 => measure::<32>(implementation, cpus, cfg),
        64 => measure::<64>(implementation, cpus, cfg),
        80 => measure::<80>(implementation, cpus, cfg),
        256 => measure::<256>(implementation, cpus, cfg),
        1024 => measure::<1024>(implementation, cpus, cfg),
        other => Err(format!("no benchmark for {other}-byte payloads")),
    }
}

/// The pair of CPUs a benchmark pins its two threads to (the first two this process may use),
/// or `None` when fewer than two are allowed.
pub fn default_cpus() -> Option<(usize, usize)> {
    let allowed = affinity::allowed_cpus();
    (allowed.len() >= 2).then(|| (allowed[0], allowed[1]))
}

/// One cell, for the criterion benchmark: (one-way latency ns, throughput msgs/s).
pub fn measure_cell(
    implementation: &str,
    bytes: usize,
    cpus: Option<(usize, usize)>,
    round_trips: u64,
    messages: u64,
) -> Result<(f64, Option<f64>), String> {
    let cfg = RingBenchConfig {
        repetitions: 1,
        round_trips,
        messages,
        pin: cpus.is_some(),
        impls: vec![],
        sizes_bytes: vec![],
    };
    measure_size(implementation, bytes, cpus, &cfg)
}

/// The implementations and payload sizes `cfg` asks for, in the table's order; an unknown
/// name or size is an error naming it and what there is.
pub fn selection(cfg: &RingBenchConfig) -> Result<(Vec<&'static str>, Vec<usize>), String> {
    let impls: Vec<&str> = if cfg.impls.is_empty() {
        IMPLS.to_vec()
    } else {
        for i in &cfg.impls {
            if !IMPLS.contains(&i.as_str()) {
                let hint = if cfg!(feature = "baselines") {
                    ""
                } else {
                    " (rtrb and crossbeam_array_queue need a build with `--features baselines`)"
                };
                return Err(format!(
                    "--impls: unknown implementation {i:?}; known: {}{hint}",
                    IMPLS.join(", ")
                ));
            }
        }
        IMPLS
            .iter()
            .copied()
            .filter(|i| cfg.impls.iter().any(|c| c == i))
            .collect()
    };
    let sizes: Vec<usize> = if cfg.sizes_bytes.is_empty() {
        SIZES_BYTES.to_vec()
    } else {
        for b in &cfg.sizes_bytes {
            if !SIZES_BYTES.contains(b) && !FRAME_SIZES_BYTES.contains(b) {
                return Err(format!(
                    "--sizes: no benchmark for {b}-byte payloads; sizes: {SIZES_BYTES:?}, and on \
                     request {FRAME_SIZES_BYTES:?}"
                ));
            }
        }
        if let Some(b) = (1..cfg.sizes_bytes.len())
            .find(|&i| cfg.sizes_bytes[..i].contains(&cfg.sizes_bytes[i]))
            .map(|i| cfg.sizes_bytes[i])
        {
            return Err(format!("--sizes: {b} given twice"));
        }
        cfg.sizes_bytes.clone()
    };
    Ok((impls, sizes))
}

/// Runs the whole benchmark. `progress` is told each finished repetition.
pub fn run(cfg: &RingBenchConfig, mut progress: impl FnMut(u32)) -> Result<RingReport, String> {
    let machine = crate::machine::description();
    if cfg.repetitions == 0 || cfg.round_trips < 4 || cfg.messages < 4 {
        return Err("repetitions must be positive, round trips and messages at least 4".into());
    }
    let cpus = if cfg.pin {
        Some(default_cpus().ok_or_else(|| {
            format!(
                "pinning needs two CPUs, this process may use {:?}; pass --no-pin",
                affinity::allowed_cpus()
            )
        })?)
    } else {
        None
    };
    let (impls, sizes) = selection(cfg)?;
    let cells = impls.len() * sizes.len();
    let mut samples: Vec<Vec<Cell>> = vec![Vec::new(); cells];
    for rep in 0..cfg.repetitions {
        for (si, &bytes) in sizes.iter().enumerate() {
            for (ii, implementation) in impls.iter().enumerate() {
                let cell = measure_size(implementation, bytes, cpus, cfg)?;
                samples[si * impls.len() + ii].push(cell);
            }
        }
        progress(rep + 1);
    }
    let results = report::summarize(&impls, &sizes, &samples);
    Ok(RingReport {
        machine,
        cpus: cpus.map_or("unpinned".into(), |(a, b)| format!("{a},{b}")),
        repetitions: cfg.repetitions,
        round_trips: cfg.round_trips,
        messages: cfg.messages,
        results,
    })
}
