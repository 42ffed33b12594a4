//! The bytes of an exported key group — what a migration moves and a checkpoint stores: a
//! 16-byte header naming the format, then the rkyv archive of a [`GroupArchive`].
//!
//! Why a header in front of rkyv's bytes: rkyv puts its root object at the end and validates
//! the whole archive against this build's layout, so an archive of another build (a checkpoint
//! written before a format change) would fail somewhere inside validation with a message about
//! offsets. Read first, the header says which format the bytes are in.

use crate::operator::ImportError;
use crate::timers::ExportedTimers;

/// Format version of exported key groups (2: with the outputs' `seq` counters; 3: with the
/// keys' timers; 4: the states as one run of bytes, [`GroupArchive::entries`]).
pub const GROUP_ARCHIVE_FORMAT: u32 = 4;

/// An exported key group: keys in no particular order, states in their canonical
/// [`crate::StateCodec`] encoding, the group's output counters ([`crate::output_seq`]; empty
/// without a sink) and its keys' pending timers ([`crate::timers`]). An exported group's bytes
/// are a 16-byte header (magic and format, so an archive of another build is refused by name)
/// and then this, archived by rkyv.
///
/// The states are one run of bytes rather than a vector of `(key, state)` vectors: a group is
/// written by appending to one buffer and read by walking it, with no allocation per key on
/// either side (exporting and importing WC's ~42 000 words took 51 and 42 ns a key as vectors,
/// `benches/benches/state.rs`; `benches/results/migrations.md` has the figures since).
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug)]
pub struct GroupArchive {
    /// [`GROUP_ARCHIVE_FORMAT`].
    pub format: u32,
    /// Key group.
    pub key_group: u16,
    /// Number of entries in [`GroupArchive::entries`].
    pub entry_count: u32,
    /// The states, in the exporter's map order, each `key length: u16 LE, state length: u32
    /// LE, key, encoded state` (written and read by `runtime/entries.rs`).
    pub entries: Vec<u8>,
    /// `(output key, next seq)`, in the exporter's map order.
    pub output_seqs: Vec<(Vec<u8>, u64)>,
    /// `(key, event times, processing times)`, keys and times ascending.
    pub timers: Vec<ExportedTimers>,
}

/// The first bytes of every key group archive (format 4 on): "CLGA", then the format (u32 LE),
/// then zeros to [`ARCHIVE_HEADER_BYTES`], then the rkyv archive of a [`GroupArchive`].
const ARCHIVE_MAGIC: [u8; 4] = *b"CLGA";
/// The first bytes of a *changes* archive (same layout): the keys of a group copied ahead of a
/// move that changed since, each with its state or as deleted (`runtime/ahead.rs`).
const CHANGES_MAGIC: [u8; 4] = *b"CLGC";

/// What an archive holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArchiveKind {
    /// A whole key group (a migration's or a checkpoint's).
    Whole,
    /// What changed in a key group since it was copied ahead.
    Changes,
}
/// Bytes of the header in front of the rkyv archive: 16, so the archive keeps the alignment it
/// was written with.
const ARCHIVE_HEADER_BYTES: usize = 16;
/// Where the header's reserved (zero) bytes start: after the magic and the u32 format.
const ARCHIVE_RESERVED_AT: usize = ARCHIVE_MAGIC.len() + 4;
/// An rkyv archive's own bytes beyond its items (root object, alignment), generously.
const ARCHIVE_FIXED_BYTES: usize = 64;
/// An rkyv archive's bytes per item beyond its payload (relative pointers and lengths of its
/// vectors, padding), generously: an estimate only sizes the buffer.
const ARCHIVE_ITEM_OVERHEAD_BYTES: usize = 32;

/// Encodes one key group's archive ([`crate::OperatorInstance::export_group`]'s bytes) from its
/// entries, already in [`GroupArchive::entries`]' form. The output is sized up front: a grown
/// buffer would be copied and, for a large group, fault in fresh pages each time.
pub(super) fn group_archive(
    kind: ArchiveKind,
    key_group: u16,
    (entry_count, entries): (u32, Vec<u8>),
    output_seqs: Vec<(Vec<u8>, u64)>,
    timers: Vec<ExportedTimers>,
) -> Vec<u8> {
    let items = output_seqs.len() + timers.len();
    let payload_bytes: usize = entries.len()
        + (output_seqs.iter())
            .map(|(k, _)| k.len() + 8)
            .sum::<usize>()
        + (timers.iter())
            .map(|(k, e, p)| k.len() + 8 * (e.len() + p.len()))
            .sum::<usize>();
    let estimate_bytes = ARCHIVE_FIXED_BYTES + payload_bytes + items * ARCHIVE_ITEM_OVERHEAD_BYTES;
    let archive = GroupArchive {
        format: GROUP_ARCHIVE_FORMAT,
        key_group,
        entry_count,
        entries,
        output_seqs,
        timers,
    };
    let mut out = Vec::with_capacity(ARCHIVE_HEADER_BYTES + estimate_bytes);
    out.extend_from_slice(match kind {
        ArchiveKind::Whole => &ARCHIVE_MAGIC,
        ArchiveKind::Changes => &CHANGES_MAGIC,
    });
    out.extend_from_slice(&GROUP_ARCHIVE_FORMAT.to_le_bytes());
    out.extend_from_slice(&[0; ARCHIVE_HEADER_BYTES - ARCHIVE_RESERVED_AT]);
    rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(&archive, out)
        .expect("serializing plain vectors cannot fail")
}

/// Reads `body` (an archive's bytes after its header) as the archive of `key_group`: aligned
/// for rkyv, validated, its format and key group checked; then `read` takes what it needs.
pub(super) fn read_archive<R>(
    key_group: u16,
    body: &[u8],
    read: impl FnOnce(&ArchivedGroupArchive) -> Result<R, ImportError>,
) -> Result<R, ImportError> {
    // rkyv reads in place and needs its alignment; the bytes may come from anywhere.
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(body.len());
    aligned.extend_from_slice(body);
    let archive = rkyv::access::<ArchivedGroupArchive, rkyv::rancor::Error>(&aligned)
        .map_err(|e| ImportError::Archive(e.to_string()))?;
    let (format, found) = (archive.format.to_native(), archive.key_group.to_native());
    if format != GROUP_ARCHIVE_FORMAT || found != key_group {
        return Err(ImportError::WrongGroup {
            expected: key_group,
            found,
            format,
        });
    }
    read(archive)
}

/// The archive's bytes after its header, or why they are not an archive this build reads: the
/// format is checked before rkyv validates anything, so an archive of another build is named
/// as such rather than failing validation somewhere inside.
pub(super) fn archive_body(bytes: &[u8]) -> Result<(ArchiveKind, &[u8]), ImportError> {
    let kind = match bytes.get(..4) {
        Some(m) if m == CHANGES_MAGIC => ArchiveKind::Changes,
        _ => ArchiveKind::Whole,
    };
    let format = match bytes.split_first_chunk::<ARCHIVE_HEADER_BYTES>() {
        Some((head, _)) if head[..4] == ARCHIVE_MAGIC || head[..4] == CHANGES_MAGIC => {
            if head[ARCHIVE_RESERVED_AT..].iter().any(|&b| b != 0) {
                return Err(ImportError::Archive(
                    "reserved key group archive header bytes are not zero".into(),
                ));
            }
            u32::from_le_bytes([head[4], head[5], head[6], head[7]])
        }
        _ => {
            return Err(ImportError::Archive(format!(
                "not a key group archive of format {GROUP_ARCHIVE_FORMAT} (format 3 and earlier \
                 had no header; a checkpoint from an earlier build cannot be restored)"
            )));
        }
    };
    if format != GROUP_ARCHIVE_FORMAT {
        return Err(ImportError::Archive(format!(
            "a key group archive of format {format}; this build reads format \
             {GROUP_ARCHIVE_FORMAT}"
        )));
    }
    Ok((kind, bytes.get(ARCHIVE_HEADER_BYTES..).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::super::entries;
    use super::{ArchiveKind, group_archive};
    use crate::StateCodec;
    use crate::apps;
    use crate::key::key_group_of;

    /// Archives in no particular order no longer show a repeated key by its position, so the
    /// importer checks each key is new.
    #[test]
    fn an_archive_with_a_key_twice_is_refused() {
        let spec = apps::builtin("wc").unwrap();
        let count = spec.operators.len() - 1;
        let kg = key_group_of(b"apple");
        let mut e = Vec::new();
        for n in [1u64, 2] {
            entries::push(&mut e, b"apple", |o| n.encode(o));
        }
        let twice = group_archive(ArchiveKind::Whole, kg, (2, e), Vec::new(), Vec::new());
        let mut inst = spec.instantiate(count);
        let err = inst.import_group(kg, &twice).unwrap_err().to_string();
        assert!(err.contains("a state key twice"), "{err}");
        // The same key once imports.
        let mut e = Vec::new();
        entries::push(&mut e, b"apple", |o| 3u64.encode(o));
        let once = group_archive(ArchiveKind::Whole, kg, (1, e), Vec::new(), Vec::new());
        assert_eq!(spec.instantiate(count).import_group(kg, &once).unwrap(), 1);
    }
}
