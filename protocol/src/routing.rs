//! The routing table: (operator, key group) → the slot that owns it, with the table's epoch.
//!
//! One table serves everyone: the planner computes it (from shares, [`crate::split`]), the
//! protocol diffs two of them into a plan, the data plane routes every request by it (a flat
//! `operator × key groups` array: one multiply and one load per request), and the
//! simulations use it as is. A data plane that names owners by (worker, executor) maps slots to
//! them; it does not keep a second kind of table.

use std::collections::BTreeSet;

use crate::ids::{Epoch, KeyGroup, Slot};

/// Why a table could not be built from rows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    /// Rows of different lengths: every operator has the same number of key groups.
    #[error("operator {operator} has {got} key groups, operator 0 has {expected}")]
    Ragged {
        /// The first operator whose row differs.
        operator: usize,
        /// Its key groups.
        got: usize,
        /// Operator 0's key groups.
        expected: usize,
    },
    /// More key groups per operator than a [`KeyGroup`] numbers.
    #[error("{0} key groups per operator; at most 65536")]
    TooManyKeyGroups(usize),
}

/// The routing table of one epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RoutingTable {
    epoch: Epoch,
    operators: usize,
    key_groups: usize,
    /// `owners[operator * key_groups + key_group]`.
    owners: Vec<Slot>,
}

impl RoutingTable {
    /// A table at `epoch` from one row of owners per operator (`rows[o][g]` owns key group g
    /// of operator o).
    pub fn from_rows(epoch: Epoch, rows: Vec<Vec<Slot>>) -> Result<Self, RoutingError> {
        let key_groups = rows.first().map_or(0, Vec::len);
        if key_groups > usize::from(u16::MAX) + 1 {
            return Err(RoutingError::TooManyKeyGroups(key_groups));
        }
        if let Some((operator, row)) = rows.iter().enumerate().find(|(_, r)| r.len() != key_groups)
        {
            return Err(RoutingError::Ragged {
                operator,
                got: row.len(),
                expected: key_groups,
            });
        }
        Ok(RoutingTable {
            epoch,
            operators: rows.len(),
            key_groups,
            owners: rows.into_iter().flatten().collect(),
        })
    }

    /// A table at `epoch` where key group g of operator o is owned by `owner(o, g)`.
    ///
    /// # Panics
    /// If `key_groups` exceeds 65 536.
    pub fn from_fn(
        epoch: Epoch,
        operators: usize,
        key_groups: usize,
        mut owner: impl FnMut(usize, KeyGroup) -> Slot,
    ) -> Self {
        let mut owners = Vec::with_capacity(operators * key_groups);
        for o in 0..operators {
            owners.extend((0..key_groups).map(|g| owner(o, KeyGroup::at(g))));
        }
        RoutingTable {
            epoch,
            operators,
            key_groups,
            owners,
        }
    }

    /// The table's epoch.
    #[inline]
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The same owners under another epoch.
    #[must_use]
    pub fn with_epoch(mut self, epoch: Epoch) -> Self {
        self.epoch = epoch;
        self
    }

    /// Number of operators.
    #[inline]
    pub fn operators(&self) -> usize {
        self.operators
    }

    /// Key groups per operator.
    #[inline]
    pub fn key_groups(&self) -> usize {
        self.key_groups
    }

    /// The owner of `key_group` of `operator`.
    ///
    /// # Panics
    /// If either is out of range; callers route validated requests (see [`Self::get`]).
    #[inline]
    pub fn owner(&self, operator: usize, key_group: KeyGroup) -> Slot {
        assert!(
            key_group.index() < self.key_groups,
            "key group out of range"
        );
        self.owners[operator * self.key_groups + key_group.index()]
    }

    /// The owner of `key_group` of `operator`, if both are in range.
    #[inline]
    pub fn get(&self, operator: usize, key_group: KeyGroup) -> Option<Slot> {
        if operator < self.operators && key_group.index() < self.key_groups {
            Some(self.owners[operator * self.key_groups + key_group.index()])
        } else {
            None
        }
    }

    /// Changes one owner.
    ///
    /// # Panics
    /// If the operator or the key group is out of range.
    pub fn set(&mut self, operator: usize, key_group: KeyGroup, owner: Slot) {
        assert!(
            key_group.index() < self.key_groups,
            "key group out of range"
        );
        self.owners[operator * self.key_groups + key_group.index()] = owner;
    }

    /// Operator `operator`'s owners, by key group.
    #[inline]
    pub fn row(&self, operator: usize) -> &[Slot] {
        let start = operator * self.key_groups;
        &self.owners[start..start + self.key_groups]
    }

    /// Every operator's row, in operator order.
    pub fn rows(&self) -> impl ExactSizeIterator<Item = &[Slot]> + '_ {
        (0..self.operators).map(|o| self.row(o))
    }

    /// Every owner, `[operator * key_groups + key_group]`: the table's flat form (what the
    /// data plane's executors index and what its shared-memory layout stores).
    #[inline]
    pub fn owners(&self) -> &[Slot] {
        &self.owners
    }

    /// The key groups of `operator` owned by `slot`.
    pub fn groups_of(&self, operator: usize, slot: Slot) -> impl Iterator<Item = KeyGroup> + '_ {
        self.row(operator)
            .iter()
            .enumerate()
            .filter(move |(_, s)| **s == slot)
            .map(|(g, _)| KeyGroup::at(g))
    }

    /// The slots owning some key group of `operator`.
    pub fn hosts(&self, operator: usize) -> BTreeSet<Slot> {
        self.row(operator).iter().copied().collect()
    }

    /// One more than the largest slot named (0 for an empty table).
    pub fn slots_named(&self) -> usize {
        self.owners.iter().map(|s| s.index() + 1).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_ragged_rows_are_refused() {
        let rows = vec![vec![Slot(0), Slot(1)], vec![Slot(2), Slot(2)]];
        let t = RoutingTable::from_rows(Epoch(3), rows.clone()).unwrap();
        assert_eq!((t.operators(), t.key_groups(), t.epoch()), (2, 2, Epoch(3)));
        assert_eq!(t.owner(1, KeyGroup(0)), Slot(2));
        assert_eq!(t.rows().map(<[Slot]>::to_vec).collect::<Vec<_>>(), rows);
        assert_eq!(t.get(2, KeyGroup(0)), None);
        assert_eq!(t.get(0, KeyGroup(2)), None);
        assert_eq!(t.slots_named(), 3);
        assert_eq!(
            t.groups_of(0, Slot(1)).collect::<Vec<_>>(),
            vec![KeyGroup(1)]
        );
        let ragged = vec![vec![Slot(0), Slot(1)], vec![Slot(2)]];
        assert!(matches!(
            RoutingTable::from_rows(Epoch(0), ragged),
            Err(RoutingError::Ragged { operator: 1, .. })
        ));
    }
}
