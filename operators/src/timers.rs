//! Timers: an operator asks to be called back for a key at a later time.
//!
//! Why they live here, per key group: a timer belongs to the key that set it, exactly like the
//! key's state, so it must move with the key's key group in a migration and be fired by
//! whichever executor owns the group when its time comes. [`Timers`] keeps them in one map per
//! key group, beside the state map, and the group archive carries both.
//!
//! Two clocks:
//! * **event time** (a number in the app's own unit, e.g. seconds of the readings' timestamps):
//!   a timer at `t` fires once the watermark reaches `t` (watermark ≥ `t`). At end of stream the
//!   watermark is +∞, so every pending event-time timer fires before the final flush, in the
//!   oracle and on a cluster alike: they are oracle-checked.
//! * **processing time** (milliseconds since the Unix epoch on the executor's wall clock): a
//!   timer fires from the executor's loop once that clock reaches it. The oracle has no clock
//!   and never fires them; at end of stream pending ones are dropped. A run whose outputs
//!   depend on processing-time timers cannot equal its oracle, by nature.
//!
//! A key's timers are sets: one set twice for the same time fires once. They fire in time order
//! per key. An event-time timer at or before the current watermark can never fire on time: it
//! is refused (the runtime counts it as malformed under [`LATE_TIMER`]) and does nothing.
//! A processing-time timer in the past fires at the executor's next look at its clock.

use std::collections::{BTreeSet, HashMap};

use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::key::KEY_GROUPS;

/// The malformed reason under which a refused event-time timer (at or before the watermark)
/// is counted.
pub const LATE_TIMER: &str = "event-time timer at or before the watermark";

/// Milliseconds since the Unix epoch on this host's wall clock (0 if the clock is before it).
pub fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Which clock a timer follows (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeDomain {
    /// Event time, driven by the watermark.
    Event,
    /// Processing time: milliseconds since the Unix epoch on the executor's clock.
    Processing,
}

/// A timer: its clock and its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timer {
    /// Its clock.
    pub domain: TimeDomain,
    /// Its time (event time, or ms since the Unix epoch).
    pub at: u64,
}

/// What an operator asked for during one call, applied to its key when the call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerRequest {
    /// Set this timer (a no-op if it is already set).
    Set(Timer),
    /// Delete this timer (a no-op if it is not set).
    Delete(Timer),
}

/// A reusable list of [`TimerRequest`]s (what [`crate::Out::with_timers`] records into).
#[derive(Clone, Debug, Default)]
pub struct TimerRequests(pub(crate) Vec<TimerRequest>);

impl TimerRequests {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The requests in the order they were made.
    pub fn as_slice(&self) -> &[TimerRequest] {
        &self.0
    }

    /// Forgets them (keeping the capacity).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// One key's pending timers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct KeyTimers {
    event: BTreeSet<u64>,
    processing: BTreeSet<u64>,
}

impl KeyTimers {
    fn set(&mut self, domain: TimeDomain) -> &mut BTreeSet<u64> {
        match domain {
            TimeDomain::Event => &mut self.event,
            TimeDomain::Processing => &mut self.processing,
        }
    }

    fn is_empty(&self) -> bool {
        self.event.is_empty() && self.processing.is_empty()
    }
}

/// An exported key's timers: `(key, event times, processing times)`, times ascending.
pub type ExportedTimers = (Vec<u8>, Vec<u64>, Vec<u64>);

type Group = HashMap<Box<[u8]>, KeyTimers, Xxh3DefaultBuilder>;

/// The timers of one operator instance, per key group (see the module docs).
#[derive(Debug)]
pub struct Timers {
    /// Empty until the first timer is set; else one map per key group.
    groups: Vec<Group>,
    /// The event-time watermark (`None` before the first advance: −∞).
    watermark: Option<u64>,
    /// A lower bound on the earliest pending processing-time timer (`u64::MAX`: none).
    next_processing_ms: u64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            groups: Vec::new(),
            watermark: None,
            next_processing_ms: u64::MAX,
        }
    }
}

impl Timers {
    fn group_mut(&mut self, key_group: u16) -> &mut Group {
        if self.groups.is_empty() {
            self.groups = (0..KEY_GROUPS).map(|_| Group::default()).collect();
        }
        &mut self.groups[usize::from(key_group % KEY_GROUPS)]
    }

    /// The event-time watermark (`None`: nothing has advanced it yet).
    pub fn watermark(&self) -> Option<u64> {
        self.watermark
    }

    /// Applies `requests` to `key`'s timers; returns how many were refused (event-time timers
    /// at or before the watermark). Drains `requests`.
    pub fn apply(&mut self, key_group: u16, key: &[u8], requests: &mut TimerRequests) -> u64 {
        let mut refused = 0;
        let watermark = self.watermark;
        let mut earliest = self.next_processing_ms;
        let group = self.group_mut(key_group);
        for r in requests.0.drain(..) {
            match r {
                TimerRequest::Set(t) => {
                    if t.domain == TimeDomain::Event && watermark.is_some_and(|w| t.at <= w) {
                        refused += 1;
                        continue;
                    }
                    if !group.contains_key(key) {
                        group.insert(key.into(), KeyTimers::default());
                    }
                    let timers = group.get_mut(key).expect("inserted above");
                    timers.set(t.domain).insert(t.at);
                    if t.domain == TimeDomain::Processing {
                        earliest = earliest.min(t.at);
                    }
                }
                TimerRequest::Delete(t) => {
                    if let Some(timers) = group.get_mut(key) {
                        timers.set(t.domain).remove(&t.at);
                        if timers.is_empty() {
                            group.remove(key);
                        }
                    }
                }
            }
        }
        self.next_processing_ms = earliest;
        refused
    }

    /// The earliest time a processing-time timer may be due (`None`: none pending).
    #[inline]
    pub fn next_processing_ms(&self) -> Option<u64> {
        (self.next_processing_ms != u64::MAX).then_some(self.next_processing_ms)
    }

    /// Advances the watermark to `watermark` (never backwards) and removes the event-time
    /// timers it passed: `(key, time)` sorted by time, then key.
    pub fn advance_watermark(&mut self, watermark: u64) -> Vec<(Box<[u8]>, u64)> {
        if self.watermark.is_some_and(|w| w >= watermark) {
            return Vec::new();
        }
        self.watermark = Some(watermark);
        self.take_due(TimeDomain::Event, watermark)
    }

    /// Removes the processing-time timers due at `now_ms`: `(key, time)` sorted by time, then
    /// key.
    pub fn take_due_processing(&mut self, now_ms: u64) -> Vec<(Box<[u8]>, u64)> {
        if now_ms < self.next_processing_ms {
            return Vec::new();
        }
        let due = self.take_due(TimeDomain::Processing, now_ms);
        self.next_processing_ms = self
            .groups
            .iter()
            .flat_map(|g| g.values())
            .filter_map(|t| t.processing.first().copied())
            .min()
            .unwrap_or(u64::MAX);
        due
    }

    /// Drops every processing-time timer (the stream ended).
    pub fn drop_processing(&mut self) {
        for group in &mut self.groups {
            group.retain(|_, t| {
                t.processing.clear();
                !t.is_empty()
            });
        }
        self.next_processing_ms = u64::MAX;
    }

    fn take_due(&mut self, domain: TimeDomain, upto: u64) -> Vec<(Box<[u8]>, u64)> {
        let mut due = Vec::new();
        for group in &mut self.groups {
            group.retain(|key, timers| {
                let set = timers.set(domain);
                let later = match upto.checked_add(1) {
                    Some(after) => set.split_off(&after),
                    None => BTreeSet::new(),
                };
                let fired = std::mem::replace(set, later);
                due.extend(fired.into_iter().map(|at| (key.clone(), at)));
                !timers.is_empty()
            });
        }
        due.sort_unstable_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        due
    }

    /// Whether `key_group` holds timers.
    pub fn holds(&self, key_group: u16) -> bool {
        self.groups
            .get(usize::from(key_group % KEY_GROUPS))
            .is_some_and(|g| !g.is_empty())
    }

    /// Pending timers of every key.
    pub fn pending(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.values())
            .map(|t| t.event.len() + t.processing.len())
            .sum()
    }

    /// Removes `key_group`'s timers, keys ascending.
    pub fn export(&mut self, key_group: u16) -> Vec<ExportedTimers> {
        let entries = self.copy(key_group);
        self.remove(key_group);
        entries
    }

    /// Drops key group `key_group`'s timers.
    pub fn remove(&mut self, key_group: u16) {
        if let Some(group) = self.groups.get_mut(usize::from(key_group % KEY_GROUPS)) {
            *group = Group::default();
        }
    }

    /// Key group `key_group`'s timers, sorted by key, kept here ([`Timers::export`] is this and
    /// a removal).
    pub fn copy(&self, key_group: u16) -> Vec<ExportedTimers> {
        let Some(group) = self.groups.get(usize::from(key_group % KEY_GROUPS)) else {
            return Vec::new();
        };
        let mut entries: Vec<ExportedTimers> = group
            .iter()
            .map(|(k, t)| {
                let event = t.event.iter().copied().collect();
                (k.to_vec(), event, t.processing.iter().copied().collect())
            })
            .collect();
        entries.sort_unstable();
        entries
    }

    /// Installs timers exported by [`Timers::export`]. Event-time timers the watermark here
    /// has already passed are kept: they fire at the next advance.
    pub fn import(&mut self, key_group: u16, entries: Vec<ExportedTimers>) {
        if entries.is_empty() {
            return;
        }
        let mut earliest = self.next_processing_ms;
        let group = self.group_mut(key_group);
        for (key, event, processing) in entries {
            earliest = earliest.min(processing.first().copied().unwrap_or(u64::MAX));
            let timers = KeyTimers {
                event: event.into_iter().collect(),
                processing: processing.into_iter().collect(),
            };
            if !timers.is_empty() {
                group.insert(key.into_boxed_slice(), timers);
            }
        }
        self.next_processing_ms = earliest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(domain: TimeDomain, at: u64) -> TimerRequest {
        TimerRequest::Set(Timer { domain, at })
    }

    #[test]
    fn a_timer_set_twice_fires_once_in_time_order_per_key() {
        let mut t = Timers::default();
        let mut r = TimerRequests::new();
        r.0.extend([
            set(TimeDomain::Event, 9),
            set(TimeDomain::Event, 3),
            set(TimeDomain::Event, 9),
        ]);
        assert_eq!(t.apply(1, b"a", &mut r), 0);
        r.0.push(set(TimeDomain::Event, 5));
        t.apply(1, b"b", &mut r);
        assert_eq!(t.pending(), 3);
        let fired = t.advance_watermark(8);
        assert_eq!(fired, vec![(b"a"[..].into(), 3), (b"b"[..].into(), 5)]);
        assert_eq!(t.advance_watermark(7), vec![]); // never backwards
        assert_eq!(t.advance_watermark(u64::MAX), vec![(b"a"[..].into(), 9)]);
        assert!(!t.holds(1));
    }

    #[test]
    fn an_event_timer_at_or_before_the_watermark_is_refused() {
        let mut t = Timers::default();
        t.advance_watermark(10);
        let mut r = TimerRequests::new();
        r.0.extend([set(TimeDomain::Event, 10), set(TimeDomain::Event, 11)]);
        assert_eq!(t.apply(0, b"k", &mut r), 1);
        assert_eq!(t.pending(), 1);
    }

    #[test]
    fn processing_timers_fire_when_due_and_drop_at_the_end() {
        let mut t = Timers::default();
        let mut r = TimerRequests::new();
        r.0.extend([
            set(TimeDomain::Processing, 100),
            set(TimeDomain::Processing, 200),
        ]);
        t.apply(2, b"k", &mut r);
        assert_eq!(t.next_processing_ms(), Some(100));
        assert!(t.take_due_processing(99).is_empty());
        assert_eq!(t.take_due_processing(150), vec![(b"k"[..].into(), 100)]);
        assert_eq!(t.next_processing_ms(), Some(200));
        t.drop_processing();
        assert_eq!(t.next_processing_ms(), None);
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn deleted_timers_do_not_fire_and_exports_move_the_rest() {
        let mut t = Timers::default();
        let mut r = TimerRequests::new();
        r.0.extend([
            set(TimeDomain::Event, 4),
            set(TimeDomain::Event, 6),
            TimerRequest::Delete(Timer {
                domain: TimeDomain::Event,
                at: 4,
            }),
            set(TimeDomain::Processing, 50),
        ]);
        t.apply(5, b"k", &mut r);
        let moved = t.export(5);
        assert_eq!(moved, vec![(b"k".to_vec(), vec![6], vec![50])]);
        assert_eq!(t.pending(), 0);
        let mut other = Timers::default();
        other.import(5, moved);
        assert_eq!(other.next_processing_ms(), Some(50));
        assert_eq!(
            other.advance_watermark(u64::MAX),
            vec![(b"k"[..].into(), 6)]
        );
    }
}
