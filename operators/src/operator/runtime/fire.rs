//! Firing a runtime's timers and applying the timer requests of a call.
//!
//! Why apart from `process`: a timer fires outside any request, so the runtime itself finds
//! the key's state (or its default), calls [`Operator::on_timer`], and keeps the same books a
//! request keeps — vacant state freed, outputs numbered in the key's group and digested, and
//! the timers the callback set or deleted applied to that key.

use std::collections::BTreeMap;

use rkyv::vec::ArchivedVec;

use super::super::{ImportError, Operator};
use super::Runtime;
use super::state_map::StateKey;
use crate::emitter::{Emitter, Out};
use crate::key::{KEY_GROUPS, key_group_of};
use crate::timers::ExportedTimers;
use crate::timers::{LATE_TIMER, TimeDomain, Timer};

impl<O: Operator> Runtime<O> {
    /// Applies what the last call asked of `key`'s timers; counts refused ones as malformed.
    /// Inlined: nearly every call has nothing to apply, and the call alone cost more.
    #[inline]
    pub(super) fn apply_timer_requests(&mut self, key_group: u16, key: &[u8]) {
        if !self.timer_requests.as_slice().is_empty() {
            self.apply_timer_requests_now(key_group, key);
        }
    }

    #[inline(never)]
    fn apply_timer_requests_now(&mut self, key_group: u16, key: &[u8]) {
        let refused = self.timers.apply(key_group, key, &mut self.timer_requests);
        Self::count_refused(&mut self.malformed, refused);
    }

    /// Counts `refused` timers under [`LATE_TIMER`].
    pub(super) fn count_refused(malformed: &mut BTreeMap<&'static str, u64>, refused: u64) {
        if refused > 0 {
            *malformed.entry(LATE_TIMER).or_default() += refused;
        }
    }

    /// Calls `on_timer` for each `(key, time)` of `due`, in that order.
    pub(super) fn fire(
        &mut self,
        domain: TimeDomain,
        due: Vec<(Box<[u8]>, u64)>,
        out: &mut Emitter,
    ) {
        let start = out.len();
        for (key, at) in due {
            let kg = key_group_of(&key);
            let from = out.len();
            let timer = Timer { domain, at };
            let group = &mut self.groups[usize::from(kg % KEY_GROUPS)];
            let mut o = Out::with_timers(out, &self.ctx.successors, &mut self.timer_requests);
            if let Some(s) = group.get_mut(&key[..]) {
                self.op.on_timer(&key, s, timer, &mut o);
                if *s == O::State::default() {
                    group.remove(&key[..]);
                }
            } else {
                let mut s = O::State::default();
                self.op.on_timer(&key, &mut s, timer, &mut o);
                if !Self::STATELESS && s != O::State::default() {
                    group.insert(StateKey::from_slice(&key), s);
                }
            }
            if !Self::STATELESS && !self.ahead.tracked.is_empty() {
                self.ahead.touch(kg, &key);
            }
            Self::number_outputs(&mut self.seqs, out, from, Some(kg));
            self.apply_timer_requests(kg, &key);
        }
        self.digest_outputs(out, start);
    }
}

/// Reads an archive's timers, checking that every key belongs to `key_group`.
pub(super) fn import_timers(
    key_group: u16,
    archived: &ArchivedVec<<ExportedTimers as rkyv::Archive>::Archived>,
) -> Result<Vec<ExportedTimers>, ImportError> {
    let mut timers = Vec::with_capacity(archived.len());
    for entry in archived.iter() {
        let key: &[u8] = &entry.0;
        let kg = key_group_of(key);
        if kg != key_group {
            return Err(ImportError::ForeignKey(kg));
        }
        let event = entry.1.iter().map(|t| t.to_native()).collect();
        let processing = entry.2.iter().map(|t| t.to_native()).collect();
        timers.push((key.to_vec(), event, processing));
    }
    Ok(timers)
}
