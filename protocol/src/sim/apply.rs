//! How the simulated cluster carries out a worker machine's actions: sends go on the links,
//! local work on the worker's queue, executions start when an executor is free, and a drain
//! completes once the running execution ends. Kept apart from the event loop so the rules a
//! real worker must follow when applying actions read in one place.

use std::collections::{BTreeSet, VecDeque};

use super::{Body, End, Event, GroupState, PATH_BITS, Sim, key_group};
use crate::ids::{KeyGroup, Slot};
use crate::message::{Msg, Peer, Req};
use crate::worker::Action;

impl Sim<'_> {
    pub(super) fn apply(&mut self, w: usize, acts: Vec<Action<Body, GroupState>>) {
        for a in acts {
            match a {
                Action::SendRequest { to, req } | Action::ForwardRequest { to, req } => {
                    self.send(Peer::Worker(Slot::at(w)), to, Msg::Request(req));
                }
                Action::SendMarker { to, epoch } => {
                    self.send(Peer::Worker(Slot::at(w)), to, Msg::Marker { epoch });
                }
                Action::ExportState {
                    to,
                    epoch,
                    operator,
                    key_groups,
                } => {
                    let n = &mut self.nodes[w];
                    let groups: BTreeSet<KeyGroup> = key_groups.iter().copied().collect();
                    let (queued, rest): (VecDeque<_>, VecDeque<_>) =
                        n.queue.drain(..).partition(|r: &Req<Body>| {
                            r.operator == operator && groups.contains(&r.key_group)
                        });
                    n.queue = rest;
                    let state: GroupState = key_groups
                        .iter()
                        .filter_map(|&g| n.store.remove(&(operator, g)).map(|s| ((operator, g), s)))
                        .collect();
                    let msg = Msg::State {
                        epoch,
                        operator,
                        key_groups,
                        state,
                        queued: queued.into(),
                    };
                    self.send(Peer::Worker(Slot::at(w)), to, msg);
                }
                Action::SendSeal {
                    to,
                    epoch,
                    operator,
                    key_groups,
                } => {
                    let msg = Msg::Seal {
                        epoch,
                        operator,
                        key_groups,
                    };
                    self.send(Peer::Worker(Slot::at(w)), to, msg);
                }
                Action::InstallState { state, .. } => {
                    for (k, s) in state {
                        if self.nodes[w].store.insert(k, s).is_some() {
                            self.fail(format!("worker {w}: state of {k:?} installed over state"));
                        }
                    }
                }
                Action::Process(req) => self.nodes[w].queue.push_back(req),
                Action::Drain => self.nodes[w].drain_pending = true,
                Action::Resume { .. } => {}
                Action::Completed(report) => {
                    let t = self.link(End::Worker(Slot::at(w)), End::Planner);
                    self.at(t, Event::Completed(report));
                }
                Action::Progress { epoch, waiting } => {
                    let t = self.link(End::Worker(Slot::at(w)), End::Planner);
                    self.at(
                        t,
                        Event::Progress {
                            from: Slot::at(w),
                            epoch,
                            waiting,
                        },
                    );
                }
                Action::Fault(e) => self.fail(e.to_string()),
            }
        }
        self.settle(w);
    }

    /// After a batch of actions: report a finished drain, start the next execution.
    pub(super) fn settle(&mut self, w: usize) {
        let n = &mut self.nodes[w];
        if !n.alive || n.busy {
            return;
        }
        if n.drain_pending {
            n.drain_pending = false;
            let acts = n.sm.on_drained(self.now);
            self.apply(w, acts);
            return;
        }
        if n.sm.paused() || n.queue.is_empty() {
            return;
        }
        n.busy = true;
        let (lo, hi) = self.cfg.service_ns;
        let d = lo + self.rng.below((hi - lo + 1) as usize) as u64;
        self.at(self.now + d, Event::ExecDone(w));
    }

    pub(super) fn exec_done(&mut self, w: usize) {
        if !self.nodes[w].alive {
            return;
        }
        let n = &mut self.nodes[w];
        n.busy = false;
        let req = n
            .queue
            .pop_front()
            .expect("an execution runs the queue's head");
        let Body { key, seq, path } = req.body;
        let st = n.store.entry((req.operator, req.key_group)).or_default();
        let prev = st.get(&(path, key)).copied().unwrap_or(0);
        if seq != prev + 1 {
            self.fail(format!(
                "worker {w}: operator {} key group {} key {key} path {path:#x}: number {seq} \
                 after {prev} (epoch tag {})",
                req.operator, req.key_group, req.epoch
            ));
            return;
        }
        st.insert((path, key), seq);
        self.out.processed += 1;
        let succs = self.succs[req.operator].clone();
        for s in succs {
            let body = Body {
                key,
                seq,
                path: (path << PATH_BITS) | (s as u64 + 1),
            };
            let g = key_group(key, s, self.cfg.key_groups);
            let acts = self.nodes[w]
                .sm
                .on_emit((req.operator, req.key_group), s, g, body);
            self.apply_no_settle(w, acts);
        }
        self.settle(w);
    }

    /// An execution's chained requests are routed before its end is noted (a drain waits for it).
    pub(super) fn apply_no_settle(&mut self, w: usize, acts: Vec<Action<Body, GroupState>>) {
        let busy = self.nodes[w].busy;
        self.nodes[w].busy = true;
        self.apply(w, acts);
        self.nodes[w].busy = busy;
    }
}
