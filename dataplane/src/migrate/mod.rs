//! The wire side of live migration: executor slots, the protocol's control frames, and the
//! encodings of plans and reports.
//!
//! Why here: the protocol itself is the sans-I/O machine of
//! [`clasp_protocol`]; the data plane only has to carry its messages. Markers,
//! seals and state travel as *control frames* ([`FLAG_CONTROL`]) on the very rings and
//! connections that carry requests, because the protocol's correctness rests on their order
//! relative to those requests (a marker is "nothing older follows on this connection").
//! Plans and completion reports travel on the driver's control channel, which has no such
//! order requirement.
//!
//! The protocol's participants are executor *slots* ([`crate::routing::Slots`]): executor `e`
//! of the worker at index `i` of the job's worker list is slot `i × executors + e`. A routing
//! table maps `(operator, key group)` to a slot.

mod codec;
mod state;

pub use codec::{
    decode_plans, decode_progress, decode_report, encode_plans, encode_progress, encode_report,
};
pub use state::{Reassembly, StateMsg, state_parts};

use crate::cluster::{Reader, Writer};
use crate::request::{FLAG_CONTROL, INGRESS_SLOT, REQUEST_HEADER_BYTES, RequestHeader, frame_len};
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::ids::{Epoch, KeyGroup, Slot};
use clasp_protocol::message::Peer;

/// Control-frame kinds (the `operator` field of a control frame's header).
pub mod frame_kind {
    /// End of the sender's old epoch on this connection. Body: empty.
    pub const MARKER: u16 = 1;
    /// A seal. Body: operator `u16`, key groups.
    pub const SEAL: u16 = 2;
    /// A part of a state message. Body: total length `u32`, offset `u32`, bytes.
    pub const STATE_PART: u16 = 3;
}

/// Bytes of a state part's own header (total length, offset).
const PART_HEADER_BYTES: usize = 8;
/// Most bytes of state per control frame (also bounded by the ring's largest frame).
pub const STATE_PART_BYTES_MAX: usize = 16 << 10;
/// Largest state message a receiver reassembles (a bound before allocating).
pub const STATE_MESSAGE_BYTES_MAX: usize = 1 << 30;

/// The protocol peer a frame's `source` names.
#[inline]
pub fn peer_of(source: u16) -> Peer {
    if source == INGRESS_SLOT {
        Peer::Ingress
    } else {
        Peer::Worker(Slot(u32::from(source)))
    }
}

/// Writes one control frame into `out` (resized to fit).
pub fn control_frame(
    kind: u16,
    epoch: Epoch,
    source: u16,
    dest: u16,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    let header = RequestHeader {
        operator: kind,
        flags: FLAG_CONTROL,
        epoch: epoch.0 as u16,
        dest,
        source,
        ..RequestHeader::default()
    };
    out.clear();
    out.resize(frame_len(0, body.len()), 0);
    header.write(&[], body, out);
}

/// The body of a control frame (after the header; control frames carry no key).
#[inline]
pub fn control_body(frame: &[u8]) -> &[u8] {
    frame.get(REQUEST_HEADER_BYTES..).unwrap_or(&[])
}

fn write_groups(w: &mut Writer, groups: &[KeyGroup]) {
    w.u32(groups.len() as u32);
    for g in groups {
        w.u16(g.0);
    }
}

fn read_groups(r: &mut Reader) -> Result<Vec<KeyGroup>, String> {
    let n = r.len()?;
    (0..n)
        .map(|_| {
            let g = r.u16()?;
            if g >= KEY_GROUPS {
                return Err(format!("key group {g} out of range"));
            }
            Ok(KeyGroup(g))
        })
        .collect()
}

/// A seal's body.
pub fn seal_body(operator: usize, key_groups: &[KeyGroup]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u16(operator as u16);
    write_groups(&mut w, key_groups);
    w.0
}

/// Reads a seal's body.
pub fn read_seal(b: &[u8]) -> Result<(usize, Vec<KeyGroup>), String> {
    let mut r = Reader::new(b);
    Ok((r.u16()? as usize, read_groups(&mut r)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_protocol::assignment::Assignment;
    use clasp_protocol::assignment::assignments;
    use clasp_protocol::plan::plan;
    use clasp_protocol::routing::RoutingTable;
    use clasp_protocol::worker::{Waiting, WorkerReport};
    use std::sync::Arc;

    fn routing(epoch: u64, ops: usize, f: impl Fn(usize, usize) -> u32) -> RoutingTable {
        RoutingTable::from_fn(Epoch(epoch), ops, KEY_GROUPS as usize, |o, g| {
            Slot(f(o, g.index()))
        })
    }

    #[test]
    fn plans_round_trip() {
        let old = routing(0, 3, |_, g| (g % 2) as u32);
        let new = Arc::new(routing(1, 3, |o, g| {
            (if o == 0 { g * 4 / 1024 } else { (g + o) % 4 }) as u32
        }));
        let preds = vec![vec![], vec![0], vec![1]];
        let p = plan(&old, &new, &preds);
        let parts = assignments(&p, &old, &new, &preds, 4);
        let refs: Vec<(Slot, &Assignment)> = parts
            .iter()
            .enumerate()
            .map(|(s, a)| (Slot::at(s), a))
            .collect();
        let b = encode_plans(&new, &refs);
        let back = decode_plans(&b).unwrap();
        assert_eq!(back.len(), 4);
        for (slot, a) in back {
            assert_eq!(a, parts[slot.index()]);
        }
        for bytes in [&[][..], &b[..b.len() / 2], &[0xFF; 64][..]] {
            assert!(decode_plans(bytes).is_err());
        }
    }

    #[test]
    fn state_messages_split_and_reassemble() {
        let m = StateMsg {
            operator: 2,
            groups: vec![(5, vec![1; 40_000]), (6, vec![])],
            queued: vec![vec![9; 100], vec![8; 3]],
        };
        let bytes = m.encode();
        let parts = state_parts(&bytes, 4096);
        assert!(parts.len() > 9);
        let mut r = Reassembly::default();
        let mut whole = None;
        for p in &parts {
            assert!(whole.is_none());
            whole = r.add(p).unwrap();
        }
        assert_eq!(StateMsg::decode(&whole.unwrap()).unwrap(), m);
        assert!(r.is_empty());
        // Out of order or truncated parts are errors, not panics.
        let mut r = Reassembly::default();
        assert!(r.add(&parts[1]).is_err());
        // After an error the next message is received whole.
        assert!(r.add(&parts[0]).unwrap().is_none());
        assert!(!r.is_empty());
        assert!(Reassembly::default().add(&[1, 2]).is_err());
        assert!(StateMsg::decode(&bytes[..bytes.len() - 1]).is_err());
        // An empty message is one part.
        let empty = StateMsg::default().encode();
        let parts = state_parts(&empty, 4096);
        assert_eq!(parts.len(), 1);
        assert!(Reassembly::default().add(&parts[0]).unwrap().is_some());
    }

    #[test]
    fn reports_and_progress_round_trip() {
        let r = WorkerReport {
            worker: Slot(3),
            epoch: Epoch(9),
            pause_ns: 1,
            received_queued: 2,
            forwarded: 3,
            held: 4,
            gated: 5,
            early: 6,
        };
        assert_eq!(decode_report(&encode_report(&r)).unwrap(), r);
        let w = Waiting {
            draining: true,
            markers_from: vec![Peer::Ingress, Peer::Worker(Slot(4))],
            state_or_seal_from: vec![Slot(1), Slot(2)],
        };
        assert_eq!(
            decode_progress(&encode_progress(Slot(7), Epoch(9), &w)).unwrap(),
            (Slot(7), Epoch(9), w)
        );
    }
}
