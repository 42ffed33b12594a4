//! Dropping a transport: cancel everything, wait for the kernel to let go of every buffer,
//! or leak the buffers.
//!
//! Why: a buffer belongs to its operation until the operation's final completion arrives; the
//! kernel may write a receive buffer until then. So a dropped transport shuts its sockets down,
//! cancels every operation and waits (bounded by [`DROP_DRAIN_MS`]) for every final
//! completion before any buffer is freed. Where that cannot be done — the ring belongs to
//! another thread, or the completions do not come in time — it leaks the buffers rather than
//! free memory the kernel could still write.

use super::event_loop::{Transport, push_sqe, thread_token};
use super::ms;
use super::op::Op;
use io_uring::{cqueue, opcode, types};
use std::os::fd::AsRawFd;
use std::time::Instant;
use tracing::warn;

/// Longest wait for outstanding completions when the transport is dropped.
const DROP_DRAIN_MS: u64 = 2_000;

impl Transport {
    /// Waits (bounded) for every operation's final completion; whether all arrived. Called
    /// by the owning thread at drop, after everything was cancelled.
    fn drain(&mut self) -> bool {
        let deadline = Instant::now() + ms(DROP_DRAIN_MS);
        while self.inflight > 0 && Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            if let Err(e) = self.ring.submitter().submit_with_args(1, &args)
                && e.raw_os_error() == Some(libc::EEXIST)
            {
                // Not the ring's owner after all (a thread token reused by a new thread):
                // the completions cannot be awaited here.
                return false;
            }
            let mut done = Vec::new();
            for cqe in self.ring.completion() {
                done.push((cqe.user_data(), cqe.flags()));
            }
            for (ud, flags) in done {
                let multishot_more = matches!(Op::from_user_data(ud), Some(Op::Recv(_)))
                    && self.bufs.is_some()
                    && cqueue::more(flags);
                if !multishot_more {
                    self.inflight = self.inflight.saturating_sub(1);
                }
            }
        }
        self.inflight == 0
    }

    /// Keeps every buffer the kernel might still write: never freed.
    fn leak_buffers(&mut self) {
        std::mem::forget(self.bufs.take());
        std::mem::forget(std::mem::take(&mut self.conns));
        let b = std::mem::replace(&mut self.wake_buf, Box::new([0; 8]));
        std::mem::forget(b);
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        for c in self.conns.iter().flatten() {
            // SAFETY: an open socket; shutdown takes no memory.
            unsafe { libc::shutdown(c.fd.as_raw_fd(), libc::SHUT_RDWR) };
        }
        if self.single_issuer && self.owner == 0 {
            // Never enabled: nothing was submitted, so the kernel owns no buffer.
            return;
        }
        if self.single_issuer && self.owner != thread_token() {
            // Only the owning thread may enter a single-issuer ring, so the final completions
            // cannot be awaited here: keep every buffer the kernel might still write.
            warn!(
                ops = self.inflight,
                "transport dropped on a thread other than the one that polled it; \
                 leaking its receive buffers"
            );
            self.leak_buffers();
            return;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(Op::Cancel.user_data());
        let _ = push_sqe(&mut self.ring, &mut self.inflight, &cancel);
        if !self.drain() {
            warn!(
                ops = self.inflight,
                "io_uring operations still in flight at drop; leaking their buffers"
            );
            self.leak_buffers();
        }
    }
}
