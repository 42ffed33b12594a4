//! Key groups copied ahead of a move: the old owner records which keys change after the copy,
//! the new owner keeps the copy aside, and at the move only the changes travel.
//!
//! Why: a moving key group's requests wait at its new owner until its state is in. Moved whole
//! at the cut, that wait is the packing, sending and importing of every key (about 4 ms for
//! WC's 42 000 words on a 2-vCPU guest); copied ahead while the old owner still runs it, the
//! wait is only the keys that changed since, which the old owner records from the copy on
//! ([`Ahead::touch`], one map lookup per request while a copy is out, none otherwise).
//!
//! The changes travel as an archive of the same layout as a whole group's, under its own magic
//! (`archive.rs`): each changed key with its state, or as deleted. Output counters and timers
//! travel whole in it (they replace the copy's). Where the record is not complete — the end of
//! the stream touched every key — the old owner sends the whole group instead, which replaces
//! any copy.

use std::collections::{HashMap, HashSet};

use super::archive::{ArchiveKind, archive_body, group_archive, read_archive};
use super::state_map::{FromKeyHash, Group, StateKey};
use super::{Runtime, entries};
use crate::codec::StateCodec;
use crate::key::{KEY_GROUPS, key_group_of};
use crate::operator::{ImportError, Operator};

/// What changed in a key group since its copy was taken.
pub(super) enum Changed {
    /// These keys (each changed, added or deleted).
    Keys(HashSet<StateKey, FromKeyHash>),
    /// Not recorded key by key: the group must move whole.
    All,
}

/// An instance's copies ahead, on either side of a move.
pub(super) struct Ahead<S> {
    /// Key groups this instance gives up and copied (or is about to copy) ahead: their changes
    /// since.
    pub(super) tracked: HashMap<u16, Changed>,
    /// Key groups received ahead of their move, not live until their changes are imported.
    pub(super) staged: HashMap<u16, Group<S>>,
    /// Key groups given up and not freed yet ([`Ahead::retire`]).
    retired: Vec<Group<S>>,
}

impl<S> Default for Ahead<S> {
    fn default() -> Self {
        Ahead {
            tracked: HashMap::new(),
            staged: HashMap::new(),
            retired: Vec::new(),
        }
    }
}

impl<S> Ahead<S> {
    /// `key` of `key_group` may have changed (its request ran, or its timer fired).
    #[inline]
    pub(super) fn touch(&mut self, key_group: u16, key: &[u8]) {
        if let Some(Changed::Keys(keys)) = self.tracked.get_mut(&key_group)
            && !keys.contains(key)
        {
            keys.insert(StateKey::from_slice(key));
        }
    }

    /// Keeps a given-up group to free later: freeing a map reads every entry (to drop its
    /// key), cold memory by then, and was three quarters of exporting WC's count as changes
    /// (0.8 against 0.2 ms for its 1 024 groups in a single-thread test).
    pub(super) fn retire(&mut self, group: Group<S>) {
        if group.capacity() > 0 {
            self.retired.push(group);
        }
    }

    /// Frees the groups given up.
    pub(super) fn free_retired(&mut self) {
        if !self.retired.is_empty() {
            self.retired = Vec::new();
        }
    }

    /// Every key of every tracked group may have changed.
    pub(super) fn all_changed(&mut self) {
        for c in self.tracked.values_mut() {
            *c = Changed::All;
        }
    }
}

impl<O: Operator> Runtime<O> {
    /// `export_changes`: key group `key_group` given up as what changed since its copy, or
    /// whole when that was not recorded key by key.
    pub(super) fn changes_archive(&mut self, key_group: u16) -> Vec<u8> {
        let Some(Changed::Keys(changed)) = self.ahead.tracked.remove(&key_group) else {
            return crate::OperatorInstance::export_group(self, key_group);
        };
        let group = std::mem::take(&mut self.groups[usize::from(key_group % KEY_GROUPS)]);
        let entries = changes_entries(&group, &changed);
        self.ahead.retire(group);
        let (seqs, timers) = (self.seqs.export(key_group), self.timers.export(key_group));
        group_archive(ArchiveKind::Changes, key_group, entries, seqs, timers)
    }

    /// `refresh_copy`: what changed in `key_group` since its copy or its last refresh, with
    /// the record restarted; `None` when nothing did or the changes are not recorded key by
    /// key. The group stays live here.
    pub(super) fn refresh_archive(&mut self, key_group: u16) -> Option<Vec<u8>> {
        let Some(Changed::Keys(changed)) = self.ahead.tracked.get_mut(&key_group) else {
            return None;
        };
        if changed.is_empty() {
            return None;
        }
        let changed = std::mem::take(changed);
        let group = &self.groups[usize::from(key_group % KEY_GROUPS)];
        let entries = changes_entries(group, &changed);
        // Counters and timers are left out: the changes at the move carry them whole.
        Some(group_archive(
            ArchiveKind::Changes,
            key_group,
            entries,
            Vec::new(),
            Vec::new(),
        ))
    }

    /// `stage_group`: a copy of `key_group` decoded and kept aside, or a refresh of the copy
    /// staged here applied to it.
    pub(super) fn stage(&mut self, key_group: u16, bytes: &[u8]) -> Result<usize, ImportError> {
        if bytes.is_empty() {
            self.ahead.staged.insert(key_group, Group::default());
            return Ok(0);
        }
        let (kind, body) = archive_body(bytes)?;
        if kind == ArchiveKind::Changes {
            let Some(group) = self.ahead.staged.get_mut(&key_group) else {
                return Err(not_copied(key_group));
            };
            return read_archive(key_group, body, |archive| {
                let count = archive.entry_count.to_native() as usize;
                apply_changes(group, key_group, count, &archive.entries)?;
                Ok(count)
            });
        }
        // Its counters and timers are not kept: the changes carry them whole.
        let group = read_archive(key_group, body, |archive| {
            let count = archive.entry_count.to_native() as usize;
            Self::read_group(key_group, count, &archive.entries)
        })?;
        let n = group.len();
        self.ahead.staged.insert(key_group, group);
        Ok(n)
    }
}

/// The entries of a changes archive for `group` after `changed`: each key's state, or the key
/// as deleted when the group no longer holds it. Returns the entry count and the entries.
fn changes_entries<S: StateCodec>(
    group: &Group<S>,
    changed: &HashSet<StateKey, FromKeyHash>,
) -> (u32, Vec<u8>) {
    let mut out = Vec::with_capacity(changed.len() * entries::TYPICAL_ENTRY_BYTES);
    for key in changed {
        match group.get(key) {
            Some(state) => entries::push(&mut out, key, |o| state.encode(o)),
            None => entries::push_deleted(&mut out, key),
        }
    }
    (changed.len() as u32, out)
}

/// Changes to `key_group` came where no copy of it is staged.
pub(super) fn not_copied(key_group: u16) -> ImportError {
    ImportError::Archive(format!(
        "changes to key group {key_group}, which was not copied here ahead"
    ))
}

/// Applies `count` changes from untrusted `bytes` to `group`, a copy of `key_group`.
pub(super) fn apply_changes<S: StateCodec>(
    group: &mut Group<S>,
    key_group: u16,
    count: usize,
    bytes: &[u8],
) -> Result<(), ImportError> {
    let mut walk = entries::Entries::new(bytes);
    for _ in 0..count {
        let (key, state) = walk.next_change()?;
        let kg = key_group_of(key);
        if kg != key_group {
            return Err(ImportError::ForeignKey(kg));
        }
        match state {
            Some(mut input) => {
                let s = S::decode(&mut input)?;
                if !input.is_empty() {
                    return Err(crate::codec::DecodeError("trailing state bytes").into());
                }
                group.insert(key.into(), s);
            }
            None => {
                group.remove(key);
            }
        }
    }
    walk.finish()
}
