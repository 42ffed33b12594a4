//! The event loop: one io_uring, one `io_uring_enter` per turn. The send and receive paths
//! ([`super::sending`], [`super::receiving`]) and the connections' life
//! ([`super::lifecycle`]) and drop ([`super::teardown`]) are further `impl Transport` blocks
//! beside this one.
//!
//! # Operations and buffer ownership
//! Every submission names a buffer the kernel may use until that submission's *final*
//! completion (for multishot receive: the first completion without `IORING_CQE_F_MORE`):
//! - receive: multishot into the provided-buffer ring ([`BufRing`], owned by the transport),
//!   or, in the fallback, plain `recv` into the connection's own receive buffer;
//! - send: the connection's send buffer, which is not touched until the send completes;
//! - the waker's eventfd read: `wake_buf`;
//! - accept: no buffer.
//!
//! A connection being closed is shut down and its operations cancelled, but its buffers (the
//! `Conn`) live on until its last operation completes (`Conn::ops == 0`). On drop, the
//! transport cancels everything and waits for every final completion before freeing any
//! buffer; if that does not happen in time, it leaks the buffers rather than free memory the
//! kernel could still write. (monoio's rule: a buffer belongs to its operation until the
//! completion arrives.)
//!
//! # The ring
//! By default a single-issuer ring with deferred completion work (`SINGLE_ISSUER |
//! DEFER_TASKRUN | TASKRUN_FLAG`), created disabled (`R_DISABLED`) and enabled by the first
//! `poll`, so the thread that polls owns it even if another thread created the transport.
//! Data arriving for it then only queues work; the kernel runs that work (the receive into a
//! provided buffer) inside our next `io_uring_enter`, and wakes a parked `poll` once, not
//! once per packet. Before it is enabled, nothing is submitted, so the kernel owns no buffer.
//! Only the owning thread can enter the ring: a `poll` from another thread is refused, and a
//! drop on another thread cannot wait for the final completions, so it leaks the buffers.
//!
//! # A turn
//! `poll`: reap completions (receive → validate → deliver → grant credit; send done → next
//! send), retry held deliveries, flush batches that are full or old, send due credit, then one
//! `io_uring_enter` that submits all of it — and, if the turn did nothing, waits for a
//! completion, bounded by the caller's timeout and the next batch's or grant's age limit
//! (what that wake-up queues, typically the next batch's send, is submitted before `poll`
//! returns). Under load (the last waking turn delivered ≥ [`COALESCE_AFTER`]) the wait asks
//! the kernel to hold the wake-up for `Limits::park_min_wait_us`, so one wake-up takes in
//! many batches.

use super::bufring::BufRing;
use super::conn::Conn;
use super::conn::credit::grant_age;
use super::handshake::{Handshaker, InboundUp, PeerSlot, Setup};
use super::op::Op;
use super::pending::PendingHandshakes;
use super::refusals::RefusalLog;
use super::{
    Event, Inbound, MAX_PEER_ID, MAX_PENDING_HANDSHAKES, PeerCounters, PeerId, RING_ENTRIES,
    TransportConfig, TransportCounters, TransportError, Waker, ms,
};
use io_uring::{IoUring, opcode, squeue, types};
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tracing::{info, warn};

pub(super) type Result<T> = std::result::Result<T, TransportError>;

/// Most completions a coalesced park waits for before its `min_wait` has passed.
const COALESCED_WANT: usize = 256;
/// A turn that delivered at least this many requests, control messages and events marks the
/// transport busy: its next park may hold the wake-up (`Limits::park_min_wait_us`). A
/// request–response exchange (one request per turn) never does.
const COALESCE_AFTER: usize = 64;

/// The transport. Owned by the network thread (it is `Send`, not `Sync`).
pub struct Transport {
    // Dropped first: closing the ring ends every operation (Drop waits for them anyway).
    pub(super) ring: IoUring,
    pub(super) bufs: Option<BufRing>,
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) free_slots: Vec<usize>,
    pub(super) next_gen: u32,
    pub(super) peers: Vec<PeerSlot>,
    /// Which peers' inbound connections are up, for the handshake threads.
    pub(super) inbound_up: Arc<InboundUp>,
    pub(super) cfg: TransportConfig,
    local_addr: SocketAddr,
    listener: TcpListener,
    wake_fd: Arc<OwnedFd>,
    /// The kernel owns it while the eventfd read is in flight.
    pub(super) wake_buf: Box<[u8; 8]>,
    pub(super) setup_rx: mpsc::Receiver<Setup>,
    setup_tx: mpsc::Sender<Setup>,
    /// Server handshakes in progress (on helper threads), in their slots.
    pub(super) handshakes: PendingHandshakes,
    pub(super) events: VecDeque<Event>,
    /// Rate-limits the logs of refused connections.
    pub(super) refusals: RefusalLog,
    /// The same for authenticated connections under a connected peer's id, which dial again
    /// for a whole connect timeout (`refusals.rs`).
    pub(super) taken_refusals: RefusalLog,
    /// Submitted operations whose final completion has not been reaped.
    pub(super) inflight: usize,
    pub(super) scratch: rkyv::util::AlignedVec<16>,
    pub(super) counters: TransportCounters,
    pub(super) now: Instant,
    pub(super) delivered_this_turn: usize,
    /// The ring was created `R_DISABLED` for a single issuer and is enabled by the first
    /// `enter`, on the thread that will own it.
    pub(super) single_issuer: bool,
    /// The thread that enabled the ring (see [`thread_token`]); 0 until then.
    pub(super) owner: usize,
    /// Traffic is heavy: the last waking turn delivered at least [`COALESCE_AFTER`].
    busy: bool,
    /// The kernel supports `min_wait` on a wait (`IORING_FEAT_MIN_TIMEOUT`).
    min_wait: bool,
    /// How long an idle turn watches the ring before it waits in the kernel (`idle_spin.rs`).
    pub(super) idle_spin: Duration,
}

/// An id of the calling thread that costs no system call: the address of a thread-local.
pub(super) fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// The ring: preferably a single-issuer one whose completion work waits for our own `enter`
/// (no wake-up per arriving packet), enabled later by the thread that polls it. Whether it is.
fn build_ring(single_issuer: bool, recv_buffers: usize) -> Result<(IoUring, bool)> {
    let cq = RING_ENTRIES * 4 + recv_buffers as u32;
    let deferred = if single_issuer {
        IoUring::builder()
            .setup_cqsize(cq)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag()
            .setup_r_disabled()
            .build(RING_ENTRIES)
            .map_err(|e| info!("no single-issuer io_uring ({e}); using a shared one"))
            .ok()
    } else {
        None
    };
    let single_issuer = deferred.is_some();
    let ring = match deferred {
        Some(r) => r,
        None => IoUring::builder()
            .setup_cqsize(cq)
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(RING_ENTRIES)?,
    };
    if !ring.params().is_feature_ext_arg() {
        return Err(TransportError::Config(
            "this kernel's io_uring lacks IORING_FEAT_EXT_ARG (needs Linux ≥ 5.11)".into(),
        ));
    }
    Ok((ring, single_issuer))
}

/// A non-blocking eventfd for the [`Waker`].
fn new_eventfd() -> Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments; the result is checked.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if efd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: `efd` is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(efd) })
}

impl Transport {
    /// Binds the listener, sets up the ring and starts connecting to the configured peers.
    pub fn start(cfg: TransportConfig) -> Result<Transport> {
        cfg.limits.validate()?;
        if cfg.id > MAX_PEER_ID {
            return Err(TransportError::Config(format!(
                "id {} > {MAX_PEER_ID}",
                cfg.id
            )));
        }
        let listener = TcpListener::bind(cfg.listen).map_err(|source| TransportError::Listen {
            addr: cfg.listen,
            source,
        })?;
        let local_addr = listener.local_addr()?;
        let (ring, single_issuer) = build_ring(cfg.limits.single_issuer, cfg.limits.recv_buffers)?;
        let min_wait = ring.params().is_feature_min_timeout();
        let mut bufs = None;
        if !cfg.limits.force_plain_recv {
            let mut b = BufRing::new(cfg.limits.recv_buffers, cfg.limits.recv_buffer_bytes)?;
            match b.register(&ring.submitter()) {
                Ok(()) => bufs = Some(b),
                Err(e) => info!("no provided-buffer ring ({e}); receiving with plain recv"),
            }
        }
        let (setup_tx, setup_rx) = mpsc::channel();
        let counters = TransportCounters {
            multishot: bufs.is_some(),
            ..Default::default()
        };
        let peers_cfg = cfg.peers.clone();
        let connect_timeout = ms(cfg.limits.connect_timeout_ms);
        let mut t = Transport {
            ring,
            bufs,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_gen: 1,
            peers: Vec::new(),
            inbound_up: InboundUp::new(),
            cfg,
            local_addr,
            listener,
            wake_fd: Arc::new(new_eventfd()?),
            wake_buf: Box::new([0; 8]),
            setup_rx,
            setup_tx,
            handshakes: PendingHandshakes::new(MAX_PENDING_HANDSHAKES),
            events: VecDeque::new(),
            refusals: RefusalLog::default(),
            taken_refusals: RefusalLog::every(connect_timeout),
            inflight: 0,
            scratch: rkyv::util::AlignedVec::new(),
            counters,
            now: Instant::now(),
            delivered_this_turn: 0,
            single_issuer,
            owner: 0,
            busy: false,
            min_wait,
            idle_spin: Duration::ZERO,
        };
        t.arm_wake()?;
        t.arm_accept()?;
        for (peer, addr) in peers_cfg {
            t.connect(peer, addr)?;
        }
        if !t.single_issuer {
            t.ring.submit()?;
        }
        // A single-issuer ring is still disabled: its first entries are submitted by the
        // first `poll`, on the thread that owns it from then on.
        Ok(t)
    }

    /// The address the listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This worker's id.
    pub fn id(&self) -> PeerId {
        self.cfg.id
    }

    /// A handle other threads use to wake a parked `poll`.
    pub fn waker(&self) -> Waker {
        Waker {
            fd: self.wake_fd.clone(),
        }
    }

    /// Transport-wide counters.
    pub fn counters(&self) -> TransportCounters {
        self.counters
    }

    /// Zeroes every counter, transport-wide and per peer (a worker that serves job after job
    /// reports each job's own figures). The connections are left as they are.
    pub fn reset_counters(&mut self) {
        self.counters = TransportCounters {
            multishot: self.counters.multishot,
            ..TransportCounters::default()
        };
        for p in &mut self.peers {
            p.counters = PeerCounters::default();
        }
    }

    /// One peer's counters (zero for a peer never seen).
    pub fn peer_counters(&self, peer: PeerId) -> PeerCounters {
        self.peers
            .get(peer as usize)
            .map(|p| p.counters)
            .unwrap_or_default()
    }

    /// What a handshake thread needs.
    pub(super) fn handshaker(&self) -> Handshaker {
        Handshaker {
            tx: self.setup_tx.clone(),
            waker: self.waker(),
            secret: self.cfg.secret.clone(),
            cluster_id: self.cfg.cluster_id,
            own: self.cfg.id,
            handshake_timeout: ms(self.cfg.limits.handshake_timeout_ms),
            inbound_up: self.inbound_up.clone(),
        }
    }

    /// One turn of the event loop: reap completions, deliver, flush, and one
    /// `io_uring_enter`, which waits up to `timeout` (less if a batch or a grant comes due)
    /// when the turn found nothing to do. Returns how many requests, control messages and
    /// events were handed to `inbound`.
    pub fn poll(&mut self, timeout: Duration, inbound: &mut impl Inbound) -> Result<usize> {
        self.bind()?;
        self.counters.turns += 1;
        self.delivered_this_turn = 0;
        let progress = self.work(inbound)?;
        if progress {
            self.busy |= self.delivered_this_turn >= COALESCE_AFTER;
            self.enter(None)?;
        } else {
            let wait = self.next_deadline().map_or(timeout, |d| d.min(timeout));
            let arrived = self.spin_for_completion(wait);
            if arrived {
                self.enter(None)?;
            } else {
                let from_ns = crate::clock::thread_cpu_ns();
                self.enter(Some(wait))?;
                self.counters.sleep_cpu_ns += crate::clock::thread_cpu_ns().saturating_sub(from_ns);
            }
            self.work(inbound)?;
            self.busy = self.delivered_this_turn >= COALESCE_AFTER;
            // What the wake-up queued (typically the next batch, now that the last send
            // completed) goes out now, not one turn later.
            if !self.ring.submission().is_empty() {
                self.enter(None)?;
            }
        }
        Ok(self.delivered_this_turn)
    }

    /// Enables a single-issuer ring on the first call, from the thread that will own it;
    /// refuses any other thread afterwards (the kernel would refuse it too).
    fn bind(&mut self) -> Result<()> {
        if !self.single_issuer {
            return Ok(());
        }
        let me = thread_token();
        if self.owner == me {
            return Ok(());
        }
        if self.owner != 0 {
            return Err(TransportError::Config(
                "transport polled from a second thread: with Limits::single_issuer it belongs \
                 to the first thread that polled it"
                    .into(),
            ));
        }
        self.ring.submitter().register_enable_rings()?;
        self.owner = me;
        Ok(())
    }

    /// Reaps, delivers, flushes. Whether anything happened.
    fn work(&mut self, inbound: &mut impl Inbound) -> Result<bool> {
        self.now = Instant::now();
        let mut progress = self.drain_setups()?;
        progress |= self.reap(inbound)?;
        progress |= self.retry_held(inbound);
        progress |= self.flush()?;
        while let Some(e) = self.events.pop_front() {
            inbound.event(e);
            self.delivered_this_turn += 1;
            progress = true;
        }
        Ok(progress)
    }

    /// One `io_uring_enter`: submits, and with a non-zero `wait` parks for a completion.
    fn enter(&mut self, wait: Option<Duration>) -> Result<()> {
        if wait.is_none_or(|w| w.is_zero()) && self.nothing_to_enter_for() {
            return Ok(());
        }
        self.counters.enters += 1;
        let r = match wait {
            // A zero wait must not enter the kernel's wait path (timer set-up and cancel).
            // (A single-issuer ring's deferred completion work still runs: the kernel flags
            // it, IORING_SETUP_TASKRUN_FLAG, and `submit` then asks for events.)
            None => self.ring.submit(),
            Some(w) if w.is_zero() => self.ring.submit(),
            Some(w) => self.park(w),
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Whether an `io_uring_enter` that does not wait would do nothing: no entry to submit,
    /// no deferred completion work flagged, no overflowed completion to flush. Skipping it
    /// saves a system call per turn of a busy loop (on a virtual machine each costs µs).
    fn nothing_to_enter_for(&mut self) -> bool {
        let mut sq = self.ring.submission();
        sq.sync();
        sq.is_empty() && !sq.taskrun() && !sq.cq_overflow()
    }

    /// Submits and waits up to `w` for a completion; under load, lets completions gather.
    fn park(&mut self, w: Duration) -> std::io::Result<usize> {
        let ts = types::Timespec::new()
            .sec(w.as_secs())
            .nsec(w.subsec_nanos());
        // Never past the caller's timeout or the next batch's deadline (the kernel would
        // sleep the whole `min_wait` even if the timeout came first).
        let min_us = (self.cfg.limits.park_min_wait_us as u128).min(w.as_micros()) as u32;
        // Only a single-issuer ring saves the wake-ups: a shared one is still woken by every
        // arrival, and holding its return only delays it (measured worse).
        if self.busy && self.min_wait && self.single_issuer && min_us > 0 {
            // Traffic is flowing: let completions gather for up to `min_us` before waking
            // (then return at once if any is ready, else at the first).
            let args = types::SubmitArgs::new().timespec(&ts).min_wait_usec(min_us);
            self.ring
                .submitter()
                .submit_with_args(COALESCED_WANT, &args)
        } else {
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(1, &args)
        }
    }

    /// Time until the next batch or credit grant comes due.
    fn next_deadline(&self) -> Option<Duration> {
        let age = Duration::from_micros(self.cfg.limits.batch_age_max_us);
        let delay = Duration::from_micros(self.cfg.faults.delay_batches_us);
        let mut best: Option<Instant> = None;
        for c in self.conns.iter().flatten() {
            if c.is_closing() {
                continue;
            }
            let mut consider = |t: Instant| best = Some(best.map_or(t, |b| b.min(t)));
            if c.send.batch.requests > 0 && !c.send.busy() {
                consider(c.send.batch.started + age.max(delay));
            }
            if let Some(g) = c.credit.grant_since
                && !c.send.busy()
            {
                consider(g + grant_age(age));
            }
            if !c.recv.held.is_empty() {
                // Ring space appears without a completion; look again soon.
                consider(self.now + age.max(Duration::from_micros(100)));
            }
        }
        best.map(|b| b.saturating_duration_since(self.now))
    }

    fn arm_wake(&mut self) -> Result<()> {
        let e = opcode::Read::new(
            types::Fd(self.wake_fd.as_raw_fd()),
            self.wake_buf.as_mut_ptr(),
            8,
        )
        .build()
        .user_data(Op::Wake.user_data());
        // `wake_buf` is a boxed 8-byte buffer owned by the transport, not touched until this
        // read's completion (Op::Wake) and kept alive by Drop until then.
        push_sqe(&mut self.ring, &mut self.inflight, &e)
    }

    fn arm_accept(&mut self) -> Result<()> {
        let e = opcode::Accept::new(
            types::Fd(self.listener.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(Op::Accept.user_data());
        // No buffer: the address arguments are null.
        push_sqe(&mut self.ring, &mut self.inflight, &e)
    }

    /// Reaps every completion in the queue.
    fn reap(&mut self, inbound: &mut impl Inbound) -> Result<bool> {
        let mut any = false;
        if self.ring.submission().cq_overflow() {
            self.counters.cq_overflows += 1;
            warn!("io_uring completion queue overflowed; the kernel kept the completions");
        }
        loop {
            // Copy out a small batch so the completion queue borrow ends before handling.
            let mut cqes: [Option<(u64, i32, u32)>; 64] = [None; 64];
            let mut n = 0;
            for cqe in self.ring.completion().take(64) {
                cqes[n] = Some((cqe.user_data(), cqe.result(), cqe.flags()));
                n += 1;
            }
            if n == 0 {
                break;
            }
            any = true;
            for (ud, res, flags) in cqes.iter().take(n).flatten().copied() {
                self.complete(ud, res, flags, inbound)?;
            }
        }
        Ok(any)
    }

    /// One completion, by the operation it ends.
    fn complete(
        &mut self,
        ud: u64,
        res: i32,
        flags: u32,
        inbound: &mut impl Inbound,
    ) -> Result<()> {
        match Op::from_user_data(ud) {
            Some(Op::Wake) => {
                self.inflight -= 1;
                self.arm_wake()?;
            }
            Some(Op::Accept) => {
                self.inflight -= 1;
                if res >= 0 {
                    // SAFETY: `res` is a descriptor the kernel just created for us.
                    let stream = unsafe { TcpStream::from_raw_fd(res as RawFd) };
                    self.accepted(stream);
                } else {
                    warn!(error = %std::io::Error::from_raw_os_error(-res), "accept failed");
                }
                self.arm_accept()?;
            }
            Some(Op::Cancel) => self.inflight -= 1,
            Some(Op::Recv(c)) => self.complete_recv(c, res, flags, inbound)?,
            Some(Op::Send(c)) => self.complete_send(c, res)?,
            None => warn!(ud, "completion with unknown user data"),
        }
        Ok(())
    }
}

/// Pushes one submission, making room first if the queue is full.
pub(super) fn push_sqe(ring: &mut IoUring, inflight: &mut usize, e: &squeue::Entry) -> Result<()> {
    // SAFETY: every caller documents the buffer the entry names and keeps it alive and
    // untouched until the entry's final completion (see the module docs).
    if unsafe { ring.submission().push(e) }.is_err() {
        ring.submit()?;
        // SAFETY: as above.
        unsafe { ring.submission().push(e) }
            .map_err(|_| std::io::Error::other("submission queue full"))?;
    }
    *inflight += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{RequestHeader, frame_len};
    use crate::transport::{ClusterSecret, Delivered, Limits};

    #[derive(Default)]
    struct Count(u64);

    impl Inbound for Count {
        fn deliver(&mut self, _: PeerId, _: &[u8]) -> Delivered {
            self.0 += 1;
            Delivered::Accepted
        }
        fn control(&mut self, _: PeerId, _: u16, _: &[u8]) {}
    }

    fn start(id: PeerId, limits: Limits) -> Transport {
        let secret = ClusterSecret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
        let mut c = TransportConfig::new(id, "127.0.0.1:0".parse().unwrap(), secret, 7);
        c.limits = limits;
        Transport::start(c).unwrap()
    }

    fn request(seq: u64) -> Vec<u8> {
        let mut out = vec![0; frame_len(8, 8)];
        RequestHeader {
            request_id: seq,
            ..Default::default()
        }
        .write(&seq.to_le_bytes(), &[1; 8], &mut out);
        out
    }

    /// Sends `n` requests from `a` (polled here) to `b` (polled on its own thread).
    fn exchange(limits: Limits, n: u64) {
        let mut a = start(1, limits.clone());
        // Created here, polled (and so owned) by the receiving thread only.
        let b = start(2, limits);
        let b_addr = b.local_addr();
        let rx = std::thread::spawn(move || {
            let mut b = b;
            let mut got = Count::default();
            let deadline = Instant::now() + Duration::from_secs(20);
            while got.0 < n && Instant::now() < deadline {
                b.poll(Duration::from_millis(1), &mut got).unwrap();
            }
            (b, got.0)
        });
        a.connect(2, b_addr).unwrap();
        let mut sink = Count::default();
        let deadline = Instant::now() + Duration::from_secs(20);
        for seq in 0..n {
            let f = request(seq);
            while !a.try_append(2, &f).unwrap() {
                assert!(Instant::now() < deadline, "never connected or no credit");
                a.poll(Duration::from_millis(1), &mut sink).unwrap();
            }
        }
        a.flush_now();
        while !rx.is_finished() {
            a.poll(Duration::from_millis(1), &mut sink).unwrap();
        }
        let (mut b, got) = rx.join().unwrap();
        assert_eq!(got, n);
        if b.single_issuer {
            // Owned by the thread that polled it: this one may not.
            let e = b.poll(Duration::ZERO, &mut sink).unwrap_err();
            assert!(e.to_string().contains("second thread"), "{e}");
            // Dropping it here (not its owner) leaks its buffers instead of freeing memory
            // the kernel could still write; the test only checks that it does not hang.
        }
    }

    #[test]
    fn a_transport_created_on_one_thread_is_owned_by_the_one_that_polls_it() {
        exchange(Limits::default(), 5_000);
    }

    #[test]
    fn a_shared_ring_without_wake_up_coalescing_carries_the_same_traffic() {
        let limits = Limits {
            single_issuer: false,
            park_min_wait_us: 0,
            ..Limits::default()
        };
        exchange(limits, 5_000);
    }
}
