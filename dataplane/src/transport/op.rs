//! The operations the event loop submits, and how a completion says which one it ends.
//!
//! io_uring returns one `u64` of user data with each completion. It names the operation and,
//! for a connection's receive or send, the connection's slot and generation: a slot is reused
//! once its connection is freed, and the generation tells a stale completion from a current
//! one. The packing lives here and nowhere else: the operation in the top 8 bits, the
//! generation in the next 24, the slot in the low 32.

/// Generations are 24 bits wide and wrap.
pub(super) const GEN_MASK: u32 = (1 << 24) - 1;

const TAG_WAKE: u64 = 1;
const TAG_ACCEPT: u64 = 2;
const TAG_RECV: u64 = 3;
const TAG_SEND: u64 = 4;
const TAG_CANCEL: u64 = 5;

/// One connection, as an operation names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ConnRef {
    /// Index into the transport's connection table.
    pub slot: usize,
    /// The connection's generation (masked to [`GEN_MASK`]).
    pub gen_: u32,
}

/// A submitted operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// The read of the waker's eventfd.
    Wake,
    /// The listener's accept.
    Accept,
    /// A connection's receive (multishot or plain).
    Recv(ConnRef),
    /// A connection's send.
    Send(ConnRef),
    /// A cancellation (of one connection's operations, or of all at drop).
    Cancel,
}

impl Op {
    /// The user data the submission carries.
    #[inline]
    pub(super) fn user_data(self) -> u64 {
        let (tag, c) = match self {
            Op::Wake => (TAG_WAKE, None),
            Op::Accept => (TAG_ACCEPT, None),
            Op::Recv(c) => (TAG_RECV, Some(c)),
            Op::Send(c) => (TAG_SEND, Some(c)),
            Op::Cancel => (TAG_CANCEL, None),
        };
        let (gen_, slot) = c.map_or((0, 0), |c| (c.gen_, c.slot));
        debug_assert!(u32::try_from(slot).is_ok(), "slot {slot} beyond 32 bits");
        (tag << 56) | (((gen_ & GEN_MASK) as u64) << 32) | (slot as u32 as u64)
    }

    /// The operation a completion's user data names; `None` for data no submission carries.
    #[inline]
    pub(super) fn from_user_data(u: u64) -> Option<Op> {
        let c = ConnRef {
            slot: (u & 0xFFFF_FFFF) as usize,
            gen_: ((u >> 32) as u32) & GEN_MASK,
        };
        match u >> 56 {
            TAG_WAKE => Some(Op::Wake),
            TAG_ACCEPT => Some(Op::Accept),
            TAG_RECV => Some(Op::Recv(c)),
            TAG_SEND => Some(Op::Send(c)),
            TAG_CANCEL => Some(Op::Cancel),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_round_trips_through_its_user_data() {
        let c = ConnRef {
            slot: 0xFFFF_FFFF,
            gen_: GEN_MASK,
        };
        for op in [Op::Wake, Op::Accept, Op::Recv(c), Op::Send(c), Op::Cancel] {
            assert_eq!(Op::from_user_data(op.user_data()), Some(op));
        }
        let small = ConnRef { slot: 3, gen_: 7 };
        assert_eq!(
            Op::from_user_data(Op::Send(small).user_data()),
            Some(Op::Send(small))
        );
    }

    #[test]
    fn generations_wrap_at_24_bits_without_touching_the_tag() {
        let c = ConnRef {
            slot: 1,
            gen_: GEN_MASK + 2,
        };
        let back = Op::from_user_data(Op::Recv(c).user_data());
        assert_eq!(back, Some(Op::Recv(ConnRef { slot: 1, gen_: 1 })));
    }

    #[test]
    fn unknown_user_data_is_not_an_operation() {
        assert_eq!(Op::from_user_data(0), None);
        assert_eq!(Op::from_user_data(6 << 56), None);
        assert_eq!(Op::from_user_data(u64::MAX), None);
    }
}
