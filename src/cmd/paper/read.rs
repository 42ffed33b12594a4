//! Reading back what the runs wrote: the simulator's summary JSON and the live experiments'
//! CSVs. A file that is missing or malformed gives an error naming it, which the figure's row
//! then shows instead of a number.

use serde_json::Value;
use std::path::Path;

/// A JSON file.
pub fn json(path: &Path) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A number at `v[k0][k1]…`, or an error naming the path.
pub fn num(v: &Value, keys: &[&str]) -> Result<f64, String> {
    keys.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number at {}", keys.join(".")))
}

/// The numbers of an array at `v[k0][k1]…`.
pub fn nums(v: &Value, keys: &[&str]) -> Result<Vec<f64>, String> {
    keys.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .ok_or_else(|| format!("no array at {}", keys.join(".")))
}

/// A CSV file written by `clasp experiment` (RFC 4180 quoting, no newline inside a field): its
/// rows as maps from the header's names to the cells.
pub fn csv(path: &Path) -> Result<Vec<std::collections::BTreeMap<String, String>>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut lines = text.lines();
    let header = split(lines.next().unwrap_or(""));
    Ok(lines
        .filter(|l| !l.is_empty())
        .map(|l| header.iter().cloned().zip(split(l)).collect())
        .collect())
}

/// One CSV line's fields.
fn split(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// The leading number of a cell (`41699 [39491, 43209]` → 41699); NaN when there is none.
pub fn lead(cell: Option<&String>) -> f64 {
    cell.and_then(|c| c.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_keep_their_commas() {
        assert_eq!(
            split(r#"burst,clasp,"41699 [39491, 43209]","a ""b""""#),
            vec!["burst", "clasp", "41699 [39491, 43209]", r#"a "b""#]
        );
        assert_eq!(lead(Some(&"41699 [39491, 43209]".to_owned())), 41699.0);
        assert!(lead(Some(&"-".to_owned())).is_nan());
    }
}
