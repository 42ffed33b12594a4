//! Framing: received bytes → checked frames → deliveries, apart from the event loop.
//!
//! Bytes arrive in receive buffers that cut frames anywhere. Whole frames are handled in place
//! in the receive buffer; only a frame split across receives is copied (into the connection's
//! `partial`), and only a batch that meets a full ring is copied again (into its held frames).
//! Each frame's header is checked before a byte of its payload is buffered (length against the
//! frame limit), then its sender, its sequence number, its kind for the connection's direction
//! and its credit; a batch is validated whole before any request of it is delivered. Any
//! failure is a [`BadFrame`], and the event loop closes that connection with it.

use super::conn::Conn;
use super::conn::recv::Tally;
use super::wire::{self, Kind, NET_HEADER_BYTES, NetHeader, WireError};
use super::{Direction, Inbound, PeerId};

/// Why a connection's input was refused (the connection is closed; others are served on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadFrame {
    /// The frame itself is malformed.
    #[error("bad frame: {0}")]
    Wire(#[from] WireError),
    /// A frame claiming another sender than the connection's peer.
    #[error("bad frame: sender {sender} on peer {peer}'s connection")]
    Sender {
        /// The claimed sender.
        sender: u32,
        /// The connection's peer.
        peer: PeerId,
    },
    /// A frame out of sequence.
    #[error("bad frame: sequence {got} where {due} was due")]
    Sequence {
        /// The frame's sequence number.
        got: u32,
        /// The one due.
        due: u32,
    },
    /// Credit returned beyond the window granted.
    #[error("bad frame: credit beyond the window")]
    CreditBeyondWindow,
    /// Data sent beyond the credit granted.
    #[error("bad frame: {excess_bytes} data bytes beyond the {window_bytes}-byte credit")]
    DataBeyondCredit {
        /// Bytes over the window.
        excess_bytes: u64,
        /// The window.
        window_bytes: u64,
    },
    /// Control sent beyond the credit granted.
    #[error("bad frame: control bytes beyond the credit")]
    ControlBeyondCredit,
    /// A frame this direction never carries (credit from a sender, a batch to one).
    #[error("bad frame: {kind:?} frame on an {direction:?} connection")]
    Misdirected {
        /// The frame's kind.
        kind: Kind,
        /// The connection's direction.
        direction: Direction,
    },
}

/// What the receive path needs besides the connection (disjoint borrows of the transport).
pub(crate) struct Cx<'a> {
    /// Longest frame accepted (`Limits::frame_bytes_max`).
    pub frame_bytes_max: usize,
    pub tally: Tally<'a>,
    /// Aligned copy of a control archive.
    pub scratch: &'a mut rkyv::util::AlignedVec<16>,
}

/// Feeds received bytes through the frame parser.
pub(crate) fn on_bytes(
    conn: &mut Conn,
    mut input: &[u8],
    cx: &mut Cx<'_>,
    inbound: &mut impl Inbound,
) -> Result<(), BadFrame> {
    while !input.is_empty() {
        if !conn.recv.partial.is_empty() || input.len() < NET_HEADER_BYTES {
            input = reassemble(conn, input, cx, inbound)?;
            continue;
        }
        let total = frame_len_checked(input, cx.frame_bytes_max)?;
        if input.len() < total {
            conn.recv.partial.reserve(total);
            conn.recv.partial.extend_from_slice(input);
            break;
        }
        on_frame(conn, &input[..total], cx, inbound)?;
        input = &input[total..];
    }
    Ok(())
}

/// Adds bytes to a frame split across receives: first its header, then (its length checked)
/// the rest; handles it once whole. Returns the input not consumed.
fn reassemble<'i>(
    conn: &mut Conn,
    mut input: &'i [u8],
    cx: &mut Cx<'_>,
    inbound: &mut impl Inbound,
) -> Result<&'i [u8], BadFrame> {
    let limit = cx.frame_bytes_max;
    let partial = &mut conn.recv.partial;
    let need = if partial.len() < NET_HEADER_BYTES {
        NET_HEADER_BYTES
    } else {
        frame_len_checked(partial, limit)?
    };
    let take = (need - partial.len()).min(input.len());
    partial.extend_from_slice(&input[..take]);
    input = &input[take..];
    if partial.len() == NET_HEADER_BYTES {
        let total = frame_len_checked(partial, limit)?;
        partial.reserve(total - NET_HEADER_BYTES);
    }
    if partial.len() >= NET_HEADER_BYTES && partial.len() == frame_len_checked(partial, limit)? {
        let frame = std::mem::take(partial);
        let r = on_frame(conn, &frame, cx, inbound);
        conn.recv.partial = frame;
        conn.recv.partial.clear();
        r?;
    }
    Ok(input)
}

/// The length of the frame whose header starts `bytes`, checked against `limit_bytes`.
fn frame_len_checked(bytes: &[u8], limit_bytes: usize) -> Result<usize, BadFrame> {
    Ok(NetHeader::decode(bytes, limit_bytes)?.frame_bytes())
}

/// One whole frame: header checks, then by kind.
fn on_frame(
    conn: &mut Conn,
    frame: &[u8],
    cx: &mut Cx<'_>,
    inbound: &mut impl Inbound,
) -> Result<(), BadFrame> {
    let h = NetHeader::decode(frame, cx.frame_bytes_max)?;
    if h.sender != conn.peer {
        return Err(BadFrame::Sender {
            sender: h.sender,
            peer: conn.peer,
        });
    }
    if h.seq != conn.recv.expect_seq {
        return Err(BadFrame::Sequence {
            got: h.seq,
            due: conn.recv.expect_seq,
        });
    }
    conn.recv.expect_seq = conn.recv.expect_seq.wrapping_add(1);
    let total = frame.len() as u64;
    cx.tally.counters.bytes_received += total;
    let payload = &frame[NET_HEADER_BYTES..];
    match (h.kind, conn.direction) {
        (Kind::Credit, Direction::Outbound) => {
            conn.credit
                .returned(h.data_credit_bytes, h.control_credit_bytes)?;
            conn.send.batch.credit_returned();
        }
        (Kind::Batch, Direction::Inbound) => {
            conn.credit.receive_data(total)?;
            let n = wire::validate_batch(payload)?;
            cx.tally.counters.batches_received += 1;
            cx.tally.counters.frames_received += n as u64;
            conn.deliver_batch(frame, &mut cx.tally, inbound);
        }
        (Kind::Control, Direction::Inbound) => {
            conn.credit.check_control(total)?;
            let (kind, body) = wire::decode_control(payload, cx.scratch)?;
            cx.tally.counters.control_received += 1;
            inbound.control(conn.peer, kind, body);
            *cx.tally.delivered += 1;
            conn.credit.control_delivered(total, cx.tally.now);
        }
        (kind, direction) => return Err(BadFrame::Misdirected { kind, direction }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Framing without a socket or a ring: bytes in, deliveries and errors out.
    use super::*;
    use crate::request::{RequestHeader, frame_len};
    use crate::transport::auth::Welcome;
    use crate::transport::conn::credit::Credit;
    use crate::transport::conn::recv::RecvHalf;
    use crate::transport::conn::send::SendHalf;
    use crate::transport::conn::{Conn, ConnState};
    use crate::transport::{Delivered, Limits, PeerCounters};
    use std::os::fd::OwnedFd;
    use std::time::Instant;

    const PEER: PeerId = 5;

    /// Accepts every request, or reports `Full` for the first `full` offers.
    #[derive(Default)]
    struct Sink {
        ids: Vec<u64>,
        controls: Vec<(u16, Vec<u8>)>,
        full: usize,
    }

    impl Inbound for Sink {
        fn deliver(&mut self, _: PeerId, frame: &[u8]) -> Delivered {
            if self.full > 0 {
                self.full -= 1;
                return Delivered::Full;
            }
            self.ids
                .push(RequestHeader::peek(frame).unwrap().request_id);
            Delivered::Accepted
        }
        fn control(&mut self, _: PeerId, kind: u16, body: &[u8]) {
            self.controls.push((kind, body.to_vec()));
        }
    }

    fn inbound_conn() -> Conn {
        let none = Welcome {
            data_credit_bytes: 0,
            control_credit_bytes: 0,
            frame_bytes_max: 0,
        };
        let now = Instant::now();
        Conn {
            fd: OwnedFd::from(std::fs::File::open("/dev/null").unwrap()),
            gen_: 1,
            peer: PEER,
            direction: Direction::Inbound,
            state: ConnState::Open,
            ops: 0,
            send: SendHalf::new(0, 0, 0, now),
            recv: RecvHalf::new(0),
            credit: Credit::new(Direction::Inbound, &none, &Limits::default()),
        }
    }

    fn batch(first_id: u64, n: u64, seq: u32) -> Vec<u8> {
        let mut out = vec![0u8; NET_HEADER_BYTES];
        for id in first_id..first_id + n {
            let mut f = vec![0; frame_len(8, 3)];
            RequestHeader {
                request_id: id,
                ..Default::default()
            }
            .write(&id.to_le_bytes(), b"abc", &mut f);
            wire::push_entry(&mut out, &f);
        }
        let payload_bytes = (out.len() - NET_HEADER_BYTES) as u32;
        NetHeader {
            kind: Kind::Batch,
            payload_bytes,
            sender: PEER,
            seq,
            data_credit_bytes: 0,
            control_credit_bytes: 0,
        }
        .write(&mut out);
        out
    }

    fn stream() -> Vec<u8> {
        let mut s = batch(0, 3, 0);
        let mut control = Vec::new();
        wire::encode_control(PEER, 7, b"hello", &mut control).unwrap();
        wire::stamp_seq(&mut control, 1);
        s.extend_from_slice(&control);
        s.extend_from_slice(&batch(3, 4, 2));
        s
    }

    /// Feeds `bytes` in pieces of `piece` bytes.
    fn feed(conn: &mut Conn, sink: &mut Sink, bytes: &[u8], piece: usize) -> Result<(), BadFrame> {
        let mut counters = PeerCounters::default();
        let mut delivered = 0;
        let mut scratch = rkyv::util::AlignedVec::new();
        let mut cx = Cx {
            frame_bytes_max: wire::FRAME_BYTES_MAX,
            tally: Tally {
                counters: &mut counters,
                delivered: &mut delivered,
                now: Instant::now(),
            },
            scratch: &mut scratch,
        };
        for chunk in bytes.chunks(piece) {
            on_bytes(conn, chunk, &mut cx, sink)?;
        }
        Ok(())
    }

    #[test]
    fn frames_cut_anywhere_deliver_the_same_requests_in_order() {
        let bytes = stream();
        for piece in [1, 7, 31, 32, 33, 100, bytes.len()] {
            let (mut conn, mut sink) = (inbound_conn(), Sink::default());
            feed(&mut conn, &mut sink, &bytes, piece).unwrap();
            assert_eq!(sink.ids, (0..7).collect::<Vec<_>>(), "piece {piece}");
            assert_eq!(sink.controls, vec![(7, b"hello".to_vec())]);
            assert!(conn.recv.partial.is_empty() && conn.recv.held.is_empty());
        }
    }

    #[test]
    fn a_full_ring_holds_the_batch_and_what_follows_until_retried() {
        let (mut conn, mut sink) = (inbound_conn(), Sink::default());
        sink.full = 2;
        feed(&mut conn, &mut sink, &stream(), 64).unwrap();
        // The control message passed the held data.
        assert_eq!(sink.controls.len(), 1);
        assert!(sink.ids.is_empty() && !conn.recv.held.is_empty());
        let (mut counters, mut delivered) = (PeerCounters::default(), 0);
        let mut tally = Tally {
            counters: &mut counters,
            delivered: &mut delivered,
            now: Instant::now(),
        };
        conn.deliver_held(&mut tally, &mut sink);
        assert!(sink.ids.is_empty(), "still full once");
        conn.deliver_held(&mut tally, &mut sink);
        assert_eq!(sink.ids, (0..7).collect::<Vec<_>>());
        assert!(conn.recv.held.is_empty());
    }

    /// What a case expects of its error.
    type Expect = fn(&BadFrame) -> bool;

    #[test]
    fn each_violation_is_a_typed_reason() {
        let mut wrong_seq = batch(0, 1, 0);
        wrong_seq.extend_from_slice(&batch(1, 1, 5));
        let mut wrong_sender = batch(0, 1, 0);
        wrong_sender[12] = 9;
        let mut credit = vec![0u8; NET_HEADER_BYTES];
        wire::write_credit(&mut credit, PEER, 0, 16, 0);
        let cases: [(Vec<u8>, Expect); 3] = [
            (wrong_seq, |e| {
                matches!(e, BadFrame::Sequence { got: 5, due: 1 })
            }),
            (wrong_sender, |e| {
                matches!(
                    e,
                    BadFrame::Sender {
                        sender: 9,
                        peer: PEER
                    }
                )
            }),
            (credit, |e| {
                matches!(
                    e,
                    BadFrame::Misdirected {
                        kind: Kind::Credit,
                        ..
                    }
                )
            }),
        ];
        for (bytes, expect) in cases {
            let (mut conn, mut sink) = (inbound_conn(), Sink::default());
            let e = feed(&mut conn, &mut sink, &bytes, 13).unwrap_err();
            assert!(expect(&e), "{e}");
            assert!(e.to_string().starts_with("bad frame: "), "{e}");
        }
    }
}
