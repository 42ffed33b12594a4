//! The states of one exported key group as one run of bytes ([`super::GroupArchive::entries`]):
//! `key length: u16 LE, state length: u32 LE, key, encoded state`, entry after entry.
//!
//! Why not a vector of `(key, state)` vectors in the archive: building one meant two heap
//! allocations per key on export and a validated pair of relative pointers per key on import,
//! which was most of what moving or checkpointing a group of small states cost. Here export
//! appends to one buffer and import walks it, checking every length against what is left.

use crate::key::MAX_KEY_BYTES;
use crate::operator::ImportError;

/// Bytes in front of each entry.
pub const HEADER_BYTES: usize = 6;
/// What an entry takes for a short key and a small state (a word and its count): only sizes the
/// export buffer up front.
pub const TYPICAL_ENTRY_BYTES: usize = 32;

const _: () = assert!(MAX_KEY_BYTES <= u16::MAX as usize);

/// Appends the entry of `key` to `out`, its state written by `encode_state` (which appends).
#[inline]
pub fn push(out: &mut Vec<u8>, key: &[u8], encode_state: impl FnOnce(&mut Vec<u8>)) {
    debug_assert!(
        key.len() <= MAX_KEY_BYTES,
        "a state key is at most {MAX_KEY_BYTES} bytes"
    );
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    let state_len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(key);
    let state_at = out.len();
    encode_state(out);
    let state_len = u32::try_from(out.len() - state_at).expect("a state under 4 GiB");
    out[state_len_at..state_len_at + 4].copy_from_slice(&state_len.to_le_bytes());
}

/// The state length that marks a deleted key in a changes archive (`runtime/ahead.rs`); a
/// whole archive never holds it (no state is 4 GiB), and [`Entries::next_entry`] refuses it.
pub const DELETED: u32 = u32::MAX;

/// Appends the entry of `key` as deleted (a changes archive's: its state is gone).
pub fn push_deleted(out: &mut Vec<u8>, key: &[u8]) {
    debug_assert!(key.len() <= MAX_KEY_BYTES);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&DELETED.to_le_bytes());
    out.extend_from_slice(key);
}

/// Walks the entries of untrusted bytes.
pub struct Entries<'a> {
    rest: &'a [u8],
}

impl<'a> Entries<'a> {
    /// The entries in `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Entries { rest: bytes }
    }

    /// The next entry's key and encoded state, or why the bytes do not hold one.
    #[inline]
    pub fn next_entry(&mut self) -> Result<(&'a [u8], &'a [u8]), ImportError> {
        let Some((header, rest)) = self.rest.split_first_chunk::<HEADER_BYTES>() else {
            return Err(truncated(self.rest.len()));
        };
        let key_len = usize::from(u16::from_le_bytes([header[0], header[1]]));
        let state_len = u32::from_le_bytes([header[2], header[3], header[4], header[5]]) as usize;
        if key_len > MAX_KEY_BYTES {
            return Err(ImportError::Archive(format!(
                "a state key of {key_len} bytes (at most {MAX_KEY_BYTES})"
            )));
        }
        if rest.len() < key_len || rest.len() - key_len < state_len {
            return Err(truncated(self.rest.len()));
        }
        let (key, rest) = rest.split_at(key_len);
        let (state, rest) = rest.split_at(state_len);
        self.rest = rest;
        Ok((key, state))
    }

    /// The next entry of a changes archive: its key, and its encoded state or `None` for a
    /// deleted key.
    pub fn next_change(&mut self) -> Result<(&'a [u8], Option<&'a [u8]>), ImportError> {
        if let Some((header, rest)) = self.rest.split_first_chunk::<HEADER_BYTES>()
            && u32::from_le_bytes([header[2], header[3], header[4], header[5]]) == DELETED
        {
            let key_len = usize::from(u16::from_le_bytes([header[0], header[1]]));
            if key_len > MAX_KEY_BYTES || rest.len() < key_len {
                return Err(truncated(self.rest.len()));
            }
            let (key, rest) = rest.split_at(key_len);
            self.rest = rest;
            return Ok((key, None));
        }
        self.next_entry().map(|(k, s)| (k, Some(s)))
    }

    /// Checks that every byte was an entry.
    pub fn finish(self) -> Result<(), ImportError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(ImportError::Archive(format!(
                "{} bytes after the last state entry",
                self.rest.len()
            )))
        }
    }
}

#[cold]
fn truncated(left_bytes: usize) -> ImportError {
    ImportError::Archive(format!(
        "a state entry cut short ({left_bytes} bytes left for it)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<u8> {
        let mut out = Vec::new();
        push(&mut out, b"apple", |o| o.extend_from_slice(&[1, 2, 3]));
        push(&mut out, b"", |_| {});
        out
    }

    #[test]
    fn entries_read_back_as_written() {
        let bytes = two();
        let mut walk = Entries::new(&bytes);
        assert_eq!(
            walk.next_entry().unwrap(),
            (&b"apple"[..], &[1u8, 2, 3][..])
        );
        assert_eq!(walk.next_entry().unwrap(), (&b""[..], &[][..]));
        walk.finish().unwrap();
    }

    #[test]
    fn every_cut_and_every_extra_byte_is_an_error() {
        let bytes = two();
        for cut in 0..bytes.len() {
            let mut walk = Entries::new(&bytes[..cut]);
            let read = walk.next_entry().and_then(|_| walk.next_entry());
            assert!(
                read.is_err(),
                "{cut} of {} bytes read as two entries",
                bytes.len()
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let mut walk = Entries::new(&longer);
        walk.next_entry().unwrap();
        walk.next_entry().unwrap();
        assert!(walk.finish().is_err());
    }

    #[test]
    fn a_key_longer_than_keys_can_be_is_refused() {
        let mut bytes = ((MAX_KEY_BYTES + 1) as u16).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        bytes.resize(bytes.len() + MAX_KEY_BYTES + 1, 7);
        let err = Entries::new(&bytes).next_entry().unwrap_err();
        assert!(err.to_string().contains("state key of 1025 bytes"), "{err}");
    }
}
