//! The operator model: the [`Operator`] trait users implement, and the type-erased
//! [`OperatorInstance`] the data plane and the oracle drive.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::codec::StateCodec;
use crate::digest::{Digest, DigestDomain, domain_seed};
use crate::emitter::{Emitter, Out, Target};
use crate::key::{KEY_GROUPS, MAX_KEY_BYTES, key_group_of};
use crate::output_line::{OutputText, write_line};
use crate::output_seq::OutputSeqs;
use crate::spec::Determinism;
use crate::timers::{ExportedTimers, LATE_TIMER, TimeDomain, Timer, TimerRequests, Timers};

mod fire;

/// A request the operator could not make sense of. The runtime counts it under `reason`,
/// undoes whatever the request emitted, and drops it: a malformed input never panics and never
/// stops the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("malformed request: {reason}")]
pub struct Malformed {
    /// A short, static description (e.g. `"bad temperature"`), used as a counter name.
    pub reason: &'static str,
}

impl Malformed {
    /// A malformed-request error with this reason.
    #[inline]
    pub const fn new(reason: &'static str) -> Self {
        Malformed { reason }
    }
}

/// A per-key state value.
///
/// A state equal to its `Default` is *vacant*: it is not stored, not exported and not digested.
/// So a stateless operator uses `()`, a keyed operator whose state for a key returns to the
/// default (a join that completed) frees that key's entry, and a malformed request on a new key
/// leaves nothing behind.
pub trait State: Default + PartialEq + StateCodec + Send + 'static {}
impl<T: Default + PartialEq + StateCodec + Send + 'static> State for T {}

/// An operator: the public way to write one in Rust.
///
/// `process` is called once per request with the request's canonical key, its payload, and
/// mutable access to that key's state (the default value if the key has none). It emits
/// chained requests and outputs through `out`. `self` holds configuration and scratch space
/// only: everything that must survive a migration of the key's key group lives in `State`,
/// which the runtime keeps per key group, exports, imports and digests.
///
/// Contract:
/// * validate before you mutate: if `process` returns [`Malformed`], the runtime discards the
///   request's emissions but cannot undo changes already made to the state;
/// * the key you emit with is the *successor's* routing key (canonical encoding, see
///   [`crate::key`]); a stateless successor is routed by the key of the stateful operator it
///   feeds, so that each key keeps one FIFO path;
/// * no threads, clocks or randomness: the same inputs in the same order give the same
///   emissions (the oracle depends on it). Time reaches an operator through its timers
///   ([`Operator::on_timer`], see [`crate::timers`]); an operator that sets processing-time
///   timers from [`Out::processing_time_ms`] gives up that equality by choice.
///
/// # Example: a user-defined operator in an app file
///
/// A `dedup` operator that forwards the first occurrence of each key and drops repeats,
/// registered under a kind name and composed with the built-in WC splitter in an app file:
///
/// ```
/// use clasp_operators::{Operator, Out, Malformed, Registry, KindInfo, Determinism, AppSpec, oracle};
///
/// struct Dedup;
///
/// impl Operator for Dedup {
///     type State = bool; // seen?
///     fn process(&mut self, key: &[u8], payload: &[u8], seen: &mut bool, out: &mut Out<'_>)
///         -> Result<(), Malformed> {
///         if !*seen {
///             *seen = true;
///             out.output(key, payload);
///         }
///         Ok(())
///     }
/// }
///
/// let mut registry = Registry::builtin();
/// registry.register("dedup", KindInfo::keyed("distinct words", "word", Determinism::OrderFree),
///     |params| { params.finish()?; Ok(Dedup) });
///
/// let app = AppSpec::from_toml_str_with(&registry, r#"
///     name = "distinct-words"
///     generator = "wc"
///     [[operator]]
///     name = "split"
///     kind = "wc_split"
///     successors = ["dedup"]
///     [[operator]]
///     name = "dedup"
///     kind = "dedup"
/// "#).unwrap();
/// let report = oracle::run(&app, 100, 7);
/// assert_eq!(report.processed["split"], 100);
/// assert_eq!(report.processed["dedup"], 1000); // ten words per sentence
/// assert!(report.operators["dedup"].outputs.count > 10);
/// ```
pub trait Operator: Send + 'static {
    /// The per-key state (use `()` for a stateless operator).
    type State: State;

    /// Processes one request.
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        state: &mut Self::State,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed>;

    /// Called when a timer this operator set for `key` fires ([`Out::set_timer_event`],
    /// [`Out::set_timer_processing`]), with the key's state (the default if it has none). It
    /// may emit, and set or delete timers of `key`, like `process`. A key's timers fire in
    /// time order; event-time ones all fire at end of stream, before `end_of_key`. See
    /// [`crate::timers`].
    fn on_timer(&mut self, key: &[u8], state: &mut Self::State, timer: Timer, out: &mut Out<'_>) {
        let _ = (key, state, timer, out);
    }

    /// Called at end of stream once per key that has state, in key order within each key
    /// group, after every pending event-time timer fired: flush windows and buffers here.
    fn end_of_key(&mut self, key: &[u8], state: &mut Self::State, out: &mut Out<'_>) {
        let _ = (key, state, out);
    }

    /// Called at end of stream once per instance, after every `end_of_key`.
    fn end_of_stream(&mut self, out: &mut Out<'_>) {
        let _ = out;
    }

    /// The text form of an output this operator emitted (`key` and `value` as given to
    /// [`Out::output`]): writes it into `text` (cleared by the caller) and returns true.
    /// A sink writes it as the line's `"key"` and `"value"`. The default, false, means the
    /// kind has no text form (or this output has none): the sink then writes the bytes in
    /// base64 (`"key_b64"`, `"value_b64"`).
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let _ = (key, value, text);
        false
    }

    /// The key of an input record read from a source (a file's line, a TCP message) when this
    /// operator is an app's first: `record` is the record's bytes, `ordinal` its number in the
    /// stream. The default is the ordinal (`u64` little-endian), what a stateless first
    /// operator is routed by; a keyed first operator extracts its key from the record here
    /// (a record it cannot key gets the ordinal, and `process` counts it malformed).
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        let _ = record;
        key.clear();
        key.extend_from_slice(&crate::key::encode_u64(ordinal));
    }
}

/// Counters and digests of one operator instance; [`OperatorSummary::combine`] adds the
/// summaries of several instances of the same operator (executors, workers).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct OperatorSummary {
    /// Requests processed, malformed ones included.
    pub processed: u64,
    /// Requests dropped as malformed.
    pub malformed: u64,
    /// Digest of the state (every non-vacant key).
    pub state: Digest,
    /// Digest of processed inputs (kept for racy operators only; empty otherwise).
    pub inputs: Digest,
    /// Digest of sink outputs.
    pub outputs: Digest,
}

impl OperatorSummary {
    /// Adds another instance's summary.
    pub fn combine(&mut self, other: &OperatorSummary) {
        self.processed += other.processed;
        self.malformed += other.malformed;
        self.state.combine(&other.state);
        self.inputs.combine(&other.inputs);
        self.outputs.combine(&other.outputs);
    }
}

/// Why [`OperatorInstance::import_group`] refused an archive.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The bytes are not a valid archive (rkyv validation failed).
    #[error("invalid state archive: {0}")]
    Archive(String),
    /// The archive is for another key group, or another format version.
    #[error("archive is for key group {found} (format {format}), expected key group {expected}")]
    WrongGroup {
        /// Key group requested.
        expected: u16,
        /// Key group in the archive.
        found: u16,
        /// Format version in the archive.
        format: u32,
    },
    /// A key in the archive does not hash to the archive's key group.
    #[error("a key in the archive belongs to key group {0}")]
    ForeignKey(u16),
    /// A state value could not be decoded.
    #[error(transparent)]
    State(#[from] crate::codec::DecodeError),
    /// This instance already holds state of the key group.
    #[error("key group {0} already holds state here")]
    Occupied(u16),
}

/// The type-erased runtime of one operator: one instance per (executor, operator).
///
/// State is kept per key group (a hash map per group), so a group is exported and imported as
/// one unit. Nothing here is thread-safe or needs to be: exactly one executor owns an instance.
pub trait OperatorInstance: Send {
    /// Index of this operator in its app spec.
    fn operator(&self) -> u16;
    /// Processes one request whose key lies in `key_group` (the caller computed it from the key
    /// hash carried in the request header). Emissions are appended to `out`; on
    /// [`Malformed`] they are removed again and the request is counted and dropped.
    fn process(
        &mut self,
        key_group: u16,
        key: &[u8],
        payload: &[u8],
        out: &mut Emitter,
    ) -> Result<(), Malformed>;
    /// Flushes windows and buffers (see [`Operator::end_of_key`]); appends to `out`. First the
    /// watermark goes to +∞, firing every pending event-time timer; pending processing-time
    /// timers are dropped.
    fn end_of_stream(&mut self, out: &mut Emitter);
    /// Advances the event-time watermark to `watermark` (never backwards) and fires the
    /// event-time timers it passed (see [`crate::timers`]); appends to `out`.
    fn advance_watermark(&mut self, watermark: u64, out: &mut Emitter);
    /// The earliest time (ms since the Unix epoch) a processing-time timer may be due, if any
    /// is pending: cheap, for an executor's loop to decide whether to read its clock.
    fn next_processing_timer_ms(&self) -> Option<u64>;
    /// Fires the processing-time timers due at `now_ms`; appends to `out`.
    fn fire_processing_timers(&mut self, now_ms: u64, out: &mut Emitter);
    /// Pending timers (both clocks) of every key.
    fn pending_timers(&self) -> usize;
    /// Removes key group `key_group`'s state and returns it as an rkyv archive (an empty group
    /// gives a valid archive with no entries).
    fn export_group(&mut self, key_group: u16) -> Vec<u8>;
    /// Installs a key group exported by [`OperatorInstance::export_group`]; returns the number
    /// of keys imported. The bytes are untrusted: they are validated before use.
    fn import_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError>;
    /// Order-independent digest of all state held (the sum over key groups).
    fn state_digest(&self) -> Digest;
    /// Key groups holding any state, ascending.
    fn groups_with_state(&self) -> Vec<u16>;
    /// Number of keys holding state.
    fn state_keys(&self) -> usize;
    /// Counters and digests.
    fn summary(&self) -> OperatorSummary;
    /// Malformed-request counts by reason.
    fn malformed_reasons(&self) -> Vec<(&'static str, u64)>;
    /// Numbers this instance's outputs from now on (a sink is configured): each output's
    /// [`Emitter::seq`] is then its number among the operator's outputs for its key, kept per
    /// key group and moved with it by [`OperatorInstance::export_group`]. Off by default, so a
    /// run without a sink pays nothing.
    fn track_output_seq(&mut self);
    /// Appends the sink line of one output of this operator (see [`crate::output_line`]).
    fn write_output_line(&mut self, key: &[u8], value: &[u8], seq: u64, line: &mut Vec<u8>);
    /// The key of a source's input record (see [`Operator::record_key`]).
    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>);
}

/// Where an instance sits in its app (given by [`crate::AppSpec::instantiate`]).
#[derive(Clone, Debug)]
pub struct InstanceContext {
    /// Operator index in the app spec.
    pub operator: u16,
    /// Operator name (seeds its digests).
    pub name: Arc<str>,
    /// Successor operator indices, in edge order (these are the [`crate::Port::Index`] ports).
    pub successors: Vec<u16>,
    /// Determinism class (racy operators digest their inputs).
    pub determinism: Determinism,
}

/// Format version of exported key groups (2: with the outputs' `seq` counters; 3: with the
/// keys' timers).
pub const GROUP_ARCHIVE_FORMAT: u32 = 3;

/// An exported key group: keys sorted, states in their canonical [`StateCodec`] encoding, the
/// group's output counters ([`crate::output_seq`]; empty without a sink) and its keys' pending
/// timers ([`crate::timers`]).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub struct GroupArchive {
    /// [`GROUP_ARCHIVE_FORMAT`].
    pub format: u32,
    /// Key group.
    pub key_group: u16,
    /// `(key, encoded state)`, keys ascending.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// `(output key, next seq)`, keys ascending.
    pub output_seqs: Vec<(Vec<u8>, u64)>,
    /// `(key, event times, processing times)`, keys and times ascending.
    pub timers: Vec<ExportedTimers>,
}

type Group<S> = HashMap<Box<[u8]>, S, Xxh3DefaultBuilder>;

/// The generic [`OperatorInstance`] behind every operator.
pub struct Runtime<O: Operator> {
    op: O,
    ctx: InstanceContext,
    groups: Vec<Group<O::State>>,
    processed: u64,
    malformed: BTreeMap<&'static str, u64>,
    inputs: Digest,
    outputs: Digest,
    seed_state: u64,
    seed_input: u64,
    seed_output: u64,
    scratch: Vec<u8>,
    seqs: OutputSeqs,
    text: OutputText,
    timers: Timers,
    timer_requests: TimerRequests,
}

impl<O: Operator> Runtime<O> {
    /// Wraps `op` for the place `ctx` in an app.
    pub fn new(op: O, ctx: InstanceContext) -> Self {
        let seed_state = domain_seed(&ctx.name, DigestDomain::State);
        let seed_input = domain_seed(&ctx.name, DigestDomain::Input);
        let seed_output = domain_seed(&ctx.name, DigestDomain::Output);
        Runtime {
            op,
            ctx,
            groups: (0..KEY_GROUPS).map(|_| Group::default()).collect(),
            processed: 0,
            malformed: BTreeMap::new(),
            inputs: Digest::EMPTY,
            outputs: Digest::EMPTY,
            seed_state,
            seed_input,
            seed_output,
            scratch: Vec::new(),
            seqs: OutputSeqs::off(),
            text: OutputText::default(),
            timers: Timers::default(),
            timer_requests: TimerRequests::new(),
        }
    }

    /// The wrapped operator.
    pub fn operator_ref(&self) -> &O {
        &self.op
    }

    /// The state of `key`, if it has any.
    pub fn state_of(&self, key: &[u8]) -> Option<&O::State> {
        self.groups[usize::from(key_group_of(key))].get(key)
    }

    fn digest_outputs(&mut self, out: &Emitter, start: usize) {
        for e in out.iter_from(start) {
            if e.target == Target::Output {
                self.outputs
                    .add_keyed(self.seed_output, e.key, e.payload, &mut self.scratch);
            }
        }
    }

    /// Numbers the outputs from `start` on, counted in `key_group` (`None`: each in its own
    /// key's group).
    fn number_outputs(
        seqs: &mut OutputSeqs,
        out: &mut Emitter,
        start: usize,
        key_group: Option<u16>,
    ) {
        if !seqs.is_on() {
            return;
        }
        for i in start..out.len() {
            let e = out.get(i);
            if e.target == Target::Output {
                let kg = key_group.unwrap_or_else(|| key_group_of(e.key));
                let seq = seqs.next(kg, e.key);
                out.set_seq(i, seq);
            }
        }
    }

    const STATELESS: bool = size_of::<O::State>() == 0;
}

impl<O: Operator> OperatorInstance for Runtime<O> {
    fn operator(&self) -> u16 {
        self.ctx.operator
    }

    #[inline]
    fn process(
        &mut self,
        key_group: u16,
        key: &[u8],
        payload: &[u8],
        out: &mut Emitter,
    ) -> Result<(), Malformed> {
        debug_assert_eq!(
            key_group,
            key_group_of(key),
            "key group does not match the key"
        );
        self.processed += 1;
        if self.ctx.determinism == Determinism::Racy {
            self.inputs
                .add_keyed(self.seed_input, key, payload, &mut self.scratch);
        }
        let start = out.len();
        let mut o = Out::with_timers(out, &self.ctx.successors, &mut self.timer_requests);
        let result = if Self::STATELESS {
            let mut s = O::State::default();
            self.op.process(key, payload, &mut s, &mut o)
        } else {
            let group = &mut self.groups[usize::from(key_group % KEY_GROUPS)];
            if let Some(s) = group.get_mut(key) {
                let r = self.op.process(key, payload, s, &mut o);
                if *s == O::State::default() {
                    group.remove(key);
                }
                r
            } else {
                let mut s = O::State::default();
                let r = self.op.process(key, payload, &mut s, &mut o);
                if s != O::State::default() {
                    group.insert(key.into(), s);
                }
                r
            }
        };
        let result = result.and_then(|()| {
            // A longer key does not fit a request: the data plane could not carry it.
            let too_long = out.iter_from(start).any(|e| e.key.len() > MAX_KEY_BYTES);
            if too_long {
                Err(Malformed::new("emitted a key longer than 1024 bytes"))
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => {
                if out.len() > start {
                    self.digest_outputs(out, start);
                    Self::number_outputs(&mut self.seqs, out, start, Some(key_group));
                }
                self.apply_timer_requests(key_group, key);
                Ok(())
            }
            Err(m) => {
                out.truncate(start);
                self.timer_requests.clear();
                *self.malformed.entry(m.reason).or_default() += 1;
                Err(m)
            }
        }
    }

    fn end_of_stream(&mut self, out: &mut Emitter) {
        self.advance_watermark(u64::MAX, out);
        self.timers.drop_processing();
        let start = out.len();
        for group in &mut self.groups {
            if group.is_empty() {
                continue;
            }
            let mut keys: Vec<Box<[u8]>> = group.keys().cloned().collect();
            keys.sort_unstable();
            for key in keys {
                let s = group.get_mut(&key).expect("key listed above");
                let from = out.len();
                let mut o = Out::with_timers(out, &self.ctx.successors, &mut self.timer_requests);
                self.op.end_of_key(&key, s, &mut o);
                if *s == O::State::default() {
                    group.remove(&key);
                }
                let kg = key_group_of(&key);
                Self::number_outputs(&mut self.seqs, out, from, Some(kg));
                let refused = self.timers.apply(kg, &key, &mut self.timer_requests);
                self.timers.drop_processing();
                Self::count_refused(&mut self.malformed, refused);
            }
        }
        let from = out.len();
        self.op
            .end_of_stream(&mut Out::new(out, &self.ctx.successors));
        Self::number_outputs(&mut self.seqs, out, from, None);
        self.digest_outputs(out, start);
    }

    fn export_group(&mut self, key_group: u16) -> Vec<u8> {
        let group = std::mem::take(&mut self.groups[usize::from(key_group % KEY_GROUPS)]);
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = group
            .into_iter()
            .map(|(k, s)| {
                let mut bytes = Vec::new();
                s.encode(&mut bytes);
                (k.into_vec(), bytes)
            })
            .collect();
        entries.sort_unstable();
        let archive = GroupArchive {
            format: GROUP_ARCHIVE_FORMAT,
            key_group,
            entries,
            output_seqs: self.seqs.export(key_group),
            timers: self.timers.export(key_group),
        };
        rkyv::to_bytes::<rkyv::rancor::Error>(&archive)
            .expect("serializing plain vectors cannot fail")
            .to_vec()
    }

    fn import_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError> {
        let slot = usize::from(key_group % KEY_GROUPS);
        if !self.groups[slot].is_empty()
            || self.seqs.holds(key_group)
            || self.timers.holds(key_group)
        {
            return Err(ImportError::Occupied(key_group));
        }
        // rkyv reads in place and needs its alignment; the bytes may come from anywhere.
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        let archive = rkyv::access::<ArchivedGroupArchive, rkyv::rancor::Error>(&aligned)
            .map_err(|e| ImportError::Archive(e.to_string()))?;
        let (format, found) = (archive.format.to_native(), archive.key_group.to_native());
        if format != GROUP_ARCHIVE_FORMAT || found != key_group {
            return Err(ImportError::WrongGroup {
                expected: key_group,
                found,
                format,
            });
        }
        let mut group = Group::<O::State>::default();
        for entry in archive.entries.iter() {
            let key: &[u8] = &entry.0;
            let kg = key_group_of(key);
            if kg != key_group {
                return Err(ImportError::ForeignKey(kg));
            }
            let mut input: &[u8] = &entry.1;
            let state = O::State::decode(&mut input)?;
            if !input.is_empty() {
                return Err(crate::codec::DecodeError("trailing state bytes").into());
            }
            group.insert(key.into(), state);
        }
        let mut seqs = Vec::with_capacity(archive.output_seqs.len());
        for entry in archive.output_seqs.iter() {
            let key: &[u8] = &entry.0;
            let kg = key_group_of(key);
            if kg != key_group {
                return Err(ImportError::ForeignKey(kg));
            }
            seqs.push((key.to_vec(), entry.1.to_native()));
        }
        let timers = fire::import_timers(key_group, &archive.timers)?;
        let n = group.len();
        self.groups[slot] = group;
        self.seqs.import(key_group, seqs);
        self.timers.import(key_group, timers);
        Ok(n)
    }

    fn state_digest(&self) -> Digest {
        let mut d = Digest::EMPTY;
        let mut value = Vec::new();
        let mut scratch = Vec::new();
        for group in &self.groups {
            for (k, s) in group {
                value.clear();
                s.encode(&mut value);
                d.add_keyed(self.seed_state, k, &value, &mut scratch);
            }
        }
        d
    }

    fn groups_with_state(&self) -> Vec<u16> {
        (0..KEY_GROUPS)
            .filter(|&g| !self.groups[usize::from(g)].is_empty())
            .collect()
    }

    fn state_keys(&self) -> usize {
        self.groups.iter().map(HashMap::len).sum()
    }

    fn summary(&self) -> OperatorSummary {
        OperatorSummary {
            processed: self.processed,
            malformed: self.malformed.values().sum(),
            state: self.state_digest(),
            inputs: self.inputs,
            outputs: self.outputs,
        }
    }

    fn malformed_reasons(&self) -> Vec<(&'static str, u64)> {
        self.malformed.iter().map(|(r, n)| (*r, *n)).collect()
    }

    fn advance_watermark(&mut self, watermark: u64, out: &mut Emitter) {
        let due = self.timers.advance_watermark(watermark);
        self.fire(TimeDomain::Event, due, out);
    }

    fn next_processing_timer_ms(&self) -> Option<u64> {
        self.timers.next_processing_ms()
    }

    fn fire_processing_timers(&mut self, now_ms: u64, out: &mut Emitter) {
        let due = self.timers.take_due_processing(now_ms);
        self.fire(TimeDomain::Processing, due, out);
    }

    fn pending_timers(&self) -> usize {
        self.timers.pending()
    }

    fn track_output_seq(&mut self) {
        self.seqs.turn_on();
    }

    fn write_output_line(&mut self, key: &[u8], value: &[u8], seq: u64, line: &mut Vec<u8>) {
        self.text.clear();
        let text = self
            .op
            .output_text(key, value, &mut self.text)
            .then_some(&self.text);
        write_line(line, &self.ctx.name, key, value, text, seq);
    }

    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        self.op.record_key(ordinal, record, key);
    }
}
