//! Why a cluster worker ended: the one error type of `run_cluster_worker`.
//!
//! Faults the worker survives (a bad frame from a peer, a lost connection to another worker)
//! are not errors: they are logged, reported to the driver and listed in `WorkerExit`. These
//! are the ones it cannot go on after.

use crate::message::MessageError;
use crate::transport::{PeerId, TransportError};
use std::time::Duration;

/// A fault that ended a cluster worker.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The worker's id is not in its own cluster file.
    #[error("worker {0} is not in the cluster file")]
    NotInCluster(PeerId),
    /// The transport failed (binding, connecting, sending, polling).
    #[error("{what}: {source}")]
    Transport {
        /// What the worker was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: TransportError,
    },
    /// No driver sent a job in time.
    #[error("worker {id}: no job from a driver within {timeout:?}")]
    NoJob {
        /// This worker.
        id: PeerId,
        /// How long it waited.
        timeout: Duration,
    },
    /// The job could not be read (another version, a malformed message).
    #[error("job from {from}: {source}")]
    BadJob {
        /// Who sent it.
        from: PeerId,
        /// Why it could not be read.
        #[source]
        source: MessageError,
    },
    /// The job does not fit this worker (its workers, its app, its sizes).
    #[error("{0}")]
    Job(String),
    /// A ring of the worker's segment could not be opened.
    #[error("a ring of the worker's segment: {0}")]
    Ring(#[from] clasp_shmring::Error),
    /// The driver broke the run's protocol or went away.
    #[error("{0}")]
    Driver(String),
    /// A joiner the run will not take (an id it did not reserve, one that left).
    #[error("the run does not take this worker: {0}")]
    JoinRefused(String),
    /// Told to leave (SIGTERM) while it had no job: the normal end.
    #[error("told to stop while waiting for a job")]
    Stopped,
    /// Told to leave, and the driver did not let it go in time.
    #[error("the driver did not let this worker leave within {0:?}")]
    LeaveTimeout(Duration),
}

impl NodeError {
    /// Whether the worker can serve another job after this fault: a job it could not read or
    /// run, or a driver that broke the protocol or went away, ends that job only; a failed
    /// transport or a missing cluster-file entry ends the worker.
    pub fn ends_only_the_job(&self) -> bool {
        matches!(
            self,
            NodeError::BadJob { .. }
                | NodeError::Job(_)
                | NodeError::Driver(_)
                | NodeError::Ring(_)
        )
    }

    /// A transport failure while doing `what`.
    pub(super) fn transport(what: impl Into<String>, source: TransportError) -> NodeError {
        NodeError::Transport {
            what: what.into(),
            source,
        }
    }
}
