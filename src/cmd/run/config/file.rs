//! One layer of settings read from a file — a run file, or an app file's `[run]` table — as the
//! flags' string forms, each checked against its key so that a mistake names the key and the
//! file: an unknown key (with the closest known one), a value of the wrong TOML type, a value
//! the flag's own parser refuses, and two keys of one file that cannot go together.

use super::keys::{Key, Kind, closest};
use crate::cmd::usage_error;
use clap::Command;
use std::path::{Path, PathBuf};

/// One key's value from a file, in the flag's string form (one string per value).
#[derive(Clone, Debug)]
pub struct FileValue {
    /// Index into the key list.
    pub key: usize,
    pub values: Vec<String>,
}

/// The settings one file holds.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The file (for messages and `--print-config`).
    pub path: PathBuf,
    /// What the file is: "run file" or "app file".
    pub what: &'static str,
    pub values: Vec<FileValue>,
}

/// Reads a whole file as a TOML table, naming the file in every error.
pub fn read_table(path: &Path) -> anyhow::Result<toml::Table> {
    let text = crate::cmd::limits::read_text_file(path)
        .map_err(|e| usage_error(format!("cannot read {}: {e}", path.display())))?;
    text.parse::<toml::Table>()
        .map_err(|e| usage_error(format!("{} is not valid TOML: {e}", path.display())))
}

/// Checks every key of `table` against `keys` (and `cmd`, whose parsers check the values);
/// `refused` are keys this file may not set (e.g. the app, in an app file), with the reason.
pub fn layer(
    cmd: &Command,
    keys: &[Key],
    table: &toml::Table,
    path: &Path,
    what: &'static str,
    refused: &[(&str, &str)],
) -> anyhow::Result<Layer> {
    let name = path.display();
    let mut values = Vec::new();
    for (k, v) in table {
        if let Some((_, why)) = refused.iter().find(|(r, _)| r == k) {
            return Err(usage_error(format!("{name}: key `{k}`: {why}")));
        }
        let Some(index) = keys.iter().position(|key| key.name == *k) else {
            let hint =
                closest(keys, k).map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
            return Err(usage_error(format!(
                "{name}: unknown key `{k}`{hint}; the keys are the long flags of `clasp {}`",
                cmd.get_name()
            )));
        };
        let key = &keys[index];
        let strings = strings_of(key, v)
            .map_err(|want| usage_error(format!("{name}: key `{k}` must be {want}, got {v}")))?;
        check_with_parser(cmd, key, &strings)
            .map_err(|e| usage_error(format!("{name}: key `{k}`: {e}")))?;
        values.push(FileValue {
            key: index,
            values: strings,
        });
    }
    let layer = Layer {
        path: path.to_owned(),
        what,
        values,
    };
    check_conflicts(keys, &layer)?;
    Ok(layer)
}

/// The flag's string forms of a TOML value, or what the key wants instead.
fn strings_of(key: &Key, v: &toml::Value) -> Result<Vec<String>, String> {
    use toml::Value as V;
    if key.repeated {
        if let V::Array(items) = v {
            return items.iter().map(|item| scalar(key.kind, item)).collect();
        }
    }
    match (key.kind, v) {
        (Kind::Text | Kind::Other, V::Array(items)) => {
            let parts: Result<Vec<String>, String> =
                items.iter().map(|item| scalar(key.kind, item)).collect();
            Ok(vec![parts?.join(",")])
        }
        _ => scalar(key.kind, v).map(|s| vec![s]),
    }
}

/// One value's string form; the error is what the key wants.
fn scalar(kind: Kind, v: &toml::Value) -> Result<String, String> {
    use toml::Value as V;
    match (kind, v) {
        (Kind::Flag, V::Boolean(b)) => Ok(b.to_string()),
        (Kind::Flag, _) => Err("true or false".into()),
        (Kind::Int, V::Integer(i)) => Ok(i.to_string()),
        (Kind::Float | Kind::Other, V::Integer(i)) => Ok(i.to_string()),
        (Kind::Float | Kind::Other, V::Float(f)) => Ok(f.to_string()),
        (Kind::Int | Kind::Float | Kind::Path | Kind::Text | Kind::Other, V::String(s)) => {
            Ok(s.clone())
        }
        (Kind::Int, _) => Err("an integer".into()),
        (Kind::Float, _) => Err("a number".into()),
        (Kind::Path, _) => Err("a string (a path)".into()),
        (Kind::Text, _) => Err("a string (or an array of strings, for a list)".into()),
        (Kind::Other, _) => Err("a string or a number (or an array of them, for a list)".into()),
    }
}

/// Runs the flag's own parser on the values, by parsing a command line that gives only this
/// flag; the error is clap's, without its usage lines.
fn check_with_parser(cmd: &Command, key: &Key, values: &[String]) -> Result<(), String> {
    let mut argv = vec![cmd.get_name().to_owned()];
    argv.extend(super::flag_args(key, values));
    let cmd = cmd.clone().mut_args(|a| a.required(false));
    match cmd.try_get_matches_from(argv) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let said: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            Err(said.join(" ").trim_start_matches("error: ").to_owned())
        }
    }
}

/// Two keys of one file that cannot be given together (as the flags cannot) are an error.
fn check_conflicts(keys: &[Key], layer: &Layer) -> anyhow::Result<()> {
    let set: Vec<&Key> = layer
        .values
        .iter()
        .filter(|v| !keys[v.key].is_default(&v.values))
        .map(|v| &keys[v.key])
        .collect();
    for a in &set {
        if let Some(b) = set.iter().find(|b| a.conflicts.contains(&b.id)) {
            return Err(usage_error(format!(
                "{}: keys `{}` and `{}` cannot be used together",
                layer.path.display(),
                a.name,
                b.name
            )));
        }
    }
    Ok(())
}
