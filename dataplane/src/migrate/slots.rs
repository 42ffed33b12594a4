//! Executor slots: the protocol's participants. Executor `e` of the worker at index `i` of the
//! job's worker list is slot `i × executors + e`; a slot routing maps `(operator, key group)`
//! to a slot.

use crate::request::INGRESS_SLOT;
use crate::routing::RoutingTable;
use clasp_controlplane::migration::Routing;
use clasp_operators::key::KEY_GROUPS;

/// Why a cluster's slots or a slot routing cannot be used.
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
    /// A routing table names a worker the job does not have.
    #[error("worker {0} is not in the job")]
    UnknownWorker(u32),
    /// A routing for another number of operators.
    #[error("routing for {routed} operators, the app has {operators}")]
    Operators {
        /// Operators routed.
        routed: usize,
        /// Operators of the app.
        operators: usize,
    },
    /// A row short of, or beyond, every key group.
    #[error("operator {operator}: {key_groups} key groups, not {KEY_GROUPS}")]
    KeyGroups {
        /// The operator.
        operator: usize,
        /// Key groups in its row.
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
}

/// Callers that still report faults as text.
impl From<SlotError> for String {
    fn from(e: SlotError) -> String {
        e.to_string()
    }
}

/// Executor slots of a job.
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
    pub fn worker_index(&self, slot: usize) -> usize {
        slot / self.executors
    }

    /// Worker id hosting `slot`.
    #[inline]
    pub fn worker_of(&self, slot: usize) -> Option<u32> {
        self.workers.get(slot / self.executors).copied()
    }

    /// The slot of executor `e` of the worker at index `index`.
    #[inline]
    pub fn slot(&self, index: usize, e: usize) -> usize {
        index * self.executors + e
    }

    /// The slot routing of a [`RoutingTable`] whose workers are `self.workers`.
    pub fn routing_of(&self, table: &RoutingTable) -> Result<Routing, SlotError> {
        (0..table.operators())
            .map(|op| {
                (0..KEY_GROUPS)
                    .map(|kg| {
                        let o = table.owner(op as u16, kg);
                        let i = self
                            .workers
                            .iter()
                            .position(|&w| w == o.worker)
                            .ok_or(SlotError::UnknownWorker(o.worker))?;
                        Ok(self.slot(i, o.executor as usize))
                    })
                    .collect()
            })
            .collect()
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
    pub fn check(&self, routing: &Routing, operators: usize) -> Result<(), SlotError> {
        self.check_count()?;
        if routing.len() != operators {
            return Err(SlotError::Operators {
                routed: routing.len(),
                operators,
            });
        }
        for (operator, row) in routing.iter().enumerate() {
            if row.len() != KEY_GROUPS as usize {
                return Err(SlotError::KeyGroups {
                    operator,
                    key_groups: row.len(),
                });
            }
            if let Some(&slot) = row.iter().find(|&&s| s >= self.len()) {
                return Err(SlotError::Slot {
                    operator,
                    slot,
                    slots: self.len(),
                });
            }
        }
        Ok(())
    }
}
