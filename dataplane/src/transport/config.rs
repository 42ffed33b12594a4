//! What a transport is started with: its identity and peers, its limits and timings, and the
//! faults to inject. Every limit of the transport is a field of [`Limits`] or a named constant,
//! and [`Limits::validate`] checks the relations between them before anything starts.

use super::{ClusterSecret, MAX_RECV_BUFFERS, PeerId, TransportError, wire};
use std::net::SocketAddr;

/// Limits and timings. Every limit of the transport is here or a named constant.
#[derive(Clone, Debug)]
pub struct Limits {
    /// A batch is flushed when it reaches this many bytes (frame header included).
    pub batch_bytes_max: usize,
    /// ... or when its first request is this old.
    pub batch_age_max_us: u64,
    /// Most bytes of batches one send carries. A batch that fills while the connection's
    /// send is in flight is closed as a frame of its own (≤ `batch_bytes_max`) and the next
    /// starts behind it, up to this; the next send takes them all, so a sender that fills
    /// batches faster than the kernel sends them pays for one send per this many bytes rather
    /// than one per batch. It delays nothing (only batches already full wait, behind a send
    /// already in flight). `batch_bytes_max` or less: one batch a send. Default:
    /// [`DEFAULT_SEND_BYTES_MAX`]; what it buys is measured in
    /// `benches/results/dispatch-remote.md`.
    pub send_bytes_max: usize,
    /// Longest frame accepted from a peer (checked on the header, before buffering).
    pub frame_bytes_max: usize,
    /// Data credit granted to each sender: bytes of batch frames it may have in flight.
    pub data_credit_bytes: u32,
    /// Control credit granted to each sender.
    pub control_credit_bytes: u32,
    /// Bytes of one receive buffer.
    pub recv_buffer_bytes: usize,
    /// Provided receive buffers (a power of two ≤ [`MAX_RECV_BUFFERS`]).
    pub recv_buffers: usize,
    /// Use plain `recv` into per-connection buffers even where multishot receive into a
    /// provided-buffer ring is available (the fallback path, selectable for tests).
    pub force_plain_recv: bool,
    /// A handshake not finished in this time, all of it (not each read), is refused: a peer
    /// that trickles bytes holds its handshake slot no longer than this.
    pub handshake_timeout_ms: u64,
    /// Connecting to a peer is retried for this long.
    pub connect_timeout_ms: u64,
    /// A single-issuer ring: the kernel keeps the ring's completion work (arrived data,
    /// finished sends) until our own `poll` asks for it, instead of waking the network thread
    /// for it (`IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN`, Linux ≥ 6.1; a plain
    /// ring where the kernel refuses it). Needed for [`Limits::park_min_wait_us`] to save
    /// wake-ups. The price: the transport must be polled from one thread, the first that
    /// polls it (it may be created on another; a poll from a second thread is an error, and
    /// dropping it on a second thread leaks its receive buffers, with a warning, because only
    /// the owning thread can wait for the kernel to let go of them). Default: on.
    pub single_issuer: bool,
    /// Wake-up coalescing under load: when the last turn that woke delivered at least 64
    /// requests, the next park asks the kernel to hold the wake-up until this many µs have
    /// passed (or many completions are ready), so one wake-up takes in many batches
    /// (io_uring's `min_wait`, Linux ≥ 6.12; only with [`Limits::single_issuer`]; ignored
    /// where unsupported). It adds at most this much latency to what arrives during the hold
    /// (a [`Waker`](super::Waker) too), never beyond `poll`'s timeout or the next batch's age limit, and
    /// only under load: request–response traffic (one request per turn) and an idle transport
    /// wake at the first completion. 0 disables. Default: 50 µs, the default batch age;
    /// what it buys is measured in `benches/results/dispatch-remote.md`.
    pub park_min_wait_us: u32,
}

/// Default batch limit: 32 KiB (one send of a 16–64 KiB batch amortises the system call).
pub const DEFAULT_BATCH_BYTES_MAX: usize = 32 << 10;
/// Default batch age limit (Flink's buffer timeout, scaled to this data plane).
pub const DEFAULT_BATCH_AGE_MAX_US: u64 = 50;
/// Default most bytes of batches one send carries (four default batches).
pub const DEFAULT_SEND_BYTES_MAX: usize = 4 * DEFAULT_BATCH_BYTES_MAX;
/// Default frame limit.
pub const DEFAULT_FRAME_BYTES_MAX: usize = 1 << 20;
/// Default data window per sender.
pub const DEFAULT_DATA_CREDIT_BYTES: u32 = 512 << 10;
/// Default wake-up coalescing under load (see [`Limits::park_min_wait_us`]).
pub const DEFAULT_PARK_MIN_WAIT_US: u32 = 50;
/// Default control window per sender.
pub const DEFAULT_CONTROL_CREDIT_BYTES: u32 = 1 << 20;

/// Largest `send_bytes_max` accepted (each connection keeps two buffers about this large).
pub const SEND_BYTES_MAX_LIMIT: usize = 16 << 20;

const _: () = assert!(DEFAULT_BATCH_BYTES_MAX <= DEFAULT_FRAME_BYTES_MAX);
const _: () = assert!(DEFAULT_SEND_BYTES_MAX <= SEND_BYTES_MAX_LIMIT);
const _: () = assert!(DEFAULT_FRAME_BYTES_MAX <= wire::FRAME_BYTES_MAX);
const _: () = assert!(DEFAULT_BATCH_BYTES_MAX <= DEFAULT_DATA_CREDIT_BYTES as usize);
// The largest control frame fits the control window, or control could never be sent.
const _: () = assert!(
    wire::NET_HEADER_BYTES + wire::CONTROL_PREFIX_BYTES + wire::MAX_CONTROL_BODY_BYTES + 256
        <= DEFAULT_CONTROL_CREDIT_BYTES as usize
);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            batch_bytes_max: DEFAULT_BATCH_BYTES_MAX,
            batch_age_max_us: DEFAULT_BATCH_AGE_MAX_US,
            send_bytes_max: DEFAULT_SEND_BYTES_MAX,
            frame_bytes_max: DEFAULT_FRAME_BYTES_MAX,
            data_credit_bytes: DEFAULT_DATA_CREDIT_BYTES,
            control_credit_bytes: DEFAULT_CONTROL_CREDIT_BYTES,
            recv_buffer_bytes: 64 << 10,
            recv_buffers: 64,
            force_plain_recv: false,
            handshake_timeout_ms: 2_000,
            connect_timeout_ms: 10_000,
            single_issuer: true,
            park_min_wait_us: DEFAULT_PARK_MIN_WAIT_US,
        }
    }
}

impl Limits {
    /// Checks the relations between the settings.
    pub fn validate(&self) -> Result<(), TransportError> {
        let bad = |m: String| Err(TransportError::Config(m));
        let min_batch = wire::NET_HEADER_BYTES + wire::entry_bytes(wire::MIN_REQUEST_FRAME_BYTES);
        if self.batch_bytes_max < min_batch || self.batch_bytes_max > self.frame_bytes_max {
            return bad(format!(
                "batch_bytes_max {} must be in {min_batch}..=frame_bytes_max ({})",
                self.batch_bytes_max, self.frame_bytes_max
            ));
        }
        if self.send_bytes_max > SEND_BYTES_MAX_LIMIT {
            return bad(format!(
                "send_bytes_max {} must be at most {SEND_BYTES_MAX_LIMIT}",
                self.send_bytes_max
            ));
        }
        if self.frame_bytes_max > wire::FRAME_BYTES_MAX
            || self.frame_bytes_max % wire::WIRE_ALIGN != 0
        {
            return bad(format!(
                "frame_bytes_max {} must be a multiple of 16 and ≤ {}",
                self.frame_bytes_max,
                wire::FRAME_BYTES_MAX
            ));
        }
        if (self.data_credit_bytes as usize) < self.batch_bytes_max {
            return bad(format!(
                "data_credit_bytes {} is below batch_bytes_max {}: a full batch could never be sent",
                self.data_credit_bytes, self.batch_bytes_max
            ));
        }
        if (self.control_credit_bytes as usize) < 1024 {
            return bad("control_credit_bytes must be at least 1024".into());
        }
        if !self.recv_buffers.is_power_of_two() || self.recv_buffers > MAX_RECV_BUFFERS {
            return bad(format!(
                "recv_buffers {} must be a power of two ≤ {MAX_RECV_BUFFERS}",
                self.recv_buffers
            ));
        }
        if self.park_min_wait_us > 1_000_000 {
            return bad(format!(
                "park_min_wait_us {} must be at most 1 s",
                self.park_min_wait_us
            ));
        }
        if self.handshake_timeout_ms == 0 || self.handshake_timeout_ms > 600_000 {
            return bad(format!(
                "handshake_timeout_ms {} must be in 1..=600000",
                self.handshake_timeout_ms
            ));
        }
        if self.recv_buffer_bytes < 4096 || self.recv_buffer_bytes > (1 << 24) {
            return bad(format!(
                "recv_buffer_bytes {} must be in 4096..=16 MiB",
                self.recv_buffer_bytes
            ));
        }
        Ok(())
    }
}

/// Cut one peer's outbound connection after a number of batches or bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The peer whose connection (the one we opened) is cut.
    pub peer: PeerId,
    /// After this many batches have been sent on it (checked as each send completes; a send
    /// that carries several batches may take the count past it).
    pub after_batches: Option<u64>,
    /// After this many bytes have been sent on it.
    pub after_bytes: Option<u64>,
}

/// Fault injection (this kernel has no `netem`). Off by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Hold every outbound send of batches until the first request of its first batch is at
    /// least this old (batches gathered behind a send in flight leave with it).
    pub delay_batches_us: u64,
    /// Cut connections.
    pub cuts: Vec<Cut>,
}

/// Everything [`Transport::start`](super::Transport::start) needs.
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// This worker's id.
    pub id: PeerId,
    /// Where to listen (port 0: an ephemeral port, see [`Transport::local_addr`](super::Transport::local_addr)).
    pub listen: SocketAddr,
    /// Peers to connect to at start; more with [`Transport::connect`](super::Transport::connect).
    pub peers: Vec<(PeerId, SocketAddr)>,
    /// The cluster secret.
    pub secret: ClusterSecret,
    /// The cluster id both proofs are bound to.
    pub cluster_id: u64,
    /// Limits.
    pub limits: Limits,
    /// Fault injection.
    pub faults: Faults,
}

impl TransportConfig {
    /// A configuration with default limits, no peers and no faults.
    pub fn new(id: PeerId, listen: SocketAddr, secret: ClusterSecret, cluster_id: u64) -> Self {
        TransportConfig {
            id,
            listen,
            peers: Vec::new(),
            secret,
            cluster_id,
            limits: Limits::default(),
            faults: Faults::default(),
        }
    }
}
