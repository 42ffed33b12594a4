//! `clasp bench wc`: word count on clasp against timely dataflow, on the same cores and the
//! same sentences, side by side in one run.
//!
//! - Input: sentences `0..records` of the WC generator (seed [`SEED`]), generated once before
//!   anything is timed ([`Pregenerated`]) and read by both systems.
//! - clasp: the `wc` app as `clasp local --app wc --executors E` runs it — a worker with E
//!   executor threads over shared-memory rings, fed by an ingress (here a thread, there a
//!   process) through the real worker path, every root's latency tracked, at most 4096 roots
//!   in flight. Throughput is admitted sentences over the time from the first admission to
//!   the last completion.
//! - timely (with the `baselines` feature): E timely workers ([`crate::wc_timely`]); its
//!   throughput is sentences over the time from starting the workers to the last one ending.
//! - Honesty check, every repetition: both counted the same number of words and their
//!   `(word, count)` outputs have the same order-free digest; a mismatch is an error.
//!
//! The two alternate within each repetition (clasp, then timely) so drift on a shared machine
//! hits both; the median and spread of each are reported with their ratio.
//!
//! Each also reports the CPU it used per sentence: user + system time of the whole process
//! over the run, from the start of its threads to their end (clasp's ingress and coordinator
//! threads included). On a shared 2-vCPU guest the wall-clock figure also measures how the
//! scheduler placed the threads; CPU time says what the work cost, and where the cores sat
//! idle it shows as a lower figure than the throughput would suggest. clasp's is also split
//! by thread — executors, ingress, coordinator — from each thread's own CPU clock, so a gap
//! can be placed without a profiler.

mod table;

pub use table::table;

use crate::dispatch_local::Spread3;
use clasp_dataplane::clock::thread_cpu_ns;
use clasp_dataplane::cpu_usage::process_cpu_ns;
use clasp_dataplane::routing::Spread;
use clasp_dataplane::runtime::ingress::{IngressConfig, run_ingress};
use clasp_dataplane::runtime::{IdlePolicy, LocalConfig, LocalReport, run_local_worker};
use clasp_operators::digest::{Digest, DigestDomain, domain_seed};
use clasp_operators::generate::{Generator, Pregenerated};
use clasp_operators::{AppSpec, apps};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The generator seed of the benchmark's sentences.
pub const SEED: u64 = 1;
/// Roots in flight in clasp's runs (`clasp local`'s default).
const MAX_IN_FLIGHT: u64 = 4096;

/// Settings.
#[derive(Debug, Clone)]
pub struct WcBenchConfig {
    /// Sentences per run.
    pub records: u64,
    /// Worker (timely) and executor (clasp) counts to measure.
    pub executors: Vec<usize>,
    /// Interleaved repetitions.
    pub repetitions: u32,
    /// Run clasp.
    pub clasp: bool,
    /// Run timely (where built).
    pub timely: bool,
}

/// One executor count's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WcRow {
    /// clasp executors = timely workers.
    pub executors: usize,
    /// clasp's sentences per second (`None`: not run).
    pub clasp_sentences_per_s: Option<Spread3>,
    /// timely's sentences per second (`None`: not run, or built without the `baselines`
    /// feature).
    pub timely_sentences_per_s: Option<Spread3>,
    /// clasp / timely, of the medians.
    pub ratio: Option<f64>,
    /// clasp's CPU per sentence, µs: user + system of the whole process over each run.
    pub clasp_cpu_us_per_sentence: Option<Spread3>,
    /// The part of clasp's that its executor threads used (their own CPU clocks); the rest
    /// is the ingress, the coordinator and the run's setup.
    pub clasp_executor_cpu_us_per_sentence: Option<Spread3>,
    /// The part its ingress thread used (its own CPU clock, from its start to its end).
    pub clasp_ingress_cpu_us_per_sentence: Option<Spread3>,
    /// The part the coordinator's thread used over the whole run, the worker's setup and
    /// teardown included (its own CPU clock).
    pub clasp_coordinator_cpu_us_per_sentence: Option<Spread3>,
    /// timely's, measured the same way.
    pub timely_cpu_us_per_sentence: Option<Spread3>,
    /// Cores clasp kept busy: the process's CPU seconds ÷ wall seconds over each run (its
    /// setup included in both). Where the two systems use about the same CPU a sentence, this
    /// is what tells their throughputs apart.
    pub clasp_cores_busy: Option<Spread3>,
    /// timely's, measured the same way.
    pub timely_cores_busy: Option<Spread3>,
    /// clasp's end-to-end latency p50 of the median-throughput run, µs.
    pub clasp_latency_p50_us: Option<f64>,
    /// Words counted in every run.
    pub words: u64,
    /// `Some(true)`: both ran and timely's words and output digest equalled clasp's in every
    /// repetition (a difference is an error); `None`: not compared.
    pub digests_equal: Option<bool>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct WcBenchReport {
    /// CPU, cores, kernel.
    pub machine: String,
    /// Sentences per run.
    pub records: u64,
    /// Repetitions.
    pub repetitions: u32,
    /// Whether the timely baseline is in this build.
    pub timely_built: bool,
    /// Per executor count.
    pub rows: Vec<WcRow>,
}

/// What one timely run did ([`crate::wc_timely`]).
#[derive(Debug, Clone, Copy)]
pub struct TimelyRun {
    /// From the start of the workers to the last one finishing.
    pub elapsed: std::time::Duration,
    /// Words counted (the count operator's inputs).
    pub words: u64,
    /// Digest of every `(word, count)` output.
    pub outputs: Digest,
}

/// What one clasp run counted.
struct ClaspRun {
    sentences_per_s: f64,
    cpu_us_per_sentence: f64,
    /// CPU seconds ÷ wall seconds of the whole run (setup included in both).
    cores_busy: f64,
    executor_cpu_us_per_sentence: f64,
    ingress_cpu_us_per_sentence: f64,
    coordinator_cpu_us_per_sentence: f64,
    latency_p50_us: f64,
    words: u64,
    outputs: Digest,
}

/// One timely run's figures.
struct TimelyFigures {
    sentences_per_s: f64,
    cpu_us_per_sentence: f64,
    cores_busy: f64,
}

fn segment_name() -> crate::segments::SegmentName {
    crate::segments::new_name("wc")
}

/// Runs WC on an in-process worker of `executors` executors, the ingress on a thread reading
/// `records`.
fn run_clasp(
    spec: &Arc<AppSpec>,
    records: &Arc<Pregenerated>,
    sentences: u64,
    executors: usize,
) -> Result<ClaspRun, String> {
    // Held until the run's segment is gone.
    let name = segment_name();
    let cfg = LocalConfig {
        segment_name: name.as_str().to_owned(),
        executors,
        spread: Spread::Even,
        idle: IdlePolicy::Auto,
        sample_every: 1,
        max_in_flight: MAX_IN_FLIGHT,
        ..LocalConfig::default()
    };
    let generator: Arc<dyn Generator> = records.clone();
    let ingress = std::sync::Mutex::new(None);
    // The coordinator runs on this thread, inside `run_local_worker`.
    let coordinator_from_ns = thread_cpu_ns();
    let report = run_local_worker(
        spec.clone(),
        &cfg,
        |seg| {
            let cfg = IngressConfig {
                segment_name: seg.segment.name().unwrap_or_default().to_string(),
                records: sentences,
                seed: SEED,
                rate_per_s: None,
                stop: None,
                source: Default::default(),
                generator: Some(generator.clone()),
            };
            let spec = spec.clone();
            let handle = std::thread::spawn(move || {
                let result = run_ingress(&spec, &cfg);
                (result, thread_cpu_ns())
            });
            *ingress.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
            Ok(())
        },
        || None,
    )
    .map_err(|e| e.to_string())?;
    let coordinator_ns = thread_cpu_ns().saturating_sub(coordinator_from_ns);
    let mut ingress_ns = 0;
    if let Some(h) = ingress.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let (result, cpu_ns) = h
            .join()
            .map_err(|_| "the ingress thread panicked".to_string())?;
        result.map_err(|e| e.to_string())?;
        ingress_ns = cpu_ns;
    }
    clasp_run(spec, &report, sentences, ingress_ns, coordinator_ns)
}

/// The figures of a finished clasp run, checked: no faults, every sentence admitted.
/// `ingress_ns` and `coordinator_ns`: those threads' CPU over the run.
fn clasp_run(
    spec: &AppSpec,
    report: &LocalReport,
    sentences: u64,
    ingress_ns: u64,
    coordinator_ns: u64,
) -> Result<ClaspRun, String> {
    let per_sentence_us = |ns: u64| ns as f64 / 1e3 / sentences.max(1) as f64;
    if !report.errors.is_empty() {
        return Err(report.errors.join("; "));
    }
    if report.admitted != sentences {
        return Err(format!(
            "clasp admitted {} of {sentences} sentences",
            report.admitted
        ));
    }
    let count = spec
        .operators
        .iter()
        .position(|o| o.name == "count")
        .ok_or("the wc app has no count operator")?;
    let summary = &report.summaries[count];
    Ok(ClaspRun {
        sentences_per_s: report.admitted as f64 / report.elapsed.as_secs_f64().max(1e-9),
        cpu_us_per_sentence: 0.0,
        cores_busy: 0.0,
        executor_cpu_us_per_sentence: per_sentence_us(
            report.totals.get("cpu_ns").copied().unwrap_or(0),
        ),
        ingress_cpu_us_per_sentence: per_sentence_us(ingress_ns),
        coordinator_cpu_us_per_sentence: per_sentence_us(coordinator_ns),
        latency_p50_us: report.latency.p50,
        words: summary.processed,
        outputs: summary.outputs,
    })
}

/// Runs the benchmark. `progress(rep)` after each repetition.
pub fn run(cfg: &WcBenchConfig, mut progress: impl FnMut(u32)) -> Result<WcBenchReport, String> {
    if cfg.repetitions == 0 || cfg.records == 0 || cfg.executors.is_empty() {
        return Err("repetitions, records and executor counts must be positive".into());
    }
    if cfg.records > u64::from(u32::MAX) {
        return Err(format!("at most {} records", u32::MAX));
    }
    if let Some(&e) = cfg.executors.iter().find(|&&e| e == 0 || e > 64) {
        return Err(format!("executor count {e} is outside 1..=64"));
    }
    let spec = Arc::new(apps::builtin("wc").ok_or("the wc app is missing")?);
    let generator = clasp_operators::generate::generator(&spec.generator, SEED)
        .ok_or("the wc app has no generator")?;
    let records = Arc::new(Pregenerated::new(generator, cfg.records));
    let output_seed = domain_seed("count", DigestDomain::Output);
    let mut runs: Vec<(Vec<ClaspRun>, Vec<TimelyFigures>, u64)> =
        cfg.executors.iter().map(|_| (vec![], vec![], 0)).collect();
    let per_sentence_us = |cpu_before_ns: u64| {
        process_cpu_ns().saturating_sub(cpu_before_ns) as f64 / 1e3 / cfg.records as f64
    };
    // CPU seconds a second over the same window as the CPU (setup included in both).
    let cores_busy = |cpu_before_ns: u64, since: Instant| {
        process_cpu_ns().saturating_sub(cpu_before_ns) as f64
            / 1e9
            / since.elapsed().as_secs_f64().max(1e-9)
    };
    for rep in 0..cfg.repetitions {
        for (&executors, (clasp, timely, words)) in cfg.executors.iter().zip(&mut runs) {
            let (cpu_ns, since) = (process_cpu_ns(), Instant::now());
            let c = cfg
                .clasp
                .then(|| run_clasp(&spec, &records, cfg.records, executors))
                .transpose()?
                .map(|c| ClaspRun {
                    cores_busy: cores_busy(cpu_ns, since),
                    cpu_us_per_sentence: per_sentence_us(cpu_ns),
                    ..c
                });
            let (cpu_ns, since) = (process_cpu_ns(), Instant::now());
            let t = match cfg.timely {
                true => baseline(&records, cfg.records, executors, output_seed)?,
                false => None,
            };
            let t_cores = cores_busy(cpu_ns, since);
            let t_cpu_us = per_sentence_us(cpu_ns);
            if let (Some(c), Some(t)) = (&c, &t) {
                check_equal(executors, c, t)?;
            }
            if let Some(t) = t {
                *words = t.words;
                let per_s = cfg.records as f64 / t.elapsed.as_secs_f64().max(1e-9);
                timely.push(TimelyFigures {
                    sentences_per_s: per_s,
                    cpu_us_per_sentence: t_cpu_us,
                    cores_busy: t_cores,
                });
            }
            if let Some(c) = c {
                *words = c.words;
                clasp.push(c);
            }
        }
        progress(rep + 1);
    }
    let compared = cfg.clasp && cfg.timely && cfg!(feature = "baselines");
    let rows =
        (cfg.executors.iter().zip(runs)).map(|(&e, (c, t, words))| row(e, c, t, words, compared));
    Ok(WcBenchReport {
        machine: crate::machine::description(),
        records: cfg.records,
        repetitions: cfg.repetitions,
        timely_built: cfg!(feature = "baselines"),
        rows: rows.collect(),
    })
}

/// The honesty check: both counted the same words and output the same `(word, count)`s.
fn check_equal(executors: usize, c: &ClaspRun, t: &TimelyRun) -> Result<(), String> {
    if t.words != c.words {
        return Err(format!(
            "{executors} executors: clasp counted {} words, timely {}",
            c.words, t.words
        ));
    }
    if t.outputs != c.outputs {
        return Err(format!(
            "{executors} executors: clasp's and timely's (word, count) outputs differ \
             (digests {:?} and {:?})",
            c.outputs, t.outputs
        ));
    }
    Ok(())
}

/// One row from the runs of one executor count (an error in any run ended the benchmark,
/// so `compared` runs all had equal outputs).
fn row(
    executors: usize,
    mut clasp: Vec<ClaspRun>,
    timely: Vec<TimelyFigures>,
    words: u64,
    compared: bool,
) -> WcRow {
    clasp.sort_by(|a, b| a.sentences_per_s.total_cmp(&b.sentences_per_s));
    let spread = |v: Vec<f64>| (!v.is_empty()).then(|| Spread3::of(v));
    let clasp_per_s = spread(clasp.iter().map(|r| r.sentences_per_s).collect());
    let timely_per_s = spread(timely.iter().map(|t| t.sentences_per_s).collect());
    WcRow {
        clasp_cpu_us_per_sentence: spread(clasp.iter().map(|r| r.cpu_us_per_sentence).collect()),
        clasp_executor_cpu_us_per_sentence: spread(
            clasp
                .iter()
                .map(|r| r.executor_cpu_us_per_sentence)
                .collect(),
        ),
        clasp_ingress_cpu_us_per_sentence: spread(
            clasp
                .iter()
                .map(|r| r.ingress_cpu_us_per_sentence)
                .collect(),
        ),
        clasp_coordinator_cpu_us_per_sentence: spread(
            clasp
                .iter()
                .map(|r| r.coordinator_cpu_us_per_sentence)
                .collect(),
        ),
        timely_cpu_us_per_sentence: spread(timely.iter().map(|t| t.cpu_us_per_sentence).collect()),
        clasp_cores_busy: spread(clasp.iter().map(|r| r.cores_busy).collect()),
        timely_cores_busy: spread(timely.iter().map(|t| t.cores_busy).collect()),
        executors,
        ratio: clasp_per_s
            .zip(timely_per_s)
            .map(|(c, t)| c.median / t.median),
        clasp_sentences_per_s: clasp_per_s,
        timely_sentences_per_s: timely_per_s,
        clasp_latency_p50_us: clasp.get(clasp.len() / 2).map(|r| r.latency_p50_us),
        words,
        digests_equal: compared.then_some(true),
    }
}

/// The timely run, where the baseline is built.
#[cfg(feature = "baselines")]
fn baseline(
    records: &Arc<Pregenerated>,
    sentences: u64,
    workers: usize,
    output_seed: u64,
) -> Result<Option<TimelyRun>, String> {
    crate::wc_timely::run(records, sentences as usize, workers, output_seed).map(Some)
}

/// No timely run: the baseline is not built.
#[cfg(not(feature = "baselines"))]
fn baseline(_: &Arc<Pregenerated>, _: u64, _: usize, _: u64) -> Result<Option<TimelyRun>, String> {
    Ok(None)
}
