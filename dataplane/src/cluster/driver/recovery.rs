//! Recovery: a run that loses a worker (its connection, a link of it, or its answers) restarts
//! its job from the last complete checkpoint instead of failing.
//!
//! The driver drops its transport, so every surviving worker sees its driver gone, stops its
//! executors, frees its segment and waits for the next job; the controller starts the lost
//! worker again under the same id (`Controller::replace_worker`: the processes `clasp run`
//! started are started again, in the same cgroup; a cluster file's workers are restarted by
//! their supervisor); then a new attempt of the run starts a fresh job on the same slots with
//! the checkpoint's routing table, every key group imported from the checkpoint's parts, the
//! latency ledger, counters and digests of the cut restored, and the input replayed from the
//! checkpoint's offset. What is carried from one attempt to the next is [`Carry`].
//!
//! Before the first checkpoint the cut is the start of the run: nothing to import, the input
//! replayed from its first record.

use super::{CheckpointConfig, DriverConfig, DriverError};
use crate::checkpoint::{CheckpointStore, FileStore, Manifest, OperatorBase};
use crate::cluster::control::{Controller, IntervalView, MigrationRecord};
use crate::message::RestorePart;
use crate::runtime::ledger::Ledger;
use crate::transport::PeerId;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Recoveries a run attempts before it gives up (a second failure during a recovery is one
/// more).
pub const MAX_RECOVERIES: usize = 4;
/// How long the driver waits after dropping its connections before it starts the new job, so
/// that every surviving worker has seen its old driver go before the new one calls.
const RESTART_GRACE: Duration = Duration::from_millis(500);

/// What a run was doing when it lost a worker (the testing option `--fault` names one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Connecting to the workers and starting the job.
    Start,
    /// Admitting the input, nothing else under way.
    Steady,
    /// A migration in progress.
    Migration,
    /// A checkpoint: the cut drained, the workers writing their parts.
    CheckpointSnapshot,
    /// A checkpoint: every part written, the manifest not yet.
    CheckpointCommit,
    /// The input admitted; the end of the stream.
    EndOfStream,
}

impl Phase {
    /// Its name, as `--fault` and the summary spell it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Steady => "steady",
            Phase::Migration => "migration",
            Phase::CheckpointSnapshot => "checkpoint-snapshot",
            Phase::CheckpointCommit => "checkpoint-commit",
            Phase::EndOfStream => "end-of-stream",
        }
    }
}

/// The testing option `--fault kill-worker=ID@PHASE` (SIGKILL worker ID the first time the
/// run is in PHASE; `steady`: once a checkpoint was taken and no migration is under way) or
/// `--fault stop-worker=ID@PHASE` (SIGSTOP it instead: its connections stay up, it only stops
/// answering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The worker to kill or stop.
    pub worker: PeerId,
    /// When.
    pub phase: Phase,
    /// Kill it or stop it.
    pub action: FaultAction,
}

/// What `--fault` does to its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// SIGKILL: its connections close.
    Kill,
    /// SIGSTOP: its connections stay up and it answers nothing.
    Stop,
}

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let bad = || {
            format!(
                "{s:?}: expected kill-worker=ID@PHASE or stop-worker=ID@PHASE, PHASE one of \
                 steady, migration, checkpoint-snapshot, checkpoint-commit"
            )
        };
        let (action, rest) = if let Some(rest) = s.strip_prefix("kill-worker=") {
            (FaultAction::Kill, rest)
        } else if let Some(rest) = s.strip_prefix("stop-worker=") {
            (FaultAction::Stop, rest)
        } else {
            return Err(bad());
        };
        let (id, phase) = rest.split_once('@').ok_or_else(bad)?;
        let worker: PeerId = id.parse().map_err(|_| bad())?;
        let phase = match phase {
            "steady" => Phase::Steady,
            "migration" => Phase::Migration,
            "checkpoint-snapshot" => Phase::CheckpointSnapshot,
            "checkpoint-commit" => Phase::CheckpointCommit,
            _ => return Err(bad()),
        };
        Ok(Fault {
            worker,
            phase,
            action,
        })
    }
}

/// One recovery, as the summary reports it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RecoveryRecord {
    /// The workers lost (started again under the same ids, except those that joined the run).
    pub workers_lost: Vec<PeerId>,
    /// What the run was doing.
    pub phase: String,
    /// The fault, in words.
    pub reason: String,
    /// The checkpoint restored (`None`: none was complete; the run restarted from its start).
    pub checkpoint_id: Option<u64>,
    /// How old that checkpoint was when the loss was seen (ms; `None` with no checkpoint).
    pub checkpoint_age_ms: Option<f64>,
    /// Records admitted before the loss that were admitted again (from the checkpoint's
    /// offset up to where the input was).
    pub records_replayed: u64,
    /// From the kill or stop to the driver seeing the loss (ms; known only for `--fault`).
    pub detect_ms: Option<f64>,
    /// From seeing the loss to every worker running the restored job (ms).
    pub restore_ms: f64,
    /// From then until the replayed records were admitted again (ms).
    pub replay_ms: f64,
}

/// The checkpoints of a run, as the summary reports them.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CheckpointReport {
    /// Where they are kept.
    pub dir: String,
    /// Complete checkpoints written.
    pub taken: u64,
    /// Checkpoints that failed (a part or the manifest not written); the run went on.
    pub failed: u64,
    /// The newest complete one.
    pub last_id: Option<u64>,
    /// Admission paused per checkpoint (drain, export, write), mean and largest (ms).
    pub pause_ms_mean: f64,
    /// See `pause_ms_mean`.
    pub pause_ms_max: f64,
    /// Bytes of the parts of the newest one.
    pub bytes_last: u64,
}

/// Where an attempt starts: a checkpoint's cut.
pub(super) struct ResumePoint {
    /// The checkpoint (`None`: the start of the run).
    pub(super) manifest: Option<Manifest>,
    /// Its parts, for the job.
    pub(super) parts: Vec<RestorePart>,
    /// The driver's ledger at the cut (`None` after the driver itself died: latencies of
    /// the roots before the cut are not in the summary then).
    pub(super) ledger: Option<Ledger>,
}

/// What one attempt of a run hands the next (module docs).
#[derive(Default)]
pub(super) struct Carry {
    pub(super) resume: Option<ResumePoint>,
    /// Where the first attempt listened: later ones listen there too, so that a worker that
    /// joins (`clasp worker --join`, told this address once) reaches a restarted job.
    pub(super) listen: Option<std::net::SocketAddr>,
    /// The run's clock (the controller's pattern goes on where it was).
    pub(super) t0: Option<Instant>,
    pub(super) first_admit: Option<Instant>,
    /// The next checkpoint's id.
    pub(super) next_id: u64,
    /// The ledger at the last cut, with that checkpoint's id.
    pub(super) ledger_at_cut: Option<(u64, Ledger)>,
    /// Admission times of the tracked roots admitted since the last cut, in order (one push per
    /// tracked root: the admission path stays cheap): a replayed root keeps its first.
    pub(super) admitted_ns: Vec<u64>,
    /// The first record after the last cut (`admitted_ns[0]` is the first tracked one from it).
    pub(super) admitted_ns_from: u64,
    pub(super) migrations: Vec<MigrationRecord>,
    pub(super) intervals: Vec<IntervalView>,
    pub(super) worker_seconds: f64,
    pub(super) recoveries: Vec<RecoveryRecord>,
    pub(super) checkpoints: CheckpointReport,
    pub(super) pauses_ms: Vec<f64>,
    pub(super) faults: Vec<Fault>,
    /// When `--fault` killed or stopped its worker, and in which phase (the loss is seen a
    /// moment later, perhaps in the next phase: the record names the phase of the fault).
    pub(super) faulted_at: Option<(Instant, Phase)>,
    /// The recovery under way: its record, when the loss was seen, where the input was.
    pub(super) pending: Option<(RecoveryRecord, Instant, u64)>,
    /// When the pending recovery's job was running (its replay started).
    pub(super) replay_from: Option<Instant>,
    /// Attempts that failed.
    pub(super) attempts: usize,
    /// The checkpoint `--resume` started from.
    pub(super) resumed_from: Option<u64>,
    /// Records it had admitted.
    pub(super) resumed_admitted: u64,
    /// The run's clock at its cut (s).
    pub(super) resumed_run_s: f64,
}

impl Carry {
    /// What the operators had done before the cut this attempt started from (zero from the
    /// start).
    pub(super) fn base(&self, ops: usize) -> Vec<OperatorBase> {
        match self.resume.as_ref().and_then(|r| r.manifest.as_ref()) {
            Some(m) if m.operators.len() == ops => m.operators.clone(),
            _ => vec![OperatorBase::default(); ops],
        }
    }

    /// The run's clock at the cut this attempt starts from (`None`: the start of the run).
    pub(super) fn resume_run_s(&self) -> Option<f64> {
        let m = self.resume.as_ref()?.manifest.as_ref()?;
        Some(m.run_s)
    }

    /// The checkpoints' summary (`None` when they are off).
    pub(super) fn checkpoint_report(&self, on: bool) -> Option<CheckpointReport> {
        on.then(|| {
            let mut r = self.checkpoints.clone();
            let n = self.pauses_ms.len().max(1) as f64;
            r.pause_ms_mean = self.pauses_ms.iter().fold(0.0, |a, b| a + b) / n;
            r.pause_ms_max = self.pauses_ms.iter().copied().fold(0.0, f64::max);
            r
        })
    }

    /// The first attempt's: from the start, or from the checkpoint `cfg.resume` names.
    pub(super) fn first(cfg: &DriverConfig) -> Result<Carry, DriverError> {
        let mut c = Carry {
            faults: cfg.faults.clone(),
            next_id: 1,
            ..Carry::default()
        };
        if let Some(ck) = &cfg.checkpoint {
            c.checkpoints.dir = ck.dir.display().to_string();
            if ck.resume {
                let store = open(ck)?;
                let l = store
                    .load_latest()
                    .map_err(|e| DriverError::Config(format!("--resume: {e}")))?;
                for s in &l.skipped {
                    tracing::warn!("--resume: skipped {s}");
                }
                c.next_id = l.manifest.id + 1;
                // The run's clock goes on from the cut when the input starts (`feed`; the
                // controller learns it from `on_resumed`).
                c.resumed_run_s = l.manifest.run_s.max(0.0);
                c.resumed_from = Some(l.manifest.id);
                c.resumed_admitted = l.manifest.admitted;
                c.admitted_ns_from = l.manifest.admitted;
                c.resume = Some(point(&store, l.manifest, None));
            }
        }
        Ok(c)
    }

    /// Starts a recovery after `e`, seen at `seen` to have lost workers `lost` (module docs):
    /// loads the newest checkpoint, asks the
    /// controller to start the lost workers again, and waits a moment for the survivors.
    pub(super) fn recover(
        &mut self,
        cfg: &DriverConfig,
        ctl: &mut dyn Controller,
        e: DriverError,
        (lost, seen): (Vec<PeerId>, Instant),
        phase: Phase,
        admitted: u64,
    ) -> Result<(), DriverError> {
        let Some(ck) = &cfg.checkpoint else {
            return Err(DriverError::Config("a recovery needs checkpoints".into()));
        };
        let store = open(ck)?;
        let loaded = newest_complete(&store)?;
        // A replay of a file that is not the one the checkpoint read would restore one
        // input's state and go on with another's.
        if let Some(why) = loaded.as_ref().and_then(Manifest::source_changed) {
            return Err(DriverError::NotRecovered {
                error: Box::new(e),
                why,
            });
        }
        // A failure during a recovery: that one is over, unfinished.
        let mut admitted = admitted;
        if let Some((rec, _, upto)) = self.pending.take() {
            admitted = admitted.max(upto);
            self.recoveries.push(rec);
        }
        let now_ms = unix_ms();
        let faulted = self.faulted_at.take();
        let record = RecoveryRecord {
            workers_lost: lost.clone(),
            phase: faulted.map_or(phase, |k| k.1).name().into(),
            reason: e.to_string(),
            checkpoint_id: loaded.as_ref().map(|m| m.id),
            checkpoint_age_ms: (loaded.as_ref())
                .map(|m| now_ms.saturating_sub(m.created_unix_ms) as f64),
            records_replayed: admitted.saturating_sub(loaded.as_ref().map_or(0, |m| m.admitted)),
            detect_ms: faulted.map(|k| seen.saturating_duration_since(k.0).as_secs_f64() * 1e3),
            ..RecoveryRecord::default()
        };
        // Workers that joined the run are not restarted (the run cannot start them where they
        // ran): the new job runs on the starting workers, the key groups restored onto them.
        let (replace, joined): (Vec<PeerId>, Vec<PeerId>) =
            (lost.iter()).partition(|p| cfg.workers.iter().any(|w| w.0 == **p));
        if !joined.is_empty() {
            tracing::warn!(
                "recovering: worker(s) {joined:?} joined the run and are not restarted; \
                 the job restarts on the workers it started with"
            );
        }
        tracing::warn!(
            "recovering: {}; {}; restarting from {}",
            record.reason,
            if replace.is_empty() {
                "no worker to start again".to_string()
            } else {
                format!("replacing worker(s) {replace:?}")
            },
            match &loaded {
                Some(m) => format!("checkpoint {} ({} records in)", m.id, m.admitted),
                None => "the start of the run (no checkpoint yet)".into(),
            }
        );
        // The ledger of that very cut (else a fresh one: the latencies before it are lost,
        // as after a resume), and the admission times kept from it on.
        let ledger = match (&loaded, &self.ledger_at_cut) {
            (Some(m), Some((id, l))) if *id == m.id => Some(l.clone()),
            (Some(_), _) => None,
            (None, _) => Some(Ledger::new()),
        };
        let restart_at = loaded.as_ref().map_or(0, |m| m.admitted);
        if restart_at != self.admitted_ns_from {
            self.admitted_ns.clear();
            self.admitted_ns_from = restart_at;
        }
        self.resume = Some(match loaded {
            Some(m) => point(&store, m, ledger),
            None => ResumePoint {
                manifest: None,
                parts: Vec::new(),
                ledger,
            },
        });
        self.pending = Some((record, seen, admitted));
        ctl.replace_workers(&replace)
            .map_err(|why| DriverError::Config(format!("recovery: {why}")))?;
        std::thread::sleep(RESTART_GRACE);
        Ok(())
    }

    /// The new job's workers run: the restore is over, the replay begins.
    pub(super) fn restored(&mut self) {
        if let Some((rec, seen, _)) = &mut self.pending {
            rec.restore_ms = seen.elapsed().as_secs_f64() * 1e3;
            self.replay_from = Some(Instant::now());
        }
    }

    /// `admitted` records are in: once past where the input was at the loss, the recovery
    /// is complete (also at the end of the input, `force`).
    pub(super) fn replayed(&mut self, admitted: u64, force: bool) {
        let done = matches!(&self.pending, Some((_, _, upto)) if admitted >= *upto || force);
        if done && let Some((mut rec, _, _)) = self.pending.take() {
            rec.replay_ms =
                (self.replay_from.take()).map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3);
            self.recoveries.push(rec);
        }
    }
}

/// The store of a run's checkpoints.
pub(super) fn open(ck: &CheckpointConfig) -> Result<FileStore, DriverError> {
    FileStore::open(&ck.dir, ck.keep).map_err(|e| DriverError::Config(e.to_string()))
}

/// The newest complete checkpoint in `store` (`None`: none yet), the ones skipped on the way
/// logged.
fn newest_complete(store: &FileStore) -> Result<Option<Manifest>, DriverError> {
    let skipped = match store.load_latest() {
        Ok(l) => {
            for s in &l.skipped {
                tracing::warn!("recovery: skipped {s}");
            }
            return Ok(Some(l.manifest));
        }
        Err(crate::checkpoint::CheckpointError::NoneComplete { skipped, .. }) => skipped,
        Err(e) => return Err(DriverError::Config(format!("recovery: {e}"))),
    };
    for s in &skipped {
        tracing::warn!("recovery: skipped {s}");
    }
    Ok(None)
}

/// A checkpoint as a place to start from.
fn point(store: &FileStore, m: Manifest, ledger: Option<Ledger>) -> ResumePoint {
    let dir = store.checkpoint_dir(m.id);
    ResumePoint {
        parts: (m.parts.iter())
            .map(|p| RestorePart {
                path: dir.join(&p.name).display().to_string(),
                crc32: p.crc32,
            })
            .collect(),
        manifest: Some(m),
        ledger,
    }
}

/// Now, in ms since the Unix epoch.
pub(super) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::{Fault, FaultAction, Phase};

    #[test]
    fn a_fault_names_its_action_worker_and_phase() {
        let f: Fault = "stop-worker=2@checkpoint-snapshot".parse().unwrap();
        assert_eq!(
            f,
            Fault {
                worker: 2,
                phase: Phase::CheckpointSnapshot,
                action: FaultAction::Stop
            }
        );
        let f: Fault = "kill-worker=1@steady".parse().unwrap();
        assert_eq!((f.action, f.phase), (FaultAction::Kill, Phase::Steady));
        for bad in [
            "pause-worker=1@steady",
            "kill-worker=x@steady",
            "stop-worker=1@start",
        ] {
            let e = bad.parse::<Fault>().unwrap_err();
            assert!(e.contains("stop-worker=ID@PHASE"), "{e}");
        }
    }
}
