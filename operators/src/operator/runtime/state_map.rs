//! The map that holds one key group's states, shaped for the per-request lookup.
//!
//! Every request of a keyed operator looks its key up here (WC's `count`: once per word), so
//! the map decides much of an operator's per-request cost:
//!
//! - **Keys inline.** A key of up to [`INLINE_KEY_BYTES`] bytes (a word, an integer id) is
//!   stored in the map's own slot, so comparing the probed slot's key with the request's reads
//!   memory the probe has just loaded instead of following a pointer to a heap allocation of
//!   its own (one cache miss less per lookup, and no allocation per new key); longer keys go
//!   to the heap as before.
//! - **One-shot hash.** A slice is hashed as its length then its bytes; [`OneShotXxh3`]
//!   hashes the bytes with one call of xxh3-64 seeded by the length, where the streaming
//!   xxh3 `Hasher` buffers and finalises a 64-byte block state for a 10-byte word. Fixed
//!   seeds, as before: the map's layout never depends on a random key.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use smallvec::SmallVec;

/// Keys up to this many bytes are stored inside the map's slot.
pub const INLINE_KEY_BYTES: usize = 16;

/// A key as the map stores it (compares, hashes and sorts as its bytes).
pub type StateKey = SmallVec<[u8; INLINE_KEY_BYTES]>;

/// One key group's states.
pub type Group<S> = HashMap<StateKey, S, OneShotXxh3>;

/// Builds [`OneShotHasher`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct OneShotXxh3;

impl BuildHasher for OneShotXxh3 {
    type Hasher = OneShotHasher;
    #[inline]
    fn build_hasher(&self) -> OneShotHasher {
        OneShotHasher(0)
    }
}

/// Each `write` hashes its bytes with xxh3-64 seeded by everything written before; integers
/// (a slice's length) are mixed into that seed by a multiply.
#[derive(Clone, Copy, Debug)]
pub struct OneShotHasher(u64);

/// An odd constant (2^64 / φ) that spreads an integer over the seed's bits.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for OneShotHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(MIX);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(MIX);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_short_and_long_are_found_by_their_bytes() {
        let mut g: Group<u64> = Group::default();
        let long = [b'x'; INLINE_KEY_BYTES * 3];
        for (i, k) in [&b""[..], b"a", b"ab", b"ba", &long[..]].iter().enumerate() {
            g.insert(StateKey::from_slice(k), i as u64);
        }
        assert_eq!(g.get(&b"ab"[..]), Some(&2));
        assert_eq!(g.get(&b"ba"[..]), Some(&3));
        assert_eq!(g.get(&long[..]), Some(&4));
        assert_eq!(g.get(&b""[..]), Some(&0));
        assert_eq!(g.get(&b"abc"[..]), None);
        assert!(
            !g.keys()
                .next()
                .is_some_and(|k| k.spilled() && k.len() <= INLINE_KEY_BYTES)
        );
    }

    #[test]
    fn the_hash_depends_on_length_and_bytes() {
        let h = |k: &[u8]| OneShotXxh3.hash_one(k);
        assert_eq!(h(b"word"), h(b"word"));
        assert_ne!(h(b"word"), h(b"wore"));
        assert_ne!(h(b""), h(b"\0"));
    }
}
