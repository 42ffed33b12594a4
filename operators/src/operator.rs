//! The operator model: the [`Operator`] trait users implement, and the type-erased
//! [`OperatorInstance`] the data plane and the oracle drive.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::codec::StateCodec;
use crate::digest::Digest;
use crate::emitter::{Emitter, Out};
use crate::output_line::OutputText;
use crate::spec::Determinism;
use crate::timers::Timer;

mod run;
mod runtime;

pub use run::{RequestRun, RequestSpan};
pub use runtime::{GROUP_ARCHIVE_FORMAT, GroupArchive, Runtime};

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
    /// The bytes are not a valid archive: a header of another format, a failed rkyv
    /// validation, or a state entry cut short.
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

/// Two cache lines to prefetch: [`OperatorInstance::state_lines`].
pub type StateLines = (std::ptr::NonNull<u8>, std::ptr::NonNull<u8>);

/// The type-erased runtime of one operator: one instance per (executor, operator).
///
/// State is kept per key group (a hash map per group), so a group is exported and imported as
/// one unit. Nothing here is thread-safe or needs to be: exactly one executor owns an instance.
pub trait OperatorInstance: Send {
    /// Index of this operator in its app spec.
    fn operator(&self) -> u16;
    /// Processes one request whose key has [`crate::key::key_hash`] `key_hash` (an executor
    /// has it in the request header, so the state lookup does not hash the key again; the key
    /// group is its low bits). Emissions are appended to `out`; on [`Malformed`] they are
    /// removed again and the request is counted and dropped.
    fn process(
        &mut self,
        key_hash: u64,
        key: &[u8],
        payload: &[u8],
        out: &mut Emitter,
    ) -> Result<(), Malformed>;
    /// Processes the requests of `run` in order, as [`OperatorInstance::process`] would one
    /// by one (a malformed one counted and dropped the same way), every emission appended to
    /// `out`: one call for the run instead of one a request. What each request emitted is not
    /// told apart, so an executor hands over runs only where that does not matter: to an
    /// operator without successors, whose emissions are all outputs.
    fn process_run(&mut self, run: RequestRun<'_>, out: &mut Emitter) {
        for i in 0..run.len() {
            let (key_hash, key, payload) = run.get(i);
            let _ = self.process(key_hash, key, payload, out);
        }
    }
    /// The cache lines where the lookup of the state of a request of `key_group`, whose key
    /// has [`crate::key::key_hash`] `key_hash`, will start: an executor prefetches them for the
    /// next frames of a batch, so the lookup does not wait for them. Addresses only (nothing
    /// is read), never needed for correctness; the default has none. A pair, not an array:
    /// two pointers come back in registers, where a larger value came back through memory and
    /// its caller's wide load waited on the callee's narrow stores.
    #[inline]
    fn state_lines(&self, key_group: u16, key_hash: u64) -> Option<StateLines> {
        let _ = (key_group, key_hash);
        None
    }
    /// Whether [`OperatorInstance::state_lines`] may name lines (the instance keeps keyed
    /// state): an executor none of whose instances do reads its batches in one pass.
    fn keeps_state(&self) -> bool {
        false
    }
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
    /// Removes key group `key_group`'s state and returns it archived: a 16-byte header (magic,
    /// [`GROUP_ARCHIVE_FORMAT`]) and then the rkyv archive of a [`GroupArchive`] — or no bytes
    /// for a group with no state, output counters or timers, which imports as an empty group.
    fn export_group(&mut self, key_group: u16) -> Vec<u8>;
    /// Key group `key_group`'s state as [`OperatorInstance::export_group`] would archive it,
    /// without removing it (a checkpoint copies the state the executor goes on running with).
    fn copy_group(&self, key_group: u16) -> Vec<u8>;
    /// Installs a key group exported by [`OperatorInstance::export_group`] (replacing any
    /// staged copy of it), or applies [`OperatorInstance::export_changes`]' changes to the copy
    /// staged by [`OperatorInstance::stage_group`] and installs that; returns the number of keys
    /// installed. The bytes are untrusted: they are validated before use.
    fn import_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError>;
    /// Starts recording which keys of `key_group` change (from now, so before a copy of it is
    /// sent ahead of its move): [`OperatorInstance::export_changes`] then sends only those.
    fn track_changes(&mut self, key_group: u16);
    /// Stops recording changes of `key_group` (its move did not come).
    fn untrack(&mut self, key_group: u16);
    /// Removes key group `key_group`'s state and returns what changed in it since
    /// [`OperatorInstance::track_changes`] (or the last [`OperatorInstance::refresh_copy`]),
    /// archived for an instance that staged its copy; the
    /// whole group, as [`OperatorInstance::export_group`], when changes were not recorded key
    /// by key. Recording stops.
    fn export_changes(&mut self, key_group: u16) -> Vec<u8>;
    /// What changed in key group `key_group` since its copy went ahead (or since its last
    /// refresh), archived as [`OperatorInstance::export_changes`] archives changes but without
    /// output counters or timers; recording starts again from now and the group stays live.
    /// `None` when nothing changed or changes are not recorded key by key. A copy refreshed
    /// while its move is still coming leaves less to send, look up and apply at the move.
    fn refresh_copy(&mut self, key_group: u16) -> Option<Vec<u8>>;
    /// Keeps a copy of key group `key_group` (an [`OperatorInstance::copy_group`] archive)
    /// received ahead of its move, validated and decoded but not live: nothing reads it until
    /// its changes are imported. Or applies a refresh of that copy
    /// ([`OperatorInstance::refresh_copy`]). Returns the keys it holds, or the keys it changes.
    fn stage_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError>;
    /// Drops the staged copy of `key_group`, if any (its move did not come).
    fn drop_staged(&mut self, key_group: u16);
    /// Frees the memory of the key groups exported so far: an export keeps it, because freeing
    /// a group reads every one of its entries, which would hold up the move it is part of.
    fn free_retired(&mut self);
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
