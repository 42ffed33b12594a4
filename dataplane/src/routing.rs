//! The routing table: (operator, key group) → (worker, executor), with an epoch.
//!
//! A worker's share of an operator is realised as a set of key groups; routing a request reads
//! its header only (operator and key group) and one table entry. The table is plain data:
//! the planner computes it, every executor holds a copy, and a migration replaces it under a
//! new epoch.

use clasp_operators::key::KEY_GROUPS;

/// Where a key group of an operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// Worker id.
    pub worker: u32,
    /// Executor index on that worker.
    pub executor: u16,
}

/// How a table spreads key groups (a setting of `clasp local` and of tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Every operator's key groups split into equal contiguous ranges over all executors of all
    /// workers: the same key group of every operator lands on the same executor, so operators
    /// keyed by the same key stay together.
    Even,
    /// Operator `o` wholly on executor `o % executors` of the worker `o / executors % workers`:
    /// a pipeline that goes back and forth between executors (for tests of crossed placements
    /// and for measuring a ring hop on every chained request).
    Alternate,
}

/// The routing table of one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingTable {
    /// Epoch this table belongs to.
    pub epoch: u32,
    operators: usize,
    /// `owners[op * KEY_GROUPS + kg]`.
    owners: Vec<Owner>,
}

impl RoutingTable {
    /// A table for `operators` operators over `workers` × `executors` executors.
    pub fn spread(operators: usize, workers: &[u32], executors: u16, spread: Spread) -> Self {
        assert!(
            !workers.is_empty() && executors > 0,
            "a table needs an executor"
        );
        let slots = workers.len() * executors as usize;
        let kgs = KEY_GROUPS as usize;
        let mut owners = Vec::with_capacity(operators * kgs);
        for op in 0..operators {
            for kg in 0..kgs {
                let slot = match spread {
                    Spread::Even => kg * slots / kgs,
                    Spread::Alternate => {
                        (op % executors as usize)
                            + (op / executors as usize % workers.len()) * executors as usize
                    }
                };
                owners.push(Owner {
                    worker: workers[slot / executors as usize],
                    executor: (slot % executors as usize) as u16,
                });
            }
        }
        RoutingTable {
            epoch: 0,
            operators,
            owners,
        }
    }

    /// Number of operators.
    pub fn operators(&self) -> usize {
        self.operators
    }

    /// The owner of `key_group` of `operator`. Both must be in range (the caller validated the
    /// request header).
    #[inline]
    pub fn owner(&self, operator: u16, key_group: u16) -> Owner {
        self.owners[operator as usize * KEY_GROUPS as usize + key_group as usize]
    }

    /// Changes one entry.
    pub fn set(&mut self, operator: u16, key_group: u16, owner: Owner) {
        self.owners[operator as usize * KEY_GROUPS as usize + key_group as usize] = owner;
    }

    /// The key groups of `operator` owned by `owner`.
    pub fn groups_of(&self, operator: u16, owner: Owner) -> impl Iterator<Item = u16> + '_ {
        (0..KEY_GROUPS).filter(move |&kg| self.owner(operator, kg) == owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_spread_splits_key_groups_in_equal_ranges_and_keeps_operators_together() {
        let t = RoutingTable::spread(3, &[0], 4, Spread::Even);
        for e in 0..4 {
            let owner = Owner {
                worker: 0,
                executor: e,
            };
            assert_eq!(t.groups_of(0, owner).count(), 256);
        }
        for kg in 0..KEY_GROUPS {
            assert_eq!(t.owner(0, kg), t.owner(2, kg));
        }
    }

    #[test]
    fn alternate_places_consecutive_operators_on_different_executors() {
        let t = RoutingTable::spread(4, &[0], 2, Spread::Alternate);
        assert_eq!(t.owner(0, 5).executor, 0);
        assert_eq!(t.owner(1, 5).executor, 1);
        assert_eq!(t.owner(2, 900).executor, 0);
    }
}
