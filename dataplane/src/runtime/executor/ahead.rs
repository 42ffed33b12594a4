//! Copying key groups ahead of their move, so that the move itself carries only what changed.
//!
//! Why: the requests of a moving key group wait at its new owner until its state is in. Moved
//! whole at the cut, that wait holds the packing, sending and importing of every key of every
//! moving group, a few ms for WC's 42 000 words, during which nearly every sentence waits. The
//! driver therefore announces a move (`Message::CopyAhead`) before it plans it; each executor
//! then records changes to the key groups it will give up ([`OperatorInstance::track_changes`])
//! and copies them to their new owners on the same FIFO path its state will take (one chunk of
//! [`super::migrating`]'s size per turn, after any export still owed), and a new owner stages
//! what it receives (decoded, not live). At the plan, a group copied ahead moves as its changes
//! (`export_changes`, applied over the staged copy by `import_group`); a group not copied yet,
//! or whose record is incomplete, moves whole as before, replacing any copy. Nothing here is
//! needed for correctness — a move that never comes leaves copies that are dropped at the next
//! plan, and changes are only ever sent after their copy on the same path.
//!
//! Until the plan comes, the copies are refreshed in rounds ([`REFRESH_INTERVAL_NS`] apart):
//! each round sends, per copied group, what changed since the copy or the last round
//! ([`OperatorInstance::refresh_copy`]), which the new owner applies to its staged copy. What
//! is left for the move is then the last round's worth of changes, in memory the executor
//! touched recently, instead of everything since the copy: looking up each changed key in a
//! group gone cold was about 1 µs a key group of WC's count at the move.
//!
//! [`OperatorInstance::track_changes`]: clasp_operators::OperatorInstance::track_changes
//! [`OperatorInstance::refresh_copy`]: clasp_operators::OperatorInstance::refresh_copy

use super::Engine;
use super::migrating::EXPORT_GROUPS_PER_TURN;
use crate::clock::monotonic_ns;
use crate::message::{Message, StateMsg, encode};
use crate::migrate::state_parts;
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::{Epoch, KeyGroup, RoutingTable, Slot};
use std::collections::{HashMap, HashSet, VecDeque};

/// Time between the starts of two refresh rounds of the copies ahead (module docs). Shorter
/// leaves less for the move; each round costs a look at every copied group's record and the
/// sending, staging and applying of what changed, so rounds are not run back to back.
pub(super) const REFRESH_INTERVAL_NS: u64 = 1_000_000;

/// An executor's copies ahead, as the old owner and as the new one.
#[derive(Default)]
pub(super) struct CopyAhead {
    /// Key groups still to copy: per operator and new owner, in order.
    pending: VecDeque<(usize, Slot, VecDeque<KeyGroup>)>,
    /// (operator, key group) → the slot a copy of it went to.
    copied: HashMap<(usize, u16), Slot>,
    /// (operator, new owner, key group) of every copy sent, in the order sent: what a refresh
    /// round walks.
    sent: Vec<(usize, Slot, u16)>,
    /// Where the refresh round under way is in `sent`; `None` between rounds.
    round_at: Option<usize>,
    /// When the next refresh round may start.
    next_round_ns: u64,
    /// (operator, key group) whose changes are being recorded.
    tracked: Vec<(usize, u16)>,
    /// (operator, key group) → the epoch of the move a copy staged here is for.
    staged: HashMap<(usize, u16), u64>,
}

impl CopyAhead {
    /// Nothing more to copy or refresh (the plan came, or the move was abandoned).
    fn stop_rounds(&mut self) {
        self.pending.clear();
        self.copied.clear();
        self.sent.clear();
        self.round_at = None;
    }
}

impl Engine {
    /// A move to `routing` is coming: record changes to every key group it takes from this
    /// slot, and queue their copies. A copy ahead of an earlier announcement that no plan
    /// followed is abandoned (its groups move whole if they move after all).
    pub(super) fn start_copy_ahead(&mut self, routing: &RoutingTable) {
        self.abandon_copy_ahead();
        for op in 0..self.instances.len() {
            let mut by_owner: HashMap<Slot, VecDeque<KeyGroup>> = HashMap::new();
            for kg in 0..KEY_GROUPS {
                let Some(to) = routing.get(op, KeyGroup(kg)) else {
                    continue;
                };
                if self.table.slot(op, kg) == self.my_slot && to.0 != u32::from(self.my_slot) {
                    self.instances[op].track_changes(kg);
                    self.ahead.tracked.push((op, kg));
                    by_owner.entry(to).or_default().push_back(KeyGroup(kg));
                }
            }
            let mut owners: Vec<_> = by_owner.into_iter().collect();
            owners.sort_unstable_by_key(|(to, _)| *to);
            for (to, groups) in owners {
                self.ahead.pending.push_back((op, to, groups));
            }
        }
    }

    /// Stops recording changes and forgets what was copied (the copies stay with their
    /// receivers until the next plan).
    fn abandon_copy_ahead(&mut self) {
        for (op, kg) in self.ahead.tracked.drain(..) {
            self.instances[op].untrack(kg);
        }
        self.ahead.stop_rounds();
    }

    /// Of `key_groups` of `operator` moving to `to` now, those copied there ahead (they move as
    /// their changes).
    pub(super) fn copied_ahead(
        &mut self,
        operator: usize,
        to: Slot,
        key_groups: &[KeyGroup],
    ) -> HashSet<KeyGroup> {
        key_groups
            .iter()
            .copied()
            .filter(|g| self.ahead.copied.get(&(operator, g.0)) == Some(&to))
            .collect()
    }

    /// A plan of `epoch` was taken and its exports queued: copies staged here for earlier
    /// moves are dropped, and recording stops for every group this slot keeps after all.
    pub(super) fn copy_ahead_planned(&mut self, epoch: Epoch) {
        let stale: Vec<(usize, u16)> = (self.ahead.staged.iter())
            .filter(|&(_, &e)| e < epoch.0)
            .map(|(&k, _)| k)
            .collect();
        for (op, kg) in stale {
            self.ahead.staged.remove(&(op, kg));
            self.instances[op].drop_staged(kg);
        }
        for (op, kg) in std::mem::take(&mut self.ahead.tracked) {
            // A group given up is untracked by its export; one kept must be here.
            if self.table.slot(op, kg) == self.my_slot {
                self.instances[op].untrack(kg);
            }
        }
        self.ahead.stop_rounds();
    }

    /// Copies up to [`EXPORT_GROUPS_PER_TURN`] key groups ahead, or refreshes as many copies
    /// once all are out, after every export owed went out. Returns 1 when it did either.
    pub(super) fn run_copy_ahead(&mut self) -> usize {
        if !self.mig.outgoing_is_empty() {
            return 0;
        }
        if self.ahead.pending.is_empty() {
            return self.refresh_copies();
        }
        let Some(&(op, to, _)) = self.ahead.pending.front() else {
            return 0;
        };
        if self.lane_blocked(to) {
            return 0;
        }
        let Some((_, _, groups)) = self.ahead.pending.front_mut() else {
            return 0;
        };
        let take: Vec<KeyGroup> = (0..EXPORT_GROUPS_PER_TURN)
            .map_while(|_| groups.pop_front())
            .collect();
        if groups.is_empty() {
            self.ahead.pending.pop_front();
            if self.ahead.pending.is_empty() {
                self.ahead.next_round_ns = monotonic_ns() + REFRESH_INTERVAL_NS;
            }
        }
        // An empty group is not copied (it moves as no bytes anyway), nor its changes recorded.
        let mut groups: Vec<(u16, Vec<u8>)> = Vec::with_capacity(take.len());
        for g in take {
            let archive = self.instances[op].copy_group(g.0);
            if archive.is_empty() {
                self.instances[op].untrack(g.0);
            } else {
                groups.push((g.0, archive));
            }
        }
        if groups.is_empty() {
            return 1;
        }
        let copied: Vec<u16> = groups.iter().map(|(g, _)| *g).collect();
        if !self.send_ahead(op, to, groups) {
            return 0;
        }
        self.metrics
            .view()
            .add(super::scalar::COPIED_AHEAD, copied.len() as u64);
        for g in copied {
            self.ahead.copied.insert((op, g), to);
            self.ahead.sent.push((op, to, g));
        }
        1
    }

    /// Whether the lane to `to` holds frames its ring had no room for (then nothing more is
    /// queued behind them).
    fn lane_blocked(&self, to: Slot) -> bool {
        (self.out.lane_of(to.index())).is_some_and(|l| self.out.has_overflow(l))
    }

    /// The next chunk of a refresh round of the copies ahead: up to
    /// [`EXPORT_GROUPS_PER_TURN`] copies of one operator at one new owner, each sent what
    /// changed since it was copied or last refreshed. A round starts [`REFRESH_INTERVAL_NS`]
    /// after the last one started. Returns 1 when it took a chunk.
    fn refresh_copies(&mut self) -> usize {
        let a = &mut self.ahead;
        let at = match a.round_at {
            Some(at) => at,
            None if a.sent.is_empty() => return 0,
            None => {
                let now_ns = monotonic_ns();
                if now_ns < a.next_round_ns {
                    return 0;
                }
                a.next_round_ns = now_ns + REFRESH_INTERVAL_NS;
                0
            }
        };
        let (op, to, _) = a.sent[at];
        a.round_at = Some(at);
        if self.lane_blocked(to) {
            return 0;
        }
        let a = &mut self.ahead;
        let end = (at..a.sent.len())
            .take(EXPORT_GROUPS_PER_TURN)
            .take_while(|&i| (a.sent[i].0, a.sent[i].1) == (op, to))
            .last()
            .map_or(at, |i| i + 1);
        a.round_at = (end < a.sent.len()).then_some(end);
        let instance = &mut self.instances[op];
        let groups: Vec<(u16, Vec<u8>)> = (self.ahead.sent[at..end].iter())
            .filter_map(|&(_, _, g)| instance.refresh_copy(g).map(|changes| (g, changes)))
            .collect();
        let n = groups.len() as u64;
        if n > 0 && self.send_ahead(op, to, groups) {
            self.metrics.view().add(super::scalar::REFRESHED_AHEAD, n);
        }
        1
    }

    /// Sends `groups` of operator `op` (copies, or refreshes of copies) ahead to `to`, as one
    /// message in parts. Returns false when there was nothing to send or it could not be
    /// encoded (reported).
    fn send_ahead(&mut self, op: usize, to: Slot, groups: Vec<(u16, Vec<u8>)>) -> bool {
        if groups.is_empty() {
            return false;
        }
        let msg = Message::StateAhead(Box::new(StateMsg {
            operator: op as u16,
            groups,
            queued: Vec::new(),
        }));
        let bytes = match encode(&msg) {
            Ok(b) => b,
            Err(e) => {
                self.report_error(format!("a copy ahead for slot {to}: {e}"));
                return false;
            }
        };
        let next = self.epoch.next();
        for part in state_parts(&bytes, self.state_part_bytes) {
            self.send_message(&Message::StatePart(part), next, to);
        }
        true
    }

    /// Key groups copied here ahead of the move of `epoch`: staged until their changes come.
    pub(super) fn stage_ahead(&mut self, epoch: Epoch, from: u16, m: StateMsg) {
        let op = usize::from(m.operator);
        if op >= self.instances.len() {
            return self.report_error(format!("a copy ahead from slot {from}: operator {op}"));
        }
        for (g, archive) in m.groups {
            if g >= KEY_GROUPS {
                return self.report_error(format!("a copy ahead from slot {from}: key group {g}"));
            }
            match self.instances[op].stage_group(g, &archive) {
                Ok(_) => {
                    self.ahead.staged.insert((op, g), epoch.0);
                }
                Err(e) => self.report_error(format!(
                    "a copy ahead of operator {op} key group {g} from slot {from}: {e}"
                )),
            }
        }
    }
}
