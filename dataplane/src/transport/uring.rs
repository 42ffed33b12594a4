//! The event loop: one io_uring, one `io_uring_enter` per turn.
//!
//! # Operations and buffer ownership
//! Every submission names a buffer the kernel may use until that submission's *final*
//! completion (for multishot receive: the first completion without `IORING_CQE_F_MORE`):
//! - receive: multishot into the provided-buffer ring ([`BufRing`], owned by the transport),
//!   or, in the fallback, plain `recv` into the connection's `recv_buf`;
//! - send: the connection's `send_buf`, which is not touched until the send completes;
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

use super::bufring::{BGID, BufRing};
use super::wire::{self, Kind, NET_HEADER_BYTES, NetHeader};
use super::{
    CONTROL_QUEUE_MAX, Delivered, Direction, Event, Inbound, MAX_PEER_ID, MAX_PENDING_HANDSHAKES,
    PeerCounters, PeerId, RING_ENTRIES, TransportConfig, TransportCounters, TransportError, Waker,
    auth, ms,
};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

type Result<T> = std::result::Result<T, TransportError>;

// user_data: op in the top 8 bits, connection generation in the next 24, slot in the low 32.
const OP_WAKE: u64 = 1;
const OP_ACCEPT: u64 = 2;
const OP_RECV: u64 = 3;
const OP_SEND: u64 = 4;
const OP_CANCEL: u64 = 5;
const GEN_MASK: u32 = (1 << 24) - 1;

fn user_data(op: u64, gen_: u32, slot: usize) -> u64 {
    (op << 56) | (((gen_ & GEN_MASK) as u64) << 32) | (slot as u32 as u64)
}

fn split_user_data(u: u64) -> (u64, u32, usize) {
    (
        u >> 56,
        ((u >> 32) as u32) & GEN_MASK,
        (u & 0xFFFF_FFFF) as usize,
    )
}

/// Most control frames coalesced into one send.
const CONTROL_SEND_BYTES_MAX: usize = 256 << 10;
/// Longest wait for outstanding completions when the transport is dropped.
const DROP_DRAIN_MS: u64 = 2_000;
/// Connect retry backoff bounds.
const CONNECT_BACKOFF_MIN_MS: u64 = 10;
const CONNECT_BACKOFF_MAX_MS: u64 = 200;

const _: () = assert!(CONNECT_BACKOFF_MIN_MS <= CONNECT_BACKOFF_MAX_MS);
const _: () = assert!(CONTROL_SEND_BYTES_MAX >= wire::MAX_FRAME_BYTES / 4);

/// A finished handshake (or a failed one), from a helper thread.
enum Setup {
    Connected {
        peer: PeerId,
        stream: TcpStream,
        direction: Direction,
        welcome: Option<auth::Welcome>,
    },
    Refused {
        addr: Option<SocketAddr>,
        reason: String,
    },
    ConnectFailed {
        peer: PeerId,
        reason: String,
    },
}

#[derive(Clone, Debug, Default)]
enum Link {
    #[default]
    None,
    Connecting,
    Up {
        slot: usize,
        gen_: u32,
    },
    Lost(String),
}

#[derive(Default)]
struct PeerSlot {
    out: Link,
    inn: Link,
    counters: PeerCounters,
}

struct Conn {
    fd: OwnedFd,
    gen_: u32,
    peer: PeerId,
    direction: Direction,
    closing: bool,
    /// Operations in flight (a multishot receive counts once until its final completion).
    ops: u32,
    recv_armed: bool,
    /// Fallback receive buffer; the kernel owns it while a plain receive is in flight.
    recv_buf: Box<[u8]>,
    /// A frame arriving across receive buffers, reassembled.
    partial: Vec<u8>,
    /// Whole data frames waiting for ring space (Full), in order; `held_off` is the frame
    /// being delivered, `held_entry` the payload offset of its next undelivered entry.
    held: Vec<u8>,
    held_off: usize,
    held_entry: usize,
    expect_seq: u32,
    /// The kernel owns `send_buf[send_off..]` while `send_busy`.
    send_buf: Vec<u8>,
    send_off: usize,
    send_busy: bool,
    send_is_batch: bool,
    send_requests: u32,
    next_seq: u32,
    // Outbound direction: the batch being filled (frame header space first).
    batch: Vec<u8>,
    batch_requests: u32,
    batch_started: Instant,
    batch_limit_bytes: usize,
    credit_blocked: bool,
    /// `flush_now` was called: send the batch at the next chance, whatever its size or age.
    flush_requested: bool,
    data_credit_bytes: u64,
    control_credit_bytes: u64,
    data_window_bytes: u64,
    control_window_bytes: u64,
    control_q: VecDeque<Vec<u8>>,
    sent_bytes: u64,
    sent_batches: u64,
    // Inbound direction: credit bookkeeping.
    data_in_use_bytes: u64,
    control_in_use_bytes: u64,
    grant_data_bytes: u64,
    grant_control_bytes: u64,
    grant_since: Option<Instant>,
}

impl Conn {
    fn batch_due(&self, now: Instant, age_max: Duration, delay: Duration) -> bool {
        if self.batch_requests == 0 {
            return false;
        }
        let age = now.saturating_duration_since(self.batch_started);
        let full = self.batch.len() >= self.batch_limit_bytes
            || self.credit_blocked
            || self.flush_requested;
        (full || age >= age_max) && age >= delay
    }
}

/// The transport. Owned by the network thread (it is `Send`, not `Sync`).
pub struct Transport {
    // Dropped first: closing the ring ends every operation (Drop waits for them anyway).
    ring: IoUring,
    bufs: Option<BufRing>,
    conns: Vec<Option<Conn>>,
    free_slots: Vec<usize>,
    next_gen: u32,
    peers: Vec<PeerSlot>,
    cfg: TransportConfig,
    local_addr: SocketAddr,
    listener: TcpListener,
    wake_fd: Arc<OwnedFd>,
    /// The kernel owns it while the eventfd read is in flight.
    wake_buf: Box<[u8; 8]>,
    setup_rx: mpsc::Receiver<Setup>,
    setup_tx: mpsc::Sender<Setup>,
    handshakes: Arc<AtomicUsize>,
    events: VecDeque<Event>,
    inflight: usize,
    scratch: rkyv::util::AlignedVec<16>,
    counters: TransportCounters,
    now: Instant,
    delivered_this_turn: usize,
    /// The ring was created `R_DISABLED` for a single issuer and is enabled by the first
    /// `enter`, on the thread that will own it.
    single_issuer: bool,
    /// The thread that enabled the ring (see [`thread_token`]); 0 until then.
    owner: usize,
    /// Traffic is heavy: the last waking turn delivered at least [`COALESCE_AFTER`].
    busy: bool,
    /// The kernel supports `min_wait` on a wait (`IORING_FEAT_MIN_TIMEOUT`).
    min_wait: bool,
}

/// Most completions a coalesced park waits for before its `min_wait` has passed.
const COALESCED_WANT: usize = 256;
/// A turn that delivered at least this many requests, control messages and events marks the
/// transport busy: its next park may hold the wake-up (`Limits::park_min_wait_us`). A
/// request–response exchange (one request per turn) never does.
const COALESCE_AFTER: usize = 64;

/// An id of the calling thread that costs no system call: the address of a thread-local.
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
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
        let listener = TcpListener::bind(cfg.listen)?;
        let local_addr = listener.local_addr()?;
        let cq = RING_ENTRIES * 4 + cfg.limits.recv_buffers as u32;
        // Preferred: a single-issuer ring whose completion work waits for our own `enter`
        // (no wake-up per arriving packet), enabled later by the thread that polls it.
        let deferred = if cfg.limits.single_issuer {
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
        let min_wait = ring.params().is_feature_min_timeout();
        if !ring.params().is_feature_ext_arg() {
            return Err(TransportError::Config(
                "this kernel's io_uring lacks IORING_FEAT_EXT_ARG (needs Linux ≥ 5.11)".into(),
            ));
        }
        let mut bufs = None;
        if !cfg.limits.force_plain_recv {
            let mut b = BufRing::new(cfg.limits.recv_buffers, cfg.limits.recv_buffer_bytes)?;
            match b.register(&ring.submitter()) {
                Ok(()) => bufs = Some(b),
                Err(e) => info!("no provided-buffer ring ({e}); receiving with plain recv"),
            }
        }
        // SAFETY: eventfd has no memory arguments; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `efd` is a new descriptor nobody else owns.
        let wake_fd = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let (setup_tx, setup_rx) = mpsc::channel();
        let now = Instant::now();
        let counters = TransportCounters {
            multishot: bufs.is_some(),
            ..Default::default()
        };
        let peers_cfg = cfg.peers.clone();
        let mut t = Transport {
            ring,
            bufs,
            conns: Vec::new(),
            free_slots: Vec::new(),
            next_gen: 1,
            peers: Vec::new(),
            cfg,
            local_addr,
            listener,
            wake_fd,
            wake_buf: Box::new([0; 8]),
            setup_rx,
            setup_tx,
            handshakes: Arc::new(AtomicUsize::new(0)),
            events: VecDeque::new(),
            inflight: 0,
            scratch: rkyv::util::AlignedVec::new(),
            counters,
            now,
            delivered_this_turn: 0,
            single_issuer,
            owner: 0,
            busy: false,
            min_wait,
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

    /// One peer's counters (zero for a peer never seen).
    pub fn peer_counters(&self, peer: PeerId) -> PeerCounters {
        self.peers
            .get(peer as usize)
            .map(|p| p.counters)
            .unwrap_or_default()
    }

    /// Whether our connection to `peer` (the one we send on) is up.
    pub fn is_connected(&self, peer: PeerId) -> bool {
        matches!(
            self.peers.get(peer as usize).map(|p| &p.out),
            Some(Link::Up { .. })
        )
    }

    /// Sets the routing epoch stamped on frames from now on.
    pub fn set_epoch(&mut self, epoch: u32) {
        self.cfg.epoch = epoch;
    }

    fn peer_slot(&mut self, peer: PeerId) -> Result<&mut PeerSlot> {
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
        if peer == self.cfg.id {
            return Err(TransportError::Config(format!(
                "peer {peer} is this transport"
            )));
        }
        let slot = self.peer_slot(peer)?;
        if matches!(slot.out, Link::Up { .. } | Link::Connecting) {
            return Ok(());
        }
        slot.out = Link::Connecting;
        let tx = self.setup_tx.clone();
        let waker = self.waker();
        let secret = self.cfg.secret.clone();
        let (cluster, own) = (self.cfg.cluster_id, self.cfg.id);
        let connect_timeout = ms(self.cfg.limits.connect_timeout_ms);
        let hs_timeout = ms(self.cfg.limits.handshake_timeout_ms);
        std::thread::Builder::new()
            .name(format!("clasp-connect-{peer}"))
            .spawn(move || {
                let deadline = Instant::now() + connect_timeout;
                let mut backoff = CONNECT_BACKOFF_MIN_MS;
                let setup = loop {
                    match TcpStream::connect_timeout(&addr, hs_timeout) {
                        Ok(mut s) => {
                            let _ = s.set_nodelay(true);
                            break match auth::client_handshake(
                                &mut s,
                                &secret,
                                cluster,
                                own,
                                Some(peer),
                                hs_timeout,
                            ) {
                                Ok((_, welcome)) => Setup::Connected {
                                    peer,
                                    stream: s,
                                    direction: Direction::Outbound,
                                    welcome: Some(welcome),
                                },
                                Err(e) => Setup::ConnectFailed {
                                    peer,
                                    reason: format!("handshake with {addr}: {e}"),
                                },
                            };
                        }
                        Err(e) if Instant::now() >= deadline => {
                            break Setup::ConnectFailed {
                                peer,
                                reason: format!("connect to {addr}: {e}"),
                            };
                        }
                        Err(_) => {
                            std::thread::sleep(ms(backoff));
                            backoff = (backoff * 2).min(CONNECT_BACKOFF_MAX_MS);
                        }
                    }
                };
                let _ = tx.send(setup);
                waker.wake();
            })?;
        Ok(())
    }

    /// Appends one request frame to the outbound batch for `peer`. `Ok(false)`: not now (no
    /// credit, the batch is full while the previous one is still being sent, or the
    /// connection is not up yet) — keep the frame and retry after a `poll`.
    #[inline]
    pub fn try_append(&mut self, peer: PeerId, frame: &[u8]) -> Result<bool> {
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return Err(TransportError::UnknownPeer(peer));
        };
        let (slot, gen_) = match &p.out {
            Link::Up { slot, gen_ } => (*slot, *gen_),
            Link::Connecting => return Ok(false),
            Link::None => return Err(TransportError::UnknownPeer(peer)),
            Link::Lost(reason) => {
                return Err(TransportError::PeerLost {
                    peer,
                    reason: reason.clone(),
                });
            }
        };
        let entry = wire::entry_bytes(frame.len());
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(false);
        };
        debug_assert_eq!(conn.gen_, gen_);
        if NET_HEADER_BYTES + entry > conn.batch_limit_bytes {
            return Err(TransportError::TooLarge {
                frame_bytes: frame.len(),
                limit_bytes: conn.batch_limit_bytes - NET_HEADER_BYTES - wire::ENTRY_HEADER_BYTES,
            });
        }
        if frame.len() < wire::MIN_REQUEST_FRAME_BYTES {
            crate::request::Request::parse(frame)?;
        }
        if conn.batch.len() + entry > conn.batch_limit_bytes {
            // Full: hand it to the kernel now if the previous batch is done.
            if !conn.send_busy && !conn.closing {
                p.counters.flushes_by_size += 1;
                let e = start_batch_send(conn, slot, self.cfg.id, self.cfg.epoch);
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
            }
            if conn.batch.len() + entry > conn.batch_limit_bytes {
                p.counters.append_refusals += 1;
                return Ok(false);
            }
        }
        if (conn.batch.len() + entry) as u64 > conn.data_credit_bytes {
            conn.credit_blocked = conn.batch_requests > 0;
            p.counters.append_refusals += 1;
            return Ok(false);
        }
        if conn.batch_requests == 0 {
            conn.batch_started = self.now;
        }
        wire::push_entry(&mut conn.batch, frame);
        conn.batch_requests += 1;
        Ok(true)
    }

    /// Sends every non-empty outbound batch at the next `poll`, whatever its size or age (end
    /// of input, or a caller that knows no more requests are coming for a while).
    pub fn flush_now(&mut self) {
        for c in self.conns.iter_mut().flatten() {
            if c.direction == Direction::Outbound && c.batch_requests > 0 {
                c.flush_requested = true;
            }
        }
    }

    /// Queues a control or state message for `peer`; sent ahead of data, in its own credit
    /// class. `Ok(false)`: the queue is full; retry after a `poll`.
    pub fn send_control(&mut self, peer: PeerId, kind: u16, body: &[u8]) -> Result<bool> {
        if body.len() > wire::MAX_CONTROL_BODY_BYTES {
            return Err(TransportError::TooLarge {
                frame_bytes: body.len(),
                limit_bytes: wire::MAX_CONTROL_BODY_BYTES,
            });
        }
        let (id, epoch) = (self.cfg.id, self.cfg.epoch);
        let Some(p) = self.peers.get_mut(peer as usize) else {
            return Err(TransportError::UnknownPeer(peer));
        };
        let slot = match &p.out {
            Link::Up { slot, .. } => *slot,
            Link::Connecting => return Ok(false),
            Link::None => return Err(TransportError::UnknownPeer(peer)),
            Link::Lost(reason) => {
                return Err(TransportError::PeerLost {
                    peer,
                    reason: reason.clone(),
                });
            }
        };
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(false);
        };
        if conn.control_q.len() >= CONTROL_QUEUE_MAX {
            return Ok(false);
        }
        let mut frame = Vec::new();
        wire::encode_control(id, epoch, kind, body, &mut frame)
            .map_err(|e| TransportError::Config(e.to_string()))?;
        if frame.len() as u64 > conn.control_window_bytes {
            return Err(TransportError::TooLarge {
                frame_bytes: frame.len(),
                limit_bytes: conn.control_window_bytes as usize,
            });
        }
        conn.control_q.push_back(frame);
        Ok(true)
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
            self.enter(Some(wait))?;
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

    fn enter(&mut self, wait: Option<Duration>) -> Result<()> {
        self.counters.enters += 1;
        let r = match wait {
            // A zero wait must not enter the kernel's wait path (timer set-up and cancel).
            // (A single-issuer ring's deferred completion work still runs: the kernel flags
            // it, IORING_SETUP_TASKRUN_FLAG, and `submit` then asks for events.)
            None => self.ring.submit(),
            Some(w) if w.is_zero() => self.ring.submit(),
            Some(w) => {
                let ts = types::Timespec::new()
                    .sec(w.as_secs())
                    .nsec(w.subsec_nanos());
                // Never past the caller's timeout or the next batch's deadline (the kernel
                // would sleep the whole `min_wait` even if the timeout came first).
                let min_us = (self.cfg.limits.park_min_wait_us as u128).min(w.as_micros()) as u32;
                // Only a single-issuer ring saves the wake-ups: a shared one is still woken
                // by every arrival, and holding its return only delays it (measured worse).
                if self.busy && self.min_wait && self.single_issuer && min_us > 0 {
                    // Traffic is flowing: let completions gather for up to `min_us` before
                    // waking (then return at once if any is ready, else at the first).
                    let args = types::SubmitArgs::new().timespec(&ts).min_wait_usec(min_us);
                    self.ring
                        .submitter()
                        .submit_with_args(COALESCED_WANT, &args)
                } else {
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(1, &args)
                }
            }
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

    /// Time until the next batch or credit grant comes due.
    fn next_deadline(&self) -> Option<Duration> {
        let age = Duration::from_micros(self.cfg.limits.batch_age_max_us);
        let delay = Duration::from_micros(self.cfg.faults.delay_batches_us);
        let mut best: Option<Instant> = None;
        for c in self.conns.iter().flatten() {
            if c.closing {
                continue;
            }
            let mut consider = |t: Instant| best = Some(best.map_or(t, |b| b.min(t)));
            if c.batch_requests > 0 && !c.send_busy {
                consider(c.batch_started + age.max(delay));
            }
            if let Some(g) = c.grant_since
                && !c.send_busy
            {
                consider(g + age);
            }
            if !c.held.is_empty() {
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
        .user_data(user_data(OP_WAKE, 0, 0));
        // SAFETY: `wake_buf` is a boxed 8-byte buffer owned by the transport, not touched
        // until this read's completion (OP_WAKE) and kept alive by Drop until then.
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
        .user_data(user_data(OP_ACCEPT, 0, 0));
        // No buffer: the address arguments are null.
        push_sqe(&mut self.ring, &mut self.inflight, &e)
    }

    fn arm_recv(&mut self, slot: usize) -> Result<()> {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return Ok(());
        };
        if conn.recv_armed || conn.closing {
            return Ok(());
        }
        let fd = types::Fd(conn.fd.as_raw_fd());
        let ud = user_data(OP_RECV, conn.gen_, slot);
        let e = if self.bufs.is_some() {
            opcode::RecvMulti::new(fd, BGID).build().user_data(ud)
        } else {
            opcode::Recv::new(fd, conn.recv_buf.as_mut_ptr(), conn.recv_buf.len() as u32)
                .build()
                .user_data(ud)
        };
        conn.recv_armed = true;
        conn.ops += 1;
        // The kernel owns `recv_buf` (plain) or picks provided buffers (multishot) until the
        // final completion of this receive; `Conn` is not freed while `ops > 0`.
        push_sqe(&mut self.ring, &mut self.inflight, &e)
    }

    /// Takes finished handshakes from the helper threads.
    fn drain_setups(&mut self) -> Result<bool> {
        let mut any = false;
        while let Ok(s) = self.setup_rx.try_recv() {
            any = true;
            match s {
                Setup::Refused { addr, reason } => {
                    self.counters.refused += 1;
                    self.events.push_back(Event::Refused { addr, reason });
                }
                Setup::ConnectFailed { peer, reason } => {
                    warn!(peer, %reason, "connecting to peer failed");
                    if let Ok(p) = self.peer_slot(peer) {
                        p.out = Link::Lost(reason.clone());
                    }
                    self.events.push_back(Event::ConnectFailed { peer, reason });
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

    fn add_conn(
        &mut self,
        peer: PeerId,
        stream: TcpStream,
        direction: Direction,
        welcome: Option<auth::Welcome>,
    ) -> Result<()> {
        let limits = self.cfg.limits.clone();
        let link = {
            let p = self.peer_slot(peer)?;
            match direction {
                Direction::Outbound => &p.out,
                Direction::Inbound => &p.inn,
            }
            .clone()
        };
        if matches!(link, Link::Up { .. }) {
            let reason = format!("peer {peer} already has an {direction:?} connection");
            warn!(peer, %reason, "refusing duplicate connection");
            self.counters.refused += 1;
            self.events.push_back(Event::Refused {
                addr: stream.peer_addr().ok(),
                reason,
            });
            return Ok(());
        }
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let w = welcome.unwrap_or(auth::Welcome {
            data_credit_bytes: 0,
            control_credit_bytes: 0,
            frame_bytes_max: 0,
        });
        let batch_limit_bytes = limits
            .batch_bytes_max
            .min(w.frame_bytes_max as usize)
            .min(w.data_credit_bytes as usize);
        if direction == Direction::Outbound
            && batch_limit_bytes
                < NET_HEADER_BYTES + wire::entry_bytes(wire::MIN_REQUEST_FRAME_BYTES)
        {
            let reason = format!("peer {peer} grants too little credit ({w:?}) for one request");
            warn!(peer, %reason, "closing connection");
            self.events.push_back(Event::ConnectFailed { peer, reason });
            return Ok(());
        }
        let gen_ = self.next_gen & GEN_MASK;
        self.next_gen = self.next_gen.wrapping_add(1);
        let mut batch = Vec::with_capacity(batch_limit_bytes);
        batch.resize(NET_HEADER_BYTES, 0);
        let conn = Conn {
            fd: OwnedFd::from(stream),
            gen_,
            peer,
            direction,
            closing: false,
            ops: 0,
            recv_armed: false,
            recv_buf: if self.bufs.is_some() {
                Box::new([])
            } else {
                vec![0u8; limits.recv_buffer_bytes].into_boxed_slice()
            },
            partial: Vec::new(),
            held: Vec::new(),
            held_off: 0,
            held_entry: 0,
            expect_seq: 0,
            send_buf: Vec::with_capacity(batch_limit_bytes.max(NET_HEADER_BYTES)),
            send_off: 0,
            send_busy: false,
            send_is_batch: false,
            send_requests: 0,
            next_seq: 0,
            batch,
            batch_requests: 0,
            batch_started: self.now,
            batch_limit_bytes,
            credit_blocked: false,
            flush_requested: false,
            data_credit_bytes: w.data_credit_bytes as u64,
            control_credit_bytes: w.control_credit_bytes as u64,
            data_window_bytes: match direction {
                Direction::Outbound => w.data_credit_bytes as u64,
                Direction::Inbound => limits.data_credit_bytes as u64,
            },
            control_window_bytes: match direction {
                Direction::Outbound => w.control_credit_bytes as u64,
                Direction::Inbound => limits.control_credit_bytes as u64,
            },
            control_q: VecDeque::new(),
            sent_bytes: 0,
            sent_batches: 0,
            data_in_use_bytes: 0,
            control_in_use_bytes: 0,
            grant_data_bytes: 0,
            grant_control_bytes: 0,
            grant_since: None,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.conns[s] = Some(conn);
                s
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        let p = self.peer_slot(peer)?;
        let l = Link::Up { slot, gen_ };
        match direction {
            Direction::Outbound => p.out = l,
            Direction::Inbound => p.inn = l,
        }
        debug!(peer, ?direction, "connection up");
        self.events.push_back(Event::PeerUp { peer, direction });
        self.arm_recv(slot)
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

    fn complete(
        &mut self,
        ud: u64,
        res: i32,
        flags: u32,
        inbound: &mut impl Inbound,
    ) -> Result<()> {
        let (op, gen_, slot) = split_user_data(ud);
        match op {
            OP_WAKE => {
                self.inflight -= 1;
                self.arm_wake()?;
            }
            OP_ACCEPT => {
                self.inflight -= 1;
                if res >= 0 {
                    // SAFETY: `res` is a descriptor the kernel just created for us.
                    let stream = unsafe { TcpStream::from_raw_fd(res as RawFd) };
                    self.spawn_server_handshake(stream);
                } else {
                    warn!(error = %std::io::Error::from_raw_os_error(-res), "accept failed");
                }
                self.arm_accept()?;
            }
            OP_CANCEL => self.inflight -= 1,
            OP_RECV => self.complete_recv(slot, gen_, res, flags, inbound)?,
            OP_SEND => self.complete_send(slot, gen_, res)?,
            _ => warn!(ud, "completion with unknown user data"),
        }
        Ok(())
    }

    fn complete_recv(
        &mut self,
        slot: usize,
        gen_: u32,
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
        let conn = match self.conns.get_mut(slot) {
            Some(Some(c)) if c.gen_ == gen_ => c,
            _ => {
                // Cannot happen (a Conn outlives its operations); give the buffer back anyway.
                if let (Some(b), Some(bid)) = (self.bufs.as_mut(), bid) {
                    b.recycle(bid);
                }
                return Ok(());
            }
        };
        if finished {
            conn.ops -= 1;
            conn.recv_armed = false;
        }
        let mut close_reason = None;
        if res > 0 {
            let len = res as usize;
            let data: &[u8] = match (self.bufs.as_ref(), bid) {
                // SAFETY: the kernel selected `bid` for this completion and wrote `len` bytes;
                // it is recycled only after this slice's last use below.
                (Some(b), Some(bid)) => unsafe { b.buffer(bid, len) },
                (Some(_), None) => {
                    close_reason = Some("receive completion without a buffer".to_string());
                    &[]
                }
                // SAFETY: this plain receive into `recv_buf` has completed (it is its final
                // completion), so the kernel no longer writes it; the length is clamped.
                (None, _) => unsafe {
                    std::slice::from_raw_parts(conn.recv_buf.as_ptr(), len.min(conn.recv_buf.len()))
                },
            };
            if !conn.closing && close_reason.is_none() {
                let mut cx = Cx {
                    limits_frame_bytes_max: self.cfg.limits.frame_bytes_max,
                    counters: &mut self.peers[conn.peer as usize].counters,
                    scratch: &mut self.scratch,
                    delivered: &mut self.delivered_this_turn,
                    now: self.now,
                };
                if let Err(e) = on_bytes(conn, data, &mut cx, inbound) {
                    close_reason = Some(e);
                }
            }
            if let (Some(b), Some(bid)) = (self.bufs.as_mut(), bid) {
                b.recycle(bid);
            }
        } else if res == 0 {
            close_reason = Some("the peer closed the connection".into());
        } else if -res == libc::ENOBUFS {
            debug!("provided buffers ran out; re-arming the receive");
        } else if -res == libc::ECANCELED {
            close_reason = Some("receive cancelled".into());
        } else {
            close_reason = Some(format!(
                "receive failed: {}",
                std::io::Error::from_raw_os_error(-res)
            ));
        }
        if let Some(reason) = close_reason {
            self.close_conn(slot, reason);
        } else {
            self.arm_recv(slot)?;
        }
        self.free_if_done(slot);
        Ok(())
    }

    fn complete_send(&mut self, slot: usize, gen_: u32, res: i32) -> Result<()> {
        self.inflight -= 1;
        let cuts = &self.cfg.faults.cuts;
        let Some(conn) = (match self.conns.get_mut(slot) {
            Some(Some(c)) if c.gen_ == gen_ => Some(c),
            _ => None,
        }) else {
            return Ok(());
        };
        conn.ops -= 1;
        conn.send_busy = false;
        let mut close_reason = None;
        if res < 0 {
            close_reason = Some(format!(
                "send failed: {}",
                std::io::Error::from_raw_os_error(-res)
            ));
        } else if !conn.closing {
            conn.send_off += res as usize;
            if conn.send_off < conn.send_buf.len() {
                // A short send: the rest, from the same buffer.
                let e = send_entry(conn, slot);
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
                return Ok(());
            }
            let bytes = conn.send_buf.len() as u64;
            conn.sent_bytes += bytes;
            let c = &mut self.peers[conn.peer as usize].counters;
            c.bytes_sent += bytes;
            if conn.send_is_batch {
                conn.sent_batches += 1;
                c.batches_sent += 1;
                c.frames_sent += conn.send_requests as u64;
            }
            for cut in cuts
                .iter()
                .filter(|c| c.peer == conn.peer && conn.direction == Direction::Outbound)
            {
                let by_batches = cut.after_batches.is_some_and(|n| conn.sent_batches >= n);
                let by_bytes = cut.after_bytes.is_some_and(|n| conn.sent_bytes >= n);
                if by_batches || by_bytes {
                    close_reason = Some(format!(
                        "fault injection: cut after {} batches / {} bytes",
                        conn.sent_batches, conn.sent_bytes
                    ));
                }
            }
        }
        if let Some(reason) = close_reason {
            self.close_conn(slot, reason);
        }
        self.free_if_done(slot);
        Ok(())
    }

    fn spawn_server_handshake(&mut self, mut stream: TcpStream) {
        let addr = stream.peer_addr().ok();
        if self.handshakes.load(Ordering::Relaxed) >= MAX_PENDING_HANDSHAKES {
            let reason = format!("more than {MAX_PENDING_HANDSHAKES} handshakes in progress");
            warn!(?addr, %reason, "refusing connection");
            self.counters.refused += 1;
            self.events.push_back(Event::Refused { addr, reason });
            return;
        }
        self.handshakes.fetch_add(1, Ordering::Relaxed);
        let pending = self.handshakes.clone();
        let tx = self.setup_tx.clone();
        let waker = self.waker();
        let secret = self.cfg.secret.clone();
        let (cluster, own) = (self.cfg.cluster_id, self.cfg.id);
        let timeout = ms(self.cfg.limits.handshake_timeout_ms);
        let l = &self.cfg.limits;
        let grant = auth::Welcome {
            data_credit_bytes: l.data_credit_bytes,
            control_credit_bytes: l.control_credit_bytes,
            frame_bytes_max: l.frame_bytes_max as u32,
        };
        let spawned = std::thread::Builder::new()
            .name("clasp-handshake".into())
            .spawn(move || {
                let r = stream
                    .set_nonblocking(false)
                    .map_err(auth::AuthError::from)
                    .and_then(|()| {
                        auth::server_handshake(
                            &mut stream,
                            &secret,
                            cluster,
                            own,
                            |id| id != own && id <= MAX_PEER_ID,
                            grant,
                            timeout,
                        )
                    });
                let setup = match r {
                    Ok(peer) => Setup::Connected {
                        peer,
                        stream,
                        direction: Direction::Inbound,
                        welcome: None,
                    },
                    Err(e) => {
                        let reason = format!("authentication failed: {e}");
                        warn!(?addr, %reason, "refusing connection");
                        Setup::Refused { addr, reason }
                    }
                };
                let _ = tx.send(setup);
                pending.fetch_sub(1, Ordering::Relaxed);
                waker.wake();
            });
        if let Err(e) = spawned {
            self.handshakes.fetch_sub(1, Ordering::Relaxed);
            warn!(error = %e, "cannot spawn a handshake thread; connection dropped");
        }
    }

    /// Offers held frames again (their ring may have room now).
    fn retry_held(&mut self, inbound: &mut impl Inbound) -> bool {
        let mut any = false;
        for slot in 0..self.conns.len() {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.held.is_empty() || conn.closing {
                continue;
            }
            let p = &mut self.peers[conn.peer as usize];
            let before = self.delivered_this_turn;
            deliver_held(
                conn,
                &mut p.counters,
                &mut self.delivered_this_turn,
                self.now,
                inbound,
            );
            any |= self.delivered_this_turn != before;
        }
        any
    }

    /// Starts due sends: control first, then batches; credit grants on inbound connections.
    fn flush(&mut self) -> Result<bool> {
        let age = Duration::from_micros(self.cfg.limits.batch_age_max_us);
        let delay = Duration::from_micros(self.cfg.faults.delay_batches_us);
        let (id, epoch, now) = (self.cfg.id, self.cfg.epoch, self.now);
        let mut any = false;
        for slot in 0..self.conns.len() {
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.send_busy || conn.closing {
                continue;
            }
            let counters = &mut self.peers[conn.peer as usize].counters;
            let entry = match conn.direction {
                Direction::Outbound => {
                    if start_control_send(conn, counters) {
                        Some(send_entry(conn, slot))
                    } else if conn.batch_due(now, age, delay) {
                        if conn.batch.len() >= conn.batch_limit_bytes {
                            counters.flushes_by_size += 1;
                        } else {
                            counters.flushes_by_age += 1;
                        }
                        Some(start_batch_send(conn, slot, id, epoch))
                    } else {
                        None
                    }
                }
                Direction::Inbound => {
                    let due = conn.grant_since.is_some_and(|g| {
                        now.saturating_duration_since(g) >= age
                            || conn.grant_data_bytes * 4 >= conn.data_window_bytes
                            || conn.grant_control_bytes * 4 >= conn.control_window_bytes
                    });
                    if due {
                        Some(start_credit_send(conn, slot, id, epoch))
                    } else {
                        None
                    }
                }
            };
            if let Some(e) = entry {
                any = true;
                push_sqe(&mut self.ring, &mut self.inflight, &e)?;
            }
        }
        Ok(any)
    }

    /// Closes a connection: logs, reports, shuts the socket down and cancels its
    /// operations. Its buffers live until its last completion (`free_if_done`).
    fn close_conn(&mut self, slot: usize, reason: String) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        if conn.closing {
            return;
        }
        conn.closing = true;
        let (peer, direction, fd) = (conn.peer, conn.direction, conn.fd.as_raw_fd());
        warn!(peer, ?direction, %reason, "closing connection");
        if reason.starts_with("bad frame") {
            self.counters.bad_frames += 1;
        }
        // SAFETY: `fd` is the connection's open socket; shutdown takes no memory.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        if conn.ops > 0 {
            let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
                .build()
                .user_data(user_data(OP_CANCEL, 0, 0));
            if push_sqe(&mut self.ring, &mut self.inflight, &e).is_err() {
                debug!("cancel not queued; shutdown ends the operations");
            }
        }
        let p = &mut self.peers[peer as usize];
        let link = match direction {
            Direction::Outbound => &mut p.out,
            Direction::Inbound => &mut p.inn,
        };
        *link = Link::Lost(reason.clone());
        self.events.push_back(Event::PeerLost {
            peer,
            direction,
            reason,
        });
    }

    fn free_if_done(&mut self, slot: usize) {
        if let Some(Some(c)) = self.conns.get(slot)
            && c.closing
            && c.ops == 0
        {
            self.conns[slot] = None;
            self.free_slots.push(slot);
        }
    }
}

/// What the receive path needs besides the connection (disjoint borrows of the transport).
struct Cx<'a> {
    limits_frame_bytes_max: usize,
    counters: &'a mut PeerCounters,
    scratch: &'a mut rkyv::util::AlignedVec<16>,
    delivered: &'a mut usize,
    now: Instant,
}

/// Feeds received bytes through the frame parser. Whole frames are handled in place in the
/// receive buffer; only a frame split across receives is copied (into `partial`), and only a
/// batch that meets a full ring is copied (into `held`). Errors are close reasons.
fn on_bytes(
    conn: &mut Conn,
    mut input: &[u8],
    cx: &mut Cx<'_>,
    inbound: &mut impl Inbound,
) -> std::result::Result<(), String> {
    while !input.is_empty() {
        if !conn.partial.is_empty() || input.len() < NET_HEADER_BYTES {
            // Reassembly: first the header, then (its length checked) the rest.
            let need = if conn.partial.len() < NET_HEADER_BYTES {
                NET_HEADER_BYTES
            } else {
                frame_len_checked(&conn.partial, cx.limits_frame_bytes_max)?
            };
            let take = (need - conn.partial.len()).min(input.len());
            conn.partial.extend_from_slice(&input[..take]);
            input = &input[take..];
            if conn.partial.len() == NET_HEADER_BYTES {
                let total = frame_len_checked(&conn.partial, cx.limits_frame_bytes_max)?;
                conn.partial.reserve(total - NET_HEADER_BYTES);
            }
            if conn.partial.len() >= NET_HEADER_BYTES
                && conn.partial.len()
                    == frame_len_checked(&conn.partial, cx.limits_frame_bytes_max)?
            {
                let frame = std::mem::take(&mut conn.partial);
                let r = on_frame(conn, &frame, cx, inbound);
                conn.partial = frame;
                conn.partial.clear();
                r?;
            }
            continue;
        }
        let total = frame_len_checked(input, cx.limits_frame_bytes_max)?;
        if input.len() < total {
            conn.partial.reserve(total);
            conn.partial.extend_from_slice(input);
            break;
        }
        on_frame(conn, &input[..total], cx, inbound)?;
        input = &input[total..];
    }
    Ok(())
}

fn frame_len_checked(bytes: &[u8], limit: usize) -> std::result::Result<usize, String> {
    NetHeader::decode(bytes, limit)
        .map(|h| h.frame_bytes())
        .map_err(|e| format!("bad frame: {e}"))
}

/// One whole frame.
fn on_frame(
    conn: &mut Conn,
    frame: &[u8],
    cx: &mut Cx<'_>,
    inbound: &mut impl Inbound,
) -> std::result::Result<(), String> {
    let h = NetHeader::decode(frame, cx.limits_frame_bytes_max)
        .map_err(|e| format!("bad frame: {e}"))?;
    if h.sender != conn.peer {
        return Err(format!(
            "bad frame: sender {} on peer {}'s connection",
            h.sender, conn.peer
        ));
    }
    if h.seq != conn.expect_seq {
        return Err(format!(
            "bad frame: sequence {} where {} was due",
            h.seq, conn.expect_seq
        ));
    }
    conn.expect_seq = conn.expect_seq.wrapping_add(1);
    let total = frame.len() as u64;
    cx.counters.bytes_received += total;
    let payload = &frame[NET_HEADER_BYTES..];
    match (h.kind, conn.direction) {
        (Kind::Credit, Direction::Outbound) => {
            let (d, c) = (h.data_credit_bytes as u64, h.control_credit_bytes as u64);
            if conn.data_credit_bytes + d > conn.data_window_bytes
                || conn.control_credit_bytes + c > conn.control_window_bytes
            {
                return Err("bad frame: credit beyond the window".into());
            }
            conn.data_credit_bytes += d;
            conn.control_credit_bytes += c;
            conn.credit_blocked = false;
        }
        (Kind::Batch, Direction::Inbound) => {
            if conn.data_in_use_bytes + total > conn.data_window_bytes {
                return Err(format!(
                    "bad frame: {} data bytes beyond the {}-byte credit",
                    conn.data_in_use_bytes + total - conn.data_window_bytes,
                    conn.data_window_bytes
                ));
            }
            let n = wire::validate_batch(payload).map_err(|e| format!("bad frame: {e}"))?;
            conn.data_in_use_bytes += total;
            cx.counters.batches_received += 1;
            cx.counters.frames_received += n as u64;
            if conn.held.is_empty() {
                let mut at = 0;
                loop {
                    let Some((req, next)) = wire::next_validated(payload, at) else {
                        grant_data(conn, total, cx.now);
                        break;
                    };
                    match inbound.deliver(conn.peer, req) {
                        Delivered::Accepted => {
                            *cx.delivered += 1;
                            at = next;
                        }
                        Delivered::Full => {
                            cx.counters.deliveries_full += 1;
                            conn.held.extend_from_slice(frame);
                            conn.held_off = 0;
                            conn.held_entry = at;
                            break;
                        }
                    }
                }
            } else {
                conn.held.extend_from_slice(frame);
            }
        }
        (Kind::Control, Direction::Inbound) => {
            if conn.control_in_use_bytes + total > conn.control_window_bytes {
                return Err("bad frame: control bytes beyond the credit".into());
            }
            let (kind, body) =
                wire::decode_control(payload, cx.scratch).map_err(|e| format!("bad frame: {e}"))?;
            cx.counters.control_received += 1;
            inbound.control(conn.peer, kind, body);
            *cx.delivered += 1;
            conn.grant_control_bytes += total;
            conn.grant_since.get_or_insert(cx.now);
            conn.control_in_use_bytes += total;
        }
        (kind, dir) => {
            return Err(format!(
                "bad frame: {kind:?} frame on an {dir:?} connection"
            ));
        }
    }
    Ok(())
}

fn grant_data(conn: &mut Conn, bytes: u64, now: Instant) {
    conn.grant_data_bytes += bytes;
    conn.grant_since.get_or_insert(now);
}

/// Delivers held frames in order until one meets a full ring again.
fn deliver_held(
    conn: &mut Conn,
    counters: &mut PeerCounters,
    delivered: &mut usize,
    now: Instant,
    inbound: &mut impl Inbound,
) {
    while conn.held_off < conn.held.len() {
        let frame_start = conn.held_off;
        // Our own copy of a frame that passed validation: its header decodes.
        let Ok(h) = NetHeader::decode(&conn.held[frame_start..], wire::MAX_FRAME_BYTES) else {
            conn.held.clear();
            break;
        };
        let end = frame_start + h.frame_bytes();
        let payload = &conn.held[frame_start + NET_HEADER_BYTES..end];
        let mut at = conn.held_entry;
        while let Some((req, next)) = wire::next_validated(payload, at) {
            if inbound.deliver(conn.peer, req) == Delivered::Full {
                counters.deliveries_full += 1;
                conn.held_entry = at;
                return;
            }
            *delivered += 1;
            at = next;
        }
        conn.held_off = end;
        conn.held_entry = 0;
        grant_data(conn, h.frame_bytes() as u64, now);
    }
    conn.held.clear();
    conn.held_off = 0;
    conn.held_entry = 0;
}

/// Moves the filled batch into `send_buf`, stamps its header and takes its credit.
fn start_batch_send(conn: &mut Conn, slot: usize, id: PeerId, epoch: u32) -> squeue::Entry {
    debug_assert!(!conn.send_busy && conn.batch_requests > 0);
    std::mem::swap(&mut conn.batch, &mut conn.send_buf);
    conn.batch.clear();
    conn.batch.resize(NET_HEADER_BYTES, 0);
    let payload = (conn.send_buf.len() - NET_HEADER_BYTES) as u32;
    NetHeader {
        kind: Kind::Batch,
        payload_bytes: payload,
        sender: id,
        epoch,
        seq: conn.next_seq,
        data_credit_bytes: 0,
        control_credit_bytes: 0,
    }
    .write(&mut conn.send_buf);
    conn.next_seq = conn.next_seq.wrapping_add(1);
    conn.data_credit_bytes -= conn.send_buf.len() as u64;
    conn.send_is_batch = true;
    conn.send_requests = conn.batch_requests;
    conn.batch_requests = 0;
    conn.credit_blocked = false;
    conn.flush_requested = false;
    conn.send_off = 0;
    send_entry(conn, slot)
}

fn start_control_send(conn: &mut Conn, counters: &mut PeerCounters) -> bool {
    let mut started = false;
    while let Some(f) = conn.control_q.front() {
        let len = f.len() as u64;
        if len > conn.control_credit_bytes
            || (started && conn.send_buf.len() + f.len() > CONTROL_SEND_BYTES_MAX)
        {
            break;
        }
        if !started {
            conn.send_buf.clear();
            started = true;
        }
        let at = conn.send_buf.len();
        conn.send_buf.extend_from_slice(f);
        conn.send_buf[at + 20..at + 24].copy_from_slice(&conn.next_seq.to_le_bytes());
        conn.next_seq = conn.next_seq.wrapping_add(1);
        conn.control_credit_bytes -= len;
        counters.control_sent += 1;
        conn.control_q.pop_front();
    }
    if started {
        conn.send_off = 0;
        conn.send_is_batch = false;
        conn.send_requests = 0;
    }
    started
}

fn start_credit_send(conn: &mut Conn, slot: usize, id: PeerId, epoch: u32) -> squeue::Entry {
    let d = conn.grant_data_bytes.min(u32::MAX as u64);
    let c = conn.grant_control_bytes.min(u32::MAX as u64);
    conn.grant_data_bytes -= d;
    conn.grant_control_bytes -= c;
    conn.data_in_use_bytes -= d;
    conn.control_in_use_bytes -= c;
    conn.grant_since = None;
    conn.send_buf.clear();
    conn.send_buf.resize(NET_HEADER_BYTES, 0);
    wire::write_credit(
        &mut conn.send_buf,
        id,
        epoch,
        conn.next_seq,
        d as u32,
        c as u32,
    );
    conn.next_seq = conn.next_seq.wrapping_add(1);
    conn.send_off = 0;
    conn.send_is_batch = false;
    conn.send_requests = 0;
    send_entry(conn, slot)
}

/// The send of `send_buf[send_off..]`.
fn send_entry(conn: &mut Conn, slot: usize) -> squeue::Entry {
    conn.send_busy = true;
    conn.ops += 1;
    let rest = &conn.send_buf[conn.send_off..];
    opcode::Send::new(
        types::Fd(conn.fd.as_raw_fd()),
        rest.as_ptr(),
        rest.len() as u32,
    )
    .flags(libc::MSG_NOSIGNAL)
    .build()
    .user_data(user_data(OP_SEND, conn.gen_, slot))
}

/// Pushes one submission, making room first if the queue is full.
fn push_sqe(ring: &mut IoUring, inflight: &mut usize, e: &squeue::Entry) -> Result<()> {
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
            std::mem::forget(self.bufs.take());
            std::mem::forget(std::mem::take(&mut self.conns));
            let b = std::mem::replace(&mut self.wake_buf, Box::new([0; 8]));
            std::mem::forget(b);
            return;
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(user_data(OP_CANCEL, 0, 0));
        let _ = push_sqe(&mut self.ring, &mut self.inflight, &cancel);
        let deadline = Instant::now() + ms(DROP_DRAIN_MS);
        while self.inflight > 0 && Instant::now() < deadline {
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            if let Err(e) = self.ring.submitter().submit_with_args(1, &args)
                && e.raw_os_error() == Some(libc::EEXIST)
            {
                // Not the ring's owner after all (a thread token reused by a new thread):
                // the completions cannot be awaited here; the buffers are leaked below.
                break;
            }
            let mut done = Vec::new();
            for cqe in self.ring.completion() {
                done.push((cqe.user_data(), cqe.flags()));
            }
            for (ud, flags) in done {
                let (op, _, _) = split_user_data(ud);
                if op != OP_RECV || self.bufs.is_none() || !cqueue::more(flags) {
                    self.inflight = self.inflight.saturating_sub(1);
                }
            }
        }
        if self.inflight > 0 {
            warn!(
                ops = self.inflight,
                "io_uring operations still in flight at drop; leaking their buffers"
            );
            std::mem::forget(self.bufs.take());
            std::mem::forget(std::mem::take(&mut self.conns));
            let b = std::mem::replace(&mut self.wake_buf, Box::new([0; 8]));
            std::mem::forget(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{RequestHeader, frame_len};
    use crate::transport::{ClusterSecret, Limits};

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
