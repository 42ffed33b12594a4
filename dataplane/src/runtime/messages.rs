//! What a worker's coordinator and its executors tell each other over the `control(e)` and
//! `report(e)` rings of the worker's segment: `Command`s one way, `Report`s the other.
//!
//! These never leave the process (the segment is shared with the ingress only, which writes
//! neither ring), so they are not the message layer between processes: one tag byte, then a
//! fixed little-endian body. Each direction is encoded and decoded here and nowhere else, and
//! decoding checks every length, so a corrupt frame becomes an error, never a panic.
//!
//! A report's ledger deltas stay a borrowed run of [`DELTA_BYTES`]-byte records
//! (`DeltaBatch`): the local coordinator applies them one by one; a cluster worker forwards
//! them to the driver as they are.

use super::ledger::{DELTA_BYTES, Delta};
use std::borrow::Cow;

/// A frame on a `control` or `report` ring that is not a message of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The frame is empty.
    #[error("an empty frame")]
    Empty,
    /// The tag names no message.
    #[error("unknown message tag {0}")]
    UnknownTag(u8),
    /// The body does not have the length its tag requires.
    #[error("message tag {tag}: a body of {len} bytes")]
    BadLength {
        /// The tag.
        tag: u8,
        /// The body's length.
        len: usize,
    },
}

/// Coordinator → executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Flush `operator` (its end of stream) and report [`Report::Flushed`].
    EndOfStream {
        /// The operator, by index in the app.
        operator: u16,
    },
    /// Stop and hand back the operator instances.
    Stop,
    /// A migration plan waits in the executor's plan mailbox.
    Plan,
    /// Export every key group this executor owns (keeping them), with its counters, into its
    /// snapshot mailbox, and report [`Report::Snapshotted`] (a checkpoint's quiescent cut).
    Snapshot,
}

mod tag {
    pub const END_OF_STREAM: u8 = 1;
    pub const STOP: u8 = 2;
    pub const PLAN: u8 = 3;
    pub const SNAPSHOT: u8 = 4;
    pub const DELTAS: u8 = 11;
    pub const FLUSHED: u8 = 12;
    pub const PRODUCER_DIED: u8 = 13;
    pub const ERROR: u8 = 14;
    pub const MIGRATED: u8 = 15;
    pub const PROGRESS: u8 = 16;
    pub const SNAPSHOTTED: u8 = 17;
}

/// Bytes of an encoded [`Command`] (the longest; shorter ones are padded with zeros).
pub const COMMAND_BYTES: usize = 3;

impl Command {
    /// The wire form.
    pub fn encode(self) -> [u8; COMMAND_BYTES] {
        match self {
            Command::EndOfStream { operator } => {
                let [lo, hi] = operator.to_le_bytes();
                [tag::END_OF_STREAM, lo, hi]
            }
            Command::Stop => [tag::STOP, 0, 0],
            Command::Plan => [tag::PLAN, 0, 0],
            Command::Snapshot => [tag::SNAPSHOT, 0, 0],
        }
    }

    /// Reads one frame.
    pub fn decode(frame: &[u8]) -> Result<Command, MessageError> {
        let (&t, body) = frame.split_first().ok_or(MessageError::Empty)?;
        let bad = || MessageError::BadLength {
            tag: t,
            len: body.len(),
        };
        match t {
            tag::END_OF_STREAM => {
                let &[lo, hi] = body else { return Err(bad()) };
                Ok(Command::EndOfStream {
                    operator: u16::from_le_bytes([lo, hi]),
                })
            }
            tag::STOP | tag::PLAN | tag::SNAPSHOT if body != [0, 0] => Err(bad()),
            tag::STOP => Ok(Command::Stop),
            tag::PLAN => Ok(Command::Plan),
            tag::SNAPSHOT => Ok(Command::Snapshot),
            other => Err(MessageError::UnknownTag(other)),
        }
    }
}

/// A run of ledger deltas, as an executor wrote them (whole records only), with the time it
/// wrote them.
///
/// Why the time: a cluster worker's network thread does not forward deltas the moment they
/// are written (each send to the driver, and each wake-up of the network thread for one, cost
/// far more than the deltas). What the frame waits before it is sent is added to the deltas'
/// admission times on the way ([`crate::cluster`]'s worker side), so the driver's ledger still
/// measures each tree up to when its executor reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaBatch<'a>(&'a [u8]);

/// Bytes of a deltas frame's body before its deltas: the time it was written.
const WRITTEN_NS_BYTES: usize = 8;

impl<'a> DeltaBatch<'a> {
    /// The deltas.
    pub fn iter(&self) -> impl Iterator<Item = Delta> + 'a {
        self.0[WRITTEN_NS_BYTES..]
            .chunks_exact(DELTA_BYTES)
            .filter_map(|c| <&[u8; DELTA_BYTES]>::try_from(c).ok())
            .map(Delta::read)
    }

    /// When the executor wrote them (ns, CLOCK_MONOTONIC).
    pub fn written_ns(&self) -> u64 {
        let mut word = [0u8; WRITTEN_NS_BYTES];
        word.copy_from_slice(&self.0[..WRITTEN_NS_BYTES]);
        u64::from_le_bytes(word)
    }

    /// The body's encoding (the time, then [`DELTA_BYTES`] per delta), to forward as it is.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// A batch of a well-formed body: the time, then whole deltas.
    fn of(body: &'a [u8]) -> Option<DeltaBatch<'a>> {
        let deltas = body.len().checked_sub(WRITTEN_NS_BYTES)?;
        (deltas % DELTA_BYTES == 0).then_some(DeltaBatch(body))
    }
}

/// Executor → coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report<'a> {
    /// Ledger deltas of the tracked requests it processed.
    Deltas(DeltaBatch<'a>),
    /// It ran the end of stream of `operator` (everything that flush emitted is sent).
    Flushed {
        /// The operator.
        operator: u16,
    },
    /// The process writing one of its inputs (the local ingress) died.
    ProducerDied {
        /// Its pid.
        pid: u32,
    },
    /// A fault, in words.
    Error(Cow<'a, str>),
    /// A slot completed its part of a migration (body: an encoded
    /// [`Message::Migrated`](crate::message::Message::Migrated)).
    Migrated(&'a [u8]),
    /// A slot in a migration says what it waits for (body: an encoded
    /// [`Message::Progress`](crate::message::Message::Progress)).
    Progress(&'a [u8]),
    /// Its snapshot waits in its snapshot mailbox ([`Command::Snapshot`]).
    Snapshotted,
}

impl Report<'_> {
    /// Appends the wire form.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Report::Deltas(d) => {
                out.push(tag::DELTAS);
                out.extend_from_slice(d.as_bytes());
            }
            Report::Flushed { operator } => {
                out.push(tag::FLUSHED);
                out.extend_from_slice(&operator.to_le_bytes());
            }
            Report::ProducerDied { pid } => {
                out.push(tag::PRODUCER_DIED);
                out.extend_from_slice(&pid.to_le_bytes());
            }
            Report::Error(e) => {
                out.push(tag::ERROR);
                out.extend_from_slice(e.as_bytes());
            }
            Report::Migrated(b) => {
                out.push(tag::MIGRATED);
                out.extend_from_slice(b);
            }
            Report::Progress(b) => {
                out.push(tag::PROGRESS);
                out.extend_from_slice(b);
            }
            Report::Snapshotted => out.push(tag::SNAPSHOTTED),
        }
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Reads one frame (borrowing its body).
    pub fn decode(frame: &[u8]) -> Result<Report<'_>, MessageError> {
        let (&t, body) = frame.split_first().ok_or(MessageError::Empty)?;
        let bad = || MessageError::BadLength {
            tag: t,
            len: body.len(),
        };
        Ok(match t {
            tag::DELTAS => Report::Deltas(DeltaBatch::of(body).ok_or_else(bad)?),
            tag::FLUSHED => {
                let &[lo, hi] = body else { return Err(bad()) };
                Report::Flushed {
                    operator: u16::from_le_bytes([lo, hi]),
                }
            }
            tag::PRODUCER_DIED => {
                let &[a, b, c, d] = body else {
                    return Err(bad());
                };
                Report::ProducerDied {
                    pid: u32::from_le_bytes([a, b, c, d]),
                }
            }
            tag::ERROR => Report::Error(String::from_utf8_lossy(body)),
            tag::MIGRATED => Report::Migrated(body),
            tag::PROGRESS => Report::Progress(body),
            tag::SNAPSHOTTED if body.is_empty() => Report::Snapshotted,
            tag::SNAPSHOTTED => return Err(bad()),
            other => return Err(MessageError::UnknownTag(other)),
        })
    }
}

/// Writes the wire form of a [`Report::Deltas`] holding `deltas`, written at `written_ns`,
/// into `out`, which is exactly [`deltas_frame_bytes`] of their number long.
pub(crate) fn encode_deltas(
    deltas: impl ExactSizeIterator<Item = Delta>,
    written_ns: u64,
    out: &mut [u8],
) {
    assert_eq!(
        out.len(),
        deltas_frame_bytes(deltas.len()),
        "a deltas frame's length"
    );
    out[0] = tag::DELTAS;
    let (time, rest) = out[1..].split_at_mut(WRITTEN_NS_BYTES);
    time.copy_from_slice(&written_ns.to_le_bytes());
    for (d, place) in deltas.zip(rest.chunks_exact_mut(DELTA_BYTES)) {
        d.write(place.try_into().expect("chunks of DELTA_BYTES"));
    }
}

/// Bytes of a [`Report::Deltas`] frame carrying `n` deltas.
pub(crate) const fn deltas_frame_bytes(n: usize) -> usize {
    1 + WRITTEN_NS_BYTES + n * DELTA_BYTES
}

/// Longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands_round_trip() {
        for c in [
            Command::EndOfStream { operator: 0 },
            Command::EndOfStream { operator: 513 },
            Command::Stop,
            Command::Plan,
            Command::Snapshot,
        ] {
            assert_eq!(Command::decode(&c.encode()), Ok(c));
        }
        assert_eq!(Command::decode(&[]), Err(MessageError::Empty));
        assert_eq!(
            Command::decode(&[9, 0, 0]),
            Err(MessageError::UnknownTag(9))
        );
        assert!(Command::decode(&[1, 0]).is_err());
    }

    #[test]
    fn reports_round_trip() {
        let mut deltas = Vec::new();
        let ds = [
            Delta {
                root_id: 1,
                xor: 2,
                admitted_ns: 3,
            },
            Delta {
                root_id: u64::MAX,
                xor: 7,
                admitted_ns: 0,
            },
        ];
        deltas.resize(deltas_frame_bytes(2), 0);
        encode_deltas(ds.iter().copied(), 123_456_789, &mut deltas);
        match Report::decode(&deltas) {
            Ok(Report::Deltas(b)) => {
                assert_eq!(b.iter().collect::<Vec<_>>(), ds);
                assert_eq!(b.written_ns(), 123_456_789);
            }
            other => panic!("{other:?}"),
        }
        for r in [
            Report::Flushed { operator: 300 },
            Report::ProducerDied { pid: 4242 },
            Report::Error("a fault".into()),
            Report::Migrated(&[1, 2, 3]),
            Report::Progress(&[]),
            Report::Snapshotted,
        ] {
            assert_eq!(Report::decode(&r.encode()), Ok(r));
        }
        assert!(Report::decode(&[tag::DELTAS, 1, 2]).is_err(), "no time");
        let mut one_short = deltas_frame_bytes(1);
        one_short -= 1;
        assert!(
            Report::decode(&deltas[..one_short]).is_err(),
            "a partial delta"
        );
        assert!(Report::decode(&[tag::FLUSHED, 1]).is_err());
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate_utf8("héllo", 2), "h");
        assert_eq!(truncate_utf8("héllo", 3), "hé");
        assert_eq!(truncate_utf8("abc", 10), "abc");
    }

    proptest! {
        #[test]
        fn decoding_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Command::decode(&frame);
            if let Ok(Report::Deltas(b)) = Report::decode(&frame) {
                prop_assert_eq!(b.iter().count() * DELTA_BYTES + 8, b.as_bytes().len());
            }
        }
    }
}
