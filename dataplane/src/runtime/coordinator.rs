//! The coordinator of one worker's executors: it starts them, sends them `Command`s, reads
//! and decodes their `Report`s, counts which operators they flushed, tells whether they are
//! quiescent or stalled, and stops them. It does no per-request work.
//!
//! Every worker has exactly one, whatever feeds it. What differs between a worker on its own
//! (`clasp local`) and a worker of a cluster is only the front that owns the coordinator:
//! - [`super::local`]: input from a local ingress process through the segment, the latency
//!   ledger applied here, and the end of stream sequenced here, operator by operator;
//! - `crate::cluster::node`: input from the driver over the transport (the network thread
//!   is the front), ledger deltas and flush acknowledgements forwarded to the driver, which
//!   sequences the end of stream across every worker.
//!
//! Both fronts drive the same coordinator the same way; the front decides only where input
//! comes from and where reports go.

use super::RuntimeError;
use super::executor::{Executor, ExecutorResult, NetLink, Seat};
use super::layout::{WorkerSegment, scalar};
use super::messages::{COMMAND_BYTES, Command, Report};
use crate::sink::{Sink, SinkBarrier};
use clasp_operators::AppSpec;
use clasp_shmring::{FanIn, Producer, ShmRing, WaitPolicy};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Report frames a front reads per turn (then it serves its other inputs).
pub(crate) const REPORT_FRAMES_PER_TURN: usize = 256;

/// Longest a reader of the executors' reports — a cluster worker's network thread, the
/// coordinator of a worker on its own — lets ledger deltas wait while an executor has work
/// (executors do not wake it for them; `cluster/node/reports.rs`, `local/cadence.rs`). The
/// same bound as a credit grant's (`GRANT_AGE_MIN`): the bookkeeping that flows back to a
/// sender waits up to a millisecond.
pub(crate) const REPORT_HOLD: Duration = Duration::from_millis(1);

/// What an executor thread hands back: its result, and why it ran unpinned if it did.
type ExecutorExit = (ExecutorResult, Option<String>);

/// How to start a worker's executors.
pub(crate) struct Launch<'a> {
    /// The app.
    pub spec: &'a Arc<AppSpec>,
    /// This worker's id (the end-of-stream flushes' root home).
    pub worker: u32,
    /// Where its executors sit.
    pub seat: &'a Seat,
    /// How executors wait for input.
    pub policy: WaitPolicy,
    /// Pin executor e to core e + 1 (verified), when there are more cores than executors.
    pub pin: bool,
    /// Per executor, its link to the network thread (cluster mode), or none.
    pub links: Vec<Option<NetLink>>,
    /// Where the executors write outputs as lines, or none (digests only); closed by
    /// [`Coordinator::stop`].
    pub sink: Option<Sink>,
}

/// The executors when they stopped.
pub(crate) struct Stopped {
    /// Per executor that stopped cleanly, in order.
    pub results: Vec<ExecutorResult>,
    /// Executors that panicked.
    pub panicked: Vec<usize>,
    /// Executors that could not be pinned, and why.
    pub unpinned: Vec<String>,
    /// Why the sink failed, if it did (it was flushed and closed after the executors).
    pub sink_error: Option<String>,
}

/// The coordinator of one worker's executors (see the module docs).
pub(crate) struct Coordinator {
    seg: WorkerSegment,
    handles: Vec<JoinHandle<ExecutorExit>>,
    commands: Vec<Producer<ShmRing>>,
    reports: FanIn<ShmRing>,
    /// Per operator: executors that ran its end of stream since it was last asked for.
    flushed: Vec<usize>,
    /// Per operator: its flush by every executor was already returned by `take_flushed`.
    flush_seen: Vec<bool>,
    /// The sink the executors write to, if any.
    sink: Option<Sink>,
}

impl Coordinator {
    /// Opens the coordinator's rings of `seg` and starts one executor thread per executor.
    pub(crate) fn start(seg: WorkerSegment, launch: Launch<'_>) -> Result<Self, RuntimeError> {
        let executors = seg.executors();
        let idx = seg.index;
        let ring = |e: usize, what: &'static str| {
            move |source| RuntimeError::Ring {
                executor: e,
                what,
                source,
            }
        };
        let commands = (0..executors)
            .map(|e| {
                seg.segment
                    .producer(idx.control(e))
                    .map_err(ring(e, "control"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let reports = (0..executors)
            .map(|e| {
                seg.segment
                    .consumer(idx.report(e))
                    .map_err(ring(e, "report"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let reports = FanIn::new(reports).map_err(ring(0, "report"))?;
        let ops = launch.spec.operators.len();
        let mut c = Coordinator {
            seg,
            handles: Vec::with_capacity(executors),
            commands,
            reports,
            flushed: vec![0; ops],
            flush_seen: vec![false; ops],
            sink: None,
        };
        // On an error, `c` is dropped, which stops the executors already started.
        c.spawn_executors(launch)?;
        Ok(c)
    }

    fn spawn_executors(&mut self, mut launch: Launch<'_>) -> Result<(), RuntimeError> {
        let executors = self.seg.executors();
        if launch.links.len() != executors {
            return Err(RuntimeError::Seat(format!(
                "{} network links for {executors} executors",
                launch.links.len()
            )));
        }
        // Executor e takes the (e+1)-th CPU this process may use (the first is left to the
        // worker's other threads), so workers restricted to different CPU sets on one host
        // never pin onto the same CPU. `available_parallelism` would count a CPU quota too,
        // but a capped worker still runs on every CPU of its set.
        // Executors that spin own their cores: with as many executors as CPUs each is still
        // pinned to one (the worker's other threads, which mostly sleep, then share them).
        let cpus = crate::affinity::allowed_cpus();
        let fits =
            crate::affinity::executors_pinnable(executors, cpus.len(), launch.policy.spins());
        let pin = launch.pin && fits;
        if launch.pin && !fits {
            // Said, not silent: whoever asked for pinning (`clasp local`, `clasp run`, a
            // worker's job) would otherwise take unpinned figures for pinned ones.
            tracing::warn!(
                "--pin: {executors} executors on {} CPUs run unpinned (the first CPU is left to \
                 the worker's other threads; with --idle spin, as many executors as CPUs are \
                 pinned)",
                cpus.len()
            );
        }
        self.sink = launch.sink.take();
        for (e, link) in launch.links.into_iter().enumerate() {
            let exec = Executor::new(
                e,
                launch.worker,
                launch.spec,
                launch.seat,
                &self.seg,
                launch.policy,
                link,
            )?
            .with_sink(self.sink.as_ref().map(Sink::writer));
            let cpu = crate::affinity::executor_cpu(&cpus, e);
            let handle = std::thread::Builder::new()
                .name(format!("clasp-exec-{e}"))
                .spawn(move || {
                    // Pinned and verified (see `crate::affinity`), or why not.
                    let pinned = pin
                        .then(|| crate::affinity::pin_current_thread(cpu).err())
                        .flatten();
                    (exec.run(), pinned)
                })
                .map_err(|source| RuntimeError::Spawn {
                    executor: e,
                    source,
                })?;
            self.handles.push(handle);
        }
        Ok(())
    }

    /// The worker's segment.
    pub(crate) fn segment(&self) -> &WorkerSegment {
        &self.seg
    }

    /// A barrier behind the outputs the executors handed to the sink so far (none without a
    /// sink): a checkpoint's part waits on it.
    pub(crate) fn sink_barrier(&self) -> Option<SinkBarrier> {
        self.sink.as_ref().map(Sink::barrier)
    }

    /// Executors of the worker.
    pub(crate) fn executors(&self) -> usize {
        self.seg.executors()
    }

    /// Whether every executor says it is parked (or spinning before it parks); an executor
    /// reports everything it has before it says so.
    pub(crate) fn executors_parked(&self) -> bool {
        (0..self.executors()).all(|e| self.seg.metrics(e).get(scalar::PARKED) == 1)
    }

    /// Sleeps up to `d` through the executors' reports (a hold, `local/cadence.rs`), unless an
    /// executor goes idle meanwhile while the ingress waits on its in-flight bound: it rings
    /// the hold doorbell (`executor/starving.rs`). The ring is a hint: a missed one costs the
    /// rest of the hold, and a spurious wake-up ends the hold early (the next turn decides
    /// again), so the park is announced without a barrier against the wakers.
    pub(crate) fn hold(&self, d: Duration) {
        let Ok(bell) = self.seg.segment.doorbell(self.seg.index.hold_bell()) else {
            std::thread::sleep(d);
            return;
        };
        let token = bell.prepare_hint_park();
        bell.park(token, Some(d));
        bell.finish_park(token);
    }

    /// Sends `cmd` to executor `e`.
    pub(crate) fn command(&mut self, e: usize, cmd: Command) {
        push_command(&mut self.commands[e], cmd);
    }

    /// Sends `cmd` to every executor.
    pub(crate) fn broadcast(&mut self, cmd: Command) {
        for ring in &mut self.commands {
            push_command(ring, cmd);
        }
    }

    /// Asks every executor to flush `operator` (its end of stream); see
    /// [`Coordinator::is_flushed`]. Panics for an operator the app does not have.
    pub(crate) fn end_of_stream(&mut self, operator: u16) {
        let op = operator as usize;
        self.flushed[op] = 0;
        self.flush_seen[op] = false;
        self.broadcast(Command::EndOfStream { operator });
    }

    /// Whether every executor flushed `operator` since it was last asked to.
    pub(crate) fn is_flushed(&self, operator: usize) -> bool {
        self.flushed
            .get(operator)
            .is_some_and(|&n| n >= self.executors())
    }

    /// Operators every executor flushed since the last call (each flush reported once).
    pub(crate) fn take_flushed(&mut self) -> Vec<u16> {
        let mut done = Vec::new();
        for op in 0..self.flushed.len() {
            if !self.flush_seen[op] && self.is_flushed(op) {
                self.flush_seen[op] = true;
                done.push(op as u16);
            }
        }
        done
    }

    /// Reads up to `max` reports and hands each to `on_report` with its executor (flushes are
    /// also counted here). A frame that is not a report becomes a [`Report::Error`]. Returns
    /// how many were read.
    pub(crate) fn poll_reports(
        &mut self,
        max: usize,
        mut on_report: impl FnMut(usize, Report<'_>),
    ) -> Result<usize, clasp_shmring::Error> {
        let executors = self.seg.executors();
        let flushed = &mut self.flushed;
        self.reports
            .poll(max, |e, frame| match Report::decode(frame) {
                Ok(report) => {
                    if let Report::Flushed { operator } = report
                        && let Some(n) = flushed.get_mut(operator as usize)
                    {
                        *n += 1;
                        debug_assert!(*n <= executors, "each executor flushes once per request");
                    }
                    on_report(e, report);
                }
                Err(err) => on_report(
                    e,
                    Report::Error(
                        format!("executor {e} sent a report that is not one: {err}").into(),
                    ),
                ),
            })
    }

    /// Parks until a report arrives or `timeout` passes.
    pub(crate) fn wait_reports(&mut self, timeout: Duration) {
        // A timeout or a closed ring is a normal wake-up here; the next poll sees the rest.
        let _ = self.reports.wait(WaitPolicy::PARK, Some(timeout));
    }

    /// Whether any report waits to be read.
    pub(crate) fn reports_pending(&self) -> bool {
        let idx = self.seg.index;
        (0..self.executors()).any(|e| {
            self.seg
                .segment
                .queued_bytes(idx.report(e))
                .is_ok_and(|q| q > 0)
        })
    }

    /// Request frames the executors read so far (progress, for stall detection).
    pub(crate) fn frames_in(&self) -> u64 {
        (0..self.executors())
            .map(|e| self.seg.metrics(e).get(scalar::FRAMES_IN))
            .sum()
    }

    /// Nothing left to do: every executor parked with no overflow, every request ring empty,
    /// and the executors' counters unchanged between two reads. Needs no count from the
    /// ingress, so it holds even when the ingress died between writing frames and counting
    /// them.
    pub(crate) fn quiescent(&self) -> bool {
        let a = self.idle_reading();
        let b = self.idle_reading();
        a.0 && a == b
    }

    fn idle_reading(&self) -> (bool, (u64, u64)) {
        let (seg, idx) = (&self.seg, self.seg.index);
        let mut idle = true;
        let mut counters = (0u64, 0u64);
        for e in 0..seg.executors() {
            let m = seg.metrics(e);
            idle &= m.get(scalar::PARKED) == 1 && m.get(scalar::OVERFLOW_BYTES) == 0;
            std::sync::atomic::fence(Ordering::Acquire);
            counters.0 += m.get(scalar::LOCAL_SENT);
            counters.1 += m.get(scalar::FRAMES_IN);
        }
        let empty = |r: usize| seg.segment.queued_bytes(r).is_ok_and(|q| q == 0);
        let rings_empty = (0..idx.executors).all(|b| {
            empty(idx.ingress(b))
                && empty(idx.net_in(b))
                && empty(idx.net_out(b))
                && (0..idx.executors).all(|a| empty(idx.exec(a, b)))
        });
        (idle && rings_empty, counters)
    }

    /// Stops the executors and collects what they hand back (once; later calls find none).
    pub(crate) fn stop(&mut self) -> Stopped {
        self.broadcast(Command::Stop);
        let mut stopped = Stopped {
            results: Vec::new(),
            panicked: Vec::new(),
            unpinned: Vec::new(),
            sink_error: None,
        };
        for (e, h) in std::mem::take(&mut self.handles).into_iter().enumerate() {
            match h.join() {
                Ok((result, pin)) => {
                    if let Some(p) = pin {
                        stopped
                            .unpinned
                            .push(format!("executor {e}: {p} (ran unpinned)"));
                    }
                    stopped.results.push(result);
                }
                Err(_) => stopped.panicked.push(e),
            }
        }
        // Every executor handed over its lines when it stopped.
        if let Some(sink) = self.sink.take() {
            stopped.sink_error = sink.close().err().map(|e| e.to_string());
        }
        stopped
    }
}

impl Drop for Coordinator {
    /// Executors never outlive their coordinator (an early return must not leave threads
    /// spinning on a segment nobody reads).
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.stop();
        }
    }
}

/// Pushes one command, waiting for room (a 64 KiB control ring holds thousands of them, so a
/// wait here means an executor stopped reading: yield until it reads again).
fn push_command(ring: &mut Producer<ShmRing>, cmd: Command) {
    let frame: [u8; COMMAND_BYTES] = cmd.encode();
    while ring.push(&frame).is_err() {
        std::thread::yield_now();
    }
}

/// Notices when nothing progresses: progress is any change of the counters it is shown.
pub(crate) struct StallWatch {
    timeout: Duration,
    since: Instant,
    seen: (u64, u64),
}

impl StallWatch {
    /// A watch that calls a run stalled after `timeout` without progress.
    pub(crate) fn new(timeout: Duration) -> Self {
        StallWatch {
            timeout,
            since: Instant::now(),
            seen: (0, 0),
        }
    }

    /// Shows the counters now; returns whether they have not changed for the timeout.
    pub(crate) fn stalled(&mut self, counters: (u64, u64)) -> bool {
        if counters != self.seen {
            self.seen = counters;
            self.since = Instant::now();
            return false;
        }
        self.since.elapsed() > self.timeout
    }

    /// Nothing is outstanding at `counters`: the timeout counts from now.
    pub(crate) fn restart(&mut self, counters: (u64, u64)) {
        self.seen = counters;
        self.since = Instant::now();
    }

    /// The timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }
}

#[cfg(test)]
mod tests {
    use super::StallWatch;
    use std::time::Duration;

    #[test]
    fn a_stall_is_no_change_for_the_timeout() {
        let mut w = StallWatch::new(Duration::from_secs(3600));
        assert!(!w.stalled((1, 0)));
        assert!(!w.stalled((1, 0)), "not for the timeout yet");
        let mut w = StallWatch::new(Duration::ZERO);
        assert!(!w.stalled((1, 0)), "a change is progress");
        std::thread::sleep(Duration::from_millis(1));
        assert!(w.stalled((1, 0)));
        assert!(!w.stalled((1, 1)));
        // A wait with nothing outstanding restarts the count.
        let mut w = StallWatch::new(Duration::from_millis(50));
        assert!(!w.stalled((2, 2)));
        std::thread::sleep(Duration::from_millis(60));
        w.restart((2, 2));
        assert!(!w.stalled((2, 2)), "counted from the restart");
    }
}
