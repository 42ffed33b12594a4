//! The measured runs through the real transport (io_uring, ring-format batches, credits)
//! between transports on loopback: β per batch size, γ per extra destination, and the one-way
//! latency.

use super::harness::{
    KEY_BYTES, PAYLOAD_BYTES, RUN_DEADLINE, Rendezvous, RingSink, Sends, emit, limits_for,
    main_edge, median, pin, process_cpu_s, spawn_named, thread_cpu_s, worker_edge,
};
use clasp_dataplane::request::frame_len;
use clasp_dataplane::transport::{Limits, PeerId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// How long the receiver parks when idle. Parking beats busy polling here: with a receiver
/// that polls without waiting, batch 32 cost 471 ns per request against 202 ns parked.
const RX_WAIT: Duration = Duration::from_millis(1);
/// How long the sender parks when the transport refuses a request (until a completion).
const TX_WAIT: Duration = Duration::from_millis(1);

/// What one β run measured.
pub(super) struct RemoteRun {
    /// CPU ns per request, both sides.
    pub ns: f64,
    /// Whether the receiver used multishot receive.
    pub multishot: bool,
    /// Batches the sender sent per send.
    pub batches_per_send: f64,
}

/// β: CPU ns per request at `batch` requests per batch, at saturation, sent as `sends` says.
pub(super) fn remote_run(batch: usize, requests: u64, sends: Sends) -> RemoteRun {
    // A long age limit: batches leave full (by size), as at saturation.
    let limits = limits_for(batch, 1_000_000, sends);
    let meet = Rendezvous::new(2);
    let barrier = Arc::new(Barrier::new(3));
    let done = Arc::new(AtomicBool::new(false));
    let rx = {
        let (barrier, done, meet, limits) =
            (barrier.clone(), done.clone(), meet.clone(), limits.clone());
        spawn_named("dispatch-rx", move || {
            pin(1);
            let mut b = meet.join(2, &[1], &limits);
            let mut sink = RingSink::new(false);
            worker_edge(&barrier);
            let cpu0 = thread_cpu_s();
            let start = Instant::now();
            while sink.received < requests {
                assert!(
                    start.elapsed() < RUN_DEADLINE,
                    "receiver stalled at {}",
                    sink.received
                );
                b.poll(RX_WAIT, &mut sink).expect("poll");
                sink.drain();
            }
            done.store(true, Ordering::Release);
            let cpu = thread_cpu_s() - cpu0;
            worker_edge(&barrier);
            (sink.checksum, b.counters(), cpu)
        })
    };
    let tx = {
        let (barrier, done, meet) = (barrier.clone(), done.clone(), meet.clone());
        spawn_named("dispatch-tx", move || {
            pin(0);
            let mut a = meet.join(1, &[2], &limits);
            let mut sink = RingSink::new(false);
            let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
            worker_edge(&barrier);
            let cpu0 = thread_cpu_s();
            let mut seq = 0u64;
            while seq < requests {
                emit(seq, &mut frame);
                while !a.try_append(2, &frame).expect("append") {
                    // Refused (no credit, or the batches waiting behind the send in flight
                    // reach the send's limit — with one batch a send, the batch is full):
                    // poll with a timeout, as a network thread would, so the sender parks
                    // until a completion instead of spinning on empty turns.
                    a.poll(TX_WAIT, &mut sink).expect("poll");
                }
                seq += 1;
            }
            a.flush_now();
            while !done.load(Ordering::Acquire) {
                a.poll(Duration::from_micros(100), &mut sink).expect("poll");
            }
            let cpu = thread_cpu_s() - cpu0;
            worker_edge(&barrier);
            (a.counters(), a.peer_counters(2), cpu)
        })
    };
    let (cpu0, t0) = main_edge(&barrier, || (process_cpu_s(), Instant::now()));
    let (cpu1, wall) = main_edge(&barrier, || (process_cpu_s(), t0.elapsed()));
    let cpu = cpu1 - cpu0;
    let (checksum, rx_counters, rx_cpu) = rx.join().expect("receiver");
    let (tx_counters, tx_peer, tx_cpu) = tx.join().expect("sender");
    tracing::debug!(
        "batch {batch}: {requests} requests, wall {wall:?}, cpu {cpu:.3}s (sender thread \
         {tx_cpu:.3}s, receiver thread {rx_cpu:.3}s), sender {tx_counters:?} {tx_peer:?}, \
         receiver {rx_counters:?}",
    );
    let want: u64 = (0..requests).fold(0u64, |s, i| s.wrapping_add(i));
    assert_eq!(checksum, want, "requests lost or corrupted");
    RemoteRun {
        ns: cpu * 1e9 / requests as f64,
        multishot: tx_counters.multishot,
        batches_per_send: tx_peer.batches_sent as f64 / tx_peer.batch_sends.max(1) as f64,
    }
}

/// γ: CPU ns per request at a fixed total rate spread over `dests` destinations, the sender
/// appending a tick's share every `flush_us` and each destination's batch leaving by the
/// default 50 µs age after it: one batch per destination per tick.
pub(super) fn gamma_run(dests: usize, rate_per_s: u64, run_ms: u64, flush_us: u64) -> f64 {
    let limits = Limits::default();
    let meet = Rendezvous::new(dests + 1);
    let total = rate_per_s * run_ms / 1000;
    let barrier = Arc::new(Barrier::new(dests + 2));
    let done = Arc::new(AtomicBool::new(false));
    let per_dest = total / dests as u64;
    let rxs: Vec<_> = (0..dests)
        .map(|d| {
            let (barrier, done, meet, limits) =
                (barrier.clone(), done.clone(), meet.clone(), limits.clone());
            std::thread::spawn(move || {
                pin(1);
                let mut r = meet.join(d as PeerId + 2, &[], &limits);
                let mut sink = RingSink::new(false);
                worker_edge(&barrier);
                while sink.received < per_dest && !done.load(Ordering::Acquire) {
                    r.poll(Duration::from_millis(1), &mut sink).expect("poll");
                    sink.drain();
                }
                worker_edge(&barrier);
                // Serve on until the sender is done with us.
                while !done.load(Ordering::Acquire) {
                    r.poll(Duration::from_millis(1), &mut sink).expect("poll");
                }
                sink.received
            })
        })
        .collect();
    let tx = {
        let (barrier, meet) = (barrier.clone(), meet.clone());
        std::thread::spawn(move || {
            pin(0);
            let peers: Vec<PeerId> = (0..dests).map(|d| d as PeerId + 2).collect();
            let mut a = meet.join(1, &peers, &limits);
            let mut sink = RingSink::new(false);
            let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
            worker_edge(&barrier);
            // Paced in ticks: each tick appends its share round-robin, then parks.
            let flush_us = flush_us.max(1);
            let tick = Duration::from_micros(flush_us);
            let per_tick = (rate_per_s * flush_us / 1_000_000).max(1);
            let t0 = Instant::now();
            let mut seq = 0u64;
            let mut next = t0;
            while seq < per_dest * dests as u64 {
                for _ in 0..per_tick {
                    if seq >= per_dest * dests as u64 {
                        break;
                    }
                    emit(seq, &mut frame);
                    let d = (seq % dests as u64) as u32 + 2;
                    while !a.try_append(d, &frame).expect("append") {
                        a.poll(TX_WAIT, &mut sink).expect("poll");
                    }
                    seq += 1;
                }
                next += tick;
                while Instant::now() < next {
                    a.poll(next.saturating_duration_since(Instant::now()), &mut sink)
                        .expect("poll");
                }
            }
            let end = Instant::now() + Duration::from_millis(50);
            while Instant::now() < end {
                a.poll(Duration::from_millis(1), &mut sink).expect("poll");
            }
            worker_edge(&barrier);
        })
    };
    let cpu0 = main_edge(&barrier, process_cpu_s);
    let cpu = main_edge(&barrier, process_cpu_s) - cpu0;
    tx.join().expect("sender");
    done.store(true, Ordering::Release);
    let got: u64 = rxs.into_iter().map(|h| h.join().expect("receiver")).sum();
    assert_eq!(got, per_dest * dests as u64, "γ run lost requests");
    cpu * 1e9 / got as f64
}

/// One-way latency: half the median round trip of one request A → B → A, batches leaving at
/// once (age limit 0), both network threads pinned to cores of their own and watching their
/// rings for `idle_spin` before they wait in the kernel (zero: they wait at once).
pub(super) fn remote_latency_us(round_trips: usize, idle_spin: Duration) -> f64 {
    // Side A on a thread of its own too: pinning it leaves the caller's thread as it was.
    spawn_named("latency-a", move || one_way_us(round_trips, idle_spin))
        .join()
        .expect("the latency run does not panic")
}

fn one_way_us(round_trips: usize, idle_spin: Duration) -> f64 {
    let limits = limits_for(1, 0, Sends::Coalesced);
    let meet = Rendezvous::new(2);
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let (stop, meet, limits) = (stop.clone(), meet.clone(), limits.clone());
        std::thread::spawn(move || {
            pin(1);
            let mut b = meet.join(2, &[1], &limits);
            b.set_idle_spin(idle_spin);
            let mut sink = RingSink::new(true);
            while !stop.load(Ordering::Acquire) {
                b.poll(Duration::from_millis(1), &mut sink).expect("poll");
                let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
                while sink.echo_pending > 0 {
                    let mut got = None;
                    let _ = sink.consumer.pop_batch(1, |f| {
                        let n = frame.len().min(f.len());
                        frame[..n].copy_from_slice(&f[..n]);
                        got = Some(());
                    });
                    if got.is_none() {
                        break;
                    }
                    while !b.try_append(1, &frame).expect("append") {
                        b.poll(Duration::ZERO, &mut sink).expect("poll");
                    }
                    sink.echo_pending -= 1;
                }
            }
        })
    };
    pin(0);
    let mut a = meet.join(1, &[2], &limits);
    a.set_idle_spin(idle_spin);
    let mut sink = RingSink::new(false);
    let mut frame = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
    let mut rtts = Vec::with_capacity(round_trips);
    for i in 0..round_trips as u64 {
        emit(i, &mut frame);
        let t0 = Instant::now();
        while !a.try_append(2, &frame).expect("append") {
            a.poll(Duration::ZERO, &mut sink).expect("poll");
        }
        a.flush_now();
        let want = sink.received + 1;
        while sink.received < want {
            assert!(
                t0.elapsed() < RUN_DEADLINE,
                "echo {i} lost: {:?} {:?}",
                a.counters(),
                a.peer_counters(2)
            );
            a.poll(Duration::from_millis(1), &mut sink).expect("poll");
        }
        rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        sink.drain();
    }
    stop.store(true, Ordering::Release);
    echo.join().expect("echo");
    median(rtts) / 2.0
}
