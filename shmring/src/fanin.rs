//! Many producers into one consumer: a set of SPSC rings that the consumer polls fairly and
//! parks on through one shared doorbell.
//!
//! Why not one multi-producer ring: an MPSC ring makes every push a compare-and-swap on a
//! shared tail line, so producers contend with each other and a producer that stalls between
//! claiming and publishing blocks everyone behind it. A worker's executors each write their own
//! SPSC ring into every other executor, so a push stays one release store on a line only that
//! producer writes, a stalled producer delays only its own frames, and per-producer FIFO order
//! (which per-key ordering relies on) comes for free. The cost moves to the consumer, which
//! polls N rings; rotating the starting ring keeps that fair.

use crate::error::{Error, Result};
use crate::ring::{Consumer, Probe, RingMemory, WaitPolicy, park_until};
use std::time::Duration;

/// A consumer of several rings that share one doorbell.
pub struct FanIn<M: RingMemory> {
    inputs: Vec<Consumer<M>>,
    /// Inputs no longer polled or waited on (their producer died, or the ring is corrupt).
    retired: Vec<bool>,
    /// Input the next poll starts at. In `0..inputs.len()`.
    next: usize,
}

impl<M: RingMemory> FanIn<M> {
    /// Combines `inputs`, which must all park on the same doorbell (otherwise a wait could
    /// sleep on one doorbell while another is rung).
    pub fn new(inputs: Vec<Consumer<M>>) -> Result<Self> {
        if let Some(first) = inputs.first() {
            let bell: *const _ = first.memory().doorbell();
            if inputs
                .iter()
                .any(|c| !std::ptr::eq(c.memory().doorbell(), bell))
            {
                return Err(Error::InvalidConfig(
                    "the rings of a fan-in must share one doorbell".into(),
                ));
            }
        }
        let retired = vec![false; inputs.len()];
        Ok(FanIn {
            inputs,
            retired,
            next: 0,
        })
    }

    /// Number of inputs.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Whether there are no inputs.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Input `i`, to peek or release one frame at a time.
    pub fn input(&mut self, i: usize) -> &mut Consumer<M> {
        &mut self.inputs[i]
    }

    /// Reads up to `max_per_input` frames from each input, starting at a different input each
    /// call, calling `f(input, payload)`. Returns the number of frames read.
    pub fn poll(&mut self, max_per_input: usize, mut f: impl FnMut(usize, &[u8])) -> Result<usize> {
        let n = self.inputs.len();
        let mut total = 0;
        for k in 0..n {
            let i = (self.next + k) % n;
            if !self.retired[i] {
                total += self.inputs[i].pop_batch(max_per_input, |p| f(i, p))?;
            }
        }
        if n > 0 {
            self.next = (self.next + 1) % n;
        }
        Ok(total)
    }

    /// Waits until any input has a frame. `Err(Closed)` once every producer closed and every
    /// frame was read.
    pub fn wait(&mut self, policy: WaitPolicy, timeout: Option<Duration>) -> Result<()> {
        let Some(first) = self.inputs.first() else {
            return Err(Error::Closed);
        };
        let bell: *const _ = first.memory().doorbell();
        // SAFETY: the doorbell lives in the first input's memory, which `self` keeps alive for
        // this call; the closure needs `&mut self.inputs`, hence the raw pointer.
        let bell = unsafe { &*bell };
        let inputs = &mut self.inputs;
        park_until(bell, policy, timeout, |probe| {
            if probe == Probe::Liveness {
                return inputs
                    .iter()
                    .try_for_each(|c| c.check_peer())
                    .map(|()| false);
            }
            let mut open = 0;
            for c in inputs.iter_mut() {
                match c.readable_or_closed() {
                    Ok(true) => return Ok(true),
                    Ok(false) => open += 1,
                    Err(Error::Closed) => {}
                    Err(e) => return Err(e),
                }
            }
            if open == 0 {
                Err(Error::Closed)
            } else {
                Ok(false)
            }
        })
    }

    /// Checks that no input's producer process died; the first dead one is the error.
    pub fn check_peers(&self) -> Result<()> {
        self.live().try_for_each(|(_, c)| c.check_peer())
    }

    /// The index of the first live input whose producer process died.
    pub fn dead_input(&self) -> Option<usize> {
        self.live()
            .find(|(_, c)| c.check_peer().is_err())
            .map(|(i, _)| i)
    }

    /// Stops polling and waiting on input `i` (its producer died, or it is corrupt). Frames
    /// left in it are not read.
    pub fn retire(&mut self, i: usize) {
        self.retired[i] = true;
    }

    /// Whether input `i` is retired.
    pub fn is_retired(&self, i: usize) -> bool {
        self.retired[i]
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Consumer<M>)> {
        self.inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.retired[*i])
    }
}
