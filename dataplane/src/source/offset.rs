//! Where a source stands: the position just past the last record admitted, from which a
//! replay resumes, and what it counted on the way.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A position in one file of a file source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePosition {
    /// The file's index: 0 for `file:` and `lenprefix:`, its place in name order for `dir:`.
    pub file_index: u32,
    /// The file's path.
    pub path: String,
    /// The byte just past the record (its newline included): where the next record starts.
    pub byte_offset: u64,
}

/// The offset of a source's last admitted record. A replay of a file source resumes at
/// `file`; of a stream (standard input, TCP) or a generator, after the first `records`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceOffset {
    /// Records admitted from the source.
    pub records: u64,
    /// For a file source, the file and byte just past the last admitted record (`None`
    /// before the first record, and for streams and generators).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub file: Option<FilePosition>,
}

/// What one source did in a run (an element of a run's `"sources"`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    /// The source, as `--source` names it (`gen:` for the generator).
    pub source: String,
    /// Its offset when the input ended.
    #[serde(flatten)]
    pub offset: SourceOffset,
    /// Bad data skipped, by reason.
    pub malformed: BTreeMap<String, u64>,
}
