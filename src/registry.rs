//! The operator kinds this process runs with: installed once by [`crate::cli::main_with`], read
//! wherever a command turns an app name or an app file into an [`AppSpec`].
//!
//! One registry per process, not one per call: every command, and every process a command
//! starts (the same executable), must agree on the kinds, and a process-wide value keeps that
//! true without threading the registry through every command's options.

use std::sync::OnceLock;

use clasp_operators::Registry;

static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// Installs the process's registry; a second call keeps the first (one command line per
/// process).
pub fn install(registry: Registry) {
    let _ = REGISTRY.set(registry);
}

/// The process's registry: the installed one, else the built-in kinds (unit tests).
pub fn get() -> &'static Registry {
    REGISTRY.get_or_init(Registry::builtin)
}
