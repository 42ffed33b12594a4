//! The `clasp` command as a library: [`cli::main_with`] runs the whole command line with a
//! given [`clasp_operators::Registry`] of operator kinds. The `clasp` binary calls it with the
//! built-in kinds; a user's own binary calls it with its own (see `docs/guide.md`).
//!
//! This package is the one place that depends on every layer (the data plane, the control
//! plane, the benchmark harnesses), so no library crate has to depend "upwards" to host the
//! command line. Only [`cli`] is public: the commands' modules are its implementation.

// No unsafe code, except where the operating system's contract demands it and says so: the
// one exception, `cgroup::join` (code run between fork and exec), allows it locally.
#![deny(unsafe_code)]

mod cgroup;
mod cleanup;
pub mod cli;
mod cmd;
mod hugepages;
mod lifeline;
mod registry;
mod signals;
mod stale;
