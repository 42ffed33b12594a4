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

/// A line on stderr that cannot panic: `eprintln!` panics when stderr cannot be written (a
/// log on a full disk, `2>/dev/full`, a `| tee` that died), which would end a run for a note
/// nobody can read. One write, so other processes' lines do not cut into it.
macro_rules! say {
    () => {
        say!("")
    };
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

/// [`say!`] without the newline (a progress line rewritten in place).
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = std::io::stderr().write_all(format!($($arg)*).as_bytes());
    }};
}

mod cgroup;
mod cleanup;
pub mod cli;
mod cmd;
mod hugepages;
mod lifeline;
mod registry;
mod signals;
mod stale;
