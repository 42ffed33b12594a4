//! What a worker does with what reaches it: a message from a peer or the planner (a marker, a
//! key group's state, a request), and the steps that follow from them (installing a received
//! key group, reporting progress). The entry points in the parent module call these; the state
//! they act on is the parent's.

use super::{Action, OutPhase, Phase, ProtocolError, StatePart, Worker};
use crate::ids::{Epoch, KeyGroup};
use crate::message::{Msg, Peer, Req};

impl<P, S> Worker<P, S> {
    pub(super) fn message(
        &mut self,
        now_ns: u64,
        from: Peer,
        msg: Msg<P, S>,
        out: &mut Vec<Action<P, S>>,
    ) {
        // FIFO per connection: once something of a newer epoch came on it, all that follows
        // on it (including old-epoch forwards) waits for the plan too.
        if self.ahead.contains(&from) || msg.epoch() > self.epoch {
            self.ahead.insert(from);
            self.early.push((from, msg));
            return;
        }
        match msg {
            Msg::Request(req) => self.request(from, req, out),
            Msg::Marker { epoch } => self.marker(now_ns, from, epoch, out),
            Msg::State {
                epoch,
                operator,
                key_groups,
                state,
                queued,
            } => {
                let part = StatePart {
                    operator,
                    key_groups,
                    state,
                    queued,
                };
                self.state(now_ns, from, epoch, part, out);
            }
            Msg::Seal {
                epoch,
                operator,
                key_groups,
            } => self.seal(now_ns, from, epoch, operator, &key_groups, out),
        }
    }

    /// A marker from `from`: every gate that now has all its senders' markers releases the
    /// requests it held; a marker nobody owes is a fault.
    pub(super) fn marker(
        &mut self,
        now_ns: u64,
        from: Peer,
        epoch: Epoch,
        out: &mut Vec<Action<P, S>>,
    ) {
        let id = self.id;
        match self.migration.as_mut() {
            Some(m) if m.epoch == epoch && m.complete_from.contains(&from) => {
                m.markers.insert(from);
                let markers = &m.markers;
                let open: Vec<usize> = m
                    .gates
                    .iter()
                    .filter(|(_, g)| g.from.is_subset(markers))
                    .map(|(&o, _)| o)
                    .collect();
                for o in open {
                    let g = m.gates.remove(&o).expect("present");
                    out.extend(g.waiting.into_iter().map(Action::Process));
                }
            }
            _ => out.push(Action::Fault(ProtocolError::Unexpected {
                worker: id,
                from,
                what: "marker",
                epoch,
            })),
        }
        self.progress(now_ns, out);
    }

    /// Exported state from `from`: marks each key group's state as in, keeps the queued
    /// requests of each group for after the seal, and installs the state.
    pub(super) fn state(
        &mut self,
        now_ns: u64,
        from: Peer,
        epoch: Epoch,
        part: StatePart<P, S>,
        out: &mut Vec<Action<P, S>>,
    ) {
        let StatePart {
            operator,
            key_groups,
            state,
            mut queued,
        } = part;
        let id = self.id;
        let Some(m) = self.migration.as_mut().filter(|m| m.epoch == epoch) else {
            out.push(Action::Fault(ProtocolError::Unexpected {
                worker: id,
                from,
                what: "state",
                epoch,
            }));
            return;
        };
        m.report.received_queued += queued.len() as u64;
        for &g in &key_groups {
            match m.incoming.get_mut((operator, g)) {
                Some(i) if Peer::Worker(i.from) == from && !i.state_in => {
                    i.state_in = true;
                    let (mine, rest): (Vec<_>, Vec<_>) = queued
                        .into_iter()
                        .partition(|r| r.operator == operator && r.key_group == g);
                    i.exported = mine;
                    queued = rest;
                }
                _ => out.push(Action::Fault(ProtocolError::Unexpected {
                    worker: id,
                    from,
                    what: "state",
                    epoch,
                })),
            }
        }
        if !queued.is_empty() {
            out.push(Action::Fault(ProtocolError::Unexpected {
                worker: id,
                from,
                what: "queued request of another key group",
                epoch,
            }));
        }
        out.push(Action::InstallState {
            operator,
            key_groups: key_groups.clone(),
            state,
        });
        self.install_ready(operator, &key_groups, out);
        self.progress(now_ns, out);
    }

    /// A seal from `from`: no more forwards of these key groups follow on its connection.
    pub(super) fn seal(
        &mut self,
        now_ns: u64,
        from: Peer,
        epoch: Epoch,
        operator: usize,
        key_groups: &[KeyGroup],
        out: &mut Vec<Action<P, S>>,
    ) {
        let id = self.id;
        let Some(m) = self.migration.as_mut().filter(|m| m.epoch == epoch) else {
            out.push(Action::Fault(ProtocolError::Unexpected {
                worker: id,
                from,
                what: "seal",
                epoch,
            }));
            return;
        };
        for &g in key_groups {
            match m.incoming.get_mut((operator, g)) {
                Some(i) if Peer::Worker(i.from) == from && !i.seal_in => i.seal_in = true,
                _ => out.push(Action::Fault(ProtocolError::Unexpected {
                    worker: id,
                    from,
                    what: "seal",
                    epoch,
                })),
            }
        }
        self.install_ready(operator, key_groups, out);
        self.progress(now_ns, out);
    }

    pub(super) fn request(&mut self, from: Peer, req: Req<P>, out: &mut Vec<Action<P, S>>) {
        let key = (req.operator, req.key_group);
        let id = self.id;
        if let Some(m) = self.migration.as_mut() {
            if let Some(i) = m.incoming.get_mut(key) {
                if req.epoch < m.epoch {
                    if from == Peer::Worker(i.from) {
                        i.forwarded.push(req);
                    } else {
                        out.push(Action::Fault(ProtocolError::NotOwner {
                            worker: id,
                            from,
                            operator: req.operator,
                            key_group: req.key_group,
                            epoch: req.epoch,
                        }));
                    }
                } else {
                    m.report.held += 1;
                    i.held.push(req);
                }
                return;
            }
            if let Some(&(to, phase)) = m.outgoing.get(key) {
                match phase {
                    OutPhase::Owned => out.push(Action::Process(req)),
                    OutPhase::Exported if req.epoch < m.epoch => {
                        debug_assert_eq!(m.phase, Phase::Sealing, "forwards only before the seal");
                        m.report.forwarded += 1;
                        out.push(Action::ForwardRequest { to, req });
                    }
                    _ => out.push(Action::Fault(ProtocolError::AfterSeal {
                        worker: id,
                        operator: req.operator,
                        key_group: req.key_group,
                        epoch: req.epoch,
                    })),
                }
                return;
            }
        }
        if self.owners.get(req.operator, req.key_group) == Some(id) {
            if let Some(m) = self.migration.as_mut()
                && req.epoch == m.epoch
                && req.from_moved
                && let Some(g) = m.gates.get_mut(&req.operator)
            {
                m.report.gated += 1;
                g.waiting.push(req);
                return;
            }
            out.push(Action::Process(req));
        } else {
            out.push(Action::Fault(ProtocolError::NotOwner {
                worker: id,
                from,
                operator: req.operator,
                key_group: req.key_group,
                epoch: req.epoch,
            }));
        }
    }

    /// Releases every listed key group whose state and seal are both in.
    pub(super) fn install_ready(
        &mut self,
        operator: usize,
        key_groups: &[KeyGroup],
        out: &mut Vec<Action<P, S>>,
    ) {
        let Some(m) = self.migration.as_mut() else {
            return;
        };
        for &g in key_groups {
            let ready = m
                .incoming
                .get((operator, g))
                .is_some_and(|i| i.state_in && i.seal_in);
            if ready {
                let i = m.incoming.remove((operator, g)).expect("present");
                out.extend(
                    i.exported
                        .into_iter()
                        .chain(i.forwarded)
                        .chain(i.held)
                        .map(Action::Process),
                );
            }
        }
    }

    /// Seals and completes as soon as their conditions hold.
    pub(super) fn progress(&mut self, now_ns: u64, out: &mut Vec<Action<P, S>>) {
        let Some(m) = self.migration.as_mut() else {
            return;
        };
        if m.phase == Phase::Draining {
            return;
        }
        if m.phase == Phase::Sealing && m.resume_from.is_subset(&m.markers) {
            debug_assert!(
                m.outgoing.values().all(|o| o.1 == OutPhase::Exported),
                "every key group given up is exported before its seal"
            );
            for t in &m.plan.plan.sends {
                out.push(Action::SendSeal {
                    to: t.to,
                    epoch: m.epoch,
                    operator: t.operator,
                    key_groups: t.key_groups.clone(),
                });
            }
            for phase in m.outgoing.values_mut() {
                phase.1 = OutPhase::Sealed;
            }
            m.phase = Phase::Sealed;
            m.report.marker_wait_ns = now_ns - m.started_ns;
        }
        if m.phase == Phase::Sealed
            && m.incoming.is_empty()
            && m.gates.is_empty()
            && m.complete_from.is_subset(&m.markers)
        {
            let m = self.migration.take().expect("in a migration");
            debug_assert_eq!(self.emit_epoch, m.epoch, "emissions use the new table");
            out.push(Action::Completed(m.report));
        }
    }
}
