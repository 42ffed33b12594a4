//! An executor's side of a live migration: the protocol machine of
//! [`clasp_protocol::worker`] driven by the frames the executor reads.
//!
//! Why per executor: an executor is the unit that owns key-group state and runs
//! single-threaded, so it is the protocol's "worker" exactly — it has no running executions to
//! drain when it reads a plan (it reads plans between requests), and every pair of executors is
//! joined by one FIFO path (a shared-memory ring, or `net_out` → one TCP connection → `net_in`
//! across workers). Moving a key group between two executors of one worker is then the same
//! move as between workers.
//!
//! Outside a migration the machine is not consulted: a request of the current epoch runs at
//! once (one flag and one epoch compare on the hot path). From a plan's arrival until the
//! executor's part is complete and its queue of released requests has run, every frame goes
//! through the machine, and requests it releases run from `ready`, in order.

use super::Engine;
use super::PlanMail;
use crate::message::migration::key_groups_of;
use crate::message::{self, Decoder, Message, Progress, Seal, StateMsg, encode};
use crate::migrate::{Reassembly, control_body, control_frame, peer_of, state_parts};
use crate::request::{FLAG_FROM_MOVED, REQUEST_HEADER_BYTES, Request, RequestHeader, widen_epoch};
use crate::routing::flatten;
use crate::runtime::messages::Report;
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::message::{Msg, Req};
use clasp_protocol::worker::{Action, Worker};
use clasp_protocol::{Epoch, KeyGroup, RoutingTable, Slot};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often an executor in a migration wakes to report progress.
pub(super) const PROGRESS_POLL: Duration = Duration::from_millis(50);
const PROGRESS_POLL_NS: u64 = PROGRESS_POLL.as_nanos() as u64;
/// Epochs a frame may be ahead of this executor's latest plan: the planner starts a migration
/// only once every slot completed the previous one, so a peer is at most one plan ahead.
const MAX_EPOCHS_AHEAD: u64 = 1;

/// A request body as the machine carries it: the whole frame.
pub(super) type Frame = Vec<u8>;
/// State as the machine carries it: per key group, its archive.
pub(super) type State = Vec<(usize, Vec<u8>)>;

/// Key groups packed per state message: packing runs between batches of requests, so an
/// executor that gives up much state keeps serving the key groups it keeps.
pub(super) const EXPORT_GROUPS_PER_TURN: usize = 32;

/// Work the executor owes its peers after a drain, done a little per turn of its loop.
///
/// Why deferred: once drained, nothing touches the state of a key group being given up — its
/// requests are forwarded, never run here — so packing it need not happen before the executor
/// resumes. Only the order on the connection matters: the state before its seal (a receiver
/// installs on state *and* seal), which this queue keeps by holding every seal behind the
/// exports queued before it.
enum Outgoing {
    /// Key groups of `operator` still to pack for `to`, with their queued requests.
    Export {
        to: Slot,
        epoch: Epoch,
        operator: usize,
        groups: VecDeque<KeyGroup>,
        queued: HashMap<KeyGroup, Vec<Frame>>,
        /// Those of `groups` copied to `to` ahead (`ahead.rs`): they move as their changes.
        ahead: HashSet<KeyGroup>,
    },
    /// A seal to send once everything before it is out.
    Seal {
        to: Slot,
        epoch: Epoch,
        operator: usize,
        key_groups: Vec<KeyGroup>,
    },
}

/// The executor's migration state.
pub(crate) struct Migration {
    proto: Worker<Frame, State>,
    /// Requests released by the machine, to run in this order (paused: not yet).
    pub(super) ready: VecDeque<Frame>,
    /// Received state not yet installed, and the requests waiting for it.
    pub(super) installs: super::installs::Installs,
    /// Half-received state messages, per sender slot.
    parts: HashMap<u16, Reassembly>,
    /// Decodes control frames' messages (one scratch buffer for all).
    decoder: Decoder,
    /// Plans from the network thread.
    plans: Option<Arc<Mutex<VecDeque<PlanMail>>>>,
    /// The plan whose table emissions switch to on the drain.
    next: Option<(Epoch, Arc<RoutingTable>)>,
    /// State to pack and seals to send, in order (see [`Outgoing`]).
    outgoing: VecDeque<Outgoing>,
    /// Key groups were exported and their memory not freed yet ([`Engine::free_exported`]).
    exported_unfreed: bool,
    /// No migration, nothing early, nothing ready: the fast path applies.
    pub(super) settled: bool,
    last_progress_ns: u64,
    /// Where this migration's time goes (logged).
    pub(super) spans: super::spans::Spans,
}

impl Migration {
    pub(super) fn new(
        slot: u16,
        routing: Arc<RoutingTable>,
        plans: Option<Arc<Mutex<VecDeque<PlanMail>>>>,
    ) -> Self {
        let epoch = routing.epoch();
        Migration {
            proto: Worker::new(Slot(u32::from(slot)), routing, epoch),
            ready: VecDeque::new(),
            installs: Default::default(),
            parts: HashMap::new(),
            decoder: Decoder::default(),
            plans,
            next: None,
            outgoing: VecDeque::new(),
            exported_unfreed: false,
            settled: true,
            last_progress_ns: 0,
            spans: super::spans::Spans::default(),
        }
    }

    /// No export or seal is owed.
    #[inline]
    pub(super) fn outgoing_is_empty(&self) -> bool {
        self.outgoing.is_empty()
    }

    pub(super) fn refresh(&mut self) {
        self.settled = self.proto.is_settled()
            && self.ready.is_empty()
            && self.installs.is_empty()
            && self.parts.values().all(Reassembly::is_empty);
    }
}

use crate::clock::monotonic_ns as now_ns;

/// Whose execution emitted what is being routed: a request's key group, or — for timers
/// fired together and an end-of-stream flush — any of the operator's key groups.
#[derive(Clone, Copy)]
pub(super) enum EmittedBy {
    KeyGroup(u16),
    AnyKeyGroup,
}

impl Engine {
    /// Reads the plans the network thread left in the mailbox.
    pub(super) fn take_plans(&mut self) {
        debug_assert!(
            self.local.is_empty(),
            "requests to itself ran before a plan"
        );
        // A plan may export what was received last time: it is installed first.
        self.flush_installs();
        self.free_exported();
        let mailbox = self.mig.plans.clone();
        let mail: Vec<PlanMail> = match &mailbox {
            Some(m) => match m.lock() {
                Ok(mut q) => q.drain(..).collect(),
                Err(_) => {
                    self.report_error("the plan mailbox is poisoned".into());
                    return;
                }
            },
            None => {
                self.report_error("a plan for an executor without a network thread".into());
                return;
            }
        };
        // What the previous migration still owed is out before this one starts (it normally
        // is: the planner starts a migration only after every slot completed the last one,
        // which needs every state and seal delivered).
        while !self.mig.outgoing.is_empty() {
            if self.run_exports() == 0 {
                // Waiting for room behind an overflowed part.
                self.out.drain_overflow();
                self.out.publish();
                std::thread::yield_now();
            }
        }
        for m in mail {
            let a = match m {
                PlanMail::Plan(a) => a,
                PlanMail::CopyAhead(routing) => {
                    self.start_copy_ahead(&routing);
                    continue;
                }
            };
            let epoch = a.epoch();
            self.mig.spans.plan(self.my_slot);
            self.mig.next = Some((epoch, Arc::clone(&a.routing)));
            let actions = self.mig.proto.on_plan(now_ns(), a);
            self.apply(actions);
            self.copy_ahead_planned(epoch);
        }
        self.mig.refresh();
    }

    /// [`FLAG_FROM_MOVED`] for what operator `op` emitted, or 0: the protocol machine knows
    /// which key groups this executor received in the current epoch (none: two loads).
    #[inline]
    pub(super) fn moved_flag(&self, op: usize, by: EmittedBy) -> u16 {
        let moved = match by {
            EmittedBy::KeyGroup(g) => self.mig.proto.emits_from_moved((op, KeyGroup(g))),
            EmittedBy::AnyKeyGroup => self.mig.proto.emits_from_moved_any(op),
        };
        if moved { FLAG_FROM_MOVED } else { 0 }
    }

    /// A request that cannot take the fast path.
    #[cold]
    pub(super) fn on_unsettled_request(&mut self, h: &RequestHeader, frame: &[u8]) {
        let Some(epoch) = self.frame_epoch(h) else {
            return;
        };
        let req = Req {
            operator: h.operator as usize,
            key_group: KeyGroup(h.key_group),
            epoch,
            from_moved: h.flags & FLAG_FROM_MOVED != 0,
            body: frame.to_vec(),
        };
        let actions = self
            .mig
            .proto
            .on_message(now_ns(), peer_of(h.source), Msg::Request(req));
        self.apply(actions);
        self.mig.refresh();
    }

    /// A marker, seal or state part.
    #[cold]
    pub(super) fn on_control_frame(&mut self, h: &RequestHeader, frame: &[u8]) {
        let Some(epoch) = self.frame_epoch(h) else {
            return;
        };
        let from = h.source;
        let msg = match self.mig.decoder.decode(control_body(frame)) {
            Ok(Message::Marker) => {
                self.mig.spans.marker(from);
                Msg::Marker { epoch }
            }
            Ok(Message::Seal(seal)) => match key_groups_of(&seal.key_groups) {
                Ok(key_groups) => Msg::Seal {
                    epoch,
                    operator: seal.operator as usize,
                    key_groups,
                },
                Err(e) => return self.report_error(format!("seal from slot {from}: {e}")),
            },
            Ok(Message::StatePart(part)) => {
                let whole = self.mig.parts.entry(from).or_default().add(part);
                let bytes = match whole {
                    Ok(Some(b)) => b,
                    Ok(None) => {
                        self.mig.refresh();
                        return;
                    }
                    Err(e) => return self.report_error(format!("state from slot {from}: {e}")),
                };
                match self.state_msg(epoch, from, &bytes) {
                    Ok(Some(m)) => m,
                    Ok(None) => {
                        self.mig.refresh();
                        return;
                    }
                    Err(e) => return self.report_error(format!("state from slot {from}: {e}")),
                }
            }
            Ok(other) => {
                return self.report_error(format!(
                    "a {} message in a control frame from slot {from}",
                    other.name()
                ));
            }
            Err(e) => return self.report_error(format!("control frame from slot {from}: {e}")),
        };
        let actions = self.mig.proto.on_message(now_ns(), peer_of(h.source), msg);
        self.apply(actions);
        self.mig.refresh();
    }

    /// A frame's full epoch, or `None` (reported) for one from further ahead than any peer
    /// can be: waiting for its plan would park its sender's connection forever.
    fn frame_epoch(&mut self, h: &RequestHeader) -> Option<Epoch> {
        let current = self.mig.proto.epoch();
        let epoch = Epoch(widen_epoch(current.0, h.epoch));
        if epoch.0 > current.0 + MAX_EPOCHS_AHEAD {
            self.report_error(format!(
                "a frame of epoch {epoch} from slot {} while at epoch {current}; dropped",
                h.source
            ));
            return None;
        }
        Some(epoch)
    }

    /// A whole state message for the machine, or `None` for a copy ahead (staged here).
    fn state_msg(
        &mut self,
        epoch: Epoch,
        from: u16,
        bytes: &[u8],
    ) -> Result<Option<Msg<Frame, State>>, String> {
        let m: StateMsg = match self.mig.decoder.decode(bytes).map_err(|e| e.to_string())? {
            Message::State(m) => *m,
            Message::StateAhead(m) => {
                self.stage_ahead(epoch, from, *m);
                return Ok(None);
            }
            other => return Err(format!("a {} message where state was due", other.name())),
        };
        let operator = m.operator as usize;
        if operator >= self.instances.len() {
            return Err(format!("operator {operator} out of range"));
        }
        let groups: Vec<u16> = m.groups.iter().map(|g| g.0).collect();
        let key_groups = key_groups_of(&groups).map_err(|e| e.to_string())?;
        let mut queued = Vec::with_capacity(m.queued.len());
        for f in m.queued {
            let h = Request::parse(&f)
                .map_err(|e| format!("queued request: {e}"))?
                .header;
            queued.push(Req {
                operator: h.operator as usize,
                key_group: KeyGroup(h.key_group),
                epoch: Epoch(widen_epoch(self.mig.proto.epoch().0, h.epoch)),
                from_moved: h.flags & FLAG_FROM_MOVED != 0,
                body: f,
            });
        }
        Ok(Some(Msg::State {
            epoch,
            operator,
            key_groups,
            state: m
                .groups
                .into_iter()
                .map(|(g, archive)| (g as usize, archive))
                .collect(),
            queued,
        }))
    }

    /// Installs one received state message and runs released requests, while not paused.
    /// Returns how many items (installs and requests) it took.
    pub(super) fn run_ready(&mut self, max: usize) -> usize {
        if self.mig.proto.paused() || (self.mig.ready.is_empty() && self.mig.installs.is_empty()) {
            return 0;
        }
        let mut n = usize::from(self.install_next());
        while n < max {
            let Some(f) = self.mig.ready.pop_front() else {
                break;
            };
            let Some(f) = self.mig.installs.admit(f) else {
                n += 1;
                continue;
            };
            match Request::parse(&f) {
                Ok(r) if (r.header.operator as usize) < self.instances.len() => self.execute(&r),
                _ => self.metrics.view().add(super::scalar::BAD_FRAMES, 1),
            }
            n += 1;
        }
        self.mig.refresh();
        n
    }

    /// In a migration: tells the planner what this executor waits for, now and then.
    pub(super) fn migration_tick(&mut self) {
        if self.mig.settled || !self.mig.proto.in_migration() {
            return;
        }
        let now = now_ns();
        if now < self.mig.last_progress_ns + PROGRESS_POLL_NS {
            return;
        }
        self.mig.last_progress_ns = now;
        let actions = self.mig.proto.on_tick(now);
        self.apply(actions);
    }

    /// Sends a frame to `slot` (a ring of this worker, or `net_out`).
    fn send_to_slot(&mut self, slot: usize, frame: &[u8]) {
        match self.out.lane_of(slot) {
            Some(lane) => self.send_frame(lane, frame),
            None => self.report_error(format!("a frame for slot {slot}, which is not here")),
        }
    }

    /// Sends `msg` to `slot` in a control frame, in line with the requests on that path.
    pub(super) fn send_message(&mut self, msg: &Message, epoch: Epoch, to: Slot) {
        let mut f = Vec::new();
        match control_frame(msg, epoch, self.my_slot, to.0 as u16, &mut f) {
            Ok(()) => self.send_to_slot(to.index(), &f),
            Err(e) => self.report_error(format!("a {} for slot {to}: {e}", msg.name())),
        }
    }

    /// `msg` encoded for a report (a failure is reported instead).
    fn encoded(&mut self, msg: &Message) -> Option<Vec<u8>> {
        encode(msg)
            .map_err(|e| self.report_error(format!("a {}: {e}", msg.name())))
            .ok()
    }

    /// Carries out the machine's actions, in order.
    fn apply(&mut self, actions: Vec<Action<Frame, State>>) {
        let mut drain = false;
        for a in actions {
            match a {
                Action::SendRequest { to, req } | Action::ForwardRequest { to, req } => {
                    let mut f = req.body;
                    if f.len() >= REQUEST_HEADER_BYTES {
                        RequestHeader::set_route(&mut f, self.my_slot, to.0 as u16);
                        self.send_to_slot(to.index(), &f);
                    }
                }
                Action::SendMarker { to, epoch } => self.send_message(&Message::Marker, epoch, to),
                Action::SendSeal {
                    to,
                    epoch,
                    operator,
                    key_groups,
                } => {
                    if self.mig.outgoing.is_empty() {
                        self.send_message(&seal(operator, &key_groups), epoch, to)
                    } else {
                        self.mig.outgoing.push_back(Outgoing::Seal {
                            to,
                            epoch,
                            operator,
                            key_groups,
                        })
                    }
                }
                Action::ExportState {
                    to,
                    epoch,
                    operator,
                    key_groups,
                } => self.export(to, epoch, operator, &key_groups),
                Action::InstallState {
                    operator, state, ..
                } => self.mig.installs.push(operator, state),
                Action::Process(req) => self.mig.ready.push_back(req.body),
                Action::Drain => drain = true,
                Action::Resume { .. } => {}
                Action::Completed(report) => {
                    self.mig.spans.completed(self.my_slot, &report);
                    let msg = Message::Migrated(message::Report::from(&report));
                    if let Some(body) = self.encoded(&msg) {
                        self.push_report(&Report::Migrated(&body));
                    }
                }
                Action::Progress { epoch, waiting } => {
                    let p = Progress::new(Slot(u32::from(self.my_slot)), epoch, &waiting);
                    if let Some(body) = self.encoded(&Message::Progress(p)) {
                        self.push_report(&Report::Progress(&body));
                    }
                }
                Action::Fault(e) => self.report_error(format!("migration: {e}")),
            }
        }
        if drain {
            // An executor reads a plan between requests: nothing runs, so it is drained.
            // Emissions from now on are routed by the new table.
            if let Some((epoch, routing)) = self.mig.next.take() {
                debug_assert!(epoch > self.epoch, "a plan moves the epoch forward");
                self.table = flatten(&routing);
                self.epoch = epoch;
            }
            let actions = self.mig.proto.on_drained(now_ns());
            self.apply(actions);
        }
    }

    /// Queues the export of key groups of `operator` to slot `to`: their queued requests leave
    /// the ready queue now (they must not run here); their state is packed later, a few groups
    /// per turn ([`Engine::run_exports`]).
    fn export(&mut self, to: Slot, epoch: Epoch, operator: usize, key_groups: &[KeyGroup]) {
        if key_groups.is_empty() {
            return;
        }
        let mut moving = vec![false; KEY_GROUPS as usize];
        for g in key_groups {
            if let Some(m) = moving.get_mut(g.index()) {
                *m = true;
            }
        }
        let mut queued: HashMap<KeyGroup, Vec<Frame>> = HashMap::new();
        let mut kept = VecDeque::with_capacity(self.mig.ready.len());
        for f in self.mig.ready.drain(..) {
            match RequestHeader::peek(&f) {
                Ok(h) if h.operator as usize == operator && moving[h.key_group as usize] => {
                    queued.entry(KeyGroup(h.key_group)).or_default().push(f)
                }
                _ => kept.push_back(f),
            }
        }
        self.mig.ready = kept;
        let ahead = self.copied_ahead(operator, to, key_groups);
        self.mig.outgoing.push_back(Outgoing::Export {
            to,
            epoch,
            operator,
            groups: key_groups.iter().copied().collect(),
            queued,
            ahead,
        });
    }

    /// Packs and sends up to [`EXPORT_GROUPS_PER_TURN`] key groups of owed state, and the seals
    /// that were waiting behind them. Returns how many items went out.
    pub(super) fn run_exports(&mut self) -> usize {
        let mut sent = 0;
        loop {
            // Pack more only once the last part left: the state waits in the instance, not
            // twice in memory in an overflow queue (which would also stop the executor reading
            // its ingress).
            let blocked = match self.mig.outgoing.front() {
                None => break,
                Some(Outgoing::Export { to, .. }) => self
                    .out
                    .lane_of(to.index())
                    .is_some_and(|lane| self.out.has_overflow(lane)),
                Some(Outgoing::Seal { .. }) => false,
            };
            if blocked {
                break;
            }
            let Some(front) = self.mig.outgoing.front_mut() else {
                break;
            };
            match front {
                Outgoing::Seal { .. } => {
                    let Some(Outgoing::Seal {
                        to,
                        epoch,
                        operator,
                        key_groups,
                    }) = self.mig.outgoing.pop_front()
                    else {
                        unreachable!("front is a seal");
                    };
                    self.send_message(&seal(operator, &key_groups), epoch, to);
                    self.mig.spans.sealed(to.0);
                    sent += 1;
                    if self.mig.outgoing.is_empty() {
                        // Everything owed is out: the exported groups' memory can go now.
                        self.free_exported();
                    }
                }
                Outgoing::Export {
                    to,
                    epoch,
                    operator,
                    groups,
                    queued,
                    ahead,
                } => {
                    let (to, epoch, operator) = (*to, *epoch, *operator);
                    let (start_ns, start_cpu_ns) = (now_ns(), crate::clock::thread_cpu_ns());
                    let take: Vec<KeyGroup> = (0..EXPORT_GROUPS_PER_TURN)
                        .map_while(|_| groups.pop_front())
                        .collect();
                    let queued_now: Vec<Frame> = take
                        .iter()
                        .flat_map(|g| queued.remove(g).unwrap_or_default())
                        .collect();
                    let changes: Vec<bool> = take.iter().map(|g| ahead.contains(g)).collect();
                    let n_changes = changes.iter().filter(|&&c| c).count() as u64;
                    self.metrics
                        .view()
                        .add(super::scalar::MOVED_AS_CHANGES, n_changes);
                    let done = groups.is_empty();
                    if done {
                        self.mig.outgoing.pop_front();
                    }
                    self.mig.exported_unfreed = true;
                    let instance = &mut self.instances[operator];
                    let msg = Message::State(Box::new(StateMsg {
                        operator: operator as u16,
                        groups: (take.iter().zip(changes))
                            .map(|(&g, changes)| match changes {
                                true => (g.0, instance.export_changes(g.0)),
                                false => (g.0, instance.export_group(g.0)),
                            })
                            .collect(),
                        queued: queued_now,
                    }));
                    let bytes = match encode(&msg) {
                        Ok(b) => b,
                        Err(e) => {
                            self.report_error(format!("state for slot {to}: {e}"));
                            break;
                        }
                    };
                    for part in state_parts(&bytes, self.state_part_bytes) {
                        self.send_message(&Message::StatePart(part), epoch, to);
                    }
                    self.mig
                        .spans
                        .packed(start_ns, start_cpu_ns, take.len(), bytes.len());
                    if done {
                        self.mig.spans.exported(self.my_slot, epoch);
                    }
                    sent += 1;
                    // One chunk per turn: the kept key groups' requests run in between.
                    break;
                }
            }
        }
        sent
    }
}

impl Engine {
    /// Frees the key groups this executor exported (kept until its exports were out: freeing
    /// them reads all their entries, which would have held up the move).
    pub(super) fn free_exported(&mut self) {
        if std::mem::take(&mut self.mig.exported_unfreed) {
            for instance in &mut self.instances {
                instance.free_retired();
            }
        }
    }
}

/// A seal's message.
fn seal(operator: usize, key_groups: &[KeyGroup]) -> Message {
    Message::Seal(Seal {
        operator: operator as u16,
        key_groups: key_groups.iter().map(|g| g.0).collect(),
    })
}
