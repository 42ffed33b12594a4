//! A static cluster: several worker processes and one driver running one app together.
//!
//! The **driver** ([`driver::run_driver`]) is the ingress and the home of every root's latency
//! ledger: it sends each root request over the transport to the worker that owns the root's
//! key group, applies the ledger deltas the workers send back, and runs the end of the stream.
//! Each **worker** ([`node::run_cluster_worker`]) runs E executor threads over its shared-memory
//! segment under the same [`Coordinator`](crate::runtime::coordinator) as a worker on its own,
//! plus one network thread that owns the worker's [`Transport`](crate::transport::Transport):
//! it moves remote-bound request frames from the executors' `net_out` rings into
//! per-destination batches, delivers received frames into the owning executor's ring, and is
//! the coordinator's front (it passes the driver's end-of-stream, plan and stop messages to the
//! coordinator and the executors' reports to the driver). A cluster worker has no local ingress
//! and no local ledger, so a separate coordinator thread would only add a hop on a machine that
//! has few cores already.
//!
//! # The run
//! 1. The driver connects to every worker and sends a [`Job`] (the app, the executors per
//!    worker, how key groups are spread, and the driver's own address). Each worker builds the
//!    same routing table from it (`RoutingTable::spread` over the workers in cluster-file
//!    order), connects back to the driver, and answers `Ready` once its links to the driver
//!    and to every other worker are up (or `Error` with the reason).
//! 2. The driver admits the input, at most `max_in_flight` tracked roots open at a time.
//!    Workers send ledger deltas as control messages, batched per network-thread turn.
//!    Every message is a [`Message`](crate::message::Message) in the one versioned codec.
//! 3. When every tracked root completed, the driver checks global quiescence (below), then
//!    for each operator in topological order: `Eos` to every worker, wait for every worker's
//!    `EosAck` (all its executors flushed that operator), then quiescence again — exactly as
//!    the oracle drains between flushes.
//! 4. `Finish`: each worker stops its executors and sends a [`WorkerSummary`]; then `Bye`.
//!
//! **Quiescence** is detected with counters (Mattern's four-counter method): on a `Probe`, each
//! worker answers whether it is locally idle (executors parked, no overflow, every ring empty)
//! and its cumulative per-peer counts of request frames handed to the transport and of frames
//! delivered into its rings. The system is quiescent when, in two consecutive probe rounds,
//! every worker is idle, every count sent from A to B equals the count B received from A, and
//! no count changed between the rounds.
//!
//! Quiescence must come within the stall timeout of the first probe; the statuses that answer
//! the probes say the workers live, not that the run moves, so they never extend it (a lost
//! link keeps two counts apart for good).
//!
//! A worker's job ends when the driver says `Bye`, or with a report when the driver's connection
//! is lost; the worker then waits for the next job on the same transport
//! ([`node::ClusterWorker`]). The driver fails the run (with the worker's reason) when a
//! worker's connection fails or is lost, or when a worker reports `LinkLost` (its connection to
//! another worker is gone, and with it the requests between the two: the error names both).
//!
//! # Joining and leaving
//! The worker list a run starts with may hold ids reserved for workers that join it later
//! (`Join`): their slots own nothing until they have joined, and a migration's part for them is
//! empty, so the slot list, the routing tables and the quiescence counts stay the ones of a
//! fixed list. A worker told to leave (`Leave`) has its key groups moved away, is probed until
//! nothing is left between it and anyone, sends its summary and goes (`PeerLeft` tells the
//! others); its slots then own nothing, as a reserved worker's. The driver's `join.rs` and
//! `leave.rs` have the steps and why they are sound.

pub mod control;
pub mod driver;
pub mod node;
pub mod script;

use crate::transport::PeerId;

pub use crate::message::{Counters, DELTAS_PER_MESSAGE, Job, Status, WorkerSummary};

/// The driver's peer id. Workers' ids are 1..=`MAX_PEER_ID`.
pub const DRIVER_ID: PeerId = 0;
