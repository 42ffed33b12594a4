//! The one codec of [`Message`]: a 16-byte header that names the version, then an rkyv
//! archive validated with bytecheck.
//!
//! ```text
//! offset size field
//!      0    4  magic     MAGIC ("CLMS")
//!      4    2  version   VERSION
//!      6   10  reserved  zero
//!     16    …  the rkyv archive of a `Message`
//! ```
//!
//! The header is 16 bytes so that an archive written right behind it keeps the alignment it
//! was written with (rkyv aligns every field relative to the start of the buffer). The
//! decoder copies the archive into an aligned scratch buffer it keeps, because neither a
//! receive buffer nor a ring frame promises the alignment rkyv's validation checks.

use super::{ArchivedMessage, Message};
use rkyv::util::AlignedVec;

/// "CLMS", little-endian: the first bytes of every message.
pub const MAGIC: u32 = u32::from_le_bytes(*b"CLMS");
/// The message version this build speaks; a peer speaking another is refused.
pub const VERSION: u16 = 14;
/// Bytes of the header before the archive.
pub const HEADER_BYTES: usize = 16;
/// The transport control-frame kind that carries a message (the transport's framing has a
/// kind field; every control frame between clasp processes is a message).
pub const CONTROL_KIND: u16 = 1;

/// Why bytes are not a message this build can read, or a message could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Fewer bytes than the header.
    #[error("a message of {0} bytes is shorter than its {HEADER_BYTES}-byte header")]
    Truncated(usize),
    /// Not a clasp message.
    #[error("not a clasp message (magic {0:#010x})")]
    Magic(u32),
    /// The peer speaks another version of the message layer.
    #[error(
        "the peer speaks message version {theirs}, this build speaks version {ours}; run the \
         same clasp build on every host"
    )]
    Version {
        /// The version this build speaks.
        ours: u16,
        /// The version the peer wrote.
        theirs: u16,
    },
    /// Reserved header bytes that are not zero.
    #[error("reserved message header bytes are not zero")]
    Reserved,
    /// The archive failed validation.
    #[error("the message failed validation: {0}")]
    Archive(String),
    /// A well-formed message whose content is out of range (a key group, a routing row ...).
    #[error("{0}")]
    Content(String),
    /// A transport control frame of a kind that is not [`CONTROL_KIND`].
    #[error("a control frame of kind {0}, not a message")]
    Kind(u16),
}

/// Appends `msg`'s encoding to `out` (which the caller may reuse; it is not cleared). Written
/// in place when `out`'s length is a multiple of 16 (a request header is 48 bytes), else
/// through a temporary buffer.
pub fn encode_into(msg: &Message, out: &mut Vec<u8>) -> Result<(), MessageError> {
    if out.len() % HEADER_BYTES != 0 {
        let mut whole = Vec::new();
        encode_into(msg, &mut whole)?;
        out.extend_from_slice(&whole);
        return Ok(());
    }
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0; HEADER_BYTES - 6]);
    rkyv::api::high::to_bytes_in::<_, rkyv::rancor::Error>(msg, out)
        .map_err(|e| MessageError::Archive(e.to_string()))?;
    Ok(())
}

/// `msg`'s encoding in a new buffer.
pub fn encode(msg: &Message) -> Result<Vec<u8>, MessageError> {
    let mut out = Vec::new();
    encode_into(msg, &mut out)?;
    Ok(out)
}

/// Checks the header: magic, version (naming both on a mismatch), reserved bytes. Returns the
/// archive.
pub fn check_header(bytes: &[u8]) -> Result<&[u8], MessageError> {
    let h = bytes
        .get(..HEADER_BYTES)
        .ok_or(MessageError::Truncated(bytes.len()))?;
    let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if magic != MAGIC {
        return Err(MessageError::Magic(magic));
    }
    let theirs = u16::from_le_bytes([h[4], h[5]]);
    if theirs != VERSION {
        return Err(MessageError::Version {
            ours: VERSION,
            theirs,
        });
    }
    if h[6..].iter().any(|&b| b != 0) {
        return Err(MessageError::Reserved);
    }
    Ok(&bytes[HEADER_BYTES..])
}

/// Decodes messages, reusing one aligned scratch buffer.
#[derive(Default)]
pub struct Decoder {
    scratch: AlignedVec<16>,
}

impl Decoder {
    /// Decodes one message (never panics, whatever the bytes; nothing is allocated by a
    /// length the bytes claim before validation checked it against the buffer).
    pub fn decode(&mut self, bytes: &[u8]) -> Result<Message, MessageError> {
        let archived = self.access(bytes)?;
        rkyv::deserialize::<Message, rkyv::rancor::Error>(archived)
            .map_err(|e| MessageError::Archive(e.to_string()))
    }

    /// Validates one message and returns it archived, without deserializing it (the driver
    /// applies ledger deltas straight from the archive).
    pub fn access(&mut self, bytes: &[u8]) -> Result<&ArchivedMessage, MessageError> {
        let archive = check_header(bytes)?;
        self.scratch.clear();
        self.scratch.extend_from_slice(archive);
        rkyv::access::<ArchivedMessage, rkyv::rancor::Error>(&self.scratch)
            .map_err(|e| MessageError::Archive(e.to_string()))
    }
}

/// Decodes one message with a fresh scratch buffer (see [`Decoder::decode`]).
pub fn decode(bytes: &[u8]) -> Result<Message, MessageError> {
    Decoder::default().decode(bytes)
}
