//! Admission: the driver as the cluster's ingress. Records are generated or read from a
//! source, paced at the controller's rate, routed by the protocol planner's current table and
//! sent to the worker that owns their key group, at most `max_in_flight` tracked roots open at
//! a time (fewer around a migration: `migration.rs`, `MIGRATION_IN_FLIGHT`).

use super::{DRIVER_PARK, Driver, DriverError};
use crate::clock::monotonic_ns as now_ns;
use crate::cluster::DRIVER_ID;
use crate::cluster::control::Controller;
use crate::request::{FLAG_TRACKED, INGRESS_SLOT, RequestHeader, frame_len, root_id};
use crate::source::{Input, Next};
use clasp_operators::AppSpec;
use clasp_operators::key::{key_group, key_hash};
use clasp_protocol::KeyGroup;
use clasp_protocol::planner::PlannerAction;
use std::time::{Duration, Instant};

/// Records admitted between two turns of the transport while feeding.
const POLL_EVERY_RECORDS: u64 = 64;
/// The shortest wait between admissions when pacing: the records due meanwhile go out
/// back to back (at 250 k records/s, 25 of them).
const PACING_QUANTUM: Duration = Duration::from_micros(100);
/// At lower rates the wait stretches until about this many records are due *per worker*, so
/// that one send carries them together: every send wakes the receiving worker's network thread
/// and then its executor, and on a virtual machine a sleep and wake-up pair costs tens of µs of
/// the worker's CPU — at 8 000 records/s sent one by one, more than the records' execution.
/// The records of one wait are spread over the workers by key, so the wait is for this many
/// times the workers that take input.
const PACING_BATCH_RECORDS: f64 = 16.0;
/// The longest the wait stretches for a batch: the latency a record may gain by it.
const PACING_QUANTUM_MAX: Duration = Duration::from_micros(1000);

/// The wait between admissions at `rate_per_s` (> 0) spread over `receivers` workers: long
/// enough for a batch of [`PACING_BATCH_RECORDS`] each, within [`PACING_QUANTUM`,
/// `PACING_QUANTUM_MAX`].
fn pacing_quantum(rate_per_s: f64, receivers: usize) -> Duration {
    let batch_s = PACING_BATCH_RECORDS * receivers.max(1) as f64 / rate_per_s;
    if batch_s.is_finite() && batch_s < PACING_QUANTUM_MAX.as_secs_f64() {
        Duration::from_secs_f64(batch_s).max(PACING_QUANTUM)
    } else {
        PACING_QUANTUM_MAX
    }
}

/// What the input phase admitted.
pub(super) struct Fed {
    /// Records admitted.
    pub(super) admitted: u64,
    /// Tracked roots among them.
    pub(super) tracked: u64,
    /// When the first was admitted.
    pub(super) first_admit: Option<Instant>,
    /// Where the input stopped.
    pub(super) source: crate::source::SourceReport,
}

/// A token bucket filled at the controller's current rate, re-read every turn (a rate that
/// changes, or a run that ends, is seen at once). Tokens beyond one are records due and not
/// yet admitted: the ingress's queue when the cluster does not keep up.
struct Pacer {
    due: f64,
    last_fill: Instant,
    /// The end of the current wait: a turn that returns early (a report arrived) waits out
    /// the rest rather than send the one record due by then, which would undo the batching.
    hold_until: Option<Instant>,
}

impl Pacer {
    /// An empty bucket, filling from `now`.
    fn new(now: Instant) -> Pacer {
        Pacer {
            due: 0.0,
            last_fill: now,
            hold_until: None,
        }
    }

    /// Fills the bucket at `rate` (spread over `receivers` workers) up to `now`; `Ok` takes a
    /// token for one record and says how long ago it fell due (the records are taken in the
    /// order they fell due, so the oldest due is this one), `Err` is how long to wait first.
    /// Either way, the records due now.
    fn take_at(
        &mut self,
        now: Instant,
        rate: f64,
        receivers: usize,
    ) -> (u64, Result<Duration, Duration>) {
        let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
        self.due += rate * now.saturating_duration_since(self.last_fill).as_secs_f64();
        self.last_fill = now;
        let backlog = self.due as u64;
        if let Some(until) = self.hold_until {
            if now < until {
                return (backlog, Err(until - now));
            }
            self.hold_until = None;
        }
        if self.due >= 1.0 {
            // The tokens beyond this one accrued since it fell due (at a rate now zero, the
            // time is unknown: not counted).
            let due_for = if rate > 0.0 {
                Duration::try_from_secs_f64((self.due - 1.0) / rate).unwrap_or(Duration::ZERO)
            } else {
                Duration::ZERO
            };
            self.due -= 1.0;
            return (backlog, Ok(due_for));
        }
        // Wait at least a pacing quantum: one wait per record would cost a system call and a
        // timer per record (half the machine's CPU at 100 k records/s under `perf`).
        let wait = if rate > 0.0 {
            // A rate so small that the wait overflows a `Duration` (a pattern's `1e-300`)
            // waits a park, as a zero rate does.
            Duration::try_from_secs_f64((1.0 - self.due) / rate)
                .unwrap_or(DRIVER_PARK)
                .max(pacing_quantum(rate, receivers))
                .min(DRIVER_PARK)
        } else {
            DRIVER_PARK
        };
        self.hold_until = Some(now + wait);
        (backlog, Err(wait))
    }
}

/// The buffers one admission reuses.
#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    payload: Vec<u8>,
    frame: Vec<u8>,
}

impl Driver<'_> {
    /// Admits the input until the records are out or the controller says done.
    pub(super) fn feed(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
    ) -> Result<Fed, DriverError> {
        let cfg = self.cfg;
        let (mut input, mut fed) = self.open_input(spec)?;
        let ops = spec.operators.len();
        let sample = cfg.sample_every.max(1);
        let mut scratch = Scratch::default();
        // A move asked for before any input (an autoscaler's first placement).
        self.maintain(ctl, 0, ops)?;
        let mut pacer = Pacer::new(Instant::now());
        // Whether record `i` is in the scratch buffers, waiting for its turn.
        let mut held = false;
        // When record `i` fell due by the rate (`None`: unpaced).
        let mut fell_due: Option<Instant> = None;
        loop {
            let i = fed.admitted;
            if i % POLL_EVERY_RECORDS == 0 {
                self.between_admissions(spec, ctl, i, &input)?;
            }
            // One clock read serves the record's pacing and its due time (on a virtual
            // machine a read costs tens of ns, and this loop made five a record: 13 % of a
            // saturated driver's CPU); the admission delay ends with a read after the admit,
            // so it holds every wait of the record's, for the in-flight bound or for credit.
            let now = Instant::now();
            let t_s = now.saturating_duration_since(self.meter.t0).as_secs_f64();
            if i >= cfg.records || ctl.done(t_s, i) {
                fed.source = input.report(i);
                return Ok(fed);
            }
            if !held {
                match input.next_into(i, &mut scratch.key, &mut scratch.payload)? {
                    Next::Record => held = true,
                    Next::Pending => {
                        self.checkpoint_while_waiting(spec, ctl, i, &input)?;
                        self.idle_turn(DRIVER_PARK, ctl, i, ops)?;
                        continue;
                    }
                    Next::End => {
                        fed.source = input.report(i);
                        return Ok(fed);
                    }
                }
            }
            let rate = ctl.rate_per_s(t_s).or(cfg.rate_per_s);
            self.meter.offered = rate;
            if let Some(rate) = rate {
                let (backlog, taken) = pacer.take_at(now, rate, self.meter.active);
                self.meter.backlog = backlog;
                match taken {
                    Ok(due_for) => fell_due = now.checked_sub(due_for),
                    Err(wait) => {
                        self.checkpoint_while_waiting(spec, ctl, i, &input)?;
                        self.idle_turn(wait, ctl, i, ops)?;
                        continue;
                    }
                }
            }
            let is_tracked = i % sample == 0;
            if is_tracked {
                self.wait_in_flight_below_bound(ctl, i, ops)?;
                fed.tracked += 1;
                self.tracked = fed.tracked;
            }
            self.admit(spec, i, is_tracked, &mut scratch)?;
            if let Some(t) = fell_due.take() {
                self.meter.admission_delay.record_duration(t.elapsed());
            }
            input.admitted();
            held = false;
            if fed.first_admit.is_none() {
                fed.first_admit = Some(Instant::now());
                self.carry.first_admit = fed.first_admit;
            }
            fed.admitted += 1;
            self.admitted = fed.admitted;
            if fed.admitted % POLL_EVERY_RECORDS == 0 {
                self.turn(Duration::ZERO)?;
                self.maintain(ctl, fed.admitted, ops)?;
            }
        }
    }

    /// Opens the input at the record a restarted attempt resumes from (its checkpoint's, with
    /// the ledger of that cut: every tracked root before it completed) and starts the clock.
    fn open_input(&mut self, spec: &AppSpec) -> Result<(Input, Fed), DriverError> {
        let cfg = self.cfg;
        let mut input = Input::open(spec, &cfg.source, cfg.seed)?;
        let cut = (self.carry.resume.as_ref()).and_then(|r| r.manifest.as_ref());
        let start = cut.map_or(0, |m| m.admitted);
        // An input that waits right at the restored cut does not take a copy of it.
        self.last_cut_admitted = cut.map(|m| m.admitted);
        input.skip(start)?;
        if let Some(m) = cut {
            input.check_replayed(start, &m.source)?;
        }
        let fed = Fed {
            admitted: start,
            tracked: self.rx.ledger.completed_inputs(),
            first_admit: self.carry.first_admit,
            source: Default::default(),
        };
        self.admitted = start;
        self.tracked = fed.tracked;
        self.last_progress = Instant::now();
        self.meter.start();
        match self.carry.t0 {
            Some(t0) => self.meter.t0 = t0,
            None => {
                // A resumed run's clock goes on from its checkpoint's cut.
                let cut = Duration::try_from_secs_f64(self.carry.resumed_run_s).unwrap_or_default();
                self.meter.t0 = self.meter.t0.checked_sub(cut).unwrap_or(self.meter.t0);
                self.carry.t0 = Some(self.meter.t0);
            }
        }
        self.phase = super::Phase::Steady;
        self.last_checkpoint = Instant::now();
        Ok((input, fed))
    }

    /// Turns until the tracked roots in flight are under the bound.
    fn wait_in_flight_below_bound(
        &mut self,
        ctl: &mut dyn Controller,
        i: u64,
        ops: usize,
    ) -> Result<(), DriverError> {
        while self.in_flight_roots() >= self.in_flight_bound() {
            self.t.flush_now();
            self.turn(DRIVER_PARK)?;
            self.maintain(ctl, i, ops)?;
        }
        Ok(())
    }

    /// Every few records: a checkpoint when one is due, a testing fault when its phase
    /// comes, and the end of a recovery's replay.
    fn between_admissions(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
        i: u64,
        input: &Input,
    ) -> Result<(), DriverError> {
        self.carry.replayed(i, false);
        if self.mig.in_flight.is_some() {
            self.inject(super::Phase::Migration, ctl);
        } else if self.carry.checkpoints.taken > 0 && self.carry.pending.is_none() {
            self.inject(super::Phase::Steady, ctl);
        }
        if self.cut_due(i) {
            self.checkpoint(spec, ctl, i, input.report(i).offset)?;
        }
        Ok(())
    }

    /// Whether a checkpoint falls due at record `i`: its interval is up, and `i` is not the
    /// cut of the last one (an input waiting with nothing admitted since takes no copy).
    fn cut_due(&self, i: u64) -> bool {
        self.checkpoint_due() && self.last_cut_admitted != Some(i)
    }

    /// While the input waits (a slow rate, a source with nothing to read yet): the checkpoint
    /// that falls due, as [`Self::between_admissions`] takes it, whatever record the input
    /// stopped at (a source that pauses for minutes still has what it sent checkpointed).
    fn checkpoint_while_waiting(
        &mut self,
        spec: &AppSpec,
        ctl: &mut dyn Controller,
        i: u64,
        input: &Input,
    ) -> Result<(), DriverError> {
        if self.cut_due(i) {
            self.between_admissions(spec, ctl, i, input)?;
        }
        Ok(())
    }

    /// A turn while the input waits (for its pace, or for a source to read more): not a
    /// stall, however long it lasts.
    fn idle_turn(
        &mut self,
        wait: Duration,
        ctl: &mut dyn Controller,
        admitted: u64,
        ops: usize,
    ) -> Result<(), DriverError> {
        self.t.flush_now();
        self.last_progress = Instant::now();
        self.turn(wait)?;
        self.maintain(ctl, admitted, ops)
    }

    /// Record `i`'s admission time: now, or for a tracked root replayed after a recovery its
    /// first admission's (kept since the last checkpoint), so its latency counts the outage.
    fn admitted_ns(&mut self, i: u64, is_tracked: bool) -> u64 {
        if !is_tracked || self.cfg.checkpoint.is_none() {
            return now_ns();
        }
        // Tracked roots are every `sample`-th record: this is the p-th since the cut.
        let sample = self.cfg.sample_every.max(1);
        let from = self.carry.admitted_ns_from.div_ceil(sample);
        let p = (i / sample).saturating_sub(from) as usize;
        let times = &mut self.carry.admitted_ns;
        if let Some(&t) = times.get(p) {
            return t;
        }
        debug_assert_eq!(p, times.len(), "tracked roots are admitted in order");
        let t = now_ns();
        times.push(t);
        t
    }

    /// Sends record `i` (in `s`) to the worker that owns its key group.
    fn admit(
        &mut self,
        spec: &AppSpec,
        i: u64,
        is_tracked: bool,
        s: &mut Scratch,
    ) -> Result<(), DriverError> {
        let hash = key_hash(&s.key);
        let kg = key_group(hash);
        let PlannerAction::SendRequest { to, req } =
            self.mig.planner.admit(spec.source, KeyGroup(kg), ())
        else {
            unreachable!("admit routes");
        };
        let owner = self.slots.worker_of(to).ok_or_else(|| {
            DriverError::Migration(format!("the routing names slot {to}, which is no worker's"))
        })?;
        let id = root_id(i);
        let header = RequestHeader {
            operator: spec.source as u16,
            key_group: kg,
            flags: if is_tracked { FLAG_TRACKED } else { 0 },
            epoch: req.epoch.0 as u16,
            dest: to.0 as u16,
            root_home: DRIVER_ID as u16,
            source: INGRESS_SLOT,
            key_hash: hash,
            request_id: id,
            root_id: id,
            admitted_ns: self.admitted_ns(i, is_tracked),
        };
        let bytes = frame_len(s.key.len(), s.payload.len());
        // The worker would drop a request its ring cannot take, and the tree would never end:
        // the run stops here instead, naming the record.
        let ring_bytes = self.cfg.ring_bytes;
        let max_bytes = crate::runtime::layout::ring_frame_bytes_max(ring_bytes);
        if bytes > max_bytes {
            return Err(DriverError::RecordTooLarge {
                record: i,
                bytes,
                max_bytes,
                ring_bytes,
            });
        }
        s.frame.resize(bytes, 0);
        header.write(&s.key, &s.payload, &mut s.frame);
        loop {
            match self.t.try_append(owner, &s.frame) {
                Ok(true) => break,
                Ok(false) => self.turn(super::CREDIT_WAIT_TURN)?,
                Err(e) => {
                    let context = format!("record {i} to worker {owner}");
                    return Err(DriverError::transport(context, e));
                }
            }
        }
        *self.sent.entry(owner).or_default() += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacing_wait_gathers_a_batch_at_low_rates_within_its_bounds() {
        // 16 records at 8 000/s take 2 ms: the wait stops at its maximum, 1 ms (8 records).
        assert_eq!(pacing_quantum(8_000.0, 1), PACING_QUANTUM_MAX);
        // At 80 000/s a batch of 16 is due in 200 µs; 16 for each of 3 workers in 600 µs.
        let q = pacing_quantum(80_000.0, 1);
        assert!((q.as_secs_f64() - 200e-6).abs() < 1e-9, "{q:?}");
        let q = pacing_quantum(80_000.0, 3);
        assert!((q.as_secs_f64() - 600e-6).abs() < 1e-9, "{q:?}");
        assert_eq!(pacing_quantum(80_000.0, 0), pacing_quantum(80_000.0, 1));
        // At high rates the shortest wait holds (25 records per send at 250 000/s).
        assert_eq!(pacing_quantum(250_000.0, 1), PACING_QUANTUM);
        assert_eq!(pacing_quantum(f64::INFINITY, 2), PACING_QUANTUM);
        assert_eq!(pacing_quantum(f64::NAN, 1), PACING_QUANTUM_MAX);
    }

    #[test]
    fn a_record_taken_late_says_how_long_it_has_been_due() {
        let start = Instant::now();
        let mut pacer = Pacer::new(start);
        // 1 000 records/s and 10.5 ms without a take: 10 records due, the oldest for 9.5 ms.
        let late = start + Duration::from_micros(10_500);
        let (backlog, taken) = pacer.take_at(late, 1_000.0, 1);
        assert_eq!(backlog, 10);
        let due_for = taken.expect("records are due");
        assert!(due_for.abs_diff(Duration::from_micros(9_500)) < Duration::from_micros(1));
        // The next one fell due a ms later, so it has been due a ms less.
        let due_for = pacer.take_at(late, 1_000.0, 1).1.expect("due");
        assert!(due_for.abs_diff(Duration::from_micros(8_500)) < Duration::from_micros(1));
        // A rate that fell to zero leaves what is due, but no time to count it by.
        let (_, taken) = pacer.take_at(late, 0.0, 1);
        assert_eq!(taken, Ok(Duration::ZERO));
    }

    #[test]
    fn a_paced_record_waits_at_least_the_quantum_of_its_rate() {
        let mut pacer = Pacer::new(Instant::now());
        let (_, wait) = pacer.take_at(Instant::now(), 8_000.0, 1);
        let wait = wait.expect_err("no record is due yet");
        assert!(
            wait >= PACING_QUANTUM_MAX && wait <= DRIVER_PARK,
            "{wait:?}"
        );
    }

    #[test]
    fn a_vanishing_rate_waits_a_park_instead_of_overflowing_the_wait() {
        let now = Instant::now();
        let mut pacer = Pacer::new(now);
        // 1 / 1e-300 s does not fit a `Duration` (a pattern file's `0,1e-300` panicked here).
        let (_, wait) = pacer.take_at(now, 1e-300, 1);
        assert_eq!(wait, Err(DRIVER_PARK));
    }
}
