//! Connect-time mutual authentication: a challenge–response over fresh nonces, keyed by the
//! cluster secret and bound to the cluster id and both peer ids.
//!
//! Why: a stray process (a port scanner, a worker of another cluster, a mistyped address)
//! must not be able to inject requests. The data path stays plaintext (workers run inside one
//! trusted network; encryption would cost every request a copy); what is authenticated is who
//! opened the connection. Both sides prove knowledge of the secret, so a
//! worker also never sends requests to an impostor listening on a peer's address.
//!
//! ```text
//! client → server  Hello     magic, version, type 1, cluster_id, client id, client nonce (32)
//! server → client  Challenge magic, version, type 2, server id, server nonce (32)
//! client → server  Response  magic, version, type 3, client proof = HMAC(secret, "client" ‖ transcript)
//! server → client  Welcome   magic, version, type 4, data credit, control credit, frame limit,
//!                            server proof = HMAC(secret, "server" ‖ transcript)
//!               or Refusal   magic, version, type 5, why (version, cluster, peer id, proof,
//!                            or, after a valid proof, a connection under that id already up)
//! transcript = cluster_id ‖ client id ‖ server id ‖ client nonce ‖ server nonce
//! ```
//!
//! The client proves first: a server answers anyone who connects, so if it proved first,
//! any stranger could collect proofs over nonces of its choosing and guess a weak secret
//! offline. Here a stranger gets no value computed from the secret until it has proved that
//! it holds it; the server's proof arrives only in the Welcome, and the client trusts nothing
//! before it verifies it.
//!
//! Proofs are HMAC-SHA256 (the `hmac` and `sha2` crates of RustCrypto) and are compared in
//! constant time (`Mac::verify_slice`). Fresh 32-byte nonces from the OS on both sides make a
//! recorded exchange useless for a later connection. The messages are fixed-size and written
//! by hand: they are exchanged once per connection, before either side trusts the other, so
//! they are deliberately simpler than the frame format. Every message starts with the
//! version: a peer speaking another is refused, naming both versions (a server answers it
//! with a Refusal in its own version, so a client of ours names the server's).
//!
//! The functions here are sans-I/O (bytes in, bytes out) so they are tested without sockets;
//! [`client_handshake`] and [`server_handshake`] run them over a blocking stream with one
//! deadline for the whole handshake, on a helper thread, never on the event loop.

use hmac::{Hmac, Mac};
use sha2::Sha256;

mod blocking;
#[cfg(test)]
mod tests;

pub use blocking::{ServerSide, client_handshake, server_handshake};

type HmacSha256 = Hmac<Sha256>;

/// Handshake magic ("CLHS").
pub const HANDSHAKE_MAGIC: u32 = u32::from_le_bytes(*b"CLHS");
/// Handshake version (2: the client proves first).
pub const HANDSHAKE_VERSION: u8 = 2;
/// Nonce bytes.
pub const NONCE_BYTES: usize = 32;
/// Proof (HMAC-SHA256) bytes.
pub const PROOF_BYTES: usize = 32;
/// Shortest accepted secret: 128 bits.
pub const SECRET_MIN_BYTES: usize = 16;
/// Longest accepted secret (a file with more is a mistake).
pub const SECRET_MAX_BYTES: usize = 4096;
/// The head every message starts with: magic, version, type, 2 reserved.
pub const HEAD_BYTES: usize = 8;
/// Hello: head, client id, 4 reserved, cluster id, nonce.
pub const HELLO_BYTES: usize = 24 + NONCE_BYTES;
/// Challenge: head, server id, 4 reserved, nonce.
pub const CHALLENGE_BYTES: usize = 16 + NONCE_BYTES;
/// Response: head, 8 reserved, proof.
pub const RESPONSE_BYTES: usize = 16 + PROOF_BYTES;
/// Welcome: head, data credit, control credit, frame limit, 4 reserved, proof.
pub const WELCOME_BYTES: usize = 24 + PROOF_BYTES;
/// Refusal: head, why, 7 reserved.
pub const REFUSAL_BYTES: usize = 16;

const _: () = assert!(SECRET_MIN_BYTES <= SECRET_MAX_BYTES);

const T_HELLO: u8 = 1;
const T_CHALLENGE: u8 = 2;
const T_RESPONSE: u8 = 3;
const T_WELCOME: u8 = 4;
const T_REFUSAL: u8 = 5;

/// The cluster secret. Its `Debug` never prints it.
#[derive(Clone)]
pub struct ClusterSecret(Vec<u8>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterSecret({} bytes)", self.0.len())
    }
}

impl ClusterSecret {
    /// A secret from bytes (read by the CLI from a file or an environment variable).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, AuthError> {
        let bytes = bytes.into();
        if !(SECRET_MIN_BYTES..=SECRET_MAX_BYTES).contains(&bytes.len()) {
            return Err(AuthError::SecretLength(bytes.len()));
        }
        Ok(ClusterSecret(bytes))
    }

    fn mac(&self, role: &[u8], t: &Transcript) -> HmacSha256 {
        // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
        let mut mac = match HmacSha256::new_from_slice(&self.0) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC takes keys of any length"),
        };
        mac.update(b"clasp-transport-v2 ");
        mac.update(role);
        mac.update(&t.cluster_id.to_le_bytes());
        mac.update(&t.client_id.to_le_bytes());
        mac.update(&t.server_id.to_le_bytes());
        mac.update(&t.client_nonce);
        mac.update(&t.server_nonce);
        mac
    }

    fn proof(&self, role: &[u8], t: &Transcript) -> [u8; PROOF_BYTES] {
        self.mac(role, t).finalize().into_bytes().into()
    }

    fn verify(&self, role: &[u8], t: &Transcript, proof: &[u8]) -> bool {
        self.mac(role, t).verify_slice(proof).is_ok()
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The secret is too short or too long.
    #[error("cluster secret of {0} bytes (need {SECRET_MIN_BYTES}..={SECRET_MAX_BYTES})")]
    SecretLength(usize),
    /// Not a handshake message of ours.
    #[error("not a clasp handshake message (magic/type/length)")]
    Malformed,
    /// The peer speaks another handshake version.
    #[error("the peer speaks handshake version {theirs}; this build speaks {ours}")]
    Version {
        /// Theirs.
        theirs: u8,
        /// Ours.
        ours: u8,
    },
    /// The peer belongs to another cluster.
    #[error("cluster id {theirs:#x} is not ours ({ours:#x})")]
    Cluster {
        /// Theirs.
        theirs: u64,
        /// Ours.
        ours: u64,
    },
    /// The peer's proof does not verify: it does not hold the secret.
    #[error("proof does not verify: the peer does not hold the cluster secret")]
    BadProof,
    /// A peer id this transport does not accept.
    #[error("peer id {0} is not acceptable")]
    PeerId(u32),
    /// An authenticated client under the id of a peer whose connection to us is up: a
    /// second process under one worker's id, or the peer itself dialling again (a driver's
    /// recovery) before we have seen its earlier connection close. The first keeps it.
    #[error(
        "peer {0} already has a connection to us (a second process under its id, or its own \
         earlier connection not closed yet); the first keeps it"
    )]
    InUse(u32),
    /// The server refused us, and said why.
    #[error("the peer refused the handshake: {0}")]
    Refused(Refusal),
    /// Reading or writing failed.
    #[error("i/o during the handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The whole handshake did not finish in time (a slow or silent peer).
    #[error("handshake not finished within {0:?}")]
    Timeout(std::time::Duration),
    /// The OS random source failed.
    #[error("no random nonce: {0}")]
    Random(String),
}

/// Why a server refused a client (sent in a Refusal, so the client can say it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The client speaks another handshake version.
    #[error("it speaks another handshake version")]
    Version = 1,
    /// The client's cluster id is not the server's.
    #[error("we are not of its cluster (another cluster id)")]
    Cluster = 2,
    /// The client's id is not acceptable to the server.
    #[error("it does not accept our peer id")]
    PeerId = 3,
    /// The client's proof does not verify.
    #[error("our proof does not verify: it does not hold the same cluster secret")]
    Proof = 4,
    /// A connection from a process under the client's id is already up (told only to a
    /// client that proved it holds the secret).
    #[error("it already has a connection from a process under our id")]
    InUse = 5,
    /// A reason this build does not know.
    #[error("for a reason this build does not know")]
    Unknown = 255,
}

impl Refusal {
    /// What the server tells a client for `e` (None: nothing; the connection just closes).
    pub fn for_error(e: &AuthError) -> Option<Refusal> {
        match e {
            AuthError::Version { .. } => Some(Refusal::Version),
            AuthError::Cluster { .. } => Some(Refusal::Cluster),
            AuthError::PeerId(_) => Some(Refusal::PeerId),
            AuthError::BadProof => Some(Refusal::Proof),
            AuthError::InUse(_) => Some(Refusal::InUse),
            _ => None,
        }
    }

    fn from_code(c: u8) -> Refusal {
        match c {
            1 => Refusal::Version,
            2 => Refusal::Cluster,
            3 => Refusal::PeerId,
            4 => Refusal::Proof,
            5 => Refusal::InUse,
            _ => Refusal::Unknown,
        }
    }
}

/// What both proofs cover.
#[derive(Clone, Copy, Debug)]
struct Transcript {
    cluster_id: u64,
    client_id: u32,
    server_id: u32,
    client_nonce: [u8; NONCE_BYTES],
    server_nonce: [u8; NONCE_BYTES],
}

fn nonce() -> Result<[u8; NONCE_BYTES], AuthError> {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::fill(&mut n).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(n)
}

fn head(t: u8) -> [u8; HEAD_BYTES] {
    let mut h = [0u8; HEAD_BYTES];
    h[..4].copy_from_slice(&HANDSHAKE_MAGIC.to_le_bytes());
    h[4] = HANDSHAKE_VERSION;
    h[5] = t;
    h
}

/// Reads a message head: the message type, after checking the magic and the version.
pub fn read_head(b: &[u8]) -> Result<u8, AuthError> {
    if b.len() < HEAD_BYTES || u32_at(b, 0) != HANDSHAKE_MAGIC {
        return Err(AuthError::Malformed);
    }
    // A Refusal is read in any version: it says why the other side hung up.
    if b[4] != HANDSHAKE_VERSION && b[5] != T_REFUSAL {
        return Err(AuthError::Version {
            theirs: b[4],
            ours: HANDSHAKE_VERSION,
        });
    }
    Ok(b[5])
}

/// Checks a whole message: its head, its type and its length.
fn check(b: &[u8], t: u8, len: usize) -> Result<(), AuthError> {
    let got = read_head(b)?;
    if got != t || b.len() != len {
        return Err(AuthError::Malformed);
    }
    Ok(())
}

/// The length of a server message of type `t` (what follows its head is read after it).
pub fn server_message_bytes(t: u8) -> Result<usize, AuthError> {
    match t {
        T_CHALLENGE => Ok(CHALLENGE_BYTES),
        T_WELCOME => Ok(WELCOME_BYTES),
        T_REFUSAL => Ok(REFUSAL_BYTES),
        _ => Err(AuthError::Malformed),
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// What the receiving side grants a newly authenticated sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// Initial data credit (bytes of batch frames in flight).
    pub data_credit_bytes: u32,
    /// Initial control credit.
    pub control_credit_bytes: u32,
    /// Longest frame the receiver accepts.
    pub frame_bytes_max: u32,
}

/// Client side, step 1: the Hello and the state to keep.
pub struct ClientState {
    cluster_id: u64,
    client_id: u32,
    client_nonce: [u8; NONCE_BYTES],
}

/// Client step 1.
pub fn client_hello(
    cluster_id: u64,
    client_id: u32,
) -> Result<([u8; HELLO_BYTES], ClientState), AuthError> {
    let client_nonce = nonce()?;
    let mut m = [0u8; HELLO_BYTES];
    m[..HEAD_BYTES].copy_from_slice(&head(T_HELLO));
    m[8..12].copy_from_slice(&client_id.to_le_bytes());
    m[16..24].copy_from_slice(&cluster_id.to_le_bytes());
    m[24..24 + NONCE_BYTES].copy_from_slice(&client_nonce);
    Ok((
        m,
        ClientState {
            cluster_id,
            client_id,
            client_nonce,
        },
    ))
}

/// Server step 1: reads a Hello, checks it, and answers with a Challenge (no proof: the
/// client proves first). `accept_id` says whether a client id is acceptable (known, not
/// ourselves).
pub fn server_challenge(
    cluster_id: u64,
    server_id: u32,
    hello: &[u8],
    accept_id: impl Fn(u32) -> bool,
) -> Result<([u8; CHALLENGE_BYTES], ServerState), AuthError> {
    check(hello, T_HELLO, HELLO_BYTES)?;
    let client_id = u32_at(hello, 8);
    let theirs = u64_at(hello, 16);
    if theirs != cluster_id {
        return Err(AuthError::Cluster {
            theirs,
            ours: cluster_id,
        });
    }
    if !accept_id(client_id) {
        return Err(AuthError::PeerId(client_id));
    }
    let mut client_nonce = [0u8; NONCE_BYTES];
    client_nonce.copy_from_slice(&hello[24..24 + NONCE_BYTES]);
    let t = Transcript {
        cluster_id,
        client_id,
        server_id,
        client_nonce,
        server_nonce: nonce()?,
    };
    let mut m = [0u8; CHALLENGE_BYTES];
    m[..HEAD_BYTES].copy_from_slice(&head(T_CHALLENGE));
    m[8..12].copy_from_slice(&server_id.to_le_bytes());
    m[16..16 + NONCE_BYTES].copy_from_slice(&t.server_nonce);
    Ok((m, ServerState { t }))
}

/// The server's state between Challenge and Response.
pub struct ServerState {
    t: Transcript,
}

impl ServerState {
    /// The authenticated client's id (valid only once `server_verify` succeeded).
    pub fn client_id(&self) -> u32 {
        self.t.client_id
    }
}

/// The client's state between its Response and the server's Welcome.
pub struct ClientAwait {
    t: Transcript,
}

impl ClientAwait {
    /// The server's id (authenticated only once `client_welcome` succeeded).
    pub fn server_id(&self) -> u32 {
        self.t.server_id
    }
}

/// Client step 2: reads the Challenge and proves, first, that it holds the secret.
pub fn client_respond(
    secret: &ClusterSecret,
    state: &ClientState,
    expected_server: Option<u32>,
    challenge: &[u8],
) -> Result<([u8; RESPONSE_BYTES], ClientAwait), AuthError> {
    check(challenge, T_CHALLENGE, CHALLENGE_BYTES)?;
    let server_id = u32_at(challenge, 8);
    if expected_server.is_some_and(|e| e != server_id) {
        return Err(AuthError::PeerId(server_id));
    }
    let mut server_nonce = [0u8; NONCE_BYTES];
    server_nonce.copy_from_slice(&challenge[16..16 + NONCE_BYTES]);
    let t = Transcript {
        cluster_id: state.cluster_id,
        client_id: state.client_id,
        server_id,
        client_nonce: state.client_nonce,
        server_nonce,
    };
    let mut m = [0u8; RESPONSE_BYTES];
    m[..HEAD_BYTES].copy_from_slice(&head(T_RESPONSE));
    m[16..].copy_from_slice(&secret.proof(b"client", &t));
    Ok((m, ClientAwait { t }))
}

/// Server step 2: verifies the client's proof, then proves in the Welcome that it holds the
/// secret too.
pub fn server_verify(
    secret: &ClusterSecret,
    state: &ServerState,
    response: &[u8],
    grant: Welcome,
) -> Result<[u8; WELCOME_BYTES], AuthError> {
    check(response, T_RESPONSE, RESPONSE_BYTES)?;
    if !secret.verify(b"client", &state.t, &response[16..]) {
        return Err(AuthError::BadProof);
    }
    let mut m = [0u8; WELCOME_BYTES];
    m[..HEAD_BYTES].copy_from_slice(&head(T_WELCOME));
    m[8..12].copy_from_slice(&grant.data_credit_bytes.to_le_bytes());
    m[12..16].copy_from_slice(&grant.control_credit_bytes.to_le_bytes());
    m[16..20].copy_from_slice(&grant.frame_bytes_max.to_le_bytes());
    m[24..].copy_from_slice(&secret.proof(b"server", &state.t));
    Ok(m)
}

/// Client step 3: verifies the server's proof in its Welcome (the full cluster id is in the
/// transcript, so a server of another cluster fails here) and returns what it granted.
pub fn client_welcome(
    secret: &ClusterSecret,
    state: &ClientAwait,
    m: &[u8],
) -> Result<Welcome, AuthError> {
    check(m, T_WELCOME, WELCOME_BYTES)?;
    if !secret.verify(b"server", &state.t, &m[24..]) {
        return Err(AuthError::BadProof);
    }
    Ok(Welcome {
        data_credit_bytes: u32_at(m, 8),
        control_credit_bytes: u32_at(m, 12),
        frame_bytes_max: u32_at(m, 16),
    })
}

/// Encodes a Refusal.
pub fn refusal(why: Refusal) -> [u8; REFUSAL_BYTES] {
    let mut m = [0u8; REFUSAL_BYTES];
    m[..HEAD_BYTES].copy_from_slice(&head(T_REFUSAL));
    m[8] = why as u8;
    m
}

/// Decodes a Refusal into the error it reports: a version refusal names the server's
/// version (its head's).
pub fn read_refusal(m: &[u8]) -> AuthError {
    if m.len() != REFUSAL_BYTES || read_head(m).ok() != Some(T_REFUSAL) {
        return AuthError::Malformed;
    }
    match Refusal::from_code(m[8]) {
        Refusal::Version if m[4] != HANDSHAKE_VERSION => AuthError::Version {
            theirs: m[4],
            ours: HANDSHAKE_VERSION,
        },
        why => AuthError::Refused(why),
    }
}
