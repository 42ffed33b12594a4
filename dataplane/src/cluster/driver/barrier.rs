//! The end-of-stream barrier: global quiescence (Mattern's four counters, see the module docs
//! of [`crate::cluster`]), then for each operator in topological order an end of stream that
//! every worker acknowledges, then the workers' summaries and the goodbye.

use super::{DRIVER_PARK, Driver, DriverError};
use crate::cluster::{DRIVER_ID, Status, WorkerSummary};
use crate::message::Message;
use crate::transport::PeerId;
use clasp_operators::AppSpec;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Quiescence probes: consecutive clean rounds with unchanged counters required.
const QUIET_ROUNDS: u32 = 2;
/// How long the driver lets its goodbyes leave before it returns.
const BYE_GRACE: Duration = Duration::from_millis(200);

/// One worker's per-peer counts in a probe round: (worker, [(peer, sent, received)]).
type PeerCounts = (PeerId, Vec<(PeerId, u64, u64)>);

/// What workers acknowledge, each counted until every worker did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ack {
    /// Ready for input.
    Ready,
    /// Every executor flushed this operator at the end of the stream.
    EosDone(u16),
}

/// What the barrier has heard from the workers.
#[derive(Default)]
pub(super) struct Barrier {
    acks: BTreeMap<Ack, usize>,
    statuses: BTreeMap<u64, Vec<(PeerId, Status)>>,
    pub(super) summaries: Vec<WorkerSummary>,
    /// The last probe round sent (checkpoints probe too; rounds never repeat in a run).
    pub(super) round: u64,
    /// When the workers were first quiescent at the end of the stream: every admitted root,
    /// tracked or not, was processed by then.
    pub(super) input_done: Option<Instant>,
}

impl Barrier {
    pub(super) fn ack(&mut self, a: Ack) {
        *self.acks.entry(a).or_default() += 1;
    }

    /// Workers that acknowledged `a`.
    pub(super) fn acks(&self, a: Ack) -> usize {
        self.acks.get(&a).copied().unwrap_or(0)
    }

    /// Workers that answered probe round `round`.
    pub(super) fn answers(&self, round: u64) -> usize {
        self.statuses.get(&round).map_or(0, |v| v.len())
    }

    pub(super) fn status(&mut self, from: PeerId, st: Status) {
        self.statuses.entry(st.round).or_default().push((from, st));
    }

    /// The workers of `ids` that did not answer probe `round`.
    pub(super) fn silent(&self, round: u64, ids: &[PeerId]) -> Vec<PeerId> {
        let answered =
            |p: &PeerId| (self.statuses.get(&round)).is_some_and(|v| v.iter().any(|s| s.0 == *p));
        ids.iter().copied().filter(|p| !answered(p)).collect()
    }

    /// The answers to probe `round`, taken.
    pub(super) fn take_round(&mut self, round: u64) -> Vec<(PeerId, Status)> {
        self.statuses.remove(&round).unwrap_or_default()
    }
}

impl Driver<'_> {
    /// Waits until every worker acknowledged `key`.
    fn wait_acks(&mut self, key: Ack, what: &str, timeout: Duration) -> Result<(), DriverError> {
        let deadline = Instant::now() + timeout;
        while self.barrier.acks(key) < self.ids.len() {
            if Instant::now() >= deadline {
                return Err(DriverError::Timeout(format!(
                    "{what}: {} of {} workers answered within {timeout:?}",
                    self.barrier.acks(key),
                    self.ids.len()
                )));
            }
            self.turn(DRIVER_PARK)?;
        }
        Ok(())
    }

    /// Ends the stream operator by operator (quiescent between flushes, exactly as the
    /// oracle drains between them), collects every worker's summary and says goodbye.
    pub(super) fn end_of_stream(&mut self, spec: &AppSpec) -> Result<(), DriverError> {
        let stall = self.cfg.stall_timeout;
        let mut round = self.barrier.round;
        self.quiesce(&mut round)?;
        self.barrier.input_done = Some(Instant::now());
        for op in spec.topological_order() {
            let op = op as u16;
            self.broadcast(&Message::Eos { operator: op })?;
            self.wait_acks(Ack::EosDone(op), "end of stream", stall)?;
            self.quiesce(&mut round)?;
        }
        self.barrier.round = round;
        self.broadcast(&Message::Finish)?;
        let deadline = Instant::now() + stall;
        // Workers that left the run sent theirs already.
        let ours = |d: &Self| {
            (d.barrier.summaries.iter())
                .filter(|s| d.ids.contains(&s.worker))
                .count()
        };
        while ours(self) < self.ids.len() {
            if Instant::now() >= deadline {
                return Err(DriverError::Timeout(format!(
                    "{} of {} worker summaries within {stall:?}",
                    ours(self),
                    self.ids.len(),
                )));
            }
            self.turn(DRIVER_PARK)?;
        }
        self.broadcast(&Message::Bye)?;
        // Let the byes leave (the workers close their connections when they exit).
        let until = Instant::now() + BYE_GRACE;
        while Instant::now() < until {
            let _ = self.t.poll(super::BYE_TURN, &mut self.rx);
        }
        Ok(())
    }

    /// Waits until the cluster is quiescent (module docs), at most the stall timeout: the
    /// deadline is fixed when the wait starts, so neither the statuses that answer the probes
    /// nor frames still moving extend it (a lost link keeps the counts apart for good).
    pub(super) fn quiesce(&mut self, round: &mut u64) -> Result<(), DriverError> {
        let after = self.cfg.stall_timeout;
        let deadline = Instant::now() + after;
        let mut clean = 0u32;
        let mut prev: Option<Vec<PeerCounts>> = None;
        loop {
            *round += 1;
            let r = *round;
            self.broadcast(&Message::Probe { round: r })?;
            while self.barrier.statuses.get(&r).map_or(0, |v| v.len()) < self.ids.len() {
                if Instant::now() >= deadline {
                    let what = self.silent_in(r);
                    return Err(DriverError::NotQuiescent { after, what });
                }
                self.turn(DRIVER_PARK)?;
            }
            let mut sts = self.barrier.statuses.remove(&r).unwrap_or_default();
            sts.sort_by_key(|s| s.0);
            let all_idle = sts.iter().all(|(_, s)| s.idle);
            let balanced = self.balanced(&sts);
            let counts: Vec<_> = sts.iter().map(|(p, s)| (*p, s.counts.clone())).collect();
            if all_idle && balanced && prev.as_ref() == Some(&counts) {
                clean += 1;
                if clean + 1 >= QUIET_ROUNDS {
                    return Ok(());
                }
            } else {
                clean = 0;
            }
            if Instant::now() >= deadline {
                let mut what = self.unsettled(&sts);
                if what.is_empty() {
                    what.push("the counts still changed between probe rounds".into());
                }
                let what = what.join("; ");
                return Err(DriverError::NotQuiescent { after, what });
            }
            prev = Some(counts);
            if !(all_idle && balanced) {
                self.turn(super::PROBE_TURN)?;
            }
        }
    }

    /// What probe round `r` shows as unsettled: workers that did not answer it, then busy
    /// workers and links whose counts differ (empty: nothing). Takes the round's answers.
    pub(super) fn unsettled_in(&mut self, r: u64) -> String {
        let mut parts = Vec::new();
        if self.barrier.answers(r) < self.ids.len() {
            parts.push(self.silent_in(r));
        }
        let mut sts = self.barrier.statuses.remove(&r).unwrap_or_default();
        sts.sort_by_key(|s| s.0);
        parts.extend(self.unsettled(&sts));
        parts.join("; ")
    }

    /// The workers that did not answer probe round `r`.
    fn silent_in(&self, r: u64) -> String {
        let silent: Vec<String> = (self.barrier.silent(r, &self.ids).into_iter())
            .map(|p| format!("worker {p} at {}", self.addr_of(p)))
            .collect();
        format!("no answer to the probe from {}", silent.join(", "))
    }

    /// What kept a probe round from being clean: workers that are not idle, and the links
    /// whose counts differ (frames sent and not received) between workers that answered.
    fn unsettled(&self, sts: &[(PeerId, Status)]) -> Vec<String> {
        let mut parts: Vec<String> = (sts.iter())
            .filter(|s| !s.1.idle)
            .map(|s| format!("worker {} is not idle", s.0))
            .collect();
        let answered = |p: PeerId| p == DRIVER_ID || sts.iter().any(|s| s.0 == p);
        for (a, b, sent, received) in self.imbalances(sts) {
            if !answered(a) || !answered(b) {
                continue;
            }
            let from = if a == DRIVER_ID {
                "the driver".to_string()
            } else {
                format!("worker {a} at {}", self.addr_of(a))
            };
            parts.push(format!(
                "{from} sent worker {b} at {} {sent} frames, it received {received}",
                self.addr_of(b)
            ));
        }
        parts
    }

    /// Every count of frames sent from A to B equals the count B received from A (the driver
    /// counts what it sent itself).
    fn balanced(&self, sts: &[(PeerId, Status)]) -> bool {
        self.imbalances(sts).is_empty()
    }

    /// The links whose counts differ: (from, to, frames sent, frames received).
    fn imbalances(&self, sts: &[(PeerId, Status)]) -> Vec<(PeerId, PeerId, u64, u64)> {
        let sent = |a: PeerId, b: PeerId| -> u64 {
            if a == DRIVER_ID {
                return self.sent.get(&b).copied().unwrap_or(0);
            }
            sts.iter()
                .find(|s| s.0 == a)
                .and_then(|s| s.1.counts.iter().find(|c| c.0 == b))
                .map_or(0, |c| c.1)
        };
        let received = |b: PeerId, a: PeerId| -> u64 {
            sts.iter()
                .find(|s| s.0 == b)
                .and_then(|s| s.1.counts.iter().find(|c| c.0 == a))
                .map_or(0, |c| c.2)
        };
        let mut out = Vec::new();
        for &b in &self.ids {
            for a in std::iter::once(DRIVER_ID).chain(self.ids.iter().copied()) {
                let (s, r) = (sent(a, b), received(b, a));
                if a != b && s != r {
                    out.push((a, b, s, r));
                }
            }
        }
        out
    }
}
