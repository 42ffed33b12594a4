//! A provided-buffer ring (`IORING_REGISTER_PBUF_RING`) for multishot receive.
//!
//! Why: with multishot receive one submission keeps receiving for as long as the connection
//! lives, and the kernel picks a buffer from this ring for each completion, so no buffer sits
//! idle per connection and no re-arm is submitted per receive. The event loop processes a
//! buffer as soon as its completion arrives and hands it straight back ([`BufRing::recycle`]),
//! so the ring never runs dry unless the loop itself stalls (then the kernel ends the
//! multishot receive with `ENOBUFS` and the loop re-arms it).

use io_uring::types::BufRingEntry;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::sync::atomic::{AtomicU16, Ordering};

/// Buffer group id of the one ring.
pub(crate) const BGID: u16 = 0;
const PAGE_BYTES: usize = 4096;

/// The entries and the buffers, both allocated here and freed on drop (the owner guarantees
/// the kernel is done with them by then: see `Transport`'s `Drop`).
pub(crate) struct BufRing {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    data: *mut u8,
    data_layout: Layout,
    count: u16,
    buf_bytes: usize,
    /// Our copy of the tail (the kernel reads the shared one).
    tail: u16,
}

// SAFETY: the raw pointers are owned allocations that only the owning `Transport` touches;
// moving the ring to another thread moves that ownership with it.
unsafe impl Send for BufRing {}

impl BufRing {
    /// Allocates `count` buffers of `buf_bytes` (count a power of two ≤ 32768).
    pub(crate) fn new(count: usize, buf_bytes: usize) -> std::io::Result<BufRing> {
        let oom = || std::io::Error::other("cannot allocate receive buffers");
        let entries_layout = Layout::from_size_align(count * size_of::<BufRingEntry>(), PAGE_BYTES)
            .map_err(|_| oom())?;
        let data_layout =
            Layout::from_size_align(count * buf_bytes, PAGE_BYTES).map_err(|_| oom())?;
        // SAFETY: both layouts have a non-zero size (count ≥ 1, buf_bytes ≥ 4096 by
        // `Limits::validate`).
        let entries = unsafe { alloc_zeroed(entries_layout) }.cast::<BufRingEntry>();
        // SAFETY: as above.
        let data = unsafe { alloc_zeroed(data_layout) };
        if entries.is_null() || data.is_null() {
            // SAFETY: each pointer is freed only if it was allocated with its layout.
            unsafe {
                if !entries.is_null() {
                    dealloc(entries.cast(), entries_layout);
                }
                if !data.is_null() {
                    dealloc(data, data_layout);
                }
            }
            return Err(oom());
        }
        Ok(BufRing {
            entries,
            entries_layout,
            data,
            data_layout,
            count: count as u16,
            buf_bytes,
            tail: 0,
        })
    }

    /// Registers the ring with `submitter` and provides every buffer.
    pub(crate) fn register(&mut self, submitter: &io_uring::Submitter<'_>) -> std::io::Result<()> {
        // SAFETY: `entries` points to `count` entries that stay allocated until this BufRing
        // is dropped, which the owner does only after the io_uring is gone or the group is
        // unregistered.
        unsafe {
            submitter.register_buf_ring_with_flags(self.entries as u64, self.count, BGID, 0)?
        };
        for bid in 0..self.count {
            self.push(bid);
        }
        self.publish();
        Ok(())
    }

    fn push(&mut self, bid: u16) {
        let mask = self.count - 1;
        let slot = (self.tail & mask) as usize;
        // SAFETY: `slot < count`, inside the entries allocation; the kernel reads entries only
        // up to the published tail, which does not include this slot yet.
        let entry = unsafe { &mut *self.entries.add(slot) };
        // SAFETY: `bid < count`, so the buffer lies inside the data allocation.
        entry.set_addr(unsafe { self.data.add(bid as usize * self.buf_bytes) } as u64);
        entry.set_len(self.buf_bytes as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field of the ring's first entry is a u16 the kernel reads with
        // acquire semantics; it is naturally aligned within the page-aligned allocation.
        let tail = unsafe {
            &*(BufRingEntry::tail(self.entries)
                .cast_mut()
                .cast::<AtomicU16>())
        };
        // SYNC: pbuf-tail — the entry writes above become visible to the kernel with this.
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which a completion has just handed to us.
    ///
    /// # Safety
    /// A completion must have selected `bid` and reported `len` bytes, and the buffer must not
    /// have been recycled since: until then the kernel does not write it.
    pub(crate) unsafe fn buffer<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        debug_assert!(bid < self.count && len <= self.buf_bytes);
        let len = len.min(self.buf_bytes);
        let bid = bid.min(self.count - 1) as usize;
        // SAFETY: inside the data allocation (bounds clamped above); the caller guarantees
        // the kernel is not writing it.
        unsafe { std::slice::from_raw_parts(self.data.add(bid * self.buf_bytes), len) }
    }

    /// Gives buffer `bid` back to the kernel. Every slice from [`BufRing::buffer`] for it
    /// must be dead by now.
    pub(crate) fn recycle(&mut self, bid: u16) {
        if bid < self.count {
            self.push(bid);
            self.publish();
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: both were allocated in `new` with these layouts; the owner guarantees the
        // kernel no longer uses them (the io_uring is closed or every operation completed).
        unsafe {
            dealloc(self.entries.cast(), self.entries_layout);
            dealloc(self.data, self.data_layout);
        }
    }
}
