//! The buffer operators emit into.
//!
//! One [`Emitter`] belongs to the caller (an executor, the oracle) and is reused for every
//! request: its byte buffers and entry list grow to the largest fan-out seen and then stay, so
//! emitting does not allocate on the hot path. After each `process` call the caller walks
//! [`Emitter::iter`], routes each chained request by `(target operator, key_group(key))`, and
//! calls [`Emitter::clear`].

use std::ops::Range;

use crate::timers::{TimeDomain, Timer, TimerRequest, TimerRequests};

/// Where an emission goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A chained request to the operator with this index in the app spec.
    Operator(u16),
    /// A sink output of the emitting operator (leaves the app).
    Output,
}

#[derive(Clone, Debug)]
struct Entry {
    target: Target,
    key: Range<u32>,
    payload: Range<u32>,
    /// An output's number among its key's outputs (see [`Emitter::seq`]).
    seq: u64,
}

/// One emitted request or output, borrowed from the [`Emitter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emission<'a> {
    /// Successor operator, or the app's output.
    pub target: Target,
    /// Canonical key: the routing key of the successor (for outputs, what the output is about).
    pub key: &'a [u8],
    /// App-encoded payload.
    pub payload: &'a [u8],
}

/// Caller-owned, reused buffer of emissions (see the module docs).
#[derive(Debug, Default)]
pub struct Emitter {
    keys: Vec<u8>,
    payloads: Vec<u8>,
    entries: Vec<Entry>,
}

fn offset(len: usize) -> u32 {
    u32::try_from(len).expect("one request emits less than 4 GiB")
}

impl Emitter {
    /// An empty emitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of emissions since the last [`Emitter::clear`].
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing was emitted since the last clear.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every emission, keeping the buffers' capacity.
    #[inline]
    pub fn clear(&mut self) {
        self.keys.clear();
        self.payloads.clear();
        self.entries.clear();
    }

    /// Drops the emissions from index `len` on (used to undo the emissions of a request that
    /// turned out to be malformed).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.entries.len() {
            return;
        }
        let first = &self.entries[len];
        let (k, p) = (first.key.start as usize, first.payload.start as usize);
        self.entries.truncate(len);
        self.keys.truncate(k);
        self.payloads.truncate(p);
    }

    /// The emission at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Emission<'_> {
        self.emission(&self.entries[index])
    }

    #[inline]
    fn emission(&self, e: &Entry) -> Emission<'_> {
        Emission {
            target: e.target,
            key: &self.keys[e.key.start as usize..e.key.end as usize],
            payload: &self.payloads[e.payload.start as usize..e.payload.end as usize],
        }
    }

    /// The `seq` of output `index`: its number among the outputs of its operator for its key,
    /// set by the operator's runtime when it tracks them
    /// ([`crate::OperatorInstance::track_output_seq`]); 0 otherwise.
    #[inline]
    pub fn seq(&self, index: usize) -> u64 {
        self.entries[index].seq
    }

    /// Sets the `seq` of emission `index`.
    #[inline]
    pub(crate) fn set_seq(&mut self, index: usize, seq: u64) {
        self.entries[index].seq = seq;
    }

    /// The sink outputs from index `start` on, in emission order (chained requests skipped
    /// without looking at their bytes).
    #[inline]
    pub fn outputs_from(&self, start: usize) -> impl Iterator<Item = Emission<'_>> + '_ {
        let entries = self.entries.get(start..).unwrap_or(&[]);
        entries
            .iter()
            .filter(|e| e.target == Target::Output)
            .map(|e| self.emission(e))
    }

    /// Whether an emission from index `start` on has a key longer than `limit` bytes.
    #[inline]
    pub fn any_key_longer_than(&self, start: usize, limit: usize) -> bool {
        let Some(first) = self.entries.get(start) else {
            return false;
        };
        // Keys are written back to back: when all of them together fit, each does (the
        // common case, checked without walking the emissions).
        if self.keys.len() - first.key.start as usize <= limit {
            return false;
        }
        self.entries[start..].iter().any(|e| e.key.len() > limit)
    }

    /// The index of the last emission bound for an operator (a chained request), if any.
    #[inline]
    pub fn last_to_operator(&self) -> Option<usize> {
        self.entries
            .iter()
            .rposition(|e| matches!(e.target, Target::Operator(_)))
    }

    /// Every emission in emission order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Emission<'_>> + '_ {
        (0..self.entries.len()).map(|i| self.get(i))
    }

    /// Writes a key and a payload with `build` and returns their ranges.
    #[inline]
    fn write(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>),
    ) -> (Range<u32>, Range<u32>) {
        let (k0, p0) = (offset(self.keys.len()), offset(self.payloads.len()));
        build(&mut self.keys, &mut self.payloads);
        (k0..offset(self.keys.len()), p0..offset(self.payloads.len()))
    }

    #[inline]
    fn push(&mut self, target: Target, key: Range<u32>, payload: Range<u32>) {
        self.entries.push(Entry {
            target,
            key,
            payload,
            seq: 0,
        });
    }
}

/// Which successors an emission goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// Every successor (one chained request each, sharing the same key and payload bytes).
    All,
    /// The successor at this position in the operator's successor list (edge order of the
    /// app spec). An index past the end emits nothing.
    Index(usize),
}

/// What an [`crate::Operator`] sees of the emitter: its successors are named by position (the
/// operator does not know the app it is placed in), sink outputs by [`Out::output`].
///
/// It also takes the operator's timer requests for the key of the call
/// ([`Out::set_timer_event`], [`Out::set_timer_processing`]); see [`crate::timers`].
pub struct Out<'a> {
    emitter: &'a mut Emitter,
    successors: &'a [u16],
    timers: Option<&'a mut TimerRequests>,
}

impl<'a> Out<'a> {
    /// Wraps `emitter` for an operator whose successors (operator indices) are `successors`.
    #[inline]
    pub fn new(emitter: &'a mut Emitter, successors: &'a [u16]) -> Self {
        Out {
            emitter,
            successors,
            timers: None,
        }
    }

    /// Like [`Out::new`], recording timer requests into `timers` (the runtime applies them to
    /// the key of the call when it returns). Without it, timer requests do nothing: that is
    /// the case in [`crate::Operator::end_of_stream`], which is not about a key.
    #[inline]
    pub fn with_timers(
        emitter: &'a mut Emitter,
        successors: &'a [u16],
        timers: &'a mut TimerRequests,
    ) -> Self {
        Out {
            emitter,
            successors,
            timers: Some(timers),
        }
    }

    fn timer(&mut self, request: TimerRequest) {
        if let Some(t) = &mut self.timers {
            t.0.push(request);
        }
    }

    /// Sets an event-time timer for the key of this call: [`crate::Operator::on_timer`] is
    /// called once the watermark reaches `at` (at end of stream at the latest). Set twice, it
    /// fires once. At or before the current watermark it is refused and counted as malformed
    /// ([`crate::timers::LATE_TIMER`]).
    #[inline]
    pub fn set_timer_event(&mut self, at: u64) {
        self.timer(TimerRequest::Set(Timer {
            domain: TimeDomain::Event,
            at,
        }));
    }

    /// Sets a processing-time timer for the key of this call, at `at_ms` milliseconds since the
    /// Unix epoch on the executor's clock (see [`Out::processing_time_ms`]). Not fired by the
    /// oracle, dropped at end of stream (see [`crate::timers`]).
    #[inline]
    pub fn set_timer_processing(&mut self, at_ms: u64) {
        self.timer(TimerRequest::Set(Timer {
            domain: TimeDomain::Processing,
            at: at_ms,
        }));
    }

    /// Deletes an event-time timer of the key of this call (nothing if it is not set).
    #[inline]
    pub fn delete_timer_event(&mut self, at: u64) {
        self.timer(TimerRequest::Delete(Timer {
            domain: TimeDomain::Event,
            at,
        }));
    }

    /// Deletes a processing-time timer of the key of this call (nothing if it is not set).
    #[inline]
    pub fn delete_timer_processing(&mut self, at_ms: u64) {
        self.timer(TimerRequest::Delete(Timer {
            domain: TimeDomain::Processing,
            at: at_ms,
        }));
    }

    /// Processing time now: milliseconds since the Unix epoch on this host's wall clock. Only
    /// for computing processing-time timers; anything it influences differs from run to run.
    pub fn processing_time_ms(&self) -> u64 {
        crate::timers::wall_clock_ms()
    }

    /// Number of successors of this operator.
    #[inline]
    pub fn successors(&self) -> usize {
        self.successors.len()
    }

    /// Emits `(key, payload)` to every successor.
    #[inline]
    pub fn emit(&mut self, key: &[u8], payload: &[u8]) {
        self.emit_to_with(Port::All, |k, p| {
            k.extend_from_slice(key);
            p.extend_from_slice(payload);
        });
    }

    /// Emits `(key, payload)` to the successors selected by `port`.
    #[inline]
    pub fn emit_to(&mut self, port: Port, key: &[u8], payload: &[u8]) {
        self.emit_to_with(port, |k, p| {
            k.extend_from_slice(key);
            p.extend_from_slice(payload);
        });
    }

    /// Emits to every successor a key and payload that `build` appends to the two buffers it is
    /// given (written in place: no temporary buffer).
    #[inline]
    pub fn emit_with(&mut self, build: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>)) {
        self.emit_to_with(Port::All, build);
    }

    /// Like [`Out::emit_with`], to the successors selected by `port`.
    #[inline]
    pub fn emit_to_with(&mut self, port: Port, build: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>)) {
        let targets: &[u16] = match port {
            Port::All => self.successors,
            Port::Index(i) => self.successors.get(i..=i).unwrap_or(&[]),
        };
        if targets.is_empty() {
            return;
        }
        let (k, p) = self.emitter.write(build);
        for &t in targets {
            self.emitter.push(Target::Operator(t), k.clone(), p.clone());
        }
    }

    /// Emits a sink output `(key, payload)`.
    #[inline]
    pub fn output(&mut self, key: &[u8], payload: &[u8]) {
        self.output_with(|k, p| {
            k.extend_from_slice(key);
            p.extend_from_slice(payload);
        });
    }

    /// Emits a sink output written in place by `build`.
    #[inline]
    pub fn output_with(&mut self, build: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>)) {
        let (k, p) = self.emitter.write(build);
        self.emitter.push(Target::Output, k, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_shares_bytes_and_truncate_undoes() {
        let mut e = Emitter::new();
        let succ = [3u16, 5];
        let mut out = Out::new(&mut e, &succ);
        out.emit(b"k", b"p");
        out.emit_to(Port::Index(1), b"k2", b"p2");
        out.emit_to(Port::Index(7), b"none", b"none");
        out.output(b"o", b"out");
        let v: Vec<_> = e.iter().collect();
        assert_eq!(v.len(), 4);
        assert_eq!(
            v[0],
            Emission {
                target: Target::Operator(3),
                key: b"k",
                payload: b"p"
            }
        );
        assert_eq!(
            v[1],
            Emission {
                target: Target::Operator(5),
                key: b"k",
                payload: b"p"
            }
        );
        assert_eq!(
            v[2],
            Emission {
                target: Target::Operator(5),
                key: b"k2",
                payload: b"p2"
            }
        );
        assert_eq!(v[3].target, Target::Output);
        e.truncate(2);
        assert_eq!(e.len(), 2);
        let mut out = Out::new(&mut e, &succ);
        out.output(b"x", b"y");
        assert_eq!(
            e.get(2),
            Emission {
                target: Target::Output,
                key: b"x",
                payload: b"y"
            }
        );
    }

    #[test]
    fn a_long_key_is_found_whether_or_not_the_keys_together_fit() {
        let mut e = Emitter::new();
        let succ = [3u16];
        let mut out = Out::new(&mut e, &succ);
        out.emit(&[b'a'; 6], b"");
        out.emit(&[b'b'; 6], b"");
        // Together 12 bytes: over a limit of 8, though each key is under it.
        assert!(!e.any_key_longer_than(0, 8));
        assert!(!e.any_key_longer_than(0, 12));
        let mut out = Out::new(&mut e, &succ);
        out.emit(&[b'c'; 9], b"");
        assert!(e.any_key_longer_than(0, 8));
        assert!(e.any_key_longer_than(2, 8));
        assert!(!e.any_key_longer_than(2, 9));
        assert!(!e.any_key_longer_than(3, 0), "no emission from index 3 on");
        // A broadcast's emissions share one key's bytes; undone, its long key is gone.
        let mut e = Emitter::new();
        let succ = [3u16, 5];
        let mut out = Out::new(&mut e, &succ);
        out.emit(&[b'a'; 4], b"");
        out.emit(&[b'b'; 6], b"");
        assert_eq!(e.len(), 4);
        // Ten bytes of keys over a limit of 6: walked, and no key is longer.
        assert!(!e.any_key_longer_than(0, 6));
        assert!(e.any_key_longer_than(2, 5));
        e.truncate(2);
        assert!(!e.any_key_longer_than(0, 4));
        assert!(e.any_key_longer_than(0, 3));
    }
}
