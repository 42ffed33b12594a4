//! `topk`: the whole `clasp` command line, with this example's operator kinds registered
//! beside the built-in ones. It is the driver and every worker of its cluster: `clasp run`
//! starts its workers from the current executable, and `topk worker` on other hosts is this
//! same binary.

use std::process::ExitCode;

fn main() -> ExitCode {
    clasp::cli::main_with(clasp_example_topk::registry())
}
