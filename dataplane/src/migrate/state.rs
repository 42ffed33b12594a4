//! State messages in parts: an encoded state message, which may be larger than a frame, is
//! split into state-part messages on the way out and reassembled per sender on the way in.

use super::STATE_MESSAGE_BYTES_MAX;
use crate::message::{MessageError, StatePart};

/// Bytes a state part's message adds to its slice of state: the message header and the
/// archive's root (a test checks the bound).
pub const STATE_PART_OVERHEAD_BYTES: usize = 256;

/// Splits an encoded state message into parts whose messages are at most `part_bytes` each.
pub fn state_parts(msg: &[u8], part_bytes: usize) -> Vec<StatePart> {
    let step = part_bytes.saturating_sub(STATE_PART_OVERHEAD_BYTES).max(1);
    let total = msg.len() as u32;
    let mut parts = Vec::with_capacity(msg.len() / step + 1);
    let mut off = 0usize;
    loop {
        let end = (off + step).min(msg.len());
        parts.push(StatePart {
            total,
            offset: off as u32,
            bytes: msg[off..end].to_vec(),
        });
        off = end;
        if off >= msg.len() {
            return parts;
        }
    }
}

/// Reassembles one sender's state parts (they arrive in order on its FIFO connection).
#[derive(Debug, Default)]
pub struct Reassembly {
    buf: Vec<u8>,
    total: usize,
}

impl Reassembly {
    /// Adds a part; returns the whole message once its last part is in.
    /// After an error the half-received message is dropped (the next part must start a new
    /// one).
    pub fn add(&mut self, part: StatePart) -> Result<Option<Vec<u8>>, MessageError> {
        let r = self.add_inner(part);
        if r.is_err() {
            self.buf = Vec::new();
            self.total = 0;
        }
        r
    }

    fn add_inner(&mut self, part: StatePart) -> Result<Option<Vec<u8>>, MessageError> {
        let (total, off) = (part.total as usize, part.offset as usize);
        let bad = |e: String| Err(MessageError::Content(e));
        if total > STATE_MESSAGE_BYTES_MAX {
            return bad(format!("state message of {total} bytes"));
        }
        if off == 0 {
            if !self.buf.is_empty() {
                return bad("a state message began before the previous one ended".into());
            }
            self.total = total;
            // Grown as parts arrive: a peer's claimed total is not trusted with memory.
            self.buf.reserve(total.min(1 << 20));
        } else if off != self.buf.len() || total != self.total {
            return bad(format!(
                "state part at offset {off} of {total}, expected offset {} of {}",
                self.buf.len(),
                self.total
            ));
        }
        if self.buf.len() + part.bytes.len() > total {
            return bad("state parts longer than their message".into());
        }
        if self.buf.is_empty() && part.bytes.len() == total {
            // A message in one part: no copy.
            self.total = 0;
            return Ok(Some(part.bytes));
        }
        self.buf.extend_from_slice(&part.bytes);
        if self.buf.len() == total {
            self.total = 0;
            return Ok(Some(std::mem::take(&mut self.buf)));
        }
        Ok(None)
    }

    /// True when no message is half-received.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}
