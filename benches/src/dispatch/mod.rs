//! The remote half of `clasp bench dispatch`: what a remote chained request costs through the
//! real transport (io_uring, ring-format batches, credits) between two transports on loopback,
//! against a peer baseline a user would write by hand (tokio/epoll TCP, postcard, one write per
//! batch, buffers reused).
//!
//! CPU per request is user + system CPU of the whole process (`getrusage(RUSAGE_SELF)`: both
//! sides' threads and io_uring's kernel workers) over the measured section only, divided by the
//! requests, at saturation: the sender appends as fast as the transport takes requests. Each
//! figure is the median of interleaved repetitions (every configuration once per round), so a
//! burst of load from other work on the machine hits all of them alike.
//!
//! Both paths do the same work per request: the sender writes a request (a 48-byte header, an
//! 8-byte key, a 16-byte payload) and hands it to its batch; the receiver validates it and
//! copies it once into a shared-memory-layout ring (`shmring` on the heap), which it drains.
//!
//! The parts: `harness.rs` (what every run shares), `transport.rs` (the runs through the real
//! transport), `baseline.rs` (the tokio + postcard peer) and `costs.rs` (β and γ alone, briefly,
//! for `clasp calibrate`); this file runs them in interleaved rounds and reports the medians.
//! The baseline is built only with the `baselines` feature (the default binary does not link
//! tokio or postcard); without it its figures are absent, not made up.

#[cfg(feature = "baselines")]
mod baseline;
mod costs;
mod floor;
mod harness;
mod transport;

pub use costs::{RemoteCosts, default_batch_requests, remote_costs};
pub use harness::process_cpu_s;

use clasp_dataplane::request::{Request, frame_len};
use harness::{KEY_BYTES, PAYLOAD_BYTES, Sends, emit, median};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use transport::{gamma_run, remote_latency_us, remote_run};

/// Batch sizes of β.
pub const BATCH_SIZES: [usize; 4] = [1, 8, 32, 128];
/// Batch sizes of β measured again with one batch a send (what the tokio baseline does, and
/// what the transport did before it sent batches that fill behind a send together).
pub const ONE_SEND_BATCH_SIZES: [usize; 2] = [1, 32];
/// Destination counts of γ.
pub const DESTINATIONS: [usize; 3] = [1, 2, 4];
/// How often γ's sender flushes a batch to every destination (µs): once per millisecond, as
/// a live worker's executor does at moderate load (one batch per destination per turn that
/// produced output; the default job's workers sent 500–1 500 batches a second to each peer).
/// What a destination costs is mostly its batches' sends and its receiver's wake-ups, so γ
/// scales with this: flushed every 100 µs, γ came out 7–9× what live runs learn.
pub const GAMMA_FLUSH_US: u64 = 1_000;

/// How much to measure.
#[derive(Clone, Debug)]
pub struct DispatchOpts {
    /// Requests per measured run at batch ≥ 32 (smaller batches use fewer; see `requests_for`).
    pub requests: u64,
    /// Interleaved repetitions (the median is reported).
    pub repetitions: usize,
    /// Round trips for the latency.
    pub round_trips: usize,
    /// Request rate for γ (requests per second, spread over the destinations).
    pub gamma_rate_per_s: u64,
    /// Length of one γ run.
    pub gamma_run_ms: u64,
    /// γ's sender flushes every destination's batch this often (µs; [`GAMMA_FLUSH_US`]).
    pub gamma_flush_us: u64,
}

impl Default for DispatchOpts {
    fn default() -> Self {
        DispatchOpts {
            requests: 1_000_000,
            repetitions: 5,
            round_trips: 5_000,
            gamma_rate_per_s: 200_000,
            gamma_run_ms: 500,
            gamma_flush_us: GAMMA_FLUSH_US,
        }
    }
}

impl DispatchOpts {
    /// A fast configuration for tests.
    pub fn quick() -> Self {
        DispatchOpts {
            requests: 20_000,
            repetitions: 1,
            round_trips: 200,
            gamma_rate_per_s: 50_000,
            gamma_run_ms: 50,
            gamma_flush_us: GAMMA_FLUSH_US,
        }
    }

    fn requests_for(&self, batch: usize) -> u64 {
        // Batch 1 pays a send per request: a quarter of the requests keeps runs short.
        if batch < 8 {
            (self.requests / 4).max(1000)
        } else {
            self.requests
        }
    }
}

/// The remote half of `clasp bench dispatch --json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoteDispatch {
    /// The machine it ran on ([`crate::machine::description`]).
    #[serde(default)]
    pub machine: String,
    /// CPU ns per remote chained request (both sides) by batch size, as the transport sends
    /// by default: batches that fill while a send is in flight go out together.
    pub remote_ns_per_request: BTreeMap<String, f64>,
    /// Batches per send in those runs, by batch size (median).
    #[serde(default)]
    pub remote_batches_per_send: BTreeMap<String, f64>,
    /// CPU ns per remote chained request by batch size ([`ONE_SEND_BATCH_SIZES`]) with one
    /// batch a send (`Limits::send_bytes_max` at the batch).
    #[serde(default)]
    pub remote_one_send_per_batch_ns_per_request: BTreeMap<String, f64>,
    /// Added CPU ns per request for each extra remote destination at the same total rate
    /// (slope over 1, 2, 4 destinations).
    pub per_destination_ns: f64,
    /// CPU ns per request by number of destinations at `gamma_rate_per_s`.
    pub per_destination_detail_ns: BTreeMap<String, f64>,
    /// The total request rate of the γ runs.
    pub gamma_rate_per_s: u64,
    /// How often the γ runs' sender flushed a batch to every destination (µs).
    #[serde(default)]
    pub gamma_flush_us: u64,
    /// The tokio + postcard baseline, CPU ns per request, by batch size (empty in a build
    /// without the `baselines` feature).
    pub baseline_remote_ns_per_request: BTreeMap<String, f64>,
    /// One-way latency of one request (half a round trip), median, µs: network threads on
    /// cores of their own, waiting in the kernel at once (the `park` row of `remote_idle`).
    pub remote_one_way_us: f64,
    /// Per idle policy of the network threads: one-way latency (µs; median, min, max over
    /// the repetitions).
    pub remote_idle: Vec<RemoteIdleRow>,
    /// The same for the baseline, µs (None in a build without the `baselines` feature).
    pub baseline_one_way_us: Option<f64>,
    /// The floor: plain loopback TCP between two pinned, busy-polling threads, one-way µs
    /// (median, min, max over the repetitions; None where loopback TCP could not be used).
    pub tcp_floor_one_way_us: Option<[f64; 3]>,
    /// Receive path the transport used ("multishot" or "plain").
    pub receive_path: String,
    /// Repetitions each median is over.
    pub repetitions: usize,
}

/// One idle policy's remote hop.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RemoteIdleRow {
    /// The policy, as `--idle` takes it.
    pub policy: String,
    /// One-way latency, µs: median over the repetitions.
    pub one_way_us: f64,
    /// Lowest.
    pub one_way_us_min: f64,
    /// Highest.
    pub one_way_us_max: f64,
}

/// Checks that both paths deliver every request intact before anything is timed.
fn check() {
    assert!(remote_run(8, 2_000, Sends::Coalesced).ns.is_finite());
    assert!(remote_run(8, 2_000, Sends::OnePerBatch).ns.is_finite());
    assert!(baseline_run(8, 2_000).is_none_or(f64::is_finite));
    let frame = {
        let mut f = [0u8; frame_len(KEY_BYTES, PAYLOAD_BYTES)];
        emit(7, &mut f);
        f
    };
    assert!(Request::parse(&frame).is_ok());
}

/// The baseline's CPU ns per request at `batch`, in a build with the `baselines` feature.
fn baseline_run(batch: usize, requests: u64) -> Option<f64> {
    #[cfg(feature = "baselines")]
    return Some(baseline::run(batch, requests));
    #[cfg(not(feature = "baselines"))]
    {
        let _ = (batch, requests);
        None
    }
}

/// The baseline's one-way latency (µs), in a build with the `baselines` feature.
fn baseline_latency_us(round_trips: usize) -> Option<f64> {
    #[cfg(feature = "baselines")]
    return Some(baseline::latency_us(round_trips));
    #[cfg(not(feature = "baselines"))]
    {
        let _ = round_trips;
        None
    }
}

/// The batch-32 comparison alone (for tuning): `reps` interleaved pairs of a transport run and
/// a baseline run at `batch`; returns (transport ns/request, baseline ns/request), every run.
/// `CLASP_DISPATCH_ONLY=transport` (or `baseline`) runs one side only, for profiling.
#[cfg(feature = "baselines")]
pub fn compare(batch: usize, requests: u64, reps: usize) -> (Vec<f64>, Vec<f64>) {
    check();
    let (mut t, mut b) = (Vec::new(), Vec::new());
    let only = std::env::var("CLASP_DISPATCH_ONLY").unwrap_or_default();
    for _ in 0..reps {
        if only != "baseline" {
            t.push(remote_run(batch, requests, Sends::Coalesced).ns);
        }
        if only != "transport" {
            b.push(baseline::run(batch, requests));
        }
    }
    (t, b)
}

/// The one-way latency alone (transport, then baseline), µs.
#[cfg(feature = "baselines")]
pub fn latency(round_trips: usize) -> (f64, f64) {
    (
        remote_latency_us(round_trips, std::time::Duration::ZERO),
        baseline::latency_us(round_trips),
    )
}

/// Runs the remote half of the dispatch benchmark.
pub fn run(opts: &DispatchOpts) -> RemoteDispatch {
    check();
    let mut remote: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut per_send: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut one_send: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut base: Vec<f64> = Vec::new();
    let mut gamma: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut multishot = false;
    let policies = crate::dispatch_idle::idle_policies();
    let mut one_way: Vec<Vec<f64>> = vec![Vec::new(); policies.len()];
    let mut floor_us: Vec<f64> = Vec::new();
    for _ in 0..opts.repetitions {
        match floor::tcp_floor_one_way_us(opts.round_trips) {
            Ok(us) => floor_us.push(us),
            Err(e) => tracing::warn!("dispatch bench: the loopback TCP floor: {e}"),
        }
        for (p, v) in policies.iter().zip(&mut one_way) {
            v.push(remote_latency_us(opts.round_trips, p.network_spin()));
        }
        for &b in &BATCH_SIZES {
            let run = remote_run(b, opts.requests_for(b), Sends::Coalesced);
            multishot = run.multishot;
            remote.entry(b).or_default().push(run.ns);
            per_send.entry(b).or_default().push(run.batches_per_send);
        }
        for &b in &ONE_SEND_BATCH_SIZES {
            let run = remote_run(b, opts.requests_for(b), Sends::OnePerBatch);
            one_send.entry(b).or_default().push(run.ns);
        }
        base.extend(baseline_run(32, opts.requests));
        for &d in &DESTINATIONS {
            gamma.entry(d).or_default().push(gamma_run(
                d,
                opts.gamma_rate_per_s,
                opts.gamma_run_ms,
                opts.gamma_flush_us,
            ));
        }
    }
    let detail: BTreeMap<String, f64> = gamma
        .into_iter()
        .map(|(d, v)| (d.to_string(), median(v)))
        .collect();
    let g1 = detail.get("1").copied().unwrap_or(f64::NAN);
    let g4 = detail.get("4").copied().unwrap_or(f64::NAN);
    let remote_idle: Vec<RemoteIdleRow> = (policies.iter().zip(one_way))
        .map(|(p, v)| {
            let [one_way_us, one_way_us_min, one_way_us_max] = spread(v).unwrap_or([f64::NAN; 3]);
            RemoteIdleRow {
                policy: p.to_string(),
                one_way_us,
                one_way_us_min,
                one_way_us_max,
            }
        })
        .collect();
    let medians = |m: BTreeMap<usize, Vec<f64>>| -> BTreeMap<String, f64> {
        m.into_iter()
            .map(|(b, v)| (b.to_string(), median(v)))
            .collect()
    };
    RemoteDispatch {
        remote_ns_per_request: medians(remote),
        remote_batches_per_send: medians(per_send),
        remote_one_send_per_batch_ns_per_request: medians(one_send),
        per_destination_ns: (g4 - g1) / 3.0,
        per_destination_detail_ns: detail,
        gamma_rate_per_s: opts.gamma_rate_per_s,
        gamma_flush_us: opts.gamma_flush_us,
        baseline_remote_ns_per_request: (!base.is_empty())
            .then(|| ("32".to_string(), median(base)))
            .into_iter()
            .collect(),
        remote_one_way_us: remote_idle[0].one_way_us,
        remote_idle,
        baseline_one_way_us: baseline_latency_us(opts.round_trips),
        tcp_floor_one_way_us: spread(floor_us),
        receive_path: if multishot {
            "multishot".into()
        } else {
            "plain".into()
        },
        repetitions: opts.repetitions,
        machine: crate::machine::description(),
    }
}

/// Median, lowest and highest (None for no value).
fn spread(v: Vec<f64>) -> Option<[f64; 3]> {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!v.is_empty()).then(|| [median(v), lo, hi])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remote_dispatch_bench_runs_and_reports_every_field() {
        let r = run(&DispatchOpts::quick());
        assert_eq!(r.remote_ns_per_request.len(), 4);
        assert_eq!(r.remote_batches_per_send.len(), 4);
        assert!(r.remote_batches_per_send.values().all(|v| *v >= 1.0));
        assert_eq!(r.remote_one_send_per_batch_ns_per_request.len(), 2);
        assert!(
            r.remote_one_send_per_batch_ns_per_request
                .values()
                .all(|v| v.is_finite() && *v > 0.0)
        );
        assert!(
            r.remote_ns_per_request
                .values()
                .all(|v| v.is_finite() && *v > 0.0)
        );
        // The baseline is there exactly when it was built.
        assert_eq!(
            r.baseline_remote_ns_per_request.contains_key("32"),
            cfg!(feature = "baselines")
        );
        assert_eq!(r.baseline_one_way_us.is_some(), cfg!(feature = "baselines"));
        assert!(
            r.baseline_remote_ns_per_request.values().all(|v| *v > 0.0),
            "{:?}",
            r.baseline_remote_ns_per_request
        );
        assert!(r.remote_one_way_us > 0.0);
        assert_eq!(r.remote_idle.len(), 2);
        assert!(r.remote_idle.iter().all(|row| row.one_way_us > 0.0));
        let floor = r.tcp_floor_one_way_us.expect("loopback TCP works here");
        assert!(
            floor[0] > 0.0 && floor[1] <= floor[0] && floor[0] <= floor[2],
            "{floor:?}"
        );
        let json = serde_json::to_value(&r).expect("json");
        assert!(json.get("per_destination_ns").is_some());
    }
}
