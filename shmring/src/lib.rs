//! Lock-free single-producer single-consumer rings of variable-length frames in shared memory.
//!
//! This is the hop a local chained request takes from one executor to another, so it is built
//! to cost what the hardware allows: a frame is written in place ([`Producer::reserve`] →
//! fill → [`WriteGrant::commit`]) and read in place ([`Consumer::peek`] → read →
//! [`ReadFrame::release`]), never copied in between; batches publish or release many frames with
//! one store; each side re-reads the other's index only when the ring looks full or empty, and
//! frames longer than two cache lines start on a line of their own (see [`ring`] for the
//! protocol and for what was measured).
//!
//! The crate knows nothing of requests or operators. Its parts:
//! - [`ring`]: the ring protocol, generic over [`RingMemory`] so one implementation runs on
//!   shared memory, on the heap (checked by Miri) and on loom's model types (checked by loom);
//! - [`Segment`]: named or anonymous shared-memory segments holding rings and doorbells;
//! - [`Doorbell`]: park/wake on a futex word, shared by all rings one consumer reads;
//! - [`FanIn`]: many producers into one consumer as a set of SPSC rings polled fairly;
//! - [`heap::channel`]: an in-process ring.
//!
//! Waiting spins for a bound of wall time, then parks ([`WaitPolicy`]); with more runnable
//! threads than cores it does not spin at all. A closed peer is reported as [`Error::Closed`], a dead peer process as
//! [`Error::PeerDead`].

mod doorbell;
mod error;
mod fanin;
pub mod heap;
pub mod liveness;
pub mod ring;
#[cfg(not(loom))]
mod segment;
mod sync;

pub use doorbell::{
    Doorbell, ParkMode, ParkToken, thread_cpu_ns, thread_park_cpu_ns, thread_parks,
};
pub use error::{Error, Result};
pub use fanin::FanIn;
pub use ring::{
    AHEAD_MAX_FRAMES, Consumer, DEFAULT_SPIN, FRAME_ALIGN, FRAME_HEADER_BYTES, Pass, Producer,
    ReadFrame, RingConfig, RingControl, RingMemory, WaitPolicy, WriteGrant, frame_bytes,
    prefetch_read, spin_for,
};
#[cfg(not(loom))]
pub use segment::{
    MAX_RINGS, MAX_SEGMENT_BYTES, RingSpec, Segment, SegmentLayout, ShmRing, available_memory_bytes,
};
