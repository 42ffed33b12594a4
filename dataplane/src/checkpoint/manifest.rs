//! The manifest: the one file that makes a checkpoint exist. It is JSON so that an operator
//! can read what a checkpoint holds (`cat`), and it carries everything that is not per-key
//! state: the routing table and its epoch, where the input stood, the counters and digests
//! accumulated before the cut, and the parts with their checksums.

use crate::source::SourceOffset;
use clasp_operators::digest::Digest;
use clasp_protocol::{Epoch, RoutingTable, Slot};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One part of a checkpoint, as the manifest names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRef {
    /// The file's name in the checkpoint's directory.
    pub name: String,
    /// CRC-32 of the part's body.
    pub crc32: u32,
    /// Bytes of the body.
    pub bytes: u64,
    /// Key groups (of all operators) it holds.
    pub groups: u64,
}

/// What one operator had done before the cut, summed over every instance: added to what the
/// instances of the run that restores from the checkpoint count, so the run's totals are those
/// of one uninterrupted run. The state digest is not here: it is taken from the state itself at
/// the end of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorBase {
    /// Requests processed.
    pub processed: u64,
    /// Requests dropped as malformed.
    pub malformed: u64,
    /// Digest of processed inputs (racy operators only).
    pub inputs: Digest,
    /// Digest of sink outputs.
    pub outputs: Digest,
    /// Malformed requests by reason.
    pub malformed_reasons: BTreeMap<String, u64>,
}

/// A complete checkpoint's description (module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The checkpoint's id: increasing within a run.
    pub id: u64,
    /// When the cut was taken (ms since the Unix epoch).
    pub created_unix_ms: u64,
    /// The app's name (a restore refuses another app's checkpoint).
    pub app: String,
    /// The generator seed of the run.
    pub seed: u64,
    /// The epoch of `routing`.
    pub epoch: u64,
    /// Per operator, the owning slot of each key group at the cut.
    pub routing: Vec<Vec<u32>>,
    /// The workers of the run at the cut, in slot order.
    pub workers: Vec<u32>,
    /// Executors per worker.
    pub executors: u16,
    /// Records admitted before the cut: the input resumes with record `admitted`.
    pub admitted: u64,
    /// Where the source stood at the cut.
    pub source: SourceOffset,
    /// Per operator, in the app's order.
    pub operators: Vec<OperatorBase>,
    /// The parts, one per worker.
    pub parts: Vec<PartRef>,
    /// How long the cut paused admission (ms): draining, exporting and writing the parts.
    pub pause_ms: f64,
    /// The run's clock at the cut (s since its input started): a run resumed from the
    /// checkpoint goes on from there, so its rate pattern, `--duration` and scripted moves
    /// continue where they were (0 in a manifest written before it was recorded).
    #[serde(default)]
    pub run_s: f64,
    /// The run's record limit (`--records`, or the default of a generated input): a run
    /// resumed from the checkpoint without `--records` admits up to it, as the run that wrote
    /// it would have. None: a run bounded by its duration or its source, or a manifest written
    /// before it was recorded.
    #[serde(default)]
    pub records: Option<u64>,
    /// The app's shape ([`clasp_operators::AppSpec::shape`]): its operators, their kinds and
    /// parameters, and its edges. A run resumes only with an app of the same shape. None: a
    /// manifest written before it was recorded (the app's name is then all that is checked).
    #[serde(default)]
    pub app_shape: Option<String>,
    /// For a file source, the CRC-32 of the bytes just before `source`'s position
    /// ([`crate::source::FilePosition::tail_crc32`]): a resume refuses a file rewritten since.
    /// None: no file position, or a manifest written before it was recorded.
    #[serde(default)]
    pub source_tail_crc32: Option<u32>,
}

impl Manifest {
    /// The routing table of the cut.
    pub fn routing_table(&self) -> Result<RoutingTable, String> {
        let rows = (self.routing.iter())
            .map(|r| r.iter().map(|&s| Slot(s)).collect())
            .collect();
        RoutingTable::from_rows(Epoch(self.epoch), rows).map_err(|e| e.to_string())
    }

    /// Why the file the checkpoint read is not that file any more, if it is not: shorter than
    /// the checkpoint's byte (a run going on from there would read nothing, and seem to
    /// succeed), or rewritten in place (the bytes it read last differ). A file that only grew
    /// since, as a log does, is the same file.
    pub fn source_changed(&self) -> Option<String> {
        let pos = self.source.file.as_ref()?;
        let len = std::fs::metadata(&pos.path).map_or(0, |md| md.len());
        if len < pos.byte_offset {
            return Some(format!(
                "its checkpoint read {} to byte {}, but the file holds {len} bytes now: it is \
                 not the file the run read",
                pos.path, pos.byte_offset
            ));
        }
        let crc = self.source_tail_crc32?;
        (pos.tail_crc32() != Some(crc)).then(|| {
            format!(
                "the bytes of {} before byte {} are not those its checkpoint read: the file was \
                 rewritten since, and is not the file the run read",
                pos.path, pos.byte_offset
            )
        })
    }

    /// `table`'s rows, as the manifest keeps them.
    pub fn rows_of(table: &RoutingTable) -> Vec<Vec<u32>> {
        table
            .rows()
            .map(|r| r.iter().map(|s| s.0).collect())
            .collect()
    }
}
