//! Sources: where a run's input records come from when they are not generated — a file of
//! lines, a file of length-prefixed records, every file of a directory, standard input, or TCP
//! connections.
//!
//! A source is read by a thread of its own into a small bounded queue of batches
//! ([`SourceFeed`]), and the ingress takes records from that queue only when it admits one.
//! So a source streams: what is held at once is a few batches (at most [`BATCHES_QUEUED`]
//! of [`BATCH_BYTES`] plus one record, or of [`BATCH_ITEMS`] items), whatever the input's
//! size; and when the cluster does not keep up the reader stops reading, so a TCP client is
//! slowed by its socket's flow control rather than dropped, and a pipe into standard input
//! blocks its writer.
//!
//! Each source keeps the [`SourceOffset`] of the last record admitted — file index and byte
//! offset for files, a record count for streams — so that a run can be resumed or replayed
//! from it. Bad data (a record over [`MAX_RECORD_BYTES`], a truncated length prefix at the end
//! of a length-prefixed file) is skipped, counted by reason and reported; everything around it
//! is read.

mod feed;
mod input;
mod offset;
mod reader;
mod share;
mod spec;
mod split;

pub use feed::{Polled, SourceFeed};
pub use input::{Input, Next};
pub use offset::{FilePosition, SourceOffset, SourceReport};
pub use share::Share;
pub use spec::SourceSpec;

/// The longest record a source accepts: a longer line, or a length prefix above it, is
/// counted malformed and skipped. Chosen so that a root request of the longest record with
/// the longest key fits the data plane's default limits: a frame the transport sends alone
/// (its frame limit and data window) and one a default ring takes (half of `--ring-bytes`'
/// default of 1 MiB).
pub const MAX_RECORD_BYTES: usize = 128 << 10;
/// Room left in a frame beyond the request: the transport's batch and entry headers.
const WIRE_SLACK_BYTES: usize = 1024;
const _: () = assert!(
    crate::request::REQUEST_HEADER_BYTES
        + crate::request::MAX_KEY_BYTES
        + MAX_RECORD_BYTES
        + WIRE_SLACK_BYTES
        <= min_usize(
            crate::transport::DEFAULT_FRAME_BYTES_MAX,
            crate::transport::DEFAULT_DATA_CREDIT_BYTES as usize
        )
);
const fn min_usize(a: usize, b: usize) -> usize {
    if a < b { a } else { b }
}
/// A batch is handed to the ingress once it holds this many bytes of records (or when the
/// reader would wait for more input).
pub const BATCH_BYTES: usize = 64 << 10;
/// A batch is handed on once it holds this many items (records or bad data skipped), however
/// short they are: a file of empty lines must not grow a batch without bound.
pub const BATCH_ITEMS: usize = 4096;
/// Batches read ahead of the ingress, at most.
pub const BATCHES_QUEUED: usize = 4;

/// Why a source could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A source spec that does not parse.
    #[error("--source {spec:?}: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A replay from a checkpoint that did not reach the checkpoint's position in the input.
    #[error("source {source_name}: {reason}")]
    Replay {
        /// The source, as `--source` names it.
        source_name: String,
        /// Where the replay stood, and where the checkpoint did.
        reason: String,
    },
    /// The app has no generator to make its input.
    #[error("app {app} has no generator {generator}")]
    NoGenerator {
        /// The app.
        app: String,
        /// Its generator's name.
        generator: String,
    },
    /// An I/O error opening or reading the source.
    #[error("source {what}: {source}")]
    Io {
        /// The file, directory or address.
        what: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl SourceError {
    fn io(what: impl std::fmt::Display, source: std::io::Error) -> Self {
        SourceError::Io {
            what: what.to_string(),
            source,
        }
    }
}

/// Reasons bad source data is counted under.
pub mod malformed {
    /// A line (or length-prefixed record) longer than [`super::MAX_RECORD_BYTES`].
    pub const TOO_LONG: &str = "record longer than 128 KiB";
    /// A length prefix, or the record it announces, cut short by the end of the file.
    pub const TRUNCATED: &str = "truncated length-prefixed record at end of file";
}

#[cfg(test)]
mod tests;
