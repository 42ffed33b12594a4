//! A run's cgroups: one parent `clasp-<pid>-<random hex>` under this process's own group in
//! every hierarchy of the [`Layout`], and one child `w<ID>` per worker, capped in the
//! hierarchy that caps. The guard removes them all when dropped — at the end of a run, on
//! failure — and [`RunGroups::remove_now`] removes them earlier (e.g. on a signal).
//!
//! A v1 group cannot be removed while a task is in it, and a worker that just exited may
//! still count for a moment, so removal retries briefly.

use super::cap::CpuCap;
use super::detect::{Layout, Version, detect};
use super::v2::{HandedDown, LEAD_LEAF, hand_down_cpu, take_back_cpu};
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
    /// What handing `cpu` down a v2 hierarchy changed (nothing on v1).
    v2: HandedDown,
}

impl RunGroups {
    /// Creates the parent and a capped child `w<id>` per id, in every hierarchy this process
    /// is in; on any failure removes what it made and says what failed.
    pub fn create(cap: &CpuCap, ids: &[u32]) -> Result<RunGroups, String> {
        let layout = detect()?;
        let name = format!("clasp-{}-{}", std::process::id(), random_hex()?);
        // The guard exists before the first directory, so an error below removes them.
        let mut groups = RunGroups {
            layout,
            name,
            ids: ids.to_vec(),
            v2: HandedDown::default(),
        };
        for i in 0..groups.layout.hierarchies.len() {
            groups.create_in(i, cap)?;
        }
        Ok(groups)
    }

    fn create_in(&mut self, i: usize, cap: &CpuCap) -> Result<(), String> {
        let h = &self.layout.hierarchies[i];
        let parent = h.own_dir.join(&self.name);
        mkdir(&parent)?;
        if h.version == Version::V2 {
            // The cpu controller must be handed down to the parent and from it to the workers.
            hand_down_cpu(&h.own_dir, &parent, &mut self.v2)?;
        }
        let h = &self.layout.hierarchies[i];
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

    /// Where this process goes when it leaves a worker's group, in each hierarchy: its
    /// original group, or the run's `lead` leaf where v2 made it move there.
    pub fn lead_procs(&self) -> Vec<PathBuf> {
        self.layout
            .hierarchies
            .iter()
            .map(|h| match h.version {
                Version::V2 if self.v2.moved_to_leaf => h.own_dir.join(&self.name).join(LEAD_LEAF),
                _ => h.own_dir.clone(),
            })
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Removes the workers' groups and the parent in every hierarchy, now. Safe to call more
    /// than once (a group already gone counts as removed). Retries groups that still hold
    /// tasks for a moment; the first failure is returned after trying all.
    pub fn remove_now(&self) -> Result<(), String> {
        let mut first_err = None;
        let mut note = |r: Result<(), String>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        for h in &self.layout.hierarchies {
            let parent = h.own_dir.join(&self.name);
            for id in &self.ids {
                note(rmdir_retrying(&parent.join(format!("w{id}"))));
            }
            if h.version == Version::V2 && parent.exists() {
                note(take_back_cpu(&h.own_dir, &parent, self.v2));
                note(rmdir_retrying(&parent.join(LEAD_LEAF)));
            }
            note(rmdir_retrying(&parent));
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
