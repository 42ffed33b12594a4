//! The ingress: a process on the worker's machine that attaches to its segment by name and
//! writes its input — generated, or read from a source — into the executors' ingress rings,
//! as a bare-metal user with a local source would. (The network thread will use the same rings for input from other hosts.)
//!
//! Each record becomes a root request routed by its key group, through the routing table the
//! worker published in the segment, so each key keeps one FIFO path. The ingress admits at most
//! `max_in_flight` tracked roots that have not completed (the worker counts completions), which
//! bounds the work in flight and so every queue and overflow behind it.
//!
//! An ingress never outlives its worker by more than [`WORKER_CHECK_EVERY`] plus a park: the
//! worker may be killed outright and never say it stopped, so while the ingress waits (for
//! completions, ring space or its pace) it checks that the segment's owner still runs, and ends
//! with [`IngressError::WorkerGone`] naming the segment when it does not. A stop flag (set by
//! a signal) ends the input early and cleanly: what was admitted is the run's input.

use super::layout::{
    INGRESS_DONE, INGRESS_FAILED, LayoutError, SharedControl, WORKER_STOPPED, WorkerSegment,
};
use super::ledger::{Latencies, LatencySummary};
use crate::request::{FLAG_TRACKED, RequestHeader, frame_len, root_id};
use crate::source::{Input, Next, SourceReport, SourceSpec};
use clasp_operators::AppSpec;
use clasp_operators::generate::Generator;
use clasp_operators::key::{key_group, key_hash};
use clasp_shmring::Segment;
use clasp_shmring::{Doorbell, Error as RingError, Producer, ShmRing, WaitPolicy};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest single park of an ingress waiting for completions or ring space; between parks it
/// checks whether the worker stopped.
const INGRESS_PARK_MAX: Duration = Duration::from_millis(50);
/// How long the ingress sleeps when its source has nothing read yet.
const SOURCE_WAIT: Duration = Duration::from_millis(1);
/// Records written between two publishes (and updates of `admitted`).
const PUBLISH_EVERY: u64 = 64;
/// Records admitted under one reading of the admission clock ([`AdmissionClock`]).
const STAMP_EVERY: u32 = 8;
/// How often the ingress checks that the worker's process still runs (a look at `/proc` and
/// the segment's owner lock: too dear for every record).
pub const WORKER_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Why an ingress stopped before admitting every record.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// It could not attach to the worker's segment.
    #[error(transparent)]
    Segment(#[from] LayoutError),
    /// A ring or doorbell of the segment.
    #[error("ingress ring {executor}: {source}")]
    Ring {
        /// The executor the ring leads to.
        executor: usize,
        /// Why.
        #[source]
        source: RingError,
    },
    /// The ingress's doorbell.
    #[error("the ingress doorbell: {0}")]
    Doorbell(#[source] RingError),
    /// The app cannot generate input.
    #[error("app {app} has no generator {generator}")]
    NoGenerator {
        /// The app.
        app: String,
        /// Its generator's name.
        generator: String,
    },
    /// The worker stopped taking input.
    #[error("the worker stopped after {0} records")]
    WorkerStopped(u64),
    /// The worker's process is gone (killed, crashed) without saying it stopped.
    #[error(
        "the worker that owns segment {segment} is gone (its process exited without stopping \
         the input) after {admitted} records"
    )]
    WorkerGone {
        /// The worker's segment.
        segment: String,
        /// Records admitted before.
        admitted: u64,
    },
    /// The routing table the worker published names no executor for a key group.
    #[error("the worker's routing table has no executor for key group {0}")]
    NoExecutor(u16),
    /// The input's source could not be opened or read.
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
    /// A record could not be written.
    #[error("record {record} ({bytes} bytes): {source}")]
    Write {
        /// The record's index.
        record: u64,
        /// Its frame's length.
        bytes: usize,
        /// Why.
        #[source]
        source: RingError,
    },
}

/// Settings of an ingress.
#[derive(Clone)]
pub struct IngressConfig {
    /// The worker's segment.
    pub segment_name: String,
    /// Records to admit.
    pub records: u64,
    /// Generator seed.
    pub seed: u64,
    /// Records per second, or as fast as possible.
    pub rate_per_s: Option<f64>,
    /// Once set (by a signal), admit no more: the records admitted so far are the input.
    pub stop: Option<Arc<AtomicBool>>,
    /// Where the records come from (the app's generator by default).
    pub source: SourceSpec,
    /// With [`SourceSpec::Generator`]: this generator instead of the app's (a benchmark's
    /// records made before the run, [`clasp_operators::generate::Pregenerated`]).
    pub generator: Option<Arc<dyn Generator>>,
}

/// What an ingress did.
#[derive(Debug, Clone)]
pub struct IngressReport {
    /// Records admitted.
    pub admitted: u64,
    /// Time from the first to the last admission.
    pub elapsed: Duration,
    /// The stop flag ended the input before every record was admitted.
    pub stopped: bool,
    /// Where the input stopped: the source's offset and malformed counts.
    pub source: SourceReport,
    /// How late each record was admitted after it fell due by the rate (µs; none counted
    /// without a rate). A root's latency starts at its admission, so a record held back — by
    /// the in-flight bound, a full ring, a late ingress — waits here, not in the latency.
    pub admission_delay: LatencySummary,
}

/// Runs an ingress for `spec` into the worker segment named in `cfg`.
pub fn run_ingress(spec: &AppSpec, cfg: &IngressConfig) -> Result<IngressReport, IngressError> {
    let seg = WorkerSegment::attach(&cfg.segment_name, spec.operators.len(), spec.source)?;
    // Claim the rings before touching the segment's control line: an ingress refused here
    // (another one holds them) must not stop the run that ingress feeds.
    let rings = IngressRings::open(&seg, cfg)?;
    let control = seg.control();
    control
        .ingress_pid
        .store(std::process::id(), Ordering::Release);
    let result = admit(spec, cfg, &seg, rings);
    control.ingress_state.store(
        if result.is_ok() {
            INGRESS_DONE
        } else {
            INGRESS_FAILED
        },
        Ordering::Release,
    );
    seg.segment
        .doorbell(seg.index.coordinator_bell())
        .map(|b| b.ring())
        .ok();
    result
}

/// Admits up to `cfg.records` records of the input into the worker's ingress rings, paced to
/// the rate and held to the in-flight bound; keeps `admitted` in the segment up to date.
fn admit(
    spec: &AppSpec,
    cfg: &IngressConfig,
    seg: &WorkerSegment,
    mut rings: IngressRings<'_>,
) -> Result<IngressReport, IngressError> {
    let control = seg.control();
    let bell = seg
        .segment
        .doorbell(seg.index.ingress_bell())
        .map_err(IngressError::Doorbell)?;
    let mut input = match &cfg.generator {
        Some(g) if cfg.source.is_generator() => Input::of_generator(g.clone()),
        _ => Input::open(spec, &cfg.source, cfg.seed)?,
    };
    let sample = control.sample_every.max(1);
    let max_in_flight = control.max_in_flight.max(1);
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    let mut tracked = 0u64;
    let start = Instant::now();
    let mut delay = Latencies::default();
    let report = |admitted, stopped, input: &Input, delay: &Latencies| IngressReport {
        admitted,
        elapsed: start.elapsed(),
        stopped,
        source: input.report(admitted),
        admission_delay: delay.summary(),
    };
    // Whether record `i` is in `key` and `payload`, waiting for its turn.
    let mut held = false;
    // `control.completed` as last read: it only grows, so a stale copy is a safe bound. The
    // coordinator writes that line at every report; reading it for every record cost the
    // ingress a cache miss a record.
    let mut completed_seen = 0u64;
    let mut turns = 0u64;
    // Seconds between two records at the rate. A product per record, not a quotient: the
    // compiler computed `i / rate` for every record even with no rate (a division's result
    // is harmless to compute early), and `perf` put the ingress's time on waiting for it.
    let period_s = cfg.rate_per_s.map(|rate| 1.0 / rate);
    let mut clock = AdmissionClock::default();
    let mut i = 0;
    while i < cfg.records {
        if rings.stop_requested() {
            // Gone or alive? A worker that died is what stopped us (its death signal).
            rings.check_worker(i, true)?;
            rings.flush(i);
            return Ok(report(i, true, &input, &delay));
        }
        turns += 1;
        // The same line as `completed`: looked at once every PUBLISH_EVERY turns.
        if turns % PUBLISH_EVERY == 0 && worker_stopped(control) {
            return Err(IngressError::WorkerStopped(i));
        }
        if !held {
            match input.next_into(i, &mut key, &mut payload)? {
                Next::Record => held = true,
                Next::Pending => {
                    clock.expire();
                    rings.wait_for_source(i)?;
                    continue;
                }
                Next::End => break,
            }
        }
        let due = match period_s {
            Some(period_s) => {
                // Paced records are apart in time: each reads the clock.
                clock.expire();
                Some(pace(&mut rings, start, period_s, i)?)
            }
            None => None,
        };
        let is_tracked = i % sample == 0;
        if is_tracked {
            if tracked - completed_seen >= max_in_flight {
                clock.expire();
                if !wait_in_flight_below(&mut rings, bell, tracked, max_in_flight, i)? {
                    continue; // stopping: the top of the loop ends the input
                }
                completed_seen = control.completed.load(Ordering::Acquire);
            }
            tracked += 1;
        }
        let hash = key_hash(&key);
        let kg = key_group(hash);
        let e = seg
            .executor_of(spec.source, kg)
            .ok_or(IngressError::NoExecutor(kg))?;
        let header = root_header(spec.source, kg, hash, e, i, is_tracked, clock.now_ns());
        if rings.write(e, i, &header, &key, &payload)? {
            clock.expire();
        }
        if let Some(due) = due {
            delay.record_duration(Instant::now().saturating_duration_since(due));
        }
        input.admitted();
        held = false;
        i += 1;
        if i % PUBLISH_EVERY == 0 {
            rings.flush(i);
            rings.check_worker(i, false)?;
        }
    }
    rings.flush(i);
    Ok(report(i, false, &input, &delay))
}

/// Whether the worker has stopped taking input.
fn worker_stopped(control: &SharedControl) -> bool {
    control.worker_state.load(Ordering::Acquire) == WORKER_STOPPED
}

/// Sleeps until record `i` is due, one every `period_s` seconds from `start`, flushing first if
/// it must wait (and checking, at most every park, that the worker still runs). Returns when it
/// was due.
fn pace(
    rings: &mut IngressRings<'_>,
    start: Instant,
    period_s: f64,
    i: u64,
) -> Result<Instant, IngressError> {
    let due = start + Duration::from_secs_f64(i as f64 * period_s);
    loop {
        let now = Instant::now();
        if due <= now || rings.stop_requested() {
            return Ok(due);
        }
        rings.flush(i);
        rings.check_worker(i, false)?;
        std::thread::sleep((due - now).min(INGRESS_PARK_MAX));
    }
}

/// The in-flight bound: before record `i` becomes tracked root number `tracked`, waits for
/// completions (the worker rings `bell`) until fewer than `max_in_flight` are incomplete.
/// `false` when the stop flag was set meanwhile.
fn wait_in_flight_below(
    rings: &mut IngressRings<'_>,
    bell: &Doorbell,
    tracked: u64,
    max_in_flight: u64,
    i: u64,
) -> Result<bool, IngressError> {
    let control = rings.control;
    while tracked - control.completed.load(Ordering::Acquire) >= max_in_flight {
        rings.flush(i);
        rings.check_worker(i, false)?;
        if rings.stop_requested() {
            return Ok(false);
        }
        let token = bell.prepare_park();
        if tracked - control.completed.load(Ordering::Acquire) >= max_in_flight
            && !worker_stopped(control)
        {
            bell.park(token, Some(INGRESS_PARK_MAX));
        }
        bell.finish_park(token);
        if worker_stopped(control) {
            return Err(IngressError::WorkerStopped(i));
        }
    }
    Ok(true)
}

/// The header of record `i` as a root request of the source operator, bound for executor `e`.
fn root_header(
    source: usize,
    kg: u16,
    hash: u64,
    e: usize,
    i: u64,
    is_tracked: bool,
    admitted_ns: u64,
) -> RequestHeader {
    let id = root_id(i);
    RequestHeader {
        operator: source as u16,
        key_group: kg,
        flags: if is_tracked { FLAG_TRACKED } else { 0 },
        epoch: 0,
        dest: e as u16,
        root_home: 0,
        source: crate::request::INGRESS_SLOT,
        key_hash: hash,
        request_id: id,
        root_id: id,
        admitted_ns,
    }
}

/// When records are admitted: `CLOCK_MONOTONIC`, read once every [`STAMP_EVERY`] records and
/// after every wait (for completions, for the source, for a paced record's time). Reading it
/// for every record was a fifth of the ingress's own time in `clasp bench wc`. A root admitted
/// under an older reading carries an admission time at most seven records' writes early (well
/// under a microsecond at speed), so its measured latency is never shorter than it was.
#[derive(Default)]
struct AdmissionClock {
    ns: u64,
    /// Records the current reading may still stamp; 0: read the clock for the next.
    uses_left: u32,
}

impl AdmissionClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        if self.uses_left == 0 {
            self.ns = crate::clock::monotonic_ns();
            self.uses_left = STAMP_EVERY;
        }
        self.uses_left -= 1;
        self.ns
    }

    /// The next record reads the clock (the ingress waited, or will).
    #[inline]
    fn expire(&mut self) {
        self.uses_left = 0;
    }
}

/// The executors' ingress rings as the ingress writes them: frames are committed deferred and
/// published in batches, each publish followed by the admitted count the worker reads.
struct IngressRings<'a> {
    control: &'a SharedControl,
    producers: Vec<Producer<ShmRing>>,
    /// `dirty[e]`: ring e holds committed frames not yet published.
    dirty: Vec<bool>,
    policy: WaitPolicy,
    /// The worker's segment, by name (its owner's liveness is read through it).
    segment: &'a str,
    /// The stop flag, if any.
    stop: Option<&'a AtomicBool>,
    /// When the worker's process was last seen alive.
    worker_seen: Instant,
}

impl<'a> IngressRings<'a> {
    /// Opens the producer side of every executor's ingress ring in `seg`.
    fn open(seg: &'a WorkerSegment, cfg: &'a IngressConfig) -> Result<Self, IngressError> {
        let producers: Vec<Producer<ShmRing>> = (0..seg.executors())
            .map(|e| {
                seg.segment
                    .producer(seg.index.ingress(e))
                    .map_err(|source| IngressError::Ring {
                        executor: e,
                        source,
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(IngressRings {
            control: seg.control(),
            dirty: vec![false; producers.len()],
            producers,
            policy: WaitPolicy::for_runnable_threads(seg.executors() + 2),
            segment: &cfg.segment_name,
            stop: cfg.stop.as_deref(),
            worker_seen: Instant::now(),
        })
    }

    /// Whether the stop flag is set.
    fn stop_requested(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Acquire))
    }

    /// [`IngressError::WorkerGone`] if the segment's owner no longer runs; looked at no more
    /// often than every [`WORKER_CHECK_EVERY`] unless `now`. `admitted`: records so far.
    fn check_worker(&mut self, admitted: u64, now: bool) -> Result<(), IngressError> {
        if !now && self.worker_seen.elapsed() < WORKER_CHECK_EVERY {
            return Ok(());
        }
        // A segment that is gone was removed because its owner died; an error reading it
        // is not proof of death.
        if Segment::owner_alive(self.segment).unwrap_or(true) {
            self.worker_seen = Instant::now();
            return Ok(());
        }
        Err(IngressError::WorkerGone {
            segment: self.segment.to_string(),
            admitted,
        })
    }

    /// While the source has nothing read: publishes what was written and checks on the
    /// worker, then sleeps a moment. `admitted`: records so far.
    fn wait_for_source(&mut self, admitted: u64) -> Result<(), IngressError> {
        self.flush(admitted);
        self.check_worker(admitted, false)?;
        std::thread::sleep(SOURCE_WAIT);
        Ok(())
    }

    /// Publishes every ring written since the last flush, then tells the worker `admitted`.
    fn flush(&mut self, admitted: u64) {
        for (r, d) in self.producers.iter_mut().zip(self.dirty.iter_mut()) {
            if std::mem::take(d) {
                r.publish();
            }
        }
        self.control.admitted.store(admitted, Ordering::Release);
    }

    /// Writes record `i`'s frame into executor `e`'s ring (unpublished); while the ring is
    /// full it flushes and waits for space, and gives up if the worker stops. Whether it
    /// waited.
    fn write(
        &mut self,
        e: usize,
        i: u64,
        header: &RequestHeader,
        key: &[u8],
        payload: &[u8],
    ) -> Result<bool, IngressError> {
        let len = frame_len(key.len(), payload.len());
        let mut waited = false;
        let write_error = |source| IngressError::Write {
            record: i,
            bytes: len,
            source,
        };
        loop {
            match self.producers[e].reserve(len) {
                Ok(mut g) => {
                    header.write(key, payload, &mut g);
                    g.commit_deferred();
                    self.dirty[e] = true;
                    return Ok(waited);
                }
                Err(RingError::Full { .. }) => {
                    waited = true;
                    self.flush(i);
                    match self.producers[e].wait_for_space(len, self.policy, Some(INGRESS_PARK_MAX))
                    {
                        Ok(()) | Err(RingError::TimedOut { .. }) => {}
                        Err(source) => return Err(write_error(source)),
                    }
                    if worker_stopped(self.control) {
                        return Err(IngressError::WorkerStopped(i));
                    }
                    self.check_worker(i, false)?;
                }
                Err(source) => return Err(write_error(source)),
            }
        }
    }
}
