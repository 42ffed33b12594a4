//! `clasp worker --worker-cpu F` started by hand: the worker makes its own parent group and
//! child `w<ID>` and moves itself in first thing, while it is still single-threaded (every
//! thread it starts later is born inside). On exit it moves itself back to the group it came
//! from — a group with a task in it cannot be removed — and removes both.

use super::cap::CpuCap;
use super::group::{RunGroups, write};

/// This process's own capped group; left and removed when dropped.
pub struct OwnGroup {
    groups: RunGroups,
}

impl OwnGroup {
    /// Creates the groups for worker `id` and moves this process into them.
    pub fn enter(cap: &CpuCap, id: u32) -> Result<OwnGroup, String> {
        let groups = RunGroups::create(cap, &[id])?;
        let own = OwnGroup { groups };
        for dir in own.groups.worker_dirs(id) {
            write(&dir.join("cgroup.procs"), "0")?;
        }
        Ok(own)
    }

    /// Moves this process back to its original groups and removes its own, now.
    pub fn leave_now(&self) -> Result<(), String> {
        for procs in self.groups.lead_procs() {
            write(&procs, "0")?;
        }
        self.groups.remove_now()
    }
}

impl Drop for OwnGroup {
    fn drop(&mut self) {
        if let Err(e) = self.leave_now() {
            tracing::warn!("cgroup cleanup: {e}");
        }
    }
}
