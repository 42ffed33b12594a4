//! The worker's side of checkpoints (`crate::checkpoint`): on the driver's `Snapshot` at a
//! quiescent cut, every executor exports its key groups into its mailbox; once all have, the
//! network thread writes them as this worker's part straight into the checkpoint store and
//! answers `Snapshotted` with the part's checksum and the counters at the cut. And when a job
//! restores, the parts are read here and each key group handed to the executor that owns it
//! under the job's table, before the executors start.

use super::{Node, Running};
use crate::checkpoint::{CheckpointStore, FileStore, GroupState, Part, read_part};
use crate::message::{Message, RestorePart, Snapshotted};
use crate::routing::Slots;
use crate::runtime::executor::SnapshotBox;
use crate::runtime::messages::Command;
use clasp_operators::OperatorSummary;
use clasp_protocol::{KeyGroup, RoutingTable};
use std::sync::{Arc, Mutex};

/// A job's snapshot mailboxes and the checkpoint being written.
#[derive(Default)]
pub(super) struct Snapshots {
    /// Per executor.
    pub(super) boxes: Vec<Arc<Mutex<SnapshotBox>>>,
    /// The checkpoint being taken: (id, store directory, executors that reported).
    pub(super) pending: Option<(u64, String, usize)>,
}

impl Snapshots {
    /// One executor reported its snapshot.
    pub(super) fn reported(&mut self) {
        if let Some(p) = &mut self.pending {
            p.2 += 1;
        }
    }
}

/// The driver's `Snapshot`: every executor exports.
pub(super) fn start(node: &mut Node, run: &mut Running, id: u64, dir: String) {
    if run.snap.pending.is_some() {
        node.fault(format!(
            "snapshot {id} while another is being taken; ignored"
        ));
        return;
    }
    run.snap.pending = Some((id, dir, 0));
    for e in 0..run.executors {
        run.coordinator.command(e, Command::Snapshot);
    }
}

/// Once every executor reported: writes this worker's part and answers the driver.
pub(super) fn advance(node: &mut Node, run: &mut Running) {
    match &run.snap.pending {
        Some((_, _, n)) if *n >= run.executors => {}
        _ => return,
    }
    let Some((id, dir, _)) = run.snap.pending.take() else {
        return;
    };
    let ops = run.spec.operators.len();
    let mut answer = Snapshotted {
        id,
        worker: node.id,
        summaries: vec![OperatorSummary::default(); ops],
        malformed: vec![Vec::new(); ops],
        ..Snapshotted::default()
    };
    let mut part = Part {
        worker: node.id,
        groups: Vec::new(),
    };
    for b in &run.snap.boxes {
        let taken = b.lock().ok().and_then(|mut b| b.taken.take());
        let Some(s) = taken else {
            answer.error = "an executor left no snapshot".into();
            continue;
        };
        part.groups.extend(s.groups);
        for (op, sum) in s.summaries.iter().enumerate().take(ops) {
            answer.summaries[op].combine(sum);
        }
        for (op, reasons) in s.malformed.iter().enumerate().take(ops) {
            for &(r, n) in reasons {
                add_reason(&mut answer.malformed[op], r, n);
            }
        }
    }
    if answer.error.is_empty() {
        let name = format!("w{}.part", node.id);
        match FileStore::open(&dir, crate::checkpoint::KEEP_DEFAULT)
            .and_then(|s| s.write_part(id, &name, &part))
        {
            Ok(r) => {
                answer.name = r.name;
                answer.crc32 = r.crc32;
                answer.bytes = r.bytes;
                answer.groups = r.groups;
            }
            Err(e) => answer.error = e.to_string(),
        }
    }
    node.push(&Message::Snapshotted(Box::new(answer)));
}

fn add_reason(v: &mut Vec<(String, u64)>, reason: &str, n: u64) {
    match v.iter_mut().find(|(r, _)| r == reason) {
        Some(e) => e.1 += n,
        None => v.push((reason.to_string(), n)),
    }
}

/// Reads the job's checkpoint parts and sorts their key groups by the executor of this worker
/// (`index` in `slots`) that owns each under `table`; groups owned elsewhere are dropped.
pub(super) fn restore_groups(
    parts: &[RestorePart],
    table: &RoutingTable,
    slots: &Slots,
    index: usize,
) -> Result<Vec<Vec<GroupState>>, String> {
    let base = slots.slot(index, 0).index();
    let mut per_executor: Vec<Vec<GroupState>> = vec![Vec::new(); slots.executors];
    for p in parts {
        let part = read_part(std::path::Path::new(&p.path), p.crc32).map_err(|e| e.to_string())?;
        for g in part.groups {
            let op = usize::from(g.operator);
            if op >= table.operators() || usize::from(g.key_group) >= table.key_groups() {
                return Err(format!(
                    "{}: operator {} key group {}, outside the job's table",
                    p.path, g.operator, g.key_group
                ));
            }
            let e = table
                .owner(op, KeyGroup(g.key_group))
                .index()
                .wrapping_sub(base);
            if e < slots.executors {
                per_executor[e].push(g);
            }
        }
    }
    Ok(per_executor)
}
