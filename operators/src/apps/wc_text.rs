//! WC-TEXT — word count over raw text lines.
//!
//! WC's `split` takes sentences of lowercase letters and spaces, which is what its generator
//! makes but not what a file of real text holds. `text_split` normalises a raw line first
//! (lowercase; anything that is not a letter separates words: punctuation, digits, apostrophes,
//! hyphens), so `wc-text` counts the words of any UTF-8 text. Its generator writes WC's
//! sentences as prose (capitals, commas, a full stop, a quotation), so for the same seed
//! `wc-text` counts exactly the words `wc` counts — which makes the oracle of one a check of
//! the other.

use crate::emitter::Out;
use crate::generate::Generator;
use crate::operator::{Malformed, Operator};
use crate::spec::{AppDef, KindInfo, Registry};

use super::wc::WcGenerator;

/// Most words `text_split` accepts in one line (a limit on fan-out).
pub const LINE_WORDS_MAX: usize = 4096;

/// The WC-TEXT app: `split` (`text_split`) → `count` (`wc_count`).
pub fn def() -> AppDef {
    let mut app = super::app(
        "wc-text",
        "word count over raw text: normalise and split lines into words, count each word",
        vec![
            super::op("split", "text_split", &["count"]),
            super::op("count", "wc_count", &[]),
        ],
    );
    app.generator = "wc-text".into();
    app
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "text_split",
        KindInfo::stateless(
            "raw UTF-8 line → lowercase words (split on anything that is not a letter), one request per word keyed by the word",
            "line id",
        ),
        |_| Ok(TextSplit::default()),
    );
}

/// Splits a raw line of UTF-8 text into lowercase words (maximal runs of letters, as
/// `char::is_alphabetic` says), one request per word keyed by the word's UTF-8 bytes, with an
/// empty payload. A line with no letters emits nothing; a line that is not UTF-8 is malformed.
#[derive(Default)]
pub struct TextSplit {
    word: String,
}

impl Operator for TextSplit {
    type State = ();
    fn process(
        &mut self,
        _key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        let line = std::str::from_utf8(payload).map_err(|_| Malformed::new("line is not UTF-8"))?;
        // Validate before emitting: a line with too many words emits nothing.
        let words = line
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| !w.is_empty())
            .count();
        if words > LINE_WORDS_MAX {
            return Err(Malformed::new("line has too many words"));
        }
        for word in line
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| !w.is_empty())
        {
            self.word.clear();
            self.word.extend(word.chars().flat_map(char::to_lowercase));
            out.emit(self.word.as_bytes(), &[]);
        }
        Ok(())
    }
}

/// WC-TEXT input: WC's sentence `i` (same key) written as prose.
pub struct WcTextGenerator {
    wc: WcGenerator,
}

impl WcTextGenerator {
    /// The generator for `seed` (the same words as WC's for `seed`).
    pub fn new(seed: u64) -> Self {
        WcTextGenerator {
            wc: WcGenerator::new(seed),
        }
    }
}

/// Writes the lowercase, space-separated `sentence` as prose into `out`: the first letter a
/// capital, the third word quoted and in capitals, a comma after the fifth word, a number after
/// the seventh (digits are not letters: no word), and a full stop or question mark at the end.
fn prose(i: u64, sentence: &[u8], out: &mut Vec<u8>) {
    for (n, word) in sentence.split(|&b| b == b' ').enumerate() {
        if n > 0 {
            out.push(b' ');
        }
        match n {
            0 => {
                out.extend(word.iter().take(1).map(u8::to_ascii_uppercase));
                out.extend_from_slice(word.get(1..).unwrap_or_default());
            }
            2 => {
                out.push(b'"');
                out.extend(word.iter().map(u8::to_ascii_uppercase));
                out.push(b'"');
            }
            _ => out.extend_from_slice(word),
        }
        match n {
            4 => out.push(b','),
            6 => out.extend_from_slice(format!(" {}-{}", i % 97, i % 13).as_bytes()),
            _ => {}
        }
    }
    out.push(if i % 5 == 0 { b'?' } else { b'.' });
}

impl Generator for WcTextGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        let mut sentence = Vec::new();
        self.wc.record_into(i, key, &mut sentence);
        payload.clear();
        prose(i, &sentence, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Emitter;

    fn words(line: &[u8]) -> Result<Vec<String>, Malformed> {
        let mut e = Emitter::new();
        let succ = [1u16];
        TextSplit::default().process(b"k", line, &mut (), &mut Out::new(&mut e, &succ))?;
        Ok(e.iter()
            .map(|x| String::from_utf8(x.key.to_vec()).unwrap())
            .collect())
    }

    #[test]
    fn text_is_lowercased_and_split_on_anything_not_a_letter() {
        assert_eq!(
            words("Don't STOP—the Café's 3rd   door, ok?".as_bytes()).unwrap(),
            ["don", "t", "stop", "the", "café", "s", "rd", "door", "ok"]
        );
        assert_eq!(words(b"1, 2; 3!").unwrap(), Vec::<String>::new());
        assert_eq!(
            words(&[b'a', 0xff]).unwrap_err().reason,
            "line is not UTF-8"
        );
    }

    #[test]
    fn wc_text_counts_what_wc_counts() {
        let (wc, text) = (
            super::super::builtin("wc"),
            super::super::builtin("wc-text"),
        );
        let (a, b) = (
            crate::oracle::run(&wc.unwrap(), 300, 3),
            crate::oracle::run(&text.unwrap(), 300, 3),
        );
        assert_eq!(a.operators["count"], b.operators["count"]);
        assert_eq!(b.processed["count"], 3000);
    }

    #[test]
    fn the_prose_has_the_words_of_the_wc_sentence() {
        let (wc, text) = (WcGenerator::new(7), WcTextGenerator::new(7));
        for i in 0..50 {
            let (k1, sentence) = wc.record(i);
            let (k2, line) = text.record(i);
            assert_eq!(k1, k2);
            assert_ne!(sentence, line);
            let expected: Vec<String> = String::from_utf8(sentence)
                .unwrap()
                .split(' ')
                .map(str::to_owned)
                .collect();
            assert_eq!(words(&line).unwrap(), expected);
        }
    }
}
