//! The receive path of the event loop: arming a connection's receive, handing each receive
//! completion's bytes to [framing](super::framing), and offering held deliveries again.
//!
//! With a provided-buffer ring one multishot receive serves a connection for its whole life:
//! the kernel picks a buffer per completion and the loop hands it back at once after framing
//! has used it. Without one, a plain receive into the connection's own buffer is re-armed
//! after each completion.

use super::Inbound;
use super::bufring::BGID;
use super::conn::recv::{RecvOp, Tally};
use super::event_loop::{Result, Transport, push_sqe};
use super::framing::{self, Cx};
use super::lifecycle::CloseReason;
use super::op::{ConnRef, Op};
use io_uring::{cqueue, opcode, types};
use std::os::fd::AsRawFd;
use tracing::debug;

impl Transport {
    /// Submits a receive on `slot` unless one is armed or the connection is closing.
    pub(super) fn arm_recv(&mut self, slot: usize) -> Result<()> {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(());
        };
        if conn.recv.op == RecvOp::Armed || conn.is_closing() {
            return Ok(());
        }
        let fd = types::Fd(conn.fd.as_raw_fd());
        let ud = Op::Recv(conn.conn_ref(slot)).user_data();
        let e = if self.bufs.is_some() {
            opcode::RecvMulti::new(fd, BGID).build().user_data(ud)
        } else {
            let buf = &mut conn.recv.buf;
            opcode::Recv::new(fd, buf.as_mut_ptr(), buf.len() as u32)
                .build()
                .user_data(ud)
        };
        conn.recv.op = RecvOp::Armed;
        conn.ops += 1;
        // The kernel owns the connection's receive buffer (plain) or picks provided buffers
        // (multishot) until the final completion of this receive; `Conn` is not freed while
        // `ops > 0`.
        push_sqe(&mut self.ring, &mut self.inflight, &e)
    }

    /// A receive completed: frame its bytes, then re-arm, or close the connection.
    pub(super) fn complete_recv(
        &mut self,
        c: ConnRef,
        res: i32,
        flags: u32,
        inbound: &mut impl Inbound,
    ) -> Result<()> {
        let multishot = self.bufs.is_some();
        let finished = !multishot || !cqueue::more(flags);
        if finished {
            self.inflight -= 1;
        }
        let bid = cqueue::buffer_select(flags);
        let conn = match self.conns.get_mut(c.slot) {
            Some(Some(conn)) if conn.gen_ == c.gen_ => conn,
            _ => {
                // Cannot happen (a Conn outlives its operations); give the buffer back anyway.
                if let (Some(b), Some(bid)) = (self.bufs.as_mut(), bid) {
                    b.recycle(bid);
                }
                return Ok(());
            }
        };
        if finished {
            debug_assert_eq!(conn.recv.op, RecvOp::Armed);
            conn.ops -= 1;
            conn.recv.op = RecvOp::Idle;
        }
        let mut close_reason = None;
        if res > 0 {
            let len = res as usize;
            let data: &[u8] = match (self.bufs.as_ref(), bid) {
                // SAFETY: the kernel selected `bid` for this completion and wrote `len` bytes;
                // it is recycled only after this slice's last use below.
                (Some(b), Some(bid)) => unsafe { b.buffer(bid, len) },
                (Some(_), None) => {
                    close_reason = Some(CloseReason::NoBuffer);
                    &[]
                }
                // SAFETY: this plain receive into the connection's buffer has completed (it is
                // its final completion), so the kernel no longer writes it; the length is
                // clamped.
                (None, _) => unsafe {
                    let buf = &conn.recv.buf;
                    std::slice::from_raw_parts(buf.as_ptr(), len.min(buf.len()))
                },
            };
            if !conn.is_closing() && close_reason.is_none() {
                let mut cx = Cx {
                    frame_bytes_max: self.cfg.limits.frame_bytes_max,
                    tally: Tally {
                        counters: &mut self.peers[conn.peer as usize].counters,
                        delivered: &mut self.delivered_this_turn,
                        now: self.now,
                    },
                    scratch: &mut self.scratch,
                };
                if let Err(e) = framing::on_bytes(conn, data, &mut cx, inbound) {
                    close_reason = Some(e.into());
                }
            }
            if let (Some(b), Some(bid)) = (self.bufs.as_mut(), bid) {
                b.recycle(bid);
            }
        } else if res == 0 {
            close_reason = Some(CloseReason::PeerClosed);
        } else if -res == libc::ENOBUFS {
            debug!("provided buffers ran out; re-arming the receive");
        } else if -res == libc::ECANCELED {
            close_reason = Some(CloseReason::RecvCancelled);
        } else {
            close_reason = Some(CloseReason::RecvFailed(std::io::Error::from_raw_os_error(
                -res,
            )));
        }
        if let Some(reason) = close_reason {
            self.close_conn(c.slot, reason);
        } else {
            self.arm_recv(c.slot)?;
        }
        self.free_if_done(c.slot);
        Ok(())
    }

    /// Offers held frames again (their ring may have room now).
    pub(super) fn retry_held(&mut self, inbound: &mut impl Inbound) -> bool {
        let mut any = false;
        for slot in 0..self.conns.len() {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.recv.held.is_empty() || conn.is_closing() {
                continue;
            }
            let before = self.delivered_this_turn;
            let mut tally = Tally {
                counters: &mut self.peers[conn.peer as usize].counters,
                delivered: &mut self.delivered_this_turn,
                now: self.now,
            };
            conn.deliver_held(&mut tally, inbound);
            any |= self.delivered_this_turn != before;
        }
        any
    }
}
