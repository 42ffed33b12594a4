//! What travels on a FIFO connection between participants: requests, end-of-epoch markers,
//! exported state and seals. Generic over the request body and the state, which the protocol
//! never looks into (the data plane's frames and archives; the simulation's counters).

use crate::ids::{Epoch, KeyGroup, Slot};

/// Who sent a message to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// The planner's ingress (roots, and its end-of-epoch marker).
    Ingress,
    /// Another participant, or this one itself for a local chained request.
    Worker(Slot),
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Ingress => f.write_str("the ingress"),
            Peer::Worker(s) => write!(f, "slot {s}"),
        }
    }
}

/// A request as the protocol sees it: where it goes, the epoch whose table routed it, and an
/// opaque body (the dataplane's frame; the simulation's `(key, sequence, path)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Req<P> {
    /// Target operator.
    pub operator: usize,
    /// Key group of the request's key for that operator.
    pub key_group: KeyGroup,
    /// Epoch of the routing table the sender routed it by (kept when forwarded).
    pub epoch: Epoch,
    /// Emitted by an execution of a key group its emitter received in `epoch`'s plan. Only
    /// such a request can overtake an older one for the same key on another connection (from
    /// the key group's old owner), so only such new-epoch requests wait at a kept key group's
    /// upstream gate (crate docs, "Upstream gate and fence"). False for roots.
    pub from_moved: bool,
    /// Everything else.
    pub body: P,
}

/// A message on a worker-to-worker (or ingress-to-worker) FIFO connection.
#[derive(Clone, Debug, PartialEq)]
pub enum Msg<P, S> {
    /// A request, routed or forwarded.
    Request(Req<P>),
    /// End of the sender's old epoch on this connection.
    Marker {
        /// The new epoch.
        epoch: Epoch,
    },
    /// State and queued requests of key groups the sender gives up.
    State {
        /// The new epoch.
        epoch: Epoch,
        /// Operator of the key groups.
        operator: usize,
        /// The key groups.
        key_groups: Vec<KeyGroup>,
        /// Their state (opaque to the protocol).
        state: S,
        /// Their queued, not yet executed requests, in queue order.
        queued: Vec<Req<P>>,
    },
    /// Nothing older for these key groups will follow on this connection.
    Seal {
        /// The new epoch.
        epoch: Epoch,
        /// Operator of the key groups.
        operator: usize,
        /// The key groups.
        key_groups: Vec<KeyGroup>,
    },
}

impl<P, S> Msg<P, S> {
    /// The epoch the message belongs to (a request's routing epoch).
    pub fn epoch(&self) -> Epoch {
        match self {
            Msg::Request(r) => r.epoch,
            Msg::Marker { epoch } | Msg::State { epoch, .. } | Msg::Seal { epoch, .. } => *epoch,
        }
    }
}
