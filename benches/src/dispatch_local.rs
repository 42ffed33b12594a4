//! `clasp bench dispatch --local`: what a local chained request costs on this machine,
//! measured through the real worker path on SYN (ten no-op operators in a line, so dispatch
//! is nearly all there is).
//!
//! - `local_ns_per_request` (α): executor CPU time (user + system of the executor threads,
//!   `CLOCK_THREAD_CPUTIME_ID`) minus the operators' measured execution time, divided by the
//!   local chained requests. It covers route + write into the ring + publish at the sender,
//!   and pop + parse at the receiver, plus the per-request metrics and latency tracking. One
//!   executor: every hop goes through its own shared-memory ring, the cost without cross-core
//!   traffic (the ingress and the coordinator have the other core).
//! - `cross_core_ns_per_request`: the same with two executors and operators alternating
//!   between them, so every hop crosses cores (on a 2-core machine the ingress then shares a
//!   core: expect noise).
//! - `tracking_ns_per_request`: α with every root tracked minus α with 1 in [`SPARSE_SAMPLE`]
//!   tracked — what exact end-to-end latency tracking costs per request: the median over the
//!   repetitions of each one's difference, their range in `tracking_ns_per_request_spread`.
//!   The in-flight bound counts tracked roots, so the sparse run's bound is divided by the same
//!   factor and both keep about 4096 roots in flight (with 1 in 2^20 tracked and the bound
//!   unchanged, the ingress flooded the rings: 87 % of the chained requests went through the
//!   overflow queue and the sparse run came out dearer). Only a tree's leaves report, so a SYN
//!   tree reports once in ten requests; the text says when the range spans zero.
//! - `idle` (one row per idle policy, `park` and `spin:50`, side by side in every
//!   repetition), with the two executors pinned to two cores ("dedicated cores"; on a 2-core
//!   machine CPUs 0 and 1): `one_way_ns`, the latency a hop adds at low load — the median
//!   end-to-end latency of a ten-stage SYN tree minus that of a two-stage one, both at a low
//!   rate on two alternating executors, over the eight hops between (so the ingress's hand-off,
//!   the first wake-ups and the report to the coordinator cancel out); and α with that policy
//!   (one executor, pinned; its idle spin left out of its CPU, as the planner leaves it out).
//!   `local_one_way_ns` is the `park` row's.
//!
//! Medians of interleaved repetitions, with the spread.

use crate::dispatch_idle::{IdleRow, idle_policies, idle_sample, idle_table};
use clasp_dataplane::routing::Spread;
use clasp_dataplane::runtime::ingress::{IngressConfig, run_ingress};
use clasp_dataplane::runtime::{IdlePolicy, LocalConfig, LocalReport, run_local_worker};
use clasp_operators::{AppSpec, Registry, apps};
use serde::Serialize;
use std::sync::Arc;

/// Settings.
#[derive(Debug, Clone)]
pub struct LocalDispatchConfig {
    /// SYN records per throughput run.
    pub records: u64,
    /// Interleaved repetitions.
    pub repetitions: u32,
}

/// A median with its spread.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread3 {
    /// Median.
    pub median: f64,
    /// Lowest.
    pub min: f64,
    /// Highest.
    pub max: f64,
}

impl Spread3 {
    pub(crate) fn of(mut v: Vec<f64>) -> Spread3 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread3 {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct LocalDispatchReport {
    /// CPU, cores, kernel.
    pub machine: String,
    /// α: CPU ns per local chained request, one executor (median).
    pub local_ns_per_request: f64,
    /// Its spread.
    pub local_ns_per_request_spread: Spread3,
    /// CPU ns per local chained request, two executors, every hop across cores.
    pub cross_core_ns_per_request: Spread3,
    /// What exact latency tracking adds per request (median of the repetitions' differences).
    pub tracking_ns_per_request: f64,
    /// The repetitions' differences.
    pub tracking_ns_per_request_spread: Spread3,
    /// One-way latency of a hop at low load, executors parking (the `park` row of `idle`).
    pub local_one_way_ns: f64,
    /// Per idle policy: hop latency at low load and α, executors on cores of their own.
    pub idle: Vec<IdleRow>,
    /// What the per-request metrics cost: the counter updates and clock reads an executor
    /// makes for one request, timed alone in a loop.
    pub metrics_ns_per_request: f64,
    /// SYN records per second on one worker with one executor.
    pub syn_throughput_per_s: Spread3,
    /// SYN records per second on one worker with two executors (alternating).
    pub syn_throughput_two_executors_per_s: Spread3,
    /// Records per throughput run.
    pub records: u64,
    /// Repetitions.
    pub repetitions: u32,
}

fn segment_name() -> crate::segments::SegmentName {
    crate::segments::new_name("dispatch")
}

/// How a SYN run is deployed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deploy {
    pub(crate) executors: usize,
    pub(crate) spread: Spread,
    /// Pin the executors (executor e to the (e+1)-th allowed CPU, wrapping).
    pub(crate) pin: bool,
    pub(crate) idle: IdlePolicy,
}

impl Deploy {
    pub(crate) const ONE: Deploy = Deploy {
        executors: 1,
        spread: Spread::Even,
        pin: false,
        idle: IdlePolicy::Auto,
    };
    pub(crate) const ALTERNATE: Deploy = Deploy {
        executors: 2,
        spread: Spread::Alternate,
        pin: false,
        idle: IdlePolicy::Auto,
    };
}

/// Roots in flight in the SYN runs (the default bound of `clasp local`).
const IN_FLIGHT_ROOTS: u64 = 4096;
/// 1 in this many roots tracked in the run that tracking's cost is measured against.
pub const SPARSE_SAMPLE: u64 = 64;

/// Runs SYN on an in-process worker with the ingress on a thread.
pub(crate) fn run_syn(
    spec: &Arc<AppSpec>,
    deploy: Deploy,
    records: u64,
    sample_every: u64,
    rate: Option<f64>,
) -> Result<LocalReport, String> {
    // Held until the run's segment is gone.
    let name = segment_name();
    let cfg = LocalConfig {
        segment_name: name.as_str().to_owned(),
        executors: deploy.executors,
        spread: deploy.spread,
        pin: deploy.pin,
        idle: deploy.idle,
        sample_every,
        // The bound counts tracked roots: about 4096 roots in flight whatever the sampling.
        max_in_flight: (IN_FLIGHT_ROOTS / sample_every.max(1)).max(1),
        ..LocalConfig::default()
    };
    let ingress = std::sync::Mutex::new(None);
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let name = seg.segment.name().unwrap_or_default().to_string();
            let spec = spec.clone();
            *ingress.lock().unwrap() = Some(std::thread::spawn(move || {
                run_ingress(
                    &spec,
                    &IngressConfig {
                        segment_name: name,
                        records,
                        seed: 1,
                        rate_per_s: rate,
                        stop: None,
                        source: Default::default(),
                        generator: None,
                    },
                )
            }));
            Ok(())
        },
        || None,
    )
    .map_err(|e| e.to_string())?;
    if let Some(h) = ingress.lock().unwrap().take() {
        h.join()
            .map_err(|_| "the ingress thread panicked".to_string())?
            .map_err(|e| e.to_string())?;
    }
    if !report.errors.is_empty() {
        return Err(report.errors.join("; "));
    }
    // Requests to an executor itself skip its ring (no frame read): count what ran.
    let expected = records * spec.operators.len() as u64;
    let processed: u64 = report.operator_metrics.iter().map(|m| m.processed).sum();
    if processed != expected {
        return Err(format!(
            "SYN processed {processed} requests, expected {expected}"
        ));
    }
    Ok(report)
}

/// (CPU ns per local chained request excluding operator execution and idle spinning, records
/// per second).
pub(crate) fn alpha(r: &LocalReport) -> (f64, f64) {
    let cpu = r.totals["cpu_ns"].saturating_sub(r.totals["idle_spin_ns"]) as f64;
    let exec = r.totals["busy_ns"] as f64;
    let chained = r.totals["local_sent"].max(1) as f64;
    (
        (cpu - exec) / chained,
        r.admitted as f64 / r.elapsed.as_secs_f64().max(1e-9),
    )
}

/// Times the per-request metric updates of an executor (see `Engine::handle` and `route`) on
/// a real worker segment's counters: a request read from a ring that sends one local child.
/// (A request run from the executor's own queue shares its `processed` update with the rest
/// of its run of requests to the same operator, so this is an upper bound for that path.)
fn metrics_cost(spec: &AppSpec) -> Result<f64, String> {
    use clasp_dataplane::runtime::layout::{SegmentSizes, WorkerSegment, scalar};
    let ops = spec.operators.len();
    let sizes = SegmentSizes {
        executors: 1,
        operators: ops,
        ring_bytes: 4096,
        max_frame_bytes: 1024,
    };
    let slots = clasp_dataplane::routing::Slots {
        workers: vec![0],
        executors: 1,
    };
    let table =
        clasp_dataplane::routing::spread(ops, &slots, Spread::Even).map_err(|e| e.to_string())?;
    // Held until `seg` (made after it, so dropped before it) has removed the segment.
    let name = segment_name();
    let seg = WorkerSegment::create(Some(name.as_str()), &sizes, spec.source, 1, 1, &table)
        .map_err(|e| e.to_string())?;
    let m = seg.metrics(0);
    let clock = quanta::Clock::new();
    const N: u64 = 5_000_000;
    let start = std::time::Instant::now();
    let sample = u64::from(clasp_dataplane::runtime::executor::EXEC_TIMING_SAMPLE);
    for i in 0..N {
        let op = (i % ops as u64) as usize;
        m.add(scalar::FRAMES_IN, 1);
        if i % sample == 0 {
            let t0 = clock.raw();
            let ns = clock.delta_as_nanos(t0, clock.raw()) * sample;
            m.add(m.exec_ns(op), ns);
            m.add(scalar::BUSY_NS, ns);
        }
        m.add(m.processed(op), 1);
        m.add(m.edge_local(op, (op + 1) % ops), 1);
        m.add(scalar::LOCAL_SENT, 1);
    }
    let per = start.elapsed().as_nanos() as f64 / N as f64;
    std::hint::black_box(m.get(scalar::FRAMES_IN));
    Ok(per)
}

/// α alone, briefly (`clasp calibrate`): `repetitions` one-executor SYN runs of `records`
/// records; CPU ns per local chained request, as `local_ns_per_request` counts it.
pub fn measure_alpha(records: u64, repetitions: u32) -> Result<Spread3, String> {
    if repetitions == 0 || records == 0 {
        return Err("repetitions and records must be positive".into());
    }
    let spec = Arc::new(apps::builtin("syn").ok_or("the syn app is missing")?);
    let runs = (0..repetitions)
        .map(|_| Ok(alpha(&run_syn(&spec, Deploy::ONE, records, 1, None)?).0))
        .collect::<Result<Vec<f64>, String>>()?;
    Ok(Spread3::of(runs))
}

/// Runs the local dispatch benchmark.
pub fn run(
    cfg: &LocalDispatchConfig,
    mut progress: impl FnMut(u32),
) -> Result<LocalDispatchReport, String> {
    if cfg.repetitions == 0 || cfg.records == 0 {
        return Err("repetitions and records must be positive".into());
    }
    let machine = crate::machine::description();
    let spec = Arc::new(apps::builtin("syn").ok_or("the syn app is missing")?);
    let syn2 = Arc::new(
        AppSpec::from_def(&Registry::builtin(), apps::syn::def(2)).map_err(|e| e.to_string())?,
    );
    let policies = idle_policies();
    let (mut one, mut cross, mut untracked, mut thr1, mut thr2) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut per_policy: Vec<[Vec<f64>; 6]> = policies.iter().map(|_| Default::default()).collect();
    for rep in 0..cfg.repetitions {
        let (a, t) = alpha(&run_syn(&spec, Deploy::ONE, cfg.records, 1, None)?);
        one.push(a);
        thr1.push(t);
        let (a, t) = alpha(&run_syn(&spec, Deploy::ALTERNATE, cfg.records, 1, None)?);
        cross.push(a);
        thr2.push(t);
        let sparse = run_syn(&spec, Deploy::ONE, cfg.records, SPARSE_SAMPLE, None)?;
        untracked.push(alpha(&sparse).0);
        for (policy, series) in policies.iter().zip(&mut per_policy) {
            let sample = idle_sample(&spec, &syn2, *policy, cfg.records)?;
            for (v, s) in sample.into_iter().zip(series.iter_mut()) {
                s.push(v);
            }
        }
        progress(rep + 1);
    }
    let idle: Vec<IdleRow> = (policies.iter().zip(per_policy))
        .map(|(policy, [alone, first, hop, chain, a, spin])| IdleRow {
            policy: policy.to_string(),
            ring_hop_ns: Spread3::of(alone),
            ring_first_hop_ns: Spread3::of(first),
            one_way_ns: Spread3::of(hop),
            chain_us: Spread3::of(chain),
            alpha_ns_per_request: Spread3::of(a),
            idle_spin_ns_per_tree: Spread3::of(spin),
        })
        .collect();
    let tracking = Spread3::of(one.iter().zip(&untracked).map(|(a, u)| a - u).collect());
    let one = Spread3::of(one);
    Ok(LocalDispatchReport {
        machine,
        local_ns_per_request: one.median,
        local_ns_per_request_spread: one,
        cross_core_ns_per_request: Spread3::of(cross),
        tracking_ns_per_request: tracking.median,
        tracking_ns_per_request_spread: tracking,
        local_one_way_ns: idle[0].one_way_ns.median,
        idle,
        metrics_ns_per_request: metrics_cost(&spec)?,
        syn_throughput_per_s: Spread3::of(thr1),
        syn_throughput_two_executors_per_s: Spread3::of(thr2),
        records: cfg.records,
        repetitions: cfg.repetitions,
    })
}

/// The report as text.
pub fn table(r: &LocalDispatchReport) -> String {
    format!(
        "machine: {}\nlocal chained request (α), one executor: {:.1} ns CPU [{:.1}..{:.1}]\n\
         local chained request across cores, two executors: {:.1} ns CPU [{:.1}..{:.1}]\n\
         of which exact latency tracking: {:.1} ns [{:.1}..{:.1}]{}, per-request metrics: {:.1} ns\n\
         SYN throughput, one executor: {:.0} records/s; two executors: {:.0} records/s\n\
         {}({} records, median of {} repetitions)\n",
        r.machine,
        r.local_ns_per_request,
        r.local_ns_per_request_spread.min,
        r.local_ns_per_request_spread.max,
        r.cross_core_ns_per_request.median,
        r.cross_core_ns_per_request.min,
        r.cross_core_ns_per_request.max,
        r.tracking_ns_per_request,
        r.tracking_ns_per_request_spread.min,
        r.tracking_ns_per_request_spread.max,
        if r.tracking_ns_per_request_spread.min < 0.0 && r.tracking_ns_per_request_spread.max > 0.0
        {
            " (within the noise)"
        } else {
            ""
        },
        r.metrics_ns_per_request,
        r.syn_throughput_per_s.median,
        r.syn_throughput_two_executors_per_s.median,
        idle_table(r),
        r.records,
        r.repetitions
    )
}
