//! Keys, their canonical byte encoding, their hash and their key group.
//!
//! Every component of the system that routes a request (the ingress, an executor emitting a
//! chained request, the planner moving key groups) must agree bit for bit on which key group a
//! key belongs to, on every machine and in every version. So the hash is specified here, not
//! borrowed from a `Hasher` whose output may change between releases or processes (ahash,
//! foldhash, std's SipHash with random keys):
//!
//! * **Encoding.** An integer key is its little-endian bytes at its natural width (`u32` → 4
//!   bytes, `u64` → 8 bytes). A string key is its UTF-8 bytes, unprefixed. A composite key is the
//!   concatenation of its components, each preceded by its length as a `u32` little-endian, so
//!   `("ab", "c")` and `("a", "bc")` differ. The test vectors in this module pin the encoding.
//! * **Hash.** [`key_hash`] is xxh3-64 with the seed [`KEY_HASH_SEED`].
//! * **Key group.** [`key_group`] is `hash % KEY_GROUPS`, with [`KEY_GROUPS`] = 1024 (as Flink's
//!   default maximum parallelism): fine enough to spread load over tens of executors, coarse
//!   enough that a routing table of every (operator, key group) stays a few KiB.

/// Number of key groups of every operator. A key group is the unit of routing and of state
/// migration. Changing it changes every routing table and every exported state: it is a
/// constant of the wire format.
pub const KEY_GROUPS: u16 = 1024;

/// The longest key a request may carry (a constant of the data plane's frame format): an
/// operator that emits a longer one has its request counted malformed.
pub const MAX_KEY_BYTES: usize = 1024;

/// Seed of [`key_hash`]: the ASCII bytes `"CLASPKEY"` read as a little-endian `u64`.
pub const KEY_HASH_SEED: u64 = u64::from_le_bytes(*b"CLASPKEY");

/// The hash of a canonically encoded key: xxh3-64 with [`KEY_HASH_SEED`].
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, KEY_HASH_SEED)
}

/// The key group of a key hash: `hash % KEY_GROUPS`, in `0..KEY_GROUPS`.
#[inline]
pub fn key_group(hash: u64) -> u16 {
    // The remainder is < KEY_GROUPS ≤ u16::MAX, so the cast is exact.
    (hash % u64::from(KEY_GROUPS)) as u16
}

/// The key group of a canonically encoded key.
#[inline]
pub fn key_group_of(key: &[u8]) -> u16 {
    key_group(key_hash(key))
}

/// Canonical encoding of a `u64` key: 8 bytes little-endian.
#[inline]
pub fn encode_u64(value: u64) -> [u8; 8] {
    value.to_le_bytes()
}

/// Canonical encoding of a `u32` key: 4 bytes little-endian.
#[inline]
pub fn encode_u32(value: u32) -> [u8; 4] {
    value.to_le_bytes()
}

/// Appends one component of a composite key to `out`: its length (`u32` LE), then its bytes.
/// Call it once per component, in order, on an empty (or cleared) buffer.
#[inline]
pub fn push_component(out: &mut Vec<u8>, component: &[u8]) {
    let len_bytes = u32::try_from(component.len()).expect("a key component is shorter than 4 GiB");
    out.extend_from_slice(&len_bytes.to_le_bytes());
    out.extend_from_slice(component);
}

/// Writes the canonical encoding of the composite key `components` into `out` (cleared first).
pub fn encode_composite(out: &mut Vec<u8>, components: &[&[u8]]) {
    out.clear();
    for c in components {
        push_component(out, c);
    }
}

/// Splits a composite key back into its components; `None` if `key` is not a well-formed
/// composite encoding.
pub fn decode_composite(mut key: &[u8]) -> Option<Vec<&[u8]>> {
    let mut parts = Vec::new();
    while !key.is_empty() {
        let (len, rest) = key.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        let (part, rest) = rest.split_at(len);
        parts.push(part);
        key = rest;
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test vectors: if one of these changes, every routing table and exported state changes.
    #[test]
    fn encoding_vectors() {
        assert_eq!(encode_u64(1), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(encode_u64(0x0102_0304_0506_0708), [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(encode_u32(0xdead_beef), [0xef, 0xbe, 0xad, 0xde]);
        let mut k = Vec::new();
        encode_composite(&mut k, &[b"ab", b"c"]);
        assert_eq!(k, [2, 0, 0, 0, b'a', b'b', 1, 0, 0, 0, b'c']);
        let mut k2 = Vec::new();
        encode_composite(&mut k2, &[b"a", b"bc"]);
        assert_ne!(k, k2);
        assert_eq!(decode_composite(&k).unwrap(), vec![&b"ab"[..], &b"c"[..]]);
        assert_eq!(decode_composite(&[5, 0, 0, 0, 1]), None);
    }

    #[test]
    fn hash_vectors() {
        assert_eq!(KEY_HASH_SEED, 0x5945_4b50_5341_4c43);
        // Pinned: xxh3-64 with KEY_HASH_SEED.
        assert_eq!(key_hash(b""), HASH_EMPTY);
        assert_eq!(key_hash(b"the"), HASH_THE);
        assert_eq!(key_hash(&encode_u64(42)), HASH_U64_42);
        assert_eq!(key_group(key_hash(b"the")), (HASH_THE % 1024) as u16);
        assert!(key_group(u64::MAX) < KEY_GROUPS);
    }

    const HASH_EMPTY: u64 = 0x8f02_cbdb_0cd5_c629;
    const HASH_THE: u64 = 0x1674_7985_7397_334a;
    const HASH_U64_42: u64 = 0x0cd3_76dc_513b_8a90;
}
