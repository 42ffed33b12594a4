//! A checkpoint part: the key groups one worker's executors owned at the cut, each as the
//! operator's own export archive (the format migrations move), in an rkyv archive validated on
//! load like every other byte another process wrote.

use rkyv::{Archive, Deserialize, Serialize};

/// A part's archive bytes beyond its groups (root object, alignment), generously: an estimate
/// only sizes the encoding buffer.
const PART_FIXED_BYTES: usize = 64;
/// A group's archive bytes beyond its own archive (ids, the relative pointer and length,
/// padding), generously.
const GROUP_OVERHEAD_BYTES: usize = 32;

/// One key group of one operator: its export archive.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct GroupState {
    /// The operator, by index in the app.
    pub operator: u16,
    /// The key group.
    pub key_group: u16,
    /// `OperatorInstance::export_group`'s archive.
    pub archive: Vec<u8>,
}

/// A part's body (module docs).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// The worker that wrote it.
    pub worker: u32,
    /// Its key groups.
    pub groups: Vec<GroupState>,
}

impl Part {
    /// The encoded body.
    pub fn encode(&self) -> Vec<u8> {
        // Sized up front: a part holds a worker's whole state, and a buffer grown by doubling
        // is copied and faults in fresh pages at every step (tens of ms for 1.4 MB on a
        // capped worker).
        let estimate_bytes = PART_FIXED_BYTES
            + (self.groups.iter())
                .map(|g| g.archive.len() + GROUP_OVERHEAD_BYTES)
                .sum::<usize>();
        rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(
            self,
            Vec::with_capacity(estimate_bytes),
        )
        .expect("serializing plain vectors cannot fail")
    }

    /// Reads a body written by [`Part::encode`], checking every offset first.
    pub fn decode(bytes: &[u8]) -> Result<Part, String> {
        let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
        aligned.extend_from_slice(bytes);
        rkyv::from_bytes::<Part, rkyv::rancor::Error>(&aligned).map_err(|e| e.to_string())
    }
}
