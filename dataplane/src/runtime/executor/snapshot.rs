//! An executor's side of checkpoints: at a quiescent cut it copies every key group it owns
//! (the archive a migration would move, with the state left in place) into its snapshot
//! mailbox, which the network thread writes out as the worker's part; and when a job restores
//! from a checkpoint, it imports the groups the mailbox holds for it before it starts.
//!
//! The mailbox is in-process memory shared with the network thread, like the plan mailbox:
//! a whole worker's state does not fit the report ring, and it never has to leave the process
//! as a message (the network thread writes it to the checkpoint store directly).

use super::Engine;
use crate::checkpoint::GroupState;
use crate::runtime::messages::Report;
use clasp_operators::key::KEY_GROUPS;
use clasp_operators::{OperatorInstance, OperatorSummary};

/// What an executor left in its mailbox at a cut.
#[derive(Debug, Default)]
pub struct ExecutorSnapshot {
    /// Every key group it owned, per operator.
    pub groups: Vec<GroupState>,
    /// Per operator: its instance's counters and digests at the cut.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: malformed requests by reason at the cut.
    pub malformed: Vec<Vec<(&'static str, u64)>>,
}

/// An executor's snapshot mailbox (module docs).
#[derive(Debug, Default)]
pub struct SnapshotBox {
    /// Filled by the executor on `Command::Snapshot`, taken by the network thread.
    pub taken: Option<ExecutorSnapshot>,
    /// Key groups to import before the executor starts (a restored job).
    pub restore: Vec<GroupState>,
}

/// Imports `groups` into `instances`. An archive that does not import (another app's, a
/// damaged one that passed the checksum) is an error naming the operator and key group.
pub(super) fn restore(
    instances: &mut [Box<dyn OperatorInstance>],
    groups: &[GroupState],
) -> Result<(), String> {
    for g in groups {
        let inst = instances.get_mut(usize::from(g.operator)).ok_or_else(|| {
            format!(
                "a restored group of operator {}, which the app lacks",
                g.operator
            )
        })?;
        inst.import_group(g.key_group, &g.archive).map_err(|e| {
            format!(
                "restoring key group {} of operator {}: {e}",
                g.key_group, g.operator
            )
        })?;
    }
    Ok(())
}

impl Engine {
    /// `Command::Snapshot`: every owned key group copied, the counters, into the
    /// mailbox; then `Report::Snapshotted`.
    pub(super) fn snapshot(&mut self) {
        debug_assert!(
            self.local.is_empty(),
            "requests to itself ran before a snapshot"
        );
        let mut groups = Vec::new();
        for (op, inst) in self.instances.iter().enumerate() {
            for kg in 0..KEY_GROUPS {
                if self.table.slot(op, kg) != self.my_slot {
                    continue;
                }
                groups.push(GroupState {
                    operator: op as u16,
                    key_group: kg,
                    archive: inst.copy_group(kg),
                });
            }
        }
        let snap = ExecutorSnapshot {
            groups,
            summaries: self.instances.iter().map(|i| i.summary()).collect(),
            malformed: self
                .instances
                .iter()
                .map(|i| i.malformed_reasons())
                .collect(),
        };
        let fault = match self.net.as_ref().map(|n| n.snapshot.lock()) {
            Some(Ok(mut b)) => {
                b.taken = Some(snap);
                None
            }
            Some(Err(_)) => Some("a snapshot mailbox is poisoned"),
            None => Some("a snapshot without a network thread"),
        };
        if let Some(f) = fault {
            self.report_error(f.into());
        }
        // The outputs before the cut go to the sink's writer before the cut is reported: the
        // worker's part waits for the writer to pass them (`crate::sink`, "Written before a
        // checkpoint counts").
        self.flush_sink();
        self.push_report(&Report::Snapshotted);
    }
}
