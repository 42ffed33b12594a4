//! A job's first routing table: how key groups are laid over the executor slots before any
//! migration.
//!
//! The table itself is the protocol's [`RoutingTable`] — (operator, key group) → slot, with
//! its epoch — the one the planner, the migration protocol and the executors all use. A slot
//! names an executor of a worker ([`Slots`] maps it back: executor `e` of the worker at index
//! `i` of the job is slot `i × executors + e`), so routing a request reads its header only
//! (operator and key group) and one table entry. Every process of a job computes the same
//! first table from the job's settings; a migration replaces it under a new epoch.

use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::{Epoch, RoutingTable, Slot};

use crate::migrate::Slots;

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

/// The epoch-0 table of `operators` operators over the job's `slots`.
pub fn spread(operators: usize, slots: &Slots, spread: Spread) -> Result<RoutingTable, String> {
    if slots.is_empty() {
        return Err("a routing table needs at least one executor".into());
    }
    let (count, executors, workers) = (slots.len(), slots.executors, slots.workers.len());
    let kgs = KEY_GROUPS as usize;
    Ok(RoutingTable::from_fn(
        Epoch::INITIAL,
        operators,
        kgs,
        |op, kg| {
            Slot::at(match spread {
                Spread::Even => kg.index() * count / kgs,
                Spread::Alternate => (op % executors) + (op / executors % workers) * executors,
            })
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_protocol::KeyGroup;

    fn slots(workers: &[u32], executors: usize) -> Slots {
        Slots {
            workers: workers.to_vec(),
            executors,
        }
    }

    #[test]
    fn even_spread_splits_key_groups_in_equal_ranges_and_keeps_operators_together() {
        let t = spread(3, &slots(&[0], 4), Spread::Even).unwrap();
        for e in 0..4 {
            assert_eq!(t.groups_of(0, Slot(e)).count(), 256);
        }
        for kg in 0..KEY_GROUPS {
            assert_eq!(t.owner(0, KeyGroup(kg)), t.owner(2, KeyGroup(kg)));
        }
    }

    #[test]
    fn alternate_places_consecutive_operators_on_different_executors() {
        let t = spread(4, &slots(&[0], 2), Spread::Alternate).unwrap();
        assert_eq!(t.owner(0, KeyGroup(5)), Slot(0));
        assert_eq!(t.owner(1, KeyGroup(5)), Slot(1));
        assert_eq!(t.owner(2, KeyGroup(900)), Slot(0));
    }

    #[test]
    fn a_job_without_executors_is_an_error() {
        assert!(spread(1, &slots(&[], 2), Spread::Even).is_err());
        assert!(spread(1, &slots(&[0], 0), Spread::Even).is_err());
    }
}
