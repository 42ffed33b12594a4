//! The bodies of the checkpoint messages: what a worker answers at a checkpoint's cut and once
//! it has written its part, and the parts a job restores from (see `crate::checkpoint`).

use crate::transport::PeerId;
use clasp_operators::OperatorSummary;
use rkyv::{Archive, Deserialize, Serialize};

/// Worker → driver, at a checkpoint's cut: its executors copied their state, and these were
/// its counters there (the driver resumes the input once every worker answered).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Snapshotted {
    /// The checkpoint.
    pub id: u64,
    /// The worker.
    pub worker: PeerId,
    /// Why the state could not be copied (empty: it was; no part follows otherwise).
    pub error: String,
    /// Per operator, summed over the worker's executors, at the cut.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed requests by reason, at the cut.
    pub malformed: Vec<Vec<(String, u64)>>,
}

/// Worker → driver, after its `Snapshotted`: its part of checkpoint `id` is written and
/// synced (or why not).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PartWritten {
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
}

/// A checkpoint part a job's workers restore their key groups from.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RestorePart {
    /// The part's path (on a path every worker shares).
    pub path: String,
    /// CRC-32 of its body, as the manifest records it.
    pub crc32: u32,
}
