//! A run's cgroups: one parent `clasp-<pid>-<random hex>` under this process's own group in
//! every hierarchy of the [`Layout`], and one child `w<ID>` per worker, capped in the
//! hierarchy that caps. The guard removes them all when dropped — at the end of a run, on
//! failure — and [`RunGroups::remove_now`] removes them earlier (e.g. on a signal).
//!
//! A v1 group cannot be removed while a task is in it, and a worker that just exited may
//! still count for a moment, so removal retries briefly.

use super::cap::CpuCap;
use super::detect::{Hierarchy, Layout, Version, detect};
use std::ffi::CString;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long removal retries a group that still holds tasks.
const REMOVE_RETRY: Duration = Duration::from_secs(3);
/// Pause between removal tries.
const REMOVE_PAUSE: Duration = Duration::from_millis(10);

/// The groups of one run; removed when dropped.
pub struct RunGroups {
    layout: Layout,
    /// `clasp-<pid>-<hex>`.
    name: String,
    ids: Vec<u32>,
}

impl RunGroups {
    /// Creates the parent and a capped child `w<id>` per id, in every hierarchy this process
    /// is in; on any failure removes what it made and says what failed.
    pub fn create(cap: &CpuCap, ids: &[u32]) -> Result<RunGroups, String> {
        let layout = detect()?;
        let name = format!("clasp-{}-{}", std::process::id(), random_hex()?);
        // The guard exists before the first directory, so an error below removes them.
        let groups = RunGroups {
            layout,
            name,
            ids: ids.to_vec(),
        };
        for h in &groups.layout.hierarchies {
            groups.create_in(h, cap)?;
        }
        Ok(groups)
    }

    fn create_in(&self, h: &Hierarchy, cap: &CpuCap) -> Result<(), String> {
        let parent = h.own_dir.join(&self.name);
        if h.version == Version::V2 {
            // The cpu controller must be handed down to the parent and from it to the workers.
            write(&h.own_dir.join("cgroup.subtree_control"), "+cpu")?;
        }
        mkdir(&parent)?;
        if h.version == Version::V2 {
            write(&parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        for &id in &self.ids {
            let dir = parent.join(format!("w{id}"));
            mkdir(&dir)?;
            match (h.caps, h.version) {
                (false, _) => {}
                (true, Version::V2) => write(
                    &dir.join("cpu.max"),
                    &format!("{} {}", cap.quota_us, cap.period_us),
                )?,
                (true, Version::V1) => {
                    write(&dir.join("cpu.cfs_period_us"), &cap.period_us.to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &cap.quota_us.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Worker `id`'s group directory in each hierarchy (the capping one first).
    pub fn worker_dirs(&self, id: u32) -> Vec<PathBuf> {
        self.layout
            .hierarchies
            .iter()
            .map(|h| h.own_dir.join(&self.name).join(format!("w{id}")))
            .collect()
    }

    /// Worker `id`'s `cgroup.procs` files, ready for a raw `open` between fork and exec.
    pub fn worker_procs(&self, id: u32) -> Result<Vec<CString>, String> {
        self.worker_dirs(id)
            .iter()
            .map(|d| procs_cstring(&d.join("cgroup.procs")))
            .collect()
    }

    /// This process's original group's `cgroup.procs` in each hierarchy.
    pub fn home_procs(&self) -> Vec<PathBuf> {
        self.layout
            .hierarchies
            .iter()
            .map(|h| h.own_dir.join("cgroup.procs"))
            .collect()
    }

    /// Removes the workers' groups and the parent in every hierarchy, now. Safe to call more
    /// than once (a group already gone counts as removed). Retries groups that still hold
    /// tasks for a moment; the first failure is returned after trying all.
    pub fn remove_now(&self) -> Result<(), String> {
        let mut first_err = None;
        for h in &self.layout.hierarchies {
            let parent = h.own_dir.join(&self.name);
            let dirs = self.ids.iter().map(|id| parent.join(format!("w{id}")));
            for d in dirs.chain(std::iter::once(parent.clone())) {
                if let Err(e) = rmdir_retrying(&d) {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for RunGroups {
    fn drop(&mut self) {
        if let Err(e) = self.remove_now() {
            tracing::warn!("cgroup cleanup: {e}");
        }
    }
}

/// `path` as a C string (cgroup paths never hold a NUL byte; one that did is an error).
pub fn procs_cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a NUL byte in a cgroup path", path.display()))
}

/// Writes `value` into a cgroup file.
pub fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("writing {value:?} to {}: {e}", path.display()))
}

fn mkdir(path: &Path) -> Result<(), String> {
    std::fs::create_dir(path).map_err(|e| format!("creating cgroup {}: {e}", path.display()))
}

/// Removes a group, retrying while it still holds tasks; a missing group is success.
fn rmdir_retrying(path: &Path) -> Result<(), String> {
    let deadline = Instant::now() + REMOVE_RETRY;
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error())
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(REMOVE_PAUSE);
            }
            Err(e) => return Err(format!("removing cgroup {}: {e}", path.display())),
        }
    }
}

/// 8 hex digits from the OS's random source: two runs of the same pid (a container restart)
/// never share a group name.
fn random_hex() -> Result<String, String> {
    use std::io::Read as _;
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("reading /dev/urandom for a cgroup name: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
