//! The writing end of a ring: reserve a frame in place, fill it, commit it — publishing at
//! once, or deferred so that one store of `tail` publishes a batch.

use super::wait::{Probe, WaitPolicy, check_alive, park_until};
use super::{
    CACHE_LINE_BYTES, FRAME_ALIGN, FRAME_HEADER_BYTES, HDR_SKIP, HDR_VALID, LINE_ALIGN_ABOVE_BYTES,
    RingConfig, RingMemory, frame_bytes,
};
use crate::doorbell::Doorbell;
use crate::error::{Error, Result};
use crate::sync::Ordering;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

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
    /// The doorbell's waker fence is a compiler fence here (`Doorbell::waker_fence_free`,
    /// looked up once).
    wake_fence_free: bool,
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
        // Checked here, in every build: the offsets this producer writes headers at derive
        // from `tail`, and a misaligned one would be an unaligned atomic access.
        let aligned = |p: u64| p % FRAME_ALIGN as u64 == 0;
        if !aligned(tail)
            || !aligned(head)
            || head > tail
            || tail - head > config.capacity_bytes as u64
        {
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
            wake_fence_free: mem.doorbell().waker_fence_free(),
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
    #[inline]
    pub fn used_bytes(&self) -> usize {
        (self.tail - self.cached_head) as usize
    }

    /// Whether the consumer has released every frame this producer wrote, published or not
    /// (reads the consumer's `head`, so a producer that is also the consumer, an executor
    /// writing to itself, learns whether its own queue is empty).
    #[inline]
    pub fn drained(&self) -> bool {
        self.mem.control().consumer.head.load(Ordering::Acquire) == self.tail
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
        let pad = if size > LINE_ALIGN_ABOVE_BYTES {
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
            return Err(bad_head(head, self.cached_head, self.tail));
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
    ///
    /// The common case — the frame needs no line padding, does not reach the end of the
    /// buffer and fits the free space as last seen — is a handful of compares, inlined; the
    /// rest (padding, wrap-around, re-reading `head`, errors) is `reserve_slow`.
    #[inline(always)]
    pub fn reserve(&mut self, len_bytes: usize) -> Result<WriteGrant<'_, M>> {
        let capacity_bytes = self.config.capacity_bytes;
        if len_bytes <= self.config.max_frame_bytes {
            let size = frame_bytes(len_bytes);
            let off = (self.tail & self.mask) as usize;
            if (size <= LINE_ALIGN_ABOVE_BYTES || off % CACHE_LINE_BYTES == 0)
                && off + size <= capacity_bytes
                && self.used_bytes() + size <= capacity_bytes
            {
                self.mem.track_write(off, size);
                return Ok(WriteGrant {
                    start: self.tail,
                    producer: self,
                    len_bytes,
                });
            }
        }
        let start = self.reserve_slow(len_bytes)?;
        Ok(WriteGrant {
            producer: self,
            start,
            len_bytes,
        })
    }

    /// [`Self::reserve`] when the frame needs padding or a skip to the next lap, or the ring
    /// looks full: the frame's position. A skip marker in front of it is written here, in
    /// space the consumer does not read until the frame is published (if the grant is
    /// abandoned, the next reservation starts at the same place and overwrites it), so that
    /// committing is the same few stores on every path.
    #[inline(never)]
    fn reserve_slow(&mut self, len_bytes: usize) -> Result<u64> {
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
        if let Some(w) = wrap_from {
            let skip_off = (w & self.mask) as usize;
            self.mem.track_write(skip_off, FRAME_HEADER_BYTES);
            self.mem
                .header(skip_off)
                .store(HDR_SKIP | (start - w), Ordering::Relaxed);
        }
        self.mem.track_write(off, frame_bytes(len_bytes));
        Ok(start)
    }

    /// Copies `payload` into a new frame and publishes it.
    #[inline]
    pub fn push(&mut self, payload: &[u8]) -> Result<()> {
        let mut grant = self.reserve(payload.len())?;
        grant.copy_from_slice(payload);
        grant.commit();
        Ok(())
    }

    #[inline(always)]
    fn commit_frame(&mut self, start: u64, len_bytes: usize) {
        let off = (start & self.mask) as usize;
        self.mem
            .header(off)
            .store(HDR_VALID | len_bytes as u64, Ordering::Relaxed);
        self.tail = start + frame_bytes(len_bytes) as u64;
    }

    /// Publishes every frame committed with [`WriteGrant::commit_deferred`] with one release
    /// store, and wakes the consumer if it sleeps.
    #[inline]
    pub fn publish(&mut self) {
        if self.tail != self.published_tail {
            self.publish_tail();
        }
    }

    /// Stores `tail` for the consumer and wakes it if it sleeps.
    #[inline(always)]
    fn publish_tail(&mut self) {
        self.published_tail = self.tail;
        // SYNC: tail-publish — pairs with the Acquire load in `Consumer::refresh_tail`; the
        // headers and payloads written before it become visible with it. `ring` fences after
        // it (SYNC: park).
        self.mem
            .control()
            .producer
            .tail
            .store(self.tail, Ordering::Release);
        self.mem.doorbell().ring_cached(self.wake_fence_free);
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
        check_alive(&line.holder, &line.closed)
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
    len_bytes: usize,
}

impl<M: RingMemory> WriteGrant<'_, M> {
    /// Writes the frame and publishes it (and any deferred frames before it).
    #[inline(always)]
    pub fn commit(self) {
        let p = self.producer;
        p.commit_frame(self.start, self.len_bytes);
        // A frame was just written, so `tail` moved: publish without comparing.
        p.publish_tail();
    }

    /// Writes the frame; it becomes visible at the next [`Producer::publish`] (or the next
    /// `commit`).
    #[inline]
    pub fn commit_deferred(self) {
        self.producer.commit_frame(self.start, self.len_bytes);
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

#[cold]
#[inline(never)]
fn bad_head(head: u64, cached_head: u64, tail: u64) -> Error {
    Error::Corrupt(format!(
        "consumer head {head} outside {cached_head}..={tail}"
    ))
}
