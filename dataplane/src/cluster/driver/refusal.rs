//! Joins the driver does not take, said to the joiner.
//!
//! A worker that asks to join with an id the run did not reserve, one that already left, or
//! one whose turn has not come (joins are taken in the order of the reserved ids) would
//! otherwise wait for a job until its `--job-timeout-s` with nothing said. The driver answers
//! `JoinRefused` instead: it connects to the address the joiner gave (the transport sends only
//! on connections it opened) and sends the reason once the link is up. `later` tells the
//! joiner whether asking again may succeed (its turn may come); if not, it exits with the
//! reason. A refusal never fails the run: a joiner that cannot be reached is dropped.

use super::Driver;
use crate::message::{CONTROL_KIND, Message, encode};
use crate::transport::PeerId;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;

/// Refusals on their way to joiners.
#[derive(Debug, Default)]
pub(super) struct Refusals {
    /// Joiners being connected to, with the encoded refusal and when it was decided.
    pending: Vec<(PeerId, Vec<u8>, Instant)>,
    /// Joiners already refused (logged once; their connections closing is not a fault).
    said: BTreeSet<PeerId>,
}

impl Refusals {
    /// Whether `peer` was refused a join (its connection closing is expected).
    pub(super) fn refused(&self, peer: PeerId) -> bool {
        self.said.contains(&peer)
    }

    /// `peer`, refused before, is being taken: no refusal of it is pending or remembered.
    pub(super) fn forget(&mut self, peer: PeerId) {
        self.said.remove(&peer);
        self.pending.retain(|p| p.0 != peer);
    }
}

impl Driver<'_> {
    /// Tells worker `from`, listening at `addr`, that it is not taken (module docs).
    pub(super) fn refuse_join(
        &mut self,
        from: PeerId,
        addr: SocketAddr,
        reason: String,
        later: bool,
    ) {
        let r = &mut self.joins.refusals;
        if r.said.insert(from) {
            tracing::warn!("worker {from} asked to join: {reason}; refused");
        } else {
            tracing::debug!("worker {from} asked to join again: {reason}; refused");
        }
        if r.pending.iter().any(|p| p.0 == from) {
            return;
        }
        let body = match encode(&Message::JoinRefused { reason, later }) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("the refusal to worker {from}: {e}; not sent");
                return;
            }
        };
        match self.t.connect(from, addr) {
            Ok(()) => r.pending.push((from, body, Instant::now())),
            Err(e) => tracing::debug!("worker {from} at {addr}, refused: {e}"),
        }
    }

    /// Sends the refusals whose links are up; drops those not up within the ready timeout.
    pub(super) fn send_refusals(&mut self) {
        if self.joins.refusals.pending.is_empty() {
            return;
        }
        let ready_timeout = self.cfg.ready_timeout;
        let mut pending = std::mem::take(&mut self.joins.refusals.pending);
        pending.retain(|(peer, body, since)| {
            if self.t.is_connected(*peer) {
                match self.t.send_control(*peer, CONTROL_KIND, body) {
                    Ok(true) => return false,
                    // No credit yet: the next turn.
                    Ok(false) => {}
                    Err(e) => {
                        tracing::debug!("the refusal to worker {peer}: {e}");
                        return false;
                    }
                }
            }
            since.elapsed() < ready_timeout
        });
        self.joins.refusals.pending = pending;
    }
}
