//! The text line a sink writes for one output emission.
//!
//! Outputs leave the app as bytes in the app's own encoding (a count as `u64` LE, a key as its
//! canonical bytes). A reader outside the system needs text: one JSON object per line,
//!
//! ```text
//! {"operator":"count","key":"the","value":"42","seq":41}
//! ```
//!
//! where `key` and `value` are the operator kind's own text form of the output
//! ([`crate::Operator::output_text`]), or `key_b64`/`value_b64` (standard base64, padded) when
//! the kind has none, and `seq` numbers the outputs of one operator for one key in emission
//! order, from 0 (see [`crate::OperatorInstance::track_output_seq`] for where it is kept). JSON
//! lines because every language reads them, a line is self-contained (a reader can merge the
//! files of several workers), and `seq` lets it order a key's outputs across files.

use std::io::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Text forms of one output's key and value, reused between outputs (no allocation once they
/// have grown).
#[derive(Debug, Default)]
pub struct OutputText {
    /// The key as text.
    pub key: String,
    /// The value as text.
    pub value: String,
}

impl OutputText {
    /// Empties both strings, keeping their capacity.
    pub fn clear(&mut self) {
        self.key.clear();
        self.value.clear();
    }
}

/// Appends one line (with its `\n`) for an output of operator `operator` to `line`: `text`
/// holds the kind's text form, or `None` to write `key`/`value` in base64.
pub fn write_line(
    line: &mut Vec<u8>,
    operator: &str,
    key: &[u8],
    value: &[u8],
    text: Option<&OutputText>,
    seq: u64,
) {
    line.extend_from_slice(b"{\"operator\":");
    push_json_str(line, operator);
    match text {
        Some(t) => {
            line.extend_from_slice(b",\"key\":");
            push_json_str(line, &t.key);
            line.extend_from_slice(b",\"value\":");
            push_json_str(line, &t.value);
        }
        None => {
            line.extend_from_slice(b",\"key_b64\":\"");
            push_b64(line, key);
            line.extend_from_slice(b"\",\"value_b64\":\"");
            push_b64(line, value);
            line.push(b'"');
        }
    }
    // Writing into a Vec cannot fail.
    let _ = writeln!(line, ",\"seq\":{seq}}}");
}

/// A JSON string literal (quotes and escapes; control characters and line breaks escaped, so a
/// line never breaks inside a value).
fn push_json_str(line: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *line, s);
}

fn push_b64(line: &mut Vec<u8>, bytes: &[u8]) {
    let start = line.len();
    line.resize(
        start + base64::encoded_len(bytes.len(), true).unwrap_or(0),
        0,
    );
    let n = STANDARD
        .encode_slice(bytes, &mut line[start..])
        .expect("the slice has the encoded length");
    line.truncate(start + n);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &[u8]) -> serde_json::Value {
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn a_text_line_is_one_json_object() {
        let mut line = Vec::new();
        let text = OutputText {
            key: "a \"quoted\"\nword".into(),
            value: "7".into(),
        };
        write_line(&mut line, "count", b"", b"", Some(&text), 6);
        let v = parse(&line);
        assert_eq!(v["operator"], "count");
        assert_eq!(v["key"], "a \"quoted\"\nword");
        assert_eq!(v["value"], "7");
        assert_eq!(v["seq"], 6);
    }

    #[test]
    fn without_a_text_form_the_bytes_are_base64() {
        let mut line = Vec::new();
        write_line(&mut line, "sink", &[0, 255, 10], b"hi", None, u64::MAX);
        let v = parse(&line);
        assert_eq!(v["key_b64"], STANDARD.encode([0u8, 255, 10]));
        assert_eq!(v["value_b64"], "aGk=");
        assert_eq!(v["seq"], u64::MAX);
        assert!(v.get("key").is_none());
    }
}
