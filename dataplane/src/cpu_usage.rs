//! The CPU time a worker process used, as the planner's cost model needs it.
//!
//! The planner regresses each worker's CPU time per interval on its execution time and its
//! local and remote chained requests, so the figure must hold *everything* the worker's work
//! cost: its executor threads, its network thread, and the kernel's io_uring workers and
//! softirq processing done on its behalf. Thread CPU clocks miss the last two; a cgroup's usage
//! counter holds them. So when the process runs in a group of its own (a capped worker: the
//! group's name starts with `clasp-` or is a `w<ID>` child of such a group), the group's
//! counter is read — `cpuacct.usage` (ns) on a v1 `cpuacct` hierarchy, `usage_usec` of
//! `cpu.stat` on the unified (v2) hierarchy. Otherwise it is the process's CPU clock
//! (`CLOCK_PROCESS_CPUTIME_ID`: every thread of the process, user + system) — never a shared
//! group's counter, which would count other processes too.

use std::path::{Path, PathBuf};

/// Where a worker's CPU time is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuSource {
    /// A v1 `cpuacct.usage` file (nanoseconds).
    CgroupV1 { usage: PathBuf },
    /// A v2 `cpu.stat` file (its `usage_usec` line).
    CgroupV2 { stat: PathBuf },
    /// The process's CPU clock.
    Process,
}

impl CpuSource {
    /// The source for the calling process: its own clasp cgroup where it has one, else the
    /// process clock.
    pub fn detect() -> CpuSource {
        let Ok(text) = std::fs::read_to_string("/proc/self/cgroup") else {
            return CpuSource::Process;
        };
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Self::from_proc(&text, &mounts, Path::exists).unwrap_or(CpuSource::Process)
    }

    /// [`detect`](Self::detect) on given `/proc/self/cgroup` and `/proc/self/mountinfo`
    /// texts; `exists` says whether a file is there.
    pub fn from_proc(cgroup: &str, mountinfo: &str, exists: fn(&Path) -> bool) -> Option<Self> {
        for line in cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            if !is_clasp_group(path) {
                continue;
            }
            let v1 = controllers.split(',').any(|c| c == "cpuacct");
            let v2 = controllers.is_empty();
            let Some(root) = mount_point(mountinfo, v1, v2) else {
                continue;
            };
            let dir = root.join(path.trim_start_matches('/'));
            let source = if v1 {
                CpuSource::CgroupV1 {
                    usage: dir.join("cpuacct.usage"),
                }
            } else if v2 {
                CpuSource::CgroupV2 {
                    stat: dir.join("cpu.stat"),
                }
            } else {
                continue;
            };
            if exists(source.file()?) {
                return Some(source);
            }
        }
        None
    }

    fn file(&self) -> Option<&Path> {
        match self {
            CpuSource::CgroupV1 { usage } => Some(usage),
            CpuSource::CgroupV2 { stat } => Some(stat),
            CpuSource::Process => None,
        }
    }

    /// A short name for logs and summaries.
    pub fn describe(&self) -> String {
        match self {
            CpuSource::CgroupV1 { usage } => format!("cgroup v1 {}", usage.display()),
            CpuSource::CgroupV2 { stat } => format!("cgroup v2 {}", stat.display()),
            CpuSource::Process => "process CPU clock".to_owned(),
        }
    }

    /// Cumulative CPU nanoseconds now; `None` when the cgroup file cannot be read (the group
    /// was removed under us) — the caller reports the interval as unmeasured.
    pub fn read_ns(&self) -> Option<u64> {
        match self {
            CpuSource::CgroupV1 { usage } => {
                std::fs::read_to_string(usage).ok()?.trim().parse().ok()
            }
            CpuSource::CgroupV2 { stat } => {
                let text = std::fs::read_to_string(stat).ok()?;
                let usec: u64 = text
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))?
                    .trim()
                    .parse()
                    .ok()?;
                usec.checked_mul(1000)
            }
            CpuSource::Process => Some(process_cpu_ns()),
        }
    }
}

/// CPU time of the whole calling process (every thread, user + system), in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A group clasp made for one worker: some component starts with `clasp-`.
fn is_clasp_group(path: &str) -> bool {
    path.split('/').any(|c| c.starts_with("clasp-"))
}

/// The mount point of the v1 hierarchy holding `cpuacct` (`v1`) or of the unified one (`v2`).
fn mount_point(mountinfo: &str, v1: bool, v2: bool) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTIONS"
        let (left, right) = line.split_once(" - ")?;
        let mount = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let superopts = r.nth(1).unwrap_or("");
        let hit = (v2 && fstype == "cgroup2")
            || (v1 && fstype == "cgroup" && superopts.split(',').any(|o| o == "cpuacct"));
        hit.then(|| PathBuf::from(mount))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate
33 25 0:29 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
34 25 0:30 / /sys/fs/cgroup/cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpuacct
";

    #[test]
    fn a_clasp_v1_group_is_read_from_cpuacct() {
        let cg = "2:cpuacct:/clasp-12-ab/w1\n1:cpu:/clasp-12-ab/w1\n0::/\n";
        let s = CpuSource::from_proc(cg, MOUNTS, |_| true).unwrap();
        assert_eq!(
            s,
            CpuSource::CgroupV1 {
                usage: PathBuf::from("/sys/fs/cgroup/cpuacct/clasp-12-ab/w1/cpuacct.usage")
            }
        );
    }

    #[test]
    fn a_clasp_v2_group_is_read_from_cpu_stat() {
        let cg = "2:cpuacct:/\n0::/user.slice/clasp-7-cd/w2\n";
        let s = CpuSource::from_proc(cg, MOUNTS, |_| true).unwrap();
        assert_eq!(
            s,
            CpuSource::CgroupV2 {
                stat: PathBuf::from("/sys/fs/cgroup/unified/user.slice/clasp-7-cd/w2/cpu.stat")
            }
        );
    }

    #[test]
    fn a_shared_group_is_not_used() {
        let cg = "2:cpuacct:/system.slice\n0::/user.slice\n";
        assert_eq!(CpuSource::from_proc(cg, MOUNTS, |_| true), None);
        let missing = "2:cpuacct:/clasp-1-aa/w1\n";
        assert_eq!(CpuSource::from_proc(missing, MOUNTS, |_| false), None);
    }

    #[test]
    fn the_process_clock_moves() {
        let a = CpuSource::Process.read_ns().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(CpuSource::Process.read_ns().unwrap() > a);
    }
}
