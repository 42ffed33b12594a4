//! A worker's side of leaving a running cluster (the driver's side is its `leave.rs`): once
//! told to leave, the worker asks the driver to move its key groups away and serves on — the
//! migration, the driver's probes, then `FINISH` and `BYE` as at the end of a run — and gives up
//! after the leave timeout. A worker already in the run forgets a peer that left, so that its
//! connections closing is not a lost link.

use super::{Node, NodeError, Running};
use crate::message::Message;
use crate::transport::PeerId;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The worker's leave request.
#[derive(Debug, Default)]
pub(super) struct Leave {
    /// Set when the worker is to leave.
    pub(super) flag: Option<Arc<AtomicBool>>,
    /// How long a leave may take.
    pub(super) timeout: Duration,
    /// When this job's driver was asked to let the worker go.
    pub(super) asked: Option<Instant>,
}

impl Leave {
    /// Whether the worker was told to leave.
    pub(super) fn requested(&self) -> bool {
        self.flag
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Acquire))
    }
}

/// Once told to leave: asks the driver (once per job); fails once the leave took too long.
pub(super) fn tick(node: &mut Node) -> Result<(), NodeError> {
    if !node.leave.requested() {
        return Ok(());
    }
    match node.leave.asked {
        None => {
            tracing::info!("worker {}: leaving; asking the driver", node.id);
            node.leave.asked = Some(Instant::now());
            node.push(&Message::Leave);
            Ok(())
        }
        Some(t) if t.elapsed() > node.leave.timeout => {
            Err(NodeError::LeaveTimeout(node.leave.timeout))
        }
        Some(_) => Ok(()),
    }
}

/// The driver says worker `peer` left the run.
pub(super) fn peer_left(node: &mut Node, run: &mut Running, peer: PeerId) {
    if !node.departed.contains(&peer) {
        node.departed.push(peer);
    }
    run.peers.retain(|&p| p != peer);
}
