//! Criterion benchmark of the SPSC frame rings (filled in with the shmring harness).
fn main() {}
