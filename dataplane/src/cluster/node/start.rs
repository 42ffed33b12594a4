//! Starting a job's executors: the job checked against this worker's cluster file, the
//! routing table every worker builds alike from it, this worker's segment, and its
//! [`Coordinator`] with one link per executor to the network thread.

use super::{ClusterWorkerConfig, Job, Running};
use crate::routing::Slots;
use crate::runtime::coordinator::{Coordinator, Launch};
use crate::runtime::executor::{NetLink, PlanMail, Seat, SnapshotBox};
use crate::runtime::layout::{LayoutError, SegmentSizes, WorkerSegment};
use crate::runtime::{IdlePolicy, RuntimeError};
use crate::sink::{SINK_BUFFER_BYTES_MAX, Sink, SinkError, SinkTarget};
use crate::transport::{Limits, PeerId, Transport};
use clasp_operators::AppSpec;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A job this worker cannot start.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    /// Too few or too many executors per worker.
    #[error("{0} executors per worker")]
    Executors(usize),
    /// Request rings that are not a power of two of at least 4 KiB.
    #[error("ring of {0} bytes")]
    RingBytes(usize),
    /// The job's workers do not include this one.
    #[error("worker {0} is not in the job")]
    NotInJob(PeerId),
    /// The job's slots or routing table do not fit the frame format.
    #[error(transparent)]
    Slots(#[from] crate::routing::SlotError),
    /// The worker's segment.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// An executor's ring to the network thread.
    #[error("a net_out ring: {0}")]
    NetOut(#[source] clasp_shmring::Error),
    /// The executors.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The job's routing table.
    #[error("the job's routing table: {0}")]
    Routing(#[from] crate::message::MessageError),
    /// The job's sink.
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
}

/// Checks the job, makes this worker's segment and starts its executors.
pub(super) fn start_executors(
    cfg: &ClusterWorkerConfig,
    job: &Job,
    spec: Arc<AppSpec>,
    t: &Transport,
) -> Result<Running, StartError> {
    let ops = spec.operators.len();
    let executors = job.executors as usize;
    if executors == 0 || executors > crate::runtime::layout::MAX_EXECUTORS {
        return Err(StartError::Executors(executors));
    }
    let ring_bytes = job.ring_bytes as usize;
    if !ring_bytes.is_power_of_two() || ring_bytes < 4096 {
        return Err(StartError::RingBytes(ring_bytes));
    }
    let slots = Slots {
        workers: job.workers.clone(),
        executors,
    };
    // The driver's current table (a joiner's starts mid-run), else the spread.
    let table = if job.routing.is_empty() {
        crate::routing::spread(ops, &slots, job.spread.into())?
    } else {
        let t = crate::message::table_of(job.epoch, &job.routing)?;
        slots.check(&t, ops)?;
        t
    };
    let table = Arc::new(table);
    let index = job
        .workers
        .iter()
        .position(|&w| w == cfg.id)
        .ok_or(StartError::NotInJob(cfg.id))?;
    slots.check_count()?;
    let seat = Seat {
        routing: Arc::clone(&table),
        slots: slots.clone(),
        index,
        remote_frame_bytes_max: remote_frame_bytes_max(&cfg.limits),
    };
    let sizes = SegmentSizes {
        executors,
        operators: ops,
        ring_bytes,
        max_frame_bytes: crate::runtime::layout::ring_frame_bytes_max(ring_bytes),
    };
    // Nothing attaches to a cluster worker's segment by name: anonymous, so a killed worker
    // leaves nothing in /dev/shm.
    let seg = WorkerSegment::create(None, &sizes, spec.source, 0, 1, &table)?;
    let net_out = (0..executors)
        .map(|e| seg.segment.consumer(seg.index.net_out(e)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(StartError::NetOut)?;
    let plans: Vec<Arc<Mutex<VecDeque<PlanMail>>>> =
        (0..executors).map(|_| Default::default()).collect();
    let parked = Arc::new(AtomicBool::new(false));
    let restore = super::snapshot::restore_groups(&job.restore, &table, &slots, index)
        .map_err(|e| StartError::Runtime(RuntimeError::Restore(e)))?;
    let snap = super::snapshot::Snapshots::new(
        (restore.into_iter())
            .map(|groups| {
                Arc::new(Mutex::new(SnapshotBox {
                    taken: None,
                    restore: groups,
                }))
            })
            .collect(),
    );
    let links = (plans.iter().zip(&snap.boxes))
        .map(|(mailbox, snapshot)| {
            Some(NetLink {
                parked: parked.clone(),
                waker: t.waker(),
                plans: mailbox.clone(),
                snapshot: snapshot.clone(),
            })
        })
        .collect();
    let sink = open_sink(job, cfg.id, executors)?;
    let launch = Launch {
        spec: &spec,
        worker: cfg.id,
        seat: &seat,
        // Auto: every worker of the cluster may share this machine, so spin only if every
        // thread of every worker has a core.
        policy: idle_policy(cfg, job).wait_policy((executors + 1) * job.workers.len() + 1),
        pin: job.pin,
        links,
        sink,
    };
    let coordinator = Coordinator::start(seg, launch)?;
    Ok(Running {
        spec,
        coordinator,
        executors,
        net_out,
        slots,
        index,
        peers: Vec::new(),
        plans,
        parked,
        interval: (job.interval_ms > 0).then(|| Duration::from_millis(job.interval_ms.into())),
        cpu: crate::cpu_usage::CpuSource::detect(),
        throttling: crate::cpu_usage::Throttling::detect(),
        snap,
        sleeps_from: crate::cpu_usage::process_sleeps(),
    })
}

/// What this worker's idle threads do: its own `--idle` if it was given one, else the job's.
pub(super) fn idle_policy(cfg: &ClusterWorkerConfig, job: &Job) -> IdlePolicy {
    cfg.idle.unwrap_or_else(|| job.idle.into())
}

/// Opens the job's sink for this worker, if it names one.
fn open_sink(job: &Job, worker: PeerId, executors: usize) -> Result<Option<Sink>, SinkError> {
    if job.sink.is_empty() {
        return Ok(None);
    }
    let target = SinkTarget::parse(&job.sink)?;
    let per_worker = job.sink_per_worker.then_some(worker);
    let resumed = !job.restore.is_empty();
    Sink::open_resumed(
        &target,
        per_worker,
        resumed,
        executors,
        SINK_BUFFER_BYTES_MAX,
    )
    .map(Some)
}

/// Longest frame the transport carries to another worker: what one batch carries (the peers
/// of one cluster share these limits), less the batch's and the entry's headers and the
/// entry's alignment.
fn remote_frame_bytes_max(l: &Limits) -> usize {
    l.batch_bytes_max
        .min(l.data_credit_bytes as usize)
        .min(l.frame_bytes_max)
        .saturating_sub(
            crate::transport::wire::NET_HEADER_BYTES
                + crate::transport::wire::ENTRY_HEADER_BYTES
                + crate::transport::wire::WIRE_ALIGN,
        )
}
