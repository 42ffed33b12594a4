//! Whether a live run caps its workers, and the peak rate that goes with it.
//!
//! On one machine every uncapped worker shares the same cores, so a second worker adds almost
//! no capacity and the planner has nothing to scale into. Capped workers (each in its own
//! cgroup at a fraction of a core) have real, separate capacity — what a cluster of machines
//! or of CPU-limited containers has — so a live run that starts its own workers caps them by
//! default where this process can write cgroups. Where it cannot, the run goes on uncapped and
//! says so, why, and how to get caps: never silently.

use super::args::RunArgs;
use crate::cgroup::{CpuCap, DELEGATION_HINT, cgroups_writable};
use crate::cmd::limits::check_rate;

/// The default cap of a live run's workers (of one core): with three workers, 0.9 of a core
/// for the workers and the rest of a 2-core machine for the driver and the planner.
pub const DEFAULT_WORKER_CPU: f64 = 0.3;
/// The default peak rate of uncapped workers (records per second).
pub const UNCAPPED_PEAK_PER_S: f64 = 250_000.0;
/// The default peak rate per core of cap (records per second): with 0.3, 240 000/s — 1.3–1.4×
/// the 175 000–185 000/s one WC worker at 0.3 sustained on a 2-vCPU KVM guest (`clasp run
/// --max-workers 1 --pattern constant --peak-rate R --duration 10`, R = 175 000 and 200 000),
/// so the peak needs more than one worker; three carried 226 000–232 000/s on average at the
/// peak (13.5–16.5 s, five default runs). It was 300 000 (90 000/s), then 600 000
/// (180 000/s), each until one worker came to carry nearly that peak alone.
pub const CAPPED_PEAK_PER_CORE_PER_S: f64 = 800_000.0;

/// What a live run decided about caps.
#[derive(Debug, Clone, PartialEq)]
pub struct Caps {
    /// The cap each worker runs under (None: uncapped).
    pub worker_cpu: Option<f64>,
    /// The pattern's peak rate.
    pub peak_rate_per_s: f64,
    /// The line printed first: what the run does about caps and why.
    pub note: String,
}

/// Settles `args.worker_cpu` (the default cap where it applies) and `args.peak_rate`.
pub fn settle(args: &mut RunArgs) -> anyhow::Result<Caps> {
    let note = if let Some(cap) = args.worker_cpu {
        format!(
            "capped workers: each at {} of a core (--worker-cpu)",
            cap.fraction
        )
    } else if args.uncapped {
        "uncapped workers (--uncapped): they share this machine's cores".to_owned()
    } else if args.cluster.is_some() {
        "workers of --cluster: capped or not as they were started (clasp worker --worker-cpu)"
            .to_owned()
    } else {
        match default_cap() {
            Ok(cap) => {
                args.worker_cpu = Some(cap);
                format!(
                    "capped workers: each at {} of a core, in its own cgroup (the default; \
                     --worker-cpu F to change, --uncapped to run without)",
                    cap.fraction
                )
            }
            Err(why) => format!(
                "uncapped workers: they share this machine's cores, so scaling adds little \
                 capacity here ({why}); to cap them: {DELEGATION_HINT}"
            ),
        }
    };
    let worker_cpu = args.worker_cpu.map(|c| c.fraction);
    let peak_rate_per_s = args.peak_rate.unwrap_or(match worker_cpu {
        Some(f) => CAPPED_PEAK_PER_CORE_PER_S * f,
        None => UNCAPPED_PEAK_PER_S,
    });
    check_rate("--peak-rate", Some(peak_rate_per_s))?;
    args.peak_rate = Some(peak_rate_per_s);
    Ok(Caps {
        worker_cpu,
        peak_rate_per_s,
        note,
    })
}

/// The default cap, where cgroups can be written here; why not otherwise.
fn default_cap() -> Result<CpuCap, String> {
    cgroups_writable()?;
    CpuCap::new(
        DEFAULT_WORKER_CPU,
        clasp_dataplane::affinity::allowed_cpus().len().max(1),
    )
}
