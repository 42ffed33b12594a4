//! What a worker's shared-memory segment holds, and where.
//!
//! One segment per worker, named after it, so a co-located process can attach: the ingress
//! (a local producer writing input), or an inspector reading queue depths and counters.
//!
//! Rings (E executors):
//! - `ingress(e)`: ingress → executor e;
//! - `exec(a, b)`: executor a → executor b (a == b included: a chained request to a key group
//!   the same executor owns takes the same path, so every local hop costs the same);
//! - `control(e)`: coordinator → executor e (end of stream, stop);
//! - `report(e)`: executor e → coordinator (ledger deltas, acknowledgements);
//! - `net_out(e)`: executor e → network thread (remote chained requests, in emission order);
//! - `net_in(e)`: network thread → executor e (chained requests from other workers).
//!
//! The network rings exist in every segment (a single worker simply never writes them), so the
//! layout does not depend on whether the worker has peers. In a cluster the network thread is
//! also the producer of the `ingress(e)` rings: roots from the driver go there, so an executor
//! with pending overflow stops taking new roots but keeps serving its peers (DESIGN.md §4).
//!
//! Doorbells: executor e parks on doorbell e (all its input rings ring it, `net_in(e)` too), the
//! coordinator on doorbell E, the ingress (waiting for completions, its in-flight bound) on
//! doorbell E + 1, the network thread on doorbell E + 2. The network thread parks in io_uring,
//! not on a futex, so executors also wake it through its transport's eventfd
//! (`crate::worker::executor::NetLink`) when it announced that it parks.
//!
//! The user area starts with [`SharedControl`], then the routing table's serialised form (the
//! owning slot's executor on its worker, `u16`, per operator and key group — all a local
//! ingress needs to pick a ring), then one block of counters per executor ([`MetricsView`]).

use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::{KeyGroup, RoutingTable};
use clasp_shmring::{ParkMode, RingConfig, RingSpec, Segment, SegmentLayout};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = u64::from_le_bytes(*b"CLASPWKR");
const VERSION: u32 = 2;
/// Most executors a worker runs.
pub const MAX_EXECUTORS: usize = 64;
/// Most operators in an app the worker runs.
pub const MAX_OPERATORS: usize = 256;
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

/// Per-executor counters: the metrics of the paper's Table 2 and a few more, written by their
/// executor only (relaxed stores of its own running sums), read by the monitor and inspectors.
pub struct MetricsView {
    base: *const AtomicU64,
    operators: usize,
}

// SAFETY: a view of atomics inside a mapped segment that outlives it.
unsafe impl Send for MetricsView {}

/// Indices of the scalar counters of a [`MetricsView`].
pub mod scalar {
    /// ns spent processing requests.
    pub const BUSY_NS: usize = 0;
    /// Times the executor parked.
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
    /// Sampled execution times left out as preemptions (see `EXEC_TIMING_OUTLIER_NS`).
    pub const TIMING_OUTLIERS: usize = 13;
    /// Number of scalar slots.
    pub const COUNT: usize = 16;
}

impl MetricsView {
    fn slots(operators: usize) -> usize {
        (scalar::COUNT + 2 * operators + 2 * operators * operators).next_multiple_of(LINE / 8)
    }

    #[inline]
    fn at(&self, i: usize) -> &AtomicU64 {
        // SAFETY: `i` is below `slots(operators)` (the callers index by operator and edge
        // within range), and the block lies inside the segment (checked by `WorkerSegment`).
        unsafe { &*self.base.add(i) }
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
    /// Number of doorbells.
    pub fn doorbells(&self) -> usize {
        self.executors + 3
    }
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
pub fn segment_layout(s: &SegmentSizes) -> Result<SegmentLayout, String> {
    if s.executors == 0 || s.executors > MAX_EXECUTORS {
        return Err(format!(
            "{} executors; a worker runs 1..={MAX_EXECUTORS}",
            s.executors
        ));
    }
    if s.operators == 0 || s.operators > MAX_OPERATORS {
        return Err(format!(
            "{} operators; a worker runs apps of 1..={MAX_OPERATORS}",
            s.operators
        ));
    }
    let idx = RingIndex {
        executors: s.executors,
    };
    let request = RingConfig {
        capacity_bytes: s.ring_bytes,
        max_frame_bytes: s.max_frame_bytes,
    };
    request
        .validate()
        .map_err(|e| format!("request rings: {e}"))?;
    let small = RingConfig::new(64 * 1024);
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
    /// Creates and initialises the segment of a worker.
    pub fn create(
        name: &str,
        sizes: &SegmentSizes,
        source: usize,
        max_in_flight: u64,
        sample_every: u64,
        table: &RoutingTable,
    ) -> Result<WorkerSegment, String> {
        if table.operators() != sizes.operators || table.key_groups() != KEY_GROUPS as usize {
            return Err(format!(
                "a routing table of {} operators × {} key groups for a segment of {} × {}",
                table.operators(),
                table.key_groups(),
                sizes.operators,
                KEY_GROUPS
            ));
        }
        let layout = segment_layout(sizes)?;
        let segment =
            Segment::create(name, &layout).map_err(|e| format!("worker segment {name}: {e}"))?;
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
    pub fn attach(name: &str, operators: usize, source: usize) -> Result<WorkerSegment, String> {
        let segment = Segment::attach(name).map_err(|e| format!("worker segment {name}: {e}"))?;
        let (base, len) = segment.user_area();
        if len < control_bytes() {
            return Err(format!(
                "segment {name} is not a worker segment (user area of {len} bytes)"
            ));
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
            return Err(format!(
                "segment {name} is not a worker segment of this version"
            ));
        }
        if ops != operators || src != source {
            return Err(format!(
                "worker {name} runs an app of {ops} operators with source {src}; this app has \
                 {operators} with source {source}"
            ));
        }
        let sizes = segment_layout(&SegmentSizes {
            executors,
            operators,
            ring_bytes: segment
                .ring_config(0)
                .map_err(|e| e.to_string())?
                .capacity_bytes,
            max_frame_bytes: segment
                .ring_config(0)
                .map_err(|e| e.to_string())?
                .max_frame_bytes,
        })?;
        if len < sizes.user_bytes || segment.ring_count() != sizes.rings.len() {
            return Err(format!(
                "segment {name}: layout does not match {executors} executors"
            ));
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

    /// The counters of executor `e`.
    pub fn metrics(&self, e: usize) -> MetricsView {
        assert!(e < self.index.executors);
        let slots = MetricsView::slots(self.operators);
        // SAFETY: the metrics blocks follow the table; block e is inside the user area
        // (sized by `segment_layout`).
        let base = unsafe {
            self.segment
                .user_area()
                .0
                .add(control_bytes() + table_bytes(self.operators) + e * slots * 8)
                .cast::<AtomicU64>()
        };
        MetricsView {
            base,
            operators: self.operators,
        }
    }
}
