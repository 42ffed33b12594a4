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
//! - **The request's own hash.** A key is hashed as the data plane hashed it to route the
//!   request ([`key_hash`]: one xxh3-64 call, fixed seed, so the map's layout never depends on
//!   a random key), and the map's hash is [`map_hash`] of that. So an executor, which has the
//!   key hash in the request's header, finds where a lookup will start without the key.
//! - **Prefetched.** An executor reads a batch of frames in two passes; in the first it
//!   prefetches the [`lookup_lines`] of each request (the bucket's control bytes and its first
//!   slot), so the cache misses of a batch's lookups overlap instead of each request waiting
//!   for its own in turn: with 42 000 words the count's maps hold a few MiB, more than this
//!   core's L2 cache. The table is hashbrown's, whose raw layout (control bytes at
//!   `data_end`, slot `i` just below it at `data_end - i - 1`) is what [`lookup_lines`] reads;
//!   `std`'s map does not expose it.

use std::hash::{BuildHasher, Hasher};
use std::ptr::NonNull;

use smallvec::SmallVec;

use crate::key::{KEY_GROUPS, key_hash};

/// Keys up to this many bytes are stored inside the map's slot.
pub const INLINE_KEY_BYTES: usize = 16;

/// A key as the map stores it (compares, hashes and sorts as its bytes).
pub type StateKey = SmallVec<[u8; INLINE_KEY_BYTES]>;

/// One key group's states.
pub type Group<S> = hashbrown::HashMap<StateKey, S, FromKeyHash>;

/// Builds [`KeyHasher`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct FromKeyHash;

impl BuildHasher for FromKeyHash {
    type Hasher = KeyHasher;
    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

/// Hashes a key's bytes as [`key_hash`] does (the length prefix is ignored: xxh3 covers it),
/// and finishes with [`map_hash`] of that. Only for keys that write their bytes in one call,
/// as a byte slice (and so a [`StateKey`]) does: a second `write` replaces the first.
#[derive(Clone, Copy, Debug)]
pub struct KeyHasher(u64);

/// An odd constant (2^64 / φ) that spreads the bits of a key hash.
const MIX: u64 = 0x9E37_79B9_7F4A_7C15;
/// The low bits of a key hash that pick its key group: the same for every key of a map.
const GROUP_BITS: u32 = KEY_GROUPS.trailing_zeros();
const _: () = assert!(KEY_GROUPS.is_power_of_two());

/// The map's hash of a key whose [`key_hash`] is `hash`: the bits that do not pick the key
/// group, spread by a multiply so both the table's bucket (low bits) and its tag (high bits)
/// vary between keys of one group.
#[inline]
pub fn map_hash(hash: u64) -> u64 {
    (hash >> GROUP_BITS).wrapping_mul(MIX)
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = key_hash(bytes);
    }

    #[inline]
    fn write_usize(&mut self, _len: usize) {}

    #[inline]
    fn finish(&self) -> u64 {
        map_hash(self.0)
    }
}

/// Whether the stored key `stored` is `key`. A key of up to [`INLINE_KEY_BYTES`] bytes is
/// compared as two overlapping words (or two overlapping halves of a word): slice equality
/// calls `memcmp`, whose call and length dispatch cost more than the compare for a word.
#[inline]
pub fn key_eq(stored: &StateKey, key: &[u8]) -> bool {
    let a: &[u8] = stored;
    let len = key.len();
    if a.len() != len {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4"));
    match len {
        8..=INLINE_KEY_BYTES => {
            word(a, 0) == word(key, 0) && word(a, len - 8) == word(key, len - 8)
        }
        4..8 => half(a, 0) == half(key, 0) && half(a, len - 4) == half(key, len - 4),
        _ => a == key,
    }
}

/// The lines a lookup of the key with [`key_hash`] `hash` in `group` starts from: its bucket's
/// control bytes and its first slot, for the caller to prefetch (`None`: an empty group, where
/// a lookup reads nothing). Addresses only; nothing is read.
#[inline]
pub fn lookup_lines<S>(group: &Group<S>, hash: u64) -> Option<(NonNull<u8>, NonNull<u8>)> {
    if group.is_empty() {
        return None;
    }
    let table = group.raw_table();
    let pos = (map_hash(hash) as usize) & (table.buckets() - 1);
    let end = table.data_end().as_ptr();
    // Control bytes start at `end`; slot `i` ends `i` slots below it. Both lie inside the
    // table's allocation (`pos` < buckets), so neither is null.
    let ctrl = NonNull::new(end.cast::<u8>().wrapping_add(pos))?;
    let slot = NonNull::new(end.wrapping_sub(pos + 1).cast::<u8>())?;
    Some((ctrl, slot))
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
    fn keys_of_one_key_group_spread_over_buckets_and_tags() {
        // Every key of a map shares the low bits of its key hash (its key group): the map's
        // hash must not, or all of them would probe from one bucket with one tag.
        let keys: Vec<Vec<u8>> = (0..1_000_000u32)
            .map(|i| format!("w{i}").into_bytes())
            .filter(|k| crate::key::key_group_of(k) == 5)
            .take(512)
            .collect();
        assert_eq!(keys.len(), 512);
        let distinct = |f: &dyn Fn(u64) -> u64| {
            let mut v: Vec<u64> = keys
                .iter()
                .map(|k| f(FromKeyHash.hash_one(&k[..])))
                .collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        assert!(distinct(&|h| h & 63) >= 56, "buckets of a 64-bucket table");
        assert!(distinct(&|h| h >> 57) >= 100, "tags (the top 7 bits)");
        let mut g: Group<u64> = Group::default();
        assert!(lookup_lines(&g, key_hash(&keys[0])).is_none());
        for (i, k) in keys.iter().enumerate() {
            g.insert(StateKey::from_slice(k), i as u64);
            let (ctrl, slot) = lookup_lines(&g, key_hash(k)).expect("a group with keys");
            let (ctrl, slot) = (ctrl.as_ptr().cast_const(), slot.as_ptr().cast_const());
            let table = g.raw_table();
            let start = table.data_end().as_ptr().cast::<u8>().cast_const();
            let data_bytes = table.buckets() * size_of::<(StateKey, u64)>();
            assert!(ctrl >= start && ctrl < start.wrapping_add(table.buckets()));
            assert!(slot < start && slot >= start.wrapping_sub(data_bytes));
        }
        assert!(
            keys.iter()
                .enumerate()
                .all(|(i, k)| g.get(&k[..]) == Some(&(i as u64)))
        );
    }

    #[test]
    fn keys_are_equal_exactly_when_their_bytes_are() {
        let keys: Vec<Vec<u8>> = (0..=INLINE_KEY_BYTES + 3)
            .flat_map(|len| {
                let base: Vec<u8> = (0..len as u8).map(|b| b'a' + b).collect();
                let mut v = vec![base.clone()];
                for at in 0..len {
                    let mut k = base.clone();
                    k[at] ^= 0x20;
                    v.push(k);
                }
                v
            })
            .collect();
        for a in &keys {
            let stored = StateKey::from_slice(a);
            for b in &keys {
                assert_eq!(key_eq(&stored, b), a == b, "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn the_hash_depends_on_length_and_bytes() {
        let h = |k: &[u8]| FromKeyHash.hash_one(k);
        assert_eq!(h(b"word"), h(b"word"));
        assert_ne!(h(b"word"), h(b"wore"));
        assert_ne!(h(b""), h(b"\0"));
    }
}
