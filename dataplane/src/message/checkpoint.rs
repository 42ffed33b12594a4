//! The bodies of the checkpoint messages: what a worker answers when it has written its part
//! of a checkpoint, and the parts a job restores from (see `crate::checkpoint`).

use crate::transport::PeerId;
use clasp_operators::OperatorSummary;
use rkyv::{Archive, Deserialize, Serialize};

/// Worker → driver: its part of checkpoint `id` is written (or why not).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Snapshotted {
    /// The checkpoint.
    pub id: u64,
    /// The worker.
    pub worker: PeerId,
    /// The part's file name in the checkpoint's directory (empty on failure).
    pub name: String,
    /// CRC-32 of the part's body.
    pub crc32: u32,
    /// Bytes of the part's body.
    pub bytes: u64,
    /// Key groups in the part.
    pub groups: u64,
    /// Why the part could not be written (empty: it was).
    pub error: String,
    /// Per operator, summed over the worker's executors, at the cut.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed requests by reason, at the cut.
    pub malformed: Vec<Vec<(String, u64)>>,
}

/// A checkpoint part a job's workers restore their key groups from.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RestorePart {
    /// The part's path (on a path every worker shares).
    pub path: String,
    /// CRC-32 of its body, as the manifest records it.
    pub crc32: u32,
}
