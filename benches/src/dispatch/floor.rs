//! The floor of a remote hop on this machine: two threads on cores of their own passing one
//! 72-byte message back and forth over a loopback TCP connection with plain `write` and
//! busy-polled non-blocking `read` — no batching, no io_uring, no framing, no ring.
//!
//! Why it is here: the transport's one-way latency with spinning network threads is only
//! meaningful next to what the kernel's loopback TCP path costs by itself on the same
//! hardware, in the same run. What the transport adds is the difference; what the floor
//! costs, no user-space change can remove.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Instant;

use super::harness::pin;

/// Bytes of each message: the size of a request frame of the latency runs.
const MESSAGE_BYTES: usize = 72;
/// Round trips left out at the start (connection warm-up, the first page faults).
const WARM_UP_ROUND_TRIPS: usize = 100;

/// Half the median round trip (µs) of `round_trips` messages A → B → A over loopback TCP, both
/// threads pinned (side 0 and 1, as the transport's latency run) and busy-polling. Both sides
/// run on threads of their own: pinning leaves the caller's thread (and so the affinity of the
/// threads it starts later) as it was.
pub(super) fn tcp_floor_one_way_us(round_trips: usize) -> std::io::Result<f64> {
    std::thread::spawn(move || ping(round_trips))
        .join()
        .map_err(|_| std::io::Error::other("the TCP floor's timing thread panicked"))?
}

fn ping(round_trips: usize) -> std::io::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let total = round_trips + WARM_UP_ROUND_TRIPS;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        pin(1);
        let (mut s, _) = listener.accept()?;
        prepare(&s)?;
        let mut buf = [0u8; MESSAGE_BYTES];
        for _ in 0..total {
            read_exact_spinning(&mut s, &mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    pin(0);
    let mut s = TcpStream::connect(addr)?;
    prepare(&s)?;
    let mut buf = [7u8; MESSAGE_BYTES];
    let mut rtts_us = Vec::with_capacity(round_trips);
    for i in 0..total {
        let t0 = Instant::now();
        s.write_all(&buf)?;
        read_exact_spinning(&mut s, &mut buf)?;
        if i >= WARM_UP_ROUND_TRIPS {
            rtts_us.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    let _ = s.shutdown(Shutdown::Both);
    echo.join()
        .map_err(|_| std::io::Error::other("the TCP floor's echo thread panicked"))??;
    assert_eq!(rtts_us.len(), round_trips, "every timed round trip is kept");
    Ok(super::median(rtts_us) / 2.0)
}

/// No Nagle delay, and reads that return at once.
fn prepare(s: &TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    s.set_nonblocking(true)
}

/// Fills `buf`, polling the socket without sleeping (a closed peer is an error).
fn read_exact_spinning(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_measured_and_positive() {
        let us = tcp_floor_one_way_us(50).expect("loopback TCP works");
        assert!(us.is_finite() && us > 0.0, "{us}");
    }
}
