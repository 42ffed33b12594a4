//! The protocol's vocabulary: which table ([`Epoch`]), which participant ([`Slot`]), which
//! unit of state and routing ([`KeyGroup`]).
//!
//! Why newtypes: all three are small integers that the code used to pass as `usize`/`u64`
//! side by side (`plans[to]`, `owners[o][g]`, `epoch as u16`), where swapping two of them still
//! compiles. As types they cannot be swapped, and each says what it counts.

use std::fmt;

/// A migration epoch: the number of the routing table a request was routed by. Epoch 0 is the
/// initial table; each migration moves to the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The initial table's epoch.
    pub const INITIAL: Epoch = Epoch(0);

    /// The epoch after this one.
    #[must_use]
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A protocol participant: what owns key groups and runs one worker machine. In the data plane
/// it is an executor slot — executor `e` of the worker at index `i` of the job's worker list is
/// slot `i × executors + e`; in the planner's own model (one participant per worker) it is a
/// worker index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(pub u32);

impl Slot {
    /// The slot as an index (into per-slot vectors).
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The slot at index `i`.
    ///
    /// # Panics
    /// If `i` does not fit in 32 bits (no cluster has that many slots).
    #[inline]
    pub fn at(i: usize) -> Slot {
        Slot(u32::try_from(i).expect("a slot number fits in 32 bits"))
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A key group of one operator: the unit of routing and of state. A key hashes to one of an
/// operator's key groups; a migration moves whole key groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyGroup(pub u16);

impl KeyGroup {
    /// The key group as an index (into per-key-group vectors).
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The key group at index `i`.
    ///
    /// # Panics
    /// If `i` does not fit in 16 bits (an operator has at most 65 536 key groups).
    #[inline]
    pub fn at(i: usize) -> KeyGroup {
        KeyGroup(u16::try_from(i).expect("a key group number fits in 16 bits"))
    }
}

impl fmt::Display for KeyGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
