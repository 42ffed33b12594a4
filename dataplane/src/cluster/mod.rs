//! A static cluster: several worker processes and one driver running one app together.
//!
//! The **driver** ([`driver::run_driver`]) is the ingress and the home of every root's latency
//! ledger: it sends each root request over the transport to the worker that owns the root's
//! key group, applies the ledger deltas the workers send back, and runs the end of the stream.
//! Each **worker** ([`worker::run_cluster_worker`]) runs E executor threads over its shared-memory
//! segment under the same [`Coordinator`](crate::runtime::coordinator) as a worker on its own,
//! plus one network thread that owns the worker's [`Transport`](crate::transport::Transport):
//! it moves remote-bound request frames from the executors' `net_out` rings into
//! per-destination batches, delivers received frames into the owning executor's ring, and is
//! the coordinator's front (it passes the driver's end-of-stream, plan and stop messages to the
//! coordinator and the executors' reports to the driver). A cluster worker has no local ingress
//! and no local ledger, so a separate coordinator thread would only add a hop on a machine that
//! has few cores already.
//!
//! # The run
//! 1. The driver connects to every worker and sends a [`Job`] (the app, the executors per
//!    worker, how key groups are spread, and the driver's own address). Each worker builds the
//!    same routing table from it (`routing::spread` over the workers in cluster-file
//!    order), connects back to the driver, and answers `READY` once its links to the driver
//!    and to every other worker are up (or `ERROR` with the reason).
//! 2. The driver admits the input, at most `max_in_flight` tracked roots open at a time.
//!    Workers send ledger deltas as control messages, batched per network-thread turn.
//! 3. When every tracked root completed, the driver checks global quiescence (below), then
//!    for each operator in topological order: `EOS` to every worker, wait for every worker's
//!    `EOS_ACK` (all its executors flushed that operator), then quiescence again — exactly as
//!    the oracle drains between flushes.
//! 4. `FINISH`: each worker stops its executors and sends a [`WorkerSummary`]; then `BYE`.
//!
//! **Quiescence** is detected with counters (Mattern's four-counter method): on a `PROBE`, each
//! worker answers whether it is locally idle (executors parked, no overflow, every ring empty)
//! and its cumulative per-peer counts of request frames handed to the transport and of frames
//! delivered into its rings. The system is quiescent when, in two consecutive probe rounds,
//! every worker is idle, every count sent from A to B equals the count B received from A, and
//! no count changed between the rounds.
//!
//! A worker exits when the driver says `BYE`, or reports and exits when the driver's connection
//! is lost; the driver fails the run (with the worker's reason) when a worker's connection
//! fails or is lost.

pub mod control;
pub mod driver;
pub mod worker;

use crate::routing::Spread;
use crate::transport::PeerId;
use clasp_operators::OperatorSummary;
use clasp_operators::digest::Digest;

/// The driver's peer id. Workers' ids are 1..=`MAX_PEER_ID`.
pub const DRIVER_ID: PeerId = 0;

/// Control message kinds, driver → worker.
pub mod kind {
    /// A [`super::Job`].
    pub const JOB: u16 = 1;
    /// End of stream for one operator (`u16`).
    pub const EOS: u16 = 2;
    /// A quiescence probe (`u64` round).
    pub const PROBE: u16 = 3;
    /// Stop the executors and send the summary.
    pub const FINISH: u16 = 4;
    /// Exit.
    pub const BYE: u16 = 5;
    /// Ready for input (worker → driver).
    pub const READY: u16 = 10;
    /// Ledger deltas, `DELTA_BYTES` each (worker → driver).
    pub const DELTAS: u16 = 11;
    /// Every executor flushed an operator (`u16`) (worker → driver).
    pub const EOS_ACK: u16 = 12;
    /// The answer to a probe: a [`super::Status`] (worker → driver).
    pub const STATUS: u16 = 13;
    /// A [`super::WorkerSummary`] (worker → driver).
    pub const SUMMARY: u16 = 14;
    /// A fault, UTF-8 text (worker → driver).
    pub const ERROR: u16 = 15;
    /// Migration plans for a worker's slots (`migrate::encode_plans`) (driver → worker).
    pub const PLAN: u16 = 6;
    /// A slot completed its part of a migration (`migrate::encode_report`) (worker → driver).
    pub const MIGRATED: u16 = 16;
    /// A slot in a migration says what it waits for (`migrate::encode_progress`).
    pub const PROGRESS: u16 = 17;
    /// The worker's cumulative [`super::Counters`], every interval (worker → driver).
    pub const COUNTERS: u16 = 18;
}

/// A worker's cumulative counters (the planner differentiates consecutive ones into the
/// per-interval metrics its capacity model reads).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// The worker.
    pub worker: PeerId,
    /// When they were read (the worker's CLOCK_MONOTONIC; only differences are used).
    pub t_ns: u64,
    /// Per operator: requests processed.
    pub processed: Vec<u64>,
    /// Per operator: execution ns (sampled, scaled).
    pub exec_ns: Vec<u64>,
    /// `[from * ops + to]`: local chained requests.
    pub edges_local: Vec<u64>,
    /// `[from * ops + to]`: remote chained requests.
    pub edges_remote: Vec<u64>,
    /// Executor busy ns, summed.
    pub busy_ns: u64,
    /// Per peer: request and control frames handed to the transport, cumulative (the planner
    /// counts the distinct destinations of an interval from their differences).
    pub sent_to: Vec<(PeerId, u64)>,
    /// Bytes waiting in the executors' inbound rings now.
    pub queued_bytes: u64,
    /// Frames read by the executors.
    pub frames_in: u64,
}

impl Counters {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.worker)
            .u64(self.t_ns)
            .u64s(&self.processed)
            .u64s(&self.exec_ns)
            .sparse(&self.edges_local)
            .sparse(&self.edges_remote)
            .u64(self.busy_ns)
            .u32(self.sent_to.len() as u32);
        for (p, n) in &self.sent_to {
            w.u32(*p).u64(*n);
        }
        w.u64(self.queued_bytes).u64(self.frames_in);
        w.0
    }

    /// Reads the wire form (never panics).
    pub fn decode(b: &[u8]) -> Result<Counters, String> {
        let mut r = Reader::new(b);
        Ok(Counters {
            worker: r.u32()?,
            t_ns: r.u64()?,
            processed: r.u64s()?,
            exec_ns: r.u64s()?,
            edges_local: r.sparse()?,
            edges_remote: r.sparse()?,
            busy_ns: r.u64()?,
            sent_to: {
                let n = r.len()?;
                (0..n)
                    .map(|_| Ok((r.u32()?, r.u64()?)))
                    .collect::<Result<_, String>>()?
            },
            queued_bytes: r.u64()?,
            frames_in: r.u64()?,
        })
    }
}

/// Ledger deltas per `DELTAS` message (24 bytes each: 48 KiB, under the 64 KiB body limit).
pub const DELTAS_PER_MESSAGE: usize = 2048;

const _: () = assert!(
    DELTAS_PER_MESSAGE * crate::runtime::ledger::DELTA_BYTES
        <= crate::transport::wire::MAX_CONTROL_BODY_BYTES
);

/// What the driver tells each worker to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The app's name.
    pub app_name: String,
    /// The app's TOML definition (empty: the built-in app of that name).
    pub app_toml: String,
    /// Executors on every worker.
    pub executors: u16,
    /// How key groups are spread.
    pub spread: Spread,
    /// Capacity of each request ring.
    pub ring_bytes: u64,
    /// Pin executors to cores.
    pub pin: bool,
    /// The workers, in the order the routing table spreads over.
    pub workers: Vec<PeerId>,
    /// The driver's id and the address workers connect back to.
    pub driver: PeerId,
    /// `ip:port`.
    pub driver_addr: String,
    /// How often workers send their [`Counters`] (0: never).
    pub interval_ms: u32,
}

/// A worker's answer to a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The probe round answered.
    pub round: u64,
    /// Executors parked, no overflow, every ring empty, nothing held.
    pub idle: bool,
    /// Per peer: (peer, request frames handed to the transport, frames delivered to rings).
    pub counts: Vec<(PeerId, u64, u64)>,
}

/// What one worker ran: per-operator summaries (to compare with the oracle), metrics, faults.
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// `[from * ops + to]`: local chained requests.
    pub edges_local: Vec<u64>,
    /// `[from * ops + to]`: remote chained requests.
    pub edges_remote: Vec<u64>,
    /// Named counters (executors' and the transport's).
    pub totals: Vec<(String, u64)>,
    /// Faults seen by the worker.
    pub errors: Vec<String>,
}

/// A little-endian writer for control bodies.
#[derive(Default)]
pub(crate) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub fn u64s(&mut self, v: &[u64]) -> &mut Self {
        self.u32(v.len() as u32);
        for x in v {
            self.u64(*x);
        }
        self
    }
    /// A mostly-zero vector: its length, then (index, value) of the non-zero entries.
    pub fn sparse(&mut self, v: &[u64]) -> &mut Self {
        self.u32(v.len() as u32);
        let nz: Vec<(usize, u64)> = v.iter().copied().enumerate().filter(|e| e.1 != 0).collect();
        self.u32(nz.len() as u32);
        for (i, x) in nz {
            self.u32(i as u32).u64(x);
        }
        self
    }
}

/// A bounds-checked reader of control bodies: every read of peer input is checked.
pub(crate) struct Reader<'a> {
    b: &'a [u8],
}

/// Longest sparse vector (an operator × operator matrix of the largest app).
const MAX_SPARSE_ITEMS: usize = 1 << 20;
/// Most items in one list of a control body (a bound before anything is allocated).
const MAX_LIST_ITEMS: usize = 1 << 16;

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Reader { b }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() < n {
            return Err(format!(
                "control body truncated: needed {n} bytes, {} left",
                self.b.len()
            ));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        self.take(n)
    }
    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    pub fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub fn len(&mut self) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n > MAX_LIST_ITEMS.max(self.b.len()) {
            return Err(format!("list of {n} items in a control body"));
        }
        Ok(n)
    }
    pub fn str(&mut self) -> Result<String, String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "string is not UTF-8".to_string())
    }
    pub fn u64s(&mut self) -> Result<Vec<u64>, String> {
        let n = self.len()?;
        (0..n).map(|_| self.u64()).collect()
    }
    /// See [`Writer::sparse`].
    pub fn sparse(&mut self) -> Result<Vec<u64>, String> {
        let n = self.u32()? as usize;
        if n > MAX_SPARSE_ITEMS {
            return Err(format!("a vector of {n} items in a control body"));
        }
        let mut v = vec![0u64; n];
        let k = self.len()?;
        for _ in 0..k {
            let i = self.u32()? as usize;
            let x = self.u64()?;
            *v.get_mut(i)
                .ok_or_else(|| format!("index {i} of a {n}-item vector"))? = x;
        }
        Ok(v)
    }
}

fn spread_code(s: Spread) -> u8 {
    match s {
        Spread::Even => 0,
        Spread::Alternate => 1,
    }
}

impl Job {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(&self.app_name)
            .str(&self.app_toml)
            .u16(self.executors)
            .u8(spread_code(self.spread))
            .u64(self.ring_bytes)
            .u8(self.pin as u8)
            .u32(self.workers.len() as u32);
        for p in &self.workers {
            w.u32(*p);
        }
        w.u32(self.driver)
            .str(&self.driver_addr)
            .u32(self.interval_ms);
        w.0
    }

    /// Reads the wire form (never panics).
    pub fn decode(b: &[u8]) -> Result<Job, String> {
        let mut r = Reader::new(b);
        let app_name = r.str()?;
        let app_toml = r.str()?;
        let executors = r.u16()?;
        let spread = match r.u8()? {
            0 => Spread::Even,
            1 => Spread::Alternate,
            s => return Err(format!("unknown spread {s}")),
        };
        let ring_bytes = r.u64()?;
        let pin = r.u8()? != 0;
        let n = r.len()?;
        let workers = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
        Ok(Job {
            app_name,
            app_toml,
            executors,
            spread,
            ring_bytes,
            pin,
            workers,
            driver: r.u32()?,
            driver_addr: r.str()?,
            interval_ms: r.u32()?,
        })
    }
}

impl Status {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u64(self.round)
            .u8(self.idle as u8)
            .u32(self.counts.len() as u32);
        for (p, s, r) in &self.counts {
            w.u32(*p).u64(*s).u64(*r);
        }
        w.0
    }

    /// Reads the wire form (never panics).
    pub fn decode(b: &[u8]) -> Result<Status, String> {
        let mut r = Reader::new(b);
        let round = r.u64()?;
        let idle = r.u8()? != 0;
        let n = r.len()?;
        let counts = (0..n)
            .map(|_| Ok((r.u32()?, r.u64()?, r.u64()?)))
            .collect::<Result<_, String>>()?;
        Ok(Status {
            round,
            idle,
            counts,
        })
    }
}

fn write_digest(w: &mut Writer, d: &Digest) {
    w.str(&d.to_hex());
}

fn read_digest(r: &mut Reader) -> Result<Digest, String> {
    let h = r.str()?;
    Digest::from_hex(&h).ok_or_else(|| format!("bad digest {h:?}"))
}

impl WorkerSummary {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u32(self.worker).u32(self.summaries.len() as u32);
        for s in &self.summaries {
            w.u64(s.processed).u64(s.malformed);
            write_digest(&mut w, &s.state);
            write_digest(&mut w, &s.inputs);
            write_digest(&mut w, &s.outputs);
        }
        w.u64s(&self.state_keys).u32(self.malformed.len() as u32);
        for m in &self.malformed {
            w.u32(m.len() as u32);
            for (reason, n) in m {
                w.str(reason).u64(*n);
            }
        }
        w.u64s(&self.processed)
            .u64s(&self.exec_ns)
            .u64s(&self.edges_local)
            .u64s(&self.edges_remote)
            .u32(self.totals.len() as u32);
        for (k, v) in &self.totals {
            w.str(k).u64(*v);
        }
        w.u32(self.errors.len() as u32);
        for e in &self.errors {
            w.str(e);
        }
        w.0
    }

    /// Reads the wire form (never panics).
    pub fn decode(b: &[u8]) -> Result<WorkerSummary, String> {
        let mut r = Reader::new(b);
        let worker = r.u32()?;
        let n = r.len()?;
        let mut summaries = Vec::with_capacity(n);
        for _ in 0..n {
            summaries.push(OperatorSummary {
                processed: r.u64()?,
                malformed: r.u64()?,
                state: read_digest(&mut r)?,
                inputs: read_digest(&mut r)?,
                outputs: read_digest(&mut r)?,
            });
        }
        let state_keys = r.u64s()?;
        let n = r.len()?;
        let mut malformed = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.len()?;
            malformed.push(
                (0..k)
                    .map(|_| Ok((r.str()?, r.u64()?)))
                    .collect::<Result<_, String>>()?,
            );
        }
        let processed = r.u64s()?;
        let exec_ns = r.u64s()?;
        let edges_local = r.u64s()?;
        let edges_remote = r.u64s()?;
        let n = r.len()?;
        let totals = (0..n)
            .map(|_| Ok((r.str()?, r.u64()?)))
            .collect::<Result<_, String>>()?;
        let n = r.len()?;
        let errors = (0..n).map(|_| r.str()).collect::<Result<_, _>>()?;
        Ok(WorkerSummary {
            worker,
            summaries,
            state_keys,
            malformed,
            processed,
            exec_ns,
            edges_local,
            edges_remote,
            totals,
            errors,
        })
    }
}

/// `u16` body (EOS, EOS_ACK).
pub(crate) fn read_u16(b: &[u8]) -> Result<u16, String> {
    Reader::new(b).u16()
}

/// `u64` body (PROBE).
pub(crate) fn read_u64(b: &[u8]) -> Result<u64, String> {
    Reader::new(b).u64()
}

/// CLOCK_MONOTONIC in ns (the clock of admission times and the ledger).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let job = Job {
            app_name: "wc".into(),
            app_toml: String::new(),
            executors: 2,
            spread: Spread::Alternate,
            ring_bytes: 1 << 16,
            pin: false,
            workers: vec![1, 2, 3],
            driver: DRIVER_ID,
            driver_addr: "127.0.0.1:9".into(),
            interval_ms: 250,
        };
        let c = Counters {
            worker: 3,
            t_ns: 9,
            processed: vec![1, 2],
            exec_ns: vec![3, 4],
            edges_local: vec![0; 4],
            edges_remote: vec![5, 0, 0, 5],
            busy_ns: 6,
            sent_to: vec![(2, 7)],
            queued_bytes: 8,
            frames_in: 9,
        };
        assert_eq!(Counters::decode(&c.encode()).unwrap(), c);
        assert_eq!(Job::decode(&job.encode()).unwrap(), job);
        let st = Status {
            round: 7,
            idle: true,
            counts: vec![(0, 1, 2), (3, 4, 5)],
        };
        assert_eq!(Status::decode(&st.encode()).unwrap(), st);
        let ws = WorkerSummary {
            worker: 2,
            summaries: vec![OperatorSummary::default(); 2],
            state_keys: vec![1, 2],
            malformed: vec![vec![("x".into(), 3)], vec![]],
            processed: vec![5, 6],
            exec_ns: vec![7, 8],
            edges_local: vec![0; 4],
            edges_remote: vec![1; 4],
            totals: vec![("a".into(), 1)],
            errors: vec!["e".into()],
        };
        assert_eq!(WorkerSummary::decode(&ws.encode()).unwrap(), ws);
        for bytes in [&[][..], &[1, 2, 3][..], &[0xFF; 40][..]] {
            assert!(Job::decode(bytes).is_err());
            assert!(WorkerSummary::decode(bytes).is_err());
        }
    }
}
