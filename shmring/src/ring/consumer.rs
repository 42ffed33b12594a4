//! The reading end of a ring: peek a frame in place and release it, or pop a batch (in one pass
//! or two, the first to look ahead) and release it with one store of `head`; prefetch published
//! lines while behind (the module docs of
//! [`super`], "Prefetching").

use super::prefetch;
use super::wait::{Probe, WaitPolicy, check_alive, park_until};
use super::{
    CACHE_LINE_BYTES, FRAME_ALIGN, FRAME_HEADER_BYTES, HDR_LEN_MASK, HDR_SKIP, HDR_VALID,
    RingConfig, RingMemory, frame_bytes,
};
use crate::doorbell::Doorbell;
use crate::error::{Error, Result};
use crate::sync::Ordering;
use std::marker::PhantomData;
use std::ops::Deref;
use std::time::Duration;

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
    /// Lines prefetched per frame read; 0: none on this CPU (`prefetch::lines_per_frame`).
    prefetch_lines: u64,
    mask: u64,
    config: RingConfig,
    /// The `space` doorbell's waker fence is a compiler fence here
    /// (`Doorbell::waker_fence_free`, looked up once).
    wake_fence_free: bool,
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

impl Found {
    /// A placeholder for an array slot not filled yet (never read as a frame).
    const NONE: Found = Found {
        payload_offset: 0,
        len_bytes: 0,
        size_bytes: 0,
    };
}

/// Most frames one [`Consumer::pop_batch_ahead`] reads.
pub const AHEAD_MAX_FRAMES: usize = 32;

/// Which pass of [`Consumer::pop_batch_ahead`] a payload is shown in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The first: look, and start fetching what the frame will need.
    Ahead,
    /// The second: the frame itself, to handle.
    Take,
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
        let tail = mem.control().producer.tail.load(Ordering::Acquire);
        // Checked here, in every build: the header offsets of every frame this consumer reads
        // derive from `head`, and a misaligned one would be an unaligned atomic access.
        let aligned = |p: u64| p % FRAME_ALIGN as u64 == 0;
        if !aligned(head)
            || !aligned(tail)
            || head > tail
            || tail - head > config.capacity_bytes as u64
        {
            return Err(Error::Corrupt(format!(
                "consumer head {head} with producer tail {tail} (capacity {} bytes)",
                config.capacity_bytes
            )));
        }
        Ok(Consumer {
            head,
            released_head: head,
            cached_tail: head,
            prefetched: head,
            prefetch_lines: prefetch::lines_per_frame(),
            mask: config.capacity_bytes as u64 - 1,
            config,
            wake_fence_free: mem.control().space.waker_fence_free(),
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

    /// Looks at the header at `head`; skips a skip marker (end of lap or line padding). Every
    /// value read from shared memory is checked before it is used. Always inlined, with the
    /// uncommon cases and every error out of line: as one out-of-line function with the error
    /// formatting in its body, every poll of an empty ring was a call and a 160-byte stack
    /// frame.
    #[inline(always)]
    fn next_frame(&mut self) -> Result<Option<Found>> {
        if self.head == self.cached_tail && !self.refresh_tail()? {
            return Ok(None);
        }
        let off = (self.head & self.mask) as usize;
        let word = self.mem.header(off).load(Ordering::Relaxed);
        let len_bytes = (word & HDR_LEN_MASK) as usize;
        let size_bytes = frame_bytes(len_bytes);
        // Exactly `VALID | len` (no other bit above the length), inside the buffer and the
        // published part of it: the common case. Anything else — a skip marker, or a value no
        // correct producer writes — is `next_frame_slow`.
        if word >> 32 != HDR_VALID >> 32
            || len_bytes > self.config.max_frame_bytes
            || off + size_bytes > self.config.capacity_bytes
            || self.head + size_bytes as u64 > self.cached_tail
        {
            return self.next_frame_slow(off, word).map(Some);
        }
        Ok(Some(self.found(off, len_bytes, size_bytes)))
    }

    /// The frame of `len_bytes` at `off` is published and inside the buffer: prefetch past it.
    #[inline(always)]
    fn found(&mut self, off: usize, len_bytes: usize, size_bytes: usize) -> Found {
        self.mem.track_read(off, size_bytes);
        self.prefetch_published(self.head + size_bytes as u64);
        Found {
            payload_offset: off + FRAME_HEADER_BYTES,
            len_bytes,
            size_bytes,
        }
    }

    /// [`Self::next_frame`] when the header at `off` is not a frame that is plainly fine: a
    /// skip marker (then the frame after it), or an error naming what is wrong.
    #[inline(never)]
    fn next_frame_slow(&mut self, mut off: usize, mut word: u64) -> Result<Found> {
        if word & HDR_SKIP != 0 {
            (off, word) = self.skip_gap(off, word)?;
        }
        if word >> 32 != HDR_VALID >> 32 {
            return Err(bad_header(word, off));
        }
        let len_bytes = (word & HDR_LEN_MASK) as usize;
        let size_bytes = frame_bytes(len_bytes);
        if len_bytes > self.config.max_frame_bytes
            || off + size_bytes > self.config.capacity_bytes
            || self.head + size_bytes as u64 > self.cached_tail
        {
            return Err(overrun(len_bytes, off));
        }
        Ok(self.found(off, len_bytes, size_bytes))
    }

    /// Re-reads the producer's tail; `Ok(false)` when nothing new is published.
    #[inline(always)]
    fn refresh_tail(&mut self) -> Result<bool> {
        // SYNC: tail-publish — pairs with the Release store in `Producer::publish`.
        let tail = self.mem.control().producer.tail.load(Ordering::Acquire);
        if tail == self.head {
            return Ok(false);
        }
        if tail < self.head
            || tail - self.head > self.config.capacity_bytes as u64
            || tail % FRAME_ALIGN as u64 != 0
        {
            return Err(bad_tail(tail, self.head));
        }
        self.cached_tail = tail;
        Ok(true)
    }

    /// Steps over the skip marker `word` at `off`; the offset and header word after the gap.
    #[inline]
    fn skip_gap(&mut self, off: usize, word: u64) -> Result<(usize, u64)> {
        let gap = (word & HDR_LEN_MASK) as usize;
        if word & !(HDR_SKIP | HDR_LEN_MASK) != 0
            || gap < FRAME_HEADER_BYTES
            || gap % FRAME_ALIGN != 0
            || off + gap > self.config.capacity_bytes
            || self.head + gap as u64 >= self.cached_tail
        {
            return Err(bad_skip(word, off));
        }
        self.head += gap as u64;
        let off = (self.head & self.mask) as usize;
        Ok((off, self.mem.header(off).load(Ordering::Relaxed)))
    }

    /// Prefetches, for reading, up to `prefetch_lines` published lines from `from` on, no
    /// further than `prefetch::AHEAD_BYTES` past `head`. Whole published lines only:
    /// the producer does not write them again until they are released, so a prefetch never
    /// pulls a line it is still filling (a line holding the last published frame and the
    /// next, unpublished one is left alone). Always inlined: as an out-of-line call per frame
    /// the consumer was too slow to stay ahead, and 64-byte throughput fell back to 31–41 M
    /// messages/s (`benches/results/rings.md`).
    #[inline(always)]
    fn prefetch_published(&mut self, from: u64) {
        if self.prefetch_lines == 0 {
            return;
        }
        let line = CACHE_LINE_BYTES as u64;
        let end = (self.head + prefetch::AHEAD_BYTES).min(self.cached_tail & !(line - 1));
        let mut p = self.prefetched.max(from);
        let stop = end.min(p + self.prefetch_lines * line);
        while p < stop {
            prefetch::read(self.mem.data().wrapping_add((p & self.mask) as usize));
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

    /// Reads up to `max_frames` frames (at most [`AHEAD_MAX_FRAMES`]) in two passes: `f` sees
    /// each payload first with [`Pass::Ahead`], all of them in order, then with [`Pass::Take`],
    /// in order again; then they are released with one store. Returns how many were read.
    ///
    /// Why two passes: the first lets the reader start fetching what each frame will need
    /// (an executor prefetches the state its request will look up), so those fetches overlap
    /// instead of each request waiting for its own. A frame that cannot be read ends the
    /// batch: the frames before it get both passes, then the error is returned.
    #[inline]
    pub fn pop_batch_ahead(
        &mut self,
        max_frames: usize,
        mut f: impl FnMut(Pass, &[u8]),
    ) -> Result<usize> {
        let max = max_frames.min(AHEAD_MAX_FRAMES);
        let mut found = [Found::NONE; AHEAD_MAX_FRAMES];
        let mut n = 0;
        let mut failed = None;
        while n < max {
            match self.next_frame() {
                Ok(Some(x)) => {
                    f(Pass::Ahead, self.payload(x));
                    self.head += x.size_bytes as u64;
                    found[n] = x;
                    n += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for &x in &found[..n] {
            f(Pass::Take, self.payload(x));
        }
        self.publish_release();
        match failed {
            Some(e) => Err(e),
            None => Ok(n),
        }
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
            self.mem.control().space.ring_cached(self.wake_fence_free);
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
        check_alive(&line.holder, &line.closed)
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

#[cold]
#[inline(never)]
fn bad_tail(tail: u64, head: u64) -> Error {
    Error::Corrupt(format!("producer tail {tail} with consumer head {head}"))
}

#[cold]
#[inline(never)]
fn bad_skip(word: u64, off: usize) -> Error {
    Error::Corrupt(format!("bad skip marker {word:#x} at offset {off}"))
}

#[cold]
#[inline(never)]
fn bad_header(word: u64, off: usize) -> Error {
    Error::Corrupt(format!("bad frame header {word:#x} at offset {off}"))
}

#[cold]
#[inline(never)]
fn overrun(len_bytes: usize, off: usize) -> Error {
    Error::Corrupt(format!(
        "frame of {len_bytes} bytes at offset {off} overruns the ring"
    ))
}
