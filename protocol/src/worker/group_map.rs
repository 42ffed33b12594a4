//! (operator, key group) → value for one migration: what a worker gives up or receives; and
//! the set of key groups a worker received in the latest plan.
//!
//! Why not a B-tree map: a worker builds one of these per moving key group at every plan (two
//! operators × 1 024 key groups in a heavy WC move), and every request it sees until the move
//! completes looks itself up in both. Key groups are dense small numbers, so an index per
//! (operator, key group) into a vector of the entries present makes building an append and a
//! lookup two loads; values stay in insertion order, which is key order when the caller
//! inserts in key order (as the plan lists them).

use crate::ids::KeyGroup;

/// No entry for this (operator, key group).
const NONE: u32 = u32::MAX;

/// (operator, key group) → `T`, for `operators × key_groups` keys.
pub(super) struct GroupMap<T> {
    key_groups: usize,
    /// `operator × key_groups + key group` → position in `entries`, or [`NONE`].
    index: Vec<u32>,
    /// Values in insertion order; a removed one leaves `None` (a map lives for one move).
    entries: Vec<Option<T>>,
    len: usize,
}

impl<T> GroupMap<T> {
    /// An empty map for `operators` operators of `key_groups` key groups each.
    pub(super) fn new(operators: usize, key_groups: usize) -> Self {
        GroupMap {
            key_groups,
            index: vec![NONE; operators * key_groups],
            entries: Vec::new(),
            len: 0,
        }
    }

    /// Where `(operator, g)`'s index lives; `None` outside the map's operators and key groups.
    #[inline]
    fn slot(&self, (operator, g): (usize, KeyGroup)) -> Option<usize> {
        let g = g.index();
        let i = operator.checked_mul(self.key_groups)?.checked_add(g)?;
        (g < self.key_groups && i < self.index.len()).then_some(i)
    }

    /// The position of `key`'s entry, if present.
    #[inline]
    fn position(&self, key: (usize, KeyGroup)) -> Option<usize> {
        let at = *self.index.get(self.slot(key)?)?;
        (at != NONE).then_some(at as usize)
    }

    /// Inserts or replaces `key`'s value.
    ///
    /// # Panics
    /// If `key` lies outside the operators and key groups the map was made for.
    pub(super) fn insert(&mut self, key: (usize, KeyGroup), value: T) {
        let slot = self.slot(key).expect("a key inside the routing table");
        match self.index[slot] {
            NONE => {
                let at = u32::try_from(self.entries.len()).expect("fewer entries than u32::MAX");
                assert!(at != NONE, "fewer entries than u32::MAX");
                self.index[slot] = at;
                self.entries.push(Some(value));
                self.len += 1;
            }
            at => self.entries[at as usize] = Some(value),
        }
    }

    #[inline]
    pub(super) fn get(&self, key: (usize, KeyGroup)) -> Option<&T> {
        self.entries[self.position(key)?].as_ref()
    }

    #[inline]
    pub(super) fn get_mut(&mut self, key: (usize, KeyGroup)) -> Option<&mut T> {
        let at = self.position(key)?;
        self.entries[at].as_mut()
    }

    /// Removes `key`'s value and returns it.
    pub(super) fn remove(&mut self, key: (usize, KeyGroup)) -> Option<T> {
        let slot = self.slot(key)?;
        let at = self.position(key)?;
        self.index[slot] = NONE;
        let value = self.entries[at].take();
        debug_assert!(value.is_some(), "an indexed entry is present");
        self.len -= 1;
        value
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values present, in insertion order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().flatten()
    }

    /// The values present, in insertion order.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.entries.iter_mut().flatten()
    }
}

/// A set of (operator, key group), one bit each: the key groups a worker received in the
/// latest plan. Every execution's chained requests look their parent's key group up in it, so
/// an empty set answers without touching the bits.
#[derive(Default)]
pub(super) struct GroupSet {
    key_groups: usize,
    /// Bit `operator × key_groups + key group`.
    bits: Vec<u64>,
    len: usize,
}

impl GroupSet {
    /// An empty set for `operators` operators of `key_groups` key groups each.
    pub(super) fn new(operators: usize, key_groups: usize) -> Self {
        GroupSet {
            key_groups,
            bits: vec![0; (operators * key_groups).div_ceil(64)],
            len: 0,
        }
    }

    /// The bit of `(operator, g)`; `None` outside the set's operators and key groups.
    #[inline]
    fn bit(&self, (operator, g): (usize, KeyGroup)) -> Option<usize> {
        let g = g.index();
        let i = operator.checked_mul(self.key_groups)?.checked_add(g)?;
        (g < self.key_groups && i / 64 < self.bits.len()).then_some(i)
    }

    /// Adds `key`.
    ///
    /// # Panics
    /// If `key` lies outside the operators and key groups the set was made for.
    pub(super) fn insert(&mut self, key: (usize, KeyGroup)) {
        let i = self.bit(key).expect("a key inside the routing table");
        let (word, mask) = (&mut self.bits[i / 64], 1u64 << (i % 64));
        if *word & mask == 0 {
            *word |= mask;
            self.len += 1;
        }
    }

    /// Whether `key` is in the set (never, outside its operators and key groups).
    #[inline]
    pub(super) fn contains(&self, key: (usize, KeyGroup)) -> bool {
        self.len != 0
            && self
                .bit(key)
                .is_some_and(|i| self.bits[i / 64] & (1u64 << (i % 64)) != 0)
    }

    /// Whether any key group of `operator` is in the set.
    pub(super) fn any_of(&self, operator: usize) -> bool {
        self.len != 0 && (0..self.key_groups).any(|g| self.contains((operator, KeyGroup::at(g))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_as_a_map_over_its_keys() {
        let mut m: GroupMap<u32> = GroupMap::new(2, 4);
        let mut reference = BTreeMap::new();
        let ops: [(usize, u16, Option<u32>); 8] = [
            (0, 1, Some(10)),
            (1, 3, Some(20)),
            (0, 1, Some(11)),
            (1, 0, Some(30)),
            (0, 1, None),
            (1, 3, None),
            (0, 2, Some(40)),
            (1, 3, Some(50)),
        ];
        for (o, g, v) in ops {
            let key = (o, KeyGroup(g));
            match v {
                Some(v) => {
                    m.insert(key, v);
                    reference.insert(key, v);
                }
                None => assert_eq!(m.remove(key), reference.remove(&key)),
            }
            for o in 0..2 {
                for g in 0..4 {
                    let key = (o, KeyGroup(g));
                    assert_eq!(m.get(key), reference.get(&key), "{key:?}");
                }
            }
            assert_eq!(m.is_empty(), reference.is_empty());
            assert_eq!(m.values().count(), reference.len());
        }
        // Outside the table: absent, never a panic on lookup or removal.
        assert_eq!(m.get((2, KeyGroup(0))), None);
        assert_eq!(m.get((0, KeyGroup(4))), None);
        assert_eq!(m.remove((5, KeyGroup(9))), None);
        assert_eq!(m.get((usize::MAX, KeyGroup(1))), None);
        for v in m.values_mut() {
            *v += 1;
        }
        assert_eq!(m.get((1, KeyGroup(0))), Some(&31));
    }

    #[test]
    fn a_group_set_holds_what_was_inserted_and_nothing_else() {
        let mut s = GroupSet::new(3, 100);
        assert!(!GroupSet::default().contains((0, KeyGroup(0))));
        let inside = [(0, 0), (0, 63), (1, 0), (1, 64), (2, 99)];
        for (o, g) in inside {
            s.insert((o, KeyGroup(g)));
            s.insert((o, KeyGroup(g)));
        }
        assert_eq!(s.len, inside.len());
        for o in 0..3 {
            for g in 0..100 {
                assert_eq!(
                    s.contains((o, KeyGroup(g))),
                    inside.contains(&(o, g)),
                    "{o} {g}"
                );
            }
        }
        assert!(!s.contains((3, KeyGroup(0))));
        assert!(!s.contains((0, KeyGroup(100))));
        assert!(!s.contains((usize::MAX, KeyGroup(1))));
        assert!(s.any_of(0) && s.any_of(2) && !s.any_of(3));
        assert!(!GroupSet::new(3, 100).any_of(0));
    }
}
