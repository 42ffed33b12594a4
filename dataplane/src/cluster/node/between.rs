//! Between jobs: a worker that outlives runs dials the cluster file's other workers and waits
//! for a driver's job. What happens meanwhile is not a job's: a peer it cannot reach then is
//! logged and dialled again when the job comes, never handed to the next driver as a fault; a
//! joiner that loses the driver it asked goes back to asking.

use super::{ClusterWorkerConfig, JOB_WAIT_TURN, Job, Node, NodeError};
use crate::cluster::DRIVER_ID;
use crate::message::{Message, MessageError};
use crate::transport::Event;
use std::time::Instant;

/// Dials every other worker of the cluster file whose link went away since the last job (a
/// link that is up or being set up is left alone). Done again when a job comes: a worker
/// replaced after a recovery may have lost its link to us only after our previous job ended
/// (a stopped worker, killed by the driver once it gave up on it).
pub(super) fn dial_cluster_peers(
    node: &mut Node,
    cfg: &ClusterWorkerConfig,
) -> Result<(), NodeError> {
    for &(p, addr) in cfg.workers.iter().filter(|w| w.0 != cfg.id) {
        node.t
            .connect(p, addr)
            .map_err(|e| NodeError::transport(format!("connecting to worker {p}"), e))?;
    }
    Ok(())
}

/// Waits for the driver's job (other messages before it are dropped). The job timeout does not
/// run out while a driver is connected: a driver connects to every worker before it sends the
/// job, and may wait for one it cannot reach for half a minute; timing out then would fail its
/// run naming this worker, not the one it waits for. A driver that goes away without a job
/// starts the timeout afresh.
pub(super) fn await_job(node: &mut Node, cfg: &ClusterWorkerConfig) -> Result<Job, NodeError> {
    let mut deadline = Instant::now() + cfg.job_timeout;
    let mut driver_connected = false;
    loop {
        if node.leave.requested() {
            return Err(NodeError::Stopped);
        }
        node.poll(JOB_WAIT_TURN, None)?;
        // Messages first: a job or a refusal that came with the loss of the driver is not lost.
        let first = node.rx.msgs.drain(..).find(|m| {
            matches!(
                m.1,
                Ok(Message::Job(_) | Message::JoinRefused { .. })
                    | Err(MessageError::Version { .. })
            )
        });
        match first {
            Some((_, Ok(Message::Job(job)))) => return Ok(*job),
            Some((_, Ok(Message::JoinRefused { reason, later }))) => {
                return Err(if later {
                    NodeError::Driver(format!("the run did not take this worker yet: {reason}"))
                } else {
                    NodeError::JoinRefused(reason)
                });
            }
            Some((from, Err(source))) => return Err(NodeError::BadJob { from, source }),
            _ => {}
        }
        // Refused connections are counted and logged by the transport; not faults. Nor is a
        // peer missed before any job (down, or being restarted): the job's start dials it
        // again, and a failure then is that job's (the driver hears of the link, not of this
        // old attempt, which would fail a run whose workers are all up by then).
        for ev in std::mem::take(&mut node.rx.events) {
            match ev {
                // A joiner has asked the driver: losing it means asking again (a recovery
                // restarts the job), unless its id is taken.
                Event::ConnectFailed {
                    peer: DRIVER_ID,
                    id_taken: true,
                    ..
                } if cfg.join.is_some() => return Err(super::join::id_taken(cfg.id)),
                Event::ConnectFailed { peer, reason, .. }
                | Event::PeerLost { peer, reason, .. }
                    if peer == DRIVER_ID && cfg.join.is_some() =>
                {
                    return Err(NodeError::Driver(format!(
                        "lost the driver's connection before the job came: {reason} (the run \
                         restarting its job?)"
                    )));
                }
                // (A joiner has its own budget for asking: `join.rs`.)
                Event::PeerUp {
                    peer: DRIVER_ID, ..
                } if cfg.join.is_none() => driver_connected = true,
                Event::PeerLost {
                    peer: DRIVER_ID, ..
                } if cfg.join.is_none() => {
                    driver_connected = false;
                    deadline = Instant::now() + cfg.job_timeout;
                }
                Event::ConnectFailed { peer, reason, .. } => tracing::warn!(
                    "worker {}: cannot reach worker {peer} before any job: {reason}; \
                     dialled again when a job comes",
                    node.id
                ),
                _ => {}
            }
        }
        node.rx.msgs.clear();
        if !driver_connected && Instant::now() >= deadline {
            return Err(NodeError::NoJob {
                id: cfg.id,
                timeout: cfg.job_timeout,
            });
        }
    }
}
