//! The ingress: a process on the worker's machine that attaches to its segment by name and
//! writes generated input into the executors' ingress rings, as a bare-metal user with a local
//! source would. (The network thread will use the same rings for input from other hosts.)
//!
//! Each record becomes a root request routed by its key group, through the routing table the
//! worker published in the segment, so each key keeps one FIFO path. The ingress admits at most
//! `max_in_flight` tracked roots that have not completed (the worker counts completions), which
//! bounds the work in flight and so every queue and overflow behind it.

use super::layout::{INGRESS_DONE, INGRESS_FAILED, WORKER_STOPPED, WorkerSegment};
use crate::request::{FLAG_TRACKED, RequestHeader, frame_len, root_id};
use clasp_operators::AppSpec;
use clasp_operators::key::{key_group, key_hash};
use clasp_shmring::{Error as RingError, Producer, ShmRing, WaitPolicy};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest single park of an ingress waiting for completions or ring space; between parks it
/// checks whether the worker stopped.
const INGRESS_PARK_MAX: Duration = Duration::from_millis(50);
/// Records written between two publishes (and updates of `admitted`).
const PUBLISH_EVERY: u64 = 64;

/// Settings of an ingress.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// The worker's segment.
    pub segment_name: String,
    /// Records to admit.
    pub records: u64,
    /// Generator seed.
    pub seed: u64,
    /// Records per second, or as fast as possible.
    pub rate_per_s: Option<f64>,
}

/// What an ingress did.
#[derive(Debug, Clone, Copy)]
pub struct IngressReport {
    /// Records admitted.
    pub admitted: u64,
    /// Time from the first to the last admission.
    pub elapsed: Duration,
}

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Runs an ingress for `spec` into the worker segment named in `cfg`.
pub fn run_ingress(spec: &AppSpec, cfg: &IngressConfig) -> Result<IngressReport, String> {
    let seg = WorkerSegment::attach(&cfg.segment_name, spec.operators.len(), spec.source)?;
    let result = admit(spec, cfg, &seg);
    let control = seg.control();
    control.ingress_state.store(
        if result.is_ok() {
            INGRESS_DONE
        } else {
            INGRESS_FAILED
        },
        Ordering::Release,
    );
    seg.segment
        .doorbell(seg.index.coordinator_bell())
        .map(|b| b.ring())
        .ok();
    result
}

fn admit(
    spec: &AppSpec,
    cfg: &IngressConfig,
    seg: &WorkerSegment,
) -> Result<IngressReport, String> {
    let control = seg.control();
    control
        .ingress_pid
        .store(std::process::id(), Ordering::Release);
    let mut rings: Vec<Producer<ShmRing>> = (0..seg.executors())
        .map(|e| {
            seg.segment
                .producer(seg.index.ingress(e))
                .map_err(|err| format!("ingress ring {e}: {err}"))
        })
        .collect::<Result<_, _>>()?;
    let bell = seg
        .segment
        .doorbell(seg.index.ingress_bell())
        .map_err(|e| e.to_string())?;
    let generator = clasp_operators::generate::generator(&spec.generator, cfg.seed)
        .ok_or_else(|| format!("app {} has no generator {}", spec.name, spec.generator))?;
    let sample = control.sample_every.max(1);
    let max_in_flight = control.max_in_flight.max(1);
    let policy = WaitPolicy::for_runnable_threads(seg.executors() + 2);
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    let mut dirty = vec![false; rings.len()];
    let mut tracked = 0u64;
    let start = Instant::now();
    let source = spec.source;
    for i in 0..cfg.records {
        if control.worker_state.load(Ordering::Acquire) == WORKER_STOPPED {
            return Err(format!("the worker stopped after {i} records"));
        }
        if let Some(rate) = cfg.rate_per_s {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                publish(&mut rings, &mut dirty);
                control.admitted.store(i, Ordering::Release);
                std::thread::sleep(due - now);
            }
        }
        let is_tracked = i % sample == 0;
        if is_tracked {
            // The in-flight bound: wait for completions (the worker rings our doorbell).
            while tracked - control.completed.load(Ordering::Acquire) >= max_in_flight {
                publish(&mut rings, &mut dirty);
                control.admitted.store(i, Ordering::Release);
                let token = bell.prepare_park();
                if tracked - control.completed.load(Ordering::Acquire) >= max_in_flight
                    && control.worker_state.load(Ordering::Acquire) != WORKER_STOPPED
                {
                    bell.park(token, Some(INGRESS_PARK_MAX));
                }
                bell.finish_park(token);
                if control.worker_state.load(Ordering::Acquire) == WORKER_STOPPED {
                    return Err(format!("the worker stopped after {i} records"));
                }
            }
            tracked += 1;
        }
        generator.record_into(i, &mut key, &mut payload);
        let hash = key_hash(&key);
        let kg = key_group(hash);
        let e = seg.executor_of(source, kg).ok_or_else(|| {
            format!("the worker's routing table has no executor for key group {kg}")
        })?;
        let id = root_id(i);
        let header = RequestHeader {
            operator: source as u16,
            key_group: kg,
            flags: if is_tracked { FLAG_TRACKED } else { 0 },
            epoch: 0,
            dest: e as u16,
            root_home: 0,
            source: crate::request::INGRESS_SLOT,
            key_hash: hash,
            request_id: id,
            root_id: id,
            admitted_ns: now_ns(),
        };
        let len = frame_len(key.len(), payload.len());
        loop {
            match rings[e].reserve(len) {
                Ok(mut g) => {
                    header.write(&key, &payload, &mut g);
                    g.commit_deferred();
                    dirty[e] = true;
                    break;
                }
                Err(RingError::Full { .. }) => {
                    publish(&mut rings, &mut dirty);
                    control.admitted.store(i, Ordering::Release);
                    match rings[e].wait_for_space(len, policy, Some(INGRESS_PARK_MAX)) {
                        Ok(()) | Err(RingError::TimedOut { .. }) => {}
                        Err(err) => return Err(format!("record {i}: {err}")),
                    }
                    if control.worker_state.load(Ordering::Acquire) == WORKER_STOPPED {
                        return Err(format!("the worker stopped after {i} records"));
                    }
                }
                Err(err) => return Err(format!("record {i} ({len} bytes): {err}")),
            }
        }
        if (i + 1) % PUBLISH_EVERY == 0 {
            publish(&mut rings, &mut dirty);
            control.admitted.store(i + 1, Ordering::Release);
        }
    }
    publish(&mut rings, &mut dirty);
    control.admitted.store(cfg.records, Ordering::Release);
    Ok(IngressReport {
        admitted: cfg.records,
        elapsed: start.elapsed(),
    })
}

fn publish(rings: &mut [Producer<ShmRing>], dirty: &mut [bool]) {
    for (r, d) in rings.iter_mut().zip(dirty.iter_mut()) {
        if std::mem::take(d) {
            r.publish();
        }
    }
}
