//! `clasp run --config FILE` and `--print-config`: settings from a run file.
//!
//! About forty flags are too many to type for every run, and too many to keep in shell
//! history. A run file holds them as TOML, one key per long flag (`worker-cpu = 0.3`,
//! `app = "wc"`, `json = true`, lists as an array or in the flag's own form); an app file may
//! suggest settings for its app in a `[run]` table. Each setting comes from the first of: the
//! command line, the run file, the app file, clap's default. A key of a higher layer also
//! silences the keys of lower layers it conflicts with (`--uncapped` on the command line drops
//! the run file's `worker-cpu`; `--static` drops an app file's suggested `peak-rate`), so a
//! flag always wins — except over a switch a lower layer turns on, which gives way only to the
//! keys its own flag names as conflicting: a run file's `static = true` is not silenced by
//! `--peak-rate` (which would turn the run into a live one); clap refuses the pair instead.
//!
//! Nothing here knows the flags: the keys are read off clap's `Command` ([`keys`]), a file's
//! values become the flags' string forms, checked by the flags' own parsers ([`file`]), and
//! the command line is parsed again with the file's flags appended, so the command gets the
//! same typed arguments either way and a flag added later works in a run file at once.
//! [`print`] writes the effective settings, each with where it came from, as a run file.

pub mod file;
pub mod keys;
pub mod print;

use crate::cmd::usage_error;
use clap::parser::ValueSource;
use clap::{ArgMatches, Command, Parser};
use file::Layer;
use keys::{Key, Kind};
use std::ffi::OsString;
use std::path::PathBuf;

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    CommandLine,
    Environment,
    /// A file (run file or app file) and what kind it is.
    File(PathBuf, &'static str),
    Default,
    /// No value, and clap has no default for it.
    Unset,
}

/// One key's effective setting; a lower layer's value it overrode by a conflict is noted.
#[derive(Clone, Debug)]
pub struct Setting {
    pub values: Vec<String>,
    pub source: Source,
    /// Values of lower layers that a conflicting key of a higher one dropped.
    pub dropped: Vec<String>,
}

impl Setting {
    /// Whether it counts against conflicting keys: given on the command line (as clap would
    /// see it), or a file's value away from the default.
    fn is_set(&self, key: &Key) -> bool {
        match self.source {
            Source::CommandLine | Source::Environment => true,
            Source::File(..) => !key.is_default(&self.values),
            Source::Default | Source::Unset => false,
        }
    }
}

/// Parses the command line; for a subcommand that takes `--config` and `--print-config`, fills
/// in what the command line left from the run file and the app file's `[run]` table. `None`
/// when `--print-config` printed the settings (the command then exits 0 without running).
pub fn parse_cli<P: Parser>() -> anyhow::Result<Option<P>> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let mut root = negatives_are_values(named(P::command()));
    root.build();
    let matches = root.clone().get_matches_from(argv.clone());
    let parsed = |m: &ArgMatches| P::from_arg_matches(m).unwrap_or_else(|e| e.exit());
    let Some((name, sub_matches)) = matches.subcommand() else {
        return Ok(Some(parsed(&matches)));
    };
    let Some(sub) = root.find_subcommand(name) else {
        return Ok(Some(parsed(&matches)));
    };
    let wants = |id: &str| sub.get_arguments().any(|a| a.get_id() == id);
    if !wants("config") || !wants("print_config") {
        return Ok(Some(parsed(&matches)));
    }
    let run_file = sub_matches.get_one::<PathBuf>("config").cloned();
    let print = sub_matches.get_flag("print_config");
    let keys = keys::keys(sub);
    let settings = resolve(sub, &keys, sub_matches, run_file.as_deref())?;
    let mut full = argv;
    for (key, setting) in keys.iter().zip(&settings) {
        if matches!(setting.source, Source::File(..)) && !key.is_default(&setting.values) {
            full.extend(
                flag_args(key, &setting.values)
                    .into_iter()
                    .map(OsString::from),
            );
        }
    }
    let cli = parsed(
        &root
            .clone()
            .try_get_matches_from(full)
            .unwrap_or_else(|e| e.exit()),
    );
    if print {
        print::print(sub.get_name(), &keys, &settings)?;
        return Ok(None);
    }
    Ok(Some(cli))
}

/// Every option that takes a value takes a negative number as one (`--duration -1`), so
/// that its own check refuses it naming the option, not the parser with "unexpected argument
/// '-1'", which reads as if the value were missing.
fn negatives_are_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negatives_are_values)
}

/// The command line under the name the program was started as: a user's binary built on this
/// library (`topk`) says `topk` in its usage and `--version` (`topk (clasp 0.1.0)`), not `clasp`.
fn named(root: clap::Command) -> clap::Command {
    let name = crate::cli::program_name();
    if name == root.get_name() {
        return root;
    }
    let version = format!("(clasp {})", env!("CARGO_PKG_VERSION"));
    root.name(name.clone()).bin_name(name).version(version)
}

/// The command-line arguments that give `key` these values (none for a switch left off).
pub fn flag_args(key: &Key, values: &[String]) -> Vec<String> {
    let flag = format!("--{}", key.name);
    if key.kind == Kind::Flag {
        let on = values.first().map(String::as_str) != key.default.first().map(String::as_str);
        return if on { vec![flag] } else { Vec::new() };
    }
    values.iter().map(|v| format!("{flag}={v}")).collect()
}

/// Every key's setting: the command line, then the run file, then the app file, then defaults.
fn resolve(
    cmd: &Command,
    keys: &[Key],
    matches: &ArgMatches,
    run_file: Option<&std::path::Path>,
) -> anyhow::Result<Vec<Setting>> {
    let mut settings: Vec<Option<Setting>> = keys.iter().map(|k| from_cli(k, matches)).collect();
    if let Some(path) = run_file {
        let table = file::read_table(path)?;
        let refused = [
            ("config", "a run file cannot name another run file"),
            ("print-config", "give --print-config on the command line"),
        ];
        let layer = file::layer(cmd, keys, &table, path, "run file", &refused)?;
        merge(keys, &mut settings, &layer);
    }
    if let Some(path) = app_file(keys, &settings) {
        if let Some(mut layer) = app_layer(cmd, keys, &path)? {
            drop_static_only_if_live(keys, &mut settings, &mut layer);
            merge(keys, &mut settings, &layer);
        }
    }
    Ok(keys
        .iter()
        .zip(settings)
        .map(|(key, s)| s.unwrap_or_else(|| default_setting(key)))
        .collect())
}

/// The key's value on the command line (or from the environment), if it was given there.
fn from_cli(key: &Key, matches: &ArgMatches) -> Option<Setting> {
    let source = match matches.value_source(&key.id)? {
        ValueSource::CommandLine => Source::CommandLine,
        ValueSource::EnvVariable => Source::Environment,
        _ => return None,
    };
    let values = matches
        .get_raw(&key.id)?
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    Some(Setting {
        values,
        source,
        dropped: Vec::new(),
    })
}

fn default_setting(key: &Key) -> Setting {
    Setting {
        values: key.default.clone(),
        source: if key.default.is_empty() {
            Source::Unset
        } else {
            Source::Default
        },
        dropped: Vec::new(),
    }
}

/// Takes a layer's values for the keys still open; a value that conflicts with a key already
/// set ([`Setting::is_set`]) is dropped and noted.
fn merge(keys: &[Key], settings: &mut [Option<Setting>], layer: &Layer) {
    for v in &layer.values {
        if settings[v.key].is_some() {
            continue;
        }
        let key = &keys[v.key];
        let switched_on = key.kind == Kind::Flag && !key.is_default(&v.values);
        let yields_to = if switched_on {
            &key.declared
        } else {
            &key.conflicts
        };
        let blocker = keys.iter().zip(settings.iter()).find(|(other, s)| {
            yields_to.contains(&other.id) && s.as_ref().is_some_and(|s| s.is_set(other))
        });
        if let Some((other, _)) = blocker {
            let mut unset = default_setting(key);
            unset.dropped.push(format!(
                "{} {} sets {}, overridden by `{}`",
                layer.what,
                layer.path.display(),
                v.values.join(","),
                other.name
            ));
            settings[v.key] = Some(unset);
            continue;
        }
        settings[v.key] = Some(Setting {
            values: v.values.clone(),
            source: Source::File(layer.path.clone(), layer.what),
            dropped: Vec::new(),
        });
    }
}

/// Keys only a `--static` run takes: a live run refuses them, and no flag marks a run live
/// for clap to drop them by a conflict.
const STATIC_ONLY: &[&str] = &["rate", "workers"];

/// An app file suggests settings for both kinds of run: in a live run (no `static` from any
/// layer), its static-only suggestions are dropped, noted as such, instead of failing the run.
fn drop_static_only_if_live(keys: &[Key], settings: &mut [Option<Setting>], layer: &mut Layer) {
    let Some(st) = keys.iter().position(|k| k.name == "static") else {
        return;
    };
    let on = |values: &[String]| !keys[st].is_default(values);
    let from_above = settings[st].as_ref().map(|s| on(&s.values));
    let from_layer = layer
        .values
        .iter()
        .find(|v| v.key == st)
        .map(|v| on(&v.values));
    if from_above.or(from_layer).unwrap_or(false) {
        return;
    }
    layer.values.retain(|v| {
        let key = &keys[v.key];
        if !STATIC_ONLY.contains(&key.name.as_str()) || settings[v.key].is_some() {
            return true;
        }
        let mut unset = default_setting(key);
        unset.dropped.push(format!(
            "{} {} sets {}, for --static runs only (this run is live)",
            layer.what,
            layer.path.display(),
            v.values.join(",")
        ));
        settings[v.key] = Some(unset);
        false
    });
}

/// The app file the settings so far name, if any.
fn app_file(keys: &[Key], settings: &[Option<Setting>]) -> Option<PathBuf> {
    let i = keys.iter().position(|k| k.name == "app-file")?;
    let s = settings[i].as_ref()?;
    s.values.first().map(PathBuf::from)
}

/// The app file's `[run]` table as a layer (`None` when it has none).
fn app_layer(cmd: &Command, keys: &[Key], path: &std::path::Path) -> anyhow::Result<Option<Layer>> {
    let mut table = file::read_table(path)?;
    let run = match table.remove("run") {
        None => return Ok(None),
        Some(toml::Value::Table(t)) => t,
        Some(other) => {
            return Err(usage_error(format!(
                "{}: `run` must be a table of `clasp run` settings, got {other}",
                path.display()
            )));
        }
    };
    let why = "an app file's [run] table cannot choose the app";
    let refused = [
        ("app", why),
        ("app-file", why),
        ("config", "an app file cannot name a run file"),
        ("print-config", "give --print-config on the command line"),
    ];
    file::layer(cmd, keys, &run, path, "app file", &refused).map(Some)
}
