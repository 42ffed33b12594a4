//! What the seeded-simulation tests share: run a simulation over many seeds and fail naming
//! every seed that failed (one seed replays a failure exactly).

/// Runs `run` for every seed in `seeds`; panics listing each failing seed and why.
pub fn run_seeds<O, E: std::fmt::Display>(
    name: &str,
    seeds: std::ops::Range<u64>,
    run: impl Fn(u64) -> Result<O, E>,
) -> Vec<O> {
    let mut outs = Vec::new();
    let mut failures = Vec::new();
    for seed in seeds {
        match run(seed) {
            Ok(o) => outs.push(o),
            Err(e) => failures.push(format!("{name}: seed {seed}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing seeds:\n{}",
        failures.len(),
        failures.join("\n")
    );
    outs
}
