//! The SPSC ring of variable-length frames.
//!
//! # Layout
//! The ring is a power-of-two byte buffer plus a [`RingControl`] block. A frame is a 16-byte
//! header followed by its payload, padded so the next frame starts 16-byte aligned (rkyv
//! archives can be read in place). The first 8 header bytes are one word: `VALID | len` for a
//! frame, `SKIP | gap` for "the next `gap` bytes are unused" (the rest of a lap, or padding up
//! to a cache line). The other 8 bytes are reserved (zero). A frame never straddles the end of
//! the buffer, so it can be read and written in place as one slice.
//!
//! A frame longer than a cache line starts on a line boundary and is padded to whole lines.
//! Otherwise consecutive frames share lines, and a consumer reading frame k pulls the line the
//! producer is writing frame k + 1 into: line-aligning raised the throughput of 64-byte
//! payloads (80-byte frames) from 26.6 to 33–37 M messages/s (`benches/README.md`). Moving the
//! lengths out of band into a descriptor lane, so a 64-byte payload is one line, was measured
//! too and lost at 16 and 64 bytes (the descriptor lines bounce instead); it was reverted.
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
//! side (`benches/README.md`), the two shapes were a wash at 64 bytes (header polling won at 16
//! bytes one-way, lost a little throughput); the index needs neither the zeroing store nor the
//! slack it reserves, so it stayed. What did matter is line sharing (see Layout above).
//!
//! # Prefetching
//! When the consumer is behind (the tail it cached lies beyond the frame it reads), it
//! prefetches the published lines ahead of it, up to 2 KiB past `head` and at most 4 lines per
//! frame read. `perf annotate` showed the consumer's time on the first load of each frame's
//! line: the line sits modified in the producer's cache, and the hardware prefetcher does not
//! fetch it early enough. With the transfers overlapped, 64-byte payloads went from 33–37 to
//! about 100 M messages/s (`benches/README.md`). Only whole lines below the cached tail are
//! prefetched — never a line the producer may still be writing, which would bounce it — so a
//! consumer that has caught up (every ping-pong hand-off) prefetches nothing and its latency
//! is unchanged. Prefetching free lines for writing on the producer side was tried and made
//! things much worse (8–15 M messages/s); it is not done.
//!
//! # Batches
//! [`WriteGrant::commit_deferred`] writes a frame without publishing it; [`Producer::publish`]
//! then publishes every deferred frame with one store of `tail`. On the consumer side,
//! [`ReadFrame::release_deferred`] and [`Consumer::publish_release`] do the same for `head`.

use crate::doorbell::Doorbell;
use crate::error::{Error, Result};
use crate::sync::{AtomicU32, AtomicU64, Ordering, spin_loop};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

/// Frames start at multiples of this many bytes (rkyv's largest alignment we support).
pub const FRAME_ALIGN: usize = 16;
/// Bytes of header in front of every frame's payload.
pub const FRAME_HEADER_BYTES: usize = 16;
/// Smallest ring capacity.
pub const MIN_CAPACITY_BYTES: usize = 64;
/// Largest ring capacity (frame lengths are 32-bit).
pub const MAX_CAPACITY_BYTES: usize = 1 << 31;

const HDR_VALID: u64 = 1 << 32;
const HDR_SKIP: u64 = 1 << 33;
/// Frames longer than this start on a line boundary and are padded to whole lines.
pub const CACHE_LINE_BYTES: usize = 64;
const HDR_LEN_MASK: u64 = 0xFFFF_FFFF;

/// How long a parked side sleeps before it checks whether its peer process is still alive.
pub const LIVENESS_POLL: Duration = Duration::from_millis(50);

const _: () = assert!(FRAME_HEADER_BYTES % FRAME_ALIGN == 0);
const _: () = assert!(MIN_CAPACITY_BYTES.is_power_of_two());
const _: () = assert!(MAX_CAPACITY_BYTES.is_power_of_two());

/// How far past its position the consumer prefetches published lines (module docs,
/// "Prefetching").
const PREFETCH_AHEAD_BYTES: u64 = 2048;
/// Most lines the consumer prefetches per frame it reads, so large frames (which the
/// hardware's own stream prefetcher follows) do not flood the line-fill buffers.
const PREFETCH_LINES_PER_FRAME: u64 = 4;

/// Asks for the line at `p` to be brought into this core's cache for reading.
#[inline(always)]
fn prefetch_read(_p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    // SAFETY: a prefetch is a hint; it never faults and does not access memory architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(_p.cast())
    };
}

/// Bytes a frame with `len_bytes` of payload occupies in the ring.
#[inline]
pub const fn frame_bytes(len_bytes: usize) -> usize {
    let bytes = FRAME_HEADER_BYTES + len_bytes.next_multiple_of(FRAME_ALIGN);
    if bytes > CACHE_LINE_BYTES {
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
    /// Pid of the process holding the producer end (0: none registered).
    pub(crate) pid: AtomicU32,
    /// That process's start time in clock ticks since boot, so a reused pid is not mistaken
    /// for the holder.
    pub(crate) start_ticks: AtomicU64,
}

/// Fields the consumer writes, on their own 128-byte line.
#[repr(C, align(128))]
pub struct ConsumerLine {
    /// Position after the last released frame. `head <= tail`.
    pub(crate) head: AtomicU64,
    /// Non-zero once the consumer closed its end.
    pub(crate) closed: AtomicU32,
    /// Pid of the process holding the consumer end (0: none registered).
    pub(crate) pid: AtomicU32,
    /// That process's start time in clock ticks since boot.
    pub(crate) start_ticks: AtomicU64,
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
    /// A control block for an empty ring with no endpoints registered.
    pub fn new() -> Self {
        RingControl {
            producer: ProducerLine {
                tail: AtomicU64::new(0),
                closed: AtomicU32::new(0),
                pid: AtomicU32::new(0),
                start_ticks: AtomicU64::new(0),
            },
            consumer: ConsumerLine {
                head: AtomicU64::new(0),
                closed: AtomicU32::new(0),
                pid: AtomicU32::new(0),
                start_ticks: AtomicU64::new(0),
            },
            space: Doorbell::new(),
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

/// How a side waits: spin this many times, then park.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Polls before parking. 0 when runnable threads outnumber cores: a spinner would take the
    /// core from the very thread it waits for.
    pub spins: u32,
}

/// Polls before parking when every runnable thread has a core of its own. About 10-30 µs on a
/// current x86 core: long enough to ride out a burst's gaps, short against a park/wake pair.
pub const DEFAULT_SPINS: u32 = 10_000;

impl WaitPolicy {
    /// Never spin: park as soon as there is nothing to do.
    pub const PARK: WaitPolicy = WaitPolicy { spins: 0 };

    /// The policy for a process that runs `runnable_threads` busy threads: spin only when each
    /// has a core.
    pub fn for_runnable_threads(runnable_threads: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if runnable_threads > cores {
            Self::PARK
        } else {
            WaitPolicy {
                spins: DEFAULT_SPINS,
            }
        }
    }
}

/// What [`park_until`] asks its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Is the condition met? A cheap poll, used while spinning.
    Poll,
    /// Is the condition met? Re-checked after announcing a park (SYNC: park); must read the
    /// shared words afresh, not a cached copy.
    Strong,
    /// Is the peer still alive? Asked after every timed-out park slice; answer `Ok(false)` or
    /// the error.
    Liveness,
}

/// Sleep on `bell` until `probe` says the condition holds, spinning first as `policy` says.
pub(crate) fn park_until(
    bell: &Doorbell,
    policy: WaitPolicy,
    timeout: Option<Duration>,
    mut probe: impl FnMut(Probe) -> Result<bool>,
) -> Result<()> {
    for _ in 0..policy.spins {
        if probe(Probe::Poll)? {
            return Ok(());
        }
        spin_loop();
    }
    let start = Instant::now();
    let mut last_liveness_check = start;
    loop {
        if probe(Probe::Poll)? {
            return Ok(());
        }
        let token = bell.prepare_park();
        let now_ready = probe(Probe::Strong);
        if !matches!(now_ready, Ok(false)) {
            bell.finish_park(token);
            if now_ready? {
                return Ok(());
            }
            continue;
        }
        let slice = match timeout {
            Some(t) => {
                let left = t.saturating_sub(start.elapsed());
                if left.is_zero() {
                    bell.finish_park(token);
                    return Err(Error::TimedOut {
                        waited_ms: t.as_millis() as u64,
                    });
                }
                left.min(LIVENESS_POLL)
            }
            None => LIVENESS_POLL,
        };
        bell.park(token, Some(slice));
        bell.finish_park(token);
        // Reading /proc costs microseconds: at most once per LIVENESS_POLL, not per wake-up.
        if last_liveness_check.elapsed() >= LIVENESS_POLL {
            probe(Probe::Liveness)?;
            last_liveness_check = Instant::now();
        }
    }
}

/// Whether the registered process (pid, start ticks) is alive; `Ok` when none is registered,
/// or when it closed its end before going away (a clean exit, not a death).
fn check_alive(pid: &AtomicU32, start_ticks: &AtomicU64, closed: &AtomicU32) -> Result<()> {
    if closed.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let pid = pid.load(Ordering::Acquire);
    if pid == 0 {
        return Ok(());
    }
    let ticks = start_ticks.load(Ordering::Acquire);
    if crate::liveness::is_alive(pid, ticks) {
        Ok(())
    } else {
        Err(Error::PeerDead { pid })
    }
}

/// The writing end of a ring.
pub struct Producer<M: RingMemory> {
    mem: M,
    /// Position where the next frame goes (published or not). `tail - cached_head` is in
    /// `0..=capacity`.
    tail: u64,
    /// The consumer's `head` when last read.
    cached_head: u64,
    /// `tail` as last published. `published_tail <= tail`.
    published_tail: u64,
    mask: u64,
    config: RingConfig,
    /// Producers are not `Sync`: one thread writes at a time.
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: a Producer is the only writer of its ring's producer-side fields; moving it to
// another thread moves that role with it. The memory handle is Send by its own bound.
unsafe impl<M: RingMemory + Send> Send for Producer<M> {}

impl<M: RingMemory> Producer<M> {
    /// The producer end over `mem`, starting from the positions stored in its control block.
    ///
    /// # Safety
    /// No other `Producer` over the same ring may exist at the same time.
    pub unsafe fn new(mem: M) -> Result<Self> {
        let config = mem.config();
        config.validate()?;
        let tail = mem.control().producer.tail.load(Ordering::Acquire);
        let head = mem.control().consumer.head.load(Ordering::Acquire);
        if head > tail || tail - head > config.capacity_bytes as u64 {
            return Err(Error::Corrupt(format!(
                "head {head} and tail {tail} are inconsistent"
            )));
        }
        Ok(Producer {
            tail,
            cached_head: head,
            published_tail: tail,
            mask: config.capacity_bytes as u64 - 1,
            config,
            mem,
            _not_sync: PhantomData,
        })
    }

    /// The ring's limits.
    pub fn config(&self) -> RingConfig {
        self.config
    }

    /// The memory handle.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Bytes this producer has written (published or not) and the consumer has not released,
    /// as of the last refresh.
    pub fn used_bytes(&self) -> usize {
        (self.tail - self.cached_head) as usize
    }

    /// Whether the consumer closed its end.
    pub fn is_closed(&self) -> bool {
        self.mem.control().consumer.closed.load(Ordering::Acquire) != 0
    }

    /// Where a frame of `len_bytes` would go: (frame position, position of a skip marker in
    /// front of it, bytes needed including the skipped gap).
    #[inline]
    fn placement(&self, len_bytes: usize) -> (u64, Option<u64>, usize) {
        let size = frame_bytes(len_bytes);
        let off = (self.tail & self.mask) as usize;
        let pad = if size > CACHE_LINE_BYTES {
            off.next_multiple_of(CACHE_LINE_BYTES) - off
        } else {
            0
        };
        let to_end = self.config.capacity_bytes - off;
        if pad + size <= to_end {
            let start = self.tail + pad as u64;
            (start, (pad > 0).then_some(self.tail), pad + size)
        } else {
            (self.tail + to_end as u64, Some(self.tail), to_end + size)
        }
    }

    /// Re-reads the consumer's head.
    #[inline]
    fn refresh_head(&mut self) -> Result<()> {
        // SYNC: head-publish — pairs with the store in `Consumer::publish_release`.
        let head = self.mem.control().consumer.head.load(Ordering::Acquire);
        if head < self.cached_head || head > self.tail {
            return Err(Error::Corrupt(format!(
                "consumer head {head} outside {}..={}",
                self.cached_head, self.tail
            )));
        }
        self.cached_head = head;
        Ok(())
    }

    #[inline]
    fn fits(&self, needed: usize) -> bool {
        self.used_bytes() + needed <= self.config.capacity_bytes
    }

    /// Reserves room for a frame of `len_bytes` and returns its payload to fill in place.
    /// Nothing is visible to the consumer until the grant is committed.
    #[inline]
    pub fn reserve(&mut self, len_bytes: usize) -> Result<WriteGrant<'_, M>> {
        if len_bytes > self.config.max_frame_bytes {
            return Err(Error::FrameTooLarge {
                len_bytes,
                max_bytes: self.config.max_frame_bytes,
            });
        }
        let (start, wrap_from, needed) = self.placement(len_bytes);
        if !self.fits(needed) {
            self.refresh_head()?;
            if !self.fits(needed) {
                return Err(Error::Full {
                    needed_bytes: needed,
                    free_bytes: self.config.capacity_bytes - self.used_bytes(),
                });
            }
        }
        let off = (start & self.mask) as usize;
        self.mem.track_write(off, frame_bytes(len_bytes));
        Ok(WriteGrant {
            producer: self,
            start,
            wrap_from,
            len_bytes,
        })
    }

    /// Copies `payload` into a new frame and publishes it.
    #[inline]
    pub fn push(&mut self, payload: &[u8]) -> Result<()> {
        let mut grant = self.reserve(payload.len())?;
        grant.copy_from_slice(payload);
        grant.commit();
        Ok(())
    }

    #[inline]
    fn commit_frame(&mut self, start: u64, wrap_from: Option<u64>, len_bytes: usize) {
        let off = (start & self.mask) as usize;
        self.mem
            .header(off)
            .store(HDR_VALID | len_bytes as u64, Ordering::Relaxed);
        if let Some(w) = wrap_from {
            self.mem
                .header((w & self.mask) as usize)
                .store(HDR_SKIP | (start - w), Ordering::Relaxed);
        }
        self.tail = start + frame_bytes(len_bytes) as u64;
    }

    /// Publishes every frame committed with [`WriteGrant::commit_deferred`] with one release
    /// store, and wakes the consumer if it sleeps.
    #[inline]
    pub fn publish(&mut self) {
        if self.tail != self.published_tail {
            self.published_tail = self.tail;
            // SYNC: tail-publish — pairs with the Acquire load in `Consumer::next_frame`; the
            // headers and payloads written before it become visible with it. `ring` fences
            // after it (SYNC: park).
            self.mem
                .control()
                .producer
                .tail
                .store(self.tail, Ordering::Release);
            self.mem.doorbell().ring();
        }
    }

    /// Waits until a frame of `len_bytes` fits, spinning then parking as `policy` says.
    pub fn wait_for_space(
        &mut self,
        len_bytes: usize,
        policy: WaitPolicy,
        timeout: Option<Duration>,
    ) -> Result<()> {
        if len_bytes > self.config.max_frame_bytes {
            return Err(Error::FrameTooLarge {
                len_bytes,
                max_bytes: self.config.max_frame_bytes,
            });
        }
        self.publish();
        let (_, _, needed) = self.placement(len_bytes);
        let space: *const Doorbell = &self.mem.control().space;
        // SAFETY: the doorbell lives in the ring's memory, not in `self`, and `self.mem` keeps
        // it alive for this call; the probe below needs `&mut self`, hence the raw pointer.
        let space = unsafe { &*space };
        park_until(space, policy, timeout, |probe| {
            if probe == Probe::Liveness {
                return self.check_peer().map(|()| false);
            }
            if self.is_closed() {
                return Err(Error::Closed);
            }
            self.refresh_head()?;
            Ok(self.fits(needed))
        })
    }

    /// Whether the consumer's process is alive (always, when none registered).
    pub fn check_peer(&self) -> Result<()> {
        let line = &self.mem.control().consumer;
        check_alive(&line.pid, &line.start_ticks, &line.closed)
    }
}

impl<M: RingMemory> Drop for Producer<M> {
    fn drop(&mut self) {
        self.publish();
        let control = self.mem.control();
        control.producer.closed.store(1, Ordering::Release);
        self.mem.doorbell().ring();
    }
}

/// Room for one frame, reserved and not yet visible. Dereferences to the payload bytes.
/// Dropping it without committing abandons the reservation.
pub struct WriteGrant<'a, M: RingMemory> {
    producer: &'a mut Producer<M>,
    start: u64,
    wrap_from: Option<u64>,
    len_bytes: usize,
}

impl<M: RingMemory> WriteGrant<'_, M> {
    /// Writes the frame and publishes it (and any deferred frames before it).
    #[inline]
    pub fn commit(self) {
        let p = self.producer;
        p.commit_frame(self.start, self.wrap_from, self.len_bytes);
        p.publish();
    }

    /// Writes the frame; it becomes visible at the next [`Producer::publish`] (or the next
    /// `commit`).
    #[inline]
    pub fn commit_deferred(self) {
        self.producer
            .commit_frame(self.start, self.wrap_from, self.len_bytes);
    }
}

impl<M: RingMemory> Deref for WriteGrant<'_, M> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        let off = (self.start & self.producer.mask) as usize + FRAME_HEADER_BYTES;
        // SAFETY: `reserve` checked that [off - 16, off + len) lies inside the data region
        // (a frame never straddles the end) and in the free part of the ring, which the
        // consumer does not read until the frame is published.
        unsafe { std::slice::from_raw_parts(self.producer.mem.data().add(off), self.len_bytes) }
    }
}

impl<M: RingMemory> DerefMut for WriteGrant<'_, M> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        let off = (self.start & self.producer.mask) as usize + FRAME_HEADER_BYTES;
        // SAFETY: as in `deref`; `&mut self` makes this the only reference to those bytes.
        unsafe { std::slice::from_raw_parts_mut(self.producer.mem.data().add(off), self.len_bytes) }
    }
}

/// The reading end of a ring.
pub struct Consumer<M: RingMemory> {
    mem: M,
    /// Position of the next frame to read. `released_head <= head <= tail`.
    head: u64,
    /// `head` as last published to the producer.
    released_head: u64,
    /// The producer's `tail` when last read. `head <= cached_tail`.
    cached_tail: u64,
    /// Lines before this position were prefetched for reading.
    prefetched: u64,
    mask: u64,
    config: RingConfig,
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

// SAFETY: a Consumer is the only reader of its ring; moving it moves that role.
unsafe impl<M: RingMemory + Send> Send for Consumer<M> {}

/// A frame found by [`Consumer::next_frame`]: payload offset, length, bytes it occupies.
#[derive(Clone, Copy)]
struct Found {
    payload_offset: usize,
    len_bytes: usize,
    size_bytes: usize,
}

impl<M: RingMemory> Consumer<M> {
    /// The consumer end over `mem`, starting from the positions stored in its control block.
    ///
    /// # Safety
    /// No other `Consumer` over the same ring may exist at the same time.
    pub unsafe fn new(mem: M) -> Result<Self> {
        let config = mem.config();
        config.validate()?;
        let head = mem.control().consumer.head.load(Ordering::Acquire);
        Ok(Consumer {
            head,
            released_head: head,
            cached_tail: head,
            prefetched: head,
            mask: config.capacity_bytes as u64 - 1,
            config,
            mem,
            _not_sync: PhantomData,
        })
    }

    /// The ring's limits.
    pub fn config(&self) -> RingConfig {
        self.config
    }

    /// The memory handle.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    /// Looks at the header at `head`; skips a skip marker (end of lap or line padding). Every value read from shared
    /// memory is checked before it is used.
    #[inline]
    fn next_frame(&mut self) -> Result<Option<Found>> {
        if self.head == self.cached_tail {
            // SYNC: tail-publish — pairs with the Release store in `Producer::publish`.
            let tail = self.mem.control().producer.tail.load(Ordering::Acquire);
            if tail < self.head || tail - self.head > self.config.capacity_bytes as u64 {
                return Err(Error::Corrupt(format!(
                    "producer tail {tail} with consumer head {}",
                    self.head
                )));
            }
            if tail == self.head {
                return Ok(None);
            }
            self.cached_tail = tail;
        }
        let mut off = (self.head & self.mask) as usize;
        let mut word = self.mem.header(off).load(Ordering::Relaxed);
        if word & HDR_SKIP != 0 {
            let gap = (word & HDR_LEN_MASK) as usize;
            if word & !(HDR_SKIP | HDR_LEN_MASK) != 0
                || gap < FRAME_HEADER_BYTES
                || gap % FRAME_ALIGN != 0
                || off + gap > self.config.capacity_bytes
                || self.head + gap as u64 >= self.cached_tail
            {
                return Err(Error::Corrupt(format!(
                    "bad skip marker {word:#x} at offset {off}"
                )));
            }
            self.head += gap as u64;
            off = (self.head & self.mask) as usize;
            word = self.mem.header(off).load(Ordering::Relaxed);
        }
        if word & !(HDR_VALID | HDR_LEN_MASK) != 0 || word & HDR_VALID == 0 {
            return Err(Error::Corrupt(format!(
                "bad frame header {word:#x} at offset {off}"
            )));
        }
        let len_bytes = (word & HDR_LEN_MASK) as usize;
        let size_bytes = frame_bytes(len_bytes);
        if len_bytes > self.config.max_frame_bytes
            || off + size_bytes > self.config.capacity_bytes
            || self.head + size_bytes as u64 > self.cached_tail
        {
            return Err(Error::Corrupt(format!(
                "frame of {len_bytes} bytes at offset {off} overruns the ring"
            )));
        }
        self.mem.track_read(off, size_bytes);
        self.prefetch_published(self.head + size_bytes as u64);
        Ok(Some(Found {
            payload_offset: off + FRAME_HEADER_BYTES,
            len_bytes,
            size_bytes,
        }))
    }

    /// Prefetches, for reading, up to `PREFETCH_LINES_PER_FRAME` published lines from `from`
    /// on, no further than `PREFETCH_AHEAD_BYTES` past `head`. Whole published lines only:
    /// the producer does not write them again until they are released, so a prefetch never
    /// pulls a line it is still filling (a line holding the last published frame and the
    /// next, unpublished one is left alone). Always inlined: as an out-of-line call per frame
    /// the consumer was too slow to stay ahead, and 64-byte throughput fell back to 31–41 M
    /// messages/s (`benches/README.md`).
    #[inline(always)]
    fn prefetch_published(&mut self, from: u64) {
        let line = CACHE_LINE_BYTES as u64;
        let end = (self.head + PREFETCH_AHEAD_BYTES).min(self.cached_tail & !(line - 1));
        let mut p = self.prefetched.max(from);
        let stop = end.min(p + PREFETCH_LINES_PER_FRAME * line);
        while p < stop {
            prefetch_read(self.mem.data().wrapping_add((p & self.mask) as usize));
            p += line;
        }
        self.prefetched = p;
    }

    /// The next frame, if one is published. Reading it does not remove it: call
    /// [`ReadFrame::release`].
    #[inline]
    pub fn peek(&mut self) -> Result<Option<ReadFrame<'_, M>>> {
        Ok(self.next_frame()?.map(|found| ReadFrame {
            consumer: self,
            found,
        }))
    }

    /// Reads up to `max_frames` frames, calling `f` on each payload in place, then releases
    /// them all with one store. Returns how many were read.
    #[inline]
    pub fn pop_batch(&mut self, max_frames: usize, mut f: impl FnMut(&[u8])) -> Result<usize> {
        let mut n = 0;
        while n < max_frames {
            let Some(found) = self.next_frame()? else {
                break;
            };
            f(self.payload(found));
            self.head += found.size_bytes as u64;
            n += 1;
        }
        self.publish_release();
        Ok(n)
    }

    #[inline]
    fn payload(&self, found: Found) -> &[u8] {
        // SAFETY: `next_frame` checked the frame lies inside the data region; the producer
        // published it (Acquire above) and will not write it again until `head` passes it.
        unsafe {
            std::slice::from_raw_parts(self.mem.data().add(found.payload_offset), found.len_bytes)
        }
    }

    /// Publishes every release made with [`ReadFrame::release_deferred`] with one store, and
    /// wakes the producer if it waits for space.
    #[inline]
    pub fn publish_release(&mut self) {
        if self.head != self.released_head {
            self.released_head = self.head;
            // SYNC: head-publish — pairs with the load in `Producer::refresh_head`; `ring`
            // fences after it (SYNC: park).
            self.mem
                .control()
                .consumer
                .head
                .store(self.head, Ordering::Release);
            self.mem.control().space.ring();
        }
    }

    /// Whether a frame is published. The frame header is read afresh every time, so this is
    /// also the re-check after a park announcement (SYNC: park).
    fn readable(&mut self) -> Result<bool> {
        Ok(self.next_frame()?.is_some())
    }

    /// Whether a frame is readable; `Err(Closed)` when the producer closed and none is left.
    pub(crate) fn readable_or_closed(&mut self) -> Result<bool> {
        if self.readable()? {
            return Ok(true);
        }
        if self.mem.control().producer.closed.load(Ordering::Acquire) != 0 {
            // Re-check: frames published before the close are still to be read.
            return if self.readable()? {
                Ok(true)
            } else {
                Err(Error::Closed)
            };
        }
        Ok(false)
    }

    /// Whether the producer closed its end. Frames it published before closing can still be
    /// read.
    pub fn is_closed(&self) -> bool {
        self.mem.control().producer.closed.load(Ordering::Acquire) != 0
    }

    /// Waits until a frame is readable. `Err(Closed)` once the producer closed and every frame
    /// was read; `Err(PeerDead)` if the producer's process died.
    pub fn wait(&mut self, policy: WaitPolicy, timeout: Option<Duration>) -> Result<()> {
        self.publish_release();
        let bell: *const Doorbell = self.mem.doorbell();
        // SAFETY: the doorbell lives in the ring's memory, not in `self`, and `self.mem` keeps
        // it alive for this call; the probe below needs `&mut self`, hence the raw pointer.
        let bell = unsafe { &*bell };
        park_until(bell, policy, timeout, |probe| {
            if probe == Probe::Liveness {
                return self.check_peer().map(|()| false);
            }
            self.readable_or_closed()
        })
    }

    /// Bytes published and not yet read by this consumer.
    pub fn pending_bytes(&self) -> u64 {
        self.mem
            .control()
            .producer
            .tail
            .load(Ordering::Acquire)
            .saturating_sub(self.head)
    }

    /// Whether the producer's process is alive (always, when none registered).
    pub fn check_peer(&self) -> Result<()> {
        let line = &self.mem.control().producer;
        check_alive(&line.pid, &line.start_ticks, &line.closed)
    }
}

impl<M: RingMemory> Drop for Consumer<M> {
    fn drop(&mut self) {
        self.publish_release();
        let control = self.mem.control();
        control.consumer.closed.store(1, Ordering::Release);
        control.space.ring();
    }
}

/// A published frame, read in place. Dereferences to its payload.
pub struct ReadFrame<'a, M: RingMemory> {
    consumer: &'a mut Consumer<M>,
    found: Found,
}

impl<M: RingMemory> ReadFrame<'_, M> {
    /// Removes the frame and hands its space back to the producer now.
    #[inline]
    pub fn release(self) {
        let c = self.consumer;
        c.head += self.found.size_bytes as u64;
        c.publish_release();
    }

    /// Removes the frame; its space goes back at the next [`Consumer::publish_release`].
    #[inline]
    pub fn release_deferred(self) {
        self.consumer.head += self.found.size_bytes as u64;
    }
}

impl<M: RingMemory> Deref for ReadFrame<'_, M> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.consumer.payload(self.found)
    }
}
