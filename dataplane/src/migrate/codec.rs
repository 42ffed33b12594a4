//! Wire forms of what travels on the driver's control channel during a migration: a worker's
//! plans (the new table once, run-length or plain per operator, then each slot's part), a
//! slot's completion report, and its progress.

use super::{read_groups, write_groups};
use crate::cluster::{Reader, Writer};
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::assignment::Assignment;
use clasp_protocol::ids::{Epoch, Slot};
use clasp_protocol::message::Peer;
use clasp_protocol::plan::{Transfer, WorkerPlan};
use clasp_protocol::routing::RoutingTable;
use clasp_protocol::worker::{Waiting, WorkerReport};
use std::collections::BTreeSet;
use std::sync::Arc;

fn write_set(w: &mut Writer, s: &BTreeSet<Slot>) {
    w.u32(s.len() as u32);
    for x in s {
        w.u32(x.0);
    }
}

fn read_set(r: &mut Reader) -> Result<BTreeSet<Slot>, String> {
    let n = r.len()?;
    (0..n).map(|_| Ok(Slot(r.u32()?))).collect()
}

/// A routing table, per operator as runs of equal owners or, when shorter, one `u16` slot
/// per key group (a scattered placement has no runs).
fn write_routing(w: &mut Writer, routing: &RoutingTable) {
    w.u32(routing.operators() as u32);
    for row in routing.rows() {
        let mut runs: Vec<(u16, u16)> = Vec::new();
        for s in row {
            match runs.last_mut() {
                Some((n, last)) if *last == s.0 as u16 => *n += 1,
                _ => runs.push((1, s.0 as u16)),
            }
        }
        if runs.len() * 4 < row.len() * 2 {
            w.u8(0).u32(runs.len() as u32);
            for (n, s) in runs {
                w.u16(n).u16(s);
            }
        } else {
            w.u8(1);
            for s in row {
                w.u16(s.0 as u16);
            }
        }
    }
}

fn read_routing(r: &mut Reader, epoch: Epoch) -> Result<RoutingTable, String> {
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
                    let s = Slot(u32::from(r.u16()?));
                    if row.len() + n > kgs {
                        return Err(format!("operator {op}: more than {kgs} key groups"));
                    }
                    row.extend(std::iter::repeat_n(s, n));
                }
            }
            1 => {
                for _ in 0..kgs {
                    row.push(Slot(u32::from(r.u16()?)));
                }
            }
            m => return Err(format!("operator {op}: unknown routing encoding {m}")),
        }
        if row.len() != kgs {
            return Err(format!("operator {op}: {} key groups", row.len()));
        }
        routing.push(row);
    }
    RoutingTable::from_rows(epoch, routing).map_err(|e| e.to_string())
}

/// A worker's plans: the new table once, then each of its slots' parts.
/// The table's epoch is the plans'.
pub fn encode_plans(routing: &RoutingTable, parts: &[(Slot, &Assignment)]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(routing.epoch().0);
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
        w.u32(slot.0).u32(a.plan.sends.len() as u32);
        for t in &a.plan.sends {
            w.u16(t.operator as u16).u32(t.to.0);
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
pub fn decode_plans(b: &[u8]) -> Result<Vec<(Slot, Assignment)>, String> {
    let mut r = Reader::new(b);
    let epoch = Epoch(r.u64()?);
    let routing = Arc::new(read_routing(&mut r, epoch)?);
    let n = r.len()?;
    let upstream_old: Arc<Vec<BTreeSet<Slot>>> =
        Arc::new((0..n).map(|_| read_set(&mut r)).collect::<Result<_, _>>()?);
    let n = r.len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let slot = Slot(r.u32()?);
        let k = r.len()?;
        let mut sends = Vec::with_capacity(k);
        for _ in 0..k {
            let operator = r.u16()? as usize;
            let to = Slot(r.u32()?);
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
    w.u32(r.worker.0)
        .u64(r.epoch.0)
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
        worker: Slot(r.u32()?),
        epoch: Epoch(r.u64()?),
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
        Peer::Worker(w) => w.0,
    }
}

/// A slot's progress: what it still waits for.
pub fn encode_progress(slot: Slot, epoch: Epoch, w: &Waiting) -> Vec<u8> {
    let mut b = Writer::default();
    b.u32(slot.0)
        .u64(epoch.0)
        .u8(w.draining as u8)
        .u32(w.markers_from.len() as u32);
    for p in &w.markers_from {
        b.u32(peer_code(p));
    }
    b.u32(w.state_or_seal_from.len() as u32);
    for s in &w.state_or_seal_from {
        b.u32(s.0);
    }
    b.0
}

/// Reads a progress message: `(slot, epoch, waiting)`.
pub fn decode_progress(b: &[u8]) -> Result<(Slot, Epoch, Waiting), String> {
    let mut r = Reader::new(b);
    let slot = Slot(r.u32()?);
    let epoch = Epoch(r.u64()?);
    let draining = r.u8()? != 0;
    let n = r.len()?;
    let markers_from = (0..n)
        .map(|_| {
            Ok(match r.u32()? {
                u32::MAX => Peer::Ingress,
                w => Peer::Worker(Slot(w)),
            })
        })
        .collect::<Result<_, String>>()?;
    let n = r.len()?;
    let state_or_seal_from = (0..n)
        .map(|_| Ok(Slot(r.u32()?)))
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
