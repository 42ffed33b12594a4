//! A worker's side of joining a running cluster (the driver's side, and why joins fill slots
//! reserved up front, are in the driver's `join.rs`): the joiner asks the driver for the job,
//! then connects to the workers the job names; a worker already in the run connects to a
//! joiner when the driver says it joined.

use super::{ClusterWorkerConfig, Job, Node, NodeError, Running, WAIT_TURN};
use crate::cluster::DRIVER_ID;
use crate::message::Message;
use crate::transport::{Event, PeerId};
use std::net::SocketAddr;
use std::time::Instant;

/// Connects to the driver at `driver` and asks to join with the address this worker listens
/// on (the job then comes as for any worker).
pub(super) fn ask(
    node: &mut Node,
    cfg: &ClusterWorkerConfig,
    driver: SocketAddr,
) -> Result<(), NodeError> {
    let listen = node.t.local_addr();
    if listen.ip().is_unspecified() {
        return Err(NodeError::Job(format!(
            "listening on {listen}: a joining worker tells the others where it listens, so \
             listen on an address they can reach (--listen IP:PORT)"
        )));
    }
    // Dialled for at most the job timeout, and waited for until the attempt says how it ended:
    // a driver that refuses this worker's id (another process is that worker) is refused in
    // each handshake until the attempt's end, and only then says so.
    let start = Instant::now();
    let answer_by = node
        .t
        .connect_within(DRIVER_ID, driver, cfg.job_timeout)
        .map_err(|e| NodeError::transport("connecting to the driver", e))?;
    while !node.t.is_connected(DRIVER_ID) {
        if Instant::now() >= answer_by {
            return Err(NodeError::Driver(format!(
                "not connected to the driver at {driver}: no answer within {} s",
                start.elapsed().as_secs()
            )));
        }
        node.poll(WAIT_TURN, None)?;
        for ev in std::mem::take(&mut node.rx.events) {
            match ev {
                Event::ConnectFailed {
                    peer: DRIVER_ID,
                    id_taken: true,
                    ..
                } => return Err(id_taken(cfg.id)),
                // Another cluster id or secret: asking again cannot change it.
                Event::ConnectFailed {
                    peer: DRIVER_ID,
                    refused: true,
                    reason,
                    ..
                } => {
                    return Err(NodeError::JoinRefused(format!(
                        "the driver at {driver} refused this worker: {reason}"
                    )));
                }
                Event::ConnectFailed { peer, reason, .. }
                | Event::PeerLost { peer, reason, .. }
                    if peer == DRIVER_ID =>
                {
                    return Err(NodeError::Driver(format!(
                        "cannot reach the driver at {driver}: {reason}"
                    )));
                }
                _ => {}
            }
        }
    }
    node.driver = Some(DRIVER_ID);
    node.push(&Message::Join {
        listen: listen.to_string(),
    });
    node.flush_outbox()
}

/// What a joiner is told when the driver already holds a connection under its id: another
/// process is that worker (the transport's handshake says so; `transport/handshake.rs`).
pub(super) fn id_taken(id: PeerId) -> NodeError {
    NodeError::JoinRefused(format!(
        "worker {id} is already in it: the driver holds a connection from another process \
         under --id {id}"
    ))
}

/// A joiner's links: connects to every worker the job names. Returns their ids.
pub(super) fn connect_peers(
    node: &mut Node,
    cfg: &ClusterWorkerConfig,
    job: &Job,
) -> Result<Vec<PeerId>, NodeError> {
    let mut ids = Vec::with_capacity(job.peers.len());
    for (p, addr) in &job.peers {
        if *p == cfg.id || !job.workers.contains(p) {
            return Err(NodeError::Job(format!(
                "the job names worker {p} at {addr:?} as a peer, which is not another of its \
                 workers"
            )));
        }
        let a: SocketAddr = addr
            .parse()
            .map_err(|e| NodeError::Job(format!("worker {p}'s address {addr:?}: {e}")))?;
        node.t
            .connect(*p, a)
            .map_err(|e| NodeError::transport(format!("connecting to worker {p}"), e))?;
        ids.push(*p);
    }
    Ok(ids)
}

/// The driver says worker `peer` joined at `addr`: connect to it (it may be sent requests,
/// markers and state once a move places key groups on it).
pub(super) fn peer_joined(node: &mut Node, run: &mut Running, peer: PeerId, addr: &str) {
    if peer == node.id || !run.slots.workers.contains(&peer) {
        node.fault(format!(
            "worker {peer} joined, which is not a reserved worker of the job; ignored"
        ));
        return;
    }
    let connected = addr
        .parse::<SocketAddr>()
        .map_err(|e| e.to_string())
        .and_then(|a| node.t.connect(peer, a).map_err(|e| e.to_string()));
    match connected {
        Ok(()) if !run.peers.contains(&peer) => run.peers.push(peer),
        Ok(()) => {}
        Err(e) => node.fault(format!("worker {peer} joined at {addr:?}: {e}")),
    }
}
