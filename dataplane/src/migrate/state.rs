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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// A part as a hostile or confused peer might send it: any total, any offset, any bytes.
    fn part() -> impl Strategy<Value = StatePart> {
        (0u32..300, 0u32..300, vec(any::<u8>(), 0..80)).prop_map(|(total, offset, bytes)| {
            StatePart {
                total,
                offset,
                bytes,
            }
        })
    }

    proptest! {
        #[test]
        fn any_message_split_at_any_size_reassembles_to_itself(
            msg in vec(any::<u8>(), 0..3000), part_bytes in 0usize..1200
        ) {
            let mut r = Reassembly::default();
            let parts = state_parts(&msg, part_bytes);
            let n = parts.len();
            for (i, p) in parts.into_iter().enumerate() {
                let got = r.add(p).unwrap();
                prop_assert_eq!(got.is_some(), i + 1 == n);
                if let Some(whole) = got {
                    prop_assert_eq!(&whole, &msg);
                }
            }
            prop_assert!(r.is_empty());
        }

        #[test]
        fn any_part_sequence_is_an_error_or_a_message_of_its_claimed_total(
            parts in vec(part(), 0..24)
        ) {
            let mut r = Reassembly::default();
            for p in parts {
                let total = p.total as usize;
                match r.add(p) {
                    Ok(Some(whole)) => prop_assert_eq!(whole.len(), total),
                    Ok(None) => {}
                    // An error drops the half-received message.
                    Err(_) => prop_assert!(r.is_empty()),
                }
            }
        }
    }

    #[test]
    fn a_claimed_total_beyond_the_limit_is_refused_before_any_memory_is_taken() {
        let mut r = Reassembly::default();
        let huge = StatePart {
            total: u32::MAX,
            offset: 0,
            bytes: vec![1; 8],
        };
        assert!(r.add(huge).is_err());
        assert!(r.is_empty());
    }
}
