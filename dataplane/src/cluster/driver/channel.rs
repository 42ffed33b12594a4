//! The driver's control channel: one turn of its transport, the workers' messages it receives
//! (ledger deltas are applied as they arrive, everything else is handled in the turn), and
//! the messages it broadcasts.

use super::barrier::Ack;
use super::{Driver, DriverError};
use crate::clock::monotonic_ns as now_ns;
use crate::message::{
    ArchivedLedgerDelta, ArchivedMessage, CONTROL_KIND, Decoder, Message, MessageError, encode,
};
use crate::runtime::ledger::{Delta, Ledger};
use crate::transport::{Delivered, Event, Inbound, PeerId};
use clasp_protocol::{Epoch, Slot};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the probe round after a stall waits for the workers' answers.
const STALL_PROBE_WAIT: Duration = Duration::from_secs(1);
/// How long the driver waits for the reason of a worker lost while the job starts.
const LAST_WORDS_WAIT: Duration = Duration::from_millis(500);
/// The round number of that probe (the quiescence rounds count up from 1 and never reach it).
const STALL_PROBE_ROUND: u64 = u64::MAX;

/// What the transport hands the driver.
pub(super) struct DriverInbox {
    pub(super) ledger: Ledger,
    pub(super) last_completion: Instant,
    /// Messages from workers (ledger deltas are applied on arrival instead), or why one
    /// could not be read.
    msgs: VecDeque<(PeerId, Result<Message, MessageError>)>,
    decoder: Decoder,
    events: Vec<Event>,
}

impl DriverInbox {
    pub(super) fn new() -> Self {
        DriverInbox {
            ledger: Ledger::new(),
            last_completion: Instant::now(),
            msgs: VecDeque::new(),
            decoder: Decoder::default(),
            events: Vec::new(),
        }
    }
}

impl Inbound for DriverInbox {
    fn deliver(&mut self, from: PeerId, _frame: &[u8]) -> Delivered {
        let e = "sent the driver a request frame; dropped".to_string();
        self.msgs.push_back((from, Ok(Message::Error(e))));
        Delivered::Accepted
    }

    fn control(&mut self, from: PeerId, k: u16, body: &[u8]) {
        if k != CONTROL_KIND {
            self.msgs.push_back((from, Err(MessageError::Kind(k))));
            return;
        }
        let msg = match self.decoder.access(body) {
            // The hot message: applied from the archive, nothing deserialized.
            Ok(ArchivedMessage::Deltas(deltas)) => {
                let now = now_ns();
                let done = self.ledger.apply_all(deltas.iter().map(delta), now) > 0;
                if done {
                    self.last_completion = Instant::now();
                }
                return;
            }
            Ok(archived) => rkyv::deserialize::<Message, rkyv::rancor::Error>(archived)
                .map_err(|e| MessageError::Archive(e.to_string())),
            Err(e) => Err(e),
        };
        self.msgs.push_back((from, msg));
    }

    fn event(&mut self, e: Event) {
        self.events.push(e);
    }
}

/// A ledger delta read from its archive.
fn delta(d: &ArchivedLedgerDelta) -> Delta {
    Delta {
        root_id: d.root_id.to_native(),
        xor: d.xor.to_native(),
        admitted_ns: d.admitted_ns.to_native(),
    }
}

impl Driver<'_> {
    pub(super) fn addr_of(&self, peer: PeerId) -> String {
        self.addrs
            .get(&peer)
            .map_or_else(|| "?".into(), ToString::to_string)
    }

    pub(super) fn turn(&mut self, timeout: Duration) -> Result<(), DriverError> {
        let completed = self.rx.ledger.completed_inputs();
        self.t
            .poll(timeout, &mut self.rx)
            .map_err(|e| DriverError::transport("driver transport", e))?;
        if self.rx.ledger.completed_inputs() != completed {
            self.last_progress = Instant::now();
        }
        for ev in std::mem::take(&mut self.rx.events) {
            self.on_event(ev)?;
        }
        while let Some((from, msg)) = self.rx.msgs.pop_front() {
            let msg = msg.map_err(|source| DriverError::Message {
                worker: from,
                source,
            })?;
            self.on_message(from, msg)?;
        }
        for a in self.mig.planner.on_tick::<()>(now_ns()) {
            self.planner_action(a)?;
        }
        if self.last_progress.elapsed() > self.cfg.stall_timeout {
            let links = self.stall_probe();
            return Err(DriverError::Stalled {
                links,
                after: self.cfg.stall_timeout,
                open: self.rx.ledger.open(),
                tracked: self.rx.ledger.completed_inputs() + self.rx.ledger.open() as u64,
                faults: if self.errors.is_empty() {
                    String::new()
                } else {
                    format!(" (faults: {})", self.errors.join("; "))
                },
            });
        }
        Ok(())
    }

    /// On a stall or a fault, one last probe round (at most [`STALL_PROBE_WAIT`], less once
    /// every connected worker answered) names what holds the run: links whose counts differ
    /// (frames sent and never received: a link cut silently, with no reset that either end
    /// would notice) and workers that do not answer, kept in `silent_at_stall`. Empty when
    /// the round finds nothing. Other messages are dropped: the run is over.
    pub(super) fn stall_probe(&mut self) -> String {
        let round = STALL_PROBE_ROUND;
        let Ok(body) = encode(&Message::Probe { round }) else {
            return String::new();
        };
        // A probe whose control queue was full is sent again as credit returns: a worker is
        // named silent for not answering, not for the driver's own backlog to it.
        let mut unsent: Vec<PeerId> = self.ids.clone();
        let deadline = Instant::now() + STALL_PROBE_WAIT;
        loop {
            unsent.retain(|&p| !matches!(self.t.send_control(p, CONTROL_KIND, &body), Ok(true)));
            // A worker whose connection is gone, or that sent its end-of-stream summary, will
            // not answer: no need to wait for it.
            let summaries = &self.barrier.summaries;
            let waiting = (self.barrier.silent(round, &self.ids).into_iter())
                .filter(|&p| self.t.is_connected(p))
                .filter(|&p| !summaries.iter().any(|s| s.worker == p))
                .count();
            if waiting == 0 || Instant::now() >= deadline {
                break;
            }
            if self.t.poll(super::DRIVER_PARK, &mut self.rx).is_err() {
                break;
            }
            self.rx.events.clear();
            while let Some((from, msg)) = self.rx.msgs.pop_front() {
                if let Ok(Message::Status(st)) = msg {
                    self.barrier.status(from, st);
                }
            }
        }
        // A worker the probe never reached (its queue stayed full) is not named silent.
        self.silent_at_stall = (self.barrier.silent(round, &self.ids).into_iter())
            .filter(|p| !unsent.contains(p))
            .collect();
        let what = self.unsettled_in(round);
        if what.is_empty() {
            String::new()
        } else {
            format!(": {what}")
        }
    }

    fn on_event(&mut self, ev: Event) -> Result<(), DriverError> {
        // A worker that is not (yet) one of the run's: a joiner whose join fails, or a stray
        // that authenticated; the run is unaffected.
        if let Event::ConnectFailed { peer, reason, .. } | Event::PeerLost { peer, reason, .. } =
            &ev
            && !self.ids.contains(peer)
        {
            if self.leaves.left.contains(peer) {
                tracing::debug!("worker {peer}, which left: {reason}");
            } else if self.join_failed(*peer, reason) {
                // Dropped (and logged): a join under way or queued ends here, whatever it
                // was told before.
            } else if self.joins.refusals.refused(*peer) || self.joins.failed.contains(peer) {
                tracing::debug!("worker {peer}, whose join was refused or failed: {reason}");
            } else {
                tracing::warn!("worker {peer}, not one of the run's: {reason}");
            }
            return Ok(());
        }
        match ev {
            Event::ConnectFailed {
                peer,
                id_taken: true,
                ..
            } => Err(DriverError::Taken {
                peer,
                addr: self.addr_of(peer),
            }),
            Event::ConnectFailed { peer, reason, .. } => Err(DriverError::Unreachable {
                peer,
                addr: self.addr_of(peer),
                reason,
            }),
            Event::PeerLost { peer, reason, .. } => {
                if self.phase == super::Phase::Start {
                    self.await_last_words(peer);
                }
                Err(DriverError::Lost {
                    peer,
                    addr: self.addr_of(peer),
                    during: match &self.mig.in_flight {
                        Some(f) => format!(" during the migration to epoch {}", f.record.epoch),
                        None => String::new(),
                    },
                    reason: self.with_last_words(peer, reason),
                })
            }
            // A stray connection (a scanner, a probe, garbage) is counted and logged by the
            // transport; the cluster is unaffected, so it is not a fault of the run.
            Event::Refused { .. } | Event::PeerUp { .. } => Ok(()),
        }
    }

    /// Waits a moment for what worker `peer`, lost while the job starts, said before it went:
    /// a worker that refuses the job says why and exits, and its reason may trail the loss.
    fn await_last_words(&mut self, peer: PeerId) {
        let until = Instant::now() + LAST_WORDS_WAIT;
        let said = |rx: &DriverInbox| {
            rx.msgs
                .iter()
                .any(|(from, m)| *from == peer && matches!(m, Ok(Message::Error(_))))
        };
        while !said(&self.rx) && Instant::now() < until {
            if self.t.poll(super::DRIVER_PARK, &mut self.rx).is_err() {
                break;
            }
        }
    }

    /// Why worker `peer` was lost, with the faults it reported just before (a worker that
    /// cannot run the job, e.g. one started from a binary without the app's operator kinds,
    /// says why and exits: its message may still wait in the inbox when the loss is seen).
    fn with_last_words(&self, peer: PeerId, reason: String) -> String {
        let prefix = format!("worker {peer}: ");
        let words: Vec<&str> = (self.rx.msgs.iter())
            .filter_map(|(from, msg)| match msg {
                Ok(Message::Error(e)) if *from == peer => Some(e.as_str()),
                _ => None,
            })
            .chain(self.errors.iter().filter_map(|e| e.strip_prefix(&prefix)))
            .collect();
        if words.is_empty() {
            reason
        } else {
            format!("{reason}; it reported: {}", words.join("; "))
        }
    }

    /// A fault the run survives: logged, and listed once in the report.
    pub(super) fn fault(&mut self, e: String) {
        tracing::warn!("{e}");
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// Handles one message from worker `from`.
    fn on_message(&mut self, from: PeerId, msg: Message) -> Result<(), DriverError> {
        // Periodic messages (counters, a migration's progress, faults) say a worker lives,
        // not that the run moves: they must not hold off the stall timeout.
        // Nor do quiescence statuses: a probe round answered is not work done (the barrier
        // counts progress by the frames the statuses count).
        if !matches!(
            msg,
            Message::Counters(_) | Message::Progress(_) | Message::Error(_) | Message::Status(_)
        ) {
            self.last_progress = Instant::now();
        }
        match msg {
            Message::Ready => {
                if !self.on_join_ready(from) {
                    self.barrier.ack(Ack::Ready)
                }
            }
            Message::Join { listen } => self.on_join(from, &listen),
            Message::Leave => self.on_leave(from),
            Message::EosAck { operator } => self.barrier.ack(Ack::EosDone(operator)),
            Message::Status(st) => self.barrier.status(from, st),
            Message::Summary(s) => self.barrier.summaries.push(*s),
            Message::Snapshotted(s) => self.snapshots.push(*s),
            Message::PartWritten(p) => self.parts.push(*p),
            Message::Migrated(r) => {
                if self.slots.worker_of(Slot(r.slot)) != Some(from) {
                    return Err(DriverError::Protocol {
                        worker: from,
                        what: format!(
                            "reported a migration for slot {}, which is not its own",
                            r.slot
                        ),
                    });
                }
                for a in self.mig.planner.on_completed::<()>(now_ns(), r.into()) {
                    self.planner_action(a)?;
                }
            }
            Message::Progress(p) => {
                let waiting = p.waiting();
                (self.mig.planner).on_progress(now_ns(), Slot(p.slot), Epoch(p.epoch), waiting);
            }
            Message::Counters(c) => {
                if let Some(i) = self.slots.workers.iter().position(|&p| p == c.worker)
                    && self.ids.contains(&c.worker)
                {
                    self.meter.counters[i] = Some(*c);
                }
            }
            // A joiner that cannot start the job (an app kind it lacks): its join fails, and
            // the run, which never used it, goes on unharmed (the joiner exits 1 saying why).
            Message::Error(e) if !self.ids.contains(&from) && self.join_failed(from, &e) => {}
            Message::Error(e) => {
                let e = format!("worker {from}: {e}");
                let logged =
                    self.cfg.workers_log_here && self.cfg.workers.iter().any(|w| w.0 == from);
                if logged {
                    // The worker logged it on the same terminal: only the report lists it.
                    tracing::debug!("{e}");
                    if !self.errors.contains(&e) {
                        self.errors.push(e);
                    }
                } else {
                    self.fault(e);
                }
            }
            // A link to a worker that left, or to one that is joining (its join fails).
            Message::LinkLost { peer, reason } if !self.ids.contains(&peer) => {
                if !self.join_failed(peer, &format!("worker {from} lost it: {reason}")) {
                    tracing::debug!("worker {from}: the link to worker {peer}, gone: {reason}");
                }
            }
            Message::LinkLost { peer, reason } => {
                return Err(DriverError::LinkLost {
                    worker: from,
                    addr: self.addr_of(from),
                    peer,
                    peer_addr: self.addr_of(peer),
                    reason,
                });
            }
            other => self.errors.push(format!(
                "worker {from} sent the driver a {} message",
                other.name()
            )),
        }
        Ok(())
    }

    /// Sends `msg` to every worker, waiting for credit.
    pub(super) fn broadcast(&mut self, msg: &Message) -> Result<(), DriverError> {
        let body = encode(msg).map_err(|source| DriverError::Message {
            worker: super::DRIVER_ID,
            source,
        })?;
        for i in 0..self.ids.len() {
            let p = self.ids[i];
            self.send_control(p, &body, "to worker")?;
        }
        Ok(())
    }

    /// Sends an encoded message to worker `p`, waiting for credit.
    pub(super) fn send_control(
        &mut self,
        p: PeerId,
        body: &[u8],
        what: &str,
    ) -> Result<(), DriverError> {
        loop {
            match self.t.send_control(p, CONTROL_KIND, body) {
                Ok(true) => return Ok(()),
                Ok(false) => self.turn(super::CREDIT_WAIT_TURN)?,
                Err(e) => return Err(DriverError::transport(format!("{what} {p}"), e)),
            }
        }
    }
}
