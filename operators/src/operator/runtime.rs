//! [`Runtime`]: the one [`OperatorInstance`] behind every operator kind. It keeps each key
//! group's states (and their outputs' `seq` counters and timers), digests inputs, outputs and
//! states the way the oracle does, counts malformed requests, and exports and imports whole key
//! groups for migrations — so an operator's author writes only `process`.

use std::collections::BTreeMap;

use super::{ImportError, InstanceContext, Malformed, Operator, OperatorInstance, OperatorSummary};
use crate::codec::StateCodec;
use crate::digest::{Digest, DigestDomain, domain_seed};
use crate::emitter::{Emitter, Out, Target};
use crate::key::{KEY_GROUPS, MAX_KEY_BYTES, key_group, key_group_of};
use crate::output_line::{OutputText, write_line};
use crate::output_seq::OutputSeqs;
use crate::spec::Determinism;
use crate::timers::{TimeDomain, TimerRequests, Timers};

mod ahead;
mod archive;
mod entries;
mod fire;
mod state_map;

use ahead::{Ahead, Changed};
use archive::{ArchiveKind, archive_body, group_archive, read_archive};
pub use archive::{GROUP_ARCHIVE_FORMAT, GroupArchive};
use hashbrown::hash_map::RawEntryMut;
use state_map::{Group, StateKey};

/// The generic [`OperatorInstance`] behind every operator.
pub struct Runtime<O: Operator> {
    op: O,
    ctx: InstanceContext,
    groups: Vec<Group<O::State>>,
    processed: u64,
    malformed: BTreeMap<&'static str, u64>,
    inputs: Digest,
    outputs: Digest,
    seed_state: u64,
    seed_input: u64,
    seed_output: u64,
    scratch: Vec<u8>,
    seqs: OutputSeqs,
    text: OutputText,
    timers: Timers,
    timer_requests: TimerRequests,
    /// Key groups copied ahead of a move (`runtime/ahead.rs`).
    ahead: Ahead<O::State>,
}

impl<O: Operator> Runtime<O> {
    /// Wraps `op` for the place `ctx` in an app.
    pub fn new(op: O, ctx: InstanceContext) -> Self {
        let seed_state = domain_seed(&ctx.name, DigestDomain::State);
        let seed_input = domain_seed(&ctx.name, DigestDomain::Input);
        let seed_output = domain_seed(&ctx.name, DigestDomain::Output);
        Runtime {
            op,
            ctx,
            groups: (0..KEY_GROUPS).map(|_| Group::default()).collect(),
            processed: 0,
            malformed: BTreeMap::new(),
            inputs: Digest::EMPTY,
            outputs: Digest::EMPTY,
            seed_state,
            seed_input,
            seed_output,
            scratch: Vec::new(),
            seqs: OutputSeqs::off(),
            text: OutputText::default(),
            timers: Timers::default(),
            timer_requests: TimerRequests::new(),
            ahead: Ahead::default(),
        }
    }

    /// The wrapped operator.
    pub fn operator_ref(&self) -> &O {
        &self.op
    }

    /// The state of `key`, if it has any.
    pub fn state_of(&self, key: &[u8]) -> Option<&O::State> {
        self.groups[usize::from(key_group_of(key))].get(key)
    }

    fn digest_outputs(&mut self, out: &Emitter, start: usize) {
        for e in out.outputs_from(start) {
            self.outputs
                .add_keyed(self.seed_output, e.key, e.payload, &mut self.scratch);
        }
    }

    /// Numbers the outputs from `start` on, counted in `key_group` (`None`: each in its own
    /// key's group).
    fn number_outputs(
        seqs: &mut OutputSeqs,
        out: &mut Emitter,
        start: usize,
        key_group: Option<u16>,
    ) {
        if !seqs.is_on() {
            return;
        }
        for i in start..out.len() {
            let e = out.get(i);
            if e.target == Target::Output {
                let kg = key_group.unwrap_or_else(|| key_group_of(e.key));
                let seq = seqs.next(kg, e.key);
                out.set_seq(i, seq);
            }
        }
    }

    const STATELESS: bool = size_of::<O::State>() == 0;
}

impl<O: Operator> OperatorInstance for Runtime<O> {
    fn operator(&self) -> u16 {
        self.ctx.operator
    }

    fn keeps_state(&self) -> bool {
        !Self::STATELESS
    }

    #[inline]
    fn state_lines(&self, key_group: u16, key_hash: u64) -> Option<super::StateLines> {
        if Self::STATELESS {
            return None;
        }
        state_map::lookup_lines(&self.groups[usize::from(key_group % KEY_GROUPS)], key_hash)
    }

    #[inline]
    fn process(
        &mut self,
        key_hash: u64,
        key: &[u8],
        payload: &[u8],
        out: &mut Emitter,
    ) -> Result<(), Malformed> {
        debug_assert_eq!(
            key_hash,
            crate::key::key_hash(key),
            "hash does not match the key"
        );
        let key_group = key_group(key_hash);
        self.processed += 1;
        if self.ctx.determinism == Determinism::Racy {
            self.inputs
                .add_keyed(self.seed_input, key, payload, &mut self.scratch);
        }
        let start = out.len();
        let mut o = Out::with_timers(out, &self.ctx.successors, &mut self.timer_requests);
        let result = if Self::STATELESS {
            let mut s = O::State::default();
            self.op.process(key, payload, &mut s, &mut o)
        } else {
            let group = &mut self.groups[usize::from(key_group % KEY_GROUPS)];
            let hash = state_map::map_hash(key_hash);
            let r = match group
                .raw_entry_mut()
                .from_hash(hash, |k| state_map::key_eq(k, key))
            {
                RawEntryMut::Occupied(mut entry) => {
                    let r = self.op.process(key, payload, entry.get_mut(), &mut o);
                    if *entry.get() == O::State::default() {
                        entry.remove();
                    }
                    r
                }
                RawEntryMut::Vacant(entry) => {
                    let mut s = O::State::default();
                    let r = self.op.process(key, payload, &mut s, &mut o);
                    if s != O::State::default() {
                        entry.insert_hashed_nocheck(hash, key.into(), s);
                    }
                    r
                }
            };
            // A group copied ahead of its move: its changes are what the move will carry
            // (output counters and timers move whole, so only state changes are recorded).
            if !self.ahead.tracked.is_empty() {
                self.ahead.touch(key_group, key);
            }
            r
        };
        let result = result.and_then(|()| {
            // A longer key does not fit a request: the data plane could not carry it.
            if out.any_key_longer_than(start, MAX_KEY_BYTES) {
                Err(Malformed::new("emitted a key longer than 1024 bytes"))
            } else {
                Ok(())
            }
        });
        match result {
            Ok(()) => {
                if out.len() > start {
                    self.digest_outputs(out, start);
                    // Checked here: the call alone, with nothing to number, cost more than
                    // the check (outputs are numbered only for a sink).
                    if self.seqs.is_on() {
                        Self::number_outputs(&mut self.seqs, out, start, Some(key_group));
                    }
                }
                self.apply_timer_requests(key_group, key);
                Ok(())
            }
            Err(m) => {
                out.truncate(start);
                self.timer_requests.clear();
                *self.malformed.entry(m.reason).or_default() += 1;
                Err(m)
            }
        }
    }

    fn end_of_stream(&mut self, out: &mut Emitter) {
        // Every key's `end_of_key` may change it: a group copied ahead moves whole.
        self.ahead.all_changed();
        self.advance_watermark(u64::MAX, out);
        self.timers.drop_processing();
        let start = out.len();
        for group in &mut self.groups {
            if group.is_empty() {
                continue;
            }
            let mut keys: Vec<StateKey> = group.keys().cloned().collect();
            keys.sort_unstable();
            for key in keys {
                let s = group.get_mut(&key).expect("key listed above");
                let from = out.len();
                let mut o = Out::with_timers(out, &self.ctx.successors, &mut self.timer_requests);
                self.op.end_of_key(&key, s, &mut o);
                if *s == O::State::default() {
                    group.remove(&key);
                }
                let kg = key_group_of(&key);
                Self::number_outputs(&mut self.seqs, out, from, Some(kg));
                let refused = self.timers.apply(kg, &key, &mut self.timer_requests);
                Self::count_refused(&mut self.malformed, refused);
            }
        }
        // Processing-time timers an `end_of_key` set can never fire now. Nothing in the loop
        // fires them, so they are dropped once, here: dropping them after each key walked
        // every key group's timers once a key (seconds for a million keys).
        self.timers.drop_processing();
        let from = out.len();
        self.op
            .end_of_stream(&mut Out::new(out, &self.ctx.successors));
        Self::number_outputs(&mut self.seqs, out, from, None);
        self.digest_outputs(out, start);
    }

    fn export_group(&mut self, key_group: u16) -> Vec<u8> {
        // One archive for both: a checkpoint's copy is byte for byte what a migration moves.
        let archive = self.copy_group(key_group);
        self.ahead.tracked.remove(&key_group);
        // Taken, not cleared: the group lives elsewhere now (freed later, `free_retired`).
        let group = std::mem::take(&mut self.groups[usize::from(key_group % KEY_GROUPS)]);
        self.ahead.retire(group);
        self.seqs.remove(key_group);
        self.timers.remove(key_group);
        archive
    }

    fn copy_group(&self, key_group: u16) -> Vec<u8> {
        let group = &self.groups[usize::from(key_group % KEY_GROUPS)];
        if group.is_empty() && !self.seqs.holds(key_group) && !self.timers.holds(key_group) {
            // Nothing to carry: no bytes at all, rather than an archive to build and validate
            // (a stateless operator's thousand groups cost as much as a counter's to move).
            return Vec::new();
        }
        // In the map's order, not sorted: the receiver inserts each key into a map, so order
        // buys nothing, and sorting was 60 % of the copy (1.35 against 0.56 ms for WC's
        // 42 000 words, `benches/benches/state.rs`), on the path of a moving key group's held
        // requests and of every checkpoint's pause.
        let mut entries = Vec::with_capacity(group.len() * entries::TYPICAL_ENTRY_BYTES);
        for (key, state) in group {
            entries::push(&mut entries, key, |out| state.encode(out));
        }
        let entries = (group.len() as u32, entries);
        let (seqs, timers) = (self.seqs.copy(key_group), self.timers.copy(key_group));
        group_archive(ArchiveKind::Whole, key_group, entries, seqs, timers)
    }

    fn import_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError> {
        let slot = usize::from(key_group % KEY_GROUPS);
        if !self.groups[slot].is_empty()
            || self.seqs.holds(key_group)
            || self.timers.holds(key_group)
        {
            return Err(ImportError::Occupied(key_group));
        }
        // A whole group replaces any copy of it; changes need one.
        let staged = self.ahead.staged.remove(&key_group);
        if bytes.is_empty() {
            return Ok(0);
        }
        let (kind, body) = archive_body(bytes)?;
        let (group, seqs, timers) = read_archive(key_group, body, |archive| {
            let count = archive.entry_count.to_native() as usize;
            let group = match (kind, staged) {
                (ArchiveKind::Whole, _) => Self::read_group(key_group, count, &archive.entries)?,
                (ArchiveKind::Changes, Some(mut group)) => {
                    ahead::apply_changes(&mut group, key_group, count, &archive.entries)?;
                    group
                }
                (ArchiveKind::Changes, None) => return Err(ahead::not_copied(key_group)),
            };
            let mut seqs = Vec::with_capacity(archive.output_seqs.len());
            for entry in archive.output_seqs.iter() {
                let key: &[u8] = &entry.0;
                let kg = key_group_of(key);
                if kg != key_group {
                    return Err(ImportError::ForeignKey(kg));
                }
                seqs.push((key.to_vec(), entry.1.to_native()));
            }
            let timers = fire::import_timers(key_group, &archive.timers)?;
            Ok((group, seqs, timers))
        })?;
        let n = group.len();
        self.groups[slot] = group;
        self.seqs.import(key_group, seqs);
        self.timers.import(key_group, timers);
        Ok(n)
    }

    fn track_changes(&mut self, key_group: u16) {
        let keys = Changed::Keys(Default::default());
        self.ahead.tracked.insert(key_group, keys);
    }

    fn untrack(&mut self, key_group: u16) {
        self.ahead.tracked.remove(&key_group);
    }

    fn export_changes(&mut self, key_group: u16) -> Vec<u8> {
        self.changes_archive(key_group)
    }

    fn refresh_copy(&mut self, key_group: u16) -> Option<Vec<u8>> {
        self.refresh_archive(key_group)
    }

    fn stage_group(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError> {
        self.stage(key_group, bytes)
    }

    fn drop_staged(&mut self, key_group: u16) {
        self.ahead.staged.remove(&key_group);
    }

    fn free_retired(&mut self) {
        self.ahead.free_retired();
    }

    fn state_digest(&self) -> Digest {
        let mut d = Digest::EMPTY;
        let mut value = Vec::new();
        let mut scratch = Vec::new();
        for group in &self.groups {
            for (k, s) in group {
                value.clear();
                s.encode(&mut value);
                d.add_keyed(self.seed_state, k, &value, &mut scratch);
            }
        }
        d
    }

    fn groups_with_state(&self) -> Vec<u16> {
        (0..KEY_GROUPS)
            .filter(|&g| !self.groups[usize::from(g)].is_empty())
            .collect()
    }

    fn state_keys(&self) -> usize {
        self.groups.iter().map(Group::len).sum()
    }

    fn summary(&self) -> OperatorSummary {
        OperatorSummary {
            processed: self.processed,
            malformed: self.malformed.values().sum(),
            state: self.state_digest(),
            inputs: self.inputs,
            outputs: self.outputs,
        }
    }

    fn malformed_reasons(&self) -> Vec<(&'static str, u64)> {
        self.malformed.iter().map(|(r, n)| (*r, *n)).collect()
    }

    fn advance_watermark(&mut self, watermark: u64, out: &mut Emitter) {
        let due = self.timers.advance_watermark(watermark);
        self.fire(TimeDomain::Event, due, out);
    }

    fn next_processing_timer_ms(&self) -> Option<u64> {
        self.timers.next_processing_ms()
    }

    fn fire_processing_timers(&mut self, now_ms: u64, out: &mut Emitter) {
        let due = self.timers.take_due_processing(now_ms);
        self.fire(TimeDomain::Processing, due, out);
    }

    fn pending_timers(&self) -> usize {
        self.timers.pending()
    }

    fn track_output_seq(&mut self) {
        self.seqs.turn_on();
    }

    fn write_output_line(&mut self, key: &[u8], value: &[u8], seq: u64, line: &mut Vec<u8>) {
        self.text.clear();
        let text = self
            .op
            .output_text(key, value, &mut self.text)
            .then_some(&self.text);
        write_line(line, &self.ctx.name, key, value, text, seq);
    }

    fn record_key(&self, ordinal: u64, record: &[u8], key: &mut Vec<u8>) {
        self.op.record_key(ordinal, record, key);
    }
}

impl<O: Operator> Runtime<O> {
    /// The `count` states of a whole archive's untrusted `bytes`, of key group `key_group`.
    fn read_group(
        key_group: u16,
        count: usize,
        bytes: &[u8],
    ) -> Result<Group<O::State>, ImportError> {
        let mut group = Group::<O::State>::default();
        // Reserved by what the bytes can hold, not by what the archive claims.
        group.reserve(count.min(bytes.len() / entries::HEADER_BYTES));
        let mut walk = entries::Entries::new(bytes);
        for _ in 0..count {
            let (key, mut input) = walk.next_entry()?;
            let kg = key_group_of(key);
            if kg != key_group {
                return Err(ImportError::ForeignKey(kg));
            }
            let state = O::State::decode(&mut input)?;
            if !input.is_empty() {
                return Err(crate::codec::DecodeError("trailing state bytes").into());
            }
            if group.insert(key.into(), state).is_some() {
                return Err(ImportError::Archive(format!(
                    "a state key twice in key group {key_group}"
                )));
            }
        }
        walk.finish()?;
        Ok(group)
    }
}
