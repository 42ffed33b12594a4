//! The keys a run file may hold, read off clap's description of the command: one key per long
//! flag, typed by the flag's action and value parser. Reading them from clap rather than
//! listing them here is what lets a flag added to `clasp run` work in a run file with no edit.

use clap::{Arg, ArgAction, Command};
use std::any::TypeId;

/// Flags that are not settings: asking for help, and the run file machinery itself.
const NOT_KEYS: [&str; 4] = ["help", "version", "config", "print_config"];

/// What TOML values a key takes, from the flag's action and the type its parser produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A switch (`--json`): `true` or `false`.
    Flag,
    /// An integer (`--seed`): a TOML integer, or the flag's string form.
    Int,
    /// A number (`--duration`): a TOML integer or float, or the flag's string form.
    Float,
    /// A path: a TOML string.
    Path,
    /// Text (`--pattern`, `--moves`): a TOML string, or an array joined with commas (the
    /// flag's own list form).
    Text,
    /// A value with its own parser (`--worker-cpu`, `--cpus`, `--spread`): a string, a number,
    /// or an array joined with commas; the parser decides.
    Other,
}

/// One key: a long flag of the command.
#[derive(Clone, Debug)]
pub struct Key {
    /// The name in a run file: the long flag without its dashes (`worker-cpu`).
    pub name: String,
    /// clap's id of the argument (`worker_cpu`).
    pub id: String,
    /// What values it takes.
    pub kind: Kind,
    /// The flag may be given several times, each adding a value.
    pub repeated: bool,
    /// clap's default, in the flag's string form (empty: none).
    pub default: Vec<String>,
    /// The ids of the arguments it cannot be given with (either direction).
    pub conflicts: Vec<String>,
    /// Of those, the ones its own flag names (`conflicts_with` on it).
    pub declared: Vec<String>,
    /// Left out of `--help`: a testing option (`fault`), or one that does not apply to the
    /// command (`clasp planner`'s options about the workers `clasp run` starts).
    pub hidden: bool,
}

impl Key {
    /// Whether this value changes nothing: a key at its default neither overrides nor
    /// conflicts with anything.
    pub fn is_default(&self, values: &[String]) -> bool {
        values == self.default.as_slice()
    }
}

/// The keys of `cmd`, in the order `--help` lists the flags.
pub fn keys(cmd: &Command) -> Vec<Key> {
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| a.get_long().is_some() && !NOT_KEYS.contains(&a.get_id().as_str()))
        .collect();
    args.iter()
        .map(|arg| {
            let declared: Vec<String> = cmd
                .get_arg_conflicts_with(arg)
                .iter()
                .map(|a| a.get_id().to_string())
                .collect();
            let mut conflicts = declared.clone();
            for other in &args {
                let theirs = cmd.get_arg_conflicts_with(other);
                if theirs.iter().any(|a| a.get_id() == arg.get_id()) {
                    conflicts.push(other.get_id().to_string());
                }
            }
            conflicts.sort();
            conflicts.dedup();
            Key {
                name: arg.get_long().unwrap_or_default().to_owned(),
                id: arg.get_id().to_string(),
                kind: kind_of(arg),
                repeated: matches!(arg.get_action(), ArgAction::Append),
                default: default_of(arg),
                conflicts,
                declared,
                hidden: arg.is_hide_set(),
            }
        })
        .collect()
}

fn kind_of(arg: &Arg) -> Kind {
    if !arg.get_action().takes_values() {
        return Kind::Flag;
    }
    let t = arg.get_value_parser().type_id();
    let is = |id: TypeId| t == id;
    let ints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
    ];
    if ints.into_iter().any(is) {
        Kind::Int
    } else if is(TypeId::of::<f64>()) || is(TypeId::of::<f32>()) {
        Kind::Float
    } else if is(TypeId::of::<std::path::PathBuf>()) || is(TypeId::of::<std::ffi::OsString>()) {
        Kind::Path
    } else if is(TypeId::of::<String>()) {
        Kind::Text
    } else {
        Kind::Other
    }
}

/// A switch defaults to `false` (clap gives it no default value until the command is built).
fn default_of(arg: &Arg) -> Vec<String> {
    let given: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    match (given.is_empty(), arg.get_action()) {
        (true, ArgAction::SetTrue) => vec!["false".into()],
        (true, ArgAction::SetFalse) => vec!["true".into()],
        _ => given,
    }
}

/// The key closest to a misspelt `name`, if one is close enough to be what was meant.
pub fn closest<'a>(keys: &'a [Key], name: &str) -> Option<&'a str> {
    let wanted = name.replace('_', "-").to_lowercase();
    keys.iter()
        .map(|k| (edit_distance(&wanted, &k.name), k.name.as_str()))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(edit_distance("worker-cpu", "worker-cpu"), 0);
        assert_eq!(edit_distance("workr-cpu", "worker-cpu"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
