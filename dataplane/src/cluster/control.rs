//! What steers a live cluster run: the input rate over time and when to move to a new
//! placement. The driver owns the mechanism (admission, the migration protocol, metrics
//! collection); a [`Controller`] owns the policy — an autoscaler (`clasp run`), a chaos
//! schedule of random migrations ([`Chaos`], for testing that nothing is lost whatever the
//! moves), or nothing at all (a static run).

use crate::routing::Slots;
use crate::runtime::ledger::LatencySummary;
use clasp_operators::key::KEY_GROUPS;
use clasp_protocol::ids::{Epoch, Slot};
use clasp_protocol::routing::RoutingTable;

/// One worker's figures over one interval (rates per second).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct WorkerInterval {
    /// Index in the job's worker list.
    pub index: usize,
    /// The worker's id (reported or not yet).
    pub worker: crate::transport::PeerId,
    /// Per operator: requests processed per second.
    pub processed_per_s: Vec<f64>,
    /// Per operator: mean execution time (µs) over the interval (0 when nothing ran).
    pub exec_us: Vec<f64>,
    /// Per edge of the app (`AppSpec::edges` order): local chained requests per second.
    pub edges_local_per_s: Vec<f64>,
    /// Per edge of the app: remote chained requests per second.
    pub edges_remote_per_s: Vec<f64>,
    /// Executor busy µs per second (summed over executors).
    pub busy_us_per_s: f64,
    /// The worker process's CPU µs per second, idle spinning excluded; None when not measured.
    pub cpu_us_per_s: Option<f64>,
    /// Bytes waiting in the executors' inbound rings at the end of the interval.
    pub queued_bytes: u64,
    /// Distinct other workers it sent requests to in the interval.
    pub destinations: usize,
    /// Remote chained requests per second other workers sent it (what the others' network
    /// threads counted for it: the receiving side of their remote requests).
    pub remote_received_per_s: f64,
    /// Input records per second the driver admitted to it.
    pub roots_per_s: f64,
    /// Times per second a thread of the worker went to sleep (voluntary context switches).
    pub sleeps_per_s: f64,
    /// CPU µs per second its threads spent inside their sleeping waits (going to sleep and
    /// waking up; part of `cpu_us_per_s`).
    pub sleep_cpu_us_per_s: f64,
    /// CPU-quota periods in which its group was throttled during the interval (None: the
    /// worker has no cap of its own, or it was not read).
    pub throttled_periods: Option<u64>,
    /// TCP batches per second its transport sent and received (all peers, the driver included).
    pub batches_per_s: f64,
    /// Of `cpu_us_per_s`, what its executor threads used (their thread clocks, idle spinning
    /// excluded); None when not measured. The rest is its network thread's and the kernel's.
    pub exec_cpu_us_per_s: Option<f64>,
    /// Of `sleep_cpu_us_per_s` and `sleeps_per_s`, the executors' part.
    pub exec_sleep_cpu_us_per_s: f64,
    pub exec_sleeps_per_s: f64,
    /// The worker's cumulative counters at the end of the interval (for metrics endpoints,
    /// which export totals rather than rates).
    #[serde(skip)]
    pub totals: crate::message::Counters,
}

/// The cluster over one interval, as the driver saw it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct IntervalView {
    /// End of the interval, seconds since the first admission.
    pub t_s: f64,
    /// Its length.
    pub dt_s: f64,
    /// Records admitted per second.
    pub input_per_s: f64,
    /// The rate the controller asked for (the offered load; `None`: unthrottled).
    pub offered_per_s: Option<f64>,
    /// Roots completed end to end per second.
    pub throughput_per_s: f64,
    /// Records due by the rate but not admitted yet (the ingress's queue).
    pub backlog: u64,
    /// Latency of the trees completed in the interval.
    pub latency: LatencySummary,
    /// How long after falling due by the rate the records of the interval were admitted (µs;
    /// empty at no rate): the ingress's wait, which `latency` does not include.
    pub admission_delay: LatencySummary,
    /// Per worker (all of the job's workers, active or not).
    pub workers: Vec<WorkerInterval>,
    /// A migration was in progress at some point of the interval.
    pub migrating: bool,
    /// Workers owning at least one key group at the end of the interval.
    pub active_workers: usize,
}

/// A move to a new placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// The new slot routing (every operator × every key group → a slot); the planner gives
    /// it the migration's epoch.
    pub routing: RoutingTable,
    /// Why (`chaos`, or the policy's one-line explanation).
    pub reason: String,
}

/// One completed migration, as the driver measured it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct MigrationRecord {
    /// The new epoch.
    pub epoch: u64,
    /// When the plan was broadcast, seconds since the first admission.
    pub t_s: f64,
    /// Why.
    pub reason: String,
    /// Workers owning key groups before and after.
    pub workers_before: usize,
    /// See `workers_before`.
    pub workers_after: usize,
    /// (operator, key group) pairs that changed slot.
    pub key_groups_moved: usize,
    /// The move's decision → its plan broadcast: the wait for the roots in flight to fall to
    /// the migration's narrower bound, and for its key groups to be copied ahead.
    pub narrowing_ms: f64,
    /// Plan broadcast → every slot's completion (the planner's duration of a migration).
    pub planner_ms: f64,
    /// The longest pause of any slot (plan arrival → resume: its drain).
    pub worker_pause_ms: f64,
    /// The longest wait of any slot for its expected markers (plan arrival → its seal); the
    /// slot executes meanwhile, only held and gated requests wait.
    pub marker_wait_ms: f64,
    /// Queued requests moved with state.
    pub exported: u64,
    /// Old-epoch requests forwarded to new owners.
    pub forwarded: u64,
    /// New-epoch requests held until their key group's state and seal were in.
    pub held: u64,
    /// New-epoch requests held at the upstream gate.
    pub gated: u64,
    /// Inputs admitted while it was in progress.
    pub admitted_during: u64,
}

/// Steers a run. Every method has a do-nothing default.
pub trait Controller {
    /// The input rate to offer at `t_s` seconds (`None`: as fast as the cluster takes it).
    fn rate_per_s(&mut self, _t_s: f64) -> Option<f64> {
        None
    }

    /// True once the run should stop admitting (a duration elapsed).
    fn done(&mut self, _t_s: f64, _admitted: u64) -> bool {
        false
    }

    /// Called often (every few admitted records, and while waiting) while no migration is in
    /// progress, with the records admitted so far; may ask for a move.
    fn poll(&mut self, _t_s: f64, _admitted: u64) -> Option<Move> {
        None
    }

    /// Called at the end of every interval; may ask for a move (dropped while a migration is
    /// in progress: ask again at the next interval).
    fn on_interval(&mut self, _view: &IntervalView) -> Option<Move> {
        None
    }

    /// A migration completed.
    fn on_migrated(&mut self, _record: &MigrationRecord) {}

    /// The driver listens at `addr` and every starting worker is ready (workers may join from
    /// now on, when the run reserved ids for them).
    fn on_listening(&mut self, _addr: std::net::SocketAddr) {}

    /// The reserved worker at index `worker` of the slots joined; the run now has `workers`.
    /// A later move may place key groups on it.
    fn on_joined(&mut self, _worker: usize, _workers: usize) {}

    /// The worker at index `worker` of the slots left the run (its key groups were moved to
    /// the others); the run now has `workers`. No move may place key groups on it again.
    fn on_left(&mut self, _worker: usize, _workers: usize) {}

    /// A worker of `among` this run started whose process has exited, and how (by default
    /// none: a cluster file's workers are not this process's children). A run waiting for a
    /// worker to connect or say it is ready stops waiting for one that is gone.
    fn exited(
        &mut self,
        _among: &[crate::transport::PeerId],
    ) -> Option<(crate::transport::PeerId, String)> {
        None
    }

    /// Testing (`--fault kill-worker=ID@PHASE`): kill worker `peer` outright (SIGKILL) now.
    fn kill_worker(&mut self, peer: crate::transport::PeerId) -> Result<(), String> {
        Err(format!(
            "this run cannot kill worker {peer} (it did not start it)"
        ))
    }

    /// The run resumed (`--resume`) from a checkpoint cut at `t_s` seconds of its clock,
    /// after `admitted` records: what fell due before then is done (the checkpoint's table
    /// holds the moves made), and the clock goes on from `t_s`.
    fn on_resumed(&mut self, _t_s: f64, _admitted: u64) {}

    /// Testing (`--fault stop-worker=ID@PHASE`): stop worker `peer` (SIGSTOP) now.
    fn stop_worker(&mut self, peer: crate::transport::PeerId) -> Result<(), String> {
        Err(format!(
            "this run cannot stop worker {peer} (it did not start it)"
        ))
    }

    /// Workers `lost` were lost: make them available again under the same ids (the run
    /// restarts its job from the last checkpoint once every worker is back). Every old
    /// process is gone before any new one starts, or a new worker could reach an old one
    /// (stopped, still listening) and lose that connection when it is killed. By default
    /// nothing: a cluster file's workers are restarted by their supervisor.
    fn replace_workers(&mut self, _lost: &[crate::transport::PeerId]) -> Result<(), String> {
        Ok(())
    }

    /// The run restarted at `t_s` seconds with the routing table of a checkpoint cut at
    /// `cut_s` seconds of the run's clock (`None`: the initial table — no checkpoint yet, or
    /// one whose table placed key groups on workers that joined): the moves completed after
    /// the cut are undone, and a migration under way was abandoned. A policy waiting for that
    /// migration's end stops waiting; a script makes its placement of now again.
    fn on_recovered(&mut self, _t_s: f64, _cut_s: Option<f64>) {}
}

/// A static run: the initial placement throughout.
pub struct Static;

impl Controller for Static {}

/// Workers (indices into the job's list) that own at least one key group under `routing`.
pub fn active_workers(routing: &RoutingTable, slots: &Slots) -> Vec<usize> {
    let mut used = vec![false; slots.workers.len()];
    for s in routing.owners() {
        if let Some(u) = used.get_mut(slots.worker_index(*s)) {
            *u = true;
        }
    }
    (0..used.len()).filter(|&i| used[i]).collect()
}

/// A small deterministic generator (SplitMix64): chaos needs reproducible choices, not
/// statistical quality.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed ^ 0x6A09_E667_F3BC_C909)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Chaos moves happen within the first this many tenths of the run's records (the rest of the
/// input then flows on the last placement).
const CHAOS_SPAN_TENTHS: u64 = 9;

/// `--chaos-migrations K`: K migrations at random moments (random admitted counts within the
/// run's records) to random worker counts and random placements — each operator's key groups
/// spread over a random subset of the chosen workers' slots, in contiguous runs or scattered.
/// Correctness must not hinge on the policy's choices.
pub struct Chaos {
    slots: Slots,
    operators: usize,
    /// Admitted counts at which to move, ascending.
    at: Vec<u64>,
    next: usize,
    rng: SplitMix,
}

impl Chaos {
    /// K moves spread over the first 90 % of `records` admissions.
    pub fn new(k: usize, records: u64, slots: Slots, operators: usize, seed: u64) -> Chaos {
        let mut rng = SplitMix::new(seed ^ 0xC4A0_5000);
        let span = (records / 10 * CHAOS_SPAN_TENTHS).max(1);
        let mut at: Vec<u64> = (0..k).map(|_| 1 + rng.next_u64() % span).collect();
        at.sort_unstable();
        Chaos {
            slots,
            operators,
            at,
            next: 0,
            rng,
        }
    }

    /// Moves still to make.
    pub fn remaining(&self) -> usize {
        self.at.len() - self.next
    }

    /// A random placement on a random number of workers.
    pub fn random_routing(&mut self) -> RoutingTable {
        let n = self.slots.workers.len();
        let workers = 1 + self.rng.below(n);
        // A random subset of `workers` worker indices.
        let mut idx: Vec<usize> = (0..n).collect();
        for i in 0..workers {
            let j = i + self.rng.below(n - i);
            idx.swap(i, j);
        }
        let chosen: Vec<Slot> = idx[..workers]
            .iter()
            .flat_map(|&w| (0..self.slots.executors).map(move |e| (w, e)))
            .map(|(w, e)| self.slots.slot(w, e))
            .collect();
        let kgs = KEY_GROUPS as usize;
        let rows = (0..self.operators)
            .map(|_| {
                let k = 1 + self.rng.below(chosen.len());
                let mut pick = chosen.clone();
                for i in 0..k {
                    let j = i + self.rng.below(pick.len() - i);
                    pick.swap(i, j);
                }
                let pick = &pick[..k];
                if self.rng.below(2) == 0 {
                    (0..kgs).map(|g| pick[g * k / kgs]).collect()
                } else {
                    (0..kgs).map(|_| pick[self.rng.below(k)]).collect()
                }
            })
            .collect();
        RoutingTable::from_rows(Epoch::INITIAL, rows).expect("every row has every key group")
    }
}

impl Controller for Chaos {
    fn on_resumed(&mut self, _t_s: f64, admitted: u64) {
        while self.next < self.at.len() && self.at[self.next] <= admitted {
            self.next += 1;
            // Drawn and dropped: the moves after the cut are those of the uninterrupted run.
            let _ = self.random_routing();
        }
    }

    fn poll(&mut self, _t_s: f64, admitted: u64) -> Option<Move> {
        if self.next < self.at.len() && admitted >= self.at[self.next] {
            self.next += 1;
            return Some(Move {
                routing: self.random_routing(),
                reason: "chaos".into(),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_moves_are_valid_and_reproducible() {
        let slots = Slots {
            workers: vec![1, 2, 3],
            executors: 2,
        };
        let mut a = Chaos::new(5, 1000, slots.clone(), 4, 7);
        let mut b = Chaos::new(5, 1000, slots.clone(), 4, 7);
        let mut moves = 0;
        for i in 0..1000 {
            let (x, y) = (a.poll(0.0, i), b.poll(0.0, i));
            assert_eq!(x, y);
            if let Some(m) = x {
                slots.check(&m.routing, 4).unwrap();
                assert!(!active_workers(&m.routing, &slots).is_empty());
                moves += 1;
            }
        }
        assert_eq!(moves, 5);
        assert_eq!(a.remaining(), 0);
    }
}
