//! What a worker's shared-memory segment holds, and where.
//!
//! One segment per worker, named after it, so a co-located process can attach: the ingress
//! (a local producer writing input), or an inspector reading queue depths and counters.
//!
//! Rings (E executors):
//! - `ingress(e)`: ingress → executor e;
//! - `exec(a, b)`: executor a → executor b (a == b included: a chained request to a key group
//!   the same executor owns takes the same path, so every local hop costs the same);
//! - `control(e)`: coordinator → executor e (end of stream, plans, stop: a
//!   `Command` (see [`super::messages`]));
//! - `report(e)`: executor e → coordinator (ledger deltas, flushes, faults, migration progress:
//!   a `Report`);
//! - `net_out(e)`: executor e → network thread (remote chained requests, in emission order);
//! - `net_in(e)`: network thread → executor e (chained requests from other workers).
//!
//! The network rings exist in every segment (a single worker simply never writes them), so the
//! layout does not depend on whether the worker has peers. In a cluster the network thread is
//! also the producer of the `ingress(e)` rings: roots from the driver go there, so an executor
//! with pending overflow stops taking new roots but keeps serving its peers.
//!
//! Doorbells: executor e parks on doorbell e (all its input rings ring it, `net_in(e)` too), a
//! local coordinator on doorbell E (a cluster worker's coordinator is its network thread), the
//! ingress (waiting for completions, its in-flight bound) on doorbell E + 1, the network thread
//! on doorbell E + 2, and a local coordinator holding its reads of the reports on doorbell
//! E + 3 (`local/cadence.rs`). The network thread parks in io_uring, not on a futex, so
//! executors also wake it through its transport's eventfd
//! (`crate::runtime::executor::NetLink`) when it announced that it parks.
//!
//! The user area starts with [`SharedControl`], then the routing table's serialised form (the
//! owning slot's executor on its worker, `u16`, per operator and key group — all a local
//! ingress needs to pick a ring), then one block of counters per executor ([`MetricsView`]).

use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::{KeyGroup, RoutingTable};
use clasp_shmring::{ParkMode, RingConfig, RingSpec, Segment, SegmentLayout};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = u64::from_le_bytes(*b"CLASPWKR");
const VERSION: u32 = 3;
/// Most executors a worker runs.
pub const MAX_EXECUTORS: usize = 64;
// The largest worker's rings fit one segment ([`RingIndex::rings`]).
const _: () =
    assert!(5 * MAX_EXECUTORS + MAX_EXECUTORS * MAX_EXECUTORS <= clasp_shmring::MAX_RINGS);
/// Most operators in an app the worker runs: the apps' own bound, so that an app that loads
/// runs.
pub const MAX_OPERATORS: usize = clasp_operators::spec::OPERATORS_MAX;
/// Capacity of each `control(e)` and `report(e)` ring (commands and reports are small).
pub const MESSAGE_RING_BYTES: usize = 64 * 1024;
/// Longest frame on a `control(e)` or `report(e)` ring.
pub const MESSAGE_FRAME_BYTES_MAX: usize =
    MESSAGE_RING_BYTES / 2 - clasp_shmring::FRAME_HEADER_BYTES;
const LINE: usize = 128;

/// Ingress states.
pub const INGRESS_RUNNING: u32 = 0;
/// The ingress admitted its last record; `admitted` is final.
pub const INGRESS_DONE: u32 = 1;
/// The ingress gave up (its error is on its own stderr).
pub const INGRESS_FAILED: u32 = 2;
/// Worker states.
pub const WORKER_RUNNING: u32 = 0;
/// The worker stopped taking input (finished or failed); the ingress should stop.
pub const WORKER_STOPPED: u32 = 1;

/// A worker segment that cannot be made or attached to.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// Too few or too many executors.
    #[error("{0} executors; a worker runs 1..={MAX_EXECUTORS}")]
    Executors(usize),
    /// Too few or too many operators.
    #[error("{0} operators; a worker runs apps of 1..={MAX_OPERATORS}")]
    Operators(usize),
    /// The request rings' sizes are not valid.
    #[error("request rings: {0}")]
    RingSizes(#[source] clasp_shmring::Error),
    /// The routing table does not have the segment's shape.
    #[error(
        "a routing table of {operators} operators × {key_groups} key groups for a segment of \
         {segment_operators} operators × {} key groups",
        KEY_GROUPS
    )]
    TableShape {
        /// The table's operators.
        operators: usize,
        /// The table's key groups per operator.
        key_groups: usize,
        /// The segment's operators.
        segment_operators: usize,
    },
    /// The shared memory itself.
    #[error("worker segment {name}: {source}")]
    Segment {
        /// The segment's name.
        name: String,
        /// Why.
        #[source]
        source: clasp_shmring::Error,
    },
    /// The segment is not a worker segment of this version, or not laid out as it says.
    #[error("segment {name} is not a worker segment of this version{detail}")]
    NotAWorkerSegment {
        /// The segment's name.
        name: String,
        /// What did not match.
        detail: String,
    },
    /// The worker runs another app.
    #[error(
        "worker {name} runs an app of {worker_operators} operators with source \
         {worker_source}; this app has {operators} with source {app_source}"
    )]
    OtherApp {
        /// The segment's name.
        name: String,
        /// Operators of the worker's app.
        worker_operators: usize,
        /// The worker app's source operator.
        worker_source: usize,
        /// Operators of this app.
        operators: usize,
        /// This app's source operator.
        app_source: usize,
    },
}

/// The shared control words at the start of the user area.
#[repr(C, align(128))]
pub struct SharedControl {
    magic: u64,
    version: u32,
    executors: u32,
    operators: u32,
    source: u32,
    /// Roots the ingress may have admitted and not yet seen completed.
    pub max_in_flight: u64,
    /// Track 1 in `sample_every` roots for latency (1 = all).
    pub sample_every: u64,
    /// Roots admitted (written by the ingress only).
    pub admitted: AtomicU64,
    /// Roots completed (written by the coordinator only).
    pub completed: AtomicU64,
    /// `INGRESS_*` (written by the ingress).
    pub ingress_state: AtomicU32,
    /// `WORKER_*` (written by the coordinator).
    pub worker_state: AtomicU32,
    /// Pid of the attached ingress (0 when none).
    pub ingress_pid: AtomicU32,
}

/// Per-executor counters: what the capacity model measures (work, hand-offs, parks), written
/// by their executor only (relaxed stores of its own running sums), read by the coordinator and
/// inspectors. A view borrows the segment it reads, so it cannot outlive the mapping; an index
/// outside the block panics instead of reading past it (one compare against the block's
/// length, a branch that is never taken on the hot path).
#[derive(Clone, Copy)]
pub struct MetricsView<'a> {
    /// The whole block: the scalars, then the per-operator counters.
    counters: &'a [AtomicU64],
    operators: usize,
}

/// An executor's own counters: a [`MetricsView`] that keeps the mapping it points into alive,
/// so the executor thread can own it for as long as it runs.
pub struct ExecutorMetrics {
    /// Holds the mapping (and so `base`) alive.
    _segment: Segment,
    base: std::ptr::NonNull<AtomicU64>,
    len: usize,
    operators: usize,
}

// SAFETY: `base` points at atomics inside the mapping `_segment` keeps alive; atomics may be
// used from any thread.
unsafe impl Send for ExecutorMetrics {}

impl ExecutorMetrics {
    /// The counters, borrowed from this handle (the mapping lives as long as it does).
    #[inline]
    pub fn view(&self) -> MetricsView<'_> {
        // SAFETY: `base..base + len` is this executor's metrics block inside the mapping,
        // checked by `WorkerSegment::metrics_block`, and `_segment` keeps it mapped while the
        // view borrows `self`.
        unsafe { MetricsView::from_block(self.base, self.len, self.operators) }
    }
}

/// Indices of the scalar counters of a [`MetricsView`].
pub mod scalar {
    /// ns spent processing requests.
    pub const BUSY_NS: usize = 0;
    /// Times it ran dry and waited for input (spinning first, then sleeping: [`SLEEPS`]).
    pub const PARKS: usize = 1;
    /// Times it woke from a park.
    pub const WAKEUPS: usize = 2;
    /// Request frames read from rings.
    pub const FRAMES_IN: usize = 3;
    /// Chained requests to an executor of this worker.
    pub const LOCAL_SENT: usize = 4;
    /// Chained requests to another worker.
    pub const REMOTE_SENT: usize = 5;
    /// Frames that found their ring full and waited in the overflow.
    pub const OVERFLOWED: usize = 6;
    /// Frames that were not valid requests (dropped, counted).
    pub const BAD_FRAMES: usize = 7;
    /// 1 while parked.
    pub const PARKED: usize = 8;
    /// Bitmask of remote workers (id % 64) reached this run (δ).
    pub const REMOTE_DESTINATIONS: usize = 9;
    /// Bytes waiting in the overflow now.
    pub const OVERFLOW_BYTES: usize = 10;
    /// Sink outputs emitted.
    pub const OUTPUTS: usize = 11;
    /// CPU time of the executor thread (user + system), set when it stops.
    pub const CPU_NS: usize = 12;
    /// Sampled execution times left out as preemptions (which: `runtime/executor/timing.rs`).
    pub const TIMING_OUTLIERS: usize = 13;
    /// CPU ns spent spinning idle before parking (thread CPU over waits that may spin, less
    /// their parks).
    pub const IDLE_SPIN_NS: usize = 14;
    /// CPU ns spent going to sleep and waking up (thread CPU inside doorbell parks).
    pub const SLEEP_CPU_NS: usize = 15;
    /// Times it went to sleep (doorbell parks that entered a futex wait).
    pub const SLEEPS: usize = 16;
    /// The executor thread's kernel thread id (0 until it runs): its worker reads the thread's
    /// CPU clock with it, so the planner can tell the executors' CPU from the network thread's.
    pub const TID: usize = 17;
    /// Key groups it copied to their next owner ahead of a move (`executor/ahead.rs`).
    pub const COPIED_AHEAD: usize = 18;
    /// Key groups it gave up as their changes since such a copy (the rest moved whole).
    pub const MOVED_AS_CHANGES: usize = 19;
    /// Refreshes of such copies it sent while their move was coming (one per key group that
    /// changed since its copy or its last refresh, per round).
    pub const REFRESHED_AHEAD: usize = 20;
    /// Chained requests it marked as emitted by a key group it received in their epoch
    /// (`FLAG_FROM_MOVED`: only those may wait at a migration's upstream gate).
    pub const SENT_FROM_MOVED: usize = 21;
    /// Number of scalar slots.
    pub const COUNT: usize = 22;
}

impl<'a> MetricsView<'a> {
    fn slots(operators: usize) -> usize {
        (scalar::COUNT + 2 * operators + 2 * operators * operators).next_multiple_of(LINE / 8)
    }

    /// A view of the block of `len` counters at `base`.
    ///
    /// # Safety
    /// `base..base + len` must be a block of counters (only ever accessed as atomics) that
    /// stays mapped for `'a`, with `len >= scalar::COUNT`.
    #[inline]
    unsafe fn from_block(base: std::ptr::NonNull<AtomicU64>, len: usize, operators: usize) -> Self {
        debug_assert!(len >= Self::slots(operators));
        // SAFETY: the caller's contract: `len` counters at `base`, mapped for `'a`.
        let counters = unsafe { std::slice::from_raw_parts(base.as_ptr(), len) };
        MetricsView {
            counters,
            operators,
        }
    }

    /// Counter `i`. Panics when `i` is outside the block (a slot computed from an operator the
    /// app does not have is a bug, not input).
    #[inline]
    fn at(&self, i: usize) -> &'a AtomicU64 {
        &self.counters[i]
    }

    /// Adds `n` to a counter this executor owns (no read-modify-write: one writer).
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        let c = self.at(i);
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Sets a counter.
    #[inline]
    pub fn set(&self, i: usize, v: u64) {
        self.at(i).store(v, Ordering::Relaxed);
    }

    /// Reads a counter.
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        self.at(i).load(Ordering::Relaxed)
    }

    /// Slot of "requests processed by operator `op`".
    #[inline]
    pub fn processed(&self, op: usize) -> usize {
        scalar::COUNT + op
    }

    /// Slot of "ns executing operator `op`".
    #[inline]
    pub fn exec_ns(&self, op: usize) -> usize {
        scalar::COUNT + self.operators + op
    }

    /// Slot of "local chained requests on edge from → to".
    #[inline]
    pub fn edge_local(&self, from: usize, to: usize) -> usize {
        scalar::COUNT + 2 * self.operators + from * self.operators + to
    }

    /// Slot of "remote chained requests on edge from → to".
    #[inline]
    pub fn edge_remote(&self, from: usize, to: usize) -> usize {
        scalar::COUNT
            + 2 * self.operators
            + self.operators * self.operators
            + from * self.operators
            + to
    }

    /// Number of operators.
    pub fn operators(&self) -> usize {
        self.operators
    }
}

/// Ring and doorbell indices of a worker segment with `executors` executors.
#[derive(Clone, Copy, Debug)]
pub struct RingIndex {
    /// Executors.
    pub executors: usize,
}

impl RingIndex {
    /// Ingress → executor `e`.
    pub fn ingress(&self, e: usize) -> usize {
        e
    }
    /// Executor `a` → executor `b`.
    pub fn exec(&self, a: usize, b: usize) -> usize {
        self.executors + a * self.executors + b
    }
    /// Coordinator → executor `e`.
    pub fn control(&self, e: usize) -> usize {
        self.executors + self.executors * self.executors + e
    }
    /// Executor `e` → coordinator.
    pub fn report(&self, e: usize) -> usize {
        2 * self.executors + self.executors * self.executors + e
    }
    /// Executor `e` → network thread.
    pub fn net_out(&self, e: usize) -> usize {
        3 * self.executors + self.executors * self.executors + e
    }
    /// Network thread → executor `e`.
    pub fn net_in(&self, e: usize) -> usize {
        4 * self.executors + self.executors * self.executors + e
    }
    /// Rings of a request ring's capacity (`--ring-bytes`): ingress, executor to executor,
    /// network out and in; the rest are small message rings.
    pub fn request_rings(&self) -> usize {
        self.executors * self.executors + 3 * self.executors
    }
    /// Number of rings.
    pub fn rings(&self) -> usize {
        5 * self.executors + self.executors * self.executors
    }
    /// The coordinator's doorbell.
    pub fn coordinator_bell(&self) -> usize {
        self.executors
    }
    /// The ingress's doorbell.
    pub fn ingress_bell(&self) -> usize {
        self.executors + 1
    }
    /// The network thread's doorbell.
    pub fn net_bell(&self) -> usize {
        self.executors + 2
    }
    /// Where the coordinator sleeps through its executors' reports (`local/cadence.rs`): an
    /// executor going idle while the ingress waits on its in-flight bound rings it.
    pub fn hold_bell(&self) -> usize {
        self.executors + 3
    }
    /// Number of doorbells.
    pub fn doorbells(&self) -> usize {
        self.executors + 4
    }
}

/// The longest request frame a worker's rings of `ring_bytes` take (half a ring, less the
/// ring's own frame header): what every worker sizes its rings' frames by, and what a driver
/// checks a record against before it sends it.
pub fn ring_frame_bytes_max(ring_bytes: usize) -> usize {
    ring_bytes / 2 - clasp_shmring::FRAME_HEADER_BYTES
}

/// Sizes of a worker segment.
#[derive(Clone, Copy, Debug)]
pub struct SegmentSizes {
    /// Executors.
    pub executors: usize,
    /// Operators of the app.
    pub operators: usize,
    /// Capacity of each request ring.
    pub ring_bytes: usize,
    /// Longest request frame.
    pub max_frame_bytes: usize,
}

fn table_bytes(operators: usize) -> usize {
    (operators * KEY_GROUPS as usize * 2).next_multiple_of(LINE)
}

fn control_bytes() -> usize {
    size_of::<SharedControl>().next_multiple_of(LINE)
}

/// The layout of a worker segment.
pub fn segment_layout(s: &SegmentSizes) -> Result<SegmentLayout, LayoutError> {
    if s.executors == 0 || s.executors > MAX_EXECUTORS {
        return Err(LayoutError::Executors(s.executors));
    }
    if s.operators == 0 || s.operators > MAX_OPERATORS {
        return Err(LayoutError::Operators(s.operators));
    }
    let idx = RingIndex {
        executors: s.executors,
    };
    let request = RingConfig {
        capacity_bytes: s.ring_bytes,
        max_frame_bytes: s.max_frame_bytes,
    };
    request.validate().map_err(LayoutError::RingSizes)?;
    let small = RingConfig::new(MESSAGE_RING_BYTES);
    let mut rings = Vec::with_capacity(idx.rings());
    for e in 0..s.executors {
        rings.push(RingSpec {
            config: request,
            doorbell: e,
        }); // ingress(e)
    }
    for _a in 0..s.executors {
        for b in 0..s.executors {
            rings.push(RingSpec {
                config: request,
                doorbell: b,
            }); // exec(a, b)
        }
    }
    for e in 0..s.executors {
        rings.push(RingSpec {
            config: small,
            doorbell: e,
        }); // control(e)
    }
    for _e in 0..s.executors {
        rings.push(RingSpec {
            config: small,
            doorbell: idx.coordinator_bell(),
        }); // report(e)
    }
    for _e in 0..s.executors {
        rings.push(RingSpec {
            config: request,
            doorbell: idx.net_bell(),
        }); // net_out(e)
    }
    for e in 0..s.executors {
        rings.push(RingSpec {
            config: request,
            doorbell: e,
        }); // net_in(e)
    }
    let metrics = MetricsView::slots(s.operators) * 8 * s.executors;
    Ok(SegmentLayout {
        doorbells: idx.doorbells(),
        rings,
        user_bytes: control_bytes() + table_bytes(s.operators) + metrics,
        // Executors, the coordinator and the ingress: on a machine with fewer cores they
        // park often, and a fence per publish is then cheaper than a membarrier per park.
        park_mode: ParkMode::for_runnable_threads(s.executors + 2),
    })
}

fn segment_error(name: &str) -> impl Fn(clasp_shmring::Error) -> LayoutError + '_ {
    move |source| LayoutError::Segment {
        name: name.to_owned(),
        source,
    }
}

/// A worker segment with typed access to its user area.
#[derive(Clone)]
pub struct WorkerSegment {
    /// The segment.
    pub segment: Segment,
    /// Ring indices.
    pub index: RingIndex,
    operators: usize,
}

impl WorkerSegment {
    /// Creates and initialises the segment of a worker: named when another process attaches to
    /// it by name (a local ingress), anonymous (`None`: a memfd that no crash can leave behind in
    /// `/dev/shm`) when nothing does (a cluster worker).
    pub fn create(
        name: Option<&str>,
        sizes: &SegmentSizes,
        source: usize,
        max_in_flight: u64,
        sample_every: u64,
        table: &RoutingTable,
    ) -> Result<WorkerSegment, LayoutError> {
        if table.operators() != sizes.operators || table.key_groups() != KEY_GROUPS as usize {
            return Err(LayoutError::TableShape {
                operators: table.operators(),
                key_groups: table.key_groups(),
                segment_operators: sizes.operators,
            });
        }
        let layout = segment_layout(sizes)?;
        let segment = match name {
            Some(name) => Segment::create(name, &layout).map_err(segment_error(name))?,
            None => Segment::create_anonymous(&layout).map_err(segment_error("(anonymous)"))?,
        };
        let (base, len) = segment.user_area();
        debug_assert!(len >= control_bytes() + table_bytes(sizes.operators));
        // An early attacher sees magic 0 and refuses (`attach`), so the plain fields are
        // written first and the magic last.
        // SAFETY: the user area is 128-aligned, zeroed and holds a SharedControl (sized above).
        unsafe {
            let c = base.cast::<SharedControl>();
            (&raw mut (*c).version).write(VERSION);
            (&raw mut (*c).executors).write(sizes.executors as u32);
            (&raw mut (*c).operators).write(sizes.operators as u32);
            (&raw mut (*c).source).write(source as u32);
            (&raw mut (*c).max_in_flight).write(max_in_flight);
            (&raw mut (*c).sample_every).write(sample_every.max(1));
        }
        let ws = WorkerSegment {
            segment,
            index: RingIndex {
                executors: sizes.executors,
            },
            operators: sizes.operators,
        };
        ws.write_table(table);
        // SAFETY: as above; the magic is written last with a release fence before it.
        unsafe {
            std::sync::atomic::fence(Ordering::Release);
            (&raw mut (*base.cast::<SharedControl>()).magic).write_volatile(MAGIC);
        }
        Ok(ws)
    }

    /// Attaches to a worker's segment and checks it runs an app of `operators` operators with
    /// source `source`.
    pub fn attach(
        name: &str,
        operators: usize,
        source: usize,
    ) -> Result<WorkerSegment, LayoutError> {
        let segment = Segment::attach(name).map_err(segment_error(name))?;
        let (base, len) = segment.user_area();
        let not_ours = |detail: String| LayoutError::NotAWorkerSegment {
            name: name.to_owned(),
            detail,
        };
        if len < control_bytes() {
            return Err(not_ours(format!(" (user area of {len} bytes)")));
        }
        // SAFETY: the user area holds a SharedControl (length checked); plain fields are
        // copied once with volatile reads after the magic.
        let (magic, version, executors, ops, src) = unsafe {
            let c = base.cast::<SharedControl>();
            let magic = (&raw const (*c).magic).read_volatile();
            std::sync::atomic::fence(Ordering::Acquire);
            (
                magic,
                (&raw const (*c).version).read_volatile(),
                (&raw const (*c).executors).read_volatile() as usize,
                (&raw const (*c).operators).read_volatile() as usize,
                (&raw const (*c).source).read_volatile() as usize,
            )
        };
        if magic != MAGIC || version != VERSION {
            return Err(not_ours(String::new()));
        }
        if ops != operators || src != source {
            return Err(LayoutError::OtherApp {
                name: name.to_owned(),
                worker_operators: ops,
                worker_source: src,
                operators,
                app_source: source,
            });
        }
        let request = segment.ring_config(0).map_err(segment_error(name))?;
        let sizes = segment_layout(&SegmentSizes {
            executors,
            operators,
            ring_bytes: request.capacity_bytes,
            max_frame_bytes: request.max_frame_bytes,
        })?;
        if len < sizes.user_bytes || segment.ring_count() != sizes.rings.len() {
            return Err(not_ours(format!(
                " (its layout does not match {executors} executors)"
            )));
        }
        Ok(WorkerSegment {
            segment,
            index: RingIndex { executors },
            operators,
        })
    }

    /// The shared control words.
    pub fn control(&self) -> &SharedControl {
        // SAFETY: checked to hold a SharedControl when created or attached.
        unsafe { &*self.segment.user_area().0.cast::<SharedControl>() }
    }

    /// Executors of the worker.
    pub fn executors(&self) -> usize {
        self.index.executors
    }

    /// The source operator index.
    pub fn source(&self) -> usize {
        // SAFETY: written before the magic, never changed.
        unsafe {
            (&raw const (*self.segment.user_area().0.cast::<SharedControl>()).source).read()
                as usize
        }
    }

    fn table_base(&self) -> *mut u16 {
        // SAFETY: the table follows the control block inside the user area.
        unsafe { self.segment.user_area().0.add(control_bytes()).cast() }
    }

    /// Writes each entry's executor: slot `i × executors + e` is executor `e` of its worker.
    /// The table's shape was checked against the segment's in [`WorkerSegment::create`].
    fn write_table(&self, table: &RoutingTable) {
        let base = self.table_base();
        for op in 0..self.operators {
            for kg in 0..KEY_GROUPS {
                let executor = table.owner(op, KeyGroup(kg)).index() % self.index.executors;
                // SAFETY: in bounds of the table (operators × KEY_GROUPS u16).
                unsafe {
                    base.add(op * KEY_GROUPS as usize + kg as usize)
                        .write_volatile(executor as u16)
                }
            }
        }
    }

    /// The executor owning `key_group` of `operator`, as published in the segment. Bounds
    /// checked: another process may have scribbled on it.
    pub fn executor_of(&self, operator: usize, key_group: u16) -> Option<usize> {
        if operator >= self.operators || key_group >= KEY_GROUPS {
            return None;
        }
        // SAFETY: in bounds (checked above).
        let e = unsafe {
            self.table_base()
                .add(operator * KEY_GROUPS as usize + key_group as usize)
                .read_volatile()
        };
        ((e as usize) < self.index.executors).then_some(e as usize)
    }

    /// Where executor `e`'s metrics block starts, and its length in counters. Panics when
    /// `e` is not an executor of this segment.
    fn metrics_block(&self, e: usize) -> (std::ptr::NonNull<AtomicU64>, usize) {
        assert!(
            e < self.index.executors,
            "executor {e} of {}",
            self.index.executors
        );
        let slots = MetricsView::slots(self.operators);
        let offset = control_bytes() + table_bytes(self.operators) + e * slots * 8;
        let (base, len) = self.segment.user_area();
        assert!(
            offset + slots * 8 <= len,
            "metrics block outside the user area"
        );
        // SAFETY: in bounds of the user area (checked above); the blocks are 128-aligned
        // (the area, the control block and the table are multiples of 128 bytes).
        let block = unsafe { base.add(offset) }.cast::<AtomicU64>();
        debug_assert!(block.is_aligned());
        (
            std::ptr::NonNull::new(block).expect("a mapping is never at address 0"),
            slots,
        )
    }

    /// The counters of executor `e`, for as long as this segment handle lives.
    pub fn metrics(&self, e: usize) -> MetricsView<'_> {
        let (base, len) = self.metrics_block(e);
        // SAFETY: the block lies inside the mapping (`metrics_block`), which `self` keeps
        // alive while the view borrows it; its bytes are only accessed as atomics.
        unsafe { MetricsView::from_block(base, len, self.operators) }
    }

    /// Executor `e`'s own counters, keeping the mapping alive (for the executor's thread).
    pub fn executor_metrics(&self, e: usize) -> ExecutorMetrics {
        let (base, len) = self.metrics_block(e);
        ExecutorMetrics {
            _segment: self.segment.clone(),
            base,
            len,
            operators: self.operators,
        }
    }
}

/// A segment of one worker of two executors with `operators` operators spread evenly, for the
/// data plane's unit tests (named: a test may attach to it).
#[cfg(test)]
pub(crate) fn test_segment(name: &str, operators: usize) -> WorkerSegment {
    use crate::routing::{Slots, Spread, spread};
    let sizes = SegmentSizes {
        executors: 2,
        operators,
        ring_bytes: 4096,
        max_frame_bytes: 1024,
    };
    let slots = Slots {
        workers: vec![0],
        executors: 2,
    };
    let table = spread(operators, &slots, Spread::Even).expect("a table");
    WorkerSegment::create(Some(name), &sizes, 0, 1, 1, &table).expect("a segment")
}

#[cfg(test)]
mod tests;
