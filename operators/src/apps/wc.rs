//! WC — Word Count (2 operators; DSPBench).
//!
//! `split` (stateless, routed by sentence id) turns a sentence into one request per word, keyed
//! by the word; `count` (keyed by word, order-free) counts and outputs `(word, count)`.

use std::fmt::Write as _;

use crate::emitter::Out;
use crate::generate::{Generator, RecordRng, Zipf, chacha_key};
use crate::key::encode_u64;
use crate::operator::{Malformed, Operator};
use crate::output_line::OutputText;
use crate::spec::{AppDef, Determinism, KindInfo, Registry};

use super::wc_words;

/// Words per generated sentence.
pub const SENTENCE_WORDS: usize = 10;
/// Vocabulary size (Zipf ranks). With exponent 1.0, ~40 000 distinct words have been seen after
/// 1 M words (100 000 sentences) and the vocabulary saturates at 42 000: at the paper's rates
/// (well above 10 000 words/s) the `count` state holds ~40 000 keys after 100 s, which is what
/// the migration experiment needs.
pub const VOCABULARY_WORDS: usize = 42_000;
/// Zipf exponent of word frequencies (natural text is close to 1).
pub const ZIPF_EXPONENT: f64 = 1.0;
/// Most words `split` accepts in one sentence (a limit on fan-out).
pub const SENTENCE_WORDS_MAX: usize = 1024;

/// The WC app.
pub fn def() -> AppDef {
    super::app(
        "wc",
        "word count: split sentences into words, count each word",
        vec![
            super::op("split", "wc_split", &["count"]),
            super::op("count", "wc_count", &[]),
        ],
    )
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "wc_split",
        KindInfo::stateless(
            "sentence → one request per word, keyed by the word",
            "sentence id",
        ),
        |_| Ok(Split),
    );
    r.register(
        "wc_count",
        KindInfo::keyed(
            "count per word; outputs (word, count)",
            "word",
            Determinism::OrderFree,
        ),
        |p| {
            Ok(Count {
                window_words: p.u64_in("window", 1, 1..=u64::from(u32::MAX))?,
            })
        },
    );
}

/// Splits a sentence of lowercase words (letters only, separated by single or multiple
/// spaces) into one request per word, keyed by the word's bytes, with an empty payload.
pub struct Split;

impl Operator for Split {
    type State = ();
    fn process(
        &mut self,
        _key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        // Validate the whole sentence first: a bad sentence emits nothing. Sentences of usual
        // length are checked and split eight bytes at a time (`wc_words.rs`).
        if payload.len() <= wc_words::SCAN_BYTES_MAX {
            let Some(spaces) = wc_words::scan(payload) else {
                return Err(not_lowercase());
            };
            // At most 128 words in 256 bytes: under `SENTENCE_WORDS_MAX`.
            const _: () = assert!(wc_words::SCAN_BYTES_MAX / 2 <= SENTENCE_WORDS_MAX);
            let words = wc_words::for_each_word(payload, &spaces, |word| out.emit(word, &[]));
            if words == 0 {
                return Err(Malformed::new("empty sentence"));
            }
            return Ok(());
        }
        // A fold without an early exit, so the compiler checks many bytes per instruction.
        let valid = payload
            .iter()
            .fold(true, |ok, &b| ok & (b.is_ascii_lowercase() | (b == b' ')));
        if !valid {
            return Err(not_lowercase());
        }
        let words = payload.split(|&b| b == b' ').filter(|w| !w.is_empty());
        let mut n = 0;
        for word in words {
            n += 1;
            if n > SENTENCE_WORDS_MAX {
                return Err(Malformed::new("sentence has too many words"));
            }
            out.emit(word, &[]);
        }
        if n == 0 {
            return Err(Malformed::new("empty sentence"));
        }
        Ok(())
    }
}

fn not_lowercase() -> Malformed {
    Malformed::new("sentence has a character that is not a lowercase letter")
}

/// Counts occurrences of each word (the key). Outputs `(word, count as u64 LE)` every
/// `window` occurrences of the word: a count window, 1 by default (DSPBench outputs every
/// update). Which counts are output does not depend on order, so this is order-free.
pub struct Count {
    /// Output every this many occurrences (≥ 1).
    pub window_words: u64,
}

impl Operator for Count {
    type State = u64;
    #[inline]
    fn process(
        &mut self,
        key: &[u8],
        _payload: &[u8],
        count: &mut u64,
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        *count += 1;
        // The default window of one skips the division (four tenths of this method's time).
        if self.window_words == 1 || *count % self.window_words == 0 {
            out.output(key, &count.to_le_bytes());
        }
        Ok(())
    }

    /// The word and its count in decimal.
    fn output_text(&self, key: &[u8], value: &[u8], text: &mut OutputText) -> bool {
        let (Ok(word), Ok(count)) = (std::str::from_utf8(key), <[u8; 8]>::try_from(value)) else {
            return false;
        };
        text.key.push_str(word);
        // Writing into a String cannot fail.
        let _ = write!(text.value, "{}", u64::from_le_bytes(count));
        true
    }
}

/// WC input: sentence `i` (key = `i` as `u64` LE) of ten Zipf-distributed words.
pub struct WcGenerator {
    key: [u8; 32],
    zipf: Zipf,
    /// Every word of the vocabulary ([`word_of_rank`]), back to back: spelling a word for
    /// each draw was a third of the generator's time, and the driver of `clasp run`
    /// generates its input on one thread.
    words: Vec<u8>,
    /// `words_end[rank]`: where that rank's word ends in `words` (it starts where the word
    /// before it ends).
    words_end: Vec<u32>,
}

impl WcGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut words = Vec::new();
        let words_end = (0..VOCABULARY_WORDS as u64)
            .map(|rank| {
                word_of_rank(rank, &mut words);
                u32::try_from(words.len()).expect("the vocabulary is under 4 GiB")
            })
            .collect();
        WcGenerator {
            key: chacha_key(seed, "wc"),
            zipf: Zipf::new(VOCABULARY_WORDS, ZIPF_EXPONENT),
            words,
            words_end,
        }
    }

    /// The word of `rank`, as [`word_of_rank`] spells it.
    #[inline]
    fn word(&self, rank: usize) -> &[u8] {
        let start = rank
            .checked_sub(1)
            .map_or(0, |r| self.words_end[r] as usize);
        &self.words[start..self.words_end[rank] as usize]
    }
}

/// The word of Zipf rank `rank`: distinct for distinct ranks. The first letter says how many
/// padding letters follow (0..=6, so word lengths vary like text); then come the padding
/// letters, then `rank + 1` as a bijective base-26 numeral in letters.
pub fn word_of_rank(rank: u64, out: &mut Vec<u8>) {
    let h = xxhash_rust::xxh3::xxh3_64(&rank.to_le_bytes());
    let pad = h % 7;
    out.push(b'a' + pad as u8);
    for j in 0..pad {
        out.push(b'a' + ((h >> (8 + 5 * j)) % 26) as u8);
    }
    let mut n = rank + 1;
    let start = out.len();
    while n > 0 {
        n -= 1;
        out.push(b'a' + (n % 26) as u8);
        n /= 26;
    }
    out[start..].reverse();
}

impl Generator for WcGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        key.extend_from_slice(&encode_u64(i));
        let mut rng = RecordRng::new(&self.key, i);
        for w in 0..SENTENCE_WORDS {
            if w > 0 {
                payload.push(b' ');
            }
            payload.extend_from_slice(self.word(self.zipf.sample(&mut rng)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::RecordRng;

    #[test]
    fn the_word_table_spells_every_sentence_as_word_of_rank_does() {
        let g = WcGenerator::new(11);
        let (mut key, mut payload, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..20_000 {
            g.record_into(i, &mut key, &mut payload);
            want.clear();
            let mut rng = RecordRng::new(&g.key, i);
            for w in 0..SENTENCE_WORDS {
                if w > 0 {
                    want.push(b' ');
                }
                word_of_rank(g.zipf.sample(&mut rng) as u64, &mut want);
            }
            assert_eq!(payload, want, "sentence {i}");
            assert_eq!(key, encode_u64(i));
        }
        for rank in [0, 1, 25, 26, 27, 701, 702, VOCABULARY_WORDS - 1] {
            let mut w = Vec::new();
            word_of_rank(rank as u64, &mut w);
            assert_eq!(g.word(rank), w, "rank {rank}");
        }
    }
}
