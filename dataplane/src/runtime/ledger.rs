//! Exact end-to-end latency of request trees, Storm's acker in spirit, with one report per
//! leaf.
//!
//! Every request has a 64-bit id; the root's is a hash of its admission sequence. A request
//! that emits requests gives each child but the last a fresh id that looks random (a hash of
//! the root, the parent and the child's index) and the last the parent's id XOR its siblings',
//! so the children's ids XOR to the parent's; it reports nothing. A request that emits none (a
//! leaf) reports one delta for its root: its own id. A root's ledger opens at the root's id and
//! XORs in every delta. By induction over the tree, the ids of the requests created and not
//! yet processed always XOR to the ledger, so it is zero exactly when every request of the
//! tree was processed — up to the 2^-64 chance that the ids of a non-empty set of waiting
//! requests XOR to zero. Deltas arrive in any order from any executor; an entry is ~24 bytes
//! per root in flight, whatever the tree's size.
//!
//! Why leaves only: every tracked request used to report `own id ^ children's ids`, so a
//! chain of ten operators sent ten deltas per root through the report ring, the network
//! thread and the ledger; it now sends one, and a fan-out of ten sends ten, not eleven. (A
//! child that cannot be routed, an error the executor reports, is left out: when it was to
//! carry its parent's id, the parent reports its id XOR the children it did send.)
//!
//! And a child that needs no node of its own is left out too: a leaf its executor queues for
//! itself (`executor/local_queue.rs`) runs before that executor reports anything, so a delta
//! of its parent's, reported after it, covers it. Such a child gets no id (it is sent
//! untracked), and its parent reports its own delta — its id XOR the children it did send
//! elsewhere — instead of letting its last child carry it: a carrier sent to another executor
//! could close the tree before the folded leaf ran. When all its children are such leaves, the
//! parent reports its own id, as a leaf would (WC on one executor: the split's one delta a
//! sentence, where each of its ten words had an id hashed and a delta added, which the
//! executor combined into about one on the way).
//!
//! The ledger lives with the coordinator of the root's home worker, where the admission time
//! was taken, so no two clocks are compared.
//!
//! Applying deltas is the coordinator's main work, and with roots spread over executors most
//! roots take two or more deltas: one opens the entry, the last removes it. Root ids look
//! random, so each lookup lands on a line of the open table that the executors sharing the
//! core have evicted: `perf` put 43 % of [`Ledger::apply`]'s samples of a two-executor WC run
//! on that one load. [`Ledger::apply_all`] therefore prefetches the lines of the lookup
//! [`APPLY_AHEAD`] deltas ahead, the way an executor prefetches its state.

use clasp_shmring::prefetch_read;
use hashbrown::HashMap;
use hashbrown::hash_map::Entry;
use hdrhistogram::Histogram;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// How many deltas ahead [`Ledger::apply_all`] prefetches the open table's lines.
pub const APPLY_AHEAD: usize = 8;

/// One delta as it travels in a report frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delta {
    /// The root's id.
    pub root_id: u64,
    /// What the delta XORs into the root's ledger: a leaf's id (or the XOR of several deltas
    /// of one root combined on the way).
    pub xor: u64,
    /// The root's admission time (ns, CLOCK_MONOTONIC); 0 for roots that are not inputs (the
    /// end-of-stream flushes), which are not recorded in the histogram. A delta that waited
    /// before it was sent on carries it moved later by the wait (`runtime/deltas.rs`).
    pub admitted_ns: u64,
}

/// Bytes of one delta in a report frame.
pub const DELTA_BYTES: usize = 24;

impl Delta {
    /// Writes the wire form into exactly [`DELTA_BYTES`] bytes.
    #[inline]
    pub fn write(&self, out: &mut [u8; DELTA_BYTES]) {
        out[..8].copy_from_slice(&self.root_id.to_le_bytes());
        out[8..16].copy_from_slice(&self.xor.to_le_bytes());
        out[16..].copy_from_slice(&self.admitted_ns.to_le_bytes());
    }

    /// Reads one from exactly [`DELTA_BYTES`] bytes.
    pub fn read(b: &[u8; DELTA_BYTES]) -> Delta {
        let u = |o: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(word)
        };
        Delta {
            root_id: u(0),
            xor: u(8),
            admitted_ns: u(16),
        }
    }
}

/// The ids of one tracked request's children, and what it reports: fresh ids for all but the
/// carrier (the last child bound for an operator), which takes the parent's id XOR its
/// siblings'; a delta only when no carrier was sent.
#[derive(Clone, Copy, Debug)]
pub struct ChildIds {
    root: u64,
    parent: u64,
    carrier: Option<usize>,
    /// The parent's id XOR the ids handed out so far.
    owed: u64,
    carried: bool,
}

impl ChildIds {
    /// For request `parent` of root `root`, whose emission `carrier` (by index) is its last
    /// child bound for an operator (`None`: it emitted none).
    #[inline]
    pub fn new(root: u64, parent: u64, carrier: Option<usize>) -> Self {
        ChildIds {
            root,
            parent,
            carrier,
            owed: parent,
            carried: false,
        }
    }

    /// The id of emission `index`, a child about to be sent (children are sent in index order;
    /// one that is not sent is not asked for).
    #[inline]
    pub fn next(&mut self, index: usize) -> u64 {
        let id = if self.carrier == Some(index) {
            debug_assert!(!self.carried, "one carrier");
            self.carried = true;
            self.owed
        } else {
            crate::request::child_id(self.root, self.parent, index as u32)
        };
        self.owed ^= id;
        id
    }

    /// No child carries the parent's id: the parent reports its delta itself (a child folded
    /// into the parent must not let a carrier sent elsewhere close the tree before that child
    /// ran). Called before the carrier is asked for.
    #[inline]
    pub fn forget_carrier(&mut self) {
        debug_assert!(!self.carried, "the carrier was sent already");
        self.carrier = None;
    }

    /// The delta the parent reports once its children are sent: `None` when the carrier
    /// carried its id, else its id XOR the children it sent.
    #[inline]
    pub fn delta(&self) -> Option<u64> {
        (!self.carried).then_some(self.owed)
    }
}

/// How long a run took, from its first admission: to the last tracked tree's completion when
/// every root is tracked (`sample_every` 1); with sampled tracking the last tracked tree may
/// end long before the input does, so then to `input_done`, when the workers were first found
/// quiet after the input (every root processed), where that is known.
pub fn run_elapsed(
    first_admit: Option<Instant>,
    last_completion: Instant,
    input_done: Option<Instant>,
    sample_every: u64,
) -> Duration {
    let end = match input_done {
        Some(done) if sample_every > 1 => done,
        _ => last_completion,
    };
    first_admit.map_or(Duration::ZERO, |t| end.saturating_duration_since(t))
}

/// Root ids are already hashes (of the root's sequence, [`crate::request::root_id`]): used as
/// they are by the maps keyed by them (the ledger, a worker's waiting deltas). SipHash was about
/// a fifth of the local coordinator's ledger samples in a profile of WC on two executors.
#[derive(Default)]
pub(crate) struct RootIdHasher(u64);

impl Hasher for RootIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The open ledgers of one home, and the latency of the completed trees.
#[derive(Clone)]
pub struct Ledger {
    /// Root id → (the root id XOR the deltas so far: 0 when complete, its admission time).
    open: HashMap<u64, (u64, u64), BuildHasherDefault<RootIdHasher>>,
    latency: Latencies,
    completed_inputs: u64,
    completed_other: Vec<u64>,
    /// The earliest admission time (ns, the roots' clock) of a completed input tree.
    first_admitted_ns: Option<u64>,
}

/// Latency percentiles in µs. Read back (a child process's report), the buckets and the sum
/// are zero: they are not printed.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Trees measured.
    pub count: u64,
    /// Trees per latency bucket: `buckets[i]` counts those above bound i − 1 and at most
    /// [`LATENCY_BUCKET_BOUNDS_US`]`[i]`; the last counts the rest (for a metrics histogram).
    #[serde(skip)]
    pub buckets: [u64; LATENCY_BUCKETS],
    /// Sum of the trees' latencies (µs).
    #[serde(skip)]
    pub sum_us: f64,
}

/// Upper bounds (µs) of the latency buckets a [`LatencySummary`] counts, from 100 µs to 10 s;
/// one bucket more holds everything above the last.
pub const LATENCY_BUCKET_BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
/// Buckets of a [`LatencySummary`]: one per bound and one above the last.
pub const LATENCY_BUCKETS: usize = LATENCY_BUCKET_BOUNDS_US.len() + 1;

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl Ledger {
    /// An empty ledger; latencies from 1 ns to 1 hour at 3 significant digits.
    pub fn new() -> Self {
        Ledger {
            open: HashMap::default(),
            latency: Latencies::default(),
            completed_inputs: 0,
            completed_other: Vec::new(),
            first_admitted_ns: None,
        }
    }

    /// Applies a delta; returns true when it completed its tree. The tree's latency is
    /// `now_ns` less the admission time the closing delta carries: a delta that waited on its
    /// way (a cluster worker holds them briefly) carries its root's admission moved later by
    /// that wait, and the parts of one tree may have waited differently.
    pub fn apply(&mut self, d: Delta, now_ns: u64) -> bool {
        // A ledger opens at its root's id: the tree's leaves report ids that XOR to it.
        // One lookup: a tree closed by its first delta is never inserted.
        let opened_at = match self.open.entry(d.root_id) {
            Entry::Occupied(mut e) => {
                e.get_mut().0 ^= d.xor;
                if e.get().0 != 0 {
                    return false;
                }
                e.remove().1
            }
            Entry::Vacant(v) => {
                if d.root_id ^ d.xor != 0 {
                    v.insert((d.root_id ^ d.xor, d.admitted_ns));
                    return false;
                }
                d.admitted_ns
            }
        };
        if opened_at != 0 {
            self.completed_inputs += 1;
            let admitted_ns = opened_at.min(d.admitted_ns);
            self.first_admitted_ns = Some(
                self.first_admitted_ns
                    .map_or(admitted_ns, |f| f.min(admitted_ns)),
            );
            let ns = now_ns.saturating_sub(d.admitted_ns).max(1);
            self.latency.record(ns);
        } else {
            self.completed_other.push(d.root_id);
        }
        true
    }

    /// Applies `deltas` in order, prefetching the open table's lines [`APPLY_AHEAD`] deltas
    /// ahead of each lookup; returns how many trees they completed (see [`Ledger::apply`]).
    pub fn apply_all(&mut self, deltas: impl IntoIterator<Item = Delta>, now_ns: u64) -> u64 {
        let mut deltas = deltas.into_iter().fuse();
        // The next deltas, oldest at `head`: `waiting` of them, prefetched as they came in.
        let mut ahead = [Delta {
            root_id: 0,
            xor: 0,
            admitted_ns: 0,
        }; APPLY_AHEAD];
        let mut waiting = 0;
        for (slot, d) in ahead.iter_mut().zip(deltas.by_ref()) {
            self.prefetch(d.root_id);
            *slot = d;
            waiting += 1;
        }
        let (mut head, mut completed) = (0, 0);
        while waiting > 0 {
            let d = ahead[head];
            match deltas.next() {
                Some(next) => {
                    self.prefetch(next.root_id);
                    ahead[head] = next;
                }
                None => waiting -= 1,
            }
            head = (head + 1) % APPLY_AHEAD;
            completed += u64::from(self.apply(d, now_ns));
        }
        completed
    }

    /// Asks for the lines a lookup of `root_id` starts from (its bucket's control bytes and
    /// first slot) to be brought into the cache. Addresses only; nothing is read.
    #[inline]
    fn prefetch(&self, root_id: u64) {
        if self.open.is_empty() {
            return; // the empty table's lines are a shared static; nothing to fetch
        }
        let table = self.open.raw_table();
        // The table places a key at its hash masked to the buckets, and a root id hashes to
        // itself ([`RootIdHasher`]).
        let pos = (root_id as usize) & (table.buckets() - 1);
        let end = table.data_end().as_ptr();
        // Control bytes start at `end`; slot `pos` ends `pos` slots below it (wrapping
        // arithmetic: addresses are computed, never dereferenced here).
        prefetch_read(end.cast::<u8>().wrapping_add(pos));
        prefetch_read(end.wrapping_sub(pos + 1).cast::<u8>());
    }

    /// Input trees completed.
    pub fn completed_inputs(&self) -> u64 {
        self.completed_inputs
    }

    /// The earliest admission time (ns on the roots' clock) among the input trees completed:
    /// the first record's, since the first record is always tracked.
    pub fn first_admitted_ns(&self) -> Option<u64> {
        self.first_admitted_ns
    }

    /// Whether the non-input root `root_id` (an end-of-stream flush) completed.
    pub fn other_completed(&self, root_id: u64) -> bool {
        self.completed_other.contains(&root_id)
    }

    /// Trees still open.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Percentiles so far.
    pub fn summary(&self) -> LatencySummary {
        self.latency.summary()
    }

    /// Percentiles of the trees completed since the previous call (for per-interval series).
    pub fn take_interval(&mut self) -> LatencySummary {
        self.latency.take_interval()
    }
}

/// The largest duration a [`Latencies`] tells apart: an hour (longer ones count as an hour).
pub const LATENCY_MAX_NS: u64 = 3_600_000_000_000;

/// Durations over a whole run and since the last interval, 1 ns to [`LATENCY_MAX_NS`] at three
/// significant digits: trees' latencies (the [`Ledger`]), and how late records were admitted
/// (the cluster driver).
#[derive(Clone)]
pub struct Latencies {
    run_ns: Histogram<u64>,
    interval_ns: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        let h = || Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("static bounds");
        Latencies {
            run_ns: h(),
            interval_ns: h(),
        }
    }
}

impl Latencies {
    /// One duration of `ns` (at least 1 ns; longer than the bound counts as the bound).
    /// Recorded in the interval's histogram only: the run's takes each interval whole when it
    /// ends ([`Latencies::take_interval`]), so a duration costs one record, not two (the
    /// second was a sixth of a two-executor WC coordinator's samples).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.interval_ns.saturating_record(ns.max(1));
    }

    /// One duration (as [`Latencies::record`]).
    #[inline]
    pub fn record_duration(&mut self, d: std::time::Duration) {
        self.record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Percentiles over the run so far: the intervals taken and the one under way.
    pub fn summary(&self) -> LatencySummary {
        if self.run_ns.is_empty() {
            return summarize(&self.interval_ns);
        }
        let mut all = self.run_ns.clone();
        merge(&mut all, &self.interval_ns);
        summarize(&all)
    }

    /// Percentiles since the previous call; the interval joins the run's histogram.
    pub fn take_interval(&mut self) -> LatencySummary {
        let s = summarize(&self.interval_ns);
        merge(&mut self.run_ns, &self.interval_ns);
        self.interval_ns.reset();
        s
    }
}

/// Adds `from`'s counts to `into`. Both have [`Latencies`]'s bounds, so the histograms' buckets
/// line up and the addition cannot fail.
fn merge(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from)
        .expect("latency histograms share their bounds (`Latencies::default`)");
}

/// `h` (ns) as percentiles in µs.
fn summarize(h: &Histogram<u64>) -> LatencySummary {
    {
        let us = |v: u64| v as f64 / 1000.0;
        LatencySummary {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
            count: h.len(),
            buckets: buckets(h),
            sum_us: h.mean() * h.len() as f64 / 1000.0,
        }
    }
}

/// `h` (ns) counted into the latency buckets.
fn buckets(h: &Histogram<u64>) -> [u64; LATENCY_BUCKETS] {
    let mut out = [0u64; LATENCY_BUCKETS];
    let mut below = 0u64;
    for (slot, bound_us) in out.iter_mut().zip(LATENCY_BUCKET_BOUNDS_US) {
        let upto = h.count_between(0, bound_us.saturating_mul(1000));
        *slot = upto.saturating_sub(below);
        below = upto.max(below);
    }
    out[LATENCY_BUCKETS - 1] = h.len().saturating_sub(below);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::root_id;

    #[test]
    fn latencies_are_counted_into_their_buckets() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for ns in [50_000, 100_000, 300_000, 20_000_000_000] {
            h.record(ns).unwrap();
        }
        let s = summarize(&h);
        // 50 µs and 100 µs at most 100 µs; 300 µs in (250, 500]; 20 s above the last bound.
        assert_eq!(s.buckets[0], 2, "{:?}", s.buckets);
        assert_eq!(s.buckets[2], 1, "{:?}", s.buckets);
        assert_eq!(s.buckets[LATENCY_BUCKETS - 1], 1, "{:?}", s.buckets);
        assert_eq!(s.buckets.iter().sum::<u64>(), 4);
    }

    #[test]
    fn the_run_holds_every_interval_taken_and_the_one_under_way() {
        let mut l = Latencies::default();
        assert_eq!(l.summary().count, 0);
        for ns in [1_000, 2_000, 3_000] {
            l.record(ns);
        }
        assert_eq!(l.summary().count, 3, "before any interval is taken");
        let first = l.take_interval();
        assert_eq!((first.count, l.summary().count), (3, 3));
        l.record(1_000_000);
        let run = l.summary();
        assert_eq!(run.count, 4);
        assert!((run.max - 1000.0).abs() < 1.0, "{run:?}");
        let second = l.take_interval();
        assert_eq!(second.count, 1);
        assert!((second.p50 - 1000.0).abs() < 1.0, "{second:?}");
        assert_eq!(
            l.take_interval().count,
            0,
            "an interval with nothing recorded"
        );
        assert_eq!(l.summary().count, 4, "taking intervals loses nothing");
    }

    /// The deltas of a tree given as each request's number of children (in breadth-first
    /// order, the root first; requests past the end emit none), with ids handed out as the
    /// executor hands them out.
    fn leaf_deltas(r: u64, children: &[usize]) -> Vec<Delta> {
        let mut ids = vec![r];
        let mut deltas = Vec::new();
        let mut n = 0;
        while let Some(&parent) = ids.get(n) {
            let k = children.get(n).copied().unwrap_or(0);
            n += 1;
            let mut c = ChildIds::new(r, parent, k.checked_sub(1));
            ids.extend((0..k).map(|i| c.next(i)));
            deltas.extend(c.delta().map(|xor| Delta {
                root_id: r,
                xor,
                admitted_ns: 100,
            }));
        }
        deltas
    }

    #[test]
    fn a_tree_completes_whatever_order_its_deltas_arrive_in() {
        let r = root_id(7);
        // The root emits two; its first child emits two; the rest emit nothing.
        let deltas = leaf_deltas(r, &[2, 2, 0, 0, 0]);
        assert_eq!(deltas.len(), 3, "one delta per leaf");
        for perm in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let mut l = Ledger::new();
            let done: Vec<bool> = perm.iter().map(|&i| l.apply(deltas[i], 1100)).collect();
            assert_eq!(done, [false, false, true], "order {perm:?}");
            assert_eq!(l.open(), 0);
            assert_eq!(l.completed_inputs(), 1);
            assert!((l.summary().p50 - 1.0).abs() < 0.01);
        }
    }

    #[test]
    fn deltas_applied_as_a_batch_close_what_applied_one_by_one_closes() {
        // Trees of three leaves each, their deltas interleaved so that entries open, stay
        // open across the prefetch window and close; batches shorter than, as long as and
        // longer than the window.
        for roots in [1u64, 2, 3, 50] {
            let mut deltas: Vec<Delta> = (0..roots)
                .flat_map(|i| leaf_deltas(root_id(i), &[3, 0, 0, 0]))
                .collect();
            let n = deltas.len();
            deltas.rotate_left(n / 3); // leaves of the last roots before the first roots'
            let mut one_by_one = Ledger::new();
            let closed = deltas
                .iter()
                .filter(|&&d| one_by_one.apply(d, 1_000))
                .count() as u64;
            assert_eq!(closed, roots);
            for split in [
                0,
                1,
                APPLY_AHEAD - 1,
                APPLY_AHEAD,
                APPLY_AHEAD + 1,
                n / 2,
                n,
            ] {
                let split = split.min(n);
                let mut batched = Ledger::new();
                let first = batched.apply_all(deltas[..split].iter().copied(), 1_000);
                let second = batched.apply_all(deltas[split..].iter().copied(), 1_000);
                assert_eq!(first + second, roots, "{roots} roots split at {split}");
                assert_eq!(batched.open(), 0);
                assert_eq!(batched.completed_inputs(), one_by_one.completed_inputs());
                assert_eq!(batched.summary(), one_by_one.summary());
            }
        }
        assert_eq!(Ledger::new().apply_all([], 1), 0);
    }

    #[test]
    fn a_chain_reports_once() {
        let r = root_id(3);
        let deltas = leaf_deltas(r, &[1; 10]);
        assert_eq!(deltas.len(), 1);
        let mut l = Ledger::new();
        assert!(l.apply(deltas[0], 200));
    }

    #[test]
    fn a_tree_is_measured_up_to_its_closing_delta_less_that_delta_s_wait() {
        // Root 5 admitted at 1 000 ns; its two leaves' deltas waited 300 and 2 000 ns on their
        // workers, which moved the admission they carry by as much.
        let part = |xor, admitted_ns| Delta {
            root_id: 5,
            xor,
            admitted_ns,
        };
        let mut ledger = Ledger::new();
        assert!(!ledger.apply(part(5 ^ 9, 1_300), 10_000));
        assert!(ledger.apply(part(9, 3_000), 20_000));
        let s = ledger.summary();
        // 20 000 − 3 000 ns = 17 µs (the histogram keeps 3 significant digits).
        assert!((s.max - 17.0).abs() < 0.05, "{s:?}");
    }

    #[test]
    fn a_child_that_was_not_sent_leaves_the_parent_to_report() {
        let r = root_id(4);
        // The root emits three; the carrier (index 2) cannot be routed.
        let mut c = ChildIds::new(r, r, Some(2));
        let (a, b) = (c.next(0), c.next(1));
        let d = |xor| Delta {
            root_id: r,
            xor,
            admitted_ns: 100,
        };
        let parent = c.delta().expect("no carrier was sent");
        let mut l = Ledger::new();
        assert!(!l.apply(d(parent), 150));
        assert!(!l.apply(d(a), 150));
        assert!(l.apply(d(b), 150));
    }

    #[test]
    fn a_parent_with_a_folded_child_reports_itself_and_its_carrier_carries_nothing() {
        let r = root_id(5);
        // The root emits three: index 0 folded (run where it is, no id), 1 sent, and the
        // carrier (index 2) sent elsewhere with a fresh id.
        let mut c = ChildIds::new(r, r, Some(2));
        c.forget_carrier();
        let (a, carrier) = (c.next(1), c.next(2));
        assert_ne!(carrier, r ^ a, "the carrier got an id of its own");
        let parent = c.delta().expect("the parent reports");
        let d = |xor| Delta {
            root_id: r,
            xor,
            admitted_ns: 100,
        };
        // The two sent children close nothing until the parent's delta, which leaves after
        // the folded child ran, arrives.
        let mut l = Ledger::new();
        assert!(!l.apply(d(a), 150));
        assert!(!l.apply(d(carrier), 150));
        assert!(l.apply(d(parent), 150));
        // Every child folded: the parent reports its own id, as a leaf.
        let mut all = ChildIds::new(r, r, Some(1));
        all.forget_carrier();
        assert_eq!(all.delta(), Some(r));
    }

    proptest::proptest! {
        /// Any tree, deltas in any order: the ledger closes at the last delta and not before.
        #[test]
        fn any_tree_closes_exactly_at_its_last_delta(
            seq in proptest::prelude::any::<u64>(),
            children in proptest::collection::vec(0usize..4, 1..40),
            order in proptest::prelude::any::<u64>(),
        ) {
            let mut deltas = leaf_deltas(root_id(seq), &children);
            // A deterministic shuffle from `order`.
            let mut x = order | 1;
            for i in (1..deltas.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                deltas.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut l = Ledger::new();
            let done: Vec<bool> = deltas.iter().map(|&d| l.apply(d, 1000)).collect();
            proptest::prop_assert_eq!(done.iter().filter(|&&d| d).count(), 1);
            proptest::prop_assert!(done.last().copied().unwrap_or(false));
        }
    }

    #[test]
    fn a_root_without_children_completes_at_once_and_flushes_are_not_latency() {
        let mut l = Ledger::new();
        assert!(l.apply(
            Delta {
                root_id: 5,
                xor: 5,
                admitted_ns: 1
            },
            2
        ));
        assert!(l.apply(
            Delta {
                root_id: 9,
                xor: 9,
                admitted_ns: 0
            },
            2
        ));
        assert_eq!(l.completed_inputs(), 1);
        assert!(l.other_completed(9));
        assert_eq!(l.summary().count, 1);
    }
}
