//! The handshake slots: at most [`MAX_PENDING_HANDSHAKES`](super::MAX_PENDING_HANDSHAKES)
//! accepted connections are being authenticated at once, and when every slot is taken, the
//! oldest connection that has not sent a complete Hello is dropped to make room.
//!
//! Why evict instead of refusing the newcomer: slow or silent clients (a scanner, a
//! slow-handshake attack) would otherwise hold every slot and lock real peers out, and an
//! attacker and a real peer may share an address (127.0.0.1, a NAT), so the address says
//! nothing. A real peer sends its Hello at once; a connection that has not, while newer ones
//! wait, is the one to drop. One that sent a valid Hello is left to its handshake deadline.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// One handshake in progress.
#[derive(Debug)]
struct Entry {
    id: u64,
    started: Instant,
    /// A well-formed Hello of our cluster arrived.
    hello_done: bool,
    /// A handle on the socket, to shut it down if it is evicted.
    stream: TcpStream,
    addr: Option<SocketAddr>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    entries: Vec<Entry>,
}

/// The slots, shared by the event loop (which admits) and the handshake threads (which
/// mark and release).
#[derive(Clone, Debug)]
pub(super) struct PendingHandshakes {
    table: Arc<Mutex<Table>>,
    capacity: usize,
}

/// What admitting a connection did.
#[derive(Debug)]
pub(super) struct Admitted {
    /// The new handshake's slot (released when dropped).
    pub slot: SlotGuard,
    /// The connection dropped to make room, by its address.
    pub evicted: Option<Option<SocketAddr>>,
}

impl PendingHandshakes {
    pub(super) fn new(capacity: usize) -> Self {
        PendingHandshakes {
            table: Arc::new(Mutex::new(Table::default())),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A handshake thread that panicked leaves a consistent table (every change is one
        // push, flag or removal), so a poisoned lock is still usable.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a slot for `stream`, evicting the oldest connection without a complete Hello
    /// when every slot is taken (its socket is shut down, which ends its handshake thread's
    /// wait). `None`: every slot holds a connection past its Hello; the newcomer is refused.
    pub(super) fn admit(&self, stream: &TcpStream) -> std::io::Result<Option<Admitted>> {
        let handle = stream.try_clone()?;
        let mut t = self.lock();
        let mut evicted = None;
        if t.entries.len() >= self.capacity {
            let oldest = (t.entries.iter().enumerate())
                .filter(|(_, e)| !e.hello_done)
                .min_by_key(|(_, e)| e.started)
                .map(|(i, _)| i);
            let Some(i) = oldest else {
                return Ok(None);
            };
            let victim = t.entries.swap_remove(i);
            let _ = victim.stream.shutdown(Shutdown::Both);
            evicted = Some(victim.addr);
        }
        let id = t.next_id;
        t.next_id += 1;
        t.entries.push(Entry {
            id,
            started: Instant::now(),
            hello_done: false,
            addr: stream.peer_addr().ok(),
            stream: handle,
        });
        Ok(Some(Admitted {
            slot: SlotGuard {
                table: self.clone(),
                id,
            },
            evicted,
        }))
    }

    /// Handshakes in progress.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// One handshake's slot; dropping it frees the slot.
#[derive(Debug)]
pub(super) struct SlotGuard {
    table: PendingHandshakes,
    id: u64,
}

impl SlotGuard {
    /// The connection sent a complete Hello: it is no longer a candidate for eviction.
    pub(super) fn hello_done(&self) {
        let mut t = self.table.lock();
        if let Some(e) = t.entries.iter_mut().find(|e| e.id == self.id) {
            e.hello_done = true;
        }
    }

    /// Whether this connection was dropped to make room (its refusal is already counted).
    pub(super) fn evicted(&self) -> bool {
        !self.table.lock().entries.iter().any(|e| e.id == self.id)
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut t = self.table.lock();
        if let Some(i) = t.entries.iter().position(|e| e.id == self.id) {
            t.entries.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    #[test]
    fn a_full_table_evicts_the_oldest_without_a_hello() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = PendingHandshakes::new(2);
        let (_c1, s1) = pair(&l);
        let (_c2, s2) = pair(&l);
        let (_c3, s3) = pair(&l);
        let a1 = p.admit(&s1).unwrap().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let a2 = p.admit(&s2).unwrap().unwrap();
        a1.slot.hello_done();
        // Full: the oldest without a Hello is the second.
        let a3 = p.admit(&s3).unwrap().unwrap();
        assert!(a3.evicted.is_some());
        assert!(a2.slot.evicted() && !a1.slot.evicted());
        assert_eq!(p.len(), 2);
        // Its socket was shut down: a read ends at once.
        let mut buf = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &s2, &mut buf).unwrap(), 0);
        // Every slot past its Hello: the newcomer is refused.
        a3.slot.hello_done();
        let (_c4, s4) = pair(&l);
        assert!(p.admit(&s4).unwrap().is_none());
        drop(a1);
        assert_eq!(p.len(), 1);
        drop(a2);
        assert_eq!(p.len(), 1);
    }
}
