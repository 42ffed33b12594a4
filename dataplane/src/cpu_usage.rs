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

use crate::cgroup_layout::{self, Layout, Version};
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
    /// The source for the calling process: its own clasp cgroup where it has one (a path
    /// component starting with `clasp-`), else the process clock.
    pub fn detect() -> CpuSource {
        cgroup_layout::detect()
            .ok()
            .and_then(|l| Self::from_layout(&l, Path::exists))
            .unwrap_or(CpuSource::Process)
    }

    /// The usage counter of this process's own clasp group in `layout` (the cgroup layout
    /// a capped worker joined), if it has one; `exists` says whether a file is there. On v1 the
    /// counter is in whichever hierarchy mounts `cpuacct` (with `cpu` or apart from it).
    pub fn from_layout(layout: &Layout, exists: fn(&Path) -> bool) -> Option<Self> {
        layout
            .hierarchies
            .iter()
            .filter(|h| is_clasp_group(&h.own_dir))
            .map(|h| match h.version {
                Version::V1 => CpuSource::CgroupV1 {
                    usage: h.own_dir.join("cpuacct.usage"),
                },
                Version::V2 => CpuSource::CgroupV2 {
                    stat: h.own_dir.join("cpu.stat"),
                },
            })
            .find(|s| s.file().is_some_and(exists))
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

/// Where a capped worker's throttling is read: the `cpu.stat` of its own clasp group in the
/// hierarchy that caps it (v1 `cpu`, or v2), whose `nr_throttled` counts the enforcement
/// periods in which the group ran out of quota.
///
/// Why the planner needs it: a throttled worker's CPU time is its cap, whatever its work
/// would have cost — the kernel stopped it. Its measured CPU is then a bound, not a
/// measurement, and the busy-time estimator leaves such intervals out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Throttling {
    stat: Option<PathBuf>,
}

impl Throttling {
    /// The calling process's: its own clasp group's where it is capped, else none.
    pub fn detect() -> Throttling {
        let stat = cgroup_layout::detect()
            .ok()
            .and_then(|l| Self::from_layout(&l, Path::exists));
        Throttling { stat }
    }

    /// The `cpu.stat` of this process's own clasp group in `layout`'s capping hierarchy, if it
    /// has one; `exists` says whether a file is there.
    pub fn from_layout(layout: &Layout, exists: fn(&Path) -> bool) -> Option<PathBuf> {
        layout
            .hierarchies
            .iter()
            .filter(|h| h.caps && is_clasp_group(&h.own_dir))
            .map(|h| h.own_dir.join("cpu.stat"))
            .find(|p| exists(p))
    }

    /// Enforcement periods throttled so far (`nr_throttled`); `None` when the process is not
    /// in a capped clasp group or the file cannot be read.
    pub fn read_periods(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.stat.as_ref()?).ok()?;
        parse_nr_throttled(&text)
    }
}

/// The `nr_throttled` line of a `cpu.stat` (v1 and v2 both have it).
fn parse_nr_throttled(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("nr_throttled "))?
        .trim()
        .parse()
        .ok()
}

/// CPU time of the whole calling process (every thread, user + system), in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time (user + system, ns) of thread `tid` of the calling process, read from its CPU clock;
/// `None` when it cannot be read (the thread has exited). What the worker's executor threads
/// used, apart from its network thread and the kernel's work for it.
pub fn thread_cpu_ns_of(tid: u64) -> Option<u64> {
    let tid = libc::pid_t::try_from(tid).ok().filter(|&t| t > 0)?;
    // The kernel's clock id of a thread's CPU clock (what glibc's `pthread_getcpuclockid`
    // returns): the complemented tid shifted by 3, per-thread (4), scheduler runtime (2).
    let clock: libc::clockid_t = (!tid << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only it, and any clock
    // id is safe to pass (an invalid or gone thread's is refused with EINVAL).
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Voluntary context switches of the whole calling process (every thread, summed): how often
/// one of its threads went to sleep. On a virtual machine a sleep and its wake-up cost tens of
/// µs of the process's own CPU (timer and idle exits), so at low load they, not the chained
/// requests, dominate a worker's CPU time; the planner regresses on them to keep the two apart.
pub fn process_sleeps() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`; getrusage writes it whole on success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: getrusage returned 0, so it initialised `usage`.
    let usage = unsafe { usage.assume_init() };
    u64::try_from(usage.ru_nvcsw).unwrap_or(0)
}

/// A group clasp made (a run's, or a hand-capped worker's): a component starts with `clasp-`.
fn is_clasp_group(dir: &Path) -> bool {
    dir.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with("clasp-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hierarchy(version: Version, dir: &str, caps: bool) -> cgroup_layout::Hierarchy {
        cgroup_layout::Hierarchy {
            version,
            own_dir: PathBuf::from(dir),
            caps,
        }
    }

    #[test]
    fn a_clasp_v1_group_is_read_from_the_hierarchy_with_cpuacct() {
        let layout = Layout {
            hierarchies: vec![
                hierarchy(Version::V1, "/sys/fs/cgroup/cpu/clasp-12-ab/w1", true),
                hierarchy(Version::V1, "/sys/fs/cgroup/cpuacct/clasp-12-ab/w1", false),
            ],
        };
        let s = CpuSource::from_layout(&layout, |p| !p.starts_with("/sys/fs/cgroup/cpu/"));
        assert_eq!(
            s,
            Some(CpuSource::CgroupV1 {
                usage: PathBuf::from("/sys/fs/cgroup/cpuacct/clasp-12-ab/w1/cpuacct.usage")
            })
        );
    }

    #[test]
    fn throttling_is_read_from_the_capping_hierarchy_of_a_clasp_group_only() {
        let v1 = Layout {
            hierarchies: vec![
                hierarchy(Version::V1, "/sys/fs/cgroup/cpu/clasp-12-ab/w1", true),
                hierarchy(Version::V1, "/sys/fs/cgroup/cpuacct/clasp-12-ab/w1", false),
            ],
        };
        assert_eq!(
            Throttling::from_layout(&v1, |_| true),
            Some(PathBuf::from("/sys/fs/cgroup/cpu/clasp-12-ab/w1/cpu.stat"))
        );
        let shared = Layout {
            hierarchies: vec![hierarchy(Version::V2, "/sys/fs/cgroup/user.slice", true)],
        };
        assert_eq!(Throttling::from_layout(&shared, |_| true), None);
        assert_eq!(Throttling::from_layout(&v1, |_| false), None);
    }

    #[test]
    fn nr_throttled_is_parsed_from_v1_and_v2_cpu_stat() {
        let v1 = "nr_periods 120\nnr_throttled 37\nthrottled_time 912345678\n";
        assert_eq!(parse_nr_throttled(v1), Some(37));
        let v2 = "usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 9\nnr_throttled 0\n";
        assert_eq!(parse_nr_throttled(v2), Some(0));
        assert_eq!(parse_nr_throttled("nr_periods 3\n"), None);
        assert_eq!(parse_nr_throttled("nr_throttled many\n"), None);
        assert_eq!(Throttling { stat: None }.read_periods(), None);
    }

    #[test]
    fn a_clasp_v2_group_is_read_from_cpu_stat() {
        let layout = Layout {
            hierarchies: vec![hierarchy(
                Version::V2,
                "/sys/fs/cgroup/u/clasp-7-cd/w2",
                true,
            )],
        };
        assert_eq!(
            CpuSource::from_layout(&layout, |_| true),
            Some(CpuSource::CgroupV2 {
                stat: PathBuf::from("/sys/fs/cgroup/u/clasp-7-cd/w2/cpu.stat")
            })
        );
    }

    #[test]
    fn a_shared_group_is_not_used() {
        let shared = Layout {
            hierarchies: vec![hierarchy(
                Version::V1,
                "/sys/fs/cgroup/cpu/system.slice",
                true,
            )],
        };
        assert_eq!(CpuSource::from_layout(&shared, |_| true), None);
        let missing = Layout {
            hierarchies: vec![hierarchy(
                Version::V1,
                "/sys/fs/cgroup/cpu/clasp-1-aa/w1",
                true,
            )],
        };
        assert_eq!(CpuSource::from_layout(&missing, |_| false), None);
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

#[cfg(test)]
mod thread_clock_tests {
    use super::thread_cpu_ns_of;

    #[test]
    fn another_thread_s_clock_is_read_by_its_tid_and_no_thread_is_none() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let tid = rustix::thread::gettid().as_raw_nonzero().get() as u64;
            let mut x = 0u64;
            for i in 0..5_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            // Its own reading of its clock, then it only waits.
            tx.send((tid, crate::clock::thread_cpu_ns())).unwrap();
            stop_rx.recv().unwrap();
        });
        let (tid, its_own_ns) = rx.recv().unwrap();
        let read_ns = thread_cpu_ns_of(tid).expect("a running thread's clock");
        // Its clock, read from here: at least what it read itself.
        assert!(read_ns >= its_own_ns, "{read_ns} < {its_own_ns}");
        // And this thread's, by its tid, lies between two reads of its own clock: a thread's
        // clock, not the process's (which holds the other thread's loop too).
        let own_tid = rustix::thread::gettid().as_raw_nonzero().get() as u64;
        let before_ns = crate::clock::thread_cpu_ns();
        let mine_ns = thread_cpu_ns_of(own_tid).expect("this thread's clock");
        let after_ns = crate::clock::thread_cpu_ns();
        assert!(
            (before_ns..=after_ns).contains(&mine_ns),
            "{before_ns} {mine_ns} {after_ns}"
        );
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
        assert_eq!(thread_cpu_ns_of(0), None);
    }
}
