//! The bodies of a run's messages between the driver and its workers: the job, a probe's
//! answer, the periodic counters, the final summary and the ledger deltas.

use super::RoutingRow;
use crate::routing::Spread;
use crate::runtime::IdlePolicy;
use crate::runtime::ledger::Delta;
use crate::transport::PeerId;
use clasp_operators::OperatorSummary;
use rkyv::{Archive, Deserialize, Serialize};

/// What the driver tells each worker to run.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The app's name.
    pub app_name: String,
    /// The app's TOML definition (empty: the built-in app of that name).
    pub app_toml: String,
    /// Executors on every worker.
    pub executors: u16,
    /// How key groups are spread.
    pub spread: SpreadCode,
    /// Capacity of each request ring.
    pub ring_bytes: u64,
    /// Pin executors to cores.
    pub pin: bool,
    /// What idle executors and network threads do (a worker's own `--idle` overrides it).
    pub idle: IdleCode,
    /// The workers, in the order the routing table spreads over.
    pub workers: Vec<PeerId>,
    /// The driver's id and the address workers connect back to.
    pub driver: PeerId,
    /// `ip:port`.
    pub driver_addr: String,
    /// How often workers send their [`Counters`] (0: never).
    pub interval_ms: u32,
    /// Where workers write outputs as lines (`file:PATH`, `stdout:`, `tcp:ADDR`; see
    /// [`crate::sink`]); empty: nowhere (digests only).
    pub sink: String,
    /// Each worker writes its own `PATH.w<ID>` for a `file:` sink (workers on several hosts);
    /// else the workers share one host and append to `PATH`, which the driver emptied.
    pub sink_per_worker: bool,
    /// The epoch of `routing`: 0 at the start of a run, the current one for a worker that
    /// joins a running cluster.
    pub epoch: u64,
    /// The routing table the executors start from, per operator (a joining worker must start
    /// from the current one); empty: the `spread` over `workers`.
    pub routing: Vec<RoutingRow>,
    /// The workers the receiver connects to, with their addresses (a joining worker has no
    /// cluster file); empty: the receiver's cluster file's workers.
    pub peers: Vec<(PeerId, String)>,
    /// The cluster file's workers as the driver read it, with the addresses it resolved: a
    /// worker of the file checks them against its own copy (two copies that disagree would
    /// otherwise surface as a link failing seconds into the run).
    pub addresses: Vec<(PeerId, String)>,
    /// The checkpoint parts whose key groups the executors import before they start (a run
    /// restarted after a lost worker); empty: every executor starts empty.
    pub restore: Vec<super::RestorePart>,
}

/// [`IdlePolicy`] on the wire (the runtime's type stays free of the codec).
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleCode {
    /// [`IdlePolicy::Auto`].
    Auto,
    /// [`IdlePolicy::Park`].
    Park,
    /// [`IdlePolicy::Spin`], its bound in µs.
    Spin(u32),
}

impl From<IdlePolicy> for IdleCode {
    fn from(p: IdlePolicy) -> Self {
        match p {
            IdlePolicy::Auto => IdleCode::Auto,
            IdlePolicy::Park => IdleCode::Park,
            IdlePolicy::Spin { us } => IdleCode::Spin(us),
        }
    }
}

impl From<IdleCode> for IdlePolicy {
    fn from(c: IdleCode) -> Self {
        match c {
            IdleCode::Auto => IdlePolicy::Auto,
            IdleCode::Park => IdlePolicy::Park,
            // A bound out of range from a peer is clamped, not trusted.
            IdleCode::Spin(us) => IdlePolicy::Spin {
                us: us.clamp(1, crate::runtime::idle::IDLE_SPIN_US_MAX),
            },
        }
    }
}

/// [`Spread`] on the wire (the routing module's type stays free of the codec).
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpreadCode {
    /// [`Spread::Even`].
    Even,
    /// [`Spread::Alternate`].
    Alternate,
}

impl From<Spread> for SpreadCode {
    fn from(s: Spread) -> Self {
        match s {
            Spread::Even => SpreadCode::Even,
            Spread::Alternate => SpreadCode::Alternate,
        }
    }
}

impl From<SpreadCode> for Spread {
    fn from(s: SpreadCode) -> Self {
        match s {
            SpreadCode::Even => Spread::Even,
            SpreadCode::Alternate => Spread::Alternate,
        }
    }
}

/// A worker's answer to a probe.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The probe round answered.
    pub round: u64,
    /// Executors parked, no overflow, every ring empty, nothing held.
    pub idle: bool,
    /// Per peer: (peer, request frames handed to the transport, frames delivered to rings).
    pub counts: Vec<(PeerId, u64, u64)>,
}

/// A worker's cumulative counters (the planner differentiates consecutive ones into
/// per-interval metrics).
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// The worker.
    pub worker: PeerId,
    /// When they were read (the worker's CLOCK_MONOTONIC; only differences are used).
    pub t_ns: u64,
    /// Per operator: requests processed.
    pub processed: Vec<u64>,
    /// Per operator: execution ns (sampled, scaled).
    pub exec_ns: Vec<u64>,
    /// Per edge of the app (`AppSpec::edges`, in its order): local chained requests. Not a
    /// `from × to` matrix: that grows with the square of the operators and would not fit a
    /// control frame for an app of 64.
    pub edges_local: Vec<u64>,
    /// Per edge of the app, as `edges_local`: remote chained requests.
    pub edges_remote: Vec<u64>,
    /// Executor busy ns, summed.
    pub busy_ns: u64,
    /// The worker process's CPU ns (its own cgroup's usage when capped, else the process CPU
    /// clock); `None` when it could not be read.
    pub cpu_ns: Option<u64>,
    /// CPU ns the executors spent spinning idle before parking (inside `cpu_ns`, not work).
    pub idle_spin_ns: u64,
    /// CPU ns the worker's threads spent inside their sleeping waits — the executors' parks
    /// and the network thread's waiting `io_uring_enter` (inside `cpu_ns`): what going to
    /// sleep and waking up cost them, apart from their work.
    pub sleep_cpu_ns: u64,
    /// Per peer: request and control frames handed to the transport, cumulative (the planner
    /// counts the distinct destinations of an interval from their differences).
    pub sent_to: Vec<(PeerId, u64)>,
    /// Bytes waiting in the executors' inbound rings now.
    pub queued_bytes: u64,
    /// Frames read by the executors.
    pub frames_in: u64,
    /// Times a thread of the worker process went to sleep (voluntary context switches,
    /// cumulative): each costs a wake-up later, which the busy-time estimator prices apart
    /// from the chained requests.
    pub sleeps: u64,
    /// CPU-quota enforcement periods in which the worker's group was throttled, cumulative;
    /// `None` for a worker without a cap of its own. An interval in which it grew measured a
    /// CPU time held at the cap, not what the work cost.
    pub throttled_periods: Option<u64>,
    /// TCP batches the worker's transport sent and received, over all its peers (the driver
    /// included), cumulative: each costs a system call's share, a wake-up of the network
    /// thread and its framing, whatever the number of requests in it.
    pub batches: u64,
    /// The executor threads' CPU ns, summed (their thread clocks; inside `cpu_ns`); `None`
    /// when one could not be read. With the three below, the busy-time estimator tells what
    /// the executors spent from what the network thread and the kernel spent.
    pub exec_cpu_ns: Option<u64>,
    /// Of `idle_spin_ns` and `sleep_cpu_ns`, the executors' part.
    pub exec_idle_spin_ns: u64,
    pub exec_sleep_cpu_ns: u64,
    /// Times the executors went to sleep (futex waits entered), cumulative.
    pub exec_sleeps: u64,
}

/// What one worker ran: per-operator summaries (to compare with the oracle), metrics, faults.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct WorkerSummary {
    /// The worker.
    pub worker: PeerId,
    /// Per operator, summed over the worker's executors.
    pub summaries: Vec<OperatorSummary>,
    /// Per operator: keys holding state.
    pub state_keys: Vec<u64>,
    /// Per operator: malformed requests by reason.
    pub malformed: Vec<Vec<(String, u64)>>,
    /// Per operator: requests processed (metrics).
    pub processed: Vec<u64>,
    /// Per operator: execution ns (sampled, scaled).
    pub exec_ns: Vec<u64>,
    /// Per edge of the app (`AppSpec::edges`, in its order): local chained requests. Not a
    /// `from × to` matrix: that grows with the square of the operators and would not fit a
    /// control frame for an app of 64.
    pub edges_local: Vec<u64>,
    /// Per edge of the app, as `edges_local`: remote chained requests.
    pub edges_remote: Vec<u64>,
    /// Named counters (executors' and the transport's).
    pub totals: Vec<(String, u64)>,
    /// Faults seen by the worker.
    pub errors: Vec<String>,
}

/// One latency-ledger delta on the wire (see [`Delta`]).
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerDelta {
    /// The root's id.
    pub root_id: u64,
    /// XOR of the processed request's id and its children's ids.
    pub xor: u64,
    /// The root's admission time (ns, CLOCK_MONOTONIC; 0: not an input), moved later by how
    /// long the delta waited at the worker before it was sent (see [`Delta`]).
    pub admitted_ns: u64,
}

impl From<Delta> for LedgerDelta {
    fn from(d: Delta) -> Self {
        LedgerDelta {
            root_id: d.root_id,
            xor: d.xor,
            admitted_ns: d.admitted_ns,
        }
    }
}

impl From<LedgerDelta> for Delta {
    fn from(d: LedgerDelta) -> Self {
        Delta {
            root_id: d.root_id,
            xor: d.xor,
            admitted_ns: d.admitted_ns,
        }
    }
}

/// Ledger deltas per `Deltas` message (24 bytes each: 48 KiB, well under the body limit).
pub const DELTAS_PER_MESSAGE: usize = 2048;

const _: () = assert!(
    DELTAS_PER_MESSAGE * crate::runtime::ledger::DELTA_BYTES + 256
        <= crate::transport::wire::MAX_CONTROL_BODY_BYTES
);
