//! The `seq` of outputs: per operator and key, the number of outputs emitted before this one.
//!
//! A sink writes `seq` so that a reader can order a key's outputs even when they come from
//! several workers' files (a key's outputs move between workers with its key group). So the
//! counters must move with the key group too: they are kept per key group, next to the
//! operator's state, and exported and imported in the same group archive. They are not part of
//! the state's digest (a run with a sink equals the oracle's run without one).
//!
//! A counter is kept under the output's key in the key group of the request that emitted it
//! (the key group that moves): for every built-in kind the output's key is the key the
//! operator processes, so this numbers each key's outputs exactly. An output emitted at the
//! end of the stream by the instance itself (not for a key) is counted in its own key's group.
//!
//! Cost: nothing unless a sink is configured ([`OutputSeqs::off`]); with one, a map entry per
//! distinct output key that ever had an output (its bytes and a `u64`).

use std::collections::HashMap;

use xxhash_rust::xxh3::Xxh3DefaultBuilder;

use crate::key::KEY_GROUPS;

type Counters = HashMap<Box<[u8]>, u64, Xxh3DefaultBuilder>;

/// The output counters of one operator instance, per key group (see the module docs).
#[derive(Debug, Default)]
pub struct OutputSeqs {
    /// Empty while off; else one map per key group.
    groups: Vec<Counters>,
}

impl OutputSeqs {
    /// Not counting (no sink): every call below is a no-op, exports are empty.
    pub fn off() -> Self {
        OutputSeqs::default()
    }

    /// Starts counting (idempotent).
    pub fn turn_on(&mut self) {
        if self.groups.is_empty() {
            self.groups = (0..KEY_GROUPS).map(|_| Counters::default()).collect();
        }
    }

    /// Whether outputs are counted.
    #[inline]
    pub fn is_on(&self) -> bool {
        !self.groups.is_empty()
    }

    /// The `seq` of the next output under `key` counted in `key_group`, and counts it.
    #[inline]
    pub fn next(&mut self, key_group: u16, key: &[u8]) -> u64 {
        let Some(group) = self.groups.get_mut(usize::from(key_group % KEY_GROUPS)) else {
            return 0;
        };
        if let Some(n) = group.get_mut(key) {
            let seq = *n;
            *n += 1;
            seq
        } else {
            group.insert(key.into(), 1);
            0
        }
    }

    /// Whether `key_group` holds counters.
    pub fn holds(&self, key_group: u16) -> bool {
        self.groups
            .get(usize::from(key_group % KEY_GROUPS))
            .is_some_and(|g| !g.is_empty())
    }

    /// Removes `key_group`'s counters: `(key, next seq)`, in no particular order.
    pub fn export(&mut self, key_group: u16) -> Vec<(Vec<u8>, u64)> {
        let entries = self.copy(key_group);
        self.remove(key_group);
        entries
    }

    /// Drops key group `key_group`'s counters.
    pub fn remove(&mut self, key_group: u16) {
        if let Some(group) = self.groups.get_mut(usize::from(key_group % KEY_GROUPS)) {
            *group = Counters::default();
        }
    }

    /// Key group `key_group`'s counters in the map's order (unsorted, like the states beside
    /// them: an importer puts them into a map), kept here (a checkpoint copies state the
    /// executor goes on running with; [`OutputSeqs::export`] is this and a removal).
    pub fn copy(&self, key_group: u16) -> Vec<(Vec<u8>, u64)> {
        let Some(group) = self.groups.get(usize::from(key_group % KEY_GROUPS)) else {
            return Vec::new();
        };
        group.iter().map(|(k, &n)| (k.to_vec(), n)).collect()
    }

    /// Installs counters exported by [`OutputSeqs::export`] (turning counting on: a worker
    /// that receives them is part of a run with a sink).
    pub fn import(&mut self, key_group: u16, entries: impl IntoIterator<Item = (Vec<u8>, u64)>) {
        let mut entries = entries.into_iter().peekable();
        if entries.peek().is_none() {
            return;
        }
        self.turn_on();
        let group = &mut self.groups[usize::from(key_group % KEY_GROUPS)];
        for (k, n) in entries {
            group.insert(k.into_boxed_slice(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_counts_nothing_and_on_counts_per_key() {
        let mut s = OutputSeqs::off();
        assert_eq!(s.next(3, b"a"), 0);
        assert!(!s.holds(3));
        s.turn_on();
        assert_eq!(s.next(3, b"a"), 0);
        assert_eq!(s.next(3, b"a"), 1);
        assert_eq!(s.next(3, b"b"), 0);
        assert_eq!(s.next(4, b"a"), 0);
        let moved = s.export(3);
        assert_eq!(moved, vec![(b"a".to_vec(), 2), (b"b".to_vec(), 1)]);
        assert!(!s.holds(3));
        let mut other = OutputSeqs::off();
        other.import(3, moved);
        assert_eq!(other.next(3, b"a"), 2);
    }
}

#[cfg(test)]
mod runtime_tests {
    use crate::Emitter;
    use crate::key::key_group_of;

    /// Counts of WC's `count` for `word`, run through an instance that tracks `seq` and
    /// hands the word's key group to a second instance half way.
    #[test]
    fn seq_moves_with_its_key_group() {
        let app = crate::apps::builtin("wc").unwrap();
        let (mut a, mut b) = (app.instantiate(1), app.instantiate(1));
        a.track_output_seq();
        let kg = key_group_of(b"word");
        let mut e = Emitter::new();
        let mut seqs = Vec::new();
        for i in 0..6 {
            let inst = if i < 3 { &mut a } else { &mut b };
            if i == 3 {
                let bytes = a.export_group(kg);
                b.import_group(kg, &bytes).unwrap();
                continue;
            }
            inst.process(crate::key::key_hash(b"word"), b"word", b"", &mut e)
                .unwrap();
            seqs.push(e.seq(e.len() - 1));
        }
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        let mut line = Vec::new();
        b.write_output_line(b"word", &5u64.to_le_bytes(), 4, &mut line);
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"operator\":\"count\",\"key\":\"word\",\"value\":\"5\",\"seq\":4}\n"
        );
    }
}
