//! One module per subcommand. Each exposes an argument type (clap derive) and a `run`.
//! Two modules serve several commands: `cluster` (the cluster file, the secret and spawned
//! workers, for `worker`, `run` and `planner`) and `report` (how `local` and `run` print a
//! finished run) and `source` (their `--source`); `output` is the checked stdout every command prints through, `limits`
//! the bounds of the numeric options, `ingress_child` the ingress process `local` starts,
//! `profile` the machine profile `calibrate` writes, and `priors` which costs a live run starts
//! from (the profile's, the flag's or the built-ins); `metrics` the Prometheus endpoint and the
//! events file of a live run.

pub mod apps;
pub mod bench;
pub mod calibrate;
pub mod clean;
pub mod cluster;
pub mod experiment;
pub mod ingress_child;
pub mod limits;
pub mod local;
pub mod metrics;
pub mod output;
pub mod paper;
pub mod place;
pub mod priors;
pub mod profile;
pub mod report;
pub mod run;
pub mod sim;
pub mod source;
pub mod worker;

/// Errors a user caused (bad input, bad arguments) carry this marker, so `main` exits with 2
/// rather than 1. Wrap them with [`usage_error`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// An error caused by the user's input: exits with status 2.
pub fn usage_error(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// 2 for usage errors (anywhere in the chain), 1 otherwise.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}
