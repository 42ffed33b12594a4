//! Capacity-capped workers: each worker process in its own cgroup with a CPU bandwidth limit
//! (`--worker-cpu F`, a fraction of one core), so that several workers on one host are several
//! real, bounded capacities — as containers with CPU limits are — instead of processes sharing
//! the same cores. Without caps a second local worker adds no capacity and a run cannot show
//! scaling.
//!
//! - [`detect`]: which hierarchies this process is in — v2 `cpu.max` where the unified
//!   hierarchy has the `cpu` controller, v1 `cpu.cfs_quota_us` otherwise, plus a separate v1
//!   `cpuacct` hierarchy where there is one;
//! - [`cap`]: F → quota per 10 ms period, and the values refused;
//! - [`group`]: a run's parent group and one child per worker, and their removal (a guard);
//! - [`v2`]: handing the cpu controller down a v2 hierarchy (and taking it back);
//! - [`join`]: a spawned worker joins its groups and CPU set before it execs;
//! - [`own`]: a `clasp worker` started by hand caps itself;
//! - [`cpus`]: `--cpus LIST`, a worker's affinity mask.

pub mod cap;
pub mod cpus;
/// Where this process's CPU cgroups are (in the data plane: a worker reads its own group's CPU
/// usage through the same detection).
pub use clasp_dataplane::cgroup_layout as detect;
pub mod group;
pub mod join;
pub mod own;
pub mod v2;

pub use cap::CpuCap;
pub use cpus::CpuList;
pub use group::RunGroups;
pub use own::OwnGroup;

/// How to run with caps where this process may not write its cgroups.
pub const DELEGATION_HINT: &str = "run as root, or inside a group delegated to you, e.g. \
     `systemd-run --user --scope -p Delegate=yes clasp run ...`";

/// Whether this process can make capped groups here; the reason when it cannot. Tries for
/// real: creates a capped probe group in every hierarchy and removes it.
pub fn cgroups_writable() -> Result<(), String> {
    let probe = CpuCap::new(cap::MIN_QUOTA_US as f64 / cap::PERIOD_US as f64, 1)?;
    let groups = RunGroups::create(&probe, &[0])?;
    groups.remove_now()
}

/// [`RunGroups::create`] for an explicit `--worker-cpu`: a failure says why and how to get a
/// group this process may write (never a silent uncapped run).
pub fn create_for_workers(cap: &CpuCap, ids: &[u32]) -> anyhow::Result<RunGroups> {
    RunGroups::create(cap, ids).map_err(|e| not_writable(&e))
}

/// [`OwnGroup::enter`] for `clasp worker --worker-cpu`, with the same explanation.
pub fn enter_own(cap: &CpuCap, id: u32) -> anyhow::Result<OwnGroup> {
    OwnGroup::enter(cap, id).map_err(|e| not_writable(&e))
}

fn not_writable(reason: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "--worker-cpu: cannot make capped cgroups here ({reason}); {DELEGATION_HINT}, or run \
         without --worker-cpu (uncapped)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writability_probe_answers_and_leaves_no_group() {
        match cgroups_writable() {
            Err(reason) => {
                assert!(!reason.is_empty());
                say!("cgroups are not writable here: {reason}");
            }
            Ok(()) => {
                let prefix = format!("clasp-{}-", std::process::id());
                for h in detect::detect().unwrap().hierarchies {
                    let left: Vec<_> = std::fs::read_dir(&h.own_dir)
                        .unwrap()
                        .filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|n| n.starts_with(&prefix))
                        .collect();
                    assert!(left.is_empty(), "{}: {left:?}", h.own_dir.display());
                }
            }
        }
    }
}
