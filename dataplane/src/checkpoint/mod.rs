//! Checkpoints: what a run needs to restart from a consistent cut after losing a worker (or its
//! driver) — every key group's state, the counters and digests accumulated so far, the routing
//! table, and where each source stood.
//!
//! A checkpoint is a set of *parts* (one per worker: the exported key groups of its executors,
//! written by the worker itself, so state never funnels through the driver) and a *manifest*
//! that the driver writes last. The manifest names every part with its checksum, so a
//! checkpoint exists only once its manifest does: a crash at any moment before leaves a
//! directory without a manifest, which loading ignores. Every file is written under a
//! temporary name, fsync'd and renamed (then the directory is fsync'd), and carries a CRC-32
//! of its body, so a torn or corrupted file is detected on load; loading then falls back to the
//! previous complete checkpoint and says why. The last [`KEEP_DEFAULT`] checkpoints are kept.
//!
//! [`CheckpointStore`] is the interface the driver and the workers use; [`FileStore`] keeps
//! checkpoints in a directory (on several hosts it must be a path every host shares).

mod file;
mod lock;
mod manifest;
mod part;
#[cfg(test)]
mod tests;

pub use file::{
    FileStore, checkpoint_dir_name, checkpoint_ids, holds_complete_checkpoint, read_part,
};
pub use lock::DirLock;
pub use manifest::{Manifest, OperatorBase, PartRef};
pub use part::{GroupState, Part};

/// Checkpoints kept by default (older ones are removed once a newer one is complete).
pub const KEEP_DEFAULT: usize = 2;

/// Why a checkpoint, or one of its files, could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file system operation failed.
    #[error("checkpoint {what}: {source}")]
    Io {
        /// What was being done, and to which path.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file's bytes are not what was written (bad magic, length or checksum).
    #[error("checkpoint file {path}: {why}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// Another run holds the directory ([`DirLock`]).
    #[error(
        "{dir} is in use by another run{}: one run at a time writes checkpoints there",
        if .holder.is_empty() { String::new() } else { format!(" (pid {})", .holder) }
    )]
    InUse {
        /// The directory.
        dir: String,
        /// The pid the holder wrote into the lock file (empty if unreadable).
        holder: String,
    },
    /// No complete checkpoint in the store (each incomplete or damaged one named).
    #[error("no complete checkpoint in {dir}{}", if .skipped.is_empty() { String::new() } else { format!(" ({})", .skipped.join("; ")) })]
    NoneComplete {
        /// The store.
        dir: String,
        /// Why each checkpoint found was skipped.
        skipped: Vec<String>,
    },
}

impl CheckpointError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CheckpointError::Io {
            what: what.into(),
            source,
        }
    }
}

/// A checkpoint found complete and intact by [`CheckpointStore::load_latest`].
#[derive(Debug)]
pub struct Loaded {
    /// Its manifest.
    pub manifest: Manifest,
    /// Its parts, read and checked against the manifest's checksums, in manifest order.
    pub parts: Vec<Part>,
    /// Newer checkpoints that were skipped, each with why (empty: this is the newest).
    pub skipped: Vec<String>,
}

/// Where checkpoints are kept. The workers write parts, the driver commits manifests and loads.
pub trait CheckpointStore {
    /// Writes one part of checkpoint `id` durably; a failure fails that checkpoint only.
    fn write_part(&self, id: u64, name: &str, part: &Part) -> Result<PartRef, CheckpointError>;
    /// Completes checkpoint `id` by writing its manifest durably (after all of its parts), then
    /// removes all but the newest `keep` complete checkpoints.
    fn commit(&self, manifest: &Manifest) -> Result<(), CheckpointError>;
    /// The newest complete checkpoint whose files are all intact, falling back to older ones.
    fn load_latest(&self) -> Result<Loaded, CheckpointError>;
    /// Removes checkpoint `id` (an abandoned one), quietly if it is not there.
    fn discard(&self, id: u64);
}
