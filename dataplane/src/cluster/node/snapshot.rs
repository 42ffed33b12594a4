//! The worker's side of checkpoints (`crate::checkpoint`): on the driver's `Snapshot` at a
//! quiescent cut, every executor copies its key groups into its mailbox; once all have, the
//! network thread answers `Snapshotted` with the counters at the cut — the driver resumes the
//! input on that — and a writer thread writes the copies as this worker's part straight into
//! the checkpoint store, answered by `PartWritten` with the part's checksum. The encoding, the
//! write and the fsync thus run while the input flows, not in the pause. And when a job
//! restores, the parts are read here and each key group handed to the executor that owns it
//! under the job's table, before the executors start.

use super::{Node, Running};
use crate::checkpoint::{CheckpointStore, FileStore, GroupState, Part, read_part};
use crate::message::{Message, PartWritten, RestorePart, Snapshotted};
use crate::routing::Slots;
use crate::runtime::executor::SnapshotBox;
use crate::runtime::messages::Command;
use crate::sink::SinkBarrier;
use clasp_operators::OperatorSummary;
use clasp_protocol::{KeyGroup, RoutingTable};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A job's snapshot mailboxes and the checkpoint being written.
pub(super) struct Snapshots {
    /// Per executor.
    pub(super) boxes: Vec<Arc<Mutex<SnapshotBox>>>,
    /// The checkpoint being taken: (id, store directory, executors that reported).
    pub(super) pending: Option<(u64, String, usize)>,
    /// The part being written, on its own thread: the checkpoint's id and the thread.
    writer: Option<(u64, JoinHandle<PartWritten>)>,
}

impl Drop for Snapshots {
    /// A job that ends while its part is being written waits for the write (tens of ms), so
    /// the process never exits with a part half written.
    fn drop(&mut self) {
        if let Some((_, w)) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Snapshots {
    /// The mailboxes, one per executor.
    pub(super) fn new(boxes: Vec<Arc<Mutex<SnapshotBox>>>) -> Snapshots {
        Snapshots {
            boxes,
            pending: None,
            writer: None,
        }
    }

    /// One executor reported its snapshot.
    pub(super) fn reported(&mut self) {
        if let Some(p) = &mut self.pending {
            p.2 += 1;
        }
    }
}

/// The driver's `Snapshot`: every executor copies its state.
pub(super) fn start(node: &mut Node, run: &mut Running, id: u64, dir: String) {
    if run.snap.pending.is_some() {
        node.fault(format!(
            "snapshot {id} while another is being taken; ignored"
        ));
        return;
    }
    if run.snap.writer.is_some() {
        // The driver gave up waiting for the last part: this checkpoint fails, not the run.
        node.push(&Message::Snapshotted(Box::new(Snapshotted {
            id,
            worker: node.id,
            error: "the previous checkpoint's part is still being written".into(),
            ..Snapshotted::default()
        })));
        return;
    }
    run.snap.pending = Some((id, dir, 0));
    for e in 0..run.executors {
        run.coordinator.command(e, Command::Snapshot);
    }
}

/// Once every executor reported: answers the driver with the counters at the cut, and starts
/// writing this worker's part.
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
    let failed = !answer.error.is_empty();
    node.push(&Message::Snapshotted(Box::new(answer)));
    if failed {
        return;
    }
    let (worker, waker) = (node.id, node.t.waker());
    // Every executor handed its outputs before the cut to the sink's writer before it
    // reported: once the writer passed them, the part may count them.
    let sink = run.coordinator.sink_barrier();
    let spawned = std::thread::Builder::new()
        .name(format!("clasp-ckpt-{id}"))
        .spawn(move || {
            let written = match sink.map_or(Ok(()), SinkBarrier::wait) {
                Ok(()) => write_part(worker, id, &dir, &part),
                Err(e) => PartWritten {
                    id,
                    worker,
                    error: format!("outputs before the cut not written: {e}"),
                    ..PartWritten::default()
                },
            };
            // The network thread collects the result on its next turn.
            waker.wake();
            written
        });
    match spawned {
        Ok(h) => run.snap.writer = Some((id, h)),
        Err(e) => node.push(&Message::PartWritten(Box::new(PartWritten {
            id,
            worker: node.id,
            error: format!("starting the part's writer thread: {e}"),
            ..PartWritten::default()
        }))),
    }
}

/// Writes `part` into the store at `dir` (on the writer thread).
fn write_part(worker: u32, id: u64, dir: &str, part: &Part) -> PartWritten {
    let name = format!("w{worker}.part");
    let mut answer = PartWritten {
        id,
        worker,
        ..PartWritten::default()
    };
    match FileStore::open(dir, crate::checkpoint::KEEP_DEFAULT)
        .and_then(|s| s.write_part(id, &name, part))
    {
        Ok(r) => {
            answer.name = r.name;
            answer.crc32 = r.crc32;
            answer.bytes = r.bytes;
            answer.groups = r.groups;
        }
        Err(e) => answer.error = e.to_string(),
    }
    answer
}

/// Sends `PartWritten` once the writer thread is done.
pub(super) fn collect(node: &mut Node, run: &mut Running) {
    if !run
        .snap
        .writer
        .as_ref()
        .is_some_and(|(_, w)| w.is_finished())
    {
        return;
    }
    let Some((id, w)) = run.snap.writer.take() else {
        return;
    };
    let answer = w.join().unwrap_or_else(|_| PartWritten {
        id,
        worker: node.id,
        error: "the part's writer thread panicked".into(),
        ..PartWritten::default()
    });
    node.push(&Message::PartWritten(Box::new(answer)));
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
