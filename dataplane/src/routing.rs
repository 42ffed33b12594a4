//! Routing in the data plane: the job's executor slots, its first routing table, and the
//! executors' compact form of a table.
//!
//! The table itself is the protocol's [`RoutingTable`] — (operator, key group) → slot, with
//! its epoch — the one the planner, the migration protocol and the executors all use. A slot
//! names an executor of a worker; [`Slots`] maps it back (executor `e` of the worker at index
//! `i` of the job is slot `i × executors + e`), so routing a request reads its header only
//! (operator and key group) and one table entry. Every process of a job computes the same
//! first table from the job's settings ([`spread`]); a migration replaces it under a new epoch.

use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::split::even_slot;
use clasp_protocol::{Epoch, RoutingTable, Slot};

use crate::request::INGRESS_SLOT;

/// Executor slots of a job: slot ↔ (worker, executor).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    /// Worker ids in job order.
    pub workers: Vec<u32>,
    /// Executors per worker.
    pub executors: usize,
}

impl Slots {
    /// Slots in the cluster.
    pub fn len(&self) -> usize {
        self.workers.len() * self.executors
    }

    /// True when there are no slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Index in the job's worker list of the worker hosting `slot`.
    #[inline]
    pub fn worker_index(&self, slot: Slot) -> usize {
        slot.index() / self.executors
    }

    /// Worker id hosting `slot`.
    #[inline]
    pub fn worker_of(&self, slot: Slot) -> Option<u32> {
        self.workers.get(slot.index() / self.executors).copied()
    }

    /// The slot of executor `e` of the worker at index `index`.
    #[inline]
    pub fn slot(&self, index: usize, e: usize) -> Slot {
        Slot::at(index * self.executors + e)
    }

    /// Checks that every slot has a 16-bit number other than [`INGRESS_SLOT`].
    pub fn check_count(&self) -> Result<(), SlotError> {
        if self.is_empty() || self.len() >= INGRESS_SLOT as usize {
            return Err(SlotError::Count {
                workers: self.workers.len(),
                executors: self.executors,
                slots: self.len(),
            });
        }
        Ok(())
    }

    /// Checks a slot routing: every operator has every key group, every owner is a slot.
    pub fn check(&self, routing: &RoutingTable, operators: usize) -> Result<(), SlotError> {
        self.check_count()?;
        if routing.operators() != operators {
            return Err(SlotError::Operators {
                routed: routing.operators(),
                operators,
            });
        }
        if operators > 0 && routing.key_groups() != KEY_GROUPS as usize {
            return Err(SlotError::KeyGroups {
                key_groups: routing.key_groups(),
            });
        }
        for (operator, row) in routing.rows().enumerate() {
            if let Some(s) = row.iter().find(|s| s.index() >= self.len()) {
                return Err(SlotError::Slot {
                    operator,
                    slot: s.index(),
                    slots: self.len(),
                });
            }
        }
        Ok(())
    }
}

/// Why a job's slots or a slot routing cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    /// No slots, or more than 16-bit slot numbers can name.
    #[error(
        "{workers} workers × {executors} executors = {slots} executor slots; frames number \
         slots in 16 bits, so at most {max}",
        max = INGRESS_SLOT - 1
    )]
    Count {
        /// Workers.
        workers: usize,
        /// Executors per worker.
        executors: usize,
        /// Their product.
        slots: usize,
    },
    /// A routing for another number of operators.
    #[error("routing for {routed} operators, the app has {operators}")]
    Operators {
        /// Operators routed.
        routed: usize,
        /// Operators of the app.
        operators: usize,
    },
    /// Rows short of, or beyond, every key group.
    #[error("{key_groups} key groups per operator, not {KEY_GROUPS}")]
    KeyGroups {
        /// Key groups per row.
        key_groups: usize,
    },
    /// An owner that is not a slot of the cluster.
    #[error("operator {operator}: slot {slot} of a cluster of {slots} slots")]
    Slot {
        /// The operator.
        operator: usize,
        /// The owner.
        slot: usize,
        /// Slots in the cluster.
        slots: usize,
    },
    /// A job without executors.
    #[error("a routing table needs at least one executor")]
    NoExecutors,
}

/// A slot routing's flat form, `[op * KEY_GROUPS + kg] → slot`, narrowed to the 16 bits a
/// frame numbers slots in (the executors' form: half the cache lines of the table's own;
/// [`Slots::check`] has bounded every slot), plus, per operator, the one slot that owns all of
/// its key groups when one does.
///
/// Why the second part: an executor routes every chained request, and a key's group is
/// random-looking, so the flat table's entry is a cache miss as often as not (an app of ten
/// operators has a 20 KiB table). An operator that is not split — the common placement, and
/// every operator of a worker with one executor — answers from a line that stays hot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatRouting {
    slots: Vec<u16>,
    /// Per operator: its slot when one slot owns every key group, else [`SPLIT`].
    whole: Vec<u32>,
}

/// `FlatRouting::whole` of an operator whose key groups more than one slot owns.
const SPLIT: u32 = u32::MAX;

impl FlatRouting {
    /// The slot that owns key group `kg` of operator `op` (panics if `op` is not in the table,
    /// as indexing does).
    #[inline]
    pub fn slot(&self, op: usize, kg: u16) -> u16 {
        match self.whole.get(op) {
            Some(&s) if s != SPLIT => s as u16,
            _ => self.slots[op * KEY_GROUPS as usize + kg as usize],
        }
    }
}

/// The executors' form of `routing` ([`FlatRouting`]).
pub fn flatten(routing: &RoutingTable) -> FlatRouting {
    let slots: Vec<u16> = routing.owners().iter().map(|s| s.0 as u16).collect();
    let whole = slots
        .chunks(KEY_GROUPS as usize)
        .map(|groups| {
            let first = groups[0];
            if groups.iter().all(|&s| s == first) {
                u32::from(first)
            } else {
                SPLIT
            }
        })
        .collect();
    FlatRouting { slots, whole }
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

/// The epoch-0 table of `operators` operators over the job's `slots`.
pub fn spread(operators: usize, slots: &Slots, spread: Spread) -> Result<RoutingTable, SlotError> {
    if slots.is_empty() {
        return Err(SlotError::NoExecutors);
    }
    let (count, executors, workers) = (slots.len(), slots.executors, slots.workers.len());
    let kgs = KEY_GROUPS as usize;
    Ok(RoutingTable::from_fn(
        Epoch::INITIAL,
        operators,
        kgs,
        |op, kg| {
            Slot::at(match spread {
                Spread::Even => even_slot(kg.index(), kgs, count),
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
    fn the_flat_form_answers_as_the_table_for_whole_and_split_operators() {
        // Operator 0 split over four executors, 1 wholly on executor 1 (alternate, 2 executors).
        for t in [
            spread(3, &slots(&[0], 4), Spread::Even).unwrap(),
            spread(3, &slots(&[0, 1], 2), Spread::Alternate).unwrap(),
        ] {
            let flat = flatten(&t);
            for op in 0..3 {
                for kg in 0..KEY_GROUPS {
                    assert_eq!(flat.slot(op, kg), t.owner(op, KeyGroup(kg)).0 as u16);
                }
            }
        }
        let split = flatten(&spread(2, &slots(&[0], 2), Spread::Even).unwrap());
        assert_eq!(split.whole, vec![SPLIT, SPLIT]);
        let whole = flatten(&spread(2, &slots(&[0], 2), Spread::Alternate).unwrap());
        assert_eq!(whole.whole, vec![0, 1]);
    }

    #[test]
    fn alternate_places_consecutive_operators_on_different_executors() {
        let t = spread(4, &slots(&[0], 2), Spread::Alternate).unwrap();
        assert_eq!(t.owner(0, KeyGroup(5)), Slot(0));
        assert_eq!(t.owner(1, KeyGroup(5)), Slot(1));
        assert_eq!(t.owner(2, KeyGroup(900)), Slot(0));
    }

    #[test]
    fn slots_map_tables() {
        let s = slots(&[4, 7], 2);
        let r = spread(2, &s, Spread::Even).unwrap();
        assert_eq!(r.owner(0, KeyGroup(0)), Slot(0));
        assert_eq!(r.owner(1, KeyGroup(1023)), Slot(3));
        s.check(&r, 2).unwrap();
        assert!(s.check(&r, 3).is_err());
        assert_eq!(s.worker_of(Slot(3)), Some(7));
        assert_eq!(s.slot(1, 1), Slot(3));
        assert_eq!(flatten(&r).slots.len(), 2048);
    }

    #[test]
    fn a_job_without_executors_is_an_error() {
        assert!(spread(1, &slots(&[], 2), Spread::Even).is_err());
        assert!(spread(1, &slots(&[0], 0), Spread::Even).is_err());
    }
}
