//! The SPSC ring of variable-length frames.
//!
//! This file holds what both ends share: the frame layout, the size limits, the control block
//! and the memory a ring lives in. The ends, [`Producer`] and [`Consumer`], have a file each
//! (`producer.rs`, `consumer.rs`); how either waits (spin, then park on a doorbell, checking the
//! peer is alive) is `wait.rs`.
//!
//! # Layout
//! The ring is a power-of-two byte buffer plus a [`RingControl`] block. A frame is a 16-byte
//! header followed by its payload, padded so the next frame starts 16-byte aligned (rkyv
//! archives can be read in place). The first 8 header bytes are one word: `VALID | len` for a
//! frame, `SKIP | gap` for "the next `gap` bytes are unused" (the rest of a lap, or padding up
//! to a cache line). The other 8 bytes are reserved (zero). A frame never straddles the end of
//! the buffer, so it can be read and written in place as one slice.
//!
//! A frame longer than two cache lines ([`LINE_ALIGN_ABOVE_BYTES`]) starts on a line boundary
//! and is padded to whole lines; shorter frames pack. Line-aligning every frame longer than
//! one line came first: without prefetching (below) it raised 64-byte payloads (80-byte
//! frames) from 26.6 to 33–37 M messages/s, because a consumer reading frame k no longer pulled
//! the line the producer was writing frame k + 1 into. Once the consumer prefetched, the
//! padding cost more than the sharing: packing 80-byte frames (1.25 lines a message instead of
//! 2) took them from 54 to 64 M messages/s, α unchanged (`benches/results/rings.md`).
//! Moving the lengths out of band into a descriptor lane, so a 64-byte payload is one line, was
//! measured too and lost at 16 and 64 bytes (the descriptor lines bounce instead); it was reverted.
//!
//! # Indices, and why the consumer reads a tail index rather than polling frame headers
//! Positions are absolute byte counts (`u64`, never wrapping in practice); `pos & mask` is the
//! offset. The producer owns `tail` (SYNC: tail-publish — one release store publishes every
//! frame before it), the consumer owns `head` (SYNC: head-publish — hands space back). Each
//! side keeps a private copy of the other's index and re-reads it only when the ring looks
//! full (producer) or empty (consumer), so a consumer that is behind reads many frames per
//! transfer of the tail's line. Producer- and consumer-written fields sit on separate 128-byte
//! lines.
//!
//! The first version of this ring had the consumer poll the next frame's header instead (the
//! FastForward idea: one cache-line transfer per hand-off instead of two), with the producer
//! zeroing the header after each frame so stale bytes could not pass for one. Measured side by
//! side (`benches/results/rings.md`), the two shapes were a wash at 64 bytes (header polling
//! won at 16 bytes one-way, lost a little throughput); the index needs neither the zeroing
//! store nor the slack it reserves, so it stayed. What did matter is line sharing (see Layout
//! above). A middle way was measured too: a consumer that had found the ring empty many times
//! in a row also loaded the header word at `head` and prefetched the next line on each poll,
//! so the frame's lines came with the tail. That brought 64-byte one-way latency level with or
//! under rtrb's, but a streaming consumer that has caught up waits the same way, and 64-byte
//! streams lost 35–50 % of their throughput; it was reverted (`benches/results/rings.md`).
//!
//! # Prefetching
//! When the consumer is behind (the tail it cached lies beyond the frame it reads), it
//! prefetches the published lines ahead of it, up to 2 KiB past `head` and at most 4 lines per
//! frame read — on CPUs where that was measured to help (`prefetch.rs`; not on AMD). On the
//! Intel Xeon it was tuned on, `perf annotate` showed the consumer's time on the first load of
//! each frame's line: the line sits modified in the producer's cache, and the hardware
//! prefetcher does not fetch it early enough. With the transfers overlapped, 64-byte payloads
//! went from 33–37 to about 100 M messages/s. On an AMD EPYC the same prefetches lowered them
//! from 131–152 to 85–92 M messages/s, so an AMD consumer issues none
//! (`benches/results/rings.md`). Only whole lines below the cached tail are prefetched — never
//! a line the producer may still be writing, which would bounce it — so a consumer that has
//! caught up (every ping-pong hand-off) prefetches nothing and its latency is unchanged.
//! Prefetching free lines for writing on the producer side was tried and made things much
//! worse (8–15 M messages/s); it is not done.
//!
//! # Fast paths
//! [`Producer::reserve`] and [`Consumer::peek`] are each one inlined fast path for the common case
//! — a frame that needs no line padding, does not reach the end of the buffer and fits the free
//! space as last seen; a header that is plainly `VALID | len` inside the published part — with
//! everything else (padding, skip markers, re-reading the peer's index, every error and its
//! message) out of line; a skip marker in front of a frame is written when the frame is reserved,
//! so committing is a header store and a tail store on every path. Each end also looks up once,
//! when it is made, whether its doorbell's waker fence is a compiler fence
//! (`Doorbell::waker_fence_free`), so a publish no longer reloads the doorbell's mode and the
//! process's registration. Counted with `valgrind --tool=callgrind` on one thread (16-byte
//! payloads, 256 frames written then 256 read, the loop included), this took the ring from 159 to
//! 110 instructions per frame written and read, against rtrb's 34 for the same loop
//! (`benches/results/rings.md`). It did not make the two-core stream faster on the machine
//! measured: there the cost is cache-line traffic.
//!
//! # Batches
//! [`WriteGrant::commit_deferred`] writes a frame without publishing it; [`Producer::publish`]
//! then publishes every deferred frame with one store of `tail`. On the consumer side,
//! [`ReadFrame::release_deferred`] and [`Consumer::publish_release`] do the same for `head`.

mod consumer;
mod prefetch;
mod producer;
mod wait;

pub use consumer::{AHEAD_MAX_FRAMES, Consumer, Pass, ReadFrame};
pub use prefetch::read as prefetch_read;
pub use producer::{Producer, WriteGrant};
pub use wait::{DEFAULT_SPIN, LIVENESS_POLL, WaitPolicy, spin_for};
pub(crate) use wait::{Probe, park_until};

use crate::doorbell::{Doorbell, ParkMode};
use crate::error::{Error, Result};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Frames start at multiples of this many bytes (rkyv's largest alignment we support).
pub const FRAME_ALIGN: usize = 16;
/// Bytes of header in front of every frame's payload.
pub const FRAME_HEADER_BYTES: usize = 16;
/// Smallest ring capacity.
pub const MIN_CAPACITY_BYTES: usize = 64;
/// Largest ring capacity (frame lengths are 32-bit).
pub const MAX_CAPACITY_BYTES: usize = 1 << 31;

/// Header word bit: a frame of `len` bytes follows.
const HDR_VALID: u64 = 1 << 32;
/// Header word bit: the next `len` bytes are unused (the rest of a lap, or line padding).
const HDR_SKIP: u64 = 1 << 33;
/// The cache line: the unit the consumer prefetches and long frames are padded to.
pub const CACHE_LINE_BYTES: usize = 64;
/// Frames longer than this (two lines) start on a line boundary and are padded to whole lines.
pub const LINE_ALIGN_ABOVE_BYTES: usize = 2 * CACHE_LINE_BYTES;
/// The header word's length bits.
const HDR_LEN_MASK: u64 = 0xFFFF_FFFF;

const _: () = assert!(FRAME_HEADER_BYTES % FRAME_ALIGN == 0);
const _: () = assert!(MIN_CAPACITY_BYTES.is_power_of_two());
const _: () = assert!(MAX_CAPACITY_BYTES.is_power_of_two());

/// Bytes a frame with `len_bytes` of payload occupies in the ring.
#[inline]
pub const fn frame_bytes(len_bytes: usize) -> usize {
    let bytes = FRAME_HEADER_BYTES + len_bytes.next_multiple_of(FRAME_ALIGN);
    if bytes > LINE_ALIGN_ABOVE_BYTES {
        bytes.next_multiple_of(CACHE_LINE_BYTES)
    } else {
        bytes
    }
}

/// The size limits of one ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Data bytes; a power of two in `MIN_CAPACITY_BYTES..=MAX_CAPACITY_BYTES`.
    pub capacity_bytes: usize,
    /// Longest payload; at most `capacity_bytes / 2 - FRAME_HEADER_BYTES`, so that a frame
    /// always fits once the ring drains, wherever the wrap-around and the line padding fall
    /// (a frame of `s ≤ capacity/2` bytes needs at most `2s - 16` bytes with its gap).
    pub max_frame_bytes: usize,
}

impl RingConfig {
    /// A ring of `capacity_bytes` whose frames may be as long as the capacity allows.
    pub fn new(capacity_bytes: usize) -> Self {
        RingConfig {
            capacity_bytes,
            max_frame_bytes: (capacity_bytes / 2).saturating_sub(FRAME_HEADER_BYTES),
        }
    }

    /// Checks the relations documented on the fields.
    pub fn validate(&self) -> Result<()> {
        let c = self.capacity_bytes;
        if !c.is_power_of_two() || !(MIN_CAPACITY_BYTES..=MAX_CAPACITY_BYTES).contains(&c) {
            return Err(Error::InvalidConfig(format!(
                "ring capacity {c} bytes is not a power of two in \
                 {MIN_CAPACITY_BYTES}..={MAX_CAPACITY_BYTES}"
            )));
        }
        let limit = c / 2 - FRAME_HEADER_BYTES;
        if self.max_frame_bytes > limit {
            return Err(Error::InvalidConfig(format!(
                "maximum frame length {} bytes exceeds {limit} bytes (half the capacity of \
                 {c} bytes minus a header)",
                self.max_frame_bytes
            )));
        }
        Ok(())
    }
}

/// Fields the producer writes, on their own 128-byte line.
#[repr(C, align(128))]
pub struct ProducerLine {
    /// Position after the last published frame. `tail - head` is in `0..=capacity`.
    pub(crate) tail: AtomicU64,
    /// Non-zero once the producer closed its end.
    pub(crate) closed: AtomicU32,
    /// The process holding the producer end: its pid and start time packed into one word
    /// (`liveness::pack`, so a claim is one compare-and-swap and a reused pid is not
    /// mistaken for the holder); 0: none registered.
    pub(crate) holder: AtomicU64,
}

/// Fields the consumer writes, on their own 128-byte line.
#[repr(C, align(128))]
pub struct ConsumerLine {
    /// Position after the last released frame. `head <= tail`.
    pub(crate) head: AtomicU64,
    /// Non-zero once the consumer closed its end.
    pub(crate) closed: AtomicU32,
    /// The process holding the consumer end, packed as the producer's is; 0: none.
    pub(crate) holder: AtomicU64,
}

/// The control block of a ring. `#[repr(C)]`: it lives in shared memory.
#[repr(C)]
pub struct RingControl {
    pub(crate) producer: ProducerLine,
    pub(crate) consumer: ConsumerLine,
    /// The producer parks here when the ring is full; the consumer rings it on release.
    pub(crate) space: Doorbell,
}

impl Default for RingControl {
    fn default() -> Self {
        Self::new()
    }
}

impl RingControl {
    /// A control block for an empty ring with no endpoints registered, its space doorbell in
    /// the default [`ParkMode`].
    pub fn new() -> Self {
        Self::with_mode(ParkMode::default())
    }

    /// [`RingControl::new`] with the space doorbell (where a producer waits for room) in
    /// `mode`, as a segment's layout gives it for all of its doorbells.
    pub fn with_mode(mode: ParkMode) -> Self {
        RingControl {
            producer: ProducerLine {
                tail: AtomicU64::new(0),
                closed: AtomicU32::new(0),
                holder: AtomicU64::new(0),
            },
            consumer: ConsumerLine {
                head: AtomicU64::new(0),
                closed: AtomicU32::new(0),
                holder: AtomicU64::new(0),
            },
            space: Doorbell::with_mode(mode),
        }
    }

    /// Bytes published and not yet released, as seen by a third party (an inspector).
    pub fn queued_bytes(&self) -> u64 {
        let head = self.consumer.head.load(Ordering::Relaxed);
        let tail = self.producer.tail.load(Ordering::Relaxed);
        tail.saturating_sub(head)
    }
}

/// The memory a ring lives in: shared memory in production, the heap for Miri, loom's model
/// types under loom. The ring protocol is written once against this trait.
///
/// # Safety
/// An implementation guarantees, for as long as it exists: `control` and `doorbell` are valid;
/// `data` points to `capacity_bytes` bytes, 16-byte aligned, that only this ring uses;
/// `capacity_bytes` is a power of two at least [`MIN_CAPACITY_BYTES`]; `header(offset)` for an
/// offset that is a multiple of 16 below the capacity returns the atomic word that shares its
/// bytes with `data + offset` (or, under loom, a model of it); and at most one [`Producer`]
/// and one [`Consumer`] are ever built over one ring at a time.
pub unsafe trait RingMemory {
    /// The ring's control block.
    fn control(&self) -> &RingControl;
    /// The doorbell the consumer parks on (possibly shared with other rings it consumes).
    fn doorbell(&self) -> &Doorbell;
    /// The ring's size limits.
    fn config(&self) -> RingConfig;
    /// The header word at `offset_bytes` (a multiple of 16 below the capacity).
    fn header(&self, offset_bytes: usize) -> &AtomicU64;
    /// The first data byte.
    fn data(&self) -> *mut u8;
    /// Called before the producer writes `[offset, offset + len)`; loom's race detector hook.
    #[inline]
    fn track_write(&self, _offset_bytes: usize, _len_bytes: usize) {}
    /// Called before the consumer reads `[offset, offset + len)`; loom's race detector hook.
    #[inline]
    fn track_read(&self, _offset_bytes: usize, _len_bytes: usize) {}
}
