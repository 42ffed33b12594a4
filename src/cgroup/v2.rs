//! Handing the cpu controller down a v2 hierarchy, and taking it back.
//!
//! In v2 a group may enable a controller for its children (`cgroup.subtree_control`) only
//! while it holds no process itself (the root group excepted). A delegated group — e.g. a
//! `systemd-run --scope -p Delegate=yes` scope — holds this very process, so the process first
//! moves into a leaf `lead` of the run's parent group; then its original group, holding no
//! process, can hand `cpu` down to the parent and the parent to the workers' groups. On removal
//! the steps run backwards: the controller is taken back, the process moves home, the leaf
//! goes.

use super::group::write;
use std::path::Path;

/// The leaf this process moves into when its own group must hand `cpu` down.
pub const LEAD_LEAF: &str = "lead";

/// What [`hand_down_cpu`] changed, for [`take_back_cpu`].
#[derive(Clone, Copy, Debug, Default)]
pub struct HandedDown {
    /// This process moved into `parent/lead`.
    pub moved_to_leaf: bool,
    /// `+cpu` was written into the own group's `cgroup.subtree_control` (it was not there).
    pub enabled_in_own: bool,
}

/// Enables `cpu` for the children of `own` and of `parent` (an existing child of `own`),
/// moving this process into `parent/lead` first when `own` must be empty of processes.
/// `done` records each change as it is made, so a failure part-way can still be undone.
pub fn hand_down_cpu(own: &Path, parent: &Path, done: &mut HandedDown) -> Result<(), String> {
    let own_control = own.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&own_control).unwrap_or_default();
    if !enabled.split_whitespace().any(|c| c == "cpu") {
        if std::fs::write(&own_control, "+cpu").is_err() {
            let leaf = parent.join(LEAD_LEAF);
            std::fs::create_dir(&leaf)
                .map_err(|e| format!("creating cgroup {}: {e}", leaf.display()))?;
            write(&leaf.join("cgroup.procs"), "0")?;
            if let Err(e) = write(&own_control, "+cpu") {
                // Home again, so the guard can remove the leaf and the parent.
                let _ = std::fs::write(own.join("cgroup.procs"), "0");
                return Err(format!(
                    "{e} (the group this process started in holds other processes)"
                ));
            }
            done.moved_to_leaf = true;
        }
        done.enabled_in_own = true;
    }
    write(&parent.join("cgroup.subtree_control"), "+cpu")
}

/// Undoes [`hand_down_cpu`] once the workers' groups are gone: takes `cpu` back and moves
/// this process home. Best effort on the controller (another user of the own group may still
/// need it); the move home is required before `parent` can be removed.
pub fn take_back_cpu(own: &Path, parent: &Path, done: HandedDown) -> Result<(), String> {
    let _ = std::fs::write(parent.join("cgroup.subtree_control"), "-cpu");
    if done.enabled_in_own {
        let _ = std::fs::write(own.join("cgroup.subtree_control"), "-cpu");
    }
    if done.moved_to_leaf {
        write(&own.join("cgroup.procs"), "0")?;
    }
    Ok(())
}
