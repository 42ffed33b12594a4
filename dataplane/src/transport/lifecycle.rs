//! A connection's life in the event loop: connecting and accepting (handshakes on helper
//! threads), taking a finished handshake into the connection table, closing, and freeing.
//!
//! A connection is named by its slot in the table and a generation. Closing one shuts its
//! socket down and cancels its operations at once, but its buffers live on until its last
//! operation completes (`Conn::ops == 0`); only then is the slot freed for reuse, under a new
//! generation, so a late completion is never mistaken for the new connection's.

use super::auth::Welcome;
use super::conn::credit::Credit;
use super::conn::recv::RecvHalf;
use super::conn::send::SendHalf;
use super::conn::{Conn, ConnState};
use super::event_loop::{Result, Transport, push_sqe};
use super::framing::BadFrame;
use super::handshake::{Link, PeerSlot, Setup, answer_within};
use super::op::{GEN_MASK, Op};
use super::wire::{self, NET_HEADER_BYTES};
use super::{Direction, Event, MAX_PEER_ID, MAX_PENDING_HANDSHAKES, PeerId, TransportError, ms};
use io_uring::{opcode, types};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// Why a connection is closed (logged, and the reason of its [`Event::PeerLost`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum CloseReason {
    /// Its input was refused.
    #[error(transparent)]
    BadFrame(#[from] BadFrame),
    /// A multishot receive completed without a provided buffer.
    #[error("receive completion without a buffer")]
    NoBuffer,
    /// End of stream from the peer.
    #[error("the peer closed the connection")]
    PeerClosed,
    /// The receive was cancelled.
    #[error("receive cancelled")]
    RecvCancelled,
    /// The receive failed.
    #[error("receive failed: {0}")]
    RecvFailed(std::io::Error),
    /// The send failed.
    #[error("send failed: {0}")]
    SendFailed(std::io::Error),
    /// Fault injection cut it.
    #[error("fault injection: cut after {batches} batches / {bytes} bytes")]
    Cut {
        /// Batches sent on it.
        batches: u64,
        /// Bytes sent on it.
        bytes: u64,
    },
}

impl Transport {
    /// Whether our connection to `peer` (the one we send on) is up.
    pub fn is_connected(&self, peer: PeerId) -> bool {
        matches!(
            self.peers.get(peer as usize).map(|p| &p.out),
            Some(Link::Up { .. })
        )
    }

    pub(super) fn peer_slot(&mut self, peer: PeerId) -> Result<&mut PeerSlot> {
        if peer > MAX_PEER_ID {
            return Err(TransportError::UnknownPeer(peer));
        }
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, PeerSlot::default);
        }
        Ok(&mut self.peers[i])
    }

    /// Starts connecting to `peer` at `addr` (retried for `connect_timeout_ms`, then
    /// authenticated on a helper thread). Progress arrives as [`Event`]s.
    pub fn connect(&mut self, peer: PeerId, addr: SocketAddr) -> Result<()> {
        self.connect_within(peer, addr, Duration::MAX).map(|_| ())
    }

    /// [`connect`](Self::connect), retried for at most `limit` (when it is shorter than
    /// `connect_timeout_ms`). Returns the instant by which the attempt will have said how it
    /// ended (an [`Event::Connected`] or [`Event::ConnectFailed`]): a caller that waits that
    /// long learns why it failed — a refusal says more than a timeout.
    pub fn connect_within(
        &mut self,
        peer: PeerId,
        addr: SocketAddr,
        limit: Duration,
    ) -> Result<Instant> {
        let connect_timeout = ms(self.cfg.limits.connect_timeout_ms).min(limit);
        let handshake_timeout = ms(self.cfg.limits.handshake_timeout_ms);
        let answer_by = Instant::now() + answer_within(connect_timeout, handshake_timeout);
        if peer == self.cfg.id {
            return Err(TransportError::Config(format!(
                "peer {peer} is this transport"
            )));
        }
        let slot = self.peer_slot(peer)?;
        if matches!(slot.out, Link::Up { .. } | Link::Connecting) {
            return Ok(answer_by);
        }
        slot.out = Link::Connecting;
        self.handshaker()
            .spawn_connect(peer, addr, connect_timeout)?;
        Ok(answer_by)
    }

    /// A connection the listener accepted: authenticated on a helper thread in a handshake
    /// slot. When every slot is taken, the oldest connection without a complete Hello is
    /// dropped to make room (counted as refused); if every one has sent its Hello, the
    /// newcomer is refused.
    pub(super) fn accepted(&mut self, stream: TcpStream) {
        let addr = stream.peer_addr().ok();
        let admitted = match self.handshakes.admit(&stream) {
            Ok(Some(a)) => a,
            Ok(None) => {
                let reason = format!(
                    "all {MAX_PENDING_HANDSHAKES} handshake slots hold connections past their hello"
                );
                return self.refuse(addr, reason);
            }
            Err(e) => return self.refuse(addr, format!("cannot take a handshake slot: {e}")),
        };
        if let Some(victim) = admitted.evicted {
            let reason = format!(
                "dropped to make room: all {MAX_PENDING_HANDSHAKES} handshake slots were taken \
                 and this was the oldest connection without a complete hello"
            );
            self.refuse(victim, reason);
        }
        let l = &self.cfg.limits;
        let grant = Welcome {
            data_credit_bytes: l.data_credit_bytes,
            control_credit_bytes: l.control_credit_bytes,
            frame_bytes_max: l.frame_bytes_max as u32,
        };
        if let Err(e) = self.handshaker().spawn_accept(stream, grant, admitted.slot) {
            warn!(error = %e, "cannot spawn a handshake thread; connection dropped");
        }
    }

    /// A connection refused before it authenticated: counted, logged at most once per second
    /// per source address, and reported as an [`Event::Refused`] (not a fault: the cluster is
    /// unaffected).
    fn refuse(&mut self, addr: Option<SocketAddr>, reason: String) {
        self.refuse_as(addr, reason, false);
    }

    /// Refuses a connection; `id_taken`: an authenticated one under a connected peer's id.
    fn refuse_as(&mut self, addr: Option<SocketAddr>, reason: String, id_taken: bool) {
        self.counters.refused += 1;
        let log = match id_taken {
            true => &mut self.taken_refusals,
            false => &mut self.refusals,
        };
        log.note(Instant::now(), addr, &reason);
        self.events.push_back(Event::Refused { addr, reason });
    }

    /// Takes finished handshakes from the helper threads.
    pub(super) fn drain_setups(&mut self) -> Result<bool> {
        let mut any = false;
        while let Ok(s) = self.setup_rx.try_recv() {
            any = true;
            match s {
                Setup::Refused {
                    addr,
                    reason,
                    id_taken,
                } => self.refuse_as(addr, reason, id_taken),
                Setup::ConnectFailed {
                    peer,
                    reason,
                    id_taken,
                    refused,
                } => {
                    warn!(peer, %reason, "connecting to peer failed");
                    if let Ok(p) = self.peer_slot(peer) {
                        p.out = Link::Lost(reason.clone());
                    }
                    self.events.push_back(Event::ConnectFailed {
                        peer,
                        reason,
                        id_taken,
                        refused,
                    });
                }
                Setup::Connected {
                    peer,
                    stream,
                    direction,
                    welcome,
                } => {
                    self.add_conn(peer, stream, direction, welcome)?;
                }
            }
        }
        Ok(any)
    }

    /// Takes an authenticated stream into the connection table and arms its receive.
    fn add_conn(
        &mut self,
        peer: PeerId,
        stream: TcpStream,
        direction: Direction,
        welcome: Option<Welcome>,
    ) -> Result<()> {
        if matches!(self.peer_slot(peer)?.link_mut(direction), Link::Up { .. }) {
            let reason = format!("peer {peer} already has an {direction:?} connection");
            self.refuse_as(stream.peer_addr().ok(), reason, true);
            return Ok(());
        }
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let w = welcome.unwrap_or(Welcome {
            data_credit_bytes: 0,
            control_credit_bytes: 0,
            frame_bytes_max: 0,
        });
        let limits = &self.cfg.limits;
        let lone_limit_bytes = (w.frame_bytes_max as usize).min(w.data_credit_bytes as usize);
        let batch_limit_bytes = limits.batch_bytes_max.min(lone_limit_bytes);
        if direction == Direction::Outbound
            && batch_limit_bytes
                < NET_HEADER_BYTES + wire::entry_bytes(wire::MIN_REQUEST_FRAME_BYTES)
        {
            let reason = format!("peer {peer} grants too little credit ({w:?}) for one request");
            warn!(peer, %reason, "closing connection");
            self.events.push_back(Event::ConnectFailed {
                peer,
                reason,
                id_taken: false,
                refused: false,
            });
            return Ok(());
        }
        let gen_ = self.next_gen & GEN_MASK;
        self.next_gen = self.next_gen.wrapping_add(1);
        let recv_buffer_bytes = match self.bufs {
            Some(_) => 0,
            None => limits.recv_buffer_bytes,
        };
        let conn = Conn {
            fd: OwnedFd::from(stream),
            gen_,
            peer,
            direction,
            state: ConnState::Open,
            ops: 0,
            send: SendHalf::new(
                batch_limit_bytes,
                lone_limit_bytes,
                limits.send_bytes_max,
                self.now,
            ),
            recv: RecvHalf::new(recv_buffer_bytes),
            credit: Credit::new(direction, &w, limits),
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                debug_assert!(self.conns[s].is_none(), "a free slot in use");
                self.conns[s] = Some(conn);
                s
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        *self.peer_slot(peer)?.link_mut(direction) = Link::Up { slot, gen_ };
        if direction == Direction::Inbound {
            self.inbound_up.set(peer, true);
        }
        debug!(peer, ?direction, "connection up");
        self.events.push_back(Event::PeerUp { peer, direction });
        self.arm_recv(slot)
    }

    /// Closes a connection: logs, reports, shuts the socket down and cancels its
    /// operations. Its buffers live until its last completion (`free_if_done`).
    pub(super) fn close_conn(&mut self, slot: usize, reason: CloseReason) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        if conn.is_closing() {
            return;
        }
        conn.state = ConnState::Closing;
        let (peer, direction, fd) = (conn.peer, conn.direction, conn.fd.as_raw_fd());
        let ops = conn.ops;
        // A peer that hangs up is how every run ends: worth a line only when asked for.
        if matches!(reason, CloseReason::PeerClosed | CloseReason::RecvCancelled) {
            info!(peer, ?direction, %reason, "closing connection");
        } else {
            warn!(peer, ?direction, %reason, "closing connection");
        }
        if matches!(reason, CloseReason::BadFrame(_)) {
            self.counters.bad_frames += 1;
        }
        // SAFETY: `fd` is the connection's open socket; shutdown takes no memory.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        if ops > 0 {
            let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
                .build()
                .user_data(Op::Cancel.user_data());
            if push_sqe(&mut self.ring, &mut self.inflight, &e).is_err() {
                debug!("cancel not queued; shutdown ends the operations");
            }
        }
        let reason = reason.to_string();
        *self.peers[peer as usize].link_mut(direction) = Link::Lost(reason.clone());
        if direction == Direction::Inbound {
            self.inbound_up.set(peer, false);
        }
        self.events.push_back(Event::PeerLost {
            peer,
            direction,
            reason,
        });
    }

    /// Frees a closing connection's slot once its last operation has completed.
    pub(super) fn free_if_done(&mut self, slot: usize) {
        if let Some(Some(c)) = self.conns.get(slot)
            && c.is_closing()
            && c.ops == 0
        {
            self.conns[slot] = None;
            self.free_slots.push(slot);
        }
    }
}
