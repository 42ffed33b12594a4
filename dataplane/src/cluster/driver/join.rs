//! Workers that join a running cluster (`clasp worker --join`).
//!
//! Slots, routing tables, quiescence counts and the migration protocol all name workers by a
//! fixed list, so rather than grow that list mid-run the driver reserves it up front: the
//! cluster's slots cover the workers it starts with *and* the ids reserved for joiners
//! ([`DriverConfig::joinable`](super::DriverConfig::joinable)). A reserved worker's slots own
//! no key group until it has joined; a migration's plan for them is empty (they host nothing
//! under the old table or the new one, so no fence, marker or state concerns them), and the
//! driver completes their part of it itself. Joining fills a reserved slot:
//!
//! 1. The joiner connects to the driver (authenticated with the cluster secret, as any worker)
//!    and sends `Join` with its listen address. Joins are taken in the order of the reserved
//!    ids, so the workers in use are always the first ones (the placements of the planner and
//!    of `--moves` are "the first N workers").
//! 2. Between migrations (never during one), the driver connects to it, sends it the job with
//!    the *current* routing table and epoch and the addresses of the workers, and tells every
//!    worker to connect to it (`PeerJoined`). No migration starts until the join ends.
//! 3. The joiner answers `Ready` once its links to the driver and to every worker are up; from
//!    then on it is a worker of the run like the others (probes, end of stream, summary), and
//!    the controller hears of it ([`Controller::on_joined`]) so a later move can place key
//!    groups on it. A joiner that is not ready within the ready timeout is dropped (logged; the
//!    run goes on without it).
//!
//! A move that places key groups on a worker that has not joined is held until it has.

use super::{Driver, DriverError};
use crate::cluster::control::{Controller, Move, active_workers};
use crate::message::{Message, RoutingRow, encode};
use crate::transport::PeerId;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

/// Where a join is.
#[derive(Debug)]
enum Phase {
    /// The driver connects to the joiner.
    Connecting,
    /// The job went out; waiting for `Ready`.
    Starting { ready: bool },
}

/// A join under way.
#[derive(Debug)]
struct Joining {
    id: PeerId,
    addr: SocketAddr,
    since: Instant,
    phase: Phase,
}

/// The joins of a run.
#[derive(Debug, Default)]
pub(super) struct Joins {
    /// Joiners that asked, in order, not yet started.
    queued: VecDeque<(PeerId, SocketAddr)>,
    current: Option<Joining>,
    /// A move waiting for a join to end or for its workers to join.
    held: Option<Move>,
    /// The held move was said to wait for workers (said once per move).
    said: bool,
    /// Joins not taken, said to the joiners (`refusal.rs`).
    pub(super) refusals: super::refusal::Refusals,
    /// Joiners whose join failed (logged then): the loss of their connection that follows is
    /// no news.
    pub(super) failed: std::collections::BTreeSet<PeerId>,
}

impl Joins {
    /// Whether a join is under way.
    pub(super) fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Whether a move waits for a worker to join.
    pub(super) fn holds_a_move(&self) -> bool {
        self.held.is_some()
    }

    /// Whether `peer` is joining (asked, or under way).
    pub(super) fn is_joining(&self, peer: PeerId) -> bool {
        self.current.as_ref().is_some_and(|j| j.id == peer)
            || self.queued.iter().any(|q| q.0 == peer)
    }
}

impl Driver<'_> {
    /// A worker asked to join.
    pub(super) fn on_join(&mut self, from: PeerId, listen: &str) {
        if self.ids.contains(&from) || self.joins.is_joining(from) {
            // Asked twice (a worker of the run, or one whose join is under way or queued;
            // a second process under a worker's id is refused by the transport before it
            // can ask): nothing changes.
            tracing::warn!(
                "worker {from} asked to join again, and is in the run or joining; ignored"
            );
            return;
        }
        let addr = match listen.parse::<SocketAddr>() {
            Ok(addr) => addr,
            Err(e) => {
                tracing::warn!("worker {from} asked to join at {listen:?}: {e}; ignored");
                return;
            }
        };
        let next = self.cfg.joinable.iter().copied().find(|&p| {
            !self.ids.contains(&p) && !self.joins.is_joining(p) && !self.leaves.left.contains(&p)
        });
        let (reason, later) = if self.leaves.left.contains(&from) {
            (format!("worker {from} left this run"), false)
        } else if !self.cfg.joinable.contains(&from) {
            let reserved = match self.cfg.joinable.as_slice() {
                [] => "this run reserved no ids for workers that join".to_string(),
                ids => format!("this run reserved ids {ids:?} for workers that join"),
            };
            (
                format!("worker {from} is not one of its ids: {reserved}"),
                false,
            )
        } else if let Some(next) = next.filter(|&n| n != from) {
            let why = "reserved ids join in order";
            (format!("worker {next} must join first ({why})"), true)
        } else {
            self.joins.queued.push_back((from, addr));
            // Told "not yet" before, taken now: its connection's fate is the join's again.
            self.joins.refusals.forget(from);
            return;
        };
        self.refuse_join(from, addr, reason, later);
    }

    /// Whether a join is under way (leaves wait for it).
    pub(super) fn joins_busy(&self) -> bool {
        self.joins.current.is_some()
    }

    /// A joiner said `Ready`; whether `from` was one.
    pub(super) fn on_join_ready(&mut self, from: PeerId) -> bool {
        match &mut self.joins.current {
            Some(Joining {
                id,
                phase: Phase::Starting { ready },
                ..
            }) if *id == from => {
                *ready = true;
                true
            }
            _ => false,
        }
    }

    /// A connection to `peer`, which is not a worker of the run (yet), failed or was lost: if
    /// it was joining, the join is dropped. Whether it was.
    pub(super) fn join_failed(&mut self, peer: PeerId, reason: &str) -> bool {
        if self.joins.current.as_ref().is_some_and(|j| j.id == peer) {
            self.joins.current = None;
        } else if self.joins.queued.iter().any(|q| q.0 == peer) {
            self.joins.queued.retain(|q| q.0 != peer);
        } else {
            return false;
        }
        tracing::warn!("worker {peer} did not join: {reason}");
        self.joins.failed.insert(peer);
        true
    }

    /// One step of the join under way (or the start of the next, between migrations).
    pub(super) fn advance_joins(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        self.send_refusals();
        if self.joins.current.is_none() && self.mig.in_flight.is_none() {
            if let Some((id, addr)) = self.joins.queued.pop_front() {
                self.t
                    .connect(id, addr)
                    .map_err(|e| DriverError::transport(format!("to joining worker {id}"), e))?;
                self.joins.current = Some(Joining {
                    id,
                    addr,
                    since: Instant::now(),
                    phase: Phase::Connecting,
                });
            }
        }
        let Some(j) = &self.joins.current else {
            return Ok(());
        };
        let (id, addr) = (j.id, j.addr);
        if j.since.elapsed() > self.cfg.ready_timeout {
            let what = format!("not ready within {:?}", self.cfg.ready_timeout);
            self.join_failed(id, &what);
            return Ok(());
        }
        match j.phase {
            Phase::Connecting if self.t.is_connected(id) => {
                let peers = self.ids.iter().map(|&p| (p, self.addr_of(p))).collect();
                let mut job = self.job(peers);
                job.epoch = self.mig.planner.routing().epoch().0;
                job.routing = (self.mig.planner.routing().rows())
                    .map(RoutingRow::of)
                    .collect();
                let body = encode(&Message::Job(Box::new(job))).map_err(|source| {
                    DriverError::Message {
                        worker: super::DRIVER_ID,
                        source,
                    }
                })?;
                self.send_control(id, &body, "job to joining worker")?;
                let addr = addr.to_string();
                self.broadcast(&Message::PeerJoined { peer: id, addr })?;
                if let Some(j) = &mut self.joins.current {
                    j.phase = Phase::Starting { ready: false };
                }
            }
            Phase::Starting { ready: true } => {
                self.joins.current = None;
                self.ids.push(id);
                self.addrs.insert(id, addr);
                tracing::info!("worker {id} at {addr} joined the run");
                let index = self.slots.workers.iter().position(|&p| p == id);
                ctl.on_joined(index.unwrap_or(0), self.ids.len());
            }
            _ => {}
        }
        Ok(())
    }

    /// Waits until no join is under way (before the end of the stream: a joiner that got the
    /// job ends it with the others); joins still queued are dropped.
    pub(super) fn settle_joins(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        for (id, _) in std::mem::take(&mut self.joins.queued) {
            tracing::warn!("worker {id} asked to join as the run ended; not started");
        }
        while self.joins.current.is_some() {
            self.advance_joins(ctl)?;
            self.turn(super::DRIVER_PARK)?;
        }
        if let Some(m) = self.joins.held.take() {
            tracing::warn!(
                "a move ({}) waited for workers that never joined; not made",
                m.reason
            );
        }
        Ok(())
    }

    /// Drops a held move that places key groups on worker `id`, which left (it would wait for
    /// ever); the controller decides again.
    pub(super) fn drop_held_onto(&mut self, id: PeerId) {
        let Some(i) = self.slots.workers.iter().position(|&p| p == id) else {
            return;
        };
        let onto = |m: &Move| active_workers(&m.routing, &self.slots).contains(&i);
        if let Some(m) = self.joins.held.take_if(|m| onto(m)) {
            tracing::warn!(
                "a move ({}) placed key groups on worker {id}, which left; dropped",
                m.reason
            );
        }
    }

    /// Takes `mv` (the newest move wins over a held one) and returns the move to start now, if
    /// any: none while a join is under way or while the move places key groups on a worker
    /// that has not joined.
    pub(super) fn move_to_start(&mut self, mv: Option<Move>) -> Option<Move> {
        if let Some(m) = mv {
            self.joins.held = Some(m);
            self.joins.said = false;
        }
        if self.joins.current.is_some() || self.leaves.busy() {
            return None;
        }
        let m = self.joins.held.take()?;
        let absent: Vec<PeerId> = active_workers(&m.routing, &self.slots)
            .into_iter()
            .map(|i| self.slots.workers[i])
            .filter(|p| !self.ids.contains(p))
            .collect();
        if absent.is_empty() {
            return Some(m);
        }
        if !std::mem::replace(&mut self.joins.said, true) {
            tracing::warn!(
                "a move ({}) places key groups on workers {absent:?}, which have not joined: \
                 held until they have",
                m.reason
            );
        }
        self.joins.held = Some(m);
        None
    }
}
