//! A ring on the heap, for one process: the backing Miri and loom check, and a fast in-process
//! channel. It runs the same ring code as shared memory.

use crate::doorbell::Doorbell;
use crate::error::Result;
use crate::ring::{Consumer, Producer, RingConfig, RingControl, RingMemory};
use crate::sync::AtomicU64;
use std::sync::Arc;

#[cfg(not(loom))]
struct Data {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

#[cfg(not(loom))]
impl Data {
    fn new(capacity_bytes: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(capacity_bytes, 128)
            .expect("capacity validated as a power of two below 2^31");
        // SAFETY: the layout has a non-zero size (capacity >= MIN_CAPACITY_BYTES).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Data { ptr, layout }
    }
}

#[cfg(not(loom))]
impl Drop for Data {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// Under loom, header words are model atomics kept apart from the payload bytes, and every
/// 16-byte cell has a model cell whose accesses loom checks for races.
#[cfg(loom)]
struct Data {
    bytes: Box<[std::cell::UnsafeCell<u8>]>,
    headers: Box<[AtomicU64]>,
    cells: Box<[loom::cell::UnsafeCell<()>]>,
}

#[cfg(loom)]
impl Data {
    fn new(capacity_bytes: usize) -> Self {
        let cells = capacity_bytes / 16;
        Data {
            bytes: (0..capacity_bytes)
                .map(|_| std::cell::UnsafeCell::new(0))
                .collect(),
            headers: (0..cells).map(|_| AtomicU64::new(0)).collect(),
            cells: (0..cells)
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
        }
    }
}

struct Inner {
    control: RingControl,
    doorbell: Arc<Doorbell>,
    config: RingConfig,
    data: Data,
}

/// A handle to a heap ring; the producer and the consumer each hold one.
#[derive(Clone)]
pub struct HeapRing {
    inner: Arc<Inner>,
}

// SAFETY: `Data` is a byte buffer whose accesses the ring protocol orders (one producer, one
// consumer, synchronised through the control block's atomics); the raw pointer is only its
// address.
unsafe impl Send for Data {}
// SAFETY: as above.
unsafe impl Sync for Data {}

// SAFETY: `Data::new` allocates `capacity_bytes` 128-aligned zeroed bytes used by this ring
// only; `header` returns the word at `data + offset` (or its loom model); the config was
// validated in `channel_with_doorbell` before construction; `channel*` builds one producer and
// one consumer.
unsafe impl RingMemory for HeapRing {
    #[inline]
    fn control(&self) -> &RingControl {
        &self.inner.control
    }
    #[inline]
    fn doorbell(&self) -> &Doorbell {
        &self.inner.doorbell
    }
    #[inline]
    fn config(&self) -> RingConfig {
        self.inner.config
    }
    #[cfg(not(loom))]
    #[inline]
    fn header(&self, offset_bytes: usize) -> &AtomicU64 {
        debug_assert!(offset_bytes % 16 == 0 && offset_bytes < self.inner.config.capacity_bytes);
        // SAFETY: the offset is 16-aligned and inside the 128-aligned allocation, so the word
        // is aligned and in bounds; the ring protocol only accesses it atomically while it is
        // a header.
        unsafe { &*(self.inner.data.ptr.add(offset_bytes) as *const AtomicU64) }
    }
    #[cfg(loom)]
    fn header(&self, offset_bytes: usize) -> &AtomicU64 {
        &self.inner.data.headers[offset_bytes / 16]
    }
    #[cfg(not(loom))]
    #[inline]
    fn data(&self) -> *mut u8 {
        self.inner.data.ptr
    }
    #[cfg(loom)]
    fn data(&self) -> *mut u8 {
        self.inner.data.bytes.as_ptr() as *mut u8
    }
    #[cfg(loom)]
    fn track_write(&self, offset_bytes: usize, len_bytes: usize) {
        for c in offset_bytes / 16..(offset_bytes + len_bytes).div_ceil(16) {
            self.inner.data.cells[c].with_mut(|_| ());
        }
    }
    #[cfg(loom)]
    fn track_read(&self, offset_bytes: usize, len_bytes: usize) {
        for c in offset_bytes / 16..(offset_bytes + len_bytes).div_ceil(16) {
            self.inner.data.cells[c].with(|_| ());
        }
    }
}

/// A heap ring with its own doorbell.
pub fn channel(config: RingConfig) -> Result<(Producer<HeapRing>, Consumer<HeapRing>)> {
    channel_with_doorbell(config, Arc::new(Doorbell::new()))
}

/// A heap ring whose consumer parks on `doorbell` (share one doorbell among the rings one
/// consumer reads, see [`crate::FanIn`]).
pub fn channel_with_doorbell(
    config: RingConfig,
    doorbell: Arc<Doorbell>,
) -> Result<(Producer<HeapRing>, Consumer<HeapRing>)> {
    config.validate()?;
    crate::doorbell::barrier::init();
    let ring = HeapRing {
        inner: Arc::new(Inner {
            control: RingControl::new(),
            doorbell,
            config,
            data: Data::new(config.capacity_bytes),
        }),
    };
    // SAFETY: the ring was just made; these are its only producer and consumer.
    unsafe { Ok((Producer::new(ring.clone())?, Consumer::new(ring)?)) }
}
