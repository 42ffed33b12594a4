//! Finding the words of a WC sentence eight bytes at a time.
//!
//! Why: `split` checked every byte of a sentence and then walked it again one byte at a time
//! looking for spaces. On WC's sentences (ten words, about 60 bytes) that byte walk was about a
//! third of the operator's time and the operator a sixth of an executor's. Here one pass over
//! eight-byte words both checks the bytes (each a lowercase ASCII letter or a space) and maps
//! the spaces into a bitmap; the words are then found by jumping from one space to the next
//! (`trailing_zeros`): a step per word instead of one per byte.
//!
//! The byte tests are SWAR (SIMD within a register) on `u64`s, so they need no target features
//! and no `unsafe`. Each is exact for bytes below 0x80 (no carry crosses a byte); a byte at or
//! above 0x80 makes the sentence invalid, whatever the other tests say about its neighbours.

/// Sentences of at most this many bytes take the word-at-a-time path ([`scan`]).
pub const SCAN_BYTES_MAX: usize = 256;

/// Spaces of a scanned sentence: bit `i % 64` of word `i / 64` is set iff byte `i` is a space.
pub type SpaceMap = [u64; SCAN_BYTES_MAX / 64];

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = !HIGH;
/// Gathers the high bit of each byte into the top byte (bit `56 + i` for byte `i`).
const GATHER: u64 = 0x0102_0408_1020_4080;

/// The bytes of `w` equal to `b`, as their high bits. Exact for every byte value: a byte of
/// `w ^ b` is zero iff adding 0x7f to its low seven bits, or-ed with it, leaves bit 7 clear.
#[inline(always)]
fn bytes_equal(w: u64, b: u8) -> u64 {
    let t = w ^ (ONES * u64::from(b));
    !(((t & LOW7) + LOW7) | t) & HIGH
}

/// The bytes of `w` in `lo..=hi`, as their high bits; exact when every byte is below 0x80
/// (then `b + (0x80 - lo)` and `b + (0x7f - hi)` stay inside their byte).
#[inline(always)]
fn bytes_in(w: u64, lo: u8, hi: u8) -> u64 {
    debug_assert!(lo <= hi && hi < 0x80);
    // Wrapping: with a byte at or above 0x80 (an invalid sentence) the sums may carry out.
    let at_least_lo = w.wrapping_add(ONES * u64::from(0x80 - lo)) & HIGH;
    let above_hi = w.wrapping_add(ONES * u64::from(0x7f - hi)) & HIGH;
    at_least_lo & !above_hi
}

/// Eight high bits (one per byte) as an 8-bit mask, bit `i` for byte `i`.
#[inline(always)]
fn gather(high_bits: u64) -> u64 {
    ((high_bits >> 7).wrapping_mul(GATHER)) >> 56
}

/// One eight-byte word: (whether some byte is neither a lowercase letter nor a space, the
/// spaces as an 8-bit mask).
#[inline(always)]
fn classify(w: u64) -> (bool, u64) {
    let spaces = bytes_equal(w, b' ');
    let letters = bytes_in(w, b'a', b'z');
    let bad = (w & HIGH) != 0 || (spaces | letters) != HIGH;
    (bad, gather(spaces))
}

/// Checks `sentence` (at most [`SCAN_BYTES_MAX`] bytes) and maps its spaces: `None` if a byte
/// is neither a lowercase ASCII letter nor a space.
#[inline]
pub fn scan(sentence: &[u8]) -> Option<SpaceMap> {
    assert!(
        sentence.len() <= SCAN_BYTES_MAX,
        "a sentence too long to scan"
    );
    let mut spaces: SpaceMap = [0; SCAN_BYTES_MAX / 64];
    let mut bad = false;
    let mut chunks = sentence.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let (b, mask) = classify(u64::from_le_bytes(bytes));
        bad |= b;
        // `at` is a multiple of 8, so the eight bits never straddle two words.
        spaces[at / 64] |= mask << (at % 64);
        at += 8;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        // Padded with spaces (valid bytes), whose bits are then dropped: a space past the end
        // must not end a word there.
        let mut bytes = [b' '; 8];
        bytes[..rest.len()].copy_from_slice(rest);
        let (b, mask) = classify(u64::from_le_bytes(bytes));
        bad |= b;
        spaces[at / 64] |= (mask & ((1 << rest.len()) - 1)) << (at % 64);
    }
    (!bad).then_some(spaces)
}

/// Calls `f` with each word of a scanned `sentence` in order (runs of spaces separate words;
/// none is empty); returns how many.
#[inline]
pub fn for_each_word(sentence: &[u8], spaces: &SpaceMap, mut f: impl FnMut(&[u8])) -> usize {
    let (mut start, mut words) = (0, 0);
    for (k, &word) in spaces.iter().enumerate().take(sentence.len().div_ceil(64)) {
        let mut m = word;
        while m != 0 {
            let space = k * 64 + m.trailing_zeros() as usize;
            if space > start {
                f(&sentence[start..space]);
                words += 1;
            }
            start = space + 1;
            m &= m - 1;
        }
    }
    if start < sentence.len() {
        f(&sentence[start..]);
        words += 1;
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte-at-a-time reference: valid, and the words.
    fn reference(s: &[u8]) -> Option<Vec<Vec<u8>>> {
        let valid = s.iter().all(|&b| b.is_ascii_lowercase() || b == b' ');
        valid.then(|| {
            s.split(|&b| b == b' ')
                .filter(|w| !w.is_empty())
                .map(<[u8]>::to_vec)
                .collect()
        })
    }

    fn scanned(s: &[u8]) -> Option<Vec<Vec<u8>>> {
        let spaces = scan(s)?;
        let mut words = Vec::new();
        let n = for_each_word(s, &spaces, |w| words.push(w.to_vec()));
        assert_eq!(n, words.len());
        Some(words)
    }

    #[test]
    fn every_byte_value_is_classified_as_the_reference_does() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut s = *b"abcdefgh";
                s[at] = b;
                assert_eq!(scanned(&s), reference(&s), "byte {b:#04x} at {at}");
                assert_eq!(scanned(&s[..at + 1]), reference(&s[..at + 1]));
            }
        }
    }

    #[test]
    fn words_at_the_edges_of_words_and_blocks() {
        for len in 0..=SCAN_BYTES_MAX {
            let s: Vec<u8> = (0..len)
                .map(|i| {
                    if i % 7 == 3 || i % 64 == 63 {
                        b' '
                    } else {
                        b'q'
                    }
                })
                .collect();
            assert_eq!(scanned(&s), reference(&s), "length {len}");
        }
        assert_eq!(scanned(b""), Some(vec![]));
        assert_eq!(scanned(b"   "), Some(vec![]));
        assert_eq!(scanned(b"a"), Some(vec![b"a".to_vec()]));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matches_the_byte_at_a_time_reference(
            s in proptest::collection::vec(
                prop_oneof![8 => b'a'..=b'z', 3 => Just(b' '), 1 => any::<u8>()],
                0..=SCAN_BYTES_MAX,
            )
        ) {
            prop_assert_eq!(scanned(&s), reference(&s));
        }
    }
}
