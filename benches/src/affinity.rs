//! Pinning threads to cores, verified: the data plane's own implementation, re-exported for
//! the benchmark harnesses.

pub use clasp_dataplane::affinity::{allowed_cpus, pin_current_thread};
