//! One authenticated connection, in three parts that change for different reasons: the send
//! side ([`send`]: the batch being filled, the control queue, the send in flight), the receive
//! side ([`recv`]: reassembly of split frames, deliveries held for ring space) and credit
//! ([`credit`]: what we may send, what we owe back).
//!
//! A connection carries requests one way only ([`Direction`]): on an outbound connection we
//! send batches and control and receive credit; on an inbound one we receive batches and
//! control and send credit. Its buffers belong to the kernel while an operation on them is in
//! flight, so a closing connection lives on until its last operation completes (`ops == 0`).

pub(super) mod credit;
pub(super) mod recv;
pub(super) mod send;

use super::op::ConnRef;
use super::{Direction, PeerId};
use credit::Credit;
use recv::RecvHalf;
use send::SendHalf;
use std::os::fd::OwnedFd;

/// Whether a connection still carries traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConnState {
    /// Up: frames are sent and received.
    Open,
    /// Shut down and its operations cancelled; freed at its last completion.
    Closing,
}

/// One connection's state. Owned by the transport's connection table.
pub(super) struct Conn {
    pub fd: OwnedFd,
    /// Tells this connection's completions from those of an earlier one in the same slot.
    pub gen_: u32,
    pub peer: PeerId,
    pub direction: Direction,
    pub state: ConnState,
    /// Operations in flight (a multishot receive counts once until its final completion).
    pub ops: u32,
    pub send: SendHalf,
    pub recv: RecvHalf,
    pub credit: Credit,
}

impl Conn {
    /// Whether the connection is closing (no new operation is started on it).
    #[inline]
    pub(super) fn is_closing(&self) -> bool {
        self.state == ConnState::Closing
    }

    /// How operations on this connection name it.
    #[inline]
    pub(super) fn conn_ref(&self, slot: usize) -> ConnRef {
        ConnRef {
            slot,
            gen_: self.gen_,
        }
    }
}
