//! The data plane's side of live migration: executor slots, and the control frames that carry
//! the protocol's in-line messages.
//!
//! Why here: the protocol itself is the sans-I/O machine of
//! [`clasp_protocol`]; the data plane only has to carry its messages. Markers,
//! seals and state travel as *control frames* ([`FLAG_CONTROL`]) on the very rings and
//! connections that carry requests, because the protocol's correctness rests on their order
//! relative to those requests (a marker is "nothing older follows on this connection"); the
//! frame's body is a [`Message`]. Plans and completion reports travel on the driver's control
//! channel, which has no such order requirement.
//!
//! The protocol's participants are executor *slots* ([`crate::routing::Slots`]): executor `e`
//! of the worker at index `i` of the job's worker list is slot `i × executors + e`. A routing
//! table maps `(operator, key group)` to a slot.

mod state;

pub use state::{Reassembly, state_parts};

use crate::message::{Message, MessageError, encode_into};
use crate::request::{FLAG_CONTROL, REQUEST_HEADER_BYTES, RequestHeader};
use clasp_protocol::message::Peer;
use clasp_protocol::{Epoch, Slot};

/// Most bytes of one control frame carrying a state part (also bounded by the ring's largest
/// frame).
pub const STATE_PART_BYTES_MAX: usize = 16 << 10;
/// Largest state message a receiver reassembles (a bound before allocating).
pub const STATE_MESSAGE_BYTES_MAX: usize = 1 << 30;

/// The protocol peer a frame's `source` names.
#[inline]
pub fn peer_of(source: u16) -> Peer {
    if source == crate::request::INGRESS_SLOT {
        Peer::Ingress
    } else {
        Peer::Worker(Slot(u32::from(source)))
    }
}

/// Writes one control frame carrying `msg` into `out` (cleared first).
pub fn control_frame(
    msg: &Message,
    epoch: Epoch,
    source: u16,
    dest: u16,
    out: &mut Vec<u8>,
) -> Result<(), MessageError> {
    let header = RequestHeader {
        flags: FLAG_CONTROL,
        epoch: epoch.0 as u16,
        dest,
        source,
        ..RequestHeader::default()
    };
    let mut h = [0u8; REQUEST_HEADER_BYTES];
    header.write(&[], &[], &mut h);
    out.clear();
    out.extend_from_slice(&h);
    encode_into(msg, out)
}

/// The body of a control frame (after the header; control frames carry no key).
#[inline]
pub fn control_body(frame: &[u8]) -> &[u8] {
    frame.get(REQUEST_HEADER_BYTES..).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{StateMsg, decode, encode};
    use crate::request::INGRESS_SLOT;

    #[test]
    fn state_messages_split_and_reassemble() {
        let m = Message::State(Box::new(StateMsg {
            operator: 2,
            groups: vec![(5, vec![1; 40_000]), (6, vec![])],
            queued: vec![vec![9; 100], vec![8; 3]],
        }));
        let bytes = encode(&m).unwrap();
        let parts = state_parts(&bytes, 4096);
        assert!(parts.len() > 9);
        for p in &parts {
            let mut f = Vec::new();
            control_frame(&Message::StatePart(p.clone()), Epoch(1), 0, 1, &mut f).unwrap();
            assert!(f.len() <= REQUEST_HEADER_BYTES + 4096, "{}", f.len());
        }
        let mut r = Reassembly::default();
        let mut whole = None;
        for p in &parts {
            assert!(whole.is_none());
            whole = r.add(p.clone()).unwrap();
        }
        assert_eq!(decode(&whole.unwrap()).unwrap(), m);
        assert!(r.is_empty());
        // Out of order parts are errors, not panics.
        let mut r = Reassembly::default();
        assert!(r.add(parts[1].clone()).is_err());
        // After an error the next message is received whole.
        assert!(r.add(parts[0].clone()).unwrap().is_none());
        assert!(!r.is_empty());
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        // A small message is one part.
        let small = encode(&Message::State(Box::default())).unwrap();
        let parts = state_parts(&small, 4096);
        assert_eq!(parts.len(), 1);
        assert!(
            Reassembly::default()
                .add(parts[0].clone())
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_control_frame_carries_a_message() {
        let mut f = Vec::new();
        control_frame(&Message::Marker, Epoch(3), INGRESS_SLOT, 5, &mut f).unwrap();
        let h = RequestHeader::peek(&f).unwrap();
        assert_eq!(
            (h.flags, h.epoch, h.source, h.dest),
            (FLAG_CONTROL, 3, INGRESS_SLOT, 5)
        );
        assert_eq!(decode(control_body(&f)).unwrap(), Message::Marker);
        assert!(crate::request::Request::parse(&f).is_ok());
    }
}
