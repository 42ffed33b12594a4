//! The wire side of live migration: executor slots, the protocol's control frames, and the
//! encodings of plans and reports.
//!
//! Why here: the protocol itself is the sans-I/O machine of
//! [`clasp_controlplane::protocol`]; the data plane only has to carry its messages. Markers,
//! seals and state travel as *control frames* ([`FLAG_CONTROL`]) on the very rings and
//! connections that carry requests, because the protocol's correctness rests on their order
//! relative to those requests (a marker is "nothing older follows on this connection").
//! Plans and completion reports travel on the driver's control channel, which has no such
//! order requirement.
//!
//! The protocol's participants are executor *slots* (see [`crate::request`]): executor `e` of
//! the worker at index `i` of the job's worker list is slot `i × executors + e`. A routing
//! table maps `(operator, key group)` to a slot.

use crate::cluster::{Reader, Writer};
use crate::request::{FLAG_CONTROL, INGRESS_SLOT, REQUEST_HEADER_BYTES, RequestHeader, frame_len};
use crate::routing::RoutingTable;
use clasp_controlplane::migration::{Routing, Transfer, WorkerPlan};
use clasp_controlplane::protocol::worker::{Waiting, WorkerReport};
use clasp_controlplane::protocol::{Assignment, Peer};
use clasp_operators::key::KEY_GROUPS;
use std::collections::BTreeSet;
use std::sync::Arc;

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

/// Executor slots of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    /// Worker ids in job order.
    pub workers: Vec<u32>,
    /// Executors per worker.
    pub executors: usize,
}

impl Slots {
    /// Slots in the cluster.
    pub fn len(&self) -> usize {
        self.workers.len() * self.executors
    }

    /// True when there are no slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Index in the job's worker list of the worker hosting `slot`.
    #[inline]
    pub fn worker_index(&self, slot: usize) -> usize {
        slot / self.executors
    }

    /// Worker id hosting `slot`.
    #[inline]
    pub fn worker_of(&self, slot: usize) -> Option<u32> {
        self.workers.get(slot / self.executors).copied()
    }

    /// The slot of executor `e` of the worker at index `index`.
    #[inline]
    pub fn slot(&self, index: usize, e: usize) -> usize {
        index * self.executors + e
    }

    /// The slot routing of a [`RoutingTable`] whose workers are `self.workers`.
    pub fn routing_of(&self, table: &RoutingTable) -> Result<Routing, String> {
        (0..table.operators())
            .map(|op| {
                (0..KEY_GROUPS)
                    .map(|kg| {
                        let o = table.owner(op as u16, kg);
                        let i = self
                            .workers
                            .iter()
                            .position(|&w| w == o.worker)
                            .ok_or_else(|| format!("worker {} is not in the job", o.worker))?;
                        Ok(self.slot(i, o.executor as usize))
                    })
                    .collect()
            })
            .collect()
    }

    /// Checks that every slot has a 16-bit number other than [`INGRESS_SLOT`].
    pub fn check_count(&self) -> Result<(), String> {
        if self.is_empty() || self.len() >= INGRESS_SLOT as usize {
            return Err(format!(
                "{} workers × {} executors = {} executor slots; frames number slots in 16 \
                 bits, so at most {}",
                self.workers.len(),
                self.executors,
                self.len(),
                INGRESS_SLOT - 1
            ));
        }
        Ok(())
    }

    /// Checks a slot routing: every operator has every key group, every owner is a slot.
    pub fn check(&self, routing: &Routing, operators: usize) -> Result<(), String> {
        self.check_count()?;
        if routing.len() != operators {
            return Err(format!(
                "routing for {} operators, the app has {operators}",
                routing.len()
            ));
        }
        for (op, row) in routing.iter().enumerate() {
            if row.len() != KEY_GROUPS as usize {
                return Err(format!(
                    "operator {op}: {} key groups, not {KEY_GROUPS}",
                    row.len()
                ));
            }
            if let Some(s) = row.iter().find(|&&s| s >= self.len()) {
                return Err(format!(
                    "operator {op}: slot {s} of a cluster of {} slots",
                    self.len()
                ));
            }
        }
        Ok(())
    }
}

/// Flattens a slot routing into `[op * KEY_GROUPS + kg] → slot`, the executors' form.
pub fn flatten(routing: &Routing) -> Vec<u16> {
    routing
        .iter()
        .flat_map(|row| row.iter().map(|&s| s as u16))
        .collect()
}

/// The protocol peer a frame's `source` names.
#[inline]
pub fn peer_of(source: u16) -> Peer {
    if source == crate::request::INGRESS_SLOT {
        Peer::Ingress
    } else {
        Peer::Worker(source as usize)
    }
}

/// Writes one control frame into `out` (resized to fit).
pub fn control_frame(
    kind: u16,
    epoch: u64,
    source: u16,
    dest: u16,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    let header = RequestHeader {
        operator: kind,
        flags: FLAG_CONTROL,
        epoch: epoch as u16,
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

fn write_groups(w: &mut Writer, groups: &[usize]) {
    w.u32(groups.len() as u32);
    for &g in groups {
        w.u16(g as u16);
    }
}

fn read_groups(r: &mut Reader) -> Result<Vec<usize>, String> {
    let n = r.len()?;
    (0..n)
        .map(|_| {
            let g = r.u16()?;
            if g >= KEY_GROUPS {
                return Err(format!("key group {g} out of range"));
            }
            Ok(g as usize)
        })
        .collect()
}

/// A seal's body.
pub fn seal_body(operator: usize, key_groups: &[usize]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u16(operator as u16);
    write_groups(&mut w, key_groups);
    w.0
}

/// Reads a seal's body.
pub fn read_seal(b: &[u8]) -> Result<(usize, Vec<usize>), String> {
    let mut r = Reader::new(b);
    Ok((r.u16()? as usize, read_groups(&mut r)?))
}

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

fn write_set(w: &mut Writer, s: &BTreeSet<usize>) {
    w.u32(s.len() as u32);
    for &x in s {
        w.u32(x as u32);
    }
}

fn read_set(r: &mut Reader) -> Result<BTreeSet<usize>, String> {
    let n = r.len()?;
    (0..n).map(|_| Ok(r.u32()? as usize)).collect()
}

/// A routing table, per operator as runs of equal owners or, when shorter, one `u16` slot
/// per key group (a scattered placement has no runs).
fn write_routing(w: &mut Writer, routing: &Routing) {
    w.u32(routing.len() as u32);
    for row in routing {
        let mut runs: Vec<(u16, u16)> = Vec::new();
        for &s in row {
            match runs.last_mut() {
                Some((n, last)) if *last == s as u16 => *n += 1,
                _ => runs.push((1, s as u16)),
            }
        }
        if runs.len() * 4 < row.len() * 2 {
            w.u8(0).u32(runs.len() as u32);
            for (n, s) in runs {
                w.u16(n).u16(s);
            }
        } else {
            w.u8(1);
            for &s in row {
                w.u16(s as u16);
            }
        }
    }
}

fn read_routing(r: &mut Reader) -> Result<Routing, String> {
    let ops = r.len()?;
    let kgs = KEY_GROUPS as usize;
    let mut routing = Vec::with_capacity(ops);
    for op in 0..ops {
        let mut row = Vec::with_capacity(kgs);
        match r.u8()? {
            0 => {
                let runs = r.len()?;
                for _ in 0..runs {
                    let n = r.u16()? as usize;
                    let s = r.u16()? as usize;
                    if row.len() + n > kgs {
                        return Err(format!("operator {op}: more than {kgs} key groups"));
                    }
                    row.extend(std::iter::repeat_n(s, n));
                }
            }
            1 => {
                for _ in 0..kgs {
                    row.push(r.u16()? as usize);
                }
            }
            m => return Err(format!("operator {op}: unknown routing encoding {m}")),
        }
        if row.len() != kgs {
            return Err(format!("operator {op}: {} key groups", row.len()));
        }
        routing.push(row);
    }
    Ok(routing)
}

/// A worker's plans: the new table once, then each of its slots' parts.
pub fn encode_plans(epoch: u64, routing: &Routing, parts: &[(usize, &Assignment)]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(epoch);
    write_routing(&mut w, routing);
    if let Some((_, a)) = parts.first() {
        w.u32(a.upstream_old.len() as u32);
        for s in a.upstream_old.iter() {
            write_set(&mut w, s);
        }
    } else {
        w.u32(0);
    }
    w.u32(parts.len() as u32);
    for (slot, a) in parts {
        w.u32(*slot as u32).u32(a.plan.sends.len() as u32);
        for t in &a.plan.sends {
            w.u16(t.operator as u16).u32(t.to as u32);
            write_groups(&mut w, &t.key_groups);
        }
        write_set(&mut w, &a.plan.markers_to);
        write_set(&mut w, &a.plan.hear_from);
        w.u8(a.plan.hear_from_ingress as u8);
        write_set(&mut w, &a.fence_to);
        write_set(&mut w, &a.fence_from);
    }
    w.0
}

/// Reads a worker's plans: `(slot, assignment)` per slot.
pub fn decode_plans(b: &[u8]) -> Result<Vec<(usize, Assignment)>, String> {
    let mut r = Reader::new(b);
    let epoch = r.u64()?;
    let routing = Arc::new(read_routing(&mut r)?);
    let n = r.len()?;
    let upstream_old: Arc<Vec<BTreeSet<usize>>> =
        Arc::new((0..n).map(|_| read_set(&mut r)).collect::<Result<_, _>>()?);
    let n = r.len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let slot = r.u32()? as usize;
        let k = r.len()?;
        let mut sends = Vec::with_capacity(k);
        for _ in 0..k {
            let operator = r.u16()? as usize;
            let to = r.u32()? as usize;
            sends.push(Transfer {
                operator,
                to,
                key_groups: read_groups(&mut r)?,
            });
        }
        let plan = WorkerPlan {
            sends,
            markers_to: read_set(&mut r)?,
            hear_from: read_set(&mut r)?,
            hear_from_ingress: r.u8()? != 0,
        };
        out.push((
            slot,
            Assignment {
                epoch,
                routing: Arc::clone(&routing),
                plan,
                fence_to: read_set(&mut r)?,
                fence_from: read_set(&mut r)?,
                upstream_old: Arc::clone(&upstream_old),
            },
        ));
    }
    Ok(out)
}

/// A slot's completion report.
pub fn encode_report(r: &WorkerReport) -> Vec<u8> {
    let mut w = Writer::default();
    w.u32(r.worker as u32)
        .u64(r.epoch)
        .u64(r.pause_ns)
        .u64(r.received_queued)
        .u64(r.forwarded)
        .u64(r.held)
        .u64(r.gated)
        .u64(r.early);
    w.0
}

/// Reads a completion report.
pub fn decode_report(b: &[u8]) -> Result<WorkerReport, String> {
    let mut r = Reader::new(b);
    Ok(WorkerReport {
        worker: r.u32()? as usize,
        epoch: r.u64()?,
        pause_ns: r.u64()?,
        received_queued: r.u64()?,
        forwarded: r.u64()?,
        held: r.u64()?,
        gated: r.u64()?,
        early: r.u64()?,
    })
}

fn peer_code(p: &Peer) -> u32 {
    match p {
        Peer::Ingress => u32::MAX,
        Peer::Worker(w) => *w as u32,
    }
}

/// A slot's progress: what it still waits for.
pub fn encode_progress(slot: usize, epoch: u64, w: &Waiting) -> Vec<u8> {
    let mut b = Writer::default();
    b.u32(slot as u32)
        .u64(epoch)
        .u8(w.draining as u8)
        .u32(w.markers_from.len() as u32);
    for p in &w.markers_from {
        b.u32(peer_code(p));
    }
    b.u32(w.state_or_seal_from.len() as u32);
    for &s in &w.state_or_seal_from {
        b.u32(s as u32);
    }
    b.0
}

/// Reads a progress message: `(slot, epoch, waiting)`.
pub fn decode_progress(b: &[u8]) -> Result<(usize, u64, Waiting), String> {
    let mut r = Reader::new(b);
    let slot = r.u32()? as usize;
    let epoch = r.u64()?;
    let draining = r.u8()? != 0;
    let n = r.len()?;
    let markers_from = (0..n)
        .map(|_| {
            Ok(match r.u32()? {
                u32::MAX => Peer::Ingress,
                w => Peer::Worker(w as usize),
            })
        })
        .collect::<Result<_, String>>()?;
    let n = r.len()?;
    let state_or_seal_from = (0..n)
        .map(|_| Ok(r.u32()? as usize))
        .collect::<Result<_, String>>()?;
    Ok((
        slot,
        epoch,
        Waiting {
            draining,
            markers_from,
            state_or_seal_from,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_controlplane::migration::plan;
    use clasp_controlplane::protocol::assignments;

    fn routing(ops: usize, f: impl Fn(usize, usize) -> usize) -> Routing {
        (0..ops)
            .map(|o| (0..KEY_GROUPS as usize).map(|g| f(o, g)).collect())
            .collect()
    }

    #[test]
    fn plans_round_trip() {
        let old = routing(3, |_, g| g % 2);
        let new = Arc::new(routing(
            3,
            |o, g| if o == 0 { g * 4 / 1024 } else { (g + o) % 4 },
        ));
        let preds = vec![vec![], vec![0], vec![1]];
        let p = plan(1, &old, &new, &preds);
        let parts = assignments(&p, &old, &new, &preds, 4);
        let refs: Vec<(usize, &Assignment)> = parts.iter().enumerate().collect();
        let b = encode_plans(1, &new, &refs);
        let back = decode_plans(&b).unwrap();
        assert_eq!(back.len(), 4);
        for (slot, a) in back {
            assert_eq!(a, parts[slot]);
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
            worker: 3,
            epoch: 9,
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
            markers_from: vec![Peer::Ingress, Peer::Worker(4)],
            state_or_seal_from: vec![1, 2],
        };
        assert_eq!(
            decode_progress(&encode_progress(7, 9, &w)).unwrap(),
            (7, 9, w)
        );
    }

    #[test]
    fn slots_map_tables() {
        let s = Slots {
            workers: vec![4, 7],
            executors: 2,
        };
        let t = RoutingTable::spread(2, &[4, 7], 2, crate::routing::Spread::Even);
        let r = s.routing_of(&t).unwrap();
        assert_eq!(r[0][0], 0);
        assert_eq!(r[1][1023], 3);
        s.check(&r, 2).unwrap();
        assert!(s.check(&r, 3).is_err());
        assert_eq!(s.worker_of(3), Some(7));
        assert_eq!(flatten(&r).len(), 2048);
    }
}
