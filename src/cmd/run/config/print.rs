//! `--print-config`: the effective settings as a run file, every key with where its value came
//! from as a comment. Given back as `--config`, the file yields the same settings: numbers are
//! written as TOML numbers only when they read back as the same string, and keys without a
//! value are comments.

use super::keys::{Key, Kind};
use super::{Setting, Source};
use std::io::Write as _;

/// Writes the settings of `clasp COMMAND` to stdout.
pub fn print(command: &str, keys: &[Key], settings: &[Setting]) -> anyhow::Result<()> {
    let mut out = crate::cmd::output::stdout();
    writeln!(
        out,
        "# The effective settings of `clasp {command}`, each with where it came from."
    )?;
    writeln!(
        out,
        "# Given as `clasp {command} --config FILE`, this file yields the same settings."
    )?;
    for (key, setting) in keys.iter().zip(settings) {
        writeln!(out, "{}", line(key, setting))?;
    }
    out.finish()
}

/// One key's line: `name = value  # source`, or a comment when it has no value.
fn line(key: &Key, setting: &Setting) -> String {
    let mut origin = match &setting.source {
        Source::CommandLine => "command line".to_owned(),
        Source::Environment => "environment".to_owned(),
        Source::File(path, what) => format!("{what} {}", path.display()),
        Source::Default => "default".to_owned(),
        // Not "no default": some options default in code (`--help` says to what).
        Source::Unset if key.hidden && key.name == "fault" => {
            "unset: a testing option, see docs/recovery.md".to_owned()
        }
        // Hidden from this command's --help (`clasp planner`'s options about started workers).
        Source::Unset if key.hidden => "unset: does not apply to this command".to_owned(),
        Source::Unset => "unset: see --help".to_owned(),
    };
    for note in &setting.dropped {
        origin.push_str("; ");
        origin.push_str(note);
    }
    match value(key, &setting.values) {
        Some(v) if setting.source != Source::Unset => format!("{} = {v}  # {origin}", key.name),
        _ => format!("# {}  ({origin})", key.name),
    }
}

/// The TOML value of a key's values; `None` when there are none.
fn value(key: &Key, values: &[String]) -> Option<toml::Value> {
    match values {
        [] => None,
        [one] if !key.repeated => Some(scalar(key.kind, one)),
        many => Some(toml::Value::Array(
            many.iter().map(|v| scalar(key.kind, v)).collect(),
        )),
    }
}

/// A value as the TOML type its key takes; a number only when it reads back unchanged.
fn scalar(kind: Kind, s: &str) -> toml::Value {
    use toml::Value as V;
    let int = || {
        s.parse::<i64>()
            .ok()
            .filter(|i| i.to_string() == s)
            .map(V::Integer)
    };
    let float = || {
        s.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && f.to_string() == s)
            .map(V::Float)
    };
    let text = || V::String(s.to_owned());
    match kind {
        Kind::Flag => V::Boolean(s == "true"),
        Kind::Int => int().unwrap_or_else(text),
        Kind::Float => float().unwrap_or_else(text),
        Kind::Other => int().or_else(float).unwrap_or_else(text),
        Kind::Path | Kind::Text => text(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_numbers_only_when_they_read_back_the_same() {
        assert_eq!(scalar(Kind::Int, "42"), toml::Value::Integer(42));
        assert_eq!(scalar(Kind::Int, "042"), toml::Value::String("042".into()));
        assert_eq!(scalar(Kind::Float, "30"), toml::Value::Float(30.0));
        assert_eq!(
            scalar(Kind::Float, "1e9"),
            toml::Value::String("1e9".into())
        );
        assert_eq!(scalar(Kind::Other, "0.3"), toml::Value::Float(0.3));
        assert_eq!(
            scalar(Kind::Other, "0,1"),
            toml::Value::String("0,1".into())
        );
        assert_eq!(scalar(Kind::Text, "7"), toml::Value::String("7".into()));
    }
}
