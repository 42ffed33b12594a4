//! State messages: one operator's key groups with their archives and queued requests, split
//! into control-frame parts on the way out and reassembled per sender on the way in.

use super::{PART_HEADER_BYTES, STATE_MESSAGE_BYTES_MAX};
use crate::cluster::{Reader, Writer};
use clasp_operators::key::KEY_GROUPS;

/// A state message: one operator's key groups, their exported state, and their queued
/// requests (whole request frames, in queue order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateMsg {
    /// The operator.
    pub operator: usize,
    /// Per key group: its archive (`OperatorInstance::export_group`).
    pub groups: Vec<(usize, Vec<u8>)>,
    /// Queued request frames.
    pub queued: Vec<Vec<u8>>,
}

impl StateMsg {
    /// The wire form (split into parts by [`state_parts`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u16(self.operator as u16).u32(self.groups.len() as u32);
        for (g, bytes) in &self.groups {
            w.u16(*g as u16).u32(bytes.len() as u32);
            w.0.extend_from_slice(bytes);
        }
        w.u32(self.queued.len() as u32);
        for f in &self.queued {
            w.u32(f.len() as u32);
            w.0.extend_from_slice(f);
        }
        w.0
    }

    /// Reads the wire form (never panics).
    pub fn decode(b: &[u8]) -> Result<StateMsg, String> {
        let mut r = Reader::new(b);
        let operator = r.u16()? as usize;
        let n = r.len()?;
        let mut groups = Vec::with_capacity(n.min(KEY_GROUPS as usize));
        for _ in 0..n {
            let g = r.u16()?;
            if g >= KEY_GROUPS {
                return Err(format!("key group {g} out of range"));
            }
            let len = r.u32()? as usize;
            groups.push((g as usize, r.bytes(len)?.to_vec()));
        }
        let n = r.len()?;
        let mut queued = Vec::new();
        for _ in 0..n {
            let len = r.u32()? as usize;
            queued.push(r.bytes(len)?.to_vec());
        }
        if !r.is_empty() {
            return Err("trailing bytes after a state message".into());
        }
        Ok(StateMsg {
            operator,
            groups,
            queued,
        })
    }
}

/// Splits an encoded state message into control-frame bodies of at most `part_bytes` each.
pub fn state_parts(msg: &[u8], part_bytes: usize) -> Vec<Vec<u8>> {
    let step = part_bytes.saturating_sub(PART_HEADER_BYTES).max(1);
    let total = msg.len() as u32;
    let mut parts = Vec::new();
    let mut off = 0usize;
    loop {
        let end = (off + step).min(msg.len());
        let mut b = Vec::with_capacity(PART_HEADER_BYTES + end - off);
        b.extend_from_slice(&total.to_le_bytes());
        b.extend_from_slice(&(off as u32).to_le_bytes());
        b.extend_from_slice(&msg[off..end]);
        parts.push(b);
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
    pub fn add(&mut self, part: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let r = self.add_inner(part);
        if r.is_err() {
            self.buf = Vec::new();
            self.total = 0;
        }
        r
    }

    fn add_inner(&mut self, part: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut r = Reader::new(part);
        let total = r.u32()? as usize;
        let off = r.u32()? as usize;
        let bytes = r.rest();
        if total > STATE_MESSAGE_BYTES_MAX {
            return Err(format!("state message of {total} bytes"));
        }
        if off == 0 {
            if !self.buf.is_empty() {
                return Err("a state message began before the previous one ended".into());
            }
            self.total = total;
            // Grown as parts arrive: a peer's claimed total is not trusted with memory.
            self.buf.reserve(total.min(1 << 20));
        } else if off != self.buf.len() || total != self.total {
            return Err(format!(
                "state part at offset {off} of {total}, expected offset {} of {}",
                self.buf.len(),
                self.total
            ));
        }
        if self.buf.len() + bytes.len() > total {
            return Err("state parts longer than their message".into());
        }
        self.buf.extend_from_slice(bytes);
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
