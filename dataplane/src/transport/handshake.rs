//! Connection set-up: connecting with retries and the mutual authentication ([`super::auth`]),
//! both on helper threads, and the state of each peer's two links.
//!
//! Why helper threads: a handshake blocks on a peer that may be slow, silent or hostile. Run
//! with a timeout off the event loop, a garbage or unauthenticated client costs the loop
//! nothing; the loop only takes finished handshakes ([`Setup`]) from a channel, woken by the
//! [`Waker`].

use super::auth::{self, ClusterSecret, Welcome};
use super::pending::SlotGuard;
use super::{Direction, MAX_PEER_ID, PeerCounters, PeerId, Waker, ms};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Connect retry backoff bounds.
const CONNECT_BACKOFF_MIN_MS: u64 = 10;
const CONNECT_BACKOFF_MAX_MS: u64 = 200;

const _: () = assert!(CONNECT_BACKOFF_MIN_MS <= CONNECT_BACKOFF_MAX_MS);

/// A finished handshake (or a failed one), from a helper thread.
pub(super) enum Setup {
    Connected {
        peer: PeerId,
        stream: TcpStream,
        direction: Direction,
        /// What the peer granted (outbound connections only).
        welcome: Option<Welcome>,
    },
    Refused {
        addr: Option<SocketAddr>,
        reason: String,
        /// An authenticated client under the id of a connected peer.
        id_taken: bool,
    },
    ConnectFailed {
        peer: PeerId,
        reason: String,
        /// The peer said a connection under our id is up (see [`InboundUp`]).
        id_taken: bool,
        /// The peer refused us for good ([`refused_for_good`]).
        refused: bool,
    },
}

/// The peers whose inbound connection is up, shared by the event loop (which keeps it) with
/// the handshake threads (which read it).
///
/// Why: a second process under the id of a connected peer (a worker started twice, a second
/// driver at long-lived workers) used to be welcomed and then dropped by the event loop, with
/// nothing said: it dialled again every second, and both sides logged each attempt until it
/// gave up. Read here, the handshake refuses it, after its proof, with [`auth::Refusal::InUse`];
/// the client dials again until its connect deadline (an earlier connection of its id may be
/// about to be seen closed), then fails saying why. The event loop's own check stays the
/// arbiter (a connection may come up between this read and the Welcome).
#[derive(Debug)]
pub(super) struct InboundUp(Box<[AtomicU64]>);

impl InboundUp {
    pub(super) fn new() -> Arc<Self> {
        let words = (MAX_PEER_ID as usize + 1).div_ceil(64);
        Arc::new(InboundUp((0..words).map(|_| AtomicU64::new(0)).collect()))
    }

    /// Marks `peer`'s inbound connection up or down.
    pub(super) fn set(&self, peer: PeerId, up: bool) {
        let (word, bit) = Self::place(peer);
        if up {
            self.0[word].fetch_or(bit, Ordering::Relaxed);
        } else {
            self.0[word].fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// Whether `peer`'s inbound connection is up.
    pub(super) fn contains(&self, peer: PeerId) -> bool {
        if peer > MAX_PEER_ID {
            return false;
        }
        let (word, bit) = Self::place(peer);
        self.0[word].load(Ordering::Relaxed) & bit != 0
    }

    fn place(peer: PeerId) -> (usize, u64) {
        assert!(peer <= MAX_PEER_ID, "peer id {peer} over {MAX_PEER_ID}");
        (peer as usize / 64, 1 << (peer % 64))
    }
}

/// One direction's link to a peer.
#[derive(Clone, Debug, Default)]
pub(super) enum Link {
    #[default]
    None,
    Connecting,
    Up {
        slot: usize,
        gen_: u32,
    },
    Lost(String),
}

/// What the transport knows of one peer.
#[derive(Default)]
pub(super) struct PeerSlot {
    /// The connection we opened (we send requests on it).
    pub out: Link,
    /// The connection the peer opened (it sends requests on it).
    pub inn: Link,
    pub counters: PeerCounters,
}

impl PeerSlot {
    /// The link of one direction.
    pub(super) fn link_mut(&mut self, direction: Direction) -> &mut Link {
        match direction {
            Direction::Outbound => &mut self.out,
            Direction::Inbound => &mut self.inn,
        }
    }
}

/// What a handshake thread needs: who we are, the secret, and where to report.
#[derive(Clone)]
pub(super) struct Handshaker {
    pub tx: mpsc::Sender<Setup>,
    pub waker: Waker,
    pub secret: ClusterSecret,
    pub cluster_id: u64,
    pub own: PeerId,
    pub handshake_timeout: Duration,
    pub inbound_up: Arc<InboundUp>,
}

/// Whether a handshake failed because the connection closed under it, not because the peer
/// refused us: a listening socket that outlives its process for a moment (a killed worker's,
/// torn down after its io_uring) accepts a connection and then resets it. Dialled again, like
/// a refused connection, until the connect deadline: the worker started in its place listens
/// on the same address.
fn closed_early(e: &auth::AuthError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(e, auth::AuthError::Io(io)
        if matches!(io.kind(), ConnectionReset | ConnectionAborted | UnexpectedEof | BrokenPipe))
}

fn id_taken(e: &auth::AuthError) -> bool {
    matches!(e, auth::AuthError::Refused(auth::Refusal::InUse))
}

/// Whether the peer refused our handshake for a reason that dialling again cannot change.
fn refused_for_good(e: &auth::AuthError) -> bool {
    use auth::Refusal::{Cluster, PeerId, Proof, Version};
    matches!(
        e,
        auth::AuthError::Refused(Cluster | PeerId | Proof | Version)
    )
}

/// How long after it starts a connection attempt retried for `connect_timeout` has reported
/// (connected or failed): its last dial may start just before the deadline, after a backoff,
/// and then takes up to a handshake timeout to connect and a few more to authenticate.
pub(super) fn answer_within(connect_timeout: Duration, handshake_timeout: Duration) -> Duration {
    connect_timeout + ms(CONNECT_BACKOFF_MAX_MS) + handshake_timeout * ANSWER_HANDSHAKE_TIMEOUTS
}

/// Handshake timeouts [`answer_within`] allows the last dial: one to connect, one for the
/// authentication's single deadline, and two to spare for a loaded host.
const ANSWER_HANDSHAKE_TIMEOUTS: u32 = 4;

impl Handshaker {
    fn report(&self, setup: Setup) {
        let _ = self.tx.send(setup);
        self.waker.wake();
    }

    /// Connects to `peer` at `addr`, retrying for `connect_timeout`, and authenticates, on a
    /// helper thread.
    pub(super) fn spawn_connect(
        self,
        peer: PeerId,
        addr: SocketAddr,
        connect_timeout: Duration,
    ) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name(format!("clasp-connect-{peer}"))
            .spawn(move || {
                let setup = self.connect(peer, addr, connect_timeout);
                self.report(setup);
            })?;
        Ok(())
    }

    fn connect(&self, peer: PeerId, addr: SocketAddr, connect_timeout: Duration) -> Setup {
        let deadline = Instant::now() + connect_timeout;
        let mut backoff = CONNECT_BACKOFF_MIN_MS;
        loop {
            match TcpStream::connect_timeout(&addr, self.handshake_timeout) {
                Ok(mut s) => {
                    let _ = s.set_nodelay(true);
                    let r = auth::client_handshake(
                        &mut s,
                        &self.secret,
                        self.cluster_id,
                        self.own,
                        Some(peer),
                        self.handshake_timeout,
                    );
                    return match r {
                        Ok((_, welcome)) => Setup::Connected {
                            peer,
                            stream: s,
                            direction: Direction::Outbound,
                            welcome: Some(welcome),
                        },
                        // Refused as in use: the peer may not have seen the end of an earlier
                        // connection of ours yet (a driver's previous attempt, a process of
                        // ours that just died); a second live process is refused to the end.
                        Err(e)
                            if (closed_early(&e) || id_taken(&e)) && Instant::now() < deadline =>
                        {
                            std::thread::sleep(ms(backoff));
                            backoff = (backoff * 2).min(CONNECT_BACKOFF_MAX_MS);
                            continue;
                        }
                        Err(e) => Setup::ConnectFailed {
                            peer,
                            reason: format!("handshake with {addr}: {e}"),
                            // Only when the last answer was that: an earlier one may have been
                            // a connection of ours about to close.
                            id_taken: id_taken(&e),
                            refused: refused_for_good(&e),
                        },
                    };
                }
                Err(e) if Instant::now() >= deadline => {
                    return Setup::ConnectFailed {
                        peer,
                        reason: format!("connect to {addr}: {e}"),
                        id_taken: false,
                        refused: false,
                    };
                }
                Err(_) => {
                    std::thread::sleep(ms(backoff));
                    backoff = (backoff * 2).min(CONNECT_BACKOFF_MAX_MS);
                }
            }
        }
    }

    /// Authenticates an accepted connection on a helper thread, granting `grant`, within
    /// the handshake timeout in all. `slot` is its handshake slot, freed when this ends; a
    /// connection evicted from it meanwhile ends without a report (its eviction was).
    pub(super) fn spawn_accept(
        self,
        mut stream: TcpStream,
        grant: Welcome,
        slot: SlotGuard,
    ) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("clasp-handshake".into())
            .spawn(move || {
                let addr = stream.peer_addr().ok();
                let own = self.own;
                let side = auth::ServerSide {
                    secret: &self.secret,
                    cluster_id: self.cluster_id,
                    own_id: own,
                    accept_id: |id| id != own && id <= MAX_PEER_ID,
                    in_use: |id| self.inbound_up.contains(id),
                    grant,
                    timeout: self.handshake_timeout,
                };
                let r = stream
                    .set_nonblocking(false)
                    .map_err(auth::AuthError::from)
                    .and_then(|()| {
                        auth::server_handshake(&mut stream, &side, || slot.hello_done())
                    });
                let setup = match r {
                    _ if slot.evicted() => return,
                    Ok(peer) => Setup::Connected {
                        peer,
                        stream,
                        direction: Direction::Inbound,
                        welcome: None,
                    },
                    Err(e @ auth::AuthError::InUse(_)) => Setup::Refused {
                        addr,
                        reason: e.to_string(),
                        id_taken: true,
                    },
                    Err(e) => Setup::Refused {
                        addr,
                        reason: format!("authentication failed: {e}"),
                        id_taken: false,
                    },
                };
                drop(slot);
                self.report(setup);
            })?;
        Ok(())
    }
}
