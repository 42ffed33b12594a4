//! The errors of this crate. Each failure a caller may want to handle differently has its own
//! variant: a frame that can never fit is not a full ring, and a full ring is not a corrupt one.

use std::io;

/// Everything that can go wrong with a ring or a segment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The frame is longer than the ring's maximum frame length; it can never be written.
    #[error("frame too large: {len_bytes} bytes, the ring's maximum is {max_bytes} bytes")]
    FrameTooLarge {
        /// Requested payload length.
        len_bytes: usize,
        /// The ring's maximum payload length.
        max_bytes: usize,
    },
    /// The ring has no room for the frame now; retry after the consumer releases frames.
    #[error("ring full: {needed_bytes} bytes needed, {free_bytes} free")]
    Full {
        /// Bytes the frame needs, including its header, padding and any wrap-around gap.
        needed_bytes: usize,
        /// Bytes free at the time of the attempt.
        free_bytes: usize,
    },
    /// The other side closed its end and (for a consumer) no frame is left.
    #[error("the peer closed the ring")]
    Closed,
    /// The process at the other end of the ring died without closing it.
    #[error("the peer process (pid {pid}) died")]
    PeerDead {
        /// The peer's pid as it registered itself.
        pid: u32,
    },
    /// A wait ran out of time.
    #[error("timed out after {waited_ms} ms")]
    TimedOut {
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// The segment's header does not describe what this build expects; nothing was mapped in.
    #[error("segment mismatch: {0}")]
    SegmentMismatch(String),
    /// Shared memory holds a value no correct peer could have written (an index or length out
    /// of bounds). The ring must not be used further.
    #[error("corrupt ring: {0}")]
    Corrupt(String),
    /// A ring or segment configuration is invalid (not a power of two, too small, ...).
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A segment of that name already exists and its owner is alive.
    #[error("segment {name} already exists and its owner (pid {owner_pid}) is alive")]
    Exists {
        /// The segment's name.
        name: String,
        /// The live owner's pid.
        owner_pid: u32,
    },
    /// `/dev/shm` (or the memfd's tmpfs) has no room for the segment, or it is larger than the
    /// memory the machine has available (refused before `fallocate`).
    #[error("no space for a segment of {bytes} bytes: {source}")]
    NoSpace {
        /// The size that could not be reserved.
        bytes: u64,
        /// The error of `fallocate`, or the memory available.
        source: io::Error,
    },
    /// The endpoint is already held by a live process.
    #[error("ring {ring} already has a live {side} (pid {pid})")]
    EndpointTaken {
        /// Ring index in the segment.
        ring: usize,
        /// "producer" or "consumer".
        side: &'static str,
        /// The holder's pid.
        pid: u32,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn io(what: impl Into<String>, source: impl Into<io::Error>) -> Self {
        Error::Io {
            what: what.into(),
            source: source.into(),
        }
    }
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
