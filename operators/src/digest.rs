//! Order-independent digests of multisets: what the oracle and a distributed run compare.
//!
//! A [`Digest`] is the wrapping sum of 128-bit hashes of its items plus their count. Sums
//! commute, so the digest of a multiset does not depend on the order items were added, and two
//! digests combine by adding them: the data plane sums the digests of every executor of every
//! worker and compares the total with the oracle's. An XOR would cancel an item seen twice; a
//! sum does not, and the count catches the rest.
//!
//! Items are hashed with xxh3-128 under a seed that names their *domain* (the operator and what
//! is hashed: state, outputs or inputs), so equal bytes in different operators or domains do
//! not cancel or collide, and the per-operator digests of an app can be summed into one.

use serde::{Deserialize, Serialize};

/// What a digest covers; mixed into the item seed (see [`domain_seed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DigestDomain {
    /// Final state: one item per (key, state value) that is not the default.
    State,
    /// Sink outputs of an operator: one item per output.
    Output,
    /// Requests an operator processed (for racy operators): one item per (key, payload).
    Input,
}

/// The seed under which items of `operator`'s `domain` are hashed: xxh3-64 of the operator's
/// name with a per-domain seed.
pub fn domain_seed(operator: &str, domain: DigestDomain) -> u64 {
    let tag: &[u8; 8] = match domain {
        DigestDomain::State => b"dgSTATE.",
        DigestDomain::Output => b"dgOUTPUT",
        DigestDomain::Input => b"dgINPUT.",
    };
    xxhash_rust::xxh3::xxh3_64_with_seed(operator.as_bytes(), u64::from_le_bytes(*tag))
}

/// A multiset digest: wrapping sum of the items' 128-bit hashes, and the number of items.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Digest {
    /// Wrapping sum of xxh3-128 hashes of the items.
    pub sum: u128,
    /// Number of items.
    pub count: u64,
}

impl Digest {
    /// The digest of the empty multiset.
    pub const EMPTY: Digest = Digest { sum: 0, count: 0 };

    /// Adds one item given as a pre-hashed 128-bit value.
    #[inline]
    pub fn add_hash(&mut self, hash: u128) {
        self.sum = self.sum.wrapping_add(hash);
        self.count += 1;
    }

    /// Adds the item `(key, value)` hashed under `seed`. The key is length-prefixed so the
    /// boundary between key and value is part of the item.
    #[inline]
    pub fn add_keyed(&mut self, seed: u64, key: &[u8], value: &[u8], scratch: &mut Vec<u8>) {
        scratch.clear();
        scratch.extend_from_slice(&(key.len() as u64).to_le_bytes());
        scratch.extend_from_slice(key);
        scratch.extend_from_slice(value);
        self.add_hash(xxhash_rust::xxh3::xxh3_128_with_seed(scratch, seed));
    }

    /// Combines two digests: the digest of the union of their multisets.
    #[inline]
    pub fn combine(&mut self, other: &Digest) {
        self.sum = self.sum.wrapping_add(other.sum);
        self.count += other.count;
    }

    /// The sum of the digests (order does not matter).
    pub fn sum_of<'a>(digests: impl IntoIterator<Item = &'a Digest>) -> Digest {
        let mut d = Digest::EMPTY;
        for x in digests {
            d.combine(x);
        }
        d
    }

    /// 48 lower-case hex digits: the 128-bit sum, then the 64-bit count.
    pub fn to_hex(&self) -> String {
        format!("{:032x}{:016x}", self.sum, self.count)
    }

    /// Parses [`Digest::to_hex`]'s format.
    pub fn from_hex(hex: &str) -> Option<Digest> {
        if hex.len() != 48 || !hex.is_ascii() {
            return None;
        }
        let sum = u128::from_str_radix(&hex[..32], 16).ok()?;
        let count = u64::from_str_radix(&hex[32..], 16).ok()?;
        Some(Digest { sum, count })
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_independent_and_counts_duplicates() {
        let seed = domain_seed("op", DigestDomain::State);
        let mut s = Vec::new();
        let mut a = Digest::EMPTY;
        a.add_keyed(seed, b"k1", b"v1", &mut s);
        a.add_keyed(seed, b"k2", b"v2", &mut s);
        let mut b = Digest::EMPTY;
        b.add_keyed(seed, b"k2", b"v2", &mut s);
        b.add_keyed(seed, b"k1", b"v1", &mut s);
        assert_eq!(a, b);
        let mut twice = Digest::EMPTY;
        twice.add_keyed(seed, b"k1", b"v1", &mut s);
        twice.add_keyed(seed, b"k1", b"v1", &mut s);
        assert_ne!(twice, Digest::EMPTY);
        assert_eq!(twice.count, 2);
        let mut c = Digest::EMPTY;
        c.add_keyed(seed, b"k1v", b"1", &mut s);
        let mut d = Digest::EMPTY;
        d.add_keyed(seed, b"k1", b"v1", &mut s);
        assert_ne!(c, d, "the key boundary is part of the item");
        assert_eq!(Digest::from_hex(&a.to_hex()), Some(a));
        assert_ne!(
            domain_seed("op", DigestDomain::State),
            domain_seed("op", DigestDomain::Output)
        );
    }
}
