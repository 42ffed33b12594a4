//! The local hop alone, under each idle policy: two threads pinned to two cores ("dedicated
//! cores"; on a 2-core machine CPUs 0 and 1, nothing else running) hand one request-sized
//! frame back and forth through two shmring rings, each end waiting exactly as an executor
//! waits for input ([`Consumer::wait`] with the policy's [`WaitPolicy`]).
//!
//! Low load: one frame in flight, in rounds of [`ROUND_TRIPS_PER_ROUND`] round trips separated
//! by an idle gap longer than any spin bound compared, so every round starts with both ends
//! parked — as a stream at a low rate does. Two figures per round: the first round trip (it
//! wakes the far end from its park whatever the policy) and the chained ones after it (the
//! hand-offs along a chain of operators, where a spinning end is still spinning). Each is
//! halved to a one-way hop.
//!
//! The worker path (`dispatch_local`) adds to this hop what an executor does around it; this
//! file isolates what the idle policy changes.

use crate::affinity::{allowed_cpus, pin_current_thread};
use clasp_shmring::heap::{self, HeapRing};
use clasp_shmring::{Consumer, Doorbell, ParkMode, Producer, RingConfig, WaitPolicy};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips per round (the first wakes the far end; the rest are chained).
pub const ROUND_TRIPS_PER_ROUND: usize = 5;
/// Idle gap between rounds: longer than any spin compared, so each round starts parked.
pub const IDLE_GAP: Duration = Duration::from_micros(300);
/// Bytes of the frame handed over: a SYN request (48-byte header, 8-byte key, 16-byte payload).
const FRAME_BYTES: usize = 72;
/// Capacity of each ring.
const RING_BYTES: usize = 4096;
/// The longest any wait may take before the run is declared lost.
const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// One-way hop latencies of one run, ns: (first after an idle gap, chained), medians over
/// the rounds.
#[derive(Debug, Clone, Copy)]
pub struct HopSample {
    /// The first hop of a round (the far end wakes from its park).
    pub first_ns: f64,
    /// A hop of a round after the first (the far end waited since its last hop).
    pub chained_ns: f64,
}

fn ring_pair() -> Result<(Producer<HeapRing>, Consumer<HeapRing>), String> {
    // The doorbell mode an executor's rings get with two busy threads on this machine.
    let bell = Arc::new(Doorbell::with_mode(ParkMode::for_runnable_threads(2)));
    heap::channel_with_doorbell(RingConfig::new(RING_BYTES), bell).map_err(|e| e.to_string())
}

/// Waits for a frame on `c` as an executor does, pops it and returns its first byte.
fn receive(c: &mut Consumer<HeapRing>, policy: WaitPolicy) -> Result<u8, String> {
    c.wait(policy, Some(WAIT_LIMIT))
        .map_err(|e| format!("hop wait: {e}"))?;
    let frame = c
        .peek()
        .map_err(|e| e.to_string())?
        .ok_or("woken without a frame")?;
    let first = frame.first().copied().unwrap_or(0);
    frame.release();
    Ok(first)
}

fn pin_to(index: usize) {
    let cpus = allowed_cpus();
    if cpus.len() >= 2
        && let Err(e) = pin_current_thread(cpus[index])
    {
        tracing::warn!("hop bench: {e}; this end runs unpinned");
    }
}

/// Runs `rounds` rounds under `policy`.
pub fn measure(policy: WaitPolicy, rounds: usize) -> Result<HopSample, String> {
    if rounds == 0 {
        return Err("rounds must be positive".into());
    }
    let (mut to_b, mut at_b) = ring_pair()?;
    let (mut to_a, mut at_a) = ring_pair()?;
    // End B: echoes every frame; a frame starting with 1 ends it.
    let echo = std::thread::Builder::new()
        .name("hop-b".into())
        .spawn(move || -> Result<(), String> {
            pin_to(1);
            let frame = [0u8; FRAME_BYTES];
            loop {
                if receive(&mut at_b, policy)? == 1 {
                    return Ok(());
                }
                to_a.push(&frame).map_err(|e| e.to_string())?;
            }
        })
        .map_err(|e| e.to_string())?;
    let run = std::thread::Builder::new()
        .name("hop-a".into())
        .spawn(move || -> Result<(Vec<f64>, Vec<f64>), String> {
            pin_to(0);
            let frame = [0u8; FRAME_BYTES];
            let (mut first, mut chained) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                std::thread::sleep(IDLE_GAP);
                for trip in 0..ROUND_TRIPS_PER_ROUND {
                    let t0 = Instant::now();
                    to_b.push(&frame).map_err(|e| e.to_string())?;
                    receive(&mut at_a, policy)?;
                    let one_way_ns = t0.elapsed().as_nanos() as f64 / 2.0;
                    if trip == 0 {
                        first.push(one_way_ns);
                    } else {
                        chained.push(one_way_ns);
                    }
                }
            }
            let mut stop = frame;
            stop[0] = 1;
            to_b.push(&stop).map_err(|e| e.to_string())?;
            Ok((first, chained))
        })
        .map_err(|e| e.to_string())?;
    let measured = run.join().map_err(|_| "hop end A panicked".to_string())?;
    let echoed = echo.join().map_err(|_| "hop end B panicked".to_string())?;
    let (first, chained) = measured?;
    echoed?;
    Ok(HopSample {
        first_ns: median(first),
        chained_ns: median(chained),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_policies_hand_every_frame_over() {
        for policy in [
            WaitPolicy::PARK,
            WaitPolicy::spin_then_park(Duration::from_micros(50)),
        ] {
            let s = measure(policy, 20).unwrap();
            assert!(s.first_ns > 0.0 && s.chained_ns > 0.0, "{policy:?}: {s:?}");
        }
    }
}
