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
//! server → client  Challenge magic, version, type 2, server id, server nonce (32),
//!                            server proof = HMAC(secret, "server" ‖ transcript)
//! client → server  Response  magic, version, type 3, client proof = HMAC(secret, "client" ‖ transcript)
//! server → client  Welcome   magic, version, type 4, data credit, control credit, frame limit
//! transcript = cluster_id ‖ client id ‖ server id ‖ client nonce ‖ server nonce
//! ```
//!
//! Proofs are HMAC-SHA256 (the `hmac` and `sha2` crates of RustCrypto) and are compared in
//! constant time (`Mac::verify_slice`). Fresh 32-byte nonces from the OS on both sides make a
//! recorded exchange useless for a later connection. The messages are fixed-size and written
//! by hand: they are exchanged once per connection, before either side trusts the other, so
//! they are deliberately simpler than the frame format.
//!
//! The functions here are sans-I/O (bytes in, bytes out) so they are tested without sockets;
//! [`client_handshake`] and [`server_handshake`] run them over a blocking stream with a
//! timeout, on a helper thread, never on the event loop.

use hmac::{Hmac, Mac};
use sha2::Sha256;

mod blocking;

pub use blocking::{ServerSide, client_handshake, server_handshake};

type HmacSha256 = Hmac<Sha256>;

/// Handshake magic ("CLHS").
pub const HANDSHAKE_MAGIC: u32 = u32::from_le_bytes(*b"CLHS");
/// Handshake version.
pub const HANDSHAKE_VERSION: u8 = 1;
/// Nonce bytes.
pub const NONCE_BYTES: usize = 32;
/// Proof (HMAC-SHA256) bytes.
pub const PROOF_BYTES: usize = 32;
/// Shortest accepted secret: 128 bits.
pub const SECRET_MIN_BYTES: usize = 16;
/// Longest accepted secret (a file with more is a mistake).
pub const SECRET_MAX_BYTES: usize = 4096;
/// Hello: magic, version, type, 2 reserved, client id, 4 reserved, cluster id, nonce.
pub const HELLO_BYTES: usize = 24 + NONCE_BYTES;
/// Challenge: magic, version, type, 2 reserved, server id, 8 reserved, nonce, proof.
pub const CHALLENGE_BYTES: usize = 16 + NONCE_BYTES + PROOF_BYTES;
/// Response: magic, version, type, 10 reserved, proof.
pub const RESPONSE_BYTES: usize = 16 + PROOF_BYTES;
/// Welcome: magic, version, type, 2 reserved, data credit, control credit, frame limit.
pub const WELCOME_BYTES: usize = 20;

const _: () = assert!(SECRET_MIN_BYTES <= SECRET_MAX_BYTES);

const T_HELLO: u8 = 1;
const T_CHALLENGE: u8 = 2;
const T_RESPONSE: u8 = 3;
const T_WELCOME: u8 = 4;

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
        mac.update(b"clasp-transport-v1 ");
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
    #[error("not a clasp handshake message (magic/version/type)")]
    Malformed,
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

fn head(t: u8) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&HANDSHAKE_MAGIC.to_le_bytes());
    h[4] = HANDSHAKE_VERSION;
    h[5] = t;
    h
}

fn check_head(b: &[u8], t: u8) -> Result<(), AuthError> {
    if b.len() < 8 || b[..8] != head(t) {
        return Err(AuthError::Malformed);
    }
    Ok(())
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
    m[..8].copy_from_slice(&head(T_HELLO));
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

/// Server step: reads a Hello, checks it, and answers with a Challenge. `accept_id` says
/// whether a client id is acceptable (known, not ourselves).
pub fn server_challenge(
    secret: &ClusterSecret,
    cluster_id: u64,
    server_id: u32,
    hello: &[u8],
    accept_id: impl Fn(u32) -> bool,
) -> Result<([u8; CHALLENGE_BYTES], ServerState), AuthError> {
    if hello.len() != HELLO_BYTES {
        return Err(AuthError::Malformed);
    }
    check_head(hello, T_HELLO)?;
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
    m[..8].copy_from_slice(&head(T_CHALLENGE));
    m[8..12].copy_from_slice(&server_id.to_le_bytes());
    m[16..16 + NONCE_BYTES].copy_from_slice(&t.server_nonce);
    m[16 + NONCE_BYTES..].copy_from_slice(&secret.proof(b"server", &t));
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

/// Client step 2: verifies the server's proof (the full cluster id is in the transcript, so a
/// server of another cluster fails here) and returns the Response and the server's id.
pub fn client_respond(
    secret: &ClusterSecret,
    state: &ClientState,
    expected_server: Option<u32>,
    challenge: &[u8],
) -> Result<([u8; RESPONSE_BYTES], u32), AuthError> {
    if challenge.len() != CHALLENGE_BYTES {
        return Err(AuthError::Malformed);
    }
    check_head(challenge, T_CHALLENGE)?;
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
    if !secret.verify(b"server", &t, &challenge[16 + NONCE_BYTES..]) {
        return Err(AuthError::BadProof);
    }
    let mut m = [0u8; RESPONSE_BYTES];
    m[..8].copy_from_slice(&head(T_RESPONSE));
    m[16..].copy_from_slice(&secret.proof(b"client", &t));
    Ok((m, server_id))
}

/// Server step 2: verifies the client's proof.
pub fn server_verify(
    secret: &ClusterSecret,
    state: &ServerState,
    response: &[u8],
) -> Result<(), AuthError> {
    if response.len() != RESPONSE_BYTES {
        return Err(AuthError::Malformed);
    }
    check_head(response, T_RESPONSE)?;
    if !secret.verify(b"client", &state.t, &response[16..]) {
        return Err(AuthError::BadProof);
    }
    Ok(())
}

/// Encodes the Welcome.
pub fn welcome(w: Welcome) -> [u8; WELCOME_BYTES] {
    let mut m = [0u8; WELCOME_BYTES];
    m[..8].copy_from_slice(&head(T_WELCOME));
    m[8..12].copy_from_slice(&w.data_credit_bytes.to_le_bytes());
    m[12..16].copy_from_slice(&w.control_credit_bytes.to_le_bytes());
    m[16..20].copy_from_slice(&w.frame_bytes_max.to_le_bytes());
    m
}

/// Decodes the Welcome.
pub fn read_welcome(m: &[u8]) -> Result<Welcome, AuthError> {
    if m.len() != WELCOME_BYTES {
        return Err(AuthError::Malformed);
    }
    check_head(m, T_WELCOME)?;
    Ok(Welcome {
        data_credit_bytes: u32_at(m, 8),
        control_credit_bytes: u32_at(m, 12),
        frame_bytes_max: u32_at(m, 16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> ClusterSecret {
        ClusterSecret::new(vec![b; 32]).unwrap()
    }

    fn run(
        client: &ClusterSecret,
        server: &ClusterSecret,
        c_cluster: u64,
        s_cluster: u64,
    ) -> Result<(), AuthError> {
        let (hello, cs) = client_hello(c_cluster, 1)?;
        let (challenge, ss) = server_challenge(server, s_cluster, 2, &hello, |id| id == 1)?;
        let (response, sid) = client_respond(client, &cs, Some(2), &challenge)?;
        assert_eq!(sid, 2);
        server_verify(server, &ss, &response)
    }

    #[test]
    fn the_same_secret_authenticates() {
        run(&secret(1), &secret(1), 5, 5).unwrap();
    }

    #[test]
    fn a_wrong_secret_fails_on_both_sides() {
        assert!(matches!(
            run(&secret(1), &secret(2), 5, 5),
            Err(AuthError::BadProof)
        ));
    }

    #[test]
    fn another_cluster_fails() {
        assert!(run(&secret(1), &secret(1), 5, 6).is_err());
        assert!(run(&secret(1), &secret(1), 5, 5 | (1 << 40)).is_err());
    }

    #[test]
    fn short_secrets_and_garbage_are_refused() {
        assert!(ClusterSecret::new(vec![0; 8]).is_err());
        assert!(server_challenge(&secret(1), 5, 2, &[0xAB; HELLO_BYTES], |_| true).is_err());
        assert!(format!("{:?}", secret(7)).contains("32 bytes"));
    }

    #[test]
    fn a_replayed_response_fails_against_a_fresh_challenge() {
        let s = secret(3);
        let (hello, cs) = client_hello(5, 1).unwrap();
        let (ch1, _ss1) = server_challenge(&s, 5, 2, &hello, |_| true).unwrap();
        let (resp1, _) = client_respond(&s, &cs, None, &ch1).unwrap();
        let (_ch2, ss2) = server_challenge(&s, 5, 2, &hello, |_| true).unwrap();
        assert!(server_verify(&s, &ss2, &resp1).is_err());
    }
}
