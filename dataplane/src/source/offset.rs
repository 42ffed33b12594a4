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

/// Bytes of a file source a checkpoint fingerprints: those just before its position.
pub const TAIL_FINGERPRINT_BYTES: u64 = 4096;

impl FilePosition {
    /// Whether `other` is this position: the same file (however its path is spelled) and byte.
    /// The file's index is not compared: an empty file added before it in a `dir:` moves no
    /// record.
    pub fn same_place(&self, other: &FilePosition) -> bool {
        self.byte_offset == other.byte_offset
            && crate::paths::same_file(self.path.as_ref(), other.path.as_ref())
    }

    /// CRC-32 of the (at most [`TAIL_FINGERPRINT_BYTES`]) bytes of the file just before this
    /// position, as the file holds them now; `None` when they cannot be read (the file is gone
    /// or shorter, or is not a regular file). A checkpoint records it, and a resume refuses a
    /// file whose bytes there differ: rewritten in place, it is not the file the run read,
    /// though its path and length may be the same (a file that grew since, as a log does,
    /// still matches).
    pub fn tail_crc32(&self) -> Option<u32> {
        use std::io::{Read, Seek, SeekFrom};
        // A pipe or a device read once cannot be read again (and opening a FIFO whose writer
        // is gone would wait for another): only a regular file has bytes to compare.
        if !std::fs::metadata(&self.path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        let from = self.byte_offset.saturating_sub(TAIL_FINGERPRINT_BYTES);
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut bytes = vec![0; usize::try_from(self.byte_offset - from).ok()?];
        file.read_exact(&mut bytes).ok()?;
        Some(crc32fast::hash(&bytes))
    }
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
