//! Why a driver's run stopped.

use crate::message::MessageError;
use crate::routing::SlotError;
use crate::transport::{PeerId, TransportError};
use std::time::Duration;

/// A fault that stopped a cluster run (faults the run survives are in its report instead).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// Settings or an app the run cannot start with.
    #[error("{0}")]
    Config(String),
    /// The cluster's slots cannot number its executors.
    #[error(transparent)]
    Slots(#[from] SlotError),
    /// The driver's own transport failed.
    #[error("{context}: {source}")]
    Transport {
        /// What the driver was doing.
        context: String,
        /// The transport's error.
        #[source]
        source: TransportError,
    },
    /// A record whose request no worker's ring takes: the run stops at it (a restart would
    /// stop there again).
    #[error(
        "record {record} ({bytes} bytes as a request): longer than the {max_bytes} bytes a \
         worker's rings take (--ring-bytes {ring_bytes}); the run stops at it"
    )]
    RecordTooLarge {
        /// The record's index in the input.
        record: u64,
        /// Its request frame's length.
        bytes: usize,
        /// The longest a ring takes.
        max_bytes: usize,
        /// The rings' size.
        ring_bytes: usize,
    },
    /// A fault a recovery would cure, not recovered, and why not.
    #[error("{error} (not recovered: {why})")]
    NotRecovered {
        /// The fault.
        error: Box<DriverError>,
        /// Why the run did not recover from it.
        why: String,
    },
    /// A worker could not be reached.
    #[error("worker {peer} at {addr} cannot be used: {reason}")]
    Unreachable {
        /// The worker.
        peer: PeerId,
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A worker already serves a driver: another run is using it.
    #[error(
        "worker {peer} at {addr} already has a driver's connection: another run is using it \
         (a worker serves one run at a time)"
    )]
    Taken {
        /// The worker.
        peer: PeerId,
        /// Its address.
        addr: String,
    },
    /// A worker's connection was lost.
    #[error("lost worker {peer} at {addr}{during}: {reason}")]
    Lost {
        /// The worker.
        peer: PeerId,
        /// Its address.
        addr: String,
        /// What was in progress (empty, or " during the migration to epoch N ...").
        during: String,
        /// Why.
        reason: String,
    },
    /// The connection between two workers was lost: the requests between them cannot be
    /// delivered (without checkpoints the run ends; with them it restarts from the last one).
    #[error(
        "lost the link between worker {worker} at {addr} and worker {peer} at {peer_addr}: \
         {reason}; the requests between them cannot be delivered"
    )]
    LinkLost {
        /// The worker that reported it.
        worker: PeerId,
        /// Its address.
        addr: String,
        /// The worker at the other end.
        peer: PeerId,
        /// Its address.
        peer_addr: String,
        /// Why, as the reporting worker saw it.
        reason: String,
    },
    /// The cluster did not become quiescent in time.
    #[error("not quiescent within {after:?}: {what}")]
    NotQuiescent {
        /// The deadline (the stall timeout).
        after: Duration,
        /// What was still moving or missing (workers and links named).
        what: String,
    },
    /// A worker sent a message this build cannot read (another version, or garbage).
    #[error("worker {worker}: {source}")]
    Message {
        /// The worker.
        worker: PeerId,
        /// Why it cannot be read.
        #[source]
        source: MessageError,
    },
    /// A worker broke the run's protocol.
    #[error("worker {worker} {what}")]
    Protocol {
        /// The worker.
        worker: PeerId,
        /// What it did.
        what: String,
    },
    /// Workers did not answer in time.
    #[error("{0}")]
    Timeout(String),
    /// Workers failed to start the job.
    #[error("workers failed to start: {0}")]
    Start(String),
    /// Nothing progressed for the stall timeout.
    #[error(
        "no progress for {after:?} ({open} of {tracked} tracked roots open){links}; giving up{faults}"
    )]
    Stalled {
        /// The stall timeout.
        after: Duration,
        /// Tracked roots open.
        open: usize,
        /// Tracked roots admitted.
        tracked: u64,
        /// The faults seen (empty, or " (faults: ...)").
        faults: String,
        /// What a last probe round found (empty, or ": worker 1 sent worker 2 N frames, ...":
        /// a link whose counts differ is the likely cause, e.g. one cut silently).
        links: String,
    },
    /// A migration could not start, or broke the protocol.
    #[error("{0}")]
    Migration(String),
    /// A migration did not complete within the migration timeout: some worker stopped
    /// answering (a frozen process or host) with its connections up. With checkpoints the
    /// run restarts from the last one without the workers that do not answer a probe.
    #[error("{0}")]
    MigrationTimedOut(String),
    /// The input's source could not be opened or read.
    #[error(transparent)]
    Source(#[from] crate::source::SourceError),
}

impl DriverError {
    /// Whether the run can restart from a checkpoint after this fault: a worker or a link
    /// lost, a worker that cannot be reached, a run or a migration that stopped moving (a
    /// worker that froze). Bad settings, a bad source or a worker breaking the protocol are not.
    pub fn is_recoverable(&self) -> bool {
        match self {
            // What a frame or a setting is does not change with a restart: replaying would
            // fail at the same record again.
            DriverError::Transport { source, .. } => !matches!(
                source,
                TransportError::TooLarge { .. }
                    | TransportError::Frame(_)
                    | TransportError::Wire(_)
                    | TransportError::Config(_)
            ),
            DriverError::Lost { .. }
            | DriverError::LinkLost { .. }
            | DriverError::Unreachable { .. }
            | DriverError::NotQuiescent { .. }
            | DriverError::Stalled { .. }
            | DriverError::MigrationTimedOut(_)
            | DriverError::Timeout(_) => true,
            _ => false,
        }
    }

    /// A transport error while doing `context`.
    pub(super) fn transport(context: impl Into<String>, source: TransportError) -> DriverError {
        DriverError::Transport {
            context: context.into(),
            source,
        }
    }
}
