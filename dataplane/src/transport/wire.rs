//! The network frame format, and a decoder that never trusts a byte it has not checked.
//!
//! Everything a peer sends after the handshake is a sequence of frames on one TCP stream. A
//! frame is a fixed 32-byte header followed by a payload whose length is a multiple of 16, so
//! every frame, and every batch entry inside one, starts 16-byte aligned relative to the stream
//! (rkyv archives and request payloads need that alignment once copied into a ring).
//!
//! ```text
//! header  offset size field
//!              0    4  magic                 MAGIC ("CLNF")
//!              4    1  version               VERSION
//!              5    1  kind                  Kind: 1 batch, 2 control, 3 credit
//!              6    2  reserved              zero
//!              8    4  payload_bytes         bytes after the header, multiple of 16
//!             12    4  sender                the sending worker's id
//!             16    4  reserved              zero (the request header carries the epoch)
//!             20    4  seq                   frame number on this connection, from 0, +1 each
//!             24    4  data_credit_bytes     data credit granted back (credit frames)
//!             28    4  control_credit_bytes  control credit granted back (credit frames)
//!
//! batch payload: entries, each exactly the bytes a shmring frame holds
//!              0    8  frame_bytes           the request frame's length (> 0)
//!              8    8  reserved              zero
//!             16    …  the request frame (dataplane::request), zero-padded to 16
//!
//! control payload: a 16-byte prefix, then an rkyv archive of `ControlMessage`
//!              0    4  archive_bytes
//!              4   12  reserved              zero
//!             16    …  the archive, zero-padded to 16
//! ```
//!
//! A batch entry is the ring's frame layout (16-byte header, payload padded to 16), so the
//! receiver copies each request once, from the receive buffer into the destination ring, and
//! nothing is decoded and re-encoded. Why two payload shapes: requests are the hot path and
//! already have a fixed, checked layout; control messages are rare, varied and evolving, which
//! is what rkyv (validated with bytecheck) is for. The control archive frames one body: a
//! [`Message`](crate::message::Message) in the message layer's own versioned codec.
//!
//! Every length read from the wire is checked against a bound before it is used: the header's
//! `payload_bytes` against the receiver's frame limit before a byte of the payload is buffered,
//! each entry's length against what is left of the batch, each request against
//! [`Request::parse`], each archive with bytecheck. Decoding returns a [`WireError`] for any
//! bytes and never panics (property test below; fuzz target in `fuzz/`).

use crate::request::{REQUEST_HEADER_BYTES, Request};
use clasp_shmring::FRAME_ALIGN;

/// "CLNF", little-endian.
pub const MAGIC: u32 = u32::from_le_bytes(*b"CLNF");
/// Wire version; a peer speaking another is refused.
pub const VERSION: u8 = 1;
/// Bytes of the fixed frame header.
pub const NET_HEADER_BYTES: usize = 32;
/// Bytes of a batch entry's header (the same as a ring frame's header).
pub const ENTRY_HEADER_BYTES: usize = 16;
/// Alignment of frames, entries and payloads.
pub const WIRE_ALIGN: usize = 16;
/// Hard upper bound on any frame (header + payload); settings may only lower it.
pub const FRAME_BYTES_MAX: usize = 1 << 20;
/// Bytes of the prefix before a control archive.
pub const CONTROL_PREFIX_BYTES: usize = 16;
/// Longest control body (the bytes the worker passes to `send_control`). A migration's plan
/// carries the new routing table (up to 2 KiB an operator, less as runs) and the key groups
/// each slot sends: 512 KiB holds an app of 128 operators at worst, and the moves of a
/// 256-operator chain measured; a larger plan fails the move, naming its size.
pub const MAX_CONTROL_BODY_BYTES: usize = 512 << 10;
/// Smallest frame a batch may carry: a request header.
pub const MIN_REQUEST_FRAME_BYTES: usize = REQUEST_HEADER_BYTES;

const _: () = assert!(WIRE_ALIGN == FRAME_ALIGN);
const _: () = assert!(NET_HEADER_BYTES % WIRE_ALIGN == 0);
const _: () = assert!(FRAME_BYTES_MAX % WIRE_ALIGN == 0);
const _: () = assert!(FRAME_BYTES_MAX <= u32::MAX as usize);
// A control message with its archive overhead fits in one frame.
const _: () = assert!(
    NET_HEADER_BYTES + CONTROL_PREFIX_BYTES + MAX_CONTROL_BODY_BYTES + 256 <= FRAME_BYTES_MAX
);

/// What a frame carries. This is the transport's framing, not a message vocabulary: the
/// messages themselves are [`crate::message::Message`]s inside control frames (and inside
/// control request frames of a batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Ring-format request frames.
    Batch = 1,
    /// An rkyv archive of a [`ControlMessage`], whose body is an encoded message.
    Control = 2,
    /// Credit returned to the sender (header only).
    Credit = 3,
}

/// The decoded fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetHeader {
    /// What follows.
    pub kind: Kind,
    /// Payload bytes after the header; a multiple of 16.
    pub payload_bytes: u32,
    /// Sender's worker id.
    pub sender: u32,
    /// Frame number on this connection.
    pub seq: u32,
    /// Data credit granted (credit frames; zero otherwise).
    pub data_credit_bytes: u32,
    /// Control credit granted (credit frames; zero otherwise).
    pub control_credit_bytes: u32,
}

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    #[error("truncated: {need} bytes needed, {have} present")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Not our magic number.
    #[error("bad magic {0:#010x}")]
    Magic(u32),
    /// Another wire version.
    #[error("unsupported wire version {0}")]
    Version(u8),
    /// Unknown frame kind.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// Non-zero reserved bytes.
    #[error("reserved bytes are not zero")]
    Reserved,
    /// A length that is not a multiple of 16.
    #[error("length {0} is not a multiple of {WIRE_ALIGN}")]
    Misaligned(usize),
    /// A frame longer than the receiver accepts.
    #[error("frame of {frame_bytes} bytes exceeds the limit of {limit_bytes}")]
    Oversized {
        /// Declared frame length.
        frame_bytes: usize,
        /// The receiver's limit.
        limit_bytes: usize,
    },
    /// A payload this kind cannot have (credit with a payload, empty batch, ...).
    #[error("{kind:?} frame with a {payload_bytes}-byte payload")]
    PayloadShape {
        /// The kind.
        kind: Kind,
        /// Its payload length.
        payload_bytes: usize,
    },
    /// A batch entry that does not fit what is left of its batch.
    #[error("batch entry of {frame_bytes} bytes at offset {offset} overruns the batch")]
    EntryBounds {
        /// Offset of the entry in the payload.
        offset: usize,
        /// Declared frame length.
        frame_bytes: u64,
    },
    /// A batch entry that is not a well-formed request.
    #[error("batch entry at offset {offset}: {error}")]
    Request {
        /// Offset of the entry in the payload.
        offset: usize,
        /// What is wrong with it.
        error: crate::request::FrameError,
    },
    /// Non-zero padding after an entry or archive.
    #[error("padding is not zero")]
    Padding,
    /// The control archive failed validation.
    #[error("control archive failed validation: {0}")]
    Archive(String),
}

/// Rounds up to the wire alignment.
#[inline]
pub const fn pad16(len: usize) -> usize {
    len.next_multiple_of(WIRE_ALIGN)
}

/// Bytes a request frame of `frame_bytes` occupies in a batch.
#[inline]
pub const fn entry_bytes(frame_bytes: usize) -> usize {
    ENTRY_HEADER_BYTES + pad16(frame_bytes)
}

impl Kind {
    fn from_u8(b: u8) -> Result<Kind, WireError> {
        match b {
            1 => Ok(Kind::Batch),
            2 => Ok(Kind::Control),
            3 => Ok(Kind::Credit),
            other => Err(WireError::Kind(other)),
        }
    }
}

#[inline]
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

#[inline]
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl NetHeader {
    /// Total frame bytes (header + payload).
    #[inline]
    pub fn frame_bytes(&self) -> usize {
        NET_HEADER_BYTES + self.payload_bytes as usize
    }

    /// Writes the header into `out[..NET_HEADER_BYTES]`.
    #[inline]
    pub fn write(&self, out: &mut [u8]) {
        let h = &mut out[..NET_HEADER_BYTES];
        h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        h[4] = VERSION;
        h[5] = self.kind as u8;
        h[6..8].fill(0);
        h[8..12].copy_from_slice(&self.payload_bytes.to_le_bytes());
        h[12..16].copy_from_slice(&self.sender.to_le_bytes());
        h[16..20].fill(0);
        h[20..24].copy_from_slice(&self.seq.to_le_bytes());
        h[24..28].copy_from_slice(&self.data_credit_bytes.to_le_bytes());
        h[28..32].copy_from_slice(&self.control_credit_bytes.to_le_bytes());
    }

    /// Decodes and checks a header: magic, version, kind, reserved bytes, alignment, the
    /// frame length against `limit_bytes` (checked here, before any payload is buffered), and
    /// the payload shape each kind allows.
    pub fn decode(bytes: &[u8], limit_bytes: usize) -> Result<NetHeader, WireError> {
        if bytes.len() < NET_HEADER_BYTES {
            return Err(WireError::Truncated {
                need: NET_HEADER_BYTES,
                have: bytes.len(),
            });
        }
        let magic = u32_at(bytes, 0);
        if magic != MAGIC {
            return Err(WireError::Magic(magic));
        }
        if bytes[4] != VERSION {
            return Err(WireError::Version(bytes[4]));
        }
        let kind = Kind::from_u8(bytes[5])?;
        if bytes[6] != 0 || bytes[7] != 0 || u32_at(bytes, 16) != 0 {
            return Err(WireError::Reserved);
        }
        let payload = u32_at(bytes, 8) as usize;
        if payload % WIRE_ALIGN != 0 {
            return Err(WireError::Misaligned(payload));
        }
        let frame_bytes = NET_HEADER_BYTES + payload;
        let limit_bytes = limit_bytes.min(FRAME_BYTES_MAX);
        if frame_bytes > limit_bytes {
            return Err(WireError::Oversized {
                frame_bytes,
                limit_bytes,
            });
        }
        let shape_ok = match kind {
            Kind::Credit => payload == 0,
            Kind::Batch => payload >= ENTRY_HEADER_BYTES + MIN_REQUEST_FRAME_BYTES,
            Kind::Control => payload > CONTROL_PREFIX_BYTES,
        };
        if !shape_ok {
            return Err(WireError::PayloadShape {
                kind,
                payload_bytes: payload,
            });
        }
        Ok(NetHeader {
            kind,
            payload_bytes: payload as u32,
            sender: u32_at(bytes, 12),
            seq: u32_at(bytes, 20),
            data_credit_bytes: u32_at(bytes, 24),
            control_credit_bytes: u32_at(bytes, 28),
        })
    }
}

/// Appends one request frame as a batch entry to `batch` (which the caller has bounded).
#[inline]
pub fn push_entry(batch: &mut Vec<u8>, frame: &[u8]) {
    // One resize (zeroing the entry header's reserved half and the padding), then two copies.
    let at = batch.len();
    batch.resize(at + entry_bytes(frame.len()), 0);
    let entry = &mut batch[at..];
    entry[..8].copy_from_slice(&(frame.len() as u64).to_le_bytes());
    entry[ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES + frame.len()].copy_from_slice(frame);
}

/// The entry at `offset` of a batch payload that [`validate_batch`] has accepted: (request
/// frame, offset of the next entry), or `None` at the end. Only the bounds are checked again
/// (so it never panics, whatever the bytes); the request itself is not re-parsed.
#[inline]
pub(crate) fn next_validated(payload: &[u8], offset: usize) -> Option<(&[u8], usize)> {
    let rest = payload.get(offset..)?;
    let len = usize::try_from(u64_at(rest.get(..8)?, 0)).ok()?;
    let frame = rest.get(ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES.checked_add(len)?)?;
    Some((frame, offset + ENTRY_HEADER_BYTES + pad16(len)))
}

/// Reads the entry at `offset` of a batch payload: (request frame, offset of the next entry).
/// Checks the entry's bounds, its reserved and padding bytes, and the request itself.
#[inline]
pub fn read_entry(payload: &[u8], offset: usize) -> Result<(&[u8], usize), WireError> {
    let rest = payload.get(offset..).unwrap_or(&[]);
    if rest.len() < ENTRY_HEADER_BYTES {
        return Err(WireError::Truncated {
            need: ENTRY_HEADER_BYTES,
            have: rest.len(),
        });
    }
    let frame_bytes = u64_at(rest, 0);
    if u64_at(rest, 8) != 0 {
        return Err(WireError::Reserved);
    }
    let body = &rest[ENTRY_HEADER_BYTES..];
    // Compare in u64 first: a huge length must not overflow `pad16`.
    if frame_bytes == 0 || frame_bytes > body.len() as u64 {
        return Err(WireError::EntryBounds {
            offset,
            frame_bytes,
        });
    }
    let len = frame_bytes as usize;
    let padded = pad16(len);
    if padded > body.len() {
        return Err(WireError::EntryBounds {
            offset,
            frame_bytes,
        });
    }
    if body[len..padded].iter().any(|&b| b != 0) {
        return Err(WireError::Padding);
    }
    let frame = &body[..len];
    Request::parse(frame).map_err(|error| WireError::Request { offset, error })?;
    Ok((frame, offset + ENTRY_HEADER_BYTES + padded))
}

/// Validates every entry of a batch payload; returns how many requests it holds. Called once
/// per received batch before any entry is delivered, so a bad entry anywhere refuses the
/// whole batch rather than delivering half of it.
pub fn validate_batch(payload: &[u8]) -> Result<u32, WireError> {
    let mut offset = 0;
    let mut count = 0u32;
    while offset < payload.len() {
        let (_, next) = read_entry(payload, offset)?;
        offset = next;
        count += 1;
    }
    Ok(count)
}

/// The entries of a batch payload that [`validate_batch`] accepted, from `offset`.
pub struct Entries<'a> {
    payload: &'a [u8],
    offset: usize,
}

impl<'a> Entries<'a> {
    /// Iterates from `offset` (0, or an offset an earlier iteration reported).
    pub fn new(payload: &'a [u8], offset: usize) -> Self {
        Entries { payload, offset }
    }

    /// Offset of the next entry.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.offset >= self.payload.len() {
            return None;
        }
        // Validated already; a failure here would be a bug, and ends the iteration safely.
        let (frame, next) = read_entry(self.payload, self.offset).ok()?;
        self.offset = next;
        Some(frame)
    }
}

/// The framing of one control frame's content: a kind the transport does not interpret and
/// the body it carries. Every control frame between clasp processes has the kind
/// [`crate::message::CONTROL_KIND`] and a body that is one
/// [`Message`](crate::message::Message) in the message layer's versioned codec; the transport
/// only frames it.
#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ControlMessage {
    /// The sender's kind (the message layer uses one).
    pub kind: u16,
    /// The body: an encoded message.
    pub body: Vec<u8>,
}

/// Encodes a control frame (header with `seq` 0; the sender stamps it) into `out`.
pub fn encode_control(
    sender: u32,
    kind: u16,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    if body.len() > MAX_CONTROL_BODY_BYTES {
        return Err(WireError::Oversized {
            frame_bytes: body.len(),
            limit_bytes: MAX_CONTROL_BODY_BYTES,
        });
    }
    let msg = ControlMessage {
        kind,
        body: body.to_vec(),
    };
    let archive = rkyv::to_bytes::<rkyv::rancor::Error>(&msg)
        .map_err(|e| WireError::Archive(e.to_string()))?;
    let payload = CONTROL_PREFIX_BYTES + pad16(archive.len());
    out.clear();
    out.resize(NET_HEADER_BYTES + payload, 0);
    NetHeader {
        kind: Kind::Control,
        payload_bytes: payload as u32,
        sender,
        seq: 0,
        data_credit_bytes: 0,
        control_credit_bytes: 0,
    }
    .write(out);
    let p = NET_HEADER_BYTES;
    out[p..p + 4].copy_from_slice(&(archive.len() as u32).to_le_bytes());
    out[p + CONTROL_PREFIX_BYTES..p + CONTROL_PREFIX_BYTES + archive.len()]
        .copy_from_slice(&archive);
    Ok(())
}

/// Validates a control payload and returns (kind, body). `scratch` receives an aligned copy
/// of the archive (receive buffers give no alignment guarantee; control is not the hot path).
pub fn decode_control<'s>(
    payload: &[u8],
    scratch: &'s mut rkyv::util::AlignedVec<16>,
) -> Result<(u16, &'s [u8]), WireError> {
    if payload.len() < CONTROL_PREFIX_BYTES {
        return Err(WireError::Truncated {
            need: CONTROL_PREFIX_BYTES,
            have: payload.len(),
        });
    }
    let archive_bytes = u32_at(payload, 0) as usize;
    if payload[4..CONTROL_PREFIX_BYTES].iter().any(|&b| b != 0) {
        return Err(WireError::Reserved);
    }
    let body = &payload[CONTROL_PREFIX_BYTES..];
    if archive_bytes == 0 || archive_bytes > body.len() || pad16(archive_bytes) != body.len() {
        return Err(WireError::PayloadShape {
            kind: Kind::Control,
            payload_bytes: payload.len(),
        });
    }
    if body[archive_bytes..].iter().any(|&b| b != 0) {
        return Err(WireError::Padding);
    }
    scratch.clear();
    scratch.extend_from_slice(&body[..archive_bytes]);
    let archived = rkyv::access::<ArchivedControlMessage, rkyv::rancor::Error>(scratch)
        .map_err(|e| WireError::Archive(e.to_string()))?;
    if archived.body.len() > MAX_CONTROL_BODY_BYTES {
        return Err(WireError::Oversized {
            frame_bytes: archived.body.len(),
            limit_bytes: MAX_CONTROL_BODY_BYTES,
        });
    }
    Ok((archived.kind.to_native(), archived.body.as_slice()))
}

/// Writes a credit frame (header only) into `out[..NET_HEADER_BYTES]`.
pub fn write_credit(out: &mut [u8], sender: u32, seq: u32, data: u32, control: u32) {
    NetHeader {
        kind: Kind::Credit,
        payload_bytes: 0,
        sender,
        seq,
        data_credit_bytes: data,
        control_credit_bytes: control,
    }
    .write(out);
}

/// Stamps `seq` into the header of the frame that starts `frame` (control frames are encoded
/// before their sequence number is known).
#[inline]
pub(crate) fn stamp_seq(frame: &mut [u8], seq: u32) {
    frame[20..24].copy_from_slice(&seq.to_le_bytes());
}

/// Decodes one whole frame (header and payload) the way the transport does, for tests and
/// the fuzz target: every check the receive path makes, in the same order.
pub fn decode_frame(bytes: &[u8], limit_bytes: usize) -> Result<NetHeader, WireError> {
    let header = NetHeader::decode(bytes, limit_bytes)?;
    let total = header.frame_bytes();
    if bytes.len() < total {
        return Err(WireError::Truncated {
            need: total,
            have: bytes.len(),
        });
    }
    let payload = &bytes[NET_HEADER_BYTES..total];
    match header.kind {
        Kind::Batch => {
            validate_batch(payload)?;
        }
        Kind::Control => {
            let mut scratch = rkyv::util::AlignedVec::<16>::new();
            decode_control(payload, &mut scratch)?;
        }
        Kind::Credit => {}
    }
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{RequestHeader, frame_len};
    use proptest::prelude::*;

    fn request(seq: u64, payload: &[u8]) -> Vec<u8> {
        let key = seq.to_le_bytes();
        let mut out = vec![0; frame_len(key.len(), payload.len())];
        RequestHeader {
            request_id: seq,
            ..Default::default()
        }
        .write(&key, payload, &mut out);
        out
    }

    fn batch_frame(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0u8; NET_HEADER_BYTES];
        for f in frames {
            push_entry(&mut out, f);
        }
        let payload = (out.len() - NET_HEADER_BYTES) as u32;
        NetHeader {
            kind: Kind::Batch,
            payload_bytes: payload,
            sender: 7,
            seq: 0,
            data_credit_bytes: 0,
            control_credit_bytes: 0,
        }
        .write(&mut out);
        out
    }

    #[test]
    fn a_batch_round_trips_entry_by_entry() {
        let frames: Vec<_> = (0..5)
            .map(|i| request(i, &vec![i as u8; i as usize * 7]))
            .collect();
        let f = batch_frame(&frames);
        let h = decode_frame(&f, FRAME_BYTES_MAX).unwrap();
        assert_eq!((h.kind, h.sender), (Kind::Batch, 7));
        let got: Vec<_> = Entries::new(&f[NET_HEADER_BYTES..], 0).collect();
        assert_eq!(got.len(), 5);
        for (g, w) in got.iter().zip(&frames) {
            assert_eq!(g, &w.as_slice());
        }
    }

    #[test]
    fn a_control_message_round_trips() {
        let mut out = Vec::new();
        encode_control(3, 42, b"state bytes", &mut out).unwrap();
        let h = decode_frame(&out, FRAME_BYTES_MAX).unwrap();
        assert_eq!(h.kind, Kind::Control);
        let mut scratch = rkyv::util::AlignedVec::new();
        let (kind, body) = decode_control(&out[NET_HEADER_BYTES..], &mut scratch).unwrap();
        assert_eq!((kind, body), (42, &b"state bytes"[..]));
    }

    #[test]
    fn each_malformation_is_named() {
        let good = batch_frame(&[request(1, b"x")]);
        let mut f = good.clone();
        f[0] ^= 1;
        assert!(matches!(
            decode_frame(&f, FRAME_BYTES_MAX),
            Err(WireError::Magic(_))
        ));
        let mut f = good.clone();
        f[4] = 9;
        assert_eq!(
            decode_frame(&f, FRAME_BYTES_MAX),
            Err(WireError::Version(9))
        );
        let mut f = good.clone();
        f[16] = 1; // the reserved word where an epoch once was
        assert_eq!(decode_frame(&f, FRAME_BYTES_MAX), Err(WireError::Reserved));
        let mut f = good.clone();
        f[5] = 77;
        assert_eq!(decode_frame(&f, FRAME_BYTES_MAX), Err(WireError::Kind(77)));
        assert!(matches!(
            decode_frame(&good, 64),
            Err(WireError::Oversized { .. })
        ));
        assert!(matches!(
            decode_frame(&good[..good.len() - 16], FRAME_BYTES_MAX),
            Err(WireError::Truncated { .. })
        ));
        let mut f = good.clone();
        f[NET_HEADER_BYTES..NET_HEADER_BYTES + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode_frame(&f, FRAME_BYTES_MAX),
            Err(WireError::EntryBounds { .. })
        ));
        let mut f = good.clone();
        // The request's flags: an unknown bit.
        f[NET_HEADER_BYTES + ENTRY_HEADER_BYTES + 6] = 0x80;
        assert!(matches!(
            decode_frame(&f, FRAME_BYTES_MAX),
            Err(WireError::Request { .. })
        ));
        let mut f = good.clone();
        f[8] = 3;
        assert!(matches!(
            decode_frame(&f, FRAME_BYTES_MAX),
            Err(WireError::Misaligned(_))
        ));
        let mut ctl = Vec::new();
        encode_control(3, 42, b"state", &mut ctl).unwrap();
        let last = ctl.len() - 20;
        ctl[last] ^= 0xFF;
        assert!(decode_frame(&ctl, FRAME_BYTES_MAX).is_err());
    }

    #[test]
    fn the_fast_walk_of_a_validated_batch_yields_what_the_checked_one_does() {
        let frames: Vec<_> = (0..9)
            .map(|i| request(i, &vec![i as u8; i as usize * 5]))
            .collect();
        let f = batch_frame(&frames);
        let payload = &f[NET_HEADER_BYTES..];
        assert_eq!(validate_batch(payload), Ok(9));
        let mut fast = Vec::new();
        let mut at = 0;
        while let Some((frame, next)) = next_validated(payload, at) {
            fast.push(frame);
            at = next;
        }
        let checked: Vec<_> = Entries::new(payload, 0).collect();
        assert_eq!(fast, checked);
        assert_eq!(at, payload.len());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode_frame(&bytes, FRAME_BYTES_MAX);
        }

        #[test]
        fn random_bytes_never_panic_the_fast_walk(
            bytes in prop::collection::vec(any::<u8>(), 0..600), start in 0usize..700
        ) {
            let mut at = start;
            let mut steps = 0;
            while let Some((frame, next)) = next_validated(&bytes, at) {
                prop_assert!(next > at && frame.len() <= bytes.len());
                at = next;
                steps += 1;
                prop_assert!(steps <= bytes.len());
            }
        }

        #[test]
        fn random_payloads_behind_a_valid_header_never_panic(
            kind in 1u8..4, body in prop::collection::vec(any::<u8>(), 0..40).prop_map(|v| {
                let mut v = v; v.resize(pad16(v.len()), 0); v
            }), noise in prop::collection::vec(any::<u8>(), 0..300)
        ) {
            let mut f = vec![0u8; NET_HEADER_BYTES];
            f.extend_from_slice(&body);
            f.extend_from_slice(&noise[..pad16(noise.len()) - 16.min(pad16(noise.len()))]);
            let payload = (f.len() - NET_HEADER_BYTES) as u32;
            NetHeader { kind: Kind::Batch, payload_bytes: payload, sender: 1, seq: 0,
                data_credit_bytes: 0, control_credit_bytes: 0 }.write(&mut f);
            f[5] = kind;
            let _ = decode_frame(&f, FRAME_BYTES_MAX);
        }

        #[test]
        fn mutated_valid_batches_never_panic(seed_frames in 1usize..6, flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
            let frames: Vec<_> = (0..seed_frames as u64).map(|i| request(i, b"payload")).collect();
            let mut f = batch_frame(&frames);
            for (at, x) in flips {
                let i = at % f.len();
                f[i] ^= x;
            }
            if decode_frame(&f, FRAME_BYTES_MAX).is_ok() {
                for e in Entries::new(&f[NET_HEADER_BYTES..], 0) {
                    prop_assert!(Request::parse(e).is_ok());
                }
            }
        }
    }
}
