//! Workers that leave a running cluster (SIGTERM to `clasp worker`).
//!
//! A worker that is told to leave asks the driver (`Leave`) and serves on. Between migrations,
//! with no join under way, the driver:
//! 1. moves the leaver's key groups to the other workers (a live migration like any other:
//!    state and queued requests go with them; the other workers' key groups stay put);
//! 2. waits until nothing is left between the leaver and anyone: probe rounds until, twice in
//!    a row with the same counts, the leaver is idle and every count of request frames sent to
//!    it or by it equals the count received at the other end (after the migration no table
//!    routes anything to it, so nothing more can come);
//! 3. sends it `FINISH` (its summary holds what it processed while it held key groups and
//!    counts in the run's totals), removes it from the run, tells the others it left
//!    (`PeerLeft`: its connections closing is then no lost link) and says `BYE`; the worker
//!    exits 0. The controller hears of it ([`Controller::on_left`]).
//!
//! The reserved slots of joins make this simple: the leaver's slots stay in the cluster's
//! slot list, owning nothing, as a worker that has not joined does. The only worker of a run
//! cannot leave (nowhere to move its key groups); it gives up after its leave timeout.

use super::{Driver, DriverError};
use crate::cluster::control::{Controller, Move};
use crate::cluster::{DRIVER_ID, Status};
use crate::message::Message;
use crate::transport::PeerId;
use clasp_protocol::Slot;
use clasp_protocol::routing::RoutingTable;
use std::collections::VecDeque;
use std::time::Instant;

/// Probe rounds of leaves are numbered from here (apart from the end of the stream's).
const LEAVE_ROUND_BASE: u64 = 1 << 62;
/// Clean probe rounds in a row that let a worker go.
const CLEAN_ROUNDS: u32 = 2;

/// Where a leave is.
#[derive(Debug)]
enum Phase {
    /// Its key groups are moving away.
    Moving,
    /// Probing until nothing is left between it and anyone.
    Draining {
        round: u64,
        clean: u32,
        prev: Option<Vec<(PeerId, PeerId, u64, u64)>>,
    },
    /// `FINISH` went out; waiting for its summary.
    Finishing,
}

#[derive(Debug)]
struct Leaving {
    id: PeerId,
    since: Instant,
    phase: Phase,
}

/// The leaves of a run.
#[derive(Debug, Default)]
pub(super) struct Leaves {
    queued: VecDeque<PeerId>,
    current: Option<Leaving>,
    rounds: u64,
    /// Workers that left. They may not join again: the others' counts of frames to and from
    /// them go on, and a new process's would start from zero.
    pub(super) left: Vec<PeerId>,
}

impl Leaves {
    /// Whether a leave is under way (moves wait for it).
    pub(super) fn busy(&self) -> bool {
        self.current.is_some()
    }
}

impl Driver<'_> {
    /// Worker `from` asked to leave.
    pub(super) fn on_leave(&mut self, from: PeerId) {
        let queued = self.leaves.queued.contains(&from)
            || self.leaves.current.as_ref().is_some_and(|l| l.id == from);
        if !self.ids.contains(&from) || queued {
            return;
        }
        if self.ids.len() == 1 {
            tracing::warn!("worker {from} asked to leave, but it is the run's only worker");
            return;
        }
        tracing::info!("worker {from} asked to leave");
        self.leaves.queued.push_back(from);
    }

    /// One step of the leave under way (or the start of the next, between migrations).
    pub(super) fn advance_leaves(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        if self.leaves.current.is_none() {
            if self.mig.in_flight.is_some() || self.mig.narrowing.is_some() || self.joins_busy() {
                return Ok(());
            }
            let Some(id) = self.leaves.queued.pop_front() else {
                return Ok(());
            };
            self.start_leave(id)?;
        }
        let Some(l) = &self.leaves.current else {
            return Ok(());
        };
        let id = l.id;
        let limit = self.cfg.migration_timeout + self.cfg.stall_timeout;
        if l.since.elapsed() > limit {
            tracing::warn!("worker {id} did not leave within {limit:?}; it stays");
            self.leaves.current = None;
            return Ok(());
        }
        match l.phase {
            Phase::Moving if self.mig.in_flight.is_none() => self.next_probe(0, None)?,
            Phase::Moving => {}
            Phase::Draining { round, clean, .. } => {
                if self.barrier.answers(round) >= self.ids.len() {
                    self.judge(id, round, clean)?;
                }
            }
            Phase::Finishing => {
                if self.barrier.summaries.iter().any(|s| s.worker == id) {
                    self.let_go(id, ctl)?;
                }
            }
        }
        Ok(())
    }

    /// Moves worker `id`'s key groups to the other workers.
    fn start_leave(&mut self, id: PeerId) -> Result<(), DriverError> {
        let current = self.mig.planner.routing().clone();
        let routing = without(&current, &self.slots, &self.ids, id);
        self.leaves.current = Some(Leaving {
            id,
            since: Instant::now(),
            phase: Phase::Moving,
        });
        if routing != *current {
            let m = Move {
                routing,
                reason: format!("leave: worker {id}"),
            };
            self.start_move(m, current.operators())?;
        }
        Ok(())
    }

    /// Sends the next probe round of a leave.
    fn next_probe(
        &mut self,
        clean: u32,
        prev: Option<Vec<(PeerId, PeerId, u64, u64)>>,
    ) -> Result<(), DriverError> {
        self.leaves.rounds += 1;
        let round = LEAVE_ROUND_BASE + self.leaves.rounds;
        if let Some(l) = &mut self.leaves.current {
            l.phase = Phase::Draining { round, clean, prev };
        }
        self.broadcast(&Message::Probe { round })
    }

    /// Every worker answered probe `round`: lets `id` go after enough clean rounds.
    fn judge(&mut self, id: PeerId, round: u64, clean: u32) -> Result<(), DriverError> {
        let sts = self.barrier.take_round(round);
        let idle = sts.iter().any(|(p, s)| *p == id && s.idle);
        let counts = self.counts_with(id, &sts);
        let balanced = counts.iter().all(|c| c.2 == c.3);
        let prev = match &self.leaves.current {
            Some(Leaving {
                phase: Phase::Draining { prev, .. },
                ..
            }) => prev.clone(),
            _ => None,
        };
        let same = prev.as_ref() == Some(&counts);
        let clean = if idle && balanced && same {
            clean + 1
        } else {
            0
        };
        if clean + 1 < CLEAN_ROUNDS {
            return self.next_probe(clean, Some(counts));
        }
        if let Some(l) = &mut self.leaves.current {
            l.phase = Phase::Finishing;
        }
        let body =
            crate::message::encode(&Message::Finish).map_err(|source| DriverError::Message {
                worker: DRIVER_ID,
                source,
            })?;
        self.send_control(id, &body, "finish to leaving worker")
    }

    /// Per pair with `id` on one end: (from, to, sent, received).
    fn counts_with(&self, id: PeerId, sts: &[(PeerId, Status)]) -> Vec<(PeerId, PeerId, u64, u64)> {
        let count = |at: PeerId, other: PeerId, sent: bool| -> u64 {
            sts.iter()
                .find(|s| s.0 == at)
                .and_then(|s| s.1.counts.iter().find(|c| c.0 == other))
                .map_or(0, |c| if sent { c.1 } else { c.2 })
        };
        let mut out = vec![(
            DRIVER_ID,
            id,
            self.sent.get(&id).copied().unwrap_or(0),
            count(id, DRIVER_ID, false),
        )];
        for &p in self.ids.iter().filter(|&&p| p != id) {
            out.push((p, id, count(p, id, true), count(id, p, false)));
            out.push((id, p, count(id, p, true), count(p, id, false)));
        }
        out
    }

    /// Worker `id` finished: it leaves the run.
    fn let_go(&mut self, id: PeerId, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        self.leaves.current = None;
        self.leaves.left.push(id);
        self.ids.retain(|&p| p != id);
        self.broadcast(&Message::PeerLeft { peer: id })?;
        let body =
            crate::message::encode(&Message::Bye).map_err(|source| DriverError::Message {
                worker: DRIVER_ID,
                source,
            })?;
        self.send_control(id, &body, "bye to leaving worker")?;
        tracing::info!("worker {id} left the run");
        self.drop_held_onto(id);
        let index = self.slots.workers.iter().position(|&p| p == id);
        ctl.on_left(index.unwrap_or(0), self.ids.len());
        Ok(())
    }

    /// Before the end of the stream: a leave that sent `FINISH` completes; the others are
    /// dropped (those workers end with the run).
    pub(super) fn settle_leaves(&mut self, ctl: &mut dyn Controller) -> Result<(), DriverError> {
        self.leaves.queued.clear();
        while let Some(Leaving {
            phase: Phase::Finishing,
            ..
        }) = &self.leaves.current
        {
            self.advance_leaves(ctl)?;
            self.turn(super::DRIVER_PARK)?;
        }
        self.leaves.current = None;
        Ok(())
    }
}

/// `routing` with worker `id`'s key groups spread over the slots of the other workers that
/// hold key groups (else of every other worker of the run, `present`), key group by key group
/// in turn; every other key group stays. (A worker the placement left idle stays idle: the
/// placement keeps its worker count less one, as the policy would see it.)
fn without(
    routing: &RoutingTable,
    slots: &crate::routing::Slots,
    present: &[PeerId],
    id: PeerId,
) -> RoutingTable {
    let active = crate::cluster::control::active_workers(routing, slots);
    let others = |only_active: bool| -> Vec<Slot> {
        (slots.workers.iter().enumerate())
            .filter(|(w, p)| {
                **p != id && present.contains(p) && (!only_active || active.contains(w))
            })
            .flat_map(|(w, _)| (0..slots.executors).map(move |e| slots.slot(w, e)))
            .collect()
    };
    let mut targets = others(true);
    if targets.is_empty() {
        targets = others(false);
    }
    let kgs = routing.key_groups();
    RoutingTable::from_fn(routing.epoch(), routing.operators(), kgs, |o, g| {
        let owner = routing.owner(o, g);
        if slots.worker_of(owner) != Some(id) || targets.is_empty() {
            return owner;
        }
        targets[(o * kgs + g.index()) % targets.len()]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{Slots, Spread, spread};

    #[test]
    fn a_leavers_key_groups_go_to_the_other_workers_in_use_and_nothing_else_moves() {
        let slots = Slots {
            workers: vec![1, 2, 3, 4],
            executors: 2,
        };
        // Workers 1..=3 in use, 4 idle (it owns nothing).
        let in_use = Slots {
            workers: vec![1, 2, 3],
            executors: 2,
        };
        let before = spread(3, &in_use, Spread::Even).unwrap();
        let after = without(&before, &slots, &[1, 2, 3, 4], 2);
        let mut moved = 0;
        for o in 0..before.operators() {
            for g in 0..before.key_groups() {
                let g = clasp_protocol::KeyGroup::at(g);
                let (a, b) = (before.owner(o, g), after.owner(o, g));
                assert_ne!(slots.worker_of(b), Some(2), "{o}/{g:?} still on the leaver");
                assert_ne!(slots.worker_of(b), Some(4), "{o}/{g:?} onto an idle worker");
                if slots.worker_of(a) == Some(2) {
                    moved += 1;
                } else {
                    assert_eq!(a, b, "{o}/{g:?} moved though not the leaver's");
                }
            }
        }
        assert!(moved > 0);
        assert_eq!(after.epoch(), before.epoch());
    }

    #[test]
    fn with_no_other_worker_in_use_the_idle_ones_take_them() {
        let slots = Slots {
            workers: vec![1, 2],
            executors: 1,
        };
        let only_1 = Slots {
            workers: vec![1],
            executors: 1,
        };
        let before = spread(2, &only_1, Spread::Even).unwrap();
        let after = without(&before, &slots, &[1, 2], 1);
        assert!(
            after
                .owners()
                .iter()
                .all(|s| slots.worker_of(*s) == Some(2))
        );
    }
}
