//! The transport between workers: batched ring-format frames over TCP, driven by io_uring.
//!
//! A remote chained request is the expensive hop of the data plane, and what makes it cheap is
//! batching: requests for the same destination are appended to one outbound batch, the batch
//! crosses the kernel once, and on arrival each request is validated and copied once, from the
//! receive buffer into the destination ring ([`wire`] has the format). Batches that fill while
//! the connection's one send is in flight go out together in the next send
//! ([`Limits::send_bytes_max`]). The network thread owns a [`Transport`] and calls
//! [`Transport::poll`] in its loop: one `io_uring_enter` per turn submits every send and
//! re-arm of the turn and, when there is nothing to do, parks until a completion, a
//! [`Waker`], or the next batch's age limit. Poll a transport from one thread only, the first
//! that polls it: by default its io_uring is a single-issuer ring owned by that thread
//! ([`Limits::single_issuer`]).
//!
//! # Connections
//! One TCP connection per ordered pair of peers: A's requests to B travel on the connection A
//! opened to B (its *outbound* link), and B sends back on it only credit. Each connection
//! starts with a mutual challenge–response on the cluster secret ([`auth`]), run on a helper
//! thread with one deadline for the whole handshake, so a garbage, slow or unauthenticated
//! client costs the event loop nothing and holds its handshake slot for a bounded time.
//!
//! # Flow control
//! Credit, in bytes of frames, per connection and per class (as in Flink): the receiver grants
//! a window in its Welcome and returns credit for a data frame only once every request of it
//! has been accepted by the [`Inbound`] (its rings had room). A sender never has more bytes in
//! flight than its credit, so a slow worker slows its senders instead of growing memory.
//! Control and state messages have their own window and are handed to the `Inbound` at once,
//! even while data frames before them wait for ring space: held data can never block the
//! control traffic that would release it (otherwise full rings and exhausted credit could wait
//! on each other forever).
//!
//! # Faults
//! A bad frame (truncated, oversized, corrupt header, failed validation, credit or sequence
//! violation) closes *that* connection with a logged reason and an [`Event::PeerLost`]; every
//! other connection is served on. Nothing is resent (later work). [`Faults`] injects batch
//! delay and connection cuts, because the test machine's kernel has no `netem`.
//!
//! # Files
//! - `event_loop.rs`: [`Transport`], its ring, and `poll` (reap, work, one `io_uring_enter`);
//!   `op.rs`: the operations it submits and their user data; `teardown.rs`: drop (cancel,
//!   wait for the kernel to let go of every buffer, or leak them);
//! - `sending.rs` / `receiving.rs`: the send and receive paths of the loop; `framing.rs`:
//!   received bytes to checked frames to deliveries, apart from the loop;
//! - `conn/`: one connection, in halves: `send.rs` (batch, control queue, send in flight),
//!   `recv.rs` (reassembly, held deliveries), `credit.rs` (windows, grants);
//! - `lifecycle.rs`: connecting, accepting, closing and freeing connections; `handshake.rs`:
//!   the helper threads that connect and authenticate, using `auth/`; `pending.rs`: the
//!   handshake slots, and which connection is dropped when they are all taken;
//! - `wire.rs`: the frame format; `bufring.rs`: the provided receive buffers; `config.rs`:
//!   [`TransportConfig`], [`Limits`] and [`Faults`]; `refusals.rs`: the rate-limited log of
//!   refused connections; `idle_spin.rs`: watching the ring a while before waiting in the
//!   kernel, where the deployment chose to spin.
//!
//! # Example
//! ```no_run
//! use clasp_dataplane::transport::{
//!     ClusterSecret, Delivered, Event, Inbound, Transport, TransportConfig,
//! };
//! use std::time::Duration;
//!
//! struct Sink;
//! impl Inbound for Sink {
//!     fn deliver(&mut self, from: u32, frame: &[u8]) -> Delivered {
//!         // copy `frame` into the destination ring; `Delivered::Full` if it has no room
//!         Delivered::Accepted
//!     }
//!     fn control(&mut self, from: u32, kind: u16, body: &[u8]) {}
//!     fn event(&mut self, event: Event) { eprintln!("{event:?}") }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let secret = ClusterSecret::new(std::fs::read("/etc/clasp/secret")?)?;
//! let mut cfg = TransportConfig::new(1, "0.0.0.0:7001".parse()?, secret, 0xC1A5);
//! cfg.peers.push((2, "10.0.0.2:7001".parse()?));
//! let mut t = Transport::start(cfg)?;
//! let waker = t.waker(); // other threads: waker.wake() to end a parked poll
//! # let frame: Vec<u8> = Vec::new();
//! loop {
//!     // frame: one request frame (dataplane::request), written once at emission
//!     while !t.try_append(2, &frame)? {
//!         t.poll(Duration::from_millis(1), &mut Sink)?; // no credit or space yet
//!     }
//!     t.poll(Duration::from_millis(10), &mut Sink)?;
//! #   break;
//! }
//! # Ok(()) }
//! ```

pub mod auth;
mod bufring;
mod config;
mod conn;
mod event_loop;
mod framing;
mod handshake;
mod idle_spin;
mod lifecycle;
mod op;
mod pending;
mod receiving;
mod refusals;
mod sending;
mod teardown;
pub mod wire;

pub use auth::{AuthError, ClusterSecret};
pub use config::{
    Cut, DEFAULT_BATCH_AGE_MAX_US, DEFAULT_BATCH_BYTES_MAX, DEFAULT_CONTROL_CREDIT_BYTES,
    DEFAULT_DATA_CREDIT_BYTES, DEFAULT_FRAME_BYTES_MAX, DEFAULT_PARK_MIN_WAIT_US,
    DEFAULT_SEND_BYTES_MAX, Faults, Limits, SEND_BYTES_MAX_LIMIT, TransportConfig,
};
pub use event_loop::Transport;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// A worker's id.
pub type PeerId = u32;

/// Highest peer id (ids index per-peer tables).
pub const MAX_PEER_ID: PeerId = 4095;
/// Most handshakes in progress at once (handshake slots). When every slot is taken, the
/// oldest connection without a complete Hello is dropped to make room for a new one.
pub const MAX_PENDING_HANDSHAKES: usize = 64;
/// Most control messages queued for one peer.
pub const CONTROL_QUEUE_MAX: usize = 1024;
/// io_uring submission queue entries (the completion queue is 4× larger).
pub const RING_ENTRIES: u32 = 256;
/// Most provided receive buffers (the kernel's limit on a buffer ring is 32768).
pub const MAX_RECV_BUFFERS: usize = 4096;

const _: () = assert!(MAX_RECV_BUFFERS <= 32768 && MAX_RECV_BUFFERS.is_power_of_two());

/// What happened to a request frame handed to [`Inbound::deliver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Copied into its ring: the transport moves on.
    Accepted,
    /// No room now: the transport keeps this frame and the rest of its batch, returns no
    /// credit for it, and offers it again on a later `poll`. Nothing is dropped.
    Full,
}

/// Which way a connection carries requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// We opened it and send requests on it.
    Outbound,
    /// The peer opened it and sends requests on it.
    Inbound,
}

/// Something the worker should know about (it surfaces faults to the planner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An authenticated connection to or from `peer` is up.
    PeerUp {
        /// The peer.
        peer: PeerId,
        /// Which connection.
        direction: Direction,
    },
    /// An authenticated connection was lost; what was in flight on it is lost too.
    PeerLost {
        /// The peer.
        peer: PeerId,
        /// Which connection.
        direction: Direction,
        /// Why (also logged).
        reason: String,
    },
    /// A connection was refused before it authenticated (counted in
    /// [`TransportCounters::refused`], logged at most once per second per source address; the
    /// cluster is unaffected, so it is not a fault).
    Refused {
        /// Where it came from.
        addr: Option<SocketAddr>,
        /// Why.
        reason: String,
    },
    /// Connecting to a peer failed for good (it never answered, or failed authentication).
    ConnectFailed {
        /// The peer.
        peer: PeerId,
        /// Why.
        reason: String,
        /// The peer refused us because a connection from a process under our id is up: this
        /// process is a second one under that id (its first keeps the connection).
        id_taken: bool,
        /// The peer refused our handshake for a reason dialling again cannot change: another
        /// cluster id or secret, an id it does not accept, another handshake version.
        refused: bool,
    },
}

/// The worker's side of the receive path.
pub trait Inbound {
    /// One validated request frame from `from`, in the order it was sent. Copy it into its
    /// ring, or say [`Delivered::Full`].
    fn deliver(&mut self, from: PeerId, frame: &[u8]) -> Delivered;
    /// One validated control or state message.
    fn control(&mut self, from: PeerId, kind: u16, body: &[u8]);
    /// A connection event. Default: ignored (it is logged anyway).
    fn event(&mut self, event: Event) {
        let _ = event;
    }
}

/// Per-peer counters, both directions (the worker reports them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCounters {
    /// Bytes of frames sent (all kinds).
    pub bytes_sent: u64,
    /// Request frames sent.
    pub frames_sent: u64,
    /// Batches sent (each a frame of its own).
    pub batches_sent: u64,
    /// Sends that carried batches: fewer than `batches_sent` where batches that filled while a
    /// send was in flight went out together (`Limits::send_bytes_max`).
    pub batch_sends: u64,
    /// Control messages sent.
    pub control_sent: u64,
    /// Bytes of frames received (all kinds).
    pub bytes_received: u64,
    /// Request frames received (validated).
    pub frames_received: u64,
    /// Batches received.
    pub batches_received: u64,
    /// Control messages received.
    pub control_received: u64,
    /// Batches flushed because they reached `batch_bytes_max`.
    pub flushes_by_size: u64,
    /// Batches flushed because they reached `batch_age_max_us` (or credit ran out).
    pub flushes_by_age: u64,
    /// `try_append` answers "not now" for lack of credit or space.
    pub append_refusals: u64,
    /// `Inbound::deliver` answers `Full`.
    pub deliveries_full: u64,
}

/// Transport-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransportCounters {
    /// Connections refused before authentication.
    pub refused: u64,
    /// Connections closed for a bad frame.
    pub bad_frames: u64,
    /// Times the completion queue overflowed (completions were kept by the kernel and
    /// flushed; a sign the queue is too small).
    pub cq_overflows: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
    /// Turns of `poll`.
    pub turns: u64,
    /// Thread CPU ns spent watching the ring before waiting (the idle spin; not work).
    pub idle_spin_ns: u64,
    /// Thread CPU ns spent inside the `io_uring_enter` calls that waited after a quiet turn:
    /// going to sleep, waking, and the completion work the kernel ran on the way back.
    pub sleep_cpu_ns: u64,
    /// Whether receive uses multishot into provided buffers (false: plain recv).
    pub multishot: bool,
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Inconsistent settings.
    #[error("transport configuration: {0}")]
    Config(String),
    /// A system call failed.
    #[error("transport i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The listening socket could not be bound (the address is taken, or not this host's).
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Never connected to, and not configured.
    #[error("unknown peer {0}")]
    UnknownPeer(PeerId),
    /// The connection to this peer was lost.
    #[error("connection to peer {peer} lost: {reason}")]
    PeerLost {
        /// The peer.
        peer: PeerId,
        /// Why.
        reason: String,
    },
    /// A request frame larger than the peer's frame limit or data window (one larger than a
    /// batch goes alone), or a control body larger than allowed.
    #[error("frame of {frame_bytes} bytes exceeds the limit of {limit_bytes} ({what})")]
    TooLarge {
        /// Its length.
        frame_bytes: usize,
        /// The limit.
        limit_bytes: usize,
        /// What sets the limit, in the terms a user sets it in.
        what: &'static str,
    },
    /// A request frame that is not well-formed (the receiver would refuse it).
    #[error("malformed request frame: {0}")]
    Frame(#[from] crate::request::FrameError),
    /// A control message that cannot be encoded as a frame.
    #[error("control message: {0}")]
    Wire(#[from] wire::WireError),
}

/// Wakes a parked [`Transport::poll`] from any thread (an eventfd the ring reads).
#[derive(Clone, Debug)]
pub struct Waker {
    fd: Arc<OwnedFd>,
}

impl Waker {
    /// Ends the current or next park of the transport's `poll`. One write to an eventfd.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: `fd` is an open eventfd for as long as this Arc lives; the buffer is 8
        // valid bytes. A full counter (EAGAIN) already means "woken".
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// Lets the transport's helper threads wait a bounded time.
pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
