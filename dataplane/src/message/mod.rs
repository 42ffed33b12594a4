//! Every message between clasp processes, as one enum with one versioned codec.
//!
//! [`Message`] is the whole vocabulary: what the driver tells workers (the job, end of stream,
//! probes, plans, finish, bye), what workers answer (ready, acknowledgements, status, ledger
//! deltas, counters, summaries, migration reports and progress, faults, checkpoint parts
//! written), and what executors
//! send each other in line with their requests during a migration (markers, seals, state).
//! Control messages travel as the transport's control frames; markers, seals and state parts
//! as the body of a control *request frame* (`FLAG_CONTROL`) on the rings and connections that
//! carry requests, because the protocol's correctness rests on their order relative to those
//! requests. Either way the bytes are [`encode`]d here and nowhere else.
//!
//! # Why rkyv
//! The codec is an rkyv archive behind a 16-byte header that carries a version ([`codec`]).
//! rkyv with bytecheck validation is what the transport already trusts with peer bytes: every
//! offset and length in an archive is checked against the buffer before anything is read or
//! allocated, so decoding never panics and a peer cannot make the receiver allocate by
//! claiming a length; and the types are derived, so there is no hand-written encoder to drift
//! from its decoder. The hot messages are cheap in it: ledger deltas are an array of 24-byte
//! records that the driver applies straight from the validated archive ([`Decoder::access`]),
//! and a marker is a header and a tag. rkyv has no notion of a version, hence the header: a peer that speaks another
//! version is refused with both versions named, before its archive is looked at.
//!
//! No variant carries bytes that another codec decodes, except a key group's operator-state
//! archive (read by the operator's own codec) and a queued request frame inside a state
//! message (the data path's frame format, checked on arrival like any request). A state part
//! carries a slice of an encoded [`Message::State`], reassembled and decoded by this codec.

pub mod checkpoint;
pub mod codec;
pub mod migration;
pub mod run;
#[cfg(test)]
mod tests;

pub use checkpoint::{PartWritten, RestorePart, Snapshotted};
pub use codec::{CONTROL_KIND, Decoder, MessageError, VERSION, decode, encode, encode_into};
pub use migration::{
    PeerCode, Plans, Progress, Report, RoutingRow, Seal, SlotPlan, StateMsg, StatePart,
    TransferCode, table_of,
};
pub use run::ArchivedLedgerDelta;
pub use run::{
    Counters, DELTAS_PER_MESSAGE, IdleCode, Job, LedgerDelta, SpreadCode, Status, WorkerSummary,
};

use rkyv::{Archive, Deserialize, Serialize};

/// A message between clasp processes (module docs).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum Message {
    /// Driver → worker: what to run.
    Job(Box<Job>),
    /// Worker → driver: its links are up and its executors run.
    Ready,
    /// Driver → worker: end of stream for one operator.
    Eos {
        /// The operator.
        operator: u16,
    },
    /// Worker → driver: every executor flushed an operator.
    EosAck {
        /// The operator.
        operator: u16,
    },
    /// Driver → worker: a quiescence probe.
    Probe {
        /// The probe round.
        round: u64,
    },
    /// Worker → driver: the answer to a probe.
    Status(Status),
    /// Driver → worker: stop the executors and send the summary.
    Finish,
    /// Driver → worker: exit.
    Bye,
    /// Worker → driver: latency-ledger deltas (at most [`DELTAS_PER_MESSAGE`]).
    Deltas(Vec<LedgerDelta>),
    /// Worker → driver: cumulative counters, every interval.
    Counters(Box<Counters>),
    /// Worker → driver: what it ran.
    Summary(Box<WorkerSummary>),
    /// Worker → driver: a fault.
    Error(String),
    /// Driver → worker: migration plans for the worker's slots.
    Plans(Box<Plans>),
    /// Worker → driver: a slot completed its part of a migration.
    Migrated(Report),
    /// Worker → driver: a slot in a migration says what it waits for.
    Progress(Progress),
    /// Executor → executor (and ingress → executor): the end of the sender's old epoch on
    /// this path.
    Marker,
    /// Executor → executor: a seal.
    Seal(Seal),
    /// Executor → executor: one part of an encoded [`Message::State`].
    StatePart(StatePart),
    /// A whole state message; only ever sent split into [`Message::StatePart`]s.
    State(Box<StateMsg>),
    /// Driver → worker: a move to `routing` is coming; copy the key groups it takes from this
    /// worker's slots to their new owners ahead (`runtime/executor/ahead.rs`).
    CopyAhead {
        /// The routing table the move will install, per operator.
        routing: Vec<RoutingRow>,
    },
    /// Executor → executor: key groups copied ahead of their move, or refreshes of those
    /// copies (what changed since), to stage (`queued` empty); like [`Message::State`], only
    /// ever sent split into [`Message::StatePart`]s.
    StateAhead(Box<StateMsg>),
    /// Worker → driver: its connection to another worker was lost (the requests between the
    /// two cannot be delivered, so the run cannot complete).
    LinkLost {
        /// The other worker.
        peer: u32,
        /// Why the connection was lost.
        reason: String,
    },
    /// Worker → driver, from a worker started after the run began: it listens at `listen`
    /// and asks for the running job (its id is the one it authenticated with).
    Join {
        /// `ip:port` the other workers and the driver connect to.
        listen: String,
    },
    /// Driver → worker that asked to join: not taken, and why. `later`: it may be taken if it
    /// asks again (another reserved worker must join first); else never by this run.
    JoinRefused {
        /// Why, for the joiner's message.
        reason: String,
        /// Whether asking again may succeed.
        later: bool,
    },
    /// Worker → driver: this worker was told to leave (SIGTERM): move its key groups away
    /// and let it go.
    Leave,
    /// Driver → workers: worker `peer` left the run (it holds nothing and was quiescent); its
    /// connections closing is not a fault.
    PeerLeft {
        /// The worker that left.
        peer: u32,
    },
    /// Driver → workers: worker `peer` joined the run at `addr`; connect to it.
    PeerJoined {
        /// The joining worker.
        peer: u32,
        /// `ip:port`.
        addr: String,
    },
    /// Driver → workers, at a quiescent cut: copy every key group, answer `Snapshotted`, then
    /// write this worker's part of checkpoint `id` into `dir` (`crate::checkpoint`).
    Snapshot {
        /// The checkpoint.
        id: u64,
        /// The checkpoint store's directory.
        dir: String,
    },
    /// Worker → driver: its state at a checkpoint's cut is copied (its counters there).
    Snapshotted(Box<Snapshotted>),
    /// Worker → driver: its part of a checkpoint is written, or why not.
    PartWritten(Box<PartWritten>),
}

impl Message {
    /// A short name of the variant (for errors and logs).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Job(_) => "job",
            Message::Ready => "ready",
            Message::Eos { .. } => "end of stream",
            Message::EosAck { .. } => "end-of-stream acknowledgement",
            Message::Probe { .. } => "probe",
            Message::Status(_) => "status",
            Message::Finish => "finish",
            Message::Bye => "bye",
            Message::Deltas(_) => "deltas",
            Message::Counters(_) => "counters",
            Message::Summary(_) => "summary",
            Message::Error(_) => "error",
            Message::Plans(_) => "plans",
            Message::Migrated(_) => "migration report",
            Message::Progress(_) => "migration progress",
            Message::Marker => "marker",
            Message::Seal(_) => "seal",
            Message::StatePart(_) => "state part",
            Message::State(_) => "state",
            Message::CopyAhead { .. } => "copy ahead",
            Message::StateAhead(_) => "state copied ahead",
            Message::LinkLost { .. } => "lost link",
            Message::Join { .. } => "join",
            Message::JoinRefused { .. } => "join refused",
            Message::PeerJoined { .. } => "peer joined",
            Message::Leave => "leave",
            Message::PeerLeft { .. } => "peer left",
            Message::Snapshot { .. } => "snapshot",
            Message::Snapshotted(_) => "snapshot taken",
            Message::PartWritten(_) => "part written",
        }
    }
}
