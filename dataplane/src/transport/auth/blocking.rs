//! The handshake over a blocking stream, on a helper thread, with one deadline for the whole
//! exchange.
//!
//! Why one deadline and not a timeout per read: a peer that sends one byte per read timeout
//! would otherwise hold its handshake (and a handshake slot) for ever. Every read and write
//! here is bounded by what is left of the deadline.

use super::{
    AuthError, ClusterSecret, HEAD_BYTES, HELLO_BYTES, RESPONSE_BYTES, Refusal, T_CHALLENGE,
    T_REFUSAL, T_WELCOME, Welcome, client_hello, client_respond, client_welcome, read_head,
    read_refusal, refusal, server_challenge, server_message_bytes, server_verify,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One handshake's deadline.
#[derive(Clone, Copy, Debug)]
struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    fn new(timeout: Duration) -> Self {
        Deadline {
            at: Instant::now() + timeout,
            timeout,
        }
    }

    /// What is left, or the timeout error.
    fn left(&self) -> Result<Duration, AuthError> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(AuthError::Timeout(self.timeout));
        }
        Ok(left)
    }

    /// Reads exactly `buf.len()` bytes before the deadline.
    fn read_exact(&self, s: &mut TcpStream, buf: &mut [u8]) -> Result<(), AuthError> {
        let mut got = 0;
        while got < buf.len() {
            s.set_read_timeout(Some(self.left()?))?;
            match s.read(&mut buf[got..]) {
                Ok(0) => return Err(std::io::Error::from(ErrorKind::UnexpectedEof).into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(AuthError::Timeout(self.timeout));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes all of `buf` before the deadline (handshake messages are far smaller than a
    /// socket buffer: one write).
    fn write_all(&self, s: &mut TcpStream, buf: &[u8]) -> Result<(), AuthError> {
        s.set_write_timeout(Some(self.left()?))?;
        s.write_all(buf).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => AuthError::Timeout(self.timeout),
            _ => e.into(),
        })
    }
}

/// Reads one server message of type `want`; a Refusal becomes the error it reports.
fn read_server_message(d: &Deadline, s: &mut TcpStream, want: u8) -> Result<Vec<u8>, AuthError> {
    let mut m = vec![0u8; HEAD_BYTES];
    d.read_exact(s, &mut m)?;
    let t = read_head(&m)?;
    m.resize(server_message_bytes(t)?, 0);
    d.read_exact(s, &mut m[HEAD_BYTES..])?;
    if t == T_REFUSAL {
        return Err(read_refusal(&m));
    }
    if t != want {
        return Err(AuthError::Malformed);
    }
    Ok(m)
}

/// Runs the client side over a blocking stream within `timeout` in all; returns the server's
/// id and its Welcome.
pub fn client_handshake(
    stream: &mut TcpStream,
    secret: &ClusterSecret,
    cluster_id: u64,
    own_id: u32,
    expected_server: Option<u32>,
    timeout: Duration,
) -> Result<(u32, Welcome), AuthError> {
    let d = Deadline::new(timeout);
    let (hello, state) = client_hello(cluster_id, own_id)?;
    d.write_all(stream, &hello)?;
    let challenge = read_server_message(&d, stream, T_CHALLENGE)?;
    let (response, waiting) = client_respond(secret, &state, expected_server, &challenge)?;
    d.write_all(stream, &response)?;
    let w = read_server_message(&d, stream, T_WELCOME)?;
    let welcome = client_welcome(secret, &waiting, &w)?;
    Ok((waiting.server_id(), welcome))
}

/// What the server side of a handshake needs besides the stream.
pub struct ServerSide<'a, A: Fn(u32) -> bool, U: Fn(u32) -> bool> {
    /// The cluster secret.
    pub secret: &'a ClusterSecret,
    /// The cluster id.
    pub cluster_id: u64,
    /// Our id.
    pub own_id: u32,
    /// Whether a client id is acceptable (known, not ourselves).
    pub accept_id: A,
    /// Whether a connection from a client of this id is already up: an authenticated client
    /// under it is refused with [`Refusal::InUse`] instead of welcomed.
    pub in_use: U,
    /// What an authenticated client is granted.
    pub grant: Welcome,
    /// The whole handshake's time limit.
    pub timeout: Duration,
}

/// Runs the server side over a blocking stream within `side.timeout` in all; calls
/// `on_hello` once a well-formed Hello of our cluster arrived; returns the authenticated
/// client's id. A client refused for its version, cluster, id or proof, or because its id is
/// in use, is told why (a Refusal) before the connection closes.
pub fn server_handshake<A: Fn(u32) -> bool, U: Fn(u32) -> bool>(
    stream: &mut TcpStream,
    side: &ServerSide<'_, A, U>,
    on_hello: impl FnOnce(),
) -> Result<u32, AuthError> {
    let d = Deadline::new(side.timeout);
    let r = serve(&d, stream, side, on_hello);
    if let Err(e) = &r
        && let Some(why) = Refusal::for_error(e)
    {
        // Best effort: the client may be gone already.
        let _ = d.write_all(stream, &refusal(why));
    }
    r
}

fn serve<A: Fn(u32) -> bool, U: Fn(u32) -> bool>(
    d: &Deadline,
    stream: &mut TcpStream,
    side: &ServerSide<'_, A, U>,
    on_hello: impl FnOnce(),
) -> Result<u32, AuthError> {
    let mut hello = [0u8; HELLO_BYTES];
    // The head first: a stranger's bytes (an HTTP request, noise) are refused as soon as
    // they show they are not ours, not at the deadline.
    d.read_exact(stream, &mut hello[..HEAD_BYTES])?;
    read_head(&hello)?;
    d.read_exact(stream, &mut hello[HEAD_BYTES..])?;
    let (challenge, state) =
        server_challenge(side.cluster_id, side.own_id, &hello, &side.accept_id)?;
    on_hello();
    d.write_all(stream, &challenge)?;
    let mut response = [0u8; RESPONSE_BYTES];
    d.read_exact(stream, &mut response)?;
    let welcome = server_verify(side.secret, &state, &response, side.grant)?;
    // Only now, to a client that proved it holds the secret: a stranger learns nothing of
    // which ids are connected.
    if (side.in_use)(state.client_id()) {
        return Err(AuthError::InUse(state.client_id()));
    }
    d.write_all(stream, &welcome)?;
    Ok(state.client_id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_peer_sending_a_byte_at_a_time_meets_the_whole_handshake_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let trickle = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            let (hello, _) = client_hello(5, 1).unwrap();
            // A valid Hello, one byte every 100 ms: each read finishes well within any
            // per-read timeout.
            for b in hello {
                if c.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (mut s, _) = l.accept().unwrap();
        let secret = ClusterSecret::new(vec![1; 32]).unwrap();
        let side = ServerSide {
            secret: &secret,
            cluster_id: 5,
            own_id: 2,
            accept_id: |_| true,
            in_use: |_| false,
            grant: Welcome {
                data_credit_bytes: 1,
                control_credit_bytes: 1,
                frame_bytes_max: 1,
            },
            timeout: Duration::from_millis(500),
        };
        let t0 = Instant::now();
        let r = server_handshake(&mut s, &side, || {});
        assert!(matches!(r, Err(AuthError::Timeout(_))), "{r:?}");
        assert!(
            t0.elapsed() < Duration::from_millis(900),
            "{:?}",
            t0.elapsed()
        );
        drop(s);
        trickle.join().unwrap();
    }
}
