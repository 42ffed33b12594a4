//! `clasp`: the one command of the CLASP data plane, with the built-in operator kinds.
//!
//! The command line lives in the library (`clasp::cli`), so that a user's own binary can run
//! it with its own operator kinds; this binary is that call with [`Registry::builtin`]. Errors
//! are printed with their full cause chain and exit with status 2 for a usage or input error,
//! 1 for a failure at run time.

#![forbid(unsafe_code)]

use clasp_operators::Registry;

/// mimalloc: the data plane's allocations are few and per batch, but the CLI tools (oracle,
/// simulator) allocate heavily, and mimalloc is faster than glibc's malloc on both.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    clasp::cli::main_with(Registry::builtin())
}
